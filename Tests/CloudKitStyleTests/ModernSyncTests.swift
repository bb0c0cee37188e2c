import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// A sync engine written against CloudKit's iOS 15 operation API, ported mechanically:
// CKFetchDatabaseChangesOperation and CKFetchRecordZoneChangesOperation with ZoneConfiguration,
// the Result blocks (`recordWasChangedBlock`, `recordZoneFetchResultBlock`, …), tokens kept
// between runs, `fetchAllChanges = false` with `moreComing`, `changeTokenExpired` and a zone
// deleted on another device. The CloudKit original is in the comments.

/// What one sync run saw, in the order the blocks ran.
final class SyncLog: @unchecked Sendable {
    private let lock = NSLock()
    private var _events: [String] = []
    var events: [String] { lock.lock(); defer { lock.unlock() }; return _events }
    func add(_ event: String) { lock.lock(); _events.append(event); lock.unlock() }
}

final class ModernSync: @unchecked Sendable {
    let database: Database
    var databaseToken: ServerChangeToken?
    var zoneTokens: [RecordZone.ID: ServerChangeToken] = [:]
    /// The local cache: record fields by record name, per zone.
    var cache: [RecordZone.ID: [String: [String: String]]] = [:]
    var resultsLimit = 0
    var desiredKeys: [Record.FieldKey]?
    var fetchAllChanges = true
    let log = SyncLog()
    private let lock = NSLock()

    init(database: Database) {
        self.database = database
    }

    // let op = CKFetchDatabaseChangesOperation(previousServerChangeToken: databaseToken)
    func fetchDatabaseChanges(completion: @escaping (Result<(changed: [RecordZone.ID], deleted: [RecordZone.ID], moreComing: Bool), Error>) -> Void) {
        // The blocks run on the operation's thread: what they collect is kept in Boxes.
        let changed = Box<[RecordZone.ID]>([])
        let deleted = Box<[RecordZone.ID]>([])
        let operation = FetchDatabaseChangesOperation(previousServerChangeToken: databaseToken)
        operation.fetchAllChanges = fetchAllChanges
        if resultsLimit > 0 { operation.resultsLimit = resultsLimit }
        operation.recordZoneWithIDChangedBlock = { zoneID in
            self.log.add("zone changed \(zoneID.zoneName)")
            changed.update { $0.append(zoneID) }
        }
        operation.recordZoneWithIDWasDeletedBlock = { zoneID in
            self.log.add("zone deleted \(zoneID.zoneName)")
            deleted.update { $0.append(zoneID) }
        }
        operation.changeTokenUpdatedBlock = { token in
            self.log.add("database token")
            self.databaseToken = token
        }
        operation.fetchDatabaseChangesResultBlock = { result in
            switch result {
            case .success((let token, let moreComing)):
                self.log.add("database done moreComing=\(moreComing)")
                self.databaseToken = token
                for zoneID in deleted.value {
                    self.cache[zoneID] = nil
                    self.zoneTokens[zoneID] = nil
                }
                completion(.success((changed.value, deleted.value, moreComing)))
            case .failure(let error):
                if let ckError = error as? StratusError, ckError.code == .changeTokenExpired {
                    self.databaseToken = nil
                }
                completion(.failure(error))
            }
        }
        database.add(operation)
    }

