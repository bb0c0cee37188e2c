import Foundation
import StratusTestSupport
import Testing

/// `stratus import` end to end: formats, modes, batches, atomic, dry run, error limits, reject
/// files and exit codes, checked on stdout, stderr and the exit status.
@Suite("stratus import", .timeLimit(.minutes(30)))
struct ImportCLITests {
    // MARK: - Formats

    @Test("NDJSON from a file and from stdin; data never on stdout; summary on stderr", arguments: TestEngine.all)
    func ndjson(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let path = try cli.file("notes.ndjson", Input.notes(3))
            let result = try await cli.run(["import", path])
            #expect(result.exitCode == 0, "\(result)")
            #expect(result.stdout.isEmpty, "import writes nothing on stdout: \(result)")
            Summary.expectImport(result, imported: 3)
            #expect(try await cli.count("Note") == 3)

            let piped = try await cli.run(["import", "-", "--format", "ndjson"], stdin: Input.notes(2, prefix: "p"))
            #expect(piped.exitCode == 0, "\(piped)")
            Summary.expectImport(piped, imported: 2)
            let implicit = try await cli.run(["import"], stdin: Input.notes(2, prefix: "q"))
            #expect(implicit.exitCode == 0, "\(implicit)")
            Summary.expectImport(implicit, imported: 2)
            #expect(try await cli.count("Note") == 7)

            let records = try await cli.exported("Note")
            #expect(JSONLine.value(try #require(records["n2"]), "title") == "title 2")
            #expect(JSONLine.field(try #require(records["n2"]), "count")?["type"] as? String == "INT64")
        }
    }

    // SQLite only: -wal and -shm files are SQLite's; a PostgreSQL store leaves no file.
    @Test("an import closes its SQLite store as it ends: no -wal or -shm file is left beside it, as after count; with --checkpoint too")
    func importLeavesNoLogFiles() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store)
            let logs = [cli.storePath + "-wal", cli.storePath + "-shm"]
            let file = try cli.file("c.ndjson", Input.notes(2, prefix: "c"))
            for (arguments, input) in [(["import", "--quiet"], Input.notes(3)), (["import", file, "--quiet", "--checkpoint", store.path("i.ckpt")], "")] {
                let imported = try await cli.run(arguments, stdin: input)
                #expect(imported.exitCode == 0, "\(imported)")
                #expect(logs.filter(cli.exists).isEmpty, "\(arguments) left \(logs.filter(cli.exists))")
            }
            #expect(try await cli.count("Note") == 5)
            #expect(logs.filter(cli.exists).isEmpty)
        }
    }

    @Test("an import stopped by SIGTERM keeps its checkpoint; the run that goes on ends with exactly the input and, ending normally, leaves no -wal or -shm file", arguments: TestEngine.all)
    func stoppedImportResumesAndLeavesNoLogFiles(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            // A PostgreSQL store has no files beside it to leave.
            let logs = engine == .sqlite ? [cli.storePath + "-wal", cli.storePath + "-shm"] : []
            let input = try cli.file("notes.ndjson", Input.notes(2_000))
            let checkpoint = store.path("notes.ckpt")
            let arguments = ["import", input, "--quiet", "--batch-size", "1", "--checkpoint", checkpoint]
            let running = try cli.start(arguments)
            // Once the checkpoint exists the import handles SIGTERM (before, a signal ends it
            // as a kill would); one that finished first has nothing left to go on with.
            while running.isRunning && !cli.exists(checkpoint) { try await Task.sleep(for: .milliseconds(5)) }
            running.signal(SIGTERM)
            let stopped = await running.wait()
            #expect(!stopped.signalled && (stopped.exitCode == 143 || stopped.exitCode == 0), "\(stopped)")
            if stopped.exitCode == 143 { #expect(cli.exists(checkpoint), "a stopped import keeps its checkpoint") }
            let resumed = try await cli.run(arguments)
            #expect(resumed.exitCode == 0, "\(resumed)")
            #expect(!cli.exists(checkpoint))
            #expect(logs.filter(cli.exists).isEmpty, "left \(logs.filter(cli.exists))")
            let exported = try await cli.run(["export", "--type", "Note", "--quiet"])
            let names = try exported.stdoutLines.map { try JSONLine.object($0)["recordName"] as? String ?? "" }
            #expect(Set(names) == Set((1...2_000).map { "n\($0)" }))
            #expect(exported.stdoutLines.count == 2_000)
        }
    }

    @Test("a JSON array and a CloudKit response envelope, detected and with --format", arguments: TestEngine.all)
    func arrayAndEnvelope(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let lines = Input.notes(3).split(separator: "\n")
            let array = try cli.file("array.json", "[\n" + lines.joined(separator: ",\n") + "\n]\n")
            let envelope = try cli.file(
                "envelope.json",
                #"{"records":["# + Input.notes(2, prefix: "e").split(separator: "\n").joined(separator: ",") + #"],"continuationMarker":"abc"}"#)
            let pretty = try cli.file("pretty.json", "{\n  \"records\": [\n    " + lines.joined(separator: ",\n    ") + "\n  ]\n}\n")
            let cases: [(path: String, format: String?, names: Set<String>)] = [
                (array, nil, ["n1", "n2", "n3"]),
                (array, "json", ["n1", "n2", "n3"]),
                (envelope, nil, ["e1", "e2"]),
                (envelope, "envelope", ["e1", "e2"]),
                (pretty, nil, ["n1", "n2", "n3"]),
            ]
            for (index, item) in cases.enumerated() {
                let target = try await cli.newStore("store-\(index)")
                let arguments = ["import", item.path, "--store", target] + (item.format.map { ["--format", $0] } ?? [])
                let result = try await cli.run(arguments)
                #expect(result.exitCode == 0, "\(result)")
                #expect(result.stdout.isEmpty)
                Summary.expectImport(result, imported: item.names.count)
                #expect(result.stderr.contains("note: the input is one page of a CloudKit answer") == (item.path == envelope),
                        "an answer with a continuationMarker holds only a page, and the import says so: \(result)")
                #expect(Set(try await cli.exported("Note", extra: ["--store", target]).keys) == item.names, "\(arguments)")
            }
        }
    }

    @Test("a changes/zone answer that says \"moreComing\": true is one page of its zone's changes, and the import says so", arguments: TestEngine.all)
    func changesPageWithMoreComing(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            func answer(_ name: String, moreComing: Bool) throws -> String {
                try cli.file("\(name).json", #"{"zones":[{"zoneID":{"zoneName":"Notes"},"moreComing":\#(moreComing),"syncToken":"T1","records":["#
                    + Input.notes(2, prefix: name).split(separator: "\n").joined(separator: ",") + "]}]}")
            }
            let page = try await cli.run(["import", try answer("page", moreComing: true), "--create-zones"])
            #expect(page.exitCode == 0, "\(page)")
            Summary.expectImport(page, imported: 2)
            #expect(page.stderr.contains("note: the input is one page of a CloudKit changes answer"), "the zone's later changes are not in the file: \(page)")
            let last = try await cli.run(["import", try answer("last", moreComing: false), "--create-zones"])
            #expect(last.exitCode == 0, "\(last)")
            Summary.expectImport(last, imported: 2)
            #expect(!last.stderr.contains("one page"), "\(last)")
        }
    }

    @Test("CSV with name:TYPE headers, with --type and --types, detected by the .csv suffix", arguments: TestEngine.all)
    func csv(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let typed = try cli.file(
                "typed.csv",
                #"""
                recordName,recordType,title:STRING,count:INT64,price:DOUBLE,due:TIMESTAMP
                c1,Item,"Milk, whole",2,1.25,1735689600000
                c2,Item,"say ""hi""",3,0.5,1735776000123

                """#)
            let result = try await cli.run(["import", typed])
            #expect(result.exitCode == 0, "\(result)")
            Summary.expectImport(result, imported: 2)
            let records = try await cli.exported("Item")
            let c1 = try #require(records["c1"])
            #expect(JSONLine.value(c1, "title") == "Milk, whole")
            #expect(JSONLine.field(c1, "count")?["type"] as? String == "INT64")
            #expect(JSONLine.field(c1, "price")?["type"] as? String == "DOUBLE")
            #expect(JSONLine.field(c1, "due")?["type"] as? String == "TIMESTAMP")
            #expect(JSONLine.value(c1, "due") == "1735689600000")
            #expect(JSONLine.value(try #require(records["c2"]), "title") == #"say "hi""#)

            // Plain headers, typed by options; read from stdin with --format csv.
            let plain = """
                recordName,label,size,when
                d1,first,10,1735689600000
                d2,second,20,1735689601000

                """
            let piped = try await cli.run(
                ["import", "--format", "csv", "--type", "Box", "--types", "size:INT64,when:TIMESTAMP"], stdin: plain)
            #expect(piped.exitCode == 0, "\(piped)")
            Summary.expectImport(piped, imported: 2)
            let boxes = try await cli.exported("Box")
            let d2 = try #require(boxes["d2"])
            #expect(JSONLine.field(d2, "size")?["type"] as? String == "INT64")
            #expect(JSONLine.value(d2, "size") == "20")
            #expect(JSONLine.field(d2, "when")?["type"] as? String == "TIMESTAMP")
            #expect(JSONLine.field(d2, "label")?["type"] as? String == "STRING")

            let badTypes = try await cli.run(["import", "--format", "csv", "--types", "size"], stdin: plain)
            #expect(badTypes.exitCode == 64, "\(badTypes)")
            #expect(badTypes.stderr.contains("--types"), "\(badTypes)")
            // One field given two types (the later one won, and ENCRYPTED_ stuck whatever followed) is ambiguous.
            for twice in ["size:STRING,size:INT64", "size:ENCRYPTED_STRING,when:TIMESTAMP,size:STRING"] {
                let refused = try await cli.run(["import", "--format", "csv", "--type", "Crate", "--types", twice], stdin: plain)
                #expect(refused.exitCode == 64 && refused.stderr.contains("--types gives the field 'size' twice"), "\(twice): \(refused)")
                let export = try await cli.run(["export", "--type", "Box", "--format", "csv", "--types", twice])
                #expect(export.exitCode == 64 && export.stderr.contains("--types gives the field 'size' twice"), "\(twice): \(export)")
            }
            #expect(try await cli.run(["count", "--type", "Crate"]).stdout == "0\n", "nothing was imported")
        }
    }

    @Test("CSV: untyped numbers are numbers (inferred as JSON infers), quoted cells text; TIMESTAMP takes ISO 8601; bad cells are quoted whole with the format they need", arguments: TestEngine.all)
    func csvTyping(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let tasks = try cli.file("tasks.csv", """
                recordName,title,priority,zip,due:TIMESTAMP
                t1,Buy milk,3,"01234",2024-01-01T09:30:00Z
                t2,Call Bob,5,01234,2024-01-01T10:30:00.250+01:00
                t3,Sleep,1,"12345",1704101400000

                """)
            let result = try await cli.run(["import", tasks, "--type", "Task"])
            #expect(result.exitCode == 0, "\(result)")
            // A field holds one type: once `zip` is text in the schema, untyped cells are read as text.
            let numberZip = try cli.file("more.csv", "recordName,zip\nt4,12345\n")
            let typed = try await cli.run(["import", numberZip, "--type", "Task"])
            #expect(typed.exitCode == 0, "\(typed)")
            #expect(JSONLine.field(try #require(try await cli.exported("Task")["t4"]), "zip")?["type"] as? String == "STRING")
            #expect(try await cli.count("Task", where: "priority >= 3") == 2, "priority is a number, so the comparison matches")
            let records = try await cli.exported("Task")
            #expect(JSONLine.field(try #require(records["t1"]), "priority")?["type"] as? String == "INT64")
            #expect(JSONLine.field(try #require(records["t1"]), "zip")?["type"] as? String == "STRING", "a quoted cell is text")
            #expect(JSONLine.field(try #require(records["t2"]), "zip")?["type"] as? String == "STRING", "01234 is not a JSON number")
            #expect(JSONLine.value(try #require(records["t1"]), "due") == "1704101400000")
            #expect(JSONLine.value(try #require(records["t2"]), "due") == "1704101400250")
            #expect(JSONLine.value(try #require(records["t3"]), "due") == "1704101400000")

            let bad = try cli.file("bad.csv", """
                recordName,priority:INT64,due:TIMESTAMP
                b1,high,1704101400000
                b2,1,2024-01-01T00

                """)
            let rejects = store.path("csv.rejects")
            let rejected = try await cli.run(["import", bad, "--type", "Task", "--reject-file", rejects])
            #expect(rejected.exitCode == 1, "\(rejected)")
            let messages = try RejectLine.read(rejects).map(\.error)
            #expect(messages.count == 2)
            #expect(messages.first?.contains("INT64 cell 'high' is not a whole number") == true, "\(messages)")
            #expect(messages.last?.contains("TIMESTAMP cell '2024-01-01T00' is neither milliseconds since 1970 nor an ISO 8601 date-time") == true, "\(messages)")
            #expect(!messages.joined().contains("JSON"), "a CSV cell's message does not name JSON: \(messages)")
        }
    }

    @Test("a reject file, an input or a names file that cannot be opened is refused saying why (the system's reason), and nothing is imported", arguments: TestEngine.all)
    func unopenableFilesSayWhy(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let input = try cli.file("tasks.ndjson", #"{"recordName":"t1","recordType":"Task"}"# + "\n")
            let noFolder = try await cli.run(["import", input, "--reject-file", store.path("missing-folder/rejects.ndjson")])
            #expect(noFolder.exitCode == 73, "\(noFolder)")
            #expect(noFolder.stderr.contains("cannot create the reject file \(store.path("missing-folder/rejects.ndjson")): No such file or directory"), "\(noFolder)")
            #expect(!cli.storeExists(), "nothing was imported: \(noFolder)")
            let imported = try await cli.run(["import", input])
            #expect(imported.exitCode == 0, "\(imported)")
            let names = store.path("missing-folder/names.txt")
            let noNames = try await cli.run(["delete", "--names-file", names, "--yes"])
            #expect(noNames.exitCode == 66, "\(noNames)")
            #expect(noNames.stderr.contains("cannot read the names file \(names): No such file or directory"), "\(noNames)")
            #expect(try await cli.count("Task") == 1, "nothing was deleted: \(noNames)")
            // Root reads every file, so the refused read is only seen by another user.
            if getuid() != 0 {
                #expect(chmod(input, 0) == 0)
                let unreadable = try await cli.run(["import", input])
                #expect(unreadable.exitCode == 77, "\(unreadable)")
                #expect(unreadable.stderr.contains("cannot read the input file \(input): Permission denied"), "\(unreadable)")
            }
        }
    }

    // MARK: - Modes

    @Test("--reject-file: a file a full disk left ending in half a line gets this run's lines on lines of their own; a file of an update's or a delete's rejects is appended to", arguments: TestEngine.all)
    func rejectFileAfterATornLine(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let bad = try cli.file("bad.ndjson", #"{"recordName":"_x1","recordType":"Note","fields":{}}"# + "\n")
            let torn = #"{"line":200,"column":1,"recordName":"_x0","error":"invalidArguments: recor"#
            let rejects = store.path("rejects.ndjson")
            try torn.write(toFile: rejects, atomically: true, encoding: .utf8)
            let first = try await cli.run(["import", bad, "--reject-file", rejects])
            #expect(first.exitCode == 1, "\(first)")
            let lines = try #require(cli.read(rejects)).split(separator: "\n").map(String.init)
            #expect(lines.count == 2 && lines[0] == torn, "\(lines)")
            let appended = try JSONLine.object(try #require(lines.last))
            #expect(appended["recordName"] as? String == "_x1" && appended["line"] as? Int == 1, "\(appended)")

            let failures = store.path("failures.ndjson")
            try (#"{"recordName":"todo-7","error":"serverRecordChanged: changed"}"# + "\n").write(toFile: failures, atomically: true, encoding: .utf8)
            let second = try await cli.run(["import", bad, "--reject-file", failures])
            #expect(second.exitCode == 1, "\(second)")
            let failureLines = try #require(cli.read(failures))
            #expect(failureLines.split(separator: "\n").count == 2)
        }
    }

    @Test("a folder named as the input is exit 66 before any store is made", arguments: TestEngine.all)
    func folderAsInput(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let result = try await cli.run(["import", store.directory.path])
            #expect(result.exitCode == 66 && result.stderr.contains("is a folder"), "\(result)")
            #expect(!cli.storeExists(), "no store was made for an input that cannot be read")
        }
    }

    @Test("--mode create fails on existing records: exit 1, a reject line for each, nothing changed", arguments: TestEngine.all)
    func createMode(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let path = try cli.file("notes.ndjson", Input.notes(3))
            let first = try await cli.run(["import", path, "--mode", "create"])
            #expect(first.exitCode == 0, "\(first)")
            Summary.expectImport(first, imported: 3)
            let before = try await cli.exported("Note")

            let mixed = try cli.file("mixed.ndjson", Input.note("n2", title: "changed", count: 99) + "\n" + Input.note("n4", title: "new", count: 4) + "\n")
            let rejects = store.path("rejects.ndjson")
            let again = try await cli.run(["import", mixed, "--mode", "create", "--reject-file", rejects])
            #expect(again.exitCode == 1, "\(again)")
            #expect(again.stdout.isEmpty)
            Summary.expectImport(again, imported: 1, failed: 1)
            let lines = try RejectLine.read(rejects)
            #expect(lines.count == 1)
            #expect(lines.first?.line == 1)
            #expect(lines.first?.recordName == "n2")
            #expect(lines.first?.error.contains("exists") == true, "\(lines.first?.error ?? "")")

            let after = try await cli.exported("Note")
            #expect(JSONLine.value(try #require(after["n2"]), "title") == "title 2")
            #expect(after["n2"]?["recordChangeTag"] as? String == before["n2"]?["recordChangeTag"] as? String)
            #expect(after.count == 4)
        }
    }

    @Test("--mode update changes only the given fields and checks recordChangeTag", arguments: TestEngine.all)
    func updateMode(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            _ = try await cli.run(["import", try cli.file("notes.ndjson", Input.notes(3))])
            let exported = try await cli.exported("Note")
            let tag = try #require(exported["n1"]?["recordChangeTag"] as? String)

            // Only `title`, with the current tag: updated; `count` stays.
            let edit = #"{"recordName":"n1","recordType":"Note","recordChangeTag":"\#(tag)","fields":{"title":{"value":"edited","type":"STRING"}}}"#
            let editPath = try cli.file("edit.ndjson", edit + "\n")
            let updated = try await cli.run(["import", editPath, "--mode", "update"])
            #expect(updated.exitCode == 0, "\(updated)")
            Summary.expectImport(updated, imported: 0, updated: 1)
            let n1 = try #require(try await cli.exported("Note")["n1"])
            #expect(JSONLine.value(n1, "title") == "edited")
            #expect(JSONLine.value(n1, "count") == "1", "update keeps the fields it was not given")
            #expect(n1["recordChangeTag"] as? String != tag, "a saved record gets a new change tag")

            // The same line again: its tag is stale now.
            let rejects = store.path("stale.rejects")
            let stale = try await cli.run(["import", editPath, "--mode", "update", "--reject-file", rejects])
            #expect(stale.exitCode == 1, "\(stale)")
            Summary.expectImport(stale, imported: 0, failed: 1)
            let staleLines = try RejectLine.read(rejects)
            #expect(staleLines.map(\.recordName) == ["n1"])
            #expect(staleLines.first?.line == 1)
            #expect(staleLines.first.map { $0.error.contains("stale") || $0.error.contains("changed") } == true, "\(staleLines)")

            // No tag, or no such record: rejected with the reason.
            let untagged = Input.note("n2", title: "x", count: 0)
            let missing = #"{"recordName":"nope","recordType":"Note","recordChangeTag":"abc","fields":{"title":{"value":"x","type":"STRING"}}}"#
            let otherRejects = store.path("other.rejects")
            let others = try await cli.run(["import", try cli.file("others.ndjson", untagged + "\n" + missing + "\n"), "--mode", "update", "--reject-file", otherRejects])
            #expect(others.exitCode == 1, "\(others)")
            Summary.expectImport(others, imported: 0, failed: 2)
            let otherLines = try RejectLine.read(otherRejects).sorted { $0.line < $1.line }
            #expect(otherLines.map(\.line) == [1, 2])
            #expect(otherLines.first?.error.contains("recordChangeTag") == true, "\(otherLines)")
            #expect(otherLines.last?.error.contains("does not exist") == true, "\(otherLines)")
            #expect(try await cli.count("Note") == 3)
        }
    }

    @Test("--mode replace removes unspecified fields and checks the tag; forceReplace without a tag", arguments: TestEngine.all)
    func replaceModes(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            _ = try await cli.run(["import", try cli.file("notes.ndjson", Input.notes(3))])
            let tag = try #require(try await cli.exported("Note")["n2"]?["recordChangeTag"] as? String)

            let replace = #"{"recordName":"n2","recordType":"Note","recordChangeTag":"\#(tag)","fields":{"title":{"value":"only title","type":"STRING"}}}"#
            let replaced = try await cli.run(["import", try cli.file("replace.ndjson", replace + "\n"), "--mode", "replace"])
            #expect(replaced.exitCode == 0, "\(replaced)")
            Summary.expectImport(replaced, imported: 0, updated: 1)
            let n2 = try #require(try await cli.exported("Note")["n2"])
            #expect(JSONLine.value(n2, "title") == "only title")
            #expect(JSONLine.field(n2, "count") == nil, "replace removes the fields it was not given")

            let stale = try await cli.run(["import", try cli.file("replace-again.ndjson", replace + "\n"), "--mode", "replace"])
            #expect(stale.exitCode == 1, "\(stale)")
            Summary.expectImport(stale, imported: 0, failed: 1)

            let force = #"{"recordName":"n3","recordType":"Note","fields":{"count":{"value":30,"type":"INT64"}}}"#
            let forced = try await cli.run(["import", try cli.file("force.ndjson", force + "\n"), "--mode", "forceReplace"])
            #expect(forced.exitCode == 0, "\(forced)")
            Summary.expectImport(forced, imported: 0, updated: 1)
            let n3 = try #require(try await cli.exported("Note")["n3"])
            #expect(JSONLine.field(n3, "title") == nil, "forceReplace removes the fields it was not given")
            #expect(JSONLine.value(n3, "count") == "30")

            // forceReplace and forceUpdate create missing records.
            let fresh = try await cli.run(["import", "--mode", "forceReplace"], stdin: Input.note("n9", title: "nine", count: 9) + "\n")
            Summary.expectImport(fresh, imported: 1)
            let bad = try await cli.run(["import", "--mode", "upsert"], stdin: Input.notes(1))
            #expect(bad.exitCode == 64, "\(bad)")
            #expect(bad.stderr.contains("--mode"), "\(bad)")
        }
    }

    @Test("the default forceUpdate makes re-running the same file a no-op (unchanged)", arguments: TestEngine.all)
    func rerunIsNoOp(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let path = try cli.file("notes.ndjson", Input.notes(5))
            let first = try await cli.run(["import", path])
            Summary.expectImport(first, imported: 5)
            let before = try await cli.exported("Note")

            let second = try await cli.run(["import", path])
            #expect(second.exitCode == 0, "\(second)")
            Summary.expectImport(second, imported: 0, unchanged: 5)
            let third = try await cli.run(["import", path, "--mode", "forceUpdate"])
            Summary.expectImport(third, imported: 0, unchanged: 5)
            let after = try await cli.exported("Note")
            let retagged = before.keys.filter { after[$0]?["recordChangeTag"] as? String != before[$0]?["recordChangeTag"] as? String }.sorted()
            #expect(retagged.isEmpty, "a no-op re-run keeps each record's change tag; these got new ones: \(retagged)")

            // An export re-imported (system fields and all) is also unchanged.
            let export = try await cli.run(["export", "--type", "Note", "--quiet"])
            let restored = try await cli.run(["import", try cli.file("export.ndjson", export.stdout)])
            #expect(restored.exitCode == 0, "\(restored)")
            Summary.expectImport(restored, imported: 0, unchanged: 5)

            // A changed value is an update.
            let changed = try await cli.run(["import"], stdin: Input.note("n1", title: "new title", count: 1) + "\n")
            Summary.expectImport(changed, imported: 0, updated: 1)
        }
    }

    // MARK: - Batches, atomic, dry run

    @Test("--batch-size does not change what --max-errors commits: every record before the stopping reject, none after", arguments: TestEngine.all)
    func batchSize(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let input = Input.notes(4) + "{not json\n" + Input.note("n6", title: "six", count: 6) + "\n"
            let path = try cli.file("input.ndjson", input)

            for size in ["1", "2", "3", "400"] {
                let target = try await cli.newStore("size-\(size)")
                let result = try await cli.run(["import", path, "--batch-size", size, "--max-errors", "0"], environment: ["STRATUS_STORE": target])
                #expect(result.exitCode == 65, "\(result)")
                #expect(result.stderr.contains("--max-errors"), "\(result)")
                #expect(Set(try await cli.exported("Note", extra: ["--store", target]).keys) == ["n1", "n2", "n3", "n4"], "--batch-size \(size)")
            }

            let whole = try await cli.run(["import", try cli.file("good.ndjson", Input.notes(7)), "--batch-size", "3"])
            #expect(whole.exitCode == 0, "\(whole)")
            Summary.expectImport(whole, imported: 7)

            for bad in ["0", "-1", "x"] {
                let usage = try await cli.run(["import", path, "--batch-size", bad])
                #expect(usage.exitCode == 64, "\(usage)")
                #expect(usage.stderr.contains("--batch-size"), "\(usage)")
            }
        }
    }

    @Test("--atomic: one record the store rejects means nothing is written", arguments: TestEngine.all)
    func atomicStoreRejection(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            // A custom zone: the default zone has no atomic capability, as CloudKit's.
            #expect(try await cli.run(["zones", "create", "Atomic"]).exitCode == 0)
            _ = try await cli.run(["import", "--zone", "Atomic"], stdin: Input.note("n3", title: "exists", count: 3) + "\n")
            let rejects = store.path("atomic.rejects")
            let result = try await cli.run(["import", try cli.file("notes.ndjson", Input.notes(5)), "--zone", "Atomic", "--mode", "create", "--atomic", "--reject-file", rejects])
            #expect(result.exitCode != 0, "\(result)")
            #expect(result.stdout.isEmpty)
            #expect(try await cli.count("Note", extra: ["--zone", "Atomic"]) == 1, "an atomic import writes all or nothing")
            let lines = try RejectLine.read(rejects)
            #expect(lines.contains { $0.recordName == "n3" && $0.line == 3 && $0.error.contains("exists") }, "\(lines)")
        }
    }

    @Test("--atomic: a save after a deletion in its zone is rejected (the store writes saves first, and the deletion's cascade could take it): nothing is written; deletions last are applied", arguments: TestEngine.all)
    func atomicSaveAfterDeletion(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            #expect(try await cli.run(["zones", "create", "Z"]).exitCode == 0)
            let seed = #"{"recordName":"p","recordType":"T","fields":{}}"# + "\n"
                + #"{"recordName":"c","recordType":"T","fields":{"up":{"value":{"recordName":"p","action":"DELETE_SELF"},"type":"REFERENCE"}}}"# + "\n"
            #expect(try await cli.run(["import", "--zone", "Z", "--quiet"], stdin: seed).exitCode == 0)
            let deleteThenSave = #"{"recordName":"p","deleted":true}"# + "\n" + #"{"recordName":"c","recordType":"T","fields":{"title":{"value":"kept?","type":"STRING"}}}"# + "\n"
            let refused = try await cli.run(["import", try cli.file("in.ndjson", deleteThenSave), "--zone", "Z", "--atomic"])
            #expect(refused.exitCode == 65 && refused.stderr.contains("is saved after a deletion in its zone (line 1)"), "\(refused)")
            #expect(try await cli.count("T", extra: ["--zone", "Z"]) == 2, "nothing written")
            // Without --atomic the lines apply in input order: p goes, c is saved again.
            let ordered = try await cli.run(["import", try cli.file("in2.ndjson", deleteThenSave), "--zone", "Z"])
            let afterOrdered = try await cli.exported("T", extra: ["--zone", "Z"]).keys.sorted()
            #expect(ordered.exitCode == 0 && afterOrdered == ["c"], "\(ordered)")
            // Deletions after the saves keep their order in an atomic import.
            let saveThenDelete = #"{"recordName":"q","recordType":"T","fields":{}}"# + "\n" + #"{"recordName":"c","deleted":true}"# + "\n"
            let atomic = try await cli.run(["import", try cli.file("in3.ndjson", saveThenDelete), "--zone", "Z", "--atomic"])
            let afterAtomic = try await cli.exported("T", extra: ["--zone", "Z"]).keys.sorted()
            #expect(atomic.exitCode == 0 && afterAtomic == ["q"], "\(atomic)")
        }
    }

    @Test("--atomic: one malformed input line means nothing is written; --atomic or --dry-run with --checkpoint is refused (64)", arguments: TestEngine.all)
    func atomicBadInput(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            #expect(try await cli.run(["zones", "create", "Atomic"]).exitCode == 0)
            let input = Input.notes(2) + #"{"recordName":"bad","recordType":"Note","fields":{"count":{"value":"many","type":"INT64"}}}"# + "\n" + Input.notes(2, prefix: "m")
            let rejects = store.path("atomic.rejects")
            let result = try await cli.run(["import", try cli.file("input.ndjson", input), "--zone", "Atomic", "--atomic", "--reject-file", rejects])
            #expect(result.exitCode != 0, "\(result)")
            #expect(try await cli.count("Note", extra: ["--zone", "Atomic"]) == 0, "an atomic import with a bad record writes nothing: \(result)")
            let lines = try RejectLine.read(rejects)
            #expect(lines.contains { $0.line == 3 && $0.error.contains("count") }, "\(lines)")

            let usage = try await cli.run(["import", try cli.file("ok.ndjson", Input.notes(1)), "--atomic", "--checkpoint", store.path("cp")])
            #expect(usage.exitCode == 64, "\(usage)")

            // A dry run writes nothing, so it neither writes nor finishes a checkpoint.
            let dry = try await cli.run(["import", try cli.file("dry.ndjson", Input.notes(3)), "--dry-run", "--checkpoint", store.path("dry.cp")])
            #expect(dry.exitCode == 64, "\(dry)")
            #expect(dry.stderrLines.first?.contains("--dry-run and --checkpoint do not go together") == true, "one line says why: \(dry)")
            #expect(!cli.exists(store.path("dry.cp")) && !cli.exists(store.path("dry.cp.lock")), "no checkpoint is written")
        }
    }

    @Test("--atomic into a zone without the atomic capability is refused with exit 64 saying why, and nothing is written", arguments: TestEngine.all)
    func atomicIntoNonAtomicZone(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            #expect(try await cli.run(["zones", "create", "Loose", "--no-atomic"]).exitCode == 0)
            // 1,000 records, one of which the store rejects: nothing may be written.
            #expect(try await cli.run(["import", "--zone", "Loose"], stdin: Input.note("n500", title: "old", count: 0) + "\n").exitCode == 0)
            let input = try cli.file("notes.ndjson", Input.notes(1_000))
            let refused = try await cli.run(["import", input, "--zone", "Loose", "--atomic", "--mode", "create"])
            #expect(refused.exitCode == 64, "\(refused)")
            #expect(refused.stderr.contains("atomic capability"), "\(refused)")
            #expect(try await cli.count("Note", extra: ["--zone", "Loose"]) == 1)

            // Records that name the zone themselves are refused the same way.
            let named = (1...3).map {
                #"{"recordName":"z\#($0)","recordType":"Note","fields":{},"zoneID":{"zoneName":"Loose"}}"#
            }.joined(separator: "\n") + "\n"
            let viaRecords = try await cli.run(["import", "--atomic"], stdin: named)
            #expect(viaRecords.exitCode == 64, "\(viaRecords)")
            #expect(viaRecords.stderr.contains("atomic capability"), "\(viaRecords)")
            #expect(try await cli.count("Note", extra: ["--zone", "Loose"]) == 1)

            // The default zone has no atomic capability either, as CloudKit's.
            let inDefaultZone = try await cli.run(["import", "--atomic", "--mode", "create"], stdin: Input.notes(3))
            #expect(inDefaultZone.exitCode == 64, "\(inDefaultZone)")
            #expect(inDefaultZone.stderr.contains("atomic capability"), "\(inDefaultZone)")
            #expect(try await cli.count("Note") == 0)
        }
    }

    @Test("an atomic import with --create-zones that writes nothing (a record rejected) makes no zone either; one that writes makes it (found by a data tester)", arguments: TestEngine.all)
    func atomicImportMakesZonesOnlyWithItsWrite(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            try await cli.createStore()
            let good = Input.note("a1", title: "ok", count: 1)
            let bad = #"{"recordName":"_bad","recordType":"Note","fields":{}}"#
            let refused = try await cli.run(["import", "--zone", "NewZ", "--atomic", "--create-zones"], stdin: good + "\n" + bad + "\n")
            #expect(refused.exitCode == 65 && !refused.stderr.contains("created zone"), "\(refused)")
            let zones = try await cli.run(["zones", "list"])
            #expect(!zones.stdout.contains("NewZ"), "\(zones)")
            let written = try await cli.run(["import", "--zone", "NewZ", "--atomic", "--create-zones"], stdin: good + "\n")
            #expect(written.exitCode == 0 && written.stderr.contains("created zone NewZ"), "\(written)")
            #expect(try await cli.count("Note", extra: ["--zone", "NewZ"]) == 1)
        }
    }

    @Test("--atomic into the default zone is refused before the store is opened: a refused run creates no store (--zone _defaultZone: 64; records without a zone, into a store that does not exist, without --create-zones: 66)", arguments: TestEngine.all)
    func atomicDefaultZoneCreatesNoStore(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let input = try cli.file("notes.ndjson", Input.notes(2))
            let named = try await cli.run(["import", input, "--atomic", "--zone", "_defaultZone"])
            #expect(named.exitCode == 64 && named.stderr.contains("atomic capability"), "\(named)")
            let refused = try await cli.run(["import", input, "--atomic"])
            #expect(refused.exitCode == 66 && refused.stderr.contains("atomic capability"), "\(refused)")
            #expect(!refused.stderr.contains("created a new store"), "\(refused)")
            #expect(!cli.storeExists(), "nothing was made for a run that was refused")
        }
    }

    @Test("a mistake the input file's first line shows (a CSV header lacking a column --types names, or no recordName column; --type or --types for JSON) is refused before a store is made; from a pipe, before anything is written (found by a data tester: --types was ignored for JSON, typing the field wrongly)", arguments: TestEngine.all)
    func firstLineMistakesMakeNoStore(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let csv = try cli.file("prices.csv", "recordName,price\np1,3\n")
            let misspelt = try await cli.run(["import", csv, "--type", "Product", "--types", "prcie:DOUBLE"])
            #expect(misspelt.exitCode == 65 && misspelt.stderr.contains("a column type is given for 'prcie'"), "\(misspelt)")
            let noName = try await cli.run(["import", try cli.file("names.csv", "name,price\np1,3\n"), "--format", "csv", "--type", "Product"])
            #expect(noName.exitCode == 65 && noName.stderr.contains("no recordName column"), "\(noName)")
            let json = try cli.file("q.ndjson", #"{"recordType":"Q","recordName":"q","fields":{"n":{"value":"5"}}}"# + "\n")
            for options in [["--types", "n:INT64"], ["--type", "Q"]] {
                let refused = try await cli.run(["import", json] + options)
                #expect(refused.exitCode == 64 && refused.stderr.contains("\(options[0]) describes CSV input, and the input is NDJSON"), "\(refused)")
            }
            #expect(!cli.storeExists(), "nothing was made for runs that were refused")
            let piped = try await cli.run(["import", "-", "--types", "n:INT64"], stdin: try #require(cli.read(json)))
            #expect(piped.exitCode == 64 && piped.stderr.contains("--types describes CSV input"), "\(piped)")
            #expect(try await cli.count("Q") == 0)
            Summary.expectImport(try await cli.run(["import", csv, "--type", "Product", "--types", "price:DOUBLE"]), imported: 1)
        }
    }

    @Test("--format envelope on NDJSON, a JSON array or a record object is refused before anything is written (found by a data tester: the records were written, then the run failed)", arguments: TestEngine.all)
    func envelopeFormatOnOtherInput(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            try await cli.createStore()
            let record = #"{"recordName":"e1","recordType":"T","fields":{}}"#
            for (name, input, found) in [("lines.ndjson", record + "\n" + record.replacingOccurrences(of: "e1", with: "e2") + "\n", "a record object"),
                                         ("array.json", "[" + record + "]", "a JSON array of records")] {
                let refused = try await cli.run(["import", try cli.file(name, input), "--format", "envelope"])
                #expect(refused.exitCode == 65 && refused.stderr.contains("given as an envelope") && refused.stderr.contains("starts with \(found)"), "\(refused)")
            }
            #expect(try await cli.count("T") == 0, "nothing was written")
        }
    }

    @Test("--dry-run reads and validates everything, reports counts and writes nothing", arguments: TestEngine.all)
    func dryRun(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let missing = try await cli.run(["import", try cli.file("one.ndjson", Input.notes(1)), "--dry-run"])
            #expect(missing.exitCode == 66 && !cli.storeExists(), "a dry run writes nothing, so it creates no store: \(missing)")
            #expect(missing.stderr.contains("a dry run only reads a store") && !missing.stderr.contains("only import,"), "\(missing)")
            try await cli.createStore()
            let input = Input.notes(3) + "{\"recordName\":\"x\"\n" + Input.note("_system", title: "reserved", count: 0) + "\n"
            let path = try cli.file("input.ndjson", input)
            let rejects = store.path("dry.rejects")
            let result = try await cli.run(["import", path, "--dry-run", "--reject-file", rejects])
            #expect(result.stdout.isEmpty)
            #expect(result.exitCode == 1, "rejected lines make the exit code 1, also in a dry run: \(result)")
            let last = result.stderrLines.last ?? ""
            #expect(last.contains("3 valid") && last.contains("2 rejected") && last.contains("nothing written"), "\(result)")
            #expect(try RejectLine.read(rejects).map(\.line).sorted() == [4, 5])
            #expect(try await cli.count("Note") == 0)

            let clean = try await cli.run(["import", try cli.file("clean.ndjson", Input.notes(4)), "--dry-run"])
            #expect(clean.exitCode == 0, "\(clean)")
            #expect(clean.stderrLines.last?.contains("4 valid") == true, "\(clean)")
            #expect(try await cli.count("Note") == 0)
        }
    }

    // MARK: - Bad input, reject files, error limits

    @Test("bad lines: exit 1, each in the reject file with its line number and reason; good ones imported", arguments: TestEngine.all)
    func rejectFile(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let lines = [
                Input.note("ok1", title: "one", count: 1),
                "{\"recordName\": \"broken\", ",  // not JSON
                Input.note("ok3", title: "three", count: 3),
                #"{"recordName":"wrongType","recordType":"Note","fields":{"count":{"value":"abc","type":"INT64"}}}"#,
                #"{"recordName":"noType","fields":{}}"#,
                #"{"recordName":"dup","recordType":"Note","recordType":"Note","fields":{}}"#,
                #"{"recordName":"badType","recordType":"Note","fields":{"x":{"value":1,"type":"NUMBER"}}}"#,
                Input.note("ok8", title: "eight", count: 8),
            ]
            let path = try cli.file("input.ndjson", lines.joined(separator: "\n") + "\n")
            let rejects = store.path("rejects.ndjson")
            let result = try await cli.run(["import", path, "--reject-file", rejects])
            #expect(result.exitCode == 1, "\(result)")
            #expect(result.stdout.isEmpty)
            Summary.expectImport(result, imported: 3, failed: 5)
            let rejected = try RejectLine.read(rejects).sorted { $0.line < $1.line }
            #expect(rejected.map(\.line) == [2, 4, 5, 6, 7], "\(rejected)")
            for line in rejected {
                #expect(!line.error.isEmpty && line.column >= 1, "\(line)")
            }
            let byLine = Dictionary(rejected.map { ($0.line, $0) }, uniquingKeysWith: { a, _ in a })
            #expect(byLine[4]?.recordName == "wrongType")
            #expect(byLine[4]?.error.contains("count") == true, "names the field: \(byLine[4]?.error ?? "")")
            #expect(byLine[5]?.error.contains("recordType") == true, "\(byLine[5]?.error ?? "")")
            #expect(byLine[6].map { $0.error.contains("recordType") && ($0.error.contains("twice") || $0.error.lowercased().contains("duplicate")) } == true, "\(byLine[6]?.error ?? "")")
            #expect(byLine[7]?.error.contains("NUMBER") == true, "\(byLine[7]?.error ?? "")")
            #expect(Set(try await cli.exported("Note").keys) == ["ok1", "ok3", "ok8"])

            // The reject file is appended to.
            _ = try await cli.run(["import", path, "--reject-file", rejects])
            #expect(try RejectLine.read(rejects).count == 10)
        }
    }

    @Test("--max-errors N stops with 65 after more than N rejects; N or fewer finish with 1", arguments: TestEngine.all)
    func maxErrors(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let input = ["oops", Input.note("a", title: "a", count: 1), "{\"x\"", "[1]", Input.note("b", title: "b", count: 2)].joined(separator: "\n") + "\n"
            let path = try cli.file("input.ndjson", input)
            let stopped = try await cli.run(["import", path, "--max-errors", "2"])
            #expect(stopped.exitCode == 65, "\(stopped)")
            #expect(stopped.stderr.contains("stratus: stopped at the rejected record that made 3 (--max-errors 2)"), "\(stopped)")
            #expect(stopped.stderrLines.last?.hasPrefix("stopped by an error: imported 1") == true, "the summary is the last line and says the run stopped: \(stopped)")
            #expect(stopped.stdout.isEmpty)

            #expect(Set(try await cli.exported("Note").keys) == ["a"], "the record before the third reject is imported, the one after it is not")

            let enough = try await cli.run(["import", path, "--max-errors", "3"])
            #expect(enough.exitCode == 1, "\(enough)")
            Summary.expectImport(enough, imported: 1, unchanged: 1, failed: 3)

            let usage = try await cli.run(["import", path, "--max-errors", "many"])
            #expect(usage.exitCode == 64, "\(usage)")
        }
    }

    @Test("several failing lines with the same record name are each rejected, reported and counted once", arguments: TestEngine.all)
    func sameNameRejectedLines(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            #expect(try await cli.run(["import"], stdin: Input.note("x", title: "first", count: 1) + "\n").exitCode == 0)
            let input = (1...3).map { Input.note("x", title: "again \($0)", count: $0) }.joined(separator: "\n") + "\n" + Input.note("y", title: "new", count: 4) + "\n"
            let rejects = store.path("same-name.rejects")
            let result = try await cli.run(["import", try cli.file("same.ndjson", input), "--mode", "create", "--reject-file", rejects])
            #expect(result.exitCode == 1, "\(result)")
            Summary.expectImport(result, imported: 1, failed: 3)
            let lines = try RejectLine.read(rejects)
            #expect(lines.map(\.line) == [1, 2, 3], "\(lines)")
            #expect(lines.allSatisfy { $0.recordName == "x" && $0.error.contains("exists") }, "\(lines)")
        }
    }

    @Test("--max-errors N stops at the (N+1)th reject also when the store rejects them, whatever the batch size", arguments: TestEngine.all)
    func maxErrorsAtWriteTime(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            // Every tenth record exists already, so create mode rejects n10, n20, …
            let existing = stride(from: 10, through: 1_000, by: 10).map { Input.note("n\($0)", title: "old", count: $0) + "\n" }.joined()
            let input = try cli.file("all.ndjson", Input.notes(1_000))
            for size in ["100", "2000"] {
                let target = try await cli.newStore("limit-\(size)")
                #expect(try await cli.run(["import", "--store", target], stdin: existing).exitCode == 0)
                let rejects = store.path("limit-\(size).rejects")
                let result = try await cli.run(["import", input, "--store", target, "--mode", "create", "--max-errors", "5", "--batch-size", size, "--reject-file", rejects])
                #expect(result.exitCode == 65, "\(result)")
                #expect(result.stderr.contains("--max-errors 5"), "\(result)")
                #expect(try RejectLine.read(rejects).map(\.line) == [10, 20, 30, 40, 50, 60], "--batch-size \(size)")
                let names = Set(try await cli.exported("Note", extra: ["--store", target]).keys)
                #expect(names.contains("n59") && !names.contains("n61"), "--batch-size \(size): written up to the sixth reject and nothing after")
            }
        }
    }

    @Test("input that cannot be read as records at all: exit 65 with the position on stderr", arguments: TestEngine.all)
    func unreadableInput(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let brokenArray = try cli.file("broken.json", "[" + Input.note("a", title: "a", count: 1) + " " + Input.note("b", title: "b", count: 2) + "]\n")
            let result = try await cli.run(["import", brokenArray, "--format", "json"])
            #expect(result.exitCode == 65, "a JSON array that cannot be resynchronized is bad input data (65): \(result)")
            #expect(result.stderr.contains("line 1"), "\(result)")
            #expect(result.stdout.isEmpty)

            let noNameColumn = try cli.file("noname.csv", "title,count\nx,1\n")
            let csv = try await cli.run(["import", noNameColumn, "--type", "Note"])
            #expect(csv.exitCode == 65, "a CSV without a recordName column is bad input data (65): \(csv)")
            #expect(csv.stderr.contains("recordName"), "\(csv)")

            let envelope = try cli.file("envelope.json", #"{"records":[{"recordName":"a","recordType":"Note","fields":{}} {"recordName":"b"}]}"#)
            let env = try await cli.run(["import", envelope, "--format", "envelope"])
            #expect(env.exitCode == 65, "\(env)")
        }
    }

    @Test("a zones list or a database changes answer is not a file of records: exit 65 saying so, not 'imported 0'", arguments: TestEngine.all)
    func inputWithoutRecords(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            #expect(try await cli.run(["zones", "create", "Work", "Home"]).exitCode == 0)
            let zones = try await cli.run(["zones", "list"])
            #expect(zones.exitCode == 0 && zones.stdoutLines.count == 3, "\(zones)")
            let databaseChanges = #"{"zones":[{"zoneID":{"zoneName":"Work","ownerRecordName":"_abc"}}],"syncToken":"AQID","moreComing":false}"#
            for input in [zones.stdout, databaseChanges] {
                let result = try await cli.run(["import"], stdin: input)
                #expect(result.exitCode == 65, "\(result)")
                #expect(result.stderr.contains("holds no records"), "\(result)")
            }
            let emptyAnswer = try await cli.run(["import"], stdin: #"{"records":[]}"#)
            #expect(emptyAnswer.exitCode == 0, "an empty records/query answer is an empty import: \(emptyAnswer)")
            Summary.expectImport(emptyAnswer)
        }
    }

    @Test("a missing input file is exit 66; usage mistakes are exit 64 with the usage on stderr", arguments: TestEngine.all)
    func missingInputAndUsage(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let missing = store.path("nowhere.ndjson")
            let result = try await cli.run(["import", missing])
            #expect(result.exitCode == 66, "\(result)")
            #expect(result.stderr.contains(missing), "\(result)")
            #expect(result.stdout.isEmpty)

            let path = try cli.file("ok.ndjson", Input.notes(1))
            for arguments in [
                ["import", path, "--format", "xml"],
                ["import", path, "--bogus"],
                ["import", path, path],
                ["import", path, "--batch-size"],
                ["import", "--checkpoint", store.path("cp")],
                ["import", path, "--progress", "loud"],
                ["import", path, "--database", "secret"],
            ] {
                let usage = try await cli.run(Array(arguments), stdin: Input.notes(1))
                #expect(usage.exitCode == 64, "\(usage)")
                #expect(usage.stdout.isEmpty, "usage errors go to stderr: \(usage)")
                #expect(usage.stderrLines.count == 2 && usage.stderr.contains("Run 'stratus import --help' for usage."), "one line and a pointer to the help: \(usage)")
            }
            #expect(!cli.storeExists(), "a usage error creates no store")
        }
    }

    @Test("a reject file that is the input (by name, through a link, or as stdin) is refused with exit 64 before anything is read", arguments: TestEngine.all)
    func rejectFileIsTheInput(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let input = Input.notes(2) + "{broken\n"
            let path = try cli.file("in.ndjson", input)
            let link = store.path("link.ndjson")
            #expect(symlink(path, link) == 0)
            for arguments in [["import", path, "--reject-file", path], ["import", path, "--reject-file", link], ["import", link, "--reject-file", path]] {
                let result = try await cli.run(arguments)
                #expect(result.exitCode == 64, "\(result)")
                #expect(result.stderr.contains("is the input"), "\(result)")
            }
            let piped = try await cli.shell(#"exec "$STRATUS" import --reject-file in.ndjson < in.ndjson"#)
            #expect(piped.exitCode == 64, "\(piped)")
            #expect(cli.read(path) == input, "the input is untouched")
            #expect(!cli.storeExists())
        }
    }

    @Test("an unwritable reject file is exit 73 before anything is imported", arguments: TestEngine.all)
    func unwritableRejectFile(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let result = try await cli.run(["import", try cli.file("in.ndjson", Input.notes(2)), "--reject-file", store.path("no/such/dir/rejects")])
            #expect(result.exitCode == 73, "\(result)")
            #expect(!cli.storeExists(), "nothing imported, not even a store created")
        }
    }

    // MARK: - Progress and summary

    @Test("--quiet prints nothing on stderr on success; --progress json prints JSON lines", arguments: TestEngine.all)
    func quietAndJSONProgress(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            try await cli.createStore()
            let quiet = try await cli.run(["import", try cli.file("a.ndjson", Input.notes(3)), "--quiet"])
            #expect(quiet.exitCode == 0, "\(quiet)")
            #expect(quiet.stderr.isEmpty, "\(quiet)")
            #expect(quiet.stdout.isEmpty)

            let json = try await cli.run(["import", try cli.file("b.ndjson", Input.notes(4, prefix: "b")), "--progress", "json"])
            #expect(json.exitCode == 0, "\(json)")
            #expect(json.stdout.isEmpty)
            let events = try JSONLine.objects(json.stderr)
            #expect(!events.isEmpty, "\(json)")
            let summary = try #require(events.last)
            #expect(summary["event"] as? String == "summary", "\(json)")
            #expect(summary["imported"] as? Int == 4)
            #expect(summary["failed"] as? Int == 0)
            #expect(summary["updated"] as? Int == 0)
            #expect(summary["unchanged"] as? Int == 0)
            #expect(summary["elapsedSeconds"] is NSNumber)
            #expect(events.dropLast().allSatisfy { $0["event"] as? String == "progress" })

            // none drops the progress lines, not the summary (only --quiet drops that).
            let none = try await cli.run(["import", try cli.file("c.ndjson", Input.notes(2, prefix: "c")), "--progress", "none"])
            #expect(none.exitCode == 0, "\(none)")
            #expect(none.stderrLines.count == 1, "\(none)")
            Summary.expectImport(none, imported: 2)
        }
    }

    @Test("STRATUS_STORE and --store pick the store; --zone, --database and --user are honoured", arguments: TestEngine.all)
    func storeOptions(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let other = try await cli.newStore("other")
            let viaOption = try await cli.run(["import", "--store", other, "--database", "private", "--user", "alice"], stdin: Input.notes(2))
            #expect(viaOption.exitCode == 0, "\(viaOption)")
            #expect(cli.storeExists(other))
            #expect(!cli.storeExists(), "the STRATUS_STORE store is untouched")
            #expect(try await cli.count("Note", extra: ["--store", other]) == 0, "private records are not in the public database")
            #expect(try await cli.count("Note", extra: ["--store", other, "--database", "private", "--user", "alice"]) == 2)
            #expect(try await cli.count("Note", extra: ["--store", other, "--database", "private", "--user", "bob"]) == 0)

            let zone = try await cli.run(["zones", "create", "Work"])
            #expect(zone.exitCode == 0, "\(zone)")
            let zoned = try await cli.run(["import", "--zone", "Work"], stdin: Input.notes(3, prefix: "w"))
            #expect(zoned.exitCode == 0, "\(zoned)")
            #expect(try await cli.count("Note", extra: ["--zone", "Work"]) == 3)
            #expect(try await cli.count("Note") == 0)
            let exported = try await cli.exported("Note", extra: ["--zone", "Work"])
            #expect((exported["w1"]?["zoneID"] as? [String: Any])?["zoneName"] as? String == "Work")

            let rejects = store.path("zone.rejects")
            let noZone = try await cli.run(["import", "--zone", "Nowhere", "--reject-file", rejects], stdin: Input.notes(1))
            // A missing zone stops the import once, naming the command that creates it.
            #expect(noZone.exitCode == 65, "\(noZone)")
            #expect(noZone.stderr.contains("Nowhere") && noZone.stderr.contains("zones create Nowhere"), "\(noZone)")
            // CSV on stdin is told by its whole first line, however the pipe cuts it.
            let slow = try await cli.shell(#"{ printf 'recordType,rec'; sleep 0.3; printf 'ordName,n\nPiped,b,1\nPiped,c,2\n'; } | "$STRATUS" import - --quiet"#)
            #expect(slow.exitCode == 0, "\(slow)")
            #expect(try await cli.count("Piped") == 2)
            // In a private database the command names the user whose zone it is, as given.
            let privateZone = try await cli.run(["import", "--zone", "Mine", "--database", "private", "--user", "o'brien"], stdin: Input.notes(1))
            #expect(privateZone.exitCode == 65 && privateZone.stderr.contains(#"zones create Mine --database private --user 'o'\''brien'"#), "\(privateZone)")
        }
    }
}
