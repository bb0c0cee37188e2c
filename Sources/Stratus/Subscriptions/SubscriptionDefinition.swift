import Foundation

/// A subscription's definition as the store keeps it (``StoredSubscription/definition``): every
/// kind's properties in one value, JSON-encoded.
///
/// ```swift
/// let bytes = try subscription.definition.encoded()
/// let back = try SubscriptionDefinition.decode(bytes).subscription(id: "orders")
/// ```
struct SubscriptionDefinition: Hashable, Sendable, Codable {
    /// The format's version, so that a later Stratus can tell what it reads.
    var format = 1
    var type: Subscription.SubscriptionType
    var recordType: String?
    var predicate: QueryPredicate?
    var zoneID: RecordZone.ID?
    /// ``QuerySubscription/Options-swift.struct`` raw value.
    var options: UInt?
    var info: NotificationInfo.Fields?
    /// For a predicate with `self CONTAINS`: the fields it searches, as the type's schema
    /// declared them when the subscription was saved (empty: every string field).
    var searchableFields: [String]?

    init(type: Subscription.SubscriptionType, recordType: String?, predicate: QueryPredicate?, zoneID: RecordZone.ID?,
         options: UInt?, info: NotificationInfo.Fields?, searchableFields: [String]? = nil) {
        self.type = type
        self.recordType = recordType
        self.predicate = predicate
        self.zoneID = zoneID
        self.options = options
        self.info = info
        self.searchableFields = searchableFields
    }

    func encoded() -> [UInt8] {
        // Plain value types, and non-finite numbers written as text: encoding cannot fail.
        return Array(try! JSONEncoder.stratusValues().encode(self))
    }

    /// - Throws: `badDatabase` when the stored bytes are not a definition this Stratus reads.
    static func decode(_ bytes: [UInt8], id: String) throws -> SubscriptionDefinition {
        do {
            let definition = try JSONDecoder.stratusValues().decode(SubscriptionDefinition.self, from: Data(bytes))
            guard definition.format == 1 else {
                throw StratusError(.badDatabase, "subscription '\(id)' was saved by a newer Stratus (definition format \(definition.format))")
            }
            return definition
        } catch let error as StratusError {
            throw error
        } catch {
            throw StratusError(.badDatabase, "the stored definition of subscription '\(id)' is damaged: \(error)")
        }
    }

    /// The subscription this defines, as the app saved it.
    func subscription(id: Subscription.ID) -> Subscription {
        let made: Subscription
        switch type {
        case .query:
            let query = QuerySubscription(recordType: recordType ?? "", predicate: predicate ?? .all, subscriptionID: id,
                                          options: QuerySubscription.Options(rawValue: options ?? 0))
            query.zoneID = zoneID
            made = query
        case .recordZone:
            let zone = RecordZoneSubscription(zoneID: zoneID ?? .default, subscriptionID: id)
            zone.recordType = recordType
            made = zone
        case .database:
            let database = DatabaseSubscription(subscriptionID: id)
            database.recordType = recordType
            made = database
        }
        made.notificationInfo = info.map(NotificationInfo.init(fields:))
        return made
    }

    /// The same definition without what is not part of the subscription's identity: two
    /// subscriptions that differ only in their notification info are duplicates.
    func identity(in context: DatabaseContext) -> SubscriptionDefinition {
        var copy = self
        copy.info = nil
        copy.searchableFields = nil
        copy.zoneID = zoneID.map(context.canonical)
        return copy
    }
}
