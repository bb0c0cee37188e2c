import Foundation
import Stratus
import StratusTransfer

/// `stratus query`: one page of a query, for scripts that page with `--cursor`.
struct QueryCommand {
    static let usage = """
        usage: stratus query --type TYPE [--where PREDICATE] [--sort KEY[:desc]]... [--limit N]
                             [--fields K1,K2] [--cursor TOKEN] [store options]

        Prints one page of matching records as NDJSON (CloudKit record JSON) on stdout. When more
        records match, prints `cursor: TOKEN` on stderr; pass it back with --cursor (and the same
        --type/--where/--sort) to get the next page.

          --type TYPE         the record type (not needed with --cursor)
          --where PREDICATE   a CloudKit predicate, e.g. "checked == 0 AND title BEGINSWITH 'B'"
          --sort KEY[:desc]   sort key, repeatable; ties are broken by record name
          --limit N           records per page (default 100)
          --fields K1,K2      only these fields
          --cursor TOKEN      continue after the page that printed TOKEN
        """

    var store: StoreOptions
    var type: String?
    var predicate: String?
    var sorts: [RecordSortDescriptor]
    var limit: Int
    var fields: [String]?
    var cursor: String?

    init(_ arguments: inout Arguments) throws {
        store = try StoreOptions(&arguments)
        type = try arguments.value("--type")
        predicate = try arguments.value("--where")
        sorts = try arguments.values("--sort").map(Self.sortDescriptor)
        let limitText = try arguments.value("--limit") ?? "100"
        guard let limit = Int(limitText), limit > 0 else { throw UsageError(message: "--limit must be a positive number, not '\(limitText)'") }
        self.limit = limit
        fields = try arguments.value("--fields").map { $0.split(separator: ",").map(String.init) }
        cursor = try arguments.value("--cursor")
        try arguments.rejectUnknownOptions()
        if type == nil && cursor == nil { throw UsageError(message: "--type is required (or --cursor)") }
    }

    static func sortDescriptor(_ text: String) throws -> RecordSortDescriptor {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count <= 2, !parts[0].isEmpty else { throw UsageError(message: "--sort takes KEY or KEY:desc, not '\(text)'") }
        if parts.count == 2 && !["asc", "desc"].contains(parts[1]) {
            throw UsageError(message: "--sort direction must be asc or desc, not '\(parts[1])'")
        }
        return RecordSortDescriptor(key: String(parts[0]), ascending: parts.count == 1 || parts[1] == "asc")
    }

    func makeQuery() throws -> Query? {
        guard let type else { return nil }
        let query = Query(recordType: type, predicate: try predicate.map { try QueryPredicate(format: $0) } ?? .all)
        query.sortDescriptors = sorts
        return query
    }

    func run() async throws -> ExitCode {
        let database = try store.openDatabase()
        let page: (matchResults: [(Record.ID, Result<Record, any Error>)], queryCursor: QueryOperation.Cursor?)
        if let cursor {
            let decoded = try QueryOperation.Cursor(serialized: cursor)
            if let query = try makeQuery(), !decoded.continues(query, zoneID: store.zoneID) {
                throw UsageError(message: "the cursor belongs to a different query; run the same --type/--where/--sort that printed it")
            }
            page = try await database.records(continuingMatchFrom: decoded, desiredKeys: fields, resultsLimit: limit)
        } else {
            page = try await database.records(matching: try makeQuery()!, inZoneWith: store.zoneID, desiredKeys: fields, resultsLimit: limit)
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
