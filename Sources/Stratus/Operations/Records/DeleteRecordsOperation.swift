import Foundation

/// Deletes records by ID, or every record that matches a query, in batches.
///
/// Each deleted record is reported through ``perRecordDeleteBlock``. Cancelling stops at the
/// next batch; the final result is then `operationCancelled` with `completedItemCount` set to
/// the number of records deleted. Deleting a record that does not exist succeeds, so a delete
/// job can be re-run.
///
/// ```swift
/// let purge = DeleteRecordsOperation(query: Query(recordType: "Todo", format: "checked == %@", 1))
/// purge.perRecordDeleteBlock = { id, _ in print("deleted", id.recordName) }
/// purge.deleteRecordsResultBlock = { print($0) }
/// database.add(purge)
/// ```
public final class DeleteRecordsOperation: DatabaseOperation, @unchecked Sendable {
    public var recordIDs: [Record.ID]?
    public var query: Query?
    /// The zone a query deletes from; the default zone when `nil`.
    public var zoneID: RecordZone.ID?
    /// Records deleted per transaction.
    public var batchSize = ModifyRecordsOperation.maximumItemsPerBatch
    public var perRecordDeleteBlock: (@Sendable (Record.ID, Result<Void, any Error>) -> Void)?
    public var deleteRecordsResultBlock: (@Sendable (Result<Void, any Error>) -> Void)?
    /// A Stratus extension: for each record deleted successfully, whether a stored record was
    /// deleted or none was there (CloudKit reports both as success); called just before
    /// ``perRecordDeleteBlock``.
    ///
    /// ```swift
    /// purge.perRecordDeletionBlock = { id, kind in if kind == .notFound { print("no", id.recordName) } }
    /// ```
    public var perRecordDeletionBlock: (@Sendable (Record.ID, RecordDeletionKind) -> Void)?

    private var inputProvider: (@Sendable () throws -> [Record.ID])?

    public init(recordIDs: [Record.ID]) {
        self.recordIDs = recordIDs
        super.init()
    }

    public init(query: Query, zoneID: RecordZone.ID? = nil) {
        self.query = query
        self.zoneID = zoneID
        super.init()
    }

    /// A pipeline step: deletes the records `producer` produced (those passing `filter`).
    /// The operation depends on `producer`; see ``RecordProducingOperation``.
    public convenience init<Producer: RecordProducingOperation>(
        deletingRecordsFrom producer: Producer, where filter: (@Sendable (Record) -> Bool)? = nil
    ) {
        self.init(recordIDs: [])
        let output = producer.recordOutput
        output.startCollecting()
        addDependency(producer)
        inputProvider = { try output.records().filter { filter?($0) ?? true }.map(\.recordID) }
    }

    override func execute(engine: any StorageEngine, context: DatabaseContext) throws -> StratusError? {
        precondition(batchSize > 0, "DeleteRecordsOperation.batchSize must be positive")
        var errors: [Record.ID: StratusError] = [:]
        var deleted = 0
        var attempted = 0

        func deleteBatch(_ ids: [Record.ID]) throws {
            let outcome = try withRetry {
                try RecordWriteExecutor.apply(ModifyRequest(saves: [], recordIDsToDelete: ids, writeMode: .ifServerRecordUnchanged, isAtomic: false), engine: engine, context: context)
            }
            RecordWriteExecutor.collectReleasedAssets(outcome, engine: engine, context: context)
            for (index, id) in ids.enumerated() {
                let result = index < outcome.deleteResults.count ? outcome.deleteResults[index] : .failure(StratusError(.internalError, "the store gave no result for deleting '\(id.recordName)'", recordID: id))
                switch result {
                case .success(let existed):
                    deleted += 1
                    perRecordDeletionBlock?(id, existed ? .deleted : .notFound)
                case .failure(let error): errors[id] = error
                }
                perRecordDeleteBlock?(id, result.map { _ in () }.mapError { $0 })
            }
            attempted += ids.count
        }
        func cancelled() -> StratusError {
            var error = StratusError.cancelled("DeleteRecordsOperation", completed: deleted)
            error.partialErrorsByRecordID = errors
            return error
        }

        if let query {
            let zone = zoneID ?? .default
            try ModifyRecordsOperation.checkZone(Record.ID(recordName: "query", zoneID: zone), context)
            let compiled = try QueryAdmission.admit(CompiledQuery(query, zoneID: zone, desiredKeys: []), engine: engine, context: context)
            var position: QueryPosition?
            repeat {
                if isCancelled { return cancelled() }
                let page = try withRetry { try engine.queryRecords(compiled, in: context, after: position, limit: batchSize) }
                if !page.records.isEmpty { try deleteBatch(page.records.map(\.recordID)) }
                position = page.nextPosition
            } while position != nil
        } else {
            var ids = recordIDs ?? []
            if let inputProvider { ids += try inputProvider() }
            for id in ids {
                do {
                    try Naming.checkRecordName(id.recordName, allowSystemNames: true)
                    try Naming.checkZoneName(id.zoneID.zoneName)
                    try ModifyRecordsOperation.checkZone(id, context)
                } catch {
                    errors[id] = error
                    perRecordDeleteBlock?(id, .failure(error))
                }
            }
            let valid = ids.filter { errors[$0] == nil }
            for start in stride(from: 0, to: valid.count, by: batchSize) {
                if isCancelled { return cancelled() }
                try deleteBatch(Array(valid[start..<min(valid.count, start + batchSize)]))
            }
            attempted += ids.count - valid.count
        }
        return Self.partialFailure(errors, of: attempted)
    }

    override func complete(with error: StratusError?) {
        deleteRecordsResultBlock?(error.map { .failure($0) } ?? .success(()))
    }
}
