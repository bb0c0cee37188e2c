import Foundation
import Stratus
import StratusTransfer
import Testing

/// Values of every kind, with the awkward cases: escapes, Unicode, extremes, precise dates.
enum Samples {
    static let strings = [
        "", "plain", "quote \" backslash \\ slash / comma , brace } bracket ]",
        "newline \n return \r tab \t bell \u{7} nul \u{0} delete \u{7F}",
        "Grüße, 日本語, emoji 👩‍👩‍👧‍👦, astral \u{1D11E} \u{10FFFF}", "\u{FEFF}bom \u{2028} \u{2029}",
        "  leading and trailing spaces  ", "{\"looks\":\"like json\"}", "[1,2]", "null",
    ]

    static let dates = [
        Date(timeIntervalSinceReferenceDate: 712_345_678.123_456_7),
        Date(timeIntervalSinceReferenceDate: -31_536_000.000_001),
        Date(timeIntervalSince1970: -1_234_567.891_011),
        Date(timeIntervalSinceReferenceDate: 0.000_000_1),
        Date(timeIntervalSinceReferenceDate: 1_000_000_000.5),
        Date(timeIntervalSince1970: 1_775_666_233.042),
        Date(timeIntervalSince1970: 0),
        Date(timeIntervalSinceReferenceDate: -0.0),
        Date(timeIntervalSinceReferenceDate: 1e-300),
        Date(timeIntervalSinceReferenceDate: 3e15),
        Date(timeIntervalSinceReferenceDate: -1.7e300),
        Date(timeIntervalSinceReferenceDate: .greatestFiniteMagnitude),
        Date(timeIntervalSinceReferenceDate: .leastNonzeroMagnitude),
        Date(timeIntervalSinceReferenceDate: 712_345_678.1),
    ]

    static let doubles: [Double] = [
        2.0, 0.1, -0.0, 1e-300, 1e300, .leastNonzeroMagnitude, .greatestFiniteMagnitude, -12_345.678_9,
        0.1 + 0.2, 3.141_592_653_589_793, 9_007_199_254_740_992, 123_456_789_012_345_683_968, 1.5e-10, Double.leastNonzeroMagnitude.nextUp,
    ]

    static func location(_ seed: Double) -> Location {
        Location(latitude: 52.520_008 + seed, longitude: 13.404_954 - seed, altitude: 34.25 + seed, horizontalAccuracy: 5.5,
                 verticalAccuracy: 3.125, course: 271.75, speed: 1.4 + seed,
                 timestamp: Date(timeIntervalSinceReferenceDate: 712_345_678.123_456 + seed))
    }

    static func reference(_ name: String, _ action: Record.ReferenceAction = .none, zone: RecordZone.ID = .default) -> Record.Reference {
        Record.Reference(recordID: Record.ID(recordName: name, zoneID: zone), action: action)
    }

    static let assetA = Asset(fileURL: URL(fileURLWithPath: "/tmp/stratus assets/photo, one.jpg"))
    static let assetB = Asset(fileURL: URL(fileURLWithPath: "/var/data/b.bin"))

