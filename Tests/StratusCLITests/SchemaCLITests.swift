import Foundation
@_spi(StratusEngine) import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

/// `stratus schema export|import|validate|diff|deploy|reset`, `stratus types`, `query --explain`
/// and the development advice, end to end with their exit codes.
@Suite("stratus schema", .timeLimit(.minutes(30)))
struct SchemaCLITests {
    static let forum = """
        DEFINE SCHEMA
            CREATE ROLE moderator;

            RECORD TYPE Notice (
                "___recordID" REFERENCE QUERYABLE,
                text STRING,
                GRANT READ TO "_world",
                GRANT CREATE, WRITE TO moderator
            );

            RECORD TYPE Post (
                "___createTime" TIMESTAMP SORTABLE,
                "___recordID" REFERENCE QUERYABLE,
                rank INT64 SORTABLE,
                title STRING QUERYABLE SEARCHABLE,
                GRANT WRITE TO "_creator",
                GRANT CREATE TO "_icloud",
                GRANT READ TO "_world"
            );

        """

    /// A store with the forum schema imported into development.
    static func forumStore(_ cli: CLI) async throws {
        let imported = try await cli.run(["schema", "import", try cli.file("forum.ckdb", forum)])
        #expect(imported.exitCode == 0, "\(imported)")
    }

