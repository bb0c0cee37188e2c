import CloudKit
import Foundation
import Stratus
import StratusTestSupport
import Testing

// Queries as CloudKit's documentation and WWDC samples write them: NSPredicate format strings
// with every argument form apps pass, sort descriptors, location queries, the operation with
// its iOS 15 blocks and its older ones, cursors, and the async and completion-handler calls.

final class RestaurantFinder {
    let database: CKDatabase

    init(database: CKDatabase) {
        self.database = database
    }

    func seed(_ restaurants: [(String, String, Int, Double, CLLocation, [String])]) async throws {
        let records: [CKRecord] = restaurants.map { name, city, stars, price, location, tags in
            let record = CKRecord(recordType: "Restaurant")
            record["name"] = name
            record["city"] = city
            record["stars"] = stars
            record["averagePrice"] = price
            record["location"] = location
            record["tags"] = tags
            record["opened"] = Date(timeIntervalSince1970: TimeInterval(1_500_000_000 + stars * 86_400))
            return record
        }
        let operation = CKModifyRecordsOperation(recordsToSave: records, recordIDsToDelete: nil)
        operation.savePolicy = .allKeys
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
            operation.modifyRecordsResultBlock = { result in
                continuation.resume(with: result)
            }
            database.add(operation)
        }
    }

    /// Names matching `predicate`, in the order of `sortDescriptors`, with the iOS 15 blocks.
    func names(where predicate: NSPredicate, sortedBy sortDescriptors: [RecordSortDescriptor] = [NSSortDescriptor(key: "name", ascending: true)],
               completion: @escaping (Result<[String], Error>) -> Void) {
        let query = CKQuery(recordType: "Restaurant", predicate: predicate)
        query.sortDescriptors = sortDescriptors
        let operation = CKQueryOperation(query: query)
        operation.desiredKeys = ["name"]
        operation.qualityOfService = .userInitiated
        var names: [String] = []
        operation.recordMatchedBlock = { _, result in
            switch result {
            case .success(let record):
                names.append(record["name"] as? String ?? "?")
            case .failure(let error):
                print("Skipping a record: \(error.localizedDescription)")
            }
        }
        operation.queryResultBlock = { result in
            switch result {
            case .success:
                completion(.success(names))
            case .failure(let error):
                completion(.failure(error))
            }
        }
        database.add(operation)
    }

    /// Every name, a page at a time, with the blocks of iOS 8 to 14.
    func allNamesInPages(of pageSize: Int, completion: @escaping ([String], Int, Error?) -> Void) {
        var names: [String] = []
        var pages = 0
        func run(_ operation: CKQueryOperation) {
            operation.resultsLimit = pageSize
            operation.recordFetchedBlock = { record in
                names.append(record["name"] as! String)
            }
            operation.queryCompletionBlock = { cursor, error in
                pages += 1
                if let error = error {
                    completion(names, pages, error)
                } else if let cursor = cursor {
                    run(CKQueryOperation(cursor: cursor))
                } else {
                    completion(names, pages, nil)
                }
            }
            database.add(operation)
        }
        let query = CKQuery(recordType: "Restaurant", predicate: NSPredicate(format: "TRUEPREDICATE"))
        query.sortDescriptors = [NSSortDescriptor(key: "name", ascending: true)]
        run(CKQueryOperation(query: query))
    }
}

private let places: [(String, String, Int, Double, CLLocation, [String])] = [
    ("Alma", "Berlin", 4, 32.5, CLLocation(latitude: 52.5200, longitude: 13.4050), ["vegan", "brunch"]),
    ("Brasserie", "Berlin", 5, 61.0, CLLocation(latitude: 52.5100, longitude: 13.3900), ["french"]),
    ("Curry 36", "Berlin", 3, 8.0, CLLocation(latitude: 52.4930, longitude: 13.3880), ["street"]),
    ("Dallmayr", "Munich", 5, 90.0, CLLocation(latitude: 48.1390, longitude: 11.5780), ["fine"]),
    ("Eataly", "Munich", 4, 25.0, CLLocation(latitude: 48.1350, longitude: 11.5750), ["italian", "vegan"]),
]

@Suite struct QueryProgramsTests {
    private func finder(_ cloud: TestCloud) async throws -> RestaurantFinder {
        let finder = RestaurantFinder(database: try cloud.container().publicCloudDatabase)
        try await finder.seed(places)
        return finder
    }

