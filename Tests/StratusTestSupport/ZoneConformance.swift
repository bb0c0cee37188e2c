import Foundation
@_spi(StratusEngine) import Stratus
import Testing

/// The zone and change-tracking behaviour every ``StorageEngine`` must show, as named cases
/// that run like ``EngineConformance``'s:
///
/// ```swift
/// @Test(arguments: ZoneConformance.cases)
/// func zones(_ testCase: EngineConformance.TestCase) async throws {
///     try await testCase.run(with: { try SQLiteEngine(path: $0.appendingPathComponent("store.sqlite").path) })
/// }
/// ```
///
/// Every case drives the engine through ``Container``, ``Database`` and the operations.
public enum ZoneConformance {
    public typealias TestCase = EngineConformance.TestCase
    public typealias Environment = EngineConformance.Environment

    /// Every case, in a stable order.
    public static var cases: [TestCase] {
        zoneCases + changeCases + expiryCases + capabilityCases + databaseChangeCases + syncEngineCases
    }

    static let photos = RecordZone.ID(zoneName: "Photos")
    static let notes = RecordZone.ID(zoneName: "Notes")

    // MARK: - Zones

    static let zoneCases: [TestCase] = [
        TestCase("zones: created zones are listed with their capabilities; saving one again changes nothing", zonesAreCreatedAndListed),
        TestCase("zones: deleting a zone deletes its records; later writes and queries fail with zoneNotFound", deletingAZoneDeletesItsRecords),
        TestCase("zones: the default zone cannot be deleted; deleting a missing zone is zoneNotFound", defaultAndMissingZoneDeletes),
        TestCase("zones: private zones belong to their user, public zones to everyone; the shared database has none", zonesFollowDatabaseScopes),
        TestCase("zones: bad names, other owners and the shared database are rejected per zone", invalidZonesAreRejectedPerZone),
    ]

    static func zonesAreCreatedAndListed(_ env: Environment) async throws {
        let database = env.container().privateCloudDatabase
        #expect(try await database.allRecordZones().map(\.zoneID) == [.default])

        let saved = try await database.save(RecordZone(zoneID: photos))
        #expect(saved.zoneID == photos)
        // The private database's custom zones can be shared, as CloudKit's.
        #expect(saved.capabilities == [.fetchChanges, .atomic, .sharing, .zoneWideSharing])
        let plain = try await database.save(RecordZone(zoneID: notes, capabilities: [.fetchChanges]))
        #expect(plain.capabilities == [.fetchChanges, .sharing, .zoneWideSharing])

        try await database.save(makeRecord("Photo", "p1", zoneID: photos, ["title": .string("beach")]))
        // Saving an existing zone again keeps it, its capabilities and its records.
        let again = try await database.save(RecordZone(zoneID: notes, capabilities: [.fetchChanges, .atomic]))
        #expect(again.capabilities == [.fetchChanges, .sharing, .zoneWideSharing])
        try await database.save(RecordZone(zoneID: photos))
        #expect(try await TestDatabase.exists("p1", zoneID: photos, in: database))

        let zones = try await database.allRecordZones()
        #expect(Set(zones.map(\.zoneID)) == [.default, photos, notes])
        #expect(zones.first { $0.zoneID.isDefault }?.capabilities == [.fetchChanges], "no atomic capability, as CloudKit's default zone")
        #expect(try await database.recordZone(for: notes).capabilities == [.fetchChanges, .sharing, .zoneWideSharing])
        // The owner's explicit user record name means the same zone as the default owner.
        let explicit = RecordZone.ID(zoneName: "Photos", ownerName: env.recordName(of: "alice"))
        #expect(try await database.recordZone(for: explicit).zoneID == explicit)
        #expect(try await TestDatabase.exists("p1", zoneID: explicit, in: database))
    }

    static func deletingAZoneDeletesItsRecords(_ env: Environment) async throws {
        let database = env.container().privateCloudDatabase
        try await database.save(RecordZone(zoneID: photos))
        try await database.save(RecordZone(zoneID: notes))
        try await TestDatabase.save(makeRecords("Photo", count: 30, zoneID: photos) { ["n": .int64(Int64($0))] }, in: database)
        try await database.save(makeRecord("Note", "keep", zoneID: notes))
        try await database.save(makeRecord("Note", "default-keep"))

        #expect(try await database.deleteRecordZone(withID: photos) == photos)
        #expect(try await database.allRecordZones().map(\.zoneID).contains(photos) == false)
        let fetchError = await caughtError { try await database.recordZone(for: photos) }
        #expect(stratusError(fetchError)?.code == .zoneNotFound)

        let write = makeRecord("Photo", "late", zoneID: photos)
        let results = try await database.modifyRecordsEachItem(saving: [write], deleting: [])
        #expect(errorCode(results.saveResults[write.recordID]) == .zoneNotFound)
        let queryError = await caughtError { try await database.records(matching: Query(recordType: "Photo"), inZoneWith: photos) }
        #expect(stratusError(queryError)?.code == .zoneNotFound)
        // A fetch by ID answers as CloudKit's: zoneNotFound for a deleted or never created
        // zone (code that creates its zone on zoneNotFound relies on it), unknownItem for a
        // record missing from a zone that exists.
        let gone = Record.ID(recordName: recordName("r", 0), zoneID: photos)
        let neverMade = Record.ID(recordName: "x", zoneID: RecordZone.ID(zoneName: "NeverMade"))
        let missing = Record.ID(recordName: "missing", zoneID: notes)
        let fetched = try await database.records(for: [gone, neverMade, missing])
        #expect(errorCode(fetched[gone]) == .zoneNotFound)
        #expect(errorCode(fetched[neverMade]) == .zoneNotFound)
        #expect(errorCode(fetched[missing]) == .unknownItem)
        let alone = await caughtError { try await database.record(for: gone) }
        #expect(stratusError(alone)?.code == .zoneNotFound)
        // Other zones keep their records.
        #expect(try await TestDatabase.exists("keep", zoneID: notes, in: database))
        #expect(try await TestDatabase.exists("default-keep", in: database))

        // A zone created again with the same name starts empty.
        try await database.save(RecordZone(zoneID: photos))
        #expect(try await TestDatabase.queryAll(Query(recordType: "Photo"), in: database, zoneID: photos).isEmpty)
        #expect(try await TestDatabase.exists(recordName("r", 0), zoneID: photos, in: database) == false)
    }

