import Foundation
import Stratus
import StratusSQLite
import StratusStores
import StratusTestSupport
import Testing

// The `CloudKitManager` that DevMountain's iOS course hands its students, copied into many
// apps (here the Swift 4 version of "Contacts", CloudKitManager.swift, and the Swift 3 version
// of "Timeline"), ported mechanically. Its CloudKit habits: the pre-Swift 4.2 names
// (`CKRecordID`, `CKQueryCursor`, `CKNotificationInfo`, `CKQuerySubscriptionOptions`); a query
// read to the end by handing the same `recordFetchedBlock` and `queryCompletionBlock` closures
// to each `CKQueryOperation(cursor:)`; `NSPredicate(format: "%K == %@", argumentArray:
// [CreatorUserRecordIDKey, record.recordID])` with the user record fetched from the public
// database, and a creation-date range through `%K > %@`; `perRecordCompletionBlock` assigned a
// closure typed `(CKRecord?, Error?) -> Void` and `modifyRecordsCompletionBlock` assigned the
// caller's completion directly; `queuePriority` and `qualityOfService`; a query subscription
// with `alertBody`, `shouldSendContentAvailable` and `desiredKeys`; `error as NSError?` (the
// Swift 3 version). Left out, as README says: user discovery (`CKDiscoverUserIdentitiesOperation`,
// `requestApplicationPermission`) and UIKit alerts. The container is handed in instead of
// `CKContainer.default()`, so the test opens a store of its own. The CloudKit original is in
// the comments.

private let CreatorUserRecordIDKey = "creatorUserRecordID"
private let CreationDateKey = "creationDate"

final class CloudKitManager: @unchecked Sendable {
    // let publicDatabase = CKContainer.default().publicCloudDatabase
    let container: Container
    let publicDatabase: Database

    init(container: Container) {
        self.container = container
        self.publicDatabase = container.publicCloudDatabase
    }

    func fetchLoggedInUserRecord(_ completion: ((_ record: Record?, _ error: Error?) -> Void)?) {
        container.fetchUserRecordID { (recordID, error) in
            if let error = error, let completion = completion {
                completion(nil, error)
            }
            if let recordID = recordID, let completion = completion {
                self.fetchRecord(withID: recordID, completion: completion)
            }
        }
    }

    func fetchRecord(withID recordID: RecordID, completion: ((_ record: Record?, _ error: Error?) -> Void)?) {
        publicDatabase.fetch(withRecordID: recordID) { (record, error) in
            completion?(record, error)
        }
    }

    // var queryCompletionBlock: (CKQueryCursor?, Error?) -> Void = { (_, _) in }
    // queryCompletionBlock = { (queryCursor: CKQueryCursor?, error: Error?) -> Void in
    //     if let queryCursor = queryCursor {
    //         let continuedQueryOperation = CKQueryOperation(cursor: queryCursor)
    //         continuedQueryOperation.recordFetchedBlock = perRecordBlock
    //         continuedQueryOperation.queryCompletionBlock = queryCompletionBlock
    func fetchRecordsWithType(_ type: String,
                              predicate: QueryPredicate = QueryPredicate(value: true),
                              resultsLimit: Int? = nil,
                              recordFetchedBlock: ((_ record: Record) -> Void)?,
                              completion: ((_ records: [Record]?, _ error: Error?) -> Void)?) {
        var fetchedRecords: [Record] = []
        let query = Query(recordType: type, predicate: predicate)
        let queryOperation = QueryOperation(query: query)
        if let resultsLimit { queryOperation.resultsLimit = resultsLimit }

        let perRecordBlock = { (fetchedRecord: Record) -> Void in
            fetchedRecords.append(fetchedRecord)
            recordFetchedBlock?(fetchedRecord)
        }
        queryOperation.recordFetchedBlock = perRecordBlock
        var queryCompletionBlock: (QueryCursor?, Error?) -> Void = { (_, _) in }
        queryCompletionBlock = { (queryCursor: QueryCursor?, error: Error?) -> Void in
            if let queryCursor = queryCursor {
                let continuedQueryOperation = QueryOperation(cursor: queryCursor)
                if let resultsLimit { continuedQueryOperation.resultsLimit = resultsLimit }
                continuedQueryOperation.recordFetchedBlock = perRecordBlock
                continuedQueryOperation.queryCompletionBlock = queryCompletionBlock
                self.publicDatabase.add(continuedQueryOperation)
            } else {
                completion?(fetchedRecords, error)
            }
        }
        queryOperation.queryCompletionBlock = queryCompletionBlock
        self.publicDatabase.add(queryOperation)
    }

