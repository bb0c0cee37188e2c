import Foundation
import Synchronization

/// A database's subscriptions arranged so that a write finds the ones it may fire without
/// looking at the others: query subscriptions by record type, and within a type by a value
/// their predicate requires (`field == value`, `field IN {…}`, `recordID == …`); zone and
/// database subscriptions by zone. A write's cost then grows with the subscriptions that
/// could match it, not with all subscriptions or all subscribers.
///
/// Built once per version of the database's subscriptions and kept in ``SubscriptionIndexCache``.
///
/// ```swift
/// let index = try SubscriptionIndex(set, context: context)
/// for entry in index.queryCandidates(recordType: "Order", zoneID: zone, subject: subject) { … }
/// ```
final class SubscriptionIndex: Sendable {
    /// A query subscription, compiled.
    struct QueryEntry: Sendable {
        let key: SubscriptionKey
        let zoneID: RecordZone.ID?
        let predicate: QueryPredicate
        let options: QuerySubscription.Options
        let info: NotificationInfo.Fields?
        let searchableFields: [String]
    }

    /// A zone or database subscription.
    struct ChangeEntry: Sendable {
        let key: SubscriptionKey
        let type: Subscription.SubscriptionType
        /// The zone a zone subscription watches; `nil` for a database subscription.
        let zoneID: RecordZone.ID?
        let recordType: String?
        let info: NotificationInfo.Fields?
    }

    /// A value an indexed predicate requires, in the form both sides compare in.
    enum MatchKey: Hashable, Sendable {
        /// A string compared with a field: its case-folded form (``QueryRules/equalityKey(_:)``).
        case folded(String)
        /// A record name: of a reference in a field, or the record's own name.
        case name(String)
        /// A number, integral values as integers so that `2` and `2.0` meet.
        case integer(Int64)
        case double(UInt64)
    }

    /// The query subscriptions of one record type.
    struct TypeBucket: Sendable {
        /// Entries (indexes into ``queries``) by the key and value their predicate requires.
        var byValue: [QueryKey: [MatchKey: [Int]]] = [:]
        /// Entries whose predicate requires no single value: evaluated for every write of the type.
        var scanned: [Int] = []
    }

    let version: Int64
    let queries: [QueryEntry]
    let buckets: [String: TypeBucket]
    let changeEntries: [ChangeEntry]
    /// Zones (nil: every zone) where a deletion may fire something that needs to know the
    /// deleted record: a query subscription on deletions, or a zone or database subscription
    /// of one record type.
    private let deletionWatchers: Set<RecordZone.ID?>

    var isEmpty: Bool { queries.isEmpty && changeEntries.isEmpty }

    /// Compiles a database's subscriptions.
    ///
    /// - Throws: `badDatabase` when a stored definition cannot be read.
    init(_ set: SubscriptionSet, context: DatabaseContext) throws {
        version = set.version
        var queries: [QueryEntry] = []
        var buckets: [String: TypeBucket] = [:]
        var changes: [ChangeEntry] = []
        var watchers: Set<RecordZone.ID?> = []
        // A write's notifications come in subscription order (subscriber, then ID), whatever
        // order the store answered in; zone notifications before database notifications.
        let ordered = set.subscriptions.sorted { ($0.subscriber, $0.subscriptionID) < ($1.subscriber, $1.subscriptionID) }
        for stored in ordered {
            let definition = try SubscriptionDefinition.decode(stored.definition, id: stored.subscriptionID)
            let key = SubscriptionKey(subscriber: stored.subscriber, subscriptionID: stored.subscriptionID)
            let zoneID = definition.zoneID.map(context.subscriptionZoneID)
            switch definition.type {
            case .query:
                guard let recordType = definition.recordType, var written = definition.predicate else { continue }
                // `__defaultOwner__` in the predicate (`creatorUserRecordID == %@` given a record's
                // creator, which reads so to its own user) means the subscriber, as in a query.
                if !stored.subscriber.isEmpty { written = written.namingCurrentUser(stored.subscriber) }
                // Checked when saved; compiled again for its normal form (flat AND, NOT over one condition).
                let predicate = (try? CompiledQuery(Query(recordType: recordType, predicate: written), zoneID: .default, desiredKeys: nil).predicate) ?? written
                let options = QuerySubscription.Options(rawValue: definition.options ?? 0)
                let index = queries.count
                queries.append(QueryEntry(key: key, zoneID: zoneID, predicate: predicate, options: options, info: definition.info,
                                          searchableFields: definition.searchableFields ?? []))
                if options.contains(.firesOnRecordDeletion) { watchers.insert(zoneID) }
                var bucket = buckets[recordType] ?? TypeBucket()
                if let (queryKey, values) = Self.requiredValues(of: predicate) {
                    for value in Set(values) { bucket.byValue[queryKey, default: [:]][value, default: []].append(index) }
                } else {
                    bucket.scanned.append(index)
                }
                buckets[recordType] = bucket
            case .recordZone, .database:
                changes.append(ChangeEntry(key: key, type: definition.type, zoneID: definition.type == .recordZone ? zoneID : nil,
                                           recordType: definition.recordType, info: definition.info))
                // In the public database a zone subscription fires only for records its
                // subscriber may read, which a deletion tells only with the record.
                if definition.recordType != nil || context.scope == .public { watchers.insert(definition.type == .recordZone ? zoneID : nil) }
            }
        }
        self.queries = queries
        self.buckets = buckets
        self.changeEntries = changes.filter { $0.type == .recordZone } + changes.filter { $0.type == .database }
        self.deletionWatchers = watchers
    }

