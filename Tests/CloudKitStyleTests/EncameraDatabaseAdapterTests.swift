import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// Encamera's CloudKit database seam (Encamera/EncameraCore:
// `Sources/EncameraCore/CloudKit/CloudKitDatabaseAdapter.swift` and its error translator
// `Sources/EncameraCore/CloudKit/CloudKitMediaStoreError.swift`), ported. A modern adapter that
// wraps every call in a `CKOperation`: saves whose per-record failures become one synthesized
// `NSError(domain: CKError.errorDomain, code: partialFailure, userInfo: [CKPartialErrorsByItemIDKey:
// [CKRecord.ID: Error]])`, a `withTaskCancellationHandler` bridge that cancels the operation when
// the awaiting task is cancelled, fetched assets copied ("snapshotted") into a folder of the app's
// own inside `perRecordResultBlock` and put back into the record as new `CKAsset`s, a query loop over
// cursors, a one-zone change fetch that keeps the deleted records' types and rethrows the zone's own
// error (`changeTokenExpired`, `zoneNotFound`) from `recordZoneFetchResultBlock` rather than the
// operation's `partialFailure`, and `mapCKError`, which reads `partialErrorsByItemID` keys `as?
// CKRecord.ID`, collapses agreeing per-record failures and reads `CKErrorRetryAfterKey` from the
// bridged `NSError`'s `userInfo` `as? TimeInterval`.
//
// What the port changes: the README's substitutions (the `CK` prefix; `NSPredicate` as a type is
// `QueryPredicate`; `CKOperation` as a type is `DatabaseOperation`; `CKError` is `StratusError`); the
// protocol `CloudKitDatabaseAdapter` is declared inside `enum EncameraCore` (the module it comes
// from), as SyncKit's port in this test module has a protocol of that name; `DebugPrintable` is a
// stand-in that logs into `encameraLog` instead of `debugPrint`.

// MARK: - Stand-ins

let encameraLog = SampleLog()

/// Encamera's `DebugPrintable` (`Extensions/DebugPrintable.swift`), logging for the tests.
public protocol DebugPrintable {}

extension DebugPrintable {
    public static func printDebug(_ items: Any..., separator: String = " ", terminator: String = "\n") {
        let className = String(describing: type(of: self))
        let message = items.map { "\($0)" }.joined(separator: separator)
        encameraLog.append("\(className): \(message)")
    }
}

/// The module's name, holding the one declaration another port in this test module also has.
public enum EncameraCore {
    /// Everything the store needs from a CloudKit database, expressed at a level that
    /// is trivial to fake. The store stays free of `CKOperation` wiring.
    public protocol CloudKitDatabaseAdapter: AnyObject {
        func save(records: [Record],
                  savePolicy: ModifyRecordsOperation.RecordSavePolicy,
                  perRecordProgress: @escaping (Record.ID, Double) -> Void) async throws -> [Record]

        func delete(recordIDs: [Record.ID]) async throws -> [Record.ID]

        func fetch(recordIDs: [Record.ID],
                   desiredKeys: [Record.FieldKey]?,
                   qualityOfService: QualityOfService,
                   perRecordProgress: @escaping (Record.ID, Double) -> Void) async throws -> [Record.ID: Record]

        func query(recordType: String,
                   predicate: QueryPredicate,
                   zoneID: RecordZone.ID,
                   desiredKeys: [Record.FieldKey]?,
                   qualityOfService: QualityOfService) async throws -> [Record]

        func fetchZoneChanges(zoneID: RecordZone.ID,
                              since token: ServerChangeToken?,
                              desiredKeys: [Record.FieldKey]?) async throws -> ZoneChangesResult

        func saveSubscription(_ subscription: Subscription) async throws

        func cancelAll()
    }
}

// MARK: - CloudKitDatabaseAdapter.swift

/// A record the zone reports as deleted.
public struct DeletedRecord: Equatable, Sendable {
    public let recordName: String
    public let recordType: String

    public init(recordName: String, recordType: String) {
        self.recordName = recordName
        self.recordType = recordType
    }
}

public struct ZoneChangesResult {
    public let changed: [Record]
    public let deleted: [DeletedRecord]
    public let token: ServerChangeToken?
    public let moreComing: Bool

    public init(changed: [Record],
                deleted: [DeletedRecord],
                token: ServerChangeToken?,
                moreComing: Bool) {
        self.changed = changed
        self.deleted = deleted
        self.token = token
        self.moreComing = moreComing
    }
}

