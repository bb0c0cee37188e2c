import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// Ben Gottlieb's Cirrus (bengottlieb/Cirrus; not jayhickey's Cirrus, ported in
// CirrusSyncEngineTests.swift), its CloudKit extensions, ported mechanically:
// Source/Cirrus/Extensions/CKDatabase.swift (the stored revision that logs with `logg`),
// Sources/Cirrus/Extensions/CKAccountStatus.swift, CKSubscription.swift and CKRecord.ID.swift.
// Its CloudKit habits that other ported code does not have: the app makes `CKDatabase.Scope`
// `Codable` itself (`extension CKDatabase.Scope: Codable`, which an imported `NS_ENUM` with an
// `Int` raw value gets from `RawRepresentable`) and gives it members; `CKDatabase` gets
// `static var public/private/shared` answering the singleton's databases, so `self == .private`
// compares databases; a query paged with `records(continuingMatchFrom:)` until a `limit` that
// defaults to `CKQueryOperation.maximumResults`; a fetch that answers `nil` for `unknownItem`
// and `zoneNotFound`; zones listed with `fetchAllRecordZonesOperation()` and its iOS 15 blocks
// inside `withCheckedThrowingContinuation`, made with `modifyRecordZonesResultBlock` inside
// `withUnsafeThrowingContinuation`; `CKAccountStatus` made `CustomStringConvertible`; and a
// `CKRecord.ID` rebuilt from JSON by a `convenience init` in an extension.
//
// What the port changes besides the README's substitutions, each marked where it is:
// - The declarations it adds to Stratus's types are `fileprivate` where they were `public` or
//   internal (this test module holds other ports), except the conformances, which Swift makes
//   module-wide; the package's own types are left out: the `Cirrus` singleton is a stand-in
//   holding the container (handed in per test) and answering "online", and the helpers of
//   Ben Gottlieb's Suite package (`isNotEmpty`, `breakIntoChunks(ofSize:)`, `sum()`, `logg`) are
//   written out below.
// - Left out of CKDatabase.swift: what needs the package's sync machinery (`AsyncRecordSequence`,
//   `AsyncZoneChangesSequence`, `ConflictResolver`, its `CKModifyRecordsOperation` extension):
//   `records(ofType:…)`, `changes(in:…)`, `delete(…)`, `save(…)`, `allRecordIDs`, `deleteAll`;
//   and `CKRecord.ID.zone(in:)`, which asks the singleton's zone cache.
// - The two `default:` cases after every case of a `CKDatabase.Scope` switch are
//   `@unknown default:`: CloudKit's scope is an open `NS_ENUM`, after whose cases `default` is
//   silent, while Stratus's enums are Swift's, after whose cases `default` warns "default will
//   never be executed" (README, "Around CloudKit").
//
// Gap met and fixed in Stratus: `Database.Scope` was `Codable`, which `CKDatabase.Scope` is not,
// so the app's `extension CKDatabase.Scope: Codable` warned ("conformance … was already stated
// in the type's module 'Stratus'"); Stratus writes scopes in its tokens and cursors as their raw
// values itself now.

// MARK: - Stand-ins: the Cirrus singleton and Suite's helpers

fileprivate final class Cirrus {
    static var instance: Cirrus!

    let container: Container
    var isOffline: Bool { get async { false } }
    var autoCreateNewZones: Bool { get async { true } }
    private(set) var cancelledAfter: [Error] = []

    init(container: Container) { self.container = container }

    func shouldCancelAfterError(_ error: Error) async { cancelledAfter.append(error) }
    func privateZone(named name: String) async -> RecordZone? { nil }

    enum CirrusError: Error { case offline, unableToCreateZone }
}

extension Collection {
    fileprivate var isNotEmpty: Bool { !isEmpty }
}

extension Array {
    fileprivate func breakIntoChunks(ofSize size: Int) -> [[Element]] {
        stride(from: 0, to: count, by: size).map { Array(self[$0..<Swift.min($0 + size, count)]) }
    }
}

