import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

@Suite("Convenience API (async)", .timeLimit(.minutes(30)))
struct ConvenienceAPITests {
    @Test("save, record(for:), records(for:desiredKeys:), deleteRecord(withID:)")
    func saveFetchDelete() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.container(user: "dana").privateCloudDatabase
            let todo = Record(recordType: "Todo", recordID: Record.ID(recordName: "todo-1"))
            todo["title"] = "Water the plants"
            todo["checked"] = false
            let saved = try await database.save(todo)
            #expect(saved.recordID == todo.recordID)
            #expect(saved["title"] as? String == "Water the plants")
            #expect(saved.fieldValue(forKey: "checked") == .int64(0))
            #expect(saved.recordChangeTag != nil)
            #expect(saved.systemFields.creatorUserRecordID?.recordName == UserDirectoryEntry.derivedRecordName(containerIdentifier: SQLiteFixture.identifier, login: "dana"))
            #expect(saved.creatorUserRecordID?.recordName == CurrentUserDefaultName, "the caller reads themself as __defaultOwner__, as in CloudKit")

            let fetched = try await database.record(for: todo.recordID)
            #expect(fetched.fieldValues == saved.fieldValues)
            #expect(fetched.recordChangeTag == saved.recordChangeTag)

            try await database.save(makeRecord("Todo", "todo-2", ["title": .string("Second"), "checked": .int64(1)]))
            let ids = [todo.recordID, Record.ID(recordName: "todo-2"), Record.ID(recordName: "absent")]
            let results = try await database.records(for: ids, desiredKeys: ["title"])
            #expect(results.count == 3)
            #expect((try? results[ids[0]]?.get())?.fieldValues == ["title": .string("Water the plants")])
            #expect((try? results[ids[1]]?.get())?.fieldValues == ["title": .string("Second")])
            #expect(errorCode(results[ids[2]]) == .unknownItem)