    // let configuration = CKFetchRecordZoneChangesOperation.ZoneConfiguration()
    // configuration.previousServerChangeToken = zoneTokens[zoneID]
    // let op = CKFetchRecordZoneChangesOperation(recordZoneIDs: zoneIDs, configurationsByRecordZoneID: configurations)
    func fetchZoneChanges(_ zoneIDs: [RecordZone.ID], completion: @escaping (Result<[RecordZone.ID: Bool], Error>) -> Void) {
        var configurations: [RecordZone.ID: FetchRecordZoneChangesOperation.ZoneConfiguration] = [:]
        for zoneID in zoneIDs {
            let configuration = FetchRecordZoneChangesOperation.ZoneConfiguration()
            configuration.previousServerChangeToken = zoneTokens[zoneID]
            if resultsLimit > 0 { configuration.resultsLimit = resultsLimit }
            configuration.desiredKeys = desiredKeys
            configurations[zoneID] = configuration
        }
        let moreComingByZone = Box<[RecordZone.ID: Bool]>([:])
        let operation = FetchRecordZoneChangesOperation(recordZoneIDs: zoneIDs, configurationsByRecordZoneID: configurations)
        operation.fetchAllChanges = fetchAllChanges
        operation.recordWasChangedBlock = { recordID, result in
            switch result {
            case .success(let record):
                self.log.add("changed \(recordID.recordName)")
                var fields: [String: String] = [:]
                for key in record.allKeys() { fields[key] = "\(record[key]!)" }
                self.lock.lock()
                self.cache[recordID.zoneID, default: [:]][recordID.recordName] = fields
                self.lock.unlock()
            case .failure(let error):
                self.log.add("failed \(recordID.recordName) \(error)")
            }
        }
        operation.recordWithIDWasDeletedBlock = { recordID, recordType in
            self.log.add("deleted \(recordID.recordName) \(recordType)")
            self.lock.lock()
            self.cache[recordID.zoneID]?[recordID.recordName] = nil
            self.lock.unlock()
        }
        operation.recordZoneChangeTokensUpdatedBlock = { zoneID, token, _ in
            self.log.add("zone token \(zoneID.zoneName)")
            self.zoneTokens[zoneID] = token
        }
        operation.recordZoneFetchResultBlock = { zoneID, result in
            switch result {
            case .success((let serverChangeToken, _, let moreComing)):
                self.log.add("zone done \(zoneID.zoneName) moreComing=\(moreComing)")
                self.zoneTokens[zoneID] = serverChangeToken
                moreComingByZone.update { $0[zoneID] = moreComing }
            case .failure(let error):
                self.log.add("zone failed \(zoneID.zoneName) \((error as? StratusError)?.code.rawValue ?? -1)")
                if let ckError = error as? StratusError, ckError.code == .changeTokenExpired {
                    self.zoneTokens[zoneID] = nil
                    self.cache[zoneID] = nil
                }
            }
        }
        operation.fetchRecordZoneChangesResultBlock = { result in
            switch result {
            case .success:
                self.log.add("all done")
                completion(.success(moreComingByZone.value))
            case .failure(let error):
                self.log.add("all failed \((error as? StratusError)?.code.rawValue ?? -1)")
                completion(.failure(error))
            }
        }
        database.add(operation)
    }

    func syncDatabase() async throws -> (changed: [RecordZone.ID], deleted: [RecordZone.ID], moreComing: Bool) {
        let result: Result<(changed: [RecordZone.ID], deleted: [RecordZone.ID], moreComing: Bool), Error> = await awaitCallback { done in
            self.fetchDatabaseChanges { done($0) }
        }
        return try result.get()
    }

    func syncZones(_ zoneIDs: [RecordZone.ID]) async -> Result<[RecordZone.ID: Bool], Error> {
        await awaitCallback { done in self.fetchZoneChanges(zoneIDs) { done($0) } }
    }
}

private func note(_ name: String, _ text: String, in zoneID: RecordZone.ID) -> Record {
    let record = Record(recordType: "Note", recordID: Record.ID(recordName: name, zoneID: zoneID))
    record["text"] = text
    record["words"] = text.split(separator: " ").count
    return record
}

