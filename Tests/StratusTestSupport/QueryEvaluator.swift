import Foundation
import Stratus

/// A brute-force reference implementation of query matching and ordering for the whole query
/// language, following Stratus's rules as ``QueryRules`` writes them (not any engine's SQL).
/// Engines must return exactly what this computes.
///
/// - A condition on a field holds only when the record has the field with a value of a fitting
///   family (``QueryRules``): strings, numbers (`INT64` and `DOUBLE` together), timestamps,
///   references (by record name). List conditions need a list of the fitting family. `NOT`
///   holds when the field fits and the condition does not.
/// - String equality (`==`, `!=`, `IN`) on fields compares ``QueryRules/equalityKey(_:)`` of
///   both sides; ordering comparisons, `BETWEEN`, `BEGINSWITH`, list elements and system fields
///   compare exactly, strings by Unicode scalars.
/// - `self CONTAINS` compares `TextSearch.tokens` of the search text with the tokens of the
///   record's string and string-list fields (only the searchable ones when the schema declares
///   some); a search without words matches nothing.
/// - Distances are haversine kilometres on a sphere 12,742.0176 km across
///   (``distanceKilometres(from:to:)``).
/// - Ordering: ``QueryRules/sortOrder(_:_:)`` of ``QueryRules/sortValue(of:for:)``; ties are
///   broken by record name, in the direction of the last sort key.
public enum QueryEvaluator {
    /// A predicate the evaluator does not model.
    public struct Unsupported: Error, CustomStringConvertible {
        public let description: String
    }

    /// The records of the query's type that match its predicate, in the query's order.
    ///
    /// - Parameter searchableFields: the fields `self CONTAINS` searches; `nil` (or empty, as
    ///   when a schema declares no searchable field) means every string and string-list field.
    /// - Throws: ``Unsupported`` for conditions outside the modelled language.
    public static func evaluate(_ query: Query, over records: [Record], searchableFields: [String]? = nil) throws -> [Record] {
        let matching = try records.filter { record in
            try record.recordType == query.recordType && matches(record, query.predicate, searchableFields: searchableFields)
        }
        return sorted(matching, by: query.sortDescriptors ?? [])
    }

    /// Whether a record matches a predicate.
    public static func matches(_ record: Record, _ predicate: QueryPredicate, searchableFields: [String]? = nil) throws -> Bool {
        switch predicate {
        case .all: return true
        case .none: return false
        case .and(let parts):
            for part in parts where try !matches(record, part, searchableFields: searchableFields) { return false }
            return true
        case .not(.condition(let condition)):
            let (fits, holds) = try evaluate(condition, record, searchableFields: searchableFields)
            return fits && !holds
        case .not:
            throw Unsupported(description: "NOT over a compound predicate")
        case .condition(let condition):
            let (fits, holds) = try evaluate(condition, record, searchableFields: searchableFields)
            return fits && holds
        }
    }

    // MARK: - Values as the rules compare them

    /// What kinds of stored values a compared value fits.
    public typealias Family = QueryRules.OrderedFamily

    /// The family of a compared value.
    ///
    /// - Throws: ``Unsupported`` for values queries cannot compare (bytes, locations, assets, lists).
    public static func family(of value: FieldValue) throws -> Family {
        guard let family = QueryRules.orderedFamily(of: value) else {
            throw Unsupported(description: "comparison with a \(value.type.rawValue) value")
        }
        return family
    }

    /// The family and elements of a list value that queries can look into.
    static func listElements(_ value: FieldValue) -> (Family, [FieldValue])? {
        switch value {
        case .stringList(let v): (.string, v.map(FieldValue.string))
        case .int64List(let v): (.number, v.map(FieldValue.int64))
        case .doubleList(let v): (.number, v.map(FieldValue.double))
        case .dateList(let v): (.timestamp, v.map(FieldValue.date))
        case .referenceList(let v): (.reference, v.map(FieldValue.reference))
        default: nil
        }
    }

    /// Whether `low` sorts after `high` (a generator keeps BETWEEN bounds in order with it).
    public static func isAfter(_ low: FieldValue, _ high: FieldValue) -> Bool {
        QueryRules.sortOrder(low, high) == .orderedDescending
    }

