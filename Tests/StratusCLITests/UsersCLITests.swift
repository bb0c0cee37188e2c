import Foundation
@_spi(StratusEngine) import Stratus
import StratusPostgres
import StratusTestSupport
import Testing

/// `stratus users`: the user directory from the command line, and PostgreSQL's row-level
/// security set up by the tool, with each Stratus user a database role.
@Suite("stratus users", .timeLimit(.minutes(30)))
struct UsersCLITests {
    @Test("users add, list and remove the directory; a login's private records carry the record name it maps to", arguments: TestEngine.all)
    func directory(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let added = try await cli.run(["users", "add", "carol", "--role", "moderator"])
            #expect(added.exitCode == 0 && added.stderr.contains("added carol"), "\(added)")
            #expect(added.stderr.contains("note: the development schema declares no role yet, not moderator: the role grants nothing until a schema declares it"), "a misspelt role is said to grant nothing: \(added)")
            let schema = try cli.file("roles.ckdb", "DEFINE SCHEMA\n    CREATE ROLE moderator;\n")
            let schemaImport = try await cli.run(["schema", "import", schema])
            #expect(schemaImport.exitCode == 0, "\(schemaImport)")
            let declared = try await cli.run(["users", "add", "carol", "--role", "moderator"])
            #expect(declared.exitCode == 0 && !declared.stderr.contains("note:"), "\(declared)")
            let imported = "_0123456789abcdef0123456789abcdef"
            #expect(try await cli.run(["users", "add", "dave", "--record-name", imported]).exitCode == 0)
            // A record name another login has is the command's data in conflict: 65, not an internal error.
            let taken = try await cli.run(["users", "add", "dave2", "--record-name", imported])
            #expect(taken.exitCode == 65 && taken.stderr.contains("another login"), "\(taken)")
            // On PostgreSQL, row-level security knows users by record name in every container:
            // another container's login with Dave's name would read his private rows there
            // (found by a PostgreSQL tester). Dave himself may have it in another container.
            #expect(try await cli.run(["users", "add", "dave", "--record-name", imported, "--container", "com.example.other"]).exitCode == 0)
            let elsewhere = try await cli.run(["users", "add", "mallory", "--record-name", imported, "--container", "com.example.third"])
            if engine == .postgres {
                #expect(elsewhere.exitCode == 65 && elsewhere.stderr.contains("login 'dave' of container")
                        && elsewhere.stderr.contains("names one login in every container"), "\(elsewhere)")
            } else {
                #expect(elsewhere.exitCode == 0, "record names are per container: \(elsewhere)")
            }
            // CloudKit's names for the current user and its roles name no one user.
            for reserved in ["__defaultOwner__", "_world", "_icloud", "_creator"] {
                let refused = try await cli.run(["users", "add", "eve", "--record-name", reserved])
                #expect(refused.exitCode == 64 && refused.stderr.contains("not a user's"), "\(reserved): \(refused)")
            }
            if engine == .sqlite {
                // Refused before the store is opened: a mistyped name makes no store.
                let unmade = store.path("unmade.sqlite")
                let plain = try await cli.run(["users", "add", "eve", "--record-name", "plain", "--store", unmade])
                #expect(plain.exitCode == 64 && plain.stderr.contains("does not start with '_'") && !cli.exists(unmade), "\(plain)")
            }
            let carol = UserDirectoryEntry.derivedRecordName(containerIdentifier: "default", login: "carol")
            let list = try await cli.run(["users", "list"])
            #expect(list.exitCode == 0 && list.stdoutLines == ["carol\t\(carol)\tmoderator", "dave\t\(imported)\t"], "\(list)")
            let json = try await cli.run(["users", "list", "--json"])
            #expect(try JSONLine.objects(json.stdout).map { $0["userRecordName"] as? String } == [carol, imported])

            // Dave's private records are owned by the record name the directory gives him.
            #expect(try await cli.run(["import", "--quiet", "--database", "private", "--user", "dave"], stdin: Input.notes(2)).exitCode == 0)
            let info = try JSONLine.object(try await cli.run(["info", "--json"]).stdout.trimmingCharacters(in: .newlines))
            let owners = ((info["containers"] as? [[String: Any]])?.first?["databases"] as? [[String: Any]])?.compactMap { $0["owner"] as? String }
            #expect(owners == [imported], "\(info)")

            let removed = try await cli.run(["users", "remove", "carol", "nobody"])
            #expect(removed.exitCode == 0 && removed.stderr.contains("not in the directory: nobody"), "\(removed)")
            #expect(try await cli.run(["users", "list"]).stdoutLines == ["dave\t\(imported)\t"])

