import Foundation
import SeededRandom
@_spi(StratusEngine) import Stratus
@_spi(StratusEngine) import StratusSQLite
import StratusTestSupport
import Testing

// Crashes: `stratus import --checkpoint` and `stress batches` (atomic batches with .deleteSelf
// cascades) killed with SIGKILL at random moments, then the store checked from scratch. The
// long version is scripts/crash-loop (STRATUS_CRASH_ROUNDS, STRATUS_CRASH_RECORDS).

@Suite("Crashes: writers killed at random moments", .timeLimit(.minutes(StoreProcess.setting("STRATUS_CRASH_ROUNDS", default: 10) / 10 + 30)))
struct CrashTests {
    static let container = "com.example.stress"
    static let batchSize = 100
    static let stressBatchSize = 20
    static var context: DatabaseContext { DatabaseContext(containerIdentifier: container, scope: .public, userName: "checker") }

    /// One import input: `count` records of type `Imported<cycle>` named `c<cycle>-<i>`.
    struct Input {
        let cycle: Int
        let count: Int
        let path: String
        let checkpoint: String
        var recordType: String { "Imported\(cycle)" }
        func name(_ i: Int) -> String { "c\(cycle)-\(i)" }
        func text(_ i: Int) -> String { "grüße \(cycle)/\(i) ✓" }

        init(cycle: Int, count: Int, in store: TemporaryStore) throws {
            self.cycle = cycle
            self.count = count
            path = store.path("input-\(cycle).ndjson")
            checkpoint = store.path("import-\(cycle).checkpoint")
            var text = ""
            text.reserveCapacity(count * 160)
            for i in 0..<count {
                text += #"{"recordName":"\#(name(i))","recordType":"\#(recordType)","fields":{"n":{"value":\#(i),"type":"INT64"},"s":{"value":"\#(self.text(i))","type":"STRING"},"d":{"value":\#(Double(i) / 4),"type":"DOUBLE"}}}"#
                text += "\n"
            }
            try text.write(toFile: path, atomically: true, encoding: .utf8)
        }

        /// The committed item count the checkpoint file holds, or 0 without one.
        func committedItems() throws -> Int {
            guard let data = FileManager.default.contents(atPath: checkpoint) else { return 0 }
            let object = try #require((try? JSONSerialization.jsonObject(with: data)) as? [String: Any], "the checkpoint is JSON: \(String(decoding: data, as: UTF8.self))")
            return try #require(object["committedItems"] as? Int, "the checkpoint names its committed items")
        }
    }

    /// How many records of `input`'s type the store holds.
    static func storedCount(_ input: Input, engine: SQLiteEngine) throws -> Int {
        let query = try CompiledQuery(Query(recordType: input.recordType), zoneID: .default, desiredKeys: [])
        return try engine.queryRecords(query, in: Self.context, after: nil, limit: input.count + 1_000).records.count
    }

    /// Checks the imported records: a prefix of the input in whole batches, covering what the
    /// checkpoint says is committed, every record exactly as in the input. Returns the prefix length.
    @discardableResult
    static func checkImport(_ input: Input, engine: SQLiteEngine, complete: Bool, _ context: String) throws -> Int {
        let query = try CompiledQuery(Query(recordType: input.recordType), zoneID: .default, desiredKeys: nil)
        let records = try engine.queryRecords(query, in: Self.context, after: nil, limit: input.count + 1_000).records
        var present = Set<Int>()
        for record in records {
            let name = record.recordID.recordName
            guard let i = Int(name.dropFirst("c\(input.cycle)-".count)), name == input.name(i), i < input.count else {
                Issue.record("\(context): a record that is not in the input: \(name)")
                continue
            }
            present.insert(i)
            let expected: [String: FieldValue] = ["n": .int64(Int64(i)), "s": .string(input.text(i)), "d": .double(Double(i) / 4)]
            if record.fieldValues != expected { Issue.record("\(context): \(name) holds \(record.fieldValues), not \(expected)") }
        }
        let prefix = present.count
        #expect(present == Set(0..<prefix), "\(context): the imported records are not a prefix of the input (\(prefix) present, highest \(present.max() ?? -1))")
        #expect(prefix % batchSize == 0 || prefix == input.count, "\(context): \(prefix) records present, not whole batches of \(batchSize)")
        let committed = try input.committedItems()
        #expect(prefix >= committed, "\(context): the checkpoint says \(committed) items are committed, the store holds \(prefix)")
        if complete {
            #expect(prefix == input.count, "\(context): the finished import holds \(prefix) of \(input.count) records")
        } else {
            // Each batch commits, then its checkpoint is saved: a kill in between leaves one batch more.
            #expect(prefix <= committed + batchSize, "\(context): \(prefix) records present but the checkpoint is at \(committed): more than one batch past it")
        }
        return prefix
    }

