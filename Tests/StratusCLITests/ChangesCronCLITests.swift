import Foundation
import Stratus
import StratusTestSupport
import Testing

/// `stratus changes` as a cron job uses it: a mirror that carries assets and loses nothing when
/// an import fails, tokens used with the wrong options, and runs with nothing new.
@Suite("stratus changes for cron jobs", .timeLimit(.minutes(30)))
struct ChangesCronCLITests {
    /// The README's mirror job, word for word but for `$STRATUS`.
    static let mirrorJob = #"""
        set -e
        "$STRATUS" changes --store "$SOURCE" --token-file mirror.token --assets-dir pending-assets --output pending.ndjson \
            --as-administrator
        if [ -e pending.ndjson ]; then
            # The source's schema first: a value stored without a type is written without one, and
            # the mirror must read it as the source does (a DOUBLE field's 3 is not an INT64).
            "$STRATUS" schema export --store "$SOURCE" | "$STRATUS" schema import - --store "$MIRROR"
            "$STRATUS" import pending.ndjson --store "$MIRROR" --assets-dir pending-assets --mode forceReplace \
                --keep-system-records --as-administrator
            rm -r pending.ndjson pending-assets
        fi
        """#

    /// A Blob record whose asset is the file `name` in the test's `src` folder.
    static func blob(_ recordName: String, file name: String, title: String) -> String {
        #"{"recordName":"\#(recordName)","recordType":"Blob","fields":{"data":{"value":{"downloadURL":"\#(name)"},"type":"ASSETID"},"title":{"value":"\#(title)","type":"STRING"}}}"#
    }

    /// A store's Blob records exported with their assets into `folder`, by record name.
    static func blobs(_ cli: CLI, _ location: String, into folder: String) async throws -> [String] {
        let result = try await cli.run(["export", "--type", "Blob", "--sort", "recordName", "--assets-dir", folder, "--quiet", "--store", location])
        #expect(result.exitCode == 0, "\(result)")
        return result.stdoutLines
    }

    @Test("the README's mirror job carries records with assets to a second store, and a failed import loses nothing", arguments: TestEngine.all)
    func mirrorWithAssets(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let source = try await cli.newStore("source"), mirror = try await cli.newStore("mirror")
            _ = try store.writeFile("src/one.bin", patternBytes(count: 70_000, seed: 1))
            _ = try store.writeFile("src/two.bin", patternBytes(count: 3_000, seed: 2))
            _ = try store.writeFile("src/three.bin", patternBytes(count: 9_000, seed: 3))
            let first = [Self.blob("b1", file: "one.bin", title: "one"), Self.blob("b2", file: "two.bin", title: "two")]
            let seeded = try await cli.run(["import", try cli.file("first.ndjson", first.joined(separator: "\n") + "\n"), "--assets-dir", store.path("src"), "--store", source])
            #expect(seeded.exitCode == 0, "\(seeded)")

            // The mirror cannot be written (its path is a folder): the import fails, the job
            // stops, and the changes stay in pending.ndjson with their assets.
            try FileManager.default.createDirectory(atPath: store.path("not-a-store"), withIntermediateDirectories: true)
            let failed = try await cli.shell(Self.mirrorJob, environment: ["SOURCE": source, "MIRROR": store.path("not-a-store")])
            #expect(failed.exitCode != 0, "\(failed)")
            #expect(cli.exists(store.path("pending.ndjson")) && cli.exists(store.path("pending-assets")), "\(failed)")

            // More changes meanwhile: an update, a deletion and a new record with an asset.
            let second = [Self.blob("b1", file: "one.bin", title: "one, renamed"), Self.blob("b3", file: "three.bin", title: "three")]
            let changed = try await cli.run(["import", try cli.file("second.ndjson", second.joined(separator: "\n") + "\n"), "--assets-dir", store.path("src"), "--store", source])
            #expect(changed.exitCode == 0, "\(changed)")
            #expect(try await cli.run(["delete", "b2", "--yes", "--store", source]).exitCode == 0)

            let mirrored = try await cli.shell(Self.mirrorJob, environment: ["SOURCE": source, "MIRROR": mirror])
            #expect(mirrored.exitCode == 0, "\(mirrored)")
            #expect(!cli.exists(store.path("pending.ndjson")) && !cli.exists(store.path("pending-assets")), "removed after the import succeeded")

            let original = try await Self.blobs(cli, source, into: store.path("from-source"))
            let copy = try await Self.blobs(cli, mirror, into: store.path("from-mirror"))
            #expect(original.count == 2 && original == copy, "the mirror differs:\n\(original)\n\(copy)")
            for (name, seed, size) in [("b1", 1, 70_000), ("b3", 3, 9_000)] {
                let output = store.path("\(name).got")
                let got = try await cli.run(["assets", "get", name, "data", "--output", output, "--store", mirror])
                #expect(got.exitCode == 0, "\(got)")
                #expect(FileManager.default.contents(atPath: output) == patternBytes(count: size, seed: UInt8(seed)), "\(name)'s asset in the mirror")
            }

            // Nothing new: the job succeeds and leaves no file or folder behind.
            let idle = try await cli.shell(Self.mirrorJob, environment: ["SOURCE": source, "MIRROR": mirror])
            #expect(idle.exitCode == 0, "\(idle)")
            #expect(!cli.exists(store.path("pending.ndjson")) && !cli.exists(store.path("pending-assets")), "\(idle)")
            #expect(try await Self.blobs(cli, mirror, into: store.path("from-mirror")) == original)

            // Deletions alone: the output holds no asset, and the folder the import is given is there all the same.
            #expect(try await cli.run(["delete", "b3", "--yes", "--store", source]).exitCode == 0)
            let deletions = try await cli.shell(Self.mirrorJob, environment: ["SOURCE": source, "MIRROR": mirror])
            #expect(deletions.exitCode == 0, "a run of deletions only mirrors them: \(deletions)")
            #expect(try await Self.blobs(cli, mirror, into: store.path("from-mirror")) == Self.blobs(cli, source, into: store.path("from-source")))
            #expect(try await Self.blobs(cli, mirror, into: store.path("from-mirror")).count == 1)
        }
    }

    @Test("the README's mirror job keeps up with a public zone that several users write (updates and deletions of each other's records) and with the Users records CloudKit makes", arguments: TestEngine.all)
    func mirrorOfManyWriters(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let source = try await cli.newStore("source"), mirror = try await cli.newStore("mirror")
            func note(_ name: String, _ title: String) -> String { #"{"recordName":"\#(name)","recordType":"Note","fields":{"title":{"value":"\#(title)","type":"STRING"}}}"# + "\n" }
            // A value stored without a type, which the schema reads as a DOUBLE: the mirror must too.
            // And a type whose records only their creators read: the job's user reads none of them.
            let schema = try cli.file("notes.ckdb", "DEFINE SCHEMA RECORD TYPE Note (title STRING, score DOUBLE, GRANT WRITE TO \"_creator\", GRANT CREATE TO \"_icloud\", GRANT READ TO \"_world\"); "
                + "RECORD TYPE Secret (body STRING, GRANT WRITE TO \"_creator\", GRANT CREATE TO \"_icloud\", GRANT READ TO \"_creator\");")
            #expect(try await cli.run(["schema", "import", schema, "--store", source]).exitCode == 0)
            let untyped = #"{"recordName":"scored","recordType":"Note","fields":{"title":{"value":"s","type":"STRING"},"score":{"value":3}}}"# + "\n"
            #expect(try await cli.run(["import", "--store", source, "--user", "alice"], stdin: untyped).exitCode == 0)
            for user in ["alice", "bob"] {
                #expect(try await cli.run(["import", "--store", source, "--user", user], stdin: note("by-\(user)", "first")).exitCode == 0)
            }
            // A user's own Users record, made the first time it is fetched, as CloudKit makes it.
            let me = UserDirectoryEntry.derivedRecordName(containerIdentifier: "default", login: "alice")
            #expect(try await cli.run(["get", me, "--store", source, "--user", "alice"]).exitCode == 0)
            let secret = #"{"recordName":"s1","recordType":"Secret","fields":{"body":{"value":"alice only","type":"STRING"}}}"# + "\n"
            #expect(try await cli.run(["import", "--store", source, "--user", "alice"], stdin: secret).exitCode == 0)
            let first = try await cli.shell(Self.mirrorJob, environment: ["SOURCE": source, "MIRROR": mirror])
            #expect(first.exitCode == 0, "\(first)")
            let secretThere = try await cli.run(["export", "--type", "Secret", "--store", mirror, "--user", "alice", "--quiet"])
            #expect(secretThere.stdout.contains("alice only"), "a record the job's user may not read is mirrored too: \(secretThere)")
            // So does a backup by export, as the administrator.
            let asUser = try await cli.run(["export", "--type", "Secret", "--store", source, "--quiet"])
            let asAdministrator = try await cli.run(["export", "--type", "Secret", "--store", source, "--quiet", "--as-administrator"])
            #expect(!asUser.stdout.contains("alice only") && asAdministrator.stdout.contains("alice only"), "\(asUser)\n\(asAdministrator)")
            #expect(try await cli.run(["export", "--type", "Secret", "--store", source, "--database", "private", "--as-administrator"]).exitCode == 64)

            #expect(try await cli.run(["import", "--store", source, "--user", "alice", "--mode", "forceUpdate"], stdin: note("by-alice", "second")).exitCode == 0)
            #expect(try await cli.run(["delete", "by-bob", "--yes", "--store", source, "--user", "bob"]).exitCode == 0)
            let second = try await cli.shell(Self.mirrorJob, environment: ["SOURCE": source, "MIRROR": mirror])
            #expect(second.exitCode == 0, "\(second)")
            for type in ["Note", "Users"] {
                let want = try await cli.run(["export", "--type", type, "--store", source, "--quiet"])
                let got = try await cli.run(["export", "--type", type, "--store", mirror, "--quiet"])
                #expect(!want.stdout.isEmpty && got.stdout == want.stdout, "\(type): \(got) against \(want)")
            }
            #expect(try await cli.run(["get", "by-bob", "--store", mirror]).exitCode != 0, "the deletion is mirrored")

            // Deleted and made again by another user between two runs: the feed carries the new
            // record alone, and the mirror takes its creation (date and creator) too.
            #expect(try await cli.run(["delete", "by-alice", "--yes", "--store", source, "--user", "alice"]).exitCode == 0)
            #expect(try await cli.run(["import", "--store", source, "--user", "bob"], stdin: note("by-alice", "remade")).exitCode == 0)
            let third = try await cli.shell(Self.mirrorJob, environment: ["SOURCE": source, "MIRROR": mirror])
            #expect(third.exitCode == 0, "\(third)")
            let want = try await cli.run(["export", "--type", "Note", "--store", source, "--quiet"])
            let got = try await cli.run(["export", "--type", "Note", "--store", mirror, "--quiet"])
            #expect(want.stdout.contains("remade") && got.stdout == want.stdout, "\(got) against \(want)")
        }
    }

    @Test("changes --assets-dir | import --assets-dir carries assets through a pipe; without it import refuses the store's own paths", arguments: TestEngine.all)
    func pipeWithAssets(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let copy = try await cli.newStore("copy")
            _ = try store.writeFile("src/one.bin", patternBytes(count: 20_000, seed: 5))
            let seeded = try await cli.run(["import", try cli.file("in.ndjson", Self.blob("b1", file: "one.bin", title: "one") + "\n"), "--assets-dir", store.path("src")])
            #expect(seeded.exitCode == 0, "\(seeded)")

            // Without --assets-dir an asset names the store's own file, which import refuses.
            let refused = try await cli.shell(#""$STRATUS" changes --token-file plain.token --quiet | "$STRATUS" import --store "$COPY" --mode forceReplace"#, environment: ["COPY": copy])
            #expect(refused.exitCode == 1 && refused.stderr.contains("--assets-dir"), "\(refused)")

            // import checks its --assets-dir as it starts, while changes is still running: make it first.
            let piped = try await cli.shell(#"mkdir -p assets && "$STRATUS" changes --token-file feed.token --assets-dir assets | "$STRATUS" import --store "$COPY" --assets-dir assets --mode forceReplace"#, environment: ["COPY": copy])
            #expect(piped.exitCode == 0, "\(piped)")
            let output = store.path("got.bin")
            let got = try await cli.run(["assets", "get", "b1", "data", "--output", output, "--store", copy])
            #expect(got.exitCode == 0, "\(got)")
            #expect(FileManager.default.contents(atPath: output) == patternBytes(count: 20_000, seed: 5))
        }
    }

    @Test("a token used with another zone, database, container, environment or store is a usage error (64) naming the token file; the token is kept", arguments: TestEngine.all)
    func tokenOfAnotherHistory(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            #expect(try await cli.run(["import"], stdin: Input.notes(2)).exitCode == 0)
            #expect(try await cli.run(["zones", "create", "Trips"]).exitCode == 0)
            let token = store.path("photos.token")
            let made = try await cli.run(["changes", "--token-file", token, "--quiet"])
            #expect(made.exitCode == 0, "\(made)")
            let kept = try #require(FileManager.default.contents(atPath: token))
            let other = try await cli.newStore("other")
            #expect(try await cli.run(["import", "--store", other], stdin: Input.notes(1)).exitCode == 0)

            for (options, asked) in [
                (["--zone", "Trips"], "zone Trips"),
                (["--database", "private"], "private database"),
                (["--container", "other"], "container other"),
                (["--environment", "production"], "(production)"),
                (["--store", other], "of this store"),
            ] {
                let result = try await cli.run(["changes", "--token-file", token] + options)
                #expect(result.exitCode == 64, "\(options): \(result)")
                #expect(result.stderr.contains("\(token) holds the position of") && result.stderr.contains(asked), "\(options): \(result)")
                #expect(!result.stderr.contains("expired") && !result.stderr.contains("remove it"), "\(options): \(result)")
                // Only a token of another store may be one of a store rebuilt in place, done with.
                #expect(result.stderr.contains("if this store replaced the one the token was made on") == (options.first == "--store"), "\(options): \(result)")
                #expect(result.stdout.isEmpty)
                #expect(FileManager.default.contents(atPath: token) == kept, "\(options): the token file is left as it was")
            }
            // The right options still continue where the token is.
            let again = try await cli.run(["changes", "--token-file", token])
            #expect(again.exitCode == 0 && again.stdout.isEmpty, "\(again)")
        }
    }

    @Test("an expired token is 65 with the advice to start again; a zone that does not exist is 66", arguments: TestEngine.all)
    func expiredTokenAndMissingZone(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            #expect(try await cli.run(["import"], stdin: Input.notes(2)).exitCode == 0)
            let token = store.path("notes.token")
            #expect(try await cli.run(["changes", "--token-file", token, "--quiet"]).exitCode == 0)
            #expect(try await cli.run(["delete", "n1", "--yes"]).exitCode == 0)
            let compacted = try await cli.run(["changes", "compact", "--keep-days", "0"])
            #expect(compacted.exitCode == 0, "\(compacted)")
            let expired = try await cli.run(["changes", "--token-file", token])
            #expect(expired.exitCode == 65, "\(expired)")
            #expect(expired.stderr.contains("has expired") && expired.stderr.contains(token), "\(expired)")

            let missing = try await cli.run(["changes", "--token-file", store.path("nope.token"), "--zone", "Nope"])
            #expect(missing.exitCode == 66 && missing.stderr.contains("Nope"), "\(missing)")
            #expect(!cli.exists(store.path("nope.token")), "no token is written for a zone that does not exist")
        }
    }

    @Test("a token file larger than any token (an export named by mistake) is refused unread (65) and kept as it is", arguments: TestEngine.all)
    func oversizedTokenFile(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            #expect(try await cli.run(["import"], stdin: Input.notes(2)).exitCode == 0)
            // A sparse 8 MiB file: read whole into memory before; a swapped --token-file and
            // --output could name a file of many gigabytes.
            let token = store.path("export.ndjson")
            #expect(FileManager.default.createFile(atPath: token, contents: nil))
            #expect(truncate(token, 8 << 20) == 0)
            let result = try await cli.run(["changes", "--token-file", token])
            #expect(result.exitCode == 65, "\(result)")
            #expect(result.stderr.contains("is larger than any token file"), "\(result)")
            #expect(result.stdout.isEmpty, "\(result)")
            let size = (try FileManager.default.attributesOfItem(atPath: token)[.size] as? NSNumber)?.intValue
            #expect(size == 8 << 20, "the file is left as it was")
        }
    }

    @Test("a token file copied to start a second consumer at the first one's place never cuts or unlinks the first job's output (outputs beside the token, and on another file system); an edited token file removes no file it names", arguments: TestEngine.all, [false, true])
    func copiedAndEditedTokenFiles(engine: TestEngine, outputsElsewhere: Bool) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            // Outputs on another file system than the token files (/dev/shm, where there is one)
            // are held by links beside them instead of beside the token files.
            let elsewhere = "/dev/shm/stratus-test-\(UUID().uuidString)"
            let outputs = outputsElsewhere && FileManager.default.fileExists(atPath: "/dev/shm") ? elsewhere : store.directory.path
            defer { try? FileManager.default.removeItem(atPath: elsewhere) }
            for folder in ["A", "B"] {
                try FileManager.default.createDirectory(atPath: store.path(folder), withIntermediateDirectories: true)
                try FileManager.default.createDirectory(atPath: outputs + "/" + folder, withIntermediateDirectories: true)
            }
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(3)).exitCode == 0)
            func run(_ job: String) async throws -> CLI.Result {
                try await cli.run(["changes", "--token-file", store.path("\(job)/tok"), "--output", outputs + "/\(job)/out.ndjson", "--quiet"])
            }
            #expect(try await run("A").exitCode == 0)
            try FileManager.default.copyItem(atPath: store.path("A/tok"), toPath: store.path("B/tok"))
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(1, prefix: "second")).exitCode == 0)
            #expect(try await run("A").exitCode == 0)
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(1, prefix: "third")).exitCode == 0)
            let second = try await run("B")
            #expect(second.exitCode == 0, "\(second)")
            #expect(try JSONLine.names(cli.read(outputs + "/B/out.ndjson") ?? "") == ["second1", "third1"], "B goes on from A's place")
            #expect(try JSONLine.names(cli.read(outputs + "/A/out.ndjson") ?? "") == ["n1", "n2", "n3", "second1"], "A's committed output is whole")
            #expect(try await run("A").exitCode == 0)
            #expect(try JSONLine.names(cli.read(outputs + "/A/out.ndjson") ?? "") == ["n1", "n2", "n3", "second1", "third1"])

            // A token file whose output link was edited to name another file.
            let victim = try cli.file("victim.txt", "keep me\n")
            let tokenText = try #require(cli.read(store.path("A/tok")))
            let edited = tokenText.split(separator: "\n", omittingEmptySubsequences: false).map { line in
                line.hasPrefix("output-link=") ? "output-link=" + victim : String(line)
            }.joined(separator: "\n")
            #expect(edited != tokenText, "the token file names its link")
            try edited.write(toFile: store.path("A/tok"), atomically: true, encoding: .utf8)
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(1, prefix: "fourth")).exitCode == 0)
            let after = try await cli.run(["changes", "--token-file", store.path("A/tok"), "--output", store.path("A/next.ndjson"), "--quiet"])
            #expect(after.exitCode == 0, "\(after)")
            #expect(cli.read(victim) == "keep me\n", "the file the edited token names is not removed")
        }
    }

    @Test("an output moved to another disk (a copy, then a removal) after a run stopped past its last commit: the next run says the copy holds the stopped run's bytes and how many to keep (found by an operator tester: duplicates and a torn line went unseen)", arguments: TestEngine.all)
    func movedOutputWithATornTail(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(3)).exitCode == 0)
            let token = store.path("tok"), output = store.path("out.ndjson")
            #expect(try await cli.run(["changes", "--token-file", token, "--output", output, "--quiet"]).exitCode == 0)
            let committed = try #require(cli.read(output))
            // What a run stopped by a full disk leaves: bytes past the commit, half a line among them.
            try (committed + #"{"recordName":"n1","recordType":"Note","fi"#).write(toFile: output, atomically: false, encoding: .utf8)
            try FileManager.default.copyItem(atPath: output, toPath: store.path("moved.ndjson"))
            try FileManager.default.removeItem(atPath: output)
            let next = try await cli.run(["changes", "--token-file", token, "--output", store.path("out2.ndjson")])
            #expect(next.exitCode == 0, "\(next)")
            #expect(next.stderr.contains("was moved or removed after a run that stopped") && next.stderr.contains("truncate -s \(committed.utf8.count)"), "\(next)")
        }
    }

    @Test("a token file on another file system than its outputs holds each by a hidden link beside it; a link a failed or killed run left there is removed by the next run, so an output a consumer removed does not stay on the disk (found by an operator tester)", arguments: TestEngine.all)
    func strayLinksBesideOutputsAreRemoved(engine: TestEngine) async throws {
        let outputs = "/dev/shm/stratus-test-\(UUID().uuidString)"
        guard (try? FileManager.default.createDirectory(atPath: outputs, withIntermediateDirectories: true)) != nil else { return }  // no /dev/shm: nothing on another file system to test
        defer { try? FileManager.default.removeItem(atPath: outputs) }
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            func hidden() throws -> [String] { try FileManager.default.contentsOfDirectory(atPath: outputs).filter { $0.hasPrefix(".") }.sorted() }
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(3)).exitCode == 0)
            let token = store.path("tok")
            #expect(try await cli.run(["changes", "--token-file", token, "--output", outputs + "/out1.ndjson", "--quiet"]).exitCode == 0)
            let links = try hidden()
            // Same file system as the token after all: no links beside the outputs to test.
            guard let live = links.first else { return }
            #expect(links.count == 1 && live.hasPrefix(".out1.ndjson.stratus-"), "\(links)")
            // What a run that failed after making its link leaves: another link of the token's, to a file since removed.
            let gone = outputs + "/gone.ndjson"
            try "a consumed export\n".write(toFile: gone, atomically: false, encoding: .utf8)
            let stray = outputs + "/" + String(live.replacingOccurrences(of: ".out1.ndjson.", with: ".gone.ndjson.").dropLast(4)) + "f00d"
            #expect(link(gone, stray) == 0)
            try FileManager.default.removeItem(atPath: gone)
            try FileManager.default.removeItem(atPath: outputs + "/out1.ndjson")
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(1, prefix: "second")).exitCode == 0)
            let next = try await cli.run(["changes", "--token-file", token, "--output", outputs + "/out2.ndjson", "--quiet"])
            #expect(next.exitCode == 0, "\(next)")
            let after = try hidden()
            #expect(after.count == 1 && after.first?.hasPrefix(".out2.ndjson.stratus-") == true, "only the link of the output the token names stays: \(after)")
        }
    }

    @Test("an asset that cannot be written into --assets-dir (a file size limit) is the output's failure, 73, and the token stays; the next run writes it", arguments: TestEngine.all)
    func assetFolderWriteFailure(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            _ = try store.writeFile("src/big.bin", patternBytes(count: 3_000_000, seed: 3))
            let line = Self.blob("b1", file: "big.bin", title: "big")
            #expect(try await cli.run(["import", try cli.file("big.ndjson", line + "\n"), "--assets-dir", store.path("src"), "--quiet"]).exitCode == 0)
            let limited = try await cli.shell(#"ulimit -f 2000 && exec "$STRATUS" changes --token-file tok --assets-dir pending-assets --output pending.ndjson --quiet"#)
            #expect(limited.exitCode == 73, "\(limited)")
            #expect(limited.stderr.contains("pending-assets"), "\(limited)")
            let again = try await cli.run(["changes", "--token-file", store.path("tok"), "--assets-dir", store.path("pending-assets"), "--output", store.path("pending.ndjson"), "--quiet"])
            #expect(again.exitCode == 0, "\(again)")
            #expect(try JSONLine.names(cli.read(store.path("pending.ndjson")) ?? "") == ["b1"], "the change the failed run did not commit")
        }
    }

    @Test("changes --output naming a symbolic link holds the file it names: another job naming the file itself is refused (75), so neither cuts back the other's changes", arguments: TestEngine.all)
    func outputThroughASymbolicLink(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(2)).exitCode == 0)
            try FileManager.default.createSymbolicLink(atPath: store.path("link.ndjson"), withDestinationPath: "real.ndjson")
            let first = try await cli.run(["changes", "--token-file", store.path("one.token"), "--output", store.path("link.ndjson"), "--quiet"])
            #expect(first.exitCode == 0, "\(first)")
            let second = try await cli.run(["changes", "--token-file", store.path("two.token"), "--output", store.path("real.ndjson"), "--quiet"])
            #expect(second.exitCode == 75, "the file is the first job's: \(second)")
            #expect(try JSONLine.names(cli.read(store.path("real.ndjson")) ?? "") == ["n1", "n2"])
        }
    }

    @Test("changes --output /dev/null (a device) is written as a stream: no link is made beside it, and later runs into a file go on", arguments: TestEngine.all)
    func outputToADevice(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(2)).exitCode == 0)
            let before = Set((try? FileManager.default.contentsOfDirectory(atPath: "/dev")) ?? [])
            let first = try await cli.run(["changes", "--token-file", store.path("tok"), "--output", "/dev/null", "--quiet"])
            #expect(first.exitCode == 0, "\(first)")
            let after = Set((try? FileManager.default.contentsOfDirectory(atPath: "/dev")) ?? [])
            #expect(after.subtracting(before).filter { $0.hasPrefix(".null") }.isEmpty, "no link to the device")
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(1, prefix: "later")).exitCode == 0)
            let second = try await cli.run(["changes", "--token-file", store.path("tok"), "--output", store.path("out.ndjson"), "--quiet"])
            #expect(second.exitCode == 0, "\(second)")
            #expect(try JSONLine.names(cli.read(store.path("out.ndjson")) ?? "") == ["later1"])
        }
    }

    @Test("changes --output with nothing new creates no file; with changes it writes them", arguments: TestEngine.all)
    func noFileWithoutChanges(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            try await cli.createStore()
            let token = store.path("cron.token")
            let empty = try await cli.run(["changes", "--token-file", token, "--output", store.path("run-1.ndjson")])
            #expect(empty.exitCode == 0 && !cli.exists(store.path("run-1.ndjson")), "\(empty)")
            #expect(empty.stderr.contains("nothing new"), "\(empty)")

            #expect(try await cli.run(["import"], stdin: Input.notes(3)).exitCode == 0)
            let full = try await cli.run(["changes", "--token-file", token, "--output", store.path("run-2.ndjson")])
            #expect(full.exitCode == 0, "\(full)")
            #expect(try JSONLine.names(cli.read(store.path("run-2.ndjson")) ?? "") == ["n1", "n2", "n3"])

            let idle = try await cli.run(["changes", "--token-file", token, "--output", store.path("run-3.ndjson")])
            #expect(idle.exitCode == 0 && !cli.exists(store.path("run-3.ndjson")), "\(idle)")
            #expect(try await cli.run(["delete", "n2", "--yes"]).exitCode == 0)
            let next = try await cli.run(["changes", "--token-file", token, "--output", store.path("run-4.ndjson")])
            #expect(next.exitCode == 0, "\(next)")
            #expect(try JSONLine.names(cli.read(store.path("run-4.ndjson")) ?? "") == ["n2"])
            #expect(try JSONLine.names(cli.read(store.path("run-2.ndjson")) ?? "") == ["n1", "n2", "n3"], "the earlier output is left as it was")
        }
    }

    @Test("changes --output after a consumer emptied the file (or emptied and removed it): the next run says so, writes only the new changes and goes on", arguments: TestEngine.all)
    func consumerEmptiedTheOutput(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let token = store.path("cron.token"), output = store.path("out.ndjson")
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(2)).exitCode == 0)
            #expect(try await cli.run(["changes", "--token-file", token, "--output", output, "--quiet"]).exitCode == 0)
            #expect(try JSONLine.names(cli.read(output) ?? "") == ["n1", "n2"])

            // The consumer read it and emptied it in place.
            _ = try cli.file("out.ndjson", "")
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(1, prefix: "m")).exitCode == 0)
            let afterEmptied = try await cli.run(["changes", "--token-file", token, "--output", output])
            #expect(afterEmptied.exitCode == 0 && afterEmptied.stderr.contains("something emptied or cut it since the last run"), "\(afterEmptied)")
            #expect(try JSONLine.names(cli.read(output) ?? "") == ["m1"])

            // Emptied, then removed.
            _ = try cli.file("out.ndjson", "")
            try FileManager.default.removeItem(atPath: output)
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(1, prefix: "k")).exitCode == 0)
            let afterRemoved = try await cli.run(["changes", "--token-file", token, "--output", output])
            #expect(afterRemoved.exitCode == 0, "\(afterRemoved)")
            #expect(try JSONLine.names(cli.read(output) ?? "") == ["k1"])
            let idle = try await cli.run(["changes", "--token-file", token, "--output", output])
            #expect(idle.exitCode == 0 && !idle.stderr.contains("note:"), "\(idle)")
        }
    }

    @Test("two jobs naming one --output file: the second is refused (75) while the first writes it, before it cuts anything back, and both tokens stay as they were", arguments: TestEngine.all)
    func oneOutputFileOneJob(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            #expect(try await cli.run(["import"], stdin: Input.notes(3)).exitCode == 0)
            let output = store.path("today.ndjson")
            #expect(try await cli.run(["changes", "--token-file", store.path("a.token"), "--output", output]).exitCode == 0)
            let written = try #require(cli.read(output))
            let tokens = [cli.read(store.path("a.token")), cli.read(store.path("b.token"))]
            #expect(try await cli.run(["import"], stdin: Input.notes(2, prefix: "m")).exitCode == 0)
            // The other job runs while this one holds the file (flock(1) stands in for it).
            for token in ["a.token", "b.token"] {
                let held = try await cli.shell(#"flock "\#(output)" "$STRATUS" changes --token-file "\#(store.path(token))" --output "\#(output)""#)
                #expect(held.exitCode == 75 && held.stderr.contains("is locked: a consumer holds it"), "\(token): \(held)")
            }
            #expect(cli.read(output) == written, "nothing cut back or appended")
            #expect([cli.read(store.path("a.token")), cli.read(store.path("b.token"))] == tokens)
            let after = try await cli.run(["changes", "--token-file", store.path("a.token"), "--output", output])
            #expect(after.exitCode == 0, "\(after)")
            #expect(try JSONLine.names(cli.read(output) ?? "") == ["n1", "n2", "n3", "m1", "m2"])
            // A device is shared by design: only a regular output file is locked.
            let device = try await cli.shell(#"flock /dev/null "$STRATUS" changes --token-file "\#(store.path("b.token"))" --output /dev/null"#)
            #expect(device.exitCode == 0, "\(device)")
        }
    }

    @Test("two jobs naming one --output file one after the other: the second is refused (75) and writes nothing, so the first never cuts back what another job committed", arguments: TestEngine.all)
    func oneOutputFileOneJobInTurn(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            #expect(try await cli.run(["import"], stdin: Input.notes(3)).exitCode == 0)
            let output = store.path("changes-today.ndjson")
            #expect(try await cli.run(["changes", "--token-file", store.path("a.token"), "--output", output]).exitCode == 0)
            let written = try #require(cli.read(output))
            let other = try await cli.run(["changes", "--token-file", store.path("b.token"), "--output", output])
            #expect(other.exitCode == 75 && other.stderr.contains("is another job's"), "\(other)")
            #expect(cli.read(output) == written)
            #expect(try await cli.run(["import"], stdin: Input.notes(1, prefix: "m")).exitCode == 0)
            #expect(try await cli.run(["changes", "--token-file", store.path("a.token"), "--output", output]).exitCode == 0)
            #expect(try JSONLine.names(cli.read(output) ?? "") == ["n1", "n2", "n3", "m1"])
            // Its own file, moved away by the consumer, frees the name for the other job.
            try FileManager.default.moveItem(atPath: output, toPath: store.path("consumed.ndjson"))
            let fresh = try await cli.run(["changes", "--token-file", store.path("b.token"), "--output", output])
            #expect(fresh.exitCode == 0, "\(fresh)")
            #expect(try JSONLine.names(cli.read(output) ?? "") == ["n1", "n2", "n3", "m1"])
        }
    }

    @Test("changes of a custom zone name the zone on every line, also for records imported without a zoneID, so a mirror puts them back in it", arguments: TestEngine.all)
    func changesNameTheirZone(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            #expect(try await cli.run(["zones", "create", "Photos"]).exitCode == 0)
            let answer = #"{"records":[{"recordName":"p1","recordType":"P","fields":{"a":{"value":1,"type":"INT64"}}},{"recordName":"p2","recordType":"P","fields":{"a":{"value":2,"type":"INT64"}}}]}"#
            #expect(try await cli.run(["import", "--zone", "Photos"], stdin: answer).exitCode == 0)
            #expect(try await cli.run(["delete", "p2", "--zone", "Photos", "--yes"]).exitCode == 0)
            let changes = try await cli.run(["changes", "--zone", "Photos", "--token-file", store.path("photos.token")])
            #expect(changes.exitCode == 0 && changes.stdoutLines.count == 2, "\(changes)")
            for line in changes.stdoutLines {
                let zone = try JSONLine.object(line)["zoneID"] as? [String: Any]
                #expect(zone?["zoneName"] as? String == "Photos", "\(line)")
            }
            let mirror = try await cli.newStore("mirror")
            let mirrored = try await cli.run(["import", "--store", mirror, "--mode", "forceReplace", "--create-zones"], stdin: changes.stdout)
            #expect(mirrored.exitCode == 0, "\(mirrored)")
            #expect(try await cli.count("P", extra: ["--store", mirror, "--zone", "Photos"]) == 1)
            #expect(try await cli.count("P", extra: ["--store", mirror]) == 0, "nothing in the default zone")
        }
    }

    @Test("changes --output - writes to stdout; a token file or output path with a line break is refused (64) before anything is written", arguments: TestEngine.all)
    func outputDashAndLineBreaks(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            #expect(try await cli.run(["import"], stdin: Input.notes(2)).exitCode == 0)
            let dash = try await cli.run(["changes", "--token-file", store.path("a.token"), "--output", "-"])
            let names = try JSONLine.names(dash.stdout)
            #expect(dash.exitCode == 0 && names == ["n1", "n2"], "\(dash)")
            #expect(!cli.exists(store.path("-")) && !FileManager.default.fileExists(atPath: "-"))
            for (token, output) in [(store.path("b\n.token"), store.path("out.ndjson")), (store.path("c.token"), store.path("out\nput.ndjson"))] {
                let refused = try await cli.run(["changes", "--token-file", token, "--output", output])
                #expect(refused.exitCode == 64 && refused.stderr.contains("line break"), "\(refused)")
                #expect(!cli.exists(token) && !cli.exists(output))
            }
        }
    }
}
