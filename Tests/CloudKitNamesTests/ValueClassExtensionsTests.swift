import CloudKit
import CoreLocation
import Foundation
import StratusTestSupport
import Testing

// CKAsset, CKRecord.Reference and CLLocation are classes on Apple's platforms, and apps extend
// them with convenience initialisers (forms taken from public CloudKit apps): an asset made
// from bytes written to a temporary file, a reference with the app's usual action, a location
// from a coordinate. These extensions compile only where the types are classes.

extension CKAsset {
    convenience init(writing data: Data, named name: String) throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent(name)
        try data.write(to: url)
        self.init(fileURL: url)
    }

    var contents: Data? { fileURL.flatMap { FileManager.default.contents(atPath: $0.path) } }
}

extension CKRecord.Reference {
    convenience init(itemOwnerName: String) {
        self.init(recordID: CKRecord.ID(recordName: itemOwnerName), action: .deleteSelf)
    }
}

extension CLLocation {
    convenience init(_ coordinate: CLLocationCoordinate2D) {
        self.init(latitude: coordinate.latitude, longitude: coordinate.longitude)
    }
}

@Suite struct ValueClassExtensionsTests {
    @Test("convenience initialisers apps add to CKAsset, CKRecord.Reference and CLLocation make values that save and fetch")
    func convenienceInitialisersMakeStorableValues() async throws {
        try await TemporaryStore.with { store in
            let database = try CKContainer(identifier: "iCloud.com.example.items", storePath: store.path(), userName: "ada").privateCloudDatabase
            let owner = CKRecord(recordType: "Owner", recordID: CKRecord.ID(recordName: "owner-1"))
            let item = CKRecord(recordType: "Item", recordID: CKRecord.ID(recordName: "item-1"))
            let bytes = Data("photo bytes \(UUID())".utf8)
            item["photo"] = try CKAsset(writing: bytes, named: "item-\(UUID()).jpg")
            item["owner"] = CKRecord.Reference(itemOwnerName: "owner-1")
            item["place"] = CLLocation(CLLocationCoordinate2DMake(52.52, 13.405))
            _ = try await database.modifyRecords(saving: [owner, item], deleting: [])

            let fetched = try await database.record(for: item.recordID)
            #expect((fetched["photo"] as? CKAsset)?.contents == bytes)
            let owned = try #require(fetched["owner"] as? CKRecord.Reference)
            #expect(owned == CKRecord.Reference(itemOwnerName: "owner-1") && owned.action == .deleteSelf)
            let place = try #require(fetched["place"] as? CLLocation)
            #expect(place.coordinate.latitude == 52.52 && place.coordinate.longitude == 13.405 && place.verticalAccuracy == -1)

            _ = try await database.deleteRecord(withID: owner.recordID)
            await #expect(throws: CKError.self, "a deleteSelf reference goes with its target") {
                _ = try await database.record(for: item.recordID)
            }
        }
    }

    @Test("references and locations archive with NSSecureCoding and copy as themselves, equal by value")
    func referencesAndLocationsArchive() throws {
        let reference = CKRecord.Reference(recordID: CKRecord.ID(recordName: "list", zoneID: CKRecordZone.ID(zoneName: "Lists")), action: .deleteSelf)
        let archived = try NSKeyedArchiver.archivedData(withRootObject: reference, requiringSecureCoding: true)
        let unarchived = try #require(try NSKeyedUnarchiver.unarchivedObject(ofClass: CKRecord.Reference.self, from: archived))
        #expect(unarchived == reference && unarchived.recordID.zoneID.zoneName == "Lists" && unarchived.action == .deleteSelf)
        #expect(unarchived !== reference && reference.copy() as? CKRecord.Reference === reference)

        let place = CLLocation(coordinate: CLLocationCoordinate2DMake(-33.86, 151.21), altitude: 58, horizontalAccuracy: 5, verticalAccuracy: 3,
                               course: 270, speed: 1.25, timestamp: Date(timeIntervalSince1970: 1_700_000_000))
        let data = try NSKeyedArchiver.archivedData(withRootObject: place, requiringSecureCoding: true)
        let back = try #require(try NSKeyedUnarchiver.unarchivedObject(ofClass: CLLocation.self, from: data))
        #expect(back == place && back.course == 270 && back.timestamp == place.timestamp)
        #expect(Set([place, back, CLLocation(latitude: -33.86, longitude: 151.21)]).count == 2)
        #expect(place.description.hasPrefix("<-33.86000000,+151.21000000> +/- 5.00m (speed 1.25 mps / course 270.00)"))

        let asset = CKAsset(fileURL: URL(fileURLWithPath: "/tmp/a.jpg"))
        #expect(asset == CKAsset(fileURL: URL(fileURLWithPath: "/tmp/a.jpg")) && asset.copy() as? CKAsset === asset)
        let remote = CKAsset(downloadURL: "https://cvws.icloud-content.com/B/x", fileChecksum: "AbC=", size: 3, receipt: "r")
        let assetArchive = try NSKeyedArchiver.archivedData(withRootObject: remote, requiringSecureCoding: true)
        #expect(try NSKeyedUnarchiver.unarchivedObject(ofClass: CKAsset.self, from: assetArchive) == remote)

        // A record's values as a dictionary, as encoders that measure a record's size archive them.
        let values: [String: Any] = ["owner": reference, "place": place, "photo": asset, "title": "Tea" as NSString]
        let dictionaryArchive = try NSKeyedArchiver.archivedData(withRootObject: values, requiringSecureCoding: false)
        let read = try #require(try NSKeyedUnarchiver.unarchiveTopLevelObjectWithData(dictionaryArchive) as? [String: Any])
        #expect(read["owner"] as? CKRecord.Reference == reference && read["place"] as? CLLocation == place && read["photo"] as? CKAsset == asset)
    }

    @Test("values keep the JSON their Codable form had as value types")
    func codableFormsAreUnchanged() throws {
        let reference = CKRecord.Reference(recordID: CKRecord.ID(recordName: "r"), action: .none)
        let json = try #require(String(data: try JSONEncoder().encode(reference), encoding: .utf8))
        #expect(json.contains(#""action":0"#) && json.contains(#""recordName":"r""#))
        #expect(try JSONDecoder().decode(CKRecord.Reference.self, from: Data(json.utf8)) == reference)
        let place = CLLocation(latitude: 1, longitude: 2)
        let decoded = try JSONDecoder().decode(CLLocation.self, from: JSONEncoder().encode(place))
        #expect(decoded == place && decoded.speed == -1)
        let asset = CKAsset(downloadURL: "https://cvws.icloud-content.com/B/x", fileChecksum: "AbC=", size: 3, otherMembers: ["k": "1"])
        #expect(try JSONDecoder().decode(CKAsset.self, from: JSONEncoder().encode(asset)) == asset)
    }
}
