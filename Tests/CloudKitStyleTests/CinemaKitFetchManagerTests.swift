import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// CinemaKit's fetch manager (the framework of a movie-library app; the search index did not name
// its repository): `DefaultFetchManager.swift` with the CloudKit helpers of its `CloudKit.swift`
// (`DatabaseOperationQueue`, `GeneralOperationQueue`, `DatabaseOperationQueueFactory`,
// `Error.singlePartialError(forKey:)`, `CloudKitError`), ported mechanically. Its CloudKit habits:
// the pre-Swift 4.2 names (`CKRecordZoneID`, `CKRecordID`, `CKDatabaseScope`); `CKDatabase`
// and `CKContainer` made to conform to the app's own protocols by empty extensions, so their
// `add(_:)` and `database(with:)` must have exactly CloudKit's shapes; the older blocks
// (`fetchRecordZonesCompletionBlock`, `recordFetchedBlock`, `queryCompletionBlock`,
// `fetchRecordsCompletionBlock`); every page of a zone query read by `CKQueryOperation(cursor:)`
// with the zone set again on it; `retryAfterSeconds?.rounded(.up)`; and a one-record fetch
// whose error is read from the partial failure's `userInfo[CKPartialErrorsByItemIDKey] as?
// NSDictionary`, subscripted with the `CKRecordID` as `Any` and force-cast to `NSError`.
// Substitutions besides the README's: `os_log` and `Logging` are stand-ins (os.log is not on
// Linux), `RecordType`, `CloudKitError` and the flag are nested in `CinemaKit` (other ports
// declare types of those names), and `MovieRecord` stands in for the app's record types.

enum CinemaKit {
    static let defaultRetryCount = 3

    enum Logging {
        static func createLogger(category: String) -> OSLog {
            OSLog(subsystem: "de.martinbauer.CinemaKit", category: category)
        }
    }

    // MARK: - CloudKit.swift

    protocol RecordType {
        static var recordType: String { get }
        var rawRecord: Record { get set }
        init(_ rawRecord: Record)
    }

    protocol GeneralOperationQueue {
        func add(_ operation: DatabaseOperation)
    }

    protocol DatabaseOperationQueue {
        func add(_ operation: DatabaseOperation)
    }

    protocol DatabaseOperationQueueFactory {
        func queue(withScope scope: DatabaseScope) -> DatabaseOperationQueue
    }

    public enum CloudKitError: Error {
        case conflict(serverRecord: Record)
        case itemNoLongerExists
        case notAuthenticated
        case zoneNotFound
        case userDeletedZone
        case nonRecoverableError
    }

    final class LocalDataInvalidationFlag: @unchecked Sendable {
        private let lock = NSLock()
        private var isSet = false
        func set() { lock.withLock { isSet = true } }
        var isRaised: Bool { lock.withLock { isSet } }
    }

    // MARK: - FetchManager.swift

    protocol FetchManager {
        func fetchZones(in scope: DatabaseScope,
                        then completion: @escaping ([RecordZoneID: RecordZone]?, CloudKitError?) -> Void)
        func fetch<CustomRecordType>(_ type: CustomRecordType.Type,
                                     matching predicate: QueryPredicate,
                                     inZoneWithID zoneID: RecordZoneID,
                                     in scope: DatabaseScope,
                                     then completion: @escaping ([CustomRecordType]?, CloudKitError?) -> Void)
            where CustomRecordType: RecordType
        func fetchRecord(with recordID: RecordID,
                         in scope: DatabaseScope,
                         then completion: @escaping (Record?, CloudKitError?) -> Void)
    }

    class DefaultFetchManager: FetchManager {
        private static let logger = Logging.createLogger(category: "FetchManager")

        private let privateDatabaseOperationQueue: DatabaseOperationQueue
        private let sharedDatabaseOperationQueue: DatabaseOperationQueue
        private let dataInvalidationFlag: LocalDataInvalidationFlag

        init(privateDatabaseOperationQueue: DatabaseOperationQueue,
             sharedDatabaseOperationQueue: DatabaseOperationQueue,
             dataInvalidationFlag: LocalDataInvalidationFlag = LocalDataInvalidationFlag()) {
            self.privateDatabaseOperationQueue = privateDatabaseOperationQueue
            self.sharedDatabaseOperationQueue = sharedDatabaseOperationQueue
            self.dataInvalidationFlag = dataInvalidationFlag
        }

