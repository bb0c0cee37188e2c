import Foundation
import Stratus
import Testing

// MARK: - Stratus's comparison, equality and ordering rules (QueryRules), through the public API

extension EngineConformance {
    static let ruleCases: [TestCase] = [
        TestCase("distinct bytes are distinct values: NFC to NFD, 0.0 to -0.0 and Ohm to Omega are stored changes", distinctBytesAreStored),
        TestCase("string equality folds case fully (ß, ﬁ, final sigma, old-style Cyrillic) and does not normalize", equalityFoldsCase),
        TestCase("order: missing first ascending and last descending, numbers < timestamps < strings < references, unordered values as missing", mixedFamilyOrder),
        TestCase("a cursor is refused by another store", cursorFromAnotherStore),
        TestCase("doubles of 2^53 and more compare with integers by their exact value, in filters and in order", largeDoublesCompareExactly),
        TestCase("a declared field's values of another type sort as missing: pages end, in one zone and across zones, indexed or not", declaredFieldHoldingOtherTypes),
    ]

    /// Saves `value` into field `v` of record `name` with the forced policy that skips saves
    /// changing nothing, and answers what kind of write it was.
    private static func forceSave(_ name: String, _ value: FieldValue, in database: Database) async throws -> RecordWriteKind {
        // A type per name: a field holds one type (`zero` is DOUBLE, `ohm` STRING).
        try await TestDatabase.saveKinds([makeRecord("Rule_" + name.replacingOccurrences(of: "-", with: "_"), name, ["v": value])], in: database, writeMode: .forceUpdate)[0]
    }

    static func distinctBytesAreStored(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        let pairs: [(String, FieldValue, FieldValue)] = [
            ("nfc-nfd", .string("caf\u{E9}"), .string("cafe\u{301}")),
            ("zero", .double(0.0), .double(-0.0)),
            ("ohm", .string("\u{2126}"), .string("\u{3A9}")),
            ("list", .stringList(["\u{E9}"]), .stringList(["e\u{301}"])),
            ("doubles", .doubleList([0.0, 1]), .doubleList([-0.0, 1])),
        ]
        for (name, first, second) in pairs {
            #expect(try await forceSave(name, first, in: database) == .created)
            #expect(try await forceSave(name, first, in: database) == .unchanged, "\(name): the same bytes again change nothing")
            #expect(try await forceSave(name, second, in: database) == .updated, "\(name): different bytes are a change, though Swift's == calls them equal")
            let stored = try #require(try await database.record(for: Record.ID(recordName: name)).fieldValue(forKey: "v"))
            #expect(stored == second, "\(name): read back as stored")
            switch (stored, second) {
            case (.string(let a), .string(let b)): #expect(Array(a.unicodeScalars) == Array(b.unicodeScalars))
            case (.double(let a), .double(let b)): #expect(a.bitPattern == b.bitPattern)
            default: break
            }
        }
        // Going back is a change too, and the change feed carries it.
        let token = try await database.recordZoneChanges(inZoneWith: .default, since: nil).changeToken
        #expect(try await forceSave("ohm", .string("\u{2126}"), in: database) == .updated)
        let changes = try await database.recordZoneChanges(inZoneWith: .default, since: token)
        #expect(changes.modificationResultsByID.keys.map(\.recordName) == ["ohm"])
    }

