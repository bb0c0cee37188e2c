import Foundation
import Stratus
import StratusTransfer

/// `stratus query`: one page of a query, for scripts that page with `--cursor`.
struct QueryCommand: Command {
    static let name = "query"
    static let summary = "one page of a query, with a cursor for the next (for scripts)"
    static let usage = [
        "stratus query --type TYPE [--where PREDICATE] [--sort KEY[:desc]]... [--limit N] [--fields K1,K2] [--all-zones] [--format FORMAT] [--explain] [--quiet] [store options]",
        "stratus query --cursor TOKEN [--type TYPE --where PREDICATE --sort KEY[:desc]...] [--limit N] [--fields K1,K2] [--format FORMAT] [--quiet] [store options]",
    ]
    static let discussion = """
        Prints one page of matching records as NDJSON (CloudKit record JSON) on stdout. When more
        records match, prints `cursor: TOKEN` on stderr; pass it back with --cursor (and the same
        --type/--where/--sort, or none of them) to get the next page. With --format envelope the
        page is one JSON object, as CloudKit's records/query answers it:
        {"records":[…],"continuationMarker":"TOKEN"}, the marker only when more records match
        (and nothing on stderr); a script reads one object and passes the marker to --cursor.
        With --explain, prints instead which index the store would read the query through (and
        the store's own plan), and reads no record. In development, a query that filters or
        sorts on a field without its index still runs, by reading every record of the type;
        when stderr is a terminal (or $STRATUS_ADVICE is `always`), stderr then says so once and
        names the index to declare (production refuses such a query). Scripts that read stderr
        see only the cursor line, `cursor: TOKEN` (and, when nothing matched, a note that a --where
        field or --type is not declared). A cursor longer than a command line takes (a large IN
        list) goes back on stdin: --cursor - (a page's whole stderr may be given).
        """
    static let options: [Option] = [
        .recordType, .predicate, .sort,
        Option("--limit", "N", "records per page", default: "100"),
        .fields, .allZones,
        Option("--cursor", "TOKEN", "continue after the page that printed TOKEN (then --type is not needed); - reads TOKEN (or its `cursor: TOKEN` line) from stdin, for a cursor longer than a command line takes", default: "none: the first page"),
        Option("--format", "FORMAT", "ndjson, json (an array), envelope ({\"records\":[…],\"continuationMarker\":…}) or csv", default: "ndjson"),
        Option(flag: "--explain", "print the index the query would read and the store's plan, instead of records"),
        .quietNotes,
    ]

    var store: StoreOptions
    var selection: QuerySelection
    var limit: Int
    var cursor: String?
    var format = RecordFormat.ndjson
    var explain = false

    static func parse(_ arguments: ParsedArguments) throws -> QueryCommand {
        var cursor = arguments.value("--cursor")
        if cursor == "-" { cursor = try Self.cursorFromStandardInput() }
        // The page's line as it printed it (`--cursor "$(grep cursor: err)"`), as stdin takes it.
        if let given = cursor?.trimmingCharacters(in: .whitespacesAndNewlines), given.hasPrefix("cursor: ") { cursor = String(given.dropFirst("cursor: ".count)) }
        let command = QueryCommand(
            store: try StoreOptions(arguments), selection: try QuerySelection(arguments),
            limit: try arguments.positiveInteger("--limit") ?? 100, cursor: cursor?.trimmingCharacters(in: .whitespacesAndNewlines), format: try Self.format(arguments),
            explain: arguments.flag("--explain"))
        try arguments.expectNoPositionals()
        if command.cursor?.isEmpty == true {
            // What a paging loop passes after the last page, which prints no cursor.
            throw UsageError(message: "--cursor is empty: the last page prints no cursor (its stderr has no 'cursor:' line), so a loop ends there")
        }
        if command.selection.recordType == nil && command.cursor == nil { throw UsageError(message: "--type is required (or --cursor)") }
        if command.explain && command.selection.recordType == nil { throw UsageError(message: "--explain needs the query: --type (and --where, --sort)") }
        if command.format != .csv && !command.selection.fieldTypes.isEmpty {
            throw UsageError(message: "column types in --fields (count:INT64) are for --format csv")
        }
        if command.format == .csv && command.store.allZones { throw UsageError(message: StoreOptions.allZonesCSV) }
        if command.explain && command.store.allZones { throw UsageError(message: "--explain shows one zone's plan (every zone's query is planned alike): give --zone, or leave out --all-zones") }
        return command
    }