        private func databaseOperationQueue(for scope: DatabaseScope) -> DatabaseOperationQueue {
            switch scope {
            case .private:
                return privateDatabaseOperationQueue
            case .shared:
                return sharedDatabaseOperationQueue
            case .public:
                fatalError("can not fetch from public database")
            }
        }

        func fetchZones(in scope: DatabaseScope,
                        then completion: @escaping ([RecordZoneID: RecordZone]?, CloudKitError?) -> Void) {
            self.fetchZones(in: scope, retryCount: defaultRetryCount, then: completion)
        }

        private func fetchZones(in scope: DatabaseScope,
                                retryCount: Int,
                                then completion: @escaping ([RecordZoneID: RecordZone]?, CloudKitError?) -> Void) {
            let operation = FetchRecordZonesOperation.fetchAllRecordZonesOperation()
            operation.fetchRecordZonesCompletionBlock = { zones, error in
                if let error = error {
                    guard let ckerror = error as? StratusError else {
                        os_log("<fetchZones> unhandled error: %{public}@",
                               log: DefaultFetchManager.logger,
                               type: .error,
                               String(describing: error))
                        completion(nil, .nonRecoverableError)
                        return
                    }
                    if retryCount > 1, let retryAfter = ckerror.retryAfterSeconds?.rounded(.up) {
                        os_log("retry fetchZones after %.1f seconds", log: DefaultFetchManager.logger, type: .default, retryAfter)
                        DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(Int(retryAfter))) {
                            self.fetchZones(in: scope, retryCount: retryCount - 1, then: completion)
                        }
                    } else if ckerror.code == StratusError.Code.notAuthenticated {
                        completion(nil, .notAuthenticated)
                    } else if ckerror.code == StratusError.Code.networkFailure
                                || ckerror.code == StratusError.Code.networkUnavailable
                                || ckerror.code == StratusError.Code.requestRateLimited
                                || ckerror.code == StratusError.Code.serviceUnavailable
                                || ckerror.code == StratusError.Code.zoneBusy {
                        completion(nil, .nonRecoverableError)
                    } else {
                        os_log("<fetchZones> unhandled CKError: %{public}@",
                               log: DefaultFetchManager.logger,
                               type: .error,
                               String(describing: ckerror))
                        completion(nil, .nonRecoverableError)
                    }
                } else if let zones = zones {
                    os_log("fetched %d zones",
                           log: DefaultFetchManager.logger,
                           type: .debug,
                           zones.count)
                    completion(zones, nil)
                }
            }
            databaseOperationQueue(for: scope).add(operation)
        }

        func fetch<CustomRecordType>(_ type: CustomRecordType.Type,
                                     matching predicate: QueryPredicate = QueryPredicate(value: true),
                                     inZoneWithID zoneID: RecordZoneID,
                                     in scope: DatabaseScope,
                                     then completion: @escaping ([CustomRecordType]?, CloudKitError?) -> Void)
            where CustomRecordType: RecordType {
            os_log("creating query operation for %{public}@",
                   log: DefaultFetchManager.logger,
                   type: .default,
                   String(describing: type))
            let query = Query(recordType: type.recordType, predicate: predicate)
            fetch(with: QueryOperation(query: query),
                  inZoneWithID: zoneID,
                  into: [],
                  in: scope,
                  retryCount: defaultRetryCount) { records, error in
                if let error = error {
                    completion(nil, error)
                } else if let records = records {
                    completion(records.map(CustomRecordType.init), nil)
                }
            }
        }

