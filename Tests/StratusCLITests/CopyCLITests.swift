import Foundation
@_spi(StratusEngine) import Stratus
import StratusPostgres
import StratusTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `stratus copy` end to end: whole stores between engines, either way, resumed after kills,
/// compared at the end (issue 12, "Moving between engines").
@Suite("stratus copy", .serialized, .timeLimit(.minutes(30)))
struct CopyCLITests {
    /// A direction of a copy: the engines of the source and the destination.
    struct Direction: Sendable, CustomTestStringConvertible {
        var from: TestEngine
        var to: TestEngine
        var testDescription: String { "\(from.testDescription) → \(to.testDescription)" }

        static let all = [Direction(from: .sqlite, to: .postgres), Direction(from: .postgres, to: .sqlite), Direction(from: .sqlite, to: .sqlite)]
    }

    /// Two CLIs of one test: the source's engine and the destination's (sharing a folder).
    static func clis(_ store: TemporaryStore, _ direction: Direction) async throws -> (source: CLI, destination: CLI) {
        (try await CLI(store, engine: direction.from, storeName: "source.sqlite"), try await CLI(store, engine: direction.to, storeName: "destination.sqlite"))
    }

    /// The logins the test writes private databases as, by their user record names: owners
    /// are stored by record name, and `stratus --user` takes logins.
    static func logins(_ containerIdentifier: String) -> [String: String] {
        Dictionary(uniqueKeysWithValues: ["alice", "bob"].map { (UserDirectoryEntry.derivedRecordName(containerIdentifier: containerIdentifier, login: $0), $0) })
    }

