import Foundation

/// A Stratus extension: counts the records matching a query, without reading them.
///
/// The store counts in one snapshot; no record is built. CloudKit has no count: this is what
/// `stratus count` runs.
///
/// ```swift
/// let count = CountRecordsOperation(query: try Query(recordType: "Todo", format: "checked == %@", 1))
/// count.countRecordsResultBlock = { result in print(try! result.get()) }
/// database.add(count)
/// ```
public final class CountRecordsOperation: DatabaseOperation, @unchecked Sendable {
    /// The query whose matches are counted (its sort order does not matter).
    public var query: Query
    /// The zone to count in; every zone of the database when `nil`, as a query searches.
    public var zoneID: RecordZone.ID?
    /// The number of matching records, or the error.
    public var countRecordsResultBlock: ((Result<Int, any Error>) -> Void)?

    private var count = 0

    /// An operation that counts the records `query` matches in `zoneID` (every zone when `nil`).
    ///
    /// ```swift
    /// let count = CountRecordsOperation(query: Query(recordType: "Todo"), zoneID: RecordZone.ID(zoneName: "Lists"))
    /// ```
    public init(query: Query, zoneID: RecordZone.ID? = nil) {
        self.query = query
        self.zoneID = zoneID
        super.init()
    }

    override func execute(engine: any StorageEngine, context: DatabaseContext) throws -> StratusError? {
        let compiled = try QueryAdmission.admit(QueryOperation.compile(query, searching: zoneID, desiredKeys: [], context: context), engine: engine, context: context)
        count = try withRetry {
            guard zoneID == nil else { return try engine.countRecords(compiled, in: context) }
            var total = 0
            for zone in try ZoneWideQuery.zones(engine: engine, context: context) {
                do {
                    total += try engine.countRecords(compiled.inZone(zone, desiredKeys: []), in: context)
                } catch let error as StratusError where error.code == .zoneNotFound {
                    // Deleted since the zones were listed: it holds nothing.
                }
            }
            return total
        }
        return nil
    }

    override func complete(with error: StratusError?) {
        countRecordsResultBlock?(error.map { .failure($0) } ?? .success(count))
    }
}
