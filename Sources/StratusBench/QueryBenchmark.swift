import Foundation
import SeededRandom
@_spi(StratusEngine) import Stratus
@_spi(StratusEngine) import StratusPostgres
@_spi(StratusEngine) import StratusSQLite
import StratusTransfer

/// `scripts/bench-query`: indexed against unindexed queries, cursor paging against one
/// streaming read, the last page against the first, and scans (a count, a page sorted by an
/// unindexed field) against the `sqlite3` shell, and a whole read and an export sorted by an
/// unindexed field against the unsorted ones.
struct QueryBenchmark {
    /// The parts of the benchmark, in the order they run (`--only` picks some).
    enum Part: String, CaseIterable {
        /// Indexed against unindexed equality plus sort.
        case indexes
        /// Cursor pages against one streaming read, and the last page against the first.
        case paging
        /// A count and a first page no index serves, against the `sqlite3` shell.
        case scans
        /// Every record sorted by an unindexed field, against the unsorted read.
        case export
        /// A query without a zone over ten zones, against querying each zone by itself.
        case zones
    }

    let recordCount: Int
    let storePath: String
    /// The parts to run: all by default.
    var parts: Set<Part> = Set(Part.allCases)
    let categories = 100
    let pageSize = 400

    /// The store's engine: PostgreSQL for a URL, else an SQLite file.
    private var isPostgres: Bool { PostgresEngine.isStoreURL(storePath) }

    private func plan(_ engine: any StorageEngine, _ query: CompiledQuery, _ database: Database, after position: QueryPosition? = nil) throws -> String {
        let text = switch engine {
        case let sqlite as SQLiteEngine: try sqlite.queryPlan(for: query, in: database.context, after: position)
        case let postgres as PostgresEngine: try postgres.queryPlan(for: query, in: database.context, after: position)
        default: "?"
        }
        return text.replacingOccurrences(of: "\n", with: " | ")
    }

    func run() async throws {
        let engine: any StorageEngine = isPostgres ? try PostgresEngine(url: storePath) : try SQLiteEngine(path: storePath)
        let container = Container(identifier: "bench", engine: engine, userName: "bench")
        let database = container.publicCloudDatabase
        try await fill(database)
        var schema = RecordTypeSchema(recordType: "Item")
        schema.addField("category", type: .string, indexes: [.queryable])
        schema.addField("rank", type: .int64, indexes: [.sortable])
        schema.compoundIndexes = [.init(equalityFields: ["category"], sortField: "rank")]
        try await measure("build indexes") { try await container.saveSchema(schema) }
        if parts.contains(.indexes) { try await indexes(engine, database) }
        if parts.contains(.paging) { try await paging(engine, database) }
        if !isPostgres, parts.contains(.scans) { try await scans(database) }
        if !isPostgres, parts.contains(.export) { try await sortedRead(database) }
        if parts.contains(.zones) { try await zoneWide(container) }
    }

