import Foundation

/// What a user reaches through the shared database, decided once above every engine from the
/// shares that name them: the zones of other users' shares they accepted, and in each, the
/// whole zone (a zone-wide share) or the hierarchies under the shares' roots (records whose
/// `parent` chain leads to a root), each with the permission the share gives them.
///
/// Engines only keep the share index (``ShareIndexEntry``); the share records themselves say
/// who is accepted with what permission, so removing a participant or deleting a share
/// revokes at once.
///
/// ```swift
/// let access = try SharedDatabaseAccess(engine: engine, context: context)
/// if let zone = access.zones[zoneID], try access.permission(for: record, in: zone) == .readWrite { … }
/// ```
struct SharedDatabaseAccess {
    /// One owner's zone as a participant reaches it.
    struct Zone {
        /// The zone as the participant names it: owned by the sharing user.
        let zoneID: RecordZone.ID
        /// The participant's context reaching the owner's rows.
        let context: DatabaseContext
        /// The permission of a zone-wide share of the zone, if the user accepted one.
        var zoneWide: Share.ParticipantPermission?
        /// The roots of record-level shares the user accepted, with each one's permission.
        var roots: [String: Share.ParticipantPermission] = [:]
        /// The share records the user may read (their own shares, as CloudKit hands them).
        var shares: Set<String> = []
    }

    let engine: any StorageEngine
    private(set) var zones: [RecordZone.ID: Zone] = [:]
    /// Records read to follow `parent` chains, by ID (`nil`: not stored).
    private var parents: [Record.ID: Record?] = [:]

    /// The deepest `parent` chain followed: CloudKit's hierarchies are shallow, and a chain
    /// this long (or a cycle) reaches no root.
    static let maximumDepth = 1_000

    init(engine: any StorageEngine, context: DatabaseContext) throws {
        self.engine = engine
        guard let me = context.userRecordName else { return }
        // Accepted by the index and by the share record alike: either alone could be an owner's
        // word (a share record's JSON, or on SQLite the file's rows).
        for entry in try engine.indexedShares(acceptedBy: me, storageContainer: context.storageContainer) {
            let zoneID = RecordZone.ID(zoneName: entry.zoneName, ownerName: entry.owner)
            let reaching = context.reachingSharedZones(of: entry.owner)
            let shareID = Record.ID(recordName: entry.shareRecordName, zoneID: zoneID)
            guard let share = try engine.fetchRecords([shareID], in: reaching)[shareID] as? Share,
                  let participant = share.participants.first(where: { $0.role != .owner && $0.userIdentity.userRecordID?.recordName == me }),
                  participant.acceptanceStatus == .accepted, let permission = share.effectivePermission(of: participant) else { continue }
            var zone = zones[zoneID] ?? Zone(zoneID: zoneID, context: reaching)
            zone.shares.insert(entry.shareRecordName)
            if entry.shareRecordName == Share.zoneWideShareName {
                zone.zoneWide = permission
            } else if let root = StoredShare(share.jsonExtras).rootRecordName {
                zone.roots[root] = permission
            }
            zones[zoneID] = zone
        }
    }

    /// The zone `zoneID` names, if the user reaches it.
    func zone(_ zoneID: RecordZone.ID) -> Zone? { zones[zoneID] }

    /// What the user may do with `record` of `zone`: the permission of the share that reaches
    /// it, `nil` when none does. A share record itself is read-only to its participants.
    /// `pending`: records a request is saving, which a new record's `parent` may name.
    mutating func permission(for record: Record, in zone: Zone, pending: [Record.ID: Record] = [:]) throws -> Share.ParticipantPermission? {
        if record.recordType == Record.SystemType.share {
            return zone.shares.contains(record.recordID.recordName) ? .readOnly : nil
        }
        if let zoneWide = zone.zoneWide { return zoneWide }
        return try permission(ofHierarchy: record.recordID.recordName, parent: record.parent, in: zone, pending: pending)
    }

    /// The permission of the hierarchy the record `name` with `parent` belongs to.
    mutating func permission(ofHierarchy name: String, parent: Record.Reference?, in zone: Zone, pending: [Record.ID: Record] = [:]) throws -> Share.ParticipantPermission? {
        if let zoneWide = zone.zoneWide { return zoneWide }
        var current = name
        var next = parent
        var seen: Set<String> = []
        while seen.count < Self.maximumDepth, seen.insert(current).inserted {
            if let permission = zone.roots[current] { return permission }
            guard let reference = next else { return nil }
            let id = Record.ID(recordName: reference.recordID.recordName, zoneID: zone.zoneID)
            guard let record = try pending[id] ?? stored(id, in: zone) else { return nil }
            current = id.recordName
            next = record.parent
        }
        return nil
    }

    private mutating func stored(_ id: Record.ID, in zone: Zone) throws -> Record? {
        if let known = parents[id] { return known }
        let record = try engine.fetchRecords([id], in: zone.context)[id]
        parents[id] = .some(record)
        return record
    }
}
