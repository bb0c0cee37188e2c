import Foundation
@_spi(StratusEngine) import Stratus
import StratusSQL
import Synchronization

/// A store in a PostgreSQL database, shared by every machine that can reach the server.
///
/// Each call is one transaction on a connection of a bounded pool. Writers to one zone take
/// the zone's row lock for their transaction, so that a zone's changes are numbered in commit
/// order (as CloudKit serializes a zone's writes), and change feeds read every change exactly
/// once on any number of machines; writers to different zones run in parallel. Reads of many
/// pages hold one `REPEATABLE READ` snapshot. Queries, orders and equality follow Stratus's
/// rules (``Stratus/QueryRules``) exactly as on SQLite.
///
/// The URL is read as `psql` reads it: what it leaves out comes from `PGHOST`, `PGUSER`,
/// `PGPASSWORD`, `PGSSLMODE`, `~/.pgpass` and service files. Passwords never appear in
/// messages. Stratus creates its tables in the connection's current schema (give
/// `options=-csearch_path=NAME` for another) and upgrades them itself.
///
/// ```swift
/// let engine = try PostgresEngine(url: "postgresql://stratus@db1/app")
/// let container = Container(identifier: "com.example.app", engine: engine)
/// ```
public final class PostgresEngine: StorageEngine, Sendable {
    /// The server and database, the password hidden.
    public let redactedURL: String
    /// How long tombstones of deleted records and zones are kept before automatic compaction
    /// removes them; `nil` keeps them.
    public let tombstoneRetention: Duration?
    /// Where fetched assets' contents are written, so that records hand out readable files.
    public let assetCacheDirectory: URL

    let pool: PostgresConnectionPool
    /// Connections for reads that may go to a standby (queries, exports, change reads).
    let readPool: PostgresConnectionPool
    let identity: String
    /// The role the engine's connections log in as.
    let loginRole: String
    /// Whether opening the engine created the store's tables (the database held no store).
    public let createdStore: Bool
    let automaticCompaction = Mutex<ContinuousClock.Instant?>(nil)
    /// Whether the server refused `COPY FROM` into the records table (row-level security
    /// binds the login role): new rows are then inserted with statements only.
    let copyRefused = Mutex(false)
    /// Zones whose next transactions insert new rows checked (see ``mayCopy(intoZone:)``).
    let copyConflicts = Mutex<[Int64: Int]>([:])

    /// Tombstones are kept this long by default: 30 days.
    public static let defaultTombstoneRetention: Duration = .seconds(30 * 86_400)

    /// Opens the store in the database `url` names, creating or upgrading its tables.
    ///
    /// `readURL` names a hot standby of the same database for reads that may lag
    /// (queries, exports, change reads: a standby replays commits in order, so a change feed
    /// read there never skips or repeats a change); writes always go to `url`.
    ///
    /// With `create` false, a database without a Stratus store is an error instead of getting
    /// one (read-only tools never create a store).
    ///
    /// - Throws: `serviceUnavailable` naming the host when the server cannot be reached;
    ///   `notAuthenticated`/`permissionFailure` when it refuses the login; `badContainer` when
    ///   `create` is false and the database holds no store; `badDatabase` for tables made by a
    ///   newer Stratus.
    public init(url: String, readURL: String? = nil, create: Bool = true, maximumConnections: Int = 8,
                tombstoneRetention: Duration? = PostgresEngine.defaultTombstoneRetention, assetCacheDirectory: URL? = nil) throws {
        pool = try PostgresConnectionPool(url: url, maximumConnections: maximumConnections)
        readPool = try readURL.map { try PostgresConnectionPool(url: $0, maximumConnections: maximumConnections) } ?? pool
        redactedURL = pool.redactedURL
        self.tombstoneRetention = tombstoneRetention
        let exists = try pool.withConnection { try $0.query("SELECT to_regclass('meta') IS NOT NULL AND to_regclass('records') IS NOT NULL")[0].bool(0) ?? false }
        guard exists || create else {
            throw StratusError(.badContainer, "there is no Stratus store in the database at \(pool.redactedURL) (in its current schema)")
        }
        createdStore = !exists
        identity = try Self.migrate(pool)
        loginRole = try pool.withConnection { try $0.query("SELECT current_user::text")[0].text(0) ?? "" }
        self.assetCacheDirectory = assetCacheDirectory ?? FileManager.default.temporaryDirectory.appendingPathComponent("stratus-assets-\(identity)", isDirectory: true)
    }

