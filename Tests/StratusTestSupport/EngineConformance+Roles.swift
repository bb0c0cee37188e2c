import Foundation
import Stratus
import Testing

// MARK: - Security roles of the public database and identities, through the public API

extension EngineConformance {
    static let roleCases: [TestCase] = [
        TestCase("roles: public defaults (_world read, _icloud create, _creator write) for a creator, another user, a custom role and no user", defaultRoleMatrix),
        TestCase("roles: _creator-only READ restricts queries and fetches to one's own records, change feeds per record", creatorOnlyReads),
        TestCase("roles: a custom role with per-type grants, given by the user directory", customRoleMatrix),
        TestCase("roles: a type that grants nothing (a schema file's type without GRANT lines) is unusable in the public database, usable in the private one", typeGrantingNothing),
        TestCase("roles: a caller with no user reads what _world may and nothing else (notAuthenticated)", anonymousCaller),
        TestCase("identities: user record names are _ and 32 hex digits, stable, per container and login; creator fields carry them", userRecordNames),
        TestCase("identities: a directory entry maps a login onto an imported owner's record name; record names are unique", directoryMapsLogins),
    ]

    /// The forum schema of the role cases: `Post` without grants (CloudKit's public defaults),
    /// `Memo` readable only by its creator, `Notice` written by moderators and read by everyone.
    static func forumSchema() -> ContainerSchema {
        var post = RecordTypeSchema(recordType: "Post")
        post.addField("title", type: .string, indexes: [.queryable])
        post.addField("recordName", type: .string, indexes: [.queryable])
        var memo = RecordTypeSchema(recordType: "Memo", grants: [.creator: [.read, .write], .authenticated: .create])
        memo.addField("text", type: .string)
        memo.addField("recordName", type: .string, indexes: [.queryable])
        var notice = RecordTypeSchema(recordType: "Notice", grants: [.world: .read, "moderator": [.create, .write]])
        notice.addField("text", type: .string)
        notice.addField("recordName", type: .string, indexes: [.queryable])
        return ContainerSchema(roles: ["moderator"], recordTypes: [post, memo, notice])
    }

    /// The error code of saving `record` in `database` (`nil`: saved).
    private static func saveCode(_ record: Record, in database: Database) async -> StratusError.Code? {
        stratusError(await caughtError { try await database.save(record) })?.code
    }

    /// The error code of changing the stored record `name` (fetched by `reader`) as `writer`.
    private static func updateCode(_ name: String, reading reader: Database, as writer: Database) async throws -> StratusError.Code? {
        let stored = try await reader.record(for: Record.ID(recordName: name))
        stored["text"] = "changed by someone"
        stored["title"] = stored["title"] == nil ? nil : "changed"
        return await saveCode(stored, in: writer)
    }

    private static func deleteCode(_ name: String, as database: Database) async throws -> StratusError.Code? {
        let (_, deletes) = try await database.modifyRecords(saving: [], deleting: [Record.ID(recordName: name)], atomically: false)
        return errorCode(deletes[Record.ID(recordName: name)])
    }

    private static func fetchCode(_ name: String, as database: Database) async throws -> StratusError.Code? {
        errorCode(try await database.records(for: [Record.ID(recordName: name)])[Record.ID(recordName: name)])
    }

