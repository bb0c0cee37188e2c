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
open class QueryOperation: DatabaseOperation, RecordProducingOperation, @unchecked Sendable {
    /// Asks for the store's default page size (``defaultResultsLimit``).
    public static let maximumResults = 0
    /// Records per page when ``resultsLimit`` is ``maximumResults``.
    public static let defaultResultsLimit = 100

    /// The query to run; when ``cursor`` is set, the cursor's query runs instead.
    public var query: Query?
    /// Where to continue: the cursor of a page's ``queryResultBlock``, whose query (and zones)
    /// it runs from after that page's last record; used instead of ``query`` when set.
    public var cursor: Cursor?
    /// The zone to search; every zone of the database when `nil`, as in CloudKit (a cursor
    /// searches the zones of its query). A query in the shared database needs a zone.
    public var zoneID: RecordZone.ID?
    /// The keys to return; all keys when `nil`.
    public var desiredKeys: [String]?
    /// The most records to return; ``maximumResults`` means ``defaultResultsLimit``.
    public var resultsLimit = QueryOperation.maximumResults
    /// Each matching record, in the query's order, as `CKQueryOperation.recordMatchedBlock`.
    ///
    /// ```swift
    /// op.recordMatchedBlock = { id, result in if let todo = try? result.get() { print(id.recordName, todo["title"] ?? "") } }
    /// ```
    public var recordMatchedBlock: ((Record.ID, Result<Record, any Error>) -> Void)?
    /// Called once at the end, as `CKQueryOperation.queryResultBlock`: the cursor of the next
    /// page (`nil` when no more records match, and always with ``fetchAllResults``), or the
    /// error.
    ///
    /// ```swift
    /// op.queryResultBlock = { result in if case .success(let cursor?) = result { database.add(QueryOperation(cursor: cursor)) } }
    /// ```
    public var queryResultBlock: ((Result<Cursor?, any Error>) -> Void)?
    /// CloudKit's older per-record block: each matching record, after ``recordMatchedBlock``.
    public var recordFetchedBlock: ((Record) -> Void)?
    /// CloudKit's older final block: the next page's cursor (`nil` when no more records match,
    /// or on failure) and the error, after ``queryResultBlock``.
    public var queryCompletionBlock: ((Cursor?, (any Error)?) -> Void)?
    /// Where the operation hands the matching records, page after page to the stages of a pipeline
    /// (``RecordProducingOperation``), batch by batch as they are made.
    ///
    /// ```swift
    /// let save = ModifyRecordsOperation(savingRecordsFrom: query)   // reads query.recordOutput
    /// ```
    public let recordOutput = RecordOutput()

    /// A Stratus extension: read every match, not one page — page by page, from one snapshot
    /// of the store, handing each page to the operation's consumers as a batch (see
    /// ``ProducingOperation``). ``resultsLimit`` is then the page size (400 for
    /// ``maximumResults``), and the final block gets no cursor. Off by default, as in CloudKit.
    /// Without a zone, the zones are read one after another, each from a snapshot of its own
    /// (in zone name order, each in the query's order), so that a pipeline that saves what it
    /// reads never reads a record twice.
    ///
    /// ```swift
    /// let everything = QueryOperation(query: Query(recordType: "Event"))
    /// everything.fetchAllResults = true
    /// everything.resultsLimit = 1_000
    /// ```
    public var fetchAllResults = false

    /// A Stratus extension: where a pipeline with this query as its source keeps its position,
    /// so that a stopped pipeline run again goes on after the last batch it completed (see
    /// ``PipelineCheckpoint``). The query then starts after the checkpoint's cursor, which must
    /// be this query's. Without ``fetchAllResults`` a run reads one page (``resultsLimit``), and
    /// the position stays after it: each run goes on with the next page, and the run that reads
    /// the last one removes it.
    ///
    /// ```swift
    /// query.checkpoint = PipelineCheckpoint(job: "archive-2024")
    /// ```
    public var checkpoint: PipelineCheckpoint?

