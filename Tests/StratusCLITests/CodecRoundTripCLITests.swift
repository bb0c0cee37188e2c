import Foundation
import Stratus
import StratusTestSupport
import Testing

/// What CloudKit's data looks like after `stratus import` and `stratus export` on each engine:
/// the same, field for field.
@Suite("Codecs through a store: import, export, the same data", .timeLimit(.minutes(30)))
struct CodecRoundTripCLITests {
    /// Fields whose JSON a writer would spell otherwise than they came.
    static let spelledFields: [(key: String, text: String)] = [
        ("encryptedNotBase64", #"{"value":"abc","type":"ENCRYPTED_BYTES"}"#),
        ("encryptedUnpadded", #"{"value":"YQ","type":"ENCRYPTED_BYTES"}"#),
        ("encryptedFlagged", #"{"value":"YQ==","type":"ENCRYPTED_BYTES","isEncrypted":true}"#),
        ("unknownList", #"{"value":[],"type":"UNKNOWN_LIST"}"#),
        ("untypedExponent", #"{"value":1e2}"#),
        ("untypedMinusZero", #"{"value":-0}"#),
        ("referenceNoAction", #"{"value":{"recordName":"x"},"type":"REFERENCE"}"#),
        ("assetSpelledAsset", #"{"value":{"size":5,"downloadURL":"https://cvws.icloud-content.com/B/a","fileChecksum":"AQ=="},"type":"ASSET"}"#),
    ]

    @Test("a record nested as deep as an NDJSON line may be exports as an envelope or a JSON array that imports back whole (found by a data tester: the records from the deep one on were not restored)", arguments: TestEngine.all)
    func deepRecordsRoundTripInDocuments(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let deep = String(repeating: "[", count: 62) + "1" + String(repeating: "]", count: 62)
            let lines = [
                #"{"recordName":"a1","recordType":"DP","fields":{}}"#,
                #"{"recordName":"deep","recordType":"DP","fields":{},"pluginFields":{"a":\#(deep)}}"#,
                #"{"recordName":"z9","recordType":"DP","fields":{}}"#,
            ]
            Summary.expectImport(try await cli.run(["import"], stdin: lines.joined(separator: "\n") + "\n"), imported: 3)
            for format in ["envelope", "json"] {
                let file = store.path("backup-\(format).json")
                #expect(try await cli.run(["export", "--type", "DP", "--format", format, "--output", file, "--quiet"]).exitCode == 0)
                let restored = try await cli.newStore("restored-\(format)")
                let back = try await cli.run(["import", file, "--store", restored])
                #expect(back.exitCode == 0, "\(format): \(back)")
                #expect(try await cli.count("DP", extra: ["--store", restored]) == 3, "\(format)")
            }
        }
    }

    @Test("every JSON format gives each field back as it came, through either engine",
          arguments: TestEngine.all, ["ndjson", "json", "envelope"])
    func fieldsComeBackAsTheyCame(engine: TestEngine, format: String) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let fields = Self.spelledFields.map { "\"\($0.key)\":\($0.text)" }.joined(separator: ",")
            let line = #"{"recordName":"r","recordType":"Spelled","fields":{"# + fields + "}}"
            let input = switch format {
            case "ndjson": line + "\n"
            case "json": "[" + line + "]\n"
            default: #"{"records":["# + line + "]}"
            }
            // In the private database: the public one holds no encrypted values, as CloudKit's.
            let imported = try await cli.run(["import", try cli.file("in.\(format)", input), "--format", format, "--database", "private"])
            #expect(imported.exitCode == 0, "\(imported)")
            let exported = try await cli.run(["export", "--type", "Spelled", "--format", format, "--quiet", "--database", "private"])
            #expect(exported.exitCode == 0, "\(exported)")
            for (key, text) in Self.spelledFields {
                #expect(exported.stdout.contains("\"\(key)\":\(text)"), "\(format): \(key) came back otherwise: \(exported.stdout)")
            }
        }
    }

    @Test("a record of a CloudKit answer without zoneID or fields, exported to NDJSON, imports back unchanged, also in the public database where another user created it",
          arguments: TestEngine.all, ["public", "private"])
    func answerRecordsReimportUnchangedFromTheirExport(engine: TestEngine, database: String) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let creation = #"{"timestamp":1775665915539,"userRecordName":"_0123456789abcdef0123456789abcdef","deviceID":"2"}"#
            let answer = #"{"records":[{"recordName":"A1","recordType":"Album","fields":{"n":{"value":1,"type":"INT64"}},"recordChangeTag":"TAG_1","created":"# + creation
                + #","modified":"# + creation + #"},{"recordName":"A2","recordType":"Album","recordChangeTag":"TAG_2","created":"# + creation + #","modified":"# + creation + "}]}"
            let imported = try await cli.run(["import", try cli.file("answer.json", answer), "--database", database])
            #expect(imported.exitCode == 0 && imported.stderr.contains("imported 2"), "\(imported)")
            let exported = try await cli.run(["export", "--type", "Album", "--quiet", "--database", database])
            #expect(exported.exitCode == 0 && !exported.stdout.contains("zoneID"), "the answer's records go back without the zoneID they lacked: \(exported)")

            let again = try await cli.run(["import", try cli.file("export.ndjson", exported.stdout), "--database", database])
            #expect(again.exitCode == 0 && again.stderr.contains("unchanged 2"), "\(again)")
            let after = try await cli.run(["export", "--type", "Album", "--quiet", "--database", database])
            #expect(after.stdout == exported.stdout, "the records keep their version: \(after.stdout)")
        }
    }

    @Test("a NUL (\\u0000) in what a record's JSON holds beside its values (an unknown key, created, an asset's metadata) is kept and given back on either engine; the batch's other records are written",
          arguments: TestEngine.all)
    func nulBesideValues(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let nul = #"{"recordName":"n","recordType":"T","created":{"timestamp":1700000000000,"userRecordName":"_0123456789abcdef0123456789abcdef","deviceID":"d\u0000x"},"oddKey\u0000":"v\u0000\\u0000","fields":{"a":{"value":{"size":1,"downloadURL":"https://cvws.icloud-content.com/B/a","fileChecksum":"AQ==","wrappingKey":"k\u0000"},"type":"ASSETID"}}}"#
            let plain = #"{"recordName":"p","recordType":"T","fields":{"s":{"value":"plain","type":"STRING"}}}"#
            let imported = try await cli.run(["import", "--quiet"], stdin: nul + "\n" + plain + "\n")
            #expect(imported.exitCode == 0, "\(imported)")
            let exported = try await cli.run(["export", "--type", "T", "--quiet"])
            #expect(exported.exitCode == 0 && exported.stdoutLines.count == 2, "\(exported)")
            for part in [#""deviceID":"d\u0000x""#, #""oddKey\u0000":"v\u0000\\u0000""#, #""wrappingKey":"k\u0000""#] {
                #expect(exported.stdout.contains(part), "\(part) came back otherwise: \(exported.stdout)")
            }
        }
    }

    @Test("values without a type take the type an earlier record gave their field, so the export of such input imports whole into an empty store",
          arguments: TestEngine.all)
    func laterUntypedValuesFollowTheFirstTypedOne(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let lines = [
                #"{"recordName":"a","recordType":"Mixed","fields":{"d":{"value":1.5,"type":"DOUBLE"},"t":{"value":1000,"type":"TIMESTAMP"},"b":{"value":"AA==","type":"BYTES"}}}"#,
                #"{"recordName":"b","recordType":"Mixed","fields":{"d":{"value":2}}}"#,
                #"{"recordName":"c","recordType":"Mixed","fields":{"t":{"value":2000}}}"#,
                #"{"recordName":"e","recordType":"Mixed","fields":{"b":{"value":"AQ=="}}}"#,
            ]
            let imported = try await cli.run(["import", try cli.file("in.ndjson", lines.joined(separator: "\n") + "\n")])
            Summary.expectImport(imported, imported: 4)
            #expect(imported.exitCode == 0, "\(imported)")
            let exported = try await cli.run(["export", "--type", "Mixed", "--quiet"])
            #expect(exported.exitCode == 0, "\(exported)")

            let other = try await cli.newStore("other.sqlite")
            let again = try await cli.run(["import", try cli.file("exported.ndjson", exported.stdout), "--store", other])
            Summary.expectImport(again, imported: 4)
            #expect(again.exitCode == 0, "\(again)")
            let schema = try await cli.run(["schema", "export", "--store", other])
            let declarations = schema.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
            for declaration in ["d DOUBLE", "t TIMESTAMP", "b BYTES"] {
                #expect(declarations.contains(declaration), "\(declaration): \(schema)")
            }
            let reexported = try await cli.run(["export", "--type", "Mixed", "--quiet", "--store", other])
            #expect(try Self.fieldsByRecord(reexported.stdout) == Self.fieldsByRecord(exported.stdout))
        }
    }

    /// Each exported record's `fields` object, by record name.
    static func fieldsByRecord(_ ndjson: String) throws -> [String: NSDictionary] {
        var fields: [String: NSDictionary] = [:]
        for line in ndjson.split(separator: "\n") {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            fields[try #require(object["recordName"] as? String)] = try #require(object["fields"] as? NSDictionary)
        }
        return fields
    }

    @Test("an empty list of unknown type neither fixes a field's type nor conflicts with a list type, in either order",
          arguments: TestEngine.all)
    func untypedEmptyListsCarryNoType(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let unknown = #"{"recordName":"unknown","recordType":"Tagged","fields":{"tags":{"value":[],"type":"UNKNOWN_LIST"}}}"#
            let untyped = #"{"recordName":"untyped","recordType":"Tagged","fields":{"tags":{"value":[]}}}"#
            let numbers = #"{"recordName":"numbers","recordType":"Tagged","fields":{"tags":{"value":[1,2],"type":"INT64_LIST"}}}"#
            for (name, lines) in [("empty-first", [unknown, untyped, numbers]), ("empty-last", [numbers, unknown, untyped])] {
                let other = try await cli.newStore("\(name).sqlite")
                let result = try await cli.run(["import", try cli.file("\(name).ndjson", lines.joined(separator: "\n") + "\n"), "--store", other])
                #expect(result.exitCode == 0, "\(name): \(result)")
                Summary.expectImport(result, imported: 3)
                let schema = try await cli.run(["schema", "export", "--store", other])
                #expect(schema.stdout.contains("tags") && schema.stdout.contains("LIST<INT64>"), "\(name): \(schema)")
                #expect(!schema.stdout.contains("LIST<STRING>"), "\(name): \(schema)")
                let exported = try await cli.run(["export", "--type", "Tagged", "--store", other, "--quiet"])
                #expect(exported.stdout.contains(#""tags":{"value":[],"type":"UNKNOWN_LIST"}"#), "\(name): \(exported)")
                #expect(exported.stdout.contains(#""tags":{"value":[]}"#), "\(name): \(exported)")
            }
            // Alone, it creates no field at all; a typed empty list does.
            let alone = try await cli.newStore("alone.sqlite")
            let result = try await cli.run(["import", try cli.file("alone.ndjson", unknown + "\n"), "--store", alone])
            #expect(result.exitCode == 0, "\(result)")
            let schema = try await cli.run(["schema", "export", "--store", alone])
            #expect(schema.stdout.contains("RECORD TYPE Tagged") && !schema.stdout.contains("tags"), "\(schema)")
        }
    }

    @Test("a parent set in Swift on an imported record replaces the parent kept from its JSON: export writes the new parent, or none after nil",
          arguments: TestEngine.all)
    func parentSetAfterImport(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            // The parents' JSON differs from what a writer would write (an action), so it is kept.
            let lines = [
                #"{"recordName":"mother","recordType":"Family","fields":{}}"#,
                #"{"recordName":"father","recordType":"Family","fields":{}}"#,
                #"{"recordName":"plain","recordType":"Family","parent":{"recordName":"mother","action":"NONE"},"fields":{}}"#,
                #"{"recordName":"plugged","recordType":"Family","parent":{"recordName":"mother","action":"NONE"},"pluginFields":{},"fields":{}}"#,
            ]
            let imported = try await cli.run(["import", try cli.file("family.ndjson", lines.joined(separator: "\n") + "\n")])
            #expect(imported.exitCode == 0, "\(imported)")
            let before = try await cli.exported("Family")
            #expect((before["plain"]?["parent"] as? [String: Any])?["action"] as? String == "NONE", "kept as it came: \(before)")

            let database = try cli.container().publicCloudDatabase
            let father = Record.ID(recordName: "father")
            for name in ["plain", "plugged"] {
                let child = try await database.record(for: Record.ID(recordName: name))
                child.parent = Record.Reference(recordID: father, action: .none)
                _ = try await database.save(child)
                let moved = try await cli.exported("Family")
                #expect((moved[name]?["parent"] as? [String: Any])?["recordName"] as? String == "father", "\(name): \(moved[name] ?? [:])")
                #expect(try await database.record(for: child.recordID).parent?.recordID == father)

                let again = try await database.record(for: Record.ID(recordName: name))
                again.setParent(nil as Record.ID?)
                _ = try await database.save(again)
                let orphaned = try await cli.exported("Family")
                #expect(orphaned[name]?["parent"] == nil, "\(name): \(orphaned[name] ?? [:])")
                #expect(try await database.record(for: child.recordID).parent == nil)
            }
            #expect((try await cli.exported("Family"))["plugged"]?["pluginFields"] != nil, "other kept members stay")
        }
    }

