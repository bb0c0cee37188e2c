import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// Greasy Trail (github.com/pillboxer/Greasy-Trail), a Bob Dylan catalogue whose songs, albums and
// performances live in CloudKit's public database, ported mechanically. The pieces:
// Dylan/CloudKit/CKPagingQueryOperation.swift (a query that follows its cursors by starting a
// new pager per page, through a `CKQueryOperation(cursor:query:)` convenience init the app adds in
// Dylan/Extensions/CKQueryOperation+Extensions.swift, with `queryResultBlock` assigned from a
// typed local closure), Dylan/CloudKit/CKBisectingModifyRecordsOperation.swift (a save split in
// halves above 400 items or on `limitExceeded`, through the older `modifyRecordsCompletionBlock`,
// `perRecordProgressBlock` handed on, `error.code == CKError.limitExceeded`),
// Dylan/CloudKit/CloudKitManager+Subscriptions.swift (three query subscriptions sharing one
// `CKSubscription.NotificationInfo`, IDs from `NSLocalizedString`) and
// Dylan/Protocols/DatabaseType.swift with Dylan/Extensions/CKDatabase+Extensions.swift (the app's
// seam over `CKDatabase`, whose results are re-typed with `$0 as RecordType`).
// Changes a Linux port must make: `import CloudKit` → `import Stratus`, the `CK` prefix dropped,
// `NSPredicate(value:)` → `QueryPredicate(value:)`, and OSLog's `os_log` (not on Linux) a stand-in.
// `DatabaseType` (nested in `GreasyTrail` below) gains `add(_:)`, which the app's later revisions call through it.
// `RecordType` keeps two of its members; its reference helpers read the app's own enums.

// MARK: - Linux stand-ins for the app's logging (GTLogging)

let Log_CloudKit = OSLog(subsystem: "com.pillboxer.GreasyTrail", category: "CloudKit")

/// `os_log("…", log: Log_CloudKit, type: .info, …)`, as Greasy Trail writes it.
func os_log(_ message: StaticString, log: OSLog? = nil, type: OSLogType = .default, _ arguments: Any...) {}

// MARK: - Dylan/Protocols (RecordType, DatabaseType)

enum DylanRecordType: String {
    case song = "Song"
    case album = "Album"
    case performance = "Performance"
}

enum DylanRecordField: String {
    case title
    case author
}

protocol RecordType {
    var recordID: Record.ID { get }
    func string(for field: DylanRecordField) -> String?
}

extension Record: RecordType {
    func string(for field: DylanRecordField) -> String? {
        self[field.rawValue] as? String
    }
}

/// Canopy's port (CanopyTests.swift) has a `DatabaseType` of its own in this test module, so
/// Greasy Trail's is nested in a namespace; the app's code names it as before.
enum GreasyTrail {
protocol DatabaseType {
    func recordTypes(matching query: Query,
                     inZoneWith zoneID: RecordZone.ID?,
                     desiredKeys: [Record.FieldKey]?,
                     resultsLimit: Int) async throws -> (matchResults: [(Record.ID, Result<RecordType, Error>)], queryCursor: QueryOperation.Cursor?)
    func recordTypes(for ids: [Record.ID], desiredKeys: [Record.FieldKey]?) async throws -> [Record.ID: Result<RecordType, Error>]
    func add(_ operation: DatabaseOperation)
}
}

// MARK: - Dylan/Extensions

extension Database: GreasyTrail.DatabaseType {

    func recordTypes(for ids: [Record.ID], desiredKeys: [Record.FieldKey]?) async throws -> [Record.ID: Result<RecordType, Error>] {
        let fetched = try await records(for: ids, desiredKeys: desiredKeys)
        var typed: [Record.ID: Result<RecordType, Error>] = [:]
        for pair in fetched {
            typed[pair.key] = pair.value.map { $0 as RecordType }
        }
        return typed
    }

    func recordTypes(matching query: Query, inZoneWith zoneID: RecordZone.ID? = nil, desiredKeys: [Record.FieldKey]? = nil,
                     resultsLimit: Int = QueryOperation.maximumResults) async throws -> (matchResults: [(Record.ID, Result<RecordType, Error>)], queryCursor: QueryOperation.Cursor?) {
        let page = try await self.records(matching: query, inZoneWith: zoneID, desiredKeys: desiredKeys, resultsLimit: resultsLimit)
        var typed: [(Record.ID, Result<RecordType, Error>)] = []
        for result in page.matchResults {
            typed.append((result.0, result.1.map { $0 as RecordType }))
        }
        return (typed, page.queryCursor)
    }
}

