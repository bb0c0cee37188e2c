import Foundation

/// A notification from a ``RecordZoneSubscription``: records of a zone changed, like
/// `CKRecordZoneNotification`. One write transaction makes one, however many records of the
/// zone it changed; fetch the changes with ``FetchRecordZoneChangesOperation``.
///
/// ```swift
/// if let zone = notification as? RecordZoneNotification { zonesToFetch.insert(zone.recordZoneID!) }
/// ```
public final class RecordZoneNotification: StratusNotification, @unchecked Sendable {
    public let recordZoneID: RecordZone.ID?
    public let databaseScope: Database.Scope

    init(parts: Parts, recordZoneID: RecordZone.ID, scope: Database.Scope) {
        self.recordZoneID = recordZoneID
        self.databaseScope = scope
        super.init(parts: parts)
    }
}
