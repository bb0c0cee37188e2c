import Foundation
@_spi(StratusEngine) import Stratus

/// Translates a ``CompiledQuery`` into one SQLite `SELECT`.
///
/// Field values are read from the field document with `json_extract(r.fields, '$.key[1]')`
/// and their type tag with `'$.key[0]'`; a condition holds only where the stored type fits the
/// compared value, so an INT64 field never matches a string. Field names appear in SQL only
/// inside JSON path literals, and only after ``Naming`` has checked they are identifiers;
/// every value is a bound parameter.
struct SQLiteQueryBuilder {
    let query: CompiledQuery
    /// The record type's schema, when the container declares one.
    let schema: RecordTypeSchema?

    /// Fields whose words are in `record_tokens`; `self CONTAINS` scans when empty.
    var searchableFields: [String] { schema?.searchableFields ?? [] }

    struct Plan {
        var sql: String
        var parameters: [SQLValue]
        /// For each sort key, the result column (after ``SQLiteSchema/recordColumns``) of its
        /// first sort expression: a distance is read from there.
        var sortColumns: [Int32]
    }

    /// A piece of SQL and the parameters its placeholders take, in order.
    struct Fragment {
        var sql: String
        var parameters: [SQLValue] = []
    }

    /// The rows after `position`, in order. With a descending first sort key, the rows where
    /// that key is missing come after all others; they are read by ``nullTail(zoneRow:limit:)``
    /// so that this statement stays a plain index range.
    func select(zoneRow: Int64, after position: QueryPosition?, limit: Int) throws -> Plan {
        try select(zoneRow: zoneRow, after: position, limit: limit, leadingKeyIsNull: false)
    }

    /// For a descending first sort key and a position whose first value is present: the
    /// statement for the rows without that key (they sort last), from their beginning.
    func nullTail(zoneRow: Int64, after position: QueryPosition?, limit: Int) throws -> Plan? {
        guard let first = query.sortKeys.first, !first.ascending, let position, position.sortValues.first.flatMap({ $0 }) != nil else { return nil }
        return try select(zoneRow: zoneRow, after: nil, limit: limit, leadingKeyIsNull: true)
    }

    private func select(zoneRow: Int64, after position: QueryPosition?, limit: Int, leadingKeyIsNull: Bool) throws -> Plan {
        let keyColumns = try query.sortKeys.map(sortExpressions)
        let sorts = keyColumns.flatMap { $0 }
        let sortDirections = zip(keyColumns, query.sortKeys).flatMap { columns, key in Array(repeating: key.ascending, count: columns.count) }
        let tiebreakAscending = query.sortKeys.last?.ascending ?? true
        var columns = SQLiteSchema.recordColumns
        var parameters: [SQLValue] = []
        for sort in sorts {
            columns += ", " + sort.sql
            parameters += sort.parameters
        }
        var sortColumns: [Int32] = []
        var next = Int32(SQLiteSchema.recordColumnCount)
        for key in keyColumns {
            sortColumns.append(next)
            next += Int32(key.count)
        }
        let predicate = try expression(query.predicate)
        // The record type is a checked identifier, written as a literal so that the partial
        // indexes of its schema (WHERE record_type = 'T') apply.
        precondition((try? Naming.checkIdentifier(query.recordType, kind: "record type")) != nil, "unchecked record type reached SQL")
        let zone = zoneRows(zoneRow, inStorageOrder: readsZoneInStorageOrder)
        var sql = "SELECT \(columns) FROM records r WHERE \(zone.sql)"
        var whereParameters = zone.parameters
        sql += " AND r.record_type = '\(query.recordType)' AND \(predicate.sql)"
        whereParameters += predicate.parameters.map { $0 == Self.zonePlaceholder ? .integer(zoneRow) : $0 }
        if leadingKeyIsNull, let first = sorts.first {
            sql += " AND \(first.sql) IS NULL"
            whereParameters += first.parameters
        }
        if let position {
            guard position.sortValues.count == query.sortKeys.count else {
                throw StratusError(.invalidArguments, "the cursor does not fit this query's sort order")
            }
            let values = zip(position.sortValues, keyColumns).flatMap { value, columns in Self.sqlValues(value, columns: columns.count) }
            let keyset = keysetCondition(sorts: sorts, ascending: sortDirections, tiebreakAscending: tiebreakAscending, values: values, recordName: position.recordName)
            sql += " AND " + keyset.sql
            whereParameters += keyset.parameters
        }
        var order: [String] = []
        var orderParameters: [SQLValue] = []
        for (sort, ascending) in zip(sorts, sortDirections) {
            order.append(sort.sql + (ascending ? " ASC" : " DESC"))
            orderParameters += sort.parameters
        }
        // An IN on an indexed field reads several index ranges, which SQLite cannot merge in
        // record-name order; left alone it scans the whole type in name order instead. The
        // unary + keeps the name order from choosing the index, so the IN ranges are read.
        let tiebreak = query.sortKeys.isEmpty && hasIndexedIn ? "+r.record_name" : "r.record_name"
        order.append(tiebreak + (tiebreakAscending ? " ASC" : " DESC"))
        sql += " ORDER BY " + order.joined(separator: ", ") + " LIMIT \(limit)"
        return Plan(sql: sql, parameters: parameters + whereParameters + orderParameters, sortColumns: sortColumns)
    }

