import Foundation
import Synchronization

/// A user's notifications since a kept token, batch by batch and exactly once: the job behind
/// `stratus notifications` (drain and stop) and `stratus watch` (follow live), built on
/// ``FetchNotificationChangesOperation`` with a ``ChangeTokenStore`` that keeps the token of the
/// last applied batch.
///
/// ```swift
/// let feed = NotificationFeed(database: container.privateCloudDatabase)
/// let summary = try await feed.run(tokens: tokenFile) { batch in
///     for case let query as QueryNotification in batch.notifications { handle(query) }
/// }
/// print("\(summary.notifications) notification(s)")
/// ```
///
/// Notifications come in commit order (a write's notifications together). The token is saved
/// only after `apply` returned, so a run stopped anywhere (a kill included) delivers the
/// unsaved batch again and nothing else twice. A batch delivered again starts with the same
/// notification and may hold more (what committed since); every notification's
/// ``StratusNotification/feedSequence`` is larger than those before it, so a consumer that
/// remembers the last one it applied can skip what it has seen.
public final class NotificationFeed: Sendable {
    /// One batch of notifications and the token after it.
    ///
    /// ```swift
    /// let batch = try await feed.nextBatch(after: token, limit: 100)
    /// for notification in batch.notifications { handle(notification) }
    /// ```
    public struct Batch: Sendable {
        /// In commit order.
        public let notifications: [StratusNotification]
        /// Where the next batch starts; keep it once the notifications are applied.
        public let token: ServerChangeToken
        /// Whether more notifications remain after this batch.
        public let moreComing: Bool
    }

    /// Why a run ended.
    ///
    /// ```swift
    /// if summary.end == .limitReached { print("more notifications wait") }
    /// ```
    public enum End: Sendable, Hashable {
        /// No notifications remain (``run(tokens:limit:apply:)``).
        case finished
        /// The run's limit was reached; more may remain.
        case limitReached
        /// ``NotificationFeed/cancel()`` or task cancellation stopped it after a batch.
        case cancelled
    }

    /// What a run delivered.
    ///
    /// ```swift
    /// print("\(summary.notifications) notifications in \(summary.batches) batches")
    /// ```
    public struct Summary: Sendable, Hashable {
        /// Notifications delivered.
        public var notifications = 0
        /// Batches applied (and tokens saved).
        public var batches = 0
        /// Whether the last batch said more notifications remain.
        public var moreComing = false
        /// Why the run ended.
        public var end = End.finished

        /// An empty summary.
        public init() {}
    }

    /// The database the feed is read through; the feed is its container user's, across databases.
    public let database: Database
    /// Notifications per batch (and per saved token).
    public let batchSize: Int
    /// How long ``follow(tokens:apply:)`` sleeps between checks for a stop when nothing comes,
    /// in seconds; new notifications wake it at once.
    public let idleCheckInterval: Double
    private let cancelled = Atomic<Bool>(false)

    /// A feed of `database`'s container user's notifications.
    ///
    /// ```swift
    /// let feed = NotificationFeed(database: container.publicCloudDatabase, batchSize: 500)
    /// ```
    ///
    /// - Precondition: `batchSize` is positive (a programmer error).
    public init(database: Database, batchSize: Int = 1_000, idleCheckInterval: Double = 0.25) {
        precondition(batchSize > 0, "the batch size must be positive")
        self.database = database
        self.batchSize = batchSize
        self.idleCheckInterval = idleCheckInterval
    }

    /// Asks a running feed to stop after the batch being applied; callable from any thread.
    ///
    /// ```swift
    /// signalSource.setEventHandler { feed.cancel() }
    /// ```
    public func cancel() { cancelled.store(true, ordering: .relaxed) }

    /// Whether ``cancel()`` was called or the running task was cancelled.
    public var isCancelled: Bool { cancelled.load(ordering: .relaxed) || Task.isCancelled }

    /// Delivers the notifications after the token in `tokens`, batch by batch, to `apply`,
    /// saving each batch's token once `apply` returned; ends when none remain.
    ///
    /// ```swift
    /// let summary = try await feed.run(tokens: tokenFile, limit: 10_000) { batch in try output.append(batch) }
    /// ```
    ///
    /// - Parameter limit: stop after the batch that reaches this many notifications (the next
    ///   run continues).
    /// - Throws: `changeTokenExpired` (start again without a token), what `apply` or the token
    ///   store throws.
    public func run(tokens: some ChangeTokenStore, limit: Int? = nil, apply: (Batch) async throws -> Void) async throws -> Summary {
        var summary = Summary()
        var token = try tokens.loadToken()
        let limit = limit ?? Int.max
        while true {
            if summary.notifications >= limit {
                summary.end = .limitReached
                break
            }
            // Whole batches only, so that a batch delivered again is the same batch.
            let batch = try await nextBatch(after: token, limit: batchSize)
            try await deliver(batch, to: apply, tokens: tokens, previous: token, summary: &summary)
            token = batch.token
            guard batch.moreComing else { break }
            if isCancelled {
                summary.end = .cancelled
                break
            }
        }
        return summary
    }

