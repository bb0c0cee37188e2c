import Foundation
import StratusTestSupport
import Testing

/// `stratus --help`, `stratus COMMAND --help` and mistakes on the command line.
@Suite("stratus help and usage", .timeLimit(.minutes(2)))
struct HelpCLITests {
    static let exitCodes = ["0", "1", "64", "65", "66", "73", "75", "77"]

    /// Whether `text` mentions `code` as a number of its own (not inside another number).
    static func mentions(_ text: String, code: String) -> Bool {
        text.contains(try! Regex("(^|[^0-9])\(code)([^0-9]|$)"))
    }

    @Test("stratus --help lists every command, the store options and the exit codes, on stdout, exit 0")
    func topLevelHelp() async throws {
        try await TemporaryStore.with { store in
            let cli = try CLI(store)
            for flag in ["--help", "-h", "help"] {
                let result = try await cli.run([flag])
                #expect(result.exitCode == 0, "\(result)")
                #expect(result.stderr.isEmpty)
                for command in ["query", "get", "count", "zones", "changes", "import", "export", "delete"] {
                    #expect(result.stdout.contains("  \(command) "), "\(flag) lists \(command)")
                }
                for option in ["--store", "--container", "--database", "--zone", "--user", "STRATUS_STORE"] {
                    #expect(result.stdout.contains(option), "\(flag) documents \(option)")
                }
                let missing = Self.exitCodes.filter { !Self.mentions(result.stdout, code: $0) }
                #expect(missing.isEmpty, "\(flag) does not document the exit codes \(missing)")
            }
        }
    }

    @Test("stratus import --help documents every option, its defaults and the exit codes")
    func importHelp() async throws {
        try await TemporaryStore.with { store in
            let cli = try CLI(store)
            let result = try await cli.run(["import", "--help"])
            #expect(result.exitCode == 0, "\(result)")
            #expect(result.stderr.isEmpty)
            let text = result.stdout
            for option in [
                "--format", "ndjson", "json", "envelope", "csv", "--mode", "create", "update", "replace", "forceUpdate", "forceReplace",
                "--batch-size", "--atomic", "--dry-run", "--max-errors", "--reject-file", "--checkpoint", "--type", "--types",
                "--quiet", "--progress", "--store", "--container", "--database", "--zone", "--user",
            ] {
                #expect(text.contains(option), "import --help documents \(option)")
            }
            #expect(text.contains("default 2000"), "the batch size default")
            #expect(text.contains("SIGTERM") && Self.mentions(text, code: "143"), "what a signal does")
            let missing = Self.exitCodes.filter { !Self.mentions(text, code: $0) }
            #expect(missing.isEmpty, "import --help does not document the exit codes \(missing)")
        }
    }

    @Test("every command's --help prints its usage on stdout with exit 0")
    func commandHelp() async throws {
        try await TemporaryStore.with { store in
            let cli = try CLI(store)
            let options: [String: [String]] = [
                "query": ["--type", "--where", "--sort", "--limit", "--fields", "--cursor"],
                "get": ["--fields"],
                "count": ["--type", "--where"],
                "export": ["--type", "--where", "--sort", "--fields", "--limit", "--format", "--output", "--force", "--quiet", "--progress"],
                "delete": ["--names-file", "--type", "--where", "--yes", "--dry-run"],
                "zones": [],
                "changes": [],
            ]
            for (command, documented) in options {
                let result = try await cli.run([command, "--help"])
                #expect(result.exitCode == 0, "\(result)")
                #expect(result.stdout.contains("usage: stratus \(command)"), "\(result)")
                #expect(result.stdout.contains("--store"), "\(command) --help lists the store options")
                for option in documented {
                    #expect(result.stdout.contains(option), "\(command) --help documents \(option)")
                }
            }
        }
    }

    @Test("no command or an unknown one: exit 64 with the usage on stderr, nothing on stdout")
    func noOrUnknownCommand() async throws {
        try await TemporaryStore.with { store in
            let cli = try CLI(store)
            let unknown = try await cli.run(["frobnicate"])
            #expect(unknown.exitCode == 64, "\(unknown)")
            #expect(unknown.stderr.contains("frobnicate"), "\(unknown)")
            #expect(unknown.stdout.isEmpty)

            let nothing = try await cli.run([])
            #expect(nothing.exitCode == 64, "\(nothing)")
            #expect(nothing.stderr.contains("usage: stratus"), "a usage error goes to stderr (stdout is for data): \(nothing)")
            #expect(nothing.stdout.isEmpty, "a usage error goes to stderr (stdout is for data): \(nothing)")
        }
    }
}
