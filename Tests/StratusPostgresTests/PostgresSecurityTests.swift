import Foundation
@_spi(StratusEngine) import Stratus
import StratusPostgres
import StratusTestSupport
import Testing

/// Each Stratus user is a PostgreSQL role: row-level security keeps another user's private
/// records out of reach, through Stratus and with raw SQL as that role alike; the engine needs
/// no superuser.
@Suite("PostgreSQL row-level security", .requiresPostgres, .timeLimit(.minutes(30)))
struct PostgresSecurityTests {
    @Test("a role reaches public rows and its own private rows only, also with raw SQL; acting as another user is refused")
    func privateRowsAreUnreachable() async throws {
        let store = try SecureStore()
        defer { store.dropRoles() }
        let (alice, bob, aliceName, identifier) = (store.alice, store.bob, store.aliceName, store.identifier)
        let asAlice = try store.engine(alice)
        let asBob = try store.engine(bob)
        #expect(try asAlice.currentRole() == alice)

        let aliceContainer = Container(identifier: identifier, engine: asAlice, userName: alice)
        let diary = try await aliceContainer.privateCloudDatabase.save(RecordZone(zoneName: "Diary"))
        try await TestDatabase.save([makeRecord("Entry", "secret", zoneID: diary.zoneID, ["text": .string("dear diary")])], in: aliceContainer.privateCloudDatabase)
        try await TestDatabase.save([makeRecord("Note", "shared-note", ["text": .string("hello all")])], in: aliceContainer.publicCloudDatabase)

        // Through Stratus, bob sees the public note and nothing of alice's private database.
        let bobContainer = Container(identifier: identifier, engine: asBob, userName: bob)
        #expect(try await bobContainer.publicCloudDatabase.record(for: Record.ID(recordName: "shared-note"))["text"] as? String == "hello all")
        #expect(try await bobContainer.privateCloudDatabase.allRecordZones().map(\.zoneID.zoneName) == ["_defaultZone"])

        // Bob claiming to be alice: her rows are not there for him, and his writes as her are refused.
        let impostor = Container(identifier: identifier, engine: asBob, userName: alice)
        let hidden = await caughtError { try await impostor.privateCloudDatabase.record(for: Record.ID(recordName: "secret", zoneID: diary.zoneID)) }
        #expect([.zoneNotFound, .unknownItem].contains(stratusError(hidden)?.code), "\(String(describing: hidden))")
        let forged = await caughtError {
            try await TestDatabase.save([makeRecord("Entry", "forged")], in: impostor.privateCloudDatabase)
        }
        #expect(stratusError(forged) != nil, "a write into another user's private database is refused")

        // Raw SQL as bob: no private row of alice's in any table.
        let raw = try store.raw(bob)
        for table in ["zones", "records", "database_history", "refs", "record_tokens", "tombstones", "asset_contents", "asset_chunks", "asset_refs", "asset_holds"] {
            let count = try raw.query("SELECT count(*) FROM \(table) WHERE owner = $1", [.text(aliceName)])[0].int64(0)
            #expect(count == 0, "\(table) shows bob \(count ?? -1) of alice's rows")
        }
        #expect(try raw.query("SELECT count(*) FROM records")[0].int64(0) == 1, "only the public note")
        #expect(try raw.execute("UPDATE records SET change_tag = 'x' WHERE owner = $1", [.text(aliceName)]) == 0)
        #expect(try raw.execute("DELETE FROM zones WHERE owner = $1", [.text(aliceName)]) == 0)
        let insert = stratusError(await caughtError {
            try raw.execute("INSERT INTO database_history(container, db, owner, change_seq) VALUES ('c', 2, $1, 1)", [.text(aliceName)])
        })
        #expect(insert?.code == .permissionFailure, "row-level security refuses a row owned by another user: \(String(describing: insert))")
        // Alice still has everything.
        let entry = try await aliceContainer.privateCloudDatabase.record(for: Record.ID(recordName: "secret", zoneID: diary.zoneID))
        #expect(entry["text"] as? String == "dear diary")
        #expect(try store.raw(alice).query("SELECT count(*) FROM records WHERE owner = $1", [.text(aliceName)])[0].int64(0) == 1)
        // Bob cannot say he is alice in the directory either.
        let claim = stratusError(await caughtError {
            try raw.execute("INSERT INTO user_directory(container, login, user_record_name, roles) VALUES ($1, $2, $3, '[]')", [.text(identifier), .text(bob + "2"), .text(aliceName)])
        })
        #expect(claim?.code == .permissionFailure, "\(String(describing: claim))")
    }

    @Test("a member's temporary tables, search_path or functions stand in for nothing the policies name: another's private rows stay out of reach")
    func shadowingGivesNothing() async throws {
        let store = try SecureStore()
        defer { store.dropRoles() }
        let bobContainer = Container(identifier: store.identifier, engine: try store.engine(store.bob), userName: store.bob)
        try await TestDatabase.save([makeRecord("Entry", "bob-secret", ["text": .string("mine")])], in: bobContainer.privateCloudDatabase)

        let raw = try store.raw(store.alice)
        // Alice's own user_directory, first on her search_path, says she is bob.
        try raw.executeScript("""
            CREATE TEMP TABLE user_directory (container text, login text, user_record_name text, roles text);
            INSERT INTO user_directory VALUES ('\(store.identifier)', '\(store.alice)', '\(store.bobName)', '[]');
            CREATE TEMP TABLE zones (LIKE public.zones);
            CREATE TEMP TABLE refs (LIKE public.refs);
            CREATE TEMP TABLE record_types (LIKE public.record_types);
            """)
        for path in ["pg_temp, public", "public, pg_temp", "\"$user\", public"] {
            try raw.executeScript("SET search_path = \(path)")
            let seen = try raw.query("SELECT count(*) FROM public.records WHERE owner = $1", [.text(store.bobName)])[0].int64(0)
            #expect(seen == 0, "with search_path \(path) alice sees \(seen ?? -1) of bob's private rows")
            #expect(try raw.execute("UPDATE public.records SET change_tag = 'x' WHERE owner = $1", [.text(store.bobName)]) == 0)
            #expect(try raw.execute("DELETE FROM public.records WHERE owner = $1", [.text(store.bobName)]) == 0)
            #expect(try raw.query("SELECT count(*) FROM public.zones WHERE owner = $1", [.text(store.bobName)])[0].int64(0) == 0)
        }
        #expect(try store.raw(store.bob).query("SELECT count(*) FROM records WHERE owner = $1", [.text(store.bobName)])[0].int64(0) == 1, "bob's record is intact")

        // The policies call no function; the triggers' functions fix their search_path, temporary schema last.
        let admin = try PostgresConnection(url: store.database.url)
        let calls = try admin.query("SELECT count(*) FROM pg_policies WHERE schemaname = 'public' AND (qual LIKE '%stratus_%(%' OR with_check LIKE '%stratus_%(%')")[0].int64(0)
        #expect(calls == 0, "policies call Stratus functions")
        for row in try admin.query("SELECT proname::text, coalesce(array_to_string(proconfig, ','), '') FROM pg_proc WHERE pronamespace = 'public'::regnamespace AND proname LIKE 'stratus%'") {
            let (name, settings) = (try row.text(0) ?? "", try row.text(1) ?? "")
            #expect(settings.hasPrefix("search_path=pg_catalog, pg_temp") && !settings.dropFirst(31).contains("search_path"), "\(name) runs with \(settings)")
            if name == "stratus_analyze" {
                #expect(settings.contains("default_statistics_target=") && settings.contains("vacuum_cost_delay=0"), "a member's settings shape no analysis: \(settings)")
            }
        }
        #expect(try admin.query("SELECT count(*) FROM pg_proc WHERE proname = 'stratus_owns'")[0].int64(0) == 0, "the earlier versions' function is gone")
    }

