import Foundation
import Stratus
import Testing

// MARK: - Queries without a zone search every zone

extension EngineConformance {
    static let zoneWideQueryCases: [TestCase] = [
        TestCase("a query without a zone searches every zone: merged in the query's order, paged with serialized cursors", zoneWidePaging),
        TestCase("a query without a zone: allRecords and fetchAllResults read every zone, zone after zone; countRecords counts every zone", zoneWideReadAll),
        TestCase("a query without a zone: desired keys without the sort key, a distance sort, a zone deleted between pages", zoneWideEdges),
        TestCase("a query without a zone in the shared database is invalidArguments; a query with a zone searches only it", zoneWideScopes),
        TestCase("a cursor of one user's private database is refused by another user's, over every zone or in one zone", cursorOfAnotherUser),
    ]

    /// Alice's private database with the zones Alpha, Beta and Gamma beside the default zone,
    /// each holding `Item`s: `rank` with ties across zones and missing on some, the same record
    /// names in several zones (tied on every sort key), a `place` for distance sorts.
    private static func zonedItems(_ env: Environment) async throws -> (database: Database, records: [Record]) {
        let database = env.container(user: "alice").privateCloudDatabase
        let zones = ["Alpha", "Beta", "Gamma"].map { RecordZone.ID(zoneName: $0) }
        _ = try await database.modifyRecordZones(saving: zones.map { RecordZone(zoneID: $0) }, deleting: [])
        var records: [Record] = []
        for (index, zoneID) in ([RecordZone.ID.default] + zones).enumerated() {
            records += makeRecords("Item", count: 40 + index * 7, prefix: "i", zoneID: zoneID) { i in
                // `zoneRank` puts each zone's records after the previous zone's: a merge that takes
                // whole chunks of one zone before another's first.
                var fields: [String: FieldValue] = ["place": .location(Location(latitude: Double(i % 9), longitude: Double(index))),
                                                    "zoneRank": .int64(Int64(index * 1_000 + i))]
                if i % 6 != 0 { fields["rank"] = .int64(Int64(i % 10)) }
                return fields
            }
            // Same name and same values in every zone: only the zone orders them.
            records.append(makeRecord("Item", "twin", zoneID: zoneID, ["rank": .int64(5), "place": .location(Location(latitude: 1, longitude: 1))]))
        }
        for zone in [RecordZone.ID.default] + zones {
            _ = try await TestDatabase.save(records.filter { $0.recordID.zoneID == zone }, in: database)
        }
        return (database, records)
    }

    /// `zone/name` of each record, to compare orders across zones.
    private static func zoneNames(_ records: [Record]) -> [String] {
        records.map { "\($0.recordID.zoneID.zoneName)/\($0.recordID.recordName)" }
    }

    /// The records in the order of `sort`, ties broken by record name and then by zone name.
    private static func expectedOrder(_ records: [Record], _ sort: [RecordSortDescriptor], origin: Location? = nil) -> [String] {
        let byZone = records.sorted { $0.recordID.zoneID.zoneName < $1.recordID.zoneID.zoneName }
        var ordered = QueryEvaluator.sorted(byZone, by: sort)
        // `sorted` is not stable: put records tied on every key and name back in zone order.
        ordered = stableTies(ordered, sort)
        return zoneNames(ordered)
    }

    private static func stableTies(_ ordered: [Record], _ sort: [RecordSortDescriptor]) -> [Record] {
        var result: [Record] = []
        var run: [Record] = []
        func key(_ record: Record) -> String {
            record.recordID.recordName + "|" + sort.map { "\(QueryRules.sortValue(of: record, for: $0.queryKey).map { "\($0)" } ?? "-")" }.joined(separator: ",")
        }
        for record in ordered {
            if let last = run.last, key(last) != key(record) {
                result += run.sorted { $0.recordID.zoneID.zoneName < $1.recordID.zoneID.zoneName }
                run = []
            }
            run.append(record)
        }
        return result + run.sorted { $0.recordID.zoneID.zoneName < $1.recordID.zoneID.zoneName }
    }

