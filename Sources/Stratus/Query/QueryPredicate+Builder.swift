import Foundation

// MARK: - Starting points

extension QueryPredicate {
    /// Starts a typed condition on a field, or on a system field such as `creationDate` or `recordID`.
    ///
    /// The builder produces exactly the predicate the equivalent format string parses to, with
    /// values converted through ``RecordValueProtocol`` (`Int` and `Bool` become `.int64`).
    ///
    /// ```swift
    /// let open = QueryPredicate.key("checked") == 0 && QueryPredicate.key("priority") >= 2
    /// // equals try QueryPredicate(format: "checked == 0 AND priority >= 2")
    /// ```
    public static func key(_ name: String) -> Key {
        Key(QueryKey(name))
    }

    /// A tokenized search over the record's string fields, like `self CONTAINS 'bob smith'`.
    ///
    /// The text is split into lowercased words without diacritics; one search matches records
    /// with any of the words. Join searches with `&&` to require every word.
    ///
    /// ```swift
    /// let either = QueryPredicate.tokens("bob smith")
    /// let both = QueryPredicate.tokens("bob") && QueryPredicate.tokens("smith")
    /// ```
    public static func tokens(_ text: String) -> QueryPredicate {
        .condition(PredicateParser.tokenCondition(TextSearch.tokens(in: text), allTokens: false))
    }

    /// Both predicates hold, like `AND`: nested ANDs are flattened and one-word tokenized
    /// searches are merged into one search for all the words, as the parser does.
    ///
    /// ```swift
    /// let recent = QueryPredicate.key("checked") == 0 && QueryPredicate.key("createdAt") > Date(timeIntervalSinceNow: -86_400)
    /// ```
    public static func && (lhs: QueryPredicate, rhs: QueryPredicate) -> QueryPredicate {
        PredicateParser.conjunction([lhs, rhs])
    }

    /// The predicate does not hold, like `NOT`.
    ///
    /// ```swift
    /// let notRed = !(QueryPredicate.key("color") == "red")
    /// ```
    ///
    /// - Precondition: `predicate` is a single condition other than a tokenized search, a
    ///   distance or `BETWEEN`, which is all CloudKit can negate. Negating anything else is a
    ///   programming error and traps, since the builder is written in code, not read from input.
    public static prefix func ! (predicate: QueryPredicate) -> QueryPredicate {
        if let problem = PredicateParser.negationProblem(predicate) { preconditionFailure(problem) }
        return .not(predicate)
    }
}

// MARK: - Keys

extension QueryPredicate {
    /// A field or system field in a typed predicate; compare it with a value to get a ``QueryPredicate``.
    ///
    /// ```swift
    /// let adults = QueryPredicate.key("age").between(18, 65)
    /// let tagged = QueryPredicate.key("tags").contains("red")
    /// ```
    public struct Key: Sendable {
        /// The field or system field the conditions are about.
        public let queryKey: QueryKey

        /// A key for a field or system field.
        public init(_ queryKey: QueryKey) {
            self.queryKey = queryKey
        }

        private func compare(_ op: ComparisonOperator, _ value: some RecordValueProtocol) -> QueryPredicate {
            .condition(.compare(queryKey, op, PredicateParser.normalized(value.fieldValue)))
        }

        /// `key == value`.
        ///
        /// ```swift
        /// let jim = QueryPredicate.key("firstName") == "Jim"
        /// ```
        public static func == (key: Key, value: some RecordValueProtocol) -> QueryPredicate { key.compare(.equal, value) }
        /// `key != value`.
        public static func != (key: Key, value: some RecordValueProtocol) -> QueryPredicate { key.compare(.notEqual, value) }
        /// `key < value`.
        public static func < (key: Key, value: some RecordValueProtocol) -> QueryPredicate { key.compare(.less, value) }
        /// `key <= value`.
        public static func <= (key: Key, value: some RecordValueProtocol) -> QueryPredicate { key.compare(.lessOrEqual, value) }
        /// `key > value`.
        public static func > (key: Key, value: some RecordValueProtocol) -> QueryPredicate { key.compare(.greater, value) }
        /// `key >= value`.
        public static func >= (key: Key, value: some RecordValueProtocol) -> QueryPredicate { key.compare(.greaterOrEqual, value) }

        /// `key == %@` with a record ID: a reference to that record.
        ///
        /// ```swift
        /// let items = QueryPredicate.key("list") == list.recordID
        /// ```
        public static func == (key: Key, recordID: Record.ID) -> QueryPredicate {
            key.compare(.equal, Record.Reference(recordID: recordID, action: .none))
        }

