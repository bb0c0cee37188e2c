import Foundation
import Stratus
import StratusTestSupport
import Testing

// Conflict handling as CloudKit's documentation and sync libraries write it, ported
// mechanically: CKModifyRecordsOperation with perRecordSaveBlock, savePolicy and isAtomic;
// serverRecordChanged read through serverRecord / clientRecord / ancestorRecord (and through the
// NSError userInfo keys); a merge saved on the server record; partialErrorsByItemID walked with
// AnyHashable keys; the older completion blocks. The CloudKit original is in the comments.

final class ConflictingSaver: @unchecked Sendable {
    let database: Database
    private let lock = NSLock()
    private(set) var savedByID: [Record.ID: Record] = [:]
    private(set) var errorsByID: [Record.ID: Error] = [:]
    private(set) var order: [String] = []

    init(database: Database) {
        self.database = database
    }

    // let op = CKModifyRecordsOperation(recordsToSave: records, recordIDsToDelete: ids)
    // op.savePolicy = policy; op.isAtomic = atomic
    // op.perRecordSaveBlock = { recordID, result in … }
    // op.modifyRecordsResultBlock = { result in … }
    func save(_ records: [Record], deleting ids: [Record.ID] = [], policy: ModifyRecordsOperation.RecordSavePolicy = .ifServerRecordUnchanged,
              atomic: Bool = true, completion: @escaping (Result<Void, Error>) -> Void) {
        let op = ModifyRecordsOperation(recordsToSave: records, recordIDsToDelete: ids)
        op.savePolicy = policy
        op.isAtomic = atomic
        op.perRecordSaveBlock = { recordID, result in
            self.lock.lock(); defer { self.lock.unlock() }
            self.order.append("save \(recordID.recordName)")
            switch result {
            case .success(let record): self.savedByID[recordID] = record
            case .failure(let error): self.errorsByID[recordID] = error
            }
        }
        op.perRecordDeleteBlock = { recordID, result in
            self.lock.lock(); defer { self.lock.unlock() }
            self.order.append("delete \(recordID.recordName)")
            if case .failure(let error) = result { self.errorsByID[recordID] = error }
        }
        op.modifyRecordsResultBlock = { result in
            self.lock.lock()
            self.order.append("done")
            self.lock.unlock()
            completion(result)
        }
        database.add(op)
    }

    func save(_ records: [Record], deleting ids: [Record.ID] = [], policy: ModifyRecordsOperation.RecordSavePolicy = .ifServerRecordUnchanged,
              atomic: Bool = true) async -> Result<Void, Error> {
        await awaitCallback { done in self.save(records, deleting: ids, policy: policy, atomic: atomic) { done($0) } }
    }

    /// Three-way merge of a `tags` list and last-writer-wins on `title`, as a notes app does it:
    /// what the client added since its ancestor, on top of the server's record.
    static func merge(_ error: StratusError) -> Record? {
        guard error.code == .serverRecordChanged,
              let server = error.serverRecord, let client = error.clientRecord
        else { return nil }
        let ancestorTags = (error.ancestorRecord?["tags"] as? [String]) ?? []
        let clientTags = (client["tags"] as? [String]) ?? []
        let serverTags = (server["tags"] as? [String]) ?? []
        let added = clientTags.filter { !ancestorTags.contains($0) && !serverTags.contains($0) }
        server["tags"] = (serverTags + added) as RecordValue
        for key in client.changedKeys() where key != "tags" {
            server[key] = client[key]
        }
        return server
    }
}

