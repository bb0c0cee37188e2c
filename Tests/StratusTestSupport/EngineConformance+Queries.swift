import Foundation
import SeededRandom
import Stratus
import Testing

extension EngineConformance {
    static let queryCases: [TestCase] = [
        TestCase("queries match a brute-force filter and sort for every operator and type", queriesMatchBruteForce),
        TestCase("queries sort on fields and system fields like a brute-force sort", queriesSortLikeBruteForce),
        TestCase("reference equality with a Reference and with a Record.ID", referenceEquality),
        TestCase("queries on a record's parent (CKRecord.SystemFieldKey.parent, ___parent) match, sort and page like a brute-force filter; fields named parent and share are fields", parentQueries),
        TestCase("a type mismatch never matches", typeMismatchNeverMatches),
        TestCase("desiredKeys limits the returned fields", desiredKeysLimitFields),
        TestCase("indexed strings and searchable words of 3,000 and 10,000 characters are saved, found, sorted and paged exactly", longIndexedStrings),
    ]

    static let queryOwners = ["owner-1", "owner-2", "owner-3"]
    static let queryBaseDate = Date(timeIntervalSinceReferenceDate: 700_000_000.25)
    static let queryNames = ["apple", "apricot", "banana", "Banana", "cherry", "\u{C4}hre", "date", "ap"]
    static let queryTags = ["red", "green", "blue"]

    /// The index a query record was built from (stored in field `i`).
    static func index(_ record: Record) -> Int {
        if case .int64(let i)? = record.fieldValue(forKey: "i") { return Int(i) }
        return -1
    }

    /// Records of type `Item` (and a few of type `Other` with the same fields) with every scalar
    /// type, missing values, duplicates and lists.
    static func queryDataset(type: String = "Item", count: Int = 48, prefix: String = "q") -> [Record] {
        makeRecords(type, count: count, prefix: prefix) { i in
            var fields: [String: FieldValue] = ["i": .int64(Int64(i))]
            fields["name"] = .string(queryNames[i % queryNames.count] + (i % 3 == 0 ? "" : "-\(i % 5)"))
            if i % 5 != 0 { fields["count"] = .int64(Int64(i % 7)) }
            if i % 6 != 0 { fields["price"] = .double(Double(i) * 1.25 - 10) }
            if i % 4 != 0 { fields["due"] = .date(queryBaseDate.addingTimeInterval(Double(i % 10) * 3_600.5)) }
            if i % 8 != 0 { fields["owner"] = .reference(reference(queryOwners[i % 3], i % 2 == 0 ? .none : .deleteSelf)) }
            if i % 3 != 0 { fields["tags"] = .stringList(queryTags.enumerated().filter { (i >> $0.offset) & 1 == 1 }.map(\.element)) }
            fields["scores"] = .int64List([Int64(i % 4), Int64(i % 6)])
            fields["code"] = i % 2 == 0 ? .int64(Int64(i % 10)) : .string("\(i % 10)")
            return fields
        }
    }

    /// Saves the dataset in three batches (so creation dates differ) and returns every record
    /// of both types as stored, with system fields.
    static func loadQueryDataset(_ database: Database) async throws -> [Record] {
        let items = queryDataset()
        let others = queryDataset(type: "Other", count: 6, prefix: "o")
        // `code` holds INT64 and STRING values, as a store may hold from before types were
        // enforced: seeded past the type rules.
        try await TestDatabase.seed(Array(items[0..<16]), in: database)
        try await TestDatabase.seed(Array(items[16..<32]) + others, in: database)
        try await TestDatabase.seed(Array(items[32...]), in: database)
        let stored = try await TestDatabase.queryAll(Query(recordType: "Item"), in: database)
            + TestDatabase.queryAll(Query(recordType: "Other"), in: database)
        #expect(stored.count == items.count + others.count)
        return stored
    }

    /// A query from a format string and arguments.
    static func query(_ type: String, _ format: String, _ arguments: [any Sendable], sort: [RecordSortDescriptor] = []) throws -> Query {
        let query = Query(recordType: type, predicate: try QueryPredicate(format: format, argumentArray: arguments))
        query.sortDescriptors = sort
        return query
    }

