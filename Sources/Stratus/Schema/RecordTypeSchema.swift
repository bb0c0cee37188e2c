import Foundation

/// One record type of a container's schema: its fields and their indexes, which security roles
/// may do what with its records, and the system fields it indexes.
///
/// A store builds real indexes for the indexed fields, and queries that filter or sort on them
/// use them. Queries on fields without an index still work, by scanning. A compound index serves
/// queries that test some fields for equality and sort by another, at the cost of one page
/// whatever the page number.
///
/// ```swift
/// var schema = RecordTypeSchema(recordType: "Todo")
/// schema.addField("title", type: .string, indexes: [.queryable, .searchable])
/// schema.addField("createdAt", type: .timestamp, indexes: [.sortable])
/// schema.addField("secret", type: .string, isEncrypted: true)
/// schema.compoundIndexes = [.init(equalityFields: ["list"], sortField: "createdAt")]
/// schema.grants = RecordTypeSchema.publicDatabaseGrants
/// try await container.saveSchema(schema)
/// ```
///
/// System fields are indexed only when a schema asks, as in CloudKit's schema (where
/// `"___createTime"`, `"___modTime"`, `"___recordID"`, `"___createdBy"` and `"___modifiedBy"`
/// can be made queryable or sortable): declare a TIMESTAMP field named `creationDate` or
/// `modificationDate`, a STRING field named `recordName`, or a REFERENCE field named
/// `creatorUserRecordID` or `lastModifiedUserRecordID` (``SystemField`` maps the names). Every
/// record pays for each index on every write, so a store keeps none it was not asked for.
///
/// ```swift
/// schema.addField("modificationDate", type: .timestamp, indexes: [.sortable])
/// schema.compoundIndexes.append(.init(equalityFields: ["list"], sortField: "creationDate"))
/// ```
///
/// Listing a type's records (`TRUEPREDICATE`, or conditions no index serves) reads its zone in
/// record-name order and skips the records of other types. Where a zone holds many records
/// of other types, declare `recordName` queryable: the type then gets an index of its own.
///
/// ```swift
/// schema.addField("recordName", type: .string, indexes: [.queryable])
/// ```
///
/// Two schemas are equal when they declare the same fields, compound indexes and grants, in
/// whatever order: as in CloudKit, the order of declarations carries no meaning.
public struct RecordTypeSchema: Hashable, Sendable {
    /// The record type the schema declares.
    public let recordType: String
    /// The declared fields, and the system fields the type indexes (by their Stratus names).
    public var fields: [Field]
    /// Indexes over several fields, for queries that filter on some and sort by another.
    public var compoundIndexes: [CompoundIndex]
    /// What each security role may do with records of this type in the public database.
    /// A role that is not listed may do nothing, and a type that grants nothing is unusable
    /// there, as a schema file's type without `GRANT` lines is in CloudKit; a type made without
    /// naming grants (in Swift, or by development as records are saved) has CloudKit's defaults
    /// (``defaultGrants(forRecordType:)``). CloudKit merges several grants to one role.
    public var grants: [SecurityRole: RecordPermissions]

/// A record type's schema, as `RECORD TYPE` declares it in CloudKit's schema language.
///
/// ```swift
/// let todo = RecordTypeSchema(recordType: "Todo", fields: [
///     .init("title", type: .string, indexes: [.queryable, .searchable]),
///     .init("createdAt", type: .timestamp, indexes: [.sortable]),
/// ])
/// ```
    ///
    /// Without `grants`, the type has the grants CloudKit gives the types it makes
    /// (``defaultGrants(forRecordType:)``); pass `[:]` for a type the public database may not use.
    public init(
        recordType: String, fields: [Field] = [], compoundIndexes: [CompoundIndex] = [],
        grants: [SecurityRole: RecordPermissions]? = nil
    ) {
        self.recordType = recordType
        self.fields = fields
        self.compoundIndexes = compoundIndexes
        self.grants = grants ?? Self.defaultGrants(forRecordType: recordType)
    }

