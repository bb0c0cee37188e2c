import Foundation
import Stratus
import StratusSQLite
import StratusStores
import StratusTestSupport
import Testing

// A sync engine in the style of IceCream (a Realm ↔ CloudKit bridge), ported mechanically.
// What sets it apart from the sync code other tests port: model objects are turned into
// records by walking their properties as `Any` values (`record[name] = value as? CKRecordValue`,
// `array as CKRecordValue` for lists of Int, String, Bool, Float, Double, Data and Date) and
// back with `record.value(forKey:) as? T`; one zone per object type, named after it; the scope
// chosen with an exhaustive `switch` over `CKDatabase.Scope`; tokens kept with the
// pre-secure-coding archiver calls (`NSKeyedArchiver.archivedData(withRootObject:)`,
// `NSKeyedUnarchiver.unarchiveObject(with:)`); writes sent with `.changedKeys` in an
// atomic, long-lived operation; errors sorted by a handler that reads `CKErrorRetryAfterKey`
// as a `Double`; and a public-database flavour that pulls everything with a query loop.
// The CloudKit original is in the comments.

// MARK: - The model side (Realm objects stand in as plain classes with a property list)

/// A model object as the engine sees it: a primary key and named property values.
protocol SyncedObject: AnyObject {
    static var typeName: String { get }
    static var propertyNames: [String] { get }
    static var databaseScope: Database.Scope { get }          // CKDatabase.Scope
    static var zoneID: RecordZone.ID { get }
    init()
    var primaryKey: String { get }
    subscript(property: String) -> Any? { get set }
}

extension SyncedObject {
    static var databaseScope: Database.Scope { .private }

    // public static var zoneID: CKRecordZone.ID {
    //     switch Self.databaseScope {
    //     case .private: return CKRecordZone.ID(zoneName: "\(recordType)sZone", ownerName: CKCurrentUserDefaultName)
    //     case .public: return CKRecordZone.default().zoneID
    //     default: fatalError("Shared Database is not supported now")
    //     }
    // }
    static var zoneID: RecordZone.ID {
        switch Self.databaseScope {
        case .private: return RecordZone.ID(zoneName: "\(typeName)sZone", ownerName: CurrentUserDefaultName)
        case .public: return RecordZone.default().zoneID
        case .shared: fatalError("Shared Database is not supported now")
        }
    }

    var recordID: Record.ID { Record.ID(recordName: primaryKey, zoneID: Self.zoneID) }

    /// `CKRecordConvertible.record`: every property as a record value, lists as arrays.
    var record: Record {
        let r = Record(recordType: Self.typeName, recordID: recordID)
        for name in Self.propertyNames {
            let item = self[name]
            switch item {
            case let list as [Int]: if !list.isEmpty { r[name] = list as RecordValue }
            case let list as [String]: if !list.isEmpty { r[name] = list as RecordValue }
            case let list as [Bool]: if !list.isEmpty { r[name] = list as RecordValue }
            case let list as [Float]: if !list.isEmpty { r[name] = list as RecordValue }
            case let list as [Double]: if !list.isEmpty { r[name] = list as RecordValue }
            case let list as [Data]: if !list.isEmpty { r[name] = list as RecordValue }
            case let list as [Date]: if !list.isEmpty { r[name] = list as RecordValue }
            case let owner as SyncedObject:
                r[name] = Record.Reference(recordID: owner.recordID, action: .none)
            case let file as URL:
                r[name] = Asset(fileURL: file)                      // CreamAsset's CKAsset(fileURL:)
            case let place as Location:
                r[name] = place
            default:
                r[name] = item as? RecordValue                       // item as? CKRecordValue
            }
        }
        return r
    }

