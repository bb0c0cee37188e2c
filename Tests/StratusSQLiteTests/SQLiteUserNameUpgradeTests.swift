import Foundation
@_spi(StratusEngine) import Stratus
@_spi(StratusEngine) import StratusSQLite
import StratusTestSupport
import Testing

/// Stores of schema version 4 named users by login; version 5 names them by user record name.
/// Upgrading moves what was stored under logins, and change tokens printed before go on working.
@Suite("SQLite: user record names, upgrade from version 4, private files")
struct SQLiteUserNameUpgradeTests {
    static let identifier = "com.example.upgrade"

    /// A token as a version before user record names printed it: its owner is the login, and
    /// it names no environment.
    static func olderToken(_ token: ServerChangeToken, login: String) throws -> ServerChangeToken {
        let prefix = "stk1_"
        var base64 = String(token.serialized.dropFirst(prefix.count)).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        let decoded = try #require(Data(base64Encoded: base64))
        var json = try #require(try JSONSerialization.jsonObject(with: decoded) as? [String: Any])
        if let owner = json["owner"] as? String, !owner.isEmpty { json["owner"] = login }
        json.removeValue(forKey: "environment")
        let data = try JSONSerialization.data(withJSONObject: json, options: [.sortedKeys])
        let text = data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        return try ServerChangeToken(serialized: prefix + text)
    }

    @Test("a version 4 store opens as the current version: owners, creators, modifiers, zone tombstones and histories move to record names; old tokens go on")
    func upgradeFromVersion4() async throws {
        try await TemporaryStore.with { store in
            let shell = try #require(StoreProcess.sqlite3, "the sqlite3 shell is needed (apt-get install sqlite3)")
            let path = store.path()
            let alice = UserDirectoryEntry.derivedRecordName(containerIdentifier: Self.identifier, login: "alice")
            let photos = RecordZone.ID(zoneName: "Photos")
            let (zoneToken, databaseToken): (ServerChangeToken, ServerChangeToken)
            do {
                let container = Container(identifier: Self.identifier, engine: try SQLiteEngine(path: path), userName: "alice")
                let database = container.privateCloudDatabase
                try await database.save(RecordZone(zoneID: photos))
                try await database.save(RecordZone(zoneName: "Scratch"))
                try await database.deleteRecordZone(withID: RecordZone.ID(zoneName: "Scratch"))
                try await TestDatabase.save(makeRecords("Photo", count: 3, zoneID: photos) { ["n": .int64(Int64($0))] }, in: database)
                try await TestDatabase.save([makeRecord("Post", "hello", ["title": .string("hi")])], in: container.publicCloudDatabase)
                try await TestDatabase.save([makeRecord("Post", "imported", ["title": .string("kept")])], in: container.publicCloudDatabase)
                zoneToken = try await database.recordZoneChanges(inZoneWith: photos, since: nil).changeToken
                databaseToken = try await database.databaseChanges(since: nil).changeToken
            }
            // What version 4 stored: logins. One public record came from a CloudKit export and
            // names a CloudKit user, which the upgrade leaves alone.
            let downgrade = """
                UPDATE zones SET owner = 'alice' WHERE owner = '\(alice)';
                UPDATE database_history SET owner = 'alice' WHERE owner = '\(alice)';
                UPDATE zone_tombstones SET owner = 'alice' WHERE owner = '\(alice)';
                UPDATE records SET created_by = 'alice', modified_by = 'alice' WHERE created_by = '\(alice)' AND record_name != 'imported';
                UPDATE records SET created_by = '_0123456789abcdef0123456789abcdef', modified_by = '_0123456789abcdef0123456789abcdef' WHERE record_name = 'imported';
                DROP TABLE user_directory;
                DROP TABLE schema_roles;
                PRAGMA user_version = 4;
                SELECT count(*) FROM zones WHERE owner = 'alice';
                """
            let down = try await StoreProcess.runSQL(shell, path, downgrade, in: store.directory)
            #expect(down.exitCode == 0 && Int(down.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0 >= 1, "\(down.stdout)\(down.stderr)")

            let container = Container(identifier: Self.identifier, engine: try SQLiteEngine(path: path), userName: "alice")
            let database = container.privateCloudDatabase
            let version = try await StoreProcess.runSQL(shell, path, "PRAGMA user_version; SELECT count(*) FROM zones WHERE owner = 'alice' OR zone_owner = 'alice'; SELECT count(*) FROM records WHERE created_by = 'alice' OR modified_by = 'alice'; SELECT count(*) FROM database_history WHERE owner = 'alice'; SELECT count(*) FROM zone_tombstones WHERE owner = 'alice';", in: store.directory)
            #expect(version.stdout.split(separator: "\n") == ["15", "0", "0", "0", "0"], "\(version.stdout)\(version.stderr)")

            // Alice's data is hers again, under her record name.
            #expect(try await container.userRecordID().recordName == alice)
            #expect(TestDatabase.names(try await TestDatabase.queryAll(Query(recordType: "Photo"), in: database, zoneID: photos)).count == 3)
            let photo = try await database.record(for: Record.ID(recordName: recordName("r", 0), zoneID: photos))
            #expect(photo.systemFields.creatorUserRecordID?.recordName == alice && photo.systemFields.lastModifiedUserRecordID?.recordName == alice)
            #expect(try await container.publicCloudDatabase.record(for: Record.ID(recordName: "imported")).systemFields.creatorUserRecordID?.recordName == "_0123456789abcdef0123456789abcdef")
            // She may still change her public record (she is its creator).
            let hello = try await container.publicCloudDatabase.record(for: Record.ID(recordName: "hello"))
            hello["title"] = "hello again"
            try await container.publicCloudDatabase.save(hello)

            // Tokens printed before the upgrade go on from where they were.
            try await TestDatabase.save([makeRecord("Photo", "after", zoneID: photos)], in: database)
            let older = try Self.olderToken(zoneToken, login: "alice")
            let changes = try await database.recordZoneChanges(inZoneWith: photos, since: older)
            #expect(changes.modificationResultsByID.keys.map(\.recordName) == ["after"])
            let olderDatabase = try Self.olderToken(databaseToken, login: "alice")
            let zones = try await database.databaseChanges(since: olderDatabase)
            #expect(zones.modifications.map(\.zoneID.zoneName) == ["Photos"])
            // A login's old token does not open another user's database.
            let bob = Container(identifier: Self.identifier, engine: container.engine, userName: "bob").privateCloudDatabase
            let refused = stratusError(await caughtError { try await bob.recordZoneChanges(inZoneWith: photos, since: older) })
            #expect(refused?.code == .changeTokenExpired)
        }
    }

