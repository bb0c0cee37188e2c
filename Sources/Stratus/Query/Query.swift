import Foundation

/// What to look for: a record type, a predicate and a sort order, like `CKQuery`.
///
/// ```swift
/// let query = Query(recordType: "Todo", predicate: try QueryPredicate(format: "checked == %@", 0))
/// query.sortDescriptors = [RecordSortDescriptor(key: "createdAt", ascending: false)]
/// let (matches, cursor) = try await database.records(matching: query)
/// ```
public final class Query: Sendable, CustomStringConvertible {
    /// The record type the query searches.
    ///
    /// ```swift
    /// print(Query(recordType: "Todo").recordType)   // "Todo"
    /// ```
    public let recordType: String
    /// The condition records must meet; `TRUEPREDICATE` (``QueryPredicate/all``) for every record.
    ///
    /// ```swift
    /// let open = Query(recordType: "Todo", predicate: try QueryPredicate(format: "checked == 0"))
    /// print(open.predicate)   // checked == 0
    /// ```
    public let predicate: QueryPredicate
    private let sorts: Mutex<[RecordSortDescriptor]?>

    /// A query for the records of `recordType` that match `predicate` (by default every
    /// record, `TRUEPREDICATE`), in no order until ``sortDescriptors`` is set.
    ///
    /// ```swift
    /// let query = Query(recordType: "Todo")   // every Todo
    /// ```
    // Disfavored: under `import CloudKit`, `CKQuery(recordType:predicate: .init(value: true))`
    // is CloudKit's initializer, which takes an NSPredicate.
    @_disfavoredOverload
    public init(recordType: String, predicate: QueryPredicate = .all) {
        self.recordType = recordType
        self.predicate = predicate
        self.sorts = Mutex(nil)
    }

    /// Convenience for `Query(recordType:predicate: try QueryPredicate(format:…))`.
    public convenience init(recordType: String, format: String, _ arguments: any Sendable...) throws {
        self.init(recordType: recordType, predicate: try QueryPredicate(format: format, argumentArray: arguments))
    }

    /// The most sort descriptors a query may have (each sorts every page and is kept in each
    /// cursor); a query with more fails with `invalidArguments`, as does a cursor edited to hold more.
    ///
    /// ```swift
    /// precondition(descriptors.count <= Query.maximumSortDescriptors)
    /// ```
    public static let maximumSortDescriptors = 100

    /// The sort order, `nil` (no order) until set, as `CKQuery.sortDescriptors`; ties are always
    /// broken by record name, so results and cursors are deterministic. An empty list also means
    /// no order.
    ///
    /// Being optional as CloudKit's, it keeps the meaning of CloudKit code that asks whether a
    /// query has an order yet:
    ///
    /// ```swift
    /// let query = Query(recordType: "Note")
    /// query.sortDescriptors?.append(RecordSortDescriptor(key: "title"))   // no effect: still nil
    /// if query.sortDescriptors == nil {
    ///     query.sortDescriptors = [RecordSortDescriptor(key: "creationDate", ascending: false)]
    /// }
    /// ```
    public var sortDescriptors: [RecordSortDescriptor]? {
        get { sorts.withLock { $0 } }
        set { sorts.withLock { $0 = newValue } }
    }

    public var description: String {
        let sorts = sortDescriptors ?? []
        let order = sorts.isEmpty ? "" : " sorted by " + sorts.map(\.description).joined(separator: ", ")
        return "\(recordType) where \(predicate)\(order)"
    }
}

import Synchronization
