import Foundation
import Stratus
import StratusSQLite
import StratusStores
import StratusTestSupport
import Testing

// Apple's Zone Sharing sample (github.com/apple/sample-cloudkit-zonesharing):
// App/Config.swift, Models/Contact.swift, Models/ContactGroup.swift, ViewModels/ViewModel.swift and
// ZoneSharingTests/ZoneSharingTests.swift, ported with the README's substitutions (`import
// CloudKit` → `import Stratus`, the `CK` prefix dropped, `CKError` → `StratusError`). Where a line
// had to change, the CloudKit line is quoted above it. `fetchOrCreateShare(contactGroup:)` shares
// a group's zone as a whole (`CKShare(recordZoneID:)`, found again through the fetched zone's
// `share`) as the sample writes it; everything else — a zone per group saved before each
// contact, the private database's zones without the default one and the shared database's
// (none: the owner has accepted no share of another user), read with `async let`, each zone's changes read
// in a task group — is the sample's. Beyond the renames, as in QueriesSampleTests.swift: the sample's files sit in
// `enum ZoneSharingSample`; Combine's `ObservableObject` and `@Published` are dropped; the
// container's store file is the test's own.

enum ZoneSharingSample {

    // MARK: - Config.swift

    enum Config {
        /// iCloud container identifier.
        /// Update this if you wish to use your own iCloud container.
        static let containerIdentifier = "iCloud.com.apple.samples.cloudkit.zonesharing"
    }

    // MARK: - Contact.swift

    struct Contact: Identifiable {
        let id: String
        let name: String
        let phoneNumber: String
        // let associatedRecord: CKRecord
        let associatedRecord: Record
    }

    // MARK: - ContactGroup.swift

    struct ContactGroup {
        // let zone: CKRecordZone
        let zone: RecordZone
        let contacts: [Contact]

        var name: String {
            zone.zoneID.zoneName
        }
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
            case loaded(privateGroups: [ContactGroup], sharedGroups: [ContactGroup])
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

        // Where the port's container lives.
        nonisolated let storeLocation: String
        nonisolated let userName: String

        // MARK: - Init

        // nonisolated init() {}
        nonisolated init(storeLocation: String, userName: String) {
            self.storeLocation = storeLocation
            self.userName = userName
        }

        /// Initializer to provide explicit state (e.g. for previews).
        init(state: State) {
            self.storeLocation = ""
            self.userName = ""
            self.state = state
        }

        // MARK: - API

        /// Fetches contacts from the remote databases and updates local state.
        func refresh() async throws {
            state = .loading
            do {
                let (privateContacts, sharedContacts) = try await fetchPrivateAndSharedContacts()
                state = .loaded(privateGroups: privateContacts, sharedGroups: sharedContacts)
            } catch {
                state = .error(error)
            }
        }

        /// Fetches both private and shared contacts in parallel.
        /// - Returns: A tuple containing separated private and shared contacts.
        func fetchPrivateAndSharedContacts() async throws -> (private: [ContactGroup], shared: [ContactGroup]) {
            // Determine zones for each set of contacts.
            // In the Private DB, we want to ignore the default zone.
            let privateZones = try await database.allRecordZones()
                .filter { $0.zoneID != RecordZone.default().zoneID }
            let sharedZones = try await container.sharedCloudDatabase.allRecordZones()

            // This will run each of these operations in parallel.
            async let privateContacts = fetchContacts(scope: .private, in: privateZones)
            async let sharedContacts = fetchContacts(scope: .shared, in: sharedZones)

            return (private: try await privateContacts, shared: try await sharedContacts)
        }

        /// Adds a new Contact to the database.
        /// - Parameters:
        ///   - name: Name of the Contact.
        ///   - phoneNumber: Phone number of the contact.
        ///   - group: Group name the Contact should belong to.
        func addContact(name: String, phoneNumber: String, group: String) async throws {
            do {
                // Ensure zone exists first.
                let zone = RecordZone(zoneName: group)
                try await database.save(zone)

                let id = Record.ID(zoneID: zone.zoneID)
                let contactRecord = Record(recordType: "Contact", recordID: id)
                contactRecord["name"] = name
                contactRecord["phoneNumber"] = phoneNumber

                try await database.save(contactRecord)
            } catch {
                debugPrint("ERROR: Failed to save new Contact: \(error)")
                throw error
            }
        }

