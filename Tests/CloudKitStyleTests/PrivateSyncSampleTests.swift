import Foundation
import Stratus
import StratusSQLite
import StratusStores
import StratusTestSupport
import Testing

// Apple's Private Sync sample (github.com/apple/sample-cloudkit-privatedb-sync):
// PrivateSync/Config.swift, PrivateSync/ViewModel.swift, the notification handler of
// PrivateSync/PrivateSyncApp.swift and PrivateSyncTests/PrivateSyncTests.swift, ported with the
// README's substitutions (`import CloudKit` → `import Stratus`, the `CK` prefix dropped,
// `CKError` → `StratusError`). Where a line had to change, the CloudKit line is quoted above it.
// Beyond the renames, as in QueriesSampleTests.swift: the sample's files sit in
// `enum PrivateSyncSample`; Combine (`ObservableObject`, `@Published`, the `$contacts.map { … }
// .assign(to:)` pipeline) is not on Linux, so `contactNames` is computed from `contacts`; the
// container's store file and the `UserDefaults.standard` domain are the test's own (a test
// "device" is a view model with a defaults domain of its own); `setValue(_:forKey:)` on
// `UserDefaults` is key-value coding, which Foundation on Linux lacks: `set(_:forKey:)`.
//
// The app delegate reacts to the push of the zone subscription the view model makes. A Linux
// server receives no push: the port reads the same `RecordZoneNotification` from the user's
// notification feed (`CKFetchNotificationChangesOperation`) and hands its push payload
// (`remoteNotificationDictionary`) to the delegate's handler, whose body is the sample's.

enum PrivateSyncSample {

    // MARK: - Config.swift

    enum Config {
        /// iCloud container identifier.
        /// Update this if you wish to use your own iCloud container.
        static let containerIdentifier = "iCloud.com.apple.samples.cloudkit.PrivateSync"
    }

    // MARK: - ViewModel.swift

    // final class ViewModel: ObservableObject {
    final class ViewModel {

        // MARK: - Properties

        // MARK: Published State

        /// Contacts by name to be displayed by our View.
        // @Published private(set) var contactNames: [String] = []
        // (and in init: `$contacts.map { $0.values.sorted() }.assign(to: &$contactNames)`)
        var contactNames: [String] { contacts.values.sorted() }

        /// A dictionary mapping contact names (value) to ID (key).
        // @Published private var contacts: [String: String] = [:]
        private(set) var contacts: [String: String] = [:]

        // MARK: CloudKit Properties

        /// The CloudKit container we'll use.
        // private lazy var container = CKContainer(identifier: Config.containerIdentifier)
        private lazy var container = try! Container(identifier: Config.containerIdentifier, store: storeLocation, userName: userName)
        /// For this sample we use the iCloud user's private database.
        private lazy var database = container.privateCloudDatabase
        /// We use a custom record zone to support fetching only changed records.
        private let zone = RecordZone(zoneName: "Contacts")
        /// Each subscription requires a unique ID.
        private let subscriptionID = "changes-subscription-id"
        /// We use a change token to inform the server of the last time we had the most recent remote data.
        private(set) var lastChangeToken: ServerChangeToken?

        // Where the port's container lives, and the port's `UserDefaults.standard` (see the top).
        let storeLocation: String
        let userName: String
        let userDefaults: UserDefaults

        // MARK: - Public Functions

        init(storeLocation: String, userName: String, userDefaults: UserDefaults) {
            self.storeLocation = storeLocation
            self.userName = userName
            self.userDefaults = userDefaults
        }

        /// Loads any stored cache and change token, and creates custom zone and subscription as needed.
        func initialize() async throws {
            loadLocalCache()
            loadLastChangeToken()

            try await createZoneIfNeeded()
            try await createSubscriptionIfNeeded()
        }

