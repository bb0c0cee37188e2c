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
        Option("--user", "NAME", "the user (a login; its user record name comes from the container's user directory, else is derived from the container and the login)", default: "$STRATUS_USER, else the login name"),
        Option(flag: "--anonymous", "act as a caller who is not signed in: read what the _world role may read in the public database, and nothing else"),
        Option("--environment", "NAME", "development or production: each keeps its own schema and data; production refuses unknown types and fields and queries without their index", default: "$STRATUS_ENVIRONMENT, else development"),
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
    var userName: String?
    var anonymous = false
    var environment = Container.Environment.development

    /// - Throws: ``UsageError`` for an unknown database, environment or an empty name.
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
        if let zone = arguments.value("--zone") { zoneID = RecordZone.ID(zoneName: zone) }
        userName = arguments.value("--user")
        anonymous = arguments.flag("--anonymous")
        if anonymous && userName != nil { throw UsageError(message: "--anonymous and --user exclude each other") }
        if let name = arguments.value("--environment") ?? ProcessInfo.processInfo.environment["STRATUS_ENVIRONMENT"].flatMap({ $0.isEmpty ? nil : $0 }) {
            guard let chosen = Container.Environment(rawValue: name) else {
                throw UsageError(message: "--environment must be development or production, not '\(name)'")
            }
            environment = chosen
        }
        do {
            try Container.checkIdentifier(containerIdentifier)
            if let userName { try UserDirectoryEntry.checkLogin(userName) }
        } catch {
            throw UsageError(message: error.message)
        }
    }

    /// Whether `--environment` (or `$STRATUS_ENVIRONMENT`) was given, for commands that act on
    /// one environment only.
    static func namesEnvironment(_ arguments: ParsedArguments) -> Bool {
        arguments.has("--environment") || ProcessInfo.processInfo.environment["STRATUS_ENVIRONMENT"].map { !$0.isEmpty } == true
    }

    /// The container as the options say: its environment, and its user or none.
    private func container(identifier: String, engine: any StorageEngine) -> Container {
        anonymous ? Container.anonymous(identifier: identifier, engine: engine, environment: environment)
            : Container(identifier: identifier, engine: engine, userName: userName, environment: environment)
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
            return container(identifier: containerIdentifier, engine: engine)
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
        let container = container(identifier: containerIdentifier, engine: try SQLiteEngine.shared(path: path))
        if !existed { StratusCommand.log("created a new store at \(path)") }
        return container
    }

    func openDatabase(_ access: Access) throws -> Database {
        try openContainer(access).database(with: scope)
    }
}
