import CSQLite
import Foundation
@_spi(StratusEngine) import Stratus

/// Wakes a feed's live reader when the store changes: SQLite's `PRAGMA data_version`, which
/// moves whenever another connection (of any process) commits, read on a connection of its
/// own every ``pollInterval``. A wake-up means "something committed"; the reader then looks.
final class SQLiteNotificationWaiter: NotificationWaiter, @unchecked Sendable {
    // @unchecked: the connection is used by one reader at a time (the feed that opened the
    // waiter waits in turn), and `lock` guards it against `close()` from another thread.

    /// How often the data version is read while waiting.
    static let pollInterval = 0.02

    private let lock = NSLock()
    private var connection: SQLiteConnection?
    private var lastVersion: Int64

    /// - Throws: `badContainer` when the store cannot be opened.
    init(path: String) throws {
        let connection = try SQLiteConnection(path: path, create: false, busyTimeoutMilliseconds: 5_000)
        // Opening leaves its journal-mode check positioned on its row, which would hold a read
        // transaction open for good: the data version would then never move.
        connection.resetActiveStatements()
        self.connection = connection
        lastVersion = try Self.dataVersion(on: connection)
        connection.noteLogIdentity()
    }

    private static func dataVersion(on connection: SQLiteConnection) throws -> Int64 {
        let version = try connection.statement("PRAGMA data_version")
        defer { version.reset() }
        guard try version.step() else { throw StratusError(.internalError, "PRAGMA data_version answered nothing") }
        return version.int64(0)
    }

    func wait(timeout: Double) throws -> Bool {
        let deadline = Date().addingTimeInterval(max(0, timeout))
        while true {
            let changed = try lock.withLock { () throws -> Bool? in
                guard let connection else { return nil }
                // A store file replaced while followed (a restore) is written no more: the feed
                // would wait for ever on the old one, and its token skip what the new one gets.
                if connection.fileHasMoved || connection.logHasMoved {
                    throw StratusError(.badDatabase, "the store file at \(connection.path) was replaced, moved or deleted while its notifications were followed; follow the store at that path again (a restored store's feed starts from no token)")
                }
                let version = try Self.dataVersion(on: connection)
                defer { lastVersion = version }
                return version != lastVersion
            }
            guard let changed else { return false }
            if changed { return true }
            let remaining = deadline.timeIntervalSinceNow
            if remaining <= 0 { return false }
            Thread.sleep(forTimeInterval: min(Self.pollInterval, remaining))
        }
    }

    func close() {
        lock.withLock { connection = nil }
    }
}
