import Foundation

extension Container {
    /// The current user's notifications in this container, batch by batch from `token` on, as
    /// they commit, for as long as the iterating task runs (see ``NotificationFeed``).
    ///
    /// ```swift
    /// for try await batch in container.notificationUpdates(after: savedToken) {
    ///     for notification in batch.notifications { handle(notification) }
    ///     savedToken = batch.token
    /// }
    /// ```
    public func notificationUpdates(after token: ServerChangeToken?) -> AsyncThrowingStream<NotificationFeed.Batch, any Error> {
        NotificationFeed(database: privateCloudDatabase).updates(after: token)
    }

    /// A Stratus addition: removes notifications older than `retention` seconds from every
    /// feed of the store; tokens from before the newest removed expire (`changeTokenExpired`).
    /// Stores also compact on their own, keeping their tombstone retention (30 days by default).
    ///
    /// ```swift
    /// let removed = try await container.compactNotifications(retention: 7 * 86_400)
    /// ```
    ///
    /// - Throws: `invalidArguments` for a negative retention; a store error.
    @discardableResult
    public func compactNotifications(retention: TimeInterval) async throws -> Int {
        guard retention >= 0, retention.isFinite else {
            throw StratusError(.invalidArguments, "a retention must be a finite, non-negative number of seconds")
        }
        let cutoff = Date(timeIntervalSinceNow: -retention)
        return try await privateCloudDatabase.engineCall { engine, _ in try engine.compactNotifications(createdBefore: cutoff) }
    }
}
