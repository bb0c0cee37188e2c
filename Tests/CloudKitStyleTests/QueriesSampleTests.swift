import Foundation
import Stratus
import StratusSQLite
import StratusStores
import StratusTestSupport
import Testing

// Apple's Queries sample (github.com/apple/sample-cloudkit-queries): Queries/Config.swift,
// Queries/ViewModel.swift and Tests/QueriesTests.swift, ported with the README's substitutions
// (`import CloudKit` → `import Stratus`, the `CK` prefix dropped, `CKError` → `StratusError`,
// `NSPredicate(format:)` → `QueryPredicate(format:)`). The original's code is kept line for
// line; where a line had to change, the CloudKit line is quoted above it. What changes beyond
// the renames, and why:
//
// - The sample's files sit in `enum QueriesSample`, as other ports in this module have a
//   `Config` and view models of their own.
// - `ObservableObject` and `@Published` are Combine's, which Linux does not have: `state` is a
//   plain property. Nothing else in the view model depends on them.
// - `os_log` is Apple's unified logging, which Linux does not have: the view model's own
//   `os_log` keeps each message, so the tests can read what `reportError` reported.
// - `CKContainer(identifier: Config.containerIdentifier)` opens iCloud's container; here a test
//   hands the view model the store file its container lives in (an app would call
//   `Container(identifier:)`, whose store is the default file), and `UserDefaults.standard` is
//   a defaults domain of the test's own, as the app's flag would otherwise outlive the
//   test's temporary store.
// - XCTest's `setUpWithError`, `tearDownWithError` and expectations become a test case object
//   whose set-up and tear-down each test calls, and `awaitCallback` (see Support.swift).

enum QueriesSample {

    // MARK: - Config.swift

    enum Config {
        /// iCloud container identifier.
        /// Update this if you wish to use your own iCloud container.
        static let containerIdentifier = "iCloud.com.apple.samples.cloudkit.queries"
    }

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

