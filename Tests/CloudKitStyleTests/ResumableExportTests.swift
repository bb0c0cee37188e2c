import Foundation
import Stratus
import StratusSQLite
import StratusStores
import StratusTestSupport
import Testing

// A cron job that exports a large query one page per run, as server-side CloudKit tools do: it
// archives the `CKQueryOperation.Cursor` it got to a file with `NSKeyedArchiver`, and the next
// run (another process, a new container) unarchives it with
// `NSKeyedUnarchiver.unarchivedObject(ofClass: CKQueryOperation.Cursor.self, from:)` and goes
// on with `CKQueryOperation(cursor:)`, setting `desiredKeys` and `resultsLimit` again, as a
// cursor operation needs. The CloudKit original is in the comments.

/// One run of the job: reads one page from where the last run stopped and appends its lines.
struct PagedExportRun {
    let storeLocation: String
    let cursorFile: URL
    let outputFile: URL
    let pageSize: Int

    /// Returns whether more pages remain.
    func run() async throws -> Bool {
        // let container = CKContainer(identifier: "iCloud.com.example.app")
        let container = try Container(identifier: "iCloud.com.example.app", store: storeLocation, userName: "exporter")
        let operation: QueryOperation
        // if let data = try? Data(contentsOf: cursorFile),
        //    let cursor = try NSKeyedUnarchiver.unarchivedObject(ofClass: CKQueryOperation.Cursor.self, from: data) {
        //     operation = CKQueryOperation(cursor: cursor)
        // } else { … }
        if let data = try? Data(contentsOf: cursorFile),
           let cursor = try NSKeyedUnarchiver.unarchivedObject(ofClass: QueryOperation.Cursor.self, from: data) {
            operation = QueryOperation(cursor: cursor)
        } else {
            let query = Query(recordType: "Invoice", predicate: try QueryPredicate(format: "total > %@", 0))
            query.sortDescriptors = [RecordSortDescriptor(key: "number", ascending: true)]
            operation = QueryOperation(query: query)
        }
        operation.desiredKeys = ["number", "total"]
        operation.resultsLimit = pageSize
        operation.qualityOfService = .utility

        let lines = LinesCollector()
        operation.recordMatchedBlock = { _, result in
            if case .success(let record) = result {
                lines.append("\(record["number"] as? Int ?? -1),\(record["total"] as? Double ?? -1),\(record["customer"] == nil)")
            }
        }
        let next: QueryOperation.Cursor? = try await withCheckedThrowingContinuation { continuation in
            operation.queryResultBlock = { result in continuation.resume(with: result) }
            container.publicCloudDatabase.add(operation)
        }
        let handle = try FileHandle(forWritingTo: outputFile)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(lines.all.map { $0 + "\n" }.joined().utf8))
        try handle.close()

        // Keep the cursor for the next run; remove it once the export is complete.
        if let next {
            try NSKeyedArchiver.archivedData(withRootObject: next, requiringSecureCoding: true).write(to: cursorFile, options: .atomic)
            return true
        }
        try? FileManager.default.removeItem(at: cursorFile)
        return false
    }
}

final class LinesCollector: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    func append(_ line: String) { lock.withLock { lines.append(line) } }
    var all: [String] { lock.withLock { lines } }
}

@Suite("A cron export that keeps its query cursor in a file between runs", .timeLimit(.minutes(30)))
struct ResumableExportTests {
    @Test("each run reads one page from the archived cursor; every record is exported once, in order, with the desired keys only", arguments: TestEngine.all)
    func pagesAcrossRuns(engine: TestEngine) async throws {
        try await withStore(on: engine) { location, store in
            let writer = try Container(identifier: "iCloud.com.example.app", store: location, userName: "clerk")
            var invoices: [Record] = []
            for number in 1...11 {
                let invoice = Record(recordType: "Invoice")
                invoice["number"] = number
                invoice["total"] = Double(number) * 10
                invoice["customer"] = "Customer \(number)"
                invoices.append(invoice)
            }
            _ = try await writer.publicCloudDatabase.modifyRecords(saving: invoices, deleting: [])

            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("export-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: folder) }
            let output = folder.appendingPathComponent("invoices.csv")
            try Data().write(to: output)
            let job = PagedExportRun(storeLocation: location, cursorFile: folder.appendingPathComponent("cursor"), outputFile: output, pageSize: 4)

            var runs = 0
            var more = true
            while more {
                more = try await job.run()
                runs += 1
                // A record added after the first page was read sorts after it: the keyset cursor
                // picks it up (CloudKit's offset cursor may or may not).
                if runs == 1 {
                    let late = Record(recordType: "Invoice")
                    late["number"] = 12
                    late["total"] = 120.0
                    _ = try await writer.publicCloudDatabase.save(late)
                }
            }
            #expect(runs == 3)
            #expect(!FileManager.default.fileExists(atPath: job.cursorFile.path))
            let lines = try String(contentsOf: output, encoding: .utf8).split(separator: "\n").map(String.init)
            #expect(lines == (1...12).map { "\($0),\(Double($0) * 10),true" })
        }
    }
}
