import Foundation
import Stratus
import StratusSQLite
import StratusStores
import StratusTestSupport
import Testing

// Apple's CKSyncEngine sample (github.com/apple/sample-cloudkit-sync-engine): its SyncedDatabase
// actor, its Contact model (`SampleContact` here: another port in this module has a `Contact`)
// and its SyncTests, ported with the README's substitutions only
// (`CKSyncEngine` → `SyncEngine`, `CKRecord` → `Record`, `CKContainer(identifier:)` →
// `try Container(identifier:storeLocation:userName:)`, XCTest's asserts → `#expect`). Each test
// device is a container on one store file with the same user, as devices of one iCloud
// account are; the app's data is a JSON file of its own, as in the sample.
// The sample's `Contact` is `SampleContact` here: another port in this module has a `Contact`.

struct ContactsAppData: Codable {
    var contacts: [SampleContact.ID: SampleContact] = [:]
    var stateSerialization: SyncEngine.State.Serialization?
}

struct SampleContact: Codable, Identifiable, Hashable, Sendable {
    var id: String = UUID().uuidString
    var name: String = "New SampleContact"
    var userModificationDate: Date = Date.distantPast
    /// The encoded system fields of the record last known to be in the store.
    var lastKnownRecordData: Data?

    static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.id == rhs.id && lhs.name == rhs.name && lhs.userModificationDate == rhs.userModificationDate
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(id)
        hasher.combine(name)
        hasher.combine(userModificationDate)
    }

    static let zoneName = "Contacts"
    static let recordType: Record.RecordType = "SampleContact"
    var zoneID: RecordZone.ID { RecordZone.ID(zoneName: Self.zoneName) }
    var recordID: Record.ID { Record.ID(recordName: id, zoneID: zoneID) }

    /// Takes the record's values when the user changed them later than this copy's.
    mutating func mergeFromServerRecord(_ record: Record) {
        let userModificationDate = record.encryptedValues["userModificationDate"] as? Date ?? Date.distantPast
        if userModificationDate > self.userModificationDate {
            self.userModificationDate = userModificationDate
            if let name = record.encryptedValues["name"] as? String { self.name = name }
        }
    }

    func populateRecord(_ record: Record) {
        record.encryptedValues["name"] = name
        record.encryptedValues["userModificationDate"] = userModificationDate
    }

    mutating func setLastKnownRecordIfNewer(_ otherRecord: Record) {
        if let localDate = lastKnownRecord?.modificationDate {
            if let otherDate = otherRecord.modificationDate, localDate < otherDate { lastKnownRecord = otherRecord }
        } else {
            lastKnownRecord = otherRecord
        }
    }

    var lastKnownRecord: Record? {
        get {
            guard let data = lastKnownRecordData, let unarchiver = try? NSKeyedUnarchiver(forReadingFrom: data) else { return nil }
            unarchiver.requiresSecureCoding = true
            return Record(coder: unarchiver)
        }
        set {
            if let newValue {
                let archiver = NSKeyedArchiver(requiringSecureCoding: true)
                newValue.encodeSystemFields(with: archiver)
                lastKnownRecordData = archiver.encodedData
            } else {
                lastKnownRecordData = nil
            }
        }
    }
}