    /// A Stratus extension: read what every write committed so far holds, because the records
    /// read are written back (a read-modify-write job of your own). A store opened with a
    /// standby for reads that may lag (PostgreSQL's `readURL`) then reads the store itself: a
    /// lagging standby would hide records just saved, and hand out versions already replaced.
    /// A pipeline whose stages write (a ``ModifyRecordsOperation`` or ``DeleteRecordsOperation``
    /// taking this query's records) reads this way whatever this says, as do ``RecordUpdater``
    /// and ``RecordDeleter``, unless that stage writes another store. Off by default; without a
    /// standby it changes nothing. A ``Cursor`` does not keep it: set it again on an operation
    /// made from one.
    ///
    /// ```swift
    /// let stale = QueryOperation(query: try Query(recordType: "Order", format: "status == 'open'"))
    /// stale.readsLatestCommits = true
    /// ```
    public var readsLatestCommits = false

    /// Whether a stage of `pipeline` writes the store `engine` reads (a stage not given its
    /// database yet is taken to).
    private static func writesItsOwnStore(_ pipeline: Pipeline?, engine: any StorageEngine) -> Bool {
        guard let writers = pipeline?.positionRecordingStages, !writers.isEmpty else { return false }
        let read = try? engine.storeIdentifier
        return writers.contains { writer in
            guard let written = writer.database?.engine else { return true }
            return written === engine || read == nil || (try? written.storeIdentifier) == read
        }
    }

    /// Records per page with ``fetchAllResults`` when ``resultsLimit`` is ``maximumResults``:
    /// CloudKit's request limit, so that a page makes one modify request.
    public static let defaultPageSize = 400

    private var resultCursor: Cursor?

    /// Engine reads per call, so that cancellation is prompt even for large pages.
    static let chunkSize = 1_000

    /// An operation that runs `query`, as `CKQueryOperation(query:)`: the first page of matches,
    /// in every zone of the database unless ``zoneID`` is set.
    ///
    /// ```swift
    /// let op = QueryOperation(query: Query(recordType: "Todo"))
    /// ```
    public convenience init(query: Query) {
        self.init()
        self.query = query
    }

    /// An operation that reads the next page after `cursor`, as `CKQueryOperation(cursor:)`.
    ///
    /// ```swift
    /// let next = QueryOperation(cursor: cursor)
    /// ```
    public convenience init(cursor: Cursor) {
        self.init()
        self.cursor = cursor
    }

    /// An operation without a query, as `CKQueryOperation()`: set ``query`` (or ``cursor``)
    /// before it runs; without either it fails with `invalidArguments`.
    ///
    /// ```swift
    /// let op = QueryOperation()
    /// op.query = Query(recordType: "Task", predicate: QueryPredicate(value: true))
    /// ```
    public override init() {
        super.init()
    }

