import Foundation
import Stratus

/// How PostgreSQL's failures become ``StratusError``s. The SQLSTATE is kept in
/// ``StratusError/sqlState``; messages name the server and the statement, never a bound value
/// or a password (a server's DETAIL lines, which quote values, are left out).
extension StratusError {
    /// The error for a statement the server refused with `sqlState`.
    ///
    /// `message` is the server's primary message; `server` where the server is
    /// (`db1:5432`); `cancelRequested` whether this connection's ``PostgresCanceller`` asked
    /// for a stop (a query_canceled without it was stopped by `statement_timeout`).
    static func postgres(sqlState: String, message: String, server: String, constraint: String? = nil,
                         sql: String? = nil, cancelRequested: Bool = false) -> StratusError {
        // Class 22 messages quote the offending value ("invalid input syntax for type
        // integer: \"abc\""); only the SQLSTATE is shown for them.
        let serverSays = sqlState.hasPrefix("22") ? "SQLSTATE \(sqlState)" : "\(message) (SQLSTATE \(sqlState))"
        let constraintPart = constraint.flatMap { message.contains($0) ? nil : ", constraint \($0)" } ?? ""
        let statement = sql.map { " in: \(PostgresConnectionString.oneLine(String($0.prefix(120))))" } ?? ""
        func make(_ code: Code, _ what: String, retryAfter: Double? = nil, showingStatement: Bool = false) -> StratusError {
            var error = StratusError(code, "\(what) (PostgreSQL at \(server): \(serverSays)\(constraintPart))\(showingStatement ? statement : "")",
                                     retryAfterSeconds: retryAfter)
            error.sqlState = sqlState
            return error
        }
        switch sqlState {
        case "40001" where message.contains("conflict with recovery"), "40P01" where message.contains("conflict with recovery"):
            // A hot standby replaying the primary's changes cancelled a read that needed rows
            // they remove: no write conflicted, so "another transaction" would mislead.
            return make(.zoneBusy, "the standby cancelled the read to replay the primary's changes (a recovery conflict); try again, or give reads room on the standby (hot_standby_feedback = on, or a longer max_standby_streaming_delay)", retryAfter: 0.1)
        case "40001", "40P01":
            return make(.zoneBusy, "the transaction conflicted with another one and was rolled back; try again", retryAfter: 0.05)
        case "55P03":
            return make(.zoneBusy, "a lock was not granted in time; try again", retryAfter: 0.1)
        case "57014":
            return cancelRequested
                ? make(.operationCancelled, "the statement was cancelled")
                : make(.serviceUnavailable, "the statement ran out of time (statement_timeout)", retryAfter: 1)
        case "57P01", "57P02", "57P03", "53300", "53000", "53200", "53400", "25P03":
            return make(.serviceUnavailable, "the PostgreSQL server is unavailable or out of resources; try again later", retryAfter: 1)
        case "25006":
            return make(.serviceUnavailable, "the PostgreSQL server refused a write in a read-only transaction: a standby takes no writes (try again on the primary), nor does a primary from a role or database whose default_transaction_read_only is on", retryAfter: 1)
        case "53100":
            return make(.quotaExceeded, "the PostgreSQL server's disk is full")
        case "42501":
            return make(.permissionFailure, "permission denied")
        case "3D000", "3F000":
            return make(.badContainer, "the database or schema does not exist")
        case "54000", "54001", "54011", "54023":
            return make(.limitExceeded, "a PostgreSQL limit was exceeded", showingStatement: true)
        case "XX001", "XX002":
            return make(.badDatabase, "the PostgreSQL database is damaged")
        default:
            break
        }
        switch sqlState.prefix(2) {
        case "08": return make(.serviceUnavailable, "the connection to the PostgreSQL server failed; try again", retryAfter: 1)
        case "28": return make(.notAuthenticated, "the PostgreSQL server refused the login")
        case "23": return make(.constraintViolation, "a constraint was violated")
        case "22": return make(.invalidArguments, "a value does not fit its PostgreSQL type", showingStatement: true)
        default: return make(.internalError, "PostgreSQL refused a statement", showingStatement: true)
        }
    }

    /// The error for a connection that broke during a statement. PostgreSQL rolls back the
    /// transaction of a broken connection, so nothing of it was applied, unless it broke
    /// while committing.
    static func postgresConnectionLost(server: String, inTransaction: Bool, committing: Bool = false, reason: String) -> StratusError {
        let consequence = committing
            ? "; whether the transaction was committed is unknown"
            : inTransaction ? "; its transaction was rolled back, nothing of it was applied" : ""
        let because = reason.isEmpty ? "" : ": \(reason)"
        var error = StratusError(.serviceUnavailable, "lost the connection to the PostgreSQL server at \(server)\(consequence); try again\(because)", retryAfterSeconds: 1)
        // transaction_resolution_unknown: the writer asks the server what became of it.
        if committing { error.sqlState = "08007" }
        return error
    }
}
