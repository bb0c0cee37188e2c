import Foundation
import Synchronization

/// A subscription that fires when records of a database change, like `CKDatabaseSubscription`.
///
/// A write transaction that creates, updates or deletes records (of ``recordType`` only, when
/// it is set) anywhere in the database records one ``DatabaseNotification``; fetch what
/// changed with ``FetchDatabaseChangesOperation``. CloudKit allows database subscriptions in
/// the private and shared databases only, and so does Stratus. In the shared database it fires
/// when the owners (or other participants) change what the subscriber's accepted shares reach.
///
/// ```swift
/// let subscription = DatabaseSubscription(subscriptionID: "private-changes")
/// subscription.notificationInfo = NotificationInfo(shouldSendContentAvailable: true)
/// try await container.privateCloudDatabase.save(subscription)
/// ```
public final class DatabaseSubscription: Subscription, @unchecked Sendable {
    private let type: Mutex<String?>

    /// A database subscription with a name of your choice.
    public init(subscriptionID: Subscription.ID) {
        self.type = Mutex(nil)
        super.init(subscriptionID: subscriptionID, notificationInfo: nil)
    }

    /// A database subscription named with a new UUID.
    ///
    /// ```swift
    /// let s = DatabaseSubscription()
    /// ```
    public convenience init() {
        self.init(subscriptionID: UUID().uuidString)
    }

    /// Reads a database subscription archived with `NSKeyedArchiver` (`NSCoding`); `nil` when
    /// the archive holds none.
    ///
    /// ```swift
    /// let back = try NSKeyedUnarchiver.unarchivedObject(ofClass: DatabaseSubscription.self, from: data)
    /// ```
    public required convenience init?(coder: NSCoder) {
        guard let (id, definition) = Subscription.archivedDefinition(in: coder, of: .database) else { return nil }
        self.init(subscriptionID: id)
        recordType = definition.recordType
        notificationInfo = definition.info.map(NotificationInfo.init(fields:))
    }

    /// When set, only changes of records of this type fire the subscription.
    public var recordType: String? {
        get { type.withLock { $0 } }
        set { type.withLock { $0 = newValue } }
    }

    public override var subscriptionType: SubscriptionType { .database }

    override var definition: SubscriptionDefinition {
        SubscriptionDefinition(type: .database, recordType: recordType, predicate: nil, zoneID: nil, options: nil, info: notificationInfo?.fields)
    }
}