    override func execute(engine: any StorageEngine, context: DatabaseContext) throws -> StratusError? {
        if resultsLimit < 0 {
            return StratusError(.invalidArguments, "QueryOperation.resultsLimit is \(resultsLimit); it must be 0 (as many as a page holds) or more")
        }
        var context = context
        // Stages that write what this reads would miss, on a lagging standby, what was just
        // saved; a stage writing another store (a copy, an archive) leaves the standby its reads.
        if readsLatestCommits || Self.writesItsOwnStore(pipeline, engine: engine) { context.readsLatestCommits = true }
        var compiled: CompiledQuery
        var progress: Progress
        let store = try engine.storeIdentifier
        if let cursor {
            try cursor.check(for: context, storeIdentifier: store)
            compiled = cursor.query
            compiled.desiredKeys = desiredKeys
            progress = cursor.zoneWide.map { .allZones($0) } ?? .zone(cursor.position)
        } else if let query {
            compiled = try Self.compile(query, searching: zoneID, desiredKeys: desiredKeys, context: context)
            progress = .start(searching: zoneID)
        } else {
            return StratusError(.invalidArguments, "QueryOperation needs a query or a cursor")
        }
        // CloudKit refuses to list its users: a user record is fetched by its ID, also through a
        // cursor edited to name them. Stratus's own jobs (allRecords, an export) and an
        // administrator may still read them all.
        if compiled.recordType == Record.SystemType.userRecord && !context.isAdministrator {
            return StratusError(.invalidArguments, "records of type \(compiled.recordType) cannot be queried, as in CloudKit: fetch a user's record by its ID")
        }
        compiled = try QueryAdmission.admit(compiled, engine: engine, context: context, continuing: cursor != nil)

        if let start = try beginSource(checkpoint: checkpoint, engine: engine) {
            guard case .query(let saved) = start, saved.query.fingerprint == compiled.fingerprint, saved.query.zoneID == compiled.zoneID else {
                return StratusError(.invalidArguments, "the checkpoint of job '\(checkpoint?.job ?? "")' holds \(start), not a place in this query; use another job name, or remove the checkpoint to start over")
            }
            try saved.check(for: context, storeIdentifier: store)
            progress = try progress.resumed(from: saved, job: checkpoint?.job ?? "")
        }
        func makeCursor(_ progress: Progress) -> Cursor? {
            switch progress {
            case .zone(let position):
                return position.map { Cursor(query: compiled, context: context, storeIdentifier: store, position: $0) }
            case .allZones(let zones):
                let last = QueryPosition(sortValues: [], recordName: zones.lastRecordName ?? "")
                return Cursor(query: compiled, context: context, storeIdentifier: store, position: last, zoneWide: zones)
            }
        }
        func cancelled(_ returned: Int, at progress: Progress) -> StratusError {
            var error = stoppedError("QueryOperation", completed: returned)
            // A pipeline's source resumes where every stage got (the pipeline says it, nil
            // before the first batch completed): its own cursor is past what they did not do.
            if pipeline == nil { error.resumeCursor = error.resumeCursor ?? makeCursor(progress) }
            return error
        }
        if fetchAllResults { return try readAll(compiled, from: progress, cursor: makeCursor, cancelled: cancelled, engine: engine, context: context) }

        let limit = resultsLimit == Self.maximumResults ? Self.defaultResultsLimit : resultsLimit
        var returned = 0
        var sequence = 0
        var more = true
        while returned < limit {
            if shouldStop { return cancelled(returned, at: progress) }
            let chunk = min(Self.chunkSize, limit - returned)
            let records: [Record]
            switch progress {
            case .zone(let position):
                let page = try withRetry { try engine.queryRecords(compiled, in: context, after: position, limit: chunk) }
                records = page.records
                progress = .zone(page.nextPosition)
                more = page.nextPosition != nil
            case .allZones(let position):
                let page = try withRetry { try ZoneWideQuery(query: compiled, engine: engine, context: context).next(after: position, limit: chunk) }
                records = page.records
                progress = .allZones(page.position)
                more = page.more
            }
            deliver(records, to: context.userRecordName)
            returned += records.count
            guard try emit(records, sequence: sequence, position: (more ? makeCursor(progress) : nil).map { .query($0) }, to: recordOutput) else {
                return cancelled(returned, at: progress)
            }
            sequence += 1
            if !more { break }
        }
        // Cancelled during the last page: the page was delivered, and the cursor resumes after it.
        if shouldStop { return cancelled(returned, at: progress) }
        resultCursor = more ? makeCursor(progress) : nil
        if more, checkpoint != nil { pipeline?.sourceStoppedWithMoreToRead() }
        return nil
    }

    /// Where a query continues: in its one zone, or in each zone of a query over every zone.
    enum Progress {
        case zone(QueryPosition?)
        case allZones(ZoneWidePosition)

        /// The start of a query of `zoneID`, or of every zone when `nil`.
        static func start(searching zoneID: RecordZone.ID?) -> Progress {
            zoneID == nil ? .allZones(ZoneWidePosition()) : .zone(nil)
        }