    /// Checks one `stress batches` writer against its log: every logged batch is there, and
    /// every batch is whole or (deleted by a later batch's cascade) entirely gone. Returns the
    /// number of batches its log reports committed.
    @discardableResult
    static func checkBatches(writer: String, log: String, engine: SQLiteEngine, _ context: String) throws -> Int {
        let logged = StoreProcess.lines(log)
        let committed = logged.count
        #expect(logged == (0..<committed).map { "committed \($0)" }, "\(context): the log of \(writer) is not 'committed 0…n-1'")
        let progressID = Record.ID(recordName: "\(writer)-progress")
        let progressValue = try engine.fetchRecords([progressID], in: Self.context)[progressID]?.fieldValue(forKey: "batch")
        let progress: Int? = if case .int64(let n)? = progressValue { Int(n) } else { nil }
        let query = try CompiledQuery(Query(recordType: "Batch", predicate: try QueryPredicate(format: "writer == %@", writer)), zoneID: .default, desiredKeys: nil)
        let records = try engine.queryRecords(query, in: Self.context, after: nil, limit: 1_000_000).records
        var counts: [Int: Int] = [:]
        var heads = Set<Int>()
        for record in records {
            guard case .int64(let batch)? = record.fieldValue(forKey: "batch") else {
                Issue.record("\(context): \(record.recordID.recordName) has no batch")
                continue
            }
            counts[Int(batch), default: 0] += 1
            if record.recordID.recordName.hasSuffix("-h") { heads.insert(Int(batch)) }
        }
        guard let last = progress else {
            #expect(committed == 0, "\(context): \(writer) logged \(committed) commits but its progress record is missing")
            #expect(records.isEmpty, "\(context): \(writer) has \(records.count) batch records but no progress record")
            return committed
        }
        #expect(last == committed - 1 || last == committed, "\(context): \(writer)'s progress is batch \(last) but its log has \(committed) commits")
        var expected: [Int: Int] = [:]
        for batch in max(0, last - 2)...last { expected[batch] = stressBatchSize }
        #expect(counts == expected, "\(context): \(writer)'s batches are not whole (or not cascaded away whole): \(counts.sorted { $0.key < $1.key }) vs \(expected.sorted { $0.key < $1.key })")
        #expect(heads == Set(expected.keys), "\(context): \(writer)'s heads \(heads.sorted())")
        return committed
    }

