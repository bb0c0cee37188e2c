import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

@Suite("Archiving records, zones, subscriptions, change tokens and cursors with NSKeyedArchiver", .timeLimit(.minutes(30)))
struct ArchivingTests {
    /// The system fields of `record`, as sync code archives them.
    static func systemFields(of record: Record) -> Data {
        let archiver = NSKeyedArchiver(requiringSecureCoding: true)
        record.encodeSystemFields(with: archiver)
        archiver.finishEncoding()
        return archiver.encodedData
    }

    static func record(fromSystemFields data: Data) throws -> Record? {
        let unarchiver = try NSKeyedUnarchiver(forReadingFrom: data)
        unarchiver.requiresSecureCoding = true
        defer { unarchiver.finishDecoding() }
        return Record(coder: unarchiver)
    }

    @Test("encodeSystemFields keeps only the system fields; the restored record saves its changes without a conflict")
    func systemFieldsRoundTrip() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.container().privateCloudDatabase
            let zone = RecordZone.ID(zoneName: "Notes")
            try await database.save(RecordZone(zoneID: zone))
            let book = Record(recordType: "Book", recordID: Record.ID(recordName: "book", zoneID: zone))
            let note = Record(recordType: "Note", recordID: Record.ID(recordName: "note", zoneID: zone))
            note["title"] = "first"
            note["pages"] = 3
            note.setParent(book)
            let saved = try await database.modifyRecords(saving: [book, note], deleting: []).saveResults[note.recordID]!.get()

            let restored = try #require(try Self.record(fromSystemFields: Self.systemFields(of: saved)))
            #expect(restored.recordID == saved.recordID)
            #expect(restored.recordType == "Note")
            #expect(restored.recordChangeTag == saved.recordChangeTag)
            #expect(restored.creationDate == saved.creationDate)
            #expect(restored.modificationDate == saved.modificationDate)
            #expect(restored.creatorUserRecordID == saved.creatorUserRecordID)
            #expect(restored.lastModifiedUserRecordID == saved.lastModifiedUserRecordID)
            #expect(restored.parent?.recordID == book.recordID)
            #expect(restored.allKeys().isEmpty, "system fields only, as CloudKit")
            #expect(restored.changedKeys().isEmpty)

            restored["title"] = "second"
            let updated = try await database.save(restored)
            #expect(updated["title"] as? String == "second")
            #expect(updated["pages"] as? Int == 3, "only the changed key was sent")