public extension EncameraCore.CloudKitDatabaseAdapter {
    func fetch(recordIDs: [Record.ID],
               desiredKeys: [Record.FieldKey]?,
               perRecordProgress: @escaping (Record.ID, Double) -> Void) async throws -> [Record.ID: Record] {
        try await fetch(recordIDs: recordIDs,
                        desiredKeys: desiredKeys,
                        qualityOfService: .userInitiated,
                        perRecordProgress: perRecordProgress)
    }

    func query(recordType: String,
               predicate: QueryPredicate,
               zoneID: RecordZone.ID,
               desiredKeys: [Record.FieldKey]?) async throws -> [Record] {
        try await query(recordType: recordType,
                        predicate: predicate,
                        zoneID: zoneID,
                        desiredKeys: desiredKeys,
                        qualityOfService: .userInitiated)
    }
}

/// Wraps a real `CKDatabase`, executing each call as a `CKOperation`.
public final class CKDatabaseAdapter: EncameraCore.CloudKitDatabaseAdapter, DebugPrintable {

    private let database: Database

    private let lock = NSLock()
    private var inFlight: [DatabaseOperation] = []

    public init(database: Database) {
        self.database = database
    }

    // MARK: Save / delete

    public func save(records: [Record],
                     savePolicy: ModifyRecordsOperation.RecordSavePolicy,
                     perRecordProgress: @escaping (Record.ID, Double) -> Void) async throws -> [Record] {
        let operation = ModifyRecordsOperation(recordsToSave: records, recordIDsToDelete: nil)
        operation.savePolicy = savePolicy
        operation.qualityOfService = .userInitiated

        return try await Self.runCancellable(operation) { continuation in
            var saved: [Record] = []
            var perRecordFailures: [Record.ID: Error] = [:]
            operation.perRecordProgressBlock = { record, fraction in
                perRecordProgress(record.recordID, fraction)
            }
            operation.perRecordSaveBlock = { recordID, result in
                switch result {
                case .success(let record):
                    saved.append(record)
                case .failure(let error):
                    perRecordFailures[recordID] = error
                    Self.printDebug("save per-record FAILED recordName=\(recordID.recordName) error=\(error)")
                }
            }
            operation.modifyRecordsResultBlock = { [weak self] result in
                self?.untrack(operation)
                switch result {
                case .success:
                    if !perRecordFailures.isEmpty {
                        Self.printDebug("save reported success with \(perRecordFailures.count) per-record failure(s): \(perRecordFailures.keys.map(\.recordName))")
                        continuation.resume(throwing: Self.perRecordSaveFailureError(perRecordFailures))
                    } else {
                        Self.printDebug("save ok records=\(saved.count)")
                        continuation.resume(returning: saved)
                    }
                case .failure(let error):
                    Self.printDebug("save FAILED records=\(records.map(\.recordID.recordName)) error=\(error) perRecordFailures=\(perRecordFailures.mapValues { "\($0)" })")
                    continuation.resume(throwing: error)
                }
            }
            self.track(operation)
            self.database.add(operation)
        }
    }

    static func perRecordSaveFailureError(_ failures: [Record.ID: Error]) -> Error {
        NSError(domain: StratusError.errorDomain,
                code: StratusError.Code.partialFailure.rawValue,
                userInfo: [PartialErrorsByItemIDKey: failures])
    }

    public func delete(recordIDs: [Record.ID]) async throws -> [Record.ID] {
        try await withCheckedThrowingContinuation { continuation in
            let operation = ModifyRecordsOperation(recordsToSave: nil, recordIDsToDelete: recordIDs)
            operation.savePolicy = .ifServerRecordUnchanged
            operation.qualityOfService = .userInitiated

            var deleted: [Record.ID] = []
            operation.perRecordDeleteBlock = { recordID, result in
                switch result {
                case .success: deleted.append(recordID)
                case .failure(let error): Self.printDebug("delete per-record FAILED recordName=\(recordID.recordName) error=\(error)")
                }
            }
            operation.modifyRecordsResultBlock = { [weak self] result in
                self?.untrack(operation)
                switch result {
                case .success: continuation.resume(returning: deleted.isEmpty ? recordIDs : deleted)
                case .failure(let error): continuation.resume(throwing: error)
                }
            }
            self.track(operation)
            self.database.add(operation)
        }
    }

    // MARK: Fetch

