import Foundation
import Stratus
import Testing

// MARK: - Sharing: what a record-level share's hierarchy holds

extension EngineConformance {
    static let sharedHierarchyCases: [TestCase] = [
        TestCase("a read-write participant cannot create a record under the name of a deleted parent whose children are still stored: the children stay outside the share; a zone shared as a whole allows it", noAdoptionOfOrphans),
        TestCase("in a zone shared record by record, a participant's deletion of a stored record outside the share and of a name never stored answer alike (unknownItem, as a fetch does) and delete nothing; in a zone shared as a whole a name never stored is deleted as in the owner's zone", deletionsTellNoNames),
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
