import Foundation

/// Fetches what changed in zones since change tokens, like `CKFetchRecordZoneChangesOperation`.
///
/// For each zone, in the order of ``recordZoneIDs``, changes arrive oldest first: a changed
/// record through ``recordWasChangedBlock`` (once, in its current state, however often it
/// changed since the token, as CloudKit coalesces changes) and a deleted record through
/// ``recordWithIDWasDeletedBlock`` with its record type. Changes come in batches of the
/// zone's ``ZoneConfiguration/resultsLimit``; after each batch but the last,
/// ``recordZoneChangeTokensUpdatedBlock`` gets the token that resumes after it, and
/// ``recordZoneFetchResultBlock`` ends each zone with its final token, the client change token
/// of the zone (see ``ModifyRecordsOperation/clientChangeTokenData``) and whether more is coming
/// (only when ``fetchAllChanges`` is off). Keep the token after processing the changes before
/// it, and every change is seen exactly once, also while others write.
///
/// CloudKit's older blocks are offered too, each called after its newer counterpart:
/// ``recordChangedBlock``, ``recordZoneFetchCompletionBlock`` and
/// ``fetchRecordZoneChangesCompletionBlock``; and the older ``ZoneOptions`` through
/// ``init(recordZoneIDs:optionsByRecordZoneID:)``.
///
/// A token of another zone or database, from before the retained history, or from a zone
/// deleted since fails that zone with `changeTokenExpired`; fetch it again without a token.
///
/// ```swift
/// let config = FetchRecordZoneChangesOperation.ZoneConfiguration(previousServerChangeToken: savedToken)
/// let op = FetchRecordZoneChangesOperation(recordZoneIDs: [photos], configurationsByRecordZoneID: [photos: config])
/// op.recordWasChangedBlock = { id, result in if let record = try? result.get() { upsert(record) } }
/// op.recordWithIDWasDeletedBlock = { id, recordType in remove(id) }
/// op.recordZoneChangeTokensUpdatedBlock = { zone, token, _ in savedToken = token }
/// op.recordZoneFetchResultBlock = { zone, result in
///     if case .success(let (token, _, _)) = result { savedToken = token }
/// }
/// database.add(op)
/// ```
open class FetchRecordZoneChangesOperation: DatabaseOperation, RecordProducingOperation, @unchecked Sendable {
    /// Changes per batch when a configuration sets no ``ZoneConfiguration/resultsLimit``.
    public static let defaultResultsLimit = 400

    /// The zones to fetch, in order; the configured zones (by name) when `nil`.
    public var recordZoneIDs: [RecordZone.ID]?
    /// Where and how to start in each zone; a zone without one is fetched from its beginning,
    /// in batches of ``defaultResultsLimit``, with all keys.
    ///
    /// ```swift
    /// op.configurationsByRecordZoneID = [photos: .init(previousServerChangeToken: savedToken)]
    /// ```
    public var configurationsByRecordZoneID: [RecordZone.ID: ZoneConfiguration]?
    /// CloudKit's older per-zone options; used for zones ``configurationsByRecordZoneID`` does not name.
    public var optionsByRecordZoneID: [RecordZone.ID: ZoneOptions]?
    /// Whether to keep fetching a zone until no more changes remain (the default), or to
    /// stop after one batch per zone and report `moreComing`.
    public var fetchAllChanges = true

    /// Each record changed since the zone's token, once, in its current state, or its error,
    /// as `CKFetchRecordZoneChangesOperation.recordWasChangedBlock`.
    ///
    /// ```swift
    /// op.recordWasChangedBlock = { id, result in if let record = try? result.get() { print(id.recordName, record.recordType) } }
    /// ```
    public var recordWasChangedBlock: ((Record.ID, Result<Record, any Error>) -> Void)?
    /// A record was deleted; the second argument is its record type.
    public var recordWithIDWasDeletedBlock: ((Record.ID, String) -> Void)?
    /// A zone's token after a batch that more batches follow, and the zone's latest client
    /// change token (see ``ModifyRecordsOperation/clientChangeTokenData``).
    public var recordZoneChangeTokensUpdatedBlock: ((RecordZone.ID, ServerChangeToken?, Data?) -> Void)?
    /// The end of one zone: its token, its latest client change token and whether more changes
    /// remain, or its error.
    public var recordZoneFetchResultBlock: ((RecordZone.ID, Result<(serverChangeToken: ServerChangeToken, clientChangeTokenData: Data?, moreComing: Bool), any Error>) -> Void)?
    /// Called once at the end, after every zone's ``recordZoneFetchResultBlock``, as
    /// `CKFetchRecordZoneChangesOperation.fetchRecordZoneChangesResultBlock`: success,
    /// `partialFailure` when some zone failed (its ``StratusError/partialErrorsByZoneID`` names
    /// each), or the error that stopped the fetch.
    ///
    /// ```swift
    /// op.fetchRecordZoneChangesResultBlock = { result in if case .failure(let error) = result { print(error) } }
    /// ```
    public var fetchRecordZoneChangesResultBlock: ((Result<Void, any Error>) -> Void)?
    /// CloudKit's older changed-record block: each changed record, after ``recordWasChangedBlock``.
    public var recordChangedBlock: ((Record) -> Void)?
    /// CloudKit's older end-of-zone block: the zone, its token (`nil` on failure), its client
    /// change token, whether more changes remain, and the zone's error; after
    /// ``recordZoneFetchResultBlock``.
    public var recordZoneFetchCompletionBlock: ((RecordZone.ID, ServerChangeToken?, Data?, Bool, (any Error)?) -> Void)?
    /// CloudKit's older final block: the error, or `nil`; after ``fetchRecordZoneChangesResultBlock``.
    public var fetchRecordZoneChangesCompletionBlock: (((any Error)?) -> Void)?
    /// Where the operation hands the changed records (not the deletions) to the stages of a pipeline
    /// (``RecordProducingOperation``), batch by batch as they are made.
    ///
    /// ```swift
    /// let copy = ModifyRecordsOperation(savingRecordsFrom: changes)
    /// ```
    public let recordOutput = RecordOutput()

