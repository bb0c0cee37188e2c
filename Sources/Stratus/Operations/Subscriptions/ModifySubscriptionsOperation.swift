import Foundation

/// Saves and deletes subscriptions of the current user, like `CKModifySubscriptionsOperation`.
///
/// Each subscription gets its own result; the final result is `partialFailure` when some
/// failed. Saving a subscription ID the user has replaces that subscription. The rules are
/// CloudKit's: every subscription needs a ``Subscription/notificationInfo``; an ID is 1 to 255
/// bytes of UTF-8 without control characters; query and zone subscriptions are not allowed in
/// the shared database, database subscriptions only in the private and shared databases; a
/// query subscription fires on at least one of creation, update and deletion; a zone
/// subscription's zone must exist with the `fetchChanges` capability; a duplicate of another
/// subscription is `serverRejectedRequest`; a user keeps at most 1,000 subscriptions in a
/// database (`limitExceeded`); and deleting an unknown ID is `unknownItem`.
/// Subscriptions fire for writes that commit after the save.
///
/// ```swift
/// let op = ModifySubscriptionsOperation(subscriptionsToSave: [subscription], subscriptionIDsToDelete: ["old"])
/// op.perSubscriptionSaveBlock = { id, result in print(id, result) }
/// op.modifySubscriptionsResultBlock = { print("done:", $0) }
/// database.add(op)
/// ```
open class ModifySubscriptionsOperation: DatabaseOperation, @unchecked Sendable {
    /// The subscriptions to save; each gets a ``perSubscriptionSaveBlock`` call.
    public var subscriptionsToSave: [Subscription]?
    /// The IDs of the subscriptions to delete; each gets a ``perSubscriptionDeleteBlock`` call.
    public var subscriptionIDsToDelete: [Subscription.ID]?
    /// Each subscription to save, with the subscription as stored or its own error, as
    /// `CKModifySubscriptionsOperation.perSubscriptionSaveBlock`.
    ///
    /// ```swift
    /// op.perSubscriptionSaveBlock = { id, result in if case .failure(let error) = result { print(id, error) } }
    /// ```
    public var perSubscriptionSaveBlock: ((Subscription.ID, Result<Subscription, any Error>) -> Void)?
    /// Each subscription ID to delete, with success or its own error (`unknownItem` for an ID
    /// the user has no subscription with), as
    /// `CKModifySubscriptionsOperation.perSubscriptionDeleteBlock`.
    ///
    /// ```swift
    /// op.perSubscriptionDeleteBlock = { id, result in print(id, result) }
    /// ```
    public var perSubscriptionDeleteBlock: ((Subscription.ID, Result<Void, any Error>) -> Void)?
    /// Called once at the end, as `CKModifySubscriptionsOperation.modifySubscriptionsResultBlock`:
    /// success, `partialFailure` when some subscription failed (its
    /// ``StratusError/partialErrorsBySubscriptionID`` names each), or the error that failed
    /// the whole request.
    ///
    /// ```swift
    /// op.modifySubscriptionsResultBlock = { result in if case .failure(let error) = result { print(error) } }
    /// ```
    public var modifySubscriptionsResultBlock: ((Result<Void, any Error>) -> Void)?
    /// CloudKit's older final block: the subscriptions saved, the IDs deleted and the error
    /// (`partialFailure` when some failed); after ``modifySubscriptionsResultBlock``.
    public var modifySubscriptionsCompletionBlock: (([Subscription]?, [Subscription.ID]?, (any Error)?) -> Void)?

    private var saved: [Subscription] = []
    private var deleted: [Subscription.ID] = []

    /// An operation that saves `subscriptionsToSave` and deletes `subscriptionIDsToDelete`, as
    /// `CKModifySubscriptionsOperation(subscriptionsToSave:subscriptionIDsToDelete:)`.
    ///
    /// ```swift
    /// let op = ModifySubscriptionsOperation(subscriptionsToSave: nil, subscriptionIDsToDelete: ["orders"])
    /// ```
    public convenience init(subscriptionsToSave: [Subscription]? = nil, subscriptionIDsToDelete: [Subscription.ID]? = nil) {
        self.init()
        self.subscriptionsToSave = subscriptionsToSave
        self.subscriptionIDsToDelete = subscriptionIDsToDelete
    }

    /// An operation with nothing to do yet, as `CKModifySubscriptionsOperation()`: set
    /// ``subscriptionsToSave`` or ``subscriptionIDsToDelete`` before it runs.
    ///
    /// ```swift
    /// let op = ModifySubscriptionsOperation()
    /// op.subscriptionsToSave = [subscription]
    /// ```
    public override init() {
        subscriptionsToSave = nil
        subscriptionIDsToDelete = nil
        super.init()
    }

