import Foundation
import StratusTestSupport
import Testing

/// `stratus import --checkpoint`: a run killed with SIGKILL, resumed, stopped with SIGTERM,
/// resumed again, ends with exactly the input in the store.
@Suite("stratus import --checkpoint", .serialized, .timeLimit(.minutes(30)))
struct CheckpointCLITests {
    static let recordCount = 200_000

    static func input() -> String {
        var text = ""
        text.reserveCapacity(recordCount * 110)
        for i in 0..<recordCount {
            text += #"{"recordName":"r\#(String(format: "%06d", i))","recordType":"Row","fields":{"n":{"value":\#(i),"type":"INT64"},"s":{"value":"row \#(i)","type":"STRING"}}}"#
            text += "\n"
        }
        return text
    }

    /// The committed item count in a checkpoint file, or nil while there is none.
    static func committedItems(_ path: String) -> Int? {
        guard let data = FileManager.default.contents(atPath: path),
              let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { return nil }
        return object["committedItems"] as? Int
    }

    /// Polls until `condition` holds or the process ended, then sends `signal` at once;
    /// returns whether the condition held. The polling runs on a thread of its own, not on
    /// the cooperative pool, so that other tests running in parallel cannot delay it past
    /// the end of a fast import.
    static func signal(_ running: CLI.Running, _ signal: Int32, when condition: @escaping @Sendable () -> Bool) async throws -> Bool {
        try await ChildProcess.onOwnThread {
            while running.isRunning {
                if condition() {
                    running.signal(signal)
                    return true
                }
                usleep(2_000)
            }
            return condition()
        }
    }

