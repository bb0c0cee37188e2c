/// CloudKit's schema and security-role rules for the saves and deletes of one write
/// transaction, decided once above every engine.
///
/// - **Types**: a value saved into a declared field must have the field's type (a `NUMBER`
///   field takes INT64 and DOUBLE) and its encryption, else the item fails with
///   `invalidArguments` naming the field, the declared type and the given type.
/// - **Development** creates a record type, or fields of one, on first save (without indexes),
///   inside the transaction of the records: concurrent writers never disagree on a field's type.
/// - **Production** rejects an unknown type or field with CloudKit's `invalidArguments`.
/// - **Public database**: a new record needs CREATE, a stored one WRITE (``RecordAccess``);
///   a caller who is not signed in writes nothing.
///
/// The type's schema is read once per transaction; a record's fields are checked against the
/// fields the type's last records had first, so that a bulk import pays no hashing per field.
///
/// ```swift
/// var rules = RecordTypeRules(context: context)
/// if let problem = try rules.check(save, creator: existing?.creatorUserRecordID, isNew: existing == nil, in: transaction) { return .failure(problem) }
/// try rules.storeGrowth(in: transaction)
/// ```
struct RecordTypeRules {
    let context: DatabaseContext
    private var types: [TypeState] = []
    private var lastType = -1

    init(context: DatabaseContext) {
        self.context = context
    }

    /// One record type as this transaction sees it.
    private struct TypeState {
        let name: String
        /// As stored, plus what this transaction grew; `nil` while the type does not exist.
        var schema: RecordTypeSchema?
        /// The declared fields by name.
        var declared: [String: RecordTypeSchema.Field]
        /// Fields recently matched, looked through before `declared`: a type's records mostly
        /// have the same few keys, and comparing short keys costs less than hashing them.
        var recent: [RecordTypeSchema.Field]
        var grown = false
        /// The caller's access in the public database; `nil` elsewhere.
        let access: RecordAccess?
    }

    /// How many recently matched fields a type keeps for the quick look-up.
    private static let recentLimit = 12

    // MARK: - Checks

    /// The item error of saving `save` (a new record when `isNew`, else a stored record made
    /// by `creator`), or `nil`; in development, grows the type to hold the record's fields.
    mutating func check(_ save: PreparedSave, creator: Record.ID?, isNew: Bool, in transaction: any RecordWriteTransaction) throws -> StratusError? {
        if let denied = try accessDenial(save, creator: creator, isNew: isNew, in: transaction) { return denied }
        return try checkFields(save, in: transaction)
    }

    /// The security roles' error for saving `save`, or `nil`: CREATE for a new record, WRITE
    /// for a stored one, in the public database.
    mutating func accessDenial(_ save: PreparedSave, creator: Record.ID?, isNew: Bool, in transaction: any RecordWriteTransaction) throws -> StratusError? {
        guard context.scope == .public else { return nil }
        let index = try typeIndex(save.record.recordType, in: transaction)
        return types[index].access?.denial(isNew ? .create : .write, recordID: save.recordID, recordType: types[index].name, creator: creator)
    }

    /// The type error of saving `save`'s fields, or `nil`; in development, grows the type to
    /// hold the record's fields.
    mutating func checkFields(_ save: PreparedSave, in transaction: any RecordWriteTransaction) throws -> StratusError? {
        checkFields(save, type: try typeIndex(save.record.recordType, in: transaction))
    }