    static func equalityFoldsCase(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        let texts: [String: String] = [
            "strasse-sharp": "Straße", "strasse-caps": "STRASSE", "strasse-capital-sharp": "STRAẞE", "strasse-plain": "strasse",
            "fish-ligature": "\u{FB01}sh", "fish-caps": "FISH",
            "sigma-final": "ΟΔΟΣ", "sigma-small": "οδος", "sigma-final-small": "οδoς",
            "cafe-nfc": "CAF\u{C9}", "cafe-nfd": "cafe\u{301}", "empty": "",
            // Old-style Cyrillic: CaseFolding.txt folds U+1C80 to в and U+1C88 to ꙋ.
            "cyrillic-rounded-ve": "\u{1C80}\u{1C88}", "cyrillic-ve": "\u{412}\u{A64A}",
        ]
        try await TestDatabase.save(texts.map { makeRecord("Word", $0.key, ["text": .string($0.value)]) }, in: database)
        func names(_ format: String, _ arguments: any Sendable...) async throws -> Set<String> {
            let records = try await TestDatabase.queryAll(Query(recordType: "Word", predicate: try QueryPredicate(format: format, argumentArray: arguments)), in: database)
            return Set(records.map(\.recordID.recordName))
        }
        #expect(try await names("text == %@", "strasse") == ["strasse-sharp", "strasse-caps", "strasse-capital-sharp", "strasse-plain"])
        #expect(try await names("text == %@", "Straße") == ["strasse-sharp", "strasse-caps", "strasse-capital-sharp", "strasse-plain"])
        #expect(try await names("text == %@", "fish") == ["fish-ligature", "fish-caps"])
        #expect(try await names("text == %@", "οδοσ") == ["sigma-final", "sigma-small"], "final sigma folds to sigma; the Latin o does not match omicron")
        #expect(try await names("text == %@", "caf\u{E9}") == ["cafe-nfc"], "equality folds case but does not normalize: NFD text differs")
        #expect(try await names("text IN %@", ["FISH", "cafe\u{301}"]) == ["fish-ligature", "fish-caps", "cafe-nfd"])
        #expect(try await names("text != %@", "STRASSE").isDisjoint(with: ["strasse-sharp", "strasse-caps", "strasse-plain"]))
        #expect(try await names("text == %@", "") == ["empty"], "the empty string equals itself")
        #expect(try await names("text == %@", "\u{432}\u{A64B}") == ["cyrillic-rounded-ve", "cyrillic-ve"])
        #expect(try await names("text IN %@", ["", "fish"]) == ["empty", "fish-ligature", "fish-caps"])
        // Ordering comparisons and BEGINSWITH are exact.
        #expect(try await names("text BEGINSWITH %@", "Stra") == ["strasse-sharp"])
    }

    static func largeDoublesCompareExactly(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        // 2^60, whose shortest text (1.152921504606847e+18) is another number than its value;
        // -2^63, equal to INT64's least value; 1e300, far beyond any integer.
        let records = [makeRecord("Large", "a-double", ["n": .double(0x1p60)]),
                       makeRecord("Large", "b-int", ["n": .int64(1_152_921_504_606_846_977)]),
                       makeRecord("Large", "c-double-min", ["n": .double(-0x1p63)]),
                       makeRecord("Large", "d-int-min", ["n": .int64(.min)]),
                       makeRecord("Large", "e-huge", ["n": .double(1e300)])]
        try await TestDatabase.seed(records, in: database)
        func names(_ format: String) async throws -> [String] {
            let query = Query(recordType: "Large", predicate: try QueryPredicate(format: format))
            query.sortDescriptors = [RecordSortDescriptor(key: "n", ascending: true)]
            let found = try await TestDatabase.queryAll(query, in: database, pageSize: 2).map(\.recordID.recordName)
            #expect(try QueryEvaluator.evaluate(query, over: records).map(\.recordID.recordName) == found, "the oracle agrees on \(format)")
            return found
        }
        #expect(try await names("n == 1152921504606846976") == ["a-double"])
        #expect(try await names("n < 1152921504606846977") == ["c-double-min", "d-int-min", "a-double"])
        #expect(try await names("n > 1152921504606846976") == ["b-int", "e-huge"])
        #expect(try await names("n == 1152921504606847000").isEmpty, "the shortest text's number is not the double's")
        #expect(try await names("n == -9223372036854775808") == ["c-double-min", "d-int-min"], "equal values, by record name")
        #expect(try await names("n >= 1e300") == ["e-huge"])
        #expect(try await names("TRUEPREDICATE") == ["c-double-min", "d-int-min", "a-double", "b-int", "e-huge"])
    }

