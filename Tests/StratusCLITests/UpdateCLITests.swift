import Foundation
import StratusTestSupport
import Testing

/// `stratus update` (and `stratus delete --type` on the same machinery): values set and
/// removed, a second run writing nothing, dry runs, checkpoints, and mistakes.
@Suite("stratus update", .timeLimit(.minutes(30)))
struct UpdateCLITests {
    @Test("update sets typed values and removes fields on the matching records only; the same update again writes nothing", arguments: TestEngine.all)
    func setsAndRemoves(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            _ = try await cli.run(["import", try cli.file("notes.ndjson", Input.notes(10))])

            let updated = try await cli.run([
                "update", "--type", "Note", "--where", "count <= 4", "--set", "status=done", "--set", "rank:DOUBLE=2",
                "--set", "title=", "--batch-size", "3", "--progress", "json",
            ])
            #expect(updated.exitCode == 0, "\(updated)")
            let summary = try #require(try JSONLine.objects(updated.stderr).last, "\(updated)")
            #expect(summary["matched"] as? Int == 4, "\(updated)")
            #expect(summary["updated"] as? Int == 4, "\(updated)")
            #expect(summary["unchanged"] as? Int == 0, "\(updated)")
            #expect(summary["failed"] as? Int == 0, "\(updated)")

            let notes = try await cli.exported("Note")
            #expect(notes.count == 10)
            for i in 1...10 {
                let note = try #require(notes["n\(i)"])
                #expect(JSONLine.value(note, "count") == "\(i)", "fields not named stay as they were")
                if i <= 4 {
                    #expect(JSONLine.field(note, "status")?["type"] as? String == "STRING")
                    #expect(JSONLine.value(note, "status") == "done")
                    #expect(JSONLine.field(note, "rank")?["type"] as? String == "DOUBLE", "\(note)")
                    #expect(JSONLine.field(note, "title") == nil, "an empty value removes the field: \(note)")
                } else {
                    #expect(JSONLine.field(note, "status") == nil && JSONLine.field(note, "rank") == nil)
                    #expect(JSONLine.value(note, "title") == "title \(i)")
                }
            }

            let again = try await cli.run(["update", "--type", "Note", "--where", "count <= 4", "--set", "status=done", "--set", "rank:DOUBLE=2", "--set", "title="])
            #expect(again.exitCode == 0, "\(again)")
            #expect(again.stderr.contains("updated 0, unchanged 4, failed 0"), "\(again)")
        }
    }

    @Test("--set values are read as CSV cells are: a quoted empty value is the empty string (or empty BYTES), a quoted value loses its quotes, an unquoted one keeps every character", arguments: TestEngine.all)
    func quotedValues(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            _ = try await cli.run(["import", try cli.file("notes.ndjson", Input.notes(1))])
            let updated = try await cli.run([
                "update", "--type", "Note", "--all", "--set", #"empty:STRING="""#, "--set", #"blank:BYTES="""#, "--set", #"pair="a,b""#,
                "--set", #"digits="5""#, "--set", #"said=say "hi""#, "--set", #"inner="x ""y"" z""#, "--set", "bare=a,b",
            ])
            #expect(updated.exitCode == 0, "\(updated)")
            let note = try #require(try await cli.exported("Note")["n1"])
            #expect(JSONLine.value(note, "empty") == "" && JSONLine.field(note, "empty")?["type"] as? String == "STRING", "\(note)")
            #expect(JSONLine.value(note, "blank") == "" && JSONLine.field(note, "blank")?["type"] as? String == "BYTES", "\(note)")
            #expect(JSONLine.value(note, "pair") == "a,b", "\(note)")
            #expect(JSONLine.field(note, "digits")?["value"] as? String == "5", "a quoted cell is a string: \(note)")
            #expect(JSONLine.value(note, "said") == #"say "hi""#, "\(note)")
            #expect(JSONLine.value(note, "inner") == #"x "y" z"#, "\(note)")
            #expect(JSONLine.value(note, "bare") == "a,b", "\(note)")
        }
    }

    @Test("a field the schema declares encrypted takes encrypted values from an untyped CSV column, --types NAME:ENCRYPTED_STRING and update --set, as from untyped JSON", arguments: TestEngine.all)
    func encryptedBySchema(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let schema = "DEFINE SCHEMA\n    RECORD TYPE Secret (\n        code ENCRYPTED STRING,\n        note STRING\n    );\n"
            #expect(try await cli.run(["schema", "import", try cli.file("s.ckdb", schema)]).exitCode == 0)
            #expect(try await cli.run(["zones", "create", "Z", "--database", "private"]).exitCode == 0)
            let place = ["--database", "private", "--zone", "Z"]
            let untyped = try await cli.run(["import", try cli.file("r.csv", "recordName,recordType,code,note\nr1,Secret,abc,n\n")] + place)
            #expect(untyped.exitCode == 0, "\(untyped)")
            let typed = try await cli.run(["import", try cli.file("t.csv", "recordName,recordType,code,note\nr2,Secret,def,n\n"), "--types", "code:ENCRYPTED_STRING"] + place)
            #expect(typed.exitCode == 0, "\(typed)")
            let updated = try await cli.run(["update", "--type", "Secret", "--all", "--set", "code=xyz"] + place)
            #expect(updated.exitCode == 0 && updated.stderr.contains("updated 2"), "\(updated)")
            let typedSet = try await cli.run(["update", "--type", "Secret", "--where", "recordName == 'r1'", "--set", "code:ENCRYPTED_STRING=uvw"] + place)
            #expect(typedSet.exitCode == 0, "\(typedSet)")
            let secrets = try await cli.exported("Secret", extra: place)
            #expect(JSONLine.field(secrets["r1"] ?? [:], "code")?["isEncrypted"] as? Bool == true && JSONLine.value(secrets["r1"] ?? [:], "code") == "uvw", "\(secrets)")
            #expect(JSONLine.field(secrets["r2"] ?? [:], "code")?["isEncrypted"] as? Bool == true && JSONLine.value(secrets["r2"] ?? [:], "code") == "xyz", "\(secrets)")
        }
    }

    @Test("a string compared with a number field, or a number with a string field, is refused (64) by every command: it would match nothing and change nothing, silently", arguments: TestEngine.all)
    func literalOfTheWrongKind(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            _ = try await cli.run(["import", try cli.file("notes.ndjson", Input.notes(4))])
            for (command, predicate, says) in [
                (["update", "--type", "Note", "--set", "status=x"], "count == '1'", "--where: count is INT64 in the schema, and '1' is a string"),
                (["delete", "--type", "Note", "--yes"], "count IN {1, '2'}", "--where: count is INT64 in the schema, and '2' is a string"),
                (["count", "--type", "Note"], "title == 5", "--where: title is STRING in the schema, and 5 is a number"),
                (["query", "--type", "Note"], "title BEGINSWITH 't' AND title != true", "--where: title is STRING in the schema, and 1 is a number"),
            ] {
                let refused = try await cli.run(command + ["--where", predicate])
                #expect(refused.exitCode == 64 && refused.stderr.contains(says), "\(predicate): \(refused)")
            }
            #expect(try await cli.count("Note") == 4, "nothing was deleted")
            #expect(try await cli.exported("Note").values.allSatisfy { JSONLine.field($0, "status") == nil }, "nothing was updated")
            // Literals of the field's kind run as before; numbers of either kind compare as numbers.
            let counted = try await cli.run(["count", "--type", "Note", "--where", "count >= 2.5 AND title != 'x'"])
            #expect(counted.exitCode == 0 && counted.stdout == "2\n", "\(counted)")
        }
    }

    // SQLite only: the busy timeout that ends a wait for another process's write lock is
    // SQLite's; on PostgreSQL writers wait for each other's row locks as any client does.
    @Test("an update the store stays too busy for (another writer holds it) exits 75, and no progress line claims a record updated")
    func busyStoreProgressClaimsNothing() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store)
            _ = try await cli.run(["import", try cli.file("notes.ndjson", Input.notes(6))])
            // sqlite3 holds the write lock through the update's retries (about 25 s), so that a
            // progress line (every 5 s) comes while nothing could be written.
            let result = try await cli.shell(#"""
                mkfifo hold
                sqlite3 "$STRATUS_STORE" < hold > /dev/null &
                holder=$!
                exec 3> hold
                echo 'BEGIN IMMEDIATE;' >&3
                sleep 1
                "$STRATUS" update --type Note --all --set status=busy --progress json
                echo "exit $?"
                echo 'ROLLBACK;' >&3
                exec 3>&-
                wait "$holder"
                """#)
            #expect(result.stdout.contains("exit 75"), "\(result)")
            #expect(result.stderr.contains("the store at \(cli.storePath) is busy with another writer") && result.stderr.contains("try again later"), "the store is named (found by an operator tester), and what to do: \(result)")
            let events = try JSONLine.objects(result.stderr.split(separator: "\n").filter { $0.hasPrefix("{") }.joined(separator: "\n"))
            #expect(events.contains { $0["event"] as? String == "progress" }, "a progress line came: \(result)")
            for event in events {
                #expect((event["updated"] as? Int ?? 0) == 0, "nothing was updated: \(result)")
            }
            #expect(try await cli.count("Note", where: "status == 'busy'") == 0)
        }
    }

    @Test("--dry-run counts what would be updated and writes nothing; --all means every record of the type", arguments: TestEngine.all)
    func dryRun(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            _ = try await cli.run(["import", try cli.file("notes.ndjson", Input.notes(6))])
            _ = try await cli.run(["update", "--type", "Note", "--where", "count == 1", "--set", "status=open"])

            let dry = try await cli.run(["update", "--type", "Note", "--all", "--set", "status=open", "--dry-run", "--progress", "json"])
            #expect(dry.exitCode == 0, "\(dry)")
            let summary = try #require(try JSONLine.objects(dry.stderr).last, "\(dry)")
            #expect(summary["matched"] as? Int == 6, "\(dry)")
            #expect(summary["wouldUpdate"] as? Int == 5, "\(dry)")
            #expect(summary["unchanged"] as? Int == 1, "\(dry)")
            #expect(try await cli.count("Note", where: "status == 'open'") == 1, "a dry run writes nothing")

            let human = try await cli.run(["update", "--type", "Note", "--all", "--set", "status=open", "--dry-run"])
            #expect(human.stderr.contains("dry run: would update 5, unchanged 1, failed 0, nothing written"), "\(human)")
        }
    }

    @Test("--checkpoint: a completed update removes its file; a file of another command or not a checkpoint is refused (64) and nothing is written", arguments: TestEngine.all)
    func checkpoints(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            _ = try await cli.run(["import", try cli.file("notes.ndjson", Input.notes(20))])
            let checkpoint = store.path("update.checkpoint")

            let done = try await cli.run(["update", "--type", "Note", "--where", "count > 10", "--set", "status=late", "--batch-size", "4", "--checkpoint", checkpoint])
            #expect(done.exitCode == 0, "\(done)")
            #expect(done.stderr.contains("updated 10,") || done.stderr.contains("updated 10 "), "\(done)")
            #expect(!cli.exists(checkpoint), "the checkpoint is removed when the update ends")
            #expect(try await cli.count("Note", where: "status == 'late'") == 10)

            // A checkpoint left by another update is not applied to this one.
            let saved = #"{"command":"update Note where count > 0 set other=1 in default/public/_defaultZone","job":"pipeline-x","position":null}"#
            _ = try cli.file("update.checkpoint", saved)
            let mismatched = try await cli.run(["update", "--type", "Note", "--all", "--set", "status=early", "--checkpoint", checkpoint])
            #expect(mismatched.exitCode == 64, "\(mismatched)")
            #expect(mismatched.stderr.contains("belongs to another command"), "\(mismatched)")
            #expect(cli.read(checkpoint) == saved, "a refused checkpoint is left as it was")

            // The job is named by its predicate's canonical form: spacing makes no other job, and
            // `now` stays the word, so that a resumed run (another moment) is the same job.
            for (file, command) in [("update", "update Note where count > 0 AND modificationDate < now set status=spaced in default/public/_defaultZone"),
                                    ("delete", "delete Note where count > 100 AND modificationDate < now in default/public/_defaultZone")] {
                _ = try cli.file("\(file).resumed", #"{"command":"\#(command)","job":"pipeline-\#(file)","position":null}"#)
            }
            let respaced = try await cli.run(["update", "--type", "Note", "--where", "count>0 AND modificationDate<now", "--set", "status=spaced", "--checkpoint", store.path("update.resumed")])
            #expect(respaced.exitCode == 0 && respaced.stderr.contains("going on from the checkpoint"), "\(respaced)")
            let deleteResumed = try await cli.run(["delete", "--type", "Note", "--where", "count>100 AND modificationDate<now", "--yes", "--checkpoint", store.path("delete.resumed")])
            #expect(deleteResumed.exitCode == 0 && deleteResumed.stderr.contains("going on from the checkpoint"), "\(deleteResumed)")

            _ = try cli.file("update.checkpoint", "not json\n")
            let garbage = try await cli.run(["update", "--type", "Note", "--all", "--set", "status=early", "--checkpoint", checkpoint])
            #expect(garbage.exitCode == 64, "\(garbage)")
            #expect(garbage.stderr.contains("holds no Stratus checkpoint, not a checkpoint of `stratus update`; name another file for --checkpoint (this one is left as it is)"), "\(garbage)")
            #expect(try await cli.count("Note", where: "status == 'early'") == 0, "refused runs write nothing")

            // Another command's checkpoint is named as what it is; none is to be removed.
            let importCheckpoint = #"{"input":"/data/notes.ndjson","inputSize":120,"committedItems":40}"#
            _ = try cli.file("update.checkpoint", importCheckpoint)
            let ofImport = try await cli.run(["update", "--type", "Note", "--all", "--set", "status=early", "--checkpoint", checkpoint])
            #expect(ofImport.exitCode == 64 && ofImport.stderr.contains("holds the checkpoint of a `stratus import`, not a checkpoint of `stratus update`"), "\(ofImport)")
            #expect(!ofImport.stderr.contains("remove it"), "\(ofImport)")
            #expect(cli.read(checkpoint) == importCheckpoint)
            let input = try cli.file("more.ndjson", Input.notes(2, prefix: "m"))
            _ = try cli.file("update.checkpoint", saved)
            let ofUpdate = try await cli.run(["import", input, "--checkpoint", checkpoint])
            #expect(ofUpdate.exitCode == 64 && ofUpdate.stderr.contains("holds the checkpoint of a `stratus update`, not an import checkpoint"), "\(ofUpdate)")
            #expect(cli.read(checkpoint) == saved)
            // The input named as its own checkpoint is refused before anything is made beside it.
            let itself = try await cli.run(["import", input, "--checkpoint", input])
            #expect(itself.exitCode == 64 && itself.stderr.contains("--checkpoint \(input) is the input itself; name another file"), "\(itself)")
            #expect(!cli.exists(input + ".lock"), "\(itself)")
            #expect(cli.read(input) == Input.notes(2, prefix: "m"))
            #expect(try await cli.count("Note") == 20, "refused imports write nothing")
        }
    }

    @Test("mistakes on the command line are usage errors (64) that name the problem, and write nothing", arguments: TestEngine.all)
    func usageErrors(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            _ = try await cli.run(["import", try cli.file("notes.ndjson", Input.notes(3))])
            let cases: [([String], String)] = [
                (["update", "--where", "count > 1", "--set", "a=1"], "--type"),
                (["update", "--type", "Note", "--set", "a=1"], "--all"),
                (["update", "--type", "Note", "--all", "--where", "count > 1", "--set", "a=1"], "--all"),
                (["update", "--type", "Note", "--all"], "--set"),
                (["update", "--type", "Note", "--all", "--set", "novalue"], "novalue"),
                (["update", "--type", "Note", "--all", "--set", "a:WHATEVER=1"], "WHATEVER"),
                (["update", "--type", "Note", "--all", "--set", "a:INT64=abc"], "a"),
                (["update", "--type", "Note", "--all", "--set", "a=1", "--set", "a=2"], "a"),
                (["update", "--type", "Note", "--all", "--set", "a=1", "--dry-run", "--checkpoint", store.path("c")], "--checkpoint"),
                (["update", "--type", "Note", "--all", "--set", "a=1", "--batch-size", "0"], "--batch-size"),
                (["update", "--type", "Note", "--where", "count >>> 1", "--set", "a=1"], "count"),
            ]
            for (arguments, named) in cases {
                let result = try await cli.run(arguments)
                #expect(result.exitCode == 64, "\(result)")
                #expect(result.stderr.contains(named), "the message names \(named): \(result)")
                #expect(!result.stderr.contains("updated"), "\(result)")
            }
            #expect(try await cli.exported("Note").values.allSatisfy { JSONLine.field($0, "a") == nil }, "nothing was written")
            #expect(!cli.exists(store.path("c")))

            // In production, a field the schema lacks is named once, not refused once per record.
            #expect(try await cli.run(["schema", "deploy"]).exitCode == 0)
            #expect(try await cli.run(["import", try cli.file("prod.ndjson", Input.notes(3)), "--environment", "production", "--quiet"]).exitCode == 0)
            let misspelt = try await cli.run(["update", "--type", "Note", "--all", "--set", "titel=x", "--environment", "production"])
            #expect(misspelt.exitCode == 64 && misspelt.stderr.contains("--set titel: the production schema of Note has no field 'titel'"), "\(misspelt)")
            #expect(misspelt.stderr.contains("count, title"), "the type's fields are listed: \(misspelt)")
            let stored = try await cli.run(["get", "n1", "n2", "n3", "--environment", "production"])
            #expect(stored.exitCode == 0 && stored.stdoutLines.count == 3 && !stored.stdout.contains("titel"), "nothing was written: \(stored)")
        }
    }

    @Test("--max-errors N stops once more than N records failed: the batch where that happened is written but for its failures, nothing after; --reject-file has a line for each failure", arguments: TestEngine.all)
    func maxErrorsAndRejectFile(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            func post(_ i: Int) -> String { #"{"recordName":"p\#(i)","recordType":"Post","fields":{"title":{"value":"draft","type":"STRING"}}}"# }
            // Bob's p3 and p6 are his to write: alice's update fails on them.
            #expect(try await cli.run(["import", try cli.file("mine.ndjson", [1, 2, 4, 5, 7, 8].map(post).joined(separator: "\n") + "\n")]).exitCode == 0)
            #expect(try await cli.run(["import", try cli.file("bobs.ndjson", [3, 6].map(post).joined(separator: "\n") + "\n"), "--user", "bob"]).exitCode == 0)
            let rejects = store.path("rejects.ndjson")
            // Batches in record-name order: [p1 p2] [p3 p4] [p5 p6] [p7 p8].
            let stopped = try await cli.run(["update", "--type", "Post", "--all", "--set", "title=final", "--batch-size", "2", "--max-errors", "1", "--reject-file", rejects])
            #expect(stopped.exitCode == 65, "\(stopped)")
            #expect(stopped.stderr.contains("stopped after 2 failed records (--max-errors 1)"), "why it stopped: \(stopped)")
            #expect(stopped.stderrLines.last?.hasPrefix("stopped by an error: updated 4, unchanged 0, failed 2") == true, "the summary is the last line and says the run stopped: \(stopped)")
            #expect(try await cli.count("Post", where: "title == 'final'") == 4, "p1, p2, p4 and p5; p7 and p8 after the limit are left: \(stopped)")
            let lines = (cli.read(rejects) ?? "").split(separator: "\n").map(String.init)
            #expect(try lines.map { try JSONLine.object($0)["recordName"] as? String } == ["p3", "p6"], "\(lines)")
            #expect(try lines.allSatisfy { try JSONLine.object($0)["error"] is String }, "\(lines)")
        }
    }

    @Test("--checkpoint of an update stopped part way is refused (64) by another store, which stays unchanged; the store it was made with goes on from it", arguments: TestEngine.all)
    func checkpointOfAnotherStore(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let other = try await cli.newStore("other.sqlite")
            let mine = (1...8).filter { $0 != 5 }.map { #"{"recordName":"p\#($0)","recordType":"Post","fields":{"title":{"value":"draft","type":"STRING"}}}"# }
            let theirs = #"{"recordName":"p5","recordType":"Post","fields":{"title":{"value":"draft","type":"STRING"}}}"#
            for location in [cli.storePath, other] {
                #expect(try await cli.run(["import", try cli.file("mine.ndjson", mine.joined(separator: "\n") + "\n"), "--store", location]).exitCode == 0)
                #expect(try await cli.run(["import", try cli.file("theirs.ndjson", theirs + "\n"), "--store", location, "--user", "bob"]).exitCode == 0)
            }
            let checkpoint = store.path("update.checkpoint")
            let update = ["update", "--type", "Post", "--all", "--set", "title=final", "--batch-size", "2", "--max-errors", "0", "--checkpoint", checkpoint]
            // Bob's p5 fails in the third batch: the run stops after it, its checkpoint kept.
            let stopped = try await cli.run(update)
            #expect(stopped.exitCode == 65, "\(stopped)")
            let saved = try #require(cli.read(checkpoint), "\(stopped)")
            #expect(try await cli.count("Post", where: "title == 'final'") == 5)

            let elsewhere = try await cli.run(update + ["--store", other])
            #expect(elsewhere.exitCode == 64, "\(elsewhere)")
            #expect(elsewhere.stderr.contains("this store holds no record of that job"), "\(elsewhere)")
            #expect(cli.read(checkpoint) == saved, "a refused checkpoint is left as it was")
            #expect(try await cli.count("Post", where: "title == 'draft'", extra: ["--store", other]) == 8, "nothing written in the other store")

            // The limit counts the whole job: the same command stops at once.
            let again = try await cli.run(update)
            #expect(again.exitCode == 65 && again.stderr.contains("the earlier runs of the checkpoint") && again.stderr.contains("nothing more was updated"), "\(again)")
            #expect(try await cli.count("Post", where: "title == 'final'") == 5)

            // Without --max-errors, the store it was made with finishes after the kept position,
            // and the job's failure stays reported: exit 1.
            let resumed = try await cli.run(update.filter { $0 != "--max-errors" && $0 != "0" })
            #expect(resumed.exitCode == 1, "\(resumed)")
            #expect(resumed.stderr.contains("updated 2, unchanged 0, failed 0 (and 1 in earlier runs)"), "only the records after the position: \(resumed)")
            #expect(try await cli.count("Post", where: "title == 'final'") == 7)
        }
    }

    @Test("an update or delete whose --where reads now goes on from its checkpoint in a later run, over the records its first run matched", arguments: TestEngine.all)
    func resumedJobsReadTheirFirstNow(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let mine = (1...8).filter { $0 != 5 }.map { #"{"recordName":"p\#($0)","recordType":"Post","fields":{"title":{"value":"draft","type":"STRING"}}}"# }
            let theirs = #"{"recordName":"p5","recordType":"Post","fields":{"title":{"value":"draft","type":"STRING"}}}"#
            #expect(try await cli.run(["import", try cli.file("mine.ndjson", mine.joined(separator: "\n") + "\n")]).exitCode == 0)
            #expect(try await cli.run(["import", try cli.file("theirs.ndjson", theirs + "\n"), "--user", "bob"]).exitCode == 0)
            let checkpoint = store.path("update.checkpoint")
            let update = ["update", "--type", "Post", "--where", "modificationDate < now", "--set", "title=final", "--batch-size", "2", "--checkpoint", checkpoint]
            // Bob's p5 fails in the third batch: the run stops after it, its checkpoint kept.
            let stopped = try await cli.run(update + ["--max-errors", "0"])
            #expect(stopped.exitCode == 65 && cli.exists(checkpoint), "\(stopped)")
            // A record written after the first run's moment is not the job's.
            #expect(try await cli.run(["import", "--quiet"], stdin: #"{"recordName":"p9","recordType":"Post","fields":{"title":{"value":"draft","type":"STRING"}}}"# + "\n").exitCode == 0)
            let resumed = try await cli.run(update)
            #expect(resumed.exitCode == 1 && resumed.stderr.contains("going on from the checkpoint") && resumed.stderr.contains("updated 2,"), "\(resumed)")
            #expect(try await cli.count("Post", where: "title == 'final'") == 7)
            #expect(!cli.exists(checkpoint))

            // A delete's checkpoint keeps its first run's moment too: one whose job began at
            // 2001-01-01 (before any record) deletes nothing where a new job deletes them all.
            let deleteCheckpoint = store.path("delete.checkpoint")
            let job = #"delete Post where modificationDate < now AND title == \"final\" in default/public/_defaultZone; now=0.0"#
            _ = try cli.file("delete.checkpoint", #"{"command":"\#(job)","job":"pipeline-delete","position":null}"#)
            let delete = ["delete", "--type", "Post", "--where", "modificationDate<now AND title=='final'", "--yes", "--checkpoint", deleteCheckpoint]
            let early = try await cli.run(delete)
            #expect(early.exitCode == 0 && early.stderr.contains("going on from the checkpoint") && early.stderr.contains("deleted 0,"), "\(early)")
            let fresh = try await cli.run(delete)
            #expect(fresh.exitCode == 0 && fresh.stderr.contains("deleted 7,") && !cli.exists(deleteCheckpoint), "\(fresh)")

            // A string that spells "now" reads no moment: the job is named as it reads.
            _ = try cli.file("word.checkpoint", #"{"command":"update Post where title == \"now\" set title=later in default/public/_defaultZone","job":"pipeline-word","position":null}"#)
            let word = try await cli.run(["update", "--type", "Post", "--where", "title == 'now'", "--set", "title=later", "--checkpoint", store.path("word.checkpoint")])
            #expect(word.exitCode == 0 && word.stderr.contains("going on from the checkpoint"), "\(word)")
        }
    }

    @Test("a checkpoint file larger than any checkpoint (a sparse file, another file named by mistake) is refused (65) before it is read, by update, import and copy, and left as it was", arguments: TestEngine.all)
    func hugeCheckpoints(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let notes = try cli.file("notes.ndjson", Input.notes(5))
            _ = try await cli.run(["import", notes, "--quiet"])
            // Over every checkpoint's limit (copy's, the largest, is 1 GiB); sparse, so it takes
            // no room on disk. It used to be read whole into memory, then found not to be JSON.
            let huge = store.path("huge.checkpoint")
            #expect(FileManager.default.createFile(atPath: huge, contents: Data("{".utf8)))
            #expect(truncate(huge, (1 << 30) + 1) == 0)
            let destination = try await cli.newStore("copy.sqlite")
            let runs: [[String]] = [
                ["update", "--type", "Note", "--all", "--set", "status=late", "--checkpoint", huge],
                ["import", notes, "--checkpoint", huge],
                ["copy", "--from", cli.storePath, "--to", destination, "--checkpoint", huge],
            ]
            for arguments in runs {
                let result = try await cli.run(arguments)
                #expect(result.exitCode == 65, "\(result)")
                #expect(result.stderr.contains("huge.checkpoint is larger than any checkpoint"), "\(result)")
                var info = stat()
                #expect(stat(huge, &info) == 0 && info.st_size == (1 << 30) + 1, "the file is left as it was")
            }
            #expect(try await cli.count("Note", where: "status == 'late'") == 0, "the refused update wrote nothing")
            #expect(!cli.storeExists(destination), "the refused copy created nothing")
        }
    }

    @Test("a --set naming a system field (recordType, creationDate, recordChangeTag, ___parent…) or no field name is refused (64), not counted unchanged; parent and share are fields, as in CloudKit", arguments: TestEngine.all)
    func systemFieldsRefused(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            _ = try await cli.run(["import", try cli.file("notes.ndjson", Input.notes(3))])
            let before = try await cli.exported("Note")
            // A CSV header reads these as the record's own columns: each --set used to run,
            // change nothing and report the record unchanged with exit 0.
            for assignment in ["___parent=n2", "___share=x", "recordType=Other", "creationDate=2020-01-01T00:00:00Z", "modificationDate=0",
                               "recordChangeTag=abc", "creatorUserRecordID=_x", "recordName=x", "a b=1"] {
                let result = try await cli.run(["update", "--type", "Note", "--all", "--set", assignment])
                #expect(result.exitCode == 64, "\(result)")
                #expect(result.stderr.contains("--set \(assignment)"), "the message quotes the --set: \(result)")
                #expect(!result.stderr.contains("CSV"), "the message speaks of --set, not of a CSV header: \(result)")
                #expect(!result.stderr.contains("unchanged"), "\(result)")
            }
            let after = try await cli.exported("Note")
            #expect(after.keys.sorted() == before.keys.sorted())
            for (name, record) in after {
                #expect(record["recordChangeTag"] as? String == before[name]?["recordChangeTag"] as? String, "nothing was written: \(record)")
                #expect(record["parent"] == nil && record["recordType"] as? String == "Note")
            }
            // A CloudKit schema may declare fields named parent and share: they are fields here.
            let fields = try await cli.run(["update", "--type", "Note", "--all", "--set", "parent=n2", "--set", "share=s"])
            #expect(fields.exitCode == 0, "\(fields)")
            for (name, record) in try await cli.exported("Note") {
                let values = record["fields"] as? [String: [String: Any]]
                #expect(values?["parent"]?["value"] as? String == "n2" && values?["share"]?["value"] as? String == "s", "\(name): \(record)")
                #expect(record["parent"] == nil && record["share"] == nil, "the record's own parent and share are untouched: \(record)")
            }
            // A job written when `parent` named the record's parent is told where that went.
            let other = try await cli.run(["import", try cli.file("tasks.ndjson", #"{"recordName":"t1","recordType":"Task","fields":{"n":{"value":1,"type":"INT64"}}}"# + "\n")])
            #expect(other.exitCode == 0, "\(other)")
            let old = try await cli.run(["update", "--type", "Task", "--where", "parent == 'list-1'", "--set", "n=2"])
            #expect(old.exitCode == 0 && old.stderr.contains("the record's parent is ___parent"), "\(old)")
            // A bad reference in a field named parent is the field's, not the parent's.
            let bad = try await cli.run(["import", try cli.file("bad.ndjson", #"{"recordName":"f9","recordType":"Note","fields":{"parent":{"value":{"recordName":"up","zoneID":{"zoneName":"Other"}},"type":"REFERENCE"}}}"# + "\n")])
            #expect(bad.exitCode != 0 && bad.stderr.contains("field 'parent'") && !bad.stderr.contains("the parent"), "\(bad)")
        }
    }

    @Test("a --set of an asset from a file is refused (64) saying update reads no asset files, not naming --assets-dir, an option update does not have", arguments: TestEngine.all)
    func assetFileRefused(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            _ = try await cli.run(["import", try cli.file("notes.ndjson", Input.notes(2))])
            for assignment in ["photo:ASSETID=/etc/hostname", "photo:ASSETID=beach.jpg", "photo:ASSETID_LIST=[\"a.jpg\"]"] {
                let result = try await cli.run(["update", "--type", "Note", "--all", "--set", assignment])
                #expect(result.exitCode == 64, "\(result)")
                #expect(result.stderr.contains("--set \(assignment): update reads no asset files"), "\(result)")
                #expect(!result.stderr.contains("import with --assets-dir /") && !result.stderr.contains("paths in the input"), "\(result)")
                let usage = try await cli.run(["update", "--type", "Note", "--all", "--set", assignment, "--assets-dir", "."])
                #expect(usage.exitCode == 64 && usage.stderr.contains("unknown option --assets-dir"), "the option the message must not offer: \(usage)")
            }
            #expect(try await cli.exported("Note").values.allSatisfy { $0["fields"].map { ($0 as? [String: Any])?["photo"] == nil } ?? true })
        }
    }

    @Test("delete --where of records a .deleteSelf cascade of the same run takes: the summary says them already gone, not not found", arguments: TestEngine.all)
    func deleteCascadeSummary(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            var lines = [#"{"recordName":"a","recordType":"T","fields":{}}"#]
            for name in ["b", "c", "d"] {
                lines.append(#"{"recordName":"\#(name)","recordType":"T","fields":{"up":{"value":{"recordName":"a","action":"DELETE_SELF"},"type":"REFERENCE"}}}"#)
            }
            #expect(try await cli.run(["import", "--quiet"], stdin: lines.joined(separator: "\n") + "\n").exitCode == 0)
            let deleted = try await cli.run(["delete", "--type", "T", "--where", "TRUEPREDICATE", "--yes", "--batch-size", "1"])
            #expect(deleted.exitCode == 0, "\(deleted)")
            #expect(deleted.stderrLines.last?.hasPrefix("deleted 1, already gone 3 (a .deleteSelf cascade of this run, or another writer), failed 0") == true, "\(deleted)")
            #expect(try await cli.count("T") == 0)
        }
    }

    @Test("delete --type --checkpoint deletes in batches and removes its file; the summary says deleted apart from not found", arguments: TestEngine.all)
    func deleteWithCheckpoint(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            _ = try await cli.run(["import", try cli.file("notes.ndjson", Input.notes(25))])
            let checkpoint = store.path("delete.checkpoint")
            let deleted = try await cli.run([
                "delete", "--type", "Note", "--where", "count > 5", "--yes", "--batch-size", "4", "--checkpoint", checkpoint, "--progress", "json",
            ])
            #expect(deleted.exitCode == 0, "\(deleted)")
            let summary = try #require(try JSONLine.objects(deleted.stderr).last, "\(deleted)")
            #expect(summary["deleted"] as? Int == 20, "\(deleted)")
            #expect(summary["failed"] as? Int == 0, "\(deleted)")
            #expect(!cli.exists(checkpoint))
            #expect(try await cli.count("Note") == 5)

            let names = try await cli.run(["delete", "n1", "ghost", "--yes"])
            #expect(names.exitCode == 0, "\(names)")
            #expect(names.stderr.contains("deleted 1, not found 1, failed 0"), "\(names)")
        }
    }
}
