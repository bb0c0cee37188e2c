import Foundation
import Stratus
import StratusTestSupport
import Testing

/// What a refused write leaves behind (nothing: no field in the schema), what an update's dry
/// run refuses (what the real run refuses), and updates in custom zones.
@Suite("Refused writes and update dry runs", .timeLimit(.minutes(30)))
struct RefusedWritesCLITests {
    @Test("an import whose record is refused (update of a missing record, create of a stored one, a stale change tag) creates no field; a later record may create it with another type",
          arguments: TestEngine.all)
    func refusedImportGrowsNothing(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let stored = #"{"recordName":"kept","recordType":"T","fields":{"a":{"value":1,"type":"INT64"}}}"#
            #expect(try await cli.run(["import", "-"], stdin: stored + "\n").exitCode == 0)
            let tag = try #require(try await cli.exported("T")["kept"]?["recordChangeTag"] as? String)

            let missing = #"{"recordName":"nope","recordType":"T","fields":{"zz":{"value":1,"type":"INT64"}}}"#
            let update = try await cli.run(["import", "-", "--mode", "update"], stdin: missing + "\n")
            #expect(update.exitCode == 1 && update.stderr.contains("unknownItem"), "\(update)")
            let again = #"{"recordName":"kept","recordType":"T","fields":{"zc":{"value":1,"type":"INT64"}}}"#
            let create = try await cli.run(["import", "-", "--mode", "create"], stdin: again + "\n")
            #expect(create.exitCode == 1, "\(create)")
            let stale = #"{"recordName":"kept","recordType":"T","recordChangeTag":"stale\#(tag)","fields":{"zt":{"value":1,"type":"INT64"}}}"#
            let conflict = try await cli.run(["import", "-", "--mode", "update"], stdin: stale + "\n")
            #expect(conflict.exitCode == 1 && conflict.stderr.contains("serverRecordChanged"), "\(conflict)")

            let schema = try await cli.run(["schema", "export"])
            #expect(schema.exitCode == 0, "\(schema)")
            for field in ["zz", "zc", "zt"] { #expect(!schema.stdout.contains(field), "\(field) was not created: \(schema.stdout)") }

            // The field is free: a record that is written creates it, with its own type.
            let text = #"{"recordName":"later","recordType":"T","fields":{"zz":{"value":"text","type":"STRING"}}}"#
            let written = try await cli.run(["import", "-"], stdin: text + "\n")
            #expect(written.exitCode == 0, "\(written)")
            #expect(try await cli.run(["schema", "export"]).stdout.contains(#/\bzz\s+STRING\b/#))
        }
    }

    @Test("update --dry-run refuses what the real run refuses: a value of another type than its field's, a record the roles do not let the user write; exit and counts as the real run",
          arguments: TestEngine.all)
    func dryRunChecksTypesAndRoles(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let records = #"{"recordName":"t1","recordType":"T","fields":{"n":{"value":1,"type":"INT64"}}}"# + "\n"
                + #"{"recordName":"t2","recordType":"T","fields":{"n":{"value":2,"type":"INT64"}}}"# + "\n"
            #expect(try await cli.run(["import", try cli.file("t.ndjson", records)]).exitCode == 0)
            let before = try await cli.run(["export", "--type", "T", "--quiet"])

            let dry = try await cli.run(["update", "--type", "T", "--all", "--set", "n:STRING=hello", "--dry-run", "--progress", "json"])
            let real = try await cli.run(["update", "--type", "T", "--all", "--set", "n:STRING=hello", "--progress", "json"])
            #expect(real.exitCode == 1, "\(real)")
            #expect(dry.exitCode == real.exitCode, "the dry run exits as the real run: \(dry)")
            // Progress lines are JSON; the failures before them are plain lines.
            let drySummary = try #require(try JSONLine.objects(dry.stderrLines.filter { $0.hasPrefix("{") }.joined(separator: "\n")).last, "\(dry)")
            #expect(drySummary["wouldUpdate"] as? Int == 0 && drySummary["failed"] as? Int == 2, "\(dry)")
            #expect(dry.stderr.contains("invalid attempt to set value type STRING for field 'n'"), "the dry run says why: \(dry)")
            #expect(try await cli.run(["export", "--type", "T", "--quiet"]).stdout == before.stdout, "nothing was written")

            let human = try await cli.run(["update", "--type", "T", "--all", "--set", "n:STRING=hello", "--dry-run"])
            #expect(human.exitCode == 1 && human.stderr.contains("dry run: would update 0, unchanged 0, failed 2, nothing written"), "\(human)")

            // Another user's public records: the roles let only their creator write them.
            let post = #"{"recordName":"p1","recordType":"Post","fields":{"title":{"value":"mine","type":"STRING"}}}"# + "\n"
            #expect(try await cli.run(["import", try cli.file("post.ndjson", post)]).exitCode == 0)
            let foreignDry = try await cli.run(["update", "--type", "Post", "--all", "--set", "title=theirs", "--user", "mallory", "--dry-run"])
            let foreignReal = try await cli.run(["update", "--type", "Post", "--all", "--set", "title=theirs", "--user", "mallory"])
            #expect(foreignReal.exitCode == 1 && foreignReal.stderr.contains("permissionFailure"), "\(foreignReal)")
            #expect(foreignDry.exitCode == 1 && foreignDry.stderr.contains("permissionFailure"), "\(foreignDry)")
            #expect(foreignDry.stderr.contains("would update 0, unchanged 0, failed 1"), "\(foreignDry)")
            #expect(try await cli.count("Post", where: "title == 'mine'") == 1)

            // What the real run writes, the dry run counts.
            let fine = try await cli.run(["update", "--type", "T", "--where", "n == 1", "--set", "n=5", "--dry-run"])
            #expect(fine.exitCode == 0 && fine.stderr.contains("dry run: would update 1, unchanged 0, failed 0, nothing written"), "\(fine)")
            #expect(try await cli.count("T", where: "n == 5") == 0)
        }
    }

    @Test("update --zone Z --set f:REFERENCE=name sets a reference to a record of zone Z", arguments: TestEngine.all)
    func referenceInCustomZone(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            #expect(try await cli.run(["zones", "create", "A"]).exitCode == 0)
            let records = #"{"recordName":"target","recordType":"T","fields":{"n":{"value":1,"type":"INT64"}}}"# + "\n"
                + #"{"recordName":"source","recordType":"T","fields":{"n":{"value":2,"type":"INT64"}}}"# + "\n"
            #expect(try await cli.run(["import", try cli.file("a.ndjson", records), "--zone", "A"]).exitCode == 0)

            let updated = try await cli.run(["update", "--zone", "A", "--type", "T", "--where", "n == 2", "--set", "r:REFERENCE=target"])
            #expect(updated.exitCode == 0 && updated.stderr.contains("updated 1"), "\(updated)")
            let dry = try await cli.run(["update", "--zone", "A", "--type", "T", "--where", "n == 1", "--set", "r:REFERENCE=source", "--dry-run"])
            #expect(dry.exitCode == 0 && dry.stderr.contains("would update 1"), "\(dry)")
            let source = try #require(try await cli.exported("T", extra: ["--zone", "A"])["source"])
            let reference = try #require(JSONLine.field(source, "r")?["value"] as? [String: Any], "\(source)")
            #expect(reference["recordName"] as? String == "target", "\(source)")
        }
    }
}
