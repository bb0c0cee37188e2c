import Foundation
@_spi(StratusEngine) import Stratus

extension PostgresEngine {
    // MARK: - Subscriptions

    @_spi(StratusEngine)
    public func fetchSubscriptions(in database: DatabaseContext, subscriber: String?) throws -> SubscriptionSet {
        try readTransaction(mayLag: false) { connection in try Self.subscriptions(of: database, subscriber: subscriber, on: connection) }
    }

    /// A database's subscriptions (one subscriber's, or all). The version is read first: under
    /// read committed the rows may then be newer than it, never older, so an index built from
    /// them is rebuilt at worst once too often.
    static func subscriptions(of database: DatabaseContext, subscriber: String?, on connection: PostgresConnection) throws -> SubscriptionSet {
        let version = try subscriptionVersion(of: database, on: connection)
        let rows = try connection.query(subscriber == nil
            ? "SELECT subscriber, subscription_id, record_type, zone_name, zone_owner, definition FROM subscriptions WHERE container = $1 AND db = $2 AND owner = $3"
            : "SELECT subscriber, subscription_id, record_type, zone_name, zone_owner, definition FROM subscriptions WHERE container = $1 AND db = $2 AND owner = $3 AND subscriber = $4",
            databaseKey(database) + (subscriber.map { [.text($0)] } ?? []))
        var found: [StoredSubscription] = []
        for row in rows {
            let zoneID = try row.text(3).map { RecordZone.ID(zoneName: $0, ownerName: try row.text(4) ?? RecordZone.ID.currentUserDefaultOwner) }
            found.append(StoredSubscription(subscriptionID: try row.text(1) ?? "", subscriber: try row.text(0) ?? "", recordType: try row.text(2),
                                            zoneID: zoneID, definition: Array((try row.text(5) ?? "").utf8)))
        }
        return SubscriptionSet(version: version, subscriptions: found)
    }

    static func subscriptionVersion(of database: DatabaseContext, on connection: PostgresConnection) throws -> Int64 {
        try connection.query("SELECT version FROM subscription_state WHERE container = $1 AND db = $2 AND owner = $3", databaseKey(database))
            .first?.int64(0) ?? 0
    }

    /// Moves a database's subscription version (its row stays locked until commit).
    static func moveSubscriptionVersion(of database: DatabaseContext, on connection: PostgresConnection) throws {
        try connection.execute("""
            INSERT INTO subscription_state(container, db, owner, version) VALUES ($1, $2, $3, 1)
            ON CONFLICT (container, db, owner) DO UPDATE SET version = subscription_state.version + 1
            """, databaseKey(database))
    }

    /// Deletes one subscriber's subscription; answers whether this transaction deleted it (a
    /// concurrent deleter waits for the first to commit, then finds nothing).
    static func deleteSubscription(_ key: SubscriptionKey, of database: DatabaseContext, on connection: PostgresConnection) throws -> Bool {
        try connection.execute("DELETE FROM subscriptions WHERE container = $1 AND db = $2 AND owner = $3 AND subscriber = $4 AND subscription_id = $5",
                               databaseKey(database) + [.text(key.subscriber), .text(key.subscriptionID)]) > 0
    }

    @_spi(StratusEngine)
    public func modifySubscriptions(saving subscriptions: [StoredSubscription], deleting subscriptionIDs: [String], in database: DatabaseContext) throws -> Set<String> {
        try writeTransaction { connection in
            var deleted: Set<String> = []
            // Rows in one order in every transaction that changes several, so that none waits in a circle.
            for id in subscriptionIDs.sorted() where try Self.deleteSubscription(SubscriptionKey(subscriber: database.subscriber, subscriptionID: id), of: database, on: connection) {
                deleted.insert(id)
            }
            for subscription in subscriptions.sorted(by: { ($0.subscriber, $0.subscriptionID) < ($1.subscriber, $1.subscriptionID) }) {
                try connection.execute("""
                    INSERT INTO subscriptions(container, db, owner, subscriber, subscription_id, record_type, zone_name, zone_owner, definition)
                    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
                    ON CONFLICT (container, db, owner, subscriber, subscription_id) DO UPDATE SET
                        record_type = excluded.record_type, zone_name = excluded.zone_name, zone_owner = excluded.zone_owner, definition = excluded.definition
                    """, Self.databaseKey(database) + [
                        .text(subscription.subscriber), .text(subscription.subscriptionID), subscription.recordType.map(PostgresValue.text) ?? .null,
                        subscription.zoneID.map { .text($0.zoneName) } ?? .null, subscription.zoneID.map { .text($0.ownerName) } ?? .null,
                        .text(String(decoding: subscription.definition, as: UTF8.self)),
                    ])
            }
            try Self.moveSubscriptionVersion(of: database, on: connection)
            return deleted
        }
    }

