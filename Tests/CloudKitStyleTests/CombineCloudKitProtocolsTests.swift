import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// The protocols of CombineCloudKit (chris-araman/CombineCloudKit:
// Sources/CombineCloudKit/Protocols/CCKOperation.swift, CCKDatabaseOperation.swift,
// CCKFetchRecordsOperation.swift, CCKModifyRecordsOperation.swift,
// CCKFetchRecordZonesOperation.swift, CCKModifyRecordZonesOperation.swift,
// CCKFetchSubscriptionsOperation.swift, CCKModifySubscriptionsOperation.swift,
// CCKQueryOperation.swift, CCKContainer.swift and CCKDatabase.swift), ported mechanically.
// The library makes CloudKit's own classes conform, with empty extensions, to protocols that
// restate their properties and completion-handler methods with CloudKit's exact types, so a test
// double can stand in for them; a conformance compiles only if each Stratus declaration has the
// very type CloudKit's has (`configuration` an implicitly unwrapped optional, the older blocks'
// optional arguments). Its completion handlers are written without `@Sendable`, as CloudKit's
// were before the iOS 17 SDK; CloudKit's are `@Sendable` now, and so are Stratus's, so against
// either such a conformance warns ("sendability of function types … does not match"): the
// protocols here say `@Sendable`, as CloudKit's current SDK asks. Combine is not on Linux: the
// publishers become the callbacks they wrap. The CloudKit original is in the comments.

// extension CKOperation: CCKOperation {}
// protocol CCKOperation: AnyObject {
//   var configuration: CKOperation.Configuration! { get set }
//   func start()
//   func cancel()
// }
extension DatabaseOperation: CCKOperation {}
protocol CCKOperation: AnyObject {
    var configuration: DatabaseOperation.Configuration! { get set }
    func start()
    func cancel()
}

extension DatabaseOperation: CCKDatabaseOperation {}
protocol CCKDatabaseOperation: CCKOperation {}

extension FetchRecordsOperation: CCKFetchRecordsOperation {}
protocol CCKFetchRecordsOperation: CCKDatabaseOperation {
    var desiredKeys: [Record.FieldKey]? { get set }
    var perRecordProgressBlock: ((Record.ID, Double) -> Void)? { get set }
    var perRecordCompletionBlock: ((Record?, Record.ID?, Error?) -> Void)? { get set }
    var fetchRecordsCompletionBlock: (([Record.ID: Record]?, Error?) -> Void)? { get set }
}

extension ModifyRecordsOperation: CCKModifyRecordsOperation {}
protocol CCKModifyRecordsOperation: CCKDatabaseOperation {
    var isAtomic: Bool { get set }
    var savePolicy: ModifyRecordsOperation.RecordSavePolicy { get set }
    var perRecordProgressBlock: ((Record, Double) -> Void)? { get set }
    var perRecordCompletionBlock: ((Record, Error?) -> Void)? { get set }
    var modifyRecordsCompletionBlock: (([Record]?, [Record.ID]?, Error?) -> Void)? { get set }
}

extension FetchRecordZonesOperation: CCKFetchRecordZonesOperation {}
protocol CCKFetchRecordZonesOperation: CCKDatabaseOperation {
    var fetchRecordZonesCompletionBlock: (([RecordZone.ID: RecordZone]?, Error?) -> Void)? { get set }
}

extension ModifyRecordZonesOperation: CCKModifyRecordZonesOperation {}
protocol CCKModifyRecordZonesOperation: CCKDatabaseOperation {
    var modifyRecordZonesCompletionBlock: (([RecordZone]?, [RecordZone.ID]?, Error?) -> Void)? { get set }
}

extension FetchSubscriptionsOperation: CCKFetchSubscriptionsOperation {}
protocol CCKFetchSubscriptionsOperation: CCKDatabaseOperation {
    var fetchSubscriptionCompletionBlock: (([Subscription.ID: Subscription]?, Error?) -> Void)? { get set }
}

extension ModifySubscriptionsOperation: CCKModifySubscriptionsOperation {}
protocol CCKModifySubscriptionsOperation: CCKDatabaseOperation {
    var modifySubscriptionsCompletionBlock: (([Subscription]?, [Subscription.ID]?, Error?) -> Void)? { get set }
}

extension QueryOperation: CCKQueryOperation {}
protocol CCKQueryOperation: CCKDatabaseOperation {
    var query: Query? { get set }
    var cursor: QueryOperation.Cursor? { get set }
    var desiredKeys: [Record.FieldKey]? { get set }
    var zoneID: RecordZone.ID? { get set }
    var resultsLimit: Int { get set }
    var recordFetchedBlock: ((Record) -> Void)? { get set }
    var queryCompletionBlock: ((QueryOperation.Cursor?, Error?) -> Void)? { get set }
}

