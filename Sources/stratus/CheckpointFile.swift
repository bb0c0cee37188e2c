import Foundation
import Stratus

/// The `--checkpoint` file of `stratus import`: where an import stopped, and which input it
/// belongs to (its path and size), so that it is never applied to another file.
///
/// Saved after every settled batch by writing a temporary file, syncing it and renaming it
/// over the old one, so that a crash leaves either the old or the new checkpoint, never half.
/// Locked while an import uses it (a second import with the same checkpoint exits 75).
///
/// ```
/// {"input":"/data/records.ndjson","inputSize":104857600,"committedItems":42000,"pendingItems":[17,18],"rejectedItems":3}
/// ```
final class CheckpointFile: ImportCheckpointStore {
    private struct Contents: Codable {
        var input: String
        var inputSize: Int64?
        var committedItems: Int
        /// The import's name in the store (see ``ImportCheckpoint/job``); absent in files of
        /// earlier versions.
        var job: String?
        /// Items before `committedItems` not settled yet (see ``ImportCheckpoint/pendingItems``);
        /// absent when there are none.
        var pendingItems: [Int]?
        /// Settled items that were rejected (see ``ImportCheckpoint/itemsRejected``); absent
        /// when there are none, and in files of earlier versions.
        var rejectedItems: Int?
        /// Rejects the reject file failed to take (see ``ImportCheckpoint/unreportedRejections``);
        /// absent when there are none.
        var unreportedRejects: [RecordRejection]?
    }

    /// The name the user gave.
    let path: String
    /// The file that name resolves to: locked and written, so that a link stays a link.
    private let resolvedPath: String
    private let input: String
    private let inputSize: Int64?

    /// Locks the checkpoint (held until the process ends), as `changes` locks its token file.
    ///
    /// - Throws: ``CommandFailure`` `temporaryFailure` (exit 75) when another import holds it.
    init(path: String, input: String, inputSize: Int64?) throws {
        self.path = path
        resolvedPath = KeptFile.resolve(path)
        self.input = input
        self.inputSize = inputSize
        try KeptFile.lock(resolvedPath, named: path, what: "checkpoint")
    }

    /// The largest file taken for a checkpoint: one lists the items still waiting for a parent,
    /// a few bytes each, so a larger file (a sparse file, another file named by mistake) is
    /// refused before it is read into memory.
    static let maximumSize = 64 << 20

    /// - Throws: ``UsageError`` when the file is not a checkpoint or belongs to another input;
    ///   ``CommandFailure`` `dataError` when it is larger than ``maximumSize``.
    func load() throws -> ImportCheckpoint? {
        guard let contents = try contents() else { return nil }
        if contents.committedItems > 0 {
            // The store's own record of the job decides where the run goes on: a store put back
            // from a copy holds fewer, and the run goes on from there.
            StratusCommand.note("going on from the checkpoint \(path): it says an earlier run settled the first \(Progress.grouped(contents.committedItems)) input items (the run goes on after what the store itself records of them)")
        }
        return ImportCheckpoint(itemsSettled: contents.committedItems, job: contents.job, pendingItems: contents.pendingItems ?? [],
                                itemsRejected: contents.rejectedItems ?? 0, unreportedRejections: contents.unreportedRejects ?? [])
    }

    /// Whether an earlier run settled items under this checkpoint: it then goes on in the store
    /// that run wrote to, which must exist.
    ///
    /// - Throws: as ``load()``.
    func resumesEarlierRun() throws -> Bool {
        try (contents()?.committedItems ?? 0) > 0
    }

    private func contents() throws -> Contents? {
        guard FileManager.default.fileExists(atPath: resolvedPath) else { return nil }
        let data = try KeptFile.contents(of: resolvedPath, atMost: Self.maximumSize, what: "checkpoint")
        let contents = try KeptFile.decodeCheckpoint(Contents.self, from: data, named: path, expected: "an import checkpoint", key: "input",
                                                     command: "import")
        guard contents.input == input && contents.inputSize == inputSize else {
            throw UsageError(message: "the checkpoint \(path) belongs to \(contents.input) (\(contents.inputSize ?? 0) bytes), not to this input; remove it to start over")
        }
        return contents
    }

    /// - Throws: ``CommandFailure`` `cannotCreateOutput` when it cannot be written.
    func save(_ checkpoint: ImportCheckpoint) throws {
        let data = try JSONEncoder().encode(Contents(input: input, inputSize: inputSize, committedItems: checkpoint.itemsSettled, job: checkpoint.job,
                                                     pendingItems: checkpoint.pendingItems.isEmpty ? nil : checkpoint.pendingItems,
                                                     rejectedItems: checkpoint.itemsRejected == 0 ? nil : checkpoint.itemsRejected,
                                                     unreportedRejects: checkpoint.unreportedRejections.isEmpty ? nil : checkpoint.unreportedRejections))
        try KeptFile.replace(resolvedPath, with: data)
    }

    func remove() throws {
        try? FileManager.default.removeItem(atPath: resolvedPath)
    }
}
