import Foundation
import Stratus
import StratusTransfer

/// Where `stratus notifications` and `stratus watch` put each batch: stdout, an output file
/// committed together with the token (``ChangeOutput``, as `stratus changes` does), or a
/// command (``BatchCommand``). The feed saves the token only after ``apply(_:)`` returned.
final class NotificationDelivery {
    private let tokens: ChangeTokenFile?
    private let output: ChangeOutput?
    private let command: BatchCommand?

    /// The options both commands share.
    static let options: [Option] = [
        Option("--output", "FILE", """
            append to FILE and commit it together with the token: every notification lands in the \
            outputs exactly once, wherever a run is killed. A run first cuts the last output file back \
            to its committed length, so each run may name a new FILE; move files away only after a run \
            that exited 0
            """, default: "stdout, at least once"),
        Option("--exec", "COMMAND", """
            run /bin/sh -c COMMAND for each batch with the batch as NDJSON on its stdin, and \
            STRATUS_BATCH_FIRST, STRATUS_BATCH_LAST (the batch's first and last "sequence") and \
            STRATUS_BATCH_COUNT in its environment; the token moves only when COMMAND exits 0, else \
            the run stops with exit 75 and the batch comes again
            """, default: "none"),
        Option("--batch", "N", "notifications per batch and commit", default: "1000"),
    ]

    /// Reads the shared options.
    ///
    /// - Throws: ``UsageError`` for options that do not go together.
    static func parse(_ arguments: ParsedArguments) throws -> (output: String?, command: String?, batchSize: Int) {
        let output = arguments.value("--output"), command = arguments.value("--exec")
        if output != nil && command != nil { throw UsageError(message: "--output and --exec do not go together: a batch goes to one or the other") }
        if command?.trimmingCharacters(in: .whitespaces).isEmpty == true { throw UsageError(message: "--exec needs a command") }
        return (output, command, try arguments.positiveInteger("--batch") ?? 1000)
    }

    /// Opens the output (cutting a committed output file back, see ``ChangeOutput``).
    ///
    /// - Throws: ``CommandFailure`` as ``ChangeOutput`` does.
    init(tokens: ChangeTokenFile?, outputPath: String?, command: String?) throws {
        self.tokens = tokens
        self.command = command.map(BatchCommand.init(command:))
        if let tokens, command == nil {
            output = try ChangeOutput(outputPath: outputPath, tokens: tokens)
        } else {
            output = nil
        }
    }

    /// Delivers a batch: written (and synced) or handed to the command, before the token moves.
    ///
    /// - Throws: ``CommandFailure`` when it cannot be written or the command fails.
    func apply(_ batch: NotificationFeed.Batch) throws {
        var text = ""
        for notification in batch.notifications {
            text += RecordJSONWriter.json(for: notification)
            text += "\n"
        }
        let data = Data(text.utf8)
        if let command {
            try command.run(data, first: batch.notifications.first?.feedSequence ?? 0, last: batch.notifications.last?.feedSequence ?? 0,
                            count: batch.notifications.count)
        } else if let output {
            if let committed = try output.append(data) { tokens?.outputCommit = committed }
        } else {
            try FileDescriptorOutput.writeAll(data, to: STDOUT_FILENO, name: "stdout")
        }
    }
}

/// A token kept in memory: `stratus watch` without a token file.
final class MemoryTokenStore: ChangeTokenStore {
    private var token: ServerChangeToken?
    init(_ token: ServerChangeToken?) { self.token = token }
    func loadToken() throws -> ServerChangeToken? { token }
    func saveToken(_ token: ServerChangeToken) throws { self.token = token }
}