    /// Whether deleting a record of `zoneID` needs the record as it was stored: some
    /// subscription must see its type or its values to decide.
    func deletionNeedsStoredRecord(in zoneID: RecordZone.ID) -> Bool {
        deletionWatchers.contains(nil) || deletionWatchers.contains(zoneID)
    }

    /// The query subscriptions a record of `recordType` in `zoneID` may match (each at most
    /// once, in subscription order); the caller evaluates their predicates.
    func queryCandidates(recordType: String, zoneID: RecordZone.ID, subject: PredicateSubject) -> [Int] {
        guard let bucket = buckets[recordType] else { return [] }
        var found = bucket.scanned
        for (queryKey, values) in bucket.byValue {
            guard let value = Self.matchKey(of: subject, for: queryKey), let entries = values[value] else { continue }
            found.append(contentsOf: entries)
        }
        if found.count > 1 { found = Array(Set(found)).sorted() }
        return found.filter { queries[$0].zoneID.map { $0 == zoneID } ?? true }
    }

    // MARK: - Required values

    /// The key and values a predicate requires one of, when it requires one: an `==` or `IN`
    /// condition at its top, on a field or the record name, with strings, numbers or references.
    static func requiredValues(of predicate: QueryPredicate) -> (QueryKey, [MatchKey])? {
        let conditions: [QueryPredicate]
        switch predicate {
        case .and(let parts): conditions = parts
        case .condition: conditions = [predicate]
        default: return nil
        }
        for part in conditions {
            guard case .condition(let condition) = part else { continue }
            switch condition {
            case .compare(let key, .equal, let value):
                if let match = matchKey(of: value, for: key) { return (key, [match]) }
            case .in(let key, let values) where !values.isEmpty:
                let matches = values.compactMap { matchKey(of: $0, for: key) }
                if matches.count == values.count { return (key, matches) }
            default: continue
            }
        }
        return nil
    }

    /// A predicate value as the index keys it; `nil` for keys and values it does not index.
    private static func matchKey(of value: FieldValue, for key: QueryKey) -> MatchKey? {
        switch (key, value) {
        case (.recordName, .string(let name)): return .name(name)
        case (.recordName, .reference(let reference)): return .name(reference.recordID.recordName)
        case (.field, .string(let text)): return .folded(QueryRules.equalityKey(text))
        case (.field, .reference(let reference)): return .name(reference.recordID.recordName)
        case (.field, .int64(let number)): return .integer(number)
        case (.field, .double(let number)): return numberKey(number)
        default: return nil
        }
    }

