import CSQLite
import Foundation
@_spi(StratusEngine) import Stratus
import StratusSQL

/// A value SQLite stores or returns.

/// Text parameters laid end to end in one reusable buffer, for
/// ``SQLiteStatement/step(bindingInPlace:)``: a large import binds several texts and a field
/// document per record, and letting SQLite copy each one (`SQLITE_TRANSIENT`) costs an
/// allocation apiece.
struct TextArena {
    fileprivate(set) var bytes: [UInt8] = []
    fileprivate(set) var slices: [(index: Int32, start: Int, count: Int)] = []

    mutating func removeAll() {
        bytes.removeAll(keepingCapacity: true)
        slices.removeAll(keepingCapacity: true)
    }

    /// Adds `text` for parameter `index`, up to its first NUL as ``SQLiteStatement/bind(_:at:)-(String,_)`` binds it.
    mutating func add(_ text: String, at index: Int32) {
        let start = bytes.count
        if text.utf8.withContiguousStorageIfAvailable({ append(upToNUL: $0) }) == nil {
            var text = text
            text.withUTF8 { append(upToNUL: $0) }
        }
        slices.append((index, start, bytes.count - start))
    }

    /// Adds UTF-8 bytes for parameter `index`, as they are.
    mutating func add(utf8: [UInt8], at index: Int32) {
        let start = bytes.count
        bytes.append(contentsOf: utf8)
        slices.append((index, start, bytes.count - start))
    }

    private mutating func append(upToNUL utf8: UnsafeBufferPointer<UInt8>) {
        guard let base = utf8.baseAddress else { return }
        let count = memchr(base, 0, utf8.count).map { UnsafeRawPointer($0) - UnsafeRawPointer(base) } ?? utf8.count
        bytes.append(contentsOf: UnsafeBufferPointer(start: base, count: count))
    }
}

/// One SQLite connection. Not Sendable: ``SQLiteEngine`` hands each connection to one thread
/// at a time. The handle is closed in `deinit` (also when opening failed half-way), or before
/// by ``close(foldingLog:)`` when its engine closes.
final class SQLiteConnection {
    private(set) var handle: OpaquePointer?

    /// Whether the main database file is no longer the one at its path (SQLite compares the
    /// open file with the path's: one `stat`).
    var fileHasMoved: Bool {
        var moved: Int32 = 0
        return sqlite3_file_control(handle, "main", SQLITE_FCNTL_HAS_MOVED, &moved) == SQLITE_OK && moved != 0
    }

    /// The write-ahead log this connection committed into, by device and inode, once it did.
    private var logIdentity: (device: dev_t, inode: ino_t)?

    /// Whether the write-ahead log at the store's log name is no longer the one this
    /// connection committed into (deleted, or another put in its place by a restore): SQLite
    /// never removes the log while a connection is open, and commits go on into the one it has
    /// open, which nobody opens again.
    var logHasMoved: Bool {
        guard let logIdentity, let log = logPath else { return false }
        var info = stat()
        guard stat(log, &info) == 0 else { return true }
        return info.st_dev != logIdentity.device || info.st_ino != logIdentity.inode
    }

    /// Whether the log this connection uses is known (noted when the store was opened, or at
    /// its first commit).
    var knowsItsLog: Bool { logIdentity != nil }

    /// Notes the log the connection uses (opened with the store, or made by its first commit),
    /// the first time.
    func noteLogIdentity() {
        guard logIdentity == nil, let log = logPath else { return }
        var info = stat()
        if stat(log, &info) == 0 { logIdentity = (info.st_dev, info.st_ino) }
    }

    /// The log's name as SQLite makes it: from the file it opened (a symbolic link resolved).
    private var logPath: String? {
        guard let name = sqlite3_db_filename(handle, "main"), name.pointee != 0 else { return nil }
        return String(cString: name) + "-wal"
    }

    let path: String
    private var statements: [String: SQLiteStatement] = [:]

    /// SQLite's memory statistics take a process-wide mutex on every allocation, and SQLite
    /// allocates several times per written row; Stratus reads none of them. Switched off once,
    /// before the first connection initializes SQLite (a no-op if the process already did).
    private static let memoryStatisticsOff: Void = { _ = stratus_sqlite_config_memstatus_off() }()

