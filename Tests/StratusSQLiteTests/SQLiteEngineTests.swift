import Foundation
@_spi(StratusEngine) import Stratus
@_spi(StratusEngine) import StratusSQLite
import StratusTestSupport
import Testing

@Suite("SQLite engine: files, processes and failures", .timeLimit(.minutes(30)))
struct SQLiteEngineTests {
    static let identifier = "com.example.sqlite-tests"

    @Test("reopening a store file keeps records, system fields and assets")
    func reopenKeepsData() async throws {
        try await TemporaryStore.with { store in
            let path = store.path()
            let imageBytes = patternBytes(count: 50_000, seed: 9)
            let imageURL = try store.writeFile("image.png", imageBytes)
            let saved: [Record]
            do {
                let engine = try SQLiteEngine(path: path)
                let database = Container(identifier: Self.identifier, engine: engine, userName: "alice").privateCloudDatabase
                let note = makeRecord("Note", "note-1", ["title": .string("kept"), "n": .int64(2), "x": .double(2)])
                note["image"] = Asset(fileURL: imageURL)
                saved = try await TestDatabase.save([note, makeRecord("Note", "note-2", ["title": .string("also kept")])], in: database)
            }
            try FileManager.default.removeItem(at: imageURL)

            let reopened = try SQLiteEngine(path: path)
            let database = Container(identifier: Self.identifier, engine: reopened, userName: "alice").privateCloudDatabase
            let note = try await database.record(for: Record.ID(recordName: "note-1"))
            #expect(note.systemFields == saved[0].systemFields)
            #expect(note.fieldValue(forKey: "title") == .string("kept"))
            #expect(note.fieldValue(forKey: "n") == .int64(2))
            #expect(note.fieldValue(forKey: "x") == .double(2))
            let image = try #require(note["image"] as? Asset)
            #expect(FileManager.default.contents(atPath: try #require(image.fileURL).path) == imageBytes)
            let all = try await TestDatabase.queryAll(Query(recordType: "Note"), in: database)
            #expect(TestDatabase.names(all) == ["note-1", "note-2"])

            // Change tags from before the reopen still guard against conflicts.
            let stale = saved[1]
            stale["title"] = "changed"
            try await database.save(stale)
            stale["title"] = "changed again"
            let conflict = await caughtError { try await database.save(stale) }
            #expect(stratusError(conflict)?.code == .serverRecordChanged)
        }
    }