    /// The record's value for a key, and whether it fits a family (system keys fit their own).
    static func operand(_ key: QueryKey, _ record: Record, family: Family) -> (fits: Bool, value: FieldValue?) {
        switch key {
        case .recordName: return (family == .string || family == .reference, .string(record.recordID.recordName))
        case .creatorUserRecordID:
            return (family == .string || family == .reference, record.systemFields.creatorUserRecordID.map { .string($0.recordName) })
        case .lastModifiedUserRecordID:
            return (family == .string || family == .reference, record.systemFields.lastModifiedUserRecordID.map { .string($0.recordName) })
        case .parent: return (family == .string || family == .reference, record.parent.map { .string($0.recordID.recordName) })
        case .creationDate: return (family == .timestamp, record.creationDate.map(FieldValue.date))
        case .modificationDate: return (family == .timestamp, record.modificationDate.map(FieldValue.date))
        case .field(let name):
            guard let stored = record.fieldValue(forKey: name), QueryRules.orderedFamily(of: stored) == family else { return (false, nil) }
            return (true, stored)
        }
    }

    /// Whether the record holds `key` at all (a field any value; a parent when it has one; the
    /// other system keys always): what an empty IN list's NOT matches, as Stratus's rules say.
    static func holds(_ key: QueryKey, _ record: Record) -> Bool {
        switch key {
        case .field(let name): return record.fieldValue(forKey: name) != nil
        case .parent: return record.parent != nil
        default: return true
        }
    }

    /// A compared value as system keys see it: a reference or string compared with a record
    /// name or user is its name.
    static func asSystemOperand(_ value: FieldValue, for key: QueryKey) -> FieldValue {
        switch (key, value) {
        case (.recordName, .reference(let r)), (.creatorUserRecordID, .reference(let r)), (.lastModifiedUserRecordID, .reference(let r)),
             (.parent, .reference(let r)):
            .string(r.recordID.recordName)
        default: value
        }
    }

    /// Whether `bytes` starts with the UTF-8 bytes of `prefix` (what `substr(x, 1, length(p)) = p`
    /// does on valid UTF-8: a prefix of code points, not of characters).
    static func hasBinaryPrefix(_ bytes: [UInt8], _ prefix: String) -> Bool {
        bytes.starts(with: Array(prefix.utf8))
    }

    /// (the record has a fitting value, the condition holds on it).
    static func evaluate(_ condition: Condition, _ record: Record, searchableFields: [String]?) throws -> (Bool, Bool) {
        switch condition {
        case .compare(let key, let op, let value):
            if case .field(let name) = key, case .string(let text) = value, op == .equal || op == .notEqual {
                guard case .string(let stored)? = record.fieldValue(forKey: name) else { return (false, false) }
                let same = FieldValue.string(QueryRules.equalityKey(stored)) == .string(QueryRules.equalityKey(text))
                return (true, op == .equal ? same : !same)
            }
            let (fits, operand) = operand(key, record, family: try family(of: value))
            guard fits, let operand else { return (false, false) }
            return (true, compare(operand, op, asSystemOperand(value, for: key)))
        case .between(let key, let low, let high):
            let (fits, operand) = operand(key, record, family: try family(of: low))
            guard fits, let operand else { return (false, false) }
            return (true, compare(operand, .greaterOrEqual, asSystemOperand(low, for: key)) && compare(operand, .lessOrEqual, asSystemOperand(high, for: key)))
        case .in(let key, let values):
            guard let first = values.first else { return (Self.holds(key, record), false) }
            if case .field(let name) = key, case .string = first {
                guard case .string(let stored)? = record.fieldValue(forKey: name) else { return (false, false) }
                let folded = FieldValue.string(QueryRules.equalityKey(stored))
                return (true, values.contains { if case .string(let text) = $0 { .string(QueryRules.equalityKey(text)) == folded } else { false } })
            }
            let (fits, operand) = operand(key, record, family: try family(of: first))
            guard fits, let operand else { return (false, false) }
            return (true, values.contains { compare(operand, .equal, asSystemOperand($0, for: key)) })
        case .beginsWith(let key, let prefix):
            let (fits, operand) = operand(key, record, family: .string)
            guard fits, case .string(let text)? = operand else { return (false, false) }
            return (true, hasBinaryPrefix(Array(text.utf8), prefix))
        case .listContains(let key, let value):
            let wantedFamily = try family(of: value)
            guard case .field(let name) = key, let stored = record.fieldValue(forKey: name),
                  let (family, elements) = listElements(stored), family == wantedFamily else { return (false, false) }
            return (true, elements.contains { compare($0, .equal, value) })
        case .listContainsAny(let key, let values):
            guard let first = values.first else { return (Self.holds(key, record), false) }
            let wantedFamily = try family(of: first)
            guard case .field(let name) = key, let stored = record.fieldValue(forKey: name),
                  let (family, elements) = listElements(stored), family == wantedFamily else { return (false, false) }
            return (true, elements.contains { element in values.contains { compare(element, .equal, $0) } })
        case .listAnyBeginsWith(let key, let prefix):
            guard case .field(let name) = key, case .stringList(let list)? = record.fieldValue(forKey: name) else { return (false, false) }
            return (true, list.contains { hasBinaryPrefix(Array($0.utf8), prefix) })
        case .distance(let key, let origin, let op, let kilometers):
            guard case .field(let name) = key, case .location(let location)? = record.fieldValue(forKey: name) else { return (false, false) }
            return (true, compare(.double(distanceKilometres(from: origin, to: location)), op, .double(kilometers)))
        case .hasParent(let present):
            return (true, (record.parent != nil) == present)
        case .tokens(let words, let all):
            guard !words.isEmpty else { return (true, false) }
            let have = recordWords(record, searchableFields: searchableFields)
            return (true, all ? words.allSatisfy(have.contains) : words.contains(where: have.contains))
        }
    }

