import Foundation
import Stratus
import Testing

// MARK: - Sharing, the owner's side

extension EngineConformance {
    static let sharingCases: [TestCase] = [
        TestCase("a share saved with its root: the root names it, and fetches, queries and change feeds hand it back as a Share with its title, permission, participants and URL", shareSavedWithRoot),
        TestCase("a share keeps its URL and root across saves, detects conflicting saves by change tag, and stores participants added and removed", shareUpdates),
        TestCase("shares are refused in the public database and the default zone, and a new share without its root in the request; nothing is stored", sharePlacement),
        TestCase("a record has at most one share, and a zone shared as a whole takes no record-level share nor the other way round (alreadyShared)", oneSharePerRecordOrZone),
        TestCase("deleting a share clears its root's share; deleting the root deletes its share; a zone-wide share is fetched by cloudkit.zoneshare", shareDeletion),
    ]

    /// Alice's private database with the custom zone `Lists` holding the record `groceries`.
    private static func sharingSetup(_ env: Environment) async throws -> (database: Database, zoneID: RecordZone.ID, root: Record) {
        let database = env.container(user: "alice").privateCloudDatabase
        let zoneID = RecordZone.ID(zoneName: "Lists")
        _ = try await database.modifyRecordZones(saving: [RecordZone(zoneID: zoneID)], deleting: [])
        let list = Record(recordType: "List", recordID: Record.ID(recordName: "groceries", zoneID: zoneID))
        list["title"] = "Groceries"
        let root = try await database.save(list)
        return (database, zoneID, root)
    }

    /// Each item's result of one non-atomic request.
    private static func perItem(_ database: Database, saving: [Record] = [], deleting: [Record.ID] = []) async throws
        -> (saves: [Record.ID: Result<Record, any Error>], deletes: [Record.ID: Result<Void, any Error>]) {
        let (saves, deletes) = try await database.modifyRecords(saving: saving, deleting: deleting, atomically: false)
        return (saves, deletes)
    }

    private static func shareSavedWithRoot(_ env: Environment) async throws {
        let (database, zoneID, root) = try await sharingSetup(env)
        let share = Share(rootRecord: root)
        share[Share.SystemFieldKey.title] = "Groceries"
        share[Share.SystemFieldKey.shareType] = "com.example.list"
        share.publicPermission = .readOnly
        #expect(root.share?.recordID == share.recordID, "Share(rootRecord:) names the share on the root at once, as CloudKit")
        #expect(share.url == nil && share.owner.role == .owner && share.participants.count == 1)

        let (saves, _) = try await database.modifyRecords(saving: [root, share], deleting: [])
        let savedShare = try #require(try saves[share.recordID]?.get() as? Share)
        let savedRoot = try #require(try saves[root.recordID]?.get())
        #expect(savedRoot.share?.recordID == share.recordID)
        let url = try #require(savedShare.url)
        #expect(url.absoluteString.hasPrefix("stratus://share/") && url.user == nil && url.password == nil)
        #expect(savedShare.recordType == Record.SystemType.share && savedShare.recordChangeTag != nil)

        // A fetch, a query and a change feed each hand the share back as a Share.
        let fetched = try #require(try await database.record(for: share.recordID) as? Share)
        #expect(fetched[Share.SystemFieldKey.title] as? String == "Groceries")
        #expect(fetched[Share.SystemFieldKey.shareType] as? String == "com.example.list")
        #expect(fetched.publicPermission == .readOnly && fetched.url == url)
        #expect(fetched.owner.role == .owner && fetched.owner.acceptanceStatus == .accepted && fetched.owner.permission == .readWrite)
        #expect(fetched.owner.userIdentity.userRecordID?.recordName == (try await env.container(user: "alice").userRecordID()).recordName)
        #expect(fetched.currentUserParticipant === fetched.owner || fetched.currentUserParticipant?.role == .owner)
        #expect(try await database.record(for: root.recordID).share?.recordID == share.recordID)

        let query = Query(recordType: Record.SystemType.share, predicate: QueryPredicate(value: true))
        let (matches, _) = try await database.records(matching: query, inZoneWith: zoneID)
        #expect(matches.count == 1)
        #expect((try matches.first?.1.get() as? Share)?.url == url)

        let changes = try await database.recordZoneChanges(inZoneWith: zoneID, since: nil)
        let changedShare = try changes.modificationResultsByID[share.recordID]?.get().record
        #expect((changedShare as? Share)?.publicPermission == .readOnly)
        #expect(try changes.modificationResultsByID[root.recordID]?.get().record.share?.recordID == share.recordID)

        // A copy and an archive are shares too.
        #expect((fetched.copy() as? Share)?.url == url)
        let archived = try NSKeyedArchiver.archivedData(withRootObject: fetched, requiringSecureCoding: true)
        let unarchived = try #require(try NSKeyedUnarchiver.unarchivedObject(ofClass: Share.self, from: archived))
        #expect(unarchived.url == url && unarchived.publicPermission == .readOnly)
    }

