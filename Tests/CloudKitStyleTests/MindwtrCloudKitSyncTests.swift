import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// Mindwtr's CloudKit module (dongdongbh/Mindwtr, commit 0728998:
// `apps/mobile/modules/cloudkit-sync/ios/CloudKitSyncManager.swift` and
// `apps/mobile/modules/cloudkit-sync/ios/CloudKitChangeTracker.swift`), ported. The native half of a
// React Native app's sync: a custom zone made with `CKModifyRecordZonesOperation`, a zone
// subscription made only when `subscription(for:)` throws `unknownItem` (caught as `catch let error
// as CKError where error.code == .unknownItem`), saves cut into requests of 400 records with
// `.changedKeys` that collect `serverRecordChanged` IDs, deletes that swallow `partialFailure`, a full
// fetch that pages a `NSPredicate(value: true)` query by cursor (setting `zoneID` on the cursor's
// operation too), and a zone change fetch with `fetchAllChanges` whose token travels to JavaScript as
// base64 of its `NSKeyedArchiver` archive. This commit looks for `changeTokenExpired` only in the
// operation's final result; CloudKit reports a zone's own failure in `recordZoneFetchResultBlock`
// and the operation's result is `partialFailure` (Mindwtr's later commits, and Encamera's adapter,
// read the zone's error for that reason), so here an expired token reaches the caller as
// `partialFailure`, on CloudKit and on Stratus alike.
//
// What the port changes: the README's substitutions (the `CK` prefix; `NSPredicate(value:)` is
// `QueryPredicate(value:)`); the manager takes its container (`CKContainer(identifier:)` would be
// `try! Container(identifier:)` in the `lazy var`; the tests need a store each) and its `init` is not
// `private` (the app's `static let shared` is its only caller); `var config` is `let config` (the
// configuration is a class, in CloudKit too, so `var` draws "never mutated", which this project's
// build does not allow).

// MARK: - CloudKitSyncManager.swift

final class CloudKitSyncManager {

    let containerID = "iCloud.tech.dongdongbh.mindwtr"
    let zoneName = "MindwtrZone"
    let subscriptionID = "MindwtrZoneSubscription"

    private(set) var container: Container
    private(set) lazy var privateDB = container.privateCloudDatabase
    private(set) lazy var zoneID = RecordZone.ID(zoneName: zoneName, ownerName: CurrentUserDefaultName)

    private var zoneCreated = false
    private var subscriptionCreated = false

    init(container: Container) {
        self.container = container
    }

    // MARK: - Account Status

    func accountStatus() async throws -> AccountStatus {
        return try await container.accountStatus()
    }

    // MARK: - Zone Management

