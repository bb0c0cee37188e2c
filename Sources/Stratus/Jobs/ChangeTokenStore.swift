/// Keeps a change feed's token between runs, so that each run goes on where the last stopped.
///
/// A ``RecordZoneChangeFeed`` saves the token only after the batch before it was applied, so a
/// store that saves durably gives exactly-once delivery. ``ChangeTokenFile`` (the `stratus` tool's
/// token file) is one (it also records how much of an output file is committed).
///
/// ```swift
/// final class MemoryTokens: ChangeTokenStore {
///     var token: ServerChangeToken?
///     func loadToken() throws -> ServerChangeToken? { token }
///     func saveToken(_ token: ServerChangeToken) throws { self.token = token }
/// }
/// ```
public protocol ChangeTokenStore: AnyObject {
    /// The token of the last applied batch, or nil to start at the zone's beginning.
    ///
    /// - Throws: when it cannot be read.
    func loadToken() throws -> ServerChangeToken?
    /// Replaces the token durably, after its batch was applied.
    ///
    /// - Throws: when it cannot be written; the feed stops with that error.
    func saveToken(_ token: ServerChangeToken) throws
}
