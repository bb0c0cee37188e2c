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
    @Test("a wrong file or a symbolic link under a content's name is replaced; a re-import from the folder stores the right bytes", arguments: TestEngine.all)
    func wrongFilesAreReplaced(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            // Larger than the chunk the comparison reads, so that the difference lies beyond it.
            let content = patternBytes(count: 600_000, seed: 7)
            _ = try store.writeFile("src/blob.bin", content)
            let line = #"{"recordName":"b1","recordType":"Blob","fields":{"data":{"value":{"downloadURL":"blob.bin"},"type":"ASSETID"}}}"#
            let imported = try await cli.run(["import", try cli.file("blob.ndjson", line + "\n"), "--assets-dir", store.path("src")])
            #expect(imported.exitCode == 0, "\(imported)")

            let out = store.path("out")
            let first = try await cli.run(["export", "--type", "Blob", "--assets-dir", out, "--quiet"])
            #expect(first.exitCode == 0, "\(first)")
            let record = try #require(try JSONSerialization.jsonObject(with: Data(first.stdout.utf8)) as? [String: Any])
            let name = try #require(JSONLine.field(record, "data")?["value"] as? [String: Any])["downloadURL"] as? String
            let file = out + "/" + (name ?? "")
            #expect(FileManager.default.contents(atPath: file) == content)

            // The same size, one byte different near the end.
            var wrong = content
            wrong[wrong.count - 10] ^= 0xFF
            try wrong.write(to: URL(fileURLWithPath: file))
            let second = try await cli.run(["export", "--type", "Blob", "--assets-dir", out, "--quiet"])
            #expect(second.exitCode == 0, "\(second)")
            #expect(FileManager.default.contents(atPath: file) == content, "the wrong file is rewritten")

            // A symbolic link to a file outside: replaced by a file; the target is not touched.
            let outside = try store.writeFile("outside.bin", wrong)
            try FileManager.default.removeItem(atPath: file)
            #expect(symlink(outside.path, file) == 0)
            let third = try await cli.run(["export", "--type", "Blob", "--assets-dir", out, "--quiet"])
            #expect(third.exitCode == 0, "\(third)")
            var info = stat()
            #expect(lstat(file, &info) == 0 && info.st_mode & S_IFMT == S_IFREG, "the link is replaced by a regular file")
            #expect(FileManager.default.contents(atPath: file) == content)
            #expect(FileManager.default.contents(atPath: outside.path) == wrong, "the link's target is left alone")

            // A right file is kept as it is (the same file, not rewritten).
            var before = stat()
            _ = lstat(file, &before)
            let fourth = try await cli.run(["export", "--type", "Blob", "--assets-dir", out, "--quiet"])
            #expect(fourth.exitCode == 0, "\(fourth)")
            var after = stat()
            _ = lstat(file, &after)
            #expect(before.st_ino == after.st_ino)
            // No temporary file is left behind.
            #expect(try FileManager.default.contentsOfDirectory(atPath: out) == [name ?? ""])

            // Another store imports the export from the folder with the right bytes.
            let other = try await cli.newStore("other.sqlite")
            let moved = try await cli.run(["import", try cli.file("export.ndjson", fourth.stdout), "--assets-dir", out, "--store", other])
            #expect(moved.exitCode == 0, "\(moved)")
            let got = try await cli.run(["assets", "get", "b1", "data", "--output", store.path("got.bin"), "--store", other])
            #expect(got.exitCode == 0, "\(got)")
            #expect(FileManager.default.contents(atPath: store.path("got.bin")) == content)
        }
    }
}