final actor SyncedDatabase: SyncEngineDelegate {
    let container: Container
    let automaticallySync: Bool
    /// Not in Apple's sample: how often an engine that syncs by itself looks for other devices' changes.
    let changePollInterval: Double?
    let dataURL: URL
    var appData: ContactsAppData
    /// Every event's description, in the order the engine handed them over.
    var eventLog: [String] = []

    var syncEngine: SyncEngine {
        if _syncEngine == nil { initializeSyncEngine() }
        return _syncEngine!
    }
    var _syncEngine: SyncEngine?

    init(container: Container, automaticallySync: Bool = true, changePollInterval: Double? = nil, dataURL: URL) {
        self.container = container
        self.changePollInterval = changePollInterval
        self.dataURL = dataURL
        if let blob = try? Data(contentsOf: dataURL), let data = try? JSONDecoder().decode(ContactsAppData.self, from: blob) {
            appData = data
        } else {
            appData = ContactsAppData()
        }
        self.automaticallySync = automaticallySync
        // The sample starts its engine from a task here; it asks for `syncEngine` so that an
        // engine the tests already started is not replaced.
        Task { _ = await self.syncEngine }
    }

    func initializeSyncEngine() {
        var configuration = SyncEngine.Configuration(database: container.privateCloudDatabase,
                                                     stateSerialization: appData.stateSerialization, delegate: self)
        configuration.automaticallySync = automaticallySync
        if let changePollInterval { configuration.changePollInterval = changePollInterval }
        _syncEngine = SyncEngine(configuration)
    }

    func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
        eventLog.append(event.description)
        switch event {
        case .stateUpdate(let event):
            appData.stateSerialization = event.stateSerialization
            try? persistLocalData()
        case .accountChange(let event):
            handleAccountChange(event)
        case .fetchedDatabaseChanges(let event):
            for deletion in event.deletions where deletion.zoneID.zoneName == SampleContact.zoneName {
                appData.contacts = [:]
                try? persistLocalData()
            }
        case .fetchedRecordZoneChanges(let event):
            for modification in event.modifications {
                let record = modification.record
                var contact = appData.contacts[record.recordID.recordName] ?? SampleContact(id: record.recordID.recordName)
                contact.mergeFromServerRecord(record)
                contact.setLastKnownRecordIfNewer(record)
                appData.contacts[record.recordID.recordName] = contact
            }
            for deletion in event.deletions { appData.contacts[deletion.recordID.recordName] = nil }
            try? persistLocalData()
        case .sentRecordZoneChanges(let event):
            handleSentRecordZoneChanges(event)
        case .sentDatabaseChanges, .willFetchChanges, .willFetchRecordZoneChanges, .didFetchRecordZoneChanges,
             .didFetchChanges, .willSendChanges, .didSendChanges:
            break
        }
    }

    func nextRecordZoneChangeBatch(_ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine) async -> SyncEngine.RecordZoneChangeBatch? {
        let changes = syncEngine.state.pendingRecordZoneChanges.filter { context.options.scope.contains($0) }
        let contacts = appData.contacts
        return await SyncEngine.RecordZoneChangeBatch(pendingChanges: changes) { recordID in
            if let contact = contacts[recordID.recordName] {
                let record = contact.lastKnownRecord ?? Record(recordType: SampleContact.recordType, recordID: recordID)
                contact.populateRecord(record)
                return record
            }
            syncEngine.state.remove(pendingRecordZoneChanges: [.saveRecord(recordID)])
            return nil
        }
    }

    func handleSentRecordZoneChanges(_ event: SyncEngine.Event.SentRecordZoneChanges) {
        var newPendingRecordZoneChanges: [SyncEngine.PendingRecordZoneChange] = []
        var newPendingDatabaseChanges: [SyncEngine.PendingDatabaseChange] = []
        for savedRecord in event.savedRecords {
            if var contact = appData.contacts[savedRecord.recordID.recordName] {
                contact.setLastKnownRecordIfNewer(savedRecord)
                appData.contacts[savedRecord.recordID.recordName] = contact
            }
        }
        for failedRecordSave in event.failedRecordSaves {
            let failedRecord = failedRecordSave.record
            let contactID = failedRecord.recordID.recordName
            var shouldClearServerRecord = false
            switch failedRecordSave.error.code {
            case .serverRecordChanged:
                guard let serverRecord = failedRecordSave.error.serverRecord, var contact = appData.contacts[contactID] else { continue }
                contact.mergeFromServerRecord(serverRecord)
                contact.setLastKnownRecordIfNewer(serverRecord)
                appData.contacts[contactID] = contact
                newPendingRecordZoneChanges.append(.saveRecord(failedRecord.recordID))
            case .zoneNotFound:
                newPendingDatabaseChanges.append(.saveZone(RecordZone(zoneID: failedRecord.recordID.zoneID)))
                newPendingRecordZoneChanges.append(.saveRecord(failedRecord.recordID))
                shouldClearServerRecord = true
            case .unknownItem:
                newPendingRecordZoneChanges.append(.saveRecord(failedRecord.recordID))
                shouldClearServerRecord = true
            case .networkFailure, .networkUnavailable, .zoneBusy, .serviceUnavailable, .notAuthenticated, .operationCancelled:
                break
            default:
                break
            }
            if shouldClearServerRecord, var contact = appData.contacts[contactID] {
                contact.lastKnownRecord = nil
                appData.contacts[contactID] = contact
            }
        }
        syncEngine.state.add(pendingDatabaseChanges: newPendingDatabaseChanges)
        syncEngine.state.add(pendingRecordZoneChanges: newPendingRecordZoneChanges)
        try? persistLocalData()
    }

    func handleAccountChange(_ event: SyncEngine.Event.AccountChange) {
        switch event.changeType {
        case .signIn:
            let recordZoneChanges: [SyncEngine.PendingRecordZoneChange] = appData.contacts.values.map { .saveRecord($0.recordID) }
            let zoneIDsToSave = Set(recordZoneChanges.map(\.recordID.zoneID))
            syncEngine.state.add(pendingDatabaseChanges: zoneIDsToSave.map { .saveZone(RecordZone(zoneID: $0)) })
            syncEngine.state.add(pendingRecordZoneChanges: recordZoneChanges)
        case .switchAccounts, .signOut:
            appData = ContactsAppData()
            try? persistLocalData()
        }
    }

    func saveContacts(_ contacts: [SampleContact]) throws {
        for var contact in contacts {
            if let existingRecord = appData.contacts[contact.id]?.lastKnownRecord {
                contact.setLastKnownRecordIfNewer(existingRecord)
            }
            appData.contacts[contact.id] = contact
        }
        try persistLocalData()
        syncEngine.state.add(pendingRecordZoneChanges: contacts.map { .saveRecord($0.recordID) })
    }

    func deleteContacts(_ ids: [SampleContact.ID]) throws {
        let contacts = ids.compactMap { appData.contacts[$0] }
        for id in ids { appData.contacts[id] = nil }
        try persistLocalData()
        syncEngine.state.add(pendingRecordZoneChanges: contacts.map { .deleteRecord($0.recordID) })
    }

    func persistLocalData() throws {
        try JSONEncoder().encode(appData).write(to: dataURL)
    }

    func deleteServerData() async throws {
        syncEngine.state.add(pendingDatabaseChanges: [.deleteZone(RecordZone.ID(zoneName: SampleContact.zoneName))])
        try await syncEngine.sendChanges()
    }

    func clearEventLog() { eventLog = [] }
}

/// The sample's tests: devices are containers on one store, each with an app data file.
final class ContactsDevices: @unchecked Sendable {
    let store: TemporaryStore
    /// The devices' shared store: an SQLite file's path or a PostgreSQL URL.
    let location: String
    private var count = 0

    init(store: TemporaryStore, location: String) {
        self.store = store
        self.location = location
    }

    func container(user: String = "alice") throws -> Container {
        try Container(identifier: "iCloud.com.apple.samples.cloudkit.SyncEngine", store: location, userName: user)
    }

