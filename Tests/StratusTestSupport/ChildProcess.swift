import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A program the tests start as a separate process (the `stratus` tool, a sample, the `sqlite3`
/// shell). Its output goes to files, so a chatty program never blocks on a pipe.
///
/// ```swift
/// let run = try ChildProcess(try ChildProcess.builtExecutable("stratus"), ["count", "--type", "Note"], in: directory)
/// let status = await run.wait()
/// #expect(status.exitCode == 0, "\(status.stderr)")
/// ```
public final class ChildProcess: @unchecked Sendable {
    // @unchecked: `process` is only started here, signalled by its pid, and read after it
    // ended; the end state is guarded by `state`.

    /// How a program ended and what it printed.
    public struct Status: Sendable {
        public var exitCode: Int32
        /// Ended by a signal (a kill), not by exiting; `exitCode` is then the signal number.
        public var killed: Bool
        public var stdout: String
        public var stderr: String
        public var stdoutLines: [String] { stdout.split(separator: "\n").map(String.init) }
    }

    private let process: Process
    public let stdoutURL: URL
    public let stderrURL: URL
    private struct State {
        var ended = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }
    private let state = Mutex(State())
    /// One launch at a time: swift-corelibs-foundation's `Process.run()` crashed (a bad read
    /// in its memcpy) when tests launched processes from several threads at once while the
    /// test process held many descriptors.
    private static let launching = Mutex(())

    /// Starts `path` with `arguments`, writing its output to `stdout` and `stderr` (created
    /// empty), reading `stdin` (or nothing), in `directory`, with `environment` added to this
    /// process's environment.
    public init(_ path: String, _ arguments: [String], stdout: URL, stderr: URL, stdin: URL? = nil,
                directory: URL? = nil, environment: [String: String]? = nil) throws {
        process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        if let directory { process.currentDirectoryURL = directory }
        if let environment { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        _ = FileManager.default.createFile(atPath: stdout.path, contents: nil)
        _ = FileManager.default.createFile(atPath: stderr.path, contents: nil)
        process.standardOutput = try FileHandle(forWritingTo: stdout)
        process.standardError = try FileHandle(forWritingTo: stderr)
        process.standardInput = try stdin.map { try FileHandle(forReadingFrom: $0) } ?? FileHandle.nullDevice
        stdoutURL = stdout
        stderrURL = stderr
        process.terminationHandler = { [weak self] _ in
            guard let self else { return }
            let waiters = self.state.withLock { s -> [CheckedContinuation<Void, Never>] in
                s.ended = true
                defer { s.waiters = [] }
                return s.waiters
            }
            for waiter in waiters { waiter.resume() }
        }
        try Self.launching.withLock { _ in try process.run() }
    }

    /// Starts `path` with its output in new files in `directory`.
    public convenience init(_ path: String, _ arguments: [String], in directory: URL, environment: [String: String]? = nil) throws {
        let id = UUID().uuidString.prefix(8)
        try self.init(path, arguments, stdout: directory.appendingPathComponent("out-\(id).txt"),
                      stderr: directory.appendingPathComponent("err-\(id).txt"), environment: environment)
    }

    public var isRunning: Bool { !state.withLock { $0.ended } }
    public var pid: Int32 { process.processIdentifier }

    public func signal(_ number: Int32) { _ = Glibc.kill(process.processIdentifier, number) }

    /// Sends SIGKILL, as a crash or `kill -9` would end it.
    public func kill() { signal(SIGKILL) }

    /// Suspends until the program ended (without blocking a thread).
    public func wait() async -> Status {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ended = state.withLock { s in
                if !s.ended { s.waiters.append(continuation) }
                return s.ended
            }
            if ended { continuation.resume() }
        }
        return status()
    }

    /// Blocks the calling thread until the program ended; for loops on their own thread.
    public func waitBlocking() -> Status {
        process.waitUntilExit()
        return status()
    }

    private func status() -> Status {
        let read = { (url: URL) in String(decoding: FileManager.default.contents(atPath: url.path) ?? Data(), as: UTF8.self) }
        return Status(exitCode: process.terminationStatus, killed: process.terminationReason == .uncaughtSignal,
                      stdout: read(stdoutURL), stderr: read(stderrURL))
    }

    /// The package's executable `name` (`stratus`, `stress`, `churn`) built next to the test
    /// bundle (`<scratch>/debug/`), or in a `.build/debug` folder above the bundle, above these
    /// sources or in the current directory.
    ///
    /// - Throws: ``MissingExecutable``, saying how to build it, when it is not there.
    public static func builtExecutable(_ name: String) throws -> String {
        var candidates: [URL] = []
        let bundleDirectory = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        candidates.append(bundleDirectory.appendingPathComponent(name))
        for start in [bundleDirectory, URL(fileURLWithPath: #filePath).deletingLastPathComponent()] {
            var directory = start
            while directory.path != "/" {
                candidates.append(directory.appendingPathComponent(".build/debug/\(name)"))
                directory = directory.deletingLastPathComponent()
            }
        }
        candidates.append(URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent(".build/debug/\(name)"))
        if let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0.path) }) { return found.path }
        throw MissingExecutable(message: """
            the `\(name)` executable is not built: looked next to the test bundle \
            (\(bundleDirectory.path)/\(name)) and in .build/debug folders above it and above the \
            tests; run `swift build --build-tests` (with the same --scratch-path) before `swift test`
            """)
    }

    public struct MissingExecutable: Error, CustomStringConvertible {
        public let message: String
        public var description: String { message }
    }

    /// Runs `body` on its own thread, outside Swift's cooperative pool, so that a
    /// timing-sensitive loop (killing a process just after it wrote) is not held up by other
    /// tests that occupy the pool's few threads.
    public static func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try body() }) }.start()
        }
    }
}