    /// The item error of deleting `id` (stored as `stored`, if at all), or `nil`: WRITE in the
    /// public database, where a caller who is not signed in deletes nothing.
    mutating func checkDelete(_ id: Record.ID, stored: Record?, in transaction: any RecordWriteTransaction) throws -> StratusError? {
        guard context.scope == .public else { return nil }
        guard let stored else {
            return context.userRecordName == nil ? RecordAccess(nil, context: context).denial(.write, recordID: id, recordType: "(none)", creator: nil) : nil
        }
        let index = try typeIndex(stored.recordType, in: transaction)
        return types[index].access?.denial(.write, recordID: id, recordType: stored.recordType, creator: stored.creatorUserRecordID)
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

    private mutating func checkFields(_ save: PreparedSave, type index: Int) -> StratusError? {
        let encrypted = save.encryptedKeys
        var missing: [(String, FieldValue)] = []
        for (key, value) in save.fields {
            guard let field = declaredField(key, type: index) else {
                missing.append((key, value))
                continue
            }
            if let problem = mismatch(field, value, isEncrypted: !encrypted.isEmpty && encrypted.contains(key), save: save, typeName: types[index].name) {
                return problem
            }
        }
        guard !missing.isEmpty || types[index].schema == nil else { return nil }
        if context.environment == .production {
            let name = types[index].name
            guard types[index].schema != nil else {
                return StratusError(.invalidArguments, "Cannot create new type \(name) in production schema (record '\(save.recordID.recordName)'); deploy the development schema first", recordID: save.recordID)
            }
            let field = missing.map(\.0).min()!
            return StratusError(.invalidArguments, "Cannot create or modify field '\(field)' in record '\(name)' in production schema (record '\(save.recordID.recordName)'); deploy the development schema first", recordID: save.recordID)
        }
        grow(type: index, with: missing, encrypted: encrypted)
        return nil
    }

    /// The declared field named `key`, looked for among the recently matched fields first.
    private mutating func declaredField(_ key: String, type index: Int) -> RecordTypeSchema.Field? {
        for field in types[index].recent where field.name == key { return field }
        guard let field = types[index].declared[key] else { return nil }
        if types[index].recent.count == Self.recentLimit { types[index].recent.removeFirst() }
        types[index].recent.append(field)
        return field
    }

    /// CloudKit's error for a value that the declared field cannot hold, or `nil`.
    private func mismatch(_ field: RecordTypeSchema.Field, _ value: FieldValue, isEncrypted: Bool, save: PreparedSave, typeName: String) -> StratusError? {
        let given = value.type
        let typeFits = given == field.type || (field.isNumber && Self.numberTypes(of: field.type).contains(given))
        guard !typeFits || isEncrypted != field.isEncrypted else { return nil }
        let declared = Self.typeText(field.type, encrypted: field.isEncrypted, number: field.isNumber)
        let actual = Self.typeText(given, encrypted: isEncrypted, number: false)
        return StratusError(.invalidArguments, "invalid attempt to set value type \(actual) for field '\(field.name)' for type '\(typeName)', defined to be: \(declared) (record '\(save.recordID.recordName)')", recordID: save.recordID)
    }

    /// The types a `NUMBER` field takes: INT64 and DOUBLE, or their lists.
    private static func numberTypes(of type: FieldType) -> [FieldType] {
        type.isList ? [.int64List, .doubleList] : [.int64, .double]
    }

    private static func typeText(_ type: FieldType, encrypted: Bool, number: Bool) -> String {
        (encrypted ? "ENCRYPTED " : "") + (number ? "NUMBER PREFERRED AS " : "") + type.rawValue
    }

    /// Development: adds the record's undeclared fields (and the type itself when new), without indexes.
    private mutating func grow(type index: Int, with missing: [(String, FieldValue)], encrypted: Set<String>) {
        var schema = types[index].schema ?? RecordTypeSchema(recordType: types[index].name)
        for (key, value) in missing.sorted(by: { $0.0 < $1.0 }) {
            let field = RecordTypeSchema.Field(key, type: value.type, isEncrypted: encrypted.contains(key))
            schema.fields.append(field)
            types[index].declared[key] = field
        }
        types[index].schema = schema
        types[index].grown = true
    }

    // MARK: - Types

    private mutating func typeIndex(_ name: String, in transaction: any RecordWriteTransaction) throws -> Int {
        if lastType >= 0 && types[lastType].name == name { return lastType }
        if let known = types.firstIndex(where: { $0.name == name }) {
            lastType = known
            return known
        }
        let schema = try transaction.recordTypeSchema(name)
        var declared: [String: RecordTypeSchema.Field] = [:]
        for field in schema?.fields ?? [] where field.systemField == nil { declared[field.name] = field }
        types.append(TypeState(name: name, schema: schema, declared: declared, recent: [],
                               access: context.scope == .public ? RecordAccess(schema, context: context) : nil))
        lastType = types.count - 1
        return lastType
    }
}
