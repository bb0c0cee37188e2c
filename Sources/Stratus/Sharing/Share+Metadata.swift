import Foundation

extension Share {
    /// What a share's URL tells the user who opens it, as `CKShare.Metadata` (``ShareMetadata``).
    ///
    /// ```swift
    /// let metadata: Share.Metadata = try await container.shareMetadata(for: url)
    /// ```
    public typealias Metadata = ShareMetadata
}

/// What a share's URL tells the user who opens it, as `CKShare.Metadata`: the share, what
/// it shares (a root record, or the whole zone), and the user's part in it. Fetch it with
/// ``FetchShareMetadataOperation`` or ``Container/shareMetadata(for:)``, then accept it with
/// ``AcceptSharesOperation`` or ``Container/accept(_:)``.
///
/// ```swift
/// let metadata = try await container.shareMetadata(for: url)
/// if metadata.participantStatus == .pending { _ = try await container.accept(metadata) }
/// ```
///
/// A top-level class, so that `NSKeyedArchiver` can name it (a nested class cannot be archived
/// in swift-corelibs-foundation); `Share.Metadata` names it as CloudKit does.
public final class ShareMetadata: NSObject, @unchecked Sendable {
    // `@unchecked Sendable`: every property is immutable, and `Share` and `Record` are Sendable.
    /// The identifier of the container the share belongs to.
    ///
    /// ```swift
    /// let container = try Container(identifier: metadata.containerIdentifier)
    /// ```
    public let containerIdentifier: String
    /// The share, as the store holds it.
    ///
    /// ```swift
    /// print(metadata.share[Share.SystemFieldKey.title] as? String ?? "untitled")
    /// ```
    public let share: Share
    /// The root record's ID for a share of a record hierarchy; `nil` for a zone-wide share,
    /// as `CKShare.Metadata.hierarchicalRootRecordID`.
    ///
    /// ```swift
    /// if let rootID = metadata.hierarchicalRootRecordID { open(rootID) }
    /// ```
    public let hierarchicalRootRecordID: Record.ID?
    /// The root record's ID, as `CKShare.Metadata.rootRecordID` of the years before
    /// zone-wide shares: ``hierarchicalRootRecordID``, or for a zone-wide share the share's
    /// own ID (`cloudkit.zoneshare`), which has no root record.
    ///
    /// ```swift
    /// let rootID = metadata.rootRecordID
    /// ```
    public var rootRecordID: Record.ID { hierarchicalRootRecordID ?? share.recordID }
    /// The root record, when the fetch asked for it (``FetchShareMetadataOperation/shouldFetchRootRecord``)
    /// and the share has one.
    ///
    /// ```swift
    /// print(metadata.rootRecord?["title"] as? String ?? "")
    /// ```
    public let rootRecord: Record?
    /// The caller's role in the share: `.owner`, `.privateUser` (invited), or `.publicUser`
    /// (joining, or joined, through a public share's URL).
    ///
    /// ```swift
    /// let mine = metadata.participantRole == .owner
    /// ```
    public let participantRole: Share.ParticipantRole
    /// Whether the caller accepted the share: `.pending` for an invitation not yet
    /// accepted, `.accepted`, or `.unknown` for a public share the caller has not joined.
    ///
    /// ```swift
    /// if metadata.participantStatus != .accepted { _ = try await container.accept(metadata) }
    /// ```
    public let participantStatus: Share.ParticipantAcceptanceStatus
    /// What the caller may do with the shared records once accepted.
    ///
    /// ```swift
    /// let canEdit = metadata.participantPermission == .readWrite
    /// ```
    public let participantPermission: Share.ParticipantPermission
    /// Who shares.
    ///
    /// ```swift
    /// print(metadata.ownerIdentity.userRecordID?.recordName ?? "")
    /// ```
    public let ownerIdentity: UserIdentity

    init(containerIdentifier: String, share: Share, hierarchicalRootRecordID: Record.ID?, rootRecord: Record?, participantRole: Share.ParticipantRole,
         participantStatus: Share.ParticipantAcceptanceStatus, participantPermission: Share.ParticipantPermission, ownerIdentity: UserIdentity) {
        self.containerIdentifier = containerIdentifier
        self.share = share
        self.hierarchicalRootRecordID = hierarchicalRootRecordID
        self.rootRecord = rootRecord
        self.participantRole = participantRole
        self.participantStatus = participantStatus
        self.participantPermission = participantPermission
        self.ownerIdentity = ownerIdentity
        super.init()
    }

    public override var description: String {
        "Share.Metadata(\(share.recordID.recordName) in \(share.recordID.zoneID.zoneName) of \(share.recordID.zoneID.ownerName): \(participantRole) \(participantStatus) \(participantPermission))"
    }
}