    /// `SELECT count(*)` of the rows the query matches: its conditions without its order.
    func count(zoneRow: Int64) throws -> Fragment {
        precondition((try? Naming.checkIdentifier(query.recordType, kind: "record type")) != nil, "unchecked record type reached SQL")
        let predicate = try expression(query.predicate)
        let zone = zoneRows(zoneRow, inStorageOrder: !hasIndexedCondition && !declaresRecordName)
        return Fragment(sql: "SELECT count(*) FROM records r WHERE \(zone.sql) AND r.record_type = '\(query.recordType)' AND \(predicate.sql)",
                        parameters: zone.parameters + predicate.parameters.map { $0 == Self.zonePlaceholder ? .integer(zoneRow) : $0 })
    }

    /// Whether the query sorts by a key that no index keeps in order and has no condition an
    /// index could serve: every row of the type is then read and sorted anyway, best in
    /// storage order (the zone's range of the table). Left alone, the planner would take a
    /// partial index of the type for its zone column and visit the rows in that index's order,
    /// one random read each.
    private var readsZoneInStorageOrder: Bool {
        guard let first = query.sortKeys.first, first.distanceFrom != nil || !isIndexed(first.key) else { return false }
        return !hasIndexedCondition
    }

    /// Whether some condition of the predicate can be served by an index.
    private var hasIndexedCondition: Bool {
        conjuncts.contains { part in
            guard case .condition(let condition) = part else { return false }
            switch condition {
            case .compare(let key, let op, _): return op != .notEqual && isIndexed(key)
            case .between(let key, _, _), .in(let key, _), .beginsWith(let key, _): return isIndexed(key)
            case .tokens: return !searchableFields.isEmpty
            case .listContains, .listContainsAny, .listAnyBeginsWith, .distance: return false
            }
        }
    }

    /// The rows of the zone a statement reads: through an index a condition can use, or else
    /// the zone's range of the table in storage order (its rows lie together by change key;
    /// the unary + keeps the zone column, first in every index, from luring the planner into
    /// an index whose order is random for this read).
    private func zoneRows(_ zoneRow: Int64, inStorageOrder: Bool) -> Fragment {
        guard inStorageOrder else { return Fragment(sql: "r.zone_id = ?", parameters: [.integer(zoneRow)]) }
        return Fragment(sql: "+r.zone_id = ? AND r.change_key BETWEEN ? AND ?", parameters: [
            .integer(zoneRow), .integer(SQLiteSchema.changeKey(zoneRow: zoneRow, sequence: 0)),
            .integer(SQLiteSchema.changeKey(zoneRow: zoneRow, sequence: SQLiteSchema.maximumSequence))])
    }

