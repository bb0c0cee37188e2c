import Foundation

extension QueryOperation {
    /// Where a query stopped, as `CKQueryOperation.Cursor`; see ``QueryCursor``.
    public typealias Cursor = QueryCursor
}

/// Where a query stopped: the query itself, its database, and the last record's sort keys; the
/// class behind ``QueryOperation/Cursor`` (`CKQueryCursor`'s name).
///
/// A cursor is immutable and serializes to a short string, so a script can print it and a
/// later process on the same store can continue:
///
/// ```swift
/// let text = cursor.serialized
/// // … in another process …
/// let next = QueryOperation(cursor: try QueryOperation.Cursor(serialized: text))
/// ```
///
/// Like CloudKit's, a cursor is an `NSObject` that archives with `NSSecureCoding`
/// (`NSKeyedArchiver.archivedData(withRootObject: cursor, requiringSecureCoding: true)`). It is
/// a top-level class because swift-corelibs-foundation's `NSKeyedArchiver` archives only
/// top-level classes. Two cursors are equal when they continue the same query from the same place.
public final class QueryCursor: NSObject, Codable, Sendable {
    /// The query the cursor continues (its desired keys are not kept).
    @_spi(StratusEngine) public let query: CompiledQuery
    /// The container whose query the cursor continues.
    public let containerIdentifier: String
    /// The database whose query the cursor continues.
    public var databaseScope: Database.Scope { codedScope.scope }
    private let codedScope: Database.Scope.Coded
    /// The environment the query read, when production (cursors of development, and of
    /// versions before environments, have none).
    let environment: Container.Environment?
    /// The store the cursor's pages came from: a cursor is refused by any other store.
    let storeIdentifier: String
    /// The user record name of the user whose private or shared database the pages came from
    /// (`nil` in the public database, and in cursors of versions that did not keep it): another
    /// user's zones have the same names, and continuing there would skip their first records.
    let owner: String?
    /// The last record returned: its sort values as typed values (``QueryRules``). For a query
    /// over all zones, only the record name is kept here; ``zoneWide`` holds each zone's place.
    @_spi(StratusEngine) public let position: QueryPosition
    /// Each zone's place, for a query over every zone (one made without a zone).
    let zoneWide: ZoneWidePosition?

    static let prefix = "stc2_"
    /// Cursors of Stratus versions whose positions held the SQL values a store compared.
    static let olderPrefixes = ["stc1_"]

    private enum CodingKeys: String, CodingKey {
        case query, containerIdentifier, codedScope = "databaseScope", environment, storeIdentifier, owner, position, zoneWide
    }

    init(query: CompiledQuery, context: DatabaseContext, storeIdentifier: String, position: QueryPosition, zoneWide: ZoneWidePosition? = nil) {
        var query = query
        query.desiredKeys = nil
        self.query = query
        self.containerIdentifier = context.containerIdentifier
        self.codedScope = Database.Scope.Coded(context.scope)
        self.environment = context.environment == .development ? nil : context.environment
        self.storeIdentifier = storeIdentifier
        self.owner = context.scope == .public ? nil : context.userRecordName
        self.position = position
        self.zoneWide = zoneWide
        super.init()
    }

    private init(copying cursor: QueryCursor) {
        self.query = cursor.query
        self.containerIdentifier = cursor.containerIdentifier
        self.codedScope = cursor.codedScope
        self.environment = cursor.environment
        self.storeIdentifier = cursor.storeIdentifier
        self.owner = cursor.owner
        self.position = cursor.position
        self.zoneWide = cursor.zoneWide
        super.init()
    }

    /// The record type the cursor's query searches.
    ///
    /// ```swift
    /// print(cursor.recordType)   // "Task"
    /// ```
    public var recordType: String { query.recordType }

    /// The zone the cursor's query searches: the default zone for a query over every zone
    /// (see ``searchesAllZones``).
    public var zoneID: RecordZone.ID { query.zoneID }

    /// Whether the cursor continues a query over every zone of its database: one made without
    /// a zone, as CloudKit searches all zones when a query names none.
    ///
    /// ```swift
    /// let op = QueryOperation(query: query)   // no zoneID: every zone
    /// op.queryResultBlock = { if case .success(let cursor?) = $0 { assert(cursor.searchesAllZones) } }
    /// ```
    public var searchesAllZones: Bool { zoneWide != nil }

    /// The cursor as URL- and shell-safe text.
    public var serialized: String { OpaqueText.encode(self, prefix: Self.prefix) }

