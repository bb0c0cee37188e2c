import Foundation
@_spi(StratusEngine) import Stratus
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

extension SQLiteEngine {
    /// The store's asset content: files named by their SHA-256 in `<store>.assets/sha256/`
    /// (read-only, 0400), uploads in `uploads/`, holders' lock files in `holders/`; every
    /// folder private to the store's user (0700), like the store file. Which records name which
    /// content is kept in `asset_refs`, holds in `asset_holds`.
    @_spi(StratusEngine)
    public func assetContents(for database: DatabaseContext) -> any AssetContentStore {
        SQLiteAssetStore(engine: self, database: database.isAdministrator ? nil : database)
    }

    /// Where the content with this identifier is (or would be) kept; `nil` for text that is
    /// not a content identifier, so that a damaged document never names a file elsewhere.
    func assetContentURL(_ identifier: String) -> URL? {
        guard SHA256Hasher.Digest.isHexadecimal(identifier) else { return nil }
        return assetsDirectory.appendingPathComponent("sha256", isDirectory: true).appendingPathComponent(identifier)
    }
}

/// ``AssetContentStore`` on an SQLite store's asset folder. Holds and references live in the
/// store, so that a collection, which runs in a write transaction, is serialized with every
/// hold and every record write.
final class SQLiteAssetStore: AssetContentStore, @unchecked Sendable {
    // @unchecked: the engine is thread-safe; the rest is immutable.
    let engine: SQLiteEngine
    /// The database whose records' content it answers (`nil`: the whole store's, an administrator's).
    let database: DatabaseContext?
    let contentDirectory: URL
    let uploadDirectory: URL

    init(engine: SQLiteEngine, database: DatabaseContext? = nil) {
        self.engine = engine
        self.database = database
        contentDirectory = engine.assetsDirectory.appendingPathComponent("sha256", isDirectory: true)
        uploadDirectory = engine.assetsDirectory.appendingPathComponent("uploads", isDirectory: true)
    }

    var localDirectory: URL { engine.assetsDirectory }

    func beginUpload(holder: String) throws -> any AssetUpload {
        try makeAssetsFolder()
        return try LocalAssetUpload.create(in: uploadDirectory, holder: holder)
    }

    /// The store's asset folder, made (when missing) for the store file's owner when root makes
    /// it: the folders and files made in it then take that owner too
    /// (``FileDescriptor/inheritFolderOwner(_:)``), so that a root job's import leaves content
    /// the store's user can read.
    private func makeAssetsFolder() throws {
        try Self.fileError("create the asset folder \(localDirectory.path)") { () throws(POSIXFailure) in
            try FileDescriptor.makePrivateDirectory(localDirectory)
        }
        FileDescriptor.giveToOwner(of: engine.path, localDirectory.path)
    }

    func hold(_ identifiers: Set<String>, holder: String) throws -> Set<String> {
        guard !identifiers.isEmpty else { return [] }
        let now = Date().timeIntervalSinceReferenceDate
        try engine.writeTransaction { connection in
            let insert = try connection.statement("INSERT OR REPLACE INTO asset_holds(content_id, holder, held_at) VALUES (?, ?, ?)")
            for identifier in identifiers {
                insert.reset()
                try insert.bind([.text(identifier), .text(holder), .real(now)])
                try insert.step()
            }
        }
        // Held now, so what exists stays.
        return identifiers.filter { engine.assetContentURL($0).map { access($0.path, F_OK) == 0 } ?? false }
    }

    func contentURL(_ identifier: String) -> URL? { engine.assetContentURL(identifier) }