    /// Whether the schema gives the type an index of its own (a queryable `recordName`), which
    /// lists the type's records without reading the zone's other types.
    private var declaresRecordName: Bool {
        schema?.field("recordName").map { !$0.indexes.isEmpty } ?? false
    }

    /// Whether some index covers `key`: the record name always, other keys when the schema
    /// declares an index on them (alone or in a compound index).
    private func isIndexed(_ key: QueryKey) -> Bool {
        let name: String
        switch key {
        case .recordName: return true
        case .creatorUserRecordID, .lastModifiedUserRecordID: return false
        case .creationDate: name = "creationDate"
        case .modificationDate: name = "modificationDate"
        case .field(let field): name = field
        }
        guard let schema else { return false }
        if let field = schema.field(name), !field.indexes.isEmpty { return true }
        return schema.compoundIndexes.contains { $0.equalityFields.contains(name) || $0.sortField == name }
    }

    /// The conditions that must all hold: the parts of a top-level AND, or the predicate itself.
    private var conjuncts: [QueryPredicate] {
        if case .and(let parts) = query.predicate { return parts }
        return [query.predicate]
    }

    /// Whether the predicate requires `field IN {…}` of a field the schema makes queryable.
    private var hasIndexedIn: Bool {
        conjuncts.contains { part in
            guard case .condition(.in(.field(let name), _)) = part else { return false }
            return schema?.field(name)?.indexes.contains(.queryable) == true
        }
    }

    // MARK: - Sorting and keysets

    /// The SQL expressions a sort key orders by, in Stratus's order (``Stratus/QueryRules``).
    /// A field whose type the schema declares holds one family, so its value orders it (and an
    /// index on the value serves the sort); any other field orders by its value's family rank,
    /// then its value, with values that have no order (lists, bytes, locations, assets) as
    /// missing (NULL), which SQLite puts first ascending and last descending.
    private func sortExpressions(_ key: CompiledQuery.SortKey) throws -> [Fragment] {
        if let origin = key.distanceFrom {
            guard case .field(let name) = key.key else {
                throw StratusError(.invalidArguments, "distance sort needs a LOCATION field")
            }
            return [Self.distanceKilometres(name, from: origin)]
        }
        switch key.key {
        case .recordName: return [Fragment(sql: "r.record_name")]
        case .creationDate: return [Fragment(sql: "r.created_at")]
        case .modificationDate: return [Fragment(sql: "r.modified_at")]
        case .creatorUserRecordID: return [Fragment(sql: "r.created_by")]
        case .lastModifiedUserRecordID: return [Fragment(sql: "r.modified_by")]
        case .field(let name):
            if let declared = schema?.field(name)?.type, Self.orderedTags(of: declared) != nil {
                return [Fragment(sql: Self.value(name))]
            }
            return [Fragment(sql: Self.familyRank(name)), Fragment(sql: Self.rankedValue(name))]
        }
    }

    /// The type tags of a declared type whose values have an order.
    static func orderedTags(of type: FieldType) -> String? {
        switch type {
        case .int64, .double: "'I', 'F'"
        case .timestamp: "'D'"
        case .string: "'S'"
        case .reference: "'R'"
        default: nil
        }
    }

    /// ``Stratus/QueryRules/OrderedFamily`` of a field's value as a number, NULL when missing or unordered.
    static func familyRank(_ name: String) -> String {
        "(CASE \(tag(name)) WHEN 'I' THEN 1 WHEN 'F' THEN 1 WHEN 'D' THEN 2 WHEN 'S' THEN 3 WHEN 'R' THEN 4 END)"
    }

