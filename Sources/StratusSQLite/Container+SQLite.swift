import Foundation
@_spi(StratusEngine) import Stratus

extension Container {
    /// Opens a container on the embedded SQLite store.
    ///
    /// The store is the file at `storePath`; when `nil`, `$STRATUS_STORE` if set, else
    /// ``SQLiteEngine/defaultStorePath(containerIdentifier:)``.
    ///
    /// ```swift
    /// let container = try Container(identifier: "com.example.notes")
    /// let scratch = try Container(identifier: "com.example.notes", storePath: "/tmp/notes.sqlite", userName: "alice")
    /// ```
    ///
    /// - Throws: ``StratusError`` when the store cannot be opened or created, or when the path
    ///   (or `$STRATUS_STORE`) is a PostgreSQL URL, which `Container(identifier:postgresURL:)`
    ///   opens (and `Container(identifier:store:)` of `StratusStores`, which opens either engine).
    public convenience init(identifier: String, storePath: String? = nil, userName: String? = nil, environment: Environment = .development) throws {
        try Container.checkOpening(identifier: identifier, userName: userName ?? Container.environmentUserName)
        let path = storePath ?? SQLiteEngine.defaultStorePath(containerIdentifier: identifier)
        self.init(identifier: identifier, engine: try SQLiteEngine.shared(path: path), userName: userName, environment: environment)
    }

    /// Opens a container on the embedded SQLite store for a caller who is not signed in (see
    /// ``Container/anonymous(identifier:engine:environment:retryPolicy:)``).
    ///
    /// ```swift
    /// let visitor = try Container.anonymous(identifier: "com.example.forum", storePath: "/srv/forum.sqlite")
    /// ```
    ///
    /// - Throws: ``StratusError`` when the store cannot be opened or created.
    public static func anonymous(identifier: String, storePath: String? = nil, environment: Environment = .development) throws -> Container {
        try Container.checkOpening(identifier: identifier, userName: nil)
        let path = storePath ?? SQLiteEngine.defaultStorePath(containerIdentifier: identifier)
        return Container.anonymous(identifier: identifier, engine: try SQLiteEngine.shared(path: path), environment: environment)
    }
}

extension SQLiteEngine {
    /// Where a container's store lives when no path is given: `$STRATUS_STORE` when set,
    /// else `$XDG_DATA_HOME/stratus/<identifier>.sqlite` (`$HOME/.local/share/stratus/…`).
    ///
    /// ```swift
    /// print(SQLiteEngine.defaultStorePath(containerIdentifier: "com.example.todo"))
    /// ```
    public static func defaultStorePath(containerIdentifier: String) -> String {
        let environment = ProcessInfo.processInfo.environment
        if let store = environment["STRATUS_STORE"], !store.isEmpty { return store }
        // $HOME first, as shells and XDG tools take it; the password database's home only
        // when it is unset.
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? FileManager.default.homeDirectoryForCurrentUser.path
        // The XDG specification says to ignore a relative XDG_DATA_HOME.
        let dataHome = environment["XDG_DATA_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? home + "/.local/share"
        // An identifier that is a URL (refused by every operation) names no file after itself:
        // it may hold a password.
        let safeName = containerIdentifier.contains("://") ? "refused-container-identifier"
            : String(containerIdentifier.map { $0.isLetter || $0.isNumber || $0 == "." || $0 == "-" || $0 == "_" ? $0 : "_" })
        return dataHome + "/stratus/" + safeName + ".sqlite"
    }

    /// The engine for a store path, shared by every container of this process that opens the
    /// same file, so that one process has one writer connection per store.
    ///
    /// ```swift
    /// let engine = try SQLiteEngine.shared(path: "/tmp/app.sqlite")
    /// ```
    public static func shared(path: String) throws -> SQLiteEngine {
        try refuseURL(path)   // before standardizing, which would fold "postgresql://" into "postgresql:/"
        let key = URL(fileURLWithPath: path).standardizedFileURL.path
        return try registry.withLock { engines in
            if let engine = engines[key]?.engine, !engine.isClosed { return engine }
            let engine = try SQLiteEngine(path: key)
            engines[key] = WeakEngine(engine: engine)
            return engine
        }
    }

    struct WeakEngine { weak var engine: SQLiteEngine? }

    /// Copies what the write-ahead logs of this process's open stores hold into the store files,
    /// as closing a store's last connection does: a program that exits without closing its
    /// stores (the `stratus` tool) leaves each store's file whole by itself, so that an
    /// operator who stopped every process and moves or copies the file alone loses nothing.
    /// Never waits: pages a reader in another process still needs stay in the log.
    ///
    /// ```swift
    /// SQLiteEngine.foldLogsOfOpenStores()
    /// exit(0)
    /// ```
    public static func foldLogsOfOpenStores() {
        let engines = registry.withLock { engines in engines.values.compactMap(\.engine) }
        for engine in engines { engine.foldLog() }
    }
}

import Synchronization
private let registry = Mutex<[String: SQLiteEngine.WeakEngine]>([:])
