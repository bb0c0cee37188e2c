/// Where an import is: how many input items (records, deletions and rejected items) are
/// settled — written, or rejected and reported — from the start of the input.
///
/// ```swift
/// let checkpoint = ImportCheckpoint(itemsSettled: 4_000)
/// ```
public struct ImportCheckpoint: Sendable, Hashable, Codable {
    /// Items from the start of the input that a resumed import skips.
    public var itemsSettled: Int
    /// The import's name in the store, which records in each batch's own transaction how far
    /// the import got: a run killed after a batch committed and before its checkpoint was saved
    /// resumes after that batch, not with it again. Set by the importer.
    public var job: String?

    /// A checkpoint after `itemsSettled` input items.
    public init(itemsSettled: Int, job: String? = nil) {
        self.itemsSettled = itemsSettled
        self.job = job
    }
}

/// Keeps an import's checkpoint between runs, so that an import stopped by a crash, a kill or
/// ``RecordImporter/cancel()`` resumes after its last settled batch.
///
/// The importer saves a checkpoint after each settled batch (one batch is in flight at a time
/// when it has a checkpoint store) and removes it when the input is done. The `stratus` tool's
/// checkpoint file is one store; it also checks that the checkpoint belongs to the input.
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