    /// A Stratus extension: where a pipeline with this fetch as its source keeps its position,
    /// the change token after each batch (see ``PipelineCheckpoint``). A resumed fetch starts
    /// after the checkpoint's token instead of the zone configuration's, and ends where the
    /// job's first run ended (the zone's position when it began), so that the job's own saves
    /// into the zone are not read again. Only for a fetch of one zone.
    ///
    /// ```swift
    /// changes.checkpoint = PipelineCheckpoint(job: "mirror-photos")
    /// ```
    public var checkpoint: PipelineCheckpoint?

    /// Change batches handed to consumers so far.
    private var handedOn = 0
    /// Zones this fetch reads: a change token is a pipeline position only for one.
    private var zoneCount = 0

    /// The store's identity, for the client change tokens kept for it.
    private var store = ""

    /// An operation that fetches the changes of `recordZoneIDs` (the configured zones when
    /// `nil`), each from where its configuration says, as
    /// `CKFetchRecordZoneChangesOperation(recordZoneIDs:configurationsByRecordZoneID:)`.
    ///
    /// ```swift
    /// let op = FetchRecordZoneChangesOperation(recordZoneIDs: [photos], configurationsByRecordZoneID: [photos: config])
    /// ```
    public convenience init(recordZoneIDs: [RecordZone.ID]? = nil, configurationsByRecordZoneID: [RecordZone.ID: ZoneConfiguration]? = nil) {
        self.init()
        self.recordZoneIDs = recordZoneIDs
        self.configurationsByRecordZoneID = configurationsByRecordZoneID
    }

    /// An operation with no zones yet, as `CKFetchRecordZoneChangesOperation()`: set
    /// ``recordZoneIDs`` or ``configurationsByRecordZoneID`` before it runs.
    ///
    /// ```swift
    /// let op = FetchRecordZoneChangesOperation()
    /// op.recordZoneIDs = [photos]
    /// ```
    public override init() {
        recordZoneIDs = nil
        configurationsByRecordZoneID = nil
        super.init()
    }

    /// An operation with CloudKit's older per-zone ``ZoneOptions``, as
    /// `CKFetchRecordZoneChangesOperation(recordZoneIDs:optionsByRecordZoneID:)`.
    ///
    /// ```swift
    /// let op = FetchRecordZoneChangesOperation(recordZoneIDs: [zoneID], optionsByRecordZoneID: [zoneID: options])
    /// ```
    public convenience init(recordZoneIDs: [RecordZone.ID], optionsByRecordZoneID: [RecordZone.ID: ZoneOptions]?) {
        self.init(recordZoneIDs: recordZoneIDs, configurationsByRecordZoneID: nil)
        self.optionsByRecordZoneID = optionsByRecordZoneID
    }

