import Foundation
import Stratus
import StratusTransfer

/// `stratus import`: records from a file or stdin into the store, re-runnable and resumable.
struct ImportCommand: Command {
    static let name = "import"
    static let summary = "records from NDJSON, JSON, a CloudKit response envelope or CSV"
    static let usage = [
        "stratus import [FILE|-] [--format FORMAT] [--mode MODE] [--batch-size N] [--atomic] [--dry-run] [--max-errors N] [--reject-file FILE] [--checkpoint FILE] [--new-system-fields] [--type TYPE] [--types NAME:TYPE,...] [progress options] [store options]",
    ]
    static let discussion = """
        Reads records (CloudKit record JSON as NDJSON, a JSON array or a records/query response
        envelope; or CSV) from FILE or stdin and saves them. The format is detected unless given
        (files ending in .csv are read as CSV).

        Encrypted values (ENCRYPTED_BYTES fields and fields marked "isEncrypted": true) are kept as
        the opaque values they are and exported the same way; Stratus never decrypts them.
        Record names that start with '_' (reserved by CloudKit) and deletions ("deleted": true)
        are rejected with their reason.

        SIGINT or SIGTERM stops after the current batch and saves the checkpoint (exit 130/143).
        """
    static let options: [Option] = [
        Option("--format", "FORMAT", "ndjson, json, envelope or csv", default: "detected; files ending in .csv are CSV"),
        Option("--mode", "MODE", """
            create (fail on existing records), update (only the given fields; checks recordChangeTag), \
            replace (unspecified fields removed; checks recordChangeTag), forceUpdate (ignore tags, create when \
            missing; re-running the same file changes nothing), forceReplace
            """, default: "forceUpdate"),
        Option("--batch-size", "N", "records per checkpointed batch; a batch is written in one transaction, split only where it passes 2 MB", default: "2000"),
        Option(flag: "--atomic", "all or nothing, in one transaction (at most 100,000 records)"),
        Option(flag: "--dry-run", "read and validate everything, report counts, write nothing"),
        Option("--max-errors", "N", "stop (exit 65) at the rejected record that makes N + 1", default: "no limit"),
        Option("--reject-file", "FILE", "append each rejected input as a JSON line: line, column, recordName, error", default: "none: the first 10 reasons go to stderr"),
        Option("--checkpoint", "FILE", "after a crash, kill or interruption, the next run with the same FILE continues after the last committed batch; removed when the import ends", default: "none"),
        Option(flag: "--new-system-fields", "give records new change tags and dates instead of keeping those in the input (kept by default with create, forceUpdate, forceReplace)"),
        Option("--type", "TYPE", "CSV: the record type when there is no recordType column", default: "none"),
        Option("--types", "NAME:TYPE,...", "CSV: column types (STRING, INT64, DOUBLE, TIMESTAMP, …)", default: "none"),
    ]
    static let optionGroups: [OptionGroup] = [.progress, .store]

    var store: StoreOptions
    var inputPath: String?
    var format: RecordFormat?
    var mode = RecordWriteMode.forceUpdate
    var batchSize = 2_000
    var atomic = false
    var dryRun = false
    var maxErrors: Int?
    var rejectPath: String?
    var checkpointPath: String?
    var keepSystemFields = true
    var csvType: String?
    var csvTypes: [String: FieldType] = [:]
    var progressStyle = Progress.Style.automatic