    private static func shareUpdates(_ env: Environment) async throws {
        let (database, _, root) = try await sharingSetup(env)
        let share = Share(rootRecord: root)
        share[Share.SystemFieldKey.title] = "Groceries"
        _ = try await database.modifyRecords(saving: [root, share], deleting: [])
        let fetched = try #require(try await database.record(for: share.recordID) as? Share)
        let url = try #require(fetched.url)

        let bob = Share.Participant(userIdentity: UserIdentity(userRecordID: Record.ID(recordName: "_bob"), nameComponents: PersonNameComponents(givenName: "Bob")))
        bob.permission = .readWrite
        fetched.addParticipant(bob)
        fetched.addParticipant(Share.Participant(userIdentity: UserIdentity(lookupInfo: UserIdentity.LookupInfo(emailAddress: "carol@example.com"))))
        fetched[Share.SystemFieldKey.title] = "Weekly groceries"
        let saved = try #require(try await database.save(fetched) as? Share)
        #expect(saved.url == url, "the URL stays what the first save assigned")
        #expect(saved.recordChangeTag != fetched.recordChangeTag)

        let again = try #require(try await database.record(for: share.recordID) as? Share)
        #expect(again[Share.SystemFieldKey.title] as? String == "Weekly groceries" && again.url == url)
        let byName = Dictionary(again.participants.map { ($0.userIdentity.userRecordID?.recordName ?? $0.userIdentity.lookupInfo?.emailAddress ?? "?", $0) }, uniquingKeysWith: { a, _ in a })
        #expect(byName.count == 3)
        #expect(byName["_bob"]?.permission == .readWrite && byName["_bob"]?.role == .privateUser && byName["_bob"]?.acceptanceStatus == .pending)
        #expect(byName["_bob"]?.userIdentity.nameComponents?.givenName == "Bob")
        #expect(byName["carol@example.com"]?.permission == .readOnly)

        // The stale copy conflicts, as any record's.
        fetched.publicPermission = .readWrite
        let conflict = await caughtError { try await database.save(fetched) }
        #expect(stratusError(conflict)?.code == .serverRecordChanged)
        // Whatever the save policy: CloudKit saves a share as .ifServerRecordUnchanged, so a
        // stale share never overwrites another device's participants.
        for policy in [ModifyRecordsOperation.SavePolicy.changedKeys, .allKeys] {
            let (saves, _) = try await database.modifyRecords(saving: [fetched], deleting: [], savePolicy: policy, atomically: false)
            #expect(caught(saves[fetched.recordID])?.code == .serverRecordChanged, "\(policy)")
        }
        #expect(try #require(try await database.record(for: share.recordID) as? Share).publicPermission == .none, "the stale share was not written")
        let errandID = Record.ID(recordName: "errand", zoneID: root.recordID.zoneID)
        _ = try await database.save(Record(recordType: "List", recordID: errandID))
        let untagged = Record(recordType: "List", recordID: errandID)
        untagged["title"] = "Overwritten"
        let (forced, _) = try await database.modifyRecords(saving: [untagged], deleting: [], savePolicy: .changedKeys, atomically: false)
        #expect((try? forced[errandID]?.get()) != nil, "a record that is not a share is still written without a tag check")

        if let carol = again.participants.first(where: { $0.userIdentity.lookupInfo?.emailAddress == "carol@example.com" }) { again.removeParticipant(carol) }
        _ = try await database.save(again)
        let last = try #require(try await database.record(for: share.recordID) as? Share)
        #expect(last.participants.count == 2 && last.url == url)
        #expect(try await database.record(for: root.recordID).share?.recordID == share.recordID, "saving the share again keeps its root's link")

        // An operation type (CloudKit Web Services' forceUpdate, an import's mode) keeps its
        // meaning for shares: only the save policies check a share's tag.
        let kinds = try await TestDatabase.saveKinds([fetched], in: database, writeMode: .forceUpdate)
        #expect(kinds == [.updated], "\(kinds)")
        #expect(try #require(try await database.record(for: share.recordID) as? Share).publicPermission == .readWrite)
    }

    private static func sharePlacement(_ env: Environment) async throws {
        let container = env.container(user: "alice")
        // The public database.
        let publicRecord = Record(recordType: "List", recordID: Record.ID(recordName: "board"))
        let publicShare = Share(rootRecord: publicRecord)
        let publicResults = try await perItem(container.publicCloudDatabase, saving: [publicRecord, publicShare])
        let publicError = caught(publicResults.saves[publicShare.recordID])
        #expect(publicError?.code == .invalidArguments && publicError?.message.contains("private database") == true, "\(String(describing: publicError))")
        #expect(try await TestDatabase.exists(publicShare.recordID.recordName, in: container.publicCloudDatabase) == false)

        // The private database's default zone.
        let database = container.privateCloudDatabase
        let inDefault = Record(recordType: "List", recordID: Record.ID(recordName: "todo"))
        let defaultShare = Share(rootRecord: inDefault)
        let defaultResults = try await perItem(database, saving: [inDefault, defaultShare])
        let defaultError = caught(defaultResults.saves[defaultShare.recordID])
        #expect(defaultError?.code == .invalidArguments && defaultError?.message.contains("default zone") == true, "\(String(describing: defaultError))")
        #expect(try await TestDatabase.exists(defaultShare.recordID.recordName, in: database) == false)
        #expect(try await database.record(for: inDefault.recordID).share == nil, "the store keeps no share the request did not save")

        // A new share whose root is not in the request.
        let (_, zoneID, root) = try await sharingSetup(env)
        let alone = Share(rootRecord: root)
        let aloneResults = try await perItem(database, saving: [alone])
        let aloneError = caught(aloneResults.saves[alone.recordID])
        #expect(aloneError?.code == .invalidArguments && aloneError?.message.contains("same request") == true, "\(String(describing: aloneError))")
        #expect(try await TestDatabase.exists(alone.recordID.recordName, zoneID: zoneID, in: database) == false)
        #expect(try await database.record(for: root.recordID).share == nil)
    }

