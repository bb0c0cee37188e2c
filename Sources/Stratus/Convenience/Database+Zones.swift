import Foundation

extension Database {
    /// Every zone of the database, the default zone included, with its capabilities.
    ///
    /// ```swift
    /// for zone in try await database.allRecordZones() { print(zone.zoneID.zoneName) }
    /// ```
    ///
    /// - Throws: a store error (`zoneBusy` after retries, `badDatabase`, …).
    public func allRecordZones() async throws -> [RecordZone] {
        let zones = Collector<RecordZone>()
        try await run { finish in
            let op = FetchRecordZonesOperation.fetchAllRecordZonesOperation()
            op.perRecordZoneResultBlock = { _, result in if case .success(let zone) = result { zones.append(zone) } }
            op.fetchRecordZonesResultBlock = { finish($0) }
            return op
        }
        return zones.items
    }

    /// Fetches one zone.
    ///
    /// ```swift
    /// let photos = try await database.recordZone(for: RecordZone.ID(zoneName: "Photos"))
    /// ```
    ///
    /// - Throws: `zoneNotFound` when the zone does not exist.
    public func recordZone(for zoneID: RecordZone.ID) async throws -> RecordZone {
        let result = Collector<Result<RecordZone, any Error>>()
        try await run { finish in
            let op = FetchRecordZonesOperation(recordZoneIDs: [zoneID])
            op.perRecordZoneResultBlock = { _, r in result.append(r) }
            op.fetchRecordZonesResultBlock = { finish(Database.ignoringPartialFailure($0)) }
            return op
        }
        guard let item = result.items.first else {
            throw StratusError(.internalError, "no result for zone '\(zoneID.zoneName)'", zoneID: zoneID)
        }
        return try item.get()
    }

    /// Fetches zones; each ID gets its own result (`zoneNotFound` when the zone does not exist),
    /// as `CKDatabase.recordZones(for:)`.
    ///
    /// ```swift
    /// let found = try await database.recordZones(for: [photosID, notesID])
    /// let photos = try found[photosID]?.get()
    /// ```
    ///
    /// - Throws: only errors of the request as a whole; zone errors are in the results.
    public func recordZones(for ids: [RecordZone.ID]) async throws -> [RecordZone.ID: Result<RecordZone, any Error>] {
        let results = Collector<(RecordZone.ID, Result<RecordZone, any Error>)>()
        try await run { finish in
            let op = FetchRecordZonesOperation(recordZoneIDs: ids)
            op.perRecordZoneResultBlock = { results.append(($0, $1)) }
            op.fetchRecordZonesResultBlock = { finish(Database.ignoringPartialFailure($0)) }
            return op
        }
        return Dictionary(results.items, uniquingKeysWith: { first, _ in first })
    }

    /// Creates a zone (saving one that exists changes nothing) and returns it as stored.
    ///
    /// ```swift
    /// let photos = try await database.save(RecordZone(zoneName: "Photos"))
    /// try await database.save(Record(recordType: "Photo", zoneID: photos.zoneID))
    /// ```
    ///
    /// - Throws: the zone's own error: `invalidArguments` for a bad name or in the shared
    ///   database, `permissionFailure` for another owner's zone.
    @discardableResult
    public func save(_ zone: RecordZone) async throws -> RecordZone {
        let results = try await modifyRecordZones(saving: [zone], deleting: [])
        guard let result = results.saveResults[zone.zoneID] else {
            throw StratusError(.internalError, "no result for zone '\(zone.zoneID.zoneName)'", zoneID: zone.zoneID)
        }
        return try result.get()
    }

    /// Deletes a zone and every record in it, and returns its ID.
    ///
    /// ```swift
    /// try await database.deleteRecordZone(withID: RecordZone.ID(zoneName: "Scratch"))
    /// ```
    ///
    /// - Throws: `zoneNotFound` when the zone does not exist; `invalidArguments` for the
    ///   default zone.
    @discardableResult
    public func deleteRecordZone(withID zoneID: RecordZone.ID) async throws -> RecordZone.ID {
        let results = try await modifyRecordZones(saving: [], deleting: [zoneID])
        try results.deleteResults[zoneID]?.get()
        return zoneID
    }

