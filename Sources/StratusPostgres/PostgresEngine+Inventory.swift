import Foundation
@_spi(StratusEngine) import Stratus

extension PostgresEngine {
    @_spi(StratusEngine)
    public func inventory() throws -> StoreInventory {
        try readTransaction(mayLag: false) { connection in
            var counts: [Int64: [String: Int]] = [:]
            for row in try connection.query("SELECT zone_id, record_type, count(*) FROM records GROUP BY zone_id, record_type") {
                counts[try row.int64(0) ?? 0, default: [:]][try row.text(1) ?? ""] = Int(try row.int64(2) ?? 0)
            }
            var databases = StoreInventory.DatabaseList()
            for row in try connection.query("""
                SELECT container, db, owner, zone_name, zone_owner, capabilities, zone_id FROM zones ORDER BY container, db, owner, zone_name, zone_owner
                """) {
                let zone = RecordZone(zoneID: Self.zoneID(name: try row.text(3) ?? "", owner: try row.text(4) ?? ""),
                                      capabilities: RecordZone.Capabilities(rawValue: UInt(truncatingIfNeeded: try row.int64(5) ?? 0)))
                databases.add(storageContainer: try row.text(0) ?? "", scope: Database.Scope(rawValue: Int(try row.int64(1) ?? 1)) ?? .public, owner: try row.text(2) ?? "",
                              zone: StoreInventory.ZoneEntry(zone: zone, recordCounts: counts[try row.int64(6) ?? 0] ?? [:]))
            }
            // Databases that hold only subscriptions.
            for row in try connection.query("SELECT DISTINCT container, db, owner FROM subscriptions ORDER BY container, db, owner") {
                databases.add(storageContainer: try row.text(0) ?? "", scope: Database.Scope(rawValue: Int(try row.int64(1) ?? 1)) ?? .public, owner: try row.text(2) ?? "")
            }
            let containers = try connection.query("SELECT container FROM record_types UNION SELECT container FROM schema_roles ORDER BY 1").map { try $0.text(0) ?? "" }
            let size = try connection.query("""
                SELECT sum(pg_total_relation_size(c.oid))::int8 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'S')
                """).first?.int64(0)
            return StoreInventory(databases: databases.entries, schemaStorageContainers: containers, sizeInBytes: size, schemaVersion: PostgresSchema.version)
        }
    }

    /// PostgreSQL keeps its own pages consistent; this checks that the store's tables are the
    /// ones this version made, that every record belongs to a zone that exists, that every
    /// record's field document decodes (a raw `UPDATE` can write any JSON there, which reads then
    /// refuse), and that the content of every asset a record names is there, of its size, and
    /// hashes to the SHA-256 that names it. It reads every record and every such content, in
    /// one snapshot, a thousand at a time; with row-level security, those the role may read.
    @_spi(StratusEngine)
    public func checkIntegrity() throws -> [String] {
        try readTransaction(mayLag: false) { connection in
            var problems: [String] = []
            let version = try connection.query("SELECT value FROM meta WHERE key = 'version'").first?.text(0)
            if version != String(PostgresSchema.version) { problems.append("the store's tables have version \(version ?? "none"), not \(PostgresSchema.version)") }
            let orphans = try connection.query("SELECT count(*) FROM records r WHERE NOT EXISTS (SELECT 1 FROM zones z WHERE z.zone_id = r.zone_id)").first?.int64(0) ?? 0
            if orphans > 0 { problems.append("\(orphans) record(s) belong to no zone") }
            problems += try damagedDocuments(on: connection)
            problems += try missingAssetContents(on: connection)
            problems += try changedAssetContents(on: connection)
            return problems
        }
    }

