import Foundation
import SeededRandom
@_spi(StratusEngine) import Stratus
import Testing

// MARK: - Reads of many pages: one snapshot; counts

extension EngineConformance {
    static let streamCases: [TestCase] = [
        TestCase("allRecords reads one snapshot: writes made while it is read are neither seen nor missed", allRecordsReadsOneSnapshot),
        TestCase("allRecords sorted by an unindexed key, by an indexed key, by a distance and with a filter give the oracle's order", allRecordsOrder),
        TestCase("a query stream's pages read undecoded and decoded later give the records and positions of pages read decoded", undecodedPagesMatchDecoded),
        TestCase("countRecords counts what each query matches, without a limit", countsMatchQueries),
        TestCase("reads of many records whose fields and last modifiers vary give each record as a fetch of it alone does", manyRecordReadsMatchFetches),
    ]

    static func manyRecordReadsMatchFetches(_ env: Environment) async throws {
        let alice = env.container(user: "alice").publicCloudDatabase
        let bob = env.container(user: "bob").publicCloudDatabase
        try await env.container().saveSchema(RecordTypeSchema(recordType: "Shaped", grants: [.authenticated: [.create, .write], .world: .read]))
        // Field sets that repeat, grow, shrink and empty from one record to the next: a read that
        // reuses what the record before it held must still give each record its own.
        let records = makeRecords("Shaped", count: 60) { i -> [String: FieldValue] in
            guard i % 11 != 10 else { return [:] }
            var fields: [String: FieldValue] = ["a": .int64(Int64(i))]
            if i % 3 != 0 { fields["b"] = .string(i % 2 == 0 ? "ÉCOLE \(i)" : "milk") }
            if i % 5 == 0 { fields["c"] = .doubleList([Double(i), -0.0]) }
            if i >= 40 { fields["z"] = .date(Date(timeIntervalSinceReferenceDate: Double(i) * 1_000.5)) }
            return fields
        }
        try await TestDatabase.save(records, in: alice)
        // Another user changes every fourth: the last modifier alternates between two users.
        var changed: [Record] = []
        for i in stride(from: 0, to: 60, by: 4) {
            let record = try await bob.record(for: Record.ID(recordName: recordName("r", i)))
            record.setFieldValue(.int64(-Int64(i)), forKey: "a")
            changed.append(record)
        }
        try await TestDatabase.save(changed, in: bob)

        func expectAsFetched(_ read: [Record], _ what: String) async throws {
            #expect(read.count == 60, "\(what): every record")
            for record in read {
                let alone = try await alice.record(for: record.recordID)
                #expect(record.recordType == alone.recordType, "\(what): \(record.recordID.recordName)")
                #expect(record.fieldValues == alone.fieldValues, "\(what): \(record.recordID.recordName)")
                #expect(record.systemFields == alone.systemFields, "\(what): \(record.recordID.recordName)")
            }
            #expect(read.filter { $0.systemFields.lastModifiedUserRecordID?.recordName == env.recordName(of: "bob") }.count == 15, "\(what): bob's changes")
        }
        var streamed: [Record] = []
        for try await record in alice.allRecords(matching: Query(recordType: "Shaped", predicate: .all), pageSize: 7) { streamed.append(record) }
        try await expectAsFetched(streamed, "a stream")
        try await expectAsFetched(try await TestDatabase.queryAll(Query(recordType: "Shaped"), in: alice, pageSize: 9), "pages")
        let changes = try await alice.recordZoneChanges(inZoneWith: .default, since: nil)
        try await expectAsFetched(try changes.modificationResultsByID.values.map { try $0.get().record }, "a change read")
    }

    static func allRecordsReadsOneSnapshot(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        let count = 2_000
        try await TestDatabase.save(makeRecords("Snap", count: count) { ["v": .int64(Int64($0))] }, in: database)
        let query = Query(recordType: "Snap", predicate: .all)
        query.sortDescriptors = [RecordSortDescriptor(key: "v", ascending: true)]
        var seen: [String] = []
        var values: [Int64] = []
        var wrote = false
        for try await record in database.allRecords(matching: query, pageSize: 100) {
            seen.append(record.recordID.recordName)
            if case .int64(let v)? = record.fieldValue(forKey: "v") { values.append(v) }
            if seen.count == 150 && !wrote {
                wrote = true
                // Every record moves to the other end of the order, new ones arrive, some go.
                let moved = makeRecords("Snap", count: count) { ["v": .int64(Int64(-$0 - 1))] }
                try await TestDatabase.save(moved, in: database, savePolicy: .changedKeys)
                try await TestDatabase.save(makeRecords("Snap", count: 500, prefix: "new") { ["v": .int64(Int64($0))] }, in: database)
                _ = try await database.modifyRecords(saving: [], deleting: (1_000..<1_100).map { Record.ID(recordName: recordName("r", $0)) })
            }
        }
        #expect(wrote)
        #expect(seen == (0..<count).map { recordName("r", $0) }, "each record once, in the order of the snapshot")
        #expect(values == (0..<count).map(Int64.init), "records as they were when the read began")
        // A new read sees the writes.
        var after = 0
        for try await _ in database.allRecords(matching: query, pageSize: 300) { after += 1 }
        #expect(after == count + 500 - 100)
    }

