import Foundation
import Synchronization

/// Saves and deletes records, like `CKModifyRecordsOperation`.
///
/// Each record gets its own result. With ``isAtomic`` (the default) nothing is written when
/// any item fails: that item reports its own error and every other item `batchRequestFailed`;
/// this holds in zones with the `atomic` capability only (custom zones, unless created without
/// it), as in CloudKit: a request that writes in the default zone is applied item by item.
/// Without it, each item succeeds or fails alone. Either way the final result is
/// `partialFailure` when some item failed. Non-atomic requests larger than
/// ``itemsPerBatch`` items (CloudKit's 400 by default) or ``maximumBytesPerBatch`` bytes are
/// split into batches, each one transaction; an atomic request runs as one transaction of at
/// most ``maximumAtomicItems`` items.
///
/// ```swift
/// let op = ModifyRecordsOperation(recordsToSave: [todo], recordIDsToDelete: [oldID])
/// op.savePolicy = .changedKeys
/// op.perRecordSaveBlock = { id, result in if case .failure(let e) = result { print(id.recordName, e) } }
/// op.modifyRecordsResultBlock = { result in print(result) }
/// database.add(op)
/// ```
open class ModifyRecordsOperation: DatabaseOperation, RecordProducingOperation, @unchecked Sendable {
    override var recordsPipelinePositions: Bool { true }

    /// How a save treats the copy of the record already in the store.
    ///
    /// ```swift
    /// let save = ModifyRecordsOperation(recordsToSave: [edited], recordIDsToDelete: nil)
    /// save.savePolicy = .changedKeys   // last writer wins, key by key
    /// ```
    public enum SavePolicy: Int, Hashable, Sendable, Codable {
        /// Save only if the record's change tag equals the stored one (or it is new);
        /// otherwise fail with `serverRecordChanged`. Writes the changed keys.
        case ifServerRecordUnchanged = 0
        /// Write only the keys the client changed; ignore change tags.
        case changedKeys = 1
        /// Write every key the record holds, changed or not (and the keys it removed); ignore
        /// change tags. Keys only the store holds stay, as in CloudKit: a record fetched with
        /// `desiredKeys` writes the keys it fetched and those set since.
        case allKeys = 2
    }

    /// `CKModifyRecordsOperation.RecordSavePolicy`'s name for ``SavePolicy``.
    public typealias RecordSavePolicy = SavePolicy

    /// CloudKit's per-request item limit; larger non-atomic requests are split.
    public static let maximumItemsPerBatch = 400
    /// CloudKit's per-request size limit in bytes; larger non-atomic requests are split.
    public static let maximumBytesPerBatch = 2_000_000
    /// The most items one atomic request may hold (one transaction).
    public static let maximumAtomicItems = 100_000

    /// A Stratus extension: the most items a non-atomic request writes in one transaction,
    /// ``maximumItemsPerBatch`` (CloudKit's per-request limit) unless set. Bulk loads write
    /// faster in larger transactions (`stratus import` uses 2,000 on SQLite and 10,000 on
    /// PostgreSQL); a transaction still ends at ``maximumBytesPerBatch``, and other writers
    /// wait for it as long as it runs.
    ///
    /// ```swift
    /// let load = ModifyRecordsOperation(recordsToSave: rows)
    /// load.itemsPerBatch = 2_000
    /// ```
    public var itemsPerBatch = ModifyRecordsOperation.maximumItemsPerBatch {
        didSet { precondition(itemsPerBatch > 0, "itemsPerBatch must be positive") }
    }

    /// The records to save; each gets a ``perRecordSaveBlock`` call.
    public var recordsToSave: [Record]?
    /// The IDs of the records to delete; each gets a ``perRecordDeleteBlock`` call.
    public var recordIDsToDelete: [Record.ID]?
    /// How saves treat the stored copy of each record: ``SavePolicy/ifServerRecordUnchanged``
    /// by default, as in CloudKit.
    ///
    /// ```swift
    /// op.savePolicy = .changedKeys   // last writer wins, key by key
    /// ```
    public var savePolicy: SavePolicy = .ifServerRecordUnchanged
    /// A Stratus extension: CloudKit Web Services' operation type (create, update, replace,
    /// forceUpdate, forceReplace). When set, it is used instead of ``savePolicy``.
    public var writeMode: RecordWriteMode?
    /// A Stratus extension for restoring exports: keep the creation and modification dates,
    /// users and change tags the records carry (in modes that do not check tags); a record
    /// identical to the stored one is then not written at all, and a record's parent need not
    /// exist (CloudKit's data holds children whose parent was deleted). Off by default, as in
    /// CloudKit.
    public var preservesSystemFields = false
    /// With ``preservesSystemFields``: the records are the stored versions, changed only by what
    /// the store lacked (``AssetAttacher`` attaching content), so their tags stay.
    var keepsGivenVersion = false
    /// All or nothing, in zones with the `.atomic` capability (custom zones, unless created
    /// without it); in the default zone, as in CloudKit, and in other zones each item succeeds or
    /// fails alone, and a request that writes in the default zone is applied item by item.
    ///
    /// ```swift
    /// let op = ModifyRecordsOperation(recordsToSave: [stale, fresh])   // in the default zone
    /// op.isAtomic = true      // no effect there: `fresh` is saved, `stale` fails alone
    /// ```
    public var isAtomic = true
    /// An atomic request written in one transaction whatever zones it touches, instead of
    /// zone by zone as CloudKit writes it, and all or nothing also in zones without the atomic
    /// capability (the default zone): for jobs whose bookkeeping needs all or nothing across
    /// zones (an import's atomic run, and the batch that finds where its reject limit falls).
    /// In the shared database, each owner's part is a transaction of its own.
    var isAtomicAcrossZones = false
    /// Each record to save, with the record as stored (its new change tag and dates) or its
    /// own error, as `CKModifyRecordsOperation.perRecordSaveBlock`.
    ///
    /// ```swift
    /// op.perRecordSaveBlock = { id, result in if case .failure(let error) = result { print(id.recordName, error) } }
    /// ```
    public var perRecordSaveBlock: ((Record.ID, Result<Record, any Error>) -> Void)?
    /// Each record to delete, with success or its own error, as
    /// `CKModifyRecordsOperation.perRecordDeleteBlock`.
    ///
    /// ```swift
    /// op.perRecordDeleteBlock = { id, result in print(id.recordName, result) }
    /// ```
    public var perRecordDeleteBlock: ((Record.ID, Result<Void, any Error>) -> Void)?
    /// Called once at the end, as `CKModifyRecordsOperation.modifyRecordsResultBlock`: success,
    /// `partialFailure` when some item failed (its ``StratusError/partialErrorsByRecordID`` names
    /// each), or the error that failed the whole request.
    ///
    /// ```swift
    /// op.modifyRecordsResultBlock = { result in if case .failure(let error) = result { print(error) } }
    /// ```
    public var modifyRecordsResultBlock: ((Result<Void, any Error>) -> Void)?
    /// A Stratus extension: for each saved record, whether it was created, updated or left
    /// unchanged; called just before ``perRecordSaveBlock``.
    public var perRecordWriteKindBlock: ((Record.ID, RecordWriteKind) -> Void)?
    /// CloudKit's older progress block: each saved record's upload progress (Stratus reports
    /// 1.0 once the record is written), before its result blocks.
    public var perRecordProgressBlock: ((Record, Double) -> Void)?
    /// CloudKit's older per-record block, for saves: the record as stored and `nil`, or the
    /// record the client gave and the error; after ``perRecordSaveBlock``.
    public var perRecordCompletionBlock: ((Record, (any Error)?) -> Void)?
    /// CloudKit's older final block: the records saved, the IDs deleted and the error
    /// (`partialFailure` when some item failed), after ``modifyRecordsResultBlock``.
    public var modifyRecordsCompletionBlock: (([Record]?, [Record.ID]?, (any Error)?) -> Void)?
    /// A token the client chooses to mark the local changes this request carries, as
    /// `CKModifyRecordsOperation.clientChangeTokenData`: after the request writes to a zone,
    /// ``FetchRecordZoneChangesOperation`` hands the latest such token back for that zone, so
    /// the client can tell its changes arrived. Stratus treats a process as CloudKit treats a
    /// device: the token is kept in this process (per store, database, user and zone), and a
    /// fetch in another process gets `nil`, as a device that never sent one does.
    public var clientChangeTokenData: Data?
    /// A Stratus extension: the most bytes one asset's content may have; a larger source fails
    /// its record with `limitExceeded` before a byte is stored. ``Asset/maximumContentSize`` unless set.
    public var maximumAssetSize = Asset.maximumContentSize
    /// Where the operation hands the records as saved, with their new change tags to the stages of a pipeline
    /// (``RecordProducingOperation``), batch by batch as they are made.
    ///
    /// ```swift
    /// let names = TransformOperation(transforming: modify) { saved in saved.map(\.recordID.recordName) }
    /// ```
    public let recordOutput = RecordOutput()