    /// Runs `query` on the store and compares with the brute-force answer; returns the names.
    @discardableResult
    static func expectBruteForce(_ query: Query, _ database: Database, _ all: [Record], nonEmpty: Bool = true, desiredKeys: [String]? = nil) async throws -> [String] {
        let expected = TestDatabase.names(try QueryEvaluator.evaluate(query, over: all))
        let actual: [String]
        do {
            actual = TestDatabase.names(try await TestDatabase.queryAll(query, in: database, desiredKeys: desiredKeys))
        } catch {
            Issue.record("query \(query) failed: \(error)")
            return []
        }
        expectSameOrder(actual, expected, "query \(query)")
        if nonEmpty {
            #expect(!expected.isEmpty, "query \(query) should match something in the dataset")
            #expect(expected.count < all.count, "query \(query) should not match everything")
        }
        return actual
    }

    static func queriesMatchBruteForce(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        let all = try await loadQueryDataset(database)
        let items = all.filter { $0.recordType == "Item" }
        let later = queryBaseDate.addingTimeInterval(3 * 3_600.5)
        let owner1 = reference(queryOwners[1])
        let midCreation = items.compactMap(\.creationDate).sorted()[items.count / 2]
        let checks: [(String, [any Sendable])] = [
            ("name == %@", ["banana-1"]),
            ("name != %@", ["apple"]),
            ("name < %@", ["banana"]),
            ("name <= %@", ["banana"]),
            ("name > %@", ["cherry"]),
            ("name >= %@", ["cherry"]),
            ("name == %@", ["\u{C4}hre"]),
            ("count == %@", [3]),
            ("count != %@", [3]),
            ("count < %@", [2]),
            ("count <= %@", [2]),
            ("count > %@", [Int64(4)]),
            ("count >= %@", [4]),
            ("price == %@", [2.5]),
            ("price != %@", [2.5]),
            ("price < %@", [0.0]),
            ("price <= %@", [12.5]),
            ("price > %@", [30.5]),
            ("price >= %@", [30.0]),
            ("due == %@", [later]),
            ("due != %@", [later]),
            ("due < %@", [later]),
            ("due <= %@", [later]),
            ("due > %@", [later]),
            ("due >= %@", [later]),
            ("count >= %@ AND price < %@", [2, 30.0]),
            ("count >= %@ AND price < %@ AND name BEGINSWITH %@", [1, 40.0, "ap"]),
            ("name BEGINSWITH %@", ["ap"]),
            ("name BEGINSWITH %@", ["B"]),
            ("name BEGINSWITH %@", ["\u{C4}"]),
            ("name IN %@", [["apple", "cherry-1", "nothing"]]),
            ("count IN %@", [[1, 3]]),
            ("owner IN %@", [[Record.ID(recordName: queryOwners[0]), Record.ID(recordName: queryOwners[2])]]),
            ("tags CONTAINS %@", ["red"]),
            ("tags CONTAINS %@ AND tags CONTAINS %@", ["red", "blue"]),
            ("scores CONTAINS %@", [3]),
            ("owner == %@", [owner1]),
            ("owner != %@", [owner1]),
            ("recordName == %@", [Record.ID(recordName: recordName("q", 7))]),
            ("creationDate <= %@", [midCreation]),
            ("creationDate > %@", [midCreation]),
            ("code == %@", [4]),
            ("code == %@", ["5"]),
        ]
        for (format, arguments) in checks {
            try await expectBruteForce(try query("Item", format, arguments), database, all)
        }
        for (format, arguments) in [("TRUEPREDICATE", [any Sendable]()), ("FALSEPREDICATE", [])] {
            let names = try await expectBruteForce(try query("Item", format, arguments), database, all, nonEmpty: false)
            #expect(names.count == (format == "TRUEPREDICATE" ? items.count : 0))
        }

        // A few answers worked out by hand, so the evaluator itself is checked too.
        func names(_ format: String, _ arguments: [any Sendable]) async throws -> Set<String> {
            Set(TestDatabase.names(try await TestDatabase.queryAll(try query("Item", format, arguments), in: database)))
        }
        func expected(_ include: (Int) -> Bool) -> Set<String> {
            Set(items.filter { include(index($0)) }.map(\.recordID.recordName))
        }
        #expect(try await names("count == %@", [3]) == expected { $0 % 5 != 0 && $0 % 7 == 3 })
        #expect(try await names("count != %@", [3]) == expected { $0 % 5 != 0 && $0 % 7 != 3 })
        #expect(try await names("price < %@", [0.0]) == expected { $0 % 6 != 0 && Double($0) * 1.25 - 10 < 0 })
        #expect(try await names("tags CONTAINS %@", ["green"]) == expected { $0 % 3 != 0 && ($0 >> 1) & 1 == 1 })
        #expect(try await names("count IN %@", [[1, 3]]) == expected { $0 % 5 != 0 && [1, 3].contains($0 % 7) })
        #expect(try await names("name BEGINSWITH %@", ["ap"]) == expected { [0, 1, 7].contains($0 % 8) })
        #expect(try await names("TRUEPREDICATE", []) == expected { _ in true })
        // String equality ignores case; BEGINSWITH does not.
        #expect(try await names("name == %@", ["BANANA"]) == expected { [2, 3].contains($0 % 8) && $0 % 3 == 0 })
        #expect(try await names("name == %@", ["\u{E4}hre"]) == expected { $0 % 8 == 5 && $0 % 3 == 0 })
        #expect(try await names("name BEGINSWITH %@", ["Ban"]) == expected { $0 % 8 == 3 })
    }

