import Foundation
import Stratus

/// `stratus count --type TYPE [--where P] [--json]`: how many records match.
struct CountCommand: Command {
    static let name = "count"
    static let summary = "the number of records matching a query"
    static let usage = ["stratus count --type TYPE [--where PREDICATE] [--all-zones] [--json] [--quiet] [store options]"]
    static let discussion = """
        Prints the number of matching records on stdout; with --json as one line,
        {"recordType":TYPE,"database":…,"zone":…,"count":N}. A damaged store is exit 70.
        """
    static let options: [Option] = [.recordType, .predicate, .allZones, Option(flag: "--json", "print one JSON object"), .quietNotes]

    var store: StoreOptions
    var query: Query
    var json: Bool

    static func parse(_ arguments: ParsedArguments) throws -> CountCommand {
        try arguments.expectNoPositionals()
        return CountCommand(store: try StoreOptions(arguments), query: try QuerySelection(arguments).requireQuery(), json: arguments.flag("--json"))
    }

    func run() async throws -> ExitCode {
        let container = try store.openContainer(.read)
        let database = container.database(with: store.scope)
        let query = try await WhereClause.typed(self.query, in: container)
        // Read through the one-snapshot stream, as export reads, not counted by the store: on a
        // damaged SQLite file the store's count can stop early at a damaged page without an
        // error, where reading the records finds the damage (exit 70, not a short count).
        var count = 0
        for try await _ in database.allRecords(matching: query, inZoneWith: store.searchedZoneID, desiredKeys: [], pageSize: 1_000) { count += 1 }
        WhereClause.sayFieldNotes(nothingMatched: count == 0)
        if json {
            var object: [String: Any] = ["recordType": query.recordType, "database": "\(store.scope)", "count": count]
            if store.allZones { object["allZones"] = true } else { object["zone"] = store.zoneID.zoneName }
            let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
            try StandardOutput.line(String(decoding: data, as: UTF8.self))
        } else {
            try StandardOutput.line(String(count))
        }
        return .success
    }
}
