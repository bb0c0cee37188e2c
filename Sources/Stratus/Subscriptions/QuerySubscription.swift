import Foundation
import Synchronization

/// A subscription that fires when records of one type that match a predicate are created,
/// updated or deleted, like `CKQuerySubscription`.
///
/// Which writes fire it, as CloudKit documents it ("the record in question must match the
/// subscription's predicate"): a creation when the new record matches; an update when the
/// record matches *after* the update — whether or not it matched before, and reported as
/// ``QueryNotification/Reason/recordUpdated``, never as a creation; a deletion when the
/// record matched as it was last stored. A record that an update makes stop matching fires
/// nothing (a ``RecordZoneSubscription`` sees it). Each write fires at most once per
/// subscription; ``Options-swift.struct/firesOnce`` deletes the subscription in the
/// transaction that fired it.
///
/// Not allowed in the shared database. Without ``zoneID`` it watches every zone of the
/// database.
///
/// ```swift
/// let subscription = QuerySubscription(recordType: "Todo", predicate: try QueryPredicate(format: "checked == 0"),
///                                      subscriptionID: "open-todos", options: [.firesOnRecordCreation, .firesOnRecordUpdate])
/// subscription.notificationInfo = NotificationInfo(desiredKeys: ["title"])
/// try await database.save(subscription)
/// ```
public final class QuerySubscription: Subscription, @unchecked Sendable {
    /// When a query subscription fires, as `CKQuerySubscription.Options`.
    ///
    /// ```swift
    /// let subscription = QuerySubscription(recordType: "Order", predicate: QueryPredicate(value: true),
    ///                                      options: [.firesOnRecordCreation, .firesOnRecordUpdate])
    /// ```
    public struct Options: OptionSet, Hashable, Sendable, Codable {
        /// The options as bits.
        public let rawValue: UInt
        /// Options from bits, as an `OptionSet`.
        ///
        /// ```swift
        /// let changes: QuerySubscription.Options = [.firesOnRecordUpdate, .firesOnRecordDeletion]
        /// ```
        public init(rawValue: UInt) { self.rawValue = rawValue }

        /// A matching record was created.
        public static let firesOnRecordCreation = Options(rawValue: 1 << 0)
        /// A record was updated and matches after the update.
        public static let firesOnRecordUpdate = Options(rawValue: 1 << 1)
        /// A record that matched was deleted.
        public static let firesOnRecordDeletion = Options(rawValue: 1 << 2)
        /// The subscription fires once, and is deleted in the write that fired it.
        public static let firesOnce = Options(rawValue: 1 << 3)
    }

    /// The type of record the subscription watches; optional as `CKQuerySubscription`'s is,
    /// though a query subscription always has one, so ported code that unwraps it
    /// (`subscription.recordType!`, `if let type = subscription.recordType`) compiles unchanged.
    ///
    /// ```swift
    /// if let query = subscription as? QuerySubscription, let type = query.recordType {
    ///     print("watching \(type)")
    /// }
    /// ```
    public var recordType: String? { queriedRecordType }
    /// The record type the subscription was made with, never `nil`.
    let queriedRecordType: String
    /// The condition a record must meet for the subscription to fire.
    public let predicate: QueryPredicate
    /// Which changes fire it: creation, update, deletion, and whether only once.
    ///
    /// ```swift
    /// let once = subscription.querySubscriptionOptions.contains(.firesOnce)
    /// ```
    public let querySubscriptionOptions: Options
    private let zone: Mutex<RecordZone.ID?>

    /// A query subscription with a name of your choice.
    ///
    /// ```swift
    /// let s = QuerySubscription(recordType: "Order", predicate: QueryPredicate(value: true), subscriptionID: "orders")
    /// ```
    // Disfavored as `Query`'s initializer is: `.init(value:)` is CloudKit's NSPredicate.
    @_disfavoredOverload
    public init(recordType: String, predicate: QueryPredicate, subscriptionID: Subscription.ID,
                options: Options = [.firesOnRecordCreation, .firesOnRecordUpdate, .firesOnRecordDeletion]) {
        self.queriedRecordType = recordType
        self.predicate = predicate
        self.querySubscriptionOptions = options
        self.zone = Mutex(nil)
        super.init(subscriptionID: subscriptionID, notificationInfo: nil)
    }

    /// A query subscription named with a new UUID.
    ///
    /// ```swift
    /// let s = QuerySubscription(recordType: "Order", predicate: QueryPredicate(value: true))
    /// ```
    @_disfavoredOverload
    public convenience init(recordType: String, predicate: QueryPredicate,
                            options: Options = [.firesOnRecordCreation, .firesOnRecordUpdate, .firesOnRecordDeletion]) {
        self.init(recordType: recordType, predicate: predicate, subscriptionID: UUID().uuidString, options: options)
    }

    /// Reads a query subscription archived with `NSKeyedArchiver` (`NSCoding`); `nil` when the
    /// archive holds none.
    ///
    /// ```swift
    /// let data = try NSKeyedArchiver.archivedData(withRootObject: subscription, requiringSecureCoding: true)
    /// let back = try NSKeyedUnarchiver.unarchivedObject(ofClass: Subscription.self, from: data) as? QuerySubscription
    /// ```
    public required convenience init?(coder: NSCoder) {
        guard let (id, definition) = Subscription.archivedDefinition(in: coder, of: .query) else { return nil }
        self.init(recordType: definition.recordType ?? "", predicate: definition.predicate ?? .all, subscriptionID: id,
                  options: Options(rawValue: definition.options ?? 0))
        zoneID = definition.zoneID
        notificationInfo = definition.info.map(NotificationInfo.init(fields:))
    }

    /// The one zone the subscription watches; `nil` (the default) for every zone.
    public var zoneID: RecordZone.ID? {
        get { zone.withLock { $0 } }
        set { zone.withLock { $0 = newValue } }
    }

    public override var subscriptionType: SubscriptionType { .query }

    override var definition: SubscriptionDefinition {
        SubscriptionDefinition(type: .query, recordType: queriedRecordType, predicate: predicate, zoneID: zoneID,
                               options: querySubscriptionOptions.rawValue, info: notificationInfo?.fields)
    }
}

extension QuerySubscription.Options {
    /// The firing options named as `stratus subscriptions create --on` takes them.
    public static let names: [(String, QuerySubscription.Options)] = [
        ("create", .firesOnRecordCreation), ("update", .firesOnRecordUpdate), ("delete", .firesOnRecordDeletion),
    ]
}
