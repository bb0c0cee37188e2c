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
            throw StratusError(.invalidArguments, "zones in the shared database are created by sharing them, which Stratus does not support yet", zoneID: zoneID)
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

    /// The capabilities a new zone gets: the default zone always has the default zone's,
    /// whatever the caller says; other zones what they ask of those Stratus supports
    /// (`fetchChanges`, `atomic`; sharing is not supported yet).
    static func supportedCapabilities(of zone: RecordZone) -> RecordZone.Capabilities {
        zone.zoneID.isDefault ? RecordZone.default.capabilities : zone.capabilities.intersection([.fetchChanges, .atomic])
    }

    /// Reports per-zone errors as CloudKit does: one `partialFailure` holding them all.
    static func partialFailure(_ errors: [RecordZone.ID: StratusError], of total: Int) -> StratusError? {
        guard !errors.isEmpty else { return nil }
        var error = StratusError(.partialFailure, "\(errors.count) of \(total) zone(s) failed")
        error.partialErrorsByZoneID = errors
        return error
    }
}
