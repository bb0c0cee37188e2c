import Foundation
@_spi(StratusEngine) import Stratus
@_spi(StratusEngine) import StratusPostgres
import StratusTestSupport
import Testing

/// Indexes a record type's schema declares become PostgreSQL indexes, and every query shape
/// that an index can serve is served by one (read on `EXPLAIN`): no Sort for an indexed sort,
/// a seek (an index condition on the sort key) for the page after a cursor; word searches use
/// the word index; the results equal the brute-force evaluator's. String keys are indexed by
/// their first characters (``PostgresDialect/indexPrefixLength``), so a sort on one reads the
/// index in prefix order and sorts only rows with equal prefixes (an Incremental Sort).
@Suite("PostgreSQL query plans and schema indexes", .requiresPostgres, .timeLimit(.minutes(30)))
struct PostgresQueryPlanTests {
    static func schema() -> RecordTypeSchema {
        var schema = RecordTypeSchema(recordType: "Item")
        schema.addField("category", type: .string, indexes: [.queryable])
        schema.addField("weight", type: .int64, indexes: [.queryable])
        schema.addField("rank", type: .int64, indexes: [.sortable])
        schema.addField("due", type: .timestamp, indexes: [.sortable])
        schema.addField("title", type: .string, indexes: [.searchable])
        schema.addField("modificationDate", type: .timestamp, indexes: [.sortable])
        schema.addField("label", type: .string, indexes: [.queryable, .sortable])
        schema.compoundIndexes = [.init(equalityFields: ["category"], sortField: "rank")]
        return schema
    }

    static func items() -> [Record] {
        makeRecords("Item", count: 2_000, prefix: "i") { i in
            var fields: [String: FieldValue] = [
                "category": .string(i % 3 == 0 ? "Books" : "c\(i % 10)"),
                "weight": .int64(Int64(i % 25)),
                "title": .string("Word\(i % 40) shared title \(i % 2 == 0 ? "café" : "the")"),
                "place": .location(Location(latitude: 52 + Double(i % 50) / 10, longitude: 13)),
                "due": .date(Date(timeIntervalSinceReferenceDate: Double(i * 3_600))),
            ]
            if i % 13 != 0 { fields["rank"] = .int64(Int64((i * 37) % 1_000)) }
            // Every fourth label shares its first 300 characters; some are longer than an index entry.
            let label = (i % 4 == 0 ? sharedLabelStart : "") + "label\((i * 7_919) % 2_000)"
            fields["label"] = .string(i % 50 == 0 ? label + String(repeating: "\(i)-", count: 1_000) : label)
            return fields
        }
    }

    static let sharedLabelStart = String(repeating: "start of a long label ", count: 14)

    static func query(_ format: String, _ arguments: any Sendable..., sort: [RecordSortDescriptor] = []) throws -> Query {
        let query = Query(recordType: "Item", predicate: try QueryPredicate(format: format, argumentArray: arguments))
        query.sortDescriptors = sort
        return query
    }

    @Test("records a process inserts into a zone are in the planner's statistics once they reach 1,000, before autovacuum comes: a word search in a zone just filled is planned for its rows")
    func statisticsFollowInserts() async throws {
        let database = try PostgresTestServer.makeDatabase()
        let container = Container(identifier: "com.example.statistics", engine: try PostgresEngine(url: database.url), userName: "alice")
        try await container.saveSchema(Self.schema())
        let zone = try await container.privateCloudDatabase.save(RecordZone(zoneName: "Fresh")).zoneID
        let raw = try PostgresConnection(url: database.url)
        // Autovacuum would analyze a new table after 50 rows: only the engine's own analysis is measured.
        try raw.executeScript("ALTER TABLE records SET (autovacuum_enabled = false); ALTER TABLE record_tokens SET (autovacuum_enabled = false)")
        // pg_class's count, which ANALYZE sets in its own transaction (the statistics views lag).
        let tuples = "SELECT reltuples FROM pg_class WHERE oid = to_regclass($1)"
        let items = makeRecords("Item", count: 1_200, prefix: "f", zoneID: zone) { ["title": .string("Word\($0 % 40) fresh")] }
        try await TestDatabase.save(Array(items.prefix(900)), in: container.privateCloudDatabase)
        #expect(try raw.query(tuples, [.text("records")])[0].double(0) ?? 0 < 900, "900 records: not yet")
        try await TestDatabase.save(Array(items.suffix(300)), in: container.privateCloudDatabase)
        for table in ["records", "record_tokens"] {
            let counted = try raw.query(tuples, [.text(table)])[0].double(0) ?? 0
            #expect(counted >= 1_200, "\(table): \(counted)")
        }
        let found = try await TestDatabase.queryAll(try Self.query("self CONTAINS %@", "word7"), in: container.privateCloudDatabase, zoneID: zone)
        #expect(found.count == 30)
    }

