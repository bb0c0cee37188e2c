import Foundation
import Stratus
import StratusSQLite
import StratusStores
import StratusTestSupport
import Testing

// Apple's Encryption sample as it is today (github.com/apple/sample-cloudkit-encryption, the
// async release): its `@MainActor` ViewModel and the async EncryptionTests, ported as
// EncryptionSampleTests.swift ports the completion-handler release (see there for what changes
// beyond the renames and why). Contact.swift is the same in both releases:
// `EncryptionSample.Contact`. Where a line had to change, the CloudKit line is quoted above it.

enum EncryptionAsyncSample {

    typealias Config = EncryptionSample.Config
    typealias Contact = EncryptionSample.Contact

    // MARK: - ViewModel.swift

    @MainActor
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

        // Where the port's container lives, and the port's `UserDefaults.standard`.
        nonisolated let storeLocation: String
        nonisolated let userName: String
        nonisolated(unsafe) let userDefaults: UserDefaults
        private(set) var loggedMessages: [String] = []

        // MARK: - API

        // nonisolated init() {}
        nonisolated init(storeLocation: String, userName: String, userDefaults: UserDefaults) {
            self.storeLocation = storeLocation
            self.userName = userName
            self.userDefaults = userDefaults
        }

        /// Initializes the ViewModel, preparing for CloudKit interaction.
        func initialize() async throws {
            state = .loading

            do {
                try await createZoneIfNeeded()
            } catch {
                state = .error(error)
            }
        }

        /// Fetches contacts from the database and updates local state.
        func refresh() async throws {
            state = .loading

            do {
                let contacts = try await fetchContacts()
                state = .loaded(contacts: contacts)
            } catch {
                state = .error(error)
            }
        }

        /// Fetches records from iCloud Database and returns converted Contacts.
        func fetchContacts() async throws -> [Contact] {
            let changes = try await database.recordZoneChanges(inZoneWith: recordZone.zoneID, since: nil)

            /// Map new/changed records to `Contact` objects.
            let contacts = changes.modificationResultsByID.values
                .compactMap { try? $0.get().record }
                .compactMap { Contact(record: $0) }

            return contacts
        }

        /// Adds a new Contact to the database, using `encryptedValues` to encrypt the Contact's phone number.
        /// - Parameters:
        ///   - name: Name of the Contact.
        ///   - phoneNumber: Phone number of the contact which will be stored in an encrypted field.
        /// - Returns: The newly created Contact.
        func addContact(name: String, phoneNumber: String) async throws -> Contact? {
            let record = Record(recordType: "Contact", recordID: Record.ID(zoneID: recordZone.zoneID))
            record["name"] = name
            record.encryptedValues["phoneNumber"] = phoneNumber

            do {
                let savedRecord = try await database.save(record)
                return Contact(record: savedRecord)
            } catch {
                handleError(error)
                throw error
            }
        }

        /// Deletes a given list of Contacts from the database.
        /// - Parameters:
        ///   - contacts: Contacts to delete.
        func deleteContacts(_ contacts: [Contact]) async throws {
            let recordIDs = contacts.map { $0.associatedRecord.recordID }
            guard !recordIDs.isEmpty else {
                debugPrint("Attempted to delete empty array of Contacts. Skipping.")
                return
            }

            do {
                _ = try await database.modifyRecords(saving: [], deleting: recordIDs)
            } catch {
                handleError(error)
            }
        }

        /// Creates the custom zone in use if needed.
        private func createZoneIfNeeded() async throws {
            // Avoid the operation if this has already been done.
            // guard !UserDefaults.standard.bool(forKey: "isZoneCreated") else {
            guard !userDefaults.bool(forKey: "isZoneCreated") else {
                return
            }

            do {
                _ = try await database.modifyRecordZones(saving: [recordZone], deleting: [])
            } catch {
                print("ERROR: Failed to create custom zone: \(error.localizedDescription)")
                throw error
            }

            // UserDefaults.standard.setValue(true, forKey: "isZoneCreated")
            // (key-value coding, which Foundation on Linux lacks: `set(_:forKey:)` stores the same flag)
            userDefaults.set(true, forKey: "isZoneCreated")
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

        private func os_log(_ message: String) {
            loggedMessages.append(message)
        }
    }
}

// MARK: - EncryptionTests.swift

/// Runs `body` with the sample's view model on a fresh store and a defaults domain of its own,
/// initialized before (`setUp`) and its test contacts deleted after (`tearDown`); `afterTearDown`
/// runs while the store is still there.
@MainActor func withEncryptionAsyncViewModel(on engine: TestEngine, _ body: @MainActor (EncryptionAsyncSample.ViewModel, inout [EncryptionAsyncSample.Contact]) async throws -> Void,
                                             afterTearDown: @MainActor (EncryptionAsyncSample.ViewModel) async throws -> Void = { _ in }) async throws {
    try await withStore(on: engine) { location, store in
        let suite = "stratus-encryption-async-sample-\(UUID().uuidString)"
        let defaults = try #require(UserDefaults(suiteName: suite))
        defer { defaults.removePersistentDomain(forName: suite) }
        // let viewModel = ViewModel()
        let viewModel = EncryptionAsyncSample.ViewModel(storeLocation: location, userName: "alice", userDefaults: defaults)
        var contactsToDelete: [EncryptionAsyncSample.Contact] = []

        // override func setUp() {
        //     Task { try await viewModel.initialize(); expectation.fulfill() }
        try await viewModel.initialize()

        try await body(viewModel, &contactsToDelete)

        // override func tearDown() {
        //     guard !contactsToDelete.isEmpty else { return }
        //     Task { try await viewModel.deleteContacts(contactsToDelete); deleteExpectation.fulfill() }
        if !contactsToDelete.isEmpty {
            try await viewModel.deleteContacts(contactsToDelete)
        }
        try await afterTearDown(viewModel)
    }
}