    /// Opens (creating when `create`) the database at `path`, in WAL mode; with `readOnly`,
    /// for reading only (`SQLITE_OPEN_READONLY`), never creating or changing a file.
    ///
    /// - Throws: `badContainer` when the file cannot be opened; `badDatabase` when it is not a
    ///   store or not in WAL mode; `permissionFailure` saying what access is missing when a
    ///   read-only connection cannot read the write-ahead log's index.
    init(path: String, create: Bool, readOnly: Bool = false, busyTimeoutMilliseconds: Int32) throws {
        self.path = path
        Self.memoryStatisticsOff
        let flags = (readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0)) | SQLITE_OPEN_NOMUTEX
        let rc = sqlite3_open_v2(path, &handle, flags, nil)
        guard rc == SQLITE_OK else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            if rc & 0xFF == SQLITE_CANTOPEN, let problem = Self.accessProblem(path, readOnly: readOnly) {
                throw StratusError(.permissionFailure, "cannot open the store at \(path): \(problem)")
            }
            throw StratusError(rc == SQLITE_CANTOPEN ? .badContainer : .internalError, "cannot open the store at \(path): \(message)")
        }
        sqlite3_extended_result_codes(handle, 1)
        SQLiteFunctions.register(on: handle)
        sqlite3_busy_timeout(handle, busyTimeoutMilliseconds)
        if create && !readOnly {
            // The connection that may create the store first makes sure the file is a Stratus
            // store or a new one: another program's database is neither switched to WAL nor
            // given Stratus's tables.
            try Self.retryingBusy(for: busyTimeoutMilliseconds) { try refuseForeignDatabase() }
        }
        // Only the connection that may create the store switches it to WAL; a reader asks,
        // because switching can wait for another process's write lock.
        let mode: String?
        do {
            mode = try Self.retryingBusy(for: busyTimeoutMilliseconds) {
                try queryText(create && !readOnly ? "PRAGMA journal_mode=WAL" : "PRAGMA journal_mode")
            }
        } catch let error as StratusError where readOnly && (error.code == .permissionFailure || error.code == .badContainer) {
            // A missing index SQLite may not make (a read-only folder or file system) is a
            // missing access, not a missing store.
            guard let problem = Self.walIndexProblem(path) else { throw error }
            throw StratusError(.permissionFailure, problem)
        }
        guard mode?.lowercased() == "wal" else {
            throw StratusError(.badDatabase, "the store at \(path) cannot use write-ahead logging (journal_mode answered '\(mode ?? "nothing")'); put it on a local file system")
        }
        if readOnly {
            // Reading a WAL store needs its index (the -shm file): SQLite maps it when it exists,
            // and otherwise would have to create it.
            do {
                _ = try queryText("SELECT count(*) FROM sqlite_master")
            } catch let error as StratusError where error.code == .permissionFailure || error.code == .badContainer {
                throw StratusError(.permissionFailure, Self.walIndexProblem(path) ?? error.message)
            }
            try refuseForeignDatabase()
        }
        try execute("PRAGMA synchronous=NORMAL")
        // Checks each b-tree page's cells as the page is read, so that more damage is found
        // (and reported as badDatabase) by ordinary reads, not only by an integrity check.
        try execute("PRAGMA cell_size_check=ON")
        // A sort larger than the page cache (a whole read sorted by a key no index serves, an
        // index being built) sorts its runs on helper threads while the statement scans: on 2
        // cores a sorted read of 1,000,000 records took 0.8× as long. Other statements start none.
        try execute("PRAGMA threads=\(Self.sorterThreads)")
    }

    /// Throws when the file holds an SQLite database that is not a Stratus store: another
    /// program's application ID in its header; tables, but neither Stratus's `store_info` nor a
    /// `records` table with Stratus's `zone_id` and `record_name` columns (`records` is a common
    /// name: another program's table of that name made the upgrade fail half-way with an SQL
    /// error); or no tables but a schema version another program set.
    private func refuseForeignDatabase() throws {
        let header = try uncachedStatement("""
            SELECT (SELECT application_id FROM pragma_application_id), (SELECT user_version FROM pragma_user_version),
                (SELECT count(*) FROM sqlite_master),
                (SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'store_info')
                    + (SELECT count(*) = 2 FROM pragma_table_info('records') WHERE name IN ('zone_id', 'record_name'))
            """)
        defer { header.reset() }
        guard try header.step() else { return }
        let (applicationID, version, objects, ours) = (header.int64(0), header.int64(1), header.int64(2), header.int64(3))
        let foreign = (applicationID != 0 && applicationID != Int64(SQLiteSchema.applicationID))
            || (objects > 0 && ours == 0)
            || (objects == 0 && version != 0)
        guard foreign else { return }
        throw StratusError(.badDatabase, "the file at \(path) is an SQLite database of another program, not a Stratus store; Stratus neither reads nor changes it")
    }

    /// Helper threads a large sort may use: the other cores, up to 4.
    static let sorterThreads = max(1, min(4, ProcessInfo.processInfo.activeProcessorCount - 1))

    /// Why this user may not open the store at `path`, when access is the reason (SQLite says
    /// only "unable to open database file"): a folder on the way, the file, its write-ahead log
    /// or index made by another user, or a read-only file system.
    static func accessProblem(_ path: String, readOnly: Bool) -> String? {
        var status = stat()
        if stat(path, &status) != 0 {
            return errno == EACCES ? "a folder on its path may not be searched by you (permission denied)" : nil
        }
        let wanted = readOnly ? R_OK : R_OK | W_OK
        if access(path, wanted) != 0 && errno == EACCES {
            return "the file is not \(readOnly ? "readable" : "readable and writable") by you (owner uid \(status.st_uid), mode \(String(status.st_mode & 0o777, radix: 8)))"
        }
        for companion in [path + "-wal", path + "-shm"] where access(companion, F_OK) == 0 && access(companion, readOnly ? R_OK : R_OK | W_OK) != 0 && errno == EACCES {
            return "\(companion), which SQLite keeps beside the store, is not \(readOnly ? "readable" : "writable") by you (another user made it)"
        }
        var fileSystem = statvfs()
        let folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
        if statvfs(folder, &fileSystem) == 0 && fileSystem.f_flag & UInt(ST_RDONLY) != 0 {
            return "its folder \(folder) is on a read-only file system, where SQLite cannot make the write-ahead log index a store needs; copy the store to a writable folder to read it"
        }
        return nil
    }

    /// What keeps a read-only connection from reading a WAL store, when it is the missing
    /// index file: which file it needs and which access is missing.
    private static func walIndexProblem(_ path: String) -> String? {
        let index = path + "-shm"
        let folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
        if FileManager.default.fileExists(atPath: index) {
            guard access(index, R_OK) != 0 else { return nil }
            return "cannot read the store at \(path): its write-ahead log index \(index) is not readable for you (read access to it is missing)"
        }
        var fileSystem = statvfs()
        if statvfs(folder, &fileSystem) == 0 && fileSystem.f_flag & UInt(ST_RDONLY) != 0 {
            return "cannot read the store at \(path) read-only: reading it needs its write-ahead log index \(index), which does not exist, and its folder \(folder) is on a read-only file system, where it cannot be made; copy the store (with its -wal file) to a writable folder to read it"
        }
        guard access(folder, W_OK) != 0 else { return nil }
        return "cannot read the store at \(path) read-only: reading it needs its write-ahead log index \(index), which does not exist, and you may not create it (write access to the folder \(folder) is missing); it exists while a writer has the store open"
    }

    /// Runs `body` again while it fails with a busy store, for up to `milliseconds`: switching
    /// a new file to WAL answers SQLITE_BUSY at once, without SQLite's busy handler, when
    /// several processes create the same store together.
    private static func retryingBusy<T>(for milliseconds: Int32, _ body: () throws -> T) throws -> T {
        let deadline = Date().addingTimeInterval(Double(milliseconds) / 1000)
        while true {
            do {
                return try body()
            } catch let error as StratusError where error.code == .zoneBusy && Date() < deadline {
                usleep(5_000)
            }
        }
    }

    deinit { close() }

    /// Closes the connection now rather than in `deinit`; it must not be used again. Closing a
    /// store's last connection copies the log into the file and removes the `-wal` and `-shm`
    /// files, unless `foldingLog` is false: a log that is no longer this store's (a restore put
    /// another file or log in place) must not be copied into a file, nor a log removed by name.
    func close(foldingLog: Bool = true) {
        statements.removeAll()
        guard let handle else { return }
        if !foldingLog { _ = stratus_sqlite_no_checkpoint_on_close(handle) }
        sqlite3_close_v2(handle)
        self.handle = nil
    }

    /// Runs SQL without results (several statements allowed).
    func execute(_ sql: String) throws {
        var error: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &error)
        if rc != SQLITE_OK {
            let message = error.map { String(cString: $0) } ?? lastErrorMessage
            sqlite3_free(error)
            throw self.error(rc, message, sql: sql)
        }
    }

    /// A cached prepared statement, reset and with bindings cleared.
    func statement(_ sql: String) throws -> SQLiteStatement {
        if let cached = statements[sql] {
            cached.reset()
            return cached
        }
        var raw: OpaquePointer?
        let rc = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &raw, nil)
        guard rc == SQLITE_OK, let raw else {
            throw self.error(rc, sql: sql)
        }
        let statement = SQLiteStatement(raw, connection: self)
        if statements.count > 200 { statements.removeAll() }
        statements[sql] = statement
        return statement
    }

    /// A statement prepared now and not cached (for one-off statements).
    func uncachedStatement(_ sql: String) throws -> SQLiteStatement {
        var raw: OpaquePointer?
        let rc = sqlite3_prepare_v2(handle, sql, -1, &raw, nil)
        guard rc == SQLITE_OK, let raw else { throw self.error(rc, sql: sql) }
        return SQLiteStatement(raw, connection: self)
    }

    func queryText(_ sql: String) throws -> String? {
        let statement = try statement(sql)
        guard try statement.step() else { return nil }
        return statement.text(0)
    }

    /// Resets every statement still positioned on a row, so that the transaction can end.
    func resetActiveStatements() {
        var statement = sqlite3_next_stmt(handle, nil)
        while let current = statement {
            if sqlite3_stmt_busy(current) != 0 { sqlite3_reset(current) }
            statement = sqlite3_next_stmt(handle, current)
        }
    }

    var lastErrorMessage: String { handle.map { String(cString: sqlite3_errmsg($0)) } ?? "no connection" }

    var changes: Int { Int(sqlite3_changes(handle)) }

    /// Maps an SQLite result code of this connection to a ``StratusError`` naming the store.
    /// The SQL is named, never its bound values.
    func error(_ rc: Int32, _ message: String? = nil, sql: String? = nil) -> StratusError {
        Self.error(rc, message ?? lastErrorMessage, sql: sql, path: path, systemErrno: handle.map { sqlite3_system_errno($0) } ?? 0)
    }

    /// Maps an SQLite result code to a ``StratusError``. The SQL is named, never its bound
    /// values. A damaged file (`SQLITE_CORRUPT`, `SQLITE_NOTADB`) is `badDatabase` naming the
    /// store, so that a tool fails loudly instead of answering with what it could read.
    /// Whether the store's file or its write-ahead log is within a page of this process's
    /// file size limit (`ulimit -f`, RLIMIT_FSIZE).
    static func reachedFileSizeLimit(_ path: String) -> Bool {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_FSIZE.rawValue), &limit) == 0, limit.rlim_cur != rlim_t.max else { return false }
        let margin: UInt64 = 128 * 1_024
        return [path, path + "-wal", path + "-journal"].contains { file in
            var info = stat()
            return stat(file, &info) == 0 && UInt64(info.st_size) + margin >= UInt64(limit.rlim_cur)
        }
    }

    /// `systemErrno` is the system's error behind an I/O error (`sqlite3_system_errno`): a
    /// file size limit or a full disk is said as such, not as a damaged store.
    static func error(_ rc: Int32, _ message: String, sql: String? = nil, path: String, systemErrno: Int32 = 0) -> StratusError {
        var primary = rc & 0xFF
        var message = message
        let context = sql.map { " (in: \($0.prefix(120)))" } ?? ""
        // SQLite does not always keep the system's error of a failed commit's write; a file
        // that reached this process's size limit is recognised by its size.
        let systemErrno = primary == SQLITE_IOERR && systemErrno == 0 && reachedFileSizeLimit(path) ? EFBIG : systemErrno
        if primary == SQLITE_IOERR && systemErrno != 0 {
            let reason = String(cString: strerror(systemErrno))
            message += ": \(reason)"
            switch systemErrno {
            case EFBIG:
                return StratusError(.quotaExceeded, "the store at \(path) cannot grow: \(reason) (a file size limit, such as ulimit -f, or the file system's largest file)")
            case ENOSPC, EDQUOT: primary = SQLITE_FULL
            case EROFS: primary = SQLITE_READONLY
            default: break
            }
        }
        switch primary {
        case SQLITE_BUSY, SQLITE_LOCKED:
            return StratusError(.zoneBusy, "the store at \(path) is busy with another writer: \(message); try again later", retryAfterSeconds: 0.1)
        case SQLITE_FULL:
            return StratusError(.quotaExceeded, "the disk holding the store at \(path) is full: \(message)")
        case SQLITE_READONLY, SQLITE_PERM, SQLITE_AUTH:
            // What access is missing, where it can be told (a log file a reader left unwritable).
            let missing = SQLiteEngine.missingAccessToWrite(path).map { "; \($0)" } ?? ""
            return StratusError(.permissionFailure, "the store at \(path) cannot be written (\(message)): writing needs write access to the file and its folder\(missing)")
        case SQLITE_CORRUPT, SQLITE_NOTADB:
            return StratusError(.badDatabase, "the store at \(path) is damaged or is not a Stratus store (SQLite: \(message))")
        case SQLITE_CANTOPEN:
            return StratusError(.badContainer, "the store at \(path) cannot be opened: \(message)")
        default:
            return StratusError(.internalError, "SQLite error \(rc) in the store at \(path): \(message)\(context)")
        }
    }
}

