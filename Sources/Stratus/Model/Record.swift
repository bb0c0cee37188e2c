import Foundation
import Synchronization

// Not final: ``Share`` is a record (as `CKShare` is a `CKRecord`), so ported code saves
// `[root, share]` in one array. Every member below is `final`, so no call pays for a subclass.
// `@unchecked Sendable`: every stored property is a `let`, and all mutable state is behind the
// `Mutex` (a non-final class cannot be checked `Sendable`).
/// A CloudKit-style record: a record type, an ID, system fields and typed field values.
///
/// Records are reference types, like `CKRecord`: an `NSObject` whose equality is identity, that
/// copies with `copy()` and archives with `NSSecureCoding` (see `Record+SecureCoding.swift`).
/// Field access is thread-safe; a record saved or fetched through an operation is a new
/// instance carrying the store's system fields.
///
/// ```swift
/// let todo = Record(recordType: "Todo")
/// todo["title"] = "Water the plants"
/// todo["checked"] = false          // stored as Int64 0, like CloudKit
/// let saved = try await container.publicCloudDatabase.save(todo)
/// print(saved.recordChangeTag!, saved["title"] as? String ?? "")
/// ```
public class Record: NSObject, NSCopying, @unchecked Sendable {
    /// A record type's name, as `CKRecord.RecordType`.
    public typealias RecordType = String
    /// A field's name, as `CKRecord.FieldKey`.
    public typealias FieldKey = String

    /// The record's name and zone, fixed when the record is made.
    ///
    /// ```swift
    /// let todo = Record(recordType: "Todo", recordID: Record.ID(recordName: "todo-1"))
    /// print(todo.recordID.recordName)   // "todo-1"
    /// ```
    public let recordID: ID
    /// The record's type, fixed when the record is made: the schema's record type (created by
    /// the first save in development).
    ///
    /// ```swift
    /// if record.recordType == "Todo" { print(record["title"] ?? "") }
    /// ```
    public let recordType: RecordType
    private let state: Mutex<State>

    struct State: Sendable {
        var system: SystemFields
        var fields: [String: FieldValue]
        var changed: [String]
        var changedSet: Set<String>
        var parent: Reference?
        var parentChanged = false
        var encrypted: Set<String> = []
        /// What the record's CloudKit JSON held beyond the model (see ``JSONExtras``).
        var extras = JSONExtras()
        /// Every field counts as changed (a record built whole, e.g. by an importer); `changed`
        /// then lists only keys removed since.
        var allFieldsChanged = false
        /// Keys whose encrypted value was removed through ``Record/encryptedValues`` since the
        /// record was created or fetched (``Record/EncryptedValues/changedKeys()`` lists them).
        var removedEncrypted: Set<String> = []
        /// The values as the store returned them, kept at the first change of a stored record,
        /// so that a conflict can report the ancestor the client's change was based on.
        var baseFields: [String: FieldValue]?
        /// The parent as the store returned it, kept at the parent's first change of a stored
        /// record (`.some(nil)`: it had none), for the same ancestor.
        var baseParent: Reference??
        /// The user record name of the caller a store handed the record to (see
        /// ``Record/creatorUserRecordID``), or `nil` for a record no store handed out.
        var viewer: String?
    }

    /// Everything mutable, read under one lock (a save reads most of it per record).
    final var snapshot: State { state.withLock { $0 } }

    /// What a writer of records reads: system fields, field values, encrypted keys and parent,
    /// under one lock instead of four (an export writes a million of these).
    package final var contents: (system: SystemFields, fields: [String: FieldValue], encryptedKeys: Set<String>, parent: Reference?, extras: JSONExtras) {
        state.withLock { ($0.system, $0.fields, $0.encrypted, $0.parent, $0.extras) }
    }

    /// Creates a new record in the given zone, with a random record name.
    public convenience init(recordType: String, zoneID: RecordZone.ID = .default) {
        self.init(recordType: recordType, recordID: ID(zoneID: zoneID))
    }

