import Foundation
import Stratus
import Synchronization

/// `stratus delete`: records by name (arguments, a file or stdin) or by query.
struct DeleteCommand: Command {
    static let name = "delete"
    static let summary = "records by name or by query"
    static let usage = [
        "stratus delete RECORD_NAME... (--yes | --dry-run) [--as-administrator] [progress options] [store options]",
        "stratus delete --names-file FILE|- (--yes | --dry-run) [--as-administrator] [progress options] [store options]",
        "stratus delete --type TYPE (--where PREDICATE | --all) (--yes | --dry-run) [--batch-size N] [--checkpoint FILE] [--reject-file FILE] [--as-administrator] [progress options] [store options]",
    ]
    static let discussion = """
        Deletes the named records, or the records of TYPE matching PREDICATE (every record of TYPE
        only with --all or --where TRUEPREDICATE), in batches of 400 (--batch-size, with --type).
        Records that reference a deleted record with .deleteSelf are deleted with it. Deleting
        needs --yes; --dry-run only counts what would be deleted. The summary says how many
        records were deleted and how many names had no record (not an error: a delete can be
        run again). SIGINT, SIGTERM or SIGHUP stops after the current batch (exit 130/143/129;
        one the command was started ignoring, as nohup and a script's `&` do, stays ignored).

        With --type, the matching records are read from one snapshot of the store and deleted a
        batch at a time, each batch in one transaction; with --checkpoint, that transaction also
        records where the query is, so a run stopped anywhere and started again with the same
        FILE goes on after the last committed batch (the file is removed when the delete ends).
        A record changed by someone else after it was read is not deleted (it may no longer
        match): it fails with serverRecordChanged (counted failed, exit 1); run again to decide
        on it anew.

        In the public database a user deletes only what its security roles let it write; the
        store's administrator deletes every user's records (--as-administrator), as `zones
        delete --as-administrator` deletes their zones.
        """
    static let options: [Option] = [
        Option("--names-file", "FILE|-", "record names, one per line, from FILE or stdin", default: "none"),
        Option("--type", "TYPE", "delete records of this type that match --where (or --all)", default: "none"),
        Option("--where", "PREDICATE", "with --type: which records to delete", default: "none"),
        Option(flag: "--all", "with --type: every record of the type"),
        Option(flag: "--yes", "really delete"),
        Option(flag: "--dry-run", "only count what would be deleted"),
        Option("--batch-size", "N", "with --type: records per batch, each deleted in one transaction", default: "400"),
        Option("--checkpoint", "FILE", "with --type: after a crash, kill or interruption, the next run with the same FILE continues after the last committed batch; removed when the delete ends", default: "none"),
        Option("--reject-file", "FILE", "append each record the store refused to delete as a JSON line: recordName, error", default: "none: the first 10 reasons go to stderr"),
        Option(flag: "--as-administrator", "delete in the public database as the store's administrator, whoever created the records: the security roles do not limit it (on PostgreSQL, row-level security still binds the login role)"),
    ]
    static let optionGroups: [OptionGroup] = [.progress, .store]

    var store: StoreOptions
    var names: [String]
    var type: String?
    var predicate: QueryPredicate?
    /// `--where` as given (`TRUEPREDICATE` for `--all`), for the checkpoint's name of the job.
    var predicateText = "TRUEPREDICATE"
    var dryRun: Bool
    var progressStyle: Progress.Style
    var batchSize = ModifyRecordsOperation.maximumItemsPerBatch
    var checkpointPath: String?
    var rejectPath: String?
    var asAdministrator = false

    /// The longest line of a names file: a record name has at most 255 characters; the rest
    /// is room for a refusal that names the line rather than a name cut short.
    static let maximumNamesFileLine = 4096

