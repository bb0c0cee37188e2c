import Foundation
@_spi(StratusEngine) import Stratus

extension SQLiteEngine {
    /// Copies the bytes of every asset in `fields` into the store's asset folder, and answers
    /// the fields with assets that point there. Assets already in the store are kept. A
    /// missing source file fails the item with `assetFileNotFound`; a failure to write into
    /// the store is thrown.
    func storeAssets(in fields: [String: FieldValue], of id: Record.ID) throws -> Result<[String: FieldValue], StratusError> {
        var stored = fields
        for (key, value) in fields {
            switch value {
            case .asset(let asset):
                switch try store(asset, key: key, recordID: id) {
                case .success(let copy): stored[key] = .asset(copy)
                case .failure(let error): return .failure(error)
                }
            case .assetList(let assets):
                var copies: [Asset] = []
                for asset in assets {
                    switch try store(asset, key: key, recordID: id) {
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

    private func store(_ asset: Asset, key: String, recordID: Record.ID) throws -> Result<Asset, StratusError> {
        let files = FileManager.default
        if let identifier = asset.storedIdentifier, Self.isAssetIdentifier(identifier) {
            let url = assetsDirectory.appendingPathComponent(identifier)
            if files.fileExists(atPath: url.path) {
                return .success(Asset(storedIdentifier: identifier, size: asset.size ?? Self.size(of: url), fileURL: url))
            }
        }
        guard let source = asset.fileURL, files.isReadableFile(atPath: source.path) else {
            return .failure(StratusError(.assetFileNotFound, "record '\(recordID.recordName)': the file of asset field '\(key)' (\(asset.fileURL?.path ?? "no path")) does not exist or cannot be read", recordID: recordID))
        }
        let identifier = UUID().uuidString.lowercased()
        let destination = assetsDirectory.appendingPathComponent(identifier)
        let temporary = assetsDirectory.appendingPathComponent(".\(identifier).partial")
        do {
            try files.createDirectory(at: assetsDirectory, withIntermediateDirectories: true)
            try files.copyItem(at: source, to: temporary)
            try files.setAttributes([.posixPermissions: 0o444], ofItemAtPath: temporary.path)
            // The rename makes the asset appear whole or not at all, also after a crash.
            try files.moveItem(at: temporary, to: destination)
        } catch {
            try? files.removeItem(at: temporary)
            throw StratusError(.internalError, "cannot copy an asset into the store's folder \(assetsDirectory.path): \(error.localizedDescription)")
        }
        return .success(Asset(storedIdentifier: identifier, size: Self.size(of: destination), fileURL: destination))
    }

    private static func size(of url: URL) -> Int64 {
        ((try? FileManager.default.attributesOfItem(atPath: url.path))?[.size] as? NSNumber)?.int64Value ?? 0
    }

    /// Stored identifiers are lowercase UUIDs; anything else never names a file in the store.
    static func isAssetIdentifier(_ text: String) -> Bool {
        text.utf8.count == 36 && text.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) || $0 == UInt8(ascii: "-") }
    }
}
