import Foundation
import SeededRandom
import Stratus
import Testing

/// The whole query language against the brute-force ``QueryEvaluator``: random predicates over
/// random data sets (with and without indexes), Apple's `CKQuery` examples with answers worked
/// out by hand, and the forms that must be rejected.
extension EngineConformance {
    static let queryLanguageCases: [TestCase] = [
        TestCase("query language: random predicates, sorts and cursor pages match a brute-force evaluator (no schema, scanning)") {
            try await randomizedQueries($0, indexed: false)
        },
        TestCase("query language: random predicates, sorts and cursor pages match a brute-force evaluator (schema with indexes)") {
            try await randomizedQueries($0, indexed: true)
        },
        TestCase("query language: cursors neither skip nor repeat records while other records change between pages", pagingWhileRecordsChange),
        TestCase("query language: every CKQuery documentation example returns the records worked out by hand", documentationExamples),
        TestCase("query language: tricky strings, precise dates and extreme numbers compare exactly like the brute-force evaluator", trickyValues),
        TestCase("query language: sorting by several keys and by distance, worked out by hand", handSortedExamples),
        TestCase("query language: rejected forms are invalidArguments, also at the QueryOperation level", rejectedForms),
        TestCase("query language: NOT over self CONTAINS, distance or BETWEEN built as a value is invalidArguments at the QueryOperation level",
                 rejectedNegations),
        TestCase("query language: string CONTAINS on a field the schema declares STRING is invalidArguments", stringContainsRejected),
    ]

    // MARK: - Paging through a query

    /// What paging through a query with ``QueryOperation`` and cursors returned.
    struct PagedResult {
        var records: [Record] = []
        var pageSizes: [Int] = []
        var error: (any Error)?
        var names: [String] { TestDatabase.names(records) }
    }

    /// Runs `query` page by page, following cursors (optionally through their serialized text).
    static func pageAll(_ query: Query, _ database: Database, pageSize: Int, serializeCursors: Bool = false, desiredKeys: [String]? = nil) async -> PagedResult {
        var result = PagedResult()
        var operation = QueryOperation(query: query)
        while true {
            operation.resultsLimit = pageSize
            operation.desiredKeys = desiredKeys
            let page = await runQueryPage(operation, on: database)
            result.records += page.records
            result.pageSizes.append(page.records.count)
            if let error = page.error {
                result.error = error
                return result
            }
            guard var cursor = page.cursor else { return result }
            if serializeCursors {
                do {
                    cursor = try QueryOperation.Cursor(serialized: cursor.serialized)
                } catch {
                    result.error = error
                    return result
                }
            }
            operation = QueryOperation(cursor: cursor)
            if result.pageSizes.count > 5_000 {
                result.error = StratusError(.internalError, "paging does not end after \(result.pageSizes.count) pages")
                return result
            }
        }
    }

    // MARK: - Randomized

    /// The data set seeds; each query `q` of data set seed `s` is generated from `s`, `q` alone,
    /// so a failure message's seed and query number reproduce it.
    static let randomSeeds: [UInt64] = [0x5EED_0001, 0x5EED_0002, 0x5EED_0003, 0x5EED_0004, 0x5EED_0005]
    static let randomQueriesPerDataset = 200

    /// A schema that indexes most fields and has a compound index; `code` holds strings and
    /// numbers, so it stays undeclared (a declared field holds its declared type only); `num`
    /// holds integers and doubles, so it is a `NUMBER` field, which takes both.
    static func randomSchema(_ recordType: String) -> RecordTypeSchema {
        var schema = RecordTypeSchema(recordType: recordType)
        schema.addField("name", type: .string, indexes: [.queryable, .sortable, .searchable])
        schema.addField("title", type: .string, indexes: [.queryable, .searchable])
        schema.fields.append(.init("num", type: .double, indexes: [.queryable, .sortable], isNumber: true))
        schema.addField("count", type: .int64, indexes: [.queryable, .sortable])
        schema.addField("price", type: .double, indexes: [.sortable])
        schema.addField("due", type: .timestamp, indexes: [.queryable, .sortable])
        schema.addField("owner", type: .reference, indexes: [.queryable])
        schema.addField("flag", type: .int64, indexes: [.queryable])
        schema.addField("tags", type: .stringList, indexes: [.queryable, .searchable])
        schema.addField("place", type: .location, indexes: [.queryable])
        schema.compoundIndexes = [
            .init(equalityFields: ["flag", "owner"], sortField: "due"),
            .init(equalityFields: ["name"], sortField: "count"),
        ]
        return schema
    }

