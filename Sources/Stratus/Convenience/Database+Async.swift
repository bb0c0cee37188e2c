import Foundation
import Synchronization

extension Database {
    /// Saves one record with the default save policy and returns it as stored.
    ///
    /// ```swift
    /// let saved = try await database.save(todo)
    /// ```
    ///
    /// - Throws: the record's own error (`serverRecordChanged`, `invalidArguments`, …).
    @discardableResult
    public func save(_ record: Record) async throws -> Record {
        let results = try await modifyRecords(saving: [record], deleting: [], savePolicy: .ifServerRecordUnchanged, atomically: true, throwsAtomicFailure: false)
        guard let result = results.saveResults[record.recordID] else {
            throw StratusError(.internalError, "no result for record '\(record.recordID.recordName)'", recordID: record.recordID)
        }
        return try result.get()
    }

    /// Fetches one record.
    ///
    /// ```swift
    /// let note = try await database.record(for: Record.ID(recordName: "note-1"))
    /// ```
    ///
    /// - Throws: `unknownItem` when the record does not exist.
    public func record(for recordID: Record.ID) async throws -> Record {
        let results = try await records(for: [recordID])
        guard let result = results[recordID] else {
            throw StratusError(.internalError, "no result for record '\(recordID.recordName)'", recordID: recordID)
        }
        return try result.get()
    }

    /// Fetches records by ID; each ID gets its own result.
    ///
    /// ```swift
    /// for (id, result) in try await database.records(for: ids, desiredKeys: ["title"]) { … }
    /// ```
    public func records(for ids: [Record.ID], desiredKeys: [String]? = nil) async throws -> [Record.ID: Result<Record, any Error>] {
        let results = Collector<(Record.ID, Result<Record, any Error>)>()
        try await run { finish in
            let op = FetchRecordsOperation(recordIDs: ids)
            op.desiredKeys = desiredKeys
            op.perRecordResultBlock = { results.append(($0, $1)) }
            op.fetchRecordsResultBlock = { finish(Database.ignoringPartialFailure($0)) }
            return op
        }
        return Dictionary(results.items, uniquingKeysWith: { first, _ in first })
    }

    /// Deletes one record and returns its ID.
    ///
    /// ```swift
    /// try await database.deleteRecord(withID: todo.recordID)
    /// ```
    @discardableResult
    public func deleteRecord(withID recordID: Record.ID) async throws -> Record.ID {
        let results = try await modifyRecords(saving: [], deleting: [recordID], savePolicy: .ifServerRecordUnchanged, atomically: true, throwsAtomicFailure: false)
        try results.deleteResults[recordID]?.get()
        return recordID
    }

    /// Saves and deletes records in one request; each item gets its own result. Either list may
    /// be left out, as in CloudKit (`modifyRecords(deleting: ids)`).
    ///
    /// ```swift
    /// let (saved, deleted) = try await database.modifyRecords(saving: [a, b], deleting: [c.recordID], savePolicy: .changedKeys)
    /// ```
    ///
    /// - Throws: errors of the request as a whole, and, as CloudKit documents, the
    ///   `partialFailure` (with `partialErrorsByItemID`) of an `atomically` request that an
    ///   item's failure made write nothing (in zones with the atomic capability; the other items
    ///   fail with `batchRequestFailed`). A request that wrote anything (in another zone, or in
    ///   the default zone, which has no atomic capability) answers each item in the results.
    public func modifyRecords(
        saving recordsToSave: [Record] = [], deleting recordIDsToDelete: [Record.ID] = [],
        savePolicy: ModifyRecordsOperation.SavePolicy = .ifServerRecordUnchanged, atomically: Bool = true
    ) async throws -> (saveResults: [Record.ID: Result<Record, any Error>], deleteResults: [Record.ID: Result<Void, any Error>]) {
        try await modifyRecords(saving: recordsToSave, deleting: recordIDsToDelete, savePolicy: savePolicy, atomically: atomically, throwsAtomicFailure: true)
    }