    func ensureZone() async throws {
        if zoneCreated { return }
        let zone = RecordZone(zoneID: zoneID)
        let op = ModifyRecordZonesOperation(recordZonesToSave: [zone], recordZoneIDsToDelete: nil)
        op.qualityOfService = .userInitiated
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
            op.modifyRecordZonesResultBlock = { result in
                switch result {
                case .success:
                    continuation.resume()
                case .failure(let error):
                    continuation.resume(throwing: error)
                }
            }
            privateDB.add(op)
        }
        zoneCreated = true
    }

    // MARK: - Subscription Management

    func ensureSubscription() async throws {
        if subscriptionCreated { return }

        do {
            _ = try await privateDB.subscription(for: subscriptionID)
            subscriptionCreated = true
            return
        } catch let error as StratusError where error.code == .unknownItem {
            // Subscription doesn't exist yet — create it
        }

        let subscription = RecordZoneSubscription(
            zoneID: zoneID,
            subscriptionID: subscriptionID
        )
        let notificationInfo = Subscription.NotificationInfo()
        notificationInfo.shouldSendContentAvailable = true // Silent push
        subscription.notificationInfo = notificationInfo

        let op = ModifySubscriptionsOperation(
            subscriptionsToSave: [subscription],
            subscriptionIDsToDelete: nil
        )
        op.qualityOfService = .utility
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
            op.modifySubscriptionsResultBlock = { result in
                switch result {
                case .success:
                    continuation.resume()
                case .failure(let error):
                    continuation.resume(throwing: error)
                }
            }
            privateDB.add(op)
        }
        subscriptionCreated = true
    }

    // MARK: - Batch Save

    /// Saves records to CloudKit. Returns IDs of records that had server conflicts.
    func saveRecords(_ records: [Record]) async throws -> [String] {
        if records.isEmpty { return [] }

        var conflictIDs: [String] = []
        // Process in batches of 400 (CloudKit limit is 400 per operation)
        let batchSize = 400
        for batchStart in stride(from: 0, to: records.count, by: batchSize) {
            let batchEnd = min(batchStart + batchSize, records.count)
            let batch = Array(records[batchStart..<batchEnd])

            let op = ModifyRecordsOperation(recordsToSave: batch, recordIDsToDelete: nil)
            op.savePolicy = .changedKeys
            op.qualityOfService = .userInitiated

            let batchConflicts = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[String], Error>) in
                var conflicts: [String] = []
                op.perRecordSaveBlock = { recordID, result in
                    if case .failure(let error) = result,
                       let ckError = error as? StratusError,
                       ckError.code == .serverRecordChanged {
                        conflicts.append(recordID.recordName)
                    }
                }
                op.modifyRecordsResultBlock = { result in
                    switch result {
                    case .success:
                        continuation.resume(returning: conflicts)
                    case .failure(let error):
                        if let ckError = error as? StratusError,
                           ckError.code == .partialFailure,
                           !conflicts.isEmpty {
                            continuation.resume(returning: conflicts)
                        } else {
                            continuation.resume(throwing: error)
                        }
                    }
                }
                privateDB.add(op)
            }
            conflictIDs.append(contentsOf: batchConflicts)
        }

        return conflictIDs
    }

    // MARK: - Batch Delete

    func deleteRecords(recordType: String, recordIDs: [String]) async throws {
        if recordIDs.isEmpty { return }
        let ckIDs = recordIDs.map { Record.ID(recordName: $0, zoneID: zoneID) }

        let batchSize = 400
        for batchStart in stride(from: 0, to: ckIDs.count, by: batchSize) {
            let batchEnd = min(batchStart + batchSize, ckIDs.count)
            let batch = Array(ckIDs[batchStart..<batchEnd])

            let op = ModifyRecordsOperation(recordsToSave: nil, recordIDsToDelete: batch)
            op.qualityOfService = .utility
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
                op.modifyRecordsResultBlock = { result in
                    switch result {
                    case .success:
                        continuation.resume()
                    case .failure(let error):
                        // Ignore "not found" errors on delete
                        if let ckError = error as? StratusError,
                           ckError.code == .partialFailure {
                            continuation.resume()
                        } else {
                            continuation.resume(throwing: error)
                        }
                    }
                }
                privateDB.add(op)
            }
        }
    }

    // MARK: - Full Fetch

    /// Fetches all records of a given type from the custom zone.
    func fetchAllRecords(recordType: String) async throws -> [Record] {
        var allRecords: [Record] = []
        var cursor: QueryOperation.Cursor?

        let query = Query(recordType: recordType, predicate: QueryPredicate(value: true))
        let initialOp = QueryOperation(query: query)
        initialOp.zoneID = zoneID
        initialOp.qualityOfService = .userInitiated

        let firstResult = try await runQueryOperation(initialOp)
        allRecords.append(contentsOf: firstResult.records)
        cursor = firstResult.cursor

        while let nextCursor = cursor {
            let continueOp = QueryOperation(cursor: nextCursor)
            continueOp.zoneID = zoneID
            continueOp.qualityOfService = .userInitiated
            let result = try await runQueryOperation(continueOp)
            allRecords.append(contentsOf: result.records)
            cursor = result.cursor
        }

        return allRecords
    }

    private func runQueryOperation(_ op: QueryOperation) async throws -> (records: [Record], cursor: QueryOperation.Cursor?) {
        return try await withCheckedThrowingContinuation { continuation in
            var records: [Record] = []
            op.recordMatchedBlock = { _, result in
                if case .success(let record) = result {
                    records.append(record)
                }
            }
            op.queryResultBlock = { result in
                switch result {
                case .success(let cursor):
                    continuation.resume(returning: (records, cursor))
                case .failure(let error):
                    continuation.resume(throwing: error)
                }
            }
            privateDB.add(op)
        }
    }
}

// MARK: - CloudKitChangeTracker.swift

enum CloudKitChangeTracker {

    struct ChangeResult {
        var changedRecords: [Record] = []
        var deletedRecordIDs: [(recordName: String, recordType: String)] = []
        var newChangeToken: String?
        var moreComing: Bool = false
    }

