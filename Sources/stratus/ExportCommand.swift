import Foundation
import Stratus
import StratusTransfer

/// `stratus export`: every matching record, streamed page by page to stdout or a file.
struct ExportCommand: Command {
    static let name = "export"
    static let summary = "every matching record, as NDJSON, JSON, an envelope or CSV"
    static let usage = [
        "stratus export --type TYPE [--where PREDICATE] [--sort KEY[:desc]]... [--fields K1,K2] [--all-zones] [--limit N] [--format FORMAT] [--types NAME:TYPE,...] [--timestamps STYLE] [--assets-dir DIR] [--as-administrator] [--output FILE [--force]] [progress options] [store options]",
    ]
    static let discussion = """
        Writes every matching record (NDJSON by default) to stdout, or to FILE. Memory holds a few
        pages at most (three read ahead, one per core being encoded), however many records are
        exported. CSV columns are --fields, else every
        field of the matching records, with the type the schema declares, else the type of its
        first value (found by reading them once more; encrypted values as ENCRYPTED_TYPE);
        --types or --fields count:INT64 give column types neither can (with --fields, a field
        the schema does not type and the first record lacks has none), secret:ENCRYPTED_BYTES a
        column of encrypted values. A record whose value does not fit its column stops the
        export (exit 65). CSV carries values, not how record JSON spelled them (a missing type,
        UNKNOWN_LIST, unpadded base64…): use a JSON format for that.

        Records imported from CloudKit are written back as they came (their pluginFields,
        zoneType, deviceIDs, CloudKit asset dictionaries…). Zones of the current user are
        written with the user's record name as ownerRecordName. With --assets-dir DIR, every
        asset's content is written into DIR (once per content, files private to their user):
        a Stratus asset's downloadURL then names its file in DIR, and a CloudKit asset keeps its
        JSON while its content goes under its fileChecksum (base64url), so that `stratus import
        --assets-dir DIR` reads every asset back byte for byte.
        """
    static let options: [Option] = [
        .recordType, .predicate, .sort, .fields, .allZones,
        Option("--limit", "N", "export at most N records (0 exports nothing)", default: "no limit"),
        Option("--format", "FORMAT", "ndjson, json (an array), envelope ({\"records\":[…]}) or csv", default: "ndjson"),
        Option("--types", "NAME:TYPE,...", "CSV: column types (STRING, INT64, DOUBLE, TIMESTAMP, …, ENCRYPTED_BYTES, …)", default: "from the records"),
        Option("--timestamps", "STYLE", "CSV: TIMESTAMP cells as milliseconds since 1970 or iso8601 (2025-01-01T09:30:00Z)", default: "milliseconds"),
        Option("--assets-dir", "DIR", "write asset content into DIR (created, private to the user); the JSON names the files", default: "none: assets name the store's files, which import reads into the same store, or from inside the folder named with --assets-dir"),
        Option(flag: "--as-administrator", "public database only: every matching record, whatever the security roles let a user read (a backup that import --as-administrator restores)"),
    ]
    static let optionGroups: [OptionGroup] = [.output, .progress, .store]

    var store: StoreOptions
    var selection: QuerySelection
    var query: Query
    var format = RecordFormat.ndjson
    var limit: Int?
    var output: OutputOptions
    var progressStyle: Progress.Style
    var csvTypes: [String: FieldType] = [:]
    var csvEncryptedFields: Set<String> = []
    var timestampStyle = RecordWriter.TimestampStyle.milliseconds
    var assetsDirectory: String?
    /// `--as-administrator`: every matching record, not only those the user may read.
    var asAdministrator = false

    static func parse(_ arguments: ParsedArguments) throws -> ExportCommand {
        try arguments.expectNoPositionals()
        let selection = try QuerySelection(arguments)
        var format = RecordFormat.ndjson
        if let text = arguments.value("--format") {
            guard let known = RecordFormat(rawValue: text) else { throw UsageError(message: "--format takes ndjson, json, envelope or csv, not '\(text)'") }
            format = known
        }
        var command = ExportCommand(
            store: try StoreOptions(arguments), selection: selection, query: try selection.requireQuery(), format: format,
            limit: try arguments.count("--limit"), output: try OutputOptions(arguments), progressStyle: try Progress.style(arguments))
        command.csvTypes = selection.fieldTypes
        command.csvEncryptedFields = selection.encryptedFields
        let (types, encrypted) = try arguments.columnTypes("--types")
        for (name, type) in types {
            if let given = command.csvTypes[name], given != type || selection.encryptedFields.contains(name) != encrypted.contains(name) {
                throw UsageError(message: "--fields and --types give \(name) two different types")
            }
            command.csvTypes[name] = type
        }
        command.csvEncryptedFields.formUnion(encrypted)
        if let text = arguments.value("--timestamps") {
            guard let style = RecordWriter.TimestampStyle(rawValue: text) else {
                throw UsageError(message: "--timestamps takes milliseconds or iso8601, not '\(text)'")
            }
            command.timestampStyle = style
        }
        command.assetsDirectory = arguments.value("--assets-dir")
        command.asAdministrator = arguments.flag("--as-administrator")
        if command.asAdministrator { try command.store.checkAdministratorScope() }
        if format == .csv && command.store.allZones { throw UsageError(message: StoreOptions.allZonesCSV) }
        if format != .csv, !command.csvTypes.isEmpty || arguments.has("--timestamps") {
            throw UsageError(message: "column types and --timestamps are for --format csv (record JSON carries its types and writes milliseconds)")
        }
        return command
    }

