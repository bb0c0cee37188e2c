import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// CloudCore's public-database subscriptions, ported mechanically: deeje/CloudCore,
// Source/Classes/Pull/PublicSubscriptions/PublicDatabaseSubscriptions.swift and
// FetchPublicSubscriptionsOperation.swift. Changes besides the README's substitutions:
// `CloudCore.config.container` is a static the test sets, the last-sync dates live in a
// dictionary instead of `UserDefaults` (so tests share no state), and `PullRecordOperation`
// (which copies a record into Core Data) is a block that keeps the pulled record's ID and its
// modification date.

enum CloudCoreConfig {
    nonisolated(unsafe) static var container: Container!
    static let publicSubscriptionIDPrefix = "CloudCore-"
}

public class PublicDatabaseSubscriptions {
    private static var prefix: String { return CloudCoreConfig.publicSubscriptionIDPrefix }

    nonisolated(unsafe) static var subscriptions: [Subscription] = []
    nonisolated(unsafe) static var lastDates: [String: NSDate] = [:]
    nonisolated(unsafe) static var pulledIDs: [Record.ID] = []
    private static let lock = NSLock()

    private static let pullQueue: OperationQueue = {
        let q = OperationQueue()
        q.maxConcurrentOperationCount = 1
        return q
    }()

    private static func lastSync(for subscriptionID: String) -> NSDate? {
        lock.withLock { lastDates[subscriptionID] }
    }

    private static func setLastSync(for subscriptionID: String, date: NSDate?) {
        lock.withLock { lastDates[subscriptionID] = date }
    }

    static public func subscribe(recordType: String, predicate: QueryPredicate, completion: ((_ subscription: Subscription, _ error: Error?) -> Void)?) {
        let newSubscriptionID = prefix + recordType + "-" + predicate.predicateFormat

        let subscriptionIDs = { subscriptions.map { $0.subscriptionID }} ()
        if subscriptionIDs.firstIndex(of: newSubscriptionID) != nil { return }

        let options: QuerySubscription.Options = [.firesOnRecordCreation, .firesOnRecordUpdate, .firesOnRecordDeletion]
        let querySubscription = QuerySubscription(recordType: recordType, predicate: predicate, subscriptionID: newSubscriptionID, options: options)

        let notificationInfo = Subscription.NotificationInfo()
        notificationInfo.shouldSendContentAvailable = true
        querySubscription.notificationInfo = notificationInfo

        let modifySubscriptions = ModifySubscriptionsOperation(subscriptionsToSave: [querySubscription], subscriptionIDsToDelete: [])
        modifySubscriptions.modifySubscriptionsResultBlock = { result in
            switch result {
            case .success():
                self.subscriptions.append(querySubscription)
                completion?(querySubscription, nil)
            case .failure(let error):
                completion?(querySubscription, error)
            }
        }

        let config = DatabaseOperation.Configuration()
        config.timeoutIntervalForResource = 20
        config.qualityOfService = .userInitiated
        modifySubscriptions.configuration = config

        CloudCoreConfig.container.publicCloudDatabase.add(modifySubscriptions)
    }

    static public func unsubscribe(subscriptionID: String, completion: ((Error?) -> Void)?) {
        let modifySubscription = ModifySubscriptionsOperation(subscriptionsToSave: [], subscriptionIDsToDelete: [subscriptionID])
        modifySubscription.modifySubscriptionsResultBlock = { result in
            switch result {
            case .success():
                let subscriptionIDs = { self.subscriptions.map { $0.subscriptionID }} ()
                if let index = subscriptionIDs.firstIndex(of: subscriptionID) {
                    self.subscriptions.remove(at: index)
                }
                completion?(nil)
            case .failure(let error):
                completion?(error)
            }
        }

        let config = DatabaseOperation.Configuration()
        config.timeoutIntervalForResource = 20
        config.qualityOfService = .userInitiated
        modifySubscription.configuration = config

        CloudCoreConfig.container.publicCloudDatabase.add(modifySubscription)
    }

    static public func unsubscribe(recordType: String, predicate: QueryPredicate, completion: ((Error?) -> Void)?) {
        let oldSubscriptionID = prefix + recordType + "-" + predicate.predicateFormat
        self.unsubscribe(subscriptionID: oldSubscriptionID, completion: completion)
    }

    // FetchPublicSubscriptionsOperation's main(), inlined.
    static public func fetchSubscriptions(errorCompletion: ((Error) -> Void)? = nil, successCompletion: (([Subscription]) -> Void)? = nil) {
        CloudCoreConfig.container.publicCloudDatabase.fetchAllSubscriptions { (subscriptions, error) in
            if let error {
                errorCompletion?(error)
                return
            }
            guard let subscriptions else {
                successCompletion?([Subscription]())
                return
            }
            var cloudCoreSubscriptions = [Subscription]()
            for subscription in subscriptions {
                if !subscription.subscriptionID.hasPrefix(prefix) { continue }
                cloudCoreSubscriptions.append(subscription)
            }
            self.subscriptions = cloudCoreSubscriptions
            successCompletion?(cloudCoreSubscriptions)
        }
    }