    /// ``modifyRecords(saving:deleting:savePolicy:atomically:)``, answering each item also
    /// when an atomic request wrote nothing (`throwsAtomicFailure` false): what a single save and
    /// the sync engine need, whose callers read each item's own error.
    func modifyRecords(
        saving recordsToSave: [Record], deleting recordIDsToDelete: [Record.ID],
        savePolicy: ModifyRecordsOperation.SavePolicy, atomically: Bool, throwsAtomicFailure: Bool
    ) async throws -> (saveResults: [Record.ID: Result<Record, any Error>], deleteResults: [Record.ID: Result<Void, any Error>]) {
        let saves = Collector<(Record.ID, Result<Record, any Error>)>()
        let deletes = Collector<(Record.ID, Result<Void, any Error>)>()
        try await run { finish in
            let op = ModifyRecordsOperation(recordsToSave: recordsToSave, recordIDsToDelete: recordIDsToDelete)
            op.savePolicy = savePolicy
            op.isAtomic = atomically
            op.perRecordSaveBlock = { saves.append(($0, $1)) }
            op.perRecordDeleteBlock = { deletes.append(($0, $1)) }
            op.modifyRecordsResultBlock = { [unowned op] result in
                // An atomic request that an item's failure made write nothing fails as a whole;
                // one that wrote anything (another zone's items: atomicity is per zone, and the
                // default zone has none) answers each item, so the caller learns what was saved.
                let wroteSome = saves.items.contains { (try? $0.1.get()) != nil } || deletes.items.contains { (try? $0.1.get()) != nil }
                finish(throwsAtomicFailure && op.failedAtomically && !wroteSome ? result : Database.ignoringPartialFailure(result))
            }
            return op
        }
        return (Dictionary(saves.items, uniquingKeysWith: { a, _ in a }), Dictionary(deletes.items, uniquingKeysWith: { a, _ in a }))
    }

    /// Runs a query and returns one page of matches and a cursor when more remain.
    ///
    /// ```swift
    /// let (matches, cursor) = try await database.records(matching: query, resultsLimit: 400)
    /// ```
    public func records(
        matching query: Query, inZoneWith zoneID: RecordZone.ID? = nil, desiredKeys: [String]? = nil,
        resultsLimit: Int = QueryOperation.maximumResults
    ) async throws -> (matchResults: [(Record.ID, Result<Record, any Error>)], queryCursor: QueryOperation.Cursor?) {
        let op = QueryOperation(query: query)
        op.zoneID = zoneID
        return try await page(op, desiredKeys: desiredKeys, resultsLimit: resultsLimit)
    }

    /// Runs a query and returns the first page of matches (up to
    /// ``QueryOperation/defaultResultsLimit``), as iOS 15's `CKDatabase.perform(_:inZoneWith:)`
    /// does; ``records(matching:inZoneWith:desiredKeys:resultsLimit:)`` gives the cursor too.
    ///
    /// ```swift
    /// let todos = try await database.perform(Query(recordType: "Todo"), inZoneWith: nil)
    /// ```
    ///
    /// - Throws: the query's error, as ``records(matching:inZoneWith:desiredKeys:resultsLimit:)``
    ///   (`zoneNotFound` for a zone that does not exist, `invalidArguments` for a query the store
    ///   refuses).
    public func perform(_ query: Query, inZoneWith zoneID: RecordZone.ID?) async throws -> [Record] {
        let (matches, _) = try await records(matching: query, inZoneWith: zoneID)
        // As the completion-handler form: records that matched but could not be read are left out.
        return matches.compactMap { try? $0.1.get() }
    }

    /// Continues a query from a cursor.
    ///
    /// ```swift
    /// let (more, next) = try await database.records(continuingMatchFrom: cursor)
    /// ```
    public func records(
        continuingMatchFrom cursor: QueryOperation.Cursor, desiredKeys: [String]? = nil,
        resultsLimit: Int = QueryOperation.maximumResults
    ) async throws -> (matchResults: [(Record.ID, Result<Record, any Error>)], queryCursor: QueryOperation.Cursor?) {
        try await page(QueryOperation(cursor: cursor), desiredKeys: desiredKeys, resultsLimit: resultsLimit)
    }

