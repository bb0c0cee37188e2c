import Foundation
@_spi(StratusEngine) import Stratus
import StratusSQL

extension PostgresEngine {
    @_spi(StratusEngine)
    public func queryRecords(_ query: CompiledQuery, in database: DatabaseContext, after position: QueryPosition?, limit: Int) throws -> QueryPage {
        precondition(limit > 0, "queryRecords needs a positive limit")
        let page = try readingStandbyFirst(for: database) { mayLag in try readTransaction(mayLag: mayLag) { connection -> QueryPage in
            guard var rows = try PostgresQueryRows(engine: self, query: query, database: database, after: position, on: connection, limit: limit + 1) else {
                return QueryPage(records: [], nextPosition: nil)
            }
            // One row beyond the limit says whether more follow.
            let read = try rows.next(limit, on: connection)
            let more = try !read.exhausted && rows.hasMore(on: connection)
            return QueryPage(records: read.records, nextPosition: more ? read.nextPosition : nil)
        } }
        try materializeAssets(of: page.records, owner: database.storageOwner)
        return page
    }

    @_spi(StratusEngine)
    public func openQueryStream(_ query: CompiledQuery, in database: DatabaseContext, after position: QueryPosition?) throws -> any QueryStream {
        try readingStandbyFirst(for: database) { mayLag in
            try PostgresQueryStream(engine: self, pool: mayLag ? readPool : pool, query: query, database: database, after: position)
        }
    }

    @_spi(StratusEngine)
    public func countRecords(_ query: CompiledQuery, in database: DatabaseContext) throws -> Int {
        try readingStandbyFirst(for: database) { mayLag in try count(query, in: database, mayLag: mayLag) }
    }

    private func count(_ query: CompiledQuery, in database: DatabaseContext, mayLag: Bool) throws -> Int {
        try readTransaction(mayLag: mayLag) { connection in
            guard let zone = try zoneHistory(query.zoneID, database, on: connection) else {
                if query.zoneID.isDefault { return 0 }
                throw StratusError.zoneNotFound(query.zoneID, in: database)
            }
            let schema = try loadSchema(query.recordType, storageContainer: database.storageContainer, on: connection)
            let translation = SQLQueryTranslation(query: query, schema: schema, dialect: PostgresDialect())
            let (count, residual) = try translation.count(zoneRow: zone.row)
            guard !residual.isEmpty else {
                return Int(try Self.query(connection, count.sql, count.parameters).first?.int64(0) ?? 0)
            }
            // Words the server cannot check: read the matching rows and count those that hold them.
            var rows = try PostgresQueryRows(engine: self, query: query, database: database, after: nil, on: connection, limit: nil)!
            var total = 0
            while true {
                let page = try rows.next(1_000, on: connection)
                total += page.records.count
                if page.exhausted { return total }
            }
        }
    }
}

/// A query's rows in order: read with a server-side cursor when the read is unbounded (a
/// stream, a count) or the server cannot check all of the query (rows whose words it cannot
/// check, ``StratusSQL/SQLQueryTranslation/Plan/residualWords``, are checked here and skipped),
/// else with one statement bounded by the limit, which lets the planner sort only the rows it
/// answers.
struct PostgresQueryRows {
    let engine: PostgresEngine
    let query: CompiledQuery
    /// The record type's schema: a field's declared type decides how its values sort.
    let schema: RecordTypeSchema?
    private var plans: [SQLQueryTranslation<PostgresDialect>.Plan]
    private(set) var searchable: [String]?
    /// The name of the server-side cursor reading the current plan, when one is used.
    private let cursorName: String?
    /// The rows a bounded read answers at most (from each plan).
    private let limit: Int?
    private var cursorOpen = false
    /// Rows read but not yet answered (with the distances their statement computed for the
    /// sort keys that are distances, when there are any), and whether the current plan has more.
    private var buffered: [(record: Record, distances: [Double?])] = []
    /// Where the rows not yet answered start in `buffered` (taking from the front one by one
    /// would move the rest each time).
    private var bufferedStart = 0
    private var planExhausted = false
    /// The type and user names and the document shape of the rows read before.
    private var recentTexts = PostgresRecentTexts(keepsDocumentShape: true)
    /// Whether the next rows of the cursor are asked for as soon as rows arrive (the
    /// connection then serves only these rows until they are read), and how many were asked.
    var readsAhead = false
    private var fetchSent: Int?
    /// A fetched batch whose rows ``nextUndecoded(_:on:)`` hands out a page at a time, from `start`.
    private var pending: (result: HandedResult, residualWords: [(words: [String], all: Bool)], sortColumns: [Int], start: Int)?

