import Foundation
@_spi(StratusEngine) import Stratus

extension SQLiteEngine {
    @_spi(StratusEngine)
    public func inventory() throws -> StoreInventory {
        try readTransaction { connection in
            var counts: [Int64: [String: Int]] = [:]
            let byType = try connection.statement("SELECT zone_id, record_type, count(*) FROM records GROUP BY zone_id, record_type")
            while try byType.step() { counts[byType.int64(0), default: [:]][byType.text(1) ?? ""] = Int(byType.int64(2)) }
            var databases = StoreInventory.DatabaseList()
            let zones = try connection.statement("""
                SELECT z.container, z.db, z.owner, z.zone_name, z.zone_owner, s.capabilities, z.zone_id FROM zones z JOIN zone_state s ON s.zone_id = z.zone_id
                ORDER BY z.container, z.db, z.owner, z.zone_name, z.zone_owner
                """)
            while try zones.step() {
                let zone = RecordZone(zoneID: Self.zoneID(name: zones.text(3) ?? "", owner: zones.text(4) ?? ""),
                                      capabilities: RecordZone.Capabilities(rawValue: UInt(truncatingIfNeeded: zones.int64(5))))
                databases.add(storageContainer: zones.text(0) ?? "", scope: Database.Scope(rawValue: Int(zones.int64(1))) ?? .public, owner: zones.text(2) ?? "",
                              zone: StoreInventory.ZoneEntry(zone: zone, recordCounts: counts[zones.int64(6)] ?? [:]))
            }
            // Databases that hold only subscriptions.
            let subscribed = try connection.statement("SELECT DISTINCT container, db, owner FROM subscriptions ORDER BY container, db, owner")
            while try subscribed.step() {
                databases.add(storageContainer: subscribed.text(0) ?? "", scope: Database.Scope(rawValue: Int(subscribed.int64(1))) ?? .public, owner: subscribed.text(2) ?? "")
            }
            var containers: [String] = []
            let schemas = try connection.statement("SELECT container FROM record_types UNION SELECT container FROM schema_roles ORDER BY 1")
            while try schemas.step() { containers.append(schemas.text(0) ?? "") }
            let size = try connection.queryText("SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()").flatMap { Int64($0) }
            return StoreInventory(databases: databases.entries, schemaStorageContainers: containers, sizeInBytes: size, schemaVersion: Int(SQLiteSchema.version))
        }
    }

    /// SQLite's own `integrity_check` of every page and index of the file, and that the asset
    /// folder holds a file for every content a record names (a store copied without its
    /// `.assets` folder reads, but cannot hand out its assets), of the size the records give it,
    /// whose bytes hash to the SHA-256 that names it (each file is read whole, a MiB at a time).
    @_spi(StratusEngine)
    public func checkIntegrity() throws -> [String] {
        try readTransaction { connection in
            var problems: [String] = []
            do {
                let check = try connection.uncachedStatement("PRAGMA integrity_check")
                while try check.step() {
                    let line = check.text(0) ?? ""
                    if line != "ok" { problems.append(line) }
                }
            } catch let error as StratusError where error.code == .internalError {
                // An index of a declared field reads each record's document, and SQLite's JSON
                // functions stop the check at a damaged one (SQLITE_ERROR, naming no record):
                // the documents are read to name them. A busy or unreadable store is its own
                // failure, thrown as it is.
                return problems + ["SQLite's integrity_check stopped: \(error.message)"] + (try undecodableDocuments(on: connection))
            }
            guard problems.isEmpty else { return problems }
            let (missing, changed) = try missingAssetContents(on: connection)
            let (wrongSize, wrongSized) = try wrongSizeAssetContents(on: connection)
            // A file of the wrong size does not hash to its name either: it is named once.
            let changedOnly = changed.filter { !wrongSized.contains($0.identifier) }
            let changedLines = changedOnly.prefix(IntegrityProblem.namedPerKind).map(\.line) + [IntegrityProblem.moreChangedAssetContents(changedOnly.count)].compactMap { $0 }
            return missing + wrongSize + changedLines
        }
    }

    /// Content files that are not the size the records naming them give their assets (a file
    /// cut short or replaced in the folder), and documents of such records that do not decode:
    /// each content named once, by the first record found naming it. Answers the lines and every
    /// content found of the wrong size.
    private func wrongSizeAssetContents(on connection: SQLiteConnection) throws -> (lines: [String], contents: Set<String>) {
        let named = try connection.uncachedStatement("""
            SELECT r.record_name, r.fields, z.zone_name, z.container, z.db, z.owner
            FROM records r LEFT JOIN zones z ON z.zone_id = r.zone_id
            WHERE EXISTS (SELECT 1 FROM asset_refs a WHERE a.zone_id = r.zone_id AND a.record_name = r.record_name)
            ORDER BY r.zone_id, r.record_name
            """)
        var problems: [String] = []
        var reported: Set<String> = []
        var (wrongSize, undecodable) = (0, 0)
        let folder = assetsDirectory.appendingPathComponent("sha256", isDirectory: true).path
        while try named.step() {
            let recordName = named.text(0) ?? "?"
            func place() -> String {
                IntegrityProblem.place(zoneName: named.text(2), storageContainer: named.text(3), scope: named.int64(4), owner: named.text(5))
            }
            let fields: [String: FieldValue]
            do {
                fields = try FieldDocument.decode(named.text(1) ?? "", zoneID: .default, assetURL: assetContentURL)
            } catch {
                undecodable += 1
                if undecodable <= IntegrityProblem.namedPerKind {
                    problems.append(IntegrityProblem.undecodableDocument(recordName: recordName, place: place(), reason: (error as? StratusError)?.message ?? "\(error)"))
                }
                continue
            }
            for asset in fields.values.flatMap(\.assets) {
                guard let identifier = asset.storedIdentifier, !reported.contains(identifier),
                      let fileSize = asset.damagedContentSize(), let assetSize = asset.size else { continue }
                reported.insert(identifier)
                wrongSize += 1
                guard wrongSize <= IntegrityProblem.namedPerKind else { continue }
                problems.append(IntegrityProblem.wrongSizeAssetContent(identifier, recordName: recordName, place: place(), fileSize: fileSize, assetSize: assetSize, where: folder))
            }
        }
        if wrongSize > IntegrityProblem.namedPerKind { problems.append("\(wrongSize - IntegrityProblem.namedPerKind) more asset content file(s) of the wrong size") }
        if let more = IntegrityProblem.moreUndecodableDocuments(undecodable) { problems.append(more) }
        return (problems, reported)
    }

