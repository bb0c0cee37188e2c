import Foundation
import StratusTestSupport
import Testing

/// A sorted export while another process updates the records it exports (issue 17 item 1):
/// the export reads one snapshot, so each record comes out exactly once, in order.
@Suite("stratus export while another process writes", .serialized, .timeLimit(.minutes(30)))
struct ExportUnderWritesCLITests {
    static let recordCount = 100_000

    @Test("export --sort v of 100,000 records while another process keeps changing v: every record exactly once, in v order", arguments: TestEngine.all)
    func sortedExportUnderUpdates(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            // Made on a thread of their own: the cooperative pool's few threads stay free for
            // the tests running beside this one.
            try await ChildProcess.onOwnThread {
                var random = SplitMix(seed: 17)
                var lines: [String] = []
                lines.reserveCapacity(Self.recordCount)
                for i in 0..<Self.recordCount {
                    lines.append(#"{"recordName":"r\#(String(format: "%06d", i))","recordType":"Item","fields":{"v":{"value":\#(Int.random(in: 0..<1_000_000, using: &random)),"type":"INT64"}}}"#)
                }
                try cli.file("items.ndjson", lines.joined(separator: "\n") + "\n")
                // Updates that move records across the sort order: new values of v for records
                // spread over the whole range, in files the updater imports one after another.
                for file in 0..<4 {
                    let updates = (0..<3_000).map { _ in
                        #"{"recordName":"r\#(String(format: "%06d", Int.random(in: 0..<Self.recordCount, using: &random)))","recordType":"Item","fields":{"v":{"value":\#(Int.random(in: 0..<1_000_000, using: &random)),"type":"INT64"}}}"#
                    }
                    try cli.file("update-\(file).ndjson", updates.joined(separator: "\n") + "\n")
                }
            }
            let imported = try await cli.run(["import", "--quiet", store.path("items.ndjson")])
            #expect(imported.exitCode == 0, "\(imported)")

            let updater = try cli.startShell(#"""
                while [ ! -e stop ]; do
                    for f in update-*.ndjson; do
                        "$STRATUS" import "$f" --mode forceUpdate --quiet || exit 1
                        : > updated
                    done
                done
                """#)
            // The export starts once the updater has committed a batch.
            while !cli.exists(store.path("updated")) && updater.isRunning { try await Task.sleep(for: .milliseconds(20)) }

            let export = try await cli.run(["export", "--type", "Item", "--sort", "v", "--quiet"])
            try cli.file("stop", "")
            let updates = await updater.wait()
            #expect(export.exitCode == 0, "\(export.stderr)")
            #expect(updates.exitCode == 0, "the updater failed: \(updates)")

            let (seen, repeated, outOfOrder) = try await ChildProcess.onOwnThread { () throws -> (Int, [String], Int) in
                var seen = Set<String>()
                var repeated: [String] = []
                var previous: (v: Int, name: String)?
                var outOfOrder = 0
                for line in export.stdoutLines {
                    guard let object = try? JSONLine.object(line), let name = object["recordName"] as? String,
                          let v = JSONLine.value(object, "v").flatMap({ Int($0) }) else {
                        throw ExportLineError(line: String(line.prefix(200)))
                    }
                    if !seen.insert(name).inserted, repeated.count < 5 { repeated.append(name) }
                    if let previous, (previous.v, previous.name) > (v, name) { outOfOrder += 1 }
                    previous = (v, name)
                }
                return (seen.count, repeated, outOfOrder)
            }
            #expect(repeated.isEmpty, "records exported twice: \(repeated)")
            #expect(seen == Self.recordCount, "\(Self.recordCount - seen) records never exported")
            #expect(outOfOrder == 0, "\(outOfOrder) records out of v order")
        }
    }
}

/// A line of the export that is not a record with a whole-number `v`.
struct ExportLineError: Error, CustomStringConvertible {
    var line: String
    var description: String { "not a record with a whole-number v: \(line)" }
}