    /// 6. A query without a zone over ten zones of a private database (a tenth of the records
    /// each, at most 20,000), against the same query run zone by zone: every page through
    /// cursors, the first page, and one read of every match.
    private func zoneWide(_ container: Container) async throws {
        let database = container.privateCloudDatabase
        let zones = (0..<10).map { RecordZone.ID(zoneName: "zone-\($0)") }
        let perZone = max(1, min(recordCount / 10, 20_000))
        let sorted = Query(recordType: "Item")
        sorted.sortDescriptors = [RecordSortDescriptor(key: "rank")]
        let existing = try await database.countRecords(matching: Query(recordType: "Item"))
        if existing != perZone * zones.count {
            precondition(existing == 0, "the private database holds \(existing) records, not \(perZone * zones.count); remove the store")
            _ = try await database.modifyRecordZones(saving: zones.map { RecordZone(zoneID: $0) }, deleting: [])
            var generator = SeededGenerator(seed: 7)
            for zone in zones {
                for start in stride(from: 0, to: perZone, by: 10_000) {
                    let records = (start..<min(perZone, start + 10_000)).map { i -> Record in
                        let record = Record(recordType: "Item", recordID: Record.ID(recordName: String(format: "item-%08d", i), zoneID: zone))
                        record["rank"] = Int64(generator.next() % 1_000_000_000)
                        return record
                    }
                    _ = try await database.modifyRecords(saving: records, deleting: [], savePolicy: .allKeys, atomically: false)
                }
            }
        }
        func pageThrough(_ zoneID: RecordZone.ID?) async throws -> Int {
            var (matches, cursor) = try await database.records(matching: sorted, inZoneWith: zoneID, resultsLimit: pageSize)
            var count = matches.count
            while let next = cursor {
                (matches, cursor) = try await database.records(continuingMatchFrom: next, resultsLimit: pageSize)
                count += matches.count
            }
            return count
        }
        var merged = 0, separate = 0
        let mergedPaging = try await time { merged = try await pageThrough(nil) }
        let separatePaging = try await time { for zone in zones { separate += try await pageThrough(zone) } }
        precondition(merged == perZone * zones.count && separate == merged, "paged \(merged) without a zone and \(separate) zone by zone")
        report("\(merged) records of 10 zones paged \(pageSize) at a time, no zone (merged by rank)", mergedPaging)
        report("the same, each zone paged by itself", separatePaging)
        print(String(format: "ratio no zone / zone by zone, every page: %.2fx", mergedPaging / separatePaging))

        let firstMerged = try await median(runs: 21) { _ = try await database.records(matching: sorted, resultsLimit: pageSize) }
        let firstOfZone = try await median(runs: 21) { _ = try await database.records(matching: sorted, inZoneWith: zones[0], resultsLimit: pageSize) }
        report("first page of \(pageSize), no zone", firstMerged)
        report("first page of \(pageSize), one zone", firstOfZone)
        print(String(format: "ratio first page no zone / one zone: %.2fx (ten zones)", firstMerged / firstOfZone))

        var streamed = 0
        let mergedRead = try await time { for try await _ in database.allRecords(matching: sorted, pageSize: 1_000) { streamed += 1 } }
        let separateRead = try await time { for zone in zones { for try await _ in database.allRecords(matching: sorted, inZoneWith: zone, pageSize: 1_000) { streamed += 1 } } }
        precondition(streamed == 2 * merged, "read \(streamed) of \(2 * merged)")
        report("allRecords, no zone", mergedRead)
        report("allRecords zone by zone (each one snapshot)", separateRead)
        print(String(format: "ratio allRecords no zone / zone by zone: %.2fx", mergedRead / separateRead))
    }

    private func indexes(_ engine: any StorageEngine, _ database: Database) async throws {
        // 1. Equality filter plus sort, one page of 400: indexed fields against unindexed copies.
        let indexed = try query("category == %@", "cat-7", sort: "rank")
        let unindexed = try query("categoryCopy == %@", "cat-7", sort: "rankCopy")
        print("plan (indexed):   " + (try plan(engine, CompiledQuery(indexed, zoneID: .default, desiredKeys: nil), database)))
        print("plan (unindexed): " + (try plan(engine, CompiledQuery(unindexed, zoneID: .default, desiredKeys: nil), database)))
        let fast = try await median(runs: 21) { _ = try await database.records(matching: indexed, resultsLimit: pageSize) }
        let slow = try await median(runs: 5) { _ = try await database.records(matching: unindexed, resultsLimit: pageSize) }
        // What a query without a zone adds: listing the zones, and searching each.
        let named = try await median(runs: 21) { _ = try await database.records(matching: indexed, inZoneWith: .default, resultsLimit: pageSize) }
        report("equality + sort, first page of \(pageSize), indexed", fast)
        report("same on unindexed copies", slow)
        print(String(format: "ratio unindexed / indexed: %.1fx (goal >= 100x)", slow / fast))
        report("indexed, zone named (no zone listing)", named)
        print(String(format: "ratio no zone / zone named: %.2fx (the database has one zone)", fast / named))
    }

