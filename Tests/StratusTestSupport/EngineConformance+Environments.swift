import Foundation
import Stratus
import Synchronization
import Testing

// MARK: - Environments, schemas per environment, type enforcement and development growth

extension EngineConformance.Environment {
    /// A container on the store in `environment`, acting as `user`.
    public func container(user: String = "alice", in environment: Container.Environment) -> Container {
        Container(identifier: Self.containerIdentifier, engine: engine, userName: user, environment: environment)
    }

    /// A container on the store whose caller is not signed in.
    public func anonymousContainer(in environment: Container.Environment = .development) -> Container {
        Container.anonymous(identifier: Self.containerIdentifier, engine: engine, environment: environment)
    }
}

extension EngineConformance {
    static let environmentCases: [TestCase] = [
        TestCase("environments: development and production keep separate records, zones and schemas", environmentsKeepSeparateData),
        TestCase("environments: a write fires its own environment's subscriptions only, also when both environments' subscriptions are at the same version", environmentsFireTheirOwnSubscriptions),
        TestCase("environments: development creates record types and fields on first save, without indexes, in the records' transaction", developmentGrowsSchema),
        TestCase("environments: a value of the wrong type fails alone with invalidArguments naming the field, the declared and the given type", wrongTypeFailsItem),
        TestCase("environments: a NUMBER field takes INT64 and DOUBLE; an ENCRYPTED field refuses plain values and the other way round", numberAndEncryptedFields),
        TestCase("environments: an atomic request that fails on a type creates no field", atomicFailureGrowsNothing),
        TestCase("environments: a save that is not written creates no field (unknownItem, a conflict, create of a stored record, a missing parent), in bulk or not", refusedSaveGrowsNothing),
        TestCase("environments: concurrent writers agree on a new field's type", concurrentGrowthAgrees),
        TestCase("environments: a schema save, a replacement or a record that would take the schema past Stratus's limits is refused and changes nothing; raised limits take it, and a schema held past them may stay", schemaLimitsHold),
        TestCase("environments: production rejects unknown record types and fields with CloudKit's invalidArguments", productionRejectsUnknown),
        TestCase("environments: production refuses filters and sorts without their index, and query subscriptions that could never fire; development runs them", productionRefusesUnindexed),
        TestCase("environments: deploy is additive; removing or retyping a field fails it and production stays", deployIsAdditive),
        TestCase("environments: a deploy and a replacement of development that drops a type run at once: production never holds a type development lacks",
                 deployRacingReplacement),
        TestCase("environments: reset development deletes its data and puts its schema back to production's", resetDevelopment),
        TestCase("environments: reset development leaves no asset content of its records behind", resetReleasesAssets),
        TestCase("environments: a reset beside deploys puts development back to production's schema as it is when the reset commits", resetRacingDeploy),
        TestCase("environments: naming a bare NUMBER's preferred type, either one, changes no type", numberPreferenceNamed),
        TestCase("environments: a deploy that makes a field searchable beside writers indexes every record; a reset beside writers leaves no record without its zone",
                 schemaChangesBesideWriters),
        TestCase("environments: schemas round-trip whole per environment: roles, grants, encryption, indexes", schemaRoundTrip),
        TestCase("environments: cursors and change tokens of one environment are refused by the other", tokensStayInTheirEnvironment),
    ]

    private static func itemSchema() -> RecordTypeSchema {
        var item = RecordTypeSchema(recordType: "Item")
        item.addField("title", type: .string, indexes: [.queryable, .searchable])
        item.addField("rank", type: .int64, indexes: [.sortable])
        item.addField("category", type: .string, indexes: [.queryable])
        item.addField("recordName", type: .string, indexes: [.queryable])
        return item
    }

    static func environmentsFireTheirOwnSubscriptions(_ env: Environment) async throws {
        let development = env.container(in: .development)
        let production = env.container(in: .production)
        for (container, id) in [(development, "development-changes"), (production, "production-changes")] {
            let subscription = DatabaseSubscription(subscriptionID: id)
            subscription.notificationInfo = NotificationInfo()
            _ = try await container.privateCloudDatabase.save(subscription)
        }
        func fired(_ container: Container) async throws -> [String] {
            try await NotificationFeed(database: container.privateCloudDatabase).nextBatch(after: nil, limit: 100).notifications.map { $0.subscriptionID ?? "?" }
        }
        try await development.saveSchema(itemSchema())
        try await development.deploySchema()
        // Development's write first, then production's: each fires its own.
        try await TestDatabase.save([makeRecord("Item", "first", ["title": .string("a")])], in: development.privateCloudDatabase)
        try await TestDatabase.save([makeRecord("Item", "second", ["title": .string("b")])], in: production.privateCloudDatabase)
        #expect(try await fired(development) == ["development-changes"])
        #expect(try await fired(production) == ["production-changes"])
    }

