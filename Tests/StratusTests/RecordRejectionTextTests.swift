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
}
