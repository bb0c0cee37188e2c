import Foundation

/// A store of containers: what ``Container`` reads and writes through.
///
/// Applications choose an engine and hand it to a container; they never call it. The embedded
/// default is `SQLiteEngine` (module `StratusSQLite`); `PostgresEngine` (module
/// `StratusPostgres`) shares one store among many machines.
///
/// ```swift
/// let engine = try SQLiteEngine(path: "/var/lib/stratus/app.sqlite")
/// let container = Container(identifier: "com.example.app", engine: engine)
/// ```
///
/// ## For engine authors
///
/// The requirements are Stratus's engine SPI: `@_spi(StratusEngine) import Stratus` to see
/// and implement them. One call is one transaction. Operations validate, apply the write
/// policy, split into batches, retry and report per item; an engine stores and reads, and
/// translates Stratus's query, ordering and equality rules (``QueryRules``) into its own
/// language. Engines never see an `Operation`, and operations never build SQL. A new engine
/// passes the conformance suite in `StratusTestSupport` unchanged.
///
/// Engines are called from operation threads and must be safe to call concurrently. Errors
/// they throw are ``StratusError``s; a busy store is `.zoneBusy` with `retryAfterSeconds`.
public protocol StorageEngine: AnyObject, Sendable {
    /// Identifies this store (not its location): cursors and change tokens from another store
    /// are refused with it.
    @_spi(StratusEngine) var storeIdentifier: String { get throws }

    /// Reads records by ID. IDs not in the store are absent from the answer.
    @_spi(StratusEngine) func fetchRecords(_ ids: [Record.ID], in database: DatabaseContext) throws -> [Record.ID: Record]

    /// Runs `body` in one write transaction of `database`: committed when `body` returns,
    /// rolled back when it throws (the error is rethrown). See ``RecordWriteTransaction``.
    @_spi(StratusEngine) func writeRecords<T>(in database: DatabaseContext, _ body: (any RecordWriteTransaction) throws -> T) throws -> T

    /// Reads one page of a query's matches after `position` (from the start when `nil`).
    @_spi(StratusEngine) func queryRecords(_ query: CompiledQuery, in database: DatabaseContext, after position: QueryPosition?, limit: Int) throws -> QueryPage

    /// Opens a read of every match of a query after `position` (from the start when `nil`), in
    /// order, from one snapshot of the store that the stream keeps until it is closed.
    ///
    /// - Throws: `zoneNotFound` for a missing zone other than the default zone.
    @_spi(StratusEngine) func openQueryStream(_ query: CompiledQuery, in database: DatabaseContext, after position: QueryPosition?) throws -> any QueryStream

    /// How many records match a query, counted by the store without reading them.
    ///
    /// - Throws: `zoneNotFound` for a missing zone other than the default zone.
    @_spi(StratusEngine) func countRecords(_ query: CompiledQuery, in database: DatabaseContext) throws -> Int

    /// Stores record type schemas for a container and builds the indexes they declare, in one
    /// transaction. A schema replaces the type's previous one; indexes it no longer declares go.
    /// The schemas were checked by the caller.
    @_spi(StratusEngine) func saveSchemas(_ schemas: [RecordTypeSchema], containerIdentifier: String) throws

    /// The record type schemas saved for a container.
    @_spi(StratusEngine) func fetchSchemas(containerIdentifier: String) throws -> [RecordTypeSchema]

    // MARK: Zones

    /// The zones of a database with their capabilities, by name. The default zone is always
    /// present, except in the shared database, which has none.
    @_spi(StratusEngine) func fetchZones(in database: DatabaseContext) throws -> [RecordZone]

    /// Creates and deletes zones in one transaction; each item succeeds or fails alone.
    ///
    /// Saving a zone that exists answers it as stored. Deleting a zone deletes its records
    /// and its change history in the same transaction; later writes to it fail with
    /// `zoneNotFound`, and the deletion is a change of the database. Zone IDs were checked by
    /// the caller; item failures (a missing zone, the default zone) come back per item.
    @_spi(StratusEngine) func modifyZones(saving zones: [RecordZone], deleting zoneIDs: [RecordZone.ID], in database: DatabaseContext) throws -> ZoneModifyOutcome

    // MARK: Change history

    /// Reads one zone's changes after a position, oldest first, in one snapshot.
    ///
    /// Change positions must follow commit order: a reader that asks again from the answered
    /// position sees every later change once, also while others write. The default zone's
    /// history is empty until its first write.
    ///
    /// - Throws: `zoneNotFound` for a missing zone; `invalidArguments` for a zone without the
    ///   `fetchChanges` capability; `changeTokenExpired` for a position from another life of
    ///   the zone, ahead of its history, or before its retained history (tombstones compacted).
    @_spi(StratusEngine) func fetchZoneChanges(_ request: ZoneChangesRequest, in database: DatabaseContext) throws -> ZoneChangeBatch

    /// Reads a database's zone changes (zones created, written to or deleted) after a
    /// position, oldest first.
    ///
    /// - Throws: `changeTokenExpired` as ``fetchZoneChanges(_:in:)`` does.
    @_spi(StratusEngine) func fetchDatabaseChanges(after position: ChangePosition?, limit: Int, in database: DatabaseContext) throws -> DatabaseChangeBatch

