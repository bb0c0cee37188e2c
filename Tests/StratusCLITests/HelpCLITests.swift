import Foundation
import StratusTestSupport
import Testing

/// `stratus --help`, `stratus help COMMAND`, `stratus COMMAND --help`, `--version`, and
/// mistakes on the command line.
@Suite("stratus help and usage", .timeLimit(.minutes(30)))
struct HelpCLITests {
    static let exitCodes = ["0", "1", "64", "65", "66", "73", "75", "77"]
    /// Every command `stratus --help` lists (``helpFitsATerminal()`` checks that none is missing).
    static let commands = [
        "query", "get", "count", "zones", "changes", "import", "export", "update", "delete", "schema", "types",
        "info", "check", "copy", "users", "assets", "subscriptions", "notifications", "watch",
    ]

    /// Whether `text` mentions `code` as a number of its own (not inside another number).
    static func mentions(_ text: String, code: String) -> Bool {
        text.contains(try! Regex("(^|[^0-9])\(code)([^0-9]|$)"))
    }

    /// The `--options` a help text's usage lines name (the lines before the first blank line).
    static func usageOptions(_ help: String) -> Set<String> {
        let usage = help.components(separatedBy: "\n\n")[0]
        return Set(usage.matches(of: #/--[a-z][a-z-]*/#).map { String($0.output) })
    }

    /// The options a help text describes as the command's own ("Options:", not a group's).
    static func ownOptions(_ help: String) -> Set<String> {
        guard let start = help.range(of: "\nOptions:\n") else { return [] }
        let section = help[start.upperBound...].components(separatedBy: "\n\n")[0]
        return Set(section.split(separator: "\n").compactMap { line in line.wholeMatch(of: #/  (--[a-z][a-z-]*).*/#).map { String($0.output.1) } })
    }

    /// The options a help text describes: lines that start with two spaces and the option.
    static func describedOptions(_ help: String) -> [String: String] {
        var described: [String: String] = [:]
        var current: String?
        for line in help.split(separator: "\n", omittingEmptySubsequences: false) {
            if let match = line.wholeMatch(of: #/  (--[a-z][a-z-]*)(.*)/#) {
                current = String(match.output.1)
                described[current!] = String(match.output.2)
            } else if let name = current, line.hasPrefix("                        ") {
                described[name]! += " " + line.trimmingCharacters(in: .whitespaces)
            } else {
                current = nil
            }
        }
        return described
    }

    @Test("stratus --help lists every command, the store options and the exit codes, on stdout, exit 0")
    func topLevelHelp() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store)
            for arguments in [["--help"], ["-h"], ["help"]] {
                let result = try await cli.run(arguments)
                #expect(result.exitCode == 0, "\(result)")
                #expect(result.stderr.isEmpty)
                for command in Self.commands {
                    #expect(result.stdout.contains("  \(command) "), "\(arguments) lists \(command)")
                }
                for option in ["--store", "--container", "--database", "--zone", "--user", "STRATUS_STORE", "--version"] {
                    #expect(result.stdout.contains(option), "\(arguments) documents \(option)")
                }
                // As each command's own help says: not every command takes every store option.
                #expect(result.stdout.contains("copy names its\nstores with --from and --to, info and check take --store only"), "\(result)")
                let missing = Self.exitCodes.filter { !Self.mentions(result.stdout, code: $0) }
                #expect(missing.isEmpty, "\(arguments) does not document the exit codes \(missing)")
            }
        }
    }

    @Test("--version prints the version on stdout, exit 0")
    func version() async throws {
        try await TemporaryStore.with { store in
            let result = try await CLI(store).run(["--version"])
            #expect(result.exitCode == 0, "\(result)")
            #expect(result.stdout.wholeMatch(of: #/stratus [0-9]+\.[0-9]+\.[0-9]+[^\n]*\n/#) != nil, "\(result)")
            #expect(result.stderr.isEmpty)
        }
    }

    @Test("stratus help COMMAND and stratus COMMAND --help print the same help: usage, every usage option described with its default, exit codes")
    func everyCommandsHelp() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store)
            for command in Self.commands {
                let viaHelp = try await cli.run(["help", command])
                let viaFlag = try await cli.run([command, "--help"])
                let viaShort = try await cli.run([command, "-h"])
                #expect(viaHelp.exitCode == 0 && viaFlag.exitCode == 0 && viaShort.exitCode == 0, "\(viaHelp)\n\(viaFlag)")
                #expect(viaHelp.stdout == viaFlag.stdout && viaFlag.stdout == viaShort.stdout, "\(command): help COMMAND and COMMAND --help differ")
                #expect(viaFlag.stderr.isEmpty)
                let help = viaFlag.stdout
                #expect(help.hasPrefix("usage: stratus \(command)"), "\(command): \(help.prefix(200))")

                let described = Self.describedOptions(help)
                let undescribed = Self.usageOptions(help).subtracting(described.keys)
                #expect(undescribed.isEmpty, "\(command): the usage names \(undescribed.sorted()) but the help does not describe them")
                // A cron job gives --quiet to each command it runs.
                #expect(described.keys.contains("--quiet"), "\(command): no --quiet")
                let unlisted = Self.ownOptions(help).subtracting(Self.usageOptions(help))
                #expect(unlisted.isEmpty, "\(command): the help describes \(unlisted.sorted()) but no usage line names them")
                // Commands over one container's database name the store options; those over a
                // whole store (info, check, copy) name the stores they read in their own usage.
                if help.components(separatedBy: "\n\n")[0].contains("[store options]") {
                    for option in ["--store", "--container", "--database", "--zone", "--user"] {
                        #expect(described[option] != nil, "\(command) --help lists the store option \(option)")
                    }
                }
                for (option, text) in described {
                    // An option with a value (`--limit N`) states its default; flags are off unless given.
                    let takesValue = text.hasPrefix(" ") && text.dropFirst().first?.isUppercase == true
                    if takesValue {
                        #expect(text.contains("default"), "\(command) \(option) does not state its default: \(text)")
                    }
                }
                let missing = Self.exitCodes.filter { !Self.mentions(help, code: $0) }
                #expect(missing.isEmpty, "\(command) --help does not document the exit codes \(missing)")
            }
        }
    }

    @Test("stratus --help and every command's help fit 100 columns: prose is wrapped, never one long line")
    func helpFitsATerminal() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store)
            let top = try await cli.run(["--help"]).stdout
            let listed = top.split(separator: "\n").compactMap { line in line.wholeMatch(of: #/  ([a-z]+) +[a-z].*/#).map { String($0.output.1) } }
            #expect(Set(Self.commands) == Set(listed), "every command is checked by this suite: \(listed)")
            for arguments in [["--help"]] + listed.map({ [$0, "--help"] }) {
                let help = try await cli.run(arguments).stdout
                let long = help.split(separator: "\n").filter { $0.count > 100 }
                #expect(long.isEmpty, "\(arguments): \(long.map { "\($0.count): \($0.prefix(60))…" })")
            }
        }
    }

    @Test("every option a command's help describes is one it accepts")
    func describedOptionsAreAccepted() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store)
            for command in Self.commands {
                let help = try await cli.run([command, "--help"]).stdout
                for option in Self.describedOptions(help).keys {
                    // Parsing stops at the first unknown option, before anything runs: the
                    // complaint must be about the option after the described one.
                    let result = try await cli.run([command, option, "x", "--not-an-option"])
                    #expect(result.exitCode == 64 && result.stderr.contains("unknown option --not-an-option"), "\(command) \(option): \(result)")
                }
            }
        }
    }

    @Test("import --help documents every option, its defaults and what a signal does")
    func importHelp() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store)
            let result = try await cli.run(["import", "--help"])
            #expect(result.exitCode == 0, "\(result)")
            let text = result.stdout
            for option in [
                "--format", "ndjson", "json", "envelope", "csv", "--mode", "create", "update", "replace", "forceUpdate", "forceReplace",
                "--batch-size", "--atomic", "--dry-run", "--max-errors", "--reject-file", "--checkpoint", "--type", "--types",
                "--quiet", "--progress",
            ] {
                #expect(text.contains(option), "import --help documents \(option)")
            }
            let flat = text.split(whereSeparator: \.isWhitespace).joined(separator: " ")
            #expect(flat.contains("(default: 2000 on SQLite, 10000 on PostgreSQL)"), "the batch size default of each engine")
            #expect(text.contains("SIGTERM") && Self.mentions(text, code: "143"), "what a signal does")
        }
    }

    @Test("a usage error is one line naming the problem and a pointer to the command's help, on stderr, exit 64")
    func usageErrorIsOneLine() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store)
            let cases: [(arguments: [String], says: String)] = [
                (["import", "--batch-size", "x"], "stratus: import: --batch-size must be a positive number, not 'x'"),
                (["import", "--bogus"], "stratus: import: unknown option --bogus"),
                (["count", "--type", "Note", "extra"], "stratus: count: unexpected argument 'extra'"),
                (["export", "--type", "Note", "--limit"], "stratus: export: --limit needs a value"),
                // An option where a value belongs is a value left out, not a file named --force.
                (["export", "--type", "Note", "--output", "--force"], "stratus: export: --output needs a value (FILE) before --force"),
                (["count", "--type", "--json"], "stratus: count: --type needs a value"),
                // What a paging loop passes after the last page.
                (["query", "--cursor", " "], "stratus: query: --cursor is empty: the last page prints no cursor"),
                (["query", "--type", "Note", "--quiet=yes"], "stratus: query: --quiet takes no value"),
                (["zones", "create", "A", "--atomic"], "stratus: zones: unknown option --atomic"),
                (["count", "--type", "A", "--type", "B"], "stratus: count: --type is given twice"),
                (["update", "--type", "Note", "--all", "--set", "a=1", "--max-errors", "-1"], "stratus: update: --max-errors must be a number (0 or more), not '-1'"),
            ] + Self.commands.map { ([$0, "--no-such-option"], "stratus: \($0): unknown option --no-such-option") }
            for (arguments, says) in cases {
                let result = try await cli.run(arguments)
                #expect(result.exitCode == 64, "\(result)")
                #expect(result.stdout.isEmpty, "\(result)")
                #expect(result.stderrLines.count == 2, "one line and a pointer: \(result)")
                #expect(result.stderrLines.first?.hasPrefix(says) == true, "\(result)")
                #expect(result.stderrLines.last == "Run 'stratus \(arguments[0]) --help' for usage.", "\(result)")
            }
        }
    }

    @Test("a mistyped option or command is answered with the nearest known one, on the one usage line; a word near none gets no guess")
    func mistypedNamesGetASuggestion() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store)
            let cases: [(arguments: [String], lines: [String])] = [
                (["count", "--stor", "x"], ["stratus: count: unknown option --stor; did you mean --store?", "Run 'stratus count --help' for usage."]),
                (["count", "--type", "Note", "--jsno"], ["stratus: count: unknown option --jsno; did you mean --json?", "Run 'stratus count --help' for usage."]),
                (["export", "--outptu=x"], ["stratus: export: unknown option --outptu; did you mean --output?", "Run 'stratus export --help' for usage."]),
                (["--versoin"], ["stratus: unknown command '--versoin'; did you mean --version?", "Run 'stratus --help' for the commands."]),
                (["imprt"], ["stratus: unknown command 'imprt'; did you mean import?", "Run 'stratus --help' for the commands."]),
                (["help", "qurey"], ["stratus: help: unknown command 'qurey'; did you mean query?", "Run 'stratus --help' for the commands."]),
                (["count", "--not-an-option"], ["stratus: count: unknown option --not-an-option", "Run 'stratus count --help' for usage."]),
            ]
            for (arguments, lines) in cases {
                let result = try await cli.run(arguments)
                #expect(result.exitCode == 64 && result.stdout.isEmpty && result.stderrLines == lines, "\(result)")
            }
        }
    }

    @Test("a setting that came from the environment is named as the variable, not as an option the user never typed")
    func settingsFromTheEnvironmentAreNamedSo() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store)
            _ = try await cli.run(["import", "--quiet"], stdin: Input.notes(1))
            let standby = try await cli.run(["count", "--type", "Note"], environment: ["STRATUS_READ_STORE": "postgresql://db2/app"])
            #expect(standby.exitCode == 64 && standby.stderrLines.first?.hasPrefix("stratus: count: $STRATUS_READ_STORE names a standby of a PostgreSQL store") == true, "\(standby)")
            let typed = try await cli.run(["count", "--type", "Note", "--read-store", "postgresql://db2/app"])
            #expect(typed.exitCode == 64 && typed.stderrLines.first?.hasPrefix("stratus: count: --read-store names a standby") == true, "\(typed)")
            let environment = try await cli.run(["count", "--type", "Note"], environment: ["STRATUS_ENVIRONMENT": "prod"])
            #expect(environment.exitCode == 64 && environment.stderrLines.first == "stratus: count: $STRATUS_ENVIRONMENT must be development or production, not 'prod'", "\(environment)")
        }
    }

    @Test("no command or an unknown one: exit 64, one line and a pointer on stderr, nothing on stdout")
    func noOrUnknownCommand() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store)
            let unknown = try await cli.run(["frobnicate"])
            #expect(unknown.exitCode == 64, "\(unknown)")
            #expect(unknown.stderrLines == ["stratus: unknown command 'frobnicate'", "Run 'stratus --help' for the commands."], "\(unknown)")
            #expect(unknown.stdout.isEmpty)

            let nothing = try await cli.run([])
            #expect(nothing.exitCode == 64, "\(nothing)")
            #expect(nothing.stderrLines.count == 2 && nothing.stderr.contains("stratus --help"), "\(nothing)")
            #expect(nothing.stdout.isEmpty, "a usage error goes to stderr (stdout is for data): \(nothing)")

            let unknownHelp = try await cli.run(["help", "frobnicate"])
            #expect(unknownHelp.exitCode == 64, "\(unknownHelp)")
        }
    }
}