    static func defaultAndMissingZoneDeletes(_ env: Environment) async throws {
        let database = env.container().privateCloudDatabase
        try await database.save(makeRecord("Note", "n1"))
        let defaultError = await caughtError { try await database.deleteRecordZone(withID: .default) }
        #expect(stratusError(defaultError)?.code == .invalidArguments)
        #expect(try await TestDatabase.exists("n1", in: database))
        let missingError = await caughtError { try await database.deleteRecordZone(withID: RecordZone.ID(zoneName: "Nowhere")) }
        #expect(stratusError(missingError)?.code == .zoneNotFound)
        // Saving the default zone is allowed and changes nothing.
        #expect(try await database.save(RecordZone.default).capabilities == [.fetchChanges])
        // A zone saved and deleted in one request: both done, the zone gone.
        let fleeting = RecordZone.ID(zoneName: "Fleeting")
        let (made, gone) = try await database.modifyRecordZones(saving: [RecordZone(zoneID: fleeting)], deleting: [fleeting])
        #expect((try? made[fleeting]?.get()) != nil && (try? gone[fleeting]?.get()) != nil)
        #expect(try await database.allRecordZones().map(\.zoneID).contains(fleeting) == false)
    }

    static func zonesFollowDatabaseScopes(_ env: Environment) async throws {
        let alice = env.container(user: "alice")
        let bob = env.container(user: "bob")
        try await alice.privateCloudDatabase.save(RecordZone(zoneID: photos))
        try await alice.privateCloudDatabase.save(makeRecord("Photo", "mine", zoneID: photos))
        #expect(try await bob.privateCloudDatabase.allRecordZones().map(\.zoneID) == [.default])
        let write = makeRecord("Photo", "bobs", zoneID: photos)
        let results = try await bob.privateCloudDatabase.modifyRecordsEachItem(saving: [write], deleting: [])
        #expect(errorCode(results.saveResults[write.recordID]) == .zoneNotFound, "bob has no zone Photos")

        // Public zones (a Stratus extension) are everyone's.
        try await alice.publicCloudDatabase.save(RecordZone(zoneID: notes))
        #expect(Set(try await bob.publicCloudDatabase.allRecordZones().map(\.zoneID)) == [.default, notes])
        try await bob.publicCloudDatabase.save(makeRecord("Note", "from-bob", zoneID: notes))
        #expect(try await TestDatabase.exists("from-bob", zoneID: notes, in: alice.publicCloudDatabase))
        // Deleting a public zone deletes every user's records in it: the store's administrator's call.
        for user in [alice, bob] {
            let refused = stratusError(await caughtError { try await user.publicCloudDatabase.deleteRecordZone(withID: notes) })
            #expect(refused?.code == .permissionFailure, "\(String(describing: refused))")
        }
        #expect(try await TestDatabase.exists("from-bob", zoneID: notes, in: alice.publicCloudDatabase))
        let administrator = Database(engine: env.engine, context: .administrator(containerIdentifier: Environment.containerIdentifier, environment: .development, scope: .public, owner: ""))
        _ = try await administrator.deleteRecordZone(withID: notes)
        #expect(try await alice.publicCloudDatabase.allRecordZones().map(\.zoneID) == [.default])
        try await alice.publicCloudDatabase.save(RecordZone(zoneID: notes))
        // Private and public zones of the same name are different zones.
        #expect(try await alice.privateCloudDatabase.allRecordZones().map(\.zoneID).contains(notes) == false)

        #expect(try await alice.sharedCloudDatabase.allRecordZones().isEmpty)
    }

