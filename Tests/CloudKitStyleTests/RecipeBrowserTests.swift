import Foundation
import Stratus
import StratusTestSupport
import Testing

// A recipe browser written against CloudKit's query API, ported mechanically: CKQueryOperation
// with cursors, desiredKeys and resultsLimit, NSPredicate formats with %@ and %K arguments
// (BEGINSWITH, IN, CONTAINS, ANY, NOT, BETWEEN, self CONTAINS, dates, references, locations,
// YES/NO), NSSortDescriptors on fields and system dates. The CloudKit original is in the
// comments.

final class RecipeBrowser: @unchecked Sendable {
    // let database = CKContainer(identifier: "iCloud.com.example.recipes").publicCloudDatabase
    let database: Database

    init(database: Database) {
        self.database = database
    }

    // func page(_ operation: CKQueryOperation, pageSize: Int, keys: [CKRecord.FieldKey]?, …)
    /// Runs a query to its end, a page at a time, as apps do with `queryResultBlock` and cursors;
    /// answers the record names in the order matched, and how many pages it took.
    func all(_ query: Query, zoneID: RecordZone.ID? = nil, pageSize: Int = 2, keys: [Record.FieldKey]? = nil,
             completion: @escaping @Sendable (Result<(records: [Record], pages: Int), Error>) -> Void) {
        // The blocks run on the operations' threads: what they collect is kept under a lock.
        final class Collected: @unchecked Sendable {
            var found: [Record] = []
            var pages = 0
        }
        let collected = Collected()
        let lock = NSLock()
        let database = self.database
        @Sendable func run(_ operation: QueryOperation) {
            operation.resultsLimit = pageSize
            operation.desiredKeys = keys
            operation.zoneID = zoneID
            operation.qualityOfService = .userInitiated
            operation.recordMatchedBlock = { _, result in
                switch result {
                case .success(let record):
                    lock.lock(); collected.found.append(record); lock.unlock()
                case .failure(let error):
                    print("skipping a record: \(error)")
                }
            }
            operation.queryResultBlock = { result in
                switch result {
                case .success(let cursor):
                    lock.lock(); collected.pages += 1; lock.unlock()
                    if let cursor = cursor {
                        run(QueryOperation(cursor: cursor))
                    } else {
                        lock.lock(); let answer = (collected.found, collected.pages); lock.unlock()
                        completion(.success(answer))
                    }
                case .failure(let error):
                    completion(.failure(error))
                }
            }
            database.add(operation)
        }
        run(QueryOperation(query: query))
    }

    func names(_ query: Query, zoneID: RecordZone.ID? = nil, pageSize: Int = 2) async throws -> [String] {
        let result: Result<(records: [Record], pages: Int), Error> = await awaitCallback { done in
            self.all(query, zoneID: zoneID, pageSize: pageSize) { done($0) }
        }
        return try result.get().records.map { $0.recordID.recordName }
    }

    // NSPredicate(format: …) → try QueryPredicate(format: …)
    func names(_ format: String, _ arguments: Any..., sortedBy sort: [RecordSortDescriptor] = []) async throws -> [String] {
        let query = Query(recordType: "Recipe", predicate: try QueryPredicate(format: format, argumentArray: arguments))
        query.sortDescriptors = sort
        let found = try await names(query)
        return sort.isEmpty ? found.sorted() : found
    }
}

let kitchen = Location(latitude: 48.8566, longitude: 2.3522)           // Paris
let farAway = Location(latitude: 40.7128, longitude: -74.0060)         // New York

