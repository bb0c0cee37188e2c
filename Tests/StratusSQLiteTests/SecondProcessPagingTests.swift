import Foundation
@_spi(StratusEngine) import Stratus
@_spi(StratusEngine) import StratusSQLite
import StratusTestSupport
import Testing

/// Paging that starts in this process and continues in `stratus query` processes, through a
/// serialized cursor: every record must come back exactly once, in order.
@Suite("Paging continued by a second process", .timeLimit(.minutes(30)))
struct SecondProcessPagingTests {
    static let identifier = "com.example.paging"

    /// The built `stratus` tool: beside this test bundle, or in a `.build/debug` folder above.
    static func stratusExecutable() -> URL? {
        var candidates: [URL] = []
        if let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            var directory = URL(fileURLWithPath: exe).deletingLastPathComponent()
            candidates.append(directory.appendingPathComponent("stratus"))
            while directory.path != "/" {
                candidates.append(directory.appendingPathComponent(".build/debug/stratus"))
                directory = directory.deletingLastPathComponent()
            }
        }
        var directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        while directory.path != "/" {
            candidates.append(directory.appendingPathComponent(".build/debug/stratus"))
            directory = directory.deletingLastPathComponent()
        }
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) }
    }

    struct ProcessResult {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// Runs the tool with its output in files (so large pages cannot fill a pipe), through
    /// ChildProcess (posix_spawn) as every other test does: Foundation's `Process.run()` on
    /// Linux can crash a test process that holds many descriptors.
    static func runTool(_ executable: URL, _ arguments: [String], in store: TemporaryStore, run: Int) async throws -> ProcessResult {
        let child = try ChildProcess(executable.path, arguments, stdout: store.url("run-\(run).out"), stderr: store.url("run-\(run).err"),
                                     directory: store.directory)
        let status = await child.wait()
        return ProcessResult(status: status.killed ? -1 : status.exitCode, stdout: status.stdout, stderr: status.stderr)
    }

    @Test("10,001 records: page 1 here, then `stratus query --cursor` until the end")
    func pagingContinuesInAnotherProcess() async throws {
        let executable = try #require(
            Self.stratusExecutable(),
            "the `stratus` executable was not found next to the test bundle (/proc/self/exe) or in a .build/debug folder; build it with `swift build` before running the tests")
        try await TemporaryStore.with { store in
            let path = store.path("paging.sqlite")
            let count = EngineConformance.pagingRecordCount
            let records = makeRecords("Item", count: count, prefix: "item") { i in
                ["rank": .int64(Int64(((i * 7_919) % 10_007) / 3)), "label": .string("record \(i)")]
            }
            let database = Container(identifier: Self.identifier, engine: try SQLiteEngine(path: path), userName: "pager").publicCloudDatabase
            try await TestDatabase.save(records, in: database)

            let query = Query(recordType: "Item")
            query.sortDescriptors = [RecordSortDescriptor(key: "rank")]
            let expected = TestDatabase.names(try QueryEvaluator.evaluate(query, over: records))

            // Page 1 in this process.
            let first = QueryOperation(query: query)
            first.resultsLimit = 400
            let page1 = await runQueryPage(first, on: database)
            #expect(page1.error == nil)
            #expect(page1.records.count == 400)
            var names = TestDatabase.names(page1.records)
            var token = try #require(page1.cursor).serialized

            // The rest in other processes, one per page, each given the previous page's cursor.
            var run = 0
            var pageSizes: [Int] = []
            while true {
                run += 1
                let arguments = [
                    "query", "--store", path, "--container", Self.identifier, "--database", "public", "--user", "pager",
                    "--type", "Item", "--sort", "rank", "--limit", "400", "--cursor", token,
                ]
                let result = try await Self.runTool(executable, arguments, in: store, run: run)
                #expect(result.status == 0, "stratus query exited with \(result.status): \(result.stderr)")
                if result.status != 0 { break }
                let lines = result.stdout.split(separator: "\n", omittingEmptySubsequences: true)
                var pageNames: [String] = []
                for line in lines {
                    let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
                    let name = try #require(object?["recordName"] as? String, "each NDJSON line has a recordName: \(line.prefix(200))")
                    pageNames.append(name)
                }
                pageSizes.append(pageNames.count)
                names += pageNames
                let cursorLines = result.stderr.split(separator: "\n").filter { $0.hasPrefix("cursor: ") }
                #expect(cursorLines.count <= 1)
                guard let next = cursorLines.first else { break }
                token = String(next.dropFirst("cursor: ".count)).trimmingCharacters(in: .whitespaces)
                if run > 100 {
                    Issue.record("the second process keeps printing cursors after \(run) runs")
                    break
                }
            }
            #expect(run == 25, "24 full pages and one last page after the first")
            #expect(pageSizes == Array(repeating: 400, count: 24) + [1])
            #expect(names.count == count)
            expectSameOrder(names, expected, "paging continued by `stratus query`")
        }
    }
}