    public func fetch(recordIDs: [Record.ID],
                      desiredKeys: [Record.FieldKey]?,
                      qualityOfService: QualityOfService,
                      perRecordProgress: @escaping (Record.ID, Double) -> Void) async throws -> [Record.ID: Record] {
        let operation = FetchRecordsOperation(recordIDs: recordIDs)
        operation.desiredKeys = desiredKeys
        operation.qualityOfService = qualityOfService

        return try await Self.runCancellable(operation) { continuation in
            var fetched: [Record.ID: Record] = [:]
            operation.perRecordProgressBlock = { recordID, fraction in
                perRecordProgress(recordID, fraction)
            }
            operation.perRecordResultBlock = { recordID, result in
                if case .success(let record) = result {
                    Self.snapshotAssets(of: record)
                    fetched[recordID] = record
                }
            }
            operation.fetchRecordsResultBlock = { [weak self] result in
                self?.untrack(operation)
                switch result {
                case .success: continuation.resume(returning: fetched)
                case .failure(let error): continuation.resume(throwing: error)
                }
            }
            self.track(operation)
            self.database.add(operation)
        }
    }

    public static var assetSnapshotDirectory: URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("ckassets", isDirectory: true)
    }

    public static func isSnapshot(_ url: URL?) -> Bool {
        guard let url else { return false }
        return url.deletingLastPathComponent().standardizedFileURL == assetSnapshotDirectory.standardizedFileURL
    }

    public static func discardSnapshot(at url: URL?) {
        guard let url, isSnapshot(url) else { return }
        try? FileManager.default.removeItem(at: url)
    }

    static func snapshotAssets(of record: Record) {
        let directory = assetSnapshotDirectory
        for key in record.allKeys() {
            guard let asset = record[key] as? Asset, let sourceURL = asset.fileURL else { continue }
            let destination = directory.appendingPathComponent("ckasset-\(UUID().uuidString)-\(key)")
            do {
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
                try FileManager.default.copyItem(at: sourceURL, to: destination)
                record[key] = Asset(fileURL: destination)
            } catch {
                Self.printDebug("snapshotAssets FAILED recordName=\(record.recordID.recordName) key=\(key) raw=\(error)")
            }
        }
    }

    static func runCancellable<T>(_ operation: DatabaseOperation,
                                  start: @escaping (CheckedContinuation<T, Error>) -> Void) async throws -> T {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, Error>) in
                start(continuation)
            }
        } onCancel: {
            operation.cancel()
        }
    }

    // MARK: Query (handles cursor paging)

    public func query(recordType: String,
                      predicate: QueryPredicate,
                      zoneID: RecordZone.ID,
                      desiredKeys: [Record.FieldKey]?,
                      qualityOfService: QualityOfService) async throws -> [Record] {
        var all: [Record] = []
        var cursor: QueryOperation.Cursor?
        repeat {
            let (page, next) = try await runQuery(recordType: recordType,
                                                  predicate: predicate,
                                                  zoneID: zoneID,
                                                  desiredKeys: desiredKeys,
                                                  qualityOfService: qualityOfService,
                                                  cursor: cursor)
            all.append(contentsOf: page)
            cursor = next
        } while cursor != nil
        return all
    }

    private func runQuery(recordType: String,
                          predicate: QueryPredicate,
                          zoneID: RecordZone.ID,
                          desiredKeys: [Record.FieldKey]?,
                          qualityOfService: QualityOfService,
                          cursor: QueryOperation.Cursor?) async throws -> ([Record], QueryOperation.Cursor?) {
        try await withCheckedThrowingContinuation { continuation in
            let operation: QueryOperation
            if let cursor = cursor {
                operation = QueryOperation(cursor: cursor)
            } else {
                operation = QueryOperation(query: Query(recordType: recordType, predicate: predicate))
            }
            operation.zoneID = zoneID
            operation.desiredKeys = desiredKeys
            operation.qualityOfService = qualityOfService

            var records: [Record] = []
            operation.recordMatchedBlock = { _, result in
                if case .success(let record) = result { records.append(record) }
            }
            operation.queryResultBlock = { [weak self] result in
                self?.untrack(operation)
                switch result {
                case .success(let nextCursor): continuation.resume(returning: (records, nextCursor))
                case .failure(let error): continuation.resume(throwing: error)
                }
            }
            self.track(operation)
            self.database.add(operation)
        }
    }

    // MARK: Zone changes

    public func fetchZoneChanges(zoneID: RecordZone.ID,
                                 since token: ServerChangeToken?,
                                 desiredKeys: [Record.FieldKey]?) async throws -> ZoneChangesResult {
        try await withCheckedThrowingContinuation { continuation in
            let config = FetchRecordZoneChangesOperation.ZoneConfiguration()
            config.previousServerChangeToken = token
            config.desiredKeys = desiredKeys
            let operation = FetchRecordZoneChangesOperation(recordZoneIDs: [zoneID],
                                                            configurationsByRecordZoneID: [zoneID: config])
            operation.qualityOfService = .userInitiated

            var changed: [Record] = []
            var deleted: [DeletedRecord] = []
            var newToken: ServerChangeToken? = token
            var moreComing = false
            var zoneError: Error?

            operation.recordWasChangedBlock = { _, result in
                if case .success(let record) = result { changed.append(record) }
            }
            operation.recordWithIDWasDeletedBlock = { recordID, recordType in
                deleted.append(DeletedRecord(recordName: recordID.recordName, recordType: recordType))
            }
            operation.recordZoneChangeTokensUpdatedBlock = { _, serverToken, _ in
                if let serverToken = serverToken { newToken = serverToken }
            }
            operation.recordZoneFetchResultBlock = { _, result in
                switch result {
                case .success(let (serverChangeToken, _, moreComingFlag)):
                    newToken = serverChangeToken
                    moreComing = moreComingFlag
                case .failure(let error):
                    zoneError = error
                }
            }
            operation.fetchRecordZoneChangesResultBlock = { [weak self] result in
                self?.untrack(operation)
                if let zoneError {
                    continuation.resume(throwing: zoneError)
                    return
                }
                switch result {
                case .success:
                    continuation.resume(returning: ZoneChangesResult(changed: changed,
                                                                      deleted: deleted,
                                                                      token: newToken,
                                                                      moreComing: moreComing))
                case .failure(let error):
                    continuation.resume(throwing: error)
                }
            }
            self.track(operation)
            self.database.add(operation)
        }
    }

    // MARK: Subscriptions

    public func saveSubscription(_ subscription: Subscription) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
            let operation = ModifySubscriptionsOperation(subscriptionsToSave: [subscription],
                                                         subscriptionIDsToDelete: nil)
            operation.qualityOfService = .utility
            operation.modifySubscriptionsResultBlock = { [weak self] result in
                self?.untrack(operation)
                switch result {
                case .success: continuation.resume()
                case .failure(let error): continuation.resume(throwing: error)
                }
            }
            self.track(operation)
            self.database.add(operation)
        }
    }

    // MARK: Cancellation / tracking

    public func cancelAll() {
        lock.lock()
        let operations = inFlight
        inFlight.removeAll()
        lock.unlock()
        operations.forEach { $0.cancel() }
    }

    private func track(_ operation: DatabaseOperation) {
        lock.lock(); inFlight.append(operation); lock.unlock()
    }

    private func untrack(_ operation: DatabaseOperation) {
        lock.lock(); inFlight.removeAll { $0 === operation }; lock.unlock()
    }

    /// How many operations are in flight (not in the original: the tests read it).
    var inFlightCount: Int { lock.lock(); defer { lock.unlock() }; return inFlight.count }
}

