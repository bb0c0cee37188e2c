/// CloudKit's schema and security-role rules for the saves and deletes of one write
/// transaction, decided once above every engine.
///
/// - **Types**: a value saved into a declared field must have the field's type (a `NUMBER`
///   field takes INT64 and DOUBLE) and its encryption, else the item fails with
///   `invalidArguments` naming the field, the declared type and the given type. An empty list
///   that came without an element type (``Record/JSONExtras/holdsUntypedEmptyList(_:)``,
///   CloudKit's `UNKNOWN_LIST`) fits every list field and creates none.
/// - **Development** creates a record type, or fields of one, on first save (without indexes),
///   inside the transaction of the records: concurrent writers never disagree on a field's type.
///   Only a record that is written grows its type: ``checkFields(_:in:)`` answers the growth a
///   save needs, and the writer applies it (``grow(_:)``) once the record is written, so that a
///   save refused for any reason (a conflict, a missing record, a size, a parent) changes no
///   schema.
/// - **Production** rejects an unknown type or field with CloudKit's `invalidArguments`.
/// - **Public database**: a new record needs CREATE, a stored one WRITE (``RecordAccess``);
///   a caller who is not signed in writes nothing. A record holding encrypted values
///   (``Record/encryptedValues``) fails with `invalidArguments` naming the field: CloudKit's
///   public database has no encrypted fields.
///
/// The type's schema is read once per transaction; a record's fields are checked against the
/// fields the type's last records had first, so that a bulk import pays no hashing per field,
/// in the one pass over its values that the bulk path makes anyway (``admitsNewRow(_:in:)``).
///
/// ```swift
/// var rules = RecordTypeRules(context: context)
/// if let denied = try rules.accessDenial(save, creator: existing?.creatorUserRecordID, isNew: existing == nil, in: transaction) { return .failure(denied) }
/// let growth = try rules.checkFields(save, in: transaction)   // .failure(problem) fails the item
/// // … the record is written …
/// if case .success(let fields?) = growth { rules.grow(fields) }
/// try rules.storeGrowth(in: transaction)
/// ```
struct RecordTypeRules {
    let context: DatabaseContext
    private var types: [TypeState] = []
    private var lastType: TypeState?
    /// Fields of ``recentType`` recently matched, looked up before its declarations: a type's
    /// records mostly have the same few short keys, whose `String` values are then bit for bit
    /// the same (short strings are stored inline), and comparing two words costs a bulk import
    /// much less than hashing every key of every record. Kept here, not in the type's object,
    /// so that the look-up pays no dynamic exclusivity check.
    private var recentType: TypeState?
    /// Per slot: a key's two words and its field's declaration (plain values, copied for free),
    /// and the key itself, kept so that the words stay this key's (a long key's words point at
    /// its storage).
    private var recentWords = [(UInt64, UInt64)](repeating: (0, 0), count: RecordTypeRules.recentSlotCount)
    private var recentKinds = [FieldKind?](repeating: nil, count: RecordTypeRules.recentSlotCount)
    private var recentKeys = [String](repeating: "", count: RecordTypeRules.recentSlotCount)
    /// The fields each record type of the stored development schema declares (as the schema
    /// limits count them), read when the transaction first grows a type.
    private var storedFieldCounts: [String: Int]?

    /// Whether the saves restore CloudKit's own records as the system made them (see
    /// ``systemCreator(of:)``).
    let writesSystemRecords: Bool

    init(context: DatabaseContext, writesSystemRecords: Bool = false) {
        self.context = context
        self.writesSystemRecords = writesSystemRecords
    }

    /// The user a save of CloudKit's own records creates `save` for, or `nil` when the save is
    /// an ordinary one: a `Users` record of the public database, named by its user's record name
    /// (`_…`), when the request writes system records (an import that keeps them). CloudKit
    /// makes one such record per user, the user as its creator, and no user's save may create
    /// one (its type grants CREATE to no role); restoring an export is the system's write: the
    /// security roles do not refuse it, and a new record's creator is the user it names unless
    /// the save keeps the creator it carries.
    func systemCreator(of save: PreparedSave) -> Record.ID? {
        guard writesSystemRecords, context.scope == .public, save.record.recordType == ContainerSchema.usersRecordType,
              save.recordID.recordName.utf8.first == UInt8(ascii: "_") else { return nil }
        return Record.ID(recordName: save.recordID.recordName)
    }