    @Test("indexed filters and sorts read an index without sorting; pages after a cursor seek; results match the evaluator")
    func plans() async throws {
        let engine = try postgresFactory(FileManager.default.temporaryDirectory) as! PostgresEngine
        let container = Container(identifier: "com.example.plans", engine: engine, userName: "alice")
        let database = container.publicCloudDatabase
        try await container.saveSchema(Self.schema())
        try await TestDatabase.save(Self.items(), in: database)
        let stored = try await TestDatabase.queryAll(Query(recordType: "Item"), in: database)

        func plan(_ query: Query, after position: QueryPosition? = nil) throws -> String {
            try engine.queryPlan(for: CompiledQuery(query, zoneID: .default, desiredKeys: nil), in: database.context, after: position, preferringIndexes: true)
        }
        let indexed: [Query] = [
            try Self.query("category == %@", "Books", sort: [RecordSortDescriptor(key: "rank")]),
            try Self.query("category == %@", "books", sort: [RecordSortDescriptor(key: "rank", ascending: false)]),
            try Self.query("TRUEPREDICATE", sort: [RecordSortDescriptor(key: "rank")]),
            try Self.query("rank > %d", 500, sort: [RecordSortDescriptor(key: "rank", ascending: false)]),
            try Self.query("TRUEPREDICATE", sort: [RecordSortDescriptor(key: "due", ascending: false)]),
            try Self.query("TRUEPREDICATE", sort: [RecordSortDescriptor(key: "modificationDate")]),
        ]
        for query in indexed {
            let text = try plan(query)
            #expect(text.contains("Index Scan") && text.contains("ix_"), "an index serves \(query.predicate) sorted by \((query.sortDescriptors ?? []).map(\.key)):\n\(text)")
            #expect(!text.contains("Sort  ") && !text.contains("Sort Key"), "no sort step:\n\(text)")
            try await expectEvaluator(query, stored, database)
            // The page after a cursor seeks in the same index.
            let (_, cursor) = try await database.records(matching: query, inZoneWith: .default, resultsLimit: 7)
            if let cursor {
                let after = try plan(query, after: cursor.position)
                #expect(after.contains("Index Cond") && after.contains("ix_") && !after.contains("Sort Key"), "a seek:\n\(after)")
            }
        }
        // What `queryPlan(for:)` (`stratus query --explain`) names is every index its steps read,
        // through a bitmap too (filters without a sort, which PostgreSQL often reads so).
        let described = indexed + [try Self.query("category == %@", "Books"), try Self.query("rank > %d AND rank < %d", 100, 200),
                                   try Self.query("category IN %@", ["Books", "c1"])]
        for query in described {
            let explained = try await database.queryPlan(for: query, inZoneWith: .default)
            let read = Set(explained.steps.joined(separator: "\n").matches(of: /ix_[0-9a-f]+/).map { String($0.output) })
            for name in read {
                #expect(explained.indexes.contains { $0.hasPrefix(name) }, "\(name) is read and named: \(explained.indexes)\n\(explained.steps.joined(separator: "\n"))")
            }
        }
        // A string key: the index gives the prefix order, an Incremental Sort the rest.
        let label = Self.sharedLabelStart + "label\((4 * 7_919) % 2_000)"
        let labelled: [Query] = [
            try Self.query("TRUEPREDICATE", sort: [RecordSortDescriptor(key: "label")]),
            try Self.query("TRUEPREDICATE", sort: [RecordSortDescriptor(key: "label", ascending: false)]),
            try Self.query("label > %@", label, sort: [RecordSortDescriptor(key: "label")]),
        ]
        for query in labelled {
            let text = try plan(query)
            #expect(text.contains("Index Scan") && text.contains("ix_"), "an index serves \(query.predicate) sorted by label:\n\(text)")
            let sorts = text.split(separator: "\n").filter { $0.contains("Sort  (") }
            #expect(sorts.allSatisfy { $0.contains("Incremental Sort") }, "no full sort:\n\(text)")
            #expect(sorts.isEmpty || text.contains("Presorted Key: (\"left\"("), "sorted within equal prefixes only:\n\(text)")
            try await expectEvaluator(query, stored, database)
            let (_, cursor) = try await database.records(matching: query, inZoneWith: .default, resultsLimit: 7)
            if let cursor {
                let after = try plan(query, after: cursor.position)
                #expect(after.contains("ix_") && after.split(separator: "\n").contains { $0.contains("Index Cond") && $0.contains("\"left\"(") }, "a seek:\n\(after)")
            }
        }
        // BEGINSWITH seeks the range of its prefix, also a prefix longer than the index keeps.
        for prefix in ["label1", "label19", Self.sharedLabelStart + "label1"] {
            let begins = try Self.query("label BEGINSWITH %@", prefix)
            let text = try plan(begins)
            #expect(text.split(separator: "\n").contains { $0.contains("Index Cond") && $0.contains("\"left\"(") }, "the prefix's range is sought:\n\(text)")
            try await expectEvaluator(begins, stored, database)
        }
        let equal = try Self.query("label == %@", label)
        let equalPlan = try plan(equal)
        #expect(equalPlan.split(separator: "\n").contains { $0.contains("Index Cond") && $0.contains("\"left\"(") }, "the prefix index serves equality:\n\(equalPlan)")
        try await expectEvaluator(equal, stored, database)

        let filtered: [Query] = [
            try Self.query("weight == %d", 7),
            try Self.query("category IN %@", ["Books", "c1"]),
        ]
        for query in filtered {
            let text = try plan(query)
            #expect(text.contains("ix_"), "an index serves \(query.predicate):\n\(text)")
            try await expectEvaluator(query, stored, database)
        }
        // Word searches use the word index; distance filters and sorts work.
        let words = try Self.query("self CONTAINS %@", "word3")
        #expect(try plan(words).contains("record_tokens"), "the word index serves self CONTAINS")
        try await expectEvaluator(words, stored, database, searchable: ["title"])
        let origin = Location(latitude: 52.5, longitude: 13)
        let near = Query(recordType: "Item", predicate: try QueryPredicate(format: "distanceToLocation:fromLocation:(place, %@) < %f", origin, 60.0))
        near.sortDescriptors = [RecordSortDescriptor(distanceOf: "place", from: origin)]
        try await expectEvaluator(near, stored, database)
    }