// MARK: - CloudKitMediaStoreError.swift

public enum CloudKitMediaStoreError: Error, CustomStringConvertible {
    case accountUnavailable
    case quotaExceeded
    case retry(after: TimeInterval)
    case partial(failed: [String: Error])
    case conflict(serverRecord: Record?)
    case cancelled
    case notFound
    case zoneNotFound
    case changeTokenExpired
    case operationNotSupported(String)
    case underlying(Error)

    public var description: String {
        switch self {
        case .accountUnavailable: return "CloudKit account unavailable"
        case .quotaExceeded: return "iCloud storage is full"
        case .retry(let after): return "Retry after \(after)s"
        case .partial(let failed): return "Partial failure (\(failed.count) failed)"
        case .conflict: return "Server record changed (conflict)"
        case .cancelled: return "Operation cancelled"
        case .notFound: return "Record or asset not found"
        case .zoneNotFound: return "CloudKit zone not found"
        case .changeTokenExpired: return "CloudKit change token expired"
        case .operationNotSupported(let what): return "Operation not supported for CloudKit: \(what)"
        case .underlying(let error): return "CloudKit error: \(error)"
        }
    }

    public var isRetryable: Bool {
        switch self {
        case .retry: return true
        default: return false
        }
    }
}

extension CloudKitMediaStoreError {

