import Foundation
import Stratus
import StratusTestSupport
import StratusTransfer
import Synchronization
import Testing

/// The records written, in order; `onWrite` runs after each (1-based count).
final class CollectingSink: RecordSink {
    var records: [Record] = []
    var onWrite: ((Int) -> Void)?
    func write(_ record: Record) throws {
        records.append(record)
        onWrite?(records.count)
    }
}

@Suite("RecordExporter", .timeLimit(.minutes(30)))
struct RecordExporterTests {
    static func seed(_ database: Database, count: Int) async throws {
        let records = items(count)
        let summary = try await RecordImporter(database: database).run(from: ItemSource(records: records))
        #expect(summary.created == count)
    }

    @Test("exports in the query's order across pages, up to the limit")
    func orderAndLimit() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await Self.seed(database, count: 2_500)
            let query = Query(recordType: "Item", predicate: try QueryPredicate(format: "even == 1"))
            query.sortDescriptors = [RecordSortDescriptor(key: "n", ascending: false)]

            let all = CollectingSink()
            let summary = try await RecordExporter(database: database, query: query, pageSize: 100).run(into: all)
            #expect(summary.exported == 1_250 && summary.end == .finished)
            #expect(all.records.map { $0.fieldValue(forKey: "n") } == stride(from: 2_498, through: 0, by: -2).map { FieldValue.int64(Int64($0)) })

            let limited = CollectingSink()
            let some = try await RecordExporter(database: database, query: query, desiredKeys: ["n"], limit: 333, pageSize: 100).run(into: limited)
            #expect(some.exported == 333 && limited.records.count == 333)
            #expect(limited.records.map { $0.fieldValue(forKey: "n") } == Array(all.records.prefix(333).map { $0.fieldValue(forKey: "n") }))
            #expect(limited.records.allSatisfy { $0.allKeys() == ["n"] }, "only the desired keys")

            let none = CollectingSink()
            #expect(try await RecordExporter(database: database, query: query, limit: 0).run(into: none).exported == 0)
            #expect(none.records.isEmpty)
        }
    }

    @Test("cancel() stops after the page being written; progress follows the pages")
    func cancellation() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await Self.seed(database, count: 1_000)
            let exporter = RecordExporter(database: database, query: Query(recordType: "Item"), pageSize: 100)
            let sink = CollectingSink()
            sink.onWrite = { if $0 == 150 { exporter.cancel() } }
            let reported = Mutex<[Int]>([])
            let summary = try await exporter.run(into: sink) { count in reported.withLock { $0.append(count) } }
            #expect(summary.end == .cancelled && summary.exported == 200, "\(summary)")
            #expect(reported.withLock { $0 } == [100, 200])
        }
    }

    @Test("a CSV export whose columns were found before the rows fails on a field written in between, rather than leaving it out")
    func csvColumnsFoundBeforeAWrite() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await Self.seed(database, count: 300)
            let exporter = RecordExporter(database: database, query: Query(recordType: "Item"), pageSize: 100)
            let columns = try await exporter.fieldColumns().types.keys.sorted()
            #expect(columns == ["even", "n"])
            // Another writer adds a field before the rows are read.
            let changed = try await database.record(for: Record.ID(recordName: recordName("item", 5)))
            changed["added"] = "A"
            _ = try await database.save(changed)

            let path = FileManager.default.temporaryDirectory.appendingPathComponent("stratus-csv-\(UUID().uuidString).csv").path
            defer { try? FileManager.default.removeItem(atPath: path) }
            #expect(FileManager.default.createFile(atPath: path, contents: nil))
            let handle = try #require(FileHandle(forWritingAtPath: path))
            let writer = RecordWriter(format: .csv, output: handle, csvFields: columns)
            writer.csvFieldsAreEveryField = true
            do {
                _ = try await exporter.run(into: writer)
                Issue.record("the field written since the columns were found was left out")
            } catch let error as StratusError {
                #expect(error.message.contains(recordName("item", 5)) && error.message.contains("'added'") && error.message.contains("export again"), "\(error)")
            }
            // Columns chosen by the caller are a choice: other fields are left out, as asked.
            let chosen = RecordWriter(format: .csv, output: FileHandle(forWritingAtPath: "/dev/null")!, csvFields: ["n"])
            #expect(try await exporter.run(into: chosen).exported == 300)
        }
    }

    @Test("task cancellation before the first page ends an export cancelled, not failed; a cancelled exporter runs again")
    func earlyCancellationAndReuse() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await Self.seed(database, count: 1_000)
            let exporter = RecordExporter(database: database, query: Query(recordType: "Item"), pageSize: 100)
            let early = try await Task {
                withUnsafeCurrentTask { $0?.cancel() }
                return try await exporter.run(into: CollectingSink())
            }.value
            #expect(early.end == .cancelled, "\(early)")

            exporter.cancel()
            let stopped = try await exporter.run(into: CollectingSink())
            #expect(stopped.end == .cancelled && stopped.exported == 100, "a cancel before run stops it after its first page: \(stopped)")
            let again = try await exporter.run(into: CollectingSink())
            #expect(again.end == .finished && again.exported == 1_000, "the cancel ended with the run it stopped: \(again)")
        }
    }

    @Test("fieldTypes lists every field of the matching records with its type")
    func fieldTypes() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await database.save(makeRecord("Mixed", "a", ["title": .string("x")]))
            try await database.save(makeRecord("Mixed", "b", ["count": .int64(2), "due": .date(Date(timeIntervalSince1970: 0))]))
            let types = try await RecordExporter(database: database, query: Query(recordType: "Mixed"), pageSize: 1).fieldTypes()
            #expect(types == ["title": .string, "count": .int64, "due": .timestamp])
        }
    }
}
