import Foundation
import Stratus
import StratusStores
import Synchronization

// CloudKit's two ways to get a container cannot fail, and CloudKit code calls them where
// nothing can throw (a stored property, a `static let`, a global). Under `import CloudKit` they
// keep that shape and open the store `$STRATUS_STORE` names on either engine, so the same
// program runs on a laptop's SQLite file and on a shared PostgreSQL store. These declarations
// shadow the embedded store's throwing `Container(identifier:storePath:…)` (for a call with the
// identifier alone) and its SQLite-only `Container.default()` in files that import CloudKit.

extension Container {
    /// `CKContainer(identifier:)`: the container `identifier` names, in the default store
    /// (`$STRATUS_STORE`, an SQLite file's path or a PostgreSQL URL; else
    /// `~/.local/share/stratus/<identifier>.sqlite`), acting as the default user
    /// (`$STRATUS_USER`, else the login name).
    ///
    /// ```swift
    /// import CloudKit
    ///
    /// final class NotesStore {
    ///     let database = CKContainer(identifier: "iCloud.com.example.notes").privateCloudDatabase
    /// }
    /// ```
    ///
    /// As in CloudKit, an identifier CloudKit refuses fails each operation with `badContainer`
    /// rather than the call.
    ///
    /// - Precondition: the default store opens. Like CloudKit's, this initializer cannot fail;
    ///   it stops the program with the store's error (naming a PostgreSQL store without its
    ///   password). `try CKContainer(identifier:store:userName:)` opens the same store and throws instead.
    public convenience init(identifier: String) {
        let shown = identifier.contains("://") ? "a URL" : "\"\(identifier)\""
        self.init(identifier: identifier, engine: Container.defaultStoreEngine(for: identifier, caller: "CKContainer(identifier: \(shown))"),
                  userName: nil)
    }

    /// `CKContainer.default()`: the container `$STRATUS_CONTAINER` names (else `default`, the
    /// one the `stratus` tool uses without `--container`) in the default store, on either
    /// engine, as ``Container/init(identifier:)`` opens it. Every call answers the same
    /// container.
    ///
    /// ```swift
    /// import CloudKit
    ///
    /// // STRATUS_STORE=postgresql://jobs@db1/app in the cron job, nothing on a laptop
    /// let database = CKContainer.default().privateCloudDatabase
    /// ```
    ///
    /// - Precondition: the default store opens (see ``Container/init(identifier:)``).
    public static func `default`() -> Container {
        let identifier = Container.defaultIdentifier
        return defaultContainers.withLock { containers in
            if let container = containers[identifier] { return container }
            let container = Container(identifier: identifier, engine: defaultStoreEngine(for: identifier, caller: "CKContainer.default()"), userName: nil)
            containers[identifier] = container
            Container.defaultForOperations.withLock { $0 = container }
            return container
        }
    }

    /// The engine of the default store, or the end of the program with why it does not open.
    private static func defaultStoreEngine(for identifier: String, caller: String) -> any StorageEngine {
        let location: StoreLocation
        do {
            location = try StoreLocation.default(containerIdentifier: identifier)
        } catch {
            preconditionFailure("\(caller): \(error.description(naming: "$STRATUS_STORE"))")
        }
        do {
            return try location.openEngine()
        } catch {
            // A trap's message lands in logs and crash reports: the location is described
            // without a password, and the engines' errors never carry one.
            preconditionFailure("\(caller) could not open the store \(location): \(error); use try CKContainer(identifier:store:userName:) to handle this")
        }
    }
}

private let defaultContainers = Mutex<[String: Container]>([:])