        // Where the port's container lives, and the port's `UserDefaults.standard` (see the top).
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
        func saveContacts(_ contactNames: [String], completionQueue: DispatchQueue = .main, completionHandler: @escaping (Result<[Record], Error>) -> Void) {
            /// Convert our strings (names) to `CKRecord` objects with our helper function.
            let records = contactNames.map { createContactRecord(forName: $0) }

            let saveOperation = ModifyRecordsOperation(recordsToSave: records)
            saveOperation.savePolicy = .allKeys

            // var recordsSaved: [CKRecord] = []
            // (`nonisolated(unsafe)`: the final block reads it inside `completionQueue.async { … }`,
            // whose closure Dispatch on Linux takes as `@Sendable`; the operation's blocks run one
            // at a time, the final one last, so nothing reads it while a block writes it.)
            nonisolated(unsafe) var recordsSaved: [Record] = []

            saveOperation.perRecordSaveBlock = { id, result in
                if let record = try? result.get() {
                    recordsSaved.append(record)
                }
            }

            saveOperation.modifyRecordsResultBlock = { result in
                if case .failure(let error) = result {
                    self.reportError(error)
                }

                completionQueue.async {
                    completionHandler(result.map { recordsSaved })
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
            // (`try!` as the README says for non-throwing code: this format always parses.)
            let predicate = try! QueryPredicate(format: "name BEGINSWITH %@", prefix)

            // Using CKQueryOperation, the records will come in via the closure one at a time.
            // Store results in a temporary array for returning after completion.
            // (`nonisolated(unsafe)`, as `recordsSaved` above.)
            nonisolated(unsafe) var fetchedNames: [String] = []

            let query = Query(recordType: "Contact", predicate: predicate)
            let queryOperation = QueryOperation(query: query)
            queryOperation.zoneID = contactsZoneID

            queryOperation.recordMatchedBlock = { _, result in
                if let record = try? result.get(), let name = record["name"] as? String {
                    fetchedNames.append(name)
                }
            }

            queryOperation.queryResultBlock = { result in
                if case .failure(let error) = result {
                    self.reportError(error)
                }

                completionQueue.async {
                    completionHandler(result.map { _ in fetchedNames })
                }
            }

            database.add(queryOperation)
        }

        /// Fetches _all_ contact names from the database.
        /// - Parameters:
        ///   - completionQueue: The [DispatchQueue](https://developer.apple.com/documentation/dispatch/dispatchqueue) on which the completion handler will be called. Defaults to `main`.
        ///   - completionHandler: Handler called on operation completion with success (array of names) or failure.
        func getAllContactNames(completionQueue: DispatchQueue = .main, completionHandler: @escaping (Result<[String], Error>) -> Void) {
            // (`nonisolated(unsafe)`, as `recordsSaved` above.)
            nonisolated(unsafe) var fetchedNames: [String] = []

            let fetchOperation = FetchRecordZoneChangesOperation(recordZoneIDs: [contactsZoneID], configurationsByRecordZoneID: nil)

            fetchOperation.recordWasChangedBlock = { _, result in
                if let record = try? result.get(), let name = record["name"] as? String {
                    fetchedNames.append(name)
                }
            }

            fetchOperation.fetchRecordZoneChangesResultBlock = { result in
                completionQueue.async {
                    completionHandler(result.map { fetchedNames })
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

            createZoneOperation.modifyRecordZonesResultBlock = { result in
                switch result {
                case .failure(let error):
                    self.reportError(error)

                case .success:
                    // UserDefaults.standard.set(true, forKey: "contactZoneCreated")
                    self.userDefaults.set(true, forKey: "contactZoneCreated")
                }

                completionQueue.async {
                    completionHandler(result)
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

        /// Keeps what the sample logs; reportError runs on the operations' threads.
        private func os_log(_ message: String) { log.append(message) }

        var reportedMessages: [String] { log.messages }
    }
}

// MARK: - QueriesTests.swift

/// The sample's `QueriesTests` (an `XCTestCase`): its view model, the IDs to delete at tear-down,
/// its set-up and tear-down, and its test helper, as the original has them.
/// Note: As these tests perform actions on an iCloud Private Database, a signed-in iCloud account
/// is required on the device or simulator that the tests are run on.
// class QueriesTests: XCTestCase {
final class QueriesTestCase {

    let viewModel: QueriesSample.ViewModel
    var idsToDelete: [Record.ID] = []

    init(viewModel: QueriesSample.ViewModel) {
        self.viewModel = viewModel
    }

    // override func setUpWithError() throws {
    func setUpWithError() async throws {
        // let expectation = self.expectation(description: "Expect ViewModel initialization completed")
        let result: Result<Void, Error> = await awaitCallback { fulfill in
            viewModel.initialize { result in
                fulfill(result)
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
            let container = try Container(identifier: QueriesSample.Config.containerIdentifier, store: viewModel.storeLocation, userName: viewModel.userName)
            let database = container.privateCloudDatabase

            let deleteOperation = ModifyRecordsOperation(recordsToSave: nil, recordIDsToDelete: idsToDelete)

            let result: Result<Void, Error> = await awaitCallback { deleteExpectation in
                deleteOperation.modifyRecordsResultBlock = { result in
                    deleteExpectation(result)
                }

                database.add(deleteOperation)
            }

            if case .failure(let error) = result {
                Issue.record("Error deleting temporary IDs: \(error.localizedDescription)")
            } else {
                self.idsToDelete = []
            }
        }
    }

    // MARK: - Test Helpers

    func createTemporaryRecords(names: [String], completionQueue: DispatchQueue = .main, completion: @escaping (() -> Void)) throws {
        viewModel.saveContacts(names) { result in
            switch result {
            case .failure(let error):
                Issue.record("Error saving records: \(error.localizedDescription)")
            case .success(let records):
                self.idsToDelete = records.map { $0.recordID }
            }

            completionQueue.async {
                completion()
            }
        }
    }
}

/// Runs `body` with the sample's test case on a fresh store and a defaults domain of its own,
/// set up before and torn down after, as XCTest does around each test; `afterTearDown` runs
/// while the store is still there.
func withQueriesTestCase(on engine: TestEngine, _ body: (QueriesTestCase) async throws -> Void,
                         afterTearDown: (QueriesTestCase) async throws -> Void = { _ in }) async throws {
    try await withStore(on: engine) { location, store in
        let suite = "stratus-queries-sample-\(UUID().uuidString)"
        let defaults = try #require(UserDefaults(suiteName: suite))
        defer { defaults.removePersistentDomain(forName: suite) }
        let testCase = QueriesTestCase(viewModel: QueriesSample.ViewModel(storeLocation: location, userName: "alice", userDefaults: defaults))
        try await testCase.setUpWithError()
        try await body(testCase)
        try await testCase.tearDownWithError()
        try await afterTearDown(testCase)
    }
}

/// Reads the Contacts zone's names through a second container on the test's store, as another
/// device (or the CloudKit console) would see them.
func contactNamesInStore(of viewModel: QueriesSample.ViewModel) async throws -> [String] {
    let container = try Container(identifier: QueriesSample.Config.containerIdentifier, store: viewModel.storeLocation, userName: viewModel.userName)
    let changes = try await container.privateCloudDatabase.recordZoneChanges(inZoneWith: RecordZone.ID(zoneName: "Contacts"), since: nil)
    return changes.modificationResultsByID.values.compactMap { result in (try? result.get().record)?["name"] as? String }.sorted()
}

@Suite("Apple's Queries sample (sample-cloudkit-queries), ported")
struct QueriesSampleTests {

    // func test_CloudKitReadiness() throws {
    @Test("test_CloudKitReadiness: the private database answers its zones, the sample's Contacts zone among them", arguments: TestEngine.all)
    func cloudKitReadiness(engine: TestEngine) async throws {
        try await withQueriesTestCase(on: engine) { testCase in
            // Fetch zones from the Private Database of the CKContainer for the current user to test for valid/ready state
            let container = try Container(identifier: QueriesSample.Config.containerIdentifier, store: testCase.viewModel.storeLocation, userName: "alice")
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
    @Test("testSavingRecords: saveContacts saves one Contact per name, and tear-down deletes them", arguments: TestEngine.all)
    func savingRecords(engine: TestEngine) async throws {
        try await withQueriesTestCase(on: engine) { testCase in
            await awaitCallback { saveExpectation in
                try! testCase.createTemporaryRecords(names: ["Madi", "Simon", "Bob"]) {
                    saveExpectation(())
                }
            }
            #expect(testCase.idsToDelete.count == 3)
            #expect(Set(testCase.idsToDelete.map { id in id.zoneID.zoneName }) == ["Contacts"])
            let namesInStore = try await contactNamesInStore(of: testCase.viewModel)
            #expect(namesInStore == ["Bob", "Madi", "Simon"])
            #expect(testCase.viewModel.reportedMessages.isEmpty)
        } afterTearDown: { testCase in
            // tearDownWithError deleted what the test saved.
            let namesLeft = try await contactNamesInStore(of: testCase.viewModel)
            #expect(namesLeft.isEmpty)
            #expect(testCase.idsToDelete.isEmpty)
        }
    }

    // func testQueryingRecords() throws {
    @Test("testQueryingRecords: a BEGINSWITH query in the Contacts zone answers the names with the prefix", arguments: TestEngine.all)
    func queryingRecords(engine: TestEngine) async throws {
        try await withQueriesTestCase(on: engine) { testCase in
            let result: Result<[String], Error> = await awaitCallback { queryExpectation in
                try! testCase.createTemporaryRecords(names: ["Madi", "Simon"], completionQueue: .global()) {
                    // The original sleeps here (`Thread.sleep(forTimeInterval: 5.0)`): "New records will not be
                    // indexed instantly". Stratus indexes a record before its save answers, so the port does not wait.
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
}

// The view model's other paths, which the sample's app runs and its tests do not.
extension QueriesSampleTests {

    @Test("getContactNames: the prefix is case-sensitive, as the sample's doc comment says; no prefix lists the zone through its changes", arguments: TestEngine.all)
    func prefixAndAllNames(engine: TestEngine) async throws {
        try await withQueriesTestCase(on: engine) { testCase in
            await awaitCallback { saved in
                try! testCase.createTemporaryRecords(names: ["Madi", "mark", "Mo", "Simon"]) { saved(()) }
            }
            let viewModel = testCase.viewModel
            for (prefix, expected) in [("M", ["Madi", "Mo"]), ("m", ["mark"]), ("Ma", ["Madi"]), ("X", [])] as [(String, [String])] {
                let result: Result<[String], Error> = await awaitCallback { done in
                    viewModel.getContactNames(startingWith: prefix) { result in done(result) }
                }
                let names = try result.get()
                #expect(names.sorted() == expected, "prefix \(prefix)")
            }
            // A nil prefix goes to getAllContactNames, a CKFetchRecordZoneChangesOperation over the zone.
            let all: Result<[String], Error> = await awaitCallback { done in
                viewModel.getContactNames(startingWith: nil) { result in done(result) }
            }
            let allNames = try all.get()
            #expect(allNames.sorted() == ["Madi", "Mo", "Simon", "mark"])
        }
    }

    @Test("the zone is created once: the defaults flag skips the operation on the next initialize", arguments: TestEngine.all)
    func zoneCreatedOnce(engine: TestEngine) async throws {
        try await withQueriesTestCase(on: engine) { testCase in
            let viewModel = testCase.viewModel
            #expect(viewModel.userDefaults.bool(forKey: "contactZoneCreated"))
            let again: Result<Void, Error> = await awaitCallback { done in viewModel.initialize { result in done(result) } }
            #expect((try? again.get()) != nil)

            // On another device (a second container, no flag) the zone save finds the zone there and succeeds.
            let suite = "stratus-queries-sample-\(UUID().uuidString)"
            let otherDefaults = try #require(UserDefaults(suiteName: suite))
            defer { otherDefaults.removePersistentDomain(forName: suite) }
            let otherDevice = QueriesSample.ViewModel(storeLocation: viewModel.storeLocation, userName: viewModel.userName, userDefaults: otherDefaults)
            let created: Result<Void, Error> = await awaitCallback { done in otherDevice.initialize { result in done(result) } }
            #expect((try? created.get()) != nil)
            #expect(otherDefaults.bool(forKey: "contactZoneCreated"))
            #expect(otherDevice.reportedMessages.isEmpty)
        }
    }

    @Test("a save into a zone deleted behind the view model fails, and reportError reports each record's zoneNotFound from the partial failure", arguments: TestEngine.all)
    func partialFailureReported(engine: TestEngine) async throws {
        try await withQueriesTestCase(on: engine) { testCase in
            let viewModel = testCase.viewModel
            let container = try Container(identifier: QueriesSample.Config.containerIdentifier, store: viewModel.storeLocation, userName: viewModel.userName)
            try await container.privateCloudDatabase.deleteRecordZone(withID: RecordZone.ID(zoneName: "Contacts"))

            let result: Result<[Record], Error> = await awaitCallback { done in
                viewModel.saveContacts(["Madi", "Simon"]) { result in done(result) }
            }
            #expect(throws: StratusError.self) { try result.get() }
            let error = try #require(result.failure as? StratusError)
            #expect(error.code == .partialFailure)
            let byItem = try #require(error.partialErrorsByItemID)
            #expect(byItem.count == 2)
            #expect(byItem.values.allSatisfy { itemError in (itemError as? StratusError)?.code == .zoneNotFound })

            // `reportError` unpacked `userInfo[CKPartialErrorsByItemIDKey] as? [NSObject: CKError]` and
            // reported each record's error through its `default:` case.
            let messages = viewModel.reportedMessages
            #expect(messages.count == 2)
            #expect(messages.allSatisfy { message in message.hasPrefix("CKError: ") && message != "CKError: Record not found." })
            #expect(!messages.contains { message in message.hasPrefix("Not a CKError") })
        }
    }

    @Test("a query after the zone is deleted fails with zoneNotFound, reported once", arguments: TestEngine.all)
    func queryInMissingZone(engine: TestEngine) async throws {
        try await withQueriesTestCase(on: engine) { testCase in
            let viewModel = testCase.viewModel
            let container = try Container(identifier: QueriesSample.Config.containerIdentifier, store: viewModel.storeLocation, userName: viewModel.userName)
            try await container.privateCloudDatabase.deleteRecordZone(withID: RecordZone.ID(zoneName: "Contacts"))

            let result: Result<[String], Error> = await awaitCallback { done in
                viewModel.getContactNames(startingWith: "M") { result in done(result) }
            }
            #expect((result.failure as? StratusError)?.code == .zoneNotFound)
            #expect(viewModel.reportedMessages.count == 1)
        }
    }
}

fileprivate extension Result {
    /// The error of a failure, `nil` for a success.
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