    /// A field, its type and its indexes.
    ///
    /// ```swift
    /// if let due = schema.field("due"), due.indexes.contains(.sortable) { print("due is sortable") }
    /// ```
    public struct Field: Hashable, Sendable {
        /// The field's name.
        public let name: String
        /// The type every value of the field has.
        public let type: FieldType
        /// The field's indexes: which conditions, sorts and searches on it read an index.
        public var indexes: Indexes
        /// Whether CloudKit encrypts the field's values end to end (`ENCRYPTED` in the schema
        /// language). Encrypted fields have no index; REFERENCE and ASSET fields cannot be
        /// encrypted.
        public let isEncrypted: Bool
        /// Whether CloudKit declares the field as `NUMBER PREFERRED AS` ``type``: a field it
        /// created from a number before the type was fixed. ``type`` is then INT64 or DOUBLE
        /// (or a list of them), and the field takes values of both.
        public let isNumber: Bool
        /// For a ``isNumber`` field, whether its declaration names the preferred type
        /// (`NUMBER PREFERRED AS DOUBLE`). A bare `NUMBER` names none: its ``type`` is INT64
        /// (or a list of INT64), so that an untyped number is read as INT64 when it is an
        /// integer and as DOUBLE otherwise, and the schema language writes it back bare.
        ///
        /// ```swift
        /// let score = RecordTypeSchema.Field("score", type: .int64, isNumber: true, namesPreferredType: false)   // score NUMBER
        /// ```
        public let namesPreferredType: Bool

        /// A field named `name` of `type`, with `indexes`; `isEncrypted` for `ENCRYPTED`, and
        /// `isNumber` for a `NUMBER` field (`namesPreferredType` when it says `PREFERRED AS`).
        ///
        /// ```swift
        /// let due = RecordTypeSchema.Field("due", type: .timestamp, indexes: [.queryable, .sortable])
        /// ```
        public init(_ name: String, type: FieldType, indexes: Indexes = [], isEncrypted: Bool = false, isNumber: Bool = false, namesPreferredType: Bool = true) {
            self.name = name
            // A bare NUMBER names no preferred type: it has one form, whatever placeholder is
            // given (the schema language's reader gives INT64), or a type and its own export
            // would differ.
            self.type = isNumber && !namesPreferredType && (type == .double || type == .doubleList) ? (type.isList ? .int64List : .int64) : type
            self.indexes = indexes
            self.isEncrypted = isEncrypted
            self.isNumber = isNumber
            self.namesPreferredType = namesPreferredType || !isNumber
        }

        /// How the schema language declares the field's type before its element type, for a
        /// NUMBER: `NUMBER PREFERRED AS ` (the type follows), or `NUMBER` (nothing follows).
        package var numberDeclaration: String? {
            guard isNumber else { return nil }
            return namesPreferredType ? "NUMBER PREFERRED AS " : "NUMBER"
        }

        /// The field's type as the schema language writes it (`LIST<ENCRYPTED STRING>`,
        /// `NUMBER PREFERRED AS INT64`, `ASSET`), which names types otherwise than record JSON
        /// (`STRING_LIST`, `ASSETID`): what schema files, diffs and schema errors show.
        package var schemaLanguageType: String {
            let element = type.isList ? FieldType(rawValue: String(type.rawValue.dropLast("_LIST".count))) ?? type : type
            let keyword = element.schemaLanguageKeyword
            var text = numberDeclaration.map { namesPreferredType ? $0 + keyword : $0 } ?? keyword
            if isEncrypted { text = "ENCRYPTED " + text }
            return type.isList ? "LIST<\(text)>" : text
        }

        /// The system field this declaration indexes, when its name is one.
        public var systemField: SystemField? { SystemField(rawValue: name) }
    }

    /// The kinds of index a field can have, as in CloudKit's schema editor.
    public struct Indexes: OptionSet, Hashable, Sendable, Codable {
        /// The indexes as bits.
        public let rawValue: Int
        /// Indexes from bits, as an `OptionSet`.
        ///
        /// ```swift
        /// let both: RecordTypeSchema.Indexes = [.queryable, .sortable]
        /// ```
        public init(rawValue: Int) { self.rawValue = rawValue }
        /// Equality and range conditions on the field use an index.
        public static let queryable = Indexes(rawValue: 1 << 0)
        /// Sorting by the field uses an index, and so do range conditions (`<`, `<=`, `>`, `>=`,
        /// `BETWEEN`): production admits those with either index, as CloudKit's SORTABLE is its
        /// index "optimizing for range searches".
        public static let sortable = Indexes(rawValue: 1 << 1)
        /// `self CONTAINS` searches the field's words through an index.
        public static let searchable = Indexes(rawValue: 1 << 2)
    }