    func newTestDatabase(automaticallySync: Bool = false, changePollInterval: Double? = nil, user: String = "alice", dataFile: String? = nil) throws -> SyncedDatabase {
        count += 1
        let file = dataFile ?? "contacts-\(count).json"
        return SyncedDatabase(container: try container(user: user), automaticallySync: automaticallySync, changePollInterval: changePollInterval,
                              dataURL: URL(fileURLWithPath: store.path(file)))
    }
}

func withContactsDevices(on engine: TestEngine, _ body: (ContactsDevices) async throws -> Void) async throws {
    try await withStore(on: engine) { location, store in
        try await body(ContactsDevices(store: store, location: location))
    }
}

@Suite struct SyncEngineSampleTests {
    /// How long a wait for the engine's own scheduled work may take: a safety bound of half an hour
    /// for a starved machine (whose cooperative pool may not run the engine's tasks for
    /// seconds), not part of what is tested.
    static let patience: Duration = .seconds(1_800)

    @Test(arguments: TestEngine.all, [1, 10, 444]) func syncContacts(storeEngine: TestEngine, count: Int) async throws {
        try await withContactsDevices(on: storeEngine) { devices in
            let databaseA = try devices.newTestDatabase()
            let databaseB = try devices.newTestDatabase()
            let contacts = (0..<count).map { SampleContact(name: "\($0)", userModificationDate: Date()) }
            try await databaseA.saveContacts(contacts)
            try await databaseA.syncEngine.sendChanges()
            #expect(await databaseB.appData.contacts.isEmpty)
            try await databaseB.syncEngine.fetchChanges()
            #expect(Set(contacts) == Set(await databaseB.appData.contacts.values))
            #expect(await databaseA.syncEngine.state.pendingRecordZoneChanges.isEmpty)
            #expect(await databaseA.syncEngine.state.pendingDatabaseChanges.isEmpty)
        }
    }

    @Test(arguments: TestEngine.all) func renameSyncsBothWays(storeEngine: TestEngine) async throws {
        try await withContactsDevices(on: storeEngine) { devices in
            let databaseA = try devices.newTestDatabase()
            let databaseB = try devices.newTestDatabase()
            var contactA = SampleContact(name: "Name 1", userModificationDate: Date())
            try await databaseA.saveContacts([contactA])
            try await databaseA.syncEngine.sendChanges()

            try await databaseB.syncEngine.fetchChanges()
            var contactB = try #require(await databaseB.appData.contacts[contactA.id])
            #expect(contactB.name == "Name 1")
            contactB.name = "Name 2"
            contactB.userModificationDate = Date()
            try await databaseB.saveContacts([contactB])
            try await databaseB.syncEngine.sendChanges()

            try await databaseA.syncEngine.fetchChanges()
            contactA = try #require(await databaseA.appData.contacts[contactA.id])
            #expect(contactA.name == "Name 2")
            #expect(await databaseA.appData.contacts.count == 1)

            contactA.name = "Name 3"
            contactA.userModificationDate = Date()
            try await databaseA.saveContacts([contactA])
            try await databaseA.syncEngine.sendChanges()
            try await databaseB.syncEngine.fetchChanges()
            #expect(await databaseB.appData.contacts[contactA.id]?.name == "Name 3")
        }
    }

    @Test(arguments: TestEngine.all) func zoneNotFoundIsRecoveredBySavingTheZoneAgain(storeEngine: TestEngine) async throws {
        try await withContactsDevices(on: storeEngine) { devices in
            let database = try devices.newTestDatabase()
            var contact = SampleContact(name: "I am a contact!", userModificationDate: Date())
            try await database.saveContacts([contact])
            try await database.syncEngine.sendChanges()
            let originalCreationDate = try #require(await database.appData.contacts[contact.id]?.lastKnownRecord?.creationDate)

            _ = try await database.syncEngine.database.deleteRecordZone(withID: RecordZone.ID(zoneName: SampleContact.zoneName))
            contact.name = "I am a renamed contact!"
            contact.userModificationDate = Date()
            try await database.saveContacts([contact])

            await #expect(throws: StratusError.self) { try await database.syncEngine.sendChanges() }
            #expect(await database.appData.contacts[contact.id]?.lastKnownRecord == nil)
            // The zone the app added again went out in the same send; the record waits for the next.
            #expect(await database.syncEngine.state.pendingDatabaseChanges.isEmpty)
            #expect(await database.syncEngine.state.pendingRecordZoneChanges == [.saveRecord(contact.recordID)])

            try await database.syncEngine.sendChanges()
            let databaseB = try devices.newTestDatabase()
            try await databaseB.syncEngine.fetchChanges()
            let contactB = try #require(await databaseB.appData.contacts[contact.id])
            let creationDateAfterSave = try #require(contactB.lastKnownRecord?.creationDate)
            #expect(creationDateAfterSave != originalCreationDate)
            #expect(contact == contactB)
        }
    }

