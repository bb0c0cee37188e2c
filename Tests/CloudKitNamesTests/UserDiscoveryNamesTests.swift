import CloudKit
import Foundation
import Stratus
import StratusTestSupport
import Testing

// User discovery and share participants as CloudKit code spells them: an app asks for
// discoverability, looks a friend up, and shares a record with them.

@Suite struct UserDiscoveryNamesTests {
    @Test func theDiscoveryTypesAreStratusTypes() {
        #expect(CKDiscoverUserIdentitiesOperation.self == DiscoverUserIdentitiesOperation.self)
        #expect(CKFetchShareParticipantsOperation.self == FetchShareParticipantsOperation.self)
        #expect(CKApplicationPermissions.self == CKContainer.ApplicationPermissions.self)
        #expect(CKApplicationPermissionStatus.self == CKContainer.ApplicationPermissionStatus.self)
        #expect(CKContainer.ApplicationPermissions.userDiscoverability.rawValue == 1)
        #expect(CKContainer.ApplicationPermissionStatus.granted.rawValue == 3 && CKContainer.ApplicationPermissionStatus.initialState.rawValue == 0)
    }

    @Test func aFriendIsDiscoveredAndInvitedWithCloudKitsNames() async throws {
        try await TemporaryStore.with { store in
            let identifier = "iCloud.com.example.lists"
            let ada = try CKContainer(identifier: identifier, storePath: store.path(), userName: "ada")
            let grace = try CKContainer(identifier: identifier, storePath: store.path(), userName: "grace")
            let graceID = try await grace.userRecordID()
            var entry = UserDirectoryEntry(login: "grace", userRecordName: graceID.recordName)
            entry.emailAddresses = ["grace@example.com"]
            entry.nameComponents = PersonNameComponents(givenName: "Grace", familyName: "Hopper")
            try await ada.saveUsers([entry])

            // Grace has not agreed to be found yet.
            let before: CKContainer.ApplicationPermissionStatus = await withCheckedContinuation { continuation in
                grace.status(forApplicationPermission: .userDiscoverability) { status, _ in continuation.resume(returning: status) }
            }
            #expect(before == .initialState)
            let unknown: CKUserIdentity? = await withCheckedContinuation { continuation in
                ada.discoverUserIdentity(withEmailAddress: "grace@example.com") { identity, _ in continuation.resume(returning: identity) }
            }
            #expect(unknown == nil)
            let granted: (CKContainer.ApplicationPermissionStatus, Error?) = await withCheckedContinuation { continuation in
                grace.requestApplicationPermission(.userDiscoverability) { status, error in continuation.resume(returning: (status, error)) }
            }
            #expect(granted.0 == .granted && granted.1 == nil)

            // Ada discovers her with the operation and its older final block.
            let lookup = try #require(CKUserIdentity.LookupInfo.lookupInfos(withEmails: ["grace@example.com"]).first)
            #expect(CKUserIdentity.LookupInfo.lookupInfos(with: [graceID]).map(\.userRecordID) == [graceID])
            #expect(CKUserIdentity.LookupInfo.lookupInfos(withPhoneNumbers: ["+15550100100"]).map(\.phoneNumber) == ["+15550100100"])
            let discover = CKDiscoverUserIdentitiesOperation(userIdentityLookupInfos: [lookup])
            let found = Found()
            discover.userIdentityDiscoveredBlock = { identity, _ in found.add(identity.nameComponents?.givenName ?? "?") }
            let discovered: Error? = await withCheckedContinuation { continuation in
                discover.discoverUserIdentitiesCompletionBlock = { continuation.resume(returning: $0) }
                ada.add(discover)
            }
            #expect(discovered == nil && found.names == ["Grace"])

            // Ada turns the address into a participant and shares a list with her.
            let fetch = CKFetchShareParticipantsOperation(userIdentityLookupInfos: [lookup])
            let participants = Participants()
            fetch.perShareParticipantResultBlock = { _, result in if case .success(let participant) = result { participants.add(participant) } }
            fetch.shareParticipantFetchedBlock = { _ in participants.countOlderBlock() }
            let fetched: Result<Void, Error> = await withCheckedContinuation { continuation in
                fetch.fetchShareParticipantsResultBlock = { continuation.resume(returning: $0) }
                ada.add(fetch)
            }
            #expect((try? fetched.get()) != nil && participants.olderBlockCalls == 1)
            let participant = try #require(participants.items.first)
            #expect(participant.userIdentity.userRecordID == graceID && participant.userIdentity.lookupInfo?.emailAddress == "grace@example.com")
            participant.permission = .readWrite

            let database = ada.privateCloudDatabase
            let zone = try await database.save(CKRecordZone(zoneName: "Lists"))
            let list = try await database.save(CKRecord(recordType: "List", recordID: CKRecord.ID(recordName: "groceries", zoneID: zone.zoneID)))
            let share = CKShare(rootRecord: list)
            share.addParticipant(participant)
            let (saved, _) = try await database.modifyRecords(saving: [list, share], deleting: [])
            let url = try #require((try saved[share.recordID]?.get() as? CKShare)?.url)

            // Grace's app takes the URL and accepts, with the completion handlers of iOS 10.
            let fetchedMetadata: (CKShare.Metadata?, Error?) = await withCheckedContinuation { continuation in
                grace.fetchShareMetadata(with: url) { continuation.resume(returning: ($0, $1)) }
            }
            let metadata = try #require(fetchedMetadata.0, "\(String(describing: fetchedMetadata.1))")
            #expect(metadata.participantPermission == .readWrite && metadata.rootRecordID.recordName == "groceries", "the root, in Ada's zone as Grace names it")
            let acceptance: (CKShare?, Error?) = await withCheckedContinuation { continuation in
                grace.accept(metadata) { continuation.resume(returning: ($0, $1)) }
            }
            #expect(acceptance.0?.recordID.recordName == share.recordID.recordName && acceptance.1 == nil, "\(String(describing: acceptance.1))")
            #expect(try await grace.sharedCloudDatabase.allRecordZones().map(\.zoneID.zoneName) == ["Lists"])
            #expect(fetch.userIdentityLookupInfos?.count == 1)
            let root = try await database.record(for: list.recordID)
            #expect((root.value(forKey: CKRecord.SystemFieldKey.share) as? CKRecord.Reference)?.recordID == share.recordID)
            // Apps find a root's share by its system key, as a CKRecord answers it, and ask for it in desiredKeys.
            #expect((root[CKRecord.SystemFieldKey.share] as? CKRecord.Reference)?.recordID == share.recordID)
            #expect((root.object(forKey: CKRecord.SystemFieldKey.share) as? CKRecord.Reference)?.recordID == share.recordID)
            let desired = try await database.records(matching: CKQuery(recordType: "List", predicate: NSPredicate(value: true)), inZoneWith: zone.zoneID,
                                                     desiredKeys: ["name", CKRecord.SystemFieldKey.share, CKRecord.SystemFieldKey.parent])
            let listed = try #require(try desired.matchResults.first { $0.0 == list.recordID }?.1.get())
            #expect(listed.share?.recordID == share.recordID)
            let fetchedWithKeys = try await database.records(for: [list.recordID], desiredKeys: [CKRecord.SystemFieldKey.share])
            #expect(try fetchedWithKeys[list.recordID]?.get().share?.recordID == share.recordID)
            let child = CKRecord(recordType: "Item", recordID: CKRecord.ID(recordName: "milk", zoneID: zone.zoneID))
            child[CKRecord.SystemFieldKey.parent] = CKRecord.Reference(record: root, action: .none)
            #expect(child.parent?.recordID == list.recordID && (child[CKRecord.SystemFieldKey.parent] as? CKRecord.Reference)?.recordID == list.recordID)
            #expect(child.allKeys().isEmpty, "the parent is no field")

            // A second share, accepted with the batched call.
            let chores = try await database.save(CKRecord(recordType: "List", recordID: CKRecord.ID(recordName: "chores", zoneID: zone.zoneID)))
            let choresShare = CKShare(rootRecord: chores)
            choresShare.addParticipant(try await ada.shareParticipant(forEmailAddress: "grace@example.com"))
            let (savedChores, _) = try await database.modifyRecords(saving: [chores, choresShare], deleting: [])
            let choresURL = try #require((try savedChores[choresShare.recordID]?.get() as? CKShare)?.url)
            // The metadata of several URLs at once (iOS 15's form): each URL its own result.
            let unknownURL = try #require(URL(string: "https://stratus.invalid/share/no-such-share"))
            let metadatas = try await grace.shareMetadatas(for: [choresURL, unknownURL])
            #expect(Set(metadatas.keys) == [choresURL, unknownURL])
            let choresMetadata = try #require(try metadatas[choresURL]?.get())
            #expect(choresMetadata.rootRecordID.recordName == "chores")
            #expect { try metadatas[unknownURL]?.get() } throws: { ($0 as? CKError)?.code == .unknownItem }
            let accepted = try await grace.accept([choresMetadata])
            #expect(accepted.count == 1 && (try? accepted.values.first?.get())?.recordID.recordName == choresShare.recordID.recordName)

            // A parent is a reference without an action, as CloudKit requires.
            let item = CKRecord(recordType: "Item", recordID: CKRecord.ID(recordName: "milk", zoneID: zone.zoneID))
            item.parent = CKRecord.Reference(recordID: list.recordID, action: .deleteSelf)
            #expect(item.parent?.action == CKRecord.Reference.Action.none)

            // The async spellings answer the same.
            #expect(try await ada.userIdentity(forEmailAddress: "GRACE@example.com")?.userRecordID == graceID)
            #expect(try await ada.shareParticipant(forEmailAddress: "grace@example.com").userIdentity.userRecordID == graceID)
            #expect(try await grace.applicationPermissionStatus(for: .userDiscoverability) == .granted)
        }
    }
}

/// Names a discovery block reports from an operation thread.
private final class Found: @unchecked Sendable {
    // `@unchecked Sendable`: every access holds the lock.
    private let lock = NSLock()
    private var stored: [String] = []

    func add(_ name: String) { lock.withLock { stored.append(name) } }
    var names: [String] { lock.withLock { stored } }
}

/// Participants a fetch reports from an operation thread, and how often its older block ran.
private final class Participants: @unchecked Sendable {
    // `@unchecked Sendable`: every access holds the lock.
    private let lock = NSLock()
    private var stored: [CKShare.Participant] = []
    private var olderCalls = 0

    func add(_ participant: CKShare.Participant) { lock.withLock { stored.append(participant) } }
    func countOlderBlock() { lock.withLock { olderCalls += 1 } }
    var items: [CKShare.Participant] { lock.withLock { stored } }
    var olderBlockCalls: Int { lock.withLock { olderCalls } }
}
