import CloudKit
import Foundation
import Stratus
import StratusTestSupport
import Testing

// CloudKit's names as CloudKit code spells them: each is Stratus's type (so values pass
// between code written either way), and each constant has CloudKit's value.

@Suite struct CloudKitNamesTests {
    @Test func theCKTypesAreStratusTypes() {
        #expect(CKRecord.self == Record.self)
        #expect(CKRecord.ID.self == Record.ID.self)
        #expect(CKRecordZone.ID.self == RecordZone.ID.self)
        #expect(CKContainer.self == Container.self)
        #expect(CKDatabase.Scope.self == Database.Scope.self)
        #expect(CKQueryOperation.Cursor.self == QueryCursor.self)
        #expect(CKError.self == StratusError.self)
        #expect(CKNotification.self == StratusNotification.self)
        #expect(CKOperation.self == DatabaseOperation.self)
        #expect(CKSubscription.NotificationInfo.self == NotificationInfo.self)
        #expect(CKShare.Participant.self == Share.Participant.self)
        #expect(CKShare.Metadata.self == Share.Metadata.self)
        #expect(CKShareMetadata.self == Share.Metadata.self)
        #expect(CKFetchShareMetadataOperation.self == FetchShareMetadataOperation.self)
        #expect(CKAcceptSharesOperation.self == AcceptSharesOperation.self)
        #expect(CLLocation.self == Location.self)
        #expect(CKRecordID.self == Record.ID.self)
        #expect(CKReference.Action.self == Record.ReferenceAction.self)
    }

    @Test func theConstantsHaveCloudKitsValues() {
        #expect(CKErrorDomain == "CKErrorDomain")
        #expect(CKPartialErrorsByItemIDKey == "CKPartialErrors")
        #expect(CKErrorRetryAfterKey == "CKRetryAfter")
        #expect(CKRecordChangedErrorServerRecordKey == "ServerRecord")
        #expect(CKRecordChangedErrorClientRecordKey == "ClientRecord")
        #expect(CKRecordChangedErrorAncestorRecordKey == "AncestorRecord")
        #expect(CKCurrentUserDefaultName == "__defaultOwner__")
        #expect(CKRecordZone.ID.default.zoneName == CKRecordZoneDefaultName)
        #expect(CKRecordTypeUserRecord == "Users")
        #expect(CKRecordTypeShare == "cloudkit.share")
        #expect(CKRecordNameZoneWideShare == "cloudkit.zoneshare")
        #expect(CKQueryOperationMaximumResults == CKQueryOperation.maximumResults)
        #expect(Notification.Name.CKAccountChanged.rawValue == "CKAccountChangedNotification")
    }

