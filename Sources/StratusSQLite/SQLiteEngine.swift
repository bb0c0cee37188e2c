import CSQLite
import Foundation
@_spi(StratusEngine) import Stratus
import StratusSQL
import Synchronization

/// The embedded storage engine: one SQLite file (plus a folder of asset files beside it).
///
/// Many threads and many processes may use one store at once: the store runs in WAL mode,
/// each engine has one writer connection and a small pool of readers, writes take
/// `BEGIN IMMEDIATE`, and a writer that waits longer than ``busyTimeout`` gets a `zoneBusy`
/// error (with `retryAfterSeconds`), which operations retry.
///
/// ```swift
/// let engine = try SQLiteEngine(path: "/var/lib/stratus/todo.sqlite")
/// let container = Container(identifier: "com.example.todo", engine: engine)
/// ```
public final class SQLiteEngine: StorageEngine, @unchecked Sendable {
    // @unchecked: connections are not thread-safe objects; `writer` is only touched while
    // `writerLock` is held, and a reader connection belongs to one thread between
    // `takeReader` and `returnReader`, which move it in and out of `idleReaders` under `readersLock`.

    /// The database file.
    public let path: String
    /// The folder holding asset contents, beside the database file.
    public let assetsDirectory: URL
    /// How long a write waits for another writer before failing with `zoneBusy`.
    public let busyTimeout: Duration
    /// How long tombstones of deleted records and zones are kept before automatic compaction
    /// removes them (change tokens from before a removed tombstone expire); `nil` keeps them.
    public let tombstoneRetention: Duration?
    /// When this engine compacts on its own.
    let compaction = CompactionSchedule()
    /// The store's identity, once read (see ``storeIdentifier``).
    let knownStoreIdentifier = Mutex<String?>(nil)

    private let writerLock = NSLock()
    private let writer: SQLiteConnection
    /// Checkpoints the write-ahead log for the writer, in the background.
    private let checkpointer: SQLiteCheckpointer
    private let readersLock = NSLock()
    private var idleReaders: [SQLiteConnection] = []
    /// Set by ``close()`` under `writerLock`: the writer is closed.
    private var writerClosed = false
    /// Set by ``close()`` under `readersLock`: whether a reader handed back is closed folding
    /// the log (nil while the store is open).
    private var readersClosed: Bool?
    private static let maximumIdleReaders = 4

    /// Tombstones are kept this long by default: 30 days.
    public static let defaultTombstoneRetention: Duration = .seconds(30 * 86_400)

    /// Whether the store was opened for reading only.
    public let isReadOnly: Bool

    /// Whether opening the engine made the store's tables (the file held none). Decided in the
    /// write transaction that makes them: of processes that open the same new store at once,
    /// only the one that made its tables says so.
    ///
    /// ```swift
    /// let engine = try SQLiteEngine(path: "new.sqlite")
    /// if engine.createdStore { print("created a new store at \(engine.path)") }
    /// ```
    public var createdStore: Bool { madeTables.withLock { $0 } }
    private let madeTables = Mutex(false)

    /// Opens the store at `path`, creating it (and its folder) when missing.
    ///
    /// `tombstoneRetention` is how long deletions stay in the change history (see
    /// ``tombstoneRetention``); `nil` keeps them for ever. With `readOnly`, the store must
    /// exist and is only read (SQLite's `SQLITE_OPEN_READONLY`): for a user who may read the
    /// file but not write it or its folder. Writes then fail with `permissionFailure`; while no
    /// writer has the store open, reading also needs its `-shm` file or the right to create it.
    ///
    /// ```swift
    /// let backup = try SQLiteEngine(path: "/srv/stratus/app.sqlite", readOnly: true)
    /// ```
    ///
    /// - Throws: ``StratusError`` `badContainer` when the file cannot be opened or created,
    ///   `badDatabase` when it is not a Stratus store or was made by a newer version,
    ///   `permissionFailure` saying what access is missing when a read-only store cannot be read
    ///   or needs an upgrade, and `badContainer` for a PostgreSQL URL (which would otherwise
    ///   become a file named after it).
    public init(path: String, busyTimeout: Duration = .seconds(5), tombstoneRetention: Duration? = SQLiteEngine.defaultTombstoneRetention, readOnly: Bool = false) throws {
        try Self.refuseURL(path)
        try Self.refuseSpecialFile(path)
        try Self.refuseCompanionFile(path)
        if !readOnly { try Self.refuseSecondName(path) }
        self.path = path
        self.busyTimeout = busyTimeout
        self.tombstoneRetention = tombstoneRetention
        self.isReadOnly = readOnly
        self.assetsDirectory = URL(fileURLWithPath: path + ".assets", isDirectory: true)
        if !readOnly { try Self.createPrivately(path) }
        writer = try SQLiteConnection(path: path, create: !readOnly, readOnly: readOnly, busyTimeoutMilliseconds: Self.milliseconds(busyTimeout))
        checkpointer = SQLiteCheckpointer(path: path, busyTimeoutMilliseconds: Self.milliseconds(busyTimeout))
        if readOnly {
            guard try isCurrent() else {
                // A version this Stratus cannot upgrade from is refused as such: write access
                // would not help.
                let found = try writerLock.withLock {
                    defer { writer.resetActiveStatements() }
                    return try writer.queryText("PRAGMA user_version").flatMap { Int64($0) } ?? 0
                }
                try refuseUnreadableVersion(found)
                throw StratusError(.permissionFailure, "the store at \(path) needs an upgrade to this version of Stratus, which needs write access to it; open it once with write access")
            }
            return
        }
        try migrate()
        // SQLite writes a new file's first transaction (the tables) through a rollback journal,
        // so the writer of a store it just made has not opened its log: a read opens it, or a
        // run that then writes nothing would not know the log it leaves at exit as its own.
        try writerLock.withLock {
            defer { writer.resetActiveStatements() }
            _ = try writer.queryText("SELECT count(*) FROM sqlite_master")
        }
        // The log the writer reads and writes from now on: one put in its place later (a
        // restore) is not this store's, for commits and for the fold at exit alike.
        writer.noteLogIdentity()
        checkpointer.install(on: writer)
    }

