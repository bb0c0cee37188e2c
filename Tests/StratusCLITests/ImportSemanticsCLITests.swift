import Foundation
import Stratus
import StratusTestSupport
import Testing

/// What an import means, beyond reading its input: re-runs that change nothing, dry runs that
/// say what the real run would, references that stay in their zone, parents that come later
/// in the input, and CloudKit's own records.
@Suite("stratus import semantics", .timeLimit(.minutes(30)))
struct ImportSemanticsCLITests {
    /// A CloudKit user record name that is not the tester's.
    static let cloudKitUser = "_0123456789abcdef0123456789abcdef"

    // MARK: - Re-running the same file

    @Test("--as-administrator restores records that name only their creator or only their modifier (one stands for the other); one naming neither is rejected, never a crash", arguments: TestEngine.all)
    func administratorRestoresWithOneUser(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let lines = [
                #"{"recordName":"c","recordType":"Item","fields":{},"created":{"timestamp":1000,"userRecordName":"_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}}"#,
                #"{"recordName":"m","recordType":"Item","fields":{},"modified":{"timestamp":2000,"userRecordName":"_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}}"#,
                #"{"recordName":"t","recordType":"Item","fields":{},"created":{"timestamp":1000}}"#,
            ]
            let result = try await cli.run(["import", try cli.file("one-user.ndjson", lines.joined(separator: "\n") + "\n"), "--as-administrator"])
            #expect(result.exitCode == 1, "\(result)")
            #expect(result.stderr.contains("imported 2") && result.stderr.contains("record 't' names no user"), "\(result)")
            let items = try await cli.exported("Item")
            #expect((items["c"]?["created"] as? [String: Any])?["userRecordName"] as? String == "_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "\(items)")
            #expect((items["m"]?["created"] as? [String: Any])?["userRecordName"] as? String == "_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "\(items)")
            #expect(items["t"] == nil)
            #expect(try await cli.run(["check"]).exitCode == 0)
        }
    }

    @Test("a backup (export --as-administrator) and a mirror (changes --as-administrator) of records whose CloudKit JSON named no creator name the user who made them, so their restore as the administrator takes every record", arguments: TestEngine.all)
    func administratorBackupNamesCreators(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let answer = #"{"records":[{"recordName":"r1","recordType":"Item","fields":{"a":{"value":1,"type":"INT64"}},"recordChangeTag":"ck1"}]}"#
            #expect(try await cli.run(["import", try cli.file("answer.json", answer)]).exitCode == 0)
            let plain = try await cli.exported("Item")
            #expect(plain["r1"]?["created"] == nil, "an export writes the record as it came: \(plain)")
            let backup = try await cli.run(["export", "--type", "Item", "--as-administrator", "--quiet"])
            let line = try JSONLine.object(backup.stdout)
            let creator = (line["created"] as? [String: Any])?["userRecordName"] as? String
            #expect(creator?.hasPrefix("_") == true && line["recordChangeTag"] as? String == "ck1", "\(backup.stdout)")
            let restored = try await cli.newStore("restored.sqlite")
            let restore = try await cli.run(["import", "--as-administrator", "--store", restored], stdin: backup.stdout)
            #expect(restore.exitCode == 0 && restore.stderr.contains("imported 1"), "\(restore)")
            let back = try await cli.exported("Item", extra: ["--store", restored, "--as-administrator"])
            #expect((back["r1"]?["created"] as? [String: Any])?["userRecordName"] as? String == creator, "\(back)")

            let feed = try await cli.run(["changes", "--token-file", store.path("mirror.token"), "--as-administrator", "--output", store.path("feed.ndjson")])
            #expect(feed.exitCode == 0, "\(feed)")
            let mirror = try await cli.newStore("mirror.sqlite")
            let mirrored = try await cli.run(["import", store.path("feed.ndjson"), "--store", mirror, "--mode", "forceReplace", "--keep-system-records", "--as-administrator"])
            #expect(mirrored.exitCode == 0 && mirrored.stderr.contains("imported 1"), "\(mirrored)")
        }
    }

    @Test("a restored record that gives its modification but not its creation is created then, not after it was modified", arguments: TestEngine.all)
    func creationFollowsAGivenModification(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let line = #"{"recordName":"m","recordType":"Item","fields":{},"modified":{"timestamp":1775666233042,"userRecordName":"_0123456789abcdef0123456789abcdef","deviceID":"2"}}"#
            let result = try await cli.run(["import", try cli.file("modified-only.ndjson", line + "\n"), "--database", "private"])
            #expect(result.exitCode == 0, "\(result)")
            let exported = try await cli.run(["export", "--type", "Item", "--quiet", "--database", "private"])
            let record = try JSONLine.object(exported.stdout)
            let created = (record["created"] as? [String: Any])?["timestamp"] as? Int
            let modified = (record["modified"] as? [String: Any])?["timestamp"] as? Int
            #expect(modified == 1775666233042 && created == 1775666233042, "\(exported.stdout)")
        }
    }

    @Test("--as-administrator over a stored record with its own change tag and a member kept as it came (a new version the store makes) keeps the given modifier, never a crash", arguments: TestEngine.all)
    func administratorReissuesTagOfStoredVersion(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let stored = #"{"recordName":"r","recordType":"Item","fields":{},"created":{"timestamp":1000,"userRecordName":"\#(Self.cloudKitUser)"},"modified":{"timestamp":2000,"userRecordName":"\#(Self.cloudKitUser)"},"recordChangeTag":"tag1"}"#
            let first = try await cli.run(["import", "--as-administrator"], stdin: stored + "\n")
            #expect(first.exitCode == 0, "\(first)")
            // The same version, but for a member Stratus keeps as it came: not the stored version.
            let withMember = String(stored.dropLast()) + #","pluginFields":{"a":1}}"#
            let second = try await cli.run(["import", "--as-administrator"], stdin: withMember + "\n")
            #expect(second.exitCode == 0, "\(second)")
            #expect(second.stderr.contains("updated 1"), "\(second)")
            let items = try await cli.exported("Item")
            #expect(items["r"]?["recordChangeTag"] as? String != "tag1", "a new version has a tag of its own: \(items)")
            #expect((items["r"]?["modified"] as? [String: Any])?["userRecordName"] as? String == Self.cloudKitUser, "\(items)")
            #expect(try await cli.run(["check"]).exitCode == 0)
        }
    }

    @Test("__defaultOwner__ as a record's creator or modifier (CloudKit's name for the current user) is restored as the importing user; the administrator, who is no user, restores it as written, and a copy carries it", arguments: TestEngine.all)
    func currentUserDefaultNameAsCreator(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let alice = UserDirectoryEntry.derivedRecordName(containerIdentifier: "default", login: "alice")
            let line = #"{"recordName":"mine","recordType":"Item","fields":{},"created":{"timestamp":1000,"userRecordName":"__defaultOwner__"},"modified":{"timestamp":2000,"userRecordName":"__defaultOwner__"}}"# + "\n"
            // As earlier versions stored it, and as a whole-store copy must carry it.
            let kept = try await cli.newStore("kept.sqlite")
            let asAdministrator = try await cli.run(["import", "--as-administrator", "--store", kept], stdin: line)
            #expect(asAdministrator.exitCode == 0, "\(asAdministrator)")
            let copied = try await cli.newStore("copied.sqlite")
            let copy = try await cli.run(["copy", "--from", kept, "--to", copied])
            #expect(copy.exitCode == 0, "\(copy)")
            let carried = try await cli.exported("Item", extra: ["--store", copied])
            #expect((carried["mine"]?["created"] as? [String: Any])?["userRecordName"] as? String == "__defaultOwner__", "\(carried)")
            let asAlice = try await cli.run(["import", "--user", "alice"], stdin: line)
            #expect(asAlice.exitCode == 0, "\(asAlice)")
            let items = try await cli.exported("Item")
            #expect((items["mine"]?["created"] as? [String: Any])?["userRecordName"] as? String == alice, "\(items)")
            #expect((items["mine"]?["modified"] as? [String: Any])?["userRecordName"] as? String == alice, "\(items)")
            // Hers under _creator's grants: she may change it, bob (another user) may not.
            let change = #"{"recordName":"mine","recordType":"Item","fields":{"n":{"value":1,"type":"INT64"}}}"# + "\n"
            let byBob = try await cli.run(["import", "--user", "bob", "--mode", "forceUpdate"], stdin: change)
            #expect(byBob.exitCode == 1 && byBob.stderr.contains("permissionFailure"), "\(byBob)")
            let byAlice = try await cli.run(["import", "--user", "alice", "--mode", "forceUpdate"], stdin: change)
            #expect(byAlice.exitCode == 0, "\(byAlice)")
        }
    }

    @Test("re-importing another owner's zone with references is unchanged: exit 0, no new change tag, no change to export", arguments: TestEngine.all)
    func rerunWithReferencesInAnotherOwnersZone(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let zone = #"{"zoneName":"Z","ownerRecordName":"\#(Self.cloudKitUser)"}"#
            let input = """
                {"recordName":"o","recordType":"One","fields":{"n":{"value":1,"type":"INT64"}},"zoneID":\(zone)}
                {"recordName":"x","recordType":"One","fields":{"r":{"value":{"recordName":"o","action":"NONE"},"type":"REFERENCE"},"l":{"value":[{"recordName":"o","action":"DELETE_SELF"}],"type":"REFERENCE_LIST"}},"parent":{"recordName":"o"},"zoneID":\(zone)}
                {"recordName":"y","recordType":"One","fields":{"r":{"value":{"recordName":"o","action":"NONE","zoneID":\(zone)},"type":"REFERENCE"}},"zoneID":\(zone)}

                """
            let path = try cli.file("i.ndjson", input)
            let first = try await cli.run(["import", path, "--create-zones", "--owner-as-current-user"])
            #expect(first.exitCode == 0, "\(first)")
            Summary.expectImport(first, imported: 3)
            let token = store.path("feed.token")
            let feed = try await cli.run(["changes", "--zone", "Z", "--token-file", token])
            #expect(feed.exitCode == 0 && feed.stdoutLines.count == 3, "the first import is three changes: \(feed)")
            let before = try await cli.exported("One", extra: ["--zone", "Z"])

            for _ in 1...2 {
                let again = try await cli.run(["import", path, "--create-zones", "--owner-as-current-user"])
                #expect(again.exitCode == 0, "\(again)")
                Summary.expectImport(again, unchanged: 3)
                let changes = try await cli.run(["changes", "--zone", "Z", "--token-file", token])
                #expect(changes.exitCode == 0 && changes.stdout.isEmpty, "a re-run that changes nothing emits no change: \(changes)")
            }
            let after = try await cli.exported("One", extra: ["--zone", "Z"])
            for name in ["o", "x", "y"] {
                #expect(after[name]?["recordChangeTag"] as? String == before[name]?["recordChangeTag"] as? String, "\(name) keeps its change tag")
            }
            // The reference's zoneID is given back as it came.
            let y = try #require(after["y"])
            let reference = JSONLine.field(y, "r")?["value"] as? [String: Any]
            #expect((reference?["zoneID"] as? [String: Any])?["ownerRecordName"] as? String == Self.cloudKitUser, "\(y)")
        }
    }

    @Test("re-importing a public CloudKit export whose records another user created is unchanged, not refused by _creator's WRITE", arguments: TestEngine.all)
    func rerunOfPublicExportCreatedByAnotherUser(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let user = Self.cloudKitUser
            let system = #""created":{"timestamp":1700000000000,"userRecordName":"\#(user)","deviceID":"D1"},"modified":{"timestamp":1700000001000,"userRecordName":"\#(user)","deviceID":"D1"},"zoneID":{"zoneName":"_defaultZone","ownerRecordName":"\#(user)"}"#
            let input = """
                {"recordName":"a","recordType":"Post","fields":{"t":{"value":"hi","type":"STRING"}},"recordChangeTag":"k1",\(system)}
                {"recordName":"b","recordType":"Post","fields":{"r":{"value":{"recordName":"a","action":"NONE"},"type":"REFERENCE"}},"parent":{"recordName":"a"},"recordChangeTag":"k2",\(system)}

                """
            let path = try cli.file("public.ndjson", input)
            let first = try await cli.run(["import", path])
            #expect(first.exitCode == 0, "\(first)")
            Summary.expectImport(first, imported: 2)
            let second = try await cli.run(["import", path])
            #expect(second.exitCode == 0, "re-running the same file changes nothing and fails nothing: \(second)")
            Summary.expectImport(second, unchanged: 2)
            // A record that did change is still the creator's to write (the public default grants WRITE to _creator).
            let changed = try await cli.run(["import"], stdin: input.replacingOccurrences(of: #""value":"hi""#, with: #""value":"changed""#))
            #expect(changed.exitCode == 1 && changed.stderr.contains("permissionFailure") && changed.stderr.contains("_creator"), "\(changed)")
        }
    }

    @Test("two owners' zones of one name imported as the current user's: the second owner's record of a name the first's has is rejected, not written over it; in one run or two", arguments: TestEngine.all)
    func twoOwnersOneZoneName(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            func zone(_ owner: String, _ text: String, extra: String = "") -> String {
                #"{"zoneID":{"zoneName":"Notes","ownerRecordName":"\#(owner)"},"syncToken":"x","moreComing":false,"records":[{"recordName":"n1","recordType":"Note","fields":{"t":{"value":"\#(text)","type":"STRING"}}}\#(extra)]}"#
            }
            let (a, b) = ("_" + String(repeating: "a", count: 32), "_" + String(repeating: "b", count: 32))
            let other = #",{"recordName":"n2","recordType":"Note","fields":{"t":{"value":"only B's","type":"STRING"}}}"#
            let options = ["--database", "private", "--create-zones", "--owner-as-current-user"]
            let both = try cli.file("shared.json", #"{"zones":["# + zone(a, "from A") + "," + zone(b, "from B", extra: other) + "]}")
            let result = try await cli.run(["import", both] + options)
            #expect(result.exitCode == 1, "\(result)")
            #expect(result.stderr.contains("of owner '\(b)'") && result.stderr.contains("of owner '\(a)'"), "\(result)")
            Summary.expectImport(result, imported: 2, failed: 1)
            let notes = try await cli.run(["export", "--type", "Note", "--zone", "Notes", "--database", "private", "--quiet"])
            let byName = Dictionary(uniqueKeysWithValues: try JSONLine.objects(notes.stdout).map { ($0["recordName"] as? String ?? "", $0) })
            #expect(JSONLine.value(byName["n1"] ?? [:], "t") == "from A", "A's record stays: \(notes)")

            let again = try await cli.run(["import", try cli.file("b.json", #"{"zones":["# + zone(b, "from B") + "]}")] + options)
            #expect(again.exitCode == 1 && again.stderr.contains("one would replace the other"), "\(again)")

            // B's deletion of a name A's record has is not applied to A's record either; B's
            // deletion of its own record is.
            let tombstones = #"{"zones":[{"zoneID":{"zoneName":"Notes","ownerRecordName":"\#(b)"},"moreComing":false,"records":[{"recordName":"n1","deleted":true},{"recordName":"n2","deleted":true}]}]}"#
            let deletion = try await cli.run(["import", try cli.file("b-deleted.json", tombstones)] + options)
            #expect(deletion.exitCode == 1 && deletion.stderr.contains("that owner's record is not deleted"), "\(deletion)")
            let after = try await cli.exported("Note", extra: ["--zone", "Notes", "--database", "private"])
            #expect(JSONLine.value(after["n1"] ?? [:], "t") == "from A" && after["n2"] == nil, "A's n1 stays, B's n2 goes: \(after.keys)")
        }
    }

    @Test("a CloudKit answer that changes a stored record leaves it with the store's new change tag and modification, which reads hand out; the same answer again changes nothing", arguments: TestEngine.all)
    func answerChangingARecordShowsItsVersion(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let first = #"{"recordName":"n1","recordType":"T","recordChangeTag":"t1","fields":{"a":{"value":"x","type":"STRING"}},"created":{"timestamp":1000,"userRecordName":"_u"},"modified":{"timestamp":2000,"userRecordName":"_u"}}"#
            #expect(try await cli.run(["import", "--quiet", "--database", "private"], stdin: first + "\n").exitCode == 0)
            let answer = try cli.file("answer.json", #"{"records":[{"recordName":"n1","recordType":"T","fields":{"a":{"value":"z","type":"STRING"}}}]}"#)
            let changed = try await cli.run(["import", answer, "--database", "private"])
            Summary.expectImport(changed, updated: 1)
            let record = try #require(try await cli.exported("T", extra: ["--database", "private"])["n1"])
            let tag = try #require(record["recordChangeTag"] as? String, "\(record)")
            #expect(tag != "t1")
            #expect((record["modified"] as? [String: Any])?["timestamp"] != nil, "\(record)")
            #expect((record["created"] as? [String: Any])?["timestamp"] as? Int == 1000, "\(record)")
            let again = try await cli.run(["import", answer, "--database", "private"])
            Summary.expectImport(again, unchanged: 1)
            #expect(try await cli.exported("T", extra: ["--database", "private"])["n1"]?["recordChangeTag"] as? String == tag)
        }
    }

    @Test("an update that names the record's zone, or a records/modify request's forceUpdate, changes its fields and keeps the stored share, pluginFields and other members; a changes answer's record without fields keeps the stored fields as they came (found by a data tester: both were lost)", arguments: TestEngine.all)
    func updatesKeepWhatTheyDoNotName(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let place = ["--database", "private", "--owner-as-current-user"]
            let zone = #"{"zoneName":"SZ","ownerRecordName":"\#(Self.cloudKitUser)","zoneType":"REGULAR_CUSTOM_ZONE"}"#
            let stored = #"{"records":[{"recordName":"root1","recordType":"Doc","zoneID":\#(zone),"fields":{"n":{"value":1,"type":"INT64"},"#
                + #""ref":{"value":{"recordName":"f1","action":"VALIDATE"},"type":"REFERENCE"},"loc":{"value":{"latitude":1,"longitude":2},"type":"LOCATION"},"#
                + #""enc":{"value":"ALBUM_NAME_ENC_001","type":"ENCRYPTED_BYTES"}},"#
                + #""share":{"recordName":"share-AAA","zoneID":\#(zone)},"pluginFields":{"p":1},"shortGUID":"0abc","recordChangeTag":"rt1","#
                + #""created":{"timestamp":1,"userRecordName":"\#(Self.cloudKitUser)","deviceID":"2"},"modified":{"timestamp":2,"userRecordName":"\#(Self.cloudKitUser)","deviceID":"2"}}]}"#
            #expect(try await cli.run(["import", "--quiet", "--create-zones", try cli.file("base.json", stored)] + place).exitCode == 0)
            func exported() async throws -> [String: Any] {
                try #require(try await cli.exported("Doc", extra: ["--zone", "SZ", "--database", "private"])["root1"])
            }
            let request = #"{"zoneID":\#(zone),"operations":[{"operationType":"forceUpdate","record":{"recordName":"root1","recordType":"Doc","fields":{"n":{"value":5}}}}]}"#
            Summary.expectImport(try await cli.run(["import", try cli.file("request.json", request)] + place), updated: 1)
            let ndjson = #"{"recordName":"root1","recordType":"Doc","zoneID":\#(zone),"fields":{"n":{"value":6,"type":"INT64"}}}"# + "\n"
            Summary.expectImport(try await cli.run(["import"] + place, stdin: ndjson), updated: 1)
            let updated = try await exported()
            #expect(JSONLine.value(updated, "n") == "6", "\(updated)")
            #expect((updated["share"] as? [String: Any])?["recordName"] as? String == "share-AAA", "\(updated)")
            #expect((updated["pluginFields"] as? [String: Any])?["p"] as? Int == 1, "\(updated)")
            #expect(updated["shortGUID"] as? String == "0abc", "\(updated)")
            // A changes answer's record without fields: its version, the stored fields as they came.
            let fieldsBefore = try #require(updated["fields"] as? [String: Any])
            let answer = #"{"zones":[{"zoneID":{"zoneName":"SZ"},"records":[{"recordName":"root1","recordType":"Doc","recordChangeTag":"t2"}]}]}"#
            Summary.expectImport(try await cli.run(["import", try cli.file("answer.json", answer)] + place), updated: 1)
            let afterAnswer = try await exported()
            let fieldsAfter = try #require(afterAnswer["fields"] as? [String: Any])
            #expect(NSDictionary(dictionary: fieldsAfter) == NSDictionary(dictionary: fieldsBefore), "\(fieldsAfter) against \(fieldsBefore)")
            let ref = (fieldsAfter["ref"] as? [String: Any])?["value"] as? [String: Any]
            #expect(ref?["action"] as? String == "VALIDATE", "\(afterAnswer)")
            #expect((fieldsAfter["enc"] as? [String: Any])?["value"] as? String == "ALBUM_NAME_ENC_001", "\(afterAnswer)")
            #expect(((fieldsAfter["loc"] as? [String: Any])?["value"] as? [String: Any])?.keys.sorted() == ["latitude", "longitude"], "\(afterAnswer)")
        }
    }

    @Test("a reference, a reference list's element or a parent may name a user's record (an author field), as a save in Swift may; update --set sets one too (found by a data tester: each was rejected)", arguments: TestEngine.all)
    func referencesToUserRecords(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let user = Self.cloudKitUser
            let lines = [
                #"{"recordName":"post1","recordType":"Post","fields":{"author":{"value":{"recordName":"\#(user)","action":"NONE"},"type":"REFERENCE"}}}"#,
                #"{"recordName":"post2","recordType":"Post","fields":{"authors":{"value":[{"recordName":"\#(user)","action":"NONE"}],"type":"REFERENCE_LIST"}}}"#,
                #"{"recordName":"post3","recordType":"Post","parent":{"recordName":"\#(user)"},"fields":{}}"#,
            ]
            let place = ["--database", "private"]
            Summary.expectImport(try await cli.run(["import"] + place, stdin: lines.joined(separator: "\n") + "\n"), imported: 3)
            #expect(try await cli.count("Post", where: "author == '\(user)'", extra: place) == 1)
            #expect(try await cli.count("Post", where: "authors CONTAINS '\(user)'", extra: place) == 1)
            let other = "_fedcba9876543210fedcba9876543210"
            let updated = try await cli.run(["update", "--type", "Post", "--where", "author == '\(user)'", "--set", "author=\(other)"] + place)
            #expect(updated.exitCode == 0, "\(updated)")
            #expect(try await cli.count("Post", where: "author == '\(other)'", extra: place) == 1)
            let exported = try await cli.exported("Post", extra: place)
            #expect((exported["post3"]?["parent"] as? [String: Any])?["recordName"] as? String == user, "\(exported)")
        }
    }

    @Test("a record of another owner's zone imported into the shared database is refused with advice that works there (the owner's private database, as the owner), not --owner-as-current-user, which the shared database refuses (found by a data tester)", arguments: TestEngine.all)
    func sharedDatabaseImportAdvice(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            try await cli.createStore()
            let line = #"{"recordName":"r1","recordType":"T","zoneID":{"zoneName":"Z","ownerRecordName":"\#(Self.cloudKitUser)"},"fields":{}}"#
            let refused = try await cli.run(["import", "--database", "shared"], stdin: line + "\n")
            #expect(refused.exitCode == 77 && refused.stderr.contains("--database private --user LOGIN") && !refused.stderr.contains("--owner-as-current-user"), "\(refused)")
        }
    }

    @Test("a forced import that changes a record under the change tag it already has gets a new tag, so a writer holding the old version cannot overwrite it unseen", arguments: TestEngine.all)
    func sameTagOtherContentIsANewVersion(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            func version(_ value: String, extra: String = "") -> String {
                #"{"recordName":"r","recordType":"T","recordChangeTag":"t1","fields":{"a":{"value":"\#(value)","type":"STRING"}\#(extra)}}"# + "\n"
            }
            let place = ["--database", "private"]
            #expect(try await cli.run(["import", "--quiet"] + place, stdin: version("x")).exitCode == 0)
            #expect(try await cli.exported("T", extra: place)["r"]?["recordChangeTag"] as? String == "t1", "a restored tag is kept")
            let forced = try await cli.run(["import"] + place, stdin: version("y"))
            Summary.expectImport(forced, updated: 1)
            let tag = try await cli.exported("T", extra: place)["r"]?["recordChangeTag"] as? String
            #expect(tag != nil && tag != "t1", "\(String(describing: tag))")
            // The same file again (a re-run after a partial failure) changes nothing: the tag
            // the store gave up does not come back.
            let rerun = try await cli.run(["import"] + place, stdin: version("y"))
            Summary.expectImport(rerun, unchanged: 1)
            #expect(try await cli.exported("T", extra: place)["r"]?["recordChangeTag"] as? String == tag)
            let stale = try await cli.run(["import", "--mode", "update"] + place, stdin: version("z", extra: #","b":{"value":"client1","type":"STRING"}"#))
            #expect(stale.exitCode == 1 && stale.stderr.contains("serverRecordChanged"), "\(stale)")
            #expect(JSONLine.value(try await cli.exported("T", extra: place)["r"] ?? [:], "a") == "y")
        }
    }

    @Test("forceReplace of a record of another type that the store refuses (production lacks the type) leaves the stored record as it was", arguments: TestEngine.all)
    func refusedTypeReplacementDeletesNothing(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            #expect(try await cli.run(["import", "--quiet"], stdin: #"{"recordName":"r","recordType":"T","fields":{"a":{"value":1,"type":"INT64"}}}"# + "\n").exitCode == 0)
            #expect(try await cli.run(["schema", "deploy"]).exitCode == 0)
            let production = ["--environment", "production"]
            #expect(try await cli.run(["import", "--quiet"] + production, stdin: #"{"recordName":"r","recordType":"T","fields":{"a":{"value":1,"type":"INT64"}}}"# + "\n").exitCode == 0)
            let replaced = try await cli.run(["import", "--mode", "forceReplace"] + production, stdin: #"{"recordName":"r","recordType":"U","fields":{"b":{"value":"x","type":"STRING"}}}"# + "\n")
            #expect(replaced.exitCode == 1, "\(replaced)")
            let stored = try await cli.run(["get", "r"] + production)
            #expect(try JSONLine.object(stored.stdout)["recordType"] as? String == "T", "the stored record stays: \(stored)")
        }
    }

    @Test("restoring an export over the same contents that the store gave another version (--new-system-fields, then as it came) restores the export's tag and modification", arguments: TestEngine.all)
    func restoringBringsBackTheGivenVersion(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let place = ["--database", "private"]
            let line = #"{"recordName":"e","recordType":"T","recordChangeTag":"ck1","fields":{"a":{"value":"x","type":"STRING"}},"modified":{"timestamp":2000,"userRecordName":"_u"}}"# + "\n"
            let input = try cli.file("e.ndjson", line)
            #expect(try await cli.run(["import", input, "--new-system-fields"] + place).exitCode == 0)
            #expect(try await cli.exported("T", extra: place)["e"]?["recordChangeTag"] as? String != "ck1")
            let restored = try await cli.run(["import", input] + place)
            Summary.expectImport(restored, updated: 1)
            let record = try #require(try await cli.exported("T", extra: place)["e"])
            #expect(record["recordChangeTag"] as? String == "ck1", "\(record)")
            #expect((record["modified"] as? [String: Any])?["timestamp"] as? Int == 2000, "\(record)")
            let again = try await cli.run(["import", input] + place)
            Summary.expectImport(again, unchanged: 1)
        }
    }

    @Test("an empty recordChangeTag is no tag: a new record gets the store's own tag, and --mode update asks for a real one and leaves the record as it was", arguments: TestEngine.all)
    func emptyChangeTagIsNoTag(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let created = try await cli.run(["import"], stdin: #"{"recordName":"r","recordType":"Item","recordChangeTag":"","fields":{"n":{"value":1}}}"# + "\n")
            #expect(created.exitCode == 0, "\(created)")
            let tag = try #require(try await cli.exported("Item")["r"]?["recordChangeTag"] as? String)
            #expect(!tag.isEmpty)
            let update = try await cli.run(["import", "--mode", "update"], stdin: #"{"recordName":"r","recordType":"Item","recordChangeTag":"","fields":{"n":{"value":2}}}"# + "\n")
            #expect(update.exitCode == 1, "\(update)")
            #expect(update.stderr.contains("has no recordChangeTag, which update needs"), "\(update)")
            let item = try #require(try await cli.exported("Item")["r"])
            #expect(item["recordChangeTag"] as? String == tag && JSONLine.value(item, "n") == "1", "\(item)")
        }
    }

    // MARK: - Parents later in the input

    @Test("children before their parents import whatever --batch-size (and with a checkpoint); as a new write (--new-system-fields), a parent that never comes rejects its child at the end; restored, the child keeps its missing parent", arguments: TestEngine.all)
    func childrenBeforeParents(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            func input(_ prefix: String) -> String {
                func line(_ name: String, parent: String?) -> String {
                    let parentMember = parent.map { #","parent":{"recordName":"\#(prefix)\#($0)"}"# } ?? ""
                    return #"{"recordName":"\#(prefix)\#(name)","recordType":"Folder","fields":{"name":{"value":"\#(name)","type":"STRING"}}\#(parentMember)}"#
                }
                return [line("child", parent: "parent"), line("grandchild", parent: "child"), line("other", parent: nil),
                        line("parent", parent: "root"), line("root", parent: nil), line("lost", parent: "never")].joined(separator: "\n") + "\n"
            }
            for (index, options) in [["--batch-size", "1"], ["--batch-size", "2"], [], ["--batch-size", "1", "--checkpoint", store.path("import.ckpt")]].enumerated() {
                let rejects = store.path("rejects-\(index).ndjson")
                let result = try await cli.run(["import", try cli.file("folders-\(index).ndjson", input("r\(index)-")), "--reject-file", rejects, "--new-system-fields"] + options)
                #expect(result.exitCode == 1, "\(options): \(result)")
                Summary.expectImport(result, imported: 5, failed: 1)
                let rejected = try RejectLine.read(rejects)
                #expect(rejected.map(\.recordName) == ["r\(index)-lost"] && rejected.first?.line == 6, "\(options): \(rejected.map(\.error))")
                #expect(rejected.first?.error.contains("referenceViolation") == true)
            }
            #expect(!cli.exists(store.path("import.ckpt")))
            #expect(try await cli.count("Folder") == 20)
            // A dry run says the same, and writes nothing.
            let dry = try await cli.run(["import", try cli.file("folders-dry.ndjson", input("dry-")), "--dry-run", "--batch-size", "1", "--new-system-fields"])
            #expect(dry.exitCode == 1 && dry.stderrLines.last?.contains("dry run: 5 valid, 1 rejected") == true, "\(dry)")
            #expect(try await cli.count("Folder") == 20)
            let exported = try await cli.exported("Folder")
            #expect((exported["r0-grandchild"]?["parent"] as? [String: Any])?["recordName"] as? String == "r0-child")

            // Restoring records as they were (system fields kept, the default), a child whose
            // parent is gone comes over as CloudKit holds it: with its parent reference.
            let restored = try await cli.run(["import", try cli.file("folders-restored.ndjson", input("s-")), "--batch-size", "2"])
            #expect(restored.exitCode == 0, "\(restored)")
            Summary.expectImport(restored, imported: 6)
            #expect((try await cli.exported("Folder")["s-lost"]?["parent"] as? [String: Any])?["recordName"] as? String == "s-never")
        }
    }

    @Test("records that wait for a parent, with other records of their name, deletions and other waiting records among them, end as the input orders them whatever --batch-size; each reject names its own line (found by a data tester: two records were dropped and counted unchanged)", arguments: TestEngine.all)
    func waitingRecordsKeepInputOrder(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            func save(_ name: String, _ value: Int, parent: String? = nil) -> String {
                let parentMember = parent.map { #","parent":{"recordName":"\#($0)"}"# } ?? ""
                return #"{"recordName":"\#(name)","recordType":"Item","fields":{"v":{"value":\#(value),"type":"INT64"}}\#(parentMember)}"#
            }
            func delete(_ name: String) -> String { #"{"recordName":"\#(name)","deleted":true}"# }
            struct Case {
                var stored: [String] = []
                let lines: [String]
                let options: [String]
                /// Record name → the value it ends with, and its parent.
                let expected: [String: (Int, String?)]
                let rejectedLines: Set<Int>
            }
            let cases = [
                // Two records (lost1, lost2) wait for parents while another (x) waits too (a line
                // without a parent member leaves the parent as it was).
                Case(lines: [save("x", 1, parent: "px"), save("lost1", 2, parent: "plost1"), save("x", 3), save("lost2", 4, parent: "plost2"),
                             save("x", 5), save("px", 6), delete("gone1"), save("other1", 8), delete("gone2"), save("plost2", 10),
                             delete("gone3"), save("plost1", 12), delete("gone4"), save("other2", 14)],
                     options: [], expected: ["x": (5, "px"), "lost1": (2, "plost1"), "lost2": (4, "plost2"), "px": (6, nil), "other1": (8, nil),
                                             "plost2": (10, nil), "plost1": (12, nil), "other2": (14, nil)], rejectedLines: []),
                // A child waits for its parent, which the input then writes and deletes.
                Case(lines: [save("a", 1, parent: "b"), save("b", 2), delete("b")], options: [], expected: ["a": (1, "b")], rejectedLines: []),
                // A child after its parent's deletion, where the parent's earlier items wait.
                Case(lines: [save("n1", 0), save("n1", 1, parent: "n2"), save("n2", 2), delete("n1"), save("n0", 4, parent: "n1")],
                     options: ["--mode", "create"], expected: ["n2": (2, nil)], rejectedLines: [2, 5]),
                // create: every refusal names its own line.
                Case(lines: [save("a", 1, parent: "b"), save("a", 2, parent: "b"), save("b", 3), save("b", 6, parent: "a"), save("a", 11),
                             save("a", 12, parent: "b"), save("a", 13)],
                     options: ["--mode", "create"], expected: ["a": (1, "b"), "b": (3, nil)], rejectedLines: [2, 4, 5, 6, 7]),
                // A record whose parent is stored, while a save of that parent waits (for a
                // parent that never comes), is written, and writes the child waiting for it
                // (found by a reviewer).
                Case(stored: [save("e", 0)], lines: [save("e", 1, parent: "b"), save("a", 2, parent: "c"), save("c", 3, parent: "e")],
                     options: [], expected: ["e": (0, nil), "a": (2, "c"), "c": (3, "e")], rejectedLines: [1]),
            ]
            for (number, testCase) in cases.enumerated() {
                for batchSize in ["1", "2", "2000"] {
                    let zone = "Z\(number)-\(batchSize)"
                    #expect(try await cli.run(["zones", "create", zone, "--database", "private"]).exitCode == 0)
                    if !testCase.stored.isEmpty {
                        let before = try await cli.run(["import", "--database", "private", "--zone", zone, "--quiet"], stdin: testCase.stored.joined(separator: "\n") + "\n")
                        #expect(before.exitCode == 0, "\(before)")
                    }
                    let rejects = store.path("rejects-\(zone).ndjson")
                    let input = try cli.file("input-\(zone).ndjson", testCase.lines.joined(separator: "\n") + "\n")
                    let result = try await cli.run(["import", input, "--database", "private", "--zone", zone, "--new-system-fields",
                                                    "--batch-size", batchSize, "--reject-file", rejects] + testCase.options)
                    let label = "case \(number), --batch-size \(batchSize)"
                    #expect(result.exitCode == (testCase.rejectedLines.isEmpty ? 0 : 1), "\(label): \(result)")
                    #expect(Set(try RejectLine.read(rejects).map(\.line)) == testCase.rejectedLines, "\(label)")
                    #expect(try RejectLine.read(rejects).count == testCase.rejectedLines.count, "\(label): each line is rejected once")
                    let items = try await cli.exported("Item", extra: ["--database", "private", "--zone", zone])
                    #expect(Set(items.keys) == Set(testCase.expected.keys), "\(label): \(items.keys.sorted())")
                    for (name, (value, parent)) in testCase.expected {
                        let fields = items[name]?["fields"] as? [String: Any]
                        #expect((fields?["v"] as? [String: Any])?["value"] as? Int == value, "\(label): \(name)")
                        #expect((items[name]?["parent"] as? [String: Any])?["recordName"] as? String == parent, "\(label): \(name)'s parent")
                    }
                }
            }
        }
    }

    @Test("--max-errors with input in several zones: past the limit nothing after the rejected record is written in any zone; at it, every valid record is", arguments: TestEngine.all)
    func maxErrorsAcrossZones(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            for zone in ["A", "B"] { #expect(try await cli.run(["zones", "create", zone, "--database", "private"]).exitCode == 0) }
            func line(_ name: String, _ zone: String) -> String {
                #"{"recordName":"\#(name)","recordType":"T","fields":{"n":{"value":1,"type":"INT64"}},"zoneID":{"zoneName":"\#(zone)"}}"#
            }
            #expect(try await cli.run(["import", "--quiet", "--database", "private"], stdin: line("b1", "B") + "\n").exitCode == 0)
            let input = try cli.file("zones.ndjson", [line("b1", "B"), line("b2", "B"), line("a1", "A"), line("a2", "A")].joined(separator: "\n") + "\n")
            func count(_ zone: String) async throws -> String {
                try await cli.run(["count", "--type", "T", "--database", "private", "--zone", zone]).stdout
            }
            let stopped = try await cli.run(["import", input, "--database", "private", "--mode", "create", "--max-errors", "0"])
            #expect(stopped.exitCode == 65 && stopped.stderr.contains("nothing after it was written"), "\(stopped)")
            let (zoneA, zoneB) = (try await count("A"), try await count("B"))
            #expect(zoneA == "0\n" && zoneB == "1\n", "the record after the limit is not written in another zone")
            let finished = try await cli.run(["import", input, "--database", "private", "--mode", "create", "--max-errors", "1"])
            #expect(finished.exitCode == 1 && !finished.stderr.contains("batchRequestFailed"), "only b1 is rejected: \(finished)")
            let (finalA, finalB) = (try await count("A"), try await count("B"))
            #expect(finalA == "2\n" && finalB == "2\n", "every valid record is written, b2 too")
        }
    }

    @Test("--max-errors counts records whose parent never came once, at the end of the input, with the input's own rejects: past the limit exit 65, at it exit 1", arguments: TestEngine.all)
    func rejectLimitCountsRecordsThatWaited(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            func line(_ name: String, parent: String? = nil, bad: Bool = false) -> String {
                let parentMember = parent.map { #","parent":{"recordName":"\#($0)"}"# } ?? ""
                let value = bad ? #""many""# : "1"
                return #"{"recordName":"\#(name)","recordType":"Folder","fields":{"n":{"value":\#(value),"type":"INT64"}}\#(parentMember)}"#
            }
            // Rejected: line 1 (bad value), lines 2 and 3 (parent never comes), line 4 (child of
            // line 2, which waits behind it), line 9 (bad value).
            let input = [line("bad1", bad: true), line("lost1", parent: "never"), line("lost2", parent: "never"), line("lostChild", parent: "lost1"),
                         line("a"), line("b"), line("c"), line("d"), line("bad2", bad: true), line("e")].joined(separator: "\n") + "\n"
            let path = try cli.file("waiting.ndjson", input)
            for (maximum, size) in [(4, "1"), (4, "3"), (4, "100"), (5, "3"), (2, "3")] {
                let target = try await cli.newStore("limit-\(maximum)-\(size).sqlite")
                let rejects = store.path("rejects-\(maximum)-\(size).ndjson")
                // As new writes: restored records keep a parent that never came.
                let result = try await cli.run(["import", path, "--max-errors", "\(maximum)", "--batch-size", size, "--reject-file", rejects, "--new-system-fields"],
                                               environment: ["STRATUS_STORE": target])
                let lines = try RejectLine.read(rejects).map(\.line)
                if maximum >= 5 {
                    #expect(result.exitCode == 1, "\(maximum)/\(size): \(result)")
                    #expect(lines == [1, 9, 2, 3, 4], "each reject once, those that waited at the end: \(lines)")
                    Summary.expectImport(result, imported: 5, failed: 5)
                } else {
                    #expect(result.exitCode == 65 && result.stderr.contains("--max-errors \(maximum)"), "\(maximum)/\(size): \(result)")
                    #expect(lines.count == maximum + 1 && lines == Array([1, 9, 2, 3, 4].prefix(maximum + 1)), "\(maximum)/\(size): \(lines)")
                }
                #expect(try await cli.count("Folder", extra: ["--store", target]) == 5, "\(maximum)/\(size): the records before the stop are written")
            }
        }
    }

    @Test("within one batch input order wins over deletions: a record saved after a deletion whose cascade reaches it stays, a child saved (as a new write) after its parent's deletion is refused, as with --batch-size 1", arguments: TestEngine.all)
    func deletionsThenSavesInOneBatch(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            func item(_ name: String, _ title: String, list: String?, parent: String? = nil) -> String {
                let reference = list.map { #","list":{"value":{"recordName":"\#($0)","action":"DELETE_SELF"},"type":"REFERENCE"}"# } ?? ""
                let parentMember = parent.map { #","parent":{"recordName":"\#($0)"}"# } ?? ""
                return #"{"recordName":"\#(name)","recordType":"Item","fields":{"title":{"value":"\#(title)","type":"STRING"}\#(reference)}\#(parentMember)}"#
            }
            func deletion(_ name: String) -> String { #"{"recordName":"\#(name)","recordType":"Item","deleted":true}"# }
            var outcomes: [[String]] = []
            for (index, options) in [["--batch-size", "1"], []].enumerated() {
                let p = "r\(index)-"
                // A list, an item tied to it by a .deleteSelf reference and an entry tied to the item
                // (a chain), and a folder.
                let seed = [item(p + "list", "list", list: nil), item(p + "item", "old", list: p + "list"), item(p + "entry", "entry", list: p + "item"),
                            item(p + "folder", "folder", list: nil)].joined(separator: "\n") + "\n"
                let seeded = try await cli.run(["import"], stdin: seed)
                #expect(seeded.exitCode == 0, "\(seeded)")
                let input = [deletion(p + "list"), item(p + "item", "kept", list: p + "list"), deletion(p + "folder"), item(p + "child", "child", list: nil, parent: p + "folder")]
                    .joined(separator: "\n") + "\n"
                let rejects = store.path("rejects-\(index).ndjson")
                // As new writes: a restored child keeps its parent reference even after the parent's deletion.
                let result = try await cli.run(["import", try cli.file("input-\(index).ndjson", input), "--reject-file", rejects, "--new-system-fields"] + options)
                #expect(result.exitCode == 1, "\(options): \(result)")
                let rejected = try RejectLine.read(rejects)
                #expect(rejected.map(\.line) == [4] && rejected.first?.error.contains("referenceViolation") == true,
                        "\(options): the child of a deleted parent is refused: \(rejected.map { "\($0.line) \($0.error)" })")
                let exported = try await cli.exported("Item")
                let names = exported.keys.filter { $0.hasPrefix(p) }.map { String($0.dropFirst(p.count)) }.sorted()
                #expect(names == ["item"], "\(options): the item saved after the deletion stays, what the cascade reached before it goes: \(names)")
                #expect(JSONLine.value(exported[p + "item"] ?? [:], "title") == "kept", "\(options)")
                outcomes.append(names)
            }
            #expect(outcomes[0] == outcomes[1], "one batch does what single records do")
        }
    }

    // MARK: - Dry runs

    /// Runs `arguments` as a dry run and for real (after it, in a copy of the store's state
    /// that the dry run must not have changed): the rejected lines and their reasons, and the
    /// exit codes, must be the same.
    /// Answers the lines the real run rejected.
    @discardableResult
    static func expectDryRunMatches(_ cli: CLI, _ arguments: [String], _ what: String, sourceLocation: SourceLocation = #_sourceLocation) async throws -> [Int] {
        let before = try await cli.run(["export", "--type", "Item", "--quiet"])
        let dryRejects = cli.store.path("dry-\(UUID().uuidString).ndjson"), realRejects = cli.store.path("real-\(UUID().uuidString).ndjson")
        let dry = try await cli.run(["import", "--dry-run", "--reject-file", dryRejects] + arguments)
        let unchanged = try await cli.run(["export", "--type", "Item", "--quiet"])
        #expect(unchanged.stdout == before.stdout, "\(what): the dry run changed the store", sourceLocation: sourceLocation)
        let real = try await cli.run(["import", "--reject-file", realRejects] + arguments)
        #expect(dry.exitCode == real.exitCode, "\(what): dry run \(dry)\nreal run \(real)", sourceLocation: sourceLocation)
        let dryLines = try RejectLine.read(dryRejects).map { "\($0.line) \($0.error)" }
        let realLines = try RejectLine.read(realRejects).map { "\($0.line) \($0.error)" }
        #expect(!realLines.isEmpty, "\(what): the real run rejects something", sourceLocation: sourceLocation)
        #expect(dryLines == realLines, "\(what): the dry run reports what the real run rejects", sourceLocation: sourceLocation)
        let counts = Summary.ofImport(real, sourceLocation: sourceLocation)
        let written = (counts?.imported ?? 0) + (counts?.updated ?? 0) + (counts?.unchanged ?? 0)
        #expect(dry.stderrLines.last?.contains("dry run: \(written) valid, \(realLines.count) rejected") == true, "\(what): \(dry)", sourceLocation: sourceLocation)
        return try RejectLine.read(realRejects).map(\.line)
    }

    @Test("--dry-run reports what the real run would: schema types, --mode create, later lines seeing earlier ones, production's refusals; the store is unchanged", arguments: TestEngine.all)
    func dryRunReportsWhatTheRealRunWould(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let seeded = try await cli.run(["import"], stdin: #"{"recordName":"i1","recordType":"Item","fields":{"n":{"value":"text","type":"STRING"}}}"# + "\n")
            #expect(seeded.exitCode == 0, "\(seeded)")

            // A value of another type than the stored schema's.
            #expect(try await Self.expectDryRunMatches(cli, [try cli.file("typed.ndjson", #"{"recordName":"i2","recordType":"Item","fields":{"n":{"value":7,"type":"INT64"}}}"# + "\n")], "schema type") == [1])
            // --mode create on a record that exists, and on one an earlier line (an earlier batch) creates.
            let twice = """
                {"recordName":"i1","recordType":"Item","fields":{"n":{"value":"again","type":"STRING"}}}
                {"recordName":"i3","recordType":"Item","fields":{"n":{"value":"three","type":"STRING"},"m":{"value":1,"type":"INT64"}}}
                {"recordName":"i3","recordType":"Item","fields":{"n":{"value":"three again","type":"STRING"}}}
                {"recordName":"i4","recordType":"Item","fields":{"m":{"value":"a string now","type":"STRING"}}}

                """
            let twicePath = try cli.file("twice.ndjson", twice)
            #expect(try await Self.expectDryRunMatches(cli, [twicePath, "--mode", "create", "--batch-size", "1"], "--mode create, batches of 1") == [1, 3, 4])
            #expect(try await Self.expectDryRunMatches(cli, [twicePath, "--mode", "create"], "--mode create again") == [1, 2, 3, 4])

            // Production: a deployed schema refuses a new type, a new field and a plain value in an ENCRYPTED field.
            let schema = try cli.file("schema.ckdb", """
                DEFINE SCHEMA
                    RECORD TYPE Item (
                        "___recordID" REFERENCE QUERYABLE,
                        n STRING,
                        m INT64,
                        secret ENCRYPTED STRING,
                        GRANT WRITE TO "_creator",
                        GRANT CREATE TO "_icloud",
                        GRANT READ TO "_world"
                    );

                """)
            #expect(try await cli.run(["schema", "import", schema]).exitCode == 0)
            #expect(try await cli.run(["schema", "deploy"]).exitCode == 0)
            let production = """
                {"recordName":"p1","recordType":"Item","fields":{"n":{"value":"fine","type":"STRING"}}}
                {"recordName":"p2","recordType":"Widget","fields":{"n":{"value":"new type","type":"STRING"}}}
                {"recordName":"p3","recordType":"Item","fields":{"color":{"value":"new field","type":"STRING"}}}
                {"recordName":"p4","recordType":"Item","fields":{"secret":{"value":"plain","type":"STRING"}}}

                """
            #expect(try await Self.expectDryRunMatches(cli, [try cli.file("production.ndjson", production), "--environment", "production"], "production") == [2, 3, 4])
        }
    }

    // MARK: - CloudKit's own records

    @Test("--keep-system-records imports the public database's Users records as CloudKit made them: created for the user each names, who may then change it; no save creates one", arguments: TestEngine.all)
    func usersRecordsInThePublicDatabase(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let alice = Self.cloudKitUser, bob = "_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
            let input = """
                {"recordName":"\(alice)","recordType":"Users","fields":{"roles":{"value":[1],"type":"INT64_LIST"}},"recordChangeTag":"k1","created":{"timestamp":1700000000000,"userRecordName":"\(alice)"},"modified":{"timestamp":1700000001000,"userRecordName":"\(alice)"}}
                {"recordName":"\(bob)","recordType":"Users","fields":{"nick":{"value":"bob","type":"STRING"}}}

                """
            let path = try cli.file("users.ndjson", input)
            let refused = try await cli.run(["import", path])
            #expect(refused.exitCode == 1 && refused.stderr.contains("--keep-system-records"), "\(refused)")

            // Other users' records are restored by an administrator: a user restoring them could
            // fill in a user's record before that user first came.
            let asUser = try await cli.run(["import", path, "--keep-system-records"])
            #expect(asUser.exitCode == 1 && asUser.stderr.contains("--as-administrator"), "\(asUser)")
            let first = try await cli.run(["import", path, "--keep-system-records", "--as-administrator"])
            #expect(first.exitCode == 0, "\(first)")
            Summary.expectImport(first, imported: 2)
            let again = try await cli.run(["import", path, "--keep-system-records", "--as-administrator"])
            #expect(again.exitCode == 0, "\(again)")
            Summary.expectImport(again, unchanged: 2)
            let users = try await cli.exported("Users")
            #expect((users[alice]?["created"] as? [String: Any])?["userRecordName"] as? String == alice, "the export's creator is kept: \(users)")
            #expect((users[bob]?["created"] as? [String: Any])?["userRecordName"] as? String == bob, "a Users record is created for the user it names: \(users)")
            #expect(JSONLine.field(try #require(users[alice]), "roles")?["type"] as? String == "INT64_LIST", "roles are kept as values")

            // Its user may change it; another user may not, and no save creates one.
            let added = try await cli.run(["users", "add", "bob", "--record-name", bob])
            #expect(added.exitCode == 0, "\(added)")
            let asBob = try cli.container(user: "bob").publicCloudDatabase
            let record = try await asBob.record(for: Record.ID(recordName: bob))
            record["nick"] = "bobby"
            _ = try await asBob.save(record)
            let asTester = try cli.container(user: "tester").publicCloudDatabase
            let other = try await asTester.record(for: Record.ID(recordName: bob))
            other["nick"] = "mallory"
            #expect(stratusError(await caughtError { try await asTester.save(other) })?.code == .permissionFailure)
            let made = Record(recordType: "Users", recordID: Record.ID(recordName: "_cccccccccccccccccccccccccccccccc"))
            let denied = stratusError(await caughtError { try await asTester.save(made) })
            #expect(denied?.code == .permissionFailure && denied?.message.contains("--keep-system-records") == true, "\(String(describing: denied))")
            let plain = try await cli.run(["import", "--keep-system-records"], stdin: #"{"recordName":"plain","recordType":"Users","fields":{}}"# + "\n")
            #expect(plain.exitCode == 1 && plain.stderr.contains("permissionFailure") && plain.stderr.contains("one Users record per user"), "\(plain)")
        }
    }

    // MARK: - References stay in their zone

    @Test("a reference, reference list or parent whose zoneID names another zone is rejected with invalidArguments; nothing is stored for a delete there to miss", arguments: TestEngine.all)
    func crossZoneReferencesRejected(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let target = try await cli.run(["import", "--create-zones"], stdin: #"{"recordName":"t","recordType":"T","fields":{"n":{"value":1,"type":"INT64"}},"zoneID":{"zoneName":"Other"}}"# + "\n")
            #expect(target.exitCode == 0, "\(target)")
            let other = #""zoneID":{"zoneName":"Other"}"#
            // Records that name no zone go into the reader's (the default zone, or --zone).
            let input = """
                {"recordName":"s1","recordType":"S","fields":{"r":{"value":{"recordName":"t","action":"DELETE_SELF",\(other)},"type":"REFERENCE"}}}
                {"recordName":"s2","recordType":"S","fields":{"l":{"value":[{"recordName":"t","action":"DELETE_SELF",\(other)}],"type":"REFERENCE_LIST"}}}
                {"recordName":"s3","recordType":"S","fields":{"n":{"value":1,"type":"INT64"}},"parent":{"recordName":"t",\(other)}}
                {"recordName":"s4","recordType":"S","fields":{"r":{"value":{"recordName":"t","action":"DELETE_SELF",\(other)},"type":"REFERENCE"}},"zoneID":{"zoneName":"Z"}}

                """
            let rejects = store.path("rejects.ndjson")
            for zone in [[], ["--zone", "Z"]] as [[String]] {
                try? FileManager.default.removeItem(atPath: rejects)
                let lines = zone.isEmpty ? input : input.split(separator: "\n").prefix(3).joined(separator: "\n") + "\n"
                let result = try await cli.run(["import", "--create-zones", "--reject-file", rejects] + zone, stdin: lines)
                #expect(result.exitCode == 1, "\(result)")
                Summary.expectImport(result, failed: zone.isEmpty ? 4 : 3)
                let rejected = try RejectLine.read(rejects)
                #expect(rejected.count == (zone.isEmpty ? 4 : 3), "\(rejected.map(\.error))")
                #expect(rejected.allSatisfy { $0.error.contains("'Other'") }, "each reject names the other zone: \(rejected.map(\.error))")
                #expect(rejected.prefix(3).allSatisfy { $0.error.contains("invalidArguments") }, "\(rejected.map(\.error))")
            }
            #expect(try await cli.count("S") == 0)
            #expect(try await cli.count("S", extra: ["--zone", "Z"]) == 0)
            // A reference that names its record's zone (another owner name or none) is fine.
            let same = try await cli.run(["import", "--zone", "Other"], stdin: #"{"recordName":"s5","recordType":"S","fields":{"r":{"value":{"recordName":"t","action":"DELETE_SELF","zoneID":{"zoneName":"Other","ownerRecordName":"__defaultOwner__"}},"type":"REFERENCE"}}}"# + "\n")
            #expect(same.exitCode == 0, "\(same)")
            let deleted = try await cli.run(["delete", "t", "--zone", "Other", "--yes"])
            #expect(deleted.exitCode == 0, "\(deleted)")
            #expect(try await cli.count("S", extra: ["--zone", "Other"]) == 0, "DELETE_SELF within the zone cascades")
        }
    }
}
