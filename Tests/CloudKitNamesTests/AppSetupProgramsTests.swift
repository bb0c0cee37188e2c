import CloudKit
import Foundation
import StratusTestSupport
import Testing

// An app's start-up and plumbing as CloudKit code writes it: the account check, the user
// record, subscriptions with notification info, shares with their participants, and the
// generic helpers apps build on CKRecordValueProtocol and CKRecordKeyValueSetting.

/// A model type mapped to and from records, through CloudKit's value protocols.
protocol CloudRecordConvertible {
    static var recordType: CKRecord.RecordType { get }
    init?(record: CKRecord)
    func write(to values: CKRecordKeyValueSetting)
}

extension CKRecord {
    func decode<T: CKRecordValueProtocol>(_ key: String, as type: T.Type = T.self) -> T? {
        self[key] as? T
    }

    func encode<T: CKRecordValueProtocol>(_ value: T?, forKey key: String) {
        self[key] = value
    }
}

struct Contact: CloudRecordConvertible {
    static let recordType: CKRecord.RecordType = "Contact"
    var name: String
    var birthday: Date?
    var favouriteNumbers: [Int]
    var phone: String

    init(name: String, birthday: Date?, favouriteNumbers: [Int], phone: String) {
        self.name = name
        self.birthday = birthday
        self.favouriteNumbers = favouriteNumbers
        self.phone = phone
    }

    init?(record: CKRecord) {
        guard record.recordType == Self.recordType, let name = record.decode("name", as: String.self) else { return nil }
        self.name = name
        self.birthday = record.decode("birthday")
        self.favouriteNumbers = record.decode("favouriteNumbers") ?? []
        self.phone = record.encryptedValues["phone"] as? String ?? ""
    }

    func write(to values: CKRecordKeyValueSetting) {
        values["name"] = name
        values["birthday"] = birthday
        values["favouriteNumbers"] = favouriteNumbers
    }

    func record(in zoneID: CKRecordZone.ID) -> CKRecord {
        let record = CKRecord(recordType: Self.recordType, recordID: CKRecord.ID(recordName: name, zoneID: zoneID))
        write(to: record)
        record.encryptedValues["phone"] = phone
        return record
    }
}

@Suite struct AppSetupProgramsTests {
    @Test(arguments: TestEngine.all)
    func accountStatusAndUserRecordAtStartUp(engine: TestEngine) async throws {
        try await withTestCloud(on: engine) { cloud in
            let container = try cloud.container()
            #expect(container.containerIdentifier == "iCloud.com.example.gallery")
            let (status, statusError) = await awaitCompletion { done in container.accountStatus { done(($0, $1)) } }
            #expect(statusError == nil)
            switch status {
            case .available: break
            case .noAccount, .restricted, .couldNotDetermine, .temporarilyUnavailable:
                Issue.record("the account is \(status)")
            @unknown default:
                Issue.record("an unknown account status")
            }
            #expect(try await container.accountStatus() == .available)

            let (userRecordID, idError) = await awaitCompletion { done in container.fetchUserRecordID { done(($0, $1)) } }
            #expect(idError == nil)
            let recordID = try #require(userRecordID)
            let userRecord = try await container.publicCloudDatabase.record(for: recordID)
            #expect(userRecord.recordType == CKRecord.SystemType.userRecord)
            userRecord["nickname"] = "Ada"
            _ = try await container.publicCloudDatabase.save(userRecord)
            #expect(try await container.publicCloudDatabase.record(for: recordID)["nickname"] as? String == "Ada")

            for scope in [CKDatabase.Scope.public, .private, .shared] {
                #expect(container.database(with: scope).databaseScope == scope)
            }
            #expect(CKDatabase.Scope(rawValue: 2) == .private)
        }
    }

