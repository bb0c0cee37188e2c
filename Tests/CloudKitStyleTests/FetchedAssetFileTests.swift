import Foundation
import Stratus
import StratusSQLite
import StratusStores
import StratusTestSupport
import Testing

// What CloudKit apps do with a fetched asset's file, ported mechanically: CloudKit hands out a
// downloaded copy, so apps move it into their own cache, delete it when done, or write it.
// None of that may change the store, which keeps one file per content for every record.

@Suite("Fetched asset files belong to the app, as CloudKit's downloaded copies")
struct FetchedAssetFileTests {
    /// Two records holding the same bytes, saved from a temporary file that is then removed.
    private func savePhotos(_ database: Database, in store: TemporaryStore) async throws -> (Record.ID, Record.ID) {
        let source = try store.writeFile("upload/photo.jpg", Data(repeating: 7, count: 1000))
        let photo = Record(recordType: "Photo", recordID: Record.ID(recordName: "photo-1"))
        photo["image"] = Asset(fileURL: source)
        _ = try await database.save(photo)
        let other = Record(recordType: "Photo", recordID: Record.ID(recordName: "photo-2"))
        other["image"] = Asset(fileURL: source)   // another record, the same bytes
        _ = try await database.save(other)
        try FileManager.default.removeItem(at: source)   // the upload is done: remove the temporary file
        return (photo.recordID, other.recordID)
    }

    private func imageBytes(_ database: Database, _ id: Record.ID) async throws -> Data? {
        let record = try await database.record(for: id)
        return ((record["image"] as? Asset)?.fileURL).flatMap { try? Data(contentsOf: $0) }
    }

