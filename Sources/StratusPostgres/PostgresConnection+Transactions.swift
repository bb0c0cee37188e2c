import CLibPQ
import Foundation
import Stratus

/// How much a transaction sees of others' concurrent commits (`BEGIN ISOLATION LEVEL …`).
public enum PostgresIsolationLevel: String, Sendable {
    case readCommitted = "READ COMMITTED"
    case repeatableRead = "REPEATABLE READ"
    case serializable = "SERIALIZABLE"
}

extension PostgresConnection {
    /// Opens a transaction.
    ///
    /// ```swift
    /// try connection.begin(isolation: .repeatableRead, readOnly: true)
    /// ```
    ///
    /// - Throws: as ``query(_:_:prepare:)``; `internalError` when a transaction is open already.
    public func begin(isolation: PostgresIsolationLevel = .readCommitted, readOnly: Bool = false) throws {
        guard transactionStatus == .idle else {
            throw StratusError(.internalError, "a transaction is open already on the connection to \(server)")
        }
        try executeScript("BEGIN ISOLATION LEVEL \(isolation.rawValue)\(readOnly ? " READ ONLY" : "")")
    }

    /// Commits the open transaction.
    ///
    /// - Throws: `zoneBusy` when a serializable transaction cannot commit (SQLSTATE 40001);
    ///   `internalError` when the transaction had failed (PostgreSQL then rolls it back);
    ///   `serviceUnavailable` when the connection broke (the message says the outcome is
    ///   unknown).
    public func commit() throws {
        let result = try perform(sql: "COMMIT", committing: true) { PQexec(handle, "COMMIT") }
        // COMMIT of a failed transaction succeeds with the tag ROLLBACK.
        if result.commandTag == "ROLLBACK" {
            throw StratusError(.internalError, "the transaction on \(server) had failed and was rolled back instead of committed")
        }
    }

    /// Rolls back the open transaction, if any.
    ///
    /// - Throws: `serviceUnavailable` when the connection broke (the server rolls back then).
    public func rollback() throws {
        discardSentStatement()
        abandonCopy()
        guard transactionStatus != .idle else { return }
        _ = try perform(sql: "ROLLBACK") { PQexec(handle, "ROLLBACK") }
    }

    /// Runs `body` in a transaction: committed when `body` returns, rolled back when it throws.
    ///
    /// ```swift
    /// try connection.transaction(isolation: .serializable) {
    ///     try connection.execute("UPDATE counters SET n = n + 1 WHERE id = $1", [.int64(1)])
    /// }
    /// ```
    ///
    /// - Throws: `body`'s error, or those of ``begin(isolation:readOnly:)`` and ``commit()``.
    @discardableResult
    public func transaction<T>(isolation: PostgresIsolationLevel = .readCommitted, readOnly: Bool = false, _ body: () throws -> T) throws -> T {
        try begin(isolation: isolation, readOnly: readOnly)
        let value: T
        do {
            value = try body()
        } catch {
            if isOpen { try? rollback() }
            throw error
        }
        try commit()
        return value
    }

    /// Runs `body` inside a savepoint of the open transaction: when `body` throws, only its
    /// own changes are undone and the transaction goes on.
    ///
    /// ```swift
    /// try connection.transaction {
    ///     try? connection.savepoint { try connection.execute("INSERT …") }   // may fail alone
    ///     try connection.execute("INSERT …")
    /// }
    /// ```
    ///
    /// - Throws: `body`'s error; `internalError` outside a transaction.
    @discardableResult
    public func savepoint<T>(_ body: () throws -> T) throws -> T {
        // A COPY left open (new rows sent ahead) ends first: until then libpq reports the
        // connection busy, and the savepoint would cut it.
        try settle()
        guard transactionStatus == .inTransaction else {
            throw StratusError(.internalError, "a savepoint needs an open, healthy transaction")
        }
        savepointDepth += 1
        defer { savepointDepth -= 1 }
        let name = "stratus_savepoint_\(savepointDepth)"
        try executeScript("SAVEPOINT \(name)")
        let value: T
        do {
            value = try body()
        } catch {
            if isOpen { try? executeScript("ROLLBACK TO SAVEPOINT \(name); RELEASE SAVEPOINT \(name)") }
            throw error
        }
        try executeScript("RELEASE SAVEPOINT \(name)")
        return value
    }
}
