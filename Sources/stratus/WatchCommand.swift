import Foundation
import Stratus

/// `stratus watch`: follows the user's notification feed live.
struct WatchCommand: Command {
    static let name = "watch"
    static let summary = "follow the user's notifications live, printing each as it commits"
    static let usage = [
        "stratus watch [--token-file FILE] [--output FILE | --exec COMMAND] [--batch N] [store options]",
    ]
    static let discussion = """
        Prints the user's notifications (in every database of the container) as NDJSON as their
        writes commit, in the shape `stratus notifications` writes, until SIGINT, SIGTERM or
        SIGHUP: then it finishes the batch at hand, saves its token and exits 130, 143 or 129. On
        PostgreSQL a commit wakes it at once (LISTEN/NOTIFY); on SQLite it notices the store's
        data version move within a few tens of milliseconds.

        With --token-file it starts after the token in FILE (from the feed's beginning when FILE
        is empty or missing) and moves the token after each batch, with the guarantees of
        `stratus notifications`; without it, it starts at the feed's end and keeps no token.
        --output and --exec work as for `stratus notifications` (both need --token-file to keep
        their guarantees across runs; --output requires it).
        """
    static let options: [Option] = [
        Option("--token-file", "FILE", "where the token is kept (locked while running)", default: "none: start at the feed's end"),
    ] + NotificationDelivery.options
    static let exitNotes: String? = """
        130/143/129 after SIGINT/SIGTERM/SIGHUP, the token saved: the normal end. 65 when the token has
        expired; 75 when another run holds the token file or the --exec command failed.
        """

    var store: StoreOptions
    var tokenPath: String?
    var outputPath: String?
    var command: String?
    var batchSize = 1000

    static func parse(_ arguments: ParsedArguments) throws -> WatchCommand {
        try arguments.expectNoPositionals()
        var command = WatchCommand(store: try StoreOptions(arguments))
        command.tokenPath = arguments.value("--token-file")
        (command.outputPath, command.command, command.batchSize) = try NotificationDelivery.parse(arguments)
        if command.outputPath != nil && command.tokenPath == nil {
            throw UsageError(message: "--output needs --token-file, which records how much of the output is committed")
        }
        return command
    }

    func run() async throws -> ExitCode {
        do {
            let database = try store.openDatabase(.existing)
            let feed = NotificationFeed(database: database, batchSize: batchSize)
            Interruption.install { feed.cancel() }
            let summary: NotificationFeed.Summary
            if let tokenPath {
                let tokens = try ChangeTokenFile.opened(path: tokenPath)
                let delivery = try NotificationDelivery(tokens: tokens, outputPath: outputPath, command: command)
                summary = try await feed.follow(tokens: tokens) { try delivery.apply($0) }
            } else {
                let tokens = MemoryTokenStore(try await feed.currentToken())
                let delivery = try NotificationDelivery(tokens: nil, outputPath: nil, command: command)
                summary = try await feed.follow(tokens: tokens) { try delivery.apply($0) }
            }
            StratusCommand.note("wrote \(summary.notifications) notification(s)" + (tokenPath.map { "; token saved in \($0)" } ?? ""))
            return ExitCode.stopped(by: Interruption.signal)
        } catch let error as CommandFailure {
            StratusCommand.log(error.message)
            return error.code
        } catch let error as JobFileError {
            guard let failure = error.commandFailure else { throw error }
            StratusCommand.log(failure.message)
            return failure.code
        } catch let error as StratusError where error.code == .changeTokenExpired {
            return ChangeTokenFile.refused(error, path: tokenPath, command: "watch", startAgain: "remove it to start again from what the feed keeps")
        }
    }
}
