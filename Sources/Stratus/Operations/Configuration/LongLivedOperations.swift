import Foundation
import Synchronization

/// The long-lived operations (``OperationConfiguration/isLongLived``) outstanding in this
/// process: what `Container.fetchAllLongLivedOperationIDs(completionHandler:)` and
/// `Container.fetchLongLivedOperation(withID:completionHandler:)` answer.
///
/// CloudKit keeps a long-lived operation on its servers and in a daemon, so that it outlives
/// the app. Stratus keeps no operation anywhere but in the process that runs it (its writes
/// commit or not, and cursors and change tokens are what survive), so the list is this
/// process's: an operation is outstanding from when it is added to a database (or, on a queue
/// of the app's own, from when it starts) until its final blocks have run.
final class LongLivedOperations: Sendable {
    static let shared = LongLivedOperations()

    private struct Entry {
        let operation: DatabaseOperation
        let database: Database
        /// Registration order, so that the IDs come back in the order the operations began.
        let order: UInt64
    }

    private struct State {
        var outstanding: [DatabaseOperation.ID: Entry] = [:]
        var nextOrder: UInt64 = 0
    }

    private let state = Mutex(State())

    /// Lists `operation`, running against `database`, until ``remove(_:)``; listing it again
    /// changes nothing.
    func register(_ operation: DatabaseOperation, on database: Database) {
        state.withLock { state in
            guard state.outstanding[operation.operationID] == nil else { return }
            state.outstanding[operation.operationID] = Entry(operation: operation, database: database, order: state.nextOrder)
            state.nextOrder += 1
        }
    }

    /// Stops listing `operation`: its final blocks have run.
    func remove(_ operation: DatabaseOperation) {
        _ = state.withLock { $0.outstanding.removeValue(forKey: operation.operationID) }
    }

    /// The outstanding long-lived operations of `container`, in the order they began: those
    /// running against any of its databases, or against another `Container` object's that names
    /// the same container, environment and user on the same store.
    ///
    /// - Throws: store errors, when telling whether two engines hold one store needs to read it.
    func operations(of container: Container) throws -> [DatabaseOperation] {
        // Compare outside the lock: telling stores apart may read a store.
        let entries = state.withLock { Array($0.outstanding.values) }.sorted { $0.order < $1.order }
        var matching: [DatabaseOperation] = []
        var containerStore: String?
        for entry in entries where !entry.operation.isCancelled {
            let context = entry.database.context
            guard context.containerIdentifier == container.identifier, context.environment == container.environment,
                  context.userName == container.userName
            else { continue }
            if entry.database.engine !== container.engine {
                if containerStore == nil { containerStore = try container.engine.storeIdentifier }
                // Another store that cannot be read now (gone, busy) holds none of this
                // container's operations: it must not fail the answer for this one.
                guard let entryStore = try? entry.database.engine.storeIdentifier, entryStore == containerStore else { continue }
            }
            matching.append(entry.operation)
        }
        return matching
    }

    /// The outstanding long-lived operation of `container` with this ID, or `nil`.
    ///
    /// - Throws: store errors, as ``operations(of:)``.
    func operation(withID operationID: DatabaseOperation.ID, of container: Container) throws -> DatabaseOperation? {
        try operations(of: container).first { $0.operationID == operationID }
    }
}
