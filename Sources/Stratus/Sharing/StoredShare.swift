import Foundation

/// A share's state as its record's JSON extras keep it, in members named as CloudKit Web
/// Services names them in a share record (`publicPermission`, `participants`, `shortGUID`),
/// plus Stratus's `rootRecordName`; a root record names its share in the member `share`, as
/// CloudKit's record JSON does. Both engines store JSON extras in the field document, so a
/// share needs nothing of an engine, and an export writes CloudKit's members back.
///
/// ```swift
/// let stored = StoredShare(record.jsonExtras)
/// print(stored.participants.count)
/// ```
struct StoredShare: Equatable, Sendable {
    var publicPermission: Share.ParticipantPermission
    var participants: [StoredParticipant]
    var shortGUID: String?
    var rootRecordName: String?

    /// What a share's URL starts with: the token (``shortGUID``) follows.
    static let urlPrefix = "stratus://share/"

    static let publicPermissionMember = "publicPermission"
    static let participantsMember = "participants"
    static let shortGUIDMember = "shortGUID"
    static let rootRecordNameMember = "rootRecordName"
    /// The member of a root record that names its share.
    static let shareMember = "share"

    init(publicPermission: Share.ParticipantPermission, participants: [StoredParticipant], shortGUID: String?, rootRecordName: String?) {
        self.publicPermission = publicPermission
        self.participants = participants
        self.shortGUID = shortGUID
        self.rootRecordName = rootRecordName
    }

    /// Reads what `extras` holds of a share; what it lacks or cannot be read is left out.
    init(_ extras: Record.JSONExtras) {
        let members = extras.members
        publicPermission = members[Self.publicPermissionMember].flatMap { Self.decode(String.self, $0) }.map(Self.permission(named:)) ?? .none
        participants = members[Self.participantsMember].flatMap { Self.decode([StoredParticipant].self, $0) } ?? []
        shortGUID = members[Self.shortGUIDMember].flatMap { Self.decode(String.self, $0) }
        rootRecordName = members[Self.rootRecordNameMember].flatMap { Self.decode(String.self, $0) }
    }

    /// Writes the share's members into `extras`; the participants keep the JSON they had when
    /// they are what `stored` read from it.
    func write(into extras: inout Record.JSONExtras, unchangedFrom stored: StoredShare?) {
        extras.members[Self.publicPermissionMember] = Self.encode(Self.name(of: publicPermission))
        // A share whose JSON named no participants, and still has none, is written without them.
        if stored?.participants != participants || (extras.members[Self.participantsMember] == nil && !participants.isEmpty) {
            writeParticipants(into: &extras)
        }
        extras.members[Self.shortGUIDMember] = shortGUID.map { Self.encode($0) }
        extras.members[Self.rootRecordNameMember] = rootRecordName.map { Self.encode($0) }
    }

    /// A share's URL token is the store's (``ShareRules`` gives every save of a share the
    /// stored one): `extras` of a save whose JSON left it out, as a client's create request
    /// does, take the stored token, so that saving such input again changes nothing.
    static func keepStoredToken(of stored: Record.JSONExtras, in extras: inout Record.JSONExtras) {
        if extras.members[shortGUIDMember] == nil { extras.members[shortGUIDMember] = stored.members[shortGUIDMember] }
    }

    /// Writes `root` as the root's record name of the share whose extras are `extras`, alone.
    static func writeRoot(_ root: String, into extras: inout Record.JSONExtras) {
        extras.members[rootRecordNameMember] = encode(root)
    }

    /// Writes the URL token alone into `extras`.
    func writeShortGUID(into extras: inout Record.JSONExtras) {
        extras.members[Self.shortGUIDMember] = shortGUID.map { Self.encode($0) }
    }

