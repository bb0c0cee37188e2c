import Foundation
import Stratus

/// `stratus types`: the record types of a zone, with how many records each has.
struct TypesCommand: Command {
    static let name = "types"
    static let summary = "the record types, with their record counts"
    static let usage = ["stratus types [--all-zones] [store options]"]
    static let discussion = """
        Prints one line per record type, TYPE, a tab and how many records of it the zone holds
        (the default zone, --zone, or with --all-zones every zone of the database): every type of
        the environment's schema (0 when it has no records there; `Users` in the public
        database only, the one that holds user records) and every type with records. In the
        public database, records of types the caller may not read all of are not counted.
        """
    static let options: [Option] = [Option(flag: "--all-zones", "count the records of every zone of the database, not of one zone; not with --zone")]

    var store: StoreOptions

    static func parse(_ arguments: ParsedArguments) throws -> TypesCommand {
        try arguments.expectNoPositionals()
        return TypesCommand(store: try StoreOptions(arguments))
    }

    func run() async throws -> ExitCode {
        let container = try store.openContainer(.existing)
        let database = container.database(with: store.scope)
        var counts: [String: Int] = [:]
        let zones = store.allZones ? Set(try await database.allRecordZones().map(\.zoneID)).union(store.scope == .shared ? [] : [.default]) : [store.zoneID]
        for zone in zones {
            counts.merge(try await database.recordCountsByType(inZoneWith: zone), uniquingKeysWith: +)
        }
        // User records live in the public database; the schema's `Users` type has none elsewhere.
        let declared = try await container.schema().recordTypes.map(\.recordType).filter { store.scope == .public || $0 != "Users" }
        let names = Set(declared).union(counts.keys)
        let lines = names.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }.map { "\($0)\t\(counts[$0] ?? 0)\n" }
        try StandardOutput.write(lines.joined())
        return .success
    }
}