        /// Fetches an existing `CKShare` on a group zone, or creates a new one in preparation to share a group of contacts with another user.
        /// - Parameters:
        ///   - contactGroup: Group of Contacts to share.
        ///   - completionHandler: Handler to process a `success` or `failure` result.
        // func fetchOrCreateShare(contactGroup: ContactGroup) async throws -> (CKShare, CKContainer) {
        func fetchOrCreateShare(contactGroup: ContactGroup) async throws -> (Share, Container) {
            guard let existingShare = contactGroup.zone.share else {
                // let share = CKShare(recordZoneID: contactGroup.zone.zoneID)
                // share[CKShare.SystemFieldKey.title] = "Contact Group: \(contactGroup.name)"
                let share = Share(recordZoneID: contactGroup.zone.zoneID)
                share[Share.SystemFieldKey.title] = "Contact Group: \(contactGroup.name)"
                _ = try await database.modifyRecords(saving: [share], deleting: [])
                return (share, container)
            }

            // guard let share = try await database.record(for: existingShare.recordID) as? CKShare else {
            guard let share = try await database.record(for: existingShare.recordID) as? Share else {
                throw ViewModelError.invalidRemoteShare
            }

            return (share, container)
        }

        // MARK: - Private

        /// Fetches grouped contacts for a given set of zones in a given database scope.
        /// - Parameters:
        ///   - scope: Database scope to fetch from.
        ///   - zones: Record zones to fetch contacts from.
        /// - Returns: An array of grouped contacts (a zone/group name and an array of `Contact` objects).
        private func fetchContacts(
            // scope: CKDatabase.Scope,
            // in zones: [CKRecordZone]
            scope: Database.Scope,
            in zones: [RecordZone]
        ) async throws -> [ContactGroup] {
            guard !zones.isEmpty else {
                return []
            }

            let database = container.database(with: scope)
            var allContacts: [ContactGroup] = []

            // Inner function retrieving and converting all Contact records for a single zone.
            @Sendable func contactsInZone(_ zone: RecordZone) async throws -> [Contact] {
                if zone.zoneID == RecordZone.default().zoneID {
                    return []
                }

                var allContacts: [Contact] = []

                /// `recordZoneChanges` can return multiple consecutive changesets before completing, so
                /// we use a loop to process multiple results if needed, indicated by the `moreComing` flag.
                var awaitingChanges = true
                /// After each loop, if more changes are coming, they are retrieved by using the `changeToken` property.
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
            // try await withThrowingTaskGroup(of: (CKRecordZone, [Contact]).self) { group in
            try await withThrowingTaskGroup(of: (RecordZone, [Contact]).self) { group in
                for zone in zones {
                    group.addTask {
                        (zone, try await contactsInZone(zone))
                    }
                }

                // As each result comes back, append it to a combined array to finally return.
                for try await (zone, contactsResult) in group {
                    allContacts.append(ContactGroup(zone: zone, contacts: contactsResult))
                }
            }

            return allContacts
        }
    }
}

// MARK: - Contact.swift and ContactGroup.swift (the extensions)

extension ZoneSharingSample.Contact {
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

extension ZoneSharingSample.ContactGroup: Identifiable {
    var id: String {
        name
    }
}

// MARK: - ZoneSharingTests.swift

/// The sample's `ZoneSharingTests` (an `XCTestCase`): its view model, what to delete at
/// tear-down, its tear-down and its helpers, as the original has them.
// class ZoneSharingTests: XCTestCase {
@MainActor final class ZoneSharingTestCase {

