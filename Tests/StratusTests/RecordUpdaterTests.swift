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
