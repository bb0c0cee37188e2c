import Foundation

extension Record {
    /// The share that shares this record, as `CKRecord.share`: set by the store when a share
    /// of this record is saved (and, before that, by ``Share/init(rootRecord:)``), cleared when
    /// the share is deleted. `nil` for a record no share names as its root.
    ///
    /// ```swift
    /// if let reference = list.share {
    ///     let share = try await database.record(for: reference.recordID) as? Share
    /// }
    /// ```
    public var share: Reference? {
        guard let name = StoredShare.sharedRecordName(in: jsonExtras) else { return nil }
        return Reference(recordID: ID(recordName: name, zoneID: recordID.zoneID), action: .none)
    }

    /// Names `reference`'s share in the record's `share` member (``share``).
    final func setShareReference(_ reference: Reference?) {
        var extras = jsonExtras
        extras.members[StoredShare.shareMember] = reference.map { StoredShare.shareMemberText($0.recordID.recordName, zoneID: recordID.zoneID) }
        jsonExtras = extras
    }

    /// A record as a store holds it: a ``Share`` when its type is `cloudkit.share`, so that
    /// fetches, queries and change feeds hand shares back as shares. Engines and copies make
    /// records through this.
    ///
    /// ```swift
    /// let record = Record.stored(recordType: type, recordID: id, systemFields: system, fields: fields)
    /// ```
    package static func stored(recordType: String, recordID: ID, systemFields: SystemFields, fields: [String: FieldValue], parent: Reference? = nil,
                               encryptedKeys: Set<String> = [], jsonExtras: JSONExtras = JSONExtras()) -> Record {
        if recordType == SystemType.share {
            return Share(recordType: recordType, recordID: recordID, systemFields: systemFields, fields: fields, parent: parent, encryptedKeys: encryptedKeys,
                         jsonExtras: jsonExtras)
        }
        return Record(recordType: recordType, recordID: recordID, systemFields: systemFields, fields: fields, parent: parent, encryptedKeys: encryptedKeys,
                      jsonExtras: jsonExtras)
    }

    /// `extras` with, for a share, its participants, permission and URL token in them: what a
    /// save stores and a copy carries.
    final func extrasHoldingSharing(_ extras: JSONExtras) -> JSONExtras {
        guard let share = self as? Share else { return extras }
        return share.sharingExtras(extras)
    }
}

extension Record.JSONExtras {
    /// The members that carry sharing: a root's `share`, a share's permission, participants,
    /// URL token and root (kept when a record is archived, as CloudKit keeps them).
    static let sharingMemberKeys: Set<String> = [
        StoredShare.shareMember, StoredShare.publicPermissionMember, StoredShare.participantsMember, StoredShare.shortGUIDMember, StoredShare.rootRecordNameMember,
    ]
}