    private func names(_ finder: RestaurantFinder, _ predicate: NSPredicate,
                       sortedBy sort: [RecordSortDescriptor] = [NSSortDescriptor(key: "name", ascending: true)]) async throws -> [String] {
        try await awaitCompletion { done in finder.names(where: predicate, sortedBy: sort, completion: done) }.get()
    }

    @Test(arguments: TestEngine.all)
    func formatPredicatesWithEveryArgumentForm(engine: TestEngine) async throws {
        try await withTestCloud(on: engine) { cloud in
            let finder = try await finder(cloud)
            #expect(try await names(finder, NSPredicate(format: "city == %@", "Munich")) == ["Dallmayr", "Eataly"])
            #expect(try await names(finder, NSPredicate(format: "city = 'Berlin' AND stars >= %d", 4)) == ["Alma", "Brasserie"])
            #expect(try await names(finder, NSPredicate(format: "stars > %@", NSNumber(value: 4))) == ["Brasserie", "Dallmayr"])
            #expect(try await names(finder, NSPredicate(format: "averagePrice < %f", 30.0)) == ["Curry 36", "Eataly"])
            #expect(try await names(finder, NSPredicate(format: "averagePrice <= %@", 25 as NSNumber)) == ["Curry 36", "Eataly"])
            #expect(try await names(finder, NSPredicate(format: "stars != 5 && city == %@", "Berlin")) == ["Alma", "Curry 36"])
            #expect(try await names(finder, NSPredicate(format: "name BEGINSWITH %@", "B")) == ["Brasserie"])
            #expect(try await names(finder, NSPredicate(format: "city IN %@", ["Munich", "Vienna"])) == ["Dallmayr", "Eataly"])
            #expect(try await names(finder, NSPredicate(format: "NOT (city IN %@)", ["Munich"])) == ["Alma", "Brasserie", "Curry 36"])
            #expect(try await names(finder, NSPredicate(format: "tags CONTAINS %@", "vegan")) == ["Alma", "Eataly"])
            #expect(try await names(finder, NSPredicate(format: "ANY tags == %@", "french")) == ["Brasserie"])
            #expect(try await names(finder, NSPredicate(format: "stars BETWEEN {4, 5}")) == ["Alma", "Brasserie", "Dallmayr", "Eataly"])
            #expect(try await names(finder, NSPredicate(format: "stars BETWEEN %@", [3, 4])) == ["Alma", "Curry 36", "Eataly"])
            let since = Date(timeIntervalSince1970: 1_500_000_000 + 4 * 86_400)
            #expect(try await names(finder, NSPredicate(format: "opened >= %@", since as NSDate)) == ["Alma", "Brasserie", "Dallmayr", "Eataly"])
            #expect(try await names(finder, NSPredicate(format: "%K == %@", "city", "Berlin")) == ["Alma", "Brasserie", "Curry 36"])
            #expect(try await names(finder, NSPredicate(format: "FALSEPREDICATE")) == [])
            let compound = NSCompoundPredicate(andPredicateWithSubpredicates: [
                NSPredicate(format: "city == %@", "Berlin"),
                NSPredicate(format: "stars >= 4"),
            ])
            #expect(try await names(finder, compound) == ["Alma", "Brasserie"])
            let typed = NSCompoundPredicate(type: .and, subpredicates: [NSPredicate(format: "city == %@", "Munich"), NSPredicate(value: true)])
            #expect(try await names(finder, typed) == ["Dallmayr", "Eataly"])
        }
    }

    @Test(arguments: TestEngine.all)
    func sortsAndFullTextSearch(engine: TestEngine) async throws {
        try await withTestCloud(on: engine) { cloud in
            let finder = try await finder(cloud)
            let byStarsThenName = [NSSortDescriptor(key: "stars", ascending: false), NSSortDescriptor(key: "name", ascending: true)]
            #expect(try await names(finder, NSPredicate(value: true), sortedBy: byStarsThenName) == ["Brasserie", "Dallmayr", "Alma", "Eataly", "Curry 36"])
            let newestFirst = [NSSortDescriptor(key: "creationDate", ascending: false)]
            #expect(try await names(finder, NSPredicate(value: true), sortedBy: newestFirst).count == 5)
            #expect(try await names(finder, NSPredicate(format: "self CONTAINS %@", "munich")) == ["Dallmayr", "Eataly"])
            #expect(try await names(finder, NSPredicate(format: "allTokens TOKENMATCHES[cdl] %@", "berlin vegan")) == ["Alma"])
        }
    }