    /// `lhs op rhs` under ``QueryRules/conditionOrder(_:_:)``; false across families.
    static func compare(_ lhs: FieldValue, _ op: ComparisonOperator, _ rhs: FieldValue) -> Bool {
        guard let order = QueryRules.conditionOrder(lhs, rhs) else { return false }
        switch op {
        case .equal: return order == .orderedSame
        case .notEqual: return order != .orderedSame
        case .less: return order == .orderedAscending
        case .lessOrEqual: return order != .orderedDescending
        case .greater: return order == .orderedDescending
        case .greaterOrEqual: return order != .orderedAscending
        }
    }

    /// The search words of a record: `TextSearch.tokens` of its string and string-list fields
    /// (only `searchableFields` when given and not empty).
    public static func recordWords(_ record: Record, searchableFields: [String]?) -> Set<String> {
        let names = (searchableFields?.isEmpty ?? true) ? record.allKeys() : searchableFields!
        var words: Set<String> = []
        for name in names {
            switch record.fieldValue(forKey: name) {
            case .string(let text)?: words.formUnion(TextSearch.tokens(in: text))
            case .stringList(let texts)?: for text in texts { words.formUnion(TextSearch.tokens(in: text)) }
            default: continue
            }
        }
        return words
    }

    /// Great-circle distance in kilometres, written as the SQL stores compute it (haversine,
    /// `radians(x)` as `x * (π / 180)`, Earth's diameter 12,742.0176 km).
    public static func distanceKilometres(from origin: Location, to location: Location) -> Double {
        func radians(_ degrees: Double) -> Double { degrees * (Double.pi / 180.0) }
        let a = pow(sin(radians(location.latitude - origin.latitude) / 2), 2)
            + cos(radians(origin.latitude)) * cos(radians(location.latitude)) * pow(sin(radians(location.longitude - origin.longitude) / 2), 2)
        return 12742.0176 * asin(sqrt(a))
    }

    // MARK: - Ordering

    /// The value a record sorts by for a sort descriptor (`nil`: missing), where `schema` may
    /// declare the field's type (a value of another type sorts as missing).
    public static func sortValue(_ record: Record, _ descriptor: RecordSortDescriptor, declaredIn schema: RecordTypeSchema? = nil) -> FieldValue? {
        if let origin = descriptor.distanceFrom, case .field(let name) = descriptor.queryKey {
            guard case .location(let location)? = record.fieldValue(forKey: name) else { return nil }
            return .double(distanceKilometres(from: origin, to: location))
        }
        return QueryRules.sortValue(of: record, for: descriptor.queryKey, declaredIn: schema)
    }

    /// Records in the order of `descriptors`, ties broken by record name in the direction of the
    /// last descriptor (ascending when there is none), with the field types `schema` declares.
    public static func sorted(_ records: [Record], by descriptors: [RecordSortDescriptor], declaredIn schema: RecordTypeSchema? = nil) -> [Record] {
        let tiebreakAscending = descriptors.last?.ascending ?? true
        let keyed = records.map { record in (record, descriptors.map { sortValue(record, $0, declaredIn: schema) }) }
        return keyed.sorted { a, b in
            for (index, descriptor) in descriptors.enumerated() {
                let order = QueryRules.sortOrder(a.1[index], b.1[index])
                if order == .orderedSame { continue }
                return descriptor.ascending ? order == .orderedAscending : order == .orderedDescending
            }
            let names = QueryRules.compareScalars(a.0.recordID.recordName, b.0.recordID.recordName)
            return tiebreakAscending ? names == .orderedAscending : names == .orderedDescending
        }.map(\.0)
    }
}
