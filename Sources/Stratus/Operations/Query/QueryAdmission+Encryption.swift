extension QueryAdmission {
    /// Whether a query names fields of its records (in a condition or a sort key), so that
    /// the schema must be read to know whether any of them is encrypted.
    static func namesFields(_ query: CompiledQuery) -> Bool {
        if query.sortKeys.contains(where: { if case .field = $0.key { true } else { false } }) { return true }
        var found = false
        visitKeys(query.predicate) { key in if case .field = key { found = true } }
        return found
    }

    /// CloudKit's refusal of a query that filters or sorts on a field `schema` declares
    /// encrypted: encrypted values cannot be indexed (QUERYABLE, SORTABLE and SEARCHABLE are
    /// refused on them), so no query can use them. `nil` when the query names none.
    ///
    /// ```swift
    /// if let refusal = QueryAdmission.encryptedFieldRefusal(compiled, schema: typeSchema) { throw refusal }
    /// ```
    static func encryptedFieldRefusal(_ query: CompiledQuery, schema: RecordTypeSchema?) -> StratusError? {
        guard let schema, schema.fields.contains(where: \.isEncrypted) else { return nil }
        func isEncrypted(_ key: QueryKey) -> String? {
            guard case .field(let name) = key, schema.field(name)?.isEncrypted == true else { return nil }
            return name
        }
        var filtered: String?
        visitKeys(query.predicate) { key in if filtered == nil { filtered = isEncrypted(key) } }
        if let filtered {
            return StratusError(.invalidArguments, "Field '\(filtered)' of \(query.recordType) is encrypted, and encrypted fields cannot be queried: CloudKit has no index on them (filter on the records after fetching them, or keep a field that is not encrypted to query)")
        }
        if let sorted = query.sortKeys.lazy.compactMap({ isEncrypted($0.key) }).first {
            return StratusError(.invalidArguments, "Field '\(sorted)' of \(query.recordType) is encrypted, and encrypted fields cannot be sorted by: CloudKit has no index on them (sort the records after fetching them)")
        }
        return nil
    }

    /// Calls `body` with the key of every condition of `predicate` (word searches have none).
    private static func visitKeys(_ predicate: QueryPredicate, _ body: (QueryKey) -> Void) {
        switch predicate {
        case .all, .none: break
        case .and(let parts): for part in parts { visitKeys(part, body) }
        case .not(let inner): visitKeys(inner, body)
        case .condition(let condition):
            switch condition {
            case .compare(let key, _, _), .between(let key, _, _), .in(let key, _), .beginsWith(let key, _),
                 .listContains(let key, _), .listContainsAny(let key, _), .listAnyBeginsWith(let key, _), .distance(let key, _, _, _):
                body(key)
            case .tokens, .hasParent: break
            }
        }
    }
}