    static func invalidZonesAreRejectedPerZone(_ env: Environment) async throws {
        let database = env.container().privateCloudDatabase
        let good = RecordZone(zoneName: "Good")
        let badName = RecordZone(zoneName: "_lives")  // CloudKit reserves names starting with _
        let foreign = RecordZone(zoneID: RecordZone.ID(zoneName: "Theirs", ownerName: "mallory"))
        let (saves, _) = try await database.modifyRecordZones(saving: [good, badName, foreign], deleting: [])
        #expect((try? saves[good.zoneID]?.get()) != nil)
        #expect(errorCode(saves[badName.zoneID]) == .invalidArguments)
        #expect(errorCode(saves[foreign.zoneID]) == .permissionFailure)
        #expect(Set(try await database.allRecordZones().map(\.zoneID)) == [.default, good.zoneID])

        let sharedError = await caughtError { try await env.container().sharedCloudDatabase.save(RecordZone(zoneName: "Shared")) }
        #expect(stratusError(sharedError)?.code == .invalidArguments)
    }

    // MARK: - Zone changes

    static let changeCases: [TestCase] = [
        TestCase("changes: saves, updates and deletes arrive once each, coalesced, oldest first, deletions with their type", changesArriveCoalescedInOrder),
        TestCase("changes: batches of resultsLimit give the same stream as one fetch, and end with moreComing false", batchesMatchOneFetch),
        TestCase("changes: one request naming a zone by both spellings of its owner numbers each change once", bothOwnerSpellingsNumberChangesOnce),
        TestCase("changes: a serialized token resumes exactly where the last fetch stopped", serializedTokensResume),
        TestCase("changes: desiredKeys restrict changed records", changesHonourDesiredKeys),
        TestCase("changes: a failed atomic request leaves no change; .deleteSelf cascades are deletions", failedWritesLeaveNoChange),
        TestCase("changes: the default zone tracks changes, also before its first write", defaultZoneTracksChanges),
        TestCase("changes: an unknown zone is zoneNotFound; the shared database has no default zone", changesOfMissingZones),
    ]

    static func changesArriveCoalescedInOrder(_ env: Environment) async throws {
        let database = env.container().privateCloudDatabase
        try await database.save(RecordZone(zoneID: photos))
        let start = await fetchChanges(photos, since: nil, in: database)
        #expect(start.events.isEmpty && start.error == nil)

        try await database.save(makeRecord("Photo", "a", zoneID: photos, ["v": .int64(1)]))
        try await database.save(makeRecord("Photo", "b", zoneID: photos, ["v": .int64(1)]))
        try await database.save(makeRecord("Album", "c", zoneID: photos))
        let a = try await database.record(for: Record.ID(recordName: "a", zoneID: photos))
        a["v"] = 2
        try await database.save(a)
        try await database.deleteRecord(withID: Record.ID(recordName: "c", zoneID: photos))
        try await database.deleteRecord(withID: Record.ID(recordName: "never-existed", zoneID: photos))

        let all = await fetchChanges(photos, since: start.token, in: database)
        #expect(all.error == nil)
        // "a" changed twice but arrives once, at its latest change; "c" arrives as its deletion.
        #expect(all.events == ["+b", "+a", "-c:Album"])
        #expect(all.records.first { $0.recordID.recordName == "a" }?["v"] as? Int64 == 2)
        #expect(all.moreComing == false)

        // Nothing new: an empty answer, and the token stays usable.
        let none = await fetchChanges(photos, since: all.token, in: database)
        #expect(none.events.isEmpty && none.error == nil)

        // A deleted record saved again arrives as a change, not as its old deletion.
        try await database.save(makeRecord("Album", "c", zoneID: photos))
        try await database.deleteRecord(withID: Record.ID(recordName: "b", zoneID: photos))
        let next = await fetchChanges(photos, since: none.token, in: database)
        #expect(next.events == ["+c", "-b:Photo"])
        // From the beginning, each record appears once, in its current state.
        #expect(await fetchChanges(photos, since: nil, in: database).events == ["+a", "+c", "-b:Photo"])
    }

    static func batchesMatchOneFetch(_ env: Environment) async throws {
        let database = env.container().privateCloudDatabase
        try await database.save(RecordZone(zoneID: photos))
        try await TestDatabase.save(makeRecords("Photo", count: 57, zoneID: photos) { ["n": .int64(Int64($0))] }, in: database)
        _ = try await database.modifyRecords(saving: [], deleting: (0..<57).filter { $0 % 5 == 0 }.map { Record.ID(recordName: recordName("r", $0), zoneID: photos) })
        let whole = await fetchChanges(photos, since: nil, in: database)
        #expect(whole.events.count == 57)

        var token: ServerChangeToken?
        var events: [String] = []
        var batches = 0
        var more = true
        while more {
            let batch = await fetchChanges(photos, since: token, in: database, resultsLimit: 8, fetchAllChanges: false)
            #expect(batch.error == nil)
            #expect(batch.events.count <= 8)
            events += batch.events
            token = batch.token
            more = batch.moreComing
            batches += 1
            if batches > 20 { break }
        }
        #expect(events == whole.events)
        #expect(batches == 8, "57 changes in batches of 8")

        // With fetchAllChanges the operation fetches every batch itself, reporting tokens between.
        let all = await fetchChanges(photos, since: nil, in: database, resultsLimit: 8)
        #expect(all.events == whole.events)
        #expect(all.tokenUpdates == 7)
        #expect(all.moreComing == false)
    }

