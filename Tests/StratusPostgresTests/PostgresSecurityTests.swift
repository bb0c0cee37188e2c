import Foundation
@_spi(StratusEngine) import Stratus
import StratusPostgres
import StratusTestSupport
import Testing

/// Each Stratus user is a PostgreSQL role: row-level security keeps another user's private
/// records out of reach, through Stratus and with raw SQL as that role alike; the engine needs
/// no superuser.
@Suite("PostgreSQL row-level security", .requiresPostgres, .timeLimit(.minutes(10)))
struct PostgresSecurityTests {
    @Test("a role reaches public rows and its own private rows only, also with raw SQL; acting as another user is refused")
    func privateRowsAreUnreachable() async throws {
        let database = try PostgresTestServer.makeDatabase()
        let suffix = String(UInt32.random(in: 0...UInt32.max), radix: 36)
        let (group, alice, bob) = ("stratus_users_\(suffix)", "alice_\(suffix)", "bob_\(suffix)")
        let admin = try PostgresConnection(url: database.url)
        try admin.executeScript("""
            CREATE ROLE \(group) NOLOGIN;
            CREATE ROLE \(alice) LOGIN IN ROLE \(group);
            CREATE ROLE \(bob) LOGIN IN ROLE \(group);
            """)
        defer { try? admin.executeScript("DROP OWNED BY \(alice), \(bob), \(group); DROP ROLE IF EXISTS \(alice), \(bob), \(group)") }
        // The administrator creates the store and turns security on; the users are plain roles.
        let owner = try PostgresEngine(url: database.url)
        try owner.enableRowLevelSecurity(group: group)
        // The administrator says who is who: each login and the user record name its rows carry.
        let identifier = "com.example.secure"
        let (aliceName, bobName) = (UserDirectoryEntry.derivedRecordName(containerIdentifier: identifier, login: alice),
                                    UserDirectoryEntry.derivedRecordName(containerIdentifier: identifier, login: bob))
        try await Container(identifier: identifier, engine: owner, userName: "admin").saveUsers([
            UserDirectoryEntry(login: alice, userRecordName: aliceName), UserDirectoryEntry(login: bob, userRecordName: bobName),
        ])
        let asAlice = try PostgresEngine(url: try PostgresConnectionString.replacing(["user": alice], in: database.url))
        let asBob = try PostgresEngine(url: try PostgresConnectionString.replacing(["user": bob], in: database.url))
        #expect(try asAlice.currentRole() == alice)

        let aliceContainer = Container(identifier: identifier, engine: asAlice, userName: alice)
        let diary = try await aliceContainer.privateCloudDatabase.save(RecordZone(zoneName: "Diary"))
        try await TestDatabase.save([makeRecord("Entry", "secret", zoneID: diary.zoneID, ["text": .string("dear diary")])], in: aliceContainer.privateCloudDatabase)
        try await TestDatabase.save([makeRecord("Note", "shared-note", ["text": .string("hello all")])], in: aliceContainer.publicCloudDatabase)

        // Through Stratus, bob sees the public note and nothing of alice's private database.
        let bobContainer = Container(identifier: identifier, engine: asBob, userName: bob)
        #expect(try await bobContainer.publicCloudDatabase.record(for: Record.ID(recordName: "shared-note"))["text"] as? String == "hello all")
        #expect(try await bobContainer.privateCloudDatabase.allRecordZones().map(\.zoneID.zoneName) == ["_defaultZone"])

        // Bob claiming to be alice: her rows are not there for him, and his writes as her are refused.
        let impostor = Container(identifier: identifier, engine: asBob, userName: alice)
        let hidden = await caughtError { try await impostor.privateCloudDatabase.record(for: Record.ID(recordName: "secret", zoneID: diary.zoneID)) }
        #expect([.zoneNotFound, .unknownItem].contains(stratusError(hidden)?.code), "\(String(describing: hidden))")
        let forged = await caughtError {
            try await TestDatabase.save([makeRecord("Entry", "forged")], in: impostor.privateCloudDatabase)
        }
        #expect(stratusError(forged) != nil, "a write into another user's private database is refused")

        // Raw SQL as bob: no private row of alice's in any table.
        let raw = try PostgresConnection(url: try PostgresConnectionString.replacing(["user": bob], in: database.url))
        for table in ["zones", "records", "database_history", "refs", "record_tokens", "tombstones", "asset_contents", "asset_chunks", "asset_refs", "asset_holds"] {
            let count = try raw.query("SELECT count(*) FROM \(table) WHERE owner = $1", [.text(aliceName)])[0].int64(0)
            #expect(count == 0, "\(table) shows bob \(count ?? -1) of alice's rows")
        }
        #expect(try raw.query("SELECT count(*) FROM records")[0].int64(0) == 1, "only the public note")
        #expect(try raw.execute("UPDATE records SET change_tag = 'x' WHERE owner = $1", [.text(aliceName)]) == 0)
        #expect(try raw.execute("DELETE FROM zones WHERE owner = $1", [.text(aliceName)]) == 0)
        let insert = stratusError(await caughtError {
            try raw.execute("INSERT INTO database_history(container, db, owner, change_seq) VALUES ('c', 2, $1, 1)", [.text(aliceName)])
        })
        #expect(insert?.code == .permissionFailure, "row-level security refuses a row owned by another user: \(String(describing: insert))")
        // Alice still has everything.
        let entry = try await aliceContainer.privateCloudDatabase.record(for: Record.ID(recordName: "secret", zoneID: diary.zoneID))
        #expect(entry["text"] as? String == "dear diary")
        #expect(try PostgresConnection(url: try PostgresConnectionString.replacing(["user": alice], in: database.url))
            .query("SELECT count(*) FROM records WHERE owner = $1", [.text(aliceName)])[0].int64(0) == 1)
        // Bob cannot say he is alice in the directory either.
        let claim = stratusError(await caughtError {
            try raw.execute("INSERT INTO user_directory(container, login, user_record_name, roles) VALUES ($1, $2, $3, '[]')", [.text(identifier), .text(bob + "2"), .text(aliceName)])
        })
        #expect(claim?.code == .permissionFailure, "\(String(describing: claim))")
        _ = owner
    }
}
