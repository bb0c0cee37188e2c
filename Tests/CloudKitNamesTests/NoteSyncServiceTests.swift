import CloudKit
import Foundation
import StratusTestSupport
import Testing

// A notes service written as CloudKit apps write one: `import CloudKit`, the `CK` names, the
// operation API with its per-item and final blocks, a custom zone synced by change tokens kept
// with NSKeyedArchiver, conflicts resolved from `CKError.serverRecord`. Nothing in
// `NoteSyncService` is Stratus's own spelling (this file does not import Stratus): the test gives
// `CKContainer(identifier:storePath:userName:)` its store and user, with `try`.

final class NoteSyncService {
    let database: CKDatabase
    let zoneID = CKRecordZone.ID(zoneName: "Notes", ownerName: CKCurrentUserDefaultName)
    private var zoneChangeToken: Data?

    init(container: CKContainer) {
        database = container.privateCloudDatabase
    }

    func createZone(completion: @escaping (Error?) -> Void) {
        let zone = CKRecordZone(zoneID: zoneID)
        let operation = CKModifyRecordZonesOperation(recordZonesToSave: [zone], recordZoneIDsToDelete: nil)
        operation.modifyRecordZonesResultBlock = { result in
            switch result {
            case .success: completion(nil)
            case .failure(let error): completion(error)
            }
        }
        operation.qualityOfService = .userInitiated
        database.add(operation)
    }

    func newNote(title: String, tags: [String], due: Date, place: CLLocation?, attachment: URL?) -> CKRecord {
        let record = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: UUID().uuidString, zoneID: zoneID))
        record["title"] = title as CKRecordValue
        record["tags"] = tags as CKRecordValue
        record["due"] = due as CKRecordValue
        record["revision"] = 1 as CKRecordValue
        record["place"] = place
        if let attachment {
            record["attachment"] = CKAsset(fileURL: attachment)
        }
        return record
    }

    func save(_ records: [CKRecord], completion: @escaping (Result<[CKRecord], Error>) -> Void) {
        let operation = CKModifyRecordsOperation(recordsToSave: records, recordIDsToDelete: nil)
        operation.savePolicy = .ifServerRecordUnchanged
        operation.isAtomic = true
        var saved: [CKRecord] = []
        var firstError: Error?
        operation.perRecordSaveBlock = { _, result in
            switch result {
            case .success(let record): saved.append(record)
            case .failure(let error): firstError = firstError ?? error
            }
        }
        operation.modifyRecordsResultBlock = { result in
            switch result {
            case .success: completion(.success(saved))
            case .failure(let error): completion(.failure(firstError ?? error))
            }
        }
        database.add(operation)
    }

    /// Changes the title of a note this device fetched earlier; if another device changed it
    /// since, keeps the other device's other fields and this device's title.
    func rename(_ note: CKRecord, to title: String) async throws -> CKRecord {
        note["title"] = title as CKRecordValue
        do {
            return try await database.save(note)
        } catch let error as CKError where error.code == .serverRecordChanged {
            guard let serverRecord = error.serverRecord else { throw error }
            serverRecord["title"] = title as CKRecordValue
            let revision = (serverRecord["revision"] as? Int64) ?? 0
            serverRecord["revision"] = (revision + 1) as CKRecordValue
            let (saveResults, _) = try await database.modifyRecords(saving: [serverRecord], deleting: [], savePolicy: .changedKeys)
            return try saveResults[serverRecord.recordID]!.get()
        }
    }

    /// Every title, sorted, read in pages of `pageSize` through the query's cursors.
    func allTitles(pageSize: Int, completion: @escaping (Result<[String], Error>) -> Void) {
        var titles: [String] = []
        func run(_ operation: CKQueryOperation) {
            operation.desiredKeys = ["title"]
            operation.resultsLimit = pageSize
            operation.zoneID = zoneID
            operation.recordMatchedBlock = { _, result in
                if case .success(let record) = result, let title = record["title"] as? String {
                    titles.append(title)
                }
            }
            operation.queryResultBlock = { result in
                switch result {
                case .success(let cursor?): run(CKQueryOperation(cursor: cursor))
                case .success(nil): completion(.success(titles))
                case .failure(let error): completion(.failure(error))
                }
            }
            database.add(operation)
        }
        let query = CKQuery(recordType: "Note", predicate: NSPredicate(value: true))
        query.sortDescriptors = [NSSortDescriptor(key: "title", ascending: true)]
        run(CKQueryOperation(query: query))
    }

    /// What changed in the zone since the last call: the token is kept archived, as apps keep
    /// it in UserDefaults.
    func fetchChanges(completion: @escaping (Result<(changed: [CKRecord], deleted: [CKRecord.ID]), Error>) -> Void) {
        var previousToken: CKServerChangeToken?
        if let data = zoneChangeToken {
            previousToken = try? NSKeyedUnarchiver.unarchivedObject(ofClass: CKServerChangeToken.self, from: data)
        }
        let configuration = CKFetchRecordZoneChangesOperation.ZoneConfiguration(previousServerChangeToken: previousToken)
        let operation = CKFetchRecordZoneChangesOperation(recordZoneIDs: [zoneID], configurationsByRecordZoneID: [zoneID: configuration])
        var changed: [CKRecord] = []
        var deleted: [CKRecord.ID] = []
        operation.recordWasChangedBlock = { _, result in
            if case .success(let record) = result { changed.append(record) }
        }
        operation.recordWithIDWasDeletedBlock = { recordID, _ in deleted.append(recordID) }
        operation.recordZoneFetchResultBlock = { [weak self] _, result in
            if case .success(let (token, _, _)) = result {
                self?.zoneChangeToken = try? NSKeyedArchiver.archivedData(withRootObject: token, requiringSecureCoding: true)
            }
        }
        operation.fetchRecordZoneChangesResultBlock = { result in
            switch result {
            case .success: completion(.success((changed, deleted)))
            case .failure(let error): completion(.failure(error))
            }
        }
        database.add(operation)
    }

    func delete(_ recordIDs: [CKRecord.ID]) async throws {
        let (_, deleteResults) = try await database.modifyRecords(saving: [], deleting: recordIDs)
        for (_, result) in deleteResults { try result.get() }
    }
}