    /// A field's value where it has an order, else NULL.
    static func rankedValue(_ name: String) -> String {
        "(CASE WHEN \(tag(name)) IN ('I', 'F', 'D', 'S', 'R') THEN \(value(name)) END)"
    }

    /// A position's value of one sort key as the SQL values its `columns` expressions compare.
    static func sqlValues(_ value: FieldValue?, columns: Int) -> [SQLValue] {
        let sql = sqlValue(value)
        guard columns == 2 else { return [sql] }
        guard let value, let family = QueryRules.orderedFamily(of: value) else { return [.null, .null] }
        return [.integer(Int64(family.rawValue)), sql]
    }

    /// Rows strictly after `position` in the query's order, written so that the leading key
    /// is a plain range (`k >= v AND (k > v OR …)`) that an index can seek to: page N then
    /// costs what page 1 costs. In SQLite, NULL (a missing value) sorts first ascending and
    /// last descending; the condition follows that.
    private func keysetCondition(sorts: [Fragment], ascending: [Bool], tiebreakAscending: Bool, values sortValues: [SQLValue], recordName: String) -> Fragment {
        let keys = sorts + [Fragment(sql: "r.record_name")]
        let directions = ascending + [tiebreakAscending]
        let values: [SQLValue] = sortValues + [.text(recordName)]

        func after(_ i: Int) -> Fragment {
            let key = keys[i]
            let value = values[i]
            let isLast = i == keys.count - 1
            switch (directions[i], value) {
            case (true, .null):
                // Nulls come first: any non-null follows; among nulls, the next key decides.
                let rest = isLast ? Fragment(sql: "0") : after(i + 1)
                return Fragment(sql: "(\(key.sql) IS NOT NULL OR (\(key.sql) IS NULL AND \(rest.sql)))",
                                parameters: key.parameters + key.parameters + rest.parameters)
            case (false, .null):
                // Nulls come last: only nulls follow, ordered by the next key.
                let rest = isLast ? Fragment(sql: "0") : after(i + 1)
                return Fragment(sql: "(\(key.sql) IS NULL AND \(rest.sql))", parameters: key.parameters + rest.parameters)
            case (let ascending, let value):
                let strict = ascending ? ">" : "<"
                if isLast {
                    return Fragment(sql: "\(key.sql) \(strict) ?", parameters: key.parameters + [value])
                }
                let rest = after(i + 1)
                var fragment = Fragment(sql: "(\(key.sql) \(strict)= ? AND (\(key.sql) \(strict) ? OR \(rest.sql)))",
                                        parameters: key.parameters + [value] + key.parameters + [value] + rest.parameters)
                // Missing values sort after everything descending. For the first key the
                // engine reads them separately (nullTail), which keeps this condition a seek.
                if !ascending && i > 0 {
                    fragment.sql = "(\(fragment.sql) OR \(key.sql) IS NULL)"
                    fragment.parameters += key.parameters
                }
                return fragment
            }
        }
        return after(0)
    }

    static func sqlValue(_ value: FieldValue?) -> SQLValue {
        switch value {
        case nil: .null
        case .int64(let i)?: .integer(i)
        case .double(let d)?: .real(d)
        case .string(let s)?: .text(s)
        case .bytes(let b)?: .blob(b)
        case .date(let d)?: .real(d.timeIntervalSinceReferenceDate)
        case .reference(let r)?: .text(r.recordID.recordName)
        case let other?: .text(FieldDocument.encode(["v": other]))
        }
    }

    // MARK: - Predicates