    /// Creates a new, unsaved record. Names are checked when the record is saved.
    public init(recordType: String, recordID: ID) {
        self.recordType = recordType
        self.recordID = recordID
        self.state = Mutex(State(system: SystemFields(), fields: [:], changed: [], changedSet: []))
        super.init()
    }

    /// Creates a new record with all its values at once; every key counts as changed, as if
    /// each had been set. Importers use this: it is much cheaper than setting keys one by one.
    ///
    /// ```swift
    /// let row = Record(recordType: "Row", recordID: id, values: ["title": .string("Milk")])
    /// ```
    public init(recordType: String, recordID: ID, values: [String: FieldValue], systemFields: SystemFields = SystemFields(),
                parent: Reference? = nil, encryptedKeys: Set<String> = [], jsonExtras: JSONExtras = JSONExtras()) {
        self.recordType = recordType
        self.recordID = recordID
        var state = State(system: systemFields, fields: values, changed: [], changedSet: [], parent: parent, encrypted: encryptedKeys, extras: jsonExtras)
        state.allFieldsChanged = true
        state.parentChanged = parent != nil
        self.state = Mutex(state)
        super.init()
    }

    /// Creates a record as a store returns it: system fields set and no changed keys.
    /// Storage engines use this; applications use ``init(recordType:recordID:)``.
    public init(recordType: String, recordID: ID, systemFields: SystemFields, fields: [String: FieldValue], parent: Reference? = nil, encryptedKeys: Set<String> = [],
                jsonExtras: JSONExtras = JSONExtras()) {
        self.recordType = recordType
        self.recordID = recordID
        self.state = Mutex(State(system: systemFields, fields: fields, changed: [], changedSet: [], parent: parent, encrypted: encryptedKeys, extras: jsonExtras))
        super.init()
    }

    /// Reads a record written by ``encodeSystemFields(with:)`` (a record with no field values
    /// and no changes, whose next save is checked against its change tag) or by
    /// ``encode(with:)`` (the whole record); `nil` when the archive holds no record.
    ///
    /// ```swift
    /// let record = try NSKeyedUnarchiver.unarchivedObject(ofClass: Record.self, from: data)
    /// ```
    public required convenience init?(coder: NSCoder) {
        guard let parts = Record.archivedParts(coder) else { return nil }
        self.init(recordType: parts.recordType, recordID: parts.recordID, systemFields: parts.system, fields: parts.fields, parent: parts.parent,
                  encryptedKeys: parts.encrypted, jsonExtras: parts.extras)
        restoreArchived(parts)
    }

    // MARK: - System fields

    /// The fields a store maintains for every record.
    ///
    /// ```swift
    /// let system = record.systemFields
    /// print(system.recordChangeTag ?? "never saved", system.creationDate as Any)
    /// ```
    public struct SystemFields: Hashable, Sendable {
        /// When the record was first saved; nil before then.
        public var creationDate: Date? {
            get { storage.creationDate }
            set { unique().creationDate = newValue }
        }
        /// When the record was last saved; nil before the first save.
        public var modificationDate: Date? {
            get { storage.modificationDate }
            set { unique().modificationDate = newValue }
        }
        /// The user record ID of the user who first saved the record, by record name.
        public var creatorUserRecordID: ID? {
            get { storage.creatorUserRecordID }
            set { unique().creatorUserRecordID = newValue }
        }
        /// The user record ID of the user who saved the record last, by record name.
        public var lastModifiedUserRecordID: ID? {
            get { storage.lastModifiedUserRecordID }
            set { unique().lastModifiedUserRecordID = newValue }
        }
        /// Changes every time the record is saved; used to detect conflicting saves.
        public var recordChangeTag: String? {
            get { storage.recordChangeTag }
            set { unique().recordChangeTag = newValue }
        }

/// System fields as a store or an import gives them; nil: not known yet.
///
/// ```swift
/// let system = Record.SystemFields(creationDate: Date(), recordChangeTag: "3f2a")
/// ```
        public init(
            creationDate: Date? = nil, modificationDate: Date? = nil,
            creatorUserRecordID: ID? = nil, lastModifiedUserRecordID: ID? = nil,
            recordChangeTag: String? = nil
        ) {
            storage = Storage(creationDate: creationDate, modificationDate: modificationDate, creatorUserRecordID: creatorUserRecordID,
                              lastModifiedUserRecordID: lastModifiedUserRecordID, recordChangeTag: recordChangeTag)
        }