        private func fetch(with operation: QueryOperation,
                           inZoneWithID zoneID: RecordZoneID,
                           into accumulator: [Record],
                           in scope: DatabaseScope,
                           retryCount: Int,
                           then completion: @escaping ([Record]?, CloudKitError?) -> Void) {
            operation.zoneID = zoneID
            var fetchedRecords = [Record]()
            operation.recordFetchedBlock = { record in fetchedRecords.append(record) }
            operation.queryCompletionBlock = { cursor, error in
                if let error = error {
                    guard let ckerror = error as? StratusError else {
                        os_log("<fetchAll> unhandled error: %{public}@",
                               log: DefaultFetchManager.logger,
                               type: .error,
                               String(describing: error))
                        completion(nil, .nonRecoverableError)
                        return
                    }
                    if retryCount > 1, let retryAfter = ckerror.retryAfterSeconds?.rounded(.up) {
                        os_log("retry fetch after %.1f seconds", log: DefaultFetchManager.logger, type: .default, retryAfter)
                        DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(Int(retryAfter))) {
                            self.fetch(with: operation,
                                       inZoneWithID: zoneID,
                                       into: accumulator,
                                       in: scope,
                                       retryCount: retryCount - 1,
                                       then: completion)
                        }
                    } else if ckerror.code == StratusError.Code.notAuthenticated {
                        completion(nil, .notAuthenticated)
                    } else if ckerror.code == StratusError.Code.zoneNotFound {
                        completion(nil, .zoneNotFound)
                    } else if ckerror.code == StratusError.Code.userDeletedZone {
                        self.dataInvalidationFlag.set()
                        completion(nil, .userDeletedZone)
                    } else if ckerror.code == StratusError.Code.networkFailure
                                || ckerror.code == StratusError.Code.networkUnavailable
                                || ckerror.code == StratusError.Code.requestRateLimited
                                || ckerror.code == StratusError.Code.serviceUnavailable
                                || ckerror.code == StratusError.Code.zoneBusy {
                        completion(nil, .nonRecoverableError)
                    } else {
                        os_log("<fetchAll> unhandled CKError: %{public}@",
                               log: DefaultFetchManager.logger,
                               type: .error,
                               String(describing: ckerror))
                        completion(nil, .nonRecoverableError)
                    }
                } else if let cursor = cursor {
                    os_log("fetched %d records but still some left",
                           log: DefaultFetchManager.logger,
                           type: .debug,
                           fetchedRecords.count)
                    let nextOperation = QueryOperation(cursor: cursor)
                    nextOperation.zoneID = zoneID
                    self.fetch(with: nextOperation,
                               inZoneWithID: zoneID,
                               into: accumulator + fetchedRecords,
                               in: scope,
                               retryCount: defaultRetryCount,
                               then: completion)
                } else {
                    os_log("fetched %d records",
                           log: DefaultFetchManager.logger,
                           type: .debug,
                           fetchedRecords.count)
                    completion(accumulator + fetchedRecords, nil)
                }
            }
            databaseOperationQueue(for: scope).add(operation)
        }

        func fetchRecord(with recordID: RecordID,
                         in scope: DatabaseScope,
                         then completion: @escaping (Record?, CloudKitError?) -> Void) {
            fetchRecord(with: recordID, in: scope, retryCount: defaultRetryCount, then: completion)
        }

        private func fetchRecord(with recordID: RecordID,
                                 in scope: DatabaseScope,
                                 retryCount: Int,
                                 then completion: @escaping (Record?, CloudKitError?) -> Void) {
            let operation = FetchRecordsOperation(recordIDs: [recordID])
            operation.fetchRecordsCompletionBlock = { records, error in
                if let error = error?.singlePartialError(forKey: recordID) {
                    guard let ckerror = error as? StratusError else {
                        os_log("<fetchRecord> unhandled error: %{public}@",
                               log: DefaultFetchManager.logger,
                               type: .error,
                               String(describing: error))
                        completion(nil, .nonRecoverableError)
                        return
                    }
                    if retryCount > 1, let retryAfter = ckerror.retryAfterSeconds?.rounded(.up) {
                        os_log("retry fetchRecord after %.1f seconds",
                               log: DefaultFetchManager.logger,
                               type: .default,
                               retryAfter)
                        DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(Int(retryAfter))) {
                            self.fetchRecord(with: recordID,
                                             in: scope,
                                             retryCount: retryCount - 1,
                                             then: completion)
                        }
                    } else if ckerror.code == StratusError.Code.notAuthenticated {
                        completion(nil, .notAuthenticated)
                    } else if ckerror.code == StratusError.Code.zoneNotFound {
                        completion(nil, .zoneNotFound)
                    } else if ckerror.code == StratusError.Code.unknownItem {
                        completion(nil, .itemNoLongerExists)
                    } else if ckerror.code == StratusError.Code.networkFailure
                                || ckerror.code == StratusError.Code.networkUnavailable
                                || ckerror.code == StratusError.Code.requestRateLimited
                                || ckerror.code == StratusError.Code.serviceUnavailable
                                || ckerror.code == StratusError.Code.zoneBusy {
                        completion(nil, .nonRecoverableError)
                    } else {
                        os_log("<fetchRecord> unhandled CKError: %{public}@",
                               log: DefaultFetchManager.logger,
                               type: .error,
                               String(describing: ckerror))
                        completion(nil, .nonRecoverableError)
                    }
                } else if let records = records {
                    completion(records[recordID], nil)
                } else {
                    fatalError("both records and error were nil")
                }
            }
            databaseOperationQueue(for: scope).add(operation)
        }
    }

    // MARK: - A record type of the app's (stand-in)

    struct MovieRecord: RecordType {
        static let recordType = "Movie"
        var rawRecord: Record
        init(_ rawRecord: Record) { self.rawRecord = rawRecord }
        var title: String? { rawRecord["title"] }
    }
}

