import Foundation

/// A notification from a ``RecordZoneSubscription``: records of a zone changed, like
/// `CKRecordZoneNotification`. One write transaction makes one, however many records of the
/// zone it changed; fetch the changes with ``FetchRecordZoneChangesOperation``.
///
/// ```swift
/// if let zone = notification as? RecordZoneNotification { zonesToFetch.insert(zone.recordZoneID!) }
/// ```
public final class RecordZoneNotification: StratusNotification, @unchecked Sendable {
    /// The zone whose records changed; fetch its changes to catch up.
    ///
    /// ```swift
    /// let changes = try await database.recordZoneChanges(inZoneWith: notification.recordZoneID!, since: token)
    /// ```
    public let recordZoneID: RecordZone.ID?
    /// The database the zone is in.
    public let databaseScope: Database.Scope

    init(parts: Parts, recordZoneID: RecordZone.ID, scope: Database.Scope) {
        self.recordZoneID = recordZoneID
        self.databaseScope = scope
        super.init(parts: parts)
    }
}
