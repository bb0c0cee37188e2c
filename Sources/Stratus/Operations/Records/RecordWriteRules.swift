import Foundation
import Synchronization

/// How a save treats the record already in the store: CloudKit Web Services' modify
/// operation types, plus the API's default.
///
/// ```swift
/// let op = ModifyRecordsOperation(recordsToSave: records)
/// op.writeMode = .create          // fail on records that exist
/// ```
public enum RecordWriteMode: String, Hashable, Sendable, Codable, CaseIterable {
    /// The API default (`SavePolicy.ifServerRecordUnchanged`): a record without a change tag
    /// must be new; one with a tag must match the stored tag. Writes the changed keys.
    case ifServerRecordUnchanged
    /// The record must not exist yet.
    case create
    /// The record must exist and its change tag must match; writes the changed keys only.
    case update
    /// The record must exist and its change tag must match; replaces every field.
    case replace
    /// No tag check; writes the changed keys, creating the record when missing
    /// (`SavePolicy.changedKeys`).
    case forceUpdate
    /// No tag check; replaces every field, creating the record when missing (CloudKit Web
    /// Services' `forceReplace`; `SavePolicy.allKeys` writes every key the record holds in
    /// ``forceUpdate`` instead, keeping keys only the store holds).
    case forceReplace

    /// The mode a CloudKit save policy stands for.
    public init(_ policy: ModifyRecordsOperation.SavePolicy) {
        switch policy {
        case .ifServerRecordUnchanged: self = .ifServerRecordUnchanged
        // `.allKeys` writes every key the record holds (``PreparedSave`` counts them all as
        // changed) over the stored record; keys only the store holds stay, as in CloudKit.
        case .changedKeys, .allKeys: self = .forceUpdate
        }
    }

    /// Whether the mode compares change tags (and so always stores a new tag).
    public var checksChangeTag: Bool { self == .ifServerRecordUnchanged || self == .update || self == .replace }

    /// Whether a write in this mode that preserves system fields (an import, a copy) restores
    /// records as they were: keeps the tags and dates they carry, and needs no parent in the
    /// store. Modes that check tags write new versions.
    func restores(preservingSystemFields: Bool) -> Bool { preservingSystemFields && !checksChangeTag }

    /// Whether a save of a record with `changeTag` can only merge its changed keys into the
    /// stored record the tag names (the modes that write changed keys, with a tag).
    func mergesChangedKeysOnly(changeTag: String?) -> Bool {
        changeTag != nil && (self == .ifServerRecordUnchanged || self == .update)
    }

    /// Whether a save of a record with `changeTag` may create the record in this mode: not in
    /// the modes that change existing records only, nor with a tag in the default mode (a
    /// tagged record must be stored).
    func mayCreate(changeTag: String?) -> Bool {
        switch self {
        case .update, .replace: false
        case .ifServerRecordUnchanged: changeTag == nil
        case .create, .forceUpdate, .forceReplace: true
        }
    }
}

/// What a successful delete did: CloudKit reports deleting a missing record as success.
public enum RecordDeletionKind: Hashable, Sendable {
    /// A stored record was deleted.
    case deleted
    /// No record with the ID was stored; nothing was deleted.
    case notFound
}

/// What a successful save did.
public enum RecordWriteKind: Hashable, Sendable {
    case created
    case updated
    /// The store already held exactly this record; nothing was written.
    case unchanged
}

/// CloudKit's rules for what a save stores, decided once above every engine.
///
/// The writer of a request (``RecordWriteExecutor``) reads the stored record inside the
/// engine's transaction, asks ``resolve(_:existing:mode:preservingSystemFields:context:now:)``
/// what to write, and has the engine write that unless the answer is
/// ``RecordWriteKind/unchanged``.
enum RecordWriteRules {
    /// What a save stores: its system fields, values and parent, and what kind of write it is.
    struct Resolution: Sendable {
        var kind: RecordWriteKind
        var systemFields: Record.SystemFields
        var fields: [String: FieldValue]
        var encryptedKeys: Set<String>
        var parent: Record.Reference?
        var jsonExtras: Record.JSONExtras

