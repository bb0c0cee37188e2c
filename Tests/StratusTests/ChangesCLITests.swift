import Foundation
import Stratus
import StratusPostgres
import StratusSQLite
import StratusTestSupport
import Testing

/// The package's built executables (`stratus`, `churn`), run as separate processes.
enum ZoneTestProgram {
    /// Starts `path` with its output in new files in `store`'s folder (or stdout in `stdout`).
    static func start(_ path: String, _ arguments: [String], in store: TemporaryStore, stdout: URL? = nil) throws -> ChildProcess {
        let id = UUID().uuidString.prefix(8)
        return try ChildProcess(path, arguments, stdout: stdout ?? store.url("out-\(id).txt"), stderr: store.url("err-\(id).txt"))
    }

    /// Runs `path` to its end.
    static func run(_ path: String, _ arguments: [String], in store: TemporaryStore, stdout: URL? = nil) async throws -> ChildProcess.Status {
        await (try start(path, arguments, in: store, stdout: stdout)).wait()
    }
}

/// A store of either engine for the `zones` and `changes` tests, with containers on it: an
/// SQLite file, or a fresh PostgreSQL schema.
struct CLIStoreFixture: Sendable {
    static let identifier = "com.example.zones"
    let store: TemporaryStore
    let locations: TestStoreLocations
    /// The store's path or URL, as `--store` takes it.
    let path: String
    let engine: any StorageEngine

    func container(user: String = "alice") -> Container {
        Container(identifier: Self.identifier, engine: engine, userName: user)
    }

    /// Runs `body` with a fresh store of `testEngine`, removed afterwards; cancels the test
    /// case when that engine is PostgreSQL and no server is available.
    static func with<T>(_ testEngine: TestEngine, _ body: (CLIStoreFixture) async throws -> T) async throws -> T {
        try await TemporaryStore.with(prefix: "stratus-zones") { store in
            let locations = try await TestStoreLocations(engine: testEngine, folder: store)
            let path = try await locations.newStore("store")
            let engine: any StorageEngine = testEngine == .postgres ? try PostgresEngine.shared(url: path) : try SQLiteEngine(path: path)
            return try await body(CLIStoreFixture(store: store, locations: locations, path: path, engine: engine))
        }
    }
}

@Suite("stratus zones and stratus changes", .timeLimit(.minutes(30)))
struct ChangesCLITests {
    static func options(_ fixture: CLIStoreFixture, database: String = "private") -> [String] {
        ["--store", fixture.path, "--container", CLIStoreFixture.identifier, "--database", database, "--user", "alice"]
    }

    @Test("zones list, create and delete print CloudKit zone JSON; failures make exit codes", arguments: TestEngine.all)
    func zonesCommand(engine: TestEngine) async throws {
        let stratus = try ChildProcess.builtExecutable("stratus")
        try await CLIStoreFixture.with(engine) { fixture async throws in
            let options = Self.options(fixture)
            let created = try await ZoneTestProgram.run(stratus, ["zones", "create", "Photos", "Notes"] + options, in: fixture.store)
            #expect(created.exitCode == 0, "\(created.stderr)")
            #expect(created.stdoutLines == [
                #"{"zoneID":{"zoneName":"Photos","ownerRecordName":"__defaultOwner__"},"atomic":true,"fetchChanges":true}"#,
                #"{"zoneID":{"zoneName":"Notes","ownerRecordName":"__defaultOwner__"},"atomic":true,"fetchChanges":true}"#,
            ])
            let plain = try await ZoneTestProgram.run(stratus, ["zones", "create", "Loose", "--no-atomic"] + options, in: fixture.store)
            #expect(plain.stdout.contains(#""atomic":false"#))