// MARK: - CloudKit.swift's conformances

extension Container: CinemaKit.GeneralOperationQueue {
}

extension Database: CinemaKit.DatabaseOperationQueue {
}

extension Container: CinemaKit.DatabaseOperationQueueFactory {
    func queue(withScope scope: DatabaseScope) -> CinemaKit.DatabaseOperationQueue {
        return database(with: scope)
    }
}

extension Error {
    func singlePartialError(forKey key: Any) -> Error {
        guard let ckerror = self as? StratusError else { return self }
        guard let partialErrorInfo = ckerror.userInfo[PartialErrorsByItemIDKey] as? NSDictionary else { return self }
        // swiftlint:disable:next force_cast
        return (partialErrorInfo[key] as! NSError) as Error
    }
}

// MARK: - Tests

@Suite struct CinemaKitFetchManagerTests {
    typealias Manager = CinemaKit.DefaultFetchManager

    static func manager(_ container: Container, flag: CinemaKit.LocalDataInvalidationFlag = .init()) -> Manager {
        Manager(privateDatabaseOperationQueue: container.queue(withScope: .private),
                sharedDatabaseOperationQueue: container.queue(withScope: .shared),
                dataInvalidationFlag: flag)
    }

    static let libraryZone = RecordZoneID(zoneName: "MovieLibrary-1", ownerName: CurrentUserDefaultName)

    static func saveMovies(_ count: Int, in container: Container) async throws {
        let database = container.privateCloudDatabase
        _ = try await database.modifyRecordZones(saving: [RecordZone(zoneID: libraryZone)], deleting: [])
        let movies = (0..<count).map { index -> Record in
            let movie = Record(recordType: "Movie", recordID: RecordID(recordName: "movie-\(index)", zoneID: libraryZone))
            movie["title"] = "Movie \(index)"
            movie["year"] = 1950 + index % 70
            return movie
        }
        _ = try await database.modifyRecords(saving: movies, deleting: [])
    }