    /// Creates and deletes zones in one request; each zone gets its own result. Either list may
    /// be left out, as in CloudKit (`modifyRecordZones(saving: [zone])`).
    ///
    /// ```swift
    /// let (saved, deleted) = try await database.modifyRecordZones(saving: [RecordZone(zoneName: "A")], deleting: [oldID])
    /// ```
    ///
    /// - Throws: only errors of the request as a whole; zone errors are in the results.
    public func modifyRecordZones(
        saving recordZonesToSave: [RecordZone] = [], deleting recordZoneIDsToDelete: [RecordZone.ID] = []
    ) async throws -> (saveResults: [RecordZone.ID: Result<RecordZone, any Error>], deleteResults: [RecordZone.ID: Result<Void, any Error>]) {
        let saves = Collector<(RecordZone.ID, Result<RecordZone, any Error>)>()
        let deletes = Collector<(RecordZone.ID, Result<Void, any Error>)>()
        try await run { finish in
            let op = ModifyRecordZonesOperation(recordZonesToSave: recordZonesToSave, recordZoneIDsToDelete: recordZoneIDsToDelete)
            op.perRecordZoneSaveBlock = { saves.append(($0, $1)) }
            op.perRecordZoneDeleteBlock = { deletes.append(($0, $1)) }
            op.modifyRecordZonesResultBlock = { finish(Database.ignoringPartialFailure($0)) }
            return op
        }
        return (Dictionary(saves.items, uniquingKeysWith: { a, _ in a }), Dictionary(deletes.items, uniquingKeysWith: { a, _ in a }))
    }

    /// What changed in a zone: namespaces the answers of
    /// ``recordZoneChanges(inZoneWith:since:desiredKeys:resultsLimit:)``, as `CKDatabase.RecordZoneChange`.
    ///
    /// ```swift
    /// let batch = try await database.recordZoneChanges(inZoneWith: photos, since: token)
    /// let deleted: [Database.RecordZoneChange.Deletion] = batch.deletions
    /// ```
    public enum RecordZoneChange {
        /// A record changed since the token, in its current state.
        ///
        /// ```swift
        /// for (_, result) in changes.modificationResultsByID { upsert(try result.get().record) }
        /// ```
        public struct Modification: Hashable, Sendable {
            /// The record as it is now, with its change tag.
            public let record: Record

            /// The same record object (records compare as objects, as `CKRecord`s do).
            public static func == (lhs: Modification, rhs: Modification) -> Bool { lhs.record == rhs.record }

            public func hash(into hasher: inout Hasher) { hasher.combine(record) }
        }
        /// A record deleted since the token.
        public struct Deletion: Hashable, Sendable {
            /// The deleted record's name and zone.
            public let recordID: Record.ID
            /// The type the record had when it was deleted (`forget(id)` in one table by type).
            public let recordType: String
        }
    }

