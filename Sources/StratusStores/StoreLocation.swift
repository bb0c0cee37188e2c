import Foundation
import Stratus
import StratusPostgres
import StratusSQLite

/// Where a store lives, read from the text a user names it by (`--store`, `$STRATUS_STORE`, a
/// setting): an SQLite file's path, or a PostgreSQL URL. The `stratus` tool reads its stores
/// this way, so a program that does the same runs on either engine without a change.
///
/// ```swift
/// let location = try StoreLocation(ProcessInfo.processInfo.environment["STRATUS_STORE"] ?? "app.sqlite")
/// print(location)   // app.sqlite, or postgresql://stratus@db1/app with no password
/// ```
///
/// Text that is neither is refused rather than taken for a file name: a mistyped URL
/// (`postgresq://u:pw@db1/app`) taken as a path made an SQLite store in folders named after the
/// URL, password and all. Refusals never repeat the text, which may hold a password.
public enum StoreLocation: Sendable, Hashable, CustomStringConvertible {
    /// The SQLite store in the file at `path`.
    case sqlite(path: String)
    /// The PostgreSQL store at `url` (`postgresql://…` or `postgres://…`); libpq's settings
    /// (`PGHOST`, `PGPASSWORD`, `~/.pgpass`, service files) apply as they do for `psql`.
    case postgres(url: String)

    /// Why text names no store.
    ///
    /// ```swift
    /// do { _ = try StoreLocation("host=db1 dbname=app") } catch let problem as StoreLocation.Problem { print(problem.kind) }
    /// ```
    public struct Problem: Error, Sendable, Hashable, CustomStringConvertible {
        /// What is wrong with the text.
        public enum Kind: Sendable, Hashable {
            /// Empty text names no file.
            case empty
            /// It begins with `postgres:` or `postgresql:` but is no URL libpq reads
            /// (`postgresql:/db1/app`, one slash).
            case malformedPostgresURL
            /// It is a URL of another scheme (`postgresq://…`, `file:///…`).
            case otherURL
            /// It is a libpq `key=value` connection string (`host=db1 dbname=app`).
            case connectionString
        }

        /// What is wrong.
        public let kind: Kind

        public var description: String { description(naming: "the store location") }

        /// The problem, naming where the text came from (`--store`, `$STRATUS_STORE`) in place
        /// of "the store location"; never the text itself.
        ///
        /// ```swift
        /// print(problem.description(naming: "$STRATUS_STORE"))
        /// ```
        public func description(naming origin: String) -> String {
            switch kind {
            case .empty:
                "\(origin) is empty, which names no file"
            case .malformedPostgresURL:
                "\(origin) begins with a PostgreSQL scheme but is no URL libpq reads (not shown: it may hold a password); write postgresql://[user[:password]@]host[:port]/dbname, with two slashes"
            case .otherURL:
                "\(origin) looks like a URL but is no PostgreSQL URL (not shown: it may hold a password); write postgresql://[user[:password]@]host[:port]/dbname (or postgres://…), or ./ before a file path that begins so"
            case .connectionString:
                "\(origin) looks like a libpq key=value connection string, which names no SQLite file; give a URL instead: postgresql://[user@]host[:port]/dbname, or postgresql:///dbname?host=/socket/folder (PG* variables and ~/.pgpass apply)"
            }
        }
    }

    /// The store `text` names.
    ///
    /// ```swift
    /// try StoreLocation("postgresql://db1/app")    // .postgres(url: "postgresql://db1/app")
    /// try StoreLocation("/srv/app.sqlite")         // .sqlite(path: "/srv/app.sqlite")
    /// ```
    ///
    /// - Throws: ``Problem`` for text that is neither a PostgreSQL URL nor a file path.
    public init(_ text: String) throws(Problem) {
        if PostgresEngine.isStoreURL(text) {
            self = .postgres(url: text)
            return
        }
        if text.isEmpty { throw Problem(kind: .empty) }
        if PostgresConnectionString.hasPostgresScheme(text) { throw Problem(kind: .malformedPostgresURL) }
        if Self.looksLikeURL(text) { throw Problem(kind: .otherURL) }
        if Self.isConnectionString(text) { throw Problem(kind: .connectionString) }
        self = .sqlite(path: text)
    }

    /// The store a container uses when none is named: `$STRATUS_STORE` when set, else the
    /// container's SQLite file (``SQLiteEngine/defaultStorePath(containerIdentifier:)``).
    ///
    /// ```swift
    /// let location = try StoreLocation.default(containerIdentifier: "com.example.app")
    /// ```
    ///
    /// - Throws: ``Problem`` when `$STRATUS_STORE` names no store.
    public static func `default`(containerIdentifier: String) throws(Problem) -> StoreLocation {
        try StoreLocation(SQLiteEngine.defaultStorePath(containerIdentifier: containerIdentifier))
    }

