import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

@Suite("SQLite hierarchy moves upgrade")
struct SQLiteHierarchyMovesUpgradeTests {
    @Test("a version 13 store, which kept no hierarchy moves, opens as the current version; a record the owner then moves out of a share is reported deleted to its participant")
    func upgradeFromVersion13() async throws {
        try await TemporaryStore.with { store in
            let shell = try #require(StoreProcess.sqlite3, "the sqlite3 shell is needed (apt-get install sqlite3)")
            let path = store.path()
            let identifier = "com.example.lists"
            let alice = Container(identifier: identifier, engine: try SQLiteEngine(path: path), userName: "alice")
            let bob = Container(identifier: identifier, engine: try SQLiteEngine(path: path), userName: "bob")
            let zoneID = RecordZone.ID(zoneName: "Lists")
            _ = try await alice.privateCloudDatabase.modifyRecordZones(saving: [RecordZone(zoneID: zoneID)], deleting: [])
            let root = Record(recordType: "List", recordID: Record.ID(recordName: "groceries", zoneID: zoneID))
            let milk = Record(recordType: "Item", recordID: Record.ID(recordName: "milk", zoneID: zoneID))
            milk.setParent(root)
            let (written, _) = try await alice.privateCloudDatabase.modifyRecords(saving: [root, milk], deleting: [])
            let share = Share(rootRecord: try #require(try written[root.recordID]?.get()))
            let participant = Share.Participant(userIdentity: UserIdentity(userRecordID: try await bob.userRecordID()))
            participant.permission = .readOnly
            share.addParticipant(participant)
            let (saves, _) = try await alice.privateCloudDatabase.modifyRecords(saving: [try #require(try written[root.recordID]?.get()), share], deleting: [])
            let saved = try #require(try saves[share.recordID]?.get() as? Share)
            try await bob.accept(try await bob.shareMetadata(for: try #require(saved.url)))
            let sharedZone = RecordZone.ID(zoneName: "Lists", ownerName: try await alice.userRecordID().recordName)
            let before = try await bob.sharedCloudDatabase.recordZoneChanges(inZoneWith: sharedZone, since: nil)
            #expect(before.modificationResultsByID.keys.contains { $0.recordName == "milk" })
            // Version 13's tables: the same, without the moves.
            let down = try await StoreProcess.runSQL(shell, path, "DROP TABLE hierarchy_moves; ALTER TABLE tombstones DROP COLUMN left_roots; PRAGMA user_version = 13;", in: store.directory)
            #expect(down.exitCode == 0, "\(down.stdout)\(down.stderr)")

            let reopened = Container(identifier: identifier, engine: try SQLiteEngine(path: path), userName: "alice")
            let stored = try await reopened.privateCloudDatabase.record(for: milk.recordID)
            stored.setParent(nil as Record.ID?)
            _ = try await reopened.privateCloudDatabase.save(stored)
            let bobAgain = Container(identifier: identifier, engine: try SQLiteEngine(path: path), userName: "bob")
            let after = try await bobAgain.sharedCloudDatabase.recordZoneChanges(inZoneWith: sharedZone, since: before.changeToken)
            #expect(after.deletions.map(\.recordID.recordName) == ["milk"] && after.modificationResultsByID.isEmpty)
            let version = try await StoreProcess.runSQL(shell, path, "PRAGMA user_version;", in: store.directory)
            #expect(version.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "15", "the current version")
        }
    }
}
