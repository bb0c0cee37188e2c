import Foundation
import Stratus
import StratusSQLite
import StratusStores
import StratusTestSupport
import Testing

// A Core Data ↔ CloudKit bridge in the style of CloudCore, ported mechanically. Its CloudKit
// habits that other ported code does not have: each object keeps its record's system fields
// as data written with `NSKeyedArchiver(forWritingWith: NSMutableData)` and read back through
// a convenience `CKRecord(archivedData:)` that calls `self.init(coder:)`; references made from
// such restored records, their action spelled `CKRecord_Reference_Action`; pushes grouped by
// database in an `OperationQueue` subclass (`element.database == database`), large data sent as
// a `CKAsset` of a temporary file named relative to the temporary directory and removed once
// its record is saved; values set with `record.setValue(_:forKey:)` from `Any?`; public-database
// changes pulled through query subscriptions (IDs built from `predicate.predicateFormat`) and
// `CKFetchNotificationChangesOperation` run with `container.add(_:)`; private changes through
// `CKFetchDatabaseChangesOperation` and `CKFetchRecordZoneChangesOperation(recordZoneIDs:
// configurationsByRecordZoneID:)`, re-run while `isMore`; all of it inside an `Operation`'s
// `main()`, waiting on no-op `BlockOperation`s that depend on the CloudKit operations
// (`queue.waitUntilAllOperationsAreFinished()`). The CloudKit original is in the comments.

// MARK: - Archived system fields

extension Record {
    // convenience init?(archivedData: Data) {
    //     let unarchiver = NSKeyedUnarchiver(forReadingWith: archivedData)
    //     unarchiver.requiresSecureCoding = true
    //     self.init(coder: unarchiver)
    // }
    convenience init?(archivedData: Data) {
        let unarchiver = NSKeyedUnarchiver(forReadingWith: archivedData)
        unarchiver.requiresSecureCoding = true
        self.init(coder: unarchiver)
    }

    // var encdodedSystemFields: Data {
    //     let archivedData = NSMutableData()
    //     let archiver = NSKeyedArchiver(forWritingWith: archivedData)
    //     archiver.requiresSecureCoding = true
    //     self.encodeSystemFields(with: archiver)
    //     archiver.finishEncoding()
    //     return archivedData as Data
    // }
    var encodedSystemFields: Data {
        let archivedData = NSMutableData()
        let archiver = NSKeyedArchiver(forWritingWith: archivedData)
        archiver.requiresSecureCoding = true
        self.encodeSystemFields(with: archiver)
        archiver.finishEncoding()
        return archivedData as Data
    }
}

// MARK: - The local store (a stand-in for Core Data)

/// A managed object as the bridge sees it: an entity name, attribute values, to-one
/// relationships, and the service attributes (record name, archived system fields per scope).
final class ManagedObject {
    let entityName: String
    var values: [String: Any] = [:]
    var relationships: [String: ManagedObject] = [:]
    /// The inverse relationship's delete rule is cascade: the reference is `.deleteSelf`.
    var cascades: Set<String> = []
    var recordName: String?
    var recordData: [Database.Scope: Data] = [:]

    init(entityName: String) {
        self.entityName = entityName
    }

    // func setRecordInformation(for scope: CKDatabase.Scope) throws -> CKRecord
    @discardableResult
    func setRecordInformation(for scope: Database.Scope, zoneID: RecordZone.ID) -> Record {
        if recordName == nil { recordName = UUID().uuidString }
        let record: Record
        if scope == .public {
            record = Record(recordType: entityName, recordID: Record.ID(recordName: recordName!))
        } else {
            record = Record(recordType: entityName, recordID: Record.ID(recordName: recordName!, zoneID: zoneID))
        }
        recordData[scope] = record.encodedSystemFields
        return record
    }

    // func restoreRecordWithSystemFields(for scope: CKDatabase.Scope) throws -> CKRecord?
    func restoreRecordWithSystemFields(for scope: Database.Scope) -> Record? {
        guard let encodedRecordData = recordData[scope] else { return nil }
        return Record(archivedData: encodedRecordData)
    }
}

