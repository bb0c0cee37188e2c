import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// Behaviours sync code written for CloudKit relies on, checked as such code observes them: an
// operation's NSOperation completionBlock after its final block (VinCloudKit, SyncKit), saved
// records with a change tag and no changed keys, serverRecordChanged for a stale copy and for a
// new record object over an existing ID, zoneNotFound for a deleted zone, the iOS 15 async
// results' shapes, desiredKeys, and a fetch's partial failure with unknownItem.

@Suite("CloudKit behaviours ported sync code relies on")
struct PortBehaviourTests {
    @Test("an operation's completionBlock runs after its final block, as CloudKit's does", arguments: TestEngine.all)
    func completionBlock(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let log = Tally()
            let op = ModifyRecordsOperation(recordsToSave: [Record(recordType: "Note", recordID: RecordID(recordName: "n1"))], recordIDsToDelete: nil)
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                op.modifyRecordsCompletionBlock = { _, _, _ in log.add("final") }
                op.completionBlock = { log.add("completion"); continuation.resume() }
                database.add(op)
            }
            #expect(log.items == ["final", "completion"])
        }
    }

    @Test("a saved record has a change tag and no changed keys; a stale copy or a new object over an existing ID is serverRecordChanged", arguments: TestEngine.all)
    func savedRecord(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let note = Record(recordType: "Note", recordID: RecordID(recordName: "n1"))
            note["title"] = "a"
            #expect(note.recordChangeTag == nil)
            #expect(note.changedKeys() == ["title"])
            let saved = try await database.save(note)
            #expect(saved.recordChangeTag != nil)
            #expect(saved.changedKeys().isEmpty)
            #expect(saved.creationDate != nil && saved.modificationDate != nil)
            saved["title"] = "b"
            let again = try await database.save(saved)
            #expect(again.recordChangeTag != saved.recordChangeTag)
            // A stale copy: its change tag is the one before `again`.
            saved["title"] = "c"
            do {
                _ = try await database.save(saved)
                Issue.record("a stale copy was saved")
            } catch let error as StratusError {
                #expect(error.code == .serverRecordChanged)
                #expect((error.serverRecord?["title"] as? String) == "b")
                #expect((error.clientRecord?["title"] as? String) == "c")
            }
            // A new record object with an existing ID has no change tag to match.
            let fresh = Record(recordType: "Note", recordID: RecordID(recordName: "n1"))
            fresh["title"] = "d"
            do {
                _ = try await database.save(fresh)
                Issue.record("a new object replaced an existing record")
            } catch let error as StratusError {
                #expect(error.code == .serverRecordChanged)
            }
        }
    }

    @Test("saving a zone again succeeds; a record in a deleted zone is zoneNotFound", arguments: TestEngine.all)
    func zones(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let zone = RecordZone(zoneName: "Z")
            _ = try await database.save(zone)
            _ = try await database.save(zone)
            let (saved, _) = try await database.modifyRecordZones(saving: [zone], deleting: [])
            #expect(saved.count == 1)
            try await database.deleteRecordZone(withID: zone.zoneID)
            do {
                _ = try await database.save(Record(recordType: "N", recordID: RecordID(recordName: "x", zoneID: zone.zoneID)))
                Issue.record("a record was saved in a deleted zone")
            } catch let error as StratusError {
                #expect(error.code == .zoneNotFound)
            }
            let zonesResult = try await database.recordZones(for: [zone.zoneID])
            if case .failure(let error)? = zonesResult[zone.zoneID] {
                #expect((error as? StratusError)?.code == .zoneNotFound)
            } else { Issue.record("a deleted zone was fetched") }
        }
    }

    @Test("the iOS 15 async calls' results, used as CloudKit code destructures them", arguments: TestEngine.all)
    func asyncShapes(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let zone = try await database.save(RecordZone(zoneName: "Z"))
            let a = Record(recordType: "N", recordID: RecordID(recordName: "a", zoneID: zone.zoneID))
            a["n"] = 1
            let result = try await database.modifyRecords(saving: [a], deleting: [], savePolicy: .changedKeys, atomically: true)
            let savedA = try result.saveResults[a.recordID]!.get()
            #expect(savedA["n"] as? Int == 1)
            let q = Query(recordType: "N", predicate: QueryPredicate(value: true))
            let (matchResults, cursor) = try await database.records(matching: q, inZoneWith: zone.zoneID, desiredKeys: nil, resultsLimit: QueryOperation.maximumResults)
            #expect(matchResults.count == 1 && cursor == nil)
            let records = matchResults.compactMap { try? $0.1.get() }
            #expect(records.count == 1)
            let changes = try await database.recordZoneChanges(inZoneWith: zone.zoneID, since: nil)
            let mods = changes.modificationResultsByID.values.compactMap { try? $0.get().record }
            #expect(mods.count == 1 && !changes.moreComing)
            _ = try await database.deleteRecord(withID: a.recordID)
            let after = try await database.recordZoneChanges(inZoneWith: zone.zoneID, since: changes.changeToken)
            #expect(after.deletions.map(\.recordID) == [a.recordID] && after.deletions.first?.recordType == "N")
            let dbChanges = try await database.databaseChanges(since: nil)
            #expect(dbChanges.modifications.map(\.zoneID).contains(zone.zoneID))
        }
    }

    @Test("desiredKeys: [] fetches no fields, [\"n\"] only n", arguments: TestEngine.all)
    func desiredKeysEmpty(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let a = Record(recordType: "N", recordID: RecordID(recordName: "a"))
            a["n"] = 1
            a["m"] = "x"
            _ = try await database.save(a)
            let fetched = try await database.records(for: [a.recordID], desiredKeys: [])
            let r = try fetched[a.recordID]!.get()
            #expect(r.allKeys().isEmpty)
            let some = try await database.records(for: [a.recordID], desiredKeys: ["n"])
            #expect(try some[a.recordID]!.get().allKeys() == ["n"])
        }
    }

    @Test("a fetch with a missing ID: the found records and partialFailure with unknownItem for the missing one", arguments: TestEngine.all)
    func fetchMissing(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let a = Record(recordType: "N", recordID: RecordID(recordName: "a"))
            _ = try await database.save(a)
            let op = FetchRecordsOperation(recordIDs: [a.recordID, RecordID(recordName: "missing")])
            let got = Collected<([Record.ID: Record]?, Error?)>((nil, nil))
            await run(database) { finish in
                op.fetchRecordsCompletionBlock = { byID, error in got.value = (byID, error); finish() }
                return op
            }
            #expect(got.value.0?.count == 1)
            let error = got.value.1 as? StratusError
            #expect(error?.code == .partialFailure)
            #expect((error?.partialErrorsByItemID?[RecordID(recordName: "missing")] as? StratusError)?.code == .unknownItem)
        }
    }
    // #expect(error == CKError(.zoneNotFound)) against a test double's error; Set<CKError>
    @Test("errors compare and hash as CKError's: by code and userInfo")
    func errorEquality() {
        let bare = StratusError(.notAuthenticated)
        #expect(bare == StratusError(.notAuthenticated))
        #expect(bare.hashValue == StratusError(.notAuthenticated).hashValue)
        #expect(bare != StratusError(.zoneBusy))
        let retry = StratusError(.zoneBusy, userInfo: [ErrorRetryAfterKey: 3])
        #expect(retry == StratusError(.zoneBusy, userInfo: [ErrorRetryAfterKey: 3.0]))
        #expect(retry != StratusError(.zoneBusy, userInfo: [ErrorRetryAfterKey: 5]))
        #expect(retry != StratusError(.zoneBusy))
        let id = RecordID(recordName: "a")
        let partial = StratusError(.partialFailure, userInfo: [PartialErrorsByItemIDKey: [id: StratusError(.unknownItem)]])
        #expect(partial == StratusError(.partialFailure, userInfo: [PartialErrorsByItemIDKey: [id: StratusError(.unknownItem)]]))
        #expect(partial != StratusError(.partialFailure, userInfo: [PartialErrorsByItemIDKey: [id: StratusError(.zoneNotFound)]]))
        let record = Record(recordType: "Note", recordID: id)
        let conflict = StratusError(.serverRecordChanged, userInfo: [RecordChangedErrorServerRecordKey: record])
        #expect(conflict == StratusError(.serverRecordChanged, userInfo: [RecordChangedErrorServerRecordKey: record]))
        #expect(conflict != StratusError(.serverRecordChanged, userInfo: [RecordChangedErrorServerRecordKey: record.copy() as! Record]),
                "records compare as CKRecords do, by identity")
        #expect(Set([bare, StratusError(.notAuthenticated), retry]).count == 2)
    }
}
