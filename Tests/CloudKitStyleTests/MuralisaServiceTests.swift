import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// The CloudKit service of a street-art guide (Muralisa: modelCloudKit.swift, `CloudKitService`),
// ported mechanically. Its CloudKit habits: the container opened in a stored property
// (`try!`, README "two calls need try"); predicates mixing a list membership with a record-ID
// exclusion and a number (`ANY Tag IN %@ AND recordID != %@ AND Status == 1`, the lower-case
// `ANY Artist in %@` over references, `NOT (recordID IN %@) AND Status == 1` with `[CKRecord.ID]`,
// and a radius with a `CGFloat` AND-ed with `Status == 1`); query operations with
// `resultsLimit` and `desiredKeys` read through `recordMatchedBlock`/`queryResultBlock` and
// through the older `recordFetchedBlock`/`queryCompletionBlock`; `record.setValue(newValue,
// forKey:)` with a value typed `Any`; `CKError(.unknownItem)` thrown by the app itself; and
// `CKFetchRecordsOperation` with `perRecordResultBlock`/`fetchRecordsResultBlock`. CoreLocation
// becomes Stratus's `Location`. The CloudKit original is in the comments.

enum FetchError: Error {
    case invalidReference
}

final class MuralisaService: @unchecked Sendable {
    static let recordType = "Work"
    // let container = CKContainer(identifier: "iCloud.muralisa2")
    let container: Container
    let databasePublic: Database

    init(container: Container) {
        self.container = container
        self.databasePublic = container.publicCloudDatabase
    }

    // let predicate = NSPredicate(format: "ANY Tag IN %@ AND recordID != %@ AND Status == 1", tags, exceptionRecordID)
    func fetchRecordByTags(_ tags: [String], except exceptionRecordName: String) async throws -> [Record] {
        let exceptionRecordID = Record.ID(recordName: exceptionRecordName)
        let predicate = try QueryPredicate(format: "ANY Tag IN %@ AND recordID != %@ AND Status == 1", tags, exceptionRecordID)
        return try await run(Query(recordType: "Artwork", predicate: predicate), limit: 9)
    }

    // let predicate = NSPredicate(format: "ANY Artist in %@ AND recordID != %@ AND Status == 1", artistsReference, exceptionRecordID)
    func fetchRecordsByArtistExceptOne(artistsReference: [Record.Reference], except exceptionRecordName: String) async throws -> [Record] {
        let exceptionRecordID = Record.ID(recordName: exceptionRecordName)
        let predicate = try QueryPredicate(format: "ANY Artist in %@ AND recordID != %@ AND Status == 1", artistsReference, exceptionRecordID)
        return try await run(Query(recordType: Self.recordType, predicate: predicate), limit: 6)
    }

    // let predicate = NSPredicate(format: "distanceToLocation:fromLocation:(Location, %@) < %f AND Status == 1", location, radius)
    func fetchRecordsByDistance(ofType recordType: String, userPosition: Location?, radius: CGFloat) async throws -> [Record] {
        guard let location = userPosition else { return [] }
        let predicate = try QueryPredicate(format: "distanceToLocation:fromLocation:(Location, %@) < %f AND Status == 1", location, radius)
        return try await run(Query(recordType: recordType, predicate: predicate), limit: 6)
    }

    private func run(_ query: Query, limit: Int) async throws -> [Record] {
        let queryOperation = QueryOperation(query: query)
        queryOperation.resultsLimit = limit
        queryOperation.desiredKeys = ["Image_thumbnail"]
        var resultArray: [Record] = []
        return try await withCheckedThrowingContinuation { continuation in
            queryOperation.recordMatchedBlock = { (id, record) in
                switch record {
                case .success(let result): resultArray.append(result)
                case .failure(let error): print("error fetching records: \(error)")
                }
            }
            queryOperation.queryResultBlock = { result in
                switch result {
                case .success: continuation.resume(returning: resultArray)
                case .failure(let error): continuation.resume(throwing: error)
                }
            }
            databasePublic.add(queryOperation)
        }
    }

