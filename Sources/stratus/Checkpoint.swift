import Foundation

/// Where an import stopped: how many input items (records and rejected items) are committed.
///
/// Saved after every committed batch by writing a temporary file, syncing it and renaming it
/// over the old one, so that a crash leaves either the old or the new checkpoint, never half.
/// A checkpoint names its input (path and size) so that it is not applied to another file.
struct Checkpoint: Codable, Equatable {
    var input: String
    var inputSize: Int64?
    var committedItems: Int

    static func load(from path: String) throws -> Checkpoint? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        guard let data = FileManager.default.contents(atPath: path), let checkpoint = try? JSONDecoder().decode(Checkpoint.self, from: data) else {
            throw UsageError(message: "the checkpoint file \(path) is not a Stratus checkpoint; remove it to start over")
        }
        return checkpoint
    }

    func save(to path: String) throws {
        let data = try JSONEncoder().encode(self)
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
            throw CommandFailure(.cannotCreateOutput, "cannot move the checkpoint into place at \(path): \(String(cString: strerror(errno)))")
        }
    }

    static func remove(at path: String) {
        try? FileManager.default.removeItem(atPath: path)
    }
}