    static func mixedFamilyOrder(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        let values: [String: FieldValue?] = [
            "a-missing": nil,
            "b-list": .stringList(["a"]),
            "c-bytes": .bytes(Data([1, 2])),
            "d-location": .location(Location(latitude: 1, longitude: 2)),
            "e-int-big": .int64(9_007_199_254_740_993),
            "f-double-big": .double(9_007_199_254_740_992),
            "g-int-neg": .int64(-3),
            "h-double-neg": .double(-2.5),
            "i-double-zero": .double(-0.0),
            "j-int-zero": .int64(0),
            "k-date-early": .date(Date(timeIntervalSinceReferenceDate: -1_000)),
            "l-date-late": .date(Date(timeIntervalSinceReferenceDate: 1_000)),
            "m-string-upper": .string("Zebra"),
            "n-string-lower": .string("apple"),
            "o-string-accent": .string("\u{E9}clair"),
            "p-string-empty": .string(""),
            "q-reference": .reference(reference("aaa")),
            "r-reference-late": .reference(reference("zzz")),
        ]
        let records = values.map { name, value in makeRecord("Mixed", name, value.map { ["k": $0] } ?? ["other": .int64(1)]) }
        // One field of every type, as a store may hold from before types were enforced.
        try await TestDatabase.seed(records, in: database)
        // The rules, spelled out: missing and unordered first (by name), numbers by value (exact
        // between INT64 and DOUBLE, -0.0 ties with 0 and falls back to the name), timestamps,
        // strings by scalar, references by name.
        let ascending = ["a-missing", "b-list", "c-bytes", "d-location",
                         "g-int-neg", "h-double-neg", "i-double-zero", "j-int-zero", "f-double-big", "e-int-big",
                         "k-date-early", "l-date-late",
                         "p-string-empty", "m-string-upper", "n-string-lower", "o-string-accent",
                         "q-reference", "r-reference-late"]
        for pageSize in [1, 3, 100] {
            for ascendingOrder in [true, false] {
                let query = Query(recordType: "Mixed", predicate: .all)
                query.sortDescriptors = [RecordSortDescriptor(key: "k", ascending: ascendingOrder)]
                let found = try await TestDatabase.queryAll(query, in: database, pageSize: pageSize).map(\.recordID.recordName)
                // Descending reverses the whole order, ties included (the tiebreak follows the last key).
                let expected = ascendingOrder ? ascending : ascending.reversed()
                #expect(found == expected, "sorted \(ascendingOrder ? "ascending" : "descending") in pages of \(pageSize)")
                #expect(try QueryEvaluator.evaluate(query, over: records).map(\.recordID.recordName) == expected, "the oracle agrees")
            }
        }
    }

