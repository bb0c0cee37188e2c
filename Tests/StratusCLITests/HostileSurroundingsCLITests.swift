import Foundation
import StratusPostgres
import StratusTestSupport
import Testing

/// What a command does with the files, streams and names around it when they are not what it
/// expects: nothing stored is lost, nothing foreign is written, and no failure reads as success.
@Suite("stratus among hostile files and streams", .timeLimit(.minutes(30)))
struct HostileSurroundingsCLITests {
    // SQLite only: the files named are an SQLite store's; a PostgreSQL store has no files
    // beside it that an output could name.
    @Test("a reject file, output or checkpoint naming the store's own files is refused (64) and the store keeps every record")
    func storeFilesAreNoOutputs() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store)
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(5)).exitCode == 0)
            let mixed = try cli.file("mixed.ndjson", Input.notes(3, prefix: "m") + "{not json\n")
            try FileManager.default.createSymbolicLink(atPath: store.path("link.sqlite"), withDestinationPath: cli.storePath)
            let attempts: [(String, [String])] = [
                ("reject file is the store", ["import", mixed, "--reject-file", cli.storePath]),
                ("reject file is the log", ["import", mixed, "--reject-file", cli.storePath + "-wal"]),
                ("reject file links to the store", ["import", mixed, "--reject-file", store.path("link.sqlite")]),
                ("checkpoint in the assets folder", ["import", mixed, "--checkpoint", cli.storePath + ".assets/cp"]),
                ("changes into the store", ["changes", "--token-file", store.path("t.token"), "--output", cli.storePath]),
                ("export over the store", ["export", "--type", "Note", "--output", cli.storePath, "--force"]),
                // Exported asset files named over the store's content would replace it.
                ("export's assets into the store's content", ["export", "--type", "Note", "--assets-dir", cli.storePath + ".assets/sha256"]),
                ("changes' assets into the assets folder", ["changes", "--token-file", store.path("t.token"), "--assets-dir", cli.storePath + ".assets"]),
            ]
            for (label, arguments) in attempts {
                let result = try await cli.run(arguments)
                #expect(result.exitCode == 64, "\(label): \(result)")
                #expect(result.stderr.contains("names a file of the store"), "\(label): \(result)")
            }
            #expect(try await cli.count("Note") == 5, "every record is still there")
            #expect(try await cli.run(["check"]).exitCode == 0)
        }
    }

    // SQLite only: -wal, -shm and -journal files are SQLite's.
    @Test("a store named by another store's -wal, -shm or -journal file is refused (66) by writing, reading and copying commands, and the other store keeps every record")
    func storeInsideAnotherStoresLog() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store)
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(3)).exitCode == 0)
            try FileManager.default.createSymbolicLink(atPath: store.path("typo.sqlite"), withDestinationPath: cli.storePath + "-wal")
            for companion in [cli.storePath + "-wal", cli.storePath + "-shm", cli.storePath + "-journal", store.path("typo.sqlite")] {
                for arguments in [["import", "--store", companion], ["count", "--type", "Note", "--store", companion], ["copy", "--from", cli.storePath, "--to", companion]] {
                    let result = try await cli.run(arguments, stdin: Input.notes(1, prefix: "x"))
                    // A read of a log that is not there says there is no store; the rest name the store.
                    let named = result.stderr.contains("file of the store at \(cli.storePath)") || (arguments[0] == "count" && result.stderr.contains("there is no store"))
                    #expect(result.exitCode == 66 && named, "\(arguments): \(result)")
                }
            }
            // A name that only ends like a companion, beside a folder or a file that is no store, is a store.
            try FileManager.default.createDirectory(atPath: store.path("blog"), withIntermediateDirectories: true)
            try "notes".write(toFile: store.path("notes"), atomically: true, encoding: .utf8)
            // A FIFO is not read to find out (opening one waits for a writer).
            #expect(mkfifo(store.path("fifo"), 0o600) == 0)
            for legitimate in [store.path("blog-journal"), store.path("notes-wal"), store.path("fifo-wal")] {
                let made = try await cli.run(["import", "--store", legitimate, "--quiet"], stdin: Input.notes(1))
                #expect(made.exitCode == 0, "\(legitimate): \(made)")
            }
            // The next write to the store keeps it whole.
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(1, prefix: "y")).exitCode == 0)
            #expect(try await cli.count("Note") == 4)
            #expect(try await cli.run(["check"]).exitCode == 0)
        }
    }

    // SQLite only: files that are no store; the PostgreSQL counterpart (another program's
    // tables in the schema) is foreignTablesInTheSchema.
    @Test("reads of an empty file, another program's database or a device exit 66 or 70 and leave them as they were")
    func foreignFilesAreNotStores() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store)
            let empty = try cli.file("empty.sqlite", "")
            for arguments in [["count", "--type", "T"], ["info"], ["export", "--type", "T"]] {
                let result = try await cli.run(arguments + ["--store", empty])
                #expect(result.exitCode == 66 && result.stderr.contains("empty file"), "\(result)")
                #expect(result.stdout.isEmpty)
            }
            #expect(try Data(contentsOf: URL(fileURLWithPath: empty)).isEmpty, "the empty file stays empty")

            let foreign = store.path("customers.sqlite")
            let made = try await cli.shell("sqlite3 '\(foreign)' 'CREATE TABLE customers(id INTEGER); INSERT INTO customers VALUES (7);'")
            #expect(made.exitCode == 0, "\(made)")
            let before = try Data(contentsOf: URL(fileURLWithPath: foreign))
            for arguments in [["count", "--type", "T"], ["import"]] {
                let result = try await cli.run(arguments + ["--store", foreign], stdin: Input.notes(1))
                #expect(result.exitCode == 70 && result.stderr.contains("another program"), "\(result)")
                #expect(result.stdout.isEmpty)
            }
            #expect(try Data(contentsOf: URL(fileURLWithPath: foreign)) == before, "another program's database is not changed")
            #expect(!cli.exists(foreign + "-wal") && !cli.exists(foreign + "-shm"), "nor switched to WAL")

            for device in ["/dev/null", store.directory.path] {
                let result = try await cli.run(["count", "--type", "T", "--store", device])
                #expect(result.exitCode == 66, "\(device): \(result)")
            }
        }
    }

    // SQLite only: the PostgreSQL counterpart is foreignTablesInTheSchema.
    @Test("another program's database with a table named records is refused as one (70) by reading, writing and copying commands, and left unchanged")
    func foreignRecordsTable() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store)
            let foreign = store.path("crm.sqlite")
            let made = try await cli.shell("sqlite3 '\(foreign)' 'CREATE TABLE records(id INTEGER, body TEXT); INSERT INTO records VALUES (7, \"x\");'")
            #expect(made.exitCode == 0, "\(made)")
            let before = try Data(contentsOf: URL(fileURLWithPath: foreign))
            let destination = store.path("copy.sqlite")
            // These used to try to add Stratus's tables and fail with an SQL error (exit 70,
            // "no such column: zone_id") that did not say the file is not a store.
            for arguments in [["count", "--type", "T", "--store", foreign], ["import", "--store", foreign], ["copy", "--from", foreign, "--to", destination]] {
                let result = try await cli.run(arguments, stdin: Input.notes(1))
                #expect(result.exitCode == 70 && result.stderr.contains("another program"), "\(result)")
                #expect(!result.stderr.contains("zone_id"), "\(result)")
            }
            #expect(try Data(contentsOf: URL(fileURLWithPath: foreign)) == before, "another program's database is not changed")
            #expect(!cli.exists(foreign + "-wal") && !cli.exists(foreign + "-shm"), "nor switched to WAL")
            #expect(!cli.exists(destination), "the refused copy made no destination")
        }
    }

    // PostgreSQL only: another program's tables in the store's schema; the SQLite counterparts
    // are foreignFilesAreNotStores and foreignRecordsTable.
    @Test("a PostgreSQL schema holding another program's table named records is refused as one (70) by reading, writing and copying commands, and left unchanged")
    func foreignTablesInTheSchema() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: .postgres)
            let foreign = try PostgresConnection(url: cli.storePath)
            try foreign.executeScript("CREATE TABLE customers(id integer); INSERT INTO customers VALUES (7); CREATE TABLE records(id integer, body text); INSERT INTO records VALUES (7, 'x');")
            func tables() throws -> [String] {
                try foreign.query("SELECT table_name::text FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY 1").map { try $0.text(0) ?? "" }
            }
            let before = try tables()
            let destination = try await cli.newStore("copy")
            for arguments in [["count", "--type", "T"], ["import"], ["copy", "--from", cli.storePath, "--to", destination]] {
                let result = try await cli.run(arguments, stdin: Input.notes(1))
                #expect(result.exitCode == 70 && result.stderr.contains("another program"), "\(arguments[0]): \(result)")
                #expect(!result.stderr.contains("zone_id") && result.stdout.isEmpty, "\(arguments[0]): \(result)")
            }
            #expect(try tables() == before, "no table was added")
            #expect(try foreign.query("SELECT count(*) FROM records").first?.int64(0) == 1, "another program's rows are left")
            #expect(!cli.storeExists(destination), "the refused copy made no destination")
        }
    }

    @Test("an answer that cannot be written to stdout is exit 73, never a crash or 0", arguments: TestEngine.all)
    func fullStandardOutput(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(3)).exitCode == 0)
            for command in ["count --type Note", "count --type Note --json", "info", "zones list", "get n1", "types", "schema export",
                            "--help", "--version", "help count", "count --help"] {
                let result = try await cli.shell(#""$STRATUS" \#(command) > /dev/full"#)
                #expect(!result.signalled && result.exitCode == 73, "\(command): \(result)")
                #expect(result.stderr.contains("cannot write to standard output"), "\(command): \(result)")
            }
        }
    }

    @Test("an export whose output file cannot be written (a full disk) is exit 73 and names the file", arguments: TestEngine.all)
    func fullOutputFile(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(3)).exitCode == 0)
            for format in ["ndjson", "csv"] {
                let result = try await cli.run(["export", "--type", "Note", "--format", format, "--output", "/dev/full"])
                #expect(!result.signalled && result.exitCode == 73, "\(format): \(result)")
                #expect(result.stderr.contains("cannot write /dev/full: No space left on device"), "\(format): \(result)")
            }
            let piped = try await cli.shell(#""$STRATUS" export --type Note > /dev/full"#)
            #expect(piped.exitCode == 73 && piped.stderr.contains("cannot write the output: No space left on device"), "\(piped)")
        }
    }

    @Test("a reject file that cannot be written is exit 73, and the summary counts what the batch committed", arguments: TestEngine.all)
    func fullRejectFile(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            // A rejection of more than 64 KiB (the reject file's buffer) between two good records.
            let input = #"{"recordName":"g1","recordType":"G","fields":{}}"# + "\n"
                + #"{"recordName":""# + String(repeating: "x", count: 70_000) + #"","recordType":"G","fields":{}}"# + "\n"
                + #"{"recordName":"g2","recordType":"G","fields":{}}"# + "\n"
            let result = try await cli.run(["import", "-", "--reject-file", "/dev/full"], stdin: input)
            #expect(result.exitCode == 73, "\(result)")
            #expect(result.stderr.contains("imported 2"), "the summary counts the committed records: \(result.stderr)")
            #expect(try await cli.count("G") == 2)
        }
    }

    @Test("control characters from the input are shown escaped on stderr", arguments: TestEngine.all)
    func controlCharactersAreEscaped(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let hostile = #"{"recordName":"esc\u001b]0;PWNED\u0007\u001b[2J","recordType":"T\u001b[31mRED","fields":{}}"# + "\n"
            let result = try await cli.run(["import"], stdin: hostile)
            #expect(result.exitCode == 1, "\(result)")
            #expect(!result.stderr.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x07 }, "no raw escape or bell: \(result)")
            #expect(result.stderr.contains(#"\u{1B}"#), "\(result)")

            // A line break in a quoted name cannot start a line that passes for the tool's own.
            let forging = #"{"recordName":"x\nstratus: imported 99, updated 0, unchanged 0, failed 0\r\nstratus: done","recordType":"T\tab","fields":{"bad":{"value":1,"type":"STRING"}}}"# + "\n"
            let forged = try await cli.run(["import"], stdin: forging)
            #expect(forged.exitCode == 1, "\(forged)")
            #expect(forged.stderrLines.allSatisfy { !$0.hasPrefix("stratus: imported 99") && !$0.hasPrefix("stratus: done") }, "\(forged)")
            #expect(forged.stderr.contains(#"\u{A}stratus: imported 99"#), "\(forged)")
        }
    }

    @Test("on a terminal the progress line is redrawn with raw control sequences, while a carriage return or escape from the input stays escaped",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/script")), arguments: TestEngine.all)
    func terminalProgressLine(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            try await cli.createStore()
            let first = try cli.file("first.ndjson", Input.notes(1_000))
            let hostile = #"{"recordName":"cr\rx\u001b[2J","recordType":"T","fields":{}}"# + "\n"
            let second = try cli.file("second.ndjson", hostile + Input.notes(1_000, prefix: "m"))
            // script(1) gives the import a terminal; the pause between the two files lets a live line be drawn.
            let result = try await cli.shell(#"script -qec '{ cat "\#(first)"; sleep 1; cat "\#(second)"; } | "$STRATUS" import' /dev/null"#)
            #expect(result.exitCode == 1, "\(result)")
            #expect(result.stdout.contains("\r\u{1B}[Kimported"), "the live line is erased and redrawn: \(result)")
            #expect(result.stdout.contains(#"cr\u{D}x\u{1B}[2J"#) && !result.stdout.contains("\u{1B}[2J"), "the input's controls are escaped: \(result)")
        }
    }

    // Engine-neutral by nature: the --store given is refused before any store is opened.
    @Test("a libpq key=value string as --store is refused without echoing it or creating files")
    func connectionStringIsRefused() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store)
            let conninfo = "host=db1 port=1 password=s3cretPW dbname=app"
            for environment in [["STRATUS_STORE": conninfo], [:]] {
                let arguments = ["import"] + (environment.isEmpty ? ["--store", conninfo] : [])
                let result = try await cli.run(arguments, stdin: Input.notes(1), environment: environment)
                #expect(result.exitCode == 64, "\(result)")
                #expect(result.stderr.contains("key=value") && !result.stderr.contains("s3cretPW"), "\(result)")
            }
            let left = try FileManager.default.contentsOfDirectory(atPath: store.directory.path)
            #expect(!left.contains { $0.contains("s3cretPW") || $0.hasPrefix("host=") }, "\(left)")
        }
    }

    // Engine-neutral by nature: the URLs given are refused or unreachable; the test's store is never opened.
    @Test("PostgreSQL URLs: an unescaped '@' in the password, one slash after the scheme or a scheme of its own are usage errors that echo nothing of the URL; an uppercase scheme is PostgreSQL")
    func postgresURLSpellings() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store)
            for (url, hint) in [("postgresql://owner:SECRET@PW@127.0.0.1:1/app", "%40"), ("postgresql:/owner:SECRET@PW.example/app", "postgresql://"),
                                ("Postgres:owner:SECRET@PW", "postgresql://")] {
                for command in [["count", "--type", "Note"], ["import"]] {
                    let result = try await cli.run(command + ["--store", url], stdin: Input.notes(1))
                    #expect(result.exitCode == 64, "\(result)")
                    #expect(result.stderr.contains(hint) && !result.stderr.contains("SECRET") && !result.stderr.contains("PW"), "\(result)")
                }
                let copy = try await cli.run(["copy", "--from", url, "--to", store.path("copy.sqlite")])
                #expect(copy.exitCode == 64 && !copy.stderr.contains("SECRET") && !copy.stderr.contains("PW"), "\(copy)")
            }
            // An uppercase scheme names PostgreSQL: nothing listens on port 1.
            let upper = try await cli.run(["count", "--type", "Note", "--store", "POSTGRESQL://owner:SECRET@127.0.0.1:1/app"])
            #expect(upper.exitCode == 75 && upper.stderr.contains("127.0.0.1:1") && !upper.stderr.contains("SECRET"), "\(upper)")
            let left = try FileManager.default.contentsOfDirectory(atPath: store.directory.path)
            #expect(!left.contains { $0.lowercased().hasPrefix("postgres") || $0.contains("SECRET") }, "\(left)")
        }
    }

    @Test("a password is never echoed: not of a URL given without --store or as the command, nor of a key=value argument", arguments: TestEngine.all)
    func passwordsInArgumentsAreHidden(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let url = "postgresql://owner:s3cretPW@127.0.0.1:1/app"
            for (arguments, code) in [(["count", "--type", "Note", url], Int32(64)), ([url], 64), (["import", url], 66), (["get", url], 1),
                                      (["count", "--type", "Note", "host=db1 password=s3cretPW"], 64),
                                      (["count", "--type", "Note", url + "\u{1B}[2J"], 64), (["export", "--type", "Note", "--output", url + "/x"], 73)] {
                if arguments.first == "get" || arguments.first == "export" {
                    #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(1)).exitCode == 0)
                }
                let result = try await cli.run(arguments)
                #expect(result.exitCode == code, "\(result)")
                #expect(!result.stderr.contains("s3cretPW") && result.stderr.contains("***"), "\(result)")
            }
            // A store's URL given as the container would have named a new store file after it.
            for command in [["import", "--quiet", "--container", url], ["count", "--type", "Note", "--container", url], ["import", "--quiet", "--zone", url], ["zones", "create", url]] {
                let result = try await cli.run(command, stdin: Input.notes(1))
                #expect(result.exitCode == 64 && result.stderr.contains("takes ") && result.stderr.contains("not a store"), "\(result)")
                #expect(!result.stderr.contains("s3cretPW"), "\(result)")
            }
            // Nor is a zone named by the input after a URL.
            let zoned = #"{"records":[{"recordName":"z1","recordType":"Note"}],"zoneID":{"zoneName":"https://u:s3cretPW@h/z"}}"#
            let named = try await cli.run(["import", "--create-zones", try cli.file("zoned.json", zoned)])
            #expect(named.exitCode != 0 && !named.stderr.contains("s3cretPW") && named.stderr.contains("a zone name cannot be a URL"), "\(named)")
            let zones = try await cli.run(["zones", "list"])
            #expect(!zones.stdout.contains("https") && !zones.stdout.contains("s3cretPW"), "\(zones)")
            let info = try await cli.run(["info"])
            #expect(!info.stdout.contains("s3cretPW") && !info.stdout.contains("container postgresql"), "no container named after the URL: \(info)")
        }
    }

    // Engine-neutral by nature: the URLs given are refused or unreachable; the test's store is never opened.
    @Test("a password with a quote, a space or a backtick is hidden too; another scheme's URL keeps its port and path")
    func passwordsWithQuotesAreHidden() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store)
            for password in ["pa'ss3cretPW", "pa ss3cretPW", "pa\"ss3cretPW", "pa`ss3cretPW"] {
                let url = "postgresql://owner:\(password)@127.0.0.1:1/app"
                let quoted = try await cli.run(["count", "--type", "Note", url])
                #expect(quoted.exitCode == 64, "\(quoted)")
                #expect(!quoted.stderr.contains("ss3cretPW") && quoted.stderr.contains("owner:***@127.0.0.1"), "\(quoted)")
                let asStore = try await cli.run(["count", "--type", "Note", "--store=" + url])
                #expect(asStore.exitCode != 0 && !asStore.stderr.contains("ss3cretPW"), "\(asStore)")
            }
            let web = "https://example.com:8443/@alice"
            let result = try await cli.run(["count", "--type", "Note", web])
            #expect(result.exitCode == 64 && result.stderr.contains(web), "a URL that is no PostgreSQL URL is shown as it is: \(result)")
        }
    }

    @Test("a store that looks like a URL of another scheme (a typo of postgresql://) is a usage error that echoes nothing and creates nothing", arguments: TestEngine.all)
    func mistypedSchemesAreRefused(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(1)).exitCode == 0)
            for url in ["postgresq://owner:s3cretPW@127.0.0.1:1/app", "postgresql//owner:s3cretPW@127.0.0.1:1/app", "pg://owner:s3cretPW@db1/app",
                        "Postgres//owner:s3cretPW@db1/app"] {
                for (command, environment) in [(["import", "--store", url], [String: String]()), (["import"], ["STRATUS_STORE": url]),
                                                (["count", "--type", "Note", "--store", url], [:])] {
                    let result = try await cli.run(command, stdin: Input.notes(1), environment: environment)
                    #expect(result.exitCode == 64 && result.stderr.contains("no PostgreSQL URL"), "\(result)")
                    #expect(!result.stderr.contains("s3cretPW") && !result.stderr.contains("owner"), "\(result)")
                }
                let copy = try await cli.run(["copy", "--from", cli.storePath, "--to", url])
                #expect(copy.exitCode == 64 && copy.stderr.contains("--to looks like a URL") && !copy.stderr.contains("s3cretPW"), "\(copy)")
            }
            let left = try FileManager.default.contentsOfDirectory(atPath: store.directory.path)
            #expect(!left.contains { $0.lowercased().hasPrefix("postgres") || $0.hasPrefix("pg:") || $0.contains("s3cretPW") }, "\(left)")
        }
    }

    @Test("the default store follows $HOME; help --help is help; a missing zone is exit 66", arguments: TestEngine.all)
    func smallerPromises(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let home = store.path("home")
            let missing = try await cli.run(["count", "--type", "Note"], environment: ["STRATUS_STORE": "", "XDG_DATA_HOME": "", "HOME": home])
            #expect(missing.exitCode == 66 && missing.stderr.contains(home + "/.local/share/stratus/default.sqlite"), "\(missing)")
            // An import would make the default store: not in a HOME that does not exist.
            let homeless = try await cli.run(["import", "--quiet"], stdin: Input.notes(1), environment: ["STRATUS_STORE": "", "XDG_DATA_HOME": "", "HOME": home])
            #expect(homeless.exitCode == 73 && homeless.stderr.contains("HOME is \(home), which does not exist"), "\(homeless)")
            #expect(!FileManager.default.fileExists(atPath: home), "no HOME was made")
            try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: false)
            let homed = try await cli.run(["import", "--quiet"], stdin: Input.notes(1), environment: ["STRATUS_STORE": "", "XDG_DATA_HOME": "", "HOME": home])
            #expect(homed.exitCode == 0 && FileManager.default.fileExists(atPath: home + "/.local/share/stratus/default.sqlite"), "\(homed)")

            let help = try await cli.run(["help", "--help"])
            #expect(help.exitCode == 0 && help.stdout.contains("stratus"), "\(help)")

            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(1)).exitCode == 0)
            for arguments in [["count", "--type", "Note"], ["export", "--type", "Note"], ["query", "--type", "Note"]] {
                let result = try await cli.run(arguments + ["--zone", "Nowhere"])
                #expect(result.exitCode == 66 && result.stderr.contains("Nowhere"), "\(arguments[0]): \(result)")
            }
        }
    }

    // Engine-neutral by nature: the samples' own default stores, not the stratus tool's.
    @Test("a sample given a mistaken command or option says so and creates no store")
    func samplesCreateNothingOnMistakes() async throws {
        try await TemporaryStore.with { store in
            let dataHome = store.path("data")
            let environment = ["XDG_DATA_HOME": dataHome, "STRATUS_STORE": ""]
            for (program, arguments, code) in [("todo", ["bogus"], Int32(1)), ("notes", ["--nope"], 1), ("shopping", ["remove", "x"], 1),
                                               ("cloudkit-port", ["list", "--store", store.path("x.sqlite")], 64)] {
                let status = try await ChildProcess(try ChildProcess.builtExecutable(program), arguments, in: store.directory, environment: environment).wait()
                #expect(status.exitCode == code && status.stderr.contains(program == "cloudkit-port" ? "usage" : "unknown command"), "\(program): \(status.stderr)")
            }
            for program in ["todo", "notes", "shopping"] {
                let help = try await ChildProcess(try ChildProcess.builtExecutable(program), ["--help"], in: store.directory, environment: environment).wait()
                #expect(help.exitCode == 0 && help.stdout.contains("usage"), "\(program): \(help)")
            }
            #expect(!FileManager.default.fileExists(atPath: dataHome), "no default store was created")
            #expect(!FileManager.default.fileExists(atPath: store.path("x.sqlite")))
            // Listing before anything was added is an empty list, not a missing zone.
            let list = try await ChildProcess(try ChildProcess.builtExecutable("cloudkit-port"), ["list"], in: store.directory,
                                              environment: ["STRATUS_STORE": store.path("port.sqlite")]).wait()
            #expect(list.exitCode == 0 && list.stdout.isEmpty, "\(list.stderr)")
        }
    }

    @Test("a table-less database another program marked, a reject file that holds other data, and a closed pipe are not written", arguments: TestEngine.all)
    func moreForeignFiles(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            // An SQLite file's marks; the PostgreSQL counterpart is foreignTablesInTheSchema.
            if engine == .sqlite {
                let marked = store.path("app.sqlite")
                let made = try await cli.shell("sqlite3 '\(marked)' 'PRAGMA application_id = 1234567; PRAGMA user_version = 3;'")
                #expect(made.exitCode == 0, "\(made)")
                let before = try Data(contentsOf: URL(fileURLWithPath: marked))
                for arguments in [["types"], ["count", "--type", "T"], ["import"]] {
                    let result = try await cli.run(arguments + ["--store", marked], stdin: Input.notes(1))
                    #expect(result.exitCode == 70 && result.stderr.contains("another program"), "\(arguments[0]): \(result)")
                }
                #expect(try Data(contentsOf: URL(fileURLWithPath: marked)) == before)
            }

            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(2_000)).exitCode == 0)
            let foreign = try cli.file("notes.txt", "my own notes, not rejects\n")
            let bad = try cli.file("bad.ndjson", Input.notes(1, prefix: "ok") + #"{"recordName":"broken","recordType":"Note","fields":{"n":{"value":"x","type":"INT64"}}}"# + "\n")
            let refused = try await cli.run(["import", bad, "--reject-file", foreign])
            #expect(refused.exitCode == 73 && refused.stderr.contains("other than reject lines"), "\(refused)")
            #expect(try String(contentsOfFile: foreign, encoding: .utf8) == "my own notes, not rejects\n")
            // A record file starts with a brace too, and is no reject file.
            let records = try cli.file("records.ndjson", Input.notes(1, prefix: "mine"))
            let notRejects = try await cli.run(["import", bad, "--reject-file", records])
            #expect(notRejects.exitCode == 73 && notRejects.stderr.contains("other than reject lines"), "\(notRejects)")
            #expect(try String(contentsOfFile: records, encoding: .utf8) == Input.notes(1, prefix: "mine"))
            let rejects = store.path("rejects.ndjson")
            for _ in 0..<2 { #expect(try await cli.run(["import", bad, "--reject-file", rejects]).exitCode == 1) }
            #expect(try String(contentsOfFile: rejects, encoding: .utf8).split(separator: "\n").count == 2, "a reject file is appended to")

            for command in ["export --type Note", "query --type Note --limit 400"] {
                let full = try await cli.shell(#""$STRATUS" \#(command) > /dev/full"#)
                #expect(full.exitCode == 73 && full.stderr.contains("cannot write"), "\(command): \(full)")
            }
            // 2,000 records are more than a pipe holds: the writer meets the closed pipe.
            let piped = try await cli.shell(#"{ "$STRATUS" export --type Note --quiet 2> err.txt; echo $? > code.txt; } | head -c 1 > /dev/null; cat code.txt err.txt"#)
            #expect(piped.stdout.hasPrefix("73\n") && piped.stdout.contains("cannot write"), "export into a closed pipe: \(piped)")
        }
    }

    @Test("a reject file that is a pipe (a FIFO, `--reject-file >(jq …)`) is written to, not a crash; a regular one is appended to", arguments: TestEngine.all)
    func rejectFileOnAPipe(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let input = try cli.file("bad.ndjson", #"{"recordName":"bad","recordType":"","fields":{}}"# + "\n")
            let fifo = store.path("rejects.fifo")
            #expect(mkfifo(fifo, 0o600) == 0)
            // Held open for reading and writing here, so the run's open does not wait for a reader.
            let reader = open(fifo, O_RDWR | O_NONBLOCK)
            #expect(reader >= 0)
            defer { close(reader) }
            let piped = try await cli.run(["import", input, "--reject-file", fifo, "--quiet"])
            #expect(piped.exitCode == 1 && !piped.signalled, "a pipe cannot seek; the run must not trap on it: \(piped)")
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = read(reader, &buffer, buffer.count)
            let lines = String(decoding: buffer[..<max(count, 0)], as: UTF8.self)
            #expect(lines.contains(#""recordName":"bad""#) && lines.contains("record type is empty"), "\(lines)")

            let file = store.path("rejects.ndjson")
            for _ in 0..<2 { #expect(try await cli.run(["import", input, "--reject-file", file, "--quiet"]).exitCode == 1) }
            #expect(try RejectLine.read(file).map(\.recordName) == ["bad", "bad"], "a second run appends")
        }
    }

    @Test("a token file or checkpoint that is a pipe or a folder is refused (64) before anything is made, and stays what it was", arguments: TestEngine.all)
    func keptFilesMustBeRegularFiles(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(3)).exitCode == 0)
            let fifo = store.path("kept.fifo")
            #expect(mkfifo(fifo, 0o600) == 0)
            let folder = store.path("kept-folder")
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            let input = try cli.file("more.ndjson", Input.notes(2, prefix: "m"))
            // A pipe or a device would be replaced by renaming a file over it (as root, /dev/null).
            for kept in [fifo, folder] {
                for arguments in [["changes", "--token-file", kept], ["import", input, "--checkpoint", kept],
                                  ["update", "--type", "Note", "--all", "--set", "title=x", "--checkpoint", kept]] {
                    let result = try await cli.run(arguments)
                    #expect(result.exitCode == 64 && result.stderr.contains("is not a regular file"), "\(arguments): \(result)")
                    #expect(!FileManager.default.fileExists(atPath: kept + ".lock"), "no lock file is made beside \(kept)")
                }
            }
            var info = stat()
            #expect(stat(fifo, &info) == 0 && info.st_mode & S_IFMT == S_IFIFO, "the pipe is still a pipe")
            // A pipe named through /dev/stdin or /dev/fd (a shell's `<(…)`) resolves to no path.
            let substituted = try await cli.shell(#"echo x | "$STRATUS" changes --token-file /dev/stdin"#)
            #expect(substituted.exitCode == 64 && substituted.stderr.contains("is not a regular file"), "\(substituted)")
            #expect(try await cli.count("Note") == 3, "nothing was imported or updated")
        }
    }

    @Test("a checkpoint's leftover temporary file goes with the next run; a relative XDG_DATA_HOME is ignored; a path with '=' is a path", arguments: TestEngine.all)
    func leftoversAndNames(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let input = try cli.file("notes.ndjson", Input.notes(5))
            let checkpoint = store.path("import.checkpoint")
            let leftover = checkpoint + ".tmp-999999"
            #expect(FileManager.default.createFile(atPath: leftover, contents: Data("half".utf8)))
            #expect(try await cli.run(["import", input, "--checkpoint", checkpoint, "--quiet"]).exitCode == 0)
            #expect(!cli.exists(leftover), "the killed run's temporary file is gone")

            let home = store.path("home")
            let relative = try await cli.run(["count", "--type", "Note"], environment: ["STRATUS_STORE": "", "XDG_DATA_HOME": "relative/data", "HOME": home])
            #expect(relative.exitCode == 66 && relative.stderr.contains(home + "/.local/share/stratus/"), "\(relative)")

            let odd = store.path("run=5") + "/s.sqlite"
            try FileManager.default.createDirectory(atPath: store.path("run=5"), withIntermediateDirectories: false)
            let created = try await cli.run(["import", "--store", odd, "--quiet"], stdin: Input.notes(1))
            #expect(created.exitCode == 0 && cli.exists(odd), "\(created)")
        }
    }

    // SQLite only: the limit is on files the command writes; a PostgreSQL server writes its own
    // (its full disk is quotaExceeded, exit 73, in StratusError+Postgres).
    @Test("a file size limit (ulimit -f) under an import: exit 73 saying the file is too large, not a death by signal or 70; the committed batches stay and the checkpoint goes on")
    func fileSizeLimit() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store)
            let padding = String(repeating: "x", count: 400)
            let lines = (1...6_000).map { #"{"recordName":"r\#($0)","recordType":"Row","fields":{"pad":{"value":"\#(padding)","type":"STRING"}}}"# }
            let input = try cli.file("rows.ndjson", lines.joined(separator: "\n") + "\n")
            // 2,000 blocks (1 MB in dash's 512-byte blocks, 2 MB in bash's) against about 3 MB of records.
            let limited = try await cli.shell(#"ulimit -f 2000 && exec "$STRATUS" import "$INPUT" --checkpoint rows.ckpt --batch-size 500 --progress none"#,
                                              environment: ["INPUT": input])
            #expect(limited.exitCode == 73, "\(limited)")
            #expect(limited.stderr.contains("File too large"), "\(limited)")
            let resumed = try await cli.run(["import", input, "--checkpoint", store.path("rows.ckpt"), "--quiet"])
            #expect(resumed.exitCode == 0, "\(resumed)")
            #expect(try await cli.count("Row") == 6_000)
            #expect(try await cli.run(["check"]).exitCode == 0)

            // An asset's content copied into the store's asset folder meets the same limit: the
            // store's failure (73), not a rejected record (1).
            _ = try store.writeFile("src/big.bin", patternBytes(count: 3_000_000, seed: 5))
            let photo = try cli.file("photo.ndjson", #"{"recordName":"p1","recordType":"Photo","fields":{"image":{"value":{"downloadURL":"big.bin"},"type":"ASSETID"}}}"# + "\n")
            let asset = try await cli.shell(#"ulimit -f 2000 && exec "$STRATUS" import "$INPUT" --assets-dir src --progress none"#, environment: ["INPUT": photo])
            #expect(asset.exitCode == 73, "\(asset)")
            #expect(asset.stderr.contains("File too large"), "\(asset)")
            #expect(try await cli.count("Photo") == 0)
        }
    }

    // SQLite only: the limit is on files the command writes.
    @Test("a copy without --checkpoint that fails part way says the destination holds what it copied and what to do, rather than leaving a retry to be refused (found by an operator tester)")
    func copyFailingPartWay() async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store)
            let padding = String(repeating: "x", count: 400)
            let lines = (1...6_000).map { #"{"recordName":"r\#($0)","recordType":"Row","fields":{"pad":{"value":"\#(padding)","type":"STRING"}}}"# }
            #expect(try await cli.run(["import", try cli.file("rows.ndjson", lines.joined(separator: "\n") + "\n"), "--quiet"]).exitCode == 0)
            let limited = try await cli.shell(#"ulimit -f 2000 && exec "$STRATUS" copy --from "$FROM" --to copy.sqlite --batch-size 500 --progress none"#,
                                              environment: ["FROM": cli.storePath])
            #expect(limited.exitCode == 73 && limited.stderr.contains("File too large"), "\(limited)")
            #expect(limited.stderr.contains("the destination (--to) holds them") && limited.stderr.contains("give --checkpoint"), "\(limited)")
            let retry = try await cli.run(["copy", "--from", cli.storePath, "--to", store.path("copy.sqlite")])
            #expect(retry.exitCode == 64 && retry.stderr.contains("already holds"), "\(retry)")
        }
    }
}