    override func execute(engine: any StorageEngine, context: DatabaseContext) throws -> StratusError? {
        try SubscriptionRules.checkSubscriber(context, doing: "saving or deleting subscriptions")
        let toSave = subscriptionsToSave ?? []
        let toDelete = subscriptionIDsToDelete ?? []
        var errors: [Subscription.ID: StratusError] = [:]
        func fail(save id: Subscription.ID, _ error: StratusError) {
            errors[id] = error
            perSubscriptionSaveBlock?(id, .failure(error))
        }
        func fail(delete id: Subscription.ID, _ error: StratusError) {
            errors[id] = error
            perSubscriptionDeleteBlock?(id, .failure(error))
        }

        let needsZones = toSave.contains { ($0 as? RecordZoneSubscription) != nil || ($0 as? QuerySubscription)?.zoneID != nil }
        // Query subscriptions read their type's schema: for `self CONTAINS` (its searchable
        // fields) and to refuse predicates on encrypted fields.
        let needsSchemas = toSave.contains { $0 is QuerySubscription }
        let zones = needsZones ? try withRetry { try engine.fetchZones(in: context) } : []
        let schemas = needsSchemas ? try withRetry { try engine.fetchSchema(storageContainer: context.storageContainer) }.recordTypes : []
        let existing = try withRetry { try engine.fetchSubscriptions(in: context, subscriber: context.subscriber) }.subscriptions
        let existingIDs = Set(existing.map(\.subscriptionID))

        var validDeletes: [Subscription.ID] = []
        for id in toDelete {
            do throws(StratusError) {
                try SubscriptionRules.checkID(id)
                guard existingIDs.contains(id) else {
                    throw StratusError(.unknownItem, "subscription '\(id)' does not exist in the \(context.scope.name) database")
                }
                guard !validDeletes.contains(id) else { throw StratusError(.invalidArguments, "subscription '\(id)' is deleted twice in one request") }
                validDeletes.append(id)
            } catch {
                fail(delete: id, error)
            }
        }

        // What the user will have: the kept subscriptions, then each valid save in turn.
        var identities: [SubscriptionDefinition: Subscription.ID] = [:]
        for stored in existing where !validDeletes.contains(stored.subscriptionID) {
            if let definition = try? SubscriptionDefinition.decode(stored.definition, id: stored.subscriptionID) {
                identities[definition.identity(in: context)] = stored.subscriptionID
            }
        }
        var count = existing.count - validDeletes.count
        var validSaves: [(Subscription, StoredSubscription)] = []
        for subscription in toSave {
            let id = subscription.subscriptionID
            do throws(StratusError) {
                guard !validSaves.contains(where: { $0.0.subscriptionID == id }) else {
                    throw StratusError(.invalidArguments, "subscription '\(id)' is saved twice in one request")
                }
                let stored = try SubscriptionRules.prepare(subscription, context: context, zones: zones, schemas: schemas)
                let identity = subscription.definition.identity(in: context)
                if let other = identities[identity], other != id { throw SubscriptionRules.duplicate(id, of: other) }
                let replaces = existingIDs.contains(id) && !validDeletes.contains(id)
                if !replaces && count >= SubscriptionRules.maximumSubscriptionsPerUser {
                    throw StratusError(.limitExceeded, "subscription '\(id)': a user keeps at most \(SubscriptionRules.maximumSubscriptionsPerUser) subscriptions in a database")
                }
                if !replaces { count += 1 }
                identities[identity] = id
                validSaves.append((subscription, stored))
            } catch {
                fail(save: id, error)
            }
        }
        if isCancelled { return StratusError.cancelled("ModifySubscriptionsOperation", completed: 0) }

        if !validSaves.isEmpty || !validDeletes.isEmpty {
            let removed = try withRetry {
                try engine.modifySubscriptions(saving: validSaves.map(\.1), deleting: validDeletes, in: context)
            }
            for (subscription, _) in validSaves {
                saved.append(subscription)
                perSubscriptionSaveBlock?(subscription.subscriptionID, .success(subscription))
            }
            for id in validDeletes {
                if removed.contains(id) {
                    deleted.append(id)
                    perSubscriptionDeleteBlock?(id, .success(()))
                } else {
                    // Deleted by another request in between (or a firesOnce subscription that fired).
                    fail(delete: id, StratusError(.unknownItem, "subscription '\(id)' does not exist in the \(context.scope.name) database"))
                }
            }
        }
        // Cancelled during a per-subscription block: what was written stays reported, never success.
        if isCancelled {
            var cancelled = StratusError.cancelled("ModifySubscriptionsOperation", completed: saved.count + deleted.count)
            cancelled.partialErrorsBySubscriptionID = errors
            return cancelled
        }
        guard !errors.isEmpty else { return nil }
        var error = StratusError(.partialFailure, "\(errors.count) of \(toSave.count + toDelete.count) subscription(s) failed")
        error.partialErrorsBySubscriptionID = errors
        return error
    }

    override func complete(with error: StratusError?) {
        modifySubscriptionsResultBlock?(error.map { .failure($0) } ?? .success(()))
        let wholeFailure = error.map { $0.code != .partialFailure } ?? false
        let nothing = saved.isEmpty && deleted.isEmpty
        modifySubscriptionsCompletionBlock?(wholeFailure && nothing ? nil : saved, wholeFailure && nothing ? nil : deleted, error)
    }
}
