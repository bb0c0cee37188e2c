import CLibPQ
import Foundation
import Stratus

/// A message sent with PostgreSQL's `NOTIFY` to a channel this connection listens to.
public struct PostgresNotification: Sendable, Hashable {
    public var channel: String
    public var payload: String
    /// The server process of the connection that sent it.
    public var senderProcessID: Int32
}

extension PostgresConnection {
    /// Starts receiving notifications sent to `channel` (after the current transaction, if
    /// any, commits).
    ///
    /// ```swift
    /// try connection.listen(to: "zone_changes")
    /// if let note = try connection.nextNotification(timeout: 5) { print(note.payload) }
    /// ```
    ///
    /// - Throws: `invalidArguments` for a channel that is not a valid name; others as
    ///   ``query(_:_:prepare:)``.
    public func listen(to channel: String) throws {
        try executeScript("LISTEN \(try Self.quoteIdentifier(channel))")
        isListening = true
    }

    /// Stops receiving notifications sent to `channel`.
    ///
    /// - Throws: as ``listen(to:)``.
    public func unlisten(from channel: String) throws {
        try executeScript("UNLISTEN \(try Self.quoteIdentifier(channel))")
    }

    /// Sends `payload` to the listeners of `channel` (when the current transaction commits).
    ///
    /// - Throws: as ``query(_:_:prepare:)``.
    public func notify(_ channel: String, payload: String = "") throws {
        try execute("SELECT pg_notify($1, $2)", [.text(channel), .text(payload)])
    }

    /// The next notification received for a channel this connection listens to, waiting up
    /// to `timeout` seconds for one; `nil` when none came in time.
    ///
    /// - Throws: `serviceUnavailable` when the connection breaks while waiting.
    public func nextNotification(timeout: Double) throws -> PostgresNotification? {
        let deadline = Date().addingTimeInterval(max(0, timeout))
        while true {
            if let notification = PQnotifies(handle) {
                defer { PQfreemem(notification) }
                return PostgresNotification(
                    channel: String(cString: notification.pointee.relname),
                    payload: notification.pointee.extra.map { String(cString: $0) } ?? "",
                    senderProcessID: notification.pointee.be_pid)
            }
            let remaining = deadline.timeIntervalSinceNow
            guard remaining > 0 else { return nil }
            var descriptor = pollfd(fd: PQsocket(handle), events: Int16(POLLIN), revents: 0)
            guard descriptor.fd >= 0 else { throw failure(nil, sql: nil, wasInTransaction: false) }
            let ready = poll(&descriptor, 1, Int32(min(remaining * 1000, Double(Int32.max)).rounded(.up)))
            if ready < 0 && errno != EINTR { throw failure(nil, sql: nil, wasInTransaction: false) }
            if ready > 0 && PQconsumeInput(handle) == 0 {
                throw failure(nil, sql: nil, wasInTransaction: PQtransactionStatus(handle) != PQTRANS_IDLE)
            }
        }
    }
}