    // let predicate = NSPredicate(format: "%K == %@", argumentArray: [CreatorUserRecordIDKey, record.recordID])
    func fetchCurrentUserRecords(_ type: String, completion: ((_ records: [Record]?, _ error: Error?) -> Void)?) {
        fetchLoggedInUserRecord { (record, error) in
            if let record = record {
                let predicate = try! QueryPredicate(format: "%K == %@", argumentArray: [CreatorUserRecordIDKey, record.recordID])
                self.fetchRecordsWithType(type, predicate: predicate, recordFetchedBlock: nil, completion: completion)
            } else {
                completion?(nil, error)
            }
        }
    }

    // let startDatePredicate = NSPredicate(format: "%K > %@", argumentArray: [CreationDateKey, fromDate])
    // let predicate = NSCompoundPredicate(andPredicateWithSubpredicates: [startDatePredicate, endDatePredicate])
    func fetchRecordsFromDateRange(_ type: String, fromDate: Date, toDate: Date, completion: ((_ records: [Record]?, _ error: Error?) -> Void)?) {
        let startDatePredicate = try! QueryPredicate(format: "%K > %@", argumentArray: [CreationDateKey, fromDate])
        let endDatePredicate = try! QueryPredicate(format: "%K < %@", argumentArray: [CreationDateKey, toDate])
        let predicate = QueryPredicate(andPredicateWithSubpredicates: [startDatePredicate, endDatePredicate])
        self.fetchRecordsWithType(type, predicate: predicate, recordFetchedBlock: nil) { (records, error) in
            completion?(records, error)
        }
    }

    // operation.modifyRecordsCompletionBlock = completion
    func deleteRecordsWithID(_ recordIDs: [RecordID], completion: ((_ records: [Record]?, _ recordIDs: [RecordID]?, _ error: Error?) -> Void)?) {
        let operation = ModifyRecordsOperation(recordsToSave: nil, recordIDsToDelete: recordIDs)
        operation.savePolicy = .ifServerRecordUnchanged
        operation.modifyRecordsCompletionBlock = completion
        publicDatabase.add(operation)
    }

    // operation.savePolicy = .changedKeys
    // operation.queuePriority = .high
    // operation.qualityOfService = .userInteractive
    // operation.perRecordCompletionBlock = perRecordCompletion
    // operation.modifyRecordsCompletionBlock = { (records, recordIDs, error) -> Void in (completion?(records, error))! }
    func modifyRecords(_ records: [Record], perRecordCompletion: ((_ record: Record?, _ error: Error?) -> Void)?, completion: ((_ records: [Record]?, _ error: Error?) -> Void)?) {
        let operation = ModifyRecordsOperation(recordsToSave: records, recordIDsToDelete: nil)
        operation.savePolicy = .changedKeys
        operation.queuePriority = .high
        operation.qualityOfService = .userInteractive
        operation.perRecordCompletionBlock = perRecordCompletion
        operation.modifyRecordsCompletionBlock = { (records, recordIDs, error) -> Void in
            (completion?(records, error))!
        }
        publicDatabase.add(operation)
    }

