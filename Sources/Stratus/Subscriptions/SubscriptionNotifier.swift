import Foundation

/// Decides, inside one write transaction, which subscriptions its writes fire, and records
/// their notifications in the same transaction: the policy of subscriptions, applied once
/// above every engine (``RecordWriteExecutor`` drives it).
///
/// - A creation fires query subscriptions with `firesOnRecordCreation` whose predicate the new
///   record matches; an update those with `firesOnRecordUpdate` that the record matches after
///   the update (whatever it was before: CloudKit's rule, see ``QuerySubscription``); a
///   deletion those with `firesOnRecordDeletion` that the record matched as it was stored.
/// - A zone subscription fires once per transaction that changed records of its zone (of its
///   record type, when it has one); a database subscription once per transaction that changed
///   records of the database. Deleting a zone changes every record type of it: it fires the
///   zone's subscriptions and the database's (query subscriptions fire for records deleted
///   one by one, not for a zone's).
/// - In the public database a query subscription fires only for a record its subscriber may
///   read, by the `_world`, `_icloud` and `_creator` grants of the record's type (a custom
///   role's READ is not consulted: the writer's transaction does not know the subscriber's
///   roles), so that a subscription never hands out fields, or tells of records, that its
///   subscriber's queries would not.
/// - A `firesOnce` subscription fires at most once and is deleted in the same transaction; of
///   two transactions that fire it at once, only the one that deletes it notifies.
///
/// ```swift
/// var notifier = SubscriptionNotifier(index: index, context: context)
/// notifier.saved(record.recordID, recordType: "Order", system: system, fields: fields, created: true)
/// try notifier.finish(in: transaction)
/// ```
struct SubscriptionNotifier {
    let index: SubscriptionIndex
    let context: DatabaseContext
    /// The write's transaction, which answers record type schemas (their READ grants), each
    /// read once per transaction.
    private let transaction: any RecordWriteTransaction

    /// A notification decided on, not yet stored.
    private struct Pending {
        let key: SubscriptionKey
        let firesOnce: Bool
        let payload: [UInt8]
    }

    private var pending: [Pending] = []
    /// A changed record's type and creator: who may read it, in the public database.
    private struct Changed: Hashable {
        let recordType: String
        let creator: String?
    }
    /// In the public database, the records changed in each zone (by position), for the READ
    /// check of zone subscriptions; empty elsewhere.
    private var changedRecords: [Set<Changed>] = []
    /// Zones with changed records, in the order first changed, with the types changed there
    /// (a deletion whose type nobody needs adds none), or every type (a deleted zone).
    private var changedZones: [(zoneID: RecordZone.ID, types: Set<String>, everyType: Bool)] = []
    private var zonePositions: [RecordZone.ID: Int] = [:]
    /// `firesOnce` query subscriptions (indexes into ``SubscriptionIndex/queries``) already fired here.
    private var firedOnce: Set<Int> = []

    init(index: SubscriptionIndex, context: DatabaseContext, transaction: any RecordWriteTransaction) {
        self.index = index
        self.context = context
        self.transaction = transaction
    }

    /// Whether the subscriber of `entry` may read a record of `recordType` created by `creator`
    /// (always outside the public database, whose databases are their users' own).
    private func subscriberMayRead(_ entry: SubscriptionIndex.QueryEntry, recordType: String, creator: Record.ID?) -> Bool {
        subscriberMayRead(entry.key, recordType: recordType, creator: creator?.recordName)
    }

    private func subscriberMayRead(_ key: SubscriptionKey, recordType: String, creator: String?) -> Bool {
        guard context.scope == .public else { return true }
        let schema: RecordTypeSchema?
        do {
            schema = try transaction.recordTypeSchema(recordType)
        } catch {
            // A schema that cannot be read fires nothing rather than too much.
            return false
        }
        let subscriber = key.subscriber.isEmpty ? nil : key.subscriber
        return RecordAccess(schema, userRecordName: subscriber, roles: []).allows(.read, creator: creator.map { Record.ID(recordName: $0) })
    }

    /// Whether deleting a record of `zoneID` needs the record as stored first.
    func needsStoredRecordBeforeDeleting(in zoneID: RecordZone.ID) -> Bool {
        index.deletionNeedsStoredRecord(in: watchedZoneID(zoneID))
    }

    private func watchedZoneID(_ zoneID: RecordZone.ID) -> RecordZone.ID { context.subscriptionZoneID(zoneID) }

    /// The record ID a query notification names: a participant's write names the owner's zone
    /// as the owner's own writes do (`watched`), other writes as they were made.
    private func notified(_ id: Record.ID, in watched: RecordZone.ID) -> Record.ID {
        context.sharedOwner != nil && watched != id.zoneID ? Record.ID(recordName: id.recordName, zoneID: watched) : id
    }

