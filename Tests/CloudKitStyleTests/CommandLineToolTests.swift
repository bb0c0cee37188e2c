import Foundation
import Stratus
import StratusSQLite
import StratusStores
import StratusTestSupport
import Testing

// A command-line tool's CloudKit code is synchronous: it adds operations and waits for them
// (waitUntilFinished, addOperations(_:waitUntilFinished:), a DispatchSemaphore around a
// completion handler) on the main thread, then reads what the blocks collected. CloudKit runs
// an operation's blocks before the operation finishes, so a wait that ends sees every result.

@Suite("CloudKit code in a command-line tool, ported")
struct CommandLineToolTests {
    @Test("waitUntilFinished and a semaphore around completion handlers: results are there when the wait ends", arguments: TestEngine.all)
    func synchronousWaits(engine: TestEngine) async throws {
        try await withStore(on: engine) { location, store in
            let path = location
            let report = try await ChildProcess.onOwnThread { try ReportTool(storeLocation: path).run() }
            #expect(report == ["saved 3", "query: a1, a2, a3", "fetched a2 = 2", "deleted a1", "left: a2, a3"])
        }
    }
}

/// A tool in the style of a macOS command-line CloudKit program: everything synchronous.
final class ReportTool {
    let database: Database
    var lines: [String] = []

    init(storeLocation: String) throws {
        database = try Container(identifier: "iCloud.com.example.tool", store: storeLocation, userName: "ops").publicCloudDatabase
    }

    func run() throws -> [String] {
        // CKModifyRecordsOperation on the tool's own queue, waited for.
        let records = (1...3).map { n -> Record in
            let record = Record(recordType: "Article", recordID: Record.ID(recordName: "a\(n)"))
            record["rank"] = n
            return record
        }
        let save = ModifyRecordsOperation(recordsToSave: records, recordIDsToDelete: nil)
        let saved = Collected<[Record]>([])
        save.perRecordSaveBlock = { _, result in if let record = try? result.get() { saved.value.append(record) } }
        save.database = database
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        queue.addOperations([save], waitUntilFinished: true)
        lines.append("saved \(saved.value.count)")

        // CKQueryOperation added to the database, then op.waitUntilFinished().
        let query = QueryOperation(query: Query(recordType: "Article", predicate: QueryPredicate(value: true)))
        let names = Collected<[String]>([])
        let queryDone = Collected(false)
        query.recordMatchedBlock = { id, _ in names.value.append(id.recordName) }
        query.queryResultBlock = { _ in queryDone.value = true }
        database.add(query)
        query.waitUntilFinished()
        lines.append("query: \(names.value.sorted().joined(separator: ", "))" + (queryDone.value ? "" : " (result block not run)"))

        // database.fetch(withRecordID:) with a semaphore.
        let semaphore = DispatchSemaphore(value: 0)
        let rank = Collected<Int?>(nil)
        database.fetch(withRecordID: Record.ID(recordName: "a2")) { record, _ in
            rank.value = record?["rank"] as? Int
            semaphore.signal()
        }
        semaphore.wait()
        lines.append("fetched a2 = \(rank.value.map(String.init) ?? "nil")")

        let deletedID = Collected<Record.ID?>(nil)
        database.delete(withRecordID: Record.ID(recordName: "a1")) { id, _ in
            deletedID.value = id
            semaphore.signal()
        }
        semaphore.wait()
        lines.append("deleted \(deletedID.value?.recordName ?? "nothing")")

        let left = Collected<[String]>([])
        database.perform(Query(recordType: "Article", predicate: QueryPredicate(value: true)), inZoneWith: nil) { records, _ in
            left.value = (records ?? []).map(\.recordID.recordName).sorted()
            semaphore.signal()
        }
        semaphore.wait()
        lines.append("left: \(left.value.joined(separator: ", "))")
        return lines
    }
}
