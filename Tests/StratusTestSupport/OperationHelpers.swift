import Foundation
import Stratus
import Synchronization
import Testing

/// Suspends until every operation has finished (without blocking a cooperative thread).
///
/// It checks `isFinished` every few milliseconds rather than adding a dependency: in
/// swift-corelibs-foundation, a dependency added while the operation is finishing can be
/// missed, and the waiter would never run.
public func waitUntilFinished(_ operations: [Operation]) async {
    while !operations.allSatisfy(\.isFinished) {
        try? await Task.sleep(for: .milliseconds(2))
    }
}

/// Adds `operation` to `database` and suspends until it has finished.
public func run(_ operation: DatabaseOperation, on database: Database) async {
    database.add(operation)
    await waitUntilFinished([operation])
}

/// The `StratusError` an error is, or `nil`.
public func stratusError(_ error: (any Error)?) -> StratusError? {
    error as? StratusError
}

/// The error code of a failed result, or `nil` when it succeeded or is not a `StratusError`.
public func errorCode<T>(_ result: Result<T, any Error>?) -> StratusError.Code? {
    guard case .failure(let error)? = result else { return nil }
    return (error as? StratusError)?.code
}

/// The error `body` throws, as a `StratusError`, or `nil` when it does not throw.
public func caughtError<T>(_ body: () async throws -> T) async -> (any Error)? {
    do {
        _ = try await body()
        return nil
    } catch {
        return error
    }
}

/// A thread-safe log of events from operation blocks that also notices blocks running at once.
///
/// ```swift
/// let log = BlockLog<String>()
/// op.perRecordResultBlock = { id, _ in log.record("item \(id.recordName)") }
/// op.fetchRecordsResultBlock = { _ in log.record("final") }
/// ```
public final class BlockLog<Event: Sendable>: Sendable {
    private struct State {
        var events: [Event] = []
        var active = 0
        var overlaps = 0
        var threads: Set<String> = []
    }
    private let state = Mutex(State())

    public init() {}

    /// Records an event. Each call holds a "running" mark while it yields the thread once, so
    /// two blocks running concurrently are very likely to be seen as an overlap.
    public func record(_ event: Event) {
        state.withLock { s in
            s.active += 1
            if s.active > 1 { s.overlaps += 1 }
        }
        Thread.sleep(forTimeInterval: 0)
        sched_yield()
        state.withLock { s in
            s.events.append(event)
            s.active -= 1
        }
    }

    /// Every event recorded, in order.
    public var events: [Event] { state.withLock { $0.events } }

    /// How many times a block started while another was running.
    public var overlaps: Int { state.withLock { $0.overlaps } }
}

/// A value set once from a block and read after the operation finished.
public final class Box<Value: Sendable>: Sendable {
    private let storage: Mutex<Value>
    public init(_ value: Value) { storage = Mutex(value) }
    public var value: Value {
        get { storage.withLock { $0 } }
        set { storage.withLock { $0 = newValue } }
    }
    /// Changes the value under the lock and returns what `body` returns.
    public func update<R: Sendable>(_ body: (inout Value) -> R) -> R { storage.withLock { body(&$0) } }
}

// MARK: - Database helpers

/// Convenience calls the tests use on any engine.
public enum TestDatabase {
    /// Saves records (non-atomically, in batches) and returns the stored records in input order.
    ///
    /// - Throws: the first item error, or the request's error.
    @discardableResult
    public static func save(_ records: [Record], in database: Database, savePolicy: ModifyRecordsOperation.SavePolicy = .ifServerRecordUnchanged) async throws -> [Record] {
        let results = try await database.modifyRecords(saving: records, deleting: [], savePolicy: savePolicy, atomically: false)
        return try records.map { record in
            guard let result = results.saveResults[record.recordID] else {
                throw StratusError(.internalError, "no save result for \(record.recordID.recordName)")
            }
            return try result.get()
        }
    }

    /// Saves records in one non-atomic transaction with a CloudKit Web Services write mode
    /// and answers what kind of write each was, in request order.
    /// `wantsSavedRecords: false` sets no per-record save block, so the store need not make
    /// the saved records (the bulk path).
    ///
    /// - Throws: the first item error, or the request's error.
    public static func saveKinds(_ records: [Record], in database: Database, writeMode: RecordWriteMode, wantsSavedRecords: Bool = true) async throws -> [RecordWriteKind] {
        let kinds = Box<[RecordWriteKind]>([])
        let saved = Box<[Record.ID: Record]>([:])
        let operation = ModifyRecordsOperation(recordsToSave: records)
        operation.writeMode = writeMode
        operation.isAtomic = false
        operation.itemsPerBatch = max(1, records.count)
        operation.perRecordWriteKindBlock = { _, kind in kinds.update { $0.append(kind) } }
        if wantsSavedRecords {
            operation.perRecordSaveBlock = { id, result in if case .success(let record) = result { saved.update { $0[id] = record } } }
        }
        let final = Box<Result<Void, any Error>?>(nil)
        operation.modifyRecordsResultBlock = { result in final.value = result }
        await run(operation, on: database)
        try final.value?.get()
        return kinds.value
    }

