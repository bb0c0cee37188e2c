/// Where an import is: how many input items (records, deletions and rejected items) are
/// settled — written, or rejected and reported — from the start of the input, and which of
/// them are not settled yet (records waiting for a parent later in the input).
///
/// ```swift
/// let checkpoint = ImportCheckpoint(itemsSettled: 4_000, pendingItems: [17, 18], itemsRejected: 3)
/// ```
public struct ImportCheckpoint: Sendable, Hashable, Codable {
    /// Items from the start of the input that a resumed import skips, apart from
    /// ``pendingItems``.
    public var itemsSettled: Int
    /// The import's name in the store, which records in each batch's own transaction how far
    /// the import got: a run killed after a batch committed and before its checkpoint was saved
    /// resumes after that batch, not with it again. Set by the importer.
    public var job: String?
    /// Items before ``itemsSettled`` that are not settled: records that wait for their parent
    /// (and items of the same records behind them). A resumed import reads them again.
    public var pendingItems: [Int]
    /// Settled items that were rejected (and reported) by the runs before: a resumed import
    /// counts them in its ``RecordImporter/Summary/failedInEarlierRuns`` and against
    /// ``RecordImporter/Options/maximumRejects``, so that a job's rejects are not forgotten
    /// because it was stopped and resumed.
    public var itemsRejected: Int
    /// Rejections of settled items that the reject sink failed to take (a full disk): the
    /// resumed import reports them first, so that a sink's failure loses no reject. A sink that
    /// failed part way may get some of them twice.
    public var unreportedRejections: [RecordRejection]

    /// A checkpoint after `itemsSettled` input items, of which `pendingItems` are not settled
    /// and `itemsRejected` were rejected (`unreportedRejections` of them not reported yet).
    public init(itemsSettled: Int, job: String? = nil, pendingItems: [Int] = [], itemsRejected: Int = 0, unreportedRejections: [RecordRejection] = []) {
        self.itemsSettled = itemsSettled
        self.job = job
        self.pendingItems = pendingItems
        self.itemsRejected = itemsRejected
        self.unreportedRejections = unreportedRejections
    }

    private enum CodingKeys: String, CodingKey { case itemsSettled, job, pendingItems, itemsRejected, unreportedRejections }

    /// Decodes a checkpoint; one saved before ``pendingItems``, ``itemsRejected`` or
    /// ``unreportedRejections`` existed has none.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        itemsSettled = try container.decode(Int.self, forKey: .itemsSettled)
        job = try container.decodeIfPresent(String.self, forKey: .job)
        pendingItems = try container.decodeIfPresent([Int].self, forKey: .pendingItems) ?? []
        itemsRejected = try container.decodeIfPresent(Int.self, forKey: .itemsRejected) ?? 0
        unreportedRejections = try container.decodeIfPresent([RecordRejection].self, forKey: .unreportedRejections) ?? []
    }
}

/// Keeps an import's checkpoint between runs, so that an import stopped by a crash, a kill or
/// ``RecordImporter/cancel()`` resumes after its last settled batch.
///
/// The importer saves a checkpoint after each settled batch (one batch is in flight at a time
/// when it has a checkpoint store) and removes it when the input is done. ``ImportCheckpointFile``
/// (the `stratus import --checkpoint` file) is one; it also checks that the checkpoint belongs
/// to the input.
///
/// ```swift
/// final class MemoryCheckpoint: ImportCheckpointStore {
///     var saved: ImportCheckpoint?
///     func load() throws -> ImportCheckpoint? { saved }
///     func save(_ checkpoint: ImportCheckpoint) throws { saved = checkpoint }
///     func remove() throws { saved = nil }
/// }
/// ```
public protocol ImportCheckpointStore: AnyObject {
    /// The checkpoint of an earlier run, or nil to start at the beginning.
    ///
    /// - Throws: when the checkpoint cannot be read or belongs to another input.
    func load() throws -> ImportCheckpoint?
    /// Replaces the checkpoint durably: after a crash the old or the new one is found.
    ///
    /// - Throws: when it cannot be written; the import stops with that error.
    func save(_ checkpoint: ImportCheckpoint) throws
    /// Removes the checkpoint once the whole input is settled.
    ///
    /// - Throws: when it cannot be removed.
    func remove() throws
}