    static func randomizedQueries(_ env: Environment, indexed: Bool) async throws {
        let container = env.container()
        let database = container.publicCloudDatabase
        for (datasetIndex, seed) in randomSeeds.enumerated() {
            let recordType = "Thing\(datasetIndex)"
            var generator = QueryLanguageGenerator(seed: seed, recordType: recordType)
            let records = generator.records(count: 40 + 20 * datasetIndex)
            // The schema comes before the records for some data sets and after them (so that
            // its indexes and words are built over existing records) for others.
            let schemaFirst = datasetIndex % 2 == 0
            if indexed && schemaFirst { try await container.saveSchema(randomSchema(recordType)) }
            let third = records.count / 3
            try await TestDatabase.seed(Array(records[..<third]), in: database)
            try await TestDatabase.seed(Array(records[third..<(2 * third)]), in: database)
            let saved = try await TestDatabase.seed(Array(records[(2 * third)...]), in: database)
            if indexed && !schemaFirst { try await container.saveSchema(randomSchema(recordType)) }
            // Change and delete a few records, so indexes and words follow updates.
            for record in saved.prefix(4) { generator.change(record) }
            try await TestDatabase.seed(Array(saved.prefix(4)), in: database)
            let deleted = Array(records.suffix(3).map(\.recordID))
            _ = try await database.modifyRecords(saving: [], deleting: deleted)

            let all = try await TestDatabase.queryAll(Query(recordType: recordType), in: database)
            #expect(all.count == records.count - deleted.count, "seed 0x\(String(seed, radix: 16)): every saved record is stored")
            let searchable = indexed ? randomSchema(recordType).searchableFields : nil
            var failures = 0
            var selective = 0
            for q in 0..<randomQueriesPerDataset {
                var queryGenerator = generator.forQuery(q, over: all)
                let spec = queryGenerator.querySpec()
                let context = "seed 0x\(String(seed, radix: 16)) query #\(q) (\(indexed ? "indexed" : "no schema")): \(spec)"
                if !checkRoundTrip(spec.predicate, context) { failures += 1 }
                let query = Query(recordType: recordType, predicate: spec.predicate)
                query.sortDescriptors = spec.sorts
                let expected = TestDatabase.names(try QueryEvaluator.evaluate(query, over: all, searchableFields: searchable))
                if !expected.isEmpty && expected.count < all.count { selective += 1 }
                let pageSize = expected.count > 30 && spec.pageSize < 4 ? 7 : spec.pageSize
                let paged = await pageAll(query, database, pageSize: pageSize, serializeCursors: spec.serializeCursors, desiredKeys: spec.desiredKeys)
                if indexed, let error = paged.error as? StratusError, error.code == .invalidArguments,
                   error.message.contains("works on lists only") || error.message.contains("work on lists only") {
                    // With a schema, a list form on a field it declares scalar is CloudKit's
                    // string CONTAINS, which the engine must reject; without one it matches nothing.
                    #expect(Self.usesListFormOnScalar(spec.predicate, randomSchema(recordType)), "\(context): rejected although every list form names a list field: \(error)")
                    continue
                }
                if let error = paged.error {
                    failures += 1
                    Issue.record("\(context): the query failed: \(error)")
                } else if paged.names != expected {
                    failures += 1
                    expectSameOrder(paged.names, expected, "\(context), page size \(pageSize)")
                } else {
                    let full = paged.pageSizes.dropLast().allSatisfy { $0 == pageSize }
                    let last = paged.pageSizes.last ?? 0
                    if !full || (paged.pageSizes.count > 1 && last == 0) {
                        failures += 1
                        Issue.record("\(context): pages of \(pageSize) came as \(paged.pageSizes)")
                    }
                    if let keys = spec.desiredKeys, !paged.records.allSatisfy({ Set($0.allKeys()).isSubset(of: keys) }) {
                        failures += 1
                        Issue.record("\(context): records carry keys beyond the desired keys \(keys)")
                    }
                }
                if failures >= 8 {
                    Issue.record("seed 0x\(String(seed, radix: 16)): stopping this data set after \(failures) failures")
                    break
                }
            }
            // The generator must keep producing queries that select some records but not all.
            #expect(failures >= 8 || selective * 2 >= randomQueriesPerDataset,
                    "seed 0x\(String(seed, radix: 16)): only \(selective) of \(randomQueriesPerDataset) queries match some but not all records")
        }
    }

    /// Pages through random queries while records are inserted, changed and deleted between
    /// pages: records nobody touched must all come back, once each, in the query's order.
    static func pagingWhileRecordsChange(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        let seed: UInt64 = 0x5EED_C0DE
        let recordType = "Moving"
        var generator = QueryLanguageGenerator(seed: seed, recordType: recordType)
        try await TestDatabase.seed(generator.records(count: 60), in: database)
        for q in 0..<40 {
            let all = try await TestDatabase.queryAll(Query(recordType: recordType), in: database)
            var queryGenerator = generator.forQuery(q, over: all)
            let spec = queryGenerator.querySpec()
            let query = Query(recordType: recordType, predicate: spec.predicate)
            query.sortDescriptors = spec.sorts
            let before = TestDatabase.names(try QueryEvaluator.evaluate(query, over: all))
            let context = "seed 0x\(String(seed, radix: 16)) query #\(q): \(spec)"
            let pageSize = queryGenerator.pick([2, 3, 5, 8])
            var touched: Set<String> = []
            var names: [String] = []
            var operation = QueryOperation(query: query)
            var pages = 0
            while true {
                operation.resultsLimit = pageSize
                let page = await runQueryPage(operation, on: database)
                if let error = page.error {
                    Issue.record("\(context): \(error)")
                    break
                }
                names += TestDatabase.names(page.records)
                pages += 1
                guard let cursor = page.cursor, pages < 500 else { break }
                // Between pages: insert, change or delete a record.
                let current = try await TestDatabase.queryAll(Query(recordType: recordType), in: database)
                switch queryGenerator.int(0...2) {
                case 0:
                    let name = "new-\(q)-\(pages)"
                    touched.insert(name)
                    try await TestDatabase.seed([makeRecord(recordType, name, queryGenerator.fields())], in: database)
                case 1 where !current.isEmpty:
                    let victim = queryGenerator.pick(current)
                    touched.insert(victim.recordID.recordName)
                    for (key, value) in queryGenerator.fields() { victim.setFieldValue(value, forKey: key) }
                    try await TestDatabase.seed([victim], in: database)
                default:
                    guard let victim = current.isEmpty ? nil : queryGenerator.pick(current) else { break }
                    touched.insert(victim.recordID.recordName)
                    _ = try await database.modifyRecords(saving: [], deleting: [victim.recordID])
                }
                operation = QueryOperation(cursor: try QueryOperation.Cursor(serialized: cursor.serialized))
            }
            // A changed record may move past the cursor and come again; an untouched one may not.
            let stable = before.filter { !touched.contains($0) }
            let returnedStable = names.filter { !touched.contains($0) }
            expectSameOrder(returnedStable, stable, "\(context), page size \(pageSize), untouched records")
        }
    }

    /// Whether the predicate prints to a format that parses back to it; records an issue if not.
    static func checkRoundTrip(_ predicate: QueryPredicate, _ context: String) -> Bool {
        do {
            let parsed = try QueryPredicate(format: predicate.description)
            if parsed != predicate {
                Issue.record("\(context): printed as \(predicate.description), which parses to \(parsed)")
                return false
            }
            return true
        } catch {
            Issue.record("\(context): printed as \(predicate.description), which does not parse: \(error)")
            return false
        }
    }

    // MARK: - Apple's CKQuery examples

    static let berlin = Location(latitude: 52.5200, longitude: 13.4050)
    static let potsdam = Location(latitude: 52.3906, longitude: 13.0645)
    static let hamburg = Location(latitude: 53.5511, longitude: 9.9937)
    static let paris = Location(latitude: 48.8566, longitude: 2.3522)

    /// Seven people, with the fields Apple's examples use. `eve` has a DOUBLE age and `zed` a
    /// STRING one; `bob` has no location, `eve` no colors and no start date.
    static func people(now: Date) -> [Record] {
        let day = 86_400.0
        let base = (now.timeIntervalSinceReferenceDate / day).rounded(.down) * day - 15 * day
        func date(_ days: Double) -> FieldValue { .date(Date(timeIntervalSinceReferenceDate: base + days * day)) }
        func owner(_ name: String) -> FieldValue { .reference(reference(name)) }
        return [
            makeRecord("Person", "jim", [
                "firstName": .string("Jim"), "name": .string("Jim Smith"), "age": .int64(29),
                "favoriteColors": .stringList(["red", "blue"]), "favoriteColor": .string("red"), "location": .location(berlin),
                "startDate": date(10), "ownerReference": owner("owner-a"), "rating": .int64(5), "bio": .string("Bob Smith's brother"),
                "flagged": .int64(1),
            ]),
            makeRecord("Person", "jimmy", [
                "firstName": .string("jim"), "name": .string("Jimmy Page"), "age": .int64(20),
                "favoriteColors": .stringList(["green"]), "favoriteColor": .string("Green"), "location": .location(potsdam),
                "startDate": date(2), "ownerReference": owner("owner-b"), "rating": .int64(3), "bio": .string("plays with bob"),
                "flagged": .int64(0),
            ]),
            makeRecord("Person", "tom", [
                "firstName": .string("Tom"), "name": .string("tom jimson"), "age": .int64(30),
                "favoriteColors": .stringList(["Red", "yellow"]), "favoriteColor": .string("blue"), "location": .location(hamburg),
                "startDate": date(20), "ownerReference": owner("owner-a"), "rating": .int64(2), "bio": .string("no words of note"),
                "motto": .string("It's \"fine\""), "flagged": .int64(1),
            ]),
            makeRecord("Person", "ann", [
                "firstName": .string("Ann"), "name": .string("Ann Smith"), "age": .int64(31),
                "favoriteColors": .stringList([]), "favoriteColor": .string("RED"), "location": .location(paris),
                "startDate": date(5), "ownerReference": owner("owner-c"), "rating": .int64(4), "bio": .string("Smíth family"),
            ]),
            makeRecord("Person", "bob", [
                "firstName": .string("Bob"), "name": .string("Bob"), "age": .int64(19),
                "favoriteColors": .stringList(["rose", "green"]), "favoriteColor": .string("green"),
                "startDate": date(1), "rating": .int64(1), "bio": .string("the and a"),
            ]),
            makeRecord("Person", "eve", [
                "firstName": .string("Eve"), "name": .string("JIM"), "age": .double(21.5), "location": .location(berlin),
                "ownerReference": owner("owner-b"), "rating": .int64(3), "bio": .string("BOB smith"),
            ]),
            makeRecord("Person", "zed", [
                "firstName": .string("Zed"), "name": .string("Zed"), "age": .string("29"),
                "favoriteColors": .stringList(["red"]), "favoriteColor": .string("purple"), "location": .location(potsdam),
                "startDate": date(30), "ownerReference": owner("owner-c"), "rating": .int64(5),
            ]),
        ]
    }

    /// One documented form, its arguments, and the record names it returns (in record-name order).
    struct DocumentedExample {
        let format: String
        let arguments: [any Sendable]
        let expected: [String]
        init(_ format: String, _ arguments: [any Sendable], _ expected: [String]) {
            self.format = format
            self.arguments = arguments
            self.expected = expected
        }
        init(_ format: String, _ expected: [String]) { self.init(format, [], expected) }
    }

    static func documentationExamples(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        let now = Date()
        let people = people(now: now)
        try await TestDatabase.seed(people, in: database)
        let stored = try await TestDatabase.queryAll(Query(recordType: "Person"), in: database)
        let earliest = try #require(stored.compactMap(\.creationDate).min())
        let day = 86_400.0
        let base = (now.timeIntervalSinceReferenceDate / day).rounded(.down) * day - 15 * day
        func date(_ days: Double) -> Date { Date(timeIntervalSinceReferenceDate: base + days * day) }
        let ownerC = makeRecord("Owner", "owner-c")
        let everyone = ["ann", "bob", "eve", "jim", "jimmy", "tom", "zed"]

        let examples: [DocumentedExample] = [
            // Lists (favoriteColors): elements compare exactly.
            DocumentedExample("ANY favoriteColors = 'red'", ["jim", "zed"]),
            DocumentedExample("ANY favoriteColors == %@", ["red"], ["jim", "zed"]),
            DocumentedExample("favoriteColors CONTAINS 'red'", ["jim", "zed"]),
            DocumentedExample("'red' IN favoriteColors", ["jim", "zed"]),
            DocumentedExample("%K CONTAINS %@", ["favoriteColors", "red"], ["jim", "zed"]),
            DocumentedExample("ANY favoriteColors BEGINSWITH 'r'", ["bob", "jim", "zed"]),
            DocumentedExample("ANY favoriteColors IN {'yellow', 'green'}", ["bob", "jimmy", "tom"]),
            DocumentedExample("ANY favoriteColors IN %@", [["rose", "yellow"]], ["bob", "tom"]),
            DocumentedExample("favoriteColors CONTAINS %@ AND age > 20", ["red"], ["jim"]),
            // A field in a set of values: string equality ignores case.
            DocumentedExample("ANY {'red', 'green'} = favoriteColor", ["ann", "bob", "jim", "jimmy"]),
            DocumentedExample("favoriteColor IN {'red', 'green'}", ["ann", "bob", "jim", "jimmy"]),
            DocumentedExample("favoriteColor IN %@", [["red", "green"]], ["ann", "bob", "jim", "jimmy"]),
            // An empty list matches nothing, and its NOT the records that hold the field (tom
            // alone has a motto), as any other NOT: a keep-list left empty deletes no record
            // that lacks the field.
            DocumentedExample("motto IN {}", []),
            DocumentedExample("NOT motto IN {}", ["tom"]),
            DocumentedExample("NOT motto IN %@", [[String]()], ["tom"]),
            // Tokenized search over the string fields: any word, all words, stop words, diacritics.
            DocumentedExample("self CONTAINS 'bob smith'", ["ann", "bob", "eve", "jim", "jimmy"]),
            DocumentedExample("self CONTAINS 'bob' AND self CONTAINS 'smith'", ["eve", "jim"]),
            DocumentedExample("ALL tokenize(%@, 'Cdl') IN allTokens", ["bob smith"], ["eve", "jim"]),
            DocumentedExample("allTokens TOKENMATCHES[cdl] %@", ["bob smith"], ["eve", "jim"]),
            DocumentedExample("self CONTAINS 'SMÍTH'", ["ann", "eve", "jim"]),
            DocumentedExample("self CONTAINS 'the'", []),
            DocumentedExample("self CONTAINS %@ AND rating >= 3", ["purple"], ["zed"]),
            // Location.
            DocumentedExample("distanceToLocation:fromLocation:(%K,%@) < %f", ["location", berlin, 100.0], ["eve", "jim", "jimmy", "zed"]),
            DocumentedExample("distanceToLocation:fromLocation:(location, %@) < %f", [berlin, 300.0], ["eve", "jim", "jimmy", "tom", "zed"]),
            DocumentedExample("distanceToLocation:fromLocation:(location, %@) > %d", [berlin, 500], ["ann"]),
            DocumentedExample("distanceToLocation:fromLocation:(location, %@) <= 0.5", [potsdam], ["jimmy", "zed"]),
            // Comparisons; operands on either side; aliases.
            DocumentedExample("firstName = 'Jim'", ["jim", "jimmy"]),
            DocumentedExample("firstName == %@", ["Jim"], ["jim", "jimmy"]),
            DocumentedExample("%K == %@", ["firstName", "Jim"], ["jim", "jimmy"]),
            DocumentedExample("firstName == %s", ["bob"], ["bob"]),
            DocumentedExample("name == \"jim\"", ["eve"]),
            DocumentedExample("29 = age", ["jim"]),
            DocumentedExample("age >= 21", ["ann", "eve", "jim", "tom"]),
            DocumentedExample("age > 20 && rating < 5", ["ann", "eve", "tom"]),
            DocumentedExample("age <> 29", ["ann", "bob", "eve", "jimmy", "tom"]),
            DocumentedExample("age =< %d AND age => %i", [29, 20], ["eve", "jim", "jimmy"]),
            DocumentedExample("rating == %d", [5], ["jim", "zed"]),
            DocumentedExample("rating > %f", [3.5], ["ann", "jim", "zed"]),
            DocumentedExample("21.5 == age", ["eve"]),
            DocumentedExample("age BETWEEN {20, 30}", ["eve", "jim", "jimmy", "tom"]),
            DocumentedExample("age BETWEEN %@", [[20, 30]], ["eve", "jim", "jimmy", "tom"]),
            DocumentedExample("startDate > %@", [date(9)], ["jim", "tom", "zed"]),
            DocumentedExample("startDate > now", ["tom", "zed"]),
            DocumentedExample("startDate BETWEEN %@", [[date(1), date(5)]], ["ann", "bob", "jimmy"]),
            DocumentedExample("name BEGINSWITH 'Jim'", ["jim", "jimmy"]),
            DocumentedExample("name BEGINSWITH %@", ["jim"], []),
            DocumentedExample("motto == 'it\\'s \"FINE\"'", ["tom"]),
            DocumentedExample("motto == \"IT'S \\\"fine\\\"\"", ["tom"]),
            DocumentedExample("flagged == true", ["jim", "tom"]),
            DocumentedExample("flagged == false", ["jimmy"]),
            DocumentedExample("flagged == %@", [true], ["jim", "tom"]),
            DocumentedExample("TRUEPREDICATE", everyone),
            DocumentedExample("FALSEPREDICATE", []),
            // References: by Reference (any action), Record.ID, Record; the record's own ID.
            DocumentedExample("ownerReference == %@", [reference("owner-a", .deleteSelf)], ["jim", "tom"]),
            DocumentedExample("ownerReference == %@", [Record.ID(recordName: "owner-b")], ["eve", "jimmy"]),
            DocumentedExample("ownerReference == %@", [ownerC], ["ann", "zed"]),
            DocumentedExample("ownerReference != %@", [Record.ID(recordName: "owner-b")], ["ann", "jim", "tom", "zed"]),
            DocumentedExample("ownerReference IN %@", [[Record.ID(recordName: "owner-a"), Record.ID(recordName: "owner-c")]], ["ann", "jim", "tom", "zed"]),
            DocumentedExample("recordID == %@", [Record.ID(recordName: "tom")], ["tom"]),
            DocumentedExample("recordID IN %@", [[Record.ID(recordName: "jim"), Record.ID(recordName: "ann")]], ["ann", "jim"]),
            DocumentedExample("creationDate > %@ AND rating >= 3", [earliest.addingTimeInterval(-1)], ["ann", "eve", "jim", "jimmy", "zed"]),
            DocumentedExample("creationDate <= now", everyone),
            // NOT over one comparison: the field must hold a value of the compared type.
            DocumentedExample("NOT (favoriteColor == 'red')", ["bob", "jimmy", "tom", "zed"]),
            DocumentedExample("NOT favoriteColor IN {'red'}", ["bob", "jimmy", "tom", "zed"]),
            DocumentedExample("!(name BEGINSWITH 'J')", ["ann", "bob", "tom", "zed"]),
            DocumentedExample("NOT age < 21", ["ann", "eve", "jim", "tom"]),
            DocumentedExample("NOT favoriteColors CONTAINS 'red' AND NOT 'green' IN favoriteColors", ["ann", "tom"]),
        ]
        for example in examples {
            let context = "\(example.format) \(example.arguments)"
            let predicate: QueryPredicate
            do {
                predicate = try QueryPredicate(format: example.format, argumentArray: example.arguments)
            } catch {
                Issue.record("\(context) does not parse: \(error)")
                continue
            }
            _ = checkRoundTrip(predicate, context)
            let query = Query(recordType: "Person", predicate: predicate)
            let paged = await pageAll(query, database, pageSize: 2)
            if let error = paged.error {
                Issue.record("\(context) failed: \(error)")
                continue
            }
            #expect(paged.names == example.expected, "\(context)")
            // The evaluator agrees with the hand-written answer, so it can be trusted elsewhere.
            #expect(TestDatabase.names(try QueryEvaluator.evaluate(query, over: stored)) == example.expected, "evaluator: \(context)")
        }
    }

    static func handSortedExamples(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        let people = people(now: Date())
        try await TestDatabase.seed(people, in: database)
        let stored = try await TestDatabase.queryAll(Query(recordType: "Person"), in: database)
        let sorts: [(String, [RecordSortDescriptor], [String])] = [
            ("age >= 20", [RecordSortDescriptor(key: "age", ascending: false)], ["ann", "tom", "jim", "eve", "jimmy"]),
            // Missing first ascending; strings by their bytes (uppercase before lowercase).
            ("TRUEPREDICATE", [RecordSortDescriptor(key: "favoriteColor")], ["eve", "jimmy", "ann", "tom", "bob", "zed", "jim"]),
            ("TRUEPREDICATE", [RecordSortDescriptor(key: "favoriteColor", ascending: false)], ["jim", "zed", "bob", "tom", "ann", "jimmy", "eve"]),
            ("TRUEPREDICATE", [RecordSortDescriptor(key: "rating", ascending: false), RecordSortDescriptor(key: "name")],
             ["jim", "zed", "ann", "eve", "jimmy", "tom", "bob"]),
            ("TRUEPREDICATE", [RecordSortDescriptor(distanceOf: "location", from: berlin)], ["bob", "eve", "jim", "jimmy", "zed", "tom", "ann"]),
            ("TRUEPREDICATE", [RecordSortDescriptor(distanceOf: "location", from: berlin, ascending: false)], ["ann", "tom", "zed", "jimmy", "jim", "eve", "bob"]),
            ("rating >= 3", [RecordSortDescriptor(key: "rating"), RecordSortDescriptor(distanceOf: "location", from: paris, ascending: false)],
             ["eve", "jimmy", "ann", "jim", "zed"]),
            ("TRUEPREDICATE", [RecordSortDescriptor(key: "recordName", ascending: false)], ["zed", "tom", "jimmy", "jim", "eve", "bob", "ann"]),
            // Ties on every key are broken by record name in the direction of the last key.
            ("TRUEPREDICATE", [RecordSortDescriptor(key: "ownerReference"), RecordSortDescriptor(key: "rating", ascending: false)],
             ["bob", "jim", "tom", "jimmy", "eve", "zed", "ann"]),
        ]
        for (format, descriptors, expected) in sorts {
            let query = try Query(recordType: "Person", format: format)
            query.sortDescriptors = descriptors
            for pageSize in [1, 3, 400] {
                let paged = await pageAll(query, database, pageSize: pageSize, serializeCursors: pageSize == 3)
                if let error = paged.error {
                    Issue.record("\(query) failed: \(error)")
                    continue
                }
                #expect(paged.names == expected, "\(query), pages of \(pageSize)")
            }
            #expect(TestDatabase.names(try QueryEvaluator.evaluate(query, over: stored)) == expected, "evaluator: \(query)")
        }
    }

    // MARK: - Tricky values

    static func trickyValues(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        let doubles: [Double] = [2.0, 0.1, .leastNonzeroMagnitude, .greatestFiniteMagnitude, -12_345.678_9, -0.0, 1e-300, 0.30000000000000004]
        let integers: [Int64] = [.max, .min, 0, -1, 2, 9_007_199_254_740_993]
        var records: [Record] = []
        for (i, text) in trickyStrings.enumerated() { records.append(makeRecord("Tricky", "s-\(i)", ["s": .string(text)])) }
        for (i, date) in preciseDates.enumerated() { records.append(makeRecord("Tricky", "d-\(i)", ["d": .date(date)])) }
        for (i, number) in doubles.enumerated() { records.append(makeRecord("Tricky", "x-\(i)", ["x": .double(number)])) }
        for (i, number) in integers.enumerated() { records.append(makeRecord("Tricky", "n-\(i)", ["n": .int64(number)])) }
        try await TestDatabase.seed(records, in: database)
        let all = try await TestDatabase.queryAll(Query(recordType: "Tricky"), in: database)
        #expect(all.count == records.count)

        var checks: [(QueryPredicate, mustInclude: String?)] = []
        for (i, text) in trickyStrings.enumerated() {
            checks.append((.condition(.compare(.field("s"), .equal, .string(text))), "s-\(i)"))
            // Equality compares lowercase forms: "ß" and its uppercase "SS" differ.
            let caseRoundTrips = QueryRules.equalityKey(text.uppercased()) == QueryRules.equalityKey(text)
            checks.append((.condition(.compare(.field("s"), .equal, .string(text.uppercased()))), caseRoundTrips ? "s-\(i)" : nil))
            checks.append((.condition(.compare(.field("s"), .less, .string(text))), nil))
            checks.append((.condition(.compare(.field("s"), .greaterOrEqual, .string(text))), "s-\(i)"))
            checks.append((.condition(.in(.field("s"), [.string(text), .string("plain ascii")])), "s-\(i)"))
            let scalars = Array(text.unicodeScalars)
            for length in [1, 2, 3, 5, 8, 13, 21, scalars.count] where length <= scalars.count {
                let prefix = String(String.UnicodeScalarView(scalars.prefix(length)))
                checks.append((.condition(.beginsWith(.field("s"), prefix)), "s-\(i)"))
            }
        }
        for (i, date) in preciseDates.enumerated() {
            checks.append((.condition(.compare(.field("d"), .equal, .date(date))), "d-\(i)"))
            checks.append((.condition(.compare(.field("d"), .less, .date(date))), nil))
            checks.append((.condition(.between(.field("d"), .date(date), .date(date))), "d-\(i)"))
        }
        for (i, number) in doubles.enumerated() {
            checks.append((.condition(.compare(.field("x"), .equal, .double(number))), "x-\(i)"))
            checks.append((.condition(.compare(.field("x"), .greater, .double(number))), nil))
        }
        for (i, number) in integers.enumerated() {
            checks.append((.condition(.compare(.field("n"), .equal, .int64(number))), "n-\(i)"))
            checks.append((.condition(.compare(.field("n"), .lessOrEqual, .int64(number))), "n-\(i)"))
            checks.append((.condition(.in(.field("n"), [.int64(number)])), "n-\(i)"))
        }
        for (predicate, mustInclude) in checks {
            for sort in [[], [RecordSortDescriptor(key: "s", ascending: false)], [RecordSortDescriptor(key: "x")], [RecordSortDescriptor(key: "n", ascending: false)]] {
                let query = Query(recordType: "Tricky", predicate: predicate)
                query.sortDescriptors = sort
                let expected = TestDatabase.names(try QueryEvaluator.evaluate(query, over: all))
                let paged = await pageAll(query, database, pageSize: 3)
                if let error = paged.error {
                    Issue.record("\(query) failed: \(error)")
                    continue
                }
                expectSameOrder(paged.names, expected, "\(query)")
                if let mustInclude {
                    #expect(paged.names.contains(mustInclude), "\(query) finds \(mustInclude)")
                }
            }
        }
    }

    // MARK: - Rejected forms

    static func rejectedForms(_ env: Environment) async throws {
        let container = env.container()
        let database = container.publicCloudDatabase
        try await TestDatabase.seed(people(now: Date()), in: database)

        // Format strings CloudKit rejects never become a query: invalidArguments with a position.
        let formats: [(String, [any Sendable])] = [
            ("age > 20 OR rating > 3", []), ("age > 20 || rating > 3", []), ("ALL favoriteColors == 'red'", []),
            ("name ENDSWITH 'th'", []), ("name LIKE 'J*'", []), ("name MATCHES 'J.*'", []), ("name CONTAINS[c] 'jim'", []),
            ("ownerReference.name == 'x'", []), ("NOT (age > 20 AND rating > 3)", []), ("NOT self CONTAINS 'bob'", []),
            ("NOT distanceToLocation:fromLocation:(location, %@) < 5", [berlin]), ("NOT age BETWEEN {1, 2}", []),
            ("name == nil", []), ("SUBQUERY(favoriteColors, $c, $c == 'red').@count > 0", []), ("favoriteColors.@count > 1", []),
            ("age + 1 > 20", []),
        ]
        for (format, arguments) in formats {
            let error = await caughtError { Query(recordType: "Person", predicate: try QueryPredicate(format: format, argumentArray: arguments)) }
            let stratus = stratusError(error)
            #expect(stratus?.code == .invalidArguments, "\(format) is rejected")
            #expect(stratus?.line != nil && stratus?.column != nil, "\(format): the error has a position")
            #expect(stratus?.message.components(separatedBy: "\n").last?.hasSuffix("^") == true, "\(format): a caret under the position")
        }

        // Predicates that parse (or are built as values) but that no query can run fail the
        // operation with invalidArguments and match nothing.
        let someCondition = QueryPredicate.condition(.compare(.field("age"), .greater, .int64(20)))
        let rejectedPredicates: [(String, QueryPredicate)] = [
            ("NOT over AND", .not(.and([someCondition, .condition(.compare(.field("rating"), .less, .int64(3)))]))),
            ("NOT over NOT", .not(.not(someCondition))),
            ("NOT over TRUEPREDICATE", .not(.all)),
            ("ordering references", try QueryPredicate(format: "ownerReference < %@", Record.ID(recordName: "owner-b"))),
            ("ordering record IDs", try QueryPredicate(format: "recordID > %@", Record.ID(recordName: "jim"))),
            ("comparing a location", try QueryPredicate(format: "location == %@", berlin)),
            ("comparing bytes", try QueryPredicate(format: "bio == %@", Data([1, 2, 3]))),
            ("a set of mixed types", try QueryPredicate(format: "age IN {20, 'twenty'}")),
            ("a list set of mixed types", try QueryPredicate(format: "ANY favoriteColors IN {'red', 2}")),
            ("a location in a list", try QueryPredicate(format: "favoriteColors CONTAINS %@", berlin)),
            ("an infinite number", try QueryPredicate(format: "age < CAST(\"inf\", \"NSNumber\")")),
            ("not a number", try QueryPredicate(format: "age == %@", Double.nan)),
            ("an infinite distance", .condition(.distance(.field("location"), from: berlin, .less, kilometers: .infinity))),
            ("a distance from no place on Earth", .condition(.distance(.field("location"), from: Location(latitude: 91, longitude: 0), .less, kilometers: 10))),
            ("creationDate with a string", try QueryPredicate(format: "creationDate > %@", "yesterday")),
            ("recordID with a number", try QueryPredicate(format: "recordID == 5")),
            ("a bad field name", .condition(.compare(.field("bad name"), .equal, .int64(1)))),
            ("a field name starting with _", .condition(.compare(.field("_age"), .equal, .int64(1)))),
            ("more conditions than a format may hold, built in code",
             .and((0...QueryPredicate.maximumConditions + 1).map { .condition(.compare(.field("age"), .notEqual, .int64(Int64($0)))) })),
        ]
        for (label, predicate) in rejectedPredicates {
            await expectRejectedByOperation(label, predicate, database)
        }
        // As many as a format may hold run.
        let most = QueryPredicate.and((1...QueryPredicate.maximumConditions).map { .condition(.compare(.field("age"), .notEqual, .int64(Int64(1_000 + $0)))) })
        let oneCondition = await pageAll(Query(recordType: "Person", predicate: .condition(.compare(.field("age"), .notEqual, .int64(1_001)))), database, pageSize: 100)
        let mostConditions = await pageAll(Query(recordType: "Person", predicate: most), database, pageSize: 100)
        #expect(mostConditions.error == nil && mostConditions.names == oneCondition.names && !oneCondition.names.isEmpty,
                "\(String(describing: mostConditions.error)): \(mostConditions.names) against \(oneCondition.names)")

        // Bad record types and sort keys.
        let badQueries: [(String, Query)] = [
            ("a bad record type", Query(recordType: "bad type")),
            ("a sort key path", { let q = Query(recordType: "Person"); q.sortDescriptors = [RecordSortDescriptor(key: "owner.name")]; return q }()),
            ("a distance sort on a system field", {
                let q = Query(recordType: "Person"); q.sortDescriptors = [RecordSortDescriptor(distanceOf: "creationDate", from: berlin)]; return q
            }()),
        ]
        for (label, query) in badQueries {
            let page = await runQueryPage(QueryOperation(query: query), on: database)
            #expect(stratusError(page.error)?.code == .invalidArguments, "\(label) fails with invalidArguments, got \(String(describing: page.error))")
        }
    }

    /// Runs `predicate` through ``QueryOperation`` and the convenience API; both must fail with
    /// invalidArguments and match nothing.
    static func expectRejectedByOperation(_ label: String, _ predicate: QueryPredicate, _ database: Database) async {
        let operation = QueryOperation(query: Query(recordType: "Person", predicate: predicate))
        let page = await runQueryPage(operation, on: database)
        #expect(stratusError(page.error)?.code == .invalidArguments,
                "\(label): \(predicate) fails with invalidArguments, got \(page.error.map { "\($0)" } ?? "no error") and \(TestDatabase.names(page.records))")
        #expect(page.records.isEmpty, "\(label): no record matched")
        let viaConvenience = await caughtError { try await database.records(matching: Query(recordType: "Person", predicate: predicate)) }
        #expect(stratusError(viaConvenience)?.code == .invalidArguments, "\(label): records(matching:) throws invalidArguments")
    }

    /// The parser and the builder refuse these negations; a predicate built from the enum cases
    /// must not slip past them into a query.
    static func rejectedNegations(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        try await TestDatabase.seed(people(now: Date()), in: database)
        let negations: [(String, QueryPredicate)] = [
            ("NOT over self CONTAINS", .not(.condition(.tokens(["bob"], allTokens: false)))),
            ("NOT over distance", .not(.condition(.distance(.field("location"), from: berlin, .less, kilometers: 100)))),
            ("NOT over BETWEEN", .not(.condition(.between(.field("age"), .int64(20), .int64(30))))),
        ]
        for (label, predicate) in negations {
            await expectRejectedByOperation(label, predicate, database)
        }
    }

    static func stringContainsRejected(_ env: Environment) async throws {
        let container = env.container()
        let database = container.publicCloudDatabase
        try await TestDatabase.seed(people(now: Date()), in: database)
        // With a schema that declares `name` a STRING, `name CONTAINS` (string CONTAINS, which
        // CloudKit rejects) cannot mean a list search.
        var schema = RecordTypeSchema(recordType: "Person")
        schema.addField("name", type: .string, indexes: [.queryable])
        schema.addField("favoriteColors", type: .stringList, indexes: [.queryable])
        try await container.saveSchema(schema)
        let stringContains = await runQueryPage(QueryOperation(query: try Query(recordType: "Person", format: "name CONTAINS 'Jim'")), on: database)
        #expect(stratusError(stringContains.error)?.code == .invalidArguments,
                "string CONTAINS on a field the schema declares STRING is invalidArguments, got \(String(describing: stringContains.error)) and \(TestDatabase.names(stringContains.records))")
        let listContains = await runQueryPage(QueryOperation(query: try Query(recordType: "Person", format: "favoriteColors CONTAINS 'red'")), on: database)
        #expect(listContains.error == nil)
        #expect(TestDatabase.names(listContains.records) == ["jim", "zed"])
    }
}

