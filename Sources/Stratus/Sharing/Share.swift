import Foundation
import Synchronization

/// A share: the record that shares a record hierarchy or a whole zone with other users, as
/// `CKShare`. It is a ``Record`` (record type `cloudkit.share`), saved and fetched as one.
///
/// A record-level share is saved with its root record in the same request; a zone-wide share
/// (``init(recordZoneID:)``) alone. Shares live in custom zones of the private database. The
/// store assigns the share's ``url`` at its first save, sets the root's ``Record/share`` and
/// clears it when the share is deleted; deleting the root deletes its share.
///
/// ```swift
/// let share = Share(rootRecord: list)
/// share[Share.SystemFieldKey.title] = "Groceries"
/// share.publicPermission = .readOnly
/// let (saved, _) = try await database.modifyRecords(saving: [list, share], deleting: [])
/// let stored = try saved[share.recordID]?.get() as? Share
/// print(stored?.url as Any)            // stratus://share/…
/// ```
///
/// A participant finds a share by its URL (``Container/shareMetadata(for:shouldFetchRootRecord:)``),
/// accepts it (`container.accept(metadata)`) and reads the shared records through its
/// ``Container/sharedCloudDatabase``.
public final class Share: Record, @unchecked Sendable {
    // `@unchecked Sendable`: as Record's, all mutable state is behind a `Mutex`.
    private let sharing: Mutex<Sharing>

    /// The share's own state, kept in its record's JSON extras when stored (``StoredShare``).
    struct Sharing {
        var publicPermission: ParticipantPermission
        var participants: [Participant]
        var shortGUID: String?
        var rootRecordName: String?
        /// What the store held, to tell whether the participants changed since (and so keep the
        /// stored JSON, with what Stratus does not read of it, when they did not).
        var stored: StoredShare?
    }

    /// A new share of `rootRecord`, with a new record name in the root's zone, as
    /// `CKShare(rootRecord:)`. Save it with its root in one request: `modifyRecords(saving:
    /// [root, share], deleting: [])`.
    ///
    /// ```swift
    /// let share = Share(rootRecord: list)
    /// ```
    public convenience init(rootRecord: Record) {
        self.init(rootRecord: rootRecord, shareID: Record.ID(zoneID: rootRecord.recordID.zoneID))
    }

    /// A new share of `rootRecord` with the record ID `shareID`, as `CKShare(rootRecord:shareID:)`.
    ///
    /// ```swift
    /// let share = Share(rootRecord: list, shareID: Record.ID(recordName: "share-groceries", zoneID: lists))
    /// ```
    public init(rootRecord: Record, shareID: Record.ID) {
        sharing = Mutex(Sharing(publicPermission: .none, participants: [Participant.newOwner()], rootRecordName: rootRecord.recordID.recordName))
        super.init(recordType: SystemType.share, recordID: shareID)
        // As in CloudKit, the root names its share at once; the store keeps that only when
        // the share is saved with it.
        rootRecord.setShareReference(Reference(recordID: shareID, action: .none))
    }

    /// A new share of the whole zone `recordZoneID`, as `CKShare(recordZoneID:)`: its record
    /// name is ``Share/zoneWideShareName`` (`cloudkit.zoneshare`).
    ///
    /// ```swift
    /// let share = Share(recordZoneID: RecordZone.ID(zoneName: "Family"))
    /// share[Share.SystemFieldKey.title] = "Family contacts"
    /// _ = try await database.modifyRecords(saving: [share], deleting: [])
    /// ```
    public init(recordZoneID: RecordZone.ID) {
        sharing = Mutex(Sharing(publicPermission: .none, participants: [Participant.newOwner()]))
        super.init(recordType: SystemType.share, recordID: Record.ID(recordName: Share.zoneWideShareName, zoneID: recordZoneID))
    }

    /// A share as a store holds it (engines and copies make these through ``Record/stored``).
    override init(recordType: String, recordID: ID, systemFields: SystemFields, fields: [String: FieldValue], parent: Reference? = nil,
                  encryptedKeys: Set<String> = [], jsonExtras: JSONExtras = JSONExtras()) {
        let stored = StoredShare(jsonExtras)
        sharing = Mutex(Sharing(publicPermission: stored.publicPermission, participants: stored.participants.map(Participant.init(stored:)),
                                shortGUID: stored.shortGUID, rootRecordName: stored.rootRecordName, stored: stored))
        super.init(recordType: recordType, recordID: recordID, systemFields: systemFields, fields: fields, parent: parent, encryptedKeys: encryptedKeys,
                   jsonExtras: jsonExtras)
    }

    /// Reads a share archived with `encode(with:)` or `encodeSystemFields(with:)`.
    ///
    /// ```swift
    /// let share = try NSKeyedUnarchiver.unarchivedObject(ofClass: Share.self, from: data)
    /// ```
    public required convenience init?(coder: NSCoder) {
        guard let parts = Record.archivedParts(coder), parts.recordType == SystemType.share else { return nil }
        self.init(recordType: parts.recordType, recordID: parts.recordID, systemFields: parts.system, fields: parts.fields, parent: parts.parent,
                  encryptedKeys: parts.encrypted, jsonExtras: parts.extras)
        restoreArchived(parts)
    }

    /// `cloudkit.zoneshare`, the record name of every zone-wide share, as
    /// `CKRecordNameZoneWideShare`: fetch a zone's share by it.
    ///
    /// ```swift
    /// let id = Record.ID(recordName: Share.zoneWideShareName, zoneID: zoneID)
    /// let share = try await database.record(for: id) as? Share
    /// ```
    public static let zoneWideShareName = "cloudkit.zoneshare"

