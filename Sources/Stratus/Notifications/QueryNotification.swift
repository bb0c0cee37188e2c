import Foundation

/// A notification from a ``QuerySubscription``: a record that matches its predicate was
/// created, updated or deleted, like `CKQueryNotification`.
///
/// See ``QuerySubscription`` for which writes fire it. For creations and updates,
/// ``recordFields`` holds the subscription's desired keys' values as the write stored them.
///
/// ```swift
/// if let query = notification as? QueryNotification, query.queryNotificationReason == .recordCreated {
///     print(query.recordID!.recordName, query.recordFieldValues["total"] ?? "none")
/// }
/// ```
public final class QueryNotification: StratusNotification, @unchecked Sendable {
    /// What happened to the record, as `CKQueryNotification.Reason`.
    ///
    /// ```swift
    /// if query.queryNotificationReason == .recordDeleted { remove(query.recordID!) }
    /// ```
    public enum Reason: Int, Hashable, Sendable, CustomStringConvertible {
        case recordCreated = 1
        case recordUpdated = 2
        case recordDeleted = 3

        public var description: String {
            switch self {
            case .recordCreated: "recordCreated"
            case .recordUpdated: "recordUpdated"
            case .recordDeleted: "recordDeleted"
            }
        }
    }

    /// Whether the record was created, updated or deleted.
    ///
    /// ```swift
    /// if query.queryNotificationReason == .recordDeleted { removeLocalCopy(query.recordID!) }
    /// ```
    public let queryNotificationReason: Reason
    /// The record that was created, updated or deleted.
    public let recordID: Record.ID?
    /// The database the record is in.
    public let databaseScope: Database.Scope
    /// A Stratus addition: the type of the record.
    public let recordType: String?
    /// A Stratus addition: ``recordFields`` as typed values.
    public let recordFieldValues: [String: FieldValue]

    init(parts: Parts, reason: Reason, recordID: Record.ID?, recordType: String?, scope: Database.Scope, fields: [String: FieldValue]) {
        self.queryNotificationReason = reason
        self.recordID = recordID
        self.recordType = recordType
        self.databaseScope = scope
        self.recordFieldValues = fields
        super.init(parts: parts)
    }

    /// The desired keys' values for creations and updates (`nil` for deletions, or when the
    /// subscription desires no keys), as `record[key]` returns them.
    public var recordFields: [String: Any]? {
        guard queryNotificationReason != .recordDeleted, !recordFieldValues.isEmpty else { return nil }
        return recordFieldValues.mapValues { $0.objectValue as Any }
    }

    /// Whether the record is in the public database, as `CKQueryNotification.isPublicDatabase`.
    public var isPublicDatabase: Bool { databaseScope == .public }
}
