import Foundation
import Stratus
import StratusSQLite
import StratusStores
import StratusTestSupport
import Testing

// Two CloudKit services written as actors, ported mechanically: Espresso's CloudKitService.swift
// (a public-database leaderboard keyed by a reference to `container.userRecordID()`, records
// found with `NSPredicate(format: "userRecordID == %@", CKRecord.Reference(…))`, numbers read
// with `as? Int ?? 0`, `try await database.save(record)` with its result unused) and
// ParentGuide's CloudKitService.swift (every page of a query read with
// `records(continuingMatchFrom:resultsLimit:)` and a sort list that may be empty, a type listed
// through `recordZoneChanges(inZoneWith: .default, since: nil)` instead of a query, and an
// asset's `fileURL` read from `record[key] as? CKAsset`). The containers are handed in, so the
// tests open stores of their own. The CloudKit originals are in the comments.

struct LeaderboardEntry: Equatable {
    let rank: Int
    let name: String
    let caffeineMg: Int
}

actor EspressoService {
    enum RecordType: String {
        case user = "EspressoUser"
        case friendship = "Friendship"
    }

    // private let container = CKContainer(identifier: "iCloud.com.espresso.app")
    private let container: Container
    private var database: Database { container.publicCloudDatabase }

    init(container: Container) { self.container = container }

    func isAvailable() async -> Bool {
        do {
            let status = try await container.accountStatus()
            return status == .available
        } catch {
            return false
        }
    }

    // let predicate = NSPredicate(format: "userRecordID == %@", CKRecord.Reference(recordID: userRecordID, action: .none))
    func fetchOrCreateCurrentUser(username: String) async throws -> Record {
        let userRecordID = try await container.userRecordID()
        let predicate = try QueryPredicate(format: "userRecordID == %@", Record.Reference(recordID: userRecordID, action: .none))
        let query = Query(recordType: RecordType.user.rawValue, predicate: predicate)
        let (results, _) = try await database.records(matching: query)
        if let existing = results.first {
            return try existing.1.get()
        }
        let record = Record(recordType: RecordType.user.rawValue)
        record["username"] = username
        record["dailyCaffeine"] = 0
        record["dailyLimit"] = 400
        record["lastUpdated"] = Date()
        record["userRecordID"] = Record.Reference(recordID: userRecordID, action: .none)
        return try await database.save(record)
    }

    func syncCaffeine(amount: Int) async throws {
        let userRecordID = try await container.userRecordID()
        let predicate = try QueryPredicate(format: "userRecordID == %@", Record.Reference(recordID: userRecordID, action: .none))
        let query = Query(recordType: RecordType.user.rawValue, predicate: predicate)
        let (results, _) = try await database.records(matching: query)
        if let existing = results.first {
            let record = try existing.1.get()
            record["dailyCaffeine"] = amount
            record["lastUpdated"] = Date()
            try await database.save(record)
        }
    }

    // query.sortDescriptors = [NSSortDescriptor(key: "dailyCaffeine", ascending: false)]
    func fetchLeaderboard() async throws -> [LeaderboardEntry] {
        let query = Query(recordType: RecordType.user.rawValue, predicate: QueryPredicate(value: true))
        query.sortDescriptors = [RecordSortDescriptor(key: "dailyCaffeine", ascending: false)]
        let (results, _) = try await database.records(matching: query, resultsLimit: 20)
        var entries: [LeaderboardEntry] = []
        for (index, result) in results.enumerated() {
            if let record = try? result.1.get() {
                let name = record["username"] as? String ?? "Unknown"
                let caffeine = record["dailyCaffeine"] as? Int ?? 0
                entries.append(LeaderboardEntry(rank: index + 1, name: name, caffeineMg: caffeine))
            }
        }
        return entries
    }

    func addFriend(username: String) async throws -> Bool {
        let predicate = try QueryPredicate(format: "username == %@", username)
        let query = Query(recordType: RecordType.user.rawValue, predicate: predicate)
        let (results, _) = try await database.records(matching: query, resultsLimit: 1)
        guard let friendResult = results.first, let friendRecord = try? friendResult.1.get() else {
            return false
        }
        let userRecordID = try await container.userRecordID()
        let friendship = Record(recordType: RecordType.friendship.rawValue)
        friendship["userRef"] = Record.Reference(recordID: userRecordID, action: .none)
        friendship["friendRef"] = Record.Reference(recordID: friendRecord.recordID, action: .none)
        friendship["status"] = "accepted"
        try await database.save(friendship)
        return true
    }
}

