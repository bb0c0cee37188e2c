import Foundation

/// Archiving records as CloudKit does: `encodeSystemFields(with:)` keeps only what identifies
/// the stored version (ID, type, change tag, dates, users, parent), which sync code stores to
/// rebuild a record later and save changes to it without a conflict; `encode(with:)`, which
/// `NSKeyedArchiver.archivedData(withRootObject:requiringSecureCoding:)` calls, keeps the
/// field values and unsaved changes too.
///
/// ```swift
/// let archiver = NSKeyedArchiver(requiringSecureCoding: true)
/// record.encodeSystemFields(with: archiver)
/// archiver.finishEncoding()
/// let systemFields = archiver.encodedData
/// // … later …
/// let unarchiver = try NSKeyedUnarchiver(forReadingFrom: systemFields)
/// unarchiver.requiresSecureCoding = true
/// let restored = Record(coder: unarchiver)!          // no fields; saving sends only new changes
/// restored["title"] = "Renamed"
/// ```
extension Record: NSSecureCoding {
    public static var supportsSecureCoding: Bool { true }

    private enum Key {
        static let version = "StratusRecordArchiveVersion"
        static let recordType = "recordType"
        static let recordName = "recordName"
        static let zoneName = "zoneName"
        static let ownerName = "ownerName"
        static let changeTag = "recordChangeTag"
        static let creationDate = "creationDate"
        static let modificationDate = "modificationDate"
        static let creator = "creatorUserRecordName"
        static let lastModifier = "lastModifiedUserRecordName"
        /// The user the record was handed to (who reads themself as `__defaultOwner__`).
        static let viewer = "viewerUserRecordName"
        static let sharingMembers = "sharingMembers"
        static let parentName = "parentRecordName"
        static let parentChanged = "parentChanged"
        static let fields = "fields"
        static let baseFields = "baseFields"
        static let encryptedKeys = "encryptedKeys"
        static let changedKeys = "changedKeys"
        static let allFieldsChanged = "allFieldsChanged"
    }

    /// Writes the record's system fields only (ID, type, change tag, dates, users, parent), as
    /// `CKRecord.encodeSystemFields(with:)`.
    ///
    /// ```swift
    /// let archiver = NSKeyedArchiver(requiringSecureCoding: true)
    /// record.encodeSystemFields(with: archiver)
    /// archiver.finishEncoding()
    /// ```
    public func encodeSystemFields(with coder: NSCoder) {
        let state = snapshot
        coder.encode(Int64(1), forKey: Key.version)
        coder.encode(recordType as NSString, forKey: Key.recordType)
        coder.encode(recordID.recordName as NSString, forKey: Key.recordName)
        coder.encode(recordID.zoneID.zoneName as NSString, forKey: Key.zoneName)
        coder.encode(recordID.zoneID.ownerName as NSString, forKey: Key.ownerName)
        if let tag = state.system.recordChangeTag { coder.encode(tag as NSString, forKey: Key.changeTag) }
        if let date = state.system.creationDate { coder.encode(date as NSDate, forKey: Key.creationDate) }
        if let date = state.system.modificationDate { coder.encode(date as NSDate, forKey: Key.modificationDate) }
        if let user = state.system.creatorUserRecordID { coder.encode(user.recordName as NSString, forKey: Key.creator) }
        if let user = state.system.lastModifiedUserRecordID { coder.encode(user.recordName as NSString, forKey: Key.lastModifier) }
        if let parent = state.parent { coder.encode(parent.recordID.recordName as NSString, forKey: Key.parentName) }
        if let viewer = state.viewer { coder.encode(viewer as NSString, forKey: Key.viewer) }
        // A root's share and a share's participants are part of the stored version, as in CloudKit.
        let sharing = (self as? Share)?.extrasHoldingSharing(state.extras) ?? state.extras
        let members = sharing.members.filter { JSONExtras.sharingMemberKeys.contains($0.key) }
        if !members.isEmpty { coder.encode(Record.json(members) as NSData, forKey: Key.sharingMembers) }
    }