    @Test(arguments: TestEngine.all)
    func subscriptionsOfEveryKind(engine: TestEngine) async throws {
        try await withTestCloud(on: engine) { cloud in
            let container = try cloud.container()
            let database = container.privateCloudDatabase
            let zone = CKRecordZone(zoneName: "Inbox")
            _ = try await database.save(zone)

            let urgent = CKQuerySubscription(recordType: "Message", predicate: NSPredicate(format: "priority > %d", 2),
                                             subscriptionID: "urgent-messages",
                                             options: [.firesOnRecordCreation, .firesOnRecordUpdate, .firesOnRecordDeletion])
            urgent.zoneID = zone.zoneID
            let info = CKSubscription.NotificationInfo()
            info.title = "Urgent"
            info.alertBody = "An urgent message arrived"
            info.soundName = "default"
            info.shouldBadge = true
            info.shouldSendContentAvailable = true
            info.desiredKeys = ["subject"]
            info.category = "MESSAGE"
            urgent.notificationInfo = info

            let zoneSubscription = CKRecordZoneSubscription(zoneID: zone.zoneID, subscriptionID: "inbox-zone")
            zoneSubscription.recordType = "Message"
            let silent = CKSubscription.NotificationInfo()
            silent.shouldSendContentAvailable = true
            zoneSubscription.notificationInfo = silent

            let databaseSubscription = CKDatabaseSubscription(subscriptionID: "private-changes")
            databaseSubscription.notificationInfo = silent

            let operation = CKModifySubscriptionsOperation(subscriptionsToSave: [urgent, zoneSubscription, databaseSubscription], subscriptionIDsToDelete: nil)
            var savedIDs: [CKSubscription.ID] = []
            operation.perSubscriptionSaveBlock = { subscriptionID, result in
                if case .success = result { savedIDs.append(subscriptionID) }
            }
            let (saved, _, saveError) = await awaitCompletion { done in
                operation.modifySubscriptionsCompletionBlock = { saved, deleted, error in done((saved, deleted, error)) }
                database.add(operation)
            }
            #expect(saveError == nil)
            #expect(saved?.count == 3)
            #expect(Set(savedIDs) == ["urgent-messages", "inbox-zone", "private-changes"])

            let all = try await database.allSubscriptions()
            #expect(Set(all.map(\.subscriptionID)) == ["urgent-messages", "inbox-zone", "private-changes"])
            let fetched = try await database.subscription(for: "urgent-messages")
            let query = try #require(fetched as? CKQuerySubscription)
            #expect(query.subscriptionType == .query)
            #expect(query.recordType == "Message")
            #expect(query.zoneID == zone.zoneID)
            #expect(query.notificationInfo?.title == "Urgent")
            #expect(query.notificationInfo?.shouldBadge == true)
            #expect((all.first { $0.subscriptionID == "inbox-zone" } as? CKRecordZoneSubscription)?.recordType == "Message")
            #expect(all.first { $0.subscriptionID == "private-changes" }?.subscriptionType == .database)

            let (subscriptions, fetchError) = await awaitCompletion { done in database.fetchAllSubscriptions { done(($0, $1)) } }
            #expect(fetchError == nil)
            #expect(subscriptions?.count == 3)

            let deletedID = try await database.deleteSubscription(withID: "inbox-zone")
            #expect(deletedID == "inbox-zone")
            let (_, deleteResults) = try await database.modifySubscriptions(saving: [], deleting: ["private-changes"])
            try deleteResults["private-changes"]?.get()
            #expect(try await database.allSubscriptions().map(\.subscriptionID) == ["urgent-messages"])
        }
    }

    /// An app's handler of CloudKit's pushes, as written for `didReceiveRemoteNotification`.
    static func handle(_ userInfo: [AnyHashable: Any]) -> String {
        guard let notification = CKNotification(fromRemoteNotificationDictionary: userInfo) else { return "not CloudKit's" }
        switch notification.notificationType {
        case .query:
            guard let query = notification as? CKQueryNotification, let recordID = query.recordID else { return "query without a record" }
            return "\(query.queryNotificationReason == .recordDeleted ? "remove" : "refresh") \(recordID.recordName) in \(recordID.zoneID.zoneName)"
        case .recordZone:
            return "fetch changes of \((notification as? CKRecordZoneNotification)?.recordZoneID?.zoneName ?? "?")"
        case .database:
            return "fetch database changes of \((notification as? CKDatabaseNotification)?.databaseScope == .private ? "private" : "another")"
        default:
            return "ignored"
        }
    }