    private func expression(_ predicate: QueryPredicate) throws -> Fragment {
        switch predicate {
        case .all: return Fragment(sql: "1")
        case .none: return Fragment(sql: "0")
        case .and(let parts):
            let fragments = try parts.map(expression)
            return Fragment(sql: "(" + fragments.map(\.sql).joined(separator: " AND ") + ")", parameters: fragments.flatMap(\.parameters))
        case .not(.condition(let condition)):
            let (guardFragment, test) = try self.condition(condition)
            return Fragment(sql: "(\(guardFragment.sql) AND NOT \(test.sql))", parameters: guardFragment.parameters + test.parameters)
        case .not:
            throw StratusError(.invalidArguments, "NOT is only allowed over a single comparison")
        case .condition(let condition):
            let (guardFragment, test) = try self.condition(condition)
            return Fragment(sql: "(\(guardFragment.sql) AND \(test.sql))", parameters: guardFragment.parameters + test.parameters)
        }
    }

    /// A condition as (the record has a value of a fitting type, the test on that value).
    private func condition(_ condition: Condition) throws -> (Fragment, Fragment) {
        switch condition {
        case .compare(let key, let op, let value):
            let (column, guardFragment, bound) = try scalar(key, value, op == .equal || op == .notEqual ? "compare with \(op.rawValue)" : "order with \(op.rawValue)")
            if case .reference = value, op != .equal && op != .notEqual {
                throw StratusError(.invalidArguments, "references can only be compared with == or !=")
            }
            if case .field(let name) = key, case .string(let text) = value, op == .equal || op == .notEqual {
                return (guardFragment, Fragment(sql: "\(Self.equalityValue(name)) \(op.sqlOperator) ?", parameters: [.text(QueryRules.equalityKey(text))]))
            }
            return (guardFragment, Fragment(sql: "\(column) \(op.sqlOperator) ?", parameters: [bound]))
        case .between(let key, let low, let high):
            let (column, guardFragment, lowBound) = try scalar(key, low, "compare with BETWEEN")
            let (_, _, highBound) = try scalar(key, high, "compare with BETWEEN")
            return (guardFragment, Fragment(sql: "\(column) BETWEEN ? AND ?", parameters: [lowBound, highBound]))
        case .in(let key, let values):
            guard let first = values.first else { return (Fragment(sql: "1"), Fragment(sql: "0")) }
            let (column, guardFragment, _) = try scalar(key, first, "compare with IN")
            let bounds = try values.map { try scalar(key, $0, "compare with IN").2 }
            try Self.checkSameFamily(values, key: key)
            if case .field(let name) = key, case .string = first {
                let keys: [SQLValue] = values.map { if case .string(let text) = $0 { .text(QueryRules.equalityKey(text)) } else { .null } }
                return (guardFragment, Fragment(sql: "\(Self.equalityValue(name)) IN (" + keys.map { _ in "?" }.joined(separator: ", ") + ")", parameters: keys))
            }
            return (guardFragment, Fragment(sql: "\(column) IN (" + bounds.map { _ in "?" }.joined(separator: ", ") + ")", parameters: bounds))
        case .beginsWith(let key, let prefix):
            let (column, guardFragment, _) = try scalar(key, .string(prefix), "compare with BEGINSWITH")
            return (guardFragment, Fragment(sql: "substr(\(column), 1, length(?)) = ?", parameters: [.text(prefix), .text(prefix)]))
        case .listContains(let key, let value):
            let name = try listField(key)
            let family = try Self.family(of: value, key: key, operation: "look for in a list")
            return (Fragment(sql: "\(Self.tag(name)) IN (\(family.listTags))"),
                    Fragment(sql: "EXISTS (SELECT 1 FROM json_each(r.fields, '\(Self.path(name, 1))') WHERE value = ?)", parameters: [Self.sqlValue(value)]))
        case .listContainsAny(let key, let values):
            let name = try listField(key)
            guard let first = values.first else { return (Fragment(sql: "1"), Fragment(sql: "0")) }
            let family = try Self.family(of: first, key: key, operation: "look for in a list")
            try Self.checkSameFamily(values, key: key)
            return (Fragment(sql: "\(Self.tag(name)) IN (\(family.listTags))"),
                    Fragment(sql: "EXISTS (SELECT 1 FROM json_each(r.fields, '\(Self.path(name, 1))') WHERE value IN (" + values.map { _ in "?" }.joined(separator: ", ") + "))",
                             parameters: values.map(Self.sqlValue)))
        case .listAnyBeginsWith(let key, let prefix):
            let name = try listField(key)
            return (Fragment(sql: "\(Self.tag(name)) = 'SL'"),
                    Fragment(sql: "EXISTS (SELECT 1 FROM json_each(r.fields, '\(Self.path(name, 1))') WHERE substr(value, 1, length(?)) = ?)", parameters: [.text(prefix), .text(prefix)]))
        case .distance(let key, let origin, let op, let kilometers):
            guard case .field(let name) = key else {
                throw StratusError(.invalidArguments, "distanceToLocation needs a LOCATION field, not \(key)")
            }
            var distance = Self.distanceKilometres(name, from: origin)
            distance.sql += " \(op.sqlOperator) ?"
            distance.parameters.append(.real(kilometers))
            return (Fragment(sql: "\(Self.tag(name)) = 'L'"), distance)
        case .tokens(let words, let all):
            guard !words.isEmpty else { return (Fragment(sql: "1"), Fragment(sql: "0")) }
            if searchableFields.isEmpty {
                return (Fragment(sql: "1"), Fragment(sql: "stratus_has_tokens(r.fields, ?, ?)", parameters: [.text(words.joined(separator: " ")), .integer(all ? 1 : 0)]))
            }
            // Every word is looked up in the word index: one IN-list for any word, one lookup
            // per word (intersected) for all words.
            if all && words.count > 1 {
                let lookups = words.map { _ in "r.record_name IN (SELECT t.record_name FROM record_tokens t WHERE t.zone_id = ? AND t.token = ?)" }
                return (Fragment(sql: "1"), Fragment(sql: "(" + lookups.joined(separator: " AND ") + ")",
                                                     parameters: words.flatMap { [Self.zonePlaceholder, SQLValue.text($0)] }))
            }
            let list = words.map { _ in "?" }.joined(separator: ", ")
            let sql = "r.record_name IN (SELECT t.record_name FROM record_tokens t WHERE t.zone_id = ? AND t.token IN (\(list)))"
            return (Fragment(sql: "1"), Fragment(sql: sql, parameters: [Self.zonePlaceholder] + words.map(SQLValue.text)))
        }
    }

