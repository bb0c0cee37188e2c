import Foundation

/// The checks every zone operation makes before a zone ID reaches the store.
enum ZoneRules {
    /// A zone a request may name: a valid name, and not the default zone of the shared
    /// database (which has none).
    static func checkZoneID(_ zoneID: RecordZone.ID, _ context: DatabaseContext) throws(StratusError) {
        do {
            try Naming.checkZoneName(zoneID.zoneName)
        } catch {
            var error = error
            error.zoneID = zoneID
            throw error
        }
        if context.scope == .shared && zoneID.isDefault {
            throw StratusError(.invalidArguments, "the shared database has no default zone; it holds only zones other users share with you", zoneID: zoneID)
        }
    }

    /// A zone the current user may create or delete: in their own private database, or in the
    /// public database (a Stratus extension), owned by themselves.
    static func checkModifiable(_ zoneID: RecordZone.ID, _ context: DatabaseContext) throws(StratusError) {
        try checkZoneID(zoneID, context)
        if context.scope == .shared {
            throw StratusError(.invalidArguments, "zones in the shared database are the zones other users share with you and you accept; they are not created there (delete one from the shared database to leave its shares)", zoneID: zoneID)
        }
        if context.isAdministrator { return }
        if context.userRecordName == nil {
            throw StratusError(.notAuthenticated, "creating or deleting zone '\(zoneID.zoneName)' needs a signed-in user", zoneID: zoneID)
        }
        let owner = zoneID.ownerName
        if !context.isCurrentUser(owner) {
            throw StratusError(.permissionFailure, "zone '\(zoneID.zoneName)' belongs to '\(owner)'; only a zone's owner creates or deletes it", zoneID: zoneID)
        }
    }

    /// A zone the current user may delete: their own (``checkModifiable(_:_:)``), never the
    /// default zone, and in the public database, which holds every user's records, only as the
    /// store's administrator. In the shared database deleting a zone is leaving it, as in
    /// CloudKit: the user's to do for any zone shared with them.
    static func checkDeletable(_ zoneID: RecordZone.ID, _ context: DatabaseContext) throws(StratusError) {
        if context.scope == .shared {
            try checkZoneID(zoneID, context)
            return
        }
        try checkModifiable(zoneID, context)
        if zoneID.isDefault {
            throw StratusError(.invalidArguments, "the default zone cannot be deleted; delete its records instead", zoneID: zoneID)
        }
        // Deleting a zone deletes its records without asking each one's security roles.
        if context.scope == .public && !context.isAdministrator {
            throw StratusError(.permissionFailure, "zone '\(zoneID.zoneName)' of the public database holds every user's records, which deleting it would delete whatever their security roles say; only the store's administrator deletes a public zone (stratus zones delete --as-administrator)", zoneID: zoneID)
        }
    }

    /// The capabilities a new zone gets: the default zone always has the default zone's,
    /// whatever the caller says; other zones what they ask of those Stratus supports
    /// (`fetchChanges`, `atomic`). The sharing capabilities are not stored: they follow from
    /// where the zone is (``answered(_:as:sharedZones:in:)``).
    static func supportedCapabilities(of zone: RecordZone) -> RecordZone.Capabilities {
        zone.zoneID.isDefault ? RecordZone.default.capabilities : zone.capabilities.intersection([.fetchChanges, .atomic])
    }

    /// What a zone can do, as Stratus applies and answers it: the default zone always has the
    /// default zone's capabilities (``RecordZone/default``: no `atomic`, as CloudKit's), whatever
    /// a store kept for it (stores made before this rule keep `atomic` in its row); other zones
    /// what they were created with. The write policy asks this once per zone and request.
    static func capabilities(of zoneID: RecordZone.ID, stored: RecordZone.Capabilities) -> RecordZone.Capabilities {
        zoneID.isDefault ? RecordZone.default.capabilities : stored
    }

    /// Whether a request writing in these zones can be atomic, as far as it is known without
    /// asking the store: not when one of them is the default zone. (Whether a custom zone was
    /// created with `atomic` is read from the store when the request is written.)
    static func mayBeAtomic(_ zoneIDs: some Sequence<RecordZone.ID>) -> Bool {
        zoneIDs.allSatisfy { capabilities(of: $0, stored: .atomic).contains(.atomic) }
    }