    /// One record type as this transaction sees it. A class: it is looked up and changed in
    /// place for every record, and a struct in an array would be copied on the way.
    fileprivate final class TypeState {
        let name: String
        /// As stored, plus what this transaction grew; `nil` while the type does not exist.
        var schema: RecordTypeSchema?
        /// Whether ``schema`` is set (asked for every record; reading the optional copies it).
        var exists: Bool
        /// The declared fields by name.
        var declared: [String: FieldKind]
        var grown = false
        /// Whether a declared field is encrypted (and so values need a look at their marking).
        var hasEncryptedFields: Bool
        /// The caller's access in the public database; `nil` elsewhere.
        let access: RecordAccess?

        init(name: String, schema: RecordTypeSchema?, access: RecordAccess?) {
            self.name = name
            self.schema = schema
            exists = schema != nil
            self.access = access
            var declared: [String: FieldKind] = [:]
            for field in schema?.fields ?? [] where field.systemField == nil { declared[field.name] = FieldKind(field) }
            self.declared = declared
            hasEncryptedFields = schema?.fields.contains(where: \.isEncrypted) ?? false
        }
    }

    /// What a field's declaration says about the values it takes.
    fileprivate struct FieldKind {
        let type: FieldType
        let isNumber: Bool
        let isEncrypted: Bool
        let namesPreferredType: Bool

        init(_ field: RecordTypeSchema.Field) {
            type = field.type
            isNumber = field.isNumber
            isEncrypted = field.isEncrypted
            namesPreferredType = field.namesPreferredType
        }
    }

    /// How many slots the quick look-up has (a power of two), and how many it tries per key.
    private static let recentSlotCount = 32
    private static let recentProbes = 4

    // MARK: - Checks

    /// Whether `save` may be inserted as a new record without a look at the store first (the
    /// bulk path of ``RecordWriteExecutor``): the caller may create it, its values fit the
    /// type's fields (growing the type in development), and none of them is an asset or a
    /// `.deleteSelf` reference, whose side effects need the general path. When not, the
    /// general path finds out why, and reports it.
    mutating func admitsNewRow(_ save: PreparedSave, in transaction: any RecordWriteTransaction) throws -> Bool {
        let type = try typeState(save.record.recordType, in: transaction)
        // A caller who is not signed in is refused the general way (notAuthenticated); an
        // administrator with no user (a store copy's public database) creates in bulk.
        if let access = type.access, !access.allows(.create, creator: nil) || (context.userRecordName == nil && !context.isAdministrator) { return false }
        // A system name (a user's record name among them) takes the general path's checks.
        if type.access != nil, save.recordID.recordName.utf8.first == UInt8(ascii: "_") { return false }
        if recentType !== type {
            recentType = type
            for slot in recentKinds.indices { recentKinds[slot] = nil }
        }
        // One pass over the values, which the type check needs anyway.
        let anyEncrypted = !save.encryptedKeys.isEmpty || type.hasEncryptedFields
        // A type that does not exist yet is created (development) or refused (production),
        // also for a record without fields.
        var unmatched = !type.exists
        for (key, value) in save.fields {
            let given = value.type
            if given == .asset || given == .assetList || given == .reference || given == .referenceList, value.needsStoredRecordFirst { return false }
            guard let kind = recentKind(key, of: type) else {
                unmatched = true
                continue
            }
            if given != kind.type || anyEncrypted { unmatched = true }
        }
        // A save that would grow the type takes the general path, which grows it only once the
        // record is written (a new row may turn out to exist).
        guard unmatched else { return true }
        if case .success(nil) = checkFields(save, type: type) { return true }
        return false
    }

    /// Who must have created a stored record for the caller to write it, decided without the
    /// stored record: ``WriteCondition/anyone``, its ``WriteCondition/creator(_:)`` (the caller,
    /// by `_creator`'s grant), or `nil` when the roles refuse the write whoever created it
    /// (the general save then reports why).
    mutating func writeCondition(_ save: PreparedSave, in transaction: any RecordWriteTransaction) throws -> WriteCondition? {
        guard context.scope == .public else { return .anyone }
        guard let access = try typeState(save.record.recordType, in: transaction).access else { return .anyone }
        if context.isAdministrator || access.everyRecord.isSuperset(of: .write) { return .anyone }
        guard let user = context.userRecordName, access.ownRecords.isSuperset(of: .write) else { return nil }
        return .creator(user)
    }