    /// What ``modifyRecordsCompletionBlock`` reports.
    private var savedRecords: [Record] = []
    private var deletedRecordIDs: [Record.ID] = []
    /// The caller's user record name, who reads themself as `__defaultOwner__` in the records
    /// handed back (see ``Record/creatorUserRecordID``).
    private var viewer: String?

    /// The producer's batches, when the operation is a pipeline stage.
    private var input: PipelineChannel<Record>?
    private var transform: (@Sendable ([Record]) throws -> [Record])?
    /// Batches handed to consumers so far, when the operation is itself a pipeline's source.
    private var handedOn = 0
    /// Whether the per-record blocks get each record as stored (with its new system fields);
    /// when false they get the record as it was given, and a save need not read or make the
    /// stored one. A job that only counts outcomes (``RecordUpdater``) sets it.
    package var perRecordBlocksGetStoredRecords = true
    /// A job's position recorded in the transaction of the request's last batch (an importer's
    /// settled items, and as text the items before them not settled), so that a resumed job
    /// knows exactly what committed.
    package var jobProgress: (job: String, position: Int64, text: String?)?
    /// The job progress's text given how many items of the transaction failed, instead of
    /// ``jobProgress``'s (see ``JobProgressEntry/textAfterFailures``).
    package var jobProgressTextAfterFailures: (@Sendable (Int) -> String?)?
    /// Whether the request restores CloudKit's own records as the system made them: the
    /// `Users` records of the public database (see ``RecordImporter/Options/writesSystemRecords``).
    package var writesSystemRecords = false
    /// See ``ModifyRequest/deletedRecordOwners`` (an import of other owners' zones as the
    /// current user's).
    var deletedRecordOwners: [Record.ID: String] = [:]
    /// Where the request writes instead of the store, for a dry run: every item gets the result
    /// a write would give it, and nothing is stored (see ``WriteSimulation``).
    package var simulation: WriteSimulation?

    /// Records a producer prepared on its own thread (see ``PreparedSave``), saved before
    /// ``recordsToSave``.
    private var preparedSaves: [PreparedSave] = []
    /// Saves and deletions applied one after another (``init(preparedSegments:)``); empty for
    /// a request of one segment.
    private var segments: [Segment] = []
    /// With segments: each segment's failed items, by ID (a segment names each record once),
    /// as the request's `partialFailure` cannot tell apart two failures of one record.
    package private(set) var failuresBySegment: [[Record.ID: StratusError]] = []
    /// Whether an item's failure made the atomic request (in zones with the atomic capability)
    /// write nothing: what CloudKit's `modifyRecords(…atomically: true)` throws for.
    package private(set) var failedAtomically = false
    /// Whether a failure of the store ends the request as a whole even after one of its
    /// transactions committed: a job's (an import's, a copy's), which stops and says what it
    /// wrote rather than counting records it never tried as rejected.
    package var stopsOnStoreFailure = false
    /// Whether a transaction of this request committed (see ``answersItemByItem``).
    private var committedTransaction = false
    /// The failure after which the request's remaining items were failed one by one.
    private var abandonment: StratusError?

    /// An operation with nothing to save or delete yet, CloudKit's designated initializer:
    /// a subclass overrides it (`override init() { super.init(); … }`) as it does in CloudKit.
    ///
    /// ```swift
    /// let op = ModifyRecordsOperation()
    /// op.recordsToSave = [todo]
    /// ```
    public override init() {
        super.init()
    }

    /// An operation that saves `recordsToSave` and deletes `recordIDsToDelete`, as
    /// `CKModifyRecordsOperation(recordsToSave:recordIDsToDelete:)`.
    ///
    /// ```swift
    /// let op = ModifyRecordsOperation(recordsToSave: [todo], recordIDsToDelete: [done.recordID])
    /// ```
    public convenience init(recordsToSave: [Record]? = nil, recordIDsToDelete: [Record.ID]? = nil) {
        self.init()
        self.recordsToSave = recordsToSave
        self.recordIDsToDelete = recordIDsToDelete
    }

