import Foundation
import Stratus
import StratusTransfer
import Testing

/// Real CloudKit Web Services bodies (sanitized captures from pyicloud), kept next to the repository.
enum Fixtures {
    static let directory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fixtures/cloudkit-web-services")

    static var available: Bool { FileManager.default.fileExists(atPath: directory.path) }

    static var names: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).filter { $0.hasSuffix(".json") }.sorted()
    }

    static func data(_ name: String) throws -> Data { try Data(contentsOf: directory.appendingPathComponent(name)) }

    /// How many record objects a body holds, counted with Foundation's parser as an oracle:
    /// `records` at the top or in `zones`, and each operation's record.
    static func recordCount(_ name: String) throws -> Int {
        guard let body = try JSONSerialization.jsonObject(with: data(name)) as? [String: Any] else { return 0 }
        var count = (body["records"] as? [Any])?.count ?? 0
        count += (body["operations"] as? [Any])?.count ?? 0
        for zone in body["zones"] as? [[String: Any]] ?? [] { count += (zone["records"] as? [Any])?.count ?? 0 }
        return count
    }

    static func read(_ name: String, _ configure: (inout RecordReadOptions) -> Void = { _ in }) throws -> [RecordReadResult] {
        var options = RecordReadOptions()
        configure(&options)
        return try readAll(data(name), options)
    }

    /// The text at a 1-based line and column of a fixture.
    static func text(_ name: String, line: Int, column: Int) throws -> Substring {
        let lines = String(decoding: try data(name), as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
        guard line >= 1 && line <= lines.count else { return "" }
        return lines[line - 1].dropFirst(column - 1)
    }
}

@Suite("CloudKit Web Services fixtures", .enabled(if: Fixtures.available))
struct FixtureTests {
    @Test("every fixture reads without throwing; each record object becomes a record or a rejection")
    func everyFixture() throws {
        #expect(Fixtures.names.count >= 15)
        for name in Fixtures.names {
            for zone in [RecordZone.ID.default, RecordZone.ID(zoneName: "PrimarySync")] {
                let items = try Fixtures.read(name) { $0.zoneID = zone }
                let expected = try Fixtures.recordCount(name)
                if expected > 0 {
                    #expect(items.count == expected, "\(name)")
                } else {
                    #expect(items.allSatisfy { $0.record == nil }, "\(name)")
                }
                for rejection in items.compactMap(\.rejection) {
                    #expect(rejection.line >= 1 && rejection.column >= 1, "\(name): \(rejection)")
                    #expect(!rejection.message.isEmpty)
                }
            }
        }
    }

    @Test("a query response with typed fields, pluginFields {}, deleted false and deviceID")
    func addPhotoResponse() throws {
        let items = try Fixtures.read("album_add_photo_response.json")
        let record = try #require(items.first?.record)
        #expect(record.recordID.recordName == "ASSET_RECORD_ID_031-IN-ALBUM_RECORD_ID_001")
        #expect(record.recordType == "CPLContainerRelation")
        #expect(record.recordChangeTag == "RECORD_CHANGE_TAG_284")
        #expect(record.creationDate == Date(timeIntervalSince1970: 1_775_666_233.042))
        #expect(record.creatorUserRecordID?.recordName == "OWNER_RECORD_NAME_001")
        #expect(record.lastModifiedUserRecordID?.recordName == "OWNER_RECORD_NAME_001")
        #expect(record.fieldValue(forKey: "position") == .int64(1024))
        #expect(record.fieldValue(forKey: "itemId") == .string("ASSET_RECORD_ID_031"))
        #expect(Set(record.changedKeys()) == ["itemId", "position", "containerId"])
        #expect(items.first?.line == 3)
    }