    static func environmentsKeepSeparateData(_ env: Environment) async throws {
        let development = env.container(in: .development)
        let production = env.container(in: .production)
        #expect(production.environment == .production && development.container(in: .production).environment == .production)
        try await development.saveSchema(itemSchema())
        try await development.deploySchema()

        try await TestDatabase.save([makeRecord("Item", "dev-1", ["title": .string("in development")])], in: development.publicCloudDatabase)
        try await TestDatabase.save([makeRecord("Item", "prod-1", ["title": .string("in production")])], in: production.publicCloudDatabase)
        try await TestDatabase.save([makeRecord("Item", "mine", ["title": .string("private dev")])], in: development.privateCloudDatabase)
        #expect(TestDatabase.names(try await TestDatabase.queryAll(Query(recordType: "Item"), in: development.publicCloudDatabase)) == ["dev-1"])
        #expect(TestDatabase.names(try await TestDatabase.queryAll(Query(recordType: "Item"), in: production.publicCloudDatabase)) == ["prod-1"])
        #expect(try await TestDatabase.exists("mine", in: production.privateCloudDatabase) == false)
        #expect(try await TestDatabase.exists("dev-1", in: production.publicCloudDatabase) == false)

        // Zones too.
        try await development.privateCloudDatabase.save(RecordZone(zoneName: "Photos"))
        #expect(try await development.privateCloudDatabase.allRecordZones().map(\.zoneID.zoneName).contains("Photos"))
        #expect(try await production.privateCloudDatabase.allRecordZones().map(\.zoneID.zoneName) == ["_defaultZone"])

        // Schemas: a type saved in development is not in production until deployed.
        var extra = RecordTypeSchema(recordType: "Extra")
        extra.addField("n", type: .int64)
        try await development.saveSchema(extra)
        #expect(try await development.schema().recordType("Extra") != nil)
        #expect(try await production.schema().recordType("Extra") == nil)
        let refused = await caughtError { try await production.saveSchema(extra) }
        #expect(stratusError(refused)?.code == .invalidArguments, "production's schema changes only by deploying")
    }

    static func developmentGrowsSchema(_ env: Environment) async throws {
        let container = env.container()
        let database = container.publicCloudDatabase
        #expect(try await container.schema().recordType("Gadget") == nil)
        try await TestDatabase.save([makeRecord("Gadget", "g1", ["name": .string("lamp"), "watts": .int64(40), "tags": .stringList(["a"])])], in: database)
        let created = try #require(try await container.schema().recordType("Gadget"))
        #expect(Set(created.fields) == [.init("name", type: .string), .init("watts", type: .int64), .init("tags", type: .stringList)], "fields without indexes")
        #expect(created.grants == RecordTypeSchema.publicDatabaseGrants, "CloudKit's public defaults, spelled out as CloudKit's exports show them")

        // A later record adds its new fields; known fields keep their declarations.
        try await TestDatabase.save([makeRecord("Gadget", "g2", ["name": .string("fan"), "price": .double(9.5), "secret": .string("x")])], in: database)
        let grown = try #require(try await container.schema().recordType("Gadget"))
        #expect(grown.field("price") == .init("price", type: .double))
        #expect(grown.fields.count == 5)
        // The private database grows the same schema: it is the container's.
        try await TestDatabase.save([makeRecord("Gadget", "g3", ["color": .string("red")])], in: container.privateCloudDatabase)
        #expect(try await container.schema().recordType("Gadget")?.field("color")?.type == .string)
        // An encrypted value creates an encrypted field (in the private database: the public
        // one holds no encrypted values, as CloudKit's).
        let sealed = makeRecord("Gadget", "g4")
        sealed.encryptedValues["code"] = "1234"
        try await container.privateCloudDatabase.save(sealed)
        #expect(try await container.schema().recordType("Gadget")?.field("code") == .init("code", type: .string, isEncrypted: true))
    }

    static func wrongTypeFailsItem(_ env: Environment) async throws {
        let container = env.container()
        let database = container.publicCloudDatabase
        try await TestDatabase.save([makeRecord("Meter", "m1", ["reading": .int64(10), "unit": .string("kWh")])], in: database)
        let wrong = makeRecord("Meter", "m2", ["reading": .string("ten")])
        let fine = makeRecord("Meter", "m3", ["reading": .int64(12)])
        let (saves, _) = try await database.modifyRecords(saving: [wrong, fine], deleting: [], atomically: false)
        let error = try #require(stratusError(saves[wrong.recordID].flatMap { if case .failure(let e) = $0 { e } else { nil } }))
        #expect(error.code == .invalidArguments)
        #expect(error.message.contains("'reading'") && error.message.contains("INT64") && error.message.contains("STRING"), "\(error.message)")
        #expect(error.recordID == wrong.recordID)
        #expect((try? saves[fine.recordID]?.get()) != nil, "the other item is saved")
        #expect(try await TestDatabase.exists("m2", in: database) == false)
        // Updating a stored record with a wrong type fails too, and keeps the stored value.
        let stored = try await database.record(for: Record.ID(recordName: "m1"))
        stored["unit"] = 3
        let update = await caughtError { try await database.save(stored) }
        #expect(stratusError(update)?.code == .invalidArguments)
        #expect(try await database.record(for: Record.ID(recordName: "m1"))["unit"] as? String == "kWh")
        // A list is not its element type.
        let list = await caughtError { try await database.save(makeRecord("Meter", "m4", ["reading": .int64List([1])])) }
        #expect(stratusError(list)?.message.contains("INT64_LIST") == true, "\(String(describing: list))")
    }

