import Foundation

// A top-level class, named by `RecordZone.ID`: swift-corelibs-foundation's archiver names the
// classes it archives, and refuses (traps on) a nested one.
/// Identifies a zone by name and owner.
///
/// A class, as `CKRecordZone.ID` is: immutable, equal by value, archived with
/// `NSSecureCoding`, encoded with `Codable`, and extensible with a `convenience init` or
/// a computed property with a setter, as ported CloudKit code extends it.
///
/// ```swift
/// let listsZone = RecordZone.ID(zoneName: "Lists")
/// let list = Record(recordType: "List", recordID: Record.ID(recordName: "groceries", zoneID: listsZone))
/// ```
public final class RecordZoneID: NSObject, NSSecureCoding, NSCopying, Codable, Sendable {
    /// The owner name that means "the current user", like `CKCurrentUserDefaultName`.
    public static let currentUserDefaultOwner = "__defaultOwner__"
    /// The name of every database's default zone.
    public static let defaultZoneName = "_defaultZone"

    /// The zone's name, unique among its owner's zones.
    public let zoneName: String
    /// The user record name of the zone's owner; ``currentUserDefaultOwner`` for the current user's.
    public let ownerName: String

    /// The ID of the zone `zoneName` (by default the default zone) owned by `ownerName` (by
    /// default the current user).
    ///
    /// ```swift
    /// let lists = RecordZone.ID(zoneName: "Lists")
    /// let shared = RecordZone.ID(zoneName: "Lists", ownerName: "_2f8a…")   // another user's zone
    /// ```
    public init(zoneName: String = RecordZoneID.defaultZoneName, ownerName: String = RecordZoneID.currentUserDefaultOwner) {
        self.zoneName = zoneName
        self.ownerName = ownerName
    }

    /// The default zone, `_defaultZone`.
    public static let `default` = RecordZoneID()

    /// Whether this is the default zone (`_defaultZone`), whoever owns it.
    ///
    /// ```swift
    /// if record.recordID.zoneID.isDefault { print("no atomic requests here") }
    /// ```
    public var isDefault: Bool { zoneName == RecordZoneID.defaultZoneName }

    public override var description: String { ownerName == RecordZoneID.currentUserDefaultOwner ? zoneName : "\(zoneName) (\(ownerName))" }

    /// Whether `object` is the ID of a zone of the same name and owner.
    public override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? RecordZoneID else { return false }
        return isSameZone(as: other)
    }

    /// Whether `other` names the same zone, as ``isEqual(_:)`` answers, without the cast back
    /// from `Any?` that NSObject's `==` makes through it: a cost every record of an import
    /// paid several times. (No `==` overload: one more candidate for every `==` in the
    /// programs that import Stratus slows their type checking.)
    @inlinable package func isSameZone(as other: RecordZoneID) -> Bool {
        self === other || (zoneName == other.zoneName && ownerName == other.ownerName)
    }

    public override var hash: Int {
        var hasher = Hasher()
        hasher.combine(zoneName)
        hasher.combine(ownerName)
        return hasher.finalize()
    }

    // MARK: Codable, in the keys of the value type it was

    private enum CodingKeys: String, CodingKey { case zoneName, ownerName }

    /// Reads an ID that ``encode(to:)`` wrote.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        zoneName = try container.decode(String.self, forKey: .zoneName)
        ownerName = try container.decode(String.self, forKey: .ownerName)
    }

    /// Writes the zone's name and owner.
    ///
    /// ```swift
    /// let json = try JSONEncoder().encode(zone.zoneID)
    /// ```
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(zoneName, forKey: .zoneName)
        try container.encode(ownerName, forKey: .ownerName)
    }

    // MARK: NSSecureCoding, as apps archive CKRecordZone.IDs (the zones they sync)

    public static var supportsSecureCoding: Bool { true }

    /// Writes the ID (`NSCoding`).
    ///
    /// ```swift
    /// let data = try NSKeyedArchiver.archivedData(withRootObject: zone.zoneID, requiringSecureCoding: true)
    /// ```
    public func encode(with coder: NSCoder) {
        encodeNameAndOwner(with: coder)
    }

    /// Reads an ID written by ``encode(with:)``; `nil` when the archive holds no zone ID.
    ///
    /// ```swift
    /// let zoneID = try NSKeyedUnarchiver.unarchivedObject(ofClass: RecordZone.ID.self, from: data)
    /// ```
    public convenience init?(coder: NSCoder) {
        guard let names = Self.archivedNameAndOwner(in: coder) else { return nil }
        self.init(zoneName: names.zoneName, ownerName: names.ownerName)
    }

    // The zone's name and owner under the same keys in the archives of a zone ID, a record ID
    // and a zone, so that each reads as the others write.
    private enum ArchiveKey {
        static let zoneName = "StratusZoneName"
        static let ownerName = "StratusZoneOwnerName"
    }

    func encodeNameAndOwner(with coder: NSCoder) {
        coder.encode(zoneName as NSString, forKey: ArchiveKey.zoneName)
        coder.encode(ownerName as NSString, forKey: ArchiveKey.ownerName)
    }

    static func archivedNameAndOwner(in coder: NSCoder) -> (zoneName: String, ownerName: String)? {
        guard let zoneName = coder.archivedText(forKey: ArchiveKey.zoneName),
              let ownerName = coder.archivedText(forKey: ArchiveKey.ownerName)
        else { return nil }
        return (zoneName, ownerName)
    }

    /// The ID itself: IDs are immutable.
    public func copy(with zone: NSZone? = nil) -> Any { self }
}
