import Foundation
import Stratus
import Testing

extension EngineConformance {
    static let scopeCases: [TestCase] = [
        TestCase("private records are invisible to other users; public records are shared", privateDatabaseIsolation),
        TestCase("the shared database has no default zone", sharedDatabaseRejectsDefaultZone),
        TestCase("an unknown custom zone is zoneNotFound", unknownZoneIsZoneNotFound),
    ]

    static func privateDatabaseIsolation(_ env: Environment) async throws {
        let alice = env.container(user: "alice")
        let bob = env.container(user: "bob")
        try await TestDatabase.save([
            makeRecord("Diary", "secret", ["text": .string("alice's secret")]),
            makeRecord("Diary", "alice-only", ["text": .string("mine")]),
        ], in: alice.privateCloudDatabase)
        try await TestDatabase.save([makeRecord("Diary", "notice", ["text": .string("for everyone")])], in: alice.publicCloudDatabase)

        // Bob sees none of Alice's private records, by ID or by query.
        #expect(try await TestDatabase.exists("secret", in: bob.privateCloudDatabase) == false)
        #expect(try await TestDatabase.exists("alice-only", in: bob.privateCloudDatabase) == false)
        #expect(try await TestDatabase.queryAll(Query(recordType: "Diary"), in: bob.privateCloudDatabase).isEmpty)
        // Private records are not in the public database either.
        #expect(try await TestDatabase.exists("secret", in: alice.publicCloudDatabase) == false)
        #expect(TestDatabase.names(try await TestDatabase.queryAll(Query(recordType: "Diary"), in: alice.publicCloudDatabase)) == ["notice"])

        // Both see the public record.
        #expect(try await bob.publicCloudDatabase.record(for: Record.ID(recordName: "notice"))["text"] as? String == "for everyone")
        #expect(TestDatabase.names(try await TestDatabase.queryAll(Query(recordType: "Diary"), in: bob.publicCloudDatabase)) == ["notice"])

        // Bob's own record with the same name is a different record.
        try await bob.privateCloudDatabase.save(makeRecord("Diary", "secret", ["text": .string("bob's secret")]))
        #expect(try await alice.privateCloudDatabase.record(for: Record.ID(recordName: "secret"))["text"] as? String == "alice's secret")
        #expect(try await bob.privateCloudDatabase.record(for: Record.ID(recordName: "secret"))["text"] as? String == "bob's secret")
        #expect(TestDatabase.names(try await TestDatabase.queryAll(Query(recordType: "Diary"), in: bob.privateCloudDatabase)) == ["secret"])
        #expect(TestDatabase.names(try await TestDatabase.queryAll(Query(recordType: "Diary"), in: alice.privateCloudDatabase)) == ["alice-only", "secret"])

        // Bob deleting "secret" deletes his, not Alice's.
        try await bob.privateCloudDatabase.deleteRecord(withID: Record.ID(recordName: "secret"))
        try await bob.privateCloudDatabase.deleteRecord(withID: Record.ID(recordName: "alice-only"))
        #expect(try await TestDatabase.exists("secret", in: bob.privateCloudDatabase) == false)
        #expect(try await TestDatabase.exists("secret", in: alice.privateCloudDatabase))
        #expect(try await TestDatabase.exists("alice-only", in: alice.privateCloudDatabase))

        // A second container object for the same user sees the same private records.
        let aliceAgain = env.container(user: "alice")
        #expect(try await TestDatabase.exists("secret", in: aliceAgain.privateCloudDatabase))
        #expect(alice.database(with: .private).databaseScope == .private)
        #expect(alice.database(with: .public).databaseScope == .public)
        #expect(alice.database(with: .shared).databaseScope == .shared)
    }

    static func sharedDatabaseRejectsDefaultZone(_ env: Environment) async throws {
        let shared = env.container().sharedCloudDatabase
        let record = makeRecord("Doc", "in-default-zone", ["n": .int64(1)])
        let results = try await shared.modifyRecords(saving: [record], deleting: [Record.ID(recordName: "other")])
        #expect(errorCode(results.saveResults[record.recordID]) == .invalidArguments)
        #expect(errorCode(results.deleteResults[Record.ID(recordName: "other")]) == .invalidArguments)
        let saveError = await caughtError { try await shared.save(record) }
        #expect(stratusError(saveError)?.code == .invalidArguments)
        let queryError = await caughtError { try await shared.records(matching: Query(recordType: "Doc")) }
        #expect(stratusError(queryError)?.code == .invalidArguments)
        // Nothing reached the other databases.
        #expect(try await TestDatabase.exists("in-default-zone", in: env.container().privateCloudDatabase) == false)
        #expect(try await TestDatabase.exists("in-default-zone", in: env.container().publicCloudDatabase) == false)
    }

    static func unknownZoneIsZoneNotFound(_ env: Environment) async throws {
        let container = env.container()
        let zone = RecordZone.ID(zoneName: "NoSuchZone")
        for database in [container.privateCloudDatabase, container.publicCloudDatabase] {
            let record = makeRecord("Doc", "in-missing-zone", zoneID: zone, ["n": .int64(1)])
            let results = try await database.modifyRecordsEachItem(saving: [record], deleting: [])
            #expect(errorCode(results.saveResults[record.recordID]) == .zoneNotFound, "save in \(database.databaseScope)")
            let queryError = await caughtError { try await database.records(matching: Query(recordType: "Doc"), inZoneWith: zone) }
            #expect(stratusError(queryError)?.code == .zoneNotFound, "query in \(database.databaseScope)")
            // A private database is one user's: the message says whose it looked in.
            let whose = database.databaseScope == .private ? " of user alice" : ""
            #expect(stratusError(queryError)?.message == "zone 'NoSuchZone' does not exist in the \(database.databaseScope) database\(whose)", "\(String(describing: queryError))")
            let fetched = try await database.records(for: [record.recordID])
            #expect(errorCode(fetched[record.recordID]) != nil, "fetching from a missing zone fails")
            // The default zone is unaffected.
            #expect(try await TestDatabase.queryAll(Query(recordType: "Doc"), in: database).isEmpty)
        }
    }
}
