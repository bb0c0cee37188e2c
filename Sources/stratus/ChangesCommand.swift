import Foundation
import Stratus
import StratusTransfer
import Synchronization

/// `stratus changes`: a zone's changes since the last run, as NDJSON, for cron jobs.
struct ChangesCommand {
    static let usage = """
        usage: stratus changes --token-file FILE [--zone NAME] [--output FILE] [--fields K1,K2]
                               [--batch N] [--limit N] [store options]
               stratus changes compact --keep-days N [store options]

        Writes the zone's changes since the token in FILE as NDJSON, oldest first, in the shape of
        CloudKit's changes/zone answers: a changed record as its record JSON (once, in its current
        state, however often it changed), a deletion as
        {"recordName":…,"recordType":…,"deleted":true,"zoneID":{…}}. Without FILE (or with an
        empty one) the zone's whole history is written. After each batch the output is flushed
        and synced, and only then is the new token written to FILE (temporary file, fsync, rename).

          --token-file FILE   where the token is kept between runs (locked while running)
          --output FILE       append to FILE and commit it together with the token: every change
                              lands in the outputs exactly once, wherever a run is killed. A run
                              first cuts the last output file back to its committed length, so
                              each run may name a new FILE (export-$(date +%s).ndjson); move
                              files away only after a run that exited 0.
          --fields K1,K2      only these fields of changed records
          --batch N           changes per batch and commit (default 1000)
          --limit N           stop after about N changes; the next run continues

        Without --output, changes go to stdout at least once: a run killed after writing a batch
        but before moving the token writes that batch again on the next run (at most one batch,
        possibly after an incomplete last line). Replaying is harmless for consumers that apply
        changes as upserts and deletes; with --output nothing is repeated.

        compact removes tombstones of deletions older than N days from the database; tokens from
        before them then expire (the store also compacts on its own after 30 days).

        Exit codes as for every command; 65 when the token has expired (the zone was deleted and
        created again, or its history was compacted): remove FILE to export the zone again from
        the beginning. 75 when another run holds the token file.
        """

    var store: StoreOptions
    var tokenPath: String?
    var outputPath: String?
    var fields: [String]?
    var batchSize = 1000
    var limit: Int?
    /// For `changes compact`: tombstones older than this many days go.
    var compactKeepDays: Double?

    init(_ arguments: inout Arguments) throws {
        store = try StoreOptions(&arguments)
        tokenPath = try arguments.value("--token-file")
        outputPath = try arguments.value("--output")
        fields = try arguments.value("--fields").map { $0.split(separator: ",").map(String.init) }
        if let text = try arguments.value("--batch") {
            guard let value = Int(text), value > 0 else { throw UsageError(message: "--batch must be a positive number, not '\(text)'") }
            batchSize = value
        }
        if let text = try arguments.value("--limit") {
            guard let value = Int(text), value > 0 else { throw UsageError(message: "--limit must be a positive number, not '\(text)'") }
            limit = value
        }
        let keepDays = try arguments.value("--keep-days")
        try arguments.rejectUnknownOptions()
        if arguments.words == ["compact"] {
            guard let keepDays, let days = Double(keepDays), days >= 0, days.isFinite else {
                throw UsageError(message: "compact needs --keep-days N (a number of days, 0 or more)")
            }
            compactKeepDays = days
        } else {
            if let word = arguments.words.first { throw UsageError(message: "unexpected argument '\(word)'") }
            if keepDays != nil { throw UsageError(message: "--keep-days belongs to `stratus changes compact`") }
            if tokenPath == nil { throw UsageError(message: "--token-file is required") }
        }
    }

    func run() async throws -> ExitCode {
        do {
            if let compactKeepDays {
                let removed = try await store.openDatabase().compactChangeHistory(retention: compactKeepDays * 86_400)
                Self.log("removed \(removed.recordTombstonesRemoved) record tombstone(s) and \(removed.zoneTombstonesRemoved) zone tombstone(s)")
                return .success
            }
            return try await export(tokenPath: tokenPath!)
        } catch let error as CommandFailure {
            Self.log(error.message)
            return error.code
        } catch let error as StratusError where error.code == .changeTokenExpired {
            Self.log("\(error.message)\nthe token in \(tokenPath ?? "?") has expired: remove it (and rotate the output) to export the zone again from the beginning")
            return .dataError
        }
    }

    private func export(tokenPath: String) async throws -> ExitCode {
        try ChangeTokenFile.lock(tokenPath)
        var state = try ChangeTokenFile.read(tokenPath)
        let sink = try ChangeSink(outputPath: outputPath, state: &state, tokenPath: tokenPath)
        let database = try store.openDatabase()
        var written = 0, deletions = 0
        var moreComing = true
        while moreComing && written < (limit ?? .max) {
            let size = min(batchSize, (limit ?? .max) - written)
            let batch = try await fetchBatch(database, after: state.token, size: size)
            var text = ""
            for change in batch.changes {
                switch change {
                case .changed(let record):
                    text += RecordJSONWriter.json(for: record)
                case .deleted(let id, let recordType):
                    text += RecordJSONWriter.json(forDeletionOf: id, recordType: recordType)
                    deletions += 1
                }
                text += "\n"
            }
            // Output first, durably; only then the token. A kill in between repeats this batch
            // on stdout, or is cut away again with --output.
            if let committed = try sink.append(Data(text.utf8)) { state.output = committed }
            state.token = batch.token
            try state.write(to: tokenPath)
            written += batch.changes.count
            moreComing = batch.moreComing
        }
        Self.log("wrote \(written) change(s) (\(written - deletions) record(s), \(deletions) deletion(s)) from zone \(store.zoneID.zoneName)\(moreComing ? "; more remain" : ""); token saved in \(tokenPath)")
        return .success
    }

