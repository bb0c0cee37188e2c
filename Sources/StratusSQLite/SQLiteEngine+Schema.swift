import Foundation
@_spi(StratusEngine) import Stratus
import StratusSQL

extension SQLiteEngine {
    // MARK: - Container schemas

    @_spi(StratusEngine) public func fetchSchema(storageContainer: String) throws -> ContainerSchema {
        try readTransaction { connection in try loadContainerSchema(storageContainer, on: connection) }
    }

    @_spi(StratusEngine) public func fetchRecordTypeSchema(_ recordType: String, storageContainer: String) throws -> RecordTypeSchema? {
        try readTransaction { connection in try loadSchema(recordType, storageContainer: storageContainer, on: connection) }
    }

    @_spi(StratusEngine) public func modifySchema<T>(storageContainer: String, _ body: (inout ContainerSchema) throws -> T) throws -> T {
        try changeSchema(storageContainer, reading: nil) { schema, _ in try body(&schema) }
    }

    @_spi(StratusEngine) public func modifySchema<T>(storageContainer: String, comparedWith other: String,
                                                     _ body: (inout ContainerSchema, ContainerSchema) throws -> T) throws -> T {
        try changeSchema(storageContainer, reading: other, body)
    }

    /// One write transaction (every writer waits for it): reads the schema, and `other`'s when
    /// named (an empty schema otherwise), lets `body` change it, and stores it.
    private func changeSchema<T>(_ storageContainer: String, reading other: String?, _ body: (inout ContainerSchema, ContainerSchema) throws -> T) throws -> T {
        try writeTransaction { connection in
            let stored = try loadContainerSchema(storageContainer, on: connection)
            let otherSchema = try other.map { try loadContainerSchema($0, on: connection) } ?? ContainerSchema()
            var schema = stored
            let answer = try body(&schema, otherSchema)
            try storeContainerSchema(schema, replacing: stored, storageContainer: storageContainer, on: connection)
            return answer
        }
    }

    @_spi(StratusEngine) public func resetEnvironment(storageContainer: String, toSchemaOf schemaSource: String) throws {
        try writeTransaction { connection in
            let schema = try loadContainerSchema(schemaSource, on: connection)
            let zones = "SELECT zone_id FROM zones WHERE container = ?1"
            for statement in [
                "DELETE FROM refs WHERE zone_id IN (\(zones))",
                "DELETE FROM record_tokens WHERE zone_id IN (\(zones))",
                "DELETE FROM asset_refs WHERE zone_id IN (\(zones))",
                "DELETE FROM tombstones WHERE zone_id IN (\(zones))",
                "DELETE FROM hierarchy_moves WHERE zone_id IN (\(zones))",
                "DELETE FROM records WHERE zone_id IN (\(zones))",
                "DELETE FROM zone_state WHERE zone_id IN (\(zones))",
                "DELETE FROM zones WHERE container = ?1",
                "DELETE FROM zone_tombstones WHERE container = ?1",
                "DELETE FROM share_index WHERE container = ?1",
                "DELETE FROM share_members WHERE container = ?1",
                // Database change numbers go on from where they were, and every position taken
                // before is expired: a token never reads a later life of the environment. The
                // reset is a change of its own, so that a position taken at the last change
                // before it (a reader that was up to date) is before the history's start too.
                "UPDATE database_history SET change_seq = change_seq + 1, history_start = change_seq + 1 WHERE container = ?1",
            ] {
                let delete = try connection.uncachedStatement(statement)
                try delete.bind([.text(storageContainer)])
                try delete.step()
            }
            let stored = try loadContainerSchema(storageContainer, on: connection)
            try storeContainerSchema(schema, replacing: stored, storageContainer: storageContainer, on: connection)
        }
    }

    /// The roles and record types stored for one environment of a container.
    func loadContainerSchema(_ storageContainer: String, on connection: SQLiteConnection) throws -> ContainerSchema {
        let types = try connection.statement("SELECT schema FROM record_types WHERE container = ? ORDER BY record_type")
        try types.bind([.text(storageContainer)])
        var recordTypes: [RecordTypeSchema] = []
        while try types.step() { recordTypes.append(try StoredRecordTypeSchema.schema(from: types.text(0) ?? "")) }
        let roles = try connection.statement("SELECT role FROM schema_roles WHERE container = ?")
        try roles.bind([.text(storageContainer)])
        var names: Set<SecurityRole> = []
        while try roles.step() { names.insert(SecurityRole(roles.text(0) ?? "")) }
        return ContainerSchema(roles: names, recordTypes: recordTypes)
    }

