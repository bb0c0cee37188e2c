import Foundation

/// Fetches records by ID, like `CKFetchRecordsOperation`.
///
/// Each ID gets its own result; a missing ID fails alone with `unknownItem` (`zoneNotFound`
/// when its zone does not exist, as in CloudKit), and the final result is then `partialFailure`.
///
/// ```swift
/// let op = FetchRecordsOperation(recordIDs: [todoID, noteID])
/// op.desiredKeys = ["title"]
/// op.perRecordResultBlock = { id, result in print(id.recordName, (try? result.get())?["title"] ?? "missing") }
/// op.fetchRecordsResultBlock = { result in print("done:", result) }
/// database.add(op)
/// ```
open class FetchRecordsOperation: DatabaseOperation, RecordProducingOperation, @unchecked Sendable {
    /// IDs are fetched in batches of this many per engine call.
    public static let batchSize = 400

    /// The IDs of the records to fetch; each gets a ``perRecordResultBlock`` call.
    public var recordIDs: [Record.ID]?
    /// The keys to fetch; all keys when `nil`.
    public var desiredKeys: [String]?
    /// Each ID, with its record or its own error (`unknownItem` for a record that does not
    /// exist), as `CKFetchRecordsOperation.perRecordResultBlock`.
    ///
    /// ```swift
    /// op.perRecordResultBlock = { id, result in if let todo = try? result.get() { print(id.recordName, todo["title"] ?? "") } }
    /// ```
    public var perRecordResultBlock: ((Record.ID, Result<Record, any Error>) -> Void)?
    /// Called once at the end, as `CKFetchRecordsOperation.fetchRecordsResultBlock`: success,
    /// `partialFailure` when some ID failed, or the error that failed the whole request.
    ///
    /// ```swift
    /// op.fetchRecordsResultBlock = { result in if case .failure(let error) = result { print(error) } }
    /// ```
    public var fetchRecordsResultBlock: ((Result<Void, any Error>) -> Void)?
    /// CloudKit's older progress block: each record's download progress (Stratus reports 1.0
    /// once a record is read), before its result blocks.
    public var perRecordProgressBlock: ((Record.ID, Double) -> Void)?
    /// CloudKit's older per-record block: the record or the error, and the ID, after
    /// ``perRecordResultBlock``.
    public var perRecordCompletionBlock: ((Record?, Record.ID?, (any Error)?) -> Void)?
    /// CloudKit's older final block: the records read, by ID, and the error (`partialFailure`
    /// when some failed), after ``fetchRecordsResultBlock``.
    public var fetchRecordsCompletionBlock: (([Record.ID: Record]?, (any Error)?) -> Void)?
    /// Where the operation hands the fetched records to the stages of a pipeline
    /// (``RecordProducingOperation``), batch by batch as they are made.
    ///
    /// ```swift
    /// let delete = DeleteRecordsOperation(deletingRecordsFrom: fetch)   // reads fetch.recordOutput
    /// ```
    public let recordOutput = RecordOutput()

    /// A Stratus extension: where a pipeline with this fetch as its source keeps its position
    /// (the IDs done, in order; see ``PipelineCheckpoint``). A resumed fetch skips them: give
    /// it the same IDs.
    ///
    /// ```swift
    /// fetch.checkpoint = PipelineCheckpoint(job: "refresh-thumbnails")
    /// ```
    public var checkpoint: PipelineCheckpoint?

    /// The records read, kept for ``fetchRecordsCompletionBlock``.
    private var fetched: [Record.ID: Record] = [:]

    /// Whether the operation fetches the current user's record (``fetchCurrentUserRecordOperation()``)
    /// instead of ``recordIDs``.
    private var fetchesCurrentUserRecord = false