    /// A record created or updated, as it was stored.
    mutating func saved(_ id: Record.ID, recordType: String, system: Record.SystemFields, fields: [String: FieldValue], parent: Record.Reference? = nil, created: Bool) {
        let zoneID = watchedZoneID(id.zoneID)
        noteChange(in: zoneID, recordType: recordType, creator: system.creatorUserRecordID)
        let subject = PredicateSubject(recordName: id.recordName, system: system, fields: fields, parentName: parent?.recordID.recordName)
        let option: QuerySubscription.Options = created ? .firesOnRecordCreation : .firesOnRecordUpdate
        for candidate in index.queryCandidates(recordType: recordType, zoneID: zoneID, subject: subject) {
            let entry = index.queries[candidate]
            guard entry.options.contains(option), !firedOnce.contains(candidate),
                  entry.predicate.matches(subject, searchableFields: entry.searchableFields),
                  subscriberMayRead(entry, recordType: recordType, creator: system.creatorUserRecordID) else { continue }
            fire(candidate, reason: created ? .recordCreated : .recordUpdated, id: notified(id, in: zoneID), recordType: recordType, fields: fields)
        }
    }

    /// A record deleted; `stored` is the record as it was, when ``needsStoredRecordBeforeDeleting(in:)`` asked for it.
    mutating func deleted(_ id: Record.ID, stored: Record?) {
        let zoneID = watchedZoneID(id.zoneID)
        guard let stored else {
            noteChange(in: zoneID, recordType: nil)
            return
        }
        noteChange(in: zoneID, recordType: stored.recordType, creator: stored.systemFields.creatorUserRecordID)
        let fields = stored.fieldValues
        let subject = PredicateSubject(recordName: id.recordName, system: stored.systemFields, fields: fields, parentName: stored.parent?.recordID.recordName)
        for candidate in index.queryCandidates(recordType: stored.recordType, zoneID: zoneID, subject: subject) {
            let entry = index.queries[candidate]
            guard entry.options.contains(.firesOnRecordDeletion), !firedOnce.contains(candidate),
                  entry.predicate.matches(subject, searchableFields: entry.searchableFields),
                  subscriberMayRead(entry, recordType: stored.recordType, creator: stored.systemFields.creatorUserRecordID) else { continue }
            fire(candidate, reason: .recordDeleted, id: notified(id, in: zoneID), recordType: stored.recordType, fields: [:])
        }
    }

    /// A change of a zone another user shares with the subscriber (``SharedDatabaseNotifier``),
    /// of a record of `recordType` (`nil`: a deletion, whose type is not read): what their
    /// shared database's subscriptions, database subscriptions all, are told of.
    mutating func changedSharedZone(_ zoneID: RecordZone.ID, recordType: String?) {
        noteChange(in: zoneID, recordType: recordType)
    }

    /// A change of a shared zone whose record types are not known (deletions, whose stored
    /// records are not read), or the loss of the zone (the subscriber removed, the share or
    /// the zone deleted): it tells every database subscription, of any record type.
    mutating func changedEveryTypeOfSharedZone(_ zoneID: RecordZone.ID) {
        deletedZone(zoneID)
    }

    /// A zone deleted, with every record in it.
    mutating func deletedZone(_ zoneID: RecordZone.ID) {
        let zoneID = watchedZoneID(zoneID)
        noteChange(in: zoneID, recordType: nil)
        changedZones[zonePositions[zoneID]!].everyType = true
    }

    private mutating func noteChange(in zoneID: RecordZone.ID, recordType: String?, creator: Record.ID? = nil) {
        let position: Int
        if let known = zonePositions[zoneID] {
            position = known
            if let recordType { changedZones[position].types.insert(recordType) }
        } else {
            position = changedZones.count
            zonePositions[zoneID] = position
            changedZones.append((zoneID, recordType.map { [$0] } ?? [], false))
            if context.scope == .public { changedRecords.append([]) }
        }
        if context.scope == .public, let recordType { changedRecords[position].insert(Changed(recordType: recordType, creator: creator?.recordName)) }
    }

    private mutating func fire(_ candidate: Int, reason: QueryNotification.Reason, id: Record.ID, recordType: String, fields: [String: FieldValue]) {
        let entry = index.queries[candidate]
        let firesOnce = entry.options.contains(.firesOnce)
        if firesOnce { firedOnce.insert(candidate) }
        var carried: [String: FieldValue] = [:]
        if reason != .recordDeleted, let keys = entry.info?.desiredKeys {
            for key in keys {
                if let value = fields[key], value.isNotificationValue { carried[key] = value }
            }
        }
        let payload = NotificationPayload.query(subscriptionID: entry.key.subscriptionID, scope: context.storageScope, reason: reason, recordID: id,
                                                recordType: recordType, fields: carried, alert: Self.alert(entry.info, fields: fields))
        pending.append(Pending(key: entry.key, firesOnce: firesOnce, payload: payload))
    }