/// CloudCore's `CoreDataRelationship.makeReference(from:)`.
func makeReference(to object: ManagedObject, cascade: Bool, scope: Database.Scope) -> Record.Reference? {
    // let action: CKRecord_Reference_Action
    let action: Record_Reference_Action
    if cascade {
        action = .deleteSelf
    } else {
        action = .none
    }
    guard let record = object.restoreRecordWithSystemFields(for: scope) else { return nil }
    return Record.Reference(record: record, action: action)
}

/// CloudCore's `CoreDataAttribute.createAsset(for:)`: a file named relative to the temporary
/// directory.
func createAsset(for data: Data) throws -> Asset {
    let fileName = UUID().uuidString.lowercased() + ".bin"
    let fullURL = URL(fileURLWithPath: fileName, relativeTo: FileManager.default.temporaryDirectory)
    try data.write(to: fullURL)
    return Asset(fileURL: fullURL)
}

/// CloudCore's `ObjectToRecordOperation.fillRecordWithData`: the record to push, made from the
/// object's archived system fields and its values, set with `setValue(_:forKey:)`.
func recordToPush(_ object: ManagedObject, scope: Database.Scope, bigDataLimit: Int) throws -> Record? {
    guard let record = object.restoreRecordWithSystemFields(for: scope) else { return nil }
    for (attributeName, value) in object.values {
        var recordValue: Any? = value
        if value is NSNull {
            recordValue = nil
        } else if let binaryData = value as? Data, binaryData.count > bigDataLimit {
            recordValue = try createAsset(for: binaryData)
        }
        record.setValue(recordValue, forKey: attributeName)
    }
    for (name, target) in object.relationships {
        record.setValue(makeReference(to: target, cascade: object.cascades.contains(name), scope: scope), forKey: name)
    }
    return record
}

// MARK: - Pushing

/// CloudCore's `PushOperationQueue`: modifications split by database, one operation each.
final class PushOperationQueue: OperationQueue, @unchecked Sendable {
    var errorBlock: ((Error) -> Void)?
    private let lock = NSLock()
    private(set) var removedAssetFiles: [URL] = []

    private final class DatabaseModifyDataSource {
        let database: Database
        var save = [Record]()
        var delete = [Record.ID]()
        init(database: Database) { self.database = database }
    }

    func addOperations(recordsToSave: [(Record, Database)], recordIDsToDelete: [(Record.ID, Database)]) {
        var datasource = [DatabaseModifyDataSource]()
        func find(_ database: Database) -> DatabaseModifyDataSource? {
            for element in datasource where element.database == database { return element }
            return nil
        }
        for (record, database) in recordsToSave {
            if let modifier = find(database) {
                modifier.save.append(record)
            } else {
                let newModifier = DatabaseModifyDataSource(database: database)
                newModifier.save.append(record)
                datasource.append(newModifier)
            }
        }
        for (recordID, database) in recordIDsToDelete {
            if let modifier = find(database) {
                modifier.delete.append(recordID)
            } else {
                let newModifier = DatabaseModifyDataSource(database: database)
                newModifier.delete.append(recordID)
                datasource.append(newModifier)
            }
        }
        for databaseModifier in datasource {
            addOperation(recordsToSave: databaseModifier.save, recordIDsToDelete: databaseModifier.delete, database: databaseModifier.database)
        }
    }

    private func addOperation(recordsToSave: [Record], recordIDsToDelete: [Record.ID], database: Database) {
        let modifyOperation = ModifyRecordsOperation(recordsToSave: recordsToSave, recordIDsToDelete: recordIDsToDelete)
        modifyOperation.savePolicy = .changedKeys
        modifyOperation.perRecordCompletionBlock = { record, error in
            if let error = error {
                self.errorBlock?(error)
            } else {
                self.removeCachedAssets(for: record)
            }
        }
        modifyOperation.modifyRecordsCompletionBlock = { _, _, error in
            if let error = error { self.errorBlock?(error) }
        }
        modifyOperation.database = database
        self.addOperation(modifyOperation)
    }