    private func paging(_ engine: any StorageEngine, _ database: Database) async throws {
        // 2. Every page of 400 through cursors against one streaming read of the same records.
        let all = Query(recordType: "Item")
        all.sortDescriptors = [RecordSortDescriptor(key: "rank")]
        let compiled = try CompiledQuery(all, zoneID: .default, desiredKeys: nil)
        var streamed = 0
        let stream = try await time {
            streamed = try engine.queryRecords(compiled, in: database.context, after: nil, limit: recordCount + 1).records.count
        }
        var paged = 0
        var pages = 0
        var lastCursor: QueryOperation.Cursor?
        var cursorBeforeLast: QueryOperation.Cursor?
        let walk = try await time {
            var (matches, cursor) = try await database.records(matching: all, resultsLimit: pageSize)
            paged += matches.count
            pages += 1
            while let next = cursor {
                cursorBeforeLast = lastCursor
                lastCursor = next
                (matches, cursor) = try await database.records(continuingMatchFrom: next, resultsLimit: pageSize)
                paged += matches.count
                pages += 1
            }
        }
        precondition(streamed == recordCount && paged == recordCount, "read \(streamed) streamed and \(paged) paged of \(recordCount)")
        report("one streaming read of \(streamed) records sorted by rank", stream)
        report("\(pages) pages of \(pageSize) through cursors", walk)
        print(String(format: "ratio paged / streamed: %.2fx (goal <= 1.3x)", walk / stream))

        // 3. The last page against the first.
        let first = try await median(runs: 21) { _ = try await database.records(matching: all, resultsLimit: pageSize) }
        let lastPageCursor = lastCursor ?? cursorBeforeLast
        let last = try await median(runs: 21) {
            if let lastPageCursor { _ = try await database.records(continuingMatchFrom: lastPageCursor, resultsLimit: pageSize) }
        }
        // A cursor of the zone itself: a query without a zone keeps each zone's position apart.
        if let position = try await database.records(matching: all, inZoneWith: .default, resultsLimit: pageSize).queryCursor?.position {
            print("plan (page after a cursor): " + (try plan(engine, compiled, database, after: position)))
        }
        report("first page of \(pageSize) sorted by rank", first)
        report("last page", last)
        print(String(format: "ratio last / first page: %.2fx (goal <= 1.5x)", last / first))
    }

    /// 4. Scans no index serves, against the `sqlite3` shell scanning the same rows with
    /// `json_extract`. The shell's statements say `NOT INDEXED`: left alone, the shell's planner
    /// walks the type's partial `rank` index for `record_type = 'Item'` and reads the table in
    /// that order, one random read per row, three times as slow as its plain scan.
    private func scans(_ database: Database) async throws {
        guard let shell = ["/usr/bin/sqlite3", "/usr/local/bin/sqlite3"].first(where: FileManager.default.isExecutableFile) else {
            print("scans: the sqlite3 shell is missing (apt-get install sqlite3); skipped")
            return
        }
        let filter = try Query(recordType: "Item", format: "categoryCopy == %@", "cat-7")
        var counted = 0
        let count = try await median(runs: 3) { counted = try await database.countRecords(matching: filter) }
        var shellCounted = 0
        let shellCount = try await median(runs: 3) {
            shellCounted = Int(try runShell(shell, "SELECT count(*) FROM records NOT INDEXED WHERE record_type = 'Item' AND json_extract(fields, '$.categoryCopy[1]') = 'cat-7'")) ?? -1
        }
        precondition(counted == shellCounted, "counted \(counted), the shell \(shellCounted)")
        report("count of categoryCopy == 'cat-7' (\(counted) of \(recordCount))", count)
        report("sqlite3 shell, count(*) with json_extract", shellCount)
        print(String(format: "ratio count / shell: %.2fx (goal <= 1.5x)", count / shellCount))

        let sorted = Query(recordType: "Item")
        sorted.sortDescriptors = [RecordSortDescriptor(key: "rankCopy")]
        let page = try await median(runs: 3) { _ = try await database.records(matching: sorted, resultsLimit: pageSize) }
        let shellPage = try await median(runs: 3) {
            _ = try runShell(shell, "SELECT record_name, record_type, created_at, created_by, modified_at, modified_by, change_tag, fields, parent_name FROM records NOT INDEXED WHERE record_type = 'Item' ORDER BY json_extract(fields, '$.rankCopy[1]'), record_name LIMIT \(pageSize)")
        }
        report("first page of \(pageSize) sorted by unindexed rankCopy", page)
        report("sqlite3 shell, the same rows ORDER BY json_extract LIMIT", shellPage)
        print(String(format: "ratio page / shell: %.2fx (goal <= 1.5x)", page / shellPage))
    }

