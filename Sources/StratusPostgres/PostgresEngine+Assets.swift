import Foundation
@_spi(StratusEngine) import Stratus
#if canImport(Glibc)
import Glibc
#endif

extension PostgresEngine {
    /// The asset content of a database: kept in the store (every machine reads it there) in
    /// `asset_contents` and `asset_chunks` (1 MiB rows), per database owner (row-level
    /// security applies), keyed by SHA-256; which records name it in `asset_refs`; holds in
    /// `asset_holds`. Readable files come from this machine's cache folder
    /// (``assetCacheDirectory``, private to its user), filled a chunk at a time.
    @_spi(StratusEngine)
    public func assetContents(for database: DatabaseContext) -> any AssetContentStore {
        PostgresAssetStore(engine: self, owner: database.storageOwner)
    }

    /// Bytes of content per `asset_chunks` row.
    static let assetChunkSize = 1 << 20

    /// Where this machine keeps a readable copy of content; `nil` for text that is no identifier.
    func cachedAssetURL(_ identifier: String) -> URL? {
        guard SHA256Hasher.Digest.isHexadecimal(identifier) else { return nil }
        return assetCacheDirectory.appendingPathComponent("sha256", isDirectory: true).appendingPathComponent(identifier)
    }

    /// Writes the content of the records' assets that this machine has not cached yet into the
    /// cache folder, a chunk at a time, so that their file URLs can be read.
    func materializeAssets(of records: [Record], owner: String) throws {
        var wanted: Set<String> = []
        for record in records { wanted.formUnion(FieldValue.assetContentIdentifiers(in: record.fieldValues)) }
        let store = PostgresAssetStore(engine: self, owner: owner)
        for identifier in try store.visibleContent(wanted) {
            do {
                _ = try store.fileOfVisibleContent(identifier)
            } catch var error as StratusError where error.code == .badDatabase {
                // The content's name alone does not tell the user which of the records read is
                // the damaged one (an export fails on it): name one that holds it.
                if let record = records.first(where: { FieldValue.assetContentIdentifiers(in: $0.fieldValues).contains(identifier) }) {
                    error.message += "; record '\(record.recordID.recordName)' in zone \(record.recordID.zoneID.zoneName) names it"
                }
                throw error
            }
        }
    }
}

/// ``AssetContentStore`` for one owner's content in a PostgreSQL store.
///
/// A collection locks `asset_holds` (`SHARE ROW EXCLUSIVE`) for its transaction, so that it
/// runs between holds, never beside one: a writer's hold either committed before (and the
/// collection keeps its content) or waits until the collection committed (and then finds
/// removed content gone, and stores it again).
final class PostgresAssetStore: AssetContentStore, Sendable {
    let engine: PostgresEngine
    let owner: String

    /// Holds of holders this machine cannot check are kept this long.
    static let foreignHoldLifetime: TimeInterval = 86_400

    init(engine: PostgresEngine, owner: String) {
        self.engine = engine
        self.owner = owner
    }

    var localDirectory: URL { engine.assetCacheDirectory }
    private var uploadDirectory: URL { engine.assetCacheDirectory.appendingPathComponent("uploads", isDirectory: true) }

    func beginUpload(holder: String) throws -> any AssetUpload {
        try LocalAssetUpload.create(in: uploadDirectory, holder: holder)
    }

    func hold(_ identifiers: Set<String>, holder: String) throws -> Set<String> {
        guard !identifiers.isEmpty else { return [] }
        let list = Array(identifiers)
        return try engine.writeTransaction { connection in
            try connection.execute("""
                INSERT INTO asset_holds(owner, content_id, holder, held_at) SELECT $1, c, $2, $3 FROM unnest($4::text[]) AS c
                ON CONFLICT (owner, content_id, holder) DO UPDATE SET held_at = excluded.held_at
                """, [.text(owner), .text(holder), .double(Date().timeIntervalSinceReferenceDate), .textArray(list)])
            return Set(try connection.query("SELECT content_id FROM asset_contents WHERE owner = $1 AND content_id = ANY($2) FOR SHARE",
                                            [.text(owner), .textArray(list)]).map { try $0.text(0) ?? "" })
        }
    }

    func commit(_ uploads: [(upload: any AssetUpload, identifier: String)]) throws {
        defer { for (upload, _) in uploads { upload.abandon() } }
        var seen: Set<String> = []
        for (upload, identifier) in uploads {
            guard let upload = upload as? LocalAssetUpload, let cached = engine.cachedAssetURL(identifier) else {
                throw StratusError(.internalError, "an asset upload was not made by this store")
            }
            guard seen.insert(identifier).inserted else { continue }
            try store(upload, as: identifier)
            // The upload is the content: it becomes this machine's cached copy.
            do throws(POSIXFailure) {
                try FileDescriptor.makePrivateDirectory(cached.deletingLastPathComponent())
                if fchmod(upload.file.raw, 0o400) != 0 { throw POSIXFailure(errno: errno, operation: "chmod") }
                upload.file.close()
                if rename(upload.url.path, cached.path) == 0 { upload.markCommitted() }
            } catch {
                // The store has the content; the cache fills again on the next read.
            }
        }
    }

