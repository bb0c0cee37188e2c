import Foundation
import StratusTestSupport
import Testing

/// `stratus count`, `get` and `delete` end to end.
@Suite("stratus count, get and delete", .timeLimit(.minutes(30)))
struct RecordCommandsCLITests {
    @Test("count prints the number of matching records and nothing else", arguments: TestEngine.all)
    func count(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            _ = try await cli.run(["import", try cli.file("notes.ndjson", Input.notes(25))])
            let all = try await cli.run(["count", "--type", "Note"])
            #expect(all.exitCode == 0, "\(all)")
            #expect(all.stdout == "25\n")
            #expect(all.stderr.isEmpty)
            let some = try await cli.run(["count", "--type", "Note", "--where", "count BETWEEN {5, 9}"])
            #expect(some.stdout == "5\n", "\(some)")
            let none = try await cli.run(["count", "--type", "Unknown"])
            #expect(none.exitCode == 0)
            #expect(none.stdout == "0\n")
            for arguments in [["count"], ["count", "--type", "Note", "--where", "count >> 3"], ["count", "--type", "Note", "--where", "count > 1 OR count < 0"], ["count", "--type", "Note", "extra", "--nope"]] {
                let usage = try await cli.run(arguments)
                #expect(usage.exitCode == 64, "\(usage)")
                #expect(usage.stdout.isEmpty)
                #expect(!usage.stderr.isEmpty)
            }
        }
    }

    @Test("get prints the named records in order; a missing name is on stderr and makes exit 1", arguments: TestEngine.all)
    func get(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            _ = try await cli.run(["import", try cli.file("notes.ndjson", Input.notes(3))])
            let found = try await cli.run(["get", "n3", "n1"])
            #expect(found.exitCode == 0, "\(found)")
            #expect(found.stderr.isEmpty)
            #expect(try JSONLine.names(found.stdout) == ["n3", "n1"])
            let n3 = try #require(try JSONLine.objects(found.stdout).first)
            #expect(JSONLine.value(n3, "title") == "title 3")
            #expect(JSONLine.field(n3, "count")?["type"] as? String == "INT64")

            let partial = try await cli.run(["get", "n1", "ghost-record", "n2"])
            #expect(partial.exitCode == 1, "\(partial)")
            #expect(try JSONLine.names(partial.stdout) == ["n1", "n2"], "the found records still print")
            #expect(partial.stderr.contains("ghost-record"), "\(partial)")
            #expect(!partial.stderr.contains("\"recordName\""), "no data on stderr")

            let trimmed = try await cli.run(["get", "n2", "--fields", "count"])
            #expect((try JSONLine.objects(trimmed.stdout).first?["fields"] as? [String: Any]).map { Array($0.keys) } == ["count"])

            let usage = try await cli.run(["get"])
            #expect(usage.exitCode == 64, "\(usage)")
            #expect(usage.stdout.isEmpty)
        }
    }

    @Test("delete by names needs --yes; --dry-run counts and deletes nothing; missing names are fine", arguments: TestEngine.all)
    func deleteByName(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            _ = try await cli.run(["import", try cli.file("notes.ndjson", Input.notes(10))])

            let refused = try await cli.run(["delete", "n1", "n2"])
            #expect(refused.exitCode == 64, "\(refused)")
            #expect(refused.stderr.contains("--yes"), "\(refused)")
            #expect(try await cli.count("Note") == 10)

            let dry = try await cli.run(["delete", "n1", "n2", "ghost", "--dry-run"])
            #expect(dry.exitCode == 0, "\(dry)")
            #expect(dry.stdout.isEmpty)
            #expect(dry.stderrLines.last?.contains("would delete 2 records") == true, "\(dry)")
            #expect(try await cli.count("Note") == 10)

            let deleted = try await cli.run(["delete", "n1", "n2", "ghost", "--yes"])
            #expect(deleted.exitCode == 0, "\(deleted)")
            #expect(deleted.stdout.isEmpty)
            #expect(deleted.stderrLines.last?.hasPrefix("deleted ") == true, "\(deleted)")
            #expect(try await cli.count("Note") == 8)
            let gone = try await cli.run(["get", "n1"])
            #expect(gone.exitCode == 1)

            let namesFile = try cli.file("names.txt", "n3\n\n  \nn4\nn5\n")
            let fromFile = try await cli.run(["delete", "--names-file", namesFile, "--yes", "--quiet"])
            #expect(fromFile.exitCode == 0, "\(fromFile)")
            #expect(fromFile.stderr.isEmpty, "--quiet: \(fromFile)")
            #expect(try await cli.count("Note") == 5)

            let fromStdin = try await cli.run(["delete", "--names-file", "-", "--yes"], stdin: "n6\nn7\n")
            #expect(fromStdin.exitCode == 0, "\(fromStdin)")
            #expect(try await cli.count("Note") == 3)

            let missingFile = try await cli.run(["delete", "--names-file", store.path("nope.txt"), "--yes"])
            #expect(missingFile.exitCode == 66, "\(missingFile)")
            #expect(try await cli.count("Note") == 3)
        }
    }

    @Test("delete --as-administrator deletes every user's public records, by name and by query, which a user's security roles keep it from deleting; private database refused", arguments: TestEngine.all)
    func deleteAsAdministrator(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let creator = "_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
            let records = (1...4).map { i in
                #"{"recordName":"p\#(i)","recordType":"Poster","recordChangeTag":"t\#(i)","fields":{"n":{"value":\#(i),"type":"INT64"}},"created":{"timestamp":1000,"userRecordName":"\#(creator)"},"modified":{"timestamp":2000,"userRecordName":"\#(creator)"}}"#
            }.joined(separator: "\n") + "\n"
            let restored = try await cli.run(["import", try cli.file("public.ndjson", records), "--keep-system-records", "--as-administrator"])
            #expect(restored.exitCode == 0, "\(restored)")

            let asUser = try await cli.run(["delete", "p1", "--yes"])
            #expect(asUser.exitCode == 1 && asUser.stderr.contains("deleted 0") && asUser.stderr.contains("failed 1"), "\(asUser)")
            let queryAsUser = try await cli.run(["delete", "--type", "Poster", "--where", "n >= 3", "--yes"])
            #expect(queryAsUser.exitCode == 1 && queryAsUser.stderr.contains("deleted 0"), "\(queryAsUser)")
            #expect(try await cli.count("Poster") == 4)

            let dry = try await cli.run(["delete", "p1", "p2", "--dry-run", "--as-administrator"])
            #expect(dry.exitCode == 0 && dry.stderr.contains("would delete 2 records"), "\(dry)")
            let byName = try await cli.run(["delete", "p1", "ghost", "--yes", "--as-administrator"])
            #expect(byName.exitCode == 0 && byName.stderr.contains("deleted 1, not found 1, failed 0"), "\(byName)")
            let byQuery = try await cli.run(["delete", "--type", "Poster", "--where", "n >= 3", "--yes", "--as-administrator"])
            #expect(byQuery.exitCode == 0 && byQuery.stderr.contains("deleted 2,"), "\(byQuery)")
            let left = try await cli.exported("Poster")
            #expect(Set(left.keys) == ["p2"], "\(left.keys)")

            let privateDatabase = try await cli.run(["delete", "p2", "--yes", "--as-administrator", "--database", "private"])
            #expect(privateDatabase.exitCode == 64 && privateDatabase.stderr.contains("public database"), "\(privateDatabase)")
            #expect(try await cli.count("Poster") == 1)
        }
    }

    @Test("delete --names-file reads a line no longer than a name could be: /dev/zero or a binary file is refused at its line (65), nothing deleted; CRLF lines are names", arguments: TestEngine.all)
    func namesFileWithoutEnd(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(3)).exitCode == 0)
            // Read until memory ran out before: the whole file was read before its first name.
            let endless = try await cli.run(["delete", "--names-file", "/dev/zero", "--yes"])
            #expect(endless.exitCode == 65, "\(endless)")
            #expect(endless.stderr.contains("--names-file /dev/zero: line 1 is longer than"), "\(endless)")
            let binary = try cli.file("binary.txt", "n1\n" + String(repeating: "x", count: 5_000) + "\nn2\n")
            let long = try await cli.run(["delete", "--names-file", binary, "--yes"])
            #expect(long.exitCode == 65, "\(long)")
            #expect(long.stderr.contains("line 2 is longer than"), "\(long)")
            #expect(try await cli.count("Note") == 3, "a refused names file deletes nothing")

            let crlf = try cli.file("crlf.txt", "n1\r\nn2\r\n\r\n")
            let deleted = try await cli.run(["delete", "--names-file", crlf, "--yes"])
            #expect(deleted.exitCode == 0, "\(deleted)")
            #expect(try await cli.count("Note") == 1)
        }
    }

    @Test("delete --names-file takes each line as the name it is: blanks around a name are part of it, so 'X ' never deletes 'X'", arguments: TestEngine.all)
    func namesFileKeepsBlanks(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let records = ["X", "X ", " Y", "Y"].map { #"{"recordName":"\#($0)","recordType":"Note","fields":{}}"# }
            #expect(try await cli.run(["import", "--quiet"], stdin: records.joined(separator: "\n") + "\n").exitCode == 0)
            let names = try cli.file("names.txt", "X \n Y\r\n")
            let deleted = try await cli.run(["delete", "--names-file", names, "--yes"])
            #expect(deleted.exitCode == 0, "\(deleted)")
            #expect(deleted.stderrLines.last?.hasPrefix("deleted 2, not found 0") == true, "\(deleted)")
            let left = try await cli.run(["export", "--type", "Note", "--quiet"])
            #expect(Set(try JSONLine.objects(left.stdout).compactMap { $0["recordName"] as? String }) == ["X", "Y"], "\(left)")
            // A name not found with blanks around it is pointed out, in a dry run too.
            let stray = try cli.file("stray.txt", "Y \n")
            for options in [["--yes"], ["--dry-run"]] {
                let missed = try await cli.run(["delete", "--names-file", stray] + options)
                #expect(missed.exitCode == 0 && missed.stderr.contains("1 name not found has blanks around it") && missed.stderr.contains("'Y '"), "\(options): \(missed)")
            }
        }
    }

    @Test("delete says deleted and not found apart: names that do not exist, or another user's private record, are not found and not counted as deleted", arguments: TestEngine.all)
    func deleteReportsNotFound(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(3)).exitCode == 0)
            let ghosts = try await cli.run(["delete", "ghost1", "ghost2", "ghost3", "--yes"])
            #expect(ghosts.exitCode == 0, "\(ghosts)")
            #expect(ghosts.stderrLines.last?.hasPrefix("deleted 0, not found 3, failed 0") == true, "\(ghosts)")
            let dry = try await cli.run(["delete", "n1", "ghost", "--dry-run", "--progress", "json"])
            let planned = try #require(try JSONLine.objects(dry.stderr).last, "\(dry)")
            #expect(planned["wouldDelete"] as? Int == 1 && planned["notFound"] as? Int == 1, "\(dry)")
            let mixed = try await cli.run(["delete", "n1", "ghost", "n2", "--yes", "--progress", "json"])
            let summary = try #require(try JSONLine.objects(mixed.stderr).last, "\(mixed)")
            #expect(summary["deleted"] as? Int == 2 && summary["notFound"] as? Int == 1 && summary["failed"] as? Int == 0, "\(mixed)")

            let alice = ["--database", "private", "--user", "alice"], bob = ["--database", "private", "--user", "bob"]
            #expect(try await cli.run(["import", "--quiet"] + alice, stdin: Input.notes(1, prefix: "secret")).exitCode == 0)
            let foreign = try await cli.run(["delete", "secret1", "--yes"] + bob)
            #expect(foreign.exitCode == 0, "\(foreign)")
            #expect(foreign.stderrLines.last?.hasPrefix("deleted 0, not found 1") == true, "bob cannot see, so cannot delete, alice's record: \(foreign)")
            #expect(try await cli.count("Note", extra: alice) == 1)
            let own = try await cli.run(["delete", "secret1", "--yes"] + alice)
            #expect(own.stderrLines.last?.hasPrefix("deleted 1, not found 0") == true, "\(own)")
        }
    }

    @Test("delete by --type/--where; .deleteSelf children go with their parent; usage errors are 64", arguments: TestEngine.all)
    func deleteByQuery(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            _ = try await cli.run(["import", try cli.file("notes.ndjson", Input.notes(10))])
            let children = (1...3).map { i in
                #"{"recordName":"child\#(i)","recordType":"Child","fields":{"owner":{"value":{"recordName":"n\#(i)","action":"DELETE_SELF"},"type":"REFERENCE"}}}"#
            }.joined(separator: "\n") + "\n"
            let linked = try await cli.run(["import", try cli.file("children.ndjson", children)])
            #expect(linked.exitCode == 0, "\(linked)")

            let dry = try await cli.run(["delete", "--type", "Note", "--where", "count <= 4", "--dry-run", "--progress", "json"])
            #expect(dry.exitCode == 0, "\(dry)")
            let event = try #require(try JSONLine.objects(dry.stderr).last, "\(dry)")
            #expect(event["wouldDelete"] as? Int == 4, "\(dry)")
            #expect(try await cli.count("Note") == 10)

            let deleted = try await cli.run(["delete", "--type", "Note", "--where", "count <= 2", "--yes"])
            #expect(deleted.exitCode == 0, "\(deleted)")
            #expect(try await cli.count("Note") == 8)
            #expect(try await cli.count("Child") == 1, "children that reference a deleted record with DELETE_SELF are deleted with it")

            // Every record of a type only when asked for in so many words.
            let unguarded = try await cli.run(["delete", "--type", "Note", "--yes"])
            #expect(unguarded.exitCode == 64, "\(unguarded)")
            #expect(unguarded.stderr.contains("--all"), "\(unguarded)")
            #expect(try await cli.count("Note") == 8)
            let allTrue = try await cli.run(["delete", "--type", "Note", "--where", "TRUEPREDICATE", "--dry-run", "--progress", "json"])
            #expect(try JSONLine.objects(allTrue.stderr).last?["wouldDelete"] as? Int == 8, "\(allTrue)")

            let everything = try await cli.run(["delete", "--type", "Note", "--all", "--yes", "--progress", "json"])
            #expect(everything.exitCode == 0, "\(everything)")
            #expect(try JSONLine.objects(everything.stderr).last?["failed"] as? Int == 0)
            #expect(try await cli.count("Note") == 0)

            for arguments in [
                ["delete", "--yes"],
                ["delete", "--where", "count > 1", "--yes"],
                ["delete", "n1", "--type", "Note", "--yes"],
                ["delete", "--type", "Note", "--where", "count > 1 OR count < 1", "--yes"],
                ["delete", "--type", "Note", "--where", "count > 1"],
                ["delete", "--type", "Note", "--dry-run"],
                ["delete", "--type", "Note", "--all", "--where", "count > 1", "--yes"],
                ["delete", "n1", "--all", "--yes"],
            ] {
                let usage = try await cli.run(arguments)
                #expect(usage.exitCode == 64, "\(usage)")
                #expect(usage.stdout.isEmpty)
            }
        }
    }
}