/// Six recipes with every field type a query looks at.
func saveRecipes(_ database: Database) async throws -> [Record] {
    let author = Record(recordType: "Cook", recordID: Record.ID(recordName: "julia"))
    author["name"] = "Julia"
    let rows: [(String, String, Int, Double, [String], Bool, Location, Double)] = [
        ("crepes", "Crêpes Suzette", 30, 4.5, ["dessert", "french"], true, kitchen, 0),
        ("omelette", "Omelette", 10, 3.5, ["breakfast", "french", "quick"], false, kitchen, 1),
        ("ratatouille", "Ratatouille", 90, 4.8, ["vegetarian", "french"], true, Location(latitude: 48.86, longitude: 2.36), 2),
        ("pancakes", "Pancakes", 20, 4.0, ["breakfast", "sweet"], false, farAway, 3),
        ("pad-thai", "Pad Thai", 25, 4.2, ["noodles"], true, farAway, 4),
        ("porridge", "porridge", 5, 2.5, ["breakfast", "quick"], false, farAway, 5),
    ]
    var records: [Record] = [author]
    for (name, title, minutes, rating, tags, vegetarian, location, day) in rows {
        let recipe = Record(recordType: "Recipe", recordID: Record.ID(recordName: name))
        recipe["title"] = title as RecordValue
        recipe["minutes"] = minutes as RecordValue
        recipe["rating"] = rating as RecordValue
        recipe["tags"] = tags as RecordValue
        recipe["vegetarian"] = vegetarian as RecordValue
        recipe["location"] = location
        recipe["published"] = Date(timeIntervalSinceReferenceDate: 700_000_000 + day * 86_400) as RecordValue
        recipe["notes"] = "A classic \(title) recipe with butter" as RecordValue
        if name != "pad-thai" {
            recipe["author"] = Record.Reference(recordID: author.recordID, action: .none)
        }
        records.append(recipe)
    }
    let (saved, _) = try await database.modifyRecords(saving: records, deleting: [])
    return try records.map { try saved[$0.recordID]!.get() }
}

