import Foundation
import Synchronization

/// A container of databases, like `CKContainer`: one app's data, in one environment, seen by one user.
///
/// A container reads and writes through a storage engine. With `import StratusSQLite`,
/// `Container(identifier:)` opens the embedded default store; pass an engine to choose another.
///
/// ```swift
/// import Stratus
/// import StratusSQLite
///
/// let container = try Container(identifier: "com.example.todo")
/// let todo = Record(recordType: "Todo")
/// todo["title"] = "Try Stratus"
/// try await container.publicCloudDatabase.save(todo)
/// ```
///
/// As `CKContainer`, a container is an `NSObject` and compares as an object: it equals itself
/// and no other, so code that keys work by container (CloudKitGDPR's `[CKContainer: [String]]`
/// of record types to export, a `Set<CKContainer>`) ports unchanged. Two `Container` objects
/// opened on one store are two containers, as two `CKContainer`s.
///
/// ```swift
/// let recordTypes: [Container: [String]] = [notes: ["Note"], settings: ["Preference"]]
/// ```
public final class Container: NSObject, Sendable {
    /// The container's identifier, as `CKContainer.containerIdentifier` (optional there too;
    /// never `nil` here: ``identifier`` gives it unwrapped).
    ///
    /// ```swift
    /// if let identifier = container.containerIdentifier { print(identifier) }
    /// ```
    public var containerIdentifier: String? { identifier }

    /// The container's identifier (`com.example.todo`): ``containerIdentifier`` without the
    /// optional.
    ///
    /// ```swift
    /// let file = "\(container.identifier).json"
    /// ```
    public let identifier: String
    /// The store's engine, shared by the container's databases.
    public let engine: any StorageEngine
    /// Which of the container's environments this is: development (the default) or production.
    public let environment: Environment
    /// The current user's login name; `nil` for a container with no user (``anonymous(identifier:engine:environment:retryPolicy:)``).
    /// Private records belong to this user.
    public var userName: String? { user.login }

    /// The database every user of the container shares, as `CKContainer.publicCloudDatabase`:
    /// public records, which each user reads and writes as the record types' security roles
    /// allow.
    ///
    /// ```swift
    /// try await container.publicCloudDatabase.save(todo)
    /// ```
    public let publicCloudDatabase: Database
    /// The current user's own database, as `CKContainer.privateCloudDatabase`: records and zones
    /// that only this user sees.
    ///
    /// ```swift
    /// let zone = try await container.privateCloudDatabase.save(RecordZone(zoneName: "Lists"))
    /// ```
    public let privateCloudDatabase: Database
    /// The database of the zones other users share with the current user, as
    /// `CKContainer.sharedCloudDatabase`. An owner shares records and zones of their private
    /// database with ``Share`` (`CKShare`), but accepting a share is not implemented yet, so
    /// this database is still empty: it has no zones, and saves and queries in its default zone
    /// fail with `invalidArguments` (a fetch by record ID with `zoneNotFound`).
    ///
    /// ```swift
    /// let zones = try await container.sharedCloudDatabase.allRecordZones()   // [] until shares can be accepted
    /// ```
    public let sharedCloudDatabase: Database
    /// A Stratus extension: the public database as the store's administrator sees it, for
    /// backups, restores and whole-store copies (`stratus import --as-administrator`). It acts
    /// as no user: the public database's security roles (the apps' rules) do not limit what it
    /// reads and writes, production's index rules do not refuse its queries, and it reads any
    /// asset content the store holds. A record it saves keeps the creator and modifier it
    /// holds: a new record must name them (as a backup's records do), and a change it makes
    /// is not attributed to anyone new. Whoever can open the store can act as its
    /// administrator: on SQLite, whoever can read and write the file; on PostgreSQL, the
    /// server's roles and row-level security still decide what the connection reaches.
    ///
    /// ```swift
    /// let summary = try await RecordImporter(database: container.administratorPublicDatabase).run(from: backup)
    /// ```
    public let administratorPublicDatabase: Database

    let user: ContainerUser
    let retryPolicy: RetryPolicy

