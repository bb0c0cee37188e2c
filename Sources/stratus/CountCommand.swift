import Foundation
import Stratus

/// `stratus count --type TYPE [--where P]`: how many records match.
struct CountCommand: Command {
    static let name = "count"
    static let summary = "the number of records matching a query"
    static let usage = ["stratus count --type TYPE [--where PREDICATE] [store options]"]
    static let discussion = "Prints the number of matching records on stdout."
    static let options: [Option] = [.recordType, .predicate]

    var store: StoreOptions
    var query: Query

    static func parse(_ arguments: ParsedArguments) throws -> CountCommand {
        try arguments.expectNoPositionals()
        return CountCommand(store: try StoreOptions(arguments), query: try QuerySelection(arguments).requireQuery())
    }

    func run() async throws -> ExitCode {
        let database = try store.openDatabase(.existing)
        var count = 0
        for try await _ in database.allRecords(matching: query, inZoneWith: store.zoneID, desiredKeys: [], pageSize: 1_000) {
            count += 1
        }
        print(count)
        return .success
    }
}