@Suite("A recipe browser's queries, ported from CloudKit")
struct RecipeBrowserTests {
    @Test("NSPredicate formats CloudKit accepts, with %@ and %K arguments, give CloudKit's matches", arguments: TestEngine.all)
    func predicateFormats(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.publicCloudDatabase
            _ = try await saveRecipes(database)
            let browser = RecipeBrowser(database: database)
            let author = Record.ID(recordName: "julia")

            #expect(try await browser.names("title BEGINSWITH %@", "P") == ["pad-thai", "pancakes"], "BEGINSWITH is case-sensitive")
            #expect(try await browser.names("%K BEGINSWITH %@", "title", "Om") == ["omelette"])
            #expect(try await browser.names("title == %@", "PORRIDGE") == ["porridge"], "string equality ignores case in CloudKit")
            #expect(try await browser.names("minutes <= %d", 10) == ["omelette", "porridge"])
            #expect(try await browser.names("minutes < %@", NSNumber(value: 21)) == ["omelette", "pancakes", "porridge"])
            #expect(try await browser.names("rating >= %f AND minutes < %d", 4.0, 60) == ["crepes", "pad-thai", "pancakes"])
            #expect(try await browser.names("%K == %@", "vegetarian", NSNumber(value: true)) == ["crepes", "pad-thai", "ratatouille"])
            #expect(try await browser.names("vegetarian == YES") == ["crepes", "pad-thai", "ratatouille"])
            #expect(try await browser.names("vegetarian == NO") == ["omelette", "pancakes", "porridge"])
            #expect(try await browser.names("vegetarian == %@", false) == ["omelette", "pancakes", "porridge"])
            #expect(try await browser.names("title IN %@", ["Omelette", "Pad Thai", "Sushi"]) == ["omelette", "pad-thai"])
            #expect(try await browser.names("NOT (title IN %@)", ["Omelette", "Pad Thai", "porridge", "pancakes"]) == ["crepes", "ratatouille"])
            #expect(try await browser.names("tags CONTAINS %@", "quick") == ["omelette", "porridge"])
            #expect(try await browser.names("ANY tags == %@", "sweet") == ["pancakes"])
            #expect(try await browser.names("ANY tags IN %@", ["dessert", "noodles"]) == ["crepes", "pad-thai"])
            #expect(try await browser.names("%@ IN tags", "vegetarian") == ["ratatouille"])
            #expect(try await browser.names("minutes BETWEEN %@", [20, 30]) == ["crepes", "pad-thai", "pancakes"])
            #expect(try await browser.names("minutes BETWEEN {20, 30}") == ["crepes", "pad-thai", "pancakes"])
            #expect(try await browser.names("NOT (minutes == %d)", 10) == ["crepes", "pad-thai", "pancakes", "porridge", "ratatouille"])
            #expect(try await browser.names("minutes != %d", 10) == ["crepes", "pad-thai", "pancakes", "porridge", "ratatouille"])
            #expect(try await browser.names("self CONTAINS %@", "crêpes") == ["crepes"])
            #expect(try await browser.names("self CONTAINS %@ AND minutes > 15", "breakfast") == ["pancakes"])
            #expect(try await browser.names("author == %@", Record.Reference(recordID: author, action: .none)).count == 5)
            #expect(try await browser.names("author == %@", author).count == 5)
            #expect(try await browser.names("author != %@", author) == [], "a record without the field does not match !=, as in CloudKit")
            #expect(try await browser.names("recordID == %@", Record.ID(recordName: "omelette")) == ["omelette"])
            #expect(try await browser.names("distanceToLocation:fromLocation:(location, %@) < %f", kitchen, 5.0) == ["crepes", "omelette", "ratatouille"])
            #expect(try await browser.names("distanceToLocation:fromLocation:(%K, %@) > 1000", "location", kitchen) == ["pad-thai", "pancakes", "porridge"])
            #expect(try await browser.names("TRUEPREDICATE").count == 6)
            #expect(try await browser.names("FALSEPREDICATE") == [])

            let day = 86_400.0
            let start = Date(timeIntervalSinceReferenceDate: 700_000_000 + 2 * day)
            #expect(try await browser.names("published >= %@", start) == ["pad-thai", "pancakes", "porridge", "ratatouille"])
            #expect(try await browser.names("published > %@ AND published < %@", start, start.addingTimeInterval(2 * day)) == ["pancakes"])
            #expect(try await browser.names("published > %@", NSDate(timeIntervalSinceReferenceDate: 700_000_000 + 4 * day)) == ["porridge"])
            #expect(try await browser.names("published BETWEEN %@", [start, start.addingTimeInterval(day)]) == ["pancakes", "ratatouille"])
            #expect(try await browser.names("creationDate <= %@", Date()).count == 6)
            #expect(try await browser.names("modificationDate > %@", Date(timeIntervalSinceNow: -3600)).count == 6)
        }
    }

    @Test("NSCompoundPredicate and predicates built once and reused with different arguments", arguments: TestEngine.all)
    func compoundAndTemplates(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.publicCloudDatabase
            _ = try await saveRecipes(database)
            let browser = RecipeBrowser(database: database)
            // let quick = NSPredicate(format: "minutes < 30"); let french = NSPredicate(format: "ANY tags = 'french'")
            let quick = try QueryPredicate(format: "minutes < 30")
            let french = try QueryPredicate(format: "ANY tags = 'french'")
            let both = QueryPredicate(andPredicateWithSubpredicates: [quick, french])
            let query = Query(recordType: "Recipe", predicate: both)
            query.sortDescriptors = [RecordSortDescriptor(key: "minutes", ascending: true)]
            #expect(try await browser.names(query) == ["omelette"])
            let notFrench = QueryPredicate(andPredicateWithSubpredicates: [quick, QueryPredicate(notPredicateWithSubpredicate: try QueryPredicate(format: "title IN %@", ["Omelette"]))])
            let q2 = Query(recordType: "Recipe", predicate: notFrench)
            q2.sortDescriptors = [RecordSortDescriptor(key: "minutes", ascending: false)]
            #expect(try await browser.names(q2) == ["pad-thai", "pancakes", "porridge"])
            // query.predicate and query.recordType read back, as CKQuery's
            #expect(q2.recordType == "Recipe" && q2.predicate == notFrench)
        }
    }

    @Test("sort descriptors: several keys, descending, system dates, distance; paging keeps the order", arguments: TestEngine.all)
    func sorting(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.publicCloudDatabase
            _ = try await saveRecipes(database)
            let browser = RecipeBrowser(database: database)
            let everything = QueryPredicate(value: true)

            let byRating = Query(recordType: "Recipe", predicate: everything)
            byRating.sortDescriptors = [RecordSortDescriptor(key: "rating", ascending: false)]
            #expect(try await browser.names(byRating) == ["ratatouille", "crepes", "pad-thai", "pancakes", "omelette", "porridge"])

            let byVegThenMinutes = Query(recordType: "Recipe", predicate: everything)
            byVegThenMinutes.sortDescriptors = [RecordSortDescriptor(key: "vegetarian", ascending: false), RecordSortDescriptor(key: "minutes", ascending: true)]
            #expect(try await browser.names(byVegThenMinutes) == ["pad-thai", "crepes", "ratatouille", "porridge", "omelette", "pancakes"])

            let newest = Query(recordType: "Recipe", predicate: everything)
            newest.sortDescriptors = [RecordSortDescriptor(key: "creationDate", ascending: false)]
            #expect(try await browser.names(newest, pageSize: 4).count == 6)

            let nearest = Query(recordType: "Recipe", predicate: try QueryPredicate(format: "distanceToLocation:fromLocation:(location, %@) < 10000", kitchen))
            nearest.sortDescriptors = [LocationSortDescriptor(key: "location", relativeLocation: farAway)]
            let order = try await browser.names(nearest, pageSize: 5)
            #expect(Set(order.prefix(3)) == ["pad-thai", "pancakes", "porridge"] && order.last == "ratatouille")
        }
    }

    @Test("desiredKeys and resultsLimit: a page holds resultsLimit records with the desired keys only; the last page has no cursor", arguments: TestEngine.all)
    func desiredKeysAndLimits(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.publicCloudDatabase
            let saved = try await saveRecipes(database)
            let browser = RecipeBrowser(database: database)
            let query = Query(recordType: "Recipe", predicate: QueryPredicate(value: true))
            query.sortDescriptors = [RecordSortDescriptor(key: "minutes", ascending: true)]

            let result: Result<(records: [Record], pages: Int), Error> = await awaitCallback { done in
                browser.all(query, pageSize: 4, keys: ["title", "minutes"]) { done($0) }
            }
            let (records, pages) = try result.get()
            #expect(pages == 2 && records.count == 6)
            #expect(records.allSatisfy { $0.allKeys() == ["minutes", "title"] })
            #expect(records.allSatisfy { $0.recordChangeTag != nil && $0.creationDate != nil && $0.modificationDate != nil })
            #expect(records.allSatisfy { $0.changedKeys().isEmpty }, "a fetched record has no changed keys")
            let tags = Dictionary(uniqueKeysWithValues: saved.map { ($0.recordID, $0.recordChangeTag) })
            #expect(records.allSatisfy { tags[$0.recordID] == $0.recordChangeTag })

            // desiredKeys = [] fetches no fields, only the system fields
            let empty: Result<(records: [Record], pages: Int), Error> = await awaitCallback { done in
                browser.all(query, pageSize: 10, keys: []) { done($0) }
            }
            #expect(try empty.get().records.allSatisfy { $0.allKeys().isEmpty && $0.recordType == "Recipe" })

            // the async form: one page and a cursor, then the rest
            let (first, cursor) = try await database.records(matching: query, desiredKeys: ["title"], resultsLimit: 5)
            #expect(first.count == 5)
            let next = try #require(cursor)
            let (rest, end) = try await database.records(continuingMatchFrom: next, desiredKeys: ["title"], resultsLimit: 5)
            #expect(rest.count == 1 && end == nil)
            #expect(try rest.first?.1.get()["title"] as? String == "Ratatouille")
            #expect(try rest.first?.1.get()["minutes"] == nil)
        }
    }

    @Test("queries in a custom zone; a zone that does not exist fails with zoneNotFound; a bad predicate is invalidArguments", arguments: TestEngine.all)
    func zonesAndErrors(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let zone = RecordZone(zoneName: "Cookbook")
            _ = try await database.save(zone)
            let recipe = Record(recordType: "Recipe", recordID: Record.ID(recordName: "soup", zoneID: zone.zoneID))
            recipe["title"] = "Soup"
            _ = try await database.save(recipe)
            let browser = RecipeBrowser(database: database)
            let query = Query(recordType: "Recipe", predicate: QueryPredicate(value: true))
            #expect(try await browser.names(query, zoneID: zone.zoneID) == ["soup"])
            #expect(try await browser.names(query) == ["soup"], "a query without a zone searches every zone, as CloudKit's")

            let missing: Result<(records: [Record], pages: Int), Error> = await awaitCallback { done in
                browser.all(query, zoneID: RecordZone.ID(zoneName: "Nope")) { done($0) }
            }
            if case .failure(let error) = missing {
                #expect((error as? StratusError)?.code == .zoneNotFound)
                #expect((error as NSError).code == 26)
            } else {
                Issue.record("a query in a missing zone succeeded")
            }

            do {
                _ = try QueryPredicate(format: "title ENDSWITH %@", "p")
                Issue.record("ENDSWITH parsed")
            } catch let error as StratusError {
                #expect(error.code == .invalidArguments)
            }
        }
    }
}