    /// The record names of `--names-file` (one a line, `-` for stdin), read a chunk at a time:
    /// memory holds the names, never a line longer than any name could be, so an endless line
    /// (`/dev/zero`, a binary file named by mistake) is refused where it stands instead of being
    /// read until memory runs out.
    static func readNames(_ path: String) throws -> [String] {
        let handle: FileHandle
        if path == "-" {
            handle = .standardInput
        } else {
            handle = try ReadableFile.open(path, what: "names file")
        }
        var names: [String] = []
        var line: [UInt8] = []
        var lineNumber = 1
        func endLine() {
            // A line is the name as it is, blanks included (`"X "` and `"X"` are two records):
            // only a CRLF file's carriage return goes, and a line of blanks holds no name.
            if line.last == 0x0D { line.removeLast() }
            if line.contains(where: { $0 != 0x20 && $0 != 0x09 }) { names.append(String(decoding: line, as: UTF8.self)) }
            line.removeAll(keepingCapacity: true)
            lineNumber += 1
        }
        while true {
            let chunk: Data
            do {
                chunk = try handle.read(upToCount: 1 << 16) ?? Data()
            } catch {
                throw CommandFailure(.inputMissing, "cannot read \(path): \(error.localizedDescription)")
            }
            if chunk.isEmpty { break }
            for byte in chunk {
                if byte == 0x0A {
                    endLine()
                } else {
                    line.append(byte)
                    if line.count > maximumNamesFileLine {
                        throw CommandFailure(.dataError, "--names-file \(path): line \(lineNumber) is longer than \(maximumNamesFileLine) bytes; it holds one record name a line, and record names have at most 255 characters")
                    }
                }
            }
        }
        endLine()
        return names
    }

    /// Whether a name starts or ends with a blank: a names file's line is the name as it is,
    /// so a stray blank makes another name.
    static func hasBlanksAround(_ name: String) -> Bool {
        name.first.map { $0 == " " || $0 == "\t" } == true || name.last.map { $0 == " " || $0 == "\t" } == true
    }

    /// Says on stderr which names not found have blanks around them, so that a names file with
    /// stray blanks does not pass as "not found" unseen.
    static func noteBlanks(_ names: [String]) {
        guard !names.isEmpty else { return }
        let shown = names.prefix(3).map { "'\($0)'" }.joined(separator: ", ") + (names.count > 3 ? ", …" : "")
        StratusCommand.log("note: \(StoreReport.counted(names.count, "name")) not found \(names.count == 1 ? "has" : "have") blanks around \(names.count == 1 ? "it" : "them"), which are part of a record name: \(shown)")
    }

    static func parse(_ arguments: ParsedArguments) throws -> DeleteCommand {
        var names = arguments.positionals
        if let namesFile = arguments.value("--names-file") {
            names += try readNames(namesFile)
        }
        let type = arguments.value("--type")
        let predicateText = arguments.value("--where")
        if type == nil && names.isEmpty { throw UsageError(message: "name the records to delete, or give --type (and --where)") }
        if type != nil && !names.isEmpty { throw UsageError(message: "delete by names or by --type/--where, not both") }
        if predicateText != nil && type == nil { throw UsageError(message: "--where needs --type") }
        if arguments.flag("--all") && type == nil { throw UsageError(message: "--all needs --type") }
        if arguments.flag("--all") && predicateText != nil { throw UsageError(message: "--all and --where do not go together") }
        if type != nil && predicateText == nil && !arguments.flag("--all") {
            throw UsageError(message: "--type without --where would delete every record of the type; say --all (or --where TRUEPREDICATE) to mean that")
        }
        if !arguments.flag("--yes") && !arguments.flag("--dry-run") { throw UsageError(message: "deleting needs --yes (or --dry-run to count first)") }
        for option in ["--batch-size", "--checkpoint"] where arguments.has(option) && type == nil {
            throw UsageError(message: "\(option) needs --type: it applies to deleting by query")
        }
        if arguments.flag("--dry-run") && arguments.has("--checkpoint") { throw UsageError(message: "--dry-run deletes nothing, so there is nothing to --checkpoint") }
        var command = DeleteCommand(
            store: try StoreOptions(arguments), names: names, type: type, predicate: try predicateText.map(QuerySelection.predicate),
            dryRun: arguments.flag("--dry-run"), progressStyle: try Progress.style(arguments))
        command.batchSize = try arguments.positiveInteger("--batch-size") ?? command.batchSize
        command.checkpointPath = arguments.value("--checkpoint")
        if let predicateText { command.predicateText = predicateText }
        command.rejectPath = arguments.value("--reject-file")
        command.asAdministrator = arguments.flag("--as-administrator")
        if command.asAdministrator { try command.store.checkAdministratorScope() }
        return command
    }

