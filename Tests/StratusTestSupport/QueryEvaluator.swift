import Foundation
import Stratus

/// A brute-force reference implementation of query matching and ordering for the whole query
/// language. Engines must return exactly what this computes.
///
/// Semantics (shared by every engine):
/// - A condition on a field holds only when the record has the field with a value of a fitting
///   type: strings with strings, numbers (`INT64`, `DOUBLE`) with numbers, dates with dates,
///   references with references (compared by record name). An `INT64` field never matches a
///   string. List conditions need a list of the fitting type (`INT64_LIST` and `DOUBLE_LIST`
///   both fit numbers). `NOT` holds when the field fits and the condition does not.
/// - String equality (`==`, `!=`, `IN`) on fields ignores case (both sides through
///   `TextSearch.equalityKey`); ordering comparisons, `BETWEEN`, `BEGINSWITH`, list elements and
///   system fields compare exactly, strings by their UTF-8 bytes (SQLite's `BINARY` collation).
/// - `self CONTAINS` compares `TextSearch.tokens` of the search text with the tokens of the
///   record's string and string-list fields (only the searchable ones when the schema declares
///   some); a search without words matches nothing.
/// - Distances are haversine kilometres on a sphere 12,742.0176 km across, computed as SQL
///   stores compute them (``distanceKilometres(from:to:)``).
/// - Ordering: a missing value sorts first ascending and last descending; numbers sort before
///   strings; ties are broken by record name, in the direction of the last sort key.
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
        return sorted(matching, by: query.sortDescriptors)
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

    // MARK: - Values as a store compares them

    /// A value as SQL-like stores compare and order it.
    public enum StoreValue: Comparable, Hashable, Sendable {
        case null
        case integer(Int64)
        case real(Double)
        case text([UInt8])

        var rank: Int {
            switch self {
            case .null: 0
            case .integer, .real: 1
            case .text: 2
            }
        }

        public static func < (lhs: StoreValue, rhs: StoreValue) -> Bool {
            switch (lhs, rhs) {
            case (.integer(let a), .integer(let b)): return a < b
            case (.integer(let a), .real(let b)): return Double(a) < b
            case (.real(let a), .integer(let b)): return a < Double(b)
            case (.real(let a), .real(let b)): return a < b
            case (.text(let a), .text(let b)): return a.lexicographicallyPrecedes(b)
            default: return lhs.rank < rhs.rank
            }
        }

        public static func == (lhs: StoreValue, rhs: StoreValue) -> Bool {
            switch (lhs, rhs) {
            case (.null, .null): return true
            case (.integer(let a), .integer(let b)): return a == b
            case (.integer(let a), .real(let b)), (.real(let b), .integer(let a)): return Double(a) == b
            case (.real(let a), .real(let b)): return a == b
            case (.text(let a), .text(let b)): return a == b
            default: return false
            }
        }

        public func hash(into hasher: inout Hasher) {
            switch self {
            case .null: hasher.combine(0)
            case .integer(let i): hasher.combine(Double(i))
            case .real(let d): hasher.combine(d)
            case .text(let t): hasher.combine(t)
            }
        }
    }

    /// What kinds of stored values a compared value fits.
    public enum Family: Sendable { case string, number, date, reference }

    /// The family of a compared value.
    ///
    /// - Throws: ``Unsupported`` for values queries cannot compare (bytes, locations, assets, lists).
    public static func family(of value: FieldValue) throws -> Family {
        switch value {
        case .string: return .string
        case .int64, .double: return .number
        case .date: return .date
        case .reference: return .reference
        default: throw Unsupported(description: "comparison with a \(value.type.rawValue) value")
        }
    }

    static func scalarFamily(of value: FieldValue) -> Family? {
        try? family(of: value)
    }

    /// The family and elements of a list value that queries can look into.
    static func listElements(_ value: FieldValue) -> (Family, [FieldValue])? {
        switch value {
        case .stringList(let v): (.string, v.map(FieldValue.string))
        case .int64List(let v): (.number, v.map(FieldValue.int64))
        case .doubleList(let v): (.number, v.map(FieldValue.double))
        case .dateList(let v): (.date, v.map(FieldValue.date))
        case .referenceList(let v): (.reference, v.map(FieldValue.reference))
        default: nil
        }
    }

    /// A value as the store compares it.
    public static func comparable(_ value: FieldValue?) -> StoreValue {
        switch value {
        case nil: .null
        case .string(let s)?: .text(Array(s.utf8))
        case .int64(let i)?: .integer(i)
        case .double(let d)?: .real(d)
        case .date(let d)?: .real(d.timeIntervalSinceReferenceDate)
        case .reference(let r)?: .text(Array(r.recordID.recordName.utf8))
        case .bytes(let b)?: .text(Array(b.base64EncodedString().utf8))
        case .location(let l)?: .real(l.latitude)
        case .asset(let a)?: .text(Array((a.storedIdentifier ?? "").utf8))
        case let other?: .text(Array(String(describing: other).utf8))
        }
    }

    /// The lowercase form string equality compares, as bytes.
    static func equalityBytes(_ text: String) -> [UInt8] {
        Array(TextSearch.equalityKey(text).utf8)
    }

    /// The record's value for a key, and whether it fits a family (system keys always fit).
    static func operand(_ key: QueryKey, _ record: Record, family: Family) -> (fits: Bool, value: StoreValue) {
        switch key {
        case .recordName: return (family == .string || family == .reference, comparable(.string(record.recordID.recordName)))
        case .creatorUserRecordID:
            return (family == .string || family == .reference, comparable(record.creatorUserRecordID.map { .string($0.recordName) }))
        case .lastModifiedUserRecordID:
            return (family == .string || family == .reference, comparable(record.lastModifiedUserRecordID.map { .string($0.recordName) }))
        case .creationDate: return (family == .date, comparable(record.creationDate.map(FieldValue.date)))
        case .modificationDate: return (family == .date, comparable(record.modificationDate.map(FieldValue.date)))
        case .field(let name):
            guard let stored = record.value(forKey: name), scalarFamily(of: stored) == family else { return (false, .null) }
            return (true, comparable(stored))
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
                guard case .string(let stored)? = record.value(forKey: name) else { return (false, false) }
                let same = equalityBytes(stored) == equalityBytes(text)
                return (true, op == .equal ? same : !same)
            }
            let (fits, operand) = operand(key, record, family: try family(of: value))
            guard fits, operand != .null else { return (false, false) }
            return (true, compare(operand, op, comparable(value)))
        case .between(let key, let low, let high):
            let (fits, operand) = operand(key, record, family: try family(of: low))
            guard fits, operand != .null else { return (false, false) }
            let lo = comparable(low), hi = comparable(high)
            return (true, !(operand < lo) && !(hi < operand))
        case .in(let key, let values):
            guard let first = values.first else { return (true, false) }
            if case .field(let name) = key, case .string = first {
                guard case .string(let stored)? = record.value(forKey: name) else { return (false, false) }
                let folded = equalityBytes(stored)
                return (true, values.contains { if case .string(let text) = $0 { equalityBytes(text) == folded } else { false } })
            }
            let (fits, operand) = operand(key, record, family: try family(of: first))
            guard fits, operand != .null else { return (false, false) }
            return (true, values.contains { comparable($0) == operand })
        case .beginsWith(let key, let prefix):
            let (fits, operand) = operand(key, record, family: .string)
            guard fits, case .text(let bytes) = operand else { return (false, false) }
            return (true, hasBinaryPrefix(bytes, prefix))
        case .listContains(let key, let value):
            let wantedFamily = try family(of: value)
            guard case .field(let name) = key, let stored = record.value(forKey: name),
                  let (family, elements) = listElements(stored), family == wantedFamily else { return (false, false) }
            let wanted = comparable(value)
            return (true, elements.contains { comparable($0) == wanted })
        case .listContainsAny(let key, let values):
            guard let first = values.first else { return (true, false) }
            let wantedFamily = try family(of: first)
            guard case .field(let name) = key, let stored = record.value(forKey: name),
                  let (family, elements) = listElements(stored), family == wantedFamily else { return (false, false) }
            let wanted = values.map(comparable)
            return (true, elements.contains { element in wanted.contains(comparable(element)) })
        case .listAnyBeginsWith(let key, let prefix):
            guard case .field(let name) = key, case .stringList(let list)? = record.value(forKey: name) else { return (false, false) }
            return (true, list.contains { hasBinaryPrefix(Array($0.utf8), prefix) })
        case .distance(let key, let origin, let op, let kilometers):
            guard case .field(let name) = key, case .location(let location)? = record.value(forKey: name) else { return (false, false) }
            return (true, compare(.real(distanceKilometres(from: origin, to: location)), op, .real(kilometers)))
        case .tokens(let words, let all):
            guard !words.isEmpty else { return (true, false) }
            let have = recordWords(record, searchableFields: searchableFields)
            return (true, all ? words.allSatisfy(have.contains) : words.contains(where: have.contains))
        }
    }

    static func compare(_ lhs: StoreValue, _ op: ComparisonOperator, _ rhs: StoreValue) -> Bool {
        switch op {
        case .equal: lhs == rhs
        case .notEqual: lhs != rhs
        case .less: lhs < rhs
        case .lessOrEqual: lhs < rhs || lhs == rhs
        case .greater: rhs < lhs
        case .greaterOrEqual: rhs < lhs || lhs == rhs
        }
    }

    /// The search words of a record: `TextSearch.tokens` of its string and string-list fields
    /// (only `searchableFields` when given and not empty).
    public static func recordWords(_ record: Record, searchableFields: [String]?) -> Set<String> {
        let names = (searchableFields?.isEmpty ?? true) ? record.allKeys() : searchableFields!
        var words: Set<String> = []
        for name in names {
            switch record.value(forKey: name) {
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

    /// The value a record sorts by for a sort descriptor.
    public static func sortValue(_ record: Record, _ descriptor: RecordSortDescriptor) -> StoreValue {
        switch descriptor.queryKey {
        case .recordName: return comparable(.string(record.recordID.recordName))
        case .creationDate: return comparable(record.creationDate.map(FieldValue.date))
        case .modificationDate: return comparable(record.modificationDate.map(FieldValue.date))
        case .creatorUserRecordID: return comparable(record.creatorUserRecordID.map { .string($0.recordName) })
        case .lastModifiedUserRecordID: return comparable(record.lastModifiedUserRecordID.map { .string($0.recordName) })
        case .field(let name):
            if let origin = descriptor.distanceFrom {
                guard case .location(let location)? = record.value(forKey: name) else { return .null }
                return .real(distanceKilometres(from: origin, to: location))
            }
            return comparable(record.value(forKey: name))
        }
    }

    /// Records in the order of `descriptors`, ties broken by record name in the direction of the
    /// last descriptor (ascending when there is none).
    public static func sorted(_ records: [Record], by descriptors: [RecordSortDescriptor]) -> [Record] {
        let tiebreakAscending = descriptors.last?.ascending ?? true
        let keyed = records.map { record in
            (record, descriptors.map { sortValue(record, $0) }, Array(record.recordID.recordName.utf8))
        }
        return keyed.sorted { a, b in
            for (index, descriptor) in descriptors.enumerated() {
                let x = a.1[index], y = b.1[index]
                if x == y { continue }
                return descriptor.ascending ? x < y : y < x
            }
            return tiebreakAscending ? a.2.lexicographicallyPrecedes(b.2) : b.2.lexicographicallyPrecedes(a.2)
        }.map(\.0)
    }
}
