import Foundation
@_spi(StratusEngine) import Stratus
#if canImport(Glibc)
import Glibc
#endif

extension SQLiteEngine {
    /// The asset step of the upgrade (``SQLiteSchema/assetTables``), inside the upgrade's
    /// transaction: stores before it kept each saved asset as a file named by a UUID in
    /// `<store>.assets/`, one copy per save. Each such file is hashed and moved to
    /// `sha256/<hex>` (copies with the same content become one), the documents naming it are
    /// rewritten to name the content, `asset_refs` is filled, and files no record names go.
    func upgradeAssetStore(on connection: SQLiteConnection) throws {
        let legacyDirectory = assetsDirectory
        var moved: [String: (identifier: String, size: Int64)] = [:]
        let select = try connection.uncachedStatement("""
            SELECT change_key, zone_id, fields FROM records
            WHERE change_key > ? AND (instr(fields, '["A",') > 0 OR instr(fields, '["AL",') > 0)
            ORDER BY change_key LIMIT 500
            """)
        let update = try connection.uncachedStatement("UPDATE records SET fields = ? WHERE change_key = ?")
        let reference = try connection.uncachedStatement("INSERT OR IGNORE INTO asset_refs(content_id, zone_id, record_name) SELECT ?, zone_id, record_name FROM records WHERE change_key = ?")
        var after = Int64.min
        while true {
            select.reset()
            try select.bind([.integer(after)])
            var rows: [(key: Int64, document: FieldDocument.Decoded)] = []
            while try select.step() {
                rows.append((select.int64(0), try FieldDocument.decodeStoredDocument(select.text(2) ?? "{}", zoneID: .default) { _ in nil }))
            }
            guard let last = rows.last else { break }
            after = last.key
            for (key, document) in rows {
                var fields = document.fields
                var identifiers: Set<String> = []
                func upgraded(_ asset: Asset) throws -> Asset {
                    guard let legacy = asset.storedIdentifier, !SHA256Hasher.Digest.isHexadecimal(legacy) else {
                        if let identifier = asset.storedIdentifier { identifiers.insert(identifier) }
                        return asset
                    }
                    if moved[legacy] == nil, let content = try Self.moveLegacyAsset(legacyDirectory.appendingPathComponent(legacy), into: self) {
                        moved[legacy] = content
                    }
                    // A file an older store lost stays named as it was: its record reads, its content is not available.
                    guard let content = moved[legacy] else { return asset }
                    identifiers.insert(content.identifier)
                    return asset.withContent(identifier: content.identifier, size: content.size, fileURL: nil)
                }
                for (name, value) in document.fields {
                    switch value {
                    case .asset(let asset): fields[name] = .asset(try upgraded(asset))
                    case .assetList(let assets): fields[name] = .assetList(try assets.map(upgraded))
                    default: continue
                    }
                }
                update.reset()
                try update.bind([.text(FieldDocument.encode(fields, encryptedKeys: document.encryptedKeys, jsonExtras: document.jsonExtras)), .integer(key)])
                try update.step()
                for identifier in identifiers {
                    reference.reset()
                    try reference.bind([.text(identifier), .integer(key)])
                    try reference.step()
                }
            }
        }
        // Copies no record names (of deleted records, failed saves) and unfinished copies.
        for name in (try? FileManager.default.contentsOfDirectory(atPath: legacyDirectory.path)) ?? [] where Self.isLegacyAssetName(name) {
            unlink(legacyDirectory.appendingPathComponent(name).path)
        }
        if !moved.isEmpty { try? FileDescriptor.syncDirectory(legacyDirectory.appendingPathComponent("sha256")) }
    }

    /// Hashes a file of an older store and moves it to its content name; `nil` when it is gone.
    private static func moveLegacyAsset(_ url: URL, into engine: SQLiteEngine) throws -> (identifier: String, size: Int64)? {
        do throws(POSIXFailure) {
            let file = try FileDescriptor.open(url.path, O_RDONLY | O_NOFOLLOW)
            var hasher = SHA256Hasher()
            var size: Int64 = 0
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
            defer { buffer.deallocate() }
            while true {
                let count = try file.read(into: buffer)
                if count == 0 { break }
                hasher.update(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
                size += Int64(count)
            }
            let identifier = hasher.finalize().hexadecimal
            guard let destination = engine.assetContentURL(identifier) else { return nil }
            try FileDescriptor.makePrivateDirectory(destination.deletingLastPathComponent())
            if access(destination.path, F_OK) == 0 {
                unlink(url.path)
            } else {
                try file.sync()
                if fchmod(file.raw, 0o400) != 0 { throw POSIXFailure(errno: errno, operation: "chmod") }
                if rename(url.path, destination.path) != 0 { throw POSIXFailure(errno: errno, operation: "rename") }
            }
            return (identifier, size)
        } catch let failure where failure.errno == ENOENT {
            return nil
        } catch {
            throw StratusError(.internalError, "cannot upgrade the asset file \(url.path): \(error.reason)")
        }
    }

    /// Names older stores gave asset files: lowercase UUIDs, and `.<uuid>.partial` while copying.
    static func isLegacyAssetName(_ name: String) -> Bool {
        var core = Substring(name)
        if core.hasPrefix(".") && core.hasSuffix(".partial") { core = core.dropFirst().dropLast(".partial".count) }
        return core.utf8.count == 36 && core.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) || $0 == UInt8(ascii: "-") }
    }
}
