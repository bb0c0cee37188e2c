import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// SyncKit's database adapter, subscriptions and database-change fetch, ported mechanically:
// mentrena/SyncKit, SyncKit/Classes/QSSynchronizer/CloudKitDatabase.swift,
// CloudKitSynchronizer+Subscriptions.swift, Operations/CloudKitSynchronizerOperation.swift and
// Operations/FetchDatabaseChangesOperation.swift. Besides the README's substitutions, `@objc`
// is dropped (Linux has no Objective-C runtime), and the synchronizer keeps its subscription
// IDs in a dictionary where SyncKit keeps them in its key-value store.

public protocol CloudKitDatabaseAdapter {
    func add(_ operation: DatabaseOperation)
    func save(zone: RecordZone, completionHandler: @escaping (RecordZone?, Error?) -> Void)
    func fetch(withRecordZoneID zoneID: RecordZone.ID, completionHandler: @escaping (RecordZone?, Error?) -> Void)
    func fetch(withRecordID recordID: Record.ID, completionHandler: @escaping (Record?, Error?) -> Void)
    func delete(withRecordZoneID zoneID: RecordZone.ID, completionHandler: @escaping (RecordZone.ID?, Error?) -> Void)
    var databaseScope: Database.Scope { get }
    func fetchAllSubscriptions(completionHandler: @escaping ([Subscription]?, Error?) -> Void)
    func save(subscription: Subscription, completionHandler: @escaping (Subscription?, Error?) -> Void)
    func delete(withSubscriptionID subscriptionID: Subscription.ID, completionHandler: @escaping (String?, Error?) -> Void)
}

public class DefaultCloudKitDatabaseAdapter: NSObject, CloudKitDatabaseAdapter {
    public let database: Database
    public init(database: Database) {
        self.database = database
    }

    public func add(_ operation: DatabaseOperation) {
        database.add(operation)
    }

    public func save(zone: RecordZone, completionHandler: @escaping (RecordZone?, Error?) -> Void) {
        database.save(zone, completionHandler: completionHandler)
    }

    public func fetch(withRecordZoneID zoneID: RecordZone.ID, completionHandler: @escaping (RecordZone?, Error?) -> Void) {
        database.fetch(withRecordZoneID: zoneID, completionHandler: completionHandler)
    }

    public func fetch(withRecordID recordID: Record.ID, completionHandler: @escaping (Record?, Error?) -> Void) {
        database.fetch(withRecordID: recordID, completionHandler: completionHandler)
    }

    public func delete(withRecordZoneID zoneID: RecordZone.ID, completionHandler: @escaping (RecordZone.ID?, Error?) -> Void) {
        database.delete(withRecordZoneID: zoneID, completionHandler: completionHandler)
    }

    public var databaseScope: Database.Scope {
        return database.databaseScope
    }

    public func fetchAllSubscriptions(completionHandler: @escaping ([Subscription]?, Error?) -> Void) {
        database.fetchAllSubscriptions(completionHandler: completionHandler)
    }

    public func save(subscription: Subscription, completionHandler: @escaping (Subscription?, Error?) -> Void) {
        database.save(subscription, completionHandler: completionHandler)
    }

    public func delete(withSubscriptionID subscriptionID: Subscription.ID, completionHandler: @escaping (String?, Error?) -> Void) {
        database.delete(withSubscriptionID: subscriptionID, completionHandler: completionHandler)
    }
}

/// The part of SyncKit's `CloudKitSynchronizer` the subscription extension uses.
public final class SyncKitSynchronizer: @unchecked Sendable {
    let database: CloudKitDatabaseAdapter
    private let lock = NSLock()
    private var zoneSubscriptionIDs: [RecordZone.ID: String] = [:]
    private var storedDatabaseSubscriptionID: String?

    init(database: CloudKitDatabaseAdapter) { self.database = database }

    var databaseSubscriptionID: String? {
        get { lock.withLock { storedDatabaseSubscriptionID } }
        set { lock.withLock { storedDatabaseSubscriptionID = newValue } }
    }
    func getStoredSubscriptionID(for zoneID: RecordZone.ID) -> String? { lock.withLock { zoneSubscriptionIDs[zoneID] } }
    func storeSubscriptionID(_ id: String, for zoneID: RecordZone.ID) { lock.withLock { zoneSubscriptionIDs[zoneID] = id } }
    func clearSubscriptionID(_ id: String) {
        lock.withLock {
            if storedDatabaseSubscriptionID == id { storedDatabaseSubscriptionID = nil }
            zoneSubscriptionIDs = zoneSubscriptionIDs.filter { $0.value != id }
        }
    }
}

public extension SyncKitSynchronizer {
    func subscriptionID(forRecordZoneID zoneID: RecordZone.ID) -> String? {
        return getStoredSubscriptionID(for: zoneID)
    }

    func subscriptionIDForDatabaseSubscription() -> String? {
        return self.databaseSubscriptionID
    }

