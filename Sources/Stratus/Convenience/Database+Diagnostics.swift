extension Database {
    /// How the store would run a query: the indexes it reads (none: it reads every record of
    /// the type) and the engine's own plan. Nothing is read but the plan. Without a zone, the
    /// plan is the default zone's: a query without a zone reads each zone by that same plan.
    ///
    /// ```swift
    /// let plan = try await database.queryPlan(for: query)
    /// if plan.indexes.isEmpty { print("declare:", query.missingIndexes(in: schema)) }
    /// ```
    ///
    /// - Throws: ``StratusError`` `invalidArguments` for a bad query; store errors.
    public func queryPlan(for query: Query, inZoneWith zoneID: RecordZone.ID? = nil) async throws -> QueryPlan {
        let compiled = try CompiledQuery(query, zoneID: zoneID ?? .default, desiredKeys: nil)
        return try await perform { engine, context in try engine.explainQuery(compiled, in: context) }
    }

    /// How many records of each record type a zone of this database holds, counted by the
    /// store (a Stratus extension, for `stratus types`). In the public database, only the types
    /// whose every record the caller may read are listed. Without a zone, the default zone is
    /// counted (a query without a zone searches every zone; `countRecords(matching:)` counts so).
    ///
    /// ```swift
    /// for (type, count) in try await database.recordCountsByType() { print(type, count) }
    /// ```
    ///
    /// - Throws: `zoneNotFound` for a missing zone; store errors.
    public func recordCountsByType(inZoneWith zoneID: RecordZone.ID? = nil) async throws -> [String: Int] {
        let zone = zoneID ?? .default
        return try await perform { engine, context in
            let counts = try engine.countRecordsByType(in: context, zoneID: zone)
            guard context.scope == .public else { return counts }
            let schema = try engine.fetchSchema(storageContainer: context.storageContainer)
            return counts.filter { RecordAccess(schema.recordType($0.key), context: context).everyRecord.contains(.read) }
        }
    }
}