    /// Saves records that were checked and prepared already, so that they are not checked
    /// again: an importer prepares each record on its reading thread.
    package convenience init(preparedSaves: [PreparedSave]) {
        self.init()
        self.preparedSaves = preparedSaves
    }

    /// Saves and deletes checked and prepared records in segments applied one after another,
    /// each as if in a transaction of its own (saves before deletions within a segment, as in
    /// any request), so that the request may name a record once in each segment: an import
    /// whose input names a record again. The segments still share the request's transactions
    /// (``itemsPerBatch`` items each). Per-item blocks are called segment by segment; each
    /// segment's failures are in ``failuresBySegment``. Non-atomic only: the request's store
    /// failures end it as a job's do (``stopsOnStoreFailure``).
    package convenience init(preparedSegments: [Segment]) {
        self.init()
        if preparedSegments.count == 1 {
            preparedSaves = preparedSegments[0].saves
            recordIDsToDelete = preparedSegments[0].deletes
        } else {
            segments = preparedSegments
        }
        isAtomic = false
    }

    /// One segment of a request (``init(preparedSegments:)``): records it names at most once.
    package struct Segment: Sendable {
        package var saves: [PreparedSave]
        package var deletes: [Record.ID]

        package init(saves: [PreparedSave], deletes: [Record.ID]) {
            self.saves = saves
            self.deletes = deletes
        }
    }

    /// A pipeline stage: saves each batch `producer` produces, after `transform`, while the
    /// producer goes on; see ``ProducingOperation``.
    ///
    /// `transform` is called once per batch, on this operation's thread; the records it
    /// returns are saved (those it drops are not). Each batch is one request: ``isAtomic``
    /// applies to it, and it is split into transactions of ``itemsPerBatch`` items, except in
    /// a pipeline with a ``PipelineCheckpoint``, where each batch is written in one
    /// transaction together with the source's position. ``recordsToSave`` and
    /// ``recordIDsToDelete``, when set, are written first. The records as saved go on to this
    /// operation's own consumers, batch for batch.
    ///
    /// ```swift
    /// let query = QueryOperation(query: Query(recordType: "Item"))
    /// query.fetchAllResults = true
    /// let save = ModifyRecordsOperation(savingRecordsFrom: query) { items in
    ///     items.forEach { $0["checked"] = 1 }
    ///     return items
    /// }
    /// ```
    public convenience init<Producer: ProducingOperation>(
        savingRecordsFrom producer: Producer,
        transform: @escaping @Sendable ([Record]) throws -> [Record] = { $0 }
    ) where Producer.Element == Record {
        self.init()
        self.transform = transform
        input = attach(to: producer)
    }

    override func execute(engine: any StorageEngine, context: DatabaseContext) throws -> StratusError? {
        viewer = context.userRecordName
        if !segments.isEmpty { return try writeSegments(engine: engine, context: context) }
        var errors: [Record.ID: StratusError] = [:]
        var done = 0
        let toSave = recordsToSave ?? [], toDelete = recordIDsToDelete ?? []
        // CloudKit refuses the whole request, saving nothing ("You can't save the same record
        // twice"): which of the two versions should win is the caller's to say. Stratus's write
        // modes are an import's, where a later line of the same name follows an earlier one.
        if toSave.count > 1 && writeMode == nil {
            var seen = Set<Record.ID>(minimumCapacity: toSave.count)
            for record in toSave where !seen.insert(record.recordID).inserted {
                return StratusError(.invalidArguments, "You can't save the same record twice: \(record.recordID)", recordID: record.recordID)
            }
        }
        var total = preparedSaves.count + toSave.count + toDelete.count
        if total > 0 || input == nil {
            let handOn: ([Record]) throws -> Bool = { [self] saved in
                guard recordOutput.hasConsumers else { return true }
                defer { handedOn += 1 }
                return try emit(saved, sequence: handedOn, position: nil, to: recordOutput)
            }
            let progress = jobProgress.map { JobProgressEntry(job: $0.job, position: $0.position, text: $0.text, textAfterFailures: jobProgressTextAfterFailures) }
            // As in CloudKit, an atomic request is atomic per zone: a failure in one zone fails
            // that zone's items only, and the default zone's items succeed or fail one by one.
            let whole = ZoneGroup(prepared: preparedSaves, saves: toSave, deletes: toDelete)
            let groups = isAtomic && !isAtomicAcrossZones ? Self.zoneGroups(of: whole) : [whole]
            // The limit refuses the request before any of its zones is written, so that the
            // handler CloudKit prescribes (split the request in half, send both) sends nothing
            // twice.
            if isAtomic, let over = groups.first(where: { $0.count > Self.maximumAtomicItems && ($0.mayBeAtomic || isAtomicAcrossZones) }) {
                return Self.atomicLimitError(over.count)
            }
            for (index, group) in groups.enumerated() {
                // The job's progress goes with the request's last transaction.
                let stop: StratusError?
                do {
                    stop = try write(
                        prepared: group.prepared, saving: group.saves, deleting: group.deletes, progress: index == groups.count - 1 ? progress : nil,
                        singleTransaction: false, interruptible: true, engine: engine, context: context, errors: &errors, done: &done, handOn: handOn)
                } catch let error as StratusError where answersItemByItem && !recordOutput.hasConsumers {
                    // Nothing of this zone's items was written (write answers a failure after
                    // one of its own transactions itself).
                    failUnwritten(group.prepared.map(\.record) + group.saves, group.deletes, with: error, errors: &errors, done: &done)
                    abandonment = error
                    stop = nil
                }
                if let stop { return stop }
                if let abandonment {
                    for later in groups[(index + 1)...] {
                        failUnwritten(later.prepared.map(\.record) + later.saves, later.deletes, with: abandonment, errors: &errors, done: &done)
                    }
                    break
                }
                if shouldStop { return stopped(done: done, errors: errors) }
            }
        }
        guard let input else { return Self.partialFailure(errors, of: total) }
        let mode = writeMode ?? RecordWriteMode(savePolicy)
        var upcoming: UpcomingBatch?
        let freeing = FreeingCount()
        while let batch = upcoming?.batch ?? input.receive() {
            let current = upcoming
            upcoming = nil
            if shouldStop { break }
            let records: [Record]
            do {
                records = try current?.records() ?? transform.map { try $0(batch.elements) } ?? batch.elements
            } catch {
                throw StratusError.thrownByClosure(error, of: "ModifyRecordsOperation", completed: done)
            }
            // While this batch is written, the next one, when the producer has it ready, is
            // checked and prepared on another thread.
            if let next = input.receiveIfQueued() { upcoming = UpcomingBatch(next, transform: transform, mode: mode, everyKey: savesEveryKey, context: context) }
            total += records.count
            let progress = jobProgress(for: batch)
            var saved: [Record] = []
            // A batch is written whole once begun, so that the position after it stays exact.
            let stop: StratusError?
            do {
                stop = try write(
                    prepared: [], saving: records, preparation: current?.preparation(), deleting: [], progress: progress, singleTransaction: progress != nil,
                    interruptible: false, engine: engine, context: context, errors: &errors, done: &done) { batchSaved in
                        saved += batchSaved
                        return true
                    }
            } catch {
                // The stage's final result says how far it got, as a cancelled or failed transform's does.
                throw StratusError.wrap(error).completing(done)
            }
            if let stop { return stop }
            let goesOn: Bool
            do { goesOn = try finishBatch(batch, from: input, handingOn: saved, to: recordOutput) } catch { throw StratusError.wrap(error).completing(done) }
            guard goesOn else { break }
            // Freeing a batch's records and their preparations costs the writing thread a good
            // part of their writes: another thread lets them go, unless two batches wait for
            // it already (a busy machine may not run it soon, and memory stays bounded).
            if let current, freeing.take() {
                DispatchQueue.global().async { [freeing] in
                    withExtendedLifetime((current, batch, records)) {}
                    freeing.release()
                }
            }
        }
        if shouldStop { return stopped(done: done, errors: errors) }
        return Self.partialFailure(errors, of: total)
    }