    @Test("a version 8 store, whose indexes held whole strings and words, gets prefix indexes and cut words when opened; long values then save")
    func upgradeBoundsIndexEntries() async throws {
        let database = try PostgresTestServer.makeDatabase()
        var schema = RecordTypeSchema(recordType: "T")
        schema.addField("s", type: .string, indexes: [.queryable])
        schema.addField("t", type: .string, indexes: [.sortable])
        schema.addField("u", type: .string, indexes: [.searchable])
        let word = String(repeating: "abcdefghij", count: 150)
        do {
            let container = Container(identifier: "com.example.upgrade", engine: try PostgresEngine(url: database.url), userName: "alice")
            try await container.saveSchema(schema)
            try await TestDatabase.save([makeRecord("T", "n1", ["s": .string("short"), "t": .string("short"), "u": .string(word)])], in: container.publicCloudDatabase)
        }
        let admin = try PostgresConnection(url: database.url)
        func indexes() throws -> [String: String] {
            Dictionary(uniqueKeysWithValues: try admin.query("""
                SELECT indexname::text, indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'records' AND indexname LIKE 'ix\\_%'
                """).map { (try $0.text(0) ?? "", try $0.text(1) ?? "") })
        }
        let current = try indexes()
        #expect(current.count == 2 && current.values.allSatisfy { $0.contains("\"left\"(") }, "\(current)")
        // As version 8 left the store: an index on the whole value, and the whole word.
        for name in current.keys { try admin.executeScript("DROP INDEX \(try PostgresConnection.quoteIdentifier(name))") }
        try admin.executeScript("""
            CREATE INDEX ix_whole ON records (zone_id, ((fields->'t'->>1) COLLATE "C") NULLS FIRST, record_name NULLS FIRST) WHERE record_type = 'T';
            UPDATE meta SET value = '8' WHERE key = 'version';
            """)
        try admin.execute("UPDATE record_tokens SET token = $1 WHERE record_name = 'n1'", [.text(word)])

        let container = Container(identifier: "com.example.upgrade", engine: try PostgresEngine(url: database.url), userName: "alice")
        #expect(try admin.query("SELECT value FROM meta WHERE key = 'version'")[0].text(0) == "21")
        #expect(try indexes() == current, "the prefix indexes replace the whole-value ones")
        #expect(try admin.query("SELECT max(octet_length(token)) FROM record_tokens")[0].int64(0) == 1_000)
        let search = Query(recordType: "T", predicate: try QueryPredicate(format: "self CONTAINS %@", argumentArray: [word]))
        let found = try await TestDatabase.queryAll(search, in: container.publicCloudDatabase)
        #expect(found.map(\.recordID.recordName) == ["n1"])
        let long = String(repeating: "0123456789", count: 300)
        try await TestDatabase.save([makeRecord("T", "n2", ["s": .string(long), "t": .string(long), "u": .string(long)])], in: container.publicCloudDatabase)
    }

    private func expectEvaluator(_ query: Query, _ stored: [Record], _ database: Database, searchable: [String]? = nil,
                                 sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let expected = try QueryEvaluator.evaluate(query, over: stored, searchableFields: searchable).map(\.recordID.recordName)
        let found = try await TestDatabase.queryAll(query, in: database, pageSize: 37).map(\.recordID.recordName)
        #expect(found == expected, "\(query.predicate) sorted by \((query.sortDescriptors ?? []).map(\.key))", sourceLocation: sourceLocation)
    }
}
