import Foundation

extension SharedDatabaseEngine {
    /// Runs a record write of the shared database: each item is checked against what the user
    /// reaches (its zone, then the permission of the share that reaches the record as stored,
    /// and for a save the hierarchy its `parent` puts it in), and the items allowed run as one
    /// request per owner, in that owner's rows, with the user as modifier.
    ///
    /// An item in a zone the user does not reach fails with `zoneNotFound`; one the user may
    /// only read, or that no share of theirs reaches, with `permissionFailure`, as CloudKit
    /// refuses a read-only participant's write. A share record is its owner's to change;
    /// deleting it leaves the share, as in CloudKit (``leave(_:in:context:)``). The root of a
    /// record share is its owner's to delete, and a participant's save never restores system
    /// fields (a creator, modifier, dates or change tag of their choosing in the owner's rows).
    func apply(_ request: ModifyRequest, context: DatabaseContext) throws -> ModifyOutcome {
        var access = try SharedDatabaseAccess(engine: base, context: context)
        let restores = request.writeMode.restores(preservingSystemFields: request.preservesSystemFields)
        var outcome = ModifyOutcome()
        outcome.saveResults = Array(repeating: .failure(StratusError(.internalError, "not written")), count: request.saves.count)
        outcome.deleteResults = Array(repeating: .failure(StratusError(.internalError, "not deleted")), count: request.recordIDsToDelete.count)
        var saveIndexes: [String: [Int]] = [:]
        var deleteIndexes: [String: [Int]] = [:]
        var leaves: [(index: Int, zone: SharedDatabaseAccess.Zone)] = []
        // The request's saves are parents for one another, but only those that will be written:
        // a refused save (another's record moved under a shared root) places nothing in a share.
        var pending = Dictionary(request.saves.map { ($0.recordID, $0.record) }, uniquingKeysWith: { _, last in last })
        var removedOne = true
        while removedOne && !restores {
            removedOne = false
            for save in request.saves where pending[save.recordID] != nil {
                let refused = try access.zone(save.recordID.zoneID).map { zone in
                    try writeProblem(save.recordID, saving: save, in: zone, &access, pending: pending) != nil
                } ?? true
                if refused {
                    pending[save.recordID] = nil
                    removedOne = true
                }
            }
        }

        for (index, save) in request.saves.enumerated() {
            let id = save.recordID
            guard let zone = access.zone(id.zoneID) else {
                outcome.saveResults[index] = .failure(StratusError.zoneNotFound(id.zoneID, in: context, recordID: id))
                continue
            }
            if restores {
                outcome.saveResults[index] = .failure(StratusError(.permissionFailure, "record '\(id.recordName)': a save in the shared database cannot keep given system fields (creator, modifier, dates, change tag); the store writes them, with you as modifier", recordID: id))
                continue
            }
            if let problem = try writeProblem(id, saving: save, in: zone, &access, pending: pending) {
                outcome.saveResults[index] = .failure(problem)
                continue
            }
            saveIndexes[zone.zoneID.ownerName, default: []].append(index)
        }
        for (index, id) in request.recordIDsToDelete.enumerated() {
            guard let zone = access.zone(id.zoneID) else {
                outcome.deleteResults[index] = .failure(StratusError.zoneNotFound(id.zoneID, in: context, recordID: id))
                continue
            }
            if zone.shares.contains(id.recordName) {
                leaves.append((index, zone))
                continue
            }
            if zone.roots[id.recordName] != nil {
                outcome.deleteResults[index] = .failure(StratusError(.permissionFailure, "record '\(id.recordName)' is the root of a share: only its owner deletes it (a participant leaves the share by deleting the share from the shared database)", recordID: id))
                continue
            }
            if let problem = try writeProblem(id, saving: nil, in: zone, &access, pending: [:]) {
                outcome.deleteResults[index] = .failure(problem)
                continue
            }
            deleteIndexes[zone.zoneID.ownerName, default: []].append(index)
        }
        let leaving = Set(leaves.map(\.index))
        if request.isAtomic && outcome.hasFailureAmong(saves: request.saves.indices.filter { !saveIndexes.values.joined().contains($0) },
                                                         deletes: request.recordIDsToDelete.indices.filter { !deleteIndexes.values.joined().contains($0) && !leaving.contains($0) }) {
            // The items allowed still hold their placeholders: none was written, as for any
            // atomic request that fails.
            for index in saveIndexes.values.joined() { outcome.saveResults[index] = .failure(RecordWriteExecutor.batchFailed(request.saves[index].recordID)) }
            for index in Array(deleteIndexes.values.joined()) + leaving { outcome.deleteResults[index] = .failure(RecordWriteExecutor.batchFailed(request.recordIDsToDelete[index])) }
            outcome.rolledBack = true
            return outcome
        }

        for owner in Set(saveIndexes.keys).union(deleteIndexes.keys).sorted() {
            let saves = saveIndexes[owner] ?? []
            let deletes = deleteIndexes[owner] ?? []
            var part = request
            part.saves = saves.map { request.saves[$0] }
            part.recordIDsToDelete = deletes.map { request.recordIDsToDelete[$0] }
            part.deletedRecordTags = request.deletedRecordTags.filter { part.recordIDsToDelete.contains($0.key) }
            let done = try RecordWriteExecutor.apply(part, engine: base, context: context.reachingSharedZones(of: owner))
            for (position, index) in saves.enumerated() { outcome.saveResults[index] = done.saveResults[position] }
            for (position, index) in deletes.enumerated() { outcome.deleteResults[index] = done.deleteResults[position] }
            outcome.cascadeDeletedIDs += done.cascadeDeletedIDs
            outcome.releasedAssetContents.formUnion(done.releasedAssetContents)
            outcome.rolledBack = outcome.rolledBack || done.rolledBack
        }
        for (index, zone) in leaves {
            let id = request.recordIDsToDelete[index]
            do {
                outcome.deleteResults[index] = .success(try leave(id, in: zone, context: context))
            } catch let error as StratusError where !error.isTransient {
                outcome.deleteResults[index] = .failure(error)
            }
        }
        return outcome
    }

