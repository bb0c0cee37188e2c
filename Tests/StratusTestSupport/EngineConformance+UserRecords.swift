import Foundation
import Stratus
import Testing

// MARK: - The current user's Users record in the public database, through the public API

extension EngineConformance {
    static let userRecordCases: [TestCase] = [
        TestCase("user records: one's own Users record exists from its first fetch (record(for:), records(for:), fetchCurrentUserRecordOperation), empty and created by its user; another user's never made is unknownItem", firstFetchMakesOwnUserRecord),
        TestCase("user records: profile fields saved on one's fetched user record are read by others, who may not write it; a stale or unfetched save conflicts as on CloudKit", profileFieldsOnUserRecord),
        TestCase("user records: made on a first fetch, it is one change in the public default zone's feed and fires a subscription on its creation, once", userRecordCreationIsOneChange),
        TestCase("user records: a caller who is not signed in has none (notAuthenticated); the private database holds none; production has its own", userRecordsByDatabaseAndCaller),
        TestCase("user records: a Users type that grants nothing, or grants CREATE, lets no save make another user's record; its user still makes and writes their own", usersTypeGrantsCreateNothing),
    ]

    /// The user record of `login` as the conformance container names it.
    private static func userRecordID(_ env: Environment, _ login: String) -> Record.ID {
        Record.ID(recordName: env.recordName(of: login))
    }

    /// What `fetchCurrentUserRecordOperation()` hands its blocks in `database`.
    private static func fetchCurrentUserRecord(in database: Database) async -> (records: [Record.ID: Result<Record, any Error>], final: Result<Void, any Error>?, recordIDs: [Record.ID]?) {
        let op = FetchRecordsOperation.fetchCurrentUserRecordOperation()
        let records = Box<[Record.ID: Result<Record, any Error>]>([:])
        let final = Box<Result<Void, any Error>?>(nil)
        op.perRecordResultBlock = { id, result in records.update { $0[id] = result } }
        op.fetchRecordsResultBlock = { result in final.update { $0 = result } }
        await run(op, on: database)
        return (records.value, final.value, op.recordIDs)
    }

    static func firstFetchMakesOwnUserRecord(_ env: Environment) async throws {
        let alice = env.container(user: "alice"), bob = env.container(user: "bob")
        let aliceID = try await alice.userRecordID()
        #expect(aliceID == userRecordID(env, "alice"))
        // Before alice's first use, nobody finds it: Stratus cannot tell a user from a name.
        #expect(try await userFetchCode(aliceID, as: bob.publicCloudDatabase) == .unknownItem)

        let me = try await alice.publicCloudDatabase.record(for: aliceID)
        #expect(me.recordType == Record.SystemType.userRecord && me.recordType == "Users" && RecordTypeUserRecord == "Users")
        #expect(me.recordID == aliceID)
        #expect(me.allKeys().isEmpty, "empty at first: \(me.allKeys())")
        #expect(me.systemFields.creatorUserRecordID == aliceID && me.systemFields.lastModifiedUserRecordID == aliceID)
        #expect(me.recordChangeTag != nil && me.creationDate != nil)

        // The same record on every later fetch, for its user and for others.
        let again = try await alice.publicCloudDatabase.record(for: aliceID)
        #expect(again.recordChangeTag == me.recordChangeTag && again.creationDate == me.creationDate)
        let seenByBob = try await bob.publicCloudDatabase.record(for: aliceID)
        #expect(seenByBob.recordChangeTag == me.recordChangeTag && seenByBob.systemFields.creatorUserRecordID == aliceID)

        // The operation CloudKit offers for it, with its ID and no recordIDs.
        let fetched = await fetchCurrentUserRecord(in: alice.publicCloudDatabase)
        #expect(fetched.recordIDs == nil)
        #expect(fetched.records.count == 1 && (try? fetched.records[aliceID]?.get())?.recordChangeTag == me.recordChangeTag)
        #expect(errorCode(fetched.final) == nil)

        // A first fetch among other IDs: bob's own is made, alice's found, a missing one fails alone.
        let bobID = try await bob.userRecordID()
        let missing = Record.ID(recordName: "never-saved")
        let batch = try await bob.publicCloudDatabase.records(for: [aliceID, bobID, missing])
        #expect((try? batch[aliceID]?.get())?.recordChangeTag == me.recordChangeTag)
        #expect((try? batch[bobID]?.get())?.systemFields.creatorUserRecordID == bobID)
        #expect(errorCode(batch[missing]) == .unknownItem)

        // Another user's that was never made stays unknown, and fetching it makes nothing.
        let carolID = userRecordID(env, "carol")
        #expect(try await userFetchCode(carolID, as: alice.publicCloudDatabase) == .unknownItem)
        #expect(try await userFetchCode(carolID, as: alice.publicCloudDatabase) == .unknownItem)

        // Two first fetches at once make one record.
        let dora = [env.container(user: "dora"), env.container(user: "dora")]
        let doraID = try await dora[0].userRecordID()
        async let first = dora[0].publicCloudDatabase.record(for: doraID)
        async let second = dora[1].publicCloudDatabase.record(for: doraID)
        let (one, other) = try await (first, second)
        #expect(one.recordChangeTag == other.recordChangeTag && one.creationDate == other.creationDate)
    }

