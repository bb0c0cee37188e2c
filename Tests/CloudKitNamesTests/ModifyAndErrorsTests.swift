import CloudKit
import Foundation
import StratusTestSupport
import Testing

// Saving and handling CloudKit's errors as apps do: CKModifyRecordsOperation with its save
// policies, atomicity, per-record blocks and the older completion blocks, partial failures,
// conflicts resolved from serverRecord/clientRecord/ancestorRecord, retry-after, fetch
// operations, operation configurations and groups.

/// The error handling every CloudKit app writes once.
enum CloudKitErrorHandler {
    enum Advice: Equatable {
        case retry(after: TimeInterval)
        case resolveConflict
        case recreateZone
        case resetToken
        case giveUp(String)
        case ignore
    }

    static func advice(for error: Error) -> Advice {
        guard let ckError = error as? CKError else { return .giveUp(error.localizedDescription) }
        switch ckError.code {
        case .networkUnavailable, .networkFailure, .serviceUnavailable, .requestRateLimited, .zoneBusy, .serverResponseLost:
            return .retry(after: ckError.retryAfterSeconds ?? 3)
        case .serverRecordChanged:
            return .resolveConflict
        case .zoneNotFound, .userDeletedZone:
            return .recreateZone
        case .changeTokenExpired:
            return .resetToken
        case .unknownItem:
            return .ignore
        case .partialFailure, .batchRequestFailed, .limitExceeded, .quotaExceeded, .notAuthenticated, .permissionFailure,
             .invalidArguments, .operationCancelled, .constraintViolation, .assetFileNotFound, .assetFileModified,
             .incompatibleVersion, .internalError, .badContainer, .badDatabase, .missingEntitlement, .resultsTruncated,
             .serverRejectedRequest, .managedAccountRestricted, .participantMayNeedVerification, .alreadyShared,
             .tooManyParticipants, .referenceViolation, .accountTemporarilyUnavailable, .assetNotAvailable,
             .participantAlreadyInvited:
            return .giveUp(ckError.localizedDescription)
        @unknown default:
            return .giveUp("unknown")
        }
    }
}

final class TaskUploader {
    let database: CKDatabase
    let zoneID: CKRecordZone.ID

    init(database: CKDatabase, zoneID: CKRecordZone.ID) {
        self.database = database
        self.zoneID = zoneID
    }

    /// Saves and deletes in one request, reporting each record, with the iOS 8 to 14 blocks.
    func upload(_ records: [CKRecord], deleting recordIDs: [CKRecord.ID], atomically: Bool,
                completion: @escaping (_ saved: [CKRecord], _ deleted: [CKRecord.ID], _ perRecordErrors: [CKRecord.ID: Error], _ error: Error?) -> Void) {
        let operation = CKModifyRecordsOperation(recordsToSave: records, recordIDsToDelete: recordIDs)
        operation.savePolicy = .ifServerRecordUnchanged
        operation.isAtomic = atomically
        var perRecordErrors: [CKRecord.ID: Error] = [:]
        operation.perRecordCompletionBlock = { record, error in
            if let error = error {
                perRecordErrors[record.recordID] = error
            }
        }
        operation.modifyRecordsCompletionBlock = { saved, deleted, error in
            completion(saved ?? [], deleted ?? [], perRecordErrors, error)
        }
        let configuration = CKOperation.Configuration()
        configuration.qualityOfService = .utility
        configuration.timeoutIntervalForRequest = 30
        configuration.timeoutIntervalForResource = 300
        configuration.allowsCellularAccess = false
        operation.configuration = configuration
        let group = CKOperationGroup()
        group.name = "Upload"
        group.expectedSendSize = .kilobytes
        group.expectedReceiveSize = .kilobytes
        group.quantity = records.count
        operation.group = group
        database.add(operation)
    }
}

@Suite struct ModifyAndErrorsTests {
    private func makeZone(_ database: CKDatabase, _ name: String) async throws -> CKRecordZone.ID {
        let zone = CKRecordZone(zoneName: name)
        _ = try await database.modifyRecordZones(saving: [zone], deleting: [])
        return zone.zoneID
    }

