/// A container's whole schema: the security roles it creates and its record types, as a
/// `.ckdb` file (`cktool export-schema`) describes it.
///
/// ```swift
/// var schema = ContainerSchema(roles: ["moderator"])
/// var post = RecordTypeSchema(recordType: "Post", grants: RecordTypeSchema.publicDatabaseGrants)
/// post.addField("title", type: .string, indexes: [.queryable, .searchable])
/// post.grant([.create, .write], to: "moderator")
/// schema.recordTypes.append(post)
/// schema.includeUsersRecordType()
/// try schema.validate()
/// ```
///
/// Two container schemas are equal when they create the same roles and declare equal record
/// types, in whatever order.
public struct ContainerSchema: Hashable, Sendable {
    /// The roles the schema creates; CloudKit's own (``SecurityRole/systemRoles``) always
    /// exist and are not listed.
    public var roles: Set<SecurityRole>
    public var recordTypes: [RecordTypeSchema]

    public init(roles: Set<SecurityRole> = [], recordTypes: [RecordTypeSchema] = []) {
        self.roles = roles
        self.recordTypes = recordTypes
    }

    /// The record type named `name`, if declared.
    public func recordType(_ name: String) -> RecordTypeSchema? { recordTypes.first { $0.recordType == name } }

    /// The record type of CloudKit's user records, which every container has.
    public static let usersRecordType = "Users"

    /// The field of `Users` records that lists a user's roles, which CloudKit always declares.
    public static let usersRolesField = RecordTypeSchema.Field("roles", type: .int64List)

    /// Whether `field` can be the `roles` field of `Users`: CloudKit's INT64_LIST, which a schema
    /// may index but not retype.
    static func isUsersRolesField(_ field: RecordTypeSchema.Field) -> Bool {
        field.name == usersRolesField.name && field.type == usersRolesField.type && !field.isEncrypted && !field.isNumber
    }

    /// Whether CloudKit declares the field itself, so that every export shows it whether or
    /// not a schema file named it: a system field (`recordName`, `creationDate`, …) of any
    /// type, and the `roles` field of `Users`. Limits on what a schema declares leave these out.
    ///
    /// ```swift
    /// ContainerSchema.isDeclaredByCloudKit("creationDate", in: "Note")   // true
    /// ContainerSchema.isDeclaredByCloudKit("title", in: "Note")          // false
    /// ```
    public static func isDeclaredByCloudKit(_ field: String, in recordType: String) -> Bool {
        SystemField(rawValue: field) != nil || (recordType == usersRecordType && field == usersRolesField.name)
            || (recordType == Record.SystemType.share && shareFields.contains { $0.name == field })
    }

    /// The fields CloudKit's share type (`"cloudkit.share"`) always has, as its exports show
    /// them: `"cloudkit.thumbnailImageData" BYTES`, `"cloudkit.title" STRING`, `"cloudkit.type" STRING`.
    ///
    /// ```swift
    /// ContainerSchema.shareFields.map(\.name)   // ["cloudkit.thumbnailImageData", "cloudkit.title", "cloudkit.type"]
    /// ```
    public static let shareFields = [
        RecordTypeSchema.Field("cloudkit.thumbnailImageData", type: .bytes),
        RecordTypeSchema.Field("cloudkit.title", type: .string),
        RecordTypeSchema.Field("cloudkit.type", type: .string),
    ]

    /// The `Users` type as CloudKit creates it: `roles LIST<INT64>`, written by its creator,
    /// read by everyone.
    public static let defaultUsersRecordType = RecordTypeSchema(
        recordType: usersRecordType, fields: [usersRolesField], grants: [.creator: .write, .world: .read])

