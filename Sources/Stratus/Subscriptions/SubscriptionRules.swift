import Foundation

/// CloudKit's rules for saving subscriptions, checked once above every engine.
///
/// - A subscription needs ``Subscription/notificationInfo`` (CloudKit requires it before a save).
/// - ``QuerySubscription``: not in the shared database; a valid record type and a predicate
///   queries accept; at least one of the creation, update and deletion options; its zone, when
///   it names one, must exist.
/// - ``RecordZoneSubscription``: not in the shared database; the zone must exist and have the
///   `fetchChanges` capability.
/// - ``DatabaseSubscription``: the private and shared databases only.
/// - Subscription IDs: 1 to 255 bytes of UTF-8 without control characters; unique per user and
///   database (saving an ID again replaces that subscription). A subscription with the same
///   definition as another of the user's (only the notification info differing) is refused
///   with `serverRejectedRequest`, as CloudKit refuses duplicates.
/// - At most ``maximumSubscriptionsPerUser`` per user and database (`limitExceeded`).
///
/// ```swift
/// let stored = try SubscriptionRules.prepare(subscription, context: context, zones: zones, existing: mine, schemas: schemas)
/// ```
enum SubscriptionRules {
    /// The most subscriptions one user keeps in one database.
    static let maximumSubscriptionsPerUser = 1_000
    /// The longest subscription ID, in UTF-8 bytes.
    static let maximumIDLength = 255

    /// Subscriptions and their notifications are a signed-in user's own, as in CloudKit: a
    /// caller who is not signed in keeps none (else every such caller would share one list).
    ///
    /// - Throws: `notAuthenticated`.
    static func checkSubscriber(_ context: DatabaseContext, doing what: String) throws(StratusError) {
        guard context.userRecordName == nil, !context.isAdministrator else { return }
        throw StratusError(.notAuthenticated, "\(what) needs a signed-in user: subscriptions and their notifications belong to the user who saved them")
    }