    /// Remove locally cached assets prepared for uploading.
    private func removeCachedAssets(for record: Record) {
        for key in record.allKeys() {
            guard let asset = record.value(forKey: key) as? Asset, let url = asset.fileURL else { continue }
            try? FileManager.default.removeItem(at: url)
            lock.lock()
            removedAssetFiles.append(url)
            lock.unlock()
        }
    }
}

// MARK: - Pulling

/// CloudCore's `Tokens`: the database tokens by scope and the zone tokens by zone ID, each an
/// archived dictionary.
final class SyncTokens: NSObject, NSSecureCoding, @unchecked Sendable {
    var tokensByDatabaseScope = [Int: ServerChangeToken]()
    var tokensByRecordZoneID = [RecordZone.ID: ServerChangeToken]()
    static var supportsSecureCoding: Bool { true }

    private struct ArchiverKey {
        static let tokensByDatabaseScope = "tokensByDatabaseScope"
        static let tokensByRecordZoneID = "tokensByRecordZoneID"
    }

    override init() { super.init() }

    required init?(coder aDecoder: NSCoder) {
        // containsValue(forKey:) first: swift-corelibs-foundation fails the whole unarchiving
        // when decodeObject(of:forKey:) meets a missing key (Apple's answers nil).
        if aDecoder.containsValue(forKey: ArchiverKey.tokensByDatabaseScope),
           let decodedTokensByScope = aDecoder.decodeObject(of: [NSDictionary.self, NSNumber.self, ServerChangeToken.self],
                                                            forKey: ArchiverKey.tokensByDatabaseScope) as? [Int: ServerChangeToken] {
            self.tokensByDatabaseScope = decodedTokensByScope
        }
        if aDecoder.containsValue(forKey: ArchiverKey.tokensByRecordZoneID),
           let decodedTokensByZone = aDecoder.decodeObject(of: [NSDictionary.self, RecordZone.ID.self, ServerChangeToken.self],
                                                           forKey: ArchiverKey.tokensByRecordZoneID) as? [RecordZone.ID: ServerChangeToken] {
            self.tokensByRecordZoneID = decodedTokensByZone
        }
    }

    func encode(with aCoder: NSCoder) {
        aCoder.encode(tokensByDatabaseScope, forKey: ArchiverKey.tokensByDatabaseScope)
        aCoder.encode(tokensByRecordZoneID, forKey: ArchiverKey.tokensByRecordZoneID)
    }

    func token(for scope: Database.Scope) -> ServerChangeToken? { tokensByDatabaseScope[scope.rawValue] }
    func setToken(_ token: ServerChangeToken?, for scope: Database.Scope) { tokensByDatabaseScope[scope.rawValue] = token }

    // saveToUserDefaults / loadFromUserDefaults
    func archived() throws -> Data { try NSKeyedArchiver.archivedData(withRootObject: self, requiringSecureCoding: true) }
    static func unarchived(_ data: Data) throws -> SyncTokens? {
        try NSKeyedUnarchiver.unarchivedObject(ofClasses: [SyncTokens.self, ServerChangeToken.self, RecordZone.ID.self, NSDictionary.self, NSNumber.self], from: data) as? SyncTokens
    }
}

/// CloudCore's `PullChangesOperation`: an `Operation` whose `main()` starts CloudKit operations
/// and waits for them through no-op block operations on its own queue.
final class PullChangesOperation: Operation, @unchecked Sendable {
    let container: Container
    let databases: [Database]
    let tokens: SyncTokens
    let zoneName: String
    private let queue = OperationQueue()
    private let lock = NSLock()
    private(set) var changed: [String: Record] = [:]
    private(set) var deleted: Set<String> = []
    private(set) var errors: [Error] = []
    private(set) var zoneFetchRuns = 0

    init(container: Container, databases: [Database], tokens: SyncTokens, zoneName: String) {
        self.container = container
        self.databases = databases
        self.tokens = tokens
        self.zoneName = zoneName
        super.init()
        name = "PullChangesOperation"
    }

    private func apply(_ body: () -> Void) {
        lock.lock(); defer { lock.unlock() }
        body()
    }

