import Foundation
import Synchronization

/// Reads the current user's notifications after a token, like
/// `CKFetchNotificationChangesOperation`: one batch of up to ``resultsLimit``, oldest first.
///
/// The feed is the user's in the container: notifications of their subscriptions in every
/// database, in commit order (each write's notifications together, in the order it made
/// them). Run it with `container.add(_:)` (or on any of the container's databases). Keep the
/// token only after handling the notifications before it, and every notification reaches you
/// once; while ``moreComing`` is true, run another operation from the new token. A token
/// older than the feed's retention fails with `changeTokenExpired`: start again without one.
/// Marking notifications read (``MarkNotificationsReadOperation``) appends
/// `.readNotification` entries to the feed.
///
/// ```swift
/// let op = FetchNotificationChangesOperation(previousServerChangeToken: token)
/// op.notificationChangedBlock = { notification in handle(notification) }
/// op.fetchNotificationChangesResultBlock = { result in
///     if case .success(let (newToken, moreComing)) = result { token = newToken; more = moreComing }
/// }
/// container.add(op)
/// ```
open class FetchNotificationChangesOperation: DatabaseOperation, @unchecked Sendable {
    /// Notifications per operation when ``resultsLimit`` is 0.
    public static let defaultResultsLimit = 400

    /// The token from the last fetch; `nil` reads the feed from its beginning (what retention kept).
    public var previousServerChangeToken: ServerChangeToken?
    /// Notifications to read; 0 means ``defaultResultsLimit``.
    public var resultsLimit = 0
    /// Each notification, in order.
    public var notificationChangedBlock: ((StratusNotification) -> Void)?
    /// The token after the last notification read and whether more remain, or the error.
    public var fetchNotificationChangesResultBlock: ((Result<(serverChangeToken: ServerChangeToken, moreComing: Bool), any Error>) -> Void)?
    /// CloudKit's final block: the token (`nil` on failure) and the error; after
    /// ``fetchNotificationChangesResultBlock``.
    public var fetchNotificationChangesCompletionBlock: ((ServerChangeToken?, (any Error)?) -> Void)?

    private let more = Atomic<Bool>(false)
    private var finalToken: ServerChangeToken?

    /// An operation that reads the notifications after `previousServerChangeToken` (from the
    /// feed's beginning when `nil`), as
    /// `CKFetchNotificationChangesOperation(previousServerChangeToken:)`.
    ///
    /// ```swift
    /// let op = FetchNotificationChangesOperation(previousServerChangeToken: token)
    /// ```
    public convenience init(previousServerChangeToken: ServerChangeToken?) {
        self.init()
        self.previousServerChangeToken = previousServerChangeToken
    }

    /// An operation that reads the feed from its beginning, as
    /// `CKFetchNotificationChangesOperation()`.
    ///
    /// ```swift
    /// let op = FetchNotificationChangesOperation()
    /// ```
    public override init() {
        previousServerChangeToken = nil
        super.init()
    }

    /// Whether notifications remain after this operation's batch; set before its final blocks run.
    public var moreComing: Bool { more.load(ordering: .acquiring) }

    override func execute(engine: any StorageEngine, context: DatabaseContext) throws -> StratusError? {
        try SubscriptionRules.checkSubscriber(context, doing: "fetching notifications")
        let limit = try Self.changeBatchSize(resultsLimit, default: Self.defaultResultsLimit, setting: "FetchNotificationChangesOperation.resultsLimit")
        let feed = context.notificationFeed
        let position = try previousServerChangeToken?.notificationPosition(in: feed)
        let batch = try withRetry { try engine.fetchNotifications(in: feed, after: position, limit: limit) }
        let store = try engine.storeIdentifier
        for (count, stored) in batch.notifications.enumerated() {
            if isCancelled { return StratusError.cancelled("FetchNotificationChangesOperation", completed: count) }
            notificationChangedBlock?(try NotificationPayload.notification(stored, feed: feed, store: store))
        }
        more.store(batch.moreComing, ordering: .releasing)
        finalToken = ServerChangeToken(feed: feed, position: batch.position)
        return nil
    }

    override func complete(with error: StratusError?) {
        if let error {
            fetchNotificationChangesResultBlock?(.failure(error))
            fetchNotificationChangesCompletionBlock?(nil, error)
        } else if let finalToken {
            fetchNotificationChangesResultBlock?(.success((serverChangeToken: finalToken, moreComing: moreComing)))
            fetchNotificationChangesCompletionBlock?(finalToken, nil)
        }
    }
}