    /// Writes the participants into `extras`. An entry `extras` holds already (the same
    /// `participantId`) keeps the members of its JSON that Stratus does not read, CloudKit's
    /// `orgUser` and whatever a later CloudKit adds, and takes the values of the members it
    /// does read from this share: a save that changes an acceptance or a permission loses
    /// nothing else of the entry.
    func writeParticipants(into extras: inout Record.JSONExtras) {
        if let text = extras.members[Self.participantsMember],
           let entries = (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [[String: Any]],
           let encoded = (try? JSONEncoder().encode(participants)).flatMap({ try? JSONSerialization.jsonObject(with: $0) }) as? [[String: Any]] {
            let given = Dictionary(entries.compactMap { entry in (entry["participantId"] as? String).map { ($0, entry) } }, uniquingKeysWith: { first, _ in first })
            let merged = encoded.map { entry in (entry["participantId"] as? String).flatMap { given[$0] }.map { Self.overlay(entry, on: $0) } ?? entry }
            if let data = try? JSONSerialization.data(withJSONObject: merged, options: [.sortedKeys, .withoutEscapingSlashes]) {
                extras.members[Self.participantsMember] = String(decoding: data, as: UTF8.self)
                return
            }
        }
        extras.members[Self.participantsMember] = Self.encode(participants)
    }

    /// `original` with the members of `changes` (and of their objects, member by member).
    private static func overlay(_ changes: [String: Any], on original: [String: Any]) -> [String: Any] {
        var merged = original
        for (key, value) in changes {
            if let inner = value as? [String: Any], let old = original[key] as? [String: Any] {
                merged[key] = overlay(inner, on: old)
            } else {
                merged[key] = value
            }
        }
        return merged
    }

    /// The participants who may reach the shared records once they accept: every one named by
    /// a user record but the owner and the removed, each once (the first entry of a name counts,
    /// as in the core's reading of the share). A public participant reaches what the share's
    /// public permission gives now (``Share/effectivePermission(of:)``), not what it gave them
    /// when they joined.
    var indexedMembers: [ShareIndexMember] {
        var members: [String: ShareIndexMember] = [:]
        for participant in participants {
            guard participant.type != Self.name(of: .owner), participant.acceptanceStatus != Self.name(of: .removed),
                  let name = participant.userIdentity?.userRecordName, members[name] == nil else { continue }
            guard let permission = Share.effectivePermission(role: Self.role(named: participant.type ?? ""), permission: Self.permission(named: participant.permission ?? ""),
                                                             publicPermission: publicPermission) else { continue }
            members[name] = ShareIndexMember(userRecordName: name, isAccepted: participant.acceptanceStatus == Self.name(of: .accepted), mayWrite: permission == .readWrite)
        }
        return members.values.sorted { $0.userRecordName < $1.userRecordName }
    }

    /// The participants as a save by `saver` (a user record name) may store them, given the
    /// share as stored (`nil`: a new share): whether a participant accepted is theirs to say,
    /// so each entry of another user keeps the acceptance the stored share gives that user
    /// (`PENDING` for one it does not name, or names as `REMOVED` in an entry the save
    /// replaces: an invitation anew), and only a `REMOVED` of the save's stands (the owner
    /// names no participant removed; a participant leaving does). The saver's own entries and
    /// the owner's keep what the save gives.
    func participants(savedBy saver: String?, stored: StoredShare?) -> [StoredParticipant] {
        let accepted = Self.name(of: .accepted), pending = Self.name(of: .pending), removed = Self.name(of: .removed)
        let storedEntries = stored?.participants ?? []
        return participants.map { entry in
            let name = entry.userIdentity?.userRecordName
            guard entry.type != Self.name(of: .owner), name == nil || name != saver, entry.acceptanceStatus != removed else { return entry }
            // The stored entry of the same user: the one with this entry's ID, else (for a
            // user record name) one not removed, else any; an entry without a user is matched
            // by its ID only.
            let sameUser = storedEntries.filter { $0.userIdentity?.userRecordName == name }
            let match = sameUser.first { $0.participantId != nil && $0.participantId == entry.participantId }
                ?? (name == nil ? nil : sameUser.first { $0.acceptanceStatus != removed } ?? sameUser.first)
            var settled = entry
            switch match?.acceptanceStatus {
            case accepted?: settled.acceptanceStatus = accepted
            case removed? where match?.participantId == entry.participantId: settled.acceptanceStatus = removed
            default: settled.acceptanceStatus = pending
            }
            return settled
        }
    }

    /// A new URL token: 128 random bits as 32 lowercase hex digits.
    static func newShortGUID() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<4).map { _ in String(format: "%08x", UInt32.random(in: .min ... .max, using: &generator)) }.joined()
    }

    /// The JSON text of a root's `share` member naming the share `recordName` in `zoneID`.
    static func shareMemberText(_ recordName: String, zoneID: RecordZone.ID) -> String {
        encode(ShareReference(recordName: recordName, zoneID: .init(zoneName: zoneID.zoneName, ownerRecordName: zoneID.ownerName)))
    }

    /// The record name of the share a root's extras name in its `share` member, if any.
    static func sharedRecordName(in extras: Record.JSONExtras) -> String? {
        guard !extras.isEmpty, let text = extras.members[shareMember] else { return nil }
        return sharedRecordName(inShareMember: text)
    }

    /// The record name a root's `share` member names, if it can be read.
    static func sharedRecordName(inShareMember text: String) -> String? {
        decode(ShareReference.self, text)?.recordName
    }

    // MARK: - Names as CloudKit Web Services writes them

    static func name(of permission: Share.ParticipantPermission) -> String {
        switch permission {
        case .unknown: "UNKNOWN"
        case .none: "NONE"
        case .readOnly: "READ_ONLY"
        case .readWrite: "READ_WRITE"
        }
    }

    static func permission(named name: String) -> Share.ParticipantPermission {
        switch name {
        case "NONE": .none
        case "READ_ONLY": .readOnly
        case "READ_WRITE": .readWrite
        default: .unknown
        }
    }

    static func name(of role: Share.ParticipantRole) -> String {
        switch role {
        case .unknown: "UNKNOWN"
        case .owner: "OWNER"
        case .administrator: "ADMINISTRATOR"
        case .privateUser: "USER"
        case .publicUser: "PUBLIC_USER"
        }
    }

    static func role(named name: String) -> Share.ParticipantRole {
        switch name {
        case "OWNER": .owner
        case "ADMINISTRATOR": .administrator
        case "USER": .privateUser
        case "PUBLIC_USER": .publicUser
        default: .unknown
        }
    }

    static func name(of status: Share.ParticipantAcceptanceStatus) -> String {
        switch status {
        case .unknown: "UNKNOWN"
        case .pending: "PENDING"
        case .accepted: "ACCEPTED"
        case .removed: "REMOVED"
        }
    }

    static func status(named name: String) -> Share.ParticipantAcceptanceStatus {
        switch name {
        case "PENDING": .pending
        case "ACCEPTED": .accepted
        case "REMOVED": .removed
        default: .unknown
        }
    }

    private static func encode<T: Encodable>(_ value: T) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Strings, optionals and arrays of them always encode.
        return (try? encoder.encode(value)).flatMap { String(data: $0, encoding: .utf8) } ?? "null"
    }

    private static func decode<T: Decodable>(_ type: T.Type, _ text: String) -> T? {
        try? JSONDecoder().decode(T.self, from: Data(text.utf8))
    }

    private struct ShareReference: Codable {
        struct Zone: Codable {
            var zoneName: String
            var ownerRecordName: String?
        }
        var recordName: String
        var zoneID: Zone?
    }
}