    @Test(arguments: TestEngine.all) func unknownItemIsRecoveredBySavingTheRecordAgain(storeEngine: TestEngine) async throws {
        try await withContactsDevices(on: storeEngine) { devices in
            let database = try devices.newTestDatabase()
            var contact = SampleContact(name: "I am a contact!", userModificationDate: Date())
            try await database.saveContacts([contact])
            try await database.syncEngine.sendChanges()
            let originalCreationDate = try #require(await database.appData.contacts[contact.id]?.lastKnownRecord?.creationDate)

            _ = try await database.syncEngine.database.deleteRecord(withID: contact.recordID)
            contact.name = "I am a renamed contact!"
            contact.userModificationDate = Date()
            try await database.saveContacts([contact])

            do {
                try await database.syncEngine.sendChanges()
                Issue.record("Did not expect to succeed in sending changes")
            } catch let error as StratusError {
                #expect(error.code == .partialFailure)
                #expect(error.partialErrorsByRecordID[contact.recordID]?.code == .unknownItem)
            }
            #expect(await database.appData.contacts[contact.id]?.lastKnownRecord == nil)

            try await database.syncEngine.sendChanges()
            let databaseB = try devices.newTestDatabase()
            try await databaseB.syncEngine.fetchChanges()
            let contactB = try #require(await databaseB.appData.contacts[contact.id])
            #expect(try #require(contactB.lastKnownRecord?.creationDate) != originalCreationDate)
            #expect(contact == contactB)
        }
    }

    @Test(arguments: TestEngine.all, [true, false]) func conflictGoesToTheLaterUserChange(storeEngine: TestEngine, winnerSavesFirst: Bool) async throws {
        try await withContactsDevices(on: storeEngine) { devices in
            let databaseA = try devices.newTestDatabase()
            let databaseB = try devices.newTestDatabase()
            var contactA = SampleContact(name: "A1", userModificationDate: Date())
            let contactID = contactA.id
            try await databaseA.saveContacts([contactA])
            try await databaseA.syncEngine.sendChanges()
            try await databaseB.syncEngine.fetchChanges()
            var contactB = try #require(await databaseB.appData.contacts[contactID])
            #expect(contactB.name == "A1")

            let losingModificationDate = Date()
            let winningModificationDate = losingModificationDate + 1
            contactA.name = "A2"
            contactA.userModificationDate = winningModificationDate
            try await databaseA.saveContacts([contactA])
            contactB.name = "B1"
            contactB.userModificationDate = losingModificationDate
            try await databaseB.saveContacts([contactB])

            let (first, second) = winnerSavesFirst ? (databaseA, databaseB) : (databaseB, databaseA)
            try await first.syncEngine.sendChanges()
            do {
                try await second.syncEngine.sendChanges()
                Issue.record("Did not expect to succeed in sending changes")
            } catch let error as StratusError {
                #expect(error.partialErrorsByRecordID[contactA.recordID]?.code == .serverRecordChanged)
            }
            #expect(await first.syncEngine.state.pendingRecordZoneChanges.isEmpty)
            #expect(await second.syncEngine.state.pendingRecordZoneChanges.count == 1)
            #expect(await databaseA.appData.contacts[contactID] == contactA)
            #expect(await databaseB.appData.contacts[contactID] == (winnerSavesFirst ? contactA : contactB))

            try await second.syncEngine.sendChanges()
            try await first.syncEngine.fetchChanges()
            #expect(await databaseA.appData.contacts[contactID] == contactA)
            #expect(await databaseB.appData.contacts[contactID] == contactA)
        }
    }

    // The sample's "More tests!" list: a deletion, and a deletion while another device edits.
    @Test(arguments: TestEngine.all) func deletionReachesTheOtherDevice(storeEngine: TestEngine) async throws {
        try await withContactsDevices(on: storeEngine) { devices in
            let databaseA = try devices.newTestDatabase()
            let databaseB = try devices.newTestDatabase()
            let kept = SampleContact(name: "kept", userModificationDate: Date())
            let gone = SampleContact(name: "gone", userModificationDate: Date())
            try await databaseA.saveContacts([kept, gone])
            try await databaseA.syncEngine.sendChanges()
            try await databaseB.syncEngine.fetchChanges()
            #expect(await databaseB.appData.contacts.count == 2)

            try await databaseA.deleteContacts([gone.id])
            try await databaseA.syncEngine.sendChanges()
            try await databaseB.syncEngine.fetchChanges()
            #expect(await Set(databaseB.appData.contacts.keys) == [kept.id])
        }
    }

    @Test(arguments: TestEngine.all) func deletingTheZoneEmptiesTheOtherDevice(storeEngine: TestEngine) async throws {
        try await withContactsDevices(on: storeEngine) { devices in
            let databaseA = try devices.newTestDatabase()
            let databaseB = try devices.newTestDatabase()
            try await databaseA.saveContacts([SampleContact(name: "one", userModificationDate: Date())])
            try await databaseA.syncEngine.sendChanges()
            try await databaseB.syncEngine.fetchChanges()
            #expect(await databaseB.appData.contacts.count == 1)

            try await databaseA.deleteServerData()
            #expect(await databaseA.syncEngine.state.pendingDatabaseChanges.isEmpty)
            try await databaseB.syncEngine.fetchChanges()
            #expect(await databaseB.appData.contacts.isEmpty)
        }
    }

    @Test(arguments: TestEngine.all) func eventsComeInCloudKitsOrder(storeEngine: TestEngine) async throws {
        try await withContactsDevices(on: storeEngine) { devices in
            let databaseA = try devices.newTestDatabase()
            let databaseB = try devices.newTestDatabase()
            try await databaseA.saveContacts([SampleContact(name: "one", userModificationDate: Date())])
            try await databaseA.syncEngine.sendChanges()
            let user = try await devices.container().userRecordID().recordName
            let sent = await databaseA.eventLog.filter { event in !event.hasPrefix("stateUpdate") }
            #expect(sent.first == "accountChange(signIn(\(user)))")
            let sendEvents = sent.filter { event in !event.hasPrefix("accountChange") }
            #expect(sendEvents == ["willSendChanges", "sentDatabaseChanges(1 saved, 0 failed, 0 deleted, 0 failed deletes)",
                                   "sentRecordZoneChanges(1 saved, 0 failed, 0 deleted, 0 failed deletes)", "didSendChanges"])

