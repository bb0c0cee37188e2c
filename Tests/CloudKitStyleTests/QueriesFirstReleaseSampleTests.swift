import Foundation
import Stratus
import StratusSQLite
import StratusStores
import StratusTestSupport
import Testing

// Apple's Queries sample in its first release (github.com/apple/sample-cloudkit-queries, the
// commit that added it), written against the pre-iOS 15 blocks: `modifyRecordsCompletionBlock`,
// `recordFetchedBlock` and `queryCompletionBlock`, `recordChangedBlock` and
// `recordZoneFetchCompletionBlock`, `modifyRecordZonesCompletionBlock`. Its ViewModel and
// QueriesTests are ported as QueriesSampleTests.swift ports the current release (see there for
// what changes beyond the renames and why); Config.swift is the same in both. Where a line had to
// change, the CloudKit line is quoted above it.

enum QueriesFirstReleaseSample {

    typealias Config = QueriesSample.Config

    // MARK: - ViewModel.swift

    // final class ViewModel: ObservableObject {
    final class ViewModel {

        // MARK: - VM State

        enum State {
            case idle
            case loading
            case loaded(names: [String], prefix: String?)
            case error(Error)

            var isLoading: Bool {
                switch self {
                case .loading:
                    return true
                default:
                    return false
                }
            }

            var isError: Bool {
                switch self {
                case .error:
                    return true
                default:
                    return false
                }
            }
        }

        // MARK: - Properties

        // @Published private(set) var state = State.idle
        private(set) var state = State.idle
        var activeFilterPrefix: String? = nil

        // private lazy var container = CKContainer(identifier: Config.containerIdentifier)
        private lazy var container = try! Container(identifier: Config.containerIdentifier, store: storeLocation, userName: userName)
        private lazy var database = container.privateCloudDatabase

        private let contactsZoneID = RecordZone.ID(zoneName: "Contacts")

        // Where the port's container lives, and the port's `UserDefaults.standard`.
        let storeLocation: String
        let userName: String
        let userDefaults: UserDefaults
        private let log = SampleLog()

        init(storeLocation: String, userName: String, userDefaults: UserDefaults) {
            self.storeLocation = storeLocation
            self.userName = userName
            self.userDefaults = userDefaults
        }

        // MARK: - API

        func initializeAndRefresh() {
            initialize { result in
                switch result {
                case .failure(let error):
                    self.state = .error(error)
                case .success:
                    self.refresh()
                }
            }
        }

        func initialize(completionHandler: @escaping (Result<Void, Error>) -> Void) {
            createContactsZoneIfNeeded(completionHandler: completionHandler)
        }

        func refresh() {
            self.state = .loading

            getContactNames(startingWith: activeFilterPrefix) { result in
                switch result {
                case .failure(let error):
                    self.state = .error(error)
                case .success(let names):
                    self.state = .loaded(names: names, prefix: self.activeFilterPrefix)
                }
            }
        }

        /// Saves a set of names to our private database as Contact records.
        /// - Parameters:
        ///   - contactNames: A list of names representing contacts to save to the database.
        ///   - completionQueue: The [DispatchQueue](https://developer.apple.com/documentation/dispatch/dispatchqueue) on which the completion handler will be called. Defaults to `main`.
        ///   - completionHandler: Handler called on operation completion with success or failure.
        func saveContacts(_ contactNames: [String], completionQueue: DispatchQueue = .main, completionHandler: @escaping (Result<[Record]?, Error>) -> Void) {
            /// Convert our strings (names) to `CKRecord` objects with our helper function.
            let records = contactNames.map { createContactRecord(forName: $0) }

            let saveOperation = ModifyRecordsOperation(recordsToSave: records)
            saveOperation.savePolicy = .allKeys

            saveOperation.modifyRecordsCompletionBlock = { recordsSaved, _, error in
                completionQueue.async {
                    if let error = error {
                        self.reportError(error)
                        completionHandler(.failure(error))
                    } else {
                        completionHandler(.success(recordsSaved))
                    }
                }
            }

            database.add(saveOperation)
        }

