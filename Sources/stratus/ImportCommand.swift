import Foundation
import Stratus
import StratusTransfer

/// `stratus import`: records from a file or stdin into the store, re-runnable and resumable.
struct ImportCommand: Command {
    static let name = "import"
    static let summary = "records from NDJSON, JSON, a CloudKit response envelope or CSV"
    static let usage = [
        "stratus import [FILE|-] [--format FORMAT] [--mode MODE] [--batch-size N] [--atomic] [--dry-run] [--max-errors N] [--reject-file FILE] [--checkpoint FILE] [--new-system-fields] [--create-zones] [--owner-as-current-user] [--keep-system-records] [--as-administrator] [--assets-dir DIR [--follow-symlinks]] [--max-asset-size BYTES] [--type TYPE] [--types NAME:TYPE,...] [progress options] [store options]",
    ]
    static let discussion = """
        Reads records (CloudKit record JSON as NDJSON, a JSON array, or a CloudKit Web Services
        answer as saved: records/query, records/lookup, records/modify, changes/zone; or CSV)
        from FILE or stdin and saves them. The format is detected unless given (files ending in
        .csv, and input whose first line is a CSV header with a recordName column, are CSV).

        CSV: a header of recordName, recordType (or --type) and field columns `name` or
        `name:TYPE`. A column without a type is typed by --types, else by the container's
        schema, else by the first value the input gives it, inferred as the JSON reader infers
        an untyped value: an unquoted number without fraction or exponent that fits 64 bits is
        INT64, another unquoted number DOUBLE (JSON's grammar: 007, +1 and .5 are text),
        anything else, and every quoted cell, STRING. TIMESTAMP cells hold milliseconds since
        1970 or an ISO 8601 date-time with its zone (2024-01-01T09:30:00Z,
        2024-01-01T09:30:00.5+02:00) or date (2024-01-01, midnight UTC).

        CloudKit's answers (records/query, records/lookup, changes/zone, records/modify) import as
        they are and export back equal: members Stratus has no place for (pluginFields,
        expirationTime, zoneType, deviceID, a share, VALIDATE references, locations with some
        members) are kept as they came. Encrypted values (ENCRYPTED_BYTES fields and fields marked
        "isEncrypted": true) are kept as the opaque values they are and exported the same way;
        Stratus never decrypts them. As in CloudKit, only the private and shared databases hold
        them: in the public database a record with one is rejected (use --database private).

        Zones: records go into the zone their zoneID (or their envelope's) names, records that
        name none into --zone. A zone that does not exist stops the import once, naming the
        command that creates it (exit 65), unless --create-zones creates it (stderr lists the
        zones created). A zone whose ownerRecordName is not the current user stops the import
        once (exit 77), unless --owner-as-current-user imports it as the current user's zone
        (each record keeps the owner's name, which export writes back). With --zone given, a
        record that names another zone stops the import (exit 65).

        Assets: a CloudKit asset (an https downloadURL) is kept as a reference with all its
        metadata and exported back as it came; its content is not downloaded (`stratus assets
        attach` adds it later). A local asset's downloadURL is a path relative to --assets-dir
        DIR, the only folder files are read from: '..' and symbolic links are refused, as are
        directories, FIFOs and devices; an absolute path (a plain export's file: URL) is read
        only when it lies inside DIR or inside this store's own content folder. A CloudKit asset
        whose content is in DIR under its fileChecksum (base64url) gets that content. Content is
        stored once by its SHA-256, private to the store's user.
        Deletions ({"recordName":…,"deleted":true,"zoneID":…}, as `stratus changes` writes them)
        delete their record, so that the changes `stratus changes` writes, imported with
        --mode forceReplace --keep-system-records --as-administrator, keep a second store in
        step (forceReplace, because a change carries the whole record: a field it lacks was
        removed; write them into a file first and import it, as the README's mirror job does:
        in a pipe, changes the import refuses are gone from the feed). CloudKit's own records
        (names starting with '_', record types like cloudkit.share) are rejected with that
        reason unless --keep-system-records.

        Parents: a record whose parent comes later in the input waits until the parent is
        written (whatever --batch-size), then is imported; when the parent never comes, it is
        rejected (referenceViolation) at the end of the input.

        SIGINT, SIGTERM or SIGHUP stops after the current batch and saves the checkpoint (exit
        130/143/129; one the command was started ignoring, as nohup and a script's `&` do,
        stays ignored).
        """
    static let options: [Option] = [
        Option("--format", "FORMAT", "ndjson, json, envelope or csv", default: "detected; files ending in .csv, and a first line that is a CSV header, are CSV"),
        Option("--mode", "MODE", """
            create (fail on existing records), update (only the given fields; checks recordChangeTag), \
            replace (unspecified fields removed; checks recordChangeTag), forceUpdate (ignore tags, create when \
            missing; re-running the same file changes nothing), forceReplace; a records/modify request's \
            operations of another operationType are rejected, naming the mode that applies them; a changes/zone \
            answer's records are whole versions, written as forceReplace unless --mode is given
            """, default: "forceUpdate"),
        Option("--batch-size", "N", "records per checkpointed batch; a batch is written in one transaction, split only where it passes 2 MB", default: "2000 on SQLite, 10000 on PostgreSQL"),
        Option(flag: "--atomic", "all or nothing, in one transaction (at most 100,000 records)"),
        Option(flag: "--dry-run", "check everything the real run would (schema types, production's refusals, --mode, parents, roles, asset files, later lines seeing earlier ones) and report what it would reject; the store is read, never changed (one you may not write is exit 77, as for the real run); not with --checkpoint"),
        Option("--max-errors", "N", "stop (exit 65) at the rejected record that makes N + 1", default: "no limit"),
        Option("--reject-file", "FILE", "append each rejected input as a JSON line: line, column, recordName, error", default: "none: the first 10 reasons go to stderr"),
        Option("--checkpoint", "FILE", "after a crash, kill or interruption, the next run with the same FILE continues after the last committed batch; removed when the import ends", default: "none"),
        Option(flag: "--new-system-fields", "give records new change tags and dates instead of keeping those in the input (kept by default with create, forceUpdate, forceReplace)"),
        Option(flag: "--create-zones", "create the zones the input names that do not exist (stderr says which)"),
        Option(flag: "--owner-as-current-user", "import zones the input says another user owns (ownerRecordName) as the current user's; records keep the owner's name for export"),
        Option(flag: "--keep-system-records", "import CloudKit's own records (names starting with '_', types like cloudkit.share) instead of rejecting them; the public database's Users records are written as CloudKit made them (one per user, created for the user each names), which no save may otherwise create"),
        Option(flag: "--as-administrator", "apply the input to the public database as the store's administrator, as `stratus copy` writes: the security roles do not limit it (a mirror of a zone that many users write); it restores records as they were (--mode create, forceUpdate or forceReplace, system fields kept); on PostgreSQL row-level security still binds the login role"),
        Option("--assets-dir", "DIR", "the folder asset files are read from; asset paths in the input are relative to it", default: "none: local asset paths are refused"),
        Option(flag: "--follow-symlinks", "with --assets-dir: follow symbolic links that stay inside DIR"),
        Option("--max-asset-size", "BYTES", "the most bytes one asset may hold", default: "4294967296 (4 GiB)"),
        Option("--type", "TYPE", "CSV: the rows' record type; with a recordType column, its empty cells' (a row of another type is rejected)", default: "none"),
        Option("--types", "NAME:TYPE,...", "CSV: column types (STRING, INT64, DOUBLE, TIMESTAMP, …; ENCRYPTED_STRING, … for encrypted values) for columns the header does not type", default: "the schema's, else inferred"),
    ]
    static let optionGroups: [OptionGroup] = [.progress, .store]