    func run() async throws -> ExitCode {
        let container = try store.openContainer(.existing)
        let database = asAdministrator ? StoreOptions.administratorDatabase(of: container) : container.database(with: store.scope)
        // --where dates are read by the schema's types, as a CSV cell's are.
        var predicate = self.predicate
        if let type { predicate = try await WhereClause.typed(predicate ?? .all, recordType: type, in: container) }
        let progress = Progress(style: progressStyle, verb: dryRun ? "counted" : "deleted")
        if dryRun {
            // One the user may not write fails as the real run would (77), not with a count.
            try await database.checkWriteAccess()
            var count = 0, missing = 0
            if let type {
                // The library's dry run of the same job: one snapshot, record IDs only.
                var options = RecordDeleter.Options()
                options.isDryRun = true
                options.batchSize = batchSize
                let deleter = RecordDeleter(database: database, query: Query(recordType: type, predicate: predicate ?? .all), zoneID: store.zoneID, options: options)
                do {
                    count = try await deleter.run().matched
                } catch let failure as RecordDeleter.Failure {
                    throw failure.error
                }
            } else {
                let ids = Set(names.map { Record.ID(recordName: $0, zoneID: store.zoneID) })
                let found = try await database.records(for: Array(ids), desiredKeys: [])
                count = found.values.filter { (try? $0.get()) != nil }.count
                missing = ids.count - count
                Self.noteBlanks(found.compactMap { id, result in (try? result.get()) == nil && Self.hasBlanksAround(id.recordName) ? id.recordName : nil }.sorted())
            }
            WhereClause.sayFieldNotes(nothingMatched: count == 0)
            let notFound = missing > 0 ? "; \(Progress.grouped(missing)) not found" : ""
            progress.finish("dry run: would delete \(StoreReport.counted(count, "record")) (and what references them with .deleteSelf)\(notFound)", json: ["wouldDelete": count, "notFound": missing])
            return .success
        }
        let failures = try FailureLog(path: rejectPath)
        if let type { return try await deleteMatches(of: type, where: predicate, in: database, of: container, progress: progress, failures: failures) }
        let op = DeleteRecordsOperation(recordIDs: names.map { Record.ID(recordName: $0, zoneID: store.zoneID) })
        let counter = DeleteCounter()
        op.perRecordDeletionBlock = { id, kind in counter.add(kind, name: id.recordName) }
        op.perRecordDeleteBlock = { id, result in
            if case .failure(let error) = result {
                counter.addFailure()
                failures.record(id, error as? StratusError ?? StratusError(.internalError, "\(error)"))
            }
            progress.update(done: counter.deleted)
        }
        Interruption.install { op.cancel() }
        let result: Result<Void, any Error> = await withCheckedContinuation { continuation in
            op.deleteRecordsResultBlock = { continuation.resume(returning: $0) }
            database.add(op)
        }
        try failures.close()
        Self.noteBlanks(counter.notFoundWithBlanks)
        progress.finish(
            "deleted \(Progress.grouped(counter.deleted)), not found \(Progress.grouped(counter.notFound)), failed \(Progress.grouped(counter.failed))",
            json: ["deleted": counter.deleted, "notFound": counter.notFound, "failed": counter.failed])
        switch result {
        case .success: return .success
        case .failure(let error as StratusError) where error.code == .partialFailure: return .someFailed
        case .failure(let error as StratusError) where error.code == .operationCancelled: return ExitCode.stopped(by: Interruption.signal)
        case .failure(let error): throw error
        }
    }