    static func typeGrantingNothing(_ env: Environment) async throws {
        var diary = RecordTypeSchema(recordType: "Diary", grants: [:])
        diary.addField("text", type: .string)
        try await env.container().saveSchema(diary)
        #expect(try await env.container().schema().recordType("Diary")?.grants.isEmpty == true, "stored as granting nothing, not as CloudKit's defaults")
        let alice = env.container(user: "alice")
        let refused = stratusError(await caughtError { try await alice.publicCloudDatabase.save(makeRecord("Diary", "d1", ["text": .string("x")])) })
        #expect(refused?.code == .permissionFailure)
        #expect(refused?.message.contains("it grants nothing") == true, "\(String(describing: refused))")
        #expect(await saveCode(makeRecord("Diary", "d1", ["text": .string("x")]), in: env.anonymousContainer().publicCloudDatabase) == .notAuthenticated)
        #expect(await caughtError { _ = try await TestDatabase.queryAll(Query(recordType: "Diary"), in: alice.publicCloudDatabase) } != nil, "nobody may read it")
        #expect(try await TestDatabase.exists("d1", in: env.container().publicCloudDatabase) == false)

        // Grants are the public database's: the private database uses the type.
        try await alice.privateCloudDatabase.save(makeRecord("Diary", "d1", ["text": .string("dear diary")]))
        #expect(try await alice.privateCloudDatabase.record(for: Record.ID(recordName: "d1"))["text"] as? String == "dear diary")
    }

    static func defaultRoleMatrix(_ env: Environment) async throws {
        try await env.container().replaceSchema(forumSchema())
        let alice = env.container(user: "alice").publicCloudDatabase
        let bob = env.container(user: "bob").publicCloudDatabase
        try await env.container().assignRoles(["moderator"], toLogin: "carol")
        let carol = env.container(user: "carol").publicCloudDatabase
        let nobody = env.anonymousContainer().publicCloudDatabase

        // CREATE: _icloud, so every signed-in user.
        #expect(await saveCode(makeRecord("Post", "by-alice", ["title": .string("hello")]), in: alice) == nil)
        #expect(await saveCode(makeRecord("Post", "by-bob", ["title": .string("hi")]), in: bob) == nil)
        #expect(await saveCode(makeRecord("Post", "by-carol", ["title": .string("hey")]), in: carol) == nil)
        #expect(await saveCode(makeRecord("Post", "by-nobody", ["title": .string("?")]), in: nobody) == .notAuthenticated)
        // READ: _world, so everyone, also by query.
        for database in [alice, bob, carol, nobody] {
            #expect(try await fetchCode("by-alice", as: database) == nil)
            #expect(try await TestDatabase.queryAll(Query(recordType: "Post"), in: database).count == 3)
        }
        // WRITE (change and delete): _creator only.
        #expect(try await updateCode("by-alice", reading: alice, as: bob) == .permissionFailure)
        #expect(try await updateCode("by-alice", reading: alice, as: carol) == .permissionFailure)
        #expect(try await updateCode("by-alice", reading: alice, as: nobody) == .notAuthenticated)
        #expect(try await updateCode("by-alice", reading: alice, as: alice) == nil)
        #expect(try await deleteCode("by-alice", as: bob) == .permissionFailure)
        #expect(try await deleteCode("by-alice", as: carol) == .permissionFailure)
        #expect(try await deleteCode("by-alice", as: nobody) == .notAuthenticated)
        #expect(try await TestDatabase.exists("by-alice", in: alice))
        #expect(try await deleteCode("by-alice", as: alice) == nil)
        #expect(try await TestDatabase.exists("by-alice", in: alice) == false)
        let refused = stratusError(await caughtError { try await bob.save(try await alice.record(for: Record.ID(recordName: "by-carol"))) })
        #expect(refused?.message.contains("WRITE operation not permitted") == true, "\(String(describing: refused))")
        // The usual surprise is acting as another user than the creator: the message says so.
        let carolRecord = try await carol.record(for: Record.ID(recordName: "by-carol"))
        let carolName = try #require(carolRecord.systemFields.creatorUserRecordID?.recordName)
        #expect(refused?.message.contains("did not create the record (its creator is \(carolName))") == true, "\(String(describing: refused))")
        // Saved under a type the caller may read, a record of a type it may not read names no creator.
        #expect(await saveCode(makeRecord("Memo", "carol-memo", ["text": .string("hers alone")]), in: carol) == nil)
        let disguised = stratusError(await caughtError { try await bob.save(makeRecord("Post", "carol-memo", ["title": .string("mine")])) })
        #expect(disguised != nil && disguised?.message.contains(carolName) == false, "\(String(describing: disguised))")
    }