    /// Writes the whole record: system fields, field values, encrypted keys and unsaved changes
    /// (`NSCoding`); `NSKeyedArchiver.archivedData(withRootObject:requiringSecureCoding:)` calls it.
    ///
    /// ```swift
    /// let data = try NSKeyedArchiver.archivedData(withRootObject: record, requiringSecureCoding: true)
    /// ```
    public func encode(with coder: NSCoder) {
        encodeSystemFields(with: coder)
        let state = snapshot
        coder.encode(Record.json(state.fields) as NSData, forKey: Key.fields)
        if let base = state.baseFields { coder.encode(Record.json(base) as NSData, forKey: Key.baseFields) }
        if !state.encrypted.isEmpty { coder.encode(Record.json(state.encrypted.sorted()) as NSData, forKey: Key.encryptedKeys) }
        if !state.changed.isEmpty { coder.encode(Record.json(state.changed) as NSData, forKey: Key.changedKeys) }
        coder.encode(state.allFieldsChanged, forKey: Key.allFieldsChanged)
        coder.encode(state.parentChanged, forKey: Key.parentChanged)
    }

    /// What an archive holds of a record, read by ``init(coder:)`` (and ``Share``'s).
    struct ArchivedParts {
        let recordType: String
        let recordID: ID
        let system: SystemFields
        let fields: [String: FieldValue]
        let parent: Reference?
        let encrypted: Set<String>
        let extras: JSONExtras
        let changed: [String]
        let baseFields: [String: FieldValue]?
        let allFieldsChanged: Bool
        let parentChanged: Bool
        let viewer: String?
    }

    /// Reads what ``encodeSystemFields(with:)`` or ``encode(with:)`` wrote; `nil` when the
    /// archive holds no record.
    static func archivedParts(_ coder: NSCoder) -> ArchivedParts? {
        // Absent keys are not decoded at all: swift-corelibs-foundation's unarchiver counts
        // decoding a missing key as a failure (and its older class methods then trap).
        func text(_ key: String) -> String? { coder.archivedText(forKey: key) }
        func date(_ key: String) -> Date? {
            coder.containsValue(forKey: key) ? coder.decodeArchived(NSDate.self, forKey: key) as Date? : nil
        }
        func json<T: Decodable>(_ key: String, as type: T.Type) -> T? {
            guard coder.containsValue(forKey: key), let data = coder.decodeArchived(NSData.self, forKey: key) as Data? else { return nil }
            return try? JSONDecoder.stratusValues().decode(T.self, from: data)
        }
        func flag(_ key: String) -> Bool { coder.containsValue(forKey: key) && coder.decodeBool(forKey: key) }
        guard coder.containsValue(forKey: Key.version), let recordType = text(Key.recordType), let recordName = text(Key.recordName),
              let zoneName = text(Key.zoneName), let ownerName = text(Key.ownerName)
        else { return nil }
        let zoneID = RecordZone.ID(zoneName: zoneName, ownerName: ownerName)
        let system = SystemFields(
            creationDate: date(Key.creationDate), modificationDate: date(Key.modificationDate),
            creatorUserRecordID: text(Key.creator).map { ID(recordName: $0) },
            lastModifiedUserRecordID: text(Key.lastModifier).map { ID(recordName: $0) },
            recordChangeTag: text(Key.changeTag))
        let parent = text(Key.parentName).map { Reference(recordID: ID(recordName: $0, zoneID: zoneID), action: .none) }
        var fields: [String: FieldValue] = [:]
        if coder.containsValue(forKey: Key.fields) {
            guard let decoded = json(Key.fields, as: [String: FieldValue].self) else { return nil }
            fields = decoded
        }
        let encrypted = Set(json(Key.encryptedKeys, as: [String].self) ?? [])
        var extras = JSONExtras()
        for (key, text) in json(Key.sharingMembers, as: [String: String].self) ?? [:] where JSONExtras.sharingMemberKeys.contains(key) {
            extras.members[key] = text
        }
        return ArchivedParts(recordType: recordType, recordID: ID(recordName: recordName, zoneID: zoneID), system: system, fields: fields, parent: parent,
                             encrypted: encrypted.intersection(fields.keys), extras: extras, changed: json(Key.changedKeys, as: [String].self) ?? [],
                             baseFields: json(Key.baseFields, as: [String: FieldValue].self), allFieldsChanged: flag(Key.allFieldsChanged),
                             parentChanged: flag(Key.parentChanged), viewer: text(Key.viewer))
    }

    /// Sets what an archive says changed since the record was fetched, and who it was handed to.
    final func restoreArchived(_ parts: ArchivedParts) {
        restoreChanges(changed: parts.changed, baseFields: parts.baseFields, allFieldsChanged: parts.allFieldsChanged, parentChanged: parts.parentChanged)
        presented(to: parts.viewer)
    }

    private static func json<T: Encodable>(_ value: T) -> Data {
        // Field values and key lists always encode: plain Codable values, a non-finite number
        // (a field set to .nan, not saved yet) written as text.
        (try? JSONEncoder.stratusValues().encode(value)) ?? Data()
    }
}