    /// Reads a cursor from ``serialized`` text.
    ///
    /// - Throws: ``StratusError`` `invalidArguments` when the text is not a cursor.
    public convenience init(serialized: String) throws {
        if Self.olderPrefixes.contains(where: serialized.hasPrefix) {
            throw StratusError(.invalidArguments, "the query cursor comes from an older version of Stratus, whose cursors this version cannot continue; start the query again")
        }
        guard serialized.hasPrefix(Self.prefix) else {
            throw StratusError(.invalidArguments, "'\(serialized.prefix(20))…' is not a Stratus query cursor (cursors start with \(Self.prefix))")
        }
        guard let cursor: QueryCursor = OpaqueText.decode(serialized, prefix: Self.prefix) else {
            throw StratusError(.invalidArguments, "the query cursor is damaged (it does not decode); copy it whole, or start the query again")
        }
        do {
            try cursor.validateContents()
        } catch let error as StratusError {
            throw StratusError(.invalidArguments, "the query cursor is not valid (\(error.message)); start the query again")
        }
        self.init(copying: cursor)
    }

    /// Whether this cursor continues `query` in `zoneID` (and not some other query); a `nil`
    /// zone means every zone, as for ``QueryOperation/zoneID``.
    ///
    /// ```swift
    /// if !cursor.continues(query, zoneID: nil) { cursor = nil }   // the saved cursor is another query's
    /// ```
    public func continues(_ query: Query, zoneID: RecordZone.ID? = nil) -> Bool {
        guard searchesAllZones == (zoneID == nil), let compiled = try? CompiledQuery(query, zoneID: zoneID ?? .default, desiredKeys: nil) else { return false }
        return compiled.fingerprint == self.query.fingerprint
    }

    func check(for context: DatabaseContext, storeIdentifier: String) throws {
        // A cursor can also be decoded from other Codable forms; check it before use.
        try validateContents()
        if zoneWide != nil && context.scope == .shared {
            throw StratusError(.invalidArguments, "a query in the shared database needs a zone: this cursor searches every zone")
        }
        guard context.containerIdentifier == containerIdentifier, context.scope == databaseScope else {
            throw StratusError(.invalidArguments, "the cursor belongs to \(containerIdentifier)/\(databaseScope.name), not to \(context.containerIdentifier)/\(context.scope.name)")
        }
        guard (environment ?? .development) == context.environment else {
            throw StratusError(.invalidArguments, "the cursor belongs to the \(environment ?? .development) environment, not to \(context.environment)")
        }
        guard storeIdentifier == self.storeIdentifier else {
            throw StratusError(.invalidArguments, "the cursor comes from another store; a cursor continues a query only on the store that printed it")
        }
        if let owner, owner != context.userRecordName {
            throw StratusError(.invalidArguments, "the cursor belongs to another user's \(databaseScope.name) database; a cursor continues a query only for the user whose query printed it")
        }
    }

    /// Checks what an edited or damaged cursor could hold that no store printed: names an
    /// engine must not see unchecked, and positions that do not fit the query. A position with
    /// a non-finite number (stores keep none) would compare with no row, so the query would end
    /// at once, as if every record had been read.
    private func validateContents() throws {
        try query.validate()
        try zoneWide?.validate()
        if let zoneWide {
            // Each zone's place holds the values; the cursor's own position, only a record name.
            try Self.checkPosition(position, valueCount: 0)
            for case let after? in zoneWide.zones.map(\.after) { try Self.checkPosition(after, valueCount: query.sortKeys.count) }
        } else {
            try Self.checkPosition(position, valueCount: query.sortKeys.count)
        }
    }

    private static func checkPosition(_ position: QueryPosition, valueCount: Int) throws {
        guard position.sortValues.count == valueCount else {
            throw StratusError(.invalidArguments, "the cursor's position holds \(position.sortValues.count) sort values for \(valueCount) sort keys")
        }
        for (index, value) in position.sortValues.enumerated() {
            guard let value, value.holdsNonFiniteNumber else { continue }
            throw StratusError(.invalidArguments, "the cursor's position holds a non-finite number for sort key \(index + 1), which no stored record has")
        }
    }

    public override func isEqual(_ object: Any?) -> Bool {
        guard let other = object as? QueryCursor else { return false }
        return query == other.query && containerIdentifier == other.containerIdentifier && databaseScope == other.databaseScope
            && environment == other.environment && storeIdentifier == other.storeIdentifier && owner == other.owner && position == other.position
            && zoneWide == other.zoneWide
    }

    public override var hash: Int {
        var hasher = Hasher()
        hasher.combine(query)
        hasher.combine(containerIdentifier)
        hasher.combine(databaseScope)
        hasher.combine(environment)
        hasher.combine(storeIdentifier)
        hasher.combine(owner)
        hasher.combine(position)
        hasher.combine(zoneWide)
        return hasher.finalize()
    }

    public override var description: String { "Cursor(\(query.recordType) after \(position.recordName))" }
}
