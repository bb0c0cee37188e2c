import Foundation
import Stratus
import Testing

// MARK: - Saves that want no saved records back: what the store keeps of a fetched record

extension EngineConformance {
    /// Saves whose caller wants no saved record back (a pipeline's save stage, a bulk update)
    /// may be written without the stored record being read first; what they store and report
    /// must be exactly what a save that reads it stores and reports.
    static let quietSaveCases: [TestCase] = [
        TestCase("a quiet save of a record fetched with desiredKeys merges its changes: fields not fetched are kept, a removed key is removed", quietSaveMergesChanges),
        TestCase("a quiet save of a record changed since it was read is serverRecordChanged with the server's record; one deleted since is unknownItem", quietSaveDetectsConcurrentChanges),
        TestCase("a quiet save in the public database: only the creator changes a record whose type lets creators write", quietSaveFollowsRoles),
        TestCase("a quiet save keeps a record's parent, encrypted values and .deleteSelf references true", quietSaveKeepsWhatItDidNotFetch),
        TestCase("a quiet save checks the merged size, grows the type in development and keeps searched words true", quietSaveChecksTheMergedRecord),
        TestCase("the last modifier through every way of saving: reads, equality and sorts name the creator until another user saves, and the creator again after", lastModifierEveryWay),
        TestCase("a request of many quiet saves among many declared indexes, some stale: every record, index and change as saved one by one; an atomic one with a stale record leaves nothing", quietSavesAmongIndexes),
    ]

    /// Saves `records` with an operation that has no per-record block: answers each failed
    /// record's error (from the final `partialFailure`).
    private static func quietSave(_ records: [Record], in database: Database, writeMode: RecordWriteMode? = nil, atomic: Bool = false) async throws -> [Record.ID: StratusError] {
        let operation = ModifyRecordsOperation(recordsToSave: records)
        if let writeMode { operation.writeMode = writeMode }
        operation.isAtomic = atomic
        let final = Box<Result<Void, any Error>?>(nil)
        operation.modifyRecordsResultBlock = { final.value = $0 }
        await run(operation, on: database)
        guard case .failure(let error)? = final.value else { return [:] }
        let stratus = try #require(stratusError(error), "\(error)")
        guard stratus.code == .partialFailure else { throw stratus }
        return stratus.partialErrorsByRecordID
    }

    private static func fetched(_ name: String, desiredKeys: [String]? = nil, zoneID: RecordZone.ID = .default, in database: Database) async throws -> Record {
        let id = Record.ID(recordName: name, zoneID: zoneID)
        return try #require(try await database.records(for: [id], desiredKeys: desiredKeys)[id]).get()
    }

    static func quietSaveMergesChanges(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        let original = try await database.save(makeRecord("Doc", "merge", ["a": .int64(1), "b": .string("bee"), "c": .double(2.5), "d": .stringList(["x", "y"])]))
        let start = try await database.recordZoneChanges(inZoneWith: .default, since: nil).changeToken

        let partial = try await fetched("merge", desiredKeys: ["a", "b"], in: database)
        #expect(partial.allKeys() == ["a", "b"])
        partial["a"] = Int64(2)
        partial["b"] = nil
        #expect(try await quietSave([partial], in: database).isEmpty)

        let stored = try await fetched("merge", in: database)
        #expect(stored.fieldValues == ["a": .int64(2), "c": .double(2.5), "d": .stringList(["x", "y"])])
        #expect(stored.recordChangeTag != nil && stored.recordChangeTag != original.recordChangeTag)
        #expect(stored.creationDate == original.creationDate && stored.systemFields.creatorUserRecordID == original.systemFields.creatorUserRecordID)
        #expect(stored.modificationDate! >= original.modificationDate!)
        #expect(stored.systemFields.lastModifiedUserRecordID?.recordName == env.recordName(of: "alice"))
        let changes = try await database.recordZoneChanges(inZoneWith: .default, since: start)
        #expect(Array(changes.modificationResultsByID.keys) == [stored.recordID], "the save is one change of the zone")
        #expect(try changes.modificationResultsByID[stored.recordID]?.get().record.recordChangeTag == stored.recordChangeTag)

        // The update mode merges alike, a field not stored before is added; a record fetched
        // whole and saved unchanged gets a new tag only.
        let whole = try await fetched("merge", in: database)
        whole["c"] = 3.5
        whole["b"] = "bee again"
        #expect(try await quietSave([whole], in: database, writeMode: .update).isEmpty)
        let untouched = try await fetched("merge", in: database)
        #expect(try await quietSave([untouched], in: database).isEmpty)
        let last = try await fetched("merge", in: database)
        #expect(last.fieldValues == ["a": .int64(2), "b": .string("bee again"), "c": .double(3.5), "d": .stringList(["x", "y"])])
        #expect(last.recordChangeTag != untouched.recordChangeTag)
    }

