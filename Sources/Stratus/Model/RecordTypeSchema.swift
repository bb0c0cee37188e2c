import Foundation

/// The indexes of one record type: which fields are queryable, sortable and searchable.
///
/// A store builds real indexes for them, and queries that filter or sort on indexed fields use
/// them. Queries on fields without an index still work, by scanning. A compound index serves
/// queries that test some fields for equality and sort by another, at the cost of one page
/// whatever the page number.
///
/// ```swift
/// var schema = RecordTypeSchema(recordType: "Todo")
/// schema.addField("title", type: .string, indexes: [.queryable, .searchable])
/// schema.addField("createdAt", type: .timestamp, indexes: [.sortable])
/// schema.compoundIndexes = [.init(equalityFields: ["list"], sortField: "createdAt")]
/// try await container.saveSchema(schema)
/// ```
///
/// System fields are indexed only when a schema asks, as in CloudKit's schema (where
/// `createdTimestamp`, `modifiedTimestamp` and `recordName` are marked queryable or sortable):
/// declare a TIMESTAMP field named `creationDate` or `modificationDate`, or a STRING field
/// named `recordName`. Every record pays for each index on every write, so a store keeps none
/// it was not asked for.
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
public struct RecordTypeSchema: Hashable, Sendable, Codable {
    public let recordType: String
    public var fields: [Field]
    public var compoundIndexes: [CompoundIndex]

    public init(recordType: String, fields: [Field] = [], compoundIndexes: [CompoundIndex] = []) {
        self.recordType = recordType
        self.fields = fields
        self.compoundIndexes = compoundIndexes
    }

    /// A field and its indexes.
    public struct Field: Hashable, Sendable, Codable {
        public let name: String
        public let type: FieldType
        public var indexes: Indexes

        public init(_ name: String, type: FieldType, indexes: Indexes) {
            self.name = name
            self.type = type
            self.indexes = indexes
        }
    }

    /// The kinds of index a field can have, as in CloudKit's schema editor.
    public struct Indexes: OptionSet, Hashable, Sendable, Codable {
        public let rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }
        /// Equality and range conditions on the field use an index.
        public static let queryable = Indexes(rawValue: 1 << 0)
        /// Sorting by the field uses an index.
        public static let sortable = Indexes(rawValue: 1 << 1)
        /// `self CONTAINS` searches the field's words through an index.
        public static let searchable = Indexes(rawValue: 1 << 2)
    }

    /// One index over several fields: equality on `equalityFields`, then order by `sortField`.
    public struct CompoundIndex: Hashable, Sendable, Codable {
        public let equalityFields: [String]
        public let sortField: String?

        public init(equalityFields: [String], sortField: String? = nil) {
            self.equalityFields = equalityFields
            self.sortField = sortField
        }
    }

    /// Adds a field, or replaces the one with the same name.
    public mutating func addField(_ name: String, type: FieldType, indexes: Indexes) {
        fields.removeAll { $0.name == name }
        fields.append(Field(name, type: type, indexes: indexes))
    }

    /// The field named `name`, if declared.
    public func field(_ name: String) -> Field? { fields.first { $0.name == name } }

    /// Names of the fields whose words `self CONTAINS` searches through the index.
    public var searchableFields: [String] { fields.filter { $0.indexes.contains(.searchable) }.map(\.name) }

    /// The system fields a schema can index, by the names queries use for them, with the type
    /// a declaration gives them.
    public static let indexableSystemFields: [String: FieldType] = ["creationDate": .timestamp, "modificationDate": .timestamp, "recordName": .string]

    /// Checks names, types and that compound indexes name declared scalar fields.
    ///
    /// - Throws: ``StratusError`` `invalidArguments` naming the problem.
    public func validate() throws {
        try Naming.checkIdentifier(recordType, kind: "record type")
        var seen: Set<String> = []
        for field in fields {
            if let systemType = Self.indexableSystemFields[field.name] {
                guard field.type == systemType, !field.indexes.contains(.searchable) else {
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
        }
        for index in compoundIndexes {
            for name in index.equalityFields + (index.sortField.map { [$0] } ?? []) where Self.indexableSystemFields[name] == nil {
                guard let field = field(name) else {
                    throw StratusError(.invalidArguments, "the compound index of \(recordType) names '\(name)', which the schema does not declare")
                }
                if field.type.isList || field.type == .location || field.type == .asset || field.type == .bytes {
                    throw StratusError(.invalidArguments, "the compound index of \(recordType) names '\(name)', a \(field.type.rawValue) field; only STRING, INT64, DOUBLE, TIMESTAMP and REFERENCE fields can be in one")
                }
            }
            if index.equalityFields.isEmpty && index.sortField == nil {
                throw StratusError(.invalidArguments, "a compound index of \(recordType) names no field")
            }
        }
    }
}
