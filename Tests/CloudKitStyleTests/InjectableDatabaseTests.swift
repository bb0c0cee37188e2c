import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// A CloudKit wrapper in the style of Canopy, ported mechanically. It reaches CloudKit only
// through small protocols that `CKDatabase` and `CKContainer` are made to conform to with empty
// extensions (`extension CKDatabase: CKDatabaseType {}`), so tests can hand it a double that
// replays canned results by calling the operations' blocks itself. Its modify call splits work
// into batches, halves the batch when CloudKit answers `limitExceeded`, retries retriable
// errors after `retryAfterSeconds`, and turns errors into a Codable value read through
// `errorCode`, `retryAfterSeconds` and `partialErrorsByItemID`. Test doubles archive their
// canned records with `NSKeyedArchiver` as an array. The CloudKit original is in the comments.

// public protocol CKDatabaseType {
//   var debugDescription: String { get }
//   var databaseScope: CKDatabase.Scope { get }
//   func add(_ operation: CKDatabaseOperation)
// }
protocol DatabaseType: Sendable {
    var debugDescription: String { get }
    var databaseScope: Database.Scope { get }
    func add(_ operation: DatabaseOperation)
}

// public protocol CKContainerType {
//   func fetchUserRecordID(completionHandler: @escaping @Sendable (CKRecord.ID?, Error?) -> Void)
//   func accountStatus(completionHandler: @escaping @Sendable (CKAccountStatus, Error?) -> Void)
//   func add(_ operation: CKOperation)
// }
protocol ContainerType: Sendable {
    func fetchUserRecordID(completionHandler: @escaping @Sendable (Record.ID?, Error?) -> Void)
    func accountStatus(completionHandler: @escaping @Sendable (AccountStatus, Error?) -> Void)
    func add(_ operation: DatabaseOperation)
}

// extension CKDatabase: CKDatabaseType {}
// extension CKContainer: CKContainerType {}
extension Database: DatabaseType {}
extension Container: ContainerType {}

/// Canopy's `CKRecordError`: a Codable, comparable summary of a CloudKit error.
struct RecordError: Error, Codable, Equatable {
    let code: Int
    let localizedDescription: String
    let retryAfterSeconds: Double
    let batchErrors: [String: RecordError]

    init(from error: Error) {
        localizedDescription = error.localizedDescription
        if let ckError = error as? StratusError {
            code = ckError.errorCode
            retryAfterSeconds = ckError.retryAfterSeconds ?? 0
            batchErrors = RecordError.parseBatchErrors(dict: ckError.partialErrorsByItemID ?? [:])
        } else {
            let nsError = error as NSError
            code = nsError.code
            retryAfterSeconds = (nsError.userInfo[ErrorRetryAfterKey] as? NSNumber)?.doubleValue ?? 0
            batchErrors = RecordError.parseBatchErrors(dict: (nsError.userInfo[PartialErrorsByItemIDKey] as? [AnyHashable: Error]) ?? [:])
        }
    }

    private static func parseBatchErrors(dict: [AnyHashable: Error]) -> [String: RecordError] {
        dict.reduce(into: [:]) { partial, element in
            guard let recordID = element.key as? Record.ID, let recordError = element.value as? StratusError else { return }
            partial[recordID.recordName] = RecordError(from: recordError)
        }
    }

    var isRetriable: Bool {
        [StratusError.Code.serviceUnavailable, .requestRateLimited, .zoneBusy].map(\.rawValue).contains(code)
    }

    // CKError(ckErrorCode!, userInfo: [CKErrorRetryAfterKey: retryAfterSeconds]) : CKError(ckErrorCode!)
    var ckError: StratusError {
        let ckErrorCode = StratusError.Code(rawValue: code)
        return isRetriable ? StratusError(ckErrorCode!, userInfo: [ErrorRetryAfterKey: retryAfterSeconds]) : StratusError(ckErrorCode!)
    }

    static func == (lhs: RecordError, rhs: RecordError) -> Bool {
        lhs.code == rhs.code && lhs.retryAfterSeconds == rhs.retryAfterSeconds && lhs.batchErrors == rhs.batchErrors
    }
}

