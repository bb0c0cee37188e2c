import Foundation
@_spi(StratusEngine) import Stratus
@_spi(StratusEngine) import StratusSQLite
import StratusTestSupport
import Testing

/// Indexes declared in a record type's schema become real SQLite indexes, and queries that
/// filter or sort on indexed fields use them (checked on `EXPLAIN QUERY PLAN`, not only on the
/// results); without a schema the same queries scan and return the same records.
@Suite("SQLite query plans and schema indexes", .timeLimit(.minutes(30)))
struct SQLiteQueryPlanTests {
    static let identifier = "com.example.query-plans"
    static let recordCount = 300

    /// `category` queryable (STRING, compared through its lowercase form), `weight` queryable
    /// INT64, `rank` sortable, `title` searchable, a compound index (category, then rank);
    /// `note` is a string no index covers.
    static func schema() -> RecordTypeSchema {
        var schema = RecordTypeSchema(recordType: "Item")
        schema.addField("category", type: .string, indexes: [.queryable])
        schema.addField("weight", type: .int64, indexes: [.queryable])
        schema.addField("rank", type: .int64, indexes: [.sortable])
        schema.addField("title", type: .string, indexes: [.searchable])
        schema.addField("code", type: .string, indexes: [.queryable, .sortable])
        schema.compoundIndexes = [.init(equalityFields: ["category"], sortField: "rank")]
        return schema
    }

    static func items() -> [Record] {
        makeRecords("Item", count: recordCount, prefix: "i") { i in
            var fields: [String: FieldValue] = [
                "category": .string(i % 3 == 0 ? "Books" : "c\(i % 10)"),
                "weight": .int64(Int64(i % 25)),
                "title": .string("Word\(i % 40) shared title \(i % 2 == 0 ? "café" : "the")"),
                "note": .string("note\(i % 7) hidden"),
                "code": .string((i % 5 == 0 ? "Ab" : "ab") + "\(i % 30)-\(i)" + (i % 7 == 0 ? "\u{10FFFF}" : "")),
            ]
            if i % 13 != 0 { fields["rank"] = .int64(Int64((i * 37) % 1_000)) }
            return fields
        }
    }

    /// A store with the items saved, the schema saved before them when `schema` is true.
    struct Fixture {
        let path: String
        let engine: SQLiteEngine
        let container: Container
        var database: Database { container.publicCloudDatabase }
        /// Every stored item, with system fields.
        var stored: [Record] = []

        /// `EXPLAIN QUERY PLAN` of a query, optionally for the page after `position`.
        func plan(_ query: Query, after position: QueryPosition? = nil) throws -> String {
            try engine.queryPlan(for: CompiledQuery(query, zoneID: .default, desiredKeys: nil), in: database.context, after: position)
        }

        /// The plan as a new engine on the same file sees it: the store's indexes as they are now.
        func freshPlan(_ query: Query) throws -> String {
            try SQLiteEngine(path: path).queryPlan(for: CompiledQuery(query, zoneID: .default, desiredKeys: nil), in: database.context)
        }
    }

    static func withFixture(schema saveSchema: Bool, _ body: (inout Fixture) async throws -> Void) async throws {
        try await TemporaryStore.with(prefix: "stratus-plans") { store in
            let engine = try SQLiteEngine(path: store.path())
            var fixture = Fixture(path: store.path(), engine: engine, container: Container(identifier: identifier, engine: engine, userName: "alice"))
            if saveSchema { try await fixture.container.saveSchema(schema()) }
            try await TestDatabase.save(items(), in: fixture.database)
            fixture.stored = try await TestDatabase.queryAll(Query(recordType: "Item"), in: fixture.database)
            #expect(fixture.stored.count == recordCount)
            try await body(&fixture)
        }
    }

    static func query(_ format: String, _ arguments: any Sendable..., sort: [RecordSortDescriptor] = []) throws -> Query {
        let query = Query(recordType: "Item", predicate: try QueryPredicate(format: format, argumentArray: arguments))
        query.sortDescriptors = sort
        return query
    }

    /// Pages through `query` 40 at a time and checks the records against the brute-force evaluator.
    static func expectBruteForce(_ query: Query, _ fixture: Fixture, searchable: [String]?, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let expected = TestDatabase.names(try QueryEvaluator.evaluate(query, over: fixture.stored, searchableFields: searchable))
        #expect(!expected.isEmpty, "\(query) matches something", sourceLocation: sourceLocation)
        var page = try await fixture.database.records(matching: query, resultsLimit: 40)
        var names = try page.matchResults.map { try $0.1.get().recordID.recordName }
        while let cursor = page.queryCursor {
            page = try await fixture.database.records(continuingMatchFrom: cursor, resultsLimit: 40)
            names += try page.matchResults.map { try $0.1.get().recordID.recordName }
        }
        expectSameOrder(names, expected, "\(query)", sourceLocation: sourceLocation)
    }