    static func allRecordsOrder(_ env: Environment) async throws {
        let container = env.container()
        var schema = RecordTypeSchema(recordType: "Ordered")
        schema.addField("indexed", type: .int64, indexes: [.sortable, .queryable])
        try await container.saveSchema(schema)
        let database = container.publicCloudDatabase
        var random = SeededGenerator(seed: 11)
        let records = makeRecords("Ordered", count: 1_500) { _ in
            var fields: [String: FieldValue] = ["indexed": .int64(Int64.random(in: 0..<50, using: &random))]
            if Int.random(in: 0..<10, using: &random) > 0 { fields["plain"] = .double(Double(Int.random(in: 0..<40, using: &random)) / 4) }
            fields["group"] = .string(["a", "b", "c"].randomElement(using: &random)!)
            if Int.random(in: 0..<8, using: &random) > 0 {
                fields["place"] = .location(Location(latitude: Double(Int.random(in: -120...120, using: &random)) / 2,
                                                     longitude: Double(Int.random(in: -360...359, using: &random)) / 2))
            }
            return fields
        }
        try await TestDatabase.save(records, in: database)
        let berlin = Location(latitude: 52.52, longitude: 13.405)
        for (format, sorts) in [("TRUEPREDICATE", [RecordSortDescriptor(distanceOf: "place", from: berlin)]),
                                ("group == 'a'", [RecordSortDescriptor(distanceOf: "place", from: berlin, ascending: false), RecordSortDescriptor(key: "plain")]),
                                ("TRUEPREDICATE", [RecordSortDescriptor(key: "plain", ascending: false)]),
                                ("TRUEPREDICATE", [RecordSortDescriptor(key: "indexed", ascending: true), RecordSortDescriptor(key: "plain", ascending: false)]),
                                ("group == 'b'", [RecordSortDescriptor(key: "plain", ascending: true)]),
                                ("indexed < 10", [RecordSortDescriptor(key: "indexed", ascending: false)])] {
            let query = Query(recordType: "Ordered", predicate: try QueryPredicate(format: format))
            query.sortDescriptors = sorts
            var found: [String] = []
            for try await record in database.allRecords(matching: query, pageSize: 97) { found.append(record.recordID.recordName) }
            let expected = try QueryEvaluator.evaluate(query, over: records).map(\.recordID.recordName)
            #expect(found == expected, "\(format) sorted by \(sorts.map(\.key))")
        }
    }