    // MARK: - Feeds

    @_spi(StratusEngine)
    public func fetchNotifications(in feed: NotificationFeedID, after position: ChangePosition?, limit: Int) throws -> NotificationBatch {
        precondition(limit > 0, "fetchNotifications needs a positive limit")
        // The primary: a reader woken by a writer's NOTIFY finds the notification there.
        return try readTransaction(mayLag: false) { connection in
            var current: Int64 = 0, start: Int64 = 0
            if let row = try connection.query("SELECT seq, history_start FROM notification_feeds WHERE container = $1 AND subscriber = $2",
                                              [.text(feed.containerIdentifier), .text(feed.subscriber)]).first {
                current = try row.int64(0) ?? 0
                start = try row.int64(1) ?? 0
            }
            let after = try ChangeHistoryRules.sequence(after: position, incarnation: identity, current: current, start: start, of: "\(feed)")
            var found: [(sequence: Int64, change: StoredNotification)] = []
            for row in try connection.query("""
                SELECT seq, created_at, payload FROM notifications WHERE container = $1 AND subscriber = $2 AND seq > $3 AND seq <= $4 ORDER BY seq LIMIT $5
                """, [.text(feed.containerIdentifier), .text(feed.subscriber), .int64(after), .int64(current), .int64(Int64(limit) + 1)]) {
                let sequence = try row.int64(0) ?? 0
                found.append((sequence, StoredNotification(sequence: sequence, createdAt: Date(timeIntervalSinceReferenceDate: try row.double(1) ?? 0),
                                                           payload: Array((try row.text(2) ?? "").utf8))))
            }
            let batch = ChangeHistoryRules.batch(of: found, limit: limit, current: current, incarnation: identity)
            return NotificationBatch(notifications: batch.changes, position: batch.position, moreComing: batch.moreComing)
        }
    }

    @_spi(StratusEngine)
    public func notificationFeedEnd(_ feed: NotificationFeedID) throws -> ChangePosition {
        try readTransaction(mayLag: false) { connection in
            let current = try connection.query("SELECT seq FROM notification_feeds WHERE container = $1 AND subscriber = $2",
                                               [.text(feed.containerIdentifier), .text(feed.subscriber)]).first?.int64(0) ?? 0
            return ChangePosition(incarnation: identity, sequence: current)
        }
    }

    /// What a writer's `NOTIFY` says: which store and which feed.
    func feedChannelPayload(_ feed: NotificationFeedID) -> String {
        identity + "\u{1F}" + feed.containerIdentifier + "\u{1F}" + feed.subscriber
    }

