import Foundation
import Stratus
import StratusTestSupport
import Testing

/// CloudKit never changes a field's type: a schema that would retype a field whose record type
/// has records is refused, and nothing changes.
@Suite("Schemas do not retype fields that hold data", .timeLimit(.minutes(10)))
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
            #expect(result.stderr.contains("T has 1 record"), "\(result)")
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
}
