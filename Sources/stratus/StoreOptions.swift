import Foundation
import Stratus
import StratusSQLite

/// Options every command takes: which store, container, database, zone and user.
struct StoreOptions {
    var storePath: String?
    var containerIdentifier = "default"
    var scope = Database.Scope.public
    var zoneID = RecordZone.ID.default
    var userName: String?

    static let help = """
          --store PATH        the store file (default: $STRATUS_STORE, else
                              ~/.local/share/stratus/<container>.sqlite)
          --container ID      the container identifier (default: default)
          --database NAME     public, private or shared (default: public)
          --zone NAME         the zone (default: _defaultZone)
          --user NAME         the user (default: $STRATUS_USER, else the login name)
        """

    init(_ arguments: inout Arguments) throws {
        storePath = try arguments.value("--store")
        if let container = try arguments.value("--container") { containerIdentifier = container }
        if let database = try arguments.value("--database") {
            switch database {
            case "public": scope = .public
            case "private": scope = .private
            case "shared": scope = .shared
            default: throw UsageError(message: "--database must be public, private or shared, not '\(database)'")
            }
        }
        if let zone = try arguments.value("--zone") { zoneID = RecordZone.ID(zoneName: zone) }
        userName = try arguments.value("--user")
    }

    func openContainer() throws -> Container {
        try Container(identifier: containerIdentifier, storePath: storePath, userName: userName)
    }

    func openDatabase() throws -> Database {
        try openContainer().database(with: scope)
    }
}
