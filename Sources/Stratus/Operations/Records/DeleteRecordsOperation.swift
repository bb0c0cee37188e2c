import Foundation

/// Deletes records by ID, or every record that matches a query, in batches.
///
/// Each deleted record is reported through ``perRecordDeleteBlock``. Cancelling stops at the
/// next batch; the final result is then `operationCancelled` with `completedItemCount` set to
/// the number of records deleted, also when the cancellation came during the last batch. Deleting a record that does not exist succeeds, so a delete
/// job can be re-run.
///
/// ```swift
/// let purge = DeleteRecordsOperation(query: try Query(recordType: "Todo", format: "checked == %@", 1))
/// purge.perRecordDeleteBlock = { id, _ in print("deleted", id.recordName) }
/// purge.deleteRecordsResultBlock = { print($0) }
/// database.add(purge)
/// ```
public final class DeleteRecordsOperation: DatabaseOperation, @unchecked Sendable {
    override var recordsPipelinePositions: Bool { true }

    /// The IDs of the records to delete, when ``query`` is `nil`.
    public var recordIDs: [Record.ID]?
    /// When set, the operation deletes every record that matches it in ``zoneID``, instead of
    /// ``recordIDs``.
    public var query: Query?
    /// The zone a query deletes from; the default zone when `nil`. Unlike a ``QueryOperation``,
    /// whose `nil` zone is every zone as in CloudKit: a Stratus job that deletes names the zones
    /// it deletes in (to delete in every zone, hand a query's records on with
    /// ``init(deletingRecordsFrom:where:)``).
    public var zoneID: RecordZone.ID?
    /// Records deleted per transaction.
    public var batchSize = ModifyRecordsOperation.maximumItemsPerBatch
    /// Each record deleted, or that failed to be, with success or its own error.
    ///
    /// ```swift
    /// purge.perRecordDeleteBlock = { id, result in print(id.recordName, result) }
    /// ```
    public var perRecordDeleteBlock: ((Record.ID, Result<Void, any Error>) -> Void)?
    /// Called once at the end: success, `partialFailure` when some record failed,
    /// `operationCancelled` with ``StratusError/completedItemCount``, or the error that stopped
    /// the deletion.
    ///
    /// ```swift
    /// purge.deleteRecordsResultBlock = { result in if case .failure(let error) = result { print(error) } }
    /// ```
    public var deleteRecordsResultBlock: ((Result<Void, any Error>) -> Void)?
    /// A Stratus extension: for each record deleted successfully, whether a stored record was
    /// deleted or none was there (CloudKit reports both as success); called just before
    /// ``perRecordDeleteBlock``.
    ///
    /// ```swift
    /// purge.perRecordDeletionBlock = { id, kind in if kind == .notFound { print("no", id.recordName) } }
    /// ```
    public var perRecordDeletionBlock: ((Record.ID, RecordDeletionKind) -> Void)?

    /// The producer's batches and which of their records to delete, in a pipeline.
    private var input: PipelineChannel<Record>?
    private var filter: (@Sendable (Record) -> Bool)?

    /// An operation that deletes the records with `recordIDs`.
    ///
    /// ```swift
    /// let purge = DeleteRecordsOperation(recordIDs: [Record.ID(recordName: "todo-1")])
    /// ```
    public init(recordIDs: [Record.ID]) {
        self.recordIDs = recordIDs
        super.init()
    }

    /// An operation that deletes every record `query` matches in the zone `zoneID` (the default
    /// zone when `nil`).
    ///
    /// ```swift
    /// let purge = DeleteRecordsOperation(query: Query(recordType: "Todo"), zoneID: RecordZone.ID(zoneName: "Lists"))
    /// ```
    public init(query: Query, zoneID: RecordZone.ID? = nil) {
        self.query = query
        self.zoneID = zoneID
        super.init()
    }

    /// A pipeline stage: deletes the records of each batch `producer` produces (those passing
    /// `filter`), while the producer goes on; see ``ProducingOperation``.
    ///
    /// Each batch is deleted in transactions of ``batchSize`` records, or in one transaction
    /// together with the source's position in a pipeline with a ``PipelineCheckpoint``.
    /// ``recordIDs``, when set, are deleted first.
    ///
    /// ```swift
    /// let expired = QueryOperation(query: try Query(recordType: "Session", format: "expires < %@", Date()))
    /// expired.fetchAllResults = true
    /// expired.desiredKeys = []                        // the IDs are enough
    /// let purge = DeleteRecordsOperation(deletingRecordsFrom: expired)
    /// ```
    public convenience init<Producer: ProducingOperation>(
        deletingRecordsFrom producer: Producer, where filter: (@Sendable (Record) -> Bool)? = nil
    ) where Producer.Element == Record {
        self.init(recordIDs: [])
        self.filter = filter
        input = attach(to: producer)
    }

