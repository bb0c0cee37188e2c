import Foundation
import StratusTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `export --assets-dir DIR` trusts no file it finds in DIR: a file under a content's name is
/// used only when it is a regular file with that content.
@Suite("Asset export folders", .timeLimit(.minutes(30)))
struct AssetExportFolderCLITests {
    static let blobLine = #"{"recordName":"b1","recordType":"Blob","fields":{"data":{"value":{"downloadURL":"blob.bin"},"type":"ASSETID"}}}"#

    /// Imports the record `b1` of type Blob whose asset holds `content`, read from the folder
    /// `src`; gives the input line.
    @discardableResult
    static func importBlob(_ content: Data, _ cli: CLI, _ store: TemporaryStore) async throws -> String {
        _ = try store.writeFile("src/blob.bin", content)
        let imported = try await cli.run(["import", try cli.file("blob.ndjson", blobLine + "\n"), "--assets-dir", store.path("src")])
        #expect(imported.exitCode == 0, "\(imported)")
        return blobLine
    }

    /// Exports the Blob records with their assets into the folder `out`; gives the export and
    /// the path of the one content file it names.
    static func exportBlob(_ cli: CLI, into out: String) async throws -> (export: String, file: String) {
        let exported = try await cli.run(["export", "--type", "Blob", "--assets-dir", out, "--quiet"])
        #expect(exported.exitCode == 0, "\(exported)")
        let record = try #require(try JSONSerialization.jsonObject(with: Data(exported.stdout.utf8)) as? [String: Any])
        let name = try #require(JSONLine.field(record, "data")?["value"] as? [String: Any])["downloadURL"] as? String
        return (exported.stdout, out + "/" + (name ?? ""))
    }

