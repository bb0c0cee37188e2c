import Foundation

/// Fetches what changed in zones since change tokens, like `CKFetchRecordZoneChangesOperation`.
///
/// For each zone, in the order of ``recordZoneIDs``, changes arrive oldest first: a changed
/// record through ``recordWasChangedBlock`` (once, in its current state, however often it
/// changed since the token, as CloudKit coalesces changes) and a deleted record through
/// ``recordWithIDWasDeletedBlock`` with its record type. Changes come in batches of the
/// zone's ``ZoneConfiguration/resultsLimit``; after each batch but the last,
/// ``recordZoneChangeTokensUpdatedBlock`` gets the token that resumes after it, and
/// ``recordZoneFetchResultBlock`` ends each zone with its final token and whether more is
/// coming (only when ``fetchAllChanges`` is off). Keep the token after processing the changes
/// before it, and every change is seen exactly once, also while others write.
///
/// A token of another zone or database, from before the retained history, or from a zone
/// deleted since fails that zone with `changeTokenExpired`; fetch it again without a token.
///
/// ```swift
/// let config = FetchRecordZoneChangesOperation.ZoneConfiguration(previousServerChangeToken: savedToken)
/// let op = FetchRecordZoneChangesOperation(recordZoneIDs: [photos], configurationsByRecordZoneID: [photos: config])
/// op.recordWasChangedBlock = { id, result in if let record = try? result.get() { upsert(record) } }
/// op.recordWithIDWasDeletedBlock = { id, recordType in remove(id) }
/// op.recordZoneChangeTokensUpdatedBlock = { zone, token in savedToken = token }
/// op.recordZoneFetchResultBlock = { zone, result in
///     if case .success(let (token, _)) = result { savedToken = token }
/// }
/// database.add(op)
/// ```
public final class FetchRecordZoneChangesOperation: DatabaseOperation, RecordProducingOperation, @unchecked Sendable {
    /// Where to start in one zone, and how.
    ///
    /// ```swift
    /// let config = FetchRecordZoneChangesOperation.ZoneConfiguration(previousServerChangeToken: token, resultsLimit: 200, desiredKeys: ["title"])
    /// ```
    public struct ZoneConfiguration: Hashable, Sendable {
        /// The token from the last fetch; `nil` fetches the zone from its beginning.
        public var previousServerChangeToken: ServerChangeToken?
        /// Changes per batch; `nil` or 0 means ``FetchRecordZoneChangesOperation/defaultResultsLimit``.
        public var resultsLimit: Int?
        /// The keys changed records carry; all keys when `nil`.
        public var desiredKeys: [String]?

        public init(previousServerChangeToken: ServerChangeToken? = nil, resultsLimit: Int? = nil, desiredKeys: [String]? = nil) {
            self.previousServerChangeToken = previousServerChangeToken
            self.resultsLimit = resultsLimit
            self.desiredKeys = desiredKeys
        }
    }

    /// Changes per batch when a configuration sets no ``ZoneConfiguration/resultsLimit``.
    public static let defaultResultsLimit = 400

    /// The zones to fetch, in order; the configured zones (by name) when `nil`.
    public var recordZoneIDs: [RecordZone.ID]?
    public var configurationsByRecordZoneID: [RecordZone.ID: ZoneConfiguration]?
    /// Whether to keep fetching a zone until no more changes remain (the default), or to
    /// stop after one batch per zone and report `moreComing`.
    public var fetchAllChanges = true

    public var recordWasChangedBlock: (@Sendable (Record.ID, Result<Record, any Error>) -> Void)?
    /// A record was deleted; the second argument is its record type.
    public var recordWithIDWasDeletedBlock: (@Sendable (Record.ID, String) -> Void)?
    /// A zone's token after a batch that more batches follow.
    public var recordZoneChangeTokensUpdatedBlock: (@Sendable (RecordZone.ID, ServerChangeToken?) -> Void)?
    /// The end of one zone: its token and whether more changes remain, or its error.
    public var recordZoneFetchResultBlock: (@Sendable (RecordZone.ID, Result<(serverChangeToken: ServerChangeToken, moreComing: Bool), any Error>) -> Void)?
    public var fetchRecordZoneChangesResultBlock: (@Sendable (Result<Void, any Error>) -> Void)?
    public let recordOutput = RecordOutput()

