import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// CheckMate-ToDo's `ToDoCloud`, ported mechanically (its file ToDoCloud.swift): database
// subscriptions on the private and shared databases, a "todos" zone, records in it named by
// `CKRecord.ID(zoneID:)`, and a fetch of changed zones whose follow-up `BlockOperation` depends
// on the CloudKit operation and is grouped with a `CKOperationGroup`. Changes besides the
// README's substitutions: `CKContainer.default()` is a container the test sets; the sharing
// controller (UIKit and `CKShare`) is left out; `os_log` is the test's log; the follow-up
// operations go on a serial queue of the app's own instead of `OperationQueue.main`, which only
// runs while a main run loop does; and `fetchUpdates` takes a completion so tests wait for it.

enum ToDoCloudContainer {
    nonisolated(unsafe) static var current: Container!
}

enum RecordLocation: String, Hashable, Codable {
    case privateDatabase
    case sharedDatabase
    case publicDatabase

    var database: Database {
        switch self {
        case .privateDatabase:
            return ToDoCloudContainer.current.privateCloudDatabase
        case .sharedDatabase:
            return ToDoCloudContainer.current.sharedCloudDatabase
        case .publicDatabase:
            return ToDoCloudContainer.current.publicCloudDatabase
        }
    }
}

enum ToDoRecordType: String {
    case unknown
    case todo
    case list
    case brag
    case share = "cloudkit.share"
    case users = "Users"
}

class CloudRecord {
    var record: Record
    var type: ToDoRecordType
    var location: RecordLocation

    init(with record: Record, location: RecordLocation) {
        self.record = record
        self.location = location
        self.type = ToDoRecordType(rawValue: record.recordType) ?? .unknown
    }
}

class ToDoCloud: NSObject, @unchecked Sendable {
    let log = SampleLog()
    private let lock = NSLock()
    private let followUps: OperationQueue = {
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        return queue
    }()

    override init() {
        super.init()

        ToDoCloudContainer.current.privateCloudDatabase.add(databaseSubscription())
        ToDoCloudContainer.current.sharedCloudDatabase.add(databaseSubscription())

        let todoZone = RecordZone(zoneName: "todos")
        let zoneOperation = ModifyRecordZonesOperation(recordZonesToSave: [todoZone], recordZoneIDsToDelete: nil)
        ToDoCloudContainer.current.privateCloudDatabase.add(zoneOperation)
    }

    private var records = [CloudRecord]()
    private var zoneChangeTokens = [RecordZone.ID: ServerChangeToken]()
    private var databaseChangeTokens = [RecordLocation: ServerChangeToken]()

    private func removeRecord(_ recordIDToRemove: Record.ID) {
        lock.withLock { records.removeAll { $0.record.recordID == recordIDToRemove } }
    }

    private func updateRecord(_ newRecord: CloudRecord) {
        lock.withLock {
            records.removeAll { $0.record.recordID == newRecord.record.recordID }
            records.append(newRecord)
        }
    }

    var lists: [CloudRecord] { lock.withLock { records.filter { $0.type == .list } } }
    var todos: [CloudRecord] { lock.withLock { records.filter { $0.type == .todo } } }

    func save(record: CloudRecord, done: @escaping () -> Void = {}) {
        let saveOperation = ModifyRecordsOperation(recordsToSave: [record.record], recordIDsToDelete: nil)
        saveOperation.modifyRecordsCompletionBlock = { savedRecords, deletedIDs, error in
            defer { done() }
            guard let records = savedRecords else {
                self.log.append("Error saving records: \(String(describing: error))")
                return
            }
            for newRecord in records {
                self.updateRecord(CloudRecord(with: newRecord, location: record.location))
            }
        }
        record.location.database.add(saveOperation)
    }

    func createToDo(with dictionary: [String: RecordValueProtocol], in location: RecordLocation, done: @escaping () -> Void = {}) {
        let listRef = dictionary["list"] as! Record.Reference

        let zone = listRef.recordID.zoneID
        let newTodoID = Record.ID(zoneID: zone)

        let newTodo = Record(recordType: "todo", recordID: newTodoID)
        newTodo["title"] = dictionary["title"]
        newTodo["note"] = dictionary["note"]
        newTodo["dateCompleted"] = dictionary["dateCompleted"]
        newTodo["list"] = listRef
        newTodo.parent = dictionary["parent"] as? Record.Reference

        save(record: CloudRecord(with: newTodo, location: location), done: done)
    }

    func createList(title: String, done: @escaping () -> Void = {}) {
        let newListID = Record.ID(zoneID: privateToDoZoneID)
        let newList = Record(recordType: "list", recordID: newListID)
        newList["title"] = title
        save(record: CloudRecord(with: newList, location: .privateDatabase), done: done)
    }