    /// The cursor position after the first page of 40.
    static func secondPagePosition(_ query: Query, _ fixture: Fixture) async throws -> QueryPosition {
        let page = try await fixture.database.records(matching: query, inZoneWith: .default, resultsLimit: 40)
        return try #require(page.queryCursor).position
    }

    // MARK: - Plans with a schema

    @Test("an equality filter on a queryable STRING or INT64 field searches its index")
    func equalityUsesIndex() async throws {
        try await Self.withFixture(schema: true) { fixture in
            for query in [try Self.query("category == %@", "BOOKS"), try Self.query("weight == %@", 7)] {
                let plan = try fixture.plan(query)
                #expect(plan.contains("SEARCH r USING INDEX ix_"), "\(query):\n\(plan)")
                #expect(plan.contains("<expr>=?"), "\(query) seeks to the value:\n\(plan)")
                try await Self.expectBruteForce(query, fixture, searchable: ["title"])
            }
            let range = try Self.query("weight > %@", 20)
            let plan = try fixture.plan(range)
            #expect(plan.contains("USING INDEX ix_") && plan.contains("<expr>>?"), "a range on a queryable INT64 field seeks:\n\(plan)")
            try await Self.expectBruteForce(range, fixture, searchable: ["title"])
        }
    }

    @Test("BEGINSWITH on a sortable STRING field seeks the range of its prefix in the index, case-sensitively, as the evaluator answers")
    func prefixUsesIndex() async throws {
        try await Self.withFixture(schema: true) { fixture in
            for prefix in ["ab1", "Ab1", "ab7-7\u{10FFFF}", "ab", "a"] {
                let query = try Self.query("code BEGINSWITH %@", prefix)
                let plan = try fixture.plan(query)
                #expect(plan.contains("USING INDEX ix_") && plan.contains("<expr>>?") && plan.contains("<expr><?"), "\(prefix) seeks a range:\n\(plan)")
                try await Self.expectBruteForce(query, fixture, searchable: ["title"])
            }
            let unindexed = try Self.query("note BEGINSWITH %@", "note1")
            try await Self.expectBruteForce(unindexed, fixture, searchable: ["title"])
        }
    }

    @Test("IN on a queryable field seeks its index for each value")
    func inUsesIndex() async throws {
        try await Self.withFixture(schema: true) { fixture in
            for query in [try Self.query("category IN %@", ["c1", "C2"]), try Self.query("weight IN {3, 4}")] {
                let plan = try fixture.plan(query)
                #expect(plan.contains("SEARCH r USING INDEX ix_") && plan.contains("<expr>=?"), "\(query):\n\(plan)")
                try await Self.expectBruteForce(query, fixture, searchable: ["title"])
            }
        }
    }

    @Test("a sort on a sortable field reads its index in order, ascending and descending")
    func sortUsesIndex() async throws {
        try await Self.withFixture(schema: true) { fixture in
            for ascending in [true, false] {
                let query = try Self.query("TRUEPREDICATE", sort: [RecordSortDescriptor(key: "rank", ascending: ascending)])
                let plan = try fixture.plan(query)
                #expect(plan.contains("USING INDEX ix_"), "\(query):\n\(plan)")
                #expect(!plan.contains("USE TEMP B-TREE FOR ORDER BY"), "\(query) needs no sorting step:\n\(plan)")
                try await Self.expectBruteForce(query, fixture, searchable: ["title"])
            }
        }
    }

    @Test("the system dates are indexed only when a schema declares them, alone or in a compound index")
    func systemDateIndexes() async throws {
        try await Self.withFixture(schema: true) { fixture in
            let byCreation = try Self.query("TRUEPREDICATE", sort: [RecordSortDescriptor(key: "creationDate", ascending: false)])
            let byModification = try Self.query("category == %@", "books", sort: [RecordSortDescriptor(key: "modificationDate")])
            for query in [byCreation, byModification] {
                let plan = try fixture.plan(query)
                #expect(plan.contains("USE TEMP B-TREE FOR ORDER BY"), "no system-date index unless declared:\n\(plan)")
            }
            var schema = Self.schema()
            schema.addField("creationDate", type: .timestamp, indexes: [.sortable])
            schema.compoundIndexes.append(.init(equalityFields: ["category"], sortField: "modificationDate"))
            try await fixture.container.saveSchema(schema)
            for query in [byCreation, byModification] {
                let plan = try fixture.plan(query)
                #expect(plan.contains("USING INDEX ix_") && !plan.contains("USE TEMP B-TREE"), "\(query):\n\(plan)")
                try await Self.expectBruteForce(query, fixture, searchable: ["title"])
            }
        }
    }

