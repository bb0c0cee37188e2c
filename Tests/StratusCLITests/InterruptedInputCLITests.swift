import Foundation
import StratusTestSupport
import Testing

/// A cron job's `timeout` sends one SIGTERM: `stratus import` must stop on it (exit 143, what
/// it committed kept, nothing after it written) also while its input never ends a record or
/// never says anything.
@Suite("stratus import stops on one SIGTERM, whatever its input does", .timeLimit(.minutes(30)))
struct InterruptedInputCLITests {
    /// How many bytes the process has read through read(2) and its kin, from `/proc/PID/io`.
    static func bytesRead(by pid: Int32) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/io", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("rchar:") {
            return Int(line.dropFirst(6).trimmingCharacters(in: .whitespaces))
        }
        return nil
    }

    /// Sends SIGTERM once `ready` holds, then waits for the end; a process that is still
    /// running long after the signal is killed, so that a failure shows instead of a hang.
    static func terminate(_ running: CLI.Running, when ready: @escaping @Sendable () -> Bool) async throws -> (ready: Bool, stoppedBySIGTERM: Bool) {
        let (sawReady, stopped) = try await ChildProcess.onOwnThread { () -> (Bool, Bool) in
            while running.isRunning && !ready() { usleep(10_000) }
            guard running.isRunning else { return (false, false) }
            running.signal(SIGTERM)
            // Minutes, not the 60 s of sleeps a loaded machine could spend finishing the batch
            // at hand: only an import that ignores the signal should reach the bound.
            let deadline = ContinuousClock.now + .seconds(240)
            while running.isRunning && ContinuousClock.now < deadline { usleep(10_000) }
            let stopped = !running.isRunning
            if !stopped { running.signal(SIGKILL) }
            return (true, stopped)
        }
        return (sawReady, stopped)
    }

    @Test("an endless line: one SIGTERM ends the import with 143 (/dev/zero itself is binary input, refused at once)", arguments: TestEngine.all)
    func endlessLine(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            try await cli.createStore()
            let zero = try await cli.run(["import", "/dev/zero"])
            #expect(zero.exitCode == 65 && zero.stderr.contains("binary data"), "\(zero)")
            // A line of text that never ends: a FIFO fed 'a' for ever.
            let fifo = store.path("endless.fifo")
            try #require(mkfifo(fifo, 0o600) == 0)
            let feeder = try ChildProcess("/bin/sh", ["-c", "tr '\\000' a < /dev/zero > '\(fifo)'"], in: store.directory)
            defer { feeder.kill() }
            let running = try cli.start(["import", fifo])
            let pid = running.pid
            // 32 MiB read: past the store's opening and the reader's first look, in the line.
            let (ready, stopped) = try await Self.terminate(running) { (Self.bytesRead(by: pid) ?? 0) > 32 << 20 }
            let result = await running.wait()
            try #require(ready, "the import ended before it read the endless line: \(result)")
            #expect(stopped, "one SIGTERM did not stop the import: \(result)")
            #expect(!result.signalled && result.exitCode == 143, "\(result)")
            #expect(result.stderr.contains("stopped"), "\(result)")
        }
    }

    @Test("a silent pipe after a committed record: one SIGTERM ends the import with 143, the record kept", arguments: TestEngine.all)
    func silentPipe(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            try await cli.createStore()
            let fifo = store.path("feed.fifo")
            try #require(mkfifo(fifo, 0o600) == 0)
            // Held open for writing (O_RDWR does not wait for a reader), so the import's input
            // stays open and silent after its one record.
            let writer = open(fifo, O_RDWR | O_CLOEXEC)
            try #require(writer >= 0)
            defer { close(writer) }
            let line = #"{"recordName":"first","recordType":"Note","fields":{"title":{"value":"kept","type":"STRING"}}}"# + "\n"
            try #require(line.utf8.withContiguousStorageIfAvailable { write(writer, $0.baseAddress, $0.count) } == line.utf8.count)

            let running = try cli.start(["import", fifo, "--batch-size", "1"])
            let countCommand = [cli.executable, "count", "--type", "Note"]
            let environment = cli.environment
            let directory = store.directory
            let (ready, stopped) = try await Self.terminate(running) {
                // The record is committed: the import reads on, from a pipe that says nothing.
                guard let child = try? ChildProcess(countCommand[0], Array(countCommand.dropFirst()), stdout: directory.appendingPathComponent("count.out"),
                                                    stderr: directory.appendingPathComponent("count.err"), stdin: nil, directory: directory, environment: environment)
                else { return false }
                return child.waitBlocking().stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "1"
            }
            let result = await running.wait()
            try #require(ready, "the import ended before its record was committed: \(result)")
            #expect(stopped, "one SIGTERM did not stop the import: \(result)")
            #expect(!result.signalled && result.exitCode == 143, "\(result)")
            #expect(result.stderr.contains("imported 1,"), "\(result)")
            #expect(try await cli.count("Note") == 1)
        }
    }
}
