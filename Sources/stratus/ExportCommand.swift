import Foundation
import Stratus
import StratusTransfer

/// `stratus export`: every matching record, streamed page by page to stdout or a file.
struct ExportCommand: Command {
    static let name = "export"
    static let summary = "every matching record, as NDJSON, JSON, an envelope or CSV"
    static let usage = [
        "stratus export --type TYPE [--where PREDICATE] [--sort KEY[:desc]]... [--fields K1,K2] [--limit N] [--format FORMAT] [--output FILE [--force]] [progress options] [store options]",
    ]
    static let discussion = """
        Writes every matching record (NDJSON by default) to stdout, or to FILE. Memory holds two
        pages at most, however many records are exported. CSV columns are --fields, else every
        field of the matching records (found by reading them once more).
        """
    static let options: [Option] = [
        .recordType, .predicate, .sort, .fields,
        Option("--limit", "N", "export at most N records (0 exports nothing)", default: "no limit"),
        Option("--format", "FORMAT", "ndjson, json (an array), envelope ({\"records\":[…]}) or csv", default: "ndjson"),
    ]
    static let optionGroups: [OptionGroup] = [.output, .progress, .store]

    var store: StoreOptions
    var selection: QuerySelection
    var query: Query
    var format = RecordFormat.ndjson
    var limit: Int?
    var output: OutputOptions
    var progressStyle: Progress.Style

    static func parse(_ arguments: ParsedArguments) throws -> ExportCommand {
        try arguments.expectNoPositionals()
        let selection = try QuerySelection(arguments)
        var format = RecordFormat.ndjson
        if let text = arguments.value("--format") {
            guard let known = RecordFormat(rawValue: text) else { throw UsageError(message: "--format takes ndjson, json, envelope or csv, not '\(text)'") }
            format = known
        }
        return ExportCommand(
            store: try StoreOptions(arguments), selection: selection, query: try selection.requireQuery(), format: format,
            limit: try arguments.count("--limit"), output: try OutputOptions(arguments), progressStyle: try Progress.style(arguments))
    }

    func run() async throws -> ExitCode {
        let database = try store.openDatabase(.existing)
        let exporter = RecordExporter(database: database, query: query, zoneID: store.zoneID, desiredKeys: selection.fields, limit: limit)
        var csvFields = selection.fields
        var csvTypes: [String: FieldType] = [:]
        if format == .csv && csvFields == nil {
            // CSV needs its columns before the first row: every field of every matching record
            // (a schema need not declare every field), found by reading them once more.
            csvTypes = try await exporter.fieldTypes()
            csvFields = csvTypes.keys.sorted()
        }
        let output = try OutputFile(path: self.output.path, force: self.output.force)
        let writer = RecordWriter(format: format, output: output.handle, csvFields: csvFields)
        writer.csvTypes = csvTypes
        let progress = Progress(style: self.output.path == nil && progressStyle == .automatic && isatty(STDOUT_FILENO) != 0 ? .quiet : progressStyle, verb: "exported")
        if self.output.path != nil { Interruption.install { exporter.cancel() } }
        let summary: RecordExporter.Summary
        do {
            summary = try await exporter.run(into: writer) { progress.update(done: $0) }
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
        progress.finish("exported \(Progress.grouped(summary.exported)) record\(summary.exported == 1 ? "" : "s")", json: ["exported": summary.exported])
        return .success
    }
}
