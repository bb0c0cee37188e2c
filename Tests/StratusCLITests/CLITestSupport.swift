import Foundation
import Stratus
import StratusPostgres
import StratusSQLite
import StratusTestSupport
import Testing

/// The built `stratus` tool, run as a separate process the way cron and shell scripts run it.
///
/// ```swift
/// let cli = try await CLI(store, engine: .postgres)    // fails the test clearly when not built
/// let result = try await cli.run(["count", "--type", "Note"])
/// #expect(result.exitCode == 0)
/// ```
///
/// Every run gets `STRATUS_STORE` (an SQLite file in the test's temporary directory, or the URL
/// of a fresh PostgreSQL schema) and `STRATUS_USER`, so tests never touch a real store;
/// `environment` adds or overrides variables. ``newStore(_:)`` gives further stores of the same
/// engine.
struct CLI: Sendable {
    let executable: String
    let store: TemporaryStore
    let engine: TestEngine
    /// The store every run uses through `STRATUS_STORE`: a file path or a PostgreSQL URL.
    let storePath: String
    var environment: [String: String]
    /// Where further stores of the engine go (PostgreSQL schemas are dropped with it).
    let locations: TestStoreLocations

    /// - Throws: when the tool is not built, or the PostgreSQL schema cannot be made; cancels
    ///   the test case (reported as skipped, with the reason) when the engine is PostgreSQL and
    ///   no server is available.
    init(_ store: TemporaryStore, engine: TestEngine = .sqlite, storeName: String = "store.sqlite") async throws {
        executable = try ChildProcess.builtExecutable("stratus")
        self.store = store
        self.engine = engine
        locations = try await TestStoreLocations(engine: engine, folder: store)
        storePath = try await locations.newStore(storeName)
        // The tool's temporary folders (a PostgreSQL store's asset cache) go with the test's folder.
        environment = ["STRATUS_STORE": storePath, "STRATUS_USER": "tester", "TMPDIR": store.directory.path]
    }

    /// Another, new store of the test's engine (nothing is created yet): an SQLite file named
    /// `name` in the temporary directory, or a new PostgreSQL schema.
    func newStore(_ name: String) async throws -> String { try await locations.newStore(name) }

    /// Whether a store exists at `location` (default: the test's store): the SQLite file, or
    /// Stratus's tables in the PostgreSQL schema.
    func storeExists(_ location: String? = nil) -> Bool { locations.exists(location ?? storePath) }

    /// The engine of the store at `location` (default: the test's), for tests that also write
    /// through the library.
    func openEngine(_ location: String? = nil) throws -> any StorageEngine {
        let location = location ?? storePath
        return PostgresEngine.isStoreURL(location) ? try PostgresEngine.shared(url: location) : try SQLiteEngine.shared(path: location)
    }

    /// A container on the store at `location` (default: the test's), as `user`.
    func container(_ identifier: String = "default", user: String = "tester", at location: String? = nil) throws -> Container {
        Container(identifier: identifier, engine: try openEngine(location), userName: user)
    }

    /// How a run ended and what it printed.
    struct Result: Sendable, CustomStringConvertible {
        var exitCode: Int32
        /// Ended by a signal rather than by exiting (`exitCode` is then the signal number).
        var signalled: Bool
        var stdout: String
        var stderr: String
        var arguments: [String]

        var stdoutLines: [String] { stdout.split(separator: "\n", omittingEmptySubsequences: true).map(String.init) }
        var stderrLines: [String] { stderr.split(separator: "\n", omittingEmptySubsequences: true).map(String.init) }

        /// For failure messages: the command line, the status and both streams (shortened).
        var description: String {
            "`stratus \(arguments.joined(separator: " "))` exited \(signalled ? "by signal " : "")\(exitCode)\n"
                + "stdout: \(stdout.prefix(1_500))\nstderr: \(stderr.prefix(1_500))"
        }
    }

