import Foundation
import Stratus
import Testing

// MARK: - Sharing, the participant's side

extension EngineConformance {
    static let sharingParticipantCases: [TestCase] = [
        TestCase("a share's URL answers its metadata to the owner, an invited participant and, for a public share, anyone; an unknown URL is unknownItem, a private share's URL opened by another user participantMayNeedVerification", shareMetadataByURL),
        TestCase("after accepting a record share, the participant's shared database lists the owner's zone and reaches the root and its children by fetch, query, zone changes and database changes, and nothing else of the zone", acceptedRecordShareIsReachable),
        TestCase("a read-only participant's writes fail with permissionFailure and change nothing; a read-write participant saves and deletes records of the shared hierarchy, as their modifier", participantWrites),
        TestCase("a zone-wide share reaches the whole zone; accepting a public share's URL adds the caller as a public participant with its permission", zoneWideAndPublicShares),
        TestCase("removing a participant, or deleting the share, revokes access: reads fail with zoneNotFound, the zone leaves allRecordZones, and database changes report it deleted", shareRevocation),
        TestCase("a shared zone its owner deletes leaves the participant's shared database, and a zone made again under its name shares nothing", sharedZoneDeletion),
        TestCase("a participant leaves a share by deleting it from their shared database: the owner reads them removed, and the zone leaves their shared database", participantLeaves),
        TestCase("a participant leaves a shared zone by deleting it from their shared database: every share of the zone they accepted marks them removed, the zone leaves their shared database, the owner's records and other participants stay; a zone they do not reach is zoneNotFound", participantLeavesZone),
        TestCase("a participant's database subscription of the shared database fires, in the owner's write, for a save or a deletion of a record they reach, never for a record outside their hierarchy or a participant who did not accept; a participant's write tells the others; a deletion, and a record moved out of the hierarchy, tell subscriptions of every type; a participant the owner removes, those of a share the owner deletes and those of a zone the owner deletes are told they lost it", sharedDatabaseSubscriptionFires),
        TestCase("an owner who is also a participant elsewhere keeps her private and shared database subscriptions apart: a participant's write in her zone tells her private one, a write in a zone shared with her her shared one", ownersPrivateAndSharedSubscriptionsStayApart),
        TestCase("a share copied into another store keeps its URL and participants there: the invitee opens it and, once accepted, reaches the shared records", copiedShareIsReachable),
        TestCase("a read-write participant may not delete the share's root, nor save with system fields of their choosing; an atomic request with a refused item writes nothing and labels the rest batchRequestFailed", participantLimits),
        TestCase("a share restored without a URL token gets one, as a new share does, and is indexed: its participants open its URL and reach it once accepted", restoredShareWithoutToken),
        TestCase("a participant's sync engine on the shared database reports and fetches a shared zone only when it has changes the engine has not fetched", sharedSyncEngineFetchesOnlyNewChanges),
        TestCase("acceptance is the participant's own: an owner's save or restoring save of a share whose JSON says participants accepted keeps what the store holds (pending for one it did not name) and changes nothing else of the entries (CloudKit's orgUser), and a copy of the whole store keeps what participants gave", acceptanceIsTheParticipants),
    ]

    /// Alice's zone `Lists` with `groceries` (the root), `milk` (its child), `bread` (the
    /// child's child) and `diary` (in no hierarchy); a share of `groceries` naming Bob with
    /// `permission`, saved. Answers Alice's database, the share, and the zone as Bob names it.
    static func sharedList(_ env: Environment, bob permission: Share.ParticipantPermission?, publicPermission: Share.ParticipantPermission = .none) async throws
        -> (alice: Database, share: Share, zoneID: RecordZone.ID) {
        let alice = env.container(user: "alice")
        let database = alice.privateCloudDatabase
        let zoneID = RecordZone.ID(zoneName: "Lists")
        _ = try await database.modifyRecordZones(saving: [RecordZone(zoneID: zoneID)], deleting: [])
        let root = Record(recordType: "List", recordID: Record.ID(recordName: "groceries", zoneID: zoneID))
        root["title"] = "Groceries"
        let milk = Record(recordType: "Item", recordID: Record.ID(recordName: "milk", zoneID: zoneID))
        milk["title"] = "Milk"
        milk.setParent(root)
        let bread = Record(recordType: "Item", recordID: Record.ID(recordName: "bread", zoneID: zoneID))
        bread["title"] = "Bread"
        bread.setParent(milk)
        let diary = Record(recordType: "Item", recordID: Record.ID(recordName: "diary", zoneID: zoneID))
        diary["title"] = "Private"
        let (written, _) = try await database.modifyRecords(saving: [root, milk, bread, diary], deleting: [])
        // The share is saved with the root as stored (its change tag), as CloudKit requires.
        let storedRoot = try #require(try written[root.recordID]?.get())
        let share = Share(rootRecord: storedRoot)
        share[Share.SystemFieldKey.title] = "Groceries"
        share.publicPermission = publicPermission
        if let permission {
            let bob = Share.Participant(userIdentity: UserIdentity(userRecordID: try await env.container(user: "bob").userRecordID()))
            bob.permission = permission
            share.addParticipant(bob)
        }
        let (saves, _) = try await database.modifyRecords(saving: [storedRoot, share], deleting: [])
        let saved = try #require(try saves[share.recordID]?.get() as? Share)
        let owner = try await alice.userRecordID().recordName
        return (database, saved, RecordZone.ID(zoneName: "Lists", ownerName: owner))
    }

    /// A delegate that keeps what each fetch told it.
    final actor FetchLog: SyncEngineDelegate {
        var events: [String] = []
        var fetchedNames: [String] = []

        func clear() { events = []; fetchedNames = [] }

        func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
            if case .stateUpdate = event { return }
            events.append(event.description)
            if case .fetchedRecordZoneChanges(let changes) = event { fetchedNames += changes.modifications.map(\.record.recordID.recordName) }
        }

