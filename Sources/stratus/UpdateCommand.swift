import Foundation
import Stratus
import StratusTransfer

/// `stratus update`: sets fields on every record of a type that matches a predicate, in
/// batches, resumable from a checkpoint.
struct UpdateCommand: Command {
    static let name = "update"
    static let summary = "set fields on every record that matches a predicate"
    static let usage = [
        "stratus update --type TYPE (--where PREDICATE | --all) --set NAME[:TYPE]=VALUE... [--batch-size N] [--dry-run] [--max-errors N] [--reject-file FILE] [--checkpoint FILE] [progress options] [store options]",
    ]
    static let discussion = """
        Reads the records of TYPE that match PREDICATE (every record of TYPE only with --all or
        --where TRUEPREDICATE) in record-name order, from one snapshot of the store, and writes
        the --set values into each that does not hold them already, a batch at a time, each
        batch in one transaction. Only the named fields change. A record changed by someone else
        after it was read fails (serverRecordChanged) instead of being overwritten; a record
        that already holds every value is counted unchanged and not written, so running the
        same update again writes nothing.

        Values are spelled as CSV cells are: --set NAME=VALUE is typed by the container's
        schema, else as an untyped CSV cell (an integer is INT64, another number DOUBLE,
        anything else STRING); --set NAME:TYPE=VALUE gives the type (count:INT64=5,
        due:TIMESTAMP=2025-01-01T09:00:00Z, tags:STRING_LIST=["a","b"], owner:REFERENCE=user-7,
        place:LOCATION=48.85,2.35). An empty VALUE (NAME=) removes the field; a quoted one
        is read as a quoted CSV cell: NAME='""' sets the empty string, NAME='"a,b"' sets a,b.

        --dry-run checks each batch as the real run would, with the same write policy applied
        to the store's records without writing them: a value of another type than its field's,
        a field production lacks, or a record the security roles do not let you write fails
        in the dry run as in the real run (exit 1, each failure reported), and the summary says
        what would be updated.

        With --checkpoint, each batch's transaction also records where the query is, so a run
        stopped anywhere (kill -9 included) and started again with the same FILE goes on after
        the last committed batch: every matching record is updated exactly once. The file is
        removed when the update ends.

        SIGINT, SIGTERM or SIGHUP stops after the current batch (exit 130/143/129;
        one the command was started ignoring, as nohup and a script's `&` do, stays ignored).
        """
    static let options: [Option] = [
        Option.recordType,
        Option("--where", "PREDICATE", #"which records to update, e.g. "status == 'open' AND due < 1735689600000""#, default: "none: give --where or --all"),
        Option(flag: "--all", "every record of the type"),
        Option("--set", "NAME[:TYPE]=VALUE", "a value to write (an empty VALUE removes the field)", default: "none; at least one", repeatable: true),
        Option("--batch-size", "N", "records per batch, each written in one transaction", default: "1000"),
        Option(flag: "--dry-run", "every check of the real run, writing nothing: the same write policy (types, production's refusals, change tags, security roles, sizes) applied to the store's records; reports what would be updated and what would fail, and exits as the real run would"),
        Option("--max-errors", "N", "stop (exit 65) once more than N records failed: the batch in which that happened is written but for its failures, nothing after it", default: "no limit"),
        Option("--reject-file", "FILE", "append each failed record as a JSON line: recordName, error", default: "none: the first 10 reasons go to stderr"),
        Option("--checkpoint", "FILE", "after a crash, kill or interruption, the next run with the same FILE continues after the last committed batch; removed when the update ends", default: "none"),
    ]
    static let optionGroups: [OptionGroup] = [.progress, .store]

    var store: StoreOptions
    var recordType: String
    var predicate: QueryPredicate
    var predicateText: String
    var assignments: [FieldAssignments.Assignment]
    var batchSize = 1_000
    var dryRun = false
    var maxErrors: Int?
    var rejectPath: String?
    var checkpointPath: String?
    var progressStyle = Progress.Style.automatic

    static func parse(_ arguments: ParsedArguments) throws -> UpdateCommand {
        try arguments.expectNoPositionals()
        guard let recordType = arguments.value("--type") else { throw UsageError(message: "--type is required") }
        let predicateText = arguments.value("--where")
        if arguments.flag("--all") && predicateText != nil { throw UsageError(message: "--all and --where do not go together") }
        if predicateText == nil && !arguments.flag("--all") {
            throw UsageError(message: "--type without --where would update every record of the type; say --all (or --where TRUEPREDICATE) to mean that")
        }
        var command = UpdateCommand(
            store: try StoreOptions(arguments), recordType: recordType, predicate: try predicateText.map(QuerySelection.predicate) ?? .all,
            predicateText: predicateText ?? "TRUEPREDICATE", assignments: try FieldAssignments.split(arguments.values("--set")))
        command.batchSize = try arguments.positiveInteger("--batch-size") ?? 1_000
        command.dryRun = arguments.flag("--dry-run")
        command.maxErrors = try arguments.count("--max-errors")
        command.rejectPath = arguments.value("--reject-file")
        command.checkpointPath = arguments.value("--checkpoint")
        command.progressStyle = try Progress.style(arguments)
        if command.dryRun && command.checkpointPath != nil { throw UsageError(message: "--dry-run writes nothing, so there is nothing to --checkpoint") }
        return command
    }

    func run() async throws -> ExitCode {
        let container = try store.openContainer(.existing)
        let database = container.database(with: store.scope)
        var schemas: [String: RecordTypeSchema] = [:]
        for schema in try await container.schemas() { schemas[schema.recordType] = schema }
        let fields = try FieldAssignments(assignments, recordType: recordType, schemas: schemas, zoneID: store.zoneID)
        if store.environment == .production, let schema = schemas[recordType] {
            // Production refuses every save of a field it lacks: said once here, naming the
            // field, rather than once for every matching record.
            let undeclared = fields.values.keys.filter { schema.field($0) == nil }.sorted()
            if let first = undeclared.first {
                throw UsageError(message: "--set \(first): the production schema of \(recordType) has no field '\(first)' (its fields: \(schema.fields.map(\.name).filter { !$0.hasPrefix("___") }.sorted().joined(separator: ", "))); a misspelt name, or a field to declare in development and deploy")
            }
        }
        let failures = try FailureLog(path: rejectPath)
        let resuming = checkpointPath.map { FileManager.default.fileExists(atPath: $0) } == true
        let job = QuerySelection.checkpointedJob(named: commandIdentity, predicateText: predicateText, checkpointPath: checkpointPath)
        let checkpoint = try checkpointPath.map { path in
            try PipelineCheckpoint(store: PipelineCheckpointFile(path: path, belongsTo: job.name))
        }
        // Once the file is known to be this update's: a refused one says only why.
        if resuming, let checkpointPath { Interruption.logResuming(from: checkpointPath) }
        var options = RecordUpdater.Options()
        options.batchSize = batchSize
        options.isDryRun = dryRun
        options.maximumFailures = maxErrors
        // --where dates are read by the schema's types, as a CSV cell's are.
        let predicate = try await WhereClause.typed(job.moment == nil ? self.predicate : try QuerySelection.predicate(predicateText, now: job.moment),
                                                    recordType: recordType, in: container)
        let updater = RecordUpdater(
            database: database, query: Query(recordType: recordType, predicate: predicate), zoneID: store.zoneID,
            setting: fields.values, removing: fields.removed, encrypting: fields.encrypted, options: options)
        let progress = Progress(style: progressStyle, verb: dryRun ? "checked" : "updated")
        Interruption.install { updater.cancel() }

        let summary: RecordUpdater.Summary
        do {
            summary = try await updater.run(checkpoint: checkpoint, failed: { failures.record($0, $1) }) { now in
                // Records written, not read: a batch the store refused was not updated.
                progress.update(done: dryRun ? now.matched : now.updated)
            }
        } catch let failure as RecordUpdater.Failure {
            try? failures.close()
            // Not the summary of a finished update, as the import says of its own.
            progress.finish("stopped by an error: " + line(failure.summary), json: json(failure.summary))
            throw failure.error
        } catch let error as StratusError where error.code == .invalidArguments {
            throw UsageError(message: "--set: \(error.message)")
        }
        try failures.close()
        // Before the summary, which stays the last line.
        WhereClause.sayFieldNotes(nothingMatched: summary.matched == 0)
        if summary.end == .cancelled { Interruption.logStopped("update", done: "updated", checkpointPath: checkpointPath) }
        if summary.end == .failureLimitReached {
            // As the import says it: why first, then the summary, last, saying that the run stopped.
            if summary.matched == 0 && summary.failedInEarlierRuns > (maxErrors ?? 0) {
                StratusCommand.log("the earlier runs of the checkpoint \(checkpointPath ?? "") failed \(Progress.grouped(summary.failedInEarlierRuns)) records, more than --max-errors \(maxErrors ?? 0) allows: nothing more was updated; to go on past them, run again with a larger --max-errors (the limit counts the whole job's failures), or remove the checkpoint to start over")
            } else {
                let earlier = summary.failedInEarlierRuns > 0 ? ", counting \(Progress.grouped(summary.failedInEarlierRuns)) failed by the earlier runs of this checkpoint" : ""
                StratusCommand.log("stopped after \(Progress.grouped(summary.failed + summary.failedInEarlierRuns)) failed records\(earlier) (--max-errors \(maxErrors ?? 0)); " + (dryRun ? "the records after that batch were not checked" : "nothing after that batch was written"))
            }
            progress.finish("stopped by an error: " + line(summary), json: json(summary))
            return .dataError
        }
        progress.finish(line(summary), json: json(summary))
        switch summary.end {
        case .finished:
            return summary.failed + summary.failedInEarlierRuns == 0 ? .success : .someFailed
        case .cancelled:
            return ExitCode.stopped(by: Interruption.signal)
        case .failureLimitReached:
            return .dataError
        }
    }

    /// What the checkpoint file records to tell this command from another.
    private var commandIdentity: String {
        "update \(recordType) where \(QuerySelection.jobText(ofPredicate: predicateText)) set \(FieldAssignments.canonical(assignments)) in \(store.containerIdentifier)/\(store.scope)/\(store.zoneID.zoneName)"
    }

    /// The summary line: `updated 999,000, unchanged 1,000, failed 0`.
    private func line(_ summary: RecordUpdater.Summary) -> String {
        if dryRun {
            return "dry run: would update \(Progress.grouped(summary.updated)), unchanged \(Progress.grouped(summary.unchanged)), failed \(Progress.grouped(summary.failed)), nothing written"
        }
        let earlier = summary.failedInEarlierRuns > 0 ? " (and \(Progress.grouped(summary.failedInEarlierRuns)) in earlier runs)" : ""
        return "updated \(Progress.grouped(summary.updated)), unchanged \(Progress.grouped(summary.unchanged)), failed \(Progress.grouped(summary.failed))\(earlier)"
    }

    private func json(_ summary: RecordUpdater.Summary) -> [String: Int] {
        if dryRun { return ["matched": summary.matched, "wouldUpdate": summary.updated, "unchanged": summary.unchanged, "failed": summary.failed] }
        var fields = ["matched": summary.matched, "updated": summary.updated, "unchanged": summary.unchanged, "failed": summary.failed]
        if summary.failedInEarlierRuns > 0 { fields["failedInEarlierRuns"] = summary.failedInEarlierRuns }
        return fields
    }
}
