import Foundation

/// A record as a predicate sees it, without building a ``Record``: its name, system fields and
/// field values.
struct PredicateSubject {
    let recordName: String
    let system: Record.SystemFields
    let fields: [String: FieldValue]
    /// The record name of the record's parent, if it has one.
    var parentName: String? = nil
}

extension QueryPredicate {
    /// Whether a record matches the predicate, by Stratus's rules (``QueryRules``) as every
    /// engine's query language applies them: the in-memory form of a query's condition, which
    /// subscriptions use to decide what a write fires.
    ///
    /// The predicate is in compiled (normal) form: `AND` of conditions, `NOT` over one condition.
    /// A condition holds only where the record has a value of the fitting family; `NOT` holds
    /// where the value fits and the condition does not. `self CONTAINS` searches
    /// `searchableFields`, or every string and string-list field when that is empty.
    ///
    /// ```swift
    /// let matches = predicate.matches(PredicateSubject(recordName: "o-1", system: system, fields: fields), searchableFields: [])
    /// ```
    func matches(_ subject: PredicateSubject, searchableFields: [String]) -> Bool {
        switch self {
        case .all: return true
        case .none: return false
        case .and(let parts): return parts.allSatisfy { $0.matches(subject, searchableFields: searchableFields) }
        case .not(.condition(let condition)):
            let (fits, holds) = condition.evaluate(subject, searchableFields: searchableFields)
            return fits && !holds
        case .not(let inner): return !inner.matches(subject, searchableFields: searchableFields)
        case .condition(let condition):
            let (fits, holds) = condition.evaluate(subject, searchableFields: searchableFields)
            return fits && holds
        }
    }
}

extension Condition {
    /// (the record has a fitting value, the condition holds on it).
    func evaluate(_ subject: PredicateSubject, searchableFields: [String]) -> (fits: Bool, holds: Bool) {
        switch self {
        case .compare(let key, let op, let value):
            if case .field(let name) = key, case .string(let text) = value, op == .equal || op == .notEqual {
                guard case .string(let stored)? = subject.fields[name] else { return (false, false) }
                // By code points, as the engines compare: Swift's == takes canonically
                // equivalent strings (NFC "café", NFD "cafe\u{301}") for one.
                let same = QueryRules.equalityKey(stored).unicodeScalars.elementsEqual(QueryRules.equalityKey(text).unicodeScalars)
                return (true, op == .equal ? same : !same)
            }
            guard let family = QueryRules.orderedFamily(of: value) else { return (false, false) }
            let (fits, operand) = Self.operand(key, subject, family: family)
            guard fits, let operand else { return (false, false) }
            return (true, Self.compare(operand, op, Self.asSystemOperand(value, for: key)))
        case .between(let key, let low, let high):
            guard let family = QueryRules.orderedFamily(of: low) else { return (false, false) }
            let (fits, operand) = Self.operand(key, subject, family: family)
            guard fits, let operand else { return (false, false) }
            return (true, Self.compare(operand, .greaterOrEqual, Self.asSystemOperand(low, for: key))
                        && Self.compare(operand, .lessOrEqual, Self.asSystemOperand(high, for: key)))
        case .in(let key, let values):
            // An empty list names no type: its NOT matches the records that hold the field.
            guard let first = values.first else { return (Self.holds(key, subject), false) }
            if case .field(let name) = key, case .string = first {
                guard case .string(let stored)? = subject.fields[name] else { return (false, false) }
                let folded = QueryRules.equalityKey(stored)
                return (true, values.contains { if case .string(let text) = $0 { QueryRules.equalityKey(text).unicodeScalars.elementsEqual(folded.unicodeScalars) } else { false } })
            }
            guard let family = QueryRules.orderedFamily(of: first) else { return (false, false) }
            let (fits, operand) = Self.operand(key, subject, family: family)
            guard fits, let operand else { return (false, false) }
            return (true, values.contains { Self.compare(operand, .equal, Self.asSystemOperand($0, for: key)) })
        case .beginsWith(let key, let prefix):
            let (fits, operand) = Self.operand(key, subject, family: .string)
            guard fits, case .string(let text)? = operand else { return (false, false) }
            return (true, text.utf8.starts(with: prefix.utf8))
        case .listContains(let key, let value):
            guard case .field(let name) = key, let wanted = QueryRules.orderedFamily(of: value), let stored = subject.fields[name],
                  let (family, elements) = Self.listElements(stored), family == wanted else { return (false, false) }
            return (true, elements.contains { Self.compare($0, .equal, value) })
        case .listContainsAny(let key, let values):
            guard let first = values.first else { return (Self.holds(key, subject), false) }
            guard case .field(let name) = key, let wanted = QueryRules.orderedFamily(of: first), let stored = subject.fields[name],
                  let (family, elements) = Self.listElements(stored), family == wanted else { return (false, false) }
            return (true, elements.contains { element in values.contains { Self.compare(element, .equal, $0) } })
        case .listAnyBeginsWith(let key, let prefix):
            guard case .field(let name) = key, case .stringList(let list)? = subject.fields[name] else { return (false, false) }
            return (true, list.contains { $0.utf8.starts(with: prefix.utf8) })
        case .distance(let key, let origin, let op, let kilometers):
            guard case .field(let name) = key, case .location(let location)? = subject.fields[name] else { return (false, false) }
            return (true, Self.compare(.double(Self.distanceKilometres(from: origin, to: location)), op, .double(kilometers)))
        case .hasParent(let present):
            return (true, (subject.parentName != nil) == present)
        case .tokens(let words, let all):
            guard !words.isEmpty else { return (true, false) }
            let have = Self.words(of: subject, searchableFields: searchableFields)
            return (true, all ? words.allSatisfy(have.contains) : words.contains(where: have.contains))
        }
    }

