import Foundation
import Stratus

/// `stratus delete`: records by name (arguments, a file or stdin) or by query.
struct DeleteCommand {
    static let usage = """
        usage: stratus delete [RECORD_NAME...] [--names-file FILE|-] [--type TYPE --where PREDICATE]
                              (--yes | --dry-run) [progress options] [store options]

        Deletes the named records, or every record of TYPE matching PREDICATE, in batches of 400.
        Records that reference a deleted record with .deleteSelf are deleted with it. Deleting
        needs --yes; --dry-run only counts what would be deleted. A name that does not exist is
        not an error.
        """

    var store: StoreOptions
    var names: [String]
    var type: String?
    var predicate: String?
    var yes: Bool
    var dryRun: Bool
    var progressStyle: Progress.Style

    init(_ arguments: inout Arguments) throws {
        store = try StoreOptions(&arguments)
        type = try arguments.value("--type")
        predicate = try arguments.value("--where")
        let namesFile = try arguments.value("--names-file")
        yes = arguments.flag("--yes")
        dryRun = arguments.flag("--dry-run")
        progressStyle = try Progress.style(&arguments)
        try arguments.rejectUnknownOptions()
        names = arguments.words
        if let namesFile {
            let text: String
            if namesFile == "-" {
                text = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
            } else {
                guard let data = FileManager.default.contents(atPath: namesFile) else { throw CommandFailure(.inputMissing, "cannot read \(namesFile)") }
                text = String(decoding: data, as: UTF8.self)
            }
            names += text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        }
        if type == nil && names.isEmpty { throw UsageError(message: "name the records to delete, or give --type (and --where)") }
        if type != nil && !names.isEmpty { throw UsageError(message: "delete by names or by --type/--where, not both") }
        if predicate != nil && type == nil { throw UsageError(message: "--where needs --type") }
        if !yes && !dryRun { throw UsageError(message: "deleting needs --yes (or --dry-run to count first)") }
    }

    func run() async throws -> ExitCode {
        let database = try store.openDatabase()
        let progress = Progress(style: progressStyle, verb: dryRun ? "counted" : "deleted")
        if dryRun {
            var count = 0
            if let type {
                let query = Query(recordType: type, predicate: try predicate.map { try QueryPredicate(format: $0) } ?? .all)
                for try await _ in database.allRecords(matching: query, inZoneWith: store.zoneID, desiredKeys: [], pageSize: 1_000) { count += 1 }
            } else {
                let found = try await database.records(for: names.map { Record.ID(recordName: $0, zoneID: store.zoneID) }, desiredKeys: [])
                count = found.values.filter { (try? $0.get()) != nil }.count
            }
            progress.finish("dry run: would delete \(Progress.grouped(count)) records (and what references them with .deleteSelf)", json: ["wouldDelete": count])
            return .success
        }
        let op: DeleteRecordsOperation
        if let type {
            op = DeleteRecordsOperation(query: Query(recordType: type, predicate: try predicate.map { try QueryPredicate(format: $0) } ?? .all), zoneID: store.zoneID)
        } else {
            op = DeleteRecordsOperation(recordIDs: names.map { Record.ID(recordName: $0, zoneID: store.zoneID) })
        }
        let counter = DeleteCounter()
        op.perRecordDeleteBlock = { _, result in
            counter.add(failed: (try? result.get()) == nil)
            progress.update(done: counter.deleted)
        }
        Interruption.install()
        let cancelWatcher = Task {
            while !Task.isCancelled {
                if Interruption.signal != 0 { op.cancel(); return }
                try? await Task.sleep(for: .milliseconds(100))
            }
        }
        let result: Result<Void, any Error> = await withCheckedContinuation { continuation in
            op.deleteRecordsResultBlock = { continuation.resume(returning: $0) }
            database.add(op)
        }
        cancelWatcher.cancel()
        progress.finish("deleted \(Progress.grouped(counter.deleted)), failed \(Progress.grouped(counter.failed))", json: ["deleted": counter.deleted, "failed": counter.failed])
        switch result {
        case .success: return .success
        case .failure(let error as StratusError) where error.code == .partialFailure: return .someFailed
        case .failure(let error as StratusError) where error.code == .operationCancelled: return ExitCode.stopped(by: Interruption.signal)
        case .failure(let error): throw error
        }
    }
}

/// Counts deletions reported by the operation's blocks.
final class DeleteCounter: @unchecked Sendable {
    // @unchecked: the counts are only touched under `lock`.
    private let lock = NSLock()
    private var counts = (deleted: 0, failed: 0)
    func add(failed: Bool) { lock.withLock { if failed { counts.failed += 1 } else { counts.deleted += 1 } } }
    var deleted: Int { lock.withLock { counts.deleted } }
    var failed: Int { lock.withLock { counts.failed } }
}