    /// Who may write a stored record (see ``writeCondition(_:in:)``).
    enum WriteCondition: Equatable {
        case anyone
        /// The stored record's creator only, this user.
        case creator(String)
    }

    /// Whether every value of `save` fits a field its type declares, with nothing to grow and
    /// no encryption to check: a pure check, which a save that never reads the stored record
    /// can make before writing (``checkFields(_:in:)`` finds out the rest, and what would grow).
    mutating func fitsDeclaredFields(_ save: PreparedSave, in transaction: any RecordWriteTransaction) throws -> Bool {
        let type = try typeState(save.record.recordType, in: transaction)
        guard type.exists, save.encryptedKeys.isEmpty, !type.hasEncryptedFields else { return false }
        if recentType !== type {
            recentType = type
            for slot in recentKinds.indices { recentKinds[slot] = nil }
        }
        for (key, value) in save.fields {
            guard let kind = recentKind(key, of: type), kind.type == value.type else { return false }
        }
        return true
    }

    /// The security roles' error for saving `save`, or `nil`: CREATE for a new record, WRITE
    /// for a stored one, in the public database. Restoring CloudKit's own `Users` record
    /// (``systemCreator(of:)``) creates one that no save may create: the caller's own, or as an
    /// administrator anyone's (another user's restored by anyone would let a user fill in a
    /// user record before its user first came); a stored one is written as the roles say (its
    /// user, who is its creator, or an administrator).
    mutating func accessDenial(_ save: PreparedSave, creator: Record.ID?, isNew: Bool, in transaction: any RecordWriteTransaction) throws -> StratusError? {
        guard context.scope == .public else { return nil }
        if isNew, systemCreator(of: save) != nil, context.isAdministrator || save.recordID.recordName == context.userRecordName { return nil }
        // A user record name in the default zone names that user's Users record: a record of
        // another type there would be answered as that user's own record once they come.
        // (Any system name: the user directory may give a user any name starting with '_'.)
        if isNew, !context.isAdministrator, save.record.recordType != ContainerSchema.usersRecordType, save.recordID.zoneID.isDefault,
           save.recordID.recordName.utf8.first == UInt8(ascii: "_") {
            return StratusError(.permissionFailure, "record '\(save.recordID.recordName)' of type \(save.record.recordType): in the public database's default zone a name starting with '_' is a system name, a user's record name among them, which names only that user's Users record", recordID: save.recordID)
        }
        let type = try typeState(save.record.recordType, in: transaction)
        guard var denied = type.access?.denial(isNew ? .create : .write, recordID: save.recordID, recordType: type.name, creator: creator) else { return nil }
        if isNew && type.name == ContainerSchema.usersRecordType {
            denied.message += "; CloudKit makes one Users record per user, named by the user's record name (_ and 32 hex digits), and no save creates one: a user's own is made when that user first fetches or saves it, and an import restores those of an export with --keep-system-records (RecordImporter.Options.writesSystemRecords), other users' as an administrator (--as-administrator)"
        }
        return denied
    }

    /// Whether the caller may read `stored`: a write answers one who may not with nothing of
    /// it, whatever values it sends, so that a write is no way to read or to test guesses.
    mutating func mayRead(_ stored: Record, in transaction: any RecordWriteTransaction) throws -> Bool {
        guard context.scope == .public, let access = try typeState(stored.recordType, in: transaction).access else { return true }
        return context.isAdministrator || access.allows(.read, creator: stored.systemFields.creatorUserRecordID)
    }

    /// The type error of saving `save`'s fields, or what the type must grow (in development) to
    /// hold them: `nil` when it holds them already. Nothing grows here: the writer applies the
    /// growth with ``grow(_:)`` once the record is written, so that a save that fails changes
    /// no schema.
    mutating func checkFields(_ save: PreparedSave, in transaction: any RecordWriteTransaction) throws -> Result<Growth?, StratusError> {
        let checked = checkFields(save, type: try typeState(save.record.recordType, in: transaction))
        guard case .success(let growth?) = checked else { return checked }
        if let problem = try schemaLimitProblem(of: growth, save: save, in: transaction) { return .failure(problem) }
        return checked
    }

