import Foundation

/// CloudKit's sharing rules for saves and deletes, decided once above every engine
/// (``RecordWriteExecutor`` asks them inside the engine's transaction):
///
/// - A share (`cloudkit.share`) lives in a custom zone of the private database.
/// - A new record-level share is saved with its root record in the same request; a record has
///   at most one share, and a zone with a zone-wide share (`cloudkit.zoneshare`) takes no
///   record-level share, nor the other way round (`alreadyShared`).
/// - The store assigns a new share its URL token and names its owner; later saves keep both,
///   and the share's root.
/// - The store sets a root's `share` member when its share is saved, and clears it when the
///   share is deleted; a client's copy of it is never what is stored.
/// - Deleting a root deletes its share: a record-level share's row holds a `.deleteSelf`
///   reference to its root, so the engines' cascade takes it. It holds one to the zone-wide
///   share's name too, which no record bears while it exists: the count of such references is
///   how a zone-wide share sees that the zone holds record-level shares, in the same
///   transaction, without an engine knowing what a share is.
///
/// A request that restores records as they were (an import, a copy) keeps shares and roots as
/// its input holds them: CloudKit's data is not judged by these rules. Every saved share of a
/// private database's own zone goes into the share index, restored ones too, so that URLs and
/// participants find it.
///
/// Whether a participant accepted a share is theirs alone to say: a save by anyone else, a
/// restoring one too, keeps the acceptance the stored share gives each participant (`pending`
/// for one it does not name), so that no owner lists a zone in the shared database of a user
/// who never accepted it. Only a restore of CloudKit's own records as they came keeps the
/// acceptance its input gives: the store's administrator copying a whole store, or an import
/// that keeps system records (`--keep-system-records`, ``RecordImporter/Options/writesSystemRecords``),
/// which moves what CloudKit's participants gave there. A program gives that import to those
/// it trusts as it would the store itself; on PostgreSQL a member's role cannot give an
/// acceptance whatever it runs (the database refuses it).
///
/// ```swift
/// var shares = ShareRules(request: request, context: context)
/// if let problem = try shares.resolveShare(save, existing: stored, extras: &extras, in: transaction) { return .failure(problem) }
/// ```
struct ShareRules {
    let context: DatabaseContext
    /// Whether the request restores records as they were; see above.
    let restores: Bool
    /// Whether the request restores CloudKit's own records as they came (an import with
    /// `--keep-system-records`, a store copy): a share's participants then keep the acceptance
    /// its input gives, as CloudKit's export of it says they gave it.
    private let restoresSystemRecords: Bool
    private let savedIDs: Set<Record.ID>
    private let deletedIDs: Set<Record.ID>
    /// Roots whose new share this request saved, and that share's record name.
    private var linkedRoots: [Record.ID: String] = [:]
    /// In a request that restores records, the shares its saved roots name (their `share`
    /// member, as CloudKit's JSON gives a record-level share's root), with the root's name.
    private let rootsNamingShares: [Record.ID: String]
    /// Whether a zone holds record-level shares, as the request's deletions found.
    private var zonesHoldingShares: [RecordZone.ID: Bool] = [:]

    init(request: ModifyRequest, context: DatabaseContext) {
        self.context = context
        restores = request.writeMode.restores(preservingSystemFields: request.preservesSystemFields) || request.keepsGivenVersion
        restoresSystemRecords = restores && request.writesSystemRecords
        // Only a request that saves a share needs to find roots among its saves.
        savedIDs = request.saves.contains(where: Self.isShare) ? Set(request.saves.map(\.recordID)) : []
        deletedIDs = Set(request.recordIDsToDelete)
        var roots: [Record.ID: String] = [:]
        if restores && !savedIDs.isEmpty {
            for save in request.saves {
                guard let share = StoredShare.sharedRecordName(in: save.jsonExtras) else { continue }
                roots[Record.ID(recordName: share, zoneID: save.recordID.zoneID)] = save.recordID.recordName
            }
        }
        rootsNamingShares = roots
    }

    static func isShare(_ save: PreparedSave) -> Bool { save.record.recordType == Record.SystemType.share }

    /// Whether the rules must see `save` before it is written: a share, or a record whose
    /// JSON names a share.
    func mustSee(_ save: PreparedSave) -> Bool {
        Self.isShare(save) || (!save.jsonExtras.isEmpty && save.jsonExtras.members[StoredShare.shareMember] != nil)
    }