    @Test("allRecords over a store with a damaged document in its middle gives the pages before it, then the corrupt-document error, and nothing after")
    func damagedDocumentMidStream() async throws {
        try await TemporaryStore.with { store in
            let shell = try #require(StoreProcess.sqlite3, "the sqlite3 shell is needed (apt-get install sqlite3)")
            let path = store.path()
            let names = (0..<1_000).map { String(format: "r%04d", $0) }
            do {
                let database = Container(identifier: Self.identifier, engine: try SQLiteEngine(path: path), userName: "alice").publicCloudDatabase
                try await TestDatabase.save(names.map { makeRecord("Row", $0, ["n": .int64(Int64($0.dropFirst())!)]) }, in: database)
            }
            let damage = try await StoreProcess.runSQL(shell, path, #"UPDATE records SET fields = '{"n":["I",' WHERE record_name = 'r0537';"#, in: store.directory)
            #expect(damage.exitCode == 0, "\(damage.stderr)")
            let database = Container(identifier: Self.identifier, engine: try SQLiteEngine(path: path), userName: "alice").publicCloudDatabase
            // In the order they were saved (the store's change order): no sort reads the documents first.
            let query = Query(recordType: "Row", predicate: .all)
            var read: [String] = []
            var records = database.allRecords(matching: query, pageSize: 50).makeAsyncIterator()
            var failure: (any Error)?
            do {
                while let record = try await records.next() { read.append(record.recordID.recordName) }
            } catch {
                failure = error
            }
            let error = try #require(failure as? StratusError, "the read fails: \(String(describing: failure))")
            #expect(error.code == .internalError && error.message.contains("corrupt"), "\(error)")
            #expect(error.message.contains("record 'r0537' in zone '_defaultZone'"), "the error names the damaged record: \(error)")
            #expect(read == Array(names[..<500]), "the ten pages before the damaged row's, whole, and none after it")
            let after = try await records.next()
            #expect(after == nil, "after its error the sequence has ended")
        }
    }

    @Test("close() closes the store's connections now, while the database still holds the engine and after a query sequence read to its end: SQLite removes the -wal and -shm files, later calls fail, and the store opens again whole")
    func closeRemovesTheLog() async throws {
        try await TemporaryStore.with { store in
            let path = store.path()
            let engine = try SQLiteEngine(path: path)
            let database = Container(identifier: Self.identifier, engine: engine, userName: "alice").publicCloudDatabase
            try await TestDatabase.save((0..<3_000).map { makeRecord("Row", "r\($0)", ["n": .int64(Int64($0))]) }, in: database)
            #expect(FileManager.default.fileExists(atPath: path + "-wal"))
            // Read to its end, a sequence has handed its connection back: none is left open.
            var read = 0
            for try await _ in database.allRecords(matching: Query(recordType: "Row"), pageSize: 500) { read += 1 }
            #expect(read == 3_000)
            engine.close()
            #expect(SQLiteEngine.companionSuffixes.filter { FileManager.default.fileExists(atPath: path + $0) }.isEmpty)
            await #expect(throws: StratusError.self) { try await database.save(makeRecord("Row", "late", [:])) }
            await #expect(throws: StratusError.self) { try await database.record(for: Record.ID(recordName: "r1")) }
            let reopened = Container(identifier: Self.identifier, engine: try SQLiteEngine(path: path), userName: "alice").publicCloudDatabase
            #expect(try await reopened.countRecords(matching: Query(recordType: "Row")) == 3_000)
        }
    }

    @Test("two engines on one file (as two processes have) both write and read")
    func twoEnginesOnOneFile() async throws {
        try await TemporaryStore.with { store in
            let first = Container(identifier: Self.identifier, engine: try SQLiteEngine(path: store.path()), userName: "alice").publicCloudDatabase
            let second = Container(identifier: Self.identifier, engine: try SQLiteEngine(path: store.path()), userName: "bob").publicCloudDatabase

            try await first.save(makeRecord("Item", "from-first", ["n": .int64(1)]))
            try await second.save(makeRecord("Item", "from-second", ["n": .int64(2)]))
            #expect(try await second.record(for: Record.ID(recordName: "from-first")).fieldValue(forKey: "n") == .int64(1))
            #expect(try await first.record(for: Record.ID(recordName: "from-second")).fieldValue(forKey: "n") == .int64(2))

            // Both write at the same time, in many small transactions.
            async let a: Void = writeBatches(first, prefix: "a")
            async let b: Void = writeBatches(second, prefix: "b")
            _ = try await (a, b)
            for database in [first, second] {
                let names = TestDatabase.names(try await TestDatabase.queryAll(Query(recordType: "Item"), in: database))
                #expect(names.count == 2 + 2 * 15 * 20)
                #expect(Set(names).count == names.count)
            }

            // A conflict is detected across engines (alice writes her own record from both).
            let aliceElsewhere = Container(identifier: Self.identifier, engine: try SQLiteEngine(path: store.path()), userName: "alice").publicCloudDatabase
            let copyFirst = try await first.record(for: Record.ID(recordName: "from-first"))
            let copySecond = try await aliceElsewhere.record(for: Record.ID(recordName: "from-first"))
            copyFirst["n"] = 10
            try await first.save(copyFirst)
            copySecond["n"] = 20
            let conflict = await caughtError { try await aliceElsewhere.save(copySecond) }
            #expect(stratusError(conflict)?.code == .serverRecordChanged)
            // Bob may not change alice's public record (only its creator writes it by default).
            let refused = await caughtError { try await second.save(copySecond) }
            #expect(stratusError(refused)?.code == .permissionFailure)
            #expect(try await second.record(for: Record.ID(recordName: "from-first")).fieldValue(forKey: "n") == .int64(10))
        }
    }

    private func writeBatches(_ database: Database, prefix: String) async throws {
        for batch in 0..<15 {
            let records = (0..<20).map { makeRecord("Item", "\(prefix)-\(batch)-\($0)", ["n": .int64(Int64($0))]) }
            try await TestDatabase.save(records, in: database)
        }
    }

    @Test("a store in a directory that does not exist yet is created")
    func missingDirectoryIsCreated() async throws {
        try await TemporaryStore.with { store in
            let path = store.directory.appendingPathComponent("not/yet/there/store.sqlite").path
            #expect(!FileManager.default.fileExists(atPath: path))
            let database = Container(identifier: Self.identifier, engine: try SQLiteEngine(path: path)).publicCloudDatabase
            try await database.save(makeRecord("Item", "one", ["n": .int64(1)]))
            #expect(FileManager.default.fileExists(atPath: path))
            #expect(try await database.record(for: Record.ID(recordName: "one")).fieldValue(forKey: "n") == .int64(1))
        }
    }

    @Test("Container(identifier:storePath:) opens the SQLite store at a path")
    func containerOpensStoreAtPath() async throws {
        try await TemporaryStore.with { store in
            let path = store.path("nested/app.sqlite")
            let container = try Container(identifier: Self.identifier, storePath: path, userName: "carol")
            #expect(container.userName == "carol")
            try await container.privateCloudDatabase.save(makeRecord("Item", "one"))
            let again = try Container(identifier: Self.identifier, storePath: path, userName: "carol")
            #expect(try await TestDatabase.exists("one", in: again.privateCloudDatabase))
            #expect(FileManager.default.fileExists(atPath: path))
        }
    }

    @Test("a store file replaced or deleted under an open container: its writes fail with badDatabase instead of committing into a file no one opens again")
    func replacedStoreFileFailsWrites() async throws {
        try await TemporaryStore.with { store in
            let path = store.path("app.sqlite")
            let container = try Container(identifier: Self.identifier, storePath: path, userName: "carol")
            try await container.privateCloudDatabase.save(makeRecord("Item", "before"))
            // A restore: another store moved over the path while the first is open.
            let restored = store.path("restored.sqlite")
            let other = try Container(identifier: Self.identifier, storePath: restored, userName: "carol")
            try await other.privateCloudDatabase.save(makeRecord("Item", "restored"))
            #expect(rename(restored, path) == 0)
            let refused = stratusError(await caughtError { try await container.privateCloudDatabase.save(makeRecord("Item", "after")) })
            #expect(refused?.code == .badDatabase && refused?.message.contains("was replaced, moved or deleted") == true, "\(String(describing: refused))")
            let again = stratusError(await caughtError { try await container.privateCloudDatabase.save(makeRecord("Item", "later")) })
            #expect(again?.code == .badDatabase, "every later write too: \(String(describing: again))")

            // A deletion: the same.
            let doomed = store.path("doomed.sqlite")
            let gone = try Container(identifier: Self.identifier, storePath: doomed, userName: "carol")
            try await gone.privateCloudDatabase.save(makeRecord("Item", "one"))
            for suffix in ["", "-wal", "-shm"] { unlink(doomed + suffix) }
            #expect(stratusError(await caughtError { try await gone.privateCloudDatabase.save(makeRecord("Item", "two")) })?.code == .badDatabase)

            // A restore that copies a backup over the file (the same inode) and removes the
            // log and its index: the commits would go on into the removed log.
            let copied = store.path("copied.sqlite"), backup = store.path("backup.sqlite")
            let live = try Container(identifier: Self.identifier, storePath: copied, userName: "carol")
            try await live.privateCloudDatabase.save(makeRecord("Item", "kept"))
            try FileManager.default.copyItem(atPath: copied, toPath: backup)
            try await live.privateCloudDatabase.save(makeRecord("Item", "after-backup"))
            let bytes = try Data(contentsOf: URL(fileURLWithPath: backup))
            let handle = try #require(FileHandle(forWritingAtPath: copied))
            try handle.truncate(atOffset: 0)
            try handle.write(contentsOf: bytes)
            try handle.close()
            for suffix in ["-wal", "-shm"] { unlink(copied + suffix) }
            let underRestore = stratusError(await caughtError { try await live.privateCloudDatabase.save(makeRecord("Item", "lost")) })
            #expect(underRestore?.code == .badDatabase && underRestore?.message.contains("write-ahead log") == true, "\(String(describing: underRestore))")

            // Only the log removed under the writer: the same.
            let logless = store.path("logless.sqlite")
            let writer = try Container(identifier: Self.identifier, storePath: logless, userName: "carol")
            try await writer.privateCloudDatabase.save(makeRecord("Item", "one"))
            unlink(logless + "-wal")
            #expect(stratusError(await caughtError { try await writer.privateCloudDatabase.save(makeRecord("Item", "two")) })?.code == .badDatabase)
        }
    }

    @Test("an unusable store path is a StratusError, not a crash")
    func unusablePathIsAnError() async throws {
        try await TemporaryStore.with { store in
            let blocker = try store.writeFile("blocker", Data("a file, not a folder".utf8))
            var paths = [
                blocker.appendingPathComponent("store.sqlite").path,            // parent is a file
                "/proc/stratus-\(UUID().uuidString)/store.sqlite",              // cannot create folders in /proc
                store.directory.path,                                           // a directory, not a file
            ]
            if geteuid() != 0 {
                // A read-only folder (root ignores permissions, so only checked as another user).
                let readOnly = store.url("read-only")
                try FileManager.default.createDirectory(at: readOnly, withIntermediateDirectories: true)
                try FileManager.default.setAttributes([.posixPermissions: 0o500], ofItemAtPath: readOnly.path)
                paths.append(readOnly.appendingPathComponent("store.sqlite").path)
            }
            for path in paths {
                do {
                    let engine = try SQLiteEngine(path: path)
                    Issue.record("opening a store at \(path) succeeded: \(engine.path)")
                } catch let error as StratusError {
                    #expect([StratusError.Code.badContainer, .permissionFailure].contains(error.code), "\(path): \(error)")
                    #expect(!error.message.isEmpty)
                } catch {
                    Issue.record("opening \(path) threw a non-Stratus error: \(error)")
                }
            }
            if geteuid() != 0 {
                try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: store.url("read-only").path)
            }
        }
    }

