import Foundation
import Stratus
import StratusPostgres
import StratusSQLite
import StratusStores
import Synchronization

extension OptionGroup {
    /// Which store, container, database, zone and user: every command takes them.
    static let store = OptionGroup(title: "Store options", placeholder: "[store options]", options: [
        Option("--store", "PATH|URL", "the store: an SQLite file, or a PostgreSQL database as postgresql://[user@]host[:port]/dbname (libpq's settings and PG* variables apply; a password is never printed)",
               default: "$STRATUS_STORE, else ~/.local/share/stratus/<container>.sqlite"),
        Option("--read-store", "URL", "a hot standby of the PostgreSQL store for reads that may lag (queries, exports, change reads; not the records update and delete change); while it cannot be reached they fail with exit 75 (a refused login 77, a database it lacks 66), never reading the store instead", default: "$STRATUS_READ_STORE, else the store"),
        Option("--container", "ID", "the container identifier", default: "default"),
        Option("--database", "NAME", "public, private or shared", default: "public"),
        Option("--zone", "NAME", "the zone", default: "_defaultZone"),
        Option("--zone-owner", "RECORDNAME", "the owner of the zone (of --zone, or of the zones zones names): another user's record name, as `zones list --database shared` prints it, for a zone shared with you", default: "you"),
        Option("--user", "NAME", "the user (a login; its user record name comes from the container's user directory, else is derived from the container and the login)", default: "$STRATUS_USER, else the role a PostgreSQL store logs in as, else the login name"),
        Option(flag: "--anonymous", "act as a caller who is not signed in: read what the _world role may read in the public database, and nothing else"),
        Option("--environment", "NAME", "development or production: each keeps its own schema and data; production refuses unknown types and fields and queries without their index", default: "$STRATUS_ENVIRONMENT, else development"),
    ])
}

/// The store options' values.
struct StoreOptions {
    /// Whether a command only reads, or may create the store it writes to.
    enum Access {
        /// The command only reads: the store must exist (exit 66 otherwise), and an SQLite store
        /// the user may not write (the file, its folder or its log files) is opened read-only.
        case read
        /// The store must exist (exit 66 otherwise); nothing is created, not even its folder.
        case existing
        /// A missing store is created, and stderr says so.
        case createIfMissing
    }

    var storePath: String?
    var readStoreURL: String?
    /// Where `readStoreURL` came from, for messages.
    var readStoreOrigin = "--read-store"
    var containerIdentifier = "default"
    var scope = Database.Scope.public
    /// Whether `--database` named the scope (a cursor otherwise goes on in its own).
    var scopeGiven = false
    var zoneID = RecordZone.ID.default
    /// Whether `--zone` was given (not the default).
    var zoneGiven = false
    /// `--zone-owner`: whose zone ``zoneID`` (and the zones `zones` names) is; `nil` for the user's own.
    var zoneOwner: String?
    /// `--all-zones`, for the commands that take it: every zone instead of ``zoneID``.
    var allZones = false
    /// Why `--all-zones` takes no CSV.
    static let allZonesCSV = "--all-zones writes record JSON: CSV rows carry no zone, so records of different zones with one name could not be told apart"

    /// The zone `name` of ``zoneOwner``, or of the user when none was given.
    func zone(named name: String) -> RecordZone.ID {
        zoneOwner.map { RecordZone.ID(zoneName: name, ownerName: $0) } ?? RecordZone.ID(zoneName: name)
    }

    /// The zone a query reads: `nil` for every zone.
    var searchedZoneID: RecordZone.ID? { allZones ? nil : zoneID }
    var userName: String?
    var anonymous = false
    var environment = Container.Environment.development