    static func pullPublic(_ querySubscription: QuerySubscription, done: @escaping (Error?) -> Void) {
        let publicDatabase = CloudCoreConfig.container.publicCloudDatabase
        let subscriptionID = querySubscription.subscriptionID
        let entityType = querySubscription.recordType!
        var predicate = querySubscription.predicate

        let modDateField = "modificationDate"

        if let date = PublicDatabaseSubscriptions.lastSync(for: subscriptionID) {
            let datePredicate = try! QueryPredicate(format: "%K > %@", modDateField, date)

            predicate = QueryPredicate(andPredicateWithSubpredicates: [predicate, datePredicate])
        }

        let query = Query(recordType: entityType, predicate: predicate)
        query.sortDescriptors = [RecordSortDescriptor(key: modDateField, ascending: true)]
        let queryOp = QueryOperation(query: query)
        queryOp.desiredKeys = [modDateField]
        queryOp.qualityOfService = .userInitiated
        queryOp.recordMatchedBlock = { recordID, result in
            if case .success(let record) = result {
                // CloudCore sets the last-sync date in the pull operation's `completionBlock`, set
                // after the operation is queued; here the operation sets it itself, so the test's
                // next pull sees it.
                let pullOp = BlockOperation {
                    lock.withLock { pulledIDs.append(recordID) }
                    PublicDatabaseSubscriptions.setLastSync(for: subscriptionID, date: record.modificationDate as? NSDate)
                }
                pullQueue.addOperation(pullOp)
            }
        }
        queryOp.queryResultBlock = { result in
            switch result {
            case .success(let cursor):
                if cursor != nil {
                    PublicDatabaseSubscriptions.pullPublic(querySubscription, done: done)
                    return
                }
                pullQueue.addOperation { done(nil) }
            case .failure(let error):
                done(error)
            }
        }
        publicDatabase.add(queryOp)
    }

    static func reset() {
        lock.withLock { subscriptions = []; lastDates = [:]; pulledIDs = [] }
    }
}

@Suite("CloudCore's public-database subscriptions, ported", .serialized)
struct CloudCorePublicSubscriptionsTests {
    private func seed(_ database: Database, posts: [(String, Bool)]) async throws {
        let records = posts.map { name, published -> Record in
            let record = Record(recordType: "Post", recordID: Record.ID(recordName: name))
            record["title"] = name
            record["published"] = published
            return record
        }
        _ = try await database.modifyRecords(saving: records, deleting: [])
    }

    @Test("a subscription named after its predicate's format is saved, fetched back by prefix, and deleted", arguments: TestEngine.all)
    func subscribeFetchAndUnsubscribe(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            CloudCoreConfig.container = container
            PublicDatabaseSubscriptions.reset()
            let predicate = try QueryPredicate(format: "published == %@", NSNumber(value: true))

            let saveError: Error? = await awaitCallback { done in
                PublicDatabaseSubscriptions.subscribe(recordType: "Post", predicate: predicate) { _, error in done(error) }
            }
            #expect(saveError == nil)

            PublicDatabaseSubscriptions.subscriptions = []
            let fetched: [Subscription] = await awaitCallback { done in
                PublicDatabaseSubscriptions.fetchSubscriptions(errorCompletion: { _ in done([]) }, successCompletion: { done($0) })
            }
            let query = try #require(fetched.first as? QuerySubscription)
            #expect(query.subscriptionID == "CloudCore-Post-" + predicate.predicateFormat)
            #expect(query.recordType == "Post")
            #expect(query.notificationInfo?.shouldSendContentAvailable == true)

            let deleteError: Error? = await awaitCallback { done in
                PublicDatabaseSubscriptions.unsubscribe(recordType: "Post", predicate: predicate) { done($0) }
            }
            #expect(deleteError == nil)
            #expect(PublicDatabaseSubscriptions.subscriptions.isEmpty)
            #expect(try await container.publicCloudDatabase.allSubscriptions().isEmpty)
        }
    }

    @Test("a pull reads what matches, then only what changed after the last pulled modification date", arguments: TestEngine.all)
    func pullReadsOnlyNewerRecords(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            CloudCoreConfig.container = container
            PublicDatabaseSubscriptions.reset()
            let database = container.publicCloudDatabase
            try await seed(database, posts: [("a", true), ("b", false), ("c", true)])
            let predicate = try QueryPredicate(format: "published == %@", NSNumber(value: true))
            let subscription = QuerySubscription(recordType: "Post", predicate: predicate, subscriptionID: "CloudCore-Post")

            let first: Error? = await awaitCallback { done in PublicDatabaseSubscriptions.pullPublic(subscription) { done($0) } }
            #expect(first == nil)
            #expect(Set(PublicDatabaseSubscriptions.pulledIDs.map(\.recordName)) == ["a", "c"])
            #expect(PublicDatabaseSubscriptions.lastDates["CloudCore-Post"] != nil)

            // A later write is the only one the next pull reads.
            try await Task.sleep(for: .milliseconds(20))
            try await seed(database, posts: [("d", true)])
            PublicDatabaseSubscriptions.pulledIDs = []
            let second: Error? = await awaitCallback { done in PublicDatabaseSubscriptions.pullPublic(subscription) { done($0) } }
            #expect(second == nil)
            #expect(PublicDatabaseSubscriptions.pulledIDs.map(\.recordName) == ["d"])
        }
    }
}
