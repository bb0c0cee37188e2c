import Foundation

/// A query checked and normalized for an engine: what to match, in which zone, in which order.
///
/// Operations compile a ``Query`` once; engines translate the result into their own language.
/// The order always ends with the record name, so results and cursors are deterministic.
///
/// ```swift
/// let compiled = try CompiledQuery(query, zoneID: .default, desiredKeys: ["title"])
/// let page = try engine.queryRecords(compiled, in: context, after: nil, limit: 100)
/// ```
@_spi(StratusEngine)
public struct CompiledQuery: Hashable, Sendable, Codable {
    public let recordType: String
    public internal(set) var zoneID: RecordZone.ID
    public let predicate: QueryPredicate
    public let sortKeys: [SortKey]
    /// Keys to return (all when `nil`). Not part of the query's identity.
    public var desiredKeys: [String]?

    /// One sort key; ``CompiledQuery`` adds the record name as the final tiebreaker itself.
    public struct SortKey: Hashable, Sendable, Codable {
        public let key: QueryKey
        public let ascending: Bool
        /// For distance sorts: the point distances are measured from.
        public let distanceFrom: Location?
    }

    /// Checks names and values and normalizes the predicate.
    ///
    /// - Throws: ``StratusError`` `invalidArguments` naming the bad record type, key or value.
    public init(_ query: Query, zoneID: RecordZone.ID, desiredKeys: [String]?) throws {
        try Naming.checkRecordType(query.recordType, allowSystemNames: true)
        try Naming.checkZoneName(zoneID.zoneName)
        if let desiredKeys { for key in desiredKeys { try Naming.checkDesiredKey(key) } }
        self.recordType = query.recordType
        self.zoneID = zoneID
        self.predicate = try CompiledQuery.normalize(query.predicate)
        try CompiledQuery.checkConditionCount(predicate)
        try CompiledQuery.checkValueCount(predicate)
        try CompiledQuery.checkSortKeyCount(query.sortDescriptors?.count ?? 0)
        self.sortKeys = try (query.sortDescriptors ?? []).map { descriptor in
            let key = descriptor.queryKey
            if case .field(let name) = key { try Self.checkFieldName(name, kind: "sort key") }
            if descriptor.distanceFrom != nil, case .field = key {} else if descriptor.distanceFrom != nil {
                throw StratusError(.invalidArguments, "distance sort needs a LOCATION field, not '\(descriptor.key)'")
            }
            if let origin = descriptor.distanceFrom, !origin.isFinite {
                throw StratusError(.invalidArguments, "a distance sort's location must have finite coordinates")
            }
            if let origin = descriptor.distanceFrom { try CompiledQuery.checkPlace(origin, "a distance sort's location") }
            return SortKey(key: key, ascending: descriptor.ascending, distanceFrom: descriptor.distanceFrom)
        }
        self.desiredKeys = desiredKeys
    }

    /// Checks a compiled query that came from outside the process (a deserialized cursor)
    /// as ``init(_:zoneID:desiredKeys:)`` checks a new one, so that no name reaches an engine
    /// unchecked.
    ///
    /// - Throws: ``StratusError`` `invalidArguments` naming the bad part.
    public func validate() throws {
        try Naming.checkRecordType(recordType, allowSystemNames: true)
        try Naming.checkZoneName(zoneID.zoneName)
        if let desiredKeys { for key in desiredKeys { try Naming.checkDesiredKey(key) } }
        for sortKey in sortKeys {
            if case .field(let name) = sortKey.key { try Self.checkFieldName(name, kind: "sort key") }
        }
        guard try CompiledQuery.normalize(predicate) == predicate else {
            throw StratusError(.invalidArguments, "the query's predicate is not in normal form")
        }
        try CompiledQuery.checkConditionCount(predicate)
        try CompiledQuery.checkValueCount(predicate)
        try CompiledQuery.checkSortKeyCount(sortKeys.count)
    }

    private static func checkSortKeyCount(_ count: Int) throws {
        guard count > Query.maximumSortDescriptors else { return }
        throw StratusError(.invalidArguments, "the query sorts by \(count) keys, more than the \(Query.maximumSortDescriptors) a query may have")
    }