        /// Using the last known change token, retrieve changes on the zone since the last time we pulled from iCloud.
        /// If `lastChangeToken` is `nil`, all records will be retrieved.
        func fetchLatestChanges() async throws {
            /// `recordZoneChanges` can return multiple consecutive changesets before completing, so
            /// we use a loop to process multiple results if needed, indicated by the `moreComing` flag.
            var awaitingChanges = true

            while awaitingChanges {
                /// Fetch changeset for the last known change token.
                let changes = try await database.recordZoneChanges(inZoneWith: zone.zoneID, since: lastChangeToken)

                /// Convert changes to `CKRecord` objects and deleted IDs.
                let changedRecords = changes.modificationResultsByID.compactMapValues { try? $0.get().record }
                let deletedRecordIDs = changes.deletions.map { $0.recordID.recordName }

                /// Update local state, processing changes/additions and deletions.
                changedRecords.forEach { id, record in
                    if let contactName = record["name"] as? String {
                        contacts[id.recordName] = contactName
                    }
                }

                deletedRecordIDs.forEach { contacts.removeValue(forKey: $0) }

                /// Save our new change token representing this point in time.
                saveChangeToken(changes.changeToken)

                /// Write updated local cache to disk.
                saveLocalCache()

                /// If there are more changes coming, we need to repeat this process with the new token.
                /// This is indicated by the returned changeset `moreComing` flag.
                awaitingChanges = changes.moreComing
            }
        }

        /// Creates a new Contact record in the local cache as well as on the remote database.
        /// For simplicity, if the remote operation fails, no local update occurs.
        /// - Parameters:
        ///   - name: The name of the new contact.
        func addContact(name: String) async throws {
            // We need to build a CKRecord of our new Contact using our custom zone and record type.
            let newRecordID = Record.ID(zoneID: zone.zoneID)
            let newRecord = Record(recordType: "Contact", recordID: newRecordID)
            newRecord["name"] = name

            let savedRecord = try await database.save(newRecord)

            /// At this point, the record has been successfully saved and we can add it to our local cache.
            /// If the `save` operation fails, an error is thrown before reaching this point.
            contacts[savedRecord.recordID.recordName] = name
            saveLocalCache()
        }

        /// Deletes a Contact record if found by name in the local cache as well as on the remote database.
        /// For simplicity, if the remote operation fails, no local update occurs.
        /// - Parameters:
        ///   - name: The name of the contact to delete.
        func deleteContact(name: String) async throws {
            // In this contrived example, Contact records only store a name, so rather than requiring the
            // unique ID to delete a Contact, we'll use the first ID that matches the name to delete.
            guard let matchingID = contacts.first(where: { _, value in name == value })?.key else {
                debugPrint("Contact not found on deletion for name: \(name)")
                throw PrivateSyncError.contactNotFound
            }

            let recordID = Record.ID(recordName: matchingID, zoneID: zone.zoneID)

            try await database.deleteRecord(withID: recordID)

            /// At this point, the record has been successfully deleted.
            /// If the `deleteRecord` operation fails, an error is thrown before reaching this point.
            contacts.removeValue(forKey: matchingID)
            saveLocalCache()
        }

        // MARK: - Local Caching

        private func loadLocalCache() {
            // contacts = UserDefaults.standard.dictionary(forKey: "contacts") as? [String: String] ?? [:]
            contacts = userDefaults.dictionary(forKey: "contacts") as? [String: String] ?? [:]
        }

        private func saveLocalCache() {
            // UserDefaults.standard.set(contacts, forKey: "contacts")
            userDefaults.set(contacts, forKey: "contacts")
        }

        private func loadLastChangeToken() {
            // guard let data = UserDefaults.standard.data(forKey: "lastChangeToken"),
            //       let token = try? NSKeyedUnarchiver.unarchivedObject(ofClass: CKServerChangeToken.self, from: data) else {
            guard let data = userDefaults.data(forKey: "lastChangeToken"),
                  let token = try? NSKeyedUnarchiver.unarchivedObject(ofClass: ServerChangeToken.self, from: data) else {
                return
            }

            lastChangeToken = token
        }

        private func saveChangeToken(_ token: ServerChangeToken) {
            let tokenData = try! NSKeyedArchiver.archivedData(withRootObject: token, requiringSecureCoding: true)

            lastChangeToken = token
            // UserDefaults.standard.set(tokenData, forKey: "lastChangeToken")
            userDefaults.set(tokenData, forKey: "lastChangeToken")
        }

        // MARK: - CloudKit Initialization Helpers

        /// Creates the custom zone defined by the `zone` property if needed.
        func createZoneIfNeeded() async throws {
            // Avoid the operation if this has already been done.
            // guard !UserDefaults.standard.bool(forKey: "isZoneCreated") else {
            guard !userDefaults.bool(forKey: "isZoneCreated") else {
                return
            }

            do {
                _ = try await database.modifyRecordZones(saving: [zone])
            } catch {
                print("ERROR: Failed to create custom zone: \(error.localizedDescription)")
                throw error
            }

            // UserDefaults.standard.setValue(true, forKey: "isZoneCreated")
            userDefaults.set(true, forKey: "isZoneCreated")
        }

