import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

/// Both the result blocks and CloudKit's older blocks set: each event reaches the result block
/// first, then the older one, per-item blocks before final blocks, one block at a time.
@Suite("CloudKit's older block names, next to the result blocks", .timeLimit(.minutes(30)))
struct OlderBlockOrderTests {
    static func name(_ id: Record.ID?) -> String { id?.recordName ?? "-" }
    static func code(_ error: (any Error)?) -> String { (error as? StratusError).map { "\($0.code)" } ?? "nil" }

    @Test("QueryOperation: recordMatchedBlock, recordFetchedBlock per record; queryResultBlock, then queryCompletionBlock")
    func query() async throws {
        try await SQLiteFixture.with { fixture in
            try await TestDatabase.save(items(3), in: fixture.database)
            let query = Query(recordType: "Item")
            query.sortDescriptors = [RecordSortDescriptor(key: "n", ascending: true)]
            let op = QueryOperation(query: query)
            op.resultsLimit = 2
            let log = BlockLog<String>()
            let cursor = Box<QueryOperation.Cursor?>(nil)
            op.recordMatchedBlock = { id, _ in log.record("matched \(id.recordName)") }
            op.recordFetchedBlock = { record in log.record("fetched \(record.recordID.recordName)") }
            op.queryResultBlock = { result in log.record("result \((try? result.get()) != nil ? "cursor" : "end")") }
            op.queryCompletionBlock = { next, error in
                cursor.value = next
                log.record("completion \(next != nil ? "cursor" : "end") \(Self.code(error))")
            }
            await run(op, on: fixture.database)
            #expect(log.events == [
                "matched item-00000", "fetched item-00000", "matched item-00001", "fetched item-00001",
                "result cursor", "completion cursor nil",
            ])
            #expect(log.overlaps == 0)