    /// Whether a deleted record in `zoneID` may be a record-level share, which is read before
    /// it goes so that its root stops naming it: only in a private custom zone that holds such
    /// shares (counted once per zone, by their references to the zone-wide share's name).
    mutating func mayDeleteRecordShares(in zoneID: RecordZone.ID, _ transaction: any RecordWriteTransaction) throws -> Bool {
        guard context.scope == .private, zoneID.zoneName != RecordZone.ID.defaultZoneName else { return false }
        if let known = zonesHoldingShares[zoneID] { return known }
        let holds = try transaction.deleteSelfReferenceCount(to: Record.ID(recordName: Share.zoneWideShareName, zoneID: zoneID), excludingSource: "") > 0
        zonesHoldingShares[zoneID] = holds
        return holds
    }

    // MARK: - Saves

    /// Decides what a share's save stores in `extras` (its root, URL token and owner), or the
    /// error CloudKit reports for it.
    mutating func resolveShare(_ save: PreparedSave, existing: Record?, extras: inout Record.JSONExtras,
                               in transaction: any RecordWriteTransaction) throws -> StratusError? {
        let id = save.recordID
        let stored = existing.map { StoredShare($0.jsonExtras) }
        guard !restores else {
            // Kept as its input holds it (an import, a copy), but for who accepted it (see
            // above): its URL and participants find it.
            var share = StoredShare(extras)
            let given = share.participants
            settleAcceptance(of: &share, stored: stored)
            // The rest of its JSON stays as it came.
            if share.participants != given { share.writeParticipants(into: &extras) }
            if share.rootRecordName == nil, id.recordName != Share.zoneWideShareName,
               let root = rootsNamingShares[id] ?? stored?.rootRecordName {
                // CloudKit's JSON names a record-level share's root in the root (its `share`),
                // not in the share: the root restored with it says which record it shares.
                share.rootRecordName = root
                StoredShare.writeRoot(root, into: &extras)
            }
            if share.shortGUID == nil {
                // One that came without a URL (an export that left it out) gets the stored one,
                // or a new one as a new share does: the index finds shares by it.
                share.shortGUID = stored?.shortGUID ?? StoredShare.newShortGUID()
                share.writeShortGUID(into: &extras)
            }
            try index(id, extras, in: transaction)
            return nil
        }
        if let problem = placementProblem(id) { return problem }
        var share = StoredShare(extras)
        settleAcceptance(of: &share, stored: stored)
        if let stored {
            // The store's: a save changes the participants and permission, never these.
            // A share an earlier version restored without a URL gets one now.
            share.shortGUID = stored.shortGUID ?? StoredShare.newShortGUID()
            share.rootRecordName = stored.rootRecordName
        } else {
            if let problem = try newShareProblem(id, root: share.rootRecordName, in: transaction) { return problem }
            share.shortGUID = StoredShare.newShortGUID()
            if let root = share.rootRecordName { linkedRoots[Record.ID(recordName: root, zoneID: id.zoneID)] = id.recordName }
        }
        // The owner a new share names locally is "the current user": the store names them. A
        // participant's save (accepting, leaving) is not the owner's: it names no owner.
        if context.sharedOwner == nil, let user = context.userRecordName {
            for (index, participant) in share.participants.enumerated() where participant.type == "OWNER" && participant.userIdentity?.userRecordName == CurrentUserDefaultName {
                share.participants[index].userIdentity?.userRecordName = user
                share.participants[index].userIdentity?.lookupInfo?.userRecordName = user
            }
        }
        share.write(into: &extras, unchangedFrom: StoredShare(save.jsonExtras))
        try index(id, extras, in: transaction)
        return nil
    }

    /// Gives each participant of `share` the acceptance only they give (``StoredShare/participants(savedBy:stored:)``),
    /// except in a copy of a whole store by its administrator, which keeps what the source
    /// store's participants gave there.
    private func settleAcceptance(of share: inout StoredShare, stored: StoredShare?) {
        guard !context.isAdministrator && !restoresSystemRecords else { return }
        share.participants = share.participants(savedBy: context.userRecordName, stored: stored)
    }

    /// Indexes the share `id` as `extras` store it: participants and URLs find shares through
    /// the index (the share stays the truth), those of the database's own private zones.
    private func index(_ id: Record.ID, _ extras: Record.JSONExtras, in transaction: any RecordWriteTransaction) throws {
        guard context.storageScope == .private, context.storedZoneOwner(id.zoneID).isEmpty, let indexing = ShareIndexing(shareExtras: extras) else { return }
        try transaction.indexShare(id.recordName, zoneName: id.zoneID.zoneName, token: indexing.token, rootRecordName: indexing.rootRecordName, members: indexing.members)
    }

