import Foundation
import StratusTestSupport
import Testing

/// Real CloudKit Web Services `records/query` answers (sanitized captures in
/// `Tests/Fixtures/cloudkit-web-services/`) imported with `stratus import` as they are, and
/// exported back.
@Suite("CloudKit Web Services responses through stratus", .timeLimit(.minutes(30)))
struct CloudKitFixtureCLITests {
    static let directory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fixtures/cloudkit-web-services")

    static func fixture(_ name: String) throws -> (path: String, records: [[String: Any]]) {
        let url = directory.appendingPathComponent(name)
        let data = try #require(FileManager.default.contents(atPath: url.path), "the fixture \(url.path) is missing")
        let body = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        return (url.path, try #require(body["records"] as? [[String: Any]]))
    }

    /// Compares an exported field with the fixture's: same value, and the same type where the
    /// fixture gives one (else `inferred`).
    static func expectField(_ key: String, exported: [String: Any], original: [String: Any], inferred: String? = nil, sourceLocation: SourceLocation = #_sourceLocation) {
        guard let got = JSONLine.field(exported, key) else {
            Issue.record("field \(key) is missing from the export: \(exported)", sourceLocation: sourceLocation)
            return
        }
        let want = JSONLine.field(original, key) ?? [:]
        let type = want["type"] as? String ?? inferred
        #expect(got["type"] as? String == type, "\(key): type", sourceLocation: sourceLocation)
        if let reference = want["value"] as? [String: Any], reference["recordName"] != nil {
            let exportedReference = got["value"] as? [String: Any] ?? [:]
            #expect(exportedReference["recordName"] as? String == reference["recordName"] as? String, "\(key): reference", sourceLocation: sourceLocation)
            // The action comes back as it came (VALIDATE, which acts as NONE, included; none when none was given).
            #expect(exportedReference["action"] as? String == reference["action"] as? String, "\(key): action", sourceLocation: sourceLocation)
        } else {
            #expect(canonical(got["value"]) == canonical(want["value"]), "\(key): value", sourceLocation: sourceLocation)
        }
    }

    /// A parsed JSON value as sorted-key JSON text, for comparing values of any shape.
    static func canonical(_ value: Any?) -> String {
        guard let value, let data = try? JSONSerialization.data(withJSONObject: ["v": value], options: [.sortedKeys]) else { return "<none>" }
        return String(decoding: data, as: UTF8.self)
    }

    @Test("photos_all_photos_response.json imports as it is and exports back as it came", arguments: TestEngine.all)
    func photosQueryResponse(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let (path, originals) = try Self.fixture("photos_all_photos_response.json")
            let result = try await cli.run(["import", path])
            #expect(result.exitCode == 0, "\(result)")
            Summary.expectImport(result, imported: originals.count)

            let explicit = try await cli.run(["import", path, "--format", "envelope", "--dry-run"])
            #expect(explicit.exitCode == 0, "\(explicit)")

            let export = try await cli.run(["export", "--type", "CPLAsset", "--format", "envelope", "--quiet"])
            let masters = try await cli.run(["export", "--type", "CPLMaster", "--format", "json", "--quiet"])
            let body = try #require(try JSONSerialization.jsonObject(with: Data(export.stdout.utf8)) as? [String: Any], "\(export)")
            let assets = try #require(body["records"] as? [[String: Any]])
            let masterRecords = try #require(try JSONSerialization.jsonObject(with: Data(masters.stdout.utf8)) as? [[String: Any]], "\(masters)")
            let exported = Dictionary((assets + masterRecords).map { ($0["recordName"] as? String ?? "", $0) }, uniquingKeysWith: { a, _ in a })
            #expect(exported.count == originals.count)
            for original in originals {
                let name = try #require(original["recordName"] as? String)
                let record = try #require(exported[name], "\(name) was exported")
                // CloudKit's answer gave no types, change tags or dates: they stay left out.
                #expect(Self.canonical(record) == Self.canonical(original), "\(name)")
            }
        }
    }