    @Test(arguments: TestEngine.all)
    func aPartialFailureNamesEachFailedRecord(engine: TestEngine) async throws {
        try await withTestCloud(on: engine) { cloud in
            let database = try cloud.container().privateCloudDatabase
            let zoneID = try await makeZone(database, "Tasks")
            let uploader = TaskUploader(database: database, zoneID: zoneID)
            let first = CKRecord(recordType: "Task", recordID: CKRecord.ID(recordName: "t1", zoneID: zoneID))
            first["title"] = "Write report"
            let (saved, _, _, error) = await awaitCompletion { done in uploader.upload([first], deleting: [], atomically: false) { done(($0, $1, $2, $3)) } }
            #expect(error == nil)
            #expect(saved.count == 1)

            // A stale copy (no change tag) beside a new record: not atomic, the new one is saved.
            let stale = CKRecord(recordType: "Task", recordID: CKRecord.ID(recordName: "t1", zoneID: zoneID))
            stale["title"] = "Rewrite report"
            let second = CKRecord(recordType: "Task", recordID: CKRecord.ID(recordName: "t2", zoneID: zoneID))
            second["title"] = "Book flights"
            let (savedNow, _, perRecord, failure) = await awaitCompletion { done in
                uploader.upload([stale, second], deleting: [], atomically: false) { done(($0, $1, $2, $3)) }
            }
            #expect(savedNow.map(\.recordID) == [second.recordID])
            let ckError = try #require(failure as? CKError)
            #expect(ckError.code == .partialFailure)
            let partial = try #require(ckError.partialErrorsByItemID)
            #expect(partial.count == 1)
            let conflict = try #require(partial[stale.recordID] as? CKError)
            #expect(conflict.code == .serverRecordChanged)
            #expect(CloudKitErrorHandler.advice(for: conflict) == .resolveConflict)
            #expect(conflict.serverRecord?["title"] as? String == "Write report")
            #expect(conflict.clientRecord?["title"] as? String == "Rewrite report")
            #expect((perRecord[stale.recordID] as? CKError)?.code == .serverRecordChanged)
            // The userInfo as Objective-C code reads it.
            let nsError = ckError as NSError
            #expect((nsError.userInfo[CKPartialErrorsByItemIDKey] as? [AnyHashable: Error])?.count == 1)

            // Resolved: the server's record with the client's change, saved again.
            let resolved = try #require(conflict.serverRecord)
            resolved["title"] = conflict.clientRecord?["title"]
            let result = try await database.modifyRecords(saving: [resolved], deleting: [], savePolicy: .ifServerRecordUnchanged, atomically: true)
            #expect(try result.saveResults[resolved.recordID]?.get()["title"] as? String == "Rewrite report")
        }
    }

    @Test(arguments: TestEngine.all)
    func anAtomicFailureFailsTheRestWithBatchRequestFailed(engine: TestEngine) async throws {
        try await withTestCloud(on: engine) { cloud in
            let database = try cloud.container().privateCloudDatabase
            let zoneID = try await makeZone(database, "Tasks")
            let existing = CKRecord(recordType: "Task", recordID: CKRecord.ID(recordName: "t1", zoneID: zoneID))
            _ = try await database.save(existing)
            let stale = CKRecord(recordType: "Task", recordID: CKRecord.ID(recordName: "t1", zoneID: zoneID))
            stale["title"] = "stale"
            let fresh = CKRecord(recordType: "Task", recordID: CKRecord.ID(recordName: "t2", zoneID: zoneID))

            let operation = CKModifyRecordsOperation(recordsToSave: [stale, fresh])
            operation.isAtomic = true
            var perRecord: [CKRecord.ID: Result<CKRecord, Error>] = [:]
            operation.perRecordSaveBlock = { recordID, result in perRecord[recordID] = result }
            let final: Result<Void, Error> = await awaitCompletion { done in
                operation.modifyRecordsResultBlock = { done($0) }
                database.add(operation)
            }
            guard case .failure(let error) = final else {
                Issue.record("an atomic save with a conflict succeeded")
                return
            }
            #expect((error as? CKError)?.code == .partialFailure)
            guard case .failure(let freshError)? = perRecord[fresh.recordID] else {
                Issue.record("the record beside the conflict was saved in an atomic request")
                return
            }
            #expect((freshError as? CKError)?.code == .batchRequestFailed)
            do {
                _ = try await database.record(for: fresh.recordID)
                Issue.record("an atomic request left a record behind")
            } catch CKError.unknownItem {
                // As CloudKit: nothing of the request was written.
            }
        }
    }

    @Test(arguments: TestEngine.all)
    func savePoliciesAsCloudKitAppliesThem(engine: TestEngine) async throws {
        try await withTestCloud(on: engine) { cloud in
            let database = try cloud.container().privateCloudDatabase
            let note = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "n1"))
            note["title"] = "One"
            note["body"] = "first"
            _ = try await database.save(note)

