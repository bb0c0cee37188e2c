import Foundation

/// Sets fields on every record a query matches, the job behind `stratus update`: a pipeline
/// of a query over every page (one snapshot) and a save, a batch at a time, with progress,
/// a limit on failures, a checkpoint to resume from, and cancellation.
///
/// ```swift
/// let query = Query(recordType: "Todo", predicate: try QueryPredicate(format: "checked == 0"))
/// let updater = RecordUpdater(database: database, query: query, setting: ["checked": .int64(1)])
/// let summary = try await updater.run()
/// print("updated \(summary.updated), unchanged \(summary.unchanged), failed \(summary.failed)")
/// ```
///
/// **Writes.** Each batch (``Options/batchSize`` records) is written in one transaction, in
/// CloudKit's `update` mode: only the given fields change, and each record's change tag must
/// still be the one it was read with, so a record another writer changed meanwhile fails with
/// `serverRecordChanged` instead of being overwritten, and a record deleted meanwhile with
/// `unknownItem`. A record that already holds every value is not written (``Summary/unchanged``).
///
/// **Checkpoint.** With a ``PipelineCheckpoint``, each batch's transaction also records the
/// query's cursor, so a run stopped anywhere (a kill included) and started again with the same
/// checkpoint goes on after the last committed batch: every matching record is updated once.
///
/// **Failures.** With ``Options/maximumFailures`` N, the run stops once more than N records
/// failed: the batch in which that happened is written (but for its failed records), nothing
/// after it (``End/failureLimitReached``).
public final class RecordUpdater: Sendable {
    /// How an update runs.
    ///
    /// ```swift
    /// var options = RecordUpdater.Options()
    /// options.maximumFailures = 10
    /// let updater = RecordUpdater(database: database, query: query, setting: ["checked": .int64(1)], options: options)
    /// ```
    public struct Options: Sendable {
        /// Records per batch; each batch is written in one transaction.
        public var batchSize = 1_000
        /// Every check of the real run short of writing: each batch goes through the same write
        /// policy (types, production's refusals, change tags, security roles, sizes) applied to a
        /// picture of the store in memory, so ``Summary/updated`` counts what would be written
        /// and ``Summary/failed`` what the real run would refuse, for the same reasons. Nothing
        /// is written, and no checkpoint is kept.
        public var isDryRun = false
        /// Stop once more than this many records failed; nil: no limit.
        public var maximumFailures: Int?
        /// Batches read ahead of the one being written.
        public var batchesInFlight = 2

        /// The defaults: batches of 1,000, two read ahead, no limit.
        public init() {}
    }

    /// Why an update ended.
    ///
    /// ```swift
    /// if summary.end == .failureLimitReached { print("more than 10 records failed") }
    /// ```
    public enum End: Sendable, Hashable {
        /// Every matching record was read and settled.
        case finished
        /// ``RecordUpdater/cancel()`` or task cancellation stopped it after a batch.
        case cancelled
        /// More than ``Options/maximumFailures`` records failed.
        case failureLimitReached
    }

    /// What an update did.
    ///
    /// ```swift
    /// let summary = try await updater.run()
    /// if summary.end == .failureLimitReached { print("stopped after \(summary.failed) failures") }
    /// ```
    public struct Summary: Sendable, Hashable {
        /// Records the query matched and the run read.
        public var matched = 0
        /// Records written (in a dry run: that would be written).
        public var updated = 0
        /// Records that already held every value, so were not written.
        public var unchanged = 0
        /// Records the store refused (in a dry run: would refuse), each reported once.
        public var failed = 0
        /// Records the store refused in the earlier runs of the job the checkpoint resumes (its
        /// batches' transactions counted them): ``Options/maximumFailures`` counts them too.
        ///
        /// ```swift
        /// let jobHadFailures = summary.failed + summary.failedInEarlierRuns > 0
        /// ```
        public var failedInEarlierRuns = 0
        /// Why the run ended.
        public var end = End.finished

        /// An empty summary.
        public init() {}
    }

    /// An update that could not go on: the error and what was done before it.
    ///
    /// ```swift
    /// do { _ = try await updater.run() } catch let failure as RecordUpdater.Failure { print(failure.error, failure.summary.updated) }
    /// ```
    public struct Failure: Error, CustomStringConvertible {
        /// What stopped the update (the query's, the store's or the checkpoint's error), with
        /// ``StratusError/pipelinePosition`` where a resumed run starts.
        public let error: any Error
        /// What was settled before the error.
        public let summary: Summary