    // The Swift 3 version: publicDatabase.save(record, completionHandler: { (record, error) in completion(record, error as NSError?) })
    func saveRecord(_ record: Record, completion: ((_ record: Record?, _ error: NSError?) -> Void)?) {
        publicDatabase.save(record, completionHandler: { (record, error) in
            if let completion = completion {
                completion(record, error as NSError?)
            }
        })
    }

    // let subscription = CKQuerySubscription(recordType: type, predicate: predicate, subscriptionID: subscriptonID, options: options)
    // let notificationInfo = CKNotificationInfo()
    func subscribe(_ type: String, predicate: QueryPredicate, subscriptonID: String, contentAvailable: Bool, alertBody: String? = nil,
                   desiredKeys: [String]? = nil, options: QuerySubscriptionOptions,
                   completion: ((_ subscription: Subscription?, _ error: Error?) -> Void)?) {
        let subscription = QuerySubscription(recordType: type, predicate: predicate, subscriptionID: subscriptonID, options: options)
        let notificationInfo = NotificationInfo()
        notificationInfo.alertBody = alertBody
        notificationInfo.shouldSendContentAvailable = contentAvailable
        notificationInfo.desiredKeys = desiredKeys
        subscription.notificationInfo = notificationInfo
        publicDatabase.save(subscription) { (subscription, error) in
            completion?(subscription, error)
        }
    }

    func unsubscribe(_ subscriptionID: String, completion: ((_ subscriptionID: String?, _ error: Error?) -> Void)?) {
        publicDatabase.delete(withSubscriptionID: subscriptionID) { (subscriptionID, error) in
            completion?(subscriptionID, error)
        }
    }

    func fetchSubscription(_ subscriptionID: String, completion: ((_ subscription: Subscription?, _ error: Error?) -> Void)?) {
        publicDatabase.fetch(withSubscriptionID: subscriptionID) { (subscription, error) in
            completion?(subscription, error)
        }
    }

    // CKContainer.default().accountStatus { (accountStatus: CKAccountStatus, error: Error?) -> Void in … }
    func checkCloudKitAvailability(_ done: @escaping @Sendable (String) -> Void) {
        container.accountStatus { (accountStatus: AccountStatus, error: Error?) -> Void in
            switch accountStatus {
            case .available: done("CloudKit available. Initializing full sync.")
            case .restricted: done("iCloud is not available due to restrictions")
            case .noAccount: done("There is no CloudKit account setup.")
            default: done("Synchronization is disabled")
            }
        }
    }
}

@Suite("DevMountain's CloudKitManager, ported")
struct DevMountainCloudKitManagerTests {
    private func contact(_ name: String) -> Record {
        let record = Record(recordType: "Contact", recordID: RecordID(recordName: name))
        record["name"] = name
        return record
    }