    static func queriesSortLikeBruteForce(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        let all = try await loadQueryDataset(database)
        let sorts: [[RecordSortDescriptor]] = [
            [],
            [RecordSortDescriptor(key: "name")],
            [RecordSortDescriptor(key: "name", ascending: false)],
            [RecordSortDescriptor(key: "count")],
            [RecordSortDescriptor(key: "count", ascending: false)],
            [RecordSortDescriptor(key: "price")],
            [RecordSortDescriptor(key: "price", ascending: false)],
            [RecordSortDescriptor(key: "due")],
            [RecordSortDescriptor(key: "due", ascending: false)],
            [RecordSortDescriptor(key: "creationDate")],
            [RecordSortDescriptor(key: "creationDate", ascending: false)],
            [RecordSortDescriptor(key: "modificationDate", ascending: false)],
            [RecordSortDescriptor(key: "recordName")],
            [RecordSortDescriptor(key: "recordName", ascending: false)],
            [RecordSortDescriptor(key: "count"), RecordSortDescriptor(key: "price", ascending: false)],
            [RecordSortDescriptor(key: "count", ascending: false), RecordSortDescriptor(key: "name")],
            [RecordSortDescriptor(key: "creationDate", ascending: false), RecordSortDescriptor(key: "due")],
        ]
        for sort in sorts {
            try await expectBruteForce(try query("Item", "TRUEPREDICATE", [], sort: sort), database, all, nonEmpty: false)
            try await expectBruteForce(try query("Item", "count >= %@", [2], sort: sort), database, all)
            try await expectBruteForce(try query("Item", "name BEGINSWITH %@ AND price > %@", ["ap", 0.0], sort: sort), database, all)
        }

        // Checked by hand: record names descending, and creation dates never decrease ascending.
        let byNameDesc = TestDatabase.names(try await TestDatabase.queryAll(try query("Item", "TRUEPREDICATE", [], sort: [RecordSortDescriptor(key: "recordName", ascending: false)]), in: database))
        #expect(byNameDesc == (0..<48).map { recordName("q", $0) }.reversed())
        let byCreation = try await TestDatabase.queryAll(try query("Item", "TRUEPREDICATE", [], sort: [RecordSortDescriptor(key: "creationDate")]), in: database)
        let creationDates = byCreation.compactMap(\.creationDate)
        #expect(creationDates.count == 48)
        #expect(creationDates == creationDates.sorted())
        #expect(Set(creationDates).count >= 3, "three batches were saved at different times")
        let byPriceDesc = try await TestDatabase.queryAll(try query("Item", "TRUEPREDICATE", [], sort: [RecordSortDescriptor(key: "price", ascending: false)]), in: database)
        let prices = byPriceDesc.map { record -> Double? in if case .double(let p)? = record.fieldValue(forKey: "price") { p } else { nil } }
        let present = prices.compactMap { $0 }
        #expect(present == present.sorted(by: >))
        #expect(prices.prefix(present.count).allSatisfy { $0 != nil }, "missing values sort last when descending")
    }

