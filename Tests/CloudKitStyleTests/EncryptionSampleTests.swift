import Foundation
import Stratus
import StratusSQLite
import StratusStores
import StratusTestSupport
import Testing

// Apple's Encryption sample (github.com/apple/sample-cloudkit-encryption, the completion-handler
// release that its EncryptionTests test): Encryption/Config.swift, Models/Contact.swift,
// ViewModels/ViewModel.swift and EncryptionTests/EncryptionTests.swift, ported with the README's
// substitutions (`import CloudKit` → `import Stratus`, the `CK` prefix dropped, `CKError` →
// `StratusError`, `CKErrorUserDidResetEncryptedDataKey` → `ErrorUserDidResetEncryptedDataKey`).
// Where a line had to change, the CloudKit line is quoted above it. Beyond the renames, as in
// QueriesSampleTests.swift: the sample's files sit in `enum EncryptionSample` (this module has
// other `Contact`s and `Config`s); Combine's `ObservableObject` and `@Published` are dropped (no
// Combine on Linux); `os_log` is the view model's own and keeps its messages; the container's
// store file and the `UserDefaults.standard` domain are the test's own; XCTest's set-up,
// tear-down and expectations become a test case object and `awaitCallback`.
//
// What the sample shows: `record.encryptedValues["phoneNumber"]` is written on save and read
// back on fetch. Stratus keeps such a value apart from the plain fields, as CloudKit does
// (`record["phoneNumber"]` does not read it), and, as CloudKit's public database, Stratus's holds
// no encrypted values.

enum EncryptionSample {

    // MARK: - Config.swift

    enum Config {
        /// iCloud container identifier.
        /// Update this if you wish to use your own iCloud container.
        static let containerIdentifier = "iCloud.com.apple.samples.cloudkit.encryption"
    }

    // MARK: - Contact.swift

    struct Contact: Identifiable {
        let id: String
        let name: String
        let phoneNumber: String
        // let associatedRecord: CKRecord
        let associatedRecord: Record
    }

    // MARK: - ViewModel.swift

    // final class ViewModel: ObservableObject {
    final class ViewModel {

        // MARK: - State

        enum State {
            case idle
            case loading
            case loaded(contacts: [Contact])
            case error(Error)
        }

        // MARK: - Properties

        /// State directly observable by our view.
        // @Published private(set) var state = State.idle
        private(set) var state = State.idle
        /// Use the specified iCloud container ID, which should also be present in the entitlements file.
        // private lazy var container = CKContainer(identifier: Config.containerIdentifier)
        private lazy var container = try! Container(identifier: Config.containerIdentifier, store: storeLocation, userName: userName)
        /// This project uses the user's private database.
        private lazy var database = container.privateCloudDatabase
        /// This project uses custom record zone.
        let recordZone = RecordZone(zoneName: "EncryptedContacts")

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

        /// Creates custom zone if needed and performs initial fetch afterwards.
        func initializeAndRefresh(completionHandler: ((Result<Void, Error>) -> Void)? = nil) {
            createZoneIfNeeded { [weak self] result in
                DispatchQueue.main.async {
                    switch result {
                    case .failure(let error):
                        self?.state = .error(error)
                        completionHandler?(.failure(error))

                    case .success:
                        self?.refresh()
                        completionHandler?(.success(()))
                    }
                }
            }
        }

        /// Fetches contacts from the database and updates local state.
        func refresh() {
            DispatchQueue.main.async {
                self.state = .loading
            }

            fetchContacts { [weak self] result in
                switch result {
                case .success(let contacts):
                    self?.state = .loaded(contacts: contacts)
                case .failure(let error):
                    self?.state = .error(error)
                }
            }
        }

        /// Fetch contacts from iCloud database.
        /// - Parameter completionHandler: Handler to process Contact results or error.
        func fetchContacts(completionHandler: @escaping (Result<[Contact], Error>) -> Void) {
            let operation = FetchRecordZoneChangesOperation(recordZoneIDs: [recordZone.zoneID],
                                                            configurationsByRecordZoneID: [:])
            var contacts: [Contact] = []

            /// For each contact received from the operation, convert it to a `Contact` object and add it to an accumulating list.
            operation.recordWasChangedBlock = { _, result in
                if let record = try? result.get(), let contact = Contact(record: record) {
                    contacts.append(contact)
                }
            }

            operation.fetchRecordZoneChangesResultBlock = { [weak self] result in
                DispatchQueue.main.async {
                    switch result {
                    case .failure(let error):
                        self?.handleError(error)
                        completionHandler(.failure(error))

                    case .success:
                        completionHandler(.success(contacts))
                    }
                }
            }

            database.add(operation)
        }

