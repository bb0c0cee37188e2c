import CloudKit
import Foundation
import StratusTestSupport
import Testing

// A gallery app's record code as Apple's CloudKit documentation writes it ("Creating a record",
// "Fetching records", custom zones, assets, references, encrypted values), written from the
// documentation alone and compiled unchanged under `import CloudKit`.

enum ArtworkKind: String {
    case painting, sculpture
}

final class GalleryStore {
    let container: CKContainer
    let database: CKDatabase
    let zone = CKRecordZone(zoneName: "Gallery")

    init(container: CKContainer) {
        self.container = container
        self.database = container.privateCloudDatabase
    }

    func makeArtwork(name: String, artist: String, year: Int, price: Double, kind: ArtworkKind,
                     onDisplay: Bool, location: CLLocation?, image: URL?) -> CKRecord {
        let recordID = CKRecord.ID(recordName: name.lowercased().replacingOccurrences(of: " ", with: "-"), zoneID: zone.zoneID)
        let artwork = CKRecord(recordType: "Artwork", recordID: recordID)
        artwork["title"] = name
        artwork["artist"] = artist as CKRecordValue
        artwork["year"] = year
        artwork["price"] = price
        artwork["kind"] = kind.rawValue
        artwork["onDisplay"] = onDisplay
        artwork["acquired"] = Date(timeIntervalSince1970: 1_600_000_000)
        artwork["keywords"] = ["oil", "landscape"]
        artwork["dimensions"] = [120, 80]
        artwork["thumbnail"] = Data([0xFF, 0xD8, 0xFF])
        artwork.setObject(NSNumber(value: 3), forKey: "rating")
        if let location {
            artwork["location"] = location
        }
        if let image {
            artwork["image"] = CKAsset(fileURL: image)
        }
        artwork.encryptedValues["insuranceNumber"] = "INS-4711"
        return artwork
    }

    func createZone(completion: @escaping (Error?) -> Void) {
        database.save(zone) { _, error in
            completion(error)
        }
    }

    func save(_ record: CKRecord, completion: @escaping (CKRecord?, Error?) -> Void) {
        database.save(record, completionHandler: completion)
    }

    func fetch(_ recordID: CKRecord.ID, completion: @escaping (Result<CKRecord, Error>) -> Void) {
        database.fetch(withRecordID: recordID) { record, error in
            if let error = error {
                completion(.failure(error))
            } else if let record = record {
                completion(.success(record))
            }
        }
    }

    func delete(_ recordID: CKRecord.ID, completion: @escaping (Error?) -> Void) {
        database.delete(withRecordID: recordID) { _, error in
            completion(error)
        }
    }
}