    @Test("a type's records are listed through the zone's name index; declaring recordName gives the type an index of its own")
    func typeListing() async throws {
        try await Self.withFixture(schema: true) { fixture in
            // Records of another type in the same zone, with names before and after the items'.
            let others = makeRecords("Other", count: 60, prefix: "a") { _ in ["category": .string("Books")] }
                + makeRecords("Other", count: 60, prefix: "z") { _ in ["category": .string("Books")] }
            try await TestDatabase.save(others, in: fixture.database)
            let all = try Self.query("TRUEPREDICATE")
            let byName = try Self.query("recordName > %@", "i-00100")
            let unindexed = try Self.query("note == %@", "note3 hidden")
            for query in [all, byName, unindexed] {
                let plan = try fixture.plan(query)
                #expect(plan.contains("USING INDEX records_by_name") && !plan.contains("TEMP B-TREE"), "\(query) reads the zone in name order:\n\(plan)")
                try await Self.expectBruteForce(query, fixture, searchable: ["title"])
            }

            var declared = Self.schema()
            declared.addField("recordName", type: .string, indexes: [.queryable])
            try await fixture.container.saveSchema(declared)
            for query in [all, byName, unindexed] {
                let plan = try fixture.plan(query)
                #expect(plan.contains("USING INDEX ix_") && !plan.contains("TEMP B-TREE"), "\(query) reads the type's own index:\n\(plan)")
                try await Self.expectBruteForce(query, fixture, searchable: ["title"])
            }
            #expect(try fixture.plan(byName).contains("record_name>?"), "a condition on recordName seeks in it")
            let others2 = Query(recordType: "Other")
            #expect(TestDatabase.names(try await TestDatabase.queryAll(others2, in: fixture.database)) == TestDatabase.names(others).sorted())
        }
    }

    @Test("a sort no index keeps, with no condition an index serves, reads the zone's range of the table in storage order")
    func unindexedSortReadsStorageOrder() async throws {
        try await Self.withFixture(schema: true) { fixture in
            for query in [try Self.query("note != %@", "note3 hidden", sort: [RecordSortDescriptor(key: "note", ascending: false)]),
                          try Self.query("TRUEPREDICATE", sort: [RecordSortDescriptor(key: "note")])] {
                let plan = try fixture.plan(query)
                #expect(plan.contains("USING INTEGER PRIMARY KEY") && !plan.contains("ix_"), "\(query):\n\(plan)")
                try await Self.expectBruteForce(query, fixture, searchable: ["title"])
            }
            // A condition an index serves keeps its index, whatever the sort.
            let filtered = try Self.query("category == %@", "c4", sort: [RecordSortDescriptor(key: "note")])
            let plan = try fixture.plan(filtered)
            #expect(plan.contains("USING INDEX ix_") && plan.contains("<expr>=?"), "\(plan)")
            try await Self.expectBruteForce(filtered, fixture, searchable: ["title"])
        }
    }

    @Test("a whole read sorted by a key no index keeps sorts with SQLite's sorter; a page keeps its top rows in a temporary B-tree")
    func wholeSortedReadUsesSorter() async throws {
        try await Self.withFixture(schema: true) { fixture in
            let query = try Self.query("TRUEPREDICATE", sort: [RecordSortDescriptor(key: "note")])
            let compiled = try CompiledQuery(query, zoneID: .default, desiredKeys: nil)
            // With any LIMIT, even -1, SQLite sorts into a temporary B-tree, which spills to its
            // file a page at a time: a whole read of 1,000,000 rows took 4.6 times as long.
            let whole = try fixture.engine.queryOpcodes(for: compiled, in: fixture.database.context, limit: -1)
            #expect(whole.contains("SorterOpen") && !whole.contains("OpenEphemeral"), "\(whole)")
            let page = try fixture.engine.queryOpcodes(for: compiled, in: fixture.database.context, limit: 401)
            #expect(page.contains("OpenEphemeral") && !page.contains("SorterOpen"), "\(page)")
            var streamed: [String] = []
            for try await record in fixture.database.allRecords(matching: query, pageSize: 7) { streamed.append(record.recordID.recordName) }
            expectSameOrder(streamed, TestDatabase.names(try QueryEvaluator.evaluate(query, over: fixture.stored, searchableFields: ["title"])), "\(query)")
        }
    }