actor ParentGuideService {
    private let publicDB: Database

    init(container: Container) { publicDB = container.publicCloudDatabase }

    // sortDescriptors: [NSSortDescriptor] = []
    func fetchRecords(recordType: String, predicate: QueryPredicate = QueryPredicate(value: true),
                      sortDescriptors: [RecordSortDescriptor] = [], resultsLimit: Int = 100) async throws -> [Record] {
        let query = Query(recordType: recordType, predicate: predicate)
        query.sortDescriptors = sortDescriptors
        var allRecords: [Record] = []
        var cursor: QueryOperation.Cursor?
        let (results, nextCursor) = try await publicDB.records(matching: query, resultsLimit: resultsLimit)
        allRecords.append(contentsOf: results.compactMap { try? $0.1.get() })
        cursor = nextCursor
        while let currentCursor = cursor {
            let (moreResults, moreCursor) = try await publicDB.records(continuingMatchFrom: currentCursor, resultsLimit: resultsLimit)
            allRecords.append(contentsOf: moreResults.compactMap { try? $0.1.get() })
            cursor = moreCursor
        }
        return allRecords
    }

    // let changes = try await publicDB.recordZoneChanges(inZoneWith: .default, since: nil)
    // for (_, result) in changes.modificationResultsByID { if case .success(let modification) = result { modification.record … } }
    func fetchAllRecords(recordType: String) async throws -> [Record] {
        var allRecords: [Record] = []
        let changes = try await publicDB.recordZoneChanges(inZoneWith: .default, since: nil)
        for (_, result) in changes.modificationResultsByID {
            if case .success(let modification) = result {
                let record = modification.record
                if record.recordType == recordType {
                    allRecords.append(record)
                }
            }
        }
        return allRecords
    }

    func deletePublicRecord(recordID: Record.ID) async throws {
        try await publicDB.deleteRecord(withID: recordID)
    }

    func savePublicRecord(_ record: Record) async throws -> Record {
        try await publicDB.save(record)
    }

    // guard let asset = record[key] as? CKAsset else { return nil }; return asset.fileURL
    static func assetURL(from record: Record, key: String) -> URL? {
        guard let asset = record[key] as? Asset else { return nil }
        return asset.fileURL
    }
}

@Suite("CloudKit services written as actors, ported")
struct ActorServicesTests {
    @Test("each user's record is found by the reference to their user record ID, and the leaderboard sorts by caffeine", arguments: TestEngine.all)
    func leaderboard(engine: TestEngine) async throws {
        try await withStore(on: engine) { location, store in
            func service(_ user: String) throws -> EspressoService {
                EspressoService(container: try Container(identifier: "iCloud.com.espresso.app", store: location, userName: user))
            }
            let alice = try service("alice"), bob = try service("bob")
            #expect(await alice.isAvailable())
            let first = try await alice.fetchOrCreateCurrentUser(username: "alice")
            let again = try await alice.fetchOrCreateCurrentUser(username: "alice")
            #expect(first.recordID == again.recordID)
            _ = try await bob.fetchOrCreateCurrentUser(username: "bob")
            try await alice.syncCaffeine(amount: 120)
            try await bob.syncCaffeine(amount: 300)
            #expect(try await alice.fetchLeaderboard() == [
                LeaderboardEntry(rank: 1, name: "bob", caffeineMg: 300),
                LeaderboardEntry(rank: 2, name: "alice", caffeineMg: 120),
            ])
            #expect(try await alice.addFriend(username: "bob"))
            #expect(try await alice.addFriend(username: "carol") == false)
        }
    }

    @Test("every page of a query, a type listed through the default zone's changes, and an asset's file", arguments: TestEngine.all)
    func pagesChangesAndAssets(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let service = ParentGuideService(container: container)
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("parentguide-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: folder) }
            for n in 0..<5 {
                let article = Record(recordType: "Article", recordID: Record.ID(recordName: "a\(n)"))
                article["order"] = n
                if n == 0 {
                    let file = folder.appendingPathComponent("cover.txt")
                    try Data("cover".utf8).write(to: file)
                    article["cover"] = Asset(fileURL: file)
                }
                _ = try await service.savePublicRecord(article)
            }
            _ = try await service.savePublicRecord(Record(recordType: "Tip", recordID: Record.ID(recordName: "t0")))

            let unsorted = try await service.fetchRecords(recordType: "Article", resultsLimit: 2)
            #expect(unsorted.map(\.recordID.recordName).sorted() == ["a0", "a1", "a2", "a3", "a4"])
            let sorted = try await service.fetchRecords(recordType: "Article", sortDescriptors: [RecordSortDescriptor(key: "order", ascending: false)], resultsLimit: 2)
            #expect(sorted.map(\.recordID.recordName) == ["a4", "a3", "a2", "a1", "a0"])

            try await service.deletePublicRecord(recordID: Record.ID(recordName: "a4"))
            let listed = try await service.fetchAllRecords(recordType: "Article")
            #expect(listed.map(\.recordID.recordName).sorted() == ["a0", "a1", "a2", "a3"])

            let cover = try #require(listed.first { $0.recordID.recordName == "a0" })
            let url = try #require(ParentGuideService.assetURL(from: cover, key: "cover"))
            #expect(try Data(contentsOf: url) == Data("cover".utf8))
            #expect(ParentGuideService.assetURL(from: cover, key: "order") == nil)
        }
    }
}
