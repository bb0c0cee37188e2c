import Foundation
import Stratus
import StratusStores
import StratusTestSupport
import Testing

// Model types mapped to and from records the way CloudKit apps write them, ported mechanically:
// key-value coding, typed subscripts, `Record.FieldKey` constants, references, locations,
// assets, NSNumber-style reads, copies and equality.

extension Record.FieldKey {
    static let name = "name"
    static let address = "address"
    static let rating = "rating"
    static let visits = "visits"
    static let location = "location"
    static let photo = "photo"
    static let owner = "owner"
    static let open = "open"
}

struct Place: Equatable {
    var name: String
    var rating: Double
    var visits: Int
    var open: Bool
    var latitude: Double
    var longitude: Double

    init(name: String, rating: Double, visits: Int, open: Bool, latitude: Double, longitude: Double) {
        (self.name, self.rating, self.visits, self.open, self.latitude, self.longitude) = (name, rating, visits, open, latitude, longitude)
    }

    init?(record: Record) {
        guard let name = record.value(forKey: .name) as? String,
              let rating = record[.rating] as? Double,
              let visits: Int = record[.visits],
              let open = record[.open] as? Bool,
              let location = record[.location] as? Location
        else { return nil }
        self.init(name: name, rating: rating, visits: visits, open: open,
                  latitude: location.coordinate.latitude, longitude: location.coordinate.longitude)
    }

    func record(in zoneID: RecordZone.ID = RecordZone.default().zoneID) -> Record {
        let record = Record(recordType: "Place", recordID: Record.ID(recordName: name.lowercased(), zoneID: zoneID))
        record.setValuesForKeys([
            .name: name,
            .rating: rating,
            .visits: visits,
            .open: open,
        ])
        record.setObject(Location(latitude: latitude, longitude: longitude), forKey: .location)
        return record
    }
}

@Suite("Records mapped to model types, as CloudKit apps write it")
struct RecordMappingTests {
    @Test("a model type round-trips through a record and a store; numbers and Booleans read back as written", arguments: TestEngine.all)
    func placeRoundTrip(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.publicCloudDatabase
            let cafe = Place(name: "Cafe", rating: 4.5, visits: 12, open: true, latitude: 52.52, longitude: 13.405)
            let saved = try await database.save(cafe.record())
            #expect(Place(record: saved) == cafe)
            let fetched = try await database.record(for: saved.recordID)
            #expect(Place(record: fetched) == cafe)
            #expect(fetched.fieldValue(forKey: .visits) == .int64(12), "an Int is stored as INT64")
            #expect(fetched.fieldValue(forKey: .open) == .int64(1), "a Bool is stored as INT64")
            #expect(fetched[.rating] as? Int == nil, "a DOUBLE 4.5 is no Int, as with NSNumber")
            #expect(fetched[.visits] as? Double == 12.0, "an INT64 reads as Double, as with NSNumber")
        }
    }

    @Test("references, parents, lists and assets, read with as? and the typed subscript", arguments: TestEngine.all)
    func relationsAndLists(engine: TestEngine) async throws {
        try await withStore(on: engine) { location, store in
            let container = try Container(identifier: "iCloud.com.example.places", store: location, userName: "alice")
            let database = container.privateCloudDatabase
            let owner = Record(recordType: "Owner", recordID: Record.ID(recordName: "owner"))
            owner[.name] = "Ann"
            let place = Place(name: "Bakery", rating: 4, visits: 3, open: false, latitude: 1, longitude: 2).record()
            place[.owner] = Record.Reference(record: owner, action: .deleteSelf)
            place.setParent(owner)
            place["tags"] = ["bread", "cake"] as RecordValue
            place["scores"] = [3, 4, 5]
            let photo = try store.writeFile("photo.jpg", Data([1, 2, 3]))
            place[.photo] = Asset(fileURL: photo)
            _ = try await database.modifyRecords(saving: [owner, place], deleting: [])

            let fetched = try await database.record(for: place.recordID)
            let reference = try #require(fetched[.owner] as? Record.Reference)
            #expect(reference.recordID == owner.recordID)
            #expect(reference.action == Record.Reference.Action.deleteSelf)
            #expect(fetched.parent?.recordID == owner.recordID)
            #expect(fetched["tags"] as? [String] == ["bread", "cake"])
            let scores: [Int]? = fetched["scores"]
            #expect(scores == [3, 4, 5])
            let asset = try #require(fetched[.photo] as? Asset)
            #expect(try Data(contentsOf: asset.fileURL!) == Data([1, 2, 3]))
            #expect(Place(record: fetched)?.open == false)

            let copy = fetched.copy() as! Record
            #expect(copy != fetched, "records are equal only to themselves, as NSObjects")
            #expect(copy.recordID == fetched.recordID && copy.recordChangeTag == fetched.recordChangeTag)
            #expect(fetched.allKeys().contains(.photo))
        }
    }
}
