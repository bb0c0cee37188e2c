import Foundation
import Stratus
import StratusSQLite
import StratusStores
import StratusTestSupport
import Testing

// Apple's Sharing sample (github.com/apple/sample-cloudkit-sharing), which shares single records:
// ViewModels/ViewModel.swift and the steps of SharingTests/SharingTests.swift, ported with the
// README's substitutions (`import CloudKit` → `import Stratus`, the `CK` prefix dropped). Where a
// line had to change, the CloudKit line is quoted above it. `fetchOrCreateShare(contact:)` is the
// sample's: `CKShare(rootRecord:)`, a title through `CKShare.SystemFieldKey.title`, the root and
// its share saved in one `modifyRecords(saving: [root, share], deleting: [])`, and an existing
// share found again through the fetched record's `share`. As in ZoneSharingSampleTests.swift:
// Combine's `ObservableObject` and `@Published` are dropped, the container's store file is the
// test's own; `UserDefaults.standard`, which would keep "isZoneCreated" between tests (and leave a
// file behind), is the view model's own dictionary. The sample's test is an older, completion-
// handler version of the same steps; they run here with the view model's async calls.

enum SharingSample {

    // MARK: - Config.swift

    enum Config {
        /// iCloud container identifier.
        static let containerIdentifier = "iCloud.com.apple.samples.cloudkit.sharing"
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

    @MainActor
    // final class ViewModel: ObservableObject {
    final class ViewModel {

        // MARK: - Error

        enum ViewModelError: Error {
            case invalidRemoteShare
        }

        // MARK: - State

        enum State {
            case loading
            case loaded(private: [Contact], shared: [Contact])
            case error(Error)
        }

        // MARK: - Properties

        /// State directly observable by our view.
        // @Published private(set) var state: State = .loading
        private(set) var state: State = .loading
        /// Use the specified iCloud container ID, which should also be present in the entitlements file.
        // lazy var container = CKContainer(identifier: Config.containerIdentifier)
        lazy var container = try! Container(identifier: Config.containerIdentifier, store: storeLocation, userName: userName)
        /// This project uses the user's private database.
        private lazy var database = container.privateCloudDatabase
        /// Sharing requires using a custom record zone.
        // let recordZone = CKRecordZone(zoneName: "Contacts")
        let recordZone = RecordZone(zoneName: "Contacts")

        // Where the port's container lives, and its stand-in for UserDefaults.standard.
        nonisolated let storeLocation: String
        nonisolated let userName: String
        private var userDefaults: [String: Bool] = [:]

        // MARK: - Init

        // nonisolated init() {}
        nonisolated init(storeLocation: String, userName: String) {
            self.storeLocation = storeLocation
            self.userName = userName
        }

        // MARK: - API

        /// Prepares container by creating custom zone if needed.
        func initialize() async throws {
            do {
                try await createZoneIfNeeded()
            } catch {
                state = .error(error)
            }
        }

        /// Fetches contacts from the remote databases and updates local state.
        func refresh() async throws {
            state = .loading
            do {
                let (privateContacts, sharedContacts) = try await fetchPrivateAndSharedContacts()
                state = .loaded(private: privateContacts, shared: sharedContacts)
            } catch {
                state = .error(error)
            }
        }

        /// Fetches both private and shared contacts in parallel.
        /// - Returns: A tuple containing separated private and shared contacts.
        func fetchPrivateAndSharedContacts() async throws -> (private: [Contact], shared: [Contact]) {
            // This will run each of these operations in parallel.
            async let privateContacts = fetchContacts(scope: .private, in: [recordZone])
            async let sharedContacts = fetchSharedContacts()

            return (private: try await privateContacts, shared: try await sharedContacts)
        }

        /// Adds a new Contact to the database.
        /// - Parameters:
        ///   - name: Name of the Contact.
        ///   - phoneNumber: Phone number of the contact.
        func addContact(name: String, phoneNumber: String) async throws {
            // let id = CKRecord.ID(zoneID: recordZone.zoneID)
            // let contactRecord = CKRecord(recordType: "SharedContact", recordID: id)
            let id = Record.ID(zoneID: recordZone.zoneID)
            let contactRecord = Record(recordType: "SharedContact", recordID: id)
            contactRecord["name"] = name
            contactRecord["phoneNumber"] = phoneNumber

            do {
                try await database.save(contactRecord)
            } catch {
                debugPrint("ERROR: Failed to save new Contact: \(error)")
                throw error
            }
        }