    /// How many written batches wait for another thread to free them, at most two.
    private final class FreeingCount: Sendable {
        private let count = Mutex(0)
        /// Whether another batch may wait (counted then).
        func take() -> Bool {
            count.withLock { count in
                guard count < 2 else { return false }
                count += 1
                return true
            }
        }
        func release() { count.withLock { $0 -= 1 } }
    }

    /// Records checked and prepared for saving (``PreparedSave``), and the errors of those that
    /// are not fit to be saved.
    private struct Preparation: Sendable {
        var valid: [PreparedSave] = []
        var failed: [Record.ID: StratusError] = [:]
    }

    /// Whether a save writes every key its record holds, not only the changed ones: CloudKit's
    /// `.allKeys` (keys only the store holds stay as they are).
    private var savesEveryKey: Bool { writeMode == nil && savePolicy == .allKeys }

    /// `systemNames`: the records may be CloudKit's own (``writesSystemRecords``), whose names
    /// are checked here as an import with `--keep-system-records` checks them.
    private static func prepare(_ records: [Record], mode: RecordWriteMode, everyKey: Bool, systemNames: Bool = false, context: DatabaseContext) -> Preparation {
        var preparation = Preparation()
        preparation.valid.reserveCapacity(records.count)
        for record in records {
            do {
                try checkZone(record.recordID, context)
                if systemNames { try Record.checkNamesAllowingSystemNames(record) }
                preparation.valid.append(try PreparedSave(record, namesChecked: systemNames, writeMode: mode, everyKeyChanged: everyKey))
            } catch {
                preparation.failed[record.recordID] = error
            }
        }
        return preparation
    }

    /// A batch taken from the producer while the one before it is written: transformed on this
    /// operation's thread (where `transform` runs), then checked and prepared on another, or
    /// on this one when its turn comes before another thread began (a busy machine may not
    /// run the other thread soon: this one then does not wait for it).
    private final class UpcomingBatch: Sendable {
        let batch: PipelineBatch<Record>
        private let transformed: [Record]
        /// What `transform` threw: the batch fails when its turn comes, after the one before it is written.
        private let transformError: (any Error)?
        private let mode: RecordWriteMode
        private let everyKey: Bool
        private let context: DatabaseContext
        private let state = Mutex(PreparationState.waiting)
        private let finished = DispatchSemaphore(value: 0)

        private enum PreparationState {
            case waiting
            case preparing
            case prepared(Preparation)
        }

        init(_ batch: PipelineBatch<Record>, transform: (@Sendable ([Record]) throws -> [Record])?, mode: RecordWriteMode, everyKey: Bool, context: DatabaseContext) {
            self.batch = batch
            self.mode = mode
            self.everyKey = everyKey
            self.context = context
            do {
                transformed = try transform.map { try $0(batch.elements) } ?? batch.elements
                transformError = nil
            } catch {
                transformed = []
                transformError = error
                return
            }
            // Weakly: a batch the writing thread prepared and wrote is not kept for a thread
            // that has not run yet.
            DispatchQueue.global().async { [weak self] in
                guard let self, claim() else { return }
                let preparation = ModifyRecordsOperation.prepare(transformed, mode: mode, everyKey: everyKey, context: context)
                state.withLock { $0 = .prepared(preparation) }
                finished.signal()
            }
        }

        /// Whether the caller is the one to prepare the batch.
        private func claim() -> Bool {
            state.withLock { state in
                guard case .waiting = state else { return false }
                state = .preparing
                return true
            }
        }

        /// The batch's records after `transform`, or what it threw.
        func records() throws -> [Record] {
            if let transformError { throw transformError }
            return transformed
        }

        /// The records checked and prepared: by this thread when no other began.
        func preparation() -> Preparation? {
            guard transformError == nil else { return nil }
            if claim() { return ModifyRecordsOperation.prepare(transformed, mode: mode, everyKey: everyKey, context: context) }
            finished.wait()
            return state.withLock { state in
                if case .prepared(let preparation) = state { return preparation }
                return nil
            }
        }
    }

    /// The items of one zone in a request, or of a whole request (see ``zoneGroups(of:)``).
    private struct ZoneGroup {
        var prepared: [PreparedSave] = []
        var saves: [Record] = []
        var deletes: [Record.ID] = []

        var count: Int { prepared.count + saves.count + deletes.count }
        /// Whether an atomic request writes these items all or nothing (not in the default zone).
        var mayBeAtomic: Bool {
            ZoneRules.mayBeAtomic(prepared.lazy.map(\.recordID.zoneID)) && ZoneRules.mayBeAtomic(saves.lazy.map(\.recordID.zoneID))
                && ZoneRules.mayBeAtomic(deletes.lazy.map(\.zoneID))
        }
    }

