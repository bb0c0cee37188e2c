import Foundation
@_spi(StratusEngine) import Stratus

/// Wakes a feed's live reader when a writer appends to the feed: PostgreSQL's `LISTEN` on
/// ``PostgresSchema/notificationChannel``, on a connection of the engine's pool that the waiter
/// holds until ``close()``. Writers `NOTIFY` in their transaction, so the wake-up comes when
/// they commit, and names the store and the feed.
final class PostgresNotificationWaiter: NotificationWaiter, @unchecked Sendable {
    // @unchecked: the connection is used by one reader at a time (the feed that opened the
    // waiter waits in turn), and `lock` guards it against `close()` from another thread.

    private let pool: PostgresConnectionPool
    private let payload: String
    private let lock = NSLock()
    private var connection: PostgresConnection?
    private var isClosed = false

    /// - Throws: as the pool's connections do (`serviceUnavailable`, …).
    init(pool: PostgresConnectionPool, payload: String) throws {
        self.pool = pool
        self.payload = payload
        self.connection = try Self.listeningConnection(pool)
    }

    private static func listeningConnection(_ pool: PostgresConnectionPool) throws -> PostgresConnection {
        let connection = try pool.acquire()
        do {
            try connection.listen(to: PostgresSchema.notificationChannel)
        } catch {
            pool.release(connection)
            throw error
        }
        return connection
    }

    /// A connection lost (the server restarted, or an administrator ended the session) is
    /// replaced, and the wait answers `true`: the feed is read by position, so the reader
    /// looks at it again and misses nothing that committed meanwhile. While the server stays
    /// away the wait sleeps out its time and answers `true` too, and the reader's own
    /// statements (retried as any) decide when to give up.
    func wait(timeout: Double) throws -> Bool {
        let deadline = Date().addingTimeInterval(max(0, timeout))
        while true {
            let woken: Bool?
            do {
                woken = try lock.withLock { () throws -> Bool? in
                    if isClosed { return nil }
                    if connection == nil { connection = try Self.listeningConnection(pool) }
                    return try connection!.nextNotification(timeout: max(0, deadline.timeIntervalSinceNow)).map { $0.payload == payload }
                }
            } catch let error as StratusError where error.code == .serviceUnavailable {
                let lost = lock.withLock { () -> PostgresConnection? in
                    defer { connection = nil }
                    return connection
                }
                if let lost { pool.release(lost) }
                let remaining = deadline.timeIntervalSinceNow
                if remaining > 0 { Thread.sleep(forTimeInterval: min(remaining, 0.25)) }
                return true
            }
            switch woken {
            case true?: return true
            case false?: if deadline.timeIntervalSinceNow <= 0 { return false }   // another feed's: wait on
            case nil: return false
            }
        }
    }

    func close() {
        let held = lock.withLock { () -> PostgresConnection? in
            defer { connection = nil; isClosed = true }
            return connection
        }
        if let held { pool.release(held) }
    }

    deinit { close() }
}