    func deleteRecord(_ recordID: Record.ID, in location: RecordLocation, done: @escaping () -> Void = {}) {
        let deleteOperation = ModifyRecordsOperation(recordsToSave: nil, recordIDsToDelete: [recordID])
        deleteOperation.modifyRecordsCompletionBlock = { savedRecords, deletedIDs, error in
            defer { done() }
            guard let deletedIDs = deletedIDs else {
                self.log.append("Error saving records: \(String(describing: error))")
                return
            }
            for recordID in deletedIDs {
                self.removeRecord(recordID)
            }
        }
        location.database.add(deleteOperation)
    }

    func fetchUpdates(in location: RecordLocation, done: @escaping () -> Void) {
        let database = location.database
        // `BlockOperation`'s block is `@Sendable` in swift-corelibs-foundation; the dependency
        // orders the write before the read, which the compiler cannot see.
        nonisolated(unsafe) var zones = [RecordZone.ID]()

        let zonesOp = fetchChangedZones(in: location) { newZones in
            zones = newZones
        }

        database.add(zonesOp)

        let next = BlockOperation {
            guard zones.count != 0 else { return done() }
            let changesOp = self.fetchChanges(in: zones, location: location)
            database.add(changesOp)

            let completionOp = BlockOperation {
                done()
            }

            completionOp.addDependency(changesOp)
            self.followUps.addOperation(completionOp)
        }

        next.addDependency(zonesOp)

        followUps.addOperation(next)
    }

    private func fetchChangedZones(in location: RecordLocation, completion: @escaping ([RecordZone.ID]) -> Void) -> DatabaseOperation {
        var zones = [RecordZone.ID]()
        let changeOperation = FetchDatabaseChangesOperation(previousServerChangeToken: lock.withLock { databaseChangeTokens[location] })

        changeOperation.changeTokenUpdatedBlock = { token in
            self.lock.withLock { self.databaseChangeTokens[location] = token }
        }

        changeOperation.recordZoneWithIDChangedBlock = { zoneID in
            zones.append(zoneID)
        }

        changeOperation.recordZoneWithIDWasPurgedBlock = { zoneID in
            if zoneID == self.privateToDoZoneID {
                self.lock.withLock { self.records = [] }
            }
        }

        changeOperation.recordZoneWithIDWasDeletedBlock = { zoneID in
            if zoneID == self.privateToDoZoneID {
                self.lock.withLock { self.records = [] }
            }
        }

        changeOperation.fetchDatabaseChangesCompletionBlock = { token, moreComing, error in
            guard error == nil else {
                self.log.append("Fetch database changes error: \(error!.localizedDescription)")
                return
            }

            if moreComing == false {
                completion(zones)
            }
        }

        changeOperation.group = group

        return changeOperation
    }

    private func fetchChanges(in zones: [RecordZone.ID], location: RecordLocation) -> DatabaseOperation {
        let configurations = zones.map { (zone: RecordZone.ID) -> (RecordZone.ID, FetchRecordZoneChangesOperation.ZoneConfiguration)? in
            guard let token = lock.withLock({ zoneChangeTokens[zone] }) else { return nil }
            return (zone, FetchRecordZoneChangesOperation.ZoneConfiguration(previousServerChangeToken: token, resultsLimit: nil, desiredKeys: nil))
        }

        var configsByID = [RecordZone.ID: FetchRecordZoneChangesOperation.ZoneConfiguration]()
        for (zone, config) in configurations.compactMap({$0}) {
            configsByID[zone] = config
        }

        let recordsOperation = FetchRecordZoneChangesOperation(recordZoneIDs: zones, configurationsByRecordZoneID: configsByID)

        recordsOperation.recordChangedBlock = { record in
            self.updateRecord(CloudRecord(with: record, location: location))
        }

        recordsOperation.recordWithIDWasDeletedBlock = { id, _ in
            self.removeRecord(id)
        }

        recordsOperation.recordZoneFetchCompletionBlock = { zoneID, token, data, moreComing, error in
            guard error == nil else {
                self.log.append("Fetch Record Zone Error: \(error!.localizedDescription)")
                return
            }
            self.lock.withLock { self.zoneChangeTokens[zoneID] = token }
        }

        recordsOperation.fetchRecordZoneChangesCompletionBlock = { error in
            guard error == nil else {
                self.log.append("Fetch Record Zone Changes Error: \(error!.localizedDescription)")
                return
            }
        }

        recordsOperation.group = group

        return recordsOperation
    }

    let privateToDoZoneID = RecordZone(zoneName: "todos").zoneID