@Suite struct GalleryRecordsTests {
    @Test(arguments: TestEngine.all)
    func everyValueTypeComesBackAsItWasSaved(engine: TestEngine) async throws {
        try await withTestCloud(on: engine) { cloud in
            let gallery = GalleryStore(container: try cloud.container())
            let zoneError = await awaitCompletion { gallery.createZone(completion: $0) }
            #expect(zoneError == nil)
            let imageURL = cloud.folder.url("monet.jpg")
            try Data(repeating: 7, count: 2048).write(to: imageURL)
            let artwork = gallery.makeArtwork(name: "Water Lilies", artist: "Claude Monet", year: 1906, price: 1_250.5,
                                              kind: .painting, onDisplay: true,
                                              location: CLLocation(latitude: 48.86, longitude: 2.32), image: imageURL)
            #expect(Set(artwork.allKeys()).isSuperset(of: ["title", "artist", "year", "price", "image", "rating"]))
            #expect(artwork.changedKeys().contains("title"))

            let (saved, saveError) = await awaitCompletion { done in gallery.save(artwork) { done(($0, $1)) } }
            #expect(saveError == nil)
            #expect(saved?.recordChangeTag != nil)
            #expect(saved?.creationDate != nil)

            let fetched = try await awaitCompletion { gallery.fetch(artwork.recordID, completion: $0) }.get()
            #expect(fetched.recordType == "Artwork")
            #expect(fetched.recordID.zoneID == gallery.zone.zoneID)
            #expect(fetched["title"] as? String == "Water Lilies")
            #expect(fetched["year"] as? Int == 1906)
            #expect(fetched["year"] as? Int64 == 1906)
            #expect(fetched["price"] as? Double == 1_250.5)
            #expect(fetched["onDisplay"] as? Bool == true)
            #expect(fetched["rating"] as? Int == 3)
            #expect((fetched["rating"] as? NSNumber)?.intValue == 3)
            #expect(fetched["acquired"] as? Date == Date(timeIntervalSince1970: 1_600_000_000))
            #expect(fetched["keywords"] as? [String] == ["oil", "landscape"])
            #expect(fetched["dimensions"] as? [Int] == [120, 80])
            #expect(fetched["thumbnail"] as? Data == Data([0xFF, 0xD8, 0xFF]))
            #expect(ArtworkKind(rawValue: fetched["kind"] as? String ?? "") == .painting)
            #expect(fetched.object(forKey: "artist") as? String == "Claude Monet")
            let location = try #require(fetched["location"] as? CLLocation)
            #expect(location.coordinate.latitude == 48.86)
            #expect(fetched.encryptedValues["insuranceNumber"] as? String == "INS-4711")
            let asset = try #require(fetched["image"] as? CKAsset)
            let data = try Data(contentsOf: try #require(asset.fileURL))
            #expect(data == Data(repeating: 7, count: 2048))

            // Typed reads through the generic subscript CloudKit's Swift overlay has.
            let title: String? = fetched["title"]
            #expect(title == "Water Lilies")
            let year: Int? = fetched["year"]
            #expect(year == 1906)

            let deleteError = await awaitCompletion { gallery.delete(artwork.recordID, completion: $0) }
            #expect(deleteError == nil)
            let gone = await awaitCompletion { gallery.fetch(artwork.recordID, completion: $0) }
            guard case .failure(let error) = gone else {
                Issue.record("a deleted record was fetched")
                return
            }
            #expect((error as? CKError)?.code == .unknownItem)
            #expect((error as NSError).domain == CKErrorDomain)
        }
    }

    @Test(arguments: TestEngine.all)
    func zonesAreMadeListedAndDeletedWithTheAsyncAPI(engine: TestEngine) async throws {
        try await withTestCloud(on: engine) { cloud in
            let database = try cloud.container().privateCloudDatabase
            #expect(database.databaseScope == .private)
            let albums = CKRecordZone(zoneName: "Albums")
            let archive = CKRecordZone(zoneID: CKRecordZone.ID(zoneName: "Archive", ownerName: CKCurrentUserDefaultName))
            let (saveResults, _) = try await database.modifyRecordZones(saving: [albums, archive], deleting: [])
            #expect(saveResults.count == 2)
            let savedAlbums = try saveResults[albums.zoneID]!.get()
            #expect(savedAlbums.capabilities.contains(.fetchChanges))
            #expect(savedAlbums.capabilities.contains(.atomic))

            let zones = try await database.allRecordZones()
            #expect(Set(zones.map(\.zoneID.zoneName)).isSuperset(of: ["Albums", "Archive", CKRecordZone.ID.defaultZoneName]))
            let fetched = try await database.recordZone(for: albums.zoneID)
            #expect(fetched.zoneID == albums.zoneID)
            #expect(CKRecordZone.default().zoneID == CKRecordZone.ID.default)

            let deletedID = try await database.deleteRecordZone(withID: archive.zoneID)
            #expect(deletedID == archive.zoneID)
            do {
                _ = try await database.recordZone(for: archive.zoneID)
                Issue.record("a deleted zone was fetched")
            } catch let error as CKError {
                #expect(error.code == .zoneNotFound)
            }

            // The operation API with its per-zone blocks and the older completion block.
            let operation = CKFetchRecordZonesOperation.fetchAllRecordZonesOperation()
            var perZone: [CKRecordZone.ID] = []
            operation.perRecordZoneResultBlock = { zoneID, result in
                if case .success = result { perZone.append(zoneID) }
            }
            let zonesByID: [CKRecordZone.ID: CKRecordZone]? = await awaitCompletion { done in
                operation.fetchRecordZonesCompletionBlock = { zonesByID, error in
                    #expect(error == nil)
                    done(zonesByID)
                }
                database.add(operation)
            }
            #expect(zonesByID?[albums.zoneID] != nil)
            #expect(Set(perZone) == Set(zonesByID?.keys.map { $0 } ?? []))

            let modify = CKModifyRecordZonesOperation(recordZonesToSave: nil, recordZoneIDsToDelete: [albums.zoneID])
            let deleted: [CKRecordZone.ID]? = await awaitCompletion { done in
                modify.modifyRecordZonesCompletionBlock = { _, deletedIDs, error in
                    #expect(error == nil)
                    done(deletedIDs)
                }
                database.add(modify)
            }
            #expect(deleted == [albums.zoneID])
        }
    }

    @Test(arguments: TestEngine.all)
    func referencesParentsAndCascadingDeletes(engine: TestEngine) async throws {
        try await withTestCloud(on: engine) { cloud in
            let database = try cloud.container().privateCloudDatabase
            let zone = CKRecordZone(zoneName: "Lists")
            _ = try await database.save(zone)
            let list = CKRecord(recordType: "List", recordID: CKRecord.ID(zoneID: zone.zoneID))
            list["name"] = "Groceries"
            let item = CKRecord(recordType: "Item", zoneID: zone.zoneID)
            item["name"] = "Milk"
            item["list"] = CKRecord.Reference(record: list, action: .deleteSelf)
            item.setParent(list)
            let other = CKRecord(recordType: "Item", zoneID: zone.zoneID)
            other["name"] = "Bread"
            other["list"] = CKRecord.Reference(recordID: list.recordID, action: .deleteSelf)
            other.parent = CKRecord.Reference(recordID: list.recordID, action: .none)

            let (saved, _) = try await database.modifyRecords(saving: [item, list, other], deleting: [])
            #expect(saved.count == 3)
            let fetchedItem = try await database.record(for: item.recordID)
            let reference = try #require(fetchedItem["list"] as? CKRecord.Reference)
            #expect(reference.recordID == list.recordID)
            #expect(reference.action == .deleteSelf)
            #expect(fetchedItem.parent?.recordID == list.recordID)

            // Children found by their reference, with the reference or the record ID as the value.
            let byReference = CKQuery(recordType: "Item", predicate: NSPredicate(format: "list == %@", CKRecord.Reference(recordID: list.recordID, action: .none)))
            let (matches, _) = try await database.records(matching: byReference, inZoneWith: zone.zoneID)
            #expect(matches.count == 2)
            let byRecordID = CKQuery(recordType: "Item", predicate: NSPredicate(format: "list == %@", list.recordID))
            let (sameMatches, _) = try await database.records(matching: byRecordID, inZoneWith: zone.zoneID)
            #expect(sameMatches.count == 2)

            _ = try await database.deleteRecord(withID: list.recordID)
            let results = try await database.records(for: [item.recordID, other.recordID])
            for (_, result) in results {
                guard case .failure(let error) = result else {
                    Issue.record("a child whose reference deletes itself outlived its parent")
                    continue
                }
                #expect((error as? CKError)?.code == .unknownItem)
            }
        }
    }

    @Test(arguments: TestEngine.all)
    func systemFieldsArchivedAsAppsCacheThem(engine: TestEngine) async throws {
        try await withTestCloud(on: engine) { cloud in
            let database = try cloud.container().privateCloudDatabase
            let note = CKRecord(recordType: "Note")
            note["text"] = "Hello"
            let saved = try await database.save(note)

            // Apps keep a record's system fields (its change tag) and rebuild it for the next save.
            let archiver = NSKeyedArchiver(requiringSecureCoding: true)
            saved.encodeSystemFields(with: archiver)
            archiver.finishEncoding()
            let systemFields = archiver.encodedData

            let unarchiver = try NSKeyedUnarchiver(forReadingFrom: systemFields)
            unarchiver.requiresSecureCoding = true
            let restored = try #require(CKRecord(coder: unarchiver))
            unarchiver.finishDecoding()
            #expect(restored.recordID == saved.recordID)
            #expect(restored.recordChangeTag == saved.recordChangeTag)
            #expect(restored["text"] == nil)
            restored["text"] = "Hello again"
            let resaved = try await database.save(restored)
            #expect(resaved["text"] as? String == "Hello again")

            // The whole record, archived as a root object.
            let data = try NSKeyedArchiver.archivedData(withRootObject: resaved, requiringSecureCoding: true)
            let copy = try #require(try NSKeyedUnarchiver.unarchivedObject(ofClass: CKRecord.self, from: data))
            #expect(copy["text"] as? String == "Hello again")
            #expect(copy.recordChangeTag == resaved.recordChangeTag)

            // A record ID archived for a cache key.
            let idData = try NSKeyedArchiver.archivedData(withRootObject: saved.recordID, requiringSecureCoding: true)
            let id = try NSKeyedUnarchiver.unarchivedObject(ofClass: CKRecord.ID.self, from: idData)
            #expect(id == saved.recordID)
        }
    }
}