    /// One field per kind of value, plus edge cases, in `zone`.
    static func everyValue(zone: RecordZone.ID = .default) -> [String: FieldValue] {
        var fields: [String: FieldValue] = [
            "int64": .int64(2), "int64Max": .int64(.max), "int64Min": .int64(.min), "int64Zero": .int64(0),
            "bytes": .bytes(Data([0, 1, 2, 0x7F, 0x80, 0xFE, 0xFF])), "bytesEmpty": .bytes(Data()),
            "bytes1": .bytes(Data([0xFB])), "bytes2": .bytes(Data([0xFB, 0xFF])),
            "referenceNone": .reference(reference("target-a", zone: zone)),
            "referenceDeleteSelf": .reference(reference("target-b", .deleteSelf, zone: zone)),
            "referenceBrace": .reference(reference("{brace", zone: zone)),
            "location": .location(location(0)),
            "locationPlain": .location(Location(latitude: -33.868_82, longitude: 151.209_29)),
            "asset": .asset(assetA),
            "stringList": .stringList(strings), "int64List": .int64List([2, -1, .max, .min, 0]),
            "doubleList": .doubleList(doubles), "dateList": .dateList(dates),
            "bytesList": .bytesList([Data([1, 2, 3]), Data(), Data([0xFF])]),
            "referenceList": .referenceList([reference("target-a", zone: zone), reference("target-b", .deleteSelf, zone: zone)]),
            "locationList": .locationList([location(0), location(1.5)]), "assetList": .assetList([assetA, assetB]),
            "emptyStringList": .stringList([]), "emptyInt64List": .int64List([]), "emptyDoubleList": .doubleList([]),
            "emptyDateList": .dateList([]), "emptyBytesList": .bytesList([]), "emptyReferenceList": .referenceList([]),
            "emptyLocationList": .locationList([]), "emptyAssetList": .assetList([]),
            "secretBytes": .bytes(Data([9, 8, 7])), "secretText": .string("ciphertext, \"quoted\""),
            "secretList": .int64List([1, 2]),
        ]
        for (i, s) in strings.enumerated() { fields["string\(i)"] = .string(s) }
        for (i, d) in doubles.enumerated() { fields["double\(i)"] = .double(d) }
        for (i, d) in dates.enumerated() { fields["date\(i)"] = .date(d) }
        return fields
    }

    static func records(zone: RecordZone.ID = .default) -> [Record] {
        [
            storedRecord("Everything", "every-value", zone: zone, everyValue(zone: zone), parent: "the-parent",
                         encrypted: ["secretBytes", "secretText", "secretList"]),
            storedRecord("Sparse", "sparse.1", zone: zone, ["title": .string("only a title")], tag: nil, created: nil, modified: nil),
            storedRecord("Sparse", "quote\"and,comma", zone: zone, ["n": .int64(1)], tag: "t,2", created: Date(timeIntervalSince1970: 0.0001)),
            storedRecord("Empty", "no-fields", zone: zone, [:]),
        ]
    }
}

@Suite("Round trips: write, then read back the same values")
struct RoundTripTests {
    @Test("every value and system field survives each JSON format", arguments: [RecordFormat.ndjson, .json, .envelope])
    func jsonFormats(format: RecordFormat) throws {
        for zone in [RecordZone.ID.default, RecordZone.ID(zoneName: "Photos", ownerName: "_owner")] {
            let records = Samples.records(zone: zone)
            let data = try written(records, format: format, marker: "next-page")
            var options = RecordReadOptions()
            options.format = format
            options.assetPaths = .anywhere    // the samples' asset files, which this test wrote
            let items = try readAll(data, options)
            #expect(items.count == records.count)
            for (item, record) in zip(items, records) {
                if let rejection = item.rejection { Issue.record("\(format): \(rejection)") }
                expectSame(item.record, record, "\(format) in \(zone.zoneName)")
            }
            // Detection finds the same format.
            let detected = try RecordReader(data: data, options: RecordReadOptions())
            #expect(detected.detectedFormat == format)
        }
    }

    @Test("CSV keeps every value, the record's identity and system fields")
    func csv() throws {
        let records = Samples.records()
        let fields = Array(Samples.everyValue().keys.sorted()) + ["title", "n"]
        var types: [String: FieldType] = [:]
        for (key, value) in Samples.everyValue() { types[key] = value.type }
        types["title"] = .string
        types["n"] = .int64
        let data = try written(records, format: .csv, csvFields: fields) { $0.csvTypes = types }
        let items = try readAll(data, { var o = RecordReadOptions(); o.format = .csv; o.assetPaths = .anywhere; return o }())
        #expect(items.count == records.count)
        for (item, record) in zip(items, records) {
            if let rejection = item.rejection { Issue.record("csv: \(rejection)") }
            expectSame(item.record, record, "csv")
        }
        // The header carries the types, so no option is needed to read it back.
        let header = String(decoding: data.prefix(while: { $0 != 0x0A }), as: UTF8.self)
        #expect(header.hasPrefix("recordName,recordType,recordChangeTag,creationDate,creatorUserRecordID,modificationDate,lastModifiedUserRecordID,"))
        #expect(header.contains("lastModifiedUserRecordID,parent,asset:ASSETID,assetList:ASSETID_LIST,bytes:BYTES"))
        #expect(header.contains("secretBytes:ENCRYPTED_BYTES,secretList:ENCRYPTED_INT64_LIST,secretText:ENCRYPTED_STRING"))
    }