/// The completion-handler calls above, awaited by the tests.
private func awaiting<T>(_ body: (@escaping (Result<T, Error>) -> Void) -> Void) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        body { continuation.resume(with: $0) }
    }
}

@Suite struct NoteSyncServiceTests {
    private func openService(_ store: TemporaryStore, user: String = "ada") throws -> NoteSyncService {
        NoteSyncService(container: try CKContainer(identifier: "iCloud.com.example.notes", storePath: store.path(), userName: user))
    }

    private func createZone(_ service: NoteSyncService) async throws {
        try await awaiting { (done: @escaping (Result<Void, Error>) -> Void) in
            service.createZone { error in done(error.map { .failure($0) } ?? .success(())) }
        }
    }

    @Test func notesSavedWithEveryKindOfValueComeBackAsTheyWereSaved() async throws {
        try await TemporaryStore.with { store in
            let service = try openService(store)
            try await createZone(service)
            let attachment = try store.writeFile("scan.bin", patternBytes(count: 3000))
            let due = Date(timeIntervalSince1970: 1_800_000_000)
            let note = service.newNote(title: "Water the plants", tags: ["home", "weekly"], due: due,
                                       place: CLLocation(latitude: 52.52, longitude: 13.405), attachment: attachment)
            let saved = try await awaiting { service.save([note], completion: $0) }
            #expect(saved.count == 1)
            #expect(saved.first?.recordChangeTag != nil)

            let fetched = try await service.database.record(for: note.recordID)
            #expect(fetched["title"] as? String == "Water the plants")
            #expect(fetched["tags"] as? [String] == ["home", "weekly"])
            #expect(fetched["due"] as? Date == due)
            #expect(fetched["revision"] as? Int64 == 1)
            let place = try #require(fetched["place"] as? CLLocation)
            #expect(place.coordinate.latitude == 52.52 && place.coordinate.longitude == 13.405)
            let asset = try #require(fetched["attachment"] as? CKAsset)
            let url = try #require(asset.fileURL)
            #expect(try Data(contentsOf: url) == patternBytes(count: 3000))
        }
    }