    /// Opens a container on an engine, as the user `userName` (default: ``defaultUserName``),
    /// in an environment (default: development).
    ///
    /// ```swift
    /// let container = Container(identifier: "com.example.todo", engine: engine, userName: "alice", environment: .production)
    /// ```
    ///
    /// As `CKContainer(identifier:)`, this does not fail: an `identifier` that
    /// ``checkIdentifier(_:)`` refuses makes every operation of the container fail with
    /// `badContainer`, and a `userName` that ``UserDirectoryEntry/checkLogin(_:)`` refuses
    /// (empty, a control character, longer than 255 bytes) with `invalidArguments`.
    /// `retryPolicy` applies to every operation of the container's databases that sets none.
    public convenience init(identifier: String, engine: any StorageEngine, userName: String? = nil, environment: Environment = .development, retryPolicy: RetryPolicy = RetryPolicy()) {
        let login = userName ?? Container.defaultUserName(for: engine)
        self.init(identifier: identifier, engine: engine, environment: environment, user: ContainerUser(login: login, containerIdentifier: identifier), retryPolicy: retryPolicy)
    }

    /// Checks what a container is opened with, for the initialisers that can throw: they fail
    /// before opening (or creating) a store, where the others fail every operation.
    ///
    /// ```swift
    /// try Container.checkOpening(identifier: request.app, userName: request.user)
    /// ```
    ///
    /// - Throws: ``StratusError`` `badContainer` for the identifier, `invalidArguments` for the
    ///   user name, as ``checkIdentifier(_:)`` and ``UserDirectoryEntry/checkLogin(_:)``.
    public static func checkOpening(identifier: String, userName: String?) throws(StratusError) {
        try checkIdentifier(identifier)
        if let userName { try UserDirectoryEntry.checkLogin(userName) }
    }

    /// A container whose caller is not signed in: it may read in the public database what the
    /// `_world` role may read, and nothing else (`notAuthenticated`), as a CloudKit client
    /// without an iCloud account.
    ///
    /// ```swift
    /// let visitor = Container.anonymous(identifier: "com.example.forum", engine: engine)
    /// let posts = try await visitor.publicCloudDatabase.records(matching: Query(recordType: "Post"))
    /// ```
    public static func anonymous(identifier: String, engine: any StorageEngine, environment: Environment = .development, retryPolicy: RetryPolicy = RetryPolicy()) -> Container {
        Container(identifier: identifier, engine: engine, environment: environment, user: ContainerUser(login: nil, containerIdentifier: identifier), retryPolicy: retryPolicy)
    }

    init(identifier: String, engine: any StorageEngine, environment: Environment, user: ContainerUser, retryPolicy: RetryPolicy) {
        self.identifier = identifier
        self.engine = engine
        self.environment = environment
        self.user = user
        self.retryPolicy = retryPolicy
        func database(_ scope: Database.Scope) -> Database {
            Database(engine: engine, context: DatabaseContext(containerIdentifier: identifier, environment: environment, scope: scope, userName: user.login),
                     user: user, retryPolicy: retryPolicy)
        }
        publicCloudDatabase = database(.public)
        privateCloudDatabase = database(.private)
        sharedCloudDatabase = database(.shared)
        administratorPublicDatabase = Database(
            engine: engine, context: .administrator(containerIdentifier: identifier, environment: environment, scope: .public, owner: ""),
            user: nil, retryPolicy: retryPolicy, refusal: user.refusal.flatMap { $0.code == .badContainer ? $0 : nil })
        super.init()
    }

    /// The database with the given scope.
    public func database(with scope: Database.Scope) -> Database {
        switch scope {
        case .public: publicCloudDatabase
        case .private: privateCloudDatabase
        case .shared: sharedCloudDatabase
        }
    }

    /// The current user's record ID, as `CKContainer.userRecordID()` answers it: `_` and 32
    /// hexadecimal digits derived from the container and the login, unless the container's user
    /// directory names another.
    ///
    /// ```swift
    /// let me = try await container.userRecordID()
    /// let mine = try Query(recordType: "Post", format: "creatorUserRecordID == %@", me)
    /// ```
    ///
    /// - Throws: ``StratusError`` `notAuthenticated` for a container with no user; store errors.
    public func userRecordID() async throws -> Record.ID {
        guard let entry = try user.entry(engine: engine) else {
            throw StratusError(.notAuthenticated, "this container has no signed-in user, so there is no user record")
        }
        return Record.ID(recordName: entry.userRecordName)
    }

    /// The user a container acts as when none is given: `$STRATUS_USER`, else the login name.
    ///
    /// ```swift
    /// print(Container.defaultUserName)   // "alice"
    /// ```
    public static var defaultUserName: String {
        if let user = environmentUserName { return user }
        let name = NSUserName()
        return name.isEmpty ? "defaultUser" : name
    }