    func run() async throws -> ExitCode {
        let container = try store.openContainer(.read)
        let database = asAdministrator ? StoreOptions.administratorDatabase(of: container) : container.database(with: store.scope)
        let query = try await WhereClause.typed(self.query, in: container)
        let exporter = RecordExporter(database: database, query: query, zoneID: store.searchedZoneID, desiredKeys: selection.fields, limit: limit)
        var csvFields = selection.fields
        var csvTypes = self.csvTypes
        var csvEncryptedFields = self.csvEncryptedFields
        if format == .csv {
            // The schema types the columns it declares, whatever the first record holds or lacks.
            let declared = try await WhereClause.csvColumnTypes(of: query.recordType, in: container)
            for (name, type) in declared.types where csvTypes[name] == nil && (csvFields?.contains(name) ?? true) {
                csvTypes[name] = type
                if declared.encrypted.contains(name) { csvEncryptedFields.insert(name) }
            }
        }
        if format == .csv && csvFields == nil {
            // CSV needs its columns before the first row: every field of every matching record
            // (a schema need not declare every field), found by reading them once more.
            let found = try await exporter.fieldColumns()
            for (name, type) in found.types where csvTypes[name] == nil {
                csvTypes[name] = type
                if found.encrypted.contains(name) { csvEncryptedFields.insert(name) }
            }
            csvFields = Array(Set(found.types.keys).union(self.csvTypes.keys)).sorted()
        }
        let output = try OutputFile(path: self.output.path, force: self.output.force)
        let writer = RecordWriter(format: format, output: output.handle, csvFields: csvFields)
        writer.outputName = self.output.path == "-" ? nil : self.output.path
        // Columns found by reading every matching record: a field they lack was written since.
        writer.csvFieldsAreEveryField = format == .csv && selection.fields == nil
        writer.csvTypes = csvTypes
        writer.csvEncryptedFields = csvEncryptedFields
        writer.csvTimestampStyle = timestampStyle
        writer.jsonOptions.currentUserRecordName = store.scope == .public ? nil : try await database.currentUserRecordName()
        writer.jsonOptions.writesEveryZoneID = store.allZones
        // A backup names who made each record, which a restore as the administrator needs.
        writer.jsonOptions.writesEverySystemField = asAdministrator
        if let assetsDirectory {
            do {
                writer.jsonOptions.assetFolder = try AssetExportFolder(directory: URL(fileURLWithPath: assetsDirectory, isDirectory: true))
            } catch let error as StratusError {
                throw CommandFailure(.cannotCreateOutput, error.message)
            }
        }
        let progress = Progress(style: self.output.path == nil && progressStyle == .automatic && isatty(STDOUT_FILENO) != 0 ? .quiet : progressStyle, verb: "exported")
        if self.output.path != nil { Interruption.install { exporter.cancel() } }
        let summary: RecordExporter.Summary
        do {
            summary = try await exporter.run(into: DataRefusingSink(writer)) { progress.update(done: $0) }
            if summary.end == .cancelled {
                output.abandon()
                progress.finish("stopped after \(Progress.grouped(summary.exported)) records; \(self.output.path ?? "the output") was not written", json: ["exported": summary.exported])
                return ExitCode.stopped(by: Interruption.signal)
            }
            try writer.finish()
            try output.commit()
        } catch {
            output.abandon()
            throw error
        }
        WhereClause.sayFieldNotes(nothingMatched: summary.exported == 0)
        progress.finish("exported \(Progress.grouped(summary.exported)) record\(summary.exported == 1 ? "" : "s")", json: ["exported": summary.exported])
        return .success
    }
}