    @Test("a version 3 store opens as the current version: documents whose folded copies were lowercased are folded again")
    func upgradeFromVersion3() async throws {
        try await TemporaryStore.with { store in
            let shell = try #require(StoreProcess.sqlite3, "the sqlite3 shell is needed (apt-get install sqlite3)")
            let path = store.path()
            do {
                let database = Container(identifier: Self.identifier, engine: try SQLiteEngine(path: path), userName: "alice").publicCloudDatabase
                try await TestDatabase.save([makeRecord("Street", "s1", ["name": .string("Hauptstraße")]), makeRecord("Street", "s2", ["name": .string("Main")])], in: database)
            }
            // What version 3 stored: the lowercase form ("hauptstraße"), not the case folding.
            let downgrade = """
                UPDATE records SET fields = json_replace(fields, '$.name', json_array('S', 'Hauptstraße', 'hauptstraße')) WHERE record_name = 's1';
                PRAGMA user_version = 3;
                """
            let down = try await StoreProcess.runSQL(shell, path, downgrade, in: store.directory)
            #expect(down.exitCode == 0, "\(down.stderr)")
            let database = Container(identifier: Self.identifier, engine: try SQLiteEngine(path: path), userName: "alice").publicCloudDatabase
            let found = try await TestDatabase.queryAll(Query(recordType: "Street", predicate: try QueryPredicate(format: "name == %@", "HAUPTSTRASSE")), in: database)
            #expect(found.map(\.recordID.recordName) == ["s1"])
            #expect(try await database.record(for: Record.ID(recordName: "s1")).fieldValue(forKey: "name") == .string("Hauptstraße"))
            let version = try await StoreProcess.runSQL(shell, path, "PRAGMA user_version;", in: store.directory)
            #expect(version.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "15", "the current version")
        }
    }

    @Test("a version 8 store, whose rows name the creator again as modifier, opens as the current version: records read and query as before; new rows store an empty modifier")
    func upgradeFromVersion8() async throws {
        try await TemporaryStore.with { store in
            let shell = try #require(StoreProcess.sqlite3, "the sqlite3 shell is needed (apt-get install sqlite3)")
            let path = store.path()
            var open = RecordTypeSchema(recordType: "Note", grants: [.authenticated: [.create, .write], .world: .read])
            open.addField("n", type: .int64)
            do {
                let container = Container(identifier: Self.identifier, engine: try SQLiteEngine(path: path), userName: "alice")
                try await container.saveSchema(open)
                try await TestDatabase.save([makeRecord("Note", "n1", ["n": .int64(1)]), makeRecord("Note", "n2", ["n": .int64(2)])], in: container.publicCloudDatabase)
            }
            let downgrade = """
                UPDATE records SET modified_by = created_by WHERE modified_by = '';
                PRAGMA user_version = 8;
                SELECT count(*) FROM records WHERE modified_by = created_by;
                """
            let down = try await StoreProcess.runSQL(shell, path, downgrade, in: store.directory)
            #expect(down.exitCode == 0 && down.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "2", "\(down.stdout)\(down.stderr)")

            let engine = try SQLiteEngine(path: path)
            let alice = Container(identifier: Self.identifier, engine: engine, userName: "alice")
            let bob = Container(identifier: Self.identifier, engine: engine, userName: "bob").publicCloudDatabase
            let aliceID = try await alice.userRecordID()
            let n2 = try await bob.record(for: Record.ID(recordName: "n2"))
            n2["n"] = Int64(3)
            _ = try await bob.save(n2)
            _ = try await alice.publicCloudDatabase.save(makeRecord("Note", "n3", ["n": .int64(4)]))
            let byAlice = try Query(recordType: "Note", format: "lastModifiedUserRecordID == %@", aliceID)
            #expect(TestDatabase.names(try await TestDatabase.queryAll(byAlice, in: alice.publicCloudDatabase)) == ["n1", "n3"], "a row of version 8 and a new row")
            #expect(try await alice.publicCloudDatabase.record(for: Record.ID(recordName: "n1")).systemFields.lastModifiedUserRecordID == aliceID)
            let stored = try await StoreProcess.runSQL(shell, path, "PRAGMA user_version; SELECT record_name || ':' || (modified_by = created_by) || ':' || (modified_by = '') FROM records ORDER BY record_name;", in: store.directory)
            #expect(stored.stdout.split(separator: "\n") == ["15", "n1:1:0", "n2:0:0", "n3:0:1"], "n1 as version 8 wrote it, n2 names bob, n3 is stored empty: \(stored.stdout)")
        }
    }