    static func quietSaveDetectsConcurrentChanges(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        try await TestDatabase.save([makeRecord("Doc", "raced", ["n": .int64(1), "keep": .string("k")]), makeRecord("Doc", "gone", ["n": .int64(1)])], in: database)
        let stale = try await fetched("raced", desiredKeys: ["n"], in: database)
        let doomed = try await fetched("gone", in: database)
        // Someone else changes one record and deletes the other between the read and the save.
        let other = try await fetched("raced", in: database)
        other["n"] = Int64(10)
        let winner = try await database.save(other)
        _ = try await database.deleteRecord(withID: doomed.recordID)

        stale["n"] = Int64(2)
        doomed["n"] = Int64(2)
        // In one request, next to a save that succeeds.
        let fine = try await fetched("raced", in: database)
        let freshName = makeRecord("Doc", "fresh", ["n": .int64(5)])
        let errors = try await quietSave([stale, doomed, freshName], in: database)
        #expect(Set(errors.keys) == [stale.recordID, doomed.recordID])
        let conflict = try #require(errors[stale.recordID])
        #expect(conflict.code == .serverRecordChanged)
        #expect(conflict.serverRecord?.recordChangeTag == winner.recordChangeTag)
        #expect(conflict.serverRecord?.fieldValue(forKey: "n") == .int64(10))
        #expect(conflict.clientRecord?.fieldValue(forKey: "n") == .int64(2))
        #expect(errors[doomed.recordID]?.code == .unknownItem)
        let stored = try await fetched("raced", in: database)
        #expect(stored.fieldValues == ["n": .int64(10), "keep": .string("k")] && stored.recordChangeTag == winner.recordChangeTag)
        #expect(try await TestDatabase.fetch("gone", in: database) == nil, "a stale save does not bring a deleted record back")
        #expect(try await TestDatabase.fetch("fresh", in: database)?.fieldValue(forKey: "n") == .int64(5))

        // The same record twice in one request: CloudKit refuses the whole request, and saves nothing.
        fine["n"] = Int64(11)
        let twice = stratusError(await caughtError { _ = try await quietSave([fine, freshName, fine], in: database) })
        #expect(twice?.code == .invalidArguments && twice?.message.contains("You can't save the same record twice") == true, "\(String(describing: twice))")
        #expect(try await fetched("raced", in: database).fieldValue(forKey: "n") == .int64(10))
    }

