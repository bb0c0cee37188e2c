import Foundation
import Stratus

/// The `--checkpoint` file of `stratus copy`: how far a copy got (``StoreCopier/Checkpoint``
/// as JSON), saved durably as the copy goes (temporary file, fsync, rename; at most once a
/// second, see ``StoreCopier/checkpointInterval``, and when it stops), locked while a copy uses
/// it (a second copy with the same checkpoint exits 75).
final class CopyCheckpointFile: StoreCopier.CheckpointStore {
    /// The name the user gave.
    let path: String
    /// The file that name resolves to: locked and written, so that a link stays a link.
    private let resolvedPath: String

    /// Locks the checkpoint for the life of the process.
    ///
    /// - Throws: ``CommandFailure`` `temporaryFailure` (exit 75) when another copy holds it.
    init(path: String) throws {
        self.path = path
        resolvedPath = KeptFile.resolve(path)
        try KeptFile.lock(resolvedPath, named: path, what: "checkpoint")
    }

    /// The largest file taken for a checkpoint: one written by an earlier version names every
    /// zone copied, about 200 bytes each, so this keeps such copies of some five million zones
    /// resumable while a larger file (a sparse file, another file named by mistake) is refused
    /// before it is read into memory. Today's checkpoints name only the zones that failed.
    static let maximumSize = 1 << 30

    /// - Throws: ``UsageError`` when the file is not a copy checkpoint; ``CommandFailure``
    ///   `dataError` when it is larger than ``maximumSize``.
    func load() throws -> StoreCopier.Checkpoint? {
        guard FileManager.default.fileExists(atPath: resolvedPath) else { return nil }
        let data = try KeptFile.contents(of: resolvedPath, atMost: Self.maximumSize, what: "checkpoint")
        return try KeptFile.decodeCheckpoint(StoreCopier.Checkpoint.self, from: data, named: path, expected: "a checkpoint of `stratus copy`",
                                            key: "destinationIdentifier", command: "copy")
    }

    /// - Throws: ``CommandFailure`` `cannotCreateOutput` when it cannot be written.
    func save(_ checkpoint: StoreCopier.Checkpoint) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        try KeptFile.replace(resolvedPath, with: try encoder.encode(checkpoint))
    }

    func remove() throws {
        try? FileManager.default.removeItem(atPath: resolvedPath)
    }
}