    private static func atomicLimitError(_ count: Int) -> StratusError {
        StratusError(.limitExceeded, "an atomic request holds \(count) items; the limit is \(Self.maximumAtomicItems) (split it, or set isAtomic = false)")
    }

    /// Whether a failure of the store now is answered item by item: once a transaction of a
    /// plain request committed, the request did not fail as a whole, and CloudKit answers such
    /// a request with `partialFailure`, so that a handler that sends the failed items again
    /// does not send the written ones twice. A job's request (``stopsOnStoreFailure``, one whose
    /// progress goes with its last transaction) and a pipeline's batches stop with the failure
    /// instead.
    private var answersItemByItem: Bool { committedTransaction && !stopsOnStoreFailure && jobProgress == nil && input == nil }

    /// Gives each item not answered yet `error` (its record's ID with it), as a request that
    /// wrote part of its items answers the rest.
    private func failUnwritten(_ records: [Record], _ deletes: [Record.ID], with error: StratusError, errors: inout [Record.ID: StratusError], done: inout Int) {
        for record in records where errors[record.recordID] == nil {
            var itemError = error
            itemError.recordID = record.recordID
            errors[record.recordID] = itemError
            report(record, itemError)
            done += 1
        }
        for id in deletes where errors[id] == nil {
            var itemError = error
            itemError.recordID = id
            errors[id] = itemError
            reportDelete(id, itemError)
            done += 1
        }
    }

    /// A request's items by zone, zones in the order they first appear; the request itself
    /// when it writes in one zone only.
    private static func zoneGroups(of request: ZoneGroup) -> [ZoneGroup] {
        let (prepared, records, ids) = (request.prepared, request.saves, request.deletes)
        let first = prepared.first?.recordID.zoneID ?? records.first?.recordID.zoneID ?? ids.first?.zoneID
        guard let first, prepared.contains(where: { $0.recordID.zoneID != first }) || records.contains(where: { $0.recordID.zoneID != first })
                || ids.contains(where: { $0.zoneID != first }) else { return [request] }
        var order: [RecordZone.ID] = []
        var groups: [RecordZone.ID: ZoneGroup] = [:]
        func group(_ zoneID: RecordZone.ID, _ add: (inout ZoneGroup) -> Void) {
            if groups[zoneID] == nil { order.append(zoneID) }
            add(&groups[zoneID, default: ZoneGroup()])
        }
        for save in prepared { group(save.recordID.zoneID) { $0.prepared.append(save) } }
        for record in records { group(record.recordID.zoneID) { $0.saves.append(record) } }
        for id in ids { group(id.zoneID) { $0.deletes.append(id) } }
        return order.map { groups[$0]! }
    }

    private func stopped(done: Int, errors: [Record.ID: StratusError]) -> StratusError {
        var error = stoppedError("ModifyRecordsOperation", completed: done)
        error.partialErrorsByRecordID = errors
        return error
    }