    @Test
    func remoteNotificationsAsCloudKitSendsThem() {
        let ck: [String: Any] = ["cid": "iCloud.com.example.gallery", "nid": "2b7e1c9a-5f0d-4a36-8c1e-9d4f3a2b6c70"]
        func payload(_ part: String, _ values: [String: Any]) -> [AnyHashable: Any] {
            ["aps": ["content-available": 1], "ck": ck.merging([part: values]) { $1 }]
        }
        #expect(Self.handle(payload("qry", ["dbs": 2, "fo": 3, "rid": "photo-7", "sid": "photos", "zid": "Gallery", "zoid": "_defaultOwner"])) == "remove photo-7 in Gallery")
        #expect(Self.handle(payload("qry", ["dbs": 2, "fo": 1, "rid": "photo-8", "sid": "photos", "zid": "Gallery"])) == "refresh photo-8 in Gallery")
        #expect(Self.handle(payload("fet", ["dbs": 2, "sid": "gallery-zone", "zid": "Gallery", "zoid": "_defaultOwner"])) == "fetch changes of Gallery")
        #expect(Self.handle(payload("met", ["dbs": 2, "sid": "private-changes"])) == "fetch database changes of private")
        #expect(Self.handle(["aps": ["alert": "Hello"]]) == "not CloudKit's")
        #expect(CKQueryNotification(fromRemoteNotificationDictionary: payload("met", ["dbs": 2])) == nil)
    }

    @Test(arguments: TestEngine.all)
    func modelTypesThroughTheValueProtocols(engine: TestEngine) async throws {
        try await withTestCloud(on: engine) { cloud in
            let database = try cloud.container().privateCloudDatabase
            let zone = CKRecordZone(zoneName: "Contacts")
            _ = try await database.save(zone)
            let ada = Contact(name: "Ada", birthday: Date(timeIntervalSince1970: -4_000_000_000), favouriteNumbers: [1, 1, 2, 3], phone: "+44 20 7946 0000")
            let record = ada.record(in: zone.zoneID)
            record.encode(Int64(36), forKey: "age")
            record.encode(nil as String?, forKey: "nickname")
            _ = try await database.save(record)

            let fetched = try await database.record(for: record.recordID)
            let contact = try #require(Contact(record: fetched))
            #expect(contact.name == "Ada")
            #expect(contact.birthday == ada.birthday)
            #expect(contact.favouriteNumbers == [1, 1, 2, 3])
            #expect(contact.phone == "+44 20 7946 0000")
            #expect(fetched.decode("age", as: Int64.self) == 36)
            #expect(fetched.decode("nickname", as: String.self) == nil)
            #expect(fetched.encryptedValues.allKeys().contains("phone"))

            // Both holders of values take the same code.
            let holders: [CKRecordKeyValueSetting] = [fetched, fetched.encryptedValues]
            for holder in holders {
                holder["note"] = "seen"
            }
            #expect(fetched["note"] as? String == "seen")
            #expect(fetched.encryptedValues["note"] as? String == "seen")
        }
    }

    @Test(arguments: TestEngine.all)
    func aShareOfARecordWithItsParticipants(engine: TestEngine) async throws {
        try await withTestCloud(on: engine) { cloud in
            let container = try cloud.container()
            let database = container.privateCloudDatabase
            let zone = CKRecordZone(zoneName: "Trips")
            _ = try await database.save(zone)
            let trip = CKRecord(recordType: "Trip", recordID: CKRecord.ID(recordName: "lisbon", zoneID: zone.zoneID))
            trip["destination"] = "Lisbon"

            let share = CKShare(rootRecord: trip)
            share[CKShare.SystemFieldKey.title] = "Lisbon trip"
            share.publicPermission = .readOnly
            let operation = CKModifyRecordsOperation(recordsToSave: [trip, share], recordIDsToDelete: nil)
            let result: Result<Void, Error> = await awaitCompletion { done in
                operation.modifyRecordsResultBlock = { done($0) }
                database.add(operation)
            }
            try result.get()

            let savedShare = try #require(try await database.record(for: share.recordID) as? CKShare)
            #expect(savedShare[CKShare.SystemFieldKey.title] as? String == "Lisbon trip")
            #expect(savedShare.publicPermission == .readOnly)
            #expect(savedShare.url != nil)
            #expect(savedShare.owner.role == .owner)
            #expect(savedShare.owner.acceptanceStatus == .accepted)
            #expect(savedShare.currentUserParticipant?.role == .owner)
            #expect(savedShare.participants.count == 1)
            let savedTrip = try await database.record(for: trip.recordID)
            #expect(savedTrip.share?.recordID == share.recordID)

            let zoneShare = CKShare(recordZoneID: CKRecordZone.ID(zoneName: "Shared", ownerName: CKCurrentUserDefaultName))
            #expect(zoneShare.recordID.recordName == CKRecordNameZoneWideShare)
        }
    }
}