            let rest = QueryOperation(cursor: try #require(cursor.value))
            let restLog = BlockLog<String>()
            rest.recordFetchedBlock = { restLog.record("fetched \($0.recordID.recordName)") }
            rest.queryCompletionBlock = { next, error in restLog.record("completion \(next != nil ? "cursor" : "end") \(Self.code(error))") }
            await run(rest, on: fixture.database)
            #expect(restLog.events == ["fetched item-00002", "completion end nil"])
        }
    }

    @Test("FetchRecordsOperation: progress, result and completion per record; final result, then the dictionary")
    func fetchRecords() async throws {
        try await SQLiteFixture.with { fixture in
            try await TestDatabase.save(items(2), in: fixture.database)
            let a = Record.ID(recordName: "item-00000"), b = Record.ID(recordName: "item-00001"), missing = Record.ID(recordName: "missing")
            let op = FetchRecordsOperation(recordIDs: [a, missing, b])
            let log = BlockLog<String>()
            let fetched = Box<[Record.ID: Record]?>(nil)
            op.perRecordProgressBlock = { id, progress in log.record("progress \(id.recordName) \(progress)") }
            op.perRecordResultBlock = { id, result in log.record("result \(id.recordName) \((try? result.get()) != nil)") }
            op.perRecordCompletionBlock = { record, id, error in log.record("completion \(Self.name(record?.recordID)) \(Self.name(id)) \(Self.code(error))") }
            op.fetchRecordsResultBlock = { result in log.record("final \(Self.code(finalError(result)))") }
            op.fetchRecordsCompletionBlock = { records, error in
                fetched.value = records
                log.record("final completion \(records?.count ?? -1) \(Self.code(error))")
            }
            await run(op, on: fixture.database)
            #expect(log.events == [
                "progress item-00000 1.0", "result item-00000 true", "completion item-00000 item-00000 nil",
                "result missing false", "completion - missing unknownItem",
                "progress item-00001 1.0", "result item-00001 true", "completion item-00001 item-00001 nil",
                "final partialFailure", "final completion 2 partialFailure",
            ])
            #expect(fetched.value?[a]?["n"] as? Int == 0)
            #expect(fetched.value?[missing] == nil)
        }
    }

    @Test("ModifyRecordsOperation: per saved record progress, save result and completion; deletes; final result, then saved records and deleted IDs")
    func modifyRecords() async throws {
        try await SQLiteFixture.with { fixture in
            try await TestDatabase.save(items(1, prefix: "old"), in: fixture.database)
            let x = Record(recordType: "Item", recordID: Record.ID(recordName: "x"))
            let y = Record(recordType: "Item", recordID: Record.ID(recordName: "y"))
            let old = Record.ID(recordName: "old-00000")
            let op = ModifyRecordsOperation(recordsToSave: [x, y], recordIDsToDelete: [old])
            let log = BlockLog<String>()
            let final = Box<([Record]?, [Record.ID]?)>((nil, nil))
            op.perRecordProgressBlock = { record, progress in log.record("progress \(record.recordID.recordName) \(progress)") }
            op.perRecordSaveBlock = { id, result in log.record("save \(id.recordName) \((try? result.get())?.recordChangeTag != nil)") }
            op.perRecordCompletionBlock = { record, error in log.record("completion \(record.recordID.recordName) \(record.recordChangeTag != nil) \(Self.code(error))") }
            op.perRecordDeleteBlock = { id, _ in log.record("delete \(id.recordName)") }
            op.modifyRecordsResultBlock = { result in log.record("final \(Self.code(finalError(result)))") }
            op.modifyRecordsCompletionBlock = { saved, deleted, error in
                final.value = (saved, deleted)
                log.record("final completion \(saved?.count ?? -1) \(deleted?.count ?? -1) \(Self.code(error))")
            }
            await run(op, on: fixture.database)
            #expect(log.events == [
                "progress x 1.0", "save x true", "completion x true nil",
                "progress y 1.0", "save y true", "completion y true nil",
                "delete old-00000", "final nil", "final completion 2 1 nil",
            ])
            #expect(final.value.0?.map(\.recordID.recordName) == ["x", "y"])
            #expect(final.value.0?.allSatisfy { $0.recordChangeTag != nil } == true, "the saved records are the stored versions")
            #expect(final.value.1 == [old])
        }
    }

    @Test("ModifyRecordsOperation: a failed save reaches perRecordCompletionBlock with the client's record and its error")
    func modifyRecordsFailure() async throws {
        try await SQLiteFixture.with { fixture in
            let good = Record(recordType: "Item", recordID: Record.ID(recordName: "good"))
            let bad = Record(recordType: "Item", recordID: Record.ID(recordName: "_bad"))
            let op = ModifyRecordsOperation(recordsToSave: [good, bad])
            let log = BlockLog<String>()
            op.perRecordCompletionBlock = { record, error in log.record("completion \(record.recordID.recordName) \(record === bad) \(Self.code(error))") }
            op.modifyRecordsCompletionBlock = { saved, deleted, error in log.record("final completion \(saved?.count ?? -1) \(deleted?.count ?? -1) \(Self.code(error))") }
            await run(op, on: fixture.database)
            // The default zone is not atomic (as CloudKit's): the good record is saved.
            #expect(log.events == [
                "completion _bad true invalidArguments", "completion good false nil",
                "final completion 1 0 partialFailure",
            ])
        }
    }

    @Test("FetchRecordZoneChangesOperation: changed and deleted records, token updates with a Data? argument, each zone's end, then the final blocks")
    func zoneChanges() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.container().privateCloudDatabase
            let zone = RecordZone.ID(zoneName: "Notes")
            try await database.save(RecordZone(zoneID: zone))
            try await TestDatabase.save((0..<3).map { makeRecord("Note", "n\($0)", zoneID: zone) }, in: database)
            try await database.deleteRecord(withID: Record.ID(recordName: "n1", zoneID: zone))

            let op = FetchRecordZoneChangesOperation(
                recordZoneIDs: [zone], configurationsByRecordZoneID: [zone: .init(previousServerChangeToken: nil, resultsLimit: 2)])
            let log = BlockLog<String>()
            op.recordWasChangedBlock = { id, _ in log.record("changed \(id.recordName)") }
            op.recordChangedBlock = { record in log.record("recordChanged \(record.recordID.recordName)") }
            op.recordWithIDWasDeletedBlock = { id, type in log.record("deleted \(id.recordName) \(type)") }
            op.recordZoneChangeTokensUpdatedBlock = { id, token, clientToken in log.record("tokens \(id.zoneName) \(token != nil) \(clientToken == nil)") }
            op.recordZoneFetchResultBlock = { id, result in
                if case .success(let (token, clientToken, moreComing)) = result {
                    log.record("zone result \(id.zoneName) \(token.zoneID == zone) \(clientToken == nil) \(moreComing)")
                }
            }
            op.recordZoneFetchCompletionBlock = { id, token, clientToken, moreComing, error in
                log.record("zone completion \(id.zoneName) \(token != nil) \(clientToken == nil) \(moreComing) \(Self.code(error))")
            }
            op.fetchRecordZoneChangesResultBlock = { result in log.record("final \(Self.code(finalError(result)))") }
            op.fetchRecordZoneChangesCompletionBlock = { error in log.record("final completion \(Self.code(error))") }
            await run(op, on: database)
            #expect(log.events == [
                "changed n0", "recordChanged n0", "changed n2", "recordChanged n2",
                "tokens Notes true true",
                "deleted n1 Note",
                "zone result Notes true true false", "zone completion Notes true true false nil",
                "final nil", "final completion nil",
            ])
            #expect(log.overlaps == 0)
        }
    }

    @Test("FetchRecordZoneChangesOperation: a failing zone reaches recordZoneFetchCompletionBlock with its error and no token")
    func zoneChangesFailure() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.container().privateCloudDatabase
            let missing = RecordZone.ID(zoneName: "Missing")
            let op = FetchRecordZoneChangesOperation(recordZoneIDs: [missing])
            let log = BlockLog<String>()
            op.recordZoneFetchCompletionBlock = { id, token, _, moreComing, error in log.record("zone completion \(id.zoneName) \(token != nil) \(moreComing) \(Self.code(error))") }
            op.fetchRecordZoneChangesCompletionBlock = { error in log.record("final completion \(Self.code(error))") }
            await run(op, on: database)
            #expect(log.events == ["zone completion Missing false false zoneNotFound", "final completion partialFailure"])
        }
    }

    @Test("clientChangeTokenData of a modify request comes back with the zone's changes")
    func clientChangeToken() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.container().privateCloudDatabase
            let zone = RecordZone.ID(zoneName: "Sync")
            try await database.save(RecordZone(zoneID: zone))
            let save = ModifyRecordsOperation(recordsToSave: [makeRecord("Note", "n1", zoneID: zone)])
            save.clientChangeTokenData = Data("device-42".utf8)
            await run(save, on: database)

            let fetch = FetchRecordZoneChangesOperation(recordZoneIDs: [zone, .default])
            let tokens = Box<[String: Data?]>([:])
            fetch.recordZoneFetchCompletionBlock = { id, _, clientToken, _, _ in tokens.update { $0[id.zoneName] = clientToken } }
            let fromResult = Box<Data?>(nil)
            fetch.recordZoneFetchResultBlock = { id, result in
                if id == zone, case .success(let fetched) = result { fromResult.value = fetched.clientChangeTokenData }
            }
            await run(fetch, on: database)
            #expect(tokens.value[zone.zoneName] == Data("device-42".utf8))
            #expect(tokens.value[RecordZone.ID.defaultZoneName] == .some(nil), "a zone no request wrote with a token has none")
            #expect(fromResult.value == Data("device-42".utf8))
        }
    }

    @Test("ZoneOptions with init(recordZoneIDs:optionsByRecordZoneID:), and a ZoneConfiguration changed before the operation starts")
    func zoneOptionsAndConfigurationClass() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.container().privateCloudDatabase
            let zone = RecordZone.ID(zoneName: "Notes")
            try await database.save(RecordZone(zoneID: zone))
            try await TestDatabase.save((0..<3).map { makeRecord("Note", "n\($0)", zoneID: zone, ["title": .string("t\($0)"), "body": .string("b")]) }, in: database)

            let options = FetchRecordZoneChangesOperation.ZoneOptions()
            options.resultsLimit = 1
            options.desiredKeys = ["title"]
            let op = FetchRecordZoneChangesOperation(recordZoneIDs: [zone], optionsByRecordZoneID: [zone: options])
            op.fetchAllChanges = false
            let keys = Box<[[String]]>([])
            let more = Box<Bool?>(nil)
            op.recordChangedBlock = { record in keys.update { $0.append(record.allKeys()) } }
            op.recordZoneFetchCompletionBlock = { _, _, _, moreComing, _ in more.value = moreComing }
            await run(op, on: database)
            #expect(keys.value == [["title"]])
            #expect(more.value == true)

            let configuration = FetchRecordZoneChangesOperation.ZoneConfiguration()
            let second = FetchRecordZoneChangesOperation(recordZoneIDs: [zone], configurationsByRecordZoneID: [zone: configuration])
            configuration.desiredKeys = ["body"]
            configuration.resultsLimit = 2
            second.fetchAllChanges = false
            let secondKeys = Box<[[String]]>([])
            second.recordChangedBlock = { record in secondKeys.update { $0.append(record.allKeys()) } }
            await run(second, on: database)
            #expect(secondKeys.value == [["body"], ["body"]], "the operation reads the configuration object when it starts")
        }
    }

    @Test("FetchDatabaseChangesOperation: the result block, then fetchDatabaseChangesCompletionBlock with the same token")
    func databaseChanges() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.container().privateCloudDatabase
            try await database.save(RecordZone(zoneName: "Notes"))
            let op = FetchDatabaseChangesOperation()
            let log = BlockLog<String>()
            let tokens = Box<[ServerChangeToken]>([])
            op.recordZoneWithIDChangedBlock = { log.record("zone \($0.zoneName)") }
            op.recordZoneWithIDWasPurgedBlock = { log.record("purged \($0.zoneName)") }
            op.fetchDatabaseChangesResultBlock = { result in
                if case .success(let (token, more)) = result { tokens.update { $0.append(token) }; log.record("result \(more)") }
            }
            op.fetchDatabaseChangesCompletionBlock = { token, more, error in
                if let token { tokens.update { $0.append(token) } }
                log.record("completion \(token != nil) \(more) \(Self.code(error))")
            }
            await run(op, on: database)
            #expect(log.events.last(2) == ["result false", "completion true false nil"])
            #expect(log.events.contains("zone Notes"))
            #expect(tokens.value.count == 2 && tokens.value[0] == tokens.value[1])
        }
    }

    @Test("zone operations: fetchRecordZonesCompletionBlock and modifyRecordZonesCompletionBlock after the result blocks")
    func zoneOperations() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.container().privateCloudDatabase
            let photos = RecordZone(zoneName: "Photos"), old = RecordZone(zoneName: "Old")
            try await database.save(old)
            let modify = ModifyRecordZonesOperation(recordZonesToSave: [photos], recordZoneIDsToDelete: [old.zoneID])
            let log = BlockLog<String>()
            modify.perRecordZoneSaveBlock = { id, _ in log.record("save \(id.zoneName)") }
            modify.perRecordZoneDeleteBlock = { id, _ in log.record("delete \(id.zoneName)") }
            modify.modifyRecordZonesResultBlock = { result in log.record("final \(Self.code(finalError(result)))") }
            modify.modifyRecordZonesCompletionBlock = { saved, deleted, error in
                log.record("final completion \(saved?.map(\.zoneID.zoneName) ?? []) \(deleted?.map(\.zoneName) ?? []) \(Self.code(error))")
            }
            await run(modify, on: database)
            #expect(log.events == ["save Photos", "delete Old", "final nil", "final completion [\"Photos\"] [\"Old\"] nil"])

            let fetch = FetchRecordZonesOperation(recordZoneIDs: [photos.zoneID, old.zoneID])
            let fetchLog = BlockLog<String>()
            let zones = Box<[RecordZone.ID: RecordZone]?>(nil)
            fetch.perRecordZoneResultBlock = { id, result in fetchLog.record("zone \(id.zoneName) \((try? result.get()) != nil)") }
            fetch.fetchRecordZonesResultBlock = { result in fetchLog.record("final \(Self.code(finalError(result)))") }
            fetch.fetchRecordZonesCompletionBlock = { byID, error in
                zones.value = byID
                fetchLog.record("final completion \(byID?.count ?? -1) \(Self.code(error))")
            }
            await run(fetch, on: database)
            #expect(fetchLog.events == ["zone Photos true", "zone Old false", "final partialFailure", "final completion 1 partialFailure"])
            #expect(zones.value?[photos.zoneID]?.capabilities == [.fetchChanges, .atomic, .sharing, .zoneWideSharing])
        }
    }
}

extension Array {
    /// The last `count` elements.
    fileprivate func last(_ count: Int) -> [Element] { Array(suffix(count)) }
}
