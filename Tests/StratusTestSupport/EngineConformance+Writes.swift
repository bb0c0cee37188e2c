import Foundation
import Stratus
import Testing

// MARK: - System fields and keys

extension EngineConformance {
    static let systemFieldCases: [TestCase] = [
        TestCase("system fields: creation kept, modification and change tag renewed, users recorded", systemFieldsFollowSaves),
        TestCase("system fields: each version of a record is dated later than the one before, also saved within one millisecond", versionsAreDatedInOrder),
        TestCase("the field data limit counts each list element, empty ones too: a record at it is stored, one past it is limitExceeded", listElementsCountAgainstTheLimit),
        TestCase("changedKeys() and allKeys()", changedAndAllKeys),
        TestCase("a request that does not want the saved records still stores their system fields and reports each kind", savesWithoutSavedRecords),
        TestCase("a .changedKeys or .allKeys save of the values already stored is a new version, as each CloudKit save is; the same with a writeMode is unchanged", savePoliciesAlwaysWriteAVersion),
        TestCase("new records around an existing one and a repeated name: kinds in order, the last write wins, each change once; again, nothing changes", newRecordsInBulk),
        TestCase("a request of many replacements, deletions and new records among many declared indexes: every record, index and change as written one by one; an atomic one that fails leaves nothing", manyWritesAmongIndexes),
    ]

    static func listElementsCountAgainstTheLimit(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        // An empty element counts 1 byte: "l" and 999,999 empty strings are the limit; one more is past it.
        let within = makeRecord("Lists", "within", ["l": .stringList(Array(repeating: "", count: 999_999))])
        #expect(within.fieldDataSize == 1_000_000)
        _ = try await database.save(within)
        #expect(try await database.record(for: within.recordID).fieldValue(forKey: "l") == .stringList(Array(repeating: "", count: 999_999)))
        // A reference in a list counts its name and 4 bytes.
        for value: FieldValue in [.stringList(Array(repeating: "", count: 1_000_000)), .bytesList(Array(repeating: Data(), count: 1_000_000)),
                                  .referenceList(Array(repeating: Record.Reference(recordID: Record.ID(recordName: "a"), action: .none), count: 200_000))] {
            let past = makeRecord("Lists", "past", ["l": value])
            let refused = stratusError(await caughtError { try await database.save(past) })
            #expect(refused?.code == .limitExceeded, "\(past.fieldDataSize) bytes: \(String(describing: refused))")
        }
        #expect(try await TestDatabase.exists("past", in: database) == false)
    }

