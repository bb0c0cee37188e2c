import Foundation
import StratusTestSupport
import Testing

/// What an import means, beyond reading its input: re-runs that change nothing, dry runs that
/// say what the real run would, references that stay in their zone, parents that come later
/// in the input, and CloudKit's own records.
@Suite("stratus import semantics", .timeLimit(.minutes(10)))
struct ImportSemanticsCLITests {
    /// A CloudKit user record name that is not the tester's.
    static let cloudKitUser = "_0123456789abcdef0123456789abcdef"

    // MARK: - Re-running the same file

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
}