    @Test("a PostgreSQL URL given as an SQLite path is refused, names no password and creates nothing")
    func postgresURLIsNoPath() async throws {
        let urls = ["postgresql://alice:s3cret@db1/app", "postgres://db1/app", "postgresql:///app?host=/tmp/sock&password=s3cret", "POSTGRESQL://db1/app"]
        for url in urls {
            #expect(throws: StratusError.self) { try SQLiteEngine(path: url) }
            #expect(throws: StratusError.self) { try SQLiteEngine.shared(path: url) }
            do {
                _ = try Container(identifier: Self.identifier, storePath: url)
                Issue.record("opened \(url) as an SQLite store")
            } catch let error as StratusError {
                #expect(error.code == .badContainer)
                #expect(error.message.contains("PostgreSQL") && !error.message.contains("s3cret"), "\(error.message)")
            }
        }
        for folder in ["postgresql:", "postgres:", "POSTGRESQL:"] {
            #expect(!FileManager.default.fileExists(atPath: folder), "a folder \(folder) was created in the working directory")
        }
    }

    @Test("a file that is not a store is a StratusError")
    func notAStoreIsAnError() async throws {
        try await TemporaryStore.with { store in
            let url = try store.writeFile("garbage.sqlite", patternBytes(count: 8_192, seed: 5))
            do {
                let engine = try SQLiteEngine(path: url.path)
                // Some SQLite versions open lazily; then the first use must fail cleanly.
                let database = Container(identifier: Self.identifier, engine: engine).publicCloudDatabase
                let error = await caughtError { try await database.save(makeRecord("Item", "x")) }
                #expect(stratusError(error) != nil, "using a garbage file as a store fails with a StratusError")
            } catch {
                #expect(error is StratusError, "opening a garbage file fails with a StratusError: \(error)")
            }
        }
    }
}