    /// One index over several fields: equality on `equalityFields`, then order by `sortField`.
    public struct CompoundIndex: Hashable, Sendable, Codable {
        /// The fields the index's queries compare for equality.
        public let equalityFields: [String]
        /// The field the index orders by after its equality fields; nil: none.
        public let sortField: String?

        /// An index for queries that compare `equalityFields` for equality and sort by `sortField`.
        ///
        /// ```swift
        /// let byListThenDue = RecordTypeSchema.CompoundIndex(equalityFields: ["list"], sortField: "due")
        /// ```
        public init(equalityFields: [String], sortField: String? = nil) {
            self.equalityFields = equalityFields
            self.sortField = sortField
        }
    }

    /// Adds a field, or replaces the one with the same name.
    public mutating func addField(_ name: String, type: FieldType, indexes: Indexes = [], isEncrypted: Bool = false) {
        fields.removeAll { $0.name == name }
        fields.append(Field(name, type: type, indexes: indexes, isEncrypted: isEncrypted))
    }

    /// The field named `name`, if declared.
    public func field(_ name: String) -> Field? { fields.first { $0.name == name } }

    /// Adds `permissions` to what `role` may do with records of this type.
    ///
    /// ```swift
    /// schema.grant([.create, .write], to: "moderator")
    /// ```
    public mutating func grant(_ permissions: RecordPermissions, to role: SecurityRole) {
        grants[role, default: []].formUnion(permissions)
    }

    /// The grants CloudKit gives a type it makes (in the dashboard, or as development saves a
    /// record of a new type): its creator may write, signed-in users may create, everyone may read.
    public static let publicDatabaseGrants: [SecurityRole: RecordPermissions] = [.creator: .write, .authenticated: .create, .world: .read]

    /// The grants CloudKit gives the type `recordType` when it makes it: those of `Users`
    /// (``ContainerSchema/defaultUsersRecordType``) for `Users`, else ``publicDatabaseGrants``.
    ///
    /// ```swift
    /// RecordTypeSchema.defaultGrants(forRecordType: "Note")[.world]   // .read
    /// ```
    public static func defaultGrants(forRecordType recordType: String) -> [SecurityRole: RecordPermissions] {
        recordType == ContainerSchema.usersRecordType ? ContainerSchema.defaultUsersRecordType.grants : publicDatabaseGrants
    }

    /// Names of the fields whose words `self CONTAINS` searches through the index.
    public var searchableFields: [String] { fields.filter { $0.indexes.contains(.searchable) }.map(\.name) }

    /// The system fields a schema can index, by the names queries use for them, with the type
    /// a declaration gives them.
    public static let indexableSystemFields: [String: FieldType] = [
        "creationDate": .timestamp, "modificationDate": .timestamp, "recordName": .string,
        "creatorUserRecordID": .reference, "lastModifiedUserRecordID": .reference,
    ]

    /// Whether `name` is one of CloudKit's own record types, which schemas of containers that
    /// share records declare: dotted, under `cloudkit.` (`cloudkit.share`). Their fields have
    /// dotted names too (`cloudkit.title`); an app's types and fields never do.
    ///
    /// ```swift
    /// RecordTypeSchema.isCloudKitRecordType("cloudkit.share")   // true
    /// RecordTypeSchema.isCloudKitRecordType("a.b")              // false
    /// ```
    public static func isCloudKitRecordType(_ name: String) -> Bool {
        name.hasPrefix("cloudkit.") && Naming.isSystemIdentifier(name)
    }