            try await databaseB.syncEngine.fetchChanges()
            let fetched = await databaseB.eventLog.filter { !$0.hasPrefix("stateUpdate") && !$0.hasPrefix("accountChange") }
            #expect(fetched == ["willFetchChanges", "fetchedDatabaseChanges(1 modification(s), 0 deletion(s))",
                                "willFetchRecordZoneChanges(Contacts)", "fetchedRecordZoneChanges(1 modification(s), 0 deletion(s))",
                                "didFetchRecordZoneChanges(Contacts)", "didFetchChanges"])
            #expect(await databaseB.syncEngine.state.zoneIDsWithUnfetchedServerChanges.isEmpty)
        }
    }

    @Test(arguments: TestEngine.all) func aRestartedDeviceFetchesOnlyWhatIsNew(storeEngine: TestEngine) async throws {
        try await withContactsDevices(on: storeEngine) { devices in
            let databaseA = try devices.newTestDatabase()
            let first = (0..<5).map { SampleContact(name: "first \($0)", userModificationDate: Date()) }
            try await databaseA.saveContacts(first)
            try await databaseA.syncEngine.sendChanges()
            let databaseB = try devices.newTestDatabase(dataFile: "device-b.json")
            try await databaseB.syncEngine.fetchChanges()
            #expect(await databaseB.appData.contacts.count == 5)

            let later = SampleContact(name: "later", userModificationDate: Date())
            try await databaseA.saveContacts([later])
            try await databaseA.syncEngine.sendChanges()

            // The same device, started again from what it kept on disk.
            let restartedB = try devices.newTestDatabase(dataFile: "device-b.json")
            try await restartedB.syncEngine.fetchChanges()
            #expect(await restartedB.appData.contacts.count == 6)
            let fetched = await restartedB.eventLog.filter { $0.hasPrefix("fetchedRecordZoneChanges") }
            #expect(fetched == ["fetchedRecordZoneChanges(1 modification(s), 0 deletion(s))"])
            #expect(await !restartedB.eventLog.contains { $0.hasPrefix("accountChange") })
        }
    }

    @Test(arguments: TestEngine.all) func pendingChangesSurviveARestart(storeEngine: TestEngine) async throws {
        try await withContactsDevices(on: storeEngine) { devices in
            let database = try devices.newTestDatabase(dataFile: "device.json")
            try await database.saveContacts([SampleContact(name: "first", userModificationDate: Date())])
            try await database.syncEngine.sendChanges()
            // A send that fails keeps what the app added again in the state the app saved.
            _ = try await database.syncEngine.database.deleteRecordZone(withID: RecordZone.ID(zoneName: SampleContact.zoneName))
            let contact = SampleContact(name: "second", userModificationDate: Date())
            try await database.saveContacts([contact])
            await #expect(throws: StratusError.self) { try await database.syncEngine.sendChanges() }

            let restarted = try devices.newTestDatabase(dataFile: "device.json")
            #expect(await restarted.syncEngine.state.pendingRecordZoneChanges.contains(.saveRecord(contact.recordID)))
            try await restarted.syncEngine.sendChanges()
            #expect(await restarted.syncEngine.state.pendingRecordZoneChanges.isEmpty)
            let other = try devices.newTestDatabase()
            try await other.syncEngine.fetchChanges()
            #expect(await other.appData.contacts[contact.id]?.name == "second")
        }
    }

    @Test(arguments: TestEngine.all) func anotherUserOnTheSavedStateIsAnAccountSwitch(storeEngine: TestEngine) async throws {
        try await withContactsDevices(on: storeEngine) { devices in
            let alice = try devices.newTestDatabase(dataFile: "shared-file.json")
            try await alice.saveContacts([SampleContact(name: "alice's", userModificationDate: Date())])
            try await alice.syncEngine.sendChanges()
            let notSent = SampleContact(name: "not sent", userModificationDate: Date())
            try await alice.saveContacts([notSent])
            // Alice's engine hands over the state with "not sent" pending in a stateUpdate after
            // saveContacts returns, and the sample writes the file in place, not atomically: bob
            // reading it mid-write would start from no state (no account switch to see). Wait
            // until the file holds that state whole; alice changes nothing after it, so no
            // later stateUpdate writes the file again.
            func savedStateHoldsNotSent() -> Bool {
                guard let blob = try? Data(contentsOf: alice.dataURL),
                      let saved = try? JSONDecoder().decode(ContactsAppData.self, from: blob),
                      let serialization = saved.stateSerialization,
                      // The serialization is opaque; it encodes as one data value, the state's JSON.
                      let encoded = try? JSONEncoder().encode([serialization]),
                      let state = try? JSONDecoder().decode([Data].self, from: encoded).first else { return false }
                return String(decoding: state, as: UTF8.self).contains(notSent.id)
            }
            let persisted = ContinuousClock.now + Self.patience
            while !savedStateHoldsNotSent() && ContinuousClock.now < persisted { try await Task.sleep(for: .milliseconds(20)) }
            try #require(savedStateHoldsNotSent(), "alice's state with the unsent change was never saved")

            let bob = try devices.newTestDatabase(user: "bob", dataFile: "shared-file.json")
            try await bob.syncEngine.fetchChanges()
            let aliceID = try await devices.container(user: "alice").userRecordID().recordName
            let bobID = try await devices.container(user: "bob").userRecordID().recordName
            #expect(await bob.eventLog.first { !$0.hasPrefix("stateUpdate") } == "accountChange(switchAccounts(\(aliceID) → \(bobID)))")
            #expect(await bob.syncEngine.state.pendingRecordZoneChanges.isEmpty)
            #expect(await bob.appData.contacts.isEmpty)
        }
    }

    @Test(arguments: TestEngine.all) func anEngineThatSyncsByItselfSendsWhatIsAdded(storeEngine: TestEngine) async throws {
        try await withContactsDevices(on: storeEngine) { devices in
            let databaseA = try devices.newTestDatabase(automaticallySync: true)
            let contact = SampleContact(name: "sent by itself", userModificationDate: Date())
            try await databaseA.saveContacts([contact])
            let databaseB = try devices.newTestDatabase()
            // No push on Linux: device B fetches until the scheduled send has reached the store.
            let deadline = ContinuousClock.now + Self.patience
            while ContinuousClock.now < deadline, await databaseB.appData.contacts[contact.id] == nil {
                try await Task.sleep(nanoseconds: 50_000_000)
                try await databaseB.syncEngine.fetchChanges()
            }
            #expect(await databaseB.appData.contacts[contact.id] == contact)
        }
    }

    @Test(arguments: TestEngine.all) func anEngineThatSyncsByItselfFetchesWhatAnotherDeviceSends(storeEngine: TestEngine) async throws {
        try await withContactsDevices(on: storeEngine) { devices in
            let databaseA = try devices.newTestDatabase()
            let databaseB = try devices.newTestDatabase(automaticallySync: true, changePollInterval: 0.05)
            _ = await databaseB.syncEngine
            // The fetch it makes when it starts ends before device A sends anything.
            let startDeadline = ContinuousClock.now + Self.patience
            while ContinuousClock.now < startDeadline, await !databaseB.eventLog.contains("didFetchChanges") {
                try await Task.sleep(nanoseconds: 50_000_000)
            }
            #expect(await databaseB.eventLog.contains("didFetchChanges"))
            let contact = SampleContact(name: "fetched by itself", userModificationDate: Date())
            try await databaseA.saveContacts([contact])
            try await databaseA.syncEngine.sendChanges()
            // Device B never calls fetchChanges(): its engine finds the change by itself.
            let deadline = ContinuousClock.now + Self.patience
            while ContinuousClock.now < deadline, await databaseB.appData.contacts[contact.id] == nil {
                try await Task.sleep(nanoseconds: 50_000_000)
            }
            #expect(await databaseB.appData.contacts[contact.id] == contact)
        }
    }

    @Test(arguments: TestEngine.all) func theStateAddsEachChangeOnceAndTheLatestKindWins(storeEngine: TestEngine) async throws {
        try await withContactsDevices(on: storeEngine) { devices in
        let zone = RecordZone.ID(zoneName: "Z")
        let a = Record.ID(recordName: "A", zoneID: zone), b = Record.ID(recordName: "B", zoneID: zone)
        let delegate = NoEvents()
        var configuration = SyncEngine.Configuration(database: try devices.container().privateCloudDatabase, stateSerialization: nil, delegate: delegate)
        configuration.automaticallySync = false
        let engine = SyncEngine(configuration)
        engine.state.add(pendingRecordZoneChanges: [.saveRecord(a), .saveRecord(b), .saveRecord(a)])
        #expect(engine.state.pendingRecordZoneChanges == [.saveRecord(a), .saveRecord(b)])
        engine.state.add(pendingRecordZoneChanges: [.deleteRecord(a)])
        #expect(engine.state.pendingRecordZoneChanges == [.saveRecord(b), .deleteRecord(a)])
        engine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: zone)), .deleteZone(zone)])
        #expect(engine.state.pendingDatabaseChanges == [.deleteZone(zone)])
        engine.state.remove(pendingRecordZoneChanges: [.saveRecord(b)])
        #expect(engine.state.pendingRecordZoneChanges == [.deleteRecord(a)])
        // The first releases' spellings, which Apple's sample and Harmony write.
        engine.state.add(pendingRecordZoneChanges: [.save(b)])
        engine.state.remove(pendingRecordZoneChanges: [.delete(a)])
        engine.state.add(pendingDatabaseChanges: [.save(RecordZone(zoneID: zone))])
        #expect(engine.state.pendingRecordZoneChanges == [.saveRecord(b)])
        #expect(engine.state.pendingDatabaseChanges == [.saveZone(RecordZone(zoneID: zone))])
        engine.state.remove(pendingDatabaseChanges: [.delete(zone)])
        #expect(engine.state.pendingDatabaseChanges == [.saveZone(RecordZone(zoneID: zone))])
        }
    }

    @Test(arguments: TestEngine.all) func aDamagedStateSerializationDecodesWithTheAppsDataAndIsRefusedByTheEngine(storeEngine: TestEngine) async throws {
        // Apple's sample keeps the state inside its one Codable app data: a state this version
        // cannot use must not make the app's contacts unreadable.
        struct AppData: Codable {
            var contacts: [String]
            var stateSerialization: SyncEngine.State.Serialization?
        }
        let garbage = Data(#"{"contacts":["kept"],"stateSerialization":"bm90IGEgc3RhdGU="}"#.utf8)   // a data value that is no state
        let appData = try JSONDecoder().decode(AppData.self, from: garbage)
        #expect(appData.contacts == ["kept"])
        try await withContactsDevices(on: storeEngine) { devices in
            var configuration = SyncEngine.Configuration(database: try devices.container().privateCloudDatabase,
                                                         stateSerialization: appData.stateSerialization, delegate: NoEvents())
            configuration.automaticallySync = false
            let engine = SyncEngine(configuration)
            let refusal = stratusError(await caughtError { try await engine.fetchChanges() })
            #expect(refusal?.code == .invalidArguments && refusal?.message.contains("start with nil") == true, "\(String(describing: refusal))")
        }
    }
}

