import Foundation
import Stratus
import StratusTestSupport
import Testing

/// Two file or folder options of one command naming the same path would write over each other
/// (the change feed's output replaced by its token file, after "wrote 1 change"): refused as a
/// usage error before anything is read or made.
@Suite("One path for two options", .timeLimit(.minutes(30)))
struct SharedPathsCLITests {
    @Test("changes --token-file T --output T, export --output X --assets-dir X, import --checkpoint R --reject-file R and the same through a link are exit 64 naming both options; nothing is written", arguments: TestEngine.all)
    func sharedPathsRefused(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let input = try cli.file("notes.ndjson", Input.notes(3))
            #expect(try await cli.run(["import", input, "--quiet"]).exitCode == 0)
            let folder = store.directory.path

            let token = folder + "/changes.token"
            let changes = try await cli.run(["changes", "--token-file", token, "--output", token])
            #expect(changes.exitCode == 64 && changes.stderr.contains("--output and --token-file both name '\(token)'"), "\(changes)")
            #expect(!cli.exists(token) && !cli.exists(token + ".lock"), "\(changes)")

            let exported = folder + "/export.out"
            let export = try await cli.run(["export", "--type", "Note", "--output", exported, "--assets-dir", exported])
            #expect(export.exitCode == 64 && export.stderr.contains("--assets-dir and --output both name"), "\(export)")
            #expect(!cli.exists(exported), "\(export)")

            let rejects = folder + "/rejects"
            let imported = try await cli.run(["import", input, "--checkpoint", rejects, "--reject-file", rejects])
            #expect(imported.exitCode == 64 && imported.stderr.contains("--checkpoint and --reject-file both name"), "\(imported)")
            #expect(!cli.exists(rejects), "\(imported)")

            // An existing file reached through a symbolic link is the same file.
            let kept = try cli.file("kept.token", "")
            try FileManager.default.createSymbolicLink(atPath: folder + "/link.ndjson", withDestinationPath: kept)
            let linked = try await cli.run(["changes", "--token-file", kept, "--output", folder + "/link.ndjson"])
            #expect(linked.exitCode == 64 && linked.stderr.contains("both name"), "\(linked)")
            #expect(cli.read(kept) == "", "\(linked)")

            // A link to a file not made yet names the file a write through it makes.
            try FileManager.default.createSymbolicLink(atPath: folder + "/dangling", withDestinationPath: "made-later.token")
            let throughDangling = try await cli.run(["changes", "--token-file", folder + "/made-later.token", "--output", folder + "/dangling"])
            #expect(throughDangling.exitCode == 64 && throughDangling.stderr.contains("both name"), "\(throughDangling)")
            #expect(!cli.exists(folder + "/made-later.token"), "\(throughDangling)")

            // A file not made yet, named through a folder that is a link, is the same file.
            try FileManager.default.createDirectory(atPath: folder + "/real", withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(atPath: folder + "/alias", withDestinationPath: folder + "/real")
            let throughFolder = try await cli.run(["changes", "--token-file", folder + "/alias/t", "--output", folder + "/real/t"])
            #expect(throughFolder.exitCode == 64 && throughFolder.stderr.contains("both name"), "\(throughFolder)")
            #expect(!cli.exists(folder + "/real/t"), "\(throughFolder)")

            // A $STRATUS_USER that is no login is named as the problem (exit 64).
            let badUser = try await cli.run(["count", "--type", "Note"], environment: ["STRATUS_USER": "a\tb"])
            #expect(badUser.exitCode == 64 && badUser.stderr.contains("$STRATUS_USER: login name"), "\(badUser)")

            // Distinct files still work, and a device is no file of its own to protect.
            let apart = try await cli.run(["changes", "--token-file", token, "--output", folder + "/changes.ndjson", "--quiet"])
            #expect(apart.exitCode == 0 && cli.exists(token), "\(apart)")
            #expect(try JSONLine.names(cli.read(folder + "/changes.ndjson") ?? "").sorted() == ["n1", "n2", "n3"])
            let devices = try await cli.run(["import", input, "--reject-file", "/dev/null", "--checkpoint", folder + "/import.checkpoint", "--quiet"])
            #expect(devices.exitCode == 0, "\(devices)")
        }
    }

    @Test("an empty FILE argument (an unset shell variable) is exit 64 for import, schema import, validate and diff, and assets attach; no store is made", arguments: TestEngine.all)
    func emptyFileArguments(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            for arguments in [["import", ""], ["schema", "import", ""], ["schema", "validate", ""], ["schema", "diff", ""], ["assets", "attach", ""]] {
                let refused = try await cli.run(arguments)
                #expect(refused.exitCode == 64 && refused.stderr.contains("non-empty"), "\(arguments): \(refused)")
            }
            #expect(!cli.storeExists(), "a refused command makes no store")
        }
    }
}
