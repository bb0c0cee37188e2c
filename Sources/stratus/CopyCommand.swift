import Foundation
import Stratus
import StratusPostgres
import Synchronization

/// `stratus copy --from STORE --to STORE`: a whole store into another, between engines,
/// resumable, compared zone by zone at the end.
struct CopyCommand: Command {
    static let name = "copy"
    static let summary = "copy a whole store into another (SQLite and PostgreSQL either way)"
    static let usage = ["stratus copy --from PATH|URL --to PATH|URL [--checkpoint FILE] [--batch-size N] [progress options]"]
    static let discussion = """
        Copies every container's schemas, every database of every user, every zone with its
        capabilities and every record with its system fields, change tag and assets from one
        store into another: an SQLite file or a PostgreSQL database on either side. The
        destination is created when missing and must hold no records, unless --checkpoint names
        the checkpoint of the copy that began it. With --checkpoint, a copy stopped by SIGINT,
        SIGTERM, a kill or a crash goes on where it stopped when run again with the same
        options; the file is removed once the stores compare equal (run again after that, the
        copy finds nothing to copy and compares the stores again, as after a kill that
        came once the file was removed). Each zone is read type by
        type, each type from one snapshot; stop writers to the source for an exact copy. At the
        end both stores are read again and compared zone by zone: the record count and a
        checksum over each record's name, type, change tag, parent and field values (assets by
        content); and each container's schemas, in both environments. Exit 0 when every zone
        and schema matches; exit 1 naming the zones and schemas that differ or the
        records that could not be copied (the checkpoint is kept, so a run again retries them).
        On PostgreSQL, both sides must reach every row: a role that row-level security binds
        (see `users row-security`) is refused with exit 77 before anything is copied; copy as
        the tables' owner, a superuser or a role with BYPASSRLS.
        """
    static let options: [Option] = [
        Option("--from", "PATH|URL", "the store to copy: an SQLite file or postgresql://…", default: "none; required"),
        Option("--to", "PATH|URL", "the store to copy into (created when missing)", default: "none; required"),
        Option("--checkpoint", "FILE", "keep how far the copy got in FILE and go on from it (removed once the stores compare equal)", default: "none"),
        Option("--batch-size", "N", "records written per transaction", default: "500"),
    ]
    static let optionGroups: [OptionGroup] = [.progress]
    static let exitNotes: String? = """
        copy: 1 when a zone differs after the copy or records could not be copied (named on
        stderr); 77 when a PostgreSQL role row-level security binds is on either side.
        """

    var from: String
    var to: String
    var checkpointPath: String?
    var batchSize: Int
    var progressStyle: Progress.Style

    static func parse(_ arguments: ParsedArguments) throws -> CopyCommand {
        try arguments.expectNoPositionals()
        guard let from = arguments.value("--from") else { throw UsageError(message: "--from names the store to copy") }
        guard let to = arguments.value("--to") else { throw UsageError(message: "--to names the store to copy into") }
        for (option, value) in [("--from", from), ("--to", to)] where value.isEmpty {
            throw UsageError(message: "\(option) needs a non-empty value")
        }
        if from == to { throw UsageError(message: "--from and --to name the same store") }
        return CopyCommand(
            from: from, to: to, checkpointPath: arguments.value("--checkpoint"), batchSize: try arguments.positiveInteger("--batch-size") ?? 500,
            progressStyle: try Progress.style(arguments))
    }