    /// `CKRecordRecoverable.parseFromRecord`: each property read back with `as?` its type.
    static func parse(_ record: Record, kinds: [String: Any.Type], owners: [String: SyncedObject]) -> Self {
        let o = Self()
        for name in propertyNames {
            let value = record.value(forKey: name)
            switch kinds[name] {
            case is Int.Type?: o[name] = value as? Int
            case is String.Type?: o[name] = value as? String
            case is Bool.Type?: o[name] = value as? Bool
            case is Date.Type?: o[name] = value as? Date
            case is Float.Type?: o[name] = value as? Float
            case is Double.Type?: o[name] = value as? Double
            case is Data.Type?: o[name] = value as? Data
            case is [Int].Type?: o[name] = value as? [Int]
            case is [String].Type?: o[name] = value as? [String]
            case is [Bool].Type?: o[name] = value as? [Bool]
            case is [Float].Type?: o[name] = value as? [Float]
            case is [Double].Type?: o[name] = value as? [Double]
            case is [Data].Type?: o[name] = value as? [Data]
            case is [Date].Type?: o[name] = value as? [Date]
            case is URL.Type?: o[name] = (value as? Asset)?.fileURL
            case is Location.Type?: o[name] = value as? Location
            default:
                if let owner = value as? Record.Reference { o[name] = owners[owner.recordID.recordName] }
            }
        }
        return o
    }
}

/// Owners live in their dogs' zone: CloudKit refuses a reference to another zone (see
/// `crossZoneReference` below), so a ported model that points across zones must move one side.
/// What every model object of the port keeps: its properties by name, as a Realm object's are
/// read by key, with `id` as the primary key.
class PropertyBag {
    var values: [String: Any] = [:]
    required init() {}
    var primaryKey: String { values["id"] as? String ?? "" }
    subscript(property: String) -> Any? {
        get { values[property] }
        set { values[property] = newValue }
    }
}

final class Owner: PropertyBag, SyncedObject {
    static let typeName = "Owner"
    static var zoneID: RecordZone.ID { Dog.zoneID }
    static let propertyNames = ["id", "name"]
}

final class Dog: PropertyBag, SyncedObject {
    static let typeName = "Dog"
    static let propertyNames = ["id", "name", "age", "isVaccinated", "weight", "height", "birthday", "chip",
                                "tags", "scores", "walks", "ratios", "marks", "photos", "owner", "avatar", "home"]
    static let kinds: [String: Any.Type] = [
        "id": String.self, "name": String.self, "age": Int.self, "isVaccinated": Bool.self, "weight": Float.self,
        "height": Double.self, "birthday": Date.self, "chip": Data.self, "tags": [String].self, "scores": [Int].self,
        "walks": [Bool].self, "ratios": [Float].self, "marks": [Double].self, "photos": [Data].self,
        "owner": Owner.self, "avatar": URL.self, "home": Location.self,
    ]
}

// MARK: - The engine

/// IceCream's `ErrorHandler`: sorts what an operation's completion block got.
struct SyncErrorHandler {
    enum ResultType: Equatable {
        case success
        case retry(afterSeconds: Double)
        case chunk
        case recoverableError(reason: FailReason)
        case fail(reason: FailReason)
    }

    enum FailReason: Equatable { case changeTokenExpired, network, quotaExceeded, partialFailure, serverRecordChanged, shareRelated, unknown }

    // guard let e = error as? CKError else { … }
    // if let retry = e.userInfo[CKErrorRetryAfterKey] as? Double { return .retry(afterSeconds: retry, …) }
    func resultType(with error: Error?) -> ResultType {
        guard error != nil else { return .success }
        guard let e = error as? StratusError else { return .fail(reason: .unknown) }
        switch e.code {
        case .serviceUnavailable, .requestRateLimited, .zoneBusy:
            if let retry = e.userInfo[ErrorRetryAfterKey] as? Double {
                return .retry(afterSeconds: retry)
            }
            return .fail(reason: .unknown)
        case .networkUnavailable, .networkFailure: return .recoverableError(reason: .network)
        case .changeTokenExpired: return .recoverableError(reason: .changeTokenExpired)
        case .serverRecordChanged: return .recoverableError(reason: .serverRecordChanged)
        case .partialFailure:
            if let dictionary = e.userInfo[PartialErrorsByItemIDKey] as? NSDictionary, dictionary.count == 0 {
                return .fail(reason: .unknown)
            }
            return .recoverableError(reason: .partialFailure)
        case .limitExceeded: return .chunk
        case .alreadyShared, .participantMayNeedVerification, .referenceViolation, .tooManyParticipants:
            return .fail(reason: .shareRelated)
        case .quotaExceeded: return .fail(reason: .quotaExceeded)
        default: return .fail(reason: .unknown)
        }
    }
}

