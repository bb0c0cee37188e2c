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
        let (saved, deleted) = try await (saves, deletes)
        #expect(saved.allSatisfy { $0 == nil || $0 == .zoneBusy }, "\(saved)")
        #expect(deleted.allSatisfy { $0 == nil || $0 == .zoneNotFound }, "\(deleted)")
        _ = try await saver.save(RecordZone(zoneID: flip))
        #expect(try await saver.allRecordZones().map(\.zoneID).contains(flip))
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