    @Test("a version 9 store, whose index of a declared field held values of any type, gets indexes of declared values when opened: a value of another type sorts as missing and pages end")
    func upgradeFromVersion9() async throws {
        try await TemporaryStore.with { store in
            let shell = try #require(StoreProcess.sqlite3, "the sqlite3 shell is needed (apt-get install sqlite3)")
            let path = store.path()
            var notes = RecordTypeSchema(recordType: "Note", grants: [.authenticated: [.create, .write], .world: .read])
            notes.addField("k", type: .string, indexes: [.queryable, .sortable])
            do {
                let container = Container(identifier: Self.identifier, engine: try SQLiteEngine(path: path), userName: "alice")
                try await container.saveSchema(notes)
                try await TestDatabase.save([makeRecord("Note", "s1", ["k": .string("b")]), makeRecord("Note", "s2", ["k": .string("a")]),
                                             makeRecord("Note", "s3", ["k": .string("c")])], in: container.publicCloudDatabase)
            }
            // Version 9's index of `k`, and an INT64 where the schema now says STRING (a record
            // saved before the field was declared so).
            let downgrade = """
                SELECT 'DROP INDEX ' || name || ';' FROM sqlite_master WHERE type = 'index' AND name GLOB 'ix_*';
                """
            let drops = try await StoreProcess.runSQL(shell, path, downgrade, in: store.directory)
            let old = drops.stdout + """
                CREATE INDEX ix_version9 ON records(zone_id, json_extract(fields, '$.k[1]'), record_name) WHERE record_type = 'Note';
                UPDATE records SET fields = json_set(fields, '$.k', json_array('I', 5)) WHERE record_name = 's3';
                PRAGMA user_version = 9;
                """
            let down = try await StoreProcess.runSQL(shell, path, old, in: store.directory)
            #expect(down.exitCode == 0, "\(down.stdout)\(down.stderr)")

            let database = Container(identifier: Self.identifier, engine: try SQLiteEngine(path: path), userName: "alice").publicCloudDatabase
            let sorted = Query(recordType: "Note", predicate: .all)
            sorted.sortDescriptors = [RecordSortDescriptor(key: "k", ascending: true)]
            #expect(TestDatabase.names(try await TestDatabase.queryAll(sorted, in: database, pageSize: 1)) == ["s3", "s2", "s1"], "the INT64 as missing, then the strings")
            let after = try await StoreProcess.runSQL(shell, path, "PRAGMA user_version; SELECT count(*) FROM sqlite_master WHERE name = 'ix_version9'; SELECT count(*) FROM sqlite_master WHERE name GLOB 'ix_*' AND sql LIKE '%CASE WHEN%';", in: store.directory)
            #expect(after.stdout.split(separator: "\n") == ["15", "0", "1"], "the current version, the old index replaced by one of declared values: \(after.stdout)")
        }
    }

    @Test("a version 2 store opens as the current version: type index dropped, schema indexes rebuilt, old documents still compare")
    func upgradeFromVersion2() async throws {
        try await Self.withFixture(schema: true) { fixture in
            let shell = try #require(StoreProcess.sqlite3, "the sqlite3 shell is needed (apt-get install sqlite3)")
            let directory = URL(fileURLWithPath: fixture.path).deletingLastPathComponent()
            // What version 2 had: records in a table of their own with a change-sequence
            // column and index, the record-type index, string equality indexes without
            // lower(), and documents carrying the lowercase copy of ASCII strings.
            let downgrade = """
                CREATE TABLE records_v2(zone_id INTEGER NOT NULL, record_name TEXT NOT NULL, record_type TEXT NOT NULL,
                    created_at REAL NOT NULL, created_by TEXT NOT NULL, modified_at REAL NOT NULL, modified_by TEXT NOT NULL,
                    change_tag TEXT NOT NULL, change_seq INTEGER NOT NULL, fields TEXT NOT NULL, parent_name TEXT);
                INSERT INTO records_v2 SELECT zone_id, record_name, record_type, created_at, created_by, modified_at, modified_by,
                    change_tag, change_key & 1099511627775, fields, parent_name FROM records;
                DROP TABLE records;
                ALTER TABLE records_v2 RENAME TO records;
                CREATE UNIQUE INDEX records_by_name ON records(zone_id, record_name);
                CREATE INDEX records_by_type ON records(zone_id, record_type, record_name);
                CREATE INDEX records_by_change ON records(zone_id, change_seq);
                CREATE INDEX ix_v2 ON records(zone_id, coalesce(json_extract(fields, '$.category[2]'), json_extract(fields, '$.category[1]')), record_name) WHERE record_type = 'Item';
                UPDATE records SET fields = json_replace(fields, '$.category', json_array('S', json_extract(fields, '$.category[1]'), lower(json_extract(fields, '$.category[1]'))))
                    WHERE json_extract(fields, '$.category[1]') <> lower(json_extract(fields, '$.category[1]'));
                PRAGMA user_version = 2;
                SELECT count(*) FROM records WHERE json_extract(fields, '$.category[2]') IS NOT NULL;
                """
            let down = try await StoreProcess.runSQL(shell, fixture.path, downgrade, in: directory)
            #expect(down.exitCode == 0 && Int(down.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0 > 0, "\(down.stdout)\(down.stderr)")

            let engine = try SQLiteEngine(path: fixture.path)
            let database = Container(identifier: Self.identifier, engine: engine, userName: "alice").publicCloudDatabase
            let after = try await StoreProcess.runSQL(shell, fixture.path, "PRAGMA user_version; SELECT name FROM sqlite_master WHERE name IN ('records_by_type', 'records_by_change', 'ix_v2', 'records_v2') OR sql LIKE '%change_seq INTEGER%records%';", in: directory)
            #expect(after.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "15", "the current version, no old index or table left: \(after.stdout)")
            let query = try Self.query("category == %@", "BOOKS")
            let plan = try engine.queryPlan(for: CompiledQuery(query, zoneID: .default, desiredKeys: nil), in: database.context)
            #expect(plan.contains("SEARCH r USING INDEX ix_") && plan.contains("<expr>=?"), "the rebuilt index serves equality:\n\(plan)")
            let expected = TestDatabase.names(try QueryEvaluator.evaluate(query, over: fixture.stored, searchableFields: ["title"]))
            #expect(!expected.isEmpty)
            #expect(TestDatabase.names(try await TestDatabase.queryAll(query, in: database)) == expected)
            // Every record is there with its system fields, and the change history goes on from where it was.
            let all = try await TestDatabase.queryAll(Query(recordType: "Item"), in: database)
            #expect(all.map(\.recordID.recordName) == fixture.stored.map(\.recordID.recordName))
            #expect(all.map(\.recordChangeTag) == fixture.stored.map(\.recordChangeTag))
            let changes = try engine.fetchZoneChanges(ZoneChangesRequest(zoneID: .default, after: nil, limit: 10_000), in: database.context)
            #expect(changes.changes.count == Self.recordCount && !changes.moreComing)
            let changed = all[5]
            changed["note"] = "after the upgrade"
            try await TestDatabase.save([changed], in: database)
            let next = try engine.fetchZoneChanges(ZoneChangesRequest(zoneID: .default, after: changes.position, limit: 10), in: database.context)
            #expect(next.changes.count == 1 && next.position.sequence > changes.position.sequence, "\(next)")
        }
    }

