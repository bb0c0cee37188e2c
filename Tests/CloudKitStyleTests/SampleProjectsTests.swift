import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// Code in the shape of Apple's CloudKit sample projects (queries, private database sync,
// zones, notifications, encryption) and of command-line tools built on them, after the
// mechanical port. The CloudKit original is in the comment above each test.

@Suite("Apple's CloudKit sample projects' patterns, ported")
struct SampleProjectsTests {
    // let predicates = filters.map { NSPredicate(format: "%K == %@", $0.key, $0.value) }
    // let query = CKQuery(recordType: "Contact", predicate: NSCompoundPredicate(type: .and, subpredicates: predicates))
    @Test("NSCompoundPredicate(type:subpredicates:) for AND and NOT", arguments: TestEngine.all)
    func compoundPredicateByType(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            for (name, city, age) in [("ann", "Oslo", 30), ("bob", "Oslo", 41), ("cy", "Rome", 30)] {
                let contact = Record(recordType: "Contact", recordID: Record.ID(recordName: name))
                contact["city"] = city
                contact["age"] = age
                _ = try await database.save(contact)
            }
            let filters: [(String, any Sendable)] = [("city", "Oslo"), ("age", 30)]
            let predicates = try filters.map { try QueryPredicate(format: "%K == %@", $0.0, $0.1) }
            let both = QueryPredicate(type: .and, subpredicates: predicates)
            let (matched, _) = try await database.records(matching: Query(recordType: "Contact", predicate: both))
            #expect(matched.map(\.0.recordName) == ["ann"])

            let notRome = QueryPredicate(type: .not, subpredicates: [try QueryPredicate(format: "city == %@", "Rome")])
            let (others, _) = try await database.records(matching: Query(recordType: "Contact", predicate: notRome))
            #expect(Set(others.map(\.0.recordName)) == ["ann", "bob"])

            let none = QueryPredicate(type: .and, subpredicates: [])
            let (all, _) = try await database.records(matching: Query(recordType: "Contact", predicate: none))
            #expect(all.count == 3, "an empty AND is true, as NSCompoundPredicate's")
        }
    }

    // if ckerror.code == .partialFailure, let dict = ckerror.userInfo[CKPartialErrorsByItemIDKey] as? [AnyHashable: CKError] { … }
    @Test("a partial failure's errors by item, read from userInfo", arguments: TestEngine.all)
    func partialErrorsFromUserInfo(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let zoneID = RecordZone.ID(zoneName: "Contacts")
            _ = try await database.modifyRecordZones(saving: [RecordZone(zoneID: zoneID)])
            let record = Record(recordType: "Contact", recordID: Record.ID(zoneID: RecordZone.ID(zoneName: "Missing")))
            let save = ModifyRecordsOperation(recordsToSave: [record])
            let failure = Collected<Error?>(nil)
            await run(database) { finish in
                save.modifyRecordsResultBlock = { result in
                    if case .failure(let error) = result { failure.value = error }
                    finish()
                }
                return save
            }
            let error = try #require(failure.value as? StratusError)
            #expect(error.code == .partialFailure)
            let byItem = try #require(error.userInfo[PartialErrorsByItemIDKey] as? [AnyHashable: StratusError])
            #expect(byItem.values.map(\.code) == [.zoneNotFound])
            // Apple's samples cast to [NSObject: CKError]; the IDs are boxed as objects on Linux.
            let byObject = try #require(error.userInfo[PartialErrorsByItemIDKey] as? [NSObject: StratusError])
            #expect(byObject.values.map(\.code) == [.zoneNotFound])
        }
    }

    // A private-database sync in the shape of Apple's sample: the zone and the subscription made
    // once (modifyRecordZones(saving: [zone]), modifySubscriptions(saving: [subscription])), new
    // records named CKRecord.ID(zoneID:), changes read in a moreComing loop, and the change token
    // kept as NSKeyedArchiver data between runs.
    @Test("the private-sync sample: zone, zone subscription, change loop, archived token", arguments: TestEngine.all)
    func privateSyncSample(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let sync = ContactSync(database: container.privateCloudDatabase)
            try await sync.initialize()
            try await sync.initialize()   // a second launch finds the subscription
            #expect(try await container.privateCloudDatabase.allSubscriptions().map(\.subscriptionID) == ["changes-subscription-id"])

            try await sync.addContact(name: "Ann")
            try await sync.addContact(name: "Bob")
            try await sync.fetchLatestChanges()
            #expect(sync.contacts.values.sorted() == ["Ann", "Bob"])

            let restarted = ContactSync(database: container.privateCloudDatabase, tokenData: sync.tokenData)
            try await restarted.deleteContact(name: "Ann", knownContacts: sync.contacts)
            try await sync.fetchLatestChanges()
            #expect(sync.contacts.values.sorted() == ["Bob"])
        }
    }
}