        /// Creates a subscription if needed that tracks changes to our custom zone.
        func createSubscriptionIfNeeded() async throws {
            // guard !UserDefaults.standard.bool(forKey: "isSubscribed") else {
            guard !userDefaults.bool(forKey: "isSubscribed") else {
                return
            }

            // First check if the subscription has already been created.
            // If a subscription is returned, we don't need to create one.
            let foundSubscription = try? await database.subscription(for: subscriptionID)
            guard foundSubscription == nil else {
                // UserDefaults.standard.setValue(true, forKey: "isSubscribed")
                userDefaults.set(true, forKey: "isSubscribed")
                return
            }

            // No subscription created yet, so create one here, reporting and passing along any errors.
            let subscription = RecordZoneSubscription(zoneID: zone.zoneID, subscriptionID: subscriptionID)
            // let notificationInfo = CKSubscription.NotificationInfo()
            let notificationInfo = Subscription.NotificationInfo()
            notificationInfo.shouldSendContentAvailable = true
            subscription.notificationInfo = notificationInfo

            _ = try await database.modifySubscriptions(saving: [subscription])
            // UserDefaults.standard.setValue(true, forKey: "isSubscribed")
            userDefaults.set(true, forKey: "isSubscribed")
        }

        // MARK: - Helper Error Type

        enum PrivateSyncError: Error {
            case contactNotFound
        }
    }

    // MARK: - PrivateSyncApp.swift: the app delegate's notification handler

    /// `UIBackgroundFetchResult`, which UIKit defines.
    enum UIBackgroundFetchResult {
        case newData, noData, failed
    }

    /// The sample's `PrivateSyncAppDelegate`, its `static let vm` made a property (each test
    /// device has its own view model).
    final class PrivateSyncAppDelegate {
        let vm: ViewModel

        init(vm: ViewModel) {
            self.vm = vm
        }

        // func application(_ application: UIApplication, didReceiveRemoteNotification userInfo: [AnyHashable : Any],
        //                  fetchCompletionHandler completionHandler: @escaping (UIBackgroundFetchResult) -> Void) {
        // (No UIApplication on Linux, and no push: the payload is made of a notification of the user's feed, see the top.)
        func application(didReceiveRemoteNotification userInfo: [AnyHashable: Any], fetchCompletionHandler completionHandler: @escaping (UIBackgroundFetchResult) -> Void) {
            guard let zoneNotification = StratusNotification(fromRemoteNotificationDictionary: userInfo) as? RecordZoneNotification else {
                completionHandler(.noData)
                return
            }

            debugPrint("Received zone notification: \(zoneNotification)")

            Task {
                do {
                    // try await PrivateSyncApp.vm.fetchLatestChanges()
                    try await vm.fetchLatestChanges()
                    completionHandler(.newData)
                } catch {
                    debugPrint("Error in fetchLatestChanges: \(error)")
                    completionHandler(.failed)
                }
            }
        }
    }
}

// MARK: - The tests' devices

/// The test's store and the "devices" on it: each a defaults domain of its own (the port's
/// `UserDefaults.standard`), as each device of an iCloud account has.
final class PrivateSyncDevices {
    let storeLocation: String
    let userName = "alice"
    private var suites: [String] = []

    init(storeLocation: String) {
        self.storeLocation = storeLocation
    }

    /// A new device's defaults domain.
    func newDevice() throws -> UserDefaults {
        let suite = "stratus-privatesync-sample-\(UUID().uuidString)"
        suites.append(suite)
        return try #require(UserDefaults(suiteName: suite))
    }

    /// The sample's `ViewModel()` on a device: a new view model reading that device's defaults.
    func viewModel(on device: UserDefaults) -> PrivateSyncSample.ViewModel {
        PrivateSyncSample.ViewModel(storeLocation: storeLocation, userName: userName, userDefaults: device)
    }

    /// The sample's container, as the test (or the system, delivering a push) opens it.
    func container() throws -> Container {
        try Container(identifier: PrivateSyncSample.Config.containerIdentifier, store: storeLocation, userName: userName)
    }

    func removeDefaults() {
        for suite in suites { UserDefaults.standard.removePersistentDomain(forName: suite) }
    }