extension QueryOperation {
    convenience init(cursor: QueryOperation.Cursor?, query: Query) {
        if let cursor = cursor {
            self.init(cursor: cursor)
        } else {
            self.init(query: query)
        }
    }
}

// MARK: - Dylan/CloudKit/CKPagingQueryOperation.swift

class PagingQueryOperation {

    var pagingCompletionBlock: (([(Record.ID, Result<RecordType, Error>)]) -> Void)?
    var errorBlock: ((Error) -> Void)?

    var cursor: QueryOperation.Cursor?
    var query: Query

    let database: GreasyTrail.DatabaseType
    var records: [(Record.ID, Result<RecordType, Error>)]

    init(query: Query, cursor: QueryOperation.Cursor? = nil, database: GreasyTrail.DatabaseType,
         records: [(Record.ID, Result<RecordType, Error>)] = []) {
        self.cursor = cursor
        self.database = database
        self.query = query
        self.records = records
    }

    func start() {
        let operation = QueryOperation(cursor: cursor, query: query)
        operation.qualityOfService = .userInitiated
        let completionBlock: ((Result<QueryOperation.Cursor?, Error>) -> Void)? = { [self] result in
            switch result {
            case .success(let cursor):
                if let cursor = cursor {
                    os_log("Cursor received in CKPagingQueryOperation, attempting query with cursor", log: Log_CloudKit, type: .debug)
                    let next = PagingQueryOperation(query: query, cursor: cursor, database: database, records: records)
                    next.pagingCompletionBlock = pagingCompletionBlock
                    next.errorBlock = errorBlock
                    next.start()
                } else {
                    os_log("CKPagingQueryOperation complete, %{public}@ record(s) obtained", log: Log_CloudKit, String(describing: records.count))
                    pagingCompletionBlock?(records)
                }
            case .failure(let error):
                os_log("Error received in CKPagingQueryOperation: %{public}@", log: Log_CloudKit, type: .error, String(describing: error))
                errorBlock?(error)
            }
        }
        operation.recordMatchedBlock = { (id, record) in
            let mapped = record.map { $0 as RecordType }
            self.records.append((id, mapped))
        }
        operation.queryResultBlock = completionBlock
        database.add(operation)
    }
}

// MARK: - Dylan/CloudKit/CKBisectingModifyRecordsOperation.swift

class BisectingOperationManager {

    private(set) var runningOperationCount = 0
    private(set) var recordsSaved: [Record] = []
    private(set) var recordIDsDeleted: [Record.ID] = []

    func addOperation() {
        runningOperationCount += 1
        os_log("Adding Bisecting Operation: %@ operations in progress", log: Log_CloudKit, type: .info, String(describing: runningOperationCount))
    }

    func finishOperation(_ savedRecords: [Record]?, _ deletedRecordIDs: [Record.ID]?) {
        if let savedRecords = savedRecords {
            recordsSaved.append(contentsOf: savedRecords)
        }
        if let deletedRecordIDs = deletedRecordIDs {
            recordIDsDeleted.append(contentsOf: deletedRecordIDs)
        }
        runningOperationCount -= 1
        os_log("Finished Bisecting Operation: %@ operations remaining", log: Log_CloudKit, type: .info, String(describing: runningOperationCount))
    }
}

/// The test's database for the app's operations: holds those added until
/// ``releaseOneAfterAnother()``, then adds them to `database`, each depending on the one before.
final class HeldDatabase: GreasyTrail.DatabaseType, @unchecked Sendable {
    let database: Database
    private var held: [DatabaseOperation] = []
    private(set) var released = 0

    init(_ database: Database) { self.database = database }

    func recordTypes(matching query: Query, inZoneWith zoneID: RecordZone.ID?, desiredKeys: [Record.FieldKey]?,
                     resultsLimit: Int) async throws -> (matchResults: [(Record.ID, Result<RecordType, Error>)], queryCursor: QueryOperation.Cursor?) {
        try await database.recordTypes(matching: query, inZoneWith: zoneID, desiredKeys: desiredKeys, resultsLimit: resultsLimit)
    }

    func recordTypes(for ids: [Record.ID], desiredKeys: [Record.FieldKey]?) async throws -> [Record.ID: Result<RecordType, Error>] {
        try await database.recordTypes(for: ids, desiredKeys: desiredKeys)
    }

    func add(_ operation: DatabaseOperation) { held.append(operation) }