    /// - Parameter locationOnly: for the commands that take `--store` alone (``OptionGroup/storeLocation``):
    ///   only `--store` and `$STRATUS_STORE` are read, so that the variables of options they do
    ///   not take (`$STRATUS_READ_STORE` exported for a cron job's PostgreSQL commands) neither
    ///   refuse them nor change what they read.
    /// - Throws: ``UsageError`` for an unknown database, environment or an empty name.
    /// - Parameter namesZones: for `zones`, whose arguments are zone names: `--zone-owner` is
    ///   their owner, without `--zone`.
    init(_ arguments: ParsedArguments, locationOnly: Bool = false, namesZones: Bool = false) throws {
        if locationOnly {
            if arguments.value("--store") == "" { throw UsageError(message: "--store needs a non-empty value") }
            if !arguments.has("--store") && ProcessInfo.processInfo.environment["STRATUS_STORE"] == "" {
                throw UsageError(message: "$STRATUS_STORE is set but empty; unset it, or give it a value (or give --store)")
            }
            storePath = arguments.value("--store")
            return
        }
        for option in ["--store", "--read-store", "--container", "--user", "--zone", "--zone-owner"] where arguments.value(option) == "" {
            throw UsageError(message: "\(option) needs a non-empty value")
        }
        // Set but empty is a wrapper's unset variable (`STRATUS_STORE="$STORE"`): taken as unset,
        // a job would read or create the default store instead of the one meant.
        for (variable, option) in [("STRATUS_STORE", "--store"), ("STRATUS_READ_STORE", "--read-store"), ("STRATUS_USER", "--user"), ("STRATUS_ENVIRONMENT", "--environment")]
        where !arguments.has(option) && ProcessInfo.processInfo.environment[variable] == "" {
            throw UsageError(message: "$\(variable) is set but empty; unset it, or give it a value (or give \(option))")
        }
        storePath = arguments.value("--store")
        readStoreURL = arguments.value("--read-store") ?? ProcessInfo.processInfo.environment["STRATUS_READ_STORE"].flatMap { $0.isEmpty ? nil : $0 }
        readStoreOrigin = arguments.has("--read-store") ? "--read-store" : "$STRATUS_READ_STORE"
        if let container = arguments.value("--container") {
            // A store's URL given as the container (`--container "$STRATUS_STORE"`) would name a
            // new store file after it, password included, and be kept in that store.
            try Self.refuseURL(container, as: "--container", naming: "a container identifier (such as iCloud.com.example.app)")
            containerIdentifier = container
        }
        if let database = arguments.value("--database") {
            scopeGiven = true
            switch database {
            case "public": scope = .public
            case "private": scope = .private
            case "shared": scope = .shared
            default: throw UsageError(message: "--database must be public, private or shared, not '\(database)'")
            }
        }
        zoneOwner = arguments.value("--zone-owner")
        if let zoneName = arguments.value("--zone") {
            try Self.refuseURL(zoneName, as: "--zone", naming: "a zone (such as Notes)")
            zoneID = zone(named: zoneName)
            zoneGiven = true
        }
        allZones = arguments.flag("--all-zones")
        if allZones && zoneGiven { throw UsageError(message: "--all-zones and --zone exclude each other") }
        if zoneOwner != nil && !zoneGiven && !allZones && !namesZones {
            throw UsageError(message: "--zone-owner names the owner of --zone: give the zone too (--zone NAME --zone-owner \(zoneOwner ?? ""))")
        }
        if allZones && zoneOwner != nil { throw UsageError(message: "--zone-owner names the owner of one zone; --all-zones reads every zone the database holds, whoever owns it") }
        userName = arguments.value("--user")
        anonymous = arguments.flag("--anonymous")
        if anonymous && userName != nil { throw UsageError(message: "--anonymous and --user exclude each other") }
        if let name = arguments.value("--environment") ?? ProcessInfo.processInfo.environment["STRATUS_ENVIRONMENT"].flatMap({ $0.isEmpty ? nil : $0 }) {
            guard let chosen = Container.Environment(rawValue: name) else {
                let origin = arguments.has("--environment") ? "--environment" : "$STRATUS_ENVIRONMENT"
                throw UsageError(message: "\(origin) must be development or production, not '\(name)'")
            }
            environment = chosen
        }
        do {
            try Container.checkIdentifier(containerIdentifier)
            if let userName { try UserDirectoryEntry.checkLogin(userName) }
        } catch {
            throw UsageError(message: error.message)
        }
        if userName == nil, !anonymous, let fromEnvironment = Container.environmentUserName {
            do {
                try UserDirectoryEntry.checkLogin(fromEnvironment)
            } catch {
                throw UsageError(message: "$STRATUS_USER: \(error.message)")
            }
        }
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

    /// Where `--store` came from, for messages.
    var storeOrigin: String {
        let fromEnvironment = ProcessInfo.processInfo.environment["STRATUS_STORE"]?.isEmpty == false
        return storePath != nil ? "--store" : fromEnvironment ? "$STRATUS_STORE" : Self.defaultStoreOrigin
    }

    /// The origin of a store no option or variable named: the only one whose missing folders
    /// are made.
    static let defaultStoreOrigin = "the container's default store"

    /// Opens the container. A read (`.existing`) never creates a store: a typo'd path or a
    /// forgotten `--store` is exit 66, not an empty answer.
    ///
    /// - Throws: ``CommandFailure`` `inputMissing` when the store must exist and does not.
    func openContainer(_ access: Access, missingStoreAdvice: String = StoreOptions.commandsThatMakeAStore) throws -> Container {
        let engine = try Self.openEngine(resolvedStorePath, readURL: readStoreURL, readURLOrigin: readStoreOrigin, access: access, origin: storeOrigin,
                                         missingStoreAdvice: missingStoreAdvice)
        if !anonymous, let postgres = engine as? PostgresEngine {
            // --user (or STRATUS_USER) naming another user than the role row-level security binds
            // found none of that user's records and had writes refused, saying neither why.
            let named = userName ?? ProcessInfo.processInfo.environment["STRATUS_USER"].flatMap { $0.isEmpty ? nil : $0 }
            if let named {
                do {
                    try postgres.checkActing(as: named)
                } catch let error as StratusError where error.code == .permissionFailure {
                    throw CommandFailure(.permissionDenied, error.message.replacingOccurrences(of: "or name no other user", with: userName != nil ? "or leave --user out" : "or unset STRATUS_USER"))
                }
            }
        }
        return container(identifier: containerIdentifier, engine: engine)
    }

    /// A refusal of a caller who is not signed in (`notAuthenticated` under `--anonymous`), with
    /// the library's advice to a program (`open it with a user name`) said as the tool's
    /// options: leave out `--anonymous`, or give `--user`.
    ///
    /// ```swift
    /// StoreOptions.advisingAnonymous("notAuthenticated: the private database needs a signed-in user; this container has none (open it with a user name)")
    /// // "… the private database needs a signed-in user; --anonymous acts as none (leave out --anonymous, or give --user NAME)"
    /// ```
    static func advisingAnonymous(_ message: String) -> String {
        let advice = "leave out --anonymous, or give --user NAME"
        for programAdvice in ["this container has none (open it with a user name)", "(open the container with a user name)"] where message.contains(programAdvice) {
            let replacement = programAdvice.hasPrefix("this container") ? "--anonymous acts as none (\(advice))" : "(\(advice))"
            return message.replacingOccurrences(of: programAdvice, with: replacement)
        }
        return message.contains("signed-in user") ? "\(message) (\(advice))" : message
    }

    /// Refuses a store's URL given where a name goes (`--container "$STRATUS_STORE"`): the name
    /// would be kept in the store and printed later, or name a file, password and all.
    ///
    /// - Throws: ``UsageError`` that does not repeat the value.
    static func refuseURL(_ value: String, as option: String, naming what: String) throws {
        guard value.contains("://") || PostgresEngine.isStoreURL(value) else { return }
        throw UsageError(message: "\(option) takes \(what), not a store: the value given looks like a URL (it is not repeated here: it may hold a password); name the store with --store")
    }

    /// What makes a store, for the message of a command that needs one that does not exist.
    static let commandsThatMakeAStore = "only import, copy, zones create, schema import, users add, users row-security (PostgreSQL) and subscriptions create make a new store"

    /// Opens the store at `location` (an SQLite path or a PostgreSQL URL, as ``StoreLocation``
    /// reads it). A read (`.existing`) never creates a store; a store that is created is
    /// announced on stderr.
    ///
    /// - Throws: ``CommandFailure`` `inputMissing` naming `origin` when the store must exist and
    ///   does not; ``UsageError`` for text that names no store, or a standby of a store that is
    ///   not PostgreSQL.
    static func openEngine(_ location: String, readURL: String? = nil, readURLOrigin: String? = nil, access: Access, origin: String,
                           missingStoreAdvice: String = commandsThatMakeAStore) throws -> any StorageEngine {
        if let readURL, !PostgresEngine.isStoreURL(readURL) {
            // Not echoed: a mistyped URL may hold a password.
            throw UsageError(message: "--read-store (or $STRATUS_READ_STORE) takes the postgresql:// URL of a hot standby of a PostgreSQL store; the value given is not one (it is not repeated here: it may hold a password)")
        }
        let store: StoreLocation
        do {
            store = try StoreLocation(location)
        } catch {
            // Where the text came from, never the text: it may hold a password.
            throw UsageError(message: error.description(naming: origin))
        }
        switch store {
        case .postgres(let url):
            return try openPostgres(url, readURL: readURL, access: access, origin: origin, missingStoreAdvice: missingStoreAdvice)
        case .sqlite(let path):
            if readURL != nil {
                // A cron environment that exports STRATUS_READ_STORE for its PostgreSQL jobs
                // should learn where the standby came from when one job names an SQLite file.
                let given = readURLOrigin.map { "\($0) names" } ?? "--read-store (or $STRATUS_READ_STORE) names"
                throw UsageError(message: "\(given) a standby of a PostgreSQL store; \(origin) is not one")
            }
            return try openSQLite(path, access: access, origin: origin, missingStoreAdvice: missingStoreAdvice)
        }
    }

    private static func openPostgres(_ location: String, readURL: String?, access: Access, origin: String, missingStoreAdvice: String) throws -> any StorageEngine {
        opened.withLock { $0.append(PostgresConnectionString.redacted(location)) }
        let engine: PostgresEngine
        do {
            engine = try PostgresEngine.shared(url: location, readURL: readURL, create: access == .createIfMissing)
        } catch let error as StratusError where error.underlyingError is PostgresEngine.StoreMissing {
            // The engine's advice is a Swift program's; the tool's user is told which commands
            // make one, and which option named the store (a copy names two).
            let database = (error.underlyingError as? PostgresEngine.StoreMissing)?.description ?? error.message
            throw CommandFailure(.inputMissing, "\(database) (\(origin)); \(missingStoreAdvice)")
        }
        if engine.createdStore && firstAnnouncement(of: engine.redactedURL) { StratusCommand.note("created a new store in \(engine.redactedURL)") }
        return engine
    }

    private static func openSQLite(_ location: String, access: Access, origin: String, missingStoreAdvice: String) throws -> any StorageEngine {
        var status = stat()
        if stat(location, &status) != 0 && errno == EACCES {
            // Not "no store": a folder on the way keeps this user out.
            throw CommandFailure(.permissionDenied, "the store at \(location) (\(origin)) cannot be reached: a folder on its path may not be searched by you (permission denied)")
        }
        let existed = FileManager.default.fileExists(atPath: location)
        if access != .createIfMissing && (!existed || Self.isEmptyFile(location)) {
            // An empty file (`touch`) is not a store either: a read must not make it one.
            throw CommandFailure(.inputMissing, "there is no store at \(location) (\(origin))\(existed ? ", only an empty file" : ""); \(missingStoreAdvice)")
        }
        if !existed && origin == defaultStoreOrigin, let home = ProcessInfo.processInfo.environment["HOME"], !home.isEmpty,
           location.hasPrefix(home.hasSuffix("/") ? home : home + "/"), !FileManager.default.fileExists(atPath: home) {
            // A mistyped or missing HOME (a cron or service environment) would be made, with a
            // new store in it that the job then reports success into.
            throw CommandFailure(.cannotCreateOutput, "cannot make the default store at \(location): HOME is \(home), which does not exist; set HOME to a folder that exists, or name the store with --store or STRATUS_STORE")
        }
        if !existed && origin != defaultStoreOrigin {
            // A named store's folder is not made: a mistyped folder (`/srv/stratsu/app.sqlite`)
            // made a new, empty store there, and the job reported success into it.
            let folder = URL(fileURLWithPath: location).deletingLastPathComponent().path
            var isFolder: ObjCBool = false
            if !FileManager.default.fileExists(atPath: folder, isDirectory: &isFolder) || !isFolder.boolValue {
                throw CommandFailure(.cannotCreateOutput, "cannot make a new store at \(location) (\(origin)): the folder \(folder) does not exist; a store is made only in a folder that exists, so that a mistyped path makes no store (create it first: mkdir -p \(folder))")
            }
        }
        opened.withLock { $0.append(location) }
        if access == .read, let missing = missingWriteAccess(location) {
            StratusCommand.log("reading the store at \(location) read-only: \(missing)")
            return keptUntilExit(try SQLiteEngine(path: location, readOnly: true))
        }
        if access == .read, let others = SQLiteEngine.otherNames(location) {
            // A hard-link snapshot is read as it is; written through, its other names' logs
            // would be lost (the engine refuses that).
            StratusCommand.log("reading the store at \(location) read-only: the file has \(others) other name(s) (hard links); what a writer through another name keeps in its log is not seen here")
            return keptUntilExit(try SQLiteEngine(path: location, readOnly: true))
        }
        let engine = keptUntilExit(try SQLiteEngine.shared(path: location))
        // Not whether the file existed: another process may have made the file, or the tables,
        // first. The engine knows whether this process made the tables.
        if engine.createdStore && firstAnnouncement(of: engine.path) { StratusCommand.note("created a new store at \(location)") }
        return engine
    }

    /// Whether the store `location` names was not yet said to be created: a command that opens
    /// a store twice gets the engine it opened first, which still says it made the store.
    private static func firstAnnouncement(of location: String) -> Bool {
        announced.withLock { $0.insert(location).inserted }
    }

    private static let announced = Mutex<Set<String>>([])

    /// Whether `path` is a regular file of no bytes.
    private static func isEmptyFile(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG && info.st_size == 0
    }

    /// What keeps the user from writing the SQLite store at `path` (the file, its folder, or
    /// the log files a writer left), or nil when nothing does.
    static func missingWriteAccess(_ path: String) -> String? {
        let folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
        if access(path, W_OK) != 0 { return "you may not write the file" }
        if access(folder, W_OK) != 0 { return "you may not write its folder \(folder)" }
        for file in [path + "-wal", path + "-shm"] where FileManager.default.fileExists(atPath: file) && access(file, W_OK) != 0 {
            return "you may not write \(file)"
        }
        return nil
    }

    /// The stores this process opened (passwords hidden), for messages about failures that
    /// do not say which store failed.
    static let opened = Mutex<[String]>([])

    /// The SQLite engines this process opened, held until it exits: none closes on whichever
    /// thread lets go of it last (a job's thread, a moment after the job answered, racing the
    /// exit), only in ``closeSQLiteStores()``.
    private static let sqliteEngines = Mutex<[SQLiteEngine]>([])

    private static func keptUntilExit(_ engine: SQLiteEngine) -> SQLiteEngine {
        sqliteEngines.withLock { engines in
            if !engines.contains(where: { $0 === engine }) { engines.append(engine) }
        }
        return engine
    }

    /// Closes the SQLite stores this process opened (see ``SQLiteEngine/close()``), on the
    /// calling thread; SQLite then removes their -wal and -shm files. Called once the command's
    /// work is over.
    static func closeSQLiteStores() {
        for engine in sqliteEngines.withLock({ $0 }) { engine.close() }
    }

    /// `message`, naming the stores the command opened when it names none of them: a damaged
    /// record read from a store says what is wrong with it, not where it is.
    static func namingStores(_ message: String) -> String {
        let stores = opened.withLock { $0 }
        guard !stores.isEmpty, !stores.contains(where: { message.contains($0) }) else { return message }
        return message + " (in the store at \(stores.joined(separator: ", ")))"
    }

    /// How messages name the store at `location`: its path, or its URL without a password.
    static func describe(_ engine: any StorageEngine) -> String {
        if let postgres = engine as? PostgresEngine { return postgres.redactedURL }
        if let sqlite = engine as? SQLiteEngine { return sqlite.path }
        return "the store"
    }

    func openDatabase(_ access: Access) throws -> Database {
        try openContainer(access).database(with: scope)
    }

    /// The public database as the store's administrator sees it (`--as-administrator`): no
    /// user, so the security roles, which are the apps' rules, do not limit what it writes.
    static func administratorDatabase(of container: Container) -> Database {
        container.administratorPublicDatabase
    }

    /// Refuses `--as-administrator` outside the public database: only there do security roles
    /// limit a user, so only there does the administrator write more than its owner could.
    func checkAdministratorScope() throws {
        guard scope == .public else {
            throw UsageError(message: "--as-administrator is for the public database, where security roles apply; a private database holds its owner's records only")
        }
    }

    /// The store's public database, opened as its administrator.
    func openAdministratorDatabase(_ access: Access) throws -> Database {
        Self.administratorDatabase(of: try openContainer(access))
    }
}
