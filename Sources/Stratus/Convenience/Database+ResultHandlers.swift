import Foundation

/// The completion-handler forms of `CKDatabase` that answer a `Result` (CloudKit's iOS 15
/// calls). Each runs the `async` call of the same shape; handlers run on a background thread.
extension Database {
    /// Fetches records by ID; each ID gets its own result.
    ///
    /// ```swift
    /// database.fetch(withRecordIDs: ids) { result in if case .success(let byID) = result { … } }
    /// ```
    @preconcurrency public func fetch(
        withRecordIDs recordIDs: [Record.ID], desiredKeys: [Record.FieldKey]? = nil,
        completionHandler: @escaping @Sendable (Result<[Record.ID: Result<Record, any Error>], any Error>) -> Void
    ) {
        answer(completionHandler) { try await self.records(for: recordIDs, desiredKeys: desiredKeys) }
    }

    /// Runs a query and answers one page of matches and a cursor when more remain.
    ///
    /// ```swift
    /// database.fetch(withQuery: query) { result in if case .success(let page) = result { show(page.matchResults) } }
    /// ```
    @preconcurrency public func fetch(
        withQuery query: Query, inZoneWith zoneID: RecordZone.ID? = nil, desiredKeys: [Record.FieldKey]? = nil,
        resultsLimit: Int = QueryOperation.maximumResults,
        completionHandler: @escaping @Sendable (Result<(matchResults: [(Record.ID, Result<Record, any Error>)], queryCursor: QueryOperation.Cursor?), any Error>) -> Void
    ) {
        answer(completionHandler) { try await self.records(matching: query, inZoneWith: zoneID, desiredKeys: desiredKeys, resultsLimit: resultsLimit) }
    }

    /// Continues a query from a cursor.
    ///
    /// ```swift
    /// database.fetch(withCursor: cursor) { result in … }
    /// ```
    @preconcurrency public func fetch(
        withCursor cursor: QueryOperation.Cursor, desiredKeys: [Record.FieldKey]? = nil,
        resultsLimit: Int = QueryOperation.maximumResults,
        completionHandler: @escaping @Sendable (Result<(matchResults: [(Record.ID, Result<Record, any Error>)], queryCursor: QueryOperation.Cursor?), any Error>) -> Void
    ) {
        answer(completionHandler) { try await self.records(continuingMatchFrom: cursor, desiredKeys: desiredKeys, resultsLimit: resultsLimit) }
    }

    /// Saves and deletes records in one request; each item gets its own result.
    ///
    /// ```swift
    /// database.modifyRecords(saving: [todo], deleting: []) { result in … }
    /// ```
    @preconcurrency public func modifyRecords(
        saving recordsToSave: [Record], deleting recordIDsToDelete: [Record.ID],
        savePolicy: ModifyRecordsOperation.SavePolicy = .ifServerRecordUnchanged, atomically: Bool = true,
        completionHandler: @escaping @Sendable (Result<(saveResults: [Record.ID: Result<Record, any Error>], deleteResults: [Record.ID: Result<Void, any Error>]), any Error>) -> Void
    ) {
        answer(completionHandler) {
            try await self.modifyRecords(saving: recordsToSave, deleting: recordIDsToDelete, savePolicy: savePolicy, atomically: atomically)
        }
    }

    /// Fetches zones; each ID gets its own result (`zoneNotFound` when the zone does not exist).
    ///
    /// ```swift
    /// database.fetch(withRecordZoneIDs: [photosID]) { result in if case .success(let byID) = result { … } }
    /// ```
    @preconcurrency public func fetch(
        withRecordZoneIDs zoneIDs: [RecordZone.ID],
        completionHandler: @escaping @Sendable (Result<[RecordZone.ID: Result<RecordZone, any Error>], any Error>) -> Void
    ) {
        answer(completionHandler) { try await self.recordZones(for: zoneIDs) }
    }