    private static func oneSharePerRecordOrZone(_ env: Environment) async throws {
        let (database, zoneID, root) = try await sharingSetup(env)
        let first = Share(rootRecord: root)
        _ = try await database.modifyRecords(saving: [root, first], deleting: [])

        // A second share of the same root.
        let stored = try await database.record(for: root.recordID)
        let second = Share(rootRecord: stored)
        let results = try await perItem(database, saving: [stored, second])
        #expect(caught(results.saves[second.recordID])?.code == .alreadyShared)
        #expect(try await database.record(for: root.recordID).share?.recordID == first.recordID, "the root keeps its first share")

        // The zone holds a record-level share: it cannot be shared as a whole.
        let zoneShare = Share(recordZoneID: zoneID)
        #expect(zoneShare.recordID.recordName == Share.zoneWideShareName && zoneShare.recordID.recordName == "cloudkit.zoneshare")
        let zoneResults = try await perItem(database, saving: [zoneShare])
        #expect(caught(zoneResults.saves[zoneShare.recordID])?.code == .alreadyShared)

        // A zone shared as a whole takes no record-level share.
        let other = RecordZone.ID(zoneName: "Family")
        _ = try await database.modifyRecordZones(saving: [RecordZone(zoneID: other)], deleting: [])
        let wholeZone = Share(recordZoneID: other)
        wholeZone[Share.SystemFieldKey.title] = "Family"
        let (saved, _) = try await database.modifyRecords(saving: [wholeZone], deleting: [])
        #expect((try saved[wholeZone.recordID]?.get() as? Share)?.url != nil)
        let contact = Record(recordType: "Contact", recordID: Record.ID(recordName: "ann", zoneID: other))
        let contactShare = Share(rootRecord: contact)
        let contactResults = try await perItem(database, saving: [contact, contactShare])
        #expect(caught(contactResults.saves[contactShare.recordID])?.code == .alreadyShared)
        #expect(try await database.record(for: contact.recordID).share == nil)
    }

    private static func shareDeletion(_ env: Environment) async throws {
        let (database, zoneID, root) = try await sharingSetup(env)
        let share = Share(rootRecord: root)
        _ = try await database.modifyRecords(saving: [root, share], deleting: [])
        let linkedTag = try await database.record(for: root.recordID).recordChangeTag

        // Deleting the share clears the root's share, as a new version of the root in the feed.
        let token = try await database.recordZoneChanges(inZoneWith: zoneID, since: nil).changeToken
        _ = try await database.deleteRecord(withID: share.recordID)
        let unlinked = try await database.record(for: root.recordID)
        #expect(unlinked.share == nil && unlinked.recordChangeTag != linkedTag && unlinked["title"] as? String == "Groceries")
        let changes = try await database.recordZoneChanges(inZoneWith: zoneID, since: token)
        #expect(changes.deletions.map(\.recordID) == [share.recordID])
        #expect(try changes.modificationResultsByID[root.recordID]?.get().record.share == nil)

        // Shared again, then deleting the root deletes its share.
        let again = Share(rootRecord: unlinked)
        _ = try await database.modifyRecords(saving: [unlinked, again], deleting: [])
        _ = try await database.deleteRecord(withID: root.recordID)
        #expect(try await TestDatabase.exists(again.recordID.recordName, zoneID: zoneID, in: database) == false)

        // A zone-wide share is fetched by its fixed name, and deleted like any record.
        let wholeZone = Share(recordZoneID: zoneID)
        _ = try await database.modifyRecords(saving: [wholeZone], deleting: [])
        let fetched = try await database.record(for: Record.ID(recordName: Share.zoneWideShareName, zoneID: zoneID))
        #expect((fetched as? Share)?.url != nil)
        _ = try await database.deleteRecord(withID: fetched.recordID)
        #expect(try await TestDatabase.exists(Share.zoneWideShareName, zoneID: zoneID, in: database) == false)
    }

    /// The error of a failed item, or `nil` for a success or no result.
    private static func caught<T>(_ result: Result<T, any Error>?) -> StratusError? {
        guard case .failure(let error) = result else { return nil }
        return stratusError(error)
    }
}
