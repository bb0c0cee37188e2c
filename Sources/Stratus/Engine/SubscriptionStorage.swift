import Foundation

/// A subscription as an engine stores it: the keys it is found by, and its definition as the
/// core encoded it (the engine stores the bytes and never reads them).
///
/// Subscriptions belong to a database (its container, scope and owner, as ``DatabaseContext``
/// keys records) and to a subscriber, the user whose notification feed they fill. In the
/// public database many users' subscriptions watch the same records; in a private database
/// only its owner's.
///
/// ```swift
/// let stored = StoredSubscription(subscriptionID: "new-orders", subscriber: "alice", recordType: "Order", zoneID: nil, definition: bytes)
/// _ = try engine.modifySubscriptions(saving: [stored], deleting: [], in: context)
/// ```
@_spi(StratusEngine)
public struct StoredSubscription: Hashable, Sendable {
    public var subscriptionID: String
    /// The user whose subscription it is.
    public var subscriber: String
    /// The record type it watches, when it watches one (an index key, not a filter the engine applies).
    public var recordType: String?
    /// The zone it watches, as the store keys zones (``DatabaseContext``'s canonical form); `nil`
    /// for every zone of the database.
    public var zoneID: RecordZone.ID?
    /// The core's encoding of the whole subscription.
    public var definition: [UInt8]

    public init(subscriptionID: String, subscriber: String, recordType: String?, zoneID: RecordZone.ID?, definition: [UInt8]) {
        self.subscriptionID = subscriptionID
        self.subscriber = subscriber
        self.recordType = recordType
        self.zoneID = zoneID
        self.definition = definition
    }
}

/// The subscriptions of one database, and the version they were read at.
///
/// Every change of a database's subscriptions (a save, a delete, a `firesOnce` subscription
/// that fired) moves its version, so that the core can keep what it built from them until
/// the version moves.
///
/// ```swift
/// let set = try engine.fetchSubscriptions(in: context, subscriber: nil)
/// print(set.version, set.subscriptions.count)
/// ```
@_spi(StratusEngine)
public struct SubscriptionSet: Sendable {
    /// 0 for a database that never had a subscription.
    public var version: Int64
    public var subscriptions: [StoredSubscription]

    public init(version: Int64, subscriptions: [StoredSubscription]) {
        self.version = version
        self.subscriptions = subscriptions
    }
}

/// A subscription of a database, by subscriber and ID.
@_spi(StratusEngine)
public struct SubscriptionKey: Hashable, Sendable {
    public var subscriber: String
    public var subscriptionID: String

    public init(subscriber: String, subscriptionID: String) {
        self.subscriber = subscriber
        self.subscriptionID = subscriptionID
    }
}

/// One user's notification feed in one container: every notification of the user's
/// subscriptions, in every database of the container, in commit order.
///
/// ```swift
/// let batch = try engine.fetchNotifications(in: context.notificationFeed, after: nil, limit: 400)
/// ```
@_spi(StratusEngine)
public struct NotificationFeedID: Hashable, Sendable, CustomStringConvertible {
    public var containerIdentifier: String
    /// The user whose feed it is.
    public var subscriber: String

    public init(containerIdentifier: String, subscriber: String) {
        self.containerIdentifier = containerIdentifier
        self.subscriber = subscriber
    }

    public var description: String {
        // The feed is keyed by the storage container, which holds the environment.
        let (container, environment) = Container.Environment.split(storageContainer: containerIdentifier)
        return "the notifications of \(subscriber) in \(container)" + (environment == .development ? "" : " (\(environment))")
    }
}

extension DatabaseContext {
    /// The name the context's user subscribes as, and whose feed their notifications fill:
    /// their user record name (empty for a caller who is not signed in, who has no feed).
    @_spi(StratusEngine) public var subscriber: String { userRecordName ?? "" }

    /// The feed of the context's user in its container's environment (each environment has
    /// its own subscriptions and notifications, as its own data).
    @_spi(StratusEngine) public var notificationFeed: NotificationFeedID {
        NotificationFeedID(containerIdentifier: storageContainer, subscriber: subscriber)
    }
}

/// A notification a write transaction appends to a subscriber's feed (in the transaction's
/// container), as the core encoded it.
@_spi(StratusEngine)
public struct NotificationRow: Sendable {
    public var subscriber: String
    public var payload: [UInt8]

    public init(subscriber: String, payload: [UInt8]) {
        self.subscriber = subscriber
        self.payload = payload
    }
}

/// A notification as a feed holds it: its place in the feed, when it was made, and the core's
/// encoding of it.
@_spi(StratusEngine)
public struct StoredNotification: Sendable {
    /// Its place in the feed: the feed's sequence, in commit order, never reused.
    public var sequence: Int64
    public var createdAt: Date
    public var payload: [UInt8]