    static func profileFieldsOnUserRecord(_ env: Environment) async throws {
        let alice = env.container(user: "alice").publicCloudDatabase, bob = env.container(user: "bob").publicCloudDatabase
        let aliceID = userRecordID(env, "alice")

        let me = try await alice.record(for: aliceID)
        me["nickname"] = "Ada"
        me["languages"] = ["en", "fr"]
        let saved = try await alice.save(me)
        #expect(saved.recordChangeTag != me.recordChangeTag && saved.creationDate == me.creationDate)
        let read = try await bob.record(for: aliceID)
        #expect(read["nickname"] as? String == "Ada" && read["languages"] as? [String] == ["en", "fr"])
        #expect(read.systemFields.lastModifiedUserRecordID == aliceID)

        // Others may read it and not write it (the Users type's grants: _creator WRITE, _world READ).
        read["nickname"] = "Mallory"
        #expect(await userSaveCode(read, in: bob) == .permissionFailure)
        #expect(try await userDeleteCode(aliceID, as: bob) == .permissionFailure)
        // A stale copy conflicts, carrying the stored record.
        me["nickname"] = "Stale"
        let stale = stratusError(await caughtError { try await alice.save(me) })
        #expect(stale?.code == .serverRecordChanged && stale?.serverRecord?["nickname"] as? String == "Ada", "\(String(describing: stale))")

        // A save that never fetched meets the record CloudKit would have made already: a new
        // record with the default policy conflicts, .changedKeys writes onto it.
        let carolDatabase = env.container(user: "carol").publicCloudDatabase
        let carolID = userRecordID(env, "carol")
        let unfetched = Record(recordType: Record.SystemType.userRecord, recordID: carolID)
        unfetched["nickname"] = "Carol"
        let conflict = stratusError(await caughtError { try await carolDatabase.save(unfetched) })
        #expect(conflict?.code == .serverRecordChanged && conflict?.serverRecord?.systemFields.creatorUserRecordID == carolID, "\(String(describing: conflict))")
        let (results, _) = try await carolDatabase.modifyRecords(saving: [unfetched], deleting: [], savePolicy: .changedKeys)
        #expect((try? results[carolID]?.get())?["nickname"] as? String == "Carol")
        #expect(try await alice.record(for: carolID)["nickname"] as? String == "Carol")

        // Nobody's save makes another user's record.
        let forDora = Record(recordType: Record.SystemType.userRecord, recordID: userRecordID(env, "dora"))
        #expect(await userSaveCode(forDora, in: alice) == .permissionFailure)
        #expect(try await userFetchCode(userRecordID(env, "dora"), as: alice) == .unknownItem)

        // As in CloudKit, user records are fetched by ID, never listed by a query; Stratus's
        // own reading of every record (what an export runs) still lists them.
        let listing = stratusError(await caughtError { try await bob.records(matching: Query(recordType: RecordTypeUserRecord)) })
        #expect(listing?.code == .invalidArguments && listing?.message.contains("fetch a user's record by its ID") == true, "\(String(describing: listing))")
        var everyUser: Set<Record.ID> = []
        for try await user in bob.allRecords(matching: Query(recordType: RecordTypeUserRecord)) { everyUser.insert(user.recordID) }
        #expect(everyUser.isSuperset(of: [aliceID, carolID]))
    }