    @Test("a schema FILE of - is standard input for import, validate and diff; its errors name stdin", arguments: TestEngine.all)
    func standardInput(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let valid = try await cli.run(["schema", "validate", "-"], stdin: Self.forum)
            #expect(valid.exitCode == 0 && valid.stderr.contains("stdin is valid"), "\(valid)")
            let imported = try await cli.run(["schema", "import", "-"], stdin: Self.forum)
            #expect(imported.exitCode == 0 && imported.stderr.contains("imported stdin"), "\(imported)")
            #expect(try await cli.run(["schema", "export"]).stdout.contains("RECORD TYPE Post ("))
            let same = try await cli.run(["schema", "diff", "-"], stdin: Self.forum)
            #expect(same.exitCode == 0, "\(same)")
            let broken = try await cli.run(["schema", "import", "-"], stdin: "DEFINE SCHEMA\n    RECORD TYPE (\n")
            #expect(broken.exitCode == 65 && broken.stderr.contains("stratus: stdin:2:"), "\(broken)")
        }
    }

    @Test("an empty list that named no type is called one in refusals, not a list of strings: a retype of its field, a production save into another type (found by a schema tester)", arguments: TestEngine.all)
    func untypedEmptyListsAreSaidAsTheyAre(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            #expect(try await cli.run(["schema", "import", try cli.file("a.ckdb", "DEFINE SCHEMA\n    RECORD TYPE T (tags LIST<STRING>, ts TIMESTAMP);\n")]).exitCode == 0)
            let empty = #"{"recordName":"t1","recordType":"T","fields":{"tags":{"value":[],"type":"UNKNOWN_LIST"}}}"# + "\n"
            #expect(try await cli.run(["import", try cli.file("t1.ndjson", empty), "--quiet", "--database", "private"]).exitCode == 0)
            let retyped = try await cli.run(["schema", "import", try cli.file("c.ckdb", "DEFINE SCHEMA\n    RECORD TYPE T (tags STRING, ts TIMESTAMP);\n")])
            #expect(retyped.exitCode == 65 && retyped.stderr.contains("1 record of T holds it as an empty list") && !retyped.stderr.contains("STRING_LIST"), "\(retyped)")

            #expect(try await cli.run(["schema", "deploy"]).exitCode == 0)
            let intoDate = #"{"recordName":"t2","recordType":"T","fields":{"ts":{"value":[],"type":"UNKNOWN_LIST"}}}"# + "\n"
            let refused = try await cli.run(["import", try cli.file("t2.ndjson", intoDate), "--environment", "production", "--database", "private"])
            #expect(refused.exitCode != 0 && refused.stderr.contains("value type UNKNOWN_LIST (an empty list) for field 'ts'"), "\(refused)")
        }
    }

    /// What CloudKit's own schema export grants a type a program made in development.
    static let openGrants = #"GRANT READ, CREATE, WRITE TO "_creator", GRANT READ TO "_world", GRANT CREATE TO "_icloud""#

    @Test("a schema import judges an empty list as a save does: one that named its type is a list of that type, so retyping its field is refused, naming it, and the store still copies and its export imports again; one without a type fits any list; an encrypted one needs an encrypted field (found by an adversarial tester)", arguments: TestEngine.all)
    func emptyListsAreJudgedAsSavesJudgeThem(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let empty = #"{"recordName":"e1","recordType":"Item","fields":{"tags":{"value":[],"type":"STRING_LIST"}}}"# + "\n"
            #expect(try await cli.run(["import", try cli.file("e.ndjson", empty), "--quiet"]).exitCode == 0)
            let retyped = try await cli.run(["schema", "import", try cli.file("s.ckdb", "DEFINE SCHEMA\n    RECORD TYPE Item (tags LIST<INT64>, \(Self.openGrants));\n")])
            #expect(retyped.exitCode == 65 && retyped.stderr.contains("1 record of Item holds it as an empty STRING_LIST"), "\(retyped)")
            let copy = try await cli.newStore("copy")
            let copied = try await cli.run(["copy", "--from", cli.storePath, "--to", copy])
            #expect(copied.exitCode == 0, "\(copied)")
            let exported = try await cli.run(["export", "--type", "Item", "--quiet"])
            #expect(exported.exitCode == 0 && exported.stdout.contains(#""recordName":"e1""#), "\(exported)")
            let again = try await cli.run(["import", try cli.file("again.ndjson", exported.stdout), "--mode", "forceReplace", "--quiet"])
            #expect(again.exitCode == 0, "\(again)")

            // Without a type, an empty list fits a field of any list type.
            let untyped = #"{"recordName":"u1","recordType":"Loose","fields":{"tags":{"value":[],"type":"UNKNOWN_LIST"}}}"# + "\n"
            #expect(try await cli.run(["import", try cli.file("u.ndjson", untyped), "--quiet"]).exitCode == 0)
            let loose = try await cli.run(["schema", "import", try cli.file("l.ckdb", "DEFINE SCHEMA\n    RECORD TYPE Item (tags LIST<STRING>, \(Self.openGrants));\n    RECORD TYPE Loose (tags LIST<INT64>, \(Self.openGrants));\n")])
            #expect(loose.exitCode == 0, "\(loose)")

            // Encryption is no element type: an encrypted empty list does not fit a plain field.
            let secret = #"{"recordName":"s1","recordType":"Vault","fields":{"keys":{"value":[],"type":"UNKNOWN_LIST","isEncrypted":true}}}"# + "\n"
            #expect(try await cli.run(["import", try cli.file("s1.ndjson", secret), "--quiet", "--database", "private"]).exitCode == 0)
            let plain = try await cli.run(["schema", "import", try cli.file("v.ckdb", "DEFINE SCHEMA\n    RECORD TYPE Item (tags LIST<STRING>, \(Self.openGrants));\n    RECORD TYPE Loose (tags LIST<INT64>, \(Self.openGrants));\n    RECORD TYPE Vault (keys LIST<STRING>);\n")])
            #expect(plain.exitCode == 65 && plain.stderr.contains("keys"), "\(plain)")
        }
    }

    @Test("schema validate and import count the record types a file declares: Users only when the file declares it, as exports do", arguments: TestEngine.all)
    func countsWhatTheFileDeclares(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fixtures/ckdb")
            let cases: [(path: String, counts: String)] = [
                (try cli.file("one.ckdb", "DEFINE SCHEMA\n    RECORD TYPE Note (title STRING);\n"), "(1 record type(s), 0 role(s))"),
                (try cli.file("forum.ckdb", Self.forum), "(2 record type(s), 1 role(s))"),
                // An export: nine types and the Users type CloudKit always writes.
                (fixtures.appendingPathComponent("01-Dispatch.ckdb").path, "(10 record type(s), 1 role(s))"),
            ]
            for (path, counts) in cases {
                let valid = try await cli.run(["schema", "validate", path])
                #expect(valid.exitCode == 0 && valid.stderr == "stratus: \(path) is valid \(counts)\n", "\(valid)")
            }
            let imported = try await cli.run(["schema", "import", cases[0].path])
            #expect(imported.exitCode == 0 && imported.stderr.contains("as the development schema (1 record type(s), 0 role(s))"), "\(imported)")
            let exported = try await cli.run(["schema", "export", "--output", store.path("out.ckdb")])
            #expect(exported.exitCode == 0 && exported.stderr.contains("(2 record type(s), 0 role(s))"), "the export writes Note and Users: \(exported)")
            #expect(cli.read(store.path("out.ckdb"))?.contains("RECORD TYPE Users (") == true)
        }
    }

    @Test("schema export prints the environment's schema, or writes it to --output; a missing store is exit 66", arguments: TestEngine.all)
    func export(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            #expect(try await cli.run(["schema", "export"]).exitCode == 66, "read commands never create a store")
            try await Self.forumStore(cli)
            let printed = try await cli.run(["schema", "export"])
            #expect(printed.exitCode == 0, "\(printed)")
            for line in ["DEFINE SCHEMA", "CREATE ROLE moderator;", "RECORD TYPE Post (", "rank", "INT64", "SORTABLE", "GRANT CREATE, WRITE TO moderator", "RECORD TYPE Users ("] {
                #expect(printed.stdout.contains(line), "export shows \(line): \(printed.stdout)")
            }
            let output = store.path("out.ckdb")
            let written = try await cli.run(["schema", "export", "--output", output])
            #expect(written.exitCode == 0 && written.stdout.isEmpty, "\(written)")
            #expect(cli.read(output) == printed.stdout)
            // Production has nothing until a deploy (but the Users type every container has).
            let production = try await cli.run(["schema", "export", "--environment", "production"])
            #expect(production.exitCode == 0 && !production.stdout.contains("RECORD TYPE Post"), "\(production)")
            #expect(try await cli.run(["schema", "export", "--environment", "staging"]).exitCode == 64)
            #expect(try await cli.run(["schema", "export", "extra"]).exitCode == 64)
            #expect(try await cli.run(["schema", "export", "--output", store.path("missing-folder/out.ckdb")]).exitCode == 73)
        }
    }

    @Test("schema export --output writes as export --output does: a FIFO directly, a link's target; an existing file only with --force", arguments: TestEngine.all)
    func exportOutputKinds(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            try await Self.forumStore(cli)
            let printed = try await cli.run(["schema", "export"])
            #expect(printed.exitCode == 0, "\(printed)")

            // A FIFO is written, not replaced by a file (as root, a file renamed over a device
            // node such as /dev/null destroys it the same way). Held open for reading and
            // writing here, so neither side waits for the other.
            let fifo = store.path("schema.fifo")
            #expect(mkfifo(fifo, 0o600) == 0)
            let reader = open(fifo, O_RDWR | O_NONBLOCK)
            #expect(reader >= 0)
            defer { close(reader) }
            let toFIFO = try await cli.run(["schema", "export", "--output", fifo])
            #expect(toFIFO.exitCode == 0, "\(toFIFO)")
            var info = stat()
            #expect(lstat(fifo, &info) == 0 && info.st_mode & S_IFMT == S_IFIFO, "the FIFO is still a FIFO")
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            let count = read(reader, &buffer, buffer.count)
            #expect(count > 0 && String(decoding: buffer[..<max(count, 0)], as: UTF8.self) == printed.stdout)

            // An existing file is kept without --force; a link is followed and stays a link.
            let existing = try cli.file("kept.ckdb", "keep me\n")
            let refused = try await cli.run(["schema", "export", "--output", existing])
            #expect(refused.exitCode == 73 && refused.stderr.contains("--force"), "\(refused)")
            #expect(cli.read(existing) == "keep me\n")
            #expect(try await cli.run(["schema", "export", "--output", existing, "--force"]).exitCode == 0)
            #expect(cli.read(existing) == printed.stdout)
            let target = try cli.file("target.ckdb", "old\n")
            let link = store.path("link.ckdb")
            try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)
            #expect(try await cli.run(["schema", "export", "--output", link, "--force"]).exitCode == 0)
            #expect(lstat(link, &info) == 0 && info.st_mode & S_IFMT == S_IFLNK, "the link stays a link")
            #expect(cli.read(target) == printed.stdout)
            #expect(try await cli.run(["schema", "export", "--output", store.directory.path]).exitCode == 73)
            #expect(try await cli.run(["schema", "import", try cli.file("again.ckdb", Self.forum), "--force"]).exitCode == 64)
        }
    }

    @Test("a schema file larger than the reader's limit is refused (65) by validate, import and diff, and the import creates and changes nothing", arguments: TestEngine.all)
    func oversizedSchemaFile(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            // Valid but for its size: white space after the last statement. The reader stops at
            // the limit, so /dev/zero or an endless FIFO is refused the same way instead of
            // being read until memory runs out.
            let limit = 32 << 20   // SchemaReader's maximumFileSize
            var bytes = Data("DEFINE SCHEMA RECORD TYPE Big (title STRING);".utf8)
            bytes.append(Data(repeating: UInt8(ascii: " "), count: limit))
            let big = try store.writeFile("big.ckdb", bytes).path
            for action in ["validate", "import"] {
                let result = try await cli.run(["schema", action, big])
                #expect(result.exitCode == 65 && result.stderr.contains("larger than \(limit) bytes"), "\(result)")
            }
            #expect(!cli.storeExists(), "a refused import creates no store")
            try await Self.forumStore(cli)
            let before = try await cli.run(["schema", "export"])
            let diff = try await cli.run(["schema", "diff", big])
            #expect(diff.exitCode == 65, "\(diff)")
            let refused = try await cli.run(["schema", "import", big])
            #expect(refused.exitCode == 65, "\(refused)")
            #expect(try await cli.run(["schema", "export"]).stdout == before.stdout, "the refused import changed nothing")
        }
    }

    @Test("a schema file past Stratus's limits (record types, fields of a type, fields in all, index options, roles) is refused (65) at the declaration that passes one, and the stored schema stays", arguments: TestEngine.all)
    func schemaLimits(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            try await Self.forumStore(cli)
            let before = try await cli.run(["schema", "export"])
            #expect(before.exitCode == 0, "\(before)")
            // Each file passes one limit by one declaration. Files of 100,000 types or indexed
            // fields (2.5 MB, far under the size limit) held the write lock for hours.
            let types = "DEFINE SCHEMA\n" + (0...1_000).map { "RECORD TYPE T\($0) (f STRING);\n" }.joined()
            let fields = "DEFINE SCHEMA\nRECORD TYPE Wide (\n" + (0...1_000).map { "    f\($0) STRING" }.joined(separator: ",\n") + "\n);\n"
            let indexes = "DEFINE SCHEMA\n" + (0..<3).map { type in
                "RECORD TYPE I\(type) (\n" + (0..<700).map { "    f\($0) INT64 QUERYABLE" }.joined(separator: ",\n") + "\n);\n"
            }.joined()
            let grid = "DEFINE SCHEMA\n" + (0..<26).map { type in
                "RECORD TYPE G\(type) (\n" + (0..<800).map { "    f\($0) INT64" }.joined(separator: ",\n") + "\n);\n"
            }.joined()
            let cases: [(name: String, text: String, place: String, says: String)] = [
                ("types.ckdb", types, "1002:13", "1000 record types"),
                ("fields.ckdb", fields, "1003:5", "1000 fields a record type may declare"),
                // The 20,001st field: the first of the 26th type, 800 fields each (802 lines a type).
                ("grid.ckdb", grid, "\(1 + 25 * 802 + 2):5", "20000 fields a schema file may declare"),
                ("roles.ckdb", "DEFINE SCHEMA\n" + (0...1_000).map { "CREATE ROLE r\($0);\n" }.joined(), "1002:13", "1000 roles"),
                // The 2,001st option: the 601st field of the third type (lines: 1 DEFINE, 702 per type, then the type's line).
                ("indexes.ckdb", indexes, "\(1 + 2 * 702 + 1 + 601):16", "2000 QUERYABLE, SORTABLE and SEARCHABLE options"),
            ]
            for (name, text, place, says) in cases {
                let path = try cli.file(name, text)
                for action in ["validate", "import"] {
                    let result = try await cli.run(["schema", action, path])
                    #expect(result.exitCode == 65, "\(name): \(result)")
                    #expect(result.stderr.contains("\(name):\(place): ") && result.stderr.contains(says), "\(name) names where and which limit: \(result)")
                }
            }
            #expect(try await cli.run(["schema", "export"]).stdout == before.stdout, "the refused imports changed nothing")
            // At the limits, a file is read.
            let most = "DEFINE SCHEMA\n" + (0..<999).map { "RECORD TYPE T\($0) (f STRING);\n" }.joined()
            let atLimit = try await cli.run(["schema", "validate", try cli.file("most.ckdb", most)])
            #expect(atLimit.exitCode == 0, "999 types and Users: \(atLimit)")

            // At the limits, what is imported exports to a file that reads back: the system
            // fields and the Users type every export writes are not counted.
            let widest = "DEFINE SCHEMA\n" + (0..<1_000).map { "RECORD TYPE T\($0) (f STRING);\n" }.joined()
                + "RECORD TYPE Wide (\n    \"___createTime\" TIMESTAMP SORTABLE,\n" + (0..<1_000).map { "    f\($0) STRING" }.joined(separator: ",\n")
                + ",\n    GRANT WRITE TO \"_creator\", GRANT CREATE TO \"_icloud\", GRANT READ TO \"_world\"\n);\n"
            let imported = try await cli.run(["schema", "import", try cli.file("widest.ckdb", widest.replacingOccurrences(of: "RECORD TYPE T999 (f STRING);\n", with: ""))])
            #expect(imported.exitCode == 0, "\(imported)")
            let exported = try await cli.run(["schema", "export"])
            #expect(exported.stdout.contains("RECORD TYPE Users") && exported.stdout.contains("\"___modTime\""), "\(exported)")
            let back = try await cli.run(["schema", "import", try cli.file("exported.ckdb", exported.stdout)])
            #expect(back.exitCode == 0 && back.stderr.contains("no change"), "the export reads back: \(back)")
            // A record that would give the type a 1,001st field is refused; the schema stays.
            let record = #"{"recordName":"w1","recordType":"Wide","fields":{"f0":{"value":"a","type":"STRING"},"extra":{"value":"b","type":"STRING"}}}"#
            let grown = try await cli.run(["import"], stdin: record + "\n")
            #expect(grown.exitCode == 1 && grown.stderr.contains("would give record type 'Wide' 1001 fields") && grown.stderr.contains("at most 1000"), "\(grown)")
            #expect(try await cli.run(["schema", "export"]).stdout == exported.stdout)
            let fits = try await cli.run(["import", "--quiet"], stdin: record.replacingOccurrences(of: "extra", with: "f999") + "\n")
            #expect(fits.exitCode == 0, "\(fits)")
            // Nor one that would create the 1,001st record type (999 T's and Wide are 1,000).
            let another = #"{"recordName":"a1","recordType":"Another","fields":{"a":{"value":"b","type":"STRING"}}}"#
            let past = try await cli.run(["import"], stdin: another + "\n")
            #expect(past.exitCode == 1 && past.stderr.contains("would create record type 'Another', the development schema's record type number 1001"), "\(past)")
        }
    }

    @Test("schema import replaces the development schema (exporting it gives the file back); bad files are exit 65 with line:column, missing ones 66", arguments: TestEngine.all)
    func importFile(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            try await Self.forumStore(cli)
            let first = try await cli.run(["schema", "export"]).stdout
            // The export imports back to the same schema: a round trip is stable.
            let again = try await cli.run(["schema", "import", try cli.file("again.ckdb", first)])
            #expect(again.exitCode == 0 && again.stderr.contains("no change"), "\(again)")
            #expect(try await cli.run(["schema", "export"]).stdout == first)
            // A real CloudKit export imports too.
            let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fixtures/ckdb/20-apple-docs-example.ckdb").path
            if FileManager.default.fileExists(atPath: fixture) {
                let apple = try await cli.run(["schema", "import", fixture])
                #expect(apple.exitCode == 0, "\(apple)")
                let exported = try await cli.run(["schema", "export"]).stdout
                #expect(exported.contains("RECORD TYPE Department") && exported.contains("CREATE ROLE DeptManager;") && !exported.contains("RECORD TYPE Post"))
            }

            let broken = try cli.file("broken.ckdb", "DEFINE SCHEMA\n    RECORD TYPE Post (\n        title STRNG\n    );\n")
            let refused = try await cli.run(["schema", "import", broken])
            #expect(refused.exitCode == 65, "\(refused)")
            #expect(refused.stderr.contains("broken.ckdb:3:"), "the file, line and column: \(refused)")
            let ghost = try cli.file("ghost.ckdb", "DEFINE SCHEMA\n    RECORD TYPE Post (\n        title STRING,\n        GRANT READ TO ghost\n    );\n")
            #expect(try await cli.run(["schema", "import", ghost]).exitCode == 65)
            #expect(try await cli.run(["schema", "import", store.path("nope.ckdb")]).exitCode == 66)
            #expect(try await cli.run(["schema", "import"]).exitCode == 64)
            let production = try await cli.run(["schema", "import", broken, "--environment", "production"])
            #expect(production.exitCode == 64 && production.stderr.contains("deploy"), "\(production)")
        }
    }

    @Test("schema import that drops a type whose records remain says which, with their count, in every database; the records stay", arguments: TestEngine.all)
    func importDroppingTypeWithRecords(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(3)).exitCode == 0)
            #expect(try await cli.run(["import", "--quiet", "--database", "private"], stdin: Input.notes(2, prefix: "mine")).exitCode == 0)
            let file = try cli.file("forum.ckdb", Self.forum)
            let imported = try await cli.run(["schema", "import", file])
            #expect(imported.exitCode == 0, "\(imported)")
            #expect(imported.stderr.contains("the schema no longer declares Note (5 records), whose records stay"), "\(imported)")
            #expect(try await cli.count("Note") == 3)
            let again = try await cli.run(["schema", "import", file])
            #expect(again.exitCode == 0 && !again.stderr.contains("no longer declares"), "said once, when the type is dropped: \(again)")
        }
    }

    @Test("CloudKit's share records grow a cloudkit.share type whose export imports back, adding a field of its own", arguments: TestEngine.all)
    func shareTypeRoundTrip(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let share = #"{"recordName":"Share-1","recordType":"cloudkit.share","fields":{"cloudkit.title":{"value":"Groceries","type":"STRING"}}}"# + "\n"
            let imported = try await cli.run(["import", try cli.file("share.ndjson", share), "--keep-system-records", "--database", "private"])
            #expect(imported.exitCode == 0, "\(imported)")
            let exported = try await cli.run(["schema", "export"])
            // CloudKit's share type always has its three fields, as CloudKit's exports show them.
            #expect(exported.exitCode == 0 && exported.stdout.contains("RECORD TYPE \"cloudkit.share\" (") && exported.stdout.contains("\"cloudkit.title\""), "\(exported)")
            for field in ["\"cloudkit.thumbnailImageData\" BYTES", "\"cloudkit.type\"", "\"cloudkit.title\""] {
                #expect(exported.stdout.contains(field), "\(field): \(exported.stdout)")
            }
            let again = try await cli.run(["schema", "import", try cli.file("again.ckdb", exported.stdout)])
            #expect(again.exitCode == 0 && again.stderr.contains("no change"), "\(again)")
            // A field of its own is declared.
            let wider = exported.stdout.replacingOccurrences(of: #"("cloudkit\.type"\s+STRING)"#, with: "$1,\n        note STRING", options: .regularExpression)
            #expect(wider != exported.stdout)
            let added = try await cli.run(["schema", "import", try cli.file("wider.ckdb", wider)])
            #expect(added.exitCode == 0 && added.stderr.contains("1 change"), "\(added)")
            let retyped = wider.replacingOccurrences(of: #"("cloudkit\.title"\s+)STRING"#, with: "$1INT64", options: .regularExpression)
            #expect(retyped != wider)
            let refused = try await cli.run(["schema", "import", try cli.file("retyped.ckdb", retyped)])
            // CloudKit's own fields keep CloudKit's types, records or not.
            #expect(refused.exitCode == 65 && refused.stderr.contains("field 'cloudkit.title' of cloudkit.share is one of CloudKit's own, always STRING"), "\(refused)")
            #expect(try await cli.run(["schema", "export"]).stdout.range(of: #"note\s+STRING"#, options: .regularExpression) != nil, "the refusal changed nothing")

            // Declared with its system fields only, as some schema files do, it still has them: a
            // production import of CloudKit's shares keeps their title.
            let bare = "DEFINE SCHEMA\nRECORD TYPE \"cloudkit.share\" (\"___createTime\" TIMESTAMP, \"___recordID\" REFERENCE, GRANT WRITE TO \"_creator\", GRANT READ TO \"_world\");\n"
            let other = try await cli.newStore("bare.sqlite")
            #expect(try await cli.run(["schema", "import", try cli.file("bare.ckdb", bare), "--store", other]).exitCode == 0)
            #expect(try await cli.run(["schema", "deploy", "--store", other]).exitCode == 0)
            let production = try await cli.run(["import", try cli.file("share.ndjson", share), "--keep-system-records", "--database", "private", "--environment", "production", "--store", other])
            #expect(production.exitCode == 0, "\(production)")
        }
    }

    @Test("schema validate: 0 for a valid file, 65 with line:column for a bad one, 65 for one that drops what production has", arguments: TestEngine.all)
    func validate(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let forum = try cli.file("forum.ckdb", Self.forum)
            let valid = try await cli.run(["schema", "validate", forum])
            #expect(valid.exitCode == 0 && valid.stderr.contains("is valid"), "without a store, the file alone: \(valid)")
            #expect(!cli.exists(cli.storePath), "validate creates no store")
            let bad = try await cli.run(["schema", "validate", try cli.file("bad.ckdb", "DEFINE SCHEMA\n  RECORD TYPE A (\n    n INT64 SEARCHABLE\n  );\n")])
            #expect(bad.exitCode == 65 && bad.stderr.contains("bad.ckdb:3:"), "\(bad)")

            try await Self.forumStore(cli)
            #expect(try await cli.run(["schema", "deploy"]).exitCode == 0)
            let smaller = try cli.file("smaller.ckdb", "DEFINE SCHEMA\n    RECORD TYPE Post (\n        title STRING QUERYABLE\n    );\n")
            let dropping = try await cli.run(["schema", "validate", smaller])
            #expect(dropping.exitCode == 65, "\(dropping)")
            #expect(dropping.stderr.contains("record type Notice is in production") && dropping.stderr.contains("field 'rank' of Post"), "\(dropping)")
            #expect(try await cli.run(["schema", "import", smaller]).exitCode == 65, "import refuses it too")
            #expect(try await cli.run(["schema", "validate", forum]).exitCode == 0)
        }
    }

    @Test("schema diff prints + - ~ lines from the environment's schema to the file: exit 0 when equal, 1 when not", arguments: TestEngine.all)
    func diff(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            try await Self.forumStore(cli)
            let current = try cli.file("current.ckdb", try await cli.run(["schema", "export"]).stdout)
            let same = try await cli.run(["schema", "diff", current])
            #expect(same.exitCode == 0 && same.stdout.isEmpty, "\(same)")
            let changed = try cli.file("changed.ckdb", Self.forum
                .replacingOccurrences(of: "rank INT64 SORTABLE,", with: "rank STRING SORTABLE,\n        score DOUBLE,")
                .replacingOccurrences(of: "CREATE ROLE moderator;", with: "CREATE ROLE moderator;\n    CREATE ROLE editor;"))
            let different = try await cli.run(["schema", "diff", changed])
            #expect(different.exitCode == 1, "\(different)")
            #expect(different.stdoutLines.contains("+ ROLE editor"), "\(different)")
            #expect(different.stdoutLines.contains("+ Post.score DOUBLE"), "\(different)")
            #expect(different.stdoutLines.contains("~ Post.rank INT64 SORTABLE -> rank STRING SORTABLE"), "\(different)")
            #expect(different.stdoutLines.contains("- RECORD TYPE Users") == false, "both have Users")
            // Against production, which has nothing yet.
            let production = try await cli.run(["schema", "diff", current, "--environment", "production"])
            #expect(production.exitCode == 1 && production.stdoutLines.contains("+ RECORD TYPE Post"), "\(production)")
            #expect(try await cli.run(["schema", "diff", store.path("nope.ckdb")]).exitCode == 66)
        }
    }

    @Test("compound indexes, which the schema language cannot express, survive export, diff and import; one whose field the file drops goes", arguments: TestEngine.all)
    func compoundIndexesSurviveTheSchemaLanguage(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            try await Self.forumStore(cli)
            // Set in Swift, as only Swift can.
            let container = try cli.container()
            var post = try #require(try await container.schema().recordType("Post"))
            post.compoundIndexes = [.init(equalityFields: ["title"], sortField: "rank"), .init(equalityFields: ["rank"], sortField: "creationDate")]
            try await container.saveSchema(post)

            let exported = try cli.file("exported.ckdb", try await cli.run(["schema", "export"]).stdout)
            let same = try await cli.run(["schema", "diff", exported])
            #expect(same.exitCode == 0 && same.stdout.isEmpty, "a schema's own export is no difference: \(same)")
            let imported = try await cli.run(["schema", "import", exported])
            #expect(imported.exitCode == 0 && imported.stderr.contains("no change") && imported.stderr.contains("kept 2 compound index(es)"), "\(imported)")
            #expect(Set(try await container.schema().recordType("Post")?.compoundIndexes ?? []) == Set(post.compoundIndexes))

            // A file without `rank` leaves no index that names it.
            let withoutRank = try cli.file("without-rank.ckdb", Self.forum.replacingOccurrences(of: "rank INT64 SORTABLE,", with: ""))
            let diff = try await cli.run(["schema", "diff", withoutRank])
            #expect(diff.exitCode == 1 && diff.stdoutLines.contains { $0.hasPrefix("~ Post compound indexes") }, "\(diff)")
            let narrowed = try await cli.run(["schema", "import", withoutRank])
            #expect(narrowed.exitCode == 0 && !narrowed.stderr.contains("kept"), "\(narrowed)")
            #expect(try await container.schema().recordType("Post")?.compoundIndexes == [])
        }
    }

    @Test("schema deploy copies development to production additively; a destructive deploy is exit 65 and changes nothing", arguments: TestEngine.all)
    func deploy(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            try await Self.forumStore(cli)
            let deployed = try await cli.run(["schema", "deploy"])
            #expect(deployed.exitCode == 0 && deployed.stderr.contains("deployed: + RECORD TYPE Post"), "\(deployed)")
            let development = try await cli.run(["schema", "export"]).stdout
            #expect(try await cli.run(["schema", "export", "--environment", "production"]).stdout == development)
            let nothing = try await cli.run(["schema", "deploy"])
            #expect(nothing.exitCode == 0 && nothing.stderr.contains("already had"), "\(nothing)")
            #expect(try await cli.run(["schema", "deploy", "--environment", "production"]).exitCode == 64)

            // Development cannot lose a field production has, through the tool or Swift.
            let container = try cli.container()
            var post = try #require(try await container.schema().recordType("Post"))
            post.fields.removeAll { $0.name == "rank" }
            let unsaved = stratusError(await caughtError { try await container.saveSchema(post) })
            #expect(unsaved?.code == .invalidArguments && unsaved?.message.contains("field 'rank' of Post is in production but not in development") == true,
                    "\(String(describing: unsaved))")
            // A development schema that lost it all the same (stored by an earlier version) is not deployed.
            try container.engine.modifySchema(storageContainer: container.identifier) { schema in
                schema.recordTypes.removeAll { $0.recordType == "Post" }
                schema.recordTypes.append(post)
            }
            let refused = try await cli.run(["schema", "deploy"])
            #expect(refused.exitCode == 65, "\(refused)")
            #expect(refused.stderr.contains("field 'rank' of Post is in production but not in development"), "\(refused)")
            #expect(try await cli.run(["schema", "export", "--environment", "production"]).stdout == development, "production stays")

            // A system field's indexes, once deployed, may go as any field's may: every type keeps the field.
            try await container.saveSchema(try #require(try await container.container(in: .production).schema().recordType("Post")))
            let indexed = try cli.file("indexed.ckdb", try await cli.run(["schema", "export"]).stdout + "\nRECORD TYPE Audit (\n    \"___createTime\" TIMESTAMP QUERYABLE SORTABLE,\n    note STRING\n);\n")
            #expect(try await cli.run(["schema", "import", indexed]).exitCode == 0)
            #expect(try await cli.run(["schema", "deploy"]).exitCode == 0)
            let plain = try cli.file("plain.ckdb", try await cli.run(["schema", "export"]).stdout.replacingOccurrences(of: "\"___createTime\" TIMESTAMP QUERYABLE SORTABLE", with: "\"___createTime\" TIMESTAMP"))
            let dropped = try await cli.run(["schema", "import", plain])
            #expect(dropped.exitCode == 0 && !dropped.stderr.contains("creationDate"), "\(dropped)")
        }
    }

    @Test("schema reset needs --yes and development: deletes development's records and zones, sets its schema to production's", arguments: TestEngine.all)
    func reset(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            try await Self.forumStore(cli)
            #expect(try await cli.run(["schema", "deploy"]).exitCode == 0)
            let posts = try cli.file("posts.ndjson", #"{"recordName":"p1","recordType":"Post","fields":{"title":{"value":"hello"}}}"# + "\n")
            #expect(try await cli.run(["import", posts, "--quiet"]).exitCode == 0)
            #expect(try await cli.run(["import", posts, "--quiet", "--environment", "production"]).exitCode == 0)
            #expect(try await cli.run(["import", try cli.file("scratch.ndjson", #"{"recordName":"s1","recordType":"Scratch","fields":{}}"# + "\n"), "--quiet"]).exitCode == 0)

            let unconfirmed = try await cli.run(["schema", "reset"])
            #expect(unconfirmed.exitCode == 64 && unconfirmed.stderr.contains("--yes"), "\(unconfirmed)")
            #expect(try await cli.count("Post") == 1, "nothing was deleted")
            #expect(try await cli.run(["schema", "reset", "--yes", "--environment", "production"]).exitCode == 64)
            let reset = try await cli.run(["schema", "reset", "--yes"])
            #expect(reset.exitCode == 0, "\(reset)")
            #expect(try await cli.count("Post") == 0)
            #expect(try await cli.count("Post", extra: ["--environment", "production"]) == 1, "production keeps its records")
            #expect(try await cli.run(["schema", "export"]).stdout == cli.run(["schema", "export", "--environment", "production"]).stdout)
            #expect(try await cli.run(["schema", "export"]).stdout.contains("Scratch") == false)
        }
    }

    @Test("types lists record types with their counts; query --explain names the index; development advises, production refuses", arguments: TestEngine.all)
    func typesExplainAndAdvice(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            try await Self.forumStore(cli)
            let lines = (0..<3).map { #"{"recordName":"p\#($0)","recordType":"Post","fields":{"title":{"value":"t\#($0)"},"rank":{"value":\#($0)},"note":{"value":"n"}}}"# }
            #expect(try await cli.run(["import", try cli.file("posts.ndjson", lines.joined(separator: "\n") + "\n"), "--quiet"]).exitCode == 0)
            let types = try await cli.run(["types"])
            #expect(types.exitCode == 0, "\(types)")
            #expect(types.stdoutLines == ["Notice\t0", "Post\t3", "Users\t0"], "\(types)")
            // Another zone's records count with --all-zones only; the private database has no user records.
            #expect(try await cli.run(["zones", "create", "Drafts"]).exitCode == 0)
            #expect(try await cli.run(["import", "--zone", "Drafts", "--quiet"], stdin: lines[0] + "\n" + lines[1].replacingOccurrences(of: "p1", with: "d1") + "\n").exitCode == 0)
            #expect(try await cli.run(["types"]).stdoutLines == ["Notice\t0", "Post\t3", "Users\t0"])
            #expect(try await cli.run(["types", "--zone", "Drafts"]).stdoutLines == ["Notice\t0", "Post\t2", "Users\t0"])
            let everyZone = try await cli.run(["types", "--all-zones"])
            #expect(everyZone.exitCode == 0 && everyZone.stdoutLines == ["Notice\t0", "Post\t5", "Users\t0"], "\(everyZone)")
            #expect(try await cli.run(["types", "--all-zones", "--zone", "Drafts"]).exitCode == 64)
            #expect(try await cli.run(["import", "--database", "private", "--quiet"], stdin: lines[2] + "\n").exitCode == 0)
            let privately = try await cli.run(["types", "--database", "private", "--all-zones"])
            #expect(privately.exitCode == 0 && privately.stdoutLines == ["Notice\t0", "Post\t1"], "\(privately)")

            let explained = try await cli.run(["query", "--type", "Post", "--sort", "rank", "--explain"])
            #expect(explained.exitCode == 0, "\(explained)")
            #expect(explained.stdout.contains("index: ") && explained.stdout.contains("plan: "), "\(explained)")
            if engine == .sqlite {
                // PostgreSQL's planner reads a table of three rows whole whatever its indexes.
                #expect(explained.stdout.contains("index: ix_") && explained.stdout.contains("(Post: rank)"), "\(explained)")
            }
            let scan = try await cli.run(["query", "--type", "Post", "--sort", "note", "--explain"])
            #expect(scan.exitCode == 0 && !scan.stdout.contains("(Post: "), "\(scan)")

            // Development runs an unindexed sort, and says once what it costs and what to declare
            // (to a person: when stderr is a terminal, or as here when asked for).
            let advised = try await cli.run(["query", "--type", "Post", "--sort", "note"], environment: ["STRATUS_ADVICE": "always"])
            #expect(advised.exitCode == 0 && advised.stdoutLines.count == 3, "\(advised)")
            #expect(advised.stderr.components(separatedBy: "note: no index serves this query").count == 2, "said once: \(advised)")
            #expect(advised.stderr.contains("note SORTABLE on Post"), "\(advised)")
            let quiet = try await cli.run(["query", "--type", "Post", "--sort", "rank"], environment: ["STRATUS_ADVICE": "always"])
            #expect(quiet.exitCode == 0 && !quiet.stderr.contains("note:"), "an indexed query gets no advice: \(quiet)")
            let script = try await cli.run(["query", "--type", "Post", "--sort", "note"])
            #expect(script.exitCode == 0 && script.stderr.isEmpty, "a script's stderr holds nothing but cursors: \(script)")
            // --quiet, which a cron job gives every command, silences the advice too.
            let silenced = try await cli.run(["query", "--type", "Post", "--sort", "note", "--quiet"], environment: ["STRATUS_ADVICE": "always"])
            #expect(silenced.exitCode == 0 && silenced.stdoutLines.count == 3 && !silenced.stderr.contains("note:"), "\(silenced)")
            let counted = try await cli.run(["count", "--type", "Post", "--quiet"])
            #expect(counted.exitCode == 0 && counted.stdoutLines == ["3"] && counted.stderr.isEmpty, "\(counted)")
            // Production refuses it as CloudKit does.
            #expect(try await cli.run(["schema", "deploy"]).exitCode == 0)
            #expect(try await cli.run(["import", try cli.file("prod.ndjson", lines[0] + "\n"), "--quiet", "--environment", "production"]).exitCode == 0)
            let refused = try await cli.run(["query", "--type", "Post", "--sort", "title", "--environment", "production"])
            #expect(refused.exitCode == 64 && refused.stderr.contains("Field 'title' is not marked sortable"), "\(refused)")
            for command in [["query"], ["count"], ["export"]] {
                let unknownType = try await cli.run(command + ["--type", "Widget", "--environment", "production"])
                #expect(unknownType.exitCode == 64 && unknownType.stderr.contains("the production schema has no record type Widget"),
                        "refused as a missing index is, naming the type: \(unknownType)")
            }
            let unknownField = try await cli.run(["import", try cli.file("color.ndjson", #"{"recordName":"c","recordType":"Post","fields":{"color":{"value":"red"}}}"# + "\n"), "--environment", "production"])
            #expect(unknownField.exitCode == 1 && unknownField.stderr.contains("Cannot create or modify field 'color' in record 'Post' in production schema"), "\(unknownField)")
        }
    }
}