    static func referenceEquality(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        let all = try await loadQueryDataset(database)
        let items = all.filter { $0.recordType == "Item" }
        for (position, owner) in queryOwners.enumerated() {
            let expected = Set(items.filter { index($0) % 8 != 0 && index($0) % 3 == position }.map(\.recordID.recordName))
            #expect(!expected.isEmpty)
            let byReference = try await TestDatabase.queryAll(try Query(recordType: "Item", format: "owner == %@", reference(owner)), in: database)
            let byDeleteSelfReference = try await TestDatabase.queryAll(try Query(recordType: "Item", format: "owner == %@", reference(owner, .deleteSelf)), in: database)
            let byID = try await TestDatabase.queryAll(try Query(recordType: "Item", format: "owner == %@", Record.ID(recordName: owner)), in: database)
            #expect(Set(TestDatabase.names(byReference)) == expected, "owner == Reference(\(owner))")
            #expect(Set(TestDatabase.names(byDeleteSelfReference)) == expected, "the reference's action does not matter")
            #expect(Set(TestDatabase.names(byID)) == expected, "owner == Record.ID(\(owner))")
            try await expectBruteForce(try Query(recordType: "Item", format: "owner == %@", Record.ID(recordName: owner)), database, all)
        }
        let nobody = try await TestDatabase.queryAll(try Query(recordType: "Item", format: "owner == %@", Record.ID(recordName: "nobody")), in: database)
        #expect(nobody.isEmpty)
    }

