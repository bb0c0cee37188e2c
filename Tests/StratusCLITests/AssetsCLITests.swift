import Foundation
import StratusTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// CloudKit's own data through `stratus import` and `export` as it came, and asset files
/// through `--assets-dir` and `stratus assets`.
@Suite("CloudKit data and assets through stratus", .timeLimit(.minutes(30)))
struct AssetsCLITests {
    /// A parsed JSON value as sorted-key JSON text: equal texts are equal JSON values (numbers
    /// as written, so a timestamp that gained a fraction differs).
    static func canonical(_ value: Any?) -> String {
        guard let value, let data = try? JSONSerialization.data(withJSONObject: ["v": value], options: [.sortedKeys]) else { return "<none>" }
        return String(decoding: data, as: UTF8.self)
    }

    /// The zone a record's first reference with a `zoneID` names.
    static func referencedZone(_ record: [String: Any]) -> String? {
        for case let field as [String: Any] in (record["fields"] as? [String: Any] ?? [:]).values {
            let values = (field["value"] as? [[String: Any]]) ?? [field["value"] as? [String: Any]].compactMap { $0 }
            for value in values {
                if let zone = (value["zoneID"] as? [String: Any])?["zoneName"] as? String { return zone }
            }
        }
        return nil
    }

    @Test("every record of every CloudKit answer imports into the zone it names (created) and exports back equal in JSON value", arguments: TestEngine.all)
    func cloudKitAnswersRoundTrip(engine: TestEngine) async throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: CloudKitFixtureCLITests.directory.path).filter { $0.hasSuffix("_response.json") }.sorted()
        var compared = 0
        for name in names {
            let path = CloudKitFixtureCLITests.directory.appendingPathComponent(name).path
            let body = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
            var originals: [(zone: String, record: [String: Any])] = []
            var envelopeZone = (body["zoneID"] as? [String: Any])?["zoneName"] as? String
            // A records/modify answer names no zone (its request did); its references name it,
            // and references stay in their record's zone: it imports with --zone.
            var zoneOption: [String] = []
            if envelopeZone == nil, let records = body["records"] as? [[String: Any]], records.allSatisfy({ $0["zoneID"] == nil }),
               let named = records.lazy.compactMap({ Self.referencedZone($0) }).first {
                envelopeZone = named
                zoneOption = ["--zone", named]
            }
            for record in body["records"] as? [[String: Any]] ?? [] { originals.append((envelopeZone ?? "_defaultZone", record)) }
            for zone in body["zones"] as? [[String: Any]] ?? [] {
                let zoneName = (zone["zoneID"] as? [String: Any])?["zoneName"] as? String ?? "_defaultZone"
                for record in zone["records"] as? [[String: Any]] ?? [] { originals.append((zoneName, record)) }
            }
            // Tombstones (`"deleted": true`) delete their record (none is stored here): nothing of them to export.
            originals.removeAll { $0.record["deleted"] as? Bool == true }
            guard !originals.isEmpty else { continue }
            try await TemporaryStore.with { store in
                let cli = try await CLI(store, engine: engine)
                // Private: these answers come from private zones, and hold encrypted values,
                // which the public database refuses as CloudKit's does.
                let imported = try await cli.run(["import", path, "--database", "private", "--create-zones", "--owner-as-current-user", "--keep-system-records", "--quiet"] + zoneOption)
                #expect(imported.exitCode == 0, "\(name): \(imported)")
                var exported: [String: [String: Any]] = [:]
                let zones = Set(originals.map { ($0.record["zoneID"] as? [String: Any])?["zoneName"] as? String ?? $0.zone })
                let types = Set(originals.compactMap { $0.record["recordType"] as? String })
                for zone in zones {
                    for type in types {
                        let export = try await cli.run(["export", "--database", "private", "--zone", zone, "--type", type, "--format", "json", "--quiet"])
                        #expect(export.exitCode == 0, "\(name): \(export)")
                        for record in try #require(try JSONSerialization.jsonObject(with: Data(export.stdout.utf8)) as? [[String: Any]]) {
                            exported[record["recordName"] as? String ?? ""] = record
                        }
                    }
                }
                for (_, original) in originals {
                    let recordName = try #require(original["recordName"] as? String)
                    #expect(Self.canonical(exported[recordName]) == Self.canonical(original), "\(name): \(recordName)")
                    compared += 1
                }
            }
        }
        #expect(compared >= 10)
    }

    @Test("a missing zone stops the import once with the command that creates it (exit 65); --create-zones creates it and says so", arguments: TestEngine.all)
    func missingZones(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let lines = (1...50).map { #"{"recordName":"n\#($0)","recordType":"Note","zoneID":{"zoneName":"SharedSync-982E4DAF-74E1-4191-9D51-EBA245AD9932"}}"# }
            let input = try cli.file("zoned.ndjson", lines.joined(separator: "\n") + "\n")
            let refused = try await cli.run(["import", input])
            #expect(refused.exitCode == 65, "\(refused)")
            #expect(refused.stderrLines.filter { $0.contains("does not exist") }.count == 1, "\(refused)")
            #expect(refused.stderr.contains("stratus zones create SharedSync-982E4DAF-74E1-4191-9D51-EBA245AD9932") && refused.stderr.contains("--create-zones"))

            let created = try await cli.run(["import", input, "--create-zones"])
            #expect(created.exitCode == 0, "\(created)")
            #expect(created.stderr.contains("created zone SharedSync-982E4DAF-74E1-4191-9D51-EBA245AD9932"))
            #expect(try await cli.count("Note", extra: ["--zone", "SharedSync-982E4DAF-74E1-4191-9D51-EBA245AD9932"]) == 50)

            // --zone never overrides the zone a record names.
            let other = try await cli.run(["import", input, "--zone", "Other", "--create-zones"])
            #expect(other.exitCode == 65 && other.stderr.contains("leave --zone out"), "\(other)")
        }
    }

    @Test("CloudKit's own records are rejected with the option that keeps them; kept, they export unchanged", arguments: TestEngine.all)
    func systemRecords(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let share = #"{"recordName":"_9f3c1d2e4b5a69788796a5b4c3d2e1f0","recordType":"cloudkit.share","fields":{"cloudkit.title":{"value":"Trip","type":"STRING"}},"zoneID":{"zoneName":"Trips","ownerRecordName":"_0123456789abcdef0123456789abcdef","zoneType":"REGULAR_CUSTOM_ZONE"}}"#
            let input = try cli.file("share.ndjson", share + "\n")
            let rejected = try await cli.run(["import", input, "--create-zones", "--owner-as-current-user"])
            #expect(rejected.exitCode == 1 && rejected.stderr.contains("--keep-system-records"), "\(rejected)")
            let kept = try await cli.run(["import", input, "--create-zones", "--owner-as-current-user", "--keep-system-records"])
            #expect(kept.exitCode == 0, "\(kept)")
            let export = try await cli.run(["export", "--type", "cloudkit.share", "--zone", "Trips", "--quiet"])
            let record = try JSONLine.object(try #require(export.stdoutLines.first, "\(export)"))
            #expect(record["recordName"] as? String == "_9f3c1d2e4b5a69788796a5b4c3d2e1f0")
            #expect(Self.canonical(record["zoneID"]) == Self.canonical(["zoneName": "Trips", "ownerRecordName": "_0123456789abcdef0123456789abcdef", "zoneType": "REGULAR_CUSTOM_ZONE"]))
            #expect(Self.canonical(record["fields"]) == Self.canonical(["cloudkit.title": ["value": "Trip", "type": "STRING"]]))
        }
    }

    @Test("export --assets-dir then import --assets-dir into another store keeps every asset byte-identical; re-importing adds no content", arguments: TestEngine.all)
    func assetsBetweenStores(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            var lines: [String] = []
            for i in 0..<6 {
                _ = try store.writeFile("src/photos/p\(i).jpg", patternBytes(count: 50_000 + i * 1_000, seed: UInt8(i)))
                lines.append(#"{"recordName":"p\#(i)","recordType":"Photo","fields":{"image":{"value":{"downloadURL":"photos/p\#(i).jpg"},"type":"ASSETID"},"#
                             + #""extras":{"value":[{"downloadURL":"photos/p0.jpg"},{"downloadURL":"./photos/p\#(i).jpg"}],"type":"ASSETID_LIST"}}}"#)
            }
            let input = try cli.file("photos.ndjson", lines.joined(separator: "\n") + "\n")
            let refused = try await cli.run(["import", input])
            #expect(refused.exitCode == 1 && refused.stderr.contains("--assets-dir"), "without --assets-dir local paths are refused: \(refused)")
            let misspeltFolder = try await cli.run(["import", input, "--assets-dir", store.path("scr")])
            #expect(misspeltFolder.exitCode == 66 && misspeltFolder.stderr.contains("--assets-dir \(store.path("scr")) does not exist"), "\(misspeltFolder)")
            let wrongFolder = try await cli.run(["import", input, "--assets-dir", store.path("src/photos")])
            #expect(wrongFolder.exitCode == 1 && wrongFolder.stderr.contains("photos/p0.jpg does not exist in the assets folder \(store.path("src/photos"))"),
                    "a missing file names the folder it was looked for in: \(wrongFolder)")
            let imported = try await cli.run(["import", input, "--assets-dir", store.path("src")])
            #expect(imported.exitCode == 0, "\(imported)")
            let info = try await cli.run(["assets", "info"])
            #expect(info.stdout.hasPrefix("6 content(s)"), "\(info)")
            let again = try await cli.run(["import", input, "--assets-dir", store.path("src"), "--mode", "forceReplace"])
            #expect(again.exitCode == 0, "\(again)")
            #expect(try await cli.run(["assets", "info"]).stdout == info.stdout, "re-importing the same files adds nothing")

            // The folder named through a symbolic link, as the import that reads it back takes one.
            try FileManager.default.createDirectory(atPath: store.path("out"), withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(atPath: store.path("out-link"), withDestinationPath: store.path("out"))
            let export = try await cli.run(["export", "--type", "Photo", "--assets-dir", store.path("out-link"), "--quiet"])
            #expect(export.exitCode == 0, "\(export)")
            #expect((try? FileManager.default.contentsOfDirectory(atPath: store.path("out")).count) ?? 0 >= 6, "the files are in the folder the link names")
            let exportFile = try cli.file("export.ndjson", export.stdout)
            var other = try await CLI(store, engine: engine, storeName: "other.sqlite")
            other.environment["STRATUS_USER"] = "someone-else"
            let moved = try await other.run(["import", exportFile, "--assets-dir", store.path("out")])
            #expect(moved.exitCode == 0, "\(moved)")
            for i in 0..<6 {
                let output = store.path("got-\(i).jpg")
                let got = try await other.run(["assets", "get", "p\(i)", "image", "--output", output])
                #expect(got.exitCode == 0, "\(got)")
                #expect(FileManager.default.contents(atPath: output) == patternBytes(count: 50_000 + i * 1_000, seed: UInt8(i)), "p\(i)")
            }
            // Content that cannot be written (a full disk) is the output's failure, 73, with the system's reason.
            let full = try await other.shell(#""$STRATUS" assets get p1 image > /dev/full"#)
            #expect(full.exitCode == 73 && full.stderr.contains("No space left on device"), "\(full)")
            let listed = try await other.run(["assets", "get", "p3", "extras", "--index", "1", "--output", store.path("listed.jpg")])
            #expect(listed.exitCode == 0, "\(listed)")
            #expect(FileManager.default.contents(atPath: store.path("listed.jpg")) == patternBytes(count: 53_000, seed: 3))
            #expect(try await other.run(["assets", "info"]).stdout == info.stdout)

            // CSV too: the content goes into the folder and the cells name it there.
            let csv = try await cli.run(["export", "--type", "Photo", "--format", "csv", "--assets-dir", store.path("csv-out"), "--quiet"])
            #expect(csv.exitCode == 0 && !csv.stdout.contains(store.path("")), "no store paths in the cells: \(csv)")
            var third = try await CLI(store, engine: engine, storeName: "third.sqlite")
            third.environment["STRATUS_USER"] = "a-third"
            let fromCSV = try await third.run(["import", try cli.file("export.csv", csv.stdout), "--assets-dir", store.path("csv-out")])
            #expect(fromCSV.exitCode == 0, "\(fromCSV)")
            for i in [0, 5] {
                let output = store.path("csv-got-\(i).jpg")
                #expect(try await third.run(["assets", "get", "p\(i)", "image", "--output", output]).exitCode == 0)
                #expect(FileManager.default.contents(atPath: output) == patternBytes(count: 50_000 + i * 1_000, seed: UInt8(i)), "p\(i)")
            }
            let csvListed = try await third.run(["assets", "get", "p3", "extras", "--index", "1", "--output", store.path("csv-listed.jpg")])
            #expect(csvListed.exitCode == 0 && FileManager.default.contents(atPath: store.path("csv-listed.jpg")) == patternBytes(count: 53_000, seed: 3), "\(csvListed)")
        }
    }

    @Test("assets get --index past a field's assets is exit 66 and writes nothing, for a field of one asset as for a list", arguments: TestEngine.all)
    func indexPastTheAssets(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            _ = try store.writeFile("src/one.bin", Data("one".utf8))
            _ = try store.writeFile("src/two.bin", Data("two".utf8))
            let line = #"{"recordName":"r","recordType":"X","fields":{"one":{"value":{"downloadURL":"one.bin"},"type":"ASSETID"},"many":{"value":[{"downloadURL":"one.bin"},{"downloadURL":"two.bin"}],"type":"ASSETID_LIST"}}}"#
            #expect(try await cli.run(["import", "--assets-dir", store.path("src"), "--quiet"], stdin: line + "\n").exitCode == 0)
            for (field, index, content) in [("one", nil, "one"), ("one", 0, "one"), ("many", 1, "two")] as [(String, Int?, String)] {
                let got = try await cli.run(["assets", "get", "r", field] + (index.map { ["--index", "\($0)"] } ?? []))
                #expect(got.exitCode == 0 && got.stdout == content, "\(field) \(index.map(String.init) ?? "-"): \(got)")
            }
            for (field, index) in [("one", 1), ("one", 5), ("many", 2)] {
                let output = store.path("\(field)-\(index).bin")
                let got = try await cli.run(["assets", "get", "r", field, "--index", "\(index)", "--output", output])
                #expect(got.exitCode == 66 && got.stderr.contains("--index \(index) is past"), "\(field) \(index): \(got)")
                #expect(!cli.exists(output), "no file is written for \(field) \(index)")
            }
        }
    }

    @Test("asset paths that leave --assets-dir, links, directories and FIFOs are refused per record; nothing outside is read or changed", arguments: TestEngine.all)
    func adversarialSources(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let secret = try store.writeFile("private/secret", Data("secret".utf8))
            chmod(secret.path, 0o600)
            _ = try store.writeFile("src/ok.bin", Data("ok".utf8))
            try FileManager.default.createSymbolicLink(atPath: store.path("src/link"), withDestinationPath: secret.path)
            try FileManager.default.createDirectory(atPath: store.path("src/dir"), withIntermediateDirectories: true)
            #expect(mkfifo(store.path("src/fifo"), 0o600) == 0)
            // A socket bound in the folder (found by a data tester: it was called missing).
            let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(listener) }
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            let socketPath = Array(store.path("src/sock").utf8CString)
            try #require(socketPath.count <= MemoryLayout.size(ofValue: address.sun_path))
            withUnsafeMutableBytes(of: &address.sun_path) { raw in socketPath.withUnsafeBytes { raw.copyMemory(from: $0) } }
            let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
            #expect(bound == 0)
            let paths = [secret.path, "../private/secret", "link", "dir", "fifo", "sock", "ok.bin"]
            let lines = paths.enumerated().map { i, path in #"{"recordName":"r\#(i)","recordType":"F","fields":{"f":{"value":{"downloadURL":"\#(path)"},"type":"ASSETID"}}}"# }
            let rejects = store.path("rejects.ndjson")
            let result = try await cli.run(["import", try cli.file("bad.ndjson", lines.joined(separator: "\n") + "\n"), "--assets-dir", store.path("src"), "--reject-file", rejects])
            #expect(result.exitCode == 1, "\(result)")
            Summary.expectImport(result, imported: 1, failed: 6)
            let reasons = try RejectLine.read(rejects).map(\.error)
            for needle in ["absolute", "'..'", "symbolic link", "a directory", "a FIFO", "a socket"] {
                #expect(reasons.contains { $0.contains(needle) }, "no rejection says \(needle): \(reasons)")
            }
            #expect(try await cli.run(["assets", "info"]).stdout.hasPrefix("1 content(s), 2 bytes"))
            var info = stat()
            #expect(stat(secret.path, &info) == 0 && info.st_mode & 0o777 == 0o600)
        }
    }

    @Test("a CSV asset column obeys the same rules: without --assets-dir no path is read; with it, only paths inside it", arguments: TestEngine.all)
    func csvAssetPaths(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let secret = try store.writeFile("private/secret", Data("secret".utf8))
            _ = try store.writeFile("src/ok.bin", Data("ok".utf8))
            let rows = ["recordName,recordType,f:ASSETID", "r0,F,\(secret.path)", "r1,F,../private/secret", "r2,F,file://\(secret.path)", "r3,F,ok.bin"]
            let input = try cli.file("assets.csv", rows.joined(separator: "\n") + "\n")
            let outside = try await cli.run(["import", input, "--format", "csv"])
            #expect(outside.exitCode == 1 && outside.stderr.contains("--assets-dir"), "without --assets-dir a CSV path was read: \(outside)")
            Summary.expectImport(outside, imported: 0, failed: 4)
            let rejects = store.path("rejects.ndjson")
            let inside = try await cli.run(["import", input, "--format", "csv", "--assets-dir", store.path("src"), "--reject-file", rejects])
            #expect(inside.exitCode == 1, "\(inside)")
            Summary.expectImport(inside, imported: 1, failed: 3)
            let reasons = try RejectLine.read(rejects).map(\.error)
            #expect(reasons.filter { reason in reason.contains("absolute") }.count == 2 && reasons.contains { reason in reason.contains("'..'") }, "\(reasons)")
            #expect(try await cli.run(["assets", "info"]).stdout.hasPrefix("1 content(s), 2 bytes"))
        }
    }

    @Test("--follow-symlinks never opens what a link leads to outside --assets-dir (a file, a FIFO): it is refused unopened; a link inside is followed", arguments: TestEngine.all)
    func followedLinksOutsideAreNotOpened(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let secret = try store.writeFile("outside/secret", Data("secret".utf8))
            let fifo = store.path("outside/fifo")
            #expect(mkfifo(fifo, 0o600) == 0)
            _ = try store.writeFile("src/ok.bin", Data("ok".utf8))
            try FileManager.default.createSymbolicLink(atPath: store.path("src/direct"), withDestinationPath: secret.path)
            try FileManager.default.createSymbolicLink(atPath: store.path("src/folder"), withDestinationPath: store.path("outside"))
            try FileManager.default.createSymbolicLink(atPath: store.path("src/pipe"), withDestinationPath: fifo)
            try FileManager.default.createSymbolicLink(atPath: store.path("src/inside"), withDestinationPath: "ok.bin")
            // The kernel reports every open of a watched file (opening a FIFO wakes its writer,
            // opening a device can act), so "never opened" is observed, not inferred.
            let watch = inotify_init1(Int32(IN_NONBLOCK))
            #expect(watch >= 0)
            defer { close(watch) }
            for path in [secret.path, fifo] { #expect(inotify_add_watch(watch, path, UInt32(IN_OPEN)) >= 0) }

            let paths = ["direct", "folder/secret", "pipe", "inside"]
            let lines = paths.enumerated().map { i, path in #"{"recordName":"r\#(i)","recordType":"F","fields":{"f":{"value":{"downloadURL":"\#(path)"},"type":"ASSETID"}}}"# }
            let rejects = store.path("rejects.ndjson")
            let result = try await cli.run(["import", try cli.file("links.ndjson", lines.joined(separator: "\n") + "\n"), "--assets-dir", store.path("src"),
                                            "--follow-symlinks", "--reject-file", rejects])
            #expect(result.exitCode == 1, "\(result)")
            Summary.expectImport(result, imported: 1, failed: 3)
            let rejected = try RejectLine.read(rejects)
            #expect(Set(rejected.compactMap(\.recordName)) == ["r0", "r1", "r2"])
            #expect(rejected.allSatisfy { $0.error.contains("leads outside the assets folder") }, "\(rejected.map(\.error))")
            var events = [UInt8](repeating: 0, count: 4096)
            let count = read(watch, &events, events.count)
            #expect(count < 0 && errno == EAGAIN, "a file outside the assets folder was opened (\(count) bytes of inotify events)")
        }
    }

    @Test("with --follow-symlinks, links that lead in a loop are named as a loop, not as links that are not followed", arguments: TestEngine.all)
    func followedLinkLoopIsNamed(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            _ = try store.writeFile("src/ok.bin", Data("ok".utf8))
            try FileManager.default.createSymbolicLink(atPath: store.path("src/loop1"), withDestinationPath: "loop2")
            try FileManager.default.createSymbolicLink(atPath: store.path("src/loop2"), withDestinationPath: "loop1")
            let lines = ["loop1", "ok.bin"].enumerated().map { i, path in #"{"recordName":"r\#(i)","recordType":"F","fields":{"f":{"value":{"downloadURL":"\#(path)"},"type":"ASSETID"}}}"# }
            let input = try cli.file("loop.ndjson", lines.joined(separator: "\n") + "\n")
            let followed = try await cli.run(["import", input, "--assets-dir", store.path("src"), "--follow-symlinks"])
            #expect(followed.exitCode == 1, "\(followed)")
            Summary.expectImport(followed, imported: 1, failed: 1)
            #expect(followed.stderr.contains("loop1: its symbolic links lead in a loop"), "\(followed)")
            #expect(!followed.stderr.contains("not followed"), "\(followed)")
            // Without the option the link is refused as a link.
            let refused = try await cli.run(["import", input, "--assets-dir", store.path("src")])
            #expect(refused.stderr.contains("loop1 is a symbolic link") && refused.stderr.contains("links are not followed"), "\(refused)")
        }
    }

    @Test("imports killed while copying assets leave no record without its content, and after gc no content without a record", arguments: TestEngine.all)
    func killedAssetImports(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let count = 120
            var lines: [String] = []
            for i in 0..<count {
                _ = try store.writeFile("src/a\(i).bin", patternBytes(count: 64_000 + i, seed: UInt8(i % 251)))
                lines.append(#"{"recordName":"a\#(i)","recordType":"Blob","fields":{"data":{"value":{"downloadURL":"a\#(i).bin"},"type":"ASSETID"}}}"#)
            }
            let input = try cli.file("blobs.ndjson", lines.joined(separator: "\n") + "\n")
            try await cli.createStore()
            for (round, delay) in [40, 120, 250].enumerated() {
                let running = try cli.start(["import", input, "--assets-dir", store.path("src"), "--batch-size", "10", "--mode", "forceReplace"])
                try await Task.sleep(for: .milliseconds(delay))
                running.signal(SIGKILL)
                let ended = await running.wait()
                let collected = try await cli.run(["assets", "gc"])
                #expect(collected.exitCode == 0, "round \(round): \(collected)")
                // Every stored record's content is there, and the store holds nothing else.
                let export = try await cli.run(["export", "--type", "Blob", "--assets-dir", store.path("out-\(round)"), "--quiet"])
                #expect(export.exitCode == 0, "round \(round): \(export)")
                let records = try JSONLine.objects(export.stdout)
                for record in records {
                    let name = try #require(record["recordName"] as? String)
                    let i = try #require(Int(name.dropFirst()))
                    let file = try #require((JSONLine.field(record, "data")?["value"] as? [String: Any])?["downloadURL"] as? String)
                    #expect(FileManager.default.contents(atPath: store.path("out-\(round)/\(file)")) == patternBytes(count: 64_000 + i, seed: UInt8(i % 251)), "round \(round): \(name)")
                }
                let info = try await cli.run(["assets", "info"])
                #expect(info.stdout.hasPrefix("\(records.count) content(s)"), "round \(round) (\(ended.signalled ? "killed" : "finished")): \(info.stdout)")
            }
            let finished = try await cli.run(["import", input, "--assets-dir", store.path("src")])
            #expect(finished.exitCode == 0, "\(finished)")
            let info = try await cli.run(["assets", "info"])
            #expect(info.stdout.hasPrefix("\(count) content(s)"), "\(info)")
            _ = try await cli.run(["import", input, "--assets-dir", store.path("src"), "--mode", "forceReplace"])
            #expect(try await cli.run(["assets", "info"]).stdout == info.stdout, "re-importing adds no content")
        }
    }

    @Test("a CloudKit asset's checksum file of another size than its size is another content, also reached through a link with --follow-symlinks; a link out of the folder tells nothing of its target", arguments: TestEngine.all)
    func checksumFilesOfAnotherSize(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            _ = try store.writeFile("in/real.bin", patternBytes(count: 500, seed: 2))
            #expect(symlink("real.bin", store.path("in/BBBB")) == 0)
            let outside = try store.writeFile("secret.bin", patternBytes(count: 631, seed: 3))
            #expect(symlink(outside.path, store.path("in/CCCC")) == 0)
            func record(_ name: String, _ checksum: String) -> String {
                #"{"recordName":"\#(name)","recordType":"Pic","fields":{"im":{"type":"ASSETID","value":{"downloadURL":"https://cvws.icloud-content.com/B/x","fileChecksum":"\#(checksum)","size":100}}}}"#
            }
            let linked = try await cli.run(["import", "--assets-dir", store.path("in"), "--follow-symlinks"], stdin: record("y", "BBBB") + "\n")
            #expect(linked.exitCode == 1 && linked.stderr.contains("500 bytes") && linked.stderr.contains("another content"), "\(linked)")
            let out = try await cli.run(["import", "--assets-dir", store.path("in")], stdin: record("z", "CCCC") + "\n")
            #expect(!out.stderr.contains("631"), "the size of a file outside the folder is not told: \(out)")
        }
    }

    @Test("a CloudKit asset without content: the record reads, assets get is exit 66, attach gives it the downloaded file", arguments: TestEngine.all)
    func remoteAssetsAndAttach(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let content = patternBytes(count: 4_096, seed: 9)
            let record = #"{"recordName":"m1","recordType":"CPLMaster","recordChangeTag":"k7","fields":{"res":{"value":{"fileChecksum":"AV4xs/+kT2","size":4096,"wrappingKey":"wk==","referenceChecksum":"rc","downloadURL":"https://cvws.icloud-content.com/B/AV4x/${f}?o=1"},"type":"ASSETID"}},"modified":{"timestamp":1700000000000,"userRecordName":"_u"}}"#
            let input = try cli.file("remote.ndjson", record + "\n")
            #expect(try await cli.run(["import", input]).exitCode == 0)
            let before = try await cli.run(["export", "--type", "CPLMaster", "--quiet"])
            let exportedValue = JSONLine.field(try JSONLine.object(try #require(before.stdoutLines.first)), "res")?["value"]
            #expect(Self.canonical(exportedValue) == Self.canonical(JSONLine.field(try JSONLine.object(record), "res")?["value"]), "kept as it came")
            let missing = try await cli.run(["assets", "get", "m1", "res"])
            #expect(missing.exitCode == 66 && missing.stderr.contains("assetNotAvailable"), "\(missing)")

            // Downloaded files named by the checksum in base64url.
            _ = try store.writeFile("downloads/AV4xs_-kT2", content)
            let attached = try await cli.run(["assets", "attach", store.path("downloads")])
            #expect(attached.exitCode == 0 && attached.stderr.contains("attached 1"), "\(attached)")
            let got = try await cli.run(["assets", "get", "m1", "res", "--output", store.path("got.bin")])
            #expect(got.exitCode == 0, "\(got)")
            #expect(FileManager.default.contents(atPath: store.path("got.bin")) == content)
            // The record CloudKit described, now with its content: the same version.
            let after = try #require(try await cli.exported("CPLMaster")["m1"])
            #expect(after["recordChangeTag"] as? String == "k7", "\(after)")
            #expect((after["modified"] as? [String: Any])?["timestamp"] as? Int == 1_700_000_000_000, "\(after)")
        }
    }

    @Test("a CloudKit asset without a downloadURL (a records/modify answer's), its content attached: export --assets-dir writes it as it came and names its file by its checksum, and an import with the folder takes the content; a plain export names the store's content file, as for every asset with content", arguments: TestEngine.all)
    func attachedAssetsWithoutURLStayCloudKits(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let content = patternBytes(count: 2_000, seed: 11)
            let record = #"{"recordName":"p1","recordType":"Photo","fields":{"img":{"value":{"fileChecksum":"AaaA","size":2000,"receipt":"R1","wrappingKey":"d2s="},"type":"ASSETID"}},"recordChangeTag":"t1"}"#
            #expect(try await cli.run(["import", try cli.file("modify-answer.ndjson", record + "\n"), "--database", "private"]).exitCode == 0)
            _ = try store.writeFile("downloads/AaaA", content)
            let attached = try await cli.run(["assets", "attach", store.path("downloads"), "--database", "private"])
            #expect(attached.exitCode == 0 && attached.stderr.contains("attached 1"), "\(attached)")
            let plain = try await cli.run(["export", "--type", "Photo", "--database", "private", "--quiet"])
            let plainValue = JSONLine.field(try JSONLine.object(plain.stdout), "img")?["value"] as? [String: Any]
            #expect((plainValue?["downloadURL"] as? String)?.hasPrefix("file://") == true && plainValue?["fileChecksum"] as? String == "AaaA", "\(plain.stdout)")

            let folder = try await cli.run(["export", "--type", "Photo", "--database", "private", "--assets-dir", store.path("out"), "--output", store.path("out.ndjson"), "--quiet"])
            #expect(folder.exitCode == 0, "\(folder)")
            #expect(FileManager.default.contents(atPath: store.path("out/AaaA")) == content, "the content is named by its fileChecksum")
            let beside = try JSONLine.object(cli.read(store.path("out.ndjson")) ?? "")
            #expect(Self.canonical(JSONLine.field(beside, "img")?["value"]) == Self.canonical(JSONLine.field(try JSONLine.object(record), "img")?["value"]), "the JSON stays CloudKit's")
            let mirror = try await cli.newStore("mirror")
            let imported = try await cli.run(["import", store.path("out.ndjson"), "--assets-dir", store.path("out"), "--store", mirror, "--database", "private"])
            #expect(imported.exitCode == 0 && !imported.stderr.contains("no file in the assets folder"), "\(imported)")
            let got = try await cli.run(["assets", "get", "p1", "img", "--output", store.path("got.bin"), "--store", mirror, "--database", "private"])
            #expect(got.exitCode == 0 && FileManager.default.contents(atPath: store.path("got.bin")) == content, "\(got)")
        }
    }

    @Test("CloudKit assets without a fileChecksum, their content attached: export --assets-dir then import --assets-dir carries the content (one field and a list)", arguments: TestEngine.all)
    func attachedAssetsWithoutChecksumTravel(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let one = patternBytes(count: 3_000, seed: 4), two = patternBytes(count: 5, seed: 5)
            let record = #"{"recordName":"m2","recordType":"CPLMaster","fields":{"res":{"value":{"size":3000,"downloadURL":"https://cvws.icloud-content.com/B/x/${f}"},"type":"ASSETID"},"#
                + #""more":{"value":[{"size":5,"downloadURL":"https://cvws.icloud-content.com/B/y/${f}"},{"size":3000,"fileChecksum":"AQ","downloadURL":"https://cvws.icloud-content.com/B/z/${f}"}],"type":"ASSETID_LIST"}}}"#
            #expect(try await cli.run(["import", try cli.file("remote.ndjson", record + "\n")]).exitCode == 0)
            _ = try store.writeFile("downloads/m2/res", one)
            _ = try store.writeFile("downloads/m2/more.0", two)
            _ = try store.writeFile("downloads/AQ", one)
            let attached = try await cli.run(["assets", "attach", store.path("downloads")])
            #expect(attached.exitCode == 0 && attached.stderr.contains("attached 3"), "\(attached)")

            let exported = try await cli.run(["export", "--type", "CPLMaster", "--assets-dir", store.path("out"), "--output", store.path("out.ndjson"), "--quiet"])
            #expect(exported.exitCode == 0, "\(exported)")
            let mirror = try await cli.newStore("mirror")
            let imported = try await cli.run(["import", store.path("out.ndjson"), "--assets-dir", store.path("out"), "--store", mirror, "--quiet"])
            #expect(imported.exitCode == 0, "\(imported)")
            for (field, index, content) in [("res", nil, one), ("more", 0, two), ("more", 1, one)] as [(String, Int?, Data)] {
                let output = store.path("got-\(field)-\(index ?? -1)")
                let got = try await cli.run(["assets", "get", "m2", field, "--output", output, "--store", mirror] + (index.map { ["--index", "\($0)"] } ?? []))
                #expect(got.exitCode == 0, "\(field) \(String(describing: index)): \(got)")
                #expect(FileManager.default.contents(atPath: output) == content, "\(field) \(String(describing: index))")
            }
            // Exported again from the copy, the JSON is the same.
            let again = try await cli.run(["export", "--type", "CPLMaster", "--assets-dir", store.path("out2"), "--store", mirror, "--quiet"])
            #expect(again.stdout == (cli.read(store.path("out.ndjson")) ?? ""), "\(again)")
        }
    }

    @Test("a fileChecksum naming another content's file: export --assets-dir stops (65) instead of writing one content over the other, and an import takes no file whose size is not the asset's", arguments: TestEngine.all)
    func checksumNamingAnotherContent(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let hi = Data("hi\n".utf8)
            let evil = Data("EVIL-CONTENT".utf8)
            _ = try store.writeFile("in/ok.txt", hi)
            // The name Stratus gives "hi\n" in an export folder: its SHA-256.
            let name = "98ea6e4f216f2fb4b69fff9b3a44842c38686ca685f3f55dc48c5d3fb1107be4"
            _ = try store.writeFile("downloads/\(name)", evil)
            let records = #"{"recordName":"Z","recordType":"P","fields":{"f":{"type":"ASSETID","value":{"downloadURL":"ok.txt"}}}}"# + "\n"
                + #"{"recordName":"A0","recordType":"P","fields":{"f":{"type":"ASSETID","value":{"downloadURL":"https://cvws.icloud-content.com/B/x","fileChecksum":"\#(name)","size":12}}}}"# + "\n"
            #expect(try await cli.run(["import", try cli.file("in.ndjson", records), "--assets-dir", store.path("in")]).exitCode == 0)
            #expect(try await cli.run(["assets", "attach", store.path("downloads")]).stderr.contains("attached 1"))

            let export = try await cli.run(["export", "--type", "P", "--assets-dir", store.path("out")])
            #expect(export.exitCode == 65 && export.stderr.contains("one file name \(name)"), "\(export)")
            for record in ["Z", "A0"] {
                let got = try await cli.run(["assets", "get", record, "f", "--output", store.path("\(record).bin")])
                #expect(got.exitCode == 0, "\(got)")
            }
            #expect(FileManager.default.contents(atPath: store.path("Z.bin")) == hi && FileManager.default.contents(atPath: store.path("A0.bin")) == evil, "the store keeps both")

            // The import side: a file named by the checksum but of another size is refused.
            _ = try store.writeFile("other/\(name)", hi)
            let wrongSize = try await cli.run(["import", try cli.file("a0.ndjson", String(records.split(separator: "\n")[1]) + "\n"), "--assets-dir", store.path("other"), "--mode", "forceReplace"])
            #expect(wrongSize.exitCode == 1 && wrongSize.stderr.contains("has 3 bytes where the asset's size says 12"), "\(wrongSize)")
            let still = try await cli.run(["assets", "get", "A0", "f", "--output", store.path("A0again.bin")])
            #expect(still.exitCode == 0 && FileManager.default.contents(atPath: store.path("A0again.bin")) == evil, "\(still)")
        }
    }

    @Test("assets attach --as-administrator attaches to public records other users created, which the user's own attach may not save; it is refused for a private database and for other actions", arguments: TestEngine.all)
    func attachAsAdministrator(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let creator = "_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
            let record = #"{"recordName":"p1","recordType":"Poster","recordChangeTag":"t1","fields":{"image":{"value":{"fileChecksum":"QUJD","size":8,"downloadURL":"https://cvws.icloud-content.com/B/QUJD/${f}"},"type":"ASSETID"}},"created":{"timestamp":1000,"userRecordName":"\#(creator)"},"modified":{"timestamp":2000,"userRecordName":"\#(creator)"}}"#
            let restored = try await cli.run(["import", try cli.file("public.ndjson", record + "\n"), "--keep-system-records", "--as-administrator"])
            #expect(restored.exitCode == 0, "\(restored)")
            let content = Data("8 bytes!".utf8)
            _ = try store.writeFile("downloads/QUJD", content)

            let asUser = try await cli.run(["assets", "attach", store.path("downloads")])
            #expect(asUser.exitCode == 1 && asUser.stderr.contains("attached 0") && asUser.stderr.contains("failed 1"), "\(asUser)")
            #expect(try await cli.run(["assets", "get", "p1", "image"]).exitCode == 66)

            let asAdministrator = try await cli.run(["assets", "attach", store.path("downloads"), "--as-administrator"])
            #expect(asAdministrator.exitCode == 0 && asAdministrator.stderr.contains("attached 1, not found 0, size differs 0, failed 0"), "\(asAdministrator)")
            let got = try await cli.run(["assets", "get", "p1", "image", "--output", store.path("p1.bin")])
            #expect(got.exitCode == 0 && FileManager.default.contents(atPath: store.path("p1.bin")) == content, "\(got)")
            let after = try #require(try await cli.exported("Poster")["p1"])
            #expect(after["recordChangeTag"] as? String == "t1", "\(after)")
            #expect((after["created"] as? [String: Any])?["userRecordName"] as? String == creator, "\(after)")

            let privateDatabase = try await cli.run(["assets", "attach", store.path("downloads"), "--as-administrator", "--database", "private"])
            #expect(privateDatabase.exitCode == 64 && privateDatabase.stderr.contains("public database"), "\(privateDatabase)")
            let otherAction = try await cli.run(["assets", "info", "--as-administrator"])
            #expect(otherAction.exitCode == 64 && otherAction.stderr.contains("belongs to assets attach"), "\(otherAction)")
        }
    }

    @Test("assets attach counts as attached only the assets of records saved with their content: a record whose save fails (a symbolic link) is a failure, its assets stay without content, exit 1",
          arguments: TestEngine.all)
    func attachCountsOnlyWhatItAttached(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            func asset(_ checksum: String) -> String {
                #"{"value":{"fileChecksum":"\#(checksum)","size":16,"downloadURL":"https://cvws.icloud-content.com/B/\#(checksum)/${f}"},"type":"ASSETID"}"#
            }
            let records = #"{"recordName":"linked","recordType":"Photo","fields":{"a":\#(asset("AAAA")),"b":\#(asset("BBBB"))}}"# + "\n"
                + #"{"recordName":"plain","recordType":"Photo","fields":{"a":\#(asset("CCCC"))}}"# + "\n"
            #expect(try await cli.run(["import", try cli.file("photos.ndjson", records)]).exitCode == 0)
            let content = Data(repeating: 7, count: 16)
            _ = try store.writeFile("elsewhere/real", content)
            _ = try store.writeFile("downloads/CCCC", content)
            try FileManager.default.createSymbolicLink(atPath: store.path("downloads/AAAA"), withDestinationPath: store.path("elsewhere/real"))
            try FileManager.default.createSymbolicLink(atPath: store.path("downloads/BBBB"), withDestinationPath: store.path("elsewhere/real"))

            let attached = try await cli.run(["assets", "attach", store.path("downloads")])
            #expect(attached.exitCode == 1, "\(attached)")
            #expect(attached.stderr.contains("attached 1, not found 0, size differs 0, failed 1"), "\(attached)")
            #expect(try await cli.run(["assets", "get", "plain", "a", "--output", store.path("plain.bin")]).exitCode == 0)
            let still = try await cli.run(["assets", "get", "linked", "a"])
            #expect(still.exitCode == 66 && still.stderr.contains("assetNotAvailable"), "\(still)")
        }
    }
}