        /// The values behind one reference, copied on write: a save copies a record's system
        /// fields several times (rules, rows, results), and inline their two user IDs and tag
        /// cost a retain and a release per string at every copy.
        private var storage: Storage

        // Mutated only through `unique()`, when no other value shares it.
        private final class Storage: @unchecked Sendable {
            var creationDate: Date?
            var modificationDate: Date?
            var creatorUserRecordID: ID?
            var lastModifiedUserRecordID: ID?
            var recordChangeTag: String?

            init(creationDate: Date?, modificationDate: Date?, creatorUserRecordID: ID?, lastModifiedUserRecordID: ID?, recordChangeTag: String?) {
                self.creationDate = creationDate
                self.modificationDate = modificationDate
                self.creatorUserRecordID = creatorUserRecordID
                self.lastModifiedUserRecordID = lastModifiedUserRecordID
                self.recordChangeTag = recordChangeTag
            }

            func copy() -> Storage {
                Storage(creationDate: creationDate, modificationDate: modificationDate, creatorUserRecordID: creatorUserRecordID,
                        lastModifiedUserRecordID: lastModifiedUserRecordID, recordChangeTag: recordChangeTag)
            }
        }

        private mutating func unique() -> Storage {
            if !isKnownUniquelyReferenced(&storage) { storage = storage.copy() }
            return storage
        }

        public static func == (lhs: Self, rhs: Self) -> Bool {
            lhs.storage === rhs.storage
                || (lhs.creationDate == rhs.creationDate && lhs.modificationDate == rhs.modificationDate
                    && lhs.creatorUserRecordID == rhs.creatorUserRecordID && lhs.lastModifiedUserRecordID == rhs.lastModifiedUserRecordID
                    && lhs.recordChangeTag == rhs.recordChangeTag)
        }

        public func hash(into hasher: inout Hasher) {
            hasher.combine(creationDate)
            hasher.combine(modificationDate)
            hasher.combine(creatorUserRecordID)
            hasher.combine(lastModifiedUserRecordID)
            hasher.combine(recordChangeTag)
        }
    }

    /// The system fields as the store keeps them: ``SystemFields/creatorUserRecordID`` and
    /// ``SystemFields/lastModifiedUserRecordID`` name users by their record names, the current
    /// user's included (what an export writes).
    public final var systemFields: SystemFields { state.withLock { $0.system } }
    /// When the record was first saved, as `CKRecord.creationDate`; nil until it is saved.
    ///
    /// ```swift
    /// let saved = try await database.save(todo)
    /// print(saved.creationDate!)
    /// ```
    public final var creationDate: Date? { systemFields.creationDate }
    /// When the record was last saved, as `CKRecord.modificationDate`; nil until it is saved.
    ///
    /// ```swift
    /// let age = Date().timeIntervalSince(record.modificationDate ?? Date())
    /// ```
    public final var modificationDate: Date? { systemFields.modificationDate }
    /// Who created the record, as CloudKit tells the caller: the current user is
    /// `CurrentUserDefaultName` (`__defaultOwner__`), as in CloudKit, and another user is named
    /// by their user record name. ``systemFields`` names the current user by record name too.
    ///
    /// ```swift
    /// let isMine = record.creatorUserRecordID?.recordName == CurrentUserDefaultName
    /// ```
    public final var creatorUserRecordID: ID? {
        let (user, viewer) = state.withLock { ($0.system.creatorUserRecordID, $0.viewer) }
        return Record.presenting(user, to: viewer)
    }
    /// Who saved the record last, as CloudKit tells the caller: `CurrentUserDefaultName` for the
    /// current user (see ``creatorUserRecordID``).
    public final var lastModifiedUserRecordID: ID? {
        let (user, viewer) = state.withLock { ($0.system.lastModifiedUserRecordID, $0.viewer) }
        return Record.presenting(user, to: viewer)
    }
    /// The store's version of the record, as `CKRecord.recordChangeTag`: a new tag with every
    /// save, nil until the first. A save with `.ifServerRecordUnchanged` is refused when the stored
    /// tag is another (`serverRecordChanged`).
    ///
    /// ```swift
    /// let before = record.recordChangeTag
    /// let after = try await database.save(record).recordChangeTag   // != before
    /// ```
    public final var recordChangeTag: String? { systemFields.recordChangeTag }

