import Foundation
import StratusPostgres
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The PostgreSQL server the tests use, found or started once per test process.
///
/// - `STRATUS_TEST_POSTGRES_URL` set: that server (its user must be allowed to create
///   databases). `STRATUS_TEST_POSTGRES_TCP` (`host:port`), if set, names an address where
///   the server checks passwords, for the login tests.
/// - Otherwise, when PostgreSQL's server programs are installed: a throwaway cluster started
///   through `scripts/pg-test-cluster` on first use, stopped when the process exits (at
///   exit, on SIGINT/SIGTERM/SIGHUP, and by the script's watcher even after `kill -9`).
/// - Otherwise the suites marked ``Testing/Trait/requiresPostgres`` are skipped, and the
///   reason is printed once on stderr.
///
/// Each test takes its own schema (``makeSchema()``, a millisecond) or database
/// (``makeDatabase()``, half a second of copying), so tests run in parallel:
///
/// ```swift
/// @Suite(.requiresPostgres) struct PostgresEngineTests {
///     @Test func opens() throws {
///         let schema = try PostgresTestServer.makeSchema()
///         let connection = try PostgresConnection(url: schema.url)
///         …
///     }
/// }
/// ```
public enum PostgresTestServer {
    /// Whether a server is there for the tests (also when starting it failed: the tests
    /// then fail with the reason, rather than being skipped).
    public static var isAvailable: Bool {
        if case .unavailable(let reason) = state {
            announceOnce(reason)
            return false
        }
        return true
    }

    /// Why no server is available, if none is.
    public static var unavailableReason: String? {
        if case .unavailable(let reason) = state { return reason }
        return nil
    }

    /// The URL of the server's maintenance database, as a user that may create databases
    /// and roles.
    ///
    /// - Throws: when no server is available or it did not start.
    public static func adminURL() throws -> String {
        switch state {
        case .running(let server): return server.url
        case .failed(let reason): throw PostgresTestServerError(message: reason)
        case .unavailable(let reason): throw PostgresTestServerError(message: "PostgreSQL not available: \(reason)")
        }
    }

    /// Where the server listens on TCP and checks passwords (`scram-sha-256`), when known.
    public static var passwordCheckingAddress: (host: String, port: Int)? {
        guard case .running(let server) = state, let address = server.passwordAddress else { return nil }
        guard let colon = address.lastIndex(of: ":"), let port = Int(address[address.index(after: colon)...]) else { return nil }
        return (String(address[..<colon]), port)
    }

    /// The server's log, when this process started the server (`nil` for a server named by
    /// `STRATUS_TEST_POSTGRES_URL`): for tests of what a command leaves there.
    public static var serverLogPath: String? {
        guard case .running(let server) = state, let directory = server.clusterDirectory else { return nil }
        return directory + "/server.log"
    }

    /// A new, empty database for one test, dropped when the returned value goes away.
    ///
    /// - Throws: when no server is available, or the database cannot be created.
    public static func makeDatabase() throws -> PostgresTestDatabase {
        _ = sweepsAssetCachesAtExit
        let admin = try adminURL()
        let number = databaseCounter.add(1, ordering: .relaxed).newValue
        let name = "stratus_test_\(getpid())_\(number)_\(UInt16.random(in: 0...UInt16.max))"
        try adminPool(admin).withConnection { connection in
            try connection.executeScript("CREATE DATABASE \(try PostgresConnection.quoteIdentifier(name))")
        }
        return PostgresTestDatabase(name: name, url: try PostgresConnectionString.replacing(["dbname": name], in: admin), adminURL: admin)
    }

    /// A new, empty schema for one test, first on the search path of its ``PostgresTestSchema/url``,
    /// dropped when the returned value goes away. Much cheaper than a database (a
    /// millisecond, where `CREATE DATABASE` copies a template of several megabytes); the
    /// schemas of one test process share one database, which is dropped when it exits.
    ///
    /// - Throws: when no server is available, or the schema cannot be created.
    public static func makeSchema() throws -> PostgresTestSchema {
        _ = sweepsAssetCachesAtExit
        let databaseURL = try sharedDatabaseURL.get()
        let number = databaseCounter.add(1, ordering: .relaxed).newValue
        let name = "stratus_test_\(number)"
        try adminPool(databaseURL).withConnection { connection in
            try connection.executeScript("CREATE SCHEMA \(try PostgresConnection.quoteIdentifier(name))")
        }
        // The name is lowercase letters, digits and underscores: no quoting inside `options`.
        let url = try PostgresConnectionString.replacing(["options": "-c search_path=\(name)"], in: databaseURL)
        return PostgresTestSchema(name: name, url: url, databaseURL: databaseURL)
    }

