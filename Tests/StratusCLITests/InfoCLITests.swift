import Foundation
import Stratus
import StratusTestSupport
import Testing

/// `stratus info` and `stratus count --json`: what a store holds, for people and for scripts.
@Suite("stratus info and count --json", .timeLimit(.minutes(30)))
struct InfoCLITests {
    static let alice = UserDirectoryEntry.derivedRecordName(containerIdentifier: "default", login: "alice")
    static let bob = UserDirectoryEntry.derivedRecordName(containerIdentifier: "default", login: "bob")

    /// Notes and tasks in the public default zone, a zone each in alice's and bob's private
    /// databases, another container with a schema.
    static func fill(_ cli: CLI) async throws {
        #expect(try await cli.run(["import", "--quiet"], stdin: Input.notes(3) + Input.notes(2, prefix: "t").replacingOccurrences(of: "\"Note\"", with: "\"Task\"")).exitCode == 0)
        for (user, count) in [("alice", 4), ("bob", 1)] {
            let private_ = ["--database", "private", "--user", user, "--zone", "Work"]
            #expect(try await cli.run(["zones", "create", "Work", "--database", "private", "--user", user]).exitCode == 0)
            #expect(try await cli.run(["import", "--quiet"] + private_, stdin: Input.notes(count)).exitCode == 0)
        }
        #expect(try await cli.run(["zones", "create", "Loose", "--no-atomic", "--container", "com.example.other"]).exitCode == 0)
        var schema = RecordTypeSchema(recordType: "Photo")
        schema.addField("title", type: .string, indexes: [.queryable])
        try await cli.container("com.example.other").saveSchema(schema)
    }

