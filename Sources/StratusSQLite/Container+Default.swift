import Foundation
import Stratus
import Synchronization

extension Container {
    /// The container CloudKit code gets from `CKContainer.default()`: the container named by
    /// `$STRATUS_CONTAINER`, else `default` (the one the `stratus` tool uses when given no
    /// `--container`), in the default store (`$STRATUS_STORE`, else
    /// `~/.local/share/stratus/<identifier>.sqlite`), as the default user
    /// (``Container/defaultUserName``). Every call answers the same container.
    ///
    /// ```swift
    /// let database = Container.default().privateCloudDatabase
    /// ```
    ///
    /// - Precondition: the default store opens. Like `CKContainer.default()`, this call cannot
    ///   fail; it stops the program with the store's error when the file cannot be opened or
    ///   created, or when `$STRATUS_STORE` is a PostgreSQL URL, which this SQLite store cannot
    ///   open (the message names the variable, not the URL, which may hold a password). Use
    ///   `try Container(identifier:storePath:userName:)` to handle that error, or
    ///   `Container(identifier:postgresURL:)` for a PostgreSQL store (or
    ///   `Container(identifier:store:)` of `StratusStores`, which follows either).
    // Disfavored: in a file that imports CloudKit too, `CKContainer.default()` is CloudKit's,
    // which opens the store `$STRATUS_STORE` names on either engine.
    @_disfavoredOverload
    public static func `default`() -> Container {
        let identifier = Container.defaultIdentifier
        return defaultContainers.withLock { containers in
            if let container = containers[identifier] { return container }
            do {
                let container = try Container(identifier: identifier)
                containers[identifier] = container
                Container.defaultForOperations.withLock { $0 = container }
                return container
            } catch {
                // A PostgreSQL URL in $STRATUS_STORE may carry a password, and a trap's message
                // lands in logs and crash reports: name where it came from, not what it says.
                let path = SQLiteEngine.defaultStorePath(containerIdentifier: identifier)
                let store = (try? SQLiteEngine.refuseURL(path)) == nil ? "named by $STRATUS_STORE" : "at \(path)"
                preconditionFailure("Container.default() could not open the store \(store): \(error); use try Container(identifier:storePath:) to handle this")
            }
        }
    }
}

private let defaultContainers = Mutex<[String: Container]>([:])