    func commit(_ uploads: [(upload: any AssetUpload, identifier: String)]) throws {
        guard !uploads.isEmpty else { return }
        defer { for (upload, _) in uploads { upload.abandon() } }
        try makeAssetsFolder()
        try Self.fileError("create the content folder \(contentDirectory.path)") { () throws(POSIXFailure) in
            try FileDescriptor.makePrivateDirectory(contentDirectory)
        }
        var fresh: [(upload: LocalAssetUpload, destination: URL)] = []
        var seen: Set<String> = []
        for (upload, identifier) in uploads {
            guard let upload = upload as? LocalAssetUpload, let destination = engine.assetContentURL(identifier) else {
                throw StratusError(.internalError, "an asset upload was not made by this store")
            }
            // Content the store has (or that this commit names twice) is stored once.
            if access(destination.path, F_OK) == 0 || !seen.insert(identifier).inserted { continue }
            fresh.append((upload, destination))
        }
        guard !fresh.isEmpty else { return }
        // Durable first, then named: a crash never leaves a named file with missing bytes. The
        // syncs run side by side, so that the file system can write them in one journal commit.
        let failure = Mutex<POSIXFailure?>(nil)
        let files = fresh.map { UnsafeSendableFile(file: $0.upload.file) }
        DispatchQueue.concurrentPerform(iterations: min(8, files.count)) { worker in
            for index in stride(from: worker, to: files.count, by: min(8, files.count)) {
                do throws(POSIXFailure) { try files[index].file.sync() } catch { failure.withLock { $0 = $0 ?? error } }
            }
        }
        if let failure = failure.withLock({ $0 }) { throw failure.storeError("sync an asset upload") }
        for (upload, destination) in fresh {
            try Self.fileError("store the asset content \(destination.lastPathComponent)") { () throws(POSIXFailure) in
                if fchmod(upload.file.raw, 0o400) != 0 { throw POSIXFailure(errno: errno, operation: "chmod") }
                upload.file.close()
                if rename(upload.url.path, destination.path) != 0 { throw POSIXFailure(errno: errno, operation: "rename") }
            }
            upload.markCommitted()
        }
        try Self.fileError("sync \(contentDirectory.path)") { () throws(POSIXFailure) in try FileDescriptor.syncDirectory(contentDirectory) }
    }

    func contentFile(_ identifier: String) throws -> URL? {
        if database != nil, try visibleContent([identifier]).isEmpty { return nil }
        guard let url = engine.assetContentURL(identifier), access(url.path, F_OK) == 0 else { return nil }
        return url
    }

    func visibleContent(_ identifiers: Set<String>) throws -> Set<String> {
        guard let database, !identifiers.isEmpty else { return identifiers }
        return try engine.readTransaction { connection in
            let named = try connection.statement("""
                SELECT 1 FROM asset_refs a JOIN zones z ON z.zone_id = a.zone_id
                WHERE a.content_id = ? AND z.container = ? AND (z.db = ? OR (z.db = ? AND z.owner = ?)) LIMIT 1
                """)
            return try identifiers.filter { identifier in
                named.reset()
                try named.bind([.text(identifier), .text(database.storageContainer), .integer(Int64(Database.Scope.public.rawValue)),
                                .integer(Int64(database.storageScope.rawValue)), .text(database.storageOwner)])
                return try named.step()
            }
        }
    }

    /// Candidates are checked a thousand at a time, each batch in one write transaction, so that
    /// writers wait for a collection no longer than for an import batch.
    func collect(releasing holder: String?, candidates: Set<String>?, isHolderAlive: (String) -> Bool) throws -> AssetCollection {
        var collection = AssetCollection()
        var pending = candidates ?? []
        if let holder {
            try engine.writeTransaction { connection in
                let select = try connection.statement("SELECT content_id FROM asset_holds WHERE holder = ?")
                try select.bind([.text(holder)])
                while try select.step() { pending.insert(select.text(0) ?? "") }
                select.reset()
                let delete = try connection.statement("DELETE FROM asset_holds WHERE holder = ?")
                try delete.bind([.text(holder)])
                try delete.step()
            }
        }
        if candidates == nil {
            // References of zones that are gone (a development reset before it cleared them)
            // would keep their content for good.
            try engine.writeTransaction { connection in
                _ = try connection.uncachedStatement("DELETE FROM asset_refs WHERE zone_id NOT IN (SELECT zone_id FROM zones)").step()
            }
            collection.add(try releaseDeadHolders(isHolderAlive))
            collection.removedUploads += LocalAssetUpload.removeAbandoned(in: uploadDirectory, isHolderAlive: isHolderAlive)
            pending.formUnion(storedIdentifiers())
        }
        var remaining = Array(pending.filter(SHA256Hasher.Digest.isHexadecimal))
        while !remaining.isEmpty {
            let chunk = remaining.suffix(1_000)
            remaining.removeLast(chunk.count)
            collection.add(try engine.writeTransaction { connection in try removeUnused(Array(chunk), isHolderAlive, on: connection) })
        }
        return collection
    }