extension Container: CCKContainer {}
public protocol CCKContainer {
    func accountStatus(completionHandler: @escaping @Sendable (AccountStatus, Error?) -> Void)
}

extension Database: CCKDatabase {}
public protocol CCKDatabase {
    func delete(withRecordID recordID: Record.ID, completionHandler: @escaping @Sendable (Record.ID?, Error?) -> Void)
    func delete(withRecordZoneID zoneID: RecordZone.ID, completionHandler: @escaping @Sendable (RecordZone.ID?, Error?) -> Void)
    func delete(withSubscriptionID subscriptionID: Subscription.ID, completionHandler: @escaping @Sendable (String?, Error?) -> Void)
    func fetch(withRecordID recordID: Record.ID, completionHandler: @escaping @Sendable (Record?, Error?) -> Void)
    func fetch(withRecordZoneID zoneID: RecordZone.ID, completionHandler: @escaping @Sendable (RecordZone?, Error?) -> Void)
    func fetch(withSubscriptionID subscriptionID: Subscription.ID, completionHandler: @escaping @Sendable (Subscription?, Error?) -> Void)
    func fetchAllRecordZones(completionHandler: @escaping @Sendable ([RecordZone]?, Error?) -> Void)
    func fetchAllSubscriptions(completionHandler: @escaping @Sendable ([Subscription]?, Error?) -> Void)
    func perform(_ query: Query, inZoneWith zoneID: RecordZone.ID?, completionHandler: @escaping @Sendable ([Record]?, Error?) -> Void)
    func save(_ record: Record, completionHandler: @escaping @Sendable (Record?, Error?) -> Void)
    func save(_ zone: RecordZone, completionHandler: @escaping @Sendable (RecordZone?, Error?) -> Void)
    func save(_ subscription: Subscription, completionHandler: @escaping @Sendable (Subscription?, Error?) -> Void)
}

extension CCKDatabase {
    // guard let database = self as? CKDatabase, let dbOperation = operation as? CKDatabaseOperation
    // else { operation.start(); return }
    // database.add(dbOperation)
    func add(_ operation: CCKDatabaseOperation) {
        guard let database = self as? Database, let dbOperation = operation as? DatabaseOperation else {
            operation.start()
            return
        }
        database.add(dbOperation)
    }

    // The Combine publishers' bodies, without the publishers: an operation's older completion
    // block hands its dictionary (or its saved and deleted lists) on.
    func fetchOutputs<Output, Ignored>(
        _ operation: CCKDatabaseOperation,
        _ configuration: DatabaseOperation.Configuration? = nil,
        _ setCompletion: (@escaping ([Ignored: Output]?, Error?) -> Void) -> Void,
        then deliver: @escaping ([Output]?, Error?) -> Void
    ) {
        if configuration != nil {
            operation.configuration = configuration
        }
        setCompletion { outputs, error in
            guard let outputs = outputs, error == nil else {
                deliver(nil, error!)
                return
            }
            deliver(Array(outputs.values), nil)
        }
        add(operation)
    }

    func modifyOutputs<Output, OutputID>(
        _ operation: CCKDatabaseOperation,
        _ configuration: DatabaseOperation.Configuration? = nil,
        _ setCompletion: (@escaping ([Output]?, [OutputID]?, Error?) -> Void) -> Void,
        then deliver: @escaping ([(Output?, OutputID?)]?, Error?) -> Void
    ) {
        if configuration != nil {
            operation.configuration = configuration
        }
        setCompletion { saved, deleted, error in
            guard error == nil else {
                deliver(nil, error!)
                return
            }
            var outputs: [(Output?, OutputID?)] = []
            for output in saved ?? [] { outputs.append((output, nil)) }
            for outputID in deleted ?? [] { outputs.append((nil, outputID)) }
            deliver(outputs, nil)
        }
        add(operation)
    }
}

// CKDatabase+CKRecord.swift: `saveAtBackgroundPriority`, `save(records:…)`, `fetch(recordIDs:…)`
// and `delete(recordIDs:…)` build the operation, set the older block through the protocol, and
// hand it to `publisherFromModify` / `publisherFromFetch`.
extension CCKDatabase {
    func save(records: [Record], atomically isAtomic: Bool = true, withConfiguration configuration: DatabaseOperation.Configuration? = nil,
              completion: @escaping ([(Record?, Record.ID?)]?, Error?) -> Void) {
        let operation = ModifyRecordsOperation(recordsToSave: records, recordIDsToDelete: nil)
        operation.isAtomic = isAtomic
        operation.savePolicy = .ifServerRecordUnchanged
        modifyOutputs(operation, configuration, { operation.modifyRecordsCompletionBlock = $0 }, then: completion)
    }