        /// `key != %@` with a record ID.
        public static func != (key: Key, recordID: Record.ID) -> QueryPredicate {
            key.compare(.notEqual, Record.Reference(recordID: recordID, action: .none))
        }

        /// `key BEGINSWITH prefix` (case-sensitive).
        ///
        /// ```swift
        /// let jims = QueryPredicate.key("name").beginsWith("Jim")
        /// ```
        public func beginsWith(_ prefix: String) -> QueryPredicate {
            .condition(.beginsWith(queryKey, prefix))
        }

        /// `key BETWEEN {low, high}`, both ends included.
        ///
        /// ```swift
        /// let twenties = QueryPredicate.key("age").between(20, 29)
        /// ```
        public func between(_ low: some RecordValueProtocol, _ high: some RecordValueProtocol) -> QueryPredicate {
            .condition(.between(queryKey, PredicateParser.normalized(low.fieldValue), PredicateParser.normalized(high.fieldValue)))
        }

        /// `key IN {a, b, …}`: the field equals one of the values.
        ///
        /// ```swift
        /// let warm = QueryPredicate.key("color").isIn(["red", "orange"])
        /// ```
        public func isIn(_ values: [any RecordValueProtocol]) -> QueryPredicate {
            .condition(.in(queryKey, values.map { PredicateParser.normalized($0.fieldValue) }))
        }

        /// `key IN %@` with record IDs: the reference field points at one of the records.
        public func isIn(_ recordIDs: [Record.ID]) -> QueryPredicate {
            .condition(.in(queryKey, recordIDs.map { .reference(Record.Reference(recordID: $0, action: .none)) }))
        }

        /// `key CONTAINS value` for a list field: the list holds the value.
        ///
        /// ```swift
        /// let red = QueryPredicate.key("favoriteColors").contains("red")
        /// ```
        public func contains(_ value: some RecordValueProtocol) -> QueryPredicate {
            .condition(.listContains(queryKey, PredicateParser.normalized(value.fieldValue)))
        }

        /// `key CONTAINS %@` with a record ID, for a reference list field.
        public func contains(_ recordID: Record.ID) -> QueryPredicate {
            .condition(.listContains(queryKey, .reference(Record.Reference(recordID: recordID, action: .none))))
        }

        /// `ANY key IN {a, b, …}` for a list field: some element equals one of the values.
        ///
        /// ```swift
        /// let warm = QueryPredicate.key("favoriteColors").containsAny(["red", "orange"])
        /// ```
        public func containsAny(_ values: [any RecordValueProtocol]) -> QueryPredicate {
            .condition(.listContainsAny(queryKey, values.map { PredicateParser.normalized($0.fieldValue) }))
        }

        /// `ANY key BEGINSWITH prefix` for a string list field.
        ///
        /// ```swift
        /// let r = QueryPredicate.key("favoriteColors").anyBeginsWith("r")
        /// ```
        public func anyBeginsWith(_ prefix: String) -> QueryPredicate {
            .condition(.listAnyBeginsWith(queryKey, prefix))
        }

        /// The distance of this location field from a point; compare it with kilometres.
        ///
        /// ```swift
        /// let near = QueryPredicate.key("place").distance(from: Location(latitude: 52.52, longitude: 13.405)) < 5
        /// ```
        public func distance(from origin: Location) -> Distance {
            Distance(key: queryKey, origin: origin)
        }
    }

    /// `distanceToLocation:fromLocation:(key, origin)`, to be compared with kilometres.
    ///
    /// ```swift
    /// let far = QueryPredicate.key("place").distance(from: berlin) >= 100
    /// ```
    public struct Distance: Sendable {
        /// The `LOCATION` field whose distance is measured.
        public let key: QueryKey
        /// The point the distance is measured from.
        public let origin: Location

        private func compare(_ op: ComparisonOperator, _ kilometers: Double) -> QueryPredicate {
            .condition(.distance(key, from: origin, op, kilometers: kilometers))
        }

        /// Closer than `kilometers`.
        public static func < (distance: Distance, kilometers: Double) -> QueryPredicate { distance.compare(.less, kilometers) }
        /// At most `kilometers` away.
        public static func <= (distance: Distance, kilometers: Double) -> QueryPredicate { distance.compare(.lessOrEqual, kilometers) }
        /// Farther than `kilometers`.
        public static func > (distance: Distance, kilometers: Double) -> QueryPredicate { distance.compare(.greater, kilometers) }
        /// At least `kilometers` away.
        public static func >= (distance: Distance, kilometers: Double) -> QueryPredicate { distance.compare(.greaterOrEqual, kilometers) }
    }
}
