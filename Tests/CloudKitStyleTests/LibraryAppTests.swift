import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// A book library app written against CloudKit's async/await API and its record operations,
// ported mechanically: shelves and books in a custom zone, `.deleteSelf` references, fields
// removed with nil, records fetched with desiredKeys and saved back, CKFetchRecordsOperation with
// a missing ID, CKModifyRecordZonesOperation and CKFetchRecordZonesOperation, and the system
// fields apps show (creationDate, modificationDate, creatorUserRecordID, recordChangeTag).

final class Library {
    // let database = CKContainer(identifier: "iCloud.com.example.library").privateCloudDatabase
    let database: Database
    let zoneID = RecordZone.ID(zoneName: "Library", ownerName: CurrentUserDefaultName)

    init(database: Database) {
        self.database = database
    }

    // let op = CKModifyRecordZonesOperation(recordZonesToSave: [CKRecordZone(zoneID: zoneID)], recordZoneIDsToDelete: nil)
    func createZone() async throws {
        let result: Result<Void, Error> = await awaitCallback { done in
            let op = ModifyRecordZonesOperation(recordZonesToSave: [RecordZone(zoneID: self.zoneID)], recordZoneIDsToDelete: nil)
            // The blocks run on the operation's thread: what they collect is kept in a Box.
            let savedZones = Box<[RecordZone]>([])
            op.perRecordZoneSaveBlock = { _, result in
                if case .success(let zone) = result { savedZones.update { $0.append(zone) } }
            }
            op.modifyRecordZonesResultBlock = { result in
                done(result.flatMap { savedZones.value.count == 1 ? .success(()) : .failure(StratusError(.internalError)) })
            }
            self.database.add(op)
        }
        try result.get()
    }

    func addShelf(_ name: String) async throws -> Record {
        let shelf = Record(recordType: "Shelf", recordID: Record.ID(recordName: name, zoneID: zoneID))
        shelf["name"] = name as RecordValue
        return try await database.save(shelf)
    }

    func addBook(_ title: String, author: String, pages: Int, on shelf: Record) async throws -> Record {
        let book = Record(recordType: "Book", recordID: Record.ID(recordName: title.lowercased().replacingOccurrences(of: " ", with: "-"), zoneID: zoneID))
        book["title"] = title as RecordValue
        book["author"] = author as RecordValue
        book["pages"] = pages as RecordValue
        book["shelf"] = Record.Reference(record: shelf, action: .deleteSelf)
        book["summary"] = "A long summary of \(title)" as RecordValue
        return try await database.save(book)
    }

    // let query = CKQuery(recordType: "Book", predicate: NSPredicate(format: "shelf == %@", CKRecord.Reference(recordID: shelfID, action: .none)))
    func books(on shelfID: Record.ID) async throws -> [Record] {
        let query = Query(recordType: "Book", predicate: try QueryPredicate(format: "shelf == %@", Record.Reference(recordID: shelfID, action: .none)))
        query.sortDescriptors = [RecordSortDescriptor(key: "title", ascending: true)]
        let (results, _) = try await database.records(matching: query, inZoneWith: zoneID)
        return results.compactMap { try? $0.1.get() }
    }
}

