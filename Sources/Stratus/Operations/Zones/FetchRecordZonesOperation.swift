import Foundation

/// Fetches zones and their capabilities, like `CKFetchRecordZonesOperation`.
///
/// Each zone ID asked for gets its own result; a missing zone fails alone with
/// `zoneNotFound`, and the final result is then `partialFailure`.
/// ``fetchAllRecordZonesOperation()`` answers every zone of the database.
///
/// ```swift
/// let op = FetchRecordZonesOperation.fetchAllRecordZonesOperation()
/// op.perRecordZoneResultBlock = { id, result in
///     if let zone = try? result.get() { print(id.zoneName, zone.capabilities.contains(.fetchChanges)) }
/// }
/// op.fetchRecordZonesResultBlock = { print("done:", $0) }
/// database.add(op)
/// ```
open class FetchRecordZonesOperation: DatabaseOperation, @unchecked Sendable {
    /// The zones to fetch; every zone of the database when `nil`.
    public var recordZoneIDs: [RecordZone.ID]?
    /// Each zone, with the zone (and its capabilities) or its own error (`zoneNotFound` for a
    /// zone that does not exist), as `CKFetchRecordZonesOperation.perRecordZoneResultBlock`.
    ///
    /// ```swift
    /// op.perRecordZoneResultBlock = { id, result in if let zone = try? result.get() { print(id.zoneName, zone.capabilities) } }
    /// ```
    public var perRecordZoneResultBlock: ((RecordZone.ID, Result<RecordZone, any Error>) -> Void)?
    /// Called once at the end, as `CKFetchRecordZonesOperation.fetchRecordZonesResultBlock`:
    /// success, `partialFailure` when some zone failed, or the error that failed the whole
    /// request.
    ///
    /// ```swift
    /// op.fetchRecordZonesResultBlock = { result in if case .failure(let error) = result { print(error) } }
    /// ```
    public var fetchRecordZonesResultBlock: ((Result<Void, any Error>) -> Void)?
    /// CloudKit's older final block: the zones read, by ID, and the error (`partialFailure`
    /// when some zone failed); after ``fetchRecordZonesResultBlock``.
    public var fetchRecordZonesCompletionBlock: (([RecordZone.ID: RecordZone]?, (any Error)?) -> Void)?

    /// The zones read, kept for ``fetchRecordZonesCompletionBlock``.
    private var fetched: [RecordZone.ID: RecordZone] = [:]

    /// An operation that fetches the zones with `recordZoneIDs`, as
    /// `CKFetchRecordZonesOperation(recordZoneIDs:)`.
    ///
    /// ```swift
    /// let op = FetchRecordZonesOperation(recordZoneIDs: [RecordZone.ID(zoneName: "Lists")])
    /// ```
    public convenience init(recordZoneIDs: [RecordZone.ID]) {
        self.init()
        self.recordZoneIDs = recordZoneIDs
    }

    /// An operation that fetches every zone of the database (``recordZoneIDs`` is `nil`), as
    /// ``fetchAllRecordZonesOperation()``.
    ///
    /// ```swift
    /// let op = FetchRecordZonesOperation()
    /// ```
    public override init() {
        super.init()
    }

    /// An operation that fetches every zone of the database.
    public static func fetchAllRecordZonesOperation() -> FetchRecordZonesOperation {
        FetchRecordZonesOperation()
    }

    override func execute(engine: any StorageEngine, context: DatabaseContext) throws -> StratusError? {
        var errors: [RecordZone.ID: StratusError] = [:]
        var wanted: [RecordZone.ID] = []
        for id in recordZoneIDs ?? [] {
            do {
                try ZoneRules.checkZoneID(id, context)
                wanted.append(id)
            } catch {
                errors[id] = error
                perRecordZoneResultBlock?(id, .failure(error))
            }
        }
        if isCancelled { return StratusError.cancelled("FetchRecordZonesOperation", completed: 0) }
        if recordZoneIDs != nil && wanted.isEmpty { return ZoneRules.partialFailure(errors, of: errors.count) }

        let zones = try withRetry { try recordZoneIDs == nil ? engine.fetchZones(in: context) : engine.fetchZones(wanted, in: context) }
        let sharedZones = try withRetry { try ZoneRules.zoneWideShares(of: zones, engine: engine, context: context) }
        var fetchedCount = 0
        // Cancelled during a per-zone block: never success.
        func cancelledAfterBlocks() -> StratusError? {
            guard isCancelled else { return nil }
            var cancelled = StratusError.cancelled("FetchRecordZonesOperation", completed: fetchedCount)
            cancelled.partialErrorsByZoneID = errors
            return cancelled
        }
        guard let recordZoneIDs else {
            for stored in zones {
                let zone = ZoneRules.answered(stored, sharedZones: sharedZones, in: context.scope)
                if fetchRecordZonesCompletionBlock != nil { fetched[zone.zoneID] = zone }
                perRecordZoneResultBlock?(zone.zoneID, .success(zone))
                fetchedCount += 1
            }
            return cancelledAfterBlocks()
        }
        let byID = Dictionary(zones.map { ($0.zoneID, $0) }, uniquingKeysWith: { first, _ in first })
        for id in wanted {
            if let zone = byID[context.canonical(id)] {
                let answered = ZoneRules.answered(zone, as: id, sharedZones: sharedZones, in: context.scope)
                if fetchRecordZonesCompletionBlock != nil { fetched[id] = answered }
                perRecordZoneResultBlock?(id, .success(answered))
                fetchedCount += 1
            } else {
                let error = ZoneRules.zoneNotFound(id, context)
                errors[id] = error
                perRecordZoneResultBlock?(id, .failure(error))
            }
        }
        return cancelledAfterBlocks() ?? ZoneRules.partialFailure(errors, of: recordZoneIDs.count)
    }

    override func complete(with error: StratusError?) {
        fetchRecordZonesResultBlock?(error.map { .failure($0) } ?? .success(()))
        let wholeFailure = error.map { $0.code != .partialFailure } ?? false
        fetchRecordZonesCompletionBlock?(wholeFailure && fetched.isEmpty ? nil : fetched, error)
    }
}