    /// Creates or upgrades the tables under an advisory lock, and answers the store's identity.
    /// A store whose tables are this version is only read, so that a user without the privilege
    /// to create tables (a role under row-level security) opens it all the same, and because the
    /// creation script's
    /// `CREATE INDEX IF NOT EXISTS` takes a share lock on each table even when the index
    /// exists, and a process opening the store while others write would deadlock with them
    /// (it holds the zones table's lock and waits for the records table's; a writer holds the
    /// records table's and waits to update its zone).
    private static func migrate(_ pool: PostgresConnectionPool) throws -> String {
        let current = try pool.withConnection { connection -> String? in
            guard try connection.query("SELECT to_regclass('meta') IS NOT NULL")[0].bool(0) == true else { return nil }
            let rows = try connection.query("SELECT key, value FROM meta WHERE key IN ('version', 'identity')")
            var values: [String: String] = [:]
            for row in rows { values[try row.text(0) ?? ""] = try row.text(1) }
            guard values["version"] == String(PostgresSchema.version) else { return nil }
            return values["identity"]
        }
        if let current { return current }
        return try pool.withTransaction { connection in
            try connection.execute("SELECT pg_advisory_xact_lock($1)", [.int64(PostgresSchema.migrationLock)])
            try connection.executeScript(PostgresSchema.create)
            try connection.executeScript(PostgresSchema.subscriptions)
            let found = try connection.query("SELECT value FROM meta WHERE key = 'version'").first.flatMap { try $0.text(0) }.flatMap { Int($0) }
            if let found, found > PostgresSchema.version {
                throw StratusError(.badDatabase, "the store's tables have version \(found); this Stratus reads up to \(PostgresSchema.version). Use a newer Stratus.")
            }
            if let found, found < 2 { try connection.executeScript(PostgresSchema.upgradeUserNames) }
            if let found, found < PostgresSchema.assetStoreVersion { try upgradeAssetStore(on: connection) }
            try connection.execute("INSERT INTO meta(key, value) VALUES ('version', $1) ON CONFLICT (key) DO UPDATE SET value = excluded.value", [.text(String(PostgresSchema.version))])
            try connection.execute("INSERT INTO meta(key, value) VALUES ('identity', md5(random()::text || clock_timestamp()::text)) ON CONFLICT (key) DO NOTHING")
            guard let identity = try connection.query("SELECT value FROM meta WHERE key = 'identity'").first.flatMap({ try $0.text(0) }) else {
                throw StratusError(.badDatabase, "the store has no identity row")
            }
            return identity
        }
    }

    @_spi(StratusEngine)
    public var storeIdentifier: String { get throws { identity } }

    @_spi(StratusEngine)
    public var authenticatedUserName: String? { loginRole.isEmpty ? nil : loginRole }

    /// Each batch costs its transaction's round trips, zone lock and commit (which waits for
    /// the disk where `synchronous_commit` is on): batches of 10,000 took 0.74–0.80× the time
    /// of 2,000 for 1,000,000 records, with 135 MiB at the importer's peak against 55 MiB.
    @_spi(StratusEngine)
    public var preferredImportBatchSize: Int { 10_000 }

    /// The SQL that makes each Stratus user a PostgreSQL role member of `group`, reaching the
    /// public database and its own private rows only, even with raw SQL (row-level security);
    /// run it once as the role that owns the store's tables. Each user's login must then have an
    /// entry in the container's user directory (`Container.saveUsers`) naming the record name
    /// its rows are owned by, and be the role it connects as, or its private rows are refused.
    ///
    /// ```swift
    /// print(try engine.rowLevelSecuritySQL(group: "stratus_users"))   // for psql
    /// ```
    ///
    /// - Throws: `invalidArguments` for a name PostgreSQL cannot take.
    public func rowLevelSecuritySQL(group: String) throws -> String {
        let schema = try pool.withConnection { try $0.query("SELECT current_schema()")[0].text(0) ?? "public" }
        return try PostgresSchema.rowLevelSecurity(group: group, schema: schema)
    }