        /// Fetches an existing `CKShare` on a Contact record, or creates a new one in preparation to share a Contact with another user.
        /// - Parameters:
        ///   - contact: Contact to share.
        ///   - completionHandler: Handler to process a `success` or `failure` result.
        // func fetchOrCreateShare(contact: Contact) async throws -> (CKShare, CKContainer) {
        func fetchOrCreateShare(contact: Contact) async throws -> (Share, Container) {
            guard let existingShare = contact.associatedRecord.share else {
                // let share = CKShare(rootRecord: contact.associatedRecord)
                // share[CKShare.SystemFieldKey.title] = "Contact: \(contact.name)"
                let share = Share(rootRecord: contact.associatedRecord)
                share[Share.SystemFieldKey.title] = "Contact: \(contact.name)"
                _ = try await database.modifyRecords(saving: [contact.associatedRecord, share], deleting: [])
                return (share, container)
            }

            // guard let share = try await database.record(for: existingShare.recordID) as? CKShare else {
            guard let share = try await database.record(for: existingShare.recordID) as? Share else {
                throw ViewModelError.invalidRemoteShare
            }

            return (share, container)
        }

        // MARK: - Private

        /// Fetches contacts for a given set of zones in a given database scope.
        /// - Parameters:
        ///   - scope: Database scope to fetch from.
        ///   - zones: Record zones to fetch contacts from.
        /// - Returns: Combined set of contacts across all given zones.
        private func fetchContacts(
            // scope: CKDatabase.Scope,
            // in zones: [CKRecordZone]
            scope: Database.Scope,
            in zones: [RecordZone]
        ) async throws -> [Contact] {
            let database = container.database(with: scope)
            var allContacts: [Contact] = []

            // Inner function retrieving and converting all Contact records for a single zone.
            // @Sendable func contactsInZone(_ zone: CKRecordZone) async throws -> [Contact] {
            @Sendable func contactsInZone(_ zone: RecordZone) async throws -> [Contact] {
                var allContacts: [Contact] = []

                /// `recordZoneChanges` can return multiple consecutive changesets before completing, so
                /// we use a loop to process multiple results if needed, indicated by the `moreComing` flag.
                var awaitingChanges = true
                /// After each loop, if more changes are coming, they are retrieved by using the `changeToken` property.
                // var nextChangeToken: CKServerChangeToken? = nil
                var nextChangeToken: ServerChangeToken? = nil

                while awaitingChanges {
                    let zoneChanges = try await database.recordZoneChanges(inZoneWith: zone.zoneID, since: nextChangeToken)
                    let contacts = zoneChanges.modificationResultsByID.values
                        .compactMap { try? $0.get().record }
                        .compactMap { Contact(record: $0) }
                    allContacts.append(contentsOf: contacts)

                    awaitingChanges = zoneChanges.moreComing
                    nextChangeToken = zoneChanges.changeToken
                }

                return allContacts
            }

            // Using this task group, fetch each zone's contacts in parallel.
            try await withThrowingTaskGroup(of: [Contact].self) { group in
                for zone in zones {
                    group.addTask {
                        try await contactsInZone(zone)
                    }
                }

                // As each result comes back, append it to a combined array to finally return.
                for try await contactsResult in group {
                    allContacts.append(contentsOf: contactsResult)
                }
            }

            return allContacts
        }

        /// Fetches all shared Contacts from all available record zones.
        private func fetchSharedContacts() async throws -> [Contact] {
            let sharedZones = try await container.sharedCloudDatabase.allRecordZones()
            guard !sharedZones.isEmpty else {
                return []
            }

            return try await fetchContacts(scope: .shared, in: sharedZones)
        }

