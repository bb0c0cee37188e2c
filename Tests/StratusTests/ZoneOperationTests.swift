import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

/// A fresh SQLite store file for the zone and change tests, with containers on it.
struct ZoneTestStore: Sendable {
    static let identifier = "com.example.zones"
    let store: TemporaryStore
    let engine: SQLiteEngine

    var path: String { store.path() }

    func container(user: String = "alice") -> Container {
        Container(identifier: Self.identifier, engine: engine, userName: user)
    }

    /// Runs `body` with a fresh store, removed afterwards.
    static func with<T>(_ body: (ZoneTestStore) async throws -> T) async throws -> T {
        try await TemporaryStore.with(prefix: "stratus-zones") { store in
            try await body(ZoneTestStore(store: store, engine: try SQLiteEngine(path: store.path())))
        }
    }
}

@Suite("Zone operations", .timeLimit(.minutes(30)))
struct ZoneOperationTests {
    @Test("ModifyRecordZonesOperation reports each zone saved and deleted, then its final block, one block at a time")
    func modifyZonesBlocks() async throws {
        try await ZoneTestStore.with { fixture async throws in
            let database = fixture.container().privateCloudDatabase
            try await database.save(RecordZone(zoneName: "Old"))
            let log = BlockLog<String>()
            let op = ModifyRecordZonesOperation(
                recordZonesToSave: [RecordZone(zoneName: "A"), RecordZone(zoneID: RecordZone.ID(zoneName: "B"), capabilities: [.fetchChanges])],
                recordZoneIDsToDelete: [RecordZone.ID(zoneName: "Old")])
            op.perRecordZoneSaveBlock = { id, result in
                let capabilities = (try? result.get())?.capabilities
                log.record("save \(id.zoneName) atomic=\(capabilities?.contains(.atomic) == true)")
            }
            op.perRecordZoneDeleteBlock = { id, result in log.record("delete \(id.zoneName) \((try? result.get()) != nil)") }
            op.modifyRecordZonesResultBlock = { result in log.record("final \((try? result.get()) != nil)") }
            await run(op, on: database)
            #expect(log.events == ["save A atomic=true", "save B atomic=false", "delete Old true", "final true"])
            #expect(log.overlaps == 0)
            #expect(Set(try await database.allRecordZones().map(\.zoneID.zoneName)) == ["_defaultZone", "A", "B"])
        }
    }

    @Test("zone failures are per zone; the final block reports partialFailure with partialErrorsByZoneID")
    func modifyZonesPartialFailure() async throws {
        try await ZoneTestStore.with { fixture async throws in
            let database = fixture.container().privateCloudDatabase
            let bad = RecordZone(zoneName: "_has space")  // CloudKit reserves names starting with _
            let missing = RecordZone.ID(zoneName: "Missing")
            let results = Box<[String: StratusError.Code?]>([:])
            let final = Box<StratusError?>(nil)
            let op = ModifyRecordZonesOperation(recordZonesToSave: [RecordZone(zoneName: "Fine"), bad], recordZoneIDsToDelete: [missing, .default])
            op.perRecordZoneSaveBlock = { id, result in results.update { $0[id.zoneName] = errorCode(result) } }
            op.perRecordZoneDeleteBlock = { id, result in results.update { $0["delete " + id.zoneName] = errorCode(result) } }
            op.modifyRecordZonesResultBlock = { result in final.value = finalZoneError(result) }
            await run(op, on: database)
            let expected: [String: StratusError.Code?] = ["Fine": .none, "_has space": .invalidArguments, "delete Missing": .zoneNotFound, "delete _defaultZone": .invalidArguments]
            #expect(results.value == expected)
            let error = try #require(final.value)
            #expect(error.code == .partialFailure)
            #expect(error.partialErrorsByZoneID.count == 3)
            #expect(error.partialErrorsByZoneID[missing]?.code == .zoneNotFound)
            #expect(error.partialErrorsByZoneID[bad.zoneID]?.zoneID == bad.zoneID)
            #expect(error.description.contains("zone Missing: zoneNotFound"))
            #expect(try await database.recordZone(for: RecordZone.ID(zoneName: "Fine")).zoneID.zoneName == "Fine")
        }
    }