    /// `zone` with the capabilities ``capabilities(of:stored:)`` answers for it, and, for a
    /// custom zone of the private database (`scope`), `sharing` and `zoneWideSharing`: its
    /// records and the zone itself can be shared there, as in CloudKit, where app code checks
    /// `capabilities.contains(.sharing)` before it shares.
    /// `sharedZones`: the zones a zone-wide share shares (``zoneWideShares(of:engine:context:)``).
    static func answered(_ zone: RecordZone, as zoneID: RecordZone.ID? = nil, sharedZones: Set<RecordZone.ID> = [], in scope: Database.Scope) -> RecordZone {
        let id = zoneID ?? zone.zoneID
        let share = sharedZones.contains(zone.zoneID) ? Record.Reference(recordID: Record.ID(recordName: Share.zoneWideShareName, zoneID: id), action: .none) : nil
        var answered = capabilities(of: id, stored: zone.capabilities)
        if scope == .private && !id.isDefault { answered.formUnion([.sharing, .zoneWideSharing]) }
        return RecordZone(zoneID: id, capabilities: answered, share: share)
    }

    /// Which of `zones` a zone-wide share shares: only custom zones of the private database
    /// hold shares, read in one look for their `cloudkit.zoneshare` records.
    static func zoneWideShares(of zones: [RecordZone], engine: any StorageEngine, context: DatabaseContext) throws -> Set<RecordZone.ID> {
        guard context.scope == .private else { return [] }
        let ids = zones.filter { !$0.zoneID.isDefault }.map { Record.ID(recordName: Share.zoneWideShareName, zoneID: $0.zoneID) }
        guard !ids.isEmpty else { return [] }
        return Set(try engine.fetchRecords(ids, in: context).values.filter { $0.recordType == Record.SystemType.share }.map(\.recordID.zoneID))
    }

    /// CloudKit's answer to a read or write in a zone that does not exist: `zoneNotFound`, not
    /// "no such record", so that code written for CloudKit (create the zone on `zoneNotFound`,
    /// then retry) runs unchanged.
    static func zoneNotFound(_ zoneID: RecordZone.ID, _ context: DatabaseContext, recordID: Record.ID? = nil) -> StratusError {
        StratusError.zoneNotFound(zoneID, in: context, recordID: recordID)
    }

    /// Whether zones exist, asked of the store once per operation, and only for records it did
    /// not find (a zone that holds a record exists): a fetch of present records pays nothing.
    struct Existence {
        private var stored: Set<RecordZone.ID>?

        init() {}

        mutating func contains(_ zoneID: RecordZone.ID, engine: any StorageEngine, context: DatabaseContext) throws -> Bool {
            if zoneID.isDefault && context.scope != .shared { return true }
            let zones = try stored ?? Set(engine.fetchZones(in: context).map(\.zoneID))
            stored = zones
            return zones.contains(zoneID) || zones.contains(context.canonical(zoneID))
        }
    }

    /// Reports per-zone errors as CloudKit does: one `partialFailure` holding them all.
    static func partialFailure(_ errors: [RecordZone.ID: StratusError], of total: Int) -> StratusError? {
        guard !errors.isEmpty else { return nil }
        var error = StratusError(.partialFailure, "\(errors.count) of \(total) zone(s) failed")
        error.partialErrorsByZoneID = errors
        return error
    }
}

extension StratusError {
    /// `zoneNotFound` for a zone the database of `context` does not have, as every engine and
    /// operation words it: a private or shared database names its user, whose zones differ
    /// from every other user's.
    ///
    /// ```swift
    /// throw StratusError.zoneNotFound(zoneID, in: context)
    /// ```
    @_spi(StratusEngine)
    public static func zoneNotFound(_ zoneID: RecordZone.ID, in context: DatabaseContext, recordID: Record.ID? = nil) -> StratusError {
        let user = context.scope == .public ? "" : (context.userName ?? context.userRecordName).map { " of user \($0)" } ?? ""
        return StratusError(.zoneNotFound, "zone '\(zoneID.zoneName)' does not exist in the \(context.scope.name) database\(user)", recordID: recordID, zoneID: zoneID)
    }
}
