import Foundation
import Stratus
import StratusPostgres
import StratusTestSupport
import Testing

/// The engines these end-to-end tests run on: an SQLite file, or a fresh PostgreSQL schema
/// (the case is skipped, saying why, when no server is available).
enum NotificationTestEngine: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite, postgres

    var testDescription: String { self == .sqlite ? "SQLite" : "PostgreSQL" }
}

/// A store of one engine in a temporary folder, with the options every `stratus` and `churn`
/// run of a test takes.
final class NotificationFixture: Sendable {
    static let container = "com.example.churn"

    let folder: TemporaryStore
    let location: String
    private let schema: PostgresTestSchema?

    init(_ engine: NotificationTestEngine) throws {
        folder = try TemporaryStore(prefix: "stratus-notifications")
        switch engine {
        case .sqlite:
            schema = nil
            location = folder.path("store.sqlite")
        case .postgres:
            try Self.requirePostgres()
            let schema = try PostgresTestServer.makeSchema()
            self.schema = schema
            location = schema.url
        }
    }

    deinit { folder.remove() }

    /// Cancels the test case (reported as skipped, with the reason) when no PostgreSQL server is available.
    static func requirePostgres() throws {
        if !PostgresTestServer.isAvailable {
            try Test.cancel("needs PostgreSQL (\(PostgresTestServer.unavailableReason ?? "no server")): install the server or set STRATUS_TEST_POSTGRES_URL")
        }
    }

    /// The store options: this store and container, the public database, the user `tester`.
    func options(zone: String? = nil, database: String = "public", user: String = "tester") -> [String] {
        ["--store", location, "--container", Self.container, "--database", database, "--user", user] + (zone.map { ["--zone", $0] } ?? [])
    }

    func container(user: String = "tester") throws -> Container {
        PostgresEngine.isStoreURL(location)
            ? try Container(identifier: Self.container, postgresURL: location, userName: user)
            : try Container(identifier: Self.container, storePath: location, userName: user)
    }

    func start(_ program: String, _ arguments: [String], stdout: URL? = nil, environment: [String: String]? = nil) throws -> ChildProcess {
        let id = UUID().uuidString.prefix(8).lowercased()
        return try ChildProcess(program, arguments, stdout: stdout ?? folder.url("out-\(id).txt"), stderr: folder.url("err-\(id).txt"),
                                directory: folder.directory, environment: environment)
    }

    func run(_ program: String, _ arguments: [String], stdout: URL? = nil, environment: [String: String]? = nil) async throws -> ChildProcess.Status {
        await (try start(program, arguments, stdout: stdout, environment: environment)).wait()
    }
}

/// One line of `stratus notifications` output.
struct NotificationLine: Hashable {
    var sequence: Int64
    var type: String
    var subscription: String
    var recordName: String?
    var reason: String?
    var version: Int64?

    init(_ line: Substring) throws {
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(line)")
        sequence = try #require((object["sequence"] as? NSNumber)?.int64Value, "\(line)")
        type = object["notificationType"] as? String ?? ""
        subscription = object["subscriptionID"] as? String ?? ""
        recordName = object["recordName"] as? String
        reason = object["queryNotificationReason"] as? String
        version = (((object["recordFields"] as? [String: Any])?["version"] as? [String: Any])?["value"] as? NSNumber)?.int64Value
    }

    /// A query notification as the checks compare them.
    var key: String { "\(subscription) \(recordName ?? "?") \(reason ?? "?") \(version.map(String.init) ?? "-")" }
}

@Suite("stratus subscriptions, notifications and watch", .timeLimit(.minutes(30)))
struct NotificationsCLITests {
    static let writers = ["a", "b", "c"]