    /// Forms CloudKit code writes that Stratus's own overloads or missing names broke: a
    /// predicate written `.init(value:)` or `.init(format:)` (CloudKit's take an NSPredicate),
    /// a record iterated with `for (key, value) in record`, the Objective-C names
    /// `__CKRecordObjCValue` and `CKShare_Participant_Role` and their kin.
    @Test func cloudKitSpellingsCompileAndMeanWhatTheyMeanThere() throws {
        let everyAccount = CKQuery(recordType: "Account", predicate: .init(value: true))
        #expect(everyAccount.predicate == QueryPredicate(value: true))
        let titled = CKQuery(recordType: "Note", predicate: .init(format: "title == %@", "x"))
        #expect(titled.predicate == (try QueryPredicate(format: "title == %@", "x")))
        let subscription = CKQuerySubscription(recordType: "Account", predicate: .init(value: true), subscriptionID: "accounts",
                                               options: [.firesOnRecordCreation])
        #expect(subscription.subscriptionID == "accounts")

        let note = CKRecord(recordType: "Note")
        let fromAnArchive: Any = "Water the plants"
        note["title"] = fromAnArchive as? __CKRecordObjCValue
        note.setObject(3 as __CKRecordObjCValue, forKey: "count")
        let copy = CKRecord(recordType: "Note")
        var keys: [CKRecord.FieldKey] = []
        for (key, value) in note {
            keys.append(key)
            copy[key] = value
        }
        #expect(keys == ["count", "title"])
        #expect(copy["title"] as? String == "Water the plants" && copy["count"] as? Int == 3)
        var iterator: CKRecordKeyValueIterator = note.makeIterator()
        #expect(iterator.next()?.0 == "count")
        // Key paths, as CKCodable's decoder reads them.
        note["list"] = CKRecord.Reference(recordID: CKRecord.ID(recordName: "list-1"), action: .deleteSelf)
        #expect(note.value(forKeyPath: "recordID.recordName") as? String == note.recordID.recordName)
        #expect(note.value(forKeyPath: "recordID.zoneID.zoneName") as? String == CKRecordZone.ID.default.zoneName)
        #expect(note.value(forKeyPath: "list.recordID.recordName") as? String == "list-1")
        #expect(note.value(forKeyPath: "title") as? String == "Water the plants")
        #expect(note.value(forKeyPath: "title.length") == nil && note.value(forKeyPath: "missing.recordName") == nil)

        let role: CKShare_Participant_Role = .privateUser
        let permission: CKShare_Participant_Permission = .readOnly
        let acceptance: CKShare_Participant_AcceptanceStatus = .pending
        let status: CKContainer_Application_PermissionStatus = .initialState
        let permissions: CKContainer_Application_Permissions = [.userDiscoverability]
        let block: CKContainer_Application_PermissionBlock = { _, _ in }
        block(status, nil)
        #expect(role == CKShare.ParticipantRole.privateUser && permission == CKShare.ParticipantPermission.readOnly)
        #expect(acceptance == CKShare.ParticipantAcceptanceStatus.pending && permissions.contains(.userDiscoverability))

        // CKShare.Participant.type, the deprecated form of the role that older sharing code reads.
        let share = CKShare(rootRecord: CKRecord(recordType: "List"))
        #expect(share.owner.type == .owner)
        let invited = CKShare.Participant(userIdentity: CKUserIdentity(userRecordID: CKRecord.ID(recordName: "_bob")))
        let kind: CKShare_Participant_Type = invited.type
        #expect(kind == .privateUser && CKShareParticipantType.publicUser.rawValue == 4)
        invited.role = .administrator
        #expect(invited.type == .privateUser, "an administrator is a private user in the older terms")
        invited.type = .publicUser
        #expect(invited.role == .publicUser)

        // This file imports Stratus beside CloudKit: an error still matches by its code.
        do {
            throw CKError(.unknownItem, "not found")
        } catch CKError.unknownItem {
        } catch {
            Issue.record("\(error) did not match its code")
        }
    }

    /// CloudKit's `NSUInteger` enumerations and option sets take a `UInt`, so code that keeps
    /// one in a `UInt` (or reads it back from an archive as one) compiles unchanged.
    @Test func theUnsignedRawValuesAreCloudKits() throws {
        let storedAction: UInt = 1
        let storedCapabilities: UInt = 3
        #expect(CKRecord.ReferenceAction(rawValue: storedAction) == .deleteSelf)
        #expect(CKRecord.Reference.Action(rawValue: 0) == CKRecord.ReferenceAction.none)
        let capabilities = CKRecordZone.Capabilities(rawValue: storedCapabilities)
        #expect(capabilities == [.fetchChanges, .atomic])
        let rawValues: (UInt, UInt) = (CKRecord.ReferenceAction.deleteSelf.rawValue, CKRecordZone.Capabilities.sharing.rawValue)
        #expect(rawValues == (1, 4))

        let zone = CKRecordZone(zoneName: "Lists")
        let archive = try NSKeyedArchiver.archivedData(withRootObject: zone, requiringSecureCoding: true)
        let restored = try #require(try NSKeyedUnarchiver.unarchivedObject(ofClass: CKRecordZone.self, from: archive))
        #expect(restored.capabilities == zone.capabilities)
    }