    /// Follows the feed live: delivers what is there, then each new batch as it commits, until
    /// ``cancel()`` (or task cancellation), saving each batch's token once `apply` returned.
    /// New notifications wake it at once (PostgreSQL's `LISTEN`, SQLite's data version).
    ///
    /// ```swift
    /// signalSource.setEventHandler { feed.cancel() }
    /// let summary = try await feed.follow(tokens: tokenFile) { batch in print(batch.notifications.count) }
    /// ```
    ///
    /// - Throws: as ``run(tokens:limit:apply:)``; a store that can no longer be watched.
    public func follow(tokens: some ChangeTokenStore, apply: (Batch) async throws -> Void) async throws -> Summary {
        var summary = Summary()
        // Watching starts before the first read, so that no commit after it goes unnoticed.
        let waiter = try await database.engineCall { engine, context in
            try SubscriptionRules.checkSubscriber(context, doing: "following notifications")
            return try engine.openNotificationWaiter(for: context.notificationFeed)
        }
        defer { waiter.close() }
        var token = try tokens.loadToken()
        while !isCancelled {
            let batch = try await nextBatch(after: token, limit: batchSize)
            try await deliver(batch, to: apply, tokens: tokens, previous: token, summary: &summary)
            token = batch.token
            if batch.moreComing { continue }
            let interval = idleCheckInterval
            _ = try await database.engineCall { _, _ in try waiter.wait(timeout: interval) }
        }
        summary.end = .cancelled
        return summary
    }

    /// Batches as they commit, from `token` on, for as long as the iterating task runs; each
    /// batch's token is the place to resume from once it is handled.
    ///
    /// ```swift
    /// for try await batch in feed.updates(after: savedToken) {
    ///     handle(batch.notifications)
    ///     savedToken = batch.token
    /// }
    /// ```
    public func updates(after token: ServerChangeToken?) -> AsyncThrowingStream<Batch, any Error> {
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: Batch.self, bufferingPolicy: .bufferingOldest(1))
        let follower = NotificationFeed(database: database, batchSize: batchSize, idleCheckInterval: idleCheckInterval)
        let task = Task {
            do {
                let tokens = MemoryTokens(token)
                _ = try await follower.follow(tokens: tokens) { batch in
                    // Waits while the consumer still handles the one before: memory holds one batch.
                    while case .dropped = continuation.yield(batch) {
                        if Task.isCancelled { throw CancellationError() }
                        try await Task.sleep(for: .milliseconds(5))
                    }
                }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error is CancellationError ? nil : error)
            }
        }
        continuation.onTermination = { _ in
            follower.cancel()
            task.cancel()
        }
        return stream
    }

    /// A token at the feed's end now: following from it delivers only notifications committed later.
    ///
    /// ```swift
    /// let fromNow = try await feed.currentToken()
    /// ```
    ///
    /// - Throws: a store error.
    public func currentToken() async throws -> ServerChangeToken {
        try await database.engineCall { engine, context in
            try SubscriptionRules.checkSubscriber(context, doing: "reading notifications")
            let feed = context.notificationFeed
            return ServerChangeToken(feed: feed, position: try engine.notificationFeedEnd(feed))
        }
    }

    /// One batch of notifications after `token`, in commit order; task cancellation cancels
    /// the fetch.
    ///
    /// ```swift
    /// let batch = try await feed.nextBatch(after: nil, limit: 100)
    /// ```
    ///
    /// - Throws: `changeTokenExpired`, `operationCancelled`.
    public func nextBatch(after token: ServerChangeToken?, limit: Int) async throws -> Batch {
        let notifications = Collector<StratusNotification>()
        let end = Collector<(serverChangeToken: ServerChangeToken, moreComing: Bool)>()
        try await database.run { finish in
            let op = FetchNotificationChangesOperation(previousServerChangeToken: token)
            op.resultsLimit = limit
            op.notificationChangedBlock = { notifications.append($0) }
            op.fetchNotificationChangesResultBlock = { result in
                if case .success(let value) = result { end.append(value) }
                finish(result.map { _ in () })
            }
            return op
        }
        guard let (newToken, moreComing) = end.items.first else {
            throw StratusError(.internalError, "the notification fetch ended without a result")
        }
        return Batch(notifications: notifications.items, token: newToken, moreComing: moreComing)
    }

    /// Applies a batch and saves its token; an empty batch that moves nothing saves nothing.
    private func deliver(_ batch: Batch, to apply: (Batch) async throws -> Void, tokens: some ChangeTokenStore,
                         previous: ServerChangeToken?, summary: inout Summary) async throws {
        guard !batch.notifications.isEmpty || batch.token != previous else { return }
        if !batch.notifications.isEmpty { try await apply(batch) }
        try tokens.saveToken(batch.token)
        summary.batches += 1
        summary.notifications += batch.notifications.count
        summary.moreComing = batch.moreComing
    }
}

/// A token kept in memory, for ``NotificationFeed/updates(after:)``.
private final class MemoryTokens: ChangeTokenStore, @unchecked Sendable {
    // @unchecked: used by the one task that follows the feed.
    private var token: ServerChangeToken?
    init(_ token: ServerChangeToken?) { self.token = token }
    func loadToken() throws -> ServerChangeToken? { token }
    func saveToken(_ token: ServerChangeToken) throws { self.token = token }
}