/// A participant as a share record's JSON holds it (CloudKit Web Services' participant).
struct StoredParticipant: Codable, Equatable, Sendable {
    struct Identity: Codable, Equatable, Sendable {
        var userRecordName: String?
        var lookupInfo: Lookup?
        var nameComponents: [String: String]?
        var hasiCloudAccount: Bool?
    }

    struct Lookup: Codable, Equatable, Sendable {
        var emailAddress: String?
        var phoneNumber: String?
        var userRecordName: String?
    }

    var participantId: String?
    var type: String?
    var acceptanceStatus: String?
    var permission: String?
    var userIdentity: Identity?
}

extension Share.Participant {
    /// The participant as a share record's JSON holds it. One read from such JSON keeps its
    /// entry's text where the participant did not change: a role or acceptance this version
    /// reads as `unknown` (`"REQUESTED"`), an identity without `hasiCloudAccount`. An entry
    /// without `participantId` gets the one it was read with.
    var stored: StoredParticipant {
        let state = snapshot
        if let origin {
            var entry = origin
            // An entry read without an ID keeps the one it was given, so that it stays the same.
            entry.participantId = origin.participantId ?? state.participantID
            let read = Self.state(of: origin)
            if state.role != read.role { entry.type = StoredShare.name(of: state.role) }
            if state.acceptanceStatus != read.acceptanceStatus { entry.acceptanceStatus = StoredShare.name(of: state.acceptanceStatus) }
            if state.permission != read.permission { entry.permission = StoredShare.name(of: state.permission) }
            return entry
        }
        return StoredParticipant(
            participantId: state.participantID, type: StoredShare.name(of: state.role), acceptanceStatus: StoredShare.name(of: state.acceptanceStatus),
            permission: StoredShare.name(of: state.permission), userIdentity: userIdentity.stored)
    }

    /// The role, acceptance and permission a share's JSON entry gives (`unknown` for a name
    /// this version does not know, or none); `participantID` is the entry's, or new.
    private static func state(of entry: StoredParticipant) -> State {
        State(role: entry.type.map(StoredShare.role(named:)) ?? .unknown,
              acceptanceStatus: entry.acceptanceStatus.map(StoredShare.status(named:)) ?? .unknown,
              permission: entry.permission.map(StoredShare.permission(named:)) ?? .unknown,
              participantID: entry.participantId ?? UUID().uuidString)
    }

    /// A participant read from a share record's JSON.
    convenience init(stored: StoredParticipant) {
        self.init(userIdentity: UserIdentity(stored: stored.userIdentity), state: Self.state(of: stored), origin: stored)
    }
}