/// A prepared statement, finalized in `deinit`.
final class SQLiteStatement {
    let raw: OpaquePointer
    unowned let connection: SQLiteConnection

    init(_ raw: OpaquePointer, connection: SQLiteConnection) {
        self.raw = raw
        self.connection = connection
    }

    deinit { sqlite3_finalize(raw) }

    func reset() {
        sqlite3_reset(raw)
        sqlite3_clear_bindings(raw)
    }

    /// Resets for the next run when every parameter is bound again anyway.
    func resetKeepingBindings() {
        sqlite3_reset(raw)
    }

    func bind(_ values: [SQLValue]) throws {
        for (offset, value) in values.enumerated() { try bind(value, at: Int32(offset + 1)) }
    }

    func bind(_ value: SQLValue, at index: Int32) throws {
        let rc: Int32
        switch value {
        case .null: rc = sqlite3_bind_null(raw, index)
        case .integer(let i): rc = sqlite3_bind_int64(raw, index, i)
        case .real(let d): rc = sqlite3_bind_double(raw, index, d)
        case .text(let s):
            try bind(s, at: index)
            return
        case .blob(let d):
            rc = d.withUnsafeBytes { sqlite3_bind_blob(raw, index, $0.baseAddress, Int32($0.count), stratus_sqlite_transient()) }
        }
        guard rc == SQLITE_OK else { throw connection.error(rc) }
    }