    /// The rows of `query` after `position`: at most `limit` (`nil`: all) of each plan.
    init?(engine: PostgresEngine, query: CompiledQuery, database: DatabaseContext, after position: QueryPosition?, on connection: PostgresConnection, limit: Int?) throws {
        guard let zone = try engine.zoneHistory(query.zoneID, database, on: connection) else {
            if query.zoneID.isDefault { return nil }
            throw StratusError.zoneNotFound(query.zoneID, in: database)
        }
        let schema = try engine.loadSchema(query.recordType, storageContainer: database.storageContainer, on: connection)
        let translation = SQLQueryTranslation(query: query, schema: schema, dialect: PostgresDialect())
        self.engine = engine
        self.query = query
        self.schema = schema
        searchable = schema?.searchableFields.isEmpty == false ? schema?.searchableFields : nil
        let plans = [try translation.select(zoneRow: zone.row, after: position, limit: -1),
                     try translation.nullTail(zoneRow: zone.row, after: position, limit: -1)].compactMap { $0 }
        self.plans = plans
        let bounded = limit != nil && plans.allSatisfy { $0.residualWords.isEmpty }
        self.limit = bounded ? limit : nil
        cursorName = bounded ? nil : "stratus_rows"
    }

    /// Up to `limit` more records (restricted to the desired keys) and the position of the
    /// last; `exhausted` when no row remains.
    mutating func next(_ limit: Int, on connection: PostgresConnection) throws -> (records: [Record], nextPosition: QueryPosition?, exhausted: Bool) {
        var records: [Record] = []
        // A page's position is its last row's, made once per page rather than once per row.
        var last: (record: Record, distances: [Double?])?
        while records.count < limit {
            if bufferedStart == buffered.count {
                guard try fill(wanting: limit - records.count, on: connection) else { return (records, last.map(position), true) }
                continue
            }
            let row = buffered[bufferedStart]
            bufferedStart += 1
            records.append(row.record.restricted(to: query.desiredKeys))
            last = row
        }
        return (records, last.map(position), false)
    }

    /// The position of a row: its values of the sort keys (a distance as its statement
    /// computed it) and its record name.
    private func position(_ row: (record: Record, distances: [Double?])) -> QueryPosition {
        QueryPosition(of: row.record, in: query, distances: row.distances, schema: schema)
    }

    /// Whether another row follows.
    mutating func hasMore(on connection: PostgresConnection) throws -> Bool {
        if bufferedStart < buffered.count { return true }
        return try fill(wanting: 1, on: connection)
    }

    /// Reads more rows into `buffered`; `false` when every plan is read.
    private mutating func fill(wanting count: Int, on connection: PostgresConnection) throws -> Bool {
        if bufferedStart == buffered.count {
            buffered.removeAll(keepingCapacity: true)
            bufferedStart = 0
        }
        while buffered.isEmpty {
            // The rest of a batch that nextUndecoded began to hand out comes first.
            if let batch = pending {
                pending = nil
                try Self.decode(batch.result.rows, batch.start..<batch.result.rows.count, residualWords: batch.residualWords, sortColumns: batch.sortColumns,
                                query: query, engine: engine, searchable: searchable, recent: &recentTexts) { buffered.append($0) }
                continue
            }
            guard let (rows, plan) = try fetch(wanting: count, on: connection) else { return false }
            try Self.decode(rows, residualWords: plan.residualWords, sortColumns: plan.sortColumns, query: query, engine: engine,
                            searchable: searchable, recent: &recentTexts) { buffered.append($0) }
        }
        return true
    }

    /// Up to `limit` more rows as the server sent them, to be made into records on another
    /// thread (``PostgresRowDecoder``): a slice of a fetched batch of at least 1,000 rows, so
    /// that small pages cost no round trip each. Rows that an earlier ``next(_:on:)`` left
    /// buffered come decoded. `nil` when every plan is read.
    mutating func nextUndecoded(_ limit: Int, on connection: PostgresConnection) throws -> UndecodedRows? {
        if bufferedStart < buffered.count {
            let read = try next(limit, on: connection)
            return .decoded(QueryPage(records: read.records, nextPosition: read.nextPosition))
        }
        if pending == nil {
            // A plan can end on a batch's boundary: its last fetch answers no rows, and the next
            // plan (the rows a descending key misses) may follow.
            while true {
                guard let (rows, plan) = try fetch(wanting: limit, on: connection) else { return nil }
                guard rows.isEmpty else {
                    pending = (HandedResult(rows), plan.residualWords, plan.sortColumns, 0)
                    break
                }
            }
        }
        guard let batch = pending else { return nil }
        let end = min(batch.start + limit, batch.result.rows.count)
        pending = end == batch.result.rows.count ? nil : (batch.result, batch.residualWords, batch.sortColumns, end)
        return .rows(batch.result, batch.start..<end, residualWords: batch.residualWords, sortColumns: batch.sortColumns)
    }