        /// The record as stored, for `save`.
        func record(for save: PreparedSave) -> Record {
            Record.stored(recordType: save.record.recordType, recordID: save.recordID, systemFields: systemFields, fields: fields, parent: parent,
                   encryptedKeys: encryptedKeys, jsonExtras: jsonExtras)
        }
    }

    /// The values to store for `save` and what kind of write it is, or the per-item error
    /// CloudKit would report (`serverRecordChanged` with the server and client records,
    /// `unknownItem` for a record that must exist). For ``RecordWriteKind/unchanged``, the
    /// stored values.
    ///
    /// With `preservingSystemFields`, modes that do not check tags (create, forceUpdate,
    /// forceReplace) keep the creation and modification dates, users and change tag the
    /// incoming record carries, so that a restored export is identical to its source.
    /// In those modes a save that would change nothing is ``RecordWriteKind/unchanged`` and
    /// is not written, unless `writingUnchanged` (a save through CloudKit's save policies, each
    /// of which CloudKit makes a new version) and the save sends keys.
    ///
    /// `newRecordCreator` is the creator of a new record whose creator the save does not keep
    /// (the caller when `nil`): the user a system record is made for.
    static func resolve(
        _ save: PreparedSave, existing: Record?, mode: RecordWriteMode, preservingSystemFields: Bool = false, keepingGivenVersion: Bool = false,
        writingUnchanged: Bool = false, newRecordCreator: Record.ID? = nil, context: DatabaseContext, now: Date
    ) -> Result<Resolution, StratusError> {
        let incoming = save.record
        let name = incoming.recordID.recordName
        if let existing, existing.recordType != incoming.recordType {
            return .failure(StratusError(.invalidArguments, "record '\(name)' exists with type '\(existing.recordType)', not '\(incoming.recordType)'", recordID: incoming.recordID))
        }
        let given = save.systemFields
        switch (mode, existing, given.recordChangeTag) {
        case (.ifServerRecordUnchanged, nil, let tag?):
            return .failure(StratusError(.unknownItem, "record '\(name)' with change tag \(tag) no longer exists", recordID: incoming.recordID))
        case (.ifServerRecordUnchanged, let server?, nil):
            let otherwise = incoming.recordType == Record.SystemType.share
                ? " (CloudKit checks a share's change tag whatever the save policy)" : ", or use the .allKeys or .changedKeys save policy"
            return .failure(conflict(incoming, server: server, "record '\(name)' already exists; fetch it and save the fetched record\(otherwise)"))
        case (.create, let server?, _):
            return .failure(conflict(incoming, server: server, "record '\(name)' already exists, and create only makes new records"))
        case (.update, nil, _), (.replace, nil, _):
            return .failure(StratusError(.unknownItem, "record '\(name)' does not exist, and \(mode.rawValue) only changes existing records", recordID: incoming.recordID))
        case (.update, _, nil), (.replace, _, nil):
            return .failure(StratusError(.invalidArguments, "record '\(name)' has no recordChangeTag, which \(mode.rawValue) needs to detect conflicting changes (use forceUpdate or forceReplace to overwrite)", recordID: incoming.recordID))
        case (.ifServerRecordUnchanged, let server?, let tag?), (.update, let server?, let tag?), (.replace, let server?, let tag?):
            if server.recordChangeTag != tag {
                return .failure(conflict(incoming, server: server, "record '\(name)' was changed by someone else (change tag \(tag) is stale; the store has \(server.recordChangeTag ?? "none"))"))
            }
        default: break
        }

        var fields: [String: FieldValue]
        var encrypted: Set<String>
        // A CloudKit answer's record that came without `fields` (a request that named no keys)
        // says nothing of the fields: replacing it keeps them, as merging does.
        let mergesIntoStored = existing != nil && (mode != .replace && mode != .forceReplace || save.jsonExtras.absentKeys.contains("fields"))
        if let existing, mergesIntoStored {
            fields = existing.fieldValues
            encrypted = existing.encryptedKeys
            for key in save.changedKeys {
                fields[key] = save.fields[key]
                if save.encryptedKeys.contains(key) { encrypted.insert(key) } else { encrypted.remove(key) }
            }
        } else {
            fields = save.fields
            encrypted = save.encryptedKeys
        }
        if keepingGivenVersion, let existing, given.recordChangeTag != existing.recordChangeTag {
            // The save was to be the stored version itself: it changed since it was read.
            return .failure(conflict(incoming, server: existing, "record '\(name)' was changed by someone else since it was read (the store has change tag \(existing.recordChangeTag ?? "none")); read it again"))
        }
        if !mergesIntoStored, let key = save.unavailableAssetKeys.sorted().first {
            // Stored from the save, not kept from a stored record: content that is gone.
            return .failure(StratusError(.assetNotAvailable, "record '\(name)': the stored content of asset field '\(key)' is not in the store for this database (no longer: another version of the record may have replaced it since this one was read; or never named by a record here); save the asset from its file (Asset(fileURL:)), or save the record read again", recordID: incoming.recordID))
        }
        let replacing = mode == .replace || mode == .forceReplace
        let parent = existing == nil || replacing || save.parentChanged ? save.parent : existing?.parent
        let keep = mode.restores(preservingSystemFields: preservingSystemFields)
        // A restoring save gives the record's creation as its source has it, also over a stored
        // record: deleted and made again there (a mirror's feed carries only the new record),
        // it was created anew. In the public database the creator decides who may write, so
        // only an administrator moves it from a stored record to another user.
        let givesCreator = keep && (existing == nil || context.isAdministrator || context.scope != .public)
        var givenCreator: Record.ID?
        var givenModifier: Record.ID?
        if keep {
            do {
                givenCreator = try restoredUser(given.creatorUserRecordID, "creator", of: incoming, context: context)
                givenModifier = try restoredUser(given.lastModifiedUserRecordID, "last modifier", of: incoming, context: context)
            } catch {
                return .failure(error)
            }
        }
        let modified = modificationDate(now: now, after: existing)
        var system = Record.SystemFields(
            // A restored record that gives its modification but not its creation (a changes
            // answer's shape) was not created after it was modified.
            creationDate: (keep ? given.creationDate : nil) ?? existing?.creationDate ?? (keep ? given.modificationDate.map { min($0, now) } : nil) ?? now,
            modificationDate: modified,
            creatorUserRecordID: (givesCreator ? givenCreator : nil) ?? existing?.systemFields.creatorUserRecordID ?? newRecordCreator ?? context.userRecordID,
            lastModifiedUserRecordID: context.userRecordID,
            recordChangeTag: (keep ? given.recordChangeTag : nil) ?? newChangeTag()
        )
        if keep {
            if let date = given.modificationDate { system.modificationDate = date }
            if let user = givenModifier { system.lastModifiedUserRecordID = user }
        }
        // The store's administrator is no user: what it restores was created and modified by the
        // users its input names, one standing for the other when the input gives only one.
        if system.lastModifiedUserRecordID == nil { system.lastModifiedUserRecordID = system.creatorUserRecordID }
        if system.creatorUserRecordID == nil { system.creatorUserRecordID = system.lastModifiedUserRecordID }
        guard system.creatorUserRecordID != nil else {
            return .failure(StratusError(.invalidArguments, "record '\(name)' names no user who created or modified it (created.userRecordName, modified.userRecordName), which a save as the store's administrator, who is no user, needs", recordID: incoming.recordID))
        }
        let extras = mergedExtras(save, existing: existing, replacing: replacing, keepsSystemFields: keep)
        // A forced write that changes nothing is not written, so re-running an import is a
        // no-op (no new change tag, no change to sync). When the input carries system fields
        // that are kept, they must match too.
        // A save through a save policy that sends keys is a new version even with the stored
        // values; one that sends none (`.changedKeys`, nothing changed) has nothing to write.
        if !mode.checksChangeTag, !writingUnchanged || save.changedKeys.isEmpty, let existing, existing.fieldValues == fields, existing.parent == parent,
           existing.encryptedKeys == encrypted, comparable(existing.jsonExtras) == comparable(extras),
           !keep || isStoredVersion(given, of: existing, fields: fields, encryptedKeys: encrypted) {
            return .success(Resolution(kind: .unchanged, systemFields: existing.systemFields, fields: fields, encryptedKeys: encrypted, parent: parent,
                                       jsonExtras: existing.jsonExtras))
        }
        // A change tag names one version: kept from the input, it must not name the stored
        // record's other contents too, or a writer holding the stored version would pass the tag
        // check and overwrite this one unseen. Such a save is a new version the store makes.
        if keep, !keepingGivenVersion, let existing, let tag = given.recordChangeTag, tag == existing.recordChangeTag {
            system.recordChangeTag = reissuedTag(tag, fields: fields, encryptedKeys: encrypted)
            system.modificationDate = modified
            // The store's administrator is no user: its new version keeps the modifier it was given.
            system.lastModifiedUserRecordID = context.userRecordID ?? system.lastModifiedUserRecordID
        }
        // A stored record this save changes has the tag and modification the store gives it,
        // which its reads hand out (a change feed, an export to update from), also where the
        // input (a CloudKit answer) left them out.
        return .success(Resolution(kind: existing == nil ? .created : .updated, systemFields: system, fields: fields, encryptedKeys: encrypted, parent: parent,
                                   jsonExtras: existing == nil || keepingGivenVersion ? extras : withoutAbsentVersion(extras)))
    }

