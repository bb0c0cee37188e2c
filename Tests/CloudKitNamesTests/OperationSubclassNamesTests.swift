import CloudKit
import Foundation
import StratusTestSupport
import Testing

// Operation subclasses as apps write them: a designated `init()` of their own that sets the
// app's defaults, and CloudKit's convenience initialisers (`init(query:)`, `init(recordIDs:)`,
// `init(recordZonesToSave:recordZoneIDsToDelete:)`…) inherited from it, as on Apple's platforms.

final class InboxQueryOperation: CKQueryOperation, @unchecked Sendable {
    override init() {
        super.init()
        resultsLimit = 2
    }
}

final class InboxFetchOperation: CKFetchRecordsOperation, @unchecked Sendable {
    override init() {
        super.init()
        desiredKeys = ["subject"]
    }
}

final class InboxZoneMaker: CKModifyRecordZonesOperation, @unchecked Sendable {
    override init() {
        super.init()
        qualityOfService = .utility
    }
}

final class InboxZoneFetcher: CKFetchRecordZonesOperation, @unchecked Sendable {
    override init() {
        super.init()
        qualityOfService = .utility
    }
}

final class InboxChangesReader: CKFetchRecordZoneChangesOperation, @unchecked Sendable {
    override init() {
        super.init()
        fetchAllChanges = true
    }
}

final class InboxDatabaseChangesReader: CKFetchDatabaseChangesOperation, @unchecked Sendable {
    override init() {
        super.init()
        fetchAllChanges = true
    }
}

final class InboxSubscriptionSaver: CKModifySubscriptionsOperation, @unchecked Sendable {
    override init() {
        super.init()
        qualityOfService = .utility
    }
}

final class InboxSubscriptionFetcher: CKFetchSubscriptionsOperation, @unchecked Sendable {
    override init() {
        super.init()
        qualityOfService = .utility
    }
}

/// Runs `operation` on `database` and waits until it has finished.
private func run(_ operation: CKDatabaseOperation, on database: CKDatabase) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        operation.completionBlock = { continuation.resume() }
        database.add(operation)
    }
}

