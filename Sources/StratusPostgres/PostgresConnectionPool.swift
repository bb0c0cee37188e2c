import Foundation
@_spi(StratusEngine) import Stratus
import Synchronization

/// A bounded set of connections to one PostgreSQL server, shared by threads.
///
/// At most `maximumConnections` are open; a caller that finds them all in use waits up to
/// `acquireTimeout` seconds for one. Connections are opened when first needed and reused.
/// A connection comes back clean: a transaction left open is rolled back, notifications are
/// no longer listened to; a broken one is closed and replaced. Session settings changed with
/// `SET` stay with the connection: use `SET LOCAL` inside transactions.
///
/// ```swift
/// let pool = try PostgresConnectionPool(url: "postgresql://app@db1/stratus", maximumConnections: 4)
/// let count = try pool.withTransaction(isolation: .repeatableRead) { connection in
///     try connection.query("SELECT count(*) FROM notes")[0].int64(0) ?? 0
/// }
/// ```
public final class PostgresConnectionPool: @unchecked Sendable {
    // @unchecked: the idle connections and the count are read and changed only under
    // `condition`'s lock, and a connection is handed to one caller at a time.

    /// The connection string, its password hidden.
    public let redactedURL: String
    /// Where the server is, for messages (from the settings; `server` of a connection is exact).
    public let server: String
    public let maximumConnections: Int
    /// Seconds a caller waits for a connection when all are in use.
    public let acquireTimeout: Double

    private let url: String
    private let settings: [String: String]
    private let condition = NSCondition()
    private var idle: [PostgresConnection] = []
    private var openCount = 0
    /// The cancellers of the connections lent out, for ``cancelStatementsInFlight()``.
    private var lent: [ObjectIdentifier: PostgresCanceller] = [:]
    /// The operations' cancellations lent connections are registered with.
    private var registrations: [ObjectIdentifier: (cancellation: StatementCancellation, id: UInt64)] = [:]
    /// Lent connections an operation's cancellation sent a cancel request for: such a request
    /// names the backend, not the statement, and may arrive after the statement ended, so the
    /// connection is closed when it comes back rather than lent to another caller.
    private var cancelledLendings: Set<ObjectIdentifier> = []

    /// A pool for the server `url` names, read as ``PostgresConnection/init(url:settings:)``
    /// reads it. No connection is opened yet.
    ///
    /// - Throws: `invalidArguments` for a string libpq cannot read, or a maximum below 1.
    public init(url: String, settings: [String: String] = [:], maximumConnections: Int = 4, acquireTimeout: Double = 30) throws {
        guard maximumConnections >= 1 else {
            throw StratusError(.invalidArguments, "a PostgreSQL connection pool needs at least one connection, not \(maximumConnections)")
        }
        let url = PostgresConnectionString.normalized(url)
        var written: [String: String] = [:]
        if PostgresConnectionString.isURL(url) || url.contains("=") {
            written = try PostgresConnectionString.settings(in: url)
        }
        written.merge(settings) { $1 }
        self.url = url
        self.settings = settings
        self.maximumConnections = maximumConnections
        self.acquireTimeout = acquireTimeout
        redactedURL = PostgresConnectionString.redacted(url)
        let host = written["host"] ?? written["hostaddr"] ?? ProcessInfo.processInfo.environment["PGHOST"] ?? "localhost"
        let port = written["port"] ?? ProcessInfo.processInfo.environment["PGPORT"] ?? "5432"
        server = PostgresConnection.serverDescription(host: host, port: port)
        Self.livePools.withLock { pools in
            pools.removeAll { $0.pool == nil }
            pools.append(WeakPool(pool: self))
        }
    }

    private final class WeakPool: @unchecked Sendable {
        // @unchecked: set once; a weak reference is read atomically.
        weak var pool: PostgresConnectionPool?
        init(pool: PostgresConnectionPool) { self.pool = pool }
    }

    private static let livePools = Mutex<[WeakPool]>([])

    /// Asks the server to stop the statement each lent connection of every pool of this process
    /// runs, waiting at most `timeout` seconds. A process that exits at once (a second
    /// interrupt) calls it first: a backend waiting for a lock does not notice that its client
    /// went away, and would hold its connection slot and its place in the lock's queue.
    ///
    /// ```swift
    /// PostgresConnectionPool.cancelStatementsInFlight(timeout: 2)
    /// exit(130)
    /// ```
    public static func cancelStatementsInFlight(timeout: Double) {
        let cancellers = livePools.withLock { pools in pools.compactMap(\.pool) }.flatMap { $0.lentCancellers() }
        guard !cancellers.isEmpty else { return }
        let done = DispatchGroup()
        for canceller in cancellers {
            done.enter()
            Thread.detachNewThread {
                canceller.cancel()
                done.leave()
            }
        }
        _ = done.wait(timeout: .now() + timeout)
    }

    private func lentCancellers() -> [PostgresCanceller] {
        condition.lock()
        defer { condition.unlock() }
        return Array(lent.values)
    }

    /// How many connections are open (idle or in use).
    public var openConnectionCount: Int {
        condition.lock()
        defer { condition.unlock() }
        return openCount
    }