// class EncryptionTests: XCTestCase {
@Suite("Apple's Encryption sample, async release (sample-cloudkit-encryption), ported")
@MainActor struct EncryptionAsyncSampleTests {

    // func test_CloudKitReadiness() async throws {
    @Test("test_CloudKitReadiness: the private database answers its zones, EncryptedContacts among them", arguments: TestEngine.all)
    func cloudKitReadiness(engine: TestEngine) async throws {
        try await withEncryptionAsyncViewModel(on: engine) { viewModel, _ in
            // Fetch zones from the Private Database of the CKContainer for the current user to test for valid/ready state
            // let container = CKContainer(identifier: Config.containerIdentifier)
            let container = try Container(identifier: EncryptionAsyncSample.Config.containerIdentifier, store: viewModel.storeLocation, userName: viewModel.userName)
            let database = container.privateCloudDatabase

            var zoneNames: Set<String> = []
            do {
                // _ = try await database.allRecordZones()
                zoneNames = Set(try await database.allRecordZones().map { zone in zone.zoneID.zoneName })
            // } catch let error as CKError {
            } catch let error as StratusError {
                switch error.code {
                case .badContainer, .badDatabase:
                    Issue.record("Create or select a CloudKit container in this app target's Signing & Capabilities in Xcode")

                case .permissionFailure, .notAuthenticated:
                    Issue.record("Simulator or device running this app needs a signed-in iCloud account")

                default:
                    Issue.record("CKError: \(error)")
                }
            }
            #expect(zoneNames == [RecordZone.ID.defaultZoneName, "EncryptedContacts"])
        }
    }

    // func testCreatingAndFetchingContact() async throws {
    @Test("testCreatingAndFetchingContact: a contact with an encrypted phone number is fetched back, and tear-down deletes it", arguments: TestEngine.all)
    func creatingAndFetchingContact(engine: TestEngine) async throws {
        try await withEncryptionAsyncViewModel(on: engine) { viewModel, contactsToDelete in
            do {
                let contact = try await viewModel.addContact(name: "TestContact-\(UUID().uuidString)", phoneNumber: "555-123-4567")

                guard let contact = contact else {
                    Issue.record("Contact returned from addContact was nil.")
                    return
                }

                contactsToDelete.append(contact)

                let contacts = try await viewModel.fetchContacts()
                guard let foundContact = contacts.first(where: { found in found.id == contact.id }) else {
                    Issue.record("Created contact not found in subsequent fetch.")
                    return
                }

                #expect(foundContact.phoneNumber == contact.phoneNumber,
                        "Fetched Contact number does not match created Contact number.")
                #expect(foundContact.phoneNumber == "555-123-4567")
            } catch {
                Issue.record("Failed to create new contact: \(error)")
            }
        } afterTearDown: { viewModel in
            let left = try await viewModel.fetchContacts()
            #expect(left.isEmpty, "tear-down deleted the test's contact")
            #expect(viewModel.loggedMessages.isEmpty)
        }
    }
}

// The view model's other paths, which the sample's app runs and its tests do not.
extension EncryptionAsyncSampleTests {

    @Test("refresh loads the contacts into state; after the zone is deleted behind it, refresh puts zoneNotFound in state", arguments: TestEngine.all)
    func refreshState(engine: TestEngine) async throws {
        try await withEncryptionAsyncViewModel(on: engine) { viewModel, contactsToDelete in
            for (name, phone) in [("Ann", "555-0001"), ("Bob", "555-0002")] {
                if let contact = try await viewModel.addContact(name: name, phoneNumber: phone) {
                    contactsToDelete.append(contact)
                }
            }
            try await viewModel.refresh()
            guard case .loaded(let contacts) = viewModel.state else {
                Issue.record("state after refresh: \(viewModel.state)")
                return
            }
            #expect(contacts.map { contact in "\(contact.name) \(contact.phoneNumber)" }.sorted() == ["Ann 555-0001", "Bob 555-0002"])

            let container = try Container(identifier: EncryptionAsyncSample.Config.containerIdentifier, store: viewModel.storeLocation, userName: viewModel.userName)
            try await container.privateCloudDatabase.deleteRecordZone(withID: viewModel.recordZone.zoneID)
            try await viewModel.refresh()
            guard case .error(let error) = viewModel.state else {
                Issue.record("state after refresh in a deleted zone: \(viewModel.state)")
                return
            }
            #expect((error as? StratusError)?.code == .zoneNotFound)
            // A zone deleted by the app, not by a keychain reset: no "Encryption key has been reset" report.
            #expect((error as? StratusError)?.userInfo[ErrorUserDidResetEncryptedDataKey] == nil)
            contactsToDelete = []
        }
    }

    @Test("a contact added after the zone is deleted behind the view model fails with zoneNotFound, and handleError reports no key reset", arguments: TestEngine.all)
    func addInDeletedZone(engine: TestEngine) async throws {
        try await withEncryptionAsyncViewModel(on: engine) { viewModel, _ in
            let container = try Container(identifier: EncryptionAsyncSample.Config.containerIdentifier, store: viewModel.storeLocation, userName: viewModel.userName)
            try await container.privateCloudDatabase.deleteRecordZone(withID: viewModel.recordZone.zoneID)
            await #expect {
                _ = try await viewModel.addContact(name: "Ann", phoneNumber: "555-0001")
            } throws: { error in
                (error as? StratusError)?.code == .zoneNotFound
            }
            #expect(viewModel.loggedMessages.isEmpty)
        }
    }
}