    /// A record's value for an indexed key, in the form ``matchKey(of:for:)`` makes.
    private static func matchKey(of subject: PredicateSubject, for key: QueryKey) -> MatchKey? {
        switch key {
        case .recordName: return .name(subject.recordName)
        case .field(let name):
            switch subject.fields[name] {
            case .string(let text)?: return .folded(QueryRules.equalityKey(text))
            case .reference(let reference)?: return .name(reference.recordID.recordName)
            case .int64(let number)?: return .integer(number)
            case .double(let number)?: return numberKey(number)
            default: return nil
            }
        default: return nil
        }
    }

    /// Integral doubles in `Int64`'s range key as integers (`-0.0` as `0`), so that a number
    /// equal to another by value always has its key; the predicate decides the rest.
    private static func numberKey(_ number: Double) -> MatchKey {
        if number == number.rounded(.towardZero), number >= -0x1p63, number < 0x1p63 { return .integer(Int64(number)) }
        return .double(number.bitPattern)
    }
}

/// The compiled subscriptions of each database a process writes to, kept until the
/// database's subscription version moves. Keyed by store, so that two stores never share.
enum SubscriptionIndexCache {
    private static let entries = Mutex<[String: SubscriptionIndex]>([:])
    /// Databases whose indexes are kept at once; more clears the cache (rare: one process
    /// writes to few databases).
    private static let capacity = 512

    /// The index of the transaction's database at its current subscription version, built
    /// from the transaction's own view of the subscriptions when the kept one is older.
    /// `nil` when the engine keeps no subscriptions or the database has none.
    ///
    /// - Throws: store errors; `badDatabase` for a damaged definition.
    static func index(for transaction: any RecordWriteTransaction, engine: any StorageEngine, context: DatabaseContext) throws -> SubscriptionIndex? {
        try index(engine: engine, context: context, version: transaction.subscriptionVersion(), subscriptions: transaction.fetchSubscriptions())
    }

    /// The index of `database`, another database of the transaction's container (a
    /// participant's shared database), as the transaction sees its subscriptions.
    static func index(of database: DatabaseContext, in transaction: any RecordWriteTransaction, engine: any StorageEngine) throws -> SubscriptionIndex? {
        try index(engine: engine, context: database, version: transaction.subscriptionVersion(of: database), subscriptions: transaction.fetchSubscriptions(of: database))
    }

    private static func index(engine: any StorageEngine, context: DatabaseContext, version: Int64?, subscriptions: @autoclosure () throws -> SubscriptionSet) throws -> SubscriptionIndex? {
        guard let version, version > 0 else { return nil }
        // The database whose subscriptions these are (its storage scope and owner): a
        // participant's write in an owner's zone reads the owner's private subscriptions, the
        // owner's shared database has others. The index names zones as the writer's context
        // does, which differs from the owner's only for a participant's write (``DatabaseContext/subscriptionZoneID(_:)``):
        // that writer is in the key, and the public database's writers share one entry.
        let writer = context.sharedOwner == nil ? "" : context.userRecordName ?? ""
        let key = try [engine.storeIdentifier, context.storageContainer, "\(context.scope.rawValue)", "\(context.storageScope.rawValue)",
                       context.storageOwner, writer].joined(separator: "\u{1F}")
        if let kept = entries.withLock({ $0[key] }), kept.version == version { return kept.isEmpty ? nil : kept }
        let set = try subscriptions()
        let index = try SubscriptionIndex(set, context: context)
        entries.withLock { entries in
            if entries.count >= capacity { entries.removeAll() }
            entries[key] = index
        }
        return index.isEmpty ? nil : index
    }
}

extension DatabaseContext {
    /// A zone as the subscriptions of the context's database name it, and as writes are matched
    /// with them: the database user's own zones by the default owner. A participant's write
    /// reaches the owner's zones (``sharedOwner``), which the owner's subscriptions name so too.
    func subscriptionZoneID(_ zoneID: RecordZone.ID) -> RecordZone.ID {
        if let sharedOwner, zoneID.ownerName == sharedOwner {
            return RecordZone.ID(zoneName: zoneID.zoneName, ownerName: RecordZone.ID.currentUserDefaultOwner)
        }
        return canonical(zoneID)
    }
}
