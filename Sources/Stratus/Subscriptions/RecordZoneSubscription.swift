import Foundation
import Synchronization

/// A subscription that fires when records of one zone change, like `CKRecordZoneSubscription`.
///
/// A write transaction that creates, updates or deletes records in the zone (of
/// ``recordType`` only, when it is set) records one ``RecordZoneNotification``, however
/// many records it changed; fetch what changed with ``FetchRecordZoneChangesOperation``. The
/// zone must exist and have the `fetchChanges` capability (Stratus's default zone has it);
/// not allowed in the shared database.
///
/// ```swift
/// let subscription = RecordZoneSubscription(zoneID: RecordZone.ID(zoneName: "Photos"), subscriptionID: "photos")
/// subscription.notificationInfo = NotificationInfo(shouldSendContentAvailable: true)
/// try await container.privateCloudDatabase.save(subscription)
/// ```
public final class RecordZoneSubscription: Subscription, @unchecked Sendable {
    /// The zone whose changes fire the subscription.
    public let zoneID: RecordZone.ID
    private let type: Mutex<String?>

    /// A zone subscription with a name of your choice.
    public init(zoneID: RecordZone.ID, subscriptionID: Subscription.ID) {
        self.zoneID = zoneID
        self.type = Mutex(nil)
        super.init(subscriptionID: subscriptionID, notificationInfo: nil)
    }

    /// A zone subscription named with a new UUID.
    ///
    /// ```swift
    /// let s = RecordZoneSubscription(zoneID: RecordZone.ID(zoneName: "Photos"))
    /// ```
    public convenience init(zoneID: RecordZone.ID) {
        self.init(zoneID: zoneID, subscriptionID: UUID().uuidString)
    }

    /// Reads a zone subscription archived with `NSKeyedArchiver` (`NSCoding`); `nil` when the
    /// archive holds none.
    ///
    /// ```swift
    /// let back = try NSKeyedUnarchiver.unarchivedObject(ofClass: RecordZoneSubscription.self, from: data)
    /// ```
    public required convenience init?(coder: NSCoder) {
        guard let (id, definition) = Subscription.archivedDefinition(in: coder, of: .recordZone) else { return nil }
        self.init(zoneID: definition.zoneID ?? .default, subscriptionID: id)
        recordType = definition.recordType
        notificationInfo = definition.info.map(NotificationInfo.init(fields:))
    }

    /// When set, only changes of records of this type fire the subscription.
    public var recordType: String? {
        get { type.withLock { $0 } }
        set { type.withLock { $0 = newValue } }
    }

    public override var subscriptionType: SubscriptionType { .recordZone }

    override var definition: SubscriptionDefinition {
        SubscriptionDefinition(type: .recordZone, recordType: recordType, predicate: nil, zoneID: zoneID, options: nil, info: notificationInfo?.fields)
    }
}
