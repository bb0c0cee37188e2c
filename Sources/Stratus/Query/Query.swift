import Foundation

/// What to look for: a record type, a predicate and a sort order, like `CKQuery`.
///
/// ```swift
/// let query = Query(recordType: "Todo", predicate: try QueryPredicate(format: "checked == %@", 0))
/// query.sortDescriptors = [RecordSortDescriptor(key: "createdAt", ascending: false)]
/// let (matches, cursor) = try await database.records(matching: query)
/// ```
///
/// As `CKQuery`, an `NSObject` that copies (`copy()`, with its own sort order) and archives
/// (`NSSecureCoding`).
public final class Query: NSObject, NSCopying, NSSecureCoding, Sendable {
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
        super.init()
    }

    /// A Stratus extension: the checks of a query that need no store (its type and field
    /// names, the values it compares, its size, and conditions no query runs, such as BYTES
    /// compared with `==`), so that a tool can refuse it before it starts a job. What depends
    /// on the schema (an encrypted field, production's indexes, ``Query/missingIndexes(in:)``,
    /// the READ permission) is refused when the query runs.
    ///
    /// ```swift
    /// try Query(recordType: "Photo", predicate: QueryPredicate(format: "rating > 3")).validate()
    /// ```
    ///
    /// - Throws: ``StratusError`` `invalidArguments` naming what is wrong.
    public func validate() throws {
        _ = try CompiledQuery(self, zoneID: .default, desiredKeys: nil)
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

    public override var description: String {
        let sorts = sortDescriptors ?? []
        let order = sorts.isEmpty ? "" : " sorted by " + sorts.map(\.description).joined(separator: ", ")
        return "\(recordType) where \(predicate)\(order)"
    }

    /// A query of the same type, predicate and sort order, whose sort order is set apart from
    /// this one's, as `CKQuery.copy()`.
    ///
    /// ```swift
    /// let descending = query.copy() as! Query
    /// descending.sortDescriptors = [RecordSortDescriptor(key: "createdAt", ascending: false)]
    /// ```
    public func copy(with zone: NSZone? = nil) -> Any {
        let copy = Query(recordType: recordType, predicate: predicate)
        copy.sortDescriptors = sortDescriptors
        return copy
    }

    // MARK: NSSecureCoding, as apps archive CKQuery

    /// Queries archive with `NSSecureCoding`, as `CKQuery`s do.
    ///
    /// ```swift
    /// let data = try NSKeyedArchiver.archivedData(withRootObject: query, requiringSecureCoding: Query.supportsSecureCoding)
    /// ```
    public static var supportsSecureCoding: Bool { true }

    private static var archiveDecoder: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.nonConformingFloatDecodingStrategy = .convertFromString(positiveInfinity: "+Infinity", negativeInfinity: "-Infinity", nan: "NaN")
        return decoder
    }

    /// Writes the query (`NSCoding`): its type, and its predicate and sort order as JSON.
    ///
    /// ```swift
    /// let data = try NSKeyedArchiver.archivedData(withRootObject: query, requiringSecureCoding: true)
    /// ```
    public func encode(with coder: NSCoder) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        encoder.nonConformingFloatEncodingStrategy = Self.nonFiniteNumbers
        coder.encode(recordType as NSString, forKey: "StratusRecordType")
        do {
            coder.encode(try encoder.encode(predicate) as NSData, forKey: "StratusPredicate")
            if let sorts = sortDescriptors { coder.encode(try encoder.encode(sorts) as NSData, forKey: "StratusSortDescriptors") }
        } catch {
            // Not an archive that reads back as a different query: the archiver reports it.
            coder.failWithError(error)
        }
    }

    /// How an archive writes numbers JSON has no form for (a predicate's infinite date).
    private static let nonFiniteNumbers = JSONEncoder.NonConformingFloatEncodingStrategy.convertToString(positiveInfinity: "+Infinity", negativeInfinity: "-Infinity", nan: "NaN")

    /// Reads a query written by ``encode(with:)``; `nil` when the archive holds no query or
    /// one this version cannot read.
    ///
    /// ```swift
    /// let query = try NSKeyedUnarchiver.unarchivedObject(ofClass: Query.self, from: data)
    /// ```
    public convenience init?(coder: NSCoder) {
        guard coder.containsValue(forKey: "StratusRecordType"), coder.containsValue(forKey: "StratusPredicate"),
              let recordType = coder.decodeArchived(NSString.self, forKey: "StratusRecordType") as String?,
              let predicateData = coder.decodeArchived(NSData.self, forKey: "StratusPredicate") as Data?,
              let predicate = try? Self.archiveDecoder.decode(QueryPredicate.self, from: predicateData) else { return nil }
        var sorts: [RecordSortDescriptor]?
        // Asked first: Foundation's keyed unarchiver fails the whole archive for a missing key.
        if coder.containsValue(forKey: "StratusSortDescriptors") {
            guard let data = coder.decodeArchived(NSData.self, forKey: "StratusSortDescriptors") as Data? else { return nil }
            guard let decoded = try? Self.archiveDecoder.decode([RecordSortDescriptor].self, from: data),
                  decoded.count <= Self.maximumSortDescriptors else { return nil }
            sorts = decoded
        }
        self.init(recordType: recordType, predicate: predicate)
        sortDescriptors = sorts
    }
}

import Synchronization