        /// Creates the custom zone in use if needed.
        private func createZoneIfNeeded() async throws {
            // Avoid the operation if this has already been done.
            // guard !UserDefaults.standard.bool(forKey: "isZoneCreated") else {
            guard !(userDefaults["isZoneCreated"] ?? false) else {
                return
            }

            do {
                _ = try await database.modifyRecordZones(saving: [recordZone], deleting: [])
            } catch {
                print("ERROR: Failed to create custom zone: \(error.localizedDescription)")
                throw error
            }

            // UserDefaults.standard.setValue(true, forKey: "isZoneCreated")
            userDefaults["isZoneCreated"] = true
        }
    }
}

// MARK: - Contact.swift (the extension)

extension SharingSample.Contact {
    /// Initializes a `Contact` object from a CloudKit record.
    /// - Parameter record: CloudKit record to pull values from.
    // init?(record: CKRecord) {
    init?(record: Record) {
        guard let name = record["name"] as? String,
              let phoneNumber = record["phoneNumber"] as? String else {
            return nil
        }

        self.id = record.recordID.recordName
        self.name = name
        self.phoneNumber = phoneNumber
        self.associatedRecord = record
    }
}

@Suite("Apple's Sharing sample (sample-cloudkit-sharing): a contact shared with CKShare(rootRecord:), ported")
@MainActor struct SharingSampleTests {

    /// The sample's testCreatingShare, then its tear-down: a deletion of the contact and its
    /// share whose per-record block must report both IDs, in order.
    @Test("testCreatingShare: the contact and its share are saved together, the fetched contact names its share, and tear-down deletes both", arguments: TestEngine.all)
    func creatingShare(engine: TestEngine) async throws {
        try await withStore(on: engine) { location, store in
            let viewModel = SharingSample.ViewModel(storeLocation: location, userName: "alice")
            // override func setUp() { … viewModel.initialize { … } }
            try await viewModel.initialize()
            // var idsToDelete: [CKRecord.ID] = []
            var idsToDelete: [Record.ID] = []
            let testContactName = "Test\(UUID().uuidString)"

            // createTestContact { self.fetchPrivateContacts { contacts in … } }
            try await viewModel.addContact(name: testContactName, phoneNumber: "555-123-4567")
            let contacts = try await viewModel.fetchPrivateAndSharedContacts().private
            guard let testContact = contacts.first(where: { $0.name == testContactName }) else {
                Issue.record("No matching test Contact found after fetching private contacts")
                return
            }

            idsToDelete.append(testContact.associatedRecord.recordID)

            // self.viewModel.createShare(contact: testContact) { result in … }
            let (share, _) = try await viewModel.fetchOrCreateShare(contact: testContact)
            idsToDelete.append(share.recordID)

            // Beyond the sample's test: the contact fetched again names its share, which the
            // sample's second call fetches as a share, with its title and a URL to send.
            let refetched = try #require(try await viewModel.fetchPrivateAndSharedContacts().private.first { $0.name == testContactName })
            #expect(refetched.associatedRecord.share?.recordID == share.recordID)
            let (existing, _) = try await viewModel.fetchOrCreateShare(contact: refetched)
            #expect(existing.recordID == share.recordID)
            #expect(existing[Share.SystemFieldKey.title] as? String == "Contact: \(testContactName)")
            #expect(existing.url != nil && existing.publicPermission == .none && existing.owner.role == .owner)

            // override func tearDownWithError() throws { … }
            let container = try Container(identifier: SharingSample.Config.containerIdentifier, store: location, userName: "alice")
            let database = container.privateCloudDatabase
            // let deleteOperation = CKModifyRecordsOperation(recordsToSave: nil, recordIDsToDelete: idsToDelete)
            let deleteOperation = ModifyRecordsOperation(recordsToSave: nil, recordIDsToDelete: idsToDelete)
            let deletedIDs = Box<[Record.ID]>([])
            // Track each deletion to ensure all target records are successfully deleted.
            deleteOperation.perRecordDeleteBlock = { id, result in
                guard case .success = result else {
                    return
                }

                deletedIDs.update { $0.append(id) }
            }
            await run(deleteOperation, on: database)
            #expect(deletedIDs.value == idsToDelete, "Deleted IDs in tear down did not match idsToDelete.")
            let left = try await viewModel.fetchPrivateAndSharedContacts().private
            #expect(!left.contains { $0.name == testContactName })
        }
    }
}