    // let predicate = NSPredicate(format: "NOT (recordID IN %@) AND Status == 1", recordIDs)
    // queryOperation.recordFetchedBlock = { record in completion(record) }
    // queryOperation.queryCompletionBlock = { cursor, error in if let error = error { completion(nil) } }
    func fetchSingleWorkExcluding(recordNamesToExclude: [String], completion: @escaping (Record?) -> Void) {
        let recordIDs = recordNamesToExclude.map { Record.ID(recordName: $0) }
        let predicate = try! QueryPredicate(format: "NOT (recordID IN %@) AND Status == 1", recordIDs)
        let query = Query(recordType: Self.recordType, predicate: predicate)
        let queryOperation = QueryOperation(query: query)
        queryOperation.resultsLimit = 1
        queryOperation.recordFetchedBlock = { record in
            completion(record)
        }
        queryOperation.queryCompletionBlock = { cursor, error in
            if let error = error {
                print("Error fetching record: \(error.localizedDescription)")
                completion(nil)
            }
        }
        databasePublic.add(queryOperation)
    }

    func fetchRecordFromReference(from reference: Record.Reference?) async throws -> Record {
        guard let recordID = reference?.recordID else { throw FetchError.invalidReference }
        return try await databasePublic.record(for: recordID)
    }

    // record.setValue(newValue, forKey: key); self.databasePublic.save(record) { savedRecord, saveError in … }
    func updateRecordField(recordName: String, newValue: Any, forKey key: String, done: @escaping @Sendable (Error?) -> Void) {
        let recordID = Record.ID(recordName: recordName)
        databasePublic.fetch(withRecordID: recordID) { record, error in
            if let error = error {
                done(error)
                return
            }
            if let record = record {
                record.setValue(newValue, forKey: key)
                self.databasePublic.save(record) { savedRecord, saveError in
                    done(saveError)
                }
            }
        }
    }

    // continuation.resume(throwing: CKError(.unknownItem))
    func saveRecord(_ record: Record) async throws -> Record {
        try await withCheckedThrowingContinuation { continuation in
            databasePublic.save(record) { returnedRecord, returnedError in
                if let returnedError = returnedError {
                    continuation.resume(throwing: returnedError)
                } else if let returnedRecord = returnedRecord {
                    continuation.resume(returning: returnedRecord)
                } else {
                    continuation.resume(throwing: StratusError(.unknownItem))
                }
            }
        }
    }

    func fetchRecordsByIDsAndDesiredKeys(by recordIDs: [Record.ID], desiredKeys: [String]) async throws -> [Record] {
        try await withCheckedThrowingContinuation { continuation in
            var fetchedRecords: [Record] = []
            let operation = FetchRecordsOperation(recordIDs: recordIDs)
            operation.desiredKeys = desiredKeys
            operation.perRecordResultBlock = { recordID, result in
                switch result {
                case .success(let record): fetchedRecords.append(record)
                case .failure(let error): print("Failed to fetch record \(recordID): \(error)")
                }
            }
            operation.fetchRecordsResultBlock = { result in
                switch result {
                case .success: continuation.resume(returning: fetchedRecords)
                case .failure(let error): continuation.resume(throwing: error)
                }
            }
            databasePublic.add(operation)
        }
    }
}

@Suite("Muralisa's CloudKit service, ported")
struct MuralisaServiceTests {
    private func seed(_ service: MuralisaService) async throws {
        let artists = ["banksy", "invader"].map { Record(recordType: "Artist", recordID: Record.ID(recordName: $0)) }
        for artist in artists { _ = try await service.saveRecord(artist) }
        let works: [(String, [String], String, Int, Double)] = [
            ("w1", ["stencil", "rat"], "banksy", 1, 48.8566),
            ("w2", ["stencil"], "banksy", 1, 48.8600),
            ("w3", ["mosaic"], "invader", 1, 48.8700),
            ("w4", ["stencil"], "banksy", 0, 48.8566),
        ]
        for (name, tags, artist, status, latitude) in works {
            let record = Record(recordType: "Work", recordID: Record.ID(recordName: name))
            record["Tag"] = tags
            record["Artist"] = [Record.Reference(recordID: Record.ID(recordName: artist), action: .none)]
            record["Status"] = status
            record["Location"] = Location(latitude: latitude, longitude: 2.3522)
            record["Image_thumbnail"] = Data([UInt8(name.count)])
            record["Title"] = name.uppercased()
            _ = try await service.saveRecord(record)
            let artwork = Record(recordType: "Artwork", recordID: Record.ID(recordName: "a-" + name))
            artwork["Tag"] = tags
            artwork["Status"] = status
            _ = try await service.saveRecord(artwork)
        }
    }

