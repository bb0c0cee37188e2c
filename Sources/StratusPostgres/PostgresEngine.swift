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
    /// Where fetched assets' contents are written, so that records hand out readable files:
    /// the folder given to the initializer, else `$TMPDIR/stratus-assets-<uid>-<store>`, a
    /// folder of the user's own (0700), one per store and user of the machine.
    public let assetCacheDirectory: URL

    let pool: PostgresConnectionPool
    /// Connections for reads that may go to a standby (queries, exports, change reads).
    let readPool: PostgresConnectionPool
    let identity: String
    /// The role the engine's connections log in as.
    let loginRole: String
    /// Whether opening the engine created the store's tables (the database held no store).
    /// Decided under the lock that creates them: of processes that open the same new store at
    /// once, only the one that made its tables says so.
    public let createdStore: Bool
    /// When this engine compacts on its own.
    let compaction = CompactionSchedule()
    /// Whether the standby was found to hold this store (``checkStandby()``).
    let standbyChecked = Mutex(false)
    /// When this engine's inserts make an analysis of the records due (``analyzeIfGrown(_:)``).
    let statistics = Mutex(StatisticsSchedule())
    /// Whether the server refuses `COPY FROM` into the records table (row-level security
    /// binds the login role): new rows are then inserted with statements only. Known when the
    /// engine opens, so that a member's import leaves no refused COPY in the server's log;
    /// learnt from the refusal when row-level security is turned on later.
    let copyRefused: Mutex<Bool>
    /// Zones whose next transactions insert new rows checked (see ``mayCopy(intoZone:)``).
    let copyConflicts = Mutex<[Int64: CopyConflicts]>([:])

    /// Tombstones are kept this long by default: 30 days.
    public static let defaultTombstoneRetention: Duration = .seconds(30 * 86_400)

    /// Opens the store in the database `url` names, creating or upgrading its tables.
    ///
    /// `readURL` names a hot standby of the same database for reads that may lag
    /// (queries, exports, change reads: a standby replays commits in order, so a change feed
    /// read there never skips or repeats a change); writes always go to `url`. The standby is
    /// connected to when a read first needs it; those reads then fail (`serviceUnavailable`,
    /// naming it) while it cannot be reached, and (`invalidArguments`) when it holds another
    /// store: they never fall back to the primary unannounced.
    ///
    /// With `create` false, a database without a Stratus store is an error instead of getting
    /// one (read-only tools never create a store).
    ///
    /// - Throws: `serviceUnavailable` naming the host when the server cannot be reached;
    ///   `invalidArguments` for settings libpq cannot use (a URL with more than one `@` before
    ///   its host, a port that is no number); `notAuthenticated`/`permissionFailure` when it
    ///   refuses the login; `badContainer` when the database does not exist, or `create` is
    ///   false and it holds no store; `permissionFailure` when the role may not read the tables
    ///   or use their schema (naming the group to join), may not create them, or is not their
    ///   owner and they need an upgrade; `badDatabase` for tables made by a newer Stratus, or
    ///   another program's table named as one of Stratus's in the schema.
    public init(url: String, readURL: String? = nil, create: Bool = true, maximumConnections: Int = 8,
                tombstoneRetention: Duration? = PostgresEngine.defaultTombstoneRetention, assetCacheDirectory: URL? = nil) throws {
        pool = try PostgresConnectionPool(url: url, maximumConnections: maximumConnections)
        readPool = try readURL.map { try PostgresConnectionPool(url: $0, maximumConnections: maximumConnections) } ?? pool
        redactedURL = pool.redactedURL
        self.tombstoneRetention = tombstoneRetention
        let probe = try pool.withConnection { try StoreProbe(on: $0) }
        copyRefused = Mutex(probe.rowSecurityBindsRecords)
        guard probe.exists || create else {
            let missing = StoreMissing(description: "the database \(probe.database) at \(pool.redactedURL) holds no Stratus store \(probe.whereTables) (the database exists\(probe.elsewhere))")
            var error = StratusError(.badContainer, "\(missing.description); opening the engine with create: true makes the store")
            error.underlyingError = missing
            throw error
        }
        (identity, createdStore) = try Self.migrate(pool, probe: probe)
        loginRole = probe.role
        if let assetCacheDirectory {
            self.assetCacheDirectory = assetCacheDirectory
        } else {
            // A temporary folder is shared by every user of the machine: the cache is this
            // user's own (made now, or checked to be theirs), or another user of the machine
            // could read it, or plant content that records would hand out as theirs.
            let cache = FileManager.default.temporaryDirectory.appendingPathComponent("stratus-assets-\(geteuid())-\(identity)", isDirectory: true)
            do throws(POSIXFailure) {
                // Made now, so that no one else makes it first; where it cannot be made (a
                // read-only temporary folder), assets fail when used, and nothing else does.
                if try !FileDescriptor.checkOwnDirectory(cache) && mkdir(cache.path, 0o700) != 0 && errno == EEXIST {
                    _ = try FileDescriptor.checkOwnDirectory(cache)
                }
            } catch {
                throw StratusError(.permissionFailure, "the asset cache folder cannot be used: \(error.operation) (\(error.reason)); or give the engine an assetCacheDirectory of its own")
            }
            self.assetCacheDirectory = cache
        }
    }

    /// Creates or upgrades the tables under an advisory lock; answers the store's identity and
    /// whether this call made its tables (another process may have made them while it waited).
    /// A store whose tables are this version is only read, so that a user without the privilege
    /// to create tables (a role under row-level security) opens it all the same, and because the
    /// creation script's
    /// `CREATE INDEX IF NOT EXISTS` takes a share lock on each table even when the index
    /// exists, and a process opening the store while others write would deadlock with them
    /// (it holds the zones table's lock and waits for the records table's; a writer holds the
    /// records table's and waits to update its zone).
    private static func migrate(_ pool: PostgresConnectionPool, probe: StoreProbe) throws -> (identity: String, created: Bool) {
        if probe.exists {
            let values = try pool.withConnection { connection -> [String: String] in
                var values: [String: String] = [:]
                for row in try connection.query("SELECT key, value FROM meta WHERE key IN ('version', 'identity')") { values[try row.text(0) ?? ""] = try row.text(1) }
                return values
            }
            let found = try readableVersion(values["version"])
            if found == PostgresSchema.version, let identity = values["identity"] { return (identity, false) }
            if !probe.ownsTables {
                throw StratusError(.permissionFailure, "the store's tables in database \(probe.database) have version \(found.map(String.init) ?? "none"); this Stratus uses version \(PostgresSchema.version) and upgrades them when the role that owns them (\(probe.owner ?? "their owner")) opens the store once (for example `stratus info` as \(probe.owner ?? "that role")); role \(probe.role) may not")
            }
        }
        do {
            return try pool.withTransaction { connection in
                try connection.execute("SELECT pg_advisory_xact_lock($1)", [.int64(PostgresSchema.migrationLock)])
                // Another process may have made the tables while this one waited for the lock,
                // and be writing into them now: running the script would deadlock with it.
                // Read from the catalog with this statement's snapshot: a lookup by name
                // (to_regclass) may answer from this connection's cache of the catalog, from
                // before the other process committed its tables (waiting for an advisory lock
                // does not refresh it), and then run the script beside it and say it made them.
                let made = try connection.query("""
                    SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                                   WHERE c.relname = 'meta' AND n.nspname = current_schema())
                    """).first?.bool(0) == true
                if made {
                    var values: [String: String] = [:]
                    for row in try connection.query("SELECT key, value FROM meta WHERE key IN ('version', 'identity')") { values[try row.text(0) ?? ""] = try row.text(1) }
                    if values["version"].flatMap({ Int($0) }) == PostgresSchema.version, let identity = values["identity"] { return (identity, false) }
                }
                if probe.exists, let owner = probe.owner, owner != probe.role {
                    // A member of the owning role, or a superuser, upgrades as the owner: what the
                    // upgrade creates must be the owner's, or the owner's own commands (and its
                    // row-security setup) are refused on it.
                    try connection.execute("SET LOCAL ROLE \(try PostgresConnection.quoteIdentifier(owner))")
                    // "$user" in the search_path now means the owner: the upgrade stays in the
                    // schema that holds the store.
                    if let schema = probe.schema {
                        try connection.execute("SET LOCAL search_path TO \(try PostgresConnection.quoteIdentifier(schema))")
                    }
                }
                try connection.executeScript(PostgresSchema.create)
                try connection.executeScript(PostgresSchema.subscriptions)
                try connection.executeScript(PostgresSchema.shareIndex)
                try connection.executeScript(PostgresSchema.userDiscovery)
                let found = try readableVersion(connection.query("SELECT value FROM meta WHERE key = 'version'").first.flatMap { try $0.text(0) })
                if let found, found < 2 { try connection.executeScript(PostgresSchema.upgradeUserNames) }
                if let found, found < PostgresSchema.assetStoreVersion { try upgradeAssetStore(on: connection) }
                if let found, found < PostgresSchema.grantsNothingVersion {
                    // Before it, `{}` meant CloudKit's defaults (no Stratus wrote it; raw SQL could):
                    // it keeps that meaning, spelled as no key.
                    try connection.execute("UPDATE record_types SET schema = (schema::jsonb - 'grants')::text WHERE schema::jsonb -> 'grants' = '{}'::jsonb")
                }
                if let found, found < PostgresSchema.rowSecurityVersion { try reapplyRowSecurity(on: connection) }
                if let found, found < PostgresSchema.boundedIndexVersion { try boundIndexEntries(on: connection) }
                if let found, found < PostgresSchema.declaredValueIndexVersion { try Self.synchronizeIndexes(on: connection) }
                if let found, found < PostgresSchema.shareIndexVersion { try Self.indexStoredShares(on: connection) }
                try connection.execute("INSERT INTO meta(key, value) VALUES ('version', $1) ON CONFLICT (key) DO UPDATE SET value = excluded.value", [.text(String(PostgresSchema.version))])
                try connection.execute("INSERT INTO meta(key, value) VALUES ('identity', md5(random()::text || clock_timestamp()::text)) ON CONFLICT (key) DO NOTHING")
                guard let identity = try connection.query("SELECT value FROM meta WHERE key = 'identity'").first.flatMap({ try $0.text(0) }) else {
                    throw StratusError(.badDatabase, "the store has no identity row")
                }
                return (identity, !made && !probe.exists)
            }
        } catch let error as StratusError where error.sqlState == "42501" && !probe.exists {
            var refused = StratusError(.permissionFailure, "role \(probe.role) may not create the store's tables \(probe.whereTables) of database \(probe.database): give the database to the role that is to own them (createdb -O \(probe.role) \(probe.database) for a new one, ALTER DATABASE \(probe.database) OWNER TO \(probe.role) for one that exists), or have its owner run GRANT CREATE ON SCHEMA \(probe.schema ?? "public") TO \(probe.role) (PostgreSQL 15 no longer lets every role create in public)\(probe.elsewhere)")
            refused.sqlState = error.sqlState
            throw refused
        }
    }

    /// The version the `meta` table gives (`nil` without one), or `badDatabase` for a version
    /// this Stratus neither reads nor upgrades: a newer one, or one no Stratus writes (not a
    /// whole number from 1). Taken as an old version, a damaged one would run the upgrade steps
    /// of earlier versions over current tables, or be written over as if current.
    private static func readableVersion(_ text: String?) throws -> Int? {
        guard let text else { return nil }
        guard let found = Int(text), found >= 1 else {
            throw StratusError(.badDatabase, "the store's tables have a version no Stratus writes (\(Int(text).map(String.init) ?? "not a whole number")): its meta table is damaged, and Stratus neither reads nor upgrades it (restore it from a copy)")
        }
        if found > PostgresSchema.version {
            throw StratusError(.badDatabase, "the store's tables have version \(found); this Stratus reads up to \(PostgresSchema.version). Use a newer Stratus.")
        }
        return found
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
    /// public database and its own private rows only, and writing only its own rows, even with
    /// raw SQL (row-level security; the policies in the SQL it returns say exactly what a member may do);
    /// run it as the role that owns the store's tables, in one transaction (it begins and
    /// commits one). Each user's login must then have an entry in the container's user
    /// directory (`Container.saveUsers`) naming the record name its rows are owned by, and be
    /// the role it connects as, or its private rows are refused.
    ///
    /// ```swift
    /// print(try engine.rowLevelSecuritySQL(group: "stratus_users"))   // for psql
    /// ```
    ///
    /// - Throws: `invalidArguments` for a name PostgreSQL cannot take.
    public func rowLevelSecuritySQL(group: String) throws -> String {
        let schema = try pool.withConnection { try $0.query("SELECT current_schema()")[0].text(0) ?? "public" }
        return try PostgresRowSecurity.script(group: group, schema: schema)
    }

    /// Runs ``rowLevelSecuritySQL(group:)``, as the role that owns the store's tables. Running it
    /// again applies this version's policies (an upgrade of the tables does that by itself).
    ///
    /// ```swift
    /// try PostgresEngine(url: adminURL).enableRowLevelSecurity(group: "stratus_users")
    /// ```
    ///
    /// - Throws: `invalidArguments` when `group` is no role of the server, or when row-level
    ///   security is set up for another group (its members would be left without rows);
    ///   `permissionFailure` when this role does not own the tables, or when the group may
    ///   create objects in the store's schema (its members could then put objects beside the tables).
    public func enableRowLevelSecurity(group: String) throws {
        // The script alters every table, so it can deadlock with autovacuum or a writer; it runs
        // as one transaction, which the deadlock rolled back whole, so it is tried again.
        var attempt = 1
        while true {
            do {
                try pool.withConnection { connection in
                    let schema = try connection.query("SELECT current_schema()")[0].text(0) ?? "public"
                    try Self.checkRowSecurityPreconditions(group: group, schema: schema, on: connection)
                    try connection.executeScript(try PostgresRowSecurity.script(group: group, schema: schema))
                }
                return
            } catch let error as StratusError where error.code == .zoneBusy && attempt < 5 {
                attempt += 1
                Thread.sleep(forTimeInterval: 0.2 * Double(attempt))
            }
        }
    }

    /// What keeps `login` from using the store as a user once row-level security is set up:
    /// no role of that name, a role outside the group the policies name, or one without
    /// `LOGIN`. `nil` when nothing does, or when row-level security is not set up (any login
    /// then acts through the role a program connects as).
    ///
    /// ```swift
    /// if let problem = try engine.rowSecurityLoginProblem("alcie") { print("note: \(problem)") }
    /// ```
    ///
    /// - Throws: store errors.
    public func rowSecurityLoginProblem(_ login: String) throws -> String? {
        try pool.withConnection { connection in
            guard let group = try Self.rowSecurityGroups(on: connection).first else { return nil }
            let (quotedGroup, quotedLogin) = (try Self.sqlName(group), try Self.sqlName(login))
            let rows = try connection.query("""
                SELECT r.rolcanlogin, pg_catalog.pg_has_role(r.oid, g.oid, 'MEMBER')
                FROM pg_catalog.pg_roles r, pg_catalog.pg_roles g WHERE r.rolname = $1 AND g.rolname = $2
                """, [.text(login), .text(group)])
            guard let row = rows.first else {
                return "there is no PostgreSQL role \(login), so no one connects as this user yet: a superuser or a role with CREATEROLE makes it in the group row-level security is set up for (createuser --pwprompt --role \(group) \(login))"
            }
            if try row.bool(1) != true {
                return "role \(login) is not a member of \(group), the group row-level security is set up for, so it reaches no rows (GRANT \(quotedGroup) TO \(quotedLogin), as a superuser or a role with CREATEROLE)"
            }
            if try row.bool(0) != true {
                return "role \(login) may not log in (ALTER ROLE \(quotedLogin) LOGIN, as a superuser or a role with CREATEROLE)"
            }
            return nil
        }
    }

    /// A role's name as SQL reads it, for messages that give a statement to run: bare when it
    /// is a plain lower-case one, quoted otherwise.
    private static func sqlName(_ name: String) throws -> String {
        name.wholeMatch(of: #/[a-z_][a-z0-9_]*/#) != nil ? name : try PostgresConnection.quoteIdentifier(name)
    }

    /// Refuses, with what to do, a group that does not exist, a role that does not own the
    /// tables, a group other than the one row-level security is set up for, and a group whose
    /// members may create objects in the store's schema.
    private static func checkRowSecurityPreconditions(group: String, schema: String, on connection: PostgresConnection) throws {
        let rows = try connection.query("""
            SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1),
                   pg_catalog.pg_get_userbyid(c.relowner)::text,
                   pg_catalog.pg_has_role(CURRENT_USER, c.relowner, 'USAGE'),
                   CURRENT_USER::text
            FROM pg_catalog.pg_class c WHERE c.oid = pg_catalog.to_regclass('meta')
            """, [.text(group)])
        guard let row = rows.first else {
            throw StratusError(.badContainer, "there is no Stratus store in schema \(schema) of this database; create it first (stratus import, or any command that creates a store)")
        }
        let owner = try row.text(1) ?? "", current = try row.text(3) ?? ""
        guard try row.bool(0) == true else {
            throw StratusError(.invalidArguments, "there is no PostgreSQL role '\(group)'; a superuser or a role with CREATEROLE creates it first: CREATE ROLE \(try PostgresConnection.quoteIdentifier(group)) NOLOGIN")
        }
        guard try row.bool(2) == true else {
            throw StratusError(.permissionFailure, "row-level security is set up by the role that owns the store's tables (\(owner)); this connection is role \(current)")
        }
        // The policies name one group: set up for another, they would leave the members of the
        // first reading no rows (a count of 0, exit 0) and refused every write, with no error.
        let earlier = try rowSecurityGroups(on: connection, schema: schema).filter { $0 != group }
        if let first = earlier.first {
            let quoted = try sqlName(first)
            throw StratusError(.invalidArguments, "row-level security in schema \(schema) is set up for the group \(earlier.joined(separator: ", ")); setting it up for \(group) would replace it, and the members of \(first) would then read no rows and write none. Give --group \(first) to apply the policies again; to make \(group) a Stratus user, make it a member (GRANT \(quoted) TO \(try sqlName(group)), as a superuser or a role with CREATEROLE); to call the group otherwise, rename it (ALTER ROLE \(quoted) RENAME TO …: the policies follow it)")
        }
        let creates = try connection.query("""
            SELECT pg_catalog.has_schema_privilege($1, $2, 'CREATE'), pg_catalog.has_schema_privilege('public', $2, 'CREATE')
            """, [.text(group), .text(schema)])[0]
        if try creates.bool(0) == true || creates.bool(1) == true {
            let quoted = try PostgresConnection.quoteIdentifier(schema)
            throw StratusError(.permissionFailure, "members of \(group) may create objects in schema \(schema), beside the store's tables (PostgreSQL before 15 let every role create in public); first run REVOKE CREATE ON SCHEMA \(quoted) FROM PUBLIC, \(try PostgresConnection.quoteIdentifier(group)), or keep the store in a schema of its own")
        }
        // A member may hold the right itself, or through another role (superusers and the
        // tables' owners can do anything anyway).
        let members = try connection.query("""
            SELECT m.rolname::text FROM pg_catalog.pg_roles m, pg_catalog.pg_roles g, pg_catalog.pg_class c
            WHERE g.rolname = $1 AND c.oid = pg_catalog.to_regclass('meta') AND m.oid <> g.oid AND NOT m.rolsuper
              AND pg_catalog.pg_has_role(m.oid, g.oid, 'MEMBER') AND NOT pg_catalog.pg_has_role(m.oid, c.relowner, 'USAGE')
              AND pg_catalog.has_schema_privilege(m.oid, $2, 'CREATE')
            ORDER BY 1
            """, [.text(group), .text(schema)]).map { try $0.text(0) ?? "" }
        if !members.isEmpty {
            let quoted = try PostgresConnection.quoteIdentifier(schema)
            let roles = try members.map(PostgresConnection.quoteIdentifier).joined(separator: ", ")
            throw StratusError(.permissionFailure, "member\(members.count == 1 ? "" : "s") \(members.joined(separator: ", ")) of \(group) may create objects in schema \(schema), beside the store's tables; first run REVOKE CREATE ON SCHEMA \(quoted) FROM \(roles) (and from any role that gives them the right), or keep the store in a schema of its own")
        }
    }

    /// The groups that Stratus's policies on the records table name (row-level security was set
    /// up for them).
    static func rowSecurityGroups(on connection: PostgresConnection, schema: String? = nil) throws -> [String] {
        try connection.query("""
            SELECT DISTINCT g::text FROM pg_catalog.pg_policies, unnest(roles) AS g
            WHERE schemaname = coalesce($1, current_schema()) AND tablename = 'records' AND policyname LIKE 'stratus\\_%' AND g <> 'public'
            ORDER BY 1
            """, [schema.map(PostgresValue.text) ?? .null]).map { try $0.text(0) ?? "" }
    }

    /// Applies this version's row-level security again for each group that policies of an
    /// earlier version name (inside the upgrade's transaction; its `search_path` is restored).
    static func reapplyRowSecurity(on connection: PostgresConnection) throws {
        let groups = try rowSecurityGroups(on: connection)
        guard !groups.isEmpty else { return }
        let schema = try connection.query("SELECT current_schema()")[0].text(0) ?? "public"
        let searchPath = try connection.query("SELECT current_setting('search_path')")[0].text(0) ?? ""
        for group in groups {
            try connection.executeScript(try PostgresRowSecurity.statements(group: group, schema: schema))
        }
        try connection.execute("SELECT pg_catalog.set_config('search_path', $1, true)", [.text(searchPath)])
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
    ///
    /// - Throws: `body`'s errors; a row that row-level security refused says why (see
    ///   ``explainRowSecurityRefusal(_:storageContainer:)``).
    ///
    /// Its commit is durable before others see it: with the server's `synchronous_commit` off,
    /// a change read at once (a change feed's reader) could be lost in a crash, and its change
    /// number given again to a later change the reader, past it, would never see. A stronger
    /// setting (waiting for a standby) is kept. With `writingRecordsOf` (a storage container),
    /// the transaction holds that container's write lock shared (``containerWriteLock``), as
    /// record writes do.
    ///
    /// A connection lost while the server committed leaves the outcome unknown: the server is
    /// asked (`txid_status`), so that a committed write is answered as written, never tried
    /// again (a retried batch of new records would find them "already there", written by itself).
    func writeTransaction<T>(writingRecordsOf storageContainer: String? = nil, _ body: (PostgresConnection) throws -> T) throws -> T {
        var transactionID: Int64?
        var produced: T?
        do {
            return try pool.withTransaction(isolation: .readCommitted) { connection in
                let prelude = try storageContainer.map { try connection.query(Self.durableCommitSharingContainerLock, [.text($0)]) }
                    ?? connection.query(Self.durableCommit)
                transactionID = try prelude.first?.int64(0)
                let value = try body(connection)
                produced = value
                return value
            }
        } catch let error as StratusError where error.sqlState == "08007" {
            guard let transactionID, let produced else { throw error }
            let status = try? pool.withConnection { try $0.query("SELECT txid_status($1)::text", [.int64(transactionID)]).first?.text(0) }
            guard status == "committed" else { throw error }
            return produced
        } catch let error as StratusError where error.sqlState == "42501" && error.message.contains("row-level security") {
            throw explainRowSecurityRefusal(error, storageContainer: storageContainer)
        } catch let error as StratusError where error.sqlState == "25006" {
            // A standby comes back as a primary after a failover, so its refusal is retried; a
            // primary read-only by its settings never changes by retrying.
            let inRecovery = try? pool.withConnection { try $0.query("SELECT pg_catalog.pg_is_in_recovery()").first?.bool(0) }
            if inRecovery == false { throw Self.readOnlyByDefault(redactedURL) }
            throw error
        }
    }

    /// The first statement of a write transaction: its ID (asked for if its commit's answer is
    /// lost), its commit made durable before others see it, and its statements planned for the
    /// table as it is: a plan cached while `records` was nearly empty (a new store's first
    /// import) reads a record by its zone's change index, a scan of the zone per lookup, and
    /// stays cached while the table grows.
    ///
    /// A role that row-level security binds takes generic plans instead, once `records` has
    /// been analyzed (not only counted: `CREATE INDEX` and `VACUUM` set its row count too): planning a statement with the policies of its tables costs it 5 to 15 ms,
    /// against a fraction of a millisecond to run it, so a custom plan for each record's
    /// statements made its updates and deletions 20 to 30 times slower than the owner's. With
    /// statistics, a generic plan finds a record by its primary key whatever the table's size
    /// later (and autovacuum's next analysis plans it again); without them (a new store before
    /// autovacuum's first analysis), by any index, the zone's change index included.
    private static let durableCommit = """
        SELECT txid_current(),
               set_config('synchronous_commit', CASE current_setting('synchronous_commit') WHEN 'off' THEN 'local' ELSE current_setting('synchronous_commit') END, true),
               set_config('plan_cache_mode', \(planCacheMode), true)
        """
    private static let durableCommitSharingContainerLock = """
        SELECT txid_current(),
               set_config('synchronous_commit', CASE current_setting('synchronous_commit') WHEN 'off' THEN 'local' ELSE current_setting('synchronous_commit') END, true),
               set_config('plan_cache_mode', \(planCacheMode), true),
               pg_advisory_xact_lock_shared(\(containerWriteLock(parameter: 1)))
        """
    private static let planCacheMode = """
        CASE WHEN (SELECT NOT (pg_catalog.pg_has_role(CURRENT_USER, c.relowner, 'USAGE') AND NOT c.relforcerowsecurity)
                          AND coalesce(pg_catalog.pg_stat_get_last_analyze_time(c.oid), pg_catalog.pg_stat_get_last_autoanalyze_time(c.oid)) IS NOT NULL
                   FROM pg_catalog.pg_class c WHERE c.oid = pg_catalog.to_regclass('records')) IS TRUE
             THEN 'force_generic_plan' ELSE 'force_custom_plan' END
        """

    /// A refusal of row-level security, with what the role lacks: an entry in the user
    /// directory (without one it owns no rows at all), an entry in the directory of the
    /// container it writes (`storageContainer`: each container has its own), or the right to
    /// write that row.
    func explainRowSecurityRefusal(_ error: StratusError, storageContainer: String? = nil) -> StratusError {
        // The container's identifier: a production storage container adds U+001F and the environment.
        let container = storageContainer.map { String($0.split(separator: "\u{1F}", maxSplits: 1, omittingEmptySubsequences: false).first ?? "") }
        let counts = try? pool.withConnection { connection in
            let row = try connection.query("SELECT count(*), count(*) FILTER (WHERE container = $1) FROM user_directory WHERE login = CURRENT_USER::text",
                                           [container.map(PostgresValue.text) ?? .null])[0]
            return (everywhere: try row.int64(0), here: try row.int64(1))
        }
        let role = loginRole.isEmpty ? "this role" : "role \(loginRole)"
        let login = loginRole.isEmpty ? "LOGIN" : loginRole
        var explained = error
        if counts?.everywhere == 0 {
            explained.message = "\(role) has no entry in the user directory, so row-level security gives it no rows to write: the administrator adds it with `stratus users add \(login)\(container.map { $0 == "default" ? "" : " --container \($0)" } ?? "")` (as the tables' owner). \(error.message)"
        } else if error.message.contains("\"record_types\"") {
            explained.message = "row-level security refused a schema change: \(role) may add record types and fields to a development schema; a production schema, grants and indexes are the tables' owner's to change (run `stratus schema deploy` or `schema import` as that role). \(error.message)"
        } else if let container, counts?.here == 0 {
            explained.message = "\(role) has no entry in the user directory of container \(container) (it has one in another container; each container has its own directory), so row-level security gives it no rows to write there: the administrator adds it with `stratus users add \(login) --container \(container)` (as the tables' owner). \(error.message)"
        } else if error.message.contains("\"zones\"") || error.message.contains("\"zone_tombstones\"") {
            // With an entry here, the zones it may not write are the public database's.
            explained.message = "row-level security refused a zone: \(role) creates and deletes zones in its own private database; the public database's zones other than its default zone are the tables' owner's to create and delete (run `stratus zones create` or `zones delete` as that role). \(error.message)"
        } else {
            explained.message = "row-level security refused a row: \(role) writes only the rows of the user record names the directory gives it (each container has its own directory: `stratus users add \(login) --container \(container ?? "C")`, as the tables' owner, for a container it has no entry in), and in the public database records it creates itself and those it created or whose type's grants let it write. \(error.message)"
        }
        return explained
    }

    /// Runs a statement written with `?` placeholders.
    static func query(_ connection: PostgresConnection, _ sql: String, _ parameters: [SQLValue]) throws -> PostgresResult {
        try connection.query(PostgresSQL.numbered(sql), parameters.map(PostgresSQL.value))
    }

    // MARK: - Zones

    /// The key columns (container, db, owner) of a database's rows.
    static func databaseKey(_ database: DatabaseContext) -> [PostgresValue] {
        [.text(database.storageContainer), .int64(Int64(database.storageScope.rawValue)), .text(database.storageOwner)]
    }

    /// Zones owned by the database's own user are stored with an empty owner, so that
    /// `__defaultOwner__` and the user's record name mean the same zone.
    static func zoneOwner(_ zoneID: RecordZone.ID, _ database: DatabaseContext) -> String {
        database.storedZoneOwner(zoneID)
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
                           capabilities: RecordZone.Capabilities(rawValue: UInt(truncatingIfNeeded: try row.int64(2) ?? 0)), start: try row.int64(3) ?? 0)
    }

    /// Creates a zone's row unless it exists (another writer may create it at the same time).
    @discardableResult
    func insertZone(_ zoneID: RecordZone.ID, capabilities: RecordZone.Capabilities, _ database: DatabaseContext, on connection: PostgresConnection) throws -> Bool {
        try connection.execute("""
            INSERT INTO zones(container, db, owner, zone_name, zone_owner, capabilities, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)
            ON CONFLICT (container, db, owner, zone_name, zone_owner) DO NOTHING
            """, Self.databaseKey(database) + [.text(zoneID.zoneName), .text(Self.zoneOwner(zoneID, database)),
                                               .int64(Int64(truncatingIfNeeded: capabilities.rawValue)), .double(Date().timeIntervalSinceReferenceDate)]) == 1
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

    /// The `underlyingError` of the `badContainer` error of an engine opened without `create`
    /// on a database that holds no Stratus store, so that a tool can say what makes one.
    ///
    /// ```swift
    /// } catch let error as StratusError where error.underlyingError is PostgresEngine.StoreMissing {
    ///     print("run an import first")
    /// }
    /// ```
    public struct StoreMissing: Error, Sendable, CustomStringConvertible {
        /// Which database holds no store, and where: `the database app at postgresql://… holds
        /// no Stratus store in schema public (the database exists)`.
        public let description: String
    }

    /// One life of a zone: zone IDs come from a sequence and are never reused.
    func zoneIncarnation(_ zoneRow: Int64) -> String { ChangeHistoryRules.zoneIncarnation(store: identity, zoneRow: zoneRow) }

    // MARK: - Records

    /// Builds a record from a row whose first columns are ``PostgresSchema/recordColumns``
    /// (or ``PostgresSchema/queryRecordColumns``, with the query's `recordType`).
    func decodeRecord(_ row: PostgresRow, zoneID: RecordZone.ID, recordType: String? = nil) throws -> Record {
        var recent = PostgresRecentTexts(keepsDocumentShape: false)
        return try decodeRecord(row, zoneID: zoneID, recordType: recordType, recent: &recent)
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
            return try FieldDocument.decodeStoredDocument(utf8: document, zoneID: zoneID, shape: &recent.documentShape, recordName: name) { self.cachedAssetURL($0) }
        }
        let parent = try row.text(8).map { Record.Reference(recordID: Record.ID(recordName: $0, zoneID: zoneID), action: .none) }
        return Record.stored(recordType: try recordType ?? recent.recordType(row, column: 1), recordID: Record.ID(recordName: name, zoneID: zoneID), systemFields: system,
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
    /// The bytes ``withBytes(_:_:)`` gives, valid while the result lives: `.some(nil)` for
    /// NULL, nil for jsonb of an unknown version.
    func storedText(_ column: Int) -> UnsafeBufferPointer<UInt8>?? {
        guard let (type, bytes) = raw(column) else { return .some(nil) }
        var content = UnsafeRawBufferPointer(bytes)
        if type == PostgresType.jsonb {
            guard content.first == 1 else { return nil }
            content = UnsafeRawBufferPointer(rebasing: content.dropFirst())
        }
        return content.bindMemory(to: UInt8.self)
    }

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
    /// How many inserts of new rows into a zone are checked after a COPY into it first found a
    /// stored name (a re-run import): each such COPY costs its transaction twice, and leaves
    /// an ERROR line in the server's log. Each later conflict in the zone doubles the count, so
    /// a job that keeps meeting stored names tries COPY ever more rarely.
    static let checkedInsertsAfterConflict = 16

    /// A zone's checked inserts to go before COPY is tried again, and how many the next
    /// conflict gives.
    struct CopyConflicts {
        var remaining: Int
        var nextSpan: Int
    }

    /// Whether new rows of this zone go in with `COPY` (``PostgresWriteTransaction``): not
    /// when the server refused it, nor for a while after a COPY into the zone met stored names.
    func mayCopy(intoZone zoneRow: Int64) -> Bool {
        guard !copyRefused.withLock({ $0 }) else { return false }
        return copyConflicts.withLock { conflicts in
            guard let entry = conflicts[zoneRow], entry.remaining > 0 else { return true }
            conflicts[zoneRow]?.remaining -= 1
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
            for zone in zones {
                let span = conflicts[zone]?.nextSpan ?? Self.checkedInsertsAfterConflict
                conflicts[zone] = CopyConflicts(remaining: span, nextSpan: min(span * 2, 1 << 20))
            }
        }
    }
}

// MARK: - Opening

/// What the engine learns about the database before it opens the store: whether the tables
/// are there, where, who owns them and whether this role may read them.
struct StoreProbe {
    /// Whether `meta` and `records` exist in the current schema.
    var exists: Bool
    /// The current schema (`nil` when no schema of the `search_path` exists).
    var schema: String?
    var database: String
    /// The role the connection acts as.
    var role: String
    /// The role that owns the tables, when they exist.
    var owner: String?
    /// Whether the role is (or acts as a member of) the tables' owner.
    var ownsTables: Bool
    /// Whether row-level security applies to this role's use of the records table, which
    /// PostgreSQL then refuses `COPY FROM`.
    var rowSecurityBindsRecords: Bool
    /// Where the tables are or would be, for messages: `in schema public`.
    var whereTables: String { schema.map { "in schema \($0)" } ?? "(the search_path names no schema that exists)" }
    /// Other schemas of the database that hold Stratus's tables, when the current one does not:
    /// a store in a schema named after its owner (PostgreSQL's `"$user"` in the search_path)
    /// is found by that role alone.
    var otherSchemas: [String] = []
    /// For messages about a missing store: which other schema holds one and how to name it,
    /// or nothing.
    var elsewhere: String {
        guard let other = otherSchemas.first else { return "" }
        let simple = other.wholeMatch(of: #/[a-z_][a-z0-9_]*/#) != nil
        let name = (simple ? other : "\"" + other.replacingOccurrences(of: "\"", with: "\"\"") + "\"")
            .addingPercentEncoding(withAllowedCharacters: CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")) ?? other
        return "; schema \(other) holds one, which this role's search_path does not name: add ?options=-c%20search_path%3D\(name) to the URL (or &options=… after other parameters)"
    }

    /// - Throws: `badContainer` when the `search_path` names no schema that exists;
    ///   `permissionFailure`, saying which group or grant is missing, when the role may not
    ///   read the store's tables; `badDatabase` when the schema holds another program's table
    ///   under the name of one of Stratus's (`meta`, `zones`, `records`).
    init(on connection: PostgresConnection) throws {
        let row = try connection.query("""
            SELECT to_regclass('meta') IS NOT NULL AND to_regclass('records') IS NOT NULL, current_schema()::text, current_database()::text, CURRENT_USER::text,
                   (SELECT pg_catalog.pg_get_userbyid(c.relowner)::text FROM pg_catalog.pg_class c WHERE c.oid = to_regclass('meta')),
                   coalesce((SELECT pg_catalog.pg_has_role(CURRENT_USER, c.relowner, 'USAGE') FROM pg_catalog.pg_class c WHERE c.oid = to_regclass('meta')), false),
                   coalesce(pg_catalog.has_table_privilege(to_regclass('meta'), 'SELECT'), false),
                   -- Row-level security on, and no Stratus policy for this role: it would read no rows.
                   coalesce((SELECT c.relrowsecurity FROM pg_catalog.pg_class c WHERE c.oid = to_regclass('records')), false)
                   AND NOT coalesce((SELECT pg_catalog.pg_has_role(CURRENT_USER, c.relowner, 'USAGE') FROM pg_catalog.pg_class c WHERE c.oid = to_regclass('meta')), false)
                   AND NOT coalesce((SELECT r.rolsuper OR r.rolbypassrls FROM pg_catalog.pg_roles r WHERE r.rolname = CURRENT_USER), false)
                   AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_policies p, unnest(p.roles) AS g
                                   WHERE p.schemaname = current_schema() AND p.tablename = 'records' AND p.policyname LIKE 'stratus\\_%'
                                     AND g <> 'public' AND pg_catalog.pg_has_role(CURRENT_USER, g, 'MEMBER')),
                   -- PostgreSQL's own test (check_enable_rls): on, and neither exempt nor the owner of a table that does not force it.
                   coalesce((SELECT c.relrowsecurity AND NOT (pg_catalog.pg_has_role(CURRENT_USER, c.relowner, 'USAGE') AND NOT c.relforcerowsecurity)
                             FROM pg_catalog.pg_class c WHERE c.oid = to_regclass('records')), false)
                   AND NOT coalesce((SELECT r.rolsuper OR r.rolbypassrls FROM pg_catalog.pg_roles r WHERE r.rolname = CURRENT_USER), false)
            """)[0]
        exists = try row.bool(0) ?? false
        schema = try row.text(1)
        database = try row.text(2) ?? ""
        role = try row.text(3) ?? ""
        owner = try row.text(4)
        ownsTables = try row.bool(5) ?? false
        rowSecurityBindsRecords = try row.bool(8) ?? false
        guard schema != nil else {
            // current_schema() skips schemas the role may not use: one of those is where the store is.
            let path = try connection.query("SELECT current_setting('search_path')")[0].text(0) ?? ""
            let names = path.split(separator: ",").map { item -> String in
                let name = item.trimmingCharacters(in: .whitespaces)
                if name == "\"$user\"" || name == "$user" { return role }
                return name.hasPrefix("\"") && name.hasSuffix("\"") && name.count >= 2 ? String(name.dropFirst().dropLast()).replacingOccurrences(of: "\"\"", with: "\"") : name
            }
            let unusable = try connection.query("""
                SELECT n.nspname::text FROM pg_catalog.pg_namespace n, unnest($1::text[]) WITH ORDINALITY AS p(name, place)
                WHERE n.nspname = p.name AND NOT pg_catalog.has_schema_privilege(n.oid, 'USAGE') ORDER BY p.place LIMIT 1
                """, [.textArray(names)]).first?.text(0)
            if let unusable {
                throw StratusError(.permissionFailure, "role \(role) may not use schema \(unusable) of database \(database), where the store is: \(try Self.accessAdvice(role: role, schema: unusable, on: connection))")
            }
            throw StratusError(.badContainer, "no schema of the search_path (\(path)) exists in database \(database); create it first (CREATE SCHEMA name AUTHORIZATION owner), or name another with ?options=-c%20search_path%3Dname")
        }
        // Another program's table of one of the names Stratus's core tables take (`records`
        // and `zones` are common names) is no store: creating the store beside it would fail
        // half-way with an SQL error naming a column, and a read would call the schema empty.
        let foreign = try connection.query("""
            SELECT c.relname::text FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = current_schema() AND c.relname IN ('meta', 'zones', 'records')
              AND (SELECT count(*) FROM pg_catalog.pg_attribute a
                   WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
                     AND a.attname = ANY (CASE c.relname WHEN 'meta' THEN ARRAY['key', 'value']
                                                         WHEN 'zones' THEN ARRAY['zone_id', 'zone_name']
                                                         ELSE ARRAY['zone_id', 'record_name'] END)) < 2
            ORDER BY 1
            """).compactMap { try $0.text(0) }
        if !foreign.isEmpty {
            throw StratusError(.badDatabase, "schema \(schema ?? "?") of database \(database) holds another program's table\(foreign.count == 1 ? "" : "s") \(foreign.joined(separator: ", ")), not a Stratus store's; Stratus neither reads nor changes \(foreign.count == 1 ? "it" : "them"): keep the store in a schema of its own (?options=-c%20search_path%3Dname)")
        }
        if !exists {
            otherSchemas = try connection.query("""
                SELECT n.nspname::text FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                WHERE c.relname = 'meta' AND c.relkind = 'r' AND n.nspname IS DISTINCT FROM current_schema()
                  AND EXISTS (SELECT 1 FROM pg_catalog.pg_class r WHERE r.relnamespace = n.oid AND r.relname = 'records' AND r.relkind IN ('r', 'p'))
                ORDER BY 1 LIMIT 3
                """).compactMap { try $0.text(0) }
        }
        if try exists && !(row.bool(6) ?? false) {
            throw StratusError(.permissionFailure, "role \(role) may not read the Stratus store in database \(database) \(whereTables): \(try Self.accessAdvice(role: role, schema: schema, on: connection))")
        }
        // A role granted the tables but outside the group (a reporting role given SELECT on
        // every table) would count 0 and export nothing, exit 0.
        if try exists && row.bool(7) == true {
            throw StratusError(.permissionFailure, "role \(role) may read the tables of the Stratus store in database \(database) \(whereTables), but row-level security gives it no rows: \(try Self.accessAdvice(role: role, schema: schema, on: connection))")
        }
    }

    /// What gives `role` access: membership of the group row-level security was set up for, or
    /// the owner's grant when there is none.
    static func accessAdvice(role: String, schema: String?, on connection: PostgresConnection) throws -> String {
        let groups = try PostgresEngine.rowSecurityGroups(on: connection, schema: schema)
        let owner = try connection.query("""
            SELECT pg_catalog.pg_get_userbyid(c.relowner)::text FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = coalesce($1, current_schema()) AND c.relname = 'meta'
            """, [schema.map(PostgresValue.text) ?? .null]).first?.text(0)
        if groups.isEmpty {
            return "it is not the tables' owner (\(owner ?? "unknown")), and row-level security was not set up for a group of users (stratus users row-security --group GROUP, as \(owner ?? "the owner")); connect as \(owner ?? "the owner")"
        }
        let group = groups.joined(separator: " or ")
        return "make it a member of \(group), the group row-level security was set up for (GRANT \(groups[0]) TO \(role), as a superuser or a role with CREATEROLE), and give it an entry in the user directory (stratus users add \(role), as \(owner ?? "the tables' owner"))"
    }
}