    /// The error of a growth that would take the development schema past Stratus's limits on
    /// record types or on fields in all, as a schema file is counted (its export must read
    /// back), or `nil`. The stored schema is read once per transaction, when it first grows.
    private mutating func schemaLimitProblem(of growth: Growth, save: PreparedSave, in transaction: any RecordWriteTransaction) throws -> StratusError? {
        if storedFieldCounts == nil {
            var counts: [String: Int] = [:]
            for type in try transaction.containerSchema().recordTypes { counts[type.recordType] = type.declaredFieldCount }
            storedFieldCounts = counts
        }
        var fieldCounts = storedFieldCounts ?? [:]
        for type in types where type.grown { fieldCounts[type.name] = type.schema?.declaredFieldCount ?? 0 }
        let limits = ContainerSchema.Limits()
        let name = growth.type.name
        if !growth.type.exists, name != ContainerSchema.usersRecordType, fieldCounts[name] == nil {
            let typeCount = fieldCounts.keys.count { $0 != ContainerSchema.usersRecordType } + 1
            if typeCount > limits.recordTypes {
                return StratusError(.invalidArguments, "record '\(save.recordID.recordName)' would create record type '\(name)', the development schema's record type number \(typeCount); a schema holds at most \(limits.recordTypes) (Stratus's limit, as in a schema file; Users left out)", recordID: save.recordID)
            }
        }
        let held = fieldCounts.values.reduce(0, +)
        let total = held + growth.missing.count { !ContainerSchema.isDeclaredByCloudKit($0.0, in: name) }
        if total > limits.fields {
            return StratusError(.invalidArguments, "record '\(save.recordID.recordName)' would give the development schema \(total) fields in all its record types; a schema holds at most \(limits.fields) (Stratus's limit, as in a schema file), and it has \(held)", recordID: save.recordID)
        }
        return nil
    }

    /// The fields (and the type, when it does not exist) that a written record creates in
    /// development, as ``checkFields(_:in:)`` found them.
    struct Growth {
        fileprivate let type: TypeState
        fileprivate let missing: [(String, FieldValue)]
        fileprivate let encrypted: Set<String>
        fileprivate let numbers: Set<String>
    }

    /// Grows the type as `growth` says, after its record was written: later saves of this
    /// transaction see the fields, and ``storeGrowth(in:)`` stores them. A field another save
    /// of the transaction created in the meantime keeps its declaration.
    mutating func grow(_ growth: Growth) {
        Self.grow(growth.type, with: growth.missing.filter { growth.type.declared[$0.0] == nil }, encrypted: growth.encrypted, numbers: growth.numbers)
    }

    /// The item error of deleting `id` (stored as `stored`, if at all), or `nil`: WRITE in the
    /// public database, where a caller who is not signed in deletes nothing.
    mutating func checkDelete(_ id: Record.ID, stored: Record?, in transaction: any RecordWriteTransaction) throws -> StratusError? {
        guard context.scope == .public, !context.isAdministrator else { return nil }
        guard let stored else {
            guard context.userRecordName == nil else { return nil }
            return StratusError(.notAuthenticated, "WRITE operation not permitted on record '\(id.recordName)': deleting from the public database needs a signed-in user", recordID: id)
        }
        guard let access = try typeState(stored.recordType, in: transaction).access else { return nil }
        // Named by its type only to one who may read it.
        let namedType = try mayRead(stored, in: transaction) ? stored.recordType : nil
        return access.denial(.write, recordID: id, recordType: namedType, creator: stored.systemFields.creatorUserRecordID)
    }

    /// Whether deletes need the stored record (its type and creator) for ``checkDelete(_:stored:in:)``.
    var checksDeletes: Bool { context.scope == .public }

    /// Stores the types this transaction created or grew. Called once, before the transaction
    /// commits.
    func storeGrowth(in transaction: any RecordWriteTransaction) throws {
        for type in types where type.grown {
            if let schema = type.schema { try transaction.saveRecordTypeSchema(schema) }
        }
    }

    // MARK: - Fields

