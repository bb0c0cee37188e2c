import Foundation
@_spi(StratusEngine) import Stratus
import StratusPostgres
import StratusTestSupport
import Testing

/// What `stratus` does when the server fails it: exit codes that say what to do, no password
/// in any message, and no half-written batch after a crash or a dropped connection.
@Suite("PostgreSQL faults", .requiresPostgres, .timeLimit(.minutes(30)))
struct PostgresFaultTests {
    static func input(_ count: Int, in store: TemporaryStore) throws -> String {
        var text = ""
        for i in 0..<count {
            text += "{\"recordName\":\"r-\(i)\",\"recordType\":\"Item\",\"fields\":{\"n\":{\"value\":\(i),\"type\":\"INT64\"},\"label\":{\"value\":\"item \(i)\",\"type\":\"STRING\"}}}\n"
        }
        return try store.writeFile("input.ndjson", Data(text.utf8)).path
    }

    static func stratus(_ arguments: [String], in store: TemporaryStore, environment: [String: String] = [:]) throws -> ChildProcess {
        // A connect timeout of minutes, not 3 s: a loaded machine can take seconds to start a
        // backend (the re-runs after a crash or a dropped connection must connect), while the
        // servers these tests find gone refuse at once (a closed port, a removed socket).
        try ChildProcess(try ChildProcess.builtExecutable("stratus"), arguments, in: store.directory,
                         environment: ["STRATUS_USER": "tester", "PGCONNECT_TIMEOUT": "120"].merging(environment) { $1 })
    }

    /// Records in the store, and the sum of their `n` (each record once, with its value).
    static func contents(_ url: String) throws -> (count: Int64, sum: Int64) {
        let row = try PostgresConnection(url: url).query("SELECT count(*), coalesce(sum((fields->'n'->>1)::int8), 0)::int8 FROM records WHERE record_type = 'Item'")[0]
        return (try row.int64(0) ?? -1, try row.int64(1) ?? -1)
    }

    @Test("an operation cancelled, or past its resource timeout, while its statement waits for another transaction's lock stops then, with operationCancelled or the timeout, and writes nothing")
    func cancelledWhileWaitingOnALock() async throws {
        let database = try PostgresTestServer.makeDatabase()
        let container = try Container(identifier: "com.example.locks", postgresURL: database.url, userName: "alice")
        let records = container.publicCloudDatabase
        _ = try await records.save(makeRecord("Item", "before"))
        // Another session holds the records table until the test ends it.
        let holder = try PostgresConnection(url: database.url)
        try holder.executeScript("BEGIN; LOCK TABLE records IN ACCESS EXCLUSIVE MODE")

        let query = QueryOperation(query: Query(recordType: "Item"))
        let queried = Box<Result<QueryOperation.Cursor?, any Error>?>(nil)
        query.queryResultBlock = { queried.value = $0 }
        let save = ModifyRecordsOperation(recordsToSave: [makeRecord("Item", "timed-out")])
        save.configuration.timeoutIntervalForResource = 1
        let saved = Box<Result<Void, any Error>?>(nil)
        save.modifyRecordsResultBlock = { saved.value = $0 }
        // A save item by item (not atomic), cancelled while it waits: the whole operation ends
        // cancelled, not a partial failure spread over its items.
        let loose = ModifyRecordsOperation(recordsToSave: [makeRecord("Item", "loose-1"), makeRecord("Item", "loose-2")])
        loose.isAtomic = false
        let looseResult = Box<Result<Void, any Error>?>(nil)
        loose.modifyRecordsResultBlock = { looseResult.value = $0 }
        records.add(query)
        records.add(save)
        records.add(loose)
        try await Task.sleep(for: .milliseconds(300))
        query.cancel()
        loose.cancel()
        // All end while the lock is still held (or the suite's limit says they never did).
        await waitUntilFinished([query, save, loose])
        try holder.executeScript("ROLLBACK")

        if case .failure(let error as StratusError)? = queried.value {
            #expect(error.code == .operationCancelled, "\(error)")
        } else {
            Issue.record("the cancelled query did not fail: \(String(describing: queried.value))")
        }
        if case .failure(let error as StratusError)? = saved.value {
            let code = error.code == .partialFailure ? error.partialErrorsByRecordID.values.first?.code : error.code
            #expect(code == .networkFailure, "the resource timeout: \(error)")
        } else {
            Issue.record("the timed-out save did not fail: \(String(describing: saved.value))")
        }
        if case .failure(let error as StratusError)? = looseResult.value {
            #expect(error.code == .operationCancelled, "\(error)")
        } else {
            Issue.record("the cancelled save did not fail: \(String(describing: looseResult.value))")
        }
        #expect(try await TestDatabase.exists("loose-1", in: records) == false)
        #expect(try await TestDatabase.exists("timed-out", in: records) == false, "nothing of the timed-out save was written")
        #expect(try await TestDatabase.exists("before", in: records))
    }