    static func zoneWidePaging(_ env: Environment) async throws {
        let (database, records) = try await zonedItems(env)
        let sorts: [[RecordSortDescriptor]] = [
            [],
            [RecordSortDescriptor(key: "rank", ascending: true)],
            [RecordSortDescriptor(key: "rank", ascending: false)],
            [RecordSortDescriptor(key: "zoneRank", ascending: true)],
            [RecordSortDescriptor(key: "zoneRank", ascending: false)],
        ]
        for sort in sorts {
            let query = Query(recordType: "Item", predicate: QueryPredicate(value: true))
            query.sortDescriptors = sort
            for pageSize in [1, 7, 50, 400] {
                var collected: [Record] = []
                var operation = QueryOperation(query: query)
                operation.resultsLimit = pageSize
                var pages = 0
                while true {
                    let page = await runQueryPage(operation, on: database)
                    if let error = page.error { throw error }
                    collected += page.records
                    pages += 1
                    guard let cursor = page.cursor, pages < 1_000 else { break }
                    #expect(cursor.searchesAllZones)
                    #expect(cursor.continues(query) && !cursor.continues(query, zoneID: .default))
                    let decoded = try QueryOperation.Cursor(serialized: cursor.serialized)
                    #expect(decoded == cursor, "a zone-wide cursor reads back from its text")
                    operation = QueryOperation(cursor: decoded)
                    operation.resultsLimit = pageSize
                }
                expectSameOrder(zoneNames(collected), expectedOrder(records, sort), "sort \(sort.map(\.key)) in pages of \(pageSize)")
            }
        }

        // A filter, through the convenience layer's cursors.
        let filtered = try Query(recordType: "Item", format: "rank >= %@", 7)
        filtered.sortDescriptors = [RecordSortDescriptor(key: "rank", ascending: true)]
        let matched = try await TestDatabase.queryAll(filtered, in: database, pageSize: 5)
        let expected = records.filter { if case .int64(let rank)? = $0.fieldValue(forKey: "rank") { rank >= 7 } else { false } }
        expectSameOrder(zoneNames(matched), expectedOrder(expected, filtered.sortDescriptors ?? []), "rank >= 7 over every zone")
    }