    var store: StoreOptions
    var inputPath: String?
    var format: RecordFormat?
    var mode = RecordWriteMode.forceUpdate
    /// Whether `--mode` was given: without it, a changes answer's whole versions replace.
    var modeGiven = false
    var batchSize: Int?
    var atomic = false
    var dryRun = false
    var maxErrors: Int?
    var rejectPath: String?
    var checkpointPath: String?
    var keepSystemFields = true
    var csvType: String?
    var csvTypes: [String: FieldType] = [:]
    var csvEncryptedFields: Set<String> = []
    var progressStyle = Progress.Style.automatic
    var createZones = false
    var ownersAsCurrentUser = false
    var keepSystemRecords = false
    var asAdministrator = false
    var assetsDirectory: String?
    var followSymlinks = false
    var maximumAssetSize = Asset.maximumContentSize

    /// What makes a store, told to a dry run that needs one: the usual advice (the commands that
    /// make a store, import among them) would read as a contradiction.
    private static let dryRunNeedsStore = "a dry run only reads a store, so it checks against one that exists: run the import without --dry-run to create it"

    private static let defaultZoneIsNotAtomic =
        "--atomic: the default zone has no atomic capability (as CloudKit's), so the store would write its records one by one; import without --atomic, or into a custom zone (--zone, zones create)"