    public var unwrappingPartial: CloudKitMediaStoreError {
        guard case .partial(let failed) = self, !failed.isEmpty else { return self }
        let mapped = failed.values.map(mapCKError)
        if mapped.count == 1 { return mapped[0] }
        let kinds = Set(mapped.map(\.collapsibleKind))
        guard kinds.count == 1, let kind = kinds.first, let kind else { return self }
        switch kind {
        case .notFound: return .notFound
        case .conflict: return .conflict(serverRecord: nil)
        case .quotaExceeded: return .quotaExceeded
        case .accountUnavailable: return .accountUnavailable
        case .zoneNotFound: return .zoneNotFound
        case .changeTokenExpired: return .changeTokenExpired
        }
    }

    private enum CollapsibleKind: Hashable {
        case notFound, conflict, quotaExceeded, accountUnavailable, zoneNotFound, changeTokenExpired
    }

    private var collapsibleKind: CollapsibleKind? {
        switch self {
        case .notFound: return .notFound
        case .conflict: return .conflict
        case .quotaExceeded: return .quotaExceeded
        case .accountUnavailable: return .accountUnavailable
        case .zoneNotFound: return .zoneNotFound
        case .changeTokenExpired: return .changeTokenExpired
        default: return nil
        }
    }
}

public func mapCKError(_ error: Error) -> CloudKitMediaStoreError {
    if let already = error as? CloudKitMediaStoreError { return already.unwrappingPartial }
    guard let ckError = error as? StratusError else { return .underlying(error) }
    let userInfo = (error as NSError).userInfo

    switch ckError.code {
    case .quotaExceeded:
        return .quotaExceeded
    case .notAuthenticated, .managedAccountRestricted:
        return .accountUnavailable
    case .operationCancelled:
        return .cancelled
    case .unknownItem:
        return .notFound
    case .zoneNotFound, .userDeletedZone:
        return .zoneNotFound
    case .changeTokenExpired:
        return .changeTokenExpired
    case .serverRecordChanged:
        return .conflict(serverRecord: ckError.serverRecord)
    case .partialFailure:
        var failed: [String: Error] = [:]
        for (key, value) in ckError.partialErrorsByItemID ?? [:] {
            if let recordID = key as? Record.ID {
                failed[recordID.recordName] = value
            } else {
                failed["\(key)"] = value
            }
        }
        return CloudKitMediaStoreError.partial(failed: failed).unwrappingPartial
    case .zoneBusy, .serviceUnavailable, .requestRateLimited, .networkUnavailable, .networkFailure:
        let after = (userInfo[ErrorRetryAfterKey] as? TimeInterval) ?? defaultRetryInterval
        return .retry(after: after)
    default:
        if let after = userInfo[ErrorRetryAfterKey] as? TimeInterval {
            return .retry(after: after)
        }
        return .underlying(ckError)
    }
}

private let defaultRetryInterval: TimeInterval = 3

// MARK: - Tests

/// Counts progress calls from the operation's thread.
private final class ProgressCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var ids: [Record.ID] = []
    func add(_ id: Record.ID) { lock.withLock { ids.append(id) } }
    var recorded: [Record.ID] { lock.withLock { ids } }
}

private func media(_ name: String, in zoneID: RecordZone.ID, album: String) -> Record {
    let record = Record(recordType: "EncMedia", recordID: Record.ID(recordName: name, zoneID: zoneID))
    record["album"] = album
    record["capturedAt"] = Date(timeIntervalSince1970: 1_700_000_000)
    return record
}

@Suite("Encamera's CloudKit database adapter, ported")
struct EncameraDatabaseAdapterTests {
    private let zoneID = RecordZone.ID(zoneName: "EncameraMedia")

