import Foundation
import Stratus

/// A brute-force reference implementation of query matching and ordering, for the predicate
/// subset the conformance suite uses. Engines must return exactly what this computes.
///
/// Semantics (shared by every engine):
/// - A condition on a field holds only when the record has the field with a value of a fitting
///   type: strings with strings, numbers (`INT64`, `DOUBLE`) with numbers, dates with dates,
///   references with references (compared by record name). An `INT64` field never matches a
///   string. `NOT` holds when the field fits and the condition does not.
/// - String equality (`==`, `!=`, `IN`) on fields ignores case (both sides lowercased, see
///   `TextSearch.equalityKey`); ordering comparisons, `BEGINSWITH`, list `CONTAINS` and
///   record names compare UTF-8 bytes exactly.
/// - Ordering: a missing value sorts first ascending and last descending; numbers sort before
///   strings; ties are broken by record name, in the direction of the last sort key.
public enum QueryEvaluator {
    /// A predicate the evaluator does not model.
    public struct Unsupported: Error, CustomStringConvertible {
        public let description: String
    }

    /// The records of the query's type that match its predicate, in the query's order.
    ///
    /// - Throws: ``Unsupported`` for conditions outside the modelled subset.
    public static func evaluate(_ query: Query, over records: [Record]) throws -> [Record] {
        let matching = try records.filter { record in
            try record.recordType == query.recordType && matches(record, query.predicate)
        }
        return sorted(matching, by: query.sortDescriptors)
    }

    /// Whether a record matches a predicate.
    public static func matches(_ record: Record, _ predicate: QueryPredicate) throws -> Bool {
        switch predicate {
        case .all: return true
        case .none: return false
        case .and(let parts):
            for part in parts where try !matches(record, part) { return false }
            return true
        case .not(.condition(let condition)):
            let (fits, holds) = try evaluate(condition, record)
            return fits && !holds
        case .not:
            throw Unsupported(description: "NOT over a compound predicate")
        case .condition(let condition):
            let (fits, holds) = try evaluate(condition, record)
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
    enum Family { case string, number, date, reference }

    static func family(of value: FieldValue) throws -> Family {
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

    /// (the record has a fitting value, the condition holds on it).
    static func evaluate(_ condition: Condition, _ record: Record) throws -> (Bool, Bool) {
        switch condition {
        case .compare(let key, let op, let value):
            if case .field(let name) = key, case .string(let text) = value, op == .equal || op == .notEqual {
                guard case .string(let stored)? = record.value(forKey: name) else { return (false, false) }
                let same = Array(TextSearch.equalityKey(stored).utf8) == Array(TextSearch.equalityKey(text).utf8)
                return (true, op == .equal ? same : !same)
            }
            let (fits, operand) = operand(key, record, family: try family(of: value))
            guard fits, operand != .null else { return (false, false) }
            let other = comparable(value)
            switch op {
            case .equal: return (true, operand == other)
            case .notEqual: return (true, operand != other)
            case .less: return (true, operand < other)
            case .lessOrEqual: return (true, operand < other || operand == other)
            case .greater: return (true, other < operand)
            case .greaterOrEqual: return (true, other < operand || operand == other)
            }
        case .between(let key, let low, let high):
            let (fits, operand) = operand(key, record, family: try family(of: low))
            guard fits, operand != .null else { return (false, false) }
            let lo = comparable(low), hi = comparable(high)
            return (true, !(operand < lo) && !(hi < operand))
        case .in(let key, let values):
            guard let first = values.first else { return (true, false) }
            if case .field(let name) = key, case .string = first {
                guard case .string(let stored)? = record.value(forKey: name) else { return (false, false) }
                let folded = Array(TextSearch.equalityKey(stored).utf8)
                return (true, values.contains { if case .string(let text) = $0 { Array(TextSearch.equalityKey(text).utf8) == folded } else { false } })
            }
            let (fits, operand) = operand(key, record, family: try family(of: first))
            guard fits, operand != .null else { return (false, false) }
            return (true, values.contains { comparable($0) == operand })
        case .beginsWith(let key, let prefix):
            let (fits, operand) = operand(key, record, family: .string)
            guard fits, case .text(let bytes) = operand else { return (false, false) }
            return (true, bytes.starts(with: Array(prefix.utf8)))
        case .listContains(let key, let value):
            guard case .field(let name) = key, let stored = record.value(forKey: name),
                  let (family, elements) = listElements(stored), family == (try self.family(of: value)) else { return (false, false) }
            let wanted = comparable(value)
            return (true, elements.contains { comparable($0) == wanted })
        case .listContainsAny(let key, let values):
            guard let first = values.first else { return (true, false) }
            guard case .field(let name) = key, let stored = record.value(forKey: name),
                  let (family, elements) = listElements(stored), family == (try self.family(of: first)) else { return (false, false) }
            let wanted = Set(values.map(comparable))
            return (true, elements.contains { wanted.contains(comparable($0)) })
        case .listAnyBeginsWith(let key, let prefix):
            guard case .field(let name) = key, case .stringList(let list)? = record.value(forKey: name) else { return (false, false) }
            return (true, list.contains { Array($0.utf8).starts(with: Array(prefix.utf8)) })
        case .distance(let key, let origin, let op, let kilometers):
            guard case .field(let name) = key, case .location(let location)? = record.value(forKey: name) else { return (false, false) }
            let distance = location.distance(from: origin) / 1000
            switch op {
            case .equal: return (true, distance == kilometers)
            case .notEqual: return (true, distance != kilometers)
            case .less: return (true, distance < kilometers)
            case .lessOrEqual: return (true, distance <= kilometers)
            case .greater: return (true, distance > kilometers)
            case .greaterOrEqual: return (true, distance >= kilometers)
            }
        case .tokens:
            throw Unsupported(description: "tokenized search")
        }
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
                return .real(location.distance(from: origin) / 1000)
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
