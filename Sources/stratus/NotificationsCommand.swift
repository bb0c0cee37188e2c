import Foundation
import Stratus

/// `stratus notifications`: the user's notifications since the last run, as NDJSON, for cron jobs.
struct NotificationsCommand: Command {
    static let name = "notifications"
    static let summary = "the user's notifications since the last run, exactly once (for cron jobs)"
    static let usage = [
        "stratus notifications --token-file FILE [--output FILE | --exec COMMAND] [--batch N] [--limit N] [store options]",
        "stratus notifications compact --keep-days N [store options]",
    ]
    static let discussion = """
        Writes the notifications of the user's subscriptions (--user, in every database of the
        container) since the token in FILE as NDJSON, in commit order: a query notification as
        {"notificationID":…,"sequence":…,"notificationType":"query","subscriptionID":…,
        "databaseScope":…,"queryNotificationReason":"recordCreated","recordName":…,"recordType":…,
        "zoneID":{…},"recordFields":{…},"created":…}, zone and database notifications with
        "notificationType" "recordZone" and "database". Without FILE (or with an empty one) the
        whole feed is written (what retention kept). After each batch the output is flushed and
        synced, or the --exec command exited 0, and only then is the new token written to FILE
        (temporary file, fsync, rename), as `stratus changes` does.

        Without --output, notifications go to stdout at least once: a run killed after writing a
        batch but before moving the token writes that batch again on the next run. With --output
        nothing is repeated. With --exec a batch is handed to the command until it exits 0; a
        run killed while the command runs hands it that batch again (starting with the same
        notification, STRATUS_BATCH_FIRST, perhaps with more after it). "sequence" grows from
        line to line, so a command that remembers the last sequence it applied and skips lines
        at or below it sees each notification once.

        compact removes notifications older than N days from every feed of the store; tokens from
        before them then expire (the store also compacts on its own, keeping its tombstone
        retention, 30 days by default).
        """
    static let options: [Option] = [
        Option("--token-file", "FILE", "where the token is kept between runs (locked while running)", default: "none; required"),
    ] + NotificationDelivery.options + [
        Option("--limit", "N", "stop after the batch that reaches N notifications; the next run continues", default: "no limit"),
        Option("--keep-days", "N", "compact: keep notifications of the last N days", default: "none; required by compact"),
    ]
    static let exitNotes: String? = """
        64 when the token is a place in another history (a change token of `stratus changes`,
        another user's, container's or store's notifications): it is kept; give the options it
        was made with, or another FILE (a token of a store this one replaced is done with:
        remove FILE). 65 when the token has expired (its notifications were compacted): remove
        FILE to start again from what the feed keeps.
        75 when another run holds the token file, or the --exec command did not exit 0 (the
        batch comes again next time).
        """

    var store: StoreOptions
    var tokenPath: String?
    var outputPath: String?
    var command: String?
    var batchSize = 1000
    var limit: Int?
    var compactKeepDays: Double?

    static func parse(_ arguments: ParsedArguments) throws -> NotificationsCommand {
        var command = NotificationsCommand(store: try StoreOptions(arguments))
        command.tokenPath = arguments.value("--token-file")
        (command.outputPath, command.command, command.batchSize) = try NotificationDelivery.parse(arguments)
        command.limit = try arguments.positiveInteger("--limit")
        let keepDays = arguments.value("--keep-days")
        if arguments.positionals == ["compact"] {
            guard let keepDays, let days = Double(keepDays), days >= 0, days.isFinite else {
                throw UsageError(message: "compact needs --keep-days N (a number of days, 0 or more)")
            }
            for option in ["--token-file", "--output", "--exec", "--batch", "--limit"] where arguments.has(option) {
                throw UsageError(message: "\(option) does not go with compact")
            }
            command.compactKeepDays = days
        } else {
            try arguments.expectNoPositionals()
            if keepDays != nil { throw UsageError(message: "--keep-days belongs to `stratus notifications compact`") }
            if command.tokenPath == nil { throw UsageError(message: "--token-file is required") }
        }
        return command
    }

    func run() async throws -> ExitCode {
        do {
            if let compactKeepDays {
                let removed = try await store.openContainer(.existing).compactNotifications(retention: compactKeepDays * 86_400)
                StratusCommand.note("removed \(removed) notification(s)")
                return .success
            }
            let database = try store.openDatabase(.existing)
            let tokens = try ChangeTokenFile.opened(path: tokenPath!)
            let delivery = try NotificationDelivery(tokens: tokens, outputPath: outputPath, command: command)
            let feed = NotificationFeed(database: database, batchSize: batchSize)
            Interruption.install { feed.cancel() }
            let summary = try await feed.run(tokens: tokens, limit: limit) { try delivery.apply($0) }
            StratusCommand.note("wrote \(summary.notifications) notification(s)\(summary.moreComing ? "; more remain" : ""); token saved in \(tokenPath!)")
            return summary.end == .cancelled ? ExitCode.stopped(by: Interruption.signal) : .success
        } catch let error as CommandFailure {
            StratusCommand.log(error.message)
            return error.code
        } catch let error as JobFileError {
            guard let failure = error.commandFailure else { throw error }
            StratusCommand.log(failure.message)
            return failure.code
        } catch let error as StratusError where error.code == .changeTokenExpired {
            return ChangeTokenFile.refused(error, path: tokenPath, command: "notifications", startAgain: "remove it (and rotate the output) to start again from what the feed keeps")
        }
    }
}