        /// Retrieves names of Contacts from the database with an optional **case-sensitive** prefix to query with.
        /// - Parameters:
        ///   - prefix: Prefix to query names against.
        ///   - completionQueue: The [DispatchQueue](https://developer.apple.com/documentation/dispatch/dispatchqueue) on which the completion handler will be called. Defaults to `main`.
        ///   - completionHandler: Handler called on operation completion with success (array of names) or failure.
        func getContactNames(startingWith prefix: String?, completionQueue: DispatchQueue = .main, completionHandler: @escaping (Result<[String], Error>) -> Void) {
            guard let prefix = prefix else {
                getAllContactNames(completionQueue: completionQueue, completionHandler: completionHandler)
                return
            }

            // let predicate = NSPredicate(format: "name BEGINSWITH %@", prefix)
            let predicate = try! QueryPredicate(format: "name BEGINSWITH %@", prefix)

            // Using CKQueryOperation, the records will come in via the closure one at a time.
            // Store results in a temporary array for returning after completion.
            // (`nonisolated(unsafe)`: read inside `completionQueue.async`, see QueriesSampleTests.swift.)
            nonisolated(unsafe) var fetchedNames: [String] = []

            let query = Query(recordType: "Contact", predicate: predicate)
            let queryOperation = QueryOperation(query: query)
            queryOperation.zoneID = contactsZoneID

            queryOperation.recordFetchedBlock = { record in
                if let name = record["name"] as? String {
                    fetchedNames.append(name)
                }
            }

            queryOperation.queryCompletionBlock = { _, error in
                completionQueue.async {
                    if let error = error {
                        self.reportError(error)
                        completionHandler(.failure(error))
                    } else {
                        completionHandler(.success(fetchedNames))
                    }
                }
            }

            database.add(queryOperation)
        }

        /// Fetches _all_ contact names from the database.
        /// - Parameters:
        ///   - completionQueue: The [DispatchQueue](https://developer.apple.com/documentation/dispatch/dispatchqueue) on which the completion handler will be called. Defaults to `main`.
        ///   - completionHandler: Handler called on operation completion with success (array of names) or failure.
        func getAllContactNames(completionQueue: DispatchQueue = .main, completionHandler: @escaping (Result<[String], Error>) -> Void) {
            // (`nonisolated(unsafe)`, as above.)
            nonisolated(unsafe) var fetchedNames: [String] = []

            let fetchOperation = FetchRecordZoneChangesOperation(recordZoneIDs: [contactsZoneID], configurationsByRecordZoneID: nil)

            fetchOperation.recordChangedBlock = { record in
                if let name = record["name"] as? String {
                    fetchedNames.append(name)
                }
            }

            fetchOperation.recordZoneFetchCompletionBlock = { _, _, _, _, error in
                completionQueue.async {
                    if let error = error {
                        completionHandler(.failure(error))
                    } else {
                        completionHandler(.success(fetchedNames))
                    }
                }
            }

            database.add(fetchOperation)
        }

        // MARK: - Helpers

        private func createContactRecord(forName name: String) -> Record {
            let recordID = Record.ID(zoneID: contactsZoneID)
            let record = Record(recordType: "Contact", recordID: recordID)
            record["name"] = name
            return record
        }

        /// Creates a custom CKRecordZone and saves it to the database if needed,
        /// checking `UserDefaults` if this has been done before on this device.
        /// - Parameter completionQueue: Queue to run completion handler on.
        /// - Parameter completionHandler: Handler to process `success` or `failure`.
        private func createContactsZoneIfNeeded(completionQueue: DispatchQueue = .main, completionHandler: @escaping (Result<Void, Error>) -> Void) {
            // guard !UserDefaults.standard.bool(forKey: "contactZoneCreated") else {
            guard !userDefaults.bool(forKey: "contactZoneCreated") else {
                completionHandler(.success(()))
                return
            }

            let newZone = RecordZone(zoneID: contactsZoneID)
            let createZoneOperation = ModifyRecordZonesOperation(recordZonesToSave: [newZone])

            createZoneOperation.modifyRecordZonesCompletionBlock = { _, _, error in
                if let error = error {
                    completionHandler(.failure(error))
                } else {
                    // UserDefaults.standard.set(true, forKey: "contactZoneCreated")
                    self.userDefaults.set(true, forKey: "contactZoneCreated")

                    completionHandler(.success(()))
                }
            }

            database.add(createZoneOperation)
        }

