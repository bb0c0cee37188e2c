import Foundation

/// Archiving zones as apps archive `CKRecordZone`s (a cached zone list, a test double's canned
/// answers): the zone's name, owner and capabilities.
extension RecordZone: NSSecureCoding, NSCopying {
    public static var supportsSecureCoding: Bool { true }

    private enum Key {
        static let zoneName = "StratusZoneName"
        static let ownerName = "StratusZoneOwnerName"
        static let capabilities = "StratusZoneCapabilities"
    }

    /// Writes the zone (`NSCoding`).
    ///
    /// ```swift
    /// let data = try NSKeyedArchiver.archivedData(withRootObject: zones, requiringSecureCoding: true)
    /// ```
    public func encode(with coder: NSCoder) {
        coder.encode(zoneID.zoneName as NSString, forKey: Key.zoneName)
        coder.encode(zoneID.ownerName as NSString, forKey: Key.ownerName)
        coder.encode(Int64(capabilities.rawValue), forKey: Key.capabilities)
    }

    /// Reads a zone written by ``encode(with:)``; `nil` when the archive holds no zone.
    ///
    /// ```swift
    /// let zone = try NSKeyedUnarchiver.unarchivedObject(ofClass: RecordZone.self, from: data)
    /// ```
    public convenience init?(coder: NSCoder) {
        guard let zoneName = coder.archivedText(forKey: Key.zoneName),
              let ownerName = coder.archivedText(forKey: Key.ownerName),
              coder.containsValue(forKey: Key.capabilities)
        else { return nil }
        let capabilities = Capabilities(rawValue: Int(truncatingIfNeeded: coder.decodeInt64(forKey: Key.capabilities)))
        self.init(zoneID: ID(zoneName: zoneName, ownerName: ownerName), capabilities: capabilities)
    }

    /// The zone itself: zones are immutable.
    public func copy(with zone: NSZone? = nil) -> Any { self }
}