    /// The modification date of a record's new version: `now`, or, when the stored version's
    /// is as late (two saves within one millisecond, a clock stepped back), a millisecond after
    /// it. Sync code orders versions of a record by this date (Apple's CKSyncEngine sample keeps
    /// the system fields of the later one), so each version of a record is later than the one
    /// before it.
    static func modificationDate(now: Date, after existing: Record?) -> Date {
        guard let stored = existing?.modificationDate, stored >= now else { return now }
        return Date(timeIntervalSinceReferenceDate: ((stored.timeIntervalSinceReferenceDate * 1000).rounded() + 1) / 1000)
    }

    /// A user a restoring save gives as its record's creator or last modifier, as the store
    /// keeps it: a user record name (ASCII, 1–255 bytes), and `__defaultOwner__`, CloudKit's
    /// name for the current user (what a record saved by its creator's own app says), as the
    /// caller's record name. Stored as written, `__defaultOwner__` would be read back by every
    /// user as their own record, and by `_creator` grants as nobody's. The store's
    /// administrator, who is no user, restores what it is given as written: stores of earlier
    /// versions hold such users (and names that are no record names), and a whole-store copy
    /// must carry them as they are.
    private static func restoredUser(_ user: Record.ID?, _ role: String, of record: Record, context: DatabaseContext) throws(StratusError) -> Record.ID? {
        guard let user else { return nil }
        let name = user.recordName
        if name == RecordZone.ID.currentUserDefaultOwner { return context.userRecordID ?? user }
        guard context.userRecordID != nil else { return user }
        do {
            try Naming.checkRecordName(name, allowSystemNames: true)
        } catch {
            throw StratusError(.invalidArguments, "record '\(record.recordID.recordName)' names a \(role) that is no user record name (\(error.message))", recordID: record.recordID)
        }
        return user
    }