@Suite("Conflict resolution as CloudKit programs write it", .timeLimit(.minutes(30)))
struct ConflictResolutionTests {
    @Test("serverRecordChanged carries the server, client and ancestor records; a merge on the server record saves", arguments: TestEngine.all)
    func threeWayMerge(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let zone = try await database.save(RecordZone(zoneName: "Notes"))
            let original = Record(recordType: "Note", recordID: Record.ID(recordName: "n1", zoneID: zone.zoneID))
            original["title"] = "Groceries"
            original["tags"] = ["food"]
            let saved = try await database.save(original)

            // Two devices start from the same fetched record.
            let phone = try await database.record(for: saved.recordID)
            let laptop = try await database.record(for: saved.recordID)
            laptop["tags"] = ["food", "weekly"]
            let laptopSaved = try await database.save(laptop)
            #expect(laptopSaved.recordChangeTag != saved.recordChangeTag)

            phone["tags"] = ["food", "urgent"]
            phone["title"] = "Groceries!"
            let saver = ConflictingSaver(database: database)
            let result = await saver.save([phone])
            guard case .failure(let error) = result, let ckError = error as? StratusError else {
                Issue.record("the stale save succeeded")
                return
            }
            #expect(ckError.code == .partialFailure)
            let itemError = try #require(saver.errorsByID[phone.recordID] as? StratusError)
            #expect(itemError.code == .serverRecordChanged)
            #expect(itemError.serverRecord?.recordChangeTag == laptopSaved.recordChangeTag)
            #expect(itemError.serverRecord?["tags"] as? [String] == ["food", "weekly"])
            #expect(itemError.clientRecord?["tags"] as? [String] == ["food", "urgent"])
            #expect(itemError.clientRecord?.recordChangeTag == saved.recordChangeTag)
            #expect(itemError.ancestorRecord?["tags"] as? [String] == ["food"])
            #expect(itemError.ancestorRecord?["title"] as? String == "Groceries")
            #expect(itemError.serverRecord?.changedKeys().isEmpty == true, "the server record is as fetched")

            // The same, read through NSError's userInfo.
            let userInfo = (itemError as NSError).userInfo
            #expect((userInfo[RecordChangedErrorServerRecordKey] as? Record)?.recordChangeTag == laptopSaved.recordChangeTag)
            #expect((userInfo[RecordChangedErrorClientRecordKey] as? Record)?.recordID == phone.recordID)
            #expect((userInfo[RecordChangedErrorAncestorRecordKey] as? Record)?["tags"] as? [String] == ["food"])

            // partialErrorsByItemID is keyed by AnyHashable, as CKError's.
            for (key, value) in ckError.partialErrorsByItemID ?? [:] {
                let recordID = try #require(key as? Record.ID)
                #expect(recordID == phone.recordID && (value as? StratusError)?.code == .serverRecordChanged)
            }

            let merged = try #require(ConflictingSaver.merge(itemError))
            #expect(merged.changedKeys().sorted() == ["tags", "title"])
            let second = await saver.save([merged])
            #expect((try? second.get()) != nil)
            let final = try await database.record(for: phone.recordID)
            #expect(final["tags"] as? [String] == ["food", "weekly", "urgent"])
            #expect(final["title"] as? String == "Groceries!")
        }
    }

    @Test("the ancestor of a conflict holds the parent the client's copy was fetched with, not the move the client made", arguments: TestEngine.all)
    func ancestorKeepsTheFetchedParent(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let zone = try await database.save(RecordZone(zoneName: "Folders"))
            let folders = ["a", "b"].map { Record(recordType: "Folder", recordID: Record.ID(recordName: $0, zoneID: zone.zoneID)) }
            let doc = Record(recordType: "Doc", recordID: Record.ID(recordName: "doc", zoneID: zone.zoneID))
            doc.setParent(folders[0])
            doc["title"] = "v1"
            _ = try await database.modifyRecords(saving: folders + [doc], deleting: [])
            let mine = try await database.record(for: doc.recordID)
            let theirs = try await database.record(for: doc.recordID)
            theirs["title"] = "theirs"
            _ = try await database.save(theirs)
            mine.setParent(folders[1])
            let refused = await caughtError { try await database.save(mine) }
            let conflict = try #require(stratusError(refused))
            #expect(conflict.code == .serverRecordChanged, "\(conflict)")
            #expect(conflict.ancestorRecord?.parent?.recordID.recordName == "a", "the parent as fetched")
            #expect(conflict.clientRecord?.parent?.recordID.recordName == "b" && conflict.serverRecord?.parent?.recordID.recordName == "a")
            #expect(conflict.ancestorRecord?["title"] as? String == "v1")
        }
    }

    @Test("save policies on a stale copy: changedKeys writes only what changed, allKeys every key the record holds (no more), ifServerRecordUnchanged refuses", arguments: TestEngine.all)
    func savePolicies(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let zone = try await database.save(RecordZone(zoneName: "Notes"))
            let id = Record.ID(recordName: "n1", zoneID: zone.zoneID)
            let record = Record(recordType: "Note", recordID: id)
            record["title"] = "One"
            record["body"] = "first body"
            record["count"] = 1
            _ = try await database.save(record)
            let stale = try await database.record(for: id)
            let fresh = try await database.record(for: id)
            fresh["body"] = "second body"
            fresh["count"] = 2
            _ = try await database.save(fresh)

            stale["title"] = "Stale title"
            let saver = ConflictingSaver(database: database)
            _ = await saver.save([stale.copy() as! Record], policy: .changedKeys)
            var now = try await database.record(for: id)
            #expect(now["title"] as? String == "Stale title" && now["body"] as? String == "second body" && now["count"] as? Int == 2)

            // A brand-new CKRecord with an existing ID: with .changedKeys it updates the keys it sets.
            let blind = Record(recordType: "Note", recordID: id)
            blind["count"] = 3
            _ = await saver.save([blind], policy: .changedKeys)
            now = try await database.record(for: id)
            #expect(now["count"] as? Int == 3 && now["title"] as? String == "Stale title")

            _ = await saver.save([stale], policy: .allKeys)
            now = try await database.record(for: id)
            #expect(now["title"] as? String == "Stale title" && now["body"] as? String == "first body" && now["count"] as? Int == 1)

            // "If you use desiredKeys to request a subset of keys during a fetch operation, saving
            // that same record modifies only those keys" (CKRecordSaveAllKeys): the others stay.
            let partial = try #require(try await database.records(for: [id], desiredKeys: ["title"])[id]?.get())
            partial["title"] = "Partial"
            let other = Record(recordType: "Note", recordID: id)
            other["extra"] = "added elsewhere"
            _ = await saver.save([other], policy: .changedKeys)
            _ = await saver.save([partial], policy: .allKeys)
            now = try await database.record(for: id)
            #expect(now["title"] as? String == "Partial" && now["body"] as? String == "first body" && now["count"] as? Int == 1)
            #expect(now["extra"] as? String == "added elsewhere", "a key only the server holds remains unchanged")

            let refused = await saver.save([Record(recordType: "Note", recordID: id)])
            #expect((try? refused.get()) == nil)
            #expect((saver.errorsByID[id] as? StratusError)?.code == .serverRecordChanged)
        }
    }

    @Test("an atomic request in a custom zone: one conflict, the others batchRequestFailed, deletions too; the older blocks report the same", arguments: TestEngine.all)
    func atomicBatch(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let zone = try await database.save(RecordZone(zoneName: "Notes"))
            func note(_ name: String) -> Record {
                let record = Record(recordType: "Note", recordID: Record.ID(recordName: name, zoneID: zone.zoneID))
                record["title"] = name
                return record
            }
            _ = try await database.modifyRecords(saving: [note("a"), note("b"), note("gone")], deleting: [])
            let conflict = note("a")          // a new record with a taken name
            let fresh = note("c")
            let saver = ConflictingSaver(database: database)
            let result = await saver.save([conflict, fresh], deleting: [Record.ID(recordName: "gone", zoneID: zone.zoneID)])
            #expect((try? result.get()) == nil)
            #expect((saver.errorsByID[conflict.recordID] as? StratusError)?.code == .serverRecordChanged)
            #expect((saver.errorsByID[fresh.recordID] as? StratusError)?.code == .batchRequestFailed)
            #expect((saver.errorsByID[Record.ID(recordName: "gone", zoneID: zone.zoneID)] as? StratusError)?.code == .batchRequestFailed)
            #expect(saver.order.last == "done" && saver.order.count == 4)
            if case .failure(let error as StratusError) = result {
                #expect(error.code == .partialFailure)
                #expect(error.partialErrorsByItemID?.count == 3)
                #expect((error.partialErrorsByItemID?[fresh.recordID] as? StratusError)?.code == .batchRequestFailed)
            }
            #expect((try? await database.record(for: Record.ID(recordName: "gone", zoneID: zone.zoneID))) != nil, "nothing was deleted")

            // op.perRecordCompletionBlock = { record, error in … }; op.modifyRecordsCompletionBlock = { saved, deleted, error in … }
            let op = ModifyRecordsOperation(recordsToSave: [note("a"), note("d")], recordIDsToDelete: nil)
            let perRecord = Collected<[String]>([])
            let final = Collected<([Record]?, [Record.ID]?, Error?)>((nil, nil, nil))
            await run(database) { finish in
                op.perRecordCompletionBlock = { record, error in
                    perRecord.value.append("\(record.recordID.recordName) \((error as? StratusError)?.code.rawValue ?? 0)")
                }
                op.modifyRecordsCompletionBlock = { saved, deleted, error in
                    final.value = (saved, deleted, error)
                    finish()
                }
                return op
            }
            #expect(perRecord.value.sorted() == ["a 14", "d 22"])
            #expect((final.value.2 as? StratusError)?.code == .partialFailure)
            #expect(final.value.0?.isEmpty ?? true, "an atomic failure saves nothing")
        }
    }

    @Test("a non-atomic batch: each item on its own; the final error lists only the failures", arguments: TestEngine.all)
    func nonAtomicBatch(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let zone = try await database.save(RecordZone(zoneName: "Notes"))
            let existing = Record(recordType: "Note", recordID: Record.ID(recordName: "a", zoneID: zone.zoneID))
            _ = try await database.save(existing)
            let saver = ConflictingSaver(database: database)
            let conflict = Record(recordType: "Note", recordID: Record.ID(recordName: "a", zoneID: zone.zoneID))
            let fresh = Record(recordType: "Note", recordID: Record.ID(recordName: "b", zoneID: zone.zoneID))
            let missingZone = Record(recordType: "Note", recordID: Record.ID(recordName: "c", zoneID: RecordZone.ID(zoneName: "Nowhere")))
            let result = await saver.save([conflict, fresh, missingZone], atomic: false)
            #expect(saver.savedByID[fresh.recordID]?.recordChangeTag != nil)
            #expect((saver.errorsByID[conflict.recordID] as? StratusError)?.code == .serverRecordChanged)
            #expect((saver.errorsByID[missingZone.recordID] as? StratusError)?.code == .zoneNotFound)
            guard case .failure(let error as StratusError) = result else {
                Issue.record("no partial failure")
                return
            }
            #expect(error.code == .partialFailure)
            #expect(Set(error.partialErrorsByItemID?.keys.compactMap { $0 as? Record.ID } ?? []) == [conflict.recordID, missingZone.recordID])
            let nsError = error as NSError
            #expect(nsError.domain == "CKErrorDomain" && nsError.code == 2)
            #expect(!nsError.localizedDescription.isEmpty)
        }
    }
}
