import Foundation
import Stratus

/// `stratus check`: the store's integrity check; exit 0 when it is consistent, 70 when not.
struct CheckCommand: Command {
    static let name = "check"
    static let summary = "check a store's integrity (exit 0, or 70 naming the problems)"
    static let usage = ["stratus check [--store PATH|URL]"]
    static let discussion = """
        Checks the whole store: on SQLite every page and index of the file (PRAGMA
        integrity_check; it reads the whole file, not the records' field documents), on
        PostgreSQL the version of Stratus's tables, that every record belongs to a zone and that
        every record's field document decodes (it reads every record; a role bound by row-level
        security checks the records it may read); on both, that the store holds the content of
        every asset a record names (on SQLite a file in the store's .assets folder of the size
        the records give the asset, and every such record's field document decodes; on
        PostgreSQL a row in asset_contents whose chunks add up to its size), and that each such
        content hashes to the SHA-256 that names it (every asset is read whole). Prints "ok" on
        stdout and exits 0 when nothing is wrong; otherwise prints each problem on a line of
        stdout, names the store on stderr and exits 70. A store too damaged to be checked at all
        is exit 70 too. Restore a damaged store from a backup or an export; `stratus copy` reads
        what can still be read.
        """
    static let options: [Option] = []
    static let optionGroups: [OptionGroup] = [.storeLocation]
    static let exitNotes: String? = "check: 0 when the store is consistent, 70 when it is damaged (the problems on stdout)."

    var store: StoreOptions

    static func parse(_ arguments: ParsedArguments) throws -> CheckCommand {
        try arguments.expectNoPositionals()
        return CheckCommand(store: try StoreOptions(arguments, locationOnly: true))
    }

    func run() async throws -> ExitCode {
        let container = try store.openContainer(.read)
        let problems = try await container.checkStoreIntegrity()
        guard !problems.isEmpty else {
            try StandardOutput.line("ok")
            return .success
        }
        for problem in problems { try StandardOutput.line(problem) }
        StratusCommand.log("the store at \(StoreOptions.describe(container.engine)) is damaged: \(problems.count) problem\(problems.count == 1 ? "" : "s") found")
        return .internalError
    }
}