    @Test("ENCRYPTED_BYTES that are not base64 (the sanitized placeholders) are kept as opaque values and written back as they came")
    func encryptedPlaceholders() throws {
        for name in ["album_create_response.json", "album_rename_response.json", "album_delete_response.json"] {
            let record = try #require(try Fixtures.read(name).first?.record, "\(name)")
            #expect(record.encryptedKeys == ["albumNameEnc"], "\(name)")
            guard case .bytes(let opaque)? = record.fieldValue(forKey: "albumNameEnc") else {
                Issue.record("\(name): albumNameEnc is not BYTES")
                continue
            }
            #expect(String(decoding: opaque, as: UTF8.self).hasPrefix("ALBUM_NAME_ENC_0"), "\(name)")
            #expect(RecordJSONWriter.json(for: record).contains(#""albumNameEnc":{"value":"ALBUM_NAME_ENC_0"#), "\(name)")
        }
        // A BYTES value that is not base64 is still refused, naming its type.
        let plain = try readAll(#"{"recordName":"a","recordType":"T","fields":{"b":{"value":"not base64!","type":"BYTES"}}}"#)
        #expect(plain.first?.rejection?.message == "field 'b': BYTES value is not valid base64")
    }

    @Test("a full query response imports: ENCRYPTED_BYTES are kept as encrypted values")
    func reminders() throws {
        let items = try Fixtures.read("reminders_query_reminders_response.json")
        let record = try #require(items.first?.record)
        #expect(record.encryptedKeys == ["TitleDocument", "NotesDocument"])
        #expect(record.recordID.zoneID == RecordZone.ID(zoneName: "Reminders"))
        #expect(record.recordChangeTag == "reminder-change-tag-fixture")
        #expect(record.creatorUserRecordID?.recordName == "_synthetic_user")
        #expect(record.creationDate == Date(timeIntervalSince1970: 1_735_689_600))
        #expect(record.modificationDate == Date(timeIntervalSince1970: 1_735_776_000))
        if case .bytes(let data)? = record.fieldValue(forKey: "TitleDocument") {
            #expect(data == Data(base64Encoded: "eJzjYBCS4GAQYJASEhJwy6woKS1KVQhKzc3MS0ktAgBBdwbW"))
        } else {
            Issue.record("TitleDocument is not BYTES")
        }
        let list = Record.Reference(recordID: Record.ID(recordName: "List/LIST-A", zoneID: RecordZone.ID(zoneName: "Reminders")), action: .none)
        #expect(record.fieldValue(forKey: "List") == .reference(list))
        #expect(record.fieldValue(forKey: "AlarmIDs") == .stringList([]))
        #expect(record.fieldValue(forKey: "DueDate") == .date(Date(timeIntervalSince1970: 1_735_862_400)))
        #expect(record.allKeys().count == 16)
        // And it exports back with every value, encrypted marking and system field.
        for format in [RecordFormat.ndjson, .json, .envelope] {
            let data = try written([record], format: format)
            #expect(String(decoding: data, as: UTF8.self).contains(#""TitleDocument":{"value":"eJzjYBCS4GAQYJASEhJwy6woKS1KVQhKzc3MS0ktAgBBdwbW","type":"ENCRYPTED_BYTES"}"#))
            let back = try readAll(data)
            expectSame(back.first?.record, record, "\(format)")
        }
    }

    @Test("a changes/zone answer imports in its zone; isEncrypted values are kept encrypted")
    func notesChanges() throws {
        let items = try Fixtures.read("notes_changes_zone_response.json")
        #expect(items.count == 3)
        let note = try #require(items[0].record)
        #expect(note.recordID.zoneID.zoneName == "Notes")
        #expect(note.encryptedKeys == ["TitleEncrypted", "SnippetEncrypted"])
        #expect(RecordJSONWriter.json(for: note).contains(#""TitleEncrypted":{"value":"Synthetic note","type":"STRING","isEncrypted":true}"#))
        #expect(note.fieldValue(forKey: "TitleEncrypted") == .string("Synthetic note"))
        #expect(note.fieldValue(forKey: "ModificationDate") == .date(Date(timeIntervalSince1970: 1_735_776_000)))
        // VALIDATE has no Stratus equivalent and reads as .none.
        if case .reference(let folder)? = note.fieldValue(forKey: "Folder") {
            #expect(folder.action == .none)
            #expect(folder.recordID == Record.ID(recordName: "Folder/FOLDER-FIXTURE", zoneID: note.recordID.zoneID))
        } else {
            Issue.record("Folder is not a reference")
        }
        #expect(items[1].record?.recordType == "SearchIndexes")
        let tombstone = try #require(items[2].rejection)
        #expect(tombstone.recordName == "Note/NOTE-DELETED-FIXTURE")
        #expect(tombstone.message.contains("deletion"))
        #expect(try Fixtures.text("notes_changes_zone_response.json", line: tombstone.line, column: tombstone.column).hasPrefix("true"))
    }

    @Test("a changes/zone answer: records in the zone's zone, tombstones rejected")
    func photoZoneChanges() throws {
        let items = try Fixtures.read("photos_zone_changes_response.json")
        #expect(items.count == 2)
        let record = try #require(items[0].record)
        #expect(record.recordID.zoneID == RecordZone.ID(zoneName: "PrimarySync", ownerName: "OWNER_RECORD_NAME_001"))
        #expect(record.modificationDate == Date(timeIntervalSince1970: 1_775_666_233.042))
        #expect(record.creationDate == nil)
        #expect(items[1].rejection?.recordName == "ALBUM_RECORD_ID_999")
    }

    @Test("modify requests: operations import with the request's zoneID, even after them; deletes are rejected, or deletions when deletions are read")
    func modifyRequests() throws {
        let add = try #require(try Fixtures.read("album_add_photo_request.json").first?.record)
        #expect(add.recordID.zoneID == RecordZone.ID(zoneName: "PrimarySync", ownerName: "OWNER_RECORD_NAME_001"))
        #expect(add.fieldValue(forKey: "position") == .int64(1024))

        let delete = try #require(try Fixtures.read("album_delete_request.json").first?.record)
        #expect(delete.recordID.zoneID.zoneName == "PrimarySync")
        #expect(delete.recordChangeTag == "RECORD_CHANGE_TAG_289")
        #expect(delete.fieldValue(forKey: "isDeleted") == .int64(1))

        let rename = try #require(try Fixtures.read("album_rename_request.json").first?.record)
        #expect(rename.fieldValue(forKey: "albumNameEnc") == .string("QUxCVU1fTkFNRV9FTkNfMDI4"))
        #expect(rename.fieldValue(forKey: "userModificationDate") == .int64(1_775_666_024_305))

        // A create without a recordName gets a UUID, as in CloudKit: another each read, unless the reader is seeded.
        let create = try #require(try Fixtures.read("album_create_request.json").first?.record)
        #expect(create.recordType == "CPLAlbum" && UUID(uuidString: create.recordID.recordName) != nil, "\(create.recordID)")
        #expect(create.recordID.zoneID.zoneName == "PrimarySync" && create.fieldValue(forKey: "position") == .int64(1_051_646))
        #expect(try Fixtures.read("album_create_request.json").first?.record?.recordID != create.recordID)
        let seeded = try Fixtures.read("album_create_request.json") { $0.generatedNameSeed = "s" }.first?.record?.recordID
        let again = try Fixtures.read("album_create_request.json") { $0.generatedNameSeed = "s" }.first?.record?.recordID
        #expect(seeded != nil && seeded == again)
        let twoCreates = #"{"operations":[{"operationType":"create","record":{"recordType":"T","fields":{}}},{"operationType":"create","record":{"recordType":"T","fields":{}}}]}"#
        let named = try readAll(Data(twoCreates.utf8), RecordReadOptions()).compactMap { $0.record?.recordID.recordName }
        #expect(named.count == 2 && Set(named).count == 2, "two equal operations are two records: \(named)")
        // Other operations still need their record's name.
        let unnamed = #"{"operations":[{"operationType":"forceUpdate","record":{"recordType":"T","fields":{}}}]}"#
        #expect(try readAll(Data(unnamed.utf8), RecordReadOptions()).first?.rejection?.message.contains("no recordName") == true)

        let remove = try #require(try Fixtures.read("album_remove_photo_request.json").first?.rejection)
        #expect(remove.message.contains("forceDelete"))
        #expect(remove.recordName == "ASSET_RECORD_ID_031-IN-ALBUM_RECORD_ID_001")
        // Read with deletions (as stratus import reads), the forceDelete is a deletion in the request's zone.
        let removal = try Fixtures.read("album_remove_photo_request.json") { $0.readsDeletions = true }
        guard case .deletion(let removed, _, _)? = removal.first else {
            Issue.record("the forceDelete is a deletion: \(removal)")
            return
        }
        #expect(removed == Record.ID(recordName: "ASSET_RECORD_ID_031-IN-ALBUM_RECORD_ID_001", zoneID: RecordZone.ID(zoneName: "PrimarySync", ownerName: "OWNER_RECORD_NAME_001")))
        #expect(try Fixtures.read("album_remove_photo_response.json").first?.rejection?.message.contains("deletion") == true)
    }

    @Test("untyped values are inferred, or typed by a schema")
    func untypedQueryResponse() throws {
        let inferred = try Fixtures.read("photos_all_photos_response.json")
        let asset = try #require(inferred.first?.record)
        #expect(asset.fieldValue(forKey: "assetDate") == .int64(1_775_666_000_000))
        #expect(asset.fieldValue(forKey: "masterRef") == .reference(Record.Reference(recordID: Record.ID(recordName: "MASTER_RECORD_ID_201"), action: .none)))
        #expect(inferred.last?.record?.fieldValue(forKey: "filenameEnc") == .string("YWxsX3Bob3RvLmpwZw=="))

        var assetSchema = RecordTypeSchema(recordType: "CPLAsset")
        assetSchema.addField("assetDate", type: .timestamp, indexes: [])
        assetSchema.addField("addedDate", type: .timestamp, indexes: [])
        var masterSchema = RecordTypeSchema(recordType: "CPLMaster")
        masterSchema.addField("filenameEnc", type: .bytes, indexes: [])
        let typed = try Fixtures.read("photos_all_photos_response.json") {
            $0.schemas = ["CPLAsset": assetSchema, "CPLMaster": masterSchema]
        }
        #expect(typed.first?.record?.fieldValue(forKey: "assetDate") == .date(Date(timeIntervalSince1970: 1_775_666_000)))
        #expect(typed.last?.record?.fieldValue(forKey: "filenameEnc") == .bytes(Data("all_photo.jpg".utf8)))
    }

    @Test("a record that names no zone keeps its references' zoneID as it came, and a save refuses it outside that zone; one that names its zone cannot reference another")
    func photoDeleteResponse() throws {
        // A records/modify answer leaves the zone out (the request named it); its references name it.
        let record = try #require(try Fixtures.read("photo_delete_response.json").first?.record)
        #expect(record.recordID.zoneID == .default)
        let named = RecordZone.ID(zoneName: "PrimarySync", ownerName: "OWNER_RECORD_NAME_001")
        #expect(record.fieldValue(forKey: "masterRef") == .reference(Record.Reference(recordID: Record.ID(recordName: "MASTER_RECORD_ID_031", zoneID: named), action: .deleteSelf)))
        #expect(RecordJSONWriter.json(for: record).contains(
            #""masterRef":{"value":{"recordName":"MASTER_RECORD_ID_031","action":"DELETE_SELF","zoneID":{"zoneName":"PrimarySync","ownerRecordName":"OWNER_RECORD_NAME_001","zoneType":"REGULAR_CUSTOM_ZONE"}},"type":"REFERENCE"}"#))
        // In the default zone it would point across zones: the save refuses it (import it with --zone PrimarySync).
        #expect(throws: StratusError.self) { try record.validateForSave() }
        let inZone = try #require(try Fixtures.read("photo_delete_response.json") { $0.zoneID = RecordZone.ID(zoneName: "PrimarySync") }.first?.record)
        #expect(inZone.recordID.zoneID.zoneName == "PrimarySync")
        #expect(inZone.fieldValue(forKey: "masterRef") == .reference(Record.Reference(recordID: Record.ID(recordName: "MASTER_RECORD_ID_031", zoneID: inZone.recordID.zoneID), action: .deleteSelf)))
        try inZone.validateForSave()
        let crossing = try readAll(#"{"recordName":"a","recordType":"T","zoneID":{"zoneName":"A"},"fields":{"r":{"value":{"recordName":"b","action":"NONE","zoneID":{"zoneName":"B"}},"type":"REFERENCE"}}}"#)
        #expect(crossing.first?.rejection?.message.contains("references must stay in the record's zone") == true)
    }

    @Test("every record of every fixture is written back equal in JSON value to the object it was read from")
    func fixturesWriteBackAsTheyCame() throws {
        var compared = 0
        for name in Fixtures.names {
            let body = try JSONSerialization.jsonObject(with: Fixtures.data(name)) as? [String: Any] ?? [:]
            var originals = body["records"] as? [[String: Any]] ?? []
            for zone in body["zones"] as? [[String: Any]] ?? [] { originals += zone["records"] as? [[String: Any]] ?? [] }
            originals += (body["operations"] as? [[String: Any]] ?? []).compactMap { $0["record"] as? [String: Any] }
            let byName = Dictionary(originals.compactMap { o in (o["recordName"] as? String).map { ($0, o) } }, uniquingKeysWith: { a, _ in a })
            // Requests leave types out, and a records/modify request's records are not CloudKit's answer.
            guard !name.hasSuffix("_request.json") && !name.hasSuffix("_core.json") else { continue }
            for record in try Fixtures.read(name).compactMap(\.record) {
                let original = try #require(byName[record.recordID.recordName])
                let written = try JSONSerialization.jsonObject(with: Data(RecordJSONWriter.json(for: record).utf8))
                #expect(JSONValue(written) == JSONValue(original), "\(name): \(record.recordID.recordName)\n\(RecordJSONWriter.json(for: record))")
                compared += 1
            }
        }
        #expect(compared >= 10)
    }

    @Test("zone listings without records read as nothing")
    func zoneListings() throws {
        for name in ["photos_database_changes_response.json", "photos_zones_list_response.json"] {
            #expect(try Fixtures.read(name).isEmpty, "\(name)")
        }
    }

    @Test("every record read from the fixtures exports and reads back unchanged", arguments: RecordFormat.allCases)
    func fixturesRoundTrip(format: RecordFormat) throws {
        var records: [Record] = []
        for name in Fixtures.names {
            let items = try Fixtures.read(name) { $0.zoneID = RecordZone.ID(zoneName: "PrimarySync") }
            records += items.compactMap(\.record)
        }
        if format == .csv {
            // CSV carries no zone: keep the records of the zone it is read into.
            records = records.filter { $0.recordID.zoneID == RecordZone.ID(zoneName: "PrimarySync") }
        }
        #expect(records.count >= (format == .csv ? 3 : 8))
        // A record written without its zoneID (CloudKit's answer had none) reads back into the
        // zone it is read into: each zone's records are read back in their zone. A CSV column
        // is encrypted when the first record's value is, so CSV groups also share their
        // encrypted fields.
        func group(_ record: Record) -> String {
            "\(record.recordID.zoneID.zoneName)/\(record.recordID.zoneID.ownerName)/" + (format == .csv ? record.encryptedKeys.sorted().joined(separator: ",") : "")
        }
        for key in Set(records.map(group)) {
            let group = records.filter { group($0) == key }
            let zone = group[0].recordID.zoneID
            let fields = Array(Set(group.flatMap { $0.allKeys() })).sorted()
            var types: [String: FieldType] = [:]
            for record in group { for (key, value) in record.fieldValues { types[key] = value.type } }
            let data = try written(group, format: format, csvFields: fields) { $0.csvTypes = types }
            var options = RecordReadOptions()
            options.format = format
            options.zoneID = zone
            let items = try readAll(data, options)
            #expect(items.count == group.count)
            // Read together, a value that came without a type takes the type an earlier record
            // gave its field: the Photos answer's untyped `assetDate` numbers are the TIMESTAMPs
            // another answer types them as. (A CSV file types each column once, in its header.)
            var declared: [String: [String: FieldType]] = [:]
            for (item, record) in zip(items, group) {
                var expected = record
                for (key, value) in record.fieldValues {
                    if format != .csv, let type = declared[record.recordType]?[key], type == .timestamp, case .int64(let milliseconds) = value {
                        expected = expected.copy() as! Record
                        expected[key] = Date(timeIntervalSince1970: Double(milliseconds) / 1000)
                    } else if declared[record.recordType]?[key] == nil {
                        declared[record.recordType, default: [:]][key] = value.type
                    }
                }
                expectSame(item.record, expected, "\(format)")
            }
        }
    }
}