// MARK: - Random generation


/// One random query: predicate, sort order and how to page through it.
struct RandomQuerySpec: CustomStringConvertible {
    var predicate: QueryPredicate
    var sorts: [RecordSortDescriptor]
    var pageSize: Int
    var serializeCursors: Bool
    var desiredKeys: [String]?

    var description: String {
        var text = "predicate: \(predicate)"
        if !sorts.isEmpty {
            text += "; sorted by " + sorts.map { ($0.distanceFrom.map { "distance of \($0.latitude),\($0.longitude) to " } ?? "") + $0.description }.joined(separator: ", ")
        }
        text += "; page size \(pageSize)"
        if let desiredKeys { text += "; desired keys \(desiredKeys)" }
        return text
    }
}

/// Generates records with every queryable type (some fields missing, mixed-case strings,
/// diacritics, stop words, fields holding two types) and random queries over them.
struct QueryLanguageGenerator {
    var rng: SeededGenerator
    let recordType: String
    /// Phrases the data set's strings are drawn from; queries use them and their case variants.
    var phrases: [String] = []
    var recordNames: [String] = []
    var stored: [Record] = []

    static let words = [
        "apple", "Apple", "APPLE", "äpfel", "Äpfel", "apfel", "banana", "Banana", "café", "Cafe", "CAFÉ", "cafe\u{301}",
        "the", "and", "a", "zeta", "Zeta", "éclair", "Éclair", "naïve", "naive", "straße", "STRASSE", "日本", "ωmega", "Ωmega",
        "x1", "X1", "bob", "Bob's", "smith", "Smith-Jones", "10", "9", "",
    ]
    static let tagPool = ["red", "Red", "green", "blue", "Blue sky", "the", "café", "cafe", "rot", "ré"]
    static let owners = ["owner-1", "owner-2", "Owner-3", "t-0-007", "u-1-010"]
    static let doubles: [Double] = [-2.5, -1.0, 0.0, 0.1, 0.5, 1.5, 2.0, 3.25, 9.75]
    static let baseDate = 700_000_000.0
    static let points: [Location] = [
        Location(latitude: 52.5200, longitude: 13.4050), Location(latitude: 52.3906, longitude: 13.0645),
        Location(latitude: 53.5511, longitude: 9.9937), Location(latitude: 48.8566, longitude: 2.3522),
        Location(latitude: -33.8688, longitude: 151.2093), Location(latitude: 52.5219, longitude: 13.4132),
    ]
    static let kilometres: [Double] = [0.5, 1, 5, 30, 300, 1_000, 5_000, 20_000]
    static let sortKeys = ["name", "title", "note", "code", "num", "count", "price", "due", "owner", "flag", "creationDate", "modificationDate", "recordName"]