    /// The position a job last recorded with ``RecordWriteTransaction/saveJobProgress(_:position:text:)``, if any.
    @_spi(StratusEngine) func jobProgress(_ job: String) throws -> Int64?

    /// The text position a job last recorded with ``RecordWriteTransaction/saveJobProgress(_:position:text:)``,
    /// if it recorded one.
    @_spi(StratusEngine) func jobProgressText(_ job: String) throws -> String?

    /// Forgets a finished job's position.
    @_spi(StratusEngine) func removeJobProgress(_ job: String) throws

    /// Every database the store holds with its zones and their record counts by type, in one
    /// snapshot. Databases that never held a zone or a record are not listed.
    @_spi(StratusEngine) func inventory() throws -> StoreInventory

    /// Checks the store's own consistency (its files, pages, indexes) and answers what is wrong,
    /// empty when nothing is.
    @_spi(StratusEngine) func checkIntegrity() throws -> [String]

    /// Removes record and zone tombstones of a database that were deleted before `cutoff`.
    ///
    /// Positions before the newest removed tombstone expire: reading from them would miss
    /// deletions. Engines may also compact on their own, keeping at least their configured
    /// retention.
    @_spi(StratusEngine) func compactChangeHistory(in database: DatabaseContext, deletedBefore cutoff: Date) throws -> ChangeHistoryCompaction
}

/// Which database of which container, seen by which user: the scope of every engine call.
@_spi(StratusEngine)
public struct DatabaseContext: Hashable, Sendable, CustomStringConvertible {
    public let containerIdentifier: String
    public let scope: Database.Scope
    /// The current user's name.
    public let userName: String

    public init(containerIdentifier: String, scope: Database.Scope, userName: String) {
        self.containerIdentifier = containerIdentifier
        self.scope = scope
        self.userName = userName
    }

    /// Whose rows these are: everyone's in the public database, the user's own otherwise.
    /// Private (and shared) records of one user are invisible to another user.
    public var storageOwner: String { scope == .public ? "" : userName }

    /// The user's record ID, as stored in creator and last-modifier system fields.
    public var userRecordID: Record.ID { Record.ID(recordName: userName) }

    public var description: String { "\(containerIdentifier)/\(scope)" + (scope == .public ? "" : " (\(userName))") }
}

/// One page of query results and where the next page starts.
@_spi(StratusEngine)
public struct QueryPage: Sendable {
    /// The matching records, with only the query's desired keys.
    public var records: [Record]
    /// The position of the last record, when more records may follow.
    public var nextPosition: QueryPosition?

    public init(records: [Record], nextPosition: QueryPosition?) {
        self.records = records
        self.nextPosition = nextPosition
    }
}

/// A row's place in a query's order: its sort-key values and record name (the keyset).
@_spi(StratusEngine)
public struct QueryPosition: Hashable, Sendable, Codable {
    /// One value per sort key of the compiled query; `nil` where the record has no value.
    public var sortValues: [FieldValue?]
    public var recordName: String

    public init(sortValues: [FieldValue?], recordName: String) {
        self.sortValues = sortValues
        self.recordName = recordName
    }
}

/// A Stratus extension: what a store holds, database by database (every container and user),
/// for tools that list or copy a whole store (`stratus info`, `stratus copy`).
///
/// ```swift
/// for database in try await container.storeInventory().databases { print(database.containerIdentifier, database.scope, database.zones.count) }
/// ```
public struct StoreInventory: Sendable {
    /// One database of one container, as one owner's (everyone's for the public database).
    public struct DatabaseEntry: Sendable {
        public var containerIdentifier: String
        public var scope: Database.Scope
        /// The user whose private (or shared) database this is; empty for the public database.
        public var owner: String
        public var zones: [ZoneEntry]

        public init(containerIdentifier: String, scope: Database.Scope, owner: String, zones: [ZoneEntry]) {
            self.containerIdentifier = containerIdentifier
            self.scope = scope
            self.owner = owner
            self.zones = zones
        }
    }

    /// One zone with its capabilities and how many records of each type it holds.
    public struct ZoneEntry: Sendable {
        public var zone: RecordZone
        public var recordCounts: [String: Int]

        public init(zone: RecordZone, recordCounts: [String: Int]) {
            self.zone = zone
            self.recordCounts = recordCounts
        }
    }

    public var databases: [DatabaseEntry]
    /// The containers with record type schemas.
    public var containersWithSchemas: [String]
    /// The store's size in bytes, when the engine knows it.
    public var sizeInBytes: Int64?
    /// The version of the engine's tables.
    public var schemaVersion: Int

    public init(databases: [DatabaseEntry], containersWithSchemas: [String], sizeInBytes: Int64?, schemaVersion: Int) {
        self.databases = databases
        self.containersWithSchemas = containersWithSchemas
        self.sizeInBytes = sizeInBytes
        self.schemaVersion = schemaVersion
    }
}
