import Foundation

/// Creates and deletes zones, like `CKModifyRecordZonesOperation`.
///
/// Each zone gets its own result, and the final result is `partialFailure` when some zone
/// failed. Saving a zone that exists succeeds and answers it as stored. Deleting a zone
/// deletes every record in it and its change history; later writes to it fail with
/// `zoneNotFound`. The default zone cannot be deleted. Zones live in the private database,
/// as in CloudKit, and also in the public database (a Stratus extension); the shared database
/// holds the zones other users share with the user, where deleting a zone leaves its shares
/// (the owner's records stay), as in CloudKit, and saving one is `invalidArguments`.
///
/// ```swift
/// let op = ModifyRecordZonesOperation(recordZonesToSave: [RecordZone(zoneName: "Photos")], recordZoneIDsToDelete: [oldZoneID])
/// op.perRecordZoneSaveBlock = { id, result in print(id.zoneName, result) }
/// op.modifyRecordZonesResultBlock = { print("done:", $0) }
/// database.add(op)
/// ```
open class ModifyRecordZonesOperation: DatabaseOperation, @unchecked Sendable {
    /// The zones to create; each gets a ``perRecordZoneSaveBlock`` call.
    public var recordZonesToSave: [RecordZone]?
    /// The IDs of the zones to delete, with their records; each gets a
    /// ``perRecordZoneDeleteBlock`` call. In the shared database, the zones to leave: the user
    /// leaves every share of the zone they accepted, and the owner's records stay.
    public var recordZoneIDsToDelete: [RecordZone.ID]?
    /// Each zone to save, with the zone as stored or its own error, as
    /// `CKModifyRecordZonesOperation.perRecordZoneSaveBlock`.
    ///
    /// ```swift
    /// op.perRecordZoneSaveBlock = { id, result in if case .failure(let error) = result { print(id.zoneName, error) } }
    /// ```
    public var perRecordZoneSaveBlock: ((RecordZone.ID, Result<RecordZone, any Error>) -> Void)?
    /// Each zone to delete, with success or its own error (`invalidArguments` for the default
    /// zone), as `CKModifyRecordZonesOperation.perRecordZoneDeleteBlock`.
    ///
    /// ```swift
    /// op.perRecordZoneDeleteBlock = { id, result in print(id.zoneName, result) }
    /// ```
    public var perRecordZoneDeleteBlock: ((RecordZone.ID, Result<Void, any Error>) -> Void)?
    /// Called once at the end, as `CKModifyRecordZonesOperation.modifyRecordZonesResultBlock`:
    /// success, `partialFailure` when some zone failed (its
    /// ``StratusError/partialErrorsByZoneID`` names each), or the error that failed the whole
    /// request.
    ///
    /// ```swift
    /// op.modifyRecordZonesResultBlock = { result in if case .failure(let error) = result { print(error) } }
    /// ```
    public var modifyRecordZonesResultBlock: ((Result<Void, any Error>) -> Void)?
    /// CloudKit's older final block: the zones saved, the zone IDs deleted and the error
    /// (`partialFailure` when some zone failed); after ``modifyRecordZonesResultBlock``.
    public var modifyRecordZonesCompletionBlock: (([RecordZone]?, [RecordZone.ID]?, (any Error)?) -> Void)?

    /// What ``modifyRecordZonesCompletionBlock`` reports.
    private var savedZones: [RecordZone] = []
    private var deletedZoneIDs: [RecordZone.ID] = []

    /// An operation that creates `recordZonesToSave` and deletes `recordZoneIDsToDelete`, as
    /// `CKModifyRecordZonesOperation(recordZonesToSave:recordZoneIDsToDelete:)`.
    ///
    /// ```swift
    /// let op = ModifyRecordZonesOperation(recordZonesToSave: [RecordZone(zoneName: "Lists")], recordZoneIDsToDelete: nil)
    /// ```
    public convenience init(recordZonesToSave: [RecordZone]? = nil, recordZoneIDsToDelete: [RecordZone.ID]? = nil) {
        self.init()
        self.recordZonesToSave = recordZonesToSave
        self.recordZoneIDsToDelete = recordZoneIDsToDelete
    }

    /// An operation with nothing to do yet, as `CKModifyRecordZonesOperation()`: set
    /// ``recordZonesToSave`` or ``recordZoneIDsToDelete`` before it runs.
    ///
    /// ```swift
    /// let op = ModifyRecordZonesOperation()
    /// op.recordZoneIDsToDelete = [RecordZone.ID(zoneName: "Lists")]
    /// ```
    public override init() {
        recordZonesToSave = nil
        recordZoneIDsToDelete = nil
        super.init()
    }

