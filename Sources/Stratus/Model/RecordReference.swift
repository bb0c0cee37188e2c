import Foundation

// A top-level class, named by `Record.Reference`: swift-corelibs-foundation's archiver names the
// classes it archives, and refuses (traps on) a nested one.
/// A link from one record to another in the same zone, like `CKRecord.Reference`.
///
/// A class, as `CKRecord.Reference` is: immutable, equal by value (`==`, `isEqual(_:)`,
/// hashing), archived with `NSSecureCoding`, encoded with `Codable`, and extensible with a
/// `convenience init` as ported CloudKit code extends it.
///
/// ```swift
/// item["list"] = Record.Reference(recordID: list.recordID, action: .deleteSelf)
/// ```
public final class RecordReference: NSObject, NSSecureCoding, NSCopying, Codable, Sendable {
    /// The ID of the referenced record.
    ///
    /// ```swift
    /// let list = try await database.record(for: reference.recordID)
    /// ```
    public let recordID: Record.ID
    /// Whether deleting the referenced record deletes the referencing one too.
    ///
    /// ```swift
    /// if reference.action == .deleteSelf { print("goes with its list") }
    /// ```
    public let action: Record.ReferenceAction

    /// A reference to the record with `recordID`, which must be in the referencing record's
    /// zone; `action` says whether deleting it deletes the referencing record too.
    ///
    /// ```swift
    /// item["list"] = Record.Reference(recordID: Record.ID(recordName: "groceries"), action: .none)
    /// ```
    public init(recordID: Record.ID, action: Record.ReferenceAction) {
        self.recordID = recordID
        self.action = action
    }

    /// A reference to `record`, as `CKRecord.Reference(record:action:)`.
    ///
    /// ```swift
    /// item["list"] = Record.Reference(record: list, action: .deleteSelf)
    /// ```
    public convenience init(record: Record, action: Record.ReferenceAction) {
        self.init(recordID: record.recordID, action: action)
    }

    /// Whether `object` is a reference to the same record with the same action.
    public override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? RecordReference else { return false }
        return self === other || (action == other.action && recordID == other.recordID)
    }

    public override var hash: Int {
        var hasher = Hasher()
        hasher.combine(recordID)
        hasher.combine(action)
        return hasher.finalize()
    }

    public override var description: String {
        "reference to \(recordID)" + (action == .deleteSelf ? " (deleteSelf)" : "")
    }

    // MARK: Codable, in the keys of the value type it was

    private enum CodingKeys: String, CodingKey { case recordID, action }

    /// Reads a reference that ``encode(to:)`` wrote.
    public convenience init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(recordID: try container.decode(Record.ID.self, forKey: .recordID),
                  action: try container.decode(Record.ReferenceAction.self, forKey: .action))
    }

    /// Writes the record ID and the action.
    ///
    /// ```swift
    /// let json = try JSONEncoder().encode(Record.Reference(recordID: Record.ID(recordName: "groceries"), action: .none))
    /// ```
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(recordID, forKey: .recordID)
        try container.encode(action, forKey: .action)
    }

    // MARK: NSSecureCoding, as apps archive CKRecord.References

    public static var supportsSecureCoding: Bool { true }

    private enum ArchiveKey {
        static let recordID = "StratusReferenceRecordID"
        static let action = "StratusReferenceAction"
    }

    /// Writes the reference (`NSCoding`).
    ///
    /// ```swift
    /// let data = try NSKeyedArchiver.archivedData(withRootObject: reference, requiringSecureCoding: true)
    /// ```
    public func encode(with coder: NSCoder) {
        coder.encode(recordID, forKey: ArchiveKey.recordID)
        coder.encode(Int(action.rawValue), forKey: ArchiveKey.action)
    }

    /// Reads a reference written by ``encode(with:)``; `nil` when the archive holds none.
    ///
    /// ```swift
    /// let reference = try NSKeyedUnarchiver.unarchivedObject(ofClass: Record.Reference.self, from: data)
    /// ```
    public convenience init?(coder: NSCoder) {
        guard coder.containsValue(forKey: ArchiveKey.recordID),
              let recordID = coder.decodeArchived(RecordID.self, forKey: ArchiveKey.recordID),
              let action = Record.ReferenceAction(rawValue: UInt(clamping: coder.decodeInteger(forKey: ArchiveKey.action)))
        else { return nil }
        self.init(recordID: recordID, action: action)
    }

    /// The reference itself: references are immutable.
    public func copy(with zone: NSZone? = nil) -> Any { self }
}