/// Canopy's `CloudKitRecordArchive`: records kept as one `NSKeyedArchiver` archive of an array.
struct RecordArchive: Codable {
    private let data: Data

    var records: [Record] {
        let decoded = try? NSKeyedUnarchiver.unarchivedObject(ofClasses: [NSArray.self, Record.self], from: data)
        return decoded as? [Record] ?? []
    }

    init(records: [Record]) {
        data = (try? NSKeyedArchiver.archivedData(withRootObject: records, requiringSecureCoding: true)) ?? Data()
    }
}

/// What a modify call produced.
struct ModifyRecordsResult {
    let savedRecords: [Record]
    let deletedRecordIDs: [Record.ID]
}

/// Collects one operation's per-item results: the blocks run one at a time, but they are
/// `@Sendable`, so the state they share is a locked class.
final class ModifyCollector: @unchecked Sendable {
    private let lock = NSLock()
    private var saved: [Record] = []
    private var deleted: [Record.ID] = []
    private var error: RecordError?
    func save(_ result: Result<Record, Error>) {
        lock.lock(); defer { lock.unlock() }
        switch result {
        case .success(let record): saved.append(record)
        case .failure(let failure): error = RecordError(from: failure)
        }
    }
    func delete(_ id: Record.ID, _ result: Result<Void, Error>) {
        lock.lock(); defer { lock.unlock() }
        switch result {
        case .success: deleted.append(id)
        case .failure(let failure): error = RecordError(from: failure)
        }
    }
    var outcome: Result<ModifyRecordsResult, RecordError> {
        lock.lock(); defer { lock.unlock() }
        if let error { return .failure(error) }
        return .success(ModifyRecordsResult(savedRecords: saved, deletedRecordIDs: deleted))
    }
}

/// Canopy's `ModifyRecords`: batches, halving on limitExceeded, retries of retriable errors.
enum ModifyRecords {
    static let batchSize = 400

    static func with(recordsToSave: [Record]?, recordIDsToDelete: [Record.ID]?, database: DatabaseType,
                     customBatchSize: Int? = nil, autoBatchToSmallerWhenLimitExceeded: Bool = true) async -> Result<ModifyRecordsResult, RecordError> {
        var saved: [Record] = []
        var deleted: [Record.ID] = []
        var currentBatchSize = customBatchSize ?? batchSize
        var saves = chunk(recordsToSave ?? [], into: currentBatchSize)
        var deletes = chunk(recordIDsToDelete ?? [], into: currentBatchSize)
        while true {
            let saveChunk = saves.first
            let deleteChunk = deletes.first
            if saveChunk == nil, deleteChunk == nil {
                return .success(ModifyRecordsResult(savedRecords: saved, deletedRecordIDs: deleted))
            }
            if saveChunk != nil { saves.removeFirst() }
            if deleteChunk != nil { deletes.removeFirst() }
            switch await performOneOperationWithRetry(recordsToSave: saveChunk, recordIDsToDelete: deleteChunk, database: database) {
            case .success(let result):
                saved += result.savedRecords
                deleted += result.deletedRecordIDs
            case .failure(let error):
                // if error == CKRecordError(from: CKError(CKError.Code.limitExceeded)), autoBatchToSmallerWhenLimitExceeded
                if error == RecordError(from: StratusError(StratusError.Code.limitExceeded)), autoBatchToSmallerWhenLimitExceeded {
                    currentBatchSize /= 2
                    saved = []
                    deleted = []
                    saves = chunk(recordsToSave ?? [], into: currentBatchSize)
                    deletes = chunk(recordIDsToDelete ?? [], into: currentBatchSize)
                } else {
                    return .failure(error)
                }
            }
        }
    }

    private static func performOneOperationWithRetry(recordsToSave: [Record]?, recordIDsToDelete: [Record.ID]?, database: DatabaseType) async -> Result<ModifyRecordsResult, RecordError> {
        var retriesRemaining = 3
        var result: Result<ModifyRecordsResult, RecordError>
        repeat {
            result = await performOneOperation(recordsToSave: recordsToSave, recordIDsToDelete: recordIDsToDelete, database: database)
            guard case .failure(let error) = result, error.isRetriable, error.retryAfterSeconds > 0 else { return result }
            retriesRemaining -= 1
            // Double(NSEC_PER_SEC) on Apple platforms: Darwin's constant, which Linux lacks.
            try? await Task.sleep(nanoseconds: UInt64(error.retryAfterSeconds * 1_000_000_000))
        } while retriesRemaining > 0
        return result
    }