    func fetch(recordIDs: [Record.ID], desiredKeys: [Record.FieldKey]? = nil, withConfiguration configuration: DatabaseOperation.Configuration? = nil,
               completion: @escaping ([Record]?, Error?) -> Void) {
        let operation = FetchRecordsOperation(recordIDs: recordIDs)
        operation.desiredKeys = desiredKeys
        fetchOutputs(operation, configuration, { operation.fetchRecordsCompletionBlock = $0 }, then: completion)
    }

    func fetchAllZones(completion: @escaping ([RecordZone]?, Error?) -> Void) {
        let operation = FetchRecordZonesOperation.fetchAllRecordZonesOperation()
        fetchOutputs(operation, nil, { operation.fetchRecordZonesCompletionBlock = $0 }, then: completion)
    }

    func delete(recordZoneIDs: [RecordZone.ID], completion: @escaping ([(RecordZone?, RecordZone.ID?)]?, Error?) -> Void) {
        let operation = ModifyRecordZonesOperation(recordZonesToSave: nil, recordZoneIDsToDelete: recordZoneIDs)
        modifyOutputs(operation, nil, { operation.modifyRecordZonesCompletionBlock = $0 }, then: completion)
    }
}

/// A database double that conforms to the same protocol, as CombineCloudKit's tests do: it
/// answers every call from a dictionary.
final class MockDatabase: CCKDatabase, @unchecked Sendable {
    private let lock = NSLock()
    private var records: [Record.ID: Record] = [:]

    func delete(withRecordID recordID: Record.ID, completionHandler: @escaping @Sendable (Record.ID?, Error?) -> Void) {
        let removed = lock.withLock { records.removeValue(forKey: recordID) }
        completionHandler(removed == nil ? nil : recordID, removed == nil ? StratusError(.unknownItem) : nil)
    }
    func delete(withRecordZoneID zoneID: RecordZone.ID, completionHandler: @escaping @Sendable (RecordZone.ID?, Error?) -> Void) {
        completionHandler(zoneID, nil)
    }
    func delete(withSubscriptionID subscriptionID: Subscription.ID, completionHandler: @escaping @Sendable (String?, Error?) -> Void) {
        completionHandler(subscriptionID, nil)
    }
    func fetch(withRecordID recordID: Record.ID, completionHandler: @escaping @Sendable (Record?, Error?) -> Void) {
        let record = lock.withLock { records[recordID] }
        completionHandler(record, record == nil ? StratusError(.unknownItem) : nil)
    }
    func fetch(withRecordZoneID zoneID: RecordZone.ID, completionHandler: @escaping @Sendable (RecordZone?, Error?) -> Void) {
        completionHandler(RecordZone(zoneID: zoneID), nil)
    }
    func fetch(withSubscriptionID subscriptionID: Subscription.ID, completionHandler: @escaping @Sendable (Subscription?, Error?) -> Void) {
        completionHandler(nil, StratusError(.unknownItem))
    }
    func fetchAllRecordZones(completionHandler: @escaping @Sendable ([RecordZone]?, Error?) -> Void) {
        completionHandler([RecordZone.default()], nil)
    }
    func fetchAllSubscriptions(completionHandler: @escaping @Sendable ([Subscription]?, Error?) -> Void) {
        completionHandler([], nil)
    }
    func perform(_ query: Query, inZoneWith zoneID: RecordZone.ID?, completionHandler: @escaping @Sendable ([Record]?, Error?) -> Void) {
        completionHandler(lock.withLock { records.values.filter { $0.recordType == query.recordType } }, nil)
    }
    func save(_ record: Record, completionHandler: @escaping @Sendable (Record?, Error?) -> Void) {
        lock.withLock { records[record.recordID] = record }
        completionHandler(record, nil)
    }
    func save(_ zone: RecordZone, completionHandler: @escaping @Sendable (RecordZone?, Error?) -> Void) {
        completionHandler(zone, nil)
    }
    func save(_ subscription: Subscription, completionHandler: @escaping @Sendable (Subscription?, Error?) -> Void) {
        completionHandler(subscription, nil)
    }
}