    static func numberAndEncryptedFields(_ env: Environment) async throws {
        let container = env.container()
        let database = container.publicCloudDatabase
        let schema = try RecordTypeSchemaBuilder.measure()
        try await container.saveSchema(schema)
        try await TestDatabase.save([makeRecord("Measure", "a", ["amount": .int64(3)]), makeRecord("Measure", "b", ["amount": .double(2.5)]),
                                     makeRecord("Measure", "c", ["amounts": .int64List([1]), "more": .doubleList([1.5])])], in: database)
        let text = await caughtError { try await database.save(makeRecord("Measure", "d", ["amount": .string("3")])) }
        #expect(stratusError(text)?.message.contains("NUMBER") == true, "\(String(describing: text))")

        let plain = await caughtError { try await database.save(makeRecord("Measure", "e", ["pin": .string("1234")])) }
        #expect(stratusError(plain)?.code == .invalidArguments)
        #expect(stratusError(plain)?.message.contains("ENCRYPTED STRING") == true, "\(String(describing: plain))")
        // Encrypted values live in the private database (the public one holds none, as CloudKit's).
        let sealed = makeRecord("Measure", "f")
        sealed.encryptedValues["pin"] = "1234"
        try await container.privateCloudDatabase.save(sealed)
        let sealedLabel = makeRecord("Measure", "g")
        sealedLabel.encryptedValues["label"] = "x"
        let wronglySealed = await caughtError { try await container.privateCloudDatabase.save(sealedLabel) }
        #expect(stratusError(wronglySealed)?.code == .invalidArguments)
    }

    static func atomicFailureGrowsNothing(_ env: Environment) async throws {
        let container = env.container()
        let database = container.publicCloudDatabase
        try await TestDatabase.save([makeRecord("Ledger", "l1", ["amount": .int64(1)])], in: database)
        // In a zone with the atomic capability (the default zone has none, as CloudKit's).
        let zone = try await database.save(RecordZone(zoneName: "Ledgers")).zoneID
        let (saves, _) = try await database.modifyRecordsEachItem(saving: [makeRecord("Ledger", "l2", zoneID: zone, ["memo": .string("new field")]),
                                                                   makeRecord("Ledger", "l3", zoneID: zone, ["amount": .string("bad")])],
                                                          deleting: [], atomically: true)
        #expect(errorCode(saves[Record.ID(recordName: "l2", zoneID: zone)]) == .batchRequestFailed)
        #expect(errorCode(saves[Record.ID(recordName: "l3", zoneID: zone)]) == .invalidArguments)
        #expect(try await container.schema().recordType("Ledger")?.field("memo") == nil, "the rolled-back request created no field")
        // The field may then be created with another type.
        try await database.save(makeRecord("Ledger", "l4", ["memo": .int64(7)]))
        #expect(try await container.schema().recordType("Ledger")?.field("memo")?.type == .int64)
    }

    static func refusedSaveGrowsNothing(_ env: Environment) async throws {
        let container = env.container()
        let database = container.publicCloudDatabase
        try await TestDatabase.save([makeRecord("Probe", "stored", ["n": .int64(1)])], in: database)
        let stored = try await database.record(for: Record.ID(recordName: "stored"))
        /// Saves `records` in one non-atomic request in `mode`, answering each one's error code (`nil`: saved).
        func save(_ records: [Record], mode: RecordWriteMode) async -> [StratusError.Code?] {
            let op = ModifyRecordsOperation(recordsToSave: records)
            op.writeMode = mode
            op.isAtomic = false
            let results = Mutex<[Record.ID: StratusError.Code?]>([:])
            op.perRecordSaveBlock = { id, result in results.withLock { $0[id] = errorCode(result) } }
            await run(op, on: database)
            let codes = results.withLock { $0 }
            return records.map { codes[$0.recordID] ?? .internalError }
        }
        func declared(_ field: String) async throws -> FieldType? {
            try await container.schema().recordType("Probe")?.field(field)?.type
        }

        // update of a record that does not exist: unknownItem, and no field.
        #expect(await save([makeRecord("Probe", "nope", ["zz": .int64(1)])], mode: .update) == [.unknownItem])
        #expect(try await declared("zz") == nil, "a record that is not written creates no field")
        // create of a stored record: a conflict, and no field (the bulk path of new records too).
        #expect(await save([makeRecord("Probe", "stored", ["zc": .int64(1)]), makeRecord("Probe", "fresh", ["n": .int64(2)])], mode: .create) == [.serverRecordChanged, nil])
        #expect(try await declared("zc") == nil)
        // A stale change tag: a conflict, and no field.
        let stale = stored
        stale["zt"] = 1
        let current = try await database.record(for: stored.recordID)
        current["n"] = 5
        try await database.save(current)
        #expect(await save([stale], mode: .ifServerRecordUnchanged) == [.serverRecordChanged])
        #expect(try await declared("zt") == nil)
        // A parent that does not exist: referenceViolation, and no field.
        let orphan = makeRecord("Probe", "orphan", ["zp": .int64(1)])
        orphan.parent = Record.Reference(recordID: Record.ID(recordName: "missing-parent"), action: .none)
        #expect(await save([orphan], mode: .forceUpdate) == [.referenceViolation])
        #expect(try await declared("zp") == nil)
        // In one request, a refused record's new field leaves the next record free to create it
        // with another type; a record that is written creates its fields.
        #expect(await save([makeRecord("Probe", "stored", ["zz": .int64(1)]), makeRecord("Probe", "later", ["zz": .string("text")])], mode: .create) == [.serverRecordChanged, nil])
        #expect(try await declared("zz") == .string)
        #expect(await save([makeRecord("Probe", "other", ["zz": .int64(3)])], mode: .forceUpdate) == [.invalidArguments], "the field a written record created holds")
        // A new type is created only by a record written.
        #expect(await save([makeRecord("Unborn", "u1", ["a": .int64(1)])], mode: .update) == [.unknownItem])
        #expect(try await container.schema().recordType("Unborn") == nil)
    }

