import Foundation
import StratusPostgres
import StratusTestSupport
import Testing

/// Which store a command uses: a store that does not exist is never created by a read, and
/// names that cannot be right are usage errors.
@Suite("stratus store selection", .timeLimit(.minutes(30)))
struct StoreCLITests {
    static let readCommands: [[String]] = [
        ["count", "--type", "Note"],
        ["query", "--type", "Note"],
        ["get", "n1"],
        ["export", "--type", "Note"],
        ["changes", "--token-file", "TOKEN"],
        ["changes", "compact", "--keep-days", "1"],
        ["zones", "list"],
        ["zones", "delete", "Work", "--yes"],
        ["delete", "n1", "--yes"],
        ["delete", "--type", "Note", "--all", "--yes"],
        ["import", "--dry-run"],
        ["info"],
        ["check"],
    ]

    @Test("read commands on a missing store exit 66 and create nothing: no SQLite file, not even its folder; no tables in a PostgreSQL schema", arguments: TestEngine.all, readCommands)
    func readOnMissingStore(engine: TestEngine, arguments: [String]) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            // On SQLite a path in folders that do not exist; on PostgreSQL a schema without tables.
            let folder = store.path("typo")
            let location = engine == .sqlite ? folder + "/nested/store.sqlite" : cli.storePath
            let token = store.path("feed.token")
            let result = try await cli.run(arguments.map { $0 == "TOKEN" ? token : $0 } + ["--store", location], stdin: Input.notes(1))
            #expect(result.exitCode == 66, "\(result)")
            if engine == .sqlite {
                #expect(result.stderr.contains(location) && result.stderr.contains("no store"), "\(result)")
                #expect(!cli.exists(folder), "nothing created for \(arguments[0])")
            } else {
                #expect(result.stderr.contains("no Stratus store"), "\(result)")
                #expect(!cli.storeExists(), "no tables made for \(arguments[0])")
            }
            #expect(result.stdout.isEmpty, "\(result)")
            #expect(!cli.exists(token) && !cli.exists(token + ".lock"), "no token or lock file either")
        }
    }

    // SQLite only: the default store is an SQLite file.
    @Test("without --store or $STRATUS_STORE, a read of the default (SQLite) store that does not exist exits 66 and creates nothing")
    func missingDefaultStore() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store)
            let dataHome = store.path("xdg")
            let result = try await cli.run(["count", "--type", "Note"], environment: ["STRATUS_STORE": "", "XDG_DATA_HOME": dataHome])
            #expect(result.exitCode == 66, "\(result)")
            #expect(result.stderr.contains(dataHome + "/stratus/default.sqlite"), "names the path it looked at: \(result)")
            #expect(!cli.exists(dataHome))
        }
    }

    @Test("a STRATUS_ variable set but empty (a wrapper's unset variable) is a usage error (64) that creates no store; the option given instead wins", arguments: TestEngine.all)
    func emptyVariablesAreMistakes(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let dataHome = store.path("xdg")
            for variable in ["STRATUS_STORE", "STRATUS_USER", "STRATUS_ENVIRONMENT", "STRATUS_READ_STORE"] {
                let refused = try await cli.shell(#"\#(variable)= XDG_DATA_HOME="\#(dataHome)" "$STRATUS" import"#, environment: [:])
                #expect(refused.exitCode == 64 && refused.stderr.contains("$\(variable) is set but empty"), "\(variable): \(refused)")
            }
            #expect(!cli.exists(dataHome), "no default store made")
            let givenStore = try await cli.newStore("given")
            let given = try await cli.shell(#"STRATUS_STORE= "$STRATUS" import --store "$GIVEN" < /dev/null"#, environment: ["GIVEN": givenStore])
            #expect(given.exitCode == 0 && cli.storeExists(givenStore), "\(given)")
        }
    }

    @Test("writing commands create a missing store and say so on stderr, the first time only", arguments: TestEngine.all)
    func writesCreateTheStore(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let path = engine == .sqlite ? store.path("new-store.sqlite") : try await cli.newStore("new")
            let announcement = engine == .sqlite ? "stratus: created a new store at \(path)" : "stratus: created a new store in postgresql://"
            let first = try await cli.run(["import", "--store", path], stdin: Input.notes(2))
            #expect(first.exitCode == 0, "\(first)")
            #expect(first.stderrLines.filter { $0.hasPrefix(announcement) }.count == 1, "\(first)")
            let second = try await cli.run(["import", "--store", path], stdin: Input.notes(2, prefix: "m"))
            #expect(second.exitCode == 0 && !second.stderr.contains("created a new store"), "\(second)")
            #expect(try await cli.count("Note", extra: ["--store", path]) == 4)

            let zones = try await cli.newStore("zones")
            let created = try await cli.run(["zones", "create", "Work", "--store", zones])
            #expect(created.exitCode == 0 && created.stderr.contains("created a new store"), "\(created)")
            #expect(cli.storeExists(zones))
        }
    }

    // SQLite only: a PostgreSQL URL names a database, which Stratus never creates.
    @Test("a named store in a folder that does not exist is exit 73, naming the folder, and makes neither folder nor store; the default store's folder is made")
    func namedStoreInMissingFolderIsRefused() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store)
            let mistyped = store.path("no-such-folder/inner/app.sqlite")
            let byOption = try await cli.run(["import", "--store", mistyped], stdin: Input.notes(2))
            #expect(byOption.exitCode == 73, "\(byOption)")
            #expect(byOption.stderr.contains("cannot make a new store at \(mistyped) (--store): the folder \(store.path("no-such-folder/inner")) does not exist"), "\(byOption)")
            let byVariable = try await cli.shell(#"STRATUS_STORE="$MISTYPED" "$STRATUS" zones create Work"#, environment: ["MISTYPED": mistyped])
            #expect(byVariable.exitCode == 73 && byVariable.stderr.contains("($STRATUS_STORE)"), "\(byVariable)")
            #expect(!cli.exists(store.path("no-such-folder")), "no folder made")

            let dataHome = store.path("xdg")
            let byDefault = try await cli.shell(#"unset STRATUS_STORE; XDG_DATA_HOME="$DATA_HOME" "$STRATUS" import < /dev/null"#, environment: ["DATA_HOME": dataHome])
            #expect(byDefault.exitCode == 0 && byDefault.stderr.contains("created a new store at \(dataHome)/stratus/"), "\(byDefault)")
        }
    }

    @Test("processes that create the same new store at once all succeed, only the one that created it says so, and the store holds what each wrote", arguments: TestEngine.all)
    func racingCreationsSayItOnce(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            // A few rounds: whether a round's processes overlap is up to the scheduler, and
            // every round must end the same way.
            for round in 0..<6 {
                let path = engine == .sqlite ? store.path("race\(round).sqlite") : try await cli.newStore("race\(round)")
                let racers = try ["a", "b", "c"].map { prefix in
                    try cli.start(["import", "--store", path], stdin: Data(Input.notes(5, prefix: prefix).utf8))
                }
                var results: [CLI.Result] = []
                for racer in racers { results.append(await racer.wait()) }
                #expect(results.allSatisfy { $0.exitCode == 0 }, "round \(round): \(results)")
                let announcements = results.flatMap { $0.stderrLines.filter { $0.contains("created a new store") } }
                #expect(announcements.count == 1, "round \(round): one process created the store: \(results)")
                #expect(try await cli.count("Note", extra: ["--store", path]) == 15, "round \(round)")
                let check = try await cli.run(["check", "--store", path])
                #expect(check.exitCode == 0 && check.stdout == "ok\n", "round \(round): \(check)")
            }
        }
    }


    // SQLite only: a store moved as one file without its -wal is SQLite's concern.
    @Test("once the commands that wrote an SQLite store have exited, its file alone holds everything: a store moved without its -wal loses nothing")
    func storeFileIsWholeAfterExit() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store)
            #expect(try await cli.run(["import"], stdin: Input.notes(300)).exitCode == 0)
            #expect(try await cli.run(["delete", "n1", "--yes"]).exitCode == 0)
            // The file alone, as `mv` of it would move it.
            let moved = store.path("moved/store.sqlite")
            try FileManager.default.createDirectory(atPath: store.path("moved"), withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: cli.storePath, toPath: moved)
            #expect(try await cli.count("Note", extra: ["--store", moved]) == 299)
            #expect(try await cli.run(["check", "--store", moved]).exitCode == 0)
        }
    }

    @Test("--quiet prints nothing on success: not the new store nor the new zone", arguments: TestEngine.all)
    func quietJobsPrintNothing(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let path = engine == .sqlite ? store.path("quiet.sqlite") : try await cli.newStore("quiet")
            let input = try cli.file("notes.ndjson", Input.notes(3))
            let checkpoint = store.path("import.checkpoint")
            let first = try await cli.run(["import", input, "--store", path, "--zone", "Quiet", "--create-zones", "--checkpoint", checkpoint, "--quiet"])
            #expect(first.exitCode == 0 && first.stderr.isEmpty, "\(first)")
            #expect(try await cli.count("Note", extra: ["--store", path, "--zone", "Quiet"]) == 3)
            // Without --quiet the same events are still told.
            let told = try await cli.run(["import", try cli.file("more.ndjson", Input.notes(1, prefix: "m")), "--store", path, "--zone", "Told", "--create-zones"])
            #expect(told.exitCode == 0 && told.stderr.contains("created zone Told"), "\(told)")
            // A nightly collection of asset content, and a copy to a store worked on as another
            // user (found by an operator tester: each printed on every run).
            let collected = try await cli.run(["assets", "gc", "--store", path, "--quiet"])
            #expect(collected.exitCode == 0 && collected.stdout.isEmpty && collected.stderr.isEmpty, "\(collected)")
            #expect(try await cli.run(["assets", "gc", "--store", path]).stdout.hasPrefix("removed 0 unreferenced"))
            let copied = try await cli.run(["copy", "--from", path, "--to", store.path("copy.sqlite"), "--quiet"], environment: ["STRATUS_USER": ""])
            #expect(copied.exitCode == 0 && copied.stdout.isEmpty && copied.stderr.isEmpty, "\(copied)")
        }
    }

    @Test("an empty --user, --container, --store or --zone is a usage error (exit 64), not a crash", arguments: TestEngine.all, ["--user", "--container", "--store", "--zone"])
    func emptyNames(engine: TestEngine, option: String) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            for command in [["count", "--type", "Note"], ["import"]] {
                let result = try await cli.run(command + [option, ""], stdin: Input.notes(1))
                #expect(!result.signalled && result.exitCode == 64, "\(result)")
                #expect(result.stderr.contains("\(option) needs a non-empty value"), "\(result)")
            }
            #expect(!cli.storeExists())
        }
    }

    @Test("an empty file or folder name (--output, --assets-dir, --checkpoint, --reject-file, --token-file, --names-file) is a usage error (64) before anything is read or written, never the current folder", arguments: TestEngine.all)
    func emptyFileNames(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let imported = try await cli.run(["import", "-"], stdin: Input.notes(3))
            #expect(imported.exitCode == 0, "\(imported)")
            // The store's own files and those the test's runs leave (run-ID.out, .err, .in) aside,
            // the folder stays as it was.
            func files() throws -> [String] {
                try FileManager.default.contentsOfDirectory(atPath: store.directory.path).filter { !$0.hasPrefix("run-") && !$0.hasPrefix("store.sqlite") }.sorted()
            }
            let before = try files()
            let commands: [(arguments: [String], option: String)] = [
                (["export", "--type", "Note", "--output", ""], "--output"),
                (["export", "--type", "Note", "--assets-dir", ""], "--assets-dir"),
                (["import", "-", "--assets-dir", ""], "--assets-dir"),
                (["import", "-", "--reject-file", ""], "--reject-file"),
                (["import", "-", "--checkpoint", ""], "--checkpoint"),
                (["update", "--type", "Note", "--all", "--set", "mark=1", "--checkpoint", ""], "--checkpoint"),
                (["delete", "--type", "Note", "--all", "--yes", "--checkpoint", ""], "--checkpoint"),
                (["delete", "--names-file", "", "--yes"], "--names-file"),
                (["changes", "--token-file", ""], "--token-file"),
                (["changes", "--token-file=", "--output", "out.ndjson"], "--token-file"),
            ]
            for (arguments, option) in commands {
                let result = try await cli.run(arguments, stdin: Input.notes(5, prefix: "new"))
                #expect(!result.signalled && result.exitCode == 64, "\(result)")
                #expect(result.stderr.contains("\(option) needs a non-empty value"), "\(result)")
                #expect(result.stdout.isEmpty, "\(result)")
            }
            // Nothing was written: no new record, no field set, nothing deleted, no file made.
            let exported = try await cli.run(["export", "--type", "Note"])
            #expect(try JSONLine.names(exported.stdout) == ["n1", "n2", "n3"], "\(exported)")
            #expect(try JSONLine.objects(exported.stdout).allSatisfy { ($0["fields"] as? [String: Any])?["mark"] == nil })
            let after = try files()
            #expect(after == before)
        }
    }

    // PostgreSQL only: a hot standby is PostgreSQL's (an SQLite path as --read-store is refused here).
    @Test("--read-store: a standby that cannot be reached is exit 75 naming it, for every read that goes there; another store or an SQLite path is 64; the store itself as its standby reads")
    func readStore() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: .postgres)
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(3)).exitCode == 0)
            let reads: [[String]] = [["count", "--type", "Note"], ["query", "--type", "Note"], ["export", "--type", "Note"], ["changes", "--token-file", store.path("t.token")]]
            for standby in ["postgresql://reader:s3cretPW@127.0.0.1:1/app", "postgresql://reader:s3cretPW@nosuchhost.invalid/app"] {
                for read in standby.contains("invalid") ? [reads[0]] : reads {
                    let result = try await cli.run(read + ["--read-store", standby])
                    #expect(result.exitCode == 75, "\(result)")
                    #expect(result.stderr.contains("hot standby") && result.stderr.contains("reader:***@") && !result.stderr.contains("s3cretPW"), "\(result)")
                    #expect(result.stdout.isEmpty, "nothing read from the store instead: \(result)")
                }
            }
            let environment = try await cli.run(["count", "--type", "Note"], environment: ["STRATUS_READ_STORE": "postgresql://127.0.0.1:1/app"])
            #expect(environment.exitCode == 75 && environment.stderr.contains("hot standby"), "\(environment)")

            let sqlite = try await cli.run(["count", "--type", "Note", "--read-store", store.path("other.sqlite")])
            #expect(sqlite.exitCode == 64 && sqlite.stderr.contains("--read-store"), "\(sqlite)")
            let other = try await cli.newStore("other")
            #expect(try await cli.run(["import", "--quiet", "--store", other], stdin: Input.notes(1)).exitCode == 0)
            let wrong = try await cli.run(["count", "--type", "Note", "--read-store", other])
            #expect(wrong.exitCode == 64 && wrong.stderr.contains("another store"), "\(wrong)")
            let empty = try await cli.run(["count", "--type", "Note", "--read-store", try await cli.newStore("empty")])
            #expect(empty.exitCode == 64 && empty.stderr.contains("holds no Stratus store"), "\(empty)")

            // A database the standby lacks is a wrong URL: a standby takes no createdb.
            let missing = try await cli.run(["count", "--type", "Note", "--read-store", try PostgresConnectionString.replacing(["dbname": "stratus_no_such_database"], in: cli.storePath)])
            #expect(missing.exitCode == 66 && missing.stderr.contains("hot standby") && missing.stderr.contains("has no database stratus_no_such_database")
                    && missing.stderr.contains("name the one that holds the store") && !missing.stderr.contains("createdb"), "\(missing)")

            let itself = try await cli.run(["count", "--type", "Note", "--read-store", cli.storePath])
            #expect(itself.exitCode == 0 && itself.stdout == "3\n", "\(itself)")
            // Writes go to the store, whatever the standby.
            let write = try await cli.run(["import", "--quiet", "--read-store", "postgresql://127.0.0.1:1/app"], stdin: Input.notes(4))
            #expect(write.exitCode == 0, "\(write)")
        }
    }
}