    /// Whether the record holds `key` at all: a field any value; a parent when it has one; the
    /// other system keys always.
    private static func holds(_ key: QueryKey, _ subject: PredicateSubject) -> Bool {
        switch key {
        case .field(let name): return subject.fields[name] != nil
        case .parent: return subject.parentName != nil
        default: return true
        }
    }

    /// The record's value for a key, and whether it fits a family (system keys fit their own).
    private static func operand(_ key: QueryKey, _ subject: PredicateSubject, family: QueryRules.OrderedFamily) -> (fits: Bool, value: FieldValue?) {
        switch key {
        case .recordName: return (family == .string || family == .reference, .string(subject.recordName))
        case .creatorUserRecordID:
            return (family == .string || family == .reference, subject.system.creatorUserRecordID.map { .string($0.recordName) })
        case .lastModifiedUserRecordID:
            return (family == .string || family == .reference, subject.system.lastModifiedUserRecordID.map { .string($0.recordName) })
        case .parent: return (family == .string || family == .reference, subject.parentName.map(FieldValue.string))
        case .creationDate: return (family == .timestamp, subject.system.creationDate.map(FieldValue.date))
        case .modificationDate: return (family == .timestamp, subject.system.modificationDate.map(FieldValue.date))
        case .field(let name):
            guard let stored = subject.fields[name], QueryRules.orderedFamily(of: stored) == family else { return (false, nil) }
            return (true, stored)
        }
    }

    /// A compared value as system keys see it: a reference compared with a record name or a
    /// user is its record name.
    private static func asSystemOperand(_ value: FieldValue, for key: QueryKey) -> FieldValue {
        switch (key, value) {
        case (.recordName, .reference(let r)), (.creatorUserRecordID, .reference(let r)), (.lastModifiedUserRecordID, .reference(let r)),
             (.parent, .reference(let r)):
            .string(r.recordID.recordName)
        default: value
        }
    }

    private static func listElements(_ value: FieldValue) -> (QueryRules.OrderedFamily, [FieldValue])? {
        switch value {
        case .stringList(let v): (.string, v.map(FieldValue.string))
        case .int64List(let v): (.number, v.map(FieldValue.int64))
        case .doubleList(let v): (.number, v.map(FieldValue.double))
        case .dateList(let v): (.timestamp, v.map(FieldValue.date))
        case .referenceList(let v): (.reference, v.map(FieldValue.reference))
        default: nil
        }
    }

    /// `lhs op rhs` under ``QueryRules/conditionOrder(_:_:)``; false across families.
    private static func compare(_ lhs: FieldValue, _ op: ComparisonOperator, _ rhs: FieldValue) -> Bool {
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

    /// The search words of a record: ``TextSearch`` tokens of its string and string-list
    /// fields (only `searchableFields` when there are some).
    private static func words(of subject: PredicateSubject, searchableFields: [String]) -> Set<String> {
        var words: Set<String> = []
        func add(_ value: FieldValue?) {
            switch value {
            case .string(let text)?: words.formUnion(TextSearch.tokens(in: text))
            case .stringList(let texts)?: for text in texts { words.formUnion(TextSearch.tokens(in: text)) }
            default: break
            }
        }
        if searchableFields.isEmpty { for value in subject.fields.values { add(value) } } else { for name in searchableFields { add(subject.fields[name]) } }
        return words
    }

    /// Great-circle distance in kilometres, as the SQL stores compute it (haversine, Earth's
    /// diameter 12,742.0176 km).
    static func distanceKilometres(from origin: Location, to location: Location) -> Double {
        func radians(_ degrees: Double) -> Double { degrees * (Double.pi / 180.0) }
        let a = pow(sin(radians(location.latitude - origin.latitude) / 2), 2)
            + cos(radians(origin.latitude)) * cos(radians(location.latitude)) * pow(sin(radians(location.longitude - origin.longitude) / 2), 2)
        return 12742.0176 * asin(sqrt(a))
    }
}

extension Record {
    /// Whether this record, as it is in memory, matches `predicate` by the rules a query of its
    /// type applies in the store (``QueryRules``): what `NSPredicate.evaluate(with:)` answers
    /// for a `CKRecord` in CloudKit code.
    ///
    /// ```swift
    /// let cheap = try record.matches(QueryPredicate(format: "price < %@", 10))
    /// ```
    ///
    /// - Throws: ``StratusError`` `invalidArguments` for a predicate no query could run (a
    ///   condition CloudKit refuses, a value of the wrong kind).
    package func matches(_ predicate: QueryPredicate) throws -> Bool {
        let compiled = try CompiledQuery(Query(recordType: recordType, predicate: predicate), zoneID: recordID.zoneID, desiredKeys: nil)
        let (system, fields, _, parent, _) = contents
        let subject = PredicateSubject(recordName: recordID.recordName, system: system, fields: fields, parentName: parent?.recordID.recordName)
        return compiled.predicate.matches(subject, searchableFields: [])
    }
}
