import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// Radius queries as apps write them, ported mechanically: PetFinder's AroundMeData.swift
// (`distanceToLocation:fromLocation:(location, %@) < %f` with a `CGFloat` radius, the async
// `records(matching:desiredKeys:)`, `record["location"] as? CLLocation`), iWrestle's
// HomeView.swift (a radius widened step by step, AND-ed through `NSCompoundPredicate` with a
// date range given `as CVarArg`), a music app's `distanceToLocation:fromLocation:(%K,%@) < %f`
// with the field name through `%K`, and a chat app's lower-case `and` after an integer radius
// (`distanceToLocation:fromLocation:(posicion, %@) < 300 and conectado == %@`). CoreLocation
// becomes Stratus's `Location`. The CloudKit originals are in the comments.
//
// The radius of `distanceToLocation:fromLocation:` is in kilometres, as Apple documents it (its
// CKQuery example names it `radiusInKilometers`, and cktool's query filter `radiusInKilometers`);
// most of these apps pass metres, so they search a radius a thousand times wider than they mean,
// on CloudKit as on Stratus. The tests assert that documented behaviour.

struct MissingPet: Equatable {
    let id: String
    let owner: String
    let name: String
    let location: Location
    static func == (a: MissingPet, b: MissingPet) -> Bool { a.id == b.id && a.owner == b.owner && a.name == b.name }
}

enum Radius: Int, CaseIterable {
    case r5km, r10km, r50km
    var value: CGFloat {
        switch self {
        case .r5km: return 5000
        case .r10km: return 10000
        case .r50km: return 50000
        }
    }
}

enum ModelError: Error { case typeCasting }

struct AroundMeData {
    let database: Database

    // let predicate = NSPredicate(format: "distanceToLocation:fromLocation:(location, %@) < %f", location, radiusInMeters.value)
    // let query = CKQuery(recordType: "Pets", predicate: predicate)
    // let (values, _) = try await Model.database.records(matching: query, desiredKeys: ["user", "name", "location"])
    //     let owner = record["user"] as? CKRecord.Reference, …, let location = record["location"] as? CLLocation
    func fetchMissingPetsAround(location: Location, radiusInMeters: Radius) async throws -> [MissingPet] {
        var pets: [MissingPet] = []
        let predicate = try QueryPredicate(format: "distanceToLocation:fromLocation:(location, %@) < %f", location, radiusInMeters.value)
        let query = Query(recordType: "Pets", predicate: predicate)
        let (values, _) = try await database.records(matching: query, desiredKeys: ["user", "name", "location"])
        for value in values {
            if let record = try? value.1.get() {
                guard
                    let owner = record["user"] as? Record.Reference,
                    let name = record["name"] as? String,
                    let location = record["location"] as? Location
                else { throw ModelError.typeCasting }
                pets.append(MissingPet(id: record.recordID.recordName, owner: owner.recordID.recordName, name: name, location: location))
            }
        }
        return pets
    }
}

extension Double {
    var milesToMeters: Double { self * 1609.344 }
}

@Suite("Radius queries, ported")
struct NearbyQueriesTests {
    // Paris, a pet 3 km from it, one 20 km away, one in Lyon (390 km).
    static let paris = Location(latitude: 48.8566, longitude: 2.3522)

    private func savePets(_ database: Database) async throws {
        let places: [(String, Double, Double)] = [("near", 48.8836, 2.3522), ("suburb", 49.0366, 2.3522), ("lyon", 45.7640, 4.8357)]
        let owner = Record.Reference(recordID: Record.ID(recordName: "owner-1"), action: .none)
        let records = places.map { name, latitude, longitude -> Record in
            let record = Record(recordType: "Pets", recordID: Record.ID(recordName: name))
            record["user"] = owner
            record["name"] = name.capitalized
            record["location"] = Location(latitude: latitude, longitude: longitude)
            return record
        }
        _ = try await database.modifyRecords(saving: records, deleting: [])
    }