@Suite("CombineCloudKit's protocols, ported")
struct CombineCloudKitProtocolsTests {
    @Test("a database reached through the protocol saves, fetches, performs and deletes with its completion handlers", arguments: TestEngine.all)
    func databaseThroughProtocol(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database: CCKDatabase = container.privateCloudDatabase
            let note = Record(recordType: "Note", recordID: Record.ID(recordName: "n1"))
            note["title"] = "First"
            let saved: Record? = await awaitCallback { done in database.save(note) { record, _ in done(record) } }
            #expect(saved?["title"] as? String == "First")

            let fetched: Record? = await awaitCallback { done in database.fetch(withRecordID: note.recordID) { record, _ in done(record) } }
            #expect(fetched?.recordChangeTag == saved?.recordChangeTag)

            let query = Query(recordType: "Note", predicate: QueryPredicate(value: true))
            let found: [Record]? = await awaitCallback { done in database.perform(query, inZoneWith: nil) { records, _ in done(records) } }
            #expect(found?.map(\.recordID.recordName) == ["n1"])

            let deleted: Record.ID? = await awaitCallback { done in database.delete(withRecordID: note.recordID) { id, _ in done(id) } }
            #expect(deleted == note.recordID)
            let missing: (Record?, StratusError.Code?) = await awaitCallback { done in
                database.fetch(withRecordID: note.recordID) { record, error in done((record, (error as? StratusError)?.code)) }
            }
            #expect(missing.0 == nil && missing.1 == .unknownItem)

            let status: AccountStatus = await awaitCallback { done in (container as CCKContainer).accountStatus { status, _ in done(status) } }
            #expect(status == .available)
        }
    }

    @Test("operations set up through the protocols run on the database and report with their older blocks", arguments: TestEngine.all)
    func operationsThroughProtocols(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database: CCKDatabase = container.privateCloudDatabase
            let records = ["a", "b"].map { name -> Record in
                let record = Record(recordType: "Note", recordID: Record.ID(recordName: name))
                record["title"] = name.uppercased()
                return record
            }
            let configuration = DatabaseOperation.Configuration()
            configuration.timeoutIntervalForRequest = 30
            let savedOutputs: [(Record?, Record.ID?)]? = await awaitCallback { done in
                database.save(records: records, withConfiguration: configuration) { outputs, _ in done(outputs) }
            }
            #expect(savedOutputs?.compactMap { $0.0?.recordID.recordName }.sorted() == ["a", "b"])

            let fetched: [Record]? = await awaitCallback { done in
                database.fetch(recordIDs: records.map(\.recordID), desiredKeys: ["title"]) { records, _ in done(records) }
            }
            #expect(fetched?.compactMap { $0["title"] as? String }.sorted() == ["A", "B"])

            // Saving the same new records again conflicts under .ifServerRecordUnchanged: the
            // older block gets the partial failure and no lists.
            let again = records.map { Record(recordType: "Note", recordID: $0.recordID) }
            let conflict: StratusError.Code? = await awaitCallback { done in
                database.save(records: again, atomically: false) { _, error in done((error as? StratusError)?.code) }
            }
            #expect(conflict == .partialFailure)

            let zone = RecordZone(zoneName: "Scratch")
            _ = try await container.privateCloudDatabase.save(zone)
            let zones: [RecordZone]? = await awaitCallback { done in database.fetchAllZones { zones, _ in done(zones) } }
            #expect(Set(zones?.map(\.zoneID.zoneName) ?? []) == [RecordZone.ID.defaultZoneName, "Scratch"])
            let deletedZones: [(RecordZone?, RecordZone.ID?)]? = await awaitCallback { done in
                database.delete(recordZoneIDs: [zone.zoneID]) { outputs, _ in done(outputs) }
            }
            #expect(deletedZones?.compactMap(\.1) == [zone.zoneID])
        }
    }

    @Test("a test double conforms to the same protocol and the same helpers run against it")
    func mockDatabase() async throws {
        let database: CCKDatabase = MockDatabase()
        let record = Record(recordType: "Note", recordID: Record.ID(recordName: "x"))
        let saved: Record? = await awaitCallback { done in database.save(record) { record, _ in done(record) } }
        #expect(saved === record)
        // The helpers' operations need a real database: without one they start on the spot and
        // fail, as CombineCloudKit's own fallback does.
        let operation = QueryOperation(query: Query(recordType: "Note", predicate: QueryPredicate(value: true)))
        let operationThroughProtocol: CCKQueryOperation = operation
        operationThroughProtocol.resultsLimit = 5
        #expect(operation.resultsLimit == 5)
        #expect(operationThroughProtocol.configuration != nil)
    }
}