    static func parse(_ arguments: ParsedArguments) throws -> ImportCommand {
        var command = ImportCommand(store: try StoreOptions(arguments))
        if let text = arguments.value("--format") {
            guard let format = RecordFormat(rawValue: text) else { throw UsageError(message: "--format takes ndjson, json, envelope or csv, not '\(text)'") }
            command.format = format
        }
        if let text = arguments.value("--mode") {
            guard let mode = RecordWriteMode(rawValue: text), mode != .ifServerRecordUnchanged else {
                throw UsageError(message: "--mode takes create, update, replace, forceUpdate or forceReplace, not '\(text)'")
            }
            command.mode = mode
        }
        command.batchSize = try arguments.positiveInteger("--batch-size") ?? 2_000
        command.maxErrors = try arguments.count("--max-errors")
        command.atomic = arguments.flag("--atomic")
        command.dryRun = arguments.flag("--dry-run")
        command.keepSystemFields = !arguments.flag("--new-system-fields")
        command.rejectPath = arguments.value("--reject-file")
        command.checkpointPath = arguments.value("--checkpoint")
        command.csvType = arguments.value("--type")
        if let text = arguments.value("--types") {
            for pair in text.split(separator: ",") {
                let parts = pair.split(separator: ":")
                guard parts.count == 2, let type = FieldType(rawValue: parts[1].uppercased()) else {
                    throw UsageError(message: "--types takes NAME:TYPE pairs such as count:INT64, not '\(pair)'")
                }
                command.csvTypes[String(parts[0])] = type
            }
        }
        command.progressStyle = try Progress.style(arguments)
        guard arguments.positionals.count <= 1 else { throw UsageError(message: "import reads one input; got \(arguments.positionals.joined(separator: " "))") }
        command.inputPath = arguments.positionals.first
        if command.atomic && command.checkpointPath != nil { throw UsageError(message: "--atomic and --checkpoint do not go together: an atomic import has no partial progress to resume") }
        if command.inputPath == nil || command.inputPath == "-", command.checkpointPath != nil {
            throw UsageError(message: "--checkpoint needs an input file (stdin cannot be read again)")
        }
        return command
    }

    struct Counts {
        var created = 0, updated = 0, unchanged = 0, failed = 0, read = 0
    }