@Suite struct OperationSubclassNamesTests {
    @Test(arguments: TestEngine.all)
    func subclassesInheritCloudKitsInitializers(engine: TestEngine) async throws {
        try await withTestCloud(on: engine) { cloud in
            let database = try cloud.container().privateCloudDatabase
            let zoneID = CKRecordZone.ID(zoneName: "Inbox", ownerName: CKCurrentUserDefaultName)

            let zoneMaker = InboxZoneMaker(recordZonesToSave: [CKRecordZone(zoneID: zoneID)], recordZoneIDsToDelete: nil)
            var zonesSaved: [CKRecordZone.ID] = []
            zoneMaker.perRecordZoneSaveBlock = { id, result in if case .success = result { zonesSaved.append(id) } }
            await run(zoneMaker, on: database)
            #expect(zonesSaved == [zoneID] && zoneMaker.qualityOfService == .utility, "the subclass's own init ran, and the zone was saved")

            let zoneFetcher = InboxZoneFetcher(recordZoneIDs: [zoneID])
            var zonesFetched: [CKRecordZone.ID] = []
            zoneFetcher.perRecordZoneResultBlock = { id, result in if case .success = result { zonesFetched.append(id) } }
            await run(zoneFetcher, on: database)
            #expect(zonesFetched == [zoneID])

            let messages = (1...3).map { number -> CKRecord in
                let message = CKRecord(recordType: "Message", recordID: CKRecord.ID(recordName: "message-\(number)", zoneID: zoneID))
                message["subject"] = "Subject \(number)"
                message["body"] = "Body \(number)"
                return message
            }
            _ = try await database.modifyRecords(saving: messages, deleting: [])

            let fetch = InboxFetchOperation(recordIDs: messages.map(\.recordID))
            var fetchedKeys: [String: [String]] = [:]
            fetch.perRecordResultBlock = { id, result in
                if let record = try? result.get() { fetchedKeys[id.recordName] = record.allKeys().sorted() }
            }
            await run(fetch, on: database)
            #expect(fetchedKeys == ["message-1": ["subject"], "message-2": ["subject"], "message-3": ["subject"]],
                    "init(recordIDs:) kept the subclass's desiredKeys")

            let query = CKQuery(recordType: "Message", predicate: NSPredicate(value: true))
            query.sortDescriptors = [NSSortDescriptor(key: "subject", ascending: true)]
            let firstPage = InboxQueryOperation(query: query)
            firstPage.zoneID = zoneID
            var names: [String] = []
            var cursor: CKQueryOperation.Cursor?
            firstPage.recordMatchedBlock = { id, _ in names.append(id.recordName) }
            firstPage.queryResultBlock = { result in cursor = try? result.get() }
            await run(firstPage, on: database)
            #expect(names == ["message-1", "message-2"], "init(query:) kept the subclass's resultsLimit of 2")
            let nextPage = InboxQueryOperation(cursor: try #require(cursor))
            nextPage.recordMatchedBlock = { id, _ in names.append(id.recordName) }
            await run(nextPage, on: database)
            #expect(names == ["message-1", "message-2", "message-3"])

            let changes = InboxChangesReader(recordZoneIDs: [zoneID], configurationsByRecordZoneID: nil)
            var changed: Set<String> = []
            changes.recordWasChangedBlock = { id, _ in changed.insert(id.recordName) }
            await run(changes, on: database)
            #expect(changed == ["message-1", "message-2", "message-3"] && changes.fetchAllChanges)

            let databaseChanges = InboxDatabaseChangesReader(previousServerChangeToken: nil)
            var zonesChanged: [CKRecordZone.ID] = []
            databaseChanges.recordZoneWithIDChangedBlock = { zonesChanged.append($0) }
            await run(databaseChanges, on: database)
            #expect(zonesChanged == [zoneID])

            let subscription = CKRecordZoneSubscription(zoneID: zoneID, subscriptionID: "inbox-changes")
            let notificationInfo = CKSubscription.NotificationInfo()
            notificationInfo.shouldSendContentAvailable = true
            subscription.notificationInfo = notificationInfo
            let subscriptionSaver = InboxSubscriptionSaver(subscriptionsToSave: [subscription], subscriptionIDsToDelete: nil)
            var subscriptionsSaved: [CKSubscription.ID] = []
            subscriptionSaver.perSubscriptionSaveBlock = { id, result in if case .success = result { subscriptionsSaved.append(id) } }
            await run(subscriptionSaver, on: database)
            #expect(subscriptionsSaved == ["inbox-changes"])

            let subscriptionFetcher = InboxSubscriptionFetcher(subscriptionIDs: ["inbox-changes"])
            var subscriptionsFetched: [CKSubscription.ID] = []
            subscriptionFetcher.perSubscriptionResultBlock = { id, result in if case .success = result { subscriptionsFetched.append(id) } }
            await run(subscriptionFetcher, on: database)
            #expect(subscriptionsFetched == ["inbox-changes"])
        }
    }

    @Test(arguments: TestEngine.all)
    func performReturnsTheFirstPageAsync(engine: TestEngine) async throws {
        try await withTestCloud(on: engine) { cloud in
            let database = try cloud.container().publicCloudDatabase
            let notes = (1...3).map { number -> CKRecord in
                let note = CKRecord(recordType: "Note")
                note["title"] = "Note \(number)"
                return note
            }
            _ = try await database.modifyRecords(saving: notes, deleting: [])
            // iOS 15's async form, as code of that year writes it.
            let query = CKQuery(recordType: "Note", predicate: NSPredicate(format: "title BEGINSWITH %@", "Note"))
            let records = try await database.perform(query, inZoneWith: nil)
            #expect(Set(records.compactMap { $0["title"] as? String }) == ["Note 1", "Note 2", "Note 3"])
            let missing = await caughtError { try await database.perform(CKQuery(recordType: "Note", predicate: NSPredicate(value: true)), inZoneWith: CKRecordZone.ID(zoneName: "Nowhere")) }
            #expect((missing as? CKError)?.code == .zoneNotFound, "\(String(describing: missing))")
        }
    }
}