    /// One batch of a zone's changes since a token, and the token after it.
    ///
    /// A record appears at most once in a batch (in its current state, or as a deletion), so
    /// applying a batch in any order gives the same result; ``FetchRecordZoneChangesOperation``
    /// reports changes in commit order. Call again with the answered token while `moreComing`
    /// is true; keep the token only after you applied the changes, and you see every change once.
    ///
    /// ```swift
    /// var token: ServerChangeToken? = nil
    /// var more = true
    /// while more {
    ///     let batch = try await database.recordZoneChanges(inZoneWith: photos, since: token)
    ///     for (_, result) in batch.modificationResultsByID { upsert(try result.get().record) }
    ///     for deletion in batch.deletions { remove(deletion.recordID) }
    ///     (token, more) = (batch.changeToken, batch.moreComing)
    /// }
    /// ```
    ///
    /// - Throws: `zoneNotFound`; `changeTokenExpired` (start again with `nil`).
    public func recordZoneChanges(
        inZoneWith zoneID: RecordZone.ID, since changeToken: ServerChangeToken?, desiredKeys: [String]? = nil, resultsLimit: Int? = nil
    ) async throws -> (modificationResultsByID: [Record.ID: Result<RecordZoneChange.Modification, any Error>], deletions: [RecordZoneChange.Deletion], changeToken: ServerChangeToken, moreComing: Bool) {
        let (changes, failures, token, moreComing) = try await zoneChangeBatch(inZoneWith: zoneID, since: changeToken, desiredKeys: desiredKeys, resultsLimit: resultsLimit)
        var modifications: [Record.ID: Result<RecordZoneChange.Modification, any Error>] = [:]
        var deletions: [RecordZoneChange.Deletion] = []
        for change in changes {
            switch change {
            case .changed(let record): modifications[record.recordID] = .success(RecordZoneChange.Modification(record: record))
            case .deleted(let id, let type): deletions.append(RecordZoneChange.Deletion(recordID: id, recordType: type))
            }
        }
        for (id, error) in failures { modifications[id] = .failure(error) }
        return (modifications, deletions, token, moreComing)
    }

    /// One fetch of a zone's changes after `changeToken`, in commit order, with the records that
    /// could not be read apart: what ``recordZoneChanges(inZoneWith:since:desiredKeys:resultsLimit:)``
    /// and ``RecordZoneChangeFeed`` answer from. Task cancellation cancels the fetch.
    func zoneChangeBatch(
        inZoneWith zoneID: RecordZone.ID, since changeToken: ServerChangeToken?, desiredKeys: [String]?, resultsLimit: Int?
    ) async throws -> (changes: [RecordZoneChangeFeed.Change], failures: [(Record.ID, any Error)], changeToken: ServerChangeToken, moreComing: Bool) {
        let changes = Collector<RecordZoneChangeFeed.Change>()
        let failures = Collector<(Record.ID, any Error)>()
        let end = Collector<Result<(serverChangeToken: ServerChangeToken, clientChangeTokenData: Data?, moreComing: Bool), any Error>>()
        try await run { finish in
            let config = FetchRecordZoneChangesOperation.ZoneConfiguration(previousServerChangeToken: changeToken, resultsLimit: resultsLimit, desiredKeys: desiredKeys)
            let op = FetchRecordZoneChangesOperation(recordZoneIDs: [zoneID], configurationsByRecordZoneID: [zoneID: config])
            op.fetchAllChanges = false
            op.recordWasChangedBlock = { id, result in
                switch result {
                case .success(let record): changes.append(.changed(record))
                case .failure(let error): failures.append((id, error))
                }
            }
            op.recordWithIDWasDeletedBlock = { changes.append(.deleted($0, recordType: $1)) }
            op.recordZoneFetchResultBlock = { _, result in end.append(result) }
            op.fetchRecordZoneChangesResultBlock = { finish(Database.ignoringPartialFailure($0)) }
            return op
        }
        guard let zoneResult = end.items.first else {
            throw StratusError(.internalError, "the change fetch ended without a result for zone '\(zoneID.zoneName)'", zoneID: zoneID)
        }
        let (token, _, moreComing) = try zoneResult.get()
        return (changes.items, failures.items, token, moreComing)
    }

