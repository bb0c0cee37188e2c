import Foundation
import Synchronization

/// Imports records from a ``RecordSource`` into a database in batches, the job behind
/// `stratus import`: batches in flight while the next is read, every rejected item reported
/// once and in input order, an optional limit on rejects, checkpoints to resume from, progress,
/// and cancellation that stops after the current batch.
///
/// ```swift
/// var options = RecordImporter.Options()
/// options.writeMode = .create
/// options.maximumRejects = 10
/// let importer = RecordImporter(database: container.publicCloudDatabase, options: options)
/// let summary = try await importer.run(from: reader, rejects: rejectLog)
/// print("created \(summary.created), failed \(summary.failed)")
/// ```
///
/// **Batches.** Records are written ``Options/batchSize`` at a time, each batch in one
/// transaction (split only where it passes ``ModifyRecordsOperation/maximumBytesPerBatch``);
/// a batch also ends once its records hold 32 MiB of field data, so that memory stays bounded
/// for large records whatever the batch size.
/// A store request names each record once and saves before it deletes: a record named again,
/// or a save after a deletion, starts the batch's next segment, a request of its own written
/// after the one before it in the batch's transaction, so that every line applies in input
/// order: a deletion's `.deleteSelf` cascade never takes a record saved after it, and a child
/// saved after its parent's deletion is refused. Input whose names repeat (a change feed
/// replayed) so takes as many transactions as distinct names. With a reject limit
/// (``Options/maximumRejects``), or while records wait for a parent, such an item starts a new
/// batch instead.
///
/// **Parents.** A record whose parent is neither stored nor in its batch (nor in a batch
/// before it) waits, with the later items of the same record, until a batch writes its
/// parent; then it goes into the next batch. So an input that holds a child before its
/// parent imports whatever the batch size. What still waits when the input ends is written
/// then, and the store decides: a parent that never came makes it `referenceViolation`.
/// Checkpoints name the waiting items (``ImportCheckpoint/pendingItems``), so a resumed
/// import reads them again.
///
/// **Rejects.** An item is rejected when the source rejects it, when the record is not valid
/// (``Record/validateForSave()``), or when the store refuses it; each is reported to the sink
/// once, in input order (a record that waited for its parent until the input ended is
/// reported then), and counted in ``Summary/failed``.
///
/// **Limit.** With ``Options/maximumRejects`` N the import stops at the rejected item that
/// makes N + 1, whatever rejected it: the items before it are imported, none after it. To
/// know which item that is before anything after it is written, a batch that could reach the
/// limit is first tried all or nothing (in one transaction, in any zone: the try is the
/// job's own) and, when it has rejects, written again up to the limit without them. Without
/// rejects this costs nothing. A resumed import counts the rejects of the
/// runs before it (``ImportCheckpoint/itemsRejected``, ``Summary/failedInEarlierRuns``): the
/// limit is the job's, so a run resumed after the limit stopped it stops again at once.
///
/// **Atomic.** With ``Options/isAtomic`` every record is written in one transaction, or none
/// is: any rejected item means nothing is written (``End/atomicImportRejected``). A record
/// in a zone without the atomic capability makes the import fail with `invalidArguments`
/// (``Failure/Stage/atomicity``) before anything is written, and more than ``ModifyRecordsOperation/maximumAtomicItems``
/// items with `limitExceeded`.
///
/// **Stopping.** ``cancel()`` (or cancelling the task) stops after the batch being read; the
/// batches in flight are settled and the checkpoint saved. A failure of the store or the input
/// throws ``Failure``, which carries what was done.
public final class RecordImporter: Sendable {
    /// How an import writes.
    ///
    /// ```swift
    /// var options = RecordImporter.Options()
    /// options.writeMode = .create
    /// options.maximumRejects = 100
    /// let importer = RecordImporter(database: database, options: options)
    /// ```
    public struct Options: Sendable {
        /// CloudKit's operation type for every record.
        public var writeMode: RecordWriteMode = .forceUpdate
        /// Whether a `.forceUpdate` import of a source whose records are whole versions
        /// (``RecordSource/holdsWholeVersions``: a CloudKit `changes/zone` answer) writes them as
        /// `.forceReplace`: a mirror then holds each record as its newest version is, without
        /// the fields that version removed. Off by default, as a program that chose
        /// `.forceUpdate` merges; `stratus import` turns it on when no `--mode` is given. Leave
        /// it off for an answer to a request that named `desiredKeys`, which holds only those fields.
        ///
        /// ```swift
        /// options.replacesWithWholeVersions = true   // a mirror of a zone's changes
        /// ```
        public var replacesWithWholeVersions = false
        /// Items (records, deletions and rejected items) per batch; each batch is written in
        /// one transaction and checkpointed. `nil`: what suits the store, 2,000 on SQLite and
        /// 10,000 on PostgreSQL, where each commit waits for the server's log flush.
        public var batchSize: Int?
        /// All or nothing in one transaction.
        public var isAtomic = false
        /// Check everything as the real run would and write nothing: every batch goes through
        /// the same checks and write policy as a real run's (types and schema growth,
        /// production's refusals, the write mode and change tags, parents, references, roles,
        /// asset sources), applied to a picture of the store in memory that the batches before
        /// it changed as the real run would have. The store is only read, never changed; a
        /// checkpoint store is refused (`invalidArguments`). ``Summary`` counts what the real run would do, and
        /// ``Summary/valid`` how many items it would write.
        public var isDryRun = false
        /// Stop at the rejected item that makes this many plus one, counting those of the runs a
        /// checkpoint resumes; nil: no limit.
        public var maximumRejects: Int?
        /// Keep the change tags, dates and users the records carry (in the modes that do not
        /// check tags), so that an export imports back exactly.
        public var preservesSystemFields = true
        /// Batches handed to the store before the oldest is waited for, so that the store's
        /// writer always has the next one; 1 with a checkpoint store or a reject limit.
        public var batchesInFlight = 3
        /// Create the zones the input names that do not exist (as `fetchChanges` and `atomic`
        /// zones, like CloudKit's `REGULAR_CUSTOM_ZONE`); ``Summary/createdZones`` lists them.
        /// Without it, the first record in a missing zone stops the import with `zoneNotFound`,
        /// once, naming the zone and how to create it.
        public var createsZones = false
        /// Import zones the input says another user owns (their `ownerRecordName`) as the
        /// current user's zones; each record keeps the owner's name, which an export writes
        /// back. Without it such a record stops the import with `permissionFailure`, once.
        /// Zones whose owner is the current user (by name), and every database's one default
        /// zone, are the current user's whatever the input calls their owner.
        public var importsOwnersAsCurrentUser = false
        /// The zone every record must be in: a record that names another stops the import with
        /// `invalidArguments`, once. Records that name no zone go into the reader's zone.
        public var requiredZone: RecordZone.ID?
        /// The most bytes one asset's content may have.
        public var maximumAssetSize = Asset.maximumContentSize
        /// Restore CloudKit's own records as CloudKit made them: the `Users` records of the
        /// public database, one per user and named by the user's record name (`_…`), which no
        /// user's save may create (their type grants CREATE to no role). With it, an import
        /// writes them whatever the security roles say, and a new one's creator is the user it
        /// names (unless the record keeps the creator it carries, as an export's do). Their
        /// `roles` values are kept as values: roles come from the user directory. A restored
        /// share keeps the acceptance its input gives each participant, as CloudKit's export
        /// says they gave it: give this import to those trusted with the store itself. Pair it
        /// with a reader that keeps CloudKit's own records (`RecordReadOptions.keepsSystemRecords`).
        ///
        /// ```swift
        /// var options = RecordImporter.Options()
        /// options.writesSystemRecords = true
        /// ```
        public var writesSystemRecords = false