    override func main() {
        if isCancelled { return }
        for database in databases {
            let databaseChangeToken = tokens.token(for: database.databaseScope)
            if database.databaseScope == .public {
                // let fetchNotificationChanges = CKFetchNotificationChangesOperation(previousServerChangeToken: databaseChangeToken)
                // fetchNotificationChanges.notificationChangedBlock = { innerNotification in
                //     if let innerQueryNotification = innerNotification as? CKQueryNotification { … } }
                // CloudCore keeps these in NSMutableSets (`let changedRecordIDs: NSMutableSet = []`):
                // CloudKit's blocks are @Sendable, so a box that locks is what compiles without
                // warnings (NSMutableSet is neither Sendable nor, on Linux, an array literal).
                let changedRecordIDs = LockedIDs()
                let deletedRecordIDs = LockedIDs()
                let fetchNotificationChanges = FetchNotificationChangesOperation(previousServerChangeToken: databaseChangeToken)
                fetchNotificationChanges.qualityOfService = .userInteractive
                fetchNotificationChanges.notificationChangedBlock = { innerNotification in
                    if let innerQueryNotification = innerNotification as? QueryNotification {
                        if innerQueryNotification.queryNotificationReason == .recordDeleted {
                            deletedRecordIDs.add(innerQueryNotification.recordID!)
                            changedRecordIDs.remove(innerQueryNotification.recordID!)
                        } else {
                            changedRecordIDs.add(innerQueryNotification.recordID!)
                        }
                    }
                }
                fetchNotificationChanges.fetchNotificationChangesCompletionBlock = { changeToken, error in
                    if let error = error { self.apply { self.errors.append(error) } }
                    let allChangedRecordIDs = changedRecordIDs.allObjects
                    let fetchRecords = FetchRecordsOperation(recordIDs: allChangedRecordIDs)
                    fetchRecords.database = self.container.publicCloudDatabase
                    fetchRecords.qualityOfService = .userInteractive
                    fetchRecords.perRecordCompletionBlock = { record, _, error in
                        if error == nil { self.apply { self.changed[record!.recordID.recordName] = record! } }
                    }
                    let finished = BlockOperation {}
                    finished.addDependency(fetchRecords)
                    database.add(fetchRecords)
                    self.queue.addOperation(finished)
                    for recordID in deletedRecordIDs.allObjects {
                        self.apply { self.deleted.insert(recordID.recordName) }
                    }
                    self.tokens.setToken(changeToken, for: database.databaseScope)
                }
                let finished = BlockOperation {}
                finished.addDependency(fetchNotificationChanges)
                container.add(fetchNotificationChanges)
                queue.addOperation(finished)
            } else {
                let changedZoneIDs = LockedZoneIDs()
                let deletedZoneIDs = LockedZoneIDs()
                let fetchDatabaseChanges = FetchDatabaseChangesOperation(previousServerChangeToken: databaseChangeToken)
                fetchDatabaseChanges.database = database
                fetchDatabaseChanges.qualityOfService = .userInteractive
                fetchDatabaseChanges.recordZoneWithIDChangedBlock = { changedZoneIDs.append($0) }
                fetchDatabaseChanges.recordZoneWithIDWasDeletedBlock = { deletedZoneIDs.append($0) }
                fetchDatabaseChanges.fetchDatabaseChangesCompletionBlock = { changeToken, _, error in
                    if let error = error { self.apply { self.errors.append(error) } }
                    if !changedZoneIDs.all.isEmpty { self.addRecordZoneChangesOperation(recordZoneIDs: changedZoneIDs.all, database: database) }
                    self.tokens.setToken(changeToken, for: database.databaseScope)
                }
                let finished = BlockOperation {}
                finished.addDependency(fetchDatabaseChanges)
                database.add(fetchDatabaseChanges)
                queue.addOperation(finished)
            }
        }
        queue.waitUntilAllOperationsAreFinished()
    }