    @Test("records saved with .changedKeys are read back to the end through cursors handed the same blocks", arguments: TestEngine.all)
    func saveAndReadThroughCursors(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let manager = CloudKitManager(container: container)
            let records = (1...7).map { contact("c\($0)") }
            nonisolated(unsafe) var perRecord: [String] = []
            let saved: [Record]? = await awaitCallback { done in
                manager.modifyRecords(records, perRecordCompletion: { record, error in
                    perRecord.append(record?.recordID.recordName ?? "nil")
                }, completion: { records, _ in done(records) })
            }
            #expect(saved?.count == 7)
            #expect(perRecord.sorted() == records.map(\.recordID.recordName).sorted())

            nonisolated(unsafe) var streamed = 0
            let all: [Record]? = await awaitCallback { done in
                manager.fetchRecordsWithType("Contact", resultsLimit: 3, recordFetchedBlock: { _ in streamed += 1 }) { records, _ in done(records) }
            }
            #expect(all?.compactMap { $0["name"] as? String }.sorted() == records.map(\.recordID.recordName).sorted())
            #expect(streamed == 7)
        }
    }

    @Test("the current user's records are found by creatorUserRecordID given the user record's ID, and by a creation-date range", arguments: TestEngine.all)
    func currentUserRecords(engine: TestEngine) async throws {
        try await withStore(on: engine) { location, store in
            let container = try Container(identifier: "iCloud.com.example.contacts", store: location, userName: "alice")
            let manager = CloudKitManager(container: container)
            let before = Date().addingTimeInterval(-60)
            let saved: (Record?, NSError?) = await awaitCallback { done in manager.saveRecord(contact("mine")) { done(($0, $1)) } }
            #expect(saved.1 == nil)

            // Another user's record in the same public database.
            let other = try Container(identifier: "iCloud.com.example.contacts", store: location, userName: "bob")
            _ = try await other.publicCloudDatabase.save(contact("theirs"))

            let mine: [Record]? = await awaitCallback { done in manager.fetchCurrentUserRecords("Contact") { records, _ in done(records) } }
            #expect(mine?.map(\.recordID.recordName) == ["mine"])

            let inRange: [Record]? = await awaitCallback { done in
                manager.fetchRecordsFromDateRange("Contact", fromDate: before, toDate: Date().addingTimeInterval(60)) { records, _ in done(records) }
            }
            #expect(inRange?.map(\.recordID.recordName).sorted() == ["mine", "theirs"])
        }
    }

    @Test("a second save of a fresh record whose name exists fails, and error as NSError? carries CloudKit's code", arguments: TestEngine.all)
    func saveConflictAsNSError(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let manager = CloudKitManager(container: container)
            let _: (Record?, NSError?) = await awaitCallback { done in manager.saveRecord(contact("dup")) { done(($0, $1)) } }
            let again: (Record?, NSError?) = await awaitCallback { done in manager.saveRecord(contact("dup")) { done(($0, $1)) } }
            #expect(again.0 == nil)
            #expect(again.1?.domain == "CKErrorDomain")
            #expect(again.1?.code == StratusError.Code.serverRecordChanged.rawValue)
        }
    }

    @Test("records deleted with modifyRecordsCompletionBlock set to the caller's completion; subscriptions saved, fetched and removed", arguments: TestEngine.all)
    func deleteAndSubscribe(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let manager = CloudKitManager(container: container)
            let records = ["a", "b"].map { contact($0) }
            let _: [Record]? = await awaitCallback { done in manager.modifyRecords(records, perRecordCompletion: nil) { records, _ in done(records) } }
            let deleted: [RecordID]? = await awaitCallback { done in manager.deleteRecordsWithID(records.map(\.recordID)) { _, ids, _ in done(ids) } }
            #expect(deleted?.map(\.recordName).sorted() == ["a", "b"])

            let predicate = try QueryPredicate(format: "name == %@", "a")
            let subscription: Subscription? = await awaitCallback { done in
                manager.subscribe("Contact", predicate: predicate, subscriptonID: "contact-a", contentAvailable: true, alertBody: "A changed",
                                  desiredKeys: ["name"], options: [.firesOnRecordCreation, .firesOnRecordUpdate]) { subscription, _ in done(subscription) }
            }
            #expect(subscription?.subscriptionID == "contact-a")
            let fetched: Subscription? = await awaitCallback { done in manager.fetchSubscription("contact-a") { subscription, _ in done(subscription) } }
            #expect(fetched?.notificationInfo?.alertBody == "A changed")
            #expect(fetched?.notificationInfo?.desiredKeys == ["name"])
            #expect((fetched as? QuerySubscription)?.querySubscriptionOptions == [.firesOnRecordCreation, .firesOnRecordUpdate])
            let removed: String? = await awaitCallback { done in manager.unsubscribe("contact-a") { id, _ in done(id) } }
            #expect(removed == "contact-a")

            let status: String = await awaitCallback { done in manager.checkCloudKitAvailability(done) }
            #expect(status == "CloudKit available. Initializing full sync.")
        }
    }
}