    static func parentQueries(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        let lists = makeRecords("List", count: 3, prefix: "list") { i in ["i": .int64(Int64(i))] }
        try await TestDatabase.save(lists, in: database)
        // Every fourth child has no parent; the rest hang on the three lists in turn.
        // CloudKit schemas declare fields named parent and share; every fifth child has them.
        let children = makeRecords("Entry", count: 40, prefix: "entry") { i in
            ["i": .int64(Int64(i)), "rank": .int64(Int64(i % 6))]
                .merging(i % 5 == 0 ? ["parent": .string("folder-\(i % 2)"), "share": .int64(Int64(i))] : [:]) { $1 }
        }
        for (i, child) in children.enumerated() where i % 4 != 0 {
            child.setParent(lists[i % 3].recordID)
        }
        try await TestDatabase.save(children, in: database)
        let all = try await TestDatabase.queryAll(Query(recordType: "Entry"), in: database)
        #expect(all.count == children.count)
        let first = lists[0].recordID, second = lists[1].recordID
        let expectedUnderFirst = Set(children.enumerated().filter { $0.offset % 4 != 0 && $0.offset % 3 == 0 }.map(\.element.recordID.recordName))
        let queries: [(String, [any Sendable], [RecordSortDescriptor])] = [
            ("%K == %@", [Record.SystemFieldKey.parent, Record.Reference(recordID: first, action: .none)], []),
            ("___parent == %@", [first], []),
            ("___parent == %@", [lists[0]], []),
            ("___parent == %@", [first.recordName], []),
            ("___parent != %@", [Record.Reference(recordID: first, action: .none)], []),
            ("___parent IN %@", [[first, second]], [RecordSortDescriptor(key: "rank")]),
            ("NOT (___parent IN %@)", [[first]], []),
            ("rank >= %@", [2], [RecordSortDescriptor(key: Record.SystemFieldKey.parent), RecordSortDescriptor(key: "rank", ascending: false)]),
            ("rank < %@", [4], [RecordSortDescriptor(key: "___parent", ascending: false)]),
            ("parent == %@", ["folder-0"], []),
            ("parent BEGINSWITH %@", ["folder"], [RecordSortDescriptor(key: "parent"), RecordSortDescriptor(key: "i")]),
            ("share > %@", [10], [RecordSortDescriptor(key: "share", ascending: false)]),
            ("___parent == nil", [], []),
            ("%K != nil", [Record.SystemFieldKey.parent], [RecordSortDescriptor(key: "rank")]),
            ("rank >= %@ AND ___parent == NULL", [2], [RecordSortDescriptor(key: "i", ascending: false)]),
            ("NOT (___parent == nil)", [], []),
        ]
        for (format, arguments, sort) in queries {
            try await expectBruteForce(try query("Entry", format, arguments, sort: sort), database, all)
        }
        let underFirst = try await TestDatabase.queryAll(try query("Entry", "%K == %@", [Record.SystemFieldKey.parent, first]), in: database, pageSize: 3)
        #expect(Set(TestDatabase.names(underFirst)) == expectedUnderFirst && underFirst.count == expectedUnderFirst.count, "___parent == list-0, paged by 3")
        let ofNoList = try await TestDatabase.queryAll(try query("Entry", "___parent == %@", [Record.ID(recordName: "nowhere")]), in: database)
        #expect(ofNoList.isEmpty)
        // CloudKit's one nil comparison: the top-level records, paged.
        let topLevel = try await TestDatabase.queryAll(try query("Entry", "%K == nil", [Record.SystemFieldKey.parent]), in: database, pageSize: 3)
        #expect(Set(TestDatabase.names(topLevel)) == Set(children.enumerated().filter { $0.offset % 4 == 0 }.map(\.element.recordID.recordName)) && topLevel.count == 10)
        #expect(throws: StratusError.self) { try QueryPredicate(format: "rank == nil") }
        // `parent` is the field: no child's field names a list, and folder-0 is no record's parent.
        let byField = try await TestDatabase.queryAll(try query("Entry", "parent == %@", ["folder-0"]), in: database)
        #expect(Set(TestDatabase.names(byField)) == Set(children.enumerated().filter { $0.offset % 10 == 0 }.map(\.element.recordID.recordName)))
        #expect(try await TestDatabase.queryAll(try query("Entry", "parent == %@", [first]), in: database).isEmpty)
        let fetched = try #require(all.first { $0.recordID.recordName == children[5].recordID.recordName })
        #expect(fetched.fieldValue(forKey: "parent") == .string("folder-1") && fetched.fieldValue(forKey: "share") == .int64(5))
        #expect(fetched.parent?.recordID == lists[2].recordID)
        #expect(fetched.share == nil, "a field named share is no share")
        #expect((fetched.value(forKey: "parent") as? Record.Reference)?.recordID == lists[2].recordID, "key-value coding finds the property first, as on CKRecord")
        // Queries on a record's share are not answered: said so, not as a misspelt field name.
        let onShare = stratusError(await caughtError { try await TestDatabase.queryAll(try query("Entry", "%K == %@", [Record.SystemFieldKey.share, first.recordName]), in: database) })
        #expect(onShare?.code == .invalidArguments && onShare?.message.contains("queries on a record's share") == true, "\(String(describing: onShare))")
    }

    static func typeMismatchNeverMatches(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        let all = try await loadQueryDataset(database)
        let mismatches: [(String, [any Sendable])] = [
            ("count == %@", ["3"]),
            ("count != %@", ["3"]),
            ("count < %@", ["9"]),
            ("count >= %@", [""]),
            ("name == %@", [3]),
            ("name > %@", [0]),
            ("due < %@", [1_000_000_000_000.0]),
            ("price == %@", [queryBaseDate]),
            ("name == %@", [Record.ID(recordName: "apple")]),
            ("owner == %@", [queryOwners[0]]),
            ("tags == %@", ["red"]),
            ("scores == %@", [3]),
            ("count IN %@", [["1", "3"]]),
            ("name BEGINSWITH %@ AND count == %@", ["a", "1"]),
        ]
        for (format, arguments) in mismatches {
            let names = try await expectBruteForce(try query("Item", format, arguments), database, all, nonEmpty: false)
            #expect(names.isEmpty, "\(format) \(arguments) must match nothing")
        }
        // The mixed field matches by type: INT64 4 only, STRING "5" only.
        let ints = try await TestDatabase.queryAll(try Query(recordType: "Item", format: "code == %@", 4), in: database)
        #expect(!ints.isEmpty)
        #expect(ints.allSatisfy { $0.fieldValue(forKey: "code") == .int64(4) })
        let strings = try await TestDatabase.queryAll(try Query(recordType: "Item", format: "code == %@", "5"), in: database)
        #expect(!strings.isEmpty)
        #expect(strings.allSatisfy { $0.fieldValue(forKey: "code") == .string("5") })
    }