        private func reportError(_ error: Error) {
            // guard let ckerror = error as? CKError else {
            guard let ckerror = error as? StratusError else {
                os_log("Not a CKError: \(error.localizedDescription)")
                return
            }

            switch ckerror.code {
            case .partialFailure:
                // Iterate through error(s) in partial failure and report each one.
                // let dict = ckerror.userInfo[CKPartialErrorsByItemIDKey] as? [NSObject: CKError]
                let dict = ckerror.userInfo[PartialErrorsByItemIDKey] as? [NSObject: StratusError]
                if let errorDictionary = dict {
                    for (_, error) in errorDictionary {
                        reportError(error)
                    }
                }

            // This switch could explicitly handle as many specific errors as needed, for example:
            case .unknownItem:
                os_log("CKError: Record not found.")

            case .notAuthenticated:
                os_log("CKError: An iCloud account must be signed in on device or Simulator to write to a PrivateDB.")

            case .permissionFailure:
                os_log("CKError: An iCloud account permission failure occured.")

            case .networkUnavailable:
                os_log("CKError: The network is unavailable.")

            default:
                os_log("CKError: \(error.localizedDescription)")
            }
        }

        // MARK: - The port's os_log

        private func os_log(_ message: String) { log.append(message) }

        var reportedMessages: [String] { log.messages }
    }
}

// MARK: - QueriesTests.swift

/// The first release's `QueriesTests`: as QueriesTestCase, with the older blocks.
// class QueriesTests: XCTestCase {
final class QueriesFirstReleaseTestCase {

    let viewModel: QueriesFirstReleaseSample.ViewModel
    var idsToDelete: [Record.ID] = []

    init(viewModel: QueriesFirstReleaseSample.ViewModel) {
        self.viewModel = viewModel
    }

    // override func setUpWithError() throws {
    func setUpWithError() async throws {
        let result: Result<Void, Error> = await awaitCallback { expectation in
            viewModel.initialize { result in
                expectation(result)
            }
        }

        if case .failure(let error) = result {
            Issue.record("ViewModel initialization failed: \(error)")
        }
    }

    // override func tearDownWithError() throws {
    func tearDownWithError() async throws {
        if !idsToDelete.isEmpty {
            // let container = CKContainer(identifier: Config.containerIdentifier)
            let container = try Container(identifier: QueriesFirstReleaseSample.Config.containerIdentifier, store: viewModel.storeLocation, userName: viewModel.userName)
            let database = container.privateCloudDatabase

            let deleteOperation = ModifyRecordsOperation(recordsToSave: nil, recordIDsToDelete: idsToDelete)
            let (idsDeleted, error): ([Record.ID]?, Error?) = await awaitCallback { deleteExpectation in
                deleteOperation.modifyRecordsCompletionBlock = { _, idsDeleted, error in
                    deleteExpectation((idsDeleted, error))
                }

                database.add(deleteOperation)
            }

            if let error = error {
                Issue.record("Error deleting temporary IDs: \(error.localizedDescription)")
            } else {
                #expect(idsDeleted == self.idsToDelete, "IDs deleted did not match targeted IDs for deletion.")
            }

            self.idsToDelete = []
        }
    }

    // MARK: - Test Helpers

    func createTemporaryRecords(names: [String], completionQueue: DispatchQueue = .main, completion: @escaping (() -> Void)) throws {
        viewModel.saveContacts(names) { result in
            switch result {
            case .failure(let error):
                Issue.record("Error saving records: \(error.localizedDescription)")
            case .success(let records):
                if let records = records {
                    self.idsToDelete = records.map { $0.recordID }
                }
            }

            completionQueue.async {
                completion()
            }
        }
    }
}

/// As `withQueriesTestCase`: `afterTearDown` runs while the store is still there.
func withQueriesFirstReleaseTestCase(on engine: TestEngine, _ body: (QueriesFirstReleaseTestCase) async throws -> Void,
                                     afterTearDown: (QueriesFirstReleaseTestCase) async throws -> Void = { _ in }) async throws {
    try await withStore(on: engine) { location, store in
        let suite = "stratus-queries-first-sample-\(UUID().uuidString)"
        let defaults = try #require(UserDefaults(suiteName: suite))
        defer { defaults.removePersistentDomain(forName: suite) }
        let testCase = QueriesFirstReleaseTestCase(viewModel: QueriesFirstReleaseSample.ViewModel(storeLocation: location, userName: "alice", userDefaults: defaults))
        try await testCase.setUpWithError()
        try await body(testCase)
        try await testCase.tearDownWithError()
        try await afterTearDown(testCase)
    }
}

