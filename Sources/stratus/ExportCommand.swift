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

    /// CSV needs its columns before the first row: every key of every matching record,
    /// found by reading them once more (a schema need not declare every field).
    private func columns(of query: Query, in database: Database) async throws -> [String] {
        var keys: Set<String> = []
        for try await record in database.allRecords(matching: query, inZoneWith: store.zoneID, pageSize: 1_000) {
            keys.formUnion(record.allKeys())
        }
        return keys.sorted()
    }

    private typealias Page = (matchResults: [(Record.ID, Result<Record, any Error>)], queryCursor: QueryOperation.Cursor?)

    func run() async throws -> ExitCode {
        let database = try store.openDatabase()
        let base = query
        var csvFields = selection.fields
        if format == .csv && csvFields == nil {
            csvFields = try await columns(of: base, in: database)
        }
        let output = try Output(path: self.output.path, force: self.output.force)
        let writer = RecordWriter(format: format, output: output.handle, csvFields: csvFields)
        let progress = Progress(style: self.output.path == nil && progressStyle == .automatic && isatty(STDOUT_FILENO) != 0 ? .quiet : progressStyle, verb: "exported")
        var exported = 0
        // The next page is read while this one is written, so that reading and writing use a
        // core each; only one page is ever read ahead, so memory still holds two pages at most.
        let pageSize = 1_000
        let zoneID = store.zoneID
        let desiredKeys = selection.fields
        func fetch(after cursor: QueryOperation.Cursor?, limit: Int) -> Task<Page, any Error> {
            Task {
                if let cursor {
                    return try await database.records(continuingMatchFrom: cursor, desiredKeys: desiredKeys, resultsLimit: limit)
                }
                return try await database.records(matching: base, inZoneWith: zoneID, desiredKeys: desiredKeys, resultsLimit: limit)
            }
        }
        // `--limit 0` exports nothing (a resultsLimit of 0 would mean the default page size).
        var pending: Task<Page, any Error>? = limit == 0 ? nil : fetch(after: nil, limit: min(pageSize, limit ?? pageSize))
        do {
            while let page = pending {
                let (matches, cursor) = try await page.value
                let requested = exported + matches.count
                pending = nil
                if let cursor, requested < (limit ?? Int.max) {
                    pending = fetch(after: cursor, limit: min(pageSize, (limit ?? Int.max) - requested))
                }
                for (_, result) in matches {
                    try writer.write(try result.get())
                    exported += 1
                }
                progress.update(done: exported)
            }
            try writer.finish()
            try output.commit()
        } catch {
            pending?.cancel()
            output.abandon()
            throw error
        }
        progress.finish("exported \(Progress.grouped(exported)) record\(exported == 1 ? "" : "s")", json: ["exported": exported])
        return .success
    }
}

/// Standard output, or a file written under a temporary name and renamed when complete.
struct Output {
    let handle: FileHandle
    private let path: String?
    private let temporaryPath: String?

    init(path: String?, force: Bool) throws {
        guard let path else {
            handle = .standardOutput
            self.path = nil
            temporaryPath = nil
            return
        }
        if FileManager.default.fileExists(atPath: path) && !force {
            throw CommandFailure(.cannotCreateOutput, "\(path) exists; pass --force to overwrite it")
        }
        let temporary = path + ".partial-\(getpid())"
        guard FileManager.default.createFile(atPath: temporary, contents: nil), let handle = FileHandle(forWritingAtPath: temporary) else {
            throw CommandFailure(.cannotCreateOutput, "cannot create \(temporary)")
        }
        self.handle = handle
        self.path = path
        temporaryPath = temporary
    }

    func commit() throws {
        guard let path, let temporaryPath else { return }
        try handle.synchronize()
        try handle.close()
        guard rename(temporaryPath, path) == 0 else {
            throw CommandFailure(.cannotCreateOutput, "cannot move \(temporaryPath) to \(path): \(String(cString: strerror(errno)))")
        }
    }

    func abandon() {
        guard let temporaryPath else { return }
        try? handle.close()
        try? FileManager.default.removeItem(atPath: temporaryPath)
    }
}
