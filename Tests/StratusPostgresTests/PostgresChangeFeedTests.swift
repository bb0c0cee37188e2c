import Foundation
@_spi(StratusEngine) import Stratus
import StratusPostgres
import StratusTestSupport
import Testing

/// In PostgreSQL a change number taken early can commit late; Stratus numbers a zone's
/// changes under the zone's row lock, so that they commit in order. Proven with writer
/// processes on connections of their own and incremental readers running at the same time.
@Suite("PostgreSQL change feeds across machines", .requiresPostgres, .timeLimit(.minutes(30)))
struct PostgresChangeFeedTests {
    @Test("writer processes and incremental readers at once: each reader sees every change exactly once, in order")
    func exactlyOnce() async throws {
        let schema = try PostgresTestServer.makeSchema()
        let churn = try ChildProcess.builtExecutable("churn")
        let stratus = try ChildProcess.builtExecutable("stratus")
        try await TemporaryStore.with { store in
            let environment = ["STRATUS_USER": "tester", "STRATUS_STORE": schema.url]
            // The zone exists before anyone reads it.
            let create = try await ChildProcess(stratus, ["zones", "create", "Feed", "--container", "com.example.churn"], in: store.directory, environment: environment).wait()
            #expect(create.exitCode == 0, "\(create.stderr)")
            let writers = try ["a", "b", "c"].map { writer in
                try ChildProcess(churn, ["--store", schema.url, "--writer", writer, "--operations", "400", "--zone", "Feed",
                                         "--log", store.path("\(writer).log"), "--seed", String(writer.unicodeScalars.first!.value), "--pause-ms", "2"],
                                 in: store.directory, environment: environment)
            }
            // Two independent consumers, each running one incremental export after another
            // (two machines' cron jobs) while the writers write.
            func readerRun(_ consumer: String, _ run: Int) async throws -> Int32 {
                let status = try await ChildProcess(stratus, ["changes", "--zone", "Feed", "--container", "com.example.churn", "--token-file", store.path("\(consumer).token"),
                                                              "--output", store.path("\(consumer)-\(run).ndjson"), "--batch", "50"],
                                                     in: store.directory, environment: environment).wait()
                return status.exitCode
            }
            var runs = 0
            while writers.contains(where: \.isRunning) {
                for consumer in ["x", "y"] { #expect(try await readerRun(consumer, runs) == 0) }
                runs += 1
            }
            for writer in writers {
                let status = await writer.wait()
                #expect(status.exitCode == 0, "\(status.stderr)")
            }
            // A last run of each after the writers are done.
            for consumer in ["x", "y"] { #expect(try await readerRun(consumer, runs) == 0) }
            for consumer in ["x", "y"] {
                let exports = (0...runs).map { store.path("\(consumer)-\($0).ndjson") }.filter { FileManager.default.fileExists(atPath: $0) }
                let verify = try await ChildProcess(churn, ["verify", "--log", store.path("a.log"), "--log", store.path("b.log"), "--log", store.path("c.log")] + exports,
                                                     in: store.directory).wait()
                #expect(verify.exitCode == 0, "consumer \(consumer): \(verify.stdout)\(verify.stderr)")
            }
        }
        _ = schema
    }

    @Test("a zone saved while another connection deletes it is saved or created again, never a crash")
    func zoneSavedWhileDeleted() async throws {
        let schema = try PostgresTestServer.makeSchema()
        let saver = try Container(identifier: "com.example.flip", postgresURL: schema.url, userName: "alice").privateCloudDatabase
        let deleter = try Container(identifier: "com.example.flip", postgresURL: schema.url, userName: "alice").privateCloudDatabase
        let flip = RecordZone.ID(zoneName: "Flip")
        _ = try await saver.save(RecordZone(zoneID: flip))
        async let saves: [StratusError.Code?] = (0..<150).asyncMap { _ in
            stratusError(await caughtError { try await saver.save(RecordZone(zoneID: flip)) })?.code
        }
        async let deletes: [StratusError.Code?] = (0..<150).asyncMap { _ in
            stratusError(await caughtError { try await deleter.deleteRecordZone(withID: flip) })?.code
        }
        let (saved, deleted) = await (saves, deletes)
        #expect(saved.allSatisfy { $0 == nil || $0 == .zoneBusy }, "\(saved)")
        #expect(deleted.allSatisfy { $0 == nil || $0 == .zoneNotFound }, "\(deleted)")
        _ = try await saver.save(RecordZone(zoneID: flip))
        #expect(try await saver.allRecordZones().map(\.zoneID).contains(flip))
    }
}

extension PostgresChangeFeedTests {
    @Test("a compaction that waits for a writer's zone removes only the tombstones it counted: a reader gets the writer's deletions or an expired token")
    func compactionBesideAWriter() async throws {
        let schema = try PostgresTestServer.makeSchema()
        let writerEngine = try PostgresEngine(url: schema.url)
        let container = Container(identifier: "com.example.compact", engine: writerEngine, userName: "alice")
        let database = container.privateCloudDatabase
        let zone = try await database.save(RecordZone(zoneName: "K")).zoneID
        try await TestDatabase.save((0..<21).map { makeRecord("Item", "r\($0)", zoneID: zone) }, in: database)
        _ = try await database.deleteRecord(withID: Record.ID(recordName: "r20", zoneID: zone))
        let reader = try await database.recordZoneChanges(inZoneWith: zone, since: nil)
        let context = try database.resolvedContext()

        // A writer deletes 20 records and holds its transaction (and the zone's lock) open
        // while a compaction of everything deleted until after it starts.
        let holding = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        // Threads of their own: both block, and the test's tasks must go on meanwhile.
        let writerDone = Box<Result<Void, any Error>?>(nil), compactionDone = Box<Result<ChangeHistoryCompaction, any Error>?>(nil)
        let finished = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            writerDone.value = Result {
                try writerEngine.writeRecords(in: context) { transaction in
                    for index in 0..<20 { _ = try transaction.deleteRecord(Record.ID(recordName: "r\(index)", zoneID: zone)) }
                    holding.signal()
                    release.wait()
                }
            }
            finished.signal()
        }
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async { holding.wait(); done.resume() }
        }
        let compactor = try PostgresEngine(url: schema.url)
        Thread.detachNewThread {
            compactionDone.value = Result { try compactor.compactChangeHistory(in: context, deletedBefore: Date().addingTimeInterval(3600)) }
            finished.signal()
        }
        // Released once the compaction waits for the writer's lock (bounded by minutes), from a
        // thread of its own: the open writer's backend holds up other tests' database drops,
        // which may hold the cooperative pool's threads meanwhile.
        let observerURL = schema.url
        Thread.detachNewThread {
            let observer = try? PostgresConnection(url: observerURL)
            let deadline = ContinuousClock.now + .seconds(300)
            while ContinuousClock.now < deadline {
                if let observer, let waiting = try? observer.query("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'UPDATE zones SET history_start%'")[0].int64(0),
                   waiting > 0 { break }
                usleep(20_000)
            }
            release.signal()
        }
        for _ in 0..<2 {
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                DispatchQueue.global().async { finished.wait(); done.resume() }
            }
        }
        try #require(writerDone.value).get()
        let removed = try #require(compactionDone.value).get()
        // Waiting, it removes the one tombstone it counted and the reader gets the writer's
        // deletions; had it run after the writer's commit (a slow machine), it removes all 21
        // and the reader's token expires. Never fewer deletions with a token still good.
        do {
            let after = try await database.recordZoneChanges(inZoneWith: zone, since: reader.changeToken)
            #expect(Set(after.deletions.map(\.recordID.recordName)) == Set((0..<20).map { "r\($0)" }))
            #expect(removed.recordTombstonesRemoved == 1, "only the tombstone the compaction counted")
        } catch let error as StratusError {
            #expect(error.code == .changeTokenExpired, "\(error)")
            #expect(removed.recordTombstonesRemoved == 21)
        }
    }
}

extension Range<Int> {
    /// `map` with an async transform, one element after another.
    fileprivate func asyncMap<T>(_ transform: (Int) async throws -> T) async rethrows -> [T] {
        var results: [T] = []
        for element in self { results.append(try await transform(element)) }
        return results
    }
}
