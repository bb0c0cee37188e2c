import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// ScoutDB's write path (Mikhail Kasianov, MIT; CloudDatabase.swift — the search index did not
// name its repository), ported mechanically: a seam shaped like the CKDatabase calls the store
// makes, with CKDatabase conforming by forwarding. Its CloudKit habits: a lost race caught as
// `catch let error as CKError where error.code == .serverRecordChanged` and the winner read from
// `error.userInfo[CKRecordChangedErrorServerRecordKey] as? CKRecord`; an atomic batch's failure
// unwrapped from `error.userInfo[CKPartialErrorsByItemIDKey] as? [CKRecord.ID: any Error]`,
// keeping only the causes (not `batchRequestFailed`); a compare-and-swap save through
// `modifyRecords(saving:deleting:savePolicy:atomically:)` read back by `saveResults[recordID]`;
// the next page through `fetch(withCursor:desiredKeys:resultsLimit:)` resumed with
// `continuation.resume(with: result)`. Changes a Linux port must make: `import CloudKit` →
// `import Stratus`, the `CK` prefix dropped (`CKError` → `StratusError`). The app's `throttled`
// (a timeout and rate-limit retry around each call) is a pass-through here. Only the members
// these tests reach are ported; the zone-change and subscription members are left out. One
// rename: the app's `modifyRecords(saving:deleting:)` requirement is `modifyRecords(savingAll:
// deleting:)` here, because its conformance on `Database` would capture every
// `modifyRecords(saving:deleting:)` call in this shared test module (Cirrus's port uses the
// iOS 15 call with its defaults) — as it captures them in ScoutDB's own module, which its
// comments warn of; on CloudKit the same would happen.

/// Continuation token for a paginated query (the app's; an in-memory double uses `.offset`).
public enum ScoutQueryCursor: @unchecked Sendable {
    case cloudKit(QueryOperation.Cursor)
    case offset(query: Query, zoneID: RecordZone.ID?, offset: Int)
}

public protocol ScoutCloudDatabase: Sendable {
    func records(matching query: Query, inZone zoneID: RecordZone.ID?, desiredKeys: [Record.FieldKey]?, resultsLimit: Int) async throws -> (
        matchResults: [(Record.ID, Result<Record, any Error>)], queryCursor: ScoutQueryCursor?
    )
    func records(continuingMatchFrom cursor: ScoutQueryCursor, desiredKeys: [Record.FieldKey]?, resultsLimit: Int) async throws -> (
        matchResults: [(Record.ID, Result<Record, any Error>)], queryCursor: ScoutQueryCursor?
    )
    func save(_ record: Record) async throws -> Record
    func modifyRecords(savingAll saving: [Record], deleting: [Record.ID]) async throws
    func saveIfUnchanged(_ records: [Record]) async throws -> [(Record.ID, Result<Record, any Error>)]
}

extension ScoutCloudDatabase {
    func allRecords(matching query: Query, inZone zoneID: RecordZone.ID? = nil, desiredKeys: [Record.FieldKey]? = nil) async throws -> [Record] {
        var (results, cursor) = try await records(matching: query, inZone: zoneID, desiredKeys: desiredKeys, resultsLimit: 2)
        while let token = cursor {
            let page = try await records(continuingMatchFrom: token, desiredKeys: desiredKeys, resultsLimit: 2)
            results += page.matchResults
            cursor = page.queryCursor
        }
        return try results.map { try $0.1.get() }
    }

    func write(record: Record) async throws {
        do {
            _ = try await save(record)
        } catch let error as StratusError where error.code == .serverRecordChanged {
            guard let server = error.userInfo[RecordChangedErrorServerRecordKey] as? Record else {
                throw error
            }
            throw ScoutRecordConflictError(serverRecord: server)
        }
    }

    func write(records: [Record]) async throws {
        do {
            try await modifyRecords(savingAll: records, deleting: [])
        } catch let error as StratusError {
            throw ScoutPartialWriteError(error) ?? error
        }
    }

    func writeIfUnchanged(records: [Record]) async throws -> [Record] {
        var conflicts: [Record] = []
        for (_, result) in try await saveIfUnchanged(records) {
            guard case .failure(let error) = result else { continue }
            if let conflict = error as? ScoutRecordConflictError {
                conflicts.append(conflict.serverRecord)
            } else if let error = error as? StratusError, error.code == .serverRecordChanged,
                      let server = error.userInfo[RecordChangedErrorServerRecordKey] as? Record {
                conflicts.append(server)
            } else {
                throw error
            }
        }
        return conflicts
    }
}

extension Database: ScoutCloudDatabase {
    /// The app's rate-limit and timeout wrapper; a pass-through in the port.
    fileprivate func throttled<T>(_ body: (Database) async throws -> T) async throws -> T {
        try await body(self)
    }

    public func records(matching query: Query, inZone zoneID: RecordZone.ID?, desiredKeys: [Record.FieldKey]?, resultsLimit: Int) async throws -> (
        matchResults: [(Record.ID, Result<Record, any Error>)], queryCursor: ScoutQueryCursor?
    ) {
        try await throttled { database in
            let (results, cursor) = try await database.records(matching: query, inZoneWith: zoneID, desiredKeys: desiredKeys, resultsLimit: resultsLimit)
            return (results, cursor.map(ScoutQueryCursor.cloudKit))
        }
    }