    @Test("--json: every container, database (each owner), zone with capabilities and counts by type, the tables' version and the size", arguments: TestEngine.all)
    func json(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            try await Self.fill(cli)
            let result = try await cli.run(["info", "--json"])
            #expect(result.exitCode == 0 && result.stderr.isEmpty, "\(result)")
            let info = try JSONLine.object(result.stdout.trimmingCharacters(in: .newlines))
            #expect(info["engine"] as? String == (engine == .sqlite ? "sqlite" : "postgresql"))
            #expect((info["schemaVersion"] as? Int ?? 0) >= 1)
            #expect((info["sizeInBytes"] as? Int ?? 0) > 0, "\(info)")
            #expect(info["records"] as? Int == 10)
            let store = try #require(info["store"] as? String)
            #expect(engine == .postgres ? store.hasPrefix("postgresql://") : store == cli.storePath)

            let containers = try #require(info["containers"] as? [[String: Any]])
            #expect(containers.map { $0["containerIdentifier"] as? String } == ["com.example.other", "default"])
            #expect(containers.first?["schemaRecordTypes"] as? [String] == ["Photo"])
            let loose = try #require((containers.first?["databases"] as? [[String: Any]])?.first?["zones"] as? [[String: Any]])
            #expect(loose.contains { ($0["zoneID"] as? [String: Any])?["zoneName"] as? String == "Loose" && $0["atomic"] as? Bool == false && $0["fetchChanges"] as? Bool == true })

            let databases = try #require(containers.last?["databases"] as? [[String: Any]])
            let summary = databases.map { "\($0["database"] ?? "")/\($0["owner"] ?? ""):\($0["records"] ?? "")" }
            #expect(summary.sorted() == ["public/:5", "private/\(Self.alice):4", "private/\(Self.bob):1"].sorted(), "private databases are named by their owners' user record names: \(summary)")
            #expect(databases.allSatisfy { $0["environment"] as? String == "development" })
            let publicZones = try #require(databases.first?["zones"] as? [[String: Any]])
            let defaultZone = try #require(publicZones.first { ($0["zoneID"] as? [String: Any])?["zoneName"] as? String == "_defaultZone" })
            #expect(defaultZone["recordTypes"] as? [String: Int] == ["Note": 3, "Task": 2])
            #expect(defaultZone["atomic"] as? Bool == false && defaultZone["fetchChanges"] as? Bool == true, "the default zone has no atomic capability, as CloudKit's")
            let aliceZones = try #require(databases.first { $0["owner"] as? String == Self.alice }?["zones"] as? [[String: Any]])
            #expect(aliceZones.contains { ($0["zoneID"] as? [String: Any])?["zoneName"] as? String == "Work" && $0["recordTypes"] as? [String: Int] == ["Note": 4] })
        }
    }

    @Test("the human-readable report lists the same, by container, database and zone", arguments: TestEngine.all)
    func text(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            try await Self.fill(cli)
            let result = try await cli.run(["info"])
            #expect(result.exitCode == 0 && result.stderr.isEmpty, "\(result)")
            let lines = result.stdoutLines
            #expect(lines.first?.hasPrefix("store ") == true && lines.first?.contains("tables version") == true, "\(result)")
            for expected in [
                "10 records in 2 containers", "container default: 10 records", "  schema: Photo",
                "  public database: 1 zone, 5 records", "    zone _defaultZone (fetchChanges): 5 records",
                "      Note  3", "      Task  2", "  private (\(Self.alice)) database: 1 zone, 4 records", "  private (\(Self.bob)) database: 1 zone, 1 record",
                "    zone Loose (fetchChanges): 0 records",
            ] {
                #expect(lines.contains(expected), "missing '\(expected)': \(result.stdout)")
            }
        }
    }

    @Test("an empty store answers zero, and a read of a store that is not there is exit 66", arguments: TestEngine.all)
    func emptyAndMissing(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            let missing = try await cli.run(["info"])
            #expect(missing.exitCode == 66 && missing.stdout.isEmpty, "\(missing)")
            #expect(!cli.storeExists())
            try await cli.createStore()
            let empty = try await cli.run(["info", "--json"])
            #expect(empty.exitCode == 0, "\(empty)")
            #expect(try JSONLine.object(empty.stdout.trimmingCharacters(in: .newlines))["records"] as? Int == 0)
            let usage = try await cli.run(["info", "extra"])
            #expect(usage.exitCode == 64, "\(usage)")
        }
    }

    @Test("info and check take --store alone: the variables of options they lack ($STRATUS_READ_STORE exported for other jobs, an empty $STRATUS_USER) neither refuse them nor change what they read", arguments: TestEngine.all)
    func storeLocationOnly(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            try await cli.createStore()
            // Exported for other jobs, or set empty by a wrapper: the shell sets them, as the
            // harness passes no empty variable.
            let elsewhere = #"STRATUS_READ_STORE=postgresql://reader@standby.invalid/app STRATUS_USER= STRATUS_ENVIRONMENT= "$STRATUS" "#
            let info = try await cli.shell(elsewhere + "info --json")
            #expect(info.exitCode == 0 && info.stderr.isEmpty, "\(info)")
            let check = try await cli.shell(elsewhere + "check")
            #expect(check.exitCode == 0 && check.stdout == "ok\n", "\(check)")
            // Their own option and variable are still checked.
            let emptyStore = try await cli.shell(#"STRATUS_STORE= "$STRATUS" info"#)
            #expect(emptyStore.exitCode == 64 && emptyStore.stderr.contains("$STRATUS_STORE is set but empty"), "\(emptyStore)")
            let readStore = try await cli.run(["check", "--read-store", "postgresql://reader@standby.invalid/app"])
            #expect(readStore.exitCode == 64 && readStore.stderr.contains("unknown option --read-store"), "\(readStore)")
            // The other commands still read the variable: they refuse a standby for an SQLite
            // store, and on PostgreSQL they go to the standby, which cannot be reached.
            let count = try await cli.run(["count", "--type", "Note"], environment: ["STRATUS_READ_STORE": "postgresql://reader@standby.invalid/app"])
            if engine == .sqlite {
                #expect(count.exitCode == 64 && count.stderr.contains("$STRATUS_READ_STORE names a standby of a PostgreSQL store"), "\(count)")
            } else {
                #expect(count.exitCode == 75 && count.stderr.contains("hot standby") && count.stderr.contains("standby.invalid"), "\(count)")
            }
        }
    }

    @Test("count --json prints one object with the count, the type, the database and the zone", arguments: TestEngine.all)
    func countJSON(engine: TestEngine) async throws {
        try await TemporaryStore.with { store in
            let cli = try await CLI(store, engine: engine)
            try await Self.fill(cli)
            let result = try await cli.run(["count", "--type", "Note", "--where", "count >= 2", "--json", "--database", "private", "--user", "alice", "--zone", "Work"])
            #expect(result.exitCode == 0 && result.stderr.isEmpty, "\(result)")
            #expect(result.stdoutLines.count == 1)
            let object = try JSONLine.object(result.stdout.trimmingCharacters(in: .newlines))
            #expect(object["count"] as? Int == 3)
            #expect(object["recordType"] as? String == "Note")
            #expect(object["database"] as? String == "private")
            #expect(object["zone"] as? String == "Work")
            #expect(try await cli.run(["count", "--type", "Note", "--json"]).stdout == #"{"count":3,"database":"public","recordType":"Note","zone":"_defaultZone"}"# + "\n")
        }
    }
}