    // CKFetchRecordZoneChangesOperation(recordZoneIDs: recordZoneIDs, configurationsByRecordZoneID: optionsByRecordZoneID),
    // again while isMore.
    private func addRecordZoneChangesOperation(recordZoneIDs: [RecordZone.ID], database: Database) {
        var optionsByRecordZoneID = [RecordZone.ID: FetchRecordZoneChangesOperation.ZoneConfiguration]()
        for zoneID in recordZoneIDs {
            let options = FetchRecordZoneChangesOperation.ZoneConfiguration()
            options.previousServerChangeToken = tokens.tokensByRecordZoneID[zoneID]
            options.resultsLimit = 2
            optionsByRecordZoneID[zoneID] = options
        }
        let fetch = FetchRecordZoneChangesOperation(recordZoneIDs: recordZoneIDs, configurationsByRecordZoneID: optionsByRecordZoneID)
        fetch.fetchAllChanges = false
        fetch.recordChangedBlock = { record in self.apply { self.changed[record.recordID.recordName] = record } }
        fetch.recordWithIDWasDeletedBlock = { recordID, _ in self.apply { self.deleted.insert(recordID.recordName) } }
        fetch.recordZoneFetchCompletionBlock = { zoneId, serverChangeToken, _, isMore, error in
            self.apply { self.zoneFetchRuns += 1 }
            self.tokens.tokensByRecordZoneID[zoneId] = serverChangeToken
            if let error = error as? StratusError {
                switch error.code {
                case .changeTokenExpired:
                    self.tokens.tokensByRecordZoneID[zoneId] = nil
                    self.addRecordZoneChangesOperation(recordZoneIDs: [zoneId], database: database)
                default:
                    self.apply { self.errors.append(error) }
                }
                return
            }
            if isMore { self.addRecordZoneChangesOperation(recordZoneIDs: [zoneId], database: database) }
        }
        fetch.database = database
        fetch.qualityOfService = .userInteractive
        let finished = BlockOperation {}
        finished.addDependency(fetch)
        database.add(fetch)
        queue.addOperation(finished)
    }
}

/// A set of record IDs the blocks add to and remove from, in the order first added.
final class LockedIDs: @unchecked Sendable {
    private let lock = NSLock()
    private var ids: [Record.ID] = []
    func add(_ id: Record.ID) { lock.lock(); defer { lock.unlock() }; if !ids.contains(id) { ids.append(id) } }
    func remove(_ id: Record.ID) { lock.lock(); defer { lock.unlock() }; ids.removeAll { $0 == id } }
    var allObjects: [Record.ID] { lock.lock(); defer { lock.unlock() }; return ids }
}

/// Zone IDs a database change fetch reports.
final class LockedZoneIDs: @unchecked Sendable {
    private let lock = NSLock()
    private var ids: [RecordZone.ID] = []
    func append(_ id: RecordZone.ID) { lock.lock(); defer { lock.unlock() }; ids.append(id) }
    var all: [RecordZone.ID] { lock.lock(); defer { lock.unlock() }; return ids }
}

// MARK: - Tests