    @Test("the envelope carries the continuation marker; records stay one per line")
    func envelopeMarker() throws {
        let records = Samples.records()
        let data = try written(records, format: .envelope, marker: "cursor \"7\"")
        let reader = try RecordReader(data: data, options: RecordReadOptions())
        var count = 0
        while try reader.next() != nil { count += 1 }
        #expect(count == records.count)
        #expect(reader.continuationMarker == "cursor \"7\"")
        #expect(reader.detectedFormat == .envelope)
        let text = String(decoding: data, as: UTF8.self)
        #expect(text.hasPrefix("{\"records\":[\n{\"recordName\":\"every-value\""))
        #expect(text.hasSuffix("\n],\"continuationMarker\":\"cursor \\\"7\\\"\"}\n"))
    }

    @Test("empty outputs are valid and read as no records", arguments: RecordFormat.allCases)
    func emptyOutputs(format: RecordFormat) throws {
        let data = try written([], format: format, csvFields: ["title"], marker: "m")
        var options = RecordReadOptions()
        options.format = format
        options.csvRecordType = "Note"
        #expect(try readAll(data, options).isEmpty)
        switch format {
        case .ndjson: #expect(data.isEmpty)
        case .json: #expect(String(decoding: data, as: UTF8.self) == "[]\n")
        case .envelope: #expect(String(decoding: data, as: UTF8.self) == "{\"records\":[],\"continuationMarker\":\"m\"}\n")
        case .csv: #expect(String(decoding: data, as: UTF8.self).hasPrefix("recordName,recordType,"))
        }
    }

    @Test("RecordJSONWriter.json(for:) is one NDJSON line that reads back")
    func singleLine() throws {
        let record = Samples.records()[0]
        let line = RecordJSONWriter.json(for: record)
        #expect(!line.contains("\n"))
        let items = try readAll(line) { $0.assetPaths = .anywhere }
        #expect(items.count == 1)
        expectSame(items.first?.record, record, "json(for:)")
        #expect(line + "\n" == String(decoding: try written([record], format: .ndjson), as: UTF8.self))
    }

    @Test("reading through a file in tiny chunks gives what reading from memory gives", arguments: [1, 2, 3, 7, 64, 4096])
    func chunked(chunkSize: Int) throws {
        for format in RecordFormat.allCases where format != .csv {
            let data = try written(Samples.records(), format: format)
            let expected = try readAll(data)
            let actual = try readFromFile(data, chunkSize: chunkSize)
            #expect(actual.count == expected.count)
            for (a, e) in zip(actual, expected) {
                #expect(a.line == e.line)
                if let record = e.record { expectSame(a.record, record, "\(format) chunk \(chunkSize)") }
            }
        }
        let csvData = try written(Samples.records(), format: .csv, csvFields: Array(Samples.everyValue().keys.sorted()) + ["title", "n"]) {
            $0.csvTypes = ["title": .string, "n": .int64]
        }
        var options = RecordReadOptions()
        options.format = .csv
        let expected = try readAll(csvData, options)
        let actual = try readFromFile(csvData, chunkSize: chunkSize, options)
        #expect(actual.count == expected.count)
        for (a, e) in zip(actual, expected) {
            #expect(a.line == e.line)
            if let record = e.record { expectSame(a.record, record, "csv chunk \(chunkSize)") }
        }
    }