    static func bothOwnerSpellingsNumberChangesOnce(_ env: Environment) async throws {
        let database = env.container().privateCloudDatabase
        try await database.save(RecordZone(zoneID: photos))
        let spelled = RecordZone.ID(zoneName: photos.zoneName, ownerName: env.recordName(of: "alice"))
        let mixed = [makeRecord("Photo", "a1", zoneID: photos, [:]), makeRecord("Photo", "b1", zoneID: spelled, [:]),
                     makeRecord("Photo", "a2", zoneID: photos, [:])]
        let saved = try await database.modifyRecords(saving: mixed, deleting: [], atomically: false)
        #expect(saved.saveResults.values.allSatisfy { (try? $0.get()) != nil })

        var token: ServerChangeToken?
        var paged: [String] = []
        var more = true
        var pages = 0
        while more && pages < 10 {
            let page = await fetchChanges(photos, since: token, in: database, resultsLimit: 1, fetchAllChanges: false)
            #expect(page.error == nil)
            paged += page.events
            token = page.token
            more = page.moreComing
            pages += 1
        }
        #expect(paged == ["+a1", "+b1", "+a2"], "a reader paging one change at a time sees each change")
        try await database.save(makeRecord("Photo", "later", zoneID: spelled, [:]))
        let later = await fetchChanges(photos, since: token, in: database)
        #expect(later.events == ["+later"])
        // Deletions too, and a zone deleted by both spellings is deleted once, each mention answered with it.
        _ = try await database.modifyRecords(saving: [], deleting: [Record.ID(recordName: "a1", zoneID: photos), Record.ID(recordName: "b1", zoneID: spelled)], atomically: false)
        token = later.token
        var deletions: [String] = []
        more = true
        pages = 0
        while more && pages < 10 {
            let page = await fetchChanges(photos, since: token, in: database, resultsLimit: 1, fetchAllChanges: false)
            deletions += page.events
            token = page.token
            more = page.moreComing
            pages += 1
        }
        #expect(deletions == ["-a1:Photo", "-b1:Photo"])
        let (_, deleted) = try await database.modifyRecordZones(saving: [], deleting: [photos, spelled])
        #expect(deleted.count == 2 && deleted.values.allSatisfy { (try? $0.get()) != nil }, "\(deleted)")
        #expect(try await database.allRecordZones().map(\.zoneID) == [.default])
    }

    static func serializedTokensResume(_ env: Environment) async throws {
        let database = env.container().privateCloudDatabase
        try await database.save(RecordZone(zoneID: photos))
        try await TestDatabase.save(makeRecords("Photo", count: 10, zoneID: photos) { ["n": .int64(Int64($0))] }, in: database)
        let first = await fetchChanges(photos, since: nil, in: database, resultsLimit: 4, fetchAllChanges: false)
        let text = try #require(first.token).serialized
        #expect(text.hasPrefix("stk1_"))
        #expect(text.allSatisfy { $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" }, "URL- and shell-safe")

        try await TestDatabase.save(makeRecords("Photo", count: 3, prefix: "late", zoneID: photos) { _ in [:] }, in: database)
        let restored = try ServerChangeToken(serialized: text + "\n")
        #expect(restored == first.token)
        let rest = await fetchChanges(photos, since: restored, in: database)
        #expect(first.events + rest.events == (0..<10).map { "+" + recordName("r", $0) } + (0..<3).map { "+" + recordName("late", $0) })

        let damaged = await caughtError { try ServerChangeToken(serialized: "stk1_notbase64!") }
        #expect(stratusError(damaged)?.code == .invalidArguments)
        let foreign = await caughtError { try ServerChangeToken(serialized: "stc1_abc") }
        #expect(stratusError(foreign)?.code == .invalidArguments)
    }

    static func changesHonourDesiredKeys(_ env: Environment) async throws {
        let database = env.container().privateCloudDatabase
        try await database.save(RecordZone(zoneID: photos))
        try await database.save(makeRecord("Photo", "p", zoneID: photos, ["title": .string("t"), "size": .int64(3)]))
        let changes = await fetchChanges(photos, since: nil, in: database, desiredKeys: ["title"])
        let record = try #require(changes.records.first)
        #expect(record.allKeys() == ["title"])
        #expect(record.recordChangeTag != nil)
    }