    /// Checks names, types, encryption and that compound indexes name declared scalar fields.
    ///
    /// ```swift
    /// try schema.validate()
    /// ```
    ///
    /// - Throws: ``StratusError`` `invalidArguments` naming the problem.
    public func validate() throws {
        // CloudKit's own types (`cloudkit.share`) have dotted names, and so do their fields.
        let isCloudKitType = Self.isCloudKitRecordType(recordType)
        if !isCloudKitType { try Naming.checkIdentifier(recordType, kind: "record type") }
        var seen: Set<String> = []
        for field in fields {
            if isCloudKitType && Naming.isSystemIdentifier(field.name) {
                // Engines build indexes from plain identifiers only, and CloudKit indexes none of these.
                guard field.indexes.isEmpty else {
                    throw StratusError(.invalidArguments, "field '\(field.name)' of \(recordType) is one of CloudKit's own, and takes no index")
                }
                // Shares CloudKit makes hold these as it types them.
                if recordType == Record.SystemType.share, let fixed = ContainerSchema.shareFields.first(where: { $0.name == field.name }),
                   field.type != fixed.type || field.isEncrypted || field.isNumber {
                    throw StratusError(.invalidArguments, "field '\(field.name)' of \(recordType) is one of CloudKit's own, always \(fixed.type.rawValue)")
                }
            } else if let systemType = Self.indexableSystemFields[field.name] {
                guard field.type == systemType, !field.indexes.contains(.searchable), !field.isEncrypted, !field.isNumber else {
                    throw StratusError(.invalidArguments, "the system field '\(field.name)' of \(recordType) can only be declared as a queryable or sortable \(systemType.rawValue)")
                }
            } else {
                try Naming.checkFieldKey(field.name)
            }
            guard seen.insert(field.name).inserted else {
                throw StratusError(.invalidArguments, "field '\(field.name)' of \(recordType) is declared twice")
            }
            if field.indexes.contains(.searchable) && field.type != .string && field.type != .stringList {
                throw StratusError(.invalidArguments, "field '\(field.name)' of \(recordType) is \(field.type.rawValue); only STRING and STRING_LIST fields can be searchable")
            }
            if field.indexes.contains(.sortable) && field.type.isList {
                throw StratusError(.invalidArguments, "field '\(field.name)' of \(recordType) is a list; lists cannot be sortable")
            }
            if field.isEncrypted {
                if [.reference, .referenceList, .asset, .assetList].contains(field.type) {
                    throw StratusError(.invalidArguments, "field '\(field.name)' of \(recordType) is \(field.type.rawValue), which CloudKit does not encrypt")
                }
                if !field.indexes.isEmpty {
                    throw StratusError(.invalidArguments, "field '\(field.name)' of \(recordType) is encrypted; CloudKit has no index on encrypted fields")
                }
            }
            if field.isNumber && field.isEncrypted {
                throw StratusError(.invalidArguments, "field '\(field.name)' of \(recordType) is an encrypted NUMBER, which the schema language cannot declare (NUMBER cannot be ENCRYPTED); declare it ENCRYPTED INT64 or ENCRYPTED DOUBLE")
            }
            if field.isNumber && ![.int64, .double, .int64List, .doubleList].contains(field.type) {
                throw StratusError(.invalidArguments, "field '\(field.name)' of \(recordType) is a NUMBER, which CloudKit prefers as INT64 or DOUBLE, not \(field.type.rawValue)")
            }
        }
        for index in compoundIndexes {
            for name in index.equalityFields + (index.sortField.map { [$0] } ?? []) where Self.indexableSystemFields[name] == nil {
                if Naming.isSystemIdentifier(name) {
                    throw StratusError(.invalidArguments, "the compound index of \(recordType) names '\(name)', one of CloudKit's own fields, which take no index")
                }
                guard let field = field(name) else {
                    throw StratusError(.invalidArguments, "the compound index of \(recordType) names '\(name)', which the schema does not declare")
                }
                if field.type.isList || field.type == .location || field.type == .asset || field.type == .bytes {
                    throw StratusError(.invalidArguments, "the compound index of \(recordType) names '\(name)', a \(field.type.rawValue) field; only STRING, INT64, DOUBLE, TIMESTAMP and REFERENCE fields can be in one")
                }
                if field.isEncrypted {
                    throw StratusError(.invalidArguments, "the compound index of \(recordType) names '\(name)', an encrypted field; CloudKit has no index on encrypted fields")
                }
            }
            if index.equalityFields.isEmpty && index.sortField == nil {
                throw StratusError(.invalidArguments, "a compound index of \(recordType) names no field")
            }
        }
        for role in grants.keys {
            try role.validate()
        }
    }
}

extension FieldType {
    /// The keyword the schema language names a scalar type by: its record JSON name, but
    /// `ASSET` for `ASSETID` (a list type's is its element's, inside `LIST<…>`).
    package var schemaLanguageKeyword: String { self == .asset ? "ASSET" : rawValue }
}