    override func execute(engine: any StorageEngine, context: DatabaseContext) throws -> StratusError? {
        if batchSize <= 0 {
            return StratusError(.invalidArguments, "DeleteRecordsOperation.batchSize is \(batchSize); it must be 1 or more")
        }
        var errors: [Record.ID: StratusError] = [:]
        var deleted = 0
        var attempted = 0

        func deleteBatch(_ ids: [Record.ID], progress: JobProgressEntry? = nil, readTags: [Record.ID: String] = [:]) throws {
            var request = ModifyRequest(saves: [], recordIDsToDelete: ids, writeMode: .ifServerRecordUnchanged, isAtomic: false)
            request.jobProgress = progress
            request.deletedRecordTags = readTags
            let outcome: ModifyOutcome
            do {
                outcome = try withRetry { try RecordWriteExecutor.apply(request, engine: engine, context: context) }
            } catch {
                // The final result says how many records were deleted before the failure.
                throw StratusError.wrap(error).completing(deleted)
            }
            RecordWriteExecutor.collectReleasedAssets(outcome, engine: engine, context: context)
            for (index, id) in ids.enumerated() {
                let result = index < outcome.deleteResults.count ? outcome.deleteResults[index] : .failure(StratusError(.internalError, "the store gave no result for deleting '\(id.recordName)'", recordID: id))
                switch result {
                case .success(let existed):
                    deleted += 1
                    perRecordDeletionBlock?(id, existed ? .deleted : .notFound)
                case .failure(let error): errors[id] = error
                }
                perRecordDeleteBlock?(id, result.map { _ in () }.mapError { $0 })
            }
            attempted += ids.count
        }
        func cancelled() -> StratusError {
            var error = stoppedError("DeleteRecordsOperation", completed: deleted)
            error.partialErrorsByRecordID = errors
            return error
        }
        /// Checks names and zones, reporting the IDs that cannot be deleted; answers the others.
        func valid(_ ids: [Record.ID]) -> [Record.ID] {
            var valid: [Record.ID] = []
            for id in ids {
                do {
                    try ModifyRecordsOperation.checkDeletion(id, context)
                    valid.append(id)
                } catch {
                    errors[id] = error
                    perRecordDeleteBlock?(id, .failure(error))
                    attempted += 1
                }
            }
            return valid
        }

        if let query {
            let zone = zoneID ?? .default
            try ModifyRecordsOperation.checkZone(Record.ID(recordName: "query", zoneID: zone), context)
            let compiled = try QueryAdmission.admit(CompiledQuery(query, zoneID: zone, desiredKeys: []), engine: engine, context: context)
            var position: QueryPosition?
            // What it deletes is read where the deletions go: a lagging standby would hide records.
            var reading = context
            reading.readsLatestCommits = true
            repeat {
                if shouldStop { return cancelled() }
                let page = try withRetry { try engine.queryRecords(compiled, in: reading, after: position, limit: min(batchSize, Self.largestBatch)) }
                if !page.records.isEmpty { try deleteBatch(page.records.map(\.recordID), readTags: Self.changeTags(of: page.records)) }
                position = page.nextPosition
            } while position != nil
        } else {
            let ids = valid(recordIDs ?? [])
            for start in stride(from: 0, to: ids.count, by: batchSize) {
                if shouldStop { return cancelled() }
                try deleteBatch(Array(ids[start..<min(ids.count, start + batchSize)]))
            }
        }
        // A cancellation during the last batch is observed as during any other: the batch's
        // deletions were reported, and the operation did not finish as asked.
        if shouldStop { return cancelled() }
        if let input {
            while let batch = input.receive() {
                if shouldStop { break }
                let chosen = batch.elements.filter { filter?($0) ?? true }
                let ids = valid(chosen.map(\.recordID))
                let tags = Self.changeTags(of: chosen)
                if let progress = jobProgress(for: batch) {
                    // The deletions refused before the transaction count with its own.
                    try deleteBatch(ids, progress: progress.adding(chosen.count - ids.count), readTags: tags)
                } else {
                    // A batch is deleted whole once begun, so that the position after it stays exact.
                    for start in stride(from: 0, to: ids.count, by: batchSize) {
                        try deleteBatch(Array(ids[start..<min(ids.count, start + batchSize)]), readTags: tags)
                    }
                }
                let goesOn: Bool
                do { goesOn = try finishBatch(batch, from: input, handingOn: [Record](), to: nil) } catch { throw StratusError.wrap(error).completing(deleted) }
                guard goesOn else { break }
            }
            if shouldStop { return cancelled() }
        }
        return Self.partialFailure(errors, of: attempted)
    }

    /// The change tag of each record read, which its deletion must still find: a record
    /// changed after the read may no longer match what selected it.
    private static func changeTags(of records: [Record]) -> [Record.ID: String] {
        var tags: [Record.ID: String] = [:]
        for record in records { if let tag = record.recordChangeTag { tags[record.recordID] = tag } }
        return tags
    }

    override func complete(with error: StratusError?) {
        deleteRecordsResultBlock?(error.map { .failure($0) } ?? .success(()))
    }
}