    private static let atomicNeedsZones =
        "an atomic import writes into atomic custom zones: records that name no zone go to the default zone, which has no atomic capability (as CloudKit's), so create the store and its zone first (zones create NAME) and import into it with --zone NAME; records that name their zones (a records/modify request) need --create-zones to make them"

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
            command.modeGiven = true
        }
        command.batchSize = try arguments.positiveInteger("--batch-size")
        command.maxErrors = try arguments.count("--max-errors")
        command.atomic = arguments.flag("--atomic")
        command.dryRun = arguments.flag("--dry-run")
        command.keepSystemFields = !arguments.flag("--new-system-fields")
        command.rejectPath = arguments.value("--reject-file")
        command.checkpointPath = arguments.value("--checkpoint")
        command.csvType = arguments.value("--type")
        (command.csvTypes, command.csvEncryptedFields) = try arguments.columnTypes("--types")
        command.progressStyle = try Progress.style(arguments)
        command.createZones = arguments.flag("--create-zones")
        command.ownersAsCurrentUser = arguments.flag("--owner-as-current-user")
        command.keepSystemRecords = arguments.flag("--keep-system-records")
        command.asAdministrator = arguments.flag("--as-administrator")
        if command.asAdministrator { try command.store.checkAdministratorScope() }
        if command.asAdministrator && (!command.keepSystemFields || command.mode == .update || command.mode == .replace) {
            // The administrator is no user: a new version made by it would have no one as its author.
            throw UsageError(message: "--as-administrator restores records as they were (their creators and change tags): with --mode create, forceUpdate or forceReplace, and not with --new-system-fields")
        }
        command.assetsDirectory = arguments.value("--assets-dir")
        command.followSymlinks = arguments.flag("--follow-symlinks")
        if command.followSymlinks && command.assetsDirectory == nil { throw UsageError(message: "--follow-symlinks needs --assets-dir") }
        if let size = try arguments.positiveInteger("--max-asset-size") { command.maximumAssetSize = Int64(size) }
        guard arguments.positionals.count <= 1 else { throw UsageError(message: "import reads one input; got \(arguments.positionals.joined(separator: " "))") }
        command.inputPath = arguments.positionals.first
        // An unset shell variable (`stratus import "$FILE"`), as for a FILE option.
        if command.inputPath == "" { throw UsageError(message: "import needs a non-empty FILE (or - for stdin)") }
        if command.atomic && command.checkpointPath != nil { throw UsageError(message: "--atomic and --checkpoint do not go together: an atomic import has no partial progress to resume") }
        if command.atomic && command.store.zoneGiven && command.store.zoneID.isDefault {
            // Known before the store is opened, so a refused run creates no store. (Without
            // --zone, the records' own zoneIDs say where they go: a request file names its zone.)
            throw UsageError(message: Self.defaultZoneIsNotAtomic)
        }
        if command.dryRun && command.checkpointPath != nil { throw UsageError(message: "--dry-run and --checkpoint do not go together: a dry run writes nothing, so it has no progress to resume") }
        if command.inputPath == nil || command.inputPath == "-", command.checkpointPath != nil {
            throw UsageError(message: "--checkpoint needs an input file (stdin cannot be read again)")
        }
        return command
    }

    /// Where the import writes, as its checkpoint records it: resumed with another container,
    /// environment, database, zone or user, the checkpoint would skip items the earlier runs
    /// wrote elsewhere.
    var checkpointDestination: String {
        let user = asAdministrator ? "as the administrator"
            : "as user " + (store.userName ?? ProcessInfo.processInfo.environment["STRATUS_USER"].flatMap { $0.isEmpty ? nil : $0 } ?? "(the default)")
        let zone = "zone \(store.zoneID.zoneName)" + (store.zoneOwner.map { " of \($0)" } ?? "")
        return "container \(store.containerIdentifier), \(store.environment) environment, the \(store.scope) database, \(zone), \(user)"
    }

    func run() async throws -> ExitCode {
        let input = try openInput()
        var readOptions = RecordReadOptions()
        readOptions.format = format ?? (inputPath?.lowercased().hasSuffix(".csv") == true ? .csv : nil)
        readOptions.zoneID = store.zoneID
        readOptions.zoneIsChosen = store.zoneGiven
        readOptions.csvRecordType = csvType
        readOptions.csvTypes = csvTypes
        readOptions.csvEncryptedFields = csvEncryptedFields
        readOptions.keepsSystemRecords = keepSystemRecords
        if let assetsDirectory {
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: assetsDirectory, isDirectory: &isFolder), isFolder.boolValue else {
                let what = FileManager.default.fileExists(atPath: assetsDirectory) ? "is not a folder" : "does not exist"
                throw CommandFailure(.inputMissing, "--assets-dir \(assetsDirectory) \(what)")
            }
            readOptions.assetDirectory = URL(fileURLWithPath: assetsDirectory, isDirectory: true).standardizedFileURL
            readOptions.followsAssetSymlinks = followSymlinks
        } else {
            readOptions.assetPaths = .refused
        }
        // A change feed's deletions apply, so that `stratus changes | stratus import` keeps a copy.
        readOptions.readsDeletions = true
        if let checkpointPath, Self.sameFile(checkpointPath, as: input.handle.fileDescriptor) {
            // Refused before its lock file is made: a checkpoint saved over the input loses it.
            throw UsageError(message: "--checkpoint \(checkpointPath) is the input itself; name another file")
        }
        if let rejectPath, Self.sameFile(rejectPath, as: input.handle.fileDescriptor) {
            // Appending rejects to the input would make them input again, until the disk is full.
            throw UsageError(message: "--reject-file \(rejectPath) is the input itself; name another file")
        }
        try refuseFirstLineMistakes(of: input, readOptions)
        let rejects = try RejectFile(path: rejectPath)
        let checkpoint = try checkpointPath.map { try ImportCheckpointFile(path: $0, input: input.identity, inputSize: input.size, destination: checkpointDestination) }
        // A dry run writes nothing, so it needs a store that exists (for its schemas); one the
        // user may not write fails as the real run would (77, RecordImporter checks), not "valid".
        // A run that goes on from a checkpoint goes on in the store the earlier run wrote to: a
        // missing one is the wrong store, not one to create.
        let itemsSettledEarlier = try checkpoint?.load()?.itemsSettled ?? 0
        let resuming = itemsSettledEarlier > 0
        // Without --zone and --create-zones, an atomic import into a store that does not exist
        // yet could only be refused: its records go to the default zone, which has no atomic
        // capability, or to zones the new store would not have. Refused before a store is made.
        let atomicNeedsStore = atomic && !store.zoneGiven && !createZones
        let container = try store.openContainer(
            dryRun ? .read : resuming || atomicNeedsStore ? .existing : .createIfMissing,
            missingStoreAdvice: resuming ? "the checkpoint \(checkpointPath ?? "") says an earlier run imported into it; name that store, or remove the checkpoint to start over"
                : dryRun ? Self.dryRunNeedsStore : Self.atomicNeedsZones)
        let database = asAdministrator ? StoreOptions.administratorDatabase(of: container) : container.database(with: store.scope)
        if atomic && store.zoneGiven {
            // Refuse before reading: outside atomic zones the store applies requests item by item.
            let zone = try? await database.recordZone(for: store.zoneID)
            if let zone, !zone.capabilities.contains(.atomic) {
                throw UsageError(message: store.zoneID.isDefault
                    ? Self.defaultZoneIsNotAtomic
                    : "--atomic: zone '\(store.zoneID.zoneName)' was created without the atomic capability (zones create --no-atomic), so the store would write its records one by one; import without --atomic, or into an atomic zone")
            }
        }
        for schema in try await container.schemas() { readOptions.schemas[schema.recordType] = schema }
        // A plain export names its assets by the store's own content files: a backup restores
        // into the store it came from without --assets-dir.
        readOptions.storeContentDirectory = database.assetContentDirectory
        var options = RecordImporter.Options()
        options.writeMode = mode
        options.replacesWithWholeVersions = !modeGiven
        options.batchSize = batchSize
        options.isAtomic = atomic
        options.isDryRun = dryRun
        options.maximumRejects = maxErrors
        options.preservesSystemFields = keepSystemFields
        options.createsZones = createZones
        options.importsOwnersAsCurrentUser = ownersAsCurrentUser
        options.requiredZone = store.zoneGiven ? store.zoneID : nil
        options.maximumAssetSize = maximumAssetSize
        options.writesSystemRecords = keepSystemRecords
        let importer = RecordImporter(database: database, options: options)
        // A signal stops the import also while the reader waits on a silent pipe or reads a
        // line that never ends (/dev/zero): a cron job's timeout must end it.
        readOptions.stopRequested = { importer.isCancelled }
        let reader: RecordReader
        do {
            reader = try RecordReader(fileHandle: input.handle, options: readOptions)
        } catch let error as StratusError {
            throw CommandFailure(.dataError, "the input cannot be read: \(error.message)")
        }
        try refuseCSVOptions(for: reader.detectedFormat)
        let progress = Progress(style: progressStyle, verb: dryRun ? "checked" : "imported")

        if !dryRun { Interruption.install { importer.cancel() } }

        if let checkpointPath, resuming {
            // The store's own record of the job decides where the run goes on: a store put back
            // from a copy holds fewer, and the run goes on from there.
            StratusCommand.note("going on from the checkpoint \(checkpointPath): it says an earlier run settled the first \(Progress.grouped(itemsSettledEarlier)) input items (the run goes on after what the store itself records of them)")
        }
        let summary: RecordImporter.Summary
        do {
            summary = try await importer.run(from: reader, rejects: rejects, checkpoint: checkpoint) { now in
                progress.update(done: now.summary.read - now.pending, bytes: (now.bytesRead, input.size))
            }
        } catch let failure as RecordImporter.Failure {
            try? rejects.close()
            reportZones(failure.summary)
            // Not the summary of a finished import: the error (next line) stopped it, and what it
            // read and did not settle was not written (a failed batch is not "failed 0").
            let settled = failure.summary.created + failure.summary.updated + failure.summary.unchanged + failure.summary.deleted + failure.summary.failed
            let unwritten = max(0, failure.summary.read - settled)
            progress.finish("stopped by an error: " + line(failure.summary) + (unwritten > 0 && !dryRun ? ", not written \(Progress.grouped(unwritten))" : ""),
                            json: json(failure.summary).merging(["notWritten": unwritten]) { $1 })
            switch (failure.stage, failure.error) {
            case (.zones, let error as StratusError):
                throw CommandFailure(error.code == .permissionFailure ? .permissionDenied : .dataError, error.message)
            case (.input, let error as StratusError):
                throw CommandFailure(.dataError, "the input cannot be read\(failure.summary.read > 0 ? " further" : ""): \(error.message)")
            case (.store, let error as StratusError) where error.code == .limitExceeded:
                throw CommandFailure(.dataError, error.message)
            case (.atomicity, let error as StratusError):
                // A zone the records name has no atomic capability: the option's mistake, said as the tool's.
                throw UsageError(message: "--atomic: " + error.message.replacingOccurrences(of: " (isAtomic)", with: ""))
            case (.checkpoint, let error as StratusError) where error.code == .invalidArguments:
                throw CommandFailure(.usage, "the checkpoint \(checkpointPath ?? ""): \(error.message)")
            default:
                throw failure.error
            }
        }
        try rejects.close()
        reportZones(summary)
        if summary.end == .finished, reader.continuationMarker != nil {
            // A records/query answer that was one page of more: the rest is not in this file.
            StratusCommand.log("note: the input is one page of a CloudKit answer (it has a continuationMarker, or CKTool JS's continuationToken): the query matched more records than it holds; fetch the next pages with the marker and import them too")
        }
        if reader.cloudKitAssetsWithoutContent > 0, let assetsDirectory {
            let count = reader.cloudKitAssetsWithoutContent
            StratusCommand.log("note: \(count) CloudKit asset\(count == 1 ? "" : "s") this run read from the input \(count == 1 ? "has" : "have") no file in the assets folder \(assetsDirectory) (none named by \(count == 1 ? "its" : "their") fileChecksum): the records that hold \(count == 1 ? "it" : "them") keep CloudKit's metadata without content (`stratus assets get` cannot read it; `stratus assets attach` adds it)")
        }
        if summary.end == .finished, reader.moreComing {
            // A changes/zone answer that is one page: the zone's later changes are not in this file.
            StratusCommand.log("note: the input is one page of a CloudKit changes answer (it says \"moreComing\": true): its zone has more changes than it holds; fetch them with the answer's syncToken (CKTool JS's changeToken) and import them too")
        }
        if !modeGiven, mode == .forceUpdate, reader.holdsWholeVersions, summary.updated > 0 {
            StratusCommand.log("note: the input is a CloudKit changes answer, whose records are whole versions: stored records \(dryRun ? "would be" : "were") replaced by them as they came (as --mode forceReplace does: a field a newer version no longer has is removed); give --mode forceUpdate to merge them into the stored records instead (an answer to a request that named desiredKeys holds only those fields)")
        }
        if summary.end == .cancelled {
            // Before the summary, which stays the last line.
            Interruption.logStopped("import", done: "imported", checkpointPath: checkpointPath)
        }
        if summary.end == .rejectLimitReached {
            // As for any error that stops an import: why first, then the summary, last, saying so.
            if summary.read == 0 && summary.failedInEarlierRuns > (maxErrors ?? 0) {
                StratusCommand.log("the earlier runs of the checkpoint \(checkpointPath ?? "") rejected \(Progress.grouped(summary.failedInEarlierRuns)) input items, more than --max-errors \(maxErrors ?? 0) allows: nothing more was imported; to go on past them, run again with a larger --max-errors (the limit counts the whole job's rejects), or remove the checkpoint to start over")
            } else {
                let earlier = summary.failedInEarlierRuns > 0 ? ", counting \(Progress.grouped(summary.failedInEarlierRuns)) rejected by the earlier runs of this checkpoint" : ""
                StratusCommand.log("stopped at the rejected record that made \(Progress.grouped(summary.failed + summary.failedInEarlierRuns))\(earlier) (--max-errors \(maxErrors ?? 0)); nothing after it was written")
            }
            progress.finish("stopped by an error: " + line(summary), json: json(summary))
            return .dataError
        }
        progress.finish(line(summary), json: json(summary))
        switch summary.end {
        case .finished:
            // A resumed job that rejected items before it was stopped did not import its whole
            // input either.
            return summary.failed + summary.failedInEarlierRuns == 0 ? .success : .someFailed
        case .cancelled:
            return ExitCode.stopped(by: Interruption.signal)
        case .rejectLimitReached:
            return .dataError
        case .atomicImportRejected:
            throw CommandFailure(.dataError, "\(summary.failed) input record(s) were rejected, so the atomic import wrote nothing")
        }
    }

    /// Says which zones the import created (or a dry run would create).
    private func reportZones(_ summary: RecordImporter.Summary) {
        for zone in summary.createdZones {
            StratusCommand.note("\(dryRun ? "would create" : "created") zone \(zone.zoneName) in the \(store.scope) database")
        }
    }

    /// The summary line: `imported 999,000, updated 1,000, unchanged 0, failed 0`.
    private func line(_ summary: RecordImporter.Summary) -> String {
        if dryRun { return "dry run: \(Progress.grouped(summary.valid)) valid, \(Progress.grouped(summary.failed)) rejected, nothing written" }
        let deleted = summary.deleted > 0 ? ", deleted \(Progress.grouped(summary.deleted))" : ""
        let earlier = summary.failedInEarlierRuns > 0 ? " (and \(Progress.grouped(summary.failedInEarlierRuns)) in earlier runs)" : ""
        return "imported \(Progress.grouped(summary.created)), updated \(Progress.grouped(summary.updated)), unchanged \(Progress.grouped(summary.unchanged))\(deleted), failed \(Progress.grouped(summary.failed))\(earlier)"
    }

    private func json(_ summary: RecordImporter.Summary) -> [String: Int] {
        if dryRun { return ["valid": summary.valid, "failed": summary.failed] }
        var fields = ["imported": summary.created, "updated": summary.updated, "unchanged": summary.unchanged, "deleted": summary.deleted, "failed": summary.failed]
        if summary.failedInEarlierRuns > 0 { fields["failedInEarlierRuns"] = summary.failedInEarlierRuns }
        return fields
    }

    /// Whether `path` names the open file `descriptor` (same device and inode).
    private static func sameFile(_ path: String, as descriptor: Int32) -> Bool {
        var named = stat(), open = stat()
        guard stat(path, &named) == 0, fstat(descriptor, &open) == 0 else { return false }
        return named.st_dev == open.st_dev && named.st_ino == open.st_ino
    }

    private struct Input {
        let handle: FileHandle
        let identity: String
        let size: Int64?
    }

    /// Refuses what the input's start shows is wrong (a CSV header without a recordName column
    /// or without a column `--types` names, `--type` given for JSON) before a store is made
    /// or a checkpoint taken: read from a regular file without moving its offset. A pipe is
    /// read once, so its start is checked as the import reads it.
    private func refuseFirstLineMistakes(of input: Input, _ options: RecordReadOptions) throws {
        var status = stat()
        let descriptor = input.handle.fileDescriptor
        guard inputPath != nil, inputPath != "-", fstat(descriptor, &status) == 0, status.st_mode & S_IFMT == S_IFREG else { return }
        var bytes = [UInt8](repeating: 0, count: Self.probedBytes)
        let count = bytes.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, Self.probedBytes, 0) }
        guard count > 0 else { return }
        // Only a whole first line says what the input is (a header cut short would be wrong).
        let whole = Int64(count) == Int64(status.st_size)
        guard let end = whole ? count : bytes[..<count].lastIndex(of: UInt8(ascii: "\n")).map({ $0 + 1 }) else { return }
        var probeOptions = options
        probeOptions.stopRequested = nil
        let probe: RecordReader
        do {
            probe = try RecordReader(data: Data(bytes[..<end]), options: probeOptions)
        } catch let error as StratusError {
            throw CommandFailure(.dataError, "the input cannot be read: \(error.message)")
        }
        try refuseCSVOptions(for: probe.detectedFormat)
    }

    /// The bytes read from a file's start to check it: more than any CSV header.
    private static let probedBytes = 1 << 20

    /// `--type` and `--types` describe CSV rows; JSON records name their type and their
    /// values' types, and the options would be ignored unseen (a wrongly typed field then).
    private func refuseCSVOptions(for format: RecordFormat) throws {
        guard format != .csv, csvType != nil || !csvTypes.isEmpty else { return }
        let given = [csvType.map { _ in "--type" }, csvTypes.isEmpty ? nil : "--types"].compactMap { $0 }.joined(separator: " and ")
        throw UsageError(message: "\(given) describe\(given.contains(" and ") ? "" : "s") CSV input, and the input is \(format.rawValue.uppercased()), whose records name their record type and each value's type; leave \(given.contains(" and ") ? "them" : "it") out, or give --format csv for CSV")
    }

    private func openInput() throws -> Input {
        guard let path = inputPath, path != "-" else { return Input(handle: .standardInput, identity: "-", size: nil) }
        guard FileManager.default.fileExists(atPath: path) else { throw CommandFailure(.inputMissing, "the input file \(path) does not exist") }
        let handle = try ReadableFile.open(path, what: "input file")
        var status = stat()
        let described = fstat(handle.fileDescriptor, &status) == 0
        // Before the store is opened (or created): a folder is no input file.
        if described, status.st_mode & S_IFMT == S_IFDIR {
            throw CommandFailure(.inputMissing, "the input \(path) is a folder; name an input file (or - for stdin)")
        }
        if checkpointPath != nil, described, status.st_mode & S_IFMT != S_IFREG {
            // A checkpoint counts the items of an input read again from its start: a pipe
            // (`<(zcat …)`, a FIFO) gives other data the next time, under the same name.
            throw UsageError(message: "--checkpoint needs an input that is a regular file; \(path) is \(status.st_mode & S_IFMT == S_IFIFO ? "a pipe" : "not a regular file"), which cannot be read again from its start")
        }
        // The file read, through a symbolic link too (a `latest.ndjson` link that a job points
        // at each day's file): a checkpoint tells inputs apart by path and size, and a link's
        // path says which file it named, which may have the size of another day's.
        let size = described && status.st_mode & S_IFMT == S_IFREG ? Int64(status.st_size) : nil
        let named = URL(fileURLWithPath: path).standardizedFileURL.path
        var link = stat()
        let isLink = lstat(path, &link) == 0 && link.st_mode & S_IFMT == S_IFLNK
        let identity = isLink ? "\(named) -> \(URL(fileURLWithPath: path).resolvingSymlinksInPath().path)" : named
        return Input(handle: handle, identity: identity, size: size)
    }
}