    /// Called on the thread that added the operations, after the app's `start()` returned.
    func releaseOneAfterAnother() {
        for (index, operation) in held.enumerated() where index > 0 { operation.addDependency(held[index - 1]) }
        released = held.count
        for operation in held { database.add(operation) }
        held = []
    }
}

/// Halves its batch until CloudKit takes it.
class BisectingModifyRecordsOperation {

    var errorBlock: ((Error) -> Void)?

    let recordsToSave: [Record]?
    let recordIDsToDelete: [Record.ID]?
    let database: GreasyTrail.DatabaseType
    let manager: BisectingOperationManager

    var perRecordProgressBlock: ((Record, Double) -> Void)?

    var recordBatchCount: Int {
        (recordsToSave ?? []).count + (recordIDsToDelete ?? []).count
    }

    init(recordsToSave: [Record]?, recordIDsToDelete: [Record.ID]?,
         manager: BisectingOperationManager = BisectingOperationManager(), database: GreasyTrail.DatabaseType) {
        self.manager = manager
        self.recordsToSave = recordsToSave
        self.recordIDsToDelete = recordIDsToDelete
        self.database = database
    }

    var bisectingModifyRecordsCompletionBlock: ((_ totalRecordsSaved: [Record]?, _ totalRecordsDeleted: [Record.ID]?, _ error: Error?) -> Void)?

    func start(bisecting: Bool = false) {
        manager.addOperation()
        if bisecting {
            os_log("Beginning Bisecting Operation with %@ records", log: Log_CloudKit, type: .info, String(describing: recordBatchCount))
        } else {
            os_log("Beginning Modification Operation with %@ records", log: Log_CloudKit, type: .info, String(describing: recordBatchCount))
        }

        if recordBatchCount > 400 {
            manager.finishOperation(nil, nil)
            bisect(records: recordsToSave, recordIDs: recordIDsToDelete)
            return
        }

        let operation = ModifyRecordsOperation(recordsToSave: recordsToSave, recordIDsToDelete: recordIDsToDelete)
        operation.savePolicy = .changedKeys
        operation.perRecordProgressBlock = perRecordProgressBlock
        operation.qualityOfService = .userInitiated

        operation.modifyRecordsCompletionBlock = { [self] saved, deleted, error in
            manager.finishOperation(saved, deleted)
            if let error = error as? StratusError, error.code == StratusError.limitExceeded {
                bisect(records: recordsToSave, recordIDs: recordIDsToDelete)
            } else if let error = error {
                bisectingModifyRecordsCompletionBlock?(nil, nil, error)
            } else if manager.runningOperationCount == 0 {
                bisectingModifyRecordsCompletionBlock?(manager.recordsSaved, manager.recordIDsDeleted, nil)
            }
        }
        database.add(operation)
    }

    private func bisect(records: [Record]?, recordIDs: [Record.ID]?) {
        let saving = self.recordsToSave ?? []
        let deleting = self.recordIDsToDelete ?? []
        let saveHalf = saving.count / 2
        let deleteHalf = deleting.count / 2
        let firstSaves = Array(saving[0..<saveHalf]), secondSaves = Array(saving[saveHalf..<saving.count])
        let firstDeletes = Array(deleting[0..<deleteHalf]), secondDeletes = Array(deleting[deleteHalf..<deleting.count])

        os_log("Batch too large. Bisecting %d records into two batches of %d and %d", log: Log_CloudKit, type: .info,
               saving.count + deleting.count, firstSaves.count + firstDeletes.count, secondSaves.count + secondDeletes.count)

        let first = BisectingModifyRecordsOperation(recordsToSave: firstSaves, recordIDsToDelete: firstDeletes, manager: manager, database: database)
        let second = BisectingModifyRecordsOperation(recordsToSave: secondSaves, recordIDsToDelete: secondDeletes, manager: manager, database: database)
        for half in [first, second] {
            half.perRecordProgressBlock = perRecordProgressBlock
            half.bisectingModifyRecordsCompletionBlock = bisectingModifyRecordsCompletionBlock
        }
        first.start(bisecting: true)
        second.start(bisecting: true)
    }
}

// MARK: - Dylan/CloudKit/CloudKitManager+Subscriptions.swift

final class GreasyTrailCloudKitManager {
    let database: Database

    init(database: Database) {
        self.database = database
    }