    /// A line for each asset content that records name but `asset_contents` lacks, or whose
    /// chunks do not add up to its size (content and chunks are written in one transaction, so
    /// either is damage, such as a raw `DELETE`).
    private func missingAssetContents(on connection: PostgresConnection) throws -> [String] {
        let missing = try connection.query("""
            SELECT DISTINCT ON (a.owner, a.content_id) a.content_id, count(*) OVER (PARTITION BY a.owner, a.content_id),
                   a.record_name, z.zone_name, z.container, z.db, z.owner
            FROM asset_refs a LEFT JOIN zones z ON z.zone_id = a.zone_id
            WHERE NOT EXISTS (SELECT 1 FROM asset_contents c WHERE c.owner = a.owner AND c.content_id = a.content_id)
            ORDER BY a.owner, a.content_id, a.zone_id, a.record_name
            """)
        var problems: [String] = []
        for row in missing.prefix(IntegrityProblem.namedPerKind) {
            let place = IntegrityProblem.place(zoneName: try row.text(3), storageContainer: try row.text(4), scope: try row.int64(5), owner: try row.text(6))
            problems.append(IntegrityProblem.missingAssetContent(try row.text(0) ?? "?", recordName: try row.text(2) ?? "?", place: place,
                                                                 otherRecords: Int(try row.int64(1) ?? 1) - 1, where: "the store's asset_contents"))
        }
        if missing.count > IntegrityProblem.namedPerKind { problems.append("\(missing.count - IntegrityProblem.namedPerKind) more missing asset content(s)") }
        let short = try connection.query("""
            SELECT c.content_id, c.size, coalesce(sum(octet_length(k.data)), 0)
            FROM asset_contents c LEFT JOIN asset_chunks k ON k.owner = c.owner AND k.content_id = c.content_id
            GROUP BY c.owner, c.content_id, c.size HAVING c.size <> coalesce(sum(octet_length(k.data)), 0)
            ORDER BY c.content_id
            """)
        for row in short.prefix(IntegrityProblem.namedPerKind) {
            problems.append("asset content \(try row.text(0) ?? "?") holds \(try row.int64(2) ?? 0) of its \(try row.int64(1) ?? 0) bytes in asset_chunks")
        }
        if short.count > IntegrityProblem.namedPerKind { problems.append("\(short.count - IntegrityProblem.namedPerKind) more incomplete asset content(s)") }
        return problems
    }

    /// A line for each asset content that records name whose chunks add up to its size but do
    /// not hash to the SHA-256 that names it (a raw `UPDATE` of `asset_chunks`), with the first
    /// record, by zone and name, that names it. Contents are read a thousand at a time and
    /// their chunks a few at a time, so that a check holds a few MiB whatever the assets' sizes.
    private func changedAssetContents(on connection: PostgresConnection) throws -> [String] {
        let chunksPerRead = 4
        var problems: [String] = []
        var changed = 0
        var after = (owner: "", content: "")
        while true {
            let contents = try connection.query("""
                SELECT c.owner, c.content_id, c.size, f.record_name, z.zone_name, z.container, z.db, z.owner
                FROM asset_contents c
                CROSS JOIN LATERAL (SELECT a.record_name, a.zone_id FROM asset_refs a WHERE a.owner = c.owner AND a.content_id = c.content_id
                                    ORDER BY a.zone_id, a.record_name LIMIT 1) f
                LEFT JOIN zones z ON z.zone_id = f.zone_id
                WHERE (c.owner, c.content_id) > ($1, $2) ORDER BY c.owner, c.content_id LIMIT 1000
                """, [.text(after.owner), .text(after.content)])
            for content in contents {
                let owner = try content.text(0) ?? "", identifier = try content.text(1) ?? ""
                var hasher = SHA256Hasher()
                var read: Int64 = 0
                var next: Int64 = 0
                while true {
                    let chunks = try connection.query("SELECT chunk, data FROM asset_chunks WHERE owner = $1 AND content_id = $2 AND chunk >= $3 ORDER BY chunk LIMIT \(chunksPerRead)",
                                                      [.text(owner), .text(identifier), .int64(next)])
                    for chunk in chunks {
                        if let (_, bytes) = chunk.raw(1) {
                            hasher.update(bytes)
                            read += Int64(bytes.count)
                        }
                        next = (try chunk.int64(0) ?? next) + 1
                    }
                    if chunks.count < chunksPerRead { break }
                }
                // Chunks that do not add up to the size are named by missingAssetContents.
                guard read == (try content.int64(2) ?? -1) else { continue }
                let found = hasher.finalize().hexadecimal
                guard found != identifier else { continue }
                changed += 1
                guard changed <= IntegrityProblem.namedPerKind else { continue }
                let place = IntegrityProblem.place(zoneName: try content.text(4), storageContainer: try content.text(5), scope: try content.int64(6), owner: try content.text(7))
                problems.append(IntegrityProblem.changedAssetContent(identifier, found: found, recordName: try content.text(3) ?? "?", place: place, where: "the store's asset_chunks"))
            }
            guard contents.count == 1000, let last = contents.last else { break }
            after = (try last.text(0) ?? "", try last.text(1) ?? "")
        }
        if let more = IntegrityProblem.moreChangedAssetContents(changed) { problems.append(more) }
        return problems
    }