    /// Runs ``rowLevelSecuritySQL(group:)``, as the role that owns the store's tables.
    ///
    /// ```swift
    /// try PostgresEngine(url: adminURL).enableRowLevelSecurity(group: "stratus_users")
    /// ```
    ///
    /// - Throws: `permissionFailure` when this role does not own the tables.
    public func enableRowLevelSecurity(group: String) throws {
        let sql = try rowLevelSecuritySQL(group: group)
        try pool.withTransaction { try $0.executeScript(sql) }
    }

    /// The PostgreSQL role the engine's connections log in as.
    ///
    /// ```swift
    /// let user = try engine.currentRole()   // "alice"
    /// ```
    public func currentRole() throws -> String {
        loginRole
    }

    // MARK: - Transactions

    /// Runs `body` in a read transaction that sees one snapshot: on the standby when one was
    /// given and the read may lag (queries, change reads), else on the primary.
    func readTransaction<T>(mayLag: Bool = true, _ body: (PostgresConnection) throws -> T) throws -> T {
        try (mayLag ? readPool : pool).withTransaction(isolation: .repeatableRead, readOnly: true, body)
    }

    /// Runs `body` in a write transaction (read committed; zones are locked row by row).
    func writeTransaction<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        try pool.withTransaction(isolation: .readCommitted, body)
    }

    /// Runs a statement written with `?` placeholders.
    static func query(_ connection: PostgresConnection, _ sql: String, _ parameters: [SQLValue]) throws -> PostgresResult {
        try connection.query(PostgresSQL.numbered(sql), parameters.map(PostgresSQL.value))
    }

    // MARK: - Zones

    /// The key columns (container, db, owner) of a database's rows.
    static func databaseKey(_ database: DatabaseContext) -> [PostgresValue] {
        [.text(database.storageContainer), .int64(Int64(database.scope.rawValue)), .text(database.storageOwner)]
    }

    /// Zones owned by the database's own user are stored with an empty owner, so that
    /// `__defaultOwner__` and the user's record name mean the same zone.
    static func zoneOwner(_ zoneID: RecordZone.ID, _ database: DatabaseContext) -> String {
        database.isCurrentUser(zoneID.ownerName) ? "" : zoneID.ownerName
    }

    /// A zone ID as the store keeps it: the database user's own zones have an empty owner.
    static func zoneID(name: String, owner: String) -> RecordZone.ID {
        RecordZone.ID(zoneName: name, ownerName: owner.isEmpty ? RecordZone.ID.currentUserDefaultOwner : owner)
    }

    /// A zone's row and where its change history stands.
    struct ZoneHistory {
        var row: Int64
        var sequence: Int64
        var capabilities: RecordZone.Capabilities
        var start: Int64
    }

    /// The zone's row; `lock` takes its row lock for the transaction (writers of one zone
    /// serialize on it, so that its changes are numbered in commit order).
    func zoneHistory(_ zoneID: RecordZone.ID, _ database: DatabaseContext, on connection: PostgresConnection, lock: Bool = false) throws -> ZoneHistory? {
        let rows = try connection.query("""
            SELECT zone_id, change_seq, capabilities, history_start FROM zones
            WHERE container = $1 AND db = $2 AND owner = $3 AND zone_name = $4 AND zone_owner = $5\(lock ? " FOR UPDATE" : "")
            """, Self.databaseKey(database) + [.text(zoneID.zoneName), .text(Self.zoneOwner(zoneID, database))])
        guard let row = rows.first else { return nil }
        return ZoneHistory(row: try row.int64(0) ?? 0, sequence: try row.int64(1) ?? 0,
                           capabilities: RecordZone.Capabilities(rawValue: Int(try row.int64(2) ?? 0)), start: try row.int64(3) ?? 0)
    }

    /// Creates a zone's row unless it exists (another writer may create it at the same time).
    @discardableResult
    func insertZone(_ zoneID: RecordZone.ID, capabilities: RecordZone.Capabilities, _ database: DatabaseContext, on connection: PostgresConnection) throws -> Bool {
        try connection.execute("""
            INSERT INTO zones(container, db, owner, zone_name, zone_owner, capabilities, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)
            ON CONFLICT (container, db, owner, zone_name, zone_owner) DO NOTHING
            """, Self.databaseKey(database) + [.text(zoneID.zoneName), .text(Self.zoneOwner(zoneID, database)),
                                               .int64(Int64(capabilities.rawValue)), .double(Date().timeIntervalSinceReferenceDate)]) == 1
    }

    /// Takes the next value of the database's change sequence and, for a zone that changed,
    /// marks the zone with it. Returns the value. The database's history row stays locked
    /// until the transaction ends, so database changes are numbered in commit order too;
    /// writers call this last, just before they commit.
    /// With `zoneSequence`, the zone's own change sequence is stored in the same statement.
    @discardableResult
    func noteDatabaseChange(zoneRow: Int64?, zoneSequence: Int64? = nil, _ database: DatabaseContext, on connection: PostgresConnection) throws -> Int64 {
        guard let zoneRow else {
            let rows = try connection.query("""
                INSERT INTO database_history(container, db, owner, change_seq) VALUES ($1, $2, $3, 1)
                ON CONFLICT (container, db, owner) DO UPDATE SET change_seq = database_history.change_seq + 1 RETURNING change_seq
                """, Self.databaseKey(database))
            guard let sequence = try rows.first?.int64(0) else { throw StratusError(.internalError, "taking the database's next change number returned no row") }
            return sequence
        }
        // One statement (one round trip): the database's next number, marked on the zone.
        let rows = try connection.query("""
            WITH h AS (
                INSERT INTO database_history(container, db, owner, change_seq) VALUES ($1, $2, $3, 1)
                ON CONFLICT (container, db, owner) DO UPDATE SET change_seq = database_history.change_seq + 1 RETURNING change_seq)
            UPDATE zones SET db_change_seq = h.change_seq, change_seq = coalesce($5, zones.change_seq) FROM h WHERE zone_id = $4
            RETURNING h.change_seq
            """, Self.databaseKey(database) + [.int64(zoneRow), zoneSequence.map(PostgresValue.int64) ?? .null])
        guard let sequence = try rows.first?.int64(0) else { throw StratusError(.internalError, "taking the database's next change number returned no row") }
        return sequence
    }

    /// One life of a zone: zone IDs come from a sequence and are never reused.
    func zoneIncarnation(_ zoneRow: Int64) -> String { identity + "." + String(zoneRow) }

    // MARK: - Records

    /// Builds a record from a row whose first columns are ``PostgresSchema/recordColumns``.
    func decodeRecord(_ row: PostgresRow, zoneID: RecordZone.ID) throws -> Record {
        var recent = PostgresRecentTexts(keepsDocumentShape: false)
        return try decodeRecord(row, zoneID: zoneID, recent: &recent)
    }

    /// Builds a record from a row whose first columns are ``PostgresSchema/recordColumns``
    /// (or ``PostgresSchema/queryRecordColumns``, with the query's `recordType`), reusing the
    /// type and user names and the document shape of the rows read before it.
    func decodeRecord(_ row: PostgresRow, zoneID: RecordZone.ID, recordType: String? = nil, recent: inout PostgresRecentTexts) throws -> Record {
        let name = try row.text(0) ?? ""
        let creator = try recent.user(row, column: 3)
        let system = Record.SystemFields(
            creationDate: Date(timeIntervalSinceReferenceDate: try row.double(2) ?? 0),
            modificationDate: Date(timeIntervalSinceReferenceDate: try row.double(4) ?? 0),
            creatorUserRecordID: creator,
            // NULL: the creator again.
            lastModifiedUserRecordID: row.isNull(5) ? creator : try recent.user(row, column: 5),
            recordChangeTag: try row.text(6))
        let decoded = try row.withBytes(7) { document -> FieldDocument.Decoded? in
            guard let document else { return nil }
            return try FieldDocument.decodeStoredDocument(utf8: document, zoneID: zoneID, shape: &recent.documentShape) { self.cachedAssetURL($0) }
        }
        let parent = try row.text(8).map { Record.Reference(recordID: Record.ID(recordName: $0, zoneID: zoneID), action: .none) }
        return Record(recordType: try recordType ?? recent.recordType(row, column: 1), recordID: Record.ID(recordName: name, zoneID: zoneID), systemFields: system,
                      fields: decoded?.fields ?? [:], parent: parent, encryptedKeys: decoded?.encryptedKeys ?? [], jsonExtras: decoded?.jsonExtras ?? Record.JSONExtras())
    }

    @_spi(StratusEngine)
    public func fetchRecords(_ ids: [Record.ID], in database: DatabaseContext) throws -> [Record.ID: Record] {
        // Fetches by ID read the primary: a record just saved is there.
        let found = try readTransaction(mayLag: false) { connection -> [Record.ID: Record] in
            var found: [Record.ID: Record] = [:]
            var byZone: [RecordZone.ID: [Record.ID]] = [:]
            for id in ids { byZone[id.zoneID, default: []].append(id) }
            var recent = PostgresRecentTexts(keepsDocumentShape: true)
            for (zoneID, zoneIDs) in byZone {
                guard let zone = try zoneHistory(zoneID, database, on: connection) else { continue }
                let rows = try connection.query("SELECT \(PostgresSchema.recordColumns) FROM records r WHERE r.zone_id = $1 AND r.record_name = ANY($2)",
                                                [.int64(zone.row), .textArray(zoneIDs.map(\.recordName))])
                for row in rows {
                    let record = try decodeRecord(row, zoneID: zoneID, recent: &recent)
                    found[record.recordID] = record
                }
            }
            return found
        }
        try materializeAssets(of: Array(found.values), owner: database.storageOwner)
        return found
    }
}