    @Test("encrypted values travel as CloudKit writes them; the parent as a reference without action")
    func encryptedAndParent() throws {
        let record = storedRecord("T", "child", ["b": .bytes(Data([1])), "s": .string("x"), "p": .string("plain")], tag: nil, created: nil, modified: nil,
                                  parent: "mother", encrypted: ["b", "s"])
        let line = RecordJSONWriter.json(for: record)
        #expect(line == #"{"recordName":"child","recordType":"T","parent":{"recordName":"mother"},"fields":{"b":{"value":"AQ==","type":"ENCRYPTED_BYTES"},"p":{"value":"plain","type":"STRING"},"s":{"value":"x","type":"STRING","isEncrypted":true}},"created":{"userRecordName":"_creator"},"modified":{"userRecordName":"_modifier"},"zoneID":{"zoneName":"_defaultZone","ownerRecordName":"__defaultOwner__"}}"#)
        let back = try #require(try readAll(line).first?.record)
        expectSame(back, record)
        #expect(back.changedKeys() == ["b", "p", "s"])
        #expect(back.encryptedValues["b"] as? Data == Data([1]))
    }

    @Test("fields named parent and share (a CloudKit schema may declare them) travel beside the record's own parent in JSON and CSV")
    func fieldsNamedParentAndShare() throws {
        let fields: [String: FieldValue] = ["parent": .reference(Samples.reference("folder-9")), "share": .string("public"), "n": .int64(1)]
        let withParent = storedRecord("Node", "child", fields, parent: "mother")
        let withoutParent = storedRecord("Node", "orphan", ["parent": .reference(Samples.reference("folder-8")), "share": .string("no"), "n": .int64(2)])
        let line = RecordJSONWriter.json(for: withParent)
        #expect(line.contains(#""parent":{"recordName":"mother"}"#) && line.contains(#""parent":{"value":{"recordName":"folder-9","action":"NONE"},"type":"REFERENCE"}"#), "\(line)")
        expectSame(try #require(try readAll(line).first?.record), withParent, "JSON")
        // CloudKit's own JSON: the field in `fields`, the record's parent and share beside them.
        let cloudKit = #"{"recordName":"c2","recordType":"Node","parent":{"recordName":"mother"},"share":{"recordName":"s1"},"fields":{"parent":{"value":"up","type":"STRING"},"share":{"value":3,"type":"INT64"}}}"#
        let read = try #require(try readAll(cloudKit).first?.record)
        #expect(read.fieldValue(forKey: "parent") == .string("up") && read.fieldValue(forKey: "share") == .int64(3))
        #expect(read.parent?.recordID.recordName == "mother")

        let data = try written([withParent, withoutParent], format: .csv, csvFields: ["n", "parent", "share"])
        let header = String(decoding: data.prefix(while: { $0 != 0x0A }), as: UTF8.self)
        #expect(header.hasSuffix("lastModifiedUserRecordID,___parent,n:INT64,parent:REFERENCE,share:STRING"), "\(header)")
        let items = try readAll(data, { var o = RecordReadOptions(); o.format = .csv; return o }())
        #expect(items.count == 2)
        expectSame(items.first?.record, withParent, "CSV")
        expectSame(items.last?.record, withoutParent, "CSV")

        // A type without such a field keeps the column earlier versions wrote and read.
        let plain = try written([storedRecord("Node", "p", ["n": .int64(1)], parent: "mother")], format: .csv, csvFields: ["n"])
        #expect(String(decoding: plain.prefix(while: { $0 != 0x0A }), as: UTF8.self).hasSuffix("lastModifiedUserRecordID,parent,n:INT64"))
        let csv = { (text: String) throws -> Record in try #require(try readAll(text, format: .csv).first?.record) }
        #expect(try csv("recordName,recordType,parent\nr,Node,mother\n").parent?.recordID.recordName == "mother", "an untyped parent column without ___parent is the parent")
        let typed = try csv("recordName,recordType,parent:STRING\nr,Node,mother\n")
        #expect(typed.parent == nil && typed.fieldValue(forKey: "parent") == .string("mother"), "a typed parent column is the field")
        let both = try csv("recordName,recordType,___parent,parent\nr,Node,mother,\"up\"\n")
        #expect(both.parent?.recordID.recordName == "mother" && both.fieldValue(forKey: "parent") == .string("up"), "beside ___parent, parent is the field")
    }

    @Test("a parent set after reading replaces the parent's JSON kept from the input: the export writes the new parent, or none after nil")
    func parentSetAfterReading() throws {
        let line = #"{"recordName":"child","recordType":"T","parent":{"recordName":"mother","action":"NONE"},"fields":{}}"#
        let read = { () throws -> Record in try #require(try readAll(line).first?.record) }
        let kept = try read()
        #expect(RecordJSONWriter.json(for: kept).contains(#""parent":{"recordName":"mother","action":"NONE"}"#), "kept as it came")

        let moved = try read()
        moved.parent = Record.Reference(recordID: Record.ID(recordName: "father"), action: .none)
        let movedJSON = RecordJSONWriter.json(for: moved)
        #expect(movedJSON.contains(#""parent":{"recordName":"father"}"#) && !movedJSON.contains("mother"), "\(movedJSON)")
        #expect(try readAll(movedJSON).first?.record?.parent?.recordID.recordName == "father")

        let orphaned = try read()
        orphaned.parent = nil
        let orphanedJSON = RecordJSONWriter.json(for: orphaned)
        #expect(!orphanedJSON.contains("parent") && !orphanedJSON.contains("mother"), "\(orphanedJSON)")
        #expect(try readAll(orphanedJSON).first?.record?.parent == nil)

        // CloudKit's setParent(_:) forms.
        let viaID = try read()
        viaID.setParent(Record.ID(recordName: "aunt"))
        #expect(RecordJSONWriter.json(for: viaID).contains(#""parent":{"recordName":"aunt"}"#))
        let viaRecord = try read()
        viaRecord.setParent(nil as Record?)
        #expect(!RecordJSONWriter.json(for: viaRecord).contains("parent"))
    }

    @Test("timestamps are CloudKit's milliseconds, integers on whole milliseconds")
    func timestampText() throws {
        let record = storedRecord("T", "t", ["when": .date(Date(timeIntervalSince1970: 1_775_666_233.042))], tag: nil, created: nil, modified: nil)
        let line = RecordJSONWriter.json(for: record)
        #expect(line.contains("\"when\":{\"value\":1775666233042,\"type\":\"TIMESTAMP\"}"))
        let precise = storedRecord("T", "t", ["when": .date(Date(timeIntervalSinceReferenceDate: 0.000501))], tag: nil, created: nil, modified: nil)
        #expect(RecordJSONWriter.json(for: precise).contains("\"value\":978307200000.501,"))
    }

    @Test("a TIMESTAMP beyond 64 bits that a date writes back digit for digit is kept; the reader refuses the others (RejectionTests)")
    func timestampBeyondSixtyFourBits() throws {
        let line = #"{"recordName":"t","recordType":"T","fields":{"when":{"value":100000000000000000000,"type":"TIMESTAMP"}}}"#
        let record = try #require(try readAll(line).first?.record)
        #expect(RecordJSONWriter.json(for: record).contains(#""when":{"value":100000000000000000000,"type":"TIMESTAMP"}"#))
    }

    @Test("many records stream through a file with flat memory")
    func manyRecords() throws {
        let records = (0..<20_000).map { i in
            storedRecord("Item", "item-\(i)", ["title": .string("Item number \(i)"), "count": .int64(Int64(i)),
                                               "price": .double(Double(i) / 4), "when": .date(Date(timeIntervalSince1970: Double(i)))])
        }
        for format in RecordFormat.allCases {
            let data = try written(records, format: format)
            var options = RecordReadOptions()
            options.format = format
            let items = try readFromFile(data, chunkSize: 4096, options)
            #expect(items.count == records.count)
            #expect(items.allSatisfy { $0.record != nil })
            expectSame(items.last?.record, records.last!, "\(format)")
            #expect(items.last?.line == (format == .ndjson ? 20_000 : format == .csv ? 20_001 : 20_001))
        }
    }

    /// Fields spelled otherwise than a writer spells them: each goes back exactly as it came
    /// (an asset's dictionary in the writer's member order, which JSON does not tell apart).
    static let spelledFields: [(key: String, text: String)] = [
        ("encryptedNotBase64", #"{"value":"abc","type":"ENCRYPTED_BYTES"}"#),
        ("encryptedUnpadded", #"{"value":"YQ","type":"ENCRYPTED_BYTES"}"#),
        ("encryptedFlagged", #"{"value":"YQ==","type":"ENCRYPTED_BYTES","isEncrypted":true}"#),
        ("bytesUnpadded", #"{"value":"YQ","type":"BYTES"}"#),
        ("bytesEscaped", #"{"value":"Y\u0051==","type":"BYTES"}"#),
        ("unknownList", #"{"value":[],"type":"UNKNOWN_LIST"}"#),
        ("numberInt64", #"{"value":4274264319,"type":"NUMBER_INT64"}"#),
        ("numberDouble", #"{"value":2.5,"type":"NUMBER_DOUBLE"}"#),
        ("cktoolString", #"{"type":"stringType","value":"Treasure Island"}"#),
        ("cktoolInt64", #"{"type":"int64Type","value":304}"#),
        ("cktoolTimestamp", #"{"type":"timestampType","value":"2026-06-05T20:15:55Z"}"#),
        ("cktoolReference", #"{"type":"referenceType","value":{"recordName":"author-1"}}"#),
        ("cktoolStringList", #"{"type":"stringListType","value":["Youth","Jr High"]}"#),
        ("cktoolInt64List", #"{"type":"int64ListType","value":[1,2]}"#),
        ("cktoolTimestampList", #"{"type":"timestampListType","value":["2026-06-05T20:15:55Z"]}"#),
        ("cktoolReferenceList", #"{"type":"referenceListType","value":[{"recordName":"author-1"}]}"#),
        ("cktoolEncryptedBytes", #"{"type":"encryptedBytesType","value":"AQID"}"#),
        ("cktoolAsset", #"{"value":{"size":8,"downloadURL":"https://cvws.icloud-content.com/B/d","fileChecksum":"BA=="},"type":"assetType"}"#),
        ("cktoolAssetList", #"{"value":[{"size":9,"downloadURL":"https://cvws.icloud-content.com/B/e","fileChecksum":"BQ=="}],"type":"assetListType"}"#),
        ("untypedExponent", #"{"value":1e2}"#),
        ("untypedMinusZero", #"{"value":-0}"#),
        ("untypedText", #"{"value":"Milk"}"#),
        ("untypedList", #"{"value":[1,2.5]}"#),
        ("referenceNoAction", #"{"value":{"recordName":"x"},"type":"REFERENCE"}"#),
        ("assetSpelledAsset", #"{"value":{"size":5,"downloadURL":"https://cvws.icloud-content.com/B/a","fileChecksum":"AQ=="},"type":"ASSET"}"#),
        ("assetUntyped", #"{"value":{"size":6,"downloadURL":"https://cvws.icloud-content.com/B/b","fileChecksum":"Ag=="}}"#),
        ("assetOtherKey", #"{"value":{"size":7,"downloadURL":"https://cvws.icloud-content.com/B/c","fileChecksum":"Aw=="},"type":"ASSETID","note":1}"#),
    ]

    @Test("a field spelled otherwise than a writer spells it goes back as it came, in each JSON format", arguments: [RecordFormat.ndjson, .json, .envelope])
    func spelledFieldsComeBack(format: RecordFormat) throws {
        let fields = Self.spelledFields.map { "\"\($0.key)\":\($0.text)" }.joined(separator: ",")
        let line = #"{"recordName":"r","recordType":"T","fields":{"# + fields + "}}"
        let input = switch format {
        case .ndjson: line + "\n"
        case .json: "[" + line + "]"
        default: #"{"records":["# + line + "]}"
        }
        var options = RecordReadOptions()
        options.format = format
        let items = try readAll(Data(input.utf8), options)
        let record = try #require(items.first?.record, "\(items)")
        #expect(record.encryptedKeys == ["encryptedNotBase64", "encryptedUnpadded", "encryptedFlagged", "cktoolEncryptedBytes"])
        let output = String(decoding: try written([record], format: format), as: UTF8.self)
        for (key, text) in Self.spelledFields {
            #expect(output.contains("\"\(key)\":\(text)"), "\(format): \(key) came back otherwise: \(output)")
        }
        // Read again, the record has the same values.
        expectSame(try readAll(Data(output.utf8), options).first?.record, record, "\(format)")
    }
}