    /// The database of this process's schemas, made on first use.
    private static let sharedDatabaseURL: Result<String, any Error> = Result {
        let admin = try adminURL()
        let name = "stratus_test_\(getpid())_\(UInt32.random(in: 0...UInt32.max))"
        try adminPool(admin).withConnection { connection in
            try connection.executeScript("CREATE DATABASE \(try PostgresConnection.quoteIdentifier(name))")
        }
        if case .running(let server) = state, server.clusterDirectory == nil {
            // A server of the user's: drop the database at exit (a throwaway cluster goes whole).
            sharedDatabaseToDrop.withLock { $0 = (admin, name) }
            atexit {
                guard let (admin, name) = PostgresTestServer.sharedDatabaseToDrop.withLock({ $0 }) else { return }
                _ = try? PostgresConnection(url: PostgresTestServer.withCleanupTimeouts(admin)).executeScript("DROP DATABASE IF EXISTS \(try PostgresConnection.quoteIdentifier(name)) WITH (FORCE)")
            }
        }
        return try PostgresConnectionString.replacing(["dbname": name], in: admin)
    }

    private static let sharedDatabaseToDrop = Mutex<(String, String)?>(nil)

    /// `url` with time limits for the statements that clean up after tests (drops, and the
    /// look-ups before them), which must end. A `DROP DATABASE` waits until every backend of
    /// the server took note of it, and a backend reading `COPY` data its client does not send
    /// never does: unbounded, such a drop at exit kept the test process from ending.
    static func withCleanupTimeouts(_ url: String) throws -> String {
        let existing = try PostgresConnectionString.settings(in: url)["options"].map { $0 + " " } ?? ""
        return try PostgresConnectionString.replacing(
            ["connect_timeout": "10", "options": existing + "-c statement_timeout=60000 -c lock_timeout=60000"], in: url)
    }

    /// Removes, when the process exits, the asset caches of the stores in this process's
    /// databases that are still there: a database or schema is dropped on a thread of its own
    /// when its test lets it go, and the process may exit before the last ones ran.
    private static let sweepsAssetCachesAtExit: Void = {
        atexit { PostgresTestServer.removeRemainingAssetCaches() }
    }()

    private static func removeRemainingAssetCaches() {
        guard let admin = try? withCleanupTimeouts(adminURL()) else { return }
        let prefix = "stratus_test_\(getpid())_"
        // A connection of its own: at exit, the pool's may be lent to drops still waiting.
        let names = try? PostgresConnection(url: admin)
            .query("SELECT datname FROM pg_database WHERE starts_with(datname, '\(prefix)')").map { try $0.text(0) ?? "" }
        for name in names ?? [] { removeAssetCaches(ofStoresIn: admin, database: name, schema: nil) }
    }

    // MARK: - Finding or starting the server

    struct Server: Sendable {
        var url: String
        var passwordAddress: String?
        /// The cluster's folder, when this process started it.
        var clusterDirectory: String?
    }

    enum State: Sendable {
        case running(Server)
        case failed(String)
        case unavailable(String)
    }

    private static let state: State = findOrStart()
    private static let databaseCounter = Atomic<Int>(0)
    private static let announced = Atomic<Bool>(false)
    private static let pools = Mutex<[String: PostgresConnectionPool]>([:])

    static func adminPool(_ url: String) throws -> PostgresConnectionPool {
        try pools.withLock { pools in
            if let pool = pools[url] { return pool }
            let pool = try PostgresConnectionPool(url: url, maximumConnections: 2, acquireTimeout: 120)
            pools[url] = pool
            return pool
        }
    }

    private static func announceOnce(_ reason: String) {
        if !announced.exchange(true, ordering: .relaxed) {
            FileHandle.standardError.write(Data("PostgreSQL tests skipped: PostgreSQL not available: \(reason)\n".utf8))
        }
    }