    /// Records the notifications decided on, last in the transaction: zone and database
    /// notifications after the query notifications, and `firesOnce` subscriptions deleted.
    ///
    /// - Throws: store errors, which roll the transaction back.
    mutating func finish(in transaction: any RecordWriteTransaction) throws {
        try Self.append(try finishedRows(in: transaction), in: transaction)
    }

    /// Appends notification rows of one transaction, gathered from every notifier and request
    /// of it, in one call ordered by subscriber (each feed's own rows keep their order):
    /// writers lock feeds in one order, so that two writes that tell each other's users wait,
    /// never deadlock.
    static func append(_ rows: [NotificationRow], in transaction: any RecordWriteTransaction) throws {
        guard !rows.isEmpty else { return }
        let ordered = rows.enumerated().sorted { ($0.element.subscriber, $0.offset) < ($1.element.subscriber, $1.offset) }.map(\.element)
        try transaction.appendNotifications(ordered)
    }

    /// The notifications decided on (``finish(in:)`` without appending them), `firesOnce`
    /// subscriptions deleted in the transaction: for a caller that gathers a transaction's rows.
    mutating func finishedRows(in transaction: any RecordWriteTransaction) throws -> [NotificationRow] {
        guard !changedZones.isEmpty else { return [] }
        for entry in index.changeEntries {
            switch entry.type {
            case .recordZone:
                guard let watched = entry.zoneID, let position = zonePositions[watched],
                      changedZones[position].everyType || entry.recordType.map({ changedZones[position].types.contains($0) }) ?? true else { continue }
                // In the public database, only for a change of a record the subscriber may read.
                if context.scope == .public, !changedZones[position].everyType,
                   !changedRecords[position].contains(where: { changed in
                       entry.recordType.map { $0 == changed.recordType } ?? true && subscriberMayRead(entry.key, recordType: changed.recordType, creator: changed.creator)
                   }) { continue }
                pending.append(Pending(key: entry.key, firesOnce: false, payload: NotificationPayload.recordZone(
                    subscriptionID: entry.key.subscriptionID, scope: context.storageScope, zoneID: watched, alert: Self.alert(entry.info, fields: [:]))))
            case .database:
                guard entry.recordType.map({ type in changedZones.contains { $0.everyType || $0.types.contains(type) } }) ?? true else { continue }
                pending.append(Pending(key: entry.key, firesOnce: false, payload: NotificationPayload.database(
                    subscriptionID: entry.key.subscriptionID, scope: context.storageScope, alert: Self.alert(entry.info, fields: [:]))))
            case .query:
                continue
            }
        }
        guard !pending.isEmpty else { return [] }
        var rows = pending
        pending = []
        if !firedOnce.isEmpty {
            let fired = firedOnce.map { index.queries[$0].key }
            let deleted = try transaction.deleteSubscriptions(fired)
            rows.removeAll { $0.firesOnce && !deleted.contains($0.key) }
        }
        return rows.map { NotificationRow(subscriber: $0.key.subscriber, payload: $0.payload) }
    }

    /// The alert texts a notification copies from its subscription, with the fields the
    /// `…LocalizationArgs` name replaced by the record's values.
    private static func alert(_ info: NotificationInfo.Fields?, fields: [String: FieldValue]) -> NotificationAlert? {
        guard let info else { return nil }
        func values(_ names: [String]?) -> [String]? { names.map { $0.map { fields[$0]?.alertText ?? "" } } }
        var alert = info.alert
        alert.alertLocalizationArgs = values(alert.alertLocalizationArgs)
        alert.titleLocalizationArgs = values(alert.titleLocalizationArgs)
        alert.subtitleLocalizationArgs = values(alert.subtitleLocalizationArgs)
        return alert.isEmpty ? nil : alert
    }
}

private extension FieldValue {
    /// Whether a notification may carry the value: the types CloudKit allows in desired keys.
    var isNotificationValue: Bool {
        switch self {
        case .string, .int64, .double, .date, .reference, .location: true
        default: false
        }
    }

    /// The value as an alert's substitution text.
    var alertText: String? {
        switch self {
        case .string(let text): text
        case .int64(let number): String(number)
        case .double(let number): String(number)
        case .date(let date): ISO8601DateFormatter().string(from: date)
        case .reference(let reference): reference.recordID.recordName
        default: nil
        }
    }
}