        /// This progress continued from a checkpoint's cursor of the same query.
        ///
        /// - Throws: `invalidArguments` when the cursor searched one zone and this query every
        ///   zone, or the other way round. A checkpoint of the default zone for a query without a
        ///   zone comes from a version whose such queries read the default zone only: going on
        ///   over every zone would change records the job never named.
        func resumed(from saved: Cursor, job: String) throws -> Progress {
            switch (self, saved.zoneWide) {
            case (.zone, nil): return .zone(saved.position)
            case (.allZones, let zones?): return .allZones(zones)
            case (.allZones, nil):
                throw StratusError(.invalidArguments, "the checkpoint of job '\(job)' was saved by a version of Stratus whose queries without a zone read the default zone only; set the query's zoneID to .default to finish that job, or remove the checkpoint to start over in every zone")
            case (.zone, _?):
                throw StratusError(.invalidArguments, "the checkpoint of job '\(job)' holds a place in every zone, and this query searches one zone; use another job name, or remove the checkpoint to start over")
            }
        }
    }

    /// `query` compiled for `zoneID`, or for every zone when `nil` (its zone then a placeholder).
    ///
    /// - Throws: `invalidArguments` for a zone no query may search (the shared database has no
    ///   default zone, and no query over all its zones: as in CloudKit, a query there names one
    ///   shared zone), and as ``CompiledQuery/init(_:zoneID:desiredKeys:)``.
    static func compile(_ query: Query, searching zoneID: RecordZone.ID?, desiredKeys: [String]?, context: DatabaseContext) throws -> CompiledQuery {
        if let zoneID {
            try ModifyRecordsOperation.checkZone(Record.ID(recordName: "query", zoneID: zoneID), context)
        } else if context.scope == .shared {
            throw StratusError(.invalidArguments, "a query in the shared database needs a zone: as in CloudKit, it searches one shared zone at a time")
        }
        return try CompiledQuery(query, zoneID: zoneID ?? .default, desiredKeys: desiredKeys)
    }

    /// Reads every match, a page (a batch) at a time: from one snapshot of the store for a
    /// query of one zone, or of a database with one zone.
    private func readAll(
        _ compiled: CompiledQuery, from start: Progress, cursor: (Progress) -> Cursor?, cancelled: (Int, Progress) -> StratusError,
        engine: any StorageEngine, context: DatabaseContext
    ) throws -> StratusError? {
        let pageSize = resultsLimit == Self.maximumResults ? Self.defaultPageSize : resultsLimit
        let reader = try withRetry { try QueryReader.open(compiled, from: start, engine: engine, context: context) }
        defer { reader.close() }
        var returned = 0
        var sequence = 0
        while true {
            if shouldStop { return cancelled(returned, reader.progress) }
            let records = try reader.next(limit: pageSize).records
            if records.isEmpty { break }
            deliver(records, to: context.userRecordName)
            returned += records.count
            guard try emit(records, sequence: sequence, position: cursor(reader.progress).map { .query($0) }, to: recordOutput) else {
                return cancelled(returned, reader.progress)
            }
            sequence += 1
        }
        if shouldStop { return cancelled(returned, reader.progress) }
        return nil
    }

    /// Hands a page to the per-record blocks, as records of the caller `viewer` (who reads
    /// themself as `__defaultOwner__`, see ``Record/creatorUserRecordID``).
    private func deliver(_ records: [Record], to viewer: String?) {
        let matched = recordMatchedBlock, fetched = recordFetchedBlock
        for record in records {
            record.presented(to: viewer)
            matched?(record.recordID, .success(record))
            fetched?(record)
        }
    }

    override func complete(with error: StratusError?) {
        recordOutput.complete(with: error)
        queryResultBlock?(error.map { .failure($0) } ?? .success(resultCursor))
        queryCompletionBlock?(error == nil ? resultCursor : nil, error)
    }
}
