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
}
