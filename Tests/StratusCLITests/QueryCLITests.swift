import Foundation
import StratusTestSupport
import Testing

/// `stratus query` end to end: one page per process, paged by a shell loop with `--cursor`.
@Suite("stratus query", .serialized, .timeLimit(.minutes(30)))
struct QueryCLITests {
    static let count = 10_001

    /// `Item` records with a rank that has ties (so the record name must break them) and a label.
    static func items() -> (ndjson: String, expectedOrder: [String]) {
        var lines: [String] = []
        var keyed: [(rank: Int, name: String)] = []
        lines.reserveCapacity(count)
        for i in 0..<count {
            let name = String(format: "item-%05d", i)
            let rank = ((i * 7_919) % 10_007) / 3
            keyed.append((rank, name))
            lines.append(#"{"recordName":"\#(name)","recordType":"Item","fields":{"rank":{"value":\#(rank),"type":"INT64"},"label":{"value":"record \#(i)","type":"STRING"}}}"#)
        }
        let order = keyed.sorted { $0.rank != $1.rank ? $0.rank < $1.rank : $0.name < $1.name }.map(\.name)
        return (lines.joined(separator: "\n") + "\n", order)
    }

    @Test("--where compares a date with milliseconds since 1970 or an ISO 8601 date-time, as a CSV TIMESTAMP cell reads them, in every command; another literal is a usage error", arguments: TestEngine.all)
    func whereDates(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let csv = try cli.file("tasks.csv", "recordName,title,due:TIMESTAMP\nold,x,2024-01-01\nnew,y,2026-01-01T12:00:00Z\n")
            #expect(try await cli.run(["import", csv, "--type", "Task", "--quiet"]).exitCode == 0)
            for (predicate, expected) in [("due < 1735689600000", "1"), ("due < '2025-01-01'", "1"), ("due >= '2025-01-01T00:00:00+02:00'", "1"),
                                          ("due IN {1704067200000, 5}", "1"), ("due BETWEEN {'2023-01-01', 1767268800000}", "2"),
                                          ("modificationDate > 1000000000000", "2"), ("creationDate < '2001-01-01'", "0")] {
                let count = try await cli.run(["count", "--type", "Task", "--where", predicate])
                #expect(count.exitCode == 0 && count.stdout == expected + "\n", "\(predicate): \(count)")
            }
            let page = try await cli.run(["query", "--type", "Task", "--where", "due < 1735689600000"])
            #expect(try JSONLine.names(page.stdout) == ["old"], "\(page)")
            let exported = try await cli.run(["export", "--type", "Task", "--where", "due > '2025-01-01'", "--quiet"])
            #expect(try JSONLine.names(exported.stdout) == ["new"], "\(exported)")
            let updated = try await cli.run(["update", "--type", "Task", "--where", "title == 'x' AND due < 1735689600000", "--set", "title=early", "--quiet"])
            #expect(updated.exitCode == 0, "\(updated)")
            #expect(try await cli.run(["count", "--type", "Task", "--where", "title == 'early'"]).stdout == "1\n")
            let deleted = try await cli.run(["delete", "--type", "Task", "--where", "due > '2025-06-01'", "--yes", "--quiet"])
            #expect(deleted.exitCode == 0, "\(deleted)")
            #expect(try await cli.count("Task") == 1)
            let mistyped = try await cli.run(["count", "--type", "Tsak"])
            #expect(mistyped.exitCode == 0 && mistyped.stdout == "0\n" && mistyped.stderr.contains("note: no record has the type Tsak, and the development schema declares Task"), "a mistyped type is an empty answer, said so: \(mistyped)")
            let misspelt = try await cli.run(["query", "--type", "Task", "--where", "tilte == 'early'", "--sort", "due"])
            #expect(misspelt.exitCode == 0 && misspelt.stdout.isEmpty, "\(misspelt)")
            #expect(misspelt.stderr.contains("note: Task has no field 'tilte' in the development schema, which declares every field a save stores; a misspelt name? (the type's fields: due, title)"),
                    "a misspelt field is an empty answer, said so: \(misspelt)")
            let twoMisspelt = try await cli.run(["count", "--type", "Task", "--where", "tilte == 'early' AND deu > 0"])
            #expect(twoMisspelt.stderrLines == ["stratus: note: Task has fields 'tilte', 'deu' in the development schema, which declares every field a save stores; a misspelt name? (the type's fields: due, title)"]
                        .map { $0.replacingOccurrences(of: "has fields", with: "has no fields") }, "one note names them all: \(twoMisspelt)")
            let rightly = try await cli.run(["count", "--type", "Task", "--where", "title == 'early' AND recordName != 'x'"])
            #expect(rightly.exitCode == 0 && !rightly.stderr.contains("note:"), "declared fields and system keys get no note: \(rightly)")
            let refused = try await cli.run(["count", "--type", "Task", "--where", "due < 'next week'"])
            #expect(refused.exitCode == 64 && refused.stderr.contains("due is a date, and 'next week' is neither milliseconds since 1970"), "\(refused)")
            // A quoted year, or a date without dashes, is no count of milliseconds anyone means.
            for ambiguous in ["due < '2025'", "due < '20250101'", "creationDate > '2024'"] {
                let result = try await cli.run(["delete", "--type", "Task", "--where", ambiguous, "--yes"])
                #expect(result.exitCode == 64 && result.stderr.contains("is ambiguous: a year or a date without dashes"), "\(ambiguous): \(result)")
            }
            #expect(try await cli.run(["count", "--type", "Task", "--where", "due < '1735689600000'"]).stdout == "1\n", "quoted milliseconds still read")
        }
    }

    @Test("a --where field the schema dropped that records still hold: a query, count, export, update or delete that matched them says nothing on stderr; one that matched nothing notes the field", arguments: TestEngine.all)
    func droppedFieldsAreNotedOnlyWhenNothingMatched(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            #expect(try await cli.run(["import", try cli.file("x.ndjson", #"{"recordName":"x1","recordType":"X","fields":{"v":{"value":5,"type":"INT64"},"w":{"value":1,"type":"INT64"}}}"# + "\n"), "--quiet"]).exitCode == 0)
            #expect(try await cli.run(["schema", "import", try cli.file("x.ckdb", "DEFINE SCHEMA\n    RECORD TYPE X (\n        w INT64,\n        GRANT WRITE TO \"_creator\",\n        GRANT CREATE TO \"_icloud\",\n        GRANT READ TO \"_world\"\n    );\n")]).exitCode == 0)
            let found = try await cli.run(["query", "--type", "X", "--where", "v > 0", "--quiet", "--format", "envelope"])
            #expect(found.exitCode == 0 && found.stdout.contains("x1") && found.stderr.isEmpty, "\(found)")
            let counted = try await cli.run(["count", "--type", "X", "--where", "v > 0"])
            #expect(counted.stdout == "1\n" && counted.stderr.isEmpty, "\(counted)")
            let exported = try await cli.run(["export", "--type", "X", "--where", "v > 0", "--quiet"])
            #expect(exported.exitCode == 0 && exported.stderr.isEmpty, "\(exported)")
            let updated = try await cli.run(["update", "--type", "X", "--where", "v > 0", "--set", "w=2", "--quiet"])
            #expect(updated.exitCode == 0 && updated.stderr.isEmpty, "\(updated)")
            let none = try await cli.run(["count", "--type", "X", "--where", "v > 100"])
            #expect(none.stdout == "0\n" && none.stderr.contains("note: X has no field 'v' in the development schema"), "\(none)")
            let noneDeleted = try await cli.run(["delete", "--type", "X", "--where", "v > 100", "--yes"])
            #expect(noneDeleted.exitCode == 0 && noneDeleted.stderrLines.count == 2 && noneDeleted.stderrLines.first?.contains("has no field 'v'") == true
                        && noneDeleted.stderrLines.last?.hasPrefix("deleted 0") == true, "the note comes before the summary: \(noneDeleted)")
            let deleted = try await cli.run(["delete", "--type", "X", "--where", "v > 0", "--yes"])
            #expect(deleted.exitCode == 0 && !deleted.stderr.contains("note:"), "\(deleted)")
        }
    }

    @Test("an import of 2,000 doubles of 2^60 (the bulk path) compares them with integers by their exact value", arguments: TestEngine.all)
    func importedLargeDoublesCompareExactly(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let lines = (0..<2_000).map { #"{"recordName":"r\#($0)","recordType":"Big","fields":{"d":{"value":1152921504606846976,"type":"DOUBLE"}}}"# }
            #expect(try await cli.run(["import", try cli.file("big.ndjson", lines.joined(separator: "\n") + "\n"), "--quiet"]).exitCode == 0)
            #expect(try await cli.count("Big", where: "d == 1152921504606846976") == 2_000)
            #expect(try await cli.count("Big", where: "d == 1152921504606847000") == 0, "the shortest text's number is not the double's")
            #expect(try await cli.count("Big", where: "d < 1152921504606846977") == 2_000)
        }
    }

    @Test("a /bin/sh loop pages through 10,001 records with --limit 400 --cursor: each exactly once, in order", arguments: TestEngine.all)
    func shellLoopPaging(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let (ndjson, expected) = Self.items()
            let imported = try await cli.run(["import", try cli.file("items.ndjson", ndjson), "--quiet"])
            #expect(imported.exitCode == 0, "\(imported)")

            let script = #"""
                set -u
                : > all.ndjson
                : > sizes.txt
                c=""
                while :; do
                    if [ -z "$c" ]; then
                        "$STRATUS" query --type Item --sort rank --limit 400 > page.ndjson 2> page.err
                    else
                        "$STRATUS" query --type Item --sort rank --limit 400 --cursor "$c" > page.ndjson 2> page.err
                    fi
                    status=$?
                    if [ $status -ne 0 ]; then
                        echo "query exited $status" >&2
                        cat page.err >&2
                        exit 1
                    fi
                    # stderr holds the cursor line and nothing else
                    if grep -v '^cursor: ' page.err >&2; then exit 2; fi
                    cat page.ndjson >> all.ndjson
                    wc -l < page.ndjson | tr -d ' ' >> sizes.txt
                    c=$(sed -n 's/^cursor: //p' page.err)
                    [ -n "$c" ] || break
                done
                echo done
                """#
            let result = try await cli.shell(script)
            #expect(result.exitCode == 0, "\(result)")
            #expect(result.stdout == "done\n", "\(result)")

            let sizes = (cli.read(store.path("sizes.txt")) ?? "").split(separator: "\n").compactMap { Int($0) }
            #expect(sizes.count == 26, "10,001 records in pages of 400: \(sizes)")
            #expect(sizes.dropLast().allSatisfy { $0 == 400 }, "\(sizes)")
            #expect(sizes.last == 1)

            let text = try #require(cli.read(store.path("all.ndjson")))
            var names: [String] = []
            names.reserveCapacity(Self.count)
            for line in text.split(separator: "\n") {
                let prefix = #"{"recordName":""#
                #expect(line.hasPrefix(prefix), "each line is a record: \(line.prefix(100))")
                names.append(String(line.dropFirst(prefix.count).prefix { $0 != "\"" }))
            }
            #expect(names.count == Self.count)
            #expect(Set(names).count == Self.count, "no record twice")
            #expect(names == expected, "every record once, in (rank, recordName) order")
        }
    }

    @Test("--all-zones: query pages merge every zone (count, then name, then zone), export goes zone after zone, count counts all; contradicting options and cursors are usage errors", arguments: TestEngine.all)
    func allZones(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let file = try cli.file("notes.ndjson", Input.notes(6))
            let created = try await cli.run(["zones", "create", "Work", "Home", "--database", "private"])
            #expect(created.exitCode == 0, "\(created)")
            for zone in ["_defaultZone", "Work", "Home"] {
                let imported = try await cli.run(["import", file, "--database", "private", "--zone", zone])
                #expect(imported.exitCode == 0, "\(imported)")
            }
            // Each name in three zones, tied on count: the zone breaks the tie.
            let expected = (1...6).flatMap { i in ["Home", "Work", "_defaultZone"].map { "\($0)/n\(i)" } }
            func zoneNames(_ stdout: String) throws -> [String] {
                try JSONLine.objects(stdout).map { object in
                    let zone = (object["zoneID"] as? [String: Any])?["zoneName"] as? String ?? "?"
                    return "\(zone)/\(object["recordName"] as? String ?? "?")"
                }
            }

            var paged: [String] = []
            var arguments = ["query", "--type", "Note", "--sort", "count", "--limit", "4", "--database", "private", "--all-zones"]
            for _ in 0..<10 {
                let page = try await cli.run(arguments)
                #expect(page.exitCode == 0, "\(page)")
                paged += try zoneNames(page.stdout)
                guard let token = page.stderrLines.first?.wholeMatch(of: #/cursor: (\S+)/#)?.1 else { break }
                // The cursor goes on over every zone without --all-zones given again.
                arguments = ["query", "--type", "Note", "--sort", "count", "--limit", "4", "--database", "private", "--cursor", String(token)]
            }
            #expect(paged == expected)

            let exported = try await cli.run(["export", "--type", "Note", "--sort", "count", "--database", "private", "--all-zones"])
            #expect(exported.exitCode == 0, "\(exported)")
            // An export reads zone after zone, each from a snapshot of its own, in the query's order.
            #expect(try zoneNames(exported.stdout) == ["Home", "Work", "_defaultZone"].flatMap { zone in (1...6).map { "\(zone)/n\($0)" } })
            let counted = try await cli.run(["count", "--type", "Note", "--where", "count > 4", "--database", "private", "--all-zones", "--json"])
            #expect(counted.exitCode == 0, "\(counted)")
            let object = try #require(try JSONLine.objects(counted.stdout).first)
            #expect(object["count"] as? Int == 6 && object["allZones"] as? Bool == true && object["zone"] == nil, "\(object)")
            let oneZone = try await cli.run(["count", "--type", "Note", "--database", "private", "--zone", "Work"])
            #expect(oneZone.stdout == "6\n")

            let oneZonePage = try await cli.run(["query", "--type", "Note", "--limit", "2", "--database", "private"])
            let oneZoneToken = String(try #require(oneZonePage.stderrLines.first?.wholeMatch(of: #/cursor: (\S+)/#)?.1, "\(oneZonePage)"))
            let allZonesPage = try await cli.run(["query", "--type", "Note", "--limit", "2", "--database", "private", "--all-zones"])
            let allZonesToken = String(try #require(allZonesPage.stderrLines.first?.wholeMatch(of: #/cursor: (\S+)/#)?.1, "\(allZonesPage)"))
            for refused in [["query", "--type", "Note", "--all-zones", "--zone", "Work"], ["export", "--type", "Note", "--all-zones", "--format", "csv"],
                            ["query", "--type", "Note", "--all-zones", "--format", "csv"], ["query", "--type", "Note", "--all-zones", "--explain"],
                            ["query", "--cursor", oneZoneToken, "--all-zones"], ["query", "--cursor", allZonesToken, "--zone", "Work"]] {
                let result = try await cli.run(refused + ["--database", "private"])
                #expect(result.exitCode == 64 && result.stderr.contains("zone"), "\(refused): \(result)")
            }
        }
    }

    @Test("a cursor of one zone goes on in its zone: --zone naming another is a usage error, not a page of the cursor's zone; with --type and without --zone it goes on", arguments: TestEngine.all)
    func cursorOfAnotherZone(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let file = try cli.file("notes.ndjson", Input.notes(6))
            #expect(try await cli.run(["zones", "create", "Work", "Home", "--database", "private"]).exitCode == 0)
            for zone in ["Work", "Home"] {
                let imported = try await cli.run(["import", file, "--database", "private", "--zone", zone])
                #expect(imported.exitCode == 0, "\(imported)")
            }
            let first = try await cli.run(["query", "--type", "Note", "--sort", "count", "--limit", "2", "--database", "private", "--zone", "Work"])
            #expect(first.exitCode == 0, "\(first)")
            let token = String(try #require(first.stderrLines.first?.wholeMatch(of: #/cursor: (\S+)/#)?.1, "\(first)"))
            for extra in [[], ["--type", "Note", "--sort", "count"]] {
                let refused = try await cli.run(["query", "--cursor", token, "--database", "private", "--zone", "Home"] + extra)
                #expect(refused.exitCode == 64 && refused.stdout.isEmpty, "\(refused)")
                #expect(refused.stderr.contains("Work") && refused.stderr.contains("--zone Home"), "\(refused)")
                // Without --zone the cursor names its zone; the same query is not "a different query".
                let next = try await cli.run(["query", "--cursor", token, "--database", "private", "--limit", "10"] + extra)
                #expect(next.exitCode == 0, "\(next)")
                #expect(try JSONLine.names(next.stdout) == ["n3", "n4", "n5", "n6"], "\(next)")
            }
            let sameZone = try await cli.run(["query", "--cursor", token, "--database", "private", "--zone", "Work", "--limit", "10"])
            #expect(sameZone.exitCode == 0, "\(sameZone)")
            #expect(try JSONLine.names(sameZone.stdout) == ["n3", "n4", "n5", "n6"], "\(sameZone)")
        }
    }

    @Test("a --type that is no record type name (empty, a space, too long) is a usage error saying so, before the store is read: no note about the schema", arguments: TestEngine.all)
    func badRecordTypeName(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            #expect(try await cli.run(["import", "-"], stdin: Input.notes(2)).exitCode == 0)
            for type in ["", "a b", String(repeating: "A", count: 300)] {
                for command in [["count"], ["query"], ["export", "--all-zones"]] {
                    let result = try await cli.run(command + ["--type", type])
                    #expect(result.exitCode == 64 && result.stdout.isEmpty, "\(result)")
                    #expect(result.stderr.contains("--type: record type") && !result.stderr.contains("note:"), "\(result)")
                }
            }
        }
    }

    @Test("one page: NDJSON on stdout, `cursor: TOKEN` on stderr, --where, --fields; no cursor at the end", arguments: TestEngine.all)
    func onePage(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            _ = try await cli.run(["import", try cli.file("notes.ndjson", Input.notes(12))])
            let first = try await cli.run(["query", "--type", "Note", "--where", "count > 2", "--sort", "count", "--limit", "5", "--fields", "count"])
            #expect(first.exitCode == 0, "\(first)")
            #expect(try JSONLine.names(first.stdout) == ["n3", "n4", "n5", "n6", "n7"])
            let record = try #require(try JSONLine.objects(first.stdout).first)
            #expect((record["fields"] as? [String: Any]).map { Array($0.keys) } == ["count"])
            #expect(first.stderrLines.count == 1)
            let token = try #require(first.stderrLines.first?.wholeMatch(of: #/cursor: (\S+)/#)?.1, "\(first)")

            let second = try await cli.run(["query", "--type", "Note", "--where", "count > 2", "--sort", "count", "--limit", "5", "--cursor", String(token)])
            #expect(second.exitCode == 0, "\(second)")
            #expect(try JSONLine.names(second.stdout) == ["n8", "n9", "n10", "n11", "n12"])
            // Five left and five shown: either no cursor, or one that gives an empty last page.
            if let next = second.stderrLines.first?.wholeMatch(of: #/cursor: (\S+)/#)?.1 {
                let third = try await cli.run(["query", "--cursor", String(next), "--limit", "5"])
                #expect(third.exitCode == 0, "\(third)")
                #expect(third.stdout.isEmpty)
                #expect(third.stderr.isEmpty, "no cursor after the last page: \(third)")
            }

            let onlyCursor = try await cli.run(["query", "--cursor", String(token), "--limit", "2"])
            #expect(onlyCursor.exitCode == 0, "--type is not needed with --cursor: \(onlyCursor)")
            #expect(try JSONLine.names(onlyCursor.stdout) == ["n8", "n9"])

            let all = try await cli.run(["query", "--type", "Note", "--limit", "100"])
            #expect(all.stdoutLines.count == 12)
            #expect(all.stderr.isEmpty, "no cursor when everything fit: \(all)")
            let none = try await cli.run(["query", "--type", "Note", "--where", "count > 100"])
            #expect(none.exitCode == 0)
            #expect(none.stdout.isEmpty && none.stderr.isEmpty)
        }
    }

    @Test("--format envelope: each page is one CloudKit records/query object; its continuationMarker pages on; nothing on stderr", arguments: TestEngine.all)
    func envelopePages(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            _ = try await cli.run(["import", try cli.file("notes.ndjson", Input.notes(12))])
            var names: [String] = []
            var marker: String?
            var pages = 0
            repeat {
                var arguments = ["query", "--type", "Note", "--sort", "count", "--limit", "5", "--format", "envelope"]
                if let marker { arguments += ["--cursor", marker] }
                let page = try await cli.run(arguments)
                #expect(page.exitCode == 0 && page.stderr.isEmpty, "\(page)")
                let object = try JSONLine.object(page.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
                let records = try #require(object["records"] as? [[String: Any]], "\(page)")
                names += records.compactMap { $0["recordName"] as? String }
                #expect(Set(object.keys).isSubset(of: ["records", "continuationMarker"]), "\(object.keys)")
                marker = object["continuationMarker"] as? String
                pages += 1
            } while marker != nil && pages < 10
            #expect(names == (1...12).map { "n\($0)" })
            #expect(pages == 3 || pages == 4, "\(pages) pages")

            let empty = try await cli.run(["query", "--type", "Note", "--where", "count > 100", "--format", "envelope"])
            #expect(empty.stdout == "{\"records\":[]}\n", "\(empty)")
            let bad = try await cli.run(["query", "--type", "Note", "--format", "xml"])
            #expect(bad.exitCode == 64, "\(bad)")
        }
    }

    @Test("comparison options such as [c] are refused with a message that says what equality does", arguments: TestEngine.all)
    func comparisonOptions(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            try await cli.createStore()
            let result = try await cli.run(["query", "--type", "Note", "--where", "title ==[c] 'milk'"])
            #expect(result.exitCode == 64, "\(result)")
            #expect(result.stderr.contains("[c]") && result.stderr.contains("equality") && result.stderr.contains("ignores case"), "\(result)")
            #expect(!result.stderr.contains("case- and diacritic-sensitive"), "\(result)")
        }
    }

    @Test("--where reads a string compared with a REFERENCE field as a record name; a condition whose form no field of its declared type can match, or no query runs, is exit 64 in query, count, update and delete", arguments: TestEngine.all)
    func conditionsByDeclaredType(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let records = [
                #"{"recordName":"a","recordType":"T","fields":{"r":{"value":{"recordName":"r01","action":"NONE"},"type":"REFERENCE"},"#
                    + #""tags":{"value":["red","blue"],"type":"STRING_LIST"},"nums":{"value":[1,2],"type":"INT64_LIST"},"#
                    + #""loc":{"value":{"latitude":1,"longitude":2},"type":"LOCATION"},"n":{"value":12,"type":"INT64"},"s":{"value":"red","type":"STRING"},"blob":{"value":"AAEC","type":"BYTES"},"#
                    + #""blobs":{"value":["AAEC"],"type":"BYTES_LIST"},"pic":{"value":{"fileChecksum":"AV4x","size":3,"downloadURL":"https://cvws.icloud-content.com/B/x"},"type":"ASSETID"}}}"#,
                #"{"recordName":"b","recordType":"T","fields":{"r":{"value":{"recordName":"r02","action":"NONE"},"type":"REFERENCE"},"n":{"value":3,"type":"INT64"}}}"#,
                #"{"recordName":"c","recordType":"T","fields":{"mix":{"value":1,"type":"NUMBER_INT64"},"refs":{"value":[{"recordName":"a","action":"NONE"}],"type":"REFERENCE_LIST"}}}"#,
            ]
            #expect(try await cli.run(["import", try cli.file("t.ndjson", records.joined(separator: "\n") + "\n")]).exitCode == 0)

            #expect(try await cli.count("T", where: "r == 'r01'") == 1, "a record name, as recordID == 'a' reads one")
            #expect(try await cli.count("T", where: "r IN {'r01', 'r02'}") == 2)
            #expect(try await cli.count("T", where: "r == REFERENCE('r02')") == 1)
            #expect(try await cli.count("T", where: "tags CONTAINS 'red' AND ANY tags BEGINSWITH 'bl'") == 1)
            for (condition, said) in [
                ("tags == 'red'", "tags is LIST<STRING> in the schema, a list"), ("nums == 2", "nums is LIST<INT64> in the schema, a list"),
                // Types as the schema language (and `schema export`) names them.
                ("mix == '3'", "mix is NUMBER in the schema, and '3' is a string, which no NUMBER field holds"),
                ("refs CONTAINS 5", "refs is a LIST<REFERENCE> in the schema: compare it with a record name ('refs CONTAINS \"name\"')"),
                ("loc == 'x'", "loc is LOCATION in the schema"), ("n BEGINSWITH '1'", "n is INT64 in the schema, and BEGINSWITH"),
                ("tags BEGINSWITH 'r'", "ANY tags BEGINSWITH"), ("n CONTAINS 1", "n is INT64 in the schema, not a list"),
                ("distanceToLocation:fromLocation:(s, LOCATION(1, 2)) < 5", "s is STRING in the schema, and distanceToLocation"),
                ("r == 5", "r is a REFERENCE in the schema: compare it with a record name ('r == \"name\"') or REFERENCE(\"name\"), not an INT64"),
                ("s == now", "s is STRING in the schema, and the condition compares it with a date, which no STRING field holds"),
                ("n == REFERENCE('a')", "n is INT64 in the schema, and the condition compares it with a reference"),
                ("n < CAST(0, 'NSDate')", "n is INT64 in the schema, and the condition compares it with a date"),
                ("s IN {'x', LOCATION(1, 2)}", "s is STRING in the schema, and the condition compares it with a location"),
                // No query compares bytes or assets: refused before the store is read, as the option it is.
                ("blob == BYTES('AAEC')", "--where: blob is BYTES in the schema, which no query compares"),
                ("blob == 'AAEC'", "--where: blob is BYTES in the schema, which no query compares"),
                ("ANY blobs == 'AAEC'", "--where: blobs is LIST<BYTES> in the schema, which no query compares"),
                ("pic == 'x'", "--where: pic is ASSET in the schema, which no query compares"),
                ("n == 12 AND NOT pic == 'x'", "--where: pic is ASSET in the schema"),
                // Reserved keys name no field.
                ("recordType == 'T'", "'recordType' names no field"), ("recordChangeTag == 'x'", "'recordChangeTag' names no field"),
            ] {
                for command in [["count"], ["query"], ["update", "--set", "n=1"], ["delete", "--yes"]] {
                    let result = try await cli.run(command + ["--type", "T", "--where", condition])
                    #expect(result.exitCode == 64 && result.stderr.contains(said), "\(result)")
                }
            }
            // A sort key whose type has no order.
            for key in ["tags", "loc", "nums"] {
                let sorted = try await cli.run(["query", "--type", "T", "--sort", key])
                #expect(sorted.exitCode == 64 && sorted.stderr.contains("--sort \(key): \(key) is") && sorted.stderr.contains("has no order"), "\(sorted)")
            }
            #expect(try await cli.run(["query", "--type", "T", "--sort", "r:desc"]).exitCode == 0)
            let deleted = try await cli.run(["delete", "--type", "T", "--where", "r == 'r02'", "--yes"])
            #expect(deleted.exitCode == 0, "\(deleted)")
            #expect(try await cli.count("T") == 2, "a and c stay")
        }
    }

    @Test("--cursor - reads the cursor (or its cursor: line) from stdin; a cursor that cannot be written to stderr is exit 73; a --where with now says to pass the cursor alone; a misspelt --sort field gets a note", arguments: TestEngine.all)
    func cursorScripting(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            _ = try await cli.run(["import", try cli.file("notes.ndjson", Input.notes(12))])
            let first = try await cli.run(["query", "--type", "Note", "--sort", "count", "--limit", "5"])
            let line = try #require(first.stderrLines.first { $0.hasPrefix("cursor: ") }, "\(first)")
            let fromLine = try await cli.run(["query", "--cursor", "-", "--limit", "5"], stdin: line + "\n")
            #expect(fromLine.exitCode == 0, "\(fromLine)")
            #expect(try JSONLine.names(fromLine.stdout) == ["n6", "n7", "n8", "n9", "n10"], "\(fromLine)")
            let fromToken = try await cli.run(["query", "--cursor", "-", "--limit", "5"], stdin: String(line.dropFirst("cursor: ".count)))
            #expect(fromToken.stdout == fromLine.stdout, "\(fromToken)")
            let fromArgument = try await cli.run(["query", "--cursor", line, "--limit", "5"])
            #expect(fromArgument.stdout == fromLine.stdout, "the page's line given as it is: \(fromArgument)")
            // A cursor goes on in the database its query searched, unless --database says another.
            _ = try await cli.run(["import", try cli.file("private.ndjson", Input.notes(7, prefix: "p")), "--database", "private", "--quiet"])
            let privatePage = try await cli.run(["query", "--type", "Note", "--sort", "count", "--limit", "5", "--database", "private"])
            let privateLine = try #require(privatePage.stderrLines.first { $0.hasPrefix("cursor: ") }, "\(privatePage)")
            let privateRest = try await cli.run(["query", "--cursor", privateLine, "--limit", "5"])
            #expect(try privateRest.exitCode == 0 && JSONLine.names(privateRest.stdout).count == 2, "\(privateRest)")
            let otherDatabase = try await cli.run(["query", "--cursor", privateLine, "--database", "public"])
            #expect(otherDatabase.exitCode == 64 && otherDatabase.stderr.contains("the cursor belongs to"), "\(otherDatabase)")
            #expect(try await cli.run(["query", "--cursor", "-"], stdin: "").exitCode == 64)

            let lost = try await cli.shell(#""$STRATUS" query --type Note --sort count --limit 5 2>/dev/full"#)
            #expect(lost.exitCode == 73, "a page whose cursor is lost is no last page: \(lost)")

            let dated = try await cli.run(["query", "--type", "Note", "--where", "modificationDate < now", "--limit", "5"])
            let datedToken = String(try #require(dated.stderrLines.first?.wholeMatch(of: #/cursor: (\S+)/#)?.1, "\(dated)"))
            let other = try await cli.run(["query", "--type", "Note", "--where", "modificationDate < now AND count > 0", "--limit", "5", "--cursor", datedToken])
            #expect(other.exitCode == 64 && other.stderr.contains("or pass the cursor alone"), "\(other)")
            #expect(try await cli.run(["query", "--cursor", datedToken, "--limit", "5"]).exitCode == 0)

            // A misspelt sort field is advice, as the index advice is: a script's stderr holds the cursor line alone.
            let misspelt = try await cli.run(["query", "--type", "Note", "--sort", "cuont", "--limit", "5"], environment: ["STRATUS_ADVICE": "always"])
            #expect(misspelt.exitCode == 0 && misspelt.stderr.contains("has no field 'cuont'"), "\(misspelt)")
            let scripted = try await cli.run(["query", "--type", "Note", "--sort", "cuont", "--limit", "5"], environment: ["STRATUS_ADVICE": "never"])
            #expect(scripted.stderrLines.count == 1 && scripted.stderrLines.first?.hasPrefix("cursor: ") == true, "\(scripted)")
            // A page's whole stderr on stdin: its cursor line is the cursor.
            let whole = try await cli.run(["query", "--cursor", "-", "--limit", "5"], stdin: misspelt.stderr)
            #expect(whole.exitCode == 0 && whole.stdoutLines.count == 5, "\(whole)")
        }
    }

    @Test("CSV columns of a query page and an export are typed by the schema, whatever the first record holds or lacks", arguments: TestEngine.all)
    func csvColumnsFromTheSchema(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let lines = [#"{"recordName":"a","recordType":"P","fields":{"rank":{"value":1,"type":"INT64"}}}"#,
                         #"{"recordName":"b","recordType":"P","fields":{"rank":{"value":2,"type":"INT64"},"score":{"value":2.5,"type":"DOUBLE"}}}"#]
            #expect(try await cli.run(["import", try cli.file("p.ndjson", lines.joined(separator: "\n") + "\n")]).exitCode == 0)
            let page = try await cli.run(["query", "--type", "P", "--sort", "rank", "--limit", "1", "--fields", "score", "--format", "csv"])
            #expect(page.exitCode == 0 && page.stdoutLines.first?.hasSuffix(",score:DOUBLE") == true, "\(page)")
            let export = try await cli.run(["export", "--type", "P", "--sort", "rank", "--fields", "score,rank", "--format", "csv"])
            #expect(export.exitCode == 0 && export.stdoutLines.first?.hasSuffix(",score:DOUBLE,rank:INT64") == true, "\(export)")
        }
    }

    @Test("a cursor used with a different --where, --type or --sort, or a garbled one, is exit 64", arguments: TestEngine.all)
    func cursorForAnotherQuery(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            _ = try await cli.run(["import", try cli.file("notes.ndjson", Input.notes(6) + Input.notes(3, prefix: "t").replacingOccurrences(of: "\"Note\"", with: "\"Task\""))])
            let first = try await cli.run(["query", "--type", "Note", "--where", "count > 1", "--limit", "2"])
            let token = String(try #require(first.stderrLines.first?.wholeMatch(of: #/cursor: (\S+)/#)?.1, "\(first)"))

            for arguments in [
                ["query", "--type", "Note", "--where", "count > 2", "--limit", "2", "--cursor", token],
                ["query", "--type", "Task", "--where", "count > 1", "--limit", "2", "--cursor", token],
                ["query", "--type", "Note", "--limit", "2", "--cursor", token],
                ["query", "--type", "Note", "--where", "count > 1", "--sort", "count:desc", "--limit", "2", "--cursor", token],
                // Without --type, --where and --sort are compared as the query of the cursor's type.
                ["query", "--where", "count > 5", "--limit", "2", "--cursor", token],
                ["query", "--where", "count > 1", "--sort", "count:desc", "--limit", "2", "--cursor", token],
                ["query", "--cursor", "not-a-cursor"],
                ["query", "--cursor", String(token.dropLast(3))],
            ] {
                let result = try await cli.run(arguments)
                #expect(result.exitCode == 64, "\(result)")
                #expect(result.stdout.isEmpty, "\(result)")
                #expect(result.stderr.contains("stratus: "), "\(result)")
            }
            let same = try await cli.run(["query", "--type", "Note", "--where", "count > 1", "--limit", "2", "--cursor", token])
            #expect(same.exitCode == 0, "\(same)")
            let sameWithoutType = try await cli.run(["query", "--where", "count > 1", "--limit", "2", "--cursor", token])
            #expect(sameWithoutType.exitCode == 0 && sameWithoutType.stdout == same.stdout, "\(sameWithoutType)")

            for arguments in [["query"], ["query", "--type", "Note", "--limit", "0"], ["query", "--type", "Note", "--where", "count >"], ["query", "--type", "Note", "--wat"]] {
                let usage = try await cli.run(arguments)
                #expect(usage.exitCode == 64, "\(usage)")
                #expect(usage.stdout.isEmpty)
            }
        }
    }
}
