import Foundation

// Archiving identities, participants and share metadata as apps archive `CKUserIdentity`,
// `CKShare.Participant` and `CKShare.Metadata` (the signed-in user's identity cached in
// UserDefaults, a share's participants kept for a screen, an invitation accepted later): each
// as the JSON a share record keeps its participants in, so an archive says what the store says.

extension UserIdentity: NSSecureCoding {
    public static var supportsSecureCoding: Bool { true }

    private static let archiveKey = "StratusUserIdentity"

    /// Writes the identity (`NSCoding`).
    ///
    /// ```swift
    /// let data = try NSKeyedArchiver.archivedData(withRootObject: identity, requiringSecureCoding: true)
    /// ```
    public func encode(with coder: NSCoder) {
        coder.encodeJSON(stored, forKey: Self.archiveKey)
    }

    /// Reads an identity written by ``encode(with:)``; `nil` when the archive holds none.
    ///
    /// ```swift
    /// let identity = try NSKeyedUnarchiver.unarchivedObject(ofClass: UserIdentity.self, from: data)
    /// ```
    public convenience init?(coder: NSCoder) {
        guard let stored = coder.decodeJSON(StoredParticipant.Identity.self, forKey: Self.archiveKey) else { return nil }
        self.init(stored: stored)
    }

    /// The identity as a share's participant entry holds it.
    var stored: StoredParticipant.Identity {
        .init(userRecordName: userRecordID?.recordName, lookupInfo: lookupInfo?.stored,
              nameComponents: nameComponents.map(\.cloudKitParts), hasiCloudAccount: hasiCloudAccount)
    }

    /// An identity read from a share's participant entry (none: an unknown user).
    convenience init(stored identity: StoredParticipant.Identity?) {
        let userRecordID = identity?.userRecordName.map { Record.ID(recordName: $0) }
        self.init(userRecordID: userRecordID, lookupInfo: identity?.lookupInfo.map(LookupInfo.init(stored:)),
                  nameComponents: identity?.nameComponents.map(PersonNameComponents.init(cloudKitParts:)),
                  hasiCloudAccount: identity?.hasiCloudAccount ?? (userRecordID != nil))
    }
}

extension UserIdentity.LookupInfo: NSSecureCoding {
    public static var supportsSecureCoding: Bool { true }

    private static let archiveKey = "StratusLookupInfo"

    /// Writes the lookup (`NSCoding`).
    ///
    /// ```swift
    /// let data = try NSKeyedArchiver.archivedData(withRootObject: lookups, requiringSecureCoding: true)
    /// ```
    public func encode(with coder: NSCoder) {
        coder.encodeJSON(stored, forKey: Self.archiveKey)
    }

    /// Reads a lookup written by ``encode(with:)``; `nil` when the archive holds none.
    ///
    /// ```swift
    /// let info = try NSKeyedUnarchiver.unarchivedObject(ofClass: UserIdentity.LookupInfo.self, from: data)
    /// ```
    public convenience init?(coder: NSCoder) {
        guard let stored = coder.decodeJSON(StoredParticipant.Lookup.self, forKey: Self.archiveKey) else { return nil }
        self.init(stored: stored)
    }

    var stored: StoredParticipant.Lookup {
        .init(emailAddress: emailAddress, phoneNumber: phoneNumber, userRecordName: userRecordID?.recordName)
    }

    convenience init(stored lookup: StoredParticipant.Lookup) {
        self.init(emailAddress: lookup.emailAddress, phoneNumber: lookup.phoneNumber, userRecordID: lookup.userRecordName.map { Record.ID(recordName: $0) })
    }
}

extension Share.Participant: NSSecureCoding {
    public static var supportsSecureCoding: Bool { true }

    private static let archiveKey = "StratusShareParticipant"

    /// Writes the participant (`NSCoding`): its identity, role, acceptance, permission and ID.
    ///
    /// ```swift
    /// let data = try NSKeyedArchiver.archivedData(withRootObject: share.participants, requiringSecureCoding: true)
    /// ```
    public func encode(with coder: NSCoder) {
        coder.encodeJSON(stored, forKey: Self.archiveKey)
    }

    /// Reads a participant written by ``encode(with:)``; `nil` when the archive holds none.
    ///
    /// ```swift
    /// let participant = try NSKeyedUnarchiver.unarchivedObject(ofClass: Share.Participant.self, from: data)
    /// ```
    public convenience init?(coder: NSCoder) {
        guard let stored = coder.decodeJSON(StoredParticipant.self, forKey: Self.archiveKey) else { return nil }
        self.init(stored: stored)
    }
}

