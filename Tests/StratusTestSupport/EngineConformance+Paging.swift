import Foundation
import Stratus
import Testing

extension EngineConformance {
    static let pagingCases: [TestCase] = [
        TestCase("10,001 records paged 400 at a time, ascending, with serialized cursors", pagingAscending),
        TestCase("10,001 records paged 400 at a time, descending with missing values", pagingDescending),
        TestCase("10,001 records paged 400 at a time, multi-key sort with missing values", pagingMultiKey),
        TestCase("three-key sorts in every direction, missing values on each key, pages of 23", pagingEveryDirection),
        TestCase("a cursor serializes to text and back", cursorSerializationRoundTrip),
        TestCase("damaged or foreign cursors are invalidArguments", damagedCursorsAreRejected),
    ]

    /// The number of records the paging cases store.
    public static let pagingRecordCount = 10_001
    /// The page size the paging cases use.
    public static let pagingPageSize = 400

    /// 10,001 records of type `Page`: `rank` a permutation of distinct Int64s, `score` a Double
    /// with many ties (missing on every 17th), `group` a small Int64 (missing on every 11th).
    public static func pagingDataset(count: Int = pagingRecordCount) -> [Record] {
        makeRecords("Page", count: count, prefix: "p") { i in
            var fields: [String: FieldValue] = ["rank": .int64(Int64((i * 7_919) % 10_007))]
            if i % 17 != 0 { fields["score"] = .double(Double((i * 31) % 1_000) / 8) }
            if i % 11 != 0 { fields["group"] = .int64(Int64(i % 13)) }
            return fields
        }
    }

    /// Pages through `query` with ``QueryOperation`` and cursors; returns the names in order and
    /// the size of each page.
    static func pageThrough(_ query: Query, _ database: Database, pageSize: Int, serializeCursors: Bool) async throws -> (names: [String], pages: [Int]) {
        var names: [String] = []
        var pages: [Int] = []
        var operation = QueryOperation(query: query)
        operation.resultsLimit = pageSize
        while true {
            let page = await runQueryPage(operation, on: database)
            if let error = page.error { throw error }
            names += TestDatabase.names(page.records)
            pages.append(page.records.count)
            guard let cursor = page.cursor else { break }
            var next = cursor
            if serializeCursors {
                next = try QueryOperation.Cursor(serialized: cursor.serialized)
                #expect(next == cursor, "a cursor read back from its text equals the cursor")
            }
            operation = QueryOperation(cursor: next)
            operation.resultsLimit = pageSize
            if pages.count > 2_000 {
                Issue.record("paging does not end: \(pages.count) pages for \(names.count) records")
                break
            }
        }
        return (names, pages)
    }

    static func expectPagingReturnsEachOnce(_ env: Environment, sort: [RecordSortDescriptor], serializeCursors: Bool) async throws {
        let database = env.container().publicCloudDatabase
        let records = pagingDataset()
        try await TestDatabase.save(records, in: database)
        let query = Query(recordType: "Page")
        query.sortDescriptors = sort
        let expected = TestDatabase.names(try QueryEvaluator.evaluate(query, over: records))
        #expect(expected.count == pagingRecordCount)

        let (names, pages) = try await pageThrough(query, database, pageSize: pagingPageSize, serializeCursors: serializeCursors)
        // Each record exactly once (none skipped, none repeated), in the query's order.
        expectSameOrder(names, expected, "paging \(query)")
        let fullPages = pagingRecordCount / pagingPageSize
        #expect(pages == Array(repeating: pagingPageSize, count: fullPages) + [pagingRecordCount - fullPages * pagingPageSize])
    }

    static func pagingAscending(_ env: Environment) async throws {
        try await expectPagingReturnsEachOnce(env, sort: [RecordSortDescriptor(key: "rank")], serializeCursors: true)
    }

    static func pagingDescending(_ env: Environment) async throws {
        try await expectPagingReturnsEachOnce(env, sort: [RecordSortDescriptor(key: "score", ascending: false)], serializeCursors: false)
    }

    static func pagingMultiKey(_ env: Environment) async throws {
        try await expectPagingReturnsEachOnce(
            env, sort: [RecordSortDescriptor(key: "group"), RecordSortDescriptor(key: "score", ascending: false)], serializeCursors: true)
    }

    static func pagingEveryDirection(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        let records = pagingDataset(count: 600)
        try await TestDatabase.save(records, in: database)
        // Every direction of the keys, so that a page ends in runs of missing values, ties and
        // values of each key, whichever way each key sorts.
        for directions in [(true, true, true), (false, false, false), (true, false, true), (false, true, false)] {
            let query = Query(recordType: "Page")
            query.sortDescriptors = [RecordSortDescriptor(key: "group", ascending: directions.0),
                                     RecordSortDescriptor(key: "score", ascending: directions.1),
                                     RecordSortDescriptor(key: "rank", ascending: directions.2)]
            let expected = TestDatabase.names(try QueryEvaluator.evaluate(query, over: records))
            let (names, _) = try await pageThrough(query, database, pageSize: 23, serializeCursors: true)
            expectSameOrder(names, expected, "paging \(query)")
        }
    }