    /// Replaces `stored` by `schema`: writes the record types that changed, removes those that
    /// went, replaces the roles, rebuilds the word index of types whose searchable fields
    /// changed, and makes the store's indexes what all schemas declare.
    private func storeContainerSchema(_ schema: ContainerSchema, replacing stored: ContainerSchema, storageContainer: String, on connection: SQLiteConnection) throws {
        var indexesChanged = false
        for old in stored.recordTypes where schema.recordType(old.recordType) == nil {
            let delete = try connection.statement("DELETE FROM record_types WHERE container = ? AND record_type = ?")
            try delete.bind([.text(storageContainer), .text(old.recordType)])
            try delete.step()
            if !old.searchableFields.isEmpty {
                try rebuildTokens(recordType: old.recordType, storageContainer: storageContainer, searchable: [], on: connection)
            }
            indexesChanged = indexesChanged || !Self.indexDefinitions(for: old).isEmpty
        }
        for type in schema.recordTypes {
            let old = stored.recordType(type.recordType)
            guard old != type else { continue }
            indexesChanged = try storeRecordType(type, replacing: old, storageContainer: storageContainer, on: connection) || indexesChanged
        }
        if schema.roles != stored.roles {
            let clear = try connection.statement("DELETE FROM schema_roles WHERE container = ?")
            try clear.bind([.text(storageContainer)])
            try clear.step()
            let insert = try connection.statement("INSERT INTO schema_roles(container, role) VALUES (?, ?)")
            for role in schema.roles.sorted() {
                insert.reset()
                try insert.bind([.text(storageContainer), .text(role.name)])
                try insert.step()
            }
        }
        if indexesChanged { try synchronizeIndexes(on: connection) }
    }

    /// Writes one record type's schema over `old` (its stored one) and rebuilds its word index
    /// when its searchable fields changed. Answers whether its indexes changed (the caller
    /// then calls ``synchronizeIndexes(on:)``).
    func storeRecordType(_ type: RecordTypeSchema, replacing old: RecordTypeSchema?, storageContainer: String, on connection: SQLiteConnection) throws -> Bool {
        let upsert = try connection.statement("INSERT OR REPLACE INTO record_types(container, record_type, schema) VALUES (?, ?, ?)")
        try upsert.bind([.text(storageContainer), .text(type.recordType), .text(try StoredRecordTypeSchema.text(of: type))])
        try upsert.step()
        if (old?.searchableFields ?? []) != type.searchableFields {
            try rebuildTokens(recordType: type.recordType, storageContainer: storageContainer, searchable: type.searchableFields, on: connection)
        }
        return Set(old.map(Self.indexDefinitions) ?? []) != Set(Self.indexDefinitions(for: type))
    }

    func loadSchema(_ recordType: String, storageContainer: String, on connection: SQLiteConnection) throws -> RecordTypeSchema? {
        let select = try connection.statement("SELECT schema FROM record_types WHERE container = ? AND record_type = ?")
        try select.bind([.text(storageContainer), .text(recordType)])
        guard try select.step() else { return nil }
        let text = select.text(0) ?? ""
        select.reset()
        return try StoredRecordTypeSchema.schema(from: text)
    }

    // MARK: - Indexes