    /// Runs `stratus ARGUMENTS` to its end; `stdin` is fed from a file holding these bytes.
    func run(_ arguments: [String], stdin: Data? = nil, environment extra: [String: String] = [:]) async throws -> Result {
        try await start(arguments, stdin: stdin, environment: extra).wait()
    }

    func run(_ arguments: [String], stdin: String, environment extra: [String: String] = [:]) async throws -> Result {
        try await run(arguments, stdin: Data(stdin.utf8), environment: extra)
    }

    /// Starts `stratus ARGUMENTS` without waiting; its output goes to files, so a chatty run never
    /// blocks on a full pipe.
    func start(_ arguments: [String], stdin: Data? = nil, environment extra: [String: String] = [:]) throws -> Running {
        try Running(executable: executable, arguments: arguments, store: store, stdin: stdin, environment: environment.merging(extra) { $1 })
    }

    /// Runs a `/bin/sh` script with `$STRATUS` set to the executable, in the temporary directory.
    func shell(_ script: String, environment extra: [String: String] = [:]) async throws -> Result {
        try await startShell(script, environment: extra).wait()
    }

    /// Starts a `/bin/sh` script as ``shell(_:environment:)`` runs it, without waiting.
    func startShell(_ script: String, environment extra: [String: String] = [:]) throws -> Running {
        var env = environment.merging(extra) { $1 }
        env["STRATUS"] = executable
        return try Running(executable: "/bin/sh", arguments: ["-c", script], store: store, stdin: nil, environment: env)
    }

    /// A file in the temporary directory holding `text`; returns its path.
    @discardableResult
    func file(_ name: String, _ text: String) throws -> String {
        try store.writeFile(name, Data(text.utf8)).path
    }

    func read(_ path: String) -> String? {
        FileManager.default.contents(atPath: path).map { String(decoding: $0, as: UTF8.self) }
    }

    func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    // MARK: - Store inspection through the tool itself

    /// Creates the store (empty) the way a user would: an import of nothing.
    func createStore(extra: [String] = []) async throws {
        let result = try await run(["import", "--quiet"] + extra, stdin: "")
        #expect(result.exitCode == 0, "\(result)")
    }

    /// `stratus count --type TYPE`, required to succeed.
    func count(_ type: String, where predicate: String? = nil, extra: [String] = []) async throws -> Int {
        var arguments = ["count", "--type", type] + extra
        if let predicate { arguments += ["--where", predicate] }
        let result = try await run(arguments)
        #expect(result.exitCode == 0, "\(result)")
        return try #require(Int(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), "count prints a number: \(result)")
    }

    /// Every record of TYPE as parsed JSON objects keyed by record name (`stratus export`).
    func exported(_ type: String, extra: [String] = []) async throws -> [String: [String: Any]] {
        let result = try await run(["export", "--type", type, "--quiet"] + extra)
        #expect(result.exitCode == 0, "\(result)")
        var records: [String: [String: Any]] = [:]
        for line in result.stdoutLines {
            let object = try JSONLine.object(line)
            let name = try #require(object["recordName"] as? String)
            #expect(records[name] == nil, "\(name) exported twice")
            records[name] = object
        }
        return records
    }

    /// A started `stratus` (or shell) process.
    final class Running: Sendable {
        let arguments: [String]
        private let process: ChildProcess

        init(executable: String, arguments: [String], store: TemporaryStore, stdin: Data?, environment: [String: String]) throws {
            let id = UUID().uuidString.prefix(8).lowercased()
            self.arguments = arguments
            process = try ChildProcess(
                executable, arguments, stdout: store.url("run-\(id).out"), stderr: store.url("run-\(id).err"),
                stdin: try stdin.map { try store.writeFile("run-\(id).in", $0) }, directory: store.directory, environment: environment)
        }

        var isRunning: Bool { process.isRunning }

        /// The process id, for reading what the kernel says of the process (`/proc/PID/io`).
        var pid: Int32 { process.pid }