extension SampleProjectsTests {
    // Apple's zone-sharing sample (its non-sharing part): a zone per group made with
    // database.save(zone) before each contact, private zones other than the default one, the
    // shared database's zones (none here) read with async let, and each zone's changes read
    // in parallel in a task group.
    @Test("the zone-sharing sample's reads: zones per group, async let, a task group of zone change loops", arguments: TestEngine.all)
    func zoneGroupsInParallel(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            for (name, group) in [("Ann", "Family"), ("Bob", "Work"), ("Cy", "Work"), ("Di", "Club"), ("Ed", "Family")] {
                let zone = RecordZone(zoneName: group)
                try await database.save(zone)
                let contact = Record(recordType: "Contact", recordID: Record.ID(zoneID: zone.zoneID))
                contact["name"] = name
                try await database.save(contact)
            }
            _ = try await database.save(Record(recordType: "Contact"))   // the default zone is left out

            async let privateZones = database.allRecordZones().filter { $0.zoneID != RecordZone.default().zoneID }
            async let sharedZones = container.sharedCloudDatabase.allRecordZones()
            let (zones, shared) = try await (privateZones, sharedZones)
            #expect(shared.isEmpty)

            let groups = try await withThrowingTaskGroup(of: (String, [String]).self) { group in
                for zone in zones {
                    group.addTask {
                        var names: [String] = []
                        var token: ServerChangeToken?
                        var more = true
                        while more {
                            let changes = try await database.recordZoneChanges(inZoneWith: zone.zoneID, since: token)
                            names += changes.modificationResultsByID.values.compactMap { try? $0.get().record["name"] as? String }
                            more = changes.moreComing
                            token = changes.changeToken
                        }
                        return (zone.zoneID.zoneName, names.sorted())
                    }
                }
                var byGroup: [String: [String]] = [:]
                for try await (name, names) in group { byGroup[name] = names }
                return byGroup
            }
            #expect(groups == ["Club": ["Di"], "Family": ["Ann", "Ed"], "Work": ["Bob", "Cy"]])
        }
    }
}

/// What Apple's private-sync sample keeps: contacts by record name, and the last change token.
final class ContactSync {
    let database: Database
    let zone = RecordZone(zoneName: "Contacts")
    let subscriptionID = "changes-subscription-id"
    var contacts: [String: String] = [:]
    var tokenData: Data?

    init(database: Database, tokenData: Data? = nil) {
        self.database = database
        self.tokenData = tokenData
    }

    var lastChangeToken: ServerChangeToken? {
        guard let tokenData else { return nil }
        return try? NSKeyedUnarchiver.unarchivedObject(ofClass: ServerChangeToken.self, from: tokenData)
    }

    func initialize() async throws {
        _ = try await database.modifyRecordZones(saving: [zone])
        let found = try? await database.subscription(for: subscriptionID)
        guard found == nil else { return }
        let subscription = RecordZoneSubscription(zoneID: zone.zoneID, subscriptionID: subscriptionID)
        let info = Subscription.NotificationInfo()
        info.shouldSendContentAvailable = true
        subscription.notificationInfo = info
        _ = try await database.modifySubscriptions(saving: [subscription])
    }

    func addContact(name: String) async throws {
        let record = Record(recordType: "Contact", recordID: Record.ID(zoneID: zone.zoneID))
        record["name"] = name
        let saved = try await database.save(record)
        contacts[saved.recordID.recordName] = name
    }

    func deleteContact(name: String, knownContacts: [String: String]) async throws {
        guard let id = knownContacts.first(where: { $0.value == name })?.key else { return }
        try await database.deleteRecord(withID: Record.ID(recordName: id, zoneID: zone.zoneID))
    }

    func fetchLatestChanges() async throws {
        var awaitingChanges = true
        while awaitingChanges {
            let changes = try await database.recordZoneChanges(inZoneWith: zone.zoneID, since: lastChangeToken)
            let changed = changes.modificationResultsByID.compactMapValues { try? $0.get().record }
            for (id, record) in changed {
                if let name = record["name"] as? String { contacts[id.recordName] = name }
            }
            for deletion in changes.deletions { contacts.removeValue(forKey: deletion.recordID.recordName) }
            tokenData = try NSKeyedArchiver.archivedData(withRootObject: changes.changeToken, requiringSecureCoding: true)
            awaitingChanges = changes.moreComing
        }
    }
}
