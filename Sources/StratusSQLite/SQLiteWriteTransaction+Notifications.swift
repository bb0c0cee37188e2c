import Foundation
@_spi(StratusEngine) import Stratus

/// Subscriptions and notifications inside a write transaction: the writer holds the store's
/// write lock, so what it reads is current and the feed places it takes follow commit order.
extension SQLiteWriteTransaction {
    func subscriptionVersion() throws -> Int64? {
        try SQLiteEngine.subscriptionVersion(of: context, on: connection)
    }

    func fetchSubscriptions() throws -> SubscriptionSet {
        try SQLiteEngine.subscriptions(of: context, subscriber: nil, on: connection)
    }

    func subscriptionVersion(of database: DatabaseContext) throws -> Int64? {
        try SQLiteEngine.subscriptionVersion(of: database, on: connection)
    }

    func fetchSubscriptions(of database: DatabaseContext) throws -> SubscriptionSet {
        try SQLiteEngine.subscriptions(of: database, subscriber: nil, on: connection)
    }

    func deleteSubscriptions(_ keys: [SubscriptionKey]) throws -> Set<SubscriptionKey> {
        var deleted: Set<SubscriptionKey> = []
        for key in keys where try SQLiteEngine.deleteSubscription(key, of: context, on: connection) { deleted.insert(key) }
        if !deleted.isEmpty { try SQLiteEngine.moveSubscriptionVersion(of: context, on: connection) }
        return deleted
    }

    func appendNotifications(_ rows: [NotificationRow]) throws {
        // Each feed's entries keep their order; feeds are filled one after another.
        var order: [String] = []
        var bySubscriber: [String: [[UInt8]]] = [:]
        for row in rows {
            if bySubscriber[row.subscriber] == nil { order.append(row.subscriber) }
            bySubscriber[row.subscriber, default: []].append(row.payload)
        }
        for subscriber in order {
            let feed = NotificationFeedID(containerIdentifier: context.storageContainer, subscriber: subscriber)
            try SQLiteEngine.append(bySubscriber[subscriber]!, to: feed, at: now, on: connection)
        }
    }
}