    /// `user` as CloudKit names it to `viewer`: `__defaultOwner__` when it is the viewer.
    static func presenting(_ user: ID?, to viewer: String?) -> ID? {
        guard let user, let viewer, user.recordName == viewer else { return user }
        return ID(recordName: RecordZone.ID.currentUserDefaultOwner)
    }

    /// The user record name of the caller the record was handed to, who reads themself as
    /// `__defaultOwner__` in ``creatorUserRecordID`` and ``lastModifiedUserRecordID``.
    final var viewerUserRecordName: String? { state.withLock { $0.viewer } }

    /// The record as handed to the caller `viewer` (a user record name; `nil` leaves it as it
    /// is): operations call this on every record they hand out.
    @discardableResult
    final func presented(to viewer: String?) -> Record {
        if let viewer { state.withLock { $0.viewer = viewer } }
        return self
    }

    /// The record's parent, like `CKRecord.parent`: a reference to a record in the same zone
    /// that must exist (or be saved in the same request), else the save fails with
    /// `referenceViolation`. Its action is always `.none` (a reference given with another is
    /// kept as `.none`; CloudKit raises an exception for it); deleting the parent does not
    /// delete the child (use a `.deleteSelf` reference field for that).
    ///
    /// ```swift
    /// page.parent = Record.Reference(recordID: book.recordID, action: .none)
    /// ```
    ///
    /// Setting it drops the parent's JSON kept from CloudKit record JSON
    /// (``JSONExtras/members``), which described the parent it replaces.
    public final var parent: Reference? {
        get { state.withLock { $0.parent } }
        set {
            let parent = newValue.map { $0.action == .none ? $0 : Reference(recordID: $0.recordID, action: .none) }
            state.withLock {
                if $0.baseParent == nil && $0.system.recordChangeTag != nil { $0.baseParent = .some($0.parent) }
                $0.parent = parent
                $0.parentChanged = true
                $0.extras.members["parent"] = nil
            }
        }
    }

    /// The record as the store had it when this copy was fetched (before local changes); for a
    /// record that never came from a store, a record of its type and ID without fields, as
    /// CloudKit answers a new record's conflict ("this record may not have any key / value
    /// pairs"), so that a handler that requires all three records of a conflict gets them.
    final func ancestor() -> Record {
        let snapshot = state.withLock { $0 }
        guard snapshot.system.recordChangeTag != nil else {
            return Record(recordType: recordType, recordID: recordID).presented(to: snapshot.viewer)
        }
        return Record.stored(recordType: recordType, recordID: recordID, systemFields: snapshot.system,
                             fields: snapshot.baseFields ?? snapshot.fields, parent: snapshot.baseParent ?? snapshot.parent, encryptedKeys: snapshot.encrypted, jsonExtras: snapshot.extras)
            .presented(to: snapshot.viewer)
    }

    /// Whether ``parent`` was set since the record was created or fetched.
    final var isParentChanged: Bool { state.withLock { $0.parentChanged } }