extension Array {
    /// IceCream's `chunkItUp(by:)`, used when CloudKit answers `limitExceeded`.
    func chunkItUp(by chunkSize: Int) -> [[Element]] {
        stride(from: 0, to: count, by: chunkSize).map { Array(self[$0..<Swift.min($0 + chunkSize, count)]) }
    }
}

/// IceCream's `SyncEngine` with its `PrivateDatabaseManager` and `PublicDatabaseManager`, on one
/// device. The local store is a dictionary of records by type and name.
final class RealmStyleSyncEngine: @unchecked Sendable {
    let container: Container
    let database: Database
    let databaseScope: Database.Scope
    let types: [SyncedObject.Type]
    private let errorHandler = SyncErrorHandler()
    private let lock = NSLock()
    /// What UserDefaults would hold: archived tokens and flags.
    private var defaults: [String: Any] = [:]
    private(set) var local: [String: [String: Record]] = [:]
    private(set) var log: [String] = []

    // public init(objects: [Syncable], container: CKContainer = .default(), databaseScope: CKDatabase.Scope = .private)
    init(types: [SyncedObject.Type], container: Container, databaseScope: Database.Scope = .private) {
        self.container = container
        self.types = types
        self.databaseScope = databaseScope
        switch databaseScope {
        case .private: database = container.privateCloudDatabase
        case .public: database = container.publicCloudDatabase
        case .shared: fatalError("Sorry, syncing data in shared database is not supported now")
        }
    }

    private func note(_ line: String) {
        lock.lock(); defer { lock.unlock() }
        log.append(line)
    }

    private func keep(_ record: Record) {
        lock.lock(); defer { lock.unlock() }
        local[record.recordType, default: [:]][record.recordID.recordName] = record
    }

    private func forget(_ id: Record.ID, type: String) {
        lock.lock(); defer { lock.unlock() }
        local[type]?[id.recordName] = nil
    }

    // MARK: UserDefaults-style storage

    // var databaseChangeToken: CKServerChangeToken? {
    //     get { … return NSKeyedUnarchiver.unarchiveObject(with: tokenData) as? CKServerChangeToken }
    //     set { … let data = NSKeyedArchiver.archivedData(withRootObject: n) … }
    // }
    func token(_ key: String) -> ServerChangeToken? {
        lock.lock(); defer { lock.unlock() }
        guard let tokenData = defaults[key] as? Data else { return nil }
        return NSKeyedUnarchiver.unarchiveObject(with: tokenData) as? ServerChangeToken
    }

    func setToken(_ newValue: ServerChangeToken?, _ key: String) {
        lock.lock(); defer { lock.unlock() }
        guard let n = newValue else {
            defaults[key] = nil
            return
        }
        defaults[key] = NSKeyedArchiver.archivedData(withRootObject: n)
    }

    var subscriptionIsLocallyCached: Bool {
        get { lock.lock(); defer { lock.unlock() }; return defaults["subscriptionIsLocallyCached"] as? Bool ?? false }
        set { lock.lock(); defer { lock.unlock() }; defaults["subscriptionIsLocallyCached"] = newValue }
    }

    // MARK: Start-up

    // container.accountStatus { [weak self] (status, error) in
    //     if case CKAccountStatus.available = status { … } }
    func start(completion: @escaping (Error?) -> Void) {
        container.accountStatus { status, error in
            guard case AccountStatus.available = status else {
                completion(error)
                return
            }
            guard self.databaseScope == .private else {
                completion(nil)
                return
            }
            self.createCustomZones { error in
                if let error = error {
                    completion(error)
                    return
                }
                self.createDatabaseSubscriptionIfHaveNot { _ in
                    self.fetchChangesInDatabase(completion)
                }
            }
        }
    }