    static func quietSaveFollowsRoles(_ env: Environment) async throws {
        let alice = env.container(user: "alice").publicCloudDatabase
        let bob = env.container(user: "bob").publicCloudDatabase
        // A type without grants has CloudKit's public defaults: only a record's creator may write it.
        _ = try await alice.save(makeRecord("Post", "mine", ["n": .int64(1)]))
        let seenByBob = try await fetched("mine", in: bob)
        seenByBob["n"] = Int64(2)
        let refused = try await quietSave([seenByBob], in: bob)
        #expect(refused[seenByBob.recordID]?.code == .permissionFailure)
        let seenByAlice = try await fetched("mine", desiredKeys: [], in: alice)
        seenByAlice["n"] = Int64(3)
        #expect(try await quietSave([seenByAlice], in: alice).isEmpty)
        #expect(try await fetched("mine", in: alice).fieldValue(forKey: "n") == .int64(3))

        // A type that lets every signed-in user write: bob's save is stored, alice stays the creator.
        var open = RecordTypeSchema(recordType: "Wiki", grants: [.authenticated: [.create, .write], .world: .read])
        open.addField("n", type: .int64)
        try await env.container().saveSchema(open)
        _ = try await alice.save(makeRecord("Wiki", "page", ["n": .int64(1)]))
        let page = try await fetched("page", in: bob)
        page["n"] = Int64(2)
        #expect(try await quietSave([page], in: bob).isEmpty)
        let stored = try await fetched("page", in: alice)
        #expect(stored.fieldValue(forKey: "n") == .int64(2))
        #expect(stored.systemFields.creatorUserRecordID?.recordName == env.recordName(of: "alice"))
        #expect(stored.systemFields.lastModifiedUserRecordID?.recordName == env.recordName(of: "bob"))
    }

