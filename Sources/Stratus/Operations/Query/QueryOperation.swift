import Foundation

/// Runs a query and returns one page of matches, like `CKQueryOperation`.
///
/// When more records match than ``resultsLimit``, the final block gets a ``Cursor``; a new
/// `QueryOperation(cursor:)` continues after the last record returned. Cursors are keysets, so
/// page N costs what page 1 costs, and no record is skipped or repeated while paging.
///
/// ```swift
/// let op = QueryOperation(query: Query(recordType: "Todo"))
/// op.resultsLimit = 400
/// op.recordMatchedBlock = { id, result in if let r = try? result.get() { print(r["title"] ?? "") } }
/// op.queryResultBlock = { result in
///     if case .success(let cursor?) = result { print("more:", cursor.serialized) }
/// }
/// database.add(op)
/// ```
public final class QueryOperation: DatabaseOperation, RecordProducingOperation, @unchecked Sendable {
    /// Asks for the store's default page size (``defaultResultsLimit``).
    public static let maximumResults = 0
    /// Records per page when ``resultsLimit`` is ``maximumResults``.
    public static let defaultResultsLimit = 100

    public var query: Query?
    public var cursor: Cursor?
    /// The zone to search; the default zone when `nil` (or the cursor's zone).
    public var zoneID: RecordZone.ID?
    /// The keys to return; all keys when `nil`.
    public var desiredKeys: [String]?
    /// The most records to return; ``maximumResults`` means ``defaultResultsLimit``.
    public var resultsLimit = QueryOperation.maximumResults
    public var recordMatchedBlock: (@Sendable (Record.ID, Result<Record, any Error>) -> Void)?
    public var queryResultBlock: (@Sendable (Result<Cursor?, any Error>) -> Void)?
    /// CloudKit's older per-record block: each matching record, after ``recordMatchedBlock``.
    public var recordFetchedBlock: (@Sendable (Record) -> Void)?
    /// CloudKit's older final block: the next page's cursor (`nil` when no more records match,
    /// or on failure) and the error, after ``queryResultBlock``.
    public var queryCompletionBlock: (@Sendable (Cursor?, (any Error)?) -> Void)?
    public let recordOutput = RecordOutput()

    private var resultCursor: Cursor?

    /// Engine reads per call, so that cancellation is prompt even for large pages.
    static let chunkSize = 1_000

    public init(query: Query) {
        self.query = query
        super.init()
    }

    public init(cursor: Cursor) {
        self.cursor = cursor
        super.init()
    }

    override func execute(engine: any StorageEngine, context: DatabaseContext) throws -> StratusError? {
        precondition(resultsLimit >= 0, "QueryOperation.resultsLimit must not be negative")
        var compiled: CompiledQuery
        var position: QueryPosition?
        let store = try engine.storeIdentifier
        if let cursor {
            try cursor.check(for: context, storeIdentifier: store)
            compiled = cursor.query
            compiled.desiredKeys = desiredKeys
            position = cursor.position
        } else if let query {
            let zone = zoneID ?? .default
            try ModifyRecordsOperation.checkZone(Record.ID(recordName: "query", zoneID: zone), context)
            compiled = try CompiledQuery(query, zoneID: zone, desiredKeys: desiredKeys)
        } else {
            return StratusError(.invalidArguments, "QueryOperation needs a query or a cursor")
        }
        compiled = try QueryAdmission.admit(compiled, engine: engine, context: context, continuing: cursor != nil)

        let limit = resultsLimit == Self.maximumResults ? Self.defaultResultsLimit : resultsLimit
        var returned = 0
        while returned < limit {
            if isCancelled {
                var error = StratusError.cancelled("QueryOperation", completed: returned)
                error.resumeCursor = position.map { Cursor(query: compiled, context: context, storeIdentifier: store, position: $0) }
                return error
            }
            let page = try withRetry {
                try engine.queryRecords(compiled, in: context, after: position, limit: min(Self.chunkSize, limit - returned))
            }
            for record in page.records {
                recordOutput.append(record)
                recordMatchedBlock?(record.recordID, .success(record))
                recordFetchedBlock?(record)
            }
            returned += page.records.count
            position = page.nextPosition
            if position == nil { break }
        }
        resultCursor = position.map { Cursor(query: compiled, context: context, storeIdentifier: store, position: $0) }
        return nil
    }

    override func complete(with error: StratusError?) {
        recordOutput.complete(with: error)
        queryResultBlock?(error.map { .failure($0) } ?? .success(resultCursor))
        queryCompletionBlock?(error == nil ? resultCursor : nil, error)
    }
}