    /// Whether the version a restoring save gives (its tag and modification, each where given)
    /// is the stored record's, of the same contents: as given, or as the store reissued it
    /// (``reissuedTag(_:fields:encryptedKeys:)``), so that the same input restored again
    /// changes nothing, while any other version is restored.
    private static func isStoredVersion(_ given: Record.SystemFields, of existing: Record, fields: [String: FieldValue], encryptedKeys: Set<String>) -> Bool {
        let stored = existing.systemFields
        if (given.recordChangeTag ?? stored.recordChangeTag) == stored.recordChangeTag
            && (given.modificationDate ?? stored.modificationDate) == stored.modificationDate {
            return true
        }
        guard let tag = given.recordChangeTag, tag != stored.recordChangeTag else { return false }
        return reissuedTag(tag, fields: fields, encryptedKeys: encryptedKeys) == stored.recordChangeTag
    }

    /// The tag a restoring save gets when its given tag is the stored record's with other
    /// contents (a tag names one version): derived from that tag and the new contents, so that
    /// restoring the same input again finds the version it made (``isStoredVersion``), and a
    /// writer holding the old tag is refused. 64-bit FNV-1a in base 36, like other tags' length.
    static func reissuedTag(_ given: String, fields: [String: FieldValue], encryptedKeys: Set<String>) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        func mix(_ byte: UInt8) { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        for byte in given.utf8 { mix(byte) }
        mix(0)
        for byte in FieldDocument.encodedBytes(fields, encryptedKeys: encryptedKeys) { mix(byte) }
        return String(hash, radix: 36)
    }

