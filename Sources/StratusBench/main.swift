// Benchmarks for Stratus (run through scripts/bench-*; they print figures and ratios).
//
//   stratus-bench query [--records N] [--store PATH|URL] [--only indexes,paging,scans,export,zones]
//   stratus-bench latency --store PATH|URL [--readers N] [--seconds S]
//
// Figures are medians of repeated runs on the same store, compared within the same run.
import Foundation
import Stratus
import StratusSQLite

func takeOption(_ name: String, from arguments: inout [String]) -> String? {
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
    defer { arguments.removeSubrange(index...index + 1) }
    return arguments[index + 1]
}

var arguments = Array(CommandLine.arguments.dropFirst())
let recordCount = Int(takeOption("--records", from: &arguments) ?? "1000000") ?? 1_000_000
let storePath = takeOption("--store", from: &arguments) ?? "/tmp/stratus-bench-query-\(recordCount).sqlite"

switch arguments.first {
case "query":
    var benchmark = QueryBenchmark(recordCount: recordCount, storePath: storePath)
    if let only = takeOption("--only", from: &arguments) {
        let names = only.split(separator: ",").map(String.init)
        let parts = names.compactMap(QueryBenchmark.Part.init(rawValue:))
        guard parts.count == names.count else {
            FileHandle.standardError.write(Data("stratus-bench: --only takes \(QueryBenchmark.Part.allCases.map(\.rawValue).joined(separator: ", "))\n".utf8))
            exit(64)
        }
        benchmark.parts = Set(parts)
    }
    try await benchmark.run()
case "write":
    try await WriteBenchmark(recordCount: recordCount, storePath: storePath).run()
case "latency":
    let readers = Int(takeOption("--readers", from: &arguments) ?? "8") ?? 8
    let seconds = Double(takeOption("--seconds", from: &arguments) ?? "10") ?? 10
    try await LatencyBenchmark(storePath: storePath, readers: readers, seconds: seconds).run()
default:
    FileHandle.standardError.write(Data("usage: stratus-bench query|write|latency [--records N] [--store PATH|URL] [--only PARTS] [--readers N] [--seconds S]\n".utf8))
    exit(64)
}