    /// Forgets the index entries of a share this request deleted (`id`).
    static func unindexDeletedShare(_ id: Record.ID, context: DatabaseContext, in transaction: any RecordWriteTransaction) throws {
        guard context.storageScope == .private, context.storedZoneOwner(id.zoneID).isEmpty else { return }
        try transaction.removeShareFromIndex(id.recordName, zoneName: id.zoneID.zoneName)
    }

    /// Sets the `share` member a record's save stores in `extras`: the share this request
    /// saved for it, else the stored record's (none when this request deletes that share).
    func resolveRoot(_ save: PreparedSave, existing: Record?, extras: inout Record.JSONExtras) {
        guard !restores else { return }
        let id = save.recordID
        let member: String?
        if let shareName = linkedRoots[id] {
            member = StoredShare.shareMemberText(shareName, zoneID: id.zoneID)
        } else if let stored = existing?.jsonExtras.members[StoredShare.shareMember],
                  let name = StoredShare.sharedRecordName(inShareMember: stored), !deletedIDs.contains(Record.ID(recordName: name, zoneID: id.zoneID)) {
            member = stored
        } else {
            member = nil
        }
        extras.members[StoredShare.shareMember] = member
    }

    /// The `.deleteSelf` targets a share's row holds beyond its fields' (see above).
    static func deleteSelfTargets(ofShare recordName: String, extras: Record.JSONExtras) -> Set<String> {
        guard recordName != Share.zoneWideShareName, let root = StoredShare(extras).rootRecordName else { return [] }
        return [root, Share.zoneWideShareName]
    }

    private func placementProblem(_ id: Record.ID) -> StratusError? {
        switch context.scope {
        case .public:
            return StratusError(.invalidArguments, "record '\(id.recordName)': a share is saved in its owner's private database, as in CloudKit; the public database holds no shares", recordID: id)
        case .shared where context.sharedOwner != nil:
            // The core saving a share of its owner's for a participant (an acceptance).
            return nil
        case .shared:
            return StratusError(.invalidArguments, "record '\(id.recordName)': a share is saved by its owner, in the owner's private database; saving shares through the shared database is not available yet", recordID: id)
        case .private:
            guard id.zoneID.zoneName == RecordZone.ID.defaultZoneName else { return nil }
            return StratusError(.invalidArguments, "record '\(id.recordName)': the default zone cannot be shared, as in CloudKit; keep the records to share in a custom zone (RecordZone(zoneName:)) and save the share there", recordID: id)
        }
    }

    private func newShareProblem(_ id: Record.ID, root: String?, in transaction: any RecordWriteTransaction) throws -> StratusError? {
        let zoneWideShare = Record.ID(recordName: Share.zoneWideShareName, zoneID: id.zoneID)
        if id.recordName == Share.zoneWideShareName {
            if root != nil {
                return StratusError(.invalidArguments, "record '\(id.recordName)' is the name of a zone-wide share, which has no root record; make it with Share(recordZoneID:)", recordID: id)
            }
            if try transaction.deleteSelfReferenceCount(to: zoneWideShare, excludingSource: "") > 0 {
                return StratusError(.alreadyShared, "zone '\(id.zoneID.zoneName)' cannot be shared as a whole: records in it are shared already (delete their shares first)", recordID: id)
            }
            return nil
        }
        guard let root else {
            return StratusError(.invalidArguments, "record '\(id.recordName)': a new share names the record it shares; make it with Share(rootRecord:) or, for a whole zone, Share(recordZoneID:)", recordID: id)
        }
        let rootID = Record.ID(recordName: root, zoneID: id.zoneID)
        guard savedIDs.contains(rootID) else {
            return StratusError(.invalidArguments, "record '\(id.recordName)': a new share is saved with its root record '\(root)' in the same request, as in CloudKit: modifyRecords(saving: [root, share], deleting: [])", recordID: id)
        }
        if try transaction.recordExists(zoneWideShare) {
            return StratusError(.alreadyShared, "record '\(root)' cannot be shared on its own: zone '\(id.zoneID.zoneName)' is shared as a whole (cloudkit.zoneshare)", recordID: id)
        }
        if let other = linkedRoots[rootID] {
            return StratusError(.alreadyShared, "record '\(root)' is shared by share '\(other)' of the same request; a record has at most one share", recordID: id)
        }
        if let stored = try transaction.storedRecord(rootID), let other = StoredShare.sharedRecordName(in: stored.jsonExtras),
           other != id.recordName, try transaction.recordExists(Record.ID(recordName: other, zoneID: id.zoneID)) {
            return StratusError(.alreadyShared, "record '\(root)' is shared already, by share '\(other)'; a record has at most one share (save changes to that share instead)", recordID: id)
        }
        return nil
    }
}
