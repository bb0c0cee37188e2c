import CloudKit
import Foundation
import StratusTestSupport
import Testing

// The sync loop Apple's "Maintaining a local cache of CloudKit records" describes: database
// changes, then zone changes, with change tokens archived into UserDefaults-like storage, in
// the operation API (both generations of blocks) and the async API.

/// Where an app keeps its tokens: UserDefaults in an app, a dictionary here.
final class TokenStore {
    private var values: [String: Data] = [:]

    func token(forKey key: String) -> CKServerChangeToken? {
        guard let data = values[key] else { return nil }
        return try? NSKeyedUnarchiver.unarchivedObject(ofClass: CKServerChangeToken.self, from: data)
    }

    func set(_ token: CKServerChangeToken?, forKey key: String) {
        guard let token = token else {
            values[key] = nil
            return
        }
        values[key] = try? NSKeyedArchiver.archivedData(withRootObject: token, requiringSecureCoding: true)
    }
}

final class LocalCache {
    let database: CKDatabase
    let tokens = TokenStore()
    private(set) var records: [CKRecord.ID: CKRecord] = [:]
    private(set) var zoneIDs: Set<CKRecordZone.ID> = []

    init(database: CKDatabase) {
        self.database = database
    }

    func fetchDatabaseChanges(completion: @escaping (Error?) -> Void) {
        var changedZoneIDs: [CKRecordZone.ID] = []
        var deletedZoneIDs: [CKRecordZone.ID] = []
        let operation = CKFetchDatabaseChangesOperation(previousServerChangeToken: tokens.token(forKey: "database"))
        operation.fetchAllChanges = true
        operation.recordZoneWithIDChangedBlock = { zoneID in changedZoneIDs.append(zoneID) }
        operation.recordZoneWithIDWasDeletedBlock = { zoneID in deletedZoneIDs.append(zoneID) }
        operation.recordZoneWithIDWasPurgedBlock = { zoneID in deletedZoneIDs.append(zoneID) }
        operation.changeTokenUpdatedBlock = { [weak self] token in self?.tokens.set(token, forKey: "database") }
        operation.fetchDatabaseChangesCompletionBlock = { [weak self] token, moreComing, error in
            guard let self = self else { return }
            if let error = error {
                completion(error)
                return
            }
            self.tokens.set(token, forKey: "database")
            for zoneID in deletedZoneIDs {
                self.zoneIDs.remove(zoneID)
                self.records = self.records.filter { $0.key.zoneID != zoneID }
            }
            self.zoneIDs.formUnion(changedZoneIDs)
            guard !changedZoneIDs.isEmpty else {
                completion(nil)
                return
            }
            self.fetchZoneChanges(changedZoneIDs, completion: completion)
        }
        operation.qualityOfService = .userInitiated
        database.add(operation)
    }

    private func fetchZoneChanges(_ zoneIDs: [CKRecordZone.ID], completion: @escaping (Error?) -> Void) {
        var configurations: [CKRecordZone.ID: CKFetchRecordZoneChangesOperation.ZoneConfiguration] = [:]
        for zoneID in zoneIDs {
            let configuration = CKFetchRecordZoneChangesOperation.ZoneConfiguration()
            configuration.previousServerChangeToken = tokens.token(forKey: zoneID.zoneName)
            configuration.resultsLimit = 2
            configurations[zoneID] = configuration
        }
        let operation = CKFetchRecordZoneChangesOperation(recordZoneIDs: zoneIDs, configurationsByRecordZoneID: configurations)
        operation.fetchAllChanges = true
        operation.recordChangedBlock = { [weak self] record in
            self?.records[record.recordID] = record
        }
        operation.recordWithIDWasDeletedBlock = { [weak self] recordID, _ in
            self?.records[recordID] = nil
        }
        operation.recordZoneChangeTokensUpdatedBlock = { [weak self] zoneID, token, _ in
            self?.tokens.set(token, forKey: zoneID.zoneName)
        }
        operation.recordZoneFetchCompletionBlock = { [weak self] zoneID, token, _, _, error in
            if let error = error as? CKError, error.code == .changeTokenExpired {
                self?.tokens.set(nil, forKey: zoneID.zoneName)
                return
            }
            self?.tokens.set(token, forKey: zoneID.zoneName)
        }
        operation.fetchRecordZoneChangesCompletionBlock = { error in
            completion(error)
        }
        database.add(operation)
    }
}

