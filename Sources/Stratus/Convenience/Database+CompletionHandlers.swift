import Foundation

/// The completion-handler forms CloudKit tutorials use. Handlers run on an operation thread.
extension Database {
    /// Saves a record, then calls `completionHandler` with the stored record or the error.
    ///
    /// ```swift
    /// database.save(todo) { saved, error in print(saved?.recordChangeTag ?? "\(error!)") }
    /// ```
    @preconcurrency public func save(_ record: Record, completionHandler: @escaping @Sendable (Record?, (any Error)?) -> Void) {
        let op = ModifyRecordsOperation(recordsToSave: [record])
        let saved = Collector<Result<Record, any Error>>()
        op.perRecordSaveBlock = { _, result in saved.append(result) }
        op.modifyRecordsResultBlock = { result in
            Database.answer(item: saved.items.first, final: result, completionHandler)
        }
        add(op)
    }

    /// Fetches a record, then calls `completionHandler` with it or the error (`unknownItem`).
    ///
    /// ```swift
    /// database.fetch(withRecordID: id) { record, error in … }
    /// ```
    @preconcurrency public func fetch(withRecordID recordID: Record.ID, completionHandler: @escaping @Sendable (Record?, (any Error)?) -> Void) {
        let op = FetchRecordsOperation(recordIDs: [recordID])
        let fetched = Collector<Result<Record, any Error>>()
        op.perRecordResultBlock = { _, result in fetched.append(result) }
        op.fetchRecordsResultBlock = { result in
            Database.answer(item: fetched.items.first, final: result, completionHandler)
        }
        add(op)
    }

    /// Deletes a record, then calls `completionHandler` with its ID or the error.
    ///
    /// ```swift
    /// database.delete(withRecordID: id) { deletedID, error in … }
    /// ```
    @preconcurrency public func delete(withRecordID recordID: Record.ID, completionHandler: @escaping @Sendable (Record.ID?, (any Error)?) -> Void) {
        let op = ModifyRecordsOperation(recordIDsToDelete: [recordID])
        let deleted = Collector<Result<Void, any Error>>()
        op.perRecordDeleteBlock = { _, result in deleted.append(result) }
        op.modifyRecordsResultBlock = { result in
            Database.answer(item: deleted.items.first.map { $0.map { recordID } }, final: result, completionHandler)
        }
        add(op)
    }

    /// Runs a query and calls `completionHandler` with the first page of matches (up to
    /// ``QueryOperation/defaultResultsLimit``), as `CKDatabase.perform` does; use
    /// ``QueryOperation`` or ``allRecords(matching:inZoneWith:desiredKeys:pageSize:)`` for more.
    ///
    /// ```swift
    /// database.perform(Query(recordType: "Todo"), inZoneWith: nil) { records, error in … }
    /// ```
    @preconcurrency public func perform(_ query: Query, inZoneWith zoneID: RecordZone.ID?, completionHandler: @escaping @Sendable ([Record]?, (any Error)?) -> Void) {
        let op = QueryOperation(query: query)
        op.zoneID = zoneID
        let matched = Collector<Record>()
        op.recordMatchedBlock = { _, result in if case .success(let record) = result { matched.append(record) } }
        op.queryResultBlock = { result in
            switch result {
            case .success: completionHandler(matched.items, nil)
            case .failure(let error): completionHandler(nil, error)
            }
        }
        add(op)
    }

    /// Answers a one-item request: the item's own result if it was reported, else the
    /// operation's final error.
    static func answer<Value>(item: Result<Value, any Error>?, final: Result<Void, any Error>,
                                      _ completionHandler: (Value?, (any Error)?) -> Void) {
        switch (item, final) {
        case (.success(let value)?, _): completionHandler(value, nil)
        case (.failure(let error)?, _), (nil, .failure(let error)): completionHandler(nil, error)
        case (nil, .success): completionHandler(nil, StratusError(.internalError, "the operation reported no result for the item"))
        }
    }
}