    /// 5. A whole read sorted by an unindexed field against the unsorted read.
    private func sortedRead(_ database: Database) async throws {
        let sorted = Query(recordType: "Item")
        sorted.sortDescriptors = [RecordSortDescriptor(key: "rankCopy")]
        var unsortedCount = 0, sortedCount = 0
        let unsortedRead = try await time { for try await _ in database.allRecords(matching: Query(recordType: "Item"), pageSize: 1_000) { unsortedCount += 1 } }
        let sortedRead = try await time { for try await _ in database.allRecords(matching: sorted, pageSize: 1_000) { sortedCount += 1 } }
        precondition(unsortedCount == recordCount && sortedCount == recordCount, "read \(unsortedCount) and \(sortedCount) of \(recordCount)")
        report("allRecords, every record unsorted", unsortedRead)
        report("allRecords, every record sorted by unindexed rankCopy", sortedRead)
        print(String(format: "ratio sorted / unsorted read: %.2fx", sortedRead / unsortedRead))
        // The export itself, as `stratus export` runs it: the library's exporter writing NDJSON.
        let unsortedExport = try await export(Query(recordType: "Item"), database)
        let sortedExport = try await export(sorted, database)
        report("export (RecordExporter, NDJSON), every record unsorted", unsortedExport)
        report("export, every record sorted by unindexed rankCopy", sortedExport)
        print(String(format: "ratio sorted / unsorted export: %.2fx (goal <= 2x)", sortedExport / unsortedExport))
    }

    private func export(_ query: Query, _ database: Database) async throws -> Double {
        let output = try FileHandle(forWritingTo: URL(fileURLWithPath: "/dev/null"))
        defer { try? output.close() }
        let writer = RecordWriter(format: .ndjson, output: output)
        var exported = 0
        let seconds = try await time {
            exported = try await RecordExporter(database: database, query: query).run(into: writer).exported
            try writer.finish()
        }
        precondition(exported == recordCount, "exported \(exported) of \(recordCount)")
        return seconds
    }

    /// Runs one statement in the `sqlite3` shell on the store and answers its output.
    private func runShell(_ shell: String, _ sql: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: shell)
        process.arguments = ["-readonly", storePath, sql]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private func query(_ format: String, _ value: String, sort: String) throws -> Query {
        let query = try Query(recordType: "Item", format: format, value)
        query.sortDescriptors = [RecordSortDescriptor(key: sort)]
        return query
    }

    /// Fills the store once; a store of the right size is reused between runs.
    private func fill(_ database: Database) async throws {
        let existing = try await database.countRecords(matching: Query(recordType: "Item"))
        if existing == recordCount { print("store \(storePath) holds \(existing) records"); return }
        precondition(existing == 0, "\(storePath) holds \(existing) records, not \(recordCount); remove it")
        var generator = SeededGenerator(seed: 42)
        let batch = 10_000
        let seconds = try await time {
            for start in stride(from: 0, to: recordCount, by: batch) {
                let records = (start..<min(recordCount, start + batch)).map { i -> Record in
                    let record = Record(recordType: "Item", recordID: Record.ID(recordName: String(format: "item-%08d", i)))
                    let category = "cat-\(Int(generator.next() % UInt64(categories)))"
                    let rank = Int64(generator.next() % 1_000_000_000)
                    record["category"] = category
                    record["categoryCopy"] = category
                    record["rank"] = rank
                    record["rankCopy"] = rank
                    record["name"] = "Item number \(i)"
                    return record
                }
                let results = try await database.modifyRecords(saving: records, deleting: [], savePolicy: .allKeys, atomically: false)
                for (_, result) in results.saveResults { _ = try result.get() }
            }
        }
        report("generated \(recordCount) records", seconds)
    }

    private func median(runs: Int, _ body: () async throws -> Void) async throws -> Double {
        var times: [Double] = []
        for _ in 0..<runs { times.append(try await time(body)) }
        return times.sorted()[runs / 2]
    }

    private func time(_ body: () async throws -> Void) async throws -> Double {
        let clock = ContinuousClock()
        let elapsed = try await clock.measure { try await body() }
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    private func measure(_ label: String, _ body: () async throws -> Void) async throws {
        report(label, try await time(body))
    }

    private func report(_ label: String, _ seconds: Double) {
        print(label.padding(toLength: 60, withPad: " ", startingAt: 0) + String(format: "%10.3f ms", seconds * 1000))
    }
}