    static func cursorSerializationRoundTrip(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        try await TestDatabase.save(pagingDataset(count: 30), in: database)
        let query = try Query(recordType: "Page", format: "rank >= %@", 0)
        query.sortDescriptors = [RecordSortDescriptor(key: "score", ascending: false)]
        let first = QueryOperation(query: query)
        first.resultsLimit = 7
        let page1 = await runQueryPage(first, on: database)
        #expect(page1.error == nil)
        #expect(page1.records.count == 7)
        let cursor = try #require(page1.cursor)

        let text = cursor.serialized
        #expect(!text.isEmpty)
        #expect(text.count < 4_096, "a cursor is short text")
        #expect(text.unicodeScalars.allSatisfy { $0.isASCII && (CharacterSet.alphanumerics.contains($0) || $0 == "-" || $0 == "_") },
                "a cursor is URL- and shell-safe: \(text)")
        let decoded = try QueryOperation.Cursor(serialized: text)
        #expect(decoded == cursor)
        #expect(decoded.serialized == text)
        #expect(decoded.zoneID == .default)
        #expect(decoded.continues(query))
        let other = try Query(recordType: "Page", format: "rank >= %@", 1)
        other.sortDescriptors = query.sortDescriptors
        #expect(!decoded.continues(other))

        // Continuing from the decoded cursor gives exactly what the original cursor gives.
        let fromOriginal = QueryOperation(cursor: cursor)
        fromOriginal.resultsLimit = 10
        let fromDecoded = QueryOperation(cursor: decoded)
        fromDecoded.resultsLimit = 10
        let page2a = await runQueryPage(fromOriginal, on: database)
        let page2b = await runQueryPage(fromDecoded, on: database)
        #expect(page2a.error == nil && page2b.error == nil)
        #expect(TestDatabase.names(page2a.records) == TestDatabase.names(page2b.records))
        #expect(page2a.records.count == 10)
        #expect(page2a.cursor == page2b.cursor)

        // And the pages join up with one query over everything.
        let everything = try await TestDatabase.queryAll(query, in: database)
        #expect(TestDatabase.names(page1.records) + TestDatabase.names(page2a.records) == Array(TestDatabase.names(everything).prefix(17)))
    }

    static func damagedCursorsAreRejected(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        try await TestDatabase.save(pagingDataset(count: 10), in: database)
        let query = Query(recordType: "Page")
        query.sortDescriptors = [RecordSortDescriptor(key: "rank")]
        let first = QueryOperation(query: query)
        first.resultsLimit = 3
        let cursor = try #require(await runQueryPage(first, on: database).cursor)
        let text = cursor.serialized
        var notACursor = Data("{\"hello\":\"world\"}".utf8).base64EncodedString()
        notACursor = notACursor.replacingOccurrences(of: "+", with: "-")
        notACursor = notACursor.replacingOccurrences(of: "/", with: "_")
        notACursor = notACursor.replacingOccurrences(of: "=", with: "")
        // With the cursor's own prefix, so that the text is decoded (an older prefix is refused unread).
        let prefix = String(text.prefix(5))
        var damaged: [String] = ["", "garbage", "cursor: " + text, prefix + "!!!!", prefix + notACursor]
        damaged.append(String(text.prefix(5)))
        damaged.append(String(text.dropLast(12)))
        damaged.append(String(text.prefix(text.count / 2)))
        damaged.append("xyz9_" + String(text.dropFirst(5)))
        damaged.append(String(text.dropFirst(1)))
        for bad in damaged {
            do {
                let decoded = try QueryOperation.Cursor(serialized: bad)
                Issue.record("damaged cursor text '\(bad.prefix(30))…' was accepted as \(decoded)")
            } catch let error as StratusError {
                #expect(error.code == .invalidArguments, "damaged cursor '\(bad.prefix(30))…'")
            } catch {
                Issue.record("damaged cursor text threw a non-Stratus error: \(error)")
            }
        }

        // A cursor of one database or container does not continue in another.
        let container = env.container()
        let elsewhere = [
            container.privateCloudDatabase,
            Container(identifier: "com.example.other", engine: env.engine, userName: "alice").publicCloudDatabase,
        ]
        for database in elsewhere {
            let page = await runQueryPage(QueryOperation(cursor: cursor), on: database)
            #expect(stratusError(page.error)?.code == .invalidArguments, "cursor used in \(database.databaseScope) of another container")
            #expect(page.records.isEmpty)
        }
    }
}
