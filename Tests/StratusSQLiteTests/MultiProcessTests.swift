import Foundation
@_spi(StratusEngine) import Stratus
import StratusSQLite
import StratusTestSupport
import Synchronization
import Testing

// Many processes on one store: writer processes (`stress counter`, `stratus import`) with a
// reader in this process, a write lock held by the `sqlite3` shell, and processes opening a
// store at the same time. The long version is scripts/soak-writers.

// MARK: - Programs

/// The package's executables and the `sqlite3` shell, run as separate processes.
enum StoreProcess {
    /// The `sqlite3` shell on the PATH, or `nil`.
    static let sqlite3: String? = {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/sqlite3" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }()

    /// Runs a program to its end.
    static func run(_ path: String, _ arguments: [String], in directory: URL) async throws -> ChildProcess.Status {
        await (try ChildProcess(path, arguments, in: directory)).wait()
    }

    /// Runs `sql` on a store through the `sqlite3` shell, which waits up to 10 s for a lock as
    /// Stratus does: a store's last connection, closing after a test let it go, briefly locks
    /// the file while it copies the log back, and the shell gives up at once by default.
    static func runSQL(_ shell: String, _ storePath: String, _ sql: String, in directory: URL) async throws -> ChildProcess.Status {
        try await run(shell, ["-cmd", ".timeout 10000", storePath, sql], in: directory)
    }

    /// `PRAGMA integrity_check` through the `sqlite3` shell (a process that never saw the
    /// store before, so it also recovers the WAL of a killed writer).
    static func integrityCheck(_ storePath: String, in directory: URL) async throws -> String {
        let shell = try #require(sqlite3, "the sqlite3 shell is needed (apt-get install sqlite3)")
        let status = try await runSQL(shell, storePath, "PRAGMA integrity_check;", in: directory)
        return (status.stdout + status.stderr).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The `sqlite3` shell holding a write transaction (`BEGIN IMMEDIATE`) on a store until
    /// ``release()``, or until the test process is gone.
    struct LockHolder {
        let process: ChildProcess
        let releaseFile: String

        /// Ends the transaction (COMMIT) and waits for the shell to exit.
        func release() async -> ChildProcess.Status {
            _ = FileManager.default.createFile(atPath: releaseFile, contents: nil)
            return await process.wait()
        }
    }

    /// Starts the `sqlite3` shell holding a read transaction (a snapshot) on a store, and
    /// returns once it holds it: checkpoints cannot pass it, so what is written meanwhile stays
    /// in the log.
    static func holdReadSnapshot(_ storePath: String, in directory: URL) async throws -> LockHolder {
        try await holdTransaction(storePath, opening: "BEGIN;\\nSELECT count(*) FROM records;", what: "a snapshot", in: directory)
    }

    /// Starts the `sqlite3` shell holding the store's write lock, and returns once it holds it.
    static func holdWriteLock(_ storePath: String, in directory: URL) async throws -> LockHolder {
        try await holdTransaction(storePath, opening: "BEGIN IMMEDIATE;", what: "the write lock", in: directory)
    }

    /// Starts the `sqlite3` shell running `opening` (statements for `printf`) and holding the
    /// transaction it began until released, and returns once the shell holds it.
    private static func holdTransaction(_ storePath: String, opening: String, what: String, in directory: URL) async throws -> LockHolder {
        let shell = try #require(sqlite3, "the sqlite3 shell is needed (apt-get install sqlite3)")
        let id = UUID().uuidString.prefix(8)
        let marker = directory.appendingPathComponent("held-\(id)").path
        let release = directory.appendingPathComponent("release-\(id)").path
        // Held until released, or until this test process is gone: never for a fixed time, which
        // a loaded machine can outlast before the test has looked. The shell stops (.bail) rather
        // than mark the transaction taken when its first statement failed.
        let script = """
            (printf '.timeout 10000\\n.bail on\\n\(opening)\\n.shell touch \(marker)\\n'; while [ ! -e '\(release)' ] && kill -0 \(getpid()) 2>/dev/null; do sleep 0.05; done; \
             printf 'COMMIT;\\n') | '\(shell)' '\(storePath)' > /dev/null
            """
        let holder = LockHolder(process: try ChildProcess("/bin/sh", ["-c", script], in: directory), releaseFile: release)
        let start = ContinuousClock.now
        while !FileManager.default.fileExists(atPath: marker) {
            if ContinuousClock.now - start > .seconds(300) || !holder.process.isRunning {
                let status = await holder.release()
                throw StratusError(.internalError, "the sqlite3 shell did not take \(what): \(status.stderr)")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        return holder
    }

    /// An environment variable as a number, for the long versions in scripts/.
    static func setting(_ name: String, default value: Int) -> Int {
        ProcessInfo.processInfo.environment[name].flatMap(Int.init) ?? value
    }

    /// The lines of a file written by a process (missing file: none).
    static func lines(_ path: String) -> [String] {
        String(decoding: FileManager.default.contents(atPath: path) ?? Data(), as: UTF8.self).split(separator: "\n").map(String.init)
    }

    /// A JSON object from one line of output.
    static func object(_ line: String) -> [String: Any]? {
        (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
    }
}

/// Lets threads start at the same moment: they spin until the gate opens.
final class StartGate: Sendable {
    private let isOpen = Atomic<Bool>(false)
    func open() { isOpen.store(true, ordering: .releasing) }
    func waitSpinning() { while !isOpen.load(ordering: .acquiring) { sched_yield() } }
}

/// A thread that measures how long each read of the store takes while others write.
final class LatencyProbe: @unchecked Sendable {
    // @unchecked: the thread only reads `stopFlag` and writes `state`, both behind locks.
    private let stopFlag = Mutex(false)
    private let state = Mutex<(reads: Int, maximum: Duration, errors: [String], counterValues: [Int64])>((0, .zero, [], []))
    private let done = DispatchSemaphore(value: 0)

    /// Starts reading `counter` and a page of `type` over and over on its own engine.
    init(storePath: String, context: DatabaseContext, counter: Record.ID, type: String) throws {
        let engine = try SQLiteEngine(path: storePath)
        let query = try CompiledQuery(Query(recordType: type), zoneID: .default, desiredKeys: [])
        Thread { [self] in
            while !stopFlag.withLock({ $0 }) {
                let start = ContinuousClock.now
                do {
                    let found = try engine.fetchRecords([counter], in: context)
                    _ = try engine.queryRecords(query, in: context, after: nil, limit: 100)
                    let elapsed = ContinuousClock.now - start
                    let value: Int64? = if case .int64(let n)? = found[counter]?.fieldValue(forKey: "n") { n } else { nil }
                    state.withLock { s in
                        s.reads += 1
                        s.maximum = max(s.maximum, elapsed)
                        if let value { s.counterValues.append(value) }
                    }
                } catch {
                    state.withLock { $0.errors.append("\(error)") }
                }
                usleep(2_000)
            }
            done.signal()
        }.start()
    }

    /// Stops the thread and returns what it measured.
    func stop() async -> (reads: Int, maximum: Duration, errors: [String], counterValues: [Int64]) {
        stopFlag.withLock { $0 = true }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async { [done] in
                done.wait()
                continuation.resume()
            }
        }
        return state.withLock { $0 }
    }
}

@Suite("Many processes on one store", .timeLimit(.minutes(StoreProcess.setting("STRATUS_SOAK_SECONDS", default: 4) / 60 + 30)))
struct MultiProcessTests {
    static let container = "com.example.stress"
    static var context: DatabaseContext { DatabaseContext(containerIdentifier: container, scope: .public, userName: "tester") }

    /// CloudKit record JSON for `count` records of `type` named `<prefix>-<i>`.
    static func ndjson(type: String, prefix: String, count: Int) -> String {
        var text = ""
        for i in 0..<count {
            text += #"{"recordName":"\#(prefix)-\#(i)","recordType":"\#(type)","fields":{"n":{"value":\#(i),"type":"INT64"},"s":{"value":"grüße \#(prefix) \#(i)","type":"STRING"},"d":{"value":\#(Double(i) / 4),"type":"DOUBLE"}}}"#
            text += "\n"
        }
        return text
    }

    @Test("writer processes (read-modify-write loops and imports) lose no update, and a reader is never refused")
    func writersLoseNoUpdate() async throws {
        let stress = try ChildProcess.builtExecutable("stress")
        let stratus = try ChildProcess.builtExecutable("stratus")
        let seconds = StoreProcess.setting("STRATUS_SOAK_SECONDS", default: 4)
        let writerCount = StoreProcess.setting("STRATUS_SOAK_WRITERS", default: 3)
        let importerCount = StoreProcess.setting("STRATUS_SOAK_IMPORTERS", default: 2)
        let recordsPerFile = 2_000
        try await TemporaryStore.with(prefix: "stratus-soak") { store in
            let path = store.path()
            // The store exists before the writers start (opening a new store at once is its own test).
            _ = try SQLiteEngine(path: path)
            let counterID = Record.ID(recordName: "counter")
            let probe = try LatencyProbe(storePath: path, context: Self.context, counter: counterID, type: "Imported")
            let start = ContinuousClock.now

            var writers: [ChildProcess] = []
            for w in 0..<writerCount {
                writers.append(try ChildProcess(stress, [
                    "counter", "--store", path, "--container", Self.container, "--writer", "w\(w)",
                    "--seconds", "\(seconds)", "--log", store.path("w\(w).log"), "--seed", "\(w + 1)",
                ], in: store.directory))
            }
            // Importers run files one after another for as long as the counters run.
            let imported = try await withThrowingTaskGroup(of: (importer: Int, files: Int, failures: [String]).self) { group in
                for i in 0..<importerCount {
                    group.addTask {
                        var files = 0
                        var failures: [String] = []
                        while ContinuousClock.now - start < .seconds(seconds) || files == 0 {
                            let input = store.path("import-\(i)-\(files).ndjson")
                            try Self.ndjson(type: "Imported", prefix: "i\(i)f\(files)", count: recordsPerFile).write(toFile: input, atomically: true, encoding: .utf8)
                            let status = try await StoreProcess.run(stratus, [
                                "import", input, "--store", path, "--container", Self.container, "--batch-size", "100", "--quiet",
                            ], in: store.directory)
                            if status.exitCode != 0 { failures.append("import \(i)/\(files) exited \(status.exitCode): \(status.stderr.prefix(500))") }
                            files += 1
                        }
                        return (i, files, failures)
                    }
                }
                var total = (files: 0, filesPerImporter: [Int](repeating: 0, count: importerCount), failures: [String]())
                for try await result in group {
                    total.files += result.files
                    total.filesPerImporter[result.importer] = result.files
                    total.failures += result.failures
                }
                return total
            }
            var increments = 0, conflicts = 0
            var won: [Int64] = []
            for (w, writer) in writers.enumerated() {
                let status = await writer.wait()
                #expect(status.exitCode == 0 && !status.killed, "writer w\(w) exited \(status.exitCode): \(status.stderr.prefix(1_000))")
                let summary = try #require(status.stdout.split(separator: "\n").last.flatMap { StoreProcess.object(String($0)) }, "writer w\(w) printed no summary")
                increments += summary["increments"] as? Int ?? 0
                conflicts += summary["conflicts"] as? Int ?? 0
                won += StoreProcess.lines(store.path("w\(w).log")).compactMap { Int64($0) }
            }
            let elapsed = ContinuousClock.now - start
            let measured = await probe.stop()
            #expect(imported.failures.isEmpty, "\(imported.failures)")

            // No lost update: the final value is the number of successful saves, and each value
            // from 1 to it was won by exactly one save of one writer.
            let engine = try SQLiteEngine(path: path)
            let counter = try #require(try engine.fetchRecords([counterID], in: Self.context)[counterID], "the counter record exists")
            #expect(counter.fieldValue(forKey: "n") == .int64(Int64(increments)), "final counter vs successful increments")
            #expect(won.count == increments)
            #expect(won.sorted() == (0..<Int64(increments)).map { $0 + 1 }, "each value was won exactly once")
            // How often the writers collided depends on the machine's load; it is reported, not asserted.
            #expect(increments > 0, "the writers wrote")

            // Every imported record is there, file by file.
            var missing = 0
            for (importer, files) in imported.filesPerImporter.enumerated() {
                for file in 0..<files {
                    let ids = (0..<recordsPerFile).map { Record.ID(recordName: "i\(importer)f\(file)-\($0)") }
                    let found = try engine.fetchRecords(ids, in: Self.context)
                    missing += ids.count - found.count
                    for (i, id) in ids.enumerated() where found[id]?.fieldValue(forKey: "n") != .int64(Int64(i)) && found[id] != nil {
                        Issue.record("\(id.recordName) holds \(String(describing: found[id]?.fieldValues))")
                    }
                }
            }
            #expect(missing == 0, "\(missing) imported records are missing")

            // The reader was never refused (a reader the writers blocked would fail with zoneBusy
            // after the busy timeout) and saw the counter only grow. Its latency is reported below,
            // not asserted: a loaded machine may be slow without anything being wrong.
            #expect(measured.errors.isEmpty, "reader errors: \(measured.errors.prefix(3))")
            #expect(measured.reads > 0)
            #expect(measured.counterValues == measured.counterValues.sorted(), "the reader saw the counter go back")

            let wall = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            let writes = increments + imported.files * recordsPerFile
            print(String(format: "soak-writers: %d counter writers + %d importers for %.1f s: %d increments (%.0f/s), %d conflicts detected and merged, 0 lost; %d records imported in %d files; %d writes in all (%.0f/s); reader: %d reads, max latency %.3f s",
                         writerCount, importerCount, wall, increments, Double(increments) / wall, conflicts, imported.files * recordsPerFile, imported.files,
                         writes, Double(writes) / wall, measured.reads, Double(measured.maximum.components.attoseconds) / 1e18 + Double(measured.maximum.components.seconds)))
        }
    }

    @Test("a write lock held by another process: zoneBusy after the busy timeout, retried per policy, 'after N attempts'; reads go on")
    func busyStoreIsRetried() async throws {
        try await TemporaryStore.with(prefix: "stratus-busy") { store in
            let path = store.path()
            let engine = try SQLiteEngine(path: path, busyTimeout: .milliseconds(100))
            let database = Container(identifier: Self.container, engine: engine, userName: "tester",
                                     retryPolicy: RetryPolicy(maximumAttempts: 3, initialDelay: 0.01, maximumDelay: 0.05)).publicCloudDatabase
            try await database.save(makeRecord("Item", "before", ["n": .int64(1)]))

            let holder = try await StoreProcess.holdWriteLock(path, in: store.directory)

            // The engine waits its busy timeout, then answers zoneBusy with retryAfter.
            do {
                try writeNewRecord("engine", through: engine, in: database.context)
                Issue.record("a write succeeded while another process held the write lock")
            } catch let error as StratusError {
                #expect(error.code == .zoneBusy)
                #expect(error.retryAfterSeconds != nil)
            }

            // The operation retries 3 times and says so. Its request timeout is minutes: the
            // default 60 s, run out by a starved machine, would end it as networkFailure first.
            let patientRequests = Operation.Configuration()
            patientRequests.timeoutIntervalForRequest = 900
            let error = stratusError(await caughtError {
                try await database.configuredWith(configuration: patientRequests) { try await $0.save(makeRecord("Item", "op")) }
            })
            #expect(error?.code == .zoneBusy)
            #expect(error?.message.contains("after 3 attempts") == true, "\(String(describing: error))")

            // Reads are not blocked by the writer: a blocked read would fail with zoneBusy.
            #expect(try await database.record(for: Record.ID(recordName: "before")).fieldValue(forKey: "n") == .int64(1))

            // A patient policy outlasts the lock (released after 1 s) and writes once. Its bounds
            // are minutes (each attempt waits at most 0.1 s busy + 0.2 s): 100 attempts, or the
            // default 60 s request timeout, could run out before a loaded machine gets round to
            // the release below, and the save would fail although nothing is wrong.
            let patient = ModifyRecordsOperation(recordsToSave: [makeRecord("Item", "patient")])
            patient.retryPolicy = RetryPolicy(maximumAttempts: 3_000, initialDelay: 0.05, maximumDelay: 0.2)
            patient.configuration.timeoutIntervalForRequest = 900
            let final = Box<Result<Void, any Error>?>(nil)
            patient.modifyRecordsResultBlock = { final.value = $0 }
            database.add(patient)
            try await Task.sleep(for: .seconds(1))
            // Sound however long the sleep took: the lock is held until the release below, so the
            // save cannot succeed, and it cannot run out of attempts in less than 15 minutes.
            #expect(final.value == nil, "the patient save finished while the lock was held")
            // Cancelled while it waits for the store: operationCancelled, never the transient
            // zoneBusy a retry loop would act on (it cannot have finished otherwise: the lock
            // is held, and its attempts last minutes).
            let cancelled = ModifyRecordsOperation(recordsToSave: [makeRecord("Item", "cancelled")])
            cancelled.retryPolicy = patient.retryPolicy
            cancelled.configuration.timeoutIntervalForRequest = 900
            let cancelledFinal = Box<Result<Void, any Error>?>(nil)
            cancelled.modifyRecordsResultBlock = { cancelledFinal.value = $0 }
            database.add(cancelled)
            try await Task.sleep(for: .milliseconds(300))
            cancelled.cancel()
            await waitUntilFinished([cancelled])
            if case .failure(let error as StratusError)? = cancelledFinal.value {
                let code = error.code == .partialFailure ? error.partialErrorsByRecordID.values.first?.code : error.code
                #expect(code == .operationCancelled, "\(error)")
            } else {
                Issue.record("the cancelled save did not fail: \(String(describing: cancelledFinal.value))")
            }

            let status = await holder.release()
            await waitUntilFinished([patient])
            if case .failure(let error)? = final.value { Issue.record("the patient save failed: \(error)") }
            #expect(status.exitCode == 0, "sqlite3: \(status.stderr)")
            #expect(try await TestDatabase.exists("patient", in: database))
            #expect(try await TestDatabase.exists("op", in: database) == false)
            #expect(try await TestDatabase.exists("engine", in: database) == false)
            #expect(try await TestDatabase.exists("cancelled", in: database) == false)
        }
    }

    @Test("a store restored (a backup copied over its file, its log removed) while this process had it open: the log fold at exit leaves the restored store as it was")
    func foldAfterRestoreKeepsTheRestore() async throws {
        let stratus = try ChildProcess.builtExecutable("stratus")
        try await TemporaryStore.with(prefix: "stratus-fold-restore") { store in
            let path = store.path()
            func records(_ prefix: String, _ value: Int) -> String {
                (0..<200).map { #"{"recordName":"r\#($0)","recordType":"Item","fields":{"n":{"value":\#(value)}}}"# }.joined(separator: "\n") + "\n"
            }
            let first = try store.writeFile("first.ndjson", Data(records("r", 1).utf8)).path
            let second = try store.writeFile("second.ndjson", Data(records("r", 2).utf8)).path
            #expect(try await StoreProcess.run(stratus, ["import", first, "--store", path, "--quiet"], in: store.directory).exitCode == 0)
            // The backup: the file alone is whole once the import exited.
            let backup = try Data(contentsOf: URL(fileURLWithPath: path))
            // This process has the store open from before the restore, as a running watch has.
            let follower = try SQLiteEngine.shared(path: path)
            // Writes that stay in the log: a reader's snapshot keeps checkpoints from passing.
            let reader = try await StoreProcess.holdReadSnapshot(path, in: store.directory)
            #expect(try await StoreProcess.run(stratus, ["import", second, "--store", path, "--mode", "forceReplace", "--quiet"], in: store.directory).exitCode == 0)
            _ = await reader.release()

            // The restore: the backup's bytes over the file (the same inode), the log removed.
            let handle = try #require(FileHandle(forWritingAtPath: path))
            try handle.truncate(atOffset: 0)
            try handle.write(contentsOf: backup)
            try handle.close()
            for suffix in ["-wal", "-shm"] { unlink(path + suffix) }
            SQLiteEngine.foldLogsOfOpenStores()
            withExtendedLifetime(follower) {}

            let shell = try #require(StoreProcess.sqlite3)
            let values = try await StoreProcess.runSQL(shell, path, "SELECT count(*), sum(json_extract(fields, '$.n[1]')) FROM records WHERE record_type = 'Item';", in: store.directory)
            #expect(values.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "200|200", "the restored store, not the replaced one's log: \(values.stdout) \(values.stderr)")
        }
    }

    @Test("a process opens the store and reads while another process holds a long write transaction")
    func openWhileAnotherWrites() async throws {
        try await TemporaryStore.with(prefix: "stratus-open-busy") { store in
            let path = store.path()
            do {
                let database = Container(identifier: Self.container, engine: try SQLiteEngine(path: path), userName: "tester").publicCloudDatabase
                try await database.save(makeRecord("Item", "present", ["n": .int64(7)]))
            }
            let holder = try await StoreProcess.holdWriteLock(path, in: store.directory)
            // The lock is held until released below, so an open or read that waited for it would
            // fail with zoneBusy: success is the outcome that shows it did not wait.
            let outcome: Result<FieldValue?, any Error> = Result {
                let engine = try SQLiteEngine(path: path)
                return try engine.fetchRecords([Record.ID(recordName: "present")], in: Self.context)[Record.ID(recordName: "present")]?.fieldValue(forKey: "n")
            }
            switch outcome {
            case .success(let value): #expect(value == .int64(7))
            case .failure(let error): Issue.record("opening the store to read failed while another process writes: \(error)")
            }
            _ = await holder.release()
        }
    }

    @Test("many engines opening a new store at the same moment all open it")
    func simultaneousOpensOfANewStore() async throws {
        let rounds = StoreProcess.setting("STRATUS_OPEN_ROUNDS", default: 40), threads = 8
        var failures: [String] = []
        for round in 0..<rounds {
            try await TemporaryStore.with(prefix: "stratus-open") { store in
                let path = store.path()
                let errors = Box<[String]>([])
                let group = DispatchGroup()
                let gate = StartGate()
                for _ in 0..<threads {
                    group.enter()
                    Thread {
                        gate.waitSpinning()
                        do {
                            // A busy timeout of minutes: eight threads making and writing one
                            // store on a starved machine may wait longer than the default 5 s for
                            // each other, which is not what is tested. SQLITE_BUSY that SQLite
                            // answers at once, without its busy handler (a new file switched to
                            // WAL), still fails the test unless the engine retries it.
                            let engine = try SQLiteEngine(path: path, busyTimeout: .seconds(120))
                            try writeNewRecord(UUID().uuidString, through: engine, in: Self.context)
                        } catch {
                            errors.update { $0.append("\(error)") }
                        }
                        group.leave()
                    }.start()
                }
                try await Task.sleep(for: .milliseconds(20))
                gate.open()
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    group.notify(queue: .global()) { continuation.resume() }
                }
                failures += errors.value.map { "round \(round): \($0)" }
            }
        }
        #expect(failures.isEmpty, "\(failures.count) of \(rounds * threads) opens failed, e.g. \(failures.prefix(3))")
    }

    @Test("processes started at the same moment on a new store all run")
    func simultaneousProcessesOnANewStore() async throws {
        let stress = try ChildProcess.builtExecutable("stress")
        let rounds = StoreProcess.setting("STRATUS_OPEN_ROUNDS", default: 8), processes = 4
        var failures: [String] = []
        for round in 0..<rounds {
            try await TemporaryStore.with(prefix: "stratus-open-proc") { store in
                var running: [ChildProcess] = []
                for w in 0..<processes {
                    running.append(try ChildProcess(stress, ["counter", "--store", store.path(), "--container", Self.container, "--writer", "w\(w)", "--increments", "3"], in: store.directory))
                }
                for process in running {
                    let status = await process.wait()
                    if status.exitCode != 0 { failures.append("round \(round): exit \(status.exitCode): \(status.stderr.prefix(300))") }
                }
            }
        }
        #expect(failures.isEmpty, "\(failures.count) of \(rounds * processes) processes failed, e.g. \(failures.prefix(3))")
    }
}

/// Writes one new `Item` record straight through an engine's write transaction, below the
/// operations (which would retry a busy store).
private func writeNewRecord(_ name: String, through engine: SQLiteEngine, in context: DatabaseContext) throws {
    let now = Date()
    let system = Record.SystemFields(creationDate: now, modificationDate: now, creatorUserRecordID: context.userRecordID,
                                     lastModifiedUserRecordID: context.userRecordID, recordChangeTag: "t1")
    let row = RecordRow(recordID: Record.ID(recordName: name), recordType: "Item", systemFields: system, fields: [:], encryptedKeys: [], parent: nil,
                        document: Array(FieldDocument.encode([:]).utf8))
    try engine.writeRecords(in: context) { transaction in
        _ = try transaction.zoneCapabilities(.default)
        _ = try transaction.insertNewRecords([row])
    }
}