    public static var scriptPath: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("scripts/pg-test-cluster").path
    }

    private static func findOrStart() -> State {
        let environment = ProcessInfo.processInfo.environment
        if let url = environment["STRATUS_TEST_POSTGRES_URL"], !url.isEmpty {
            return .running(Server(url: url, passwordAddress: environment["STRATUS_TEST_POSTGRES_TCP"].flatMap { $0.isEmpty ? nil : $0 }))
        }
        let script = scriptPath
        guard FileManager.default.isExecutableFile(atPath: script) else {
            return .unavailable("STRATUS_TEST_POSTGRES_URL is not set and \(script) is missing")
        }
        // system(), not Process: under the test runner, Process.waitUntilExit never saw the
        // script end (it stayed a zombie), and the first test hung.
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("stratus-pg-start-\(UUID().uuidString)")
        let outputPath = scratch.path + ".out", errorPath = scratch.path + ".err"
        defer {
            try? FileManager.default.removeItem(atPath: outputPath)
            try? FileManager.default.removeItem(atPath: errorPath)
        }
        let status = system("\(shellQuoted(script)) start --watch-pid \(getpid()) </dev/null >\(shellQuoted(outputPath)) 2>\(shellQuoted(errorPath))")
        let printed = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        let complaint = ((try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        // A wait status: the exit code is in the second byte, a signal in the low bits.
        let exitCode = status & 0x7f == 0 ? (status >> 8) & 0xff : -1
        switch exitCode {
        case 0: break
        case 69: return .unavailable("STRATUS_TEST_POSTGRES_URL is not set and \(complaint)")
        default: return .failed("scripts/pg-test-cluster start failed (wait status \(status)): \(complaint)")
        }
        var settings: [String: String] = [:]
        for line in printed.split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1)
            if parts.count == 2 { settings[String(parts[0])] = String(parts[1]) }
        }
        guard let url = settings["STRATUS_TEST_POSTGRES_URL"], let directory = settings["STRATUS_TEST_POSTGRES_DIR"] else {
            return .failed("scripts/pg-test-cluster start printed no URL: \(printed)")
        }
        ownedCluster.withLock { $0 = directory }
        installStopHandlers(directory: directory)
        return .running(Server(url: url, passwordAddress: settings["STRATUS_TEST_POSTGRES_TCP"], clusterDirectory: directory))
    }

    // MARK: - Stopping the cluster this process started

    private static let ownedCluster = Mutex<String?>(nil)

    private static func installStopHandlers(directory: String) {
        if let text = try? String(contentsOfFile: directory + "/data/postmaster.pid", encoding: .utf8),
           let pid = Int32(text.split(separator: "\n").first ?? "") {
            postmasterToQuit = pid
        }
        atexit {
            guard let directory = PostgresTestServer.ownedCluster.withLock({ $0 }) else { return }
            _ = system("\(shellQuoted(PostgresTestServer.scriptPath)) stop \(shellQuoted(directory)) >/dev/null 2>&1")
        }
        for signalNumber in [SIGINT, SIGTERM, SIGHUP] {
            var current = sigaction()
            sigaction(signalNumber, nil, &current)
            // Only where nobody else handles the signal; the script's watcher cleans up anyway.
            guard current.__sigaction_handler.sa_handler == nil else { continue }
            var action = sigaction()
            action.__sigaction_handler.sa_handler = { signalNumber in
                // Async-signal-safe: SIGQUIT is PostgreSQL's immediate shutdown; the watcher
                // removes the folder once this process is gone.
                if postmasterToQuit > 0 { kill(postmasterToQuit, SIGQUIT) }
                signal(signalNumber, SIG_DFL)
                raise(signalNumber)
            }
            sigemptyset(&action.sa_mask)
            sigaction(signalNumber, &action, nil)
        }
    }
}

/// `text` in single quotes for /bin/sh.
private func shellQuoted(_ text: String) -> String {
    "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
}

/// Read by the signal handler, which may only touch plain memory; written once before the
/// handlers are installed.
nonisolated(unsafe) private var postmasterToQuit: pid_t = 0