    /// Fetches one record, or `nil` when it fails with `unknownItem`.
    ///
    /// - Throws: any other error.
    public static func fetch(_ recordName: String, zoneID: RecordZone.ID = .default, in database: Database) async throws -> Record? {
        let id = Record.ID(recordName: recordName, zoneID: zoneID)
        let results = try await database.records(for: [id])
        switch results[id] {
        case .success(let record)?: return record
        case .failure(let error as StratusError)? where error.code == .unknownItem: return nil
        case .failure(let error)?: throw error
        case nil: throw StratusError(.internalError, "no fetch result for \(recordName)")
        }
    }

    /// Whether a record exists.
    public static func exists(_ recordName: String, zoneID: RecordZone.ID = .default, in database: Database) async throws -> Bool {
        try await fetch(recordName, zoneID: zoneID, in: database) != nil
    }

    /// Every record a query matches, in the query's order, read 400 at a time with cursors.
    public static func queryAll(
        _ query: Query, in database: Database, zoneID: RecordZone.ID? = nil, desiredKeys: [String]? = nil, pageSize: Int = 400
    ) async throws -> [Record] {
        var page = try await database.records(matching: query, inZoneWith: zoneID, desiredKeys: desiredKeys, resultsLimit: pageSize)
        var records = try page.matchResults.map { try $0.1.get() }
        while let cursor = page.queryCursor {
            page = try await database.records(continuingMatchFrom: cursor, desiredKeys: desiredKeys, resultsLimit: pageSize)
            records += try page.matchResults.map { try $0.1.get() }
        }
        return records
    }

    /// The record names of records, in order.
    public static func names(_ records: [Record]) -> [String] { records.map(\.recordID.recordName) }
}

/// Checks that `actual` lists the same record names as `expected`, in the same order, and
/// reports a short summary (counts, repeats, a few missing and extra names, the first
/// difference) instead of both lists when they differ.
public func expectSameOrder(_ actual: [String], _ expected: [String], _ context: String, sourceLocation: SourceLocation = #_sourceLocation) {
    guard actual != expected else { return }
    var seen = Set<String>()
    let repeated = actual.filter { !seen.insert($0).inserted }
    let expectedSet = Set(expected)
    let missing = expected.filter { !seen.contains($0) }
    let extra = actual.filter { !expectedSet.contains($0) }
    let firstDifference = zip(actual, expected).enumerated().first { $0.element.0 != $0.element.1 }
    var summary = "\(context): got \(actual.count) records, expected \(expected.count)"
    if !repeated.isEmpty { summary += "; \(repeated.count) repeated (e.g. \(repeated.prefix(5)))" }
    if !missing.isEmpty { summary += "; \(missing.count) missing (e.g. \(missing.prefix(5)))" }
    if !extra.isEmpty { summary += "; \(extra.count) unexpected (e.g. \(extra.prefix(5)))" }
    if let (index, pair) = firstDifference {
        summary += "; first difference at position \(index): got \(pair.0), expected \(pair.1)"
    }
    Issue.record(Comment(rawValue: summary), sourceLocation: sourceLocation)
}

/// One page of a ``QueryOperation``: the records matched (in block order) and the final result.
public struct QueryPageResult: Sendable {
    public var records: [Record]
    public var cursor: QueryOperation.Cursor?
    public var error: (any Error)?
}

/// Runs one ``QueryOperation`` page and collects what its blocks report.
public func runQueryPage(_ operation: QueryOperation, on database: Database) async -> QueryPageResult {
    let records = Box<[Record]>([])
    let final = Box<Result<QueryOperation.Cursor?, any Error>?>(nil)
    operation.recordMatchedBlock = { _, result in
        if case .success(let record) = result { records.update { $0.append(record) } }
    }
    operation.queryResultBlock = { result in final.value = result }
    await run(operation, on: database)
    switch final.value {
    case .success(let cursor)?: return QueryPageResult(records: records.value, cursor: cursor, error: nil)
    case .failure(let error)?: return QueryPageResult(records: records.value, cursor: nil, error: error)
    case nil: return QueryPageResult(records: records.value, cursor: nil, error: StratusError(.internalError, "queryResultBlock was not called"))
    }
}

extension Database {
    /// `modifyRecords(saving:deleting:savePolicy:atomically:)` answered item by item also when
    /// the request failed atomically (which throws `partialFailure`, as CloudKit documents): each
    /// item's result from the error's `partialErrorsByItemID`, for tests that read every item.
    ///
    /// ```swift
    /// let (saves, _) = try await database.modifyRecordsEachItem(saving: [a, b])
    /// ```
    public func modifyRecordsEachItem(
        saving recordsToSave: [Record] = [], deleting recordIDsToDelete: [Record.ID] = [],
        savePolicy: ModifyRecordsOperation.SavePolicy = .ifServerRecordUnchanged, atomically: Bool = true
    ) async throws -> (saveResults: [Record.ID: Result<Record, any Error>], deleteResults: [Record.ID: Result<Void, any Error>]) {
        do {
            return try await modifyRecords(saving: recordsToSave, deleting: recordIDsToDelete, savePolicy: savePolicy, atomically: atomically)
        } catch let error as StratusError where error.code == .partialFailure {
            let errors = error.partialErrorsByItemID ?? [:]
            var saves: [Record.ID: Result<Record, any Error>] = [:]
            for record in recordsToSave { saves[record.recordID] = .failure(errors[record.recordID] ?? error) }
            var deletes: [Record.ID: Result<Void, any Error>] = [:]
            for id in recordIDsToDelete { deletes[id] = .failure(errors[id] ?? error) }
            return (saves, deletes)
        }
    }
}
