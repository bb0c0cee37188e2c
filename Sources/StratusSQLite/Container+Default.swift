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
    ///   created. Use `try Container(identifier:storePath:userName:)` to handle that error.
    public static func `default`() -> Container {
        let environment = ProcessInfo.processInfo.environment
        let identifier = environment["STRATUS_CONTAINER"].flatMap { $0.isEmpty ? nil : $0 } ?? "default"
        return defaultContainers.withLock { containers in
            if let container = containers[identifier] { return container }
            do {
                let container = try Container(identifier: identifier)
                containers[identifier] = container
                return container
            } catch {
                let path = SQLiteEngine.defaultStorePath(containerIdentifier: identifier)
                preconditionFailure("Container.default() could not open the store at \(path): \(error); use try Container(identifier:storePath:) to handle this")
            }
        }
    }
}

private let defaultContainers = Mutex<[String: Container]>([:])