    /// The user's notifications since `token`, read from the feed where CloudKit would push them.
    func notifications(since token: ServerChangeToken?) async throws -> ([StratusNotification], ServerChangeToken) {
        // let operation = CKFetchNotificationChangesOperation(previousServerChangeToken: token)
        let operation = FetchNotificationChangesOperation(previousServerChangeToken: token)
        nonisolated(unsafe) var received: [StratusNotification] = []
        operation.notificationChangedBlock = { notification in received.append(notification) }
        let result: Result<(serverChangeToken: ServerChangeToken, moreComing: Bool), Error> = await awaitCallback { done in
            operation.fetchNotificationChangesResultBlock = { result in done(result) }
            try! container().add(operation)
        }
        return (received, try result.get().serverChangeToken)
    }
}

func withPrivateSyncStore(on engine: TestEngine, _ body: (PrivateSyncDevices) async throws -> Void) async throws {
    try await withStore(on: engine) { location, store in
        let devices = PrivateSyncDevices(storeLocation: location)
        defer { devices.removeDefaults() }
        try await body(devices)
    }
}

// MARK: - PrivateSyncTests.swift

// class PrivateSyncTests: XCTestCase {
@Suite("Apple's Private Sync sample (sample-cloudkit-privatedb-sync), ported")
struct PrivateSyncSampleTests {

    // override func setUp() {
    /// The sample's set-up: a view model on the test's device makes the zone.
    func setUp(_ devices: PrivateSyncDevices, device: UserDefaults) async {
        let vm = devices.viewModel(on: device)
        // let expectation = self.expectation(description: "Expect successful zone creation.")
        do {
            try await vm.createZoneIfNeeded()
        } catch {
            Issue.record("Failed to create record zone (VM initialization step): \(error)")
        }
    }

    // func test_CloudKitReadiness() async throws {
    @Test("test_CloudKitReadiness: the private database answers its zones, the sample's Contacts zone among them", arguments: TestEngine.all)
    func cloudKitReadiness(engine: TestEngine) async throws {
        try await withPrivateSyncStore(on: engine) { devices in
            await setUp(devices, device: try devices.newDevice())
            // Fetch zones from the Private Database of the CKContainer for the current user to test for valid/ready state
            // let container = CKContainer(identifier: Config.containerIdentifier)
            let container = try devices.container()
            let database = container.privateCloudDatabase

            var zoneNames: [String] = []
            do {
                zoneNames = try await database.allRecordZones().map { zone in zone.zoneID.zoneName }
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
            #expect(Set(zoneNames) == [RecordZone.ID.defaultZoneName, "Contacts"])
        }
    }

    // func testFetchingChangesAndUpdatingToken() async throws {
    @Test("testFetchingChangesAndUpdatingToken: a new view model has no token, and has one after fetching the zone's changes", arguments: TestEngine.all)
    func fetchingChangesAndUpdatingToken(engine: TestEngine) async throws {
        try await withPrivateSyncStore(on: engine) { devices in
            let device = try devices.newDevice()
            await setUp(devices, device: device)
            let vm = devices.viewModel(on: device)
            #expect(vm.lastChangeToken == nil, "Expected new VM change token to start as nil.")

            try await vm.fetchLatestChanges()
            #expect(vm.lastChangeToken != nil, "Expected change token after fetch to be non-nil.")
            // The token was archived into the device's defaults, as the sample keeps it between launches.
            let tokenData = try #require(device.data(forKey: "lastChangeToken"))
            #expect(try NSKeyedUnarchiver.unarchivedObject(ofClass: ServerChangeToken.self, from: tokenData) != nil)
        }
    }
}

// The sample's app, run on two devices of one user: what its tests leave out.
extension PrivateSyncSampleTests {

    @Test("initialize on two devices makes the zone and one zone subscription; the second device finds it", arguments: TestEngine.all)
    func initializeOnTwoDevices(engine: TestEngine) async throws {
        try await withPrivateSyncStore(on: engine) { devices in
            let phone = try devices.newDevice()
            let tablet = try devices.newDevice()
            try await devices.viewModel(on: phone).initialize()
            try await devices.viewModel(on: tablet).initialize()
            #expect(phone.bool(forKey: "isZoneCreated") && phone.bool(forKey: "isSubscribed"))
            #expect(tablet.bool(forKey: "isZoneCreated") && tablet.bool(forKey: "isSubscribed"))

            let database = try devices.container().privateCloudDatabase
            let subscriptions = try await database.allSubscriptions()
            #expect(subscriptions.map(\.subscriptionID) == ["changes-subscription-id"])
            let zoneSubscription = try #require(subscriptions.first as? RecordZoneSubscription)
            #expect(zoneSubscription.zoneID == RecordZone.ID(zoneName: "Contacts"))
            #expect(zoneSubscription.notificationInfo?.shouldSendContentAvailable == true)
        }
    }

