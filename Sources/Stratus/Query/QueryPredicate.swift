import Foundation

/// A query predicate in the subset of `NSPredicate` that CloudKit accepts.
///
/// Write it as a CloudKit format string with arguments, or with the typed builder; both
/// produce the same value. `description` prints a format string that parses back to an equal
/// predicate.
///
/// ```swift
/// let open = try QueryPredicate(format: "checked == %@ AND createdAt > %@", 0, Date(timeIntervalSinceNow: -86_400))
/// let same = QueryPredicate.key("checked") == 0 && QueryPredicate.key("createdAt") > Date(timeIntervalSinceNow: -86_400)
/// ```
///
/// - Throws: ``StratusError`` with code `invalidArguments`, a message naming what is wrong,
///   and the `line`/`column` of the offending position in the format string.
public indirect enum QueryPredicate: Hashable, Sendable, Codable {
    /// `TRUEPREDICATE`: every record.
    case all
    /// `FALSEPREDICATE`: no record.
    case none
    /// Every sub-predicate holds (`AND`, `&&`).
    case and([QueryPredicate])
    /// The sub-predicate does not hold. CloudKit allows `NOT` only over a single comparison.
    case not(QueryPredicate)
    /// One condition on one field.
    case condition(Condition)
}

/// The left-hand side of a condition: a field or a system field of the record.
///
/// ```swift
/// let recent = QueryPredicate.condition(.compare(.modificationDate, .greater, .date(lastRun)))
/// let cheap = QueryPredicate.condition(.compare(.field("price"), .less, .double(10)))
/// ```
public enum QueryKey: Hashable, Sendable, Codable, CustomStringConvertible {
    /// A field of the record, by key.
    case field(String)
    /// `recordID` / `recordName`: the record's name (compared with a `Record.ID`, a reference or a string).
    case recordName
    case creationDate
    case modificationDate
    case creatorUserRecordID
    case lastModifiedUserRecordID
    /// `___parent` (`CKRecord.SystemFieldKey.parent`): the record's parent, compared by record
    /// name with a reference, a `Record.ID`, a `Record` or a string; a record without a parent
    /// matches no condition on it. A plain `parent` is a field named `parent`, as in CloudKit.
    ///
    /// ```swift
    /// let items = try QueryPredicate(format: "%K == %@", Record.SystemFieldKey.parent, list.recordID)
    /// ```
    case parent

    /// The key for a name as written in a predicate or sort descriptor; system names map to system keys.
    public init(_ name: String) {
        switch name {
        case "recordID", "recordName", "___recordID": self = .recordName
        case "creationDate", "___createTime": self = .creationDate
        case "modificationDate", "___modTime": self = .modificationDate
        case "creatorUserRecordID", "___createdBy": self = .creatorUserRecordID
        case "lastModifiedUserRecordID", "___modifiedBy": self = .lastModifiedUserRecordID
        case "___parent": self = .parent
        default: self = .field(name)
        }
    }

    /// The key as written in a format string.
    public var description: String {
        switch self {
        case .field(let name): name
        case .recordName: "recordID"
        case .creationDate: "creationDate"
        case .modificationDate: "modificationDate"
        case .creatorUserRecordID: "creatorUserRecordID"
        case .lastModifiedUserRecordID: "lastModifiedUserRecordID"
        case .parent: "___parent"
        }
    }
}

/// A comparison operator of a condition.
///
/// ```swift
/// let adults = QueryPredicate.condition(.compare(.field("age"), .greaterOrEqual, .int64(18)))
/// ```
public enum ComparisonOperator: String, Hashable, Sendable, Codable {
    case equal = "=="
    case notEqual = "!="
    case less = "<"
    case lessOrEqual = "<="
    case greater = ">"
    case greaterOrEqual = ">="
}

/// One condition of a predicate. Values are typed ``FieldValue``s: an `Int` argument becomes
/// `.int64`, a `Record.ID` or `Record` argument becomes a `.reference` with action `.none`.
///
/// ```swift
/// let open = QueryPredicate.condition(.in(.field("status"), [.string("new"), .string("active")]))
/// let query = Query(recordType: "Ticket", predicate: open)
/// ```
public enum Condition: Hashable, Sendable, Codable {
    /// `key op value`, for a scalar field (and `recordID == %@`).
    case compare(QueryKey, ComparisonOperator, FieldValue)
    /// `key BETWEEN {low, high}` (both ends included).
    case between(QueryKey, FieldValue, FieldValue)
    /// `key IN {a, b, …}` / `key IN %@` / `ANY {a, b} = key`: the scalar field equals one of the values.
    case `in`(QueryKey, [FieldValue])
    /// `key BEGINSWITH 'prefix'` (case-sensitive).
    case beginsWith(QueryKey, String)
    /// For list fields: `ANY key = value`, `key CONTAINS value`, `value IN key`.
    case listContains(QueryKey, FieldValue)
    /// For list fields: `ANY key IN {a, b}`: some element equals one of the values.
    case listContainsAny(QueryKey, [FieldValue])
    /// For list fields: `ANY key BEGINSWITH 'prefix'`.
    case listAnyBeginsWith(QueryKey, String)
    /// `self CONTAINS 'bob smith'`: full-text search over the string fields; `allTokens` is
    /// false for one `self CONTAINS` (any token matches).
    case tokens([String], allTokens: Bool)
    /// `distanceToLocation:fromLocation:(key, location) op kilometres`.
    case distance(QueryKey, from: Location, ComparisonOperator, kilometers: Double)
    /// `___parent != nil` (true) or `___parent == nil` (false): whether the record has a parent,
    /// the one nil comparison CloudKit's queries take besides its share's. `___parent == nil`
    /// finds a hierarchy's top-level records.
    ///
    /// ```swift
    /// let topLevel = try QueryPredicate(format: "%K == nil", Record.SystemFieldKey.parent)   // .condition(.hasParent(false))
    /// ```
    case hasParent(Bool)
}

/// Sorts query results by a field or system field; ties are broken by record name.
///
/// ```swift
/// query.sortDescriptors = [RecordSortDescriptor(key: "createdAt", ascending: false)]
/// ```
public struct RecordSortDescriptor: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The field key, or a system field name (`creationDate`, `modificationDate`, `recordName`).
    public let key: String
    public let ascending: Bool
    /// When set, sorts by distance of the `LOCATION` field `key` from this point.
    public let distanceFrom: Location?

    /// Sorts by the field or system field `key`, ascending unless `ascending` is `false`, as
    /// `NSSortDescriptor(key:ascending:)` does in a `CKQuery`.
    ///
    /// ```swift
    /// query.sortDescriptors = [RecordSortDescriptor(key: "modificationDate", ascending: false)]   // newest first
    /// ```
    public init(key: String, ascending: Bool = true) {
        self.key = key
        self.ascending = ascending
        self.distanceFrom = nil
    }

    /// Sorts by distance of the location field `key` from `location`, nearest first when ascending.
    public init(distanceOf key: String, from location: Location, ascending: Bool = true) {
        self.key = key
        self.ascending = ascending
        self.distanceFrom = location
    }

    public var queryKey: QueryKey { QueryKey(key) }

    public var description: String { "\(key)\(ascending ? "" : ":desc")" }
}
