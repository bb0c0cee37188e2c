import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// Sync code that subclasses CloudKit's operations, ported mechanically: a fetch of zone changes
// built in its own designated initializer (`super.init()`, then `database`, `recordZoneIDs`,
// `optionsByRecordZoneID` and the older blocks), operations that set their blocks in an
// overridden `main()` before `super.main()`, a `CKModifyRecordsOperation` subclass with its own
// initializer, and the older `CKFetchRecordZoneChangesOptions` filled in by a convenience
// initializer in an extension. The operations run on the app's own `OperationQueue`, chained
// with dependencies. The CloudKit original is in the comment above each type.

/// What the subclasses collected, guarded for the operations' threads.
final class Tally: @unchecked Sendable {
    private let lock = NSLock()
    private var _items: [String] = []
    var items: [String] { lock.withLock { _items } }
    func add(_ item: String) { lock.withLock { _items.append(item) } }
}

// extension CKFetchRecordZoneChangesOptions { convenience init(token: CKServerChangeToken?, keys: [String]?) }
extension FetchRecordZoneChangesOptions {
    convenience init(token: ServerChangeToken?, keys: [String]?) {
        self.init()
        previousServerChangeToken = token
        desiredKeys = keys
    }
}

// class ZoneChangesFetch: CKFetchRecordZoneChangesOperation {
//     init(zoneID: CKRecordZoneID, database: CKDatabase, token: CKServerChangeToken?, completion: …) { …; super.init(); … }
final class ZoneChangesFetch: FetchRecordZoneChangesOperation, @unchecked Sendable {
    private(set) var changed: [Record] = []
    private(set) var deleted: [Record.ID] = []
    private(set) var latestToken: ServerChangeToken?

    init(zoneID: RecordZoneID, database: Database, token: ServerChangeToken?, completion: @escaping (Error?) -> Void) {
        latestToken = token
        super.init()
        self.database = database
        recordZoneIDs = [zoneID]
        optionsByRecordZoneID = [zoneID: FetchRecordZoneChangesOptions(token: token, keys: nil)]
        recordChangedBlock = { [unowned self] record in changed.append(record) }
        recordWithIDWasDeletedBlock = { [unowned self] id, _ in deleted.append(id) }
        recordZoneFetchCompletionBlock = { [unowned self] _, token, _, _, error in
            if error == nil { latestToken = token }
        }
        fetchRecordZoneChangesCompletionBlock = { error in completion(error) }
    }
}

// final class LoggingFetch: CKFetchRecordZoneChangesOperation {
//     override func main() { setOperationBlocks(); super.main() }
final class LoggingFetch: FetchRecordZoneChangesOperation, @unchecked Sendable {
    let log = Tally()

    override func main() {
        log.add("main \(recordZoneIDs?.count ?? 0) zone(s)")
        recordChangedBlock = { [log] record in log.add("changed \(record.recordID.recordName)") }
        recordZoneFetchCompletionBlock = { [log] zoneID, _, _, _, _ in log.add("done \(zoneID.zoneName)") }
        super.main()
    }
}

// class SaveNotes: CKModifyRecordsOperation { init(notes: [CKRecord]) { super.init(); recordsToSave = notes; … } }
final class SaveNotes: ModifyRecordsOperation, @unchecked Sendable {
    let saved = Tally()

    init(notes: [Record]) {
        super.init()
        recordsToSave = notes
        savePolicy = .changedKeys
        perRecordCompletionBlock = { [saved] record, error in
            if error == nil { saved.add(record.recordID.recordName) }
        }
    }
}

// class AllNotesQuery: CKQueryOperation { override func main() { query = CKQuery(…); recordFetchedBlock = …; super.main() } }
final class AllNotesQuery: QueryOperation, @unchecked Sendable {
    let titles = Tally()

    override func main() {
        query = Query(recordType: "Note", predicate: QueryPredicate(value: true))
        query?.sortDescriptors = [RecordSortDescriptor(key: "title", ascending: true)]
        recordFetchedBlock = { [titles] record in titles.add(record["title"] as? String ?? "") }
        super.main()
    }
}

