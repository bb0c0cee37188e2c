import Foundation
@_spi(StratusEngine) import Stratus
import Synchronization

extension Container {
    /// Opens a container on a PostgreSQL store, shared by every process that names the same
    /// URL (one connection pool per URL in a process).
    ///
    /// ```swift
    /// let container = try Container(identifier: "com.example.app", postgresURL: "postgresql://stratus@db1/app", userName: "alice")
    /// ```
    ///
    /// - Throws: as ``PostgresEngine/init(url:readURL:create:maximumConnections:tombstoneRetention:assetCacheDirectory:)``;
    ///   ``StratusError`` `permissionFailure` as ``PostgresEngine/checkActing(as:)`` when
    ///   `userName` is not the role row-level security binds the connection to.
    public convenience init(identifier: String, postgresURL: String, readURL: String? = nil, userName: String? = nil, environment: Environment = .development) throws {
        try Container.checkOpening(identifier: identifier, userName: userName ?? Container.environmentUserName)
        let engine = try PostgresEngine.shared(url: postgresURL, readURL: readURL)
        if let userName { try engine.checkActing(as: userName) }
        self.init(identifier: identifier, engine: engine, userName: userName, environment: environment)
    }
}

extension PostgresEngine {
    /// Checks that Stratus may act as `userName` on this connection: a role that row-level
    /// security binds (see `stratus users row-security`) reaches only its own user's rows, so
    /// acting as another user would find none of that user's records and have its writes
    /// refused row by row. Any user may be named on a connection no policy binds.
    ///
    /// ```swift
    /// try engine.checkActing(as: "alice")   // connected as alice: fine; as bob: refused
    /// ```
    ///
    /// - Throws: ``StratusError`` `permissionFailure` naming the role to connect as; store errors.
    public func checkActing(as userName: String) throws {
        guard !loginRole.isEmpty, userName != loginRole, try rowAccessLimit() != nil else { return }
        throw StratusError(.permissionFailure, "connected as role \(loginRole), which row-level security keeps to its own user's rows, so Stratus can act only as \(loginRole) on this connection, not as \(userName): connect as \(userName)'s role, or name no other user")
    }
}

extension PostgresEngine {
    /// Whether `text` names a PostgreSQL store (`postgres://` or `postgresql://`, the scheme in
    /// any case).
    ///
    /// ```swift
    /// PostgresEngine.isStoreURL("postgresql://db1/app")   // true
    /// ```
    public static func isStoreURL(_ text: String) -> Bool {
        PostgresConnectionString.isURL(text)
    }

    /// The engine for a URL, shared by every container of this process that names it.
    ///
    /// ```swift
    /// let engine = try PostgresEngine.shared(url: "postgresql://db1/app")
    /// ```
    public static func shared(url: String, readURL: String? = nil, create: Bool = true) throws -> PostgresEngine {
        let key = url + "\u{0}" + (readURL ?? "")
        return try registry.withLock { engines in
            if let engine = engines[key]?.engine { return engine }
            let engine = try PostgresEngine(url: url, readURL: readURL, create: create)
            engines[key] = WeakEngine(engine: engine)
            return engine
        }
    }

    struct WeakEngine { weak var engine: PostgresEngine? }
}

private let registry = Mutex<[String: PostgresEngine.WeakEngine]>([:])