    private func checkFields(_ save: PreparedSave, type: TypeState) -> Result<Growth?, StratusError> {
        let encrypted = save.encryptedKeys
        if context.scope == .public, let key = encrypted.min() {
            return .failure(StratusError(.invalidArguments, "record '\(save.recordID.recordName)': field '\(key)' holds an encrypted value (encryptedValues), and the public database holds no encrypted fields, as in CloudKit; save it as a plain value, or save the record in the private database", recordID: save.recordID))
        }
        var missing: [(String, FieldValue)] = []
        // Undeclared fields holding an empty list of no known element type: they create no
        // field (the list has no type to give it), and production refuses them as any other.
        var untypedMissing: [String] = []
        for (key, value) in save.fields {
            guard let kind = type.declared[key] else {
                if value.isEmptyList && save.jsonExtras.holdsUntypedEmptyList(key) {
                    untypedMissing.append(key)
                } else {
                    missing.append((key, value))
                }
                continue
            }
            let given = value.type
            if given != kind.type || kind.isEncrypted || !encrypted.isEmpty,
               !(kind.type.isList && value.isEmptyList && save.jsonExtras.holdsUntypedEmptyList(key)),
               let problem = mismatch(key, kind, given, isEncrypted: !encrypted.isEmpty && encrypted.contains(key), recordID: save.recordID, typeName: type.name,
                                      untypedEmptyList: value.isEmptyList && save.jsonExtras.holdsUntypedEmptyList(key)) {
                return .failure(problem)
            }
        }
        if context.environment == .production, type.exists, missing.isEmpty, let field = untypedMissing.min() {
            return .failure(StratusError(.invalidArguments, "Cannot create or modify field '\(field)' in record '\(type.name)' in production schema (record '\(save.recordID.recordName)'); deploy the development schema first", recordID: save.recordID))
        }
        guard !missing.isEmpty || !type.exists else { return .success(nil) }
        if context.environment == .production {
            guard type.exists else {
                return .failure(StratusError(.invalidArguments, "Cannot create new type \(type.name) in production schema (record '\(save.recordID.recordName)'); deploy the development schema first", recordID: save.recordID))
            }
            let field = missing.map(\.0).min()!
            return .failure(StratusError(.invalidArguments, "Cannot create or modify field '\(field)' in record '\(type.name)' in production schema (record '\(save.recordID.recordName)'); deploy the development schema first", recordID: save.recordID))
        }
        let limit = ContainerSchema.Limits().fieldsPerRecordType
        let held = type.declared.keys.count { !ContainerSchema.isDeclaredByCloudKit($0, in: type.name) }
        if held + missing.count > limit {
            // A schema file could not declare the type any more, so neither could its export.
            return .failure(StratusError(.invalidArguments, "record '\(save.recordID.recordName)' would give record type '\(type.name)' \(held + missing.count) fields; a record type holds at most \(limit) (Stratus's limit, as in a schema file), and its development schema has \(held)", recordID: save.recordID))
        }
        // A value typed NUMBER_INT64 or NUMBER_DOUBLE (CloudKit's, and Stratus's export, of a
        // NUMBER field) grows a NUMBER field, which takes both: one typed by its first value
        // would refuse the other kind in the rest of the same export.
        let numbers = save.jsonExtras.fields.isEmpty ? [] : Set(missing.map(\.0).filter { save.jsonExtras.holdsNumberTypedValue($0) })
        return .success(Growth(type: type, missing: missing, encrypted: encrypted, numbers: numbers))
    }

    /// The declaration of the field named `key` of ``recentType``, looked for among the
    /// recently matched fields first.
    @inline(__always)
    private mutating func recentKind(_ key: String, of type: TypeState) -> FieldKind? {
        // Strings with the same two words are equal (the standard library's own first test
        // of ==); any other key takes the declarations' hashed look-up.
        guard MemoryLayout<String>.size == 16 else { return type.declared[key] }
        let words = withUnsafeBytes(of: key) { ($0.load(as: UInt64.self), $0.load(fromByteOffset: 8, as: UInt64.self)) }
        var slot = Int(truncatingIfNeeded: ((words.0 ^ words.1 &* 31) &* 0x9E37_79B9_7F4A_7C15) >> 59) & (Self.recentSlotCount - 1)
        // A few slots are probed, so that keys whose words land in one slot do not keep
        // evicting each other; a miss takes the first free slot, or the last one probed.
        for probe in 0..<Self.recentProbes {
            guard let kind = recentKinds[slot] else { break }
            if recentWords[slot] == words { return kind }
            if probe < Self.recentProbes - 1 { slot = (slot + 1) & (Self.recentSlotCount - 1) }
        }
        guard let kind = type.declared[key] else { return nil }
        recentWords[slot] = words
        recentKinds[slot] = kind
        recentKeys[slot] = key
        return kind
    }

