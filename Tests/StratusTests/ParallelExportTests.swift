import Foundation
import Stratus
import StratusTestSupport
import StratusTransfer
import Testing

/// A sink that hands each record to a writer on the export's task, one at a time: the
/// one-thread encoding the exporter's parallel one must match byte for byte.
private final class OneByOne: RecordSink {
    let writer: RecordWriter
    init(_ writer: RecordWriter) { self.writer = writer }
    func write(_ record: Record) throws { try writer.write(record) }
}

/// A writer into a temporary file, and the bytes it holds once finished.
private final class WrittenFile {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("stratus-export-\(UUID().uuidString)").path
    let writer: RecordWriter

    init(_ format: RecordFormat, csvFields: [String]? = nil, configure: (RecordWriter) -> Void = { _ in }) throws {
        guard FileManager.default.createFile(atPath: path, contents: nil), let handle = FileHandle(forWritingAtPath: path) else {
            throw StratusError(.internalError, "cannot create \(path)")
        }
        writer = RecordWriter(format: format, output: handle, csvFields: csvFields)
        configure(writer)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    /// Finishes the writer and reads the file.
    func finishedText() throws -> String {
        try writer.finish()
        return String(decoding: try Data(contentsOf: URL(fileURLWithPath: path)), as: UTF8.self)
    }
}

@Suite("RecordExporter encoding pages on several threads", .timeLimit(.minutes(30)))
struct ParallelExportTests {
    static let identifier = "com.example.parallel-export"

    /// Records holding a value of every kind (lists, assets, encrypted values, parents,
    /// fractional dates, escapes), varied record by record, in two zones. Most hold plain values
    /// only, which an export to record JSON writes from the rows the store holds; some hold an
    /// encrypted value, an asset, or CloudKit JSON kept beside their values, which it writes
    /// from their records.
    static func seed(_ database: Database, count: Int, otherZoneCount: Int, files: TemporaryStore) async throws {
        let photo = URL(fileURLWithPath: files.path("photo.bin"))
        try Data("not really a photo".utf8).write(to: photo)
        let other = RecordZone.ID(zoneName: "Other")
        _ = try await database.save(RecordZone(zoneName: "Other"))
        func record(_ i: Int, zone: RecordZone.ID) -> Record {
            var fields = everyNonAssetFieldValue()
            fields["n"] = .int64(Int64(i))
            fields["string"] = .string(trickyStrings[i % trickyStrings.count])
            fields["date"] = .date(preciseDates[i % preciseDates.count])
            fields["doubleFraction"] = .double(Double(i) / 7)
            fields["referenceNone"] = .reference(reference(recordName("row", (i + 1) % count), zoneID: zone))
            if zone == other {
                // References stay in their record's zone.
                fields["referenceDeleteSelf"] = nil
                fields["referenceList"] = nil
            }
            if i % 3 == 0 { fields["stringList"] = .stringList(trickyStrings) }
            fields["asset"] = i % 6 == 1 ? .asset(Asset(fileURL: photo)) : nil
            let made = makeRecord("Row", recordName(zone == other ? "other" : "row", i), zoneID: zone, fields)
            if i % 5 == 2 { made.encryptedValues["secret"] = Data("secret \(i)".utf8) }
            if i > 0 && i % 4 == 0 { made.parent = reference(recordName(zone == other ? "other" : "row", i - 1), zoneID: zone) }
            return made
        }
        var rows = (0..<count).map { record($0, zone: .default) }
        // Records as CloudKit's JSON had them, with members beyond the model.
        let cloudKitJSON = [7, 20].map { i in
            #"{"recordName":"\#(recordName("row", i))","recordType":"Row","fields":{"n":{"value":\#(i),"type":"INT64"},"#
                + #""string":{"value":"kept \#(i)"}},"pluginFields":{},"created":{"timestamp":1700000000000,"userRecordName":"_abc","deviceID":"2"}}"#
        }.joined(separator: "\n")
        let reader = try RecordReader(data: Data(cloudKitJSON.utf8), options: RecordReadOptions())
        while let item = try reader.next() {
            guard case .record(let kept, _) = item else {
                Issue.record("not a record: \(item)")
                continue
            }
            rows[Int(kept["n"] as? Int64 ?? 0)] = kept
        }
        let summary = try await RecordImporter(database: database).run(from: ItemSource(records: rows))
        #expect(summary.created == count)
        // Some records changed after they were made: their modification differs from their creation.
        try await Task.sleep(for: .milliseconds(5))
        for i in stride(from: 3, to: count, by: 6) {
            let changed = try await database.record(for: Record.ID(recordName: recordName("row", i)))
            changed["int64"] = Int64(-i)
            _ = try await database.save(changed)
        }
        let saved = try await database.modifyRecords(saving: (0..<otherZoneCount).map { record($0, zone: other) }, atomically: false)
        for case .failure(let error) in saved.saveResults.values { Issue.record("\(error)") }
    }