extension PostgresRow {
    /// The bytes of a text or `jsonb` column, without copying them into a `String`; `nil` for NULL.
    func withBytes<T>(_ column: Int, _ body: (UnsafeBufferPointer<UInt8>?) throws -> T) throws -> T {
        guard let (type, bytes) = raw(column) else { return try body(nil) }
        var content = UnsafeRawBufferPointer(bytes)
        if type == PostgresType.jsonb {
            guard content.first == 1 else { throw StratusError(.internalError, "column \(column) holds jsonb of an unknown version") }
            content = UnsafeRawBufferPointer(rebasing: content.dropFirst())
        }
        return try body(content.bindMemory(to: UInt8.self))
    }
}

// MARK: - Copying new rows

extension PostgresEngine {
    /// How many inserts of new rows into a zone are checked after a COPY into it found a
    /// stored name (a re-run import): each such COPY costs its transaction twice.
    static let checkedInsertsAfterConflict = 16

    /// Whether new rows of this zone go in with `COPY` (``PostgresWriteTransaction``): not
    /// when the server refused it, nor for a while after a COPY into the zone met stored names.
    func mayCopy(intoZone zoneRow: Int64) -> Bool {
        guard !copyRefused.withLock({ $0 }) else { return false }
        return copyConflicts.withLock { conflicts in
            guard let remaining = conflicts[zoneRow] else { return true }
            conflicts[zoneRow] = remaining > 1 ? remaining - 1 : nil
            return false
        }
    }

    /// Remembers why a transaction's COPY failed: refused for good (row-level security,
    /// privileges), or rows already stored in these zones.
    func noteCopyFailure(_ error: StratusError?, zones: Set<Int64>) {
        if error?.sqlState == "0A000" || error?.sqlState == "42501" {
            copyRefused.withLock { $0 = true }
            return
        }
        copyConflicts.withLock { conflicts in
            for zone in zones { conflicts[zone] = Self.checkedInsertsAfterConflict }
        }
    }
}