    @Test("raw SQL as a member writes only its own rows: another's public records, subscriptions, references, tombstones, zones, grants and jobs stay as they are")
    func membersWriteOnlyTheirOwn() async throws {
        let store = try SecureStore(roles: [\.bob: ["moderator"]])
        defer { store.dropRoles() }
        let (alice, bob, aliceName, bobName) = (store.alice, store.bob, store.aliceName, store.bobName)
        // Board: every signed-in user may change any board; Notice: moderators write; Note: CloudKit's defaults.
        let admin = Container(identifier: store.identifier, engine: store.owner, userName: "admin")
        _ = try await admin.saveSchema(RecordTypeSchema(recordType: "Board", grants: [.world: .read, .authenticated: [.create, .write]]),
                                       RecordTypeSchema(recordType: "Notice", grants: [.world: .read, "moderator": [.create, .write], .authenticated: .create]),
                                       RecordTypeSchema(recordType: "Sealed", grants: [:]))
        let aliceDatabase = Container(identifier: store.identifier, engine: try store.engine(alice), userName: alice).publicCloudDatabase
        let bobDatabase = Container(identifier: store.identifier, engine: try store.engine(bob), userName: bob).publicCloudDatabase
        try await TestDatabase.save([
            makeRecord("Note", "alice-note", ["text": .string("hers")]),
            makeRecord("Board", "alice-board", ["text": .string("anyone's")]),
            makeRecord("Notice", "alice-notice", ["text": .string("moderated")]),
            makeRecord("Note", "alice-target", ["text": .string("a comment's target")]),
        ], in: aliceDatabase)
        try await TestDatabase.save([makeRecord("Comment", "bob-comment", ["on": .reference(reference("alice-target", .deleteSelf))])], in: bobDatabase)
        let subscription = QuerySubscription(recordType: "Note", predicate: try QueryPredicate(format: "TRUEPREDICATE"), subscriptionID: "alice-notes", options: [.firesOnRecordCreation])
        subscription.notificationInfo = NotificationInfo()
        _ = try await aliceDatabase.save(subscription)
        try await TestDatabase.save([makeRecord("Entry", "alice-private")], in: Container(identifier: store.identifier, engine: try store.engine(alice), userName: alice).privateCloudDatabase)
        try await TestDatabase.save([makeRecord("Entry", "bob-private")], in: Container(identifier: store.identifier, engine: try store.engine(bob), userName: bob).privateCloudDatabase)
        let ownerRaw = try PostgresConnection(url: store.database.url)
        try ownerRaw.execute("INSERT INTO job_progress(job, position, updated_at) VALUES ('admin-job', 5, 0)")

        let raw = try store.raw(bob)
        func refused(_ sql: String, _ parameters: [PostgresValue] = [], sourceLocation: SourceLocation = #_sourceLocation) {
            do {
                let changed = try raw.execute(sql, parameters)
                #expect(changed == 0, "bob changed \(changed) rows: \(sql)", sourceLocation: sourceLocation)
            } catch {
                #expect(stratusError(error)?.code == .permissionFailure, "\(sql): \(error)", sourceLocation: sourceLocation)
            }
        }
        // Another's public record of a type that does not let him write it.
        refused("UPDATE records SET fields = '{\"text\":[\"S\",\"bob was here\"]}' WHERE record_name = 'alice-note'")
        refused("DELETE FROM records WHERE record_name = 'alice-note'")
        refused("UPDATE records SET created_by = $1 WHERE record_name = 'alice-note'", [.text(bobName)])
        // A new public record he says alice created.
        refused("""
            INSERT INTO records(zone_id, record_name, owner, record_type, created_at, created_by, modified_at, modified_by, change_tag, change_seq, fields)
            SELECT zone_id, 'forged', '', 'Note', 0, $1, 0, $1, 't', 999, '{}' FROM zones WHERE owner = '' LIMIT 1
            """, [.text(aliceName)])
        // His own public record retyped into a type that grants him no CREATE (another's Users
        // record above all), renamed, or made another's; anyone's Board made hers or his.
        refused("UPDATE records SET record_type = 'Users' WHERE record_name = 'bob-comment'")
        refused("UPDATE records SET record_name = $1, record_type = 'Users' WHERE record_name = 'bob-comment'", [.text(aliceName)])
        refused("UPDATE records SET record_name = 'renamed' WHERE record_name = 'bob-comment'")
        refused("UPDATE records SET created_by = $1 WHERE record_name = 'bob-comment'", [.text(aliceName)])
        refused("UPDATE records SET created_by = $1 WHERE record_name = 'alice-board'", [.text(bobName)])
        // Another's subscription; the public zone, its keys and counters; a zone tombstone in public.
        refused("DELETE FROM subscriptions WHERE subscriber = $1", [.text(aliceName)])
        refused("UPDATE subscriptions SET definition = '{}' WHERE subscriber = $1", [.text(aliceName)])
        refused("DELETE FROM zones WHERE owner = ''")
        refused("UPDATE zones SET zone_name = 'gone' WHERE owner = ''")
        refused("UPDATE zones SET change_seq = 0 WHERE owner = ''")
        refused("UPDATE database_history SET change_seq = 0 WHERE owner = ''")
        // Counters leapt to their end, and a notification put ahead of its feed's counter: each
        // would stop every other writer (of the public database, of alice's feed).
        refused("UPDATE zones SET change_seq = 9223372036854775807 WHERE owner = ''")
        refused("UPDATE zones SET history_start = history_start + 3000000000 WHERE owner = ''")
        refused("UPDATE database_history SET change_seq = 9223372036854775807 WHERE owner = ''")
        refused("""
            INSERT INTO notifications(container, subscriber, seq, created_at, payload)
            SELECT $1, $2, coalesce((SELECT f.seq FROM notification_feeds f WHERE f.container = $1 AND f.subscriber = $2), 0) + 1, 0, '{"evil":2}'
            """, [.text(store.identifier), .text(aliceName)])
        refused("INSERT INTO notification_feeds(container, subscriber, seq) VALUES ($1, 'someone-without-a-feed', 9223372036854775807)", [.text(store.identifier)])
        refused("INSERT INTO zone_tombstones(container, db, owner, zone_name, zone_owner, db_change_seq, deleted_at) VALUES ($1, 1, '', '_defaultZone', '', 1, 0)", [.text(store.identifier)])
        // References and words that would tie alice's records to his, a tombstone for her living record.
        refused("INSERT INTO refs(zone_id, target_name, source_name, owner) SELECT zone_id, 'bob-comment', 'alice-note', '' FROM records WHERE record_name = 'alice-note'")
        refused("INSERT INTO record_tokens(zone_id, token, record_name, owner) SELECT zone_id, 'spam', 'alice-note', '' FROM records WHERE record_name = 'alice-note'")
        refused("INSERT INTO tombstones(zone_id, record_name, owner, record_type, change_seq, deleted_at) SELECT zone_id, 'alice-note', '', 'Note', 1, 0 FROM records WHERE record_name = 'alice-note'")
        // Rows of his own put into alice's private zone, or moved out of his zone into the public database.
        let aliceZone = try #require(try ownerRaw.query("SELECT zone_id FROM zones WHERE owner = $1 LIMIT 1", [.text(aliceName)]).first?.int64(0))
        refused("""
            INSERT INTO records(zone_id, record_name, owner, record_type, created_at, created_by, modified_at, modified_by, change_tag, change_seq, fields)
            VALUES ($1, 'planted', $2, 'Note', 0, $2, 0, $2, 't', 999, '{}')
            """, [.int64(aliceZone), .text(bobName)])
        refused("UPDATE records SET zone_id = $1 WHERE owner = $2", [.int64(aliceZone), .text(bobName)])
        refused("UPDATE records SET owner = '' WHERE owner = $1", [.text(bobName)])
        refused("INSERT INTO tombstones(zone_id, record_name, owner, record_type, change_seq, deleted_at) VALUES ($1, 'planted', $2, 'Note', 1, 0)", [.int64(aliceZone), .text(bobName)])
        // Grants of a development schema, and the administrator's job.
        refused("UPDATE record_types SET schema = jsonb_set(schema::jsonb, '{grants}', '{\"_icloud\": 7}')::text WHERE record_type = 'Notice'")
        refused("UPDATE job_progress SET position = 99 WHERE job = 'admin-job'")
        // A field document or a type's schema that readers cannot decode, and a stored field
        // removed, retyped or indexed: every reader of the type would fail, or find records of
        // a type their fields do not have.
        let insertBoard = """
            INSERT INTO records(zone_id, record_name, owner, record_type, created_at, created_by, modified_at, modified_by, change_tag, change_seq, fields)
            SELECT zone_id, $2, '', 'Board', 0, $1, 0, $1, 't', 999, $3::jsonb FROM zones WHERE owner = '' AND db = 1 LIMIT 1
            """
        refused(insertBoard, [.text(bobName), .text("poison"), .text("null")])
        // A type that grants nothing (a schema file's type without GRANT lines, stored as `{}`): no member creates one.
        refused(insertBoard.replacingOccurrences(of: "'Board'", with: "'Sealed'"), [.text(bobName), .text("sealed"), .text("{}")])
        refused("UPDATE records SET fields = '[1]' WHERE record_name = 'alice-board'")
        // Readers take the exact text when a record has one.
        refused("UPDATE records SET exact_fields = '[1]' WHERE record_name = 'alice-board'")
        refused("UPDATE records SET exact_fields = 'null' WHERE record_name = 'alice-board'")
        let developmentNote = "record_type = 'Note' AND strpos(container, chr(31)) = 0"
        refused("UPDATE record_types SET schema = jsonb_set(schema::jsonb, '{fields}', '[]')::text WHERE \(developmentNote)")
        refused("UPDATE record_types SET schema = jsonb_set(schema::jsonb, '{fields,0,type}', '\"INT64\"')::text WHERE \(developmentNote)")
        refused("UPDATE record_types SET schema = jsonb_set(schema::jsonb, '{fields,0,indexes}', '1')::text WHERE \(developmentNote)")
        refused("UPDATE record_types SET schema = jsonb_set(schema::jsonb, '{junk}', '1')::text WHERE \(developmentNote)")
        refused("UPDATE record_types SET schema = '{\"recordType\":\"Note\",\"fields\":[{\"name\":7}]}' WHERE \(developmentNote)")
        // Past Stratus's limit of fields per type, whose schema would export to a file that does not read back.
        refused("""
            UPDATE record_types SET schema = jsonb_set(schema::jsonb, '{fields}', (schema::jsonb -> 'fields')
                || (SELECT jsonb_agg(jsonb_build_object('name', 'f' || i, 'type', 'STRING', 'indexes', 0)) FROM generate_series(1, \(ContainerSchema.Limits().fieldsPerRecordType)) i))::text
            WHERE \(developmentNote)
            """)
        // A repeated key: the database reads its last value, Stratus's reader would read the first.
        let stored = try #require(try ownerRaw.query("SELECT schema FROM record_types WHERE \(developmentNote)").first?.text(0))
        let doubled = "{\"fields\":[{\"name\":\"text\",\"type\":\"INT64\",\"indexes\":0}],\"grants\":{\"_world\":7}," + stored.dropFirst()
        _ = try? raw.execute("UPDATE record_types SET schema = $1 WHERE \(developmentNote)", [.text(doubled)])
        let afterDoubled = try await Container(identifier: store.identifier, engine: store.owner, userName: "admin").schema().recordType("Note")
        #expect(afterDoubled?.field("text")?.type == .string && afterDoubled?.grants[.world]?.contains(.write) != true, "\(String(describing: afterDoubled))")
        // What development does itself stays possible: a record of an object, a new field without indexes.
        #expect(try raw.execute(insertBoard, [.text(bobName), .text("bob-board"), .text("{}")]) == 1)
        #expect(try raw.execute("UPDATE record_types SET schema = jsonb_insert(schema::jsonb, '{fields,0}', '{\"name\":\"extra\",\"type\":\"STRING\",\"indexes\":0}')::text WHERE \(developmentNote)") == 1)
        #expect(try await Container(identifier: store.identifier, engine: store.owner, userName: "admin").schema().recordType("Note")?.field("text")?.type == .string)
        #expect(try raw.query("SELECT count(*) FROM job_progress")[0].int64(0) == 0)

        let note = try await aliceDatabase.record(for: Record.ID(recordName: "alice-note"))
        #expect(note["text"] as? String == "hers" && note.systemFields.creatorUserRecordID?.recordName == aliceName)
        #expect(try ownerRaw.query("SELECT count(*) FROM subscriptions WHERE subscriber = $1", [.text(aliceName)])[0].int64(0) == 1)
        #expect(try ownerRaw.query("SELECT zone_name FROM zones WHERE owner = ''")[0].text(0) == "_defaultZone")
        #expect(try ownerRaw.query("SELECT position FROM job_progress WHERE job = 'admin-job'")[0].int64(0) == 5)
        #expect(try ownerRaw.query("SELECT count(*) FROM records WHERE zone_id = $1", [.int64(aliceZone)])[0].int64(0) == 1, "only alice's own record in her zone")
        #expect(try ownerRaw.query("SELECT owner FROM records WHERE record_name = 'bob-private'")[0].text(0) == bobName)

        // What the grants let him write, he writes, through Stratus and with raw SQL alike.
        #expect(try raw.execute("UPDATE records SET change_tag = 'by-bob' WHERE record_name = 'alice-board'") == 1, "_icloud may write any board")
        #expect(try raw.execute("DELETE FROM records WHERE record_name = 'alice-notice'") == 1, "bob is a moderator")
        let board = try await bobDatabase.record(for: Record.ID(recordName: "alice-board"))
        board["text"] = "bob's now"
        _ = try await bobDatabase.save(board)
        #expect(try await aliceDatabase.record(for: Record.ID(recordName: "alice-board"))["text"] as? String == "bob's now")
        // His own public records are his to change.
        let comment = try await bobDatabase.record(for: Record.ID(recordName: "bob-comment"))
        #expect(try raw.execute("UPDATE records SET change_tag = 'x' WHERE record_name = 'bob-comment'") == 1)
        _ = comment
        // Alice deletes her note: bob's comment, which chose to die with it, goes too (a cascade
        // crosses creators, as in CloudKit), though alice may not delete it herself.
        let aliceRaw = try store.raw(alice)
        #expect(try aliceRaw.execute("DELETE FROM records WHERE record_name = 'bob-comment'") == 0)
        _ = try await aliceDatabase.modifyRecords(saving: [], deleting: [Record.ID(recordName: "alice-target")], atomically: false)
        #expect(try ownerRaw.query("SELECT count(*) FROM records WHERE record_name IN ('alice-target', 'bob-comment')")[0].int64(0) == 0)
        #expect(try ownerRaw.query("SELECT count(*) FROM tombstones WHERE record_name IN ('alice-target', 'bob-comment')")[0].int64(0) == 2)

        // After all that, his writes and hers still fire alice's subscription and take places.
        try await TestDatabase.save([makeRecord("Note", "bob-note-after")], in: bobDatabase)
        try await TestDatabase.save([makeRecord("Note", "alice-note-after")], in: aliceDatabase)
        #expect(try ownerRaw.query("SELECT count(*) FROM notifications WHERE subscriber = $1 AND payload LIKE '%-note-after%'", [.text(aliceName)])[0].int64(0) == 2)
        #expect(try ownerRaw.query("SELECT count(*) FROM notifications WHERE payload LIKE '%evil%'")[0].int64(0) == 0)
        // Alice marks her notifications read, but moves none past her feed's counter.
        #expect(try aliceRaw.execute("UPDATE notifications SET read = true WHERE subscriber = $1", [.text(aliceName)]) >= 2)
        #expect(throws: (any Error).self) { try aliceRaw.execute("UPDATE notifications SET seq = seq + 1000 WHERE subscriber = $1", [.text(aliceName)]) }
        // A database whose history went far (the tables' owner stands in for billions of
        // transactions) takes a member's writes: a zone's place in it is copied, not counted.
        try ownerRaw.execute("UPDATE database_history SET change_seq = change_seq + 3000000000 WHERE owner = '' AND db = 1")
        try await TestDatabase.save([makeRecord("Note", "after-a-long-history")], in: aliceDatabase)
        // A zone's place in that history, moved ahead by a member, is set from its source again.
        _ = try raw.execute("UPDATE zones SET db_change_seq = db_change_seq + 10 WHERE owner = '' AND db = 1")
        try await TestDatabase.save([makeRecord("Note", "after-a-moved-place")], in: aliceDatabase)
        try await TestDatabase.save([makeRecord("Note", "bob-after-a-moved-place")], in: bobDatabase)
        // A counter the tables' owner put at its end stops that zone's writes with a message, not a crash.
        let publicZone = "owner = '' AND db = 1 AND zone_name = '_defaultZone'"
        let counted = try #require(try ownerRaw.query("SELECT change_seq FROM zones WHERE \(publicZone)").first?.int64(0))
        try ownerRaw.execute("UPDATE zones SET change_seq = 9223372036854775800 WHERE \(publicZone)")
        do {
            try await TestDatabase.save([makeRecord("Note", "at-the-end")], in: aliceDatabase)
            Issue.record("a write counted past the zone's last change")
        } catch {
            #expect("\(error)".contains("zones.change_seq"), "\(error)")
        }
        try ownerRaw.execute("UPDATE zones SET change_seq = $1 WHERE \(publicZone)", [.int64(counted)])
        try await TestDatabase.save([makeRecord("Note", "after-the-repair")], in: aliceDatabase)

        // A member's schema that drops a type is refused saying why, and drops nothing.
        let bobContainer = Container(identifier: store.identifier, engine: try store.engine(bob), userName: bob)
        let current = try await bobContainer.schema()
        let withoutBoard = ContainerSchema(roles: current.roles, recordTypes: current.recordTypes.filter { $0.recordType != "Board" })
        let refusal = stratusError(await caughtError { _ = try await bobContainer.replaceSchema(withoutBoard) })
        #expect(refusal?.code == .permissionFailure && refusal?.message.contains("may not remove record type 'Board'") == true, "\(String(describing: refusal))")
        #expect(try await bobContainer.schema().recordType("Board") != nil)
    }