    /// Checks, prepares and writes one request, reporting every item; `handOn` gets the
    /// records saved by each transaction, and answers false to stop. Answers the error that
    /// ends the operation (a limit, a cancellation), or nil; item errors go to `errors`.
    /// `progress` is recorded with the request's last transaction (with its only one when
    /// `singleTransaction`, or in a transaction of its own when nothing is written; never for
    /// an atomic request that fails). When
    /// `interruptible`, a cancellation stops it between transactions.
    private func write(
        prepared preparedSaves: [PreparedSave], saving toSave: [Record], preparation: Preparation? = nil, deleting toDelete: [Record.ID], progress: JobProgressEntry?,
        singleTransaction: Bool, interruptible: Bool, engine: any StorageEngine, context: DatabaseContext, errors: inout [Record.ID: StratusError],
        done: inout Int, handOn: ([Record]) throws -> Bool
    ) throws -> StratusError? {
        let total = preparedSaves.count + toSave.count + toDelete.count
        // The job's progress, recorded with the last transaction, counts every failure of this
        // write: those found before a transaction and those of the transactions before it too.
        let errorsBefore = errors.count
        // Check and prepare first, so that bad input never reaches the store.
        var failed: [Record.ID: StratusError] = [:]
        var valid = preparedSaves
        valid.reserveCapacity(preparedSaves.count + toSave.count)
        for save in preparedSaves {
            do { try Self.checkZone(save.recordID, context) } catch { failed[save.recordID] = error }
        }
        if !failed.isEmpty { valid.removeAll { failed[$0.recordID] != nil } }
        let prepared = preparation ?? Self.prepare(toSave, mode: writeMode ?? RecordWriteMode(savePolicy), everyKey: savesEveryKey, systemNames: writesSystemRecords, context: context)
        valid.append(contentsOf: prepared.valid)
        failed.merge(prepared.failed) { _, later in later }
        var validDeletes: [Record.ID] = []
        for id in toDelete {
            do {
                try Self.checkDeletion(id, context)
                validDeletes.append(id)
            } catch {
                failed[id] = error
            }
        }
        let allSaves = preparedSaves.map(\.record) + toSave
        try makeCurrentUserRecord(among: valid, engine: engine, context: context)
        // A parent is saved no later than its children, also across batches.
        var ordered = PreparedSave.parentsFirst(valid)

        // A request that writes in the default zone is not atomic, as in CloudKit: that zone
        // has no atomic capability (``ZoneRules/capabilities(of:stored:)``), so its items are
        // written, split and failed one by one like any non-atomic request's.
        // A job's all-or-nothing try (``isAtomicAcrossZones``) is one in every zone.
        let atomic = isAtomic && (isAtomicAcrossZones || ZoneRules.mayBeAtomic(allSaves.lazy.map(\.recordID.zoneID)) && ZoneRules.mayBeAtomic(toDelete.lazy.map(\.zoneID)))
        if atomic {
            var staging: AssetStaging?
            if failed.isEmpty && AssetStaging.isNeeded(ordered) && total <= Self.maximumAtomicItems && !shouldStop {
                var assets = try assetStaging(engine: engine, context: context)
                let staged = try assets.stage(ordered, progress: progressReporter(ordered))
                staging = assets
                for (index, error) in staged.failures { failed[ordered[index].recordID] = error }
                ordered = staged.saves
            }
            defer { staging?.release(engine: engine, context: context, candidates: []) }
            if !failed.isEmpty {
                for record in allSaves { report(record, failed[record.recordID] ?? RecordWriteExecutor.batchFailed(record.recordID)) }
                for id in toDelete { reportDelete(id, failed[id] ?? RecordWriteExecutor.batchFailed(id)) }
                for id in allSaves.map(\.recordID) + toDelete where errors[id] == nil { errors[id] = failed[id] ?? RecordWriteExecutor.batchFailed(id) }
                done += total
                failedAtomically = true
                // An atomic request that fails writes nothing, and so records no progress either:
                // what it held is not done (as when the store rolls it back).
                return nil
            }
            guard total <= Self.maximumAtomicItems else { return Self.atomicLimitError(total) }
            if interruptible && shouldStop { return nil }
            var atomicRequest = request(ordered, validDeletes, atomic: true)
            atomicRequest.jobProgress = progress
            let outcome = try withRetry { try RecordWriteExecutor.apply(atomicRequest, engine: engine, context: context) }
            committedTransaction = true
            if outcome.rolledBack { failedAtomically = true }
            RecordWriteExecutor.collectReleasedAssets(outcome, engine: engine, context: context)
            let saved = deliver(outcome, saves: ordered, deletes: validDeletes, errors: &errors)
            done += total
            _ = try handOn(saved)
            return nil
        }

        for record in allSaves where failed[record.recordID] != nil { report(record, failed[record.recordID]!) }
        for id in toDelete where failed[id] != nil { reportDelete(id, failed[id]!) }
        errors.merge(failed) { first, _ in first }
        done += failed.count
        let batches = singleTransaction
            ? [Batch(saves: ordered, deletes: validDeletes)]
            : Self.batches(saves: ordered, deletes: validDeletes, itemsPerBatch: itemsPerBatch)
        if batches.isEmpty || batches.allSatisfy({ $0.saves.isEmpty && $0.deletes.isEmpty }) {
            return try recordProgressAlone(progress?.adding(errors.count - errorsBefore), engine: engine, context: context)
        }
        for (number, batch) in batches.enumerated() {
            if interruptible && shouldStop { return nil }
            var saves = batch.saves
            var staging: AssetStaging?
            let outcome: ModifyOutcome
            do {
                if AssetStaging.isNeeded(saves) {
                    // A save whose asset cannot be stored fails alone; the rest of the batch is written.
                    var assets = try assetStaging(engine: engine, context: context)
                    let staged = try assets.stage(saves, progress: progressReporter(saves))
                    staging = assets
                    for (index, error) in staged.failures {
                        errors[saves[index].recordID] = error
                        report(saves[index].record, error)
                    }
                    saves = staged.saves.enumerated().filter { staged.failures[$0.offset] == nil }.map { $0.element }
                }
                var batchRequest = request(saves, batch.deletes, atomic: false)
                if number == batches.count - 1 { batchRequest.jobProgress = progress?.adding(errors.count - errorsBefore) }
                outcome = try withRetry { try RecordWriteExecutor.apply(batchRequest, engine: engine, context: context) }
            } catch let error as StratusError where error.code == .operationCancelled && isCancelled {
                // The operation's own cancellation stopped the batch's statement (nothing of it
                // was written): the operation ends cancelled, as between batches.
                staging?.release(engine: engine, context: context, candidates: [])
                return stopped(done: done, errors: errors)
            } catch let error as StratusError where answersItemByItem && !recordOutput.hasConsumers {
                staging?.release(engine: engine, context: context, candidates: [])
                for unwritten in batches[number...] {
                    failUnwritten(unwritten.saves.map(\.record), unwritten.deletes, with: error, errors: &errors, done: &done)
                }
                abandonment = error
                return nil
            } catch {
                staging?.release(engine: engine, context: context, candidates: [])
                throw error
            }
            committedTransaction = true
            staging?.release(engine: engine, context: context, candidates: outcome.releasedAssetContents)
            if staging == nil { RecordWriteExecutor.collectReleasedAssets(outcome, engine: engine, context: context) }
            let saved = deliver(outcome, saves: saves, deletes: batch.deletes, errors: &errors)
            done += batch.saves.count + batch.deletes.count
            guard try handOn(saved) else { return nil }
        }
        return nil
    }