    /// Appends entries to each feed at its next places, feeds in subscriber order (so that two
    /// transactions filling the same feeds never wait in a circle), and wakes the feeds'
    /// listeners when the transaction commits. Each feed's row stays locked until then, so
    /// places follow commit order.
    func append(_ entries: [(subscriber: String, payload: [UInt8])], container: String, at date: Date, on connection: PostgresConnection) throws {
        var bySubscriber: [String: [[UInt8]]] = [:]
        for entry in entries { bySubscriber[entry.subscriber, default: []].append(entry.payload) }
        for subscriber in bySubscriber.keys.sorted() {
            let payloads = bySubscriber[subscriber]!
            let feed = NotificationFeedID(containerIdentifier: container, subscriber: subscriber)
            guard let last = try connection.query("""
                INSERT INTO notification_feeds(container, subscriber, seq) VALUES ($1, $2, $3)
                ON CONFLICT (container, subscriber) DO UPDATE SET seq = notification_feeds.seq + excluded.seq RETURNING seq
                """, [.text(container), .text(subscriber), .int64(Int64(payloads.count))]).first?.int64(0) else {
                throw StratusError(.internalError, "taking places in \(feed) returned no row")
            }
            let first = last - Int64(payloads.count) + 1
            try connection.execute("""
                INSERT INTO notifications(container, subscriber, seq, created_at, payload)
                SELECT $1, $2, $3 + n - 1, $4, p FROM unnest($5::text[]) WITH ORDINALITY AS u(p, n)
                """, [.text(container), .text(subscriber), .int64(first), .double(date.timeIntervalSinceReferenceDate),
                      .textArray(payloads.map { String(decoding: $0, as: UTF8.self) })])
            try connection.notify(PostgresSchema.notificationChannel, payload: feedChannelPayload(feed))
        }
    }

    @_spi(StratusEngine)
    public func markNotificationsRead(_ marks: [NotificationReadMark], in feed: NotificationFeedID) throws -> Set<Int64> {
        try writeTransaction { connection in
            let key: [PostgresValue] = [.text(feed.containerIdentifier), .text(feed.subscriber)]
            let sequences = marks.map(\.sequence)
            let newlyRead = Set(try connection.query("""
                UPDATE notifications SET read = true WHERE container = $1 AND subscriber = $2 AND seq = ANY($3) AND NOT read RETURNING seq
                """, key + [.int64Array(sequences)]).map { try $0.int64(0) ?? 0 })
            let existing = Set(try connection.query("SELECT seq FROM notifications WHERE container = $1 AND subscriber = $2 AND seq = ANY($3)",
                                                    key + [.int64Array(sequences)]).map { try $0.int64(0) ?? 0 })
            var done: Set<Int64> = []
            let entries = marks.filter { newlyRead.contains($0.sequence) && done.insert($0.sequence).inserted }.map { (feed.subscriber, $0.entry) }
            try append(entries, container: feed.containerIdentifier, at: Date(), on: connection)
            return existing
        }
    }

    @_spi(StratusEngine)
    public func compactNotifications(createdBefore cutoff: Date) throws -> Int {
        try writeTransaction { connection in try compactNotifications(createdBefore: cutoff, on: connection) }
    }

    /// Removes each feed's notifications from its start up to the first one made at or after
    /// `cutoff` (places follow commit order, times nearly so), and moves the feed's start.
    func compactNotifications(createdBefore cutoff: Date, on connection: PostgresConnection) throws -> Int {
        var removed = 0
        for feed in try connection.query("SELECT container, subscriber FROM notification_feeds") {
            let key: [PostgresValue] = [.text(try feed.text(0) ?? ""), .text(try feed.text(1) ?? "")]
            guard let last = try connection.query("""
                SELECT max(seq) FROM notifications WHERE container = $1 AND subscriber = $2 AND seq < coalesce(
                    (SELECT seq FROM notifications WHERE container = $1 AND subscriber = $2 AND created_at >= $3 ORDER BY seq LIMIT 1),
                    9223372036854775807)
                """, key + [.double(cutoff.timeIntervalSinceReferenceDate)]).first?.int64(0) else { continue }
            removed += try connection.execute("DELETE FROM notifications WHERE container = $1 AND subscriber = $2 AND seq <= $3", key + [.int64(last)])
            try connection.execute("UPDATE notification_feeds SET history_start = greatest(history_start, $3) WHERE container = $1 AND subscriber = $2",
                                   key + [.int64(last)])
        }
        return removed
    }

    @_spi(StratusEngine)
    public func openNotificationWaiter(for feed: NotificationFeedID) throws -> any NotificationWaiter {
        try PostgresNotificationWaiter(pool: pool, payload: feedChannelPayload(feed))
    }
}