final class NoEvents: SyncEngineDelegate {
    func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {}
    func nextRecordZoneChangeBatch(_ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine) async -> SyncEngine.RecordZoneChangeBatch? { nil }
}

/// A delegate that sends what is pending from a dictionary of records and logs its events;
/// `onEvent` lets a test act inside the handler.
final actor RecordingDelegate: SyncEngineDelegate {
    var records: [Record.ID: Record] = [:]
    var events: [String] = []
    var onEvent: (@Sendable (SyncEngine.Event, SyncEngine) async -> Void)?

    func set(_ record: Record) { records[record.recordID] = record }
    func setOnEvent(_ handler: @escaping @Sendable (SyncEngine.Event, SyncEngine) async -> Void) { onEvent = handler }

    func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
        events.append(event.description)
        await onEvent?(event, syncEngine)
    }

    func nextRecordZoneChangeBatch(_ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine) async -> SyncEngine.RecordZoneChangeBatch? {
        let pending = syncEngine.state.pendingRecordZoneChanges.filter { context.options.scope.contains($0) }
        let records = records
        return await SyncEngine.RecordZoneChangeBatch(pendingChanges: pending) { records[$0] }
    }
}

@Suite struct SyncEngineBehaviourTests {
    /// How long a wait for the engine's own scheduled work may take: a safety bound of half an hour
    /// for a starved machine (whose cooperative pool may not run the engine's tasks for
    /// seconds), not part of what is tested.
    static let patience: Duration = .seconds(1_800)

