/// An engine whose connection may reach only some of the store's rows: on PostgreSQL, a role
/// that row-level security binds reads the public database and its own private rows. Jobs that
/// must read or write every row (``StoreCopier``) ask before they begin.
///
/// ```swift
/// if let reporting = engine as? any RowAccessReporting, let limit = try reporting.rowAccessLimit() {
///     throw StratusError(.permissionFailure, "cannot copy the whole store: \(limit)")
/// }
/// ```
@_spi(StratusEngine)
public protocol RowAccessReporting {
    /// Why this engine's connection does not reach every row of the store, and who would (a
    /// sentence naming the roles that do); `nil` when it reaches them all.
    ///
    /// - Throws: store errors.
    func rowAccessLimit() throws -> String?
}