    let group: OperationGroup = {
        let group = OperationGroup()

        group.expectedSendSize = .kilobytes
        group.expectedReceiveSize = .kilobytes

        group.name = "Fetch all data"
        return group
    }()

    private func databaseSubscription() -> ModifySubscriptionsOperation {
        let subscription = DatabaseSubscription()
        let notificationInfo = Subscription.NotificationInfo()
        notificationInfo.shouldSendContentAvailable = true
        subscription.notificationInfo = notificationInfo
        return ModifySubscriptionsOperation(subscriptionsToSave: [subscription], subscriptionIDsToDelete: nil)
    }
}

@Suite("CheckMate-ToDo's ToDoCloud, ported", .serialized)
struct CheckMateToDoCloudTests {
    private func settled(_ container: Container) async throws {
        // The app's initializer adds its zone and subscriptions without waiting; a save into the
        // zone waits for them the way the app's user does, by asking again.
        for _ in 0..<200 where (try? await container.privateCloudDatabase.recordZone(for: RecordZone.ID(zoneName: "todos"))) == nil {
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    @Test("lists and to-dos made on one device reach another through database and zone changes", arguments: TestEngine.all)
    func changesReachAnotherDevice(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            ToDoCloudContainer.current = container
            let phone = ToDoCloud()
            try await settled(container)

            await awaitCallback { done in phone.createList(title: "Groceries") { done(()) } }
            let list = try #require(phone.lists.first)
            await awaitCallback { done in
                phone.createToDo(with: ["list": Record.Reference(record: list.record, action: .deleteSelf),
                                        "title": "Milk", "parent": Record.Reference(record: list.record, action: .none)],
                                 in: .privateDatabase) { done(()) }
            }
            let todo = try #require(phone.todos.first)
            #expect(todo.record.recordID.zoneID == phone.privateToDoZoneID)
            #expect(todo.record.parent?.recordID == list.record.recordID)

            let tablet = ToDoCloud()
            await awaitCallback { done in tablet.fetchUpdates(in: .privateDatabase) { done(()) } }
            await awaitCallback { done in tablet.fetchUpdates(in: .sharedDatabase) { done(()) } }
            #expect(tablet.lists.map { $0.record["title"] as? String } == ["Groceries"])
            #expect(tablet.todos.map { $0.record["title"] as? String } == ["Milk"])
            #expect(tablet.log.messages.isEmpty)

            // A deletion reaches the other device on its next fetch, from its kept tokens.
            await awaitCallback { done in phone.deleteRecord(todo.record.recordID, in: .privateDatabase) { done(()) } }
            await awaitCallback { done in tablet.fetchUpdates(in: .privateDatabase) { done(()) } }
            #expect(tablet.todos.isEmpty)
            #expect(tablet.lists.count == 1)

            // Each app start saves a new database subscription; the second start's is refused as a
            // duplicate of the first (`serverRejectedRequest`, as CloudKit refuses duplicates),
            // which the app never looks at, so one stays.
            #expect(try await container.privateCloudDatabase.allSubscriptions().count == 1)
        }
    }

    @Test("the app keeps only intermediate database tokens, so each fetch starts over and never hears of a deleted zone", arguments: TestEngine.all)
    func onlyIntermediateTokensAreKept(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            ToDoCloudContainer.current = container
            let phone = ToDoCloud()
            try await settled(container)
            await awaitCallback { done in phone.createList(title: "Chores") { done(()) } }
            let tablet = ToDoCloud()
            await awaitCallback { done in tablet.fetchUpdates(in: .privateDatabase) { done(()) } }
            #expect(tablet.lists.count == 1)

            // `changeTokenUpdatedBlock` gets the token after a batch that more batches follow, as
            // CloudKit "yields new change tokens during its execution, and issues a final change
            // token when it completes"; ToDoCloud keeps only the former, so on a database that
            // fits one batch it fetches from no token each time, and a fetch from no token lists
            // the zones there are, never the ones deleted.
            // The tablet's start-up save of its zone (which the app adds without waiting) is done
            // first: run after the deletion, it would make the zone again, a new life of it.
            let queue = container.privateCloudDatabase.operationQueue
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let after = BlockOperation { continuation.resume() }
                for operation in queue.operations { after.addDependency(operation) }
                queue.addOperation(after)
            }
            _ = try await container.privateCloudDatabase.deleteRecordZone(withID: phone.privateToDoZoneID)
            await awaitCallback { done in tablet.fetchUpdates(in: .privateDatabase) { done(()) } }
            #expect(tablet.lists.count == 1)
            #expect(tablet.log.messages.isEmpty)
        }
    }
}
