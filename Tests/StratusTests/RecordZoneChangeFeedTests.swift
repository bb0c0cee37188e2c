import Foundation
import SeededRandom
import Stratus
import StratusTestSupport
import Testing

/// A token kept in memory, with the number of saves.
final class MemoryTokens: ChangeTokenStore {
    var token: ServerChangeToken?
    var saves = 0
    func loadToken() throws -> ServerChangeToken? { token }
    func saveToken(_ token: ServerChangeToken) throws {
        self.token = token
        saves += 1
    }
}

struct ApplyFailed: Error {}

@Suite("RecordZoneChangeFeed", .timeLimit(.minutes(30)))
struct RecordZoneChangeFeedTests {
    /// Applies a feed's changes to a dictionary of record states, as a replica would.
    static func apply(_ batch: RecordZoneChangeFeed.Batch, to replica: inout [String: FieldValue?], log: inout [String]) {
        for change in batch.changes {
            switch change {
            case .changed(let record):
                replica[record.recordID.recordName] = .some(record.fieldValue(forKey: "n"))
                log.append("+" + record.recordID.recordName)
            case .deleted(let id, _):
                replica[id.recordName] = nil
                log.append("-" + id.recordName)
            }
        }
    }

    @Test("runs with a token store deliver every change once; a failed apply is delivered again and nothing else twice")
    func exactlyOnce() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.container().privateCloudDatabase
            let zone = RecordZone.ID(zoneName: "Feed")
            try await database.save(RecordZone(zoneID: zone))
            var random = SeededGenerator(seed: 17)
            var truth: [String: Int64] = [:]
            func writeRandomly(_ count: Int) async throws {
                for step in 0..<count {
                    let name = "r\(Int.random(in: 0..<40, using: &random))"
                    if truth[name] != nil && Bool.random(using: &random) {
                        try await database.deleteRecord(withID: Record.ID(recordName: name, zoneID: zone))
                        truth[name] = nil
                    } else {
                        let value = Int64(step)
                        var record = makeRecord("Item", name, zoneID: zone, ["n": .int64(value)])
                        if truth[name] != nil { record = try await database.record(for: record.recordID); record.setFieldValue(.int64(value), forKey: "n") }
                        try await database.save(record)
                        truth[name] = value
                    }
                }
            }
            let tokens = MemoryTokens()
            let feed = RecordZoneChangeFeed(database: database, zoneID: zone, batchSize: 7)
            var replica: [String: FieldValue?] = [:]
            var log: [String] = []

            try await writeRandomly(120)
            let first = try await feed.run(tokens: tokens) { Self.apply($0, to: &replica, log: &log) }
            #expect(first.end == .finished && first.batches == tokens.saves && !first.moreComing)

            try await writeRandomly(120)
            // The third batch fails to apply: its token is not saved.
            var applied = 0
            await #expect(throws: ApplyFailed.self) {
                _ = try await feed.run(tokens: tokens) { batch in
                    applied += 1
                    if applied == 3 { throw ApplyFailed() }
                    Self.apply(batch, to: &replica, log: &log)
                }
            }
            let resumed = try await feed.run(tokens: tokens) { Self.apply($0, to: &replica, log: &log) }
            #expect(resumed.end == .finished)

            #expect(replica.mapValues { $0 } == truth.mapValues { FieldValue?.some(.int64($0)) }, "the replica equals the zone")
            let nothingNew = try await feed.run(tokens: tokens) { batch in #expect(batch.changes.isEmpty) }
            #expect(nothingNew.changed + nothingNew.deleted == 0)
        }
    }

    @Test("a limit stops after about that many changes and the next run continues; cancel() stops after a batch")
    func limitAndCancel() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            _ = try await RecordImporter(database: database).run(from: ItemSource(records: items(100)))
            let tokens = MemoryTokens()
            let feed = RecordZoneChangeFeed(database: database, zoneID: .default, batchSize: 10)
            var names: [String] = []
            let limited = try await feed.run(tokens: tokens, limit: 35) { batch in names += batch.changes.map(\.recordID.recordName) }
            #expect(limited.end == .limitReached && limited.moreComing && names.count == 35, "\(limited)")

            let cancelling = try await feed.run(tokens: tokens) { batch in
                names += batch.changes.map(\.recordID.recordName)
                if names.count >= 55 { feed.cancel() }
            }
            #expect(cancelling.end == .cancelled && names.count == 55, "\(cancelling)")
            let rest = RecordZoneChangeFeed(database: database, zoneID: .default, batchSize: 10)
            _ = try await rest.run(tokens: tokens) { batch in names += batch.changes.map(\.recordID.recordName) }
            #expect(names == items(100).map(\.recordID.recordName), "every change once, in commit order")
        }
    }
}
