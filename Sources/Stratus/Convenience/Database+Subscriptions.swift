import Foundation

extension Database {
    /// Saves a subscription of the current user (replacing one with the same ID) and returns it.
    ///
    /// ```swift
    /// let subscription = QuerySubscription(recordType: "Order", predicate: QueryPredicate(value: true), subscriptionID: "orders")
    /// subscription.notificationInfo = NotificationInfo(desiredKeys: ["total"])
    /// try await database.save(subscription)
    /// ```
    ///
    /// - Throws: the subscription's own error (the rules are ``ModifySubscriptionsOperation``'s):
    ///   `invalidArguments`, `zoneNotFound`, `serverRejectedRequest` for a duplicate,
    ///   `limitExceeded`.
    @discardableResult
    public func save(_ subscription: Subscription) async throws -> Subscription {
        let results = try await modifySubscriptions(saving: [subscription], deleting: [])
        guard let result = results.saveResults[subscription.subscriptionID] else {
            throw StratusError(.internalError, "no result for subscription '\(subscription.subscriptionID)'")
        }
        return try result.get()
    }

    /// Fetches one subscription of the current user.
    ///
    /// ```swift
    /// let orders = try await database.subscription(for: "orders")
    /// ```
    ///
    /// - Throws: `unknownItem` when the user has no subscription with that ID here.
    public func subscription(for subscriptionID: Subscription.ID) async throws -> Subscription {
        let results = try await subscriptions(for: [subscriptionID])
        guard let result = results[subscriptionID] else {
            throw StratusError(.internalError, "no result for subscription '\(subscriptionID)'")
        }
        return try result.get()
    }

    /// Fetches subscriptions of the current user; each ID gets its own result (`unknownItem`
    /// when missing).
    ///
    /// ```swift
    /// let found = try await database.subscriptions(for: ["orders", "refunds"])
    /// ```
    ///
    /// - Throws: only errors of the request as a whole.
    public func subscriptions(for ids: [Subscription.ID]) async throws -> [Subscription.ID: Result<Subscription, any Error>] {
        let results = Collector<(Subscription.ID, Result<Subscription, any Error>)>()
        try await run { finish in
            let op = FetchSubscriptionsOperation(subscriptionIDs: ids)
            op.perSubscriptionResultBlock = { results.append(($0, $1)) }
            op.fetchSubscriptionsResultBlock = { finish(Database.ignoringPartialFailure($0)) }
            return op
        }
        return Dictionary(results.items, uniquingKeysWith: { first, _ in first })
    }

    /// Every subscription the current user has in this database, ordered by ID.
    ///
    /// ```swift
    /// for subscription in try await database.allSubscriptions() { print(subscription.subscriptionID) }
    /// ```
    ///
    /// - Throws: a store error.
    public func allSubscriptions() async throws -> [Subscription] {
        let found = Collector<Subscription>()
        try await run { finish in
            let op = FetchSubscriptionsOperation.fetchAllSubscriptionsOperation()
            op.perSubscriptionResultBlock = { _, result in if case .success(let subscription) = result { found.append(subscription) } }
            op.fetchSubscriptionsResultBlock = { finish($0) }
            return op
        }
        return found.items
    }

    /// Deletes a subscription of the current user and returns its ID.
    ///
    /// ```swift
    /// try await database.deleteSubscription(withID: "orders")
    /// ```
    ///
    /// - Throws: `unknownItem` when the user has no subscription with that ID here.
    @discardableResult
    public func deleteSubscription(withID subscriptionID: Subscription.ID) async throws -> Subscription.ID {
        let results = try await modifySubscriptions(saving: [], deleting: [subscriptionID])
        try results.deleteResults[subscriptionID]?.get()
        return subscriptionID
    }

    /// Saves and deletes subscriptions in one request; each gets its own result. Either list may
    /// be left out, as in CloudKit (`modifySubscriptions(saving: [subscription])`).
    ///
    /// ```swift
    /// let (saved, deleted) = try await database.modifySubscriptions(saving: [new], deleting: ["old"])
    /// ```
    ///
    /// - Throws: only errors of the request as a whole; subscription errors are in the results.
    public func modifySubscriptions(
        saving subscriptionsToSave: [Subscription] = [], deleting subscriptionIDsToDelete: [Subscription.ID] = []
    ) async throws -> (saveResults: [Subscription.ID: Result<Subscription, any Error>], deleteResults: [Subscription.ID: Result<Void, any Error>]) {
        let saves = Collector<(Subscription.ID, Result<Subscription, any Error>)>()
        let deletes = Collector<(Subscription.ID, Result<Void, any Error>)>()
        try await run { finish in
            let op = ModifySubscriptionsOperation(subscriptionsToSave: subscriptionsToSave, subscriptionIDsToDelete: subscriptionIDsToDelete)
            op.perSubscriptionSaveBlock = { saves.append(($0, $1)) }
            op.perSubscriptionDeleteBlock = { deletes.append(($0, $1)) }
            op.modifySubscriptionsResultBlock = { finish(Database.ignoringPartialFailure($0)) }
            return op
        }
        return (Dictionary(saves.items, uniquingKeysWith: { a, _ in a }), Dictionary(deletes.items, uniquingKeysWith: { a, _ in a }))
    }
}