    /// A subscription set up as CloudKit apps set one up, read back through the older
    /// completion-handler call.
    @Test func aQuerySubscriptionSavedWithCloudKitsNames() async throws {
        try await TemporaryStore.with { store in
            let container = try CKContainer(identifier: "iCloud.com.example.notes", storePath: store.path(), userName: "ada")
            let database = container.publicCloudDatabase
            let subscription = CKQuerySubscription(
                recordType: "Note", predicate: QueryPredicate(value: true), subscriptionID: "all-notes",
                options: [.firesOnRecordCreation, .firesOnRecordUpdate])
            let info = CKSubscription.NotificationInfo()
            info.alertBody = "A note changed"
            info.shouldSendContentAvailable = true
            info.desiredKeys = ["title"]
            subscription.notificationInfo = info

            let operation = CKModifySubscriptionsOperation(subscriptionsToSave: [subscription], subscriptionIDsToDelete: nil)
            let saved: Result<Void, Error> = await withCheckedContinuation { continuation in
                operation.modifySubscriptionsResultBlock = { continuation.resume(returning: $0) }
                database.add(operation)
            }
            try saved.get()

            let fetched: CKSubscription? = try await withCheckedThrowingContinuation { continuation in
                database.fetch(withSubscriptionID: "all-notes") { subscription, error in
                    if let error { continuation.resume(throwing: error) } else { continuation.resume(returning: subscription) }
                }
            }
            let query = try #require(fetched as? CKQuerySubscription)
            #expect(query.recordType == "Note")
            #expect(query.querySubscriptionOptions.contains(.firesOnRecordUpdate))
            #expect(query.notificationInfo?.alertBody == "A note changed")
            #expect(query.notificationInfo?.desiredKeys == ["title"])
        }
    }

    /// An account check and a user record ID, as an app's start-up does them.
    @Test func theAccountAndUserRecordAsAnAppsStartUpReadsThem() async throws {
        try await TemporaryStore.with { store in
            let container = try CKContainer(identifier: "iCloud.com.example.notes", storePath: store.path(), userName: "ada")
            let status = try await container.accountStatus()
            #expect(status == CKAccountStatus.available)
            let userRecordID: CKRecord.ID = try await container.userRecordID()
            #expect(userRecordID.recordName.hasPrefix("_"))
            let userRecord = try await container.publicCloudDatabase.record(for: userRecordID)
            #expect(userRecord.recordType == CKRecordTypeUserRecord)
        }
    }

    @Test("the typed unarchiving calls record caches use read arrays of records and dictionaries of IDs, and nil for an archive of something else (found by a porting tester: they did not compile)")
    func typedUnarchiving() throws {
        let records = [CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "a")), CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "b"))]
        let arrayData = try NSKeyedArchiver.archivedData(withRootObject: records, requiringSecureCoding: true)
        let restored = try #require(try NSKeyedUnarchiver.unarchivedArrayOfObjects(ofClass: CKRecord.self, from: arrayData))
        #expect(restored.map(\.recordID.recordName) == ["a", "b"] && restored.allSatisfy { $0.recordType == "Note" })

        let zones: [String: CKRecordZone.ID] = ["notes": CKRecordZone.ID(zoneName: "Notes"), "lists": CKRecordZone.ID(zoneName: "Lists")]
        let dictionaryData = try NSKeyedArchiver.archivedData(withRootObject: zones, requiringSecureCoding: true)
        let read = try #require(try NSKeyedUnarchiver.unarchivedDictionary(keysOfClass: NSString.self, objectsOfClass: CKRecordZone.ID.self, from: dictionaryData))
        #expect(Dictionary(uniqueKeysWithValues: read.map { (String(describing: $0.key), $0.value.zoneName) }) == ["notes": "Notes", "lists": "Lists"])

        #expect(try NSKeyedUnarchiver.unarchivedArrayOfObjects(ofClass: CKRecord.self, from: dictionaryData) == nil)
    }
}
