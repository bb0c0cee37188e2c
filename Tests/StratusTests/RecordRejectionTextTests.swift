import Foundation
import Stratus
import StratusTransfer
import Testing

@Suite("a rejected import item as text")
struct RecordRejectionTextTests {
    final class Rejects: RecordRejectSink {
        var all: [RecordRejection] = []
        func reject(_ rejection: RecordRejection) throws { all.append(rejection) }
    }

    @Test("a record the store refuses whole is placed by its line only, as the tool prints it; a reader's rejection keeps its column")
    func storeRejectionNamesNoColumn() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            let typed = Record(recordType: "Item", recordID: Record.ID(recordName: "typed"))
            typed["n"] = 1
            try await database.save(typed)
            let input = #"{"recordName":"wrong","recordType":"Item","fields":{"n":{"value":"text","type":"STRING"}}}"# + "\n"
                + #"{"recordName":"broken","recordType":"Item","fields":{"n":{"value":1,"type":"NO_SUCH_TYPE"}}}"# + "\n"
            let rejects = Rejects()
            let summary = try await RecordImporter(database: database).run(from: try RecordReader(data: Data(input.utf8), options: RecordReadOptions()), rejects: rejects)
            #expect(summary.failed == 2, "\(summary)")
            let storeRefusal = try #require(rejects.all.first(where: { rejection in rejection.recordName == "wrong" }))
            #expect(storeRefusal.column == 0)
            #expect(storeRefusal.description.hasPrefix("line 1: record 'wrong': "), "\(storeRefusal)")
            let readerRefusal = try #require(rejects.all.first(where: { rejection in rejection.line == 2 }))
            #expect(readerRefusal.column > 0)
            #expect(readerRefusal.description.hasPrefix("line 2, column \(readerRefusal.column): "), "\(readerRefusal)")
        }
    }

    @Test("a records/modify request read by RecordImporter: operations of the importer's writeMode are applied, others rejected naming the mode; the importer tells the reader")
    func modifyOperationsFollowTheImportersMode() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            let stored = Record(recordType: "Item", recordID: Record.ID(recordName: "a"))
            stored["kept"] = "old"
            stored["n"] = 1
            try await database.save(stored)
            let request = #"{"operations":[{"operationType":"forceReplace","record":{"recordName":"a","recordType":"Item","fields":{"n":{"value":2}}}},{"operationType":"forceUpdate","record":{"recordName":"b","recordType":"Item","fields":{"n":{"value":3}}}}]}"#
            func importRequest(as mode: RecordWriteMode) async throws -> (RecordImporter.Summary, [RecordRejection]) {
                var options = RecordImporter.Options()
                options.writeMode = mode
                let rejects = Rejects()
                let summary = try await RecordImporter(database: database, options: options).run(from: try RecordReader(data: Data(request.utf8), options: RecordReadOptions()), rejects: rejects)
                return (summary, rejects.all)
            }
            let (asUpdate, refusedReplace) = try await importRequest(as: .forceUpdate)
            #expect(asUpdate.failed == 1 && refusedReplace.map(\.recordName) == ["a"] && refusedReplace.first?.message.contains("--mode forceReplace") == true, "\(refusedReplace)")
            #expect(try await database.record(for: stored.recordID)["kept"] as? String == "old", "the replace was not applied as an update")
            let (asReplace, refusedUpdate) = try await importRequest(as: .forceReplace)
            #expect(asReplace.failed == 1 && refusedUpdate.map(\.recordName) == ["b"], "\(refusedUpdate)")
            let replaced = try await database.record(for: stored.recordID)
            #expect(replaced["kept"] == nil && replaced["n"] as? Int64 == 2, "forceReplace removed what the request lacks")
        }
    }
}