    /// Adds what CloudKit's containers always have and its exports always show: the `Users`
    /// record type (``defaultUsersRecordType``) when the schema lacks it, its `roles` field
    /// when a declared `Users` lacks that, and CloudKit's grants of `Users` when a declared one
    /// has none.
    ///
    /// ```swift
    /// schema.includeUsersRecordType()
    /// ```
    public mutating func includeUsersRecordType() {
        guard let index = recordTypes.firstIndex(where: { $0.recordType == Self.usersRecordType }) else {
            recordTypes.append(Self.defaultUsersRecordType)
            return
        }
        if recordTypes[index].field(Self.usersRolesField.name) == nil {
            recordTypes[index].fields.append(Self.usersRolesField)
        }
        // Without grants, Users has CloudKit's, spelled out as its exports spell them.
        if recordTypes[index].grants.isEmpty {
            recordTypes[index].grants = Self.defaultUsersRecordType.grants
        }
    }

    /// Adds to a declared `"cloudkit.share"` type the fields CloudKit's share type always has
    /// (``shareFields``), as CloudKit completes such a declaration: shares imported from
    /// CloudKit carry them, in production too.
    ///
    /// ```swift
    /// schema.includeShareFields()
    /// ```
    public mutating func includeShareFields() {
        guard let index = recordTypes.firstIndex(where: { $0.recordType == Record.SystemType.share }) else { return }
        recordTypes[index] = Self.withShareFields(recordTypes[index])
    }

    /// `share`, a `"cloudkit.share"` type, with the ``shareFields`` it lacks added.
    static func withShareFields(_ share: RecordTypeSchema) -> RecordTypeSchema {
        var share = share
        for field in shareFields where share.field(field.name) == nil { share.fields.append(field) }
        return share
    }

    /// What ``includeUsersRecordType()`` and ``includeShareFields()`` add: the schema as
    /// CloudKit's exports show it.
    mutating func includeCloudKitDeclarations() {
        includeUsersRecordType()
        includeShareFields()
    }

    /// Checks every record type, that no type is declared twice, that the roles the schema
    /// creates are valid and that grants name existing roles.
    ///
    /// ```swift
    /// try schema.validate()
    /// ```
    ///
    /// - Throws: ``StratusError`` `invalidArguments` naming the problem.
    public func validate() throws {
        for role in roles.sorted() {
            if role.isSystem {
                throw StratusError(.invalidArguments, "role \(role.name) is CloudKit's own; a schema cannot create it")
            }
            try role.validate()
        }
        var seen: Set<String> = []
        for type in recordTypes {
            try type.validate()
            guard seen.insert(type.recordType).inserted else {
                throw StratusError(.invalidArguments, "record type \(type.recordType) is declared twice")
            }
            for role in type.grants.keys.sorted() where !role.isSystem && !roles.contains(role) {
                throw StratusError(.invalidArguments, "record type \(type.recordType) grants to role '\(role.name)', which the schema does not create")
            }
            if type.recordType == Self.usersRecordType, let roles = type.field(Self.usersRolesField.name), !Self.isUsersRolesField(roles) {
                throw StratusError(.invalidArguments, "the 'roles' field of Users is CloudKit's: an INT64_LIST, not encrypted")
            }
        }
    }
}

