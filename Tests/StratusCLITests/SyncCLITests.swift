import Foundation
import Stratus
import StratusTestSupport
import Testing

/// A small seeded generator (SplitMix64), so that a failing round can be replayed.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// `stratus changes | stratus import`: a change feed applied to a second store keeps it equal
/// to the first, deletions included, also when a run is killed midway.
@Suite("stratus changes | stratus import", .timeLimit(.minutes(30)))
struct SyncCLITests {
    /// Saves, updates and deletes records at random in the public default zone.
    static func writeRandomly(_ database: Database, steps: Int, using random: inout SplitMix) async throws {
        for step in 0..<steps {
            let id = Record.ID(recordName: "r\(Int.random(in: 0..<60, using: &random))")
            let existing = try? await database.record(for: id)
            if existing != nil, Int.random(in: 0..<3, using: &random) == 0 {
                try await database.deleteRecord(withID: id)
            } else {
                let record = existing ?? Record(recordType: "Item", recordID: id)
                record.setFieldValue(.int64(Int64(step)), forKey: "n")
                record.setFieldValue(Bool.random(using: &random) ? .string("s\(step)") : nil, forKey: "label")
                try await database.save(record)
            }
        }
    }

    /// A store's Item records as exported, in record-name order, each without its `created`
    /// object: a record deleted and made again between two runs reaches the copy as one change
    /// (the feed coalesces), and the store keeps an existing record's creation date on a save
    /// (`RecordWriteRules`), so the copy keeps the first creation date. Fields, change tags and
    /// modification dates must be equal.
    static func snapshot(_ cli: CLI, _ path: String) async throws -> [String] {
        let result = try await cli.run(["export", "--type", "Item", "--sort", "recordName", "--quiet", "--store", path])
        #expect(result.exitCode == 0, "\(result)")
        return result.stdoutLines.map { $0.replacing(#/"created":\{[^}]*\},/#, with: "") }
    }

    @Test("after rounds of random saves, updates and deletions, and a run killed midway, the copy equals the original", arguments: TestEngine.all)
    func copyStaysEqual(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let original = try await cli.newStore("original"), copy = try await cli.newStore("copy")
            try await cli.createStore(extra: ["--store", original])
            try await cli.createStore(extra: ["--store", copy])
            let database = try cli.container(at: original).publicCloudDatabase
            var random = SplitMix(seed: 21)
            let stores = ["ORIGINAL": original, "COPY": copy]
            let sync = #""$STRATUS" changes --store "$ORIGINAL" --token-file feed.token --batch 7 | "$STRATUS" import --store "$COPY" --mode forceReplace --quiet"#
            for round in 0..<4 {
                try await Self.writeRandomly(database, steps: 80, using: &random)
                if round == 2 {
                    // A run killed while it writes: at least once on stdout, so the next run repeats
                    // what it wrote after its last token; applying a change twice changes nothing.
                    _ = try await cli.shell(#"("$STRATUS" changes --store "$ORIGINAL" --token-file feed.token --batch 1 & pid=$!; sleep 0.05; kill -9 $pid) | "$STRATUS" import --store "$COPY" --mode forceReplace --quiet"#, environment: stores)
                }
                let result = try await cli.shell(sync, environment: stores)
                #expect(result.exitCode == 0, "round \(round): \(result)")
                let (a, b) = (try await Self.snapshot(cli, original), try await Self.snapshot(cli, copy))
                #expect(!a.isEmpty)
                let differences = zip(a, b).filter { $0 != $1 }.prefix(2).map { "original \($0)\ncopy     \($1)" }
                #expect(a.count == b.count && differences.isEmpty, "round \(round): the copy (\(b.count) records) differs from the original (\(a.count)): \(differences)")
            }
        }
    }

    @Test("a record deleted and made again with another type reaches the copy as the new record, which replaces the old one there", arguments: TestEngine.all)
    func recordMadeAgainWithAnotherType(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let original = try await cli.newStore("original"), copy = try await cli.newStore("copy")
            let stores = ["ORIGINAL": original, "COPY": copy]
            let sync = #""$STRATUS" changes --store "$ORIGINAL" --token-file feed.token | "$STRATUS" import --store "$COPY" --mode forceReplace --quiet"#
            let first = #"{"recordName":"r","recordType":"T","fields":{"a":{"value":1,"type":"INT64"}}}"# + "\n" + #"{"recordName":"s","recordType":"T","fields":{}}"# + "\n"
            #expect(try await cli.run(["import", "--quiet", "--store", original], stdin: first).exitCode == 0)
            #expect(try await cli.shell(sync, environment: stores).exitCode == 0)
            #expect(try await cli.run(["delete", "r", "--yes", "--quiet", "--store", original]).exitCode == 0)
            #expect(try await cli.run(["import", "--quiet", "--store", original], stdin: #"{"recordName":"r","recordType":"U","fields":{"b":{"value":"two","type":"STRING"}}}"# + "\n").exitCode == 0)
            let result = try await cli.shell(sync, environment: stores)
            #expect(result.exitCode == 0, "\(result)")
            #expect(try await cli.exported("T", extra: ["--store", copy]).keys.sorted() == ["s"])
            let made = try await cli.exported("U", extra: ["--store", copy])
            #expect(JSONLine.value(made["r"] ?? [:], "b") == "two")
            #expect(made["r"]?["recordChangeTag"] as? String == (try await cli.exported("U", extra: ["--store", original])["r"]?["recordChangeTag"] as? String))
        }
    }

    @Test("import applies deletion lines and counts them; --dry-run counts them as valid", arguments: TestEngine.all)
    func deletionLines(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            #expect(try await cli.run(["import"], stdin: Input.notes(3)).exitCode == 0)
            let deletions = [
                #"{"recordName":"n1","recordType":"Note","deleted":true,"zoneID":{"zoneName":"_defaultZone","ownerRecordName":"__defaultOwner__"}}"#,
                #"{"recordName":"n2","deleted":true}"#,
                #"{"recordName":"n3","recordType":"Note","deleted":true,"fields":{"title":{"value":"x","type":"STRING"}}}"#,
            ].joined(separator: "\n") + "\n"
            let dry = try await cli.run(["import", "--dry-run"], stdin: deletions)
            #expect(dry.exitCode == 1 && dry.stderrLines.last?.contains("2 valid") == true, "\(dry)")
            let rejects = store.path("deletions.rejects")
            let result = try await cli.run(["import", "--reject-file", rejects], stdin: deletions)
            #expect(result.exitCode == 1, "\(result)")
            #expect(result.stderrLines.last?.hasPrefix("imported 0, updated 0, unchanged 0, deleted 2, failed 1") == true, "\(result)")
            #expect(try RejectLine.read(rejects).map(\.line) == [3], "a deletion that carries fields is rejected")
            #expect(Set(try await cli.exported("Note").keys) == ["n3"])
        }
    }
}
