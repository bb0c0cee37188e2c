import CloudKit
import CoreLocation
import Foundation
import Stratus
import StratusTestSupport
import Testing

// CloudKit code imports CoreLocation for the values of its location fields; on Linux that
// import is Stratus's CoreLocation module, which the CloudKit module brings too.
@Suite struct CoreLocationNamesTests {
    @Test func locationFieldsKeepCoreLocationsNames() async throws {
        try await TemporaryStore.with { store in
            let database = try CKContainer(identifier: "iCloud.com.example.places", storePath: store.path(), userName: "ada").privateCloudDatabase
            let place = CKRecord(recordType: "Place")
            let coordinate = CLLocationCoordinate2DMake(52.52, 13.405)
            #expect(CLLocationCoordinate2DIsValid(coordinate))
            #expect(!CLLocationCoordinate2DIsValid(CLLocationCoordinate2D(latitude: 91, longitude: 0)))
            let accuracy: CLLocationAccuracy = 5, speed: CLLocationSpeed = 1.5, course: CLLocationDirection = 90
            place["where"] = CLLocation(coordinate: coordinate, altitude: 34, horizontalAccuracy: accuracy, verticalAccuracy: 10,
                                        course: course, speed: speed, timestamp: Date(timeIntervalSince1970: 1_700_000_000))
            let saved = try await database.save(place)
            let fetched = try await database.record(for: saved.recordID)
            let location = try #require(fetched["where"] as? CLLocation)
            #expect(location.coordinate.latitude == 52.52 && location.coordinate.longitude == 13.405)
            #expect(location.horizontalAccuracy == 5 && location.speed == 1.5 && location.course == 90)
            let munich = CLLocation(latitude: 48.137, longitude: 11.575)
            let distance: CLLocationDistance = location.distance(from: munich)
            #expect((500_000...510_000).contains(distance), "Berlin to Munich is about 504 km, not \(distance) m")
            #expect(CLLocation.self == Location.self)
        }
    }
}
