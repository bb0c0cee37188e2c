import Foundation
@_spi(StratusEngine) import Stratus

extension PostgresEngine {
    /// Fails when the server would refuse every record write of this role: a standby (it
    /// takes no writes), or a role without INSERT and UPDATE on the store's records table.
    /// Row-level security, which decides row by row, is the write's to apply.
    ///
    /// - Throws: ``StratusError`` `serviceUnavailable` for a standby, `permissionFailure`
    ///   naming the missing privileges.
    @_spi(StratusEngine) public func checkWriteAccess(in database: DatabaseContext) throws {
        let row = try pool.withConnection { connection in
            try connection.query("""
                SELECT pg_catalog.pg_is_in_recovery(), pg_catalog.has_table_privilege('records', 'INSERT'),
                       pg_catalog.has_table_privilege('records', 'UPDATE'), CURRENT_USER::text,
                       pg_catalog.current_setting('transaction_read_only') = 'on'
                """)[0]
        }
        if try row.bool(0) == true {
            throw StratusError(.serviceUnavailable, "the PostgreSQL server at \(redactedURL) accepts no writes (a standby); writing needs the primary", retryAfterSeconds: 1)
        }
        if try row.bool(4) == true {
            throw Self.readOnlyByDefault(redactedURL)
        }
        let missing = [(try row.bool(1), "INSERT"), (try row.bool(2), "UPDATE")].compactMap { $0.0 == true ? nil : $0.1 }
        guard !missing.isEmpty else { return }
        let role = try row.text(3) ?? "this role"
        throw StratusError(.permissionFailure, "role \(role) may not write the store at \(redactedURL): it lacks \(missing.joined(separator: " and ")) on its records table (the tables' owner grants them, e.g. with `stratus users row-security`)")
    }

    /// The refusal of a primary whose sessions start read-only: an administrator's setting
    /// (`default_transaction_read_only`) that no retry changes (`permissionFailure`, not retried).
    static func readOnlyByDefault(_ server: String) -> StratusError {
        StratusError(.permissionFailure, "the PostgreSQL server at \(server) takes no writes from this role: its transactions are read-only by default (default_transaction_read_only is on for the role, the database or the server; an administrator turns it off, e.g. ALTER DATABASE … SET default_transaction_read_only = off)")
    }
}