        func signal(_ number: Int32) { process.signal(number) }

        /// Suspends until the process ended (without blocking a thread).
        func wait() async -> Result {
            let status = await process.wait()
            return Result(exitCode: status.exitCode, signalled: status.killed, stdout: status.stdout, stderr: status.stderr, arguments: arguments)
        }
    }
}

/// Parsing the tool's JSON output.
enum JSONLine {
    static func object(_ line: some StringProtocol) throws -> [String: Any] {
        let value = try JSONSerialization.jsonObject(with: Data(String(line).utf8))
        return try #require(value as? [String: Any], "expected a JSON object: \(line.prefix(300))")
    }

    static func objects(_ text: String) throws -> [[String: Any]] {
        try text.split(separator: "\n", omittingEmptySubsequences: true).map { try object($0) }
    }

    /// The record names of NDJSON output, in order.
    static func names(_ text: String) throws -> [String] {
        try objects(text).map { try #require($0["recordName"] as? String) }
    }

    /// A field's `{"value", "type"}` object from a record object.
    static func field(_ record: [String: Any], _ key: String) -> [String: Any]? {
        (record["fields"] as? [String: Any])?[key] as? [String: Any]
    }

    /// A field's value as text (for easy comparisons of scalars).
    static func value(_ record: [String: Any], _ key: String) -> String? {
        guard let value = field(record, key)?["value"] else { return nil }
        return "\(value)"
    }
}

/// Checks of the final summary line on stderr.
enum Summary {
    /// `imported 3, updated 0, unchanged 0, failed 0 in 0.0 s`; returns the counts, or nil when
    /// the line is not a summary line.
    static func importCounts(_ line: some StringProtocol) -> (imported: Int, updated: Int, unchanged: Int, failed: Int)? {
        let pattern = #/^imported ([0-9,]+), updated ([0-9,]+), unchanged ([0-9,]+), (?:deleted [0-9,]+, )?failed ([0-9,]+) in [0-9]+\.[0-9] s$/#
        guard let match = try? pattern.wholeMatch(in: String(line)) else { return nil }
        func int(_ s: Substring) -> Int { Int(s.replacingOccurrences(of: ",", with: ""))! }
        return (int(match.1), int(match.2), int(match.3), int(match.4))
    }

    /// The summary of an import run: its last stderr line, with every line before it a
    /// periodic progress line (`imported N (R/s)`) or a notice (`stratus: …`).
    static func ofImport(_ result: CLI.Result, sourceLocation: SourceLocation = #_sourceLocation) -> (imported: Int, updated: Int, unchanged: Int, failed: Int)? {
        let lines = result.stderrLines
        guard let last = lines.last, let counts = importCounts(last) else {
            Issue.record("the last stderr line is not an import summary (`imported N, updated N, unchanged N, failed N in S s`): \(result)", sourceLocation: sourceLocation)
            return nil
        }
        for line in lines.dropLast() where !(line.hasPrefix("imported ") || line.hasPrefix("stratus: ")) {
            Issue.record("unexpected stderr line before the summary: \(line)", sourceLocation: sourceLocation)
        }
        return counts
    }

    /// Compares an import summary with expected counts.
    static func expectImport(
        _ result: CLI.Result, imported: Int = 0, updated: Int = 0, unchanged: Int = 0, failed: Int = 0,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        guard let counts = ofImport(result, sourceLocation: sourceLocation) else { return }
        #expect(
            [counts.imported, counts.updated, counts.unchanged, counts.failed] as [Int] == [imported, updated, unchanged, failed] as [Int],
            "summary (imported, updated, unchanged, failed): \(result.stderrLines.last ?? "")", sourceLocation: sourceLocation)
    }
}

/// One line of a reject file: `{"line", "column", "recordName", "error"}`.
struct RejectLine {
    var line: Int
    var column: Int
    var recordName: String?
    var error: String