    func run() async throws -> ExitCode {
        let input = try openInput()
        var options = RecordReadOptions()
        options.format = format ?? (inputPath?.lowercased().hasSuffix(".csv") == true ? .csv : nil)
        options.zoneID = store.zoneID
        options.csvRecordType = csvType
        options.csvTypes = csvTypes
        let database = try store.openDatabase()
        let container = try store.openContainer()
        for schema in try await container.schemas() { options.schemas[schema.recordType] = schema }
        let reader: RecordReader
        do {
            reader = try RecordReader(fileHandle: input.handle, options: options)
        } catch let error as StratusError {
            throw CommandFailure(.dataError, "the input cannot be read: \(error.message)")
        }

        var skip = 0
        if let checkpointPath, let checkpoint = try Checkpoint.load(from: checkpointPath) {
            guard checkpoint.input == input.identity && checkpoint.inputSize == input.size else {
                throw UsageError(message: "the checkpoint \(checkpointPath) belongs to \(checkpoint.input) (\(checkpoint.inputSize ?? 0) bytes), not to this input; remove it to start over")
            }
            skip = checkpoint.committedItems
        }
        let rejects = try RejectFile(path: rejectPath)
        let progress = Progress(style: progressStyle, verb: dryRun ? "checked" : "imported")
        if !dryRun { Interruption.install {} }

        var counts = Counts()
        // The batch being read: its records and their input lines, side by side (an array of
        // tuples is destroyed element by element through the runtime's generic witnesses).
        var batch: [Record] = []
        var batchLines: [Int] = []
        var itemIndex = 0
        var stoppedBySignal = false

        // Batches being saved while the next ones are read, oldest first: parsing and writing
        // overlap, and the saver starts each batch the moment the one before it commits.
        let saver = BatchSaver(database: database)
        // Each batch's records stay here until it is settled, so that they are freed on this
        // thread rather than on the store's writer.
        var inFlight: [(pending: PendingSave, records: [Record], lines: [Int], committedItems: Int)] = []

        /// Waits for the oldest batch in flight, counts it, and moves the checkpoint past it.
        func settleOldest() async throws {
            let flight = inFlight.removeFirst()
            let outcome = try await flight.pending.outcome
            counts.created += outcome.created
            counts.updated += outcome.updated
            counts.unchanged += outcome.unchanged
            counts.failed += outcome.failures.count
            if !outcome.failures.isEmpty {
                let lines = Dictionary(zip(flight.records.map(\.recordID), flight.lines), uniquingKeysWith: { _, last in last })
                for (id, error) in outcome.failures.sorted(by: { lines[$0.0] ?? 0 < lines[$1.0] ?? 0 }) {
                    try rejects.write(line: lines[id] ?? 0, column: 0, recordName: id.recordName, error: error.description)
                }
            }
            if let checkpointPath { try Checkpoint(input: input.identity, inputSize: input.size, committedItems: flight.committedItems).save(to: checkpointPath) }
        }

        func settleAll() async throws {
            while !inFlight.isEmpty { try await settleOldest() }
        }

        /// Hands the current batch to the saver. Batches commit in input order and are settled
        /// in that order, so a checkpoint never passes an uncommitted batch.
        func commit(upTo committedItems: Int) async throws {
            guard !batch.isEmpty else {
                try await settleAll()
                if let checkpointPath { try Checkpoint(input: input.identity, inputSize: input.size, committedItems: committedItems).save(to: checkpointPath) }
                return
            }
            // With a checkpoint, one batch at a time: a kill then leaves at most the batch being
            // written committed beyond the checkpoint, as the resume expects.
            if inFlight.count >= (checkpointPath == nil ? Self.batchesInFlight : 1) { try await settleOldest() }
            inFlight.append((saver.submit(operation(saving: batch)), batch, batchLines, committedItems))
            batch.removeAll(keepingCapacity: true)
            batchLines.removeAll(keepingCapacity: true)
        }

        while let item = try Self.next(from: reader) {
            defer { itemIndex += 1 }
            if itemIndex < skip { continue }
            counts.read += 1
            switch item {
            case .rejected(let error):
                counts.failed += 1
                try rejects.write(line: error.line, column: error.column, recordName: error.recordName, error: error.message)
            case .record(let record, let line):
                do {
                    try record.validateForSave()
                    if dryRun {
                        counts.created += 1
                    } else {
                        batch.append(record)
                        batchLines.append(line)
                    }
                } catch {
                    counts.failed += 1
                    try rejects.write(line: line, column: 0, recordName: record.recordID.recordName, error: "\(error)")
                }
            }
            if let maxErrors, counts.failed > maxErrors {
                try await settleAll()
                try rejects.close()
                progress.finish(summary(counts), json: json(counts))
                throw CommandFailure(.dataError, "stopped after \(counts.failed) rejected records (--max-errors \(maxErrors)); nothing after the last committed batch was written")
            }
            if !atomic && batch.count >= batchSize {
                try await commit(upTo: itemIndex + 1)
                if Interruption.signal != 0 {
                    try await settleAll()
                    stoppedBySignal = true
                    break
                }
            }
            progress.update(done: counts.read - (dryRun ? 0 : batch.count), bytes: (reader.bytesConsumed, input.size))
        }
        if !stoppedBySignal {
            if atomic && batch.count > ModifyRecordsOperation.maximumAtomicItems {
                throw CommandFailure(.dataError, "--atomic imports at most \(ModifyRecordsOperation.maximumAtomicItems) records; the input has \(batch.count). Nothing was written.")
            }
            if atomic && counts.failed > 0 {
                try rejects.close()
                progress.finish(summary(counts), json: json(counts))
                throw CommandFailure(.dataError, "\(counts.failed) input record(s) were rejected, so the atomic import wrote nothing")
            }
            try await commit(upTo: itemIndex)
            try await settleAll()
            if let checkpointPath { Checkpoint.remove(at: checkpointPath) }
        }
        try rejects.close()
        progress.finish(summary(counts), json: json(counts))
        if stoppedBySignal { return ExitCode.stopped(by: Interruption.signal) }
        return counts.failed == 0 ? .success : .someFailed
    }