    @Test func aRenameThatMeetsAnotherDevicesChangeKeepsBoth() async throws {
        try await TemporaryStore.with { store in
            let phone = try openService(store)
            let laptop = try openService(store)
            try await createZone(phone)
            let note = phone.newNote(title: "Draft", tags: [], due: Date(), place: nil, attachment: nil)
            _ = try await awaiting { phone.save([note], completion: $0) }

            // Both devices hold the note as first saved; the laptop changes its tags first.
            let laptopCopy = try await laptop.database.record(for: note.recordID)
            let phoneCopy = try await phone.database.record(for: note.recordID)
            laptopCopy["tags"] = ["work"] as CKRecordValue
            _ = try await laptop.database.save(laptopCopy)

            let renamed = try await phone.rename(phoneCopy, to: "Final")
            #expect(renamed["title"] as? String == "Final")
            #expect(renamed["tags"] as? [String] == ["work"])
            #expect(renamed["revision"] as? Int64 == 2)
        }
    }

    @Test func aStaleSaveFailsWithTheServerRecordInItsError() async throws {
        try await TemporaryStore.with { store in
            let service = try openService(store)
            try await createZone(service)
            let note = service.newNote(title: "v1", tags: [], due: Date(), place: nil, attachment: nil)
            let stale = try #require(try await awaiting { service.save([note], completion: $0) }.first)
            let fresh = try await service.database.record(for: note.recordID)
            fresh["title"] = "v2" as CKRecordValue
            _ = try await service.database.save(fresh)

            stale["title"] = "v1 edited" as CKRecordValue
            let result: Result<[CKRecord], Error> = await withCheckedContinuation { continuation in
                service.save([stale]) { continuation.resume(returning: $0) }
            }
            guard case .failure(let error) = result else {
                Issue.record("a save over a newer record succeeded")
                return
            }
            let ckError = try #require(error as? CKError)
            #expect(ckError.code == .serverRecordChanged)
            #expect(ckError.serverRecord?["title"] as? String == "v2")
            #expect(ckError.clientRecord?["title"] as? String == "v1 edited")
            let nsError = error as NSError
            #expect(nsError.domain == CKErrorDomain)
            #expect(nsError.code == CKError.Code.serverRecordChanged.rawValue)
            #expect(nsError.userInfo[CKRecordChangedErrorServerRecordKey] is CKRecord)
        }
    }

    @Test func titlesPageThroughCursorsInOrder() async throws {
        try await TemporaryStore.with { store in
            let service = try openService(store)
            try await createZone(service)
            let titles = (0..<23).map { String(format: "Note %02d", $0) }
            let notes = titles.shuffled().map { service.newNote(title: $0, tags: [], due: Date(), place: nil, attachment: nil) }
            _ = try await awaiting { service.save(notes, completion: $0) }

            let read = try await awaiting { service.allTitles(pageSize: 5, completion: $0) }
            #expect(read == titles)
        }
    }

    @Test func zoneChangesComeOnceEachWithTheArchivedToken() async throws {
        try await TemporaryStore.with { store in
            let service = try openService(store)
            try await createZone(service)
            let notes = (0..<3).map { service.newNote(title: "n\($0)", tags: [], due: Date(), place: nil, attachment: nil) }
            _ = try await awaiting { service.save(notes, completion: $0) }

            let first = try await awaiting { service.fetchChanges(completion: $0) }
            #expect(Set(first.changed.map(\.recordID)) == Set(notes.map(\.recordID)))
            #expect(first.deleted.isEmpty)

            let nothing = try await awaiting { service.fetchChanges(completion: $0) }
            #expect(nothing.changed.isEmpty && nothing.deleted.isEmpty)

            try await service.delete([notes[0].recordID])
            let renamed = try await service.rename(try await service.database.record(for: notes[1].recordID), to: "n1 renamed")
            let second = try await awaiting { service.fetchChanges(completion: $0) }
            #expect(second.changed.map(\.recordID) == [renamed.recordID])
            #expect(second.deleted == [notes[0].recordID])
        }
    }

    @Test func anotherUsersPrivateZoneIsNotReachable() async throws {
        try await TemporaryStore.with { store in
            let ada = try openService(store, user: "ada")
            try await createZone(ada)
            let note = ada.newNote(title: "Ada's", tags: [], due: Date(), place: nil, attachment: nil)
            _ = try await awaiting { ada.save([note], completion: $0) }

            let grace = try openService(store, user: "grace")
            do {
                _ = try await grace.database.record(for: note.recordID)
                Issue.record("another user's private record was fetched")
            } catch let error as CKError {
                #expect(error.code == .zoneNotFound || error.code == .unknownItem)
            }
        }
    }
}