    // MARK: - Field values

    /// The value of a field as CloudKit gives it (`String`, `Date`, `Data`, ``Reference``,
    /// ``Location``, ``Asset``, a number as an `NSNumber`, or an array of these), or `nil`.
    /// Setting `nil` removes the field.
    ///
    /// Numbers read as CloudKit's `NSNumber`s do: `as? Int`, `as? Int64`, `as? Double` and
    /// `as? Bool` succeed when the stored number converts exactly (an INT64 1 is `true`, 2 is no
    /// `Bool`; a DOUBLE 2.5 is no `Int`). What is stored stays exact: `Int`, `Bool` and `Int64`
    /// are stored as INT64, `Double` and `Float` as DOUBLE, and an INT64 2 never comes back as
    /// DOUBLE 2.0 (``fieldValue(forKey:)`` tells them apart).
    ///
    /// ```swift
    /// record["count"] = 2
    /// let count = record["count"] as? Int          // 2
    /// let ratio = record["count"] as? Double       // 2.0, as in CloudKit
    /// let share = root[Record.SystemFieldKey.share] as? Record.Reference
    /// ```
    ///
    /// CloudKit's keys for the record's parent and share (``SystemFieldKey``, `___parent` and
    /// `___share`, which no field name can be) read ``parent`` and ``share``, as `CKRecord`'s
    /// do; setting `___parent` sets the parent.
    ///
    /// - Precondition: a value set for `___parent` is a ``Reference``; `___share` is not set
    ///   (a record's share is the share saved with it as root), as CloudKit raises for both.
    public final subscript(key: FieldKey) -> (any RecordValueProtocol)? {
        get {
            // No field name starts with `_`: one byte keeps the system keys off every field's read.
            if key.utf8.first == UInt8(ascii: "_") { return systemValue(forKey: key) }
            return fieldValue(forKey: key)?.objectValue
        }
        set {
            if key.utf8.first == UInt8(ascii: "_"), setSystemValue(newValue, forKey: key) { return }
            setFieldValue(newValue?.fieldValue, forKey: key)
        }
    }

    /// The parent or share for their ``SystemFieldKey``, else the field (which no name that
    /// starts with `_` is).
    private final func systemValue(forKey key: FieldKey) -> (any RecordValueProtocol)? {
        switch key {
        case SystemFieldKey.parent: parent
        case SystemFieldKey.share: share
        default: fieldValue(forKey: key)?.objectValue
        }
    }

    /// Sets the parent for its ``SystemFieldKey``; answers whether `key` was a system key.
    private final func setSystemValue(_ value: (any RecordValueProtocol)?, forKey key: FieldKey) -> Bool {
        switch key {
        case SystemFieldKey.parent:
            guard let value else { parent = nil; return true }
            guard let reference = value as? Reference else { preconditionFailure("the value for \(key) (the record's parent) is a \(type(of: value)), not a Record.Reference") }
            parent = reference
            return true
        case SystemFieldKey.share:
            preconditionFailure("\(key) (the record's share) cannot be set: a record's share is the Share saved with the record as its root")
        default:
            return false
        }
    }

    /// The value of a field as a given type, or `nil` when the record has no such field or its
    /// value does not convert (with `NSNumber`'s conversions for numbers).
    ///
    /// ```swift
    /// let title: String? = record["title"]
    /// let count: Int? = record["count"]
    /// ```
    public final subscript<T: RecordValueProtocol>(key: FieldKey) -> T? {
        get {
            if key.utf8.first == UInt8(ascii: "_") { return systemValue(forKey: key) as? T }
            guard let value = fieldValue(forKey: key) else { return nil }
            // A value read as its own type is itself: no `NSNumber` on the way (a transform
            // over a million records reads a few values from each).
            switch value {
            case .double(let double) where T.self == Double.self: return double as? T
            case .int64(let int) where T.self == Int64.self: return int as? T
            case .string(let string) where T.self == String.self: return string as? T
            default: return value.objectValue as? T
            }
        }
        set {
            if key.utf8.first == UInt8(ascii: "_"), setSystemValue(newValue, forKey: key) { return }
            setFieldValue(newValue?.fieldValue, forKey: key)
        }
    }