    /// The container an operation runs in when it has neither a database nor a container in
    /// its configuration (added to an `OperationQueue` of its own), as CloudKit runs one in
    /// `CKContainer.default()`'s private database: the container `default()` answered in this
    /// process (`Container.default()`, or `CKContainer.default()` under `import CloudKit`).
    package static let defaultForOperations = Mutex<Container?>(nil)

    /// The container `CKContainer.default()` answers: the one `$STRATUS_CONTAINER` names, else
    /// `default` (the one the `stratus` tool uses without `--container`).
    package static var defaultIdentifier: String {
        ProcessInfo.processInfo.environment["STRATUS_CONTAINER"].flatMap { $0.isEmpty ? nil : $0 } ?? "default"
    }

    /// The user a container on `engine` acts as when none is given: `$STRATUS_USER`, else the
    /// role a PostgreSQL store logged in as (so that row-level security and Stratus agree on
    /// who the caller is), else the login name.
    ///
    /// ```swift
    /// let user = Container.defaultUserName(for: engine)   // "alice"
    /// ```
    public static func defaultUserName(for engine: any StorageEngine) -> String {
        if let user = environmentUserName { return user }
        if let role = engine.authenticatedUserName, (try? UserDirectoryEntry.checkLogin(role)) != nil { return role }
        return defaultUserName
    }

    /// `$STRATUS_USER` when set and not empty: the user a container opened without one acts as
    /// (before the engine's own default), so the initialisers that throw check it first.
    package static var environmentUserName: String? {
        guard let user = ProcessInfo.processInfo.environment["STRATUS_USER"], !user.isEmpty else { return nil }
        return user
    }

    /// Checks a container identifier from input: not empty, at most 255 bytes, and without a
    /// control character (production keys its data by the identifier and one).
    ///
    /// ```swift
    /// try Container.checkIdentifier(arguments.container)
    /// ```
    ///
    /// - Throws: ``StratusError`` `badContainer` naming the problem.
    public static func checkIdentifier(_ identifier: String) throws(StratusError) {
        if identifier.isEmpty { throw StratusError(.badContainer, "a container identifier cannot be empty") }
        // A store's URL given as the container (an environment file's STRATUS_CONTAINER mixed
        // up with STRATUS_STORE) would name a store file and be kept, password and all.
        if identifier.contains("://") {
            throw StratusError(.badContainer, "the container identifier looks like a URL (it is not repeated here: it may hold a password); a container identifier names an app's container, such as iCloud.com.example.notes, and a store is named apart (storePath:, postgresURL:, $STRATUS_STORE)")
        }
        if identifier.utf8.count > Naming.maximumIdentifierLength {
            throw StratusError(.badContainer, "container identifier '\(identifier.prefix(40))…' is longer than \(Naming.maximumIdentifierLength) bytes")
        }
        if identifier.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            throw StratusError(.badContainer, "container identifier \(identifier.debugDescription) holds a control character")
        }
    }

    /// A Stratus extension: what the container's store holds, every container and user of it
    /// included, in one snapshot (see ``StoreInventory``).
    ///
    /// ```swift
    /// let inventory = try await container.storeInventory()
    /// ```
    ///
    /// - Throws: store errors.
    public func storeInventory() async throws -> StoreInventory {
        var inventory = try await publicCloudDatabase.engineCall { engine, _ in try engine.inventory() }
        // Zones with the capabilities Stratus applies (the default zone's, whatever its row says).
        for database in inventory.databases.indices {
            for zone in inventory.databases[database].zones.indices {
                inventory.databases[database].zones[zone].zone = ZoneRules.answered(inventory.databases[database].zones[zone].zone, in: inventory.databases[database].scope)
            }
        }
        return inventory
    }

    /// A Stratus extension: checks the store's own consistency and answers what is wrong,
    /// empty when nothing is (on SQLite, `PRAGMA integrity_check` of every page; on every
    /// engine, that the store holds the content of every asset a record names).
    ///
    /// ```swift
    /// let problems = try await container.checkStoreIntegrity()
    /// ```
    ///
    /// - Throws: store errors (a store too damaged to check throws `badDatabase`).
    public func checkStoreIntegrity() async throws -> [String] {
        try await publicCloudDatabase.engineCall { engine, _ in try engine.checkIntegrity() }
    }
}