            // The first archive is now stale: saving from it is a conflict, as in CloudKit.
            let stale = try #require(try Self.record(fromSystemFields: Self.systemFields(of: saved)))
            stale["title"] = "third"
            let error = await caughtError { try await database.save(stale) }
            #expect(stratusError(error)?.code == .serverRecordChanged)
        }
    }

    @Test("archivedData(withRootObject:) keeps the whole record, unsaved changes included")
    func wholeRecordRoundTrip() throws {
        let record = Record(recordType: "Note", recordID: Record.ID(recordName: "n1", zoneID: RecordZone.ID(zoneName: "Z", ownerName: "bob")))
        record["title"] = "Milk"
        record["count"] = 2
        record["price"] = 2.0
        record["tags"] = ["a", "b"]
        record["when"] = Date(timeIntervalSinceReferenceDate: 12.5)
        record["place"] = Location(latitude: 1, longitude: 2)
        record["blob"] = Data([0, 1, 2])
        record["link"] = Record.Reference(recordID: Record.ID(recordName: "other"), action: .deleteSelf)
        record.encryptedValues["secret"] = Data([9])
        let data = try NSKeyedArchiver.archivedData(withRootObject: record, requiringSecureCoding: true)
        let back = try #require(try NSKeyedUnarchiver.unarchivedObject(ofClass: Record.self, from: data))
        #expect(back !== record)
        #expect(back.recordID == record.recordID)
        #expect(back.fieldValues == record.fieldValues)
        #expect(back.encryptedKeys == ["secret"])
        #expect(back.changedKeys() == record.changedKeys())
        #expect(back.recordChangeTag == nil)
    }

    @Test("a record holding values no save accepts (a NaN, an infinite date) is archived and read back whole; the save then refuses them")
    func unsavableValuesRoundTrip() throws {
        let record = Record(recordType: "Reading", recordID: Record.ID(recordName: "r1"))
        record["value"] = Double.nan
        record["values"] = [1.0, -.infinity]
        record["at"] = Date(timeIntervalSinceReferenceDate: .infinity)
        let data = try NSKeyedArchiver.archivedData(withRootObject: record, requiringSecureCoding: true)
        let back = try #require(try NSKeyedUnarchiver.unarchivedObject(ofClass: Record.self, from: data))
        #expect((back["value"] as? Double)?.isNaN == true)
        #expect(back["values"] as? [Double] == [1.0, -.infinity])
        #expect(back["at"] as? Date == Date(timeIntervalSinceReferenceDate: .infinity))
        #expect(throws: StratusError.self) { try back.validateForSave() }
    }

    @Test("an archive that holds no record reads as nil")
    func notARecord() throws {
        let archiver = NSKeyedArchiver(requiringSecureCoding: true)
        archiver.encode("x" as NSString, forKey: "other")
        archiver.finishEncoding()
        #expect(try Self.record(fromSystemFields: archiver.encodedData) == nil)
    }

    @Test("a ServerChangeToken archives with NSKeyedArchiver and continues the fetch")
    func changeToken() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.container().privateCloudDatabase
            let zone = RecordZone.ID(zoneName: "Notes")
            try await database.save(RecordZone(zoneID: zone))
            try await database.save(makeRecord("Note", "n1", zoneID: zone))
            let token = try await database.recordZoneChanges(inZoneWith: zone, since: nil).changeToken

            let data = try NSKeyedArchiver.archivedData(withRootObject: token, requiringSecureCoding: true)
            let back = try #require(try NSKeyedUnarchiver.unarchivedObject(ofClass: ServerChangeToken.self, from: data))
            #expect(back == token)
            #expect(back.serialized == token.serialized)
            #expect(back.hash == token.hash)
            #expect(back.copy() as? ServerChangeToken == token)

            try await database.save(makeRecord("Note", "n2", zoneID: zone))
            let next = try await database.recordZoneChanges(inZoneWith: zone, since: back)
            #expect(next.modificationResultsByID.keys.map(\.recordName) == ["n2"])
        }
    }

    @Test("a query cursor archives with NSKeyedArchiver and continues the query")
    func cursor() async throws {
        try await SQLiteFixture.with { fixture in
            try await TestDatabase.save(items(5), in: fixture.database)
            let query = Query(recordType: "Item")
            query.sortDescriptors = [RecordSortDescriptor(key: "n", ascending: true)]
            let first = try await fixture.database.records(matching: query, resultsLimit: 2)
            let cursor = try #require(first.queryCursor)
            let data = try NSKeyedArchiver.archivedData(withRootObject: cursor, requiringSecureCoding: true)
            let back = try #require(try NSKeyedUnarchiver.unarchivedObject(ofClass: QueryOperation.Cursor.self, from: data))
            #expect(back == cursor)
            #expect(back.serialized == cursor.serialized)
            let rest = try await fixture.database.records(continuingMatchFrom: back, resultsLimit: 10)
            #expect(rest.matchResults.map(\.0.recordName) == ["item-00002", "item-00003", "item-00004"])
        }
    }

    @Test("record zones archive with NSKeyedArchiver, alone and in an array, and a restored zone is saved and used")
    func recordZones() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.container().privateCloudDatabase
            let fetched = try await database.save(RecordZone(zoneName: "Notes"))
            let other = RecordZone(zoneID: RecordZone.ID(zoneName: "Shared", ownerName: "_a1b2c3"), capabilities: [.fetchChanges])

            let one = try NSKeyedArchiver.archivedData(withRootObject: fetched, requiringSecureCoding: true)
            let back = try #require(try NSKeyedUnarchiver.unarchivedObject(ofClass: RecordZone.self, from: one))
            #expect(back.zoneID == fetched.zoneID)
            #expect(back.capabilities == fetched.capabilities)
            #expect(back.copy() as? RecordZone === back)

            // A list of zones, as an app caches what fetchAllRecordZones answered.
            let list = try NSKeyedArchiver.archivedData(withRootObject: [fetched, other, RecordZone.default], requiringSecureCoding: true)
            let zones = try #require(try NSKeyedUnarchiver.unarchivedObject(ofClasses: [NSArray.self, RecordZone.self], from: list) as? [RecordZone])
            #expect(zones.map(\.zoneID) == [fetched.zoneID, other.zoneID, .default])
            #expect(zones.map(\.capabilities) == [fetched.capabilities, [.fetchChanges], RecordZone.default.capabilities])
            #expect((NSKeyedUnarchiver.unarchiveObject(with: list) as? [RecordZone])?.count == 3)

            try await database.deleteRecordZone(withID: fetched.zoneID)
            let saved = try await database.save(back)
            #expect(saved.zoneID == fetched.zoneID)
            try await database.save(makeRecord("Note", "n1", zoneID: back.zoneID))
            #expect(try await database.record(for: Record.ID(recordName: "n1", zoneID: back.zoneID)).recordType == "Note")

            let archiver = NSKeyedArchiver(requiringSecureCoding: true)
            archiver.encode("x" as NSString, forKey: "other")
            archiver.finishEncoding()
            let unarchiver = try NSKeyedUnarchiver(forReadingFrom: archiver.encodedData)
            #expect(RecordZone(coder: unarchiver) == nil)
        }
    }

    @Test("subscriptions archive with NSKeyedArchiver as their own kind, notification info and all, and a restored one is saved")
    func subscriptions() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.container().privateCloudDatabase
            let zone = RecordZone.ID(zoneName: "Notes")
            try await database.save(RecordZone(zoneID: zone))

            let query = QuerySubscription(recordType: "Note", predicate: try QueryPredicate(format: "pages > %@ AND title BEGINSWITH %@", 3, "A"),
                                          subscriptionID: "long-notes", options: [.firesOnRecordCreation, .firesOnRecordUpdate])
            query.zoneID = zone
            let info = NotificationInfo()
            info.desiredKeys = ["title"]
            info.alertBody = "A long note"
            info.shouldBadge = true
            query.notificationInfo = info
            let zoneSubscription = RecordZoneSubscription(zoneID: zone, subscriptionID: "notes-zone")
            zoneSubscription.recordType = "Note"
            zoneSubscription.notificationInfo = NotificationInfo()
            let everything = DatabaseSubscription(subscriptionID: "everything")
            everything.notificationInfo = NotificationInfo()

            let data = try NSKeyedArchiver.archivedData(withRootObject: query, requiringSecureCoding: true)
            let back = try #require(try NSKeyedUnarchiver.unarchivedObject(ofClass: Subscription.self, from: data) as? QuerySubscription)
            #expect(back == query)
            #expect(back.predicate == query.predicate)
            #expect(back.zoneID == zone)
            #expect(back.querySubscriptionOptions == [.firesOnRecordCreation, .firesOnRecordUpdate])
            #expect(back.notificationInfo?.desiredKeys == ["title"])
            #expect(back.notificationInfo?.alertBody == "A long note")
            #expect(back.notificationInfo?.shouldBadge == true)
            // The notification info archives alone too, as CKSubscription.NotificationInfo does.
            let infoData = try NSKeyedArchiver.archivedData(withRootObject: info, requiringSecureCoding: true)
            let infoBack = try #require(try NSKeyedUnarchiver.unarchivedObject(ofClass: NotificationInfo.self, from: infoData))
            #expect(infoBack.desiredKeys == ["title"] && infoBack.alertBody == "A long note" && infoBack.shouldBadge)
            #expect(!infoBack.shouldSendContentAvailable && infoBack.soundName == nil)

            let list = try NSKeyedArchiver.archivedData(withRootObject: [query, zoneSubscription, everything], requiringSecureCoding: true)
            let all = try #require(try NSKeyedUnarchiver.unarchivedObject(ofClasses: [NSArray.self, Subscription.self], from: list) as? [Subscription])
            #expect(all == [query, zoneSubscription, everything])
            #expect(all.map(\.subscriptionType) == [.query, .recordZone, .database])
            #expect((all[1] as? RecordZoneSubscription)?.recordType == "Note")
            #expect(try NSKeyedUnarchiver.unarchivedObject(ofClass: DatabaseSubscription.self, from: NSKeyedArchiver.archivedData(withRootObject: everything, requiringSecureCoding: true)) == everything)

            // Saved from the archive, fetched, and archived again: the same subscription.
            _ = try await database.modifySubscriptions(saving: all, deleting: [])
            let fetched = try await database.subscription(for: "long-notes")
            let again = try NSKeyedArchiver.archivedData(withRootObject: fetched, requiringSecureCoding: true)
            #expect(try NSKeyedUnarchiver.unarchivedObject(ofClass: Subscription.self, from: again) == query)

            // An archive of another kind, or of no subscription, reads as nil.
            let archiver = NSKeyedArchiver(requiringSecureCoding: true)
            archiver.encode("x" as NSString, forKey: "other")
            archiver.finishEncoding()
            #expect(QuerySubscription(coder: try NSKeyedUnarchiver(forReadingFrom: archiver.encodedData)) == nil)
            let zoneArchive = NSKeyedArchiver(requiringSecureCoding: true)
            zoneSubscription.encode(with: zoneArchive)
            zoneArchive.finishEncoding()
            #expect(QuerySubscription(coder: try NSKeyedUnarchiver(forReadingFrom: zoneArchive.encodedData)) == nil)
            #expect(RecordZoneSubscription(coder: try NSKeyedUnarchiver(forReadingFrom: zoneArchive.encodedData)) == zoneSubscription)
        }
    }

    @Test("a subscription's notification info keeps its texts and options side by side in the definition, as archives and stores of earlier versions hold them")
    func notificationInfoDefinitionFormat() throws {
        // Written as Stratus has always written it: the alert texts among the other options.
        let earlier = #"{"format":1,"info":{"alertBody":"Changed","alertLocalizationArgs":["title"],"category":"c","collapseIDKey":"k","desiredKeys":["title"],"shouldBadge":true,"soundName":"ping","title":"T"},"type":3}"#
        let archiver = NSKeyedArchiver(requiringSecureCoding: true)
        archiver.encode("everything" as NSString, forKey: "StratusSubscriptionID")
        archiver.encode(Data(earlier.utf8) as NSData, forKey: "StratusSubscriptionDefinition")
        archiver.finishEncoding()
        let read = try #require(DatabaseSubscription(coder: try NSKeyedUnarchiver(forReadingFrom: archiver.encodedData)))
        let info = try #require(read.notificationInfo)
        #expect(info.alertBody == "Changed" && info.alertLocalizationArgs == ["title"] && info.title == "T" && info.soundName == "ping" && info.category == "c")
        #expect(info.desiredKeys == ["title"] && info.shouldBadge && info.collapseIDKey == "k" && !info.shouldSendContentAvailable)

        // Archived again, the definition is the same text.
        let again = NSKeyedArchiver(requiringSecureCoding: true)
        read.encode(with: again)
        again.finishEncoding()
        let unarchiver = try NSKeyedUnarchiver(forReadingFrom: again.encodedData)
        let definition = try #require(unarchiver.decodeObject(of: NSData.self, forKey: "StratusSubscriptionDefinition"))
        #expect(String(decoding: definition as Data, as: UTF8.self) == earlier)
    }

    @Test("user identities, lookups, share participants and operation groups archive and read back as they were (found by a porting tester: archiving an identity trapped)")
    func identitiesParticipantsAndGroups() async throws {
        try await SQLiteFixture.with { fixture in
            let container = fixture.container()
            let me = try await container.userRecordID()
            var name = PersonNameComponents()
            name.givenName = "Ada"
            name.familyName = "Lovelace"
            let identity = UserIdentity(userRecordID: me, nameComponents: name)
            let identityBack = try #require(try NSKeyedUnarchiver.unarchivedObject(
                ofClass: UserIdentity.self, from: try NSKeyedArchiver.archivedData(withRootObject: identity, requiringSecureCoding: true)))
            #expect(identityBack.userRecordID == me && identityBack.nameComponents == name && identityBack.hasiCloudAccount && identityBack.lookupInfo == identity.lookupInfo)
            // The older call, as apps that cache the signed-in user's identity in UserDefaults make it.
            #expect((NSKeyedUnarchiver.unarchiveObject(with: NSKeyedArchiver.archivedData(withRootObject: identity)) as? UserIdentity)?.userRecordID == me)

            let lookups = [UserIdentity.LookupInfo(emailAddress: "bob@example.com"), UserIdentity.LookupInfo(phoneNumber: "+15555550100")]
            let lookupsBack = try NSKeyedUnarchiver.unarchivedObject(
                ofClasses: [NSArray.self, UserIdentity.LookupInfo.self], from: try NSKeyedArchiver.archivedData(withRootObject: lookups, requiringSecureCoding: true))
            #expect(lookupsBack as? [UserIdentity.LookupInfo] == lookups)

            let bob = Share.Participant(userIdentity: UserIdentity(lookupInfo: lookups[0]))
            bob.permission = .readWrite
            bob.role = .administrator
            let bobBack = try #require(try NSKeyedUnarchiver.unarchivedObject(
                ofClass: Share.Participant.self, from: try NSKeyedArchiver.archivedData(withRootObject: bob, requiringSecureCoding: true)))
            #expect(bobBack.permission == .readWrite && bobBack.role == .administrator && bobBack.acceptanceStatus == .pending)
            #expect(bobBack.participantID == bob.participantID && bobBack.userIdentity.lookupInfo == lookups[0] && bobBack.userIdentity.userRecordID == nil)

            let group = OperationGroup()
            group.name = "Initial sync"
            group.quantity = 12
            group.expectedSendSize = .megabytes
            let groupBack = try #require(try NSKeyedUnarchiver.unarchivedObject(
                ofClass: OperationGroup.self, from: try NSKeyedArchiver.archivedData(withRootObject: group, requiringSecureCoding: true)))
            #expect(groupBack.operationGroupID == group.operationGroupID && groupBack.name == "Initial sync" && groupBack.quantity == 12)
            #expect(groupBack.expectedSendSize == .megabytes && groupBack.expectedReceiveSize == .unknown)
        }
    }

    @Test("the older NSKeyedArchiver calls (archivedData(withRootObject:), unarchiveObject(with:)) work too")
    func olderArchiverCalls() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.container().privateCloudDatabase
            let token = try await database.recordZoneChanges(inZoneWith: .default, since: nil).changeToken
            let data = NSKeyedArchiver.archivedData(withRootObject: token)
            #expect(NSKeyedUnarchiver.unarchiveObject(with: data) as? ServerChangeToken == token)
            let record = Record(recordType: "Note")
            record["title"] = "x"
            let recordData = NSKeyedArchiver.archivedData(withRootObject: record)
            #expect((NSKeyedUnarchiver.unarchiveObject(with: recordData) as? Record)?["title"] as? String == "x")
        }
    }

    @Test("record and zone IDs archive alone, as dictionary keys and in lists, and read back equal; a restored ID fetches its record")
    func idsArchive() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.container().privateCloudDatabase
            let zoneID = try await database.save(RecordZone(zoneName: "Notes")).zoneID
            let note = Record(recordType: "Note", recordID: Record.ID(recordName: "note", zoneID: zoneID))
            note["title"] = "kept"
            let saved = try await database.save(note)

            let idData = try NSKeyedArchiver.archivedData(withRootObject: saved.recordID, requiringSecureCoding: true)
            let id = try #require(try NSKeyedUnarchiver.unarchivedObject(ofClass: Record.ID.self, from: idData))
            #expect(id == saved.recordID && id !== saved.recordID)
            #expect(try await database.record(for: id)["title"] as? String == "kept")

            let buffer: [Record.ID: Record] = [saved.recordID: saved, Record.ID(recordName: "other"): Record(recordType: "Note")]
            let bufferData = try NSKeyedArchiver.archivedData(withRootObject: buffer, requiringSecureCoding: true)
            let restored = try #require(try NSKeyedUnarchiver.unarchivedObject(ofClasses: [NSDictionary.self, Record.ID.self, Record.self], from: bufferData) as? [Record.ID: Record])
            #expect(Set(restored.keys) == Set(buffer.keys))
            #expect(restored[Record.ID(recordName: "note", zoneID: zoneID)]?["title"] as? String == "kept")

            let zoneIDs = [zoneID, RecordZone.ID.default, RecordZone.ID(zoneName: "Lists", ownerName: "_someoneElse")]
            let zoneData = try NSKeyedArchiver.archivedData(withRootObject: zoneIDs, requiringSecureCoding: true)
            #expect(try NSKeyedUnarchiver.unarchivedObject(ofClasses: [NSArray.self, RecordZone.ID.self], from: zoneData) as? [RecordZone.ID] == zoneIDs)

            // An archive of another class is not an ID.
            let tokenlessData = try NSKeyedArchiver.archivedData(withRootObject: "not an ID" as NSString, requiringSecureCoding: true)
            #expect((try? NSKeyedUnarchiver.unarchivedObject(ofClass: Record.ID.self, from: tokenlessData)) == nil)
        }
    }

    @Test("IDs encode with Codable in the JSON earlier versions wrote, which reads back equal and hashes alike")
    func idsKeepTheirJSON() throws {
        let id = Record.ID(recordName: "note", zoneID: RecordZone.ID(zoneName: "Notes", ownerName: "_ada"))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let json = String(decoding: try encoder.encode(id), as: UTF8.self)
        #expect(json == #"{"recordName":"note","zoneID":{"ownerName":"_ada","zoneName":"Notes"}}"#)
        let decoded = try JSONDecoder().decode(Record.ID.self, from: Data(json.utf8))
        #expect(decoded == id && decoded.hashValue == id.hashValue)
        #expect(Set([decoded, id]).count == 1)
        #expect(Record.ID(recordName: "note") != id)
        #expect(RecordZone.ID(zoneName: "Notes") != id.zoneID)
    }

    @Test("an altered archive holding one class where another belongs reads as nil, not a crash (found in review: swift-corelibs-foundation's unarchiver stopped the process)")
    func alteredArchivesReadAsNil() throws {
        let zoneID = RecordZone.ID(zoneName: "Notes")
        let zoneForID = try ForgedArchive.data(as: Record.Reference.self, objects: ["StratusReferenceRecordID": zoneID])
        #expect((try? NSKeyedUnarchiver.unarchivedObject(ofClass: Record.Reference.self, from: zoneForID)) == nil)
        let dateForID = try ForgedArchive.data(as: Record.Reference.self, objects: ["StratusReferenceRecordID": NSDate()])
        #expect((try? NSKeyedUnarchiver.unarchivedObject(ofClass: Record.Reference.self, from: dateForID)) == nil)
        let setForID = try ForgedArchive.data(as: Record.Reference.self, objects: ["StratusReferenceRecordID": NSSet(array: [NSNumber(value: 1)])])
        #expect((try? NSKeyedUnarchiver.unarchivedObject(ofClass: Record.Reference.self, from: setForID)) == nil)

        // A record's system fields with an ID where its creation date belongs: the rest is read.
        let system: [String: NSObject] = [
            "StratusRecordArchiveVersion": NSNumber(value: 1), "recordType": "Note" as NSString, "recordName": "n1" as NSString,
            "zoneName": "Notes" as NSString, "ownerName": "__defaultOwner__" as NSString, "creationDate": Record.ID(recordName: "x"),
        ]
        let unarchiver = try NSKeyedUnarchiver(forReadingFrom: try ForgedArchive.systemFields(system))
        unarchiver.requiresSecureCoding = true
        let record = Record(coder: unarchiver)
        unarchiver.finishDecoding()
        #expect(record?.recordID == Record.ID(recordName: "n1", zoneID: zoneID))
        #expect(record?.creationDate == nil)

        // Archives that were not altered still read back.
        let reference = Record.Reference(recordID: Record.ID(recordName: "n1", zoneID: zoneID), action: .deleteSelf)
        let data = try NSKeyedArchiver.archivedData(withRootObject: reference, requiringSecureCoding: true)
        #expect(try NSKeyedUnarchiver.unarchivedObject(ofClass: Record.Reference.self, from: data) == reference)
    }
}