    deinit {
        checkpointer.uninstall(from: writer)
    }

    /// Refuses a PostgreSQL URL given where an SQLite path belongs (`$STRATUS_STORE` set for the
    /// `stratus` tool, read by a program that opens SQLite stores only): as a path it would
    /// create an empty store in a folder named `postgresql:`.
    static func refuseURL(_ path: String) throws {
        let lowered = path.prefix(12).lowercased()
        guard lowered.hasPrefix("postgres:") || lowered.hasPrefix("postgresql:") else { return }
        throw StratusError(.badContainer, "a PostgreSQL URL (\(path.prefix(while: { $0 != ":" })):…) names no SQLite store: open it with StratusPostgres (Container(identifier:postgresURL:) or PostgresEngine(url:))")
    }

    /// The endings of the files SQLite keeps beside a store (`app.sqlite-wal`, …): its log, the
    /// log's shared-memory index and a rollback journal. They are the store's as much as its file.
    ///
    /// ```swift
    /// let files = [path] + SQLiteEngine.companionSuffixes.map { path + $0 }
    /// ```
    public static let companionSuffixes = ["-wal", "-shm", "-journal"]

    /// Refuses a path that names another store's log, shared-memory or rollback file
    /// (`app.sqlite-wal`, a completed name away from `app.sqlite`): a store made there would
    /// live inside the other store's log, and the next write to either would destroy committed
    /// transactions of the other.
    static func refuseCompanionFile(_ path: String) throws {
        var names = [path]
        if let resolved = realpath(path, nil) {
            names.append(String(cString: resolved))
            free(resolved)
        } else if let target = try? FileManager.default.destinationOfSymbolicLink(atPath: path) {
            // A link to a log that is not there at the moment (SQLite deletes it when the last
            // connection closes) still names it.
            names.append(target.hasPrefix("/") ? target : URL(fileURLWithPath: path).deletingLastPathComponent().appendingPathComponent(target).path)
        }
        for name in names {
            for suffix in companionSuffixes where name.hasSuffix(suffix) {
                let store = String(name.dropLast(suffix.count))
                guard isSQLiteFile(store) else { continue }
                throw StratusError(.badContainer, "cannot open the store at \(path): it is the \(suffix.dropFirst()) file of the store at \(store), which SQLite writes that store's transactions to; name that store itself, or a file of another name")
            }
        }
    }