    private func engine(_ database: Database, _ delegate: RecordingDelegate) -> SyncEngine {
        var configuration = SyncEngine.Configuration(database: database, stateSerialization: nil, delegate: delegate)
        configuration.automaticallySync = false
        return SyncEngine(configuration)
    }

    @Test(arguments: TestEngine.all) func aScopedSendSendsOnlyItsZones(storeEngine: TestEngine) async throws {
        try await withContactsDevices(on: storeEngine) { devices in
            let database = try devices.container().privateCloudDatabase
            let delegate = RecordingDelegate()
            let engine = engine(database, delegate)
            let work = RecordZone(zoneName: "Work"), home = RecordZone(zoneName: "Home")
            let memo = Record(recordType: "Note", recordID: Record.ID(recordName: "memo", zoneID: work.zoneID))
            let list = Record(recordType: "Note", recordID: Record.ID(recordName: "list", zoneID: home.zoneID))
            await delegate.set(memo)
            await delegate.set(list)
            engine.state.add(pendingDatabaseChanges: [.saveZone(work), .saveZone(home)])
            engine.state.add(pendingRecordZoneChanges: [.saveRecord(memo.recordID), .saveRecord(list.recordID)])

            try await engine.sendChanges(.init(scope: .zoneIDs([work.zoneID])))
            #expect(engine.state.pendingRecordZoneChanges == [.saveRecord(list.recordID)])
            #expect(engine.state.pendingDatabaseChanges == [.saveZone(home)])
            #expect(try await database.record(for: memo.recordID).recordType == "Note")
            await #expect(throws: StratusError.self) { _ = try await database.record(for: list.recordID) }

            try await engine.sendChanges()
            #expect(engine.state.pendingRecordZoneChanges.isEmpty)
            #expect(try await database.record(for: list.recordID).recordType == "Note")
        }
    }

    @Test(arguments: TestEngine.all) func cancellingStopsASendAndKeepsWhatIsPending(storeEngine: TestEngine) async throws {
        try await withContactsDevices(on: storeEngine) { devices in
            let database = try devices.container().privateCloudDatabase
            let delegate = RecordingDelegate()
            let engine = engine(database, delegate)
            let zone = RecordZone(zoneName: "Work")
            let memo = Record(recordType: "Note", recordID: Record.ID(recordName: "memo", zoneID: zone.zoneID))
            await delegate.set(memo)
            await delegate.setOnEvent { event, engine in
                if case .willSendChanges = event { await engine.cancelOperations() }
            }
            engine.state.add(pendingDatabaseChanges: [.saveZone(zone)])
            engine.state.add(pendingRecordZoneChanges: [.saveRecord(memo.recordID)])
            do {
                try await engine.sendChanges()
                Issue.record("a cancelled send reported success")
            } catch let error as StratusError {
                #expect(error.code == .operationCancelled)
            }
            #expect(engine.state.pendingRecordZoneChanges == [.saveRecord(memo.recordID)])
            #expect(engine.state.pendingDatabaseChanges == [.saveZone(zone)])
            #expect(await delegate.events.contains("didSendChanges"))

            await delegate.setOnEvent { _, _ in }
            try await engine.sendChanges()
            #expect(engine.state.pendingRecordZoneChanges.isEmpty)
        }
    }

    @Test(arguments: TestEngine.all) func anEditAddedWhileItsOlderVersionIsSentStaysPending(storeEngine: TestEngine) async throws {
        try await withContactsDevices(on: storeEngine) { devices in
            let database = try devices.container().privateCloudDatabase
            let delegate = EditingWhileSending()
            var configuration = SyncEngine.Configuration(database: database, stateSerialization: nil, delegate: delegate)
            configuration.automaticallySync = false
            let engine = SyncEngine(configuration)
            let zone = RecordZone(zoneName: "Work")
            let id = Record.ID(recordName: "memo", zoneID: zone.zoneID)
            engine.state.add(pendingDatabaseChanges: [.saveZone(zone)])
            engine.state.add(pendingRecordZoneChanges: [.saveRecord(id)])
            try await engine.sendChanges()
            // The user typed again while version 1 was on its way: version 2 is still to send.
            #expect(engine.state.pendingRecordZoneChanges == [.saveRecord(id)])
            #expect(try await database.record(for: id)["text"] as? String == "version 1")
            try await engine.sendChanges()
            #expect(engine.state.pendingRecordZoneChanges.isEmpty)
            // The newest edit is what the store holds (each batch is built afresh).
            let latest = await delegate.version
            #expect(latest > 1)
            #expect(try await database.record(for: id)["text"] as? String == "version \(latest)")
        }
    }