    /// One batch of changes, in commit order, through ``FetchRecordZoneChangesOperation``.
    private func fetchBatch(_ database: Database, after token: ServerChangeToken?, size: Int) async throws -> (changes: [ZoneChangeBatch.Change], token: ServerChangeToken, moreComing: Bool) {
        let zoneID = store.zoneID
        let changes = Mutex<[ZoneChangeBatch.Change]>([])
        let end = Mutex<Result<(serverChangeToken: ServerChangeToken, moreComing: Bool), any Error>?>(nil)
        let operation = FetchRecordZoneChangesOperation(
            recordZoneIDs: [zoneID],
            configurationsByRecordZoneID: [zoneID: .init(previousServerChangeToken: token, resultsLimit: size, desiredKeys: fields)])
        operation.fetchAllChanges = false
        operation.recordWasChangedBlock = { _, result in
            if case .success(let record) = result { changes.withLock { $0.append(.changed(record)) } }
        }
        operation.recordWithIDWasDeletedBlock = { id, type in changes.withLock { $0.append(.deleted(id, recordType: type)) } }
        operation.recordZoneFetchResultBlock = { _, result in
            end.withLock { $0 = result.map { (serverChangeToken: $0.serverChangeToken, moreComing: $0.moreComing) } }
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            operation.fetchRecordZoneChangesResultBlock = { _ in continuation.resume() }
            database.add(operation)
        }
        guard let result = end.withLock({ $0 }) else {
            throw StratusError(.internalError, "the change fetch ended without a result for zone '\(zoneID.zoneName)'")
        }
        let (newToken, moreComing) = try result.get()
        return (changes.withLock { $0 }, newToken, moreComing)
    }

    static func log(_ message: String) {
        FileHandle.standardError.write(Data("stratus: \(message)\n".utf8))
    }
}

/// Where `stratus changes` writes: stdout, or an output file it commits with the token.
private final class ChangeSink {
    private let descriptor: Int32
    private let name: String
    /// For an output file: its identity, path and committed length.
    private var commit: ChangeTokenFile.OutputCommit?

    /// Opens the output. First cuts the last output file back to its committed length, which
    /// drops what a killed run wrote after its last commit, also when this run writes to
    /// another file; then records a new file's identity before anything is written to it.
    init(outputPath: String?, state: inout ChangeTokenFile, tokenPath: String) throws {
        guard let outputPath else {
            descriptor = STDOUT_FILENO
            name = "stdout"
            return
        }
        name = outputPath
        if let committed = state.output { try Self.cutBack(committed) }
        descriptor = open(outputPath, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw CommandFailure.system(.cannotCreateOutput, "cannot open the output file \(outputPath)") }
        let (identity, size) = try FileDescriptorOutput.identity(of: descriptor)
        if let committed = state.output, committed.fileIdentity == identity {
            commit = ChangeTokenFile.OutputCommit(fileIdentity: identity, length: committed.length, path: outputPath)
        } else {
            // A new (or rotated) output file: what it holds already is not ours. Commit its
            // identity before writing, so that a kill during the first batch is cut away next time.
            commit = ChangeTokenFile.OutputCommit(fileIdentity: identity, length: size, path: outputPath)
            state.output = commit
            try state.write(to: tokenPath)
        }
        guard lseek(descriptor, off_t(commit!.length), SEEK_SET) >= 0 else { throw CommandFailure.system(.cannotCreateOutput, "cannot seek in \(outputPath)") }
    }

    /// Truncates the committed output file to its committed length, when it is still there.
    private static func cutBack(_ committed: ChangeTokenFile.OutputCommit) throws {
        let descriptor = open(committed.path, O_WRONLY | O_CLOEXEC)
        // Gone (rotated after a successful run): nothing of it is uncommitted.
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        let (identity, size) = try FileDescriptorOutput.identity(of: descriptor)
        guard identity == committed.fileIdentity else { return }
        guard size >= committed.length else {
            throw CommandFailure(.dataError, "the output file \(committed.path) is shorter (\(size) bytes) than its committed \(committed.length) bytes; something else changed it. Restore it, or remove the token file to start over")
        }
        guard size == committed.length || (ftruncate(descriptor, off_t(committed.length)) == 0 && fsync(descriptor) == 0) else {
            throw CommandFailure.system(.cannotCreateOutput, "cannot cut \(committed.path) back to its committed length")
        }
    }

    deinit {
        if descriptor != STDOUT_FILENO { close(descriptor) }
    }

    /// Writes `data` and makes it durable; answers the output's new committed state (`nil` for stdout).
    func append(_ data: Data) throws -> ChangeTokenFile.OutputCommit? {
        try FileDescriptorOutput.writeAll(data, to: descriptor, name: name)
        // stdout may be a pipe or terminal, which cannot be synced; a redirected file can.
        if fsync(descriptor) != 0 && errno != EINVAL && errno != EROFS {
            throw CommandFailure.system(.cannotCreateOutput, "cannot sync \(name)")
        }
        guard var commit else { return nil }
        commit.length += Int64(data.count)
        self.commit = commit
        return commit
    }
}