    static func undecodedPagesMatchDecoded(_ env: Environment) async throws {
        let container = env.container()
        let database = container.publicCloudDatabase
        var random = SeededGenerator(seed: 29)
        let records = makeRecords("Undecoded", count: 240) { i in
            var fields: [String: FieldValue] = ["n": .int64(Int64.random(in: 0..<20, using: &random)), "text": .string("row \(i) \(i % 3 == 0 && (i < 30 || i > 200) ? "ÉCOLE" : "garden")")]
            if i % 6 != 0 { fields["place"] = .location(Location(latitude: Double(i % 90), longitude: Double(i * 7 % 360) - 180)) }
            if i % 4 == 0 { fields["list"] = .int64List([Int64(i), -1]) }
            return fields
        }
        try await TestDatabase.save(records, in: database)
        let context = try database.resolvedContext()
        let origin = Location(latitude: 48.85, longitude: 2.35)
        for (format, sorts, keys) in [("TRUEPREDICATE", [RecordSortDescriptor(key: "n"), RecordSortDescriptor(distanceOf: "place", from: origin)], nil),
                                      ("TRUEPREDICATE", [RecordSortDescriptor(distanceOf: "place", from: origin, ascending: false)], ["text"]),
                                      ("self CONTAINS 'école'", [RecordSortDescriptor(key: "n")], ["n"]),
                                      ("TRUEPREDICATE", [], ["n", "list"])] as [(String, [RecordSortDescriptor], [String]?)] {
            let query = Query(recordType: "Undecoded", predicate: try QueryPredicate(format: format))
            query.sortDescriptors = sorts
            let compiled = try CompiledQuery(query, zoneID: .default, desiredKeys: keys)
            let decoded = try env.engine.openQueryStream(compiled, in: context, after: nil)
            let undecoded = try env.engine.openQueryStream(compiled, in: context, after: nil)
            defer {
                decoded.close()
                undecoded.close()
            }
            var pages: [UndecodedQueryPage] = []
            var read = 0
            while true {
                let page = try undecoded.nextUndecoded(limit: 17)
                if page.count == 0 { break }
                pages.append(page)
                read += page.count
            }
            // Decoded after the stream read them all and closed: the pages hold what they need.
            undecoded.close()
            let matches = format == "TRUEPREDICATE" ? 240 : 23
            // An engine may read rows that a word condition then leaves out: pages of rows
            // can hold fewer records than rows, and end elsewhere than pages of records.
            #expect(format == "TRUEPREDICATE" ? read == matches : read >= matches, "\(format) \(sorts.map(\.key)): every row")
            var later: [Record] = [], now: [Record] = []
            var laterPositions: [(Record.ID, QueryPosition?)] = [], nowPositions: [Record.ID: QueryPosition?] = [:]
            for rows in pages {
                let page = try rows.decode()
                #expect(format != "TRUEPREDICATE" || page.records.count == rows.count, "\(format): one record per row")
                later += page.records
                if let last = page.records.last { laterPositions.append((last.recordID, page.nextPosition)) }
            }
            while case let page = try decoded.next(limit: 17), let last = page.records.last {
                now += page.records
                nowPositions[last.recordID] = page.nextPosition
            }
            let what = "\(format) sorted by \(sorts.map(\.key)), desired keys \(keys ?? [])"
            #expect(later.count == matches, "\(what): every match")
            #expect(later.map(\.recordID) == now.map(\.recordID), "\(what): the same records in order")
            #expect(later.map(\.fieldValues) == now.map(\.fieldValues), "\(what): the same fields")
            #expect(later.map(\.systemFields) == now.map(\.systemFields), "\(what): the same system fields")
            // The two ways of reading mixed on one stream: every record once, in order.
            let mixed = try env.engine.openQueryStream(compiled, in: context, after: nil)
            defer { mixed.close() }
            var mixedRecords: [Record] = []
            var turn = 0
            while true {
                turn += 1
                if turn % 2 == 1 {
                    let rows = try mixed.nextUndecoded(limit: 7)
                    if rows.count == 0 { break }
                    mixedRecords += try rows.decode().records
                } else {
                    let page = try mixed.next(limit: 5)
                    if page.records.isEmpty { break }
                    mixedRecords += page.records
                }
            }
            #expect(mixedRecords.map(\.recordID) == now.map(\.recordID), "\(what): reads of both kinds on one stream")
            for (last, position) in laterPositions {
                guard let expected = nowPositions[last] else {
                    #expect(format != "TRUEPREDICATE", "\(what): pages of rows end where pages of records end")
                    continue
                }
                #expect(position == expected, "\(what): the position after \(last.recordName)")
            }
            #expect(try decoded.next(limit: 17).records.isEmpty)
        }
        // Through the public API, in pages of five rows: a run of 170 rows that a word condition
        // leaves out can make whole pages of rows without a record.
        let words = Query(recordType: "Undecoded", predicate: try QueryPredicate(format: "self CONTAINS 'école'"))
        var streamed: [String] = []
        for try await record in database.allRecords(matching: words, pageSize: 5) { streamed.append(record.recordID.recordName) }
        #expect(streamed == TestDatabase.names(try await TestDatabase.queryAll(words, in: database)), "every match once, in order")
        #expect(streamed.count == 23)
    }

    static func countsMatchQueries(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        let records = makeRecords("Counted", count: 1_200) { i in ["n": .int64(Int64(i % 7)), "label": .string(i % 3 == 0 ? "Fizz" : "buzz")] }
        try await TestDatabase.save(records, in: database)
        try await TestDatabase.save([makeRecord("Other", "other-1", ["n": .int64(1)])], in: database)
        for format in ["TRUEPREDICATE", "n == 3", "n >= 2 AND label == 'FIZZ'", "label BEGINSWITH 'b'", "FALSEPREDICATE"] {
            let query = Query(recordType: "Counted", predicate: try QueryPredicate(format: format))
            let expected = try QueryEvaluator.evaluate(query, over: records).count
            #expect(try await database.countRecords(matching: query) == expected, "\(format)")
        }
        #expect(try await database.countRecords(matching: Query(recordType: "Nothing", predicate: .all)) == 0)
        let missingZone = await caughtError { try await database.countRecords(matching: Query(recordType: "Counted", predicate: .all), inZoneWith: RecordZone.ID(zoneName: "Nowhere")) }
        #expect(stratusError(missingZone)?.code == .zoneNotFound)
    }
}