extension Sequence where Element == Int {
    fileprivate func sum() -> Int { reduce(0, +) }
}

fileprivate func logg(_ message: String) {}

// MARK: - Extensions/CKDatabase.swift

// public protocol CKRecordProviding {
fileprivate protocol CKRecordProviding {
    var record: Record { get }
    var modifiedAt: Date? { get }
}

extension Record: CKRecordProviding {
    // public var record: CKRecord { self }
    fileprivate var record: Record { self }
    // public var modifiedAt: Date? { modificationDate }
    fileprivate var modifiedAt: Date? { modificationDate }
}

// public extension CKDatabase {
fileprivate extension Database {
    enum Kind: String { case `public`, `private`, shared
        var database: Database {
            switch self {
            case .public: return .public
            case .private: return .private
            case .shared: return .shared
            }
        }
    }

    static var `public`: Database { Cirrus.instance.container.publicCloudDatabase }
    static var `private`: Database { Cirrus.instance.container.privateCloudDatabase }
    static var `shared`: Database { Cirrus.instance.container.sharedCloudDatabase }

    func resolve(reference: Record.Reference?) async throws -> Record? {
        if await Cirrus.instance.isOffline { throw Cirrus.CirrusError.offline }
        guard let reference else { return nil }
        return try await record(for: reference.recordID)
    }

    // func fetchRecords(ofType type: CKRecord.RecordType, matching predicate: NSPredicate = .init(value: true), inZone: CKRecordZone.ID? = nil, keys: [CKRecord.FieldKey]? = nil, limit: Int = CKQueryOperation.maximumResults) async throws -> [CKRecord] {
    func fetchRecords(ofType type: Record.RecordType, matching predicate: QueryPredicate = .init(value: true), inZone: RecordZone.ID? = nil, keys: [Record.FieldKey]? = nil, limit: Int = QueryOperation.maximumResults) async throws -> [Record] {
        if await Cirrus.instance.isOffline { throw Cirrus.CirrusError.offline }
        let query = Query(recordType: type, predicate: predicate)
        do {
            var allResults: [Record] = []
            var cursor: QueryOperation.Cursor?

            while true {
                let results: (matchResults: [(Record.ID, Result<Record, Error>)], queryCursor: QueryOperation.Cursor?)

                if let cursor {
                    results = try await self.records(continuingMatchFrom: cursor)
                } else {
                    results = try await self.records(matching: query, inZoneWith: inZone, desiredKeys: keys, resultsLimit: limit)
                }

                allResults += results.matchResults.compactMap { result in
                    switch result.1 {
                    case .success(let record): return record
                    case .failure: return nil
                    }
                }

                guard let next = results.queryCursor, allResults.count < limit else { break }
                cursor = next
            }
            return allResults
        // } catch let error as CKError {
        } catch let error as StratusError {
            switch error.code {
            default:
                await Cirrus.instance.shouldCancelAfterError(error)
                throw error
            }
        }
    }

    func fetchRecord(withID id: Record.ID) async throws -> Record? {
        if await Cirrus.instance.isOffline { throw Cirrus.CirrusError.offline }
        do {
            return try await record(for: id)
        // } catch let error as CKError {
        } catch let error as StratusError {
            switch error.code {
            case .zoneNotFound:
                return nil

            case .unknownItem:
                return nil

            default:
                await Cirrus.instance.shouldCancelAfterError(error)
                throw error
            }
        }
    }
}

