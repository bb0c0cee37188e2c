import Foundation

/// The completion-handler zone calls of `CKDatabase`. Handlers run on an operation thread.
extension Database {
    /// Creates a zone (saving one that exists changes nothing), then calls `completionHandler`
    /// with the zone as stored or the error.
    ///
    /// ```swift
    /// database.save(RecordZone(zoneName: "Photos")) { zone, error in … }
    /// ```
    @preconcurrency public func save(_ zone: RecordZone, completionHandler: @escaping @Sendable (RecordZone?, (any Error)?) -> Void) {
        let op = ModifyRecordZonesOperation(recordZonesToSave: [zone])
        let saved = Collector<Result<RecordZone, any Error>>()
        op.perRecordZoneSaveBlock = { _, result in saved.append(result) }
        op.modifyRecordZonesResultBlock = { result in Database.answerZone(item: saved.items.first, final: result, completionHandler) }
        add(op)
    }

    /// Fetches one zone, then calls `completionHandler` with it or the error (`zoneNotFound`).
    ///
    /// ```swift
    /// database.fetch(withRecordZoneID: zoneID) { zone, error in … }
    /// ```
    @preconcurrency public func fetch(withRecordZoneID zoneID: RecordZone.ID, completionHandler: @escaping @Sendable (RecordZone?, (any Error)?) -> Void) {
        let op = FetchRecordZonesOperation(recordZoneIDs: [zoneID])
        let fetched = Collector<Result<RecordZone, any Error>>()
        op.perRecordZoneResultBlock = { _, result in fetched.append(result) }
        op.fetchRecordZonesResultBlock = { result in Database.answerZone(item: fetched.items.first, final: result, completionHandler) }
        add(op)
    }

    /// Fetches every zone of the database, then calls `completionHandler` with them or the error.
    ///
    /// ```swift
    /// database.fetchAllRecordZones { zones, error in print(zones?.map(\.zoneID.zoneName) ?? []) }
    /// ```
    @preconcurrency public func fetchAllRecordZones(completionHandler: @escaping @Sendable ([RecordZone]?, (any Error)?) -> Void) {
        let op = FetchRecordZonesOperation.fetchAllRecordZonesOperation()
        let zones = Collector<RecordZone>()
        op.perRecordZoneResultBlock = { _, result in if case .success(let zone) = result { zones.append(zone) } }
        op.fetchRecordZonesResultBlock = { result in
            switch result {
            case .success: completionHandler(zones.items, nil)
            case .failure(let error): completionHandler(nil, error)
            }
        }
        add(op)
    }

    /// Deletes a zone and its records, then calls `completionHandler` with its ID or the error.
    ///
    /// ```swift
    /// database.delete(withRecordZoneID: zoneID) { deletedID, error in … }
    /// ```
    @preconcurrency public func delete(withRecordZoneID zoneID: RecordZone.ID, completionHandler: @escaping @Sendable (RecordZone.ID?, (any Error)?) -> Void) {
        let op = ModifyRecordZonesOperation(recordZoneIDsToDelete: [zoneID])
        let deleted = Collector<Result<Void, any Error>>()
        op.perRecordZoneDeleteBlock = { _, result in deleted.append(result) }
        op.modifyRecordZonesResultBlock = { result in
            Database.answerZone(item: deleted.items.first.map { $0.map { zoneID } }, final: result, completionHandler)
        }
        add(op)
    }

    /// Answers a one-zone request: the zone's own result if it was reported, else the
    /// operation's final error.
    private static func answerZone<Value>(item: Result<Value, any Error>?, final: Result<Void, any Error>,
                                          _ completionHandler: (Value?, (any Error)?) -> Void) {
        switch (item, final) {
        case (.success(let value)?, _): completionHandler(value, nil)
        case (.failure(let error)?, _), (nil, .failure(let error)): completionHandler(nil, error)
        case (nil, .success): completionHandler(nil, StratusError(.internalError, "the operation reported no result for the zone"))
        }
    }
}