    /// The records whose field documents do not decode, each named with where it is.
    private func undecodableDocuments(on connection: SQLiteConnection) throws -> [String] {
        let records = try connection.uncachedStatement("""
            SELECT r.record_name, r.fields, z.zone_name, z.container, z.db, z.owner
            FROM records r LEFT JOIN zones z ON z.zone_id = r.zone_id ORDER BY r.zone_id, r.record_name
            """)
        var problems: [String] = []
        var undecodable = 0
        while try records.step() {
            do {
                _ = try FieldDocument.decode(records.text(1) ?? "", zoneID: .default, assetURL: assetContentURL)
            } catch {
                undecodable += 1
                guard undecodable <= IntegrityProblem.namedPerKind else { continue }
                let place = IntegrityProblem.place(zoneName: records.text(2), storageContainer: records.text(3), scope: records.int64(4), owner: records.text(5))
                problems.append(IntegrityProblem.undecodableDocument(recordName: records.text(0) ?? "?", place: place, reason: (error as? StratusError)?.message ?? "\(error)"))
            }
        }
        if let more = IntegrityProblem.moreUndecodableDocuments(undecodable) { problems.append(more) }
        return problems
    }

    /// The lines for content files the records name that are missing, and every content file
    /// whose bytes do not hash to the SHA-256 that names it, with its line.
    private func missingAssetContents(on connection: SQLiteConnection) throws -> (lines: [String], changed: [(identifier: String, line: String)]) {
        // One row per content, with the first record (by zone and name) that names it.
        let referenced = try connection.uncachedStatement("""
            SELECT a.content_id, a.refs, a.record_name, z.zone_name, z.container, z.db, z.owner
            FROM (SELECT content_id, count(*) AS refs, min(zone_id) AS zone_id,
                         (SELECT record_name FROM asset_refs f WHERE f.content_id = r.content_id ORDER BY zone_id, record_name LIMIT 1) AS record_name
                  FROM asset_refs r GROUP BY content_id) a
            LEFT JOIN zones z ON z.zone_id = a.zone_id ORDER BY a.content_id
            """)
        var problems: [String] = []
        var changed: [(identifier: String, line: String)] = []
        var missing = 0
        let folder = assetsDirectory.appendingPathComponent("sha256", isDirectory: true).path
        while try referenced.step() {
            let identifier = referenced.text(0) ?? ""
            var info = stat()
            if let url = assetContentURL(identifier) {
                let found = stat(url.path, &info) == 0
                if found, info.st_mode & S_IFMT == S_IFREG {
                    let digest = try Self.contentDigest(ofFileAt: url.path)
                    if digest != identifier {
                        let place = IntegrityProblem.place(zoneName: referenced.text(3), storageContainer: referenced.text(4), scope: referenced.int64(5), owner: referenced.text(6))
                        changed.append((identifier, IntegrityProblem.changedAssetContent(identifier, found: digest, recordName: referenced.text(2) ?? "?", place: place, where: folder)))
                    }
                    continue
                }
                // Content this user may not look at is not content the store lost.
                if !found, errno == EACCES {
                    throw StratusError(.permissionFailure, "cannot check the asset contents in \(folder): you may not enter it (permission denied); check the store as its owner")
                }
            }
            missing += 1
            guard missing <= IntegrityProblem.namedPerKind else { continue }
            let place = IntegrityProblem.place(zoneName: referenced.text(3), storageContainer: referenced.text(4), scope: referenced.int64(5), owner: referenced.text(6))
            problems.append(IntegrityProblem.missingAssetContent(identifier, recordName: referenced.text(2) ?? "?", place: place,
                                                                 otherRecords: Int(referenced.int64(1)) - 1, where: folder))
        }
        if missing > IntegrityProblem.namedPerKind { problems.append("\(missing - IntegrityProblem.namedPerKind) more missing asset content(s)") }
        return (problems, changed)
    }

    /// The SHA-256 of the file at `path` in lowercase hexadecimal, read a MiB at a time.
    ///
    /// - Throws: `permissionFailure` when this user may not read it; `internalError` when it
    ///   cannot be read.
    private static func contentDigest(ofFileAt path: String) throws -> String {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { buffer.deallocate() }
        var hasher = SHA256Hasher()
        do throws(POSIXFailure) {
            let file = try FileDescriptor.open(path, O_RDONLY | O_NOFOLLOW)
            defer { file.close() }
            while true {
                let count = try file.read(into: buffer)
                if count == 0 { break }
                hasher.update(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
            }
        } catch {
            if error.errno == EACCES {
                throw StratusError(.permissionFailure, "cannot check the asset content \(path): you may not read it (permission denied); check the store as its owner")
            }
            throw StratusError(.internalError, "cannot check the asset content \(path): \(error)")
        }
        return hasher.finalize().hexadecimal
    }
}