@Suite("CloudKit operations subclassed, as sync code writes them")
struct OperationSubclassTests {
    @Test("subclasses with their own initializers and main() run on the app's OperationQueue", arguments: TestEngine.all)
    func subclassedOperations(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let zone = try await database.save(RecordZone(zoneName: "Notes"))
            let queue = OperationQueue()
            queue.maxConcurrentOperationCount = 1

            let notes = ["b", "a"].map { name -> Record in
                let note = Record(recordType: "Note", recordID: RecordID(recordName: name, zoneID: zone.zoneID))
                note["title"] = "Note \(name)"
                return note
            }
            let save = SaveNotes(notes: notes)
            save.database = database
            let fetchError = Collected<Error?>(nil)
            let fetch = ZoneChangesFetch(zoneID: zone.zoneID, database: database, token: nil) { fetchError.value = $0 }
            fetch.addDependency(save)
            let logging = LoggingFetch(recordZoneIDs: [zone.zoneID], optionsByRecordZoneID: nil)
            logging.database = database
            logging.addDependency(fetch)
            let query = AllNotesQuery()
            query.database = database
            query.zoneID = zone.zoneID
            query.addDependency(logging)
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let done = BlockOperation { continuation.resume() }
                done.addDependency(query)
                queue.addOperations([save, fetch, logging, query, done], waitUntilFinished: false)
            }

            #expect(save.saved.items.sorted() == ["a", "b"])
            #expect(fetchError.value == nil)
            #expect(fetch.changed.map(\.recordID.recordName).sorted() == ["a", "b"])
            #expect(fetch.latestToken != nil, "the zone's final token reached the subclass's own property")
            #expect(logging.log.items.first == "main 1 zone(s)", "the override of main() ran first")
            #expect(logging.log.items.dropFirst().sorted() == ["changed a", "changed b", "done Notes"])
            #expect(query.titles.items == ["Note a", "Note b"], "the query main() set before super.main() ran")

            // The next run starts from the kept token and sees only what changed since.
            _ = try await database.deleteRecord(withID: RecordID(recordName: "a", zoneID: zone.zoneID))
            let next = ZoneChangesFetch(zoneID: zone.zoneID, database: database, token: fetch.latestToken) { _ in }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let done = BlockOperation { continuation.resume() }
                done.addDependency(next)
                queue.addOperations([next, done], waitUntilFinished: false)
            }
            #expect(next.changed.isEmpty && next.deleted.map(\.recordName) == ["a"])
        }
    }

    // CKDatabaseScope, CKRecordZoneCapabilities, CKQuerySubscriptionOptions, … in older code
    @Test("the pre-Swift 4.2 names of scopes, capabilities and subscription options", arguments: TestEngine.all)
    func olderNames(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.database(with: DatabaseScope.private)
            #expect(database.databaseScope == .private)
            let zone = try await database.save(RecordZone(zoneName: "Notes"))
            let capabilities: RecordZoneCapabilities = zone.capabilities
            #expect(capabilities.contains(.atomic) && capabilities.contains(.fetchChanges))

            let options: QuerySubscriptionOptions = [.firesOnRecordCreation, .firesOnRecordUpdate]
            let subscription = QuerySubscription(recordType: "Note", predicate: QueryPredicate(value: true), subscriptionID: "notes", options: options)
            subscription.notificationInfo = NotificationInfo()
            let saved = try await database.save(subscription)
            let type: SubscriptionType = saved.subscriptionType
            #expect(type == .query)

            let configuration = FetchRecordZoneChangesConfiguration()
            configuration.desiredKeys = ["title"]
            let fetch = FetchRecordZoneChangesOperation(recordZoneIDs: [zone.zoneID], configurationsByRecordZoneID: [zone.zoneID: configuration])
            #expect(fetch.configurationsByRecordZoneID?[zone.zoneID]?.desiredKeys == ["title"])
            let reason: QueryNotificationReason = .recordCreated
            let kind: NotificationType = .query
            #expect(reason.rawValue == 1 && kind.rawValue == 1)
        }
    }
}