    @Test("subscriptions create, list and delete: JSON out, CloudKit's rules as exit codes", arguments: NotificationTestEngine.allCases)
    func subscriptionsCommand(_ engine: NotificationTestEngine) async throws {
        let stratus = try ChildProcess.builtExecutable("stratus")
        let fixture = try NotificationFixture(engine)
        let options = fixture.options()
        let created = try await fixture.run(stratus, ["subscriptions", "create", "big", "--type", "Order", "--where", "total > 100", "--on", "create,update",
                                                      "--keys", "total", "--all-zones"] + options)
        #expect(created.exitCode == 0, "\(created.stderr)")
        #expect(created.stdoutLines == [
            #"{"subscriptionID":"big","subscriptionType":"query","recordType":"Order","predicate":"total > 100","firesOn":["create","update"],"firesOnce":false,"notificationInfo":{"desiredKeys":["total"]}}"#,
        ])
        #expect(try await fixture.run(stratus, ["zones", "create", "Photos"] + options).exitCode == 0)
        let zoned = try await fixture.run(stratus, ["subscriptions", "create", "photos", "--zone-wide"] + fixture.options(zone: "Photos"))
        #expect(zoned.stdout.contains(#""subscriptionType":"zone","zoneWide":true,"zoneID":{"zoneName":"Photos""#), "\(zoned.stdout)\n\(zoned.stderr)")
        let once = try await fixture.run(stratus, ["subscriptions", "create", "first", "--type", "Order", "--once"] + options)
        #expect(once.stdout.contains(#""firesOnce":true"#) && once.stdout.contains(#""zoneName":"_defaultZone""#), "\(once.stderr)")

        let listed = try await fixture.run(stratus, ["subscriptions", "list"] + options)
        #expect(listed.stdoutLines.map { $0.components(separatedBy: "\"")[3] } == ["big", "first", "photos"])
        // The library sees what the tool made.
        #expect(try await fixture.container().publicCloudDatabase.allSubscriptions().map(\.subscriptionID) == ["big", "first", "photos"])

        // CloudKit's rules: database subscriptions only in the private and shared databases.
        let refused = try await fixture.run(stratus, ["subscriptions", "create", "all", "--database-wide"] + options)
        #expect(refused.exitCode == 1 && refused.stderr.contains("private and shared"), "\(refused.stderr)")
        let privateOne = try await fixture.run(stratus, ["subscriptions", "create", "all", "--database-wide"] + fixture.options(database: "private"))
        #expect(privateOne.exitCode == 0 && privateOne.stdout.contains(#""subscriptionType":"database""#), "\(privateOne.stderr)")
        let duplicate = try await fixture.run(stratus, ["subscriptions", "create", "big-again", "--type", "Order", "--where", "total > 100", "--on", "update,create", "--all-zones"] + options)
        #expect(duplicate.exitCode == 1 && duplicate.stderr.contains("serverRejectedRequest"), "\(duplicate.stderr)")
        let missingZone = try await fixture.run(stratus, ["subscriptions", "create", "x", "--zone-wide"] + fixture.options(zone: "Nowhere"))
        #expect(missingZone.exitCode == 1 && missingZone.stderr.contains("zoneNotFound"), "\(missingZone.stderr)")

        // Usage errors: 64, with the option named.
        let badPredicate = try await fixture.run(stratus, ["subscriptions", "create", "x", "--type", "Order", "--where", "total >"] + options)
        #expect(badPredicate.exitCode == 64 && badPredicate.stderr.contains("--where"), "\(badPredicate.stderr)")
        #expect(try await fixture.run(stratus, ["subscriptions", "create", "x", "--type", "Order", "--on", "insert"] + options).exitCode == 64)
        #expect(try await fixture.run(stratus, ["subscriptions", "create", "x", "--where", "n == 1"] + options).exitCode == 64)
        #expect(try await fixture.run(stratus, ["subscriptions", "create", "x", "--zone-wide", "--where", "n == 1"] + options).exitCode == 64)
        #expect(try await fixture.run(stratus, ["subscriptions", "list", "--type", "Order"] + options).exitCode == 64)
        #expect(try await fixture.run(stratus, ["subscriptions", "rename"] + options).exitCode == 64)

        let deleted = try await fixture.run(stratus, ["subscriptions", "delete", "first", "nothing"] + options)
        #expect(deleted.exitCode == 1)
        #expect(deleted.stdoutLines == [#"{"subscriptionID":"first","deleted":true}"#])
        #expect(deleted.stderr.contains("nothing") && deleted.stderr.contains("unknownItem"))
    }

    @Test("subscriptions create --where reads values by the schema's types as query does: a date and a reference by record name fire; a string for an INT64 is exit 64", arguments: NotificationTestEngine.allCases)
    func subscriptionWhereIsTypedAsQueries(_ engine: NotificationTestEngine) async throws {
        let stratus = try ChildProcess.builtExecutable("stratus")
        let fixture = try NotificationFixture(engine)
        let options = fixture.options()
        let schema = fixture.folder.url("item.ckdb")
        try Data("DEFINE SCHEMA RECORD TYPE Item (due TIMESTAMP QUERYABLE, owner REFERENCE QUERYABLE, n INT64 QUERYABLE, GRANT WRITE TO \"_creator\", GRANT CREATE TO \"_icloud\", GRANT READ TO \"_world\");".utf8).write(to: schema)
        #expect(try await fixture.run(stratus, ["schema", "import", schema.path] + options).exitCode == 0)
        for (id, condition) in [("early", "due < '2025-01-01'"), ("mine", "owner == 'user-1'")] {
            let created = try await fixture.run(stratus, ["subscriptions", "create", id, "--type", "Item", "--where", condition, "--on", "create"] + options)
            #expect(created.exitCode == 0, "\(created.stderr)")
        }
        let mistyped = try await fixture.run(stratus, ["subscriptions", "create", "typo", "--type", "Item", "--where", "n == '1'"] + options)
        #expect(mistyped.exitCode == 64 && mistyped.stderr.contains("INT64"), "\(mistyped.stderr)")
        let record = #"{"recordName":"a1","recordType":"Item","fields":{"due":{"value":0,"type":"TIMESTAMP"},"owner":{"value":{"recordName":"user-1","action":"NONE"},"type":"REFERENCE"},"n":{"value":1,"type":"INT64"}}}"#
        let input = fixture.folder.url("a1.ndjson")
        try Data((record + "\n").utf8).write(to: input)
        #expect(try await fixture.run(stratus, ["import", input.path] + options).exitCode == 0)
        let fired = try await fixture.run(stratus, ["notifications", "--token-file", fixture.folder.path("token")] + options)
        #expect(fired.exitCode == 0, "\(fired.stderr)")
        let keys = try fired.stdoutLines.map { try NotificationLine($0[...]).key }.sorted()
        #expect(keys == ["early a1 recordCreated -", "mine a1 recordCreated -"], "\(fired.stdout)")
    }

    /// The cron guarantee end to end: three writer processes change zone Feed while
    /// `stratus notifications --output` runs again and again, each run writing a new file and
    /// many runs killed with SIGKILL; the files, read in order, must hold every notification the
    /// writers' changes fired exactly once, in commit order, and none for changes that did not
    /// match.
    @Test("--output: every notification exactly once, in commit order, across runs killed at random", arguments: NotificationTestEngine.allCases)
    func exactlyOnceWithKills(_ engine: NotificationTestEngine) async throws {
        let (stratus, churn) = (try ChildProcess.builtExecutable("stratus"), try ChildProcess.builtExecutable("churn"))
        let fixture = try NotificationFixture(engine)
        try await Self.subscribe(stratus, fixture)
        let tokenFile = fixture.folder.path("feed.token")
        let rounds = try await ChildProcess.onOwnThread {
            try Self.rounds(churn, fixture) { number in
                let output = fixture.folder.path("notes-\(number).ndjson")
                return (output, try fixture.start(stratus, ["notifications", "--token-file", tokenFile, "--output", output, "--batch", "3", "--limit", "20"] + fixture.options()))
            }
        }
        #expect(rounds.failures.isEmpty, "\(rounds.failures)")
        try await Self.expectSucceeded(rounds.writers)
        let last = fixture.folder.path("notes-last.ndjson")
        let final = try await fixture.run(stratus, ["notifications", "--token-file", tokenFile, "--output", last] + fixture.options())
        #expect(final.exitCode == 0, "\(final.stderr)")
        try Self.verify(outputs: rounds.outputs + [last], fixture: fixture)
    }

    /// `--exec` as a pipeline step: the command fails on purpose every third batch (the run stops
    /// with 75 and the batch comes again) and runs are killed at random, also while the command
    /// runs; a command that skips the sequences it has applied sees each notification once.
    @Test("--exec: a failing command and killed runs lose no batch", arguments: NotificationTestEngine.allCases)
    func execFailingAndKilled(_ engine: NotificationTestEngine) async throws {
        let (stratus, churn) = (try ChildProcess.builtExecutable("stratus"), try ChildProcess.builtExecutable("churn"))
        let fixture = try NotificationFixture(engine)
        try await Self.subscribe(stratus, fixture)
        let step = try fixture.folder.writeFile("step.sh", Data("""
            # Applies a batch: under a lock (a killed run's command may still be running), keeping
            # lines above the last sequence applied; while the file "failing" exists, every third
            # call fails before applying.
            exec 9>step.lock
            flock 9
            n=$(cat calls 2>/dev/null || echo 0); n=$((n + 1)); echo $n > calls
            cat > incoming.tmp
            if [ -e failing ] && [ $((n % 3)) -eq 0 ]; then exit 1; fi
            last=$(cat last 2>/dev/null || echo 0)
            while IFS= read -r line; do
              seq=$(printf '%s\\n' "$line" | sed -n 's/^{"notificationID":"[0-9]*","sequence":\\([0-9]*\\),.*/\\1/p')
              if [ "$seq" -gt "$last" ]; then printf '%s\\n' "$line" >> applied.ndjson; last=$seq; fi
            done < incoming.tmp
            echo $last > last.tmp && mv last.tmp last

            """.utf8)).path
        _ = try fixture.folder.writeFile("failing", Data())
        let tokenFile = fixture.folder.path("feed.token")
        let drain = ["notifications", "--token-file", tokenFile, "--exec", "sh \(step)", "--batch", "4"] + fixture.options()
        let command = drain + ["--limit", "24"]
        let rounds = try await ChildProcess.onOwnThread {
            try Self.rounds(churn, fixture) { _ in (nil, try fixture.start(stratus, command)) }
        }
        // A run ends 0 (done), 75 (the command failed on purpose) or by the kill.
        #expect(rounds.failures.allSatisfy { $0.contains("--exec command exited with status 1") }, "\(rounds.failures)")
        try await Self.expectSucceeded(rounds.writers)
        // The rounds end when the writers do, so how many calls they made depends on scheduling.
        // Runs left alone make up the rest until the third call (which fails on purpose): a
        // call takes at most 4 notifications, and the writers' changes fired far more than 8.
        let calls = { Int(fixture.folder.path("calls").contentsOrEmpty.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0 }
        for _ in 0..<10 where calls() < 3 {
            let run = try await fixture.run(stratus, command)
            #expect(run.exitCode == 0 || (run.exitCode == 75 && run.stderr.contains("--exec command exited with status 1")), "\(run.stderr)")
        }
        #expect(calls() >= 3, "the command failed on purpose at least once")
        // The command stops failing; what the runs left comes in one run (or a few, should a
        // killed run's command still hold the lock).
        try FileManager.default.removeItem(atPath: fixture.folder.path("failing"))
        var drained = false
        for _ in 0..<5 where !drained {
            let run = try await fixture.run(stratus, drain)
            #expect(run.exitCode == 0 || run.exitCode == 75, "\(run.stderr)")
            drained = run.exitCode == 0
        }
        #expect(drained)
        try Self.verify(outputs: [fixture.folder.path("applied.ndjson")], fixture: fixture)
    }

    @Test("watch: prints each notification as it commits, saves its token on SIGTERM, goes on from it", arguments: NotificationTestEngine.allCases)
    func watchFollowsLive(_ engine: NotificationTestEngine) async throws {
        let stratus = try ChildProcess.builtExecutable("stratus")
        let fixture = try NotificationFixture(engine)
        let database = try fixture.container().publicCloudDatabase
        let created = try await fixture.run(stratus, ["subscriptions", "create", "notes", "--type", "Note", "--keys", "n"] + fixture.options())
        #expect(created.exitCode == 0, "\(created.stderr)")
        try await database.save(makeRecord("Note", "old", ["n": .int64(0)]))

        // Without a token file: from the feed's end, so the old note is not printed. The watch
        // says nothing when it has read where the feed ends, and a note saved before that is
        // rightly never printed (a loaded machine can start it late). So probe notes are saved
        // until it prints one: it follows from then on, and prints every later probe.
        let fresh = fixture.folder.url("fresh.ndjson")
        let fromNow = try fixture.start(stratus, ["watch"] + fixture.options(), stdout: fresh)
        var probes: [String] = []
        let probing = ContinuousClock.now + .seconds(300)
        while try Self.lines(fresh.path).isEmpty && fromNow.isRunning && ContinuousClock.now < probing {
            probes.append("probe-\(probes.count)")
            try await database.save(makeRecord("Note", probes.last!, ["n": .int64(-1)]))
            // A while for this probe to show before the next is saved; how long does not matter.
            let shown = ContinuousClock.now + .milliseconds(500)
            while try Self.lines(fresh.path).isEmpty && fromNow.isRunning && ContinuousClock.now < shown { try await Task.sleep(for: .milliseconds(20)) }
        }
        let firstSeen = try #require(try Self.lines(fresh.path).first, "the watch without a token printed none of \(probes.count) probe(s)").recordName ?? "?"
        let seenProbes = Array(probes.drop { $0 != firstSeen })
        #expect(!seenProbes.isEmpty, "the watch without a token printed \(firstSeen) first, not a probe saved after it started")

        let tokenFile = fixture.folder.path("watch.token")
        let out1 = fixture.folder.url("watch-1.ndjson")
        let watch = try fixture.start(stratus, ["watch", "--token-file", tokenFile] + fixture.options(), stdout: out1)
        let backlog = 1 + probes.count
        #expect(try await Self.waitForLines(out1, count: backlog, while: watch).count == backlog, "the feed's backlog comes first")
        for i in 1...3 {
            try await database.save(makeRecord("Note", "live-\(i)", ["n": .int64(Int64(i))]))
            #expect(try await Self.waitForLines(out1, count: backlog + i, while: watch).count == backlog + i, "printed as it commits")
        }
        watch.signal(SIGTERM)
        let stopped = await watch.wait()
        #expect(stopped.exitCode == 143 && !stopped.killed, "\(stopped.stderr)")
        #expect(stopped.stderr.contains("token saved in \(tokenFile)"))
        let printed = try Self.lines(out1.path).map { $0.recordName ?? "?" }
        #expect(printed == ["old"] + probes + ["live-1", "live-2", "live-3"])

        #expect(try await Self.waitForLines(fresh, count: seenProbes.count + 3, while: fromNow).map { $0.recordName ?? "?" } == seenProbes + ["live-1", "live-2", "live-3"])
        fromNow.signal(SIGINT)
        #expect(await fromNow.wait().exitCode == 130)

        // Written while nobody watched: the next watch starts after its token.
        try await database.save(makeRecord("Note", "later", ["n": .int64(9)]))
        let out2 = fixture.folder.url("watch-2.ndjson")
        let again = try fixture.start(stratus, ["watch", "--token-file", tokenFile, "--exec", "cat >> \(fixture.folder.path("exec.ndjson"))"] + fixture.options(), stdout: out2)
        #expect(try await Self.waitForLines(fixture.folder.url("exec.ndjson"), count: 1, while: again).map { $0.recordName ?? "?" } == ["later"])
        again.signal(SIGTERM)
        #expect(await again.wait().exitCode == 143)
        // Another run on the same token file is refused while a watch holds it.
        let holder = try fixture.start(stratus, ["watch", "--token-file", tokenFile] + fixture.options())
        #expect(try await Self.waitUntilLocked(tokenFile + ".lock", while: holder))
        let locked = try await fixture.run(stratus, ["notifications", "--token-file", tokenFile] + fixture.options())
        #expect(locked.exitCode == 75 && locked.stderr.contains("another run"), "\(locked.stderr)")
        holder.signal(SIGTERM)
        #expect(await holder.wait().exitCode == 143)
    }

    @Test("watch --exec: a stop signal that reaches the --exec command too (the process group's: Ctrl-C, a service manager's stop) ends with 143, not 75; the batch comes again")
    func watchStoppedWithItsExecCommand() async throws {
        let stratus = try ChildProcess.builtExecutable("stratus")
        let fixture = try NotificationFixture(.sqlite)
        let database = try fixture.container().publicCloudDatabase
        #expect(try await fixture.run(stratus, ["subscriptions", "create", "notes", "--type", "Note"] + fixture.options()).exitCode == 0)
        try await database.save(makeRecord("Note", "first"))
        let tokenFile = fixture.folder.path("watch.token")
        // The command signals its parent, as a group's signal does, and then dies of the same.
        let stopped = try await fixture.run(stratus, ["watch", "--token-file", tokenFile, "--exec", "kill -TERM $PPID; kill -TERM $$"] + fixture.options())
        #expect(stopped.exitCode == 143 && !stopped.killed, "\(stopped.exitCode) \(stopped.stderr)")
        #expect(stopped.stderr.contains("comes again"), "\(stopped.stderr)")
        let again = try await fixture.run(stratus, ["notifications", "--token-file", tokenFile] + fixture.options())
        #expect(again.exitCode == 0 && again.stdout.contains("\"first\""), "\(again.stdout) \(again.stderr)")
    }

    @Test("a development token given to a production run names both feeds plainly, the environment in parentheses")
    func tokenOfAnotherEnvironment() async throws {
        let stratus = try ChildProcess.builtExecutable("stratus")
        let fixture = try NotificationFixture(.sqlite)
        #expect(try await fixture.run(stratus, ["subscriptions", "create", "notes", "--type", "Note"] + fixture.options()).exitCode == 0)
        try await fixture.container().publicCloudDatabase.save(makeRecord("Note", "first"))
        let tokenFile = fixture.folder.path("dev.token")
        #expect(try await fixture.run(stratus, ["notifications", "--token-file", tokenFile] + fixture.options()).exitCode == 0)
        let refused = try await fixture.run(stratus, ["notifications", "--token-file", tokenFile, "--environment", "production"] + fixture.options())
        #expect(refused.exitCode == 64 && refused.stderr.contains("(production)") && !refused.stderr.contains("\\u{1F}"), "\(refused.exitCode) \(refused.stderr)")
    }

    // SQLite only: a file replaced under its path; a PostgreSQL store replaced by a copy is
    // another URL (tokenOfAReplacedStore).
    @Test("watch on SQLite ends with 70 naming the store when its file is replaced under it (a restore), instead of following a file nobody writes")
    func watchNoticesReplacedStore() async throws {
        let stratus = try ChildProcess.builtExecutable("stratus")
        let fixture = try NotificationFixture(.sqlite)
        let database = try fixture.container().publicCloudDatabase
        #expect(try await fixture.run(stratus, ["subscriptions", "create", "notes", "--type", "Note"] + fixture.options()).exitCode == 0)
        try await database.save(makeRecord("Note", "one"))
        let tokenFile = fixture.folder.path("watch.token")
        let watch = try fixture.start(stratus, ["watch", "--token-file", tokenFile] + fixture.options(), stdout: fixture.folder.url("watch.ndjson"))
        #expect(try await Self.waitForLines(fixture.folder.url("watch.ndjson"), count: 1, while: watch).count == 1)

        // A restore: a copy of the store moved over its path.
        let copy = fixture.folder.path("restored.sqlite")
        try FileManager.default.copyItem(atPath: fixture.location, toPath: copy)
        #expect(rename(copy, fixture.location) == 0)
        let ended = await watch.wait()
        #expect(ended.exitCode == 70 && ended.stderr.contains("replaced"), "\(ended.stderr)")
    }

    @Test("notifications with a token of the store a stratus copy backup replaced: exit 64 saying it belongs to another store (as stratus changes), and removing it starts again", arguments: NotificationTestEngine.allCases)
    func tokenOfAReplacedStore(_ engine: NotificationTestEngine) async throws {
        let stratus = try ChildProcess.builtExecutable("stratus")
        let fixture = try NotificationFixture(engine)
        let database = try fixture.container().publicCloudDatabase
        #expect(try await fixture.run(stratus, ["subscriptions", "create", "notes", "--type", "Note"] + fixture.options()).exitCode == 0)
        try await database.save(makeRecord("Note", "one"))
        let tokenFile = fixture.folder.path("n.token")
        #expect(try await fixture.run(stratus, ["notifications", "--token-file", tokenFile] + fixture.options()).exitCode == 0)
        // A cron job's run with nothing new, under --quiet: nothing on stderr to mail.
        let idle = try await fixture.run(stratus, ["notifications", "--token-file", tokenFile, "--quiet"] + fixture.options())
        #expect(idle.exitCode == 0 && idle.stderr.isEmpty, "\(idle.stderr)")

        // The backup replaces the store: moved over its file, or named by the job's URL instead.
        let backupSchema = engine == .postgres ? try PostgresTestServer.makeSchema() : nil
        let backup = backupSchema?.url ?? fixture.folder.path("backup.sqlite")
        #expect(try await fixture.run(stratus, ["copy", "--from", fixture.location, "--to", backup]).exitCode == 0)
        var replaced = fixture.location
        if engine == .sqlite {
            for suffix in ["-wal", "-shm"] { unlink(fixture.location + suffix) }
            #expect(rename(backup, fixture.location) == 0)
            for suffix in ["-wal", "-shm"] { _ = rename(backup + suffix, fixture.location + suffix) }
        } else {
            replaced = backup
        }
        // `options()` begins with the fixture's --store.
        let onReplaced = ["--store", replaced] + fixture.options().dropFirst(2)
        let refused = try await fixture.run(stratus, ["notifications", "--token-file", tokenFile] + onReplaced)
        #expect(refused.exitCode == 64 && refused.stderr.contains("another store") && refused.stderr.contains("remove it"), "\(refused.stderr)")
        try FileManager.default.removeItem(atPath: tokenFile)
        #expect(try await fixture.run(stratus, ["notifications", "--token-file", tokenFile] + onReplaced).exitCode == 0)
        withExtendedLifetime(backupSchema) {}
    }

    @Test("notifications: an expired token exits 65, compact removes old notifications, usage errors exit 64", arguments: NotificationTestEngine.allCases)
    func expiryAndUsage(_ engine: NotificationTestEngine) async throws {
        let stratus = try ChildProcess.builtExecutable("stratus")
        let fixture = try NotificationFixture(engine)
        let database = try fixture.container().publicCloudDatabase
        #expect(try await fixture.run(stratus, ["subscriptions", "create", "notes", "--type", "Note"] + fixture.options()).exitCode == 0)
        try await database.save(makeRecord("Note", "one"))
        let tokenFile = fixture.folder.path("t.token")
        let first = try await fixture.run(stratus, ["notifications", "--token-file", tokenFile] + fixture.options())
        #expect(first.exitCode == 0 && first.stdoutLines.count == 1, "\(first.stderr)")
        #expect(first.stderr.contains("wrote 1 notification(s)"))
        // A token saved before notifications that compaction removed expires.
        _ = try fixture.folder.writeFile("early.token", try Data(contentsOf: URL(fileURLWithPath: tokenFile)))
        try await database.save(makeRecord("Note", "two"))
        try await Task.sleep(for: .milliseconds(20))
        let compacted = try await fixture.run(stratus, ["notifications", "compact", "--keep-days", "0"] + fixture.options())
        #expect(compacted.exitCode == 0 && compacted.stderr.contains("removed 2 notification(s)"), "\(compacted.stderr)")
        let expired = try await fixture.run(stratus, ["notifications", "--token-file", fixture.folder.path("early.token")] + fixture.options())
        #expect(expired.exitCode == 65 && expired.stderr.contains("expired"), "\(expired.stderr)")
        #expect(expired.stderr.split(separator: "\n").allSatisfy { $0.hasPrefix("stratus: ") }, "\(expired.stderr)")
        // A token of `stratus changes` is good for its own job: not called expired, kept (64).
        let changesToken = fixture.folder.path("changes.token")
        let changes = try await fixture.run(stratus, ["changes", "--token-file", changesToken, "--output", fixture.folder.path("changes.ndjson")] + fixture.options())
        #expect(changes.exitCode == 0, "\(changes.stderr)")
        let kept = try Data(contentsOf: URL(fileURLWithPath: changesToken))
        for command in ["notifications", "watch"] {
            let mixed = try await fixture.run(stratus, [command, "--token-file", changesToken] + fixture.options())
            #expect(mixed.exitCode == 64 && mixed.stderr.contains("holds the position of zone _defaultZone in the public database")
                    && mixed.stderr.contains("this run asks for the notifications of") && !mixed.stderr.contains("remove it"), "\(command): \(mixed.stderr)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: changesToken)) == kept)
        }
        // Usage.
        #expect(try await fixture.run(stratus, ["notifications"] + fixture.options()).exitCode == 64)
        #expect(try await fixture.run(stratus, ["notifications", "--token-file", tokenFile, "--output", "x", "--exec", "cat"] + fixture.options()).exitCode == 64)
        #expect(try await fixture.run(stratus, ["notifications", "compact"] + fixture.options()).exitCode == 64)
        #expect(try await fixture.run(stratus, ["watch", "--output", "x"] + fixture.options()).exitCode == 64)
        let help = try await fixture.run(stratus, ["watch", "--help"])
        #expect(help.exitCode == 0 && help.stdout.contains("LISTEN/NOTIFY"))
    }

    // MARK: - Helpers

    /// Zone Feed and the subscriptions the checks follow: `writer-a` (writer a's records, every
    /// change), `late` (updates and deletions of records at version 3 or later) and `feed` (the
    /// zone: one notification per transaction).
    static func subscribe(_ stratus: String, _ fixture: NotificationFixture) async throws {
        let options = fixture.options(zone: "Feed")
        for arguments in [
            ["zones", "create", "Feed"],
            ["subscriptions", "create", "writer-a", "--type", "Item", "--where", "writer == 'a'", "--keys", "version"],
            ["subscriptions", "create", "late", "--type", "Item", "--where", "version >= 3", "--on", "update,delete", "--keys", "version"],
            ["subscriptions", "create", "feed", "--zone-wide"],
        ] {
            let run = try await fixture.run(stratus, arguments + options)
            #expect(run.exitCode == 0, "\(arguments): \(run.stderr)")
        }
    }

    /// Starts three `churn` writers in zone Feed and consumer runs while they write, one after
    /// another, each once the writers logged 30 more changes. By turns a run is killed with
    /// SIGKILL after a random short delay, as soon as its output grew, or left to finish.
    /// Blocks its thread (call it through ``ChildProcess/onOwnThread(_:)``).
    static func rounds(_ churn: String, _ fixture: NotificationFixture, consumer: (Int) throws -> (output: String?, run: ChildProcess)) throws
        -> (writers: [ChildProcess], outputs: [String], failures: [String]) {
        let seed = UInt64.random(in: 0..<1_000_000)
        let processes = try writers.map { name in
            try fixture.start(churn, ["--store", fixture.location, "--container", NotificationFixture.container, "--zone", "Feed", "--writer", name,
                                      "--operations", "150", "--seed", "\(seed)\(name.unicodeScalars.first!.value)", "--pause-ms", "5",
                                      "--log", fixture.folder.path("\(name).log")])
        }
        func logged() -> Int {
            processes.indices.reduce(0) { count, index in
                count + fixture.folder.path("\(Self.writers[index]).log").contentsOrEmpty.filter { $0 == "\n" }.count
            }
        }
        func size(_ path: String?) -> Int { path.flatMap { try? FileManager.default.attributesOfItem(atPath: $0)[.size] as? Int } ?? 0 }
        var outputs: [String] = []
        var failures: [String] = []
        var number = 0
        while processes.contains(where: \.isRunning) && number < 60 {
            let target = logged() + 30
            while logged() < target && processes.contains(where: \.isRunning) { usleep(2_000) }
            number += 1
            let (output, run) = try consumer(number)
            if let output { outputs.append(output) }
            switch number % 3 {
            case 1:
                usleep(UInt32.random(in: 2_000...60_000))
                run.kill()
            case 2:
                let deadline = ContinuousClock.now + .milliseconds(500)
                while run.isRunning && ContinuousClock.now < deadline {
                    if size(output) > 0 || (output == nil && size(fixture.folder.path("calls")) > 0) {
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
        return (processes, outputs, failures)
    }

    static func expectSucceeded(_ writers: [ChildProcess]) async throws {
        for writer in writers {
            let status = await writer.wait()
            #expect(status.exitCode == 0, "writer failed: \(status.stderr)")
        }
    }

    /// The complete lines of an output file (a killed run's torn last line is not one).
    static func lines(_ path: String) throws -> [NotificationLine] {
        var lines = path.contentsOrEmpty.split(separator: "\n", omittingEmptySubsequences: false)
        lines.removeLast()
        return try lines.filter { !$0.isEmpty }.map(NotificationLine.init)
    }

    /// Waits (up to 2 minutes) until `url` holds `count` lines, or the process ends.
    static func waitForLines(_ url: URL, count: Int, while process: ChildProcess) async throws -> [NotificationLine] {
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline {
            let found = try lines(url.path)
            if found.count >= count || !process.isRunning { return found }
            try await Task.sleep(for: .milliseconds(20))
        }
        return try lines(url.path)
    }

    /// Waits (up to 2 minutes) until `process` holds the lock file's lock. Read from
    /// /proc/locks, never probed by taking the lock: a probe holding it for a moment would make
    /// the process's own `LOCK_NB` attempt, should it fall in that moment, fail with exit 75.
    static func waitUntilLocked(_ path: String, while process: ChildProcess) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline && process.isRunning {
            var info = stat()
            if stat(path, &info) == 0 {
                // `1: FLOCK  ADVISORY  WRITE 12345 fd:01:1234567 0 EOF`: pid, then major:minor:inode.
                // Read to its end: a /proc file has no size to read up to.
                let locks = try? FileHandle(forReadingFrom: URL(fileURLWithPath: "/proc/locks")).readToEnd()
                let held = String(decoding: locks ?? Data(), as: UTF8.self).split(separator: "\n").contains { line in
                    let fields = line.split(separator: " ", omittingEmptySubsequences: true)
                    guard fields.count >= 6, fields[1] == "FLOCK", fields[3] == "WRITE", fields[4] == "\(process.pid)" else { return false }
                    return fields[5].split(separator: ":").last.flatMap { UInt64($0) } == UInt64(info.st_ino)
                }
                if held { return true }
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    /// Checks the outputs, read in order, against the writers' logs: each expected query
    /// notification exactly once and nothing else, feed places increasing (commit order), each
    /// writer's notifications in its log's order, and one zone notification per request.
    static func verify(outputs: [String], fixture: NotificationFixture) throws {
        var expected: [String: [String]] = [:]   // writer → expected keys in log order
        var requests = 0
        for writer in writers {
            var lastVersion: [String: Int64] = [:]
            var seenRequests: Set<Int> = []
            for line in fixture.folder.path("\(writer).log").contentsOrEmpty.split(separator: "\n") {
                let entry = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
                let name = try #require(entry["recordName"] as? String)
                seenRequests.insert(try #require(entry["request"] as? Int))
                if entry["op"] as? String == "delete" {
                    let version = lastVersion[name] ?? 0
                    // One write's notifications come in subscription ID order: late, then writer-a.
                    if version >= 3 { expected[writer, default: []].append("late \(name) recordDeleted -") }
                    if writer == "a" { expected[writer, default: []].append("writer-a \(name) recordDeleted -") }
                } else {
                    let version = try #require((entry["version"] as? NSNumber)?.int64Value)
                    lastVersion[name] = version
                    let reason = version == 1 ? "recordCreated" : "recordUpdated"
                    if version >= 3 { expected[writer, default: []].append("late \(name) recordUpdated \(version)") }
                    if writer == "a" { expected[writer, default: []].append("writer-a \(name) \(reason) \(version)") }
                }
            }
            requests += seenRequests.count
        }
        let lines = try outputs.flatMap(lines)
        #expect(zip(lines, lines.dropFirst()).allSatisfy { $0.sequence < $1.sequence }, "feed places grow from line to line: nothing twice, commit order")
        let queries = lines.filter { $0.type == "query" }
        #expect(queries.map(\.key).sorted() == expected.values.flatMap { $0 }.sorted(), "exactly the notifications the changes fired")
        for writer in writers {
            let mine = queries.filter { $0.recordName?.hasPrefix("\(writer)-") == true }.map(\.key)
            #expect(mine == expected[writer] ?? [], "writer \(writer)'s notifications in its commit order")
        }
        #expect(lines.filter { $0.type == "recordZone" }.count == requests, "one zone notification per committed request")
        #expect(lines.allSatisfy { $0.type == "query" || ($0.type == "recordZone" && $0.subscription == "feed") })
        #expect(!queries.isEmpty && requests > 100)
    }
}

private extension String {
    /// The file's contents as text, or empty when there is no file.
    var contentsOrEmpty: String { FileManager.default.contents(atPath: self).map { String(decoding: $0, as: UTF8.self) } ?? "" }
}