    static func desiredKeysLimitFields(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        let all = try await loadQueryDataset(database)
        let full = Dictionary(uniqueKeysWithValues: all.map { ($0.recordID, $0) })
        let query = try Query(recordType: "Item", format: "count >= %@", 1)
        query.sortDescriptors = [RecordSortDescriptor(key: "price")]
        let limited = try await TestDatabase.queryAll(query, in: database, desiredKeys: ["name", "count", "absent"])
        #expect(!limited.isEmpty)
        for record in limited {
            let original = try #require(full[record.recordID])
            #expect(Set(record.allKeys()).isSubset(of: ["name", "count"]))
            #expect(record.allKeys().contains("name"))
            #expect(record.fieldValue(forKey: "name") == original.fieldValue(forKey: "name"))
            #expect(record.fieldValue(forKey: "count") == original.fieldValue(forKey: "count"))
            #expect(record.fieldValue(forKey: "price") == nil)
            #expect(record.recordChangeTag == original.recordChangeTag, "system fields come with every record")
            #expect(record.creationDate == original.creationDate)
            #expect(record.recordType == "Item")
        }
        // The order is the query's, whatever the desired keys.
        try await expectBruteForce(query, database, all, desiredKeys: ["name"])
        // Also page by page: a cursor continues after the last record's sort values, which
        // the desired keys left out of the records handed out.
        let paged = try await TestDatabase.queryAll(query, in: database, desiredKeys: ["name"], pageSize: 3)
        #expect(TestDatabase.names(paged) == TestDatabase.names(try await TestDatabase.queryAll(query, in: database)))
        let none = try await TestDatabase.queryAll(query, in: database, desiredKeys: [])
        #expect(none.count == limited.count)
        #expect(none.allSatisfy { $0.allKeys().isEmpty })

        // Fetching by ID honours desired keys too.
        let ids = Array(limited.prefix(3).map(\.recordID))
        let fetched = try await database.records(for: ids, desiredKeys: ["price"])
        for id in ids {
            let record = try #require(try fetched[id]?.get())
            #expect(record.allKeys() == (full[id]?.fieldValue(forKey: "price") == nil ? [] : ["price"]))
        }
    }
}

