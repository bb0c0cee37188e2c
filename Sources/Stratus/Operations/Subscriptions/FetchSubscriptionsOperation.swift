import Foundation

/// Fetches subscriptions of the current user, like `CKFetchSubscriptionsOperation`.
///
/// A missing ID fails alone with `unknownItem`, and the final result is then
/// `partialFailure`. ``fetchAllSubscriptionsOperation()`` fetches every subscription the user
/// has in the database, ordered by ID.
///
/// ```swift
/// let op = FetchSubscriptionsOperation.fetchAllSubscriptionsOperation()
/// op.perSubscriptionResultBlock = { id, result in print(id, result) }
/// op.fetchSubscriptionsResultBlock = { print("done:", $0) }
/// database.add(op)
/// ```
open class FetchSubscriptionsOperation: DatabaseOperation, @unchecked Sendable {
    /// The IDs to fetch; `nil` fetches every subscription.
    public var subscriptionIDs: [Subscription.ID]?
    /// Each subscription, with the subscription or its own error (`unknownItem` for an ID the
    /// user has no subscription with), as `CKFetchSubscriptionsOperation.perSubscriptionResultBlock`.
    ///
    /// ```swift
    /// op.perSubscriptionResultBlock = { id, result in if let subscription = try? result.get() { print(id, subscription.subscriptionType) } }
    /// ```
    public var perSubscriptionResultBlock: ((Subscription.ID, Result<Subscription, any Error>) -> Void)?
    /// Called once at the end, as `CKFetchSubscriptionsOperation.fetchSubscriptionsResultBlock`:
    /// success, `partialFailure` when some ID is missing, or the error that failed the whole
    /// request.
    ///
    /// ```swift
    /// op.fetchSubscriptionsResultBlock = { result in if case .failure(let error) = result { print(error) } }
    /// ```
    public var fetchSubscriptionsResultBlock: ((Result<Void, any Error>) -> Void)?
    /// CloudKit's older final block: the subscriptions found by ID, and the error
    /// (`partialFailure` when some ID is missing); after ``fetchSubscriptionsResultBlock``.
    public var fetchSubscriptionCompletionBlock: (([Subscription.ID: Subscription]?, (any Error)?) -> Void)?

    private var found: [Subscription.ID: Subscription] = [:]

    /// An operation that fetches the current user's subscriptions with `subscriptionIDs`, as
    /// `CKFetchSubscriptionsOperation(subscriptionIDs:)`.
    ///
    /// ```swift
    /// let op = FetchSubscriptionsOperation(subscriptionIDs: ["orders"])
    /// ```
    public convenience init(subscriptionIDs: [Subscription.ID]) {
        self.init()
        self.subscriptionIDs = subscriptionIDs
    }

    /// An operation that fetches every subscription of the user in the database
    /// (``subscriptionIDs`` is `nil`), as ``fetchAllSubscriptionsOperation()``.
    ///
    /// ```swift
    /// let op = FetchSubscriptionsOperation()
    /// ```
    public override init() {
        self.subscriptionIDs = nil
        super.init()
    }

    /// An operation that fetches every subscription of the user in the database.
    ///
    /// ```swift
    /// database.add(FetchSubscriptionsOperation.fetchAllSubscriptionsOperation())
    /// ```
    public static func fetchAllSubscriptionsOperation() -> FetchSubscriptionsOperation { FetchSubscriptionsOperation() }

    override func execute(engine: any StorageEngine, context: DatabaseContext) throws -> StratusError? {
        try SubscriptionRules.checkSubscriber(context, doing: "fetching subscriptions")
        let stored = try withRetry { try engine.fetchSubscriptions(in: context, subscriber: context.subscriber) }.subscriptions
        var byID: [Subscription.ID: StoredSubscription] = [:]
        for subscription in stored { byID[subscription.subscriptionID] = subscription }
        let wanted = subscriptionIDs ?? byID.keys.sorted()
        var errors: [Subscription.ID: StratusError] = [:]
        for id in wanted {
            if isCancelled { return StratusError.cancelled("FetchSubscriptionsOperation", completed: found.count) }
            guard let subscription = byID[id] else {
                let error = StratusError(.unknownItem, "subscription '\(id)' does not exist in the \(context.scope.name) database")
                errors[id] = error
                perSubscriptionResultBlock?(id, .failure(error))
                continue
            }
            let made = try SubscriptionDefinition.decode(subscription.definition, id: id).subscription(id: id)
            found[id] = made
            perSubscriptionResultBlock?(id, .success(made))
        }
        // Cancelled during the last item's block: never success.
        if isCancelled {
            var cancelled = StratusError.cancelled("FetchSubscriptionsOperation", completed: found.count)
            cancelled.partialErrorsBySubscriptionID = errors
            return cancelled
        }
        guard !errors.isEmpty else { return nil }
        var error = StratusError(.partialFailure, "\(errors.count) of \(wanted.count) subscription(s) failed")
        error.partialErrorsBySubscriptionID = errors
        return error
    }

    override func complete(with error: StratusError?) {
        fetchSubscriptionsResultBlock?(error.map { .failure($0) } ?? .success(()))
        let wholeFailure = error.map { $0.code != .partialFailure } ?? false
        fetchSubscriptionCompletionBlock?(wholeFailure ? nil : found, error)
    }
}