    @Test("a schema declares the system dates only as TIMESTAMP fields, recordName only as a STRING, and no other system field")
    func systemFieldDeclarations() async throws {
        for (name, type, indexes) in [("creationDate", FieldType.string, RecordTypeSchema.Indexes.sortable),
                                      ("modificationDate", .timestamp, .searchable),
                                      ("recordName", .int64, .queryable),
                                      ("recordName", .string, .searchable),
                                      ("recordChangeTag", .string, .queryable)] {
            var schema = RecordTypeSchema(recordType: "Item")
            schema.addField(name, type: type, indexes: indexes)
            #expect(throws: StratusError.self, "\(name) as \(type)") { try schema.validate() }
        }
    }

    @Test("equality plus sort uses the compound index without a sorting step")
    func compoundIndex() async throws {
        try await Self.withFixture(schema: true) { fixture in
            for ascending in [true, false] {
                let query = try Self.query("category == %@", "books", sort: [RecordSortDescriptor(key: "rank", ascending: ascending)])
                let plan = try fixture.plan(query)
                #expect(plan.contains("USING INDEX ix_") && plan.contains("<expr>=?"), "\(query):\n\(plan)")
                #expect(!plan.contains("USE TEMP B-TREE"), "\(query) needs no sorting step:\n\(plan)")
                try await Self.expectBruteForce(query, fixture, searchable: ["title"])
            }
        }
    }

    @Test("the page after an ascending cursor seeks in the index to the cursor's position")
    func ascendingCursorSeeks() async throws {
        try await Self.withFixture(schema: true) { fixture in
            for query in [
                try Self.query("TRUEPREDICATE", sort: [RecordSortDescriptor(key: "rank")]),
                try Self.query("category == %@", "Books", sort: [RecordSortDescriptor(key: "rank")]),
            ] {
                let position = try await Self.secondPagePosition(query, fixture)
                let plan = try fixture.plan(query, after: position)
                #expect(plan.contains("SEARCH r USING INDEX ix_") && plan.contains("<expr>>?"), "\(query) after \(position):\n\(plan)")
                #expect(!plan.contains("USE TEMP B-TREE"), "\(query) after a cursor needs no sorting step:\n\(plan)")
            }
        }
    }

    @Test("the page after a descending cursor seeks in the index to the cursor's position")
    func descendingCursorSeeks() async throws {
        try await Self.withFixture(schema: true) { fixture in
            for query in [
                try Self.query("TRUEPREDICATE", sort: [RecordSortDescriptor(key: "rank", ascending: false)]),
                try Self.query("category == %@", "Books", sort: [RecordSortDescriptor(key: "rank", ascending: false)]),
            ] {
                let position = try await Self.secondPagePosition(query, fixture)
                let plan = try fixture.plan(query, after: position)
                #expect(plan.contains("SEARCH r USING INDEX ix_") && plan.contains("<expr><?"), "\(query) after \(position):\n\(plan)")
                #expect(!plan.contains("USE TEMP B-TREE"), "\(query) after a cursor needs no sorting step:\n\(plan)")
            }
        }
    }

