import Foundation
import StratusPostgres
import StratusSQLite
import StratusTestSupport
import Testing

/// A user who may read an SQLite store but not write it or its folder (issue 17 item 16):
/// reads work read-only and say so, or fail saying what access is missing; writes fail saying
/// so. Run as `nobody` (through `runuser`) on a store the test's user owns.
@Suite("stratus on a store the user may only read", .timeLimit(.minutes(30)))
struct ReadOnlyStoreCLITests {
    /// Cancels the test, saying why, unless it can run commands as another user.
    static func requireOtherUser() throws {
        guard getuid() == 0 else { try Test.cancel("needs root, to run stratus as nobody through runuser") }
        guard runuser != nil else { try Test.cancel("needs runuser, to run stratus as nobody") }
    }

    /// `runuser` by its path: a PATH without the sbin folders (`env -i`, a user's login
    /// shell) finds none.
    static let runuser = ["/usr/sbin/runuser", "/sbin/runuser"].first { FileManager.default.isExecutableFile(atPath: $0) }

    /// Runs `stratus ARGUMENTS` as nobody on the store at `path`.
    static func asNobody(_ cli: CLI, _ arguments: [String], store path: String, stdin: String? = nil) async throws -> CLI.Result {
        let words = (arguments + ["--store", path]).map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
        let input = stdin.map { try? cli.file("nobody-\(UUID().uuidString.prefix(6)).in", $0) } ?? nil
        return try await cli.shell("exec \(runuser ?? "runuser") -u nobody -- env STRATUS_USER=tester \"$STRATUS\" " + words + (input.map { " < '\($0)'" } ?? " < /dev/null"))
    }

    // SQLite only: file modes of the store's assets folder; a PostgreSQL role's privileges are rolesWithoutPrivileges.
    @Test("check by a user who may read the store but not enter its private assets folder: 77 saying so, not 70 calling the contents lost")
    func checkWithoutAccessToAssets() async throws {
        try Self.requireOtherUser()
        try await TemporaryStore.with { store in
            let cli = try await CLI(store)
            chmod(store.directory.path, 0o755)
            _ = try store.writeFile("in/photo.bin", patternBytes(count: 2_000, seed: 1))
            let line = #"{"recordName":"pic","recordType":"Photo","fields":{"image":{"value":{"downloadURL":"photo.bin"},"type":"ASSETID"}}}"#
            #expect(try await cli.run(["import", "--quiet", "--assets-dir", store.path("in")], stdin: line + "\n").exitCode == 0)
            // A writer holds the store open, so that a reader finds its log index.
            let writer = try SQLiteEngine(path: cli.storePath)
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(2)).exitCode == 0)
            for file in [cli.storePath, cli.storePath + "-wal", cli.storePath + "-shm"] { chmod(file, 0o644) }

