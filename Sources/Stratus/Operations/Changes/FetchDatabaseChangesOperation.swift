import Foundation

/// Fetches which zones changed or were deleted since a database token, like
/// `CKFetchDatabaseChangesOperation`.
///
/// A zone is reported changed when it was created or records in it were written or deleted
/// since the token, and deleted when it was deleted since (a zone deleted and created again
/// is reported deleted, then changed). Without a token (from the beginning), as in CloudKit,
/// every zone that exists is reported changed and no deletion from before the fetch began is
/// reported: a client starting fresh holds nothing to delete, so a zone deleted and created
/// again is only changed, and one deleted for good is not reported at all, also in batches
/// read later with the tokens such a fetch hands out. Changes arrive oldest first, in batches of
/// ``resultsLimit``; ``changeTokenUpdatedBlock`` gets the token after each batch but the last,
/// and ``fetchDatabaseChangesResultBlock`` the final token, then CloudKit's older
/// ``fetchDatabaseChangesCompletionBlock``. Stratus answers this in the public database too,
/// and counts the default zone as a zone.
///
/// ```swift
/// let op = FetchDatabaseChangesOperation(previousServerChangeToken: databaseToken)
/// op.recordZoneWithIDChangedBlock = { zoneID in zonesToFetch.append(zoneID) }
/// op.recordZoneWithIDWasDeletedBlock = { zoneID in dropLocalCopy(of: zoneID) }
/// op.fetchDatabaseChangesResultBlock = { result in
///     if case .success(let (token, _)) = result { databaseToken = token }
/// }
/// database.add(op)
/// ```
open class FetchDatabaseChangesOperation: DatabaseOperation, @unchecked Sendable {
    /// Zone changes per batch when ``resultsLimit`` is 0.
    public static let defaultResultsLimit = 400

    /// The token from the last fetch; `nil` reports every zone that exists, and no deletion.
    public var previousServerChangeToken: ServerChangeToken?
    /// Zone changes per batch; 0 means ``defaultResultsLimit``.
    public var resultsLimit = 0
    /// Whether to keep fetching until no more changes remain (the default), or to stop after
    /// one batch and report `moreComing`.
    public var fetchAllChanges = true

    /// Each zone created, or whose records were written or deleted, since the token, as
    /// `CKFetchDatabaseChangesOperation.recordZoneWithIDChangedBlock`.
    ///
    /// ```swift
    /// op.recordZoneWithIDChangedBlock = { zoneID in print("changed:", zoneID.zoneName) }
    /// ```
    public var recordZoneWithIDChangedBlock: ((RecordZone.ID) -> Void)?
    /// Each zone deleted since the token, as
    /// `CKFetchDatabaseChangesOperation.recordZoneWithIDWasDeletedBlock`.
    ///
    /// ```swift
    /// op.recordZoneWithIDWasDeletedBlock = { zoneID in print("deleted:", zoneID.zoneName) }
    /// ```
    public var recordZoneWithIDWasDeletedBlock: ((RecordZone.ID) -> Void)?
    /// The token after a batch that more batches follow.
    public var changeTokenUpdatedBlock: ((ServerChangeToken) -> Void)?
    /// Called once at the end, as `CKFetchDatabaseChangesOperation.fetchDatabaseChangesResultBlock`:
    /// the token to fetch from next time and whether more changes remain (which only a fetch
    /// without ``fetchAllChanges`` leaves), or the error.
    ///
    /// ```swift
    /// op.fetchDatabaseChangesResultBlock = { result in if case .success(let (token, _)) = result { print(token) } }
    /// ```
    public var fetchDatabaseChangesResultBlock: ((Result<(serverChangeToken: ServerChangeToken, moreComing: Bool), any Error>) -> Void)?
    /// CloudKit's older final block: the token (`nil` on failure), whether more changes remain,
    /// and the error; after ``fetchDatabaseChangesResultBlock``.
    public var fetchDatabaseChangesCompletionBlock: ((ServerChangeToken?, Bool, (any Error)?) -> Void)?
    /// Accepted for CloudKit code, never called: CloudKit purges a zone when the user deletes
    /// the app's data in iCloud settings, which has no counterpart in a Stratus store.
    public var recordZoneWithIDWasPurgedBlock: ((RecordZone.ID) -> Void)?
    /// Accepted for CloudKit code, never called: Stratus stores have no account encryption
    /// keys for a user to reset.
    public var recordZoneWithIDWasDeletedDueToUserEncryptedDataResetBlock: ((RecordZone.ID) -> Void)?