    /// Deletes the matches of `--type`/`--where` through ``RecordDeleter``: a query over every
    /// page feeding batched deletes, resumable with `--checkpoint`.
    private func deleteMatches(of type: String, where given: QueryPredicate?, in database: Database, of container: Container, progress: Progress, failures: FailureLog) async throws -> ExitCode {
        let job = QuerySelection.checkpointedJob(
            named: "delete \(type) where \(QuerySelection.jobText(ofPredicate: predicateText)) in \(store.containerIdentifier)/\(store.scope)/\(store.zoneID.zoneName)"
                + (asAdministrator ? " as administrator" : ""),
            predicateText: predicateText, checkpointPath: checkpointPath)
        let identity = job.name
        // A job that goes on reads `now` as its first run did (see checkpointedJob).
        let predicate = job.moment == nil ? given : try await WhereClause.typed(try QuerySelection.predicate(predicateText, now: job.moment), recordType: type, in: container)
        var options = RecordDeleter.Options()
        options.batchSize = batchSize
        let deleter = RecordDeleter(database: database, query: Query(recordType: type, predicate: predicate ?? .all), zoneID: store.zoneID, options: options)
        let resuming = checkpointPath.map { FileManager.default.fileExists(atPath: $0) } == true
        let checkpoint = try checkpointPath.map { try PipelineCheckpoint(store: PipelineCheckpointFile(path: $0, belongsTo: identity)) }
        // Once the file is known to be this delete's: a refused one says only why.
        if resuming, let checkpointPath { Interruption.logResuming(from: checkpointPath) }
        Interruption.install { deleter.cancel() }
        func finish(_ summary: RecordDeleter.Summary, stopped: Bool = false) {
            WhereClause.sayFieldNotes(nothingMatched: summary.matched == 0)
            progress.finish(
                // A matched record not found when its batch came was deleted since: by a
                // .deleteSelf cascade of an earlier batch of this run, or by another writer.
                (stopped ? "stopped by an error: " : "") + "deleted \(Progress.grouped(summary.deleted)), already gone \(Progress.grouped(summary.notFound)) (a .deleteSelf cascade of this run, or another writer), failed \(Progress.grouped(summary.failed))"
                    + (summary.failedInEarlierRuns > 0 ? " (and \(Progress.grouped(summary.failedInEarlierRuns)) in earlier runs)" : ""),
                json: ["deleted": summary.deleted, "notFound": summary.notFound, "failed": summary.failed]
                    .merging(summary.failedInEarlierRuns > 0 ? ["failedInEarlierRuns": summary.failedInEarlierRuns] : [:]) { $1 })
        }
        let summary: RecordDeleter.Summary
        do {
            summary = try await deleter.run(checkpoint: checkpoint, failed: { failures.record($0, $1) }) { now in
                progress.update(done: now.deleted)
            }
        } catch let failure as RecordDeleter.Failure {
            try? failures.close()
            finish(failure.summary, stopped: true)
            throw failure.error
        }
        try failures.close()
        // Before the summary, which stays the last line.
        if summary.end == .cancelled { Interruption.logStopped("delete", done: "deleted", checkpointPath: checkpointPath) }
        finish(summary)
        switch summary.end {
        case .finished: return summary.failed + summary.failedInEarlierRuns == 0 ? .success : .someFailed
        case .cancelled: return ExitCode.stopped(by: Interruption.signal)
        }
    }
}

/// Counts what the operation's blocks report: records deleted, names with no record, failures.
final class DeleteCounter: Sendable {
    private let counts = Mutex((deleted: 0, notFound: 0, failed: 0))
    private let blankNames = Mutex<[String]>([])
    func add(_ kind: RecordDeletionKind, name: String) {
        counts.withLock { if kind == .deleted { $0.deleted += 1 } else { $0.notFound += 1 } }
        if kind != .deleted, DeleteCommand.hasBlanksAround(name) { blankNames.withLock { $0.append(name) } }
    }
    /// Names not found that have blanks around them, as the input gave them.
    var notFoundWithBlanks: [String] { blankNames.withLock { $0 } }
    func addFailure() { counts.withLock { $0.failed += 1 } }
    var deleted: Int { counts.withLock { $0.deleted } }
    var notFound: Int { counts.withLock { $0.notFound } }
    var failed: Int { counts.withLock { $0.failed } }
}