    /// An operation that fetches the records with `recordIDs`, as
    /// `CKFetchRecordsOperation(recordIDs:)`.
    ///
    /// ```swift
    /// let op = FetchRecordsOperation(recordIDs: [Record.ID(recordName: "todo-1")])
    /// ```
    public convenience init(recordIDs: [Record.ID]) {
        self.init()
        self.recordIDs = recordIDs
    }

    /// An operation with no IDs yet, as `CKFetchRecordsOperation()`: set ``recordIDs`` before
    /// it runs.
    ///
    /// ```swift
    /// let op = FetchRecordsOperation()
    /// op.recordIDs = ids
    /// ```
    public override init() {
        recordIDs = []
        super.init()
    }

    /// An operation that fetches the current user's record, as
    /// `CKFetchRecordsOperation.fetchCurrentUserRecordOperation()`: the `Users` record of the
    /// public database named by the user's record name (``Container/userRecordID()``), which
    /// the per-record blocks get under that ID. ``recordIDs`` is `nil` and ignored.
    ///
    /// Every user has one, as in CloudKit: a user's first fetch (or save) of it makes it, empty,
    /// with its user as creator (see ``Record/SystemType/userRecord``). Run the operation on the
    /// public database, where user records live; elsewhere it finds none (`unknownItem`). A
    /// caller who is not signed in has no user record: the operation fails with
    /// `notAuthenticated`.
    ///
    /// ```swift
    /// let op = FetchRecordsOperation.fetchCurrentUserRecordOperation()
    /// op.perRecordResultBlock = { id, result in
    ///     if let me = try? result.get() { print(id.recordName, me["nickname"] ?? "no nickname yet") }
    /// }
    /// container.publicCloudDatabase.add(op)
    /// ```
    public static func fetchCurrentUserRecordOperation() -> FetchRecordsOperation {
        let op = FetchRecordsOperation()
        op.recordIDs = nil
        op.fetchesCurrentUserRecord = true
        return op
    }