        /// Adds a new Contact to the database, using `encryptedValues` to encrypt the Contact's phone number.
        /// - Parameters:
        ///   - name: Name of the Contact.
        ///   - phoneNumber: Phone number of the contact which will be stored in an encrypted field.
        ///   - completionHandler: Handler to process success or failure of the operation.
        func addContact(
            name: String,
            phoneNumber: String,
            completionHandler: @escaping (Result<Contact?, Error>) -> Void
        ) {
            let record = Record(recordType: "Contact", recordID: Record.ID(zoneID: recordZone.zoneID))
            record["name"] = name
            record.encryptedValues["phoneNumber"] = phoneNumber

            let saveOperation = ModifyRecordsOperation(recordsToSave: [record])
            saveOperation.savePolicy = .allKeys

            saveOperation.modifyRecordsResultBlock = { [weak self] result in
                DispatchQueue.main.async {
                    switch result {
                    case .failure(let error):
                        self?.handleError(error)
                        completionHandler(.failure(error))

                    case .success:
                        let contact = Contact(record: record)
                        completionHandler(.success(contact))
                    }
                }
            }

            database.add(saveOperation)
        }

        /// Deletes a given list of Contacts from the database.
        /// - Parameters:
        ///   - contacts: Contacts to delete.
        ///   - completionHandler: Handler to process success or failure of the operation.
        func deleteContacts(_ contacts: [Contact], completionHandler: @escaping (Result<Void, Error>) -> Void) {
            let recordIDs = contacts.map { $0.associatedRecord.recordID }
            guard !recordIDs.isEmpty else {
                debugPrint("Attempted to delete empty array of Contacts. Skipping.")
                return
            }

            let deleteOperation = ModifyRecordsOperation(recordIDsToDelete: recordIDs)

            deleteOperation.modifyRecordsResultBlock = { [weak self] result in
                DispatchQueue.main.async {
                    if case .failure(let error) = result {
                        self?.handleError(error)
                    }

                    completionHandler(result)
                }
            }

            database.add(deleteOperation)
        }

        /// Creates the custom zone in use if needed.
        /// - Parameter completionHandler: An optional completion handler to track operation success or failure.
        private func createZoneIfNeeded(completionHandler: ((Result<Void, Error>) -> Void)? = nil) {
            // Avoid the operation if this has already been done.
            // guard !UserDefaults.standard.bool(forKey: "isZoneCreated") else {
            guard !userDefaults.bool(forKey: "isZoneCreated") else {
                completionHandler?(.success(()))
                return
            }

            let createZoneOperation = ModifyRecordZonesOperation(recordZonesToSave: [recordZone])
            createZoneOperation.modifyRecordZonesResultBlock = { result in
                DispatchQueue.main.async {
                    switch result {
                    case .failure(let error):
                        debugPrint("Error: Failed to create custom zone: \(error)")

                    case .success:
                        // UserDefaults.standard.setValue(true, forKey: "isZoneCreated")
                        // (`setValue(_:forKey:)` is key-value coding, which Foundation on Linux
                        // does not have: `set(_:forKey:)` stores the same flag.)
                        self.userDefaults.set(true, forKey: "isZoneCreated")
                    }

                    completionHandler?(result)
                }
            }

            database.add(createZoneOperation)
        }

