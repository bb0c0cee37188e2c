import Foundation
import Stratus
import StratusSQLite
import StratusTransfer
import Synchronization

/// The `stratus` command: a table of subcommands over the library; data on stdout, messages on
/// stderr.
@main
struct StratusCommand {
    /// Every subcommand, in the order `stratus --help` lists them.
    static var commands: [any Command.Type] {
        [
            QueryCommand.self, GetCommand.self, CountCommand.self, ZonesCommand.self, ChangesCommand.self,
            ImportCommand.self, ExportCommand.self, UpdateCommand.self, DeleteCommand.self, SchemaCommand.self, TypesCommand.self,
            InfoCommand.self, CheckCommand.self, CopyCommand.self, UsersCommand.self, AssetsCommand.self,
            SubscriptionsCommand.self, NotificationsCommand.self, WatchCommand.self,
        ]
    }

    static func command(named name: String) -> (any Command.Type)? {
        commands.first { $0.name == name }
    }

    static func main() async {
        // A reader that goes away (`stratus export | head`) makes writes fail with EPIPE, which
        // every command reports as exit 73 after keeping what it committed, rather than a
        // death by signal that a cron wrapper sees as 141.
        signal(SIGPIPE, SIG_IGN)
        // Likewise a file size limit (`ulimit -f`): the write fails with EFBIG, said as such
        // (exit 73), instead of a death by signal with a core dump halfway through a batch.
        signal(SIGXFSZ, SIG_IGN)
        // Foundation turns bytes that are not UTF-8 into U+FFFD: two different file names
        // would then name the same file, and a message another name than the one given.
        if let refusal = notUTF8Refusal() { usageFailure(refusal, pointer: "Run 'stratus --help' for the commands.") }
        let words = Array(CommandLine.arguments.dropFirst())
        guard let first = words.first else {
            usageFailure("name a command", pointer: "Run 'stratus --help' for the commands.")
        }
        switch first {
        case "--help", "-h":
            printAndExit(Help.overview(commands))
        case "--version":
            printAndExit("stratus \(StratusVersion.current)\n")
        case "help":
            guard let name = words.dropFirst().first, name != "--help", name != "-h" else { printAndExit(Help.overview(commands)) }
            guard let command = command(named: name) else {
                usageFailure("help: unknown command '\(name)'" + Suggestion.didYouMean(name, among: commands.map { $0.name }),
                             pointer: "Run 'stratus --help' for the commands.")
            }
            printAndExit(Help.text(for: command))
        default:
            break
        }
        guard let command = command(named: first) else {
            // `--versoin`, `imprt`: the nearest command, or top-level option, is suggested.
            let known = commands.map { $0.name } + ["help", "--help", "--version"]
            usageFailure("unknown command '\(first)'" + Suggestion.didYouMean(first, among: known), pointer: "Run 'stratus --help' for the commands.")
        }
        let rest = Array(words.dropFirst())
        // Help wins over anything else on the line, so that a half-written command shows it.
        if let end = rest.firstIndex(of: "--") ?? Optional(rest.count), rest[..<end].contains(where: { $0 == "--help" || $0 == "-h" }) {
            printAndExit(Help.text(for: command))
        }
        let code = await run(command, rest)
        // A command that ended before it knew whether its query matched says them now.
        WhereClause.sayFieldNotes(nothingMatched: true)
        Interruption.yieldToForcedExit()
        if ![ExitCode.interrupted, .terminated, .hungUp].contains(code) {
            // The command ran to its end, so its work on its stores is over: they close here,
            // on the thread that ran it, and SQLite removes their -wal and -shm files before the
            // exit. Not when a signal stopped it: that exit leaves the logs for the next opening.
            StoreOptions.closeSQLiteStores()
        } else {
            // What their logs hold goes into the files, so that a store whose processes all
            // stopped is whole in its file alone.
            SQLiteEngine.foldLogsOfOpenStores()
        }
        exit(code.rawValue)
    }

    /// Names the first argument, or `STRATUS_*` variable, whose bytes are not UTF-8.
    static func notUTF8Refusal() -> String? {
        for index in stride(from: 1, to: Int(CommandLine.argc), by: 1) {
            guard let bytes = CommandLine.unsafeArgv[index], String(validatingCString: bytes) == nil else { continue }
            return "argument \(index) ('\(String(cString: bytes))', with U+FFFD for each byte that is not UTF-8) is not UTF-8: Stratus reads names and values as UTF-8, and would otherwise read or write another file than the one named; rename the file"
        }
        for name in ["STRATUS_STORE", "STRATUS_READ_STORE", "STRATUS_USER", "STRATUS_ENVIRONMENT"] {
            guard let bytes = getenv(name), String(validatingCString: bytes) == nil else { continue }
            return "\(name) is not UTF-8: Stratus reads names as UTF-8, and would otherwise open another store than the one named"
        }
        return nil
    }