    /// The column for a scalar key, the type guard, and the bound value.
    private func scalar(_ key: QueryKey, _ value: FieldValue, _ operation: String) throws -> (String, Fragment, SQLValue) {
        switch key {
        case .recordName, .creatorUserRecordID, .lastModifiedUserRecordID:
            let column = key == .recordName ? "r.record_name" : key == .creatorUserRecordID ? "r.created_by" : "r.modified_by"
            switch value {
            case .reference(let r): return (column, Fragment(sql: "1"), .text(r.recordID.recordName))
            case .string(let s): return (column, Fragment(sql: "1"), .text(s))
            default: throw StratusError(.invalidArguments, "\(key) can only be compared with a record ID, a reference or a string")
            }
        case .creationDate, .modificationDate:
            guard case .date(let date) = value else {
                throw StratusError(.invalidArguments, "\(key) can only be compared with a date")
            }
            return (key == .creationDate ? "r.created_at" : "r.modified_at", Fragment(sql: "1"), .real(date.timeIntervalSinceReferenceDate))
        case .field(let name):
            let family = try Self.family(of: value, key: key, operation: operation)
            return (Self.value(name), Fragment(sql: "\(Self.tag(name)) IN (\(family.scalarTags))"), Self.sqlValue(value))
        }
    }

