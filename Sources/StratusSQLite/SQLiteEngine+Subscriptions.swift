import Foundation
@_spi(StratusEngine) import Stratus
import StratusSQL

extension SQLiteEngine {
    // MARK: - Subscriptions

    @_spi(StratusEngine) public func fetchSubscriptions(in database: DatabaseContext, subscriber: String?) throws -> SubscriptionSet {
        try readTransaction { connection in try Self.subscriptions(of: database, subscriber: subscriber, on: connection) }
    }

    /// A database's subscriptions (one subscriber's, or all), the version read first.
    static func subscriptions(of database: DatabaseContext, subscriber: String?, on connection: SQLiteConnection) throws -> SubscriptionSet {
        let version = try subscriptionVersion(of: database, on: connection)
        let select = try connection.statement(subscriber == nil
            ? "SELECT subscriber, subscription_id, record_type, zone_name, zone_owner, definition FROM subscriptions WHERE container = ? AND db = ? AND owner = ?"
            : "SELECT subscriber, subscription_id, record_type, zone_name, zone_owner, definition FROM subscriptions WHERE container = ? AND db = ? AND owner = ? AND subscriber = ?")
        try select.bind(databaseKey(database) + (subscriber.map { [.text($0)] } ?? []))
        defer { select.reset() }
        var found: [StoredSubscription] = []
        while try select.step() {
            let zoneID = select.text(3).map { RecordZone.ID(zoneName: $0, ownerName: select.text(4) ?? RecordZone.ID.currentUserDefaultOwner) }
            let definition = select.withTextBytes(5) { $0.map(Array.init) ?? [] }
            found.append(StoredSubscription(subscriptionID: select.text(1) ?? "", subscriber: select.text(0) ?? "", recordType: select.text(2),
                                            zoneID: zoneID, definition: definition))
        }
        return SubscriptionSet(version: version, subscriptions: found)
    }

    /// The subscription version of a database; 0 before its first subscription.
    static func subscriptionVersion(of database: DatabaseContext, on connection: SQLiteConnection) throws -> Int64 {
        let select = try connection.statement("SELECT version FROM subscription_state WHERE container = ? AND db = ? AND owner = ?")
        try select.bind(databaseKey(database))
        defer { select.reset() }
        return try select.step() ? select.int64(0) : 0
    }

    /// Moves a database's subscription version, so that every writer builds its index again.
    static func moveSubscriptionVersion(of database: DatabaseContext, on connection: SQLiteConnection) throws {
        let bump = try connection.statement("""
            INSERT INTO subscription_state(container, db, owner, version) VALUES (?, ?, ?, 1)
            ON CONFLICT(container, db, owner) DO UPDATE SET version = version + 1
            """)
        try bump.bind(databaseKey(database))
        _ = try bump.step()
        bump.reset()
    }

    /// Deletes one subscriber's subscription; answers whether there was one.
    static func deleteSubscription(_ key: SubscriptionKey, of database: DatabaseContext, on connection: SQLiteConnection) throws -> Bool {
        let delete = try connection.statement("DELETE FROM subscriptions WHERE container = ? AND db = ? AND owner = ? AND subscriber = ? AND subscription_id = ?")
        try delete.bind(databaseKey(database) + [.text(key.subscriber), .text(key.subscriptionID)])
        _ = try delete.step()
        delete.reset()
        return connection.changes > 0
    }