    static func declaredFieldHoldingOtherTypes(_ env: Environment) async throws {
        let container = env.container(user: "alice")
        let database = container.privateCloudDatabase
        let second = RecordZone.ID(zoneName: "Second")
        _ = try await database.modifyRecordZones(saving: [RecordZone(zoneID: second)], deleting: [])
        // `k` is a STRING in both types' schemas, sortable (an index serves the sort) in one.
        var indexed = RecordTypeSchema(recordType: "Retyped")
        indexed.addField("k", type: .string, indexes: [.queryable, .sortable])
        var plain = RecordTypeSchema(recordType: "RetypedPlain")
        plain.addField("k", type: .string)
        _ = try await container.saveSchema(indexed, plain)
        let values: [String: FieldValue?] = [
            "missing": nil, "bytes": .bytes(Data([1, 2])), "location": .location(Location(latitude: 1, longitude: 2)),
            "list": .stringList(["a"]), "int": .int64(5), "double": .double(-2.5), "date": .date(Date(timeIntervalSinceReferenceDate: 0)),
            "reference": .reference(reference("aaa")), "string-b": .string("b"), "string-a": .string("a"), "string-empty": .string(""),
            "string-upper": .string("B"),
        ]
        for (type, schema) in [("Retyped", indexed), ("RetypedPlain", plain)] {
            var records: [Record] = []
            for (zoneIndex, zoneID) in [RecordZone.ID.default, second].enumerated() {
                records += values.map { name, value in
                    makeRecord(type, "z\(zoneIndex)-\(name)", zoneID: zoneID, value.map { ["k": $0] } ?? ["other": .int64(1)])
                }
            }
            // Values of other types, as a record saved before the field was declared a STRING holds them.
            for zoneID in [RecordZone.ID.default, second] {
                _ = try await TestDatabase.seed(records.filter { $0.recordID.zoneID == zoneID }, in: database)
            }
            for ascendingOrder in [true, false] {
                let query = Query(recordType: type, predicate: .all)
                query.sortDescriptors = [RecordSortDescriptor(key: "k", ascending: ascendingOrder)]
                let direction = "\(type) \(ascendingOrder ? "ascending" : "descending")"
                for zoneID in [RecordZone.ID.default, second] {
                    let expected = QueryEvaluator.sorted(records.filter { $0.recordID.zoneID == zoneID }, by: query.sortDescriptors!, declaredIn: schema).map(\.recordID.recordName)
                    // Missing values and the other types first ascending (by name), then the strings.
                    let strings = expected.filter { $0.contains("string") }
                    #expect((ascendingOrder ? Array(expected.suffix(4)) : Array(expected.prefix(4))) == strings, "\(direction): the strings, in order, after the rest")
                    for pageSize in [1, 2, 100] {
                        let found = try await TestDatabase.queryAll(query, in: database, zoneID: zoneID, pageSize: pageSize).map(\.recordID.recordName)
                        expectSameOrder(found, expected, "\(direction) in zone \(zoneID.zoneName), pages of \(pageSize)")
                    }
                    var streamed: [String] = []
                    for try await record in database.allRecords(matching: query, inZoneWith: zoneID) { streamed.append(record.recordID.recordName) }
                    expectSameOrder(streamed, expected, "\(direction) in zone \(zoneID.zoneName), one stream")
                }
                // Across zones: the merge orders each zone's records as the zone does.
                let everywhere = QueryEvaluator.sorted(records, by: query.sortDescriptors!, declaredIn: schema).map(\.recordID.recordName)
                for pageSize in [1, 3, 100] {
                    let found = try await TestDatabase.queryAll(query, in: database, zoneID: nil, pageSize: pageSize).map(\.recordID.recordName)
                    expectSameOrder(found, everywhere, "\(direction) across zones, pages of \(pageSize)")
                }
            }
            // Conditions on the field match its strings only.
            let atLeastA = try await TestDatabase.queryAll(Query(recordType: type, format: "k >= %@", "a"), in: database, zoneID: .default)
            #expect(Set(atLeastA.map(\.recordID.recordName)) == ["z0-string-a", "z0-string-b"], "\(type): k >= 'a'")
        }
    }

    static func cursorFromAnotherStore(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        try await TestDatabase.save(makeRecords("Item", count: 5) { ["n": .int64(Int64($0))] }, in: database)
        let (_, cursor) = try await database.records(matching: Query(recordType: "Item", predicate: .all), resultsLimit: 2)
        let text = try #require(cursor).serialized
        let other = Container(identifier: Environment.containerIdentifier, engine: try env.makeAnotherEngine(), userName: "alice").publicCloudDatabase
        try await TestDatabase.save(makeRecords("Item", count: 5) { ["n": .int64(Int64($0))] }, in: other)
        let error = await caughtError { try await other.records(continuingMatchFrom: try QueryOperation.Cursor(serialized: text)) }
        #expect(stratusError(error)?.code == .invalidArguments)
        #expect(stratusError(error)?.message.contains("another store") == true)
        // On its own store it goes on.
        let (rest, _) = try await database.records(continuingMatchFrom: try QueryOperation.Cursor(serialized: text))
        #expect(rest.count == 3)
    }
}