    override func execute(engine: any StorageEngine, context: DatabaseContext) throws -> StratusError? {
        var ids = Self.unique(recordIDs ?? [])
        if fetchesCurrentUserRecord {
            guard let me = context.userRecordID else {
                return StratusError(.notAuthenticated, "no user is signed in, and only a signed-in user has a user record (open the container with a user name)")
            }
            ids = [me]
        }
        if let desiredKeys { for key in desiredKeys { try Naming.checkDesiredKey(key) } }
        var errors: [Record.ID: StratusError] = [:]
        var done = 0
        var reads = RecordReadCheck(engine: engine, context: context)
        var first = 0
        if let start = try beginSource(checkpoint: checkpoint, engine: engine) {
            guard case .items(let count) = start else {
                return StratusError(.invalidArguments, "the checkpoint of job '\(checkpoint?.job ?? "")' holds \(start), not a count of record IDs; use another job name, or remove the checkpoint to start over")
            }
            first = min(count, ids.count)
        }
        func stopped() -> StratusError {
            var error = stoppedError("FetchRecordsOperation", completed: done)
            error.partialErrorsByRecordID = errors
            return error
        }
        var sequence = 0
        var zones = ZoneRules.Existence()
        for start in stride(from: first, to: ids.count, by: Self.batchSize) {
            if shouldStop { return stopped() }
            var produced: [Record] = []
            var batch: [Record.ID] = []
            for id in ids[start..<min(ids.count, start + Self.batchSize)] {
                do {
                    try Naming.checkRecordName(id.recordName, allowSystemNames: true)
                    try Naming.checkZoneName(id.zoneID.zoneName)
                    batch.append(id)
                } catch {
                    errors[id] = error
                    perRecordResultBlock?(id, .failure(error))
                    perRecordCompletionBlock?(nil, id, error)
                    done += 1
                }
            }
            // `__defaultOwner__` names the caller's own user record, as in CloudKit: it is read
            // under the caller's record name and reported under the ID asked for.
            let aliases = context.scope == .public ? batch.filter { $0.recordName == RecordZone.ID.currentUserDefaultOwner } : []
            let lookups = aliases.isEmpty ? batch : Self.unique(batch.map { CurrentUserRecord.resolving($0, in: context) })
            var found = batch.isEmpty ? [:] : try withRetry { try engine.fetchRecords(lookups, in: context) }
            for alias in aliases { found[alias] = found[CurrentUserRecord.resolving(alias, in: context)] }
            var unmade: [Record.ID: StratusError] = [:]
            // The caller's own user record exists from its first fetch, as CloudKit's exists
            // from the user's first use: made now when it is not stored yet.
            for id in batch where found[id] == nil {
                guard let own = CurrentUserRecord.id(of: CurrentUserRecord.resolving(id, in: context), in: context) else { continue }
                do {
                    switch try withRetry({ try CurrentUserRecord.make(own, engine: engine, context: context) }) {
                    case .success(let made): found[id] = made
                    case .failure(let error): unmade[id] = error
                    }
                } catch let error as StratusError where !error.isTransient {
                    // A store that cannot be written (opened read-only): this item fails, not the fetch.
                    var error = error
                    error.message = "the user record '\(id.recordName)' is made on its first fetch, and making it failed: \(error.message)"
                    error.recordID = id
                    unmade[id] = error
                }
            }
            for id in batch {
                if let error = unmade[id] {
                    errors[id] = error
                    perRecordResultBlock?(id, .failure(error))
                    perRecordCompletionBlock?(nil, id, error)
                } else if let record = found[id], let denied = try reads.denial(of: record) {
                    errors[id] = denied
                    perRecordResultBlock?(id, .failure(denied))
                    perRecordCompletionBlock?(nil, id, denied)
                } else if let record = found[id] {
                    let returned = record.presented(to: context.userRecordName).restricted(to: desiredKeys)
                    produced.append(returned)
                    if fetchRecordsCompletionBlock != nil { fetched[id] = returned }
                    perRecordProgressBlock?(id, 1.0)
                    perRecordResultBlock?(id, .success(returned))
                    perRecordCompletionBlock?(returned, id, nil)
                } else if try !withRetry({ try zones.contains(id.zoneID, engine: engine, context: context) }) {
                    let error = ZoneRules.zoneNotFound(id.zoneID, context, recordID: id)
                    errors[id] = error
                    perRecordResultBlock?(id, .failure(error))
                    perRecordCompletionBlock?(nil, id, error)
                } else {
                    let error = StratusError(.unknownItem, "record '\(id.recordName)' was not found in \(id.zoneID.zoneName)"
                                             + (fetchesCurrentUserRecord && context.scope != .public ? " of the \(context.scope.name) database; user records live in the public database" : ""),
                                             recordID: id)
                    errors[id] = error
                    perRecordResultBlock?(id, .failure(error))
                    perRecordCompletionBlock?(nil, id, error)
                }
                done += 1
            }
            let end = min(ids.count, start + Self.batchSize)
            guard try emit(produced, sequence: sequence, position: .items(end), to: recordOutput) else { return stopped() }
            sequence += 1
        }
        // A cancellation during the last batch is observed as during any other: the batch's
        // records were reported, and the operation did not finish as asked.
        if shouldStop { return stopped() }
        return Self.partialFailure(errors, of: ids.count)
    }

    /// `ids` without repeats, in order.
    private static func unique(_ ids: [Record.ID]) -> [Record.ID] {
        var seen = Set<Record.ID>()
        return ids.filter { seen.insert($0).inserted }
    }

    override func complete(with error: StratusError?) {
        recordOutput.complete(with: error)
        fetchRecordsResultBlock?(error.map { .failure($0) } ?? .success(()))
        // Like CloudKit: the records read, unless the operation failed as a whole before reading any.
        let wholeFailure = error.map { $0.code != .partialFailure } ?? false
        fetchRecordsCompletionBlock?(wholeFailure && fetched.isEmpty ? nil : fetched, error)
    }
}