    /// Binds text from its UTF-8 bytes; SQLite copies them.
    private func bindText(_ bytes: UnsafeBufferPointer<UInt8>, at index: Int32) -> Int32 {
        // A null pointer would bind NULL, not the empty string.
        guard let base = bytes.baseAddress, bytes.count > 0 else { return sqlite3_bind_text(raw, index, "", 0, stratus_sqlite_transient()) }
        return sqlite3_bind_text(raw, index, UnsafeRawPointer(base).assumingMemoryBound(to: CChar.self), Int32(bytes.count), stratus_sqlite_transient())
    }

    /// Binds a string up to its first NUL, as SQLite's C-string binding does: the JSON
    /// functions read stored strings that way too, so parameters and stored values compare alike.
    func bind(_ text: String, at index: Int32) throws {
        var text = text
        let rc = text.withUTF8 { bytes in
            guard let base = bytes.baseAddress, let nul = memchr(base, 0, bytes.count) else { return bindText(bytes, at: index) }
            return bindText(UnsafeBufferPointer(start: base, count: UnsafeRawPointer(nul) - UnsafeRawPointer(base)), at: index)
        }
        guard rc == SQLITE_OK else { throw connection.error(rc) }
    }

    func bind(_ int: Int64, at index: Int32) throws { try bind(.integer(int), at: index) }

