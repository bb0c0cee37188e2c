import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

/// ``RecordUpdater`` and encrypted fields, through the public API.
@Suite("RecordUpdater", .timeLimit(.minutes(30)))
struct RecordUpdaterTests {
    /// Alice's private database with d1 and d2 (`secret` encrypted, `note` plain) and d3 (neither) in zone Diary.
    static func diaries(_ fixture: SQLiteFixture) async throws -> (Database, RecordZone.ID) {
        let database = fixture.container().privateCloudDatabase
        let zone = try await database.save(RecordZone(zoneName: "Diary")).zoneID
        var records: [Record] = []
        for name in ["d1", "d2"] {
            let record = Record(recordType: "Entry", recordID: Record.ID(recordName: name, zoneID: zone))
            record.encryptedValues["secret"] = "Met a marmot"
            record["note"] = "Saw a heron"
            records.append(record)
        }
        records.append(Record(recordType: "Entry", recordID: Record.ID(recordName: "d3", zoneID: zone)))
        _ = try await database.modifyRecords(saving: records, deleting: [])
        return (database, zone)
    }

    @Test("without encrypting:, a field keeps the encryption each record's value has: the value it holds already is unchanged, a new one is written as it was")
    func keepsEachFieldsEncryption() async throws {
        try await SQLiteFixture.with { fixture in
            let (database, zone) = try await Self.diaries(fixture)
            let same = try await RecordUpdater(database: database, query: Query(recordType: "Entry", format: "recordName == 'd1'"), zoneID: zone,
                                               setting: ["secret": .string("Met a marmot")]).run()
            #expect(same.unchanged == 1 && same.updated == 0 && same.failed == 0, "\(same)")

            let changed = try await RecordUpdater(database: database, query: Query(recordType: "Entry", format: "recordName IN {'d1', 'd2'}"), zoneID: zone,
                                                  setting: ["secret": .string("Rain"), "note": .string("Sun")]).run()
            #expect(changed.updated == 2 && changed.failed == 0, "\(changed)")
            let d1 = try await database.record(for: Record.ID(recordName: "d1", zoneID: zone))
            #expect(d1.encryptedValues["secret"] as? String == "Rain", "the encrypted field stays encrypted")
            #expect(d1["note"] as? String == "Sun" && d1.encryptedValues["note"] == nil, "the plain field stays plain")
        }
    }

    /// Bob's 5 public `Item`s (a0…a4), which alice may not write, sorting before alice's 100 (b000…b099).
    static func itemsPartlyBobs(_ fixture: SQLiteFixture) async throws -> Database {
        _ = try await TestDatabase.save(makeRecords("Item", count: 5, prefix: "a") { _ in ["tag": .string("old")] }, in: fixture.container(user: "bob").publicCloudDatabase)
        let alice = fixture.container().publicCloudDatabase
        _ = try await TestDatabase.save(makeRecords("Item", count: 100, prefix: "b") { _ in ["tag": .string("old")] }, in: alice)
        return alice
    }

    @Test("a run resumed from a checkpoint reports the failures of the runs before it, and --max-errors counts the whole job: a run after the one it stopped stops at once")
    func failuresOfEarlierRunsCount() async throws {
        try await SQLiteFixture.with { fixture in
            let database = try await Self.itemsPartlyBobs(fixture)
            var options = RecordUpdater.Options()
            options.batchSize = 10
            func updater(_ options: RecordUpdater.Options) -> RecordUpdater {
                RecordUpdater(database: database, query: Query(recordType: "Item"), setting: ["tag": .string("new")], options: options)
            }
            // Stopped after its first batch, which held bob's five records.
            let stopping = updater(options)
            let first = try await stopping.run(checkpoint: PipelineCheckpoint(job: "retag"), failed: { _, _ in stopping.cancel() })
            #expect(first.end == .cancelled && first.failed == 5 && first.failedInEarlierRuns == 0, "\(first)")
            let second = try await updater(options).run(checkpoint: PipelineCheckpoint(job: "retag"))
            #expect(second.end == .finished && second.failed == 0 && second.failedInEarlierRuns == 5, "\(second)")
            #expect(first.updated + second.updated == 100, "alice's records, each once: \(first) \(second)")

            // The limit: 3 failures; the first batch's 5 (bob's, which still hold the old tag) pass it.
            options.maximumFailures = 3
            let limited = try await updater(options).run(checkpoint: PipelineCheckpoint(job: "again"))
            #expect(limited.end == .failureLimitReached && limited.failed == 5, "\(limited)")
            let atOnce = try await updater(options).run(checkpoint: PipelineCheckpoint(job: "again"))
            #expect(atOnce.end == .failureLimitReached && atOnce.matched == 0 && atOnce.updated == 0 && atOnce.failedInEarlierRuns == 5, "\(atOnce)")
            options.maximumFailures = 10
            let past = try await updater(options).run(checkpoint: PipelineCheckpoint(job: "again"))
            #expect(past.end == .finished && past.failed == 0 && past.failedInEarlierRuns == 5, "a larger limit goes on: \(past)")
        }
    }