    static func lastModifierEveryWay(_ env: Environment) async throws {
        let alice = env.container(user: "alice").publicCloudDatabase
        let bob = env.container(user: "bob").publicCloudDatabase
        var open = RecordTypeSchema(recordType: "Shared", grants: [.authenticated: [.create, .write], .world: .read])
        open.addField("n", type: .int64)
        try await env.container().saveSchema(open)
        let aliceName = env.recordName(of: "alice"), bobName = env.recordName(of: "bob"), imported = "_0123456789abcdef0123456789abcdef"
        // New records, in one batch and one at a time.
        try await TestDatabase.save(makeRecords("Shared", count: 5) { ["n": .int64(Int64($0))] }, in: alice)
        _ = try await bob.save(makeRecord("Shared", "bobs", ["n": .int64(10)]))
        // Saves that want no record back (written without reading the row), by another user and back.
        let r1 = try await fetched(recordName("r", 1), in: bob)
        r1["n"] = Int64(11)
        #expect(try await quietSave([r1], in: bob).isEmpty)
        let r2 = try await fetched(recordName("r", 2), in: bob)
        r2["n"] = Int64(12)
        #expect(try await quietSave([r2], in: bob).isEmpty)
        let r2Again = try await fetched(recordName("r", 2), in: alice)
        r2Again["n"] = Int64(22)
        #expect(try await quietSave([r2Again], in: alice).isEmpty)
        // Saves that answer the saved record, and a replacement that names other users.
        let r3 = try await fetched(recordName("r", 3), in: bob)
        r3["n"] = Int64(13)
        _ = try await bob.save(r3)
        // A record made anew over a stored one of another creator: the stored creator stays.
        let replace = ModifyRecordsOperation(recordsToSave: [makeRecord("Shared", recordName("r", 0), ["n": .int64(100)])])
        replace.writeMode = .forceReplace
        await run(replace, on: bob)
        let when = Date(timeIntervalSince1970: 1_600_000_000)
        for (name, creator, modifier) in [("kept", imported, imported), ("handed", imported, aliceName)] {
            let record = Record(recordType: "Shared", recordID: Record.ID(recordName: name), values: ["n": .int64(0)],
                                systemFields: Record.SystemFields(creationDate: when, modificationDate: when, creatorUserRecordID: Record.ID(recordName: creator),
                                                                  lastModifiedUserRecordID: Record.ID(recordName: modifier), recordChangeTag: "ck-\(name)"))
            let load = ModifyRecordsOperation(recordsToSave: [record])
            load.writeMode = .forceReplace
            load.preservesSystemFields = true
            await run(load, on: env.container().publicCloudDatabase)
        }
        let expected: [String: (creator: String, modifier: String)] = [
            recordName("r", 0): (aliceName, bobName), recordName("r", 1): (aliceName, bobName), recordName("r", 2): (aliceName, aliceName),
            recordName("r", 3): (aliceName, bobName), recordName("r", 4): (aliceName, aliceName), "bobs": (bobName, bobName), "kept": (imported, imported), "handed": (imported, aliceName),
        ]
        for (name, users) in expected {
            let record = try await fetched(name, in: alice)
            #expect(record.systemFields.creatorUserRecordID?.recordName == users.creator, "\(name)'s creator")
            #expect(record.systemFields.lastModifiedUserRecordID?.recordName == users.modifier, "\(name)'s last modifier")
        }
        let all = try await TestDatabase.queryAll(Query(recordType: "Shared"), in: alice)
        #expect(Dictionary(uniqueKeysWithValues: all.map { ($0.recordID.recordName, $0.systemFields.lastModifiedUserRecordID?.recordName ?? "") }) == expected.mapValues(\.modifier),
                "a query reads every modifier as a fetch does")
        for user in [aliceName, bobName, imported] {
            let query = try Query(recordType: "Shared", format: "lastModifiedUserRecordID == %@", Record.ID(recordName: user))
            #expect(Set(TestDatabase.names(try await TestDatabase.queryAll(query, in: alice))) == Set(expected.filter { $0.value.modifier == user }.keys),
                    "records last modified by \(user)")
        }
        let sorted = Query(recordType: "Shared", predicate: .all)
        sorted.sortDescriptors = [RecordSortDescriptor(key: "lastModifiedUserRecordID")]
        let order = try await TestDatabase.queryAll(sorted, in: alice, pageSize: 3)
        #expect(TestDatabase.names(order) == TestDatabase.names(QueryEvaluator.sorted(all, by: sorted.sortDescriptors ?? [])), "sorted by the last modifier, in pages")
    }

    static func quietSaveKeepsWhatItDidNotFetch(_ env: Environment) async throws {
        let database = env.container().privateCloudDatabase
        let zone = RecordZone.ID(zoneName: "Quiet")
        _ = try await database.modifyRecordZones(saving: [RecordZone(zoneID: zone)], deleting: [])
        let parent = makeRecord("Folder", "folder", zoneID: zone, ["n": .int64(0)])
        let child = makeRecord("Doc", "child", zoneID: zone, ["n": .int64(0)])
        child.parent = Record.Reference(recordID: parent.recordID, action: .none)
        let secret = makeRecord("Vault", "secret", zoneID: zone, ["n": .int64(0)])
        secret.encryptedValues["code"] = "s3cr3t"
        let owner = makeRecord("Doc", "owner", zoneID: zone, ["n": .int64(0)])
        let owned = makeRecord("Doc", "owned", zoneID: zone, ["n": .int64(0), "owner": .reference(reference("owner", .deleteSelf, zoneID: zone))])
        let loose = makeRecord("Doc", "loose", zoneID: zone, ["n": .int64(0), "owner": .reference(reference("owner", .deleteSelf, zoneID: zone))])
        try await TestDatabase.save([parent, child, secret, owner, owned, loose], in: database)

        // Each is fetched without the fields it holds beyond `n`, changed, and saved quietly;
        // `loose` drops its reference.
        var copies: [Record] = []
        for name in ["child", "secret", "owned", "loose"] {
            let copy = try await fetched(name, desiredKeys: ["n"], zoneID: zone, in: database)
            copy["n"] = Int64(1)
            if name == "loose" { copy["owner"] = nil }
            copies.append(copy)
        }
        #expect(try await quietSave(copies, in: database).isEmpty)

        let storedChild = try await fetched("child", zoneID: zone, in: database)
        #expect(storedChild.parent?.recordID == parent.recordID && storedChild.fieldValue(forKey: "n") == .int64(1))
        let storedSecret = try await fetched("secret", zoneID: zone, in: database)
        #expect(storedSecret.encryptedValues["code"] as? String == "s3cr3t" && storedSecret.fieldValue(forKey: "n") == .int64(1))
        #expect(storedSecret.encryptedKeys == ["code"])
        // Deleting the owner deletes the record that still references it, not the one that let go.
        _ = try await database.deleteRecord(withID: owner.recordID)
        #expect(try await TestDatabase.fetch("owned", zoneID: zone, in: database) == nil)
        #expect(try await TestDatabase.fetch("loose", zoneID: zone, in: database)?.fieldValue(forKey: "n") == .int64(1))
    }

    static func quietSaveChecksTheMergedRecord(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        // 600 kB stored and 500 kB more would exceed the 1 MB limit: refused, the stored record untouched.
        let big = String(repeating: "b", count: 600_000)
        let original = try await database.save(makeRecord("Blob", "big", ["big": .string(big), "more": .string("m"), "n": .int64(0)]))
        let copy = try await fetched("big", desiredKeys: ["more"], in: database)
        copy["more"] = String(repeating: "m", count: 500_000)
        let errors = try await quietSave([copy], in: database)
        #expect(errors[copy.recordID]?.code == .limitExceeded)
        let stored = try await fetched("big", in: database)
        #expect(stored.fieldValue(forKey: "more") == .string("m") && stored.recordChangeTag == original.recordChangeTag)

        // A field the type does not have yet is added to it (development).
        let grows = try await fetched("big", desiredKeys: ["n"], in: database)
        grows["added"] = 2.5
        #expect(try await quietSave([grows], in: database).isEmpty)
        #expect(try await fetched("big", in: database).fieldValue(forKey: "added") == .double(2.5))
        let schema = try #require(try await env.container().schema().recordTypes.first { $0.recordType == "Blob" })
        #expect(schema.fields.contains { $0.name == "added" && $0.type == .double })

        // Searched words follow a quiet save of a searchable field.
        var note = RecordTypeSchema(recordType: "Note")
        note.addField("text", type: .string, indexes: [.searchable])
        note.addField("n", type: .int64)
        try await env.container().saveSchema(note)
        _ = try await database.save(makeRecord("Note", "note", ["text": .string("apples and pears"), "n": .int64(0)]))
        let words = try await fetched("note", in: database)
        words["text"] = "plums"
        #expect(try await quietSave([words], in: database).isEmpty)
        #expect(try await TestDatabase.queryAll(try Query(recordType: "Note", format: "self CONTAINS 'plums'"), in: database).count == 1)
        #expect(try await TestDatabase.queryAll(try Query(recordType: "Note", format: "self CONTAINS 'apples'"), in: database).isEmpty)
    }

    static func quietSavesAmongIndexes(_ env: Environment) async throws {
        let container = env.container()
        try await EngineConformance.declareManyIndexedTypes(in: container, unindexed: ["kept": .string])
        let database = container.publicCloudDatabase
        let zone = try await EngineConformance.atomicZone(in: database)
        func name(_ number: Int) -> String { String(format: "q-%03d", number) }
        try await TestDatabase.save((0..<120).map {
            makeRecord("Many", name($0), zoneID: zone, ["n": .int64(Int64($0)), "label": .string("old"), "kept": .string("k\($0)")])
        }, in: database)
        var expected: [Int: (n: Int64, label: String)] = [:]
        for number in 0..<120 { expected[number] = (Int64(number), "old") }
        // Read without `kept`, so that every save merges its changes into the stored record.
        let ids = (0..<120).map { Record.ID(recordName: name($0), zoneID: zone) }
        var copies: [Int: Record] = [:]
        for (id, result) in try await database.records(for: ids, desiredKeys: ["n", "label"]) {
            copies[Int(id.recordName.dropFirst(2))!] = try result.get()
        }
        // Every tenth record is changed by another save after it was read: its copy is stale.
        for number in stride(from: 5, to: 100, by: 10) {
            let other = try #require(try await TestDatabase.fetch(name(number), zoneID: zone, in: database))
            other["n"] = Int64(5_000 + number)
            _ = try await database.save(other)
            expected[number] = (Int64(5_000 + number), "old")
        }
        let start = try await database.recordZoneChanges(inZoneWith: zone, since: nil).changeToken

        // 0..<100 saved quietly in one request (n descending, so that every index entry moves),
        // more than one statement's worth of rows on either side of each stale one.
        let saved = (0..<100).map { number -> Record in
            let copy = copies[number]!
            copy["n"] = Int64(1_000 - number)
            copy["label"] = "new"
            if number % 10 != 5 { expected[number] = (Int64(1_000 - number), "new") }
            return copy
        }
        let errors = try await quietSave(saved, in: database)
        #expect(Set(errors.keys) == Set(stride(from: 5, to: 100, by: 10).map { Record.ID(recordName: name($0), zoneID: zone) }))
        #expect(errors.values.allSatisfy { $0.code == .serverRecordChanged })

        func expectStored(_ context: String) async throws {
            let sorted = Query(recordType: "Many", predicate: try QueryPredicate(format: "n >= 0"))
            sorted.sortDescriptors = [RecordSortDescriptor(key: "n")]
            let byN = try await TestDatabase.queryAll(sorted, in: database, zoneID: zone, pageSize: 37)
            expectSameOrder(TestDatabase.names(byN), expected.sorted { $0.value.n < $1.value.n }.map { name($0.key) }, "\(context): sorted by the indexed n")
            for label in ["new", "old"] {
                let matching = try await TestDatabase.queryAll(Query(recordType: "Many", predicate: try QueryPredicate(format: "label == %@", argumentArray: [label])), in: database, zoneID: zone)
                #expect(Set(TestDatabase.names(matching)) == Set(expected.filter { $0.value.label == label }.map { name($0.key) }), "\(context): label == \(label)")
            }
            for number in 0..<120 {
                let stored = try #require(try await TestDatabase.fetch(name(number), zoneID: zone, in: database))
                #expect(stored.fieldValues == ["n": .int64(expected[number]!.n), "label": .string(expected[number]!.label), "kept": .string("k\(number)")],
                        "\(context): \(name(number))")
            }
        }
        try await expectStored("after the request")
        let changes = try await database.recordZoneChanges(inZoneWith: zone, since: start)
        #expect(Set(changes.modificationResultsByID.keys.map(\.recordName)) == Set((0..<100).filter { $0 % 10 != 5 }.map(name)))
        #expect(changes.deletions.isEmpty)
        for (id, result) in changes.modificationResultsByID {
            let changed = try result.get().record
            #expect(changed.recordChangeTag == (try await TestDatabase.fetch(id.recordName, zoneID: zone, in: database))?.recordChangeTag, "\(id.recordName)'s change")
        }

        // An atomic request of quiet saves whose last record is stale writes nothing.
        var fresh: [Record] = []
        for (_, result) in try await database.records(for: Array(ids[0..<70]), desiredKeys: ["n"]) {
            let copy = try result.get()
            copy["n"] = Int64(-1)
            fresh.append(copy)
        }
        let staleCopy = copies[75]!
        staleCopy["n"] = Int64(-1)
        let refused = try await quietSave(fresh.sorted { $0.recordID.recordName < $1.recordID.recordName } + [staleCopy], in: database, atomic: true)
        #expect(refused[staleCopy.recordID]?.code == .serverRecordChanged)
        #expect(refused[ids[0]]?.code == .batchRequestFailed && refused[ids[69]]?.code == .batchRequestFailed)
        try await expectStored("after the refused atomic request")
    }
}
