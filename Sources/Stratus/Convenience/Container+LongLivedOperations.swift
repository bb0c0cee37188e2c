import Foundation

/// `CKContainer`'s long-lived operation calls, answered for this process.
///
/// In CloudKit a long-lived operation (``OperationConfiguration/isLongLived``) outlives the
/// app: its servers and a daemon keep it, and the next launch finds it with these calls, sets
/// its blocks and adds it again to hear how it ended. A Stratus operation runs in the process
/// that adds it and ends with it, its writes committed or not. So these calls answer the
/// container's long-lived operations outstanding in this process — added to one of the
/// container's databases (or started on a queue of the app's own) and whose final blocks have
/// not yet run — and nothing after a restart. Start-up code that resumes long-lived operations
/// compiles unchanged, finds none in a fresh process, and what it re-adds while still running
/// is left on its way (see ``Database/add(_:)``).
extension Container {
    /// Calls `completionHandler` on a background queue with the IDs of the container's
    /// long-lived operations outstanding in this process, as
    /// `CKContainer.fetchAllLongLivedOperationIDs(completionHandler:)`: empty in a process that
    /// has added none (Stratus keeps no operation past its process).
    ///
    /// ```swift
    /// container.fetchAllLongLivedOperationIDs { ids, error in
    ///     guard let ids = ids else { return }
    ///     for id in ids { container.fetchLongLivedOperation(withID: id) { operation, _ in … } }
    /// }
    /// ```
    ///
    /// The IDs come in the order the operations were added (or started). They cover the
    /// container's three databases, and those of another `Container` object naming the same
    /// container, environment and user on the same store.
    /// The error is a store error, when telling two `Container` objects' stores apart needs
    /// to read them.
    @preconcurrency public func fetchAllLongLivedOperationIDs(completionHandler: @escaping @Sendable ([DatabaseOperation.ID]?, (any Error)?) -> Void) {
        DispatchQueue.global().async {
            do {
                completionHandler(try LongLivedOperations.shared.operations(of: self).map(\.operationID), nil)
            } catch {
                completionHandler(nil, error)
            }
        }
    }

    /// The IDs of the container's long-lived operations outstanding in this process, as
    /// `CKContainer.allLongLivedOperationIDs()` (see
    /// ``fetchAllLongLivedOperationIDs(completionHandler:)``).
    ///
    /// ```swift
    /// for id in try await container.allLongLivedOperationIDs() {
    ///     if let modify = try await container.longLivedOperation(for: id) as? ModifyRecordsOperation { … }
    /// }
    /// ```
    ///
    /// - Throws: store errors, when telling two `Container` objects' stores apart needs to
    ///   read them.
    public func allLongLivedOperationIDs() async throws -> [DatabaseOperation.ID] {
        // Off the cooperative pool: telling stores apart may read one.
        try await publicCloudDatabase.engineCall { _, _ in
            try LongLivedOperations.shared.operations(of: self).map(\.operationID)
        }
    }

    /// Calls `completionHandler` on a background queue with the container's long-lived
    /// operation with this ID, while it is outstanding in this process, as
    /// `CKContainer.fetchLongLivedOperation(withID:completionHandler:)`.
    ///
    /// ```swift
    /// container.fetchLongLivedOperation(withID: id) { operation, error in
    ///     guard let modify = operation as? ModifyRecordsOperation else { return }
    ///     modify.modifyRecordsCompletionBlock = { _, _, error in print(error ?? "done") }
    ///     container.add(modify)   // already on its way: not enqueued twice
    /// }
    /// ```
    ///
    /// The operation is the very one the app added, not a copy: its blocks are the app's. An
    /// operation that finished or was cancelled gives `nil`, as in CloudKit, and so does an ID
    /// this process never ran (CloudKit names no error for it, and Stratus cannot tell it from
    /// one that finished). Set blocks only on an operation that has not started
    /// (`isExecuting` and `isFinished` both false, as one waiting for a dependency): setting a
    /// block while the operation runs races with the operation reading it, and one that
    /// finished has called its blocks already.
    @preconcurrency public func fetchLongLivedOperation(withID operationID: DatabaseOperation.ID, completionHandler: @escaping @Sendable (DatabaseOperation?, (any Error)?) -> Void) {
        DispatchQueue.global().async {
            do {
                completionHandler(try LongLivedOperations.shared.operation(withID: operationID, of: self), nil)
            } catch {
                completionHandler(nil, error)
            }
        }
    }

    /// The container's long-lived operation with this ID while it is outstanding in this
    /// process, else `nil`, as `CKContainer.longLivedOperation(for:)` (see
    /// ``fetchLongLivedOperation(withID:completionHandler:)``).
    ///
    /// ```swift
    /// if let operation = try await container.longLivedOperation(for: savedID) {
    ///     print("still running:", operation.operationID)
    /// }
    /// ```
    ///
    /// - Throws: store errors, as ``allLongLivedOperationIDs()``.
    public func longLivedOperation(for operationID: DatabaseOperation.ID) async throws -> DatabaseOperation? {
        try await publicCloudDatabase.engineCall { _, _ in
            try LongLivedOperations.shared.operation(withID: operationID, of: self)
        }
    }
}