        func nextRecordZoneChangeBatch(_ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine) async -> SyncEngine.RecordZoneChangeBatch? { nil }
    }

    private static func sharedSyncEngineFetchesOnlyNewChanges(_ env: Environment) async throws {
        let (alice, share, zoneID) = try await sharedList(env, bob: .readOnly)
        let bob = env.container(user: "bob")
        try await bob.accept(try await bob.shareMetadata(for: try #require(share.url)))
        let log = FetchLog()
        var configuration = SyncEngine.Configuration(database: bob.sharedCloudDatabase, stateSerialization: nil, delegate: log)
        configuration.automaticallySync = false
        let engine = SyncEngine(configuration)

        try await engine.fetchChanges()
        let first = await log.fetchedNames
        #expect(Set(first).isSuperset(of: ["groceries", "milk", "bread"]) && !first.contains("diary"), "\(first)")

        // Nothing changed: CloudKit's engine reports no zone and fetches none.
        await log.clear()
        try await engine.fetchChanges()
        let idle = await log.events
        #expect(idle.first == "willFetchChanges" && idle.last == "didFetchChanges", "\(idle)")
        #expect(!idle.contains { $0.hasPrefix("fetchedDatabaseChanges") || $0.hasPrefix("willFetchRecordZoneChanges") }, "\(idle)")

        // The owner changes a shared record, and one outside the share: the first comes, alone.
        let ownZone = RecordZone.ID(zoneName: "Lists")
        for name in ["milk", "diary"] {
            let record = try await alice.record(for: Record.ID(recordName: name, zoneID: ownZone))
            record["title"] = "Changed \(name)"
            _ = try await alice.save(record)
        }
        await log.clear()
        try await engine.fetchChanges()
        let changed = await log.events
        #expect(changed.contains("fetchedDatabaseChanges(1 modification(s), 0 deletion(s))") && changed.contains("willFetchRecordZoneChanges(\(zoneID.zoneName))"), "\(changed)")
        #expect(await log.fetchedNames == ["milk"])
    }

    private static func participantLimits(_ env: Environment) async throws {
        let (alice, share, zoneID) = try await sharedList(env, bob: .readWrite)
        let bob = env.container(user: "bob")
        try await bob.accept(try await bob.shareMetadata(for: try #require(share.url)))
        let shared = bob.sharedCloudDatabase
        let ownZone = RecordZone.ID(zoneName: "Lists")

        await expectCode(.permissionFailure) { _ = try await shared.deleteRecord(withID: Record.ID(recordName: "groceries", zoneID: zoneID)) }
        #expect(try await alice.record(for: share.recordID) is Share, "the share stays")
        #expect(try await alice.record(for: Record.ID(recordName: "groceries", zoneID: ownZone))["title"] as? String == "Groceries")

        // A restoring save would write a creator, modifier and dates Bob chose into Alice's rows.
        let milk = try await shared.record(for: Record.ID(recordName: "milk", zoneID: zoneID))
        milk["title"] = "Forged"
        let restore = ModifyRecordsOperation(recordsToSave: [milk])
        restore.savePolicy = .allKeys
        restore.preservesSystemFields = true
        let refused: Result<Void, Error> = await withCheckedContinuation { continuation in
            restore.modifyRecordsResultBlock = { continuation.resume(returning: $0) }
            shared.add(restore)
        }
        #expect(stratusError(stratusError(refused.failure)?.partialErrorsByItemID?[milk.recordID])?.code == .permissionFailure, "\(refused)")
        #expect(try await alice.record(for: Record.ID(recordName: "milk", zoneID: ownZone))["title"] as? String == "Milk")

        // A refused save is no parent for the rest of its request: Alice's unshared diary, moved
        // under the shared root by Bob, is refused, and so is a record saved under it.
        let moved = Record(recordType: "Item", recordID: Record.ID(recordName: "diary", zoneID: zoneID))
        moved.setParent(Record.ID(recordName: "groceries", zoneID: zoneID))
        let sneak = Record(recordType: "Item", recordID: Record.ID(recordName: "sneak", zoneID: zoneID))
        sneak.setParent(moved)
        let (smuggled, _) = try await shared.modifyRecords(saving: [moved, sneak], deleting: [], savePolicy: .allKeys, atomically: false)
        #expect(stratusError(smuggled[moved.recordID]?.failure)?.code == .permissionFailure, "\(smuggled)")
        #expect(stratusError(smuggled[sneak.recordID]?.failure)?.code == .permissionFailure, "\(smuggled)")
        #expect(try await TestDatabase.exists("sneak", zoneID: ownZone, in: alice) == false)

        // One refused deletion fails an atomic request whole.
        let atomic = stratusError(await caughtError {
            _ = try await shared.modifyRecords(saving: [], deleting: [Record.ID(recordName: "diary", zoneID: zoneID), Record.ID(recordName: "bread", zoneID: zoneID)],
                                               savePolicy: .ifServerRecordUnchanged, atomically: true)
        })
        #expect(atomic?.code == .partialFailure, "\(String(describing: atomic))")
        #expect(stratusError(atomic?.partialErrorsByItemID?[Record.ID(recordName: "diary", zoneID: zoneID)])?.code == .unknownItem)
        #expect(stratusError(atomic?.partialErrorsByItemID?[Record.ID(recordName: "bread", zoneID: zoneID)])?.code == .batchRequestFailed)
        #expect(try await alice.record(for: Record.ID(recordName: "bread", zoneID: ownZone))["title"] as? String == "Bread")
    }

    /// Expects `body` to fail with a `StratusError` of `code`.
    static func expectCode(_ code: StratusError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> Void) async {
        let error = stratusError(await caughtError(body))
        #expect(error?.code == code, "\(String(describing: error))", sourceLocation: sourceLocation)
    }

    private static func shareMetadataByURL(_ env: Environment) async throws {
        let (_, share, zoneID) = try await sharedList(env, bob: .readOnly)
        let url = try #require(share.url)
        #expect(url.absoluteString.hasPrefix("stratus://share/"))

        let owner = try await env.container(user: "alice").shareMetadata(for: url)
        #expect(owner.participantRole == .owner && owner.participantStatus == .accepted && owner.participantPermission == .readWrite)

        let bob = env.container(user: "bob")
        let invited = try await bob.shareMetadata(for: url, shouldFetchRootRecord: true)
        #expect(invited.containerIdentifier == Environment.containerIdentifier)
        #expect(invited.participantRole == .privateUser && invited.participantStatus == .pending && invited.participantPermission == .readOnly)
        #expect(invited.hierarchicalRootRecordID == Record.ID(recordName: "groceries", zoneID: zoneID))
        #expect(invited.rootRecord?["title"] as? String == "Groceries")
        #expect(invited.share.recordID == Record.ID(recordName: share.recordID.recordName, zoneID: zoneID) && invited.share.url == url)
        #expect(invited.share[Share.SystemFieldKey.title] as? String == "Groceries")
        let aliceID = try await env.container(user: "alice").userRecordID()
        #expect(invited.ownerIdentity.userRecordID == aliceID)

        // Accepting makes the participant accepted, in the share the owner reads too.
        let accepted = try await bob.accept(invited)
        let bobID = try await bob.userRecordID()
        let acceptedBob = try #require(accepted.participants.first { $0.role == .privateUser })
        #expect(acceptedBob.userIdentity.userRecordID == bobID && acceptedBob.acceptanceStatus == .accepted)
        #expect(try await bob.shareMetadata(for: url).participantStatus == .accepted)
        let ownersCopy = try #require(try await env.container(user: "alice").privateCloudDatabase.record(for: share.recordID) as? Share)
        #expect(ownersCopy.participants.filter { $0.role == .privateUser }.map(\.acceptanceStatus) == [.accepted])

        // A URL of no share, and a private share's URL opened by a user it does not name.
        let unknown = try #require(URL(string: "stratus://share/0123456789abcdef0123456789abcdef"))
        await expectCode(.unknownItem) { _ = try await bob.shareMetadata(for: unknown) }
        await expectCode(.unknownItem) { _ = try await bob.shareMetadata(for: try #require(URL(string: "https://example.com/share"))) }
        await expectCode(.participantMayNeedVerification) { _ = try await env.container(user: "carol").shareMetadata(for: url) }
        await expectCode(.participantMayNeedVerification) { _ = try await env.container(user: "carol").accept(invited) }
        #expect(try await env.container(user: "carol").sharedCloudDatabase.allRecordZones().isEmpty)

        // The operation's blocks: one result per URL, and partialFailure when one failed.
        let op = FetchShareMetadataOperation(shareURLs: [url, unknown])
        let results = LockedResults()
        op.perShareMetadataResultBlock = { url, result in results.append(url.absoluteString, (try? result.get()) != nil) }
        let final: Result<Void, any Error> = try await withCheckedThrowingContinuation { continuation in
            op.fetchShareMetadataResultBlock = { continuation.resume(returning: $0) }
            bob.sharedCloudDatabase.add(op)
        }
        let succeeded = Dictionary(results.items, uniquingKeysWith: { first, _ in first })
        #expect(results.items.count == 2 && succeeded == [url.absoluteString: true, unknown.absoluteString: false])
        #expect((final.failure as? StratusError)?.code == .partialFailure)
    }

    private static func acceptedRecordShareIsReachable(_ env: Environment) async throws {
        let (alice, share, zoneID) = try await sharedList(env, bob: .readOnly)
        let bob = env.container(user: "bob")
        let shared = bob.sharedCloudDatabase
        // Not yet accepted: nothing in the shared database.
        #expect(try await shared.allRecordZones().isEmpty)
        await expectCode(.zoneNotFound) { _ = try await shared.record(for: Record.ID(recordName: "groceries", zoneID: zoneID)) }

        let metadata = try await bob.shareMetadata(for: try #require(share.url))
        // The metadata keeps in an archive (an app accepts an invitation later), and the share
        // accepted is Bob's view of it: he is its current user participant, accepted.
        let archived = try NSKeyedArchiver.archivedData(withRootObject: metadata, requiringSecureCoding: true)
        let restored = try #require(try NSKeyedUnarchiver.unarchivedObject(ofClass: Share.Metadata.self, from: archived))
        #expect(restored.share.url == share.url && restored.rootRecordID == metadata.rootRecordID && restored.participantStatus == .pending)
        #expect(restored.ownerIdentity.userRecordID == metadata.ownerIdentity.userRecordID && restored.containerIdentifier == metadata.containerIdentifier)
        let accepted = try await bob.accept(restored)
        let bobID = try await bob.userRecordID()
        #expect(accepted.currentUserParticipant?.userIdentity.userRecordID == bobID && accepted.currentUserParticipant?.acceptanceStatus == .accepted,
                "found by a porting tester: the accepted share named no current user participant")
        #expect(try await bob.accept(metadata).currentUserParticipant?.userIdentity.userRecordID == bobID, "accepting again answers the same view")
        #expect(try await shared.allRecordZones().map(\.zoneID) == [zoneID])
        #expect(try await shared.recordZone(for: zoneID).zoneID == zoneID)

        let root = try await shared.record(for: Record.ID(recordName: "groceries", zoneID: zoneID))
        #expect(root["title"] as? String == "Groceries" && root.recordID.zoneID == zoneID)
        #expect(try await shared.record(for: Record.ID(recordName: "bread", zoneID: zoneID))["title"] as? String == "Bread")
        #expect(try await shared.record(for: Record.ID(recordName: share.recordID.recordName, zoneID: zoneID)) is Share)
        await expectCode(.unknownItem) { _ = try await shared.record(for: Record.ID(recordName: "diary", zoneID: zoneID)) }

        let (matches, _) = try await shared.records(matching: Query(recordType: "Item", predicate: QueryPredicate(value: true)), inZoneWith: zoneID)
        #expect(Set(matches.map(\.0.recordName)) == ["milk", "bread"])
        await expectCode(.zoneNotFound) { _ = try await shared.records(matching: Query(recordType: "Item", predicate: QueryPredicate(value: true)), inZoneWith: RecordZone.ID(zoneName: "Other", ownerName: zoneID.ownerName)) }

        let changes = try await shared.recordZoneChanges(inZoneWith: zoneID, since: nil)
        #expect(Set(changes.modificationResultsByID.keys.map(\.recordName)) == ["groceries", "milk", "bread", share.recordID.recordName])
        // A later change of the owner's reaches the participant's next fetch.
        let milk = try await alice.record(for: Record.ID(recordName: "milk", zoneID: RecordZone.ID(zoneName: "Lists")))
        milk["title"] = "Oat milk"
        _ = try await alice.save(milk)
        let later = try await shared.recordZoneChanges(inZoneWith: zoneID, since: changes.changeToken)
        #expect(later.modificationResultsByID.keys.map(\.recordName) == ["milk"])
        #expect(try later.modificationResultsByID.values.first?.get().record["title"] as? String == "Oat milk")

        let databaseChanges = try await shared.databaseChanges(since: nil)
        #expect(databaseChanges.modifications.map(\.zoneID) == [zoneID] && databaseChanges.deletions.isEmpty)
        // The owner's own shared database stays empty: shares show in their sharers' databases.
        #expect(try await env.container(user: "alice").sharedCloudDatabase.allRecordZones().isEmpty)
    }

    private static func participantWrites(_ env: Environment) async throws {
        let (alice, share, zoneID) = try await sharedList(env, bob: .readOnly)
        let bob = env.container(user: "bob")
        try await bob.accept(try await bob.shareMetadata(for: try #require(share.url)))
        let shared = bob.sharedCloudDatabase
        let milk = try await shared.record(for: Record.ID(recordName: "milk", zoneID: zoneID))
        milk["title"] = "Changed by Bob"
        await expectCode(.permissionFailure) { _ = try await shared.save(milk) }
        await expectCode(.permissionFailure) { _ = try await shared.deleteRecord(withID: milk.recordID) }
        let newItem = Record(recordType: "Item", recordID: Record.ID(recordName: "eggs", zoneID: zoneID))
        newItem.setParent(Record.ID(recordName: "groceries", zoneID: zoneID))
        await expectCode(.permissionFailure) { _ = try await shared.save(newItem) }
        let ownZone = RecordZone.ID(zoneName: "Lists")
        #expect(try await alice.record(for: Record.ID(recordName: "milk", zoneID: ownZone))["title"] as? String == "Milk")
        await expectCode(.unknownItem) { _ = try await alice.record(for: Record.ID(recordName: "eggs", zoneID: ownZone)) }

        // The owner makes Bob a writer.
        let stored = try #require(try await alice.record(for: share.recordID) as? Share)
        try #require(stored.participants.first { $0.role == .privateUser }).permission = .readWrite
        _ = try await alice.save(stored)

        let saved = try await shared.save(milk)
        #expect(saved["title"] as? String == "Changed by Bob" && saved.lastModifiedUserRecordID?.recordName == CurrentUserDefaultName)
        _ = try await shared.save(newItem)
        let asOwnerSees = try await alice.record(for: Record.ID(recordName: "milk", zoneID: ownZone))
        #expect(asOwnerSees["title"] as? String == "Changed by Bob")
        let bobID = try await bob.userRecordID()
        #expect(asOwnerSees.lastModifiedUserRecordID == bobID)
        #expect(try await alice.record(for: Record.ID(recordName: "eggs", zoneID: ownZone)).parent?.recordID.recordName == "groceries")
        // Outside the hierarchy, and the share itself, stay refused.
        let stray = Record(recordType: "Item", recordID: Record.ID(recordName: "stray", zoneID: zoneID))
        await expectCode(.permissionFailure) { _ = try await shared.save(stray) }
        await expectCode(.unknownItem) { _ = try await shared.deleteRecord(withID: Record.ID(recordName: "diary", zoneID: zoneID)) }
        let sharedShare = try await shared.record(for: Record.ID(recordName: share.recordID.recordName, zoneID: zoneID))
        await expectCode(.permissionFailure) { _ = try await shared.save(sharedShare) }
        _ = try await shared.deleteRecord(withID: newItem.recordID)
        await expectCode(.unknownItem) { _ = try await alice.record(for: Record.ID(recordName: "eggs", zoneID: ownZone)) }
        #expect(try await alice.record(for: Record.ID(recordName: "diary", zoneID: ownZone))["title"] as? String == "Private")
    }

    private static func zoneWideAndPublicShares(_ env: Environment) async throws {
        let alice = env.container(user: "alice").privateCloudDatabase
        let family = RecordZone.ID(zoneName: "Family")
        _ = try await alice.modifyRecordZones(saving: [RecordZone(zoneID: family)], deleting: [])
        let contact = Record(recordType: "Contact", recordID: Record.ID(recordName: "grandma", zoneID: family))
        contact["name"] = "Grandma"
        _ = try await alice.save(contact)
        let share = Share(recordZoneID: family)
        share.publicPermission = .readWrite
        let saved = try #require(try await alice.modifyRecords(saving: [share], deleting: []).saveResults[share.recordID]?.get() as? Share)

        let dave = env.container(user: "dave")
        let metadata = try await dave.shareMetadata(for: try #require(saved.url), shouldFetchRootRecord: true)
        #expect(metadata.participantRole == .publicUser && metadata.participantStatus == .unknown && metadata.participantPermission == .readWrite)
        #expect(metadata.hierarchicalRootRecordID == nil && metadata.rootRecord == nil)
        #expect(try await dave.sharedCloudDatabase.allRecordZones().isEmpty)

        let accepted = try await dave.accept(metadata)
        let joined = try #require(accepted.participants.first { $0.role == .publicUser })
        let daveID = try await dave.userRecordID()
        #expect(joined.userIdentity.userRecordID == daveID && joined.acceptanceStatus == .accepted && joined.permission == .readWrite)
        let zoneID = RecordZone.ID(zoneName: "Family", ownerName: try await env.container(user: "alice").userRecordID().recordName)
        let shared = dave.sharedCloudDatabase
        #expect(try await shared.allRecordZones().map(\.zoneID) == [zoneID])
        let (matches, _) = try await shared.records(matching: Query(recordType: "Contact", predicate: QueryPredicate(value: true)), inZoneWith: zoneID)
        #expect(matches.map(\.0.recordName) == ["grandma"])
        // The whole zone: a record with no parent may be saved.
        let cousin = Record(recordType: "Contact", recordID: Record.ID(recordName: "cousin", zoneID: zoneID))
        _ = try await shared.save(cousin)
        #expect(try await alice.record(for: Record.ID(recordName: "cousin", zoneID: family)).recordType == "Contact")

        // Those who joined publicly have what the public permission gives now: made read-only,
        // Dave reads; made private, he reaches nothing.
        let readOnly = try #require(try await alice.record(for: saved.recordID) as? Share)
        readOnly.publicPermission = .readOnly
        _ = try await alice.save(readOnly)
        let uncle = Record(recordType: "Contact", recordID: Record.ID(recordName: "uncle", zoneID: zoneID))
        await expectCode(.permissionFailure) { _ = try await shared.save(uncle) }
        #expect(try await shared.record(for: Record.ID(recordName: "grandma", zoneID: zoneID))["name"] as? String == "Grandma")
        let closed = try #require(try await alice.record(for: saved.recordID) as? Share)
        closed.publicPermission = .none
        _ = try await alice.save(closed)
        #expect(try await shared.allRecordZones().isEmpty)
        await expectCode(.zoneNotFound) { _ = try await shared.record(for: Record.ID(recordName: "grandma", zoneID: zoneID)) }
    }

    private static func shareRevocation(_ env: Environment) async throws {
        let (alice, share, zoneID) = try await sharedList(env, bob: .readWrite)
        let bob = env.container(user: "bob")
        try await bob.accept(try await bob.shareMetadata(for: try #require(share.url)))
        let shared = bob.sharedCloudDatabase
        let rootID = Record.ID(recordName: "groceries", zoneID: zoneID)
        _ = try await shared.record(for: rootID)
        let before = try await shared.databaseChanges(since: nil)

        // The owner removes Bob.
        let stored = try #require(try await alice.record(for: share.recordID) as? Share)
        stored.removeParticipant(try #require(stored.participants.first { $0.role == .privateUser }))
        _ = try await alice.save(stored)
        await expectCode(.zoneNotFound) { _ = try await shared.record(for: rootID) }
        await expectCode(.zoneNotFound) { _ = try await shared.save(Record(recordType: "Item", recordID: Record.ID(recordName: "late", zoneID: zoneID))) }
        #expect(try await shared.allRecordZones().isEmpty)
        let after = try await shared.databaseChanges(since: before.changeToken)
        #expect(after.modifications.isEmpty && after.deletions.map(\.zoneID) == [zoneID])
        await expectCode(.participantMayNeedVerification) { _ = try await bob.shareMetadata(for: try #require(share.url)) }

        // Invited again and accepted, then the share is deleted.
        let again = try #require(try await alice.record(for: share.recordID) as? Share)
        again.addParticipant(Share.Participant(userIdentity: UserIdentity(userRecordID: try await bob.userRecordID())))
        _ = try await alice.save(again)
        try await bob.accept(try await bob.shareMetadata(for: try #require(share.url)))
        #expect(try await shared.record(for: rootID)["title"] as? String == "Groceries")
        _ = try await alice.deleteRecord(withID: share.recordID)
        await expectCode(.zoneNotFound) { _ = try await shared.record(for: rootID) }
        #expect(try await shared.allRecordZones().isEmpty)
        await expectCode(.unknownItem) { _ = try await bob.shareMetadata(for: try #require(share.url)) }
    }
}

extension EngineConformance {
    private static func sharedZoneDeletion(_ env: Environment) async throws {
        let (alice, share, zoneID) = try await sharedList(env, bob: .readWrite)
        let bob = env.container(user: "bob")
        try await bob.accept(try await bob.shareMetadata(for: try #require(share.url)))
        let shared = bob.sharedCloudDatabase
        let before = try await shared.databaseChanges(since: nil)
        #expect(before.modifications.map(\.zoneID) == [zoneID])

        let ownZone = RecordZone.ID(zoneName: "Lists")
        _ = try await alice.modifyRecordZones(saving: [], deleting: [ownZone])
        #expect(try await shared.allRecordZones().isEmpty)
        await expectCode(.zoneNotFound) { _ = try await shared.record(for: Record.ID(recordName: "groceries", zoneID: zoneID)) }
        await expectCode(.unknownItem) { _ = try await bob.shareMetadata(for: try #require(share.url)) }
        let after = try await shared.databaseChanges(since: before.changeToken)
        #expect(after.modifications.isEmpty && after.deletions.map(\.zoneID) == [zoneID])

        // Made again, with a record under the old root's name: nothing of it is shared.
        _ = try await alice.modifyRecordZones(saving: [RecordZone(zoneID: ownZone)], deleting: [])
        _ = try await alice.save(Record(recordType: "List", recordID: Record.ID(recordName: "groceries", zoneID: ownZone)))
        #expect(try await shared.allRecordZones().isEmpty)
        await expectCode(.zoneNotFound) { _ = try await shared.record(for: Record.ID(recordName: "groceries", zoneID: zoneID)) }
        await expectCode(.zoneNotFound) { _ = try await shared.save(Record(recordType: "Item", recordID: Record.ID(recordName: "late", zoneID: zoneID))) }
    }
}

extension EngineConformance {
    private static func copiedShareIsReachable(_ env: Environment) async throws {
        let (_, share, zoneID) = try await sharedList(env, bob: .readOnly)
        let copy = try env.makeAnotherEngine()
        _ = try await StoreCopier(from: env.engine, to: copy).run()

        let bob = Container(identifier: Environment.containerIdentifier, engine: copy, userName: "bob")
        let metadata = try await bob.shareMetadata(for: try #require(share.url))
        #expect(metadata.participantStatus == .pending && metadata.hierarchicalRootRecordID == Record.ID(recordName: "groceries", zoneID: zoneID))
        try await bob.accept(metadata)
        #expect(try await bob.sharedCloudDatabase.record(for: Record.ID(recordName: "bread", zoneID: zoneID))["title"] as? String == "Bread")
    }
}

extension EngineConformance {
    private static func participantLeaves(_ env: Environment) async throws {
        let (alice, share, zoneID) = try await sharedList(env, bob: .readWrite)
        let bob = env.container(user: "bob")
        let url = try #require(share.url)
        try await bob.accept(try await bob.shareMetadata(for: url))
        let shared = bob.sharedCloudDatabase
        let shareID = Record.ID(recordName: share.recordID.recordName, zoneID: zoneID)
        let before = try await shared.databaseChanges(since: nil)

        #expect(try await shared.deleteRecord(withID: shareID) == shareID)
        #expect(try await shared.allRecordZones().isEmpty)
        await expectCode(.zoneNotFound) { _ = try await shared.record(for: Record.ID(recordName: "groceries", zoneID: zoneID)) }
        let after = try await shared.databaseChanges(since: before.changeToken)
        #expect(after.deletions.map(\.zoneID) == [zoneID])
        let ownersCopy = try #require(try await alice.record(for: share.recordID) as? Share)
        #expect(ownersCopy.participants.filter { $0.role == .privateUser }.map(\.acceptanceStatus) == [.removed])
        await expectCode(.participantMayNeedVerification) { _ = try await bob.shareMetadata(for: url) }
        // The owner's records stay.
        #expect(try await alice.record(for: Record.ID(recordName: "groceries", zoneID: RecordZone.ID(zoneName: "Lists")))["title"] as? String == "Groceries")

        // Invited again, Bob accepts again and reaches the list again.
        let again = Share.Participant(userIdentity: UserIdentity(userRecordID: try await bob.userRecordID()))
        again.permission = .readOnly
        ownersCopy.addParticipant(again)
        let reinvited = try #require(try await alice.save(ownersCopy) as? Share)
        #expect(reinvited.participants.filter { $0.role == .privateUser }.map(\.acceptanceStatus) == [.pending])
        try await bob.accept(try await bob.shareMetadata(for: url))
        #expect(try await shared.record(for: Record.ID(recordName: "groceries", zoneID: zoneID))["title"] as? String == "Groceries")
    }
}

extension EngineConformance {
    private static func sharedDatabaseSubscriptionFires(_ env: Environment) async throws {
        let (alice, share, zoneID) = try await sharedList(env, bob: .readWrite)
        let lists = RecordZone.ID(zoneName: "Lists")
        let (bob, carol, dave) = (env.container(user: "bob"), env.container(user: "carol"), env.container(user: "dave"))
        let url = try #require(share.url)
        try await bob.accept(try await bob.shareMetadata(for: url))
        // Carol is invited and accepts; Dave is invited and does not.
        let invited = try #require(try await alice.record(for: share.recordID) as? Share)
        for user in [carol, dave] { invited.addParticipant(Share.Participant(userIdentity: UserIdentity(userRecordID: try await user.userRecordID()))) }
        _ = try await alice.save(invited)
        try await carol.accept(try await carol.shareMetadata(for: url))
        func subscribe(_ user: Container, _ id: String, recordType: String? = nil) async throws {
            let subscription = DatabaseSubscription(subscriptionID: id)
            subscription.recordType = recordType
            subscription.notificationInfo = NotificationInfo()
            _ = try await user.sharedCloudDatabase.save(subscription)
        }
        for user in [bob, carol, dave] { try await subscribe(user, "shared-changes") }
        try await subscribe(bob, "shared-lists", recordType: "List")
        var tokens: [String: ServerChangeToken] = [:]
        // What each user was told since last asked: "ID scope" per notification, in order.
        func told(_ name: String, _ user: Container) async throws -> [String] {
            let batch = try await NotificationFeed(database: user.privateCloudDatabase).nextBatch(after: tokens[name], limit: 100)
            tokens[name] = batch.token
            return batch.notifications.map { note in
                let scope = (note as? DatabaseNotification)?.databaseScope
                return "\(note.subscriptionID ?? "?") \(scope == .shared ? "shared" : scope == .private ? "private" : "other")"
            }
        }
        for (name, user) in [("bob", bob), ("carol", carol), ("dave", dave)] { _ = try await told(name, user) }

        // Alice changes an Item of the shared hierarchy: Bob's and Carol's shared databases
        // changed (Bob's List-only subscription stays quiet); Dave, who did not accept, hears nothing.
        let bread = try await alice.record(for: Record.ID(recordName: "bread", zoneID: lists))
        bread["title"] = "Rye bread"
        _ = try await alice.save(bread)
        #expect(try await told("bob", bob) == ["shared-changes shared"])
        #expect(try await told("carol", carol) == ["shared-changes shared"])
        #expect(try await told("dave", dave).isEmpty, "an invitee who did not accept is told nothing")

        // A record outside the hierarchy: nothing. A new record joining it: told.
        let diary = try await alice.record(for: Record.ID(recordName: "diary", zoneID: lists))
        diary["title"] = "Still private"
        _ = try await alice.save(diary)
        #expect(try await told("bob", bob).isEmpty, "a change Bob does not reach tells him nothing")
        let eggs = Record(recordType: "Item", recordID: Record.ID(recordName: "eggs", zoneID: lists))
        eggs.setParent(Record.ID(recordName: "milk", zoneID: lists))
        _ = try await alice.save(eggs)
        #expect(try await told("bob", bob) == ["shared-changes shared"])

        // A deletion outside the hierarchy tells him nothing; one in it (its type not read)
        // tells subscriptions of every type.
        _ = try await alice.deleteRecord(withID: Record.ID(recordName: "diary", zoneID: lists))
        #expect(try await told("bob", bob).isEmpty, "the deletion of a record Bob never reached")
        _ = try await alice.deleteRecord(withID: Record.ID(recordName: "bread", zoneID: lists))
        #expect(try await told("bob", bob) == ["shared-changes shared", "shared-lists shared"])

        // Bob's write through the shared database tells Carol, and his own subscription, as a
        // write in a private database tells its user's private subscriptions.
        #expect(try await told("carol", carol) == ["shared-changes shared", "shared-changes shared"], "the new record and the deletion")
        // A record moved out of the hierarchy is a deletion to them: it tells every type too.
        let movedEggs = try await alice.record(for: eggs.recordID)
        movedEggs.setParent(nil as Record.ID?)
        _ = try await alice.save(movedEggs)
        #expect(try await told("bob", bob) == ["shared-changes shared", "shared-lists shared"])
        #expect(try await told("carol", carol) == ["shared-changes shared"])
        let milk = try await bob.sharedCloudDatabase.record(for: Record.ID(recordName: "milk", zoneID: zoneID))
        milk["title"] = "Oat milk"
        _ = try await bob.sharedCloudDatabase.save(milk)
        let carolHeard = try await told("carol", carol)
        #expect(carolHeard == ["shared-changes shared"], "\(carolHeard)")
        #expect(try await told("bob", bob) == ["shared-changes shared"])

        // Alice removes Bob: he is told his shared database changed (the zone left it), then nothing more.
        let current = try #require(try await alice.record(for: share.recordID) as? Share)
        let bobName = try await bob.userRecordID().recordName
        current.removeParticipant(try #require(current.participants.first { $0.userIdentity.userRecordID?.recordName == bobName }))
        _ = try await alice.save(current)
        #expect(try await told("bob", bob) == ["shared-changes shared", "shared-lists shared"])
        #expect(try await bob.sharedCloudDatabase.allRecordZones().isEmpty)
        let root = try await alice.record(for: Record.ID(recordName: "groceries", zoneID: lists))
        root["title"] = "Weekly groceries"
        _ = try await alice.save(root)
        #expect(try await told("bob", bob).isEmpty)

        // Alice deletes the share: Carol is told; then a zone shared as a whole, Dave's, which
        // Alice deletes: Dave is told.
        _ = try await told("carol", carol)
        _ = try await alice.deleteRecord(withID: share.recordID)
        #expect(try await told("carol", carol) == ["shared-changes shared"])
        #expect(try await carol.sharedCloudDatabase.allRecordZones().isEmpty)
        let family = RecordZone.ID(zoneName: "Family")
        _ = try await alice.save(RecordZone(zoneID: family))
        let wholeZone = Share(recordZoneID: family)
        wholeZone.addParticipant(Share.Participant(userIdentity: UserIdentity(userRecordID: try await dave.userRecordID())))
        let savedWholeZone = try #require(try await alice.modifyRecords(saving: [wholeZone], deleting: []).saveResults[wholeZone.recordID]?.get() as? Share)
        try await dave.accept(try await dave.shareMetadata(for: try #require(savedWholeZone.url)))
        _ = try await told("dave", dave)
        _ = try await alice.save(Record(recordType: "Contact", recordID: Record.ID(recordName: "grandma", zoneID: family)))
        #expect(try await told("dave", dave) == ["shared-changes shared"], "a zone shared as a whole: any change")
        _ = try await alice.deleteRecordZone(withID: family)
        #expect(try await told("dave", dave) == ["shared-changes shared"])
        #expect(try await dave.sharedCloudDatabase.allRecordZones().isEmpty)
    }

    private static func ownersPrivateAndSharedSubscriptionsStayApart(_ env: Environment) async throws {
        // Alice owns Lists, shared with Bob, and keeps a private database subscription; she is
        // also a participant of Carol's zone, and keeps a shared database subscription.
        let (alice, share, zoneID) = try await sharedList(env, bob: .readWrite)
        let (aliceContainer, bob, carol) = (env.container(user: "alice"), env.container(user: "bob"), env.container(user: "carol"))
        try await bob.accept(try await bob.shareMetadata(for: try #require(share.url)))
        let trips = RecordZone.ID(zoneName: "Trips")
        _ = try await carol.privateCloudDatabase.save(RecordZone(zoneID: trips))
        let carolsShare = Share(recordZoneID: trips)
        carolsShare.addParticipant(Share.Participant(userIdentity: UserIdentity(userRecordID: try await aliceContainer.userRecordID())))
        let savedCarols = try #require(try await carol.privateCloudDatabase.modifyRecords(saving: [carolsShare], deleting: []).saveResults[carolsShare.recordID]?.get() as? Share)
        try await aliceContainer.accept(try await aliceContainer.shareMetadata(for: try #require(savedCarols.url)))
        for (database, id) in [(alice, "alice-private"), (aliceContainer.sharedCloudDatabase, "alice-shared")] {
            let subscription = DatabaseSubscription(subscriptionID: id)
            subscription.notificationInfo = NotificationInfo()
            _ = try await database.save(subscription)
        }
        let listsSubscription = RecordZoneSubscription(zoneID: RecordZone.ID(zoneName: "Lists"), subscriptionID: "alice-lists")
        listsSubscription.notificationInfo = NotificationInfo()
        _ = try await alice.save(listsSubscription)
        var token = try await NotificationFeed(database: alice).nextBatch(after: nil, limit: 100).token
        func told() async throws -> [String] {
            let batch = try await NotificationFeed(database: alice).nextBatch(after: token, limit: 100)
            token = batch.token
            return batch.notifications.map { note in
                let scope = (note as? DatabaseNotification)?.databaseScope ?? (note as? RecordZoneNotification)?.databaseScope
                let zone = (note as? RecordZoneNotification)?.recordZoneID.map { " \($0.zoneName)" } ?? ""
                return "\(note.subscriptionID ?? "?") \(scope == .shared ? "shared" : scope == .private ? "private" : "other")\(zone)"
            }
        }
        // Carol's write tells Alice's shared database; Bob's write in Alice's zone tells her private database's.
        _ = try await carol.privateCloudDatabase.save(Record(recordType: "Trip", recordID: Record.ID(recordName: "alps", zoneID: trips)))
        #expect(try await told() == ["alice-shared shared"])
        let milk = try await bob.sharedCloudDatabase.record(for: Record.ID(recordName: "milk", zoneID: zoneID))
        milk["title"] = "Oat milk"
        _ = try await bob.sharedCloudDatabase.save(milk)
        let aliceHeard = try await told()
        #expect(aliceHeard == ["alice-lists private Lists", "alice-private private"], "her zone's and her database's subscriptions: \(aliceHeard)")
        _ = try await carol.privateCloudDatabase.save(Record(recordType: "Trip", recordID: Record.ID(recordName: "andes", zoneID: trips)))
        #expect(try await told() == ["alice-shared shared"])
    }

    private static func participantLeavesZone(_ env: Environment) async throws {
        let (alice, groceriesShare, zoneID) = try await sharedList(env, bob: .readOnly)
        let bob = env.container(user: "bob")
        let carol = env.container(user: "carol")
        // A second hierarchy of the zone, shared with Bob (read-write) and Carol.
        let chores = Record(recordType: "List", recordID: Record.ID(recordName: "chores", zoneID: RecordZone.ID(zoneName: "Lists")))
        chores["title"] = "Chores"
        let storedChores = try await alice.save(chores)
        let choresShare = Share(rootRecord: storedChores)
        for (user, permission) in [(bob, Share.ParticipantPermission.readWrite), (carol, .readOnly)] {
            let participant = Share.Participant(userIdentity: UserIdentity(userRecordID: try await user.userRecordID()))
            participant.permission = permission
            choresShare.addParticipant(participant)
        }
        let (saves, _) = try await alice.modifyRecords(saving: [storedChores, choresShare], deleting: [])
        let savedChoresShare = try #require(try saves[choresShare.recordID]?.get() as? Share)
        try await bob.accept(try await bob.shareMetadata(for: try #require(groceriesShare.url)))
        try await bob.accept(try await bob.shareMetadata(for: try #require(savedChoresShare.url)))
        try await carol.accept(try await carol.shareMetadata(for: try #require(savedChoresShare.url)))
        let shared = bob.sharedCloudDatabase
        #expect(try await shared.allRecordZones().map(\.zoneID) == [zoneID])
        let before = try await shared.databaseChanges(since: nil)

        #expect(try await shared.deleteRecordZone(withID: zoneID) == zoneID)

        #expect(try await shared.allRecordZones().isEmpty)
        await expectCode(.zoneNotFound) { _ = try await shared.record(for: Record.ID(recordName: "chores", zoneID: zoneID)) }
        await expectCode(.zoneNotFound) { _ = try await shared.record(for: Record.ID(recordName: "milk", zoneID: zoneID)) }
        #expect(try await shared.databaseChanges(since: before.changeToken).deletions.map(\.zoneID) == [zoneID])
        let bobName = try await bob.userRecordID().recordName
        for shareID in [groceriesShare.recordID, savedChoresShare.recordID] {
            let ownersCopy = try #require(try await alice.record(for: shareID) as? Share)
            #expect(ownersCopy.participants.first { $0.userIdentity.userRecordID?.recordName == bobName }?.acceptanceStatus == .removed)
        }
        // The owner's zone and records stay, and so does Carol's access.
        #expect(Set(try await alice.allRecordZones().map(\.zoneID.zoneName)) == ["_defaultZone", "Lists"])
        #expect(try await alice.record(for: Record.ID(recordName: "bread", zoneID: RecordZone.ID(zoneName: "Lists")))["title"] as? String == "Bread")
        #expect(try await carol.sharedCloudDatabase.record(for: Record.ID(recordName: "chores", zoneID: zoneID))["title"] as? String == "Chores")

        // Left already, and never shared: zoneNotFound, per zone, and nothing else changes.
        let elsewhere = RecordZone.ID(zoneName: "Elsewhere", ownerName: zoneID.ownerName)
        let (_, deletes) = try await shared.modifyRecordZones(saving: [], deleting: [zoneID, elsewhere])
        #expect(errorCode(deletes[zoneID]) == .zoneNotFound)
        #expect(errorCode(deletes[elsewhere]) == .zoneNotFound)
        await expectCode(.invalidArguments) { _ = try await shared.deleteRecordZone(withID: RecordZone.ID(zoneName: RecordZone.ID.defaultZoneName, ownerName: zoneID.ownerName)) }
        #expect(try await carol.sharedCloudDatabase.allRecordZones().map(\.zoneID) == [zoneID])
    }

    private static func acceptanceIsTheParticipants(_ env: Environment) async throws {
        let (alice, share, zoneID) = try await sharedList(env, bob: .readOnly)
        let bob = env.container(user: "bob")
        let carol = env.container(user: "carol")
        let carolName = try await carol.userRecordID().recordName
        let url = try #require(share.url)

        // Alice's copy of the share, its JSON saying every participant accepted, Carol too.
        func forged() async throws -> Share {
            let stored = try #require(try await alice.record(for: share.recordID) as? Share)
            var extras = stored.jsonExtras
            let text = try #require(extras.members["participants"])
            var entries = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]])
            for index in entries.indices { entries[index]["acceptanceStatus"] = "ACCEPTED" }
            // Carol's entry, once: a save of the forged share before stored it already.
            if !entries.contains(where: { $0["participantId"] as? String == "carol" }) {
                entries.append(["participantId": "carol", "type": "USER", "acceptanceStatus": "ACCEPTED", "permission": "READ_WRITE",
                                "userIdentity": ["userRecordName": carolName]])
            }
            // Members of CloudKit's that Stratus does not read, which a restore keeps.
            for index in entries.indices { entries[index]["orgUser"] = false; entries[index]["cloudKitLater"] = ["kept": 1] }
            extras.members["participants"] = String(decoding: try JSONSerialization.data(withJSONObject: entries), as: UTF8.self)
            stored.jsonExtras = extras
            return stored
        }
        func restore(_ record: Record) async throws {
            let op = ModifyRecordsOperation(recordsToSave: [record])
            op.savePolicy = .allKeys
            op.preservesSystemFields = true
            let result: Result<Void, Error> = await withCheckedContinuation { continuation in
                op.modifyRecordsResultBlock = { continuation.resume(returning: $0) }
                alice.add(op)
            }
            try result.get()
        }
        func statuses() async throws -> [String: Share.ParticipantAcceptanceStatus] {
            let stored = try #require(try await alice.record(for: share.recordID) as? Share)
            let named = stored.participants.filter { $0.role != .owner }.map { ($0.userIdentity.userRecordID?.recordName ?? "", $0.acceptanceStatus) }
            return Dictionary(named, uniquingKeysWith: { first, _ in first })
        }
        let bobName = try await bob.userRecordID().recordName

        _ = try await alice.save(try await forged())
        #expect(try await statuses() == [bobName: .pending, carolName: .pending])
        try await restore(try await forged())
        #expect(try await statuses() == [bobName: .pending, carolName: .pending])
        let restored = try #require(try await alice.record(for: share.recordID).jsonExtras.members["participants"])
        let restoredEntries = try #require(try JSONSerialization.jsonObject(with: Data(restored.utf8)) as? [[String: Any]])
        #expect(restoredEntries.count == 3 && restoredEntries.allSatisfy { $0["orgUser"] as? Bool == false && ($0["cloudKitLater"] as? [String: Any])?["kept"] as? Int == 1 },
                "the restore changed each entry's acceptance alone: \(restored)")
        #expect(restored.contains(#""orgUser":false"#), "a boolean stays a boolean: \(restored)")
        #expect(try await bob.sharedCloudDatabase.allRecordZones().isEmpty)
        #expect(try await carol.sharedCloudDatabase.allRecordZones().isEmpty)
        #expect(try await bob.shareMetadata(for: url).participantStatus == .pending)
        await expectCode(.zoneNotFound) { _ = try await carol.sharedCloudDatabase.record(for: Record.ID(recordName: "groceries", zoneID: zoneID)) }

        // Bob accepts; a restore of Alice's copy from before keeps his acceptance.
        let before = try #require(try await alice.record(for: share.recordID) as? Share)
        try await bob.accept(try await bob.shareMetadata(for: url))
        try await restore(before)
        #expect(try await statuses() == [bobName: .accepted, carolName: .pending])
        #expect(try await bob.sharedCloudDatabase.allRecordZones().map(\.zoneID) == [zoneID])

        // A copy of the whole store keeps what Bob gave, and gives Carol nothing.
        let copy = try env.makeAnotherEngine()
        _ = try await StoreCopier(from: env.engine, to: copy).run()
        let bobInCopy = Container(identifier: Environment.containerIdentifier, engine: copy, userName: "bob")
        #expect(try await bobInCopy.sharedCloudDatabase.record(for: Record.ID(recordName: "bread", zoneID: zoneID))["title"] as? String == "Bread")
        #expect(try await Container(identifier: Environment.containerIdentifier, engine: copy, userName: "carol").sharedCloudDatabase.allRecordZones().isEmpty)
    }
}

extension EngineConformance {
    private static func restoredShareWithoutToken(_ env: Environment) async throws {
        let (alice, share, zoneID) = try await sharedList(env, bob: .readOnly)
        // The share as an export that left out its URL holds it, restored after it was deleted.
        let stored = try #require(try await alice.record(for: share.recordID) as? Share)
        var extras = stored.jsonExtras
        extras.members["shortGUID"] = nil
        let exported = Record(recordType: Record.SystemType.share, recordID: stored.recordID, systemFields: stored.systemFields, fields: stored.fieldValues,
                              jsonExtras: extras)
        _ = try await alice.deleteRecord(withID: share.recordID)
        let op = ModifyRecordsOperation(recordsToSave: [exported])
        op.savePolicy = .allKeys
        op.preservesSystemFields = true
        let result: Result<Void, Error> = await withCheckedContinuation { continuation in
            op.modifyRecordsResultBlock = { continuation.resume(returning: $0) }
            alice.add(op)
        }
        try result.get()

        let restored = try #require(try await alice.record(for: share.recordID) as? Share)
        let url = try #require(restored.url, "a restored share has a URL")
        #expect(url != share.url, "a new token, as a new share gets")
        let bob = env.container(user: "bob")
        let metadata = try await bob.shareMetadata(for: url)
        #expect(metadata.participantStatus == .pending)
        try await bob.accept(metadata)
        #expect(try await bob.sharedCloudDatabase.record(for: Record.ID(recordName: "milk", zoneID: zoneID))["title"] as? String == "Milk")
    }
}

/// Results a block appends from an operation thread.
private final class LockedResults: @unchecked Sendable {
    // `@unchecked Sendable`: every access holds the lock.
    private let lock = NSLock()
    private var stored: [(String, Bool)] = []

    func append(_ url: String, _ succeeded: Bool) { lock.withLock { stored.append((url, succeeded)) } }
    var items: [(String, Bool)] { lock.withLock { stored } }
}

private extension Result {
    var failure: Failure? { if case .failure(let error) = self { error } else { nil } }
}