    @Test("an export cancelled while its read waits for another transaction's lock stops then, as cancelled, not when the lock is released (found by an operator tester: a cron job's timeout waited for the lock)")
    func exportCancelledWhileWaitingOnALock() async throws {
        let database = try PostgresTestServer.makeDatabase()
        let container = try Container(identifier: "com.example.locks", postgresURL: database.url, userName: "alice")
        let records = container.publicCloudDatabase
        _ = try await records.modifyRecords(saving: (0..<3).map { makeRecord("Item", "i\($0)") }, deleting: [])
        // Another session holds the records table; it lets go when told, or at last in any
        // case, so that a read that does not stop ends the test (failed).
        let url = database.url
        let (locked, released) = (Box<Bool>(false), Box<Bool>(false))
        let holding = Task {
            let holder = try PostgresConnection(url: url)
            try holder.executeScript("BEGIN; LOCK TABLE records IN ACCESS EXCLUSIVE MODE")
            locked.value = true
            if (try? await Task.sleep(for: .seconds(120))) != nil { released.value = true }
            try holder.executeScript("ROLLBACK")
        }
        for _ in 0..<3_000 where !locked.value { try await Task.sleep(for: .milliseconds(20)) }
        if !locked.value { try await holding.value }
        try #require(locked.value, "the lock was not taken")
        final class Collected: RecordSink {
            var names: [String] = []
            func write(_ record: Record) throws { names.append(record.recordID.recordName) }
        }
        let exporter = RecordExporter(database: records, query: Query(recordType: "Item"))
        let running = Task { try await exporter.run(into: Collected()) }
        try await Task.sleep(for: .milliseconds(500))
        exporter.cancel()
        let summary = try await running.value
        let endedBeforeRelease = !released.value
        holding.cancel()
        try await holding.value
        #expect(endedBeforeRelease, "the export ended only when the lock was released")
        #expect(summary.end == .cancelled && summary.exported == 0, "\(summary)")
    }

    @Test("an unreachable server is exit 75 naming host and port, without the password")
    func unreachable() async throws {
        try await TemporaryStore.with { store in
            let status = try await Self.stratus(["count", "--type", "Item", "--store", "postgresql://bob:s3cret-pw@127.0.0.1:1/app"], in: store).wait()
            #expect(status.exitCode == 75, "\(status.stderr)")
            #expect(status.stderr.contains("127.0.0.1:1"), "the message names the server: \(status.stderr)")
            #expect(status.stderr.contains("Connection refused. Is the server running"), "libpq's reason and its hint read as two sentences: \(status.stderr)")
            #expect(!status.stderr.contains("s3cret-pw") && !status.stdout.contains("s3cret-pw"), "no password in the output")
        }
    }

    @Test("a wrong password is exit 77, without the password")
    func wrongPassword() async throws {
        let address = try #require(PostgresTestServer.passwordCheckingAddress, "the test server names no address that checks passwords")
        let role = "pw_user_\(UInt32.random(in: 0...UInt32.max))"
        let admin = try PostgresConnection(url: try PostgresTestServer.adminURL())
        try admin.executeScript("CREATE ROLE \(role) LOGIN PASSWORD 'right-one'")
        defer { try? admin.executeScript("DROP ROLE IF EXISTS \(role)") }
        try await TemporaryStore.with { store in
            let url = "postgresql://\(role):wrong-one@\(address.host):\(address.port)/postgres"
            let status = try await Self.stratus(["count", "--type", "Item", "--store", url], in: store).wait()
            #expect(status.exitCode == 77, "\(status.stderr)")
            #expect(!status.stderr.contains("wrong-one"), "no password in the output: \(status.stderr)")
            #expect(status.stderr.contains("the password came from the connection URL"), "\(status.stderr)")
            // A stale PGPASSWORD is named as the password's source.
            let fromEnvironment = try await Self.stratus(["count", "--type", "Item", "--store", "postgresql://\(role)@\(address.host):\(address.port)/postgres"],
                                                         in: store, environment: ["PGPASSWORD": "wrong-one", "PGPASSFILE": store.path("none.pgpass")]).wait()
            #expect(fromEnvironment.exitCode == 77, "\(fromEnvironment.stderr)")
            #expect(fromEnvironment.stderr.contains("the password came from the PGPASSWORD environment variable"), "\(fromEnvironment.stderr)")
            #expect(!fromEnvironment.stderr.contains("wrong-one"), "no password in the output: \(fromEnvironment.stderr)")
        }
    }

