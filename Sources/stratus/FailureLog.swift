import Foundation
import Stratus
import Synchronization

/// Where `stratus update` and `stratus delete` report the records the store refused: a
/// `--reject-file` of JSON lines, or else the first ten reasons on stderr.
///
/// ```
/// {"recordName":"todo-7","error":"serverRecordChanged: …"}
/// ```
final class FailureLog: Sendable {
    private struct State {
        var handle: FileHandle?
        var printed = 0
        var failure: CommandFailure?
    }
    private let state: Mutex<State>
    private let path: String?
    private static let printedLimit = 10

    /// - Throws: ``CommandFailure`` `cannotCreateOutput` when the file cannot be created or written.
    init(path: String?) throws {
        self.path = path
        guard let path else {
            state = Mutex(State())
            return
        }
        state = Mutex(State(handle: try RejectFileOpening.open(path)))
    }

    /// Reports one refused record; called from the pipeline's threads.
    func record(_ id: Record.ID, _ error: StratusError) {
        state.withLock { state in
            guard let handle = state.handle else {
                state.printed += 1
                if state.printed <= Self.printedLimit {
                    StratusCommand.log("record '\(id.recordName)' failed: \(error.description)")
                } else if state.printed == Self.printedLimit + 1 {
                    StratusCommand.log("further failures are not shown; use --reject-file to keep them all")
                }
                return
            }
            var line = "{\"recordName\":"
            JSONText.appendString(id.recordName, to: &line)
            line += ",\"error\":"
            JSONText.appendString(error.description, to: &line)
            line += "}\n"
            let end = try? handle.seekToEnd()
            do {
                try handle.write(contentsOf: Data(line.utf8))
            } catch {
                // No half line is left for a line reader to stop at.
                if let end { try? handle.truncate(atOffset: end) }
                state.failure = state.failure ?? CommandFailure(.cannotCreateOutput, "cannot write the reject file \(path ?? ""): \(error.localizedDescription)")
            }
        }
    }

    /// Closes the file.
    ///
    /// - Throws: the first write failure, as ``CommandFailure`` `cannotCreateOutput`.
    func close() throws {
        let (handle, failure) = state.withLock { ($0.handle, $0.failure) }
        try handle?.close()
        if let failure { throw failure }
    }
}