    /// What the exporter writes through `sink` into a writer of `format`, and how it ended.
    static func export(
        _ database: Database, _ format: RecordFormat, sorted: Bool, allZones: Bool = false, limit: Int? = nil, parallel: Bool,
        cancelAt: Int? = nil
    ) async throws -> (text: String, summary: RecordExporter.Summary, progress: [Int]) {
        let query = Query(recordType: "Row")
        if sorted { query.sortDescriptors = [RecordSortDescriptor(key: "n", ascending: false)] }
        let exporter = RecordExporter(database: database, query: query, zoneID: allZones ? nil : .default, limit: limit, pageSize: 7)
        let columns: (types: [String: FieldType], encrypted: Set<String>) = format == .csv ? try await exporter.fieldColumns() : ([:], [])
        let file = try WrittenFile(format, csvFields: format == .csv ? columns.types.keys.sorted() : nil) { writer in
            writer.csvTypes = columns.types
            writer.csvEncryptedFields = columns.encrypted
            writer.jsonOptions.writesEveryZoneID = allZones
            // As `stratus export` names the caller's zones: by the caller's user record name.
            writer.jsonOptions.currentUserRecordName = "_caller"
        }
        let reported = ProgressLog()
        let sink: any RecordSink = parallel ? file.writer : OneByOne(file.writer)
        let summary = try await exporter.run(into: sink) { count in
            reported.append(count)
            if let cancelAt, count >= cancelAt { exporter.cancel() }
        }
        #expect(file.writer.recordCount == summary.exported, "the writer holds what the summary reports")
        return (try file.finishedText(), summary, reported.counts)
    }

    @Test("pages encoded on several threads are the bytes of writing record by record, in every format, sorted or not, across zones and up to a limit", arguments: TestEngine.all)
    func sameBytes(engine: TestEngine) async throws {
        try await CLIStoreFixture.with(engine) { fixture in
            let database = fixture.container().privateCloudDatabase
            try await Self.seed(database, count: 61, otherZoneCount: 12, files: fixture.store)
            for format in RecordFormat.allCases {
                for sorted in [false, true] {
                    let parallel = try await Self.export(database, format, sorted: sorted, parallel: true)
                    let oneByOne = try await Self.export(database, format, sorted: sorted, parallel: false)
                    #expect(parallel.summary.exported == 61 && parallel.summary.end == .finished)
                    #expect(parallel.text == oneByOne.text, "\(format), sorted: \(sorted)")
                    #expect(parallel.progress == oneByOne.progress)
                    #expect(parallel.text.contains("ENCRYPTED_BYTES") && parallel.text.contains("row-00060") && parallel.text.contains(format == .csv ? "asset:ASSET" : "file:"))
                    #expect(format == .csv || parallel.text.contains(#""ownerRecordName":"_caller"}"#), "\(format)")
                }
                let limited = try await Self.export(database, format, sorted: true, limit: 30, parallel: true)
                let limitedOneByOne = try await Self.export(database, format, sorted: true, limit: 30, parallel: false)
                #expect(limited.summary.exported == 30 && limited.text == limitedOneByOne.text, "\(format) with a limit")
            }
            // Every zone: the first zone's last page is short, and the pages after it straddle
            // the multiples of the page size where progress is reported.
            for format in [RecordFormat.ndjson, .envelope] {
                let parallel = try await Self.export(database, format, sorted: false, allZones: true, parallel: true)
                let oneByOne = try await Self.export(database, format, sorted: false, allZones: true, parallel: false)
                #expect(parallel.summary.exported == 73 && parallel.text == oneByOne.text)
                #expect(parallel.progress == Array(stride(from: 7, through: 70, by: 7)) + [73])
                #expect(parallel.progress == oneByOne.progress)
            }
        }
    }