    static func failedWritesLeaveNoChange(_ env: Environment) async throws {
        let database = env.container().privateCloudDatabase
        try await database.save(RecordZone(zoneID: photos))
        let base = await fetchChanges(photos, since: nil, in: database)

        let good = makeRecord("Photo", "good", zoneID: photos)
        let bad = makeRecord("Photo", "stale", zoneID: photos)
        try await database.save(makeRecord("Photo", "stale", zoneID: photos))
        let afterSetup = await fetchChanges(photos, since: base.token, in: database)
        #expect(afterSetup.events == ["+stale"])
        // "stale" exists, so saving a new record with its name conflicts; the request is atomic.
        let results = try await database.modifyRecordsEachItem(saving: [good, bad], deleting: [])
        #expect(errorCode(results.saveResults[bad.recordID]) == .serverRecordChanged)
        #expect(errorCode(results.saveResults[good.recordID]) == .batchRequestFailed)
        #expect(await fetchChanges(photos, since: afterSetup.token, in: database).events.isEmpty)

        // Cascaded deletes are deletions too.
        let list = makeRecord("List", "list", zoneID: photos)
        let item = makeRecord("Item", "item", zoneID: photos, ["list": .reference(Record.Reference(recordID: list.recordID, action: .deleteSelf))])
        try await TestDatabase.save([list, item], in: database)
        let saved = await fetchChanges(photos, since: afterSetup.token, in: database)
        try await database.deleteRecord(withID: list.recordID)
        let cascade = await fetchChanges(photos, since: saved.token, in: database)
        #expect(Set(cascade.events) == ["-list:List", "-item:Item"])
    }

    static func defaultZoneTracksChanges(_ env: Environment) async throws {
        let database = env.container(user: "carol").privateCloudDatabase
        // Before the default zone's first write its history is empty, and its token stays valid.
        let empty = await fetchChanges(.default, since: nil, in: database)
        #expect(empty.error == nil && empty.events.isEmpty)
        try await database.save(makeRecord("Note", "n1"))
        try await database.deleteRecord(withID: Record.ID(recordName: "n1"))
        try await database.save(makeRecord("Note", "n2"))
        let changes = await fetchChanges(.default, since: empty.token, in: database)
        #expect(changes.error == nil)
        #expect(changes.events == ["-n1:Note", "+n2"])
    }

    static func changesOfMissingZones(_ env: Environment) async throws {
        let container = env.container()
        let missing = await fetchChanges(RecordZone.ID(zoneName: "Nowhere"), since: nil, in: container.privateCloudDatabase)
        #expect(stratusError(missing.error)?.code == .zoneNotFound)
        let shared = await fetchChanges(.default, since: nil, in: container.sharedCloudDatabase)
        #expect(stratusError(shared.error)?.code == .invalidArguments)
    }

    // MARK: - Token expiry

    static let expiryCases: [TestCase] = [
        TestCase("expiry: a token of another zone, database or user fails with changeTokenExpired", foreignTokensExpire),
        TestCase("expiry: tokens from before a zone was deleted and created again expire; no token starts again", recreatedZoneExpiresTokens),
        TestCase("expiry: compaction removes old tombstones and expires tokens from before them only", compactionExpiresOldTokens),
    ]

    static func foreignTokensExpire(_ env: Environment) async throws {
        let alice = env.container(user: "alice")
        let bob = env.container(user: "bob")
        for database in [alice.privateCloudDatabase, bob.privateCloudDatabase, alice.publicCloudDatabase] {
            try await database.save(RecordZone(zoneID: photos))
            try await database.save(RecordZone(zoneID: notes))
            try await database.save(makeRecord("Photo", "p", zoneID: photos))
        }
        let token = try #require(await fetchChanges(photos, since: nil, in: alice.privateCloudDatabase).token)
        let otherZone = await fetchChanges(notes, since: token, in: alice.privateCloudDatabase)
        #expect(stratusError(otherZone.error)?.code == .changeTokenExpired)
        let otherUser = await fetchChanges(photos, since: token, in: bob.privateCloudDatabase)
        #expect(stratusError(otherUser.error)?.code == .changeTokenExpired)
        let otherDatabase = await fetchChanges(photos, since: token, in: alice.publicCloudDatabase)
        #expect(stratusError(otherDatabase.error)?.code == .changeTokenExpired)
        let otherContainer = Container(identifier: "com.example.other", engine: env.engine, userName: "alice").privateCloudDatabase
        try await otherContainer.save(RecordZone(zoneID: photos))
        #expect(stratusError(await fetchChanges(photos, since: token, in: otherContainer).error)?.code == .changeTokenExpired)

        // A database token is not a zone token, and the other way round.
        let databaseToken = try await alice.privateCloudDatabase.databaseChanges(since: nil).changeToken
        #expect(stratusError(await fetchChanges(photos, since: databaseToken, in: alice.privateCloudDatabase).error)?.code == .changeTokenExpired)
        let wrongKind = await caughtError { try await alice.privateCloudDatabase.databaseChanges(since: token) }
        #expect(stratusError(wrongKind)?.code == .changeTokenExpired)
        // The token still works where it belongs.
        #expect(await fetchChanges(photos, since: token, in: alice.privateCloudDatabase).error == nil)
    }

    static func recreatedZoneExpiresTokens(_ env: Environment) async throws {
        let database = env.container().privateCloudDatabase
        try await database.save(RecordZone(zoneID: photos))
        try await database.save(makeRecord("Photo", "old", zoneID: photos))
        let token = try #require(await fetchChanges(photos, since: nil, in: database).token)

        try await database.deleteRecordZone(withID: photos)
        #expect(stratusError(await fetchChanges(photos, since: token, in: database).error)?.code == .zoneNotFound)
        try await database.save(RecordZone(zoneID: photos))
        try await database.save(makeRecord("Photo", "new", zoneID: photos))
        let stale = await fetchChanges(photos, since: token, in: database)
        #expect(stratusError(stale.error)?.code == .changeTokenExpired)
        // Starting again without a token gives the new zone's contents.
        #expect(await fetchChanges(photos, since: nil, in: database).events == ["+new"])
    }

