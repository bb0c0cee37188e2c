import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

@Suite("SQLite user discovery upgrade")
struct SQLiteUserDiscoveryUpgradeTests {
    @Test("a version 11 store, which kept no discovery tables, opens as the current version with its directory whole; its users then become discoverable")
    func upgradeFromVersion11() async throws {
        try await TemporaryStore.with { store in
            let shell = try #require(StoreProcess.sqlite3, "the sqlite3 shell is needed (apt-get install sqlite3)")
            let path = store.path()
            let identifier = "com.example.people"
            let carolName = "_5a0f3c9e8b7d6a4f2e1c0b9a8d7e6f5a"
            try await Container(identifier: identifier, engine: try SQLiteEngine(path: path), userName: "alice")
                .saveUsers([UserDirectoryEntry(login: "carol", userRecordName: carolName, roles: ["moderator"])])
            // Version 11's tables: the same, without user discovery's.
            let down = try await StoreProcess.runSQL(shell, path, "DROP TABLE user_identities; DROP TABLE user_addresses; PRAGMA user_version = 11;", in: store.directory)
            #expect(down.exitCode == 0, "\(down.stdout)\(down.stderr)")

            let alice = Container(identifier: identifier, engine: try SQLiteEngine(path: path), userName: "alice")
            let carol = try #require(try await alice.users().first)
            #expect(carol == UserDirectoryEntry(login: "carol", userRecordName: carolName, roles: ["moderator"]), "kept, undiscoverable, without addresses")
            var discoverable = carol
            discoverable.emailAddresses = ["carol@example.com"]
            discoverable.isDiscoverable = true
            try await alice.saveUsers([discoverable])
            #expect(try await alice.userIdentity(forEmailAddress: "carol@example.com")?.userRecordID?.recordName == carolName)
            let version = try await StoreProcess.runSQL(shell, path, "PRAGMA user_version;", in: store.directory)
            #expect(version.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "15", "the current version")
        }
    }
}