    @Test(arguments: TestEngine.all) func fetchZonesListsTheLibraryZoneAndTheDefaultZone(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            try await Self.saveMovies(1, in: container)
            let (zones, error) = await awaitCallback { done in
                Self.manager(container).fetchZones(in: .private) { zones, error in done((zones, error)) }
            }
            #expect(error == nil)
            let found = try #require(zones)
            #expect(found[Self.libraryZone]?.zoneID == Self.libraryZone)
            #expect(found[RecordZone.ID.default] != nil)
        }
    }

    @Test(arguments: TestEngine.all) func fetchZonesInTheSharedDatabaseIsEmpty(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let (zones, error) = await awaitCallback { done in
                Self.manager(container).fetchZones(in: .shared) { zones, error in done((zones, error)) }
            }
            #expect(error == nil)
            #expect(zones?.isEmpty == true)
        }
    }

    /// More movies than a page holds: each cursor operation gets the zone set again, as the app
    /// does, and every record comes back once.
    @Test(arguments: TestEngine.all) func fetchFollowsEveryCursorWithTheZoneSetAgain(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            try await Self.saveMovies(230, in: container)
            let (movies, error) = await awaitCallback { done in
                Self.manager(container).fetch(CinemaKit.MovieRecord.self, matching: QueryPredicate(value: true),
                                              inZoneWithID: Self.libraryZone, in: .private) { done(($0, $1)) }
            }
            #expect(error == nil)
            let titles = (movies ?? []).compactMap(\.title)
            #expect(titles.count == 230)
            #expect(Set(titles).count == 230)
        }
    }

    @Test(arguments: TestEngine.all) func fetchMatchingAPredicate(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            try await Self.saveMovies(140, in: container)
            let predicate = try QueryPredicate(format: "year == %@", NSNumber(value: 1960))
            let (movies, error) = await awaitCallback { done in
                Self.manager(container).fetch(CinemaKit.MovieRecord.self, matching: predicate,
                                              inZoneWithID: Self.libraryZone, in: .private) { done(($0, $1)) }
            }
            #expect(error == nil)
            #expect(Set((movies ?? []).compactMap(\.title)) == ["Movie 10", "Movie 80"])
        }
    }

    @Test(arguments: TestEngine.all) func fetchInAMissingZoneIsZoneNotFound(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let flag = CinemaKit.LocalDataInvalidationFlag()
            let missing = RecordZoneID(zoneName: "MovieLibrary-gone", ownerName: CurrentUserDefaultName)
            let (movies, error) = await awaitCallback { done in
                Self.manager(container, flag: flag).fetch(CinemaKit.MovieRecord.self, matching: QueryPredicate(value: true),
                                                          inZoneWithID: missing, in: .private) { done(($0, $1)) }
            }
            #expect(movies == nil)
            guard case .zoneNotFound? = error else {
                Issue.record("expected zoneNotFound, got \(String(describing: error))")
                return
            }
            #expect(!flag.isRaised)
        }
    }

    @Test(arguments: TestEngine.all) func fetchRecordAnswersTheRecord(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            try await Self.saveMovies(3, in: container)
            let (record, error) = await awaitCallback { done in
                Self.manager(container).fetchRecord(with: RecordID(recordName: "movie-2", zoneID: Self.libraryZone),
                                                    in: .private) { done(($0, $1)) }
            }
            #expect(error == nil)
            #expect(record?["title"] as? String == "Movie 2")
        }
    }

    /// The one item's error is read out of the partial failure through `NSDictionary`, keyed by
    /// the record ID passed as `Any`, and force-cast to `NSError`.
    @Test(arguments: TestEngine.all) func fetchRecordOfAMissingRecordIsItemNoLongerExists(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            try await Self.saveMovies(1, in: container)
            let (record, error) = await awaitCallback { done in
                Self.manager(container).fetchRecord(with: RecordID(recordName: "movie-404", zoneID: Self.libraryZone),
                                                    in: .private) { done(($0, $1)) }
            }
            #expect(record == nil)
            guard case .itemNoLongerExists? = error else {
                Issue.record("expected itemNoLongerExists, got \(String(describing: error))")
                return
            }
        }
    }

    @Test(arguments: TestEngine.all) func fetchRecordInAMissingZoneIsZoneNotFound(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let missing = RecordZoneID(zoneName: "MovieLibrary-gone", ownerName: CurrentUserDefaultName)
            let (record, error) = await awaitCallback { done in
                Self.manager(container).fetchRecord(with: RecordID(recordName: "movie-1", zoneID: missing),
                                                    in: .private) { done(($0, $1)) }
            }
            #expect(record == nil)
            guard case .zoneNotFound? = error else {
                Issue.record("expected zoneNotFound, got \(String(describing: error))")
                return
            }
        }
    }

    /// `singlePartialError(forKey:)` gives back an error that is still the `CKError` it was, so
    /// `as? CKError` and its `code` work on what the `NSDictionary` held.
    @Test func singlePartialErrorKeepsTheItemsCode() {
        let id = RecordID(recordName: "movie-1", zoneID: Self.libraryZone)
        let partial = StratusError(.partialFailure, userInfo: [PartialErrorsByItemIDKey: [id: StratusError(.unknownItem, "gone")]])
        let single = partial.singlePartialError(forKey: id)
        #expect((single as? StratusError)?.code == .unknownItem)
        let notPartial = StratusError(.zoneBusy, userInfo: [ErrorRetryAfterKey: 2.2])
        #expect((notPartial.singlePartialError(forKey: id) as? StratusError)?.retryAfterSeconds?.rounded(.up) == 3)
    }
}