    @Test("self CONTAINS on a searchable field looks words up in record_tokens")
    func searchableUsesTokens() async throws {
        try await Self.withFixture(schema: true) { fixture in
            let any = try Self.query("self CONTAINS %@", "word3 WORD5")
            let plan = try fixture.plan(any)
            #expect(plan.contains("record_tokens") || plan.contains("SEARCH t USING"), "\(any):\n\(plan)")
            #expect(plan.contains("token=?"), "\(any) looks each word up:\n\(plan)")
            try await Self.expectBruteForce(any, fixture, searchable: ["title"])
            // Only searchable fields are searched when the schema declares some: `note` is not.
            let hidden = try await TestDatabase.queryAll(try Self.query("self CONTAINS 'hidden'"), in: fixture.database)
            #expect(hidden.isEmpty, "words of a field that is not searchable are not found")
            let cafe = try Self.query("self CONTAINS 'CAFE' AND self CONTAINS 'word6'")
            try await Self.expectBruteForce(cafe, fixture, searchable: ["title"])
        }
    }

    @Test("an all-words search looks each word up in record_tokens instead of reading every word of the zone")
    func allWordsSeek() async throws {
        try await Self.withFixture(schema: true) { fixture in
            let all = try Self.query("self CONTAINS 'word4' AND self CONTAINS 'cafe'")
            let plan = try fixture.plan(all)
            #expect(plan.contains("SEARCH t USING") && plan.contains("token=?"), "\(all):\n\(plan)")
            try await Self.expectBruteForce(all, fixture, searchable: ["title"])
        }
    }

    // MARK: - Without a schema

    @Test("without a schema the same queries scan and return the same records")
    func withoutSchemaScans() async throws {
        try await Self.withFixture(schema: false) { fixture in
            let queries = [
                try Self.query("category == %@", "BOOKS"),
                try Self.query("weight > %@", 20),
                try Self.query("TRUEPREDICATE", sort: [RecordSortDescriptor(key: "rank", ascending: false)]),
                try Self.query("category == %@", "books", sort: [RecordSortDescriptor(key: "rank")]),
                try Self.query("self CONTAINS %@", "word3 WORD5"),
                try Self.query("self CONTAINS 'hidden' AND self CONTAINS 'note3'"),
            ]
            for query in queries {
                let plan = try fixture.plan(query)
                #expect(!plan.contains("ix_"), "\(query) has no index to use:\n\(plan)")
                #expect(!plan.contains("record_tokens"), "\(query) has no words table to use:\n\(plan)")
                // Without searchable fields, self CONTAINS searches every string field.
                try await Self.expectBruteForce(query, fixture, searchable: nil)
            }
        }
    }

    // MARK: - Saving and changing schemas

    @Test("saving a schema after the records exist indexes them, words included")
    func schemaAfterRecords() async throws {
        try await Self.withFixture(schema: false) { fixture in
            let words = try Self.query("self CONTAINS %@", "word7")
            let before = try await TestDatabase.queryAll(words, in: fixture.database)
            try await fixture.container.saveSchema(Self.schema())
            #expect(try await fixture.container.schemas() == [Self.schema()])
            let plan = try fixture.plan(words)
            #expect(plan.contains("token=?"), "the words of existing records are indexed:\n\(plan)")
            let after = try await TestDatabase.queryAll(words, in: fixture.database)
            #expect(!after.isEmpty)
            #expect(TestDatabase.names(after) == TestDatabase.names(before), "the existing records are found through the index")
            try await Self.expectBruteForce(words, fixture, searchable: ["title"])
            let equality = try Self.query("category == %@", "c4", sort: [RecordSortDescriptor(key: "rank")])
            #expect(try fixture.plan(equality).contains("USING INDEX ix_"))
            try await Self.expectBruteForce(equality, fixture, searchable: ["title"])

            // Records saved later are indexed as they are written; a changed record loses its old words.
            let changed = try #require(fixture.stored.first { TestDatabase.names([$0]) == ["i-00007"] })
            changed["title"] = "renamed entirely"
            try await TestDatabase.save([changed, makeRecord("Item", "i-new", ["title": .string("Word7 newcomer"), "category": .string("c4")])], in: fixture.database)
            fixture.stored = try await TestDatabase.queryAll(Query(recordType: "Item"), in: fixture.database)
            try await Self.expectBruteForce(words, fixture, searchable: ["title"])
            try await Self.expectBruteForce(try Self.query("self CONTAINS 'renamed'"), fixture, searchable: ["title"])
            let latest = try await TestDatabase.queryAll(words, in: fixture.database)
            #expect(TestDatabase.names(latest).contains("i-new"))
            #expect(!TestDatabase.names(latest).contains("i-00007"))
        }
    }