    public init(sequence: Int64, createdAt: Date, payload: [UInt8]) {
        self.sequence = sequence
        self.createdAt = createdAt
        self.payload = payload
    }
}

/// A feed's notifications after a position, oldest first.
@_spi(StratusEngine)
public struct NotificationBatch: Sendable {
    public var notifications: [StoredNotification]
    /// Where the next batch starts: after the last notification answered, or the feed's
    /// current position when nothing remains.
    public var position: ChangePosition
    /// Whether notifications after ``position`` remain.
    public var moreComing: Bool

    public init(notifications: [StoredNotification], position: ChangePosition, moreComing: Bool) {
        self.notifications = notifications
        self.position = position
        self.moreComing = moreComing
    }
}

/// A notification to mark read, and the entry that records the marking in the feed.
@_spi(StratusEngine)
public struct NotificationReadMark: Sendable {
    /// The notification's place in the feed.
    public var sequence: Int64
    /// The core's encoding of the read-notification entry appended for it.
    public var entry: [UInt8]

    public init(sequence: Int64, entry: [UInt8]) {
        self.sequence = sequence
        self.entry = entry
    }
}

/// Sleeps until a feed may have new notifications: the engine's wake-up (PostgreSQL's
/// `LISTEN`, SQLite's data version), used by readers that follow a feed live.
///
/// A wake-up says only that something may have changed: the reader fetches, and waits again
/// when nothing came. Open the waiter before the first fetch, so that no commit between the
/// fetch and the wait goes unnoticed.
///
/// ```swift
/// let waiter = try engine.openNotificationWaiter(for: feed)
/// defer { waiter.close() }
/// while !stopped { fetchAndApply(); _ = try waiter.wait(timeout: 1) }
/// ```
@_spi(StratusEngine)
public protocol NotificationWaiter: AnyObject, Sendable {
    /// Waits up to `timeout` seconds for a sign of new notifications; answers whether one came.
    ///
    /// - Throws: when the store cannot be watched any more (a lost connection).
    func wait(timeout: Double) throws -> Bool

    /// Stops watching and frees what the waiter holds; calling it again does nothing.
    func close()
}

extension StorageEngine {
    @_spi(StratusEngine) public func fetchSubscriptions(in database: DatabaseContext, subscriber: String?) throws -> SubscriptionSet {
        throw Self.keepsNoSubscriptions
    }

    @_spi(StratusEngine) public func modifySubscriptions(saving subscriptions: [StoredSubscription], deleting subscriptionIDs: [String], in database: DatabaseContext) throws -> Set<String> {
        throw Self.keepsNoSubscriptions
    }

    @_spi(StratusEngine) public func fetchNotifications(in feed: NotificationFeedID, after position: ChangePosition?, limit: Int) throws -> NotificationBatch {
        throw Self.keepsNoSubscriptions
    }

    @_spi(StratusEngine) public func notificationFeedEnd(_ feed: NotificationFeedID) throws -> ChangePosition {
        throw Self.keepsNoSubscriptions
    }

    @_spi(StratusEngine) public func markNotificationsRead(_ marks: [NotificationReadMark], in feed: NotificationFeedID) throws -> Set<Int64> {
        throw Self.keepsNoSubscriptions
    }

    @_spi(StratusEngine) public func compactNotifications(createdBefore cutoff: Date) throws -> Int {
        throw Self.keepsNoSubscriptions
    }

    @_spi(StratusEngine) public func openNotificationWaiter(for feed: NotificationFeedID) throws -> any NotificationWaiter {
        throw Self.keepsNoSubscriptions
    }

    private static var keepsNoSubscriptions: StratusError {
        StratusError(.internalError, "this store's engine (\(Self.self)) keeps no subscriptions or notifications")
    }
}

extension RecordWriteTransaction {
    /// An engine that keeps no subscriptions answers `nil`: its writes notify nobody.
    @_spi(StratusEngine) public func subscriptionVersion() throws -> Int64? { nil }

    @_spi(StratusEngine) public func fetchSubscriptions() throws -> SubscriptionSet { SubscriptionSet(version: 0, subscriptions: []) }

    @_spi(StratusEngine) public func subscriptionVersion(of database: DatabaseContext) throws -> Int64? { nil }

    @_spi(StratusEngine) public func fetchSubscriptions(of database: DatabaseContext) throws -> SubscriptionSet { SubscriptionSet(version: 0, subscriptions: []) }

    @_spi(StratusEngine) public func deleteSubscriptions(_ keys: [SubscriptionKey]) throws -> Set<SubscriptionKey> { [] }

    @_spi(StratusEngine) public func appendNotifications(_ rows: [NotificationRow]) throws {
        guard rows.isEmpty else { throw StratusError(.internalError, "this store's engine keeps no notifications") }
    }
}
