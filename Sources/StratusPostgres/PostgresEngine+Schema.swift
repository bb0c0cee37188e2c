import Foundation
@_spi(StratusEngine) import Stratus
import StratusSQL

extension PostgresEngine {
    // MARK: - Container schemas

    @_spi(StratusEngine)
    public func fetchSchema(storageContainer: String) throws -> ContainerSchema {
        try readTransaction(mayLag: false) { connection in try loadContainerSchema(storageContainer, on: connection) }
    }

    @_spi(StratusEngine)
    public func fetchRecordTypeSchema(_ recordType: String, storageContainer: String) throws -> RecordTypeSchema? {
        // One statement: no transaction around it, which would cost two more round trips a page.
        try pool.withConnection { connection in try loadSchema(recordType, storageContainer: storageContainer, on: connection) }
    }

    @_spi(StratusEngine)
    public func modifySchema<T>(storageContainer: String, _ body: (inout ContainerSchema) throws -> T) throws -> T {
        try changeSchema(storageContainer, reading: nil) { schema, _ in try body(&schema) }
    }

    @_spi(StratusEngine)
    public func modifySchema<T>(storageContainer: String, comparedWith other: String,
                                _ body: (inout ContainerSchema, ContainerSchema) throws -> T) throws -> T {
        try changeSchema(storageContainer, reading: other, body)
    }

    /// One transaction under the lock every schema change takes (so `other`, read when named,
    /// cannot change until it ends): reads the schema, lets `body` change it, and stores it.
    private func changeSchema<T>(_ storageContainer: String, reading other: String?, _ body: (inout ContainerSchema, ContainerSchema) throws -> T) throws -> T {
        let answer = try writeTransaction { connection -> T in
            // Schema changes of all containers serialize: they build shared indexes. The
            // container's record writes wait for the change, which rebuilds its words.
            try connection.execute("SELECT pg_advisory_xact_lock(\(Self.schemaLock))")
            try Self.lockContainerWrites(storageContainer, on: connection)
            let stored = try loadContainerSchema(storageContainer, on: connection)
            let otherSchema = try other.map { try loadContainerSchema($0, on: connection) } ?? ContainerSchema()
            var schema = stored
            let answer = try body(&schema, otherSchema)
            try storeContainerSchema(schema, replacing: stored, storageContainer: storageContainer, on: connection)
            return answer
        }
        // New indexes are worth nothing to the planner until it knows the table's statistics.
        try? pool.withConnection { try $0.executeScript("ANALYZE records") }
        return answer
    }

    @_spi(StratusEngine)
    public func resetEnvironment(storageContainer: String, toSchemaOf schemaSource: String) throws {
        try writeTransaction { connection in
            // The environment's record writes hold its write lock shared until they commit: none
            // is in flight while the rows go, and none that waits finds its zone still there.
            try connection.execute("SELECT pg_advisory_xact_lock(\(Self.schemaLock))")
            try Self.lockContainerWrites(storageContainer, on: connection)
            let schema = try loadContainerSchema(schemaSource, on: connection)
            let zones = "SELECT zone_id FROM zones WHERE container = $1"
            for statement in [
                "DELETE FROM refs WHERE zone_id IN (\(zones))",
                "DELETE FROM record_tokens WHERE zone_id IN (\(zones))",
                "DELETE FROM asset_refs WHERE zone_id IN (\(zones))",
                "DELETE FROM tombstones WHERE zone_id IN (\(zones))",
                "DELETE FROM hierarchy_moves WHERE zone_id IN (\(zones))",
                "DELETE FROM records WHERE zone_id IN (\(zones))",
                "DELETE FROM zones WHERE container = $1",
                "DELETE FROM zone_tombstones WHERE container = $1",
                "DELETE FROM share_index WHERE container = $1",
                "DELETE FROM share_members WHERE container = $1",
                // Database change numbers go on; every position taken before expires, also the
                // last one (the reset is a change of its own).
                "UPDATE database_history SET change_seq = change_seq + 1, history_start = change_seq + 1 WHERE container = $1",
            ] {
                try connection.execute(statement, [.text(storageContainer)])
            }
            let stored = try loadContainerSchema(storageContainer, on: connection)
            try storeContainerSchema(schema, replacing: stored, storageContainer: storageContainer, on: connection)
        }
    }

