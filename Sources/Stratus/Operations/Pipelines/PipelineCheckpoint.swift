import Foundation

/// Where a pipeline keeps its position, so that a pipeline stopped anywhere (a kill included)
/// and run again with the same checkpoint goes on after the last batch it completed.
///
/// Set it on the pipeline's source (``QueryOperation``, ``FetchRecordZoneChangesOperation``,
/// ``FetchRecordsOperation``, ``ReadRecordsOperation``). The stage that writes to the store
/// (a ``ModifyRecordsOperation`` or ``DeleteRecordsOperation`` the batches reach) records the
/// source's position under the checkpoint's ``job`` name in the same transaction as each
/// batch's writes, so the store itself says exactly what committed, and each batch is written
/// in one transaction. A pipeline has one such stage, on the store its source reads: two, or
/// one on another store, are refused (`invalidArguments`) before anything is read, as no one
/// transaction would say the position. A ``PipelineCheckpointStore`` (a file) also gets the position after each
/// batch every stage completed: for stages that write elsewhere, that is the only record, and a
/// batch completed after the last save is done again. The source starts after the store's
/// position, else the file's. When the whole pipeline completes, both are removed.
///
/// ```swift
/// let query = QueryOperation(query: Query(recordType: "Product"))
/// query.fetchAllResults = true
/// query.checkpoint = PipelineCheckpoint(job: "reprice-2025-06")
/// let reprice = ModifyRecordsOperation(savingRecordsFrom: query) { products in
///     for product in products { product["price"] = (product["price"] as? Double ?? 0) * 1.1 }
///     return products
/// }
/// database.add(query); database.add(reprice)     // killed? run the same code again
/// ```
///
/// Writes check change tags (``ModifyRecordsOperation/SavePolicy/ifServerRecordUnchanged``, the
/// default), so a record changed by someone else since the source read it fails with
/// `serverRecordChanged` instead of being overwritten, and two overlapping runs of one job
/// cannot both write a record. A query resumes after its cursor: a transform that changes the
/// query's sort fields can move a record past the cursor, where a resumed run reads it again.
public final class PipelineCheckpoint: Sendable {
    /// The job's name in the store.
    public let job: String
    /// Where the position is also kept after each completed batch, if anywhere.
    public let store: (any PipelineCheckpointStore)?

    /// A checkpoint kept in the store under `job`.
    ///
    /// ```swift
    /// query.checkpoint = PipelineCheckpoint(job: "nightly-cleanup")
    /// ```
    ///
    /// - Precondition: `job` is not empty (a programmer error).
    public init(job: String) {
        precondition(!job.isEmpty, "a pipeline checkpoint needs a job name")
        self.job = job
        self.store = nil
    }

    /// A checkpoint kept by `store` (a file) and in the store under the job name `store` keeps:
    /// one is made and saved before anything is written when `store` has none.
    ///
    /// ```swift
    /// query.checkpoint = try PipelineCheckpoint(store: PipelineCheckpointFile(path: "reprice.checkpoint", belongsTo: "reprice by 10%"))
    /// ```
    ///
    /// - Throws: what `store` throws when it cannot be read or written.
    public init(store: any PipelineCheckpointStore) throws {
        if let saved = try store.load() {
            self.job = saved.job
        } else {
            let job = "pipeline-" + UUID().uuidString.lowercased()
            try store.save(PipelineCheckpointStoreEntry(job: job, position: nil))
            self.job = job
        }
        self.store = store
    }
}

/// What a ``PipelineCheckpointStore`` keeps: the job's name and its last completed position.
///
/// ```swift
/// let entry = PipelineCheckpointStoreEntry(job: "reprice", position: .items(4_000))
/// ```
public struct PipelineCheckpointStoreEntry: Sendable, Hashable {
    /// The job's name in the store (see ``PipelineCheckpoint/job``).
    public var job: String
    /// The position after the last batch every stage completed; nil before the first.
    public var position: PipelinePosition?
    /// Whether a stage recorded the job's position in the store too (a save or delete stage
    /// writing there). A store that then holds no position for the job is not the one the job
    /// wrote to, or was put back from a copy made before the job: the pipeline refuses to
    /// resume there, since the records before ``position`` were never written in it. A
    /// ``PipelineCheckpointStore`` keeps it with the rest of the entry.
    ///
    /// ```swift
    /// if entry.isRecordedInStore { print("the store's own record of \(entry.job) decides where it goes on") }
    /// ```
    public var isRecordedInStore: Bool

    public init(job: String, position: PipelinePosition?, isRecordedInStore: Bool = false) {
        self.job = job
        self.position = position
        self.isRecordedInStore = isRecordedInStore
    }
}

/// Keeps a pipeline's checkpoint outside the store, as ``PipelineCheckpointFile`` (the `stratus
/// update --checkpoint` file) does. Called from the pipeline's stages, one call at a time.
///
/// ```swift
/// final class MemoryCheckpoint: PipelineCheckpointStore, @unchecked Sendable {
///     var entry: PipelineCheckpointStoreEntry?
///     func load() throws -> PipelineCheckpointStoreEntry? { entry }
///     func save(_ entry: PipelineCheckpointStoreEntry) throws { self.entry = entry }
///     func remove() throws { entry = nil }
/// }
/// ```
public protocol PipelineCheckpointStore: AnyObject, Sendable {
    /// The saved entry, or nil to start a new job.
    ///
    /// - Throws: when it cannot be read, or belongs to another job.
    func load() throws -> PipelineCheckpointStoreEntry?
    /// Replaces the entry durably: after a crash the old or the new one is found.
    ///
    /// - Throws: when it cannot be written; the pipeline fails with that error.
    func save(_ entry: PipelineCheckpointStoreEntry) throws
    /// Removes the entry once the whole pipeline completed.
    ///
    /// - Throws: when it cannot be removed.
    func remove() throws
}