    /// Leaves every share of `zoneID` the user accepted, as a CloudKit participant does by
    /// deleting the zone from their shared database: a zone-wide share and the shares of
    /// records alike, so that the zone leaves the user's shared database. The owner's zone and
    /// records stay; each share marks the user `.removed`.
    ///
    /// - Throws: `zoneNotFound` for a zone the user does not reach (never shared with them,
    ///   not accepted, revoked, or already left); `serverRecordChanged` when the owner changed
    ///   a share between its read and this save (delete the zone again: the shares left before
    ///   it stay left); store failures.
    func leaveZone(_ zoneID: RecordZone.ID, _ access: SharedDatabaseAccess, context: DatabaseContext) throws {
        guard let zone = access.zone(zoneID) else { throw StratusError.zoneNotFound(zoneID, in: context) }
        for shareName in zone.shares.sorted() {
            _ = try leave(Record.ID(recordName: shareName, zoneID: zoneID), in: zone, context: context)
        }
    }

    /// Leaves the share `id` of `zone`, as a CloudKit participant does by deleting the share
    /// from their shared database: the share marks the user `.removed` (what the owner then
    /// reads), and its zone leaves the user's shared database. Answers whether it did.
    ///
    /// - Throws: `serverRecordChanged` when the owner changed the share between its read and
    ///   this save (delete it again), store failures.
    private func leave(_ id: Record.ID, in zone: SharedDatabaseAccess.Zone, context: DatabaseContext) throws -> Bool {
        guard let me = context.userRecordName, let share = try base.fetchRecords([id], in: zone.context)[id] as? Share,
              let participant = share.participants.first(where: { $0.role != .owner && $0.userIdentity.userRecordID?.recordName == me && $0.acceptanceStatus != .removed }) else {
            return false
        }
        participant.markRemoved()
        var request = ModifyRequest(saves: [try PreparedSave(share, writeMode: .ifServerRecordUnchanged)], writeMode: .ifServerRecordUnchanged, isAtomic: true)
        request.writesUnchangedRecords = true
        _ = try RecordWriteExecutor.apply(request, engine: base, context: zone.context).saveResults.first?.get()
        return true
    }