            // .changedKeys overwrites only the keys this copy changed, whatever the server holds.
            let partial = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "n1"))
            partial["title"] = "Two"
            _ = try await database.modifyRecords(saving: [partial], deleting: [], savePolicy: .changedKeys)
            let afterChanged = try await database.record(for: note.recordID)
            #expect(afterChanged["title"] as? String == "Two")
            #expect(afterChanged["body"] as? String == "first")

            // .allKeys writes every key of this copy, and only its keys stay.
            let whole = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "n1"))
            whole["title"] = "Three"
            _ = try await database.modifyRecords(saving: [whole], deleting: [], savePolicy: .allKeys)
            let afterAll = try await database.record(for: note.recordID)
            #expect(afterAll["title"] as? String == "Three")

            // The default policy refuses a copy older than the server's.
            afterChanged["title"] = "stale"
            do {
                _ = try await database.save(afterChanged)
                Issue.record("a stale save succeeded")
            } catch let error as CKError where error.code == .serverRecordChanged {
                #expect(error.serverRecord?["title"] as? String == "Three")
                #expect(error.ancestorRecord?["title"] as? String == "Two")
            }

            // Deleting with the async API, and deleting what is not there.
            let (_, deleteResults) = try await database.modifyRecords(saving: [], deleting: [note.recordID, CKRecord.ID(recordName: "never")])
            #expect(deleteResults.count == 2)
            try deleteResults[note.recordID]?.get()
        }
    }

    @Test(arguments: TestEngine.all)
    func fetchOperationsWithBothGenerationsOfBlocks(engine: TestEngine) async throws {
        try await withTestCloud(on: engine) { cloud in
            let container = try cloud.container()
            let database = container.privateCloudDatabase
            let records = (1...3).map { index -> CKRecord in
                let record = CKRecord(recordType: "Photo", recordID: CKRecord.ID(recordName: "p\(index)"))
                record["caption"] = "Photo \(index)"
                record["width"] = index * 100
                return record
            }
            _ = try await database.modifyRecords(saving: records, deleting: [])
            let missing = CKRecord.ID(recordName: "p404")

            let operation = CKFetchRecordsOperation(recordIDs: records.map(\.recordID) + [missing])
            operation.desiredKeys = ["caption"]
            var fetched: [CKRecord.ID: CKRecord] = [:]
            var failures: [CKRecord.ID: Error] = [:]
            operation.perRecordResultBlock = { recordID, result in
                switch result {
                case .success(let record): fetched[recordID] = record
                case .failure(let error): failures[recordID] = error
                }
            }
            let final: Result<Void, Error> = await awaitCompletion { done in
                operation.fetchRecordsResultBlock = { done($0) }
                database.add(operation)
            }
            #expect((try? final.get()) == nil, "a missing record fails the operation with a partial failure")
            #expect(fetched.count == 3)
            #expect(fetched[records[0].recordID]?["caption"] as? String == "Photo 1")
            #expect(fetched[records[0].recordID]?["width"] == nil)
            #expect((failures[missing] as? CKError)?.code == .unknownItem)

            let older = CKFetchRecordsOperation(recordIDs: [records[1].recordID])
            var perRecordCalls = 0
            older.perRecordCompletionBlock = { record, recordID, error in
                #expect(record?.recordID == recordID)
                #expect(error == nil)
                perRecordCalls += 1
            }
            let recordsByID: [CKRecord.ID: CKRecord]? = await awaitCompletion { done in
                older.fetchRecordsCompletionBlock = { recordsByID, error in
                    #expect(error == nil)
                    done(recordsByID)
                }
                older.database = database
                let queue = OperationQueue()
                queue.maxConcurrentOperationCount = 1
                queue.addOperation(older)
            }
            #expect(recordsByID?[records[1].recordID]?["width"] as? Int == 200)
            #expect(perRecordCalls == 1)

            // The current user's record, as apps fetch it at start-up.
            let userOperation = CKFetchRecordsOperation.fetchCurrentUserRecordOperation()
            let userRecord: CKRecord? = await awaitCompletion { done in
                userOperation.perRecordResultBlock = { _, result in done(try? result.get()) }
                container.publicCloudDatabase.add(userOperation)
            }
            #expect(userRecord?.recordType == CKRecord.SystemType.userRecord)

            // configuredWith(configuration:group:) around async calls.
            let configuration = CKOperation.Configuration()
            configuration.qualityOfService = .background
            let group = CKOperationGroup()
            group.name = "Prefetch"
            let caption = try await database.configuredWith(configuration: configuration, group: group) { database in
                try await database.record(for: records[2].recordID)["caption"] as? String
            }
            #expect(caption == "Photo 3")
        }
    }

    @Test func errorsMadeAsAppTestsMakeThem() {
        let retry = CKError(.requestRateLimited, userInfo: [CKErrorRetryAfterKey: 2.5])
        #expect(retry.retryAfterSeconds == 2.5)
        #expect(CloudKitErrorHandler.advice(for: retry) == .retry(after: 2.5))
        #expect(CloudKitErrorHandler.advice(for: CKError(.zoneNotFound)) == .recreateZone)
        #expect(CloudKitErrorHandler.advice(for: CKError(.changeTokenExpired)) == .resetToken)
        let bridged = NSError(domain: CKErrorDomain, code: CKError.Code.userDeletedZone.rawValue, userInfo: nil)
        #expect(CloudKitErrorHandler.advice(for: bridged) == .recreateZone)
        #expect(CKError(_nsError: bridged).code == .userDeletedZone)
        let record = CKRecord(recordType: "Note")
        let conflict = CKError(.serverRecordChanged, userInfo: [CKRecordChangedErrorServerRecordKey: record])
        #expect(conflict.serverRecord === record)
        let partial = CKError(.partialFailure, userInfo: [CKPartialErrorsByItemIDKey: [record.recordID: conflict]])
        #expect((partial.partialErrorsByItemID?[record.recordID] as? CKError)?.code == .serverRecordChanged)
        #expect(CKError.Code(rawValue: 14) == .serverRecordChanged)
        #expect(partial.errorCode == CKError.partialFailure.rawValue)
        switch conflict.code {
        case CKError.serverRecordChanged: break
        default: Issue.record("a code did not match its static name")
        }
    }
}