    static func creatorOnlyReads(_ env: Environment) async throws {
        try await env.container().replaceSchema(forumSchema())
        let alice = env.container(user: "alice").publicCloudDatabase
        let bob = env.container(user: "bob").publicCloudDatabase
        let nobody = env.anonymousContainer().publicCloudDatabase
        let start = try await alice.recordZoneChanges(inZoneWith: .default, since: nil).changeToken
        try await TestDatabase.save(makeRecords("Memo", count: 3, prefix: "alice") { ["text": .string("a\($0)")] }, in: alice)
        try await TestDatabase.save(makeRecords("Memo", count: 2, prefix: "bob") { ["text": .string("b\($0)")] }, in: bob)

        // Queries return one's own memos only; cursors follow.
        #expect(TestDatabase.names(try await TestDatabase.queryAll(Query(recordType: "Memo"), in: alice)) == ["alice-00000", "alice-00001", "alice-00002"])
        #expect(TestDatabase.names(try await TestDatabase.queryAll(Query(recordType: "Memo"), in: bob)) == ["bob-00000", "bob-00001"])
        let (firstPage, cursor) = try await alice.records(matching: Query(recordType: "Memo"), resultsLimit: 2)
        #expect(firstPage.count == 2)
        let next = try #require(cursor)
        #expect(try await alice.records(continuingMatchFrom: next).matchResults.map(\.0.recordName) == ["alice-00002"])
        let stolen = stratusError(await caughtError { try await bob.records(continuingMatchFrom: next) })
        #expect(stolen != nil, "bob cannot continue alice's restricted query")
        #expect(try await alice.countRecords(matching: Query(recordType: "Memo")) == 3)
        let anonymousQuery = stratusError(await caughtError { try await nobody.records(matching: Query(recordType: "Memo")) })
        #expect(anonymousQuery?.code == .notAuthenticated)

        // A write one may not make is refused alike whatever it sends: no way to test guesses
        // of values one may not read (a save that would change nothing is no exception).
        for guess in ["a0", "wrong"] {
            let probe = makeRecord("Memo", "alice-00000", ["text": .string(guess)])
            let results = try await bob.modifyRecords(saving: [probe], deleting: [], savePolicy: .allKeys, atomically: false)
            #expect(errorCode(results.saveResults[probe.recordID]) == .permissionFailure, "guessing \(guess)")
        }

        // Fetches: per record.
        #expect(try await fetchCode("alice-00000", as: alice) == nil)
        #expect(try await fetchCode("alice-00000", as: bob) == .permissionFailure)
        #expect(try await fetchCode("alice-00000", as: nobody) == .notAuthenticated)
        let both = try await bob.records(for: [Record.ID(recordName: "alice-00001"), Record.ID(recordName: "bob-00001")])
        #expect(errorCode(both[Record.ID(recordName: "alice-00001")]) == .permissionFailure)
        if case .failure(let refused)? = both[Record.ID(recordName: "alice-00001")] {
            let message = (refused as? StratusError)?.message ?? ""
            #expect(message.contains("READ operation not permitted") && !message.contains("creator is"), "a refused read tells no one who created the record: \(message)")
        }
        #expect(errorCode(both[Record.ID(recordName: "bob-00001")]) == nil)
        // The older per-record block hears of the refusal too, as of every other failed ID.
        let older = FetchRecordsOperation(recordIDs: [Record.ID(recordName: "alice-00001"), Record.ID(recordName: "bob-00001")])
        let completions = Box([String: String]())
        older.perRecordCompletionBlock = { _, id, error in
            completions.update { $0[id?.recordName ?? "?"] = (error as? StratusError).map { "\($0.code)" } ?? "saved" }
        }
        await run(older, on: bob)
        #expect(completions.value == ["alice-00001": "\(StratusError.Code.permissionFailure)", "bob-00001": "saved"])

        // Change feeds: per record; deletions of a type one may read some of.
        let seenByBob = try await bob.recordZoneChanges(inZoneWith: .default, since: start)
        #expect(seenByBob.modificationResultsByID.filter { (try? $0.value.get()) != nil }.keys.map(\.recordName).sorted() == ["bob-00000", "bob-00001"])
        #expect(seenByBob.modificationResultsByID.filter { errorCode($0.value) == .permissionFailure }.count == 3)
        try await alice.deleteRecord(withID: Record.ID(recordName: "alice-00002"))
        let deletions = try await bob.recordZoneChanges(inZoneWith: .default, since: seenByBob.changeToken).deletions
        #expect(deletions.map(\.recordID.recordName) == ["alice-00002"])
    }

