import Foundation
@_spi(StratusEngine) import Stratus
import StratusSQL

extension PostgresEngine {
    @_spi(StratusEngine)
    public func saveSchemas(_ schemas: [RecordTypeSchema], containerIdentifier: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        try writeTransaction { connection in
            // Schema changes of all containers serialize: they build shared indexes.
            try connection.execute("SELECT pg_advisory_xact_lock($1)", [.int64(PostgresSchema.migrationLock + 1)])
            for schema in schemas {
                let previous = try loadSchema(schema.recordType, containerIdentifier: containerIdentifier, on: connection)
                try connection.execute("""
                    INSERT INTO record_types(container, record_type, schema) VALUES ($1, $2, $3)
                    ON CONFLICT (container, record_type) DO UPDATE SET schema = excluded.schema
                    """, [.text(containerIdentifier), .text(schema.recordType), .text(String(decoding: try encoder.encode(schema), as: UTF8.self))])
                if previous?.searchableFields != schema.searchableFields {
                    try rebuildTokens(recordType: schema.recordType, containerIdentifier: containerIdentifier, searchable: schema.searchableFields, on: connection)
                }
            }
            try synchronizeIndexes(on: connection)
        }
        // New indexes are worth nothing to the planner until it knows the table's statistics.
        try? pool.withConnection { try $0.executeScript("ANALYZE records") }
    }

    @_spi(StratusEngine)
    public func fetchSchemas(containerIdentifier: String) throws -> [RecordTypeSchema] {
        try readTransaction(mayLag: false) { connection in
            try connection.query("SELECT schema FROM record_types WHERE container = $1 ORDER BY record_type", [.text(containerIdentifier)]).map {
                try Self.decodeSchema(try $0.text(0) ?? "")
            }
        }
    }

    func loadSchema(_ recordType: String, containerIdentifier: String, on connection: PostgresConnection) throws -> RecordTypeSchema? {
        guard let text = try connection.query("SELECT schema FROM record_types WHERE container = $1 AND record_type = $2",
                                              [.text(containerIdentifier), .text(recordType)]).first?.text(0) else { return nil }
        return try Self.decodeSchema(text)
    }

    private static func decodeSchema(_ text: String) throws -> RecordTypeSchema {
        do {
            return try JSONDecoder().decode(RecordTypeSchema.self, from: Data(text.utf8))
        } catch {
            throw StratusError(.badDatabase, "a stored record type schema does not decode: \(error)")
        }
    }

    /// Makes the store's `ix_` indexes exactly those that the schemas of every container
    /// declare: partial expression indexes of each type, in the expressions queries use.
    func synchronizeIndexes(on connection: PostgresConnection) throws {
        var wanted: [String: String] = [:]
        for row in try connection.query("SELECT schema FROM record_types") {
            let schema = try Self.decodeSchema(try row.text(0) ?? "")
            for keys in PostgresDialect(table: "").indexKeys(for: schema) {
                // Expressions go in parentheses; NULLS FIRST matches the queries' ascending order.
                let columns = keys.map { $0.hasPrefix("(") || !$0.contains("(") ? "\($0) NULLS FIRST" : "(\($0)) NULLS FIRST" }
                let definition = "(zone_id, " + columns.joined(separator: ", ") + ") WHERE record_type = '\(schema.recordType)'"
                wanted["ix_" + StableHash.hex(of: definition.utf8)] = definition
            }
        }
        let existing = Set(try connection.query("SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'records' AND indexname LIKE 'ix\\_%'").map { try $0.text(0) ?? "" })
        for name in existing.subtracting(wanted.keys) {
            try connection.executeScript("DROP INDEX IF EXISTS \(try PostgresConnection.quoteIdentifier(name))")
        }
        for (name, definition) in wanted where !existing.contains(name) {
            try connection.executeScript("CREATE INDEX IF NOT EXISTS \(try PostgresConnection.quoteIdentifier(name)) ON records \(definition)")
        }
    }

    /// The fields whose words are indexed for a record type, empty when none are searchable.
    func searchableFields(_ recordType: String, containerIdentifier: String, on connection: PostgresConnection) throws -> [String] {
        try loadSchema(recordType, containerIdentifier: containerIdentifier, on: connection)?.searchableFields ?? []
    }

    /// Replaces a record's indexed words.
    func replaceTokens(zoneRow: Int64, owner: String, recordName: String, fields: [String: FieldValue], searchable: [String], on connection: PostgresConnection) throws {
        try connection.execute("DELETE FROM record_tokens WHERE zone_id = $1 AND record_name = $2", [.int64(zoneRow), .text(recordName)])
        guard !searchable.isEmpty else { return }
        let words = Array(TextSearch.words(of: fields, only: searchable))
        guard !words.isEmpty else { return }
        try connection.execute("""
            INSERT INTO record_tokens(zone_id, token, record_name, owner) SELECT $1, t, $2, $3 FROM unnest($4::text[]) AS t ON CONFLICT DO NOTHING
            """, [.int64(zoneRow), .text(recordName), .text(owner), .textArray(words)])
    }

    private func rebuildTokens(recordType: String, containerIdentifier: String, searchable: [String], on connection: PostgresConnection) throws {
        let rows = try connection.query("""
            SELECT r.zone_id, r.owner, r.record_name, coalesce(r.exact_fields, r.fields::text) FROM records r JOIN zones z ON z.zone_id = r.zone_id
            WHERE z.container = $1 AND r.record_type = $2
            """, [.text(containerIdentifier), .text(recordType)])
        for row in rows {
            let fields = try FieldDocument.decode(try row.text(3) ?? "{}", zoneID: .default) { _ in nil }
            try replaceTokens(zoneRow: try row.int64(0) ?? 0, owner: try row.text(1) ?? "", recordName: try row.text(2) ?? "", fields: fields, searchable: searchable, on: connection)
        }
    }

    /// How PostgreSQL runs a query (`EXPLAIN`), one step per line; for tests and diagnostics:
    /// a query that can use an index shows `Index Scan using ix_…`. With `preferringIndexes`,
    /// sequential scans and sorts count as a last resort, which shows whether an index *can*
    /// serve the query whatever the table's size (a small table is read faster whole).
    ///
    /// ```swift
    /// print(try engine.queryPlan(for: compiled, in: database.context))
    /// ```
    @_spi(StratusEngine)
    public func queryPlan(for query: CompiledQuery, in database: DatabaseContext, after position: QueryPosition? = nil, limit: Int = 400,
                          preferringIndexes: Bool = false) throws -> String {
        try pool.withTransaction(isolation: .repeatableRead) { connection in
            if preferringIndexes {
                try connection.executeScript("SET LOCAL enable_seqscan = off; SET LOCAL enable_sort = off; SET LOCAL enable_bitmapscan = off")
            }
            let zoneRow = try zoneHistory(query.zoneID, database, on: connection)?.row ?? -1
            let schema = try loadSchema(query.recordType, containerIdentifier: database.containerIdentifier, on: connection)
            let plan = try SQLQueryTranslation(query: query, schema: schema, dialect: PostgresDialect()).select(zoneRow: zoneRow, after: position, limit: limit)
            return try Self.query(connection, "EXPLAIN " + plan.sql, plan.parameters).map { try $0.text(0) ?? "" }.joined(separator: "\n")
        }
    }
}
