import Foundation

/// Deletes every record a query matches, the job behind `stratus delete --type … --where …`:
/// a pipeline of a query over every page (one snapshot, record IDs only) and a delete, a batch
/// at a time, with progress, a checkpoint to resume from, and cancellation.
///
/// ```swift
/// let query = Query(recordType: "Session", predicate: try QueryPredicate(format: "expires < %@", Date()))
/// let summary = try await RecordDeleter(database: database, query: query).run()
/// print("deleted \(summary.deleted), not found \(summary.notFound)")
/// ```
///
/// Each batch is deleted in one transaction; records that reference a deleted record with
/// `.deleteSelf` go with it. A record deleted by someone else (or by a cascade) after the query
/// read it counts as ``Summary/notFound``; one changed by someone else since is not deleted (it
/// may no longer match) and fails with `serverRecordChanged`, counted in ``Summary/failed``. With a ``PipelineCheckpoint`` each batch's
/// transaction records the query's cursor, and a run started again with it goes on after the
/// last committed batch.
public final class RecordDeleter: Sendable {
    /// How a delete runs.
    ///
    /// ```swift
    /// var options = RecordDeleter.Options()
    /// options.isDryRun = true
    /// let wouldGo = try await RecordDeleter(database: database, query: query, options: options).run().matched
    /// ```
    public struct Options: Sendable {
        /// Records per batch; each batch is deleted in one transaction.
        public var batchSize = ModifyRecordsOperation.maximumItemsPerBatch
        /// Read and count, delete nothing: ``Summary/matched`` says how many would go.
        public var isDryRun = false

        /// The defaults: batches of 400.
        public init() {}
    }

    /// Why a delete ended.
    ///
    /// ```swift
    /// if summary.end == .cancelled { print("stopped; run again with the checkpoint") }
    /// ```
    public enum End: Sendable, Hashable {
        /// Every matching record was read and settled.
        case finished
        /// ``RecordDeleter/cancel()`` or task cancellation stopped it after a batch.
        case cancelled
    }

    /// What a delete did.
    ///
    /// ```swift
    /// let summary = try await deleter.run()
    /// print(summary.deleted, summary.notFound, summary.failed)
    /// ```
    public struct Summary: Sendable, Hashable {
        /// Records the query matched and the run read.
        public var matched = 0
        /// Records deleted.
        public var deleted = 0
        /// Records that were gone when their batch was deleted: a `.deleteSelf` cascade of an
        /// earlier batch took them, or another writer.
        public var notFound = 0
        /// Records the store refused to delete.
        public var failed = 0
        /// Records the store refused to delete in the earlier runs of the job the checkpoint
        /// resumes (its batches' transactions counted them).
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

    /// A delete that could not go on: the error and what was done before it.
    ///
    /// ```swift
    /// do { _ = try await deleter.run() } catch let failure as RecordDeleter.Failure { print(failure.error) }
    /// ```
    public struct Failure: Error, CustomStringConvertible {
        /// What stopped the delete, with ``StratusError/pipelinePosition`` where a resumed run starts.
        public let error: any Error
        /// What was settled before the error.
        public let summary: Summary

        public var description: String { "\(error)" }
    }

    /// The database deleted from.
    public let database: Database
    /// Which records.
    public let query: Query
    /// The zone the query reads; nil: the default zone. (A ``QueryOperation`` without a zone reads
    /// every zone; a job that changes records names the zone it changes.)
    public let zoneID: RecordZone.ID?
    /// How the delete runs.
    public let options: Options
    private let job = PipelineJobRun(name: "stratus.delete")

    /// A delete of `query`'s records in `zoneID`.
    ///
    /// - Precondition: `options.batchSize` is positive (a programmer error).
    public init(database: Database, query: Query, zoneID: RecordZone.ID? = nil, options: Options = Options()) {
        precondition(options.batchSize > 0, "the batch size must be positive")
        self.database = database
        self.query = query
        self.zoneID = zoneID
        self.options = options
    }

    /// Asks a running delete to stop after the batch being deleted; callable from any thread.
    ///
    /// ```swift
    /// signalSource.setEventHandler { deleter.cancel() }
    /// ```
    public func cancel() { job.cancel() }

    /// Deletes every matching record.
    ///
    /// ```swift
    /// let summary = try await deleter.run(checkpoint: PipelineCheckpoint(job: "purge"), progress: { now in print(now.deleted) })
    /// ```
    ///
    /// - Parameters:
    ///   - checkpoint: where the run's position is kept; the run starts after it.
    ///   - failed: each record the store refused to delete, with why, once.
    ///   - progress: what is settled so far, after each batch.
    /// - Returns: what was done and why it ended.
    /// - Throws: ``Failure`` when the query, the store or the checkpoint fails.
    public func run(
        checkpoint: PipelineCheckpoint? = nil, failed: (@Sendable (Record.ID, StratusError) -> Void)? = nil,
        progress: (@Sendable (Summary) -> Void)? = nil
    ) async throws -> Summary {
        if options.isDryRun {
            do { try await database.checkWriteAccess() } catch { throw Failure(error: error, summary: Summary()) }
        }
        var start = Summary()
        if !options.isDryRun, let checkpoint {
            do { start.failedInEarlierRuns = try await checkpoint.failuresRecorded(in: database) } catch { throw Failure(error: error, summary: Summary()) }
        }
        let tally = PipelineJobTally(start)
        let read = QueryOperation(query: query)
        read.zoneID = zoneID ?? .default
        read.fetchAllResults = true
        read.resultsLimit = options.batchSize
        read.desiredKeys = []
        read.checkpoint = checkpoint
        // A dry run counts what a real run would delete, read where its deletions would go.
        read.readsLatestCommits = true
        let result: Result<Void, any Error>
        if options.isDryRun {
            let count = ConsumeOperation(consuming: read) { (records: [Record]) in
                // Counted apart from the call: `progress?(…)` evaluates nothing without a progress.
                let now = tally.update { summary -> Summary in
                    summary.matched += records.count
                    return summary
                }
                progress?(now)
            }
            result = await job.run([read, count], on: database) { finish in count.consumeResultBlock = finish }
        } else {
            let delete = DeleteRecordsOperation(deletingRecordsFrom: read) { _ in
                tally.update { $0.matched += 1 }
                return true
            }
            delete.batchSize = options.batchSize
            // A batch is settled when its last record is: every `batchSize` records settled.
            let batchSize = options.batchSize
            delete.perRecordDeletionBlock = { _, kind in
                let now = tally.update { summary -> Summary in
                    if kind == .deleted { summary.deleted += 1 } else { summary.notFound += 1 }
                    return summary
                }
                if (now.deleted + now.notFound + now.failed) % batchSize == 0 { progress?(now) }
            }
            delete.perRecordDeleteBlock = { id, outcome in
                guard case .failure(let error) = outcome else { return }
                let now = tally.update { summary -> Summary in
                    summary.failed += 1
                    return summary
                }
                failed?(id, StratusError.wrap(error))
                if (now.deleted + now.notFound + now.failed) % batchSize == 0 { progress?(now) }
            }
            result = await job.run([read, delete], on: database) { finish in
                delete.deleteRecordsResultBlock = { outcome in
                    progress?(tally.value)
                    finish(outcome)
                }
            }
        }
        return try PipelineJobOutcome.summary(result, tally: tally) { $0.end = .cancelled } failure: { Failure(error: $0, summary: $1) }
    }
}