@Suite("A sync engine on the iOS 15 change operations, ported from CloudKit", .timeLimit(.minutes(30)))
struct ModernSyncTests {
    @Test("database and zone changes: the blocks run in CloudKit's order, and tokens continue where the last run stopped", arguments: TestEngine.all)
    func changesInOrder(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let work = RecordZone(zoneName: "Work")
            let home = RecordZone(zoneName: "Home")
            let (zones, _) = try await database.modifyRecordZones(saving: [work, home], deleting: [])
            #expect(zones.count == 2)
            _ = try await database.modifyRecords(saving: [note("a", "alpha", in: work.zoneID), note("b", "beta one", in: work.zoneID),
                                                          note("c", "gamma", in: home.zoneID)], deleting: [])
            let sync = ModernSync(database: database)
            let first = try await sync.syncDatabase()
            #expect(Set(first.changed.map(\.zoneName)).isSuperset(of: ["Work", "Home"]) && first.deleted.isEmpty && !first.moreComing)
            #expect(sync.log.events.last == "database done moreComing=false")

            let result = await sync.syncZones([work.zoneID, home.zoneID])
            #expect(try result.get() == [work.zoneID: false, home.zoneID: false])
            #expect(sync.cache[work.zoneID]?["b"] == ["text": "beta one", "words": "2"])
            #expect(sync.cache[home.zoneID]?.keys.sorted() == ["c"])
            let events = sync.log.events.drop { !$0.hasPrefix("changed") }
            #expect(Array(events) == ["changed a", "changed b", "zone done Work moreComing=false", "changed c", "zone done Home moreComing=false", "all done"])

            // Another device changes one note, deletes another, and adds one.
            let other = container.privateCloudDatabase
            let b = try await other.record(for: Record.ID(recordName: "b", zoneID: work.zoneID))
            b["text"] = "beta two"
            _ = try await other.modifyRecords(saving: [b, note("d", "delta", in: work.zoneID)], deleting: [Record.ID(recordName: "a", zoneID: work.zoneID)])

            let again = try await sync.syncDatabase()
            #expect(again.changed.map(\.zoneName) == ["Work"], "only the zone written since the token")
            let before = sync.log.events.count
            _ = try await sync.syncZones(again.changed).get()
            let second = Array(sync.log.events.dropFirst(before))
            #expect(Set(second.prefix(3)) == ["changed b", "changed d", "deleted a Note"])
            #expect(second.suffix(2) == ["zone done Work moreComing=false", "all done"])
            #expect(sync.cache[work.zoneID]?.keys.sorted() == ["b", "d"])

            // Nothing new: empty answers, the same tokens work again.
            #expect(try await sync.syncDatabase().changed.isEmpty)
            let quiet = sync.log.events.count
            _ = try await sync.syncZones([work.zoneID]).get()
            #expect(Array(sync.log.events.dropFirst(quiet)) == ["zone done Work moreComing=false", "all done"])
        }
    }

    @Test("fetchAllChanges = false with a resultsLimit: one batch per run, moreComing true until the last; desiredKeys restrict the records", arguments: TestEngine.all)
    func batchesAndMoreComing(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let work = try await database.save(RecordZone(zoneName: "Work"))
            _ = try await database.modifyRecords(saving: (0..<5).map { note("n\($0)", "note \($0)", in: work.zoneID) }, deleting: [])
            let sync = ModernSync(database: database)
            sync.fetchAllChanges = false
            sync.resultsLimit = 2
            sync.desiredKeys = ["text"]
            var runs: [Bool] = []
            while true {
                let moreComing = try await sync.syncZones([work.zoneID]).get()[work.zoneID] ?? false
                runs.append(moreComing)
                if !moreComing || runs.count > 10 { break }
            }
            #expect(runs == [true, true, false])
            #expect(sync.cache[work.zoneID]?.count == 5)
            #expect(sync.cache[work.zoneID]?.values.allSatisfy { $0.keys.sorted() == ["text"] } == true)

            // With fetchAllChanges (the default), the tokens between batches are reported as they go.
            let all = ModernSync(database: database)
            all.resultsLimit = 2
            _ = try await all.syncZones([work.zoneID]).get()
            let tokens = all.log.events.filter { $0.hasPrefix("zone token") || $0.hasPrefix("zone done") }
            #expect(tokens == ["zone token Work", "zone token Work", "zone done Work moreComing=false"])
        }
    }

    @Test("a zone deleted on another device: the database changes report it, its zone fetch fails with zoneNotFound inside a partial failure", arguments: TestEngine.all)
    func zoneDeletedElsewhere(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let work = try await database.save(RecordZone(zoneName: "Work"))
            let home = try await database.save(RecordZone(zoneName: "Home"))
            _ = try await database.save(note("a", "alpha", in: work.zoneID))
            let sync = ModernSync(database: database)
            _ = try await sync.syncDatabase()
            _ = try await sync.syncZones([work.zoneID, home.zoneID]).get()
            #expect(sync.cache[work.zoneID]?.count == 1)

            try await database.deleteRecordZone(withID: work.zoneID)
            let changes = try await sync.syncDatabase()
            #expect(changes.deleted == [work.zoneID] && changes.changed.isEmpty)
            #expect(sync.cache[work.zoneID] == nil)

            // A stale client still asks for the deleted zone's changes.
            sync.zoneTokens[work.zoneID] = nil
            let result = await sync.syncZones([work.zoneID, home.zoneID])
            guard case .failure(let error) = result, let ckError = error as? StratusError else {
                Issue.record("the fetch succeeded")
                return
            }
            #expect(ckError.code == .partialFailure)
            #expect((ckError.partialErrorsByItemID?[work.zoneID] as? StratusError)?.code == .zoneNotFound)
            #expect(ckError.partialErrorsByItemID?[home.zoneID] == nil)
            #expect(sync.log.events.contains("zone failed Work 26") && sync.log.events.contains("zone done Home moreComing=false"))
        }
    }

    @Test("a token of a zone deleted and created again has expired: changeTokenExpired, then a fetch from the start", arguments: TestEngine.all)
    func expiredToken(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let work = try await database.save(RecordZone(zoneName: "Work"))
            _ = try await database.save(note("a", "alpha", in: work.zoneID))
            let sync = ModernSync(database: database)
            _ = try await sync.syncZones([work.zoneID]).get()
            try await database.deleteRecordZone(withID: work.zoneID)
            _ = try await database.save(RecordZone(zoneName: "Work"))
            _ = try await database.save(note("b", "beta", in: work.zoneID))

            let result = await sync.syncZones([work.zoneID])
            #expect(sync.log.events.contains("zone failed Work \(StratusError.Code.changeTokenExpired.rawValue)"))
            if case .failure(let error) = result {
                let partial = (error as? StratusError)?.partialErrorsByItemID?[work.zoneID] as? StratusError
                #expect(partial?.code == .changeTokenExpired)
            } else {
                Issue.record("an expired token was accepted")
            }
            #expect(sync.zoneTokens[work.zoneID] == nil)
            _ = try await sync.syncZones([work.zoneID]).get()
            #expect(sync.cache[work.zoneID]?.keys.sorted() == ["b"])
        }
    }

    @Test("the async forms: recordZoneChanges(inZoneWith:since:) and databaseChanges(since:) page with moreComing", arguments: TestEngine.all)
    func asyncChanges(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let work = try await database.save(RecordZone(zoneName: "Work"))
            _ = try await database.modifyRecords(saving: (0..<3).map { note("n\($0)", "note \($0)", in: work.zoneID) }, deleting: [])
            var token: ServerChangeToken?
            var seen: [String] = []
            var batches = 0
            repeat {
                let changes = try await database.recordZoneChanges(inZoneWith: work.zoneID, since: token, desiredKeys: ["text"], resultsLimit: 2)
                for (id, result) in changes.modificationResultsByID {
                    let modification = try result.get()
                    #expect(modification.record.allKeys() == ["text"])
                    seen.append(id.recordName)
                }
                token = changes.changeToken
                batches += 1
                if !changes.moreComing { break }
            } while batches < 10
            #expect(seen.sorted() == ["n0", "n1", "n2"] && batches == 2)

            _ = try await database.deleteRecord(withID: Record.ID(recordName: "n1", zoneID: work.zoneID))
            let after = try await database.recordZoneChanges(inZoneWith: work.zoneID, since: token)
            #expect(after.modificationResultsByID.isEmpty)
            #expect(after.deletions.map { "\($0.recordID.recordName) \($0.recordType)" } == ["n1 Note"])

            let databaseChanges = try await database.databaseChanges(since: nil)
            #expect(databaseChanges.modifications.map(\.zoneID).contains(work.zoneID) && !databaseChanges.moreComing)
        }
    }
}
