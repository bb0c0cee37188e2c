import Foundation
import Stratus
import StratusTestSupport
import Synchronization
import Testing

// CloudKit's default zone has no atomic capability: `isAtomic = true` (the default) has no
// effect there, and each item of a modify request succeeds or fails on its own. Code written
// against CloudKit relies on it (a conflict on one record does not stop the others), ported
// mechanically from a conflict-handling sample.

/// What a modify operation reported, item by item and as a whole.
private final class ModifyReport: @unchecked Sendable {
    // @unchecked: the operation's blocks run one at a time; read after the final block.
    var saved: [Record.ID: Record] = [:]
    var failed: [Record.ID: Error] = [:]
    var deleted: [Record.ID] = []
    var final: Error?
}

private func modify(_ database: Database, saving records: [Record], deleting ids: [Record.ID] = [], atomic: Bool = true) async -> ModifyReport {
    let report = ModifyReport()
    let operation = ModifyRecordsOperation(recordsToSave: records, recordIDsToDelete: ids)
    operation.isAtomic = atomic
    operation.perRecordSaveBlock = { recordID, result in
        switch result {
        case .success(let record): report.saved[recordID] = record
        case .failure(let error): report.failed[recordID] = error
        }
    }
    operation.perRecordDeleteBlock = { recordID, result in
        switch result {
        case .success: report.deleted.append(recordID)
        case .failure(let error): report.failed[recordID] = error
        }
    }
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        operation.modifyRecordsResultBlock = { result in
            if case .failure(let error) = result { report.final = error }
            continuation.resume()
        }
        database.add(operation)
    }
    return report
}

private func task(_ name: String, in zoneID: RecordZone.ID = RecordZone.default().zoneID) -> Record {
    let record = Record(recordType: "Task", recordID: Record.ID(recordName: name, zoneID: zoneID))
    record["title"] = name
    record["done"] = false
    return record
}

