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