    static func concurrentGrowthAgrees(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        let other = env.container(user: "bob").publicCloudDatabase
        // Two writers each create the same new field, one as STRING, one as INT64.
        let strings = makeRecords("Race", count: 40, prefix: "s") { ["value": .string("v\($0)")] }
        let numbers = makeRecords("Race", count: 40, prefix: "n") { ["value": .int64(Int64($0))] }
        async let first = saveEach(strings, in: database)
        async let second = saveEach(numbers, in: other)
        let (stringResults, numberResults) = try await (first, second)
        let declared = try #require(try await env.container().schema().recordType("Race")?.field("value")?.type)
        #expect(declared == .string || declared == .int64)
        let winners = declared == .string ? stringResults : numberResults
        let losers = declared == .string ? numberResults : stringResults
        #expect(winners.allSatisfy { $0 == nil }, "every record of the declared type is saved")
        #expect(losers.allSatisfy { $0 == .invalidArguments }, "every record of the other type fails")
        let stored = try await TestDatabase.queryAll(Query(recordType: "Race"), in: database)
        #expect(stored.count == 40)
        #expect(stored.allSatisfy { $0.fieldValue(forKey: "value")?.type == declared })
    }

    static func schemaLimitsHold(_ env: Environment) async throws {
        let container = env.container()
        let database = container.privateCloudDatabase
        func types(_ count: Int, fields: Int = 1) -> [RecordTypeSchema] {
            (0..<count).map { type in RecordTypeSchema(recordType: "T\(type)", fields: (0..<fields).map { .init("f\($0)", type: .string) }) }
        }
        // A replacement with 1,001 types is refused under the default limits, taken under raised ones.
        let tooMany = ContainerSchema(recordTypes: types(1_001))
        let refused = stratusError(await caughtError { try await container.replaceSchema(tooMany) })
        #expect(refused?.code == .invalidArguments && refused?.message.contains("1001 record types") == true, "\(String(describing: refused))")
        #expect(try await container.schema().recordTypes.count == 1, "only Users: nothing was replaced")
        var raised = ContainerSchema.Limits()
        raised.recordTypes = 2_000
        try await container.replaceSchema(tooMany, limits: raised)
        #expect(try await container.schema().recordTypes.count == 1_002)

        // Held past the limit, the count may stay (a type changed, fields added) but not grow.
        var wider = RecordTypeSchema(recordType: "T0")
        wider.addField("f0", type: .string)
        wider.addField("g", type: .int64, indexes: [.queryable])
        try await container.saveSchema(wider)
        let newType = RecordTypeSchema(recordType: "Extra", fields: [.init("n", type: .int64)])
        let grown = stratusError(await caughtError { try await container.saveSchema(newType) })
        #expect(grown?.code == .invalidArguments && grown?.message.contains("1002 record types") == true && grown?.message.contains("held 1001") == true, "\(String(describing: grown))")
        #expect(try await container.schema().recordType("Extra") == nil)
        let operation = ModifySchemasOperation(schemasToSave: [newType])
        operation.limits = raised
        let outcome = Mutex<Result<[RecordTypeSchema], any Error>?>(nil)
        operation.modifySchemasResultBlock = { result in outcome.withLock { $0 = result } }
        await run(operation, on: database)
        let saved = try #require(outcome.withLock { $0 }).get()
        #expect(saved.contains { $0.recordType == "Extra" })

        // Development does not create a type past the limit: the record fails alone.
        try await container.replaceSchema(ContainerSchema(recordTypes: types(1_000)))
        let codes = try await saveEach([makeRecord("Fresh", "r1", ["n": .int64(1)]), makeRecord("T1", "r2", ["f0": .string("a"), "more": .string("b")])], in: database)
        #expect(codes == [.invalidArguments, nil], "a new type is refused, a new field of a known type is not: \(codes)")
        let schema = try await container.schema()
        #expect(schema.recordType("Fresh") == nil && schema.recordType("T1")?.field("more") != nil)

        // Nor a field past the 20,000 fields of all types (20 types of 1,000), even in a new type.
        try await container.replaceSchema(ContainerSchema(recordTypes: types(20, fields: 1_000)))
        let fieldCodes = try await saveEach([makeRecord("New", "w1", ["past": .string("b")]), makeRecord("T3", "w2", ["f1": .string("a")])], in: database)
        #expect(fieldCodes == [.invalidArguments, nil], "\(fieldCodes)")
        #expect(try await container.schema().recordType("New") == nil)
        let fieldError = stratusError(await caughtError { try await database.save(makeRecord("New", "w3", ["past": .string("b")])) })
        #expect(fieldError?.message.contains("20001 fields") == true, "\(String(describing: fieldError?.message))")
    }

    /// Saves records one request each, answering each one's error code (`nil`: saved).
    private static func saveEach(_ records: [Record], in database: Database) async throws -> [StratusError.Code?] {
        var codes: [StratusError.Code?] = []
        for record in records {
            codes.append(stratusError(await caughtError { try await database.save(record) })?.code)
        }
        return codes
    }