// extension CKDatabase {
fileprivate extension Database {
    // public func allZones() async throws -> [CKRecordZone] {
    func allZones() async throws -> [RecordZone] {
        if await Cirrus.instance.isOffline { throw Cirrus.CirrusError.offline }
        let op = FetchRecordZonesOperation.fetchAllRecordZonesOperation()
        var zones: [RecordZone] = []
        var errors: [Error] = []

        op.perRecordZoneResultBlock = { zoneID, zoneResult in
            switch zoneResult {
            case .success(let zone): zones.append(zone)
            case .failure(let err): errors.append(err)
            }
        }

        let found: [RecordZone] = try await withCheckedThrowingContinuation { continuation in
            op.fetchRecordZonesResultBlock = { result in
                switch result {
                case .success: continuation.resume(returning: zones)
                case .failure(let error): continuation.resume(throwing: error)
                }
            }

            self.add(op)
        }

        return found
    }

    // public func fetchZone(withID target: CKRecordZone.ID) async throws -> CKRecordZone? {
    func fetchZone(withID target: RecordZone.ID) async throws -> RecordZone? {
        if await Cirrus.instance.isOffline { throw Cirrus.CirrusError.offline }
        let all = try await allZones()
        return all.first { $0.zoneID.ownerName == target.ownerName && $0.zoneID.zoneName == target.zoneName }
    }

    // public func createZone(named name: String) async throws -> CKRecordZone {
    func createZone(named name: String) async throws -> RecordZone {
        if await Cirrus.instance.isOffline { throw Cirrus.CirrusError.offline }
        if self == .private, let zone = await Cirrus.instance.privateZone(named: name) { return zone }

        let newZones = try await setup(zones: [name])
        if let newZone = newZones[name] { return newZone }
        throw Cirrus.CirrusError.unableToCreateZone
    }

    // @discardableResult func setup(zones names: [String]) async throws -> [String: CKRecordZone] {
    @discardableResult func setup(zones names: [String]) async throws -> [String: RecordZone] {
        if await Cirrus.instance.isOffline { throw Cirrus.CirrusError.offline }
        let zones = Dictionary(uniqueKeysWithValues: names.map { ($0, RecordZone(zoneName: $0)) })
        let op = ModifyRecordZonesOperation(recordZonesToSave: Array(zones.values), recordZoneIDsToDelete: nil)

        return try await withUnsafeThrowingContinuation { continuation in
            op.modifyRecordZonesResultBlock = { result in
                switch result {
                case .success:
                    continuation.resume(returning: zones)
                case .failure(let error):
                    continuation.resume(throwing: error)
                }
            }
            self.add(op)
        }
    }
}

extension Database.Scope: Codable {
    // public var database: CKDatabase {
    fileprivate var database: Database {
        switch self {
        case .private: return Cirrus.instance.container.privateCloudDatabase
        case .public: return Cirrus.instance.container.publicCloudDatabase
        case .shared: return Cirrus.instance.container.sharedCloudDatabase
        // default: return Cirrus.instance.container.privateCloudDatabase
        @unknown default: return Cirrus.instance.container.privateCloudDatabase
        }
    }
    // public static var allScopes: [CKDatabase.Scope] {
    fileprivate static var allScopes: [Database.Scope] {
        [.private, .public, .shared]
    }

    // public var name: String {
    fileprivate var name: String {
        switch self {
        case .private: return "private"
        case .public: return "public"
        case .shared: return "shared"
        // default: return "\(rawValue)"
        @unknown default: return "\(rawValue)"
        }
    }
}

// MARK: - Extensions/CKAccountStatus.swift

extension AccountStatus: CustomStringConvertible {
    public var description: String {
        switch self {
        case .couldNotDetermine: return "could not determine"
        case .available: return "available"
        case .restricted: return "restricted"
        case .noAccount: return "noAccount"
        case .temporarilyUnavailable: return "temporarilyUnavailable"
        @unknown default: return "unknown"
        }
    }
}

// MARK: - Extensions/CKSubscription.swift

// public extension CKSubscription.SubscriptionType {
fileprivate extension Subscription.SubscriptionType {
    var title: String {
        switch self {
        case .query: return "query"
        case .recordZone: return "recordZone"
        case .database: return "database"
        @unknown default: return "unknown"
        }
    }
}