    // let modifyOp = CKModifyRecordZonesOperation(recordZonesToSave: zonesToCreate, recordZoneIDsToDelete: nil)
    func createCustomZones(_ completion: @escaping (Error?) -> Void) {
        let zonesToCreate = types.map { RecordZone(zoneID: $0.zoneID) }
        let modifyOp = ModifyRecordZonesOperation(recordZonesToSave: zonesToCreate, recordZoneIDsToDelete: nil)
        modifyOp.modifyRecordZonesCompletionBlock = { _, _, error in
            switch self.errorHandler.resultType(with: error) {
            case .success: completion(nil)
            case .retry(let timeToWait):
                DispatchQueue.global().asyncAfter(deadline: .now() + timeToWait) { self.createCustomZones(completion) }
            default: completion(error)
            }
        }
        database.add(modifyOp)
    }

    // let subscription = CKDatabaseSubscription(subscriptionID: …)
    // let notificationInfo = CKSubscription.NotificationInfo(); notificationInfo.shouldSendContentAvailable = true
    // let createOp = CKModifySubscriptionsOperation(subscriptionsToSave: [subscription], subscriptionIDsToDelete: [])
    // createOp.qualityOfService = .utility
    func createDatabaseSubscriptionIfHaveNot(_ completion: @escaping (Error?) -> Void) {
        guard !subscriptionIsLocallyCached else { return completion(nil) }
        let subscription = DatabaseSubscription(subscriptionID: "private_changes")
        let notificationInfo = Subscription.NotificationInfo()
        notificationInfo.shouldSendContentAvailable = true
        subscription.notificationInfo = notificationInfo
        let createOp = ModifySubscriptionsOperation(subscriptionsToSave: [subscription], subscriptionIDsToDelete: [])
        createOp.modifySubscriptionsCompletionBlock = { _, _, error in
            if error == nil { self.subscriptionIsLocallyCached = true }
            completion(error)
        }
        createOp.qualityOfService = .utility
        database.add(createOp)
    }

    // MARK: Pulling

    func fetchChangesInDatabase(_ callback: @escaping (Error?) -> Void) {
        guard databaseScope == .private else { return fetchEverythingInPublicDatabase(callback) }
        let changesOperation = FetchDatabaseChangesOperation(previousServerChangeToken: token("databaseToken"))
        changesOperation.fetchAllChanges = true
        changesOperation.changeTokenUpdatedBlock = { newToken in self.setToken(newToken, "databaseToken") }
        changesOperation.fetchDatabaseChangesCompletionBlock = { newToken, _, error in
            switch self.errorHandler.resultType(with: error) {
            case .success:
                self.setToken(newToken, "databaseToken")
                self.fetchChangesInZones(callback)
            case .recoverableError(.changeTokenExpired):
                self.setToken(nil, "databaseToken")
                self.fetchChangesInDatabase(callback)
            default:
                callback(error)
            }
        }
        database.add(changesOperation)
    }

