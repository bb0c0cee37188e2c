import Foundation
import Stratus
import Synchronization

/// `stratus delete`: records by name (arguments, a file or stdin) or by query.
struct DeleteCommand: Command {
    static let name = "delete"
    static let summary = "records by name or by query"
    static let usage = [
        "stratus delete RECORD_NAME... (--yes | --dry-run) [progress options] [store options]",
        "stratus delete --names-file FILE|- (--yes | --dry-run) [progress options] [store options]",
        "stratus delete --type TYPE (--where PREDICATE | --all) (--yes | --dry-run) [progress options] [store options]",
    ]
    static let discussion = """
        Deletes the named records, or the records of TYPE matching PREDICATE (every record of TYPE
        only with --all or --where TRUEPREDICATE), in batches of 400.
        Records that reference a deleted record with .deleteSelf are deleted with it. Deleting
        needs --yes; --dry-run only counts what would be deleted. The summary says how many
        records were deleted and how many names had no record (not an error: a delete can be
        run again). SIGINT or SIGTERM stops after the current batch (exit 130/143).
        """
    static let options: [Option] = [
        Option("--names-file", "FILE|-", "record names, one per line, from FILE or stdin", default: "none"),
        Option("--type", "TYPE", "delete records of this type that match --where (or --all)", default: "none"),
        Option("--where", "PREDICATE", "with --type: which records to delete", default: "none"),
        Option(flag: "--all", "with --type: every record of the type"),
        Option(flag: "--yes", "really delete"),
        Option(flag: "--dry-run", "only count what would be deleted"),
    ]
    static let optionGroups: [OptionGroup] = [.progress, .store]

    var store: StoreOptions
    var names: [String]
    var type: String?
    var predicate: QueryPredicate?
    var dryRun: Bool
    var progressStyle: Progress.Style

    static func parse(_ arguments: ParsedArguments) throws -> DeleteCommand {
        var names = arguments.positionals
        if let namesFile = arguments.value("--names-file") {
            let text: String
            if namesFile == "-" {
                text = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
            } else {
                guard let data = FileManager.default.contents(atPath: namesFile) else { throw CommandFailure(.inputMissing, "cannot read \(namesFile)") }
                text = String(decoding: data, as: UTF8.self)
            }
            names += text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
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
        return DeleteCommand(
            store: try StoreOptions(arguments), names: names, type: type, predicate: try predicateText.map(QuerySelection.predicate),
            dryRun: arguments.flag("--dry-run"), progressStyle: try Progress.style(arguments))
    }

    func run() async throws -> ExitCode {
        let database = try store.openDatabase(.existing)
        let progress = Progress(style: progressStyle, verb: dryRun ? "counted" : "deleted")
        if dryRun {
            var count = 0, missing = 0
            if let type {
                let query = Query(recordType: type, predicate: predicate ?? .all)
                for try await _ in database.allRecords(matching: query, inZoneWith: store.zoneID, desiredKeys: [], pageSize: 1_000) { count += 1 }
            } else {
                let ids = Set(names.map { Record.ID(recordName: $0, zoneID: store.zoneID) })
                let found = try await database.records(for: Array(ids), desiredKeys: [])
                count = found.values.filter { (try? $0.get()) != nil }.count
                missing = ids.count - count
            }
            let notFound = missing > 0 ? "; \(Progress.grouped(missing)) not found" : ""
            progress.finish("dry run: would delete \(Progress.grouped(count)) records (and what references them with .deleteSelf)\(notFound)", json: ["wouldDelete": count, "notFound": missing])
            return .success
        }
        let op: DeleteRecordsOperation
        if let type {
            op = DeleteRecordsOperation(query: Query(recordType: type, predicate: predicate ?? .all), zoneID: store.zoneID)
        } else {
            op = DeleteRecordsOperation(recordIDs: names.map { Record.ID(recordName: $0, zoneID: store.zoneID) })
        }
        let counter = DeleteCounter()
        op.perRecordDeletionBlock = { _, kind in counter.add(kind) }
        op.perRecordDeleteBlock = { _, result in
            if case .failure = result { counter.addFailure() }
            progress.update(done: counter.deleted)
        }
        Interruption.install { op.cancel() }
        let result: Result<Void, any Error> = await withCheckedContinuation { continuation in
            op.deleteRecordsResultBlock = { continuation.resume(returning: $0) }
            database.add(op)
        }
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
}

/// Counts what the operation's blocks report: records deleted, names with no record, failures.
final class DeleteCounter: Sendable {
    private let counts = Mutex((deleted: 0, notFound: 0, failed: 0))
    func add(_ kind: RecordDeletionKind) {
        counts.withLock { if kind == .deleted { $0.deleted += 1 } else { $0.notFound += 1 } }
    }
    func addFailure() { counts.withLock { $0.failed += 1 } }
    var deleted: Int { counts.withLock { $0.deleted } }
    var notFound: Int { counts.withLock { $0.notFound } }
    var failed: Int { counts.withLock { $0.failed } }
}