    let viewModel: ZoneSharingSample.ViewModel
    var idsToDelete: [Record.ID] = []
    var zoneIDsToDelete: [RecordZone.ID] = []

    init(viewModel: ZoneSharingSample.ViewModel) {
        self.viewModel = viewModel
    }

    // MARK: - Setup & Tear Down

    // override func tearDownWithError() throws {
    func tearDownWithError() async throws {
        guard !idsToDelete.isEmpty else {
            return
        }

        // let container = CKContainer(identifier: Config.containerIdentifier)
        let container = try Container(identifier: ZoneSharingSample.Config.containerIdentifier, store: viewModel.storeLocation, userName: viewModel.userName)
        let database = container.privateCloudDatabase

        // let deleteExpectation = expectation(description: "Expect CloudKit to delete testing records")
        // Task {
        _ = try await database.modifyRecords(saving: [], deleting: idsToDelete)
        _ = try await database.modifyRecordZones(saving: [], deleting: zoneIDsToDelete)
        idsToDelete = []
        zoneIDsToDelete = []
        // deleteExpectation.fulfill() }
    }

    // MARK: - Helpers

    /// For testing creating a `CKShare`, we need to create a `Contact` with a name we can reference later.
    lazy var testContactName: String = {
        "Test\(UUID().uuidString)"
    }()

    /// We also need a contact group name for our test contact.
    lazy var testContactGroup: String = {
        "Group\(UUID().uuidString)"
    }()

    /// Simple function to create and save a new `Contact` to test with. Immediately fails on any error.
    func createTestContact() async throws {
        try await viewModel.addContact(name: testContactName, phoneNumber: "555-123-4567", group: testContactGroup)
    }

    /// Uses the ViewModel to fetch private contacts. Immediately fails on any error.
    /// - Parameter completion: Handler called on completion.
    func fetchPrivateContacts() async throws -> [ZoneSharingSample.ContactGroup] {
        try await viewModel.fetchPrivateAndSharedContacts().private
    }
}

/// Runs `body` with the sample's test case on a fresh store, torn down after (`afterTearDown`
/// runs while the store is still there).
@MainActor func withZoneSharingTestCase(on engine: TestEngine, _ body: @MainActor (ZoneSharingTestCase) async throws -> Void,
                                        afterTearDown: @MainActor (ZoneSharingTestCase) async throws -> Void = { _ in }) async throws {
    try await withStore(on: engine) { location, store in
        let testCase = ZoneSharingTestCase(viewModel: ZoneSharingSample.ViewModel(storeLocation: location, userName: "alice"))
        try await body(testCase)
        try await testCase.tearDownWithError()
        try await afterTearDown(testCase)
    }
}

@Suite("Apple's Zone Sharing sample (sample-cloudkit-zonesharing), ported")
@MainActor struct ZoneSharingSampleTests {

    // MARK: - CloudKit Readiness