    // let zoneChangesOptions = CKFetchRecordZoneChangesOperation.ZoneOptions()
    // zoneChangesOptions.previousServerChangeToken = syncObject.zoneChangesToken
    // CKFetchRecordZoneChangesOperation(recordZoneIDs: zoneIds, optionsByRecordZoneID: zoneIdOptions)
    private func fetchChangesInZones(_ callback: @escaping (Error?) -> Void) {
        let zoneIdOptions = types.reduce([RecordZone.ID: FetchRecordZoneChangesOperation.ZoneOptions]()) { dict, type in
            var dict = dict
            let zoneChangesOptions = FetchRecordZoneChangesOperation.ZoneOptions()
            zoneChangesOptions.previousServerChangeToken = token("zone." + type.typeName)
            dict[type.zoneID] = zoneChangesOptions
            return dict
        }
        let changesOp = FetchRecordZoneChangesOperation(recordZoneIDs: types.map { $0.zoneID }, optionsByRecordZoneID: zoneIdOptions)
        changesOp.fetchAllChanges = true
        changesOp.recordZoneChangeTokensUpdatedBlock = { zoneId, token, _ in
            guard let type = self.types.first(where: { $0.zoneID == zoneId }) else { return }
            self.setToken(token, "zone." + type.typeName)
        }
        changesOp.recordChangedBlock = { record in
            guard self.types.contains(where: { $0.typeName == record.recordType }) else { return }
            self.keep(record)
        }
        changesOp.recordWithIDWasDeletedBlock = { recordId, recordType in
            self.forget(recordId, type: recordType)
        }
        changesOp.recordZoneFetchCompletionBlock = { zoneId, token, _, _, error in
            guard let type = self.types.first(where: { $0.zoneID == zoneId }) else { return }
            switch self.errorHandler.resultType(with: error) {
            case .success:
                self.setToken(token, "zone." + type.typeName)
                self.note("synced \(zoneId.zoneName)")
            case .recoverableError(.changeTokenExpired):
                self.setToken(nil, "zone." + type.typeName)
                self.note("expired \(zoneId.zoneName)")
            default:
                self.note("failed \(zoneId.zoneName)")
            }
        }
        changesOp.fetchRecordZoneChangesCompletionBlock = { error in callback(error) }
        database.add(changesOp)
    }

    // PublicDatabaseManager: a query of every record of each type, continued with cursors.
    // let query = CKQuery(recordType: syncObject.recordType, predicate: NSPredicate(value: true))
    // queryOperation.recordFetchedBlock = { record in syncObject.add(record: record) }
    // queryOperation.queryCompletionBlock = { cursor, error in
    //     if let cursor = cursor { self.excuteQueryOperation(queryOperation: CKQueryOperation(cursor: cursor), …); return } … }
    private func fetchEverythingInPublicDatabase(_ callback: @escaping (Error?) -> Void) {
        let group = DispatchGroup()
        let failure = FirstError()
        for type in types {
            group.enter()
            let query = Query(recordType: type.typeName, predicate: QueryPredicate(value: true))
            excuteQueryOperation(QueryOperation(query: query)) { error in
                if let error = error { failure.record(error) }
                group.leave()
            }
        }
        group.notify(queue: .global()) { callback(failure.error) }
    }

    private func excuteQueryOperation(_ queryOperation: QueryOperation, callback: @escaping (Error?) -> Void) {
        queryOperation.resultsLimit = 3
        queryOperation.recordFetchedBlock = { record in self.keep(record) }
        queryOperation.queryCompletionBlock = { cursor, error in
            if let cursor = cursor {
                self.excuteQueryOperation(QueryOperation(cursor: cursor), callback: callback)
                return
            }
            callback(error)
        }
        database.add(queryOperation)
    }

    // MARK: Pushing

    // let modifyOpe = CKModifyRecordsOperation(recordsToSave: recordsToStore, recordIDsToDelete: recordIDsToDelete)
    // let config = CKOperation.Configuration(); config.isLongLived = true; modifyOpe.configuration = config
    // modifyOpe.savePolicy = .changedKeys; modifyOpe.isAtomic = true
    func syncRecordsToCloudKit(recordsToStore: [Record], recordIDsToDelete: [Record.ID], completion: @escaping (Error?) -> Void) {
        let modifyOpe = ModifyRecordsOperation(recordsToSave: recordsToStore, recordIDsToDelete: recordIDsToDelete)
        let config = DatabaseOperation.Configuration()
        config.isLongLived = true
        modifyOpe.configuration = config
        modifyOpe.savePolicy = .changedKeys
        modifyOpe.isAtomic = true
        modifyOpe.modifyRecordsCompletionBlock = { _, _, error in
            switch self.errorHandler.resultType(with: error) {
            case .success: completion(nil)
            case .retry(let timeToWait):
                DispatchQueue.global().asyncAfter(deadline: .now() + timeToWait) {
                    self.syncRecordsToCloudKit(recordsToStore: recordsToStore, recordIDsToDelete: recordIDsToDelete, completion: completion)
                }
            case .chunk:
                let group = DispatchGroup()
                for chunk in recordsToStore.chunkItUp(by: 300) {
                    group.enter()
                    self.syncRecordsToCloudKit(recordsToStore: chunk, recordIDsToDelete: []) { _ in group.leave() }
                }
                group.notify(queue: .global()) { completion(nil) }
            default:
                completion(error)
            }
        }
        database.add(modifyOpe)
    }
}

