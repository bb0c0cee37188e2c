import Foundation
@_spi(StratusEngine) import Stratus

extension SQLDialect {
    /// The key expressions of each index a record type schema declares, after the zone column
    /// and ending with the record name (the order of equal keys): what an engine creates as
    /// partial indexes of the type, in the very expressions ``SQLQueryTranslation`` compares and
    /// sorts by (string keys cut to ``SQLDialect/indexPrefix(_:)`` where the dialect has one),
    /// so that its queries can use them. Field and type names were checked
    /// (``Stratus/RecordTypeSchema/validate()``). Build them with a dialect whose expressions
    /// name no table alias.
    ///
    /// ```swift
    /// for keys in SQLiteDialect(table: "").indexKeys(for: schema) { create(keys) }
    /// ```
    package func indexKeys(for schema: RecordTypeSchema) -> [[String]] {
        let recordName = systemColumn(.recordName)
        var definitions: [[String]] = []
        func add(_ columns: [String]) {
            // A declared `recordName` is the last column already.
            let keys = columns.last == recordName ? columns : columns + [recordName]
            if !definitions.contains(keys) { definitions.append(keys) }
        }
        // System fields are columns, compared and sorted as they are (record names exactly); a
        // string field's equality compares its folded form.
        func column(_ name: String, forEquality: Bool) -> String {
            let key = QueryKey(name)
            guard case .field = key else { return systemColumn(key) }
            let type = schema.field(name)?.type
            if forEquality && type == .string { return prefixed(equalityValue(name)) }
            // A declared field's values of its type, the others as missing, as queries sort them.
            let declared = type.flatMap(QueryRules.OrderedFamily.init(declared:))
            let family = declared ?? .string
            let expression = declared.map { declaredValue(name, family: $0) } ?? value(name, family: family)
            // References stay whole: they hold checked record names (at most 255 bytes).
            return family == .string ? prefixed(expression) : expression
        }
        func prefixed(_ expression: String) -> String { indexPrefix(expression) ?? expression }
        for field in schema.fields where QueryRules.OrderedFamily(declared: field.type) != nil {
            if field.indexes.contains(.queryable) && field.type == .string {
                add([column(field.name, forEquality: true)])
            }
            if field.indexes.contains(.sortable) || (field.indexes.contains(.queryable) && field.type != .string) {
                add([column(field.name, forEquality: false)])
            }
        }
        for compound in schema.compoundIndexes {
            var columns = compound.equalityFields.map { column($0, forEquality: true) }
            if let sort = compound.sortField { columns.append(column(sort, forEquality: false)) }
            add(columns)
        }
        return definitions
    }
}
