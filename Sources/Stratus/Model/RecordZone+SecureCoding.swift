import Foundation

/// Archiving zones as apps archive `CKRecordZone`s (a cached zone list, a test double's canned
/// answers): the zone's name, owner and capabilities.
extension RecordZone: NSSecureCoding, NSCopying {
    public static var supportsSecureCoding: Bool { true }

    private enum Key {
        static let capabilities = "StratusZoneCapabilities"
    }

    /// Writes the zone (`NSCoding`).
    ///
    /// ```swift
    /// let data = try NSKeyedArchiver.archivedData(withRootObject: zones, requiringSecureCoding: true)
    /// ```
    public func encode(with coder: NSCoder) {
        zoneID.encodeNameAndOwner(with: coder)
        coder.encode(Int64(truncatingIfNeeded: capabilities.rawValue), forKey: Key.capabilities)
    }

    /// Reads a zone written by ``encode(with:)``; `nil` when the archive holds no zone.
    ///
    /// ```swift
    /// let zone = try NSKeyedUnarchiver.unarchivedObject(ofClass: RecordZone.self, from: data)
    /// ```
    public convenience init?(coder: NSCoder) {
        guard let names = ID.archivedNameAndOwner(in: coder),
              coder.containsValue(forKey: Key.capabilities)
        else { return nil }
        let capabilities = Capabilities(rawValue: UInt(truncatingIfNeeded: coder.decodeInt64(forKey: Key.capabilities)))
        self.init(zoneID: ID(zoneName: names.zoneName, ownerName: names.ownerName), capabilities: capabilities)
    }

    /// The zone itself: zones are immutable.
    public func copy(with zone: NSZone? = nil) -> Any { self }
}