        /// The defaults: `forceUpdate`, batches of the size that suits the store (2,000 on SQLite,
        /// 10,000 on PostgreSQL), three in flight, no reject limit.
        public init() {}
    }

    /// Why an import ended.
    ///
    /// ```swift
    /// if summary.end == .rejectLimitReached { print("stopped after \(summary.failed) rejects") }
    /// ```
    public enum End: Sendable, Hashable {
        /// The whole input was read and settled.
        case finished
        /// ``RecordImporter/cancel()`` or task cancellation stopped it after a settled batch.
        case cancelled
        /// ``Options/maximumRejects`` was passed; nothing after the last reject was written.
        case rejectLimitReached
        /// An atomic import had rejected items, so nothing was written.
        case atomicImportRejected
    }

    /// What an import did.
    ///
    /// ```swift
    /// let summary = try await importer.run(from: reader)
    /// if summary.end == .rejectLimitReached { print("stopped after \(summary.failed) rejects") }
    /// ```
    public struct Summary: Sendable, Hashable {
        /// Input items read (records, deletions, rejected items), apart from those skipped.
        public var read = 0
        /// Items a checkpoint of an earlier run said were settled.
        public var skipped = 0
        /// Records that did not exist and were written (in a dry run: would be).
        public var created = 0
        /// Records that existed and were written (in a dry run: would be).
        public var updated = 0
        /// Records identical to the stored ones, so not written.
        public var unchanged = 0
        /// Deletions applied (a deletion of a record that does not exist counts too).
        public var deleted = 0
        /// Rejected items, each reported once (in a dry run: those the real run would reject).
        public var failed = 0
        /// Items that the earlier runs of a resumed import rejected and reported (its
        /// checkpoint counts them; 0 without one): ``failed`` counts this run's only. The reject
        /// limit counts both.
        ///
        /// ```swift
        /// let jobHadRejects = summary.failed + summary.failedInEarlierRuns > 0
        /// ```
        public var failedInEarlierRuns = 0
        /// A dry run's records and deletions that the real run would save or delete (created,
        /// updated, unchanged and deleted together); 0 for a real run.
        public var valid = 0
        /// Zones the import created (``Options/createsZones``), or a dry run would create.
        public var createdZones: [RecordZone.ID] = []
        /// Why the import ended.
        public var end = End.finished

        /// An empty summary.
        public init() {}
    }