    /// The typed value of a field, or `nil` when the record has no such field.
    public final func fieldValue(forKey key: String) -> FieldValue? {
        state.withLock { $0.fields[key] }
    }

    /// Sets or, with `nil`, removes a field, and marks the key as changed. The value is a
    /// plain (not encrypted) value.
    public final func setFieldValue(_ value: FieldValue?, forKey key: String) {
        setFieldValue(value, forKey: key, encrypted: false)
    }

    /// Sets a field as a plain or an encrypted value (see ``encryptedValues``).
    public final func setFieldValue(_ value: FieldValue?, forKey key: String, encrypted: Bool) {
        state.withLock { state in
            if state.baseFields == nil && state.system.recordChangeTag != nil { state.baseFields = state.fields }
            state.fields[key] = value
            if encrypted && value != nil { state.encrypted.insert(key) } else if !state.encrypted.isEmpty { state.encrypted.remove(key) }
            if encrypted && value == nil { state.removedEncrypted.insert(key) } else if !state.removedEncrypted.isEmpty { state.removedEncrypted.remove(key) }
            // A field kept as the JSON it came as describes the old value only.
            if !state.extras.fields.isEmpty { state.extras.fields[key] = nil }
            if state.allFieldsChanged {
                // Present keys are changed already; remember removals.
                if value == nil && state.changedSet.insert(key).inserted { state.changed.append(key) }
            } else {
                // Room for a few changes at the first: growing from nothing one key at a time
                // allocates again at the second key.
                if state.changed.isEmpty {
                    state.changedSet.reserveCapacity(4)
                    state.changed.reserveCapacity(4)
                }
                if state.changedSet.insert(key).inserted { state.changed.append(key) }
            }
        }
    }

    /// What the record's CloudKit JSON held beyond Stratus's model, kept so that an export
    /// gives it back as it came (see ``JSONExtras``). Setting a field drops what was kept of it.
    ///
    /// ```swift
    /// record.jsonExtras.members["pluginFields"] = "{}"
    /// ```
    public final var jsonExtras: JSONExtras {
        get { state.withLock { $0.extras } }
        set { state.withLock { $0.extras = newValue } }
    }

    /// The keys whose values are encrypted values, like the keys of `CKRecord.encryptedValues`.
    public final var encryptedKeys: Set<String> { state.withLock { $0.encrypted } }

    /// Fields whose values the client encrypts, like `CKRecord.encryptedValues`.
    ///
    /// Stratus stores them as it gets them, opaque to the store, and keeps the marking through
    /// every round trip: in CloudKit record JSON a `BYTES` value travels as `ENCRYPTED_BYTES`
    /// and any other as its type with `"isEncrypted": true`. Queries should not filter on them.
    ///
    /// ```swift
    /// note.encryptedValues["secret"] = ciphertext      // Data the app encrypted
    /// let secret = note.encryptedValues["secret"] as? Data
    /// ```
    public final var encryptedValues: EncryptedValues { EncryptedValues(record: self) }

    /// The encrypted fields of a record; see ``Record/encryptedValues``. A class, as the object
    /// CloudKit answers, so that setters of an app's `RecordKeyValueSetting` extensions work on it.
    ///
    /// ```swift
    /// note.encryptedValues["pin"] = "4921"
    /// let pin = note.encryptedValues["pin"] as? String
    /// ```
    public final class EncryptedValues: Sendable {
        let record: Record

        init(record: Record) {
            self.record = record
        }