    /// Refuses a predicate whose `IN` lists (and words) hold more values than
    /// ``QueryPredicate/maximumValues``, on every engine alike: each is bound as one SQL
    /// parameter, and engines have their own, different caps (PostgreSQL 65,535 a statement).
    private static func checkValueCount(_ predicate: QueryPredicate) throws {
        func count(_ predicate: QueryPredicate) -> Int {
            switch predicate {
            case .all, .none: 0
            case .and(let parts): parts.reduce(0) { $0 + count($1) }
            case .not(let inner): count(inner)
            case .condition(.in(_, let values)), .condition(.listContainsAny(_, let values)): values.count
            case .condition(.tokens(let words, _)): words.count
            case .condition: 1
            }
        }
        let values = count(predicate)
        guard values > QueryPredicate.maximumValues else { return }
        throw StratusError(.invalidArguments, "the predicate compares with \(values) values, more than the \(QueryPredicate.maximumValues) a query may have (an IN list counts each of its values); split the values over several queries, or fetch the records by ID")
    }

    /// Refuses a normalized predicate of more conditions than a predicate's text may hold, so
    /// that one built in code or decoded from an edited cursor meets the parser's limit (an
    /// engine's SQL has its own, lower limits on expression depth).
    private static func checkConditionCount(_ predicate: QueryPredicate) throws {
        guard case .and(let parts) = predicate, parts.count > QueryPredicate.maximumConditions + conditionsStratusAdds else { return }
        throw StratusError(.invalidArguments, "the predicate joins \(parts.count) conditions, more than the \(QueryPredicate.maximumConditions) a query may have; use 'field IN {…}' for many values of one field, or split the query")
    }

    /// The conditions Stratus itself may join to a query's own: the restriction to the caller's
    /// records where only `_creator` may read (``QueryAdmission``).
    private static let conditionsStratusAdds = 1

    private static func normalize(_ predicate: QueryPredicate) throws -> QueryPredicate {
        switch predicate {
        case .all, .none: return predicate
        case .not(let inner):
            if let problem = PredicateParser.negationProblem(inner) {
                throw StratusError(.invalidArguments, problem)
            }
            guard case .condition(let c) = inner else {
                throw StratusError(.invalidArguments, "NOT is only allowed over a single comparison")
            }
            try check(c)
            return predicate
        case .condition(let c):
            try check(c)
            return predicate
        case .and(let parts):
            var flat: [QueryPredicate] = []
            for part in parts {
                let normalized = try normalize(part)
                switch normalized {
                case .and(let inner): flat.append(contentsOf: inner)
                case .all: continue
                default: flat.append(normalized)
                }
            }
            if flat.contains(.none) { return .none }
            if flat.isEmpty { return .all }
            return flat.count == 1 ? flat[0] : .and(flat)
        }
    }

    private static func check(_ condition: Condition) throws {
        func key(_ k: QueryKey) throws { if case .field(let name) = k { try checkFieldName(name, kind: "field name") } }
        func value(_ v: FieldValue) throws {
            switch v {
            case .double(let d) where !d.isFinite:
                throw StratusError(.invalidArguments, "a predicate cannot compare with a non-finite number")
            case .date(let d) where !d.timeIntervalSinceReferenceDate.isFinite:
                throw StratusError(.invalidArguments, "a predicate cannot compare with a date at a non-finite time")
            case .location(let l) where !l.isFinite:
                throw StratusError(.invalidArguments, "a predicate cannot compare with a location whose coordinates are not finite")
            default: break
            }
        }
        switch condition {
        case .compare(let k, let op, let v):
            try key(k); try value(v)
            let family = try comparedFamily(k, v, op == .equal || op == .notEqual ? "compare with \(op.rawValue)" : "order with \(op.rawValue)")
            if family == .reference && op != .equal && op != .notEqual {
                throw StratusError(.invalidArguments, "references can only be compared with == or !=")
            }
        case .between(let k, let lo, let hi):
            try key(k); try value(lo); try value(hi)
            try sameFamily([lo, hi], k, "compare with BETWEEN")
        case .in(let k, let vs):
            try key(k); try vs.forEach(value)
            try sameFamily(vs, k, "compare with IN")
        case .listContainsAny(let k, let vs):
            try listKey(k); try vs.forEach(value)
            try sameFamily(vs, k, "match list elements")
        case .beginsWith(let k, _):
            try key(k)
            _ = try comparedFamily(k, .string(""), "compare with BEGINSWITH")
        case .listAnyBeginsWith(let k, _): try listKey(k)
        case .listContains(let k, let v):
            try listKey(k); try value(v)
            _ = try family(of: v, k, "match list elements")
        case .tokens, .hasParent: break
        case .distance(let k, let origin, _, let km):
            guard case .field(let name) = k else { throw StratusError(.invalidArguments, "distanceToLocation needs a LOCATION field, not \(k)") }
            try checkFieldName(name, kind: "field name")
            guard km.isFinite else { throw StratusError(.invalidArguments, "a distance must be a finite number of kilometres") }
            guard origin.isFinite else { throw StratusError(.invalidArguments, "distanceToLocation's location must have finite coordinates") }
            try checkPlace(origin, "distanceToLocation's location")
        }
    }