        private func handleError(_ error: Error) {
            // guard let ckerror = error as? CKError else {
            guard let ckerror = error as? StratusError else {
                os_log("Not a CKError: \(error.localizedDescription)")
                return
            }

            switch ckerror.code {
            case .zoneNotFound:
                // if ckerror.userInfo[CKErrorUserDidResetEncryptedDataKey] != nil {
                if ckerror.userInfo[ErrorUserDidResetEncryptedDataKey] != nil {
                    // CloudKit is unable to decrypt previously encrypted data. This occurs when a user
                    // resets their iCloud Keychain and thus deletes the key material previously used
                    // to encrypt and decrypt their encrypted fields stored via CloudKit.
                    // In this case, it is recommended to delete the associated zone and re-upload any
                    // locally cached data, which will be encrypted with the new key.
                    os_log("Encryption key has been reset by user.")
                }

            case .partialFailure:
                // Iterate through error(s) in partial failure and report each one.
                // let dict = ckerror.userInfo[CKPartialErrorsByItemIDKey] as? [NSObject: CKError]
                let dict = ckerror.userInfo[PartialErrorsByItemIDKey] as? [NSObject: StratusError]
                if let errorDictionary = dict {
                    for (_, error) in errorDictionary {
                        os_log("An error occurred: \(error.localizedDescription)")
                    }
                }

            default:
                os_log("CKError: Code \(ckerror.code.rawValue): \(ckerror.localizedDescription)")
            }
        }

        // MARK: - The port's os_log

        /// Keeps what the sample logs; handleError runs on the main queue here, the lock keeps
        /// a test's reads safe from any thread.
        private func os_log(_ message: String) { log.append(message) }

        var reportedMessages: [String] { log.messages }
    }
}

// MARK: - Contact.swift (the extension)

extension EncryptionSample.Contact {
    /// Initializes a `Contact` object from a CloudKit record.
    /// - Parameter record: CloudKit record to pull values from.
    // init?(record: CKRecord) {
    init?(record: Record) {
        guard let name = record["name"] as? String,
              let phoneNumber = record.encryptedValues["phoneNumber"] as? String else {
            return nil
        }

        self.id = record.recordID.recordName
        self.name = name
        self.phoneNumber = phoneNumber
        self.associatedRecord = record
    }
}

// MARK: - EncryptionTests.swift

/// The sample's `EncryptionTests` (an `XCTestCase`): its view model, the contacts to delete at
/// tear-down, its set-up and tear-down, and its test helper, as the original has them.
// class EncryptionTests: XCTestCase {
final class EncryptionTestCase {

    // MARK: - Properties

    let viewModel: EncryptionSample.ViewModel

    var contactsToDelete: [EncryptionSample.Contact] = []

    init(viewModel: EncryptionSample.ViewModel) {
        self.viewModel = viewModel
    }

    // MARK: - Setup & Tear-down

    // override func setUp() {
    func setUp() async {
        // let expectation = self.expectation(description: "Expect initialization completed")
        let result: Result<Void, Error> = await awaitCallback { expectation in
            viewModel.initializeAndRefresh { result in
                expectation(result)
            }
        }

        if case .failure(let error) = result {
            Issue.record("Initialization failed: \(error)")
        }
    }

    // override func tearDown() {
    func tearDown() async {
        guard !contactsToDelete.isEmpty else {
            return
        }

        // let deleteExpectation = expectation(description: "Expect Contacts created during tests to delete.")
        let result: Result<Void, Error> = await awaitCallback { deleteExpectation in
            viewModel.deleteContacts(contactsToDelete) { result in
                deleteExpectation(result)
            }
        }

        if case .failure(let error) = result {
            Issue.record("Failed to delete contacts after testing: \(error)")
        }
    }

    /// Helper to simply fetch contacts or cause an `XCTFail`
    /// - Parameter completion: Completion handler.
    func fetchContactsOrFail(completion: @escaping ([EncryptionSample.Contact]) -> Void) {
        viewModel.fetchContacts { result in
            switch result {
            case .failure(let error):
                Issue.record("Unable to fetch contacts: \(error)")
                completion([])
            case .success(let contacts):
                completion(contacts)
            }
        }
    }
}