    static func compactionExpiresOldTokens(_ env: Environment) async throws {
        let database = env.container().privateCloudDatabase
        try await database.save(RecordZone(zoneID: photos))
        try await TestDatabase.save(makeRecords("Photo", count: 4, zoneID: photos) { _ in [:] }, in: database)
        let beforeDeletes = try #require(await fetchChanges(photos, since: nil, in: database).token)
        try await database.deleteRecord(withID: Record.ID(recordName: recordName("r", 0), zoneID: photos))
        let afterFirstDelete = try #require(await fetchChanges(photos, since: beforeDeletes, in: database).token)
        try await Task.sleep(for: .milliseconds(30))
        let compacted = try await database.compactChangeHistory(retention: 0.015)
        #expect(compacted.recordTombstonesRemoved == 1)
        try await database.deleteRecord(withID: Record.ID(recordName: recordName("r", 1), zoneID: photos))

        // A reader before the compacted deletion would miss it: expired.
        #expect(stratusError(await fetchChanges(photos, since: beforeDeletes, in: database).error)?.code == .changeTokenExpired)
        // A reader that saw it is unaffected.
        #expect(await fetchChanges(photos, since: afterFirstDelete, in: database).events == ["-\(recordName("r", 1)):Photo"])
        // Starting again works; the compacted deletion is no longer reported.
        #expect(await fetchChanges(photos, since: nil, in: database).events == [recordName("r", 2), recordName("r", 3)].map { "+" + $0 } + ["-\(recordName("r", 1)):Photo"])
        // Compacting again removes nothing new that is younger than the retention.
        #expect(try await database.compactChangeHistory(retention: 3600).recordTombstonesRemoved == 0)
        let negative = await caughtError { try await database.compactChangeHistory(retention: -1) }
        #expect(stratusError(negative)?.code == .invalidArguments)
    }

    // MARK: - Capabilities

    static let capabilityCases: [TestCase] = [
        TestCase("capabilities: a zone without fetchChanges refuses change fetches", zonesWithoutFetchChangesRefuse),
        TestCase("capabilities: an atomic request in a zone without atomic applies item by item", zonesWithoutAtomicApplyPerItem),
    ]

    static func zonesWithoutFetchChangesRefuse(_ env: Environment) async throws {
        let database = env.container().privateCloudDatabase
        let zone = try await database.save(RecordZone(zoneID: notes, capabilities: [.atomic]))
        #expect(zone.capabilities == [.atomic, .sharing, .zoneWideSharing])
        try await database.save(makeRecord("Note", "n", zoneID: notes))
        #expect(stratusError(await fetchChanges(notes, since: nil, in: database).error)?.code == .invalidArguments)
    }

    static func zonesWithoutAtomicApplyPerItem(_ env: Environment) async throws {
        let database = env.container().privateCloudDatabase
        try await database.save(RecordZone(zoneID: notes, capabilities: [.fetchChanges]))
        try await database.save(makeRecord("Note", "exists", zoneID: notes))
        let fresh = makeRecord("Note", "fresh", zoneID: notes)
        let conflicting = makeRecord("Note", "exists", zoneID: notes)
        let results = try await database.modifyRecords(saving: [fresh, conflicting], deleting: [], atomically: true)
        #expect(errorCode(results.saveResults[conflicting.recordID]) == .serverRecordChanged)
        #expect((try? results.saveResults[fresh.recordID]?.get()) != nil, "the other item is written")
        #expect(try await TestDatabase.exists("fresh", zoneID: notes, in: database))

        // The same request in an atomic zone writes nothing.
        try await database.save(RecordZone(zoneID: photos))
        try await database.save(makeRecord("Note", "exists", zoneID: photos))
        let atomicFresh = makeRecord("Note", "fresh", zoneID: photos)
        // It throws, as CloudKit's modifyRecords does "when atomically is true and one or more of
        // the specified changes fail", with each item's error.
        let stale = makeRecord("Note", "exists", zoneID: photos)
        do {
            _ = try await database.modifyRecords(saving: [atomicFresh, stale], deleting: [], atomically: true)
            Issue.record("an atomic request that wrote nothing throws")
        } catch let error as StratusError {
            #expect(error.code == .partialFailure, "\(error)")
            #expect((error.partialErrorsByItemID?[atomicFresh.recordID] as? StratusError)?.code == .batchRequestFailed)
            #expect((error.partialErrorsByItemID?[stale.recordID] as? StratusError)?.code == .serverRecordChanged)
        }
        #expect(try await TestDatabase.exists("fresh", zoneID: photos, in: database) == false)

        // The completion handler's form answers the same failure.
        let answered = await withCheckedContinuation { continuation in
            database.modifyRecords(saving: [atomicFresh, stale], deleting: []) { continuation.resume(returning: $0) }
        }
        guard case .failure(let failure as StratusError) = answered else { Issue.record("the completion handler gets .failure"); return }
        #expect(failure.code == .partialFailure)

        // Atomicity is per zone: a request that also wrote in another zone (here the default
        // zone, which has no atomic capability) answers each item, so the caller learns the
        // change tags of what was saved.
        let elsewhere = makeRecord("Note", "elsewhere")
        let mixed = try await database.modifyRecords(saving: [atomicFresh, stale, elsewhere], deleting: [], atomically: true)
        #expect((try? mixed.saveResults[elsewhere.recordID]?.get())?.recordChangeTag != nil, "the default zone's record is saved and answered")
        #expect(errorCode(mixed.saveResults[atomicFresh.recordID]) == .batchRequestFailed)
        #expect(errorCode(mixed.saveResults[stale.recordID]) == .serverRecordChanged)
    }