    @Test("--checkpoint refuses an input that cannot be read again from its start (a pipe, a device): exit 64, no checkpoint, nothing written", arguments: TestEngine.all)
    func checkpointNeedsRegularInput(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            try await cli.createStore()
            let pipe = store.path("nightly.fifo")
            #expect(mkfifo(pipe, 0o600) == 0)
            // The writer end keeps the reader's open from waiting; the data never gets read.
            let writer = open(pipe, O_RDWR)
            defer { close(writer) }
            let checkpoint = store.path("pipe.checkpoint")
            for input in [pipe, "/dev/null"] {
                let refused = try await cli.run(["import", input, "--checkpoint", checkpoint])
                #expect(refused.exitCode == 64 && refused.stderr.contains("needs an input that is a regular file"), "\(refused)")
                #expect(!cli.exists(checkpoint))
            }
        }
    }

    @Test("a checkpointed import killed with SIGKILL has written the reject lines of every batch its checkpoint passed; the resumed run adds the rest, none twice", arguments: TestEngine.all)
    func rejectsSurviveKill(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            // Every 100th line has no recordName.
            let path = try await ChildProcess.onOwnThread {
                var text = ""
                for i in 0..<Self.recordCount {
                    text += i % 100 == 7 ? #"{"recordType":"Row","fields":{}}"# : #"{"recordName":"r\#(i)","recordType":"Row","fields":{"n":{"value":\#(i),"type":"INT64"}}}"#
                    text += "\n"
                }
                return try cli.file("mixed.ndjson", text)
            }
            let checkpoint = store.path("mixed.checkpoint"), rejects = store.path("rejects.ndjson")
            let arguments = ["import", path, "--batch-size", "1000", "--checkpoint", checkpoint, "--reject-file", rejects]
            func rejectedLines() throws -> [Int] {
                try (cli.read(rejects) ?? "").split(separator: "\n").map { try #require(JSONLine.object(String($0))["line"] as? Int) }
            }
            let first = try cli.start(arguments)
            let sawCheckpoint = try await Self.signal(first, SIGKILL) { (Self.committedItems(checkpoint) ?? 0) > 0 }
            let killed = await first.wait()
            try #require(sawCheckpoint && killed.signalled, "the import ended before it could be killed: \(killed)")
            let passed = try #require(Self.committedItems(checkpoint))
            let expected = (0..<Self.recordCount).filter { $0 % 100 == 7 }.map { $0 + 1 }
            #expect(Set(try rejectedLines()).isSuperset(of: expected.filter { $0 <= passed }), "the rejects before the checkpoint (\(passed) items) are on disk")

            let resumed = try await cli.run(arguments)
            #expect(resumed.exitCode == 1, "\(resumed)")
            let all = try rejectedLines()
            #expect(all.count == Set(all).count, "no reject line twice")
            #expect(Set(all).isSuperset(of: expected.filter { $0 <= passed || $0 > passed + 1_000 }))
            #expect(try await cli.count("Row") == Self.recordCount - expected.count)
        }
    }

    @Test("a checkpointed import whose first batches were all rejected goes on from its checkpoint, with --max-errors too", arguments: TestEngine.all)
    func rejectedFirstBatchesResume(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            try await cli.createStore()
            let input = try cli.file("in.ndjson", #"{"recordName":"_bad1","recordType":"T","fields":{}}"# + "\n" + #"{"recordName":"_bad2","recordType":"T","fields":{}}"# + "\n"
                + #"{"recordName":"z1","recordType":"T","zoneID":{"zoneName":"Z"},"fields":{}}"# + "\n"
                + #"{"recordName":"ok","recordType":"T","fields":{}}"# + "\n")
            let checkpoint = store.path("rejects.checkpoint")
            let arguments = ["import", input, "--checkpoint", checkpoint, "--batch-size", "2", "--max-errors", "10"]
            let first = try await cli.run(arguments)
            #expect(first.exitCode != 0 && cli.exists(checkpoint), "the missing zone stops it: \(first)")
            #expect(try await cli.run(["zones", "create", "Z"]).exitCode == 0)
            // Going on in a store that is not there is the wrong store: refused, none created.
            let elsewhere = try await cli.newStore("elsewhere")
            let missing = try await cli.run(arguments + ["--store", elsewhere])
            #expect(missing.exitCode == 66 && missing.stderr.contains("says an earlier run imported into it"), "\(missing)")
            #expect(!missing.stderr.contains("created a new store") && !cli.storeExists(elsewhere), "\(missing)")
            let resumed = try await cli.run(arguments)
            // The job rejected two records, in its first run: not a clean import.
            #expect(resumed.exitCode == 1 && resumed.stderr.contains("going on from the checkpoint"), "\(resumed)")
            #expect(resumed.stderrLines.last?.hasPrefix("imported 2, updated 0, unchanged 0, failed 0 (and 2 in earlier runs)") == true, "\(resumed)")
            #expect(try await cli.count("T") == 1)
            #expect(try await cli.count("T", extra: ["--zone", "Z"]) == 1)
        }
    }

    @Test("a resumed import counts the rejects of the runs before it: exit 1 though the last run rejected nothing, and --max-errors is the job's limit; the record after the one that stopped it is imported on resume, in the default zone and in an atomic zone", arguments: TestEngine.all)
    func rejectsCountAcrossRuns(engine: TestEngine) async throws {
        for zone in [nil, "Z"] {
            try await TemporaryStore.with { store in
                let cli = try await CLI(store, engine: engine)
                try await cli.createStore()
                let inZone = zone.map { ["--zone", $0] } ?? []
                if let zone { #expect(try await cli.run(["zones", "create", zone]).exitCode == 0) }
                var text = ""
                for i in 1...30 {
                    // Lines 4 and 9 have no recordName; the rest are good.
                    text += i == 4 || i == 9 ? #"{"recordType":"T","fields":{}}"# : #"{"recordName":"r\#(i)","recordType":"T","fields":{}}"#
                    text += "\n"
                }
                let input = try cli.file("in.ndjson", text)
                let checkpoint = store.path("limit.checkpoint")
                let arguments = ["import", input, "--checkpoint", checkpoint, "--batch-size", "5"] + inZone
                let first = try await cli.run(arguments + ["--max-errors", "1"])
                #expect(first.exitCode == 65 && first.stderr.contains("stopped at the rejected record that made 2 (--max-errors 1)"), "\(first)")
                #expect(try await cli.count("T", extra: inZone) == 7, "lines 1-3, 5-8: everything before line 9")

                // The same command again: the job already passed its limit, so it stops at once.
                let again = try await cli.run(arguments + ["--max-errors", "1"])
                #expect(again.exitCode == 65 && again.stderr.contains("rejected 2 input items, more than --max-errors 1 allows"), "\(again)")
                #expect(try await cli.count("T", extra: inZone) == 7, "nothing more written")
                #expect(cli.exists(checkpoint), "kept, for a run with a larger limit")

                let rest = try await cli.run(arguments + ["--max-errors", "5"])
                #expect(rest.exitCode == 1, "two of the job's lines were rejected: \(rest)")
                #expect(rest.stderrLines.last?.hasPrefix("imported 21, updated 0, unchanged 0, failed 0 (and 2 in earlier runs)") == true, "\(zone ?? "default zone"): \(rest)")
                #expect(try await cli.count("T", extra: inZone) == 28, "line 10, right after the stopping reject, too")
                #expect(!cli.exists(checkpoint), "the job is done")
            }
        }
    }

    @Test("a command's own checkpoint that does not decode (a member edited to another type) is named as damaged, with the member, not as another command's; nothing is written and the file is left", arguments: TestEngine.all)
    func damagedCheckpointOfTheSameCommand(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            try await cli.createStore()
            let input = try cli.file("in.ndjson", #"{"recordName":"a","recordType":"T","fields":{}}"# + "\n")
            let size = try FileManager.default.attributesOfItem(atPath: input)[.size] as? Int ?? 0
            let checkpoint = store.path("damaged.checkpoint")

            for (committed, fault) in [(#""40""#, "member 'committedItems' holds a value of another type"),
                                       ("1.5", "a number in it does not fit its member (a fraction, or out of range)")] {
                let importCheckpoint = #"{"input":"\#(input)","inputSize":\#(size),"committedItems":\#(committed)}"#
                _ = try cli.file("damaged.checkpoint", importCheckpoint)
                let imported = try await cli.run(["import", input, "--checkpoint", checkpoint])
                #expect(imported.exitCode == 64, "\(imported)")
                #expect(imported.stderr.contains("the checkpoint file \(checkpoint) is a checkpoint of `stratus import` that Stratus cannot read (\(fault)): it was edited or damaged; remove it to start over"), "\(imported)")
                #expect(!imported.stderr.contains("not an import checkpoint"), "\(imported)")
                #expect(cli.read(checkpoint) == importCheckpoint)
                #expect(try await cli.count("T") == 0)
            }

            let updateCheckpoint = #"{"command":"update T where TRUEPREDICATE set n=1 in default/public/_defaultZone","job":"pipeline-x","position":5}"#
            _ = try cli.file("damaged.checkpoint", updateCheckpoint)
            let updated = try await cli.run(["update", "--type", "T", "--all", "--set", "n=1", "--checkpoint", checkpoint])
            #expect(updated.exitCode == 64, "\(updated)")
            #expect(updated.stderr.contains("is a checkpoint of `stratus update` that Stratus cannot read (member 'position' holds a value of another type)"), "\(updated)")
            #expect(cli.read(checkpoint) == updateCheckpoint)
        }
    }

    @Test("an input named by a symbolic link (a latest.ndjson a job points at each day's file) is known by the file it names: pointed at another file, of the same size or not, the checkpoint is refused (64); pointed back, the import goes on; a file that grew is named as such", arguments: TestEngine.all)
    func checkpointThroughASymbolicLink(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            try await cli.createStore()
            func lines(_ names: [String]) -> String { names.map { #"{"recordName":"\#($0)","recordType":"T","fields":{}}"# + "\n" }.joined() }
            let first = try cli.file("day1.ndjson", lines(["a", "b", "c", "d"]))
            let latest = store.path("latest.ndjson")
            try FileManager.default.createSymbolicLink(atPath: latest, withDestinationPath: first)
            let size = try #require(try FileManager.default.attributesOfItem(atPath: first)[.size] as? NSNumber).int64Value
            // A run stopped after the first two items, as the file the link names says.
            let checkpoint = store.path("latest.checkpoint")
            let target = URL(fileURLWithPath: first).resolvingSymlinksInPath().path
            _ = try cli.file("latest.checkpoint", #"{"input":"\#(latest) -> \#(target)","inputSize":\#(size),"committedItems":2}"#)

            for (name, records) in [("same-size.ndjson", ["e", "f", "g", "h"]), ("larger.ndjson", ["e", "f", "g", "h", "i", "j"])] {
                let other = try cli.file(name, lines(records))
                try FileManager.default.removeItem(atPath: latest)
                try FileManager.default.createSymbolicLink(atPath: latest, withDestinationPath: other)
                let refused = try await cli.run(["import", latest, "--checkpoint", checkpoint])
                #expect(refused.exitCode == 64 && refused.stderr.contains("belongs to the import of \(latest) -> \(target)"), "\(name): \(refused)")
                #expect(try await cli.count("T") == 0, "\(name): nothing of the other file was skipped or written")
            }
            // The file itself grown: the same name, another size.
            let grown = try cli.file("grown.ndjson", lines(["a", "b"]))
            let grownSize = try #require(try FileManager.default.attributesOfItem(atPath: grown)[.size] as? NSNumber).int64Value
            _ = try cli.file("grown.checkpoint", #"{"input":"\#(grown)","inputSize":\#(grownSize),"committedItems":1}"#)
            _ = try cli.file("grown.ndjson", lines(["a", "b", "c"]))
            let grew = try await cli.run(["import", grown, "--checkpoint", store.path("grown.checkpoint")])
            #expect(grew.exitCode == 64 && grew.stderr.contains("when it was \(grownSize) bytes (it is") && grew.stderr.contains("another input under that name"), "\(grew)")

            try FileManager.default.removeItem(atPath: latest)
            try FileManager.default.createSymbolicLink(atPath: latest, withDestinationPath: first)
            let resumed = try await cli.run(["import", latest, "--checkpoint", checkpoint])
            #expect(resumed.exitCode == 0 && resumed.stderr.contains("imported 2"), "\(resumed)")
        }
    }

    @Test("a checkpoint that counts more settled items than the input holds (another input of the same size, or edited) is refused at the input's end: exit 64, not a success that imported nothing, and the checkpoint is kept", arguments: TestEngine.all)
    func checkpointPastTheInputsEnd(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            try await cli.createStore()
            let input = try cli.file("in.ndjson", #"{"recordName":"a","recordType":"T","fields":{}}"# + "\n" + #"{"recordName":"b","recordType":"T","fields":{}}"# + "\n")
            let size = try FileManager.default.attributesOfItem(atPath: input)[.size] as? Int ?? 0
            let checkpoint = store.path("past-the-end.checkpoint")
            _ = try cli.file("past-the-end.checkpoint", #"{"input":"\#(input)","inputSize":\#(size),"committedItems":1000}"#)
            let run = try await cli.run(["import", input, "--checkpoint", checkpoint])
            #expect(run.exitCode == 64, "\(run)")
            #expect(run.stderr.contains("it says the first 1000 input items were settled, but the input holds 2: the checkpoint was made with another input, or edited. Remove the checkpoint to import the whole input"), "\(run)")
            #expect(run.stderr.contains("stopped by an error: imported 0"), "the summary is not a success line: \(run)")
            #expect(cli.exists(checkpoint), "kept: the run did not end the job")
            #expect(try await cli.count("T") == 0)
        }
    }

    @Test("a checkpoint of a version before jobs names its job in the store before its first batch: a run stopped before any batch commits resumes", arguments: TestEngine.all)
    func checkpointWithoutJob(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            try await cli.createStore()
            let lines = ["a", "b", "c", "d"].map { name in
                #"{"recordName":"\#(name)","recordType":"T",\#(name == "a" || name == "c" ? #""zoneID":{"zoneName":"Z"},"# : "")"fields":{}}"#
            }
            let input = try cli.file("in.ndjson", lines.joined(separator: "\n") + "\n")
            let checkpoint = store.path("old.checkpoint")
            let arguments = ["import", input, "--checkpoint", checkpoint, "--batch-size", "1"]
            // A first run stops at once (zone Z is missing) and leaves a checkpoint of this input.
            #expect(try await cli.run(arguments).exitCode != 0)
            let text = try #require(cli.read(checkpoint))
            var contents = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
            // As an earlier version wrote it: two items settled, no job.
            contents["job"] = nil
            contents["committedItems"] = 2
            try JSONSerialization.data(withJSONObject: contents).write(to: URL(fileURLWithPath: checkpoint))

            let stopped = try await cli.run(arguments)
            #expect(stopped.exitCode != 0 && stopped.stderr.contains("'Z'"), "item c names the missing zone: \(stopped)")
            #expect(try await cli.run(["zones", "create", "Z"]).exitCode == 0)
            let resumed = try await cli.run(arguments)
            #expect(resumed.exitCode == 0, "\(resumed)")
            #expect(try await cli.count("T") == 1 && cli.exists(checkpoint) == false, "d, after the two items the checkpoint settled")
            #expect(try await cli.count("T", extra: ["--zone", "Z"]) == 1)
        }
    }

    @Test("a store put back from a copy made during a checkpointed import is behind the checkpoint: the resume goes on from the store's record and ends with exactly the input", arguments: TestEngine.all)
    func resumeOnStorePutBack(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            try await cli.createStore()
            // Records 150 and 350 name zones that do not exist yet: each stops a run there.
            let lines = (0..<500).map { i -> String in
                let zone = i == 150 ? #""zoneID":{"zoneName":"A"},"# : i == 350 ? #""zoneID":{"zoneName":"B"},"# : ""
                return #"{"recordName":"r\#(String(format: "%03d", i))","recordType":"T",\#(zone)"fields":{"n":{"value":\#(i),"type":"INT64"}}}"#
            }
            let input = try cli.file("in.ndjson", lines.joined(separator: "\n") + "\n")
            let checkpoint = store.path("import.checkpoint")
            let arguments = ["import", input, "--checkpoint", checkpoint, "--batch-size", "50"]
            let first = try await cli.run(arguments)
            #expect(first.exitCode != 0 && cli.exists(checkpoint), "zone A stops it: \(first)")
            // The backup made then.
            let backup = try await cli.backUpStore("between-runs")
            #expect(try await cli.run(["zones", "create", "A"]).exitCode == 0)
            let second = try await cli.run(arguments)
            #expect(second.exitCode != 0 && cli.exists(checkpoint), "zone B stops it: \(second)")
            #expect(try await cli.count("T") > 300)

            // The store is put back from the backup, behind the checkpoint.
            try await cli.restoreStore(from: backup)
            #expect(try await cli.run(["zones", "create", "A", "B"]).exitCode == 0)
            let resumed = try await cli.run(arguments)
            #expect(resumed.exitCode == 0, "\(resumed)")
            #expect(try await cli.count("T") == 498, "every record of the default zone once: \(resumed)")
            for zone in ["A", "B"] {
                #expect(try await cli.count("T", extra: ["--zone", zone]) == 1)
            }
        }
    }

    @Test("timeout's SIGTERM, which reaches the command twice (directly and through its process group), stops after the batch with the summary, not at once", arguments: TestEngine.all)
    func timeoutSignalsTwice(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            // Each round's input ends in a wait for more, so the run is always mid-import when
            // timeout sends its signal; the records before the wait are committed (batches of 1).
            let result = try await cli.shell(#"""
                mkfifo input
                for round in 1 2 3 4 5 6; do
                    (printf '{"recordName":"r%s-%s","recordType":"Row"}\n' "$round" a "$round" b; exec sleep 30) > input &
                    writer=$!
                    timeout --preserve-status -s TERM 2 "$STRATUS" import - --batch-size 1 < input 2> "round$round.err"
                    echo "round $round: $?"
                    kill "$writer"
                done
                """#)
            #expect(result.exitCode == 0, "\(result)")
            for round in 1...6 {
                #expect(result.stdout.contains("round \(round): 143"), "\(result)")
                let stderr = cli.read(store.path("round\(round).err")) ?? ""
                #expect(stderr.contains("stopped: what was imported stays imported"), "round \(round): \(stderr)")
                #expect(stderr.contains("imported 2, updated 0, unchanged 0, failed 0"), "round \(round): \(stderr)")
                // A log gets no blank line: only a terminal's ^C needs ending.
                #expect(!stderr.hasPrefix("\n") && !stderr.contains("\n\n"), "round \(round): \(stderr)")
            }
            #expect(try await cli.count("Row") == 12)
        }
    }

    @Test("SIGHUP stops an import as SIGTERM does (129, after its batch, the checkpoint saved); one started ignoring it (nohup) goes on to the end", arguments: TestEngine.all)
    func hangup(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let path = try await ChildProcess.onOwnThread { try cli.file("rows.ndjson", Self.input()) }
            let checkpoint = store.path("hup.checkpoint")
            let first = try cli.start(["import", path, "--batch-size", "1000", "--checkpoint", checkpoint])
            let sent = try await Self.signal(first, SIGHUP) { (Self.committedItems(checkpoint) ?? 0) > 0 }
            let stopped = await first.wait()
            try #require(sent, "the import ended before a checkpoint was seen: \(stopped)")
            #expect(!stopped.signalled && stopped.exitCode == 129, "\(stopped)")
            let saved = try #require(Self.committedItems(checkpoint), "a hung-up import leaves its checkpoint: \(stopped)")
            #expect(try await cli.count("Row") == saved, "exactly the checkpointed items are stored")

            let ignoring = try cli.startShell(#"trap '' HUP; exec "$STRATUS" import "\#(path)" --batch-size 1000 --checkpoint "\#(checkpoint)""#)
            let sentAgain = try await Self.signal(ignoring, SIGHUP) { (Self.committedItems(checkpoint) ?? 0) > saved }
            let finished = await ignoring.wait()
            try #require(sentAgain, "the resumed import ended before its checkpoint moved: \(finished)")
            #expect(!finished.signalled && finished.exitCode == 0, "nohup's SIGHUP stays ignored: \(finished)")
            #expect(try await cli.count("Row") == Self.recordCount)
        }
    }

    @Test("an import a script starts in the background (SIGINT ignored, as `cmd &` gets it) goes on to the end through a SIGINT, and the ignored SIGINT goes on to a --exec command", arguments: TestEngine.all)
    func interruptIgnoredAtStart(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let path = try await ChildProcess.onOwnThread { try cli.file("rows.ndjson", Self.input()) }
            let checkpoint = store.path("int.checkpoint")
            let ignoring = try cli.startShell(#"trap '' INT; exec "$STRATUS" import "\#(path)" --batch-size 1000 --checkpoint "\#(checkpoint)""#)
            let sent = try await Self.signal(ignoring, SIGINT) { (Self.committedItems(checkpoint) ?? 0) > 0 }
            let finished = await ignoring.wait()
            try #require(sent, "the import ended before its checkpoint appeared: \(finished)")
            #expect(!finished.signalled && finished.exitCode == 0, "the SIGINT it was started ignoring stays ignored: \(finished)")
            #expect(!finished.stderr.contains("stopping after the current batch"), "\(finished)")
            #expect(try await cli.count("Row") == Self.recordCount)
            // SIGTERM still stops it, and the message names only what stops it at once.
            let again = try cli.startShell(#"trap '' INT; exec "$STRATUS" import "\#(path)" --batch-size 1000 --checkpoint "\#(checkpoint).2""#)
            let terminated = try await Self.signal(again, SIGTERM) { (Self.committedItems(checkpoint + ".2") ?? 0) > 0 }
            let stopped = await again.wait()
            try #require(terminated, "the second import ended before its checkpoint appeared: \(stopped)")
            #expect(stopped.exitCode == 143 && stopped.stderr.contains("(signal 15); a second SIGTERM stops at once"), "\(stopped)")

            // What the command of `notifications --exec` inherits: SIGINT ignored still, SIGTERM and SIGPIPE by default.
            let delivered = try await cli.shell(#"""
                trap '' INT
                "$STRATUS" subscriptions create everything --database-wide --database private --quiet &&
                printf '{"recordName":"n1","recordType":"Note"}\n' | "$STRATUS" import - --database private --quiet &&
                "$STRATUS" notifications --token-file feed.token --database private --exec 'grep -E "^SigIgn:" /proc/self/status > dispositions.txt; cat > /dev/null'
                """#)
            #expect(delivered.exitCode == 0, "\(delivered)")
            let dispositions = cli.read(store.path("dispositions.txt")) ?? ""
            let ignored = dispositions.split(separator: "\n").first { $0.hasPrefix("SigIgn:") }.flatMap { UInt64($0.dropFirst(7).trimmingCharacters(in: .whitespaces), radix: 16) }
            let mask = try #require(ignored, "\(dispositions) \(delivered)")
            #expect(mask & (1 << (UInt64(SIGINT) - 1)) != 0, "SIGINT stays ignored for the command: \(dispositions)")
            #expect([SIGTERM, SIGPIPE, SIGXFSZ].allSatisfy { mask & (1 << (UInt64($0) - 1)) == 0 }, "SIGTERM, SIGPIPE and SIGXFSZ are the command's own: \(dispositions)")
        }
    }

    @Test("SIGKILL mid-import, resume; SIGTERM mid-import exits 143 with a checkpoint; resume ends with exactly the input", arguments: TestEngine.all)
    func killTermResume(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            // Made and checked on threads of their own, so that the cooperative pool stays free
            // for the tests running beside this one.
            let path = try await ChildProcess.onOwnThread { try cli.file("rows.ndjson", Self.input()) }
            let checkpoint = store.path("import.checkpoint")
            let arguments = ["import", path, "--batch-size", "1000", "--checkpoint", checkpoint]

            // 1. Killed with SIGKILL once the first checkpoint is on disk.
            let first = try cli.start(arguments)
            let sawCheckpoint = try await Self.signal(first, SIGKILL) { (Self.committedItems(checkpoint) ?? 0) > 0 }
            let killed = await first.wait()
            try #require(sawCheckpoint, "the checkpoint file never appeared while importing: \(killed)")
            try #require(killed.signalled && killed.exitCode == SIGKILL, "the import ended before it could be killed: \(killed)")
            let afterKill = try #require(Self.committedItems(checkpoint), "a killed import leaves its checkpoint")
            #expect(afterKill > 0 && afterKill < Self.recordCount && afterKill % 1_000 == 0, "checkpoints fall on batch boundaries: \(afterKill)")
            let storedAfterKill = try await cli.count("Row")
            #expect(storedAfterKill >= afterKill && storedAfterKill <= afterKill + 1_000, "the store holds the committed batches (and at most the one after the checkpoint): \(storedAfterKill) vs \(afterKill)")

            // A checkpoint is not applied to another input.
            let other = try cli.file("other.ndjson", Input.notes(2))
            let wrongInput = try await cli.run(["import", other, "--checkpoint", checkpoint])
            #expect(wrongInput.exitCode == 64, "\(wrongInput)")
            #expect(Self.committedItems(checkpoint) == afterKill, "the checkpoint is left alone")
            // Nor to another store (a cron job without the STRATUS_STORE of the first run): it would skip what that store never got.
            let otherStore = store.path("other.sqlite")
            let missingStore = try await cli.run(arguments + ["--store", otherStore])
            #expect(missingStore.exitCode == 66 && missingStore.stderr.contains("says an earlier run imported into it") && !cli.exists(otherStore), "\(missingStore)")
            #expect(try await cli.run(["import", "--store", otherStore, "--quiet"], stdin: "").exitCode == 0)
            let wrongStore = try await cli.run(arguments + ["--store", otherStore])
            #expect(wrongStore.exitCode == 64 && wrongStore.stderr.contains("holds no record"), "\(wrongStore)")
            #expect(Self.committedItems(checkpoint) == afterKill, "the checkpoint is left alone")
            #expect(try await cli.run(["count", "--type", "Row", "--store", otherStore]).stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "0")
            // Nor to another destination in the store (a cron line corrected to another
            // database, zone, container or user): it would skip there what went elsewhere.
            #expect(try await cli.run(["zones", "create", "Elsewhere", "--database", "private"]).exitCode == 0)
            for destination in [["--database", "private"], ["--database", "private", "--zone", "Elsewhere"], ["--container", "other"], ["--user", "mallory"],
                                ["--environment", "production"]] {
                let moved = try await cli.run(arguments + destination)
                #expect(moved.exitCode == 64 && moved.stderr.contains("belongs to the import into container default, development environment, the public database"), "\(destination): \(moved)")
                #expect(Self.committedItems(checkpoint) == afterKill, "the checkpoint is left alone")
            }
            #expect(try await cli.count("Row", extra: ["--database", "private"]) == 0)

            // 2. Resumed, then stopped with SIGTERM once it committed more.
            let second = try cli.start(arguments)
            let progressed = try await Self.signal(second, SIGTERM) { (Self.committedItems(checkpoint) ?? 0) > afterKill }
            let terminated = await second.wait()
            try #require(progressed, "the resumed import never moved the checkpoint: \(terminated)")
            #expect(!terminated.signalled && terminated.exitCode == 143, "SIGTERM finishes the batch, saves the checkpoint and exits 143: \(terminated)")
            // The signal just sent did not stop it at once, so the notice says which one would.
            #expect(terminated.stderr.contains("stopping after the current batch (signal 15); a second SIGINT or SIGTERM stops at once"), "\(terminated)")
            #expect(terminated.stdout.isEmpty)
            #expect(terminated.stderr.contains("going on from the checkpoint") && terminated.stderr.contains("stopped: run the same command again (with --checkpoint \(checkpoint))"), "a resumed run says so, a stopped one how to go on: \(terminated)")
            let afterTerm = try #require(Self.committedItems(checkpoint), "SIGTERM leaves a checkpoint: \(terminated)")
            #expect(afterTerm > afterKill && afterTerm < Self.recordCount, "\(afterTerm)")
            #expect(try await cli.count("Row") == afterTerm, "after a clean stop the store holds exactly the checkpointed items")
            if let counts = Summary.ofImport(terminated) {
                // A kill between a batch's commit and its checkpoint leaves that batch in the
                // store, which the resumed run goes on after: it did not commit that one.
                #expect(counts.imported + counts.updated + counts.unchanged == afterTerm - storedAfterKill, "the stopped run reports what it committed: \(terminated)")
                #expect(counts.failed == 0)
            }

            // 3. Resumed to the end: the checkpoint goes, the store holds exactly the input.
            let last = try await cli.run(arguments)
            #expect(last.exitCode == 0, "\(last)")
            if let counts = Summary.ofImport(last) {
                #expect(counts.imported == Self.recordCount - afterTerm, "the last run starts after the checkpoint: \(last)")
                #expect(counts.failed == 0 && counts.updated == 0 && counts.unchanged == 0)
            }
            #expect(!cli.exists(checkpoint), "the checkpoint is removed when the import ends")
            #expect(!cli.exists(checkpoint + ".tmp"))

            #expect(try await cli.count("Row") == Self.recordCount)
            let export = try await cli.run(["export", "--type", "Row", "--fields", "n,s", "--sort", "recordName", "--quiet"])
            #expect(export.exitCode == 0, "\(export.stderr)")
            let (index, mismatches) = try await ChildProcess.onOwnThread { () -> (Int, [String]) in
                var index = 0
                var mismatches: [String] = []
                for line in export.stdout.split(separator: "\n") {
                    let expectedStart = #"{"recordName":"r\#(String(format: "%06d", index))","recordType":"Row","#
                    let expectedFields = #""fields":{"n":{"value":\#(index),"type":"INT64"},"s":{"value":"row \#(index)","type":"STRING"}}"#
                    if !line.hasPrefix(expectedStart) || !line.contains(expectedFields) {
                        if mismatches.count < 5 { mismatches.append(String(line.prefix(200))) }
                    }
                    index += 1
                }
                return (index, mismatches)
            }
            #expect(index == Self.recordCount, "exported \(index) records")
            #expect(mismatches.isEmpty, "records differ from the input (first few): \(mismatches)")
        }
    }

    /// Children (and grandchildren) before their parents, in many batches: `children` records
    /// of type Child whose parents (`parents` of type Parent) come after all of them, every
    /// other child with a grandchild, then unrelated records.
    static func childrenFirstInput(children: Int, parents: Int) -> (text: String, parentOf: [String: String]) {
        var lines: [String] = []
        var parentOf: [String: String] = [:]
        func line(_ name: String, _ type: String, _ value: Int, parent: String?) -> String {
            parentOf[name] = parent ?? ""
            let parentMember = parent.map { #","parent":{"recordName":"\#($0)"}"# } ?? ""
            return #"{"recordName":"\#(name)","recordType":"\#(type)","fields":{"n":{"value":\#(value),"type":"INT64"}}\#(parentMember)}"#
        }
        for i in 0..<children {
            let child = "c\(String(format: "%05d", i))"
            lines.append(line(child, "Child", i, parent: "p\(String(format: "%04d", i % parents))"))
            if i % 2 == 0 { lines.append(line("g\(String(format: "%05d", i))", "Child", -i, parent: child)) }
        }
        for j in 0..<parents { lines.append(line("p\(String(format: "%04d", j))", "Parent", j, parent: nil)) }
        for k in 0..<children / 4 { lines.append(line("f\(String(format: "%05d", k))", "Parent", 100_000 + k, parent: nil)) }
        return (lines.joined(separator: "\n") + "\n", parentOf)
    }

    @Test("children before parents: killed (SIGKILL) again and again as soon as each run moves its checkpoint, then stopped with SIGTERM, the resumed import writes every record once, with its parent", arguments: TestEngine.all)
    func killedWhileChildrenWait(engine: TestEngine) async throws {
        // A run can finish before its kill lands (the machine decides when each runs). When that
        // happens before the import was stopped three times, the rounds have shown too little
        // about resuming: they start over, on a new store, a few times at most.
        var stoppedEnough = false
        for _ in 0..<4 where !stoppedEnough {
            stoppedEnough = try await killedWhileChildrenWaitAttempt(engine: engine)
        }
        #expect(stoppedEnough, "in no attempt was the import stopped mid-run three times")
    }

    /// One attempt of ``killedWhileChildrenWait(engine:)``; false when a run finished before
    /// the import was stopped three times (the final checks are not made then).
    func killedWhileChildrenWaitAttempt(engine: TestEngine) async throws -> Bool {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let (text, parentOf) = Self.childrenFirstInput(children: 2_400, parents: 120)
            let path = try cli.file("children-first.ndjson", text)
            let checkpoint = store.path("import.checkpoint")
            let rejects = store.path("rejects.ndjson")
            // --mode create: a record written twice (a resumed run writing again what a killed one
            // committed) would be rejected as existing.
            let arguments = ["import", path, "--batch-size", "40", "--mode", "create", "--checkpoint", checkpoint, "--reject-file", rejects, "--quiet"]
            var kills = 0
            for round in 0..<10 {
                // Killed as soon as the run saved a checkpoint of its own: a resumed run first
                // reads again what waited, so that is when a checkpoint could pass what it has not.
                let before = FileManager.default.contents(atPath: checkpoint)
                let running = try cli.start(arguments)
                let moved = try await Self.signal(running, round == 9 ? SIGTERM : SIGKILL) {
                    let now = FileManager.default.contents(atPath: checkpoint)
                    return now != nil && now != before && (Self.committedItems(checkpoint) ?? 0) > 0
                }
                let ended = await running.wait()
                if !moved || !ended.signalled && ended.exitCode == 0 { break }
                if round == 9 {
                    #expect(ended.exitCode == 143, "SIGTERM stops after the batch: \(ended)")
                } else {
                    #expect(ended.signalled && ended.exitCode == SIGKILL, "\(ended)")
                }
                kills += 1
            }
            guard kills >= 3 else { return false }
            let last = try await cli.run(arguments)
            #expect(last.exitCode == 0, "\(last)")
            #expect(!cli.exists(checkpoint))
            #expect(try RejectLine.read(rejects).map { "\($0.line) \($0.recordName ?? "") \($0.error)" } == [], "nothing is rejected: no record is written twice")
            var stored: [String: String] = [:]
            for type in ["Child", "Parent"] {
                for (name, record) in try await cli.exported(type) {
                    stored[name] = ((record["parent"] as? [String: Any])?["recordName"] as? String) ?? ""
                }
            }
            #expect(stored.count == parentOf.count, "the store holds \(stored.count) records of \(parentOf.count)")
            let missing = parentOf.keys.filter { stored[$0] == nil }.sorted()
            #expect(missing.isEmpty, "records lost: \(missing.count), first \(missing.prefix(5))")
            let wrong = parentOf.filter { stored[$0.key] != nil && stored[$0.key] != $0.value }.keys.sorted()
            #expect(wrong.isEmpty, "records with another parent: \(wrong.prefix(5))")
            return true
        }
    }

    @Test("an import whose checkpoint another import holds (by its name or through a link) exits 75 and writes nothing", arguments: TestEngine.all)
    func overlappingImportsAreRefused(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            try await cli.createStore()
            let path = try cli.file("notes.ndjson", Input.notes(5))
            let checkpoint = store.path("import.checkpoint")
            let link = store.path("link.checkpoint")
            #expect(symlink(checkpoint, link) == 0)
            // Hold the lock as a running import would.
            let lock = open(checkpoint + ".lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
            #expect(lock >= 0 && flock(lock, LOCK_EX) == 0)
            for name in [checkpoint, link] {
                let refused = try await cli.run(["import", path, "--checkpoint", name])
                #expect(refused.exitCode == 75, "\(refused)")
                #expect(refused.stderr.contains("another run is using the checkpoint \(name)"), "\(refused)")
            }
            #expect(try await cli.count("Note") == 0)
            // Unlocked first: a child process another test is starting holds a copy of the descriptor until it execs.
            flock(lock, LOCK_UN)
            close(lock)

            let resumed = try await cli.run(["import", path, "--checkpoint", link])
            #expect(resumed.exitCode == 0, "\(resumed)")
            #expect(try await cli.count("Note") == 5)
            var info = stat()
            #expect(lstat(link, &info) == 0 && (info.st_mode & S_IFMT) == S_IFLNK, "the link is still a link")
        }
    }
}
