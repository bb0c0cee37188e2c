import Foundation
import Synchronization

extension Share {
    /// What a participant, or anyone with the share's URL, may do with the shared records, as
    /// `CKShare.ParticipantPermission`.
    ///
    /// ```swift
    /// share.publicPermission = .readOnly
    /// ```
    public enum ParticipantPermission: Int, Hashable, Sendable {
        /// Not known.
        case unknown = 0
        /// No access (for ``Share/publicPermission``: only the participants named).
        case none = 1
        /// May read.
        case readOnly = 2
        /// May read and write.
        case readWrite = 3
    }

    /// A participant's kind, as `CKShare.ParticipantType`: the older form of ``ParticipantRole``
    /// (CloudKit deprecated it for the role, which adds administrators), kept for code that
    /// still reads or sets ``Participant/type``.
    ///
    /// ```swift
    /// let invited = share.participants.filter { $0.type == .privateUser }
    /// ```
    public enum ParticipantType: Int, Hashable, Sendable {
        /// Not known.
        case unknown = 0
        /// The user who shares.
        case owner = 1
        /// A user the owner invited (an administrator is one too).
        case privateUser = 3
        /// A user who joined through the share's public URL.
        case publicUser = 4
    }

    /// What a participant is to the share, as `CKShare.ParticipantRole`.
    ///
    /// ```swift
    /// let invited = share.participants.filter { $0.role == .privateUser }
    /// ```
    public enum ParticipantRole: Int, Hashable, Sendable {
        /// Not known.
        case unknown = 0
        /// The user who shares (one per share).
        case owner = 1
        /// A user the owner made an administrator of the share (CloudKit's, since iOS 16): in
        /// CloudKit also one who manages its participants. Stratus keeps the role and gives
        /// the shared records as the participant's permission says; only the owner changes
        /// the share's participants.
        case administrator = 2
        /// A user the owner invited.
        case privateUser = 3
        /// A user who joined through the share's public URL.
        case publicUser = 4
    }

    /// Where a participant is in accepting the share, as `CKShare.ParticipantAcceptanceStatus`.
    ///
    /// ```swift
    /// let waiting = share.participants.filter { $0.acceptanceStatus == .pending }
    /// ```
    public enum ParticipantAcceptanceStatus: Int, Hashable, Sendable {
        /// Not known.
        case unknown = 0
        /// Invited, not accepted yet.
        case pending = 1
        /// Accepted (the owner always has).
        case accepted = 2
        /// Removed from the share.
        case removed = 3
    }

    /// A user a share names, as `CKShare.Participant` (``ShareParticipant``).
    ///
    /// ```swift
    /// let bob = Share.Participant(userIdentity: UserIdentity(userRecordID: Record.ID(recordName: "_bob")))
    /// ```
    public typealias Participant = ShareParticipant
}

/// A user a share names, as `CKShare.Participant`: who (``userIdentity``), in what
/// ``role``, with what ``permission``, and whether they accepted.
///
/// A participant belongs to the share it was added to: changing its ``permission`` or
/// ``role`` changes the share, stored when the share is saved.
///
/// ```swift
/// let bob = Share.Participant(userIdentity: UserIdentity(userRecordID: Record.ID(recordName: "_bob")))
/// bob.permission = .readOnly
/// share.addParticipant(bob)
/// ```
///
/// A top-level class, so that `NSKeyedArchiver` can name it (a nested class cannot be archived
/// in swift-corelibs-foundation); `Share.Participant` names it as CloudKit does.
public final class ShareParticipant: NSObject, @unchecked Sendable {
    // `@unchecked Sendable`: the mutable state is behind the `Mutex`; the identity is immutable.
    /// Who the participant is.
    ///
    /// ```swift
    /// print(participant.userIdentity.userRecordID?.recordName ?? "-")
    /// ```
    public let userIdentity: UserIdentity
    private let state: Mutex<State>
    /// The entry of the share's JSON this participant was read from: what it does not
    /// change is written back as the entry said it (a role or status this version does not
    /// know, a member left out), so a share read and saved again loses nothing.
    let origin: StoredParticipant?

    struct State {
        var role: Share.ParticipantRole
        var acceptanceStatus: Share.ParticipantAcceptanceStatus
        var permission: Share.ParticipantPermission
        var participantID: String
    }

    /// A participant for the user `userIdentity`: a private user, pending, who may read
    /// until given another ``permission``. CloudKit code makes participants by looking users
    /// up (``FetchShareParticipantsOperation``, ``Container/shareParticipant(forEmailAddress:)``),
    /// which makes them this way.
    ///
    /// ```swift
    /// let bob = Share.Participant(userIdentity: UserIdentity(lookupInfo: .init(emailAddress: "bob@example.com")))
    /// ```
    public init(userIdentity: UserIdentity) {
        self.userIdentity = userIdentity
        state = Mutex(State(role: .privateUser, acceptanceStatus: .pending, permission: .readOnly, participantID: UUID().uuidString))
        origin = nil
    }