// public extension CKSubscription {
fileprivate extension Subscription {
    var detailedDescription: String {
        var result = subscriptionType.title
        if let db = self as? DatabaseSubscription {
            if let recordType = db.recordType { result += ": \(recordType)" }
        }

        return result
    }
}

// MARK: - Extensions/CKRecord.ID.swift

// extension CKRecord.ID {
fileprivate extension Record.ID {
    // `func zone(in scope: CKDatabase.Scope) -> CKRecordZone?`: left out (the singleton's zone cache).

    var json: [String: Any] { ["record-id": [recordName, zoneID.zoneName, zoneID.ownerName]] }

    convenience init?(_ json: [String: Any]) {
        guard let fields = json["record-id"] as? [String], fields.count == 3 else { return nil }

        self.init(recordName: fields[0], zoneID: RecordZone.ID(zoneName: fields[1], ownerName: fields[2]))
    }
}

// public struct EncodedCKRecordID: Codable {
fileprivate struct EncodedCKRecordID: Codable {
    enum CodingKeys: String, CodingKey { case name, zone, owner }
    let id: Record.ID

    init(_ id: Record.ID) {
        self.id = id
    }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id.recordName, forKey: .name)
        try container.encode(id.zoneID.zoneName, forKey: .zone)
        try container.encode(id.zoneID.ownerName, forKey: .owner)
    }

    public init(from decoder: Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let name = try container.decode(String.self, forKey: .name)
        let zoneName = try container.decode(String.self, forKey: .zone)
        let owner = try container.decode(String.self, forKey: .owner)
        id = Record.ID(recordName: name, zoneID: RecordZone.ID(zoneName: zoneName, ownerName: owner))
    }
}

// MARK: - Tests

/// What the app keeps of a record it shows: the scope it came from, coded as the app codes it.
fileprivate struct Bookmark: Codable, Equatable {
    var scope: Database.Scope
    var id: EncodedCKRecordID

    static func == (a: Bookmark, b: Bookmark) -> Bool { a.scope == b.scope && a.id.id == b.id.id }
}

@Suite("Ben Gottlieb's Cirrus: its CloudKit extensions, ported", .serialized, .timeLimit(.minutes(30)))
struct CirrusDatabaseExtensionsTests {
    private func withCirrus<T>(on engine: TestEngine, _ body: (Container) async throws -> T) async throws -> T {
        try await withContainer(on: engine) { container in
            Cirrus.instance = Cirrus(container: container)
            return try await body(container)
        }
    }

    @Test("the app's own Codable scope writes the raw value, reads back, and names the singleton's databases", arguments: TestEngine.all)
    func scopeCodable(engine: TestEngine) async throws {
        try await withCirrus(on: engine) { container in
            let id = Record.ID(recordName: "n1", zoneID: RecordZone.ID(zoneName: "Notes", ownerName: CurrentUserDefaultName))
            let marks = Database.Scope.allScopes.map { Bookmark(scope: $0, id: EncodedCKRecordID(id)) }
            let data = try JSONEncoder().encode(marks)
            let json = try #require(try JSONSerialization.jsonObject(with: data) as? [[String: Any]])
            #expect(json.compactMap { $0["scope"] as? Int } == [2, 1, 3])
            #expect((json.first?["id"] as? [String: String]) == ["name": "n1", "zone": "Notes", "owner": CurrentUserDefaultName])
            #expect(try JSONDecoder().decode([Bookmark].self, from: data) == marks)
            #expect(Database.Scope.allScopes.map(\.name) == ["private", "public", "shared"])
            #expect(Database.Scope.shared.database == container.sharedCloudDatabase)
            #expect(Database.Kind.private.database == container.privateCloudDatabase)
            #expect(Database.Scope.public.database.databaseScope == .public)
        }
    }

