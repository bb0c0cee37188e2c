import Foundation

/// A container of databases, like `CKContainer`: one app's data, seen by one user.
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
public final class Container: Sendable {
    public let containerIdentifier: String
    /// The store's engine, shared by the container's databases.
    public let engine: any StorageEngine
    /// The current user's name. Private records belong to this user.
    public let userName: String

    public let publicCloudDatabase: Database
    public let privateCloudDatabase: Database
    public let sharedCloudDatabase: Database

    /// Opens a container on an engine, as the user `userName` (default: ``defaultUserName``).
    ///
    /// - Precondition: `identifier` and `userName` are not empty (a programmer error).
    /// `retryPolicy` applies to every operation of the container's databases that sets none.
    public init(identifier: String, engine: any StorageEngine, userName: String? = nil, retryPolicy: RetryPolicy = RetryPolicy()) {
        let user = userName ?? Container.defaultUserName
        precondition(!identifier.isEmpty, "a container identifier cannot be empty")
        precondition(!user.isEmpty, "a user name cannot be empty")
        self.containerIdentifier = identifier
        self.engine = engine
        self.userName = user
        func database(_ scope: Database.Scope) -> Database {
            Database(engine: engine, context: DatabaseContext(containerIdentifier: identifier, scope: scope, userName: user), retryPolicy: retryPolicy)
        }
        publicCloudDatabase = database(.public)
        privateCloudDatabase = database(.private)
        sharedCloudDatabase = database(.shared)
    }

    /// The database with the given scope.
    public func database(with scope: Database.Scope) -> Database {
        switch scope {
        case .public: publicCloudDatabase
        case .private: privateCloudDatabase
        case .shared: sharedCloudDatabase
        }
    }

    /// The current user's record ID (its record name is the user name).
    public var userRecordID: Record.ID { Record.ID(recordName: userName) }

    /// The current user's record ID, as `CKContainer.userRecordID()` answers it.
    public func userRecordID() async throws -> Record.ID { userRecordID }

    /// The user a container acts as when none is given: `$STRATUS_USER`, else the login name.
    public static var defaultUserName: String {
        if let user = ProcessInfo.processInfo.environment["STRATUS_USER"], !user.isEmpty { return user }
        let name = NSUserName()
        return name.isEmpty ? "defaultUser" : name
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
        try await publicCloudDatabase.engineCall { engine, _ in try engine.inventory() }
    }

    /// A Stratus extension: checks the store's own consistency and answers what is wrong,
    /// empty when nothing is (on SQLite, `PRAGMA integrity_check` of every page).
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
