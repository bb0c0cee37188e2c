import Foundation
import StratusTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The built `stratus` tool, run as a separate process the way cron and shell scripts run it.
///
/// ```swift
/// let cli = try CLI(store)                       // fails the test clearly when not built
/// let result = try await cli.run(["count", "--type", "Note"])
/// #expect(result.exitCode == 0)
/// ```
///
/// Every run gets `STRATUS_STORE` (a fresh store in the test's temporary directory) and
/// `STRATUS_USER`, so tests never touch a real store; `environment` adds or overrides variables.
struct CLI: Sendable {
    let executable: String
    let store: TemporaryStore
    /// The store file every run uses through `STRATUS_STORE`.
    let storePath: String
    var environment: [String: String]

    init(_ store: TemporaryStore, storeName: String = "store.sqlite") throws {
        executable = try Self.executablePath()
        self.store = store
        storePath = store.path(storeName)
        environment = ["STRATUS_STORE": storePath, "STRATUS_USER": "tester"]
    }

    /// The `stratus` executable built next to the test bundle (`<scratch>/debug/stratus`), or in
    /// a `.build/debug` folder above the bundle or this source file.
    ///
    /// - Throws: a message saying how to build it when it is not there.
    static func executablePath() throws -> String {
        var candidates: [URL] = []
        let exe = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        var directory = exe.deletingLastPathComponent()
        candidates.append(directory.appendingPathComponent("stratus"))
        while directory.path != "/" {
            candidates.append(directory.appendingPathComponent(".build/debug/stratus"))
            directory = directory.deletingLastPathComponent()
        }
        directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        while directory.path != "/" {
            candidates.append(directory.appendingPathComponent(".build/debug/stratus"))
            directory = directory.deletingLastPathComponent()
        }
        if let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0.path) }) { return found.path }
        throw CLIMissing(message: """
            the `stratus` executable is not built: looked next to the test bundle \
            (\(exe.deletingLastPathComponent().path)/stratus) and in .build/debug folders above it and above \
            the tests; run `swift build --build-tests` (with the same --scratch-path) before `swift test`
            """)
    }

    struct CLIMissing: Error, CustomStringConvertible {
        let message: String
        var description: String { message }
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
        var env = environment.merging(extra) { $1 }
        env["STRATUS"] = executable
        return try await Running(executable: "/bin/sh", arguments: ["-c", script], store: store, stdin: nil, environment: env).wait()
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
    final class Running: @unchecked Sendable {
        // @unchecked: `process` is started in init, signalled by pid and read after it ended;
        // the end state is guarded by `state`.
        private let process: Process
        let stdoutURL: URL
        let stderrURL: URL
        let arguments: [String]
        private struct State {
            var ended = false
            var waiters: [CheckedContinuation<Void, Never>] = []
        }
        private let state = Mutex(State())

        init(executable: String, arguments: [String], store: TemporaryStore, stdin: Data?, environment: [String: String]) throws {
            let id = UUID().uuidString.prefix(8).lowercased()
            stdoutURL = store.url("run-\(id).out")
            stderrURL = store.url("run-\(id).err")
            self.arguments = arguments
            process = Process()
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = arguments
            process.currentDirectoryURL = store.directory
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
            _ = FileManager.default.createFile(atPath: stdoutURL.path, contents: nil)
            _ = FileManager.default.createFile(atPath: stderrURL.path, contents: nil)
            process.standardOutput = try FileHandle(forWritingTo: stdoutURL)
            process.standardError = try FileHandle(forWritingTo: stderrURL)
            if let stdin {
                let inURL = try store.writeFile("run-\(id).in", stdin)
                process.standardInput = try FileHandle(forReadingFrom: inURL)
            } else {
                process.standardInput = FileHandle.nullDevice
            }
            process.terminationHandler = { [weak self] _ in
                guard let self else { return }
                let waiters = self.state.withLock { s -> [CheckedContinuation<Void, Never>] in
                    s.ended = true
                    defer { s.waiters = [] }
                    return s.waiters
                }
                for waiter in waiters { waiter.resume() }
            }
            try process.run()
        }

        var isRunning: Bool { !state.withLock { $0.ended } }

        func signal(_ number: Int32) { _ = kill(process.processIdentifier, number) }

        /// Suspends until the process ended (without blocking a thread).
        func wait() async -> Result {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let ended = state.withLock { s in
                    if !s.ended { s.waiters.append(continuation) }
                    return s.ended
                }
                if ended { continuation.resume() }
            }
            let read = { (url: URL) in String(decoding: FileManager.default.contents(atPath: url.path) ?? Data(), as: UTF8.self) }
            return Result(
                exitCode: process.terminationStatus, signalled: process.terminationReason == .uncaughtSignal,
                stdout: read(stdoutURL), stderr: read(stderrURL), arguments: arguments)
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
        let pattern = #/^imported ([0-9,]+), updated ([0-9,]+), unchanged ([0-9,]+), failed ([0-9,]+) in [0-9]+\.[0-9] s$/#
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
