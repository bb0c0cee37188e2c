import Foundation
import Stratus
import Testing

/// CloudKit's rules for encrypted fields (``Record/encryptedValues``), decided above every
/// engine: no query filters or sorts on them, and the public database holds none.
extension EngineConformance {
    static let encryptionCases: [TestCase] = [
        TestCase("encryption: a query (or a query subscription) that filters or sorts on an encrypted field fails with invalidArguments naming it, in development and production", encryptedFieldsAreNotQueried),
        TestCase("encryption: encrypted values fail per record in the public database; the private database keeps them", publicDatabaseRefusesEncryptedValues),
        TestCase("encryption: a schema refuses QUERYABLE, SORTABLE and SEARCHABLE on an encrypted field", encryptedFieldsHaveNoIndex),
    ]

    static func encryptedFieldsAreNotQueried(_ env: Environment) async throws {
        let container = env.container()
        let database = container.privateCloudDatabase
        // Development grows `secret` as an encrypted field from the first save.
        let note = makeRecord("Note", "n1", ["title": .string("groceries"), "rank": .int64(1)])
        note.encryptedValues["secret"] = "s3cr3t"
        try await database.save(note)
        #expect(try await container.schema().recordType("Note")?.field("secret")?.isEncrypted == true)

        func refusal(_ query: Query, in database: Database) async -> StratusError? {
            stratusError(await caughtError { try await database.records(matching: query) })
        }
        let filters: [(String, [any Sendable])] = [
            ("secret == %@", ["s3cr3t"]),
            ("title == %@ AND secret BEGINSWITH %@", ["groceries", "s3"]),
            ("NOT (secret == %@)", ["x"]),
            ("secret IN %@", [["a", "b"]]),
        ]
        for (format, arguments) in filters {
            let error = await refusal(Query(recordType: "Note", predicate: try QueryPredicate(format: format, argumentArray: arguments)), in: database)
            #expect(error?.code == .invalidArguments, "\(format)")
            #expect(error?.message.contains("'secret'") == true && error?.message.contains("encrypted") == true, "\(format): \(String(describing: error))")
        }
        let sorted = Query(recordType: "Note")
        sorted.sortDescriptors = [RecordSortDescriptor(key: "rank"), RecordSortDescriptor(key: "secret", ascending: false)]
        let sortError = await refusal(sorted, in: database)
        #expect(sortError?.code == .invalidArguments)
        #expect(sortError?.message.contains("'secret'") == true && sortError?.message.contains("sorted") == true, "\(String(describing: sortError))")
        // Counting and deleting by query are queries too.
        let counted = await caughtError { try await database.countRecords(matching: try Query(recordType: "Note", format: "secret == %@", "s3cr3t")) }
        #expect(stratusError(counted)?.code == .invalidArguments)
        // A query subscription's predicate is a query: refused on the encrypted field, saved on another.
        let watching = QuerySubscription(recordType: "Note", predicate: try QueryPredicate(format: "secret == %@", argumentArray: ["s3cr3t"]), subscriptionID: "watch-secret")
        watching.notificationInfo = NotificationInfo()
        let subscriptionError = stratusError(await caughtError { try await database.save(watching) })
        #expect(subscriptionError?.code == .invalidArguments)
        #expect(subscriptionError?.message.contains("'secret'") == true && subscriptionError?.message.contains("encrypted") == true, "\(String(describing: subscriptionError))")
        let titles = QuerySubscription(recordType: "Note", predicate: try QueryPredicate(format: "title == %@", argumentArray: ["groceries"]), subscriptionID: "watch-title")
        titles.notificationInfo = NotificationInfo()
        #expect(try await database.save(titles).subscriptionID == "watch-title")
        #expect(try await database.allSubscriptions().map(\.subscriptionID) == ["watch-title"])
        // Queries on the other fields run; the encrypted value comes back with the record.
        let found = try await TestDatabase.queryAll(try Query(recordType: "Note", format: "title == %@", "groceries"), in: database)
        #expect(TestDatabase.names(found) == ["n1"])
        #expect(found.first?.encryptedValues["secret"] as? String == "s3cr3t")

        // Production refuses them too, saying why (not that an index is missing).
        var declared = RecordTypeSchema(recordType: "Vault")
        declared.addField("label", type: .string, indexes: [.queryable, .sortable])
        declared.addField("pin", type: .string, isEncrypted: true)
        declared.addField("recordName", type: .string, indexes: [.queryable])
        try await container.saveSchema(declared)
        try await container.deploySchema()
        let production = container.container(in: .production).privateCloudDatabase
        let error = await refusal(try Query(recordType: "Vault", format: "pin == %@", "1234"), in: production)
        #expect(error?.code == .invalidArguments)
        #expect(error?.message.contains("'pin'") == true && error?.message.contains("encrypted") == true, "\(String(describing: error))")
        #expect(try await TestDatabase.queryAll(try Query(recordType: "Vault", format: "label == %@", "x"), in: production).isEmpty)
    }

    static func publicDatabaseRefusesEncryptedValues(_ env: Environment) async throws {
        let container = env.container()
        let database = container.publicCloudDatabase
        let sealed = makeRecord("Vault", "sealed", ["label": .string("front door")])
        sealed.encryptedValues["pin"] = "1234"
        let plain = makeRecord("Vault", "plain", ["label": .string("back door")])
        let (saves, _) = try await database.modifyRecords(saving: [sealed, plain], deleting: [], atomically: false)
        let error = try #require(stratusError(saves[sealed.recordID].flatMap { if case .failure(let e) = $0 { e } else { nil } }))
        #expect(error.code == .invalidArguments)
        #expect(error.recordID == sealed.recordID)
        #expect(error.message.contains("'pin'") && error.message.contains("public database"), "\(error.message)")
        #expect((try? saves[plain.recordID]?.get()) != nil, "the other record is saved")
        #expect(try await TestDatabase.exists("sealed", in: database) == false)
        #expect(try await container.schema().recordType("Vault")?.field("pin") == nil, "the refused save grew no field")
        // A stored public record cannot get one either.
        let stored = try await database.record(for: plain.recordID)
        stored.encryptedValues["pin"] = "5678"
        #expect(stratusError(await caughtError { try await database.save(stored) })?.code == .invalidArguments)
        // The private database keeps encrypted values.
        let kept = try await container.privateCloudDatabase.save(sealed)
        #expect(kept.encryptedValues["pin"] as? String == "1234")
    }

    static func encryptedFieldsHaveNoIndex(_ env: Environment) async throws {
        let container = env.container()
        for index in [RecordTypeSchema.Indexes.queryable, .sortable, .searchable] {
            var schema = RecordTypeSchema(recordType: "Vault")
            schema.addField("pin", type: .string, indexes: index, isEncrypted: true)
            let error = stratusError(await caughtError { try await container.saveSchema(schema) })
            #expect(error?.code == .invalidArguments, "\(index)")
            #expect(error?.message.contains("'pin'") == true && error?.message.contains("encrypted") == true, "\(String(describing: error))")
        }
        #expect(try await container.schema().recordType("Vault") == nil)
    }
}