    /// The version a store gives a record it writes: its change tag and modification.
    private static let versionKeys: Set<String> = ["recordChangeTag", "modified", "modified.timestamp", "modified.userRecordName"]

    /// `extras` without the marks that the record's CloudKit JSON left its version out.
    private static func withoutAbsentVersion(_ extras: Record.JSONExtras) -> Record.JSONExtras {
        guard !extras.absentKeys.isDisjoint(with: versionKeys) else { return extras }
        var trimmed = extras
        trimmed.absentKeys.subtract(versionKeys)
        return trimmed
    }

    /// Members whose absence only a CloudKit answer's records mark (``Record/JSONExtras/absentKeys``):
    /// the same record read back from Stratus's own export, which leaves them out as the answer
    /// did, comes without the marks, and is the same record.
    private static let presentationalAbsence: Set<String> = ["zoneID", "fields"]

    /// `extras` as a save that changes nothing compares them: without the marks of an absent
    /// version (the store gives one) and of absences only a CloudKit answer marks.
    private static func comparable(_ extras: Record.JSONExtras) -> Record.JSONExtras {
        var trimmed = withoutAbsentVersion(extras)
        guard !trimmed.absentKeys.isDisjoint(with: presentationalAbsence) else { return trimmed }
        trimmed.absentKeys.subtract(presentationalAbsence)
        return trimmed
    }

    /// What a save keeps of the records' CloudKit JSON extras (``Record/JSONExtras``): kept
    /// fields as the fields are merged; the record's own members as the incoming record gives
    /// them, over the stored record's unless it replaces the record (an update that names its
    /// zone keeps the stored `share` and `pluginFields`); what describes system fields only
    /// while those system fields are kept.
    private static func mergedExtras(_ save: PreparedSave, existing: Record?, replacing: Bool, keepsSystemFields keep: Bool) -> Record.JSONExtras {
        let incoming = save.jsonExtras
        let stored = existing?.jsonExtras ?? Record.JSONExtras()
        // Records made in Swift (not read from CloudKit JSON) have none: nothing to merge.
        if incoming.isEmpty && (existing == nil || stored.isEmpty) { return incoming }
        // A whole version (its change tag, creation and modification given: an answer's record,
        // an export's line) says what the record is, members it lacks included; a request's
        // record (an operation's) says only what it changes.
        let given = save.systemFields
        let wholeVersion = given.recordChangeTag != nil && given.creationDate != nil && given.modificationDate != nil
        var merged = existing == nil || replacing || wholeVersion ? incoming : recordLevel(incoming, over: stored)
        merged.fields = [:]
        // A parent set in Swift replaces the one whose JSON was kept (Record.parent drops it).
        if save.parentChanged && incoming.members["parent"] == nil { merged.members["parent"] = nil }
        // A CloudKit answer's record without `fields` (a request that named no keys) keeps the
        // stored fields (``resolve``), so it keeps their JSON as it came too.
        if existing != nil && (!replacing || incoming.absentKeys.contains("fields")) {
            merged.fields = stored.fields
            for key in save.changedKeys { merged.fields[key] = incoming.fields[key] }
        } else {
            merged.fields = incoming.fields
        }
        if existing != nil, save.record.recordType == Record.SystemType.share { StoredShare.keepStoredToken(of: stored, in: &merged) }
        let creationSource = existing != nil ? stored : incoming
        let modificationSource = keep ? incoming : Record.JSONExtras()
        merged.createdMembers = existing != nil || keep ? creationSource.createdMembers : [:]
        merged.modifiedMembers = modificationSource.modifiedMembers
        merged.absentKeys.subtract(Record.JSONExtras.systemFieldKeys)
        for key in Record.JSONExtras.systemFieldKeys {
            let source = key.hasPrefix("created") ? (existing != nil || keep ? creationSource : Record.JSONExtras()) : modificationSource
            if source.absentKeys.contains(key) { merged.absentKeys.insert(key) }
        }
        return merged
    }

