import Foundation
import Stratus
import StratusSQLite
import StratusStores
import StratusTestSupport
import Testing

// Apple's Private Database sample (github.com/apple/sample-cloudkit-privatedb):
// PrivateDatabase/Config.swift, PrivateDatabase/ViewModel.swift and Tests/PrivateDatabaseTests.swift,
// ported with the README's substitutions (`import CloudKit` → `import Stratus`, the `CK` prefix
// dropped, `CKError` → `StratusError`). Where a line had to change, the CloudKit line is quoted
// above it. Beyond the renames, as in QueriesSampleTests.swift: the sample's files sit in
// `enum PrivateDatabaseSample`; Combine's `ObservableObject` and `@Published` are dropped;
// `os_log` is the view model's own and keeps its messages; the container's store file (and
// user) are the test's own. The view model is `@MainActor`, as the sample's is.

enum PrivateDatabaseSample {

    // MARK: - Config.swift

    enum Config {
        /// iCloud container identifier.
        /// Update this if you wish to use your own iCloud container.
        static let containerIdentifier = "iCloud.com.apple.samples.cloudkit.PrivateDatabase"
    }

    // MARK: - ViewModel.swift

    /// Our class primarily sets properties for the UI, so the entire model is in the MainActor context
    // @MainActor class ViewModel: ObservableObject {
    @MainActor class ViewModel {

        // MARK: - Properties

        /// The CloudKit container to use. Update with your own container identifier.
        // private let container = CKContainer(identifier: Config.containerIdentifier)
        private let container: Container

        /// This sample uses the private database, which requires a logged in iCloud account.
        private lazy var database = container.privateCloudDatabase

        /// This sample uses a singleton record ID, referred to by this property.
        /// CloudKit uses `CKRecord.ID` objects to represent record IDs.
        private let lastPersonRecordID: Record.ID

        /// Publish the fetched last person to our view.
        // @Published var lastPerson = String()
        var lastPerson = String()

        /// What the port's `os_log` kept.
        private(set) var loggedMessages: [String] = []

        // MARK: - Init

        // nonisolated init(isTesting: Bool = false) {
        nonisolated init(isTesting: Bool = false, storeLocation: String, userName: String) {
            // (`CKContainer(identifier:)` in the property's initializer, as the sample has it, cannot
            // name the test's store: the container is opened here.)
            container = try! Container(identifier: Config.containerIdentifier, store: storeLocation, userName: userName)
            // Use a different unique record ID if testing.
            lastPersonRecordID = Record.ID(recordName: isTesting ? "lastPersonTest" : "lastPerson")
            // async {
            // (`async { }` is the Swift 5.5 betas' spelling of `Task { }`, which the released
            // compiler does not accept.)
            Task {
                try? await self.refreshLastPerson()
            }
        }

        // MARK: - API

        /// Saves the given name as the last person in the database.
        /// - Parameters:
        ///   - name: Name to attach to the record as the last person.
        func saveRecord(name: String) async throws {
            let lastPersonRecord = Record(recordType: "Person", recordID: lastPersonRecordID)
            lastPersonRecord["name"] = name

            let recordResult: Result<Record, Error>
            // With the CloudKit async API, we can customize savePolicy. (For this sample, we'd like
            // to overwrite the server version of the record in all cases, regardless of what's
            // on the server.
            do {
                let (saveResults, _) = try await database.modifyRecords(saving: [lastPersonRecord],
                                                                        savePolicy: .allKeys)
                // In this sample, we will only ever be saving a single record,
                // so we only expect one returned result.  We know that if the
                // function did not throw, we'll have a result for every record
                // we attempted to save
                recordResult = saveResults[lastPersonRecordID]!
            } catch let functionError { // Handle per-function error
                self.reportError(functionError)
                // Give callers a chance to handle this error as they like
                throw functionError
            }

            switch recordResult {
            case .success(let savedRecord):
                os_log("Record with ID \(savedRecord.recordID.recordName) was saved.")
                try await self.refreshLastPerson()

            case .failure(let recordError): // Handle per-record error
                self.reportError(recordError)
                // Give callers a chance to handle this error as they like
                throw recordError
            }
        }

        /// Deletes the last person record.
        func deleteLastPerson() async throws {
            do {
                let recordID = try await database.deleteRecord(withID: lastPersonRecordID)
                os_log("Record with ID \(recordID.recordName) was deleted.")
            } catch {
                self.reportError(error)
                throw error
            }
        }

        /// Fetches the last person record and updates the published `lastPerson` property in the VM.
        func refreshLastPerson() async throws {
            // Here, we will use the convenience async method on CKDatabase
            // to fetch a single CKRecord
            do {
                let record = try await database.record(for: lastPersonRecordID)
                os_log("Record with ID \(record.recordID.recordName) was fetched.")
                if let name = record["name"] as? String {
                    self.lastPerson = name
                }
            } catch {
                self.reportError(error)
                // Give callers a chance to handle this error as they like
                throw error
            }
        }

        // MARK: - Helpers

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

        private func os_log(_ message: String) {
            loggedMessages.append(message)
        }
    }
}

// MARK: - PrivateDatabaseTests.swift

// class Tests: XCTestCase {
@Suite("Apple's Private Database sample (sample-cloudkit-privatedb), ported")
@MainActor struct PrivateDatabaseSampleTests {