        public var description: String { "\(error)" }
    }

    /// The database written to.
    public let database: Database
    /// Which records, in which order (record-name order when it has no sort descriptors).
    public let query: Query
    /// The zone the query reads; nil: the default zone. (A ``QueryOperation`` without a zone reads
    /// every zone; a job that changes records names the zone it changes.)
    public let zoneID: RecordZone.ID?
    /// The values to set.
    public let values: [String: FieldValue]
    /// The fields to remove.
    public let removedKeys: Set<String>
    /// The keys of ``values`` set as encrypted values (``Record/encryptedValues``); the others
    /// keep the encryption each record's field has.
    public let encryptedKeys: Set<String>
    /// How the update runs.
    public let options: Options
    private let job = PipelineJobRun(name: "stratus.update")

    /// An update of `query`'s records in `zoneID`, setting `values` (those of `encryptedKeys`
    /// as encrypted values) and removing `removedKeys`.
    ///
    /// ```swift
    /// let updater = RecordUpdater(database: database, query: query, setting: ["status": .string("done")], removing: ["claimedBy"])
    /// let sealing = RecordUpdater(database: database, query: query, setting: ["code": .string("7Q")], encrypting: ["code"])
    /// ```
    ///
    /// - Precondition: `options.batchSize` and `options.batchesInFlight` are positive, and a
    ///   key is not both set and removed (programmer errors).
    public init(
        database: Database, query: Query, zoneID: RecordZone.ID? = nil, setting values: [String: FieldValue], removing removedKeys: Set<String> = [],
        encrypting encryptedKeys: Set<String> = [], options: Options = Options()
    ) {
        precondition(options.batchSize > 0 && options.batchesInFlight > 0, "batch size and batches in flight must be positive")
        precondition(removedKeys.isDisjoint(with: values.keys), "a field is either set or removed")
        self.database = database
        self.query = query
        self.zoneID = zoneID
        self.values = values
        self.removedKeys = removedKeys
        self.encryptedKeys = encryptedKeys.intersection(values.keys)
        self.options = options
    }

    /// Asks a running update to stop after the batch being written; callable from any thread.
    ///
    /// ```swift
    /// signalSource.setEventHandler { updater.cancel() }
    /// ```
    public func cancel() { job.cancel() }

