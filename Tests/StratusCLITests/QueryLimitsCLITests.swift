import Foundation
import Stratus
import StratusTestSupport
import Testing

/// Very large predicates and sort orders (issue 17 item 17): up to the documented limits they
/// work on every engine, cursors included; beyond them they are refused with exit 64 before
/// anything is opened, never a failure inside the store (exit 70).
@Suite("stratus query limits: conditions and sort keys", .timeLimit(.minutes(30)))
struct QueryLimitsCLITests {
    static func conditions(_ count: Int) -> String {
        (0..<count).map { "count != \(100_000 + $0)" }.joined(separator: " AND ")
    }

    static func sorts(_ count: Int) -> [String] {
        (0..<count).flatMap { ["--sort", $0 == 0 ? "count:desc" : "k\($0)\($0 % 2 == 0 ? ":desc" : "")"] }
    }

    @Test("500 conditions and 100 sort keys work; 501 conditions, 1,000 conditions, 101 and 2,001 sort keys are exit 64 naming the limit", arguments: TestEngine.all)
    func limits(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(30)).exitCode == 0)
            let most = Self.conditions(QueryPredicate.maximumConditions)
            #expect(try await cli.count("Note", where: most) == 30)
            let page = try await cli.run(["query", "--type", "Note", "--where", most, "--limit", "7"] + Self.sorts(100))
            #expect(page.exitCode == 0, "\(page)")
            #expect(try JSONLine.names(page.stdout) == (24...30).reversed().map { "n\($0)" })
            let export = try await cli.run(["export", "--type", "Note", "--where", most, "--quiet"] + Self.sorts(100))
            #expect(export.exitCode == 0, "\(export)")
            #expect(try JSONLine.names(export.stdout) == (1...30).reversed().map { "n\($0)" })

            for (label, arguments) in [
                ("501 conditions", ["count", "--type", "Note", "--where", Self.conditions(501)]),
                ("1,000 conditions", ["export", "--type", "Note", "--where", Self.conditions(1_000)]),
            ] {
                let refused = try await cli.run(arguments)
                #expect(refused.exitCode == 64, "\(label): \(refused)")
                #expect(refused.stderr.contains("more than 500 conditions") && refused.stderr.contains("column"), "\(label): \(refused)")
            }
            for count in [101, 2_001] {
                let refused = try await cli.run(["export", "--type", "Note", "--quiet"] + Self.sorts(count))
                #expect(refused.exitCode == 64, "\(count) sort keys: \(refused)")
                #expect(refused.stderr.contains("at most 100 keys"), "\(refused)")
            }
        }
    }

    @Test("a key sorted twice (count, then count:desc) is exit 64 naming the key, for query and export; nothing is printed", arguments: TestEngine.all)
    func keySortedTwice(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(3)).exitCode == 0)
            for command in ["query", "export"] {
                let refused = try await cli.run([command, "--type", "Note", "--sort", "count", "--sort", "title", "--sort", "count:desc"])
                #expect(refused.exitCode == 64, "\(command): \(refused)")
                #expect(refused.stderr.contains("--sort names 'count' twice") && refused.stdout.isEmpty, "\(command): \(refused)")
            }
        }
    }

    /// Pages through 30 notes with `query --cursor`, `sortKeys` keys and the most conditions.
    static func pageThrough(_ cli: CLI, sortKeys: Int) async throws -> [String] {
        var names: [String] = []
        var cursor: String?
        var pages = 0
        repeat {
            var arguments = ["query", "--limit", "7"]
            arguments += cursor.map { ["--cursor", $0] } ?? ["--type", "Note", "--where", conditions(QueryPredicate.maximumConditions)] + sorts(sortKeys)
            let page = try await cli.run(arguments)
            #expect(page.exitCode == 0, "\(page)")
            names += try JSONLine.names(page.stdout)
            cursor = page.stderrLines.first?.wholeMatch(of: #/cursor: (\S+)/#).map { String($0.1) }
            pages += 1
        } while cursor != nil && pages < 10
        return names
    }

    @Test("a query of 500 conditions and 8 sort keys pages with cursors: every record once, in order", arguments: TestEngine.all)
    func cursorPaging(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(30)).exitCode == 0)
            #expect(try await Self.pageThrough(cli, sortKeys: 8) == (1...30).reversed().map { "n\($0)" })
        }
    }

    @Test("a query of 100 sort keys pages with cursors: every record once, in order", arguments: TestEngine.all)
    func cursorPagingManyKeys(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(30)).exitCode == 0)
            #expect(try await Self.pageThrough(cli, sortKeys: 100) == (1...30).reversed().map { "n\($0)" })
        }
    }
}