    @Test("records another user changed, in the public database, are the bytes of writing record by record", arguments: TestEngine.all)
    func publicRecordsOfTwoUsers(engine: TestEngine) async throws {
        try await CLIStoreFixture.with(engine) { fixture in
            let schema = try SchemaReader().read("""
                DEFINE SCHEMA
                    RECORD TYPE Row (n INT64 QUERYABLE SORTABLE, string STRING, when TIMESTAMP, GRANT READ TO "_world", GRANT CREATE, WRITE TO "_icloud");
                """)
            for type in schema.recordTypes { try await fixture.container().saveSchema(type) }
            let alice = fixture.container().publicCloudDatabase
            let bob = fixture.container(user: "bob").publicCloudDatabase
            // Keys whose order by length (PostgreSQL's jsonb keeps that) is not their order.
            let rows = (0..<100).map { i in
                makeRecord("Row", recordName("row", i), ["n": .int64(Int64(i)), "string": .string(trickyStrings[i % trickyStrings.count]),
                                                         "when": .date(preciseDates[i % preciseDates.count])])
            }
            try await TestDatabase.save(rows, in: alice)
            try await Task.sleep(for: .milliseconds(5))
            for i in stride(from: 1, to: 100, by: 4) {
                let changed = try await bob.record(for: Record.ID(recordName: recordName("row", i)))
                changed["string"] = "changed by bob"
                _ = try await bob.save(changed)
            }
            let bobsName = try await fixture.container(user: "bob").userRecordID().recordName
            for format in [RecordFormat.ndjson, .json] {
                let parallel = try await Self.export(alice, format, sorted: true, parallel: true)
                let oneByOne = try await Self.export(alice, format, sorted: true, parallel: false)
                #expect(parallel.summary.exported == 100 && parallel.text == oneByOne.text, "\(format)")
                #expect(parallel.text.contains(#""modified":{"timestamp":"#) && parallel.text.contains(#""userRecordName":"\#(bobsName)"}"#), "\(format)")
            }
        }
    }

