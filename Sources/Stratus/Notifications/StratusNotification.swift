import Foundation

/// A notification from a subscriber's feed, like `CKNotification`: the base of
/// ``QueryNotification``, ``RecordZoneNotification`` and ``DatabaseNotification``.
///
/// Named `StratusNotification` because Foundation's `Notification` (of `NotificationCenter`)
/// holds the short name, as ``StratusError`` stands for `CKError`. Every write that fires a
/// subscription records its notification in the subscriber's feed in the write's own
/// transaction; ``FetchNotificationChangesOperation`` and ``NotificationFeed`` read the feed
/// after a token. A notification whose ``notificationType`` is `.readNotification` records
/// that the notification ``notificationID`` names was marked read
/// (``MarkNotificationsReadOperation``).
///
/// ```swift
/// op.notificationChangedBlock = { notification in
///     if let query = notification as? QueryNotification { print(query.recordID!, query.queryNotificationReason) }
/// }
/// ```
public class StratusNotification: NSObject, @unchecked Sendable {
    // @unchecked: not final (CloudKit's subclasses are its subclasses); every property is a
    // constant of a Sendable value.

    /// Which kind of notification, as `CKNotification.NotificationType`.
    ///
    /// ```swift
    /// if notification.notificationType == .recordZone { fetchZoneChanges() }
    /// ```
    public enum NotificationType: Int, Hashable, Sendable, CustomStringConvertible {
        /// From a ``QuerySubscription``: a ``QueryNotification``.
        case query = 1
        /// From a ``RecordZoneSubscription``: a ``RecordZoneNotification``.
        case recordZone = 2
        /// A notification was marked read; ``StratusNotification/notificationID`` names it.
        case readNotification = 3
        /// From a ``DatabaseSubscription``: a ``DatabaseNotification``.
        case database = 4

        public var description: String {
            switch self {
            case .query: "query"
            case .recordZone: "recordZone"
            case .readNotification: "readNotification"
            case .database: "database"
            }
        }
    }

    /// Identifies a notification in its subscriber's feed, like `CKNotification.ID`.
    ///
    /// ```swift
    /// let op = MarkNotificationsReadOperation(notificationIDsToMarkRead: notifications.compactMap(\.notificationID))
    /// ```
    public struct ID: Hashable, Sendable, Codable, CustomStringConvertible {
        /// Which store's feed (a store copied elsewhere is another).
        let store: String
        /// Whose feed: its container and subscriber.
        let feed: String
        /// The notification's place in the feed: feeds number notifications in commit order.
        public let sequence: Int64

        init(store: String, feed: NotificationFeedID, sequence: Int64) {
            self.store = store
            self.feed = feed.containerIdentifier + "\u{1F}" + feed.subscriber
            self.sequence = sequence
        }

        /// Whether the ID names a place in `feed` of `store`.
        func belongs(to feed: NotificationFeedID, store: String) -> Bool {
            self.store == store && self.feed == feed.containerIdentifier + "\u{1F}" + feed.subscriber
        }

        public var description: String { String(sequence) }
    }

    /// What fired: a query, zone or database subscription.
    ///
    /// ```swift
    /// if notification.notificationType == .query, let query = notification as? QueryNotification { print(query.recordID!) }
    /// ```
    public let notificationType: NotificationType
    /// The notification's place in its user's feed; give it back to mark it read.
    public let notificationID: ID?
    /// The container whose subscription fired.
    public let containerIdentifier: String?
    /// The user whose subscription fired (``Container/userRecordID()``).
    public let subscriptionOwnerUserRecordID: Record.ID?
    /// The subscription that fired.
    ///
    /// ```swift
    /// if notification.subscriptionID == "new-orders" { refreshOrders() }
    /// ```
    public let subscriptionID: Subscription.ID?
    /// Always `false`: a feed keeps every notification whole.
    public let isPruned = false
    /// A Stratus addition: when the write that made the notification committed (its
    /// transaction's time).
    public let creationDate: Date
    /// A Stratus addition: the entry's own place in its feed, in commit order. For a
    /// `.readNotification` entry it differs from ``notificationID``'s, which names the
    /// notification marked read.
    public let feedSequence: Int64
    /// The alert texts, copied from the subscription's ``NotificationInfo``.
    let alert: NotificationAlert

    /// What every notification has, passed from a subclass's initializer to the base's.
    struct Parts: Sendable {
        var type: NotificationType
        var id: ID?
        var containerIdentifier: String
        var subscriber: String
        var subscriptionID: String?
        var creationDate: Date
        var alert: NotificationAlert
        var feedSequence: Int64
    }

    init(parts: Parts) {
        self.notificationType = parts.type
        self.notificationID = parts.id
        self.containerIdentifier = parts.containerIdentifier
        self.subscriptionOwnerUserRecordID = Record.ID(recordName: parts.subscriber)
        self.subscriptionID = parts.subscriptionID
        self.creationDate = parts.creationDate
        self.alert = parts.alert
        self.feedSequence = parts.feedSequence
        super.init()
    }

    /// The subscription's ``NotificationInfo/alertBody``, as `CKNotification.alertBody`.
    ///
    /// ```swift
    /// if let body = notification.alertBody { print(body) }
    /// ```
    public var alertBody: String? { alert.alertBody }
    /// The subscription's ``NotificationInfo/alertLocalizationKey``.
    public var alertLocalizationKey: String? { alert.alertLocalizationKey }
    /// The values of the fields the subscription's ``NotificationInfo/alertLocalizationArgs`` names.
    public var alertLocalizationArgs: [String]? { alert.alertLocalizationArgs }
    /// The subscription's ``NotificationInfo/title``.
    public var title: String? { alert.title }
    /// The subscription's ``NotificationInfo/titleLocalizationKey``.
    public var titleLocalizationKey: String? { alert.titleLocalizationKey }
    /// The values of the fields the subscription's ``NotificationInfo/titleLocalizationArgs`` names.
    public var titleLocalizationArgs: [String]? { alert.titleLocalizationArgs }
    /// The subscription's ``NotificationInfo/subtitle``.
    public var subtitle: String? { alert.subtitle }
    /// The subscription's ``NotificationInfo/subtitleLocalizationKey``.
    public var subtitleLocalizationKey: String? { alert.subtitleLocalizationKey }
    /// The values of the fields the subscription's ``NotificationInfo/subtitleLocalizationArgs`` names.
    public var subtitleLocalizationArgs: [String]? { alert.subtitleLocalizationArgs }
    /// The subscription's ``NotificationInfo/alertActionLocalizationKey``.
    public var alertActionLocalizationKey: String? { alert.alertActionLocalizationKey }
    /// The subscription's ``NotificationInfo/alertLaunchImage``.
    public var alertLaunchImage: String? { alert.alertLaunchImage }
    /// The subscription's ``NotificationInfo/soundName``.
    public var soundName: String? { alert.soundName }
    /// The subscription's ``NotificationInfo/category``.
    public var category: String? { alert.category }
    /// Always `nil`: Stratus keeps no badge counts.
    public var badge: NSNumber? { nil }

    public override var description: String {
        "\(type(of: self))(\(notificationType), id \(notificationID.map(String.init(describing:)) ?? "none"), subscription \(subscriptionID ?? "none"))"
    }
}

/// `CKNotificationID`: ``StratusNotification/ID``.
public typealias NotificationID = StratusNotification.ID
