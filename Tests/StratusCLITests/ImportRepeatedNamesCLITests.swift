import Foundation
import StratusTestSupport
import Testing

/// `stratus import` of input that names records more than once (a change feed replayed, an
/// event log): every line's outcome is the one it has when each line is imported alone, in
/// input order, whatever the batch size; a killed run resumes to exactly the input's end.
@Suite("stratus import: names repeated in the input", .timeLimit(.minutes(30)))
struct ImportRepeatedNamesCLITests {
    static func line(_ name: String, tag: String? = nil, _ fields: String) -> String {
        #"{"recordName":"\#(name)","recordType":"Node"\#(tag.map { #","recordChangeTag":"\#($0)""# } ?? ""),"fields":{\#(fields)}}"#
    }
    static func n(_ value: Int) -> String { #""n":{"value":\#(value),"type":"INT64"}"# }
    static func deletion(_ name: String) -> String { #"{"recordName":"\#(name)","deleted":true}"# }

    /// What every store holds first: `tagged` with change tag `t1` (restored as it was), `gone`.
    static let seed = [
        line("tagged", tag: "t1", n(1) + #","label":{"value":"stored","type":"STRING"}"#),
        line("gone", n(8)),
    ].joined(separator: "\n") + "\n"

    /// Updates in a row, creations and their deletions, a deletion of what is not stored, a
    /// line the reader rejects and one the store rejects between lines of their name, a change
    /// tag from the input used twice, and one name many times.
    static let input = ([
        line("a", n(1) + #","label":{"value":"first","type":"STRING"}"#),
        line("a", n(2)),
        line("b", n(1)),
        deletion("b"),
        deletion("c"),
        line("c", n(3)),
        line("tagged", tag: "t1", n(2)),
        line("tagged", tag: "t1", n(3)),
        line("a", #""n":{"value":"x","type":"INT64"}"#),
        line("s", #""label":{"value":4,"type":"INT64"}"#),
        line("s", n(5)),
        deletion("s"),
        line("s", n(6)),
        deletion("gone"),
        line("gone", n(10)),
        line("a", n(7)),
    ] + (1...6).map { line("same", n($0 % 2)) }).joined(separator: "\n") + "\n"

    /// What a run said and left: exit code, summary (without its time), reject lines (the
    /// start of each error: change tags differ from store to store) and every record's fields.
    struct Outcome: Equatable, CustomStringConvertible {
        var exitCode: Int32
        var summary: String
        var rejects: [String]
        var records: [String: String]
        var description: String { "exit \(exitCode), \(summary)\nrejects \(rejects)\nrecords \(records)" }
    }

    static func run(_ cli: CLI, _ arguments: [String], store: String) async throws -> Outcome {
        let rejects = cli.store.path("rejects-\(UUID().uuidString.prefix(8)).ndjson")
        let result = try await cli.run(["import", try cli.file("input.ndjson", input), "--store", store, "--reject-file", rejects] + arguments)
        let summary = (result.stderrLines.last ?? "").replacing(#/ in [0-9.]+ s$/#, with: "")
        var records: [String: String] = [:]
        for (name, record) in try await cli.exported("Node", extra: ["--store", store]) {
            let fields = try JSONSerialization.data(withJSONObject: record["fields"] ?? [:], options: [.sortedKeys])
            records[name] = String(decoding: fields, as: UTF8.self)
        }
        let lines = try RejectLine.read(rejects).map { "\($0.line) \($0.recordName ?? "") \($0.error.prefix(30))" }
        return Outcome(exitCode: result.exitCode, summary: summary, rejects: lines, records: records)
    }

    @Test("every line's outcome, the summary, the reject file, the exit code and the end state are those of the same input imported a line per batch, in several modes and batch sizes (repeats within and across batches)", arguments: TestEngine.all)
    func sameAsLineByLine(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            for mode in [[], ["--mode", "update"], ["--mode", "create"], ["--mode", "replace"]] {
                var outcomes: [Outcome] = []
                for size in ["1", "4", "1000"] {
                    let location = try await cli.newStore("s\(outcomes.count)-\(mode.last ?? "default").sqlite")
                    let seeded = try await cli.run(["import", "--store", location, "--quiet"], stdin: Self.seed)
                    #expect(seeded.exitCode == 0, "\(seeded)")
                    outcomes.append(try await Self.run(cli, mode + ["--batch-size", size], store: location))
                }
                #expect(outcomes[1] == outcomes[0], "\(mode), batches of 4:\n\(outcomes[1])\nline by line:\n\(outcomes[0])")
                #expect(outcomes[2] == outcomes[0], "\(mode), batches of 1000:\n\(outcomes[2])\nline by line:\n\(outcomes[0])")
                if mode.isEmpty {
                    // So that the comparison compares something.
                    let reference = outcomes[0]
                    #expect(reference.exitCode == 1 && reference.records["b"] == nil && reference.records["s"] == #"{"n":{"type":"INT64","value":6}}"#, "\(reference)")
                    #expect(reference.records["gone"] == #"{"n":{"type":"INT64","value":10}}"# && reference.records["same"] == #"{"n":{"type":"INT64","value":0}}"#, "\(reference)")
                    #expect(reference.rejects.map { $0.prefix(2) } == ["9 ", "10"], "\(reference)")
                }
                if mode == ["--mode", "update"] {
                    // The input's tag matches the stored record once: the second line finds it changed.
                    #expect(outcomes[0].rejects.contains { $0.hasPrefix("8 tagged serverRecordChanged") }, "\(outcomes[0])")
                }
            }
        }
    }

    @Test("creations and their deletions and repeated updates: killed (SIGKILL) mid-input as soon as a checkpoint moved, the resumed import ends with exactly the input's end state, nothing rejected", arguments: TestEngine.all)
    func killedAndResumed(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            var lines: [String] = []
            for k in 0..<15_000 {
                lines.append(Self.line("r\(k)", Self.n(k)))
                lines.append(Self.line("u\(k % 100)", Self.n(k)))
                lines.append(Self.deletion("r\(k)"))
                if k % 3 == 0 { lines.append(Self.line("r\(k)", Self.n(-k))) }
            }
            let path = try cli.file("feed.ndjson", lines.joined(separator: "\n") + "\n")
            let checkpoint = store.path("import.checkpoint")
            let rejects = store.path("rejects.ndjson")
            let arguments = ["import", path, "--batch-size", "500", "--checkpoint", checkpoint, "--reject-file", rejects, "--quiet"]
            var kills = 0
            for _ in 0..<3 {
                let running = try cli.start(arguments)
                let moved = try await CheckpointCLITests.signal(running, SIGKILL) { (CheckpointCLITests.committedItems(checkpoint) ?? 0) > 0 }
                let ended = await running.wait()
                guard moved && ended.signalled else { break }
                kills += 1
            }
            let last = try await cli.run(arguments)
            #expect(last.exitCode == 0, "\(last)")
            #expect(!cli.exists(checkpoint))
            #expect(try RejectLine.read(rejects).isEmpty)
            let stored = try await cli.exported("Node")
            var expected: [String: Int] = [:]
            for k in 0..<15_000 where k % 3 == 0 { expected["r\(k)"] = -k }
            for u in 0..<100 { expected["u\(u)"] = 14_900 + u }
            #expect(stored.count == expected.count, "\(stored.count) records, \(expected.count) expected (killed \(kills) times)")
            let wrong = expected.filter { name, value in JSONLine.value(stored[name] ?? [:], "n") != "\(value)" }.keys.sorted()
            #expect(wrong.isEmpty, "records not as the input ends them: \(wrong.prefix(5)) (killed \(kills) times)")
        }
    }
}
