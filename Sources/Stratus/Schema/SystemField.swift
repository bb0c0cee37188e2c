/// A system field every record has, by its Stratus name, with the name and type CloudKit's
/// schema language gives it (`"___createTime" TIMESTAMP`, …).
///
/// A ``RecordTypeSchema`` indexes a system field by declaring a field with the Stratus name
/// (``RecordTypeSchema/indexableSystemFields``); the schema language writes it back under
/// CloudKit's name.
///
/// ```swift
/// SystemField(cloudKitName: "___recordID")   // .recordName
/// SystemField.creationDate.cloudKitName      // "___createTime"
/// ```
public enum SystemField: String, CaseIterable, Hashable, Sendable {
    case creationDate
    case creatorUserRecordID
    case recordChangeTag
    case modificationDate
    case lastModifiedUserRecordID
    case recordName

    /// The field's name in CloudKit's schema language and queries.
    public var cloudKitName: String {
        switch self {
        case .creationDate: "___createTime"
        case .creatorUserRecordID: "___createdBy"
        case .recordChangeTag: "___etag"
        case .modificationDate: "___modTime"
        case .lastModifiedUserRecordID: "___modifiedBy"
        case .recordName: "___recordID"
        }
    }

    /// The system field CloudKit's schema language names `cloudKitName`, if any.
    public init?(cloudKitName: String) {
        guard let field = Self.allCases.first(where: { $0.cloudKitName == cloudKitName }) else { return nil }
        self = field
    }

    /// The type CloudKit's schema language declares: TIMESTAMP, REFERENCE or STRING.
    public var cloudKitType: FieldType {
        switch self {
        case .creationDate, .modificationDate: .timestamp
        case .creatorUserRecordID, .lastModifiedUserRecordID, .recordName: .reference
        case .recordChangeTag: .string
        }
    }

    /// The type a ``RecordTypeSchema`` field declaring an index on it has (`recordName` is a
    /// STRING there), or `nil` when the field cannot be indexed (`recordChangeTag`).
    public var declaredType: FieldType? { RecordTypeSchema.indexableSystemFields[rawValue] }
}