            let deletedID = try await database.deleteRecord(withID: todo.recordID)
            #expect(deletedID == todo.recordID)
            let missing = await caughtError { try await database.record(for: todo.recordID) }
            #expect(stratusError(missing)?.code == .unknownItem)
            #expect(try await database.deleteRecord(withID: Record.ID(recordName: "absent")) == Record.ID(recordName: "absent"))
        }
    }

    @Test("modifyRecords(saving:deleting:savePolicy:atomically:) reports each item")
    func modifyRecords() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(3), in: database)
            let fresh = items(2, prefix: "fresh")
            let conflicting = makeRecord("Item", "item-00000", ["n": .int64(100)])
            let deleteIDs = [Record.ID(recordName: "item-00001")]

            // Atomic (the default), in a zone with the atomic capability: the conflict fails
            // everything. (The default zone has none, as CloudKit's: there each item is alone.)
            let zone = try await database.save(RecordZone(zoneName: "Atomic")).zoneID
            try await TestDatabase.save([makeRecord("Item", "z-item", zoneID: zone, ["n": .int64(0)]), makeRecord("Item", "z-gone", zoneID: zone)], in: database)
            let zoneFresh = makeRecord("Item", "z-fresh", zoneID: zone)
            let zoneConflict = makeRecord("Item", "z-item", zoneID: zone, ["n": .int64(100)])
            let zoneDelete = Record.ID(recordName: "z-gone", zoneID: zone)
            // It throws partialFailure, as CloudKit's does; the items are in partialErrorsByItemID.
            let thrown = await caughtError { try await database.modifyRecords(saving: [zoneFresh, zoneConflict], deleting: [zoneDelete]) }
            #expect(stratusError(thrown)?.code == .partialFailure)
            let atomic = try await database.modifyRecordsEachItem(saving: [zoneFresh, zoneConflict], deleting: [zoneDelete])
            #expect(errorCode(atomic.saveResults[zoneConflict.recordID]) == .serverRecordChanged)
            #expect(errorCode(atomic.saveResults[zoneFresh.recordID]) == .batchRequestFailed)
            #expect(errorCode(atomic.deleteResults[zoneDelete]) == .batchRequestFailed)
            #expect(try await TestDatabase.exists("z-fresh", zoneID: zone, in: database) == false)
            #expect(try await TestDatabase.exists("z-gone", zoneID: zone, in: database))

            // Not atomic: the others go through.
            let partial = try await database.modifyRecords(saving: fresh + [conflicting], deleting: deleteIDs, atomically: false)
            #expect(errorCode(partial.saveResults[conflicting.recordID]) == .serverRecordChanged)
            #expect((try? partial.saveResults[fresh[1].recordID]?.get())?.fieldValue(forKey: "n") == .int64(1))
            #expect(partial.deleteResults[deleteIDs[0]] != nil && errorCode(partial.deleteResults[deleteIDs[0]]) == nil)
            #expect(try await TestDatabase.exists("fresh-00001", in: database))
            #expect(try await TestDatabase.exists("item-00001", in: database) == false)

            // With .allKeys the conflicting record's keys overwrite the stored ones; a key only the
            // store holds stays, as in CloudKit.
            let replaced = try await database.modifyRecords(saving: [conflicting], deleting: [], savePolicy: .allKeys)
            #expect((try? replaced.saveResults[conflicting.recordID]?.get())?.fieldValues == ["n": .int64(100), "even": .int64(1)])
            #expect(try await database.record(for: conflicting.recordID).fieldValues == ["n": .int64(100), "even": .int64(1)])
        }
    }

    @Test("records(matching:…) and records(continuingMatchFrom:…) page with cursors")
    func queryPages() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(25), in: database)
            let query = try Query(recordType: "Item", format: "n >= %@", 0)
            query.sortDescriptors = [RecordSortDescriptor(key: "n")]
            let first = try await database.records(matching: query, inZoneWith: nil, desiredKeys: ["n"], resultsLimit: 10)
            #expect(first.matchResults.map(\.0.recordName) == (0..<10).map { recordName("item", $0) })
            #expect(try first.matchResults.allSatisfy { try $0.1.get().allKeys() == ["n"] })
            let cursor1 = try #require(first.queryCursor)
            let second = try await database.records(continuingMatchFrom: cursor1, desiredKeys: nil, resultsLimit: 10)
            #expect(second.matchResults.map(\.0.recordName) == (10..<20).map { recordName("item", $0) })
            #expect(try second.matchResults.allSatisfy { try $0.1.get().allKeys() == ["even", "n"] })
            let cursor2 = try #require(second.queryCursor)
            let third = try await database.records(continuingMatchFrom: cursor2, resultsLimit: 10)
            #expect(third.matchResults.map(\.0.recordName) == (20..<25).map { recordName("item", $0) })
            #expect(third.queryCursor == nil)

            // In the default zone explicitly, and with the default limit.
            let all = try await database.records(matching: query, inZoneWith: .default)
            #expect(all.matchResults.count == 25)
            #expect(all.queryCursor == nil)

            // Errors of the query as a whole are thrown.
            let badZone = await caughtError { try await database.records(matching: query, inZoneWith: RecordZone.ID(zoneName: "Nope")) }
            #expect(stratusError(badZone)?.code == .zoneNotFound)
            let badQuery = await caughtError { try Query(recordType: "Item", format: "n == 1 OR n == 2") }
            #expect(stratusError(badQuery)?.code == .invalidArguments)
        }
    }

    @Test("allRecords(matching:…) is an AsyncSequence over every page")
    func allRecordsSequence() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(250), in: database)
            let query = Query(recordType: "Item")
            query.sortDescriptors = [RecordSortDescriptor(key: "n", ascending: false)]
            var names: [String] = []
            for try await record in database.allRecords(matching: query, pageSize: 40) {
                names.append(record.recordID.recordName)
            }
            #expect(names == (0..<250).reversed().map { recordName("item", $0) })

            var keys: Set<[String]> = []
            for try await record in database.allRecords(matching: try Query(recordType: "Item", format: "even == %@", 1), inZoneWith: .default, desiredKeys: ["n"], pageSize: 33) {
                keys.insert(record.allKeys())
            }
            #expect(keys == [["n"]])

            // Stopping early is fine.
            var taken = 0
            for try await _ in database.allRecords(matching: query, pageSize: 7) {
                taken += 1
                if taken == 10 { break }
            }
            #expect(taken == 10)

            // An empty result ends at once; a failing query throws.
            var none = 0
            for try await _ in database.allRecords(matching: Query(recordType: "Nothing")) { none += 1 }
            #expect(none == 0)
            let error = await caughtError {
                for try await _ in database.allRecords(matching: query, inZoneWith: RecordZone.ID(zoneName: "Nope")) {}
            }
            #expect(stratusError(error)?.code == .zoneNotFound)
        }
    }

    @Test("containers: databases by scope, user record ID")
    func containers() async throws {
        try await SQLiteFixture.with { fixture in
            let container = fixture.container(user: "erin")
            #expect(container.containerIdentifier == SQLiteFixture.identifier)
            #expect(container.userName == "erin")
            let userRecordID = try await container.userRecordID()
            #expect(userRecordID == Record.ID(recordName: UserDirectoryEntry.derivedRecordName(containerIdentifier: SQLiteFixture.identifier, login: "erin")))
            #expect(UserDirectoryEntry.isUserRecordName(userRecordID.recordName))
            #expect(container.publicCloudDatabase.databaseScope == .public)
            #expect(container.privateCloudDatabase.databaseScope == .private)
            #expect(container.sharedCloudDatabase.databaseScope == .shared)
            #expect(container.database(with: .private) === container.privateCloudDatabase)
            #expect(container.database(with: .public) === container.publicCloudDatabase)
            #expect(container.database(with: .shared) === container.sharedCloudDatabase)
            #expect(container.publicCloudDatabase.operationQueue.maxConcurrentOperationCount > 0)
        }
    }

    @Test("a store opened read-only cannot make one's user record: that item fails saying so, the other records are read")
    func userRecordOnReadOnlyStore() async throws {
        try await SQLiteFixture.with { fixture in
            _ = try await fixture.container(user: "erin").publicCloudDatabase.save(makeRecord("Item", "seen"))
            let readOnly = try SQLiteEngine(path: fixture.store.path(), readOnly: true)
            let container = Container(identifier: SQLiteFixture.identifier, engine: readOnly, userName: "erin")
            let me = try await container.userRecordID()
            let results = try await container.publicCloudDatabase.records(for: [me, Record.ID(recordName: "seen")])
            #expect((try? results[Record.ID(recordName: "seen")]?.get()) != nil)
            let failed = try #require(stratusError(results[me].flatMap { result in if case .failure(let error) = result { error } else { nil } }))
            #expect(failed.recordID == me && failed.message.contains("made on its first fetch"), "\(failed)")
            #expect(try await fixture.container(user: "erin").publicCloudDatabase.record(for: me).recordType == "Users", "a writable store makes it")
        }
    }
}