    static func customRoleMatrix(_ env: Environment) async throws {
        var schema = forumSchema()
        var report = RecordTypeSchema(recordType: "Report", grants: [.creator: [.read, .write], .authenticated: .create, "moderator": .write])
        report.addField("body", type: .string)
        report.addField("flag", type: .int64)
        report.addField("recordName", type: .string, indexes: [.queryable])
        schema.recordTypes.append(report)
        try await env.container().replaceSchema(schema)
        try await env.container().assignRoles(["moderator"], toLogin: "carol")
        let alice = env.container(user: "alice").publicCloudDatabase
        let carol = env.container(user: "carol").publicCloudDatabase
        let nobody = env.anonymousContainer().publicCloudDatabase

        // CREATE: only the moderator role.
        #expect(await saveCode(makeRecord("Notice", "rules", ["text": .string("be kind")]), in: carol) == nil)
        #expect(await saveCode(makeRecord("Notice", "spam", ["text": .string("buy")]), in: alice) == .permissionFailure)
        #expect(await saveCode(makeRecord("Notice", "anon", ["text": .string("?")]), in: nobody) == .notAuthenticated)
        // READ: _world.
        for database in [alice, carol, nobody] {
            #expect(try await fetchCode("rules", as: database) == nil)
            #expect(TestDatabase.names(try await TestDatabase.queryAll(Query(recordType: "Notice"), in: database)) == ["rules"])
        }
        // WRITE: the role's, on every record of the type, not the creator's as such.
        #expect(try await updateCode("rules", reading: alice, as: alice) == .permissionFailure)
        try await env.container().assignRoles(["moderator"], toLogin: "dave")
        let dave = env.container(user: "dave").publicCloudDatabase
        #expect(try await updateCode("rules", reading: alice, as: dave) == nil, "another moderator changes carol's notice")
        // The role gives nothing on other types: carol is an ordinary user for Post.
        #expect(await saveCode(makeRecord("Post", "alices-post", ["title": .string("t")]), in: alice) == nil)
        #expect(try await updateCode("alices-post", reading: alice, as: carol) == .permissionFailure)
        // A role that may write a type's records but not read them (moderators flag reports)
        // is answered with what it sent: never the stored record's other values or creator.
        #expect(await saveCode(makeRecord("Report", "r1", ["body": .string("alice's complaint")]), in: alice) == nil)
        #expect(try await fetchCode("r1", as: dave) == .permissionFailure)
        let flag = makeRecord("Report", "r1", ["flag": .int64(1)])
        let flagged = try await dave.modifyRecords(saving: [flag], deleting: [], savePolicy: .changedKeys, atomically: false)
        let answered = try #require(try flagged.saveResults[flag.recordID]?.get())
        #expect(answered["body"] == nil && answered["flag"] as? Int64 == 1, "\(answered)")
        #expect(answered.creatorUserRecordID == nil)
        let again = try await dave.modifyRecords(saving: [makeRecord("Report", "r1", ["flag": .int64(1)])], deleting: [], savePolicy: .changedKeys, atomically: false)
        let againAnswer = try again.saveResults[flag.recordID]?.get()
        #expect(againAnswer?["body"] == nil, "a save that changes nothing answers no stored values either")
        #expect(againAnswer?.recordChangeTag != nil && againAnswer?.recordChangeTag != answered.recordChangeTag,
                "to one who may not read, a save that changes nothing is a new version: no confirmation of a guess")
        let stale = makeRecord("Report", "r1", ["flag": .int64(2)])
        let conflict = try await dave.modifyRecords(saving: [stale], deleting: [], savePolicy: .ifServerRecordUnchanged, atomically: false)
        if case .failure(let error as StratusError)? = conflict.saveResults[stale.recordID] {
            #expect(error.code == .serverRecordChanged)
            #expect(error.serverRecord == nil, "no stored record for one who may not read it")
        } else {
            Issue.record("a save of an existing record without its change tag is a conflict: \(String(describing: conflict.saveResults[stale.recordID]))")
        }
        #expect(try await alice.record(for: Record.ID(recordName: "r1"))["body"] as? String == "alice's complaint")
        // A user whose roles are taken away (a new container reads the directory again) loses them.
        try await env.container().assignRoles([], toLogin: "carol")
        let carolAgain = env.container(user: "carol").publicCloudDatabase
        #expect(try await deleteCode("rules", as: carolAgain) == .permissionFailure)
        #expect(try await deleteCode("rules", as: dave) == nil)
        let entries = try await env.container().users()
        #expect(entries.map(\.login) == ["carol", "dave"])
        #expect(entries.first { $0.login == "dave" }?.roles == ["moderator"])
    }

    static func anonymousCaller(_ env: Environment) async throws {
        try await env.container().replaceSchema(forumSchema())
        let visitor = env.anonymousContainer()
        #expect(visitor.userName == nil)
        try await TestDatabase.save([makeRecord("Post", "public", ["title": .string("for all")])], in: env.container().publicCloudDatabase)
        #expect(try await visitor.publicCloudDatabase.record(for: Record.ID(recordName: "public"))["title"] as? String == "for all")
        #expect(try await visitor.publicCloudDatabase.recordZoneChanges(inZoneWith: .default, since: nil).modificationResultsByID.count == 1)

        #expect(stratusError(await caughtError { try await visitor.userRecordID() })?.code == .notAuthenticated)
        for database in [visitor.privateCloudDatabase, visitor.sharedCloudDatabase] {
            let save = stratusError(await caughtError { try await database.save(makeRecord("Post", "mine")) })
            #expect(save?.code == .notAuthenticated, "\(database.databaseScope)")
            let query = stratusError(await caughtError { try await database.records(matching: Query(recordType: "Post")) })
            #expect(query?.code == .notAuthenticated, "\(database.databaseScope)")
        }
        let zone = stratusError(await caughtError { try await visitor.publicCloudDatabase.save(RecordZone(zoneName: "Mine")) })
        #expect(zone?.code == .notAuthenticated)
        let missingDelete = try await visitor.publicCloudDatabase.modifyRecords(saving: [], deleting: [Record.ID(recordName: "never-was")], atomically: false)
        #expect(errorCode(missingDelete.deleteResults[Record.ID(recordName: "never-was")]) == .notAuthenticated)
        // A type _world may not read is closed to it, by query and by fetch.
        try await TestDatabase.save([makeRecord("Memo", "memo", ["text": .string("x")])], in: env.container().publicCloudDatabase)
        #expect(try await fetchCode("memo", as: visitor.publicCloudDatabase) == .notAuthenticated)
        // The production environment treats it the same way.
        try await env.container().deploySchema()
        let productionVisitor = env.anonymousContainer(in: .production).publicCloudDatabase
        #expect(await saveCode(makeRecord("Post", "p", ["title": .string("x")]), in: productionVisitor) == .notAuthenticated)
    }

    static func userRecordNames(_ env: Environment) async throws {
        let alice = env.container(user: "alice")
        let me = try await alice.userRecordID()
        #expect(me.recordName == env.recordName(of: "alice"))
        #expect(UserDirectoryEntry.isUserRecordName(me.recordName), "\(me.recordName)")
        #expect(try await env.container(user: "alice").userRecordID() == me, "stable")
        #expect(try await env.container(user: "bob").userRecordID() != me, "per login")
        let elsewhere = Container(identifier: "com.example.elsewhere", engine: env.engine, userName: "alice")
        #expect(try await elsewhere.userRecordID() != me, "per container")
        #expect(try await alice.container(in: .production).userRecordID() == me, "the same in both environments")

        let saved = try await alice.publicCloudDatabase.save(makeRecord("Item", "mine"))
        #expect(saved.systemFields.creatorUserRecordID == me && saved.systemFields.lastModifiedUserRecordID == me)
        let query = try Query(recordType: "Item", format: "creatorUserRecordID == %@", me)
        #expect(TestDatabase.names(try await TestDatabase.queryAll(query, in: alice.publicCloudDatabase)) == ["mine"])
        // A zone owned by the user answers with `__defaultOwner__` or the record name alike.
        let zone = try await alice.privateCloudDatabase.save(RecordZone(zoneName: "Albums"))
        #expect(zone.zoneID.ownerName == RecordZone.ID.currentUserDefaultOwner)
        let named = RecordZone.ID(zoneName: "Albums", ownerName: me.recordName)
        try await alice.privateCloudDatabase.save(makeRecord("Item", "in-album", zoneID: named))
        #expect(try await TestDatabase.exists("in-album", zoneID: RecordZone.ID(zoneName: "Albums"), in: alice.privateCloudDatabase))
    }

    static func directoryMapsLogins(_ env: Environment) async throws {
        try await env.container().replaceSchema(forumSchema())
        // A record imported from CloudKit keeps its owner's record name.
        let owner = "_0123456789abcdef0123456789abcdef"
        let when = Date(timeIntervalSince1970: 1_600_000_000)
        let imported = Record(recordType: "Post", recordID: Record.ID(recordName: "imported"), values: ["title": .string("from CloudKit")],
                              systemFields: Record.SystemFields(creationDate: when, modificationDate: when, creatorUserRecordID: Record.ID(recordName: owner),
                                                                lastModifiedUserRecordID: Record.ID(recordName: owner), recordChangeTag: "ck1"))
        let load = ModifyRecordsOperation(recordsToSave: [imported])
        load.writeMode = .forceReplace
        load.preservesSystemFields = true
        await run(load, on: env.container().publicCloudDatabase)
        #expect(try await env.container().publicCloudDatabase.record(for: imported.recordID).systemFields.creatorUserRecordID?.recordName == owner)

        // Without an entry, dora is someone else; with one, she is the owner and may write.
        #expect(try await updateCode("imported", reading: env.container(user: "dora").publicCloudDatabase, as: env.container(user: "dora").publicCloudDatabase) == .permissionFailure)
        try await env.container().saveUsers([UserDirectoryEntry(login: "dora", userRecordName: owner)])
        let dora = env.container(user: "dora")
        #expect(try await dora.userRecordID().recordName == owner)
        #expect(try await updateCode("imported", reading: dora.publicCloudDatabase, as: dora.publicCloudDatabase) == nil)
        #expect(try await dora.publicCloudDatabase.record(for: imported.recordID).systemFields.lastModifiedUserRecordID?.recordName == owner)

        // Two logins cannot share a record name; bad entries are refused.
        let clash = stratusError(await caughtError { try await env.container().saveUsers([UserDirectoryEntry(login: "eve", userRecordName: owner)]) })
        #expect(clash?.code == .constraintViolation)
        let bad = stratusError(await caughtError { try await env.container().saveUsers([UserDirectoryEntry(login: "eve", userRecordName: "no-underscore")]) })
        #expect(bad?.code == .invalidArguments)
        let systemRole = stratusError(await caughtError { try await env.container().saveUsers([UserDirectoryEntry(login: "eve", userRecordName: "_eve", roles: [.world])]) })
        #expect(systemRole?.code == .invalidArguments)
        #expect(try await env.container().users().map(\.login) == ["dora"])
        try await env.container().removeUsers(logins: ["dora"])
        #expect(try await env.container(user: "dora").userRecordID().recordName == env.recordName(of: "dora"))
    }
}
