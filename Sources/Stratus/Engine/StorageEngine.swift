import Foundation

/// The interface between operations and a store. One call is one transaction.
///
/// Operations validate, split into batches, retry and report per item; an engine stores and
/// reads. Engines never see an `Operation`, and operations never build SQL. A new engine
/// (SQLite, PostgreSQL) implements this protocol and passes the conformance suite in
/// `StratusTestSupport`.
///
/// Engines are called from operation threads and must be safe to call concurrently.
/// Errors they throw are ``StratusError``s; a busy store is `.zoneBusy` with `retryAfterSeconds`.
///
/// ```swift
/// let engine: any StorageEngine = try SQLiteEngine(path: "/var/lib/stratus/app.sqlite")
/// let container = Container(identifier: "com.example.app", engine: engine)
/// ```
public protocol StorageEngine: AnyObject, Sendable {
    /// Reads records by ID. IDs not in the store are absent from the answer.
    func fetchRecords(_ ids: [Record.ID], in database: DatabaseContext) throws -> [Record.ID: Record]

    /// Saves and deletes records in one transaction, following ``ModifyRequest``'s policy.
    ///
    /// Item failures (a stale change tag, a missing asset file) are reported per item in the
    /// answer; a thrown error means nothing was written.
    func modifyRecords(_ request: ModifyRequest, in database: DatabaseContext) throws -> ModifyOutcome

    /// Reads one page of a query's matches after `position` (from the start when `nil`).
    func queryRecords(_ query: CompiledQuery, in database: DatabaseContext, after position: QueryPosition?, limit: Int) throws -> QueryPage

    /// Stores record type schemas for a container and builds the indexes they declare, in one
    /// transaction. A schema replaces the type's previous one; indexes it no longer declares go.
    func saveSchemas(_ schemas: [RecordTypeSchema], containerIdentifier: String) throws

    /// The record type schemas saved for a container.
    func fetchSchemas(containerIdentifier: String) throws -> [RecordTypeSchema]

    // MARK: Zones

    /// The zones of a database with their capabilities, by name. The default zone is always
    /// present, except in the shared database, which has none.
    func fetchZones(in database: DatabaseContext) throws -> [RecordZone]

    /// Creates and deletes zones in one transaction; each item succeeds or fails alone.
    ///
    /// Saving a zone that exists answers it as stored. Deleting a zone deletes its records
    /// and its change history in the same transaction; later writes to it fail with
    /// `zoneNotFound`, and the deletion is a change of the database. Zone IDs were checked by
    /// the caller; item failures (a missing zone, the default zone) come back per item.
    func modifyZones(saving zones: [RecordZone], deleting zoneIDs: [RecordZone.ID], in database: DatabaseContext) throws -> ZoneModifyOutcome

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
    func fetchZoneChanges(_ request: ZoneChangesRequest, in database: DatabaseContext) throws -> ZoneChangeBatch

    /// Reads a database's zone changes (zones created, written to or deleted) after a
    /// position, oldest first.
    ///
    /// - Throws: `changeTokenExpired` as ``fetchZoneChanges(_:in:)`` does.
    func fetchDatabaseChanges(after position: ChangePosition?, limit: Int, in database: DatabaseContext) throws -> DatabaseChangeBatch

    /// Removes record and zone tombstones of a database that were deleted before `cutoff`.
    ///
    /// Positions before the newest removed tombstone expire: reading from them would miss
    /// deletions. Engines may also compact on their own, keeping at least their configured
    /// retention.
    func compactChangeHistory(in database: DatabaseContext, deletedBefore cutoff: Date) throws -> ChangeHistoryCompaction
}

/// Which database of which container, seen by which user: the scope of every engine call.
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

/// Saves and deletes for one engine transaction.
public struct ModifyRequest: Sendable {
    public var recordsToSave: [Record]
    public var recordIDsToDelete: [Record.ID]
    public var writeMode: RecordWriteMode
    /// Keep the system fields the records carry; see ``RecordWriteRules``.
    public var preservesSystemFields: Bool
    /// When true, nothing is written if any item fails.
    public var isAtomic: Bool
    /// When false, nobody looks at the stored records: a successful save's result may carry
    /// the request's own record instead of a new one with the store's system fields, which
    /// spares a bulk import a record per record.
    public var returnsSavedRecords: Bool

    public init(recordsToSave: [Record], recordIDsToDelete: [Record.ID], writeMode: RecordWriteMode, preservesSystemFields: Bool = false, isAtomic: Bool,
                returnsSavedRecords: Bool = true) {
        self.recordsToSave = recordsToSave
        self.recordIDsToDelete = recordIDsToDelete
        self.writeMode = writeMode
        self.preservesSystemFields = preservesSystemFields
        self.isAtomic = isAtomic
        self.returnsSavedRecords = returnsSavedRecords
    }
}

/// What an engine did with a ``ModifyRequest``: a result for every item, in request order.
public struct ModifyOutcome: Sendable {
    /// For each record to save, in order: the record as stored (new change tag, dates) and
    /// what kind of write it was, or its error.
    public var saveResults: [Result<(Record, RecordWriteKind), StratusError>]
    /// For each record ID to delete, in order: success or its error.
    public var deleteResults: [Result<Void, StratusError>]
    /// Records deleted because a `.deleteSelf` reference pointed at a deleted record.
    public var cascadeDeletedIDs: [Record.ID]

    public init(saveResults: [Result<(Record, RecordWriteKind), StratusError>] = [], deleteResults: [Result<Void, StratusError>] = [], cascadeDeletedIDs: [Record.ID] = []) {
        self.saveResults = saveResults
        self.deleteResults = deleteResults
        self.cascadeDeletedIDs = cascadeDeletedIDs
    }
}

/// One page of query results and where the next page starts.
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
public struct QueryPosition: Hashable, Sendable, Codable {
    /// One value per sort key of the compiled query; `nil` where the record has no value.
    public var sortValues: [FieldValue?]
    public var recordName: String

    public init(sortValues: [FieldValue?], recordName: String) {
        self.sortValues = sortValues
        self.recordName = recordName
    }
}