extension ContainerSchema {
    /// How much a schema may declare, in a file or grown by saves in development. CloudKit
    /// documents no such limits; these are Stratus's, far above what real schemas declare
    /// (Apple's samples and published `.ckdb` files have tens of types and fields). Every index
    /// is built in the store and kept up by every write of its type, and a schema change
    /// compares the whole schema, so a file of 100,000 types or indexed fields would hold the
    /// store's write lock for hours. What CloudKit declares itself (`Users`, the system fields)
    /// is left out of the counts: every export writes it, and an export must read back.
    ///
    /// ```swift
    /// var reader = SchemaReader()
    /// reader.limits.recordTypes = 5_000
    /// ```
    public struct Limits: Sendable, Hashable {
        /// Record types a file may declare, `Users` left out.
        public var recordTypes = 1_000
        /// Fields one record type may declare, or grow to hold in development, those CloudKit
        /// declares itself (``ContainerSchema/isDeclaredByCloudKit(_:in:)``) left out.
        public var fieldsPerRecordType = 1_000
        /// Fields a file may declare, counted over every record type, those CloudKit declares
        /// itself left out (every read of the store loads the whole schema: a file of 1,000,000
        /// fields made each `count` take seconds).
        public var fields = 20_000
        /// `QUERYABLE`, `SORTABLE` and `SEARCHABLE` options, counted over every field of every
        /// record type.
        public var indexes = 2_000
        /// Roles a file may create (each read of a type loads its grants: 100,000 roles granted
        /// one type made every `count` of it take seconds).
        public var roles = 1_000
        /// Grants (a role's permissions on one record type), counted over every record type but
        /// `Users`: with many roles, grants are what a schema file is mostly made of, and the
        /// export of a stored schema must stay within what a schema file may be (32 MiB) to
        /// read back.
        ///
        /// ```swift
        /// var reader = SchemaReader()
        /// reader.limits.grants = 50_000
        /// ```
        public var grants = 20_000

        /// The default limits.
        public init() {}
    }

    /// What the limits count in a schema, as a schema file is counted: `Users` is no record
    /// type, and fields CloudKit declares itself are no fields (their indexes count).
    struct LimitCounts {
        var recordTypes = 0
        var fields = 0
        var indexes = 0
        var roles = 0
        var grants = 0
    }

    var limitCounts: LimitCounts {
        var counts = LimitCounts(roles: roles.count)
        for type in recordTypes {
            if type.recordType != Self.usersRecordType { counts.recordTypes += 1 }
            counts.fields += type.declaredFieldCount
            counts.indexes += type.fields.reduce(0) { $0 + $1.indexes.rawValue.nonzeroBitCount }
            // Users' grants are CloudKit's, which every schema has (filled in when a file leaves them out).
            if type.recordType != Self.usersRecordType { counts.grants += type.grants.count }
        }
        return counts
    }

    /// Refuses a change from `previous` to this schema that takes a count past its limit.
    /// A count a store already holds past the limit (a schema file read with
    /// raised limits) may stay as it is, and may not grow: every later change
    /// is judged by the limits its own caller set.
    ///
    /// - Throws: ``StratusError`` `invalidArguments` naming the count, the limit and what the
    ///   schema held before.
    func checkLimits(_ limits: Limits, comparedWith previous: ContainerSchema) throws(StratusError) {
        let now = limitCounts
        let before = previous.limitCounts
        func refuse(_ what: String, _ count: Int, _ limit: Int, _ held: Int) throws(StratusError) {
            guard count > limit, count > held else { return }
            throw StratusError(.invalidArguments, "the change would give the schema \(count) \(what); a schema holds at most \(limit) (Stratus's limit, as in a schema file), and it held \(held)")
        }
        try refuse("record types (Users left out)", now.recordTypes, limits.recordTypes, before.recordTypes)
        try refuse("fields in all its record types", now.fields, limits.fields, before.fields)
        try refuse("QUERYABLE, SORTABLE and SEARCHABLE indexes", now.indexes, limits.indexes, before.indexes)
        try refuse("roles", now.roles, limits.roles, before.roles)
        try refuse("grants (a role's permissions on a record type)", now.grants, limits.grants, before.grants)
        for type in recordTypes {
            let fields = type.declaredFieldCount
            guard fields > limits.fieldsPerRecordType else { continue }
            let held = previous.recordType(type.recordType)?.declaredFieldCount ?? 0
            try refuse("fields in record type '\(type.recordType)'", fields, limits.fieldsPerRecordType, held)
        }
    }
}

extension RecordTypeSchema {
    /// The fields the type declares that CloudKit does not declare itself, as the schema
    /// limits count them.
    var declaredFieldCount: Int { fields.count { !ContainerSchema.isDeclaredByCloudKit($0.name, in: recordType) } }
}