    @Test("save, fetch, query over pages and delete through the adapter; progress per record", arguments: TestEngine.all)
    func roundTrip(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            _ = try await database.save(RecordZone(zoneID: zoneID))
            let adapter = CKDatabaseAdapter(database: database)
            let progress = ProgressCounter()
            let records = (0..<300).map { media(String(format: "m%03d", $0), in: zoneID, album: $0 % 2 == 0 ? "trip" : "home") }
            let saved = try await adapter.save(records: records, savePolicy: .ifServerRecordUnchanged) { id, _ in progress.add(id) }
            #expect(saved.count == 300)
            #expect(saved.allSatisfy { $0.recordChangeTag != nil })
            #expect(Set(progress.recorded) == Set(records.map(\.recordID)))

            let fetched = try await adapter.fetch(recordIDs: [records[0].recordID, records[1].recordID], desiredKeys: ["album"]) { _, _ in }
            #expect(fetched[records[0].recordID]?["album"] as? String == "trip")
            #expect(fetched[records[1].recordID]?["capturedAt"] == nil, "only the desired keys")

            let trip = try await adapter.query(recordType: "EncMedia", predicate: QueryPredicate(format: "album == %@", "trip"), zoneID: zoneID, desiredKeys: nil)
            #expect(trip.count == 150, "every page, through the cursors")

            let gone = try await adapter.delete(recordIDs: [records[0].recordID, Record.ID(recordName: "never-saved", zoneID: zoneID)])
            #expect(Set(gone) == [records[0].recordID, Record.ID(recordName: "never-saved", zoneID: zoneID)], "deleting what is not there succeeds")
            #expect(adapter.inFlightCount == 0, "every operation untracked by its final block")
        }
    }

    @Test("a stale save: the operation fails with partialFailure, and mapCKError unwraps it to a conflict carrying the server record", arguments: TestEngine.all)
    func staleSaveIsAConflict(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            _ = try await database.save(RecordZone(zoneID: zoneID))
            let adapter = CKDatabaseAdapter(database: database)
            let original = try #require(try await adapter.save(records: [media("m1", in: zoneID, album: "trip")], savePolicy: .ifServerRecordUnchanged) { _, _ in }.first)
            let stale = original.copy() as! Record
            original["album"] = "work"
            _ = try await adapter.save(records: [original], savePolicy: .ifServerRecordUnchanged) { _, _ in }

            stale["album"] = "home"
            do {
                _ = try await adapter.save(records: [stale], savePolicy: .ifServerRecordUnchanged) { _, _ in }
                Issue.record("a stale save succeeded")
            } catch {
                guard case .conflict(let serverRecord) = mapCKError(error) else {
                    Issue.record("expected a conflict, got \(mapCKError(error))")
                    return
                }
                #expect(serverRecord?["album"] as? String == "work")
            }

            // With a new record beside it in the atomic zone: the new one fails batchRequestFailed,
            // so the two failures do not agree and the partial failure stays, naming both records.
            do {
                _ = try await adapter.save(records: [stale, media("m2", in: zoneID, album: "trip")], savePolicy: .ifServerRecordUnchanged) { _, _ in }
                Issue.record("a stale save succeeded")
            } catch {
                guard case .partial(let failed) = mapCKError(error) else {
                    Issue.record("expected a partial failure, got \(mapCKError(error))")
                    return
                }
                #expect(Set(failed.keys) == ["m1", "m2"])
                #expect((failed["m2"] as? StratusError)?.code == .batchRequestFailed)
            }
            // `.changedKeys` writes over the server's version instead.
            let written = try await adapter.save(records: [stale], savePolicy: .changedKeys) { _, _ in }
            #expect(written.first?["album"] as? String == "home")
        }
    }

    @Test("the partial failure the adapter synthesizes as an NSError of CKErrorDomain reads back through mapCKError", arguments: TestEngine.all)
    func synthesizedPartialFailure(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            _ = try await database.save(RecordZone(zoneID: zoneID))
            let saved = try await database.save(media("m1", in: zoneID, album: "trip"))
            let stale = Record(recordType: "EncMedia", recordID: saved.recordID)
            let conflict: Error
            do {
                _ = try await database.save(stale)
                Issue.record("saving over a stored record succeeded")
                return
            } catch {
                conflict = error
            }
            let one = CKDatabaseAdapter.perRecordSaveFailureError([saved.recordID: conflict])
            #expect((one as NSError).domain == "CKErrorDomain")
            guard case .conflict(let serverRecord) = mapCKError(one) else {
                Issue.record("expected a conflict, got \(mapCKError(one))")
                return
            }
            #expect(serverRecord?.recordChangeTag == saved.recordChangeTag)

            let missing = StratusError(.unknownItem, "record 'm9' not found")
            let two = CKDatabaseAdapter.perRecordSaveFailureError([
                Record.ID(recordName: "m8", zoneID: zoneID): missing,
                Record.ID(recordName: "m9", zoneID: zoneID): missing,
            ])
            guard case .notFound = mapCKError(two) else {
                Issue.record("two agreeing failures collapse: expected notFound, got \(mapCKError(two))")
                return
            }
        }
    }

    @Test("zone changes: changes and tombstones with their types, the token for the next fetch; a stale token and a deleted zone map to their cases", arguments: TestEngine.all)
    func zoneChanges(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            _ = try await database.save(RecordZone(zoneID: zoneID))
            let adapter = CKDatabaseAdapter(database: database)
            let album = Record(recordType: "EncAlbum", recordID: Record.ID(recordName: "album-trip", zoneID: zoneID))
            album["name"] = "Trip"
            _ = try await adapter.save(records: [album, media("m1", in: zoneID, album: "trip"), media("m2", in: zoneID, album: "trip")], savePolicy: .ifServerRecordUnchanged) { _, _ in }

            let first = try await adapter.fetchZoneChanges(zoneID: zoneID, since: nil, desiredKeys: ["name", "album"])
            #expect(Set(first.changed.map(\.recordID.recordName)) == ["album-trip", "m1", "m2"])
            #expect(first.changed.first { $0.recordID.recordName == "m1" }?["capturedAt"] == nil, "only the desired keys")
            #expect(first.deleted.isEmpty && !first.moreComing)
            let token = try #require(first.token)

            _ = try await adapter.delete(recordIDs: [album.recordID, Record.ID(recordName: "m2", zoneID: zoneID)])
            let second = try await adapter.fetchZoneChanges(zoneID: zoneID, since: token, desiredKeys: nil)
            #expect(second.changed.isEmpty)
            #expect(Set(second.deleted.map { "\($0.recordType):\($0.recordName)" }) == ["EncAlbum:album-trip", "EncMedia:m2"])

            // The zone deleted and made again: the kept token no longer applies.
            let kept = try #require(second.token)
            _ = try await database.deleteRecordZone(withID: zoneID)
            do {
                _ = try await adapter.fetchZoneChanges(zoneID: zoneID, since: kept, desiredKeys: nil)
                Issue.record("a fetch of a deleted zone succeeded")
            } catch {
                guard case .zoneNotFound = mapCKError(error) else {
                    Issue.record("expected zoneNotFound, got \(error)")
                    return
                }
            }
            _ = try await database.save(RecordZone(zoneID: zoneID))
            do {
                _ = try await adapter.fetchZoneChanges(zoneID: zoneID, since: kept, desiredKeys: nil)
                Issue.record("a stale token was accepted")
            } catch {
                #expect((error as? StratusError)?.code == .changeTokenExpired, "the zone's own error, not the operation's partialFailure")
                guard case .changeTokenExpired = mapCKError(error) else {
                    Issue.record("expected changeTokenExpired, got \(mapCKError(error))")
                    return
                }
            }
            let fresh = try await adapter.fetchZoneChanges(zoneID: zoneID, since: nil, desiredKeys: nil)
            #expect(fresh.changed.isEmpty && fresh.deleted.isEmpty && fresh.token != nil)
        }
    }

    @Test("a fetched asset is snapshotted into the app's folder inside the per-record block; discarding the snapshot leaves the store's asset", arguments: TestEngine.all)
    func assetSnapshots(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            _ = try await database.save(RecordZone(zoneID: zoneID))
            let adapter = CKDatabaseAdapter(database: database)
            let source = FileManager.default.temporaryDirectory.appendingPathComponent("porter10-encamera-\(UUID().uuidString).bin")
            defer { try? FileManager.default.removeItem(at: source) }
            try Data("encrypted blob".utf8).write(to: source)
            let record = media("m1", in: zoneID, album: "trip")
            record["blob"] = Asset(fileURL: source)
            _ = try await adapter.save(records: [record], savePolicy: .ifServerRecordUnchanged) { _, _ in }

            let fetched = try await adapter.fetch(recordIDs: [record.recordID], desiredKeys: nil, qualityOfService: .userInteractive) { _, _ in }
            let snapshot = try #require((fetched[record.recordID]?["blob"] as? Asset)?.fileURL)
            defer {
                CKDatabaseAdapter.discardSnapshot(at: snapshot)
                try? FileManager.default.removeItem(at: CKDatabaseAdapter.assetSnapshotDirectory)
            }
            #expect(CKDatabaseAdapter.isSnapshot(snapshot))
            #expect(try Data(contentsOf: snapshot) == Data("encrypted blob".utf8))
            CKDatabaseAdapter.discardSnapshot(at: snapshot)
            #expect(!FileManager.default.fileExists(atPath: snapshot.path))

            let again = try await adapter.fetch(recordIDs: [record.recordID], desiredKeys: nil) { _, _ in }
            let second = try #require((again[record.recordID]?["blob"] as? Asset)?.fileURL)
            #expect(try Data(contentsOf: second) == Data("encrypted blob".utf8), "the store's content is untouched")
            CKDatabaseAdapter.discardSnapshot(at: second)
        }
    }

    @Test("a cancelled task cancels its operation: the fetch ends with operationCancelled, mapped to cancelled", arguments: TestEngine.all)
    func cancellation(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let adapter = CKDatabaseAdapter(database: container.privateCloudDatabase)
            let task = Task {
                withUnsafeCurrentTask { $0?.cancel() }
                return try await adapter.fetch(recordIDs: [Record.ID(recordName: "anything")], desiredKeys: nil) { _, _ in }
            }
            do {
                _ = try await task.value
                Issue.record("a cancelled fetch succeeded")
            } catch {
                guard case .cancelled = mapCKError(error) else {
                    Issue.record("expected cancelled, got \(error)")
                    return
                }
            }
        }
    }

    @Test("a missing record fails the fetch with partialFailure, unwrapped to notFound; a query of a zone that does not exist is zoneNotFound", arguments: TestEngine.all)
    func missing(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            _ = try await database.save(RecordZone(zoneID: zoneID))
            let adapter = CKDatabaseAdapter(database: database)
            do {
                _ = try await adapter.fetch(recordIDs: [Record.ID(recordName: "gone", zoneID: zoneID)], desiredKeys: nil) { _, _ in }
                Issue.record("fetching a missing record succeeded")
            } catch {
                #expect((error as? StratusError)?.code == .partialFailure)
                guard case .notFound = mapCKError(error) else {
                    Issue.record("expected notFound, got \(mapCKError(error))")
                    return
                }
            }
            do {
                _ = try await adapter.query(recordType: "EncMedia", predicate: QueryPredicate(value: true), zoneID: RecordZone.ID(zoneName: "NoSuchZone"), desiredKeys: nil)
                Issue.record("a query of a missing zone succeeded")
            } catch {
                guard case .zoneNotFound = mapCKError(error) else {
                    Issue.record("expected zoneNotFound, got \(mapCKError(error))")
                    return
                }
            }
        }
    }

    @Test("a subscription is saved through ModifySubscriptionsOperation", arguments: TestEngine.all)
    func subscription(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            _ = try await database.save(RecordZone(zoneID: zoneID))
            let adapter = CKDatabaseAdapter(database: database)
            let subscription = RecordZoneSubscription(zoneID: zoneID, subscriptionID: "encamera-media-zone")
            let info = Subscription.NotificationInfo()
            info.shouldSendContentAvailable = true
            subscription.notificationInfo = info
            try await adapter.saveSubscription(subscription)
            #expect(try await database.allSubscriptions().map(\.subscriptionID) == ["encamera-media-zone"])
        }
    }

    @Test("mapCKError: retry delays read from the bridged userInfo as TimeInterval, the default without one; account and quota errors")
    func errorMapping() {
        guard case .retry(let busy) = mapCKError(StratusError(.zoneBusy, userInfo: [ErrorRetryAfterKey: 2.5])) else {
            Issue.record("zoneBusy is a retry")
            return
        }
        #expect(busy == 2.5)
        guard case .retry(let limited) = mapCKError(StratusError(.requestRateLimited)) else {
            Issue.record("requestRateLimited is a retry")
            return
        }
        #expect(limited == 3)
        guard case .retry(let other) = mapCKError(StratusError(.serverResponseLost, userInfo: [ErrorRetryAfterKey: 7])) else {
            Issue.record("any code with a retry delay is a retry")
            return
        }
        #expect(other == 7)
        guard case .accountUnavailable = mapCKError(StratusError(.notAuthenticated)) else { Issue.record("notAuthenticated"); return }
        guard case .quotaExceeded = mapCKError(StratusError(.quotaExceeded)) else { Issue.record("quotaExceeded"); return }
        guard case .zoneNotFound = mapCKError(StratusError(.userDeletedZone)) else { Issue.record("userDeletedZone"); return }
        guard case .underlying = mapCKError(CocoaError(.fileNoSuchFile)) else { Issue.record("another domain's error"); return }
    }
}
