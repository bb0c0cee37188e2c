import Foundation

/// Opens a `--reject-file` for appending: created when missing; an existing regular file must
/// hold reject lines already (JSON objects, one per line, each starting `{"line":`) or nothing, so that a mistyped name
/// never appends to another program's file or database.
///
/// ```swift
/// let handle = try RejectFileOpening.open("rejects.ndjson")
/// ```
enum RejectFileOpening {
    /// - Throws: ``CommandFailure`` `cannotCreateOutput` when the file cannot be created or
    ///   written, or holds something other than reject lines.
    static func open(_ path: String) throws -> FileHandle {
        // Rejected records are the input's records: created private (0600), as exports are.
        // open(2) rather than FileManager, so that the message can say why (no folder, no right).
        let created = Foundation.open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if created >= 0 {
            close(created)
        } else if errno != EEXIST {
            throw CommandFailure.system(.cannotCreateOutput, "cannot create the reject file \(path)")
        }
        var info = stat()
        if stat(path, &info) == 0 {
            switch info.st_mode & S_IFMT {
            case S_IFDIR: throw CommandFailure(.cannotCreateOutput, "the reject file \(path) is a folder")
            case S_IFREG where info.st_size > 0:
                guard let reader = FileHandle(forReadingAtPath: path) else { throw CommandFailure(.cannotCreateOutput, "cannot read the reject file \(path)") }
                let start = (try? reader.read(upToCount: 64 << 10)) ?? Data()
                try? reader.close()
                // Reject lines start `{"line":` (an import's) or `{"recordName":` (an update's or
                // a delete's); a record file (NDJSON, an envelope) starts `{` too.
                let significant = start.drop(while: { [0x20, 0x09, 0x0A, 0x0D].contains($0) })
                guard significant.starts(with: Data(#"{"line":"#.utf8)) || isFailureLine(significant) else {
                    throw CommandFailure(.cannotCreateOutput, "the reject file \(path) exists and holds something other than reject lines (JSON objects, one a line, each starting {\"line\": or {\"recordName\":); name another file")
                }
            default: break
            }
        }
        // Appended to with O_APPEND rather than a seek to the end: a pipe (`--reject-file
        // >(jq …)`, a FIFO, /dev/stdout on a pipe) cannot seek, and Foundation's
        // seekToEndOfFile() traps on that.
        let descriptor = Foundation.open(path, O_WRONLY | O_APPEND | O_CLOEXEC)
        guard descriptor >= 0 else { throw CommandFailure.system(.cannotCreateOutput, "cannot write the reject file \(path)") }
        let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        // A run stopped by a full disk may have left half a line: this run's lines start on a
        // line of their own, so that every whole line stays one JSON object.
        if FileDescriptorOutput.endsWithinLine(path) {
            do {
                try handle.write(contentsOf: Data("\n".utf8))
            } catch {
                throw CommandFailure(.cannotCreateOutput, "cannot write the reject file \(path): \(error.localizedDescription)")
            }
        }
        return handle
    }

    /// Whether `text` starts with a line of an update's or a delete's reject file: an object of
    /// exactly `recordName` and `error` (a record starts `{"recordName":` too).
    private static func isFailureLine(_ text: Data) -> Bool {
        guard text.starts(with: Data(#"{"recordName":"#.utf8)) else { return false }
        let line = text.prefix { $0 != 0x0A }
        guard let object = (try? JSONSerialization.jsonObject(with: line)) as? [String: Any] else { return false }
        return Set(object.keys) == ["recordName", "error"]
    }
}
