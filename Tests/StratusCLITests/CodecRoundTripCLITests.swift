import Foundation
import StratusTestSupport
import Testing

/// What CloudKit's data looks like after `stratus import` and `stratus export` on each engine:
/// the same, field for field.
@Suite("Codecs through a store: import, export, the same data", .timeLimit(.minutes(10)))
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
            let imported = try await cli.run(["import", try cli.file("in.\(format)", input), "--format", format])
            #expect(imported.exitCode == 0, "\(imported)")
            let exported = try await cli.run(["export", "--type", "Spelled", "--format", format, "--quiet"])
            #expect(exported.exitCode == 0, "\(exported)")
            for (key, text) in Self.spelledFields {
                #expect(exported.stdout.contains("\"\(key)\":\(text)"), "\(format): \(key) came back otherwise: \(exported.stdout)")
            }
        }
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

    @Test("a NUMBER PREFERRED AS INT64 field takes an untyped 2.5 as DOUBLE and an untyped 2 as INT64", arguments: TestEngine.all)
    func untypedNumbersInNumberFields(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let schema = "DEFINE SCHEMA\n    RECORD TYPE Reading (\n        value NUMBER PREFERRED AS INT64\n    );\n"
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
}
