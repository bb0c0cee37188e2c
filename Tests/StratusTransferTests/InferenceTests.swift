import Foundation
import Stratus
import StratusTransfer
import Testing

@Suite("Values without a type: schema first, then inference")
struct InferenceTests {
    static func field(_ json: String, key: String = "f", configure: (inout RecordReadOptions) -> Void = { _ in }) throws -> FieldValue? {
        let items = try readAll(#"{"recordName":"r","recordType":"T","fields":{"\#(key)":{"value":\#(json)}}}"#) { options in
            options.assetPaths = .anywhere    // paths these cases name, of this machine
            configure(&options)
        }
        if let rejection = items.first?.rejection { Issue.record("\(json): \(rejection)") }
        return items.first?.record?.fieldValue(forKey: key)
    }

    @Test("inferred types", arguments: [
        (#""text""#, FieldValue.string("text")),
        ("42", .int64(42)),
        ("-0", .int64(0)),
        ("2.5", .double(2.5)),
        ("2.0", .double(2)),
        ("1e3", .double(1000)),
        ("-1.5E-3", .double(-0.0015)),
        ("true", .int64(1)),
        ("false", .int64(0)),
        (#"{"recordName":"other"}"#, .reference(Record.Reference(recordID: Record.ID(recordName: "other"), action: .none))),
        (#"{"action":"DELETE_SELF","recordName":"other"}"#, .reference(Record.Reference(recordID: Record.ID(recordName: "other"), action: .deleteSelf))),
        (#"{"longitude":2,"latitude":1}"#, .location(Location(latitude: 1, longitude: 2))),
        (#"{"downloadURL":"file:///tmp/a%20b.jpg","size":3}"#, .asset(Asset(fileURL: URL(fileURLWithPath: "/tmp/a b.jpg")))),
        (#"["a","b"]"#, .stringList(["a", "b"])),
        ("[1,2]", .int64List([1, 2])),
        ("[1,2.5]", .doubleList([1, 2.5])),
        ("[2.5,1]", .doubleList([2.5, 1])),
        ("[true,false,3]", .int64List([1, 0, 3])),
        ("[]", .stringList([])),
        (#"[{"recordName":"a"},{"recordName":"b","action":"VALIDATE"}]"#, .referenceList([
            Record.Reference(recordID: Record.ID(recordName: "a"), action: .none), Record.Reference(recordID: Record.ID(recordName: "b"), action: .none),
        ])),
        (#"[{"latitude":1,"longitude":2}]"#, .locationList([Location(latitude: 1, longitude: 2)])),
    ] as [(String, FieldValue)])
    func inferred(json: String, expected: FieldValue) throws {
        #expect(try Self.field(json) == expected)
    }

    @Test("a schema types values that carry no type, and an explicit type wins over it")
    func schemaTypes() throws {
        var schema = RecordTypeSchema(recordType: "T")
        schema.addField("f", type: .timestamp, indexes: [])
        let configure: (inout RecordReadOptions) -> Void = { $0.schemas = ["T": schema] }
        #expect(try Self.field("1700000000000", configure: configure) == .date(Date(timeIntervalSince1970: 1_700_000_000)))
        #expect(try Self.field("1700000000000.5", configure: configure) == .date(Date(timeIntervalSince1970: 1_700_000_000.000_5)))

        schema.addField("f", type: .bytes, indexes: [])
        #expect(try Self.field(#""AAEC""#) == .string("AAEC"))
        #expect(try Self.field(#""AAEC""#, configure: { $0.schemas = ["T": schema] }) == .bytes(Data([0, 1, 2])))
        let explicit = try readAll(#"{"recordName":"r","recordType":"T","fields":{"f":{"value":"AAEC","type":"STRING"}}}"#) { $0.schemas = ["T": schema] }
        #expect(explicit.first?.record?.fieldValue(forKey: "f") == .string("AAEC"))

        schema.addField("f", type: .int64List, indexes: [])
        #expect(try Self.field("[]", configure: { $0.schemas = ["T": schema] }) == .int64List([]))
        // UNKNOWN_LIST is CloudKit's type of an empty list; the schema gives the element type.
        let unknown = try readAll(#"{"recordName":"r","recordType":"T","fields":{"f":{"value":[],"type":"UNKNOWN_LIST"}}}"#) { $0.schemas = ["T": schema] }
        #expect(unknown.first?.record?.fieldValue(forKey: "f") == .int64List([]))
        schema.addField("f", type: .reference, indexes: [])
        #expect(try Self.field(#""target""#, configure: { $0.schemas = ["T": schema] }) == .reference(Record.Reference(recordID: Record.ID(recordName: "target"), action: .none)))
    }

    @Test("a value without a type takes the type the input's first record holding its field gave it, where the schema does not declare it")
    func earlierRecordsDeclare() throws {
        let lines = [
            #"{"recordName":"a","recordType":"T","fields":{"d":{"value":1.5,"type":"DOUBLE"},"t":{"value":1000,"type":"TIMESTAMP"},"b":{"value":"AA==","type":"BYTES"},"tags":{"value":[]}}}"#,
            #"{"recordName":"b","recordType":"T","fields":{"d":{"value":2},"tags":{"value":[1]}}}"#,
            #"{"recordName":"c","recordType":"T","fields":{"t":{"value":2000},"tags":{"value":[2]}}}"#,
            #"{"recordName":"e","recordType":"T","fields":{"b":{"value":"AQ=="}}}"#,
            #"{"recordName":"f","recordType":"T","fields":{"t":{"value":"2024-01-01T00:00:00Z"}}}"#,
            #"{"recordName":"g","recordType":"U","fields":{"d":{"value":2}}}"#,
        ]
        let items = try readAll(lines.joined(separator: "\n") + "\n")
        let records = items.compactMap(\.record)
        #expect(records.count == lines.count, "\(items.compactMap(\.rejection))")
        func value(_ name: String, _ key: String) -> FieldValue? { records.first { $0.recordID.recordName == name }?.fieldValue(forKey: key) }
        #expect(value("b", "d") == .double(2))
        #expect(value("c", "t") == .date(Date(timeIntervalSince1970: 2)))
        #expect(value("e", "b") == .bytes(Data([1])))
        #expect(value("f", "t") == .date(ISO8601DateFormatter().date(from: "2024-01-01T00:00:00Z")!))
        // An empty list declares nothing; the first list with elements does.
        #expect(value("b", "tags") == .int64List([1]))
        #expect(value("c", "tags") == .int64List([2]))
        // Another record type's field of the same name is its own.
        #expect(value("g", "d") == .int64(2))

        // Records of one shape: an empty list in the first declares nothing, the typed list of
        // the second does.
        let shaped = try readAll([
            #"{"recordName":"s1","recordType":"S","fields":{"n":{"value":1},"tags":{"value":[]}}}"#,
            #"{"recordName":"s2","recordType":"S","fields":{"n":{"value":2},"tags":{"value":[1000],"type":"TIMESTAMP_LIST"}}}"#,
            #"{"recordName":"s3","recordType":"S","fields":{"n":{"value":3},"tags":{"value":[2000]}}}"#,
        ].joined(separator: "\n") + "\n")
        #expect(shaped.last?.record?.fieldValue(forKey: "tags") == .dateList([Date(timeIntervalSince1970: 2)]), "\(shaped.compactMap(\.rejection))")

        // The schema wins over what the input declares.
        var schema = RecordTypeSchema(recordType: "T")
        schema.addField("d", type: .int64, indexes: [])
        let typed = try readAll(lines[0] + "\n" + lines[1] + "\n") { $0.schemas = ["T": schema] }
        #expect(typed.last?.record?.fieldValue(forKey: "d") == .int64(2))
    }

    @Test("a value without a type in a field the schema, or an earlier record of the input, declares encrypted is an encrypted value")
    func untypedValuesOfEncryptedFields() throws {
        var schema = RecordTypeSchema(recordType: "T")
        schema.addField("secret", type: .bytes, isEncrypted: true)
        let bySchema = try readAll(#"{"recordName":"r","recordType":"T","fields":{"secret":{"value":"AAEC"}}}"#) { $0.schemas = ["T": schema] }
        let record = try #require(bySchema.first?.record)
        #expect(record.encryptedKeys == ["secret"])
        #expect(record.fieldValue(forKey: "secret") == .bytes(Data([0, 1, 2])))

        let byInput = try readAll("""
            {"recordName":"a","recordType":"T","fields":{"note":{"value":"AAEC","type":"ENCRYPTED_BYTES"}}}
            {"recordName":"b","recordType":"T","fields":{"note":{"value":"AQ=="}}}
            """)
        let later = try #require(byInput.last?.record)
        #expect(later.encryptedKeys == ["note"])
        #expect(later.fieldValue(forKey: "note") == .bytes(Data([1])))
    }

    @Test("a NUMBER PREFERRED AS field types an untyped number by the preference when it fits, else as DOUBLE; JSON and CSV alike")
    func numberFields() throws {
        var schema = RecordTypeSchema(recordType: "T")
        schema.fields.append(RecordTypeSchema.Field("f", type: .int64, isNumber: true))
        let asInt64: (inout RecordReadOptions) -> Void = { $0.schemas = ["T": schema] }
        #expect(try Self.field("2.5", configure: asInt64) == .double(2.5))
        #expect(try Self.field("2", configure: asInt64) == .int64(2))
        #expect(try Self.field("2.0", configure: asInt64) == .int64(2))
        #expect(try Self.field("1e30", configure: asInt64) == .double(1e30))
        #expect(try Self.field("true", configure: asInt64) == .int64(1))
        schema.fields = [RecordTypeSchema.Field("f", type: .double, isNumber: true)]
        let asDouble: (inout RecordReadOptions) -> Void = { $0.schemas = ["T": schema] }
        #expect(try Self.field("2", configure: asDouble) == .double(2))
        #expect(try Self.field("false", configure: asDouble) == .int64(0))
        schema.fields = [RecordTypeSchema.Field("f", type: .int64List, isNumber: true)]
        let asList: (inout RecordReadOptions) -> Void = { $0.schemas = ["T": schema] }
        #expect(try Self.field("[1,2]", configure: asList) == .int64List([1, 2]))
        #expect(try Self.field("[1,2.5]", configure: asList) == .doubleList([1, 2.5]))
        // A typed value keeps its type.
        let typed = try readAll(#"{"recordName":"r","recordType":"T","fields":{"f":{"value":2,"type":"DOUBLE"}}}"#, configure: asInt64)
        #expect(typed.first?.record?.fieldValue(forKey: "f") == .double(2))

        schema.fields = [RecordTypeSchema.Field("f", type: .int64, isNumber: true), RecordTypeSchema.Field("g", type: .int64List, isNumber: true)]
        let csv = try readAll("recordName,recordType,f,g\na,T,2.5,\"[1,2.5]\"\nb,T,7,\"[1,2]\"\n", format: .csv) { $0.schemas = ["T": schema] }
        #expect(csv.compactMap(\.rejection).isEmpty, "\(csv)")
        #expect(csv.first?.record?.fieldValue(forKey: "f") == .double(2.5))
        #expect(csv.first?.record?.fieldValue(forKey: "g") == .doubleList([1, 2.5]))
        #expect(csv.last?.record?.fieldValue(forKey: "f") == .int64(7))
        #expect(csv.last?.record?.fieldValue(forKey: "g") == .int64List([1, 2]))
    }

    @Test("a whole number a double cannot hold is never silently changed: INT64 in a NUMBER PREFERRED AS DOUBLE field, refused naming the value in a DOUBLE field; JSON and CSV alike")
    func wholeNumbersBeyondDoubles() throws {
        var schema = RecordTypeSchema(recordType: "T")
        schema.fields = [RecordTypeSchema.Field("f", type: .double, isNumber: true), RecordTypeSchema.Field("g", type: .doubleList, isNumber: true),
                         RecordTypeSchema.Field("d", type: .double)]
        let schemas: (inout RecordReadOptions) -> Void = { $0.schemas = ["T": schema] }
        // NUMBER PREFERRED AS DOUBLE: an integer a double holds is a DOUBLE, one it cannot hold stays INT64.
        #expect(try Self.field("9007199254740993", configure: schemas) == .int64(9_007_199_254_740_993))
        #expect(try Self.field("9007199254740992", configure: schemas) == .double(9_007_199_254_740_992))
        #expect(try Self.field("-9223372036854775807", configure: schemas) == .int64(-9_223_372_036_854_775_807))
        #expect(try Self.field("[1,9007199254740993]", key: "g", configure: schemas) == .int64List([1, 9_007_199_254_740_993]))
        #expect(try Self.field("[1.5,2]", key: "g", configure: schemas) == .doubleList([1.5, 2]))
        let csv = try readAll("recordName,recordType,f,g\na,T,9007199254740993,\"[1,9007199254740993]\"\nb,T,2,\"[2]\"\n", format: .csv, configure: schemas)
        #expect(csv.compactMap(\.rejection).isEmpty, "\(csv)")
        #expect(csv.first?.record?.fieldValue(forKey: "f") == .int64(9_007_199_254_740_993))
        #expect(csv.first?.record?.fieldValue(forKey: "g") == .int64List([1, 9_007_199_254_740_993]))
        #expect(csv.last?.record?.fieldValue(forKey: "f") == .double(2))

        // A DOUBLE field (or a DOUBLE type) takes no integer it would change; a double's own digits stay fine.
        for json in [#"{"recordName":"r","recordType":"T","fields":{"d":{"value":9007199254740993}}}"#,
                     #"{"recordName":"r","recordType":"U","fields":{"d":{"value":9007199254740993,"type":"DOUBLE"}}}"#,
                     #"{"recordName":"r","recordType":"U","fields":{"d":{"value":[1,9007199254740993],"type":"DOUBLE_LIST"}}}"#] {
            let items = try readAll(json, configure: schemas)
            let rejection = try #require(items.first?.rejection, "\(json)")
            #expect(rejection.message.contains("9007199254740993") && rejection.message.contains("is a whole number a DOUBLE cannot hold exactly (it would be stored as 9007199254740992)"), "\(rejection.message)")
        }
        let csvDouble = try readAll("recordName,recordType,d:DOUBLE\na,U,9007199254740993\n", format: .csv)
        let csvRejection = try #require(csvDouble.first?.rejection, "\(csvDouble)")
        #expect(csvRejection.message.contains("9007199254740993 is a whole number a DOUBLE cannot hold exactly"), "\(csvRejection.message)")
        // A double's exact digits too: 2^64 and 2^60 written out are those doubles.
        for (text, value) in [("1152921504606847000", 1_152_921_504_606_846_976.0), ("1152921504606846976", 1_152_921_504_606_846_976.0),
                              ("18446744073709551616", 18_446_744_073_709_551_616.0), ("-9223372036854775808", -9_223_372_036_854_775_808.0),
                              ("9007199254740992", 9_007_199_254_740_992.0), ("1e300", 1e300), ("-0", -0.0)] {
            let kept = try readAll(#"{"recordName":"r","recordType":"U","fields":{"d":{"value":\#(text),"type":"DOUBLE"}}}"#)
            #expect(kept.first?.record?.fieldValue(forKey: "d") == .double(value), "\(text): \(kept)")
        }
    }

    @Test("typed values: INT64 takes booleans and whole numbers written with a fraction; ASSET means ASSETID; NUMBER_INT64 and NUMBER_DOUBLE are numbers; cktool's stringType, int64Type and the like name their types")
    func typedValues() throws {
        func typed(_ json: String, _ type: String) throws -> FieldValue? {
            let items = try readAll(#"{"recordName":"r","recordType":"T","fields":{"f":{"type":"\#(type)","value":\#(json)}}}"#) { $0.assetPaths = .anywhere }
            if let rejection = items.first?.rejection { Issue.record("\(json) \(type): \(rejection)") }
            return items.first?.record?.fieldValue(forKey: "f")
        }
        #expect(try typed("2.0", "INT64") == .int64(2))
        #expect(try typed("1e3", "INT64") == .int64(1000))
        #expect(try typed("-9.223372036854775808e18", "INT64") == .int64(.min))
        #expect(try typed("true", "INT64") == .int64(1))
        #expect(try typed("7", "DOUBLE") == .double(7))
        #expect(try typed("-0.0", "DOUBLE") == .double(-0.0))
        // Too small for any double: refused as 1e400 is, not stored as another number (0).
        let underflow = try readAll(#"{"recordName":"r","recordType":"T","fields":{"f":{"type":"DOUBLE","value":1E-400}}}"#)
        #expect(underflow.first?.rejection?.message.contains("1E-400 is too small for a double") == true, "\(underflow)")
        #expect(try typed("0e-400", "DOUBLE") == .double(0))
        #expect(try typed("0.1", "TIMESTAMP") == .date(Date(timeIntervalSince1970: 0.0001)))
        #expect(try typed(#""/data/x.bin""#, "ASSET") == .asset(Asset(fileURL: URL(fileURLWithPath: "/data/x.bin"))))
        #expect(try typed(#"[{"downloadURL":"/a"}]"#, "ASSET_LIST") == .assetList([Asset(fileURL: URL(fileURLWithPath: "/a"))]))
        #expect(try typed(#""ab\/+cd\/\/""#, "BYTES") == .bytes(Data([0x69, 0xBF, 0xFE, 0x71, 0xDF, 0xFF])))
        #expect(try typed(#""caf\u00e9 \ud83d\ude00 \n""#, "STRING") == .string("café 😀 \n"))
        #expect(try typed("[]", "TIMESTAMP_LIST") == .dateList([]))
        // The value of a NUMBER field, as CloudKit Web Services types it: the number it is.
        #expect(try typed("4274264319", "NUMBER_INT64") == .int64(4_274_264_319))
        #expect(try typed("2.5", "NUMBER_DOUBLE") == .double(2.5))
        #expect(try typed("[1,2]", "NUMBER_INT64_LIST") == .int64List([1, 2]))
        // cktool's names for the same types (its --fields-json), dates in ISO 8601.
        #expect(try typed(#""Treasure Island""#, "stringType") == .string("Treasure Island"))
        #expect(try typed("304", "int64Type") == .int64(304))
        #expect(try typed("2.5", "doubleType") == .double(2.5))
        #expect(try typed(#""2026-06-05T20:15:55Z""#, "timestampType") == .date(Date(timeIntervalSince1970: 1_780_690_555)))
        #expect(try typed(#"{"recordName":"x"}"#, "referenceType") == .reference(Record.Reference(recordID: Record.ID(recordName: "x"), action: .none)))
        #expect(try typed(#"{"recordName":"x","zoneID":{"zoneName":"_defaultZone","zoneType":"DEFAULT_ZONE"}}"#, "REFERENCE")
            == .reference(Record.Reference(recordID: Record.ID(recordName: "x"), action: .none)))
    }

    @Test("encrypted values: ENCRYPTED_ types and isEncrypted mark the field; the parent is kept")
    func encrypted() throws {
        let line = #"{"recordName":"r","recordType":"T","parent":{"recordName":"p","zoneID":{"zoneName":"_defaultZone"}},"fields":{"#
            + #""a":{"value":"AQ==","type":"ENCRYPTED_BYTES"},"b":{"value":3,"type":"ENCRYPTED_INT64"},"#
            + #""c":{"value":"x","isEncrypted":true},"d":{"value":"y","type":"STRING","isEncrypted":false}}}"#
        let record = try #require(try readAll(line).first?.record)
        #expect(record.encryptedKeys == ["a", "b", "c"])
        #expect(record.fieldValue(forKey: "a") == .bytes(Data([1])))
        #expect(record.fieldValue(forKey: "b") == .int64(3))
        #expect(record.parent == Record.Reference(recordID: Record.ID(recordName: "p"), action: .none))
    }

    @Test("asset paths are read inside the asset directory only; without one they can be refused")
    func assetDirectory() throws {
        let folder = URL(fileURLWithPath: "/srv/export")
        let value = try Self.field(#"{"downloadURL":"photos/a.jpg"}"#) { $0.assetDirectory = folder }
        #expect(value == .asset(Asset(path: "photos/a.jpg", in: folder)))
        if case .asset(let asset)? = value { #expect(asset.fileURL == URL(fileURLWithPath: "/srv/export/photos/a.jpg")) }
        for (path, reason) in [("/etc/shadow", "absolute path"), ("../x", "'..' component"), ("a/../../x", "'..' component")] {
            let items = try readAll(#"{"recordName":"r","recordType":"T","fields":{"f":{"value":{"downloadURL":"\#(path)"},"type":"ASSETID"}}}"#) { $0.assetDirectory = folder }
            #expect(items.first?.rejection?.message.contains(reason) == true, "\(path)")
        }
        let refused = try readAll(#"{"recordName":"r","recordType":"T","fields":{"f":{"value":{"downloadURL":"a.jpg"},"type":"ASSETID"}}}"#) { $0.assetPaths = .refused }
        #expect(refused.first?.rejection?.message.contains("--assets-dir") == true)
    }

    @Test("an absolute path (a plain export's file: URL) is read only inside the asset folder or the store's own content folder, confined there")
    func absolutePathsInsideTrustedFolders() throws {
        let folder = URL(fileURLWithPath: "/srv/export")
        let content = URL(fileURLWithPath: "/var/lib/photos.sqlite.assets/sha256")
        func read(_ location: String) throws -> RecordReadResult? {
            try readAll(#"{"recordName":"r","recordType":"T","fields":{"f":{"value":{"downloadURL":"\#(location)"},"type":"ASSETID"}}}"#) {
                $0.assetDirectory = folder
                $0.storeContentDirectory = content
            }.first
        }
        #expect(try read("file:///srv/export/2024/a.jpg")?.record?.fieldValue(forKey: "f") == .asset(Asset(path: "2024/a.jpg", in: folder)))
        #expect(try read("/var/lib/photos.sqlite.assets/sha256/abc")?.record?.fieldValue(forKey: "f") == .asset(Asset(path: "abc", in: content)))
        let outside = try read("file:///var/lib/other.sqlite.assets/sha256/abc")?.rejection?.message ?? ""
        #expect(outside.contains("'/var/lib/other.sqlite.assets/sha256/abc' by an absolute path outside the assets folder /srv/export") && outside.contains("--assets-dir /var/lib/other.sqlite.assets/sha256"), "another store's content folder is named: \(outside)")
        let system = try read("/etc/passwd")?.rejection?.message ?? ""
        #expect(system.contains("give --assets-dir the folder that holds them") && !system.contains("--assets-dir /etc"), "the input chooses no folder to suggest: \(system)")
        let climbing = try read("/srv/export/../../etc/shadow")?.rejection?.message ?? ""
        #expect(climbing.contains("'..' component"), "\(climbing)")
    }

    @Test("by default, input is untrusted: an asset path of this machine is refused, not read into the store")
    func assetPathsRefusedByDefault() throws {
        #expect(RecordReadOptions().assetPaths == .refused)
        for location in ["/etc/passwd", "file:///etc/passwd", "../../secrets/key.pem", "photos/a.jpg"] {
            let items = try readAll(#"{"recordName":"r","recordType":"T","fields":{"f":{"value":{"downloadURL":"\#(location)"},"type":"ASSETID"}}}"#)
            #expect(items.first?.record == nil, "\(location)")
            #expect(items.first?.rejection?.message.contains("RecordReadOptions.assetDirectory") == true, "\(location): \(String(describing: items.first))")
        }
        // A CloudKit asset's https downloadURL names no file here, and is kept as it is.
        let remote = try readAll(#"{"recordName":"r","recordType":"T","fields":{"f":{"value":{"downloadURL":"https://cvws.icloud-content.com/B/x","size":3},"type":"ASSETID"}}}"#)
        #expect(remote.first?.record != nil, "\(String(describing: remote.first))")
    }

    @Test("a CloudKit asset keeps its downloadURL and every member of its dictionary")
    func remoteAsset() throws {
        let text = #"{"downloadURL":"https://cvws.icloud-content.com/B/x","fileChecksum":"AbC+/x==","size":12,"referenceChecksum":"rc","wrappingKey":"wk","receipt":"r1","future":{"a":1}}"#
        guard case .asset(let asset)? = try Self.field(text) else {
            Issue.record("not an asset")
            return
        }
        #expect(asset.downloadURL == "https://cvws.icloud-content.com/B/x")
        #expect(asset.fileChecksum == "AbC+/x==" && asset.size == 12 && asset.referenceChecksum == "rc" && asset.wrappingKey == "wk" && asset.receipt == "r1")
        #expect(asset.otherMembers == ["future": #"{"a":1}"#])
        #expect(asset.fileURL == nil && asset.storedIdentifier == nil)
    }

    @Test("CKTool JS's asset spells its URL downloadUrl: read as downloadURL, typed or not, remote or a file in the asset folder; both spellings at once are refused")
    func ckToolJSAssetURL() throws {
        let remote = try Self.field(#"{"downloadUrl":"https://cvws.icloud-content.com/B/x","fileChecksum":"AbC+/x==","size":12}"#)
        guard case .asset(let asset)? = remote else {
            Issue.record("not an asset: \(String(describing: remote))")
            return
        }
        #expect(asset.downloadURL == "https://cvws.icloud-content.com/B/x" && asset.fileChecksum == "AbC+/x==" && asset.size == 12)
        #expect(asset.otherMembers.isEmpty)
        let folder = URL(fileURLWithPath: "/srv/export")
        let typed = try readAll(#"{"recordName":"r","recordType":"T","fields":{"f":{"value":{"downloadUrl":"photos/a.jpg"},"type":"ASSETID"}}}"#) { $0.assetDirectory = folder }
        #expect(typed.first?.record?.fieldValue(forKey: "f") == .asset(Asset(path: "photos/a.jpg", in: folder)), "\(String(describing: typed.first))")
        let both = try readAll(#"{"recordName":"r","recordType":"T","fields":{"f":{"value":{"downloadURL":"a.jpg","downloadUrl":"b.jpg"},"type":"ASSETID"}}}"#) { $0.assetDirectory = folder }
        let message = both.first?.rejection?.message ?? ""
        #expect(message.contains("both downloadURL and downloadUrl") && message.contains("'f'"), "\(message)")
    }

    @Test("null removes a field: it is a changed key without a value")
    func nullRemoves() throws {
        let items = try readAll(#"{"recordName":"r","recordType":"T","fields":{"a":{"value":1},"gone":{"value":null,"type":"STRING"},"b":{"value":null}}}"#)
        let record = try #require(items.first?.record)
        #expect(record.allKeys() == ["a"])
        #expect(record.changedKeys() == ["a", "gone", "b"])
    }

    @Test("every field is a changed key, and system fields are kept")
    func changedKeys() throws {
        let line = #"{"fields":{"z":{"value":1},"a":{"value":"x"}},"recordType":"T","recordName":"r","recordChangeTag":"7","created":{"userRecordName":"_u","timestamp":1000},"modified":{"timestamp":2000.5,"deviceID":"d"},"zoneID":{"zoneName":"Z","ownerRecordName":"o","zoneType":"REGULAR_CUSTOM_ZONE"},"deleted":false,"pluginFields":{ },"expirationTime":5}"#
        let record = try #require(try readAll(line).first?.record)
        #expect(Set(record.changedKeys()) == ["z", "a"])
        #expect(record.recordID == Record.ID(recordName: "r", zoneID: RecordZone.ID(zoneName: "Z", ownerName: "o")))
        #expect(record.systemFields == Record.SystemFields(
            creationDate: Date(timeIntervalSince1970: 1), modificationDate: Date(timeIntervalSince1970: 2.0005),
            creatorUserRecordID: Record.ID(recordName: "_u"), recordChangeTag: "7"))
    }

    @Test("an empty recordChangeTag, as clients write for a record not saved yet, is no tag: in NDJSON, in an envelope and in a records/modify request")
    func emptyChangeTagIsNoTag() throws {
        let record = #"{"recordName":"r","recordType":"T","recordChangeTag":"","fields":{"a":{"value":1}}}"#
        let inputs = [
            record,
            #"{"records":["# + record + "]}",
            #"{"operations":[{"operationType":"forceUpdate","record":"# + record + "}]}",
        ]
        for input in inputs {
            let read = try #require(try readAll(input).first?.record, "\(input)")
            #expect(read.recordChangeTag == nil, "\(input)")
            #expect(read.allKeys() == ["a"], "\(input)")
        }
    }

    @Test("a CKTool JS record's \"zone\" is its zone, a zoneID wins over it, and it goes back as it came without a zoneID")
    func ckToolZone() throws {
        let zone = #"{"zoneName":"Notes","canonicalName":"Notes","zoneType":"REGULAR_CUSTOM_ZONE","ownerRecordName":"_a1"}"#
        let line = #"{"recordName":"n","recordType":"Note","fields":{"see":{"value":{"recordName":"m"},"type":"REFERENCE"}},"zone":"# + zone + "}"
        let envelope = #"{"records":["# + line + "]}"
        let record = try #require(try readAll(envelope).first?.record)
        let notes = RecordZone.ID(zoneName: "Notes", ownerName: "_a1")
        #expect(record.recordID.zoneID == notes)
        #expect(record.fieldValue(forKey: "see") == .reference(Record.Reference(recordID: Record.ID(recordName: "m", zoneID: notes), action: .none)))
        let output = String(decoding: try written([record], format: .envelope), as: UTF8.self)
        #expect(output.contains(#""zone":"# + zone) && !output.contains("zoneID"), "\(output)")

        let both = #"{"recordName":"n","recordType":"Note","zone":{"zoneName":"Notes"},"zoneID":{"zoneName":"Other"}}"#
        #expect(try readAll(both).first?.record?.recordID.zoneID.zoneName == "Other")
        let nameless = try readAll(#"{"recordName":"n","recordType":"Note","zone":{"canonicalName":"Notes"}}"#)
        #expect(nameless.first?.rejection?.message.contains("'zone' has no zoneName") == true, "\(nameless)")
    }

    @Test("records without a zoneID take the reader's zone, and so do their references")
    func defaultZone() throws {
        let zone = RecordZone.ID(zoneName: "Lists", ownerName: "alice")
        let items = try readAll(#"{"recordName":"r","recordType":"T","fields":{"list":{"value":{"recordName":"l","action":"DELETE_SELF"}}}}"#) { $0.zoneID = zone }
        let record = try #require(items.first?.record)
        #expect(record.recordID.zoneID == zone)
        #expect(record.fieldValue(forKey: "list") == .reference(Record.Reference(recordID: Record.ID(recordName: "l", zoneID: zone), action: .deleteSelf)))
    }

    @Test("format detection", arguments: [
        ("", RecordFormat.ndjson),
        ("  \n", .ndjson),
        (#"{"recordName":"a","recordType":"T"}"#, .ndjson),
        ("\u{FEFF}{\"recordName\":\"a\",\"recordType\":\"T\"}", .ndjson),
        ("  [ ]", .json),
        ("{\n  \"recordName\": \"a\",\n  \"recordType\": \"T\"\n}\n", .json),
        // One record whose first line holds a member: a document, not a broken NDJSON line.
        ("{\"recordName\": \"a\",\n \"recordType\": \"T\", \"fields\": {}}", .json),
        ("{\"recordName\": \"a\", \"recordType\": \"T\",\r\n \"fields\": {\"n\": {\"value\": 1}}}\r\n", .json),
        // A CKTool JS record answer (CKDBRecordResponse).
        (#"{"record":{"recordName":"a","recordType":"T","fields":{"n":{"type":"int64Type","value":1}}}}"#, .envelope),
        (#"{"records":[]}"#, .envelope),
        ("{\n \"zones\": []\n}", .envelope),
        (#"{"atomic":true,"operations":[]}"#, .envelope),
        (#"{"zoneID":{"zoneName":"Z"},"operations":[]}"#, .envelope),
        (#"{"zoneID":{"zoneName":"Z"},"recordName":"a","recordType":"T"}"#, .ndjson),
        ("recordName,recordType,title\na,T,x\n", .csv),
        ("\u{FEFF}\n\nid,\"recordName\",recordType\r\n1,a,T\r\n", .csv),
    ] as [(String, RecordFormat)])
    func detection(text: String, format: RecordFormat) throws {
        let reader = try RecordReader(data: Data(text.utf8), options: RecordReadOptions())
        #expect(reader.detectedFormat == format)
        while let item = try reader.next() {
            if let rejection = item.rejection { Issue.record("\(text): \(rejection)") }
        }
    }

    @Test("a pretty-printed single record and a sequence of values read as a document")
    func prettyRecord() throws {
        let text = """
            {
              "recordName": "a",
              "recordType": "T",
              "fields": {"n": {"value": 1}}
            }
            [{"recordName": "b", "recordType": "T"}]
            """
        let items = try readAll(text)
        #expect(items.compactMap(\.record).map(\.recordID.recordName) == ["a", "b"])
        #expect(items.map(\.line) == [1, 6])
        // Detection and every top-level value work the same when each read brings a few bytes.
        let spaced = "\n\n   " + text + "\n   {\"records\": [{\"recordName\": \"c\", \"recordType\": \"T\"}], \"syncToken\": \"s\"}\n"
        for chunk in 1...9 {
            let chunked = try readFromFile(Data(spaced.utf8), chunkSize: chunk)
            #expect(chunked.compactMap(\.record).map(\.recordID.recordName) == ["a", "b", "c"], "chunk \(chunk)")
            #expect(chunked.map(\.line) == [3, 8, 9], "chunk \(chunk)")
        }
    }
}