    /// Copies an upload into the store in one transaction, a chunk at a time, unless the store
    /// has that content already.
    private func store(_ upload: LocalAssetUpload, as identifier: String) throws {
        try engine.writeTransaction { connection in
            // Writers of the same content take turns: the second finds the first's row, and adds
            // no chunk to stored content (row-level security refuses that to members).
            try connection.execute("SELECT pg_advisory_xact_lock(hashtextextended($1 || '/' || $2, 7417))", [.text(owner), .text(identifier)])
            if try !connection.query("SELECT 1 FROM asset_contents WHERE owner = $1 AND content_id = $2", [.text(owner), .text(identifier)]).isEmpty { return }
            let file: FileDescriptor
            do throws(POSIXFailure) {
                file = try FileDescriptor.open(upload.url.path, O_RDONLY | O_NOFOLLOW)
            } catch {
                throw error.storeError("read the asset upload \(upload.url.path)")
            }
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: PostgresEngine.assetChunkSize, alignment: 16)
            defer { buffer.deallocate() }
            var chunk: Int64 = 0
            var size: Int64 = 0
            while true {
                var filled = 0
                while filled < buffer.count {
                    let count: Int
                    do throws(POSIXFailure) { count = try file.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[filled...])) } catch {
                        throw error.storeError("read the asset upload \(upload.url.path)")
                    }
                    if count == 0 { break }
                    filled += count
                }
                if filled == 0 && chunk > 0 { break }
                try connection.execute("INSERT INTO asset_chunks(owner, content_id, chunk, data) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                                       [.text(owner), .text(identifier), .int64(chunk), .bytea(Data(bytes: buffer.baseAddress!, count: filled))])
                chunk += 1
                size += Int64(filled)
                if filled < buffer.count { break }
            }
            try connection.execute("INSERT INTO asset_contents(owner, content_id, size, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                                   [.text(owner), .text(identifier), .int64(size), .double(Date().timeIntervalSinceReferenceDate)])
        }
    }

    func contentURL(_ identifier: String) -> URL? { engine.cachedAssetURL(identifier) }

    func visibleContent(_ identifiers: Set<String>) throws -> Set<String> {
        guard !identifiers.isEmpty else { return [] }
        return try engine.pool.withConnection { connection in
            Set(try connection.query("SELECT content_id FROM asset_contents WHERE owner = $1 AND content_id = ANY($2::text[])",
                                     [.text(owner), .textArray(Array(identifiers))]).map { try $0.text(0) ?? "" })
        }
    }

    func contentFile(_ identifier: String) throws -> URL? {
        // The cache is the machine's, filled by every role: it answers only content the
        // database holds for this owner, as row-level security lets this role see it.
        guard try !visibleContent([identifier]).isEmpty else { return nil }
        return try fileOfVisibleContent(identifier)
    }

    /// ``contentFile(_:)`` of content known to be this owner's: from the cache, else read
    /// from the database into it.
    func fileOfVisibleContent(_ identifier: String) throws -> URL? {
        guard let cached = engine.cachedAssetURL(identifier) else { return nil }
        if access(cached.path, F_OK) == 0 { return cached }
        return try engine.pool.withConnection { connection -> URL? in
            guard let size = try connection.query("SELECT size FROM asset_contents WHERE owner = $1 AND content_id = $2", [.text(owner), .text(identifier)]).first?.int64(0) else { return nil }
            let upload = try LocalAssetUpload.create(in: uploadDirectory, holder: "cache.\(getpid())")
            defer { upload.abandon() }
            // The content's name is its SHA-256: bytes that do not hash to it (chunks lost, added
            // or changed by raw SQL) are not cached and handed out as the asset.
            var hasher = SHA256Hasher()
            var read: Int64 = 0
            var chunk: Int64 = 0
            while read < size || chunk == 0 {
                guard let data = try connection.query("SELECT data FROM asset_chunks WHERE owner = $1 AND content_id = $2 AND chunk = $3",
                                                      [.text(owner), .text(identifier), .int64(chunk)]).first?.bytes(0) else { break }
                try data.withUnsafeBytes { bytes in
                    hasher.update(bytes)
                    try upload.write(bytes)
                }
                read += Int64(data.count)
                chunk += 1
                if data.isEmpty { break }
            }
            let extra = try connection.query("SELECT count(*) FROM asset_chunks WHERE owner = $1 AND content_id = $2 AND chunk >= $3",
                                             [.text(owner), .text(identifier), .int64(chunk)]).first?.int64(0) ?? 0
            guard read == size, extra == 0, hasher.finalize().hexadecimal == identifier else {
                let found = read == size && extra == 0 ? "its \(size) bytes do not hash to the SHA-256 that names it"
                    : "its chunks hold \(read) bytes\(extra > 0 ? " and \(extra) more chunk(s)" : "") where it has \(size)"
                throw StratusError(.badDatabase, "the asset content \(identifier) in the store's asset_chunks is damaged: \(found); restore the content from a backup (stratus check names every damaged content)")
            }
            do throws(POSIXFailure) {
                try FileDescriptor.makePrivateDirectory(cached.deletingLastPathComponent())
                if fchmod(upload.file.raw, 0o400) != 0 { throw POSIXFailure(errno: errno, operation: "chmod") }
                upload.file.close()
                if rename(upload.url.path, cached.path) != 0 { throw POSIXFailure(errno: errno, operation: "rename") }
                upload.markCommitted()
            } catch {
                throw error.storeError("cache the asset content \(identifier)")
            }
            return cached
        }
    }

    func collect(releasing holder: String?, candidates: Set<String>?, isHolderAlive: (String) -> Bool) throws -> AssetCollection {
        var collection = AssetCollection()
        let removed = try engine.writeTransaction { connection -> [String] in
            try connection.execute("LOCK TABLE asset_holds IN SHARE ROW EXCLUSIVE MODE")
            var pending = candidates ?? []
            if let holder {
                pending.formUnion(try connection.query("DELETE FROM asset_holds WHERE owner = $1 AND holder = $2 RETURNING content_id", [.text(owner), .text(holder)])
                    .map { try $0.text(0) ?? "" })
            }
            if candidates == nil {
                // References of zones that are gone (a development reset before it cleared them)
                // would keep their content for good.
                try connection.execute("DELETE FROM asset_refs r WHERE r.owner = $1 AND NOT EXISTS (SELECT 1 FROM zones z WHERE z.zone_id = r.zone_id)", [.text(owner)])
                pending.formUnion(try connection.query("SELECT content_id FROM asset_contents WHERE owner = $1", [.text(owner)]).map { try $0.text(0) ?? "" })
            }
            let list = Array(pending)
            guard !list.isEmpty else { return [] }
            // Holds of holders that are gone (or of other machines, after a day) no longer keep content.
            let cutoff = Date().timeIntervalSinceReferenceDate - Self.foreignHoldLifetime
            for row in try connection.query("SELECT holder, min(held_at) FROM asset_holds WHERE owner = $1 AND content_id = ANY($2) GROUP BY holder",
                                            [.text(owner), .textArray(list)]) {
                let name = try row.text(0) ?? ""
                let heldAt = try row.double(1) ?? 0
                if !isHolderAlive(name) || heldAt < cutoff {
                    collection.releasedHolds += try connection.execute("DELETE FROM asset_holds WHERE owner = $1 AND holder = $2", [.text(owner), .text(name)])
                }
            }
            let gone = try connection.query("""
                DELETE FROM asset_contents c WHERE c.owner = $1 AND c.content_id = ANY($2)
                    AND NOT EXISTS (SELECT 1 FROM asset_refs r WHERE r.owner = c.owner AND r.content_id = c.content_id)
                    AND NOT EXISTS (SELECT 1 FROM asset_holds h WHERE h.owner = c.owner AND h.content_id = c.content_id)
                RETURNING c.content_id, c.size
                """, [.text(owner), .textArray(list)])
            var removed: [String] = []
            for row in gone {
                removed.append(try row.text(0) ?? "")
                collection.removedBytes += try row.int64(1) ?? 0
            }
            if !removed.isEmpty {
                try connection.execute("DELETE FROM asset_chunks WHERE owner = $1 AND content_id = ANY($2)", [.text(owner), .textArray(removed)])
            }
            return removed
        }
        collection.removedContents = removed.count
        for identifier in removed { if let cached = engine.cachedAssetURL(identifier) { unlink(cached.path) } }
        if candidates == nil {
            collection.removedUploads += LocalAssetUpload.removeAbandoned(in: uploadDirectory, isHolderAlive: isHolderAlive)
        }
        return collection
    }

    func inventory() throws -> (identifiers: Set<String>, bytes: Int64) {
        try engine.readTransaction(mayLag: false) { connection in
            var identifiers: Set<String> = []
            var bytes: Int64 = 0
            for row in try connection.query("SELECT content_id, size FROM asset_contents WHERE owner = $1", [.text(owner)]) {
                identifiers.insert(try row.text(0) ?? "")
                bytes += try row.int64(1) ?? 0
            }
            return (identifiers, bytes)
        }
    }
}