    /// Reads every matching record and writes the values into those that do not hold them.
    ///
    /// ```swift
    /// let summary = try await updater.run(checkpoint: PipelineCheckpoint(job: "close-2024")) { id, error in
    ///     print(id.recordName, error.message)
    /// } progress: { now in print(now.matched) }
    /// ```
    ///
    /// - Parameters:
    ///   - checkpoint: where the run's position is kept; the run starts after it. A dry run
    ///     neither reads nor keeps one.
    ///   - failed: each record the store refused, with why, once.
    ///   - progress: what is settled so far, once for each batch read (the records it needs
    ///     not write, and the batches written before it), and at the end.
    /// - Returns: what was done and why it ended.
    /// - Throws: `invalidArguments` for values no record may hold (before anything is read);
    ///   ``Failure`` when the query, the store or the checkpoint fails.
    public func run(
        checkpoint: PipelineCheckpoint? = nil, failed: (@Sendable (Record.ID, StratusError) -> Void)? = nil,
        progress: (@Sendable (Summary) -> Void)? = nil
    ) async throws -> Summary {
        try checkValues()
        let values = self.values, removedKeys = self.removedKeys, encryptedKeys = self.encryptedKeys, options = self.options
        if options.isDryRun {
            do { try await database.checkWriteAccess() } catch { throw Failure(error: error, summary: Summary()) }
        }
        var start = Summary()
        if !options.isDryRun, let checkpoint {
            do { start.failedInEarlierRuns = try await checkpoint.failuresRecorded(in: database) } catch { throw Failure(error: error, summary: Summary()) }
            // The limit counts the whole job: a run after the one it stopped stops at once.
            if let maximum = options.maximumFailures, start.failedInEarlierRuns > maximum {
                start.end = .failureLimitReached
                return start
            }
        }
        let tally = PipelineJobTally(start)
        let read = QueryOperation(query: query)
        read.zoneID = zoneID ?? .default
        read.fetchAllResults = true
        read.resultsLimit = options.batchSize
        // The fields set are the only ones compared and written.
        read.desiredKeys = (Set(values.keys).union(removedKeys)).sorted()
        // A dry run writes nothing, its position included.
        read.checkpoint = options.isDryRun ? nil : checkpoint
        read.recordOutput.maximumBatchesInFlight = options.batchesInFlight
        let change: @Sendable ([Record]) -> [Record] = { records in
            let changed = records.filter { record in
                if values.contains(where: { record.fieldValue(forKey: $0.key) != $0.value }) || removedKeys.contains(where: { record.fieldValue(forKey: $0) != nil }) {
                    return true
                }
                // A value held plain where it is to be encrypted changes too.
                guard !encryptedKeys.isEmpty else { return false }
                let encryptedNow = record.encryptedKeys
                return encryptedKeys.contains { !encryptedNow.contains($0) }
            }
            for record in changed {
                let encryptedNow = record.encryptedKeys
                for (key, value) in values { record.setFieldValue(value, forKey: key, encrypted: encryptedKeys.contains(key) || encryptedNow.contains(key)) }
                for key in removedKeys { record.setFieldValue(nil, forKey: key) }
            }
            let now = tally.update { summary -> Summary in
                summary.matched += records.count
                summary.unchanged += records.count - changed.count
                return summary
            }
            // Once a batch: what is settled so far (the batches written before it, and this
            // one's records that need no write).
            progress?(now)
            return changed
        }
        // A dry run is the real run's write policy applied to a simulation of the store: the
        // same operation, whose writes go to the simulation (``WriteSimulation``).
        let save = ModifyRecordsOperation(savingRecordsFrom: read, transform: change)
        save.writeMode = .update
        save.isAtomic = false
        save.itemsPerBatch = options.batchSize
        save.simulation = options.isDryRun ? WriteSimulation() : nil
        // Outcomes are counted, never looked at: the saves need not make stored records.
        save.perRecordBlocksGetStoredRecords = false
        save.perRecordSaveBlock = { [job] id, outcome in
            switch outcome {
            case .success:
                tally.update { $0.updated += 1 }
            case .failure(let error):
                let error = StratusError.wrap(error)
                failed?(id, error)
                let passed = tally.update { summary -> Bool in
                    summary.failed += 1
                    guard let maximum = options.maximumFailures, summary.failed + summary.failedInEarlierRuns > maximum, summary.end == .finished else { return false }
                    summary.end = .failureLimitReached
                    return true
                }
                if passed { job.cancel() }
            }
        }
        let result = await job.run([read, save], on: database) { finish in
            save.modifyRecordsResultBlock = { outcome in
                progress?(tally.value)
                finish(outcome)
            }
        }
        return try PipelineJobOutcome.summary(result, tally: tally) { summary in
            if summary.end == .finished { summary.end = .cancelled }
        } failure: { Failure(error: $0, summary: $1) }
    }

    /// Refuses values no record may hold, naming the field: checked on a record in the zone the
    /// update writes, where the values' references must point.
    private func checkValues() throws {
        let probe = Record(recordType: query.recordType, recordID: Record.ID(recordName: "update", zoneID: zoneID ?? .default))
        for (key, value) in values { probe.setFieldValue(value, forKey: key) }
        for key in removedKeys { probe.setFieldValue(nil, forKey: key) }
        do {
            _ = try PreparedSave(probe)
        } catch {
            throw StratusError(.invalidArguments, "the values to set cannot be stored: \(error.message)")
        }
    }
}

/// How a job's pipeline ended, as its summary or failure.
enum PipelineJobOutcome {
    /// The summary of a pipeline that finished (item failures are in it) or was cancelled
    /// (`markCancelled` says so in it), or the failure of one that failed as a whole.
    static func summary<Summary: Sendable, Failure: Error>(
        _ result: Result<Void, any Error>, tally: PipelineJobTally<Summary>,
        markCancelled: (inout Summary) -> Void, failure: (any Error, Summary) -> Failure
    ) throws -> Summary {
        switch result {
        case .success:
            return tally.value
        case .failure(let error as StratusError) where error.code == .partialFailure:
            return tally.value
        case .failure(let error as StratusError) where error.code == .operationCancelled:
            var summary = tally.value
            markCancelled(&summary)
            return summary
        case .failure(let error):
            throw failure(error, tally.value)
        }
    }
}
