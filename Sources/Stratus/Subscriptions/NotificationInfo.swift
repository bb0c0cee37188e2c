import Foundation
import Synchronization

/// What a subscription's notifications carry, like `CKSubscription.NotificationInfo`
/// (`CKNotificationInfo`).
///
/// Stratus pushes nothing to devices: notifications go to the subscriber's feed, read with
/// ``FetchNotificationChangesOperation``, ``NotificationFeed`` or `stratus notifications`.
/// ``desiredKeys`` chooses the record fields a ``QueryNotification`` carries; the alert texts
/// are kept with the subscription and copied into each notification (the fields that
/// ``alertLocalizationArgs``, ``titleLocalizationArgs`` and ``subtitleLocalizationArgs`` name
/// are replaced by the record's values, as CloudKit does), so that a job can build its own
/// message from them. Every property round-trips through the store.
///
/// ```swift
/// let info = NotificationInfo()
/// info.desiredKeys = ["title", "total"]
/// info.shouldSendContentAvailable = true
/// subscription.notificationInfo = info
/// ```
public final class NotificationInfo: NSObject, NSCopying, Sendable {
    /// Every property, as the store keeps it: the alert texts each notification copies, and
    /// what only the subscription keeps.
    struct Fields: Hashable, Sendable, Codable {
        var alert = NotificationAlert()
        var desiredKeys: [String]?
        var shouldBadge: Bool?
        var shouldSendContentAvailable: Bool?
        var shouldSendMutableContent: Bool?
        var collapseIDKey: String?

        private enum CodingKeys: String, CodingKey {
            case desiredKeys, shouldBadge, shouldSendContentAvailable, shouldSendMutableContent, collapseIDKey
        }

        // The alert's keys stand beside the others, as stored definitions have always held them.
        init(from decoder: any Decoder) throws {
            alert = try NotificationAlert(from: decoder)
            let container = try decoder.container(keyedBy: CodingKeys.self)
            desiredKeys = try container.decodeIfPresent([String].self, forKey: .desiredKeys)
            shouldBadge = try container.decodeIfPresent(Bool.self, forKey: .shouldBadge)
            shouldSendContentAvailable = try container.decodeIfPresent(Bool.self, forKey: .shouldSendContentAvailable)
            shouldSendMutableContent = try container.decodeIfPresent(Bool.self, forKey: .shouldSendMutableContent)
            collapseIDKey = try container.decodeIfPresent(String.self, forKey: .collapseIDKey)
        }

        func encode(to encoder: any Encoder) throws {
            try alert.encode(to: encoder)
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encodeIfPresent(desiredKeys, forKey: .desiredKeys)
            try container.encodeIfPresent(shouldBadge, forKey: .shouldBadge)
            try container.encodeIfPresent(shouldSendContentAvailable, forKey: .shouldSendContentAvailable)
            try container.encodeIfPresent(shouldSendMutableContent, forKey: .shouldSendMutableContent)
            try container.encodeIfPresent(collapseIDKey, forKey: .collapseIDKey)
        }

        init(alert: NotificationAlert = NotificationAlert(), desiredKeys: [String]? = nil, shouldBadge: Bool? = nil,
             shouldSendContentAvailable: Bool? = nil, shouldSendMutableContent: Bool? = nil, collapseIDKey: String? = nil) {
            self.alert = alert
            self.desiredKeys = desiredKeys
            self.shouldBadge = shouldBadge
            self.shouldSendContentAvailable = shouldSendContentAvailable
            self.shouldSendMutableContent = shouldSendMutableContent
            self.collapseIDKey = collapseIDKey
        }
    }

    private let state: Mutex<Fields>

    /// Notification info with nothing set: notifications carry the record ID and the reason only.
    public override init() {
        state = Mutex(Fields())
        super.init()
    }

    init(fields: Fields) {
        state = Mutex(fields)
        super.init()
    }

    /// Notification info with the given properties, as CloudKit's Swift initializer takes them.
    ///
    /// ```swift
    /// let info = NotificationInfo(alertBody: "New order", desiredKeys: ["total"])
    /// ```
    public convenience init(
        alertBody: String? = nil, alertLocalizationKey: String? = nil, alertLocalizationArgs: [String]? = nil,
        title: String? = nil, titleLocalizationKey: String? = nil, titleLocalizationArgs: [String]? = nil,
        subtitle: String? = nil, subtitleLocalizationKey: String? = nil, subtitleLocalizationArgs: [String]? = nil,
        alertActionLocalizationKey: String? = nil, alertLaunchImage: String? = nil, soundName: String? = nil,
        desiredKeys: [String]? = nil, shouldBadge: Bool = false, shouldSendContentAvailable: Bool = false,
        shouldSendMutableContent: Bool = false, category: String? = nil, collapseIDKey: String? = nil
    ) {
        let alert = NotificationAlert(
            alertBody: alertBody, alertLocalizationKey: alertLocalizationKey, alertLocalizationArgs: alertLocalizationArgs,
            title: title, titleLocalizationKey: titleLocalizationKey, titleLocalizationArgs: titleLocalizationArgs,
            subtitle: subtitle, subtitleLocalizationKey: subtitleLocalizationKey, subtitleLocalizationArgs: subtitleLocalizationArgs,
            alertActionLocalizationKey: alertActionLocalizationKey, alertLaunchImage: alertLaunchImage, soundName: soundName, category: category)
        self.init(fields: Fields(
            alert: alert, desiredKeys: desiredKeys, shouldBadge: shouldBadge ? true : nil, shouldSendContentAvailable: shouldSendContentAvailable ? true : nil,
            shouldSendMutableContent: shouldSendMutableContent ? true : nil, collapseIDKey: collapseIDKey))
    }