    // MARK: - Database changes

    static let databaseChangeCases: [TestCase] = [
        TestCase("database changes: created, written, deleted and recreated zones since a token", databaseChangesReportZones),
        TestCase("database changes: batches of resultsLimit and serialized tokens", databaseChangesPage),
    ]

    static func databaseChangesReportZones(_ env: Environment) async throws {
        let database = env.container().privateCloudDatabase
        let start = try await database.databaseChanges(since: nil)
        #expect(start.modifications.isEmpty && start.deletions.isEmpty && !start.moreComing)

        try await database.save(RecordZone(zoneID: photos))
        try await database.save(RecordZone(zoneID: notes))
        try await database.save(makeRecord("Note", "n", zoneID: notes))
        let first = try await database.databaseChanges(since: start.changeToken)
        #expect(first.modifications.map(\.zoneID) == [photos, notes], "each zone once, at its latest change")
        #expect(first.deletions.isEmpty)

        try await database.save(makeRecord("Photo", "p", zoneID: photos))
        try await database.save(makeRecord("Note", "d"))
        try await database.deleteRecordZone(withID: notes)
        let second = try await database.databaseChanges(since: first.changeToken)
        #expect(second.modifications.map(\.zoneID) == [photos, .default])
        #expect(second.deletions.map(\.zoneID) == [notes])

        try await database.save(RecordZone(zoneID: notes))
        let third = try await database.databaseChanges(since: second.changeToken)
        #expect(third.modifications.map(\.zoneID) == [notes])
        #expect(third.deletions.isEmpty)
        // From the first token, the recreated zone is reported deleted and changed.
        let sinceFirst = try await database.databaseChanges(since: first.changeToken)
        #expect(sinceFirst.deletions.map(\.zoneID) == [notes])
        #expect(Set(sinceFirst.modifications.map(\.zoneID)) == [photos, .default, notes])

        // From the beginning, as in CloudKit, a client has nothing to delete: the recreated
        // zone is only changed, and a zone deleted for good is not reported at all.
        let gone = RecordZone.ID(zoneName: "Gone")
        try await database.save(RecordZone(zoneID: gone))
        try await database.deleteRecordZone(withID: gone)
        let fresh = try await database.databaseChanges(since: nil)
        #expect(fresh.deletions.isEmpty, "\(fresh.deletions.map(\.zoneID.zoneName))")
        #expect(Set(fresh.modifications.map(\.zoneID)) == [photos, .default, notes])
        #expect(fresh.modifications.count == 3, "each zone once")
        // The same in batches of one, read by one operation.
        let changed = Box<[RecordZone.ID]>([]), deleted = Box<[RecordZone.ID]>([])
        let paged = FetchDatabaseChangesOperation(previousServerChangeToken: nil)
        paged.resultsLimit = 1
        paged.recordZoneWithIDChangedBlock = { id in changed.update { $0.append(id) } }
        paged.recordZoneWithIDWasDeletedBlock = { id in deleted.update { $0.append(id) } }
        await run(paged, on: database)
        #expect(deleted.value.isEmpty && Set(changed.value) == [photos, .default, notes] && changed.value.count == 3)
        // From a token, the deletion since is still reported.
        let sinceThird = try await database.databaseChanges(since: third.changeToken)
        #expect(sinceThird.deletions.map(\.zoneID) == [gone])

        // One batch per call, each token through its text: still no deletion from before the
        // first call, while a zone deleted after it began is reported.
        var token: ServerChangeToken?
        var pagedChanged: [RecordZone.ID] = [], pagedDeleted: [RecordZone.ID] = []
        var calls = 0
        repeat {
            let page = try await database.databaseChanges(since: token.map { try ServerChangeToken(serialized: $0.serialized) }, resultsLimit: 1)
            pagedChanged += page.modifications.map(\.zoneID)
            pagedDeleted += page.deletions.map(\.zoneID)
            token = page.changeToken
            calls += 1
            if calls == 1 {
                #expect(page.moreComing)
                try await database.deleteRecordZone(withID: notes)
            }
            if !page.moreComing { break }
        } while calls < 20
        #expect(Set(pagedChanged).isSuperset(of: [photos, .default]), "\(pagedChanged)")
        #expect(pagedDeleted == [notes], "only the deletion after the first call: \(pagedDeleted)")

        // Other users and databases see none of it.
        let bob = try await env.container(user: "bob").privateCloudDatabase.databaseChanges(since: nil)
        #expect(bob.modifications.isEmpty && bob.deletions.isEmpty)
    }