    func subscribeToDatabase() {
        let notification = Subscription.NotificationInfo()
        notification.shouldSendContentAvailable = true

        let songSubscriptionID = NSLocalizedString("cloud_kit_subscription_songs", comment: "")
        let songSubscription = QuerySubscription(recordType: DylanRecordType.song.rawValue, predicate: QueryPredicate(value: true),
                                                 subscriptionID: songSubscriptionID, options: [.firesOnRecordDeletion])
        songSubscription.notificationInfo = notification

        let albumSubscriptionID = NSLocalizedString("cloud_kit_subscription_albums", comment: "")
        let albumSubscription = QuerySubscription(recordType: DylanRecordType.album.rawValue, predicate: QueryPredicate(value: true),
                                                  subscriptionID: albumSubscriptionID, options: [.firesOnRecordDeletion])
        albumSubscription.notificationInfo = notification

        let performanceSubscriptionID = NSLocalizedString("cloud_kit_subscription_performances", comment: "")
        let performanceSubscription = QuerySubscription(recordType: DylanRecordType.performance.rawValue, predicate: QueryPredicate(value: true),
                                                        subscriptionID: performanceSubscriptionID, options: [.firesOnRecordDeletion])
        performanceSubscription.notificationInfo = notification
        let operation = ModifySubscriptionsOperation(subscriptionsToSave: [songSubscription, albumSubscription, performanceSubscription])

        operation.modifySubscriptionsResultBlock = { result in
            switch result {
            case .failure(let error):
                os_log("Failed to add subscriptions: %@", log: Log_CloudKit, String(describing: error))
            case .success():
                os_log("Added subscriptions successfully")
            }
        }
        database.add(operation)
    }
}

// MARK: - Tests

@Suite struct GreasyTrailCloudKitTests {

    private func songs(_ count: Int) -> [Record] {
        (0..<count).map { index in
            let song = Record(recordType: DylanRecordType.song.rawValue, recordID: Record.ID(recordName: String(format: "song-%04d", index)))
            song["title"] = "Song \(index)"
            song["author"] = "Bob Dylan"
            return song
        }
    }