    /// Whether `path` is a regular file that begins as every SQLite database does.
    private static func isSQLiteFile(_ path: String) -> Bool {
        // Without blocking: opening a FIFO for reading would wait for a writer.
        let descriptor = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard descriptor >= 0 else { return false }
        let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        var info = stat()
        guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return false }
        return (try? handle.read(upToCount: 16)) == Data("SQLite format 3\u{0}".utf8)
    }

    /// Refuses a path that names something other than a regular file (a device such as
    /// `/dev/null`, a FIFO, a directory): SQLite would put its journal beside it and fail later.
    static func refuseSpecialFile(_ path: String) throws {
        var info = stat()
        guard stat(path, &info) == 0 else { return }   // missing: created as a new store
        switch info.st_mode & S_IFMT {
        case S_IFREG: return
        case S_IFDIR: throw StratusError(.badContainer, "cannot open the store at \(path): it is a folder, not a file")
        default: throw StratusError(.badContainer, "cannot open the store at \(path): it is a device, FIFO or socket, not a regular file")
        }
    }

    /// Refuses a store file that has more than one name (a hard link, from `ln`, `cp -al` or an
    /// `rsync --link-dest` snapshot): SQLite keeps a store's log and shared-memory index beside
    /// the name it was opened by, so two names of one store keep two logs, each name reads its
    /// own, and the first checkpoint through one name discards what the other committed.
    /// A symbolic link is one name (SQLite follows it to the file's own). Reading it read-only
    /// (a hard-link snapshot of a backup) writes nothing, and is not refused.
    static func refuseSecondName(_ path: String) throws {
        guard let others = otherNames(path) else { return }
        throw StratusError(.badDatabase, "cannot open the store at \(path) for writing: the file has \(others) other name(s) (hard links, as a snapshot made with cp -al or rsync --link-dest has), and SQLite keeps a store's log beside each name it is opened by, so writes through one name would discard what another committed. Write to a store of one name: remove the other links, or copy the file (cp, while nothing writes it) and use the copy; reading it read-only works")
    }

    /// How many other names (hard links) the regular file at `path` has; nil for none.
    public static func otherNames(_ path: String) -> Int? {
        var info = stat()
        guard stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_nlink > 1 else { return nil }
        return Int(info.st_nlink) - 1
    }

    /// Creates the store's folder (mode 0700) and file (mode 0600) when missing, so that only
    /// their owner can read them: on SQLite, whoever can read the file can read every record
    /// in it. SQLite gives the write-ahead log and shared-memory files the file's mode.
    private static func createPrivately(_ path: String) throws {
        // A file system mounted read-only (one the kernel remounted after an error, say) lets
        // SQLite open the file for reading only, and the first write fails as "unable to open
        // database file": said here as the missing access it is. Where SQLite writes: beside
        // the file a link names, else in the nearest folder there is (a missing one is made).
        if let folder = readOnlyFileSystemFolder(for: path) {
            throw StratusError(.permissionFailure, FileManager.default.fileExists(atPath: path)
                ? "cannot write the store at \(path): \(folder) is on a read-only file system (mount it writable, or copy the store to a writable folder)"
                : "cannot create the store at \(path): \(folder) is on a read-only file system (mount it writable, or name a store in a writable folder)")
        }
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent()
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            // A folder on the way that this user may not enter or write is a permission problem.
            let denied = ((error as NSError).userInfo[NSUnderlyingErrorKey] as? NSError)?.code == Int(EACCES) || (error as NSError).code == NSFileWriteNoPermissionError
            throw StratusError(denied ? .permissionFailure : .badContainer, "cannot create the folder \(directory.path) for the store: \(error.localizedDescription)")
        }
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if descriptor >= 0 {
            // Through FileHandle: inside the engine, `close` names ``close()``.
            try? FileHandle(fileDescriptor: descriptor, closeOnDealloc: false).close()
        } else if errno != EEXIST {
            let code = errno
            throw StratusError(code == EACCES || code == EROFS ? .permissionFailure : .badContainer, "cannot create the store \(path): \(String(cString: strerror(code)))")
        }
    }

    /// The folder on a read-only file system where a writer of the store at `path` would
    /// write (its `-wal` beside the file a link names), or nil.
    private static func readOnlyFileSystemFolder(for path: String) -> String? {
        var file = path
        if let real = realpath(path, nil) {
            file = String(cString: real)
            free(real)
        }
        var folder = URL(fileURLWithPath: file).deletingLastPathComponent().path
        while !FileManager.default.fileExists(atPath: folder) && folder != "/" {
            folder = URL(fileURLWithPath: folder).deletingLastPathComponent().path
        }
        var fileSystem = statvfs()
        guard statvfs(folder, &fileSystem) == 0, fileSystem.f_flag & UInt(ST_RDONLY) != 0 else { return nil }
        return folder
    }

    private static func milliseconds(_ duration: Duration) -> Int32 {
        Int32(clamping: duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000)
    }

    /// Brings the store's tables up to date. A current store is only read, so that opening a
    /// store never waits for another process's write transaction.
    private func migrate() throws {
        if (try? isCurrent()) == true { return }
        try writeTransaction { connection in
            let version = try connection.statement("PRAGMA user_version")
            _ = try version.step()
            let found = version.int64(0)
            try refuseUnreadableVersion(found)
            let empty = try connection.queryText("SELECT count(*) FROM sqlite_master") == "0"
            // Every statement is CREATE … IF NOT EXISTS, so running them on each open is cheap
            // and brings stores made by earlier builds of the same version up to date.
            try connection.execute(SQLiteSchema.create)
            try connection.execute(SQLiteSchema.indexing)
            try connection.execute(SQLiteSchema.users)
            try connection.execute(SQLiteSchema.userDiscovery)
            try connection.execute(SQLiteSchema.assetTables)
            try connection.execute(SQLiteSchema.subscriptions)
            try connection.execute(SQLiteSchema.shareIndex)
            try connection.execute(SQLiteSchema.hierarchyMoves)
            let columns = try addMissingColumns(on: connection)
            if found < SQLiteSchema.version || !columns.contains("change_key") {
                connection.resetActiveStatements()   // DROP TABLE needs no statement of this connection running
                try connection.execute(SQLiteSchema.upgrade(recordsAreKeyed: columns.contains("change_key")))
                try synchronizeIndexes(on: connection)
                if found < 4 { try refoldDocuments(on: connection) }
                if found < 5 { try upgradeUserNames(on: connection) }
                if found < SQLiteSchema.assetStoreVersion { try upgradeAssetStore(on: connection) }
                if found < 8 { try addJobPositionText(on: connection) }
                if found < SQLiteSchema.shareIndexVersion { try indexStoredShares(on: connection) }
                if found < SQLiteSchema.grantsNothingVersion {
                    try connection.execute("UPDATE record_types SET schema = json_remove(schema, '$.grants') WHERE json_valid(schema) AND json_extract(schema, '$.grants') = '{}'")
                }
                try connection.execute("PRAGMA user_version = \(SQLiteSchema.version)")
                try connection.execute("PRAGMA application_id = \(SQLiteSchema.applicationID)")
            }
            madeTables.withLock { $0 = empty }
        }
    }

    /// Rewrites the field documents that hold non-ASCII text, whose folded copies older
    /// versions made by lowercasing instead of case folding (version 4). A document is
    /// non-ASCII exactly when its length in characters differs from its length in bytes.
    private func refoldDocuments(on connection: SQLiteConnection) throws {
        let select = try connection.uncachedStatement("""
            SELECT change_key, fields FROM records WHERE change_key > ? AND length(fields) != length(CAST(fields AS BLOB))
            ORDER BY change_key LIMIT 1000
            """)
        let update = try connection.uncachedStatement("UPDATE records SET fields = ? WHERE change_key = ?")
        var after = Int64.min
        while true {
            // A thousand documents at a time, so that memory stays flat on a large store.
            select.reset()
            try select.bind([.integer(after)])
            var rewritten: [(Int64, [UInt8])] = []
            while try select.step() {
                let (fields, encrypted) = try FieldDocument.decodeDocument(select.text(1) ?? "{}", zoneID: .default) { _ in nil }
                rewritten.append((select.int64(0), FieldDocument.encodedBytes(fields, encryptedKeys: encrypted)))
            }
            guard let last = rewritten.last else { return }
            for (key, document) in rewritten {
                update.reset()
                try update.bind([.text(String(decoding: document, as: UTF8.self)), .integer(key)])
                try update.step()
            }
            after = last.0
        }
    }

    /// Version 6's step: the text position column of `job_progress`, unless the table was
    /// made just now (with it).
    private func addJobPositionText(on connection: SQLiteConnection) throws {
        let columns = try connection.statement("SELECT name FROM pragma_table_info('job_progress')")
        var names: Set<String> = []
        while try columns.step() { names.insert(columns.text(0) ?? "") }
        columns.reset()
        if !names.contains("position_text") { try connection.execute(SQLiteSchema.addJobPositionText) }
    }

    /// Throws `badDatabase` for a schema version this Stratus neither reads nor upgrades: a
    /// newer one, or a negative one, which no Stratus writes. Taken as an old version, a
    /// negative one would run the upgrade step of every earlier version over current data and
    /// rewrite it (user names that are not record names became derived ones).
    private func refuseUnreadableVersion(_ found: Int64) throws {
        if found > SQLiteSchema.version {
            throw StratusError(.badDatabase, "the store at \(path) has schema version \(found); this Stratus reads up to \(SQLiteSchema.version). Use a newer Stratus.")
        }
        if found < 0 {
            throw StratusError(.badDatabase, "the store at \(path) has schema version \(found), which no Stratus writes: the file's header is damaged, and Stratus neither reads nor upgrades it (restore it from a copy)")
        }
    }

    /// Whether the store has this version's every table, index, column and its store row.
    private func isCurrent() throws -> Bool {
        try writerLock.withLock {
            guard try writer.queryText("PRAGMA user_version") == String(SQLiteSchema.version) else { return false }
            var existing: Set<String> = []
            let objects = try writer.statement("SELECT name FROM sqlite_master")
            while try objects.step() { existing.insert(objects.text(0) ?? "") }
            let columns = try writer.statement("SELECT name FROM pragma_table_info('records')")
            var names: Set<String> = []
            while try columns.step() { names.insert(columns.text(0) ?? "") }
            let storeRow = existing.contains("store_info") ? try writer.queryText("SELECT count(*) FROM store_info") : nil
            writer.resetActiveStatements()
            return SQLiteSchema.objectNames.isSubset(of: existing) && names.contains("parent_name") && names.contains("change_key") && storeRow == "1"
        }
    }

    /// Columns added to version 1 during its development; stores made before them get them
    /// here. Returns the records table's columns.
    private func addMissingColumns(on connection: SQLiteConnection) throws -> Set<String> {
        let columns = try connection.statement("SELECT name FROM pragma_table_info('records')")
        var names: Set<String> = []
        while try columns.step() { names.insert(columns.text(0) ?? "") }
        if !names.contains("parent_name") {
            try connection.execute("ALTER TABLE records ADD COLUMN parent_name TEXT")
            names.insert("parent_name")
        }
        let tombstoneColumns = try connection.statement("SELECT name FROM pragma_table_info('tombstones')")
        var tombstoneNames: Set<String> = []
        while try tombstoneColumns.step() { tombstoneNames.insert(tombstoneColumns.text(0) ?? "") }
        tombstoneColumns.reset()
        if !tombstoneNames.contains("left_roots") { try connection.execute("ALTER TABLE tombstones ADD COLUMN left_roots TEXT") }
        return names
    }

    // MARK: - Connections and transactions

    /// Closes the store's connections now, on the calling thread, instead of when the last
    /// reference to the engine goes (which may be on any thread, at any time, a job's thread
    /// letting go of it a moment after the job answered). Call it once the work on the store
    /// has ended: a write waits for the one in progress, a background checkpoint is waited
    /// for, and a reader in use (a query stream not closed yet) is closed when handed back,
    /// keeping the log until then; later calls throw (closing again does nothing). As the store's last connection closes, SQLite copies the log into the
    /// file and removes the `-wal` and `-shm` files, unless the file or the log at the path
    /// was replaced under this process (a restore): then both are left as they are, as
    /// ``foldLogsOfOpenStores()`` leaves them.
    ///
    /// ```swift
    /// try await importer.run(from: reader)
    /// engine.close()
    /// ```
    public func close() {
        let folding = writerLock.withLock { () -> Bool? in
            guard !writerClosed else { return nil }
            writerClosed = true
            checkpointer.uninstall(from: writer)
            return !writer.fileHasMoved && !writer.logHasMoved && (isReadOnly || writer.knowsItsLog)
        }
        guard let foldingLog = folding else { return }
        checkpointer.close(foldingLog: foldingLog)
        let readers = readersLock.withLock { () -> [SQLiteConnection] in
            readersClosed = foldingLog
            defer { idleReaders = [] }
            return idleReaders
        }
        for reader in readers { reader.close(foldingLog: foldingLog) }
        writerLock.withLock { writer.close(foldingLog: foldingLog) }
        if isReadOnly { Self.leaveLogFilesWritableByTheirOwner(path) }
    }

    /// Whether ``close()`` closed the store (``SQLiteEngine/shared(path:)`` then opens it anew).
    public var isClosed: Bool { writerLock.withLock { writerClosed } }

    private var closedError: StratusError {
        StratusError(.internalError, "the store at \(path) was closed by this process; open it again to use it")
    }

    /// Runs `body` in a `BEGIN IMMEDIATE` transaction on the writer; rolls back when it throws.
    func writeTransaction<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        try writerLock.withLock {
            guard !writerClosed else { throw closedError }
            try writer.statement("BEGIN IMMEDIATE").step()
            do {
                let result = try body(writer)
                writer.resetActiveStatements()
                // A transaction committed into a file no longer at the path (a copy moved over
                // it, a restore, a deletion) is in no store anyone opens again: not committed,
                // and said so.
                if writer.fileHasMoved || writer.logHasMoved {
                    throw StratusError(.badDatabase, "the store file at \(path) or its write-ahead log (\(path)-wal) was replaced, moved or deleted while this process wrote to it; the last transaction was not committed, and what earlier ones wrote may be in files no store opens again. Stop the jobs that write a store before replacing it")
                }
                try writer.statement("COMMIT").step()
                writer.noteLogIdentity()
                return result
            } catch {
                writer.resetActiveStatements()
                try? writer.execute("ROLLBACK")
                throw error
            }
        }
    }

    /// A passive checkpoint on the writer: the log's pages no reader needs go into the file;
    /// none when the file or the log at the store's path is no longer the writer's (a restore
    /// put another in place, whose contents the old log's pages would overwrite).
    func foldLog() {
        guard !isReadOnly else { return Self.leaveLogFilesWritableByTheirOwner(path) }
        writerLock.withLock {
            guard !writerClosed else { return }
            // Only the log this connection knows is its own, at the path, into the file it
            // opened: a log it never saw may be a replaced store's, whose pages would undo a restore.
            guard writer.knowsItsLog, !writer.fileHasMoved, !writer.logHasMoved else { return }
            _ = sqlite3_wal_checkpoint_v2(writer.handle, nil, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
        }
    }

    /// Runs `body` in a read transaction (one consistent snapshot) on a pooled reader.
    func readTransaction<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        let connection = try takeReader()
        defer { returnReader(connection) }
        try connection.execute("BEGIN")
        defer {
            connection.resetActiveStatements()
            try? connection.execute("COMMIT")
        }
        return try body(connection)
    }

    func takeReader() throws -> SQLiteConnection {
        let idle = try readersLock.withLock { () throws -> SQLiteConnection? in
            guard readersClosed == nil else { throw closedError }
            return idleReaders.popLast()
        }
        if let idle { return idle }
        return try SQLiteConnection(path: path, create: false, readOnly: isReadOnly, busyTimeoutMilliseconds: Self.milliseconds(busyTimeout))
    }

    func returnReader(_ connection: SQLiteConnection) {
        let closing = readersLock.withLock { () -> Bool? in
            if let foldingLog = readersClosed { return foldingLog }
            if idleReaders.count < Self.maximumIdleReaders { idleReaders.append(connection) }
            return nil
        }
        // Handed back after the store closed: closed as the others were.
        if let foldingLog = closing { connection.close(foldingLog: foldingLog) }
    }

    // MARK: - Zones

    /// The row ID of a zone, or `nil` when it does not exist. The default zone is created on
    /// demand when `createDefault` is set.
    func zoneRowID(_ zoneID: RecordZone.ID, _ context: DatabaseContext, on connection: SQLiteConnection, createDefault: Bool) throws -> Int64? {
        let owner = Self.zoneOwner(zoneID, context)
        let select = try connection.statement("SELECT zone_id FROM zones WHERE container = ? AND db = ? AND owner = ? AND zone_name = ? AND zone_owner = ?")
        try select.bind([.text(context.storageContainer), .integer(Int64(context.storageScope.rawValue)), .text(context.storageOwner), .text(zoneID.zoneName), .text(owner)])
        if try select.step() { return select.int64(0) }
        guard createDefault, zoneID.isDefault else { return nil }
        return try insertZone(zoneID, capabilities: RecordZone.default.capabilities, context, on: connection)
    }

    /// Zones owned by the database's own user are stored with an empty owner, so that
    /// `__defaultOwner__` and the user's record name mean the same zone.
    static func zoneOwner(_ zoneID: RecordZone.ID, _ context: DatabaseContext) -> String {
        context.storedZoneOwner(zoneID)
    }

    // MARK: - Reading records

    @_spi(StratusEngine) public func fetchRecords(_ ids: [Record.ID], in database: DatabaseContext) throws -> [Record.ID: Record] {
        try readTransaction { connection in
            var found: [Record.ID: Record] = [:]
            var zoneRows: [RecordZone.ID: Int64?] = [:]
            for id in ids {
                let zoneRow: Int64?
                if let known = zoneRows[id.zoneID] {
                    zoneRow = known
                } else {
                    zoneRow = try zoneRowID(id.zoneID, database, on: connection, createDefault: false)
                    zoneRows[id.zoneID] = zoneRow
                }
                guard let zoneRow else { continue }
                if let record = try loadRecord(id, zoneRow: zoneRow, on: connection) { found[id] = record }
            }
            return found
        }
    }

    static let selectRecordByName = "SELECT \(SQLiteSchema.recordColumns) FROM records r WHERE r.zone_id = ? AND r.record_name = ?"

    func loadRecord(_ id: Record.ID, zoneRow: Int64, on connection: SQLiteConnection) throws -> Record? {
        try loadRecord(id, zoneRow: zoneRow, with: connection.statement(Self.selectRecordByName))
    }

    /// Reads a record with `select`, a prepared ``selectRecordByName`` that a writer keeps for
    /// its transaction: finding the statement by its text would hash that text for every record.
    func loadRecord(_ id: Record.ID, zoneRow: Int64, with select: SQLiteStatement) throws -> Record? {
        select.reset()
        try select.bind(zoneRow, at: 1)
        try select.bind(id.recordName, at: 2)
        guard try select.step() else { return nil }
        let record = try decodeRecord(select, zoneID: id.zoneID)
        select.reset()
        return record
    }

    /// Builds a record from a row whose first columns are ``SQLiteSchema/recordColumns``.
    func decodeRecord(_ row: some SQLiteRowValues, zoneID: RecordZone.ID) throws -> Record {
        var recent = SQLiteRecentTexts(keepsDocumentShape: false)
        return try decodeRecord(row, zoneID: zoneID, recent: &recent)
    }

    /// Builds a record from a row whose first columns are ``SQLiteSchema/recordColumns``,
    /// reusing the type and user names of the rows read before it.
    func decodeRecord(_ row: some SQLiteRowValues, zoneID: RecordZone.ID, recent: inout SQLiteRecentTexts) throws -> Record {
        let name = row.text(0) ?? ""
        let creator = recent.user(row, column: 3)
        // NULL modification columns repeat the creation ones (see recordColumns).
        let created = row.double(2)
        let system = Record.SystemFields(
            creationDate: Date(timeIntervalSinceReferenceDate: created),
            modificationDate: Date(timeIntervalSinceReferenceDate: row.isNull(4) ? created : row.double(4)),
            creatorUserRecordID: creator,
            lastModifiedUserRecordID: row.isNull(5) || row.hasSameText(5, as: 3) ? creator : recent.user(row, column: 5),
            recordChangeTag: row.text(6)
        )
        // Decoded from SQLite's own bytes: the document is never copied into a String.
        let decoded = try row.withTextBytes(7) { document -> FieldDocument.Decoded in
            guard let document else { return .nothing }
            return try FieldDocument.decodeStoredDocument(utf8: document, zoneID: zoneID, shape: &recent.documentShape, recordName: name) { self.assetContentURL($0) }
        }
        let parent = row.text(8).map { Record.Reference(recordID: Record.ID(recordName: $0, zoneID: zoneID), action: .none) }
        return Record.stored(recordType: recent.recordType(row, column: 1), recordID: Record.ID(recordName: name, zoneID: zoneID), systemFields: system, fields: decoded.fields,
                      parent: parent, encryptedKeys: decoded.encryptedKeys, jsonExtras: decoded.jsonExtras)
    }

    @_spi(StratusEngine) public func queryRecords(_ query: CompiledQuery, in database: DatabaseContext, after position: QueryPosition?, limit: Int) throws -> QueryPage {
        precondition(limit > 0, "queryRecords needs a positive limit")
        return try readTransaction { connection in
            // One row beyond the limit says whether more follow.
            guard var rows = try SQLiteQueryRows(engine: self, query: query, database: database, after: position, limit: limit + 1, on: connection) else {
                return QueryPage(records: [], nextPosition: nil)
            }
            defer { rows.finish() }
            let page = try rows.next(limit, on: connection)
            let more = try !page.exhausted && rows.hasMore(on: connection)
            return QueryPage(records: page.records, nextPosition: more ? page.nextPosition : nil)
        }
    }
}