    static func read(_ path: String) throws -> [RejectLine] {
        guard let data = FileManager.default.contents(atPath: path) else { return [] }
        return try JSONLine.objects(String(decoding: data, as: UTF8.self)).map { object in
            RejectLine(
                line: try #require(object["line"] as? Int, "reject line without a line number: \(object)"),
                column: object["column"] as? Int ?? -1,
                recordName: object["recordName"] as? String,
                error: try #require(object["error"] as? String, "reject line without an error: \(object)"))
        }
    }
}

/// Small NDJSON inputs.
enum Input {
    /// One record line: string `title`, INT64 `count`.
    static func note(_ name: String, title: String, count: Int, type: String = "Note") -> String {
        #"{"recordName":"\#(name)","recordType":"\#(type)","fields":{"title":{"value":"\#(title)","type":"STRING"},"count":{"value":\#(count),"type":"INT64"}}}"#
    }

    static func notes(_ count: Int, prefix: String = "n") -> String {
        (1...count).map { note("\(prefix)\($0)", title: "title \($0)", count: $0) + "\n" }.joined()
    }
}

extension CLI {
    /// Imports record `pic` of type Photo with a 20,000-byte asset from `store`'s folder
    /// `folder`, then cuts the store's copy of the content to 5,000 bytes, as a damaged or
    /// half-restored store holds it: the content file in an SQLite store's assets folder, the
    /// content's chunks in a PostgreSQL store (and this machine's cache of it is emptied, as on
    /// a machine that never read it). Answers where the content is (the content folder, or
    /// `asset_chunks`) and its name (its SHA-256).
    func importPhotoWithContentCutShort(in store: TemporaryStore, folder: String, seed: UInt8, flippingAByteInstead: Bool = false) async throws -> (contents: String, file: String) {
        let bytes = patternBytes(count: 20_000, seed: seed)
        _ = try store.writeFile(folder + "/photo.bin", bytes)
        let line = #"{"recordName":"pic","recordType":"Photo","fields":{"image":{"value":{"downloadURL":"photo.bin"},"type":"ASSETID"}}}"#
        #expect(try await run(["import", "--quiet", "--assets-dir", store.path(folder)], stdin: line + "\n").exitCode == 0)
        let content = SHA256Hasher.digest(Array(bytes)).hexadecimal
        guard engine == .postgres else {
            let contents = storePath + ".assets/sha256"
            let file = contents + "/" + content
            #expect(chmod(file, 0o600) == 0)
            if flippingAByteInstead {
                // Bit rot: the same size, other bytes.
                var damaged = bytes
                damaged[10] ^= 1
                #expect(FileManager.default.createFile(atPath: file, contents: damaged))
            } else {
                #expect(truncate(file, 5_000) == 0)
            }
            return (contents, content)
        }
        let cut = try PostgresConnection(url: storePath).execute(
            flippingAByteInstead ? "UPDATE asset_chunks SET data = set_byte(data, 10, get_byte(data, 10) # 1) WHERE content_id = $1 AND chunk = 0"
                : "UPDATE asset_chunks SET data = substring(data FROM 1 FOR 5000) WHERE content_id = $1 AND chunk = 0", [.text(content)])
        #expect(cut == 1, "the content is one chunk")
        for cache in try FileManager.default.contentsOfDirectory(atPath: store.directory.path) where cache.hasPrefix("stratus-assets-") {
            try FileManager.default.removeItem(atPath: store.path(cache))
        }
        return ("asset_chunks", content)
    }
}

extension CLI {
    /// What a PostgreSQL role made by ``makeRole(_:access:)`` may do with the test's store.
    enum RoleAccess {
        /// No privilege at all: not even the use of the store's schema.
        case nothing
        /// The use of the store's schema, and nothing of its tables.
        case schemaOnly
        /// The use of the schema and `SELECT` on every table: reads, and no writes.
        case read
    }