    init(userIdentity: UserIdentity, state: State, origin: StoredParticipant? = nil) {
        self.userIdentity = userIdentity
        self.state = Mutex(state)
        self.origin = origin
    }

    /// A user joining a public share through its URL: accepted, with the share's public
    /// permission.
    convenience init(joining userIdentity: UserIdentity, permission: Share.ParticipantPermission) {
        self.init(userIdentity: userIdentity, state: State(role: .publicUser, acceptanceStatus: .accepted, permission: permission, participantID: UUID().uuidString))
    }

    /// Marks an invited participant accepted (the store does, when they accept).
    func markAccepted() { state.withLock { $0.acceptanceStatus = .accepted } }

    /// Marks a participant removed (the store does, when they leave the share).
    func markRemoved() { state.withLock { $0.acceptanceStatus = .removed } }

    /// The owner of a new share: the current user, until the store names them.
    static func newOwner() -> ShareParticipant {
        ShareParticipant(userIdentity: UserIdentity(userRecordID: Record.ID(recordName: CurrentUserDefaultName)),
                    state: State(role: .owner, acceptanceStatus: .accepted, permission: .readWrite, participantID: UUID().uuidString))
    }

    /// The participant's role, as `CKShare.Participant.role`.
    ///
    /// ```swift
    /// if participant.role == .owner { continue }
    /// ```
    public var role: Share.ParticipantRole {
        get { state.withLock { $0.role } }
        set { state.withLock { $0.role = newValue } }
    }

    /// The participant's ``role`` in the older terms of `CKShare.Participant.type`: an
    /// administrator is a private user; setting it sets the role.
    ///
    /// ```swift
    /// if participant.type == .owner { continue }
    /// ```
    public var type: Share.ParticipantType {
        get {
            switch role {
            case .unknown: .unknown
            case .owner: .owner
            case .administrator, .privateUser: .privateUser
            case .publicUser: .publicUser
            }
        }
        set {
            switch newValue {
            case .unknown: role = .unknown
            case .owner: role = .owner
            case .privateUser: if role != .administrator { role = .privateUser }
            case .publicUser: role = .publicUser
            }
        }
    }

    /// Whether the participant accepted the share, as `CKShare.Participant.acceptanceStatus`.
    ///
    /// ```swift
    /// let accepted = participant.acceptanceStatus == .accepted
    /// ```
    public var acceptanceStatus: Share.ParticipantAcceptanceStatus { state.withLock { $0.acceptanceStatus } }

    /// What the participant may do, as `CKShare.Participant.permission`.
    ///
    /// ```swift
    /// participant.permission = .readWrite
    /// ```
    public var permission: Share.ParticipantPermission {
        get { state.withLock { $0.permission } }
        set { state.withLock { $0.permission = newValue } }
    }

    /// The participant's identifier within its share, as `CKShare.Participant.participantID`.
    ///
    /// ```swift
    /// let byID = Dictionary(uniqueKeysWithValues: share.participants.map { ($0.participantID, $0) })
    /// ```
    public var participantID: String { state.withLock { $0.participantID } }

    var snapshot: State { state.withLock { $0 } }

    /// Whether both name the same user by user record ID or lookup.
    func isSameUser(as other: ShareParticipant) -> Bool {
        if let mine = userIdentity.userRecordID, let theirs = other.userIdentity.userRecordID { return mine == theirs }
        guard let mine = userIdentity.lookupInfo, let theirs = other.userIdentity.lookupInfo else { return false }
        return (mine.emailAddress != nil && mine.emailAddress == theirs.emailAddress) || (mine.phoneNumber != nil && mine.phoneNumber == theirs.phoneNumber)
    }

    public override var description: String {
        let state = snapshot
        return "ShareParticipant(\(userIdentity.userRecordID?.recordName ?? userIdentity.lookupInfo?.emailAddress ?? "?") \(state.role) \(state.permission) \(state.acceptanceStatus))"
    }
}

extension Share {
    /// What `participant` may do with the shared records now: their permission, and for one who
    /// joined through the public URL no more than the share's public permission gives today
    /// (`nil` once the owner sets it to `.none`), so that making a share private, or read-only,
    /// takes effect for those who joined before.
    func effectivePermission(of participant: Participant) -> ParticipantPermission? {
        Self.effectivePermission(role: participant.role, permission: participant.permission, publicPermission: publicPermission)
    }

    /// The same rule for a participant as a share's stored JSON holds it (the share index).
    static func effectivePermission(role: ParticipantRole, permission: ParticipantPermission, publicPermission: ParticipantPermission) -> ParticipantPermission? {
        // A participant with no permission (or one this version does not know) reaches nothing.
        guard permission == .readOnly || permission == .readWrite else { return nil }
        guard role == .publicUser else { return permission }
        switch publicPermission {
        case .none, .unknown: return nil
        case .readOnly: return .readOnly
        default: return permission
        }
    }
}
