import CloudKit
import CloudKitNeighbour
import Foundation
import Testing

// A program that imports CloudKit and another library naming its types `Database`, `Record`,
// `SyncEngine`, `Container`, `Query` and `PostgresConnection` (GRDB with CloudKit, as Harmony
// does; IceCream's example app; a Vapor server with PostgresNIO): as with Apple's module, those
// names are the other library's, and CloudKit's are the `CK` ones. This file imports nothing of
// Stratus's own.
@Suite struct NeighbourLibraryNamesTests {
    final class Player: Record {
        override class var databaseTableName: String { "player" }
    }

    func updateChanges(db: Database, ckRecord: CKRecord) -> String {
        "\(db.path): \(ckRecord.recordType)"
    }

    @Test func anotherLibrarysNamesStayItsOwn() async throws {
        let db = Database(path: "app.sqlite")
        let syncEngine: SyncEngine? = SyncEngine(objects: ["Dog"])
        let services = Container()
        let connection: PostgresConnection? = services.resolve(PostgresConnection.self)
        let rows: [PostgresRow] = [PostgresRow()]
        #expect(Player.databaseTableName == "player" && Query(table: "player").table == "player")
        #expect(syncEngine?.objectTypes == ["Dog"] && connection == nil && rows.count == 1)

        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("neighbour-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let container = try CKContainer(identifier: "com.example.neighbours", storePath: folder.appendingPathComponent("store.sqlite").path, userName: "tester")
        let database: CKDatabase = container.publicCloudDatabase
        let note = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "note-1"))
        note["title"] = "Water the plants"
        #expect(updateChanges(db: db, ckRecord: note) == "app.sqlite: Note")
        _ = try await database.save(note)
        let query = CKQuery(recordType: "Note", predicate: NSPredicate(format: "title BEGINSWITH %@", "Water"))
        query.sortDescriptors = [NSSortDescriptor(key: "title", ascending: true)]
        let (matches, _) = try await database.records(matching: query)
        #expect(matches.map(\.0.recordName) == ["note-1"])
        do {
            _ = try await database.record(for: CKRecord.ID(recordName: "missing"))
            Issue.record("a record that was never saved was found")
        } catch CKError.unknownItem {
            // As CloudKit matches an error by its code.
        }
    }
}
