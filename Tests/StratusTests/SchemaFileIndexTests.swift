import Foundation
@_spi(StratusEngine) import Stratus
@_spi(StratusEngine) import StratusSQLite
import StratusTestSupport
import StratusTransfer
import Testing

/// A schema read from a `.ckdb` file is saved into a store, comes back equal, and its indexes
/// on CloudKit's system fields become the store's indexes on the system columns.
@Suite("Schema files in a store")
struct SchemaFileIndexTests {
    static let text = """
        DEFINE SCHEMA
            CREATE ROLE moderator;
            RECORD TYPE Flag (
                "___createTime" TIMESTAMP SORTABLE,
                "___createdBy"  REFERENCE QUERYABLE,
                "___modifiedBy" REFERENCE QUERYABLE,
                "___recordID"   REFERENCE QUERYABLE,
                reason          STRING QUERYABLE SEARCHABLE,
                secret          ENCRYPTED STRING,
                GRANT READ TO "_creator",
                GRANT CREATE TO "_icloud",
                GRANT READ, WRITE TO moderator
            );
        """

    @Test("record types read from a file are saved and fetched back equal, grants and encryption included")
    func savedAndFetched() async throws {
        try await SQLiteFixture.with { fixture in
            let schema = try SchemaReader().read(Self.text)
            let container = fixture.container()
            for type in schema.recordTypes { try await container.saveSchema(type) }
            let stored = try await container.schemas()
            #expect(Set(stored) == Set(schema.recordTypes))
            #expect(stored.first { $0.recordType == "Flag" }?.grants == [.creator: .read, .authenticated: .create, "moderator": [.read, .write]])
            #expect(try SchemaReader().read(SchemaWriter().text(for: ContainerSchema(roles: schema.roles, recordTypes: stored))) == schema)
        }
    }

    @Test("\"___createdBy\" and \"___modifiedBy\" QUERYABLE index the creator and modifier; queries on them use the index")
    func systemFieldIndexes() async throws {
        try await SQLiteFixture.with { fixture in
            let schema = try SchemaReader().read(Self.text)
            let flag = try #require(schema.recordType("Flag"))
            try await fixture.container(user: "alice").saveSchema(flag)
            var aliceID: Record.ID?
            for (user, count) in [("alice", 3), ("bob", 2)] {
                for i in 0..<count {
                    let record = Record(recordType: "Flag", recordID: Record.ID(recordName: "\(user)-\(i)"))
                    record["reason"] = "spam \(i)"
                    let saved = try await fixture.container(user: user).publicCloudDatabase.save(record)
                    if user == "alice" { aliceID = saved.creatorUserRecordID }
                }
            }
            let alice = try #require(aliceID)
            let database = fixture.container(user: "alice").publicCloudDatabase
            for key in ["creatorUserRecordID", "lastModifiedUserRecordID"] {
                let query = Query(recordType: "Flag", predicate: try QueryPredicate(format: "\(key) == %@", alice))
                let plan = try fixture.engine.queryPlan(for: CompiledQuery(query, zoneID: .default, desiredKeys: nil), in: database.context)
                // The modifier is stored empty where it is the creator: its index is on the expression.
                let column = key == "creatorUserRecordID" ? "created_by=?" : "<expr>=?"
                #expect(plan.contains("USING INDEX ix_") && plan.contains(column), "\(key):\n\(plan)")
                let (matches, _) = try await database.records(matching: query)
                #expect(Set(matches.map(\.0.recordName)) == ["alice-0", "alice-1", "alice-2"], "\(key)")
            }
        }
    }
}
