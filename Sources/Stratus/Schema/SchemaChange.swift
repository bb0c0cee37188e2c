/// One difference between two container schemas, as `stratus schema diff` prints it.
///
/// ```swift
/// for change in production.changes(to: development) where change.isDestructive { print("deploy would fail:", change) }
/// ```
public enum SchemaChange: Hashable, Sendable, CustomStringConvertible {
    case roleAdded(SecurityRole)
    case roleRemoved(SecurityRole)
    case recordTypeAdded(String)
    case recordTypeRemoved(String)
    case fieldAdded(recordType: String, RecordTypeSchema.Field)
    case fieldRemoved(recordType: String, RecordTypeSchema.Field)
    /// The field's type, encryption or `NUMBER` preference changed.
    case fieldRetyped(recordType: String, from: RecordTypeSchema.Field, to: RecordTypeSchema.Field)
    /// Only the field's indexes changed.
    case fieldIndexesChanged(recordType: String, from: RecordTypeSchema.Field, to: RecordTypeSchema.Field)
    case compoundIndexesChanged(recordType: String, from: [RecordTypeSchema.CompoundIndex], to: [RecordTypeSchema.CompoundIndex])
    case grantsChanged(recordType: String, from: [SecurityRole: RecordPermissions], to: [SecurityRole: RecordPermissions])
    /// The grants of a record type the change adds (who may use it in the public database).
    case grantsOfAddedType(recordType: String, [SecurityRole: RecordPermissions])

    /// Whether the change removes a record type or a field, or changes a field's type: what
    /// CloudKit's deploy refuses, since production's records may hold them. A system field
    /// (`"___createTime"`, …) is never removed: every type has it, and a schema that leaves it
    /// out only drops its indexes, as any field's indexes may change.
    public var isDestructive: Bool {
        switch self {
        case .recordTypeRemoved, .fieldRetyped: true
        case .fieldRemoved(_, let field): field.systemField == nil
        default: false
        }
    }

    public var description: String {
        switch self {
        case .roleAdded(let role): "+ ROLE \(Self.quoted(role.name))"
        case .roleRemoved(let role): "- ROLE \(Self.quoted(role.name))"
        case .recordTypeAdded(let type): "+ RECORD TYPE \(Self.quoted(type))"
        case .recordTypeRemoved(let type): "- RECORD TYPE \(Self.quoted(type))"
        case .fieldAdded(let type, let field): "+ \(Self.quoted(type)).\(Self.text(field))"
        case .fieldRemoved(let type, let field): "- \(Self.quoted(type)).\(Self.text(field))"
        case .fieldRetyped(let type, let old, let new): "~ \(Self.quoted(type)).\(Self.text(old)) -> \(Self.text(new))"
        case .fieldIndexesChanged(let type, let old, let new): "~ \(Self.quoted(type)).\(Self.text(old)) -> \(Self.text(new))"
        case .compoundIndexesChanged(let type, let old, let new): "~ \(Self.quoted(type)) compound indexes \(Self.text(old)) -> \(Self.text(new))"
        case .grantsChanged(let type, let old, let new): "~ \(Self.quoted(type)) grants \(Self.text(old)) -> \(Self.text(new))"
        case .grantsOfAddedType(let type, let grants): "+ \(Self.quoted(type)) grants \(Self.text(grants))"
        }
    }

    /// Words of the schema language that stand for themselves wherever they appear, so a name
    /// spelled like one must be quoted. CloudKit's documentation lists these five; every other
    /// keyword can be a name (real schemas name fields `type`, `order` and `timestamp`, and a
    /// record type `List`).
    package static let reservedWords: Set<String> = ["GRANT", "PREFERRED", "QUERYABLE", "SORTABLE", "SEARCHABLE"]

    /// A name as the schema language writes it: bare when it is an identifier (an ASCII letter,
    /// then letters, digits and `_`) that is not a reserved word, else in double quotes (system
    /// fields, `_world`, `"cloudkit.share"`, `"test role"`).
    package static func quoted(_ name: String) -> String {
        let bytes = name.utf8
        func isLetter(_ byte: UInt8) -> Bool { (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) }
        let plain = bytes.first.map(isLetter) == true && bytes.allSatisfy { isLetter($0) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x5F }
            && !reservedWords.contains(name.uppercased())
        return plain ? name : "\"\(name)\""
    }

    /// A field as the schema language declares it: `title STRING QUERYABLE SORTABLE`.
    /// A system field is named and typed as a schema file declares it: `"___recordID" REFERENCE`.
    static func text(_ field: RecordTypeSchema.Field) -> String {
        var words: [String]
        if let system = SystemField(rawValue: field.name) {
            words = ["\"\(system.cloudKitName)\"", system.cloudKitType.rawValue]
        } else {
            words = [quoted(field.name), field.schemaLanguageType]
        }
        if field.indexes.contains(.queryable) { words.append("QUERYABLE") }
        if field.indexes.contains(.searchable) { words.append("SEARCHABLE") }
        if field.indexes.contains(.sortable) { words.append("SORTABLE") }
        return words.joined(separator: " ")
    }

