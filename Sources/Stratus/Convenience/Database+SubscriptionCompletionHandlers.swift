import Foundation

/// The completion-handler subscription calls of `CKDatabase`. Handlers run on an operation thread.
extension Database {
    /// Saves a subscription, then calls `completionHandler` with it as saved or the error.
    ///
    /// ```swift
    /// database.save(subscription) { saved, error in … }
    /// ```
    @preconcurrency public func save(_ subscription: Subscription, completionHandler: @escaping @Sendable (Subscription?, (any Error)?) -> Void) {
        let op = ModifySubscriptionsOperation(subscriptionsToSave: [subscription])
        let saved = Collector<Result<Subscription, any Error>>()
        op.perSubscriptionSaveBlock = { _, result in saved.append(result) }
        op.modifySubscriptionsResultBlock = { result in Database.answerSubscription(item: saved.items.first, final: result, completionHandler) }
        add(op)
    }

    /// Fetches one subscription, then calls `completionHandler` with it or the error (`unknownItem`).
    ///
    /// ```swift
    /// database.fetch(withSubscriptionID: "orders") { subscription, error in … }
    /// ```
    @preconcurrency public func fetch(withSubscriptionID subscriptionID: Subscription.ID, completionHandler: @escaping @Sendable (Subscription?, (any Error)?) -> Void) {
        let op = FetchSubscriptionsOperation(subscriptionIDs: [subscriptionID])
        let fetched = Collector<Result<Subscription, any Error>>()
        op.perSubscriptionResultBlock = { _, result in fetched.append(result) }
        op.fetchSubscriptionsResultBlock = { result in Database.answerSubscription(item: fetched.items.first, final: result, completionHandler) }
        add(op)
    }

    /// Fetches every subscription of the user here, then calls `completionHandler` with them or the error.
    ///
    /// ```swift
    /// database.fetchAllSubscriptions { subscriptions, error in print(subscriptions?.count ?? 0) }
    /// ```
    @preconcurrency public func fetchAllSubscriptions(completionHandler: @escaping @Sendable ([Subscription]?, (any Error)?) -> Void) {
        let op = FetchSubscriptionsOperation.fetchAllSubscriptionsOperation()
        let found = Collector<Subscription>()
        op.perSubscriptionResultBlock = { _, result in if case .success(let subscription) = result { found.append(subscription) } }
        op.fetchSubscriptionsResultBlock = { result in
            switch result {
            case .success: completionHandler(found.items, nil)
            case .failure(let error): completionHandler(nil, error)
            }
        }
        add(op)
    }

    /// Deletes a subscription, then calls `completionHandler` with its ID or the error (`unknownItem`).
    ///
    /// ```swift
    /// database.delete(withSubscriptionID: "orders") { deletedID, error in … }
    /// ```
    @preconcurrency public func delete(withSubscriptionID subscriptionID: Subscription.ID, completionHandler: @escaping @Sendable (Subscription.ID?, (any Error)?) -> Void) {
        let op = ModifySubscriptionsOperation(subscriptionIDsToDelete: [subscriptionID])
        let deleted = Collector<Result<Void, any Error>>()
        op.perSubscriptionDeleteBlock = { _, result in deleted.append(result) }
        op.modifySubscriptionsResultBlock = { result in
            Database.answerSubscription(item: deleted.items.first.map { $0.map { subscriptionID } }, final: result, completionHandler)
        }
        add(op)
    }

    /// Answers a one-subscription request: its own result if it was reported, else the
    /// operation's final error.
    private static func answerSubscription<Value>(item: Result<Value, any Error>?, final: Result<Void, any Error>,
                                                  _ completionHandler: (Value?, (any Error)?) -> Void) {
        switch (item, final) {
        case (.success(let value)?, _): completionHandler(value, nil)
        case (.failure(let error)?, _), (nil, .failure(let error)): completionHandler(nil, error)
        case (nil, .success): completionHandler(nil, StratusError(.internalError, "the operation reported no result for the subscription"))
        }
    }
}
