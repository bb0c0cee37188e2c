import Foundation

/// A zone: a group of records in one database, like `CKRecordZone`.
///
/// Every database has the default zone, ``ID/default``.
///
/// An `NSObject`, as `CKRecordZone` is, so that it archives with `NSKeyedArchiver` (see
/// `RecordZone+SecureCoding.swift`); like `CKRecordZone`, it compares as an object.
///
/// ```swift
/// let zone = RecordZone(zoneName: "Photos")
/// let record = Record(recordType: "Photo", zoneID: zone.zoneID)
/// ```
public final class RecordZone: NSObject, Sendable {
    /// The zone's name and owner.
    ///
    /// ```swift
    /// let record = Record(recordType: "Photo", zoneID: zone.zoneID)
    /// ```
    public let zoneID: ID
    /// What the zone supports: change fetches and atomic requests.
    ///
    /// ```swift
    /// let atomic = zone.capabilities.contains(.atomic)
    /// ```
    public let capabilities: Capabilities
    /// The zone's zone-wide share, as `CKRecordZone.share`: set on zones fetched from the
    /// private database that a share (``Share/init(recordZoneID:)``) shares as a whole, `nil`
    /// otherwise.
    ///
    /// ```swift
    /// if let reference = zone.share {
    ///     let share = try await database.record(for: reference.recordID) as? Share
    /// }
    /// ```
    public let share: Record.Reference?

    /// A zone with the ID `zoneID` and `capabilities`, by default `fetchChanges` and `atomic`,
    /// as CloudKit gives a custom zone.
    ///
    /// ```swift
    /// let log = RecordZone(zoneID: RecordZone.ID(zoneName: "Log"), capabilities: [.fetchChanges])   // no atomic requests
    /// ```
    public init(zoneID: ID, capabilities: Capabilities = [.fetchChanges, .atomic]) {
        self.zoneID = zoneID
        self.capabilities = capabilities
        self.share = nil
        super.init()
    }

    /// A zone as a fetch answers it, naming its zone-wide share.
    init(zoneID: ID, capabilities: Capabilities, share: Record.Reference?) {
        self.zoneID = zoneID
        self.capabilities = capabilities
        self.share = share
        super.init()
    }

    /// A zone named `zoneName` whose owner is the current user, with the `fetchChanges` and
    /// `atomic` capabilities CloudKit gives a custom zone. Saving it to a database creates it
    /// there.
    ///
    /// ```swift
    /// let zone = try await database.save(RecordZone(zoneName: "Lists"))
    /// ```
    public convenience init(zoneName: String) {
        self.init(zoneID: ID(zoneName: zoneName))
    }

    /// The default zone of a database. CloudKit's spelling, `RecordZone.default()`, works too
    /// (see ``callAsFunction()``).
    ///
    /// As in CloudKit, the default zone has no `atomic` capability: `isAtomic` has no effect
    /// there, and each item of a modify request succeeds or fails on its own. Unlike CloudKit's,
    /// it numbers its changes like a custom zone (change fetches work there), so it reports
    /// `fetchChanges`.
    ///
    /// ```swift
    /// let record = Record(recordType: "Todo", zoneID: RecordZone.default().zoneID)
    /// ```
    public static var `default`: RecordZone { RecordZone(zoneID: .default, capabilities: [.fetchChanges]) }

    /// The zone itself, so that `RecordZone.default()` (`CKRecordZone.default()`) reads the
    /// ``default`` zone: a static property and a static method cannot share a name in Swift.
    ///
    /// ```swift
    /// let zone = RecordZone.default()
    /// ```
    public func callAsFunction() -> RecordZone { self }

    /// Identifies a zone by name and owner (see ``RecordZoneID``).
    ///
    /// ```swift
    /// let listsZone = RecordZone.ID(zoneName: "Lists")
    /// ```
    public typealias ID = RecordZoneID

    /// What a zone supports.
    ///
    /// ```swift
    /// if zone.capabilities.contains(.atomic) { operation.isAtomic = true }
    /// ```
    public struct Capabilities: OptionSet, Hashable, Sendable {
        /// The capabilities as bits.
        public let rawValue: UInt
        /// Capabilities from bits, as an `OptionSet`.
        ///
        /// ```swift
        /// let both: RecordZone.Capabilities = [.fetchChanges, .atomic]
        /// ```
        public init(rawValue: UInt) { self.rawValue = rawValue }
        /// Changes in the zone can be fetched incrementally.
        public static let fetchChanges = Capabilities(rawValue: 1 << 0)
        /// Modify requests in the zone can be atomic.
        public static let atomic = Capabilities(rawValue: 1 << 1)
        /// Records of the zone can be shared (`Share(rootRecord:)`): reported by the private
        /// database's custom zones, as in CloudKit.
        public static let sharing = Capabilities(rawValue: 1 << 2)
        /// The whole zone can be shared (`Share(recordZoneID:)`): reported with ``sharing``.
        public static let zoneWideSharing = Capabilities(rawValue: 1 << 3)
    }
}