    private static func performOneOperation(recordsToSave: [Record]?, recordIDsToDelete: [Record.ID]?, database: DatabaseType) async -> Result<ModifyRecordsResult, RecordError> {
        await withCheckedContinuation { continuation in
            let modifyOperation = ModifyRecordsOperation(recordsToSave: recordsToSave, recordIDsToDelete: recordIDsToDelete)
            modifyOperation.qualityOfService = .userInitiated
            modifyOperation.savePolicy = .changedKeys
            modifyOperation.isAtomic = true
            let collector = ModifyCollector()
            modifyOperation.perRecordSaveBlock = { _, result in collector.save(result) }
            modifyOperation.perRecordDeleteBlock = { recordID, result in collector.delete(recordID, result) }
            modifyOperation.modifyRecordsResultBlock = { result in
                switch result {
                case .failure(let error): continuation.resume(returning: .failure(RecordError(from: error)))
                case .success: continuation.resume(returning: collector.outcome)
                }
            }
            database.add(modifyOperation)
        }
    }

    static func chunk<T>(_ array: [T], into size: Int) -> [[T]] {
        stride(from: 0, to: array.count, by: size).map { Array(array[$0..<min($0 + size, array.count)]) }
    }
}

/// Canopy's `ReplayingMockCKDatabase`: answers each operation it is given with the next canned
/// result, by calling the operation's blocks itself.
actor ReplayingMockDatabase: DatabaseType {
    enum OperationResult {
        /// Saved records (archived, as Canopy keeps them) or an error for the whole request.
        case modify(saved: RecordArchive, result: Result<Void, RecordError>)
    }

    private var results: [OperationResult]
    private(set) var operationsRun = 0
    private(set) var batchSizes: [Int] = []

    init(results: [OperationResult]) {
        self.results = results
    }

    nonisolated var debugDescription: String { "ReplayingMockDatabase" }
    nonisolated var databaseScope: Database.Scope { .private }

    nonisolated func add(_ operation: DatabaseOperation) {
        Task { await run(operation) }
    }

    private func run(_ operation: DatabaseOperation) {
        guard !results.isEmpty else { fatalError("no canned result for \(operation)") }
        let result = results.removeFirst()
        operationsRun += 1
        switch (result, operation) {
        case let (.modify(saved, outcome), modify as ModifyRecordsOperation):
            batchSizes.append(modify.recordsToSave?.count ?? 0)
            for record in saved.records {
                modify.perRecordSaveBlock?(record.recordID, .success(record))
            }
            modify.modifyRecordsResultBlock?(outcome.mapError { $0.ckError })
        default:
            fatalError("canned result \(result) does not match \(operation)")
        }
    }
}

@Suite("A CloudKit wrapper behind injectable protocols (Canopy), ported", .timeLimit(.minutes(30)))
struct InjectableDatabaseTests {
    private func notes(_ count: Int, zoneID: RecordZone.ID = .default) -> [Record] {
        (0..<count).map { index in
            let record = Record(recordType: "Note", recordID: Record.ID(recordName: "note-\(index)", zoneID: zoneID))
            record["index"] = index
            return record
        }
    }