@Suite("Apple's Queries sample, first release (pre-iOS 15 blocks), ported")
struct QueriesFirstReleaseSampleTests {

    // func test_CloudKitReadiness() throws {
    @Test("test_CloudKitReadiness: the private database answers its zones, Contacts among them", arguments: TestEngine.all)
    func cloudKitReadiness(engine: TestEngine) async throws {
        try await withQueriesFirstReleaseTestCase(on: engine) { testCase in
            let container = try Container(identifier: QueriesFirstReleaseSample.Config.containerIdentifier, store: testCase.viewModel.storeLocation, userName: "alice")
            let database = container.privateCloudDatabase

            let (zones, failure): ([RecordZone]?, Error?) = await awaitCallback { fetchExpectation in
                database.fetchAllRecordZones { zones, error in
                    if let error = error as? StratusError {
                        switch error.code {
                        case .badContainer, .badDatabase:
                            Issue.record("Create or select a CloudKit container in this app target's Signing & Capabilities in Xcode")

                        case .permissionFailure, .notAuthenticated:
                            Issue.record("Simulator or device running this app needs a signed-in iCloud account")

                        default:
                            Issue.record("CKError: \(error)")
                        }
                    }
                    fetchExpectation((zones, error))
                }
            }
            #expect(failure == nil)
            let zoneNames = try #require(zones).map { zone in zone.zoneID.zoneName }
            #expect(Set(zoneNames) == [RecordZone.ID.defaultZoneName, "Contacts"])
        }
    }

    // func testSavingRecords() throws {
    @Test("testSavingRecords: modifyRecordsCompletionBlock hands back the saved records, and tear-down deletes their IDs in order", arguments: TestEngine.all)
    func savingRecords(engine: TestEngine) async throws {
        try await withQueriesFirstReleaseTestCase(on: engine) { testCase in
            await awaitCallback { saveExpectation in
                try! testCase.createTemporaryRecords(names: ["Madi", "Simon", "Bob"]) {
                    saveExpectation(())
                }
            }
            #expect(testCase.idsToDelete.count == 3)
        } afterTearDown: { testCase in
            let container = try Container(identifier: QueriesFirstReleaseSample.Config.containerIdentifier, store: testCase.viewModel.storeLocation, userName: "alice")
            let left = try await container.privateCloudDatabase.recordZoneChanges(inZoneWith: RecordZone.ID(zoneName: "Contacts"), since: nil)
            #expect(left.modificationResultsByID.isEmpty)
            #expect(left.deletions.count == 3)
        }
    }

    // func testQueryingRecords() throws {
    @Test("testQueryingRecords: recordFetchedBlock and queryCompletionBlock answer the names with the prefix", arguments: TestEngine.all)
    func queryingRecords(engine: TestEngine) async throws {
        try await withQueriesFirstReleaseTestCase(on: engine) { testCase in
            let result: Result<[String], Error> = await awaitCallback { queryExpectation in
                try! testCase.createTemporaryRecords(names: ["Madi", "Simon"], completionQueue: .global()) {
                    // (The original's `Thread.sleep(forTimeInterval: 5.0)` for indexing is left out, as in
                    // QueriesSampleTests.swift: Stratus indexes a record before its save answers.)
                    testCase.viewModel.getContactNames(startingWith: "M") { result in
                        queryExpectation(result)
                    }
                }
            }

            switch result {
            case .failure(let error):
                Issue.record("Error fetching filtered contacts: \(error)")
            case .success(let names):
                #expect(!names.isEmpty, "Query for prefix: \"M\" should return at least one record")
                names.forEach { name in #expect(name.starts(with: "M"), "Received name not starting with given prefix (M): \(name)") }
                #expect(names == ["Madi"])
            }
        }
    }

    @Test("no prefix: recordChangedBlock and recordZoneFetchCompletionBlock list every name in the zone", arguments: TestEngine.all)
    func allNamesThroughZoneChanges(engine: TestEngine) async throws {
        try await withQueriesFirstReleaseTestCase(on: engine) { testCase in
            await awaitCallback { saved in
                try! testCase.createTemporaryRecords(names: ["Madi", "mark", "Simon"]) { saved(()) }
            }
            let all: Result<[String], Error> = await awaitCallback { done in
                testCase.viewModel.getContactNames(startingWith: nil) { result in done(result) }
            }
            let names = try all.get()
            #expect(names.sorted() == ["Madi", "Simon", "mark"])
        }
    }
}