    /// Fetch changes since the given change token (base64 string, or nil for full fetch).
    static func fetchChanges(
        database: Database,
        zoneID: RecordZone.ID,
        changeTokenBase64: String?
    ) async throws -> ChangeResult {
        let previousToken = deserializeToken(changeTokenBase64)

        let config = FetchRecordZoneChangesOperation.ZoneConfiguration()   // `var` in the original
        config.previousServerChangeToken = previousToken

        let op = FetchRecordZoneChangesOperation(recordZoneIDs: [zoneID], configurationsByRecordZoneID: [zoneID: config])
        op.fetchAllChanges = true
        op.qualityOfService = .userInitiated

        return try await withCheckedThrowingContinuation { continuation in
            var result = ChangeResult()

            op.recordWasChangedBlock = { _, recordResult in
                if case .success(let record) = recordResult {
                    result.changedRecords.append(record)
                }
            }

            op.recordWithIDWasDeletedBlock = { recordID, recordType in
                result.deletedRecordIDs.append((
                    recordName: recordID.recordName,
                    recordType: recordType
                ))
            }

            op.recordZoneFetchResultBlock = { _, zoneResult in
                switch zoneResult {
                case .success(let (serverChangeToken, _, moreComing)):
                    result.newChangeToken = serializeToken(serverChangeToken)
                    result.moreComing = moreComing
                case .failure(let error):
                    // If the token expired, we'll catch this in the completion
                    NSLog("[CloudKitChangeTracker] Zone fetch error: \(error.localizedDescription)")
                }
            }

            op.fetchRecordZoneChangesResultBlock = { overallResult in
                switch overallResult {
                case .success:
                    continuation.resume(returning: result)
                case .failure(let error):
                    if let ckError = error as? StratusError, ckError.code == .changeTokenExpired {
                        // Signal to caller that a full fetch is needed
                        continuation.resume(throwing: ChangeTokenExpiredError())
                    } else {
                        continuation.resume(throwing: error)
                    }
                }
            }

            database.add(op)
        }
    }

    // MARK: - Token Serialization

    static func serializeToken(_ token: ServerChangeToken?) -> String? {
        guard let token = token else { return nil }
        do {
            let data = try NSKeyedArchiver.archivedData(withRootObject: token, requiringSecureCoding: true)
            return data.base64EncodedString()
        } catch {
            NSLog("[CloudKitChangeTracker] Failed to serialize change token: \(error)")
            return nil
        }
    }

    static func deserializeToken(_ base64: String?) -> ServerChangeToken? {
        guard let base64 = base64, !base64.isEmpty,
              let data = Data(base64Encoded: base64) else { return nil }
        do {
            return try NSKeyedUnarchiver.unarchivedObject(ofClass: ServerChangeToken.self, from: data)
        } catch {
            NSLog("[CloudKitChangeTracker] Failed to deserialize change token: \(error)")
            return nil
        }
    }
}

/// Thrown when the server change token has expired and a full re-fetch is needed.
struct ChangeTokenExpiredError: Error {
    var localizedDescription: String { "CloudKit change token expired; full fetch required" }
}

// MARK: - Tests

private func task(_ name: String, in zoneID: RecordZone.ID, title: String) -> Record {
    let record = Record(recordType: "Task", recordID: Record.ID(recordName: name, zoneID: zoneID))
    record["title"] = title
    record["status"] = "inbox"
    return record
}