/// Runs `body` with the sample's test case on a fresh store and a defaults domain of its own,
/// set up before and torn down after, as XCTest does around each test; `afterTearDown` runs
/// while the store is still there.
func withEncryptionTestCase(on engine: TestEngine, _ body: (EncryptionTestCase) async throws -> Void,
                            afterTearDown: (EncryptionTestCase) async throws -> Void = { _ in }) async throws {
    try await withStore(on: engine) { location, store in
        let suite = "stratus-encryption-sample-\(UUID().uuidString)"
        let defaults = try #require(UserDefaults(suiteName: suite))
        defer { defaults.removePersistentDomain(forName: suite) }
        let testCase = EncryptionTestCase(viewModel: EncryptionSample.ViewModel(storeLocation: location, userName: "alice", userDefaults: defaults))
        await testCase.setUp()
        try await body(testCase)
        await testCase.tearDown()
        try await afterTearDown(testCase)
    }
}

/// The sample's container opened again on the test's store, as another device of the user's.
func encryptionSampleContainer(of viewModel: EncryptionSample.ViewModel) throws -> Container {
    try Container(identifier: EncryptionSample.Config.containerIdentifier, store: viewModel.storeLocation, userName: viewModel.userName)
}

@Suite("Apple's Encryption sample (sample-cloudkit-encryption), ported")
struct EncryptionSampleTests {

    // MARK: - Tests

    // func test_CloudKitReadiness() throws {
    @Test("test_CloudKitReadiness: the private database answers its zones, the sample's EncryptedContacts zone among them", arguments: TestEngine.all)
    func cloudKitReadiness(engine: TestEngine) async throws {
        try await withEncryptionTestCase(on: engine) { testCase in
            // Fetch zones from the Private Database of the CKContainer for the current user to test for valid/ready state
            // let container = CKContainer(identifier: Config.containerIdentifier)
            let container = try encryptionSampleContainer(of: testCase.viewModel)
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
            #expect(Set(zoneNames) == [RecordZone.ID.defaultZoneName, "EncryptedContacts"])
            #expect(testCase.viewModel.userDefaults.bool(forKey: "isZoneCreated"))
        }
    }

    // func testCreatingAndFetchingContact() {
    @Test("testCreatingAndFetchingContact: a contact saved with an encrypted phone number is fetched back with it", arguments: TestEngine.all)
    func creatingAndFetchingContact(engine: TestEngine) async throws {
        var savedRecordID: Record.ID?
        try await withEncryptionTestCase(on: engine) { testCase in
            let name = "TestContact-\(UUID().uuidString)"
            // let finishExpectation = expectation(description: "Expect add and fetch operations to complete")
            let found: EncryptionSample.Contact? = await awaitCallback { finishExpectation in
                testCase.viewModel.addContact(name: name,
                                              phoneNumber: "555-123-4567") { [weak testCase] result in
                    switch result {
                    case .failure(let error):
                        Issue.record("Failed to create new contact: \(error)")
                        finishExpectation(nil)
                    case .success(let contact):
                        guard let contact = contact else {
                            Issue.record("Contact returned from addContact was nil.")
                            finishExpectation(nil)
                            return
                        }

                        testCase?.contactsToDelete.append(contact)

                        testCase?.fetchContactsOrFail { contacts in
                            guard let foundContact = contacts.first(where: { found in found.id == contact.id }) else {
                                Issue.record("Created contact not found in subsequent fetch.")
                                finishExpectation(nil)
                                return
                            }

                            #expect(foundContact.phoneNumber == contact.phoneNumber,
                                    "Fetched Contact number does not match created Contact number.")
                            finishExpectation(foundContact)
                        }
                    }
                }
            }

            let contact = try #require(found)
            #expect(contact.name == name)
            #expect(contact.phoneNumber == "555-123-4567")
            savedRecordID = contact.associatedRecord.recordID

            // The phone number is an encrypted value, kept apart from the plain fields, in the store too.
            let stored = try await encryptionSampleContainer(of: testCase.viewModel).privateCloudDatabase.record(for: contact.associatedRecord.recordID)
            #expect(stored.encryptedValues["phoneNumber"] as? String == "555-123-4567")
            #expect(stored.encryptedValues.allKeys() == ["phoneNumber"])
            #expect(stored.encryptedKeys == ["phoneNumber"])
            #expect(testCase.viewModel.reportedMessages.isEmpty)
        } afterTearDown: { testCase in
            // tearDown deleted the contact: the zone is there, the record is not.
            let recordID = try #require(savedRecordID)
            let database = try encryptionSampleContainer(of: testCase.viewModel).privateCloudDatabase
            await #expect {
                _ = try await database.record(for: recordID)
            } throws: { error in
                (error as? StratusError)?.code == .unknownItem
            }
        }
    }
}