            for arguments in [["users"], ["users", "add"], ["users", "add", "x", "--role", "_world"], ["users", "list", "--role", "x"], ["users", "row-security"], ["users", "frob"]] {
                #expect(try await cli.run(arguments).exitCode == 64, "\(arguments)")
            }
            if engine == .sqlite {
                let refused = try await cli.run(["users", "row-security", "--group", "stratus_users"])
                #expect(refused.exitCode == 64 && refused.stderr.contains("PostgreSQL"), "\(refused)")
            }
        }
    }

    @Test("a login the directory maps to a CloudKit owner imports that owner's zones as its own, and re-imports its own export; another owner is refused with advice that keeps the owner", arguments: TestEngine.all)
    func mappedLoginImportsItsOwnersZones(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let owner = "_0123456789abcdef0123456789abcdef"
            #expect(try await cli.run(["users", "add", "me", "--record-name", owner]).exitCode == 0)
            let line = #"{"recordName":"n1","recordType":"Note","fields":{"t":{"value":"hi","type":"STRING"}},"zoneID":{"zoneName":"Work","ownerRecordName":"\#(owner)"}}"#
            let imported = try await cli.run(["import", try cli.file("mine.ndjson", line + "\n"), "--database", "private", "--user", "me", "--create-zones"])
            #expect(imported.exitCode == 0 && imported.stderr.contains("imported 1"), "\(imported)")
            let exported = try await cli.run(["export", "--type", "Note", "--database", "private", "--zone", "Work", "--user", "me", "--quiet"])
            #expect(exported.stdout.contains(#""ownerRecordName":"\#(owner)""#), "\(exported)")
            let again = try await cli.run(["import", try cli.file("export.ndjson", exported.stdout), "--database", "private", "--user", "me"])
            #expect(again.exitCode == 0 && again.stderr.contains("unchanged 1"), "\(again)")

            let other = line.replacingOccurrences(of: owner, with: "_fedcba9876543210fedcba9876543210")
            let refused = try await cli.run(["import", try cli.file("other.ndjson", other + "\n"), "--database", "private", "--user", "me", "--create-zones"])
            #expect(refused.exitCode == 77 && refused.stderr.contains("user record name \(owner)") && refused.stderr.contains("stratus users add LOGIN --record-name _fedcba9876543210fedcba9876543210"), "\(refused)")
            // An owner named like a login (a Stratus export's) is that login's: --user.
            let login = line.replacingOccurrences(of: owner, with: "bob")
            let byLogin = try await cli.run(["import", try cli.file("bob.ndjson", login + "\n"), "--database", "private", "--user", "me", "--create-zones"])
            #expect(byLogin.exitCode == 77 && byLogin.stderr.contains("or as that user (--user bob)") && !byLogin.stderr.contains("users add"), "\(byLogin)")
        }
    }

    @Test("--quiet leaves out what users and schema commands say of work done, and keeps what is worth a look", arguments: TestEngine.all)
    func quietDirectoryAndSchema(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let schema = try cli.file("roles.ckdb", "DEFINE SCHEMA\n    CREATE ROLE editor;\n    RECORD TYPE Note (\n        title STRING,\n        GRANT READ TO \"_world\"\n    );\n")
            for command in [["schema", "validate", schema], ["schema", "import", schema], ["users", "add", "carol", "--role", "editor"],
                            ["users", "edit", "carol", "--email", "carol@example.com"], ["users", "remove", "carol"],
                            ["schema", "export", "--output", store.path("out.ckdb")], ["schema", "deploy"]] {
                let quiet = try await cli.run(command + ["--quiet"])
                #expect(quiet.exitCode == 0 && quiet.stderr.isEmpty, "\(command): \(quiet)")
            }
            let missing = try await cli.run(["users", "remove", "nobody", "--quiet"])
            #expect(missing.exitCode == 0 && missing.stderr.contains("not in the directory: nobody"), "\(missing)")
        }
    }

    @Test("users list quotes a role that is not a plain word, so a role named a,b is not read as two; a role no schema could declare is refused", arguments: TestEngine.all)
    func rolesListedUnambiguously(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let schema = try cli.file("roles.ckdb", "DEFINE SCHEMA\n    CREATE ROLE \"a,b\";\n    CREATE ROLE c;\n    CREATE ROLE \"test role\";\n")
            #expect(try await cli.run(["schema", "import", schema]).exitCode == 0)
            let added = try await cli.run(["users", "add", "carol", "--role", "a,b", "--role", "c", "--role", "test role"])
            #expect(added.exitCode == 0 && !added.stderr.contains("note:"), "\(added)")
            let carol = UserDirectoryEntry.derivedRecordName(containerIdentifier: "default", login: "carol")
            let list = try await cli.run(["users", "list"])
            #expect(list.stdoutLines == ["carol\t\(carol)\t\"a,b\",c,\"test role\""], "\(list)")
            let json = try JSONLine.object(try await cli.run(["users", "list", "--json"]).stdout.trimmingCharacters(in: .newlines))
            #expect(json["roles"] as? [String] == ["a,b", "c", "test role"])
            for role in ["x\"y", "tab\there", "line\nbreak"] {
                let refused = try await cli.run(["users", "add", "dave", "--role", role])
                #expect(refused.exitCode == 64 && refused.stderr.contains("a double quote or a control character"), "\(role): \(refused)")
            }
            #expect(try await cli.run(["users", "list"]).stdoutLines.count == 1, "a refused add saved nothing")
        }
    }

    @Test("two logins that differ only in how their characters are composed are two users: the second add says added, and notes the first", arguments: TestEngine.all)
    func loginsAreComparedByBytes(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let composed = "jos\u{E9}", decomposed = "jose\u{301}"
            let first = try await cli.run(["users", "add", composed, "--record-name", "_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"])
            #expect(first.exitCode == 0 && first.stderr.contains("added"), "\(first)")
            let second = try await cli.run(["users", "add", decomposed, "--record-name", "_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"])
            #expect(second.exitCode == 0 && second.stderr.contains("added") && !second.stderr.contains("replaced"), "\(second)")
            #expect(second.stderr.contains("only in how its Unicode characters are composed") && second.stderr.contains("_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"), "\(second)")
            let again = try await cli.run(["users", "add", composed, "--record-name", "_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"])
            #expect(again.stderr.contains("replaced") && !again.stderr.contains("note:"), "the same bytes are the same login: \(again)")
            let list = try await cli.run(["users", "list"])
            #expect(list.stdout.contains("_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa") && list.stdout.contains("_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"), "\(list.stdout)")
            #expect(second.stderr.contains("U+00E9") && second.stderr.contains("U+0301"), "the note spells out the two: \(second.stderr)")
            let removed = try await cli.run(["users", "remove", decomposed])
            #expect(removed.exitCode == 0 && removed.stderr.contains("removed 1 of 1"), "\(removed)")
            let gone = try await cli.run(["users", "remove", decomposed])
            #expect(gone.stderr.contains("removed 0 of 1") && gone.stderr.contains("not in the directory"), "the composed login is another: \(gone)")
            let left = try await cli.run(["users", "list"])
            #expect(left.stdout.contains("_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa") && !left.stdout.contains("_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"), "\(left.stdout)")
        }
    }

    @Test("users add gives a login email addresses, phone numbers, a name and discoverability; list --json shows them; a later add keeps the login's consent unless told", arguments: TestEngine.all)
    func discoveryOptions(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let added = try await cli.run(["users", "add", "bob", "--email", "bob@example.com", "--email", "robert@example.com", "--phone", "+1 555 010 0100",
                                           "--given-name", "Bob", "--family-name", "Ross", "--discoverable", "--role", "a", "--role", "b"])
            #expect(added.exitCode == 0 && added.stderr.contains("added bob") && added.stderr.contains("discoverable"), "\(added)")
            let listed = try JSONLine.objects(try await cli.run(["users", "list", "--json"]).stdout)
            #expect(listed.count == 1)
            #expect(listed.first?["emailAddresses"] as? [String] == ["bob@example.com", "robert@example.com"])
            #expect(listed.first?["phoneNumbers"] as? [String] == ["+1 555 010 0100"] && listed.first?["discoverable"] as? Bool == true)
            #expect((listed.first?["name"] as? [String: String]) == ["givenName": "Bob", "familyName": "Ross"] && listed.first?["roles"] as? [String] == ["a", "b"])

            // Replaced without discoverability options: the consent stays, the addresses go.
            #expect(try await cli.run(["users", "add", "bob"]).exitCode == 0)
            let kept = try JSONLine.objects(try await cli.run(["users", "list", "--json"]).stdout).first
            #expect(kept?["discoverable"] as? Bool == true && (kept?["emailAddresses"] as? [String])?.isEmpty == true, "\(String(describing: kept))")
            #expect(try await cli.run(["users", "add", "bob", "--undiscoverable"]).exitCode == 0)
            #expect(try JSONLine.objects(try await cli.run(["users", "list", "--json"]).stdout).first?["discoverable"] as? Bool == false)

            // Another login's address is the data in conflict (65); malformed input is a usage error (64).
            #expect(try await cli.run(["users", "add", "bob", "--email", "bob@example.com"]).exitCode == 0)
            let taken = try await cli.run(["users", "add", "eve", "--email", "BOB@example.com"])
            #expect(taken.exitCode == 65 && taken.stderr.contains("login 'bob'"), "\(taken)")
            for arguments in [["users", "add", "eve", "--email", "eve"], ["users", "add", "eve", "--phone", "call me"],
                              ["users", "add", "eve", "--discoverable", "--undiscoverable"], ["users", "list", "--email", "x@example.com"]] {
                let refused = try await cli.run(arguments)
                #expect(refused.exitCode == 64, "\(arguments): \(refused)")
            }
        }
    }

    @Test("users edit changes what it names and keeps the rest of the entry; a login without an entry is 66, an edit without a change or with add's contradictions 64", arguments: TestEngine.all)
    func edit(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let imported = "_0123456789abcdef0123456789abcdef"
            #expect(try await cli.run(["users", "add", "bob", "--record-name", imported, "--email", "bob@example.com", "--email", "robert@example.com",
                                       "--phone", "+1 555 010 0100", "--given-name", "Bob", "--family-name", "Ross", "--role", "a", "--discoverable"]).exitCode == 0)

            let edited = try await cli.run(["users", "edit", "bob", "--remove-email", "BOB@example.com", "--email", "bob@example.org", "--email", "Robert@Example.com",
                                            "--role", "b", "--remove-role", "a", "--given-name", "Robert", "--remove-phone", "+1 555 999 9999"])
            #expect(edited.exitCode == 0 && edited.stderr.contains("edited bob: \(imported) with b, discoverable"), "\(edited)")
            #expect(edited.stderr.contains("note: --remove-phone +1 555 999 9999: bob did not have it"), "a removal that removes nothing is told: \(edited)")
            let bob = try #require(try JSONLine.objects(try await cli.run(["users", "list", "--json"]).stdout).first)
            #expect(bob["userRecordName"] as? String == imported && bob["roles"] as? [String] == ["b"] && bob["discoverable"] as? Bool == true, "\(bob)")
            #expect(bob["emailAddresses"] as? [String] == ["robert@example.com", "bob@example.org"], "\(bob)")
            #expect(bob["phoneNumbers"] as? [String] == ["+1 555 010 0100"], "\(bob)")
            #expect(bob["name"] as? [String: String] == ["givenName": "Robert", "familyName": "Ross"], "\(bob)")

            // An empty name clears it; discoverability is set only when asked.
            #expect(try await cli.run(["users", "edit", "bob", "--given-name", "", "--family-name", "", "--undiscoverable"]).exitCode == 0)
            let cleared = try #require(try JSONLine.objects(try await cli.run(["users", "list", "--json"]).stdout).first)
            #expect(cleared["name"] == nil && cleared["discoverable"] as? Bool == false && cleared["roles"] as? [String] == ["b"], "\(cleared)")
            // An edit that changes nothing saves nothing and says so.
            let same = try await cli.run(["users", "edit", "bob", "--role", "b"])
            #expect(same.exitCode == 0 && same.stderr.contains("bob unchanged"), "\(same)")

            // Another login's address is the data in conflict (65), as for add.
            #expect(try await cli.run(["users", "add", "eve"]).exitCode == 0)
            let taken = try await cli.run(["users", "edit", "eve", "--email", "ROBERT@example.com"])
            #expect(taken.exitCode == 65 && taken.stderr.contains("login 'bob'"), "\(taken)")

            let missing = try await cli.run(["users", "edit", "nobody", "--role", "a"])
            #expect(missing.exitCode == 66 && missing.stderr.contains("stratus users add nobody"), "\(missing)")
            #expect(try await cli.run(["users", "list"]).stdoutLines.map { $0.split(separator: "\t").first.map(String.init) } == ["bob", "eve"])
            for arguments in [["users", "edit", "bob"], ["users", "edit", "bob", "--discoverable", "--undiscoverable"], ["users", "edit", "bob", "--email", "bob"],
                              ["users", "edit", "bob", "eve", "--role", "a"], ["users", "add", "bob", "--remove-role", "a"], ["users", "edit", "bob", "--role", "_world"]] {
                let refused = try await cli.run(arguments)
                #expect(refused.exitCode == 64, "\(arguments): \(refused)")
            }
        }
    }

    // PostgreSQL only: row-level security and roles are PostgreSQL's.
    @Test("users row-security --print shows the SQL; applied, a role that connects without --user acts as itself and reaches only its own private rows")
    func rowSecurity() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: .postgres)
            let suffix = String(UInt32.random(in: 0...UInt32.max), radix: 36)
            let (group, alice, bob) = ("cli_users_\(suffix)", "cli_alice_\(suffix)", "cli_bob_\(suffix)")
            let admin = try PostgresConnection(url: cli.storePath)
            try admin.executeScript("CREATE ROLE \(group) NOLOGIN; CREATE ROLE \(alice) LOGIN IN ROLE \(group); CREATE ROLE \(bob) LOGIN IN ROLE \(group);")
            defer { try? admin.executeScript("DROP OWNED BY \(alice), \(bob), \(group); DROP ROLE IF EXISTS \(alice), \(bob), \(group)") }
            // On a new database, as the README's setup runs it: the command makes the tables
            // (found by a PostgreSQL tester: it was refused, exit 66).
            let applied = try await cli.run(["users", "row-security", "--group", group])
            #expect(applied.exitCode == 0, "\(applied)")
            let printed = try await cli.run(["users", "row-security", "--group", "g", "--print"])
            #expect(printed.exitCode == 0 && printed.stdout.contains("CREATE POLICY") && printed.stdout.contains("ENABLE ROW LEVEL SECURITY"), "\(printed)")
            for login in [alice, bob] { #expect(try await cli.run(["users", "add", login]).exitCode == 0) }

            // Each user connects as its own role and gives no --user: Stratus acts as that role.
            func url(_ role: String) throws -> String { try PostgresConnectionString.replacing(["user": role], in: cli.storePath) }
            let noUser = ["STRATUS_USER": ""]
            let saved = try await cli.run(["import", "--quiet", "--database", "private", "--store", try url(alice)], stdin: Input.notes(3), environment: noUser)
            #expect(saved.exitCode == 0, "\(saved)")
            let aliceCount = try await cli.run(["count", "--type", "Note", "--database", "private", "--store", try url(alice)], environment: noUser)
            #expect(aliceCount.stdout == "3\n", "\(aliceCount)")
            let bobCount = try await cli.run(["count", "--type", "Note", "--database", "private", "--store", try url(bob)], environment: noUser)
            #expect(bobCount.stdout == "0\n", "\(bobCount)")
            // Bob saying he is alice finds none of her rows: the database keeps them from his role.
            let impostor = try await cli.run(["count", "--type", "Note", "--database", "private", "--user", alice, "--store", try url(bob)], environment: noUser)
            #expect(impostor.stdout != "3\n", "\(impostor)")
            #expect(impostor.exitCode == 77 && impostor.stderr.contains("connected as role \(bob), which row-level security keeps to its own user's rows") && impostor.stderr.contains("leave --user out"), "refused, saying why: \(impostor)")
            let byEnvironment = try await cli.run(["import", "--quiet", "--database", "private", "--store", try url(bob)], stdin: Input.notes(1, prefix: "x"), environment: ["STRATUS_USER": alice])
            #expect(byEnvironment.exitCode == 77 && byEnvironment.stderr.contains("unset STRATUS_USER"), "\(byEnvironment)")
            let himself = try await cli.run(["count", "--type", "Note", "--database", "private", "--user", bob, "--store", try url(bob)], environment: noUser)
            #expect(himself.exitCode == 0 && himself.stdout == "0\n", "naming the role's own user is fine: \(himself)")
            // A member may not change the directory, and is told who may.
            for change in [["users", "add", "zed"], ["users", "remove", bob]] {
                let refused = try await cli.run(change + ["--store", try url(alice)], environment: noUser)
                #expect(refused.exitCode == 77 && refused.stderr.contains("only the role that owns the store's tables changes the user directory"), "\(refused)")
            }
            let listed = try await cli.run(["users", "list"])
            // By the login column: a random suffix in base 36 may spell "zed" too.
            let logins = listed.stdout.split(separator: "\n").map { String($0.prefix { $0 != "\t" }) }
            #expect(logins.contains(bob) && !logins.contains("zed"), "\(listed)")
        }
    }

    // PostgreSQL only: a member of the row-level security group is a PostgreSQL role.
    @Test("schema reset by a member of the row-level security group is refused (77) saying a reset is the tables' owner's, and deletes nothing")
    func resetByMemberIsTheOwnersJob() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: .postgres)
            try await cli.createStore()
            let suffix = String(UInt32.random(in: 0...UInt32.max), radix: 36)
            let (group, erin) = ("reset_users_\(suffix)", "reset_erin_\(suffix)")
            let admin = try PostgresConnection(url: cli.storePath)
            try admin.executeScript("CREATE ROLE \(group) NOLOGIN; CREATE ROLE \(erin) LOGIN IN ROLE \(group);")
            defer { try? admin.executeScript("DROP OWNED BY \(erin), \(group); DROP ROLE IF EXISTS \(erin), \(group)") }
            #expect(try await cli.run(["users", "row-security", "--group", group]).exitCode == 0)
            #expect(try await cli.run(["users", "add", erin]).exitCode == 0)
            let noUser = ["STRATUS_USER": ""]
            let url = try PostgresConnectionString.replacing(["user": erin], in: cli.storePath)
            // The owner's records and erin's own, in a development schema that has a type production lacks.
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(2)).exitCode == 0)
            #expect(try await cli.run(["import", "--quiet", "--store", url], stdin: Input.notes(1, prefix: "e"), environment: noUser).exitCode == 0)

            let refused = try await cli.run(["schema", "reset", "--yes", "--store", url], environment: noUser)
            #expect(refused.exitCode == 77 && refused.stdout.isEmpty, "\(refused)")
            #expect(refused.stderr.contains("which is the job of the role that owns the store's tables") && refused.stderr.contains("role \(erin) is bound by row-level security"), "\(refused)")
            #expect(!refused.stderr.contains("permission denied for table"), "not only the server's words: \(refused)")
            #expect(try await cli.count("Note") == 3, "nothing deleted")
            let byOwner = try await cli.run(["schema", "reset", "--yes"])
            #expect(byOwner.exitCode == 0, "\(byOwner)")
            #expect(try await cli.count("Note") == 0)
        }
    }

    // PostgreSQL only: roles, groups and row-level security are PostgreSQL's.
    @Test("an administrator's mistakes say what to do: a member without a directory entry, a role outside the group (granted the tables or not), a group that does not exist, row-security for a second group, a port that is no number")
    func administratorMistakes() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: .postgres)
            try await cli.createStore()
            let suffix = String(UInt32.random(in: 0...UInt32.max), radix: 36)
            let (group, carol, dave) = ("mistake_users_\(suffix)", "mistake_carol_\(suffix)", "mistake_dave_\(suffix)")
            let admin = try PostgresConnection(url: cli.storePath)
            try admin.executeScript("CREATE ROLE \(group) NOLOGIN; CREATE ROLE \(carol) LOGIN IN ROLE \(group); CREATE ROLE \(dave) LOGIN;")
            defer { try? admin.executeScript("DROP OWNED BY \(carol), \(dave), \(group); DROP ROLE IF EXISTS \(carol), \(dave), \(group)") }

            let missing = try await cli.run(["users", "row-security", "--group", "no_such_group_\(suffix)"])
            #expect(missing.exitCode == 64 && missing.stderr.contains("there is no PostgreSQL role") && !missing.stderr.contains("SQLSTATE"), "\(missing)")
            #expect(try await cli.run(["users", "row-security", "--group", group]).exitCode == 0)
            #expect(try await cli.run(["users", "row-security", "--group", group]).exitCode == 0, "running it again is harmless")
            // Set up for another group (a login role given for the group), the policies would
            // leave the first group's members reading nothing, exit 0: refused, and nothing changes.
            let replacing = try await cli.run(["users", "row-security", "--group", dave])
            #expect(replacing.exitCode == 64 && replacing.stderr.contains("is set up for the group \(group)") && replacing.stderr.contains("GRANT \(group) TO \(dave)"), "\(replacing)")
            func url(_ role: String) throws -> String { try PostgresConnectionString.replacing(["user": role], in: cli.storePath) }
            let noUser = ["STRATUS_USER": ""]

            // Carol is in the group but has no entry: she owns no rows, and is told so.
            for database in ["public", "private"] {
                let imported = try await cli.run(["import", "--database", database, "--store", try url(carol)], stdin: Input.notes(2), environment: noUser)
                #expect(imported.exitCode == 77, "\(imported)")
                #expect(imported.stderr.contains("has no entry in the user directory") && imported.stderr.contains("stratus users add \(carol)"), "\(imported)")
                #expect(imported.stderr.contains("stopped by an error") && imported.stderr.contains("not written 2"), "no summary says failed 0 as if all went well: \(imported)")
            }
            // Dave is not in the group: the group to join is named.
            let outside = try await cli.run(["count", "--type", "Note", "--store", try url(dave)], environment: noUser)
            #expect(outside.exitCode == 77 && outside.stderr.contains("GRANT \(group) TO \(dave)") && outside.stderr.contains("stratus users add \(dave)"), "\(outside)")
            // Granted the tables outside the group (a reporting role), Dave would read no rows and
            // count 0, exit 0: refused too, naming the group.
            try admin.executeScript("""
                DO $$ BEGIN
                    EXECUTE format('GRANT USAGE ON SCHEMA %I TO \(dave)', current_schema());
                    EXECUTE format('GRANT SELECT ON ALL TABLES IN SCHEMA %I TO \(dave)', current_schema());
                END $$
                """)
            let granted = try await cli.run(["count", "--type", "Note", "--store", try url(dave)], environment: noUser)
            #expect(granted.exitCode == 77 && granted.stdout.isEmpty && granted.stderr.contains("row-level security gives it no rows")
                    && granted.stderr.contains("GRANT \(group) TO \(dave)"), "\(granted)")
            // The refused row-security for dave left the group's policies: carol, given an entry,
            // writes and reads her rows.
            #expect(try await cli.run(["users", "add", carol]).exitCode == 0)
            let written = try await cli.run(["import", "--quiet", "--store", try url(carol)], stdin: Input.notes(2), environment: noUser)
            #expect(written.exitCode == 0, "\(written)")
            let counted = try await cli.run(["count", "--type", "Note", "--store", try url(carol)], environment: noUser)
            #expect(counted.exitCode == 0 && counted.stdout == "2\n", "the group's members keep their rows: \(counted)")
            // A zone of the public database is the owner's to make: the refusal says so, not
            // that an entry in the directory is missing.
            let publicZone = try await cli.run(["zones", "create", "Board", "--database", "public", "--store", try url(carol)], environment: noUser)
            #expect(publicZone.exitCode == 77 && publicZone.stderr.contains("the public database's zones other than its default zone are the tables' owner's"), "\(publicZone)")
            let privateZone = try await cli.run(["zones", "create", "Board", "--database", "private", "--store", try url(carol)], environment: noUser)
            #expect(privateZone.exitCode == 0, "\(privateZone)")
            // An entry in one container gives no rows in another: the container is named.
            let otherContainer = try await cli.run(["import", "--container", "com.example.other", "--store", try url(carol)], stdin: Input.notes(1), environment: noUser)
            #expect(otherContainer.exitCode == 77 && otherContainer.stderr.contains("no entry in the user directory of container com.example.other")
                    && otherContainer.stderr.contains("stratus users add \(carol) --container com.example.other"), "\(otherContainer)")

            let settings = try PostgresConnectionString.settings(in: cli.storePath)
            let badPort = try await cli.run(["count", "--type", "Note", "--store", try PostgresConnectionString.replacing(["port": "notaport"], in: cli.storePath)])
            #expect(badPort.exitCode == 64 && badPort.stderr.contains("notaport"), "\(badPort)")
            let badMode = try await cli.run(["count", "--type", "Note", "--store", try PostgresConnectionString.replacing(["sslmode": "bogus"], in: cli.storePath)])
            #expect(badMode.exitCode == 64 && badMode.stderr.contains("bogus"), "\(badMode)")
            _ = settings
        }
    }

    // PostgreSQL only: libpq's password file (the store given is a PostgreSQL URL).
    @Test("without a password, the message names the password file PGPASSFILE names and what is wrong with it",
          .enabled(if: PostgresTestServer.passwordCheckingAddress != nil, "needs an address where the server checks passwords (STRATUS_TEST_POSTGRES_TCP)"))
    func missingPassword() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store)
            let address = try #require(PostgresTestServer.passwordCheckingAddress)
            let url = "postgresql://stratus_nobody@\(address.host):\(address.port)/postgres"
            let absent = try await cli.run(["count", "--type", "Note", "--store", url], environment: ["PGPASSFILE": store.path("no.pgpass")])
            #expect(absent.exitCode == 77 && absent.stderr.contains("PGPASSFILE names, \(store.path("no.pgpass")), which does not exist"), "\(absent)")
            let open = try cli.file("open.pgpass", "otherhost:5432:*:stratus_nobody:pw\n")
            chmod(open, 0o644)
            let ignored = try await cli.run(["count", "--type", "Note", "--store", url], environment: ["PGPASSFILE": open])
            #expect(ignored.exitCode == 77 && ignored.stderr.contains("others may read it (chmod 600"), "\(ignored)")
        }
    }
    // PostgreSQL only: logins, passwords and service files are PostgreSQL's.
    @Test("a role without LOGIN is refused for good (77), not an unreachable server (75); a wrong password from a service file is named as the service's, not PGPASSWORD's",
          .enabled(if: PostgresTestServer.passwordCheckingAddress != nil, "needs an address where the server checks passwords (STRATUS_TEST_POSTGRES_TCP)"))
    func loginRefusals() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: .postgres)
            try await cli.createStore()
            let suffix = String(UInt32.random(in: 0...UInt32.max), radix: 36)
            let (nologin, serviceUser) = ("nologin_\(suffix)", "service_user_\(suffix)")
            let admin = try PostgresConnection(url: cli.storePath)
            // CREATE ROLE makes a role without LOGIN unless told otherwise: a common slip.
            try admin.executeScript("CREATE ROLE \(nologin); CREATE ROLE \(serviceUser) LOGIN PASSWORD 'right-one';")
            defer { try? admin.executeScript("DROP ROLE IF EXISTS \(nologin), \(serviceUser)") }
            let noUser = ["STRATUS_USER": ""]
            let refused = try await cli.run(["count", "--type", "Note", "--store", try PostgresConnectionString.replacing(["user": nologin], in: cli.storePath)], environment: noUser)
            #expect(refused.exitCode == 77 && refused.stderr.contains("refused the login") && refused.stderr.contains("is not permitted to log in"), "\(refused)")
            #expect(refused.stderr.contains("ALTER ROLE \"\(nologin)\" LOGIN"), "says how the role is let in: \(refused)")

            // libpq prefers a service's password to PGPASSWORD: the right one in PGPASSWORD does
            // not help, and the message sends the administrator to the service file.
            let address = try #require(PostgresTestServer.passwordCheckingAddress)
            let services = try cli.file("services.conf", "[stratus_app]\nhost=\(address.host)\nport=\(address.port)\nuser=\(serviceUser)\ndbname=postgres\npassword=wrong-one\n")
            let environment = ["PGSERVICEFILE": services, "PGPASSWORD": "right-one", "PGPASSFILE": store.path("none.pgpass")].merging(noUser) { $1 }
            let viaService = try await cli.run(["count", "--type", "Note", "--store", "postgresql://?service=stratus_app"], environment: environment)
            #expect(viaService.exitCode == 77, "\(viaService)")
            #expect(viaService.stderr.contains("the password came from the password= line of service stratus_app in the service file (\(services))"), "\(viaService)")
            #expect(!viaService.stderr.contains("PGPASSWORD environment variable"), "\(viaService)")
            #expect(!(viaService.stdout + viaService.stderr).contains("wrong-one") && !(viaService.stdout + viaService.stderr).contains("right-one"), "no password shown: \(viaService)")
            // A password file's line is named by libpq itself, once.
            let passfile = try cli.file("stale.pgpass", "\(address.host):\(address.port):*:\(serviceUser):stale-one\n")
            chmod(passfile, 0o600)
            let viaFile = try await cli.run(["count", "--type", "Note", "--store", "postgresql://\(serviceUser)@\(address.host):\(address.port)/postgres"],
                                            environment: ["PGPASSFILE": passfile].merging(noUser) { $1 })
            #expect(viaFile.exitCode == 77 && viaFile.stderr.components(separatedBy: passfile).count == 2 && !viaFile.stderr.contains("stale-one"), "\(viaFile)")
        }
    }

    // PostgreSQL only: COPY under row-level security, in the server's log.
    @Test("a member's import writes new records with statements from its first batch: it leaves no refused COPY in the server's log",
          .enabled(if: PostgresTestServer.serverLogPath != nil, "needs the log of a server the tests started"))
    func memberImportLeavesNoRefusedCopy() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: .postgres)
            try await cli.createStore()
            let suffix = String(UInt32.random(in: 0...UInt32.max), radix: 36)
            let (group, frank) = ("copy_users_\(suffix)", "copy_frank_\(suffix)")
            let admin = try PostgresConnection(url: cli.storePath)
            try admin.executeScript("CREATE ROLE \(group) NOLOGIN; CREATE ROLE \(frank) LOGIN IN ROLE \(group);")
            defer { try? admin.executeScript("DROP OWNED BY \(frank), \(group); DROP ROLE IF EXISTS \(frank), \(group)") }
            #expect(try await cli.run(["users", "row-security", "--group", group]).exitCode == 0)
            #expect(try await cli.run(["users", "add", frank]).exitCode == 0)
            let log = try #require(PostgresTestServer.serverLogPath)
            let logged = try FileManager.default.attributesOfItem(atPath: log)[.size] as? Int ?? 0
            let url = try PostgresConnectionString.replacing(["user": frank], in: cli.storePath)
            let imported = try await cli.run(["import", "--database", "private", "--store", url], stdin: Input.notes(5), environment: ["STRATUS_USER": ""])
            #expect(imported.exitCode == 0 && imported.stderr.contains("imported 5"), "\(imported)")
            let handle = try #require(FileHandle(forReadingAtPath: log))
            defer { try? handle.close() }
            try handle.seek(toOffset: UInt64(logged))
            let since = String(decoding: try handle.readToEnd() ?? Data(), as: UTF8.self)
            #expect(!since.contains("COPY FROM not supported with row-level security"), "\(since)")
        }
    }

    // PostgreSQL only: the roles a login needs are PostgreSQL's.
    @Test("users add, once row-level security is set up, notes a login that cannot use the store: no role of that name, a role outside the group, a role without LOGIN")
    func addNotesLoginsThatCannotConnect() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: .postgres)
            try await cli.createStore()
            let suffix = String(UInt32.random(in: 0...UInt32.max), radix: 36)
            let (group, member, outsider, silent) = ("note_users_\(suffix)", "note_member_\(suffix)", "note_outsider_\(suffix)", "note_silent_\(suffix)")
            let admin = try PostgresConnection(url: cli.storePath)
            try admin.executeScript("CREATE ROLE \(group) NOLOGIN; CREATE ROLE \(member) LOGIN IN ROLE \(group); CREATE ROLE \(outsider) LOGIN; CREATE ROLE \(silent) IN ROLE \(group);")
            defer { try? admin.executeScript("DROP OWNED BY \(member), \(outsider), \(silent), \(group); DROP ROLE IF EXISTS \(member), \(outsider), \(silent), \(group)") }
            // Before row-level security, a login is any name a program acts as.
            let early = try await cli.run(["users", "add", "typo_\(suffix)"])
            #expect(early.exitCode == 0 && !early.stderr.contains("note:"), "\(early)")
            #expect(try await cli.run(["users", "row-security", "--group", group]).exitCode == 0)
            let fine = try await cli.run(["users", "add", member])
            #expect(fine.exitCode == 0 && !fine.stderr.contains("note:"), "\(fine)")
            let missing = try await cli.run(["users", "add", "typo_\(suffix)"])
            #expect(missing.exitCode == 0 && missing.stderr.contains("note: there is no PostgreSQL role typo_\(suffix)") && missing.stderr.contains("createuser --pwprompt --role \(group) typo_\(suffix)"), "\(missing)")
            let outside = try await cli.run(["users", "add", outsider])
            #expect(outside.exitCode == 0 && outside.stderr.contains("is not a member of \(group)") && outside.stderr.contains("GRANT \(group) TO \(outsider)"), "\(outside)")
            let noLogin = try await cli.run(["users", "add", silent])
            #expect(noLogin.exitCode == 0 && noLogin.stderr.contains("ALTER ROLE \(silent) LOGIN"), "\(noLogin)")
            // Each entry is kept all the same: the role may be made after.
            let listed = try await cli.run(["users", "list"])
            #expect([member, outsider, silent, "typo_\(suffix)"].allSatisfy { listed.stdout.contains($0) }, "\(listed)")
        }
    }
}