    /// The keys of a share's own fields, as `CKShare.SystemFieldKey`.
    ///
    /// ```swift
    /// share[Share.SystemFieldKey.title] = "Groceries"
    /// ```
    public enum SystemFieldKey {
        /// `cloudkit.title`: the share's title, a string.
        public static let title: Record.FieldKey = "cloudkit.title"
        /// `cloudkit.thumbnailImageData`: an image of the shared content, as data.
        public static let thumbnailImageData: Record.FieldKey = "cloudkit.thumbnailImageData"
        /// `cloudkit.type`: what is shared, a uniform type identifier (`com.example.list`).
        public static let shareType: Record.FieldKey = "cloudkit.type"
    }

    // MARK: - Permission and participants

    /// What anyone with the share's URL may do, as `CKShare.publicPermission`: `.none` (only
    /// participants; the default), `.readOnly` or `.readWrite`.
    ///
    /// ```swift
    /// share.publicPermission = .readOnly
    /// ```
    public var publicPermission: ParticipantPermission {
        get { sharing.withLock { $0.publicPermission } }
        set { sharing.withLock { $0.publicPermission = newValue } }
    }

    /// Everyone the share names, the owner first, as `CKShare.participants`.
    ///
    /// ```swift
    /// let pending = share.participants.filter { $0.acceptanceStatus == .pending }
    /// ```
    public var participants: [Participant] { sharing.withLock { $0.participants } }

    /// The share's owner, as `CKShare.owner`: the user who saved it first.
    ///
    /// ```swift
    /// print(share.owner.userIdentity.userRecordID?.recordName ?? "")
    /// ```
    public var owner: Participant {
        sharing.withLock { state in
            if let owner = state.participants.first(where: { $0.role == .owner }) { return owner }
            let owner = Participant.newOwner()
            state.participants.insert(owner, at: 0)
            return owner
        }
    }

    /// The participant who is the caller the share was handed to, as
    /// `CKShare.currentUserParticipant`; `nil` for one the share does not name.
    ///
    /// ```swift
    /// if share.currentUserParticipant?.role == .owner { showSharingControls() }
    /// ```
    public var currentUserParticipant: Participant? {
        let viewer = viewerUserRecordName
        return participants.first { participant in
            guard let name = participant.userIdentity.userRecordID?.recordName else { return false }
            return name == viewer || (name == CurrentUserDefaultName && participant.role == .owner)
        }
    }

    /// The share's URL, as `CKShare.url`: assigned by the store at the share's first save
    /// (`nil` before), and the same for as long as the share exists. It names the share by a
    /// random token, never the store or a password.
    ///
    /// ```swift
    /// if let url = savedShare.url { send(url) }
    /// ```
    public var url: URL? {
        sharing.withLock { $0.shortGUID }.flatMap { URL(string: StoredShare.urlPrefix + $0) }
    }

    /// Adds `participant` to the share, as `CKShare.addParticipant(_:)`; the change is stored
    /// when the share is saved. A participant already named is not added twice; one who left
    /// the share (`.removed`) is invited anew in place of the old entry.
    ///
    /// ```swift
    /// let bob = Share.Participant(userIdentity: UserIdentity(userRecordID: Record.ID(recordName: "_bob")))
    /// bob.permission = .readWrite
    /// share.addParticipant(bob)
    /// ```
    public func addParticipant(_ participant: Participant) {
        sharing.withLock { state in
            guard let index = state.participants.firstIndex(where: { $0 === participant || $0.isSameUser(as: participant) }) else {
                state.participants.append(participant)
                return
            }
            if state.participants[index] !== participant && state.participants[index].acceptanceStatus == .removed {
                state.participants[index] = participant
            }
        }
    }

    /// Removes `participant` from the share, as `CKShare.removeParticipant(_:)`; the change is
    /// stored when the share is saved.
    ///
    /// ```swift
    /// if let bob = share.participants.first(where: { $0.userIdentity.userRecordID?.recordName == "_bob" }) {
    ///     share.removeParticipant(bob)
    /// }
    /// ```
    ///
    /// - Precondition: `participant` is not the owner (a programmer error, which CloudKit
    ///   raises an exception for too: delete the share instead).
    public func removeParticipant(_ participant: Participant) {
        precondition(participant.role != .owner, "a share's owner cannot be removed from it; delete the share to stop sharing")
        sharing.withLock { state in state.participants.removeAll { $0 === participant || $0.isSameUser(as: participant) } }
    }

    // MARK: - Stored form

    /// `extras` holding this share's state (permission, participants, URL token, root), as
    /// the store keeps it: what a save sends and a copy carries.
    func sharingExtras(_ extras: JSONExtras) -> JSONExtras {
        let state = sharing.withLock { $0 }
        let current = StoredShare(publicPermission: state.publicPermission, participants: state.participants.map(\.stored),
                                  shortGUID: state.shortGUID, rootRecordName: state.rootRecordName)
        var extras = extras
        // Unchanged participants keep the JSON they came as (with what Stratus does not read).
        current.write(into: &extras, unchangedFrom: state.stored)
        return extras
    }

    public override var description: String {
        "Share(\(recordID.recordName) in \(recordID.zoneID.zoneName) tag=\(recordChangeTag ?? "-") participants=\(participants.count))"
    }
}
