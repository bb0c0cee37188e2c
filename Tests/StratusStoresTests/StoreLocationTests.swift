import Foundation
import Stratus
import StratusPostgres
import StratusSQLite
import StratusStores
import StratusTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

@Suite("A store named by text: an SQLite path or a PostgreSQL URL, as the stratus tool reads --store")
struct StoreLocationTests {
    @Test("paths are SQLite stores, postgres:// and postgresql:// URLs PostgreSQL stores")
    func readsBothEngines() throws {
        #expect(try StoreLocation("/srv/app.sqlite") == .sqlite(path: "/srv/app.sqlite"))
        #expect(try StoreLocation("app.sqlite") == .sqlite(path: "app.sqlite"))
        #expect(try StoreLocation("./postgresq://odd-but-a-path") == .sqlite(path: "./postgresq://odd-but-a-path"))
        #expect(try StoreLocation("postgresql://db1/app") == .postgres(url: "postgresql://db1/app"))
        #expect(try StoreLocation("POSTGRES://db1/app") == .postgres(url: "POSTGRES://db1/app"))
        #expect(try StoreLocation("postgresql:///app?host=/run/postgresql") == .postgres(url: "postgresql:///app?host=/run/postgresql"))
    }

    @Test("text that is neither is refused by kind, never repeating the text (it may hold a password)")
    func refusesWhatNamesNoStore() {
        let cases: [(String, StoreLocation.Problem.Kind)] = [
            ("", .empty),
            ("postgresql:/db1/app?password=s3cretPW", .malformedPostgresURL),
            ("postgresq://alice:s3cretPW@db1/app", .otherURL),
            ("file:///srv/app.sqlite", .otherURL),
            ("postgres//alice:s3cretPW@db1/app", .otherURL),
            ("host=db1 dbname=app password=s3cretPW", .connectionString),
        ]
        for (text, kind) in cases {
            do {
                let location = try StoreLocation(text)
                Issue.record("\(text.debugDescription) was read as \(location)")
            } catch {
                #expect(error.kind == kind, "\(text.debugDescription)")
                #expect(!error.description.contains("s3cretPW") && !error.description.isEmpty, "\(error)")
            }
        }
    }

    @Test("a location prints its path, or its URL without the password")
    func describesWithoutPassword() throws {
        #expect(try StoreLocation("/srv/app.sqlite").description == "/srv/app.sqlite")
        let described = try StoreLocation("postgresql://alice:s3cretPW@db1/app").description
        #expect(!described.contains("s3cretPW") && described.contains("db1/app"), "\(described)")
    }

    @Test("Container(identifier:store:) on a path is the SQLite store in that file")
    func opensSQLiteByPath() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("stores-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("app.sqlite").path
        let container = try Container(identifier: "com.example.stores", store: path, userName: "alice")
        #expect(container.engine is SQLiteEngine)
        let note = Record(recordType: "Note")
        note["title"] = "kept"
        _ = try await container.privateCloudDatabase.save(note)

        let again = try Container(identifier: "com.example.stores", storePath: path, userName: "alice")
        let read = try await again.privateCloudDatabase.record(for: note.recordID)
        #expect(read["title"] as String? == "kept")
    }

    @Test("a store file with a second name (a hard link) is refused for writing under either name, naming the links, and read read-only; alone again, it opens with everything it holds")
    func refusesHardLinkedStore() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("stores-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("s.sqlite").path, second = folder.appendingPathComponent("h.sqlite").path
        let container = try Container(identifier: "com.example.stores", store: path, userName: "alice")
        let note = Record(recordType: "Note")
        note["title"] = "kept"
        _ = try await container.privateCloudDatabase.save(note)

        #expect(link(path, second) == 0)
        // Through the tool's way of naming a store, and as a new engine under either name (the
        // container above keeps its own engine, whose log is the first name's).
        let openings: [(String, () throws -> Void)] = [
            (second, { _ = try Container(identifier: "com.example.stores", store: second, userName: "alice") }),
            (second, { _ = try SQLiteEngine(path: second) }),
            (path, { _ = try SQLiteEngine(path: path) }),
        ]
        for (name, open) in openings {
            do {
                try open()
                Issue.record("\(name) opened while the store has two names")
            } catch let error as StratusError {
                #expect(error.code == .badDatabase && error.message.contains("hard links"), "\(error)")
            }
        }
        // Read as it is (a hard-link snapshot of a backup): read-only opens are not refused.
        // It holds what the file holds: the writer's log copied in first, as when it exits.
        SQLiteEngine.foldLogsOfOpenStores()
        let snapshot = try SQLiteEngine(path: second, readOnly: true)
        let reader = Container(identifier: "com.example.stores", engine: snapshot, userName: "alice")
        #expect(try await reader.privateCloudDatabase.record(for: note.recordID)["title"] as String? == "kept")
        #expect(unlink(second) == 0)
        let again = try Container(identifier: "com.example.stores", store: path, userName: "alice")
        #expect(try await again.privateCloudDatabase.record(for: note.recordID)["title"] as String? == "kept")
    }

    @Test("a read store is a PostgreSQL standby: one beside an SQLite store, or one that is no URL, is invalidArguments")
    func refusesStandbyOfSQLite() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("stores-\(UUID().uuidString).sqlite").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        #expect(throws: StratusError.self) { try StoreLocation(path).openEngine(readURL: "postgresql://standby/app") }
        #expect(!FileManager.default.fileExists(atPath: path))
        do {
            _ = try StoreLocation("postgresql://db1/app").openEngine(readURL: "standby:s3cretPW")
            Issue.record("a standby that is no URL was taken")
        } catch let error as StratusError {
            #expect(error.code == .invalidArguments && !error.message.contains("s3cretPW"), "\(error)")
        }
    }

    @Test("Container(identifier:store:) on a PostgreSQL URL is that PostgreSQL store", .requiresPostgres)
    func opensPostgresByURL() async throws {
        let database = try PostgresTestServer.makeDatabase()
        let container = try Container(identifier: "com.example.stores", store: database.url, userName: "alice")
        #expect(container.engine is PostgresEngine)
        let note = Record(recordType: "Note")
        note["title"] = "shared"
        _ = try await container.privateCloudDatabase.save(note)

        let again = try Container(identifier: "com.example.stores", postgresURL: database.url, userName: "alice")
        let read = try await again.privateCloudDatabase.record(for: note.recordID)
        #expect(read["title"] as String? == "shared")
    }
}
