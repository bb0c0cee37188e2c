import Foundation
import Stratus
import StratusTransfer
import Synchronization

/// `stratus changes`: a zone's changes since the last run, as NDJSON, for cron jobs.
struct ChangesCommand: Command {
    static let name = "changes"
    static let summary = "a zone's changes since the last run, exactly once (for cron exports)"
    static let usage = [
        "stratus changes --token-file FILE [--output FILE] [--assets-dir DIR] [--fields K1,K2] [--batch N] [--limit N] [--as-administrator] [progress options] [store options]",
        "stratus changes compact --keep-days N [store options]",
    ]
    static let discussion = """
        Writes the zone's changes since the token in FILE as NDJSON, oldest first, in the shape of
        CloudKit's changes/zone answers: a changed record as its record JSON (once, in its current
        state, however often it changed; with its zoneID), a
        deletion as {"recordName":…,"recordType":…,"deleted":true,"zoneID":{…}}. When FILE does
        not exist yet (or is empty) the zone's whole history is written. After each batch the output is
        flushed and synced, and only then is the new token written to FILE (temporary file,
        fsync, rename).

        An asset's downloadURL names the store's own file, which `stratus import` reads only
        into that same store, or from inside the folder given with --assets-dir (and the file
        goes when no record names its content any more). With --assets-dir DIR,
        as `stratus export --assets-dir`, each asset's content is written into DIR before the
        line that names it, and the line names its file relative to DIR, so that
        `stratus import --assets-dir DIR --mode forceReplace` applies the changes to another
        store, assets included. The token moves on as changes are written, whatever a consumer
        does with them: a mirror job writes them with --output and removes the file only after
        its import succeeded (see the README's "A mirror of a zone in a second store").

        Without --output, changes go to stdout at least once: a run killed after writing a batch
        but before moving the token writes that batch again on the next run (at most one batch,
        possibly after an incomplete last line). Replaying is harmless for consumers that apply
        changes as upserts and deletes; with --output nothing is repeated.

        compact removes tombstones of deletions older than N days from the database; tokens from
        before them then expire (the store also compacts on its own after 30 days).
        """
    static let options: [Option] = [
        Option("--token-file", "FILE", "where the token is kept between runs (locked while running)", default: "none; required"),
        Option("--output", "FILE", """
            append to FILE and commit it together with the token: every change lands in the outputs \
            exactly once, wherever a run is killed. A run first cuts the last output file back to its \
            committed length, so each run may name a new FILE (export-$(date +%s).ndjson); move files \
            away only after a run that exited 0. A run with no changes creates no file. A file \
            another job's token holds is refused (75): one output file belongs to one job
            """, default: "stdout (also -), at least once"),
        Option("--assets-dir", "DIR", "write asset content into DIR (created, private to the user); the JSON names the files in it", default: "none: assets name the store's files"),
        Option("--fields", "K1,K2", "only these fields of changed records", default: "every field"),
        Option("--batch", "N", "changes per batch and commit", default: "1000"),
        Option("--limit", "N", "stop after about N changes; the next run continues", default: "no limit"),
        Option("--keep-days", "N", "compact: keep tombstones of the last N days", default: "none; required by compact"),
        Option(flag: "--as-administrator", "public database only: every record's changes, whatever the security roles let a user read (a mirror of the zone; import it with --as-administrator too)"),
    ]
    static let optionGroups: [OptionGroup] = [.progress, .store]
    static let exitNotes: String? = """
        64 when the token in FILE was made for another zone, database, user, container,
        environment or store (run with the options it was made with, or give another FILE; the
        token is left as it was; a token of a store this one replaced is done with: remove FILE).
        65 when the token has expired (the zone was deleted and created
        again, or its history was compacted): remove FILE to export the zone again from the
        beginning. 66 when the zone does not exist. 75 when another run holds the token file.
        """

    var store: StoreOptions
    var tokenPath: String?
    var outputPath: String?
    var assetsDirectory: String?
    var fields: [String]?
    var batchSize = 1000
    var limit: Int?
    /// For `changes compact`: tombstones older than this many days go.
    var compactKeepDays: Double?
    var progressStyle = Progress.Style.automatic
    /// `--as-administrator`: the changes of every record, not only those the user may read.
    var asAdministrator = false

    static func parse(_ arguments: ParsedArguments) throws -> ChangesCommand {
        var command = ChangesCommand(store: try StoreOptions(arguments))
        command.tokenPath = arguments.value("--token-file")
        command.outputPath = arguments.value("--output")
        command.assetsDirectory = arguments.value("--assets-dir")
        command.fields = try arguments.list("--fields")
        command.batchSize = try arguments.positiveInteger("--batch") ?? 1000
        command.limit = try arguments.positiveInteger("--limit")
        command.progressStyle = try Progress.style(arguments)
        command.asAdministrator = arguments.flag("--as-administrator")
        if command.asAdministrator { try command.store.checkAdministratorScope() }
        let keepDays = arguments.value("--keep-days")
        if arguments.positionals == ["compact"] {
            guard let keepDays, let days = Double(keepDays), days >= 0, days.isFinite else {
                throw UsageError(message: "compact needs --keep-days N (a number of days, 0 or more)")
            }
            for option in ["--token-file", "--output", "--assets-dir", "--fields", "--batch", "--limit", "--as-administrator"] where arguments.has(option) {
                throw UsageError(message: "\(option) does not go with compact")
            }
            command.compactKeepDays = days
        } else {
            try arguments.expectNoPositionals()
            if keepDays != nil { throw UsageError(message: "--keep-days belongs to `stratus changes compact`") }
            if command.tokenPath == nil { throw UsageError(message: "--token-file is required") }
        }
        return command
    }