    /// The properties as they are now.
    var fields: Fields { state.withLock { $0 } }

    private func get<T>(_ key: KeyPath<Fields, T>) -> T { fields[keyPath: key] }
    private func set<T: Sendable>(_ key: WritableKeyPath<Fields, T>, _ value: T) {
        state.withLock { fields in fields[keyPath: key] = value }
    }

    /// An alert text, copied into each notification.
    public var alertBody: String? { get { get(\.alert.alertBody) } set { set(\.alert.alertBody, newValue) } }
    /// The key of a localized alert text, copied into each notification (Stratus localizes nothing).
    public var alertLocalizationKey: String? { get { get(\.alert.alertLocalizationKey) } set { set(\.alert.alertLocalizationKey, newValue) } }
    /// Field names whose values (of the record that fired) a notification carries as its
    /// ``StratusNotification/alertLocalizationArgs``.
    public var alertLocalizationArgs: [String]? { get { get(\.alert.alertLocalizationArgs) } set { set(\.alert.alertLocalizationArgs, newValue) } }
    /// The alert's title, copied into each notification.
    public var title: String? { get { get(\.alert.title) } set { set(\.alert.title, newValue) } }
    /// The key of a localized title, copied into each notification.
    public var titleLocalizationKey: String? { get { get(\.alert.titleLocalizationKey) } set { set(\.alert.titleLocalizationKey, newValue) } }
    /// Field names whose values a notification carries as its
    /// ``StratusNotification/titleLocalizationArgs``.
    public var titleLocalizationArgs: [String]? { get { get(\.alert.titleLocalizationArgs) } set { set(\.alert.titleLocalizationArgs, newValue) } }
    /// The alert's subtitle, copied into each notification.
    public var subtitle: String? { get { get(\.alert.subtitle) } set { set(\.alert.subtitle, newValue) } }
    /// The key of a localized subtitle, copied into each notification.
    public var subtitleLocalizationKey: String? { get { get(\.alert.subtitleLocalizationKey) } set { set(\.alert.subtitleLocalizationKey, newValue) } }
    /// Field names whose values a notification carries as its
    /// ``StratusNotification/subtitleLocalizationArgs``.
    public var subtitleLocalizationArgs: [String]? { get { get(\.alert.subtitleLocalizationArgs) } set { set(\.alert.subtitleLocalizationArgs, newValue) } }
    /// The key of a localized action button text, copied into each notification.
    public var alertActionLocalizationKey: String? { get { get(\.alert.alertActionLocalizationKey) } set { set(\.alert.alertActionLocalizationKey, newValue) } }
    /// The name of a launch image, copied into each notification.
    public var alertLaunchImage: String? { get { get(\.alert.alertLaunchImage) } set { set(\.alert.alertLaunchImage, newValue) } }
    /// The name of a sound, copied into each notification (Stratus plays nothing).
    public var soundName: String? { get { get(\.alert.soundName) } set { set(\.alert.soundName, newValue) } }
    /// The record fields a ``QueryNotification`` of a creation or update carries in
    /// ``QueryNotification/recordFields``: values of type `STRING`, `INT64`, `DOUBLE`,
    /// `TIMESTAMP`, `REFERENCE` and `LOCATION`, as CloudKit allows.
    public var desiredKeys: [String]? { get { get(\.desiredKeys) } set { set(\.desiredKeys, newValue) } }
    /// Whether a device would badge the app; kept with the subscription, but Stratus keeps no
    /// badge counts (``StratusNotification/badge`` is always nil).
    public var shouldBadge: Bool { get { get(\.shouldBadge) ?? false } set { set(\.shouldBadge, newValue ? true : nil) } }
    /// Whether a notification is a silent one (`content-available`); kept with the subscription.
    public var shouldSendContentAvailable: Bool {
        get { get(\.shouldSendContentAvailable) ?? false }
        set { set(\.shouldSendContentAvailable, newValue ? true : nil) }
    }
    /// Whether a notification may be changed by a service extension; kept with the subscription.
    public var shouldSendMutableContent: Bool {
        get { get(\.shouldSendMutableContent) ?? false }
        set { set(\.shouldSendMutableContent, newValue ? true : nil) }
    }
    /// The notification's category, copied into each notification.
    public var category: String? { get { get(\.alert.category) } set { set(\.alert.category, newValue) } }
    /// The field whose value CloudKit would use to collapse notifications; kept with the
    /// subscription.
    public var collapseIDKey: String? { get { get(\.collapseIDKey) } set { set(\.collapseIDKey, newValue) } }

    /// A copy with the same properties, as `NSCopying` asks.
    public func copy(with zone: NSZone? = nil) -> Any { NotificationInfo(fields: fields) }

    /// Whether `object` is notification info with the same properties.
    public override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? NotificationInfo else { return false }
        return fields == other.fields
    }

    public override var hash: Int { fields.hashValue }
}

extension Subscription {
    /// `CKSubscription.NotificationInfo`: ``NotificationInfo``.
    public typealias NotificationInfo = Stratus.NotificationInfo
}
