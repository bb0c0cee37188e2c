import Foundation
@_spi(StratusEngine) import Stratus

/// Translates a ``Stratus/CompiledQuery`` into SQL for any SQL engine, spelled by its
/// ``SQLDialect``: the conditions with their type guards, the order, the keyset that continues
/// after a position, and a count.
///
/// A condition holds only where the stored value's type fits the compared value (an INT64
/// field never matches a string); string equality compares folded forms; missing values sort
/// first ascending and last descending; ties go by record name in the direction of the last
/// sort key (``Stratus/QueryRules``). The query was checked when it was compiled.
///
/// ```swift
/// let translation = SQLQueryTranslation(query: compiled, schema: schema, dialect: dialect)
/// let plan = try translation.select(zoneRow: zone, after: position, limit: 101)
/// ```
package struct SQLQueryTranslation<Dialect: SQLDialect> {
    package let query: CompiledQuery
    /// The record type's schema, when the container declares one.
    package let schema: RecordTypeSchema?
    package let dialect: Dialect

    package init(query: CompiledQuery, schema: RecordTypeSchema?, dialect: Dialect) {
        self.query = query
        self.schema = schema
        self.dialect = dialect
    }

    /// Fields whose words are in `record_tokens`; `self CONTAINS` scans when empty.
    package var searchableFields: [String] { schema?.searchableFields ?? [] }

    /// A statement that reads rows: ``SQLDialect/recordColumns``, then the distances it sorts by.
    package struct Plan {
        package var sql: String
        package var parameters: [SQLValue]
        /// For each sort key, the result column (0-based) of its distance, -1 for a key that is
        /// not a distance (its value is the record's own, and is not selected).
        package var sortColumns: [Int]
        /// The `self CONTAINS` conditions the statement leaves to the engine
        /// (``SQLDialect/wordsWithoutIndex(_:all:)`` answered `nil`): the rows it reads must also
        /// hold each one's words (any, or all).
        package var residualWords: [(words: [String], all: Bool)]
    }

    /// Stands for the zone row in fragments built before the zone is known.
    static var zonePlaceholder: SQLValue { .text("\u{0}zone") }

    // MARK: - Statements

    /// The rows after `position`, in order (at most `limit`; -1 for all). With a descending first
    /// sort key, the rows where that key is missing come after all others; they are read by
    /// ``nullTail(zoneRow:after:limit:)`` so that this statement stays a plain index range.
    package func select(zoneRow: Int64, after position: QueryPosition?, limit: Int) throws -> Plan {
        try select(zoneRow: zoneRow, after: position, limit: limit, leadingKeyIsNull: false)
    }

    /// For a descending first sort key and a position whose first value is present: the
    /// statement for the rows without that key (they sort last), from their beginning.
    package func nullTail(zoneRow: Int64, after position: QueryPosition?, limit: Int) throws -> Plan? {
        guard let first = query.sortKeys.first, !first.ascending, let position, position.sortValues.first.flatMap({ $0 }) != nil else { return nil }
        return try select(zoneRow: zoneRow, after: nil, limit: limit, leadingKeyIsNull: true)
    }

    /// `SELECT count(*)` of the rows the query matches: its conditions without its order, and
    /// the words the engine must check itself when the dialect leaves them.
    package func count(zoneRow: Int64) throws -> (fragment: SQLFragment, residualWords: [(words: [String], all: Bool)]) {
        let (predicate, residual) = try predicateFragment(zoneRow: zoneRow)
        let zone = dialect.zoneRows(zoneRow, inStorageOrder: !hasIndexedCondition && !declaresRecordName)
        return (SQLFragment(sql: "SELECT count(*) FROM records r WHERE \(zone.sql) AND r.record_type = \(recordTypeLiteral) AND \(predicate.sql)",
                            parameters: zone.parameters + predicate.parameters), residual)
    }

    private func select(zoneRow: Int64, after position: QueryPosition?, limit: Int, leadingKeyIsNull: Bool) throws -> Plan {
        let keyColumns = query.sortKeys.map(sortExpressions)
        let sorts = keyColumns.flatMap { $0 }
        let sortDirections = zip(keyColumns, query.sortKeys).flatMap { columns, key in Array(repeating: key.ascending, count: columns.count) }
        let tiebreakAscending = query.sortKeys.last?.ascending ?? true
        // Only a distance is read back from its row (the other sort values are the record's
        // own); any other sort expression is left out of the result, which a sort would
        // otherwise carry beside its key through every run.
        var columns = dialect.recordColumns
        var parameters: [SQLValue] = []
        var sortColumns: [Int] = []
        var next = dialect.recordColumnCount
        for (key, expressions) in zip(query.sortKeys, keyColumns) {
            guard key.distanceFrom != nil else {
                sortColumns.append(-1)
                continue
            }
            sortColumns.append(next)
            for expression in expressions {
                columns += ", " + expression.sql
                parameters += expression.parameters
                next += 1
            }
        }
        let (predicate, residual) = try predicateFragment(zoneRow: zoneRow)
        let zone = dialect.zoneRows(zoneRow, inStorageOrder: readsZoneInStorageOrder)
        var sql = "SELECT \(columns) FROM records r WHERE \(zone.sql) AND r.record_type = \(recordTypeLiteral) AND \(predicate.sql)"
        var whereParameters = zone.parameters + predicate.parameters
        if leadingKeyIsNull, let first = sorts.first {
            sql += " AND \(first.sql) IS NULL"
            whereParameters += first.parameters
        }
        if let position {
            guard position.sortValues.count == query.sortKeys.count else {
                throw StratusError(.invalidArguments, "the cursor does not fit this query's sort order")
            }
            let values = zip(position.sortValues, zip(query.sortKeys, keyColumns)).flatMap { value, key in sortValues(value, for: key.0, columns: key.1.count) }
            let keyset = keysetCondition(sorts: sorts, ascending: sortDirections, tiebreakAscending: tiebreakAscending, values: values, recordName: position.recordName)
            sql += " AND " + keyset.sql
            whereParameters += keyset.parameters
        }
        var order: [String] = []
        var orderParameters: [SQLValue] = []
        for (sort, ascending) in zip(sorts, sortDirections) {
            order.append(dialect.orderTerm(sort.sql, ascending: ascending))
            orderParameters += sort.parameters
        }
        let tiebreak = dialect.tiebreak(hasIndexedIn: query.sortKeys.isEmpty && hasIndexedIn)
        if query.sortKeys.isEmpty && !hasIndexedCondition && !declaresRecordName {
            // Only the record-name order, which the zone's primary key serves.
            order.append(dialect.primaryKeyOrderTerm(tiebreak, ascending: tiebreakAscending))
        } else {
            order.append(dialect.orderTerm(tiebreak, ascending: tiebreakAscending))
        }
        sql += " ORDER BY " + order.joined(separator: ", ") + dialect.limitClause(limit)
        return Plan(sql: sql, parameters: parameters + whereParameters + orderParameters, sortColumns: sortColumns, residualWords: residual)
    }

    /// The record type as a literal: a checked identifier (or CloudKit's dotted `cloudkit.share`),
    /// written so that the partial indexes of its schema (`WHERE record_type = 'T'`) apply.
    private var recordTypeLiteral: String {
        precondition((try? Naming.checkRecordType(query.recordType, allowSystemNames: true)) != nil, "unchecked record type reached SQL")
        return "'\(query.recordType)'"
    }

    /// The predicate with the zone placeholder bound, and the words left to the engine.
    private func predicateFragment(zoneRow: Int64) throws -> (SQLFragment, [(words: [String], all: Bool)]) {
        var residual: [(words: [String], all: Bool)] = []
        var predicate = try expression(query.predicate, residual: &residual)
        predicate.parameters = predicate.parameters.map { $0 == Self.zonePlaceholder ? .integer(zoneRow) : $0 }
        return (predicate, residual)
    }

    // MARK: - Which rows an index serves

    /// Whether the query sorts by a key that no index keeps in order and has no condition an
    /// index could serve: every row of the type is then read and sorted anyway, best in
    /// storage order. Left alone, a planner may take a partial index of the type for its zone
    /// column and visit the rows in that index's order, one random read each.
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
            case .listContains, .listContainsAny, .listAnyBeginsWith, .distance, .hasParent: return false
            }
        }
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
        case .creatorUserRecordID: name = "creatorUserRecordID"
        case .lastModifiedUserRecordID: name = "lastModifiedUserRecordID"
        case .creationDate: name = "creationDate"
        case .modificationDate: name = "modificationDate"
        case .parent: return false
        case .field(let field): name = field
        }
        guard let schema else { return false }
        if let field = schema.field(name), !field.indexes.isEmpty { return true }
        return schema.compoundIndexes.contains { $0.equalityFields.contains(name) || $0.sortField == name }
    }

    /// Whether an index holds the field's own values (a sortable field's, or a compound
    /// index's sort field), not only the folded form a queryable string's equality compares.
    private func hasValueIndex(_ key: QueryKey) -> Bool {
        guard case .field(let name) = key, let schema, let field = schema.field(name) else { return false }
        return field.indexes.contains(.sortable) || (field.indexes.contains(.queryable) && field.type != .string)
            || schema.compoundIndexes.contains { $0.sortField == name }
    }

    /// The least string above every string that starts with `prefix`: its last scalar below
    /// U+10FFFF replaced by the next scalar (surrogates are no scalars), what follows dropped;
    /// nil when there is none (the empty prefix, or one of U+10FFFF alone).
    static func scalarSuccessor(of prefix: String) -> String? {
        var scalars = Array(prefix.unicodeScalars)
        while let last = scalars.popLast() {
            guard last.value < 0x10FFFF else { continue }
            let next = last.value == 0xD7FF ? 0xE000 : last.value + 1
            scalars.append(Unicode.Scalar(next)!)
            var view = String.UnicodeScalarView()
            view.append(contentsOf: scalars)
            return String(view)
        }
        return nil
    }

    /// The leading part of `expression` (a string field's value or equality form) that the
    /// field's index holds, when the dialect indexes prefixes of strings
    /// (``SQLDialect/indexPrefix(_:)``) and the field has an index. A condition or order on it
    /// that the exact one implies lets the index serve the query; the exact one decides.
    private func indexPrefix(_ key: QueryKey, _ expression: String) -> String? {
        guard case .field(let name) = key, schema?.field(name)?.type == .string, isIndexed(key) else { return nil }
        return dialect.indexPrefix(expression)
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

    /// The family a declared field sorts in, when its type has an order.
    private func declaredFamily(_ name: String) -> QueryRules.OrderedFamily? {
        schema?.field(name).flatMap { QueryRules.OrderedFamily(declared: $0.type) }
    }

    /// The SQL expressions a sort key orders by, in Stratus's order (``Stratus/QueryRules``).
    /// A field whose type the schema declares holds one family, so its value orders it (and an
    /// index on the value serves the sort); any other field orders by its value's family rank,
    /// then its value, with values that have no order as missing.
    private func sortExpressions(_ key: CompiledQuery.SortKey) -> [SQLFragment] {
        if let origin = key.distanceFrom, case .field(let name) = key.key {
            return [dialect.distanceKilometres(name, from: origin)]
        }
        guard case .field(let name) = key.key else { return [SQLFragment(sql: dialect.systemColumn(key.key))] }
        if let family = declaredFamily(name) {
            let value = dialect.declaredValue(name, family: family)
            // The index holds the prefix in order: it is read in that order, and only rows
            // with equal prefixes are sorted by their whole value.
            if family == .string, let prefix = indexPrefix(key.key, value) { return [SQLFragment(sql: prefix), SQLFragment(sql: value)] }
            return [SQLFragment(sql: value)]
        }
        return dialect.undeclaredSortColumns(name).map { SQLFragment(sql: $0) }
    }

    /// A position's value of one sort key as the parameters its expressions compare with.
    private func sortValues(_ value: FieldValue?, for key: CompiledQuery.SortKey, columns: Int) -> [SQLValue] {
        guard key.distanceFrom == nil, case .field(let name) = key.key else { return [dialect.sortParameter(value)] }
        guard let family = declaredFamily(name) else { return dialect.undeclaredSortValues(value) }
        // A value of another type sorts as missing (a cursor made before this rule may hold one).
        let declared = value.flatMap { QueryRules.orderedFamily(of: $0) == family ? $0 : nil }
        let parameter = dialect.sortParameter(declared)
        // A string ordered by its index prefix, then its value (``sortExpressions(_:)``).
        return family == .string && columns == 2 ? [dialect.indexPrefix(of: parameter), parameter] : [parameter]
    }

    /// Rows strictly after a position in the query's order: the leading key is a plain range
    /// (`k >= v AND …`) that an index can seek to, so page N costs what page 1 costs. The rest
    /// is one flat disjunction, "equal on the keys before j and after on key j" for each j,
    /// rather than a condition nested once per key: SQLite's parser has a fixed stack, and a
    /// query of many sort keys must still page. NULL (a missing value) sorts first ascending
    /// and last descending; the condition follows that.
    private func keysetCondition(sorts: [SQLFragment], ascending: [Bool], tiebreakAscending: Bool, values sortValues: [SQLValue], recordName: String) -> SQLFragment {
        let keys = sorts + [SQLFragment(sql: dialect.systemColumn(.recordName))]
        let directions = ascending + [tiebreakAscending]
        let values: [SQLValue] = sortValues + [.text(recordName)]

        /// Key `i` holds the position's value.
        func equal(_ i: Int) -> SQLFragment {
            let key = keys[i]
            if case .null = values[i] { return SQLFragment(sql: "\(key.sql) IS NULL", parameters: key.parameters) }
            return SQLFragment(sql: "\(key.sql) = ?", parameters: key.parameters + [values[i]])
        }
        /// Key `i` comes strictly after the position's value, or nil when nothing can.
        func after(_ i: Int) -> SQLFragment? {
            let key = keys[i]
            switch (directions[i], values[i]) {
            case (true, .null):
                return SQLFragment(sql: "\(key.sql) IS NOT NULL", parameters: key.parameters)
            case (false, .null):
                return nil   // nulls come last descending: nothing follows them on this key
            case (let ascending, let value):
                let strict = SQLFragment(sql: "\(key.sql) \(ascending ? ">" : "<") ?", parameters: key.parameters + [value])
                // Missing values sort after everything descending. For the first key the
                // engine reads them separately (nullTail), which keeps the condition a seek.
                guard !ascending && i > 0 else { return strict }
                return SQLFragment(sql: "(\(strict.sql) OR \(key.sql) IS NULL)", parameters: strict.parameters + key.parameters)
            }
        }

        var terms: [SQLFragment] = []
        var prefix = SQLFragment(sql: "")
        for i in keys.indices {
            if let after = after(i) {
                terms.append(prefix.sql.isEmpty ? after : SQLFragment(sql: "(\(prefix.sql) AND \(after.sql))", parameters: prefix.parameters + after.parameters))
            }
            let equal = equal(i)
            prefix = prefix.sql.isEmpty ? equal : SQLFragment(sql: prefix.sql + " AND " + equal.sql, parameters: prefix.parameters + equal.parameters)
        }
        var condition = terms.isEmpty
            ? SQLFragment(sql: dialect.falseLiteral)
            : SQLFragment(sql: "(" + terms.map(\.sql).joined(separator: " OR ") + ")", parameters: terms.flatMap(\.parameters))
        if values[0] != .null {
            let key = keys[0]
            condition = SQLFragment(sql: "(\(key.sql) \(directions[0] ? ">=" : "<=") ? AND \(condition.sql))",
                                    parameters: key.parameters + [values[0]] + condition.parameters)
        }
        return condition
    }

    // MARK: - Predicates

    private func expression(_ predicate: QueryPredicate, residual: inout [(words: [String], all: Bool)]) throws -> SQLFragment {
        switch predicate {
        case .all: return SQLFragment(sql: dialect.trueLiteral)
        case .none: return SQLFragment(sql: dialect.falseLiteral)
        case .and(let parts):
            var fragments: [SQLFragment] = []
            for part in parts { fragments.append(try expression(part, residual: &residual)) }
            return SQLFragment(sql: "(" + fragments.map(\.sql).joined(separator: " AND ") + ")", parameters: fragments.flatMap(\.parameters))
        case .not(.condition(let condition)):
            let (test, guardFragment) = try self.condition(condition, residual: &residual)
            return SQLFragment(sql: "(NOT \(test.sql) AND \(guardFragment.sql))", parameters: test.parameters + guardFragment.parameters)
        case .not:
            throw StratusError(.invalidArguments, "NOT is only allowed over a single comparison")
        case .condition(let condition):
            // The test first, the type guard second: most rows fail the test, and the guard
            // then needs no second look into the document.
            let (test, guardFragment) = try self.condition(condition, residual: &residual)
            return SQLFragment(sql: "(\(test.sql) AND \(guardFragment.sql))", parameters: test.parameters + guardFragment.parameters)
        }
    }

    /// Whether the record holds `key` at all: a field any value of any type; the system keys always.
    private func holds(_ key: QueryKey) -> SQLFragment {
        guard case .field(let name) = key else { return SQLFragment(sql: dialect.trueLiteral) }
        return SQLFragment(sql: "\(dialect.tag(name)) IS NOT NULL")
    }

    /// A condition as (the test on the value, the record has a value of a fitting type).
    private func condition(_ condition: Condition, residual: inout [(words: [String], all: Bool)]) throws -> (SQLFragment, SQLFragment) {
        let always = SQLFragment(sql: dialect.trueLiteral)
        switch condition {
        case .compare(let key, let op, let value):
            let (column, guardFragment) = try scalar(key, value)
            if case .field(let name) = key, case .string(let text) = value, op == .equal || op == .notEqual {
                let parameters = [dialect.textParameter(QueryRules.equalityKey(text))]
                if !isIndexed(key), let scanned = dialect.scanEqualityValue(name) {
                    return (SQLFragment(sql: "\(scanned) \(op.sqlOperator) ?", parameters: parameters), always)
                }
                let equality = dialect.equalityValue(name)
                let test = SQLFragment(sql: "\(equality) \(op.sqlOperator) ?", parameters: parameters)
                if op == .equal, let prefix = indexPrefix(key, equality) {
                    return (SQLFragment(sql: "(\(prefix) = ? AND \(test.sql))", parameters: parameters.map(dialect.indexPrefix(of:)) + parameters), guardFragment)
                }
                return (test, guardFragment)
            }
            let test = SQLFragment(sql: "\(column) \(op.sqlOperator) ?", parameters: [parameter(for: key, value)])
            if case .string = value, op != .notEqual, let prefix = indexPrefix(key, column) {
                // Non-strict: values beyond the bound can share its prefix.
                let bound = op == .greater || op == .greaterOrEqual ? ">=" : "<="
                return (SQLFragment(sql: "(\(prefix) \(bound) ? AND \(test.sql))", parameters: test.parameters.map(dialect.indexPrefix(of:)) + test.parameters), guardFragment)
            }
            return (test, guardFragment)
        case .between(let key, let low, let high):
            let (column, guardFragment) = try scalar(key, low)
            let test = SQLFragment(sql: "\(column) BETWEEN ? AND ?", parameters: [parameter(for: key, low), parameter(for: key, high)])
            if case .string = low, let prefix = indexPrefix(key, column) {
                return (SQLFragment(sql: "(\(prefix) BETWEEN ? AND ? AND \(test.sql))", parameters: test.parameters.map(dialect.indexPrefix(of:)) + test.parameters), guardFragment)
            }
            return (test, guardFragment)
        case .in(let key, let values):
            // An empty list names no type: its NOT matches the records that hold the field.
            guard let first = values.first else { return (SQLFragment(sql: dialect.falseLiteral), holds(key)) }
            let (column, guardFragment) = try scalar(key, first)
            if case .field(let name) = key, case .string = first {
                let keys: [SQLValue] = values.map { if case .string(let text) = $0 { dialect.textParameter(QueryRules.equalityKey(text)) } else { .null } }
                let list = " IN (" + keys.map { _ in "?" }.joined(separator: ", ") + ")"
                if !isIndexed(key), let scanned = dialect.scanEqualityValue(name) {
                    return (SQLFragment(sql: scanned + list, parameters: keys), always)
                }
                let equality = dialect.equalityValue(name)
                if let prefix = indexPrefix(key, equality) {
                    return (SQLFragment(sql: "(\(prefix)\(list) AND \(equality)\(list))", parameters: keys.map(dialect.indexPrefix(of:)) + keys), guardFragment)
                }
                return (SQLFragment(sql: equality + list, parameters: keys), guardFragment)
            }
            let bounds = values.map { parameter(for: key, $0) }
            return (SQLFragment(sql: "\(column) IN (" + bounds.map { _ in "?" }.joined(separator: ", ") + ")", parameters: bounds), guardFragment)
        case .beginsWith(let key, let prefix):
            let (column, guardFragment) = try scalar(key, .string(prefix))
            let test = dialect.startsWith(column, prefix)
            // Strings order by Unicode scalars: every string that starts with the prefix lies
            // from it up to (not including) the prefix whose last scalar comes next, a range
            // an index of the values serves (the test above stays the exact one).
            // (SQLite compares text only up to a NUL, which a bound must not hold.)
            guard hasValueIndex(key), !prefix.unicodeScalars.contains("\0"), let above = Self.scalarSuccessor(of: prefix) else { return (test, guardFragment) }
            let bounds = [dialect.parameter(.string(prefix)), dialect.parameter(.string(above))]
            if let indexed = indexPrefix(key, column) {
                // Non-strict: a cut value can equal the cut bound.
                return (SQLFragment(sql: "(\(indexed) >= ? AND \(indexed) <= ? AND \(test.sql))", parameters: bounds.map(dialect.indexPrefix(of:)) + test.parameters), guardFragment)
            }
            return (SQLFragment(sql: "(\(column) >= ? AND \(column) < ? AND \(test.sql))", parameters: bounds + test.parameters), guardFragment)
        case .listContains(let key, let value):
            let (name, family) = try listField(key, value)
            return (dialect.anyElement(of: name, family: family) { element in SQLFragment(sql: "\(element) = ?", parameters: [dialect.parameter(value)]) },
                    SQLFragment(sql: "\(dialect.tag(name)) IN (\(family.listTags))"))
        case .listContainsAny(let key, let values):
            guard let first = values.first else { return (SQLFragment(sql: dialect.falseLiteral), holds(key)) }
            let (name, family) = try listField(key, first)
            return (dialect.anyElement(of: name, family: family) { element in
                        SQLFragment(sql: "\(element) IN (" + values.map { _ in "?" }.joined(separator: ", ") + ")", parameters: values.map(dialect.parameter))
                    },
                    SQLFragment(sql: "\(dialect.tag(name)) IN (\(family.listTags))"))
        case .listAnyBeginsWith(let key, let prefix):
            let (name, family) = try listField(key, .string(prefix))
            return (dialect.anyElement(of: name, family: family) { element in dialect.startsWith(element, prefix) },
                    SQLFragment(sql: "\(dialect.tag(name)) = 'SL'"))
        case .distance(let key, let origin, let op, let kilometers):
            guard case .field(let name) = key else { throw Self.unchecked(condition) }
            var distance = dialect.distanceKilometres(name, from: origin)
            distance.sql += " \(op.sqlOperator) ?"
            distance.parameters.append(.real(kilometers))
            return (distance, SQLFragment(sql: "\(dialect.tag(name)) = 'L'"))
        case .hasParent(let present):
            return (SQLFragment(sql: "\(dialect.systemColumn(.parent)) IS \(present ? "NOT " : "")NULL"), always)
        case .tokens(let words, let all):
            guard !words.isEmpty else { return (SQLFragment(sql: dialect.falseLiteral), always) }
            if searchableFields.isEmpty {
                guard let test = dialect.wordsWithoutIndex(words, all: all) else {
                    residual.append((words, all))
                    return (always, always)
                }
                return (test, always)
            }
            // Every word is looked up in the word index: one IN-list for any word, one lookup
            // per word (intersected) for all words. A word the index holds only the start of
            // finds the records with a word that starts so; the engine keeps those with the word.
            let keys = words.map(dialect.wordKey)
            if keys != words || words.contains(where: dialect.wordKeyMayStandForLongerWords) { residual.append((words, all)) }
            if all && keys.count > 1 {
                let lookups = keys.map { _ in "r.record_name IN (SELECT t.record_name FROM record_tokens t WHERE t.zone_id = ? AND t.token = ?)" }
                return (SQLFragment(sql: "(" + lookups.joined(separator: " AND ") + ")", parameters: keys.flatMap { [Self.zonePlaceholder, SQLValue.text($0)] }), always)
            }
            let list = keys.map { _ in "?" }.joined(separator: ", ")
            let sql = "r.record_name IN (SELECT t.record_name FROM record_tokens t WHERE t.zone_id = ? AND t.token IN (\(list)))"
            return (SQLFragment(sql: sql, parameters: [Self.zonePlaceholder] + keys.map(SQLValue.text)), always)
        }
    }

    /// The column a scalar condition compares and its type guard.
    private func scalar(_ key: QueryKey, _ value: FieldValue) throws -> (String, SQLFragment) {
        guard case .field(let name) = key else { return (dialect.systemColumn(key), SQLFragment(sql: dialect.trueLiteral)) }
        guard let family = QueryRules.orderedFamily(of: value) else { throw Self.unchecked(key, value) }
        // An indexed declared field's index holds its declared values (``SQLDialect/declaredValue(_:family:)``):
        // the condition compares that expression, so that the index serves it.
        let column = declaredFamily(name) == family && isIndexed(key) ? dialect.declaredValue(name, family: family) : dialect.value(name, family: family)
        return (column, SQLFragment(sql: "\(dialect.tag(name)) IN (\(family.scalarTags))"))
    }

    /// A compared value as a parameter: system keys compare references by record name.
    private func parameter(for key: QueryKey, _ value: FieldValue) -> SQLValue {
        if case .field = key { return dialect.parameter(value) }
        if case .reference(let reference) = value { return .text(reference.recordID.recordName) }
        return dialect.parameter(value)
    }

    /// A list condition's field and the family of the elements it looks for. When the schema
    /// declares the field as a scalar, the form is CloudKit's string CONTAINS (a substring
    /// search), which CloudKit rejects.
    private func listField(_ key: QueryKey, _ value: FieldValue) throws -> (String, QueryRules.OrderedFamily) {
        guard case .field(let name) = key, let family = QueryRules.orderedFamily(of: value) else { throw Self.unchecked(key, value) }
        if let declared = schema?.field(name)?.type, !declared.isList {
            throw StratusError(.invalidArguments, "'\(name)' is a \(declared.rawValue) field: CONTAINS, ANY and IN-a-field work on lists only, and CloudKit has no substring search (use BEGINSWITH, or self CONTAINS for words)")
        }
        return (name, family)
    }

    private static func unchecked(_ key: QueryKey, _ value: FieldValue) -> StratusError {
        StratusError(.internalError, "a condition on '\(key)' with a \(value.type.rawValue) value reached SQL unchecked")
    }

    private static func unchecked(_ condition: Condition) -> StratusError {
        StratusError(.internalError, "the condition \(condition) reached SQL unchecked")
    }
}