@Suite("A library app on CloudKit's async API, ported mechanically", .timeLimit(.minutes(30)))
struct LibraryAppTests {
    @Test("records fetched with desiredKeys and saved back keep the keys they did not fetch; nil removes a field", arguments: TestEngine.all)
    func partialRecordsSaveOnlyTheirChanges(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let library = Library(database: container.privateCloudDatabase)
            try await library.createZone()
            let shelf = try await library.addShelf("Fiction")
            let book = try await library.addBook("Dune", author: "Frank Herbert", pages: 412, on: shelf)

            // let results = try await database.records(for: [book.recordID], desiredKeys: ["pages"])
            let results = try await library.database.records(for: [book.recordID], desiredKeys: ["pages"])
            let partial = try #require(try results[book.recordID]?.get())
            #expect(partial.allKeys() == ["pages"])
            partial["pages"] = 896
            #expect(partial.changedKeys() == ["pages"])
            let saved = try await library.database.save(partial)
            #expect(saved["pages"] as? Int == 896)
            let full = try await library.database.record(for: book.recordID)
            #expect(full["title"] as? String == "Dune" && full["author"] as? String == "Frank Herbert" && full["pages"] as? Int == 896)
            #expect(full["summary"] as? String == "A long summary of Dune")

            // book["summary"] = nil removes it on the server.
            full["summary"] = nil
            #expect(full.changedKeys() == ["summary"])
            _ = try await library.database.save(full)
            let after = try await library.database.record(for: book.recordID)
            #expect(after["summary"] == nil && after.allKeys() == ["author", "pages", "shelf", "title"])
        }
    }

    @Test("deleting a shelf deletes its books (.deleteSelf); the zone's changes report every deletion with its type", arguments: TestEngine.all)
    func cascade(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let library = Library(database: container.privateCloudDatabase)
            try await library.createZone()
            let fiction = try await library.addShelf("Fiction")
            let science = try await library.addShelf("Science")
            _ = try await library.addBook("Dune", author: "Frank Herbert", pages: 412, on: fiction)
            _ = try await library.addBook("Emma", author: "Jane Austen", pages: 474, on: fiction)
            _ = try await library.addBook("Cosmos", author: "Carl Sagan", pages: 365, on: science)
            #expect(try await library.books(on: fiction.recordID).map { $0["title"] as? String } == ["Dune", "Emma"])
            let token = try await library.database.recordZoneChanges(inZoneWith: library.zoneID, since: nil).changeToken

            let deleted = try await library.database.deleteRecord(withID: fiction.recordID)
            #expect(deleted == fiction.recordID)
            #expect(try await library.books(on: fiction.recordID).isEmpty)
            #expect(try await library.books(on: science.recordID).count == 1)

            let changes = try await library.database.recordZoneChanges(inZoneWith: library.zoneID, since: token)
            #expect(Set(changes.deletions.map { "\($0.recordID.recordName):\($0.recordType)" }) == ["Fiction:Shelf", "dune:Book", "emma:Book"])
            #expect(changes.modificationResultsByID.isEmpty)
        }
    }

    @Test("CKFetchRecordsOperation with a missing ID: that ID fails with unknownItem, the others arrive, the operation ends with partialFailure", arguments: TestEngine.all)
    func fetchWithMissing(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let library = Library(database: container.privateCloudDatabase)
            try await library.createZone()
            let shelf = try await library.addShelf("Fiction")
            let missing = Record.ID(recordName: "missing", zoneID: library.zoneID)
            let op = FetchRecordsOperation(recordIDs: [shelf.recordID, missing])
            op.desiredKeys = ["name"]
            let fetched = Collected<[Record.ID: Result<Record, Error>]>([:])
            let final = Collected<Result<Void, Error>?>(nil)
            await run(library.database) { finish in
                op.perRecordResultBlock = { id, result in fetched.value[id] = result }
                op.fetchRecordsResultBlock = { result in
                    final.value = result
                    finish()
                }
                return op
            }
            #expect(try fetched.value[shelf.recordID]?.get()["name"] as? String == "Fiction")
            guard case .failure(let missingError)? = fetched.value[missing] else {
                Issue.record("the missing record was found")
                return
            }
            #expect((missingError as? StratusError)?.code == .unknownItem)
            guard case .failure(let error as StratusError)? = final.value else {
                Issue.record("no partial failure")
                return
            }
            #expect(error.code == .partialFailure)
            #expect((error.partialErrorsByItemID?[missing] as? StratusError)?.code == .unknownItem)

            // The async form: no throw, a failure for the missing ID.
            let results = try await library.database.records(for: [shelf.recordID, missing])
            #expect(results.count == 2 && (try? results[missing]?.get()) == nil)
            do {
                _ = try await library.database.record(for: missing)
                Issue.record("record(for:) found a missing record")
            } catch let error as StratusError where error.code == .unknownItem {
            }
        }
    }

    @Test("zones: fetchAllRecordZonesOperation and its blocks, a missing zone, a zone deleted with its records", arguments: TestEngine.all)
    func zones(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let library = Library(database: container.privateCloudDatabase)
            try await library.createZone()
            let shelf = try await library.addShelf("Fiction")

            let all = FetchRecordZonesOperation.fetchAllRecordZonesOperation()
            let zones = Collected<[RecordZone.ID]>([])
            await run(library.database) { finish in
                all.perRecordZoneResultBlock = { zoneID, result in if (try? result.get()) != nil { zones.value.append(zoneID) } }
                all.fetchRecordZonesResultBlock = { _ in finish() }
                return all
            }
            #expect(Set(zones.value) == [RecordZone.ID.default, library.zoneID])

            let missing = RecordZone.ID(zoneName: "Missing")
            let op = FetchRecordZonesOperation(recordZoneIDs: [library.zoneID, missing])
            let older = Collected<([RecordZone.ID: RecordZone]?, Error?)>((nil, nil))
            await run(library.database) { finish in
                op.fetchRecordZonesCompletionBlock = { zonesByID, error in
                    older.value = (zonesByID, error)
                    finish()
                }
                return op
            }
            #expect(older.value.0?.keys.sorted { $0.zoneName < $1.zoneName } == [library.zoneID])
            let partial = older.value.1 as? StratusError
            #expect(partial?.code == .partialFailure && (partial?.partialErrorsByItemID?[missing] as? StratusError)?.code == .zoneNotFound)

            _ = try await library.database.modifyRecordZones(saving: [], deleting: [library.zoneID])
            do {
                _ = try await library.database.record(for: shelf.recordID)
                Issue.record("a record of a deleted zone was found")
            } catch let error as StratusError {
                #expect(error.code == .unknownItem || error.code == .zoneNotFound)
            }
            do {
                _ = try await library.addShelf("Again")
                Issue.record("a save into a deleted zone succeeded")
            } catch let error as StratusError {
                #expect(error.code == .zoneNotFound)
            }
        }
    }

    @Test("system fields: dates, change tags and the creator as CloudKit gives them to the current user", arguments: TestEngine.all)
    func systemFields(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let library = Library(database: container.privateCloudDatabase)
            try await library.createZone()
            let before = Date()
            let shelf = try await library.addShelf("Fiction")
            #expect(shelf.creationDate.map { $0 >= before.addingTimeInterval(-1) } == true)
            #expect(shelf.modificationDate == shelf.creationDate)
            #expect(shelf.recordChangeTag != nil)
            #expect(shelf.creatorUserRecordID?.recordName == CurrentUserDefaultName, "CloudKit names the current user __defaultOwner__")
            #expect(shelf.lastModifiedUserRecordID?.recordName == CurrentUserDefaultName)

            try await Task.sleep(nanoseconds: 20_000_000)
            shelf["name"] = "Novels"
            let updated = try await library.database.save(shelf)
            #expect(updated.creationDate == shelf.creationDate)
            #expect(updated.modificationDate! > shelf.modificationDate!)
            #expect(updated.recordChangeTag != shelf.recordChangeTag)

            // value(forKey:) answers the system fields, as CKRecord's key-value coding does
            #expect(updated.value(forKey: "creationDate") as? Date == updated.creationDate)
            #expect(updated.value(forKey: "recordID") as? Record.ID == updated.recordID)
        }
    }
}
