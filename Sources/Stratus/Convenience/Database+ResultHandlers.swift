import Foundation

/// The completion-handler forms of `CKDatabase` that answer a `Result` (CloudKit's iOS 15
/// calls). Each runs the `async` call of the same shape; handlers run on a background thread.
extension Database {
    /// Fetches records by ID; each ID gets its own result.
    ///
    /// ```swift
    /// database.fetch(withRecordIDs: ids) { result in if case .success(let byID) = result { … } }
    /// ```
    public func fetch(
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
    public func fetch(
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
    public func fetch(
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
    public func modifyRecords(
        saving recordsToSave: [Record], deleting recordIDsToDelete: [Record.ID],
        savePolicy: ModifyRecordsOperation.SavePolicy = .ifServerRecordUnchanged, atomically: Bool = true,
        completionHandler: @escaping @Sendable (Result<(saveResults: [Record.ID: Result<Record, any Error>], deleteResults: [Record.ID: Result<Void, any Error>]), any Error>) -> Void
    ) {
        answer(completionHandler) {
            try await self.modifyRecords(saving: recordsToSave, deleting: recordIDsToDelete, savePolicy: savePolicy, atomically: atomically)
        }
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
