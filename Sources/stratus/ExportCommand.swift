import Foundation
import Stratus
import StratusTransfer

/// `stratus export`: every matching record, streamed page by page to stdout or a file.
struct ExportCommand {
    static let usage = """
        usage: stratus export --type TYPE [--where PREDICATE] [--sort KEY[:desc]]... [--fields K1,K2]
                              [--limit N] [--format ndjson|json|envelope|csv] [--output FILE [--force]]
                              [progress options] [store options]

        Writes every matching record (NDJSON by default) to stdout, or to FILE: written under a
        temporary name and moved into place when complete, so a reader never sees half a file.
        An existing FILE is not overwritten without --force. Memory holds one page. CSV columns are
        --fields, else every field of the matching records (found by reading them once more).
        """

    var query: QueryCommand
    var format = RecordFormat.ndjson
    var limit: Int?
    var outputPath: String?
    var force: Bool
    var progressStyle: Progress.Style

    init(_ arguments: inout Arguments) throws {
        if let text = try arguments.value("--format") {
            guard let format = RecordFormat(rawValue: text) else { throw UsageError(message: "--format takes ndjson, json, envelope or csv, not '\(text)'") }
            self.format = format
        }
        if let text = try arguments.value("--limit") {
            guard let limit = Int(text), limit >= 0 else { throw UsageError(message: "--limit must be a number, not '\(text)'") }
            self.limit = limit
        }
        outputPath = try arguments.value("--output")
        force = arguments.flag("--force")
        progressStyle = try Progress.style(&arguments)
        query = try QueryCommand(&arguments)
        if query.cursor != nil { throw UsageError(message: "export reads every page itself; --cursor is for `stratus query`") }
    }

    /// CSV needs its columns before the first row: every key of every matching record,
    /// found by reading them once more (a schema need not declare every field).
    private func columns(of query: Query, in database: Database) async throws -> [String] {
        var keys: Set<String> = []
        for try await record in database.allRecords(matching: query, inZoneWith: self.query.store.zoneID, pageSize: 1_000) {
            keys.formUnion(record.allKeys())
        }
        return keys.sorted()
    }

    private typealias Page = (matchResults: [(Record.ID, Result<Record, any Error>)], queryCursor: QueryOperation.Cursor?)

    func run() async throws -> ExitCode {
        let database = try query.store.openDatabase()
        guard let base = try query.makeQuery() else { throw UsageError(message: "--type is required") }
        var csvFields = query.fields
        if format == .csv && csvFields == nil {
            csvFields = try await columns(of: base, in: database)
        }
        let output = try Output(path: outputPath, force: force)
        let writer = RecordWriter(format: format, output: output.handle, csvFields: csvFields)
        let progress = Progress(style: outputPath == nil && progressStyle == .automatic && isatty(STDOUT_FILENO) != 0 ? .quiet : progressStyle, verb: "exported")
        var exported = 0
        // The next page is read while this one is written, so that reading and writing use a
        // core each; only one page is ever read ahead, so memory still holds two pages at most.
        let pageSize = 1_000
        let zoneID = query.store.zoneID
        let desiredKeys = query.fields
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
