import Foundation
import Stratus
import Testing

@Suite("The indexes a query needs")
struct QueryIndexesTests {
    @Test("conditions need QUERYABLE, sorts SORTABLE, word searches a SEARCHABLE field, a bare listing a queryable recordName")
    func requirements() throws {
        var schema = RecordTypeSchema(recordType: "Item")
        schema.addField("category", type: .string, indexes: [.queryable])
        schema.addField("rank", type: .int64, indexes: [.sortable])
        schema.addField("owner", type: .reference, indexes: [])
        schema.compoundIndexes = [.init(equalityFields: ["list"], sortField: "due")]

        let served = try Query(recordType: "Item", format: "category == %@ AND list == %@", "a", "l")
        served.sortDescriptors = [RecordSortDescriptor(key: "rank"), RecordSortDescriptor(key: "due")]
        #expect(served.missingIndexes(in: schema).isEmpty)

        let unserved = try Query(recordType: "Item", format: "owner == %@ AND self CONTAINS 'milk' AND creationDate > %@", Record.ID(recordName: "x"), Date())
        unserved.sortDescriptors = [RecordSortDescriptor(key: "category"), RecordSortDescriptor(key: "modificationDate", ascending: false)]
        #expect(unserved.missingIndexes(in: schema).map(\.description) == [
            "owner QUERYABLE on Item", "a SEARCHABLE string field on Item (for self CONTAINS)", "\"___createTime\" TIMESTAMP QUERYABLE on Item",
            "category SORTABLE on Item", "\"___modTime\" TIMESTAMP SORTABLE on Item",
        ])
        #expect(Query(recordType: "Item").missingIndexes(in: schema).map(\.description) == ["\"___recordID\" REFERENCE QUERYABLE on Item"])
        #expect(Query(recordType: "Item", predicate: .none).missingIndexes(in: nil).isEmpty)
        #expect(try Query(recordType: "Other", format: "n == 1").missingIndexes(in: nil).map(\.attribute) == ["QUERYABLE"])
    }
}