    private static func text(_ indexes: [RecordTypeSchema.CompoundIndex]) -> String {
        let parts = indexes.map { ($0.equalityFields + ($0.sortField.map { ["sort \($0)"] } ?? [])).joined(separator: ", ") }.sorted()
        return "[" + parts.map { "(\($0))" }.joined(separator: " ") + "]"
    }

    private static func text(_ grants: [SecurityRole: RecordPermissions]) -> String {
        let granting = grants.filter { !$0.value.isEmpty }
        return granting.isEmpty ? "(none: not usable in the public database)" : granting.keys.sorted().map { "\($0.name): \(granting[$0]!)" }.joined(separator: "; ")
    }
}

extension ContainerSchema {
    /// What changes from this schema to `target`, roles first, then record types and their
    /// fields in name order.
    ///
    /// ```swift
    /// let changes = try await container.schema().changes(to: fileSchema)
    /// ```
    public func changes(to target: ContainerSchema) -> [SchemaChange] {
        var changes: [SchemaChange] = []
        changes += target.roles.subtracting(roles).sorted().map(SchemaChange.roleAdded)
        changes += roles.subtracting(target.roles).sorted().map(SchemaChange.roleRemoved)
        let names = Set(recordTypes.map(\.recordType)).union(target.recordTypes.map(\.recordType)).sorted()
        for name in names {
            switch (recordType(name), target.recordType(name)) {
            case (nil, let new?):
                changes.append(.recordTypeAdded(name))
                changes += new.fields.sorted { $0.name < $1.name }.map { .fieldAdded(recordType: name, $0) }
                // Who may use the new type goes to review with it, as a change of an old one's does.
                if !new.compoundIndexes.isEmpty { changes.append(.compoundIndexesChanged(recordType: name, from: [], to: new.compoundIndexes)) }
                changes.append(.grantsOfAddedType(recordType: name, new.effectiveGrants))
            case (_?, nil):
                changes.append(.recordTypeRemoved(name))
            case (let old?, let new?):
                changes += Self.fieldChanges(name, from: old, to: new)
                if Set(old.compoundIndexes) != Set(new.compoundIndexes) {
                    changes.append(.compoundIndexesChanged(recordType: name, from: old.compoundIndexes, to: new.compoundIndexes))
                }
                if old.effectiveGrants != new.effectiveGrants {
                    changes.append(.grantsChanged(recordType: name, from: old.effectiveGrants, to: new.effectiveGrants))
                }
            case (nil, nil): break
            }
        }
        return changes
    }

    private static func fieldChanges(_ type: String, from old: RecordTypeSchema, to new: RecordTypeSchema) -> [SchemaChange] {
        var changes: [SchemaChange] = []
        let names = Set(old.fields.map(\.name)).union(new.fields.map(\.name)).sorted()
        // Every record has its system fields: one a side leaves out is there without indexes, so
        // declaring it or leaving it out only adds or drops its indexes.
        func field(_ name: String, of schema: RecordTypeSchema, else other: RecordTypeSchema) -> RecordTypeSchema.Field? {
            if let field = schema.field(name) { return field }
            guard var bare = other.field(name), bare.systemField != nil else { return nil }
            bare.indexes = []
            return bare
        }
        for name in names {
            switch (field(name, of: old, else: new), field(name, of: new, else: old)) {
            case (nil, let added?): changes.append(.fieldAdded(recordType: type, added))
            case (let removed?, nil): changes.append(.fieldRemoved(recordType: type, removed))
            case (let before?, let after?) where before != after:
                // A NUMBER's preferred type, once named, stays (CloudKit: "future definitions
                // must not change that type"); leaving it out of a later declaration changes it.
                let preferenceDropped = before.isNumber && before.namesPreferredType && !after.namesPreferredType
                // A bare NUMBER names no preferred type (the type it is kept with is a
                // placeholder): naming one for the first time, either one, changes nothing.
                let preferenceNamed = before.isNumber && !before.namesPreferredType && after.isNumber
                let typeChanged = preferenceNamed ? before.type.isList != after.type.isList : before.type != after.type
                let retyped = typeChanged || before.isEncrypted != after.isEncrypted || before.isNumber != after.isNumber || preferenceDropped
                changes.append(retyped ? .fieldRetyped(recordType: type, from: before, to: after) : .fieldIndexesChanged(recordType: type, from: before, to: after))
            default: break
            }
        }
        return changes
    }
}

extension RecordTypeSchema {
    /// The grants that apply, as ``RecordAccess`` applies them: the roles that may do something
    /// (a role granted nothing is as good as one not named). `Users` is CloudKit's own type: one
    /// declared without grants has CloudKit's grants for it.
    package var effectiveGrants: [SecurityRole: RecordPermissions] {
        let granting = grants.filter { !$0.value.isEmpty }
        if granting.isEmpty && recordType == ContainerSchema.usersRecordType { return ContainerSchema.defaultUsersRecordType.grants }
        return granting
    }
}