    static func usersTypeGrantsCreateNothing(_ env: Environment) async throws {
        let alice = env.container(user: "alice"), bob = env.container(user: "bob")
        let doraID = userRecordID(env, "dora")
        // As a hand-written schema file declares it (`RECORD TYPE Users (nickname STRING)`): no
        // grants, which for another type would mean CloudKit's defaults, _icloud CREATE among
        // them. Then a hostile one granting CREATE outright.
        var withoutGrants = RecordTypeSchema(recordType: RecordTypeUserRecord)
        withoutGrants.addField("nickname", type: .string)
        withoutGrants.addField("roles", type: .int64List)
        var grantingCreate = withoutGrants
        grantingCreate.grant([.read, .create, .write], to: .authenticated)
        for schema in [withoutGrants, grantingCreate] {
            try await alice.saveSchema(schema)
            let forDora = Record(recordType: Record.SystemType.userRecord, recordID: doraID)
            forDora["nickname"] = "planted by alice"
            #expect(await userSaveCode(forDora, in: alice.publicCloudDatabase) == .permissionFailure, "grants \(schema.grants)")
            let (saved, _) = try await alice.publicCloudDatabase.modifyRecords(saving: [forDora], deleting: [], savePolicy: .changedKeys)
            #expect(errorCode(saved[doraID]) == .permissionFailure)
            #expect(try await userFetchCode(doraID, as: bob.publicCloudDatabase) == .unknownItem, "nobody made dora's record")
        }
        // Its user makes their own on first use and writes it; others read it.
        let bobID = try await bob.userRecordID()
        let mine = try await bob.publicCloudDatabase.record(for: bobID)
        #expect(mine.systemFields.creatorUserRecordID == bobID)
        mine["nickname"] = "Bob"
        _ = try await bob.publicCloudDatabase.save(mine)
        #expect(try await alice.publicCloudDatabase.record(for: bobID)["nickname"] as? String == "Bob")
    }

    static func userRecordCreationIsOneChange(_ env: Environment) async throws {
        let alice = env.container(user: "alice"), bob = env.container(user: "bob")
        let aliceID = try await alice.userRecordID()
        let subscription = QuerySubscription(recordType: Record.SystemType.userRecord, predicate: QueryPredicate(value: true), subscriptionID: "new-users",
                                             options: [.firesOnRecordCreation])
        subscription.notificationInfo = NotificationInfo()
        try await bob.publicCloudDatabase.save(subscription)
        let start = try await bob.publicCloudDatabase.recordZoneChanges(inZoneWith: .default, since: nil).changeToken

        _ = try await alice.publicCloudDatabase.record(for: aliceID)
        _ = try await alice.publicCloudDatabase.record(for: aliceID)
        let changes = try await bob.publicCloudDatabase.recordZoneChanges(inZoneWith: .default, since: start)
        #expect(changes.modificationResultsByID.count == 1)
        let changed = try #require(try changes.modificationResultsByID[aliceID]?.get())
        #expect(changed.record.recordType == "Users" && changed.record.systemFields.creatorUserRecordID == aliceID)
        #expect(try await SubscriptionConformance.described(bob) == ["query new-users recordCreated \(aliceID.recordName)"])
        let later = try await bob.publicCloudDatabase.recordZoneChanges(inZoneWith: .default, since: changes.changeToken)
        #expect(later.modificationResultsByID.isEmpty, "later fetches change nothing")
    }

    static func userRecordsByDatabaseAndCaller(_ env: Environment) async throws {
        let alice = env.container(user: "alice")
        let aliceID = try await alice.userRecordID()
        _ = try await alice.publicCloudDatabase.record(for: aliceID)

        // Not signed in: no user record of one's own, and others' readable as _world may.
        let visitor = env.anonymousContainer()
        let anonymous = await fetchCurrentUserRecord(in: visitor.publicCloudDatabase)
        #expect(errorCode(anonymous.final) == .notAuthenticated && anonymous.records.isEmpty)
        #expect(try await visitor.publicCloudDatabase.record(for: aliceID).systemFields.creatorUserRecordID == aliceID)

        // User records live in the public database: the private one holds none and makes none.
        #expect(try await userFetchCode(aliceID, as: alice.privateCloudDatabase) == .unknownItem)
        let inPrivate = await fetchCurrentUserRecord(in: alice.privateCloudDatabase)
        #expect(errorCode(inPrivate.records[aliceID]) == .unknownItem)
        let privateError = try #require(stratusError(inPrivate.records[aliceID].flatMap { result in
            if case .failure(let error) = result { error } else { nil }
        }))
        #expect(privateError.message.contains("public database"), "\(privateError.message)")

        // Production's data is its own: its user record is made there on its first fetch.
        let production = alice.container(in: .production).publicCloudDatabase
        let there = try await production.record(for: aliceID)
        #expect(there.recordType == "Users" && there.systemFields.creatorUserRecordID == aliceID)
        #expect(there.recordChangeTag != (try await alice.publicCloudDatabase.record(for: aliceID)).recordChangeTag)
    }

    // MARK: - Helpers

    private static func userFetchCode(_ id: Record.ID, as database: Database) async throws -> StratusError.Code? {
        errorCode(try await database.records(for: [id])[id])
    }

    private static func userSaveCode(_ record: Record, in database: Database) async -> StratusError.Code? {
        stratusError(await caughtError { try await database.save(record) })?.code
    }

    private static func userDeleteCode(_ id: Record.ID, as database: Database) async throws -> StratusError.Code? {
        let (_, deletes) = try await database.modifyRecords(saving: [], deleting: [id], atomically: false)
        return errorCode(deletes[id])
    }
}