    static func databaseChangesPage(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        let names = (0..<9).map { "Zone\($0)" }
        _ = try await database.modifyRecordZones(saving: names.map { RecordZone(zoneName: $0) }, deleting: [])
        // A public zone is deleted by the store's administrator.
        let administrator = Database(engine: env.engine, context: .administrator(containerIdentifier: Environment.containerIdentifier, environment: .development, scope: .public, owner: ""))
        _ = try await administrator.deleteRecordZone(withID: RecordZone.ID(zoneName: "Zone4"))

        let changed = Box<[String]>([])
        let deleted = Box<[String]>([])
        let updates = Box<Int>(0)
        let final = Box<Result<(serverChangeToken: ServerChangeToken, moreComing: Bool), any Error>?>(nil)
        let op = FetchDatabaseChangesOperation()
        op.resultsLimit = 4
        op.recordZoneWithIDChangedBlock = { id in changed.update { $0.append(id.zoneName) } }
        op.recordZoneWithIDWasDeletedBlock = { id in deleted.update { $0.append(id.zoneName) } }
        op.changeTokenUpdatedBlock = { _ in updates.update { $0 += 1 } }
        op.fetchDatabaseChangesResultBlock = { final.value = $0 }
        await run(op, on: database)
        #expect(changed.value == names.filter { $0 != "Zone4" })
        #expect(deleted.value.isEmpty, "from the beginning, a zone deleted for good is not reported")
        #expect(updates.value == 2, "9 zone changes and a deletion in batches of 4")
        let token = try #require(try final.value?.get().serverChangeToken)
        #expect(try final.value?.get().moreComing == false)

        // One batch at a time with a token that went through text.
        let page = FetchDatabaseChangesOperation(previousServerChangeToken: nil)
        page.resultsLimit = 3
        page.fetchAllChanges = false
        let pageFinal = Box<Result<(serverChangeToken: ServerChangeToken, moreComing: Bool), any Error>?>(nil)
        page.fetchDatabaseChangesResultBlock = { pageFinal.value = $0 }
        await run(page, on: database)
        #expect(try pageFinal.value?.get().moreComing == true)

        try await database.save(makeRecord("Thing", "t", zoneID: RecordZone.ID(zoneName: "Zone7")))
        let restored = try ServerChangeToken(serialized: token.serialized)
        let later = try await database.databaseChanges(since: restored)
        #expect(later.modifications.map(\.zoneID.zoneName) == ["Zone7"])
    }
}

// MARK: - Reading changes in tests

/// What one ``FetchRecordZoneChangesOperation`` over one zone reported, in block order.
public struct ZoneChangesResult: Sendable {
    /// "+name" for a changed record, "-name:Type" for a deletion, in the order delivered.
    public var events: [String] = []
    /// The changed records, in the order delivered.
    public var records: [Record] = []
    /// The zone's final token, or `nil` when the zone failed.
    public var token: ServerChangeToken?
    public var moreComing = false
    /// The zone's error (from `recordZoneFetchResultBlock`), if it failed.
    public var error: (any Error)?
    /// How often `recordZoneChangeTokensUpdatedBlock` was called.
    public var tokenUpdates = 0
}

/// Runs a ``FetchRecordZoneChangesOperation`` for one zone and collects what it reports.
///
/// ```swift
/// let changes = await fetchChanges(zoneID, since: token, in: database, resultsLimit: 10)
/// #expect(changes.events == ["+a", "-b:Photo"])
/// ```
public func fetchChanges(
    _ zoneID: RecordZone.ID, since token: ServerChangeToken?, in database: Database,
    resultsLimit: Int? = nil, fetchAllChanges: Bool = true, desiredKeys: [String]? = nil
) async -> ZoneChangesResult {
    let result = Box(ZoneChangesResult())
    let config = FetchRecordZoneChangesOperation.ZoneConfiguration(previousServerChangeToken: token, resultsLimit: resultsLimit, desiredKeys: desiredKeys)
    let op = FetchRecordZoneChangesOperation(recordZoneIDs: [zoneID], configurationsByRecordZoneID: [zoneID: config])
    op.fetchAllChanges = fetchAllChanges
    op.recordWasChangedBlock = { id, changed in
        guard case .success(let record) = changed else { return }
        result.update { $0.events.append("+" + id.recordName); $0.records.append(record) }
    }
    op.recordWithIDWasDeletedBlock = { id, type in result.update { $0.events.append("-\(id.recordName):\(type)") } }
    op.recordZoneChangeTokensUpdatedBlock = { _, _, _ in result.update { $0.tokenUpdates += 1 } }
    op.recordZoneFetchResultBlock = { _, zoneResult in
        result.update { r in
            switch zoneResult {
            case .success(let (token, _, more)): r.token = token; r.moreComing = more
            case .failure(let error): r.error = error
            }
        }
    }
    await run(op, on: database)
    return result.value
}