    /// Checks, prepares and writes a request of ``segments``: each segment's items are checked
    /// and split as a request's are, and consecutive pieces share a transaction up to
    /// ``itemsPerBatch`` items and ``maximumBytesPerBatch`` bytes, applied in order in it
    /// (``RecordWriteExecutor``, which applies a transaction's requests one after another). The job's
    /// progress goes with the last transaction.
    private func writeSegments(engine: any StorageEngine, context: DatabaseContext) throws -> StratusError? {
        precondition(!isAtomic && input == nil && (recordsToSave ?? []).isEmpty && (recordIDsToDelete ?? []).isEmpty && preparedSaves.isEmpty,
                     "a request of segments holds only its segments, and is not atomic")
        var errors: [Record.ID: StratusError] = [:]
        var done = 0
        let total = segments.reduce(0) { $0 + $1.saves.count + $1.deletes.count }
        failuresBySegment = Array(repeating: [:], count: segments.count)
        try makeCurrentUserRecord(among: segments.flatMap(\.saves), engine: engine, context: context)
        var pieces: [(segment: Int, batch: Batch)] = []
        for (number, segment) in segments.enumerated() {
            var failed: [Record.ID: StratusError] = [:]
            var valid: [PreparedSave] = []
            valid.reserveCapacity(segment.saves.count)
            for save in segment.saves {
                do {
                    try Self.checkZone(save.recordID, context)
                    valid.append(save)
                } catch {
                    failed[save.recordID] = error
                    report(save.record, error)
                }
            }
            var validDeletes: [Record.ID] = []
            for id in segment.deletes {
                do {
                    try Self.checkDeletion(id, context)
                    validDeletes.append(id)
                } catch {
                    failed[id] = error
                    reportDelete(id, error)
                }
            }
            failuresBySegment[number] = failed
            errors.merge(failed) { _, later in later }
            done += failed.count
            for batch in Self.batches(saves: PreparedSave.parentsFirst(valid), deletes: validDeletes, itemsPerBatch: itemsPerBatch) {
                pieces.append((number, batch))
            }
        }
        let progress = jobProgress.map { JobProgressEntry(job: $0.job, position: $0.position, text: $0.text, textAfterFailures: jobProgressTextAfterFailures) }
        // Consecutive pieces of a transaction's size go together.
        var transactions: [[(segment: Int, batch: Batch)]] = []
        var count = 0, bytes = 0
        for piece in pieces {
            let pieceCount = piece.batch.saves.count + piece.batch.deletes.count
            let pieceBytes = piece.batch.saves.reduce(0) { $0 + $1.fieldDataSize + $1.recordID.recordName.utf8.count + 64 }
            if transactions.isEmpty || count + pieceCount > itemsPerBatch || (count > 0 && bytes + pieceBytes > Self.maximumBytesPerBatch) {
                transactions.append([])
                count = 0
                bytes = 0
            }
            transactions[transactions.count - 1].append(piece)
            count += pieceCount
            bytes += pieceBytes
        }
        if transactions.isEmpty { return try recordProgressAlone(progress, engine: engine, context: context) ?? Self.partialFailure(errors, of: total) }
        for (number, transaction) in transactions.enumerated() {
            if shouldStop { return stopped(done: done, errors: errors) }
            var stagings: [AssetStaging] = []
            func releaseStagings(_ candidates: Set<String>) {
                for (index, staging) in stagings.enumerated() { staging.release(engine: engine, context: context, candidates: index == stagings.count - 1 ? candidates : []) }
            }
            var written = transaction
            let outcomes: [ModifyOutcome]
            do {
                for (index, piece) in written.enumerated() where AssetStaging.isNeeded(piece.batch.saves) {
                    // A save whose asset cannot be stored fails alone; the rest is written.
                    let saves = piece.batch.saves
                    var assets = try assetStaging(engine: engine, context: context)
                    let staged = try assets.stage(saves, progress: progressReporter(saves))
                    stagings.append(assets)
                    for (offset, error) in staged.failures {
                        failuresBySegment[piece.segment][saves[offset].recordID] = error
                        errors[saves[offset].recordID] = error
                        report(saves[offset].record, error)
                        done += 1
                    }
                    written[index].batch.saves = staged.saves.enumerated().filter { staged.failures[$0.offset] == nil }.map { $0.element }
                }
                var requests = written.map { request($0.batch.saves, $0.batch.deletes, atomic: false) }
                if number == transactions.count - 1 { requests[requests.count - 1].jobProgress = progress }
                outcomes = try withRetry { try RecordWriteExecutor.apply(requests, engine: engine, context: context) }
            } catch let error as StratusError where error.code == .operationCancelled && isCancelled {
                releaseStagings([])
                return stopped(done: done, errors: errors)
            } catch {
                releaseStagings([])
                throw error
            }
            committedTransaction = true
            let released = outcomes.reduce(into: Set<String>()) { $0.formUnion($1.releasedAssetContents) }
            if stagings.isEmpty {
                var all = ModifyOutcome()
                all.releasedAssetContents = released
                RecordWriteExecutor.collectReleasedAssets(all, engine: engine, context: context)
            } else {
                releaseStagings(released)
            }
            for (piece, outcome) in zip(written, outcomes) {
                var failed: [Record.ID: StratusError] = [:]
                _ = deliver(outcome, saves: piece.batch.saves, deletes: piece.batch.deletes, errors: &failed)
                failuresBySegment[piece.segment].merge(failed) { _, later in later }
                errors.merge(failed) { _, later in later }
                done += piece.batch.saves.count + piece.batch.deletes.count
            }
        }
        if shouldStop { return stopped(done: done, errors: errors) }
        return Self.partialFailure(errors, of: total)
    }

    /// Makes the caller's own user record before a save of it, when it is not stored yet: in
    /// CloudKit it exists from the user's first use, so a save of it is a change of that empty
    /// record (a new record saved with `.ifServerRecordUnchanged` then conflicts, as there;
    /// `.changedKeys` and `.allKeys` write it). An import that restores CloudKit's own records
    /// writes them as they came instead.
    private func makeCurrentUserRecord(among saves: [PreparedSave], engine: any StorageEngine, context: DatabaseContext) throws {
        guard !writesSystemRecords, let own = saves.lazy.compactMap({ save in
            save.record.recordType == ContainerSchema.usersRecordType ? CurrentUserRecord.id(of: save.recordID, in: context) : nil
        }).first else { return }
        // Stored already (the common case): nothing to make, and no write transaction for it.
        if simulation == nil, try withRetry({ try engine.fetchRecords([own], in: context)[own] }) != nil { return }
        // A failure to make it is the save's to report: it then meets what is stored.
        _ = try withRetry { try CurrentUserRecord.make(own, engine: engine, context: context, simulation: simulation) }
    }

    /// Where the assets of a request's saves are staged: the store's content, or for a
    /// simulated request content that is read, checked and hashed, and not kept.
    private func assetStaging(engine: any StorageEngine, context: DatabaseContext) throws -> AssetStaging {
        if let simulation { return AssetStaging(store: simulation.assetContents, hold: "simulation", maximumSize: maximumAssetSize) }
        return try AssetStaging(engine: engine, context: context, maximumSize: maximumAssetSize)
    }

    /// Records a job's progress in a transaction of its own, for a batch that writes nothing.
    private func recordProgressAlone(_ progress: JobProgressEntry?, engine: any StorageEngine, context: DatabaseContext) throws -> StratusError? {
        guard let progress else { return nil }
        var request = ModifyRequest(saves: [], writeMode: writeMode ?? RecordWriteMode(savePolicy), isAtomic: false, returnsSavedRecords: false)
        request.jobProgress = progress
        request.simulation = simulation
        _ = try withRetry { try RecordWriteExecutor.apply(request, engine: engine, context: context) }
        return nil
    }

    override func complete(with error: StratusError?) {
        recordOutput.complete(with: error)
        modifyRecordsResultBlock?(error.map { .failure($0) } ?? .success(()))
        if let modifyRecordsCompletionBlock {
            // Like CloudKit: what was written, unless the request failed as a whole and wrote nothing.
            let wholeFailure = error.map { $0.code != .partialFailure } ?? false
            let nothing = savedRecords.isEmpty && deletedRecordIDs.isEmpty
            modifyRecordsCompletionBlock(wholeFailure && nothing ? nil : savedRecords, wholeFailure && nothing ? nil : deletedRecordIDs, error)
        }
    }