    /// Every database, zone and type of a store exported as NDJSON lines (asset download URLs
    /// left out: each store has its own copy of an asset), keyed by where they came from.
    static func contents(_ cli: CLI) async throws -> [String: [String]] {
        let info = try await cli.run(["info", "--json"])
        #expect(info.exitCode == 0, "\(info)")
        let object = try JSONLine.object(info.stdout.trimmingCharacters(in: .newlines))
        var contents: [String: [String]] = [:]
        for container in object["containers"] as? [[String: Any]] ?? [] {
            let identifier = container["containerIdentifier"] as? String ?? ""
            for database in container["databases"] as? [[String: Any]] ?? [] {
                let scope = database["database"] as? String ?? "", owner = database["owner"] as? String ?? ""
                for zone in database["zones"] as? [[String: Any]] ?? [] {
                    let zoneName = (zone["zoneID"] as? [String: Any])?["zoneName"] as? String ?? ""
                    for type in (zone["recordTypes"] as? [String: Int] ?? [:]).keys.sorted() {
                        var arguments = ["export", "--type", type, "--container", identifier, "--database", scope, "--zone", zoneName, "--quiet"]
                        if !owner.isEmpty { arguments += ["--user", try #require(Self.logins(identifier)[owner], "an owner the test made")] }
                        let export = try await cli.run(arguments)
                        #expect(export.exitCode == 0, "\(export)")
                        contents["\(identifier) \(scope) \(owner) \(zoneName) \(type)"] = export.stdoutLines.map { $0.replacing(#/"downloadURL":"[^"]*",?/#, with: "") }
                    }
                }
            }
        }
        return contents
    }

    /// The user `stratus` acts as on the CLI's store when no user is named: the role of a
    /// PostgreSQL URL (libpq's default: the login name), the login name for SQLite.
    static func actingUser(_ cli: CLI) throws -> String {
        guard PostgresEngine.isStoreURL(cli.storePath) else { return NSUserName() }
        return try PostgresConnectionString.settings(in: cli.storePath)["user"] ?? NSUserName()
    }

    /// The parts of `info --json` a copy must keep: containers, schema types, databases,
    /// zones with their capabilities and counts.
    static func shape(_ cli: CLI) async throws -> String {
        let info = try await cli.run(["info", "--json"])
        var object = try JSONLine.object(info.stdout.trimmingCharacters(in: .newlines))
        for key in ["store", "engine", "sizeInBytes", "schemaVersion"] { object[key] = nil }
        return String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self)
    }

    /// A store with every field type, assets, parents and references, zones with and without
    /// the atomic capability, two users' private databases and a second container with a schema.
    static func fillRichly(_ cli: CLI, _ store: TemporaryStore) async throws {
        let every = ExportCLITests.EveryType.lines.joined(separator: "\n") + "\n"
        #expect(try await cli.run(["import", "--quiet"], stdin: every).exitCode == 0)
        let bytes = patternBytes(count: 30_000, seed: 3)
        let photo = try store.writeFile("photo.bin", bytes)
        let asset = #"{"recordName":"pic","recordType":"Photo","fields":{"image":{"value":{"downloadURL":"photo.bin"},"type":"ASSETID"},"thumbs":{"value":[{"downloadURL":"photo.bin"}],"type":"ASSETID_LIST"}}}"#
        let child = #"{"recordName":"child","recordType":"Child","parent":{"recordName":"pic"},"fields":{"of":{"value":{"recordName":"pic","action":"DELETE_SELF"},"type":"REFERENCE"}}}"#
        #expect(try await cli.run(["import", "--quiet", "--assets-dir", photo.deletingLastPathComponent().path], stdin: asset + "\n" + child + "\n").exitCode == 0)
        #expect(try await cli.run(["zones", "create", "Loose", "--no-atomic"]).exitCode == 0)
        #expect(try await cli.run(["import", "--quiet", "--zone", "Loose"], stdin: Input.notes(30)).exitCode == 0)
        for (user, count) in [("alice", 7), ("bob", 3)] {
            #expect(try await cli.run(["zones", "create", "Work", "--database", "private", "--user", user]).exitCode == 0)
            #expect(try await cli.run(["import", "--quiet", "--database", "private", "--user", user, "--zone", "Work"], stdin: Input.notes(count, prefix: user)).exitCode == 0)
            #expect(try await cli.run(["import", "--quiet", "--database", "private", "--user", user], stdin: Input.notes(2, prefix: "d-\(user)")).exitCode == 0)
        }
        var schema = RecordTypeSchema(recordType: "Note")
        schema.addField("title", type: .string, indexes: [.queryable, .sortable])
        schema.addField("count", type: .int64, indexes: [.queryable, .sortable])
        try await cli.container("com.example.other").saveSchema(schema)
        #expect(try await cli.run(["import", "--quiet", "--container", "com.example.other"], stdin: Input.notes(12, prefix: "o")).exitCode == 0)
    }

    @Test("a store with every field type, assets, zones, owners and a schema is copied whole, system fields and change tags kept; exit 0 when the zones compare equal", arguments: Direction.all)
    func copyWhole(direction: Direction) async throws {
        try await TemporaryStore.with { store in
            let (source, destination) = try await Self.clis(store, direction)
            try await Self.fillRichly(source, store)
            // Without STRATUS_USER, as a new user runs it: an SQLite store acts as the login
            // name, a PostgreSQL store as the role it logs in as. That user wrote a record too.
            let mine = try await source.run(["import", "--quiet"], stdin: Input.note("mine", title: "by the acting user", count: 1) + "\n", environment: ["STRATUS_USER": ""])
            #expect(mine.exitCode == 0, "\(mine)")
            let copy = try await source.run(["copy", "--from", source.storePath, "--to", destination.storePath], environment: ["STRATUS_USER": ""])
            #expect(copy.exitCode == 0, "\(copy)")
            #expect(copy.stdout.isEmpty)
            #expect(copy.stderrLines.last?.contains("7 of 7 zones match") == true && copy.stderrLines.last?.hasPrefix("copied 63 records in 7 zones") == true, "\(copy)")
            // When those users differ, the copy says which user the copy is worked on as, and how to keep the old one.
            let (before, after) = (try Self.actingUser(source), try Self.actingUser(destination))
            let note = copy.stderrLines.first { $0.contains("note: commands on --to act as") }
            if before == after {
                #expect(note == nil, "\(copy)")
            } else {
                #expect(note?.contains("act as the user '\(after)'") == true && note?.contains("acted as '\(before)'") == true
                        && note?.contains("--user \(before) (or set STRATUS_USER=\(before))") == true, "\(copy)")
            }

            #expect(try await Self.shape(destination) == (try await Self.shape(source)), "containers, databases, zones, capabilities and counts")
            let (want, got) = (try await Self.contents(source), try await Self.contents(destination))
            #expect(want.count == 11 && got.keys.sorted() == want.keys.sorted(), "\(got.keys.sorted())")
            for (key, lines) in want {
                #expect(got[key] == lines, "\(key) differs")
            }
            // The schema came along: its indexes serve a sorted query in the copy.
            let schemas = try await destination.container("com.example.other").schemas()
            #expect(schemas.map(\.recordType) == ["Note"])
            // Assets hold the same bytes in the copy's own files.
            let pic = try #require(try await destination.exported("Photo")["pic"])
            let downloadURL = try #require((JSONLine.field(pic, "image")?["value"] as? [String: Any])?["downloadURL"] as? String)
            let url = try #require(URL(string: downloadURL))
            #expect(FileManager.default.contents(atPath: url.path) == patternBytes(count: 30_000, seed: 3))
            let check = try await destination.run(["check"])
            #expect(check.exitCode == 0, "\(check)")
            // Copied on from a PostgreSQL store whose role wrote nothing: no user to name.
            if PostgresEngine.isStoreURL(destination.storePath) {
                let back = try await destination.run(["copy", "--from", destination.storePath, "--to", store.path("back.sqlite")], environment: ["STRATUS_USER": ""])
                #expect(back.exitCode == 0 && !back.stderr.contains("note: commands on --to act as"), "the role owns no records: \(back)")
            }
        }
    }

    // SQLite only: -wal and -shm files are SQLite's; a PostgreSQL store leaves no file.
    @Test("a copy closes its SQLite stores as it ends: no -wal or -shm file is left beside the source or the destination")
    func copyLeavesNoLogFiles() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store)
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(3)).exitCode == 0)
            let destination = store.path("copy.sqlite")
            let copied = try await cli.run(["copy", "--from", cli.storePath, "--to", destination])
            #expect(copied.exitCode == 0, "\(copied)")
            let logs = [cli.storePath, destination].flatMap { [$0 + "-wal", $0 + "-shm"] }
            #expect(logs.filter(cli.exists).isEmpty, "left \(logs.filter(cli.exists))")
            #expect(try await cli.count("Note", extra: ["--store", destination]) == 3)
        }
    }

    // SQLite only: -wal and -shm files are SQLite's.
    @Test("an import that makes a store and writes nothing into it (empty input, every record rejected) leaves no -wal or -shm file either (found by a data tester)")
    func newStoreWithoutWritesLeavesNoLogFiles() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store)
            for (name, input, exitCode) in [("empty.sqlite", "", Int32(0)), ("rejected.sqlite", #"{"recordName":"_x","recordType":"T","fields":{}}"# + "\n", 1)] {
                let path = store.path(name)
                let result = try await cli.run(["import", "--store", path], stdin: input)
                #expect(result.exitCode == exitCode && result.stderr.contains("created a new store"), "\(result)")
                let logs = [path + "-wal", path + "-shm"]
                #expect(logs.filter(cli.exists).isEmpty, "left \(logs.filter(cli.exists))")
            }
        }
    }

    // SQLite only: -wal and -shm files are SQLite's.
    @Test("an export that stops at --limit while pages are read ahead closes its read: no -wal or -shm file is left (found by an operator tester)")
    func limitedExportLeavesNoLogFiles() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store)
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(5_000)).exitCode == 0)
            for limit in ["3", "1500"] {
                let exported = try await cli.run(["export", "--type", "Note", "--limit", limit, "--quiet"])
                #expect(exported.exitCode == 0 && exported.stdoutLines.count == Int(limit), "\(exported.stderr)")
                let logs = [cli.storePath + "-wal", cli.storePath + "-shm"]
                #expect(logs.filter(cli.exists).isEmpty, "--limit \(limit) left \(logs.filter(cli.exists))")
            }
        }
    }

    @Test("a copy that finished with --checkpoint (its checkpoint removed, as a kill just after the removal leaves it) run again the same way finds nothing to copy and exits 0; once the source changed, it compares again and names the zone that differs (exit 1)", arguments: TestEngine.all)
    func finishedCopyRunAgain(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(300)).exitCode == 0)
            let destination = try await cli.newStore("copy"), checkpoint = store.path("copy.checkpoint")
            let arguments = ["copy", "--from", cli.storePath, "--to", destination, "--checkpoint", checkpoint, "--batch-size", "100"]
            let first = try await cli.run(arguments)
            #expect(first.exitCode == 0 && !cli.exists(checkpoint), "\(first)")
            let again = try await cli.run(arguments)
            #expect(again.exitCode == 0 && !cli.exists(checkpoint), "\(again)")
            #expect(again.stderrLines.last?.hasPrefix("copied 0 records in 0 zones (1 zone copied by an earlier run)") == true, "\(again)")
            #expect(try await cli.count("Note", extra: ["--store", destination]) == 300)
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(1, prefix: "later")).exitCode == 0)
            let changed = try await cli.run(arguments)
            #expect(changed.exitCode == 1 && changed.stderr.contains("differs: the source holds 301"), "\(changed)")
            #expect(changed.stderrLines.last?.contains("0 of 1 zone match") == true, "\(changed)")
            #expect(try await cli.count("Note", extra: ["--store", destination]) == 300, "nothing is copied into a finished copy")
        }
    }

    @Test("an asset whose content file in the source was cut short is not copied as if whole: the record fails naming the damage, and the copy does not end in success", arguments: TestEngine.all)
    func damagedSourceContentIsNotCopied(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            _ = try await cli.importPhotoWithContentCutShort(in: store, folder: "in", seed: 5)
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(3)).exitCode == 0)

            let destination = try await cli.newStore("copy.sqlite")
            let copy = try await cli.run(["copy", "--from", cli.storePath, "--to", destination])
            #expect(copy.exitCode != 0, "\(copy)")
            #expect(copy.stderr.contains("pic") && copy.stderr.contains("damaged"), "\(copy.stderr)")
            #expect(try await cli.count("Note", extra: ["--store", destination]) == 3, "the sound records are copied")
        }
    }

    @Test("an asset whose content in the source bit rot (the same size, other bytes) is not copied under its new digest, nor exported with --assets-dir: the copy names the record and exits 1, the export stops with 70 (found by an adversarial tester)", arguments: TestEngine.all)
    func bitRotIsNotCopied(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            _ = try await cli.importPhotoWithContentCutShort(in: store, folder: "in", seed: 6, flippingAByteInstead: true)
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(3)).exitCode == 0)

            let destination = try await cli.newStore("copy.sqlite")
            let copy = try await cli.run(["copy", "--from", cli.storePath, "--to", destination])
            // SQLite's content files are read as they are, and the record fails; PostgreSQL checks
            // its chunks as it reads them, and the damaged store stops the copy (70).
            let said = engine == .postgres ? "do not hash to the SHA-256 that names it" : "holds bytes whose SHA-256 is"
            #expect(copy.exitCode == (engine == .postgres ? 70 : 1) && copy.stderr.contains("pic") && copy.stderr.contains(said), "\(copy)")
            #expect(try await cli.count("Photo", extra: ["--store", destination]) == 0, "the damaged record is not copied")

            let exported = try await cli.run(["export", "--type", "Photo", "--assets-dir", store.path("out"), "--output", store.path("out.ndjson")])
            #expect(exported.exitCode == 70 && exported.stderr.contains(said), "\(exported)")
        }
    }

    @Test("production records whose types have no queryable record name (a schema deployed as development grew it) are copied: the index rules are for the apps' queries", arguments: Direction.all)
    func copiesProductionWithoutIndexes(direction: Direction) async throws {
        try await TemporaryStore.with { store in
            let (source, destination) = try await Self.clis(store, direction)
            #expect(try await source.run(["import", "--quiet"], stdin: Input.notes(5)).exitCode == 0)
            let deployed = try await source.run(["schema", "deploy"])
            #expect(deployed.exitCode == 0, "\(deployed)")
            #expect(try await source.run(["import", "--quiet", "--environment", "production"], stdin: Input.notes(4, prefix: "p")).exitCode == 0)
            // What an app's query there meets: CloudKit's refusal.
            let refused = try await source.run(["export", "--type", "Note", "--environment", "production", "--quiet"])
            #expect(refused.exitCode != 0 && refused.stderr.contains("not marked queryable"), "\(refused)")

            let copy = try await source.run(["copy", "--from", source.storePath, "--to", destination.storePath])
            #expect(copy.exitCode == 0, "\(copy)")
            #expect(copy.stderrLines.last?.hasPrefix("copied 9 records") == true, "\(copy)")
            let schema = try await destination.run(["schema", "export", "--environment", "production"])
            #expect(schema.stdout.contains("RECORD TYPE Note"), "\(schema)")
        }
    }

    @Test("every subscriber's subscriptions are copied, in the public and private databases; the copy compares them", arguments: Direction.all)
    func copiesSubscriptions(direction: Direction) async throws {
        try await TemporaryStore.with { store in
            let (source, destination) = try await Self.clis(store, direction)
            #expect(try await source.run(["import", "--quiet"], stdin: Input.notes(3)).exitCode == 0)
            #expect(try await source.run(["zones", "create", "Work", "--database", "private", "--user", "alice"]).exitCode == 0)
            let creations = [
                ["subscriptions", "create", "open-notes", "--type", "Note", "--where", "count > 1", "--user", "alice"],
                ["subscriptions", "create", "open-notes", "--type", "Note", "--on", "create", "--user", "bob"],
                ["subscriptions", "create", "work", "--zone-wide", "--zone", "Work", "--database", "private", "--user", "alice"],
                ["subscriptions", "create", "everything", "--database-wide", "--database", "private", "--user", "carol"],
            ]
            for creation in creations {
                let created = try await source.run(creation)
                #expect(created.exitCode == 0, "\(created)")
            }
            let copy = try await source.run(["copy", "--from", source.storePath, "--to", destination.storePath])
            #expect(copy.exitCode == 0, "\(copy)")
            #expect(copy.stderrLines.last?.contains("and 4 subscriptions") == true, "\(copy)")
            for (user, database) in [("alice", "public"), ("bob", "public"), ("alice", "private"), ("carol", "private")] {
                let want = try await source.run(["subscriptions", "list", "--user", user, "--database", database])
                let got = try await destination.run(["subscriptions", "list", "--user", user, "--database", database])
                #expect(!want.stdout.isEmpty && got.stdout == want.stdout, "\(user) \(database): \(got) against \(want)")
            }
        }
    }

    @Test("CloudKit's own records an import kept (a cloudkit.share with its dotted fields, a user's Users record) are copied as they are", arguments: Direction.all)
    func copiesSystemRecords(direction: Direction) async throws {
        try await TemporaryStore.with { store in
            let (source, destination) = try await Self.clis(store, direction)
            let user = "_" + String(repeating: "ab", count: 16)
            let lines = [
                #"{"recordName":"share-1","recordType":"cloudkit.share","fields":{"cloudkit.title":{"value":"My list","type":"STRING"},"cloudkit.type":{"value":"com.example.list","type":"STRING"}}}"#,
                #"{"recordName":"\#(user)","recordType":"Users","fields":{"nickname":{"value":"Al","type":"STRING"}}}"#,
            ]
            let imported = try await source.run(["import", "--keep-system-records"], stdin: lines[0] + "\n")
            #expect(imported.exitCode == 0, "\(imported)")
            // Another user's Users record is restored by an administrator.
            let usersRecord = try await source.run(["import", "--keep-system-records", "--as-administrator"], stdin: lines[1] + "\n")
            #expect(usersRecord.exitCode == 0, "\(usersRecord)")

            let copy = try await source.run(["copy", "--from", source.storePath, "--to", destination.storePath])
            #expect(copy.exitCode == 0, "\(copy)")
            #expect(copy.stderrLines.last?.hasPrefix("copied 2 records") == true, "\(copy)")
            for type in ["cloudkit.share", "Users"] {
                let want = try await source.exported(type), got = try await destination.exported(type)
                #expect(!want.isEmpty && got.keys.sorted() == want.keys.sorted(), "\(type): \(got.keys) against \(want.keys)")
                for (name, record) in want {
                    let same = NSDictionary(dictionary: got[name]?["fields"] as? [String: Any] ?? [:]).isEqual(to: record["fields"] as? [String: Any] ?? [:])
                    #expect(same, "\(type) \(name)")
                    #expect(got[name]?["recordChangeTag"] as? String == record["recordChangeTag"] as? String, "\(type) \(name)")
                }
            }
        }
    }

    @Test("a child whose parent was deleted and parents made a cycle by later saves are copied as they are, as CloudKit keeps them", arguments: Direction.all)
    func copiesParentsAsTheyAre(direction: Direction) async throws {
        try await TemporaryStore.with { store in
            let (source, destination) = try await Self.clis(store, direction)
            func folder(_ name: String, parent: String?) -> String {
                #"{"recordName":"\#(name)","recordType":"Folder","fields":{}"# + (parent.map { #","parent":{"recordName":"\#($0)"}"# } ?? "") + "}"
            }
            let first = [folder("p", parent: nil), folder("k", parent: "p"), folder("a", parent: nil), folder("b", parent: "a")].joined(separator: "\n") + "\n"
            #expect(try await source.run(["import", "--quiet"], stdin: first).exitCode == 0)
            #expect(try await source.run(["import", "--quiet"], stdin: folder("a", parent: "b") + "\n").exitCode == 0)
            #expect(try await source.run(["delete", "p", "--yes", "--quiet"]).exitCode == 0)

            let copy = try await source.run(["copy", "--from", source.storePath, "--to", destination.storePath])
            #expect(copy.exitCode == 0, "\(copy)")
            let copied = try await destination.exported("Folder")
            #expect(copied.keys.sorted() == ["a", "b", "k"])
            for (name, parent) in [("k", "p"), ("a", "b"), ("b", "a")] {
                #expect((copied[name]?["parent"] as? [String: Any])?["recordName"] as? String == parent, "\(name)")
            }
        }
    }

    @Test("a copy killed at random moments and run again with its checkpoint ends with exactly the source; SIGTERM stops it with exit 143", arguments: Direction.all)
    func killedAndResumed(direction: Direction) async throws {
        try await TemporaryStore.with { store in
            let (source, destination) = try await Self.clis(store, direction)
            let rows = (0..<12_000).map { i in
                #"{"recordName":"r\#(String(format: "%05d", i))","recordType":"\#(i % 3 == 0 ? "Even" : "Row")","fields":{"n":{"value":\#(i),"type":"INT64"},"s":{"value":"row \#(i)","type":"STRING"}}}"#
            }
            #expect(try await source.run(["import", "--quiet", try source.file("rows.ndjson", rows.joined(separator: "\n") + "\n")]).exitCode == 0)
            #expect(try await source.run(["zones", "create", "Second"]).exitCode == 0)
            #expect(try await source.run(["import", "--quiet", "--zone", "Second", try source.file("second.ndjson", rows.prefix(3_000).joined(separator: "\n") + "\n")]).exitCode == 0)

            let checkpoint = store.path("copy.checkpoint")
            let arguments = ["copy", "--from", source.storePath, "--to", destination.storePath, "--checkpoint", checkpoint, "--batch-size", "100", "--quiet"]
            // Killed with SIGKILL at random moments, as a crash would stop it; a run that ends
            // first has finished the copy.
            var finished = false
            for _ in 0..<3 where !finished {
                let running = try source.start(arguments)
                try await Task.sleep(for: .milliseconds(Int.random(in: 30...700)))
                running.signal(SIGKILL)
                let killed = await running.wait()
                if !killed.signalled {
                    #expect(killed.exitCode == 0, "\(killed)")
                    finished = true
                }
            }
            // Stopped with SIGTERM: it saves where it is and exits 143, unless it finished first.
            if !finished {
                func saved() -> Date? { (try? FileManager.default.attributesOfItem(atPath: checkpoint))?[.modificationDate] as? Date }
                let before = saved()
                let terminated = try source.start(arguments)
                // Once it saved a checkpoint the copy is running and handles SIGTERM (a signal
                // before its handler is installed ends it as a kill would).
                while terminated.isRunning && saved() == before { try await Task.sleep(for: .milliseconds(5)) }
                try await Task.sleep(for: .milliseconds(Int.random(in: 0...200)))
                terminated.signal(SIGTERM)
                let stopped = await terminated.wait()
                #expect(!stopped.signalled && (stopped.exitCode == 143 || stopped.exitCode == 0), "\(stopped)")
                if stopped.exitCode == 143 { #expect(source.exists(checkpoint), "a stopped copy keeps its checkpoint") }
                finished = stopped.exitCode == 0
            }
            if !finished {
                let resuming = source.exists(checkpoint)
                // Without --quiet, which leaves out notes that report nothing wrong.
                let last = try await source.run(arguments.filter { $0 != "--quiet" })
                #expect(last.exitCode == 0, "\(last)")
                // It says that it goes on, as its summary counts this run's records only.
                #expect(!resuming || last.stderr.contains("going on from the checkpoint \(checkpoint)"), "\(last)")
            }
            #expect(!source.exists(checkpoint), "the checkpoint goes when the copy is complete")
            let (want, got) = (try await Self.contents(source), try await Self.contents(destination))
            #expect(got.keys.sorted() == want.keys.sorted())
            for (key, lines) in want {
                #expect(got[key]?.count == lines.count && got[key] == lines, "\(key): \(got[key]?.count ?? 0) of \(lines.count) records, or records that differ")
            }
        }
    }

    @Test("a copy of many zones killed by SIGKILL mid-way goes on from its checkpoint, which names no zone copied, and ends with exactly the source", arguments: Direction.all)
    func manyZonesKilledAndResumed(direction: Direction) async throws {
        try await TemporaryStore.with { store in
            let (source, destination) = try await Self.clis(store, direction)
            let lines = (0..<1_500).flatMap { zone in
                (0..<2).map { index in
                    #"{"recordName":"r\#(zone)-\#(index)","recordType":"Row","fields":{"n":{"value":\#(index),"type":"INT64"}},"zoneID":{"zoneName":"zone-\#(String(format: "%04d", zone))"}}"#
                }
            }
            let imported = try await source.run(["import", "--quiet", "--create-zones", try source.file("zones.ndjson", lines.joined(separator: "\n") + "\n")])
            #expect(imported.exitCode == 0, "\(imported)")

            let checkpoint = store.path("copy.checkpoint")
            let arguments = ["copy", "--from", source.storePath, "--to", destination.storePath, "--checkpoint", checkpoint]
            let running = try source.start(arguments + ["--quiet"])
            // Killed once its checkpoint says some zones are copied.
            var saved: [String: Any]?
            while running.isRunning {
                if let data = FileManager.default.contents(atPath: checkpoint), let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
                   object["zonesCopiedThrough"] != nil {
                    saved = object
                    break
                }
                try await Task.sleep(for: .milliseconds(5))
            }
            running.signal(SIGKILL)
            let killed = await running.wait()
            #expect(killed.signalled, "killed mid-way: \(killed)")
            let midway = try #require(saved)
            #expect((midway["zonesCopied"] as? [Any])?.isEmpty == true && (midway["zonesNotCopied"] as? [Any])?.isEmpty == true, "\(midway)")

            let resumed = try await source.run(arguments + ["--progress", "json"])
            #expect(resumed.exitCode == 0, "\(resumed)")
            #expect(resumed.stderr.contains("going on from the checkpoint \(checkpoint)"), "\(resumed)")
            let summary = try JSONLine.object(try #require(resumed.stderrLines.last))
            let (skipped, copied) = (summary["zonesSkipped"] as? Int ?? 0, summary["zones"] as? Int ?? 0)
            #expect(skipped > 0 && skipped + copied == summary["zonesCompared"] as? Int && summary["zonesDiffering"] as? Int == 0, "\(summary)")
            #expect(!source.exists(checkpoint), "the checkpoint goes when the copy is complete")
            #expect(try await Self.shape(destination) == (try await Self.shape(source)))
        }
    }

    @Test("a checkpoint file as the version of dd9973b writes it (every zone copied listed) is gone on from: the zones it lists are not copied again, its zone goes on from its position", arguments: Direction.all)
    func goesOnFromListingCheckpointFile(direction: Direction) async throws {
        try await TemporaryStore.with { store in
            let (source, destination) = try await Self.clis(store, direction)
            #expect(try await source.run(["import", "--quiet"], stdin: Input.notes(3, prefix: "d")).exitCode == 0)
            for zone in ["A", "B", "C", "D", "E"] {
                #expect(try await source.run(["zones", "create", zone]).exitCode == 0)
                #expect(try await source.run(["import", "--quiet", "--zone", zone], stdin: Input.notes(4, prefix: zone.lowercased())).exitCode == 0)
            }
            let first = try await source.run(["copy", "--from", source.storePath, "--to", destination.storePath, "--quiet"])
            #expect(first.exitCode == 0, "\(first)")
            // What the earlier copy had not reached: records after its position in E, and zones F and G.
            #expect(try await source.run(["import", "--quiet", "--zone", "E"], stdin: Input.notes(3, prefix: "f")).exitCode == 0)
            for zone in ["F", "G"] {
                #expect(try await source.run(["zones", "create", zone]).exitCode == 0)
                #expect(try await source.run(["import", "--quiet", "--zone", zone], stdin: Input.notes(4, prefix: zone.lowercased())).exitCode == 0)
            }
            func key(_ zone: String) -> String {
                #"{"containerIdentifier":"default","environment":"development","owner":"","scope":1,"zoneName":"\#(zone)","zoneOwnerName":"__defaultOwner__"}"#
            }
            let checkpoint = try source.file("copy.checkpoint", """
                {"destinationIdentifier":"\(try destination.openEngine().storeIdentifier)",\
                "position":{"recordName":"e4","recordType":"Note","zone":\(key("E"))},"schemasCopied":true,\
                "sourceIdentifier":"\(try source.openEngine().storeIdentifier)",\
                "zonesCopied":[\(["_defaultZone", "A", "B", "C", "D"].map(key).joined(separator: ","))]}
                """)
            let resumed = try await source.run(["copy", "--from", source.storePath, "--to", destination.storePath, "--checkpoint", checkpoint])
            #expect(resumed.exitCode == 0, "\(resumed)")
            #expect(resumed.stderrLines.last?.contains("copied 11 records in 3 zones (5 zones copied by an earlier run); 8 of 8 zones match") == true, "\(resumed)")
            #expect(!source.exists(checkpoint))
            #expect(try await Self.shape(destination) == (try await Self.shape(source)))
        }
    }

    @Test("a copy gone on from its checkpoint copies the zones the source gained since, also those whose names sort before the last zone it passed", arguments: Direction.all)
    func goesOnWithZonesMadeSince(direction: Direction) async throws {
        try await TemporaryStore.with { store in
            let (source, destination) = try await Self.clis(store, direction)
            #expect(try await source.run(["import", "--quiet"], stdin: Input.notes(3, prefix: "d")).exitCode == 0)
            for zone in ["B", "C", "D"] {
                #expect(try await source.run(["zones", "create", zone]).exitCode == 0)
                #expect(try await source.run(["import", "--quiet", "--zone", zone], stdin: Input.notes(4, prefix: zone.lowercased())).exitCode == 0)
            }
            let first = try await source.run(["copy", "--from", source.storePath, "--to", destination.storePath, "--quiet"])
            #expect(first.exitCode == 0, "\(first)")
            // Made since the copy passed zone D: A sorts before every zone it passed, E after D.
            for zone in ["A", "E"] {
                #expect(try await source.run(["zones", "create", zone]).exitCode == 0)
                #expect(try await source.run(["import", "--quiet", "--zone", zone], stdin: Input.notes(4, prefix: zone.lowercased())).exitCode == 0)
            }
            func key(_ zone: String) -> String {
                #"{"containerIdentifier":"default","environment":"development","owner":"","scope":1,"zoneName":"\#(zone)","zoneOwnerName":"__defaultOwner__"}"#
            }
            let checkpoint = try source.file("copy.checkpoint", """
                {"destinationIdentifier":"\(try destination.openEngine().storeIdentifier)","schemasCopied":true,\
                "sourceIdentifier":"\(try source.openEngine().storeIdentifier)","zonesCopiedThrough":\(key("D")),"zonesNotCopied":[]}
                """)
            let resumed = try await source.run(["copy", "--from", source.storePath, "--to", destination.storePath, "--checkpoint", checkpoint])
            #expect(resumed.exitCode == 0, "\(resumed)")
            #expect(resumed.stderrLines.last?.contains("copied 11 records in 3 zones (3 zones copied by an earlier run); 6 of 6 zones match") == true, "\(resumed)")
            #expect(!source.exists(checkpoint))
            #expect(try await Self.shape(destination) == (try await Self.shape(source)))
        }
    }


    @Test("refusals: a destination that holds records (64), a checkpoint of another copy (64), a checkpoint another copy holds (75), a missing source (66)", arguments: TestEngine.all)
    func refusals(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let source = try await cli.newStore("source"), other = try await cli.newStore("other"), destination = try await cli.newStore("destination")
            for path in [source, other] {
                #expect(try await cli.run(["import", "--quiet", "--store", path], stdin: Input.notes(5)).exitCode == 0)
            }
            let full = try await cli.run(["copy", "--from", source, "--to", other])
            #expect(full.exitCode == 64 && full.stderr.contains("already holds 5 records") && full.stderr.contains("give --checkpoint"), "\(full)")
            // The same store under another name (another spelling of the path, or of the URL): a
            // checkpoint would not help, so none is advised.
            let sourceAgain = engine == .sqlite
                ? (source as NSString).deletingLastPathComponent + "/./" + (source as NSString).lastPathComponent
                : try PostgresConnectionString.replacing(["connect_timeout": "30"], in: source)
            let itself = try await cli.run(["copy", "--from", source, "--to", sourceAgain])
            #expect(itself.exitCode == 64 && itself.stderr.contains("the same store") && !itself.stderr.contains("--checkpoint"), "\(itself)")

            // A checkpoint made by a copy from `other` is not applied to a copy from `source`.
            let checkpoint = store.path("copy.checkpoint")
            let begun = try cli.start(["copy", "--from", other, "--to", destination, "--checkpoint", checkpoint])
            _ = await begun.wait()
            try cli.file("copy.checkpoint", #"{"sourceIdentifier":"elsewhere","destinationIdentifier":"nowhere","schemasCopied":false,"zonesCopied":[]}"#)
            let foreign = try await cli.run(["copy", "--from", source, "--to", destination, "--checkpoint", checkpoint])
            #expect(foreign.exitCode == 64 && foreign.stderr.contains("checkpoint belongs to a copy between other stores") && !foreign.stderr.contains("going on from"), "\(foreign)")

            // Going on from a checkpoint needs the destination the earlier run wrote to.
            let gone = try await cli.newStore("gone")
            let wrongDestination = try await cli.run(["copy", "--from", source, "--to", gone, "--checkpoint", checkpoint])
            #expect(wrongDestination.exitCode == 66 && wrongDestination.stderr.contains("says an earlier run copied into it") && !cli.storeExists(gone), "\(wrongDestination)")

            let lock = open(checkpoint + ".lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
            #expect(lock >= 0 && flock(lock, LOCK_EX) == 0)
            let held = try await cli.run(["copy", "--from", source, "--to", try await cli.newStore("third"), "--checkpoint", checkpoint])
            #expect(held.exitCode == 75, "\(held)")
            // Unlocked first: a child process another test is starting holds a copy of the descriptor until it execs.
            flock(lock, LOCK_UN)
            close(lock)

            let nope = try await cli.newStore("nope")
            let missing = try await cli.run(["copy", "--from", nope, "--to", try await cli.newStore("fourth")])
            #expect(missing.exitCode == 66 && missing.stderr.contains("--from"), "\(missing)")
            #expect(!cli.storeExists(nope))
            for arguments in [["copy", "--to", destination], ["copy", "--from", source], ["copy", "--from", source, "--to", source], ["copy", "--from", source, "--to", destination, "--batch-size", "0"]] {
                let usage = try await cli.run(arguments)
                #expect(usage.exitCode == 64, "\(usage)")
            }
        }
    }

    @Test("zones that differ after a copy are named and make exit 1", arguments: TestEngine.all)
    func differingZones(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let source = cli.storePath, destination = try await cli.newStore("destination")
            #expect(try await cli.run(["zones", "create", "Work"]).exitCode == 0)
            #expect(try await cli.run(["import", "--quiet", "--zone", "Work"], stdin: Input.notes(4)).exitCode == 0)
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(3)).exitCode == 0)
            let first = try await cli.run(["copy", "--from", source, "--to", destination])
            #expect(first.exitCode == 0, "\(first)")
            #expect(try await cli.run(["delete", "n2", "--yes", "--zone", "Work", "--store", destination]).exitCode == 0)
            // A checkpoint that says every zone is copied, so that a run only compares.
            let checkpoint = try cli.file("copy.checkpoint", """
                {"sourceIdentifier":"\(try cli.openEngine(source).storeIdentifier)","destinationIdentifier":"\(try cli.openEngine(destination).storeIdentifier)",\
                "schemasCopied":true,"zonesCopied":[{"containerIdentifier":"default","scope":1,"owner":"","zoneName":"_defaultZone","zoneOwnerName":"__defaultOwner__"},\
                {"containerIdentifier":"default","scope":1,"owner":"","zoneName":"Work","zoneOwnerName":"__defaultOwner__"}]}
                """)
            let again = try await cli.run(["copy", "--from", source, "--to", destination, "--checkpoint", checkpoint])
            #expect(again.exitCode == 1, "\(again)")
            #expect(again.stderr.contains("zone default public Work differs: the source holds 4 records"), "\(again)")
            #expect(again.stderr.contains("the destination 3 records"), "\(again)")
            #expect(!again.stderr.contains("_defaultZone differs"), "\(again)")
            #expect(again.stderrLines.last?.contains("1 of 2 zones match") == true, "\(again)")
        }
    }

    @Test("a default zone that once held records (its row stays) and one whose row a store of an earlier version wrote with atomic compare equal after a copy (found by a reviewer)", arguments: TestEngine.all)
    func defaultZonesCompareAsApplied(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            #expect(try await cli.run(["import", "--quiet", "--database", "private", "--user", "alice"], stdin: Input.notes(1)).exitCode == 0)
            #expect(try await cli.run(["delete", "n1", "--yes", "--database", "private", "--user", "alice"]).exitCode == 0)
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(2)).exitCode == 0)
            if engine == .sqlite {
                // Before the default zone's capabilities were a rule, its row kept atomic too.
                let set = try await cli.shell("sqlite3 '\(cli.storePath)' 'UPDATE zone_state SET capabilities = 3'")
                #expect(set.exitCode == 0, "\(set)")
            }
            let copy = try await cli.run(["copy", "--from", cli.storePath, "--to", try await cli.newStore("copy")])
            #expect(copy.exitCode == 0 && !copy.stderr.contains("differs"), "\(copy)")
        }
    }

    @Test("a destination whose zones were made before the copy is compared by their capabilities too, and a zone only it has differs (found by an adversarial tester)", arguments: TestEngine.all)
    func destinationZonesAreCompared(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let source = cli.storePath, destination = try await cli.newStore("destination")
            for arguments in [["zones", "create", "Work"], ["zones", "create", "Work", "--no-atomic", "--store", destination], ["zones", "create", "Leftover", "--store", destination]] {
                #expect(try await cli.run(arguments + ["--database", "private", "--user", "alice"]).exitCode == 0, "\(arguments)")
            }
            #expect(try await cli.run(["import", "--quiet", "--zone", "Work", "--database", "private", "--user", "alice"], stdin: Input.notes(2)).exitCode == 0)
            #expect(try await cli.run(["subscriptions", "create", "extra", "--type", "Note", "--store", destination]).exitCode == 0)
            let copy = try await cli.run(["copy", "--from", source, "--to", destination])
            #expect(copy.exitCode == 1, "\(copy)")
            #expect(copy.stderr.contains("Work differs") && copy.stderr.contains("capabilities"), "\(copy)")
            #expect(copy.stderr.contains("Leftover differs: the source holds no such zone"), "\(copy)")
            // A subscription only the destination holds differs too, named without an empty owner.
            #expect(copy.stderr.contains("the subscriptions of the default public database differ"), "\(copy)")
        }
    }

    // PostgreSQL only: row-level security and its roles are PostgreSQL's (an SQLite file has no roles).
    @Test("a PostgreSQL store read or written as a role row-level security binds is refused with exit 77 naming the role needed; nothing is copied")
    func rowSecurityBoundRoles() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: .postgres)
            let suffix = String(UInt32.random(in: 0...UInt32.max), radix: 36)
            let (group, alice, bob) = ("copy_users_\(suffix)", "copy_alice_\(suffix)", "copy_bob_\(suffix)")
            let admin = try PostgresConnection(url: cli.storePath)
            try admin.executeScript("CREATE ROLE \(group) NOLOGIN; CREATE ROLE \(alice) LOGIN IN ROLE \(group); CREATE ROLE \(bob) LOGIN IN ROLE \(group);")
            defer { try? admin.executeScript("DROP OWNED BY \(alice), \(bob), \(group); DROP ROLE IF EXISTS \(alice), \(bob), \(group)") }
            try await cli.createStore()
            #expect(try await cli.run(["users", "row-security", "--group", group]).exitCode == 0)
            for login in [alice, bob] { #expect(try await cli.run(["users", "add", login]).exitCode == 0) }
            func url(_ role: String) throws -> String { try PostgresConnectionString.replacing(["user": role], in: cli.storePath) }
            let noUser = ["STRATUS_USER": ""]
            for role in [alice, bob] {
                let saved = try await cli.run(["import", "--quiet", "--database", "private", "--store", try url(role)], stdin: Input.notes(3), environment: noUser)
                #expect(saved.exitCode == 0, "\(saved)")
            }

            let destination = store.path("copy.sqlite")
            let refused = try await cli.run(["copy", "--from", try url(alice), "--to", destination])
            #expect(refused.exitCode == 77, "\(refused)")
            #expect(refused.stderr.contains("role \(alice) is bound by row-level security") && refused.stderr.contains("the tables' owner"), "\(refused)")
            #expect(!refused.stderr.contains("match"), "no comparison is reported: \(refused)")
            #expect(!cli.exists(destination), "the destination was not even created")
            #expect(try await cli.run(["import", "--quiet", "--store", store.path("source.sqlite")], stdin: Input.notes(2)).exitCode == 0)
            let into = try await cli.run(["copy", "--from", store.path("source.sqlite"), "--to", try url(bob)])
            #expect(into.exitCode == 77 && into.stderr.contains("destination"), "\(into)")

            // As the tables' owner, the copy takes both users' private records.
            let whole = try await cli.run(["copy", "--from", cli.storePath, "--to", store.path("whole.sqlite")])
            #expect(whole.exitCode == 0, "\(whole)")
            for login in [alice, bob] {
                #expect(try await cli.run(["count", "--type", "Note", "--database", "private", "--user", login, "--store", store.path("whole.sqlite")]).stdout == "3\n")
            }
        }
    }

    // SQLite to PostgreSQL by nature: the statements counted are the PostgreSQL destination's.
    @Test("SQLite to PostgreSQL writes records in bulk: a few statements per batch, not one look-up and one insert per record, public and private alike")
    func copiesInBulk() async throws {
        try await TemporaryStore.with { store in
            let source = try await CLI(store)
            #expect(try await source.run(["import", "--quiet"], stdin: Input.notes(2_000)).exitCode == 0)
            #expect(try await source.run(["import", "--quiet", "--database", "private"], stdin: Input.notes(1_000, prefix: "p")).exitCode == 0)
            let destination = try await CLI(store, engine: .postgres, storeName: "destination")
            try await destination.createStore()
            // Every statement that writes or reads records by name, counted by the server.
            let admin = try PostgresConnection(url: destination.storePath)
            try admin.executeScript("""
                CREATE TABLE statement_count(n bigint NOT NULL);
                INSERT INTO statement_count VALUES (0);
                CREATE FUNCTION count_statement() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN UPDATE statement_count SET n = n + 1; RETURN NULL; END $$;
                CREATE TRIGGER count_inserts AFTER INSERT ON records FOR EACH STATEMENT EXECUTE FUNCTION count_statement();
                """)
            let copied = try await source.run(["copy", "--from", source.storePath, "--to", destination.storePath])
            #expect(copied.exitCode == 0, "\(copied)")
            #expect(try await destination.count("Note") == 2_000)
            let statements = try #require(try admin.query("SELECT n FROM statement_count")[0].int64(0))
            #expect(statements <= 30, "\(statements) insert statements for 3,000 records")
        }
    }
}