    @Test("FetchRecordZonesOperation: every zone, or the zones asked for with zoneNotFound for a missing one")
    func fetchZonesBlocks() async throws {
        try await ZoneTestStore.with { fixture async throws in
            let database = fixture.container().privateCloudDatabase
            _ = try await database.modifyRecordZones(saving: [RecordZone(zoneName: "Photos"), RecordZone(zoneName: "Notes")], deleting: [])

            let all = FetchRecordZonesOperation.fetchAllRecordZonesOperation()
            let listed = Box<[String]>([])
            let allFinal = Box<Result<Void, any Error>?>(nil)
            all.perRecordZoneResultBlock = { id, result in
                if case .success(let zone) = result, zone.zoneID == id { listed.update { $0.append(id.zoneName) } }
            }
            all.fetchRecordZonesResultBlock = { allFinal.value = $0 }
            await run(all, on: database)
            #expect(listed.value == ["_defaultZone", "Notes", "Photos"])
            #expect((try? allFinal.value?.get()) != nil)

            // Asked-for IDs come back as asked (here with the owner's explicit user record name).
            let alice = UserDirectoryEntry.derivedRecordName(containerIdentifier: ZoneTestStore.identifier, login: "alice")
            let mine = RecordZone.ID(zoneName: "Photos", ownerName: alice)
            let some = FetchRecordZonesOperation(recordZoneIDs: [mine, RecordZone.ID(zoneName: "Gone"), RecordZone.ID(zoneName: "_bad name")])
            let answers = Box<[String]>([])
            let final = Box<StratusError?>(nil)
            some.perRecordZoneResultBlock = { id, result in
                answers.update { $0.append("\(id.zoneName)/\(id.ownerName): \(errorCode(result).map { "\($0)" } ?? "ok")") }
            }
            some.fetchRecordZonesResultBlock = { final.value = finalZoneError($0) }
            await run(some, on: database)
            #expect(Set(answers.value) == ["Photos/\(alice): ok", "Gone/__defaultOwner__: zoneNotFound", "_bad name/__defaultOwner__: invalidArguments"])
            #expect(final.value?.code == .partialFailure)
            #expect(final.value?.partialErrorsByZoneID.count == 2)
        }
    }

    @Test("a zone operation cancelled before it starts reports operationCancelled and nothing else")
    func cancelledBeforeStart() async throws {
        try await ZoneTestStore.with { fixture async throws in
            let database = fixture.container().privateCloudDatabase
            let calls = Box<[String]>([])
            let op = ModifyRecordZonesOperation(recordZonesToSave: [RecordZone(zoneName: "Never")])
            op.perRecordZoneSaveBlock = { _, _ in calls.update { $0.append("save") } }
            op.modifyRecordZonesResultBlock = { result in calls.update { $0.append("final \(finalZoneError(result)?.code.description ?? "ok")") } }
            op.cancel()
            await run(op, on: database)
            #expect(calls.value == ["final operationCancelled"])
            #expect(try await database.allRecordZones().map(\.zoneID) == [.default])
        }
    }

    @Test("a record write that depends on a zone save on another queue lands in the new zone")
    func zoneSaveAsADependency() async throws {
        try await ZoneTestStore.with { fixture async throws in
            let database = fixture.container().privateCloudDatabase
            let zone = RecordZone(zoneName: "Fresh")
            let createZone = ModifyRecordZonesOperation(recordZonesToSave: [zone])
            createZone.database = database
            let save = ModifyRecordsOperation(recordsToSave: [makeRecord("Note", "first", zoneID: zone.zoneID)])
            save.database = database
            let saved = Box<StratusError.Code?>(.internalError)
            save.perRecordSaveBlock = { _, result in saved.value = errorCode(result) }
            save.addDependency(createZone)
            let other = OperationQueue()
            other.maxConcurrentOperationCount = 1
            other.addOperation(save)
            database.operationQueue.addOperation(createZone)
            await waitUntilFinished([createZone, save])
            #expect(saved.value == nil)
            #expect(try await TestDatabase.exists("first", zoneID: zone.zoneID, in: database))
        }
    }

    @Test("the convenience API: save, fetch, list and delete zones")
    func convenience() async throws {
        try await ZoneTestStore.with { fixture async throws in
            // The private database: a public zone is deleted by the store's administrator only.
            let database = fixture.container().privateCloudDatabase
            let zone = try await database.save(RecordZone(zoneName: "Board"))
            #expect(zone.capabilities == [.fetchChanges, .atomic, .sharing, .zoneWideSharing])
            try await database.save(makeRecord("Post", "hello", zoneID: zone.zoneID))
            #expect(try await database.allRecordZones().map(\.zoneID.zoneName) == ["_defaultZone", "Board"])
            #expect(try await database.recordZone(for: zone.zoneID).zoneID == zone.zoneID)
            let (saves, deletes) = try await database.modifyRecordZones(saving: [RecordZone(zoneName: "Second")], deleting: [zone.zoneID])
            #expect(saves.count == 1 && deletes.count == 1)
            #expect((try? deletes[zone.zoneID]?.get()) != nil)
            #expect(try await database.allRecordZones().map(\.zoneID.zoneName) == ["_defaultZone", "Second"])
            let missing = await caughtError { try await database.deleteRecordZone(withID: zone.zoneID) }
            #expect(stratusError(missing)?.code == .zoneNotFound)
        }
    }
}

/// The final error of a zone operation, as a `StratusError`.
func finalZoneError(_ result: Result<Void, any Error>) -> StratusError? {
    if case .failure(let error) = result { return error as? StratusError }
    return nil
}
