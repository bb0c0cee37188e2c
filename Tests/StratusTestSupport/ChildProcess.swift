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
public final class ChildProcess: Sendable {
    // Started with posix_spawn, not Foundation's `Process`: on Linux, `Process.run()` reads
    // past a buffer while it lists /proc/self/fd (swift-corelibs-foundation #5472) and now and
    // then crashes a test process that holds many descriptors (database connections).

    /// How a program ended and what it printed.
    public struct Status: Sendable {
        public var exitCode: Int32
        /// Ended by a signal (a kill), not by exiting; `exitCode` is then the signal number.
        public var killed: Bool
        public var stdout: String
        public var stderr: String
        public var stdoutLines: [String] { stdout.split(separator: "\n").map(String.init) }
    }

    public let pid: Int32
    public let stdoutURL: URL
    public let stderrURL: URL
    private struct State {
        /// The wait status once the program ended.
        var waitStatus: Int32?
        var waiters: [CheckedContinuation<Void, Never>] = []
    }
    private let state = Mutex(State())
    private let ended = DispatchSemaphore(value: 0)

    /// Starts `path` with `arguments`, writing its output to `stdout` and `stderr` (created
    /// empty), reading `stdin` (or nothing), in `directory`, with `environment` added to this
    /// process's environment (a variable given an empty value is left out).
    ///
    /// - Throws: when a file cannot be opened or the program cannot be started.
    public init(_ path: String, _ arguments: [String], stdout: URL, stderr: URL, stdin: URL? = nil,
                directory: URL? = nil, environment: [String: String]? = nil) throws {
        stdoutURL = stdout
        stderrURL = stderr
        let output = open(stdout.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        let errors = open(stderr.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        let input = open(stdin?.path ?? "/dev/null", O_RDONLY | O_CLOEXEC)
        defer { for fd in [output, errors, input] where fd >= 0 { close(fd) } }
        guard output >= 0, errors >= 0, input >= 0 else {
            throw ChildProcessError(message: "cannot open the files of \(path): \(String(cString: strerror(errno)))")
        }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, input, 0)
        posix_spawn_file_actions_adddup2(&actions, output, 1)
        posix_spawn_file_actions_adddup2(&actions, errors, 2)
        // Nothing else of this process leaks into the child (the Swift overlay does not show
        // glibc's _np extensions, which exist since 2.34 and 2.29: looked up by name).
        guard let closeFrom = Self.closeFrom, let changeDirectory = Self.changeDirectory else {
            throw ChildProcessError(message: "this C library lacks posix_spawn_file_actions_addclosefrom_np or _addchdir_np (glibc 2.34 or later needed)")
        }
        _ = closeFrom(&actions, 3)
        if let directory { _ = changeDirectory(&actions, directory.path) }

        // The child starts with every signal at its default and none blocked, whatever this
        // process ignores or blocks.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var all = sigset_t(), none = sigset_t()
        sigfillset(&all)
        sigemptyset(&none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

        // An empty value given removes the variable: the child runs as where it is unset.
        let variables = ProcessInfo.processInfo.environment.merging(environment ?? [:]) { $1 }.filter { environment?[$0.key] != "" }
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        let envp = variables.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        var child: pid_t = 0
        let rc = posix_spawn(&child, path, &actions, &attributes, argv, envp)
        guard rc == 0 else { throw ChildProcessError(message: "cannot start \(path): \(String(cString: strerror(rc)))") }
        pid = child
        let started = child

        // One thread per child waits for it, so that `wait()` suspends no thread of the pool.
        let thread = Thread { [self] in
            var status: Int32 = 0
            while waitpid(started, &status, 0) < 0 && errno == EINTR {}
            let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
                s.waitStatus = status
                defer { s.waiters = [] }
                return s.waiters
            }
            ended.signal()
            for waiter in waiters { waiter.resume() }
        }
        thread.start()

        // A program that hangs would hold its test, and the whole run, until CI's own limit:
        // past the limit it is killed, with where its threads stood in its stderr, so that the
        // test fails saying so and the run goes on.
        DispatchQueue.global().asyncAfter(deadline: .now() + Self.timeLimitSeconds) { [weak self] in
            guard let self, isRunning else { return }
            let note = "\n[test support] still running after \(Int(Self.timeLimitSeconds)) s: killed; where its threads stood:\n" + Self.threads(of: started)
            if let handle = FileHandle(forWritingAtPath: stderrURL.path) {
                handle.seekToEndOfFile()
                handle.write(Data(note.utf8))
                try? handle.close()
            }
            kill()
        }
    }

    /// How long a program the tests start may run (`STRATUS_TEST_CHILD_SECONDS`, default 20
    /// minutes: a whole test run takes about 10).
    static let timeLimitSeconds: Double = ProcessInfo.processInfo.environment["STRATUS_TEST_CHILD_SECONDS"].flatMap(Double.init) ?? 1_200

    /// The threads of process `pid` as gdb prints them, or why they could not be read.
    private static func threads(of pid: pid_t) -> String {
        let gdb = ["/usr/bin/gdb", "/usr/local/bin/gdb"].first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let gdb else { return "(gdb is not installed)\n" }
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("stratus-threads-\(pid)-\(UUID().uuidString.prefix(8)).txt")
        defer { try? FileManager.default.removeItem(at: output) }
        guard let run = try? ChildProcess(gdb, ["-p", String(pid), "-batch", "-nx", "-ex", "thread apply all bt 30"],
                                          stdout: output, stderr: URL(fileURLWithPath: "/dev/null")) else { return "(gdb could not be started)\n" }
        return run.waitBlocking().stdout
    }

    private typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, Int32) -> Int32
    private typealias ChangeDirectory = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, UnsafePointer<CChar>?) -> Int32
    private static let closeFrom: CloseFrom? = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np").map { unsafeBitCast($0, to: CloseFrom.self) }
    private static let changeDirectory: ChangeDirectory? = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addchdir_np").map { unsafeBitCast($0, to: ChangeDirectory.self) }

    /// Starts `path` with its output in new files in `directory`.
    public convenience init(_ path: String, _ arguments: [String], in directory: URL, environment: [String: String]? = nil) throws {
        let id = UUID().uuidString.prefix(8)
        try self.init(path, arguments, stdout: directory.appendingPathComponent("out-\(id).txt"),
                      stderr: directory.appendingPathComponent("err-\(id).txt"), environment: environment)
    }

    public var isRunning: Bool { state.withLock { $0.waitStatus == nil } }

    public func signal(_ number: Int32) {
        // A pid is only reused after it was waited for: never signal once the program ended.
        state.withLock { s in if s.waitStatus == nil { _ = Glibc.kill(pid, number) } }
    }

    /// Sends SIGKILL, as a crash or `kill -9` would end it.
    public func kill() { signal(SIGKILL) }

    /// Suspends until the program ended (without blocking a thread).
    public func wait() async -> Status {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ended = state.withLock { s in
                if s.waitStatus == nil { s.waiters.append(continuation) }
                return s.waitStatus != nil
            }
            if ended { continuation.resume() }
        }
        return status()
    }

    /// Blocks the calling thread until the program ended; for loops on their own thread.
    public func waitBlocking() -> Status {
        ended.wait()
        ended.signal()
        return status()
    }

    private func status() -> Status {
        let read = { (url: URL) in String(decoding: FileManager.default.contents(atPath: url.path) ?? Data(), as: UTF8.self) }
        let raw = state.withLock { $0.waitStatus } ?? 0
        // A wait status: a signal in the low seven bits, else the exit code in the second byte.
        let signalNumber = raw & 0x7f
        return Status(exitCode: signalNumber != 0 ? signalNumber : (raw >> 8) & 0xff, killed: signalNumber != 0,
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

    /// A program could not be started.
    public struct ChildProcessError: Error, CustomStringConvertible {
        public let message: String
        public var description: String { message }
    }

    public struct MissingExecutable: Error, CustomStringConvertible {
        public let message: String
        public var description: String { message }
    }

    /// Runs `body` on its own thread, outside Swift's cooperative pool: blocking code (a
    /// synchronous tool waiting for its operations) holds none of the pool's few threads, and a
    /// timing-sensitive loop (killing a process just after it wrote) is not held up by other
    /// tests that occupy them.
    public static func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try body() }) }.start()
        }
    }
}