    private var finalToken: ServerChangeToken?
    private var finalMoreComing = false

    /// An operation that fetches the zone changes after `previousServerChangeToken` (from the
    /// beginning when `nil`), as `CKFetchDatabaseChangesOperation(previousServerChangeToken:)`.
    ///
    /// ```swift
    /// let op = FetchDatabaseChangesOperation(previousServerChangeToken: databaseToken)
    /// ```
    public convenience init(previousServerChangeToken: ServerChangeToken? = nil) {
        self.init()
        self.previousServerChangeToken = previousServerChangeToken
    }

    /// An operation that fetches from the beginning, as `CKFetchDatabaseChangesOperation()`:
    /// set ``previousServerChangeToken`` to continue from a token.
    ///
    /// ```swift
    /// let op = FetchDatabaseChangesOperation()
    /// ```
    public override init() {
        previousServerChangeToken = nil
        super.init()
    }

    override func execute(engine: any StorageEngine, context: DatabaseContext) throws -> StratusError? {
        let limit = try Self.changeBatchSize(resultsLimit, default: Self.defaultResultsLimit, setting: "FetchDatabaseChangesOperation.resultsLimit")
        var position = try previousServerChangeToken?.position(for: nil, in: context)
        // A fetch from the beginning reports no deletion of a zone the client never had: none
        // at or before the database's sequence when it began, also in later batches, of this
        // operation or read with the tokens it hands out.
        let fromBeginning = previousServerChangeToken == nil
        var freshThrough = previousServerChangeToken?.freshThrough
        var delivered = 0
        while true {
            if isCancelled { return StratusError.cancelled("FetchDatabaseChangesOperation", completed: delivered) }
            let batch = try withRetry { try engine.fetchDatabaseChanges(after: position, limit: limit, in: context) }
            if fromBeginning && freshThrough == nil { freshThrough = batch.currentSequence }
            let knowsSequences = batch.sequences.count == batch.changes.count
            for (index, change) in batch.changes.enumerated() {
                switch change {
                case .zoneChanged(let id): recordZoneWithIDChangedBlock?(id)
                case .zoneDeleted(let id):
                    // Without the sequences, a fetch from the beginning drops every deletion.
                    let beforeFetchBegan = if let freshThrough, knowsSequences { batch.sequences[index] <= freshThrough } else { fromBeginning }
                    if beforeFetchBegan { continue }
                    recordZoneWithIDWasDeletedBlock?(id)
                }
                delivered += 1
            }
            position = batch.position
            // Past the sequence, the token is an ordinary one.
            let token = ServerChangeToken(zoneID: nil, context: context, position: batch.position,
                                          freshThrough: freshThrough.flatMap { $0 > batch.position.sequence ? $0 : nil })
            if batch.moreComing && fetchAllChanges {
                changeTokenUpdatedBlock?(token)
                continue
            }
            // Cancelled during the last batch: its changes were delivered; a re-run from the
            // previous token delivers them again, which a client applies idempotently.
            if isCancelled { return StratusError.cancelled("FetchDatabaseChangesOperation", completed: delivered) }
            finalToken = token
            finalMoreComing = batch.moreComing
            return nil
        }
    }

    override func complete(with error: StratusError?) {
        if let error {
            fetchDatabaseChangesResultBlock?(.failure(error))
            fetchDatabaseChangesCompletionBlock?(nil, false, error)
        } else if let finalToken {
            fetchDatabaseChangesResultBlock?(.success((serverChangeToken: finalToken, moreComing: finalMoreComing)))
            fetchDatabaseChangesCompletionBlock?(finalToken, finalMoreComing, nil)
        }
    }
}