/// A query's rows in order, read from its statement and then, for a descending first sort
/// key, from the statement of the rows where that key is missing (they sort last).
struct SQLiteQueryRows {
    let engine: SQLiteEngine
    let query: CompiledQuery
    /// The record type's schema: a field's declared type decides how its values sort.
    let schema: RecordTypeSchema?
    private var plans: [SQLQueryTranslation<SQLiteDialect>.Plan]
    private var recentTexts = SQLiteRecentTexts(keepsDocumentShape: true)
    private var statement: SQLiteStatement?

    /// The rows of `query` after `position` (at most `limit` of each statement; -1: all), or
    /// `nil` when the query's zone is the default zone and holds nothing yet.
    ///
    /// - Throws: `zoneNotFound` for a missing zone other than the default zone.
    init?(engine: SQLiteEngine, query: CompiledQuery, database: DatabaseContext, after position: QueryPosition?, limit: Int, on connection: SQLiteConnection) throws {
        guard let zoneRow = try engine.zoneRowID(query.zoneID, database, on: connection, createDefault: false) else {
            if query.zoneID.isDefault { return nil }
            throw StratusError.zoneNotFound(query.zoneID, in: database)
        }
        let schema = try engine.loadSchema(query.recordType, storageContainer: database.storageContainer, on: connection)
        let builder = SQLQueryTranslation(query: query, schema: schema, dialect: SQLiteDialect())
        self.engine = engine
        self.query = query
        self.schema = schema
        plans = [try builder.select(zoneRow: zoneRow, after: position, limit: limit),
                 try builder.nullTail(zoneRow: zoneRow, after: position, limit: limit)].compactMap { $0 }
    }