    @Test("changing a schema drops the indexes and words it no longer declares")
    func schemaChangeDropsIndexes() async throws {
        try await Self.withFixture(schema: true) { fixture in
            let equality = try Self.query("category == %@", "c4")
            let sorted = try Self.query("TRUEPREDICATE", sort: [RecordSortDescriptor(key: "rank")])
            let words = try Self.query("self CONTAINS %@", "hidden")
            #expect(try fixture.plan(equality).contains("ix_"))
            #expect(try await TestDatabase.queryAll(words, in: fixture.database).isEmpty, "note is not searchable yet")

            var smaller = RecordTypeSchema(recordType: "Item")
            smaller.addField("rank", type: .int64, indexes: [.sortable])
            smaller.addField("note", type: .string, indexes: [.searchable])
            try await fixture.container.saveSchema(smaller)
            #expect(try await fixture.container.schemas() == [smaller])

            let equalityPlan = try fixture.freshPlan(equality)
            #expect(!equalityPlan.contains("ix_"), "the category index is gone:\n\(equalityPlan)")
            let sortedPlan = try fixture.freshPlan(sorted)
            #expect(sortedPlan.contains("USING INDEX ix_") && !sortedPlan.contains("TEMP B-TREE"), "the rank index stays:\n\(sortedPlan)")
            // Searchable is now `note` instead of `title`.
            try await Self.expectBruteForce(equality, fixture, searchable: ["note"])
            try await Self.expectBruteForce(words, fixture, searchable: ["note"])
            #expect(try await TestDatabase.queryAll(try Self.query("self CONTAINS 'shared'"), in: fixture.database).isEmpty,
                    "the words of title are no longer searched")
            #expect(try fixture.freshPlan(words).contains("token=?"))

            // A schema with no index at all leaves no ix_ index and scans every string field.
            try await fixture.container.saveSchema(RecordTypeSchema(recordType: "Item"))
            for query in [equality, sorted, words] {
                let plan = try fixture.freshPlan(query)
                #expect(!plan.contains("ix_") && !plan.contains("record_tokens"), "\(query):\n\(plan)")
            }
            try await Self.expectBruteForce(try Self.query("self CONTAINS 'shared' AND self CONTAINS 'hidden'"), fixture, searchable: nil)
            try await Self.expectBruteForce(sorted, fixture, searchable: nil)
        }
    }

    @Test("queryPlan on the engine that changed the schema explains with the indexes the store has now")
    func planFollowsSchemaChange() async throws {
        try await Self.withFixture(schema: true) { fixture in
            let equality = try Self.query("category == %@", "c4")
            #expect(try fixture.plan(equality).contains("ix_"))
            try await fixture.container.saveSchema(RecordTypeSchema(recordType: "Item"))
            let plan = try fixture.plan(equality)
            #expect(!plan.contains("ix_"), "the dropped index is not in the plan:\n\(plan)")
            #expect(plan == (try fixture.freshPlan(equality)), "the same plan as a new engine on the file")
            try await fixture.container.saveSchema(Self.schema())
            let restored = try fixture.plan(equality)
            #expect(restored.contains("ix_"), "the index is back:\n\(restored)")
        }
    }

    @Test("an invalid schema is invalidArguments and changes nothing")
    func invalidSchemas() async throws {
        try await Self.withFixture(schema: true) { fixture in
            let before = try await fixture.container.schemas()
            var searchableNumber = RecordTypeSchema(recordType: "Item")
            searchableNumber.addField("weight", type: .int64, indexes: [.searchable])
            var sortableList = RecordTypeSchema(recordType: "Item")
            sortableList.addField("tags", type: .stringList, indexes: [.sortable])
            var undeclared = RecordTypeSchema(recordType: "Item")
            undeclared.addField("rank", type: .int64, indexes: [.sortable])
            undeclared.compoundIndexes = [.init(equalityFields: ["category"], sortField: "rank")]
            var listInCompound = RecordTypeSchema(recordType: "Item")
            listInCompound.addField("tags", type: .stringList, indexes: [.queryable])
            listInCompound.compoundIndexes = [.init(equalityFields: ["tags"])]
            var twice = RecordTypeSchema(recordType: "Item")
            twice.fields = [.init("rank", type: .int64, indexes: [.sortable]), .init("rank", type: .double, indexes: [])]
            let badName = RecordTypeSchema(recordType: "Item", fields: [.init("bad name", type: .string, indexes: [.queryable])])
            let badType = RecordTypeSchema(recordType: "_Item")
            for (label, bad) in [("searchable INT64", searchableNumber), ("sortable list", sortableList), ("compound index naming an undeclared field", undeclared),
                                 ("list in a compound index", listInCompound), ("a field declared twice", twice), ("a bad field name", badName), ("a bad record type", badType)] {
                let error = await caughtError { try await fixture.container.saveSchema(bad) }
                #expect(stratusError(error)?.code == .invalidArguments, "\(label): \(String(describing: error))")
            }
            #expect(try await fixture.container.schemas() == before, "the saved schema is unchanged")
            let plan = try fixture.freshPlan(try Self.query("category == %@", "c4"))
            #expect(plan.contains("ix_"), "its indexes too")
        }
    }
}
