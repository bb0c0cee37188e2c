import Foundation
import Stratus
import Testing

// MARK: - Sharing: what a record-level share's hierarchy holds

extension EngineConformance {
    static let sharedHierarchyCases: [TestCase] = [
        TestCase("a read-write participant cannot create a record under the name of a deleted parent whose children are still stored: the children stay outside the share; a zone shared as a whole allows it", noAdoptionOfOrphans),
        TestCase("in a zone shared record by record, a participant's deletion of a stored record outside the share and of a name never stored answer alike (unknownItem, as a fetch does) and delete nothing; in a zone shared as a whole a name never stored is deleted as in the owner's zone", deletionsTellNoNames),
        TestCase("a record that leaves a participant's hierarchy (the owner gives it another parent, or deletes a record above it) is reported deleted to them with everything below it, in their zone changes since their token; moves in another share's hierarchy reach no other participant, nor do deletions of records that were never in theirs, and the owner's own zone changes report only what the owner did", leavingAHierarchyIsADeletion),
        TestCase("a record that comes into a participant's hierarchy (the owner gives it a parent in the share, or makes again the deleted parent orphans still name) is reported changed to them with everything below it; a small resultsLimit pages through the moves as through other changes, and compaction takes them as it takes tombstones", enteringAHierarchyIsAChange),
        TestCase("a read-write participant's deletion through the shared database takes what was below the record out of the hierarchy for the other participants too, and a record the owner moves in is handed with the keys a participant asked for", participantsMovesReachOthers),
        TestCase("in a zone with two record-level shares, a deletion (a direct one, or a cascade along a .deleteSelf reference) fires the database subscriptions of the participants of the hierarchy its record was in only, and one of a record in no hierarchy fires none", deletionsTellTheirHierarchiesOnly),
        TestCase("deletions made in a zone before it had a record-level share, under the root's own hierarchy or outside it, reach no participant's zone changes; the owner's own zone changes still list them", deletionsBeforeTheShareTellNoNames),
    ]