            let unconfirmed = try await ZoneTestProgram.run(stratus, ["zones", "delete", "Notes"] + options, in: fixture.store)
            #expect(unconfirmed.exitCode == 64 && unconfirmed.stderr.contains("--yes"), "\(unconfirmed)")
            let deleted = try await ZoneTestProgram.run(stratus, ["zones", "delete", "Notes", "--yes"] + options, in: fixture.store)
            #expect(deleted.stdoutLines == [#"{"zoneID":{"zoneName":"Notes","ownerRecordName":"__defaultOwner__"},"deleted":true}"#])
            let listed = try await ZoneTestProgram.run(stratus, ["zones", "list"] + options, in: fixture.store)
            #expect(listed.stdoutLines.map { $0.components(separatedBy: "\"zoneName\":\"")[1].prefix { $0 != "\"" } } == ["_defaultZone", "Loose", "Photos"])
            // The library sees what the tool made.
            #expect(Set(try await fixture.container().privateCloudDatabase.allRecordZones().map(\.zoneID.zoneName)) == ["_defaultZone", "Loose", "Photos"])

            let bad = try await ZoneTestProgram.run(stratus, ["zones", "create", "Good", "_bad"] + options, in: fixture.store)
            #expect(bad.exitCode == 1)
            #expect(bad.stderr.contains("_bad"))
            let missing = try await ZoneTestProgram.run(stratus, ["zones", "delete", "Nowhere", "--yes"] + options, in: fixture.store)
            #expect(missing.exitCode == 1)
            #expect(missing.stderr.contains("zoneNotFound"))
            let unknown = try await ZoneTestProgram.run(stratus, ["zones", "rename", "X"] + options, in: fixture.store)
            #expect(unknown.exitCode == 64)
        }
    }

    @Test("changes writes records and deletions as CloudKit changes/zone NDJSON and moves the token", arguments: TestEngine.all)
    func changesShapeAndToken(engine: TestEngine) async throws {
        let stratus = try ChildProcess.builtExecutable("stratus")
        try await CLIStoreFixture.with(engine) { fixture async throws in
            let database = fixture.container().privateCloudDatabase
            let zone = RecordZone.ID(zoneName: "Notes")
            try await database.save(RecordZone(zoneID: zone))
            try await database.save(makeRecord("Note", "a", zoneID: zone, ["title": .string("first"), "body": .string("text")]))
            try await database.save(makeRecord("Note", "b", zoneID: zone))
            try await database.deleteRecord(withID: Record.ID(recordName: "b", zoneID: zone))
            let tokenFile = fixture.store.path("notes.token")
            let arguments = ["changes", "--zone", "Notes", "--token-file", tokenFile] + Self.options(fixture)

            let first = try await ZoneTestProgram.run(stratus, arguments + ["--fields", "title"], in: fixture.store)
            #expect(first.exitCode == 0, "\(first.stderr)")
            let lines = first.stdoutLines
            #expect(lines.count == 2)
            let record = try #require(lines.first.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] })
            #expect(record["recordName"] as? String == "a")
            #expect(record["recordType"] as? String == "Note")
            #expect(record["recordChangeTag"] is String)
            #expect((record["fields"] as? [String: Any])?.keys.sorted() == ["title"])
            #expect(((record["fields"] as? [String: Any])?["title"] as? [String: Any])?["type"] as? String == "STRING")
            #expect(lines.last == #"{"recordName":"b","recordType":"Note","deleted":true,"zoneID":{"zoneName":"Notes","ownerRecordName":"__defaultOwner__"}}"#)
            #expect(first.stderr.contains("wrote 2 change(s) (1 record(s), 1 deletion(s))"))
            let savedToken = try String(contentsOfFile: tokenFile, encoding: .utf8)
            #expect(savedToken.hasPrefix("stk1_"))
            #expect((try? ServerChangeToken(serialized: savedToken.components(separatedBy: "\n")[0])) != nil)

            let again = try await ZoneTestProgram.run(stratus, arguments, in: fixture.store)
            #expect(again.exitCode == 0 && again.stdout.isEmpty)
            try await database.save(makeRecord("Note", "c", zoneID: zone))
            let third = try await ZoneTestProgram.run(stratus, arguments + ["--progress", "json"], in: fixture.store)
            #expect(third.stdoutLines.count == 1)
            #expect(third.stdout.hasPrefix(#"{"recordName":"c""#))
            #expect(third.stderr.contains(#"{"event":"summary","changed":1,"deleted":0,"moreComing":0,"written":1,"#), "the progress options, as every job command takes them: \(third.stderr)")
            let quiet = try await ZoneTestProgram.run(stratus, arguments + ["--quiet"], in: fixture.store)
            #expect(quiet.exitCode == 0 && quiet.stderr.isEmpty, "\(quiet.stderr)")
            #expect(try String(contentsOfFile: tokenFile, encoding: .utf8) != savedToken)
        }
    }

    @Test("--output: a run first cuts the last output file back to what was committed, also when writing a new file", arguments: TestEngine.all)
    func outputCutBack(engine: TestEngine) async throws {
        let stratus = try ChildProcess.builtExecutable("stratus")
        try await CLIStoreFixture.with(engine) { fixture async throws in
            let database = fixture.container().privateCloudDatabase
            try await database.save(makeRecord("Note", "one"))
            let tokenFile = fixture.store.path("t.token")
            let out1 = fixture.store.path("export-1.ndjson"), out2 = fixture.store.path("export-2.ndjson")
            let arguments = ["changes", "--token-file", tokenFile] + Self.options(fixture)

            #expect(try await ZoneTestProgram.run(stratus, arguments + ["--output", out1], in: fixture.store).exitCode == 0)
            let committed = try Data(contentsOf: URL(fileURLWithPath: out1))
            #expect(String(decoding: committed, as: UTF8.self).hasPrefix(#"{"recordName":"one""#))
            #expect(try String(contentsOfFile: tokenFile, encoding: .utf8).contains("output-length=\(committed.count)"))

            // What a run killed after writing but before committing leaves behind.
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: out1))
            try handle.seekToEnd()
            try handle.write(contentsOf: Data("{\"recordName\":\"uncommitted\"}\n{\"recordNa".utf8))
            try handle.close()
            try await database.save(makeRecord("Note", "two"))

            let next = try await ZoneTestProgram.run(stratus, arguments + ["--output", out2], in: fixture.store)
            #expect(next.exitCode == 0, "\(next.stderr)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: out1)) == committed, "the uncommitted tail is cut away")
            #expect(try String(contentsOfFile: out2, encoding: .utf8).hasPrefix(#"{"recordName":"two""#))

            // An output file shorter than its committed length was emptied by its consumer: a
            // note says its changes are not written again, and the run goes on.
            let truncating = try FileHandle(forWritingTo: URL(fileURLWithPath: out2))
            try truncating.truncate(atOffset: 0)
            try truncating.close()
            let emptied = try await ZoneTestProgram.run(stratus, arguments + ["--output", out2], in: fixture.store)
            #expect(emptied.exitCode == 0, "\(emptied.stderr)")
            #expect(emptied.stderr.contains("fewer than the") && emptied.stderr.contains("are not written again"), "\(emptied.stderr)")
        }
    }

    @Test("--output: a run whose token's link was removed says that a killed run's tail could not be cut off; a token whose output lines are damaged is refused", arguments: TestEngine.all)
    func outputCutBackWithoutItsLink(engine: TestEngine) async throws {
        let stratus = try ChildProcess.builtExecutable("stratus")
        try await CLIStoreFixture.with(engine) { fixture async throws in
            let database = fixture.container().privateCloudDatabase
            try await database.save(makeRecord("Note", "one"))
            let tokenFile = fixture.store.path("t.token")
            let out1 = fixture.store.path("export-1.ndjson"), out2 = fixture.store.path("export-2.ndjson")
            let arguments = ["changes", "--token-file", tokenFile] + Self.options(fixture)
            #expect(try await ZoneTestProgram.run(stratus, arguments + ["--output", out1], in: fixture.store).exitCode == 0)
            let committed = try Data(contentsOf: URL(fileURLWithPath: out1))
            let folder = URL(fileURLWithPath: tokenFile).deletingLastPathComponent().path
            let links = try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasPrefix("t.token.output-") }
            #expect(links.count == 1, "\(links)")
            for link in links { try FileManager.default.removeItem(atPath: folder + "/" + link) }

            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: out1))
            try handle.seekToEnd()
            try handle.write(contentsOf: Data("{\"recordName\":\"uncommitted\"}\n".utf8))
            try handle.close()
            try await database.save(makeRecord("Note", "two"))
            let next = try await ZoneTestProgram.run(stratus, arguments + ["--output", out2], in: fixture.store)
            #expect(next.exitCode == 0, "\(next.stderr)")
            // Without the link, the file at the path could be a new one that took the inode: left.
            #expect(try Data(contentsOf: URL(fileURLWithPath: out1)).count > committed.count)
            #expect(next.stderr.contains("was removed") && next.stderr.contains("not cut off"), "\(next.stderr)")

            // Output lines that do not read are damage, as an unknown line is.
            let text = try String(contentsOfFile: tokenFile, encoding: .utf8)
            for (what, damaged) in [("length", text.replacingOccurrences(of: #"output-length=\d+"#, with: "output-length=abc", options: .regularExpression)),
                                    ("file", text.replacingOccurrences(of: #"output-file=[0-9:]+"#, with: "output-file=zzz", options: .regularExpression))] {
                #expect(damaged != text, "\(what): \(text)")
                try damaged.write(toFile: tokenFile, atomically: true, encoding: .utf8)
                let refused = try await ZoneTestProgram.run(stratus, arguments + ["--output", out2], in: fixture.store)
                #expect(refused.exitCode == 65 && refused.stderr.contains("does not read"), "\(what): \(refused.exitCode) \(refused.stderr)")
            }
        }
    }

    @Test("--output: an output file the consumer deleted, made again under the same name (often with the same inode number), is a new file: no NUL bytes, no refusal", arguments: TestEngine.all)
    func deletedOutputNameReused(engine: TestEngine) async throws {
        let stratus = try ChildProcess.builtExecutable("stratus")
        try await CLIStoreFixture.with(engine) { fixture async throws in
            let database = fixture.container().privateCloudDatabase
            let tokenFile = fixture.store.path("t.token")
            let output = fixture.store.path("out.ndjson")
            let arguments = ["changes", "--token-file", tokenFile, "--output", output] + Self.options(fixture)
            for round in 0..<6 {
                try await database.save(makeRecord("Note", "r\(round)", ["text": .string(String(repeating: "x", count: 2_000 * (6 - round)))]))
                let run = try await ZoneTestProgram.run(stratus, arguments, in: fixture.store)
                #expect(run.exitCode == 0, "round \(round): \(run.stderr)")
                let data = try Data(contentsOf: URL(fileURLWithPath: output))
                #expect(!data.contains(0), "round \(round): the output holds NUL bytes")
                let names = String(decoding: data, as: UTF8.self).split(separator: "\n").map { line in
                    (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["recordName"] as? String
                }
                #expect(names == ["r\(round)"], "round \(round)")
                // The consumer takes the file and deletes it; the next run uses the name again.
                try FileManager.default.removeItem(atPath: output)
            }
            let links = try FileManager.default.contentsOfDirectory(atPath: fixture.store.directory.path).filter { $0.hasPrefix("t.token.output-") }
            #expect(links.count == 1, "one link holds the last output file: \(links)")
        }
    }

    /// The cron guarantee end to end: writer processes change the zone while `stratus changes
    /// --output` runs again and again, each run writing a new file and many runs killed with
    /// SIGKILL (at a random moment, or just after it wrote output, before or after its commit);
    /// the files, read in order, must hold every committed change exactly once (checked by
    /// `churn verify` against the writers' logs).
    @Test("--output: exactly once across runs killed at random while writer processes write", arguments: TestEngine.all)
    func exactlyOnceWithKills(engine: TestEngine) async throws {
        let stratus = try ChildProcess.builtExecutable("stratus")
        let churn = try ChildProcess.builtExecutable("churn")
        try await CLIStoreFixture.with(engine) { fixture async throws in
            let options = Self.options(fixture)
            try await fixture.container().privateCloudDatabase.save(RecordZone(zoneName: "Feed"))
            let tokenFile = fixture.store.path("feed.token")
            let rounds = try await ChildProcess.onOwnThread {
                try Self.exportRounds(stratus, churn, fixture, options: options, toStdout: false) { output in
                    ["changes", "--zone", "Feed", "--token-file", tokenFile, "--output", output.path, "--batch", "1", "--limit", "25"] + options
                }
            }
            var outputs = rounds.outputs
            #expect(rounds.failures.isEmpty, "\(rounds.failures)")
            try await expectWritersSucceeded(rounds.writers)
            let last = fixture.store.url("export-\(outputs.count).ndjson")
            outputs.append(last.path)
            let final = try await ZoneTestProgram.run(stratus, ["changes", "--zone", "Feed", "--token-file", tokenFile, "--output", last.path] + options, in: fixture.store)
            #expect(final.exitCode == 0, "\(final.stderr)")

            let check = try await ZoneTestProgram.run(churn, ["verify"] + logArguments(fixture) + outputs, in: fixture.store)
            #expect(check.exitCode == 0, "\(check.stdout)\n\(check.stderr)")
            #expect(check.stdout.contains(": ok") && !check.stdout.contains("repeated"), "\(check.stdout)")
        }
    }

    /// Without --output the guarantee is at least once: a run killed after writing a batch to
    /// stdout but before moving the token writes that batch again. Nothing may be lost, and
    /// apart from such repeats the stream must be exactly once and in order.
    @Test("stdout: at least once across killed runs, nothing lost", arguments: TestEngine.all)
    func atLeastOnceOnStdout(engine: TestEngine) async throws {
        let stratus = try ChildProcess.builtExecutable("stratus")
        let churn = try ChildProcess.builtExecutable("churn")
        try await CLIStoreFixture.with(engine) { fixture async throws in
            let options = Self.options(fixture)
            try await fixture.container().privateCloudDatabase.save(RecordZone(zoneName: "Feed"))
            let tokenFile = fixture.store.path("feed.token")
            let rounds = try await ChildProcess.onOwnThread {
                try Self.exportRounds(stratus, churn, fixture, options: options, toStdout: true) { _ in
                    ["changes", "--zone", "Feed", "--token-file", tokenFile, "--batch", "1", "--limit", "25"] + options
                }
            }
            var outputs = rounds.outputs
            #expect(rounds.failures.isEmpty, "\(rounds.failures)")
            try await expectWritersSucceeded(rounds.writers)
            let last = fixture.store.url("export-\(outputs.count).ndjson")
            outputs.append(last.path)
            let final = try await ZoneTestProgram.run(stratus, ["changes", "--zone", "Feed", "--token-file", tokenFile] + options, in: fixture.store, stdout: last)
            #expect(final.exitCode == 0, "\(final.stderr)")
            let check = try await ZoneTestProgram.run(churn, ["verify", "--at-least-once"] + logArguments(fixture) + outputs, in: fixture.store)
            #expect(check.exitCode == 0, "\(check.stdout)\n\(check.stderr)")
        }
    }

    @Test("an expired token exits 65 and names the fix; removing the token file starts again", arguments: TestEngine.all)
    func expiredToken(engine: TestEngine) async throws {
        let stratus = try ChildProcess.builtExecutable("stratus")
        try await CLIStoreFixture.with(engine) { fixture async throws in
            let database = fixture.container().privateCloudDatabase
            let zone = RecordZone.ID(zoneName: "Photos")
            try await database.save(RecordZone(zoneID: zone))
            try await database.save(makeRecord("Photo", "old", zoneID: zone))
            let tokenFile = fixture.store.path("photos.token")
            let arguments = ["changes", "--zone", "Photos", "--token-file", tokenFile] + Self.options(fixture)
            #expect(try await ZoneTestProgram.run(stratus, arguments, in: fixture.store).exitCode == 0)

            try await database.deleteRecordZone(withID: zone)
            let gone = try await ZoneTestProgram.run(stratus, arguments, in: fixture.store)
            #expect(gone.exitCode == 66, "a zone that is gone is input missing: \(gone.stderr)")
            #expect(gone.stderr.contains("zoneNotFound"))
            try await database.save(RecordZone(zoneID: zone))
            try await database.save(makeRecord("Photo", "new", zoneID: zone))
            let expired = try await ZoneTestProgram.run(stratus, arguments, in: fixture.store)
            #expect(expired.exitCode == 65)
            #expect(expired.stderr.contains("expired") && expired.stderr.contains(tokenFile))
            #expect(expired.stdout.isEmpty)

            try FileManager.default.removeItem(atPath: tokenFile)
            let fresh = try await ZoneTestProgram.run(stratus, arguments, in: fixture.store)
            #expect(fresh.exitCode == 0)
            #expect(fresh.stdoutLines.count == 1 && fresh.stdout.contains(#""recordName":"new""#))
        }
    }

    @Test("a --token-file that holds no token (the input named by mistake) exits 65, advises naming another file and is left as it is; the token files made are private (0600)", arguments: TestEngine.all)
    func tokenFileThatIsNoToken(engine: TestEngine) async throws {
        let stratus = try ChildProcess.builtExecutable("stratus")
        try await CLIStoreFixture.with(engine) { fixture async throws in
            try await fixture.container().privateCloudDatabase.save(makeRecord("Note", "n1"))
            let input = fixture.store.path("in.ndjson")
            let text = #"{"recordName":"r0","recordType":"Note","fields":{}}"# + "\n"
            try text.write(toFile: input, atomically: true, encoding: .utf8)
            let refused = try await ZoneTestProgram.run(stratus, ["changes", "--token-file", input] + Self.options(fixture), in: fixture.store)
            #expect(refused.exitCode == 65, "\(refused)")
            #expect(refused.stderr.contains("left as it is") && !refused.stderr.contains("remove it"), "\(refused.stderr)")
            #expect(try String(contentsOfFile: input, encoding: .utf8) == text)

            // A new token's first run appends to the file there, which ends within a line: its
            // first change is a line of its own.
            let tokenFile = fixture.store.path("notes.token"), output = fixture.store.path("notes.ndjson")
            try "kept line 1\nkept line 2".write(toFile: output, atomically: true, encoding: .utf8)
            let ran = try await ZoneTestProgram.run(stratus, ["changes", "--token-file", tokenFile, "--output", output] + Self.options(fixture), in: fixture.store)
            #expect(ran.exitCode == 0, "\(ran)")
            let lines = try String(contentsOfFile: output, encoding: .utf8).split(separator: "\n").map(String.init)
            #expect(lines.count == 3 && lines[1] == "kept line 2" && lines[2].contains(#""recordName":"n1""#), "\(lines)")
            try FileManager.default.removeItem(atPath: output)
            try FileManager.default.removeItem(atPath: tokenFile)
            #expect(try await ZoneTestProgram.run(stratus, ["changes", "--token-file", tokenFile, "--output", output] + Self.options(fixture), in: fixture.store).exitCode == 0)
            for file in [tokenFile, output] {
                #expect((try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? NSNumber)?.intValue == 0o600, "\(file)")
            }
        }
    }

    @Test("a second run on the same token file exits 75 while the first holds it", arguments: TestEngine.all)
    func overlappingRunsAreRefused(engine: TestEngine) async throws {
        let stratus = try ChildProcess.builtExecutable("stratus")
        try await CLIStoreFixture.with(engine) { fixture async throws in
            let tokenFile = fixture.store.path("busy.token")
            let arguments = ["changes", "--token-file", tokenFile] + Self.options(fixture)
            // Hold the lock as a running export would.
            let lock = open(tokenFile + ".lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
            #expect(lock >= 0)
            #expect(flock(lock, LOCK_EX) == 0)
            let refused = try await ZoneTestProgram.run(stratus, arguments, in: fixture.store)
            #expect(refused.exitCode == 75)
            #expect(refused.stderr.contains("another run"))
            // Unlocked first: a child process another test is starting holds a copy of the descriptor until it execs.
            flock(lock, LOCK_UN)
            close(lock)
            #expect(try await ZoneTestProgram.run(stratus, arguments, in: fixture.store).exitCode == 0)
        }
    }

    @Test("a token file through a symbolic link is locked and written as its target: both names exclude each other, and the link stays a link", arguments: TestEngine.all)
    func tokenFileThroughALink(engine: TestEngine) async throws {
        let stratus = try ChildProcess.builtExecutable("stratus")
        try await CLIStoreFixture.with(engine) { fixture async throws in
            let database = fixture.container().privateCloudDatabase
            try await database.save(makeRecord("Note", "a"))
            let tokenFile = fixture.store.path("real.token")
            let link = fixture.store.path("link.token")
            #expect(symlink(tokenFile, link) == 0)
            let options = Self.options(fixture)

            // A run through the link while another holds the target's lock is refused.
            let lock = open(tokenFile + ".lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
            #expect(lock >= 0 && flock(lock, LOCK_EX) == 0)
            let refused = try await ZoneTestProgram.run(stratus, ["changes", "--token-file", link] + options, in: fixture.store)
            #expect(refused.exitCode == 75, "\(refused.stderr)")
            #expect(refused.stdout.isEmpty)
            // Unlocked first: a child process another test is starting holds a copy of the descriptor until it execs.
            flock(lock, LOCK_UN)
            close(lock)

            let first = try await ZoneTestProgram.run(stratus, ["changes", "--token-file", link] + options, in: fixture.store)
            #expect(first.exitCode == 0 && first.stdoutLines.count == 1, "\(first.stderr)")
            var info = stat()
            #expect(lstat(link, &info) == 0 && (info.st_mode & S_IFMT) == S_IFLNK, "the link is still a link")
            #expect(try String(contentsOfFile: tokenFile, encoding: .utf8).hasPrefix("stk1_"), "the token went to the link's target")
            // Both names now give the same state: nothing new through either.
            for name in [tokenFile, link] {
                let again = try await ZoneTestProgram.run(stratus, ["changes", "--token-file", name] + options, in: fixture.store)
                #expect(again.exitCode == 0 && again.stdout.isEmpty, "\(again.stderr)")
            }
        }
    }

    @Test("usage errors exit 64; changes compact removes old tombstones", arguments: TestEngine.all)
    func usageAndCompaction(engine: TestEngine) async throws {
        let stratus = try ChildProcess.builtExecutable("stratus")
        try await CLIStoreFixture.with(engine) { fixture async throws in
            let options = Self.options(fixture)
            #expect(try await ZoneTestProgram.run(stratus, ["changes"] + options, in: fixture.store).exitCode == 64)
            #expect(try await ZoneTestProgram.run(stratus, ["changes", "compact"] + options, in: fixture.store).exitCode == 64)
            #expect(try await ZoneTestProgram.run(stratus, ["changes", "--token-file", "t", "--batch", "0"] + options, in: fixture.store).exitCode == 64)
            let help = try await ZoneTestProgram.run(stratus, ["changes", "--help"], in: fixture.store)
            #expect(help.exitCode == 0 && help.stdout.contains("exactly once"))

            let database = fixture.container().privateCloudDatabase
            try await database.save(makeRecord("Note", "n"))
            try await database.deleteRecord(withID: Record.ID(recordName: "n"))
            let kept = try await ZoneTestProgram.run(stratus, ["changes", "compact", "--keep-days", "1"] + options, in: fixture.store)
            #expect(kept.exitCode == 0)
            #expect(kept.stderr.contains("removed 0 record tombstone(s)"))
            try await Task.sleep(for: .milliseconds(20))
            let compacted = try await ZoneTestProgram.run(stratus, ["changes", "compact", "--keep-days", "0"] + options, in: fixture.store)
            #expect(compacted.stderr.contains("removed 1 record tombstone(s)"), "\(compacted.stderr)")
        }
    }

    // MARK: - Helpers

    /// Starts three `churn` writers in zone Feed (logging to <name>.log) and export runs while
    /// they write, each to a new file `export-N.ndjson` (as `--output`, or as its stdout), one
    /// after another, each once the writers added 40 changes. By turns a run is killed with
    /// SIGKILL as soon as its output grew (output written, token perhaps not yet moved),
    /// killed after a random short delay, or left to finish. Blocks its thread: call it
    /// through ``ChildProcess/onOwnThread(_:)``, so that other tests occupying the
    /// cooperative pool cannot delay the kills.
    static func exportRounds(
        _ stratus: String, _ churn: String, _ fixture: CLIStoreFixture, options: [String], toStdout: Bool,
        arguments: (URL) -> [String]
    ) throws -> (writers: [ChildProcess], outputs: [String], failures: [String]) {
        let seed = UInt64.random(in: 0..<1_000_000)
        let writers = try ["a", "b", "c"].map { name in
            try ZoneTestProgram.start(churn, options + [
                "--zone", "Feed", "--writer", name, "--operations", "300", "--seed", "\(seed)\(name.unicodeScalars.first!.value)",
                "--pause-ms", "6", "--log", fixture.store.path("\(name).log"),
            ], in: fixture.store)
        }
        func logged() -> Int {
            ["a", "b", "c"].reduce(0) { count, name in
                count + (FileManager.default.contents(atPath: fixture.store.path("\(name).log")).map { $0.filter { $0 == 0x0A }.count } ?? 0)
            }
        }
        func size(_ url: URL) -> Int { (try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int) ?? 0 }
        var outputs: [String] = []
        var failures: [String] = []
        while writers.contains(where: \.isRunning) && outputs.count < 60 {
            let target = logged() + 40
            while logged() < target && writers.contains(where: \.isRunning) { usleep(2_000) }
            let output = fixture.store.url("export-\(outputs.count).ndjson")
            outputs.append(output.path)
            let run = try ZoneTestProgram.start(stratus, arguments(output), in: fixture.store, stdout: toStdout ? output : nil)
            // Whether a kill lands before or after the output grew depends on the machine's load;
            // the outcome checked afterwards must hold either way.
            switch outputs.count % 3 {
            case 1:
                usleep(UInt32.random(in: 2_000...40_000))
                run.kill()
            case 2:
                let deadline = ContinuousClock.now + .milliseconds(500)
                while run.isRunning && ContinuousClock.now < deadline {
                    if size(output) > 0 {
                        run.kill()
                        break
                    }
                    usleep(200)
                }
            default:
                break
            }
            let status = run.waitBlocking()
            if !status.killed && status.exitCode != 0 { failures.append(status.stderr) }
        }
        return (writers, outputs, failures)
    }

    func expectWritersSucceeded(_ writers: [ChildProcess]) async throws {
        for writer in writers {
            let status = await writer.wait()
            #expect(status.exitCode == 0, "writer failed: \(status.stderr)")
        }
    }

    func logArguments(_ fixture: CLIStoreFixture) -> [String] {
        ["a", "b", "c"].flatMap { ["--log", fixture.store.path("\($0).log")] }
    }
}