    /// Why the user may not save (`saving`) or delete the record `id` of `zone`, or `nil`.
    private func writeProblem(_ id: Record.ID, saving save: PreparedSave?, in zone: SharedDatabaseAccess.Zone, _ access: inout SharedDatabaseAccess,
                              pending: [Record.ID: Record]) throws -> StratusError? {
        if id.recordName == Share.zoneWideShareName || save?.record.recordType == Record.SystemType.share || zone.shares.contains(id.recordName) {
            return StratusError(.permissionFailure, "record '\(id.recordName)' is a share: only its owner changes it (a participant leaves a share by deleting it from the shared database)", recordID: id)
        }
        let stored = try base.fetchRecords([id], in: zone.context)[id]
        let storedPermission = try stored.flatMap { try access.permission(for: $0, in: zone) }
        if save == nil, zone.zoneWide == nil, storedPermission == nil {
            // One answer for a record outside the share and for a name never stored, as a fetch
            // gives: else a deletion would tell the participant which names the owner's zone holds.
            return StratusError(.unknownItem, "record '\(id.recordName)' is not among the records zone '\(id.zoneID.zoneName)' of \(id.zoneID.ownerName) shares with you; nothing was deleted", recordID: id)
        }
        var permissions: [Share.ParticipantPermission?] = []
        if stored != nil { permissions.append(storedPermission) }
        if let save { permissions.append(try access.permission(ofHierarchy: id.recordName, parent: save.parent, in: zone, pending: pending)) }
        if permissions.isEmpty {
            // A deletion of a record that is not stored, in a zone shared as a whole: as in the
            // owner's zone, nothing to refuse.
            return nil
        }
        if try permissions.contains(where: { $0 == nil }) || adoptsStoredRecords(id, stored: stored, in: zone) {
            return StratusError(.permissionFailure, "record '\(id.recordName)' is not in a hierarchy shared with you in zone '\(id.zoneID.zoneName)' of \(id.zoneID.ownerName); a record joins a shared hierarchy by naming a shared record as its parent", recordID: id)
        }
        if permissions.contains(where: { $0 != .readWrite }) {
            return StratusError(.permissionFailure, "record '\(id.recordName)': your participation in the share of zone '\(id.zoneID.zoneName)' is read-only; the owner gives participants write access with permission .readWrite", recordID: id)
        }
        return nil
    }
}

extension SharedDatabaseEngine {
    /// Whether creating the record `id` (not `stored`) would pull stored records into the
    /// hierarchy it joins: records whose parent of that name was deleted, which left the share
    /// with it. Only the owner brings them back; a participant who could would reach records
    /// the owner never shared with them (a hierarchy is the owner's to shape). A zone shared as
    /// a whole, and a name that is a root the user reaches, pull in nothing they did not reach.
    /// Refused as a record outside the share is, with the same words, so that the answer says
    /// no more than that.
    private func adoptsStoredRecords(_ id: Record.ID, stored: Record?, in zone: SharedDatabaseAccess.Zone) throws -> Bool {
        guard stored == nil, zone.zoneWide == nil, zone.roots[id.recordName] == nil else { return false }
        return try base.hasChildRecords(of: id, in: zone.context)
    }
}

private extension ModifyOutcome {
    func hasFailureAmong(saves: [Int], deletes: [Int]) -> Bool {
        saves.contains { if case .failure = saveResults[$0] { true } else { false } } || deletes.contains { if case .failure = deleteResults[$0] { true } else { false } }
    }
}