    /// Parses and runs one command, turning every failure into its message and exit code.
    static func run(_ command: any Command.Type, _ words: [String]) async -> ExitCode {
        let name = command.name
        var anonymous = false
        do {
            let parsed = try ParsedArguments(words, options: command.allOptions)
            anonymous = parsed.flag("--anonymous")
            if parsed.flag("--quiet") { isQuiet.store(true, ordering: .relaxed) }
            try StoreFileGuard.check(parsed, options: command.allOptions)
            do {
                return try await command.parse(parsed).run()
            } catch let error as JobFileError {
                throw error.commandError(command: name)
            } catch let error as StratusError where error.underlyingError is JobFileError {
                // A checkpoint file that cannot be written, met inside a job's stage: its own
                // message and exit code, not the stage's wrapping.
                throw (error.underlyingError as! JobFileError).commandError(command: name)
            }
        } catch let error as UsageError {
            usageFailure("\(name): \(error.message)", pointer: "Run 'stratus \(name) --help' for usage.")
        } catch let failure as CommandFailure {
            fail(failure.message, failure.code)
        } catch let error as RecordWriter.OutputError {
            fail(error.message, .cannotCreateOutput)
        } catch let error as StratusError where error.underlyingError is CommandFailure {
            // The command's own failure, met inside a job's stage (a checkpoint file that cannot
            // be written): its message and exit code, not the stage's wrapping.
            let failure = error.underlyingError as! CommandFailure
            fail(failure.message, failure.code)
        } catch let error as StratusError where error.code == .internalError || error.code == .badDatabase {
            fail(StoreOptions.namingStores(error.description), ExitCode(for: error))
        } catch let error as StratusError where error.code == .notAuthenticated && anonymous {
            // The library's advice is a program's ("open it with a user name"); the tool's
            // user is told which option to change.
            fail(StoreOptions.advisingAnonymous(error.description), ExitCode(for: error))
        } catch let error as StratusError {
            fail(error.description, ExitCode(for: error))
        } catch {
            fail("\(error)", .internalError)
        }
    }

    static func printAndExit(_ text: String) -> Never {
        do {
            try StandardOutput.write(text)
        } catch let failure as CommandFailure {
            fail(failure.message, failure.code)
        } catch {
            fail("\(error)", .internalError)
        }
        exit(ExitCode.success.rawValue)
    }

    /// A usage error: one line saying what is wrong, one saying where help is; exit 64.
    static func usageFailure(_ message: String, pointer: String) -> Never {
        StandardError.write("stratus: \(oneLine(message))\n\(pointer)\n")
        exit(ExitCode.usage.rawValue)
    }

    static func fail(_ message: String, _ code: ExitCode) -> Never {
        Interruption.yieldToForcedExit()
        StandardError.write("stratus: \(oneLine(message))\n")
        SQLiteEngine.foldLogsOfOpenStores()
        exit(code.rawValue)
    }

    /// A message on stderr, `stratus: MESSAGE`.
    static func log(_ message: String) {
        StandardError.write("stratus: \(oneLine(message))\n")
    }

    /// Whether the command was given `--quiet`, which the README promises prints nothing on
    /// success: a cron job's mail then holds only what needs a look.
    static let isQuiet = Atomic<Bool>(false)

    /// A message that reports nothing wrong (a store or zone created, a checkpoint taken up
    /// again): on stderr as ``log(_:)``, and left out under `--quiet`.
    static func note(_ message: String) {
        guard !isQuiet.load(ordering: .relaxed) else { return }
        log(message)
    }

    /// `message` with its line breaks shown escaped (`\u{A}`), so that a name or value quoted
    /// from input cannot start a line of its own in a job's log that passes for one of the
    /// tool's (`stratus: imported 99, …`). An indented line (a schema file's excerpt and its
    /// caret, four spaces in) is the message's own and stays.
    static func oneLine(_ message: String) -> String {
        let scalars = message.unicodeScalars
        guard scalars.contains("\n") else { return message }
        var shown = String.UnicodeScalarView()
        var index = scalars.startIndex
        while index != scalars.endIndex {
            let scalar = scalars[index]
            index = scalars.index(after: index)
            if scalar == "\n" && !scalars[index...].starts(with: "    ".unicodeScalars) {
                // One scalar at a time: append(contentsOf:) copies the whole view on Linux.
                for escape in "\\u{A}".unicodeScalars { shown.append(escape) }
            } else {
                shown.append(scalar)
            }
        }
        return String(shown)
    }
}
