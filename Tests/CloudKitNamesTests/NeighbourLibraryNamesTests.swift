import CloudKit
import CloudKitNeighbour
import Testing

// A program that imports CloudKit beside a server library naming its types
// `PostgresConnection` and `PostgresRow` (PostgresNIO, under Vapor): those names stay the other
// library's, as `import CloudKit` brings none of Stratus's engines' names. Stratus's own model
// names (`Database`, `Record`, `SyncEngine`, `Container`, `Query`) do come with it, so a file
// that also imports a library with one of those (GRDB's `Database`) qualifies it: `GRDB.Database`.
// This file imports nothing else: Foundation comes with CloudKit, as with Apple's module.
/// A public declaration that names CloudKit's nested types, as a sync library's API does: Swift
/// requires the module that declares `CKRecord.ID`'s type to be visible here (an error in Swift 6).
public func recordNames(in zone: CKRecordZone.ID = .default, of ids: [CKRecord.ID], policy: CKModifyRecordsOperation.RecordSavePolicy = .changedKeys) -> [String] {
    ids.filter { $0.zoneID == zone }.map(\.recordName)
}

@Suite struct NeighbourLibraryNamesTests {
    final class Player: CloudKitNeighbour.Record {
        override class var databaseTableName: String { "player" }
    }

    func updateChanges(db: CloudKitNeighbour.Database, ckRecord: CKRecord) -> String {
        "\(db.path): \(ckRecord.recordType)"
    }

    @Test func anotherLibrarysNamesStayItsOwn() async throws {
        let connection: PostgresConnection? = CloudKitNeighbour.Container().resolve(PostgresConnection.self)
        let rows: [PostgresRow] = [PostgresRow()]
        #expect(connection == nil && rows.count == 1 && Player.databaseTableName == "player")

        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("neighbour-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let container = try CKContainer(identifier: "com.example.neighbours", storePath: folder.appendingPathComponent("store.sqlite").path, userName: "tester")
        let database: CKDatabase = container.publicCloudDatabase
        let note = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "note-1"))
        note["title"] = "Water the plants"
        #expect(updateChanges(db: CloudKitNeighbour.Database(path: "app.sqlite"), ckRecord: note) == "app.sqlite: Note")
        _ = try await database.save(note)
        let query = CKQuery(recordType: "Note", predicate: NSPredicate(format: "title BEGINSWITH %@", "Water"))
        query.sortDescriptors = [NSSortDescriptor(key: "title", ascending: true)]
        let (matches, _) = try await database.records(matching: query)
        #expect(matches.map(\.0.recordName) == ["note-1"])
        #expect(recordNames(of: matches.map(\.0)) == ["note-1"])
        do {
            _ = try await database.record(for: CKRecord.ID(recordName: "missing"))
            Issue.record("a record that was never saved was found")
        } catch CKError.unknownItem {
            // As CloudKit matches an error by its code.
        }
    }
}