@Suite("Mindwtr's CloudKit sync module, ported")
struct MindwtrCloudKitSyncTests {
    @Test("setting up: the account is available, the zone is made, the subscription is made once and found the next time", arguments: TestEngine.all)
    func setUp(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let manager = CloudKitSyncManager(container: container)
            #expect(try await manager.accountStatus() == .available)
            try await manager.ensureZone()
            try await manager.ensureSubscription()
            #expect(try await manager.privateDB.allSubscriptions().map(\.subscriptionID) == ["MindwtrZoneSubscription"])

            // A second launch finds it through subscription(for:) and saves nothing.
            let relaunched = CloudKitSyncManager(container: container)
            try await relaunched.ensureZone()
            try await relaunched.ensureSubscription()
            #expect(try await relaunched.privateDB.allSubscriptions().count == 1)
        }
    }

    @Test("450 tasks saved in requests of 400, read back by the cursor loop, deleted with names that were never saved", arguments: TestEngine.all)
    func batches(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let manager = CloudKitSyncManager(container: container)
            try await manager.ensureZone()
            let tasks = (0..<450).map { task(String(format: "task-%03d", $0), in: manager.zoneID, title: "Task \($0)") }
            #expect(try await manager.saveRecords(tasks).isEmpty)

            let all = try await manager.fetchAllRecords(recordType: "Task")
            #expect(all.count == 450)
            #expect(Set(all.map(\.recordID.recordName)).count == 450, "no record twice across pages")

            try await manager.deleteRecords(recordType: "Task", recordIDs: tasks.prefix(420).map(\.recordID.recordName) + ["never-saved"])
            #expect(try await manager.fetchAllRecords(recordType: "Task").map(\.recordID.recordName).sorted() == tasks.suffix(30).map(\.recordID.recordName))
        }
    }

    @Test("saves with .changedKeys compare no change tags: a stale copy is written without a conflict", arguments: TestEngine.all)
    func changedKeysNeverConflict(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let manager = CloudKitSyncManager(container: container)
            try await manager.ensureZone()
            _ = try await manager.saveRecords([task("t1", in: manager.zoneID, title: "Buy milk")])
            let fetched = try #require(try await manager.fetchAllRecords(recordType: "Task").first)
            let stale = fetched.copy() as! Record
            fetched["status"] = "next"
            #expect(try await manager.saveRecords([fetched]).isEmpty)
            stale["title"] = "Buy oat milk"
            #expect(try await manager.saveRecords([stale]).isEmpty, "no serverRecordChanged with .changedKeys")
            let stored = try await manager.privateDB.record(for: fetched.recordID)
            #expect(stored["title"] as? String == "Buy oat milk")
            #expect(stored["status"] as? String == "next", "only the changed key was written")
        }
    }

    @Test("zone changes with the token as base64 text: everything first, then the delta with the deleted records' types", arguments: TestEngine.all)
    func changeTracking(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let manager = CloudKitSyncManager(container: container)
            try await manager.ensureZone()
            let project = Record(recordType: "Project", recordID: Record.ID(recordName: "p1", zoneID: manager.zoneID))
            project["title"] = "Garden"
            _ = try await manager.saveRecords([project, task("t1", in: manager.zoneID, title: "Dig"), task("t2", in: manager.zoneID, title: "Plant")])

            let first = try await CloudKitChangeTracker.fetchChanges(database: manager.privateDB, zoneID: manager.zoneID, changeTokenBase64: nil)
            #expect(Set(first.changedRecords.map(\.recordID.recordName)) == ["p1", "t1", "t2"])
            #expect(first.deletedRecordIDs.isEmpty && !first.moreComing)
            let token = try #require(first.newChangeToken)
            #expect(CloudKitChangeTracker.deserializeToken(token) != nil, "the base64 text reads back as a token")
            #expect(CloudKitChangeTracker.deserializeToken("not base64!") == nil)

            try await manager.deleteRecords(recordType: "Project", recordIDs: ["p1"])
            _ = try await manager.saveRecords([task("t3", in: manager.zoneID, title: "Water")])
            let delta = try await CloudKitChangeTracker.fetchChanges(database: manager.privateDB, zoneID: manager.zoneID, changeTokenBase64: token)
            #expect(delta.changedRecords.map(\.recordID.recordName) == ["t3"])
            #expect(delta.deletedRecordIDs.map { "\($0.recordType):\($0.recordName)" } == ["Project:p1"])

            let none = try await CloudKitChangeTracker.fetchChanges(database: manager.privateDB, zoneID: manager.zoneID, changeTokenBase64: delta.newChangeToken)
            #expect(none.changedRecords.isEmpty && none.deletedRecordIDs.isEmpty)
        }
    }

    @Test("an expired token reaches this commit's caller as partialFailure naming the zone's changeTokenExpired, not as ChangeTokenExpiredError", arguments: TestEngine.all)
    func expiredToken(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let manager = CloudKitSyncManager(container: container)
            try await manager.ensureZone()
            _ = try await manager.saveRecords([task("t1", in: manager.zoneID, title: "Dig")])
            let token = try #require(try await CloudKitChangeTracker.fetchChanges(database: manager.privateDB, zoneID: manager.zoneID, changeTokenBase64: nil).newChangeToken)

            _ = try await manager.privateDB.deleteRecordZone(withID: manager.zoneID)
            _ = try await manager.privateDB.save(RecordZone(zoneID: manager.zoneID))
            do {
                _ = try await CloudKitChangeTracker.fetchChanges(database: manager.privateDB, zoneID: manager.zoneID, changeTokenBase64: token)
                Issue.record("a token of a deleted zone was accepted")
            } catch let error as StratusError {
                #expect(error.code == .partialFailure)
                #expect((error.partialErrorsByItemID?[manager.zoneID] as? StratusError)?.code == .changeTokenExpired)
            }
            let fresh = try await CloudKitChangeTracker.fetchChanges(database: manager.privateDB, zoneID: manager.zoneID, changeTokenBase64: nil)
            #expect(fresh.changedRecords.isEmpty, "the zone made again is empty")
        }
    }
}
