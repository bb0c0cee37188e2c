import Foundation
@_spi(StratusEngine) import Stratus
import StratusSQL

extension SQLiteEngine {
    @_spi(StratusEngine)
    public func openQueryStream(_ query: CompiledQuery, in database: DatabaseContext, after position: QueryPosition?) throws -> any QueryStream {
        try SQLiteQueryStream(engine: self, query: query, database: database, after: position)
    }

    @_spi(StratusEngine)
    public func countRecords(_ query: CompiledQuery, in database: DatabaseContext) throws -> Int {
        try readTransaction { connection in
            guard let zoneRow = try zoneRowID(query.zoneID, database, on: connection, createDefault: false) else {
                if query.zoneID.isDefault { return 0 }
                throw StratusError.zoneNotFound(query.zoneID, in: database)
            }
            let schema = try loadSchema(query.recordType, storageContainer: database.storageContainer, on: connection)
            let plan = try SQLQueryTranslation(query: query, schema: schema, dialect: SQLiteDialect()).count(zoneRow: zoneRow).fragment
            let statement = try connection.statement(plan.sql)
            try statement.bind(plan.parameters)
            defer { statement.reset() }
            guard try statement.step() else { return 0 }
            return Int(statement.int64(0))
        }
    }
}

/// A query read in one read transaction on a reader connection of its own, held until closed.
///
/// SQLite answers every statement of a transaction from the snapshot its first read took; the
/// query is one statement (two for a descending first key), so a sort no index serves is done
/// once. The statement has no LIMIT, so SQLite sorts with its sorter: runs the size of the page
/// cache (2 MiB by default) written to temporary files and merged, so memory stays bounded
/// however many rows are sorted. While the transaction stays open, the write-ahead log cannot
/// be checkpointed past it.
final class SQLiteQueryStream: QueryStream, @unchecked Sendable {
    // @unchecked: the connection and the row reader are touched only under `lock`, by one
    // caller at a time; the connection belongs to this stream until `close()` returns it.
    private let lock = NSLock()
    private let engine: SQLiteEngine
    private var connection: SQLiteConnection?
    private var rows: SQLiteQueryRows?
    private let decoder: SQLiteRowDecoder

    init(engine: SQLiteEngine, query: CompiledQuery, database: DatabaseContext, after position: QueryPosition?) throws {
        self.engine = engine
        let connection = try engine.takeReader()
        do {
            try connection.execute("BEGIN")
            rows = try SQLiteQueryRows(engine: engine, query: query, database: database, after: position, limit: -1, on: connection)
            decoder = SQLiteRowDecoder(engine: engine, query: query, schema: rows?.schema)
        } catch {
            connection.resetActiveStatements()
            try? connection.execute("ROLLBACK")
            engine.returnReader(connection)
            throw error
        }
        self.connection = connection
    }

    deinit { close() }

    func next(limit: Int) throws -> QueryPage {
        precondition(limit > 0, "QueryStream.next needs a positive limit")
        return try lock.withLock {
            guard let connection, var rows else { return QueryPage(records: [], nextPosition: nil) }
            let page = try rows.next(limit, on: connection)
            self.rows = page.exhausted ? nil : rows
            return QueryPage(records: page.records, nextPosition: page.nextPosition)
        }
    }

    func nextUndecoded(limit: Int) throws -> UndecodedQueryPage {
        precondition(limit > 0, "QueryStream.nextUndecoded needs a positive limit")
        return try lock.withLock {
            guard let connection, var rows else { return UndecodedQueryPage(decoded: QueryPage(records: [], nextPosition: nil)) }
            let page = try rows.nextCopied(limit, on: connection)
            self.rows = page.exhausted ? nil : rows
            let decoder = self.decoder
            // Every row is decoded, none left out: the page is its stored rows unless desired
            // keys restrict the records.
            let stored = decoder.query.desiredKeys == nil ? SQLiteStoredRows(rows: page.rows, engine: engine, zoneID: decoder.query.zoneID) : nil
            return UndecodedQueryPage(count: page.rows.count, storedRows: stored) { try decoder.decode(page.rows, lastDistances: page.lastDistances) }
        }
    }

    func close() {
        lock.withLock {
            guard let connection else { return }
            rows?.finish()
            rows = nil
            connection.resetActiveStatements()
            try? connection.execute("COMMIT")
            engine.returnReader(connection)
            self.connection = nil
        }
    }
}

/// Makes a stream's copied rows into records a page at a time, reusing the type and user
/// names and the document shape of the rows before, as a statement's reader does.
final class SQLiteRowDecoder: @unchecked Sendable {
    // @unchecked: `recent` is touched only under `lock`.
    private let lock = NSLock()
    private let engine: SQLiteEngine
    let query: CompiledQuery
    private let schema: RecordTypeSchema?
    private var recent = SQLiteRecentTexts(keepsDocumentShape: true)

    init(engine: SQLiteEngine, query: CompiledQuery, schema: RecordTypeSchema?) {
        self.engine = engine
        self.query = query
        self.schema = schema
    }

    /// The rows' records, restricted to the query's desired keys, and the position of the
    /// last (its sort values, with the distances its statement computed).
    func decode(_ rows: SQLiteCopiedRows, lastDistances: [Double?]) throws -> QueryPage {
        try lock.withLock {
            var records: [Record] = []
            records.reserveCapacity(rows.count)
            var last: Record?
            try rows.forEachRow { row in
                let record = try engine.decodeRecord(row, zoneID: query.zoneID, recent: &recent)
                records.append(record.restricted(to: query.desiredKeys))
                last = record
            }
            return QueryPage(records: records, nextPosition: last.map { QueryPosition(of: $0, in: query, distances: lastDistances, schema: schema) })
        }
    }
}

/// A stream's copied rows as ``Stratus/StoredRecordRows``: the columns of
/// ``SQLiteSchema/recordColumns`` handed over as they were read.
struct SQLiteStoredRows: StoredRecordRows {
    let rows: SQLiteCopiedRows
    let engine: SQLiteEngine
    let zoneID: RecordZone.ID

    var count: Int { rows.count }

    func forEachRow(_ body: (StoredRecordRow?, () throws -> Record) throws -> Bool) throws {
        // A row stops the loop by throwing this, which `forEachRow` of the copied rows passes on.
        struct Stop: Error {}
        do {
            try rows.forEachRow { row in
                func record() throws -> Record { try engine.decodeRecord(row, zoneID: zoneID) }
                guard try body(Self.stored(row), record) else { throw Stop() }
            }
        } catch is Stop {}
    }

    /// The row as stored; nil where a text column holds a number (a damaged row), which only
    /// decoding reports as the record does.
    private static func stored(_ row: SQLiteCopiedRows.Row) -> StoredRecordRow? {
        guard case let name?? = row.storedText(0), case let type?? = row.storedText(1), case let creator?? = row.storedText(3),
              case let modifier? = row.storedText(5), case let tag? = row.storedText(6), case let document? = row.storedText(7),
              case let parent? = row.storedText(8) else { return nil }
        // NULL modification columns repeat the creation ones (see recordColumns).
        let created = row.double(2)
        return StoredRecordRow(recordName: name, recordType: type, changeTag: tag, creationDate: created, creator: creator,
                               modificationDate: row.isNull(4) ? created : row.double(4), modifier: modifier ?? creator,
                               parentName: parent, document: document)
    }
}