    @Test("Database and Container conform to the wrapper's protocols with empty extensions; batches go to the real store", arguments: TestEngine.all)
    func realDatabaseThroughProtocols(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let containerType: ContainerType = container
            let status: AccountStatus = await withCheckedContinuation { continuation in
                containerType.accountStatus { status, _ in continuation.resume(returning: status) }
            }
            #expect(status == .available)
            let userID: Record.ID? = await withCheckedContinuation { continuation in
                containerType.fetchUserRecordID { id, _ in continuation.resume(returning: id) }
            }
            #expect(userID?.recordName.hasPrefix("_") == true)

            let database: DatabaseType = container.privateCloudDatabase
            #expect(database.databaseScope == .private)
            #expect(database.debugDescription.contains("iCloud.com.example.app"))
            #expect(database.debugDescription.contains("private"))
            #expect("\(container.publicCloudDatabase)".contains("public"))

            let zone = RecordZone(zoneName: "Notes")
            _ = try await container.privateCloudDatabase.save(zone)
            let result = await ModifyRecords.with(recordsToSave: notes(9, zoneID: zone.zoneID), recordIDsToDelete: nil, database: database, customBatchSize: 4)
            let saved = try result.get()
            #expect(saved.savedRecords.map(\.recordID.recordName).sorted() == (0..<9).map { "note-\($0)" }.sorted())
            #expect(saved.savedRecords.allSatisfy { $0.recordChangeTag != nil })

            let deleted = try await ModifyRecords.with(recordsToSave: nil, recordIDsToDelete: saved.savedRecords.prefix(5).map(\.recordID), database: database, customBatchSize: 2).get()
            #expect(deleted.deletedRecordIDs.count == 5)
            let (remaining, _) = try await container.privateCloudDatabase.records(matching: Query(recordType: "Note", predicate: QueryPredicate(value: true)), inZoneWith: zone.zoneID)
            #expect(remaining.count == 4)
        }
    }

    @Test("a double that replays archived records: limitExceeded halves the batch, a retriable error is retried after retryAfterSeconds")
    func replayingDouble() async throws {
        let records = notes(8)
        let archive = { (range: Range<Int>) in RecordArchive(records: Array(records[range])) }
        #expect(archive(0..<2).records.map(\.recordID.recordName) == ["note-0", "note-1"])
        let limit = RecordError(from: StratusError(.limitExceeded))
        let busy = RecordError(from: StratusError(.zoneBusy, userInfo: [ErrorRetryAfterKey: 0.01]))
        #expect(busy.retryAfterSeconds == 0.01)
        #expect(busy.isRetriable)
        let mock = ReplayingMockDatabase(results: [
            .modify(saved: RecordArchive(records: []), result: .failure(limit)),         // 8 at once: too many
            .modify(saved: archive(0..<4), result: .success(())),
            .modify(saved: RecordArchive(records: []), result: .failure(busy)),          // retried
            .modify(saved: archive(4..<8), result: .success(())),
        ])
        let result = try await ModifyRecords.with(recordsToSave: records, recordIDsToDelete: nil, database: mock, customBatchSize: 8).get()
        #expect(result.savedRecords.map(\.recordID.recordName) == records.map(\.recordID.recordName))
        #expect(await mock.operationsRun == 4)
        #expect(await mock.batchSizes == [8, 4, 4, 4])
    }

    @Test("errors summarised as Codable values: a partial failure's item errors by record name; ckError rebuilds the error", arguments: TestEngine.all)
    func recordErrors(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let zone = RecordZone(zoneName: "Notes")
            _ = try await container.privateCloudDatabase.save(zone)
            // .changedKeys (latest wins) never conflicts; a reference to another zone is what
            // CloudKit refuses: invalidArguments for it, batchRequestFailed for its neighbour in
            // the atomic zone, partialFailure for the request.
            let stale = notes(1, zoneID: zone.zoneID)[0]
            stale["elsewhere"] = Record.Reference(recordID: Record.ID(recordName: "x"), action: .none)
            let fresh = Record(recordType: "Note", recordID: Record.ID(recordName: "fresh", zoneID: zone.zoneID))
            let result = await ModifyRecords.with(recordsToSave: [stale, fresh], recordIDsToDelete: nil, database: container.privateCloudDatabase)
            guard case .failure(let error) = result else {
                Issue.record("expected a failure")
                return
            }
            #expect(error.code == StratusError.Code.partialFailure.rawValue)
            #expect(error.batchErrors["note-0"]?.code == StratusError.Code.invalidArguments.rawValue)
            #expect(error.batchErrors["fresh"]?.code == StratusError.Code.batchRequestFailed.rawValue)
            let encoded = try JSONEncoder().encode(error)
            #expect(try JSONDecoder().decode(RecordError.self, from: encoded) == error)
            #expect(error.ckError.code == .partialFailure)
            #expect(RecordError(from: StratusError(.requestRateLimited, userInfo: [ErrorRetryAfterKey: 3])).ckError.retryAfterSeconds == 3)
        }
    }
}