    @Test("membership, exclusion by record ID and a status, with desired keys only", arguments: TestEngine.all)
    func membershipAndExclusion(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let service = MuralisaService(container: container)
            try await seed(service)
            let byTags = try await service.fetchRecordByTags(["stencil", "mosaic"], except: "a-w1")
            #expect(byTags.map(\.recordID.recordName).sorted() == ["a-w2", "a-w3"])

            let banksy = Record.Reference(recordID: Record.ID(recordName: "banksy"), action: .none)
            let byArtist = try await service.fetchRecordsByArtistExceptOne(artistsReference: [banksy], except: "w2")
            #expect(byArtist.map(\.recordID.recordName) == ["w1"])
            #expect(byArtist.first?["Title"] == nil)
            #expect(byArtist.first?["Image_thumbnail"] as? Data == Data([2]))

            // The radius is in kilometres (see NearbyQueriesTests): 1 km holds w1 and w2 (400 m
            // apart), not w3 (1.5 km); w4 is there but not published.
            let nearby = try await service.fetchRecordsByDistance(ofType: "Work", userPosition: Location(latitude: 48.8566, longitude: 2.3522), radius: 1)
            #expect(nearby.map(\.recordID.recordName).sorted() == ["w1", "w2"])
        }
    }

    @Test("NOT (recordID IN %@) with record IDs excludes them, through the older query blocks", arguments: TestEngine.all)
    func excludingRecordIDs(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let service = MuralisaService(container: container)
            try await seed(service)
            let record: Record? = await awaitCallback { done in
                service.fetchSingleWorkExcluding(recordNamesToExclude: ["w1", "w2"]) { done($0) }
            }
            #expect(record?.recordID.recordName == "w3")
        }
    }

    @Test("a field updated with setValue(_:forKey:) from an Any, fetched back by reference and with desired keys", arguments: TestEngine.all)
    func updateAndFetch(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let service = MuralisaService(container: container)
            try await seed(service)
            let error: Error? = await awaitCallback { done in
                service.updateRecordField(recordName: "w3", newValue: 0 as Any, forKey: "Status") { done($0) }
            }
            #expect(error == nil)
            let fetched = try await service.fetchRecordFromReference(from: Record.Reference(recordID: Record.ID(recordName: "w3"), action: .none))
            #expect(fetched["Status"] as? Int == 0)
            await #expect(throws: FetchError.self) { try await service.fetchRecordFromReference(from: nil) }

            let partial = try await service.fetchRecordsByIDsAndDesiredKeys(by: [Record.ID(recordName: "w1")], desiredKeys: ["Title"])
            #expect(partial.map(\.recordID.recordName) == ["w1"])
            #expect(partial.first?["Title"] as? String == "W1")
            #expect(partial.first?["Status"] == nil)
            // A missing ID fails the final block with partialFailure, so the helper throws.
            do {
                _ = try await service.fetchRecordsByIDsAndDesiredKeys(by: [Record.ID(recordName: "w1"), Record.ID(recordName: "missing")], desiredKeys: ["Title"])
                Issue.record("a missing record should fail the fetch")
            } catch let error as StratusError {
                #expect(error.code == .partialFailure)
                #expect((error.partialErrorsByItemID?[Record.ID(recordName: "missing")] as? StratusError)?.code == .unknownItem)
            }
        }
    }
}