    @Test("a member who changes another's public record drops what its old version named: a .deleteSelf reference no longer cascades, old words no longer match, old asset content is collected")
    func changingAnothersRecordReplacesItsDerivedRows() async throws {
        let store = try SecureStore()
        defer { store.dropRoles() }
        let files = try TemporaryStore(prefix: "stratus-rls-replace")
        defer { files.remove() }
        let admin = Container(identifier: store.identifier, engine: store.owner, userName: "admin")
        var board = RecordTypeSchema(recordType: "Board", grants: [.world: .read, .authenticated: [.create, .write]])
        board.addField("text", type: .string, indexes: [.searchable])
        board.addField("target", type: .reference)
        board.addField("image", type: .asset)
        _ = try await admin.saveSchema(board)
        let alice = Container(identifier: store.identifier, engine: try store.engine(store.alice), userName: store.alice).publicCloudDatabase
        let bob = Container(identifier: store.identifier, engine: try store.engine(store.bob), userName: store.bob).publicCloudDatabase

        let target = try await alice.save(makeRecord("Board", "target", ["text": .string("pinned")]))
        let first = Record(recordType: "Board", recordID: Record.ID(recordName: "board"))
        first["text"] = "foo"
        first["target"] = Record.Reference(recordID: target.recordID, action: .deleteSelf)
        first["image"] = Asset(fileURL: try files.writeFile("old.bin", Data(repeating: 1, count: 2_000)))
        _ = try await alice.save(first)

        // Bob's version names no target, other words and another asset.
        let changed = try await bob.record(for: first.recordID)
        changed["text"] = "bar"
        changed["target"] = nil
        changed["image"] = Asset(fileURL: try files.writeFile("new.bin", Data(repeating: 2, count: 2_000)))
        _ = try await bob.save(changed)

        let query = Query(recordType: "Board", predicate: try QueryPredicate(format: "self CONTAINS 'foo'"))
        #expect(try await alice.records(matching: query).matchResults.isEmpty, "the old version's words are gone")
        _ = try await alice.deleteRecord(withID: target.recordID)
        #expect(try await TestDatabase.exists("board", in: alice), "the reference bob removed no longer cascades")
        #expect(try await alice.assetContentInventory().count == 1, "only the new content is named")
    }

    @Test("a member who changes others' public records of a type with words, in a zone without references, replaces their words, also for many records in one request and a record changed then deleted in one import")
    func changingAnothersWordsInAZoneWithoutReferences() async throws {
        let store = try SecureStore()
        defer { store.dropRoles() }
        let admin = Container(identifier: store.identifier, engine: store.owner, userName: "admin")
        var note = RecordTypeSchema(recordType: "Note", grants: [.world: .read, .authenticated: [.create, .write]])
        note.addField("text", type: .string, indexes: [.searchable])
        _ = try await admin.saveSchema(note)
        let alice = Container(identifier: store.identifier, engine: try store.engine(store.alice), userName: store.alice).publicCloudDatabase
        let bob = Container(identifier: store.identifier, engine: try store.engine(store.bob), userName: store.bob).publicCloudDatabase
        let names = (0..<60).map { "note-\($0)" }
        _ = try await alice.modifyRecords(saving: names.map { makeRecord("Note", $0, ["text": .string("apple \($0)")]) }, deleting: [])

        let stored = try await bob.records(for: names.map { Record.ID(recordName: $0) })
        let changed = try names.map { name in
            let record = try #require(try stored[Record.ID(recordName: name)]?.get())
            record["text"] = "pear \(name)"
            return record
        }
        _ = try await bob.modifyRecords(saving: changed, deleting: [])
        func found(_ word: String) async throws -> Int {
            try await alice.countRecords(matching: Query(recordType: "Note", predicate: try QueryPredicate(format: "self CONTAINS %@", argumentArray: [word])))
        }
        #expect(try await found("apple") == 0, "the old versions' words are gone")
        #expect(try await found("pear") == names.count)

        // In one import (one transaction), Bob changes a record and then deletes it.
        let again = makeRecord("Note", "note-0", ["text": .string("quince")])
        let items: [RecordSourceItem] = [.record(again, line: 1), .deletion(Record.ID(recordName: "note-0"), recordType: "Note", line: 2)]
        final class Items: RecordSource {
            var items: [RecordSourceItem]
            init(_ items: [RecordSourceItem]) { self.items = items }
            func nextItem() throws -> RecordSourceItem? { items.isEmpty ? nil : items.removeFirst() }
        }
        final class Rejects: RecordRejectSink {
            var all: [RecordRejection] = []
            func reject(_ rejection: RecordRejection) throws { all.append(rejection) }
        }
        let rejects = Rejects()
        let summary = try await RecordImporter(database: bob).run(from: Items(items), rejects: rejects)
        #expect(summary.failed == 0 && rejects.all.isEmpty, "\(summary) \(rejects.all)")
        #expect(try await found("quince") == 0)
        #expect(try await found("pear") == names.count - 1)
        let ownerRaw = try PostgresConnection(url: store.database.url)
        #expect(try ownerRaw.query("SELECT count(*) FROM record_tokens WHERE record_name = 'note-0'")[0].int64(0) == 0, "no words of a deleted record")
        #expect(try ownerRaw.query("SELECT count(*) FROM tombstones WHERE record_name = 'note-0'")[0].int64(0) == 1)
    }

    @Test("a member cannot add chunks to stored asset content, another's or its own; content whose chunks were changed by raw SQL is not handed out as the asset")
    func storedAssetContentCannotGrow() async throws {
        let store = try SecureStore()
        defer { store.dropRoles() }
        let files = try TemporaryStore(prefix: "stratus-rls-chunks")
        defer { files.remove() }
        let bytes = Data(repeating: 9, count: 5_000)
        let alice = Container(identifier: store.identifier, engine: try store.engine(store.alice), userName: store.alice)
        let photo = Record(recordType: "Photo", recordID: Record.ID(recordName: "alice-photo"))
        photo["image"] = Asset(fileURL: try files.writeFile("photo.bin", bytes))
        _ = try await alice.publicCloudDatabase.save(photo)
        let content = SHA256Hasher.digest(Array(bytes)).hexadecimal

        for member in [store.bob, store.alice] {
            let raw = try store.raw(member)
            for chunk in [1, 99] {
                #expect(throws: (any Error).self, "\(member) appends chunk \(chunk)") {
                    try raw.execute("INSERT INTO asset_chunks(owner, content_id, chunk, data) VALUES ('', $1, $2, '\\x41414141')", [.text(content), .int64(Int64(chunk))])
                }
            }
        }
        // Damage only the tables' owner can do (or a restore gone wrong): a reader on a machine
        // without the content cached gets an error, not 5,004 bytes under the asset's name.
        _ = try PostgresConnection(url: store.database.url).execute("INSERT INTO asset_chunks(owner, content_id, chunk, data) VALUES ('', $1, 1, '\\x41414141')", [.text(content)])
        let cache = try TemporaryStore(prefix: "stratus-rls-cache")
        defer { cache.remove() }
        let reader = Container(identifier: store.identifier, engine: try PostgresEngine(url: try store.url(store.bob), assetCacheDirectory: cache.url("cache")), userName: store.bob)
        do {
            let fetched = try await reader.publicCloudDatabase.record(for: photo.recordID)
            let url = try await reader.publicCloudDatabase.assetContentURL(for: try #require(fetched["image"] as? Asset))
            Issue.record("the damaged content was handed out: \(FileManager.default.contents(atPath: url.path)?.count ?? -1) bytes")
        } catch let error as StratusError {
            #expect(error.code == .badDatabase && error.message.contains(content) && error.message.contains("damaged"), "\(error)")
        }
    }