    /// The reader's next item; input it cannot read on is bad data (exit 65), not a usage error.
    private static func next(from reader: RecordReader) throws -> RecordReadResult? {
        do {
            return try reader.next()
        } catch let error as StratusError {
            throw CommandFailure(.dataError, "the input cannot be read further: \(error.message)")
        }
    }

    private func summary(_ c: Counts) -> String {
        if dryRun { return "dry run: \(Progress.grouped(c.created)) valid, \(Progress.grouped(c.failed)) rejected, nothing written" }
        return "imported \(Progress.grouped(c.created)), updated \(Progress.grouped(c.updated)), unchanged \(Progress.grouped(c.unchanged)), failed \(Progress.grouped(c.failed))"
    }

    private func json(_ c: Counts) -> [String: Int] {
        ["imported": c.created, "updated": c.updated, "unchanged": c.unchanged, "failed": c.failed]
    }

    /// Batches handed to the saver before the oldest is waited for (without `--checkpoint`):
    /// enough that the store's writer always has the next one when it finishes a batch.
    static let batchesInFlight = 3

    /// The operation that saves one batch, counting what happened to each record.
    private func operation(saving records: [Record]) -> ModifyRecordsOperation {
        let op = ModifyRecordsOperation(recordsToSave: records)
        op.writeMode = mode
        op.isAtomic = atomic
        op.preservesSystemFields = keepSystemFields
        // One transaction per batch: a bulk load writes faster in larger transactions than in
        // CloudKit's 400-item requests.
        op.itemsPerBatch = batchSize
        return op
    }

    private struct Input {
        let handle: FileHandle
        let identity: String
        let size: Int64?
    }

    private func openInput() throws -> Input {
        guard let path = inputPath, path != "-" else { return Input(handle: .standardInput, identity: "-", size: nil) }
        guard FileManager.default.fileExists(atPath: path) else { throw CommandFailure(.inputMissing, "the input file \(path) does not exist") }
        guard let handle = FileHandle(forReadingAtPath: path) else { throw CommandFailure(.inputMissing, "cannot read the input file \(path)") }
        let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.int64Value
        return Input(handle: handle, identity: URL(fileURLWithPath: path).standardizedFileURL.path, size: size)
    }
}

/// The reject file: one JSON object per rejected input, appended.
final class RejectFile {
    private let handle: FileHandle?
    private var buffer = ""

    init(path: String?) throws {
        guard let path else { handle = nil; return }
        if !FileManager.default.fileExists(atPath: path) && !FileManager.default.createFile(atPath: path, contents: nil) {
            throw CommandFailure(.cannotCreateOutput, "cannot create the reject file \(path)")
        }
        guard let handle = FileHandle(forWritingAtPath: path) else { throw CommandFailure(.cannotCreateOutput, "cannot write the reject file \(path)") }
        handle.seekToEndOfFile()
        self.handle = handle
    }

    /// Without a reject file, the first reasons go to stderr so that a cron log shows them.
    private var printed = 0
    private static let printedLimit = 10

    func write(line: Int, column: Int, recordName: String?, error: String) throws {
        guard handle != nil else {
            printed += 1
            if printed <= Self.printedLimit {
                let name = recordName.map { " (\($0))" } ?? ""
                FileHandle.standardError.write(Data("stratus: rejected line \(line)\(name): \(error)\n".utf8))
            } else if printed == Self.printedLimit + 1 {
                FileHandle.standardError.write(Data("stratus: further rejections are not shown; use --reject-file to keep them all\n".utf8))
            }
            return
        }
        buffer += "{\"line\":\(line),\"column\":\(column),\"recordName\":"
        if let recordName { JSONText.appendString(recordName, to: &buffer) } else { buffer += "null" }
        buffer += ",\"error\":"
        JSONText.appendString(error, to: &buffer)
        buffer += "}\n"
        if buffer.utf8.count > 64 * 1024 { try flush() }
    }

    func flush() throws {
        guard let handle, !buffer.isEmpty else { return }
        try handle.write(contentsOf: Data(buffer.utf8))
        buffer = ""
    }

    func close() throws {
        try flush()
        try handle?.close()
    }
}
