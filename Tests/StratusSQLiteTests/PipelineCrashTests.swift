import Foundation
import SeededRandom
@_spi(StratusEngine) import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// Checkpointed pipelines killed with SIGKILL at random moments: `reprice run` (query →
// transform → save, a transform that is not idempotent) and `stratus update --checkpoint`.
// After every kill the store opens, passes integrity_check, and holds exactly the batches up
// to the position its job committed; the run that finally completes leaves every record
// changed exactly once (checked against the model the generator and the command define).

@Suite("Crashes: checkpointed pipelines killed at random moments", .timeLimit(.minutes(StoreProcess.setting("STRATUS_CRASH_ROUNDS", default: 8) / 4 + 30)))
struct PipelineCrashTests {
    /// Kills `run` at a moment tied to its progress, not to the clock (so that runs are
    /// killed part-way on a fast machine and on a busy one alike): once `done()` (records
    /// processed, read from the store) has grown by a random share of up to half of what was
    /// left, plus a random 0–30 ms so that kills land inside batches too. Answers what the
    /// moment was, for messages.
    static func kill(_ run: ChildProcess, done: @escaping @Sendable () throws -> Int, remaining: Int, using random: inout SeededGenerator) async throws -> String {
        let start = try done()
        let target = start + Int.random(in: 0...max(0, remaining / 2), using: &random)
        let jitter = Int.random(in: 0...30, using: &random)
        // On a thread of its own: the tasks of other tests can keep the cooperative threads
        // busy for longer than a whole run takes.
        try await ChildProcess.onOwnThread {
            while run.isRunning, try done() < target { usleep(2_000) }
            usleep(UInt32(jitter) * 1_000)
            if run.isRunning { run.kill() }
        }
        return "killed \(jitter) ms after \(target - start) more records were done"
    }

    /// The record name a query position stands after, from the position a job committed.
    static func committedName(_ engine: SQLiteEngine, job: String) throws -> String? {
        guard let text = try engine.jobProgressText(job) else { return nil }
        guard case .query(let cursor) = try PipelinePosition(serialized: text) else {
            Issue.record("job \(job) holds \(text), not a query position")
            return nil
        }
        return cursor.position.recordName
    }