    @Test("members work as usual through Stratus: shared asset content, cascades, subscriptions firing on another's feed, change feeds, compaction, zones")
    func membersWorkAsUsual() async throws {
        let store = try SecureStore()
        defer { store.dropRoles() }
        let files = try TemporaryStore(prefix: "stratus-rls-assets")
        defer { files.remove() }
        let alice = Container(identifier: store.identifier, engine: try store.engine(store.alice), userName: store.alice)
        let bob = Container(identifier: store.identifier, engine: try store.engine(store.bob), userName: store.bob)
        let photo = try files.writeFile("photo.jpg", Data(repeating: 7, count: 300_000))
        let subscription = QuerySubscription(recordType: "Photo", predicate: try QueryPredicate(format: "TRUEPREDICATE"), subscriptionID: "photos", options: [.firesOnRecordCreation])
        subscription.notificationInfo = NotificationInfo()
        _ = try await alice.publicCloudDatabase.save(subscription)
        let first = try await alice.publicCloudDatabase.recordZoneChanges(inZoneWith: .default, since: nil)

        // Bob and alice store the same bytes: one content, shared; each deletes their own record.
        let bobs = Record(recordType: "Photo", recordID: Record.ID(recordName: "bob-photo"))
        bobs["image"] = Asset(fileURL: photo)
        bobs["caption"] = "mine"
        _ = try await bob.publicCloudDatabase.save(bobs)
        let alices = Record(recordType: "Photo", recordID: Record.ID(recordName: "alice-photo"))
        alices["image"] = Asset(fileURL: photo)
        _ = try await alice.publicCloudDatabase.save(alices)
        #expect(try await bob.publicCloudDatabase.assetContentInventory().count == 1)
        let fetched = try await bob.publicCloudDatabase.record(for: bobs.recordID)
        fetched["caption"] = "still mine"
        _ = try await bob.publicCloudDatabase.save(fetched)
        _ = try await bob.publicCloudDatabase.deleteRecord(withID: bobs.recordID)
        let url = try await alice.publicCloudDatabase.assetContentURL(for: try #require(try await alice.publicCloudDatabase.record(for: alices.recordID)["image"] as? Asset))
        #expect(FileManager.default.contents(atPath: url.path)?.count == 300_000)
        _ = try await alice.publicCloudDatabase.deleteRecord(withID: alices.recordID)
        #expect(try await alice.publicCloudDatabase.assetContentInventory().count == 0, "the last writer to let go collects the content")

        // Bob's photo fired alice's subscription: the notification is in her feed, not his.
        let aliceFeed = try await NotificationFeed(database: alice.privateCloudDatabase).nextBatch(after: nil, limit: 100)
        let notified = aliceFeed.notifications.compactMap { ($0 as? QueryNotification)?.recordID?.recordName }
        #expect(notified.contains("bob-photo"), "\(notified)")
        #expect(try await NotificationFeed(database: bob.privateCloudDatabase).nextBatch(after: nil, limit: 100).notifications.isEmpty)
        // Alice's change feed sees every change, deletions included; bob compacts the public history.
        let changes = try await alice.publicCloudDatabase.recordZoneChanges(inZoneWith: .default, since: first.changeToken)
        #expect(Set(changes.deletions.map(\.recordID.recordName)) == ["bob-photo", "alice-photo"])
        let compaction = try await bob.publicCloudDatabase.compactChangeHistory(retention: 0)
        #expect(compaction.recordTombstonesRemoved == 2)
        // Each member's user record comes with the first fetch, takes profile fields from its
        // user, is read by the other, and cannot be written by the other.
        let aliceID = try await alice.userRecordID()
        let aliceRecord = try await alice.publicCloudDatabase.record(for: aliceID)
        #expect(aliceRecord.recordType == RecordTypeUserRecord)
        aliceRecord["nickname"] = "al"
        _ = try await alice.publicCloudDatabase.save(aliceRecord)
        let seenByBob = try await bob.publicCloudDatabase.record(for: aliceID)
        #expect(seenByBob["nickname"] as? String == "al")
        seenByBob["nickname"] = "bobbed"
        let refused = stratusError(await caughtError { _ = try await bob.publicCloudDatabase.save(seenByBob) })
        #expect(refused?.code == .permissionFailure, "\(String(describing: refused))")
        let bobsOwn = try await bob.publicCloudDatabase.record(for: try await bob.userRecordID())
        #expect(bobsOwn.systemFields.creatorUserRecordID?.recordName == (try await bob.userRecordID()).recordName)

        // Private zones come and go.
        let zone = try await bob.privateCloudDatabase.save(RecordZone(zoneName: "Work"))
        try await TestDatabase.save([makeRecord("Task", "t1", zoneID: zone.zoneID)], in: bob.privateCloudDatabase)
        _ = try await bob.privateCloudDatabase.modifyRecordZones(saving: [], deleting: [zone.zoneID])
        #expect(try await bob.privateCloudDatabase.allRecordZones().map(\.zoneID.zoneName) == ["_defaultZone"])
    }

    @Test("running row-security again is harmless; a missing group, a role that does not own the tables and a group that may create in the schema are refused plainly")
    func rowSecurityPreconditions() async throws {
        let store = try SecureStore()
        defer { store.dropRoles() }
        try store.owner.enableRowLevelSecurity(group: store.group)
        let missing = stratusError(await caughtError { try store.owner.enableRowLevelSecurity(group: "no_such_group_\(store.suffix)") })
        #expect(missing?.code == .invalidArguments && missing?.message.contains("there is no PostgreSQL role") == true, "\(String(describing: missing))")
        let notOwner = stratusError(await caughtError { try store.engine(store.alice).enableRowLevelSecurity(group: store.group) })
        #expect(notOwner?.code == .permissionFailure && notOwner?.message.contains("owns the store's tables") == true, "\(String(describing: notOwner))")
        let admin = try PostgresConnection(url: store.database.url)
        try admin.executeScript("GRANT CREATE ON SCHEMA public TO \(store.group)")
        let creates = stratusError(await caughtError { try store.owner.enableRowLevelSecurity(group: store.group) })
        #expect(creates?.code == .permissionFailure && creates?.message.contains("REVOKE CREATE ON SCHEMA") == true, "\(String(describing: creates))")
        try admin.executeScript("REVOKE CREATE ON SCHEMA public FROM \(store.group)")
        // A member holding the right itself is found too.
        try admin.executeScript("GRANT CREATE ON SCHEMA public TO \(store.alice)")
        let memberCreates = stratusError(await caughtError { try store.owner.enableRowLevelSecurity(group: store.group) })
        #expect(memberCreates?.code == .permissionFailure && memberCreates?.message.contains("member \(store.alice) of \(store.group)") == true, "\(String(describing: memberCreates))")
        try admin.executeScript("REVOKE CREATE ON SCHEMA public FROM \(store.alice)")
        try store.owner.enableRowLevelSecurity(group: store.group)
    }

    @Test("a store whose row-level security an earlier version set up gets this version's when the owner opens it; a member cannot upgrade it")
    func upgradeReappliesRowSecurity() async throws {
        let store = try SecureStore()
        defer { store.dropRoles() }
        let admin = try PostgresConnection(url: store.database.url)
        // Version 5's policies: one per table, calling stratus_owns, which read the directory unqualified.
        var old = """
            DROP TRIGGER IF EXISTS stratus_counters_only ON zones;
            CREATE OR REPLACE FUNCTION stratus_owns(owner text) RETURNS boolean LANGUAGE sql STABLE AS
                $$ SELECT owner = '' OR EXISTS (SELECT 1 FROM user_directory d WHERE d.login = current_user::text AND d.user_record_name = owner) $$;
            UPDATE meta SET value = '5' WHERE key = 'version';

            """
        for table in ["zones", "records", "subscriptions"] {
            old += "DROP POLICY IF EXISTS stratus_read ON \(table); DROP POLICY IF EXISTS stratus_insert ON \(table); DROP POLICY IF EXISTS stratus_update ON \(table); DROP POLICY IF EXISTS stratus_delete ON \(table);\n"
            old += "CREATE POLICY stratus_owner ON \(table) TO \(store.group) USING (stratus_owns(owner)) WITH CHECK (stratus_owns(owner));\n"
        }
        try admin.executeScript(old)

        let member = stratusError(await caughtError { try PostgresEngine(url: store.url(store.alice)) })
        #expect(member?.code == .permissionFailure && member?.message.contains("version 5") == true && member?.message.contains("opens the store once") == true,
                "\(String(describing: member))")
        _ = try PostgresEngine(url: store.database.url)
        #expect(try admin.query("SELECT value FROM meta WHERE key = 'version'")[0].text(0) == "21")
        #expect(try admin.query("SELECT count(*) FROM pg_policies WHERE policyname = 'stratus_owner'")[0].int64(0) == 0)
        #expect(try admin.query("SELECT count(*) FROM pg_proc WHERE proname = 'stratus_owns'")[0].int64(0) == 0)
        #expect(try admin.query("SELECT count(*) FROM pg_policies WHERE tablename = 'records' AND policyname = 'stratus_delete' AND $1 = ANY(roles)", [.text(store.group)])[0].int64(0) == 1)
        #expect(try admin.query("SELECT count(*) FROM pg_trigger WHERE tgname = 'stratus_counters_only' AND tgrelid = 'zones'::regclass")[0].int64(0) == 1)
        _ = try PostgresEngine(url: store.url(store.alice))
    }
}

extension PostgresSecurityTests {
    @Test("user discovery: a role reads the addresses and names of discoverable users and its own, with raw SQL too, never an undiscoverable user's; it records only its own discoverability")
    func discoveryHidesUndiscoverableUsers() async throws {
        let store = try SecureStore()
        defer { store.dropRoles() }
        let (alice, bob, carol, identifier) = (store.alice, store.bob, store.carol, store.identifier)
        try store.owner.modifyUserDirectory(containerIdentifier: identifier, saving: [
            UserDirectoryEntry(login: alice, userRecordName: store.aliceName, emailAddresses: ["alice@example.com"],
                               nameComponents: PersonNameComponents(givenName: "Alice"), isDiscoverable: true),
            UserDirectoryEntry(login: bob, userRecordName: store.bobName, emailAddresses: ["bob@example.com"], phoneNumbers: ["+15550100100"],
                               nameComponents: PersonNameComponents(givenName: "Bob"), isDiscoverable: false),
        ], deletingLogins: [])

        // Raw SQL as carol: alice's address and name, nothing of bob's.
        let raw = try store.raw(carol)
        #expect(try raw.query("SELECT address FROM user_addresses ORDER BY address").map { try $0.text(0) } == ["alice@example.com"])
        #expect(try raw.query("SELECT login FROM user_identities ORDER BY login").map { try $0.text(0) } == [alice, carol], "alice's, discoverable, and carol's own")
        #expect(try raw.query("SELECT count(*) FROM user_addresses WHERE login = $1", [.text(bob)])[0].int64(0) == 0)
        let carolContainer = Container(identifier: identifier, engine: try store.engine(carol), userName: carol)
        #expect(try await carolContainer.userIdentity(forEmailAddress: "alice@example.com")?.nameComponents?.givenName == "Alice")
        #expect(try await carolContainer.userIdentity(forEmailAddress: "bob@example.com") == nil)
        #expect(try await carolContainer.userIdentity(forUserRecordID: Record.ID(recordName: store.bobName)) == nil)

        // Carol may not make bob discoverable, nor change her own entry beyond her consent.
        #expect(try raw.execute("UPDATE user_identities SET discoverable = true WHERE login = $1", [.text(bob)]) == 0)
        for (sql, parameters) in [("INSERT INTO user_identities(container, login, discoverable) VALUES ($1, $2, true)", [PostgresValue.text(identifier), .text(bob)]),
                                  ("INSERT INTO user_identities(container, login, name_components) VALUES ($1, $2, '{}')", [.text(identifier), .text(carol)]),
                                  ("INSERT INTO user_addresses(container, address_key, login, position, address) VALUES ($1, 'email:x@example.com', $2, 0, 'x@example.com')", [.text(identifier), .text(carol)])] {
            let refused = stratusError(await caughtError { try raw.execute(sql, parameters) })
            #expect(refused?.code == .permissionFailure, "\(sql): \(String(describing: refused))")
        }

        // Bob consents through Stratus as his own role; carol then finds him, also with raw SQL.
        let bobContainer = Container(identifier: identifier, engine: try store.engine(bob), userName: bob)
        #expect(try await bobContainer.requestApplicationPermission(.userDiscoverability) == .granted)
        #expect(try await carolContainer.userIdentity(forPhoneNumber: "+1 555 010 0100")?.userRecordID?.recordName == store.bobName)
        #expect(try raw.query("SELECT count(*) FROM user_addresses WHERE login = $1", [.text(bob)])[0].int64(0) == 2)
        try await bobContainer.revokeApplicationPermission(.userDiscoverability)
        #expect(try raw.query("SELECT count(*) FROM user_addresses WHERE login = $1", [.text(bob)])[0].int64(0) == 0)
        #expect(try store.owner.fetchUserDirectory(containerIdentifier: identifier, logins: [bob]).first?.emailAddresses == ["bob@example.com"], "consent keeps the entry")

        // A role the directory does not name may not add itself: the error says who may.
        try store.owner.modifyUserDirectory(containerIdentifier: identifier, saving: [], deletingLogins: [carol])
        let unnamed = stratusError(await caughtError { _ = try await carolContainer.requestApplicationPermission(.userDiscoverability) })
        #expect(unnamed?.code == .permissionFailure && unnamed?.message.contains("stratus users add \(carol) --container \(identifier)") == true, "\(String(describing: unnamed))")
        #expect(try store.owner.fetchUserDirectory(containerIdentifier: identifier, logins: [carol]).isEmpty)
    }

    @Test("a version 12 store with row-level security gets user discovery's tables and policies when the owner opens it")
    func upgradeAddsDiscovery() async throws {
        let store = try SecureStore()
        defer { store.dropRoles() }
        let admin = try PostgresConnection(url: store.database.url)
        try admin.executeScript("DROP TABLE user_addresses; DROP TABLE user_identities; UPDATE meta SET value = '12' WHERE key = 'version';")
        let member = stratusError(await caughtError { try store.engine(store.carol) })
        #expect(member?.code == .permissionFailure && member?.message.contains("version 12") == true, "\(String(describing: member))")

        _ = try PostgresEngine(url: store.database.url)
        #expect(try admin.query("SELECT value FROM meta WHERE key = 'version'")[0].text(0) == "21")
        try store.owner.modifyUserDirectory(containerIdentifier: store.identifier, saving: [
            UserDirectoryEntry(login: store.alice, userRecordName: store.aliceName, emailAddresses: ["alice@example.com"], isDiscoverable: true),
            UserDirectoryEntry(login: store.bob, userRecordName: store.bobName, emailAddresses: ["bob@example.com"]),
        ], deletingLogins: [])
        #expect(try store.raw(store.carol).query("SELECT address FROM user_addresses").map { try $0.text(0) } == ["alice@example.com"])
        let carol = Container(identifier: store.identifier, engine: try store.engine(store.carol), userName: store.carol)
        #expect(try await carol.userIdentity(forEmailAddress: "alice@example.com")?.userRecordID?.recordName == store.aliceName)
        #expect(try await carol.requestApplicationPermission(.userDiscoverability) == .granted)
    }
}

