import Foundation
@_spi(StratusEngine) import Stratus

/// Subscriptions and notifications inside a write transaction (read committed): the version
/// and subscriptions read are the latest committed; a feed's row is locked from the places a
/// transaction takes until it commits.
extension PostgresWriteTransaction {
    func subscriptionVersion() throws -> Int64? {
        try PostgresEngine.subscriptionVersion(of: context, on: connection)
    }

    func fetchSubscriptions() throws -> SubscriptionSet {
        try PostgresEngine.subscriptions(of: context, subscriber: nil, on: connection)
    }

    func subscriptionVersion(of database: DatabaseContext) throws -> Int64? {
        try PostgresEngine.subscriptionVersion(of: database, on: connection)
    }

    func fetchSubscriptions(of database: DatabaseContext) throws -> SubscriptionSet {
        try PostgresEngine.subscriptions(of: database, subscriber: nil, on: connection)
    }

    func deleteSubscriptions(_ keys: [SubscriptionKey]) throws -> Set<SubscriptionKey> {
        var deleted: Set<SubscriptionKey> = []
        for key in keys.sorted(by: { ($0.subscriber, $0.subscriptionID) < ($1.subscriber, $1.subscriptionID) })
        where try PostgresEngine.deleteSubscription(key, of: context, on: connection) {
            deleted.insert(key)
        }
        if !deleted.isEmpty { try PostgresEngine.moveSubscriptionVersion(of: context, on: connection) }
        return deleted
    }

    func appendNotifications(_ rows: [NotificationRow]) throws {
        guard !rows.isEmpty else { return }
        try engine.append(rows.map { ($0.subscriber, $0.payload) }, container: context.storageContainer, at: now, on: connection)
    }
}
