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

    /// - Throws: as the pool's connections do (`serviceUnavailable`, …).
    init(pool: PostgresConnectionPool, payload: String) throws {
        self.pool = pool
        self.payload = payload
        let connection = try pool.acquire()
        do {
            try connection.listen(to: PostgresSchema.notificationChannel)
        } catch {
            pool.release(connection)
            throw error
        }
        self.connection = connection
    }

    func wait(timeout: Double) throws -> Bool {
        let deadline = Date().addingTimeInterval(max(0, timeout))
        while true {
            let woken = try lock.withLock { () throws -> Bool? in
                guard let connection else { return nil }
                return try connection.nextNotification(timeout: max(0, deadline.timeIntervalSinceNow)).map { $0.payload == payload }
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
            defer { connection = nil }
            return connection
        }
        if let held { pool.release(held) }
    }

    deinit { close() }
}