    // func test_CloudKitReadiness() async throws {
    @Test("test_CloudKitReadiness: the private database answers its zones", arguments: TestEngine.all)
    func cloudKitReadiness(engine: TestEngine) async throws {
        try await withZoneSharingTestCase(on: engine) { testCase in
            // Fetch zones from the Private Database of the CKContainer for the current user to test for valid/ready state
            // let container = CKContainer(identifier: Config.containerIdentifier)
            let container = try Container(identifier: ZoneSharingSample.Config.containerIdentifier, store: testCase.viewModel.storeLocation, userName: "alice")
            let database = container.privateCloudDatabase

            var zones: [RecordZone] = []
            do {
                // _ = try await database.allRecordZones()
                zones = try await database.allRecordZones()
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
            #expect(zones.map { zone in zone.zoneID } == [RecordZone.ID.default])
        }
    }

    // func testCreatingShare() async throws {
    @Test("testCreatingShare: the test contact's group zone is shared as a whole, the share found again through the zone; tear-down deletes contact, share and zone", arguments: TestEngine.all)
    func creatingShare(engine: TestEngine) async throws {
        try await withZoneSharingTestCase(on: engine) { testCase in
            // Create a temporary contact to create the share on.
            try await testCase.createTestContact()
            // Fetch private contacts, which should now contain the temporary contact.
            let privateContacts = try await testCase.fetchPrivateContacts()

            // Find the group of our test Contact.
            let groupName = testCase.testContactGroup
            guard let testContactGroup = privateContacts.first(where: { group in group.name == groupName }) else {
                Issue.record("No matching test Contact Group (zone) found after fetching private contacts")
                return
            }

            // Find the test Contact in the group.
            let contactName = testCase.testContactName
            guard let testContact = testContactGroup.contacts.first(where: { contact in contact.name == contactName }) else {
                Issue.record("No matching test Contact found after fetching private contacts")
                return
            }

            testCase.idsToDelete.append(testContact.associatedRecord.recordID)
            testCase.zoneIDsToDelete.append(testContactGroup.zone.zoneID)

            // let (share, _) = try await viewModel.fetchOrCreateShare(contactGroup: testContactGroup)
            let (share, _) = try await testCase.viewModel.fetchOrCreateShare(contactGroup: testContactGroup)

            // idsToDelete.append(share.recordID)
            testCase.idsToDelete.append(share.recordID)

            #expect(testContact.phoneNumber == "555-123-4567")
            #expect(testContactGroup.zone.zoneID.zoneName == groupName)
            // Beyond the sample's test: the zone fetched again names its share, which the
            // sample's second call finds instead of making another.
            #expect(share.recordID.recordName == RecordNameZoneWideShare)
            let refetched = try await testCase.fetchPrivateContacts()
            let group = try #require(refetched.first { group in group.name == groupName })
            #expect(group.zone.share?.recordID == share.recordID)
            let (again, _) = try await testCase.viewModel.fetchOrCreateShare(contactGroup: group)
            #expect(again.recordID == share.recordID && again[Share.SystemFieldKey.title] as? String == "Contact Group: \(groupName)")
            #expect(again.url != nil && again.owner.role == .owner)
        } afterTearDown: { testCase in
            #expect(testCase.idsToDelete.isEmpty && testCase.zoneIDsToDelete.isEmpty)
            let groups = try await testCase.fetchPrivateContacts()
            #expect(groups.isEmpty, "tear-down deleted the test's group zone")
        }
    }
}

// The view model's other paths, which the sample's app runs and its tests do not.
extension ZoneSharingSampleTests {

    @Test("refresh groups the contacts by zone; saving an existing group's zone again before each contact is harmless", arguments: TestEngine.all)
    func refreshGroupsByZone(engine: TestEngine) async throws {
        try await withZoneSharingTestCase(on: engine) { testCase in
            let viewModel = testCase.viewModel
            for (name, group) in [("Ann", "Family"), ("Bob", "Work"), ("Cy", "Work"), ("Di", "Club"), ("Ed", "Family")] {
                try await viewModel.addContact(name: name, phoneNumber: "555-\(name)", group: group)
            }
            // A contact in the default zone is not in any group.
            let stray = Record(recordType: "Contact")
            stray["name"] = "Zed"
            stray["phoneNumber"] = "555-Zed"
            _ = try await viewModel.container.privateCloudDatabase.save(stray)

            try await viewModel.refresh()
            guard case .loaded(let privateGroups, let sharedGroups) = viewModel.state else {
                Issue.record("state after refresh: \(viewModel.state)")
                return
            }
            #expect(sharedGroups.isEmpty, "the owner's shared database is empty: it accepted no share of another user")
            var byGroup: [String: [String]] = [:]
            for group in privateGroups {
                byGroup[group.name] = group.contacts.map { contact in contact.name }.sorted()
            }
            #expect(byGroup == ["Club": ["Di"], "Family": ["Ann", "Ed"], "Work": ["Bob", "Cy"]])
            #expect(privateGroups.allSatisfy { group in group.contacts.allSatisfy { contact in contact.phoneNumber == "555-\(contact.name)" } })
        }
    }
}