    @Test("what one device adds and deletes reaches the other through its change token; cache and token survive a relaunch", arguments: TestEngine.all)
    func changesReachTheOtherDevice(engine: TestEngine) async throws {
        try await withPrivateSyncStore(on: engine) { devices in
            let phoneDefaults = try devices.newDevice()
            let tabletDefaults = try devices.newDevice()
            let phone = devices.viewModel(on: phoneDefaults)
            let tablet = devices.viewModel(on: tabletDefaults)
            try await phone.initialize()
            try await tablet.initialize()

            try await phone.addContact(name: "Ann")
            try await phone.addContact(name: "Bob")
            #expect(phone.contactNames == ["Ann", "Bob"])
            try await tablet.fetchLatestChanges()
            #expect(tablet.contactNames == ["Ann", "Bob"])
            #expect(Set(tablet.contacts.keys) == Set(phone.contacts.keys), "both caches key the contacts by record name")

            try await phone.deleteContact(name: "Ann")
            try await tablet.addContact(name: "Cy")
            try await tablet.fetchLatestChanges()
            #expect(tablet.contactNames == ["Bob", "Cy"])
            try await phone.fetchLatestChanges()
            #expect(phone.contactNames == ["Bob", "Cy"])

            // A relaunch of the tablet: the cache and the archived token come back from its defaults,
            // and the next fetch brings only what changed since.
            let relaunched = devices.viewModel(on: tabletDefaults)
            try await relaunched.initialize()
            #expect(relaunched.contactNames == ["Bob", "Cy"])
            let tokenBefore = try #require(relaunched.lastChangeToken)
            let changesSince = try await devices.container().privateCloudDatabase.recordZoneChanges(inZoneWith: RecordZone.ID(zoneName: "Contacts"), since: tokenBefore)
            #expect(changesSince.modificationResultsByID.isEmpty && changesSince.deletions.isEmpty)
            try await phone.addContact(name: "Di")
            try await relaunched.fetchLatestChanges()
            #expect(relaunched.contactNames == ["Bob", "Cy", "Di"])
        }
    }

    @Test("the zone subscription's notification, read from the feed, makes the app delegate fetch the latest changes", arguments: TestEngine.all)
    func notificationMakesTheDelegateFetch(engine: TestEngine) async throws {
        try await withPrivateSyncStore(on: engine) { devices in
            let phone = devices.viewModel(on: try devices.newDevice())
            let tablet = devices.viewModel(on: try devices.newDevice())
            try await phone.initialize()
            try await tablet.initialize()
            let (_, startToken) = try await devices.notifications(since: nil)

            try await phone.addContact(name: "Ann")
            let (notifications, _) = try await devices.notifications(since: startToken)
            let zoneNotifications = notifications.compactMap { notification in notification as? RecordZoneNotification }
            #expect(!zoneNotifications.isEmpty)
            #expect(zoneNotifications.allSatisfy { notification in notification.recordZoneID == RecordZone.ID(zoneName: "Contacts") && notification.subscriptionID == "changes-subscription-id" })

            let delegate = PrivateSyncSample.PrivateSyncAppDelegate(vm: tablet)
            for notification in notifications {
                let result: PrivateSyncSample.UIBackgroundFetchResult = await awaitCallback { done in
                    delegate.application(didReceiveRemoteNotification: notification.remoteNotificationDictionary) { result in done(result) }
                }
                #expect(result == (notification is RecordZoneNotification ? .newData : .noData))
            }
            #expect(tablet.contactNames == ["Ann"])
        }
    }

    @Test("deleteContact with a name not in the cache throws contactNotFound and deletes nothing", arguments: TestEngine.all)
    func deleteUnknownContact(engine: TestEngine) async throws {
        try await withPrivateSyncStore(on: engine) { devices in
            let phone = devices.viewModel(on: try devices.newDevice())
            try await phone.initialize()
            try await phone.addContact(name: "Ann")
            await #expect(throws: PrivateSyncSample.ViewModel.PrivateSyncError.contactNotFound) {
                try await phone.deleteContact(name: "Zed")
            }
            let other = devices.viewModel(on: try devices.newDevice())
            try await other.initialize()
            try await other.fetchLatestChanges()
            #expect(other.contactNames == ["Ann"])
        }
    }
}