    /// Makes the store's `ix_` indexes exactly those that the schemas of every container
    /// and environment declare.
    func synchronizeIndexes(on connection: SQLiteConnection) throws {
        var wanted: [String: String] = [:]
        let select = try connection.statement("SELECT schema FROM record_types")
        while try select.step() {
            for definition in Self.indexDefinitions(for: try StoredRecordTypeSchema.schema(from: select.text(0) ?? "")) {
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

    /// Each index a schema declares: its definition, and the fields it covers by name. Each
    /// declaration's definitions are those of a schema that declares it alone.
    static func indexes(for schema: RecordTypeSchema) -> [(definition: String, fields: [String])] {
        var indexes: [(definition: String, fields: [String])] = []
        func add(_ alone: RecordTypeSchema, _ fields: [String]) {
            for definition in indexDefinitions(for: alone) where !indexes.contains(where: { $0.definition == definition }) {
                indexes.append((definition, fields))
            }
        }
        let declared = schema.fields.filter { !$0.indexes.isEmpty }
        for field in declared {
            add(RecordTypeSchema(recordType: schema.recordType, fields: [field]), [field.name])
        }
        for compound in schema.compoundIndexes {
            add(RecordTypeSchema(recordType: schema.recordType, fields: declared, compoundIndexes: [compound]), compound.equalityFields + (compound.sortField.map { [$0] } ?? []))
        }
        return indexes
    }

    static func indexName(_ definition: String) -> String {
        "ix_" + StableHash.hex(of: definition.utf8)
    }

    // MARK: - Words of searchable fields

    /// The fields whose words are indexed for a record type, empty when none are searchable.
    func searchableFields(_ recordType: String, storageContainer: String, on connection: SQLiteConnection) throws -> [String] {
        try loadSchema(recordType, storageContainer: storageContainer, on: connection)?.searchableFields ?? []
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

    private func rebuildTokens(recordType: String, storageContainer: String, searchable: [String], on connection: SQLiteConnection) throws {
        let select = try connection.statement("""
            SELECT r.zone_id, r.record_name, r.fields FROM records r JOIN zones z ON z.zone_id = r.zone_id
            WHERE z.container = ? AND r.record_type = ?
            """)
        try select.bind([.text(storageContainer), .text(recordType)])
        var rows: [(Int64, String, String)] = []
        while try select.step() { rows.append((select.int64(0), select.text(1) ?? "", select.text(2) ?? "{}")) }
        for (zoneRow, name, document) in rows {
            let fields = try FieldDocument.decode(document, zoneID: .default) { _ in nil }
            try replaceTokens(zoneRow: zoneRow, recordName: name, fields: fields, searchable: searchable, on: connection)
        }
    }

    // MARK: - Plans

    @_spi(StratusEngine) public func explainQuery(_ query: CompiledQuery, in database: DatabaseContext) throws -> QueryPlan {
        let steps = try queryPlan(for: query, in: database).split(separator: "\n").map(String.init)
        let schema = try readTransaction { try loadSchema(query.recordType, storageContainer: database.storageContainer, on: $0) }
        var described: [String: String] = ["records_by_name": "records_by_name (every record's name, in each zone)"]
        for index in schema.map(Self.indexes) ?? [] {
            described[Self.indexName(index.definition)] = "\(Self.indexName(index.definition)) (\(query.recordType): \(index.fields.joined(separator: ", ")))"
        }
        var used: [String] = []
        for step in steps {
            guard let range = step.range(of: "INDEX ") else { continue }
            let name = String(step[range.upperBound...].prefix { $0.isLetter || $0.isNumber || $0 == "_" })
            let text = described[name] ?? name
            if !name.isEmpty && !used.contains(text) { used.append(text) }
        }
        return QueryPlan(indexes: used, steps: steps)
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
            let schema = try loadSchema(query.recordType, storageContainer: database.storageContainer, on: connection)
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

    /// The opcodes of the program that reads a query's first `limit` rows (-1: every row, as a
    /// stream reads them), for tests of how SQLite sorts: `SorterOpen` is its sorter,
    /// `OpenEphemeral` a temporary B-tree.
    @_spi(StratusEngine) public func queryOpcodes(for query: CompiledQuery, in database: DatabaseContext, limit: Int) throws -> [String] {
        try readTransaction { connection in
            let zoneRow = try zoneRowID(query.zoneID, database, on: connection, createDefault: false) ?? -1
            let schema = try loadSchema(query.recordType, storageContainer: database.storageContainer, on: connection)
            let plan = try SQLQueryTranslation(query: query, schema: schema, dialect: SQLiteDialect()).select(zoneRow: zoneRow, after: nil, limit: limit)
            let statement = try connection.uncachedStatement("EXPLAIN " + plan.sql)
            try statement.bind(plan.parameters)
            var opcodes: [String] = []
            while try statement.step() { opcodes.append(statement.text(1) ?? "") }
            return opcodes
        }
    }

    @_spi(StratusEngine) public func countRecordsByType(in database: DatabaseContext, zoneID: RecordZone.ID) throws -> [String: Int] {
        try readTransaction { connection in
            guard let zoneRow = try zoneRowID(zoneID, database, on: connection, createDefault: false) else {
                if zoneID.isDefault { return [:] }
                throw StratusError.zoneNotFound(zoneID, in: database)
            }
            let select = try connection.statement("SELECT record_type, count(*) FROM records WHERE change_key > ? AND change_key <= ? GROUP BY record_type")
            try select.bind([.integer(SQLiteSchema.changeKey(zoneRow: zoneRow, sequence: 0)), .integer(SQLiteSchema.changeKey(zoneRow: zoneRow, sequence: SQLiteSchema.maximumSequence))])
            var counts: [String: Int] = [:]
            while try select.step() { counts[select.text(0) ?? ""] = Int(select.int64(1)) }
            return counts
        }
    }
}
