import Foundation

/// A store copy's checkpoint kept in a file, as `stratus copy --checkpoint` keeps it: how far
/// a ``StoreCopier`` got (``StoreCopier/Checkpoint`` as JSON).
///
/// Each save replaces the file whole (a temporary file beside it, synced, renamed over it, the
/// folder synced), so a crash or a kill leaves the old checkpoint or the new one, and a save
/// that fails leaves the old one. The file is locked while the object lives: a second copy
/// with the same file is refused with ``JobFileError/Reason/inUse(lockFile:)``. The copier
/// never removes it; remove it with ``remove()`` once the stores compare equal.
///
/// ```swift
/// let checkpoint = try CopyCheckpointFile(path: "/var/lib/jobs/move.checkpoint")
/// let copier = StoreCopier(from: source, to: destination)
/// _ = try await copier.run(checkpointStore: checkpoint)
/// if try await copier.compare().allSatisfy(\.matches) { try checkpoint.remove() }
/// ```
public final class CopyCheckpointFile: StoreCopier.CheckpointStore {
    /// The largest file taken for a checkpoint: one written by an earlier version names every
    /// zone copied, about 200 bytes each, so this keeps such copies of some five million zones
    /// resumable while a larger file (a sparse file, another file named by mistake) is refused
    /// before it is read into memory. Today's checkpoints name only the zones that failed.
    public static let maximumSize = 1 << 30

    /// The file's name as given.
    public var path: String { file.path }
    private let file: JobFile

    /// Locks the checkpoint file `path`. Nothing is read or written yet.
    ///
    /// - Throws: ``JobFileError``: `inUse` while another run (or another object) holds the
    ///   file, `notARegularFile`, `cannotWrite` when its lock file cannot be made.
    public init(path: String) throws {
        file = try JobFile(path: path, file: .copyCheckpoint)
    }

    /// The checkpoint an earlier run saved, or nil when there is no file. Whether it belongs to
    /// the stores being copied is the copier's to check.
    ///
    /// - Throws: ``JobFileError``: `damaged`, `holdsAnotherKind`, `newerFormat`, `tooLarge`
    ///   (over ``maximumSize``), `cannotRead`. The file is left as it is.
    public func load() throws -> StoreCopier.Checkpoint? {
        guard let data = try file.contents(atMost: Self.maximumSize) else { return nil }
        return try file.decodeCheckpoint(StoreCopier.Checkpoint.self, from: data, key: "destinationIdentifier")
    }

    /// Replaces the saved checkpoint durably.
    ///
    /// - Throws: ``JobFileError`` `cannotWrite`; the file then holds the checkpoint it held.
    public func save(_ checkpoint: StoreCopier.Checkpoint) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        try file.replace(with: try encoder.encode(checkpoint))
    }

    /// Removes the file: the copy is over.
    public func remove() throws {
        file.remove()
    }
}