    @Test(arguments: TestEngine.all) func pagingQueryFollowsEveryCursorAndKeepsTheResultsAsRecordTypes(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.publicCloudDatabase
            // More than a page of 100 (QueryOperation.defaultResultsLimit), so the pager starts three more.
            _ = try await database.modifyRecords(saving: songs(345), deleting: [], savePolicy: .allKeys, atomically: false)

            let records: [(Record.ID, Result<RecordType, Error>)] = await awaitCallback { done in
                let pager = PagingQueryOperation(query: Query(recordType: DylanRecordType.song.rawValue, predicate: QueryPredicate(value: true)),
                                                 database: database)
                pager.pagingCompletionBlock = { done($0) }
                pager.errorBlock = { error in Issue.record("paging failed: \(error)"); done([]) }
                pager.start()
            }
            #expect(records.count == 345)
            #expect(Set(records.map { $0.0.recordName }).count == 345)
            let typed = try records.map { try $0.1.get() }
            #expect(typed.allSatisfy { $0.string(for: .author) == "Bob Dylan" })
            #expect(typed.contains { $0.recordID.recordName == "song-0344" && $0.string(for: .title) == "Song 344" })
        }
    }

    @Test(arguments: TestEngine.all) func pagingQueryReportsAnUnknownRecordTypeThroughItsErrorBlock(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let outcome: String = await awaitCallback { done in
                let pager = PagingQueryOperation(query: Query(recordType: "Bootleg", predicate: QueryPredicate(value: true)),
                                                 database: container.publicCloudDatabase)
                pager.pagingCompletionBlock = { done("finished with \($0.count)") }
                pager.errorBlock = { error in done("failed: \((error as? StratusError)?.code == .unknownItem)") }
                pager.start()
            }
            // CloudKit answers a query on a record type it has never seen with unknownItem; Stratus
            // may answer the empty list instead (types come into being with their first record).
            #expect(outcome == "failed: true" || outcome == "finished with 0")
        }
    }

    @Test(arguments: TestEngine.all) func bisectingSaveSplitsAboveFourHundredAndReportsOnceWithEverything(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.publicCloudDatabase
            // 600 items: one split, two halves of 300. The halves' completion blocks may run at
            // once (Stratus runs up to 4 operations a database; CloudKit calls each operation's
            // blocks on its own queue), and the app's manager counts them without a lock; that
            // race is the app's, kept as written. Stratus takes more than 400 items in one
            // request (see `ModifyRecordsOperation.maximumItemsPerBatch`), so the app's
            // `limitExceeded` retry is not reached here; its split above 400 is.
            let batch = songs(600)
            // The app starts the second half after the first is added, and counts halves without a
            // lock: on a busy machine the first half could finish before the second is counted
            // (the app then reports 300 records, and again 600). The test holds the halves until
            // both are started, then runs them one after the other, as an idle machine would.
            let held = HeldDatabase(database)
            let (saved, deleted, error): ([Record]?, [Record.ID]?, Error?) = await awaitCallback { done in
                let operation = BisectingModifyRecordsOperation(recordsToSave: batch, recordIDsToDelete: nil, database: held)
                operation.bisectingModifyRecordsCompletionBlock = { saved, deleted, error in done((saved, deleted, error)) }
                operation.start()
                held.releaseOneAfterAnother()
            }
            #expect(held.released == 2)
            #expect(error == nil)
            #expect(saved?.count == 600)
            #expect(deleted?.isEmpty == true)
            #expect(Set((saved ?? []).map(\.recordID)) == Set(batch.map(\.recordID)))
            #expect(saved?.allSatisfy { $0.recordChangeTag != nil } == true)

            let (matches, _) = try await database.records(matching: Query(recordType: "Song", predicate: QueryPredicate(value: true)), resultsLimit: 1)
            #expect(matches.count == 1)
        }
    }

    @Test(arguments: TestEngine.all) func bisectingSaveDeletesAndSavesInOneSmallBatch(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.publicCloudDatabase
            let old = songs(3)
            _ = try await database.modifyRecords(saving: old, deleting: [], savePolicy: .allKeys, atomically: false)
            let album = Record(recordType: DylanRecordType.album.rawValue, recordID: Record.ID(recordName: "blonde-on-blonde"))
            album["title"] = "Blonde on Blonde"

            let (saved, deleted, error): ([Record]?, [Record.ID]?, Error?) = await awaitCallback { done in
                let operation = BisectingModifyRecordsOperation(recordsToSave: [album], recordIDsToDelete: old.map(\.recordID), database: database)
                operation.bisectingModifyRecordsCompletionBlock = { saved, deleted, error in done((saved, deleted, error)) }
                operation.start()
            }
            #expect(error == nil)
            #expect(saved?.map(\.recordID.recordName) == ["blonde-on-blonde"])
            #expect(Set(deleted ?? []) == Set(old.map(\.recordID)))
            let fetched = try await database.recordTypes(for: [album.recordID], desiredKeys: nil)
            #expect(try fetched[album.recordID]?.get().string(for: .title) == "Blonde on Blonde")
        }
    }

    @Test(arguments: TestEngine.all) func subscribeToDatabaseSavesThreeDeletionSubscriptions(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.publicCloudDatabase
            GreasyTrailCloudKitManager(database: database).subscribeToDatabase()

            var subscriptions: [Subscription] = []
            for _ in 0..<100 where subscriptions.count < 3 {
                subscriptions = try await database.allSubscriptions()
                if subscriptions.count < 3 { try await Task.sleep(nanoseconds: 20_000_000) }
            }
            #expect(Set(subscriptions.map(\.subscriptionID))
                    == ["cloud_kit_subscription_songs", "cloud_kit_subscription_albums", "cloud_kit_subscription_performances"])
            for subscription in subscriptions {
                let query = try #require(subscription as? QuerySubscription)
                #expect(query.querySubscriptionOptions == [.firesOnRecordDeletion])
                #expect(query.notificationInfo?.shouldSendContentAvailable == true)
            }
            let types = Set(subscriptions.compactMap { ($0 as? QuerySubscription)?.recordType })
            #expect(types == ["Song", "Album", "Performance"])
        }
    }

    @Test(arguments: TestEngine.all) func databaseTypeSeamRetypesQueryResults(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database: GreasyTrail.DatabaseType = container.publicCloudDatabase
            _ = try await container.publicCloudDatabase.modifyRecords(saving: songs(5), deleting: [], savePolicy: .allKeys, atomically: false)
            let query = Query(recordType: "Song", predicate: try QueryPredicate(format: "title == %@", "Song 3"))
            let (results, cursor) = try await database.recordTypes(matching: query, inZoneWith: nil, desiredKeys: ["title"], resultsLimit: 10)
            #expect(cursor == nil)
            #expect(results.count == 1)
            let song = try #require(try results.first?.1.get())
            #expect(song.string(for: .title) == "Song 3")
            #expect(song.string(for: .author) == nil)   // not among the desired keys
        }
    }
}