    /// CloudKit's error for a value that the declared field cannot hold, or `nil`.
    private func mismatch(_ key: String, _ kind: FieldKind, _ given: FieldType, isEncrypted: Bool, recordID: Record.ID, typeName: String,
                          untypedEmptyList: Bool = false) -> StratusError? {
        let typeFits = given == kind.type || (kind.isNumber && Self.numberTypes(of: kind.type).contains(given))
        guard !typeFits || isEncrypted != kind.isEncrypted else { return nil }
        let declared = ContainerSchema.declaredType(RecordTypeSchema.Field(key, type: kind.type, isEncrypted: kind.isEncrypted, isNumber: kind.isNumber,
                                                                           namesPreferredType: kind.namesPreferredType))
        // An empty list that named no type (`UNKNOWN_LIST`) is no list of strings, whatever type stands in for it.
        let actual = (isEncrypted ? "ENCRYPTED " : "") + (untypedEmptyList ? "UNKNOWN_LIST (an empty list)" : given.rawValue)
        return StratusError(.invalidArguments, "invalid attempt to set value type \(actual) for field '\(key)' for type '\(typeName)', defined to be: \(declared) (record '\(recordID.recordName)')", recordID: recordID)
    }

    /// The types a `NUMBER` field takes: INT64 and DOUBLE, or their lists.
    private static func numberTypes(of type: FieldType) -> [FieldType] {
        type.isList ? [.int64List, .doubleList] : [.int64, .double]
    }

    /// Development: adds the record's undeclared fields (and the type itself when new), without
    /// indexes; those in `numbers` as NUMBER fields.
    private static func grow(_ type: TypeState, with missing: [(String, FieldValue)], encrypted: Set<String>, numbers: Set<String>) {
        var schema = type.schema ?? RecordTypeSchema(recordType: type.name)
        for (key, value) in missing.sorted(by: { $0.0 < $1.0 }) {
            // A NUMBER without a preferred type has the type a schema file's bare NUMBER reads
            // as (INT64, or its list), whatever the first value was, so its export reads back.
            let isNumber = numbers.contains(key)
            let fieldType = isNumber ? (value.type.isList ? FieldType.int64List : .int64) : value.type
            let field = RecordTypeSchema.Field(key, type: fieldType, isEncrypted: encrypted.contains(key), isNumber: isNumber,
                                               namesPreferredType: !isNumber)
            schema.fields.append(field)
            type.declared[key] = FieldKind(field)
            if field.isEncrypted { type.hasEncryptedFields = true }
        }
        type.schema = schema
        type.exists = true
        type.grown = true
    }

    // MARK: - Types

    @inline(__always)
    private mutating func typeState(_ name: String, in transaction: any RecordWriteTransaction) throws -> TypeState {
        if let lastType, lastType.name == name { return lastType }
        return try loadTypeState(name, in: transaction)
    }

    private mutating func loadTypeState(_ name: String, in transaction: any RecordWriteTransaction) throws -> TypeState {
        if let known = types.first(where: { $0.name == name }) {
            lastType = known
            return known
        }
        // Every container has CloudKit's `Users` type, stored or not; a stored share type has
        // CloudKit's share fields, also one stored before they were filled in.
        var schema = try transaction.recordTypeSchema(name) ?? (name == ContainerSchema.usersRecordType ? ContainerSchema.defaultUsersRecordType : nil)
        if name == Record.SystemType.share { schema = schema.map(ContainerSchema.withShareFields) }
        let type = TypeState(name: name, schema: schema, access: context.scope == .public ? RecordAccess(schema, context: context) : nil)
        types.append(type)
        lastType = type
        return type
    }
}