    /// The largest cursor `--cursor -` reads: a cursor carries its query, which a predicate's
    /// limits (500 conditions, 64 KiB of text) keep far below this.
    static let maximumCursorSize = 4 << 20

    /// `--cursor -`: the token on stdin, alone or as the `cursor: TOKEN` line a page printed.
    static func cursorFromStandardInput() throws -> String {
        let data = try ReadableFile.bytes(of: STDIN_FILENO, atMost: maximumCursorSize, what: "the cursor from stdin (--cursor -)")
        if data.count > maximumCursorSize { throw UsageError(message: "--cursor -: stdin holds more than \(maximumCursorSize >> 20) MiB, which is no cursor") }
        let text = String(decoding: data, as: UTF8.self)
        // A page's whole stderr may come: its `cursor: ` line is the cursor.
        if let line = text.split(separator: "\n").first(where: { $0.hasPrefix("cursor: ") }) {
            return String(line.dropFirst("cursor: ".count)).trimmingCharacters(in: .whitespacesAndNewlines)
        }
        return text.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    static func format(_ arguments: ParsedArguments) throws -> RecordFormat {
        guard let text = arguments.value("--format") else { return .ndjson }
        guard let format = RecordFormat(rawValue: text) else { throw UsageError(message: "--format takes ndjson, json, envelope or csv, not '\(text)'") }
        return format
    }

    func run() async throws -> ExitCode {
        var store = store
        if let cursor, !store.scopeGiven, let decoded = try? QueryOperation.Cursor(serialized: cursor) {
            // A cursor goes on in the database its query searched, as it does in its zone.
            store.scope = decoded.databaseScope
        }
        let container = try store.openContainer(.read)
        let database = container.database(with: store.scope)
        // --where dates are read by the schema's types, as a CSV cell's are.
        var query: Query?
        if let given = try selection.makeQuery() { query = try await WhereClause.typed(given, in: container) }
        if explain {
            guard let query else { throw UsageError(message: "--explain needs the query: --type (and --where, --sort)") }
            return try await printPlan(query, database)
        }
        if cursor == nil, store.environment == .development, Self.givesAdvice, let query {
            try await adviseIndexes(for: query, in: container)
        }
        let page: (matchResults: [(Record.ID, Result<Record, any Error>)], queryCursor: QueryOperation.Cursor?)
        var searchesAllZones = store.allZones
        var continued: QueryOperation.Cursor?
        if let cursor {
            let decoded = try QueryOperation.Cursor(serialized: cursor)
            continued = decoded
            searchesAllZones = decoded.searchesAllZones
            if searchesAllZones && store.zoneGiven { throw UsageError(message: "the cursor continues a query over every zone (--all-zones), not one in --zone \(store.zoneID.zoneName)") }
            if !searchesAllZones && store.allZones { throw UsageError(message: "the cursor continues a query of one zone; leave out --all-zones") }
            if searchesAllZones && format == .csv { throw UsageError(message: "the cursor continues a query over every zone (--all-zones), which writes record JSON: CSV rows carry no zone") }
            if !searchesAllZones && store.zoneGiven && decoded.zoneID.zoneName != store.zoneID.zoneName {
                throw UsageError(message: "the cursor continues a query of the zone \(decoded.zoneID.zoneName), not of --zone \(store.zoneID.zoneName); give the zone that printed it, or leave out --zone")
            }
            // A cursor goes on where its query searched: over every zone (a program's query
            // without a zone, or --all-zones), --all-zones given again or not, or in its zone.
            let zone: RecordZone.ID? = searchesAllZones ? nil : decoded.zoneID
            if query == nil, selection.predicateText != nil || !selection.sorts.isEmpty {
                // --where or --sort without --type: compared as the query of the cursor's type.
                var ofCursorType = selection
                ofCursorType.recordType = decoded.recordType
                if let given = try ofCursorType.makeQuery() { query = try await WhereClause.typed(given, in: container) }
            }
            if let query, !decoded.continues(query, zoneID: zone) {
                // `now` is read once, when the first page runs: the same text is another moment later.
                let mentionsNow = selection.predicateText?.range(of: #"\bnow\b"#, options: [.regularExpression, .caseInsensitive]) != nil
                throw UsageError(message: "the cursor belongs to a different query; run the same --type/--where/--sort that printed it"
                    + (mentionsNow ? ", or pass the cursor alone: --where's now was a moment of the first page, which the cursor keeps" : ""))
            }
            page = try await database.records(continuingMatchFrom: decoded, desiredKeys: selection.fields, resultsLimit: limit)
        } else {
            guard let query else { throw UsageError(message: "--type is required") }
            page = try await database.records(matching: query, inZoneWith: store.searchedZoneID, desiredKeys: selection.fields, resultsLimit: limit)
        }
        let records = try page.matchResults.map { try $0.1.get() }
        // CSV columns: --fields, else every field of the page's records; typed as given, else by
        // the schema (so that every page has the same header), else by the page's first value.
        var types = selection.fieldTypes
        var encrypted = selection.encryptedFields
        var schemaTyped: Set<String> = []
        if format == .csv {
            let recordType = query?.recordType ?? continued?.recordType
            var declared: (types: [String: FieldType], encrypted: Set<String>) = ([:], [])
            if let recordType { declared = try await WhereClause.csvColumnTypes(of: recordType, in: container) }
            let wanted = Set(selection.fields ?? records.flatMap(\.fieldValues.keys))
            for key in wanted where types[key] == nil {
                guard let type = declared.types[key] else { continue }
                types[key] = type
                schemaTyped.insert(key)
                if declared.encrypted.contains(key) { encrypted.insert(key) }
            }
            for record in records { for (key, value) in record.fieldValues where types[key] == nil { types[key] = value.type } }
            // Types given for fields no record of the page has still make columns.
        }
        let writer = RecordWriter(format: format, output: .standardOutput, csvFields: selection.fields ?? (format == .csv ? types.keys.sorted() : nil))
        writer.csvTypes = types
        writer.csvEncryptedFields = encrypted
        writer.jsonOptions.writesEveryZoneID = searchesAllZones
        if format == .csv {
            // Columns typed by the page's first value of each field are encrypted when it is.
            for key in types.keys where selection.fieldTypes[key] == nil && !schemaTyped.contains(key) {
                if let first = records.first(where: { $0.fieldValue(forKey: key) != nil }), first.encryptedKeys.contains(key) {
                    writer.csvEncryptedFields.insert(key)
                }
            }
        }
        WhereClause.sayFieldNotes(nothingMatched: records.isEmpty && continued == nil)
        let sink = DataRefusingSink(writer)
        for record in records { try sink.write(record) }
        let marker = page.queryCursor?.serialized
        try writer.finish(continuationMarker: marker)
        if let marker, format != .envelope {
            // The script's only way to the next page: not written is a failed page, not the last.
            try FileDescriptorOutput.writeAll(Data("cursor: \(marker)\n".utf8), to: STDERR_FILENO, name: "standard error (the cursor)")
        }
        return .success
    }

    /// `--explain`: the indexes the store would read, and its plan.
    private func printPlan(_ query: Query, _ database: Database) async throws -> ExitCode {
        let plan = try await database.queryPlan(for: query, inZoneWith: store.zoneID)
        var text = plan.indexes.isEmpty ? "index: none (reads every record of the type)\n" : plan.indexes.map { "index: \($0)\n" }.joined()
        text += plan.steps.map { "plan: \($0)\n" }.joined()
        try StandardOutput.write(text)
        return .success
    }

    /// Whether to advise on stderr: when a person reads it (a terminal), or `$STRATUS_ADVICE`
    /// says `always` (`never` turns it off).
    static var givesAdvice: Bool {
        switch ProcessInfo.processInfo.environment["STRATUS_ADVICE"] {
        case "always": true
        case "never": false
        default: isatty(STDERR_FILENO) == 1
        }
    }

    /// In development: says once on stderr what a filter or sort without its index costs, and
    /// which index to declare (production refuses such a query).
    private func adviseIndexes(for query: Query, in container: Container) async throws {
        let missing = query.missingIndexes(in: try await container.schema().recordType(query.recordType))
        guard !missing.isEmpty else { return }
        let declarable = missing.filter { $0.field.flatMap(SystemField.init(rawValue:)).map { $0.declaredType != nil } ?? true }
        let advice = declarable.isEmpty
            ? "no index can serve it (\(missing.map(\.description).joined(separator: ", ")))"
            : "Declare \(declarable.map(\.description).joined(separator: ", ")) (`stratus schema export`, edit, `stratus schema import`)"
        StratusCommand.note("note: no index serves this query, so it reads every \(query.recordType) record of the zone\((query.sortDescriptors ?? []).isEmpty ? "" : " and sorts them") for each page; production refuses it. \(advice)")
    }
}