    func inventory() throws -> (identifiers: Set<String>, bytes: Int64) {
        var bytes: Int64 = 0
        let identifiers = storedIdentifiers()
        for identifier in identifiers {
            var info = stat()
            if let url = engine.assetContentURL(identifier), stat(url.path, &info) == 0 { bytes += Int64(info.st_size) }
        }
        return (identifiers, bytes)
    }

    // MARK: - Collection

    /// Removes, inside the caller's write transaction, the content among `identifiers` that no
    /// record names and no live holder holds, with the holds of dead holders on it.
    private func removeUnused(_ identifiers: [String], _ isHolderAlive: (String) -> Bool, on connection: SQLiteConnection) throws -> AssetCollection {
        var collection = AssetCollection()
        let referenced = try connection.statement("SELECT 1 FROM asset_refs WHERE content_id = ? LIMIT 1")
        let holders = try connection.statement("SELECT holder FROM asset_holds WHERE content_id = ?")
        let release = try connection.statement("DELETE FROM asset_holds WHERE content_id = ? AND holder = ?")
        for identifier in identifiers {
            referenced.reset()
            try referenced.bind([.text(identifier)])
            if try referenced.step() { continue }
            holders.reset()
            try holders.bind([.text(identifier)])
            var held = false
            var dead: [String] = []
            while try holders.step() {
                let holder = holders.text(0) ?? ""
                if isHolderAlive(holder) { held = true } else { dead.append(holder) }
            }
            holders.reset()
            for holder in dead {
                release.reset()
                try release.bind([.text(identifier), .text(holder)])
                try release.step()
                collection.releasedHolds += 1
            }
            if held { continue }
            guard let url = engine.assetContentURL(identifier) else { continue }
            var info = stat()
            guard lstat(url.path, &info) == 0 else { continue }
            if unlink(url.path) == 0 {
                collection.removedContents += 1
                collection.removedBytes += Int64(info.st_size)
            }
        }
        return collection
    }

    /// Deletes the holds of holders that are gone.
    private func releaseDeadHolders(_ isHolderAlive: (String) -> Bool) throws -> AssetCollection {
        try engine.writeTransaction { connection in
            var collection = AssetCollection()
            let select = try connection.statement("SELECT DISTINCT holder FROM asset_holds")
            var dead: [String] = []
            while try select.step() {
                let holder = select.text(0) ?? ""
                if !isHolderAlive(holder) { dead.append(holder) }
            }
            select.reset()
            let delete = try connection.statement("DELETE FROM asset_holds WHERE holder = ?")
            for holder in dead {
                delete.reset()
                try delete.bind([.text(holder)])
                try delete.step()
                collection.releasedHolds += connection.changes
            }
            return collection
        }
    }

    private func storedIdentifiers() -> Set<String> {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: contentDirectory.path)) ?? []
        return Set(names.filter(SHA256Hasher.Digest.isHexadecimal))
    }

    static func fileError<T>(_ what: String, _ body: () throws(POSIXFailure) -> T) throws -> T {
        do {
            return try body()
        } catch {
            throw error.storeError(what)
        }
    }
}

/// A descriptor handed to the sync threads of a commit: each is synced by one thread only,
/// while the commit waits for them all.
private struct UnsafeSendableFile: @unchecked Sendable {
    let file: FileDescriptor
}
