import Foundation
import Stratus
import Testing

#if canImport(Glibc)
import Glibc
#endif

extension EngineConformance {
    /// Asset content and CloudKit's JSON through an engine: content kept once and private,
    /// removed when nothing names it, CloudKit assets kept without content, confined sources,
    /// and what a record's JSON held beyond the model kept as it came.
    static var assetCases: [TestCase] {
        [
            TestCase("assets: content is kept once, private, and removed when no record names it", contentIsKeptOnceAndCollected),
            TestCase("assets: a CloudKit asset keeps its metadata and reads normally; its content is assetNotAvailable", remoteAssetsKeepTheirMetadata),
            TestCase("assets: confined sources refuse absolute paths, '..', links, directories, FIFOs and devices, and change nothing", confinedSourcesAreRefused),
            TestCase("assets: a save that fails keeps no content, and a collection beside writers removes no named content", failedSavesAndCollectionKeepNothingStray),
            TestCase("assets: what a record's CloudKit JSON held beyond the model is stored and read back", jsonExtrasAreStored),
            TestCase("assets: stored content is named by digest only where a record of the database or the public one names it", contentIsNamedOnlyWhereVisible),
            TestCase("assets: a record read before another version replaced its asset saves as CloudKit's policies say: a stale tag is serverRecordChanged, .changedKeys writes what changed and keeps the stored asset", staleRecordsWithReplacedAssets),
        ]
    }

    private static func mode(of url: URL) -> mode_t? {
        var info = stat()
        return stat(url.path, &info) == 0 ? info.st_mode & 0o7777 : nil
    }

    private static func expectReadable(_ asset: Asset?, _ bytes: Data, in database: Database, _ context: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let asset = try #require(asset, "\(context): no asset", sourceLocation: sourceLocation)
        let url = try await database.assetContentURL(for: asset)
        #expect(FileManager.default.contents(atPath: url.path) == bytes, "\(context): content", sourceLocation: sourceLocation)
    }

    static func contentIsNamedOnlyWhereVisible(_ env: Environment) async throws {
        let secret = patternBytes(count: 3_000, seed: 21)
        let bobs = env.container(user: "bob").privateCloudDatabase
        let report = Record(recordType: "Doc", recordID: Record.ID(recordName: "report"))
        report["file"] = Asset(fileURL: try env.store.writeFile("sources/report.bin", secret))
        _ = try await bobs.save(report)
        let stored = try #require(try await bobs.record(for: report.recordID)["file"] as? Asset)
        let digest = try #require(stored.storedIdentifier)
        try await expectReadable(stored, secret, in: bobs, "bob's own")

        // Alice knows the digest (of a copy she has): it links nothing and opens nothing.
        let alice = env.container(user: "alice")
        for database in [alice.publicCloudDatabase, alice.privateCloudDatabase] {
            let steal = Record(recordType: "Doc", recordID: Record.ID(recordName: "steal"))
            steal["file"] = Asset(storedIdentifier: digest, size: Int64(secret.count), fileURL: nil)
            let saved = try await database.modifyRecords(saving: [steal], deleting: [], atomically: false)
            #expect(errorCode(saved.saveResults[steal.recordID]) == .assetNotAvailable, "\(database.databaseScope)")
            let opened = stratusError(await caughtError { try await database.assetContentURL(for: Asset(storedIdentifier: digest, size: 1, fileURL: nil)) })
            #expect(opened?.code == .assetNotAvailable, "\(database.databaseScope)")
        }

        // A fetched record saved again keeps naming its content.
        let again = try await bobs.record(for: report.recordID)
        again["note"] = "kept"
        _ = try await bobs.save(again)
        try await expectReadable(try await bobs.record(for: report.recordID)["file"] as? Asset, secret, in: bobs, "bob's, saved again")
        // Put into a record of another database, a fetched asset is stored there from its file.
        let published = Record(recordType: "Doc", recordID: Record.ID(recordName: "published"))
        published["file"] = try await bobs.record(for: report.recordID)["file"] as? Asset
        let bobPublic = env.container(user: "bob").publicCloudDatabase
        _ = try await bobPublic.save(published)
        try await expectReadable(try await bobPublic.record(for: published.recordID)["file"] as? Asset, secret, in: bobPublic, "bob's, published")
    }