    /// What changed in a database: namespaces the answers of
    /// ``databaseChanges(since:resultsLimit:)``, as `CKDatabase.DatabaseChange`.
    ///
    /// ```swift
    /// let changes = try await database.databaseChanges(since: token)
    /// let zonesToFetch = changes.modifications.map(\.zoneID)
    /// ```
    public enum DatabaseChange {
        /// A zone created or written to since the token.
        public struct Modification: Hashable, Sendable {
            /// The zone whose records changed: fetch its changes with its own token.
            public let zoneID: RecordZone.ID
        }
        /// A zone deleted since the token.
        public struct Deletion: Hashable, Sendable {
            /// Why a zone was deleted, as `CKDatabase.DatabaseChange.Deletion.Reason`.
            public enum Reason: Hashable, Sendable {
                /// The zone was deleted (``Database/deleteRecordZone(withID:)``, `stratus zones
                /// delete`): the only reason Stratus gives.
                case deleted
                /// The user removed the app's data (CloudKit's Settings); never given by Stratus.
                case purged
                /// The user reset their encrypted data; never given by Stratus.
                case encryptedDataReset
            }

            /// The deleted zone: drop what you keep of it, and its change token.
            public let zoneID: RecordZone.ID
            /// Why the zone was deleted; always ``Reason/deleted`` in Stratus.
            ///
            /// ```swift
            /// for deletion in changes.deletions where deletion.reason == .deleted { forget(deletion.zoneID) }
            /// ```
            public let reason: Reason
            /// Whether the user purged the zone (CloudKit's older spelling of ``reason`` `==
            /// .purged`); always `false` in Stratus.
            public var purged: Bool { reason == .purged }

            init(zoneID: RecordZone.ID, reason: Reason = .deleted) {
                self.zoneID = zoneID
                self.reason = reason
            }
        }
    }

    /// One batch of the database's zone changes since a token, and the token after it.
    ///
    /// ```swift
    /// let (changed, deleted, token, more) = try await database.databaseChanges(since: databaseToken)
    /// ```
    ///
    /// - Throws: `changeTokenExpired` (start again with `nil`).
    public func databaseChanges(
        since changeToken: ServerChangeToken?, resultsLimit: Int? = nil
    ) async throws -> (modifications: [DatabaseChange.Modification], deletions: [DatabaseChange.Deletion], changeToken: ServerChangeToken, moreComing: Bool) {
        let modifications = Collector<DatabaseChange.Modification>()
        let deletions = Collector<DatabaseChange.Deletion>()
        let end = Collector<(serverChangeToken: ServerChangeToken, moreComing: Bool)>()
        try await run { finish in
            let op = FetchDatabaseChangesOperation(previousServerChangeToken: changeToken)
            op.resultsLimit = resultsLimit ?? 0
            op.fetchAllChanges = false
            op.recordZoneWithIDChangedBlock = { modifications.append(DatabaseChange.Modification(zoneID: $0)) }
            op.recordZoneWithIDWasDeletedBlock = { deletions.append(DatabaseChange.Deletion(zoneID: $0)) }
            op.fetchDatabaseChangesResultBlock = { result in
                if case .success(let value) = result { end.append(value) }
                finish(result.map { _ in () })
            }
            return op
        }
        guard let (token, moreComing) = end.items.first else {
            throw StratusError(.internalError, "no result for the database's changes")
        }
        return (modifications.items, deletions.items, token, moreComing)
    }

    /// Removes tombstones of deletions older than `retention` seconds; tokens from before
    /// them expire. See ``CompactChangeHistoryOperation``.
    ///
    /// ```swift
    /// let removed = try await database.compactChangeHistory(retention: 30 * 86_400)
    /// ```
    ///
    /// - Throws: `invalidArguments` for a negative retention; a store error.
    @discardableResult
    public func compactChangeHistory(retention: TimeInterval) async throws -> ChangeHistoryCompaction {
        let result = Collector<ChangeHistoryCompaction>()
        try await run { finish in
            let op = CompactChangeHistoryOperation(retention: retention)
            op.compactChangeHistoryResultBlock = { r in
                if case .success(let value) = r { result.append(value) }
                finish(r.map { _ in () })
            }
            return op
        }
        return result.items.first ?? ChangeHistoryCompaction()
    }
}
