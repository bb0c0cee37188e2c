import Foundation
import Stratus
import StratusTransfer

/// `stratus query`: one page of a query, for scripts that page with `--cursor`.
struct QueryCommand: Command {
    static let name = "query"
    static let summary = "one page of a query, with a cursor for the next (for scripts)"
    static let usage = [
        "stratus query --type TYPE [--where PREDICATE] [--sort KEY[:desc]]... [--limit N] [--fields K1,K2] [store options]",
        "stratus query --cursor TOKEN [--type TYPE --where PREDICATE --sort KEY[:desc]...] [--limit N] [--fields K1,K2] [store options]",
    ]
    static let discussion = """
        Prints one page of matching records as NDJSON (CloudKit record JSON) on stdout. When more
        records match, prints `cursor: TOKEN` on stderr; pass it back with --cursor (and the same
        --type/--where/--sort, or none of them) to get the next page.
        """
    static let options: [Option] = [
        .recordType, .predicate, .sort,
        Option("--limit", "N", "records per page", default: "100"),
        .fields,
        Option("--cursor", "TOKEN", "continue after the page that printed TOKEN (then --type is not needed)", default: "none: the first page"),
    ]

    var store: StoreOptions
    var selection: QuerySelection
    var limit: Int
    var cursor: String?

    static func parse(_ arguments: ParsedArguments) throws -> QueryCommand {
        let command = QueryCommand(
            store: try StoreOptions(arguments), selection: try QuerySelection(arguments),
            limit: try arguments.positiveInteger("--limit") ?? 100, cursor: arguments.value("--cursor"))
        try arguments.expectNoPositionals()
        if command.selection.recordType == nil && command.cursor == nil { throw UsageError(message: "--type is required (or --cursor)") }
        return command
    }

    func run() async throws -> ExitCode {
        let database = try store.openDatabase(.existing)
        let page: (matchResults: [(Record.ID, Result<Record, any Error>)], queryCursor: QueryOperation.Cursor?)
        if let cursor {
            let decoded = try QueryOperation.Cursor(serialized: cursor)
            if let query = try selection.makeQuery(), !decoded.continues(query, zoneID: store.zoneID) {
                throw UsageError(message: "the cursor belongs to a different query (\(decoded.query.recordType)); run the same --type/--where/--sort that printed it")
            }
            page = try await database.records(continuingMatchFrom: decoded, desiredKeys: selection.fields, resultsLimit: limit)
        } else {
            page = try await database.records(matching: try selection.requireQuery(), inZoneWith: store.zoneID, desiredKeys: selection.fields, resultsLimit: limit)
        }
        var output = ""
        for (_, result) in page.matchResults {
            output += RecordJSONWriter.json(for: try result.get())
            output += "\n"
        }
        FileHandle.standardOutput.write(Data(output.utf8))
        if let next = page.queryCursor {
            FileHandle.standardError.write(Data("cursor: \(next.serialized)\n".utf8))
        }
        return .success
    }
}
