import Foundation
import Stratus

/// The `--checkpoint` file of `stratus update` and `stratus delete --where`: the job's name in
/// the store (whose position each batch's transaction commits), the last position saved after
/// a batch, and which command it belongs to, so that it is never applied to another.
///
/// Written as ``CheckpointFile`` is (temporary file, fsync, rename), and locked while a run
/// uses it (an overlapping run exits 75).
///
/// ```
/// {"command":"update Todo where checked == 0 set checked:INT64=1 …","job":"pipeline-…","position":"stc2_…","recordedInStore":true}
/// ```
final class PipelineCheckpointFile: PipelineCheckpointStore, @unchecked Sendable {
    // @unchecked: the pipeline calls the store one call at a time; every field is immutable.
    private struct Contents: Codable {
        var command: String
        var job: String
        var position: String?
        /// Absent in files of versions before it was kept (read as false).
        var recordedInStore: Bool?
    }

    let path: String
    private let resolvedPath: String
    private let command: String

    /// Locks the checkpoint for the life of the process.
    ///
    /// - Throws: ``CommandFailure`` `temporaryFailure` (exit 75) when another run holds it.
    init(path: String, command: String) throws {
        self.path = path
        resolvedPath = KeptFile.resolve(path)
        self.command = command
        try KeptFile.lock(resolvedPath, named: path, what: "checkpoint")
    }

    /// The largest file taken for a checkpoint: it holds the command line and one position, so
    /// a larger file (a sparse file, another file named by mistake) is refused before it is
    /// read into memory.
    static let maximumSize = 16 << 20

    /// - Throws: ``UsageError`` when the file is not a checkpoint or belongs to another command;
    ///   ``CommandFailure`` `dataError` when it is larger than ``maximumSize``.
    func load() throws -> PipelineCheckpointStoreEntry? {
        guard FileManager.default.fileExists(atPath: resolvedPath) else { return nil }
        let data = try KeptFile.contents(of: resolvedPath, atMost: Self.maximumSize, what: "checkpoint")
        let commandName = command.split(separator: " ").first.map(String.init) ?? command
        let contents = try KeptFile.decodeCheckpoint(Contents.self, from: data, named: path,
                                                     expected: "a checkpoint of `stratus \(commandName)`", key: "command", command: commandName)
        guard contents.command == command else {
            throw UsageError(message: "the checkpoint \(path) belongs to another command (\(contents.command)); name another file for --checkpoint, or remove it if that job is over")
        }
        let position: PipelinePosition?
        do {
            position = try contents.position.map { try PipelinePosition(serialized: $0) }
        } catch {
            throw UsageError(message: "the checkpoint file \(path) holds no position Stratus can read; remove it to start over")
        }
        return PipelineCheckpointStoreEntry(job: contents.job, position: position, isRecordedInStore: contents.recordedInStore ?? false)
    }

    func save(_ entry: PipelineCheckpointStoreEntry) throws {
        let data = try JSONEncoder().encode(Contents(command: command, job: entry.job, position: entry.position?.serialized,
                                                          recordedInStore: entry.isRecordedInStore ? true : nil))
        try KeptFile.replace(resolvedPath, with: data)
    }

    func remove() throws {
        try? FileManager.default.removeItem(atPath: resolvedPath)
    }
}
