import Foundation
@_spi(StratusEngine) import Stratus

extension PostgresEngine {
    /// The asset step of the upgrade (``PostgresSchema/assetStoreVersion``), inside the
    /// migration's transaction: version 1 kept each saved asset as one `assets` row named by a
    /// UUID. Each becomes content named by its SHA-256 (copies with the same content become
    /// one, per owner) in `asset_contents` and `asset_chunks`; the documents naming it are
    /// rewritten and `asset_refs` filled; then `assets` goes.
    static func upgradeAssetStore(on connection: PostgresConnection) throws {
        guard try connection.query("SELECT to_regclass('assets') IS NOT NULL")[0].bool(0) == true else { return }
        let now = Date().timeIntervalSinceReferenceDate
        let chunk = PostgresEngine.assetChunkSize
        try connection.execute("""
            INSERT INTO asset_contents(owner, content_id, size, created_at)
            SELECT owner, encode(sha256(content), 'hex'), max(length(content)), $1 FROM assets GROUP BY owner, encode(sha256(content), 'hex')
            ON CONFLICT DO NOTHING
            """, [.double(now)])
        try connection.execute("""
            INSERT INTO asset_chunks(owner, content_id, chunk, data)
            SELECT DISTINCT ON (owner, encode(sha256(content), 'hex'), g) owner, encode(sha256(content), 'hex'), g, substring(content FROM g * \(chunk) + 1 FOR \(chunk))
            FROM assets, generate_series(0, greatest((length(content) - 1) / \(chunk), 0)) AS g
            ON CONFLICT DO NOTHING
            """)
        var identifiers: [String: String] = [:]
        for row in try connection.query("SELECT asset_id, encode(sha256(content), 'hex') FROM assets") {
            identifiers[try row.text(0) ?? ""] = try row.text(1) ?? ""
        }
        var after: (zone: Int64, name: String) = (Int64.min, "")
        while true {
            let rows = try connection.query("""
                SELECT zone_id, record_name, owner, coalesce(exact_fields, fields::text) FROM records
                WHERE (zone_id, record_name) > ($1, $2) AND jsonb_path_exists(fields, '$.* ? (@[0] == "A" || @[0] == "AL")')
                ORDER BY zone_id, record_name LIMIT 500
                """, [.int64(after.zone), .text(after.name)])
            guard !rows.isEmpty else { break }
            for row in rows {
                let zoneRow = try row.int64(0) ?? 0
                let name = try row.text(1) ?? ""
                let owner = try row.text(2) ?? ""
                after = (zoneRow, name)
                let document = try FieldDocument.decodeStoredDocument(try row.text(3) ?? "{}", zoneID: .default) { _ in nil }
                var fields = document.fields
                var named: Set<String> = []
                func upgraded(_ asset: Asset) -> Asset {
                    guard let legacy = asset.storedIdentifier else { return asset }
                    guard let identifier = identifiers[legacy] else {
                        if SHA256Hasher.Digest.isHexadecimal(legacy) { named.insert(legacy) }
                        return asset
                    }
                    named.insert(identifier)
                    return asset.withContent(identifier: identifier, size: asset.size ?? 0, fileURL: nil)
                }
                for (key, value) in document.fields {
                    switch value {
                    case .asset(let asset): fields[key] = .asset(upgraded(asset))
                    case .assetList(let assets): fields[key] = .assetList(assets.map(upgraded))
                    default: continue
                    }
                }
                let bytes = FieldDocument.encodedBytes(fields, encryptedKeys: document.encryptedKeys, jsonExtras: document.jsonExtras)
                let stored = RecordRow(recordID: Record.ID(recordName: name), recordType: "", systemFields: Record.SystemFields(), fields: fields,
                                       encryptedKeys: document.encryptedKeys, parent: nil, document: bytes, jsonExtras: document.jsonExtras)
                let (queryable, exact) = PostgresWriteTransaction.documents(of: stored)
                try connection.execute("UPDATE records SET fields = $1::jsonb, exact_fields = $2 WHERE zone_id = $3 AND record_name = $4",
                                       [.text(queryable), exact.map(PostgresValue.text) ?? .null, .int64(zoneRow), .text(name)])
                if !named.isEmpty {
                    try connection.execute("""
                        INSERT INTO asset_refs(zone_id, record_name, content_id, owner) SELECT $1, $2, c, $3 FROM unnest($4::text[]) AS c ON CONFLICT DO NOTHING
                        """, [.int64(zoneRow), .text(name), .text(owner), .textArray(Array(named))])
                }
            }
        }
        try connection.execute("DROP TABLE assets")
    }
}