    @Test("import and atomic-batch processes killed at random moments: the store opens, passes integrity_check, holds every reported commit whole; the import resumes to exactly its input")
    func killLoop() async throws {
        let stratus = try ChildProcess.builtExecutable("stratus")
        let stress = try ChildProcess.builtExecutable("stress")
        _ = try #require(StoreProcess.sqlite3, "the sqlite3 shell is needed (apt-get install sqlite3)")
        let rounds = StoreProcess.setting("STRATUS_CRASH_ROUNDS", default: 10)
        let recordsPerInput = StoreProcess.setting("STRATUS_CRASH_RECORDS", default: 20_000)
        let seed = UInt64(StoreProcess.setting("STRATUS_CRASH_SEED", default: 20_251_122))
        var random = SeededGenerator(seed: seed)
        print("crash-loop: seed \(seed) (STRATUS_CRASH_SEED), \(rounds) rounds, \(recordsPerInput) records per import")

        try await TemporaryStore.with(prefix: "stratus-crash") { store in
            let path = store.path()
            _ = try SQLiteEngine(path: path)   // the store exists before the first writer starts
            var input = try Input(cycle: 0, count: recordsPerInput, in: store)
            var importKills = 0, writerKills = 0, importsFinished = 0, resumedRuns = 0, batchesVerified = 0, recordsVerified = 0
            let start = ContinuousClock.now

            func importArguments(_ input: Input) -> [String] {
                ["import", input.path, "--store", path, "--container", Self.container, "--checkpoint", input.checkpoint,
                 "--batch-size", "\(Self.batchSize)", "--quiet"]
            }

            for round in 0..<rounds {
                if FileManager.default.fileExists(atPath: input.checkpoint) { resumedRuns += 1 }
                let writer = "r\(round)"
                let log = store.path("\(writer).log")
                let importer = try ChildProcess(stratus, importArguments(input), in: store.directory)
                let modifier = try ChildProcess(stress, [
                    "batches", "--store", path, "--container", Self.container, "--writer", writer,
                    "--batches", "1000000", "--size", "\(Self.stressBatchSize)", "--log", log,
                ], in: store.directory)
                let delay = Int.random(in: 30...700, using: &random)
                try await Task.sleep(for: .milliseconds(delay))
                for victim in Bool.random(using: &random) ? [importer, modifier] : [modifier, importer] where victim.isRunning {
                    victim.kill()
                }
                let imported = await importer.wait()
                let modified = await modifier.wait()
                let context = "round \(round) (killed after \(delay) ms)"
                if imported.killed {
                    importKills += 1
                } else {
                    #expect(imported.exitCode == 0, "\(context): the import exited \(imported.exitCode): \(imported.stderr.prefix(500))")
                }
                if modified.killed {
                    writerKills += 1
                } else {
                    Issue.record("\(context): the batch writer ended by itself with \(modified.exitCode): \(modified.stderr.prefix(500))")
                }

                // A fresh process checks the file, then a fresh engine opens it.
                let integrity = try await StoreProcess.integrityCheck(path, in: store.directory)
                #expect(integrity == "ok", "\(context): integrity_check says \(integrity.prefix(500))")
                do {
                    let engine = try SQLiteEngine(path: path)
                    // A kill can land after the import's work is done and its checkpoint removed,
                    // while it exits (copying the log into the file): that import finished.
                    let checkpointRemoved = imported.killed && !FileManager.default.fileExists(atPath: input.checkpoint)
                    let finishedBeforeKill = try checkpointRemoved && Self.storedCount(input, engine: engine) == input.count
                    let finished = (imported.exitCode == 0 && !imported.killed) || finishedBeforeKill
                    recordsVerified += try Self.checkImport(input, engine: engine, complete: finished, context)
                    batchesVerified += try Self.checkBatches(writer: writer, log: log, engine: engine, context)
                    if finished {
                        #expect(!FileManager.default.fileExists(atPath: input.checkpoint), "\(context): the finished import left its checkpoint")
                        importsFinished += 1
                        input = try Input(cycle: input.cycle + 1, count: recordsPerInput, in: store)
                    }
                }
            }

            // The last import, resumed from its checkpoint, runs to the end: exactly its input.
            let resumed = FileManager.default.fileExists(atPath: input.checkpoint)
            let final = try await StoreProcess.run(stratus, importArguments(input), in: store.directory)
            #expect(final.exitCode == 0, "the resumed import exited \(final.exitCode): \(final.stderr.prefix(500))")
            #expect(!FileManager.default.fileExists(atPath: input.checkpoint))
            #expect(try await StoreProcess.integrityCheck(path, in: store.directory) == "ok")
            let engine = try SQLiteEngine(path: path)
            let total = try Self.checkImport(input, engine: engine, complete: true, "final import (resumed: \(resumed))")
            #expect(total == recordsPerInput)
            for cycle in 0..<input.cycle {
                // Earlier inputs finished too and still hold exactly their records.
                let earlier = Input.existing(cycle: cycle, count: recordsPerInput, in: store)
                try Self.checkImport(earlier, engine: engine, complete: true, "import \(cycle)")
            }

            let kills = importKills + writerKills
            #expect(kills >= 10, "only \(kills) processes were still running when killed")
            #expect(importKills >= 1 && writerKills >= 1)
            let elapsed = ContinuousClock.now - start
            print("crash-loop: \(kills) kills survived (\(importKills) importing, \(writerKills) modifying) in \(rounds) rounds, \(elapsed.components.seconds) s; integrity_check ok after every kill; \(batchesVerified) committed atomic batches verified whole; \(recordsVerified) imported records verified after kills; \(importsFinished + 1) imports finished after \(resumedRuns) resumed runs, each exactly its input")
        }
    }
}

extension CrashTests.Input {
    /// An input written earlier (same names and values), without writing it again.
    static func existing(cycle: Int, count: Int, in store: TemporaryStore) -> CrashTests.Input {
        CrashTests.Input(cycle: cycle, count: count, path: store.path("input-\(cycle).ndjson"), checkpoint: store.path("import-\(cycle).checkpoint"))
    }

    private init(cycle: Int, count: Int, path: String, checkpoint: String) {
        self.cycle = cycle
        self.count = count
        self.path = path
        self.checkpoint = checkpoint
    }
}