    /// Alice's zone `Family` holding `records` (made for the zone's ID), shared as a whole with
    /// Bob read-write, and accepted. Answers Alice's ID of the zone and Bob's.
    private static func sharedFamily(_ env: Environment, holding records: (RecordZone.ID) -> [Record] = { _ in [] }) async throws
        -> (family: RecordZone.ID, shared: RecordZone.ID) {
        let alice = env.container(user: "alice")
        let family = RecordZone.ID(zoneName: "Family")
        _ = try await alice.privateCloudDatabase.modifyRecordZones(saving: [RecordZone(zoneID: family)], deleting: [])
        let stored = records(family)
        if !stored.isEmpty { _ = try await alice.privateCloudDatabase.modifyRecords(saving: stored, deleting: []) }
        let share = Share(recordZoneID: family)
        let bob = env.container(user: "bob")
        let participant = Share.Participant(userIdentity: UserIdentity(userRecordID: try await bob.userRecordID()))
        participant.permission = .readWrite
        share.addParticipant(participant)
        let saved = try #require(try await alice.privateCloudDatabase.modifyRecords(saving: [share], deleting: []).saveResults[share.recordID]?.get() as? Share)
        try await bob.accept(try await bob.shareMetadata(for: try #require(saved.url)))
        return (family, RecordZone.ID(zoneName: "Family", ownerName: try await alice.userRecordID().recordName))
    }

    /// Shares the stored record `rootID` of `owner`'s private database with `user`, read-only,
    /// and has `user` accept; answers the share as saved.
    private static func shareRoot(_ rootID: Record.ID, of owner: Database, with user: Container) async throws -> Share {
        let storedRoot = try await owner.record(for: rootID)
        let share = Share(rootRecord: storedRoot)
        let participant = Share.Participant(userIdentity: UserIdentity(userRecordID: try await user.userRecordID()))
        participant.permission = .readOnly
        share.addParticipant(participant)
        let saved = try #require(try await owner.modifyRecords(saving: [storedRoot, share], deleting: []).saveResults[share.recordID]?.get() as? Share)
        try await user.accept(try await user.shareMetadata(for: try #require(saved.url)))
        return saved
    }

    /// Bob's record zone changes since `token`: the names changed and the names deleted (with
    /// their types), read in pages of `limit`; and the token after them.
    private static func changeNames(_ shared: Database, _ zoneID: RecordZone.ID, since token: ServerChangeToken?, limit: Int? = nil) async throws
        -> (changed: Set<String>, deleted: [String: String], token: ServerChangeToken) {
        var changed: Set<String> = []
        var deleted: [String: String] = [:]
        var token = token
        var more = true
        while more {
            let batch = try await shared.recordZoneChanges(inZoneWith: zoneID, since: token, resultsLimit: limit)
            for (id, result) in batch.modificationResultsByID {
                _ = try result.get()
                deleted[id.recordName] = nil
                changed.insert(id.recordName)
            }
            for deletion in batch.deletions {
                changed.remove(deletion.recordID.recordName)
                deleted[deletion.recordID.recordName] = deletion.recordType
            }
            (token, more) = (batch.changeToken, batch.moreComing)
        }
        return (changed, deleted, try #require(token))
    }

    private static func leavingAHierarchyIsADeletion(_ env: Environment) async throws {
        let (alice, share, zoneID) = try await sharedList(env, bob: .readOnly)
        let bob = env.container(user: "bob")
        try await bob.accept(try await bob.shareMetadata(for: try #require(share.url)))
        let shared = bob.sharedCloudDatabase
        let ownZone = RecordZone.ID(zoneName: "Lists")
        let start = try await changeNames(shared, zoneID, since: nil)
        #expect(start.changed == ["groceries", "milk", "bread", share.recordID.recordName] && start.deleted.isEmpty)
        let aliceStart = try await alice.recordZoneChanges(inZoneWith: ownZone, since: nil).changeToken

        // Alice takes `milk` out of the list: it and `bread` below it leave Bob's hierarchy.
        let milk = try await alice.record(for: Record.ID(recordName: "milk", zoneID: ownZone))
        milk.setParent(nil as Record.ID?)
        _ = try await alice.save(milk)
        let left = try await changeNames(shared, zoneID, since: start.token)
        #expect(left.changed.isEmpty && left.deleted == ["milk": "Item", "bread": "Item"], "\(left)")
        // A device starting afresh is handed what Bob reaches, and no deletion of what left before.
        let fresh = try await changeNames(shared, zoneID, since: nil)
        #expect(fresh.changed == ["groceries", share.recordID.recordName] && fresh.deleted.isEmpty, "\(fresh)")
        await expectCode(.unknownItem) { _ = try await shared.record(for: Record.ID(recordName: "bread", zoneID: zoneID)) }
        // Read again from the same token, the answer is the same; from the new one, nothing.
        #expect(try await changeNames(shared, zoneID, since: start.token).deleted == ["milk": "Item", "bread": "Item"])
        let after = try await changeNames(shared, zoneID, since: left.token)
        #expect(after.changed.isEmpty && after.deleted.isEmpty)

        // Another share of the zone, Bob not in it: what moves in its hierarchy is not Bob's to hear of.
        let chores = Record(recordType: "List", recordID: Record.ID(recordName: "chores", zoneID: ownZone))
        let storedChores = try await alice.save(chores)
        _ = try await alice.modifyRecords(saving: [storedChores, Share(rootRecord: storedChores)], deleting: [])
        let diary = try await alice.record(for: Record.ID(recordName: "diary", zoneID: ownZone))
        diary.setParent(chores)
        _ = try await alice.save(diary)
        let diaryBack = try await alice.record(for: diary.recordID)
        diaryBack.setParent(nil as Record.ID?)
        _ = try await alice.save(diaryBack)
        let others = try await changeNames(shared, zoneID, since: after.token)
        #expect(others.changed.isEmpty && others.deleted.isEmpty, "\(others)")

        // Back under the list, then `milk` deleted: `bread`, still stored, leaves with it.
        let milkBack = try await alice.record(for: milk.recordID)
        milkBack.setParent(Record.ID(recordName: "groceries", zoneID: ownZone))
        _ = try await alice.save(milkBack)
        let back = try await changeNames(shared, zoneID, since: after.token)
        #expect(back.changed == ["milk", "bread"] && back.deleted.isEmpty, "\(back)")
        _ = try await alice.deleteRecord(withID: milk.recordID)
        let orphaned = try await changeNames(shared, zoneID, since: back.token)
        #expect(orphaned.changed.isEmpty && orphaned.deleted == ["milk": "Item", "bread": "Item"], "\(orphaned)")
        #expect(try await alice.record(for: Record.ID(recordName: "bread", zoneID: ownZone))["title"] as? String == "Bread")

        // Alice's own changes tell what she did, and `bread`, unchanged, is not among them.
        let own = try await alice.recordZoneChanges(inZoneWith: ownZone, since: aliceStart)
        #expect(own.deletions.map(\.recordID.recordName) == ["milk"])
        #expect(own.modificationResultsByID.keys.contains { $0.recordName == "diary" } && !own.modificationResultsByID.keys.contains { $0.recordName == "bread" })

        // One request that moves records of one chain: what each reached before is what it
        // reached before the request, whatever the request did above it. `sweep` (under
        // `chores`, Alice's other share) goes under the list and `mop`, below it, stays with
        // `chores`: Bob is handed `sweep`, and nothing of `mop`, which was never his.
        let sweep = Record(recordType: "Item", recordID: Record.ID(recordName: "sweep", zoneID: ownZone))
        sweep.setParent(chores)
        let mop = Record(recordType: "Item", recordID: Record.ID(recordName: "mop", zoneID: ownZone))
        mop.setParent(sweep)
        _ = try await alice.modifyRecords(saving: [sweep, mop], deleting: [])
        let beforeBoth = try await changeNames(shared, zoneID, since: orphaned.token)
        let (storedSweep, storedMop) = (try await alice.record(for: sweep.recordID), try await alice.record(for: mop.recordID))
        storedSweep.setParent(Record.ID(recordName: "groceries", zoneID: ownZone))
        storedMop.setParent(chores)
        _ = try await alice.modifyRecords(saving: [storedSweep, storedMop], deleting: [])
        let both = try await changeNames(shared, zoneID, since: beforeBoth.token)
        #expect(both.changed == ["sweep"] && both.deleted.isEmpty, "\(both)")

        // One request deleting two records of a chain: the record below both leaves with them.
        let dust = Record(recordType: "Note", recordID: Record.ID(recordName: "dust", zoneID: ownZone))
        dust.setParent(sweep)
        let pan = Record(recordType: "Note", recordID: Record.ID(recordName: "pan", zoneID: ownZone))
        pan.setParent(dust)
        _ = try await alice.modifyRecords(saving: [dust, pan], deleting: [])
        let chain = try await changeNames(shared, zoneID, since: both.token)
        #expect(chain.changed == ["dust", "pan"], "\(chain)")
        _ = try await alice.modifyRecords(saving: [], deleting: [sweep.recordID, dust.recordID])
        let chainGone = try await changeNames(shared, zoneID, since: chain.token)
        #expect(chainGone.changed.isEmpty && chainGone.deleted == ["sweep": "Item", "dust": "Note", "pan": "Note"], "\(chainGone)")

        // Deletions of records that were never in Bob's hierarchies are not his to hear of, nor
        // their names: `diary` (in none now) and `mop` (in the other share's).
        _ = try await alice.modifyRecords(saving: [], deleting: [diary.recordID, mop.recordID])
        let notBobs = try await changeNames(shared, zoneID, since: chainGone.token)
        #expect(notBobs.changed.isEmpty && notBobs.deleted.isEmpty, "\(notBobs)")
    }

    private static func enteringAHierarchyIsAChange(_ env: Environment) async throws {
        let (alice, share, zoneID) = try await sharedList(env, bob: .readOnly)
        let bob = env.container(user: "bob")
        try await bob.accept(try await bob.shareMetadata(for: try #require(share.url)))
        let shared = bob.sharedCloudDatabase
        let ownZone = RecordZone.ID(zoneName: "Lists")
        // A pantry of three levels, outside the list.
        let pantry = Record(recordType: "List", recordID: Record.ID(recordName: "pantry", zoneID: ownZone))
        let rice = Record(recordType: "Item", recordID: Record.ID(recordName: "rice", zoneID: ownZone))
        rice.setParent(pantry)
        let grain = Record(recordType: "Note", recordID: Record.ID(recordName: "basmati", zoneID: ownZone))
        grain.setParent(rice)
        _ = try await alice.modifyRecords(saving: [pantry, rice, grain], deleting: [])
        let start = try await changeNames(shared, zoneID, since: nil)
        #expect(start.changed == ["groceries", "milk", "bread", share.recordID.recordName])

        // Alice puts the pantry under the list: all of it is Bob's now, pages of two at a time.
        let stored = try await alice.record(for: pantry.recordID)
        stored.setParent(Record.ID(recordName: "groceries", zoneID: ownZone))
        _ = try await alice.save(stored)
        let came = try await changeNames(shared, zoneID, since: start.token, limit: 2)
        #expect(came.changed == ["pantry", "rice", "basmati"] && came.deleted.isEmpty, "\(came)")
        #expect(try await shared.record(for: Record.ID(recordName: "basmati", zoneID: zoneID)).recordType == "Note")
        // Moves are change history: compaction takes them as it takes tombstones, so a token
        // from before them expires, and one after them reads on.
        try await Task.sleep(for: .milliseconds(30))
        _ = try await alice.compactChangeHistory(retention: 0.015)
        await expectCode(.changeTokenExpired) { _ = try await shared.recordZoneChanges(inZoneWith: zoneID, since: start.token) }
        #expect(try await changeNames(shared, zoneID, since: came.token).changed.isEmpty)

        // `milk` deleted orphans `bread`; made again under the list, it takes `bread` back.
        _ = try await alice.deleteRecord(withID: Record.ID(recordName: "milk", zoneID: ownZone))
        let gone = try await changeNames(shared, zoneID, since: came.token)
        #expect(gone.deleted == ["milk": "Item", "bread": "Item"], "\(gone)")
        let milk = Record(recordType: "Item", recordID: Record.ID(recordName: "milk", zoneID: ownZone))
        milk.setParent(Record.ID(recordName: "groceries", zoneID: ownZone))
        _ = try await alice.save(milk)
        let again = try await changeNames(shared, zoneID, since: gone.token)
        #expect(again.changed == ["milk", "bread"] && again.deleted.isEmpty, "\(again)")
    }

    private static func participantsMovesReachOthers(_ env: Environment) async throws {
        let (alice, share, zoneID) = try await sharedList(env, bob: .readWrite)
        let (bob, carol) = (env.container(user: "bob"), env.container(user: "carol"))
        let url = try #require(share.url)
        try await bob.accept(try await bob.shareMetadata(for: url))
        let invited = try #require(try await alice.record(for: share.recordID) as? Share)
        invited.addParticipant(Share.Participant(userIdentity: UserIdentity(userRecordID: try await carol.userRecordID())))
        _ = try await alice.save(invited)
        try await carol.accept(try await carol.shareMetadata(for: url))
        let start = try await changeNames(carol.sharedCloudDatabase, zoneID, since: nil)
        #expect(start.changed.isSuperset(of: ["groceries", "milk", "bread"]))

        // Bob deletes `milk` through his shared database: `bread`, still stored, leaves Carol's hierarchy with it.
        _ = try await bob.sharedCloudDatabase.deleteRecord(withID: Record.ID(recordName: "milk", zoneID: zoneID))
        let gone = try await changeNames(carol.sharedCloudDatabase, zoneID, since: start.token)
        #expect(gone.changed.isEmpty && gone.deleted == ["milk": "Item", "bread": "Item"], "\(gone)")

        // Alice moves `diary` under the list: Carol is handed `page` below it (unchanged itself)
        // with the keys she asks for.
        let ownZone = RecordZone.ID(zoneName: "Lists")
        let page = Record(recordType: "Note", recordID: Record.ID(recordName: "page", zoneID: ownZone))
        page["title"] = "Page one"
        page["note"] = "kept"
        page.setParent(Record.ID(recordName: "diary", zoneID: ownZone))
        _ = try await alice.save(page)
        let beforeMove = try await changeNames(carol.sharedCloudDatabase, zoneID, since: gone.token)
        #expect(beforeMove.changed.isEmpty && beforeMove.deleted.isEmpty)
        let diary = try await alice.record(for: Record.ID(recordName: "diary", zoneID: ownZone))
        diary.setParent(Record.ID(recordName: "groceries", zoneID: ownZone))
        _ = try await alice.save(diary)
        let came = try await carol.sharedCloudDatabase.recordZoneChanges(inZoneWith: zoneID, since: beforeMove.token, desiredKeys: ["title"])
        #expect(Set(came.modificationResultsByID.keys.map(\.recordName)) == ["diary", "page"])
        let handed = try #require(try came.modificationResultsByID[Record.ID(recordName: "page", zoneID: zoneID)]?.get().record)
        #expect(handed["title"] as? String == "Page one" && handed["note"] == nil && handed.parent?.recordID.recordName == "diary", "\(handed.allKeys())")
    }

    private static func deletionsTellTheirHierarchiesOnly(_ env: Environment) async throws {
        let alice = env.container(user: "alice").privateCloudDatabase
        let ownZone = RecordZone.ID(zoneName: "Household")
        _ = try await alice.modifyRecordZones(saving: [RecordZone(zoneID: ownZone)], deleting: [])
        func record(_ name: String, _ type: String = "Item", under parent: String? = nil) -> Record {
            let made = Record(recordType: type, recordID: Record.ID(recordName: name, zoneID: ownZone))
            if let parent { made.setParent(Record.ID(recordName: parent, zoneID: ownZone)) }
            return made
        }
        let pin = record("pin", under: "chores")
        pin["chore"] = Record.Reference(recordID: Record.ID(recordName: "dishes", zoneID: ownZone), action: .deleteSelf)
        _ = try await alice.modifyRecords(saving: [record("trip", "List"), record("tickets", under: "trip"), record("chores", "List"),
                                                   record("dishes", under: "chores"), pin, record("loose")], deleting: [])
        var users: [Container] = []
        for (user, root) in [("bob", "trip"), ("carol", "chores")] {
            let container = env.container(user: user)
            _ = try await shareRoot(Record.ID(recordName: root, zoneID: ownZone), of: alice, with: container)
            let subscription = DatabaseSubscription(subscriptionID: "shared-changes")
            subscription.notificationInfo = NotificationInfo()
            _ = try await container.sharedCloudDatabase.save(subscription)
            users.append(container)
        }
        var tokens: [ServerChangeToken?] = [nil, nil]
        // How many notifications Bob (0) and Carol (1) each got since last asked.
        func told() async throws -> [Int] {
            var counts: [Int] = []
            for (index, user) in users.enumerated() {
                let batch = try await NotificationFeed(database: user.privateCloudDatabase).nextBatch(after: tokens[index], limit: 100)
                tokens[index] = batch.token
                counts.append(batch.notifications.count)
            }
            return counts
        }
        _ = try await told()
        _ = try await alice.deleteRecord(withID: Record.ID(recordName: "tickets", zoneID: ownZone))
        #expect(try await told() == [1, 0], "a deletion in Bob's hierarchy")
        // `dishes` goes, and `pin` with it (its .deleteSelf reference): Carol's hierarchy.
        _ = try await alice.deleteRecord(withID: Record.ID(recordName: "dishes", zoneID: ownZone))
        await expectCode(.unknownItem) { _ = try await alice.record(for: pin.recordID) }
        #expect(try await told() == [0, 1], "a deletion and its cascade in Carol's hierarchy")
        _ = try await alice.deleteRecord(withID: Record.ID(recordName: "loose", zoneID: ownZone))
        #expect(try await told() == [0, 0], "a record in no hierarchy")
    }

    private static func deletionsBeforeTheShareTellNoNames(_ env: Environment) async throws {
        let alice = env.container(user: "alice").privateCloudDatabase
        let ownZone = RecordZone.ID(zoneName: "Plans")
        _ = try await alice.modifyRecordZones(saving: [RecordZone(zoneID: ownZone)], deleting: [])
        let trip = Record(recordType: "List", recordID: Record.ID(recordName: "trip", zoneID: ownZone))
        let surprise = Record(recordType: "Item", recordID: Record.ID(recordName: "surprise-party-for-bob", zoneID: ownZone))
        let draft = Record(recordType: "Item", recordID: Record.ID(recordName: "draft-of-the-trip", zoneID: ownZone))
        draft.setParent(trip)
        _ = try await alice.modifyRecords(saving: [trip, surprise, draft], deleting: [])
        _ = try await alice.modifyRecords(saving: [], deleting: [surprise.recordID, draft.recordID])
        let ownerStart = try await alice.recordZoneChanges(inZoneWith: ownZone, since: nil)
        #expect(Set(ownerStart.deletions.map(\.recordID.recordName)) == ["surprise-party-for-bob", "draft-of-the-trip"], "\(ownerStart.deletions)")

        let bob = env.container(user: "bob")
        let share = try await shareRoot(trip.recordID, of: alice, with: bob)
        let zoneID = RecordZone.ID(zoneName: "Plans", ownerName: try await env.container(user: "alice").userRecordID().recordName)
        let start = try await changeNames(bob.sharedCloudDatabase, zoneID, since: nil)
        #expect(start.changed == ["trip", share.recordID.recordName] && start.deleted.isEmpty, "\(start)")
        // A deletion once the zone is shared record by record reaches Bob only from his hierarchy.
        let list = Record(recordType: "Item", recordID: Record.ID(recordName: "packing-list", zoneID: ownZone))
        list.setParent(trip)
        let gift = Record(recordType: "Item", recordID: Record.ID(recordName: "gift-for-bob", zoneID: ownZone))
        _ = try await alice.modifyRecords(saving: [list, gift], deleting: [])
        _ = try await alice.modifyRecords(saving: [], deleting: [list.recordID, gift.recordID])
        let later = try await changeNames(bob.sharedCloudDatabase, zoneID, since: start.token)
        #expect(later.changed.isEmpty && later.deleted == ["packing-list": "Item"], "\(later)")
        // From no token, the deletions of the zone's history that were in his hierarchy.
        #expect(try await changeNames(bob.sharedCloudDatabase, zoneID, since: nil).deleted == ["packing-list": "Item"])
    }

    private static func deletionsTellNoNames(_ env: Environment) async throws {
        let (alice, share, zoneID) = try await sharedList(env, bob: .readWrite)
        let bob = env.container(user: "bob")
        try await bob.accept(try await bob.shareMetadata(for: try #require(share.url)))
        let shared = bob.sharedCloudDatabase
        let diary = Record.ID(recordName: "diary", zoneID: zoneID)
        let neverStored = Record.ID(recordName: "nothing-here", zoneID: zoneID)
        let outside = stratusError(await caughtError { _ = try await shared.deleteRecord(withID: diary) })
        let unknown = stratusError(await caughtError { _ = try await shared.deleteRecord(withID: neverStored) })
        #expect(outside?.code == .unknownItem && unknown?.code == .unknownItem, "\(String(describing: outside)) \(String(describing: unknown))")
        #expect(outside?.message.replacingOccurrences(of: "diary", with: "nothing-here") == unknown?.message)
        await expectCode(.unknownItem) { _ = try await shared.record(for: diary) }
        #expect(try await alice.record(for: Record.ID(recordName: "diary", zoneID: RecordZone.ID(zoneName: "Lists")))["title"] as? String == "Private")
        // A record of the share Bob deleted already (another device of his) answers so too.
        _ = try await shared.deleteRecord(withID: Record.ID(recordName: "bread", zoneID: zoneID))
        await expectCode(.unknownItem) { _ = try await shared.deleteRecord(withID: Record.ID(recordName: "bread", zoneID: zoneID)) }

        // A zone shared as a whole holds nothing Bob does not reach: as in the owner's zone.
        let (_, sharedFamily) = try await sharedFamily(env)
        _ = try await shared.deleteRecord(withID: Record.ID(recordName: "nothing-here", zoneID: sharedFamily))
    }

    private static func noAdoptionOfOrphans(_ env: Environment) async throws {
        let (alice, share, zoneID) = try await sharedList(env, bob: .readWrite)
        let bob = env.container(user: "bob")
        try await bob.accept(try await bob.shareMetadata(for: try #require(share.url)))
        let shared = bob.sharedCloudDatabase
        let ownZone = RecordZone.ID(zoneName: "Lists")
        #expect(try await shared.record(for: Record.ID(recordName: "bread", zoneID: zoneID))["title"] as? String == "Bread")

        // Alice deletes `milk`; `bread`, its child, stays stored and leaves the share with it.
        _ = try await alice.deleteRecord(withID: Record.ID(recordName: "milk", zoneID: ownZone))
        await expectCode(.unknownItem) { _ = try await shared.record(for: Record.ID(recordName: "bread", zoneID: zoneID)) }

        // A new `milk` under the shared root would bring `bread` back into Bob's reach.
        let hijack = Record(recordType: "Item", recordID: Record.ID(recordName: "milk", zoneID: zoneID))
        hijack.setParent(Record.ID(recordName: "groceries", zoneID: zoneID))
        await expectCode(.permissionFailure) { _ = try await shared.save(hijack) }
        await expectCode(.unknownItem) { _ = try await alice.record(for: Record.ID(recordName: "milk", zoneID: ownZone)) }
        await expectCode(.unknownItem) { _ = try await shared.record(for: Record.ID(recordName: "bread", zoneID: zoneID)) }
        let (matches, _) = try await shared.records(matching: Query(recordType: "Item", predicate: QueryPredicate(value: true)), inZoneWith: zoneID)
        #expect(matches.isEmpty, "\(matches.map(\.0))")
        // A name no stored record names as its parent is created as before.
        let eggs = Record(recordType: "Item", recordID: Record.ID(recordName: "eggs", zoneID: zoneID))
        eggs.setParent(Record.ID(recordName: "groceries", zoneID: zoneID))
        _ = try await shared.save(eggs)
        #expect(try await alice.record(for: Record.ID(recordName: "eggs", zoneID: ownZone)).parent?.recordID.recordName == "groceries")

        // The owner may: the hierarchy is hers to shape, and `bread` is Bob's again.
        let ownMilk = Record(recordType: "Item", recordID: Record.ID(recordName: "milk", zoneID: ownZone))
        ownMilk.setParent(Record.ID(recordName: "groceries", zoneID: ownZone))
        _ = try await alice.save(ownMilk)
        #expect(try await shared.record(for: Record.ID(recordName: "bread", zoneID: zoneID))["title"] as? String == "Bread")

        // In a zone shared as a whole, Bob reaches every record already: nothing to keep out.
        let (family, sharedFamily) = try await sharedFamily(env) { family in
            let aunt = Record(recordType: "Contact", recordID: Record.ID(recordName: "aunt", zoneID: family))
            let cousin = Record(recordType: "Contact", recordID: Record.ID(recordName: "cousin", zoneID: family))
            cousin.setParent(aunt)
            return [aunt, cousin]
        }
        let aliceDatabase = env.container(user: "alice").privateCloudDatabase
        _ = try await aliceDatabase.deleteRecord(withID: Record.ID(recordName: "aunt", zoneID: family))
        _ = try await shared.save(Record(recordType: "Contact", recordID: Record.ID(recordName: "aunt", zoneID: sharedFamily)))
        #expect(try await aliceDatabase.record(for: Record.ID(recordName: "aunt", zoneID: family)).recordType == "Contact")
    }
}
