import Foundation

// `NSCompoundPredicate`'s spellings, so that a port replaces the type name only
// (`NSCompoundPredicate(andPredicateWithSubpredicates:)` →
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
}
