/// How a store runs a query: the indexes it reads, and the store's own account of its plan.
///
/// ```swift
/// let plan = try await database.queryPlan(for: query)
/// print(plan.indexes.isEmpty ? "scans every record of the type" : "uses \(plan.indexes.joined(separator: ", "))")
/// ```
public struct QueryPlan: Hashable, Sendable, CustomStringConvertible {
    /// The store's indexes the query reads, each with what it covers (`ix_3f2a… (Item: category, rank)`);
    /// empty when the query reads the records without an index of its own.
    public var indexes: [String]
    /// The engine's own plan, one step per element (SQLite: `EXPLAIN QUERY PLAN`).
    public var steps: [String]

    public init(indexes: [String], steps: [String]) {
        self.indexes = indexes
        self.steps = steps
    }

    public var description: String {
        (indexes.isEmpty ? "no index" : "indexes: " + indexes.joined(separator: ", ")) + (steps.isEmpty ? "" : "; plan: " + steps.joined(separator: " | "))
    }
}