    /// Runs `body` with a connection of the pool, which returns to the pool afterwards.
    ///
    /// ```swift
    /// let rows = try pool.withConnection { try $0.query("SELECT 1").count }
    /// ```
    ///
    /// - Throws: `body`'s error; `serviceUnavailable` (with `retryAfterSeconds`) when no
    ///   connection came free within ``acquireTimeout``; the errors of
    ///   ``PostgresConnection/init(url:settings:)`` when a new connection cannot be opened.
    @discardableResult
    public func withConnection<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        let connection = try acquire()
        defer { release(connection) }
        return try body(connection)
    }

    /// Runs `body` in a transaction on a connection of the pool: committed when `body`
    /// returns, rolled back when it throws.
    ///
    /// ```swift
    /// try pool.withTransaction { connection in
    ///     try connection.execute("INSERT INTO notes (id) VALUES ($1)", [.int64(1)])
    /// }
    /// ```
    ///
    /// - Throws: as ``withConnection(_:)`` and ``PostgresConnection/transaction(isolation:readOnly:_:)``:
    ///   serialization failures and deadlocks are `zoneBusy`, a lost connection
    ///   `serviceUnavailable`, both with `retryAfterSeconds`, and nothing of the transaction
    ///   applied (unless the connection broke while committing, which the message says).
    @discardableResult
    public func withTransaction<T>(isolation: PostgresIsolationLevel = .readCommitted, readOnly: Bool = false,
                                   _ body: (PostgresConnection) throws -> T) throws -> T {
        try withConnection { connection in
            try connection.transaction(isolation: isolation, readOnly: readOnly) { try body(connection) }
        }
    }

    /// Closes the connections not in use (they are opened again when needed).
    public func closeIdleConnections() {
        condition.lock()
        let closing = idle
        idle.removeAll()
        openCount -= closing.count
        condition.broadcast()
        condition.unlock()
        _ = closing  // closed here, outside the lock, as the array goes
    }

    // MARK: - Lending

    func acquire() throws -> PostgresConnection {
        let connection = try acquireConnection()
        let canceller = connection.poolCanceller
        connection.cancelRequest.clear()
        // Lent to an operation's work: cancelling the operation stops its statement, while the
        // connection is still lent to it (never another caller's, once it went back).
        let key = ObjectIdentifier(connection)
        let cancellation = StatementCancellation.current
        let registration = canceller == nil ? nil : cancellation?.register { [weak self] in self?.cancelStatement(of: key, ifRegisteredAs: cancellation) }
        condition.lock()
        lent[key] = canceller
        if let cancellation, let registration { registrations[key] = (cancellation, registration) }
        condition.unlock()
        return connection
    }

    /// Stops the statement of the lent connection `key` when `cancellation` is the one it is
    /// still lent under.
    private func cancelStatement(of key: ObjectIdentifier, ifRegisteredAs cancellation: StatementCancellation?) {
        condition.lock()
        let canceller = cancellation != nil && registrations[key]?.cancellation === cancellation ? lent[key] : nil
        if canceller != nil { cancelledLendings.insert(key) }
        condition.unlock()
        // On a thread of its own: the request is a round trip to the server, which a dead
        // network path can hold for good, and the caller (an operation's cancel(), the resource
        // timer's one queue) must return at once.
        guard let canceller else { return }
        Thread { canceller.cancel() }.start()
    }

    private func acquireConnection() throws -> PostgresConnection {
        let deadline = Date().addingTimeInterval(acquireTimeout)
        condition.lock()
        while true {
            if let connection = idle.popLast() {
                condition.unlock()
                if connection.isUsable() { return connection }
                // Closed by the server while idle (a restart, a terminated backend): replace it.
                condition.lock()
                openCount -= 1
                continue
            }
            if openCount < maximumConnections {
                openCount += 1
                condition.unlock()
                do {
                    return try PostgresConnection(url: url, settings: settings)
                } catch {
                    condition.lock()
                    openCount -= 1
                    condition.signal()
                    condition.unlock()
                    throw error
                }
            }
            if !condition.wait(until: deadline) && idle.isEmpty && openCount >= maximumConnections {
                condition.unlock()
                throw StratusError(
                    .serviceUnavailable,
                    "all \(maximumConnections) connections to the PostgreSQL server at \(server) stayed in use for \(Self.seconds(acquireTimeout)); try again, or allow more connections",
                    retryAfterSeconds: 1)
            }
        }
    }

    func release(_ connection: PostgresConnection) {
        var reusable = connection.isOpen
        if reusable && connection.transactionStatus != .idle {
            reusable = (try? connection.rollback()) != nil && connection.transactionStatus == .idle
        }
        if reusable && connection.isListening {
            reusable = (try? connection.executeScript("UNLISTEN *")) != nil
            connection.isListening = false
        }
        condition.lock()
        lent[ObjectIdentifier(connection)] = nil
        let registration = registrations.removeValue(forKey: ObjectIdentifier(connection))
        if cancelledLendings.remove(ObjectIdentifier(connection)) != nil { reusable = false }
        if reusable {
            idle.append(connection)
        } else {
            openCount -= 1
        }
        condition.signal()
        condition.unlock()
        registration.map { $0.cancellation.unregister($0.id) }
    }

    private static func seconds(_ value: Double) -> String {
        value == value.rounded() ? "\(Int(value)) s" : String(format: "%.1f s", value)
    }
}