    static func versionsAreDatedInOrder(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        var record = try await database.save(makeRecord("Doc", "dated", ["v": .int64(0)]))
        var dates = [try #require(record.modificationDate)]
        for i in 1...20 {
            record["v"] = Int64(i)
            record = try await database.save(record)
            dates.append(try #require(record.modificationDate))
        }
        // The way a save that wants no record back takes, which writes without reading the stored record.
        for i in 21...30 {
            let fetched = try await database.record(for: record.recordID)
            fetched["v"] = Int64(i)
            #expect(try await TestDatabase.saveKinds([fetched], in: database, writeMode: .update, wantsSavedRecords: false) == [.updated])
            dates.append(try #require(try await database.record(for: record.recordID).modificationDate))
        }
        #expect(try await database.record(for: record.recordID).fieldValue(forKey: "v") == .int64(30))
        let outOfOrder = zip(dates, dates.dropFirst()).filter { $0 >= $1 }
        #expect(outOfOrder.isEmpty, "versions dated no later than the one before: \(outOfOrder)")
    }

    static func newRecordsInBulk(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        try await TestDatabase.save([makeRecord("Doc", "bulk-0040", ["v": .int64(-1)])], in: database)
        let start = try await database.recordZoneChanges(inZoneWith: .default, since: nil).changeToken
        // 100 records, one of them stored already, and "bulk-0070" written twice in between.
        var records = (0..<100).map { makeRecord("Doc", String(format: "bulk-%04d", $0), ["v": .int64(Int64($0))]) }
        records.insert(makeRecord("Doc", "bulk-0070", ["v": .int64(700)]), at: 75)
        let kinds = try await TestDatabase.saveKinds(records, in: database, writeMode: .forceUpdate)
        var expected = Array(repeating: RecordWriteKind.created, count: records.count)
        expected[40] = .updated
        expected[75] = .updated
        #expect(kinds == expected)
        #expect(try await database.record(for: Record.ID(recordName: "bulk-0070")).fieldValue(forKey: "v") == .int64(700))
        #expect(try await database.record(for: Record.ID(recordName: "bulk-0040")).fieldValue(forKey: "v") == .int64(40))
        let changes = try await database.recordZoneChanges(inZoneWith: .default, since: start)
        #expect(changes.modificationResultsByID.count == 100, "each record once, at its last write")
        #expect(try changes.modificationResultsByID[Record.ID(recordName: "bulk-0070")]?.get().record.fieldValue(forKey: "v") == .int64(700))

        // The stored records again (without the repeated name, whose two values take turns) are
        // all unchanged, and the zone's change token stays where it was.
        var stored = records
        stored.remove(at: 70)
        let again = try await TestDatabase.saveKinds(stored, in: database, writeMode: .forceUpdate)
        #expect(again == Array(repeating: .unchanged, count: stored.count))
        let after = try await database.recordZoneChanges(inZoneWith: .default, since: changes.changeToken)
        #expect(after.modificationResultsByID.isEmpty && after.deletions.isEmpty)
        #expect(after.changeToken == changes.changeToken, "a write that changes nothing leaves no change behind")
    }

    static func savesWithoutSavedRecords(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        let records = (0..<5).map { makeRecord("Doc", "quiet-\($0)", ["v": .int64(Int64($0))]) }
        let kinds = try await TestDatabase.saveKinds(records, in: database, writeMode: .forceUpdate, wantsSavedRecords: false)
        #expect(kinds == Array(repeating: .created, count: 5))
        for record in records {
            let stored = try await database.record(for: record.recordID)
            #expect(stored.recordChangeTag != nil && stored.creationDate != nil && stored.systemFields.creatorUserRecordID?.recordName == env.recordName(of: "alice"))
            #expect(stored.fieldValues == record.fieldValues)
        }
        // The same request again changes nothing, and says so.
        let again = try await TestDatabase.saveKinds(records, in: database, writeMode: .forceUpdate, wantsSavedRecords: false)
        #expect(again == Array(repeating: .unchanged, count: 5))
    }

    static func savePoliciesAlwaysWriteAVersion(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        let stored = try await database.save(makeRecord("Doc", "same", ["v": .int64(1)]))
        var tag = try #require(stored.recordChangeTag)
        var token = try await database.recordZoneChanges(inZoneWith: .default, since: nil).changeToken
        // Sync code re-sends a record object it built, not the one the store answered, holding
        // the stored values (CloudSync's upload buffer, ported in CloudKitStyleTests).
        for policy in [ModifyRecordsOperation.SavePolicy.changedKeys, .allKeys] {
            let results = try await database.modifyRecords(saving: [makeRecord("Doc", "same", ["v": .int64(1)])], deleting: [], savePolicy: policy)
            let saved = try #require(try results.saveResults[stored.recordID]?.get())
            #expect(saved.recordChangeTag != tag, "\(policy): a new change tag")
            #expect(try await database.record(for: stored.recordID).recordChangeTag == saved.recordChangeTag)
            let changes = try await database.recordZoneChanges(inZoneWith: .default, since: token)
            #expect(changes.modificationResultsByID.keys.map(\.recordName) == ["same"], "\(policy): a change other devices fetch")
            tag = try #require(saved.recordChangeTag)
            token = changes.changeToken
        }
        // An operation type (imports, `stratus update`) leaves such a record as it is.
        #expect(try await TestDatabase.saveKinds([makeRecord("Doc", "same", ["v": .int64(1)])], in: database, writeMode: .forceUpdate) == [.unchanged])
        #expect(try await database.record(for: stored.recordID).recordChangeTag == tag)
    }

    static func systemFieldsFollowSaves(_ env: Environment) async throws {
        let alice = env.container(user: "alice").publicCloudDatabase
        let bob = env.container(user: "bob").publicCloudDatabase
        // Every signed-in user may change a Doc (by default only its creator may).
        var doc = RecordTypeSchema(recordType: "Doc", grants: [.authenticated: [.create, .write], .world: .read])
        doc.addField("v", type: .int64)
        try await env.container().saveSchema(doc)
        let record = makeRecord("Doc", "doc-1", ["v": .int64(1)])
        #expect(record.creationDate == nil)
        #expect(record.recordChangeTag == nil)

        let first = try await alice.save(record)
        let created = try #require(first.creationDate)
        let modified1 = try #require(first.modificationDate)
        let tag1 = try #require(first.recordChangeTag)
        #expect(!tag1.isEmpty)
        #expect(modified1 >= created)
        #expect(first.systemFields.creatorUserRecordID?.recordName == env.recordName(of: "alice"))
        #expect(first.systemFields.lastModifiedUserRecordID?.recordName == env.recordName(of: "alice"))

        // A fetch returns exactly the system fields the save reported.
        let fetched1 = try await alice.record(for: record.recordID)
        #expect(fetched1.systemFields == first.systemFields)

        fetched1["v"] = 2
        let second = try await alice.save(fetched1)
        #expect(second.creationDate == created)
        let modified2 = try #require(second.modificationDate)
        #expect(modified2 > modified1)
        #expect(second.recordChangeTag != nil)
        #expect(second.recordChangeTag != tag1)
        #expect(second.systemFields.creatorUserRecordID?.recordName == env.recordName(of: "alice"))

        // Another user changes the public record: creator stays, last modifier changes.
        let seenByBob = try await bob.record(for: record.recordID)
        #expect(seenByBob.systemFields == second.systemFields)
        seenByBob["v"] = 3
        let third = try await bob.save(seenByBob)
        #expect(third.creationDate == created)
        #expect(third.modificationDate! > modified2)
        #expect(third.recordChangeTag != second.recordChangeTag)
        #expect(third.recordChangeTag != tag1)
        #expect(third.systemFields.creatorUserRecordID?.recordName == env.recordName(of: "alice"))
        #expect(third.systemFields.lastModifiedUserRecordID?.recordName == env.recordName(of: "bob"))
        // As CloudKit tells it, each caller reads themself as __defaultOwner__ and others by record name.
        #expect(first.creatorUserRecordID?.recordName == CurrentUserDefaultName && first.lastModifiedUserRecordID?.recordName == CurrentUserDefaultName)
        #expect(third.creatorUserRecordID?.recordName == env.recordName(of: "alice") && third.lastModifiedUserRecordID?.recordName == CurrentUserDefaultName)
        let final = try await alice.record(for: record.recordID)
        #expect(final.systemFields == third.systemFields)
        #expect(final.creatorUserRecordID?.recordName == CurrentUserDefaultName && final.lastModifiedUserRecordID?.recordName == env.recordName(of: "bob"))
        #expect(final.fieldValue(forKey: "v") == .int64(3))
    }

    static func changedAndAllKeys(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        let record = Record(recordType: "Keys", recordID: Record.ID(recordName: "keys"))
        #expect(record.changedKeys().isEmpty)
        #expect(record.allKeys().isEmpty)
        record["zeta"] = "z"
        record["alpha"] = 1
        record["mid"] = 2.5
        record["zeta"] = "z2"
        record["gone"] = "temporary"
        record["gone"] = nil
        #expect(record.changedKeys() == ["zeta", "alpha", "mid", "gone"])
        #expect(record.allKeys() == ["alpha", "mid", "zeta"])

        let saved = try await database.save(record)
        #expect(saved.changedKeys().isEmpty)
        #expect(saved.allKeys() == ["alpha", "mid", "zeta"])
        let fetched = try await database.record(for: record.recordID)
        #expect(fetched.changedKeys().isEmpty)
        #expect(fetched.allKeys() == ["alpha", "mid", "zeta"])
        #expect(fetched.fieldValue(forKey: "zeta") == .string("z2"))
        #expect(fetched.fieldValue(forKey: "gone") == nil)

        // Removing a key on a fetched record and saving removes it from the store.
        fetched["mid"] = nil
        fetched["beta"] = "b"
        #expect(fetched.changedKeys() == ["mid", "beta"])
        try await database.save(fetched)
        let again = try await database.record(for: record.recordID)
        #expect(again.allKeys() == ["alpha", "beta", "zeta"])
    }
}

// MARK: - Save policies

extension EngineConformance {
    static let savePolicyCases: [TestCase] = [
        TestCase("ifServerRecordUnchanged: a stale change tag conflicts with serverRecordChanged", staleChangeTagConflicts),
        TestCase("ifServerRecordUnchanged: a new record whose name exists conflicts", newRecordWithExistingNameConflicts),
        TestCase("changedKeys policy keeps the server's other keys", changedKeysPolicyMerges),
        TestCase("allKeys policy writes every key the record holds; keys only the store holds stay", allKeysPolicyWritesEveryKey),
    ]

    static func staleChangeTagConflicts(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        try await database.save(makeRecord("Doc", "doc", ["title": .string("original"), "n": .int64(1)]))
        let copyA = try await database.record(for: Record.ID(recordName: "doc"))
        let copyB = try await database.record(for: Record.ID(recordName: "doc"))
        copyA["title"] = "first"
        let savedA = try await database.save(copyA)

        copyB["title"] = "second"
        let results = try await database.modifyRecords(saving: [copyB], deleting: [], savePolicy: .ifServerRecordUnchanged)
        guard case .failure(let raw)? = results.saveResults[copyB.recordID] else {
            Issue.record("saving a record with a stale change tag must fail")
            return
        }
        let error = try #require(raw as? StratusError)
        #expect(error.code == .serverRecordChanged)
        #expect(error.recordID == copyB.recordID)
        let server = try #require(error.serverRecord)
        #expect(server.recordChangeTag == savedA.recordChangeTag)
        #expect(server["title"] as? String == "first")
        #expect(server.fieldValue(forKey: "n") == .int64(1))
        let client = try #require(error.clientRecord)
        #expect(client["title"] as? String == "second")
        #expect(client.recordChangeTag == copyB.recordChangeTag)

        let stored = try await database.record(for: copyA.recordID)
        #expect(stored["title"] as? String == "first")
        #expect(stored.recordChangeTag == savedA.recordChangeTag)

        // The usual fix: take the server record, apply the change, save it.
        server["title"] = "second"
        let merged = try await database.save(server)
        #expect(merged["title"] as? String == "second")
        // The convenience save throws the item's error: copyA's tag is stale now too.
        let staleError = await caughtError { try await database.save(copyA) }
        #expect(stratusError(staleError)?.code == .serverRecordChanged)
        #expect(try await database.record(for: copyA.recordID)["title"] as? String == "second")
    }

    static func newRecordWithExistingNameConflicts(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        try await database.save(makeRecord("Doc", "taken", ["title": .string("server")]))
        let newcomer = makeRecord("Doc", "taken", ["title": .string("client")])
        let error = await caughtError { try await database.save(newcomer) }
        let stratus = try #require(stratusError(error), "saving a new record over an existing one must fail")
        #expect(stratus.code == .serverRecordChanged)
        #expect(stratus.serverRecord?["title"] as? String == "server")
        #expect(stratus.clientRecord?["title"] as? String == "client")
        let stored = try await database.record(for: newcomer.recordID)
        #expect(stored["title"] as? String == "server")
    }

    static func changedKeysPolicyMerges(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        let original = try await database.save(makeRecord("Doc", "merge", ["a": .int64(1), "b": .int64(2), "c": .string("keep")]))
        // A fresh record (no change tag) with only some keys changed; no conflict check.
        let partial = makeRecord("Doc", "merge", ["a": .int64(10), "d": .string("new")])
        partial["c"] = nil
        let results = try await database.modifyRecords(saving: [partial], deleting: [], savePolicy: .changedKeys)
        let saved = try #require(try results.saveResults[partial.recordID]?.get())
        #expect(saved.fieldValues == ["a": .int64(10), "b": .int64(2), "d": .string("new")])
        #expect(saved.recordChangeTag != original.recordChangeTag)
        #expect(saved.creationDate == original.creationDate)
        let stored = try await database.record(for: partial.recordID)
        #expect(stored.fieldValues == ["a": .int64(10), "b": .int64(2), "d": .string("new")])

        // A stale copy also saves under changedKeys, changing only its changed keys.
        let stale = try await database.record(for: partial.recordID)
        let other = try await database.record(for: partial.recordID)
        other["b"] = 20
        try await database.save(other)
        stale["a"] = 100
        let second = try await database.modifyRecords(saving: [stale], deleting: [], savePolicy: .changedKeys)
        #expect(errorCode(second.saveResults[stale.recordID]) == nil)
        let merged = try await database.record(for: partial.recordID)
        #expect(merged.fieldValues == ["a": .int64(100), "b": .int64(20), "d": .string("new")])
    }

    /// CloudKit's `.allKeys`: every key the record holds is written, changed or not; keys only
    /// the server holds stay ("Keys present only on the server remain unchanged").
    static func allKeysPolicyWritesEveryKey(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        let original = try await database.save(makeRecord("Doc", "replace", ["a": .int64(1), "b": .int64(2)]))
        let replacement = makeRecord("Doc", "replace", ["a": .int64(10), "z": .string("only")])
        let results = try await database.modifyRecords(saving: [replacement], deleting: [], savePolicy: .allKeys)
        let saved = try #require(try results.saveResults[replacement.recordID]?.get())
        #expect(saved.fieldValues == ["a": .int64(10), "b": .int64(2), "z": .string("only")])
        #expect(saved.creationDate == original.creationDate)
        let stored = try await database.record(for: replacement.recordID)
        #expect(stored.fieldValues == ["a": .int64(10), "b": .int64(2), "z": .string("only")])
        #expect(stored.systemFields.creatorUserRecordID == original.systemFields.creatorUserRecordID)

        // A copy fetched with desiredKeys writes the keys it holds, unchanged ones too, over newer
        // values; it removes what it removed; the keys it did not fetch stay.
        let partial = try #require(try await database.records(for: [replacement.recordID], desiredKeys: ["a", "z"])[replacement.recordID]?.get())
        let newer = try await database.record(for: replacement.recordID)
        newer["a"] = Int64(11)
        newer["b"] = Int64(20)
        _ = try await database.save(newer)
        partial["z"] = nil
        let again = try await database.modifyRecords(saving: [partial], deleting: [], savePolicy: .allKeys)
        #expect((try? again.saveResults[partial.recordID]?.get()) != nil)
        #expect(try await database.record(for: partial.recordID).fieldValues == ["a": .int64(10), "b": .int64(20)])
    }
}

// MARK: - Atomic and non-atomic batches

extension EngineConformance {
    static let batchCases: [TestCase] = [
        TestCase("atomic batch with an invalid record writes nothing", atomicBatchWithInvalidRecord),
        TestCase("atomic batch with a conflicting record writes and deletes nothing", atomicBatchWithConflict),
        TestCase("non-atomic batch writes the other records and reports partialFailure", nonAtomicBatch),
        TestCase("stored records saved again as an import saves them (forceReplace): unchanged ones write nothing, changed ones are replaced, each one change in order; a name deleted earlier leaves no tombstone once saved again", replacingStoredRecordsInBulk),
    ]

    static func replacingStoredRecordsInBulk(_ env: Environment) async throws {
        let database = env.container().privateCloudDatabase
        let zone = RecordZone.ID(zoneName: "Rerun")
        _ = try await database.modifyRecordZones(saving: [RecordZone(zoneID: zone)], deleting: [])
        func records(_ title: (Int) -> String) -> [Record] {
            makeRecords("Row", count: 1_200, prefix: "row", zoneID: zone) { ["title": .string(title($0)), "n": .int64(Int64($0))] }
        }
        func save(_ records: [Record]) async throws -> [Record.ID: RecordWriteKind] {
            let operation = ModifyRecordsOperation(recordsToSave: records)
            operation.writeMode = .forceReplace
            operation.isAtomic = false
            let kinds = Box<[Record.ID: RecordWriteKind]>([:])
            operation.perRecordWriteKindBlock = { id, kind in kinds.value[id] = kind }
            let final = Box<Result<Void, any Error>?>(nil)
            operation.modifyRecordsResultBlock = { final.value = $0 }
            await run(operation, on: database)
            if case .failure(let error)? = final.value { Issue.record("\(error)") }
            return kinds.value
        }
        func changes(since start: ServerChangeToken?) async throws -> (names: [String], deleted: [String], end: ServerChangeToken?) {
            var token = start, more = true, names: [String] = [], deleted: [String] = []
            while more {
                let batch = try await database.recordZoneChanges(inZoneWith: zone, since: token, resultsLimit: 300)
                names += batch.modificationResultsByID.keys.map(\.recordName)
                deleted += batch.deletions.map(\.recordID.recordName)
                token = batch.changeToken
                more = batch.moreComing
            }
            return (names, deleted, token)
        }
        // Row 7 is deleted first: its tombstone must go when it is saved again.
        _ = try await save(records { "first \($0)" })
        _ = try await database.modifyRecords(saving: [], deleting: [Record.ID(recordName: recordName("row", 7), zoneID: zone)])
        let afterFirst = try await changes(since: nil)
        #expect(afterFirst.deleted == [recordName("row", 7)])

        let unchanged = try await save(records { "first \($0)" })
        #expect(unchanged.count == 1_200)
        #expect(unchanged.filter { $0.value != .unchanged }.map(\.key.recordName) == [recordName("row", 7)], "only the deleted row is written again")
        let afterUnchanged = try await changes(since: afterFirst.end)
        #expect(afterUnchanged.names == [recordName("row", 7)] && afterUnchanged.deleted.isEmpty)

        // Every other row changed: each replaced, each one change.
        let changed = try await save(records { $0 % 2 == 0 ? "second \($0)" : "first \($0)" })
        #expect(changed.filter { $0.value != .unchanged }.count == 600)
        let afterChanged = try await changes(since: afterUnchanged.end)
        #expect(Set(afterChanged.names) == Set((0..<1_200).filter { $0 % 2 == 0 }.map { recordName("row", $0) }) && afterChanged.names.count == 600)
        #expect(afterChanged.deleted.isEmpty)
        let stored = try await TestDatabase.queryAll(Query(recordType: "Row"), in: database, zoneID: zone)
        #expect(stored.count == 1_200)
        for record in stored {
            let number = Int(record.recordID.recordName.dropFirst(4))!
            #expect(record["title"] as? String == (number % 2 == 0 ? "second \(number)" : "first \(number)"), "\(record.recordID.recordName)")
        }
        // The whole history, read again from the start, names each row once and no deletion.
        let history = try await changes(since: nil)
        #expect(history.names.count == 1_200 && Set(history.names).count == 1_200 && history.deleted.isEmpty)
    }

    /// What a ``ModifyRecordsOperation`` reported.
    struct ModifyReport: Sendable {
        var saves: [Record.ID: Result<Record, any Error>] = [:]
        var deletes: [Record.ID: Result<Void, any Error>] = [:]
        var final: Result<Void, any Error>?
    }

    static func modify(_ database: Database, saving: [Record], deleting: [Record.ID] = [], atomic: Bool, policy: ModifyRecordsOperation.SavePolicy = .ifServerRecordUnchanged) async -> ModifyReport {
        let report = Box(ModifyReport())
        let op = ModifyRecordsOperation(recordsToSave: saving, recordIDsToDelete: deleting)
        op.isAtomic = atomic
        op.savePolicy = policy
        op.perRecordSaveBlock = { id, result in report.update { $0.saves[id] = result } }
        op.perRecordDeleteBlock = { id, result in report.update { $0.deletes[id] = result } }
        op.modifyRecordsResultBlock = { result in report.update { $0.final = result } }
        await run(op, on: database)
        return report.value
    }

    /// A custom zone, which has the atomic capability (the default zone has not, as CloudKit's).
    static func atomicZone(in database: Database) async throws -> RecordZone.ID {
        try await database.save(RecordZone(zoneName: "Atomic")).zoneID
    }

    static func atomicBatchWithInvalidRecord(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        let zone = try await atomicZone(in: database)
        let good1 = makeRecord("Item", "good-1", zoneID: zone, ["n": .int64(1)])
        let bad = makeRecord("Item", "_bad", zoneID: zone, ["n": .int64(2)])
        let good2 = makeRecord("Item", "good-2", zoneID: zone, ["n": .int64(3)])
        let report = await modify(database, saving: [good1, bad, good2], atomic: true)
        #expect(errorCode(report.saves[bad.recordID]) == .invalidArguments)
        #expect(errorCode(report.saves[good1.recordID]) == .batchRequestFailed)
        #expect(errorCode(report.saves[good2.recordID]) == .batchRequestFailed)
        #expect(report.saves.count == 3)
        let final = stratusError(report.final.flatMap { if case .failure(let e) = $0 { e } else { nil } })
        #expect(final?.code == .partialFailure)
        #expect(final?.partialErrorsByRecordID[bad.recordID]?.code == .invalidArguments)
        for name in ["good-1", "good-2", "_bad"] {
            #expect(try await TestDatabase.exists(name, zoneID: zone, in: database) == false, "\(name) must not be written")
        }
    }

    static func atomicBatchWithConflict(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        let zone = try await atomicZone(in: database)
        try await TestDatabase.save([makeRecord("Item", "existing", zoneID: zone, ["n": .int64(0)]), makeRecord("Item", "victim", zoneID: zone, ["n": .int64(0)])], in: database)
        let new1 = makeRecord("Item", "new-1", zoneID: zone, ["n": .int64(1)])
        let conflicting = makeRecord("Item", "existing", zoneID: zone, ["n": .int64(99)])   // no change tag: conflicts
        let new2 = makeRecord("Item", "new-2", zoneID: zone, ["n": .int64(2)])
        let victim = Record.ID(recordName: "victim", zoneID: zone)
        let report = await modify(database, saving: [new1, conflicting, new2], deleting: [victim], atomic: true)
        #expect(errorCode(report.saves[conflicting.recordID]) == .serverRecordChanged)
        #expect(errorCode(report.saves[new1.recordID]) == .batchRequestFailed)
        #expect(errorCode(report.saves[new2.recordID]) == .batchRequestFailed)
        #expect(errorCode(report.deletes[victim]) == .batchRequestFailed)
        let final = stratusError(report.final.flatMap { if case .failure(let e) = $0 { e } else { nil } })
        #expect(final?.code == .partialFailure)
        #expect(final?.partialErrorsByRecordID[conflicting.recordID]?.code == .serverRecordChanged)
        #expect(try await TestDatabase.exists("new-1", zoneID: zone, in: database) == false)
        #expect(try await TestDatabase.exists("new-2", zoneID: zone, in: database) == false)
        #expect(try await TestDatabase.exists("victim", zoneID: zone, in: database) == true)
        #expect(try await database.record(for: conflicting.recordID).fieldValue(forKey: "n") == .int64(0))
    }

    static func nonAtomicBatch(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        try await TestDatabase.save([makeRecord("Item", "existing", ["n": .int64(0)]), makeRecord("Item", "victim", ["n": .int64(0)])], in: database)
        let good1 = makeRecord("Item", "good-1", ["n": .int64(1)])
        let invalid = makeRecord("Item", "bad name with spaces é", ["n": .int64(2)])
        let conflicting = makeRecord("Item", "existing", ["n": .int64(99)])
        let good2 = makeRecord("Item", "good-2", ["n": .int64(3)])
        let victim = Record.ID(recordName: "victim")
        let report = await modify(database, saving: [good1, invalid, conflicting, good2], deleting: [victim], atomic: false)
        #expect(errorCode(report.saves[invalid.recordID]) == .invalidArguments)
        #expect(errorCode(report.saves[conflicting.recordID]) == .serverRecordChanged)
        #expect((try? report.saves[good1.recordID]?.get())?.fieldValue(forKey: "n") == .int64(1))
        #expect((try? report.saves[good2.recordID]?.get())?.fieldValue(forKey: "n") == .int64(3))
        #expect(errorCode(report.deletes[victim]) == nil && report.deletes[victim] != nil)
        let final = stratusError(report.final.flatMap { if case .failure(let e) = $0 { e } else { nil } })
        #expect(final?.code == .partialFailure)
        #expect(Set(final?.partialErrorsByRecordID.keys.map { $0 } ?? []) == [invalid.recordID, conflicting.recordID])
        #expect(try await TestDatabase.exists("good-1", in: database))
        #expect(try await TestDatabase.exists("good-2", in: database))
        #expect(try await TestDatabase.exists("victim", in: database) == false)
        #expect(try await database.record(for: conflicting.recordID).fieldValue(forKey: "n") == .int64(0))
    }
}

// MARK: - Validation

extension EngineConformance {
    static let validationCases: [TestCase] = [
        TestCase("bad record names are invalidArguments and nothing is stored", badRecordNames),
        TestCase("bad and reserved field keys are invalidArguments and nothing is stored", badFieldKeys),
        TestCase("bad record types are invalidArguments and nothing is stored", badRecordTypes),
        TestCase("a record name of megabytes is refused with a message that shows its start, not all of it", hugeRecordNameIsShownShort),
        TestCase("an IN list past the most values a predicate may hold is invalidArguments on every engine; one at the limit runs", longInListsAreRefusedAlike),
    ]

    static func hugeRecordNameIsShownShort(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        let record = Record(recordType: "Doc", recordID: Record.ID(recordName: String(repeating: "n", count: 1_000_000)))
        let refused = stratusError(await caughtError { try await database.save(record) })
        #expect(refused?.code == .invalidArguments)
        #expect((refused?.message.utf8.count ?? .max) < 1_000, "\(refused?.message.prefix(200) ?? "no error")")
    }

    static func longInListsAreRefusedAlike(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        try await TestDatabase.save([makeRecord("Doc", "in-1", ["n": .int64(7)])], in: database)
        let atLimit = Query(recordType: "Doc", predicate: try QueryPredicate(format: "n IN %@", (0..<Int64(QueryPredicate.maximumValues)).map { $0 }))
        #expect(try await TestDatabase.queryAll(atLimit, in: database).map(\.recordID.recordName) == ["in-1"])
        let past = Query(recordType: "Doc", predicate: try QueryPredicate(format: "n IN %@", (0...Int64(QueryPredicate.maximumValues)).map { $0 }))
        let refused = stratusError(await caughtError { try await TestDatabase.queryAll(past, in: database) })
        #expect(refused?.code == .invalidArguments && refused?.message.contains("30000") == true, "\(String(describing: refused))")
    }

    /// Saves each record alone and expects `invalidArguments` and nothing stored.
    static func expectRejected(_ records: [Record], _ database: Database, _ what: String) async throws {
        for record in records {
            let results = try await database.modifyRecords(saving: [record], deleting: [])
            #expect(errorCode(results.saveResults[record.recordID]) == .invalidArguments, "\(what): '\(record.recordID.recordName.prefix(40))' type '\(record.recordType)' keys \(record.allKeys())")
            let error = await caughtError { try await database.save(record) }
            #expect(stratusError(error)?.code == .invalidArguments, "\(what): convenience save")
            let fetched = try await database.records(for: [record.recordID])
            // A name that could never be stored is refused when fetched too; either way, nothing came back.
            #expect([.unknownItem, .invalidArguments].contains(errorCode(fetched[record.recordID])), "\(what): nothing stored")
        }
    }

    static func badRecordNames(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        let names = ["héllo", "日本", "emoji-👍", String(repeating: "a", count: 256), "_leading", "_defaultZone", ""]
        try await expectRejected(names.map { makeRecord("Item", $0, ["n": .int64(1)]) }, database, "record name")
        // The limits themselves are fine.
        let longest = String(repeating: "b", count: 255)
        let okNames = [longest, "a_leading_letter", "with space and ~!@#$%^&*()", "trailing_", "0-digits-first"]
        try await TestDatabase.save(okNames.map { makeRecord("Item", $0, ["n": .int64(1)]) }, in: database)
        for name in okNames { #expect(try await TestDatabase.exists(name, in: database), "'\(name.prefix(20))' is a valid name") }
    }

    static func badFieldKeys(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        let keys = ["1starts_with_digit", "_underscore", "has space", "dash-key", "dot.key", "ümlaut", "", String(repeating: "k", count: 256)]
            + ["recordName", "recordID", "recordType", "creationDate", "modificationDate", "creatorUserRecordID", "lastModifiedUserRecordID", "recordChangeTag",
               "encryptedValues", Record.SystemFieldKey.parent, Record.SystemFieldKey.share]
        let records = keys.enumerated().map { index, key in makeRecord("Item", "bad-key-\(index)", [key: .int64(1), "fine": .int64(2)]) }
        try await expectRejected(records, database, "field key")
        // CloudKit's keys for the parent and share are ___parent and ___share: parent and share are fields.
        try await TestDatabase.save([makeRecord("Item", "good-keys", ["a": .int64(1), "a_1_B": .int64(2), "Z9": .int64(3), "parent": .int64(4), "share": .int64(5)])], in: database)
        let good = try await database.record(for: Record.ID(recordName: "good-keys"))
        #expect(good.allKeys() == ["Z9", "a", "a_1_B", "parent", "share"] && good.parent == nil && good.share == nil)
    }

    static func badRecordTypes(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        let types = ["", "9Type", "_Type", "Bad Type", "Bad-Type", "Typé", String(repeating: "T", count: 256)]
        let records = types.enumerated().map { index, type in makeRecord(type, "bad-type-\(index)", ["n": .int64(1)]) }
        try await expectRejected(records, database, "record type")
    }
}

// MARK: - Fetch and delete

extension EngineConformance {
    static let fetchAndDeleteCases: [TestCase] = [
        TestCase("fetching a missing ID fails only that ID with unknownItem", fetchMissingID),
        TestCase("deleting a missing record succeeds", deleteMissingRecord),
        TestCase(".deleteSelf cascades through a chain A <- B <- C", deleteSelfCascades),
    ]

    static func fetchMissingID(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        try await TestDatabase.save([makeRecord("Item", "a", ["n": .int64(1)]), makeRecord("Item", "b", ["n": .int64(2)])], in: database)
        let ids = ["a", "missing", "b"].map { Record.ID(recordName: $0) }
        let items = Box<[(Record.ID, Result<Record, any Error>)]>([])
        let final = Box<Result<Void, any Error>?>(nil)
        let op = FetchRecordsOperation(recordIDs: ids)
        op.perRecordResultBlock = { id, result in items.update { $0.append((id, result)) } }
        op.fetchRecordsResultBlock = { result in final.value = result }
        await run(op, on: database)
        let results = Dictionary(items.value, uniquingKeysWith: { a, _ in a })
        #expect(items.value.count == 3)
        #expect((try? results[ids[0]]?.get())?.fieldValue(forKey: "n") == .int64(1))
        #expect((try? results[ids[2]]?.get())?.fieldValue(forKey: "n") == .int64(2))
        #expect(errorCode(results[ids[1]]) == .unknownItem)
        let error = stratusError(final.value.flatMap { if case .failure(let e) = $0 { e } else { nil } })
        #expect(error?.code == .partialFailure)
        #expect(error?.partialErrorsByRecordID.count == 1)
        #expect(error?.partialErrorsByRecordID[ids[1]]?.code == .unknownItem)
        // The convenience call throws unknownItem for one missing record.
        let thrown = await caughtError { try await database.record(for: ids[1]) }
        #expect(stratusError(thrown)?.code == .unknownItem)
    }

    static func deleteMissingRecord(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        let missing = Record.ID(recordName: "never-existed")
        #expect(try await database.deleteRecord(withID: missing) == missing)
        let results = try await database.modifyRecords(saving: [], deleting: [missing])
        #expect(results.deleteResults[missing] != nil)
        #expect(errorCode(results.deleteResults[missing]) == nil)

        try await database.save(makeRecord("Item", "present", ["n": .int64(1)]))
        #expect(try await database.deleteRecord(withID: Record.ID(recordName: "present")) == Record.ID(recordName: "present"))
        #expect(try await TestDatabase.exists("present", in: database) == false)
        // Deleting twice is fine too.
        #expect(try await database.deleteRecord(withID: Record.ID(recordName: "present")) == Record.ID(recordName: "present"))
    }

    static func deleteSelfCascades(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        try await TestDatabase.save([
            makeRecord("Node", "A"),
            makeRecord("Node", "B", ["up": .reference(reference("A", .deleteSelf))]),
            makeRecord("Node", "C", ["up": .reference(reference("B", .deleteSelf))]),
            makeRecord("Node", "D", ["up": .reference(reference("A", .none))]),
            makeRecord("Node", "E", ["ups": .referenceList([reference("X", .none), reference("A", .deleteSelf)])]),
            makeRecord("Node", "X"),
            makeRecord("Node", "F", ["up": .reference(reference("X", .deleteSelf))]),
        ], in: database)
        // Re-saving C (another field changed) keeps its cascade.
        let c = try await database.record(for: Record.ID(recordName: "C"))
        c["note"] = "re-saved"
        try await database.save(c)

        let results = try await database.modifyRecords(saving: [], deleting: [Record.ID(recordName: "A")])
        #expect(errorCode(results.deleteResults[Record.ID(recordName: "A")]) == nil)
        for name in ["A", "B", "C", "E"] {
            #expect(try await TestDatabase.exists(name, in: database) == false, "\(name) must be deleted")
        }
        for name in ["D", "X", "F"] {
            #expect(try await TestDatabase.exists(name, in: database), "\(name) must remain")
        }
        let d = try await database.record(for: Record.ID(recordName: "D"))
        #expect((d["up"] as? Record.Reference)?.recordID.recordName == "A")

        // A reference changed away from .deleteSelf no longer cascades.
        let f = try await database.record(for: Record.ID(recordName: "F"))
        f["up"] = reference("X", .none)
        try await database.save(f)
        try await database.deleteRecord(withID: Record.ID(recordName: "X"))
        #expect(try await TestDatabase.exists("F", in: database))
    }
}

extension EngineConformance {
    /// One request that replaces, deletes and creates more records than one statement of an
    /// engine writes (engines may write a transaction's rows in groups), in a container whose
    /// schemas declare indexes of other types too: what each record, each index and the change
    /// feed hold is what writing the items one by one gives; an atomic request whose last item
    /// fails writes none of them.
    /// Declares twelve types with indexed fields and the type `Many`, its `n` queryable and
    /// sortable and its `label` queryable (and any `unindexed` fields): every write of `Many`
    /// then passes the indexes of thirteen types.
    static func declareManyIndexedTypes(in container: Container, unindexed: [String: FieldType] = [:]) async throws {
        for number in 0..<12 {
            var other = RecordTypeSchema(recordType: "Other\(number)")
            other.addField("v", type: .int64, indexes: [.queryable, .sortable])
            try await container.saveSchema(other)
        }
        var schema = RecordTypeSchema(recordType: "Many")
        schema.addField("n", type: .int64, indexes: [.queryable, .sortable])
        schema.addField("label", type: .string, indexes: [.queryable])
        for (name, type) in unindexed { schema.addField(name, type: type) }
        try await container.saveSchema(schema)
    }

    static func manyWritesAmongIndexes(_ env: Environment) async throws {
        let container = env.container()
        try await declareManyIndexedTypes(in: container)
        let database = container.publicCloudDatabase
        let zone = try await atomicZone(in: database)
        func name(_ number: Int) -> String { String(format: "m-%03d", number) }
        func record(_ number: Int, n: Int64, label: String) -> Record {
            makeRecord("Many", name(number), zoneID: zone, ["n": .int64(n), "label": .string(label)])
        }
        try await TestDatabase.save((0..<100).map { record($0, n: Int64($0), label: "old") }, in: database)
        let start = try await database.recordZoneChanges(inZoneWith: zone, since: nil).changeToken

        // 0..<50 replaced (n descending, so every index entry moves), 50..<95 deleted,
        // 100..<140 created; 95..<100 stay.
        var expected: [Int: (n: Int64, label: String)] = [:]
        for number in 95..<100 { expected[number] = (Int64(number), "old") }
        let replacements = (0..<50).map { number in
            expected[number] = (Int64(1_000 - number), "new")
            return record(number, n: Int64(1_000 - number), label: "new")
        }
        let creations = (100..<140).map { number in
            expected[number] = (Int64(number), number % 2 == 0 ? "new" : "old")
            return record(number, n: Int64(number), label: number % 2 == 0 ? "new" : "old")
        }
        let deletions = (50..<95).map { Record.ID(recordName: name($0), zoneID: zone) }
        let report = await modify(database, saving: replacements + creations, deleting: deletions, atomic: false, policy: .allKeys)
        #expect(report.saves.count == 90 && report.saves.values.allSatisfy { if case .success = $0 { true } else { false } })
        #expect(report.deletes.count == 45 && report.deletes.values.allSatisfy { if case .success = $0 { true } else { false } })

        func expectStored(_ expected: [Int: (n: Int64, label: String)], _ context: String) async throws {
            let sorted = Query(recordType: "Many", predicate: try QueryPredicate(format: "n >= 0"))
            sorted.sortDescriptors = [RecordSortDescriptor(key: "n")]
            let byN = try await TestDatabase.queryAll(sorted, in: database, zoneID: zone, pageSize: 37)
            let wanted = expected.sorted { $0.value.n < $1.value.n }.map { name($0.key) }
            expectSameOrder(TestDatabase.names(byN), wanted, "\(context): sorted by the indexed n")
            for label in ["new", "old"] {
                let matching = try await TestDatabase.queryAll(Query(recordType: "Many", predicate: try QueryPredicate(format: "label == %@", argumentArray: [label])), in: database, zoneID: zone)
                #expect(Set(TestDatabase.names(matching)) == Set(expected.filter { $0.value.label == label }.map { name($0.key) }), "\(context): label == \(label)")
            }
            for number in 0..<140 {
                let stored = try await TestDatabase.fetch(name(number), zoneID: zone, in: database)
                #expect(stored?.fieldValue(forKey: "n") == expected[number].map { .int64($0.n) }, "\(context): \(name(number))")
            }
        }
        try await expectStored(expected, "after the request")
        let changes = try await database.recordZoneChanges(inZoneWith: zone, since: start)
        #expect(Set(changes.modificationResultsByID.keys.map(\.recordName)) == Set((0..<50).map(name) + (100..<140).map(name)))
        #expect(Set(changes.deletions.map(\.recordID.recordName)) == Set((50..<95).map(name)))

        // An atomic request of the same shape whose last save fails inside the transaction (its
        // parent is missing) writes nothing.
        let orphan = record(140, n: -1, label: "again")
        orphan.parent = Record.Reference(recordID: Record.ID(recordName: "missing", zoneID: zone), action: .none)
        let again = (0..<50).map { record($0, n: -1, label: "again") } + [orphan]
        let failed = await modify(database, saving: again, deleting: (100..<140).map { Record.ID(recordName: name($0), zoneID: zone) }, atomic: true, policy: .allKeys)
        #expect(errorCode(failed.saves[orphan.recordID]) != nil && errorCode(failed.saves[orphan.recordID]) != .batchRequestFailed)
        #expect(errorCode(failed.saves[Record.ID(recordName: name(0), zoneID: zone)]) == .batchRequestFailed)
        #expect(errorCode(failed.deletes[Record.ID(recordName: name(100), zoneID: zone)]) == .batchRequestFailed)
        try await expectStored(expected, "after the failed atomic request")
    }
}
