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
    /// - Throws: as ``PostgresEngine/init(url:readURL:create:maximumConnections:tombstoneRetention:assetCacheDirectory:)``.
    public convenience init(identifier: String, postgresURL: String, readURL: String? = nil, userName: String? = nil, environment: Environment = .development) throws {
        self.init(identifier: identifier, engine: try PostgresEngine.shared(url: postgresURL, readURL: readURL), userName: userName, environment: environment)
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