// The view model's other paths, which the sample's app runs and its tests do not.
extension EncryptionSampleTests {

    @Test("refresh (after initializeAndRefresh) loads every contact; a record without an encrypted phone number is left out", arguments: TestEngine.all)
    func refreshLoadsContacts(engine: TestEngine) async throws {
        try await withEncryptionTestCase(on: engine) { testCase in
            let viewModel = testCase.viewModel
            for (name, phone) in [("Ann", "555-0001"), ("Bob", "555-0002")] {
                let added: Result<EncryptionSample.Contact?, Error> = await awaitCallback { done in
                    viewModel.addContact(name: name, phoneNumber: phone) { result in done(result) }
                }
                if let contact = try added.get() { testCase.contactsToDelete.append(contact) }
            }
            // Other code cannot write the phone number in the clear: the field is encrypted now,
            // and a plain value is refused (as CloudKit refuses a value of another type), the
            // record not stored.
            let database = try encryptionSampleContainer(of: viewModel).privateCloudDatabase
            let plain = Record(recordType: "Contact", recordID: Record.ID(zoneID: viewModel.recordZone.zoneID))
            plain["name"] = "Cy"
            plain["phoneNumber"] = "555-0003"
            await #expect {
                _ = try await database.save(plain)
            } throws: { error in
                (error as? StratusError)?.code == .invalidArguments
            }
            // A contact without a phone number: `Contact(record:)` answers nil, and the fetch leaves it out.
            plain["phoneNumber"] = nil
            _ = try await database.save(plain)

            let fetched: [EncryptionSample.Contact] = await awaitCallback { done in
                testCase.fetchContactsOrFail { contacts in done(contacts) }
            }
            #expect(fetched.map { contact in "\(contact.name) \(contact.phoneNumber)" }.sorted() == ["Ann 555-0001", "Bob 555-0002"])
            #expect(testCase.contactsToDelete.count == 2)
        }
    }

    @Test("deleting contacts whose zone was deleted behind the view model reports each record's error from the partial failure", arguments: TestEngine.all)
    func deleteReportsPartialFailure(engine: TestEngine) async throws {
        try await withEncryptionTestCase(on: engine) { testCase in
            let viewModel = testCase.viewModel
            let added: Result<EncryptionSample.Contact?, Error> = await awaitCallback { done in
                viewModel.addContact(name: "Ann", phoneNumber: "555-0001") { result in done(result) }
            }
            let contact = try #require(try added.get())
            let database = try encryptionSampleContainer(of: viewModel).privateCloudDatabase
            try await database.deleteRecordZone(withID: viewModel.recordZone.zoneID)

            let deleted: Result<Void, Error> = await awaitCallback { done in
                viewModel.deleteContacts([contact]) { result in done(result) }
            }
            guard case .failure(let error) = deleted else {
                Issue.record("a delete in a deleted zone succeeded")
                return
            }
            #expect((error as? StratusError)?.code == .partialFailure)
            // handleError unpacked `userInfo[CKPartialErrorsByItemIDKey] as? [NSObject: CKError]`.
            let messages = viewModel.reportedMessages
            #expect(messages.count == 1)
            #expect(messages.first?.hasPrefix("An error occurred: ") == true)
        }
    }

    @Test("as in CloudKit, the public database holds no encrypted values: the sample's record saved there fails with invalidArguments", arguments: TestEngine.all)
    func publicDatabaseRefusesEncryptedValues(engine: TestEngine) async throws {
        try await withEncryptionTestCase(on: engine) { testCase in
            let record = Record(recordType: "Contact")
            record["name"] = "Ann"
            record.encryptedValues["phoneNumber"] = "555-0001"
            let database = try encryptionSampleContainer(of: testCase.viewModel).publicCloudDatabase
            await #expect {
                _ = try await database.save(record)
            } throws: { error in
                (error as? StratusError)?.code == .invalidArguments
            }
            await #expect(throws: StratusError.self) { _ = try await database.record(for: record.recordID) }
        }
    }
}