/// The first error a group of callbacks reported.
final class FirstError: @unchecked Sendable {
    private let lock = NSLock()
    private(set) var error: Error?
    func record(_ error: Error) {
        lock.lock(); defer { lock.unlock() }
        if self.error == nil { self.error = error }
    }
}

// MARK: - Tests

@Suite("A Realm-style sync engine (IceCream), ported from CloudKit", .timeLimit(.minutes(30)))
struct RealmSyncEngineTests {
    private func sampleDog(owner: Owner, avatar: URL) -> Dog {
        let dog = Dog()
        dog["id"] = "rex"
        dog["name"] = "Rex"
        dog["age"] = 4
        dog["isVaccinated"] = true
        dog["weight"] = Float(12.5)
        dog["height"] = 0.55
        dog["birthday"] = Date(timeIntervalSince1970: 1_600_000_000)
        dog["chip"] = Data([0xCA, 0xFE])
        dog["tags"] = ["good", "loud"]
        dog["scores"] = [3, 1, 4]
        dog["walks"] = [true, false, true]
        dog["ratios"] = [Float(0.5), Float(1.25)]
        dog["marks"] = [2.5, -0.0]
        dog["photos"] = [Data([1]), Data([2, 3])]
        dog["owner"] = owner
        dog["avatar"] = avatar
        dog["home"] = Location(latitude: 48.85, longitude: 2.35)
        return dog
    }

    @Test("objects → records → store → another device's records → objects, every property type as it was", arguments: TestEngine.all)
    func modelRoundTrip(engine: TestEngine) async throws {
        try await withStore(on: engine) { location, store in
            let phone = try Container(identifier: "iCloud.com.example.dogs", store: location, userName: "alice")
            let laptop = try Container(identifier: "iCloud.com.example.dogs", store: location, userName: "alice")
            let avatarFile = FileManager.default.temporaryDirectory.appendingPathComponent("avatar-\(UUID().uuidString).jpg")
            try Data("jpeg bytes".utf8).write(to: avatarFile)
            defer { try? FileManager.default.removeItem(at: avatarFile) }

            let first = RealmStyleSyncEngine(types: [Dog.self, Owner.self], container: phone)
            try await call(first.start)
            let owner = Owner()
            owner["id"] = "ann"
            owner["name"] = "Ann"
            let dog = sampleDog(owner: owner, avatar: avatarFile)
            try await call { first.syncRecordsToCloudKit(recordsToStore: [owner.record], recordIDsToDelete: [], completion: $0) }
            try await call { first.syncRecordsToCloudKit(recordsToStore: [dog.record], recordIDsToDelete: [], completion: $0) }

            let second = RealmStyleSyncEngine(types: [Dog.self, Owner.self], container: laptop)
            try await call(second.start)
            let owners = (second.local["Owner"] ?? [:]).mapValues { Owner.parse($0, kinds: ["id": String.self, "name": String.self], owners: [:]) }
            let record = try #require(second.local["Dog"]?["rex"])
            #expect(record.recordID.zoneID.zoneName == "DogsZone")
            let back = Dog.parse(record, kinds: Dog.kinds, owners: owners)
            #expect(back["name"] as? String == "Rex")
            #expect(back["age"] as? Int == 4)
            #expect(back["isVaccinated"] as? Bool == true)
            #expect(back["weight"] as? Float == 12.5)
            #expect(back["height"] as? Double == 0.55)
            #expect(back["birthday"] as? Date == Date(timeIntervalSince1970: 1_600_000_000))
            #expect(back["chip"] as? Data == Data([0xCA, 0xFE]))
            #expect(back["tags"] as? [String] == ["good", "loud"])
            #expect(back["scores"] as? [Int] == [3, 1, 4])
            #expect(back["walks"] as? [Bool] == [true, false, true])
            #expect(back["ratios"] as? [Float] == [0.5, 1.25])
            #expect(back["marks"] as? [Double] == [2.5, -0.0])
            #expect(back["photos"] as? [Data] == [Data([1]), Data([2, 3])])
            #expect((back["owner"] as? Owner)?["name"] as? String == "Ann")
            let avatar = try #require(back["avatar"] as? URL)
            #expect(try Data(contentsOf: avatar) == Data("jpeg bytes".utf8))
            #expect((back["home"] as? Location)?.coordinate.latitude == 48.85)
            // Stored as CloudKit stores them: a Bool list as INT64s, a Float list as DOUBLEs.
            #expect(record.fieldValue(forKey: "walks") == .int64List([1, 0, 1]))
            #expect(record.fieldValue(forKey: "ratios") == .doubleList([0.5, 1.25]))
        }
    }