/// Writes the objects it is given under another class's archived name: an archive altered
/// by hand, or by an attacker.
final class ForgedArchive: NSObject, NSSecureCoding {
    static var supportsSecureCoding: Bool { true }
    let objects: [String: NSObject]

    init(objects: [String: NSObject]) { self.objects = objects }
    required init?(coder: NSCoder) { nil }

    func encode(with coder: NSCoder) {
        for (key, object) in objects { coder.encode(object, forKey: key) }
    }

    /// An archive whose root claims to be a `claimed`: its class name replaced in the XML
    /// form (swift-corelibs-foundation's `setClassName(_:for:)` maps nothing).
    static func data(as claimed: AnyClass, objects: [String: NSObject]) throws -> Data {
        let archiver = NSKeyedArchiver(requiringSecureCoding: true)
        archiver.outputFormat = .xml
        archiver.encode(ForgedArchive(objects: objects), forKey: NSKeyedArchiveRootObjectKey)
        archiver.finishEncoding()
        let xml = String(decoding: archiver.encodedData, as: UTF8.self)
        let ownName = "<string>\(NSStringFromClass(ForgedArchive.self))</string>"
        try #require(xml.contains(ownName))
        return Data(xml.replacingOccurrences(of: ownName, with: "<string>\(NSStringFromClass(claimed))</string>").utf8)
    }

    /// Keys written at the top of the archive, as `encodeSystemFields(with:)` writes them.
    static func systemFields(_ objects: [String: NSObject]) throws -> Data {
        let archiver = NSKeyedArchiver(requiringSecureCoding: true)
        ForgedArchive(objects: objects).encode(with: archiver)
        archiver.finishEncoding()
        return archiver.encodedData
    }
}