    public func records(continuingMatchFrom cursor: ScoutQueryCursor, desiredKeys: [Record.FieldKey]?, resultsLimit: Int) async throws -> (
        matchResults: [(Record.ID, Result<Record, any Error>)], queryCursor: ScoutQueryCursor?
    ) {
        guard case .cloudKit(let cursor) = cursor else { throw StratusError(.invalidArguments) }
        return try await throttled { database in
            let (results, next): (matchResults: [(Record.ID, Result<Record, any Error>)], queryCursor: QueryOperation.Cursor?) =
                try await withCheckedThrowingContinuation { continuation in
                    database.fetch(withCursor: cursor, desiredKeys: desiredKeys, resultsLimit: resultsLimit) { result in
                        continuation.resume(with: result)
                    }
                }
            return (results, next.map(ScoutQueryCursor.cloudKit))
        }
    }

    public func modifyRecords(savingAll records: [Record], deleting recordIDs: [Record.ID]) async throws {
        try await throttled { database in
            _ = try await database.modifyRecords(saving: records, deleting: recordIDs, savePolicy: .allKeys, atomically: true)
        }
    }

    public func saveIfUnchanged(_ records: [Record]) async throws -> [(Record.ID, Result<Record, any Error>)] {
        try await throttled { database in
            let results = try await database.modifyRecords(saving: records, deleting: [], savePolicy: .ifServerRecordUnchanged, atomically: false)
            return records.map { record in
                (record.recordID, results.saveResults[record.recordID] ?? .failure(StratusError(.internalError)))
            }
        }
    }
}

/// A batch write that failed for some of its records, unwrapped per record (the app's).
public struct ScoutPartialWriteError: LocalizedError {
    public let reasons: [Record.ID: any Error]

    init?(_ error: StratusError) {
        guard error.code == .partialFailure, let partial = error.userInfo[PartialErrorsByItemIDKey] as? [Record.ID: any Error] else { return nil }
        let causes = partial.filter { ($0.value as? StratusError)?.code != .batchRequestFailed }
        guard causes.count > 0 else { return nil }
        reasons = causes
    }

    public var errorDescription: String? { "\(reasons.count) record(s) failed the batch write" }
}

/// Thrown when a write loses a compare-and-swap race; carries the winning record.
public struct ScoutRecordConflictError: LocalizedError {
    public let serverRecord: Record
    public let errorDescription: String? = "The record was changed on the server"
}

@Suite struct ScoutDBWriteTests {
    private func zone(_ database: Database) async throws -> RecordZone.ID {
        let zone = RecordZone(zoneName: "Scout")
        _ = try await database.save(zone)
        return zone.zoneID
    }

    @Test(arguments: TestEngine.all) func allRecordsFollowsCursorsThroughFetchWithCursor(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let zoneID = try await zone(database)
            let rows = (0..<5).map { index -> Record in
                let row = Record(recordType: "Row", recordID: Record.ID(recordName: "row-\(index)", zoneID: zoneID))
                row["n"] = index
                return row
            }
            try await database.write(records: rows)
            let all = try await database.allRecords(matching: Query(recordType: "Row", predicate: QueryPredicate(value: true)), inZone: zoneID)
            #expect(Set(all.map(\.recordID.recordName)) == ["row-0", "row-1", "row-2", "row-3", "row-4"])
        }
    }

    @Test(arguments: TestEngine.all) func aLostRaceThrowsTheWinningServerRecord(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let zoneID = try await zone(database)
            let row = Record(recordType: "Row", recordID: Record.ID(recordName: "row", zoneID: zoneID))
            row["n"] = 1
            let saved = try await database.save(row)
            let stale = saved.copy() as! Record
            saved["n"] = 2
            _ = try await database.save(saved)

            stale["n"] = 3
            do {
                try await database.write(record: stale)
                Issue.record("a stale save succeeded")
            } catch let conflict as ScoutRecordConflictError {
                #expect(conflict.serverRecord["n"] as? Int == 2)
            }

            let other = Record(recordType: "Row", recordID: Record.ID(recordName: "other", zoneID: zoneID))
            let conflicts = try await database.writeIfUnchanged(records: [stale, other])
            #expect(conflicts.map(\.recordID.recordName) == ["row"])
            #expect(conflicts.first?["n"] as? Int == 2)
            #expect(try await database.record(for: other.recordID).recordType == "Row")
        }
    }

    @Test(arguments: TestEngine.all) func anAtomicBatchFailureIsUnwrappedToItsCause(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let zoneID = try await zone(database)
            let first = Record(recordType: "Row", recordID: Record.ID(recordName: "first", zoneID: zoneID))
            let saved = try await database.save(first)
            let stale = saved.copy() as! Record
            saved["n"] = 1
            _ = try await database.save(saved)
            stale["n"] = 2
            let fresh = Record(recordType: "Row", recordID: Record.ID(recordName: "fresh", zoneID: zoneID))

            do {
                // `.allKeys` overwrites the stale copy, so the one cause is a record the batch
                // cannot save: CloudKit refuses a record name that starts with an underscore.
                fresh["when"] = Date()
                let broken = Record(recordType: "Row", recordID: Record.ID(recordName: "_reserved", zoneID: zoneID))
                try await database.write(records: [stale, fresh, broken])
                Issue.record("the batch was saved")
            } catch let error as ScoutPartialWriteError {
                #expect(Array(error.reasons.keys.map(\.recordName)) == ["_reserved"])
                #expect(error.errorDescription == "1 record(s) failed the batch write")
            }
            #expect(try await database.allRecords(matching: Query(recordType: "Row", predicate: QueryPredicate(value: true)), inZone: zoneID).count == 1)
        }
    }
}