    @Test("changes and deletions reach the other device; tokens archived with the old archiver calls continue the feed", arguments: TestEngine.all)
    func changesContinueFromArchivedTokens(engine: TestEngine) async throws {
        try await withStore(on: engine) { location, store in
            let phone = try Container(identifier: "iCloud.com.example.dogs", store: location, userName: "alice")
            let laptop = try Container(identifier: "iCloud.com.example.dogs", store: location, userName: "alice")
            let first = RealmStyleSyncEngine(types: [Dog.self], container: phone)
            let second = RealmStyleSyncEngine(types: [Dog.self], container: laptop)
            try await call(first.start)
            try await call(second.start)
            #expect(second.subscriptionIsLocallyCached)
            #expect(try await laptop.privateCloudDatabase.allSubscriptions().map(\.subscriptionID) == ["private_changes"])

            var dogs: [Dog] = []
            for name in ["a", "b", "c"] {
                let dog = Dog()
                dog["id"] = name
                dog["name"] = name.uppercased()
                dogs.append(dog)
            }
            try await call { first.syncRecordsToCloudKit(recordsToStore: dogs.map(\.record), recordIDsToDelete: [], completion: $0) }
            try await call(second.fetchChangesInDatabase)
            #expect(Set(second.local["Dog"]?.keys ?? [:].keys) == ["a", "b", "c"])
            #expect(second.token("databaseToken") != nil)
            #expect(second.token("zone.Dog") != nil)

            // A rename sent with .changedKeys from a fresh object (no change tag), and a deletion.
            let renamed = Dog()
            renamed["id"] = "a"
            renamed["name"] = "Ace"
            try await call { first.syncRecordsToCloudKit(recordsToStore: [renamed.record], recordIDsToDelete: [dogs[1].recordID], completion: $0) }
            try await call(second.fetchChangesInDatabase)
            #expect(second.local["Dog"]?["a"]?["name"] as? String == "Ace")
            #expect(second.local["Dog"]?["b"] == nil)
            #expect(second.log.last == "synced DogsZone")

            // Nothing new: the archived tokens bring nothing back.
            let before = second.local["Dog"]?.count
            try await call(second.fetchChangesInDatabase)
            #expect(second.local["Dog"]?.count == before)
        }
    }