    func subscribeForChangesInDatabase(completion: ((Error?)->())?) {
        guard subscriptionIDForDatabaseSubscription() == nil else {
            completion?(nil)
            return
        }
        database.fetchAllSubscriptions { (subscriptions, error) in
            guard error == nil else {
                completion?(nil)
                return
            }
            let existingSubscription = subscriptions?.first {
                $0 is DatabaseSubscription
            }
            if let subscription = existingSubscription {
                self.databaseSubscriptionID = subscription.subscriptionID
                completion?(nil)
            } else {
                let subscription = DatabaseSubscription()
                let notificationInfo = Subscription.NotificationInfo()
                notificationInfo.shouldSendContentAvailable = true
                subscription.notificationInfo = notificationInfo

                self.database.save(subscription: subscription, completionHandler: { (subscription, error) in
                    if error == nil,
                        let subscription = subscription {
                        self.databaseSubscriptionID = subscription.subscriptionID
                    }
                    completion?(error)
                })
            }
        }
    }

    func subscribeForChanges(in zoneID: RecordZone.ID, completion: ((Error?)->())?) {
        guard subscriptionID(forRecordZoneID: zoneID) == nil else {
            completion?(nil)
            return
        }
        database.fetchAllSubscriptions { (subscriptions, error) in
            guard error == nil else {
                completion?(error)
                return
            }
            let existingSubscription = subscriptions?.first {
                let subscription = $0 as? RecordZoneSubscription
                return subscription?.zoneID == zoneID
            }
            if let subscription = existingSubscription {
                self.storeSubscriptionID(subscription.subscriptionID, for: zoneID)
                completion?(nil)
            } else {
                let subscription = RecordZoneSubscription(zoneID: zoneID)
                let notificationInfo = Subscription.NotificationInfo()
                notificationInfo.shouldSendContentAvailable = true
                subscription.notificationInfo = notificationInfo

                self.database.save(subscription: subscription, completionHandler: { (subscription, error) in
                    if error == nil,
                        let subscription = subscription {
                        self.storeSubscriptionID(subscription.subscriptionID, for: zoneID)
                    }
                    completion?(error)
                })
            }
        }
    }

    func cancelSubscriptionForChangesInDatabase(completion: ((Error?)->())?) {
        if let subscriptionID = subscriptionIDForDatabaseSubscription() {
            self.cancelSubscription(identifier: subscriptionID, completion: completion)
        } else {
            database.fetchAllSubscriptions { (subscriptions, error) in
                guard error == nil else {
                    completion?(error)
                    return
                }
                let existingSubscriptionIdentifier = subscriptions?.first {
                    $0 is DatabaseSubscription
                }
                if let subscriptionID = existingSubscriptionIdentifier?.subscriptionID {
                    self.cancelSubscription(identifier: subscriptionID, completion: completion)
                } else {
                    completion?(nil)
                }
            }
        }
    }

    fileprivate func cancelSubscription(identifier: String, completion: ((Error?)->())?) {
        database.delete(withSubscriptionID: identifier) { (subscriptionID, error) in
            if subscriptionID == nil {
                self.clearSubscriptionID(identifier)
            }
            completion?(error)
        }
    }
}

public class CloudKitSynchronizerOperation: Operation, @unchecked Sendable {
    override public var isAsynchronous: Bool { return true }
    override public var isExecuting: Bool { return state == .executing }
    override public var isFinished: Bool { return state == .finished }
    public var errorHandler: ((CloudKitSynchronizerOperation, Error) -> ())?

    var state = State.ready {
        willSet {
            willChangeValue(forKey: state.keyPath)
            willChangeValue(forKey: newValue.keyPath)
        }
        didSet {
            didChangeValue(forKey: state.keyPath)
            didChangeValue(forKey: oldValue.keyPath)
        }
    }

    enum State: String {
        case ready = "Ready"
        case executing = "Executing"
        case finished = "Finished"
        fileprivate var keyPath: String { return "is" + self.rawValue }
    }

    override public func start() {
        if self.isCancelled {
            state = .finished
        } else {
            state = .ready
            main()
        }
    }

    override public func main() {
        state = self.isCancelled ? .finished : .executing
    }

    public func finish(error: Error?) {
        if let error = error {
            errorHandler?(self, error)
        }
        state = .finished
    }
}

class SyncKitFetchDatabaseChangesOperation: CloudKitSynchronizerOperation, @unchecked Sendable {
    let database: CloudKitDatabaseAdapter
    let databaseToken: ServerChangeToken?
    let completion: (ServerChangeToken?, [RecordZone.ID], [RecordZone.ID]) -> ()

    var changedZoneIDs = [RecordZone.ID]()
    var deletedZoneIDs = [RecordZone.ID]()
    weak var internalOperation: FetchDatabaseChangesOperation?

    init(database: CloudKitDatabaseAdapter, databaseToken: ServerChangeToken?, completion: @escaping (ServerChangeToken?, [RecordZone.ID], [RecordZone.ID]) -> ()) {
        self.databaseToken = databaseToken
        self.database = database
        self.completion = completion
        super.init()
    }