    init(seed: UInt64, recordType: String) {
        self.rng = SeededGenerator(seed: seed)
        self.recordType = recordType
        phrases = (0..<14).map { _ in phrase(words: int(1...3)) }
    }

    // MARK: Primitives

    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &rng) }
    mutating func chance(_ p: Double) -> Bool { Double.random(in: 0..<1, using: &rng) < p }
    mutating func pick<T>(_ options: [T]) -> T { options[int(0...(options.count - 1))] }

    mutating func phrase(words count: Int) -> String {
        (0..<count).map { _ in pick(Self.words) }.joined(separator: pick([" ", " ", ", ", "-"]))
    }

    /// A string from the data set, sometimes in another letter case.
    mutating func string() -> String {
        let base = pick(phrases)
        switch int(0...9) {
        case 0: return base.uppercased()
        case 1: return base.lowercased()
        case 2: return base.capitalized
        default: return base
        }
    }

    mutating func number() -> FieldValue {
        chance(0.5) ? .int64(Int64(int(-3...6))) : .double(pick(Self.doubles))
    }

    mutating func date() -> Date {
        Date(timeIntervalSinceReferenceDate: Self.baseDate + Double(int(0...7)) * 1_800 + (chance(0.3) ? 0.25 : 0))
    }

    mutating func ownerReference() -> Record.Reference {
        reference(pick(Self.owners))
    }

    // MARK: Records

    mutating func records(count: Int) -> [Record] {
        let prefixes = ["t", "T", "u"]
        recordNames = (0..<count).map { i in
            let digits = String(i)
            return pick(prefixes) + "-" + recordType.filter(\.isNumber) + "-" + String(repeating: "0", count: 3 - digits.count) + digits
        }
        var seen = Set<String>()
        recordNames = recordNames.enumerated().map { i, name in seen.insert(name).inserted ? name : name + "x\(i)" }
        return recordNames.map { name in makeRecord(recordType, name, fields()) }
    }

    mutating func fields() -> [String: FieldValue] {
        var fields: [String: FieldValue] = [:]
        if chance(0.85) { fields["name"] = .string(string()) }
        if chance(0.85) { fields["title"] = .string(phrase(words: int(2...4))) }
        if chance(0.7) { fields["note"] = .string(string()) }
        switch int(0...4) {
        case 0, 1: fields["code"] = .int64(Int64(int(0...5)))
        case 2, 3: fields["code"] = .string(pick(["0", "1", "2", "A", "a", "b"]))
        default: break
        }
        if chance(0.8) { fields["num"] = number() }
        if chance(0.85) { fields["count"] = .int64(Int64(int(-3...6))) }
        if chance(0.8) { fields["price"] = .double(pick(Self.doubles)) }
        if chance(0.8) { fields["due"] = .date(date()) }
        if chance(0.75) { fields["owner"] = .reference(ownerReference()) }
        if chance(0.9) { fields["flag"] = .int64(Int64(int(0...1))) }
        if chance(0.75) { fields["tags"] = .stringList((0..<int(0...3)).map { _ in pick(Self.tagPool) }) }
        switch int(0...4) {
        case 0, 1: fields["scores"] = .int64List((0..<int(0...3)).map { _ in Int64(int(-1...4)) })
        case 2, 3: fields["scores"] = .doubleList((0..<int(0...3)).map { _ in pick([0.5, 2.0, 3.25, -1.0]) })
        default: break
        }
        if chance(0.6) { fields["days"] = .dateList((0..<int(0...2)).map { _ in date() }) }
        if chance(0.6) { fields["friends"] = .referenceList((0..<int(0...3)).map { _ in ownerReference() }) }
        if chance(0.8) { fields["place"] = .location(pick(Self.points)) }
        return fields
    }

    /// Changes a stored record: new words, a removed name, a moved place.
    mutating func change(_ record: Record) {
        record["title"] = phrase(words: 3)
        record["name"] = nil
        record["place"] = pick(Self.points)
        record["count"] = Int64(int(-3...6))
    }

    /// A generator for query `q` alone, over the stored records.
    func forQuery(_ q: Int, over stored: [Record]) -> QueryLanguageGenerator {
        var copy = self
        copy.rng = SeededGenerator(seed: rng.state &* 1_000_003 &+ UInt64(q) &* 0x2545_F491_4F6C_DD1D)
        copy.stored = stored
        return copy
    }

    // MARK: Queries

    mutating func querySpec() -> RandomQuerySpec {
        let predicate = self.predicate()
        var sorts: [RecordSortDescriptor] = []
        for _ in 0..<pick([0, 1, 1, 1, 2, 2, 3]) {
            if chance(0.15) {
                sorts.append(RecordSortDescriptor(distanceOf: "place", from: pick(Self.points), ascending: chance(0.5)))
            } else {
                sorts.append(RecordSortDescriptor(key: pick(Self.sortKeys), ascending: chance(0.5)))
            }
        }
        let desiredKeys: [String]? = chance(0.2) ? Array(Set((0..<int(0...2)).map { _ in pick(["name", "count", "tags", "place"]) })) : nil
        return RandomQuerySpec(predicate: predicate, sorts: sorts, pageSize: pick([1, 2, 3, 5, 8, 13, 50, 400]),
                               serializeCursors: chance(0.5), desiredKeys: desiredKeys)
    }

    mutating func predicate() -> QueryPredicate {
        switch int(0...99) {
        case 0..<4: return .all
        case 4..<6: return .none
        default: break
        }
        var result: QueryPredicate?
        for _ in 0..<pick([1, 1, 1, 2, 2, 3]) {
            var (part, negatable) = condition()
            if negatable && chance(0.25) { part = .not(part) }
            if chance(0.03) { part = part && .all }
            result = result.map { $0 && part } ?? part
        }
        return result!
    }

    /// A value of a family: mostly values the data set holds.
    mutating func value(_ family: QueryEvaluator.Family) -> FieldValue {
        switch family {
        case .string: chance(0.1) ? .string(phrase(words: 1)) : .string(string())
        case .number: number()
        case .timestamp: .date(date())
        case .reference: .reference(ownerReference())
        }
    }

    /// The family a field's values mostly have.
    mutating func naturalFamily(_ field: String) -> QueryEvaluator.Family {
        switch field {
        case "name", "title", "note": .string
        case "code": chance(0.5) ? .string : .number
        case "due": .timestamp
        case "owner": .reference
        default: .number
        }
    }

    /// One condition, and whether CloudKit allows `NOT` over it.
    mutating func condition() -> (QueryPredicate, Bool) {
        let scalarFields = ["name", "title", "note", "code", "num", "count", "price", "due", "owner", "flag"]
        let kind = int(0...99)
        switch kind {
        case 0..<28:
            let field = pick(scalarFields)
            var family = naturalFamily(field)
            if chance(0.1) { family = pick([.string, .number, .timestamp]) }
            let op: ComparisonOperator = family == .reference ? pick([.equal, .notEqual]) : pick([.equal, .notEqual, .less, .lessOrEqual, .greater, .greaterOrEqual])
            return (.condition(.compare(.field(field), op, value(family))), true)
        case 28..<36:
            let field = pick(["name", "title", "code", "num", "count", "price", "due"])
            let family = naturalFamily(field)
            var low = value(family), high = value(family)
            if chance(0.75), QueryEvaluator.isAfter(low, high) { swap(&low, &high) }
            return (.condition(.between(.field(field), low, high)), false)
        case 36..<46:
            let field = pick(scalarFields)
            var family = naturalFamily(field)
            if chance(0.1) { family = pick([.string, .number, .timestamp]) }
            let values = (0..<pick([0, 1, 2, 2, 3, 4])).map { _ in value(family) }
            return (.condition(.in(.field(field), values)), true)
        case 46..<54:
            let field = pick(["name", "title", "note", "code", "count"])
            let source = chance(0.85) ? string() : pick(["0", "1", "A", "a"])
            let scalars = Array(source.unicodeScalars)
            var prefix = String(String.UnicodeScalarView(scalars.prefix(int(0...min(4, scalars.count)))))
            if chance(0.15) { prefix = prefix.uppercased() }
            return (.condition(.beginsWith(.field(field), prefix)), true)
        case 54..<62:
            let (field, family) = pick([("tags", QueryEvaluator.Family.string), ("scores", .number), ("days", .timestamp), ("friends", .reference)])
            let element = chance(0.9) ? listValue(family) : value(pick([.string, .number, .timestamp, .reference]))
            return (.condition(.listContains(.field(field), element)), true)
        case 62..<68:
            let (field, family) = pick([("tags", QueryEvaluator.Family.string), ("scores", .number), ("days", .timestamp), ("friends", .reference)])
            let values = (0..<pick([0, 1, 2, 3])).map { _ in listValue(family) }
            return (.condition(.listContainsAny(.field(field), values)), !values.isEmpty)
        case 68..<73:
            let field = chance(0.9) ? "tags" : pick(["name", "scores"])
            let tag = Array(pick(Self.tagPool).unicodeScalars)
            let prefix = String(String.UnicodeScalarView(tag.prefix(int(0...min(3, tag.count)))))
            return (.condition(.listAnyBeginsWith(.field(field), prefix)), true)
        case 73..<83:
            let pool = Self.words + Self.tagPool
            if chance(0.5) {
                return (QueryPredicate.tokens((0..<int(1...3)).map { _ in pick(pool) }.joined(separator: " ")), false)
            }
            var search = QueryPredicate.tokens(pick(pool))
            for _ in 0..<int(1...2) { search = search && QueryPredicate.tokens(pick(pool)) }
            return (search, false)
        case 83..<90:
            var origin = pick(Self.points)
            if chance(0.3) { origin = Location(latitude: origin.latitude + 0.01, longitude: origin.longitude) }
            let op: ComparisonOperator = pick([.less, .lessOrEqual, .greater, .greaterOrEqual])
            var km = pick(Self.kilometres)
            // Keep clear of any record's exact distance, where rounding could decide.
            let distances = stored.compactMap { record -> Double? in
                guard case .location(let place)? = record.fieldValue(forKey: "place") else { return nil }
                return QueryEvaluator.distanceKilometres(from: origin, to: place)
            }
            while distances.contains(where: { abs($0 - km) < 1e-6 }) { km += 0.001 }
            return (.condition(.distance(.field("place"), from: origin, op, kilometers: km)), false)
        case 90..<95:
            let names = stored.map(\.recordID.recordName)
            switch int(0...3) {
            case 0:
                let op: ComparisonOperator = pick([.equal, .notEqual, .less, .lessOrEqual, .greater, .greaterOrEqual])
                return (.condition(.compare(.recordName, op, .string(pick(names)))), true)
            case 1:
                let id = Record.ID(recordName: pick(names))
                return (.condition(.compare(.recordName, pick([.equal, .notEqual]), .reference(Record.Reference(recordID: id, action: .none)))), true)
            case 2:
                return (.condition(.in(.recordName, (0..<int(1...4)).map { _ in .string(pick(names)) })), true)
            default:
                return (.condition(.beginsWith(.recordName, pick(["t", "T", "u-1", "t-0-01", "T-", "x"]))), true)
            }
        default:
            let key: QueryKey = chance(0.5) ? .creationDate : .modificationDate
            let dates = stored.compactMap { key == .creationDate ? $0.creationDate : $0.modificationDate }
            guard !dates.isEmpty else { return (.all, false) }
            let a = pick(dates), b = pick(dates)
            if chance(0.3) {
                return (.condition(.between(key, .date(min(a, b)), .date(max(a, b)))), false)
            }
            let op: ComparisonOperator = pick([.equal, .notEqual, .less, .lessOrEqual, .greater, .greaterOrEqual])
            return (.condition(.compare(key, op, .date(a))), true)
        }
    }

    /// A value as list elements hold them (list elements compare exactly).
    mutating func listValue(_ family: QueryEvaluator.Family) -> FieldValue {
        switch family {
        case .string: .string(chance(0.85) ? pick(Self.tagPool) : pick(Self.tagPool).uppercased())
        case .number: chance(0.5) ? .int64(Int64(int(-1...4))) : .double(pick([0.5, 2.0, 3.25, -1.0, 4.0]))
        case .timestamp: .date(date())
        case .reference: .reference(ownerReference())
        }
    }
}

extension EngineConformance {
    /// Whether a predicate applies a list form (CONTAINS, ANY …) to a field the schema declares scalar.
    static func usesListFormOnScalar(_ predicate: QueryPredicate, _ schema: RecordTypeSchema) -> Bool {
        func isScalar(_ key: QueryKey) -> Bool {
            guard case .field(let name) = key, let type = schema.field(name)?.type else { return false }
            return !type.isList
        }
        switch predicate {
        case .all, .none: return false
        case .and(let parts): return parts.contains { usesListFormOnScalar($0, schema) }
        case .not(let inner): return usesListFormOnScalar(inner, schema)
        case .condition(let condition):
            switch condition {
            case .listContains(let key, _), .listContainsAny(let key, _), .listAnyBeginsWith(let key, _): return isScalar(key)
            default: return false
            }
        }
    }
}
