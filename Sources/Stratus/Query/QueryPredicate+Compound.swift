import Foundation

// `NSCompoundPredicate`'s spellings, so that a port replaces the type name only
// (`NSCompoundPredicate(andPredicateWithSubpredicates:)`, `NSCompoundPredicate(type: .and, subpredicates:)` →
// `QueryPredicate(andPredicateWithSubpredicates:)`). There is no `orPredicateWithSubpredicates`:
// CloudKit refuses OR, so code that builds one needs another design (one query per alternative,
// or `IN` for alternatives of one field).
extension QueryPredicate {
    /// Every sub-predicate holds, as `NSCompoundPredicate(andPredicateWithSubpredicates:)`:
    /// the same predicate as joining them with `&&` (no sub-predicate: every record).
    ///
    /// ```swift
    /// let books = try QueryPredicate(format: "category == %@", "books")
    /// let cheap = try QueryPredicate(format: "price < %f", 30.0)
    /// let cheapBooks = QueryPredicate(andPredicateWithSubpredicates: [books, cheap])
    /// ```
    public init(andPredicateWithSubpredicates subpredicates: [QueryPredicate]) {
        self = subpredicates.isEmpty ? .all : PredicateParser.conjunction(subpredicates)
    }

    /// The sub-predicate does not hold, as `NSCompoundPredicate(notPredicateWithSubpredicate:)`:
    /// the same predicate as `!subpredicate`.
    ///
    /// ```swift
    /// let notBooks = QueryPredicate(notPredicateWithSubpredicate: try QueryPredicate(format: "category == %@", "books"))
    /// ```
    ///
    /// - Precondition: `subpredicate` is a single comparison other than a tokenized search, a
    ///   distance or `BETWEEN`, which is all CloudKit can negate (CloudKit refuses the others
    ///   when the query is made); negating anything else is a programming error and traps with
    ///   the reason, as ``!(_:)`` does.
    public init(notPredicateWithSubpredicate subpredicate: QueryPredicate) {
        self = !subpredicate
    }

    /// The kinds of compound predicate CloudKit accepts, as `NSCompoundPredicate.LogicalType`
    /// names them for ``init(type:subpredicates:)`` (with its raw values). There is no `.or`:
    /// CloudKit refuses OR.
    ///
    /// ```swift
    /// let kind: QueryPredicate.LogicalType = filters.count > 1 ? .and : .not
    /// ```
    public enum LogicalType: UInt, Hashable, Sendable {
        /// The one sub-predicate does not hold.
        case not = 0
        /// Every sub-predicate holds.
        case and = 1
    }

    /// A compound predicate of a given type, as `NSCompoundPredicate(type:subpredicates:)`:
    /// `.and` is ``init(andPredicateWithSubpredicates:)`` (no sub-predicate: every record),
    /// `.not` is ``init(notPredicateWithSubpredicate:)`` of the one sub-predicate.
    ///
    /// ```swift
    /// let filters = [try QueryPredicate(format: "%K == %@", "city", "Oslo"), try QueryPredicate(format: "age >= %d", 18)]
    /// let query = Query(recordType: "Contact", predicate: QueryPredicate(type: .and, subpredicates: filters))
    /// ```
    ///
    /// - Precondition: for `.not`, exactly one sub-predicate (`NSCompoundPredicate`'s NOT is the
    ///   NOT of a single predicate), and one CloudKit can negate, as for
    ///   ``init(notPredicateWithSubpredicate:)``; anything else is a programming error and traps
    ///   with the reason.
    public init(type: LogicalType, subpredicates: [QueryPredicate]) {
        switch type {
        case .and:
            self.init(andPredicateWithSubpredicates: subpredicates)
        case .not:
            precondition(subpredicates.count == 1,
                         "a NOT compound predicate takes exactly one sub-predicate, not \(subpredicates.count); CloudKit cannot negate a compound predicate")
            self.init(notPredicateWithSubpredicate: subpredicates[0])
        }
    }
}
