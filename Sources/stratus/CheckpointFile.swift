import Foundation
import Stratus

/// The `--checkpoint` file of `stratus import`: where an import stopped, and which input it
/// belongs to (its path and size), so that it is never applied to another file.
///
/// Saved after every settled batch by writing a temporary file, syncing it and renaming it
/// over the old one, so that a crash leaves either the old or the new checkpoint, never half.
///
/// ```
/// {"input":"/data/records.ndjson","inputSize":104857600,"committedItems":42000}
/// ```
final class CheckpointFile: ImportCheckpointStore {
    private struct Contents: Codable {
        var input: String
        var inputSize: Int64?
        var committedItems: Int
    }

    let path: String
    private let input: String
    private let inputSize: Int64?

    init(path: String, input: String, inputSize: Int64?) {
        self.path = path
        self.input = input
        self.inputSize = inputSize
    }

    /// - Throws: ``UsageError`` when the file is not a checkpoint or belongs to another input.
    func load() throws -> ImportCheckpoint? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        guard let data = FileManager.default.contents(atPath: path), let contents = try? JSONDecoder().decode(Contents.self, from: data) else {
            throw UsageError(message: "the checkpoint file \(path) is not a Stratus checkpoint; remove it to start over")
        }
        guard contents.input == input && contents.inputSize == inputSize else {
            throw UsageError(message: "the checkpoint \(path) belongs to \(contents.input) (\(contents.inputSize ?? 0) bytes), not to this input; remove it to start over")
        }
        return ImportCheckpoint(itemsSettled: contents.committedItems)
    }

    /// - Throws: ``CommandFailure`` `cannotCreateOutput` when it cannot be written.
    func save(_ checkpoint: ImportCheckpoint) throws {
        let data = try JSONEncoder().encode(Contents(input: input, inputSize: inputSize, committedItems: checkpoint.itemsSettled))
        let temporary = path + ".tmp"
        guard FileManager.default.createFile(atPath: temporary, contents: data) else {
            throw CommandFailure(.cannotCreateOutput, "cannot write the checkpoint file \(temporary)")
        }
        let descriptor = open(temporary, O_RDONLY)
        if descriptor >= 0 {
            fsync(descriptor)
            close(descriptor)
        }
        guard rename(temporary, path) == 0 else {
            throw CommandFailure.system(.cannotCreateOutput, "cannot move the checkpoint into place at \(path)")
        }
    }

    func remove() throws {
        try? FileManager.default.removeItem(atPath: path)
    }
}