    func run() async throws -> ExitCode {
        // Installed first, so that a signal while the stores open stops the copy before its
        // first batch instead of killing it.
        let stop = CopyStop()
        Interruption.install { stop.request() }
        let checkpoint = try checkpointPath.map { try CopyCheckpointFile(path: $0) }
        // Its lock lasts as long as the object: held through the comparison too, as the copier
        // does not keep the store after its run.
        defer { withExtendedLifetime(checkpoint) {} }
        let saved = try checkpoint?.load()
        let resuming = saved != nil
        let source = try StoreOptions.openEngine(from, access: .read, origin: "--from",
                                                 missingStoreAdvice: "a copy reads an existing store; name the file or URL of the store to copy")
        // Before the destination is created: a role that reads only some rows copies nothing.
        try await StoreCopier.checkReachesEveryRow(source, as: "source")
        // Going on from a checkpoint is going on in the destination the earlier run wrote to: a
        // missing one is the wrong store, not one to create.
        let destination = try StoreOptions.openEngine(
            to, access: resuming ? .existing : .createIfMissing, origin: "--to",
            missingStoreAdvice: "the checkpoint \(checkpointPath ?? "") says an earlier run copied into it; name that store, or remove the checkpoint to start over")
        let copier = StoreCopier(from: source, to: destination, batchSize: batchSize)
        if let checkpoint, let saved, copier.continues(saved) {
            // As import says it: the summary then counts only the records this run copies. (A
            // checkpoint of other stores is refused by the copy, without this note first.)
            StratusCommand.note("going on from the checkpoint \(checkpoint.path): what an earlier run copied is not copied again, and the summary counts this run's records")
        }
        stop.attach(copier)
        let progress = Progress(style: progressStyle, verb: "copied")
        let summary: StoreCopier.Summary
        let copiedSoFar = Atomic<Int>(0)
        do {
            summary = try await copier.run(checkpointStore: checkpoint) { done in
                copiedSoFar.store(done, ordering: .relaxed)
                progress.update(done: done)
            }
        } catch let error as StratusError where error.code == .invalidArguments {
            // The advice fits a destination left holding records by a copy stopped without a
            // checkpoint, not the other refusals (the same store under two names).
            let leftHoldingRecords = checkpointPath == nil && error.underlyingError is StoreCopier.DestinationHoldsRecords
            throw UsageError(message: error.message + (leftHoldingRecords ? " (give --checkpoint to make a copy that can go on after a stop)" : ""))
        } catch var error as StratusError where checkpointPath == nil && copiedSoFar.load(ordering: .relaxed) > 0 {
            // A retry (75) of a copy without a checkpoint is refused, as the destination holds
            // what this run copied: said now, with what to do, not left for the retry to find.
            error.message += "; the copy stopped after \(StoreReport.counted(copiedSoFar.load(ordering: .relaxed), "record")): the destination (--to) holds them, so a new copy into it is refused until it is emptied or removed (give --checkpoint to make a copy that can go on after a stop)"
            throw error
        }
        let skipped = summary.zonesSkipped > 0 ? " (\(StoreReport.counted(summary.zonesSkipped, "zone")) copied by an earlier run)" : ""
        if summary.end == .cancelled {
            progress.finish("stopped after copying \(StoreReport.counted(summary.recordsCopied, "record"))\(checkpointPath.map { "; run again with --checkpoint \($0) to go on" } ?? "")",
                            json: ["copied": summary.recordsCopied])
            return ExitCode.stopped(by: Interruption.signal)
        }
        for failure in summary.failures { StratusCommand.log("not copied: \(failure)") }

        let comparisons: [StoreCopier.ZoneComparison]
        do {
            comparisons = try await copier.compare()
        } catch is CancellationError {
            // The copy is whole; what a stop gives up is the comparison, which a run again does.
            progress.finish("stopped while comparing the stores, after copying \(StoreReport.counted(summary.recordsCopied, "record")); \(checkpointPath.map { "run again with --checkpoint \($0) to compare them" } ?? "they were not compared")",
                            json: ["copied": summary.recordsCopied])
            return ExitCode.stopped(by: Interruption.signal)
        }
        let differing = comparisons.filter { !$0.matches }
        for zone in differing {
            StratusCommand.log("zone \(zone.zone) differs: the source holds \(zone.source), the destination \(zone.destination)")
        }
        let schemasDiffering = try await copier.differingSchemas()
        for schema in schemasDiffering { StratusCommand.log("the schema of \(schema) differs") }
        let schemaPart = schemasDiffering.isEmpty ? "" : "; \(StoreReport.counted(schemasDiffering.count, "schema")) differ\(schemasDiffering.count == 1 ? "s" : "")"
        let subscriptionsDiffering = try await copier.differingSubscriptions()
        for database in subscriptionsDiffering { StratusCommand.log("the subscriptions of the \(database) differ") }
        let subscriptionPart = summary.subscriptionsCopied == 0 ? "" : ", and \(StoreReport.counted(summary.subscriptionsCopied, "subscription"))"
        await Self.noteUserChange(from: source, to: destination)
        progress.finish(
            "copied \(StoreReport.counted(summary.recordsCopied, "record")) in \(StoreReport.counted(summary.zonesCopied, "zone"))\(skipped)\(subscriptionPart); \(Progress.grouped(comparisons.count - differing.count)) of \(StoreReport.counted(comparisons.count, "zone")) match\(schemaPart)",
            json: ["copied": summary.recordsCopied, "zones": summary.zonesCopied, "zonesSkipped": summary.zonesSkipped, "zonesCompared": comparisons.count,
                   "zonesDiffering": differing.count, "schemasDiffering": schemasDiffering.count, "subscriptions": summary.subscriptionsCopied,
                   "subscriptionsDiffering": subscriptionsDiffering.count, "failed": summary.failures.count])
        guard differing.isEmpty && schemasDiffering.isEmpty && subscriptionsDiffering.isEmpty && summary.failures.isEmpty else { return .someFailed }
        // Only now: a copy stopped while it compared goes on with the comparison.
        try checkpoint?.remove()
        return .success
    }
}

