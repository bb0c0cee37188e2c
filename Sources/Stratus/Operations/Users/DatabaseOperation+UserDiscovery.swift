extension DatabaseOperation {
    /// Finds the users `keys` name, at most ``UserDiscovery/lookupsPerRead`` to a read of the
    /// store, each read retried as ``withRetry(_:)`` retries, and hands each read's answers to
    /// `deliver` before the next read: the indexes of `keys` it answered, and for each the entry
    /// the caller finds, `nil` for no one (and for a `nil` key, which is not asked).
    ///
    /// ```swift
    /// if let cancelled = try findUsers(keys, engine: engine, context: context, deliver: { range, found in … }) { return cancelled }
    /// ```
    ///
    /// - Returns: `nil`, or the error of an operation cancelled between reads, saying how many
    ///   lookups it answered.
    /// - Throws: `notAuthenticated` for a caller who is not signed in; store errors.
    func findUsers(_ keys: [UserDiscovery.Key?], engine: any StorageEngine, context: DatabaseContext,
                   deliver: (Range<Int>, [UserDirectoryEntry?]) throws -> Void) throws -> StratusError? {
        for start in stride(from: 0, to: keys.count, by: UserDiscovery.lookupsPerRead) {
            if isCancelled { return StratusError.cancelled("\(type(of: self))", completed: start) }
            let range = start..<min(start + UserDiscovery.lookupsPerRead, keys.count)
            let asked = range.compactMap { index in keys[index].map { (index, $0) } }
            let found = try withRetry { try UserDiscovery.find(asked.map(\.1), engine: engine, context: context) }
            var answers = [UserDirectoryEntry?](repeating: nil, count: range.count)
            for ((index, _), entry) in zip(asked, found) { answers[index - start] = entry }
            try deliver(range, answers)
        }
        return nil
    }
}