    /// The record-level extras of an update: the incoming record's members over the stored
    /// record's (a record that names its zone, or gives `pluginFields`, says nothing of the
    /// stored `share`); its zone's members when it names its zone, else the stored record's;
    /// `fields` absent only when neither had them. What describes system fields is decided by
    /// ``mergedExtras`` after.
    private static func recordLevel(_ incoming: Record.JSONExtras, over stored: Record.JSONExtras) -> Record.JSONExtras {
        var merged = stored
        for (key, text) in incoming.members { merged.members[key] = text }
        let zoneMarks: Set<String> = ["zoneID", "zoneID.ownerRecordName"]
        if !incoming.zoneIDMembers.isEmpty || incoming.ownerRecordName != nil || !incoming.absentKeys.isDisjoint(with: zoneMarks) {
            merged.zoneIDMembers = incoming.zoneIDMembers
            merged.ownerRecordName = incoming.ownerRecordName
            merged.absentKeys.subtract(zoneMarks)
            merged.absentKeys.formUnion(incoming.absentKeys.intersection(zoneMarks))
        }
        if !incoming.absentKeys.contains("fields") { merged.absentKeys.remove("fields") }
        return merged
    }

    private static func conflict(_ client: Record, server: Record, _ message: String) -> StratusError {
        var error = StratusError(.serverRecordChanged, message, recordID: client.recordID)
        error.serverRecord = server
        error.clientRecord = client
        error.ancestorRecord = client.ancestor()
        return error
    }

    /// A fresh change tag (like CloudKit's short base-36 tags): a per-process random start
    /// mixed with a counter, so tags never repeat within a process and collide across
    /// processes with negligible probability, without a system call per save.
    static func newChangeTag() -> String {
        var z = tagSeed &+ tagCounter.wrappingAdd(0x9E37_79B9_7F4A_7C15, ordering: .relaxed).newValue
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return base36((z ^ (z >> 31)) & 0x7FFF_FFFF_FFFF_FFFF)
    }

    /// `String(value, radix: 36)`, written into a small buffer: a tag is made for every save.
    private static func base36(_ value: UInt64) -> String {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 13) { digits in
            var rest = value
            var start = digits.count
            repeat {
                start -= 1
                let digit = UInt8(rest % 36)
                digits[start] = digit < 10 ? UInt8(ascii: "0") + digit : UInt8(ascii: "a") + digit - 10
                rest /= 36
            } while rest > 0
            return String(decoding: UnsafeBufferPointer(rebasing: digits[start...]), as: UTF8.self)
        }
    }

    private static let tagSeed = UInt64.random(in: .min ... .max)
    private static let tagCounter = Atomic<UInt64>(0)
}