            let check = try await Self.asNobody(cli, ["check"], store: cli.storePath)
            #expect(check.exitCode == 77 && check.stderr.contains("permission denied"), "\(check)")
            #expect(try await cli.run(["check"]).exitCode == 0, "the owner's check finds the store sound")
            withExtendedLifetime(writer) {}
        }
    }

    // SQLite only: file modes (the job file's lock is a file whatever the engine).
    @Test("a job file's lock another user made (a run as root before) is 77 naming its owner, not 73 'cannot create' (found by an operator tester)")
    func lockFileOfAnotherUser() async throws {
        try Self.requireOtherUser()
        try await TemporaryStore.with { store in
            let cli = try await CLI(store)
            chmod(store.directory.path, 0o777)
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(2)).exitCode == 0)
            chmod(cli.storePath, 0o644)
            let token = store.path("tok")
            #expect(try await cli.run(["changes", "--token-file", token, "--quiet"]).exitCode == 0, "root's run leaves its lock file")
            let refused = try await Self.asNobody(cli, ["changes", "--token-file", token], store: cli.storePath)
            #expect(refused.exitCode == 77 && refused.stderr.contains("cannot open the lock file") && refused.stderr.contains("owner uid 0"), "\(refused.exitCode) \(refused.stderr)")
        }
    }

    // SQLite only: file modes, -wal and -shm; the PostgreSQL counterpart is rolesWithoutPrivileges.
    @Test("a read of a store its owner made read-only (chmod 444 during a backup) leaves the log files it made writable by their owner: the owner's next write, once the store is writable again, works (found by an operator tester)")
    func readerLeavesLogFilesWritable() async throws {
        try Self.requireOtherUser()
        try await TemporaryStore.with { store in
            let cli = try await CLI(store)
            chmod(store.directory.path, 0o777)
            let path = store.path("owned-by-nobody.sqlite")
            #expect(try await Self.asNobody(cli, ["import", "--quiet"], store: path, stdin: Input.notes(3)).exitCode == 0)
            chmod(path, 0o444)
            let read = try await Self.asNobody(cli, ["count", "--type", "Note"], store: path)
            #expect(read.exitCode == 0 && read.stdout == "3\n", "\(read)")
            for file in [path + "-wal", path + "-shm"] where cli.exists(file) {
                let mode = ((try? FileManager.default.attributesOfItem(atPath: file)[.posixPermissions]) as? NSNumber)?.intValue ?? 0
                #expect(mode & 0o200 != 0, "\(file) is writable by its owner: \(String(mode, radix: 8))")
            }
            chmod(path, 0o644)
            let write = try await Self.asNobody(cli, ["import", "--quiet"], store: path, stdin: Input.notes(2, prefix: "more"))
            #expect(write.exitCode == 0, "\(write)")
            #expect(try await Self.asNobody(cli, ["count", "--type", "Note"], store: path).stdout == "5\n")
        }
    }

    @Test("root importing assets into another user's store leaves the asset folders and content to the store's owner: the owner reads the content and check passes (found by an operator tester)")
    func rootWritesAssetsForTheOwner() async throws {
        try Self.requireOtherUser()
        try await TemporaryStore.with { store in
            let cli = try await CLI(store)
            chmod(store.directory.path, 0o777)
            let path = store.path("owned-by-nobody.sqlite")
            #expect(try await Self.asNobody(cli, ["import", "--quiet"], store: path, stdin: Input.notes(1)).exitCode == 0)
            let content = Data((0..<3_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
            _ = try store.writeFile("root-assets/photo.bin", content)
            let line = #"{"recordName":"pic","recordType":"Photo","fields":{"image":{"value":{"downloadURL":"photo.bin"},"type":"ASSETID"}}}"#
            let imported = try await cli.run(["import", "--store", path, "--assets-dir", store.path("root-assets"), "--quiet"], stdin: line + "\n")
            #expect(imported.exitCode == 0, "\(imported)")
            let got = try await Self.asNobody(cli, ["assets", "get", "pic", "image", "--output", store.path("got.bin")], store: path)
            #expect(got.exitCode == 0 && FileManager.default.contents(atPath: store.path("got.bin")) == content, "\(got)")
            let check = try await Self.asNobody(cli, ["check"], store: path)
            #expect(check.exitCode == 0 && check.stdout == "ok\n", "\(check)")
        }
    }

    @Test("no write access: without a writer, reads fail with 77 naming the missing access; while a writer has it open, reads work read-only; writes fail with 77 and change nothing")
    func readOnlyStore() async throws {
        try Self.requireOtherUser()
        try await TemporaryStore.with { store in
            let cli = try await CLI(store)
            chmod(store.directory.path, 0o755)
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(40)).exitCode == 0)
            // The last connection to close folds the log into the file and removes it.
            do { _ = try SQLiteEngine(path: cli.storePath) }
            #expect(!cli.exists(cli.storePath + "-shm") && !cli.exists(cli.storePath + "-wal"))
            chmod(cli.storePath, 0o644)

            let blocked = try await Self.asNobody(cli, ["count", "--type", "Note"], store: cli.storePath)
            #expect(blocked.exitCode == 77, "\(blocked)")
            #expect(blocked.stderr.contains(cli.storePath + "-shm") && blocked.stderr.contains("write access to the folder \(store.directory.path) is missing"), "\(blocked)")
            #expect(blocked.stdout.isEmpty)

            // A writer holds the store open: its log and index exist, and readers read through them.
            let writer = try SQLiteEngine(path: cli.storePath)
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(2, prefix: "late")).exitCode == 0)
            #expect(cli.exists(cli.storePath + "-shm"))
            for file in [cli.storePath, cli.storePath + "-wal", cli.storePath + "-shm"] { chmod(file, 0o644) }

            let count = try await Self.asNobody(cli, ["count", "--type", "Note"], store: cli.storePath)
            #expect(count.exitCode == 0 && count.stdout == "42\n", "\(count)")
            #expect(count.stderr.contains("reading the store at \(cli.storePath) read-only"), "it says so: \(count)")
            let export = try await Self.asNobody(cli, ["export", "--type", "Note", "--quiet"], store: cli.storePath)
            #expect(export.exitCode == 0 && export.stdoutLines.count == 42, "\(export)")
            let get = try await Self.asNobody(cli, ["get", "n7"], store: cli.storePath)
            let names = try JSONLine.names(get.stdout)
            #expect(get.exitCode == 0 && names == ["n7"], "\(get)")
            let check = try await Self.asNobody(cli, ["check"], store: cli.storePath)
            #expect(check.exitCode == 0 && check.stdout == "ok\n", "\(check)")

            for arguments in [["delete", "n1", "--yes"], ["import"]] {
                let refused = try await Self.asNobody(cli, arguments, store: cli.storePath, stdin: Input.notes(1, prefix: "x"))
                #expect(refused.exitCode == 77, "\(refused)")
                #expect(refused.stderr.contains("cannot be written") && refused.stderr.contains("write access"), "\(refused)")
            }
            #expect(try await cli.count("Note") == 42, "nothing was written")
            _ = writer
        }
    }

    // SQLite only: file and folder modes; the PostgreSQL counterpart is rolesWithoutPrivileges.
    @Test("a store the user may not read (mode 0600, another owner) or whose folder it may not enter: 77 naming the missing access, for reads and writes, not 66 'no store'")
    func unreadableStore() async throws {
        try Self.requireOtherUser()
        try await TemporaryStore.with { store in
            let cli = try await CLI(store)
            chmod(store.directory.path, 0o755)
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(3)).exitCode == 0)
            chmod(cli.storePath, 0o600)
            for arguments in [["count", "--type", "Note"], ["import"]] {
                let refused = try await Self.asNobody(cli, arguments, store: cli.storePath, stdin: Input.notes(1, prefix: "x"))
                #expect(refused.exitCode == 77 && refused.stderr.contains("not readable"), "\(arguments[0]): \(refused)")
            }
            chmod(store.directory.path, 0o700)
            for arguments in [["count", "--type", "Note"], ["import"]] {
                let refused = try await Self.asNobody(cli, arguments, store: cli.storePath, stdin: Input.notes(1, prefix: "x"))
                #expect(refused.exitCode == 77 && refused.stderr.contains("may not be searched"), "\(arguments[0]): \(refused)")
            }
            chmod(store.directory.path, 0o755)
            #expect(try await cli.count("Note") == 3, "nothing was written")
        }
    }

    // SQLite only: file modes; the PostgreSQL counterpart is dryRunAsReadingRole.
    @Test("a schema file the user may not read: schema validate, import and diff exit 77 as for every other file a command reads, not 66 'missing'")
    func unreadableSchemaFile() async throws {
        try Self.requireOtherUser()
        try await TemporaryStore.with { store in
            let cli = try await CLI(store)
            chmod(store.directory.path, 0o755)
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(2)).exitCode == 0)
            for file in [cli.storePath, cli.storePath + "-wal", cli.storePath + "-shm"] { chmod(file, 0o666) }
            let schema = try cli.file("closed.ckdb", "DEFINE SCHEMA\n    RECORD TYPE Note (\n        title STRING\n    );\n")
            chmod(schema, 0o600)
            for verb in ["validate", "import", "diff"] {
                let refused = try await Self.asNobody(cli, ["schema", verb, schema], store: cli.storePath)
                #expect(refused.exitCode == 77 && refused.stderr.contains("cannot read the schema file") && refused.stderr.contains("Permission denied"), "\(verb): \(refused)")
            }
            let missing = try await cli.run(["schema", "validate", store.path("nowhere.ckdb")])
            #expect(missing.exitCode == 66, "\(missing)")
        }
    }

    @Test("import --dry-run on a store the user may not write fails with 77 as the real run does, instead of calling the input valid")
    func dryRunOnReadOnlyStore() async throws {
        try Self.requireOtherUser()
        try await TemporaryStore.with { store in
            let cli = try await CLI(store)
            chmod(store.directory.path, 0o755)
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(3)).exitCode == 0)
            // A writer holds the store open, so that a reader can read it read-only.
            let writer = try SQLiteEngine(path: cli.storePath)
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(2, prefix: "late")).exitCode == 0)
            for file in [cli.storePath, cli.storePath + "-wal", cli.storePath + "-shm"] { chmod(file, 0o644) }
            let input = Input.notes(1, prefix: "x")
            let real = try await Self.asNobody(cli, ["import"], store: cli.storePath, stdin: input)
            #expect(real.exitCode == 77, "\(real)")
            let dry = try await Self.asNobody(cli, ["import", "--dry-run"], store: cli.storePath, stdin: input)
            #expect(dry.exitCode == 77, "the dry run fails as the real run would: \(dry)")
            #expect(dry.stderr.contains("cannot be written") && dry.stderr.contains("write access") && !dry.stderr.contains("1 valid"), "\(dry)")
            for arguments in [["update", "--type", "Note", "--all", "--set", "title=x", "--dry-run"], ["delete", "--type", "Note", "--all", "--dry-run"]] {
                let refused = try await Self.asNobody(cli, arguments, store: cli.storePath)
                #expect(refused.exitCode == 77, "\(arguments[0]) --dry-run fails as the real run would: \(refused)")
                #expect(refused.stderr.contains("cannot be written") && refused.stderr.contains("the real run would fail"), "\(refused)")
            }
            #expect(try await cli.count("Note") == 5, "nothing was written")
            // Whoever may write it gets the dry run's answer.
            let allowed = try await cli.run(["import", "--dry-run"], stdin: input)
            #expect(allowed.exitCode == 0 && allowed.stderrLines.last?.contains("dry run: 1 valid, 0 rejected") == true, "\(allowed)")
            _ = writer
        }
    }

    // PostgreSQL only: a role's privileges; the SQLite counterpart is dryRunOnReadOnlyStore.
    @Test("dry runs as a PostgreSQL role that may only read fail as the real runs do (77 naming the missing privileges) instead of calling the input valid")
    func dryRunAsReadingRole() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: .postgres)
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(3)).exitCode == 0)
            let (reader, url) = try cli.makeRole("reader", access: .read)
            defer { cli.dropRole(reader) }
            let input = Input.notes(1, prefix: "x")
            let real = try await cli.run(["import", "--store", url], stdin: input)
            #expect(real.exitCode == 77, "\(real)")
            let runs: [(arguments: [String], stdin: String?)] = [
                (["import", "--dry-run"], input),
                (["update", "--type", "Note", "--all", "--set", "title=x", "--dry-run"], nil),
                (["delete", "--type", "Note", "--all", "--dry-run"], nil),
            ]
            for run in runs {
                let dry = try await cli.run(run.arguments + ["--store", url], stdin: run.stdin ?? "")
                #expect(dry.exitCode == 77, "\(run.arguments[0]) --dry-run fails as the real run would: \(dry)")
                #expect(dry.stderr.contains("role \(reader) may not write") && dry.stderr.contains("INSERT and UPDATE"), "\(dry)")
                #expect(!dry.stderr.contains("1 valid") && !dry.stderr.contains("would delete"), "\(dry)")
            }
            #expect(try await cli.count("Note") == 3, "nothing was written")
            let allowed = try await cli.run(["import", "--dry-run"], stdin: input)
            #expect(allowed.exitCode == 0 && allowed.stderrLines.last?.contains("dry run: 1 valid, 0 rejected") == true, "the tables' owner gets the dry run's answer: \(allowed)")
        }
    }

    // PostgreSQL only: a role's privileges; the SQLite counterparts are readOnlyStore and unreadableStore.
    @Test("a PostgreSQL role that may only read reads the store and is refused writes (77); roles without privileges on the store are refused reads and writes with 77 naming the missing privileges, not 66 'no store'")
    func rolesWithoutPrivileges() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: .postgres)
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(3)).exitCode == 0)
            let noUser = ["STRATUS_USER": ""]

            let (reader, readerURL) = try cli.makeRole("reader", access: .read)
            defer { cli.dropRole(reader) }
            let count = try await cli.run(["count", "--type", "Note", "--store", readerURL], environment: noUser)
            #expect(count.exitCode == 0 && count.stdout == "3\n", "\(count)")
            let export = try await cli.run(["export", "--type", "Note", "--quiet", "--store", readerURL], environment: noUser)
            #expect(export.exitCode == 0 && export.stdoutLines.count == 3, "\(export)")
            for arguments in [["delete", "n1", "--yes"], ["import"]] {
                let refused = try await cli.run(arguments + ["--store", readerURL], stdin: Input.notes(1, prefix: "x"), environment: noUser)
                #expect(refused.exitCode == 77 && refused.stderr.contains("permission denied for table"), "\(arguments[0]): \(refused)")
            }

            for access in [CLI.RoleAccess.nothing, .schemaOnly] {
                let (stranger, strangerURL) = try cli.makeRole("stranger", access: access)
                defer { cli.dropRole(stranger) }
                for arguments in [["count", "--type", "Note"], ["import"]] {
                    let refused = try await cli.run(arguments + ["--store", strangerURL], stdin: Input.notes(1, prefix: "x"), environment: noUser)
                    #expect(refused.exitCode == 77 && refused.stderr.contains(stranger) && refused.stderr.contains("permission"), "\(access), \(arguments[0]): \(refused)")
                    #expect(!refused.stderr.contains("no Stratus store") && refused.stdout.isEmpty, "\(access), \(arguments[0]): \(refused)")
                }
            }
            #expect(try await cli.count("Note") == 3, "nothing was written")
        }
    }
}