extension Share.Metadata: NSSecureCoding {
    public static var supportsSecureCoding: Bool { true }

    private enum Key {
        static let containerIdentifier = "StratusShareMetadataContainer"
        static let share = "StratusShareMetadataShare"
        static let hierarchicalRootRecordID = "StratusShareMetadataRootID"
        static let rootRecord = "StratusShareMetadataRootRecord"
        static let participantRole = "StratusShareMetadataRole"
        static let participantStatus = "StratusShareMetadataStatus"
        static let participantPermission = "StratusShareMetadataPermission"
        static let ownerIdentity = "StratusShareMetadataOwner"
    }

    /// Writes the metadata (`NSCoding`): the share, its root and the invited user's part in it.
    ///
    /// ```swift
    /// let data = try NSKeyedArchiver.archivedData(withRootObject: metadata, requiringSecureCoding: true)
    /// ```
    public func encode(with coder: NSCoder) {
        coder.encode(containerIdentifier as NSString, forKey: Key.containerIdentifier)
        coder.encode(share, forKey: Key.share)
        if let hierarchicalRootRecordID { coder.encode(hierarchicalRootRecordID, forKey: Key.hierarchicalRootRecordID) }
        if let rootRecord { coder.encode(rootRecord, forKey: Key.rootRecord) }
        coder.encode(Int64(participantRole.rawValue), forKey: Key.participantRole)
        coder.encode(Int64(participantStatus.rawValue), forKey: Key.participantStatus)
        coder.encode(Int64(participantPermission.rawValue), forKey: Key.participantPermission)
        coder.encode(ownerIdentity, forKey: Key.ownerIdentity)
    }

    /// Reads metadata written by ``encode(with:)``; `nil` when the archive holds none. An
    /// invitation kept this way is accepted later with ``Container/accept(_:)``.
    ///
    /// ```swift
    /// let metadata = try NSKeyedUnarchiver.unarchivedObject(ofClass: Share.Metadata.self, from: data)
    /// ```
    public convenience init?(coder: NSCoder) {
        guard let containerIdentifier = coder.archivedText(forKey: Key.containerIdentifier),
              let share = coder.decodeArchived(Share.self, forKey: Key.share),
              let ownerIdentity = coder.decodeArchived(UserIdentity.self, forKey: Key.ownerIdentity)
        else { return nil }
        func number(_ key: String) -> Int { Int(truncatingIfNeeded: coder.decodeInt64(forKey: key)) }
        // An absent optional is not asked for: a missing key fails the whole secure decoding.
        func optional<Object: NSObject & NSSecureCoding>(_ type: Object.Type, _ key: String) -> Object? {
            coder.containsValue(forKey: key) ? coder.decodeArchived(type, forKey: key) : nil
        }
        self.init(containerIdentifier: containerIdentifier, share: share,
                  hierarchicalRootRecordID: optional(Record.ID.self, Key.hierarchicalRootRecordID),
                  rootRecord: optional(Record.self, Key.rootRecord),
                  participantRole: Share.ParticipantRole(rawValue: number(Key.participantRole)) ?? .unknown,
                  participantStatus: Share.ParticipantAcceptanceStatus(rawValue: number(Key.participantStatus)) ?? .unknown,
                  participantPermission: Share.ParticipantPermission(rawValue: number(Key.participantPermission)) ?? .unknown,
                  ownerIdentity: ownerIdentity)
    }
}

extension NSCoder {
    /// Writes `value` as JSON bytes under `key` (a value type that is already Codable, as a
    /// share's participants are in the store).
    func encodeJSON<Value: Encodable>(_ value: Value, forKey key: String) {
        guard let data = try? JSONEncoder().encode(value) else { return }
        encode(data as NSData, forKey: key)
    }

    /// Reads a value written by ``encodeJSON(_:forKey:)``; `nil` when the key is missing or
    /// holds no such value.
    func decodeJSON<Value: Decodable>(_ type: Value.Type, forKey key: String) -> Value? {
        guard containsValue(forKey: key), let data = decodeArchived(NSData.self, forKey: key) else { return nil }
        return try? JSONDecoder().decode(type, from: data as Data)
    }
}