    /// Creates and deletes zones in one request; each zone gets its own result.
    ///
    /// ```swift
    /// database.modifyRecordZones(saving: [RecordZone(zoneName: "Photos")], deleting: []) { result in … }
    /// ```
    @preconcurrency public func modifyRecordZones(
        saving recordZonesToSave: [RecordZone], deleting recordZoneIDsToDelete: [RecordZone.ID],
        completionHandler: @escaping @Sendable (Result<(saveResults: [RecordZone.ID: Result<RecordZone, any Error>], deleteResults: [RecordZone.ID: Result<Void, any Error>]), any Error>) -> Void
    ) {
        answer(completionHandler) { try await self.modifyRecordZones(saving: recordZonesToSave, deleting: recordZoneIDsToDelete) }
    }

    /// Fetches subscriptions of the current user; each ID gets its own result (`unknownItem`
    /// when missing).
    ///
    /// ```swift
    /// database.fetch(withSubscriptionIDs: ["orders"]) { result in if case .success(let byID) = result { … } }
    /// ```
    @preconcurrency public func fetch(
        withSubscriptionIDs subscriptionIDs: [Subscription.ID],
        completionHandler: @escaping @Sendable (Result<[Subscription.ID: Result<Subscription, any Error>], any Error>) -> Void
    ) {
        answer(completionHandler) { try await self.subscriptions(for: subscriptionIDs) }
    }

    /// Saves and deletes subscriptions in one request; each gets its own result.
    ///
    /// ```swift
    /// database.modifySubscriptions(saving: [subscription], deleting: ["old"]) { result in … }
    /// ```
    @preconcurrency public func modifySubscriptions(
        saving subscriptionsToSave: [Subscription], deleting subscriptionIDsToDelete: [Subscription.ID],
        completionHandler: @escaping @Sendable (Result<(saveResults: [Subscription.ID: Result<Subscription, any Error>], deleteResults: [Subscription.ID: Result<Void, any Error>]), any Error>) -> Void
    ) {
        answer(completionHandler) { try await self.modifySubscriptions(saving: subscriptionsToSave, deleting: subscriptionIDsToDelete) }
    }

    /// One batch of a zone's changes since a token (see
    /// ``recordZoneChanges(inZoneWith:since:desiredKeys:resultsLimit:)``).
    ///
    /// ```swift
    /// database.fetchRecordZoneChanges(inZoneWith: photosID, since: token) { result in … }
    /// ```
    @preconcurrency public func fetchRecordZoneChanges(
        inZoneWith zoneID: RecordZone.ID, since changeToken: ServerChangeToken?, desiredKeys: [Record.FieldKey]? = nil, resultsLimit: Int? = nil,
        completionHandler: @escaping @Sendable (Result<(modificationResultsByID: [Record.ID: Result<RecordZoneChange.Modification, any Error>], deletions: [RecordZoneChange.Deletion], changeToken: ServerChangeToken, moreComing: Bool), any Error>) -> Void
    ) {
        answer(completionHandler) {
            try await self.recordZoneChanges(inZoneWith: zoneID, since: changeToken, desiredKeys: desiredKeys, resultsLimit: resultsLimit)
        }
    }

    /// One batch of the database's zone changes since a token (see
    /// ``databaseChanges(since:resultsLimit:)``).
    ///
    /// ```swift
    /// database.fetchDatabaseChanges(since: token) { result in … }
    /// ```
    @preconcurrency public func fetchDatabaseChanges(
        since changeToken: ServerChangeToken?, resultsLimit: Int? = nil,
        completionHandler: @escaping @Sendable (Result<(modifications: [DatabaseChange.Modification], deletions: [DatabaseChange.Deletion], changeToken: ServerChangeToken, moreComing: Bool), any Error>) -> Void
    ) {
        answer(completionHandler) { try await self.databaseChanges(since: changeToken, resultsLimit: resultsLimit) }
    }

    /// Runs `body` in a task and hands its outcome to `completionHandler`.
    private func answer<Value>(
        _ completionHandler: @escaping @Sendable (Result<Value, any Error>) -> Void,
        _ body: @escaping @Sendable () async throws -> Value
    ) {
        Task {
            do {
                completionHandler(.success(try await body()))
            } catch {
                completionHandler(.failure(error))
            }
        }
    }
}
