import Foundation
import Stratus
import StratusSQLite

/// `stratus-bench write`: how fast the library saves records built in memory (no parsing),
/// in batches of 400 through ModifyRecordsOperation, into a fresh store; then the same again
/// (every record updated), to separate the engine's write path from the codecs.
struct WriteBenchmark {
    let recordCount: Int
    let storePath: String

    func run() async throws {
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: storePath + suffix) }
        let engine = try SQLiteEngine(path: storePath)
        let database = Container(identifier: "bench", engine: engine, userName: "bench").publicCloudDatabase
        let start = Date(timeIntervalSince1970: 1_700_000_000)
        func records() -> [Record] {
            (0..<recordCount).map { i in
                let record = Record(recordType: "Row", recordID: Record.ID(recordName: "row-\(i)"))
                record["title"] = "Title number \(i)"
                record["when"] = start.addingTimeInterval(Double(i))
                record["count"] = Int64(i)
                record["score"] = Double(i) / 7
                return record
            }
        }
        for pass in ["insert", "update"] {
            let batch = records()
            let clock = ContinuousClock()
            let elapsed = try await clock.measure {
                let results = try await database.modifyRecords(saving: batch, deleting: [], savePolicy: .allKeys, atomically: false)
                precondition(results.saveResults.count == recordCount)
            }
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            print("\(pass) \(recordCount) records: \(String(format: "%.2f", seconds)) s, \(Int(Double(recordCount) / seconds)) records/s")
        }
    }
}
