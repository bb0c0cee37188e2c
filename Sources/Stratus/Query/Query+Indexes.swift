import Foundation

/// An index a query needs that its record type's schema does not declare.
///
/// CloudKit answers such a query in production with an error ("Field 'rank' is not marked
/// sortable"); Stratus answers it in development by reading every record of the type, and
/// `stratus query` names the index to declare.
///
/// ```swift
/// for needed in query.missingIndexes(in: schema) { print("declare \(needed)") }   // "rank SORTABLE on Item"
/// ```
public struct IndexRequirement: Hashable, Sendable, CustomStringConvertible {
    public let recordType: String
    /// The field by Stratus's name (`recordName`, `creationDate`, … for system fields), or
    /// `nil` for a word search, which needs any searchable field.
    public let field: String?
    /// `.queryable`, `.sortable` or `.searchable`.
    public let index: RecordTypeSchema.Indexes

    public init(recordType: String, field: String?, index: RecordTypeSchema.Indexes) {
        self.recordType = recordType
        self.field = field
        self.index = index
    }

    /// The attribute's name in the schema language.
    public var attribute: String {
        if index.contains(.searchable) { return "SEARCHABLE" }
        return index.contains(.sortable) ? "SORTABLE" : "QUERYABLE"
    }

    /// The declaration to make, as the schema language writes it: `rank SORTABLE on Item`, and
    /// for a system field its CloudKit name and type (`"___recordID" REFERENCE QUERYABLE on
    /// Item`, since a schema file cannot declare `recordName`).
    public var description: String {
        guard let field else { return "a \(attribute) string field on \(recordType) (for self CONTAINS)" }
        if let system = SystemField(rawValue: field) {
            // The change tag has no index a schema can declare: no declaration to advise.
            guard system.declaredType != nil else { return "\(field) on \(recordType), which no index can serve (\"\(system.cloudKitName)\" takes none)" }
            return "\"\(system.cloudKitName)\" \(system.cloudKitType.rawValue) \(attribute) on \(recordType)"
        }
        return "\(field) \(attribute) on \(recordType)"
    }
}

extension Query {
    /// The indexes this query needs, as CloudKit requires them, that `schema` (the record
    /// type's, if any) does not declare: `QUERYABLE` for every field a condition names (or
    /// `SORTABLE`, CloudKit's range index, for `<`, `<=`, `>`, `>=` and `BETWEEN`),
    /// `SORTABLE` for every sort key, a `SEARCHABLE` field for `self CONTAINS`, and a queryable
    /// `recordName` to list a type without conditions (`TRUEPREDICATE`). A field in a compound
    /// index counts as queryable (an equality field) or sortable (its sort field).
    ///
    /// ```swift
    /// let missing = query.missingIndexes(in: try await container.schemas().first { $0.recordType == "Item" })
    /// ```
    public func missingIndexes(in schema: RecordTypeSchema?) -> [IndexRequirement] {
        var needed: [IndexRequirement] = []
        func require(_ key: QueryKey, _ index: RecordTypeSchema.Indexes) {
            // A schema has no index to declare on a record's parent, so none is asked for.
            guard key != .parent else { return }
            let name = Self.schemaName(of: key)
            guard !Self.declares(schema, name, index) else { return }
            let requirement = IndexRequirement(recordType: recordType, field: name, index: index)
            if !needed.contains(requirement) { needed.append(requirement) }
        }
        var conditions = 0
        func visit(_ predicate: QueryPredicate) {
            switch predicate {
            case .all, .none: break
            case .and(let parts): parts.forEach(visit)
            case .not(let inner): visit(inner)
            case .condition(let condition):
                conditions += 1
                switch condition {
                case .compare(let key, .less, _), .compare(let key, .lessOrEqual, _), .compare(let key, .greater, _),
                     .compare(let key, .greaterOrEqual, _), .between(let key, _, _):
                    // CloudKit's SORTABLE is the index "optimizing for range searches", so it
                    // serves a range condition as QUERYABLE does.
                    if !Self.declares(schema, Self.schemaName(of: key), .sortable) { require(key, .queryable) }
                case .compare(let key, _, _), .in(let key, _), .beginsWith(let key, _),
                     .listContains(let key, _), .listContainsAny(let key, _), .listAnyBeginsWith(let key, _), .distance(let key, _, _, _):
                    require(key, .queryable)
                case .hasParent:
                    // The parent's column is indexed in every store (by zone and parent).
                    break
                case .tokens:
                    if schema?.searchableFields.isEmpty ?? true {
                        let requirement = IndexRequirement(recordType: recordType, field: nil, index: .searchable)
                        if !needed.contains(requirement) { needed.append(requirement) }
                    }
                }
            }
        }
        visit(predicate)
        if conditions == 0 && predicate != .none { require(.recordName, .queryable) }
        for descriptor in sortDescriptors ?? [] { require(descriptor.queryKey, .sortable) }
        return needed
    }

    /// A key's name in a record type schema (system fields by Stratus's names).
    private static func schemaName(of key: QueryKey) -> String {
        switch key {
        case .field(let name): name
        case .recordName: "recordName"
        case .creationDate: "creationDate"
        case .modificationDate: "modificationDate"
        case .creatorUserRecordID: "creatorUserRecordID"
        case .lastModifiedUserRecordID: "lastModifiedUserRecordID"
        case .parent: "parent"
        }
    }

    private static func declares(_ schema: RecordTypeSchema?, _ name: String, _ index: RecordTypeSchema.Indexes) -> Bool {
        guard let schema else { return false }
        if let field = schema.field(name), field.indexes.isSuperset(of: index) { return true }
        return schema.compoundIndexes.contains { compound in
            index == .queryable ? compound.equalityFields.contains(name) : index == .sortable && compound.sortField == name
        }
    }
}