    func run() async throws -> ExitCode {
        do {
            if let compactKeepDays {
                let removed = try await store.openDatabase(.existing).compactChangeHistory(retention: compactKeepDays * 86_400)
                Progress(style: progressStyle, verb: "removed").finish(
                    "removed \(removed.recordTombstonesRemoved) record tombstone(s) and \(removed.zoneTombstonesRemoved) zone tombstone(s)",
                    json: ["recordTombstonesRemoved": removed.recordTombstonesRemoved, "zoneTombstonesRemoved": removed.zoneTombstonesRemoved])
                return .success
            }
            return try await export(tokenPath: tokenPath!)
        } catch let error as CommandFailure {
            StratusCommand.log(error.message)
            return error.code
        } catch let error as JobFileError {
            guard let failure = error.commandFailure else { throw error }
            StratusCommand.log(failure.message)
            return failure.code
        } catch let error as StratusError where error.code == .changeTokenExpired {
            guard let mismatch = error.underlyingError as? ServerChangeToken.Mismatch else {
                return ChangeTokenFile.refused(error, path: tokenPath, command: "changes", startAgain: "remove it (and rotate the output) to export the zone again from the beginning")
            }
            // The token is good, for another job: deleting it, as for an expired one, would
            // throw that job's position away. A store rebuilt in place (a copy moved over it, a
            // restore) is "another store" with no options that reach the old one: then, and only
            // then, the token is done with.
            let replaced = mismatch.isFromAnotherStore
                ? "; if this store replaced the one the token was made on (a copy moved into its place, a restore), remove the token file (and rotate the output) to export the zone again from the beginning"
                : ""
            StratusCommand.usageFailure(
                "changes: \(tokenPath ?? "the token file") holds the position of \(mismatch.tokenHistory); this run asks for \(mismatch.requestedHistory): run with the options the token was made with, or give another --token-file\(replaced)",
                pointer: "Run 'stratus changes --help' for usage.")
        }
    }

    private func export(tokenPath: String) async throws -> ExitCode {
        let database = asAdministrator ? try store.openAdministratorDatabase(.read) : try store.openDatabase(.read)
        let tokens = try ChangeTokenFile.opened(path: tokenPath)
        let sink = try ChangeOutput(outputPath: outputPath, tokens: tokens)
        var jsonOptions = RecordJSONWriter.Options()
        // Every change names its zone, as every deletion does: a record imported without a
        // zoneID is still of this zone, and a mirror must put it there.
        jsonOptions.writesEveryZoneID = !store.zoneID.isDefault
        // A mirror names who made each record, which its import as the administrator needs.
        jsonOptions.writesEverySystemField = asAdministrator
        let feed = RecordZoneChangeFeed(database: database, zoneID: store.zoneID, desiredKeys: fields, batchSize: batchSize)
        Interruption.install { feed.cancel() }
        let progress = Progress(style: progressStyle, verb: "wrote")
        let counted = Mutex(0)
        let summary = try await feed.run(tokens: tokens, limit: limit) { batch in
            var text = ""
            if let assetsDirectory, jsonOptions.assetFolder == nil, !batch.changes.isEmpty {
                // Made with the first change, whatever it is: a run with nothing new leaves no
                // folder behind, and one that writes an output (deletions only, too) leaves the
                // folder that `import --assets-dir` of that output needs.
                do {
                    jsonOptions.assetFolder = try AssetExportFolder(directory: URL(fileURLWithPath: assetsDirectory, isDirectory: true))
                } catch let error as StratusError {
                    throw CommandFailure(.cannotCreateOutput, error.message)
                }
            }
            for change in batch.changes {
                switch change {
                case .changed(let record):
                    do {
                        // Asset content goes into the folder (synced) before the line naming it.
                        text += try RecordJSONWriter.checkedJSON(for: record, options: jsonOptions)
                    } catch let error as StratusError where error.code == .invalidArguments {
                        // Nothing of this batch is written and the token stays where it was.
                        throw CommandFailure(.dataError, error.message)
                    }
                case .deleted(let id, let recordType): text += RecordJSONWriter.json(forDeletionOf: id, recordType: recordType)
                }
                text += "\n"
            }
            // Output first, durably; the feed saves the token only after this returns. A kill
            // in between repeats this batch on stdout, or is cut away again with --output.
            if let committed = try sink.append(Data(text.utf8)) { tokens.outputCommit = committed }
            progress.update(done: counted.withLock { $0 += batch.changes.count; return $0 })
        }
        let written = summary.changed + summary.deleted
        if summary.unreadable > 0 {
            // Before the summary, which stays the last line.
            StratusCommand.note("left out \(Progress.grouped(summary.unreadable)) changed record(s) this user may not read (their record type's READ permission), as queries leave them out")
        }
        let nothingWritten = written == 0 && outputPath != nil ? " (nothing new: \(outputPath!) not written)" : ""
        progress.finish(
            "wrote \(Progress.grouped(written)) change(s) (\(Progress.grouped(summary.changed)) record(s), \(Progress.grouped(summary.deleted)) deletion(s)) from zone \(store.zoneID.zoneName)\(nothingWritten)\(summary.moreComing ? "; more remain" : ""); token saved in \(tokenPath)",
            json: ["written": written, "changed": summary.changed, "deleted": summary.deleted, "moreComing": summary.moreComing ? 1 : 0]
                .merging(summary.unreadable > 0 ? ["unreadable": summary.unreadable] : [:]) { $1 })
        return summary.end == .cancelled ? ExitCode.stopped(by: Interruption.signal) : .success
    }
}