    @Test("the server stopped with pg_ctl stop -m immediate during a checkpointed import, then restarted: the re-run ends with exactly the input")
    func crashDuringImport() async throws {
        let cluster = try PostgresOwnCluster()
        try await TemporaryStore.with { store in
            let count = 30_000
            let input = try Self.input(count, in: store)
            let checkpoint = store.path("import.ckpt")
            // The URL is read again for the re-run: the restarted server's port may differ.
            func arguments() -> [String] { ["import", input, "--checkpoint", checkpoint, "--batch-size", "500", "--store", cluster.url, "--quiet"] }
            let running = try Self.stratus(arguments(), in: store)
            // Crash once some batches are committed: tied to the import's progress (or its end),
            // not to 30 s of polls, after which a loaded machine's import may not have begun.
            while (try? Self.contents(cluster.url).count) ?? 0 < 2_000 && running.isRunning {
                usleep(5_000)
            }
            try cluster.crash()
            let crashed = await running.wait()
            try cluster.restart()
            let before = try Self.contents(cluster.url)
            #expect(before.count % 500 == 0 || crashed.exitCode == 0, "only whole batches were committed: \(before.count)")
            let rerun = try await Self.stratus(arguments(), in: store).wait()
            #expect(rerun.exitCode == 0, "\(rerun.stderr)")
            let after = try Self.contents(cluster.url)
            #expect(after.count == Int64(count) && after.sum == Int64(count * (count - 1) / 2), "exactly the input: \(after)")
            #expect(!FileManager.default.fileExists(atPath: checkpoint), "the finished import removed its checkpoint")
        }
    }