    /// Types that compare with each other: Int64 and Double are both numbers.
    enum Family {
        case string, number, date, reference
        var scalarTags: String {
            switch self {
            case .string: "'S'"
            case .number: "'I', 'F'"
            case .date: "'D'"
            case .reference: "'R'"
            }
        }
        var listTags: String {
            switch self {
            case .string: "'SL'"
            case .number: "'IL', 'FL'"
            case .date: "'DL'"
            case .reference: "'RL'"
            }
        }
    }

    static func family(of value: FieldValue, key: QueryKey, operation: String) throws -> Family {
        switch value {
        case .string: return .string
        case .int64, .double: return .number
        case .date: return .date
        case .reference: return .reference
        default:
            throw StratusError(.invalidArguments, "cannot \(operation) on '\(key)' against a \(value.type.rawValue) value")
        }
    }

    private static func checkSameFamily(_ values: [FieldValue], key: QueryKey) throws {
        let families = try Set(values.map { try family(of: $0, key: key, operation: "compare with a set") })
        if families.count > 1 {
            throw StratusError(.invalidArguments, "the values compared with '\(key)' have different types")
        }
    }

    /// A list condition's field. When the schema declares the field as a scalar, the form is
    /// CloudKit's string CONTAINS (a substring search), which CloudKit rejects.
    private func listField(_ key: QueryKey) throws -> String {
        guard case .field(let name) = key else {
            throw StratusError(.invalidArguments, "\(key) is not a list field")
        }
        if let declared = schema?.field(name)?.type, !declared.isList {
            throw StratusError(.invalidArguments, "'\(name)' is a \(declared.rawValue) field: CONTAINS, ANY and IN-a-field work on lists only, and CloudKit has no substring search (use BEGINSWITH, or self CONTAINS for words)")
        }
        return name
    }

    /// A JSON path into the field document. `name` was checked by ``Naming`` when the query
    /// was compiled; the check is repeated because the name becomes part of the SQL text.
    static func path(_ name: String, _ index: Int) -> String {
        precondition((try? Naming.checkIdentifier(name, kind: "field name")) != nil, "unchecked field name reached SQL")
        return "$.\(name)[\(index)]"
    }

    /// A field's value; `table` is `r.` in queries and empty in index definitions.
    static func value(_ name: String, table: String = "r.") -> String { "json_extract(\(table)fields, '\(path(name, 1))')" }
    static func tag(_ name: String, table: String = "r.") -> String { "json_extract(\(table)fields, '\(path(name, 0))')" }
    /// What string equality compares: the stored lowercase form where the document has one
    /// (only strings that ASCII lowercasing does not fold, see ``Stratus/FieldDocument``), else
    /// the value lowercased by SQLite's `lower()`, which folds ASCII letters only.
    static func equalityValue(_ name: String, table: String = "r.") -> String {
        "coalesce(json_extract(\(table)fields, '\(path(name, 2))'), lower(json_extract(\(table)fields, '\(path(name, 1))')))"
    }

    /// Stands for the zone row in fragments built before the zone is known.
    static let zonePlaceholder = SQLValue.text("\u{0}zone")

    /// Great-circle distance in kilometres from `origin` to a LOCATION field (haversine).
    static func distanceKilometres(_ name: String, from origin: Location) -> Fragment {
        let lat = "json_extract(r.fields, '\(path(name, 1))')"
        let lon = "json_extract(r.fields, '\(path(name, 2))')"
        let sql = "(12742.0176 * asin(sqrt(pow(sin(radians(\(lat) - ?) / 2), 2) + cos(radians(?)) * cos(radians(\(lat))) * pow(sin(radians(\(lon) - ?) / 2), 2))))"
        return Fragment(sql: sql, parameters: [.real(origin.latitude), .real(origin.latitude), .real(origin.longitude)])
    }
}

extension ComparisonOperator {
    var sqlOperator: String {
        switch self {
        case .equal: "="
        case .notEqual: "!="
        case .less: "<"
        case .lessOrEqual: "<="
        case .greater: ">"
        case .greaterOrEqual: ">="
        }
    }
}