    @Test("the error handler's classes: CKErrorRetryAfterKey read as a Double, partial failures, limitExceeded chunks", arguments: TestEngine.all)
    func errorHandler(engine: TestEngine) async throws {
        let handler = SyncErrorHandler()
        #expect(handler.resultType(with: nil) == .success)
        #expect(handler.resultType(with: StratusError(.zoneBusy, userInfo: [ErrorRetryAfterKey: 2.5])) == .retry(afterSeconds: 2.5))
        #expect(handler.resultType(with: StratusError(.requestRateLimited, userInfo: [ErrorRetryAfterKey: NSNumber(value: 3)])) == .retry(afterSeconds: 3))
        #expect(handler.resultType(with: StratusError(.serviceUnavailable)) == .fail(reason: .unknown))
        #expect(handler.resultType(with: StratusError(.limitExceeded)) == .chunk)
        #expect(handler.resultType(with: StratusError(.changeTokenExpired)) == .recoverableError(reason: .changeTokenExpired))
        #expect(handler.resultType(with: CocoaError(.fileNoSuchFile)) == .fail(reason: .unknown))

        // A conflict inside an atomic .changedKeys request: the handler sees a partial failure
        // whose items are the conflict and batchRequestFailed.
        try await withContainer(on: engine) { container in
            let engine = RealmStyleSyncEngine(types: [Dog.self], container: container)
            try await call(engine.start)
            let dog = Dog()
            dog["id"] = "x"
            try await call { engine.syncRecordsToCloudKit(recordsToStore: [dog.record], recordIDsToDelete: [], completion: $0) }
            let error = await withCheckedContinuation { (continuation: CheckedContinuation<Error?, Never>) in
                let modify = ModifyRecordsOperation(recordsToSave: [dog.record], recordIDsToDelete: nil)
                modify.modifyRecordsCompletionBlock = { _, _, error in continuation.resume(returning: error) }
                container.privateCloudDatabase.add(modify)
            }
            #expect(handler.resultType(with: error) == .recoverableError(reason: .partialFailure))
        }
    }

    @Test("a reference to a record in another zone is refused with invalidArguments, as CloudKit documents", arguments: TestEngine.all)
    func crossZoneReference(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let engine = RealmStyleSyncEngine(types: [Dog.self, Walker.self], container: container)
            try await call(engine.start)
            let walker = Walker()
            walker["id"] = "sam"
            let dog = Dog()
            dog["id"] = "fido"
            dog["owner"] = walker
            #expect(dog.record.recordID.zoneID.zoneName == "DogsZone")
            #expect((dog.record["owner"] as? Record.Reference)?.recordID.zoneID.zoneName == "WalkersZone")
            var failure: Error?
            do {
                try await call { engine.syncRecordsToCloudKit(recordsToStore: [walker.record, dog.record], recordIDsToDelete: [], completion: $0) }
            } catch {
                failure = error
            }
            let error = try #require(failure as? StratusError)
            #expect(error.code == .partialFailure)
            #expect((error.partialErrorsByItemID?[dog.recordID] as? StratusError)?.code == .invalidArguments)
            // The walker's own zone was written: atomicity holds per zone.
            #expect(try await container.privateCloudDatabase.record(for: walker.recordID)["id"] as? String == "sam")
        }
    }

    @Test("the public-database flavour pulls every record of each type through query cursors", arguments: TestEngine.all)
    func publicDatabasePull(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            for index in 0..<8 {
                let owner = PublicOwnerObject()
                owner["id"] = "owner-\(index)"
                owner["name"] = "Owner \(index)"
                _ = try await container.publicCloudDatabase.save(owner.record)
            }
            let engine = RealmStyleSyncEngine(types: [PublicOwnerObject.self], container: container, databaseScope: .public)
            try await call(engine.start)
            try await call(engine.fetchChangesInDatabase)
            #expect(engine.local["Owner"]?.count == 8)
            #expect(engine.local["Owner"]?["owner-7"]?["name"] as? String == "Owner 7")
            #expect(PublicOwnerObject.zoneID == RecordZone.ID.default)
        }
    }
}

/// A type in a zone of its own ("WalkersZone"), as IceCream gives every type.
final class Walker: PropertyBag, SyncedObject {
    static let typeName = "Walker"
    static let propertyNames = ["id"]
}

/// An owner kept in the public database: the default zone, as IceCream's `.public` scope.
final class PublicOwnerObject: PropertyBag, SyncedObject {
    static let typeName = "Owner"
    static let propertyNames = ["id", "name"]
    static var databaseScope: Database.Scope { .public }
}

/// Runs callback-style code and throws what its completion reported.
func call(_ start: (@escaping (Error?) -> Void) -> Void) async throws {
    let box = FirstError()
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        start { error in
            if let error = error { box.record(error) }
            continuation.resume()
        }
    }
    if let error = box.error { throw error }
}
