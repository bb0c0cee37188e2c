import Foundation
import Stratus
import StratusSQLite

extension OptionGroup {
    /// Which store, container, database, zone and user: every command takes them.
    static let store = OptionGroup(title: "Store options", placeholder: "[store options]", options: [
        Option("--store", "PATH", "the store file", default: "$STRATUS_STORE, else ~/.local/share/stratus/<container>.sqlite"),
        Option("--container", "ID", "the container identifier", default: "default"),
        Option("--database", "NAME", "public, private or shared", default: "public"),
        Option("--zone", "NAME", "the zone", default: "_defaultZone"),
        Option("--user", "NAME", "the user", default: "$STRATUS_USER, else the login name"),
    ])
}

/// The store options' values.
struct StoreOptions {
    var storePath: String?
    var containerIdentifier = "default"
    var scope = Database.Scope.public
    var zoneID = RecordZone.ID.default
    var userName: String?

    init(_ arguments: ParsedArguments) throws {
        storePath = arguments.value("--store")
        if let container = arguments.value("--container") { containerIdentifier = container }
        if let database = arguments.value("--database") {
            switch database {
            case "public": scope = .public
            case "private": scope = .private
            case "shared": scope = .shared
            default: throw UsageError(message: "--database must be public, private or shared, not '\(database)'")
            }
        }
        if let zone = arguments.value("--zone") { zoneID = RecordZone.ID(zoneName: zone) }
        userName = arguments.value("--user")
    }

    func openContainer() throws -> Container {
        try Container(identifier: containerIdentifier, storePath: storePath, userName: userName)
    }

    func openDatabase() throws -> Database {
        try openContainer().database(with: scope)
    }
}
