import Foundation
import Stratus
import StratusPostgres
import StratusSQLite
import StratusTestSupport
import Testing

/// A damaged store fails loudly (issue 17 item 8): reads exit 70 naming the store instead of
/// answering with what they could read, and `stratus check` finds the damage.
@Suite("stratus check and damaged stores", .serialized, .timeLimit(.minutes(30)))
struct DamagedStoreCLITests {
    static let recordCount = 20_000

    /// An SQLite store of 20,000 records whose write-ahead log is folded into the file and
    /// removed, so that damage to the file is what readers read. Returns its bytes.
    static func makeStore(_ cli: CLI) async throws -> Data {
        let lines = (0..<recordCount).map { i in
            #"{"recordName":"r\#(String(format: "%05d", i))","recordType":"Row","fields":{"n":{"value":\#(i),"type":"INT64"},"s":{"value":"row \#(i) with some text","type":"STRING"}}}"#
        }
        let imported = try await cli.run(["import", try cli.file("rows.ndjson", lines.joined(separator: "\n") + "\n"), "--quiet"])
        #expect(imported.exitCode == 0, "\(imported)")
        // The last connection to close checkpoints the log and deletes it.
        do { _ = try SQLiteEngine(path: cli.storePath) }
        #expect(!cli.exists(cli.storePath + "-wal"), "the write-ahead log was folded into the file")
        return try Data(contentsOf: URL(fileURLWithPath: cli.storePath))
    }

    /// The pages of an SQLite file of one b-tree page type that hold `marker`: 0x0D table
    /// leaves, 0x0A index leaves, 0x05 table interior pages.
    static func pages(of file: [UInt8], type: UInt8, holding marker: String) -> [Int] {
        let size = pageSize(of: file)
        let needle = Array(marker.utf8)
        return (1..<file.count / size).filter { index in
            let page = file[index * size..<(index + 1) * size]
            guard page.first == type else { return false }
            return needle.isEmpty || page.indices.dropLast(needle.count).contains { start in page[start..<start + needle.count].elementsEqual(needle) }
        }.map { $0 * size }
    }

    static func pageSize(of file: [UInt8]) -> Int {
        let size = Int(file[16]) << 8 | Int(file[17])
        return size == 1 ? 65_536 : size
    }

    /// Ways of damaging the file that every read of the records meets: a page of records
    /// zeroed, a records page's type byte flipped, an index page of record names with its type
    /// flipped, an interior page of the records overwritten.
    static func damage(_ clean: Data, _ way: Int) throws -> (Data, String) {
        var bytes = [UInt8](clean)
        let size = pageSize(of: bytes)
        switch way {
        case 0:
            let leaves = pages(of: bytes, type: 0x0D, holding: "with some text")
            let start = try #require(leaves.dropFirst(leaves.count / 2).first, "a page of records")
            for i in start..<start + size { bytes[i] = 0 }
            return (Data(bytes), "a page of records zeroed")
        case 1:
            let leaves = pages(of: bytes, type: 0x0D, holding: "with some text")
            let start = try #require(leaves.dropFirst(leaves.count / 3).first, "a page of records")
            bytes[start] ^= 0xFF
            return (Data(bytes), "a records page's type flipped")
        case 2:
            let indexes = pages(of: bytes, type: 0x0A, holding: "r10")
            let start = try #require(indexes.first, "an index page of record names")
            bytes[start] ^= 0xFF
            return (Data(bytes), "an index page's type flipped")
        default:
            let interior = pages(of: bytes, type: 0x05, holding: "")
            let start = try #require(interior.first, "an interior page")
            for i in start..<start + size { bytes[i] = 0xA5 }
            return (Data(bytes), "an interior page overwritten")
        }
    }