/// A database made for one test by ``PostgresTestServer/makeDatabase()``; dropped (with any
/// connections still open to it) when this value goes away.
public final class PostgresTestDatabase: Sendable {
    public let name: String
    /// The database's URL, as the server's user.
    public let url: String
    private let adminURL: String

    init(name: String, url: String, adminURL: String) {
        self.name = name
        self.url = url
        self.adminURL = adminURL
    }

    deinit {
        let name = name, adminURL = adminURL
        // On a thread of its own: DROP DATABASE waits until every backend of the server took
        // note (a barrier), also one another test holds idle in a transaction while it waits
        // for its own tasks, which a drop blocking a thread of the cooperative pool would stall.
        Thread.detachNewThread {
            guard let adminURL = try? PostgresTestServer.withCleanupTimeouts(adminURL) else { return }
            removeAssetCaches(ofStoresIn: adminURL, database: name, schema: nil)
            _ = try? PostgresTestServer.adminPool(adminURL).withConnection { connection in
                try connection.executeScript("DROP DATABASE IF EXISTS \(try PostgresConnection.quoteIdentifier(name)) WITH (FORCE)")
            }
        }
    }
}

/// A schema made for one test by ``PostgresTestServer/makeSchema()``; dropped with everything
/// in it when this value goes away.
public final class PostgresTestSchema: Sendable {
    public let name: String
    /// A URL whose connections find the schema first on their search path (tables created
    /// without a schema name go there).
    public let url: String
    /// The URL of the database holding the schema, without the search path.
    public let databaseURL: String

    init(name: String, url: String, databaseURL: String) {
        self.name = name
        self.url = url
        self.databaseURL = databaseURL
    }

    deinit {
        let name = name, databaseURL = databaseURL
        // On a thread of its own, as a database is dropped: the drop waits for locks another
        // test may hold while it waits for its own tasks.
        Thread.detachNewThread {
            guard let databaseURL = try? PostgresTestServer.withCleanupTimeouts(databaseURL) else { return }
            removeAssetCaches(ofStoresIn: databaseURL, database: nil, schema: name)
            _ = try? PostgresTestServer.adminPool(databaseURL).withConnection { connection in
                try connection.executeScript("DROP SCHEMA IF EXISTS \(try PostgresConnection.quoteIdentifier(name)) CASCADE")
            }
        }
    }
}

/// Removes the asset cache folders that engines opened on the stores about to be dropped made
/// by default (`$TMPDIR/stratus-assets-<uid>-<store>`): a cache outlives its store by design,
/// and a test run makes hundreds of stores.
private func removeAssetCaches(ofStoresIn url: String, database: String?, schema: String?) {
    func identities(_ connection: PostgresConnection) throws -> [String] {
        var schemas = try connection.query("SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relname = 'meta' AND c.relkind = 'r'").map { try $0.text(0) ?? "" }
        if let schema { schemas = schemas.filter { $0 == schema } }
        return try schemas.flatMap { name in
            try connection.query("SELECT value FROM \(try PostgresConnection.quoteIdentifier(name)).meta WHERE key = 'identity'").compactMap { try $0.text(0) }
        }
    }
    // A database's own connection is closed before it is dropped; a schema's database is kept.
    let found: [String]? = try? database.map { try identities(PostgresConnection(url: PostgresConnectionString.replacing(["dbname": $0], in: url))) }
        ?? PostgresTestServer.adminPool(url).withConnection(identities)
    for identity in found ?? [] {
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("stratus-assets-\(geteuid())-\(identity)", isDirectory: true)
        try? FileManager.default.removeItem(at: cache)
    }
}

/// The test server could not be used.
public struct PostgresTestServerError: Error, CustomStringConvertible {
    public var message: String
    public var description: String { message }
    public init(message: String) { self.message = message }
}

extension Trait where Self == ConditionTrait {
    /// Runs a suite or test only when a PostgreSQL server is available to the tests (see
    /// ``PostgresTestServer``); otherwise it is reported as skipped, and the reason printed.
    public static var requiresPostgres: Self {
        .enabled(
            if: PostgresTestServer.isAvailable,
            "needs PostgreSQL: install the server (Debian: postgresql) or set STRATUS_TEST_POSTGRES_URL")
    }
}