    static func productionRejectsUnknown(_ env: Environment) async throws {
        let development = env.container()
        try await development.saveSchema(itemSchema())
        try await development.deploySchema()
        let production = env.container(in: .production).publicCloudDatabase
        try await production.save(makeRecord("Item", "known", ["title": .string("ok"), "rank": .int64(1)]))

        let unknownType = await caughtError { try await production.save(makeRecord("Widget", "w1", ["title": .string("x")])) }
        #expect(stratusError(unknownType)?.code == .invalidArguments)
        #expect(stratusError(unknownType)?.message.contains("Cannot create new type Widget in production schema") == true, "\(String(describing: unknownType))")
        let unknownField = await caughtError { try await production.save(makeRecord("Item", "i2", ["title": .string("x"), "color": .string("red")])) }
        #expect(stratusError(unknownField)?.code == .invalidArguments)
        #expect(stratusError(unknownField)?.message.contains("Cannot create or modify field 'color' in record 'Item' in production schema") == true, "\(String(describing: unknownField))")
        let wrongType = await caughtError { try await production.save(makeRecord("Item", "i3", ["rank": .string("first")])) }
        #expect(stratusError(wrongType)?.code == .invalidArguments)
        #expect(try await TestDatabase.exists("i2", in: production) == false)
        #expect(try await TestDatabase.exists("w1", in: production) == false)
        #expect(try await env.container(in: .production).schema().recordType("Widget") == nil, "production grows nothing")
        // The private database follows the same schema.
        let privateError = await caughtError { try await env.container(in: .production).privateCloudDatabase.save(makeRecord("Widget", "w2")) }
        #expect(stratusError(privateError)?.code == .invalidArguments)
        // A query of a type production does not have is unknownItem ("Did not find record type").
        let query = await caughtError { try await production.records(matching: Query(recordType: "Widget")) }
        #expect(stratusError(query)?.code == .unknownItem)
        #expect(stratusError(query)?.message.contains("Did not find record type: Widget") == true)
    }

    static func productionRefusesUnindexed(_ env: Environment) async throws {
        let development = env.container()
        try await development.saveSchema(itemSchema())
        try await TestDatabase.save(makeRecords("Item", count: 5) { ["title": .string("t\($0)"), "rank": .int64(Int64($0)), "category": .string("c"), "note": .string("n")] },
                                    in: development.publicCloudDatabase)
        try await development.deploySchema()
        let production = env.container(in: .production).publicCloudDatabase
        try await TestDatabase.save(makeRecords("Item", count: 5) { ["title": .string("t\($0)"), "rank": .int64(Int64($0)), "category": .string("c"), "note": .string("n")] },
                                    in: production)

        func query(_ format: String, sort: [String] = []) throws -> Query {
            let query = try Query(recordType: "Item", format: format)
            query.sortDescriptors = sort.map { RecordSortDescriptor(key: $0) }
            return query
        }
        // Indexed filters and sorts run in both environments.
        for database in [development.publicCloudDatabase, production] {
            #expect(try await TestDatabase.queryAll(query("category == 'c'", sort: ["rank"]), in: database).count == 5)
            #expect(try await TestDatabase.queryAll(query("TRUEPREDICATE"), in: database).count == 5, "recordName is queryable")
            #expect(try await TestDatabase.queryAll(query("self CONTAINS 't1'"), in: database).count == 1)
            // SORTABLE is CloudKit's range index: it serves a range condition, not an equality.
            #expect(try await TestDatabase.queryAll(query("rank > 1"), in: database).count == 3)
            #expect(try await TestDatabase.queryAll(query("rank BETWEEN {1, 2}"), in: database).count == 2)
        }
        // Unindexed ones: development scans, production refuses as CloudKit does.
        let refusals: [(Query, String)] = [
            (try query("note == 'n'"), "Field 'note' is not marked queryable"),
            (try query("category == 'c'", sort: ["title"]), "Field 'title' is not marked sortable"),
            (try query("rank != 1"), "Field 'rank' is not marked queryable"),
            (try query("note >= 'n'"), "Field 'note' is not marked queryable"),
            (try query("category == 'c'", sort: ["creationDate"]), "Field 'creationDate' is not marked sortable"),
        ]
        for (unindexed, message) in refusals {
            #expect(try await TestDatabase.queryAll(unindexed, in: development.publicCloudDatabase).count >= 3, "development runs \(unindexed)")
            let error = stratusError(await caughtError { try await production.records(matching: unindexed) })
            #expect(error?.code == .invalidArguments, "\(unindexed)")
            #expect(error?.message.contains(message) == true, "\(String(describing: error))")
            let count = stratusError(await caughtError { try await production.countRecords(matching: unindexed) })
            #expect(count?.code == .invalidArguments, "counting \(unindexed)")
        }
        // A field production does not have at all is named as CloudKit names it.
        let misspelt = stratusError(await caughtError { try await production.records(matching: try query("rnak == 1")) })
        #expect(misspelt?.code == .invalidArguments && misspelt?.message.contains("Did not find field: 'rnak' in type: 'Item'") == true, "\(String(describing: misspelt))")
        // Without a queryable recordName, listing a type is refused too.
        var bare = RecordTypeSchema(recordType: "Bare")
        bare.addField("n", type: .int64)
        try await development.saveSchema(bare)
        try await development.deploySchema()
        let listing = stratusError(await caughtError { try await production.records(matching: Query(recordType: "Bare")) })
        #expect(listing?.message.contains("Field 'recordName' is not marked queryable") == true, "\(String(describing: listing))")
        // The advice is a declaration a schema file can hold: recordName is CloudKit's ___recordID.
        #expect(listing?.message.contains("declare \"___recordID\" REFERENCE QUERYABLE on Bare in the production schema") == true, "\(String(describing: listing))")

        // A query subscription's predicate is held to the same rules: one that could never
        // fire is refused, not saved. A subscription lists no records: Bare needs no index.
        func subscription(_ type: String, _ format: String, _ id: String) throws -> QuerySubscription {
            let subscription = QuerySubscription(recordType: type, predicate: try QueryPredicate(format: format), subscriptionID: id)
            subscription.notificationInfo = QuerySubscription.NotificationInfo()
            return subscription
        }
        let unknownType = stratusError(await caughtError { try await production.save(try subscription("Missing", "TRUEPREDICATE", "s1")) })
        #expect(unknownType?.code == .unknownItem && unknownType?.message.contains("Did not find record type: Missing") == true, "\(String(describing: unknownType))")
        let unindexed = stratusError(await caughtError { try await production.save(try subscription("Item", "note == 'n'", "s2")) })
        #expect(unindexed?.code == .invalidArguments && unindexed?.message.contains("Field 'note' is not marked queryable") == true, "\(String(describing: unindexed))")
        _ = try await production.save(try subscription("Item", "category == 'c'", "s3"))
        _ = try await production.save(try subscription("Bare", "TRUEPREDICATE", "s4"))
        _ = try await development.publicCloudDatabase.save(try subscription("Missing", "note == 'n'", "s5"))
        #expect(try await production.allSubscriptions().map(\.subscriptionID).sorted() == ["s3", "s4"])
    }