    /// Up to `limit` more records (restricted to the desired keys) and the position of the
    /// last; `exhausted` when no row remains.
    mutating func next(_ limit: Int, on connection: SQLiteConnection) throws -> (records: [Record], nextPosition: QueryPosition?, exhausted: Bool) {
        var records: [Record] = []
        // The last row read, whole (its sort values), with the distances its statement computed:
        // a page's position is its last row's, made once per page rather than once per row.
        var last: (record: Record, distances: [Double?])?
        let readsDistances = query.sortKeys.contains { $0.distanceFrom != nil }
        while let (statement, plan) = try current(on: connection) {
            while records.count < limit {
                guard try statement.step() else { break }
                let record = try engine.decodeRecord(statement, zoneID: query.zoneID, recent: &recentTexts)
                records.append(record.restricted(to: query.desiredKeys))
                last = (record, readsDistances ? Self.distances(statement, plan) : [])
            }
            if records.count == limit { return (records, last.map(position), false) }
            advance()
        }
        return (records, last.map(position), true)
    }

    /// Up to `limit` more rows copied as read, to be made into records by ``SQLiteRowDecoder``
    /// (on another thread), with the distances the statement computed for the last;
    /// `exhausted` when no row remains.
    mutating func nextCopied(_ limit: Int, on connection: SQLiteConnection) throws -> (rows: SQLiteCopiedRows, lastDistances: [Double?], exhausted: Bool) {
        var rows = SQLiteCopiedRows(columns: SQLiteSchema.recordColumnCount, expectedRows: limit)
        var lastDistances: [Double?] = []
        let readsDistances = query.sortKeys.contains { $0.distanceFrom != nil }
        while let (statement, plan) = try current(on: connection) {
            while rows.count < limit {
                guard try statement.step() else { break }
                rows.append(statement)
                if readsDistances { lastDistances = Self.distances(statement, plan) }
            }
            if rows.count == limit { return (rows, lastDistances, false) }
            advance()
        }
        return (rows, lastDistances, true)
    }