    static func contentIsKeptOnceAndCollected(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        let photo = patternBytes(count: 200_000, seed: 7)
        let other = patternBytes(count: 1_000, seed: 8)
        let first = try env.store.writeFile("sources/a.jpg", photo)
        let second = try env.store.writeFile("sources/copy-of-a.jpg", photo)
        let third = try env.store.writeFile("sources/other.bin", other)
        chmod(first.path, 0o644)

        let a = Record(recordType: "Photo", recordID: Record.ID(recordName: "a"))
        a["image"] = Asset(fileURL: first)
        let b = Record(recordType: "Photo", recordID: Record.ID(recordName: "b"))
        b["image"] = Asset(fileURL: second)
        b["thumbnails"] = [Asset(fileURL: first), Asset(fileURL: second)]
        _ = try await database.modifyRecords(saving: [a, b], deleting: [])
        var inventory = try await database.assetContentInventory()
        #expect(inventory.count == 1, "the same bytes from three sources are kept once")
        #expect(inventory.bytes == Int64(photo.count))
        #expect(mode(of: first) == 0o644, "the source's mode is never changed")

        let stored = try await database.record(for: a.recordID)
        let url = try await database.assetContentURL(for: try #require(stored["image"] as? Asset))
        #expect(FileManager.default.contents(atPath: url.path) == photo)
        let storedMode = try #require(mode(of: url))
        #expect(storedMode & 0o077 == 0, "a stored copy is private to the store's user, not \(String(storedMode, radix: 8))")

        // Saving the same file again adds nothing.
        let again = Record(recordType: "Photo", recordID: Record.ID(recordName: "again"))
        again["image"] = Asset(fileURL: first)
        _ = try await database.save(again)
        #expect(try await database.assetContentInventory().count == 1)

        // A replaced value's content goes once nothing names it.
        let fetchedA = try await database.record(for: a.recordID)
        fetchedA["image"] = Asset(fileURL: third)
        _ = try await database.save(fetchedA)
        inventory = try await database.assetContentInventory()
        #expect(inventory.count == 2, "b and again still name the photo; a names the other file")
        _ = try await database.modifyRecords(saving: [], deleting: [b.recordID, again.recordID])
        inventory = try await database.assetContentInventory()
        #expect(inventory.count == 1 && inventory.bytes == Int64(other.count), "deleting the records that named the photo removes it")
        try await expectReadable(try await database.record(for: a.recordID)["image"] as? Asset, other, in: database, "a after the deletes")

        _ = try await database.deleteRecord(withID: a.recordID)
        #expect(try await database.assetContentInventory().count == 0)
        let swept = try await database.collectUnreferencedAssets()
        #expect(swept.removedContents == 0, "writes already removed what they stopped naming")
    }

    static func staleRecordsWithReplacedAssets(_ env: Environment) async throws {
        let database = env.container().privateCloudDatabase
        let original = patternBytes(count: 5_000, seed: 31), replacement = patternBytes(count: 4_000, seed: 32)
        let record = Record(recordType: "Doc", recordID: Record.ID(recordName: "doc"))
        record["content"] = Asset(fileURL: try env.store.writeFile("sources/v1.bin", original))
        record["n"] = 1
        _ = try await database.save(record)
        // Two devices read it; the second replaces the asset, whose first content no record
        // names any more, so the store removes it.
        let first = try await database.record(for: record.recordID)
        let second = try await database.record(for: record.recordID)
        let archived = try await database.record(for: record.recordID)
        second["content"] = Asset(fileURL: try env.store.writeFile("sources/v2.bin", replacement))
        let current = try await database.save(second)
        #expect(try await database.assetContentInventory().count == 1)

        first["n"] = 2
        let stale = stratusError(await caughtError { try await database.save(first) })
        #expect(stale?.code == .serverRecordChanged, "\(String(describing: stale))")
        #expect(stale?.serverRecord?.recordChangeTag == current.recordChangeTag)

        let merged = try await database.modifyRecords(saving: [first], savePolicy: .changedKeys)
        let saved = try #require(try merged.saveResults[record.recordID]?.get())
        #expect(saved["n"] as? Int64 == 2)
        let stored = try await database.record(for: record.recordID)
        #expect(stored["n"] as? Int64 == 2)
        try await expectReadable(stored["content"] as? Asset, replacement, in: database, "the second device's asset, kept")

        // Every key sent: the first content would be stored again, and it is gone.
        archived["n"] = 3
        let whole = try await database.modifyRecords(saving: [archived], savePolicy: .allKeys, atomically: false)
        #expect(errorCode(whole.saveResults[record.recordID]) == .assetNotAvailable)
        // Deleted meanwhile, the record would be made from the save's values, the gone content too.
        _ = try await database.deleteRecord(withID: record.recordID)
        let remade = try await database.modifyRecords(saving: [first], savePolicy: .changedKeys, atomically: false)
        #expect(errorCode(remade.saveResults[record.recordID]) == .assetNotAvailable)
        #expect(try await database.assetContentInventory().count == 0)
    }

    static func remoteAssetsKeepTheirMetadata(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        let remote = Asset(downloadURL: "https://cvws.icloud-content.com/B/AV4x/${f}?o=abc", fileChecksum: "AV4xs/+kT2=", size: 53_211,
                           referenceChecksum: "AR7u", wrappingKey: "wk+/==", receipt: "rcpt", otherMembers: ["futureMember": #"{"a":[1,2]}"#])
        let record = Record(recordType: "CPLMaster", recordID: Record.ID(recordName: "master"))
        record["resJPEGFullRes"] = remote
        record["filenameEnc"] = Data("IMG_0001.JPG".utf8)
        _ = try await database.save(record)

        let fetched = try await database.record(for: record.recordID)
        let asset = try #require(fetched["resJPEGFullRes"] as? Asset)
        #expect(asset.downloadURL == remote.downloadURL && asset.fileChecksum == remote.fileChecksum && asset.size == 53_211)
        #expect(asset.referenceChecksum == "AR7u" && asset.wrappingKey == "wk+/==" && asset.receipt == "rcpt")
        #expect(asset.otherMembers == remote.otherMembers)
        #expect(asset.fileURL == nil && asset.storedIdentifier == nil)
        #expect(fetched["filenameEnc"] as? Data == Data("IMG_0001.JPG".utf8), "the record reads normally")
        let error = await caughtError { try await database.assetContentURL(for: asset) }
        #expect(stratusError(error)?.code == .assetNotAvailable)
        #expect(try await database.assetContentInventory().count == 0, "nothing was downloaded")

        // A query that does not ask for the asset field still reads the record.
        let page = try await database.records(matching: Query(recordType: "CPLMaster", predicate: QueryPredicate(value: true)), desiredKeys: ["filenameEnc"])
        #expect(page.matchResults.count == 1)
    }

    static func confinedSourcesAreRefused(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        let folder = env.store.url("export")
        _ = try env.store.writeFile("export/photos/good.jpg", Data("good".utf8))
        let secret = try env.store.writeFile("private/secret.txt", Data("secret".utf8))
        chmod(secret.path, 0o600)
        try FileManager.default.createSymbolicLink(atPath: folder.appendingPathComponent("photos/link.jpg").path, withDestinationPath: secret.path)
        try FileManager.default.createSymbolicLink(atPath: folder.appendingPathComponent("photos/inside.jpg").path, withDestinationPath: "good.jpg")
        try FileManager.default.createSymbolicLink(atPath: folder.appendingPathComponent("linked-dir").path, withDestinationPath: env.store.url("private").path)
        try FileManager.default.createSymbolicLink(atPath: folder.appendingPathComponent("zero").path, withDestinationPath: "/dev/zero")
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("a-directory"), withIntermediateDirectories: true)
        #expect(mkfifo(folder.appendingPathComponent("fifo").path, 0o600) == 0)

        let refused: [(String, Asset, StratusError.Code)] = [
            ("absolute", Asset(path: secret.path, in: folder), .invalidArguments),
            ("dot-dot", Asset(path: "../private/secret.txt", in: folder), .invalidArguments),
            ("dot-dot-inside", Asset(path: "photos/../../private/secret.txt", in: folder), .invalidArguments),
            ("link", Asset(path: "photos/link.jpg", in: folder), .invalidArguments),
            ("link-inside-unasked", Asset(path: "photos/inside.jpg", in: folder), .invalidArguments),
            ("linked-directory", Asset(path: "linked-dir/secret.txt", in: folder), .invalidArguments),
            ("link-out-followed", Asset(path: "photos/link.jpg", in: folder, followsSymlinks: true), .invalidArguments),
            ("device-link-followed", Asset(path: "zero", in: folder, followsSymlinks: true), .invalidArguments),
            ("directory", Asset(path: "a-directory", in: folder), .invalidArguments),
            ("fifo", Asset(path: "fifo", in: folder), .invalidArguments),
            ("missing", Asset(path: "photos/none.jpg", in: folder), .assetFileNotFound),
            ("device", Asset(fileURL: URL(fileURLWithPath: "/dev/zero")), .invalidArguments),
            ("plain-directory", Asset(fileURL: folder), .invalidArguments),
        ]
        let records = refused.map { name, asset, _ in
            let record = Record(recordType: "Photo", recordID: Record.ID(recordName: name))
            record["image"] = asset
            return record
        }
        let (saves, _) = try await database.modifyRecords(saving: records, deleting: [], atomically: false)
        for (name, _, code) in refused {
            #expect(errorCode(saves[Record.ID(recordName: name)]) == code, "\(name): \(String(describing: saves[Record.ID(recordName: name)]))")
            #expect(try await TestDatabase.exists(name, in: database) == false, "\(name)")
        }
        #expect(try await database.assetContentInventory().count == 0, "nothing was copied")
        #expect(mode(of: secret) == 0o600, "the private file's mode is unchanged")

        // Inside the folder: a plain path, and a link that stays inside when links are followed.
        let good = Record(recordType: "Photo", recordID: Record.ID(recordName: "good"))
        good["image"] = Asset(path: "photos/good.jpg", in: folder)
        good["alias"] = Asset(path: "./photos/inside.jpg", in: folder, followsSymlinks: true)
        let saved = try await database.save(good)
        try await expectReadable(saved["image"] as? Asset, Data("good".utf8), in: database, "plain path")
        try await expectReadable(saved["alias"] as? Asset, Data("good".utf8), in: database, "followed link inside")
        #expect(try await database.assetContentInventory().count == 1)
    }

    static func failedSavesAndCollectionKeepNothingStray(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        let record = Record(recordType: "Photo", recordID: Record.ID(recordName: "conflict"))
        record["image"] = Asset(fileURL: try env.store.writeFile("sources/v1.bin", patternBytes(count: 5_000, seed: 1)))
        let stale = try await database.save(record)
        let fresh = try await database.record(for: record.recordID)
        fresh["title"] = "changed elsewhere"
        _ = try await database.save(fresh)

        // The stale copy's save fails with a conflict: its new content is not kept.
        stale["image"] = Asset(fileURL: try env.store.writeFile("sources/v2.bin", patternBytes(count: 6_000, seed: 2)))
        let (saves, _) = try await database.modifyRecords(saving: [stale], deleting: [])
        #expect(errorCode(saves[record.recordID]) == .serverRecordChanged)
        #expect(try await database.assetContentInventory().count == 1, "only the saved record's content is kept")

        // Writers and full collections side by side: every saved record's content stays readable.
        let sources = try (0..<12).map { i in (i, try env.store.writeFile("sources/w\(i).bin", patternBytes(count: 20_000 + i, seed: UInt8(10 + i)))) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (i, url) in sources {
                group.addTask {
                    let r = Record(recordType: "Photo", recordID: Record.ID(recordName: "w\(i)"))
                    r["image"] = Asset(fileURL: url)
                    _ = try await database.save(r)
                }
            }
            group.addTask {
                for _ in 0..<6 { _ = try await database.collectUnreferencedAssets() }
            }
            try await group.waitForAll()
        }
        _ = try await database.collectUnreferencedAssets()
        for (i, _) in sources {
            try await expectReadable(try await database.record(for: Record.ID(recordName: "w\(i)"))["image"] as? Asset,
                                     patternBytes(count: 20_000 + i, seed: UInt8(10 + i)), in: database, "w\(i)")
        }
        #expect(try await database.assetContentInventory().count == sources.count + 1)
    }

    static func jsonExtrasAreStored(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        var extras = Record.JSONExtras()
        extras.members = ["pluginFields": "{}", "expirationTime": "1779122717", "deleted": "false"]
        extras.zoneIDMembers = ["zoneType": #""REGULAR_CUSTOM_ZONE""#]
        extras.createdMembers = ["deviceID": #""2""#]
        extras.fields = ["folder": #"{"value":{"recordName":"f","action":"VALIDATE"},"type":"REFERENCE"}"#]
        let record = Record(
            recordType: "Note", recordID: Record.ID(recordName: "with-extras"),
            values: ["folder": .reference(Record.Reference(recordID: Record.ID(recordName: "f"), action: .none)), "title": .string("t")],
            jsonExtras: extras)
        _ = try await database.save(record)
        let fetched = try await database.record(for: record.recordID)
        #expect(fetched.jsonExtras.members == extras.members)
        #expect(fetched.jsonExtras.zoneIDMembers == extras.zoneIDMembers)
        #expect(fetched.jsonExtras.fields == extras.fields)
        #expect(fetched["title"] as? String == "t")

        // Setting a kept field drops what was kept of it; the rest stays.
        fetched["folder"] = Record.Reference(recordID: Record.ID(recordName: "g"), action: .none)
        _ = try await database.save(fetched)
        let changed = try await database.record(for: record.recordID)
        #expect(changed.jsonExtras.fields["folder"] == nil)
        #expect(changed.jsonExtras.members == extras.members)
    }
}
