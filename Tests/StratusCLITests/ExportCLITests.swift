import Foundation
import StratusTestSupport
import Testing

/// `stratus export` end to end, and the round trip import → export for every field type and
/// system field, through every format.
@Suite("stratus export", .timeLimit(.minutes(30)))
struct ExportCLITests {
    /// Records in exactly the JSON `stratus export` writes (fields sorted by key, system fields,
    /// zone), so that an export of what was imported must equal the input line for line.
    enum EveryType {
        static let zone = #""zoneID":{"zoneName":"_defaultZone","ownerRecordName":"__defaultOwner__"}"#

        static func line(name: String, type: String, tag: String, created: String, modified: String, fields: [String: String]) -> String {
            let body = fields.keys.sorted().map { "\"\($0)\":\(fields[$0]!)" }.joined(separator: ",")
            return #"{"recordName":"\#(name)","recordType":"\#(type)","recordChangeTag":"\#(tag)","fields":{\#(body)},"#
                + #""created":\#(created),"modified":\#(modified),\#(zone)}"#
        }

        static func field(_ value: String, _ type: String) -> String { #"{"value":\#(value),"type":"\#(type)"}"# }

        static func location(_ lat: String, _ lon: String, timestamp: String) -> String {
            #"{"latitude":\#(lat),"longitude":\#(lon),"altitude":12.5,"horizontalAccuracy":5.0,"verticalAccuracy":2.25,"course":90.0,"speed":1.5,"timestamp":\#(timestamp)}"#
        }

        /// Two records of one type with every non-asset field type, plus reference targets.
        static var lines: [String] {
            var result: [String] = []
            for i in 1...2 {
                let fields: [String: String] = [
                    "string": field(i == 1 ? #""héllo \"quoted\" back\\slash\nline\ttab 🎉""# : #""""#, "STRING"),
                    "int": field(i == 1 ? "9223372036854775807" : "-9223372036854775808", "INT64"),
                    "smallInt": field(i == 1 ? "2" : "0", "INT64"),
                    "double": field(i == 1 ? "2.0" : "-0.1", "DOUBLE"),
                    "tinyDouble": field(i == 1 ? "1e-07" : "1.5e+300", "DOUBLE"),
                    "date": field(i == 1 ? "1735689600000" : "-86400000", "TIMESTAMP"),
                    "dateFraction": field(i == 1 ? "1735689600000.5" : "1735689600123.25", "TIMESTAMP"),
                    "bytes": field(i == 1 ? #""AAECA/7/""# : #""""#, "BYTES"),
                    "reference": field(#"{"recordName":"target-\#(i)","action":"NONE"}"#, "REFERENCE"),
                    "deleteSelf": field(#"{"recordName":"target-\#(i)","action":"DELETE_SELF"}"#, "REFERENCE"),
                    "location": field(location(i == 1 ? "37.33182" : "-33.8688", i == 1 ? "-122.03118" : "151.2093", timestamp: "1735689600000"), "LOCATION"),
                    "stringList": field(#"["a","b, c","\"d\""]"#, "STRING_LIST"),
                    "intList": field("[1,-2,3]", "INT64_LIST"),
                    "doubleList": field("[1.0,2.5,-3.75]", "DOUBLE_LIST"),
                    "dateList": field("[1735689600000,1735689600001.5]", "TIMESTAMP_LIST"),
                    "bytesList": field(#"["AQI=","","/w=="]"#, "BYTES_LIST"),
                    "referenceList": field(#"[{"recordName":"target-1","action":"NONE"},{"recordName":"target-2","action":"DELETE_SELF"}]"#, "REFERENCE_LIST"),
                    "locationList": field("[" + location("1.0", "2.0", timestamp: "0") + "," + location("-1.5", "179.25", timestamp: "1735689600000") + "]", "LOCATION_LIST"),
                    "emptyInts": field("[]", "INT64_LIST"),
                ]
                result.append(line(
                    name: "every-\(i)", type: "Everything", tag: "tag-every-\(i)",
                    created: #"{"timestamp":1735689600000,"userRecordName":"_creator\#(i)"}"#,
                    modified: #"{"timestamp":1735776000000.5,"userRecordName":"_modifier\#(i)"}"#, fields: fields))
            }
            for i in 1...2 {
                result.append(line(
                    name: "target-\(i)", type: "Target", tag: "tag-target-\(i)",
                    created: #"{"timestamp":1700000000000,"userRecordName":"_creator"}"#,
                    modified: #"{"timestamp":1700000000001,"userRecordName":"_creator"}"#,
                    fields: ["title": field(#""target \#(i)""#, "STRING")]))
            }
            return result
        }
    }

    @Test("export of what was imported equals the input, every field type and system field, in every format", arguments: TestEngine.all)
    func roundTripEveryFormat(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let input = EveryType.lines
            let imported = try await cli.run(["import", try cli.file("every.ndjson", input.joined(separator: "\n") + "\n")])
            #expect(imported.exitCode == 0, "\(imported)")
            Summary.expectImport(imported, imported: input.count)

            let everything = try await cli.run(["export", "--type", "Everything", "--sort", "recordName", "--quiet"])
            #expect(everything.exitCode == 0, "\(everything)")
            #expect(everything.stderr.isEmpty)
            let targets = try await cli.run(["export", "--type", "Target", "--sort", "recordName", "--quiet"])
            let exported = everything.stdoutLines + targets.stdoutLines
            #expect(exported.count == input.count)
            for (got, want) in zip(exported, input) {
                #expect(got == want, "the export differs from the imported line")
            }

            // Every format, exported to a file and imported into a fresh store, comes back the same.
            for format in ["ndjson", "json", "envelope", "csv"] {
                let file = store.path("exported.\(format)")
                let out = try await cli.run(["export", "--type", "Everything", "--format", format, "--output", file])
                #expect(out.exitCode == 0, "\(out)")
                #expect(out.stdout.isEmpty, "with --output nothing goes to stdout")
                #expect(out.stderrLines.last?.hasPrefix("exported 2 record") == true, "\(out)")
                let fresh = try await cli.newStore("fresh-\(format)")
                let back = try await cli.run(["import", file, "--format", format, "--store", fresh])
                #expect(back.exitCode == 0, "\(format): \(back)")
                Summary.expectImport(back, imported: 2)
                let again = try await cli.run(["export", "--type", "Everything", "--sort", "recordName", "--store", fresh, "--quiet"])
                #expect(again.stdoutLines == Array(input.prefix(2)), "\(format): the re-imported export differs from the input")
            }
        }
    }

    @Test("an ASSETID field imports from a file and exports with its size and the same bytes", arguments: TestEngine.all)
    func assets(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let bytes = patternBytes(count: 10_000, seed: 7)
            let source = try store.writeFile("photo.bin", bytes)
            // Asset paths are relative to --assets-dir (absolute paths are refused).
            let line = #"{"recordName":"pic","recordType":"Photo","fields":{"image":{"value":{"downloadURL":"photo.bin"},"type":"ASSETID"},"thumbs":{"value":[{"downloadURL":"./photo.bin"}],"type":"ASSETID_LIST"}}}"#
            let result = try await cli.run(["import", try cli.file("photo.ndjson", line + "\n"), "--assets-dir", store.directory.path])
            #expect(result.exitCode == 0, "\(result)")
            try FileManager.default.removeItem(at: source)

            let record = try #require(try await cli.exported("Photo")["pic"])
            let image = try #require(JSONLine.field(record, "image"))
            #expect(image["type"] as? String == "ASSETID" || image["type"] as? String == "ASSET")
            let value = try #require(image["value"] as? [String: Any])
            #expect(value["size"] as? Int == bytes.count)
            let downloadURL = try #require(value["downloadURL"] as? String)
            let url = try #require(URL(string: downloadURL))
            #expect(FileManager.default.contents(atPath: url.path) == bytes, "the exported asset holds the imported bytes")
            let thumbs = try #require(JSONLine.field(record, "thumbs")?["value"] as? [[String: Any]])
            #expect(thumbs.count == 1)
            #expect(thumbs.first?["size"] as? Int == bytes.count)
        }
    }

    @Test("--where, --sort, --fields and --limit select, order and trim the export", arguments: TestEngine.all)
    func selection(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            _ = try await cli.run(["import", try cli.file("notes.ndjson", Input.notes(10))])

            let filtered = try await cli.run(["export", "--type", "Note", "--where", "count >= 4 AND count < 8", "--sort", "count:desc", "--quiet"])
            #expect(filtered.exitCode == 0, "\(filtered)")
            #expect(try JSONLine.names(filtered.stdout) == ["n7", "n6", "n5", "n4"])

            let ascending = try await cli.run(["export", "--type", "Note", "--sort", "count", "--limit", "3", "--quiet"])
            #expect(try JSONLine.names(ascending.stdout) == ["n1", "n2", "n3"])

            let trimmed = try await cli.run(["export", "--type", "Note", "--fields", "title", "--where", "count == 2", "--quiet"])
            let record = try #require(try JSONLine.objects(trimmed.stdout).first)
            #expect((record["fields"] as? [String: Any]).map { Array($0.keys) } == ["title"])
            #expect(record["recordChangeTag"] is String, "system fields come with --fields too")

            let csv = try await cli.run(["export", "--type", "Note", "--fields", "count,title", "--format", "csv", "--sort", "count", "--limit", "2", "--quiet"])
            #expect(csv.exitCode == 0, "\(csv)")
            let rows = csv.stdoutLines
            #expect(rows.first?.hasPrefix("recordName,recordType") == true, "\(csv)")
            #expect(rows.first?.hasSuffix("count:INT64,title:STRING") == true, "\(csv)")
            #expect(rows.count == 3)
            #expect(rows.dropFirst().first?.hasPrefix("n1,Note,") == true)
            #expect(rows.dropFirst().first?.hasSuffix(",1,title 1") == true, "\(rows)")

            let json = try await cli.run(["export", "--type", "Note", "--format", "json", "--limit", "2", "--quiet"])
            let array = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]], "\(json)")
            #expect(array.count == 2)
            let envelope = try await cli.run(["export", "--type", "Note", "--format", "envelope", "--where", "count > 8", "--quiet"])
            let body = try #require(try JSONSerialization.jsonObject(with: Data(envelope.stdout.utf8)) as? [String: Any], "\(envelope)")
            #expect((body["records"] as? [[String: Any]])?.compactMap { $0["recordName"] as? String }.sorted() == ["n10", "n9"])

            let empty = try await cli.run(["export", "--type", "Nothing", "--format", "json", "--quiet"])
            #expect(empty.exitCode == 0, "\(empty)")
            #expect(empty.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "[]")

            let none = try await cli.run(["export", "--type", "Note", "--format", "json", "--limit", "0", "--quiet"])
            #expect(none.exitCode == 0, "\(none)")
            #expect(none.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "[]", "--limit 0 exports nothing: \(none)")
        }
    }

    @Test("summary on stderr, --quiet and --progress json; data alone on stdout", arguments: TestEngine.all)
    func progressAndSummary(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            _ = try await cli.run(["import", try cli.file("notes.ndjson", Input.notes(3))])
            let plain = try await cli.run(["export", "--type", "Note"])
            #expect(plain.exitCode == 0, "\(plain)")
            #expect(plain.stdoutLines.count == 3)
            #expect(plain.stderrLines.last?.wholeMatch(of: #/exported 3 records? in [0-9]+\.[0-9] s/#) != nil, "\(plain)")
            let quiet = try await cli.run(["export", "--type", "Note", "--quiet"])
            #expect(quiet.stderr.isEmpty)
            #expect(quiet.stdout == plain.stdout)
            let json = try await cli.run(["export", "--type", "Note", "--progress", "json"])
            let events = try JSONLine.objects(json.stderr)
            #expect(events.last?["event"] as? String == "summary", "\(json)")
            #expect(events.last?["exported"] as? Int == 3)
        }
    }

    @Test("--output: a new file, not overwritten without --force (73), replaced with --force", arguments: TestEngine.all)
    func outputFile(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            _ = try await cli.run(["import", try cli.file("notes.ndjson", Input.notes(3))])
            let output = store.path("out.ndjson")
            let first = try await cli.run(["export", "--type", "Note", "--output", output])
            #expect(first.exitCode == 0, "\(first)")
            #expect(first.stdout.isEmpty)
            #expect(try JSONLine.names(cli.read(output) ?? "").sorted() == ["n1", "n2", "n3"])
            // A new file holds the store's records: as private as the store, whatever the umask.
            #expect((try FileManager.default.attributesOfItem(atPath: output)[.posixPermissions] as? NSNumber)?.intValue == 0o600)

            try "keep me\n".write(toFile: output, atomically: true, encoding: .utf8)
            let refused = try await cli.run(["export", "--type", "Note", "--output", output])
            #expect(refused.exitCode == 73, "\(refused)")
            #expect(refused.stderr.contains(output) && refused.stderr.contains("--force"), "\(refused)")
            #expect(cli.read(output) == "keep me\n", "an existing file is not touched without --force")

            // A run killed before its rename (timeout -s KILL) left its temporary file; the next run removes it.
            let killedRun = output + ".partial-4194303"
            try "half an export".write(toFile: killedRun, atomically: false, encoding: .utf8)
            // One whose writer holds it, of a pid this process does not see (another PID namespace, another host), stays.
            let elsewhere = output + ".partial-4194302"
            try "an export running elsewhere".write(toFile: elsewhere, atomically: false, encoding: .utf8)
            let held = open(elsewhere, O_RDONLY)
            #expect(held >= 0 && flock(held, LOCK_EX) == 0)
            defer { close(held) }
            // The file replaced keeps its permissions.
            #expect(chmod(output, 0o640) == 0)
            let forced = try await cli.run(["export", "--type", "Note", "--output", output, "--force", "--where", "count == 1"])
            #expect(forced.exitCode == 0, "\(forced)")
            #expect(try JSONLine.names(cli.read(output) ?? "") == ["n1"])
            #expect((try FileManager.default.attributesOfItem(atPath: output)[.posixPermissions] as? NSNumber)?.intValue == 0o640)

            let leftovers = try FileManager.default.contentsOfDirectory(atPath: store.directory.path).filter { $0.contains(".partial") }
            #expect(leftovers == ["out.ndjson.partial-4194302"], "no temporary file of a gone run is left: \(leftovers)")

            let noDirectory = try await cli.run(["export", "--type", "Note", "--output", store.path("missing/dir/out.ndjson")])
            #expect(noDirectory.exitCode == 73, "\(noDirectory)")
            #expect(noDirectory.stderr.contains("cannot create \(store.path("missing/dir/out.ndjson")): the folder \(store.path("missing/dir")) does not exist"),
                    "names the path the user gave and why: \(noDirectory.stderr)")
            #expect(!noDirectory.stderr.contains(".partial"), "not the temporary file written beside it: \(noDirectory.stderr)")
        }
    }

    @Test("--output into a FIFO, a character device or /dev/stdout writes directly, with no --force and no temporary file", arguments: TestEngine.all)
    func outputSpecialFiles(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            _ = try await cli.run(["import", try cli.file("notes.ndjson", Input.notes(3))])
            // The reader gives up after a while, so that an export that never opens the FIFO fails
            // the test instead of leaving the reader waiting.
            let fifo = try await cli.shell(#"mkfifo out.fifo && { timeout 600 cat out.fifo > got.ndjson & "$STRATUS" export --type Note --output out.fifo --quiet; status=$?; wait; exit $status; }"#)
            #expect(fifo.exitCode == 0, "\(fifo)")
            #expect(try JSONLine.names(cli.read(store.path("got.ndjson")) ?? "").sorted() == ["n1", "n2", "n3"], "the FIFO's reader got the export")
            var info = stat()
            #expect(lstat(store.path("out.fifo"), &info) == 0 && (info.st_mode & S_IFMT) == S_IFIFO, "the FIFO is still a FIFO")

            let viaStdout = try await cli.shell(#""$STRATUS" export --type Note --output /dev/stdout --quiet > redirected.ndjson"#)
            #expect(viaStdout.exitCode == 0, "\(viaStdout)")
            #expect(try JSONLine.names(cli.read(store.path("redirected.ndjson")) ?? "").sorted() == ["n1", "n2", "n3"])
            let piped = try await cli.run(["export", "--type", "Note", "--output", "/dev/stdout", "--quiet"])
            #expect(piped.exitCode == 0 && piped.stdoutLines.count == 3, "\(piped)")

            let null = try await cli.run(["export", "--type", "Note", "--output", "/dev/null"])
            #expect(null.exitCode == 0, "\(null)")
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: store.directory.path).filter { $0.contains(".partial") }
            #expect(leftovers.isEmpty, "\(leftovers)")
        }
    }

    @Test("--output through a symbolic link replaces its target and keeps the link; a dangling link needs --force", arguments: TestEngine.all)
    func outputThroughLinks(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            _ = try await cli.run(["import", try cli.file("notes.ndjson", Input.notes(3))])
            let target = try cli.file("target.ndjson", "old\n")
            let link = store.path("link.ndjson")
            #expect(symlink(target, link) == 0)
            let refused = try await cli.run(["export", "--type", "Note", "--output", link])
            #expect(refused.exitCode == 73 && refused.stderr.contains("--force"), "\(refused)")
            #expect(cli.read(target) == "old\n")
            let forced = try await cli.run(["export", "--type", "Note", "--output", link, "--force"])
            #expect(forced.exitCode == 0, "\(forced)")
            #expect(try JSONLine.names(cli.read(target) ?? "").sorted() == ["n1", "n2", "n3"], "the target holds the export")
            var info = stat()
            #expect(lstat(link, &info) == 0 && (info.st_mode & S_IFMT) == S_IFLNK, "the link is still a link")

            let missing = store.path("elsewhere.ndjson")
            let dangling = store.path("dangling.ndjson")
            #expect(symlink(missing, dangling) == 0)
            let noForce = try await cli.run(["export", "--type", "Note", "--output", dangling])
            #expect(noForce.exitCode == 73, "\(noForce)")
            #expect(noForce.stderr.contains("does not exist") && noForce.stderr.contains("--force"), "\(noForce)")
            #expect(!cli.exists(missing), "a dangling link is not followed without --force")
            let created = try await cli.run(["export", "--type", "Note", "--output", dangling, "--force"])
            #expect(created.exitCode == 0, "\(created)")
            #expect(try JSONLine.names(cli.read(missing) ?? "").count == 3)
            #expect(lstat(dangling, &info) == 0 && (info.st_mode & S_IFMT) == S_IFLNK)

            let directory = try await cli.run(["export", "--type", "Note", "--output", store.directory.path, "--force"])
            #expect(directory.exitCode == 73, "\(directory)")
        }
    }

    @Test("CSV export of records whose fields differ: columns typed from every record, or given with --fields a,n:INT64 or --types; ISO 8601 timestamps on request", arguments: TestEngine.all)
    func csvColumnsAndTypes(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let input = [
                #"{"recordName":"a","recordType":"Mixed","fields":{"title":{"value":"first","type":"STRING"}}}"#,
                #"{"recordName":"b","recordType":"Mixed","fields":{"count":{"value":2,"type":"INT64"},"due":{"value":1704101400250,"type":"TIMESTAMP"}}}"#,
            ].joined(separator: "\n") + "\n"
            #expect(try await cli.run(["import"], stdin: input).exitCode == 0)
            let original = try await cli.exported("Mixed")

            // Every field of every record, typed: imports back to the same records.
            let csv = store.path("mixed.csv")
            let auto = try await cli.run(["export", "--type", "Mixed", "--format", "csv", "--output", csv, "--sort", "recordName"])
            #expect(auto.exitCode == 0, "\(auto)")
            #expect(cli.read(csv)?.split(separator: "\n").first?.contains("count:INT64") == true, "\(cli.read(csv) ?? "")")
            let copy = try await cli.newStore("copy")
            #expect(try await cli.run(["import", csv, "--store", copy]).exitCode == 0)
            let copied = try await cli.exported("Mixed", extra: ["--store", copy])
            for name in ["a", "b"] {
                #expect((copied[name]?["fields"] as? NSDictionary) == (original[name]?["fields"] as? NSDictionary), "\(name)")
            }

            // --fields: the first record has no count; the schema types its column.
            let untyped = try await cli.run(["export", "--type", "Mixed", "--format", "csv", "--fields", "title,count", "--sort", "recordName", "--quiet"])
            #expect(untyped.exitCode == 0 && untyped.stdoutLines.first?.hasSuffix(",title:STRING,count:INT64") == true, "\(untyped)")
            for typing in [["--fields", "title,count:INT64"], ["--fields", "title,count", "--types", "count:INT64"]] {
                let typed = try await cli.run(["export", "--type", "Mixed", "--format", "csv", "--sort", "recordName", "--quiet"] + typing)
                #expect(typed.exitCode == 0, "\(typed)")
                #expect(typed.stdoutLines.first?.hasSuffix(",title:STRING,count:INT64") == true, "\(typed)")
            }

            let iso = try await cli.run(["export", "--type", "Mixed", "--format", "csv", "--timestamps", "iso8601", "--sort", "recordName", "--quiet"])
            #expect(iso.exitCode == 0 && iso.stdout.contains("2024-01-01T09:30:00.25Z"), "\(iso)")
            let isoCopy = try await cli.newStore("iso")
            #expect(try await cli.run(["import", "--format", "csv", "--store", isoCopy], stdin: iso.stdout).exitCode == 0)
            #expect(JSONLine.value(try #require(try await cli.exported("Mixed", extra: ["--store", isoCopy])["b"]), "due") == "1704101400250")

            let notCSV = try await cli.run(["export", "--type", "Mixed", "--types", "count:INT64"])
            #expect(notCSV.exitCode == 64, "\(notCSV)")
            // A field named twice in --fields (with two column types, the later one typed the column
            // and every record holding the other failed) is refused before anything is read.
            for fields in ["title,count:INT64,count:STRING", "count,title,count"] {
                for command in [["export", "--format", "csv"], ["query", "--format", "csv"], ["export"]] {
                    let twice = try await cli.run(command + ["--type", "Mixed", "--fields", fields])
                    #expect(twice.exitCode == 64 && twice.stderr.contains("--fields names 'count' twice") && twice.stdout.isEmpty, "\(command) \(fields): \(twice)")
                }
            }
        }
    }

    @Test("export usage errors exit 64 on stderr", arguments: TestEngine.all)
    func usage(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            for arguments in [
                ["export"],
                ["export", "--type", "Note", "--format", "yaml"],
                ["export", "--type", "Note", "--limit", "lots"],
                ["export", "--type", "Note", "--sort", "count:sideways"],
                ["export", "--type", "Note", "--where", "title ENDSWITH 'x'"],
                ["export", "--type", "Note", "--cursor", "abc"],
                ["export", "--type", "Note", "--frobnicate"],
            ] {
                let result = try await cli.run(arguments)
                #expect(result.exitCode == 64, "\(result)")
                #expect(result.stdout.isEmpty, "\(result)")
                #expect(!result.stderr.isEmpty)
            }
        }
    }
}
