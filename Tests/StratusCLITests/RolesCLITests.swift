import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

/// CloudKit's security roles through the tool: a creator, another signed-in user, a custom
/// role the user directory gives, and `--anonymous`, for a type with the public defaults and a
/// type written by moderators.
@Suite("stratus and security roles", .timeLimit(.minutes(30)))
struct RolesCLITests {
    static func record(_ name: String, _ type: String, _ text: String) -> String {
        #"{"recordName":"\#(name)","recordType":"\#(type)","fields":{"text":{"value":"\#(text)","type":"STRING"}}}"# + "\n"
    }

    @Test("--keep-system-records restores another user's Users record only as an administrator, and never lets one user write another's", arguments: TestEngine.all)
    func keepSystemRecordsKeepsRoles(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            try await cli.createStore()
            let victim = try await cli.container(user: "victim").userRecordID().recordName
            // The victim's own Users record is made on its first fetch.
            #expect(try await cli.run(["get", victim, "--user", "victim"]).exitCode == 0)
            let line = #"{"recordName":"\#(victim)","recordType":"Users","fields":{"nickname":{"value":"pwned","type":"STRING"}}}"# + "\n"
            let overwrite = try await cli.run(["import", try cli.file("u.ndjson", line), "--keep-system-records", "--user", "mallory"])
            #expect(overwrite.exitCode == 1 && overwrite.stderr.contains("WRITE operation not permitted"), "\(overwrite)")
            let mine = try await cli.run(["get", victim, "--user", "victim"])
            #expect(!mine.stdout.contains("pwned"), "\(mine)")
            // Its user may, and so may an import that restores a store as an administrator.
            #expect(try await cli.run(["import", try cli.file("own.ndjson", line), "--keep-system-records", "--user", "victim", "--quiet"]).exitCode == 0)

            // A Users record the store does not hold yet: a user may not fill in another user's
            // before that user comes; an administrator restores it, as an export's are.
            let absent = "_" + String(repeating: "c", count: 32)
            let restoreFile = try cli.file("r.ndjson", #"{"recordName":"\#(absent)","recordType":"Users","fields":{"nickname":{"value":"pwned","type":"STRING"}}}"# + "\n")
            let preseed = try await cli.run(["import", restoreFile, "--keep-system-records", "--user", "mallory"])
            #expect(preseed.exitCode == 1 && preseed.stderr.contains("--as-administrator"), "\(preseed)")
            let restore = try await cli.run(["import", restoreFile, "--keep-system-records", "--as-administrator", "--quiet"])
            #expect(restore.exitCode == 0, "\(restore)")

            // Nor may a user take another's user record name for a record of another type: it
            // would be answered as that user's own record once they come.
            let dave = try await cli.container(user: "dave").userRecordID().recordName
            let squat = try await cli.run(["import", try cli.file("s.ndjson", Self.record(dave, "Post", "squat")), "--keep-system-records", "--user", "mallory"])
            #expect(squat.exitCode == 1 && squat.stderr.contains("names only that user's Users record"), "\(squat)")
            let own = try await cli.run(["get", dave, "--user", "dave"])
            #expect(own.exitCode == 0 && own.stdout.contains(#""recordType":"Users""#), "\(own)")
        }
    }