    /// A record type with one STRING field, `title`.
    private static func titledType(_ name: String) -> RecordTypeSchema {
        var type = RecordTypeSchema(recordType: name)
        type.addField("title", type: .string)
        return type
    }

    /// Expects every record type production has to be in development too.
    private static func expectProductionWithinDevelopment(_ development: Container, _ production: Container, _ context: String,
                                                          sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let inDevelopment = Set(try await development.schema().recordTypes.map(\.recordType))
        let inProduction = Set(try await production.schema().recordTypes.map(\.recordType))
        #expect(inProduction.isSubset(of: inDevelopment), "\(context): production \(inProduction.sorted()), development \(inDevelopment.sorted())",
                sourceLocation: sourceLocation)
    }

    static func deployRacingReplacement(_ env: Environment) async throws {
        for round in 0..<12 {
            let development = Container(identifier: "com.example.race\(round)", engine: env.engine, userName: "alice")
            let production = development.container(in: .production)
            let kept = titledType("Kept")
            try await development.replaceSchema(ContainerSchema(recordTypes: [kept]))
            let other = titledType("Other")
            // Whichever comes first, the other sees it: the replacement is refused once Kept is
            // in production, or the deploy gives production the replacement.
            async let deployed = (try? await development.deploySchema()) != nil
            async let replaced = (try? await development.replaceSchema(ContainerSchema(recordTypes: [other]))) != nil
            let (deploySucceeded, replaceSucceeded) = await (deployed, replaced)
            #expect(deploySucceeded, "round \(round): a deploy never fails here (development always keeps what production has)")
            _ = replaceSucceeded
            try await expectProductionWithinDevelopment(development, production, "round \(round)")
        }
    }

    static func deployIsAdditive(_ env: Environment) async throws {
        let development = env.container()
        let production = env.container(in: .production)
        try await development.saveSchema(itemSchema())
        let first = try await development.deploySchema()
        #expect(try await production.schema() == first)
        #expect(try await production.schema().recordType("Item") == itemSchema())

        // Additions deploy: a field, an index, a type, a role and its grant.
        var grown = itemSchema()
        grown.addField("color", type: .string, indexes: [.queryable])
        grown.grant(.read, to: .world)
        grown.grant([.create, .write], to: "editor")
        var tag = RecordTypeSchema(recordType: "Tag")
        tag.addField("label", type: .string)
        try await development.saveSchema(grown, tag)
        try await development.deploySchema()
        #expect(try await production.schema().recordType("Item") == grown)
        #expect(try await production.schema().recordType("Tag") == tag)
        #expect(try await production.schema().roles.contains("editor"))

        // Removing a field, retyping one or dropping a type is refused in development already
        // (development never holds what cannot be deployed), and production stays.
        let before = try await production.schema()
        let developmentBefore = try await development.schema()
        var removed = grown
        removed.fields.removeAll { $0.name == "color" }
        let removal = stratusError(await caughtError { try await development.saveSchema(removed) })
        #expect(removal?.code == .invalidArguments)
        #expect(removal?.message.contains("field 'color' of Item") == true, "\(String(describing: removal))")
        var retyped = grown
        retyped.fields.removeAll { $0.name == "rank" }
        retyped.addField("rank", type: .string)
        let retype = stratusError(await caughtError { try await development.saveSchema(retyped) })
        #expect(retype?.code == .invalidArguments)
        #expect(retype?.message.contains("field 'rank' of Item") == true, "\(String(describing: retype))")
        #expect(try await development.schema() == developmentBefore, "a refused save changes nothing")
        try await development.deploySchema()
        var developmentSchema = try await development.schema()
        developmentSchema.recordTypes.removeAll { $0.recordType == "Tag" }
        let dropped = stratusError(await caughtError { try await development.replaceSchema(developmentSchema) })
        #expect(dropped?.code == .invalidArguments, "development cannot drop what production has")
        #expect(try await production.schema() == before)
    }

    static func resetDevelopment(_ env: Environment) async throws {
        let development = env.container()
        let production = env.container(in: .production)
        try await development.saveSchema(itemSchema())
        try await development.deploySchema()
        try await TestDatabase.save([makeRecord("Item", "p1", ["title": .string("stays")])], in: production.publicCloudDatabase)
        try await TestDatabase.save([makeRecord("Item", "d1", ["title": .string("goes"), "extra": .int64(1)]), makeRecord("Scratch", "s1")],
                                    in: development.publicCloudDatabase)
        try await development.privateCloudDatabase.save(RecordZone(zoneName: "Drafts"))
        try await TestDatabase.save([makeRecord("Item", "mine", zoneID: RecordZone.ID(zoneName: "Drafts"))], in: development.privateCloudDatabase)
        try await TestDatabase.save([makeRecord("Item", "bobs")], in: env.container(user: "bob").privateCloudDatabase)
        #expect(try await development.schema().recordType("Scratch") != nil)
        let token = try await development.publicCloudDatabase.recordZoneChanges(inZoneWith: .default, since: nil).changeToken
        // A reader of the private database's changes that is up to date when the reset comes.
        var caughtUp = try await development.privateCloudDatabase.databaseChanges(since: nil)
        while caughtUp.moreComing { caughtUp = try await development.privateCloudDatabase.databaseChanges(since: caughtUp.changeToken) }

        try await production.resetDevelopmentEnvironment()
        #expect(try await TestDatabase.queryAll(Query(recordType: "Item"), in: development.publicCloudDatabase).isEmpty)
        #expect(try await development.privateCloudDatabase.allRecordZones().map(\.zoneID.zoneName) == ["_defaultZone"])
        #expect(try await TestDatabase.exists("bobs", in: env.container(user: "bob").privateCloudDatabase) == false, "every user's development data")
        #expect(try await development.schema() == production.schema(), "development's schema is production's again")
        #expect(try await development.schema().recordType("Scratch") == nil)
        #expect(TestDatabase.names(try await TestDatabase.queryAll(Query(recordType: "Item"), in: production.publicCloudDatabase)) == ["p1"])
        let expired = stratusError(await caughtError { try await development.publicCloudDatabase.recordZoneChanges(inZoneWith: .default, since: token) })
        #expect(expired?.code == .changeTokenExpired)
        #expect(expired?.message.contains("another store") == false && (expired?.underlyingError as? ServerChangeToken.Mismatch)?.isFromAnotherStore != true,
                "the default zone's token is of an earlier life of this store's zone, not another store's: \(String(describing: expired))")
        // The up-to-date reader learns that its zones are gone: its token expired, as every
        // token taken before the reset did; a token taken after it reads on.
        let databaseExpired = stratusError(await caughtError { try await development.privateCloudDatabase.databaseChanges(since: caughtUp.changeToken) })
        #expect(databaseExpired?.code == .changeTokenExpired, "\(String(describing: databaseExpired))")
        let fresh = try await development.privateCloudDatabase.databaseChanges(since: nil)
        #expect(try await development.privateCloudDatabase.databaseChanges(since: fresh.changeToken).modifications.isEmpty)
        // Development works again, growing from production's schema.
        try await development.publicCloudDatabase.save(makeRecord("Item", "again", ["title": .string("new"), "extra": .string("now a string")]))
        #expect(try await development.schema().recordType("Item")?.field("extra")?.type == .string)
    }

    static func resetReleasesAssets(_ env: Environment) async throws {
        let development = env.container()
        let photo = patternBytes(count: 50_000, seed: 11)
        let record = Record(recordType: "Photo", recordID: Record.ID(recordName: "p1"))
        record["image"] = Asset(fileURL: try env.store.writeFile("sources/reset.jpg", photo))
        _ = try await development.publicCloudDatabase.save(record)
        #expect(try await development.publicCloudDatabase.assetContentInventory().count == 1)

        try await development.resetDevelopmentEnvironment()
        _ = try await development.publicCloudDatabase.collectUnreferencedAssets()
        let inventory = try await development.publicCloudDatabase.assetContentInventory()
        #expect(inventory.count == 0 && inventory.bytes == 0, "no record names the content any more: \(inventory)")
    }

    static func resetRacingDeploy(_ env: Environment) async throws {
        for round in 0..<8 {
            let development = Container(identifier: "com.example.resetrace\(round)", engine: env.engine, userName: "alice")
            let production = development.container(in: .production)
            let base = titledType("Base")
            try await development.saveSchema(base)
            try await development.deploySchema()
            let added = titledType("Added\(round)")
            try await development.saveSchema(added)
            async let deployed: Void = { _ = try await development.deploySchema() }()
            async let reset: Void = development.resetDevelopmentEnvironment()
            _ = try await (deployed, reset)
            // Whichever commits last, development holds what production has.
            try await expectProductionWithinDevelopment(development, production, "round \(round)")
        }
    }

    static func schemaChangesBesideWriters(_ env: Environment) async throws {
        let development = Container(identifier: "com.example.besidewriters", engine: env.engine, userName: "alice")
        let production = development.container(in: .production)
        var words = RecordTypeSchema(recordType: "Words")
        words.addField("w", type: .string)
        try await development.saveSchema(words)
        try await development.deploySchema()
        words.addField("w", type: .string, indexes: [.searchable])
        try await development.saveSchema(words)

        func writeBatches(_ prefix: String, in database: Database) async -> Int {
            var written = 0
            for batch in 0..<30 {
                let records = makeRecords("Words", count: 40, prefix: "\(prefix)\(batch)-") { ["w": .string("alpha \($0)")] }
                if (try? await TestDatabase.save(records, in: database)) != nil { written += records.count }
            }
            return written
        }
        async let written = writeBatches("p", in: production.publicCloudDatabase)
        async let deployed: Void = { _ = try await development.deploySchema() }()
        let (count, _) = try await (written, deployed)
        #expect(count == 1_200, "every production write succeeds, before or after the deploy")
        let found = try await TestDatabase.queryAll(try Query(recordType: "Words", format: "self CONTAINS 'alpha'"), in: production.publicCloudDatabase)
        #expect(found.count == count, "every record written beside the deploy has its words")

        async let developmentWritten = writeBatches("d", in: development.publicCloudDatabase)
        async let reset: Void = development.resetDevelopmentEnvironment()
        _ = try await (developmentWritten, reset)
        #expect(try await development.checkStoreIntegrity().isEmpty)
    }

    static func numberPreferenceNamed(_ env: Environment) async throws {
        let development = env.container()
        var bare = RecordTypeSchema(recordType: "Reading")
        bare.fields = [RecordTypeSchema.Field("level", type: .int64, isNumber: true, namesPreferredType: false),
                       RecordTypeSchema.Field("rate", type: .int64, isNumber: true, namesPreferredType: false)]
        try await development.saveSchema(bare)
        try await development.deploySchema()
        var named = RecordTypeSchema(recordType: "Reading")
        named.fields = [RecordTypeSchema.Field("level", type: .int64, isNumber: true, namesPreferredType: true),
                        RecordTypeSchema.Field("rate", type: .double, isNumber: true, namesPreferredType: true)]
        try await development.saveSchema(named)
        try await development.deploySchema()
        #expect(try await development.container(in: .production).schema().recordType("Reading")?.field("rate")?.type == .double)
    }

    static func schemaRoundTrip(_ env: Environment) async throws {
        let container = env.container()
        var post = RecordTypeSchema(recordType: "Post", grants: [.creator: [.read, .write], .authenticated: .create, "moderator": [.read, .write]])
        post.addField("title", type: .string, indexes: [.queryable, .searchable, .sortable])
        post.addField("secret", type: .string, isEncrypted: true)
        post.addField("modificationDate", type: .timestamp, indexes: [.sortable])
        post.compoundIndexes = [.init(equalityFields: ["title"], sortField: "modificationDate")]
        var schema = ContainerSchema(roles: ["moderator", "editor"], recordTypes: [post])
        schema.includeUsersRecordType()
        let replaced = try await container.replaceSchema(schema)
        #expect(replaced == schema)
        #expect(try await container.schema() == schema)
        #expect(try await env.container(user: "bob").schema() == schema, "the schema is the container's, whoever reads it")
        // A second replacement removes what it does not name (nothing is in production).
        let smaller = ContainerSchema(roles: [], recordTypes: [RecordTypeSchema(recordType: "Only", fields: [.init("n", type: .int64)])])
        try await container.replaceSchema(smaller)
        var expected = smaller
        expected.includeUsersRecordType()
        #expect(try await container.schema() == expected)
        // An invalid schema is refused and changes nothing.
        let invalid = ContainerSchema(roles: [], recordTypes: [RecordTypeSchema(recordType: "Bad", grants: ["ghost": .read])])
        #expect(stratusError(await caughtError { try await container.replaceSchema(invalid) })?.code == .invalidArguments)
        #expect(try await container.schema() == expected)
    }

    static func tokensStayInTheirEnvironment(_ env: Environment) async throws {
        let development = env.container()
        let production = env.container(in: .production)
        try await development.saveSchema(itemSchema())
        try await development.deploySchema()
        for container in [development, production] {
            try await TestDatabase.save(makeRecords("Item", count: 5) { ["rank": .int64(Int64($0))] }, in: container.publicCloudDatabase)
        }
        let query = Query(recordType: "Item")
        query.sortDescriptors = [RecordSortDescriptor(key: "rank")]
        let (_, cursor) = try await development.publicCloudDatabase.records(matching: query, resultsLimit: 2)
        let devCursor = try #require(cursor)
        let refused = stratusError(await caughtError { try await production.publicCloudDatabase.records(continuingMatchFrom: devCursor) })
        #expect(refused?.code == .invalidArguments)
        #expect(try await development.publicCloudDatabase.records(continuingMatchFrom: devCursor).matchResults.count == 3)

        let token = try await production.publicCloudDatabase.recordZoneChanges(inZoneWith: .default, since: nil).changeToken
        let expired = stratusError(await caughtError { try await development.publicCloudDatabase.recordZoneChanges(inZoneWith: .default, since: token) })
        #expect(expired?.code == .changeTokenExpired)
        let databaseToken = try await production.publicCloudDatabase.databaseChanges(since: nil).changeToken
        let databaseExpired = stratusError(await caughtError { try await development.publicCloudDatabase.databaseChanges(since: databaseToken) })
        #expect(databaseExpired?.code == .changeTokenExpired)
    }
}

/// Record type schemas for the environment cases.
enum RecordTypeSchemaBuilder {
    /// `Measure`: NUMBER fields (INT64 and DOUBLE both fit) and encrypted ones.
    static func measure() throws -> RecordTypeSchema {
        RecordTypeSchema(recordType: "Measure", fields: [
            .init("amount", type: .int64, isNumber: true),
            .init("amounts", type: .int64List, isNumber: true),
            .init("more", type: .doubleList, isNumber: true),
            .init("pin", type: .string, isEncrypted: true),
            .init("label", type: .string),
        ])
    }
}
