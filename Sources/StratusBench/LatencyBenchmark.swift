import Foundation
@_spi(StratusEngine) import Stratus
import StratusPostgres
import StratusSQLite

/// `stratus-bench latency`: page latencies of readers paging through an indexed query at the
/// same time, each page timed; prints the median and 99th percentile. `scripts/bench-postgres`
/// runs it alone and again while importers write, and compares.
struct LatencyBenchmark {
    let storePath: String
    let readers: Int
    let seconds: Double

    func run() async throws {
        let engine: any StorageEngine = PostgresEngine.isStoreURL(storePath) ? try PostgresEngine(url: storePath, maximumConnections: readers + 2) : try SQLiteEngine(path: storePath)
        let database = Container(identifier: "bench", engine: engine, userName: "bench").publicCloudDatabase
        let query = try Query(recordType: "Item", format: "category == %@", "cat-7")
        query.sortDescriptors = [RecordSortDescriptor(key: "rank")]
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        let latencies = try await withThrowingTaskGroup(of: [Double].self) { group in
            for _ in 0..<readers {
                group.addTask {
                    var times: [Double] = []
                    var cursor: QueryOperation.Cursor?
                    while ContinuousClock.now < deadline {
                        let clock = ContinuousClock()
                        var next: QueryOperation.Cursor?
                        let elapsed = try await clock.measure {
                            next = if let cursor {
                                try await database.records(continuingMatchFrom: cursor, resultsLimit: 400).queryCursor
                            } else {
                                try await database.records(matching: query, resultsLimit: 400).queryCursor
                            }
                        }
                        times.append(Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
                        cursor = next
                    }
                    return times
                }
            }
            var all: [Double] = []
            for try await times in group { all += times }
            return all.sorted()
        }
        guard !latencies.isEmpty else { print("no pages read"); return }
        let median = latencies[latencies.count / 2]
        let p99 = latencies[min(latencies.count - 1, Int(Double(latencies.count) * 0.99))]
        print(String(format: "pages %d median_ms %.3f p99_ms %.3f", latencies.count, median * 1000, p99 * 1000))
    }
}