    @Test("SQLite: documents a raw statement wrote, keys out of order or named twice, export as their records do; a damaged one fails the export after whole records before it")
    func rawDocuments() async throws {
        try await CLIStoreFixture.with(.sqlite) { fixture in
            let shell = try #require(["/usr/bin/sqlite3", "/usr/local/bin/sqlite3", "/bin/sqlite3"].first { FileManager.default.isExecutableFile(atPath: $0) },
                                     "the sqlite3 shell is needed (apt-get install sqlite3)")
            let database = fixture.container().privateCloudDatabase
            try await TestDatabase.save((0..<60).map { makeRecord("Row", recordName("row", $0), ["n": .int64(Int64($0)), "string": .string("row \($0)")]) }, in: database)
            func runSQL(_ sql: String) async throws {
                let status = await (try ChildProcess(shell, ["-cmd", ".timeout 10000", fixture.path, sql], in: fixture.store.directory)).wait()
                #expect(status.exitCode == 0, "\(status.stderr)")
            }
            try await runSQL(#"UPDATE records SET fields = '{"string":["S","out of order"],"n":["I",30]}' WHERE record_name = '\#(recordName("row", 30))';"#)
            try await runSQL(#"UPDATE records SET fields = '{"n":["I",1],"n":["I",40],"string":["S","twice"]}' WHERE record_name = '\#(recordName("row", 40))';"#)
            // A key written with an escape, a document without fields, and a value with escapes.
            try await runSQL(#"UPDATE records SET fields = '{"n":["I",31],"str\u0069ng":["S","escaped key"]}' WHERE record_name = '\#(recordName("row", 31))';"#)
            try await runSQL(#"UPDATE records SET fields = '{}' WHERE record_name = '\#(recordName("row", 32))';"#)
            try await runSQL(#"UPDATE records SET fields = '{"n":["I",33],"string":["S","tab\tand \u00e9 \ud83d\ude00"]}' WHERE record_name = '\#(recordName("row", 33))';"#)
            // Unsorted: in the store's change order, which the raw statements left as it was.
            let parallel = try await Self.export(database, .ndjson, sorted: false, parallel: true)
            let oneByOne = try await Self.export(database, .ndjson, sorted: false, parallel: false)
            #expect(parallel.summary.exported == 60 && parallel.text == oneByOne.text)
            let lines = parallel.text.split(separator: "\n")
            #expect(lines[30].contains(#""fields":{"n":{"value":30,"type":"INT64"},"string":{"value":"out of order","type":"STRING"}}"#), "\(lines[30])")
            #expect(lines[40].contains(#""fields":{"n":{"value":40,"type":"INT64"},"string":{"value":"twice","type":"STRING"}}"#), "\(lines[40])")
            #expect(lines[31].contains(#""fields":{"n":{"value":31,"type":"INT64"},"string":{"value":"escaped key","type":"STRING"}}"#), "\(lines[31])")
            #expect(lines[32].contains(#""fields":{}"#), "\(lines[32])")
            #expect(lines[33].contains(#""fields":{"n":{"value":33,"type":"INT64"},"string":{"value":"tab\tand é 😀","type":"STRING"}}"#), "\(lines[33])")

            try await runSQL(#"UPDATE records SET fields = '{"n":["I",' WHERE record_name = '\#(recordName("row", 50))';"#)
            do {
                _ = try await Self.export(database, .ndjson, sorted: false, parallel: true)
                Issue.record("the export succeeded past a damaged document")
            } catch let error as StratusError {
                #expect(error.code == .internalError && error.message.contains("corrupt"), "\(error)")
            }
            let file = try WrittenFile(.ndjson) { $0.jsonOptions.currentUserRecordName = "_caller" }
            await #expect(throws: StratusError.self) { _ = try await RecordExporter(database: database, query: Query(recordType: "Row"), pageSize: 7).run(into: file.writer) }
            let written = try file.finishedText().split(separator: "\n")
            #expect(written.count == 50 && written == Array(lines.prefix(50)), "the whole records before the damaged one, all of them")
        }
    }

    @Test("pages whose bytes outgrow the pages before them, many times over, are written whole and in order, as record by record", arguments: TestEngine.all)
    func pagesOfVaryingSize(engine: TestEngine) async throws {
        try await CLIStoreFixture.with(engine) { fixture in
            let database = fixture.container().privateCloudDatabase
            // Small pages, then pages of 100 kB strings (beyond a batch's first buffer and the
            // size of the page before), then small ones again, in the export's order (n descending).
            let rows = (0..<50).map { i in
                let text = (14..<28).contains(i) ? String(repeating: "é\u{1F600}\"\n", count: 12_000 + i) : "row \(i)"
                return makeRecord("Row", recordName("row", i), ["n": .int64(Int64(i)), "string": .string(text)])
            }
            try await TestDatabase.save(rows, in: database)
            for format in [RecordFormat.ndjson, .csv] {
                let parallel = try await Self.export(database, format, sorted: true, parallel: true)
                let oneByOne = try await Self.export(database, format, sorted: true, parallel: false)
                #expect(parallel.summary.exported == 50 && parallel.text == oneByOne.text, "\(format)")
                #expect(parallel.text.utf8.count > 14 * 12_000 * 8, "\(format): the long strings were written")
            }
        }
    }

    @Test("a cancelled export encoded on several threads reports what it wrote, whole records at a page's end, as record by record does", arguments: TestEngine.all)
    func cancellation(engine: TestEngine) async throws {
        try await CLIStoreFixture.with(engine) { fixture in
            let database = fixture.container().privateCloudDatabase
            try await Self.seed(database, count: 61, otherZoneCount: 12, files: fixture.store)
            for format in RecordFormat.allCases {
                let parallel = try await Self.export(database, format, sorted: true, allZones: format != .csv, parallel: true, cancelAt: 21)
                let oneByOne = try await Self.export(database, format, sorted: true, allZones: format != .csv, parallel: false, cancelAt: 21)
                #expect(parallel.summary == RecordExporter.Summary.cancelled(21), "\(format): \(parallel.summary)")
                #expect(parallel.text == oneByOne.text && parallel.progress == [7, 14, 21], "\(format)")
            }
            let lines = try await Self.export(database, .ndjson, sorted: true, parallel: true, cancelAt: 14).text.split(separator: "\n")
            #expect(lines.count == 14)
            #expect(lines.allSatisfy { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) != nil }, "no half record")
        }
    }

    @Test("a record that cannot be written stops an export encoded on several threads after the records before it, none of it written", arguments: TestEngine.all)
    func failureMidExport(engine: TestEngine) async throws {
        try await CLIStoreFixture.with(engine) { fixture in
            let database = fixture.container().privateCloudDatabase
            try await Self.seed(database, count: 40, otherZoneCount: 0, files: fixture.store)
            // The 24th record in the export's order (n descending), in the middle of the fourth
            // page, holds a field the columns found before lack (as if written in between).
            let odd = try await database.record(for: Record.ID(recordName: recordName("row", 16)))
            odd["added"] = "A"
            _ = try await database.save(odd)
            var texts: [String] = []
            for parallel in [true, false] {
                let query = Query(recordType: "Row")
                query.sortDescriptors = [RecordSortDescriptor(key: "n", ascending: false)]
                let file = try WrittenFile(.csv, csvFields: ["n", "double"]) { writer in
                    writer.csvTypes = ["n": .int64, "double": .double]
                    writer.csvFieldsAreEveryField = true
                }
                let exporter = RecordExporter(database: database, query: query, desiredKeys: ["n", "double", "added"], pageSize: 7)
                do {
                    let sink: any RecordSink = parallel ? file.writer : OneByOne(file.writer)
                    _ = try await exporter.run(into: sink)
                    Issue.record("the export succeeded past a value its column cannot hold")
                } catch let error as StratusError {
                    #expect(error.code == .invalidArguments && error.message.contains(recordName("row", 16)) && error.message.contains("'added'"), "\(error)")
                }
                #expect(file.writer.recordCount == 23, "the records before the failing one were written")
                texts.append(try file.finishedText())
            }
            #expect(texts[0] == texts[1])
            let rows = texts[0].split(separator: "\n", omittingEmptySubsequences: false)
            #expect(rows.count == 1 + 23 + 1 && rows.last == "", "the header, 23 whole rows and nothing of the failing one")
            #expect(rows[23].hasPrefix(recordName("row", 17) + ","))
        }
    }
}

/// The counts a progress callback was given, from whichever thread.
private final class ProgressLog: @unchecked Sendable {
    // @unchecked: `values` is touched under `lock` only.
    private let lock = NSLock()
    private var values: [Int] = []
    func append(_ count: Int) { lock.withLock { values.append(count) } }
    var counts: [Int] { lock.withLock { values } }
}

extension RecordExporter.Summary {
    /// A summary of an export cancelled after `exported` records.
    fileprivate static func cancelled(_ exported: Int) -> Self {
        var summary = Self()
        summary.exported = exported
        summary.end = .cancelled
        return summary
    }
}
