import Foundation

// A top-level class, named by `Record.ID`: swift-corelibs-foundation's archiver names the
// classes it archives, and refuses (traps on) a nested one.
/// Identifies a record within a database: a record name and a zone.
///
/// A class, as `CKRecord.ID` is: immutable, equal by value (`==`, `isEqual(_:)`, hashing),
/// archived with `NSSecureCoding`, encoded with `Codable`, and extensible with a
/// `convenience init` as ported CloudKit code extends it.
///
/// ```swift
/// let id = Record.ID(recordName: "todo-1")           // in the default zone
/// let generated = Record.ID()                          // a UUID record name
/// let data = try NSKeyedArchiver.archivedData(withRootObject: id, requiringSecureCoding: true)
/// ```
public final class RecordID: NSObject, NSSecureCoding, NSCopying, Codable, Sendable {
    /// The record's name: unique within its zone.
    ///
    /// ```swift
    /// print(Record.ID(recordName: "todo-1").recordName)   // "todo-1"
    /// ```
    public let recordName: String
    /// The zone the record lives in.
    ///
    /// ```swift
    /// let inLists = record.recordID.zoneID.zoneName == "Lists"
    /// ```
    public let zoneID: RecordZone.ID

    /// The ID of the record named `recordName` (by default a new UUID string, as
    /// `CKRecord.ID()` makes) in the zone `zoneID` (by default the default zone).
    ///
    /// ```swift
    /// let id = Record.ID(recordName: "todo-1", zoneID: RecordZone.ID(zoneName: "Lists"))
    /// ```
    public init(recordName: String = UUID().uuidString, zoneID: RecordZone.ID = .default) {
        self.recordName = recordName
        self.zoneID = zoneID
    }

    public override var description: String { "\(recordName) in \(zoneID.zoneName)" }

    /// Whether `object` is an ID of the same name in the same zone.
    public override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? RecordID else { return false }
        return self === other || (recordName == other.recordName && zoneID == other.zoneID)
    }

    public override var hash: Int {
        var hasher = Hasher()
        hasher.combine(recordName)
        hasher.combine(zoneID.zoneName)
        hasher.combine(zoneID.ownerName)
        return hasher.finalize()
    }

    // MARK: Codable, in the keys of the value type it was

    private enum CodingKeys: String, CodingKey { case recordName, zoneID }

    /// Reads an ID that ``encode(to:)`` wrote.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        recordName = try container.decode(String.self, forKey: .recordName)
        zoneID = try container.decode(RecordZone.ID.self, forKey: .zoneID)
    }

    /// Writes the record name and the zone ID.
    ///
    /// ```swift
    /// let json = try JSONEncoder().encode(record.recordID)
    /// ```
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(recordName, forKey: .recordName)
        try container.encode(zoneID, forKey: .zoneID)
    }

    // MARK: NSSecureCoding, as apps archive CKRecord.IDs (a cache key, a pending deletion)

    public static var supportsSecureCoding: Bool { true }

    private enum ArchiveKey {
        static let recordName = "StratusRecordName"
    }

    /// Writes the ID (`NSCoding`).
    ///
    /// ```swift
    /// let data = try NSKeyedArchiver.archivedData(withRootObject: record.recordID, requiringSecureCoding: true)
    /// ```
    public func encode(with coder: NSCoder) {
        coder.encode(recordName as NSString, forKey: ArchiveKey.recordName)
        zoneID.encodeNameAndOwner(with: coder)
    }

    /// Reads an ID written by ``encode(with:)``; `nil` when the archive holds no record ID.
    ///
    /// ```swift
    /// let id = try NSKeyedUnarchiver.unarchivedObject(ofClass: Record.ID.self, from: data)
    /// ```
    public convenience init?(coder: NSCoder) {
        guard let recordName = coder.archivedText(forKey: ArchiveKey.recordName),
              let zone = RecordZone.ID.archivedNameAndOwner(in: coder)
        else { return nil }
        self.init(recordName: recordName, zoneID: RecordZone.ID(zoneName: zone.zoneName, ownerName: zone.ownerName))
    }

    /// The ID itself: IDs are immutable.
    public func copy(with zone: NSZone? = nil) -> Any { self }
}