@Suite("The default zone is not atomic, as CloudKit's")
struct DefaultZoneAtomicityTests {
    @Test("isAtomic = true in the default zone: the new record is saved, the stale one fails alone, the request is partialFailure", arguments: TestEngine.all)
    func staleAndNewInDefaultZone(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let defaultZone = RecordZone.default().zoneID
            let x1 = try #require(await modify(database, saving: [task("x", in: defaultZone)]).saved.values.first)
            let xCopy = x1.copy() as! Record
            x1["title"] = "x1"
            #expect(await modify(database, saving: [x1]).final == nil)
            xCopy["title"] = "x stale"
            let y = task("y", in: defaultZone)
            _ = try await database.save(task("gone", in: defaultZone))

            let mixed = await modify(database, saving: [xCopy, y], deleting: [Record.ID(recordName: "gone")])
            #expect(mixed.saved[y.recordID] != nil, "the other record is saved")
            #expect((mixed.failed[xCopy.recordID] as? StratusError)?.code == .serverRecordChanged)
            #expect(mixed.failed[y.recordID] == nil)
            #expect(mixed.deleted == [Record.ID(recordName: "gone")], "the delete is applied too")
            #expect((mixed.final as? StratusError)?.code == .partialFailure)
            #expect((try await database.record(for: y.recordID))["title"] as? String == "y")
            #expect((try await database.record(for: xCopy.recordID))["title"] as? String == "x1")
        }
    }

    @Test("a record refused before it reaches the store fails alone in the default zone; in an atomic zone it fails the request", arguments: TestEngine.all)
    func refusedRecordFailsAlone(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let badName = String(repeating: "n", count: 300)   // record names hold at most 255 characters
            let report = await modify(database, saving: [task(badName), task("fine")])
            #expect((report.failed[Record.ID(recordName: badName)] as? StratusError)?.code == .invalidArguments)
            #expect(report.saved[Record.ID(recordName: "fine")] != nil)

            let work = try await database.save(RecordZone(zoneName: "Work"))
            let atomic = await modify(database, saving: [task(badName, in: work.zoneID), task("fine", in: work.zoneID)])
            #expect((atomic.failed[Record.ID(recordName: "fine", zoneID: work.zoneID)] as? StratusError)?.code == .batchRequestFailed)
            #expect(atomic.saved.isEmpty)
        }
    }

    @Test("a custom zone keeps CloudKit's atomic behaviour: one conflict, nothing written, the others batchRequestFailed", arguments: TestEngine.all)
    func customZoneStaysAtomic(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let work = try await database.save(RecordZone(zoneName: "Work"))
            let b = try await database.save(task("b", in: work.zoneID))
            let stale = b.copy() as! Record
            b["title"] = "b from phone"
            _ = try await database.save(b)
            stale["title"] = "stale"
            let fresh = task("d", in: work.zoneID)
            let atomic = await modify(database, saving: [stale, fresh])
            #expect(atomic.saved.isEmpty)
            #expect((atomic.failed[fresh.recordID] as? StratusError)?.code == .batchRequestFailed)
            #expect((try? await database.record(for: fresh.recordID)) == nil)
        }
    }

    // CKModifyRecordsOperation's atomicity is per zone (CKSyncEngine calls its batches
    // "atomicByZone"): a conflict fails its own zone's items, not another zone's.
    @Test("an atomic request over several zones is atomic per zone: the conflicting zone writes nothing, the others are written", arguments: TestEngine.all)
    func atomicPerZone(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let work = try await database.save(RecordZone(zoneName: "Work"))
            let home = try await database.save(RecordZone(zoneName: "Home"))
            let b = try await database.save(task("b", in: work.zoneID))
            let stale = b.copy() as! Record
            b["title"] = "b from phone"
            _ = try await database.save(b)
            stale["title"] = "stale"
            let workFresh = task("w", in: work.zoneID)
            let homeFresh = task("h", in: home.zoneID)
            let loose = task("d", in: RecordZone.default().zoneID)
            let report = await modify(database, saving: [stale, workFresh, homeFresh, loose])
            #expect((report.failed[stale.recordID] as? StratusError)?.code == .serverRecordChanged)
            #expect((report.failed[workFresh.recordID] as? StratusError)?.code == .batchRequestFailed, "the conflict's zone is atomic")
            #expect(report.saved[homeFresh.recordID] != nil, "another zone's items are written")
            #expect(report.saved[loose.recordID] != nil, "the default zone's items are written one by one")
            #expect((report.final as? StratusError)?.code == .partialFailure)
            #expect((report.final as? StratusError)?.partialErrorsByItemID?.count == 2)
            #expect((try? await database.record(for: workFresh.recordID)) == nil)
            #expect((try? await database.record(for: homeFresh.recordID)) != nil)
        }
    }

    @Test("the default zone reports no atomic capability; custom zones do, and the private database's custom zones the sharing capabilities", arguments: TestEngine.all)
    func capabilities(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            #expect(!RecordZone.default().capabilities.contains(.atomic))
            try await database.save(RecordZone(zoneName: "Work"))
            let zones = try await database.allRecordZones()
            let defaultZone = try #require(zones.first { $0.zoneID == RecordZone.ID.default })
            #expect(!defaultZone.capabilities.contains(.atomic) && defaultZone.capabilities.contains(.fetchChanges))
            #expect(zones.first { $0.zoneID.zoneName == "Work" }?.capabilities.contains(.atomic) == true)
            #expect(try await database.recordZone(for: .default).capabilities.contains(.atomic) == false)
            // if zone.capabilities.contains(.sharing) { … }: the private database's custom zones can be shared, as in
            // CloudKit; the default zone cannot, nor any zone of the public database.
            #expect(zones.first { $0.zoneID.zoneName == "Work" }?.capabilities.isSuperset(of: [.sharing, .zoneWideSharing]) == true)
            #expect(!defaultZone.capabilities.contains(.sharing) && !defaultZone.capabilities.contains(.zoneWideSharing))
            #expect(try await database.save(RecordZone(zoneName: "Home")).capabilities.contains(.sharing))
            let publicZones = try await container.publicCloudDatabase.allRecordZones()
            #expect(!publicZones.isEmpty && publicZones.allSatisfy { !$0.capabilities.contains(.sharing) })
        }
    }
}