    /// A new PostgreSQL login role with `access` to the test's (PostgreSQL) store, and the store's
    /// URL as that role. Roles belong to the whole server: drop it with ``dropRole(_:)``.
    ///
    /// ```swift
    /// let reader = try cli.makeRole("reader", access: .read)
    /// defer { cli.dropRole(reader.name) }
    /// let count = try await cli.run(["count", "--type", "Note", "--store", reader.url])
    /// ```
    ///
    /// - Throws: when the role cannot be made (the store is not on PostgreSQL, say).
    func makeRole(_ prefix: String, access: RoleAccess) throws -> (name: String, url: String) {
        let name = "\(prefix)_\(String(UInt32.random(in: 0...UInt32.max), radix: 36))"
        var grants: [String] = []
        if access != .nothing { grants.append("GRANT USAGE ON SCHEMA %I TO \(name)") }
        if access == .read { grants.append("GRANT SELECT ON ALL TABLES IN SCHEMA %I TO \(name)") }
        let executes = grants.map { "EXECUTE format('\($0)', current_schema());" }.joined(separator: " ")
        try PostgresConnection(url: storePath).executeScript("CREATE ROLE \(name) LOGIN;" + (executes.isEmpty ? "" : " DO $$ BEGIN \(executes) END $$;"))
        return (name, try PostgresConnectionString.replacing(["user": name], in: storePath))
    }

    /// Drops a role ``makeRole(_:access:)`` made, with what it was granted.
    func dropRole(_ name: String) {
        try? PostgresConnection(url: storePath).executeScript("DROP OWNED BY \(name); DROP ROLE IF EXISTS \(name)")
    }
}

extension CLI {
    /// Backs the test's store up the way its engine's own tools do, while commands may still be
    /// using it: a copy of the SQLite file and its log, or `pg_dump` of the store's PostgreSQL
    /// schema. Answers the backup's path, for ``restoreStore(from:)``.
    ///
    /// ```swift
    /// let backup = try await cli.backUpStore("before")
    /// …                                        // the store moves on
    /// try await cli.restoreStore(from: backup)  // and is put back as it was
    /// ```
    func backUpStore(_ name: String) async throws -> String {
        let backup = store.path(name + ".backup")
        guard engine == .postgres else {
            for suffix in ["", "-wal"] where exists(storePath + suffix) {
                try FileManager.default.copyItem(atPath: storePath + suffix, toPath: backup + suffix)
            }
            return backup
        }
        let schema = try #require(try PostgresConnection(url: storePath).query("SELECT current_schema()::text").first?.text(0))
        let dumped = try await shell(#"pg_dump --format=custom --schema="$SCHEMA" --file="$BACKUP" --dbname="$STRATUS_STORE""#,
                                     environment: ["SCHEMA": schema, "BACKUP": backup])
        #expect(dumped.exitCode == 0, "\(dumped)")
        return backup
    }

    /// Puts the test's store back from a backup ``backUpStore(_:)`` made: the SQLite file and
    /// its log replaced, or the PostgreSQL schema dropped and restored.
    func restoreStore(from backup: String) async throws {
        guard engine == .postgres else {
            for file in [storePath, storePath + "-wal", storePath + "-shm"] where exists(file) {
                try FileManager.default.removeItem(atPath: file)
            }
            for suffix in ["", "-wal"] where exists(backup + suffix) {
                try FileManager.default.copyItem(atPath: backup + suffix, toPath: storePath + suffix)
            }
            return
        }
        let connection = try PostgresConnection(url: storePath)
        let schema = try #require(try connection.query("SELECT current_schema()::text").first?.text(0))
        try connection.executeScript("DROP SCHEMA \(try PostgresConnection.quoteIdentifier(schema)) CASCADE")
        let restored = try await shell(#"pg_restore --dbname="$STRATUS_STORE" "$BACKUP""#, environment: ["BACKUP": backup])
        #expect(restored.exitCode == 0, "\(restored)")
    }
}