@Suite struct ChangeSyncProgramsTests {
    @Test(arguments: TestEngine.all)
    func theCacheFollowsZonesAndRecordsWithArchivedTokens(engine: TestEngine) async throws {
        try await withTestCloud(on: engine) { cloud in
            let database = try cloud.container().privateCloudDatabase
            let cache = LocalCache(database: database)
            let work = CKRecordZone(zoneName: "Work")
            let home = CKRecordZone(zoneName: "Home")
            _ = try await database.modifyRecordZones(saving: [work, home], deleting: [])
            let notes = (1...5).map { index -> CKRecord in
                let record = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "w\(index)", zoneID: work.zoneID))
                record["title"] = "Work \(index)"
                return record
            }
            let homeNote = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "h1", zoneID: home.zoneID))
            homeNote["title"] = "Home"
            _ = try await database.modifyRecords(saving: notes + [homeNote], deleting: [])

            #expect(await awaitCompletion { cache.fetchDatabaseChanges(completion: $0) } == nil)
            #expect(cache.zoneIDs.isSuperset(of: [work.zoneID, home.zoneID]))
            #expect(cache.records.count == 6)

            // Nothing new: nothing fetched.
            #expect(await awaitCompletion { cache.fetchDatabaseChanges(completion: $0) } == nil)
            #expect(cache.records.count == 6)

            let changed = try await database.record(for: notes[0].recordID)
            changed["title"] = "Work 1, revised"
            _ = try await database.modifyRecords(saving: [changed], deleting: [notes[1].recordID])
            _ = try await database.deleteRecordZone(withID: home.zoneID)
            #expect(await awaitCompletion { cache.fetchDatabaseChanges(completion: $0) } == nil)
            #expect(cache.records[notes[0].recordID]?["title"] as? String == "Work 1, revised")
            #expect(cache.records[notes[1].recordID] == nil)
            #expect(cache.records[homeNote.recordID] == nil)
            #expect(!cache.zoneIDs.contains(home.zoneID))
        }
    }

    @Test(arguments: TestEngine.all)
    func theAsyncChangeCalls(engine: TestEngine) async throws {
        try await withTestCloud(on: engine) { cloud in
            let database = try cloud.container().privateCloudDatabase
            let zone = CKRecordZone(zoneName: "Journal")
            _ = try await database.save(zone)
            let entries = (1...3).map { index -> CKRecord in
                let record = CKRecord(recordType: "Entry", recordID: CKRecord.ID(recordName: "e\(index)", zoneID: zone.zoneID))
                record["text"] = "Entry \(index)"
                return record
            }
            _ = try await database.modifyRecords(saving: entries, deleting: [])

            let databaseChanges = try await database.databaseChanges(since: nil)
            #expect(databaseChanges.modifications.map(\.zoneID).contains(zone.zoneID))
            #expect(databaseChanges.deletions.isEmpty)
            #expect(!databaseChanges.moreComing)

            let first = try await database.recordZoneChanges(inZoneWith: zone.zoneID, since: nil)
            #expect(first.modificationResultsByID.count == 3)
            let modification = try #require(try first.modificationResultsByID[entries[0].recordID]?.get())
            #expect(modification.record["text"] as? String == "Entry 1")
            #expect(first.deletions.isEmpty)

            _ = try await database.deleteRecord(withID: entries[2].recordID)
            let second = try await database.recordZoneChanges(inZoneWith: zone.zoneID, since: first.changeToken)
            #expect(second.modificationResultsByID.isEmpty)
            #expect(second.deletions.map(\.recordID) == [entries[2].recordID])
            #expect(second.deletions.first?.recordType == "Entry")

            let limited = try await database.recordZoneChanges(inZoneWith: zone.zoneID, since: nil, desiredKeys: ["text"], resultsLimit: 1)
            #expect(limited.modificationResultsByID.count == 1)
            #expect(limited.moreComing)

            // The iOS 15 blocks of the zone changes operation, one zone at a time.
            let operation = CKFetchRecordZoneChangesOperation(recordZoneIDs: [zone.zoneID], configurationsByRecordZoneID: [
                zone.zoneID: CKFetchRecordZoneChangesOperation.ZoneConfiguration(previousServerChangeToken: first.changeToken, resultsLimit: nil, desiredKeys: nil),
            ])
            var deleted: [(CKRecord.ID, CKRecord.RecordType)] = []
            operation.recordWasChangedBlock = { recordID, result in
                Issue.record("\(recordID) reported changed: \(result)")
            }
            operation.recordWithIDWasDeletedBlock = { deleted.append(($0, $1)) }
            var zoneResult: (serverChangeToken: CKServerChangeToken, clientChangeTokenData: Data?, moreComing: Bool)?
            operation.recordZoneFetchResultBlock = { _, result in zoneResult = try? result.get() }
            let final: Result<Void, Error> = await awaitCompletion { done in
                operation.fetchRecordZoneChangesResultBlock = { done($0) }
                database.add(operation)
            }
            try final.get()
            #expect(deleted.map(\.0) == [entries[2].recordID])
            #expect(zoneResult?.moreComing == false)
        }
    }
}