    @Test("a NUMBER PREFERRED AS INT64 field takes an untyped 2.5 as DOUBLE and an untyped 2 as INT64", arguments: TestEngine.all)
    func untypedNumbersInNumberFields(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let schema = "DEFINE SCHEMA\n    RECORD TYPE Reading (\n        value NUMBER PREFERRED AS INT64,\n        GRANT WRITE TO \"_creator\", GRANT CREATE TO \"_icloud\", GRANT READ TO \"_world\"\n    );\n"
            let imported = try await cli.run(["schema", "import", try cli.file("reading.ckdb", schema)])
            #expect(imported.exitCode == 0, "\(imported)")
            let lines = [
                #"{"recordName":"fraction","recordType":"Reading","fields":{"value":{"value":2.5}}}"#,
                #"{"recordName":"whole","recordType":"Reading","fields":{"value":{"value":2}}}"#,
                #"{"recordName":"typed","recordType":"Reading","fields":{"value":{"value":3.5,"type":"DOUBLE"}}}"#,
            ]
            let result = try await cli.run(["import", try cli.file("readings.ndjson", lines.joined(separator: "\n") + "\n")])
            #expect(result.exitCode == 0, "\(result)")
            Summary.expectImport(result, imported: 3)
            let query = try await cli.run(["query", "--type", "Reading", "--where", "value == 2.5"])
            #expect(query.stdout.contains(#""recordName":"fraction""#), "\(query)")
            let whole = try await cli.run(["query", "--type", "Reading", "--where", "value == 2"])
            #expect(whole.stdout.contains(#""recordName":"whole""#), "\(whole)")
        }
    }

    @Test("a bare NUMBER field (no PREFERRED AS) takes INT64 and DOUBLE values, types an untyped integer INT64 and a fraction DOUBLE, refuses a STRING naming NUMBER, and is exported bare",
          arguments: TestEngine.all)
    func bareNumberFields(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let schema = "DEFINE SCHEMA\n    RECORD TYPE Reading (\n        value NUMBER QUERYABLE SORTABLE,\n        series LIST<NUMBER>,\n        GRANT WRITE TO \"_creator\", GRANT CREATE TO \"_icloud\", GRANT READ TO \"_world\"\n    );\n"
            let imported = try await cli.run(["schema", "import", try cli.file("reading.ckdb", schema)])
            #expect(imported.exitCode == 0, "\(imported)")
            let lines = [
                #"{"recordName":"fraction","recordType":"Reading","fields":{"value":{"value":2.5},"series":{"value":[1,2.5]}}}"#,
                #"{"recordName":"whole","recordType":"Reading","fields":{"value":{"value":2},"series":{"value":[1,2]}}}"#,
                #"{"recordName":"typed","recordType":"Reading","fields":{"value":{"value":7,"type":"NUMBER_INT64"}}}"#,
            ]
            let result = try await cli.run(["import", try cli.file("readings.ndjson", lines.joined(separator: "\n") + "\n")])
            #expect(result.exitCode == 0, "\(result)")
            Summary.expectImport(result, imported: 3)
            let database = try cli.container().publicCloudDatabase
            let fraction = try await database.record(for: Record.ID(recordName: "fraction"))
            #expect(fraction.fieldValue(forKey: "value") == .double(2.5))
            #expect(fraction.fieldValue(forKey: "series") == .doubleList([1, 2.5]))
            let whole = try await database.record(for: Record.ID(recordName: "whole"))
            #expect(whole.fieldValue(forKey: "value") == .int64(2))
            #expect(whole.fieldValue(forKey: "series") == .int64List([1, 2]))
            // Saved from Swift, as an app would: a Double and an Int64 both fit.
            let saved = Record(recordType: "Reading", recordID: Record.ID(recordName: "swift"))
            saved["value"] = 0.5
            let stored = try await database.save(saved)
            stored["value"] = Int64(3)
            _ = try await database.save(stored)
            #expect(try await database.record(for: saved.recordID).fieldValue(forKey: "value") == .int64(3))
            let sorted = try await cli.run(["query", "--type", "Reading", "--where", "value > 1", "--sort", "value"])
            #expect(sorted.exitCode == 0, "\(sorted)")
            let names = ["whole", "fraction", "swift", "typed"].compactMap { name in sorted.stdout.range(of: "\"recordName\":\"\(name)\"")?.lowerBound }
            #expect(names.count == 4 && names == names.sorted(), "sorted by value, 2 < 2.5 < 3 < 7: \(sorted.stdout)")

            let text = #"{"recordName":"words","recordType":"Reading","fields":{"value":{"value":"two","type":"STRING"}}}"#
            let refused = try await cli.run(["import", try cli.file("words.ndjson", text + "\n")])
            #expect(refused.exitCode != 0 && refused.stderr.contains("defined to be: NUMBER"), "\(refused)")

            let written = try await cli.run(["schema", "export"])
            #expect(written.stdout.contains("value") && written.stdout.contains("NUMBER QUERYABLE SORTABLE"), "\(written.stdout)")
            #expect(written.stdout.contains("LIST<NUMBER>"), "\(written.stdout)")
            #expect(!written.stdout.contains("PREFERRED"), "\(written.stdout)")
            let same = try await cli.run(["schema", "diff", try cli.file("reading.ckdb", schema)])
            #expect(same.exitCode == 0, "\(same)")

            // CSV: the NUMBER columns are DOUBLE, which take the whole numbers as written.
            let csv = try await cli.run(["export", "--type", "Reading", "--format", "csv", "--fields", "value,series", "--quiet"])
            #expect(csv.exitCode == 0 && csv.stdout.contains("value:DOUBLE") && csv.stdout.contains("series:DOUBLE_LIST"), "\(csv)")
            #expect(csv.stdout.contains(",2,") || csv.stdout.contains(",2\n") || csv.stdout.contains("whole,2"), "\(csv.stdout)")
            let other = try await cli.newStore("csv-copy.sqlite")
            #expect(try await cli.run(["schema", "import", try cli.file("reading-copy.ckdb", schema), "--store", other]).exitCode == 0)
            let moved = try await cli.run(["import", try cli.file("reading.csv", csv.stdout), "--store", other])
            #expect(moved.exitCode == 0, "\(moved)")
            let value = try await cli.run(["count", "--type", "Reading", "--where", "value == 2", "--store", other])
            #expect(value.exitCode == 0 && value.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "1", "\(value)")

            // A whole number no double holds exactly would be read back as another number, or
            // refused: the export stops there instead of writing a file that does not come back.
            let latest = try await database.record(for: saved.recordID)
            latest["value"] = Int64(9_007_199_254_740_993)
            _ = try await database.save(latest)
            let inexact = try await cli.run(["export", "--type", "Reading", "--format", "csv", "--fields", "value", "--quiet"])
            #expect(inexact.exitCode == 65 && inexact.stderr.contains("record 'swift': field 'value' holds the whole number 9007199254740993, which its DOUBLE column cannot hold exactly"), "\(inexact)")
        }
    }

    @Test("CSV export keeps partial locations and a reference's zoneID and action; encrypted fields get encrypted columns; a value that does not fit its column exits 65",
          arguments: TestEngine.all)
    func csvExport(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let fields: [(key: String, text: String)] = [
                ("loc", #"{"value":{"latitude":1.5,"longitude":2.5},"type":"LOCATION"}"#),
                ("locs", #"{"value":[{"latitude":1,"longitude":2}],"type":"LOCATION_LIST"}"#),
                ("ref", #"{"value":{"recordName":"x","action":"NONE","zoneID":{"zoneName":"_defaultZone","ownerRecordName":"__defaultOwner__"}},"type":"REFERENCE"}"#),
                ("validated", #"{"value":{"recordName":"y","action":"VALIDATE"},"type":"REFERENCE"}"#),
            ]
            let line = #"{"recordName":"a","recordType":"Place","fields":{"# + fields.map { "\"\($0.key)\":\($0.text)" }.joined(separator: ",") + "}}\n"
            let imported = try await cli.run(["import", try cli.file("place.ndjson", line)])
            #expect(imported.exitCode == 0, "\(imported)")
            let csv = try await cli.run(["export", "--type", "Place", "--format", "csv", "--quiet"])
            #expect(csv.exitCode == 0, "\(csv)")
            #expect(!csv.stdout.contains("978307200000"), "no default timestamp is made up: \(csv.stdout)")
            // Through CSV into another store, and out as JSON: the same fields.
            let other = try await cli.newStore("other.sqlite")
            let moved = try await cli.run(["import", try cli.file("place.csv", csv.stdout), "--store", other])
            #expect(moved.exitCode == 0, "\(moved)")
            let json = try await cli.run(["export", "--type", "Place", "--store", other, "--quiet"])
            for (key, text) in fields {
                #expect(json.stdout.contains("\"\(key)\":\(text)"), "\(key) came back otherwise: \(json.stdout)")
            }

            // An encrypted field the first record lacks still gets an encrypted column.
            let secrets = [
                #"{"recordName":"s0","recordType":"Secret","fields":{"label":{"value":"x","type":"STRING"}}}"#,
                #"{"recordName":"s1","recordType":"Secret","fields":{"data":{"value":"YQ==","type":"ENCRYPTED_BYTES"}}}"#,
            ]
            // In the private database: the public one holds no encrypted values, as CloudKit's.
            let stored = try await cli.run(["import", try cli.file("secrets.ndjson", secrets.joined(separator: "\n") + "\n"), "--database", "private"])
            #expect(stored.exitCode == 0, "\(stored)")
            let columns = try await cli.run(["export", "--type", "Secret", "--format", "csv", "--quiet", "--database", "private"])
            #expect(columns.exitCode == 0, "\(columns)")
            #expect(columns.stdoutLines.first?.hasSuffix("data:ENCRYPTED_BYTES,label:STRING") == true, "\(columns)")
            let given = try await cli.run(["export", "--type", "Secret", "--format", "csv", "--fields", "label,data:ENCRYPTED_BYTES", "--quiet", "--database", "private"])
            #expect(given.exitCode == 0, "\(given)")
            // The schema types a column the first record cannot: encrypted, as declared.
            let declared = try await cli.run(["export", "--type", "Secret", "--format", "csv", "--fields", "label,data", "--quiet", "--database", "private"])
            #expect(declared.exitCode == 0 && declared.stdoutLines.first?.hasSuffix("label:STRING,data:ENCRYPTED_BYTES") == true, "\(declared)")
            // A column given plain holds plain values: the encrypted one is bad data.
            let refused = try await cli.run(["export", "--type", "Secret", "--format", "csv", "--fields", "label,data:BYTES", "--quiet", "--database", "private"])
            #expect(refused.exitCode == 65, "\(refused)")
            #expect(refused.stderr.contains("record 's1'") && refused.stderr.contains("data:ENCRYPTED_BYTES"), "\(refused)")
        }
    }
}