    @Test("watch goes on when the server ends its listening session: what commits afterwards is printed, each notification once")
    func watchOutlivesItsSession() async throws {
        let cluster = try PostgresOwnCluster()
        try await TemporaryStore.with { store in
            let options = ["--store", cluster.url, "--container", "com.example.watch"]
            let created = try await Self.stratus(["subscriptions", "create", "notes", "--type", "Note"] + options, in: store).wait()
            #expect(created.exitCode == 0, "\(created.stderr)")
            let database = try Container(identifier: "com.example.watch", postgresURL: cluster.url, userName: "tester").publicCloudDatabase
            let output = store.path("watch.ndjson")
            let watch = try Self.stratus(["watch", "--token-file", store.path("watch.token"), "--output", output] + options, in: store)
            func printed() -> [String] {
                ((try? String(contentsOfFile: output, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
            }
            func waitForLines(_ count: Int) async throws {
                let deadline = ContinuousClock.now + .seconds(600)
                while printed().count < count && watch.isRunning && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
            }
            try await database.save(makeRecord("Note", "before", ["n": .int64(1)]))
            try await waitForLines(1)
            #expect(printed().count == 1, "the first note is printed")
            let admin = try PostgresConnection(url: cluster.url)
            let ended = try admin.query("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE query LIKE 'LISTEN%' AND pid <> pg_backend_pid()")[0].int64(0)
            #expect(ended == 1, "the watch's listening session was ended")
            try await database.save(makeRecord("Note", "after", ["n": .int64(2)]))
            try await waitForLines(2)
            #expect(watch.isRunning, "the watch goes on")
            watch.signal(SIGTERM)
            let stopped = await watch.wait()
            #expect(stopped.exitCode == 143, "\(stopped.stderr)")
            let lines = printed()
            #expect(lines.count == 2 && lines[0].contains("\"before\"") && lines[1].contains("\"after\""), "\(lines)")
        }
    }

    @Test("a commit whose answer is lost is asked about, not tried again: an import in create mode reports every record it wrote as imported")
    func lostCommitAnswer() async throws {
        let address = try #require(PostgresTestServer.passwordCheckingAddress, "the test server names no address that checks passwords")
        let database = try PostgresTestServer.makeDatabase()
        let role = "commit_user_\(UInt32.random(in: 0...UInt32.max))"
        let admin = try PostgresConnection(url: database.url)
        try admin.executeScript("CREATE ROLE \(role) LOGIN SUPERUSER PASSWORD 'commit-pw'")
        defer { try? admin.executeScript("DROP OWNED BY \(role); DROP ROLE IF EXISTS \(role)") }
        try await TemporaryStore.with { store in
            let direct = "postgresql://\(role):commit-pw@\(address.host):\(address.port)/\(database.name)?sslmode=disable&gssencmode=disable"
            let first = try await Self.stratus(["import", try Self.input(2, in: store), "--store", direct, "--quiet"], in: store).wait()
            #expect(first.exitCode == 0, "\(first.stderr)")
            // Every batch of one record copies it in: the third such commit's answer is lost.
            let proxy = try CommitAnswerDroppingProxy(upstreamHost: address.host, upstreamPort: address.port, dropping: 3)
            var lines = ""
            for i in 0..<8 {
                lines += "{\"recordName\":\"late-\(i)\",\"recordType\":\"Item\",\"fields\":{\"n\":{\"value\":\(i),\"type\":\"INT64\"}}}\n"
            }
            let input = try store.writeFile("late.ndjson", Data(lines.utf8)).path
            let proxied = "postgresql://\(role):commit-pw@127.0.0.1:\(proxy.port)/\(database.name)?sslmode=disable&gssencmode=disable"
            let run = try await Self.stratus(["import", input, "--store", proxied, "--mode", "create", "--batch-size", "1"], in: store).wait()
            #expect(proxy.dropped, "the proxy dropped a commit's answer")
            #expect(run.exitCode == 0 && run.stderr.contains("imported 8") && run.stderr.contains("failed 0"), "\(run.stderr)")
            #expect(try Self.contents(direct).count == 10)
        }
    }

    @Test("a second interrupt stops at once and leaves no statement of it waiting on the server")
    func secondInterruptCancelsItsStatements() async throws {
        let database = try PostgresTestServer.makeDatabase()
        try await TemporaryStore.with { store in
            let input = try Self.input(100, in: store)
            let first = try await Self.stratus(["import", input, "--store", database.url, "--quiet"], in: store).wait()
            #expect(first.exitCode == 0, "\(first.stderr)")
            // An administrator's transaction holds the zone rows: the next import's batch waits for them.
            let admin = try PostgresConnection(url: database.url)
            try admin.begin()
            _ = try admin.query("SELECT zone_id FROM zones FOR UPDATE")
            defer { try? admin.rollback() }
            let watcher = try PostgresConnection(url: database.url)
            func waiting() throws -> Int64 {
                try watcher.query("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'")[0].int64(0) ?? 0
            }
            let running = try Self.stratus(["import", input, "--store", database.url, "--quiet"], in: store)
            let started = ContinuousClock.now + .seconds(600)
            while try waiting() == 0 && running.isRunning && ContinuousClock.now < started { try await Task.sleep(for: .milliseconds(20)) }
            #expect(try waiting() == 1, "the import waits for the zone's lock")
            // The first interrupt asks for a stop after the batch, which waits; any later one stops at once.
            while running.isRunning {
                running.signal(SIGINT)
                try await Task.sleep(for: .milliseconds(300))
            }
            let stopped = await running.wait()
            #expect(stopped.exitCode == 130, "\(stopped.stderr)")
            let cancelled = ContinuousClock.now + .seconds(600)
            while try waiting() > 0 && ContinuousClock.now < cancelled { try await Task.sleep(for: .milliseconds(20)) }
            #expect(try waiting() == 0, "the server stopped the statement of the process that exited")
        }
    }

    @Test("a connection dropped in the middle of a batch leaves no half batch; the import ends with exactly the input")
    func droppedConnection() async throws {
        let database = try PostgresTestServer.makeDatabase()
        try await TemporaryStore.with { store in
            let count = 30_000
            let input = try Self.input(count, in: store)
            let arguments = ["import", input, "--batch-size", "1000", "--store", database.url, "--quiet"]
            let running = try Self.stratus(arguments, in: store)
            let admin = try PostgresConnection(url: try PostgresTestServer.adminURL())
            var dropped = 0
            var polls = 0
            while running.isRunning && dropped < 3 && polls < 4_000 {
                polls += 1
                let terminated = try admin.query("""
                    SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
                    WHERE datname = $1 AND application_name = 'stratus' AND state = 'active' AND query LIKE 'INSERT INTO records%'
                    """, [.text(database.name)])[0].int64(0) ?? 0
                dropped += Int(terminated)
                let committed = (try? Self.contents(database.url).count) ?? 0
                #expect(committed % 1_000 == 0 || committed == Int64(count), "only whole batches are committed: \(committed)")
                usleep(2_000)
            }
            let status = await running.wait()
            if status.exitCode != 0 {
                // A batch that failed for good: what is there is whole batches; run again.
                #expect(try Self.contents(database.url).count % 1_000 == 0)
                let rerun = try await Self.stratus(arguments, in: store).wait()
                #expect(rerun.exitCode == 0, "\(rerun.stderr)")
            }
            let after = try Self.contents(database.url)
            #expect(after.count == Int64(count) && after.sum == Int64(count * (count - 1) / 2), "exactly the input: \(after)")
        }
    }
}