    /// Checks a subscription ID.
    ///
    /// - Throws: `invalidArguments` saying what is wrong.
    static func checkID(_ id: String) throws(StratusError) {
        guard !id.isEmpty else { throw StratusError(.invalidArguments, "a subscription ID cannot be empty") }
        guard id.utf8.count <= maximumIDLength else {
            throw StratusError(.invalidArguments, "subscription ID '\(id.prefix(40))…' is \(id.utf8.count) bytes long; the limit is \(maximumIDLength)")
        }
        guard !id.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw StratusError(.invalidArguments, "subscription ID '\(id.debugDescription)' holds a control character")
        }
    }

    /// In production a query subscription's type must be in the schema and its conditions'
    /// fields queryable, as for a query (``QueryAdmission``): otherwise it could never fire.
    /// A subscription lists no records, so it needs no queryable record name.
    private static func checkProductionSchema(_ subscription: QuerySubscription, schema: RecordTypeSchema?, subscriptionID id: Subscription.ID) throws(StratusError) {
        guard let schema else {
            throw StratusError(.unknownItem, "subscription '\(id)': Did not find record type: \(subscription.queriedRecordType) (the production schema has no such type; deploy the development schema)")
        }
        let missing = Query(recordType: subscription.queriedRecordType, predicate: subscription.predicate).missingIndexes(in: schema)
            .filter { !($0.field == "recordName" && subscription.predicate == .all) }
        if let first = missing.first {
            throw StratusError(.invalidArguments, "subscription '\(id)': " + QueryAdmission.refusal(first, schema: schema))
        }
    }

    /// Checks a subscription for saving in `context`'s database and makes what the store keeps.
    ///
    /// - Parameters:
    ///   - zones: the database's zones (needed for zone subscriptions and zoned query subscriptions).
    ///   - schemas: the container's record type schemas (for `self CONTAINS` in a predicate,
    ///     and to refuse a predicate on an encrypted field).
    /// - Throws: `invalidArguments`, `zoneNotFound`, saying what is wrong; in production
    ///   `unknownItem` for a query subscription on a type the schema lacks.
    static func prepare(_ subscription: Subscription, context: DatabaseContext, zones: [RecordZone], schemas: [RecordTypeSchema]) throws(StratusError) -> StoredSubscription {
        let id = subscription.subscriptionID
        try checkID(id)
        func invalid(_ message: String) -> StratusError { StratusError(.invalidArguments, "subscription '\(id)': \(message)") }
        guard let info = subscription.notificationInfo else {
            throw invalid("it has no notificationInfo; CloudKit requires one before a save (NotificationInfo() when it needs none of its texts)")
        }
        for key in info.desiredKeys ?? [] { try Naming.checkDesiredKey(key) }
        var definition = subscription.definition
        switch subscription {
        case let query as QuerySubscription:
            guard context.scope != .shared else { throw invalid("query subscriptions are not supported in the shared database") }
            guard !query.querySubscriptionOptions.isDisjoint(with: [.firesOnRecordCreation, .firesOnRecordUpdate, .firesOnRecordDeletion]) else {
                throw invalid("a query subscription needs at least one of firesOnRecordCreation, firesOnRecordUpdate and firesOnRecordDeletion")
            }
            let compiled: CompiledQuery
            do {
                compiled = try CompiledQuery(Query(recordType: query.queriedRecordType, predicate: query.predicate), zoneID: query.zoneID ?? .default, desiredKeys: nil)
            } catch let error as StratusError {
                throw invalid(error.message)
            } catch {
                throw invalid("\(error)")
            }
            // A subscription's predicate is a query's: never on an encrypted field, as in CloudKit.
            if let refusal = QueryAdmission.encryptedFieldRefusal(compiled, schema: schemas.first { $0.recordType == query.recordType }) {
                throw invalid(refusal.message)
            }
            if context.environment == .production && !context.isAdministrator {
                try checkProductionSchema(query, schema: schemas.first { $0.recordType == query.recordType }, subscriptionID: id)
            }
            if let zoneID = query.zoneID { _ = try existingZone(zoneID, in: zones, context: context, subscriptionID: id) }
            if compiled.predicate.searchesText {
                definition.searchableFields = schemas.first { $0.recordType == query.recordType }?.searchableFields ?? []
            }
        case let zone as RecordZoneSubscription:
            guard context.scope != .shared else { throw invalid("zone subscriptions are not supported in the shared database") }
            if let type = zone.recordType { try Naming.checkKeptRecordType(type) }   // an app's type, or CloudKit's own (cloudkit.share)
            let stored = try existingZone(zone.zoneID, in: zones, context: context, subscriptionID: id)
            guard stored.capabilities.contains(.fetchChanges) else {
                throw StratusError(.invalidArguments, "subscription '\(id)': zone '\(zone.zoneID.zoneName)' was created without the fetchChanges capability, which zone subscriptions need", zoneID: zone.zoneID)
            }
        case let database as DatabaseSubscription:
            guard context.scope != .public else { throw invalid("database subscriptions are supported in the private and shared databases only, as in CloudKit") }
            if let type = database.recordType { try Naming.checkKeptRecordType(type) }
        default:
            throw invalid("\(type(of: subscription)) is not a kind of subscription Stratus knows")
        }
        return StoredSubscription(subscriptionID: id, subscriber: context.subscriber, recordType: definition.recordType,
                                  zoneID: definition.zoneID.map(context.canonical), definition: definition.encoded())
    }

    /// The zone a subscription names, as the database has it.
    private static func existingZone(_ zoneID: RecordZone.ID, in zones: [RecordZone], context: DatabaseContext, subscriptionID: String) throws(StratusError) -> RecordZone {
        do {
            try ZoneRules.checkZoneID(zoneID, context)
        } catch {
            var error = error
            error.message = "subscription '\(subscriptionID)': \(error.message)"
            throw error
        }
        let wanted = context.canonical(zoneID)
        guard let zone = zones.first(where: { context.canonical($0.zoneID) == wanted }) else {
            throw StratusError(.zoneNotFound, "subscription '\(subscriptionID)': zone '\(zoneID.zoneName)' does not exist in the \(context.scope.name) database", zoneID: zoneID)
        }
        return zone
    }

    /// The error for a subscription with the same definition as one the user already has.
    static func duplicate(_ id: String, of other: String) -> StratusError {
        StratusError(.serverRejectedRequest, "subscription '\(id)' is a duplicate of '\(other)': the user already has a subscription with the same definition")
    }
}

extension QueryPredicate {
    /// Whether the predicate has a `self CONTAINS` condition.
    var searchesText: Bool {
        switch self {
        case .all, .none: false
        case .and(let parts): parts.contains(where: \.searchesText)
        case .not(let inner): inner.searchesText
        case .condition(.tokens): true
        case .condition: false
        }
    }
}