    @Test("progress comes once a batch (a run whose records need no write too), and at the end with the whole summary (found by a pipeline tester: every 256 records, once for an unchanged run)")
    func progressOnceABatch() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.container().publicCloudDatabase
            _ = try await TestDatabase.save(makeRecords("Item", count: 30, prefix: "i") { _ in [:] }, in: database)
            var options = RecordUpdater.Options()
            options.batchSize = 10
            for round in ["changing", "unchanged"] {
                let seen = Box<[RecordUpdater.Summary]>([])
                let summary = try await RecordUpdater(database: database, query: Query(recordType: "Item"), setting: ["tag": .string("new")], options: options)
                    .run(progress: { now in seen.update { $0.append(now) } })
                #expect(seen.value.count >= 3 && seen.value.last == summary && summary.matched == 30, "\(round): \(seen.value)")
            }
            var deleteOptions = RecordDeleter.Options()
            deleteOptions.batchSize = 10
            let seen = Box<[RecordDeleter.Summary]>([])
            let deleted = try await RecordDeleter(database: database, query: Query(recordType: "Item"), options: deleteOptions)
                .run(progress: { now in seen.update { $0.append(now) } })
            #expect(deleted.deleted == 30 && seen.value.filter { $0.deleted % 10 == 0 && $0.deleted > 0 }.count >= 3 && seen.value.last == deleted, "\(seen.value)")
        }
    }

    @Test("a cancel ends with the run it stopped: the same updater or deleter runs again and does its work (found by a pipeline tester: every later run did nothing)")
    func cancelledJobsRunAgain() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.container().publicCloudDatabase
            _ = try await TestDatabase.save(makeRecords("Item", count: 30, prefix: "i") { _ in [:] }, in: database)
            var options = RecordUpdater.Options()
            options.batchSize = 10
            let updater = RecordUpdater(database: database, query: Query(recordType: "Item"), setting: ["tag": .string("new")], options: options)
            updater.cancel()
            let stopped = try await updater.run()
            #expect(stopped.end == .cancelled && stopped.updated < 30, "\(stopped)")
            let again = try await updater.run()
            #expect(again.end == .finished && stopped.updated + again.updated == 30 && again.unchanged == stopped.updated, "\(stopped) \(again)")

            var deleteOptions = RecordDeleter.Options()
            deleteOptions.batchSize = 10
            let deleter = RecordDeleter(database: database, query: Query(recordType: "Item"), options: deleteOptions)
            deleter.cancel()
            let held = try await deleter.run()
            #expect(held.end == .cancelled && held.deleted < 30, "\(held)")
            let deleted = try await deleter.run()
            #expect(deleted.end == .finished && held.deleted + deleted.deleted == 30, "\(held) \(deleted)")
            let (left, _) = try await database.records(matching: Query(recordType: "Item"), inZoneWith: nil)
            #expect(left.isEmpty)
        }
    }

    @Test("a record the store refuses because the values would pass its field data limit counts among the failures a resumed run reports")
    func failuresBeforeTheTransactionCount() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.container().publicCloudDatabase
            let full = makeRecord("Item", "a-full", ["blob": .string(String(repeating: "x", count: 999_000))])
            _ = try await TestDatabase.save([full] + makeRecords("Item", count: 30, prefix: "b") { _ in [:] }, in: database)
            var options = RecordUpdater.Options()
            options.batchSize = 10
            func updater() -> RecordUpdater {
                RecordUpdater(database: database, query: Query(recordType: "Item"), setting: ["tag": .string(String(repeating: "t", count: 2_000))], options: options)
            }
            let stopping = updater()
            let first = try await stopping.run(checkpoint: PipelineCheckpoint(job: "tag"), failed: { _, _ in stopping.cancel() })
            #expect(first.end == .cancelled && first.failed == 1, "\(first)")
            let second = try await updater().run(checkpoint: PipelineCheckpoint(job: "tag"))
            #expect(second.end == .finished && second.failedInEarlierRuns == 1 && first.updated + second.updated == 30, "\(first) \(second)")
        }
    }

    @Test("encrypting: writes the values encrypted")
    func encryptsWhatItIsAsked() async throws {
        try await SQLiteFixture.with { fixture in
            let (database, zone) = try await Self.diaries(fixture)
            let sealing = try await RecordUpdater(database: database, query: Query(recordType: "Entry", format: "recordName == 'd3'"), zoneID: zone,
                                                  setting: ["secret": .string("Saw an otter")], encrypting: ["secret"]).run()
            #expect(sealing.updated == 1 && sealing.failed == 0, "\(sealing)")
            let d3 = try await database.record(for: Record.ID(recordName: "d3", zoneID: zone))
            #expect(d3.encryptedValues["secret"] as? String == "Saw an otter")
        }
    }
}