    @Test("a public zone, which holds every user's records, is deleted only with --as-administrator; its records stay until then", arguments: TestEngine.all)
    func publicZoneDeletionNeedsAdministrator(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            #expect(try await cli.run(["zones", "create", "Forum", "--user", "alice"]).exitCode == 0)
            let post = try cli.file("p.ndjson", Self.record("p", "Post", "alice's post"))
            #expect(try await cli.run(["import", post, "--zone", "Forum", "--user", "alice", "--quiet"]).exitCode == 0)
            for user in ["bob", "alice"] {
                let refused = try await cli.run(["zones", "delete", "Forum", "--yes", "--user", user])
                #expect(refused.exitCode == 1 && refused.stderr.contains("only the store's administrator") && refused.stderr.contains("--as-administrator"), "\(refused)")
            }
            #expect(try await cli.run(["get", "p", "--zone", "Forum", "--user", "bob"]).exitCode == 0)
            let privateOnly = try await cli.run(["zones", "delete", "Forum", "--yes", "--as-administrator", "--database", "private"])
            #expect(privateOnly.exitCode == 64, "\(privateOnly)")
            let deleted = try await cli.run(["zones", "delete", "Forum", "--yes", "--as-administrator"])
            #expect(deleted.exitCode == 0 && deleted.stdout.contains(#""deleted":true"#), "\(deleted)")
            #expect(try await cli.run(["get", "p", "--zone", "Forum", "--user", "alice"]).exitCode != 0)
        }
    }

    @Test("changes leaves out the records a user may not read, counting them, and goes on: one creator-only record never holds another user's feed up", arguments: TestEngine.all)
    func changesLeaveOutUnreadable(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let schema = """
                DEFINE SCHEMA
                    RECORD TYPE Note (
                        "___recordID" REFERENCE QUERYABLE,
                        text STRING,
                        GRANT CREATE TO "_icloud",
                        GRANT READ, WRITE TO "_creator"
                    );
                    RECORD TYPE Post (
                        "___recordID" REFERENCE QUERYABLE,
                        text STRING,
                        GRANT WRITE TO "_creator",
                        GRANT CREATE TO "_icloud",
                        GRANT READ TO "_world"
                    );
                """
            #expect(try await cli.run(["schema", "import", try cli.file("diary.ckdb", schema)]).exitCode == 0)
            let input = Self.record("p1", "Post", "hello") + Self.record("n1", "Note", "secret") + Self.record("p2", "Post", "world")
            #expect(try await cli.run(["import", try cli.file("in.ndjson", input), "--user", "alice", "--quiet"]).exitCode == 0)

            let token = store.path("bob.token")
            let bob = try await cli.run(["changes", "--token-file", token, "--user", "bob"])
            #expect(bob.exitCode == 0, "\(bob)")
            #expect(bob.stdoutLines.map { (try? JSONLine.object($0)["recordName"] as? String) ?? "?" } == ["p1", "p2"], "\(bob.stdout)")
            #expect(!bob.stdout.contains("secret"))
            #expect(bob.stderr.contains("left out 1 changed record(s) this user may not read"), "\(bob.stderr)")
            let again = try await cli.run(["changes", "--token-file", token, "--user", "bob"])
            #expect(again.exitCode == 0 && again.stdout.isEmpty, "the token moved past it: \(again)")

            // No user signed in: the same, not held up by the records only signed-in users may read.
            let anonymous = try await cli.run(["changes", "--token-file", store.path("anonymous.token"), "--anonymous"])
            #expect(anonymous.exitCode == 0 && anonymous.stdoutLines.count == 2 && anonymous.stderr.contains("left out 1"), "\(anonymous)")
            let alice = try await cli.run(["changes", "--token-file", store.path("alice.token"), "--user", "alice"])
            #expect(alice.exitCode == 0 && alice.stdoutLines.count == 3 && !alice.stderr.contains("left out"), "\(alice)")
        }
    }

    @Test("a schema file's type without GRANT lines grants nothing, as CloudKit's schema language says: the public database refuses its records, the private one takes them, and it exports without GRANT lines", arguments: TestEngine.all)
    func typeWithoutGrantsGrantsNothing(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let file = try cli.file("wallet.ckdb", "DEFINE SCHEMA\n    RECORD TYPE WalletBackup (\n        network STRING\n    );\n")
            #expect(try await cli.run(["schema", "import", file]).exitCode == 0)
            let exported = try await cli.run(["schema", "export"])
            let walletType = exported.stdout.components(separatedBy: "RECORD TYPE WalletBackup").last ?? ""
            #expect(exported.exitCode == 0 && !(walletType.components(separatedBy: ");").first ?? "GRANT").contains("GRANT"), "\(exported.stdout)")
            let diff = try await cli.run(["schema", "diff", file])
            #expect(diff.exitCode == 0, "the file and the store agree: \(diff)")

            let input = Self.record("b1", "WalletBackup", "main")
            let refused = try await cli.run(["import", try cli.file("in.ndjson", input), "--user", "alice"])
            #expect(refused.exitCode == 1 && refused.stderr.contains("it grants nothing"), "\(refused)")
            let privately = try await cli.run(["import", try cli.file("in.ndjson", input), "--user", "alice", "--database", "private", "--quiet"])
            #expect(privately.exitCode == 0, "\(privately)")
            #expect(try await cli.run(["get", "b1", "--user", "alice", "--database", "private"]).stdout.contains("main"))

            // A file that takes a type's grants away, where records are at stake, says so.
            let open = try cli.file("open.ckdb", "DEFINE SCHEMA RECORD TYPE WalletBackup (network STRING, GRANT READ TO \"_world\");\n")
            #expect(try await cli.run(["schema", "import", open]).exitCode == 0)
            let sealed = try await cli.run(["schema", "import", file])
            #expect(sealed.exitCode == 0 && sealed.stderr.contains("WalletBackup (1 record in all databases) no GRANT lines, so it now grants nothing"), "\(sealed)")
        }
    }

    @Test("--anonymous with the private or shared database is refused (77) saying to leave out --anonymous or give --user, not the Swift API's advice", arguments: TestEngine.all)
    func anonymousPrivateDatabaseSaysWhichOption(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            try await cli.createStore()
            for (arguments, database) in [(["count", "--type", "Note"], "private"), (["query", "--type", "Note"], "shared"), (["zones", "list"], "private")] {
                let refused = try await cli.run(arguments + ["--anonymous", "--database", database])
                #expect(refused.exitCode == 77 && refused.stdout.isEmpty, "\(refused)")
                #expect(refused.stderr.contains("the \(database) database needs a signed-in user") && refused.stderr.contains("leave out --anonymous, or give --user NAME"), "\(refused)")
                #expect(!refused.stderr.contains("open it with a user name") && !refused.stderr.contains("this container"), "no Swift API wording: \(refused)")
            }
            let signedIn = try await cli.run(["count", "--type", "Note", "--database", "private"])
            #expect(signedIn.exitCode == 0 && signedIn.stdout == "0\n", "\(signedIn)")
        }
    }

    @Test("the role matrix item by item: create, read, change and delete as creator, other user, moderator and no user", arguments: TestEngine.all)
    func roleMatrix(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let schema = """
                DEFINE SCHEMA
                    CREATE ROLE moderator;
                    RECORD TYPE Notice (
                        "___recordID" REFERENCE QUERYABLE,
                        text STRING,
                        GRANT READ TO "_world",
                        GRANT CREATE, WRITE TO moderator
                    );
                    RECORD TYPE Post (
                        "___recordID" REFERENCE QUERYABLE,
                        text STRING,
                        GRANT WRITE TO "_creator",
                        GRANT CREATE TO "_icloud",
                        GRANT READ TO "_world"
                    );
                """
            #expect(try await cli.run(["schema", "import", try cli.file("forum.ckdb", schema)]).exitCode == 0)
            // The administrator gives carol the moderator role.
            try await cli.container(user: "admin").assignRoles(["moderator"], toLogin: "carol")
            func run(_ user: String?, _ arguments: [String]) async throws -> CLI.Result {
                try await cli.run(arguments + (user.map { ["--user", $0] } ?? ["--anonymous"]))
            }
            func create(_ user: String?, _ name: String, _ type: String) async throws -> Int32 {
                try await run(user, ["import", try cli.file("\(name).ndjson", Self.record(name, type, "by \(user ?? "nobody")")), "--quiet", "--mode", "create"]).exitCode
            }
            func change(_ user: String?, _ name: String, _ type: String) async throws -> Int32 {
                try await run(user, ["import", try cli.file("\(name)-change.ndjson", Self.record(name, type, "changed by \(user ?? "nobody")")), "--quiet", "--mode", "forceReplace"]).exitCode
            }
            func read(_ user: String?, _ name: String) async throws -> Int32 { try await run(user, ["get", name]).exitCode }
            func delete(_ user: String?, _ name: String) async throws -> Int32 { try await run(user, ["delete", name, "--yes", "--quiet"]).exitCode }

            // Post (CloudKit's public defaults): CREATE _icloud, READ _world, WRITE _creator.
            #expect(try await create("alice", "post-a", "Post") == 0)
            #expect(try await create("bob", "post-b", "Post") == 0)
            #expect(try await create("carol", "post-c", "Post") == 0)
            #expect(try await create(nil, "post-n", "Post") == 1, "no user creates nothing")
            for user in ["alice", "bob", "carol", nil] {
                #expect(try await read(user, "post-a") == 0, "\(user ?? "no user") reads a post")
            }
            #expect(try await change("bob", "post-a", "Post") == 1)
            #expect(try await change("carol", "post-a", "Post") == 1)
            #expect(try await change(nil, "post-a", "Post") == 1)
            #expect(try await change("alice", "post-a", "Post") == 0)
            #expect(try await delete("bob", "post-a") != 0)
            #expect(try await delete(nil, "post-a") != 0)
            #expect(try await read("alice", "post-a") == 0, "still there")
            #expect(try await delete("alice", "post-a") == 0)
            #expect(try await read("alice", "post-a") == 1, "deleted by its creator")

            // Notice: CREATE and WRITE the moderator role, READ _world.
            #expect(try await create("alice", "notice-a", "Notice") == 1)
            #expect(try await create(nil, "notice-n", "Notice") == 1)
            #expect(try await create("carol", "notice-c", "Notice") == 0)
            for user in ["alice", "bob", "carol", nil] {
                #expect(try await read(user, "notice-c") == 0, "\(user ?? "no user") reads a notice")
            }
            #expect(try await change("alice", "notice-c", "Notice") == 1)
            #expect(try await change("carol", "notice-c", "Notice") == 0)
            #expect(try await delete("bob", "notice-c") != 0)
            #expect(try await delete("carol", "notice-c") == 0)

            // What a refusal says.
            let refused = try await run("bob", ["import", try cli.file("refused.ndjson", Self.record("post-c", "Post", "mine now")), "--mode", "forceReplace"])
            #expect(refused.stderr.contains("permissionFailure") && refused.stderr.contains("WRITE operation not permitted"), "\(refused)")
            let anonymous = try await run(nil, ["import", try cli.file("anon.ndjson", Self.record("x", "Post", "hi"))])
            #expect(anonymous.stderr.contains("notAuthenticated"), "\(anonymous)")
            // Nor does a save that would change nothing pass as "unchanged" for no user, who
            // writes nothing (found by a PostgreSQL tester); a signed-in reader's re-run does.
            #expect(try await create("alice", "post-same", "Post") == 0)
            let same = Self.record("post-same", "Post", "by alice")
            let unchangedAnonymously = try await run(nil, ["import", try cli.file("same.ndjson", same)])
            #expect(unchangedAnonymously.exitCode != 0 && unchangedAnonymously.stderr.contains("notAuthenticated")
                    && !unchangedAnonymously.stderr.contains("unchanged 1"), "\(unchangedAnonymously)")
            let unchangedForBob = try await run("bob", ["import", try cli.file("same.ndjson", same)])
            #expect(unchangedForBob.exitCode == 0 && unchangedForBob.stderr.contains("unchanged 1"), "\(unchangedForBob)")
            // No user has no private database.
            let privateRead = try await run(nil, ["query", "--type", "Post", "--database", "private"])
            #expect(privateRead.exitCode == 77 && privateRead.stderr.contains("notAuthenticated"), "\(privateRead)")
            #expect(try await cli.run(["get", "post-c", "--anonymous", "--user", "bob"]).exitCode == 64, "--anonymous and --user exclude each other")
        }
    }
}