    /// What ``nextUndecoded(_:on:)`` answers: rows of a fetched batch, or records decoded already.
    enum UndecodedRows {
        case rows(HandedResult, Range<Int>, residualWords: [(words: [String], all: Bool)], sortColumns: [Int])
        case decoded(QueryPage)
    }

    /// The next rows of the plan being read, with that plan; `nil` when every plan is read.
    /// A cursor is fetched `count` rows at a time, at least 1,000.
    private mutating func fetch(wanting count: Int, on connection: PostgresConnection) throws -> (PostgresResult, SQLQueryTranslation<PostgresDialect>.Plan)? {
        while let plan = plans.first {
            if planExhausted {
                if cursorOpen, let cursorName {
                    try connection.execute("CLOSE \(cursorName)", prepare: false)
                    cursorOpen = false
                }
                plans.removeFirst()
                planExhausted = false
                continue
            }
            let rows: PostgresResult
            if let cursorName {
                if !cursorOpen {
                    try connection.execute("DECLARE \(cursorName) NO SCROLL CURSOR FOR " + PostgresSQL.numbered(plan.sql), plan.parameters.map(PostgresSQL.value), prepare: false)
                    cursorOpen = true
                }
                let batch: Int
                if let sent = fetchSent {
                    batch = sent
                    fetchSent = nil
                    rows = try connection.receive()
                } else {
                    batch = max(count, 1_000)
                    rows = try connection.query("FETCH FORWARD \(batch) FROM \(cursorName)", prepare: false)
                }
                if rows.count < batch {
                    planExhausted = true
                } else if readsAhead {
                    // The server reads the next rows while these are decoded.
                    try connection.send("FETCH FORWARD \(batch) FROM \(cursorName)")
                    fetchSent = batch
                }
            } else {
                rows = try PostgresEngine.query(connection, plan.sql + " LIMIT \(limit ?? 1)", plan.parameters)
                planExhausted = true
            }
            return (rows, plan)
        }
        return nil
    }

    /// Makes rows into records (with the distances their statement computed, for a page's
    /// position), leaving out those whose words miss the plan's residual word conditions.
    static func decode(_ rows: PostgresResult, _ range: Range<Int>? = nil, residualWords: [(words: [String], all: Bool)], sortColumns: [Int], query: CompiledQuery,
                       engine: PostgresEngine, searchable: [String]?, recent: inout PostgresRecentTexts, _ body: ((record: Record, distances: [Double?])) -> Void) throws {
        let readsDistances = query.sortKeys.contains { $0.distanceFrom != nil }
        for index in range ?? rows.indices {
            let row = rows[index]
            let record = try engine.decodeRecord(row, zoneID: query.zoneID, recordType: query.recordType, recent: &recent)
            if !residualWords.isEmpty, !Self.holds(residualWords, in: record, searchable: searchable) { continue }
            body((record, readsDistances ? try zip(query.sortKeys, sortColumns).map { key, column in
                key.distanceFrom == nil ? nil : try row.double(column)
            } : []))
        }
    }

    /// Whether a record's words (``Stratus/TextSearch``) hold every condition: any (or all) of its words.
    static func holds(_ conditions: [(words: [String], all: Bool)], in record: Record, searchable: [String]?) -> Bool {
        let words = TextSearch.words(of: record.fieldValues, only: searchable)
        return conditions.allSatisfy { $0.all ? $0.words.allSatisfy(words.contains) : $0.words.contains(where: words.contains) }
    }

    /// Closes the cursor, if one is open, so that the transaction can end cleanly.
    mutating func finish(on connection: PostgresConnection) {
        if fetchSent != nil {
            fetchSent = nil
            connection.discardSentStatement()
        }
        if cursorOpen, let cursorName { _ = try? connection.execute("CLOSE \(cursorName)", prepare: false) }
        cursorOpen = false
        plans = []
        buffered = []
        pending = nil
        bufferedStart = 0
    }
}

/// A query read in one `REPEATABLE READ` transaction with a server-side cursor, on a
/// connection of its own held until closed.
final class PostgresQueryStream: QueryStream, @unchecked Sendable {
    // @unchecked: the connection and the rows are touched only under `lock`, by one caller at
    // a time; the connection belongs to this stream until `close()` returns it to the pool.
    private let lock = NSLock()
    private let engine: PostgresEngine
    private let pool: PostgresConnectionPool
    private let owner: String
    private var connection: PostgresConnection?
    private var rows: PostgresQueryRows?
    private let decoder: PostgresRowDecoder