    public init(recordZoneIDs: [RecordZone.ID]? = nil, configurationsByRecordZoneID: [RecordZone.ID: ZoneConfiguration]? = nil) {
        self.recordZoneIDs = recordZoneIDs
        self.configurationsByRecordZoneID = configurationsByRecordZoneID
        super.init()
    }

    public override convenience init() { self.init(recordZoneIDs: nil, configurationsByRecordZoneID: nil) }

    override func execute(engine: any StorageEngine, context: DatabaseContext) throws -> StratusError? {
        let configurations = configurationsByRecordZoneID ?? [:]
        var seen = Set<RecordZone.ID>()
        let zoneIDs = (recordZoneIDs ?? configurations.keys.sorted { $0.zoneName < $1.zoneName }).filter { seen.insert($0).inserted }
        var errors: [RecordZone.ID: StratusError] = [:]
        var delivered = 0

        for zoneID in zoneIDs {
            if isCancelled {
                var error = StratusError.cancelled("FetchRecordZoneChangesOperation", completed: delivered)
                error.partialErrorsByZoneID = errors
                return error
            }
            do {
                try fetchChanges(in: zoneID, configuration: configurations[zoneID] ?? ZoneConfiguration(), engine: engine, context: context, delivered: &delivered)
            } catch {
                let error = StratusError.wrap(error)
                recordZoneFetchResultBlock?(zoneID, .failure(error))
                if error.code == .operationCancelled {
                    var cancelled = error
                    cancelled.partialErrorsByZoneID = errors
                    return cancelled
                }
                errors[zoneID] = error
            }
        }
        return ZoneRules.partialFailure(errors, of: zoneIDs.count)
    }

    private func fetchChanges(
        in zoneID: RecordZone.ID, configuration: ZoneConfiguration, engine: any StorageEngine, context: DatabaseContext, delivered: inout Int
    ) throws {
        try ZoneRules.checkZoneID(zoneID, context)
        if let keys = configuration.desiredKeys { for key in keys { try Naming.checkIdentifier(key, kind: "desired key") } }
        let limit = configuration.resultsLimit ?? 0
        precondition(limit >= 0, "ZoneConfiguration.resultsLimit must not be negative")
        var position = try configuration.previousServerChangeToken?.position(for: zoneID, in: context)
        var reads = RecordReadCheck(engine: engine, context: context)
        while true {
            if isCancelled { throw StratusError.cancelled("FetchRecordZoneChangesOperation", completed: delivered) }
            let request = ZoneChangesRequest(
                zoneID: context.canonical(zoneID), after: position,
                limit: limit == 0 ? Self.defaultResultsLimit : limit, desiredKeys: configuration.desiredKeys)
            let batch = try withRetry { try engine.fetchZoneChanges(request, in: context) }
            for change in batch.changes {
                switch change {
                case .changed(let record):
                    if let denied = try reads.denial(of: record) {
                        recordWasChangedBlock?(record.recordID, .failure(denied))
                    } else {
                        recordOutput.append(record)
                        recordWasChangedBlock?(record.recordID, .success(record))
                    }
                case .deleted(let id, let recordType):
                    if try reads.mayReadDeletions(of: recordType) { recordWithIDWasDeletedBlock?(id, recordType) }
                }
                delivered += 1
            }
            position = batch.position
            let token = ServerChangeToken(zoneID: zoneID, context: context, position: batch.position)
            if batch.moreComing && fetchAllChanges {
                recordZoneChangeTokensUpdatedBlock?(zoneID, token)
                continue
            }
            recordZoneFetchResultBlock?(zoneID, .success((serverChangeToken: token, moreComing: batch.moreComing)))
            return
        }
    }

    override func complete(with error: StratusError?) {
        recordOutput.complete(with: error)
        fetchRecordZoneChangesResultBlock?(error.map { .failure($0) } ?? .success(()))
    }
}
