import Foundation
import Synchronization

/// A persistent query the store runs as records change, like `CKSubscription`: the base of
/// ``QuerySubscription``, ``RecordZoneSubscription`` and ``DatabaseSubscription``.
///
/// A subscription belongs to the user who saves it and to one database. Every write that
/// fires it records a notification in that user's feed, in the write's own transaction, so a
/// crash never loses or invents one. Save one with ``Database/save(_:)-(Subscription)`` or
/// ``ModifySubscriptionsOperation``; read the feed with ``FetchNotificationChangesOperation``,
/// ``NotificationFeed`` or `stratus notifications`.
///
/// ```swift
/// let subscription = QuerySubscription(recordType: "Order", predicate: try QueryPredicate(format: "total > %@", 100),
///                                      subscriptionID: "big-orders", options: [.firesOnRecordCreation])
/// subscription.notificationInfo = NotificationInfo(desiredKeys: ["total"])
/// try await container.publicCloudDatabase.save(subscription)
/// ```
public class Subscription: NSObject, @unchecked Sendable {
    // @unchecked: the class cannot be final (CloudKit's subclasses are its subclasses); its
    // one mutable property, and each subclass's, is kept under a lock.

    /// A subscription's name, unique among one user's subscriptions of a database.
    public typealias ID = String

    /// Which kind of subscription, as `CKSubscription.SubscriptionType`.
    ///
    /// ```swift
    /// if subscription.subscriptionType == .query, let query = subscription as? QuerySubscription { print(query.predicate) }
    /// ```
    public enum SubscriptionType: Int, Hashable, Sendable, Codable, CustomStringConvertible {
        /// A ``QuerySubscription``: records that match a predicate.
        case query = 1
        /// A ``RecordZoneSubscription``: any change in one zone.
        case recordZone = 2
        /// A ``DatabaseSubscription``: any change in the database.
        case database = 3

        public var description: String {
            switch self {
            case .query: "query"
            case .recordZone: "recordZone"
            case .database: "database"
            }
        }
    }

    /// The subscription's name, unique in its database for its user; saving another with the
    /// same name replaces it.
    ///
    /// ```swift
    /// try await database.deleteSubscription(withID: subscription.subscriptionID)
    /// ```
    public let subscriptionID: ID
    private let info: Mutex<NotificationInfo?>

    init(subscriptionID: ID, notificationInfo: NotificationInfo?) {
        self.subscriptionID = subscriptionID
        self.info = Mutex(notificationInfo)
        super.init()
    }

    /// `NSCoding`'s initializer, which each subclass implements to read its own archive (see
    /// `Subscription+SecureCoding.swift`); the base class has no archive of its own, so it
    /// answers `nil`.
    ///
    /// ```swift
    /// let subscription = try NSKeyedUnarchiver.unarchivedObject(ofClass: Subscription.self, from: data)
    /// ```
    public required init?(coder: NSCoder) {
        return nil
    }

    /// Which kind of subscription this is.
    public var subscriptionType: SubscriptionType {
        preconditionFailure("\(type(of: self)) must override subscriptionType")
    }

    /// What the subscription's notifications carry. CloudKit requires it before a save, and so
    /// does Stratus: an empty ``NotificationInfo/init()`` is enough.
    public var notificationInfo: NotificationInfo? {
        get { info.withLock { $0 } }
        set { info.withLock { $0 = newValue?.copy() as? NotificationInfo } }
    }

    /// What the subscription is, as the store keeps it.
    var definition: SubscriptionDefinition {
        preconditionFailure("\(type(of: self)) must override definition")
    }

    public override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? Subscription else { return false }
        return subscriptionID == other.subscriptionID && definition == other.definition
    }

    public override var hash: Int {
        var hasher = Hasher()
        hasher.combine(subscriptionID)
        hasher.combine(definition)
        return hasher.finalize()
    }

    public override var description: String { "\(type(of: self))(\(subscriptionID))" }
}