    @Test("zones made with setup(zones:) are listed by allZones() and found by fetchZone(withID:); createZone answers the made zone", arguments: TestEngine.all)
    func zones(engine: TestEngine) async throws {
        try await withCirrus(on: engine) { container in
            let made = try await Database.private.setup(zones: ["Notes", "Photos"])
            #expect(Set(made.keys) == ["Notes", "Photos"])
            let names = try await Database.private.allZones().map(\.zoneID.zoneName)
            #expect(Set(names) == [RecordZone.ID.default.zoneName, "Notes", "Photos"])
            let photos = try await Database.private.fetchZone(withID: RecordZone.ID(zoneName: "Photos", ownerName: CurrentUserDefaultName))
            #expect(photos?.zoneID.zoneName == "Photos")
            #expect(try await Database.private.fetchZone(withID: RecordZone.ID(zoneName: "Missing", ownerName: CurrentUserDefaultName)) == nil)
            let created = try await Database.private.createZone(named: "Music")
            #expect(created.zoneID.zoneName == "Music")
            #expect(try await container.privateCloudDatabase.recordZone(for: created.zoneID).zoneID == created.zoneID)
        }
    }

    @Test("fetchRecords pages with cursors until its limit; fetchRecord answers nil for a missing record and a missing zone, and resolves references", arguments: TestEngine.all)
    func records(engine: TestEngine) async throws {
        try await withCirrus(on: engine) { container in
            let database = Database.public
            var saved: [Record] = []
            for index in 0..<7 {
                let record = Record(recordType: "Song", recordID: Record.ID(recordName: "s\(index)"))
                record["index"] = index
                saved.append(try await database.save(record))
            }
            let all = try await database.fetchRecords(ofType: "Song")
            #expect(all.compactMap { $0["index"] as? Int }.sorted() == Array(0..<7))

            // A limit pages: each page holds `limit` records and the loop stops once it has as many.
            let three = try await database.fetchRecords(ofType: "Song", matching: try QueryPredicate(format: "index >= %d", 2), keys: ["index"], limit: 3)
            #expect(three.count == 3)
            #expect(three.allSatisfy { ($0["index"] as? Int ?? -1) >= 2 })

            #expect(try await database.fetchRecord(withID: Record.ID(recordName: "s3"))?["index"] as? Int == 3)
            #expect(try await database.fetchRecord(withID: Record.ID(recordName: "nothing")) == nil)
            let elsewhere = Record.ID(recordName: "s1", zoneID: RecordZone.ID(zoneName: "Gone", ownerName: CurrentUserDefaultName))
            #expect(try await Database.private.fetchRecord(withID: elsewhere) == nil)
            #expect(Cirrus.instance.cancelledAfter.isEmpty)

            let reference = Record.Reference(recordID: saved[4].recordID, action: .none)
            #expect(try await database.resolve(reference: reference)?["index"] as? Int == 4)
            #expect(try await database.resolve(reference: nil) == nil)
        }
    }

    @Test("the record ID's JSON form rebuilds the ID; a subscription's description names its kind and record type; the account status prints as the app words it", arguments: TestEngine.all)
    func smallExtensions(engine: TestEngine) async throws {
        try await withCirrus(on: engine) { container in
            let id = Record.ID(recordName: "n1", zoneID: RecordZone.ID(zoneName: "Notes", ownerName: CurrentUserDefaultName))
            #expect(Record.ID(id.json) == id)
            #expect(Record.ID(["record-id": ["n1"]]) == nil)

            let subscription = DatabaseSubscription(subscriptionID: "all-notes")
            subscription.recordType = "Note"
            #expect(subscription.detailedDescription == "database: Note")
            let zoneSubscription = RecordZoneSubscription(zoneID: .default, subscriptionID: "zone")
            #expect(zoneSubscription.detailedDescription == "recordZone")

            let status = try await container.accountStatus()
            #expect("\(status)" == "available")
            #expect(status.description == "available")
        }
    }
}
