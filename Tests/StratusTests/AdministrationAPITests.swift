import Foundation
import Stratus
import StratusTestSupport
import StratusSQLite
import StratusTransfer
import Testing

/// What the `stratus` tool does with a store, a Swift program does with the library's public
/// API: act as the store's administrator, find the store's own asset files, check a query
/// before a job starts.
@Suite("The tool's store-level reach, through the public API", .timeLimit(.minutes(30)))
struct AdministrationAPITests {
    @Test("the administrator's public database restores records of a type whose security roles let no user create them, keeping their creators", arguments: TestEngine.all)
    func administratorPublicDatabase(engine: TestEngine) async throws {
        try await CLIStoreFixture.with(engine) { fixture in
            let schema = try SchemaReader().read("""
                DEFINE SCHEMA
                    RECORD TYPE Notice (title STRING, GRANT READ TO "_world");
                """)
            for type in schema.recordTypes { try await fixture.container().saveSchema(type) }
            let alice = fixture.container().publicCloudDatabase
            let refused = await caughtError { try await TestDatabase.save([makeRecord("Notice", "n1", ["title": .string("by alice")])], in: alice) }
            #expect(stratusError(refused)?.code == .permissionFailure, "no user may create a Notice: \(String(describing: refused))")

            // A restore: records as a backup holds them, each naming its creator, whom it keeps.
            let creator = "_0123456789abcdef0123456789abcdef"
            let backup = #"{"recordName":"n1","recordType":"Notice","fields":{"title":{"value":"restored","type":"STRING"}},"created":{"timestamp":1700000000000,"userRecordName":"\#(creator)"},"modified":{"timestamp":1700000000000,"userRecordName":"\#(creator)"}}"# + "\n"
            let administrator = fixture.container().administratorPublicDatabase
            let summary = try await RecordImporter(database: administrator).run(from: try RecordReader(data: Data(backup.utf8), options: RecordReadOptions()))
            #expect(summary.created == 1 && summary.failed == 0, "\(summary)")
            let read = try await alice.record(for: Record.ID(recordName: "n1"))
            #expect(read["title"] as? String == "restored", "everyone reads what the administrator restored")
            #expect(read.creatorUserRecordID?.recordName == creator, "the record keeps the creator the backup names")
        }
    }

    @Test("assetContentDirectory is the folder of the files the store keeps an asset's content in, which a plain export's asset URLs name", arguments: TestEngine.all)
    func assetContentDirectory(engine: TestEngine) async throws {
        try await CLIStoreFixture.with(engine) { fixture in
            let database = fixture.container().privateCloudDatabase
            let photo = makeRecord("Photo", "p1", [:])
            photo["image"] = Asset(fileURL: try fixture.store.writeFile("upload/photo.jpg", Data(repeating: 7, count: 2_000)))
            try await TestDatabase.save([photo], in: database)
            let stored = try await database.record(for: photo.recordID)
            let file = try await database.assetContentURL(for: try #require(stored["image"] as? Asset))
            #expect(file.deletingLastPathComponent().standardizedFileURL.path == database.assetContentDirectory.standardizedFileURL.path, "\(file.path)")
            #expect(FileManager.default.contents(atPath: file.path) == Data(repeating: 7, count: 2_000))
        }
    }

    @Test("a container identifier that is a store's URL is refused without being repeated, and names no store file")
    func urlAsContainerIdentifier() async throws {
        let url = "postgresql://app:s3cret-pw@db1/app"
        let refusal = #expect(throws: StratusError.self) { try Container.checkIdentifier(url) }
        #expect(refusal?.code == .badContainer && refusal?.message.contains("s3cret") == false, "\(String(describing: refusal))")
        #expect(!SQLiteEngine.defaultStorePath(containerIdentifier: url).contains("s3cret"))
        try await SQLiteFixture.with { fixture in
            let container = Container(identifier: url, engine: fixture.engine, userName: "alice")
            for database in [container.publicCloudDatabase, container.administratorPublicDatabase] {
                let failed = await caughtError { try await TestDatabase.save([makeRecord("Note", "n1", [:])], in: database) }
                #expect(stratusError(failed)?.code == .badContainer && "\(String(describing: failed))".contains("s3cret") == false, "\(String(describing: failed))")
            }
            let inventory = try await Container(identifier: "com.example.tests", engine: fixture.engine).storeInventory()
            #expect(!inventory.databases.contains { $0.containerIdentifier.contains("s3cret") }, "nothing was stored under the URL: \(inventory.databases.map(\.containerIdentifier))")
        }
    }

    @Test("Query.validate refuses what no query runs before anything is read, naming it, and passes what runs")
    func queryValidation() throws {
        try Query(recordType: "Photo", predicate: QueryPredicate(format: "rating > 3 AND title BEGINSWITH 'Sun'")).validate()
        let bytes = Query(recordType: "Photo", predicate: .condition(.compare(.field("thumbnail"), .equal, .bytes(Data([1, 2])))))
        let refusal = #expect(throws: StratusError.self) { try bytes.validate() }
        #expect(refusal?.code == .invalidArguments && refusal?.message.contains("thumbnail") == true, "\(String(describing: refusal))")
        let badType = #expect(throws: StratusError.self) { try Query(recordType: "no such type!").validate() }
        #expect(badType?.code == .invalidArguments, "\(String(describing: badType))")
        // Reserved keys that are no system key name nothing a record holds: said, not matched against.
        for key in ["recordType", "recordChangeTag", "encryptedValues"] {
            let reserved = #expect(throws: StratusError.self) { try Query(recordType: "Photo", predicate: QueryPredicate(format: "%K == 'x'", key)).validate() }
            #expect(reserved?.code == .invalidArguments && reserved?.message.contains("'\(key)' names no field") == true, "\(String(describing: reserved))")
        }
        let list = Query(recordType: "Photo", predicate: .condition(.listContains(.field("scans"), .bytes(Data([1])))))
        let listRefusal = #expect(throws: StratusError.self) { try list.validate() }
        #expect(listRefusal?.message.contains("cannot match list elements on 'scans' against a BYTES value") == true, "\(String(describing: listRefusal))")
    }
}
