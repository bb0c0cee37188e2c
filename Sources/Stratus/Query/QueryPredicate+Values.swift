extension QueryPredicate {
    /// The predicate with each value it compares with a key that `keys` selects replaced by
    /// `transform`'s (in comparisons, `BETWEEN`, `IN`, and list `CONTAINS` / `ANY … IN`); what
    /// it compares with other keys, and prefixes and words, stay. For readers that give
    /// literals the meaning a key's type asks for.
    ///
    /// ```swift
    /// let typed = try predicate.mappingValues(of: { $0 == .field("due") }) { _, value in try asDate(value) }
    /// ```
    ///
    /// - Throws: what `transform` throws.
    public func mappingValues(of keys: (QueryKey) -> Bool, _ transform: (QueryKey, FieldValue) throws -> FieldValue) rethrows -> QueryPredicate {
        switch self {
        case .all, .none: return self
        case .and(let parts): return .and(try parts.map { try $0.mappingValues(of: keys, transform) })
        case .not(let part): return .not(try part.mappingValues(of: keys, transform))
        case .condition(let condition):
            switch condition {
            case .compare(let key, let op, let value) where keys(key):
                return .condition(.compare(key, op, try transform(key, value)))
            case .between(let key, let low, let high) where keys(key):
                return .condition(.between(key, try transform(key, low), try transform(key, high)))
            case .in(let key, let values) where keys(key):
                return .condition(.in(key, try values.map { try transform(key, $0) }))
            case .listContains(let key, let value) where keys(key):
                return .condition(.listContains(key, try transform(key, value)))
            case .listContainsAny(let key, let values) where keys(key):
                return .condition(.listContainsAny(key, try values.map { try transform(key, $0) }))
            default:
                return self
            }
        }
    }
}