    override func execute(engine: any StorageEngine, context: DatabaseContext) throws -> StratusError? {
        let toSave = recordZonesToSave ?? []
        let toDelete = recordZoneIDsToDelete ?? []
        var errors: [RecordZone.ID: StratusError] = [:]

        var validSaves: [RecordZone] = []
        for zone in toSave {
            do {
                try ZoneRules.checkModifiable(zone.zoneID, context)
                validSaves.append(zone)
            } catch {
                errors[zone.zoneID] = error
                perRecordZoneSaveBlock?(zone.zoneID, .failure(error))
            }
        }
        var validDeletes: [RecordZone.ID] = []
        for id in toDelete {
            do throws(StratusError) {
                try ZoneRules.checkDeletable(id, context)
                validDeletes.append(id)
            } catch {
                errors[id] = error
                perRecordZoneDeleteBlock?(id, .failure(error))
            }
        }
        if isCancelled { return StratusError.cancelled("ModifyRecordZonesOperation", completed: 0) }

        if !validSaves.isEmpty || !validDeletes.isEmpty {
            // The store keys a user's own zones by the default owner; callers get their own IDs back.
            let canonicalSaves = validSaves.map { RecordZone(zoneID: context.canonical($0.zoneID), capabilities: ZoneRules.supportedCapabilities(of: $0)) }
            // A zone named twice (or by both spellings of its owner) is deleted once, and each
            // mention answered with that one result.
            var named = Set<RecordZone.ID>()
            let canonicalDeletes = validDeletes.map(context.canonical).filter { named.insert($0).inserted }
            let outcome = try withRetry {
                try engine.modifyZones(saving: canonicalSaves, deleting: canonicalDeletes, in: context) { outcome, transaction in
                    // A zone's deletion deletes its records: it fires the zone's and the
                    // database's subscriptions, in the deletion's transaction.
                    let deleted = outcome.deleteResults.compactMap { if case .success = $0.value { $0.key } else { nil } }
                    guard !deleted.isEmpty else { return }
                    var rows: [NotificationRow] = []
                    if let index = try SubscriptionIndexCache.index(for: transaction, engine: engine, context: context) {
                        var notifier = SubscriptionNotifier(index: index, context: context, transaction: transaction)
                        for zoneID in deleted { notifier.deletedZone(zoneID) }
                        rows = try notifier.finishedRows(in: transaction)
                    }
                    // The participants of the zones' shares lose them from their shared databases.
                    rows += try SharedDatabaseNotifier.zonesDeleted(deleted, in: transaction, engine: engine, context: context)
                    try SubscriptionNotifier.append(rows, in: transaction)
                }
            }
            for zone in validSaves {
                let result = outcome.saveResults[context.canonical(zone.zoneID)]
                    ?? .failure(StratusError(.internalError, "the store gave no result for zone '\(zone.zoneID.zoneName)'", zoneID: zone.zoneID))
                switch result {
                case .success(let stored):
                    let answered = ZoneRules.answered(stored, as: zone.zoneID, in: context.scope)
                    savedZones.append(answered)
                    perRecordZoneSaveBlock?(zone.zoneID, .success(answered))
                case .failure(let error):
                    errors[zone.zoneID] = error
                    perRecordZoneSaveBlock?(zone.zoneID, .failure(error))
                }
            }
            for id in validDeletes {
                let result = outcome.deleteResults[context.canonical(id)]
                    ?? .failure(StratusError(.internalError, "the store gave no result for deleting zone '\(id.zoneName)'", zoneID: id))
                switch result {
                case .success: deletedZoneIDs.append(id)
                case .failure(let error): errors[id] = error
                }
                perRecordZoneDeleteBlock?(id, result.mapError { $0 })
            }
        }
        // Cancelled during a per-zone block: what was written stays reported, never success.
        if isCancelled {
            var cancelled = StratusError.cancelled("ModifyRecordZonesOperation", completed: savedZones.count + deletedZoneIDs.count)
            cancelled.partialErrorsByZoneID = errors
            return cancelled
        }
        return ZoneRules.partialFailure(errors, of: toSave.count + toDelete.count)
    }

    override func complete(with error: StratusError?) {
        modifyRecordZonesResultBlock?(error.map { .failure($0) } ?? .success(()))
        let wholeFailure = error.map { $0.code != .partialFailure } ?? false
        let nothing = savedZones.isEmpty && deletedZoneIDs.isEmpty
        modifyRecordZonesCompletionBlock?(wholeFailure && nothing ? nil : savedZones, wholeFailure && nothing ? nil : deletedZoneIDs, error)
    }
}