    @Test("a wrong file or a symbolic link under a content's name stops the export and is left as it is; a re-import from the folder stores the right bytes", arguments: TestEngine.all)
    func wrongFilesAreLeftAlone(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            // Larger than the chunk the comparison reads, so that the difference lies beyond it.
            let content = patternBytes(count: 600_000, seed: 7)
            try await Self.importBlob(content, cli, store)

            let out = store.path("out")
            let file = try await Self.exportBlob(cli, into: out).file
            let name = (file as NSString).lastPathComponent
            #expect(FileManager.default.contents(atPath: file) == content)

            // The same size, one byte different near the end: not this export's file to replace.
            var wrong = content
            wrong[wrong.count - 10] ^= 0xFF
            try wrong.write(to: URL(fileURLWithPath: file))
            let second = try await cli.run(["export", "--type", "Blob", "--assets-dir", out, "--quiet"])
            #expect(second.exitCode == 73, "\(second)")
            #expect(second.stderr.contains(name) && second.stderr.contains("other bytes"), "\(second.stderr)")
            #expect(FileManager.default.contents(atPath: file) == wrong, "the file is left as it was")

            // A symbolic link to a file outside: the link and its target are left alone.
            let outside = try store.writeFile("outside.bin", wrong)
            try FileManager.default.removeItem(atPath: file)
            #expect(symlink(outside.path, file) == 0)
            let third = try await cli.run(["export", "--type", "Blob", "--assets-dir", out, "--quiet"])
            #expect(third.exitCode == 73, "\(third)")
            #expect(third.stderr.contains("a symbolic link of that name is already there"), "\(third.stderr)")
            var info = stat()
            #expect(lstat(file, &info) == 0 && info.st_mode & S_IFMT == S_IFLNK, "the link is left as it was")
            #expect(FileManager.default.contents(atPath: outside.path) == wrong, "the link's target is left alone")

            // Moved away, the content is written again; the temporary file a killed export
            // left (a process that is gone) is removed.
            try FileManager.default.removeItem(atPath: file)
            _ = try store.writeFile("out/.\(name).4194303.1.partial", Data("half".utf8))
            let again = try await cli.run(["export", "--type", "Blob", "--assets-dir", out, "--quiet"])
            #expect(again.exitCode == 0, "\(again)")
            #expect(FileManager.default.contents(atPath: file) == content)

            // A right file is kept as it is (the same file, not rewritten).
            var before = stat()
            _ = lstat(file, &before)
            let fourth = try await cli.run(["export", "--type", "Blob", "--assets-dir", out, "--quiet"])
            #expect(fourth.exitCode == 0, "\(fourth)")
            var after = stat()
            _ = lstat(file, &after)
            #expect(before.st_ino == after.st_ino)
            // No temporary file is left behind.
            #expect(try FileManager.default.contentsOfDirectory(atPath: out) == [name])

            // Another store imports the export from the folder with the right bytes.
            let other = try await cli.newStore("other.sqlite")
            let moved = try await cli.run(["import", try cli.file("export.ndjson", fourth.stdout), "--assets-dir", out, "--store", other])
            #expect(moved.exitCode == 0, "\(moved)")
            let got = try await cli.run(["assets", "get", "b1", "data", "--output", store.path("got.bin"), "--store", other])
            #expect(got.exitCode == 0, "\(got)")
            #expect(FileManager.default.contents(atPath: store.path("got.bin")) == content)
        }
    }

    @Test("a restore from an assets folder whose file no longer holds the content its name (the SHA-256) states rejects the record and keeps the stored content", arguments: TestEngine.all)
    func changedBackupFilesAreRefused(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let content = patternBytes(count: 5_000, seed: 11)
            try await Self.importBlob(content, cli, store)
            let out = store.path("backup")
            let (exported, file) = try await Self.exportBlob(cli, into: out)
            let backup = try cli.file("backup.ndjson", exported)
            let name = (file as NSString).lastPathComponent
            try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: file)

            // The same size, other bytes (bit rot, an edit): into the store it came from.
            var changed = content
            changed[100] ^= 0x01
            try changed.write(to: URL(fileURLWithPath: file))
            let over = try await cli.run(["import", backup, "--assets-dir", out])
            #expect(over.exitCode == 1, "\(over)")
            #expect(over.stderr.contains("b1") && over.stderr.contains(name) && over.stderr.contains("holds content whose SHA-256 is"), "\(over.stderr)")
            #expect(over.stderr.contains("updated 0") && over.stderr.contains("failed 1"), "\(over.stderr)")
            let kept = try await cli.run(["assets", "get", "b1", "data", "--output", store.path("kept.bin")])
            #expect(kept.exitCode == 0, "\(kept)")
            #expect(FileManager.default.contents(atPath: store.path("kept.bin")) == content, "the stored content is not replaced")

            // A truncated file, into a new store: nothing is stored as the record's asset.
            try content.prefix(3).write(to: URL(fileURLWithPath: file))
            let other = try await cli.newStore("other.sqlite")
            let short = try await cli.run(["import", backup, "--assets-dir", out, "--store", other])
            #expect(short.exitCode == 1 && short.stderr.contains("holds content whose SHA-256 is"), "\(short)")
            let count = try await cli.run(["count", "--type", "Blob", "--store", other])
            #expect(count.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "0", "\(count)")

            // A file of the user's own named like a digest (a cache keyed by a URL's SHA-256),
            // given without a size as such input is, is taken as it is.
            let cacheName = String(repeating: "ab", count: 32)
            _ = try store.writeFile("cache/\(cacheName)", Data("cached".utf8))
            let cached = #"{"recordName":"c1","recordType":"Blob","fields":{"data":{"value":{"downloadURL":"\#(cacheName)"},"type":"ASSETID"}}}"#
            let fromCache = try await cli.run(["import", try cli.file("cache.ndjson", cached + "\n"), "--assets-dir", store.path("cache"), "--store", other])
            #expect(fromCache.exitCode == 0, "\(fromCache)")

            // Put back, the backup restores.
            try content.write(to: URL(fileURLWithPath: file))
            let restored = try await cli.run(["import", backup, "--assets-dir", out, "--store", other])
            #expect(restored.exitCode == 0, "\(restored)")
            let got = try await cli.run(["assets", "get", "b1", "data", "--output", store.path("got.bin"), "--store", other])
            #expect(got.exitCode == 0 && FileManager.default.contents(atPath: store.path("got.bin")) == content, "\(got)")
        }
    }

    @Test("a plain export (file: URLs of the store's own files) imports back into its store, and into another with --assets-dir naming the folder; a file elsewhere is refused naming it", arguments: TestEngine.all)
    func plainExportRestores(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let content = patternBytes(count: 70_000, seed: 3)
            let line = try await Self.importBlob(content, cli, store)

            let exported = try await cli.run(["export", "--type", "Blob", "--quiet"])
            #expect(exported.exitCode == 0, "\(exported)")
            let record = try JSONLine.object(exported.stdout)
            let url = try #require((JSONLine.field(record, "data")?["value"] as? [String: Any])?["downloadURL"] as? String)
            let storeFile = try #require(URL(string: url))
            #expect(storeFile.isFileURL, "\(url)")

            // Into its own store, under another name: the content is read from the store's file.
            let copy = exported.stdout.replacingOccurrences(of: #""recordName":"b1""#, with: #""recordName":"b2""#)
            let again = try await cli.run(["import", try cli.file("copy.ndjson", copy)])
            #expect(again.exitCode == 0, "\(again)")
            let got = try await cli.run(["assets", "get", "b2", "data", "--output", store.path("b2.bin")])
            #expect(got.exitCode == 0, "\(got)")
            #expect(FileManager.default.contents(atPath: store.path("b2.bin")) == content)

            // Into another store: the file is outside its folder, so the record is rejected with
            // the option that reads it; naming the folder restores the bytes.
            let other = try await cli.newStore("other.sqlite")
            let backup = try cli.file("backup.ndjson", exported.stdout)
            let refused = try await cli.run(["import", backup, "--store", other])
            #expect(refused.exitCode == 1, "\(refused)")
            let folder = storeFile.deletingLastPathComponent().path
            #expect(refused.stderr.contains("b1") && refused.stderr.contains("--assets-dir \(folder)"), "\(refused.stderr)")
            let restored = try await cli.run(["import", backup, "--store", other, "--assets-dir", folder])
            #expect(restored.exitCode == 0, "\(restored)")
            let fetched = try await cli.run(["assets", "get", "b1", "data", "--output", store.path("b1.bin"), "--store", other])
            #expect(fetched.exitCode == 0, "\(fetched)")
            #expect(FileManager.default.contents(atPath: store.path("b1.bin")) == content)
            // A URL's scheme in capitals names the same file (FILE:///…).
            let shouting = exported.stdout.replacingOccurrences(of: "file://", with: "FILE://").replacingOccurrences(of: #""recordName":"b1""#, with: #""recordName":"b3""#)
            let capitals = try await cli.run(["import", try cli.file("capitals.ndjson", shouting), "--store", other, "--assets-dir", folder])
            #expect(capitals.exitCode == 0, "\(capitals)")

            // A file: URL outside the folder the user named is not opened, whatever it names.
            let elsewhere = line.replacingOccurrences(of: #""blob.bin""#, with: "\"file://\(store.path("src/blob.bin"))\"")
            let outside = try await cli.run(["import", try cli.file("outside.ndjson", elsewhere + "\n"), "--store", other, "--assets-dir", folder])
            #expect(outside.exitCode == 1, "\(outside)")
            #expect(outside.stderr.contains(store.path("src/blob.bin")) && outside.stderr.contains("outside the assets folder"), "\(outside.stderr)")
            let dotted = line.replacingOccurrences(of: #""blob.bin""#, with: "\"file://\(folder)/../../src/blob.bin\"")
            let climbing = try await cli.run(["import", try cli.file("dotted.ndjson", dotted + "\n"), "--store", other, "--assets-dir", folder])
            #expect(climbing.exitCode == 1 && climbing.stderr.contains("'..'"), "\(climbing)")
        }
    }

    @Test("a CloudKit asset whose fileChecksum is a file's name (not base64) is exported under its SHA-256: a store and a user's file in the folder survive, and the content travels", arguments: TestEngine.all)
    func checksumsThatAreFileNamesNameNoFile(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let content = patternBytes(count: 17, seed: 3)
            let record = #"{"recordName":"a1","recordType":"Photo","fields":{"image":{"type":"ASSETID","value":{"downloadURL":"https://cvws.icloud-content.com/B/x","fileChecksum":"victim.txt","size":17}}}}"#
            // The content where an attach looks for it by record and field, and where a
            // checksum that named files would find it.
            _ = try store.writeFile("in/a1/image", content)
            _ = try store.writeFile("in/victim.txt", content)
            #expect(try await cli.run(["import", try cli.file("ck.ndjson", record + "\n")]).exitCode == 0)
            let attached = try await cli.run(["assets", "attach", store.path("in")])
            #expect(attached.exitCode == 0 && attached.stderr.contains("attached 1"), "\(attached)")

            let out = store.path("out")
            let victim = try store.writeFile("out/victim.txt", Data("my precious notes".utf8))
            let exported = try await cli.run(["export", "--type", "Photo", "--assets-dir", out, "--output", store.path("out.ndjson"), "--quiet"])
            #expect(exported.exitCode == 0, "\(exported)")
            #expect(FileManager.default.contents(atPath: victim.path) == Data("my precious notes".utf8), "the user's file is untouched")
            let written = try #require(cli.read(store.path("out.ndjson")))
            let line = try #require(written.split(separator: "\n").first)
            let value = try #require(JSONLine.field(try JSONLine.object(String(line)), "image")?["value"] as? [String: Any])
            #expect(value["fileChecksum"] as? String == "victim.txt", "the JSON stays CloudKit's: \(value)")
            let contentFile = try #require(value["stratusContentFile"] as? String, "named by its SHA-256: \(value)")
            #expect(contentFile.count == 64 && FileManager.default.contents(atPath: out + "/" + contentFile) == Data(content))

            // Another store reads the content back from the folder.
            let mirror = try await cli.newStore("mirror.sqlite")
            let imported = try await cli.run(["import", store.path("out.ndjson"), "--assets-dir", out, "--store", mirror])
            #expect(imported.exitCode == 0, "\(imported)")
            let got = try await cli.run(["assets", "get", "a1", "image", "--output", store.path("got.bin"), "--store", mirror])
            #expect(got.exitCode == 0, "\(got)")
            #expect(FileManager.default.contents(atPath: store.path("got.bin")) == Data(content))
        }
    }

    @Test("a restore whose assets folder lost a file: content the export named by stratusContentFile rejects its record; a CloudKit asset without its checksum's file is imported as metadata, and the import says so", arguments: TestEngine.all)
    func missingContentIsNeverSilent(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let content = patternBytes(count: 11, seed: 5)
            let named = #"{"recordName":"n1","recordType":"Photo","fields":{"image":{"type":"ASSETID","value":{"downloadURL":"https://cvws.icloud-content.com/B/n","fileChecksum":"not base64!","size":11}}}}"#
            let checksummed = #"{"recordName":"c1","recordType":"Photo","fields":{"image":{"type":"ASSETID","value":{"downloadURL":"https://cvws.icloud-content.com/B/c","fileChecksum":"AQID","size":11}}}}"#
            _ = try store.writeFile("in/n1/image", content)
            _ = try store.writeFile("in/c1/image", content)
            #expect(try await cli.run(["import", try cli.file("ck.ndjson", named + "\n" + checksummed + "\n")]).exitCode == 0)
            #expect(try await cli.run(["assets", "attach", store.path("in")]).exitCode == 0)
            let out = store.path("out")
            #expect(try await cli.run(["export", "--type", "Photo", "--assets-dir", out, "--output", store.path("out.ndjson"), "--quiet"]).exitCode == 0)
            let files = try FileManager.default.contentsOfDirectory(atPath: out)
            #expect(files.count == 2, "\(files)")
            for file in files { try FileManager.default.removeItem(atPath: out + "/" + file) }

            let mirror = try await cli.newStore("mirror.sqlite")
            let restored = try await cli.run(["import", store.path("out.ndjson"), "--assets-dir", out, "--store", mirror])
            #expect(restored.exitCode == 1, "\(restored)")
            #expect(restored.stderr.contains("stratusContentFile") && restored.stderr.contains("is not in the assets folder"), "\(restored.stderr)")
            #expect(restored.stderr.contains("note: 1 CloudKit asset this run read from the input has no file in the assets folder"), "\(restored.stderr)")
            #expect(try await cli.run(["assets", "get", "n1", "image", "--output", store.path("n1.bin"), "--store", mirror]).exitCode != 0)
        }
    }
}
