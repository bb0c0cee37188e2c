import Foundation
@_spi(StratusEngine) import Stratus
import StratusSQL

extension SQLiteEngine {
    @_spi(StratusEngine) public func saveSchemas(_ schemas: [RecordTypeSchema], containerIdentifier: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        try writeTransaction { connection in
            for schema in schemas {
                let previous = try loadSchema(schema.recordType, containerIdentifier: containerIdentifier, on: connection)
                let upsert = try connection.statement("INSERT OR REPLACE INTO record_types(container, record_type, schema) VALUES (?, ?, ?)")
                try upsert.bind([.text(containerIdentifier), .text(schema.recordType), .text(String(decoding: try encoder.encode(schema), as: UTF8.self))])
                try upsert.step()
                if previous?.searchableFields != schema.searchableFields {
                    try rebuildTokens(recordType: schema.recordType, containerIdentifier: containerIdentifier, searchable: schema.searchableFields, on: connection)
                }
            }
            try synchronizeIndexes(on: connection)
        }
    }

    @_spi(StratusEngine) public func fetchSchemas(containerIdentifier: String) throws -> [RecordTypeSchema] {
        try readTransaction { connection in
            let select = try connection.statement("SELECT schema FROM record_types WHERE container = ? ORDER BY record_type")
            try select.bind([.text(containerIdentifier)])
            var schemas: [RecordTypeSchema] = []
            while try select.step() { schemas.append(try Self.decodeSchema(select.text(0) ?? "")) }
            return schemas
        }
    }

    func loadSchema(_ recordType: String, containerIdentifier: String, on connection: SQLiteConnection) throws -> RecordTypeSchema? {
        let select = try connection.statement("SELECT schema FROM record_types WHERE container = ? AND record_type = ?")
        try select.bind([.text(containerIdentifier), .text(recordType)])
        guard try select.step() else { return nil }
        let schema = try Self.decodeSchema(select.text(0) ?? "")
        select.reset()
        return schema
    }

    private static func decodeSchema(_ text: String) throws -> RecordTypeSchema {
        do {
            return try JSONDecoder().decode(RecordTypeSchema.self, from: Data(text.utf8))
        } catch {
            throw StratusError(.badDatabase, "a stored record type schema does not decode: \(error)")
        }
    }

    /// Makes the store's `ix_` indexes exactly those that the schemas of every container declare.
    func synchronizeIndexes(on connection: SQLiteConnection) throws {
        var wanted: [String: String] = [:]
        let select = try connection.statement("SELECT schema FROM record_types")
        while try select.step() {
            for definition in Self.indexDefinitions(for: try Self.decodeSchema(select.text(0) ?? "")) {
                wanted[Self.indexName(definition)] = definition
            }
        }
        var existing: Set<String> = []
        let indexes = try connection.statement("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'records' AND name GLOB 'ix_*'")
        while try indexes.step() { existing.insert(indexes.text(0) ?? "") }
        for name in existing.subtracting(wanted.keys) {
            try connection.execute("DROP INDEX IF EXISTS \(name)")
        }
        for (name, definition) in wanted where !existing.contains(name) {
            try connection.execute("CREATE INDEX IF NOT EXISTS \(name) ON records\(definition)")
        }
    }

    /// Index definitions (column list and WHERE) for a schema: the keys every SQL engine
    /// indexes (``StratusSQL/SQLDialect/indexKeys(for:)``), as partial indexes of the type.
    static func indexDefinitions(for schema: RecordTypeSchema) -> [String] {
        SQLiteDialect(table: "").indexKeys(for: schema).map { keys in
            "(zone_id, " + keys.joined(separator: ", ") + ") WHERE record_type = '\(schema.recordType)'"
        }
    }

    static func indexName(_ definition: String) -> String {
        "ix_" + StableHash.hex(of: definition.utf8)
    }

    /// The fields whose words are indexed for a record type, empty when none are searchable.
    func searchableFields(_ recordType: String, containerIdentifier: String, on connection: SQLiteConnection) throws -> [String] {
        try loadSchema(recordType, containerIdentifier: containerIdentifier, on: connection)?.searchableFields ?? []
    }

    /// Replaces a record's indexed words.
    func replaceTokens(zoneRow: Int64, recordName: String, fields: [String: FieldValue], searchable: [String], on connection: SQLiteConnection) throws {
        let clear = try connection.statement("DELETE FROM record_tokens WHERE zone_id = ? AND record_name = ?")
        try clear.bind([.integer(zoneRow), .text(recordName)])
        try clear.step()
        guard !searchable.isEmpty else { return }
        let insert = try connection.statement("INSERT OR IGNORE INTO record_tokens(zone_id, token, record_name) VALUES (?, ?, ?)")
        for word in TextSearch.words(of: fields, only: searchable) {
            insert.reset()
            try insert.bind([.integer(zoneRow), .text(word), .text(recordName)])
            try insert.step()
        }
    }

    private func rebuildTokens(recordType: String, containerIdentifier: String, searchable: [String], on connection: SQLiteConnection) throws {
        let select = try connection.statement("""
            SELECT r.zone_id, r.record_name, r.fields FROM records r JOIN zones z ON z.zone_id = r.zone_id
            WHERE z.container = ? AND r.record_type = ?
            """)
        try select.bind([.text(containerIdentifier), .text(recordType)])
        var rows: [(Int64, String, String)] = []
        while try select.step() { rows.append((select.int64(0), select.text(1) ?? "", select.text(2) ?? "{}")) }
        for (zoneRow, name, document) in rows {
            let fields = try FieldDocument.decode(document, zoneID: .default) { _ in nil }
            try replaceTokens(zoneRow: zoneRow, recordName: name, fields: fields, searchable: searchable, on: connection)
        }
    }

    /// How SQLite runs a query (`EXPLAIN QUERY PLAN`), one step per line; for tests and
    /// diagnostics: a query that can use an index shows `USING INDEX ix_…`.
    ///
    /// ```swift
    /// print(try engine.queryPlan(for: compiled, in: database.context))
    /// ```
    @_spi(StratusEngine) public func queryPlan(for query: CompiledQuery, in database: DatabaseContext, after position: QueryPosition? = nil) throws -> String {
        try readTransaction { connection in
            let zoneRow = try zoneRowID(query.zoneID, database, on: connection, createDefault: false) ?? -1
            let schema = try loadSchema(query.recordType, containerIdentifier: database.containerIdentifier, on: connection)
            let plan = try SQLQueryTranslation(query: query, schema: schema, dialect: SQLiteDialect()).select(zoneRow: zoneRow, after: position, limit: 400)
            // EXPLAIN does not check the schema cookie, so a statement that reads makes SQLite
            // load the current schema first; the plan is prepared fresh for the same reason.
            _ = try connection.queryText("SELECT count(*) FROM sqlite_master")
            let statement = try connection.uncachedStatement("EXPLAIN QUERY PLAN " + plan.sql)
            try statement.bind(plan.parameters)
            var lines: [String] = []
            while try statement.step() { lines.append(statement.text(3) ?? "") }
            return lines.joined(separator: "\n")
        }
    }
}