    init(engine: PostgresEngine, pool: PostgresConnectionPool, query: CompiledQuery, database: DatabaseContext, after position: QueryPosition?) throws {
        self.engine = engine
        self.pool = pool
        owner = database.storageOwner
        let connection = try pool.acquire()
        do {
            try connection.begin(isolation: .repeatableRead, readOnly: true)
            rows = try PostgresQueryRows(engine: engine, query: query, database: database, after: position, on: connection, limit: nil)
            rows?.readsAhead = true
            decoder = PostgresRowDecoder(engine: engine, query: query, schema: rows?.schema, searchable: rows?.searchable, owner: owner)
        } catch {
            try? connection.rollback()
            pool.release(connection)
            throw error
        }
        self.connection = connection
    }

    deinit { close() }

    func next(limit: Int) throws -> QueryPage {
        precondition(limit > 0, "QueryStream.next needs a positive limit")
        let page = try lock.withLock { () -> QueryPage in
            guard let connection, var rows else { return QueryPage(records: [], nextPosition: nil) }
            let read = try rows.next(limit, on: connection)
            self.rows = read.exhausted ? nil : rows
            return QueryPage(records: read.records, nextPosition: read.nextPosition)
        }
        try engine.materializeAssets(of: page.records, owner: owner)
        return page
    }

    func nextUndecoded(limit: Int) throws -> UndecodedQueryPage {
        precondition(limit > 0, "QueryStream.nextUndecoded needs a positive limit")
        return try lock.withLock {
            guard let connection, var rows else { return UndecodedQueryPage(decoded: QueryPage(records: [], nextPosition: nil)) }
            guard let read = try rows.nextUndecoded(limit, on: connection) else {
                self.rows = nil
                return UndecodedQueryPage(decoded: QueryPage(records: [], nextPosition: nil))
            }
            self.rows = rows
            switch read {
            case .rows(let handed, let range, let residualWords, let sortColumns):
                let decoder = self.decoder
                // Without residual word conditions no row is left out: the page is its stored
                // rows unless desired keys restrict the records.
                let stored = residualWords.isEmpty && decoder.query.desiredKeys == nil
                    ? try PostgresStoredRows(result: handed, range: range, engine: engine, owner: owner, query: decoder.query) : nil
                return UndecodedQueryPage(count: range.count, storedRows: stored) {
                    try decoder.decode(handed.rows, range, residualWords: residualWords, sortColumns: sortColumns)
                }
            case .decoded(let page):
                try engine.materializeAssets(of: page.records, owner: owner)
                return UndecodedQueryPage(decoded: page)
            }
        }
    }

    func close() {
        lock.withLock {
            guard let connection else { return }
            rows?.finish(on: connection)
            rows = nil
            try? connection.commit()
            pool.release(connection)
            self.connection = nil
        }
    }
}

/// Makes a stream's fetched rows into records a page at a time, reusing the type and user
/// names and the document shape of the rows before, as the stream's own reads do.
final class PostgresRowDecoder: @unchecked Sendable {
    // @unchecked: `recent` is touched only under `lock`.
    private let lock = NSLock()
    private let engine: PostgresEngine
    let query: CompiledQuery
    private let schema: RecordTypeSchema?
    private let searchable: [String]?
    private let owner: String
    private var recent = PostgresRecentTexts(keepsDocumentShape: true)

    init(engine: PostgresEngine, query: CompiledQuery, schema: RecordTypeSchema?, searchable: [String]?, owner: String) {
        self.engine = engine
        self.query = query
        self.schema = schema
        self.searchable = searchable
        self.owner = owner
    }

    /// The rows' records that hold the residual word conditions, restricted to the query's
    /// desired keys, with their assets' files in place, and the position of the last.
    func decode(_ rows: PostgresResult, _ range: Range<Int>, residualWords: [(words: [String], all: Bool)], sortColumns: [Int]) throws -> QueryPage {
        let page = try lock.withLock { () -> QueryPage in
            var records: [Record] = []
            records.reserveCapacity(range.count)
            var last: (record: Record, distances: [Double?])?
            try PostgresQueryRows.decode(rows, range, residualWords: residualWords, sortColumns: sortColumns, query: query, engine: engine,
                                         searchable: searchable, recent: &recent) { row in
                records.append(row.record.restricted(to: query.desiredKeys))
                last = row
            }
            return QueryPage(records: records, nextPosition: last.map { QueryPosition(of: $0.record, in: query, distances: $0.distances, schema: schema) })
        }
        try engine.materializeAssets(of: page.records, owner: owner)
        return page
    }
}