    /// How far an import is, reported while it runs.
    ///
    /// ```swift
    /// _ = try await importer.run(from: reader) { progress in print(progress.summary.read - progress.pending) }
    /// ```
    public struct Progress: Sendable {
        /// What is settled so far (`read` includes items still pending).
        public var summary: Summary
        /// Items read but not settled yet.
        public var pending: Int
        /// Bytes of input consumed (``RecordSource/bytesRead``).
        public var bytesRead: Int
    }

    /// An import that could not go on: the error, where it came from, and what was done.
    ///
    /// ```swift
    /// do { _ = try await importer.run(from: reader) } catch let failure as RecordImporter.Failure {
    ///     print(failure.stage, failure.error, failure.summary.created)
    /// }
    /// ```
    public struct Failure: Error, CustomStringConvertible {
        /// Where the error came from.
        ///
        /// ```swift
        /// if failure.stage == .input { print("the input could not be read: \(failure.error)") }
        /// ```
        public enum Stage: Sendable, Hashable {
            /// The source could not be read further.
            case input
            /// The store failed a batch as a whole (or refused an atomic import's size).
            case store
            /// An atomic import (``Options/isAtomic``) names a zone without the atomic
            /// capability (the default zone, or one created without it): its records could not be
            /// written all or nothing, and nothing was written.
            case atomicity
            /// The reject sink could not keep a rejection.
            case rejects
            /// The checkpoint store could not load or save.
            case checkpoint
            /// A record's zone cannot be written: it does not exist, belongs to another owner,
            /// or is not the required zone.
            case zones
        }

        /// Where the error came from.
        public let stage: Stage
        /// The error itself.
        public let error: any Error
        /// What was settled before the error. Its ``Summary/end`` says nothing here: the
        /// import ended by this failure, in none of ``End``'s ways.
        public let summary: Summary

        public var description: String { "\(error)" }

        /// Whether the error is a cancellation that reached a store call.
        var isCancellation: Bool { (error as? StratusError)?.code == .operationCancelled }
    }

    /// The database written to.
    public let database: Database
    /// How the importer writes.
    public let options: Options
    private let cancelled = Atomic<Bool>(false)

    /// An importer into `database`.
    ///
    /// ```swift
    /// let importer = RecordImporter(database: container.privateCloudDatabase)
    /// ```
    ///
    /// - Precondition: `options.batchSize` (when given) and `options.batchesInFlight` are
    ///   positive (a programmer error).
    public init(database: Database, options: Options = Options()) {
        precondition((options.batchSize ?? 1) > 0, "the batch size must be positive")
        precondition(options.batchesInFlight > 0, "batches in flight must be positive")
        self.database = database
        self.options = options
    }

    /// Asks a running import to stop after the batch being read; callable from any thread. A
    /// cancel before ``run(from:rejects:checkpoint:progress:)`` stops that run after its first
    /// batch; once a run has returned, the importer can run again.
    ///
    /// ```swift
    /// signalSource.setEventHandler { importer.cancel() }
    /// ```
    public func cancel() { cancelled.store(true, ordering: .relaxed) }

    /// Whether ``cancel()`` was called or the running task was cancelled.
    public var isCancelled: Bool { cancelled.load(ordering: .relaxed) || Task.isCancelled }

    /// Reads `source` to its end (or to a stop) and writes what it holds.
    ///
    /// ```swift
    /// let summary = try await importer.run(from: reader, rejects: rejectFile, checkpoint: checkpointFile) { progress in
    ///     print(progress.summary.created, progress.bytesRead)
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - rejects: where each rejected item goes; nil drops them (they are still counted).
    ///   - checkpoint: where the import's progress is kept; its checkpoint is skipped to first.
    ///   - progress: called on the importer's task every few hundred items and after each batch.
    ///
    /// The source, the sink and the checkpoint store are used by the import's own task, not the
    /// caller's actor: under Swift 6, make them in the function that calls `run` (or have them
    /// be `Sendable`, their state behind a `Mutex`), rather than keeping them in an actor's (or
    /// the main actor's) properties, which the compiler refuses to send. A checkpoint kept
    /// between runs lives in a file (or the store), read by a checkpoint store made for the run.
    /// - Returns: what was done and why it ended.
    /// - Throws: ``Failure`` when the input, the store, the reject sink or the checkpoint store
    ///   fails; `invalidArguments` (in a ``Failure``) for an atomic import or a dry run with a
    ///   checkpoint store, or an atomic import into a zone without the atomic capability.
    public func run(
        from source: some RecordSource, rejects: (any RecordRejectSink)? = nil, checkpoint: (any ImportCheckpointStore)? = nil,
        progress: (@Sendable (Progress) -> Void)? = nil
    ) async throws -> Summary {
        source.willSave(as: options.writeMode)
        // A cancel asked of this run ends with it: an importer kept for a nightly job runs again.
        defer { cancelled.store(false, ordering: .relaxed) }
        let run = ImportRun(importer: self, source: source, rejects: rejects, checkpointStore: checkpoint, progress: progress)
        return try await run.run()
    }
}