    /// Every record matching a query, fetched page by page as the sequence is iterated.
    ///
    /// ```swift
    /// for try await todo in database.allRecords(matching: query, pageSize: 400) {
    ///     print(todo["title"] ?? "")
    /// }
    /// ```
    public func allRecords(
        matching query: Query, inZoneWith zoneID: RecordZone.ID? = nil, desiredKeys: [String]? = nil,
        pageSize: Int = QueryOperation.defaultResultsLimit
    ) -> QueryResultSequence {
        QueryResultSequence(database: self, query: query, zoneID: zoneID, desiredKeys: desiredKeys, pageSize: pageSize)
    }

    /// A Stratus extension: how many records match a query, counted by the store without
    /// reading them (``CountRecordsOperation``).
    ///
    /// ```swift
    /// let open = try await database.countRecords(matching: Query(recordType: "Todo", format: "checked == %@", 0))
    /// ```
    public func countRecords(matching query: Query, inZoneWith zoneID: RecordZone.ID? = nil) async throws -> Int {
        let count = Collector<Int>()
        try await run { finish in
            let op = CountRecordsOperation(query: query, zoneID: zoneID)
            op.countRecordsResultBlock = { result in
                if case .success(let n) = result { count.append(n) }
                finish(result.map { _ in () })
            }
            return op
        }
        return count.items.first ?? 0
    }

    private func page(
        _ op: QueryOperation, desiredKeys: [String]?, resultsLimit: Int
    ) async throws -> (matchResults: [(Record.ID, Result<Record, any Error>)], queryCursor: QueryOperation.Cursor?) {
        let matches = Collector<(Record.ID, Result<Record, any Error>)>()
        let cursor = Collector<QueryOperation.Cursor>()
        op.desiredKeys = desiredKeys
        op.resultsLimit = resultsLimit
        op.recordMatchedBlock = { matches.append(($0, $1)) }
        try await run { finish in
            op.queryResultBlock = { result in
                if case .success(let next?) = result { cursor.append(next) }
                finish(result.map { _ in () })
            }
            return op
        }
        return (matches.items, cursor.items.first)
    }

    /// Runs the operation `make` builds and waits for its final block, which must call `finish`
    /// exactly once. Task cancellation cancels the operation.
    func run(_ make: (@escaping @Sendable (Result<Void, any Error>) -> Void) -> DatabaseOperation) async throws {
        let handle = OperationHandle()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let op = make { continuation.resume(with: $0) }
                handle.attach(op)
                add(op)
            }
        } onCancel: {
            handle.cancel()
        }
    }

    /// The convenience API reports item errors per item, as CloudKit's does.
    static func ignoringPartialFailure(_ result: Result<Void, any Error>) -> Result<Void, any Error> {
        if case .failure(let error as StratusError) = result, error.code == .partialFailure { return .success(()) }
        return result
    }
}

/// Collects values from an operation's blocks (which run one at a time) for an async caller.
final class Collector<Item: Sendable>: Sendable {
    private let storage = Mutex<[Item]>([])
    func append(_ item: Item) { storage.withLock { $0.append(item) } }
    var items: [Item] { storage.withLock { $0 } }
}

/// Lets task cancellation reach an operation that may not have been created yet.
final class OperationHandle: Sendable {
    private struct State { var operation: DatabaseOperation?; var isCancelled = false }
    private let state = Mutex(State())

    func attach(_ operation: DatabaseOperation) {
        let cancelNow = state.withLock { s in s.operation = operation; return s.isCancelled }
        if cancelNow { operation.cancel() }
    }

    func cancel() {
        let operation = state.withLock { s in s.isCancelled = true; return s.operation }
        operation?.cancel()
    }
}