    @Test("a CGFloat radius is read in kilometres, and the fetched location reads back as a Location", arguments: TestEngine.all)
    func cgFloatRadius(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.publicCloudDatabase
            try await savePets(database)
            let data = AroundMeData(database: database)
            // The app's "5 km" is 5000: 5000 km from Paris reaches Lyon too.
            let pets = try await data.fetchMissingPetsAround(location: Self.paris, radiusInMeters: .r5km)
            #expect(pets.map(\.id).sorted() == ["lyon", "near", "suburb"])
            #expect(pets.first { $0.id == "near" }?.location.coordinate.latitude == 48.8836)
            #expect(pets.first { $0.id == "near" }?.owner == "owner-1")

            let within5km = try QueryPredicate(format: "distanceToLocation:fromLocation:(location, %@) < %f", Self.paris, CGFloat(5))
            let (near, _) = try await database.records(matching: Query(recordType: "Pets", predicate: within5km))
            #expect(near.map(\.0.recordName) == ["near"])
        }
    }

    @Test("a radius widened step by step and AND-ed with a date range stops at the first radius that finds something", arguments: TestEngine.all)
    func expandingRadius(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.publicCloudDatabase
            let month = DateInterval(start: Date(timeIntervalSince1970: 1_800_000_000), duration: 30 * 86_400)
            let events: [(String, Location, Date)] = [
                ("far-in-month", Location(latitude: 45.7640, longitude: 4.8357), month.start.addingTimeInterval(86_400)),
                ("near-last-month", Location(latitude: 48.86, longitude: 2.35), month.start.addingTimeInterval(-86_400)),
            ]
            _ = try await database.modifyRecords(saving: events.map { name, location, date in
                let record = Record(recordType: "Event", recordID: Record.ID(recordName: name))
                record["location"] = location
                record["date"] = date
                return record
            }, deleting: [])

            // let distancePredicate = NSPredicate(format: "distanceToLocation:fromLocation:(location, %@) < %f", location, radius.milesToMeters)
            // let datePredicate = NSPredicate(format: "date >= %@ AND date < %@", interval.start as CVarArg, interval.end as CVarArg)
            // let query = CKQuery(recordType: "Event", predicate: NSCompoundPredicate(andPredicateWithSubpredicates: predicates))
            func fetchWithExpandingRadius(from location: Location) async throws -> (radius: Double, names: [String]) {
                for radius in [100.0, 250, 500] {
                    var predicates = [QueryPredicate]()
                    predicates.append(try QueryPredicate(format: "distanceToLocation:fromLocation:(location, %@) < %f", location, radius.milesToMeters))
                    predicates.append(try QueryPredicate(format: "date >= %@ AND date < %@", month.start, month.end))
                    let query = Query(recordType: "Event", predicate: QueryPredicate(andPredicateWithSubpredicates: predicates))
                    let (matches, _) = try await database.records(matching: query, resultsLimit: 20)
                    let names = matches.compactMap { try? $0.1.get().recordID.recordName }
                    if !names.isEmpty { return (radius, names) }
                }
                return (0, [])
            }
            // 100 miles in metres read as kilometres reaches Lyon at the first step; the date
            // range still leaves out last month's event next door.
            let found = try await fetchWithExpandingRadius(from: Self.paris)
            #expect(found.radius == 100)
            #expect(found.names == ["far-in-month"])
        }
    }

    @Test("the field named through %K inside the function, and a lower-case 'and' after an integer radius", arguments: TestEngine.all)
    func keyPathAndLowercaseAnd(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.publicCloudDatabase
            let users: [(String, Double, String)] = [("here", 48.8567, "1"), ("here-offline", 48.8567, "0"), ("far", 48.9, "1")]
            _ = try await database.modifyRecords(saving: users.map { name, latitude, online in
                let record = Record(recordType: "UsersProfile", recordID: Record.ID(recordName: name))
                record["posicion"] = Location(latitude: latitude, longitude: 2.3522)
                record["PostCoordinate"] = Location(latitude: latitude, longitude: 2.3522)
                record["conectado"] = online
                return record
            }, deleting: [])

            // NSPredicate(format: "distanceToLocation:fromLocation:(posicion, %@) < 300 and conectado == %@", position, "1")
            let connected = try QueryPredicate(format: "distanceToLocation:fromLocation:(posicion, %@) < 300 and conectado == %@", Self.paris, "1")
            let (nearby, _) = try await database.records(matching: Query(recordType: "UsersProfile", predicate: connected))
            #expect(nearby.map(\.0.recordName).sorted() == ["far", "here"])

            // NSPredicate(format: "distanceToLocation:fromLocation:(%K,%@) < %f", "PostCoordinate", location, radius)
            let byKey = try QueryPredicate(format: "distanceToLocation:fromLocation:(%K,%@) < %f", "PostCoordinate", Self.paris, 1000.0)
            let (byKeyMatches, _) = try await database.records(matching: Query(recordType: "UsersProfile", predicate: byKey))
            #expect(byKeyMatches.map(\.0.recordName).sorted() == ["far", "here", "here-offline"])

            let withinOneKilometre = try QueryPredicate(format: "distanceToLocation:fromLocation:(%K,%@) < %f", "PostCoordinate", Self.paris, 1.0)
            let (close, _) = try await database.records(matching: Query(recordType: "UsersProfile", predicate: withinOneKilometre))
            #expect(close.map(\.0.recordName).sorted() == ["here", "here-offline"])
        }
    }
}