    /// The distances a row's statement computed, one per sort key (`nil` for other keys).
    private static func distances(_ statement: SQLiteStatement, _ plan: SQLQueryTranslation<SQLiteDialect>.Plan) -> [Double?] {
        plan.sortColumns.map { column -> Double? in
            if column >= 0, case .real(let kilometres) = statement.value(Int32(column)) { return kilometres }
            return nil
        }
    }

    /// The position of a row: its values of the sort keys (a distance as its statement
    /// computed it) and its record name.
    private func position(_ row: (record: Record, distances: [Double?])) -> QueryPosition {
        QueryPosition(of: row.record, in: query, distances: row.distances, schema: schema)
    }

    /// Whether another row follows (it is stepped over, not read: call this last).
    mutating func hasMore(on connection: SQLiteConnection) throws -> Bool {
        while let (statement, _) = try current(on: connection) {
            if try statement.step() { return true }
            advance()
        }
        return false
    }

    /// The statement being read and its plan, prepared on first use; `nil` when every plan is read.
    private mutating func current(on connection: SQLiteConnection) throws -> (SQLiteStatement, SQLQueryTranslation<SQLiteDialect>.Plan)? {
        guard let plan = plans.first else { return nil }
        if let statement { return (statement, plan) }
        let prepared = try connection.statement(plan.sql)
        try prepared.bind(plan.parameters)
        statement = prepared
        return (prepared, plan)
    }

    private mutating func advance() {
        statement?.reset()
        statement = nil
        plans.removeFirst()
    }

    /// Resets the statement being read, so that its connection can end the transaction.
    mutating func finish() {
        statement?.reset()
        statement = nil
        plans = []
    }
}

extension SQLiteEngine {
    @_spi(StratusEngine)
    public var storeIdentifier: String {
        get throws {
            // A store's identity never changes: read it once.
            if let known = knownStoreIdentifier.withLock({ $0 }) { return known }
            let identity = try readTransaction { try storeIdentity(on: $0) }
            knownStoreIdentifier.withLock { $0 = identity }
            return identity
        }
    }
}

/// ``Stratus/RecentRowTexts`` read from SQLite's columns.
typealias SQLiteRecentTexts = RecentRowTexts

extension RecentRowTexts {
    mutating func recordType(_ row: some SQLiteRowValues, column: Int32) -> String {
        row.withTextBytes(column) { recordType($0) }
    }

    mutating func user(_ row: some SQLiteRowValues, column: Int32) -> Record.ID {
        row.withTextBytes(column) { user($0) }
    }
}