    @_spi(StratusEngine) public func modifySubscriptions(saving subscriptions: [StoredSubscription], deleting subscriptionIDs: [String], in database: DatabaseContext) throws -> Set<String> {
        try writeTransaction { connection in
            var deleted: Set<String> = []
            for id in subscriptionIDs where try Self.deleteSubscription(SubscriptionKey(subscriber: database.subscriber, subscriptionID: id), of: database, on: connection) {
                deleted.insert(id)
            }
            let save = try connection.statement("""
                INSERT OR REPLACE INTO subscriptions(container, db, owner, subscriber, subscription_id, record_type, zone_name, zone_owner, definition)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
            for subscription in subscriptions {
                save.reset()
                try save.bind(Self.databaseKey(database) + [
                    .text(subscription.subscriber), .text(subscription.subscriptionID), subscription.recordType.map(SQLValue.text) ?? .null,
                    subscription.zoneID.map { .text($0.zoneName) } ?? .null, subscription.zoneID.map { .text($0.ownerName) } ?? .null,
                    .text(String(decoding: subscription.definition, as: UTF8.self)),
                ])
                _ = try save.step()
            }
            save.reset()
            try Self.moveSubscriptionVersion(of: database, on: connection)
            return deleted
        }
    }

    // MARK: - Feeds

    @_spi(StratusEngine) public func fetchNotifications(in feed: NotificationFeedID, after position: ChangePosition?, limit: Int) throws -> NotificationBatch {
        precondition(limit > 0, "fetchNotifications needs a positive limit")
        return try readTransaction { connection in
            let incarnation = try storeIdentity(on: connection)
            let (current, start) = try Self.feedState(feed, on: connection)
            let after = try ChangeHistoryRules.sequence(after: position, incarnation: incarnation, current: current, start: start, of: "\(feed)")
            let select = try connection.statement("SELECT seq, created_at, payload FROM notifications WHERE container = ? AND subscriber = ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?")
            try select.bind([.text(feed.containerIdentifier), .text(feed.subscriber), .integer(after), .integer(current), .integer(Int64(limit) + 1)])
            defer { select.reset() }
            var found: [(sequence: Int64, change: StoredNotification)] = []
            while try select.step() {
                let payload = select.withTextBytes(2) { $0.map(Array.init) ?? [] }
                let sequence = select.int64(0)
                found.append((sequence, StoredNotification(sequence: sequence, createdAt: Date(timeIntervalSinceReferenceDate: select.double(1)), payload: payload)))
            }
            let batch = ChangeHistoryRules.batch(of: found, limit: limit, current: current, incarnation: incarnation)
            return NotificationBatch(notifications: batch.changes, position: batch.position, moreComing: batch.moreComing)
        }
    }

    @_spi(StratusEngine) public func notificationFeedEnd(_ feed: NotificationFeedID) throws -> ChangePosition {
        try readTransaction { connection in
            ChangePosition(incarnation: try storeIdentity(on: connection), sequence: try Self.feedState(feed, on: connection).current)
        }
    }

    /// A feed's last place taken and the newest place compaction removed (0 and 0 for a new feed).
    static func feedState(_ feed: NotificationFeedID, on connection: SQLiteConnection) throws -> (current: Int64, start: Int64) {
        let select = try connection.statement("SELECT seq, history_start FROM notification_feeds WHERE container = ? AND subscriber = ?")
        try select.bind([.text(feed.containerIdentifier), .text(feed.subscriber)])
        defer { select.reset() }
        return try select.step() ? (select.int64(0), select.int64(1)) : (0, 0)
    }

    /// The most notifications one multi-row `INSERT` writes.
    static let notificationRunLength = 32

    /// Appends entries to a feed at its next places, in order. Called inside the writer's
    /// transaction, so the places follow commit order.
    static func append(_ payloads: [[UInt8]], to feed: NotificationFeedID, at date: Date, on connection: SQLiteConnection) throws {
        guard !payloads.isEmpty else { return }
        let take = try connection.statement("""
            INSERT INTO notification_feeds(container, subscriber, seq) VALUES (?, ?, ?)
            ON CONFLICT(container, subscriber) DO UPDATE SET seq = seq + excluded.seq RETURNING seq
            """)
        try take.bind([.text(feed.containerIdentifier), .text(feed.subscriber), .integer(Int64(payloads.count))])
        guard try take.step() else { throw StratusError(.internalError, "taking places in \(feed) returned no row") }
        let last = take.int64(0)
        take.reset()
        var sequence = last - Int64(payloads.count)
        var start = 0
        while start < payloads.count {
            let run = payloads[start..<min(payloads.count, start + notificationRunLength)]
            let row = "(?, ?, ?, ?, ?)"
            let insert = try connection.statement("INSERT INTO notifications(container, subscriber, seq, created_at, payload) VALUES "
                                                  + Array(repeating: row, count: run.count).joined(separator: ", "))
            var values: [SQLValue] = []
            values.reserveCapacity(run.count * 5)
            for payload in run {
                sequence += 1
                values += [.text(feed.containerIdentifier), .text(feed.subscriber), .integer(sequence), .real(date.timeIntervalSinceReferenceDate),
                           .text(String(decoding: payload, as: UTF8.self))]
            }
            try insert.bind(values)
            _ = try insert.step()
            insert.reset()
            start = run.endIndex
        }
    }

    @_spi(StratusEngine) public func markNotificationsRead(_ marks: [NotificationReadMark], in feed: NotificationFeedID) throws -> Set<Int64> {
        try writeTransaction { connection in
            var found: Set<Int64> = []
            var entries: [[UInt8]] = []
            let mark = try connection.statement("UPDATE notifications SET read = 1 WHERE container = ? AND subscriber = ? AND seq = ? AND read = 0")
            let exists = try connection.statement("SELECT 1 FROM notifications WHERE container = ? AND subscriber = ? AND seq = ?")
            for item in marks {
                let key: [SQLValue] = [.text(feed.containerIdentifier), .text(feed.subscriber), .integer(item.sequence)]
                mark.reset()
                try mark.bind(key)
                _ = try mark.step()
                if connection.changes > 0 {
                    found.insert(item.sequence)
                    entries.append(item.entry)
                    continue
                }
                exists.reset()
                try exists.bind(key)
                if try exists.step() { found.insert(item.sequence) }
            }
            mark.reset()
            exists.reset()
            try Self.append(entries, to: feed, at: Date(), on: connection)
            return found
        }
    }

    @_spi(StratusEngine) public func compactNotifications(createdBefore cutoff: Date) throws -> Int {
        try writeTransaction { connection in try compactNotifications(createdBefore: cutoff, on: connection) }
    }

    /// Removes each feed's notifications from its start up to the first one made at or after
    /// `cutoff` (places follow commit order, times nearly so), and moves the feed's start.
    func compactNotifications(createdBefore cutoff: Date, on connection: SQLiteConnection) throws -> Int {
        var feeds: [(container: String, subscriber: String)] = []
        let list = try connection.statement("SELECT container, subscriber FROM notification_feeds")
        while try list.step() { feeds.append((list.text(0) ?? "", list.text(1) ?? "")) }
        list.reset()
        var removed = 0
        let boundary = try connection.statement("""
            SELECT seq FROM notifications WHERE container = ? AND subscriber = ? AND created_at >= ? ORDER BY seq LIMIT 1
            """)
        let newest = try connection.statement("SELECT max(seq) FROM notifications WHERE container = ? AND subscriber = ? AND seq < ?")
        let delete = try connection.statement("DELETE FROM notifications WHERE container = ? AND subscriber = ? AND seq <= ?")
        let advance = try connection.statement("UPDATE notification_feeds SET history_start = max(history_start, ?) WHERE container = ? AND subscriber = ?")
        for feed in feeds {
            let key: [SQLValue] = [.text(feed.container), .text(feed.subscriber)]
            boundary.reset()
            try boundary.bind(key + [.real(cutoff.timeIntervalSinceReferenceDate)])
            let firstKept = try boundary.step() ? boundary.int64(0) : Int64.max
            boundary.reset()
            newest.reset()
            try newest.bind(key + [.integer(firstKept)])
            guard try newest.step(), !newest.isNull(0) else { newest.reset(); continue }
            let last = newest.int64(0)
            newest.reset()
            delete.reset()
            try delete.bind(key + [.integer(last)])
            _ = try delete.step()
            removed += connection.changes
            delete.reset()
            advance.reset()
            try advance.bind([.integer(last)] + key)
            _ = try advance.step()
            advance.reset()
        }
        return removed
    }

    @_spi(StratusEngine) public func openNotificationWaiter(for feed: NotificationFeedID) throws -> any NotificationWaiter {
        try SQLiteNotificationWaiter(path: path)
    }
}
