import Foundation

/// How a share's URL is resolved for the user who opens it, and how that user accepts it:
/// CloudKit's rules, decided once above every engine (engines only find the share by its URL
/// token, ``StorageEngine/indexedShare(token:storageContainer:)``).
///
/// - An unknown URL, or one whose share was deleted, is `unknownItem`.
/// - The owner, an invited participant (not removed) and, for a share with a
///   ``Share/publicPermission`` other than `.none`, anyone signed in may read the metadata;
///   anyone else gets `participantMayNeedVerification`, as CloudKit answers a user the
///   private share was not sent to.
/// - Accepting marks an invited participant accepted; for a public share, it adds the caller
///   as a `.publicUser` participant with the public permission. The owner's acceptance changes
///   nothing.
///
/// ```swift
/// let invitation = try ShareInvitation(url: url, engine: engine, context: context)
/// let share = try invitation.accept()
/// ```
struct ShareInvitation {
    let engine: any StorageEngine
    /// The caller's context reaching the share owner's rows.
    let reaching: DatabaseContext
    let share: Share
    let token: String
    let me: String

    /// Finds the share `url` names for the caller of `context`.
    init(url: URL, engine: any StorageEngine, context: DatabaseContext) throws {
        let base = (engine as? SharedDatabaseEngine)?.base ?? engine
        let text = url.absoluteString
        guard text.hasPrefix(StoredShare.urlPrefix), text.count > StoredShare.urlPrefix.count else {
            throw StratusError(.unknownItem, "'\(text)' is not the URL of a Stratus share (those start with \(StoredShare.urlPrefix))")
        }
        guard let me = context.userRecordName else {
            throw StratusError(.notAuthenticated, "opening a share's URL needs a signed-in user (open the container with a user name)")
        }
        let token = String(text.dropFirst(StoredShare.urlPrefix.count))
        let unknown = StratusError(.unknownItem, "no share of container \(context.containerIdentifier) has the URL \(text): it was never made here, or its share was deleted")
        guard let entry = try base.indexedShare(token: token, storageContainer: context.storageContainer) else { throw unknown }
        let shared = DatabaseContext(containerIdentifier: context.containerIdentifier, environment: context.environment, scope: .shared,
                                     userName: context.userName, userRecordName: me, roles: context.roles)
        let reaching = shared.reachingSharedZones(of: entry.owner)
        let shareID = Record.ID(recordName: entry.shareRecordName, zoneID: RecordZone.ID(zoneName: entry.zoneName, ownerName: entry.owner))
        guard let share = try base.fetchRecords([shareID], in: reaching)[shareID] as? Share, StoredShare(share.jsonExtras).shortGUID == token else { throw unknown }
        self.engine = base
        self.reaching = reaching
        self.share = share
        self.token = token
        self.me = me
    }

    var isOwner: Bool { reaching.sharedOwner == me }

    /// The caller's participant in the share: invited (pending) or accepted. A removed one, or
    /// one in a state this version does not know (a later CloudKit's request to join), is none.
    var participant: Share.Participant? {
        share.participants.first {
            $0.role != .owner && $0.userIdentity.userRecordID?.recordName == me && ($0.acceptanceStatus == .pending || $0.acceptanceStatus == .accepted)
        }
    }

    private var notInvited: StratusError {
        StratusError(.participantMayNeedVerification, "you (\(me)) are not a participant of share '\(share.recordID.recordName)', and it is not public; ask its owner to add you",
                     recordID: share.recordID)
    }

    /// The metadata the caller sees; the root record too when `rootRecordKeys` is given (`nil`
    /// inside: every key).
    func metadata(rootRecordKeys: [String]??) throws -> Share.Metadata {
        let role: Share.ParticipantRole
        let status: Share.ParticipantAcceptanceStatus
        let permission: Share.ParticipantPermission
        if isOwner {
            (role, status, permission) = (.owner, .accepted, .readWrite)
        } else if let participant {
            (role, status, permission) = (participant.role, participant.acceptanceStatus, participant.permission)
        } else if share.publicPermission != .none {
            (role, status, permission) = (.publicUser, .unknown, share.publicPermission)
        } else {
            throw notInvited
        }
        let rootID = StoredShare(share.jsonExtras).rootRecordName.map { Record.ID(recordName: $0, zoneID: share.recordID.zoneID) }
        var root: Record?
        if let rootID, case .some(let keys) = rootRecordKeys {
            root = try engine.fetchRecords([rootID], in: reaching)[rootID]?.presented(to: me).restricted(to: keys)
        }
        return Share.Metadata(containerIdentifier: reaching.containerIdentifier, share: share.presented(to: me) as? Share ?? share, hierarchicalRootRecordID: rootID,
                              rootRecord: root, participantRole: role, participantStatus: status, participantPermission: permission,
                              ownerIdentity: share.owner.userIdentity)
    }

    /// Accepts the share for the caller and answers it as stored.
    func accept() throws -> Share {
        // The share as the accepting user sees it: `currentUserParticipant` is them.
        if isOwner { return share.presented(to: me) as? Share ?? share }
        if let participant {
            if participant.acceptanceStatus == .accepted { return share.presented(to: me) as? Share ?? share }
            participant.markAccepted()
        } else if share.publicPermission != .none {
            share.addParticipant(Share.Participant(joining: UserIdentity(userRecordID: Record.ID(recordName: me)), permission: share.publicPermission))
        } else {
            throw notInvited
        }
        var request = ModifyRequest(saves: [try PreparedSave(share, writeMode: .ifServerRecordUnchanged)], writeMode: .ifServerRecordUnchanged, isAtomic: true)
        request.writesUnchangedRecords = true
        let outcome = try RecordWriteExecutor.apply(request, engine: engine, context: reaching)
        guard let saved = try outcome.saveResults.first?.get().0 as? Share else {
            throw StratusError(.internalError, "accepting share '\(share.recordID.recordName)' stored no share")
        }
        return saved.presented(to: me) as? Share ?? saved
    }
}