    static func zoneWideReadAll(_ env: Environment) async throws {
        let (database, records) = try await zonedItems(env)
        let query = Query(recordType: "Item", predicate: QueryPredicate(value: true))
        query.sortDescriptors = [RecordSortDescriptor(key: "rank", ascending: true)]
        // Zone after zone (in zone name order), each from a snapshot of its own, in the query's order.
        let expected = ["Alpha", "Beta", "Gamma", "_defaultZone"].flatMap { zone in
            expectedOrder(records.filter { $0.recordID.zoneID.zoneName == zone }, query.sortDescriptors ?? [])
        }

        var streamed: [Record] = []
        for try await record in database.allRecords(matching: query, pageSize: 9) { streamed.append(record) }
        expectSameOrder(zoneNames(streamed), expected, "allRecords without a zone")

        let everything = QueryOperation(query: query)
        everything.fetchAllResults = true
        everything.resultsLimit = 11
        let page = await runQueryPage(everything, on: database)
        #expect(page.error == nil)
        #expect(page.cursor == nil)
        expectSameOrder(zoneNames(page.records), expected, "fetchAllResults without a zone")

        #expect(try await database.countRecords(matching: query) == records.count)
        #expect(try await database.countRecords(matching: query, inZoneWith: RecordZone.ID(zoneName: "Beta")) == records.filter { $0.recordID.zoneID.zoneName == "Beta" }.count)
        #expect(try await database.countRecords(matching: try Query(recordType: "Item", format: "rank == %@", 9)) == records.filter { $0.fieldValue(forKey: "rank") == .int64(9) }.count)

        // A database with only its default zone reads one snapshot, and its cursors still search every zone.
        let bob = env.container(user: "bob").privateCloudDatabase
        _ = try await TestDatabase.save(makeRecords("Item", count: 12) { ["rank": .int64(Int64($0))] }, in: bob)
        let first = QueryOperation(query: query)
        first.resultsLimit = 5
        let bobsPage = await runQueryPage(first, on: bob)
        let cursor = try #require(bobsPage.cursor)
        #expect(cursor.searchesAllZones)
        let notes = try await bob.save(RecordZone(zoneName: "Notes"))
        _ = try await TestDatabase.save([makeRecord("Item", "late", zoneID: notes.zoneID, ["rank": .int64(100)])], in: bob)
        let rest = await runQueryPage(QueryOperation(cursor: cursor), on: bob)
        #expect(rest.error == nil)
        #expect(TestDatabase.names(bobsPage.records + rest.records) == (0..<12).map { recordName("r", $0) } + ["late"],
                "the cursor goes on over the zone created after its first page")
    }

    static func zoneWideEdges(_ env: Environment) async throws {
        let (database, records) = try await zonedItems(env)

        // The merge sorts by a key the caller did not ask for; the records carry only what was asked.
        let query = Query(recordType: "Item", predicate: QueryPredicate(value: true))
        query.sortDescriptors = [RecordSortDescriptor(key: "rank", ascending: false)]
        let narrow = try await TestDatabase.queryAll(query, in: database, desiredKeys: ["place"], pageSize: 13)
        expectSameOrder(zoneNames(narrow), expectedOrder(records, query.sortDescriptors ?? []), "desired keys without the sort key")
        #expect(narrow.allSatisfy { $0.fieldValue(forKey: "rank") == nil && $0.fieldValue(forKey: "place") != nil })

        // A distance sort: each record once, nearest first.
        let origin = Location(latitude: 0, longitude: 0)
        let near = Query(recordType: "Item", predicate: QueryPredicate(value: true))
        near.sortDescriptors = [RecordSortDescriptor(key: "place", relativeLocation: origin)]
        let byDistance = try await TestDatabase.queryAll(near, in: database, pageSize: 17)
        #expect(Set(zoneNames(byDistance)).count == records.count && byDistance.count == records.count, "each record once")
        let distances = byDistance.map { record -> Double in
            guard case .location(let place)? = record.fieldValue(forKey: "place") else { return .infinity }
            return place.distance(from: origin)
        }
        #expect(zip(distances, distances.dropFirst()).allSatisfy { $0 <= $1 + 0.001 }, "nearest first across zones")

        // A zone deleted between pages: the rest of the query reads the other zones.
        let first = QueryOperation(query: query)
        first.resultsLimit = 30
        let page = await runQueryPage(first, on: database)
        let cursor = try #require(page.cursor)
        let gamma = RecordZone.ID(zoneName: "Gamma")
        _ = try await database.modifyRecordZones(saving: [], deleting: [gamma])
        var rest: [Record] = []
        var next: QueryOperation.Cursor? = cursor
        while let current = next {
            let more = await runQueryPage(QueryOperation(cursor: current), on: database)
            if let error = more.error { throw error }
            rest += more.records
            next = more.cursor
        }
        let seen = zoneNames(page.records + rest)
        #expect(Set(seen).count == seen.count, "no record twice")
        let expectedRest = expectedOrder(records, query.sortDescriptors ?? []).filter { !$0.hasPrefix("Gamma/") && !zoneNames(page.records).contains($0) }
        expectSameOrder(zoneNames(rest), expectedRest, "pages after the zone was deleted")
    }

    static func zoneWideScopes(_ env: Environment) async throws {
        let (database, records) = try await zonedItems(env)
        let query = Query(recordType: "Item", predicate: QueryPredicate(value: true))
        let shared = env.container(user: "alice").sharedCloudDatabase
        let refused = await runQueryPage(QueryOperation(query: query), on: shared)
        #expect(stratusError(refused.error)?.code == .invalidArguments)
        #expect(stratusError(refused.error)?.message.contains("zone") == true)
        await #expect(throws: StratusError.self) { _ = try await shared.countRecords(matching: query) }

        let beta = RecordZone.ID(zoneName: "Beta")
        let inBeta = try await TestDatabase.queryAll(query, in: database, zoneID: beta, pageSize: 6)
        #expect(Set(zoneNames(inBeta)) == Set(zoneNames(records.filter { $0.recordID.zoneID == beta })))
        let op = QueryOperation(query: query)
        op.zoneID = beta
        op.resultsLimit = 3
        let cursor = try #require(await runQueryPage(op, on: database).cursor)
        #expect(!cursor.searchesAllZones && cursor.zoneID == beta && cursor.continues(query, zoneID: beta) && !cursor.continues(query))
    }

    static func cursorOfAnotherUser(_ env: Environment) async throws {
        let (alice, _) = try await zonedItems(env)
        // Bob has zones of the same names, with the same record names: continuing Alice's
        // positions there would skip Bob's first records and report success.
        let bob = env.container(user: "bob").privateCloudDatabase
        let zones = ["Alpha", "Beta"].map { RecordZone.ID(zoneName: $0) }
        _ = try await bob.modifyRecordZones(saving: zones.map { RecordZone(zoneID: $0) }, deleting: [])
        for zoneID in [RecordZone.ID.default] + zones {
            _ = try await TestDatabase.save(makeRecords("Item", count: 20, prefix: "i", zoneID: zoneID) { ["rank": .int64(Int64($0))] }, in: bob)
        }
        let query = Query(recordType: "Item", predicate: QueryPredicate(value: true))
        query.sortDescriptors = [RecordSortDescriptor(key: "rank", ascending: true)]
        for zoneID in [nil, RecordZone.ID(zoneName: "Alpha")] as [RecordZone.ID?] {
            let first = QueryOperation(query: query)
            first.zoneID = zoneID
            first.resultsLimit = 10
            let cursor = try #require(await runQueryPage(first, on: alice).cursor)
            let text = cursor.serialized
            let refused = await runQueryPage(QueryOperation(cursor: try QueryOperation.Cursor(serialized: text)), on: bob)
            #expect(stratusError(refused.error)?.code == .invalidArguments, "zone \(zoneID?.zoneName ?? "every zone"): \(String(describing: refused.error))")
            #expect(stratusError(refused.error)?.message.contains("another user") == true)
            #expect(refused.records.isEmpty)
            // Alice goes on with her own cursor.
            let continued = await runQueryPage(QueryOperation(cursor: try QueryOperation.Cursor(serialized: text)), on: alice)
            #expect(continued.error == nil && !continued.records.isEmpty)
        }
    }
}