    /// The advisory lock schema changes and environment resets take, among themselves: its
    /// class (the first key) with the store's schema (the second), so that stores in other
    /// schemas of the database go on.
    static let schemaLock = "\(schemaLockClass), hashtext(current_schema())"
    private static let schemaLockClass: Int32 = 0x5354_5253   // "STRS"

    /// The advisory lock of one storage container's record writes (bound as parameter
    /// `$parameter`), which they hold shared until they commit (``writeRecords(in:_:)``): a
    /// schema change or a reset of that container takes it exclusively, so that words and
    /// indexes are rebuilt from every committed row and no write goes by the schema it read
    /// before the change. Other containers' writes go on.
    static func containerWriteLock(parameter: Int) -> String {
        "\(containerWriteLockClass), hashtext(current_schema() || '/' || $\(parameter)::text)"
    }
    private static let containerWriteLockClass: Int32 = 0x5354_5257   // "STRW"

    /// The advisory lock record writes take to grow a development record type, per store.
    static let schemaGrowthLock = "\(schemaGrowthLockClass), hashtext(current_schema())"
    private static let schemaGrowthLockClass: Int32 = 0x5354_5247   // "STRG"

    /// Takes a container's write lock exclusively, without queueing in front of its record
    /// writes while those in flight finish: a waiting exclusive lock would hold back every
    /// write that comes after it, for as long as the longest write in flight runs. Only after
    /// `patience` seconds of writes does it wait in the queue, so that a container never free
    /// of writes still gets its schema changed.
    static func lockContainerWrites(_ storageContainer: String, on connection: PostgresConnection, patience: Double = 5) throws {
        let deadline = Date().addingTimeInterval(patience)
        while Date() < deadline {
            if try connection.query("SELECT pg_try_advisory_xact_lock(\(containerWriteLock(parameter: 1)))", [.text(storageContainer)]).first?.bool(0) == true { return }
            Thread.sleep(forTimeInterval: 0.02)
        }
        try connection.execute("SELECT pg_advisory_xact_lock(\(containerWriteLock(parameter: 1)))", [.text(storageContainer)])
    }

    func loadContainerSchema(_ storageContainer: String, on connection: PostgresConnection) throws -> ContainerSchema {
        let types = try connection.query("SELECT schema FROM record_types WHERE container = $1 ORDER BY record_type", [.text(storageContainer)]).map {
            try StoredRecordTypeSchema.schema(from: try $0.text(0) ?? "")
        }
        let roles = try connection.query("SELECT role FROM schema_roles WHERE container = $1", [.text(storageContainer)]).map { SecurityRole(try $0.text(0) ?? "") }
        return ContainerSchema(roles: Set(roles), recordTypes: types)
    }

    /// Replaces `stored` by `schema`: the types that changed or went, the roles, the words of
    /// types whose searchable fields changed, and the store's indexes.
    private func storeContainerSchema(_ schema: ContainerSchema, replacing stored: ContainerSchema, storageContainer: String, on connection: PostgresConnection) throws {
        for old in stored.recordTypes where schema.recordType(old.recordType) == nil {
            do {
                try connection.execute("DELETE FROM record_types WHERE container = $1 AND record_type = $2", [.text(storageContainer), .text(old.recordType)])
            } catch let error as StratusError where error.sqlState == "42501" {
                // Row-level security's refusal says only "permission denied for table record_types".
                var refused = StratusError(.permissionFailure, """
                    role \(loginRole) may not remove record type '\(old.recordType)' from the schema: under row-level security a member \
                    adds types and fields to a development schema, and only the role that owns the store's tables removes or \
                    replaces them (import a schema that keeps every stored type, or have that role import this one)
                    """)
                refused.sqlState = error.sqlState
                throw refused
            }
            if !old.searchableFields.isEmpty {
                try rebuildTokens(recordType: old.recordType, storageContainer: storageContainer, searchable: [], on: connection)
            }
        }
        for type in schema.recordTypes where stored.recordType(type.recordType) != type {
            try storeRecordType(type, replacing: stored.recordType(type.recordType), storageContainer: storageContainer, on: connection)
        }
        if schema.roles != stored.roles {
            try connection.execute("DELETE FROM schema_roles WHERE container = $1", [.text(storageContainer)])
            for role in schema.roles.sorted() {
                try connection.execute("INSERT INTO schema_roles(container, role) VALUES ($1, $2)", [.text(storageContainer), .text(role.name)])
            }
        }
        try Self.synchronizeIndexes(on: connection)
    }