    @Test("reprice (query → transform → save) killed at random moments: after each kill exactly the committed batches are done; the run that completes leaves every product repriced exactly once")
    func repriceKillLoop() async throws {
        let reprice = try ChildProcess.builtExecutable("reprice")
        let rounds = StoreProcess.setting("STRATUS_CRASH_ROUNDS", default: 8)
        let count = StoreProcess.setting("STRATUS_CRASH_RECORDS", default: 20_000)
        var random = SeededGenerator(seed: UInt64(StoreProcess.setting("STRATUS_CRASH_SEED", default: 20_250_601)))
        try await TemporaryStore.with(prefix: "stratus-pipeline-crash") { store in
            let path = store.path()
            let generated = try await StoreProcess.run(reprice, ["generate", "--store", path, "--count", "\(count)"], in: store.directory)
            #expect(generated.exitCode == 0, "\(generated.stderr)")
            let onSale = (0..<count).filter { $0 % 10 != 9 }.count
            // One engine reads the progress of every run (opening one per look costs more than a batch).
            let progress = try SQLiteEngine(path: path)
            var kills = 0
            var completed = false
            for round in 0..<rounds {
                let run = try ChildProcess(reprice, ["run", "--store", path, "--batch", "50"], in: store.directory)
                let before = try Self.repricedCount(progress)
                let moment = try await Self.kill(run, done: { try Self.repricedCount(progress) }, remaining: onSale - before, using: &random)
                let status = await run.wait()
                let context = "round \(round) (\(moment))"
                if status.killed { kills += 1 } else { #expect(status.exitCode == 0, "\(context): \(status.stderr)") }
                let integrity = try await StoreProcess.integrityCheck(path, in: store.directory)
                #expect(integrity == "ok", "\(context): \(integrity.prefix(300))")
                // A kill that lands after the pipeline completed (its position removed) but
                // before the process exited ends a finished job: running it again would be a
                // second repricing, not a resumption.
                if try Self.checkRepricePrefix(path: path, count: count, complete: !status.killed, context) {
                    completed = true
                    break
                }
            }
            if !completed {
                // Run again after a completed run, it would reprice every product a second time.
                let final = try await StoreProcess.run(reprice, ["run", "--store", path, "--batch", "50"], in: store.directory)
                #expect(final.exitCode == 0, "the last run: \(final.stderr)")
            }
            let verify = try await StoreProcess.run(reprice, ["verify", "--store", path, "--count", "\(count)"], in: store.directory)
            #expect(verify.exitCode == 0, "\(verify.stdout)\(verify.stderr)")
            #expect(try SQLiteEngine(path: path).jobProgressText("reprice") == nil, "the completed job's position is removed")
            #expect(kills >= 1, "no run was still going when killed")
            print("crash-loop: pipeline, reprice killed \(kills) times over \(count) products, then completed; each product repriced exactly once")
        }
    }

    /// Products on sale up to the committed position are repriced once, those after it not at
    /// all; discontinued products are untouched. A run killed as it exited, after its pipeline
    /// completed and removed the job's position, leaves every product on sale repriced once:
    /// answers whether the job is complete.
    @discardableResult
    static func checkRepricePrefix(path: String, count: Int, complete: Bool, _ context: String) throws -> Bool {
        let engine = try SQLiteEngine(path: path)
        let committed = try committedName(engine, job: "reprice")
        var (seen, wrong) = try repriceMismatches(engine, complete: complete, committed: committed)
        var finished = complete
        if !complete, committed == nil, !wrong.isEmpty, try repriceMismatches(engine, complete: true, committed: nil).wrong.isEmpty {
            (finished, wrong) = (true, [])
        }
        #expect(seen == count, "\(context): \(seen) products")
        let differing = wrong.count
        #expect(differing == 0, "\(context): committed up to \(committed ?? "nothing"); \(differing) products differ, e.g. \(wrong.prefix(5))")
        return finished
    }

    /// The products that differ from what a run that committed up to `committed` (or, when
    /// `complete`, every batch) leaves.
    static func repriceMismatches(_ engine: SQLiteEngine, complete: Bool, committed: String?) throws -> (seen: Int, wrong: [String]) {
        let query = try CompiledQuery(Query(recordType: "Product"), zoneID: .default, desiredKeys: ["price", "revision", "discontinued"])
        let stream = try engine.openQueryStream(query, in: DatabaseContext(containerIdentifier: "com.example.reprice", scope: .public, userName: "checker"), after: nil)
        defer { stream.close() }
        var wrong: [String] = []
        var seen = 0
        while case let page = try stream.next(limit: 5_000), !page.records.isEmpty {
            for product in page.records {
                seen += 1
                let name = product.recordID.recordName
                let i = Int(name.dropFirst(2)) ?? -1
                let base = Double(i % 1_000) + 0.99
                let onSale = product.fieldValue(forKey: "discontinued") == .int64(0)
                let done = onSale && (complete || committed.map { name <= $0 } == true)
                let expected: (FieldValue, FieldValue) = done ? (.double((base * 110).rounded() / 100), .int64(1)) : (.double(base), .int64(0))
                if product.fieldValue(forKey: "price") != expected.0 || product.fieldValue(forKey: "revision") != expected.1 {
                    wrong.append("\(name): revision \(product.fieldValue(forKey: "revision").map { "\($0)" } ?? "none")")
                }
            }
        }
        return (seen, wrong)
    }

    @Test("stratus update --checkpoint killed at random moments: after each kill exactly the committed batches are updated; the run that completes updates the rest, none again")
    func updateKillLoop() async throws {
        let stratus = try ChildProcess.builtExecutable("stratus")
        let rounds = StoreProcess.setting("STRATUS_CRASH_ROUNDS", default: 8)
        let count = StoreProcess.setting("STRATUS_CRASH_RECORDS", default: 20_000)
        var random = SeededGenerator(seed: UInt64(StoreProcess.setting("STRATUS_CRASH_SEED", default: 20_250_602)))
        try await TemporaryStore.with(prefix: "stratus-update-crash") { store in
            let path = store.path()
            var input = ""
            for i in 0..<count {
                input += #"{"recordName":"u-\#(String(format: "%06d", i))","recordType":"Task","fields":{"n":{"value":\#(i),"type":"INT64"},"open":{"value":\#(i % 3 == 0 ? 0 : 1),"type":"INT64"}}}"#
                input += "\n"
            }
            let file = try store.writeFile("tasks.ndjson", Data(input.utf8)).path
            let imported = try await StoreProcess.run(stratus, ["import", file, "--store", path, "--quiet"], in: store.directory)
            #expect(imported.exitCode == 0, "\(imported.stderr)")
            let checkpoint = store.path("update.checkpoint")
            let arguments = ["update", "--store", path, "--type", "Task", "--where", "open == 1", "--set", "status=closed", "--set", "closedBy:STRING=cron",
                             "--batch-size", "50", "--checkpoint", checkpoint, "--progress", "json"]
            let matching = (0..<count).filter { $0 % 3 != 0 }.count
            // One engine reads the progress of every run (opening one per look costs more than a batch).
            let progress = try SQLiteEngine(path: path)
            var kills = 0, resumed = 0
            var final: ChildProcess.Status?
            var finishedAsKilled = false
            // Updated before the run that completes: what that run must not update again.
            var doneBefore = 0
            for round in 0..<rounds {
                doneBefore = try Self.updatedCount(path: path)
                if doneBefore > 0 { resumed += 1 }
                let run = try ChildProcess(stratus, arguments, in: store.directory)
                let moment = try await Self.kill(run, done: { try Self.updatedCount(progress) }, remaining: matching - doneBefore, using: &random)
                let status = await run.wait()
                let context = "round \(round) (\(moment))"
                #expect(try await StoreProcess.integrityCheck(path, in: store.directory) == "ok", "\(context)")
                if status.killed {
                    kills += 1
                    if try Self.checkUpdatePrefix(path: path, checkpoint: checkpoint, count: count, context) {
                        finishedAsKilled = true
                        break
                    }
                } else {
                    #expect(status.exitCode == 0, "\(context): \(status.stderr)")
                    final = status
                    break
                }
            }
            if finishedAsKilled {
                // The kill landed after the update completed. Its checkpoint may be left (the
                // store's position was removed first): a run with it writes nothing again.
                if FileManager.default.fileExists(atPath: checkpoint) {
                    let again = try await StoreProcess.run(stratus, arguments, in: store.directory)
                    #expect(again.exitCode == 0, "\(again.stderr)")
                    let summary = try #require(again.stderr.split(separator: "\n").last.flatMap { StoreProcess.object(String($0)) }, "a JSON summary: \(again.stderr)")
                    #expect(summary["updated"] as? Int == 0, "\(summary)")
                }
            } else {
                if final == nil {
                    doneBefore = try Self.updatedCount(path: path)
                    final = try await StoreProcess.run(stratus, arguments, in: store.directory)
                }
                let last = try #require(final)
                #expect(last.exitCode == 0, "\(last.stderr)")
                let summary = try #require(last.stderr.split(separator: "\n").last.flatMap { StoreProcess.object(String($0)) }, "a JSON summary: \(last.stderr)")
                // The run that completed read only what no earlier run committed.
                #expect(summary["unchanged"] as? Int == 0, "\(summary)")
                #expect(summary["failed"] as? Int == 0, "\(summary)")
                #expect(summary["updated"] as? Int == matching - doneBefore, "\(summary), \(doneBefore) done before it")
                #expect(summary["matched"] as? Int == matching - doneBefore, "\(summary): it read only what no earlier run committed")
                if doneBefore > 0 {
                    #expect(last.stderr.contains("going on from the checkpoint \(checkpoint)"), "a resumed run says so: \(last.stderr)")
                }
            }
            #expect(try Self.updatedCount(path: path) == matching)
            #expect(!FileManager.default.fileExists(atPath: checkpoint), "the checkpoint is removed when the update ends")
            #expect(kills >= 1, "no run was still going when killed")
            print("crash-loop: pipeline, stratus update killed \(kills) times over \(count) records (\(resumed) runs resumed after committed batches), then completed; \(matching) updated once")
        }
    }

    /// How many products the pipeline has repriced.
    static func repricedCount(_ engine: SQLiteEngine) throws -> Int {
        let query = try CompiledQuery(Query(recordType: "Product", predicate: try QueryPredicate(format: "revision == 1")), zoneID: .default, desiredKeys: [])
        return try engine.countRecords(query, in: DatabaseContext(containerIdentifier: "com.example.reprice", scope: .public, userName: "checker"))
    }

    /// How many `Task` records the update has set.
    static func updatedCount(path: String) throws -> Int {
        try updatedCount(try SQLiteEngine(path: path))
    }

    static func updatedCount(_ engine: SQLiteEngine) throws -> Int {
        let query = try CompiledQuery(Query(recordType: "Task", predicate: try QueryPredicate(format: "status == 'closed'")), zoneID: .default, desiredKeys: [])
        return try engine.countRecords(query, in: DatabaseContext(containerIdentifier: "default", scope: .public, userName: "checker"))
    }

    /// Matching records up to the committed position are updated, those after it not; records
    /// that do not match are untouched. A run killed as it exited, after its pipeline completed
    /// and removed the job's position, leaves every matching record updated: answers whether
    /// the update is complete.
    static func checkUpdatePrefix(path: String, checkpoint: String, count: Int, _ context: String) throws -> Bool {
        let engine = try SQLiteEngine(path: path)
        var committed: String?
        if let data = FileManager.default.contents(atPath: checkpoint), let job = StoreProcess.object(String(decoding: data, as: UTF8.self))?["job"] as? String {
            committed = try committedName(engine, job: job)
        }
        var wrong = try updateMismatches(engine, complete: false, committed: committed)
        var finished = false
        if committed == nil, !wrong.isEmpty, try updateMismatches(engine, complete: true, committed: nil).isEmpty {
            (finished, wrong) = (true, [])
        }
        let differing = wrong.count
        #expect(differing == 0, "\(context): committed up to \(committed ?? "nothing"); \(differing) records differ, e.g. \(wrong.prefix(5))")
        return finished
    }

    /// The records that differ from what a run that committed up to `committed` (or, when
    /// `complete`, every batch) leaves.
    static func updateMismatches(_ engine: SQLiteEngine, complete: Bool, committed: String?) throws -> [String] {
        let query = try CompiledQuery(Query(recordType: "Task"), zoneID: .default, desiredKeys: nil)
        let stream = try engine.openQueryStream(query, in: DatabaseContext(containerIdentifier: "default", scope: .public, userName: "checker"), after: nil)
        defer { stream.close() }
        var wrong: [String] = []
        while case let page = try stream.next(limit: 5_000), !page.records.isEmpty {
            for record in page.records {
                let name = record.recordID.recordName
                let matches = record.fieldValue(forKey: "open") == .int64(1)
                let updated = record.fieldValue(forKey: "status") == .string("closed") && record.fieldValue(forKey: "closedBy") == .string("cron")
                let untouched = record.fieldValue(forKey: "status") == nil && record.fieldValue(forKey: "closedBy") == nil
                let shouldBeDone = matches && (complete || committed.map { name <= $0 } == true)
                if shouldBeDone ? !updated : !untouched { wrong.append(name) }
            }
        }
        return wrong
    }
}