    // SQLite only: damaged pages of an SQLite file; the PostgreSQL counterparts are postgresOrphans and postgresDamagedDocuments.
    @Test("a store of 20,000 records with damaged pages: count and export exit 70 naming the store, not a part of the records with exit 0; check exits 70")
    func damagedPages() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store)
            let clean = try await Self.makeStore(cli)
            let healthy = try await cli.run(["check"])
            #expect(healthy.exitCode == 0 && healthy.stdout == "ok\n", "\(healthy)")

            for way in 0..<4 {
                let (damaged, label) = try Self.damage(clean, way)
                try damaged.write(to: URL(fileURLWithPath: cli.storePath))

                let count = try await cli.run(["count", "--type", "Row"])
                #expect(count.exitCode == 70 && count.stdout.isEmpty, "\(label): \(count)")
                #expect(count.stderr.contains(cli.storePath), "\(label): the message names the store: \(count)")

                let output = store.path("export-\(way).ndjson")
                let export = try await cli.run(["export", "--type", "Row", "--output", output, "--quiet"])
                #expect(export.exitCode == 70 && export.stderr.contains(cli.storePath), "\(label): \(export)")
                #expect(!cli.exists(output), "\(label): a failed export leaves no output file")
                let piped = try await cli.run(["export", "--type", "Row", "--quiet"])
                #expect(piped.exitCode == 70, "\(label): exit \(piped.exitCode) after \(piped.stdoutLines.count) records")

                let check = try await cli.run(["check"])
                #expect(check.exitCode == 70, "\(label): \(check)")
                #expect(check.stderr.contains(cli.storePath) && check.stdout != "ok\n", "\(label): check names the store and the problems: \(check)")
            }
        }
    }

    // SQLite only: a file that is no database; the PostgreSQL counterpart is foreignTablesInTheSchema (HostileSurroundingsCLITests).
    @Test("a file that is not an SQLite database at all: every read and check exit 70 naming it")
    func notADatabase() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store)
            try Data(repeating: 0x5A, count: 64 * 1_024).write(to: URL(fileURLWithPath: cli.storePath))
            for arguments in [["count", "--type", "Row"], ["export", "--type", "Row"], ["check"], ["info"]] {
                let result = try await cli.run(arguments)
                #expect(result.exitCode == 70, "\(result)")
                #expect(result.stderr.contains(cli.storePath) && result.stderr.contains("not a Stratus store"), "\(result)")
                #expect(result.stdout.isEmpty, "\(result)")
            }
        }
    }

    @Test("check on a sound store prints ok and exits 0", arguments: TestEngine.all)
    func soundStore(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(30)).exitCode == 0)
            let result = try await cli.run(["check"])
            #expect(result.exitCode == 0, "\(result)")
            #expect(result.stdout == "ok\n" && result.stderr.isEmpty, "\(result)")
            #expect(try await cli.run(["check", "--zone", "x"]).exitCode == 64, "check takes only --store")
        }
    }

    @Test("asset content cut short in the store (a content file, a chunk): export --assets-dir fails with 70, naming the record and the damage, and writes no file for it; assets get exits 70 writing nothing; check exits 70 naming the file", arguments: TestEngine.all)
    func truncatedAssetContent(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let (contents, file) = try await cli.importPhotoWithContentCutShort(in: store, folder: "src", seed: 9)

            let export = try await cli.run(["export", "--type", "Photo", "--assets-dir", store.path("out")])
            #expect(export.exitCode == 70, "the store's damage, not bad data: \(export)")
            #expect(export.stderr.contains("'pic'") && export.stderr.contains("5000 bytes where") && export.stderr.contains("has 20000") && export.stderr.contains("damaged"), "\(export.stderr)")
            let written = (try? FileManager.default.contentsOfDirectory(atPath: store.path("out"))) ?? []
            #expect(written.filter { !$0.hasPrefix(".") }.isEmpty, "no file holds the damage under the asset's name: \(written)")

            let get = try await cli.run(["assets", "get", "pic", "image"])
            #expect(get.exitCode == 70 && get.stdout.isEmpty, "\(get)")
            #expect(get.stderr.contains("damaged"), "\(get.stderr)")

            let check = try await cli.run(["check"])
            #expect(check.exitCode == 70, "\(check)")
            let problem = engine == .sqlite
                ? "asset content \(file) in \(contents) has 5000 bytes where record 'pic' in zone _defaultZone of default public gives its asset 20000"
                : "asset content \(file) holds 5000 of its 20000 bytes in \(contents)"
            #expect(check.stdoutLines == [problem], "\(check)")
        }
    }

    @Test("asset content the store lost (an SQLite store copied without its .assets folder, rows deleted by raw SQL): check exits 70 naming the content and a record that names it", arguments: TestEngine.all)
    func missingAssetContent(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            _ = try store.writeFile("src/a.bin", Data("first content".utf8))
            _ = try store.writeFile("src/b.bin", Data("second content".utf8))
            let lines = [#"{"recordName":"p1","recordType":"Photo","fields":{"image":{"value":{"downloadURL":"a.bin"},"type":"ASSETID"}}}"#,
                         #"{"recordName":"p2","recordType":"Photo","fields":{"image":{"value":{"downloadURL":"a.bin"},"type":"ASSETID"}}}"#,
                         #"{"recordName":"p3","recordType":"Photo","fields":{"image":{"value":{"downloadURL":"b.bin"},"type":"ASSETID"}}}"#]
            let imported = try await cli.run(["import", try cli.file("photos.ndjson", lines.joined(separator: "\n") + "\n"), "--assets-dir", store.path("src"), "--quiet"])
            #expect(imported.exitCode == 0, "\(imported)")
            #expect(try await cli.run(["check"]).stdout == "ok\n")

            let lost = SHA256Hasher.digest(Array("first content".utf8)).hexadecimal
            switch engine {
            case .sqlite:
                try FileManager.default.removeItem(atPath: cli.storePath + ".assets/sha256/" + lost)
            case .postgres:
                _ = try PostgresConnection(url: cli.storePath).execute("DELETE FROM asset_contents WHERE content_id = $1", [.text(lost)])
            }
            let result = try await cli.run(["check"])
            #expect(result.exitCode == 70, "\(result)")
            #expect(result.stdoutLines == ["asset content \(lost), named by record 'p1' in zone _defaultZone of default public and 1 other record(s), is missing from "
                                           + (engine == .sqlite ? cli.storePath + ".assets/sha256" : "the store's asset_contents")], "\(result)")
            #expect(result.stderr.contains("damaged"), "\(result)")

            if engine == .postgres {
                let cut = SHA256Hasher.digest(Array("second content".utf8)).hexadecimal
                _ = try PostgresConnection(url: cli.storePath).execute("DELETE FROM asset_chunks WHERE content_id = $1", [.text(cut)])
                let again = try await cli.run(["check"])
                #expect(again.exitCode == 70 && again.stdoutLines.count == 2, "\(again)")
                #expect(again.stdoutLines.last == "asset content \(cut) holds 0 of its 14 bytes in asset_chunks", "\(again)")
            }
        }
    }

    @Test("asset content whose bytes changed but not its size (a byte of a content file or of an asset_chunks row rewritten): check reads every content, exits 70 naming it and a record that names it", arguments: TestEngine.all)
    func changedAssetContent(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            // Three chunks on PostgreSQL (1 MiB a row); the change is in the last.
            var bytes = patternBytes(count: 3_000_000, seed: 5)
            _ = try store.writeFile("src/photo.bin", bytes)
            _ = try store.writeFile("src/other.bin", Data("other content".utf8))
            let lines = [#"{"recordName":"p1","recordType":"Photo","fields":{"image":{"value":{"downloadURL":"photo.bin"},"type":"ASSETID"}}}"#,
                         #"{"recordName":"p2","recordType":"Photo","fields":{"image":{"value":{"downloadURL":"photo.bin"},"type":"ASSETID"}}}"#,
                         #"{"recordName":"p3","recordType":"Photo","fields":{"image":{"value":{"downloadURL":"other.bin"},"type":"ASSETID"}}}"#]
            let imported = try await cli.run(["import", try cli.file("photos.ndjson", lines.joined(separator: "\n") + "\n"), "--assets-dir", store.path("src"), "--quiet"])
            #expect(imported.exitCode == 0, "\(imported)")
            #expect(try await cli.run(["check"]).stdout == "ok\n")

            let identifier = SHA256Hasher.digest(Array(bytes)).hexadecimal
            let offset = 2 * (1 << 20) + 100
            bytes[offset] &+= 1
            let location: String
            switch engine {
            case .sqlite:
                location = cli.storePath + ".assets/sha256"
                let file = location + "/" + identifier
                #expect(chmod(file, 0o600) == 0)
                let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: file))
                try handle.seek(toOffset: UInt64(offset))
                try handle.write(contentsOf: Data([bytes[offset]]))
                try handle.close()
            case .postgres:
                location = "the store's asset_chunks"
                _ = try PostgresConnection(url: cli.storePath).execute(
                    "UPDATE asset_chunks SET data = set_byte(data, 100, (get_byte(data, 100) + 1) % 256) WHERE content_id = $1 AND chunk = 2", [.text(identifier)])
            }
            let result = try await cli.run(["check"])
            #expect(result.exitCode == 70, "\(result)")
            let found = SHA256Hasher.digest(Array(bytes)).hexadecimal
            #expect(result.stdoutLines == ["asset content \(identifier) in \(location) holds bytes whose SHA-256 is \(found), not the one that names it; record 'p1' in zone _defaultZone of default public names it"], "\(result)")
            #expect(result.stderr.contains("damaged"), "\(result)")
        }
    }


    @Test("a store whose schema version no Stratus writes (negative; on PostgreSQL also not a number) is refused as damaged (70) by reads and writes, and is not upgraded over its data", arguments: TestEngine.all)
    func damagedSchemaVersion(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            // A creator named by a login, not a user record name: what version 5's upgrade renamed.
            let record = #"{"recordName":"u1","recordType":"T","fields":{},"recordChangeTag":"x1","created":{"timestamp":1700000000000,"userRecordName":"alice"},"modified":{"timestamp":1700000000000,"userRecordName":"alice"}}"#
            #expect(try await cli.run(["import", "--quiet"], stdin: record + "\n").exitCode == 0)
            let damagedVersions = engine == .sqlite ? ["-1", "-2147483648"] : ["-1", "0", "eleven"]
            var current = ""
            for damaged in damagedVersions {
                switch engine {
                case .sqlite:
                    let set = try await cli.shell("sqlite3 '\(cli.storePath)' 'PRAGMA user_version' 'PRAGMA user_version = \(damaged)'")
                    #expect(set.exitCode == 0, "\(set)")
                    current = set.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
                case .postgres:
                    let raw = try PostgresConnection(url: cli.storePath)
                    current = try #require(try raw.query("SELECT value FROM meta WHERE key = 'version'").first?.text(0))
                    _ = try raw.execute("UPDATE meta SET value = $1 WHERE key = 'version'", [.text(damaged)])
                }
                for arguments in [["get", "u1"], ["count", "--type", "T"], ["import", "--quiet"]] {
                    let result = try await cli.run(arguments, stdin: #"{"recordName":"u2","recordType":"T","fields":{}}"# + "\n")
                    #expect(result.exitCode == 70 && result.stderr.contains("no Stratus writes") && result.stderr.contains("damaged"), "version \(damaged), \(arguments[0]): \(result)")
                }
                switch engine {
                case .sqlite:
                    let kept = try await cli.shell("sqlite3 '\(cli.storePath)' 'PRAGMA user_version' 'PRAGMA user_version = \(current)'")
                    #expect(kept.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == damaged, "the version is left as it was: \(kept)")
                case .postgres:
                    let raw = try PostgresConnection(url: cli.storePath)
                    #expect(try raw.query("SELECT value FROM meta WHERE key = 'version'").first?.text(0) == damaged, "the version is left as it was")
                    _ = try raw.execute("UPDATE meta SET value = $1 WHERE key = 'version'", [.text(current)])
                }
            }
            let read = try await cli.run(["get", "u1"])
            #expect(read.exitCode == 0 && read.stdout.contains(#""userRecordName":"alice""#), "the creator was not rewritten: \(read)")
            #expect(try await cli.run(["count", "--type", "T"]).stdout == "1\n", "nothing was imported into the damaged store")
        }
    }

    @Test("a store of a newer version opened read-only (an SQLite file with a second name, a PostgreSQL role that may only read) says to use a newer Stratus (70), not to open it with write access (77)", arguments: TestEngine.all)
    func newerStoreReadOnly(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(3)).exitCode == 0)
            var reader: (name: String, url: String)?
            defer { if let reader { cli.dropRole(reader.name) } }
            switch engine {
            case .sqlite:
                // A file with a second name is opened read-only.
                let set = try await cli.shell("sqlite3 '\(cli.storePath)' 'PRAGMA user_version = 999' && ln '\(cli.storePath)' '\(store.path("second-name.sqlite"))'")
                #expect(set.exitCode == 0, "\(set)")
            case .postgres:
                reader = try cli.makeRole("reader", access: .read)
                _ = try PostgresConnection(url: cli.storePath).execute("UPDATE meta SET value = '999' WHERE key = 'version'")
            }
            let result = try await cli.run(["count", "--type", "Note"] + (reader.map { ["--store", $0.url] } ?? []), environment: reader == nil ? [:] : ["STRATUS_USER": ""])
            #expect(result.exitCode == 70 && result.stderr.contains("version 999") && result.stderr.contains("Use a newer Stratus"), "\(result)")
            #expect(!result.stderr.contains("write access") && !result.stderr.contains("may not write"), "\(result)")
        }
    }

    // PostgreSQL only: rows a raw statement left; the SQLite counterpart is damagedPages.
    @Test("PostgreSQL: records whose zone row is gone are a damaged store: check exits 70 naming it and the problem")
    func postgresOrphans() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: .postgres)
            #expect(try await cli.run(["zones", "create", "Work"]).exitCode == 0)
            #expect(try await cli.run(["import", "--quiet", "--zone", "Work"], stdin: Input.notes(5)).exitCode == 0)
            _ = try PostgresConnection(url: cli.storePath).execute("DELETE FROM zones WHERE zone_name = 'Work'")
            let result = try await cli.run(["check"])
            #expect(result.exitCode == 70, "\(result)")
            #expect(result.stdout.contains("5 record(s) belong to no zone"), "\(result)")
            #expect(result.stderr.contains("postgresql://") && result.stderr.contains("damaged"), "\(result)")
        }
    }

    // PostgreSQL only: a document a raw statement wrote; the SQLite counterpart is damagedPages.
    @Test("SQLite: a record whose field document a flipped byte made unreadable, in a type whose queryable field an index reads: check exits 70 naming the record, not an internal error of SQLite's JSON functions (found by an adversarial tester)")
    func sqliteDamagedDocumentUnderAnIndex() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: .sqlite)
            let schema = try cli.file("t.ckdb", "DEFINE SCHEMA\n    RECORD TYPE T (title STRING QUERYABLE, GRANT READ, CREATE, WRITE TO \"_creator\", GRANT READ TO \"_world\", GRANT CREATE TO \"_icloud\");\n")
            #expect(try await cli.run(["schema", "import", schema]).exitCode == 0)
            let line = #"{"recordName":"r1","recordType":"T","fields":{"title":{"value":"hello-world-marker","type":"STRING"}}}"#
            #expect(try await cli.run(["import", "--quiet"], stdin: line + "\n").exitCode == 0)
            var bytes = try Data(contentsOf: URL(fileURLWithPath: cli.storePath))
            let marker = try #require(bytes.range(of: Data("hello-world-marker".utf8)))
            bytes[marker.upperBound] = 0x82
            try bytes.write(to: URL(fileURLWithPath: cli.storePath))
            let result = try await cli.run(["check"])
            #expect(result.exitCode == 70, "\(result)")
            #expect(result.stdout.contains("integrity_check stopped") && result.stdout.contains("record 'r1'"), "\(result)")
            #expect(!result.stderr.contains("internalError"), "\(result)")
        }
    }

    @Test("PostgreSQL: a record whose field document a raw UPDATE made unreadable: reads exit 70, check exits 70 naming the record")
    func postgresDamagedDocuments() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: .postgres)
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(5)).exitCode == 0)
            let raw = try PostgresConnection(url: cli.storePath)
            let name = try #require(try raw.query("SELECT record_name FROM records ORDER BY record_name LIMIT 1").first?.text(0))
            #expect(try raw.execute("UPDATE records SET fields = '{\"title\": [\"Q\", 1]}', exact_fields = NULL WHERE record_name = $1", [.text(name)]) == 1)
            let read = try await cli.run(["export", "--type", "Note"])
            #expect(read.exitCode == 70 && read.stderr.contains("record '\(name)'"), "the error names the damaged record: \(read)")
            let got = try await cli.run(["get", name])
            #expect(got.exitCode == 70 && got.stderr.contains("record '\(name)'"), "\(got)")
            let result = try await cli.run(["check"])
            #expect(result.exitCode == 70, "\(result)")
            #expect(result.stdoutLines.count == 1 && result.stdout.contains("record '\(name)' in zone _defaultZone of default public: its field document does not decode"), "\(result)")
            #expect(result.stderr.contains("damaged"), "\(result)")
        }
    }
}