        /// The encrypted value of `key`, or nil when the field is not an encrypted value; setting
        /// nil removes the field.
        ///
        /// ```swift
        /// note.encryptedValues["pin"] = "1234"
        /// ```
        public subscript(key: FieldKey) -> (any RecordValueProtocol)? {
            get { record.encryptedKeys.contains(key) ? record.fieldValue(forKey: key)?.objectValue : nil }
            set { record.setFieldValue(newValue?.fieldValue, forKey: key, encrypted: true) }
        }

        /// The encrypted value of a field as a given type.
        ///
        /// ```swift
        /// let secret: Data? = note.encryptedValues["secret"]
        /// ```
        public subscript<T: RecordValueProtocol>(key: FieldKey) -> T? {
            get { self[key] as? T }
            set { record.setFieldValue(newValue?.fieldValue, forKey: key, encrypted: true) }
        }

        /// Every key that has an encrypted value, sorted, as `encryptedValues.allKeys()`.
        ///
        /// ```swift
        /// for key in note.encryptedValues.allKeys() { print(key) }
        /// ```
        public func allKeys() -> [String] {
            record.encryptedKeys.sorted()
        }

        /// The encrypted keys set or removed since the record was created or fetched, in the
        /// order changed, as `encryptedValues.changedKeys()`.
        ///
        /// ```swift
        /// note.encryptedValues["secret"] = ciphertext
        /// note.encryptedValues.changedKeys()        // ["secret"]
        /// ```
        public func changedKeys() -> [String] {
            let (encrypted, removed) = record.state.withLock { ($0.encrypted, $0.removedEncrypted) }
            return record.changedKeys().filter { encrypted.contains($0) || removed.contains($0) }
        }
    }

    /// The search words of the record's string and string-list values, as
    /// `CKRecord.allTokens()`: what a tokenized search (`self CONTAINS 'word'`,
    /// `allTokens TOKENMATCHES[cdl] 'word'`) matches, case and diacritics folded and stop words
    /// dropped, sorted.
    ///
    /// ```swift
    /// let note = Record(recordType: "Note")
    /// note["title"] = "The Café at Bob's"
    /// note.allTokens()          // ["bob", "cafe", "s"]
    /// ```
    public final func allTokens() -> [String] {
        TextSearch.words(of: fieldValues).sorted()
    }

    /// Every field key that has a value, sorted.
    public final func allKeys() -> [String] {
        state.withLock { $0.fields.keys.sorted() }
    }

    /// The keys set or removed since the record was created or fetched, in the order changed.
    public final func changedKeys() -> [String] {
        state.withLock { state in
            guard state.allFieldsChanged else { return state.changed }
            return state.fields.keys.sorted() + state.changed.filter { state.fields[$0] == nil }
        }
    }

    /// A snapshot of every field value.
    public final var fieldValues: [String: FieldValue] { state.withLock { $0.fields } }

    /// A new record with the same ID, type, system fields, values and changed keys
    /// (`NSCopying`, as `CKRecord`): `record.copy() as! Record`.
    public func copy(with zone: NSZone? = nil) -> Any { copiedRecord() }

    /// A new record with the same ID, type, system fields, values and changed keys.
    final func copiedRecord() -> Record {
        let snapshot = state.withLock { $0 }
        let record = Record.stored(recordType: recordType, recordID: recordID, systemFields: snapshot.system, fields: snapshot.fields, parent: snapshot.parent,
                                   encryptedKeys: snapshot.encrypted, jsonExtras: extrasHoldingSharing(snapshot.extras))
        record.state.withLock {
            $0.baseFields = snapshot.baseFields
            $0.baseParent = snapshot.baseParent
            $0.changed = snapshot.changed
            $0.changedSet = snapshot.changedSet
            $0.parentChanged = snapshot.parentChanged
            $0.allFieldsChanged = snapshot.allFieldsChanged
            $0.removedEncrypted = snapshot.removedEncrypted
            $0.viewer = snapshot.viewer
        }
        return record
    }