extension EngineConformance {
    /// Strings far longer than an index entry may hold (PostgreSQL's btree: 2,704 bytes), in
    /// queryable, sortable and searchable fields: random and incompressible, with letters of
    /// one to four UTF-8 bytes, several sharing their first 300 characters (one the start of
    /// another), among short and missing values. An engine that indexes only a prefix must
    /// still save them and answer exactly.
    static func longIndexedStrings(_ env: Environment) async throws {
        let container = env.container()
        var schema = RecordTypeSchema(recordType: "Long")
        schema.addField("s", type: .string, indexes: [.queryable])
        schema.addField("t", type: .string, indexes: [.sortable])
        schema.addField("u", type: .string, indexes: [.searchable])
        try await container.saveSchema(schema)
        let database = container.publicCloudDatabase

        var random = SeededGenerator(seed: 2_704)
        let letters = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .-äßéЖ€中😀")
        let wordLetters = Array("abcdefghijklmnopqrstuvwxyz0123456789")
        func text(_ count: Int, from alphabet: [Character] = letters) -> String {
            String((0..<count).map { _ in alphabet.randomElement(using: &random)! })
        }
        let count = 24
        let shared = text(300)
        let sharedWord = text(1_200, from: wordLetters)
        let lengths = (0..<count).map { $0 % 2 == 0 ? 3_000 : 10_000 }
        let s = lengths.enumerated().map { i, length in i % 3 == 0 ? shared + text(length - 300) : text(length) }
        var t: [String?] = lengths.enumerated().map { i, length in i % 3 == 0 ? shared + text(length - 300) : text(length) }
        t[4] = t[3]! + text(5)
        t[7] = nil
        t[8] = "short"
        let words = lengths.enumerated().map { i, length in
            i % 4 == 0 ? sharedWord + text(length - 1_200, from: wordLetters) : text(length, from: wordLetters)
        }
        let records = makeRecords("Long", count: count, prefix: "l") { i in
            var fields: [String: FieldValue] = ["s": .string(s[i]), "u": .string("note \(words[i])")]
            if let value = t[i] { fields["t"] = .string(value) }
            return fields
        }
        try await TestDatabase.save(records, in: database)
        let all = try await TestDatabase.queryAll(Query(recordType: "Long"), in: database)
        #expect(all.count == count)

        for i in [0, 3, 4, 9] {
            let found = try await expectBruteForce(try query("Long", "s == %@", [s[i]]), database, all)
            #expect(found == [recordName("l", i)], "equality on a long string finds exactly its record")
        }
        try await expectBruteForce(try query("Long", "s IN %@", [[s[0], s[3], shared]]), database, all)
        try await expectBruteForce(try query("Long", "t == %@", [t[3]!]), database, all)
        try await expectBruteForce(try query("Long", "s BEGINSWITH %@", [shared]), database, all)
        for op in [">", ">=", "<", "<="] {
            for i in [3, 4, 9] {
                try await expectBruteForce(try query("Long", "t \(op) %@", [t[i]!], sort: [RecordSortDescriptor(key: "t")]), database, all)
            }
        }
        let bounds = [t[0]!, t[6]!].sorted()
        try await expectBruteForce(try query("Long", "t BETWEEN %@", [bounds], sort: [RecordSortDescriptor(key: "t", ascending: false)]), database, all)

        let sorts: [[RecordSortDescriptor]] = [
            [RecordSortDescriptor(key: "t")],
            [RecordSortDescriptor(key: "t", ascending: false)],
            [RecordSortDescriptor(key: "s")],
            [RecordSortDescriptor(key: "s", ascending: false), RecordSortDescriptor(key: "t")],
        ]
        for sort in sorts {
            let sorted = try query("Long", "TRUEPREDICATE", [], sort: sort)
            try await expectBruteForce(sorted, database, all, nonEmpty: false)
            // Pages of two end between records whose values share their first 300 characters.
            let expected = TestDatabase.names(try QueryEvaluator.evaluate(sorted, over: all))
            let (names, _) = try await pageThrough(sorted, database, pageSize: 2, serializeCursors: true)
            expectSameOrder(names, expected, "paging \(sort.map(\.key))")
        }

        // A long word is found, and not confused with one that shares its first 1,200 letters.
        for i in [0, 1, 4] {
            let search = try query("Long", "self CONTAINS %@", [words[i]])
            let expected = TestDatabase.names(try QueryEvaluator.evaluate(search, over: all, searchableFields: ["u"]))
            #expect(expected == [recordName("l", i)])
            let found = TestDatabase.names(try await TestDatabase.queryAll(search, in: database))
            #expect(found == expected, "self CONTAINS a word of \(words[i].count) letters")
        }
        let both = try query("Long", "self CONTAINS %@ AND self CONTAINS %@", [words[4], "note"])
        #expect(TestDatabase.names(try await TestDatabase.queryAll(both, in: database)) == [recordName("l", 4)])
        #expect(try await database.countRecords(matching: try query("Long", "self CONTAINS %@", [words[8]])) == 1)
        // A word exactly as long as a word index keeps (1,000 bytes on PostgreSQL) is no prefix
        // search: the longer words cut to it are not it.
        #expect(try await database.countRecords(matching: try query("Long", "self CONTAINS %@", [String(sharedWord.prefix(1_000))])) == 0)
    }
}
