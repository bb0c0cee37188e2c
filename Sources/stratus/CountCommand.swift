import Foundation
import Stratus

/// `stratus count --type TYPE [--where P]`: how many records match.
struct CountCommand {
    static let usage = """
        usage: stratus count --type TYPE [--where PREDICATE] [store options]

        Prints the number of matching records.
        """

    var store: StoreOptions
    var type: String
    var predicate: String?

    init(_ arguments: inout Arguments) throws {
        store = try StoreOptions(&arguments)
        guard let type = try arguments.value("--type") else { throw UsageError(message: "--type is required") }
        self.type = type
        predicate = try arguments.value("--where")
        try arguments.rejectUnknownOptions()
    }

    func run() async throws -> ExitCode {
        let database = try store.openDatabase()
        let query = Query(recordType: type, predicate: try predicate.map { try QueryPredicate(format: $0) } ?? .all)
        var count = 0
        for try await _ in database.allRecords(matching: query, inZoneWith: store.zoneID, desiredKeys: [], pageSize: 1_000) {
            count += 1
        }
        print(count)
        return .success
    }
}