    /// A line for each record whose document does not decode: its name, its zone and why.
    private func damagedDocuments(on connection: PostgresConnection) throws -> [String] {
        var problems: [String] = []
        var damaged = 0
        var after: (zone: Int64, name: String) = (Int64.min, "")
        while true {
            let rows = try connection.query("""
                SELECT r.zone_id, r.record_name, z.container, z.db, z.owner, z.zone_name, coalesce(r.exact_fields, r.fields::text)
                FROM records r LEFT JOIN zones z ON z.zone_id = r.zone_id
                WHERE (r.zone_id, r.record_name) > ($1, $2) ORDER BY r.zone_id, r.record_name LIMIT 1000
                """, [.int64(after.zone), .text(after.name)])
            for row in rows {
                let name = try row.text(1) ?? ""
                do {
                    _ = try row.withBytes(6) { document -> FieldDocument.Decoded? in
                        guard let document else { throw StratusError(.badDatabase, "it has no document") }
                        return try FieldDocument.decodeStoredDocument(utf8: document, zoneID: .default) { _ in nil }
                    }
                } catch {
                    damaged += 1
                    guard damaged <= IntegrityProblem.namedPerKind else { continue }
                    let place = IntegrityProblem.place(zoneName: try row.text(5), storageContainer: try row.text(2), scope: try row.int64(3), owner: try row.text(4))
                    let reason = (error as? StratusError)?.message ?? "\(error)"
                    problems.append(IntegrityProblem.undecodableDocument(recordName: name, place: place, reason: reason))
                }
            }
            guard rows.count == 1000, let last = rows.last else { break }
            after = (try last.int64(0) ?? 0, try last.text(1) ?? "")
        }
        if let more = IntegrityProblem.moreUndecodableDocuments(damaged) { problems.append(more) }
        return problems
    }
}

@_spi(StratusEngine)
extension PostgresEngine: RowAccessReporting {
    /// A role that row-level security binds (it does not own the tables, is no superuser and
    /// has no BYPASSRLS, and a table of the store has row-level security on, or forced on for
    /// its owner) reaches only the public database and its own private rows.
    @_spi(StratusEngine)
    public func rowAccessLimit() throws -> String? {
        try pool.withConnection { connection in
            let rows = try connection.query("""
                SELECT r.rolsuper OR r.rolbypassrls, pg_catalog.pg_has_role(CURRENT_USER, c.relowner, 'USAGE'),
                       EXISTS (SELECT 1 FROM pg_catalog.pg_class t WHERE t.relnamespace = c.relnamespace AND t.relrowsecurity),
                       EXISTS (SELECT 1 FROM pg_catalog.pg_class t WHERE t.relnamespace = c.relnamespace AND t.relforcerowsecurity),
                       pg_catalog.pg_get_userbyid(c.relowner)::text, CURRENT_USER::text
                FROM pg_catalog.pg_class c, pg_catalog.pg_roles r WHERE c.oid = to_regclass('records') AND r.rolname = CURRENT_USER
                """)
            guard let row = rows.first else { return nil }
            let exempt = try row.bool(0) ?? false, owns = try row.bool(1) ?? false
            let enabled = try row.bool(2) ?? false, forced = try row.bool(3) ?? false
            guard !exempt, enabled, !owns || forced else { return nil }
            let owner = try row.text(4) ?? "the tables' owner", role = try row.text(5) ?? ""
            return "role \(role) is bound by row-level security in \(redactedURL) and reaches only the public database and its own private rows; "
                + "connect as a role that reaches every row: the tables' owner (\(owner))\(forced ? ", unless row-level security is forced on it" : ""), a superuser or a role with BYPASSRLS"
        }
    }
}