@Suite("A Core Data bridge (CloudCore), ported from CloudKit", .timeLimit(.minutes(30)))
struct CoreDataBridgeTests {
    @Test("system fields archived with NSKeyedArchiver(forWritingWith:) restore through CKRecord(archivedData:); references from them", arguments: TestEngine.all)
    func archivedSystemFields(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let zone = RecordZone(zoneName: "CloudCore")
            _ = try await container.privateCloudDatabase.save(zone)
            let company = ManagedObject(entityName: "Company")
            company.values = ["name": "Acme"]
            company.setRecordInformation(for: .private, zoneID: zone.zoneID)
            let employee = ManagedObject(entityName: "Employee")
            employee.values = ["name": "Wile", "badge": NSNull()]
            employee.relationships = ["company": company]
            employee.cascades = ["company"]
            employee.setRecordInformation(for: .private, zoneID: zone.zoneID)

            let restored = try #require(employee.restoreRecordWithSystemFields(for: .private))
            #expect(restored.recordID.recordName == employee.recordName)
            #expect(restored.recordID.zoneID.zoneName == "CloudCore")
            #expect(restored.recordType == "Employee")
            #expect(restored.recordChangeTag == nil)

            let queue = PushOperationQueue()
            queue.maxConcurrentOperationCount = 1
            let errors = FirstError()
            queue.errorBlock = { errors.record($0) }
            let database = container.privateCloudDatabase
            queue.addOperations(recordsToSave: [(try #require(try recordToPush(company, scope: .private, bigDataLimit: 1024)), database),
                                                (try #require(try recordToPush(employee, scope: .private, bigDataLimit: 1024)), database)],
                                recordIDsToDelete: [])
            await withCheckedContinuation { continuation in
                queue.addBarrierBlock { continuation.resume() }
            }
            #expect(errors.error == nil)
            let saved = try await database.record(for: restored.recordID)
            let reference = try #require(saved["company"] as? Record.Reference)
            #expect(reference.action == .deleteSelf)
            #expect(reference.recordID.recordName == company.recordName)
            #expect(saved["badge"] == nil)

            // Deleting the company deletes the employee (.deleteSelf), as Core Data's cascade would.
            try await database.deleteRecord(withID: try #require(company.restoreRecordWithSystemFields(for: .private)).recordID)
            await #expect(throws: StratusError.self) { try await database.record(for: restored.recordID) }
        }
    }

    @Test("pushes grouped by database with ==; big data as an asset of a file named relative to the temporary directory", arguments: TestEngine.all)
    func pushByDatabase(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            #expect(container.privateCloudDatabase == container.privateCloudDatabase)
            #expect(container.privateCloudDatabase != container.publicCloudDatabase)
            #expect(Set([container.publicCloudDatabase, container.privateCloudDatabase, container.publicCloudDatabase]).count == 2)
            let group = OperationGroup()
            group.name = "push"
            #expect(container.privateCloudDatabase.configuredWith(group: group) { $0 == container.privateCloudDatabase })

            let photo = ManagedObject(entityName: "Photo")
            let bytes = Data((0..<4096).map { UInt8($0 % 251) })
            photo.values = ["title": "Dunes", "image": bytes, "views": NSNumber(value: 3)]
            photo.setRecordInformation(for: .public, zoneID: .default)
            let note = ManagedObject(entityName: "Note")
            note.values = ["text": "private"]
            let zone = RecordZone(zoneName: "CloudCore")
            _ = try await container.privateCloudDatabase.save(zone)
            note.setRecordInformation(for: .private, zoneID: zone.zoneID)

            let photoRecord = try #require(try recordToPush(photo, scope: .public, bigDataLimit: 1024))
            let asset = try #require(photoRecord["image"] as? Asset)
            let assetFile = try #require(asset.fileURL)
            #expect(FileManager.default.fileExists(atPath: assetFile.path))

            let queue = PushOperationQueue()
            queue.maxConcurrentOperationCount = 2
            let errors = FirstError()
            queue.errorBlock = { errors.record($0) }
            queue.addOperations(recordsToSave: [(photoRecord, container.publicCloudDatabase),
                                                (try #require(try recordToPush(note, scope: .private, bigDataLimit: 1024)), container.privateCloudDatabase)],
                                recordIDsToDelete: [(Record.ID(recordName: "gone"), container.publicCloudDatabase)])
            #expect(queue.operationCount <= 2)
            await withCheckedContinuation { continuation in
                queue.addBarrierBlock { continuation.resume() }
            }
            #expect(errors.error == nil)
            // CloudCore removes `asset.fileURL` of the record its per-record block gets, meaning
            // the upload file. Stratus hands a saved record's asset out as a copy of the stored
            // content (see Asset.fileURL), so that copy is what goes, and the upload file stays
            // for the app to remove: the store never depends on it.
            #expect(queue.removedAssetFiles.count == 1)
            #expect(queue.removedAssetFiles.map(\.path) != [assetFile.path])
            try FileManager.default.removeItem(at: assetFile)

            let fetched = try await container.publicCloudDatabase.record(for: photoRecord.recordID)
            let fetchedFile = try #require((fetched["image"] as? Asset)?.fileURL)
            #expect(try Data(contentsOf: fetchedFile) == bytes)
            #expect(fetched["views"] as? Int == 3)
            #expect(try await container.privateCloudDatabase.record(for: Record.ID(recordName: note.recordName!, zoneID: zone.zoneID))["text"] as? String == "private")
        }
    }

    @Test("public changes through query subscriptions and the notification feed; private changes through zone fetches re-run while isMore", arguments: TestEngine.all)
    func pullInsideAnOperation(engine: TestEngine) async throws {
        try await withStore(on: engine) { location, store in
            let phone = try Container(identifier: "iCloud.com.example.cloudcore", store: location, userName: "alice")
            let mac = try Container(identifier: "iCloud.com.example.cloudcore", store: location, userName: "alice")
            let zone = RecordZone(zoneName: "CloudCore")
            _ = try await phone.privateCloudDatabase.save(zone)

            // PublicDatabaseSubscriptions.subscribe(recordType:predicate:completion:)
            let predicate = QueryPredicate(value: true)
            let id = "CloudCore-" + "Announcement" + "-" + predicate.predicateFormat
            let options: QuerySubscription.Options = [.firesOnRecordCreation, .firesOnRecordUpdate, .firesOnRecordDeletion]
            let subscription = QuerySubscription(recordType: "Announcement", predicate: predicate, subscriptionID: id, options: options)
            let notificationInfo = Subscription.NotificationInfo()
            notificationInfo.shouldSendContentAvailable = true
            subscription.notificationInfo = notificationInfo
            let subscribed: Error? = await awaitCallback { done in
                let operation = ModifySubscriptionsOperation(subscriptionsToSave: [subscription], subscriptionIDsToDelete: [])
                operation.modifySubscriptionsCompletionBlock = { _, _, error in done(error) }
                let config = DatabaseOperation.Configuration()
                config.timeoutIntervalForResource = 20
                operation.configuration = config
                mac.publicCloudDatabase.add(operation)
            }
            #expect(subscribed == nil)

            // The phone writes: announcements in public, notes in the private zone.
            var announcements: [Record] = []
            for index in 0..<3 {
                let record = Record(recordType: "Announcement", recordID: Record.ID(recordName: "a\(index)"))
                record["text"] = "Announcement \(index)"
                announcements.append(try await phone.publicCloudDatabase.save(record))
            }
            try await phone.publicCloudDatabase.deleteRecord(withID: announcements[2].recordID)
            for index in 0..<5 {
                let record = Record(recordType: "Note", recordID: Record.ID(recordName: "n\(index)", zoneID: zone.zoneID))
                record["text"] = "Note \(index)"
                _ = try await phone.privateCloudDatabase.save(record)
            }

            let tokens = SyncTokens()
            let pull = PullChangesOperation(container: mac, databases: [mac.publicCloudDatabase, mac.privateCloudDatabase], tokens: tokens, zoneName: "CloudCore")
            let outer = OperationQueue()
            outer.addOperation(pull)
            await withCheckedContinuation { continuation in outer.addBarrierBlock { continuation.resume() } }

            #expect(pull.errors.isEmpty)
            #expect(Set(pull.changed.keys) == ["a0", "a1", "n0", "n1", "n2", "n3", "n4"])
            #expect(pull.deleted == ["a2"])
            #expect(pull.zoneFetchRuns == 3)     // 2 + 2 + 1 changes, resultsLimit 2
            #expect(tokens.token(for: .public) != nil)
            #expect(tokens.token(for: .private) != nil)

            // Tokens saved and loaded as CloudCore keeps them; a second pull sees only what is new.
            let restored = try #require(try SyncTokens.unarchived(try tokens.archived()))
            #expect(restored.tokensByRecordZoneID.keys.map(\.zoneName) == ["CloudCore"])
            let renamed = try await phone.publicCloudDatabase.record(for: announcements[0].recordID)
            renamed["text"] = "Renamed"
            _ = try await phone.publicCloudDatabase.save(renamed)
            try await phone.privateCloudDatabase.deleteRecord(withID: Record.ID(recordName: "n0", zoneID: zone.zoneID))

            let again = PullChangesOperation(container: mac, databases: [mac.publicCloudDatabase, mac.privateCloudDatabase], tokens: restored, zoneName: "CloudCore")
            outer.addOperation(again)
            await withCheckedContinuation { continuation in outer.addBarrierBlock { continuation.resume() } }
            #expect(again.errors.isEmpty)
            #expect(Set(again.changed.keys) == ["a0"])
            #expect(again.changed["a0"]?["text"] as? String == "Renamed")
            #expect(again.deleted == ["n0"])
        }
    }
}
