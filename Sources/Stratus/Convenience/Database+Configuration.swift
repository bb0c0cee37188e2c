import Foundation

extension Database {
    /// Runs `body` with this database configured: every call it makes on the database it is
    /// given (and every operation added to that database) runs with `configuration` (below
    /// an operation's own explicit values) and in `group`, as `CKDatabase.configuredWith`.
    ///
    /// ```swift
    /// let configuration = Operation.Configuration()
    /// configuration.timeoutIntervalForResource = 30
    /// let saved = try await database.configuredWith(configuration: configuration) { database in
    ///     try await database.save(todo)
    /// }
    /// ```
    ///
    /// - Throws: what `body` throws.
    @discardableResult
    public func configuredWith<R>(
        configuration: OperationConfiguration? = nil, group: OperationGroup? = nil,
        body: @Sendable (Database) async throws -> R
    ) async rethrows -> R {
        try await body(Database(self, configuration: configuration, group: group))
    }

    /// Runs `body` with this database configured, for code that is not `async`; see the
    /// `async` form.
    ///
    /// ```swift
    /// database.configuredWith(group: syncGroup) { database in database.add(fetchChanges) }
    /// ```
    ///
    /// - Throws: what `body` throws.
    @discardableResult
    public func configuredWith<R>(
        configuration: OperationConfiguration? = nil, group: OperationGroup? = nil,
        body: (Database) throws -> R
    ) rethrows -> R {
        try body(Database(self, configuration: configuration, group: group))
    }
}

extension Container {
    /// Runs a database operation, as `CKContainer.add(_:)`: on its ``DatabaseOperation/database``,
    /// or, when it has none, on this container's private database (CloudKit's default).
    ///
    /// ```swift
    /// container.add(FetchDatabaseChangesOperation(previousServerChangeToken: token))
    /// ```
    ///
    /// An operation already added, started or finished is left as it is (see
    /// ``Database/add(_:)``), so a long-lived operation fetched with
    /// ``fetchLongLivedOperation(withID:completionHandler:)`` may be added again safely.
    public func add(_ operation: DatabaseOperation) {
        (operation.database ?? privateCloudDatabase).add(operation)
    }
}
