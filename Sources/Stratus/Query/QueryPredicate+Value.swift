extension QueryPredicate {
    /// A predicate that every record (`true`) or no record (`false`) matches, as
    /// `NSPredicate(value:)`: `TRUEPREDICATE` or `FALSEPREDICATE`.
    ///
    /// ```swift
    /// let everything = Query(recordType: "Todo", predicate: QueryPredicate(value: true))
    /// ```
    public init(value: Bool) {
        self = value ? .all : .none
    }
}

extension QueryPredicate {
    /// `NSPredicate()`, the empty predicate that code declares as a placeholder and replaces in
    /// every branch before the query is made (`var predicate = NSPredicate()`), is no predicate
    /// CloudKit can run, so Stratus has none: the compiler says what to write instead.
    ///
    /// ```swift
    /// var predicate: QueryPredicate              // was: var predicate = NSPredicate()
    /// if radius == 0 { predicate = QueryPredicate(value: true) } else { predicate = try QueryPredicate(format: "…") }
    /// ```
    @available(*, unavailable, message: "an empty NSPredicate() matches nothing CloudKit can run: declare 'var predicate: QueryPredicate' without a value (Swift checks every branch assigns it), or start from QueryPredicate(value: true)")
    public init() {
        self = .all
    }
}
