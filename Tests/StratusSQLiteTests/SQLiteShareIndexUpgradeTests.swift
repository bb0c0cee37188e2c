import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

@Suite("SQLite share index upgrade")
struct SQLiteShareIndexUpgradeTests {
    @Test("a version 10 store, which kept no share index, opens as the current version with its shares indexed: an invitee finds the share by URL and reaches it once accepted")
    func upgradeFromVersion10() async throws {
        try await TemporaryStore.with { store in
            let shell = try #require(StoreProcess.sqlite3, "the sqlite3 shell is needed (apt-get install sqlite3)")
            let path = store.path()
            let identifier = "com.example.lists"
            let url = try await ShareInvitationFixture.save(on: try SQLiteEngine(path: path), identifier: identifier)
            // Version 10's tables: the same, without the share index.
            let down = try await StoreProcess.runSQL(shell, path, "DROP TABLE share_index; DROP TABLE share_members; PRAGMA user_version = 10;", in: store.directory)
            #expect(down.exitCode == 0, "\(down.stdout)\(down.stderr)")

            let bob = Container(identifier: identifier, engine: try SQLiteEngine(path: path), userName: "bob")
            let metadata = try await bob.shareMetadata(for: url)
            #expect(metadata.participantStatus == .pending && metadata.hierarchicalRootRecordID?.recordName == "groceries")
            try await bob.accept(metadata)
            #expect(try await bob.sharedCloudDatabase.allRecordZones().map(\.zoneID.zoneName) == ["Lists"])
            let version = try await StoreProcess.runSQL(shell, path, "PRAGMA user_version;", in: store.directory)
            #expect(version.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "15", "the current version")
        }
    }

    @Test("a version 12 store opens as the current version, with records indexed by parent: the shared database's question about a name's children reads the index")
    func upgradeFromVersion12() async throws {
        try await TemporaryStore.with { store in
            let shell = try #require(StoreProcess.sqlite3, "the sqlite3 shell is needed (apt-get install sqlite3)")
            let path = store.path()
            _ = try await ShareInvitationFixture.save(on: try SQLiteEngine(path: path), identifier: "com.example.lists")
            let down = try await StoreProcess.runSQL(shell, path, "DROP INDEX records_by_parent; PRAGMA user_version = 12;", in: store.directory)
            #expect(down.exitCode == 0, "\(down.stdout)\(down.stderr)")

            _ = try SQLiteEngine(path: path)
            let after = try await StoreProcess.runSQL(shell, path, """
                PRAGMA user_version;
                EXPLAIN QUERY PLAN SELECT 1 FROM records WHERE zone_id = 1 AND parent_name = 'groceries' LIMIT 1;
                """, in: store.directory)
            let lines = after.stdout.split(separator: "\n")
            #expect(lines.first == "15", "the current version: \(after.stdout)")
            #expect(lines.contains { $0.contains("USING COVERING INDEX records_by_parent") || $0.contains("USING INDEX records_by_parent") }, "\(after.stdout)")
        }
    }
}
