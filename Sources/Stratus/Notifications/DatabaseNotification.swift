import Foundation

/// A notification from a ``DatabaseSubscription``: records of a database changed, like
/// `CKDatabaseNotification`. One write transaction makes one; fetch which zones changed with
/// ``FetchDatabaseChangesOperation``.
///
/// ```swift
/// if let database = notification as? DatabaseNotification { refresh(database.databaseScope) }
/// ```
public final class DatabaseNotification: StratusNotification, @unchecked Sendable {
    /// The database whose zones changed; fetch its changes to catch up.
    public let databaseScope: Database.Scope

    init(parts: Parts, scope: Database.Scope) {
        self.databaseScope = scope
        super.init(parts: parts)
    }
}
