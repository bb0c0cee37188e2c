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

    @Test("CloudKit's record JSON of a share (participants, publicPermission, shortGUID) and of its root (share) imports as a Share its root names, and exports back", arguments: TestEngine.all)
    func cloudKitShareJSON(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let zone = #""zoneID":{"zoneName":"Trips","ownerRecordName":"__defaultOwner__","zoneType":"REGULAR_CUSTOM_ZONE"}"#
            let participant = #"{"participantId":"p-1","userIdentity":{"userRecordName":"_0123456789abcdef0123456789abcdef","nameComponents":{"givenName":"Ann"},"lookupInfo":{"emailAddress":"ann@example.com"}},"type":"USER","acceptanceStatus":"ACCEPTED","permission":"READ_ONLY","orgUser":false}"#
            let lines = [
                #"{"recordName":"trip-1","recordType":"Trip","fields":{"name":{"value":"Alps","type":"STRING"}},"share":{"recordName":"share-1",\#(zone)},\#(zone)}"#,
                #"{"recordName":"share-1","recordType":"cloudkit.share","fields":{"cloudkit.title":{"value":"Alps","type":"STRING"}},"publicPermission":"NONE","participants":[\#(participant)],"shortGUID":"0aBcDeFgHiJkLmNoPqRsTu",\#(zone)}"#,
            ]
            let imported = try await cli.run(["import", try cli.file("trip.ndjson", lines.joined(separator: "\n") + "\n"), "--keep-system-records", "--create-zones",
                                              "--database", "private", "--user", "alice"])
            #expect(imported.exitCode == 0, "\(imported)")
            let database = try cli.container(user: "alice").privateCloudDatabase
            let zoneID = RecordZone.ID(zoneName: "Trips")
            let share = try #require(try await database.record(for: Record.ID(recordName: "share-1", zoneID: zoneID)) as? Share)
            #expect(share[Share.SystemFieldKey.title] as? String == "Alps" && share.publicPermission == .none)
            #expect(share.url?.absoluteString == "stratus://share/0aBcDeFgHiJkLmNoPqRsTu")
            let ann = try #require(share.participants.first)
            #expect(ann.role == .privateUser && ann.acceptanceStatus == .accepted && ann.permission == .readOnly && ann.participantID == "p-1")
            #expect(ann.userIdentity.nameComponents?.givenName == "Ann" && ann.userIdentity.lookupInfo?.emailAddress == "ann@example.com")
            #expect(try await database.record(for: Record.ID(recordName: "trip-1", zoneID: zoneID)).share?.recordID.recordName == "share-1")

            // Exported back, the share's members are CloudKit's as they came (orgUser too).
            let exported = try await cli.run(["export", "--type", "cloudkit.share", "--database", "private", "--zone", "Trips", "--user", "alice"])
            let line = try #require(try JSONLine.objects(exported.stdout).first, "\(exported)")
            #expect(line["shortGUID"] as? String == "0aBcDeFgHiJkLmNoPqRsTu" && line["publicPermission"] as? String == "NONE")
            #expect((line["participants"] as? [[String: Any]])?.first?["orgUser"] as? Bool == false)
        }
    }

    @Test("CloudKit's JSON of a record share and its root, imported together, shares the root with its accepted participants and nothing else of the zone, and goes with its root (found by a PostgreSQL tester: the share had no root, and a participant's raw SQL read the whole zone)", arguments: TestEngine.all)
    func importedShareSharesItsRoot(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let bobName = try await cli.container(user: "bob").userRecordID().recordName
            let owner = try await cli.container(user: "alice").userRecordID().recordName
            let participant = #"{"participantId":"p-1","userIdentity":{"userRecordName":"\#(bobName)"},"type":"USER","acceptanceStatus":"ACCEPTED","permission":"READ_ONLY"}"#
            // In one batch, and with the root and its share in batches of their own (the reviewer's case).
            for (zoneName, token, batching) in [("Trips", "1aBcDeFgHiJkLmNoPqRsTu", [String]()), ("Hikes", "2aBcDeFgHiJkLmNoPqRsTu", ["--batch-size", "1"])] {
                let zone = #""zoneID":{"zoneName":"\#(zoneName)","ownerRecordName":"__defaultOwner__","zoneType":"REGULAR_CUSTOM_ZONE"}"#
                let lines = [
                    #"{"recordName":"trip-1","recordType":"Trip","fields":{"name":{"value":"Alps","type":"STRING"}},"share":{"recordName":"share-1",\#(zone)},\#(zone)}"#,
                    #"{"recordName":"trip-secret","recordType":"Trip","fields":{"name":{"value":"Secret","type":"STRING"}},\#(zone)}"#,
                    #"{"recordName":"share-1","recordType":"cloudkit.share","fields":{"cloudkit.title":{"value":"Alps","type":"STRING"}},"publicPermission":"NONE","participants":[\#(participant)],"shortGUID":"\#(token)",\#(zone)}"#,
                ]
                let imported = try await cli.run(["import", try cli.file("\(zoneName).ndjson", lines.joined(separator: "\n") + "\n"), "--keep-system-records", "--create-zones",
                                                  "--database", "private", "--user", "alice"] + batching)
                #expect(imported.exitCode == 0, "\(imported)")
                let query = try await cli.run(["query", "--type", "Trip", "--zone", zoneName, "--zone-owner", owner, "--database", "shared", "--user", "bob"])
                let reached = try JSONLine.objects(query.stdout).map { $0["recordName"] as? String }
                #expect(query.exitCode == 0 && reached == ["trip-1"], "\(zoneName): the root, not trip-secret: \(query)")

                let alice = try cli.container(user: "alice").privateCloudDatabase
                let zoneID = RecordZone.ID(zoneName: zoneName)
                _ = try await alice.deleteRecord(withID: Record.ID(recordName: "trip-1", zoneID: zoneID))
                let gone = stratusError(await caughtError { try await alice.record(for: Record.ID(recordName: "share-1", zoneID: zoneID)) })
                #expect(gone?.code == .unknownItem, "\(zoneName): deleting the root deletes its share, as in CloudKit: \(String(describing: gone))")
            }
        }
    }

    @Test("a record share restored before its root in another batch (so without a root) tells its participants' subscriptions of no record of the zone, as it shares none (found in review: it told of every change, as a zone-wide share does)", arguments: TestEngine.all)
    func rootlessShareTellsNothing(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let bobName = try await cli.container(user: "bob").userRecordID().recordName
            let zone = #""zoneID":{"zoneName":"Trips","ownerRecordName":"__defaultOwner__","zoneType":"REGULAR_CUSTOM_ZONE"}"#
            let participant = #"{"participantId":"p-1","userIdentity":{"userRecordName":"\#(bobName)"},"type":"USER","acceptanceStatus":"ACCEPTED","permission":"READ_ONLY"}"#
            let lines = [
                #"{"recordName":"share-1","recordType":"cloudkit.share","fields":{"cloudkit.title":{"value":"Alps","type":"STRING"}},"publicPermission":"NONE","participants":[\#(participant)],"shortGUID":"3aBcDeFgHiJkLmNoPqRsTu",\#(zone)}"#,
                #"{"recordName":"trip-1","recordType":"Trip","fields":{"name":{"value":"Alps","type":"STRING"}},"share":{"recordName":"share-1",\#(zone)},\#(zone)}"#,
            ]
            let imported = try await cli.run(["import", try cli.file("trips.ndjson", lines.joined(separator: "\n") + "\n"), "--keep-system-records", "--create-zones",
                                              "--database", "private", "--user", "alice", "--batch-size", "1"])
            #expect(imported.exitCode == 0, "\(imported)")
            let subscribed = try await cli.run(["subscriptions", "create", "everything", "--database-wide", "--database", "shared", "--user", "bob"])
            #expect(subscribed.exitCode == 0, "\(subscribed)")
            let diary = #"{"recordName":"diary","recordType":"Trip","fields":{"name":{"value":"Private","type":"STRING"}},\#(zone)}"# + "\n"
            #expect(try await cli.run(["import", try cli.file("diary.ndjson", diary), "--database", "private", "--user", "alice", "--quiet"]).exitCode == 0)
            let told = try await cli.run(["notifications", "--token-file", store.path("bob.token"), "--user", "bob"])
            #expect(told.exitCode == 0 && told.stdout.isEmpty, "\(told)")
        }
    }

    @Test("a share's JSON exports back as it came (a role or status this version does not know, members left out), and one without a URL token keeps the one it got: importing either again changes nothing", arguments: TestEngine.all)
    func shareJSONComesBackAsItCame(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let alice = try await cli.container(user: "alice").userRecordID().recordName
            let zone = #""zoneID":{"zoneName":"Shared","ownerRecordName":"\#(alice)"}"#
            let participants = [
                #"{"participantId":"p1","userIdentity":{"userRecordName":"\#(alice)"},"type":"OWNER","acceptanceStatus":"ACCEPTED","permission":"READ_WRITE"}"#,
                #"{"participantId":"p2","userIdentity":{"userRecordName":"_11111111111111111111111111111111","hasiCloudAccount":true},"type":"ADMINISTRATOR","acceptanceStatus":"ACCEPTED","permission":"READ_WRITE"}"#,
                #"{"participantId":"p3","userIdentity":{"userRecordName":"_22222222222222222222222222222222"},"type":"USER","acceptanceStatus":"REQUESTED","permission":"NONE"}"#,
            ]
            let shares = [
                #"{"recordName":"with-roles","recordType":"cloudkit.share","recordChangeTag":"k1","fields":{},\#(zone),"publicPermission":"NONE","participants":[\#(participants.joined(separator: ","))],"shortGUID":"0aBcD"}"#,
                #"{"recordName":"no-participants","recordType":"cloudkit.share","recordChangeTag":"k2","fields":{},\#(zone),"publicPermission":"NONE","shortGUID":"0aBcE"}"#,
                #"{"recordName":"no-token","recordType":"cloudkit.share","recordChangeTag":"k3","fields":{},\#(zone),"publicPermission":"NONE","participants":[\#(participants[0])]}"#,
            ]
            // A CloudKit answer: what it leaves out (here the creation) stays left out.
            let input = try cli.file("shares.json", #"{"records":["# + shares.joined(separator: ",") + "]}")
            let arguments = ["import", input, "--keep-system-records", "--create-zones", "--database", "private", "--user", "alice"]
            let first = try await cli.run(arguments)
            #expect(first.exitCode == 0 && first.stderr.contains("imported 3, updated 0, unchanged 0"), "\(first)")
            let exported = try await cli.run(["export", "--type", "cloudkit.share", "--database", "private", "--zone", "Shared", "--user", "alice"])
            var lines = try JSONLine.objects(exported.stdout)
            lines.sort { ($0["recordName"] as? String ?? "") < ($1["recordName"] as? String ?? "") }
            #expect(lines.count == 3, "\(exported)")
            let token = try #require(lines.first { $0["recordName"] as? String == "no-token" }?["shortGUID"] as? String)
            #expect(token.count == 32, "a share without a token is given one")
            // Every share exports equal in JSON value to its input (the token given aside).
            for (input, output) in zip(shares.sorted(), lines) {
                var expected = try #require(try JSONSerialization.jsonObject(with: Data(input.utf8)) as? NSDictionary) as! [String: Any]
                if expected["recordName"] as? String == "no-token" { expected["shortGUID"] = token }
                #expect(NSDictionary(dictionary: output).isEqual(to: expected), "\(output)\nexpected \(expected)")
            }
            let database = try cli.container(user: "alice").privateCloudDatabase
            let share = try #require(try await database.record(for: Record.ID(recordName: "with-roles", zoneID: RecordZone.ID(zoneName: "Shared"))) as? Share)
            #expect(share.participants.map(\.role) == [.owner, .administrator, .privateUser] && share.participants[2].acceptanceStatus == .unknown)
            for run in 2...3 {
                let again = try await cli.run(arguments)
                #expect(again.exitCode == 0 && again.stderr.contains("imported 0, updated 0, unchanged 3"), "run \(run): \(again)")
            }
            let exportedAgain = try await cli.run(["export", "--type", "cloudkit.share", "--database", "private", "--zone", "Shared", "--user", "alice"])
            #expect(exportedAgain.stdout == exported.stdout)
        }
    }

    @Test("a participant reads a zone shared with them from the tool, naming its owner with --zone-owner as zones list prints it, and leaves it with zones delete; the owner's records stay", arguments: TestEngine.all)
    func participantFromTheTool(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let alice = try cli.container(user: "alice")
            let bob = try cli.container(user: "bob")
            let lists = RecordZone.ID(zoneName: "Lists")
            _ = try await alice.privateCloudDatabase.modifyRecordZones(saving: [RecordZone(zoneID: lists)], deleting: [])
            let list = Record(recordType: "List", recordID: Record.ID(recordName: "groceries", zoneID: lists))
            list["title"] = "Groceries"
            let milk = Record(recordType: "List", recordID: Record.ID(recordName: "milk", zoneID: lists))
            milk["title"] = "Milk"
            milk.setParent(list)
            let diary = Record(recordType: "List", recordID: Record.ID(recordName: "diary", zoneID: lists))
            diary["title"] = "Private"
            let share = Share(rootRecord: list)
            let participant = Share.Participant(userIdentity: UserIdentity(userRecordID: try await bob.userRecordID()))
            participant.permission = .readOnly
            share.addParticipant(participant)
            let (saves, _) = try await alice.privateCloudDatabase.modifyRecords(saving: [list, milk, diary, share], deleting: [])
            let url = try #require(try (saves[share.recordID]?.get() as? Share)?.url)
            try await bob.accept(try await bob.shareMetadata(for: url))
            let owner = try await alice.userRecordID().recordName
            let asBob = ["--database", "shared", "--user", "bob"]

            let zones = try await cli.run(["zones", "list"] + asBob)
            let listed = try JSONLine.objects(zones.stdout).compactMap { $0["zoneID"] as? [String: Any] }
            #expect(zones.exitCode == 0 && listed.count == 1, "\(zones)")
            #expect(listed.first?["zoneName"] as? String == "Lists" && listed.first?["ownerRecordName"] as? String == owner, "\(zones)")
            let query = try await cli.run(["query", "--type", "List", "--sort", "title", "--zone", "Lists", "--zone-owner", owner] + asBob)
            #expect(query.exitCode == 0, "\(query)")
            #expect(try JSONLine.objects(query.stdout).map { $0["recordName"] as? String } == ["groceries", "milk"], "the share's hierarchy, not the diary: \(query)")
            let refused = try await cli.run(["update", "--type", "List", "--all", "--set", "title=Mine", "--zone", "Lists", "--zone-owner", owner] + asBob)
            #expect(refused.exitCode != 0, "a read-only participant writes nothing: \(refused)")
            let unnamed = try await cli.run(["query", "--type", "List", "--zone", "Lists"] + asBob)
            #expect(unnamed.exitCode != 0 && unnamed.stderr.contains("Lists"), "the zone is Alice's, not Bob's: \(unnamed)")
            let ownerAlone = try await cli.run(["query", "--type", "List", "--zone-owner", owner] + asBob)
            #expect(ownerAlone.exitCode == 64 && ownerAlone.stderr.contains("--zone"), "\(ownerAlone)")

            let left = try await cli.run(["zones", "delete", "Lists", "--zone-owner", owner, "--yes"] + asBob)
            #expect(left.exitCode == 0, "\(left)")
            #expect(try await cli.run(["zones", "list"] + asBob).stdout.isEmpty)
            let again = try await cli.run(["zones", "delete", "Lists", "--zone-owner", owner, "--yes"] + asBob)
            #expect(again.exitCode == 1 && again.stderr.contains("Lists"), "left already: \(again)")
            let kept = try await cli.run(["query", "--type", "List", "--zone", "Lists", "--database", "private", "--user", "alice"])
            #expect(try JSONLine.objects(kept.stdout).count == 3, "\(kept)")
            let ownersShare = try #require(try await alice.privateCloudDatabase.record(for: share.recordID) as? Share)
            #expect(ownersShare.participants.first { $0.role != .owner }?.acceptanceStatus == .removed)
        }
    }
}