    /// The same record, with the same values and changes, in another zone: what an import
    /// writes when the input's zone is another's name for a zone of the current user.
    /// `ownerRecordName` is kept (``JSONExtras/ownerRecordName``) for export.
    package final func copy(into zoneID: RecordZone.ID, ownerRecordName: String?) -> Record {
        let snapshot = state.withLock { $0 }
        let moved = ID(recordName: recordID.recordName, zoneID: zoneID)
        let parent = snapshot.parent.map { Reference(recordID: ID(recordName: $0.recordID.recordName, zoneID: zoneID), action: $0.action) }
        let record = Record.stored(recordType: recordType, recordID: moved, systemFields: snapshot.system, fields: snapshot.fields, parent: parent,
                                   encryptedKeys: snapshot.encrypted, jsonExtras: extrasHoldingSharing(snapshot.extras))
        record.state.withLock {
            $0.baseFields = snapshot.baseFields
            $0.changed = snapshot.changed
            $0.changedSet = snapshot.changedSet
            $0.parentChanged = snapshot.parentChanged
            $0.allFieldsChanged = snapshot.allFieldsChanged
            if let ownerRecordName, $0.extras.ownerRecordName == nil { $0.extras.ownerRecordName = ownerRecordName }
        }
        return record
    }

    /// Restores what an archive says changed since the record was fetched
    /// (see `Record+SecureCoding.swift`).
    final func restoreChanges(changed: [String], baseFields: [String: FieldValue]?, allFieldsChanged: Bool, parentChanged: Bool) {
        state.withLock {
            $0.changed = changed
            $0.changedSet = Set(changed)
            $0.baseFields = baseFields
            $0.allFieldsChanged = allFieldsChanged
            $0.parentChanged = parentChanged
        }
    }

    /// A copy holding only the given keys (all keys when `keys` is `nil`), as `desiredKeys` asks.
    public final func restricted(to keys: [String]?) -> Record {
        guard let keys else { return self }
        // A query restricts every record it reads: only what the copy needs is taken, once.
        let (system, fields, parent, encrypted, storedExtras, viewer) = state.withLock { ($0.system, $0.fields, $0.parent, $0.encrypted, $0.extras, $0.viewer) }
        var kept = [String: FieldValue](minimumCapacity: keys.count)
        for key in keys { if let v = fields[key] { kept[key] = v } }
        var extras = extrasHoldingSharing(storedExtras)
        if !extras.fields.isEmpty { extras.fields = extras.fields.filter { kept[$0.key] != nil } }
        return Record.stored(recordType: recordType, recordID: recordID, systemFields: system, fields: kept, parent: parent,
                      encryptedKeys: encrypted.isEmpty ? encrypted : encrypted.filter { kept[$0] != nil }, jsonExtras: extras)
            .presented(to: viewer)
    }

    public override var description: String {
        let fields = fieldValues.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ", ")
        return "Record(\(recordType) \(recordID.recordName) tag=\(recordChangeTag ?? "-") {\(fields)})"
    }
}

// MARK: - IDs and references

extension Record {
    /// Identifies a record within a database: a record name and a zone (see ``RecordID``).
    ///
    /// ```swift
    /// let id = Record.ID(recordName: "todo-1")
    /// ```
    public typealias ID = RecordID

    /// What happens to a record when the record it references is deleted.
    ///
    /// ```swift
    /// item["list"] = Record.Reference(recordID: list.recordID, action: .deleteSelf)   // goes when the list goes
    /// ```
    public enum ReferenceAction: UInt, Hashable, Sendable, Codable {
        /// Nothing: the reference dangles.
        case none = 0
        /// The referencing record is deleted too, in the same transaction.
        case deleteSelf = 1
    }

    /// A link from one record to another in the same zone, like `CKRecord.Reference`: a
    /// ``RecordReference``.
    ///
    /// ```swift
    /// item["list"] = Record.Reference(recordID: list.recordID, action: .deleteSelf)
    /// ```
    public typealias Reference = RecordReference
}