    /// Steps once with the texts of `arena` bound in place (`SQLITE_STATIC`: SQLite copies
    /// nothing), then binds those parameters to NULL again, so that no binding outlives the
    /// arena's bytes. The other parameters must be bound before.
    @discardableResult
    func step(bindingInPlace arena: TextArena) throws -> Bool {
        try arena.bytes.withUnsafeBufferPointer { buffer in
            let base = UnsafeRawPointer(buffer.baseAddress ?? UnsafePointer(bitPattern: 1)!).assumingMemoryBound(to: CChar.self)
            defer { for slice in arena.slices { sqlite3_bind_null(raw, slice.index) } }
            for slice in arena.slices {
                let rc = sqlite3_bind_text(raw, slice.index, base + slice.start, Int32(slice.count), nil)
                guard rc == SQLITE_OK else { throw connection.error(rc) }
            }
            return try step()
        }
    }

    /// Advances; true when a row is available.
    @discardableResult
    func step() throws -> Bool {
        let rc = sqlite3_step(raw)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default:
            let error = connection.error(rc, sql: sql)
            sqlite3_reset(raw)
            throw error
        }
    }

    var sql: String { sqlite3_sql(raw).map { String(cString: $0) } ?? "" }

    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(raw, column) == SQLITE_NULL }
    func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(raw, column) }
    func double(_ column: Int32) -> Double { sqlite3_column_double(raw, column) }

    func text(_ column: Int32) -> String? {
        guard let pointer = sqlite3_column_text(raw, column) else { return nil }
        let count = Int(sqlite3_column_bytes(raw, column))
        return String(decoding: UnsafeBufferPointer(start: pointer, count: count), as: UTF8.self)
    }

    /// The column's text as UTF-8 bytes (nil for NULL) without making a `String`. The bytes
    /// are SQLite's and valid only inside `body`.
    func withTextBytes<T>(_ column: Int32, _ body: (UnsafeBufferPointer<UInt8>?) throws -> T) rethrows -> T {
        guard let pointer = sqlite3_column_text(raw, column) else { return try body(nil) }
        let count = Int(sqlite3_column_bytes(raw, column))
        return try body(UnsafeBufferPointer(start: pointer, count: count))
    }

    /// Whether two columns hold the same text, byte for byte (both NULL counts as the same).
    func hasSameText(_ column: Int32, as other: Int32) -> Bool {
        let a = sqlite3_column_text(raw, column), b = sqlite3_column_text(raw, other)
        guard let a, let b else { return a == nil && b == nil }
        let count = sqlite3_column_bytes(raw, column)
        return count == sqlite3_column_bytes(raw, other) && memcmp(a, b, Int(count)) == 0
    }

    func value(_ column: Int32) -> SQLValue {
        switch sqlite3_column_type(raw, column) {
        case SQLITE_INTEGER: return .integer(int64(column))
        case SQLITE_FLOAT: return .real(double(column))
        case SQLITE_TEXT: return .text(text(column) ?? "")
        case SQLITE_BLOB:
            let count = Int(sqlite3_column_bytes(raw, column))
            guard let pointer = sqlite3_column_blob(raw, column) else { return .blob(Data()) }
            return .blob(Data(bytes: pointer, count: count))
        default: return .null
        }
    }
}