    override func start() {
        super.start()

        let databaseChangesOperation = FetchDatabaseChangesOperation(previousServerChangeToken: databaseToken)
        databaseChangesOperation.fetchAllChanges = true

        databaseChangesOperation.recordZoneWithIDChangedBlock = { zoneID in
            self.changedZoneIDs.append(zoneID)
        }

        databaseChangesOperation.recordZoneWithIDWasDeletedBlock = { zoneID in
            self.deletedZoneIDs.append(zoneID)
        }

        databaseChangesOperation.fetchDatabaseChangesCompletionBlock = { serverChangeToken, moreComing, operationError in
            if !moreComing {
                if operationError == nil {
                    self.completion(serverChangeToken, self.changedZoneIDs, self.deletedZoneIDs)
                }
                self.finish(error: operationError)
            }
        }

        internalOperation = databaseChangesOperation
        database.add(databaseChangesOperation)
    }

    override func cancel() {
        internalOperation?.cancel()
        super.cancel()
    }
}

@Suite("SyncKit's subscriptions and database-change fetch, ported")
struct SyncKitSubscriptionsTests {
    @Test("a database subscription is made once, found again by a new synchronizer, and cancelled", arguments: TestEngine.all)
    func databaseSubscriptionLifecycle(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let adapter = DefaultCloudKitDatabaseAdapter(database: container.privateCloudDatabase)
            let synchronizer = SyncKitSynchronizer(database: adapter)
            let made: Error? = await awaitCallback { done in synchronizer.subscribeForChangesInDatabase { done($0) } }
            #expect(made == nil)
            let id = try #require(synchronizer.subscriptionIDForDatabaseSubscription())

            // Another device (a synchronizer with nothing stored) finds it instead of making another.
            let other = SyncKitSynchronizer(database: adapter)
            let found: Error? = await awaitCallback { done in other.subscribeForChangesInDatabase { done($0) } }
            #expect(found == nil)
            #expect(other.subscriptionIDForDatabaseSubscription() == id)
            let all = try await container.privateCloudDatabase.allSubscriptions()
            #expect(all.count == 1)
            #expect((all.first as? DatabaseSubscription)?.notificationInfo?.shouldSendContentAvailable == true)

            let cancelled: Error? = await awaitCallback { done in other.cancelSubscriptionForChangesInDatabase { done($0) } }
            #expect(cancelled == nil)
            #expect(try await container.privateCloudDatabase.allSubscriptions().isEmpty)
        }
    }

    @Test("a zone subscription is found by its zone ID among every subscription", arguments: TestEngine.all)
    func zoneSubscriptionFoundByZone(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let zoneID = RecordZone.ID(zoneName: "QSCloudKitCustomZoneName", ownerName: CurrentUserDefaultName)
            _ = try await container.privateCloudDatabase.save(RecordZone(zoneID: zoneID))
            let adapter = DefaultCloudKitDatabaseAdapter(database: container.privateCloudDatabase)
            let synchronizer = SyncKitSynchronizer(database: adapter)
            let made: Error? = await awaitCallback { done in synchronizer.subscribeForChanges(in: zoneID) { done($0) } }
            #expect(made == nil)
            let id = try #require(synchronizer.subscriptionID(forRecordZoneID: zoneID))

            let other = SyncKitSynchronizer(database: adapter)
            let found: Error? = await awaitCallback { done in other.subscribeForChanges(in: zoneID) { done($0) } }
            #expect(found == nil)
            #expect(other.subscriptionID(forRecordZoneID: zoneID) == id)
        }
    }

    @Test("the database-change fetch reports changed and deleted zones once, with a token that sees nothing new", arguments: TestEngine.all)
    func databaseChangesReportDeletedZones(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let adapter = DefaultCloudKitDatabaseAdapter(database: database)
            let kept = RecordZone.ID(zoneName: "Kept", ownerName: CurrentUserDefaultName)
            let gone = RecordZone.ID(zoneName: "Gone", ownerName: CurrentUserDefaultName)
            _ = try await database.modifyRecordZones(saving: [RecordZone(zoneID: kept), RecordZone(zoneID: gone)], deleting: [])

            let queue = OperationQueue()
            queue.maxConcurrentOperationCount = 1
            func fetch(_ token: ServerChangeToken?) async -> (ServerChangeToken?, [RecordZone.ID], [RecordZone.ID]) {
                await awaitCallback { done in
                    queue.addOperation(SyncKitFetchDatabaseChangesOperation(database: adapter, databaseToken: token) { done(($0, $1, $2)) })
                }
            }
            let (token, changed, deleted) = await fetch(nil)
            #expect(Set(changed) == [kept, gone])
            #expect(deleted.isEmpty)

            let record = Record(recordType: "QSCompany", recordID: Record.ID(recordName: "c1", zoneID: kept))
            record["name"] = "Acme"
            _ = try await database.save(record)
            _ = try await database.deleteRecordZone(withID: gone)
            let (next, changedLater, deletedLater) = await fetch(token)
            #expect(changedLater == [kept])
            #expect(deletedLater == [gone])

            let (_, changedAfter, deletedAfter) = await fetch(next)
            #expect(changedAfter.isEmpty && deletedAfter.isEmpty)
        }
    }
}
