import Foundation
import Stratus

/// The `--reject-file` of `stratus import`: one JSON object per rejected input, appended;
/// without a file, the first reasons go to stderr so that a cron log shows them.
///
/// ```
/// {"line":4,"column":31,"recordName":"wrongType","error":"field 'count': …"}
/// ```
final class RejectFile: RecordRejectSink {
    private let handle: FileHandle?
    private let path: String?
    private var buffer = ""
    private var printed = 0
    private static let printedLimit = 10

    /// - Throws: ``CommandFailure`` `cannotCreateOutput` when the file cannot be created or written.
    init(path: String?) throws {
        self.path = path
        guard let path else { handle = nil; return }
        handle = try RejectFileOpening.open(path)
    }

    func reject(_ rejection: RecordRejection) throws {
        guard handle != nil else {
            printed += 1
            if printed <= Self.printedLimit {
                let name = rejection.recordName.map { " (\(Naming.shown(recordName: $0)))" } ?? ""
                let column = rejection.column > 0 ? ":\(rejection.column)" : ""
                StratusCommand.log("rejected line \(rejection.line)\(column)\(name): \(rejection.message)")
            } else if printed == Self.printedLimit + 1 {
                StratusCommand.log("further rejections are not shown; use --reject-file to keep them all")
            }
            return
        }
        buffer += "{\"line\":\(rejection.line),\"column\":\(rejection.column),\"recordName\":"
        if let recordName = rejection.recordName { JSONText.appendString(recordName, to: &buffer) } else { buffer += "null" }
        buffer += ",\"error\":"
        JSONText.appendString(rejection.message, to: &buffer)
        buffer += "}\n"
        if buffer.utf8.count > 64 * 1024 { try flush() }
    }

    func flush() throws {
        guard let handle, !buffer.isEmpty else { return }
        let end = try? handle.seekToEnd()
        do {
            try handle.write(contentsOf: Data(buffer.utf8))
        } catch {
            // Lines half written (a full disk) are cut off again: the checkpoint keeps them
            // all as unreported, and a resumed run writes them whole, once.
            if let end { try? handle.truncate(atOffset: end) }
            throw CommandFailure(.cannotCreateOutput, "cannot write the reject file \(path ?? ""): \(error.localizedDescription)")
        }
        buffer = ""
    }

    func close() throws {
        try flush()
        try handle?.close()
    }
}