    private func request(_ saves: [PreparedSave], _ deletes: [Record.ID], atomic: Bool) -> ModifyRequest {
        // Saved records go to the per-record block and to pipeline consumers; without either,
        // the engine need not make them.
        var request = ModifyRequest(saves: saves, recordIDsToDelete: deletes, writeMode: writeMode ?? RecordWriteMode(savePolicy),
                                    preservesSystemFields: preservesSystemFields, isAtomic: atomic,
                                    returnsSavedRecords: (perRecordBlocksGetStoredRecords && (perRecordSaveBlock != nil || perRecordCompletionBlock != nil))
                                        || modifyRecordsCompletionBlock != nil || recordOutput.hasConsumers)
        request.writesSystemRecords = writesSystemRecords
        request.keepsGivenVersion = keepsGivenVersion
        request.rollsBackInEveryZone = atomic && isAtomicAcrossZones
        // CloudKit's documented rule for its save policies: "Every time CloudKit saves a record,
        // the server updates the record's change token". Operation types and restores keep
        // re-running an import a no-op.
        request.writesUnchangedRecords = writeMode == nil && !preservesSystemFields
        // The executor looks deletions up by ID: owners of other batches' deletions do no harm.
        request.deletedRecordOwners = deletedRecordOwners
        request.simulation = simulation
        return request
    }

    /// Reports each item's result; answers the records saved when consumers want them.
    private func deliver(_ outcome: ModifyOutcome, saves: [PreparedSave], deletes: [Record.ID], errors: inout [Record.ID: StratusError]) -> [Record] {
        // Read once: this runs for every saved record.
        let kindBlock = perRecordWriteKindBlock, saveBlock = perRecordSaveBlock, collecting = recordOutput.hasConsumers
        var forConsumers: [Record] = []
        let progressBlock = perRecordProgressBlock, completionBlock = perRecordCompletionBlock
        let keepsResults = modifyRecordsCompletionBlock != nil, tracksZones = clientChangeTokenData != nil
        var writtenZones = Set<RecordZone.ID>()
        // Presenting writes to the record, which another thread made: only for a record handed out.
        let handsOutSaved = collecting || keepsResults || saveBlock != nil || completionBlock != nil
        for (index, save) in saves.enumerated() {
            let record = save.record
            guard index < outcome.saveResults.count else {
                let error = StratusError(.internalError, "the store gave no result for record '\(record.recordID.recordName)'", recordID: record.recordID)
                errors[record.recordID] = error
                saveBlock?(record.recordID, .failure(error))
                completionBlock?(record, error)
                continue
            }
            switch outcome.saveResults[index] {
            case .success(let (saved, kind)):
                if handsOutSaved { saved.presented(to: viewer) }
                if collecting { forConsumers.append(saved) }
                if keepsResults { savedRecords.append(saved) }
                if tracksZones { writtenZones.insert(record.recordID.zoneID) }
                kindBlock?(record.recordID, kind)
                progressBlock?(record, 1.0)
                saveBlock?(record.recordID, .success(saved))
                completionBlock?(saved, nil)
            case .failure(let error):
                error.presentRecords(to: viewer)
                errors[record.recordID] = error
                saveBlock?(record.recordID, .failure(error))
                completionBlock?(record, error)
            }
        }
        for (index, id) in deletes.enumerated() {
            let result = index < outcome.deleteResults.count ? outcome.deleteResults[index] : .failure(StratusError(.internalError, "the store gave no result for deleting '\(id.recordName)'", recordID: id))
            switch result {
            case .success:
                if keepsResults { deletedRecordIDs.append(id) }
                if tracksZones { writtenZones.insert(id.zoneID) }
            case .failure(let error):
                errors[id] = error
            }
            perRecordDeleteBlock?(id, result.map { _ in () }.mapError { $0 })
        }
        if let clientChangeTokenData, let database {
            ClientChangeTokens.shared.record(clientChangeTokenData, for: writtenZones, in: database)
        }
        return forConsumers
    }

    /// Reports a large save's progress while its assets' content is stored (CloudKit's
    /// `perRecordProgressBlock`): the fraction of its bytes stored, below 1 until it is written.
    private func progressReporter(_ saves: [PreparedSave]) -> (@Sendable (Int, Double) -> Void)? {
        guard perRecordProgressBlock != nil else { return nil }
        // Through the operation, which runs its blocks one at a time: the block itself is a
        // plain closure, as CloudKit's are.
        return { [self] index, fraction in perRecordProgressBlock?(saves[index].record, min(fraction, 0.99)) }
    }

    private func report(_ record: Record, _ error: StratusError) {
        error.presentRecords(to: viewer)
        perRecordSaveBlock?(record.recordID, .failure(error))
        perRecordCompletionBlock?(record, error)
    }
    private func reportDelete(_ id: Record.ID, _ error: StratusError) { perRecordDeleteBlock?(id, .failure(error)) }

    /// The checks of a record ID a request deletes: its names, and its zone in this database.
    static func checkDeletion(_ id: Record.ID, _ context: DatabaseContext) throws(StratusError) {
        try Naming.checkRecordName(id.recordName, allowSystemNames: true)
        try Naming.checkZoneName(id.zoneID.zoneName)
        try checkZone(id, context)
    }

    /// The shared database holds only zones that others share; it has no default zone.
    static func checkZone(_ id: Record.ID, _ context: DatabaseContext) throws(StratusError) {
        if context.scope == .shared && id.zoneID.isDefault {
            throw StratusError(.invalidArguments, "the shared database has no default zone; it holds only zones other users share with you", recordID: id)
        }
    }

    struct Batch { var saves: [PreparedSave] = []; var deletes: [Record.ID] = [] }

    /// Splits work into batches of at most `itemsPerBatch` items and about 2 MB, keeping order.
    static func batches(saves: [PreparedSave], deletes: [Record.ID], itemsPerBatch: Int) -> [Batch] {
        var batches: [Batch] = []
        var current = Batch()
        var count = 0, bytes = 0
        func flush() { if count > 0 { batches.append(current); current = Batch(); count = 0; bytes = 0 } }
        for record in saves {
            let size = record.fieldDataSize + record.recordID.recordName.utf8.count + 64
            if count + 1 > itemsPerBatch || (count > 0 && bytes + size > maximumBytesPerBatch) { flush() }
            current.saves.append(record)
            count += 1
            bytes += size
        }
        for id in deletes {
            if count + 1 > itemsPerBatch { flush() }
            current.deletes.append(id)
            count += 1
        }
        flush()
        return batches
    }
}