    @Test("a new store file is readable by its owner only (0600), in a folder only its owner can enter (0700)")
    func privateFiles() async throws {
        try await TemporaryStore.with { store in
            let path = store.directory.appendingPathComponent("nested/deeper/store.sqlite").path
            let container = Container(identifier: Self.identifier, engine: try SQLiteEngine(path: path), userName: "alice")
            try await container.publicCloudDatabase.save(makeRecord("Note", "n1"))
            func mode(_ path: String) throws -> Int {
                (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue ?? -1
            }
            let storeMode = try mode(path)
            #expect(storeMode & 0o077 == 0, "the store is private: \(String(storeMode, radix: 8))")
            #expect(try mode(path + "-wal") & 0o077 == 0, "the write-ahead log too")
            #expect(try mode((path as NSString).deletingLastPathComponent) & 0o077 == 0, "the folder is private")
        }
    }

    @Test("explainQuery names the declared index a query reads; countRecordsByType counts per type")
    func diagnostics() async throws {
        try await TemporaryStore.with { store in
            let container = Container(identifier: Self.identifier, engine: try SQLiteEngine(path: store.path()), userName: "alice")
            var item = RecordTypeSchema(recordType: "Item")
            item.addField("rank", type: .int64, indexes: [.sortable])
            try await container.saveSchema(item)
            try await TestDatabase.save(makeRecords("Item", count: 4) { ["rank": .int64(Int64($0))] } + [makeRecord("Other", "o")], in: container.publicCloudDatabase)
            let sorted = Query(recordType: "Item")
            sorted.sortDescriptors = [RecordSortDescriptor(key: "rank")]
            let plan = try await container.publicCloudDatabase.queryPlan(for: sorted)
            #expect(plan.indexes.count == 1 && plan.indexes[0].hasPrefix("ix_") && plan.indexes[0].hasSuffix("(Item: rank)"), "\(plan)")
            #expect(!plan.steps.isEmpty)
            let unsorted = Query(recordType: "Item")
            unsorted.sortDescriptors = [RecordSortDescriptor(key: "other")]
            #expect(try await container.publicCloudDatabase.queryPlan(for: unsorted).indexes.allSatisfy { !$0.hasPrefix("ix_") })
            #expect(try await container.publicCloudDatabase.recordCountsByType() == ["Item": 4, "Other": 1])
        }
    }
}