    /// The path, or the URL without its password.
    public var description: String {
        switch self {
        case .sqlite(let path): path
        case .postgres(let url): PostgresConnectionString.redacted(url)
        }
    }

    /// Opens the store's engine, shared by every container of this process that opens the same
    /// store (``SQLiteEngine/shared(path:)``, ``PostgresEngine/shared(url:readURL:create:)``).
    ///
    /// ```swift
    /// let engine = try StoreLocation("postgresql://db1/app").openEngine(readURL: "postgresql://db2/app")
    /// ```
    ///
    /// - Parameters:
    ///   - readURL: a hot standby of a PostgreSQL store, which queries, exports and change
    ///     reads use.
    ///   - create: whether a missing store is made (a PostgreSQL database must exist; its
    ///     tables are made); SQLite files are always made.
    /// - Throws: ``StratusError`` `invalidArguments` for a standby of an SQLite store or a
    ///   standby that is no PostgreSQL URL; the engine's errors.
    public func openEngine(readURL: String? = nil, create: Bool = true) throws -> any StorageEngine {
        if let readURL, !PostgresEngine.isStoreURL(readURL) {
            throw StratusError(.invalidArguments, "a read store is the postgresql:// URL of a hot standby of a PostgreSQL store; the one given is none (not shown: it may hold a password)")
        }
        switch self {
        case .postgres(let url):
            return try PostgresEngine.shared(url: url, readURL: readURL, create: create)
        case .sqlite(let path):
            if readURL != nil {
                throw StratusError(.invalidArguments, "a read store is a standby of a PostgreSQL store; \(path) is an SQLite store")
            }
            return try SQLiteEngine.shared(path: path)
        }
    }

    /// Whether `text`, not a PostgreSQL URL, begins like a URL: a scheme, a colon and a slash
    /// (`postgresq://…`, `pg://…`, `file:///…`), or `postgres//` / `postgresql//` (the colon
    /// left out). A relative path that begins so is written `./…`.
    static func looksLikeURL(_ text: String) -> Bool {
        text.prefixMatch(of: #/[A-Za-z][A-Za-z0-9+.\-]*:\//#) != nil || text.prefixMatch(of: #/(?i)postgres(ql)?\/\//#) != nil
    }

    /// Whether `text` reads as a libpq `key=value` connection string: its first word is one of
    /// libpq's keywords followed by `=` (`host=db1 dbname=app`), where a path would not be.
    static func isConnectionString(_ text: String) -> Bool {
        guard let match = text.prefixMatch(of: #/\s*([A-Za-z_]+)\s*=/#) else { return false }
        return libpqKeywords.contains(String(match.1).lowercased())
    }

    private static let libpqKeywords: Set<String> = [
        "host", "hostaddr", "port", "dbname", "user", "password", "passfile", "service", "options", "sslmode", "sslrootcert",
        "sslcert", "sslkey", "sslcrl", "connect_timeout", "application_name", "fallback_application_name", "keepalives",
        "target_session_attrs", "channel_binding", "gssencmode", "client_encoding", "require_auth", "load_balance_hosts",
    ]
}

extension Container {
    /// Opens a container on the store `store` names, an SQLite file's path or a PostgreSQL URL,
    /// as the `stratus` tool does with `--store`; `nil` follows `$STRATUS_STORE`, else the
    /// container's SQLite file. A program that opens its container this way runs on either
    /// engine, chosen where it is deployed.
    ///
    /// ```swift
    /// import StratusStores
    ///
    /// // STRATUS_STORE=postgresql://jobs@db1/app in the cron job, nothing on a laptop
    /// let container = try Container(identifier: "com.example.app", store: nil)
    /// ```
    ///
    /// - Parameters:
    ///   - readStore: a hot standby of a PostgreSQL store, for queries, exports and change reads.
    ///   - userName: the user the container acts as; on a PostgreSQL connection that row-level
    ///     security binds to one role, that role's user only.
    /// - Throws: ``StoreLocation/Problem`` for text that names no store; ``StratusError`` as
    ///   ``StoreLocation/openEngine(readURL:create:)`` and
    ///   ``PostgresEngine/checkActing(as:)``.
    public convenience init(identifier: String, store: String?, readStore: String? = nil, userName: String? = nil, environment: Environment = .development) throws {
        try Container.checkOpening(identifier: identifier, userName: userName ?? Container.environmentUserName)
        let location = try store.map { text throws(StoreLocation.Problem) in try StoreLocation(text) } ?? StoreLocation.default(containerIdentifier: identifier)
        let engine = try location.openEngine(readURL: readStore)
        if let userName, let postgres = engine as? PostgresEngine { try postgres.checkActing(as: userName) }
        self.init(identifier: identifier, engine: engine, userName: userName, environment: environment)
    }
}