/// Rows of a stream's fetched batch as ``Stratus/StoredRecordRows``: the columns of
/// ``PostgresSchema/queryRecordColumns`` handed over as the server sent them.
struct PostgresStoredRows: StoredRecordRows {
    let result: HandedResult
    let range: Range<Int>
    let engine: PostgresEngine
    let owner: String
    let zoneID: RecordZone.ID
    /// The query's record type, which the rows do not repeat, and its bytes.
    let recordType: String
    private let recordTypeBytes: [UInt8]
    /// The records of the rows that hold assets (by row), decoded with their files in place
    /// when the page was read: a page's asset files take one query, not one per record, and
    /// that query runs on the reading thread, not on the threads that encode.
    private let assetRecords: [Int: Record]

    /// - Throws: what finding the files of the page's assets throws.
    init(result: HandedResult, range: Range<Int>, engine: PostgresEngine, owner: String, query: CompiledQuery) throws {
        self.result = result
        self.range = range
        self.engine = engine
        self.owner = owner
        zoneID = query.zoneID
        recordType = query.recordType
        recordTypeBytes = Array(query.recordType.utf8)
        var assetRecords: [Int: Record] = [:]
        for index in range {
            let row = result.rows[index]
            guard case let document?? = row.storedText(7), Self.mayHoldAsset(document),
                  let record = try? engine.decodeRecord(row, zoneID: zoneID, recordType: recordType) else { continue }
            // A row that cannot be decoded is decoded again when it is written, which reports it.
            assetRecords[index] = record
        }
        if !assetRecords.isEmpty { try engine.materializeAssets(of: Array(assetRecords.values), owner: owner) }
        self.assetRecords = assetRecords
    }

    /// Whether a stored document may hold an asset: it has an asset's tag (`["A"` or `["AL"`;
    /// inside a JSON string a quote is escaped, so a string's text never matches).
    private static func mayHoldAsset(_ document: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let base = document.baseAddress, document.count >= 5 else { return false }
        // `["A"` or `["AL"`: four bytes from an opening bracket, the fifth inside the document.
        let last = base + document.count - 4
        var at = base
        while at < last, let found = memchr(at, Int32(UInt8(ascii: "[")), last - at) {
            let bracket = UnsafePointer(found.assumingMemoryBound(to: UInt8.self))
            if bracket[1] == UInt8(ascii: "\"") && bracket[2] == UInt8(ascii: "A")
                && (bracket[3] == UInt8(ascii: "\"") || (bracket[3] == UInt8(ascii: "L") && bracket[4] == UInt8(ascii: "\""))) { return true }
            at = bracket + 1
        }
        return false
    }

    var count: Int { range.count }

    func forEachRow(_ body: (StoredRecordRow?, () throws -> Record) throws -> Bool) throws {
        try recordTypeBytes.withUnsafeBufferPointer { recordTypeBytes in
            for index in range {
                let row = result.rows[index]
                func record() throws -> Record {
                    if let decoded = assetRecords[index] { return decoded }
                    let record = try engine.decodeRecord(row, zoneID: zoneID, recordType: recordType)
                    try engine.materializeAssets(of: [record], owner: owner)
                    return record
                }
                guard try body(Self.stored(row, recordType: recordTypeBytes), record) else { return }
            }
        }
    }

    /// The row as stored; nil where a column holds NULL that must not (a date, the name, the
    /// creator), jsonb of an unknown version, or a date that is not a number: decoding reports
    /// those, or reads them as the record does.
    private static func stored(_ row: PostgresRow, recordType: UnsafeBufferPointer<UInt8>) -> StoredRecordRow? {
        guard case let name?? = row.storedText(0), case let creator?? = row.storedText(3), case let modifier? = row.storedText(5),
              case let tag? = row.storedText(6), case let document? = row.storedText(7), case let parent? = row.storedText(8),
              let created = try? row.double(2), let modified = try? row.double(4) else { return nil }
        return StoredRecordRow(recordName: name, recordType: recordType, changeTag: tag, creationDate: created, creator: creator,
                               modificationDate: modified, modifier: modifier ?? creator, parentName: parent, document: document)
    }
}

/// A result handed from the stream that fetched it to the threads that decode or encode its
/// pages. libpq's results are read-only once made and may be read from several threads at
/// once; the stream only slices it into pages, so those threads are its only readers.
final class HandedResult: @unchecked Sendable {
    let rows: PostgresResult
    init(_ rows: PostgresResult) { self.rows = rows }
}
