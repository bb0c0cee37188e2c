import Foundation
import Stratus
import StratusTransfer

/// `stratus get NAME...`: records by name, as NDJSON.
struct GetCommand: Command {
    static let name = "get"
    static let summary = "records by name"
    static let usage = ["stratus get RECORD_NAME... [--fields K1,K2] [store options]"]
    static let discussion = """
        Prints each record as one line of CloudKit record JSON on stdout, in the order named; a
        missing record is reported on stderr and makes the exit code 1.
        """
    static let options: [Option] = [Option("--fields", "K1,K2", "only these fields", default: "every field")]

    var store: StoreOptions
    var names: [String]
    var fields: [String]?

    static func parse(_ arguments: ParsedArguments) throws -> GetCommand {
        let command = GetCommand(store: try StoreOptions(arguments), names: arguments.positionals, fields: try arguments.list("--fields"))
        if command.names.isEmpty { throw UsageError(message: "name at least one record") }
        return command
    }

    func run() async throws -> ExitCode {
        let database = try store.openDatabase(.read)
        let ids = names.map { Record.ID(recordName: $0, zoneID: store.zoneID) }
        let results = try await database.records(for: ids, desiredKeys: fields)
        var missing = 0
        for id in ids {
            switch results[id] {
            case .success(let record)?:
                try StandardOutput.line(RecordJSONWriter.json(for: record))
            case .failure(let error)?:
                missing += 1
                StratusCommand.log("\(id.recordName): \(error)")
            case nil:
                missing += 1
            }
        }
        return missing == 0 ? .success : .someFailed
    }
}
