import Foundation
import Stratus
import StratusPostgres
import StratusTestSupport
import Testing

@Suite("PostgreSQL share index upgrade", .requiresPostgres)
struct PostgresShareIndexUpgradeTests {
    @Test("a version 11 store, which kept no share index, opens as the current version with its shares indexed: an invitee finds the share by URL and reaches it once accepted")
    func upgradeFromVersion11() async throws {
        let schema = try PostgresTestServer.makeSchema()
        let identifier = "com.example.lists"
        let url = try await ShareInvitationFixture.save(on: try PostgresEngine(url: schema.url), identifier: identifier)
        // Version 11's tables: the same, without the share index and the index of records by parent.
        let admin = try PostgresConnection(url: schema.url)
        try admin.executeScript("DROP TABLE share_index; DROP TABLE share_members; DROP INDEX records_by_parent; UPDATE meta SET value = '11' WHERE key = 'version';")

        let bob = Container(identifier: identifier, engine: try PostgresEngine(url: schema.url), userName: "bob")
        let metadata = try await bob.shareMetadata(for: url)
        #expect(metadata.participantStatus == .pending && metadata.hierarchicalRootRecordID?.recordName == "groceries")
        try await bob.accept(metadata)
        #expect(try await bob.sharedCloudDatabase.allRecordZones().map(\.zoneID.zoneName) == ["Lists"])
        #expect(try admin.query("SELECT value FROM meta WHERE key = 'version'")[0].text(0) == "21")
        #expect(try admin.query("SELECT count(*) FROM pg_indexes WHERE indexname = 'records_by_parent' AND schemaname = $1", [.text(schema.name)])[0].int64(0) == 1)
    }
}
