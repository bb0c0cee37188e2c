import Foundation
import Stratus

/// `stratus types`: the record types of a zone, with how many records each has.
struct TypesCommand: Command {
    static let name = "types"
    static let summary = "the record types, with their record counts"
    static let usage = ["stratus types [store options]"]
    static let discussion = """
        Prints one line per record type, TYPE, a tab and how many records of it the zone holds:
        every type of the environment's schema (0 when it has no records there) and every type
        with records. In the public database, records of types the caller may not read all of are
        not counted.
        """
    static let options: [Option] = []

    var store: StoreOptions

    static func parse(_ arguments: ParsedArguments) throws -> TypesCommand {
        try arguments.expectNoPositionals()
        return TypesCommand(store: try StoreOptions(arguments))
    }

    func run() async throws -> ExitCode {
        let container = try store.openContainer(.existing)
        let counts = try await container.database(with: store.scope).recordCountsByType(inZoneWith: store.zoneID)
        let names = Set(try await container.schema().recordTypes.map(\.recordType)).union(counts.keys)
        let lines = names.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }.map { "\($0)\t\(counts[$0] ?? 0)\n" }
        try StandardOutput.write(lines.joined())
        return .success
    }
}