    @Test("moving, deleting or writing a fetched asset's file leaves the stored asset, and every record sharing its bytes, as it was", arguments: TestEngine.all)
    func appOwnsTheFile(engine: TestEngine) async throws {
        try await withStore(on: engine) { location, store in
            let container = try Container(identifier: "iCloud.com.example.behaviours", store: location, userName: "alice")
            let database = container.privateCloudDatabase
            let (photo, other) = try await savePhotos(database, in: store)

            // Moved into the app's cache.
            let first = try await database.record(for: photo)
            let moved = try #require((first["image"] as? Asset)?.fileURL)
            let cache = store.url("cache.jpg")
            try FileManager.default.moveItem(at: moved, to: cache)
            #expect(try Data(contentsOf: cache) == Data(repeating: 7, count: 1000))
            #expect(try await imageBytes(database, photo) == Data(repeating: 7, count: 1000), "the asset is still there after the app moved its fetched copy")
            #expect(try await imageBytes(database, other) == Data(repeating: 7, count: 1000), "another record's asset with the same bytes is still there")

            // Deleted when done.
            let second = try await database.record(for: other)
            try FileManager.default.removeItem(at: try #require((second["image"] as? Asset)?.fileURL))
            #expect(try await imageBytes(database, photo) == Data(repeating: 7, count: 1000))
            #expect(try await imageBytes(database, other) == Data(repeating: 7, count: 1000))

            // Written (after making it writable, as its owner may; a process running as root
            // needs not even that).
            let third = try await database.record(for: photo)
            let written = try #require((third["image"] as? Asset)?.fileURL)
            _ = chmod(written.path, 0o600)
            let handle = try FileHandle(forWritingTo: written)
            try handle.write(contentsOf: Data("scribbled".utf8))
            try handle.close()
            #expect(try await imageBytes(database, photo) == Data(repeating: 7, count: 1000), "writing the fetched file does not write the store")
            #expect(try await imageBytes(database, other) == Data(repeating: 7, count: 1000))

            // The store's own file is never the one handed out. (On PostgreSQL the content is in
            // the database: there is no such file to hand out.)
            guard engine == .sqlite else { return }
            let contentFolder = URL(fileURLWithPath: location + ".assets").appendingPathComponent("sha256").standardizedFileURL.path
            #expect(!written.standardizedFileURL.path.hasPrefix(contentFolder))
        }
    }

    // SQLite only: the test damages the store's assets folder, which a PostgreSQL store does not
    // have (its content is in the database).
    @Test("content the store holds cut short (a damaged assets folder) is not handed out as the asset: its file is nil, and assetContentURL says it is damaged", arguments: [TestEngine.sqlite])
    func damagedContentIsNotHandedOut(engine: TestEngine) async throws {
        try await withStore(on: engine) { location, store in
            let container = try Container(identifier: "iCloud.com.example.behaviours", store: location, userName: "alice")
            let database = container.privateCloudDatabase
            let (photo, _) = try await savePhotos(database, in: store)
            let contents = location + ".assets/sha256"
            let file = try #require(try FileManager.default.contentsOfDirectory(atPath: contents).first)
            #expect(chmod(contents + "/" + file, 0o600) == 0 && truncate(contents + "/" + file, 400) == 0)

            let asset = try #require(try await database.record(for: photo)["image"] as? Asset)
            #expect(asset.size == 1000)
            #expect(asset.fileURL == nil, "400 of the asset's 1,000 bytes are not the asset")
            await #expect(throws: StratusError.self) { _ = try await database.assetContentURL(for: asset) }
            do {
                _ = try await database.assetContentURL(for: asset)
            } catch let error as StratusError {
                #expect(error.code == .assetFileModified && error.message.contains("400 bytes where the asset has 1000") && error.message.contains("damaged"), "\(error)")
            }
        }
    }

    @Test("an asset value hands out one file, readable and writable by the app; each fetch its own; a file the app removed is made again", arguments: TestEngine.all)
    func oneFilePerFetch(engine: TestEngine) async throws {
        try await withStore(on: engine) { location, store in
            let container = try Container(identifier: "iCloud.com.example.behaviours", store: location, userName: "alice")
            let database = container.privateCloudDatabase
            let (photo, _) = try await savePhotos(database, in: store)

            let asset = try #require(try await database.record(for: photo)["image"] as? Asset)
            let url = try #require(asset.fileURL)
            let copy = asset   // copies of the value share the file
            #expect(copy.fileURL == url && asset.fileURL == url)
            #expect(FileManager.default.isWritableFile(atPath: url.path))
            let again = try #require(try await database.record(for: photo)["image"] as? Asset)
            #expect(again.fileURL != url, "another fetch hands out another file")
            #expect(again == asset, "both are the same stored asset")

            try FileManager.default.removeItem(at: url)
            let remade = try #require(asset.fileURL)
            #expect(try Data(contentsOf: remade) == Data(repeating: 7, count: 1000))
        }
    }

    @Test("the folders of processes that ended are removed with their handed-out files; this process's stay", arguments: TestEngine.all)
    func endedProcessesAreCleanedUp(engine: TestEngine) async throws {
        try await withStore(on: engine) { location, store in
            let container = try Container(identifier: "iCloud.com.example.behaviours", store: location, userName: "alice")
            let database = container.privateCloudDatabase
            let (photo, _) = try await savePhotos(database, in: store)
            let mine = try #require((try await database.record(for: photo)["image"] as? Asset)?.fileURL)

            // A folder as a process of this machine that was killed leaves it (no lock file).
            let folder = mine.deletingLastPathComponent()
            let host = folder.lastPathComponent.split(separator: ".").first.map(String.init) ?? "host"
            let ended = folder.deletingLastPathComponent().appendingPathComponent("\(host).999999.dead", isDirectory: true)
            try FileManager.default.createDirectory(at: ended, withIntermediateDirectories: true)
            try Data("left".utf8).write(to: ended.appendingPathComponent("file"))

            let collected = try await database.collectUnreferencedAssets()
            #expect(collected.removedHandoutFolders == 1)
            #expect(!FileManager.default.fileExists(atPath: ended.path))
            #expect(try Data(contentsOf: mine) == Data(repeating: 7, count: 1000), "a running process's files stay")
            #expect(try await imageBytes(database, photo) == Data(repeating: 7, count: 1000))
        }
    }
}