    @Test(arguments: TestEngine.all)
    func nearbyRestaurantsByDistance(engine: TestEngine) async throws {
        try await withTestCloud(on: engine) { cloud in
            let finder = try await finder(cloud)
            let alexanderplatz = CLLocation(latitude: 52.5219, longitude: 13.4132)
            let radiusInKilometers: CGFloat = 5
            let nearby = NSPredicate(format: "distanceToLocation:fromLocation:(location, %@) < %f", alexanderplatz, radiusInKilometers)
            let closestFirst = [CKLocationSortDescriptor(key: "location", relativeLocation: alexanderplatz)]
            #expect(try await names(finder, nearby, sortedBy: closestFirst) == ["Alma", "Brasserie", "Curry 36"])
            let mixed: [RecordSortDescriptor] = [NSSortDescriptor(key: "city", ascending: false), CKLocationSortDescriptor(key: "location", relativeLocation: alexanderplatz)]
            #expect(try await names(finder, NSPredicate(value: true), sortedBy: mixed) == ["Dallmayr", "Eataly", "Alma", "Brasserie", "Curry 36"])
        }
    }

    @Test(arguments: TestEngine.all)
    func cursorsWithTheOlderBlocksAndTheAsyncAPI(engine: TestEngine) async throws {
        try await withTestCloud(on: engine) { cloud in
            let finder = try await finder(cloud)
            let (all, pages, error) = await awaitCompletion { done in finder.allNamesInPages(of: 2) { done(($0, $1, $2)) } }
            #expect(error == nil)
            #expect(all == ["Alma", "Brasserie", "Curry 36", "Dallmayr", "Eataly"])
            #expect(pages == 3)

            // The async API of iOS 15: a first page, then the rest from its cursor.
            let database = finder.database
            let query = CKQuery(recordType: "Restaurant", predicate: NSPredicate(value: true))
            query.sortDescriptors = [NSSortDescriptor(key: "name", ascending: true)]
            let firstPage = try await database.records(matching: query, inZoneWith: nil, desiredKeys: ["name"], resultsLimit: 3)
            #expect(firstPage.matchResults.count == 3)
            let cursor = try #require(firstPage.queryCursor)
            // Apps keep a cursor to continue later.
            let cursorData = try NSKeyedArchiver.archivedData(withRootObject: cursor, requiringSecureCoding: true)
            let restored = try #require(try NSKeyedUnarchiver.unarchivedObject(ofClass: CKQueryOperation.Cursor.self, from: cursorData))
            let rest = try await database.records(continuingMatchFrom: restored, desiredKeys: nil, resultsLimit: CKQueryOperation.maximumResults)
            #expect(try rest.matchResults.map { try $0.1.get()["name"] as? String } == ["Dallmayr", "Eataly"])
            #expect(rest.queryCursor == nil)

            // The completion-handler form of iOS 15 and the older perform(_:inZoneWith:).
            let result = await awaitCompletion { done in
                database.fetch(withQuery: query, inZoneWith: nil, desiredKeys: nil, resultsLimit: 1) { done($0) }
            }
            let (matches, next) = try result.get()
            #expect(matches.count == 1)
            #expect(next != nil)
            let (records, performError) = await awaitCompletion { done in
                database.perform(query, inZoneWith: nil) { done(($0, $1)) }
            }
            #expect(performError == nil)
            #expect(records?.count == 5)
        }
    }

    @Test func predicatesEvaluateRecordsAsQueriesMatchThem() {
        let record = CKRecord(recordType: "Restaurant")
        record["name"] = "Alma"
        record["stars"] = 4
        #expect(NSPredicate(format: "stars >= 4 AND name BEGINSWITH 'A'").evaluate(with: record))
        #expect(!NSPredicate(format: "stars > %d", 4).evaluate(with: record))
        let filtered = [record].filter { NSPredicate(format: "name == %@", "Alma").evaluate(with: $0) }
        #expect(filtered.count == 1)
    }
}