    /// Writes one record type's schema over `old`, rebuilding its words when its searchable
    /// fields changed. The caller synchronizes the indexes.
    func storeRecordType(_ type: RecordTypeSchema, replacing old: RecordTypeSchema?, storageContainer: String, on connection: PostgresConnection) throws {
        try connection.execute("""
            INSERT INTO record_types(container, record_type, schema) VALUES ($1, $2, $3)
            ON CONFLICT (container, record_type) DO UPDATE SET schema = excluded.schema
            """, [.text(storageContainer), .text(type.recordType), .text(try StoredRecordTypeSchema.text(of: type))])
        if (old?.searchableFields ?? []) != type.searchableFields {
            try rebuildTokens(recordType: type.recordType, storageContainer: storageContainer, searchable: type.searchableFields, on: connection)
        }
    }

    func loadSchema(_ recordType: String, storageContainer: String, on connection: PostgresConnection) throws -> RecordTypeSchema? {
        guard let text = try connection.query("SELECT schema FROM record_types WHERE container = $1 AND record_type = $2",
                                              [.text(storageContainer), .text(recordType)]).first?.text(0) else { return nil }
        return try StoredRecordTypeSchema.schema(from: text)
    }

    /// Makes the store's `ix_` indexes exactly those that the schemas of every container
    /// declare: partial expression indexes of each type, in the expressions queries use.
    static func synchronizeIndexes(on connection: PostgresConnection) throws {
        var wanted: [String: String] = [:]
        for row in try connection.query("SELECT schema FROM record_types") {
            let schema = try StoredRecordTypeSchema.schema(from: try row.text(0) ?? "")
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

    /// The upgrade to ``PostgresSchema/boundedIndexVersion``: replaces the `ix_` indexes of whole
    /// strings by those of their prefixes (their names, hashes of their definitions, differ),
    /// and cuts the stored words longer than the word index now holds.
    static func boundIndexEntries(on connection: PostgresConnection) throws {
        try synchronizeIndexes(on: connection)
        let limit = PostgresValue.int64(Int64(PostgresDialect.wordKeyLength))
        let long = try connection.query("SELECT zone_id, token, record_name, owner FROM record_tokens WHERE octet_length(token) > $1", [limit])
        guard !long.isEmpty else { return }
        try connection.execute("DELETE FROM record_tokens WHERE octet_length(token) > $1", [limit])
        for row in long {
            try connection.execute("INSERT INTO record_tokens(zone_id, token, record_name, owner) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                                   [.int64(try row.int64(0) ?? 0), .text(PostgresDialect.wordKey(try row.text(1) ?? "")), .text(try row.text(2) ?? ""), .text(try row.text(3) ?? "")])
        }
    }

    /// The fields whose words are indexed for a record type, empty when none are searchable.
    func searchableFields(_ recordType: String, storageContainer: String, on connection: PostgresConnection) throws -> [String] {
        try loadSchema(recordType, storageContainer: storageContainer, on: connection)?.searchableFields ?? []
    }

    /// Replaces a record's indexed words; `clearing: false` when its old ones are gone already.
    func replaceTokens(zoneRow: Int64, owner: String, recordName: String, fields: [String: FieldValue], searchable: [String], clearing: Bool = true,
                       on connection: PostgresConnection) throws {
        try replaceTokens(zoneRow: zoneRow, owner: owner, records: [(recordName, fields, searchable)], clearing: clearing, on: connection)
    }

    /// Replaces the indexed words of several records of one zone and owner, in two statements
    /// whatever their number: under row-level security each statement is planned with the
    /// policies of its table, which costs a member's role milliseconds, so a statement per
    /// record made a member's import about 25 times slower than the owner's.
    func replaceTokens(zoneRow: Int64, owner: String, records: [(name: String, fields: [String: FieldValue], searchable: [String])], clearing: Bool = true,
                       on connection: PostgresConnection) throws {
        guard !records.isEmpty else { return }
        if clearing {
            try connection.execute("DELETE FROM record_tokens WHERE zone_id = $1 AND record_name = ANY($2::text[])",
                                    [.int64(zoneRow), .textArray(records.map(\.name))])
        }
        var names: [String?] = [], words: [String?] = []
        for record in records where !record.searchable.isEmpty {
            // Long words are kept by their start (queries recheck the whole word).
            for word in Set(TextSearch.words(of: record.fields, only: record.searchable).map(PostgresDialect.wordKey)) {
                names.append(record.name)
                words.append(word)
            }
        }
        guard !words.isEmpty else { return }
        try connection.execute("""
            INSERT INTO record_tokens(zone_id, token, record_name, owner) SELECT $1, w.t, w.n, $2 FROM unnest($3::text[], $4::text[]) AS w(n, t)
            ON CONFLICT DO NOTHING
            """, [.int64(zoneRow), .text(owner), .textArray(names), .textArray(words)])
    }

    private func rebuildTokens(recordType: String, storageContainer: String, searchable: [String], on connection: PostgresConnection) throws {
        let rows = try connection.query("""
            SELECT r.zone_id, r.owner, r.record_name, coalesce(r.exact_fields, r.fields::text) FROM records r JOIN zones z ON z.zone_id = r.zone_id
            WHERE z.container = $1 AND r.record_type = $2
            """, [.text(storageContainer), .text(recordType)])
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
            let schema = try loadSchema(query.recordType, storageContainer: database.storageContainer, on: connection)
            let plan = try SQLQueryTranslation(query: query, schema: schema, dialect: PostgresDialect()).select(zoneRow: zoneRow, after: position, limit: limit)
            return try Self.query(connection, "EXPLAIN " + plan.sql, plan.parameters).map { try $0.text(0) ?? "" }.joined(separator: "\n")
        }
    }
}

extension PostgresEngine {
    @_spi(StratusEngine)
    public func explainQuery(_ query: CompiledQuery, in database: DatabaseContext) throws -> QueryPlan {
        let steps = try queryPlan(for: query, in: database).split(separator: "\n").map { String($0) }
        var indexes: [String] = []
        for step in steps {
            // "Index Scan using ix_… on records r", and a bitmap's "Bitmap Index Scan on ix_…".
            guard let range = step.range(of: " using ") ?? step.range(of: "Bitmap Index Scan on ") else { continue }
            let name = String(step[range.upperBound...].prefix { $0.isLetter || $0.isNumber || $0 == "_" })
            if !name.isEmpty && !indexes.contains(name) { indexes.append(name) }
        }
        return QueryPlan(indexes: indexes, steps: steps)
    }

    @_spi(StratusEngine)
    public func countRecordsByType(in database: DatabaseContext, zoneID: RecordZone.ID) throws -> [String: Int] {
        try readTransaction { connection in
            guard let zone = try zoneHistory(zoneID, database, on: connection) else {
                if zoneID.isDefault { return [:] }
                throw StratusError.zoneNotFound(zoneID, in: database)
            }
            var counts: [String: Int] = [:]
            for row in try connection.query("SELECT record_type, count(*) FROM records WHERE zone_id = $1 GROUP BY record_type", [.int64(zone.row)]) {
                counts[try row.text(0) ?? ""] = Int(try row.int64(1) ?? 0)
            }
            return counts
        }
    }
}