    // override func setUpWithError() throws { self.executionTimeAllowance = 10 }
    // (The time allowance is left out: the tests assert outcomes, not timing.)

    // func test_CloudKitReadiness() async throws {
    @Test("test_CloudKitReadiness: the private database answers its zones", arguments: TestEngine.all)
    func cloudKitReadiness(engine: TestEngine) async throws {
        try await withStore(on: engine) { location, store in
            // Fetch zones from the Private Database of the CKContainer for the current user to test for valid/ready state
            // let container = CKContainer(identifier: Config.containerIdentifier)
            let container = try Container(identifier: PrivateDatabaseSample.Config.containerIdentifier, store: location, userName: "alice")
            let database = container.privateCloudDatabase

            var zones: [RecordZone] = []
            do {
                // try await database.allRecordZones()
                zones = try await database.allRecordZones()
            // } catch let error as CKError {
            } catch let error as StratusError {
                switch error.code {
                case .badContainer, .badDatabase:
                    Issue.record("Create or select a CloudKit container in this app target's Signing & Capabilities in Xcode")

                case .permissionFailure, .notAuthenticated:
                    Issue.record("Simulator or device running this app needs a signed-in iCloud account")

                default:
                    break
                }
            }
            #expect(zones.map { zone in zone.zoneID } == [RecordZone.ID.default])
        }
    }

    // func testWriteToAndReadFromCloudKit() async throws {
    @Test("testWriteToAndReadFromCloudKit: a random name saved as the last person is read back, then deleted", arguments: TestEngine.all)
    func writeToAndReadFromCloudKit(engine: TestEngine) async throws {
        try await withStore(on: engine) { location, store in
            // let viewModel = ViewModel(isTesting: true)
            let viewModel = PrivateDatabaseSample.ViewModel(isTesting: true, storeLocation: location, userName: "alice")

            // Write a Person record to CloudKit with a random name, and read it back
            let randomName = UUID().uuidString

            try await viewModel.saveRecord(name: randomName)
            try await viewModel.refreshLastPerson()

            let lastPerson = viewModel.lastPerson

            #expect(randomName == lastPerson,
                    "Attempted write value to CloudKit doesn't match attempted read value from CloudKit")

            try await viewModel.deleteLastPerson()

            // What the sample logged, and the record gone from the store.
            #expect(viewModel.loggedMessages.contains("Record with ID lastPersonTest was saved."))
            #expect(viewModel.loggedMessages.contains("Record with ID lastPersonTest was fetched."))
            // (`contains`, not `last`: the refresh the initializer starts may finish at any point.)
            #expect(viewModel.loggedMessages.contains("Record with ID lastPersonTest was deleted."))
            let container = try Container(identifier: PrivateDatabaseSample.Config.containerIdentifier, store: location, userName: "alice")
            await #expect(throws: StratusError.self) {
                _ = try await container.privateCloudDatabase.record(for: Record.ID(recordName: "lastPersonTest"))
            }
        }
    }
}

// The view model's other paths, which the sample's app runs and its tests do not.
extension PrivateDatabaseSampleTests {

    @Test("the .allKeys save overwrites the last person whatever the stored change tag, and a relaunch reads it", arguments: TestEngine.all)
    func saveOverwritesAndRelaunchReads(engine: TestEngine) async throws {
        try await withStore(on: engine) { location, store in
            let first = PrivateDatabaseSample.ViewModel(storeLocation: location, userName: "alice")
            // The refresh the initializer starts could read "Ann" and set it after the refresh
            // that follows saving "Bob". It logs when it ends ("Record not found", as nothing is
            // saved yet), and nothing else logs before the first save: wait for that.
            let initialFetch = ContinuousClock.now + .seconds(1_800)
            while first.loggedMessages.isEmpty && ContinuousClock.now < initialFetch {
                try await Task.sleep(for: .milliseconds(10))
            }
            try #require(!first.loggedMessages.isEmpty, "the initializer's refresh did not end")
            try await first.saveRecord(name: "Ann")
            // A new record object with the same ID and no change tag: `.allKeys` overwrites the stored one.
            try await first.saveRecord(name: "Bob")
            #expect(first.lastPerson == "Bob")

            let relaunched = PrivateDatabaseSample.ViewModel(storeLocation: location, userName: "alice")
            try await relaunched.refreshLastPerson()
            #expect(relaunched.lastPerson == "Bob")
        }
    }

    @Test("the private database is the user's own: another user's view model finds no last person and reports unknownItem", arguments: TestEngine.all)
    func anotherUsersPrivateDatabase(engine: TestEngine) async throws {
        try await withStore(on: engine) { location, store in
            let alice = PrivateDatabaseSample.ViewModel(storeLocation: location, userName: "alice")
            try await alice.saveRecord(name: "Ann")

            let bob = PrivateDatabaseSample.ViewModel(storeLocation: location, userName: "bob")
            await #expect {
                try await bob.refreshLastPerson()
            } throws: { error in
                (error as? StratusError)?.code == .unknownItem
            }
            #expect(bob.lastPerson == "")
            #expect(bob.loggedMessages.contains("CKError: Record not found."))
            #expect(!bob.loggedMessages.contains { message in message.hasSuffix("was fetched.") })
        }
    }
}
