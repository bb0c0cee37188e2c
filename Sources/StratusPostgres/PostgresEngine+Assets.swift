import Foundation
@_spi(StratusEngine) import Stratus

extension PostgresEngine {
    /// Copies the contents of the assets in `fields` into the database (every machine reads
    /// them there), in the write's transaction, and answers the fields with assets that name
    /// their stored copies. A missing source file fails the item with `assetFileNotFound`.
    func storeAssets(in fields: [String: FieldValue], of id: Record.ID, owner: String, on connection: PostgresConnection) throws -> Result<[String: FieldValue], StratusError> {
        var stored = fields
        for (key, value) in fields {
            switch value {
            case .asset(let asset):
                switch try store(asset, key: key, recordID: id, owner: owner, on: connection) {
                case .success(let copy): stored[key] = .asset(copy)
                case .failure(let error): return .failure(error)
                }
            case .assetList(let assets):
                var copies: [Asset] = []
                for asset in assets {
                    switch try store(asset, key: key, recordID: id, owner: owner, on: connection) {
                    case .success(let copy): copies.append(copy)
                    case .failure(let error): return .failure(error)
                    }
                }
                stored[key] = .assetList(copies)
            default: continue
            }
        }
        return .success(stored)
    }

    private func store(_ asset: Asset, key: String, recordID: Record.ID, owner: String, on connection: PostgresConnection) throws -> Result<Asset, StratusError> {
        if let identifier = asset.storedIdentifier,
           let size = try connection.query("SELECT size FROM assets WHERE asset_id = $1", [.text(identifier)]).first?.int64(0) {
            return .success(Asset(storedIdentifier: identifier, size: size, fileURL: assetCacheDirectory.appendingPathComponent(identifier)))
        }
        guard let source = asset.fileURL, let content = FileManager.default.contents(atPath: source.path) else {
            return .failure(StratusError(.assetFileNotFound, "record '\(recordID.recordName)': the file of asset field '\(key)' (\(asset.fileURL?.path ?? "no path")) does not exist or cannot be read", recordID: recordID))
        }
        let identifier = UUID().uuidString.lowercased()
        try connection.execute("INSERT INTO assets(asset_id, owner, size, content) VALUES ($1, $2, $3, $4)",
                               [.text(identifier), .text(owner), .int64(Int64(content.count)), .bytea(content)])
        // The saved record's asset is read from this machine's cache, like a fetched one's.
        try cache(content, as: identifier)
        return .success(Asset(storedIdentifier: identifier, size: Int64(content.count), fileURL: assetCacheDirectory.appendingPathComponent(identifier)))
    }

    /// Writes the contents of the records' assets that this machine has not cached yet into
    /// the cache folder (readable by this user only), so that their file URLs can be read.
    func materializeAssets(of records: [Record]) throws {
        var wanted: Set<String> = []
        for record in records {
            for value in record.fieldValues.values {
                switch value {
                case .asset(let asset): if let id = asset.storedIdentifier { wanted.insert(id) }
                case .assetList(let assets): for asset in assets { if let id = asset.storedIdentifier { wanted.insert(id) } }
                default: continue
                }
            }
        }
        let missing = wanted.filter { !FileManager.default.fileExists(atPath: assetCacheDirectory.appendingPathComponent($0).path) }
        guard !missing.isEmpty else { return }
        try pool.withConnection { connection in
            for row in try connection.query("SELECT asset_id, content FROM assets WHERE asset_id = ANY($1)", [.textArray(Array(missing))]) {
                guard let id = try row.text(0), let content = try row.bytes(1) else { continue }
                try cache(content, as: id)
            }
        }
    }

    /// Writes an asset's content into the cache folder, readable by this user only; the
    /// rename makes the file appear whole or not at all.
    private func cache(_ content: Data, as identifier: String) throws {
        let files = FileManager.default
        let destination = assetCacheDirectory.appendingPathComponent(identifier)
        guard !files.fileExists(atPath: destination.path) else { return }
        try files.createDirectory(at: assetCacheDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let temporary = assetCacheDirectory.appendingPathComponent(".\(identifier).partial-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        guard files.createFile(atPath: temporary.path, contents: content, attributes: [.posixPermissions: 0o600]) else {
            throw StratusError(.internalError, "cannot write an asset into the cache folder \(assetCacheDirectory.path)")
        }
        if rename(temporary.path, destination.path) != 0 { try? files.removeItem(at: temporary) }
    }
}
