import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import StratusTransfer
import Testing

/// Stratus's own readers of asset content (exports, store copies and their comparison) read the
/// store's files directly: they hand out no copies, as an app's `fileURL` does.
@Suite("Asset readers", .timeLimit(.minutes(30)))
struct AssetReadersTests {
    @Test("an export with an assets folder, an export without one, a store copy and its comparison make no handed-out copy")
    func exportsAndCopiesReadDirectly() async throws {
        try await TemporaryStore.with(prefix: "asset-readers") { store in
            let engine = try SQLiteEngine(path: store.path())
            let database = Container(identifier: "com.example.readers", engine: engine, userName: "alice").publicCloudDatabase
            let bytes = Data((0..<5_000).map { UInt8($0 % 251) })
            let source = try store.writeFile("upload/photo.jpg", bytes)
            for name in ["a", "b"] {
                let photo = Record(recordType: "Photo", recordID: Record.ID(recordName: name))
                photo["image"] = Asset(fileURL: source)
                _ = try await database.save(photo)
            }
            let handouts = URL(fileURLWithPath: store.path() + ".assets").appendingPathComponent("handout")

            let folder = store.url("export-assets")
            let output = store.url("photos.ndjson")
            _ = FileManager.default.createFile(atPath: output.path, contents: nil)
            let handle = try FileHandle(forWritingTo: output)
            let writer = RecordWriter(format: .ndjson, output: handle)
            writer.jsonOptions.assetFolder = try AssetExportFolder(directory: folder)
            #expect(try await RecordExporter(database: database, query: Query(recordType: "Photo")).run(into: writer).exported == 2)
            try writer.finish()
            try handle.close()
            let exported = try FileManager.default.contentsOfDirectory(atPath: folder.path)
            #expect(exported.count == 1)
            #expect(try Data(contentsOf: folder.appendingPathComponent(exported[0])) == bytes)

            let plain = RecordWriter(format: .ndjson, output: FileHandle(forWritingAtPath: "/dev/null")!)
            #expect(try await RecordExporter(database: database, query: Query(recordType: "Photo")).run(into: plain).exported == 2)
            try plain.finish()

            let copy = try SQLiteEngine(path: store.path("copy.sqlite"))
            let copier = StoreCopier(from: engine, to: copy)
            #expect(try await copier.run().failures.isEmpty)
            #expect(try await copier.compare().allSatisfy(\.matches))

            #expect(!FileManager.default.fileExists(atPath: handouts.path), "no reader handed out a copy")
            #expect(!FileManager.default.fileExists(atPath: store.path("copy.sqlite") + ".assets/handout"))
        }
    }

    @Test("an asset asked for its file after its store was deleted makes no folder where the store was (found in this project's own test runs: removed test stores came back as a handout folder)")
    func deletedStoreIsNotMadeAgain() async throws {
        let store = try TemporaryStore(prefix: "asset-gone")
        defer { store.remove() }
        let engine = try SQLiteEngine(path: store.path("sub/store.sqlite"))
        let database = Container(identifier: "com.example.gone", engine: engine, userName: "alice").publicCloudDatabase
        let photo = Record(recordType: "Photo", recordID: Record.ID(recordName: "p"))
        photo["image"] = Asset(fileURL: try store.writeFile("upload/photo.jpg", Data(repeating: 7, count: 2_000)))
        _ = try await database.save(photo)
        let fetched = try await database.record(for: photo.recordID)
        let asset = try #require(fetched["image"] as Asset?)
        let first = try #require(asset.fileURL)
        #expect(try Data(contentsOf: first).count == 2_000)

        try FileManager.default.removeItem(atPath: store.path("sub"))
        #expect(asset.fileURL.map { !$0.path.hasPrefix(store.path("sub")) } ?? true, "\(String(describing: asset.fileURL))")
        #expect(!FileManager.default.fileExists(atPath: store.path("sub")), "the deleted store's folder stays deleted")
    }
}
