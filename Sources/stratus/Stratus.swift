import Foundation
import Stratus

/// The `stratus` command: thin over the library; data on stdout, messages on stderr.
@main
struct StratusCommand {
    static let usage = """
        usage: stratus COMMAND [options]

        Commands:
          query     one page of a query, with a cursor for the next (for scripts)
          get       records by name
          count     the number of records matching a query
          zones     list, create and delete zones
          changes   a zone's changes since the last run, exactly once (for cron exports)
          import    records from NDJSON, JSON, a CloudKit response envelope or CSV
          export    every matching record, in any of those formats
          delete    records by name or by query

        Store options (every command):
        \(StoreOptions.help)

        \(ExitCode.help)

        Run `stratus COMMAND --help` for a command's options.
        """

    static func main() async {
        var words = Array(CommandLine.arguments.dropFirst())
        guard let command = words.first else { fail("name a command\n\n\(usage)", .usage) }
        if ["--help", "-h", "help"].contains(command) {
            print(usage)
            exit(ExitCode.success.rawValue)
        }
        words.removeFirst()
        var arguments = Arguments(words)
        let commandUsage: String
        switch command {
        case "query": commandUsage = QueryCommand.usage
        case "get": commandUsage = GetCommand.usage
        case "count": commandUsage = CountCommand.usage
        case "zones": commandUsage = ZonesCommand.usage
        case "changes": commandUsage = ChangesCommand.usage
        case "import": commandUsage = ImportCommand.usage + "\n" + Progress.help
        case "export": commandUsage = ExportCommand.usage + "\n" + Progress.help
        case "delete": commandUsage = DeleteCommand.usage + "\n" + Progress.help
        default:
            fail("unknown command '\(command)'\n\n\(usage)", .usage)
        }
        if arguments.flag("--help") || arguments.flag("-h") {
            print(commandUsage + "\n\nStore options:\n" + StoreOptions.help + "\n\n" + ExitCode.help)
            exit(ExitCode.success.rawValue)
        }
        do {
            let code: ExitCode
            switch command {
            case "query": code = try await QueryCommand(&arguments).run()
            case "get": code = try await GetCommand(&arguments).run()
            case "zones": code = try await ZonesCommand(&arguments).run()
            case "changes": code = try await ChangesCommand(&arguments).run()
            case "import": code = try await ImportCommand(&arguments).run()
            case "export": code = try await ExportCommand(&arguments).run()
            case "delete": code = try await DeleteCommand(&arguments).run()
            default: code = try await CountCommand(&arguments).run()
            }
            exit(code.rawValue)
        } catch let error as UsageError {
            fail("\(error.message)\n\n\(commandUsage)", .usage)
        } catch let failure as CommandFailure {
            fail(failure.message, failure.code)
        } catch let error as StratusError {
            fail(error.description, ExitCode(for: error))
        } catch {
            fail("\(error)", .internalError)
        }
    }

    static func fail(_ message: String, _ code: ExitCode) -> Never {
        FileHandle.standardError.write(Data("stratus: \(message)\n".utf8))
        exit(code.rawValue)
    }
}