    @Test("reminders_query_reminders_response.json: ENCRYPTED_BYTES is kept through the round trip, or each record is rejected as documented", arguments: TestEngine.all)
    func remindersWithEncryptedBytes(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let (path, originals) = try Self.fixture("reminders_query_reminders_response.json")
            // Reminders live in a private database; the public one holds no encrypted values.
            let zone = try await cli.run(["zones", "create", "Reminders", "--database", "private"])
            #expect(zone.exitCode == 0, "\(zone)")
            let rejects = store.path("reminders.rejects")
            let result = try await cli.run(["import", path, "--reject-file", rejects, "--database", "private"])
            #expect(result.stdout.isEmpty)

            let help = try await cli.run(["import", "--help"])
            let readme = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("README.md")
            let documentation = help.stdout + (FileManager.default.contents(atPath: readme.path).map { String(decoding: $0, as: UTF8.self) } ?? "")
            #expect(documentation.contains("ENCRYPTED_BYTES"), "neither `stratus import --help` nor README.md says what happens to ENCRYPTED_BYTES fields")

            if result.exitCode == 0 {
                // Kept: the export gives back every field with its type (ENCRYPTED_BYTES included) and every system field.
                Summary.expectImport(result, imported: originals.count)
                let export = try await cli.run(["export", "--type", "Reminder", "--zone", "Reminders", "--format", "envelope", "--quiet", "--database", "private"])
                #expect(export.exitCode == 0, "\(export)")
                let body = try #require(try JSONSerialization.jsonObject(with: Data(export.stdout.utf8)) as? [String: Any], "\(export)")
                let records = try #require(body["records"] as? [[String: Any]])
                #expect(records.count == originals.count)
                for original in originals {
                    let name = try #require(original["recordName"] as? String)
                    let record = try #require(records.first { $0["recordName"] as? String == name }, "\(name) was exported")
                    #expect(record["recordType"] as? String == original["recordType"] as? String)
                    #expect(record["recordChangeTag"] as? String == original["recordChangeTag"] as? String, "recordChangeTag")
                    for system in ["created", "modified"] {
                        let got = record[system] as? [String: Any] ?? [:]
                        let want = original[system] as? [String: Any] ?? [:]
                        #expect((got["timestamp"] as? NSNumber) == (want["timestamp"] as? NSNumber), "\(system).timestamp")
                        #expect(got["userRecordName"] as? String == want["userRecordName"] as? String, "\(system).userRecordName")
                    }
                    #expect((record["zoneID"] as? [String: Any])?["zoneName"] as? String == "Reminders")
                    let fields = original["fields"] as? [String: Any] ?? [:]
                    #expect((record["fields"] as? [String: Any])?.count == fields.count, "no field dropped or added")
                    for key in fields.keys {
                        Self.expectField(key, exported: record, original: original)
                    }
                }
                // Re-importing the export changes nothing.
                let again = try await cli.run(["import", try cli.file("reminders-export.json", export.stdout), "--database", "private"])
                #expect(again.exitCode == 0, "\(again)")
                Summary.expectImport(again, imported: 0, unchanged: originals.count)
            } else {
                // Rejected: exit 1, each record in the reject file with a message naming the field and the type.
                #expect(result.exitCode == 1, "\(result)")
                Summary.expectImport(result, imported: 0, failed: originals.count)
                let lines = try RejectLine.read(rejects)
                #expect(lines.count == originals.count)
                for line in lines {
                    #expect(line.error.contains("ENCRYPTED_BYTES") && (line.error.contains("TitleDocument") || line.error.contains("NotesDocument")), "\(line)")
                    #expect(line.line > 1 && line.column >= 1)
                }
                #expect(try await cli.count("Reminder", extra: ["--zone", "Reminders", "--database", "private"]) == 0, "nothing half-imported")
            }
        }
    }

    @Test("the album rename request (an untyped value in an ENCRYPTED_BYTES field) updates the album its create answer imported", arguments: TestEngine.all)
    func untypedValueInAnEncryptedField(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let place = ["--database", "private", "--owner-as-current-user"]
            let created = try await cli.run(["import", Self.directory.appendingPathComponent("album_create_response.json").path, "--zone", "PrimarySync", "--create-zones"] + place)
            #expect(created.exitCode == 0, "\(created)")
            let renamed = try await cli.run(["import", Self.directory.appendingPathComponent("album_rename_request.json").path, "--mode", "update"] + place)
            #expect(renamed.exitCode == 0, "\(renamed)")
            Summary.expectImport(renamed, updated: 1)
            let album = try await cli.run(["get", "ALBUM_RECORD_ID_001", "--zone", "PrimarySync", "--database", "private"])
            let record = try JSONLine.object(album.stdout)
            // Kept as the request wrote it: without a type.
            #expect(JSONLine.field(record, "albumNameEnc")?["value"] as? String == "QUxCVU1fTkFNRV9FTkNfMDI4", "\(album)")
            let schema = try await cli.run(["schema", "export", "--database", "private"])
            #expect(schema.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ").contains("albumNameEnc ENCRYPTED BYTES"), "\(schema)")
        }
    }

    @Test("a record a records/modify request creates reads back with the change tag, dates and zone the store gave it (a request is no answer whose absences stay)", arguments: TestEngine.all)
    func createdByARequestHasSystemFields(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let path = Self.directory.appendingPathComponent("album_create_request.json").path
            let created = try await cli.run(["import", path, "--mode", "create", "--database", "private", "--create-zones", "--owner-as-current-user"])
            #expect(created.exitCode == 0, "\(created)")
            let exported = try await cli.run(["export", "--type", "CPLAlbum", "--zone", "PrimarySync", "--database", "private", "--quiet"])
            let record = try JSONLine.object(exported.stdout)
            #expect(record["recordChangeTag"] is String && record["created"] != nil && record["modified"] != nil && record["zoneID"] != nil, "\(exported)")
        }
    }

    @Test("--atomic on a records/modify request (an atomic request to its zone) imports it into the zone it names, without --zone; into a store that does not exist yet only with --create-zones (found by a data tester: refused, naming the default zone)", arguments: TestEngine.all)
    func atomicRequestGoesToItsZone(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let path = Self.directory.appendingPathComponent("album_add_photo_request.json").path
            let place = ["--database", "private", "--owner-as-current-user"]
            let withoutZones = try await cli.run(["import", path, "--atomic", "--mode", "create"] + place)
            #expect(withoutZones.exitCode == 66 && withoutZones.stderr.contains("--create-zones"), "\(withoutZones)")
            #expect(!cli.storeExists(), "\(withoutZones)")
            let imported = try await cli.run(["import", path, "--atomic", "--mode", "create", "--create-zones"] + place)
            Summary.expectImport(imported, imported: 1)
            #expect(try await cli.count("CPLContainerRelation", extra: ["--zone", "PrimarySync", "--database", "private"]) == 1)
        }
    }

    @Test("a records/modify request larger than one read, its zoneID after the operations, imports into that zone", arguments: TestEngine.all)
    func modifyRequestWithZoneLast(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            // About 600 KB: more than the reader holds at once, as a real batch upload is.
            let padding = String(repeating: "x", count: 200)
            let operations = (0..<3_000).map { #"{"operationType":"create","record":{"recordName":"P\#($0)","recordType":"CPLAsset","fields":{"note":{"value":"\#(padding)"}}}}"# }
            let body = #"{"atomic":false,"operations":[\#(operations.joined(separator: ","))],"zoneID":{"zoneName":"PrimarySync","zoneType":"REGULAR_CUSTOM_ZONE"}}"#
            // Its operations are creates: the import applies them as creates, or not at all.
            let asUpdates = try await cli.run(["import", try cli.file("modify.json", body), "--create-zones", "--database", "private"])
            #expect(asUpdates.exitCode == 1 && asUpdates.stderr.contains("the operation 'create' would be saved as forceUpdate (the import's mode)")
                    && asUpdates.stderr.contains("--mode create"), "\(asUpdates.stderr.suffix(600))")
            Summary.expectImport(asUpdates, imported: 0, failed: 3_000)
            let result = try await cli.run(["import", try cli.file("modify.json", body), "--create-zones", "--database", "private", "--mode", "create"])
            #expect(result.exitCode == 0, "\(result)")
            Summary.expectImport(result, imported: 3_000)
            #expect(try await cli.count("CPLAsset", extra: ["--zone", "PrimarySync", "--database", "private"]) == 3_000)
            #expect(try await cli.count("CPLAsset", extra: ["--database", "private"]) == 0, "nothing went into the default zone")

            // A request that deletes (as album_remove_photo_request.json does) deletes, as a change feed's deletions do.
            let removal = #"{"atomic":true,"operations":[{"operationType":"forceDelete","record":{"recordName":"P1"}},{"operationType":"delete","record":{"recordName":"P2","recordChangeTag":"x"}}],"zoneID":{"zoneName":"PrimarySync","zoneType":"REGULAR_CUSTOM_ZONE"}}"#
            // A `delete`, which CloudKit applies only while its change tag matches, is rejected, not applied blindly.
            let removed = try await cli.run(["import", try cli.file("remove.json", removal), "--database", "private"])
            #expect(removed.exitCode == 1 && removed.stderrLines.last?.contains("deleted 1") == true, "\(removed)")
            #expect(removed.stderr.contains("the operation 'delete' deletes the record only while its change tag matches"), "\(removed)")
            #expect(try await cli.count("CPLAsset", extra: ["--zone", "PrimarySync", "--database", "private"]) == 2_999)
            #expect(try await cli.count("CPLAsset", extra: ["--zone", "PrimarySync", "--database", "private", "--where", "recordName == 'P2'"]) == 1)

            // A forceReplace removes the fields the request lacks, as in CloudKit; applied as the
            // default forceUpdate it would keep them, so it is refused under that mode.
            let replacing = #"{"operations":[{"operationType":"forceReplace","record":{"recordName":"P3","recordType":"CPLAsset","fields":{"rank":{"value":3}}}}],"zoneID":{"zoneName":"PrimarySync"}}"#
            let path = try cli.file("replace.json", replacing)
            let refused = try await cli.run(["import", path, "--database", "private"])
            #expect(refused.exitCode == 1 && refused.stderr.contains("--mode forceReplace"), "\(refused)")
            let applied = try await cli.run(["import", path, "--database", "private", "--mode", "forceReplace"])
            #expect(applied.exitCode == 0, "\(applied)")
            let replaced = try await cli.run(["get", "P3", "--zone", "PrimarySync", "--database", "private"])
            #expect(replaced.stdout.contains(#""rank""#) && !replaced.stdout.contains(#""note""#), "\(replaced)")
            // A create of a stored record fails, as CloudKit's does.
            let recreate = #"{"operations":[{"operationType":"create","record":{"recordName":"P4","recordType":"CPLAsset","fields":{}}}],"zoneID":{"zoneName":"PrimarySync"}}"#
            let existing = try await cli.run(["import", try cli.file("recreate.json", recreate), "--database", "private", "--mode", "create"])
            #expect(existing.exitCode == 1 && existing.stderrLines.last?.contains("failed 1") == true, "\(existing)")
        }
    }

    @Test("a changes/zone answer: a zone that is an error result fails (exit 1, naming the zone and code), the other zones import", arguments: TestEngine.all)
    func changesAnswerWithZoneError(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let body = """
                {"zones":[
                  {"zoneID":{"zoneName":"Gone","ownerRecordName":"_4f3b0a0c3f1e4f5c9d0a1b2c3d4e5f60","zoneType":"REGULAR_CUSTOM_ZONE"},"serverErrorCode":"ZONE_NOT_FOUND","reason":"Zone 'Gone' does not exist"},
                  {"zoneID":{"zoneName":"Notes","zoneType":"REGULAR_CUSTOM_ZONE"},"syncToken":"t1","moreComing":false,
                   "records":[{"recordName":"N1","recordType":"Note","fields":{"title":{"value":"a","type":"STRING"}}}]}
                ]}
                """
            let rejects = store.path("rejects.ndjson")
            let result = try await cli.run(["import", try cli.file("changes.json", body), "--create-zones", "--database", "private", "--reject-file", rejects])
            #expect(result.exitCode == 1, "\(result)")
            Summary.expectImport(result, imported: 1, failed: 1)
            let lines = try RejectLine.read(rejects)
            #expect(lines.count == 1)
            #expect(lines.first?.line == 2 && lines.first?.recordName == nil)
            #expect(lines.first?.error.contains("the changes of zone 'Gone' are a CloudKit error result ('serverErrorCode' ZONE_NOT_FOUND)") == true, "\(lines)")
            #expect(try await cli.count("Note", extra: ["--zone", "Notes", "--database", "private"]) == 1)
            #expect(!result.stderr.contains("created zone Gone"), "the failed zone is not created")
        }
    }

    /// A page of a zone's changes holding note N1 as `fields` give it, with change tag `tag`.
    static func changesPage(token: String, tag: String, modified: Int, fields: String) -> String {
        let user = #""userRecordName":"_0123456789abcdef0123456789abcdef""#
        return #"{"zones":[{"zoneID":{"zoneName":"Notes","zoneType":"REGULAR_CUSTOM_ZONE"},"syncToken":"\#(token)","moreComing":false,"records":["#
            + #"{"recordName":"N1","recordType":"Note","fields":{\#(fields)},"recordChangeTag":"\#(tag)","created":{"timestamp":1735689600000,\#(user)},"modified":{"timestamp":\#(modified),\#(user)}}]}]}"#
    }

    @Test("a later changes/zone answer replaces the records it holds: a field the newer version removed is gone, unless --mode forceUpdate merges", arguments: TestEngine.all)
    func changesAnswersReplaceWholeVersions(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let first = Self.changesPage(token: "T1", tag: "tag1", modified: 1735689600000, fields: #""title":{"value":"hi","type":"STRING"},"pinned":{"value":1,"type":"INT64"}"#)
            let second = Self.changesPage(token: "T2", tag: "tag2", modified: 1735776000000, fields: #""title":{"value":"hi","type":"STRING"}"#)
            let place = ["--database", "private", "--zone", "Notes"]
            let imported = try await cli.run(["import", try cli.file("page1.json", first), "--create-zones", "--database", "private"])
            #expect(imported.exitCode == 0, "\(imported)")
            #expect(!imported.stderr.contains("whole versions"), "nothing stored was replaced: \(imported.stderr)")

            let replaced = try await cli.run(["import", try cli.file("page2.json", second), "--database", "private"])
            #expect(replaced.exitCode == 0, "\(replaced)")
            Summary.expectImport(replaced, updated: 1)
            #expect(replaced.stderr.contains("whole versions") && replaced.stderr.contains("--mode forceUpdate"), "\(replaced.stderr)")
            let exported = try await cli.run(["export", "--type", "Note", "--quiet"] + place)
            let note = try JSONLine.object(exported.stdout)
            #expect(note["recordChangeTag"] as? String == "tag2")
            #expect(JSONLine.field(note, "pinned") == nil, "the field the newer version removed is gone: \(exported.stdout)")
            #expect(JSONLine.field(note, "title")?["value"] as? String == "hi")
            let again = try await cli.run(["import", try cli.file("page2.json", second), "--database", "private"])
            Summary.expectImport(again, unchanged: 1)

            // Merging, asked for: the older page's field comes back beside the newer one's.
            let merged = try await cli.run(["import", try cli.file("page1.json", first), "--database", "private"])
            Summary.expectImport(merged, updated: 1)
            let merging = try await cli.run(["import", try cli.file("page2.json", second), "--database", "private", "--mode", "forceUpdate"])
            #expect(merging.exitCode == 0 && !merging.stderr.contains("whole versions"), "\(merging)")
            let kept = try JSONLine.object(try await cli.run(["export", "--type", "Note", "--quiet"] + place).stdout)
            #expect(JSONLine.field(kept, "pinned")?["value"] as? Int == 1, "forceUpdate keeps the stored field")
        }
    }

    @Test("a changes/zone entry that names no zoneID rejects its records (their zone is unknown) rather than write them into the default zone; a zoneID after the records is read", arguments: TestEngine.all)
    func changesEntryWithoutZone(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let body = #"{"zones":[{"syncToken":"t","records":[{"recordName":"N1","recordType":"Note","fields":{}}]},"#
                + #"{"records":[{"recordName":"N2","recordType":"Note","fields":{}}],"zoneID":{"zoneName":"Late"}}]}"#
            let result = try await cli.run(["import", try cli.file("changes.json", body), "--create-zones", "--database", "private"])
            #expect(result.exitCode == 1, "\(result)")
            Summary.expectImport(result, imported: 1, failed: 1)
            #expect(result.stderr.contains("(N1): the entry of 'zones' that holds the record names no zoneID"), "\(result.stderr)")
            #expect(try await cli.count("Note", extra: ["--database", "private"]) == 0, "nothing lands in the default zone")
            #expect(try await cli.count("Note", extra: ["--zone", "Late", "--database", "private"]) == 1)

            // A moreComing that is no boolean would say nothing of the zone's other changes.
            let vague = #"{"zones":[{"zoneID":{"zoneName":"Late"},"moreComing":"yes","records":[]}]}"#
            let refused = try await cli.run(["import", try cli.file("vague.json", vague), "--database", "private"])
            #expect(refused.exitCode == 65 && refused.stderr.contains("'moreComing' must be true or false, not a string"), "\(refused)")
        }
    }

    @Test("a records/modify request's forceDelete of a whole record (fields, tag) deletes it; a records/lookup request is named as one", arguments: TestEngine.all)
    func requestShapesAreRead(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let created = try await cli.run(["import", try cli.file("in.ndjson", #"{"recordName":"o9","recordType":"Order","fields":{"total":{"value":12,"type":"INT64"}}}"# + "\n")])
            #expect(created.exitCode == 0, "\(created)")
            let request = #"{"operations":[{"operationType":"forceDelete","record":{"recordName":"o9","recordType":"Order","recordChangeTag":"t1","fields":{"total":{"value":12,"type":"INT64"}}}}]}"#
            let deleted = try await cli.run(["import", try cli.file("request.json", request)])
            #expect(deleted.exitCode == 0, "\(deleted)")
            #expect(deleted.stderr.contains("deleted 1, failed 0"), "\(deleted.stderr)")
            #expect(try await cli.count("Order") == 0)

            let lookup = #"{"records":[{"recordName":"R1"},{"recordName":"R2","desiredKeys":["title"]}],"zoneID":{"zoneName":"_defaultZone"}}"#
            let refused = try await cli.run(["import", try cli.file("lookup.json", lookup)])
            #expect(refused.exitCode == 1, "\(refused)")
            #expect(refused.stderr.contains("records/lookup request"), "\(refused.stderr)")
        }
    }

    @Test("an envelope that gives 'records' twice is refused (exit 65) naming the key and its place", arguments: TestEngine.all)
    func envelopeWithDuplicateKey(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let body = #"{"records":[{"recordName":"a","recordType":"T","fields":{}}],"syncToken":"s","records":[{"recordName":"b","recordType":"T","fields":{}}]}"#
            let zone = try await cli.run(["zones", "create", "Z", "--database", "private"])
            #expect(zone.exitCode == 0, "\(zone)")
            let result = try await cli.run(["import", try cli.file("twice.json", body), "--atomic", "--zone", "Z", "--database", "private"])
            #expect(result.exitCode == 65, "\(result)")
            #expect(result.stderr.contains("the key 'records' appears twice in the envelope (line 1, column 78)"), "\(result)")
            #expect(try await cli.count("T", extra: ["--zone", "Z", "--database", "private"]) == 0, "an atomic import writes nothing")
        }
    }

    @Test("values CloudKit Web Services types NUMBER_INT64 and NUMBER_DOUBLE (a NUMBER field) import as numbers and export back as they came", arguments: TestEngine.all)
    func numberTypedValues(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let schema = try await cli.run(["schema", "import", try cli.file("shortcuts.ckdb", "DEFINE SCHEMA RECORD TYPE Shortcut (color NUMBER PREFERRED AS INT64, name STRING, GRANT WRITE TO \"_creator\", GRANT CREATE TO \"_icloud\", GRANT READ TO \"_world\");")])
            #expect(schema.exitCode == 0, "\(schema)")
            let body = """
                {"records":[
                  {"recordName":"s1","recordType":"Shortcut","fields":{"name":{"value":"A","type":"STRING"},"color":{"value":4274264319,"type":"NUMBER_INT64"}}},
                  {"recordName":"s2","recordType":"Shortcut","fields":{"name":{"value":"B","type":"STRING"},"color":{"value":2.5,"type":"NUMBER_DOUBLE"}}}
                ]}
                """
            let result = try await cli.run(["import", try cli.file("lookup.json", body)])
            #expect(result.exitCode == 0, "\(result)")
            Summary.expectImport(result, imported: 2)
            #expect(try await cli.count("Shortcut", where: "color > 4000000000") == 1, "NUMBER_INT64 is the INT64 it holds")
            let records = try await cli.exported("Shortcut")
            let originals = try #require(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])["records"] as? [[String: Any]]
            for original in try #require(originals) {
                let name = try #require(original["recordName"] as? String)
                let exported = try #require(records[name], "\(name) was exported")
                #expect(Self.canonical(exported["fields"]) == Self.canonical(original["fields"]), "\(name): \(exported)")
            }
            // Into a development store without the schema: the first value grows a NUMBER field,
            // which takes the second (a field typed INT64 by the first would refuse 2.5).
            let bareStore = try await cli.newStore("bare.sqlite")
            let bare = try await cli.run(["import", try cli.file("lookup-bare.json", body), "--store", bareStore])
            #expect(bare.exitCode == 0, "\(bare)")
            Summary.expectImport(bare, imported: 2)
            let grown = try await cli.run(["schema", "export", "--store", bareStore])
            #expect(grown.stdout.contains("color") && grown.stdout.contains("NUMBER") && !grown.stdout.contains("PREFERRED"), "\(grown.stdout)")
            // The DOUBLE first, into another store: the same NUMBER field, whose export reads back unchanged.
            let reversed = """
                {"records":[
                  {"recordName":"s2","recordType":"Shortcut","fields":{"color":{"value":2.5,"type":"NUMBER_DOUBLE"}}},
                  {"recordName":"s1","recordType":"Shortcut","fields":{"color":{"value":4274264319,"type":"NUMBER_INT64"}}}
                ]}
                """
            let doubleFirst = try await cli.newStore("double-first.sqlite")
            #expect(try await cli.run(["import", try cli.file("reversed.json", reversed), "--store", doubleFirst]).exitCode == 0)
            let exported = try await cli.run(["schema", "export", "--store", doubleFirst])
            #expect(exported.stdout.contains("NUMBER") && !exported.stdout.contains("PREFERRED"), "\(exported.stdout)")
            let diff = try await cli.run(["schema", "diff", try cli.file("grown.ckdb", exported.stdout), "--store", doubleFirst])
            #expect(diff.exitCode == 0, "the export reads back as the stored schema: \(diff)")
        }
    }

    @Test("fields typed with cktool's names (stringType, int64Type, timestampType with an ISO 8601 date) import as those types and export back as they came", arguments: TestEngine.all)
    func cktoolTypedFields(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let line = #"{"recordName":"b1","recordType":"Book","fields":{"title":{"type":"stringType","value":"Treasure Island"},"#
                + #""pageCount":{"type":"int64Type","value":304},"published":{"type":"timestampType","value":"2026-06-05T20:15:55Z"}}}"#
            let result = try await cli.run(["import", try cli.file("books.ndjson", line + "\n")])
            #expect(result.exitCode == 0, "\(result)")
            Summary.expectImport(result, imported: 1)
            #expect(try await cli.count("Book", where: "pageCount == 304") == 1, "int64Type is INT64")
            #expect(try await cli.count("Book", where: "published > '2026-06-01'") == 1, "timestampType is TIMESTAMP")
            let exported = try #require(try await cli.exported("Book")["b1"])
            let original = try JSONLine.object(line)
            #expect(Self.canonical(exported["fields"]) == Self.canonical(original["fields"]), "\(exported)")
        }
    }

    @Test("a CKTool JS record (its zone as \"zone\", ISO 8601 dates, deviceId) imports into the zone it names and exports back with its zone as it came", arguments: TestEngine.all)
    func ckToolJSRecord(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let zone = #"{"zoneName":"Notes","canonicalName":"Notes","zoneType":"REGULAR_CUSTOM_ZONE"}"#
            let body = #"{"records":[{"recordName":"n1","recordType":"Note","recordChangeTag":"abc","#
                + #""created":{"deviceId":"2","timestamp":"2024-03-01T12:00:00.123Z","userRecordName":"_9a065b60313a5937e75e03ed8e8f383d"},"#
                + #""fields":{"title":{"type":"stringType","value":"hi"}},"zone":"# + zone + "}]}"
            let refused = try await cli.run(["import", try cli.file("notes.json", body), "--database", "private"])
            #expect(refused.exitCode == 65, "the zone it names does not exist: \(refused)")
            #expect(refused.stderr.contains("stratus zones create Notes"), "\(refused)")
            let result = try await cli.run(["import", try cli.file("notes.json", body), "--database", "private", "--create-zones"])
            #expect(result.exitCode == 0, "\(result)")
            Summary.expectImport(result, imported: 1)
            let exported = try #require(try await cli.exported("Note", extra: ["--zone", "Notes", "--database", "private"])["n1"])
            #expect(Self.canonical(exported["zone"]) == Self.canonical(try JSONLine.object(zone)), "\(exported)")
            #expect(try await cli.count("Note", extra: ["--database", "private"]) == 0, "nothing lands in the default zone")
        }
    }
}
