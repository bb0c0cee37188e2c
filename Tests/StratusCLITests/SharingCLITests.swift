import Foundation
import Stratus
import StratusTestSupport
import Testing

/// Shares through the tool: an export writes a share's participants, permission and URL token,
/// and its root's `share`, as CloudKit's record JSON names them; an import and a copy restore
/// them whole, so the restored store hands back the same Share, and its root's deletion still
/// takes the share.
@Suite("Sharing through the tool (export, import, copy)")
struct SharingCLITests {

    /// Alice's share of `groceries` in her zone `Lists`, with Bob invited, saved through the library.
    private static func shareGroceries(_ cli: CLI) async throws -> (share: Share, url: URL) {
        let database = try cli.container(user: "alice").privateCloudDatabase
        let zoneID = RecordZone.ID(zoneName: "Lists")
        _ = try await database.modifyRecordZones(saving: [RecordZone(zoneID: zoneID)], deleting: [])
        let list = Record(recordType: "List", recordID: Record.ID(recordName: "groceries", zoneID: zoneID))
        list["title"] = "Groceries"
        let share = Share(rootRecord: list)
        share[Share.SystemFieldKey.title] = "Groceries"
        share.publicPermission = .readOnly
        let bob = Share.Participant(userIdentity: UserIdentity(userRecordID: Record.ID(recordName: "_bob")))
        bob.permission = .readWrite
        share.addParticipant(bob)
        let (saves, _) = try await database.modifyRecords(saving: [list, share], deleting: [])
        let saved = try #require(try saves[share.recordID]?.get() as? Share)
        return (saved, try #require(saved.url))
    }

    /// Checks that the store at `location` holds Alice's share whole, then that deleting its root
    /// deletes it there.
    private static func expectShareWhole(_ cli: CLI, at location: String, id: Record.ID, url: URL, _ what: String) async throws {
        let database = try cli.container(user: "alice", at: location).privateCloudDatabase
        let share = try #require(try await database.record(for: id) as? Share, "\(what)")
        #expect(share.url == url && share.publicPermission == .readOnly && share[Share.SystemFieldKey.title] as? String == "Groceries", "\(what)")
        let bob = share.participants.first { $0.userIdentity.userRecordID?.recordName == "_bob" }
        #expect(share.participants.count == 2 && bob?.permission == .readWrite && share.owner.role == .owner, "\(what): \(share.participants)")
        let root = try await database.record(for: Record.ID(recordName: "groceries", zoneID: id.zoneID))
        #expect(root.share?.recordID == id, "\(what)")
        _ = try await database.deleteRecord(withID: root.recordID)
        #expect(try await TestDatabase.exists(id.recordName, zoneID: id.zoneID, in: database) == false, "\(what): deleting the root deletes its share")
    }

    @Test("an export writes a share's participants, permission, URL token and its root's share; an import restores the share whole", arguments: TestEngine.all)
    func exportAndImport(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let (share, url) = try await Self.shareGroceries(cli)
            let place = ["--database", "private", "--zone", "Lists", "--user", "alice"]

            let shares = try await cli.run(["export", "--type", "cloudkit.share"] + place)
            #expect(shares.exitCode == 0, "\(shares)")
            let line = try #require(try JSONLine.objects(shares.stdout).first)
            #expect(line["recordType"] as? String == "cloudkit.share" && line["publicPermission"] as? String == "READ_ONLY")
            #expect((line["participants"] as? [[String: Any]])?.count == 2)
            #expect(url.absoluteString.hasSuffix(line["shortGUID"] as? String ?? "-"))
            #expect(!shares.stdout.contains(store.directory.path), "an export names no store")
            let lists = try await cli.run(["export", "--type", "List"] + place)
            let root = try #require(try JSONLine.objects(lists.stdout).first)
            #expect((root["share"] as? [String: Any])?["recordName"] as? String == share.recordID.recordName, "\(lists)")

            // Into a new store: the root first, as an export of every type may come.
            let other = try await cli.newStore("imported.sqlite")
            for (file, text) in [("lists.ndjson", lists.stdout), ("shares.ndjson", shares.stdout)] {
                let imported = try await cli.run(["import", try cli.file(file, text), "--keep-system-records", "--create-zones"] + place, environment: ["STRATUS_STORE": other])
                #expect(imported.exitCode == 0, "\(imported)")
            }
            try await Self.expectShareWhole(cli, at: other, id: share.recordID, url: url, "imported")
        }
    }

    @Test("stratus copy keeps a share whole: participants, permission, URL and its root's share", arguments: TestEngine.all)
    func copy(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let (share, url) = try await Self.shareGroceries(cli)
            let destination = try await cli.newStore("copy.sqlite")
            let copied = try await cli.run(["copy", "--from", cli.storePath, "--to", destination, "--quiet"])
            #expect(copied.exitCode == 0, "\(copied)")
            try await Self.expectShareWhole(cli, at: destination, id: share.recordID, url: url, "copied")
        }
    }
}