    override func execute(engine: any StorageEngine, context: DatabaseContext) throws -> StratusError? {
        var configurations = (optionsByRecordZoneID ?? [:]).mapValues(\.configuration)
        configurations.merge(configurationsByRecordZoneID ?? [:]) { _, configured in configured }
        store = try engine.storeIdentifier
        var seen = Set<RecordZone.ID>()
        let zoneIDs = (recordZoneIDs ?? configurations.keys.sorted { $0.zoneName < $1.zoneName }).filter { seen.insert($0).inserted }
        var errors: [RecordZone.ID: StratusError] = [:]
        var delivered = 0
        zoneCount = zoneIDs.count
        if checkpoint != nil && zoneIDs.count != 1 {
            return StratusError(.invalidArguments, "a checkpoint keeps the change token of one zone; this fetch reads \(zoneIDs.count) zones")
        }
        if let start = try beginSource(checkpoint: checkpoint, engine: engine), let zoneID = zoneIDs.first {
            guard case .changes(let token) = start, token.zoneID.map(context.canonical) == context.canonical(zoneID) else {
                return StratusError(.invalidArguments, "the checkpoint of job '\(checkpoint?.job ?? "")' holds \(start), not a change token of zone '\(zoneID.zoneName)'; use another job name, or remove the checkpoint to start over")
            }
            let configuration = configurations[zoneID] ?? ZoneConfiguration()
            configurations[zoneID] = ZoneConfiguration(previousServerChangeToken: token, resultsLimit: configuration.resultsLimit, desiredKeys: configuration.desiredKeys)
        }

        for zoneID in zoneIDs {
            if shouldStop {
                var error = stoppedError("FetchRecordZoneChangesOperation", completed: delivered)
                error.partialErrorsByZoneID = errors
                return error
            }
            do {
                try fetchChanges(in: zoneID, configuration: configurations[zoneID] ?? ZoneConfiguration(), engine: engine, context: context, delivered: &delivered)
            } catch {
                let error = StratusError.wrap(error)
                recordZoneFetchResultBlock?(zoneID, .failure(error))
                recordZoneFetchCompletionBlock?(zoneID, nil, nil, false, error)
                if error.code == .operationCancelled || shouldStop {
                    var cancelled = error
                    cancelled.partialErrorsByZoneID = errors
                    return cancelled
                }
                errors[zoneID] = error
            }
        }
        // Cancelled while the last zone was read: its changes and token were delivered, and the
        // operation did not finish as asked.
        if shouldStop {
            var error = stoppedError("FetchRecordZoneChangesOperation", completed: delivered)
            error.partialErrorsByZoneID = errors
            return error
        }
        return ZoneRules.partialFailure(errors, of: zoneIDs.count)
    }

    private func fetchChanges(
        in zoneID: RecordZone.ID, configuration: ZoneConfiguration, engine: any StorageEngine, context: DatabaseContext, delivered: inout Int
    ) throws {
        try ZoneRules.checkZoneID(zoneID, context)
        if let keys = configuration.desiredKeys { for key in keys { try Naming.checkDesiredKey(key) } }
        let batchSize = try Self.changeBatchSize(configuration.resultsLimit, default: Self.defaultResultsLimit,
                                                 setting: "the resultsLimit of zone '\(zoneID.zoneName)'s configuration")
        let clientToken = ClientChangeTokens.shared.token(for: zoneID, context: context, store: store)
        var position = try configuration.previousServerChangeToken?.position(for: zoneID, in: context)
        var reads = RecordReadCheck(engine: engine, context: context)
        // As a pipeline's source, the read ends where the zone was when the job began, as a
        // query reads one snapshot: a pipeline that saves into the zone would otherwise read
        // its own writes for ever, and a resumed run would read the first run's writes again.
        // The pipeline's positions keep that end for the runs that resume from them.
        var through = configuration.previousServerChangeToken?.readThrough
        while true {
            if shouldStop { throw stoppedError("FetchRecordZoneChangesOperation", completed: delivered) }
            let request = ZoneChangesRequest(
                zoneID: context.canonical(zoneID), after: position,
                limit: batchSize, desiredKeys: configuration.desiredKeys, through: through)
            let batch = try withRetry { try engine.fetchZoneChanges(request, in: context) }
            if through == nil, pipeline != nil { through = batch.zoneEnd }
            var changed: [Record] = []
            for change in batch.changes {
                switch change {
                case .changed(let record):
                    record.presented(to: context.userRecordName)
                    if let denied = try reads.denial(of: record) {
                        recordWasChangedBlock?(record.recordID, .failure(denied))
                    } else {
                        changed.append(record)
                        recordWasChangedBlock?(record.recordID, .success(record))
                        recordChangedBlock?(record)
                    }
                case .deleted(let id, let recordType):
                    if try reads.mayReadDeletions(of: recordType) { recordWithIDWasDeletedBlock?(id, recordType) }
                }
                delivered += 1
            }
            position = batch.position
            let token = ServerChangeToken(zoneID: zoneID, context: context, position: batch.position)
            let pipelinePosition = ServerChangeToken(zoneID: zoneID, context: context, position: batch.position, readThrough: through)
            let handed = try emit(changed, sequence: handedOn, position: zoneCount == 1 ? .changes(pipelinePosition) : nil, to: recordOutput)
            handedOn += 1
            guard handed else { throw stoppedError("FetchRecordZoneChangesOperation", completed: delivered) }
            if batch.moreComing && fetchAllChanges {
                recordZoneChangeTokensUpdatedBlock?(zoneID, token, clientToken)
                continue
            }
            recordZoneFetchResultBlock?(zoneID, .success((serverChangeToken: token, clientChangeTokenData: clientToken, moreComing: batch.moreComing)))
            recordZoneFetchCompletionBlock?(zoneID, token, clientToken, batch.moreComing, nil)
            return
        }
    }

    override func complete(with error: StratusError?) {
        recordOutput.complete(with: error)
        fetchRecordZoneChangesResultBlock?(error.map { .failure($0) } ?? .success(()))
        fetchRecordZoneChangesCompletionBlock?(error)
    }
}