extension PostgresSecurityTests {
    @Test("an accepted participant's role reads exactly the shared records with raw SQL and through Stratus, and with .readWrite writes them as itself; an invitee reads only the share, a role the share does not name and a removed participant nothing")
    func participantsReachSharedRecordsOnly() async throws {
        let store = try SecureStore()
        defer { store.dropRoles() }
        let (aliceName, bobName) = (store.aliceName, store.bobName)
        // Alice shares the hierarchy under `groceries` (not `diary`) of her zone with Bob, read-only.
        let alice = Container(identifier: store.identifier, engine: try store.engine(store.alice), userName: store.alice).privateCloudDatabase
        let lists = try await alice.save(RecordZone(zoneName: "Lists")).zoneID
        let root = makeRecord("List", "groceries", zoneID: lists, ["title": .string("Groceries")])
        let milk = makeRecord("Item", "milk", zoneID: lists, ["title": .string("Milk")])
        milk.setParent(root)
        let bread = makeRecord("Item", "bread", zoneID: lists, ["title": .string("Bread")])
        bread.setParent(milk)
        try await TestDatabase.save([root, milk, bread, makeRecord("Item", "diary", zoneID: lists, ["title": .string("Private")])], in: alice)
        let storedRoot = try await alice.record(for: root.recordID)
        let share = Share(rootRecord: storedRoot)
        let invited = Share.Participant(userIdentity: UserIdentity(userRecordID: Record.ID(recordName: bobName)))
        invited.permission = .readOnly
        share.addParticipant(invited)
        let (saved, _) = try await alice.modifyRecords(saving: [storedRoot, share], deleting: [])
        let stored = try #require(try saved[share.recordID]?.get() as? Share)
        let shareName = share.recordID.recordName

        let bob = try store.raw(store.bob)
        let carol = try store.raw(store.carol)
        func names(_ raw: PostgresConnection) throws -> [String] {
            try raw.query("SELECT record_name FROM records WHERE owner = $1 ORDER BY record_name", [.text(aliceName)]).map { try $0.text(0) ?? "" }
        }
        #expect(try names(bob) == [shareName], "an invitation not yet accepted reaches its share only")
        // Through Stratus on his own role, Bob reads what he is invited to.
        let bobsOwnRole = Container(identifier: store.identifier, engine: try store.engine(store.bob), userName: store.bob)
        #expect(try await bobsOwnRole.shareMetadata(for: try #require(stored.url)).participantStatus == .pending)

        // Bob accepts (through the store's owner: accepting changes Alice's share record, which
        // no member's role writes).
        let bobAsAdministered = Container(identifier: store.identifier, engine: store.owner, userName: store.bob)
        try await bobAsAdministered.accept(try await bobAsAdministered.shareMetadata(for: try #require(stored.url)))
        #expect(try names(bob) == ["bread", "groceries", "milk", shareName].sorted())
        let sharedLists = RecordZone.ID(zoneName: "Lists", ownerName: aliceName)
        #expect(try await bobsOwnRole.sharedCloudDatabase.record(for: Record.ID(recordName: "bread", zoneID: sharedLists))["title"] as? String == "Bread")
        #expect(try bob.query("SELECT zone_name FROM zones WHERE owner = $1", [.text(aliceName)]).map { try $0.text(0) } == ["Lists"])
        #expect(try names(carol).isEmpty && carol.query("SELECT count(*) FROM zones WHERE owner = $1", [.text(aliceName)])[0].int64(0) == 0)
        #expect(try carol.query("SELECT count(*) FROM shared_records_reached")[0].int64(0) == 0, "the views answer only the connected role's part")
        // Read-only: no row of Alice's changes or goes.
        #expect(try bob.execute("UPDATE records SET change_tag = 'bob', modified_by = $2 WHERE owner = $1", [.text(aliceName), .text(bobName)]) == 0)
        #expect(try bob.execute("DELETE FROM records WHERE owner = $1", [.text(aliceName)]) == 0)

        // Read-write: Bob changes and adds records of the hierarchy, as himself, and nothing else.
        let writable = try #require(try await alice.record(for: stored.recordID) as? Share)
        try #require(writable.participants.first { $0.role == .privateUser }).permission = .readWrite
        _ = try await alice.save(writable)
        #expect(try bob.execute("UPDATE records SET change_tag = 'bob', modified_by = $2 WHERE owner = $1 AND record_name = 'bread'", [.text(aliceName), .text(bobName)]) == 1)
        #expect(try bob.execute("UPDATE records SET change_tag = 'bob', modified_by = $2 WHERE owner = $1 AND record_name IN ('diary', $3)",
                                [.text(aliceName), .text(bobName), .text(shareName)]) == 0)
        let unsigned = stratusError(await caughtError {
            try bob.execute("UPDATE records SET change_tag = 'anonymous' WHERE owner = $1 AND record_name = 'milk'", [.text(aliceName)])
        })
        #expect(unsigned?.code == .permissionFailure, "a participant's change names it as the modifier: \(String(describing: unsigned))")
        for change in ["created_by = $3", "record_type = 'Whatever' || left($3, 0)", "created_at = length($3)"] {
            let forged = stratusError(await caughtError {
                try bob.execute("UPDATE records SET \(change), modified_by = $2 WHERE owner = $1 AND record_name = 'bread'", [.text(aliceName), .text(bobName), .text(store.carolName)])
            })
            #expect(forged?.code == .permissionFailure, "a participant keeps a shared record's creation and type (\(change)): \(String(describing: forged))")
        }
        let insert = """
            INSERT INTO records(zone_id, record_name, owner, record_type, created_at, created_by, modified_at, modified_by, change_tag, change_seq, fields, parent_name)
            SELECT zone_id, $3, owner, 'Item', 0, $2, 0, $2, 'bob', change_seq, '{}'::jsonb, $4 FROM records WHERE owner = $1 AND record_name = 'milk'
            """
        #expect(try bob.execute(insert, [.text(aliceName), .text(bobName), .text("eggs"), .text("groceries")]) == 1)
        let stray = stratusError(await caughtError { try bob.execute(insert, [.text(aliceName), .text(bobName), .text("stray"), .text("diary")]) })
        #expect(stray?.code == .permissionFailure, "a record outside the shared hierarchy: \(String(describing: stray))")
        #expect(try carol.execute(insert, [.text(aliceName), .text(store.carolName), .text("carols"), .text("groceries")]) == 0, "Carol reads no row to copy")
        #expect(try carol.execute("UPDATE records SET change_tag = 'carol' WHERE owner = $1", [.text(aliceName)]) == 0)
        #expect(try bob.execute("DELETE FROM records WHERE owner = $1 AND record_name IN ('eggs', 'diary')", [.text(aliceName)]) == 1)
        let asAliceSees = try store.raw(store.alice).query("SELECT record_name, modified_by FROM records WHERE owner = $1 AND change_tag = 'bob'", [.text(aliceName)])
        #expect(try asAliceSees.map { [try $0.text(0), try $0.text(1)] } == [["bread", bobName]])

        // Removed, Bob reaches nothing again.
        let removing = try #require(try await alice.record(for: stored.recordID) as? Share)
        removing.removeParticipant(try #require(removing.participants.first { $0.role == .privateUser }))
        _ = try await alice.save(removing)
        #expect(try names(bob).isEmpty)
        #expect(try bob.execute("UPDATE records SET change_tag = 'late', modified_by = $2 WHERE owner = $1", [.text(aliceName), .text(bobName)]) == 0)

        // A share that goes with its root leaves Bob no reach to a record made later under the
        // root's name (the index the policies read goes with the share).
        let todo = makeRecord("List", "todo", zoneID: lists, ["title": .string("To do")])
        try await TestDatabase.save([todo], in: alice)
        let storedTodo = try await alice.record(for: todo.recordID)
        let todoShare = Share(rootRecord: storedTodo)
        todoShare.addParticipant(Share.Participant(userIdentity: UserIdentity(userRecordID: Record.ID(recordName: bobName))))
        let (todoSaved, _) = try await alice.modifyRecords(saving: [storedTodo, todoShare], deleting: [])
        let todoURL = try #require((try todoSaved[todoShare.recordID]?.get() as? Share)?.url)
        try await bobAsAdministered.accept(try await bobAsAdministered.shareMetadata(for: todoURL))
        #expect(try names(bob).contains("todo"))
        _ = try await alice.deleteRecord(withID: todo.recordID)
        try await TestDatabase.save([makeRecord("List", "todo", zoneID: lists, ["title": .string("Another to do")])], in: alice)
        let reachedAfter = try names(bob)
        #expect(reachedAfter.isEmpty, "\(reachedAfter)")
    }

    @Test("once the tables have statistics (a member's writes then reuse generic plans), a member's updates and deletions through Stratus change its own records, and a read-write participant's role the shared ones only (with raw SQL: Stratus's writes in another's zone need the tables' owner, and say so)")
    func membersWritesWithStatistics() async throws {
        let store = try SecureStore()
        defer { store.dropRoles() }
        let (alice, lists, _) = try await store.shareAlicesList(bob: .readWrite) { zone in
            let root = makeRecord("List", "groceries", zoneID: zone, ["title": .string("Groceries")])
            let milk = makeRecord("Item", "milk", zoneID: zone, ["title": .string("Milk")])
            milk.setParent(root)
            return [root, milk, makeRecord("Item", "diary", zoneID: zone, ["title": .string("Private")])]
        }
        let items = (0..<40).map { makeRecord("Item", "item-\($0)", zoneID: lists, ["title": .string("Item \($0)")]) }
        try await TestDatabase.save(items, in: alice)
        try PostgresConnection(url: store.database.url).executeScript("ANALYZE")

        // Alice changes every item and deletes half of them, as her own role (a statement per record).
        var stored: [Record] = []
        for item in items { stored.append(try await alice.record(for: item.recordID)) }
        for record in stored { record["title"] = "Changed \(record.recordID.recordName)" }
        let (saved, _) = try await alice.modifyRecords(saving: stored, deleting: [])
        #expect(try saved.values.filter { try $0.get()["title"] as? String == "Changed \($0.get().recordID.recordName)" }.count == items.count)
        let (_, deleted) = try await alice.modifyRecords(saving: [], deleting: items.prefix(20).map(\.recordID))
        #expect(deleted.values.filter { (try? $0.get()) != nil }.count == 20)
        var left: [Record] = []
        for try await record in alice.allRecords(matching: Query(recordType: "Item"), inZoneWith: lists) { left.append(record) }
        #expect(Set(left.map(\.recordID.recordName)) == Set(["milk", "diary"] + items.suffix(20).map(\.recordID.recordName)))
        #expect(left.filter { $0.recordID.recordName.hasPrefix("item-") }.allSatisfy { $0["title"] as? String == "Changed \($0.recordID.recordName)" })

        // A deletion by query (each record's change tag read first, then a batch's records
        // deleted together) deletes the rest as Alice's role, with the tombstones her changes report.
        var token: ServerChangeToken?
        var more = true
        while more { (token, more) = try await { let batch = try await alice.recordZoneChanges(inZoneWith: lists, since: token); return (batch.changeToken, batch.moreComing) }() }
        let purge = DeleteRecordsOperation(query: try Query(recordType: "Item", format: "title BEGINSWITH %@", "Changed"), zoneID: lists)
        purge.batchSize = 8
        await run(purge, on: alice)
        let purged = try await alice.recordZoneChanges(inZoneWith: lists, since: token)
        #expect(Set(purged.deletions.map(\.recordID.recordName)) == Set(items.suffix(20).map(\.recordID.recordName)) && purged.modificationResultsByID.isEmpty)
        var rest: [String] = []
        for try await record in alice.allRecords(matching: Query(recordType: "Item"), inZoneWith: lists) { rest.append(record.recordID.recordName) }
        #expect(Set(rest) == ["milk", "diary"])

        // Bob's role, with generic plans of its statements too, changes the shared record only; Carol's nothing.
        let bob = try store.raw(store.bob)
        try bob.execute("SET plan_cache_mode = force_generic_plan")
        let change = "UPDATE records SET change_tag = 'bob', modified_by = $2 WHERE owner = $1 AND record_name = $3"
        for _ in 0..<3 {
            #expect(try bob.execute(change, [.text(store.aliceName), .text(store.bobName), .text("milk")]) == 1)
            #expect(try bob.execute(change, [.text(store.aliceName), .text(store.bobName), .text("diary")]) == 0)
            #expect(try bob.execute(change, [.text(store.aliceName), .text(store.bobName), .text("item-30")]) == 0)
        }
        let carol = try store.raw(store.carol)
        try carol.execute("SET plan_cache_mode = force_generic_plan")
        #expect(try carol.execute("UPDATE records SET change_tag = 'carol' WHERE owner = $1", [.text(store.aliceName)]) == 0)
        let bobs = try store.raw(store.alice).query("SELECT record_name FROM records WHERE owner = $1 AND change_tag = 'bob'", [.text(store.aliceName)])
        #expect(try bobs.map { try $0.text(0) } == ["milk"])

        // Through Stratus, Bob's own role reads the shared record; its write is refused plainly
        // (Stratus writes the owner's change history, which a connection as the tables' owner does).
        let bobsOwnRole = Container(identifier: store.identifier, engine: try store.engine(store.bob), userName: store.bob).sharedCloudDatabase
        let milk = try await bobsOwnRole.record(for: Record.ID(recordName: "milk", zoneID: RecordZone.ID(zoneName: "Lists", ownerName: store.aliceName)))
        milk["title"] = "Oat milk"
        let refused = stratusError(await caughtError { try await bobsOwnRole.save(milk) })
        #expect(refused?.code == .permissionFailure && refused?.message.contains("as the tables' owner") == true, "\(String(describing: refused))")
    }

    @Test("a member's inserts have the records' statistics gathered as the tables' owner (stratus_analyze), which a role outside the group may not call")
    func membersInsertsKeepStatistics() async throws {
        let store = try SecureStore()
        defer { store.dropRoles() }
        let alice = Container(identifier: store.identifier, engine: try store.engine(store.alice), userName: store.alice).privateCloudDatabase
        let zone = try await alice.save(RecordZone(zoneName: "Fresh")).zoneID
        let admin = try PostgresConnection(url: store.database.url)
        // Autovacuum would analyze a new table after 50 rows: only the engine's own analysis is measured.
        try admin.executeScript("ALTER TABLE records SET (autovacuum_enabled = false); ALTER TABLE record_tokens SET (autovacuum_enabled = false)")
        try await TestDatabase.save(makeRecords("Item", count: 1_100, prefix: "a", zoneID: zone) { ["n": .int64(Int64($0))] }, in: alice)
        // pg_class's count, which ANALYZE sets in its own transaction (the statistics views lag).
        let counted = try admin.query("SELECT reltuples FROM pg_class WHERE oid = to_regclass('records')")[0].double(0) ?? 0
        #expect(counted >= 1_100, "\(counted)")
        let outsider = "outsider_\(store.suffix)"
        try admin.executeScript("CREATE ROLE \(outsider) LOGIN")
        defer { try? admin.executeScript("DROP ROLE IF EXISTS \(outsider)") }
        let refused = stratusError(await caughtError { try store.raw(outsider).query("SELECT stratus_analyze()") })
        #expect(refused?.sqlState == "42501", "\(String(describing: refused))")
    }

    /// Alice shares the hierarchy of her record `rootID` with Bob (read-only), and Bob accepts
    /// (through the store's owner: accepting changes Alice's share record, which no member's role writes).
    private static func shareWithBob(_ rootID: Record.ID, in alice: Database, _ store: SecureStore) async throws {
        let storedRoot = try await alice.record(for: rootID)
        let share = Share(rootRecord: storedRoot)
        share.addParticipant(Share.Participant(userIdentity: UserIdentity(userRecordID: Record.ID(recordName: store.bobName))))
        let (saved, _) = try await alice.modifyRecords(saving: [storedRoot, share], deleting: [])
        let url = try #require(try (saved[share.recordID]?.get() as? Share)?.url)
        let bobAsAdministered = Container(identifier: store.identifier, engine: store.owner, userName: store.bob)
        try await bobAsAdministered.accept(try await bobAsAdministered.shareMetadata(for: url))
    }

    @Test("an owner's role fires its accepted participants' shared database subscriptions with its writes, reading those subscriptions only: never a non-participant's, also with raw SQL")
    func ownersWritesFireParticipantsSubscriptions() async throws {
        let store = try SecureStore()
        defer { store.dropRoles() }
        let alice = Container(identifier: store.identifier, engine: try store.engine(store.alice), userName: store.alice).privateCloudDatabase
        let lists = try await alice.save(RecordZone(zoneName: "Lists")).zoneID
        let root = makeRecord("List", "groceries", zoneID: lists, ["title": .string("Groceries")])
        _ = try await alice.save(root)
        try await Self.shareWithBob(root.recordID, in: alice, store)

        let bob = Container(identifier: store.identifier, engine: try store.engine(store.bob), userName: store.bob)
        let carol = Container(identifier: store.identifier, engine: try store.engine(store.carol), userName: store.carol)
        for user in [bob, carol] {
            let subscription = DatabaseSubscription(subscriptionID: "shared-changes")
            subscription.notificationInfo = NotificationInfo()
            _ = try await user.sharedCloudDatabase.save(subscription)
        }
        let bobsStart = try await NotificationFeed(database: bob.privateCloudDatabase).nextBatch(after: nil, limit: 100).token
        let carolsStart = try await NotificationFeed(database: carol.privateCloudDatabase).nextBatch(after: nil, limit: 100).token

        let changed = try await alice.record(for: root.recordID)
        changed["title"] = "Weekly groceries"
        _ = try await alice.save(changed)
        let told = try await NotificationFeed(database: bob.privateCloudDatabase).nextBatch(after: bobsStart, limit: 100).notifications
        #expect(told.compactMap { ($0 as? DatabaseNotification)?.databaseScope.rawValue } == [Database.Scope.shared.rawValue], "\(told)")
        #expect(try await NotificationFeed(database: carol.privateCloudDatabase).nextBatch(after: carolsStart, limit: 100).notifications.isEmpty)

        // Alice's role reads Bob's shared database subscription (its writes fire it), not Carol's.
        let shared = Database.Scope.shared.rawValue
        func subscribers(_ raw: PostgresConnection) throws -> [String] {
            try raw.query("SELECT owner FROM subscriptions WHERE db = \(shared) ORDER BY owner").map { try $0.text(0) ?? "" }
        }
        #expect(try subscribers(store.raw(store.alice)) == [store.bobName])
        #expect(try subscribers(store.raw(store.carol)) == [store.carolName])
        #expect(try store.raw(store.alice).query("SELECT count(*) FROM subscription_state WHERE db = \(shared)")[0].int64(0) == 1)
    }

    @Test("an accepted participant's role reads the shared records' asset content and finds them by their words, through Stratus and with raw SQL; a role the share does not name reads neither")
    func participantsReadSharedAssetsAndWords() async throws {
        let store = try SecureStore()
        defer { store.dropRoles() }
        let files = try TemporaryStore(prefix: "stratus-rls-shared-assets")
        defer { files.remove() }
        // Titles searchable: their words go into the word index.
        let administered = Container(identifier: store.identifier, engine: store.owner, userName: store.alice)
        for type in ["List", "Item"] {
            var schema = RecordTypeSchema(recordType: type)
            schema.addField("title", type: .string, indexes: [.searchable])
            schema.addField("image", type: .asset)
            try await administered.saveSchema(schema)
        }
        let alice = Container(identifier: store.identifier, engine: try store.engine(store.alice), userName: store.alice).privateCloudDatabase
        let lists = try await alice.save(RecordZone(zoneName: "Lists")).zoneID
        let root = makeRecord("List", "groceries", zoneID: lists, ["title": .string("Groceries")])
        let photo = makeRecord("Item", "photo", zoneID: lists, ["title": .string("Fresh strawberries")])
        photo.setParent(root)
        let bytes = Data((0..<300_000).map { UInt8($0 % 251) })
        photo["image"] = Asset(fileURL: try files.writeFile("photo.bin", bytes))
        let diary = makeRecord("Item", "diary", zoneID: lists, ["title": .string("Secret strawberries")])
        diary["image"] = Asset(fileURL: try files.writeFile("diary.bin", Data(repeating: 9, count: 5_000)))
        try await TestDatabase.save([root, photo, diary], in: alice)
        try await Self.shareWithBob(root.recordID, in: alice, store)

        // Through Stratus on Bob's own role: the asset's file holds the bytes, and the words find the record.
        let bob = Container(identifier: store.identifier, engine: try store.engine(store.bob), userName: store.bob).sharedCloudDatabase
        let sharedLists = RecordZone.ID(zoneName: "Lists", ownerName: store.aliceName)
        let fetched = try await bob.record(for: Record.ID(recordName: "photo", zoneID: sharedLists))
        let file = try #require((fetched["image"] as? Asset)?.fileURL)
        #expect(try Data(contentsOf: file) == bytes)
        let search = Query(recordType: "Item", predicate: try QueryPredicate(format: "self CONTAINS %@", argumentArray: ["strawberries"]))
        let (matches, _) = try await bob.records(matching: search, inZoneWith: sharedLists)
        #expect(matches.map(\.0.recordName) == ["photo"], "the diary, outside the share, is not found")

        // Raw SQL: Bob's role reads the shared content's rows and words, not the diary's; Carol's neither.
        func readable(_ raw: PostgresConnection) throws -> (contents: Int64, words: Int64) {
            let contents = try raw.query("SELECT count(*) FROM asset_chunks WHERE owner = $1", [.text(store.aliceName)])[0].int64(0)
            let words = try raw.query("SELECT count(DISTINCT record_name) FROM record_tokens WHERE owner = $1", [.text(store.aliceName)])[0].int64(0)
            return (contents ?? -1, words ?? -1)
        }
        let bobs = try readable(store.raw(store.bob))
        #expect(bobs.contents == 1 && bobs.words == 2, "the photo's one chunk; the words of groceries and photo: \(bobs)")
        let carols = try readable(store.raw(store.carol))
        #expect(carols.contents == 0 && carols.words == 0)
        let owners = try readable(store.raw(store.alice))
        #expect(owners.contents == 2 && owners.words == 3, "the diary's too, for its owner: \(owners)")
    }

    @Test("an owner's role marks no participant accepted: not in the share index with raw SQL, and a share record whose JSON it forged so reaches nothing")
    func ownersGiveNoAcceptance() async throws {
        let store = try SecureStore()
        defer { store.dropRoles() }
        let (aliceName, bobName) = (store.aliceName, store.bobName)
        let alice = Container(identifier: store.identifier, engine: try store.engine(store.alice), userName: store.alice).privateCloudDatabase
        let lists = try await alice.save(RecordZone(zoneName: "Lists")).zoneID
        try await TestDatabase.save([makeRecord("List", "groceries", zoneID: lists, ["title": .string("Groceries")])], in: alice)
        let storedRoot = try await alice.record(for: Record.ID(recordName: "groceries", zoneID: lists))
        let share = Share(rootRecord: storedRoot)
        share.addParticipant(Share.Participant(userIdentity: UserIdentity(userRecordID: Record.ID(recordName: bobName))))
        _ = try await alice.modifyRecords(saving: [storedRoot, share], deleting: [])
        let shareName = share.recordID.recordName

        let raw = try store.raw(store.alice)
        let accept = stratusError(await caughtError {
            try raw.execute("UPDATE share_members SET accepted = true WHERE owner = $1 AND member = $2", [.text(aliceName), .text(bobName)])
        })
        #expect(accept?.code == .permissionFailure, "\(String(describing: accept))")
        let insert = stratusError(await caughtError {
            try raw.execute("""
                INSERT INTO share_members(container, member, owner, zone_name, share_name, accepted, read_write)
                SELECT container, $3, owner, zone_name, share_name, true, true FROM share_members WHERE owner = $1 AND member = $2
                """, [.text(aliceName), .text(bobName), .text(store.carolName)])
        })
        #expect(insert?.code == .permissionFailure, "\(String(describing: insert))")
        let moved = stratusError(await caughtError {
            try raw.execute("UPDATE share_members SET accepted = true, member = $3 WHERE owner = $1 AND member = $2", [.text(aliceName), .text(bobName), .text(store.carolName)])
        })
        #expect(moved?.code == .permissionFailure, "\(String(describing: moved))")
        let index: any StorageEngine = store.owner
        #expect(try index.indexedShares(acceptedBy: bobName, storageContainer: store.identifier).isEmpty)

        // The share record's JSON is Alice's to write, but says nothing the index does not.
        #expect(try raw.execute("UPDATE records SET fields = replace(fields::text, 'PENDING', 'ACCEPTED')::jsonb WHERE owner = $1 AND record_name = $2",
                                [.text(aliceName), .text(shareName)]) == 1)
        let forged = try #require(try await alice.record(for: share.recordID) as? Share)
        #expect(forged.participants.map(\.acceptanceStatus) == [.accepted, .accepted], "the forgery is stored")
        let bobAsAdministered = Container(identifier: store.identifier, engine: store.owner, userName: store.bob)
        #expect(try await bobAsAdministered.sharedCloudDatabase.allRecordZones().isEmpty)
        let bobsOwnRole = Container(identifier: store.identifier, engine: try store.engine(store.bob), userName: store.bob)
        #expect(try await bobsOwnRole.sharedCloudDatabase.allRecordZones().isEmpty)
        let reached = try store.raw(store.bob).query("SELECT record_name FROM records WHERE owner = $1", [.text(aliceName)]).map { try $0.text(0) ?? "" }
        #expect(reached == [shareName], "an invitation not accepted reaches its share only")
    }

    @Test("a version 13 store with row-level security opens as the current version, whose share index keeps members from giving participants an acceptance")
    func upgradeFromVersion13AppliesAcceptanceTrigger() async throws {
        let store = try SecureStore()
        defer { store.dropRoles() }
        let admin = try PostgresConnection(url: store.database.url)
        try admin.executeScript("DROP TRIGGER stratus_keep_acceptance ON share_members; DROP FUNCTION stratus_keep_acceptance(); UPDATE meta SET value = '13' WHERE key = 'version';")
        _ = try PostgresEngine(url: store.database.url)
        #expect(try admin.query("SELECT value FROM meta WHERE key = 'version'")[0].text(0) == "21")
        #expect(try admin.query("SELECT count(*) FROM pg_trigger WHERE tgname = 'stratus_keep_acceptance' AND tgrelid = 'share_members'::regclass")[0].int64(0) == 1)
    }

    @Test("a read-write participant's role creates no record, with raw SQL either, under a name that stored records name as their parent (their parent was deleted): they stay outside the share")
    func participantsAdoptNoOrphans() async throws {
        let store = try SecureStore()
        defer { store.dropRoles() }
        let (aliceName, bobName) = (store.aliceName, store.bobName)
        let (alice, lists, bobAsAdministered) = try await store.shareAlicesList(bob: .readWrite) { lists in
            let root = makeRecord("List", "groceries", zoneID: lists, ["title": .string("Groceries")])
            let milk = makeRecord("Item", "milk", zoneID: lists, ["title": .string("Milk")])
            milk.setParent(root)
            let bread = makeRecord("Item", "bread", zoneID: lists, ["title": .string("Bread")])
            bread.setParent(milk)
            return [root, milk, bread]
        }
        let milk = Record.ID(recordName: "milk", zoneID: lists)
        _ = try await alice.deleteRecord(withID: milk)

        let bob = try store.raw(store.bob)
        func reached() throws -> [String] {
            try bob.query("SELECT record_name FROM records WHERE owner = $1 AND record_type = 'Item' ORDER BY record_name", [.text(aliceName)]).map { try $0.text(0) ?? "" }
        }
        #expect(try reached().isEmpty, "bread left the share with milk")
        let insert = """
            INSERT INTO records(zone_id, record_name, owner, record_type, created_at, created_by, modified_at, modified_by, change_tag, change_seq, fields, parent_name)
            SELECT zone_id, $3, owner, 'Item', 0, $2, 0, $2, 'bob', change_seq, '{}'::jsonb, 'groceries' FROM records WHERE owner = $1 AND record_name = 'groceries'
            """
        let adopting = stratusError(await caughtError { try bob.execute(insert, [.text(aliceName), .text(bobName), .text("milk")]) })
        #expect(adopting?.code == .permissionFailure, "\(String(describing: adopting))")
        #expect(try reached().isEmpty)
        // Through Stratus (as the tables' owner acting for Bob, past the trigger), the same
        // answer; a name no record names as parent goes in.
        let bobsSharedDatabase = bobAsAdministered.sharedCloudDatabase
        let sharedLists = RecordZone.ID(zoneName: "Lists", ownerName: aliceName)
        let again = Record(recordType: "Item", recordID: Record.ID(recordName: "milk", zoneID: sharedLists))
        again.setParent(Record.ID(recordName: "groceries", zoneID: sharedLists))
        let refused = stratusError(await caughtError { _ = try await bobsSharedDatabase.save(again) })
        #expect(refused?.code == .permissionFailure, "\(String(describing: refused))")
        #expect(try bob.execute(insert, [.text(aliceName), .text(bobName), .text("eggs")]) == 1)
        #expect(try reached() == ["eggs"])
        // The owner brings bread back: a hierarchy is hers to shape.
        let newMilk = makeRecord("Item", "milk", zoneID: lists, ["title": .string("Milk")])
        newMilk.setParent(Record.ID(recordName: "groceries", zoneID: lists))
        try await TestDatabase.save([newMilk], in: alice)
        #expect(try reached() == ["bread", "eggs", "milk"])
    }

    @Test("a record share whose root the index does not know (CloudKit's JSON of a share restored apart from its root) gives its participants' roles nothing but the share, not the owner's whole zone; a role the zone is not shared with learns no record's name from a refused insert (found by a PostgreSQL tester)")
    func rootlessShareReachesNothing() async throws {
        let store = try SecureStore()
        defer { store.dropRoles() }
        let (aliceName, bobName, carolName) = (store.aliceName, store.bobName, store.carolName)
        let (alice, lists, _) = try await store.shareAlicesList(bob: .readWrite) { lists in
            let root = makeRecord("List", "groceries", zoneID: lists, ["title": .string("Groceries")])
            let milk = makeRecord("Item", "milk", zoneID: lists, ["title": .string("Milk")])
            milk.setParent(root)
            let bread = makeRecord("Item", "bread", zoneID: lists, ["title": .string("Bread")])
            bread.setParent(milk)
            return [root, milk, bread, makeRecord("Item", "diary", zoneID: lists, ["title": .string("Private")])]
        }
        _ = try await alice.deleteRecord(withID: Record.ID(recordName: "milk", zoneID: lists))
        let ownerSQL = try PostgresConnection(url: store.database.url)
        let zoneID = try #require(try ownerSQL.query("SELECT zone_id FROM zones WHERE owner = $1 AND zone_name = 'Lists'", [.text(aliceName)]).first?.int64(0))

        // Carol, whom nothing is shared with, gets the same answer for a name stored records
        // name as their parent (milk) as for any other.
        let carol = try store.raw(store.carol)
        func carolsInsert(_ name: String) async -> StratusError? {
            stratusError(await caughtError {
                try carol.execute("""
                    INSERT INTO records(zone_id, record_name, owner, record_type, created_at, created_by, modified_at, modified_by, change_tag, change_seq, fields, parent_name)
                    VALUES ($1, $2, $3, 'Item', 0, $4, 0, $4, 'carol', 99, '{}'::jsonb, NULL)
                    """, [.int64(zoneID), .text(name), .text(aliceName), .text(carolName)])
            })
        }
        let named = await carolsInsert("milk"), unnamed = await carolsInsert("nothing-names-this")
        #expect(named?.code == .permissionFailure && unnamed?.code == .permissionFailure)
        #expect(named?.message.contains("hierarchy") == false && unnamed?.message.contains("hierarchy") == false, "\(String(describing: named)) / \(String(describing: unnamed))")

        // A session that takes Bob's role (an operator's login granted it) is judged as Bob: it
        // adopts no orphan either (found in review: the trigger looked at the session's login).
        let support = "support_\(store.suffix)"
        try ownerSQL.executeScript("CREATE ROLE \(support) LOGIN; GRANT \(store.bob) TO \(support);")
        defer { try? ownerSQL.executeScript("DROP ROLE IF EXISTS \(support)") }
        let operatorSession = try store.raw(support)
        try operatorSession.executeScript("SET ROLE \(store.bob)")
        let adopted = stratusError(await caughtError {
            try operatorSession.execute("""
                INSERT INTO records(zone_id, record_name, owner, record_type, created_at, created_by, modified_at, modified_by, change_tag, change_seq, fields, parent_name)
                VALUES ($1, 'milk', $2, 'Item', 0, $3, 0, $3, 'bob', 99, '{}'::jsonb, 'groceries')
                """, [.int64(zoneID), .text(aliceName), .text(bobName)])
        })
        #expect(adopted?.code == .permissionFailure && adopted?.message.contains("hierarchy") == true, "\(String(describing: adopted))")

        // The index as an import of the share without its root leaves it: no root.
        let bob = try store.raw(store.bob)
        func names() throws -> [String] {
            try bob.query("SELECT record_name FROM records WHERE owner = $1 ORDER BY record_name", [.text(aliceName)]).map { try $0.text(0) ?? "" }
        }
        let shareName = try #require(try ownerSQL.query("SELECT share_name FROM share_index WHERE owner = $1", [.text(aliceName)]).first?.text(0))
        #expect(try names() == ["groceries", shareName].sorted())
        #expect(try ownerSQL.execute("UPDATE share_index SET root_name = NULL WHERE owner = $1", [.text(aliceName)]) == 1)
        #expect(try names() == [shareName], "a share without a known root shares no record of the zone")
        #expect(try bob.execute("UPDATE records SET change_tag = 'bob', modified_by = $2 WHERE owner = $1", [.text(aliceName), .text(bobName)]) == 0)
        #expect(try bob.execute("DELETE FROM records WHERE owner = $1", [.text(aliceName)]) == 0)
        let placed = stratusError(await caughtError {
            try bob.execute("""
                INSERT INTO records(zone_id, record_name, owner, record_type, created_at, created_by, modified_at, modified_by, change_tag, change_seq, fields, parent_name)
                VALUES ($1, 'bobs', $2, 'Item', 0, $3, 0, $3, 'bob', 99, '{}'::jsonb, NULL)
                """, [.int64(zoneID), .text(aliceName), .text(bobName)])
        })
        #expect(placed?.code == .permissionFailure, "\(String(describing: placed))")
        let aliceSees = try store.raw(store.alice).query("SELECT count(*) FROM records WHERE owner = $1 AND record_name IN ('diary', 'groceries', 'bread')", [.text(aliceName)])
        #expect(try aliceSees[0].int64(0) == 3)
    }

    @Test("a read-write participant's deletion of a shared record with raw SQL reaches the owner's change feeds: the database writes its tombstone and marks the zone changed")
    func participantsRawDeletionLeavesTombstone() async throws {
        let store = try SecureStore()
        defer { store.dropRoles() }
        let aliceName = store.aliceName
        let (alice, lists, _) = try await store.shareAlicesList(bob: .readWrite) { lists in
            let root = makeRecord("List", "groceries", zoneID: lists, ["title": .string("Groceries")])
            let milk = makeRecord("Item", "milk", zoneID: lists, ["title": .string("Milk"), "list": .reference(Record.Reference(recordID: root.recordID, action: .deleteSelf))])
            milk.setParent(root)
            return [root, milk]
        }
        let milk = Record.ID(recordName: "milk", zoneID: lists)
        let zoneToken = try await alice.recordZoneChanges(inZoneWith: lists, since: nil).changeToken
        let databaseToken = try await alice.databaseChanges(since: nil).changeToken

        let references = "SELECT count(*) FROM refs WHERE owner = $1 AND source_name = 'milk'"
        #expect(try store.raw(store.alice).query(references, [.text(aliceName)])[0].int64(0) == 1, "milk's reference, which goes with it")
        #expect(try store.raw(store.bob).execute("DELETE FROM records WHERE owner = $1 AND record_name = 'milk'", [.text(aliceName)]) == 1)
        let zoneChanges = try await alice.recordZoneChanges(inZoneWith: lists, since: zoneToken)
        #expect(zoneChanges.deletions.map(\.recordID) == [milk] && zoneChanges.deletions.first?.recordType == "Item", "\(zoneChanges.deletions)")
        #expect(zoneChanges.modificationResultsByID.isEmpty)
        #expect(try await alice.databaseChanges(since: databaseToken).modifications.map(\.zoneID) == [lists])
        // The owner's next write numbers its changes after the tombstone's, and nothing is left of the row.
        try await TestDatabase.save([makeRecord("Item", "bread", zoneID: lists, ["title": .string("Bread")])], in: alice)
        let next = try await alice.recordZoneChanges(inZoneWith: lists, since: zoneChanges.changeToken)
        #expect(next.modificationResultsByID.keys.map(\.recordName) == ["bread"] && next.deletions.isEmpty)
        #expect(try store.raw(store.alice).query(references, [.text(aliceName)])[0].int64(0) == 0)
        // The owner's own raw deletion is hers to account for, as before: no tombstone is written for it.
        #expect(try store.raw(store.alice).execute("DELETE FROM records WHERE owner = $1 AND record_name = 'bread'", [.text(aliceName)]) == 1)
        #expect(try await alice.recordZoneChanges(inZoneWith: lists, since: next.changeToken).deletions.isEmpty)
    }

    @Test("a member's move of a record out of its share reaches the participant's own role as a deletion; with raw SQL that role reads the moves of the zones it accepted and a role the share does not name none, nor may it write one into the owner's zone")
    func hierarchyMovesReachTheParticipantsRole() async throws {
        let store = try SecureStore()
        defer { store.dropRoles() }
        let aliceName = store.aliceName
        // `old-list` is deleted before the zone has a record-level share: in no hierarchy.
        let (alice, lists, _) = try await store.shareAlicesList(bob: .readOnly, deletingBeforeSharing: ["old-list"]) { lists in
            let root = makeRecord("List", "groceries", zoneID: lists, ["title": .string("Groceries")])
            let milk = makeRecord("Item", "milk", zoneID: lists, ["title": .string("Milk")])
            milk.setParent(root)
            let bread = makeRecord("Item", "bread", zoneID: lists, ["title": .string("Bread")])
            bread.setParent(milk)
            return [root, milk, bread, makeRecord("List", "old-list", zoneID: lists, [:])]
        }
        let sharedLists = RecordZone.ID(zoneName: "Lists", ownerName: aliceName)
        let bobsOwnRole = Container(identifier: store.identifier, engine: try store.engine(store.bob), userName: store.bob).sharedCloudDatabase
        let start = try await bobsOwnRole.recordZoneChanges(inZoneWith: sharedLists, since: nil)
        #expect(Set(start.modificationResultsByID.keys.map(\.recordName)).isSuperset(of: ["groceries", "milk", "bread"]))
        #expect(start.deletions.isEmpty, "\(start.deletions)")

        // Alice's own role (a member) takes `milk` out of the list.
        let milk = try await alice.record(for: Record.ID(recordName: "milk", zoneID: lists))
        milk.setParent(nil as Record.ID?)
        _ = try await alice.save(milk)
        let later = try await bobsOwnRole.recordZoneChanges(inZoneWith: sharedLists, since: start.changeToken)
        #expect(Set(later.deletions.map(\.recordID.recordName)) == ["milk", "bread"] && later.modificationResultsByID.isEmpty, "\(later.deletions)")

        // A record that moves in and out of another share's hierarchy (Bob not in it).
        let chores = makeRecord("List", "chores", zoneID: lists, [:])
        let diary = makeRecord("Item", "diary", zoneID: lists, ["title": .string("Private")])
        diary.setParent(chores)
        try await TestDatabase.save([chores, diary], in: alice)
        let storedChores = try await alice.record(for: chores.recordID)
        _ = try await alice.modifyRecords(saving: [storedChores, Share(rootRecord: storedChores)], deleting: [])
        let storedDiary = try await alice.record(for: diary.recordID)
        storedDiary.setParent(nil as Record.ID?)
        _ = try await alice.save(storedDiary)

        let moves = "SELECT record_name FROM hierarchy_moves WHERE owner = $1 ORDER BY record_name"
        #expect(try store.raw(store.alice).query(moves, [.text(aliceName)]).map { try $0.text(0) } == ["bread", "diary", "milk"])
        #expect(try store.raw(store.bob).query(moves, [.text(aliceName)]).map { try $0.text(0) } == ["bread", "milk"], "never another share's")

        // Deletions: Bob's role is handed, and reads with raw SQL, those of his hierarchy only
        // (`eggs`), not the name of a record that was never in it (`diary`, `old-list`).
        let eggs = makeRecord("Item", "eggs", zoneID: lists, ["title": .string("Eggs")])
        eggs.setParent(Record.ID(recordName: "groceries", zoneID: lists))
        try await TestDatabase.save([eggs], in: alice)
        let beforeDeletions = try await bobsOwnRole.recordZoneChanges(inZoneWith: sharedLists, since: later.changeToken)
        _ = try await alice.modifyRecords(saving: [], deleting: [eggs.recordID, diary.recordID])
        let deletions = try await bobsOwnRole.recordZoneChanges(inZoneWith: sharedLists, since: beforeDeletions.changeToken)
        #expect(deletions.deletions.map(\.recordID.recordName) == ["eggs"] && deletions.modificationResultsByID.isEmpty, "\(deletions.deletions)")
        let tombstones = "SELECT record_name FROM tombstones WHERE owner = $1 ORDER BY record_name"
        #expect(try store.raw(store.bob).query(tombstones, [.text(aliceName)]).map { try $0.text(0) } == ["eggs"])
        #expect(try store.raw(store.alice).query(tombstones, [.text(aliceName)]).map { try $0.text(0) } == ["diary", "eggs", "old-list"])
        #expect(try store.raw(store.carol).query(moves, [.text(aliceName)]).isEmpty)
        let forged = stratusError(await caughtError {
            try store.raw(store.bob).execute("""
                INSERT INTO hierarchy_moves(zone_id, record_name, owner, record_type, change_seq, moved_at, left_roots)
                SELECT zone_id, 'forged', owner, 'Item', change_seq + 1, 0, '[]' FROM zones WHERE owner = $1 AND zone_name = 'Lists'
                """, [.text(aliceName)])
        })
        #expect(forged?.sqlState == "42501", "\(String(describing: forged))")
    }

    @Test("a version 17 store with row-level security opens as the current version, with the hierarchy moves table, the tombstones' roots and their policies")
    func upgradeFromVersion17AddsHierarchyMoves() async throws {
        let store = try SecureStore()
        defer { store.dropRoles() }
        let admin = try PostgresConnection(url: store.database.url)
        try admin.executeScript("DROP TABLE hierarchy_moves; ALTER TABLE tombstones DROP COLUMN left_roots CASCADE; UPDATE meta SET value = '17' WHERE key = 'version';")
        _ = try PostgresEngine(url: store.database.url)
        #expect(try admin.query("SELECT value FROM meta WHERE key = 'version'")[0].text(0) == "21")
        #expect(try admin.query("SELECT count(*) FROM pg_policies WHERE tablename = 'hierarchy_moves'")[0].int64(0) ?? 0 > 0)
        #expect(try admin.query("SELECT count(*) FROM information_schema.columns WHERE table_name = 'tombstones' AND column_name = 'left_roots'")[0].int64(0) == 1)
        #expect(try admin.query("SELECT count(*) FROM pg_policies WHERE tablename = 'tombstones' AND qual LIKE '%left_roots%'")[0].int64(0) ?? 0 > 0, "the participants' rule again")
        #expect(try store.raw(store.bob).query("SELECT count(*) FROM hierarchy_moves")[0].int64(0) == 0, "the group may read it")
    }

    @Test("a version 14 store with row-level security opens as the current version, whose records triggers keep participants from creating records under a deleted parent's name and write their deletions' tombstones")
    func upgradeFromVersion14AppliesHierarchyTriggers() async throws {
        let store = try SecureStore()
        defer { store.dropRoles() }
        let admin = try PostgresConnection(url: store.database.url)
        try admin.executeScript("""
            DROP TRIGGER stratus_adopt_no_records ON records; DROP FUNCTION stratus_adopt_no_records();
            DROP TRIGGER stratus_participant_tombstone ON records; DROP FUNCTION stratus_participant_tombstone();
            UPDATE meta SET value = '14' WHERE key = 'version';
            """)
        _ = try PostgresEngine(url: store.database.url)
        #expect(try admin.query("SELECT value FROM meta WHERE key = 'version'")[0].text(0) == "21")
        #expect(try admin.query("""
            SELECT count(*) FROM pg_trigger WHERE tgname IN ('stratus_adopt_no_records', 'stratus_participant_tombstone') AND tgrelid = 'records'::regclass
            """)[0].int64(0) == 2)
    }

    @Test("a superuser who opens an older store upgrades it as the role that owns its tables: what the upgrade creates is that role's, whose commands keep working")
    func upgradeBySuperuserKeepsTheOwner() async throws {
        let database = try PostgresTestServer.makeDatabase()
        let suffix = String(UInt32.random(in: 0...UInt32.max), radix: 36)
        let (owner, group) = ("stratus_owner_\(suffix)", "stratus_group_\(suffix)")
        let admin = try PostgresConnection(url: database.url)
        let schema = try #require(try admin.query("SELECT current_schema()::text")[0].text(0))
        try admin.executeScript("""
            CREATE ROLE \(owner) LOGIN; CREATE ROLE \(group) NOLOGIN;
            GRANT USAGE, CREATE ON SCHEMA \(try PostgresConnection.quoteIdentifier(schema)) TO \(owner);
            """)
        defer { try? admin.executeScript("DROP OWNED BY \(owner), \(group); DROP ROLE IF EXISTS \(owner), \(group)") }
        let ownerURL = try PostgresConnectionString.replacing(["user": owner], in: database.url)
        _ = try PostgresEngine(url: ownerURL)
        let current = try admin.query("SELECT value FROM meta WHERE key = 'version'")[0].text(0)
        // The store as version 7 left it: no notification tables yet.
        try admin.executeScript("DROP TABLE notifications, notification_feeds; UPDATE meta SET value = '7' WHERE key = 'version';")

        _ = try PostgresEngine(url: database.url)
        #expect(try admin.query("SELECT value FROM meta WHERE key = 'version'")[0].text(0) == current)
        let owners = try admin.query("""
            SELECT DISTINCT tableowner::text FROM pg_tables WHERE schemaname = current_schema() AND tablename IN ('notifications', 'notification_feeds', 'records')
            """).map { try $0.text(0) }
        #expect(owners == [owner])
        try PostgresEngine(url: ownerURL).enableRowLevelSecurity(group: group)
    }
}

/// A store with row-level security on for a group of two members, alice and bob, each with an
/// entry in the directory of ``identifier``; ``dropRoles()`` removes the roles again.
private struct SecureStore {
    let database: PostgresTestDatabase
    let suffix = String(UInt32.random(in: 0...UInt32.max), radix: 36)
    let group: String, alice: String, bob: String, carol: String
    let identifier = "com.example.secure"
    let aliceName: String, bobName: String, carolName: String
    /// The engine of the tables' owner.
    let owner: PostgresEngine

    init(roles: [KeyPath<SecureStore, String>: Set<SecurityRole>] = [:]) throws {
        database = try PostgresTestServer.makeDatabase()
        (group, alice, bob, carol) = ("stratus_users_\(suffix)", "alice_\(suffix)", "bob_\(suffix)", "carol_\(suffix)")
        try PostgresConnection(url: database.url).executeScript("""
            CREATE ROLE \(group) NOLOGIN;
            CREATE ROLE \(alice) LOGIN IN ROLE \(group);
            CREATE ROLE \(bob) LOGIN IN ROLE \(group);
            CREATE ROLE \(carol) LOGIN IN ROLE \(group);
            """)
        // The administrator creates the store and turns security on; the users are plain roles.
        owner = try PostgresEngine(url: database.url)
        try owner.enableRowLevelSecurity(group: group)
        (aliceName, bobName, carolName) = (UserDirectoryEntry.derivedRecordName(containerIdentifier: identifier, login: alice),
                                           UserDirectoryEntry.derivedRecordName(containerIdentifier: identifier, login: bob),
                                           UserDirectoryEntry.derivedRecordName(containerIdentifier: identifier, login: carol))
        // The administrator says who is who: each login and the user record name its rows carry.
        let entries = [UserDirectoryEntry(login: alice, userRecordName: aliceName, roles: roles[\.alice] ?? []),
                       UserDirectoryEntry(login: bob, userRecordName: bobName, roles: roles[\.bob] ?? []),
                       UserDirectoryEntry(login: carol, userRecordName: carolName, roles: [])]
        try owner.modifyUserDirectory(containerIdentifier: identifier, saving: entries, deletingLogins: [])
    }

    /// Alice's zone `Lists` holding `records` (made for the zone's ID; the first is the root),
    /// shared with Bob with `permission`, which Bob accepts through the tables' owner acting for
    /// him (accepting changes Alice's share record, which no member's role writes). Answers
    /// Alice's database on her own role, the zone, and Bob's container on the tables' owner.
    func shareAlicesList(bob permission: Share.ParticipantPermission, deletingBeforeSharing deleted: [String] = [], holding records: (RecordZone.ID) -> [Record]) async throws
        -> (alice: Database, lists: RecordZone.ID, bobAsAdministered: Container) {
        let alice = Container(identifier: identifier, engine: try engine(self.alice), userName: self.alice).privateCloudDatabase
        let lists = try await alice.save(RecordZone(zoneName: "Lists")).zoneID
        let stored = records(lists)
        try await TestDatabase.save(stored, in: alice)
        if !deleted.isEmpty { _ = try await alice.modifyRecords(saving: [], deleting: deleted.map { Record.ID(recordName: $0, zoneID: lists) }) }
        let storedRoot = try await alice.record(for: try #require(stored.first).recordID)
        let share = Share(rootRecord: storedRoot)
        let invited = Share.Participant(userIdentity: UserIdentity(userRecordID: Record.ID(recordName: bobName)))
        invited.permission = permission
        share.addParticipant(invited)
        let (saved, _) = try await alice.modifyRecords(saving: [storedRoot, share], deleting: [])
        let url = try #require((try saved[share.recordID]?.get() as? Share)?.url)
        let bobAsAdministered = Container(identifier: identifier, engine: owner, userName: bob)
        try await bobAsAdministered.accept(try await bobAsAdministered.shareMetadata(for: url))
        return (alice, lists, bobAsAdministered)
    }

    func url(_ role: String) throws -> String { try PostgresConnectionString.replacing(["user": role], in: database.url) }
    func engine(_ role: String) throws -> PostgresEngine { try PostgresEngine(url: try url(role)) }
    func raw(_ role: String) throws -> PostgresConnection { try PostgresConnection(url: try url(role)) }

    func dropRoles() {
        try? PostgresConnection(url: database.url).executeScript("DROP OWNED BY \(alice), \(bob), \(carol), \(group); DROP ROLE IF EXISTS \(alice), \(bob), \(carol), \(group)")
    }
}