    @Test(arguments: TestEngine.all) func pollingFindsChangesAfterTheDatabaseTokenExpired(storeEngine: TestEngine) async throws {
        try await withContactsDevices(on: storeEngine) { devices in
            let other = try devices.container().privateCloudDatabase
            let delegate = RecordingDelegate()
            var configuration = SyncEngine.Configuration(database: try devices.container().privateCloudDatabase, stateSerialization: nil, delegate: delegate)
            configuration.changePollInterval = 0.05
            let engine = SyncEngine(configuration)
            let startDeadline = ContinuousClock.now + Self.patience
            while ContinuousClock.now < startDeadline, await !delegate.events.contains("didFetchChanges") {
                try await Task.sleep(nanoseconds: 50_000_000)
            }
            // Another device's deletion, compacted away: the engine's database token expires.
            _ = try await other.save(RecordZone(zoneName: "Scratch"))
            _ = try await other.deleteRecordZone(withID: RecordZone.ID(zoneName: "Scratch"))
            try await other.compactChangeHistory(retention: 0)
            _ = try await other.save(RecordZone(zoneName: "Later"))
            _ = try await other.save(Record(recordType: "Note", recordID: Record.ID(recordName: "late", zoneID: RecordZone.ID(zoneName: "Later"))))
            let deadline = ContinuousClock.now + Self.patience
            while ContinuousClock.now < deadline, await !delegate.events.contains("fetchedRecordZoneChanges(1 modification(s), 0 deletion(s))") {
                try await Task.sleep(nanoseconds: 50_000_000)
            }
            #expect(await delegate.events.contains("fetchedRecordZoneChanges(1 modification(s), 0 deletion(s))"))
            withExtendedLifetime(engine) {}
        }
    }

    @Test(arguments: TestEngine.all) func thePublicDatabaseIsRefused(storeEngine: TestEngine) async throws {
        try await withContactsDevices(on: storeEngine) { devices in
            let engine = engine(try devices.container().publicCloudDatabase, RecordingDelegate())
            do {
                try await engine.fetchChanges()
                Issue.record("a sync of the public database reported success")
            } catch let error as StratusError {
                #expect(error.code == .invalidArguments)
            }
        }
    }

    @Test(arguments: TestEngine.all) func untrackedChangesAreAskedForUntilTheDelegateHasNone(storeEngine: TestEngine) async throws {
        try await withContactsDevices(on: storeEngine) { devices in
            let database = try devices.container().privateCloudDatabase
            _ = try await database.save(RecordZone(zoneName: "Work"))
            let delegate = UntrackedDelegate(records: (0..<3).map {
                Record(recordType: "Note", recordID: Record.ID(recordName: "n\($0)", zoneID: RecordZone.ID(zoneName: "Work")))
            })
            var configuration = SyncEngine.Configuration(database: database, stateSerialization: nil, delegate: delegate)
            configuration.automaticallySync = false
            let engine = SyncEngine(configuration)
            engine.state.hasPendingUntrackedChanges = true
            try await engine.sendChanges()
            #expect(!engine.state.hasPendingUntrackedChanges)
            #expect(await delegate.remaining.isEmpty)
            for name in ["n0", "n1", "n2"] {
                #expect(try await database.record(for: Record.ID(recordName: name, zoneID: RecordZone.ID(zoneName: "Work"))).recordType == "Note")
            }
        }
    }
}

/// Tracks its own changes: one record per batch, as an app with its own outbox would.
final actor UntrackedDelegate: SyncEngineDelegate {
    var remaining: [Record]
    init(records: [Record]) { remaining = records }

    func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
        if case .sentRecordZoneChanges(let sent) = event {
            let saved = Set(sent.savedRecords.map(\.recordID))
            remaining.removeAll { saved.contains($0.recordID) }
        }
    }

    func nextRecordZoneChangeBatch(_ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine) async -> SyncEngine.RecordZoneChangeBatch? {
        guard let next = remaining.first else { return nil }
        return SyncEngine.RecordZoneChangeBatch(recordsToSave: [next])
    }
}

/// Adds its record's change again while the batch that carries the older version is built,
/// as an app whose user edits during a send does.
final actor EditingWhileSending: SyncEngineDelegate {
    var version = 0
    /// The record as last saved, whose system fields the next save carries.
    var lastSaved: Record?

    func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
        if case .sentRecordZoneChanges(let sent) = event, let saved = sent.savedRecords.first { lastSaved = saved }
    }

    func nextRecordZoneChangeBatch(_ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine) async -> SyncEngine.RecordZoneChangeBatch? {
        let pending = syncEngine.state.pendingRecordZoneChanges.filter { context.options.scope.contains($0) }
        guard let change = pending.first else { return nil }
        version += 1
        let record = lastSaved?.copy() as? Record ?? Record(recordType: "Note", recordID: change.recordID)
        record["text"] = "version \(version)"
        if version == 1 { syncEngine.state.add(pendingRecordZoneChanges: [.saveRecord(change.recordID)]) }
        return SyncEngine.RecordZoneChangeBatch(recordsToSave: [record])
    }
}
