import Foundation
import Stratus
import StratusPostgres
import StratusSQLite

extension OptionGroup {
    /// Which store, container, database, zone and user: every command takes them.
    static let store = OptionGroup(title: "Store options", placeholder: "[store options]", options: [
        Option("--store", "PATH|URL", "the store: an SQLite file, or a PostgreSQL database as postgresql://[user@]host[:port]/dbname (libpq's settings and PG* variables apply; a password is never printed)",
               default: "$STRATUS_STORE, else ~/.local/share/stratus/<container>.sqlite"),
        Option("--read-store", "URL", "a hot standby of the PostgreSQL store for reads that may lag (queries, exports, change reads)", default: "$STRATUS_READ_STORE, else the store"),
        Option("--container", "ID", "the container identifier", default: "default"),
        Option("--database", "NAME", "public, private or shared", default: "public"),
        Option("--zone", "NAME", "the zone", default: "_defaultZone"),
        Option("--user", "NAME", "the user", default: "$STRATUS_USER, else the login name"),
    ])
}

/// The store options' values.
struct StoreOptions {
    /// Whether a command only reads, or may create the store it writes to.
    enum Access {
        /// The store must exist (exit 66 otherwise); nothing is created, not even its folder.
        case existing
        /// A missing store is created, and stderr says so.
        case createIfMissing
    }

    var storePath: String?
    var readStoreURL: String?
    var containerIdentifier = "default"
    var scope = Database.Scope.public
    var zoneID = RecordZone.ID.default
    /// Whether `--zone` was given (not the default).
    var zoneGiven = false
    var userName: String?

    /// - Throws: ``UsageError`` for an unknown database or an empty name.
    init(_ arguments: ParsedArguments) throws {
        for option in ["--store", "--read-store", "--container", "--user", "--zone"] where arguments.value(option) == "" {
            throw UsageError(message: "\(option) needs a non-empty value")
        }
        storePath = arguments.value("--store")
        readStoreURL = arguments.value("--read-store") ?? ProcessInfo.processInfo.environment["STRATUS_READ_STORE"].flatMap { $0.isEmpty ? nil : $0 }
        if let container = arguments.value("--container") { containerIdentifier = container }
        if let database = arguments.value("--database") {
            switch database {
            case "public": scope = .public
            case "private": scope = .private
            case "shared": scope = .shared
            default: throw UsageError(message: "--database must be public, private or shared, not '\(database)'")
            }
        }
        if let zone = arguments.value("--zone") {
            zoneID = RecordZone.ID(zoneName: zone)
            zoneGiven = true
        }
        userName = arguments.value("--user")
    }

    /// The store file: `--store`, else `$STRATUS_STORE`, else the container's default path.
    var resolvedStorePath: String {
        storePath ?? SQLiteEngine.defaultStorePath(containerIdentifier: containerIdentifier)
    }

    /// Opens the container. A read (`.existing`) never creates a store: a typo'd path or a
    /// forgotten `--store` is exit 66, not an empty answer.
    ///
    /// - Throws: ``CommandFailure`` `inputMissing` when the store must exist and does not.
    func openContainer(_ access: Access) throws -> Container {
        let path = resolvedStorePath
        if PostgresEngine.isStoreURL(path) {
            let engine = try PostgresEngine.shared(url: path, readURL: readStoreURL, create: access == .createIfMissing)
            if engine.createdStore { StratusCommand.log("created a new store in \(engine.redactedURL)") }
            return Container(identifier: containerIdentifier, engine: engine, userName: userName)
        }
        if readStoreURL != nil {
            throw UsageError(message: "--read-store names a standby of a PostgreSQL store; --store is not one")
        }
        let existed = FileManager.default.fileExists(atPath: path)
        if !existed && access == .existing {
            let fromEnvironment = ProcessInfo.processInfo.environment["STRATUS_STORE"]?.isEmpty == false
            let origin = storePath != nil ? "--store" : fromEnvironment ? "$STRATUS_STORE" : "the container's default store"
            throw CommandFailure(.inputMissing, "there is no store at \(path) (\(origin)); only import and zones create make a new store")
        }
        let container = try Container(identifier: containerIdentifier, storePath: path, userName: userName)
        if !existed { StratusCommand.log("created a new store at \(path)") }
        return container
    }

    func openDatabase(_ access: Access) throws -> Database {
        try openContainer(access).database(with: scope)
    }
}