extension CopyCommand {
    /// Whether `user` owns a private database of `engine`'s, or created a public record there.
    static func hasRecords(_ user: String, in engine: any StorageEngine) async -> Bool {
        guard let inventory = try? await Container.anonymous(identifier: "inventory", engine: engine).storeInventory() else { return false }
        for entry in inventory.databases {
            let container = Container(identifier: entry.containerIdentifier, engine: engine, userName: user, environment: entry.environment)
            guard let me = try? await container.userRecordID() else { continue }
            switch entry.scope {
            case .private:
                if entry.owner == me.recordName { return true }
            case .public:
                guard let mine = try? QueryPredicate(format: "creatorUserRecordID == %@", me) else { continue }
                for type in Set(entry.zones.flatMap(\.recordCounts.keys)).sorted() {
                    let page = try? await container.publicCloudDatabase.records(matching: Query(recordType: type, predicate: mine), inZoneWith: nil, desiredKeys: [], resultsLimit: 1)
                    if page?.matchResults.isEmpty == false { return true }
                }
            case .shared:
                continue
            }
        }
        return false
    }

    /// Says so when commands name no user and act as another one on the copy than on the
    /// source (an SQLite store acts as the login name, a PostgreSQL store as the role it logs
    /// in as): the copied records' creators and private databases keep their users, so the
    /// caller's own records would refuse changes and their private records seem gone.
    static func noteUserChange(from source: any StorageEngine, to destination: any StorageEngine) async {
        let (before, after) = (Container.defaultUserName(for: source), Container.defaultUserName(for: destination))
        guard before != after else { return }
        // Only when the source's user has records there (a private database, public records it
        // created): a user who has none (the role a PostgreSQL store was made as, when others
        // wrote everything) is no one to act as on the copy.
        guard await hasRecords(before, in: source) else { return }
        func origin(_ engine: any StorageEngine) -> String {
            engine is PostgresEngine ? "the PostgreSQL role it logs in as" : "the login name"
        }
        StratusCommand.note("note: commands on --to act as the user '\(after)' (\(origin(destination))) where on --from they acted as '\(before)' (\(origin(source))); give them --user \(before) (or set STRATUS_USER=\(before)) to act on the copy as the same user: the creator of the same records, with the same private database")
    }
}

/// Passes a stop request to the copier, also one that came before the copier existed.
final class CopyStop: Sendable {
    private let state = Mutex<(requested: Bool, copier: StoreCopier?)>((false, nil))

    func request() {
        state.withLock { state in
            state.requested = true
            state.copier?.cancel()
        }
    }

    func attach(_ copier: StoreCopier) {
        state.withLock { state in
            state.copier = copier
            if state.requested { copier.cancel() }
        }
    }
}
