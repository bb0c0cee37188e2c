import Foundation
import Stratus
import StratusTestSupport
import Testing

/// CloudKit never changes a field's type: a schema that would retype a field whose record type
/// has records is refused, and nothing changes.
@Suite("Schemas do not retype fields that hold data", .timeLimit(.minutes(30)))
struct SchemaRetypeCLITests {
    @Test("schema import and validate refuse to retype a field of a type with records; saveSchema too; an empty type may be retyped",
          arguments: TestEngine.all)
    func retypeRefused(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let records = #"{"recordName":"a","recordType":"T","fields":{"n":{"value":1,"type":"INT64"}}}"# + "\n"
            let imported = try await cli.run(["import", try cli.file("t.ndjson", records)])
            #expect(imported.exitCode == 0, "\(imported)")
            let before = try await cli.run(["schema", "export"])

            let retyping = try cli.file("retype.ckdb", "DEFINE SCHEMA\n  RECORD TYPE T (\n    n STRING\n  );\n")
            let validate = try await cli.run(["schema", "validate", retyping])
            #expect(validate.exitCode == 65, "\(validate)")
            let result = try await cli.run(["schema", "import", retyping])
            #expect(result.exitCode == 65, "\(result)")
            #expect(result.stderr.contains("field 'n' of T is INT64 and would become STRING"), "\(result)")
            #expect(result.stderr.contains("1 record of T holds it as INT64"), "\(result)")
            let after = try await cli.run(["schema", "export"])
            #expect(after.stdout == before.stdout, "the schema is unchanged")

            // Through the library, saving the type retyped fails the same way.
            var retyped = RecordTypeSchema(recordType: "T")
            retyped.addField("n", type: .double)
            let container = try cli.container()
            let error = await #expect(throws: StratusError.self) { try await container.saveSchema(retyped) }
            #expect(error?.code == .invalidArguments)
            #expect(error?.message.contains("field 'n' of T is INT64 and would become DOUBLE") == true, "\(String(describing: error))")
            #expect(try await container.schema().recordType("T")?.field("n")?.type == .int64)

            // Indexes may change, fields may be added, and a type without records may be retyped.
            let fine = try cli.file("fine.ckdb", "DEFINE SCHEMA\n  RECORD TYPE T (\n    n INT64 QUERYABLE,\n    m STRING\n  );\n  RECORD TYPE U (\n    x STRING\n  );\n")
            let accepted = try await cli.run(["schema", "import", fine])
            #expect(accepted.exitCode == 0, "\(accepted)")
            let emptyRetyped = try cli.file("empty.ckdb", "DEFINE SCHEMA\n  RECORD TYPE T (\n    n INT64 QUERYABLE,\n    m STRING\n  );\n  RECORD TYPE U (\n    x INT64\n  );\n")
            let emptyType = try await cli.run(["schema", "import", emptyRetyped])
            #expect(emptyType.exitCode == 0, "\(emptyType)")
        }
    }

    @Test("a field dropped from the schema cannot come back with another type while records hold it (two imports, saveSchema); the refusal counts the records holding the field, in every database, and a field no record holds may be retyped",
          arguments: TestEngine.all)
    func retypeThroughRemovalRefused(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let records = #"{"recordName":"a","recordType":"T","fields":{"n":{"value":1,"type":"INT64"},"m":{"value":"x","type":"STRING"}}}"# + "\n"
                + #"{"recordName":"b","recordType":"T","fields":{"m":{"value":"y","type":"STRING"}}}"# + "\n"
            #expect(try await cli.run(["import", try cli.file("t.ndjson", records)]).exitCode == 0)
            // A record in a private database holds n too.
            let mine = #"{"recordName":"c","recordType":"T","fields":{"n":{"value":3,"type":"INT64"}}}"# + "\n"
            #expect(try await cli.run(["import", try cli.file("c.ndjson", mine), "--database", "private", "--user", "bob"]).exitCode == 0)

            // Step one: a schema without n (development may drop a field).
            let without = try cli.file("without.ckdb", "DEFINE SCHEMA\n  RECORD TYPE T (\n    m STRING\n  );\n")
            let dropped = try await cli.run(["schema", "import", without])
            #expect(dropped.exitCode == 0, "\(dropped)")
            // Step two: n back as STRING is refused: two records hold it as INT64.
            let back = try cli.file("back.ckdb", "DEFINE SCHEMA\n  RECORD TYPE T (\n    m STRING,\n    n STRING\n  );\n")
            let validate = try await cli.run(["schema", "validate", back])
            #expect(validate.exitCode == 65, "\(validate)")
            let refused = try await cli.run(["schema", "import", back])
            #expect(refused.exitCode == 65, "\(refused)")
            #expect(refused.stderr.contains("field 'n' of T would be STRING, but 2 records of T hold it as INT64"), "\(refused)")
            #expect(!(try await cli.run(["schema", "export"]).stdout.contains("n STRING")), "nothing changed")
            let container = try cli.container()
            var retyped = RecordTypeSchema(recordType: "T")
            retyped.addField("m", type: .string)
            retyped.addField("n", type: .double)
            let error = await #expect(throws: StratusError.self) { try await container.saveSchema(retyped) }
            #expect(error?.message.contains("2 records of T hold it as INT64") == true, "\(String(describing: error))")
            // With its type, n comes back.
            let same = try cli.file("same.ckdb", "DEFINE SCHEMA\n  RECORD TYPE T (\n    m STRING,\n    n INT64\n  );\n")
            #expect(try await cli.run(["schema", "import", same]).exitCode == 0)

            // A field that no record holds may be retyped, though its type has records.
            let unused = try cli.file("unused.ckdb", "DEFINE SCHEMA\n  RECORD TYPE T (\n    m STRING,\n    n INT64,\n    spare STRING\n  );\n")
            #expect(try await cli.run(["schema", "import", unused]).exitCode == 0)
            let spare = try cli.file("spare.ckdb", "DEFINE SCHEMA\n  RECORD TYPE T (\n    m STRING,\n    n INT64,\n    spare TIMESTAMP\n  );\n")
            let retypedSpare = try await cli.run(["schema", "import", spare])
            #expect(retypedSpare.exitCode == 0, "no record holds spare: \(retypedSpare)")
            // m is held by both public records: the message counts those, not the type's three.
            let mRetyped = try cli.file("m.ckdb", "DEFINE SCHEMA\n  RECORD TYPE T (\n    m INT64,\n    n INT64,\n    spare TIMESTAMP\n  );\n")
            let mRefused = try await cli.run(["schema", "import", mRetyped])
            #expect(mRefused.exitCode == 65 && mRefused.stderr.contains("field 'm' of T is STRING and would become INT64, but 2 records of T hold it as STRING"), "\(mRefused)")
        }
    }
}