    /// Refuses a point no place on Earth has (latitude past ±90, longitude past ±180), from
    /// which a distance matches nothing, silently.
    private static func checkPlace(_ location: Location, _ what: String) throws {
        guard LocationCoordinate2DIsValid(location.coordinate) else {
            throw StratusError(.invalidArguments, "\(what) has latitude \(location.latitude) and longitude \(location.longitude); a place on Earth has a latitude from -90 to 90 and a longitude from -180 to 180")
        }
    }

    /// The family a condition compares a key in, checking that the key can compare with the
    /// value: fields with any ordered value; the record name and users with a reference or a
    /// string; the system dates with a date.
    private static func comparedFamily(_ key: QueryKey, _ value: FieldValue, _ operation: String) throws -> QueryRules.OrderedFamily {
        let valueFamily = try family(of: value, key, operation)
        switch key {
        case .field: return valueFamily
        case .recordName, .creatorUserRecordID, .lastModifiedUserRecordID, .parent:
            guard valueFamily == .string || valueFamily == .reference else {
                throw StratusError(.invalidArguments, "\(key) can only be compared with a record ID, a reference or a string")
            }
            return valueFamily
        case .creationDate, .modificationDate:
            guard valueFamily == .timestamp else { throw StratusError(.invalidArguments, "\(key) can only be compared with a date") }
            return valueFamily
        }
    }

    private static func family(of value: FieldValue, _ key: QueryKey, _ operation: String) throws -> QueryRules.OrderedFamily {
        guard let family = QueryRules.orderedFamily(of: value) else {
            throw StratusError(.invalidArguments, "cannot \(operation) on '\(key)' against a \(value.type.rawValue) value: a query compares strings, numbers, dates and references (locations by distance), as CloudKit's do")
        }
        return family
    }

    private static func sameFamily(_ values: [FieldValue], _ key: QueryKey, _ operation: String) throws {
        let families = try Set(values.map { try comparedFamily(key, $0, operation) })
        if families.count > 1 { throw StratusError(.invalidArguments, "the values compared with '\(key)' have different types") }
    }

    private static func listKey(_ key: QueryKey) throws {
        guard case .field(let name) = key else { throw StratusError(.invalidArguments, "\(key) is not a list field") }
        try checkFieldName(name, kind: "field name")
    }

    /// A field name in a predicate or sort: an identifier. CloudKit's key for a record's share
    /// is one no field can have, and one Stratus's queries do not answer: said so, rather than
    /// as a misspelt name.
    static func checkFieldName(_ name: String, kind: String) throws {
        if name == Record.SystemFieldKey.share {
            throw StratusError(.invalidArguments, "queries on a record's share (\(name), CKRecord.SystemFieldKey.share) are not answered by this version of Stratus; a share's root is the record whose share it is: fetch the share's root by its ID, or read Record.share of the records a query on other keys returns")
        }
        try Naming.checkIdentifier(name, kind: kind)
        // The other reserved keys are system keys (QueryKey): these name nothing a query
        // compares, and a condition on them would match no record.
        switch name {
        case "recordType":
            throw StratusError(.invalidArguments, "\(kind) 'recordType' names no field: a query reads the records of its one type (Query(recordType:), --type), and no record holds a field of that name")
        case "recordChangeTag":
            throw StratusError(.invalidArguments, "\(kind) 'recordChangeTag' names no field: a record's change tag is not queryable, as in CloudKit")
        case "encryptedValues":
            throw StratusError(.invalidArguments, "\(kind) 'encryptedValues' names no field: encrypted values are not queryable, as in CloudKit")
        default: break
        }
    }

    /// A stable identity of what the query matches and in which order (not which keys it returns).
    public var fingerprint: String {
        var identity = self
        identity.desiredKeys = nil
        // The encoder cannot fail (non-finite numbers become text), so no two queries share
        // an empty identity.
        return StableHash.hex(of: (try? JSONEncoder.stratusValues().encode(identity)) ?? Data())
    }
}
