import Foundation

/// One run of a ``RecordImporter``: the reading loop and the batches it settles. Lives on the
/// importer's task; only the batch saver's operations run elsewhere.
final class ImportRun {
    typealias Summary = RecordImporter.Summary
    typealias Failure = RecordImporter.Failure

    private enum Mode { case batches, atomic }

    /// A batch handed to the store (or, without writes, waiting to be reported).
    private struct Flight {
        var pending: PendingBatchSave?
        var batch: ImportBatch
        /// Input items settled once this batch is.
        var endItems: Int
        /// Written all or nothing first, to find where a reject limit falls.
        var probe: Bool
        /// Items before ``endItems`` not settled with it: they wait for a parent.
        var pendingItems: [Int] = []
    }

    private let importer: RecordImporter
    private let options: RecordImporter.Options
    /// Items per batch: the caller's choice, or the store's preference.
    private let batchSize: Int
    private let database: Database
    private let source: any RecordSource
    private let rejects: (any RecordRejectSink)?
    private let checkpointStore: (any ImportCheckpointStore)?
    /// The import's name in the store (with a checkpoint store), see ``ImportCheckpoint/job``.
    private var job: String?
    private let progress: (@Sendable (RecordImporter.Progress) -> Void)?
    private let mode: Mode
    private let maximumInFlight: Int
    private let saver: ImportBatchSaver
    /// Where a dry run writes instead of the store: its batches go through the same write
    /// policy as a real run's, and see what the batches before them would have written.
    private let simulation: WriteSimulation?

    // One task runs an import from start to end, so no two accesses can overlap: the
    // per-record state needs no dynamic exclusivity check (about 1 % of a bulk import's time).
    @exclusivity(unchecked) private var summary = Summary()
    @exclusivity(unchecked) private var batch = ImportBatch()
    private var inFlight: [Flight] = []
    @exclusivity(unchecked) private var stop: RecordImporter.End?
    /// Whether each zone written to applies atomic requests atomically (nil: no such zone).
    private var zoneIsAtomic: [RecordZone.ID: Bool] = [:]
    /// An atomic import's record names and their lines: each record may appear once.
    private var atomicNames: [String: Int] = [:]
    /// An atomic import's zones with a deletion, and the line of the first.
    private var atomicDeletionZones: [RecordZone.ID: Int] = [:]
    /// Zones known to exist (or, in a dry run, that would be created).
    private var knownZones: Set<RecordZone.ID> = []
    /// The zones an atomic import makes just before its one write (``writeAtomically()``).
    private var atomicZonesToCreate: [RecordZone.ID] = []
    /// The zone the last record named and where it went: records mostly come zone by zone.
    @exclusivity(unchecked) private var lastGivenZone: RecordZone.ID?
    @exclusivity(unchecked) private var lastPlacement: (zoneID: RecordZone.ID, keptOwner: String?) = (.default, nil)
    /// The database's context with the user record name the user directory gives the login,
    /// read once, when a record first names an owner that is not plainly the current user.
    private var directoryContext: DatabaseContext?
    /// Records whose parent is not stored yet, waiting for a later batch to write it (see
    /// ``ImportParentWaits``), and the items they released, to be batched before the next
    /// input item is read (the first is the one being batched).
    private var waits = ImportParentWaits()
    private var ready: [ImportParentWaits.Item] = []
    /// Whether records whose parent is missing wait (until the input ends: then every record
    /// is written and the store's rules decide). Records restored as they were need no parent
    /// in the store (``RecordWriteExecutor``), so they never wait: a file of children whose
    /// parents were deleted is not held in memory to its end.
    private var holdsForParents = true
    /// In an import that restores records, the record share each root read so far names (its
    /// `share`), with the root's name: CloudKit's JSON names a share's root there, not in the share.
    private var rootsByShare: [Record.ID: String] = [:]
    /// Items of the checkpoint this run resumes that were not settled: read again. Until one
    /// is read, a checkpoint past it names it pending (see ``pendingItems(before:)``).
    private var resumedPending: Set<Int> = []
    /// ``resumedPending`` in input order, and how many of them the reading has passed: the
    /// settled items between two of them are skipped without being read.
    private var resumedPendingInOrder: [Int] = []
    private var resumedPendingPassed = 0
    /// Where the reading is: every item before it is batched, settled, waiting or ready; the
    /// items from it on are not read yet (set when a batch is handed to the store).
    private var readEnd = 0
    /// Where the last batch handed to the store ends, and the last checkpoint: batches of
    /// records a parent released end no earlier.
    private var submittedEnd = 0
    private var settledEnd = 0
    /// Batches handed to the store, and how many had been when cancellation was last looked
    /// at: a cancelled import stops after the batch being read, however that batch ended
    /// (full, or early: a record named again where it cannot start a segment, records a parent released).
    private var batchesSubmitted = 0
    private var batchesSeenByCancellation = 0
    /// Items of a batch taken from ``batch`` and not in flight yet (it waits for a place):
    /// still pending in what progress reports.
    private var handingOver = 0
    /// The input item being taken into a batch, while it is not in one.
    private var itemInHand = 0

    init(
        importer: RecordImporter, source: any RecordSource, rejects: (any RecordRejectSink)?,
        checkpointStore: (any ImportCheckpointStore)?, progress: (@Sendable (RecordImporter.Progress) -> Void)?
    ) {
        self.importer = importer
        options = importer.options
        database = importer.database
        batchSize = importer.options.batchSize ?? importer.database.engine.preferredImportBatchSize
        self.source = source
        self.rejects = rejects
        self.checkpointStore = checkpointStore
        self.progress = progress
        mode = options.isAtomic ? .atomic : .batches
        holdsForParents = !options.writeMode.restores(preservingSystemFields: options.preservesSystemFields)
        simulation = options.isDryRun ? WriteSimulation() : nil
        // With a checkpoint, one batch at a time: a kill then leaves at most the batch being
        // written committed beyond the checkpoint. With a reject limit, each batch is settled
        // before the next starts, so that nothing after the limit is written.
        maximumInFlight = checkpointStore != nil || options.maximumRejects != nil ? 1 : options.batchesInFlight
        saver = ImportBatchSaver(database: database)
    }

    func run() async throws -> Summary {
        if mode == .atomic && checkpointStore != nil {
            throw failure(.checkpoint, StratusError(.invalidArguments, "an atomic import has no partial progress to checkpoint"))
        }
        if simulation != nil && checkpointStore != nil {
            throw failure(.checkpoint, StratusError(.invalidArguments, "a dry run writes nothing, so it has no progress to checkpoint"))
        }
        if simulation != nil {
            do { try await database.checkWriteAccess() } catch { throw failure(.store, error) }
        }
        var skip = 0
        if let checkpointStore {
            do {
                let loaded = try checkpointStore.load()
                skip = loaded?.itemsSettled ?? 0
                var pending = loaded?.pendingItems ?? []
                var unreported = loaded?.unreportedRejections ?? []
                summary.failedInEarlierRuns = loaded?.itemsRejected ?? 0
                let job = loaded?.job ?? UUID().uuidString.lowercased()
                self.job = job
                if loaded?.job == nil {
                    if skip > 0 {
                        // A checkpoint of a version before jobs: the store records the job's
                        // progress before the checkpoint names the job, or a run stopped before
                        // its first batch would find the store without it, and be refused.
                        _ = try await outcome(of: submit(ImportBatch(), atomic: false, endItems: skip, pendingItems: pending))
                    }
                    // The job's name is durable before any of its batches commits.
                    try checkpointStore.save(ImportCheckpoint(itemsSettled: skip, job: job, pendingItems: pending, itemsRejected: summary.failedInEarlierRuns))
                } else {
                    // Every batch of a checkpointed import records the job's progress in its own
                    // transaction, also one that writes nothing.
                    let committed = try await database.engineCall { engine, _ in try engine.jobProgress(job) }
                    if let committed {
                        // The store's record, written with each batch, says what committed in
                        // this store, and the import goes on from it. Ahead of the checkpoint, a
                        // batch committed after the checkpoint was last saved: it is not read
                        // again, and the checkpoint catches up so that it never lags by more than
                        // one batch. Behind it, the store was put back from a copy made during
                        // the job: what the checkpoint counts past the store's record was never
                        // written here, and is read again. At the same position the store's
                        // record of what waited is the newer one, as when a batch of released
                        // records committed with what still waited. So is its count of rejects
                        // (a batch records it with the store's own rejects of the batch), when it
                        // has one: a record of an earlier version has none.
                        let text = try await database.engineCall { engine, _ in try engine.jobProgressText(job) }
                        let stored = ImportCheckpoint.progress(fromText: text)
                        let rejected = stored.itemsRejected ?? summary.failedInEarlierRuns
                        if Int(committed) != skip || stored.pendingItems != pending.sorted() || rejected != summary.failedInEarlierRuns {
                            // Rejections kept for a sink that failed belong to the batch that
                            // ends at the checkpoint; a store elsewhere reads their items again.
                            if Int(committed) != skip { unreported = [] }
                            skip = Int(committed)
                            pending = stored.pendingItems
                            summary.failedInEarlierRuns = rejected
                            try checkpointStore.save(ImportCheckpoint(itemsSettled: skip, job: job, pendingItems: pending, itemsRejected: rejected, unreportedRejections: unreported))
                        }
                    } else if skip > 0 {
                        // A store without the job's progress is not the one its batches went to.
                        throw StratusError(.invalidArguments, "it says the first \(skip) input items were settled by import job \(job), of which this store holds no record: the checkpoint was made by an import into another store (or this store was put in place of that one). Name the store the checkpoint was made with, or remove the checkpoint to import the whole input into this store")
                    }
                }
                if !unreported.isEmpty && simulation == nil {
                    // A reject sink that failed in an earlier run: what it did not take goes first.
                    for rejection in unreported { try report(rejection) }
                    try flushRejects()
                    try checkpointStore.save(ImportCheckpoint(itemsSettled: skip, job: job, pendingItems: pending, itemsRejected: summary.failedInEarlierRuns))
                }
                resumedPending = Set(pending)
                resumedPendingInOrder = resumedPending.sorted()
                submittedEnd = skip
                settledEnd = skip
                // A run stopped by the reject limit is not resumed past it by running it again.
                if let maximum = options.maximumRejects, summary.failedInEarlierRuns > maximum { stop = .rejectLimitReached }
            } catch {
                throw failure(.checkpoint, error)
            }
        }
        var consumed = 0
        while stop == nil {
            if mode == .batches && batchesSubmitted != batchesSeenByCancellation {
                batchesSeenByCancellation = batchesSubmitted
                if importer.isCancelled {
                    try await settleAll()
                    stop = stop ?? .cancelled
                    break
                }
            }
            // Records whose parent a settled batch wrote go first, where the input is now.
            if !ready.isEmpty {
                try await batchReady(consumed: consumed)
                continue
            }
            if consumed < skip {
                // What the checkpoint settled is passed without being read, up to the next item
                // that still waited for its parent then.
                while resumedPendingPassed < resumedPendingInOrder.count && resumedPendingInOrder[resumedPendingPassed] < consumed { resumedPendingPassed += 1 }
                let end = resumedPendingPassed < resumedPendingInOrder.count ? min(skip, resumedPendingInOrder[resumedPendingPassed]) : skip
                if end > consumed {
                    // In parts, so that progress is reported while a long input is passed.
                    let wanted = min(end - consumed, 65_536)
                    let passed = try await fromInput(consumed: consumed) { try source.skipItems(wanted) } ?? 0
                    consumed += passed
                    summary.skipped += passed
                    report()
                    // Fewer: the input ended there, or the run was stopped.
                    if passed < wanted { break }
                    continue
                }
            }
            guard let item = try await fromInput(consumed: consumed, { try source.nextItem() }) ?? nil else { break }
            let index = consumed
            consumed += 1
            if index < skip && (resumedPending.isEmpty || !resumedPending.contains(index)) {
                summary.skipped += 1
                continue
            }
            summary.read += 1
            // Read and not yet batched: pending in what progress reports meanwhile (a batch
            // that ends before it is settled while the item waits).
            itemInHand = 1
            do {
                switch item {
                case .rejected(let rejection):
                    try await reject(rejection, item: index)
                case .record(let read, let line):
                    // The usual record (in the zone of the one before, new to its batch) takes no
                    // suspension point: a bulk import makes a million of them.
                    let record: Record
                    if let placed = placedLikeTheLast(read) {
                        record = placed
                    } else {
                        record = try await place(read, line: line, consumed: index)
                    }
                    switch prepare(record) {
                    case .failure(let problem):
                        try await reject(RecordRejection(line: line, column: 0, recordName: record.recordID.recordName, message: problem.description), item: index)
                    case .success(var prepared):
                        if !holdsForParents && !prepared.jsonExtras.isEmpty { prepared = linkingShareToRoot(prepared) }
                        if mode == .batches && waits.isEmpty && !batch.segmentHasDeletions && (prepared.parent == nil || batch.segmentCount == 1)
                            && batch.names.insert(prepared.recordID.recordName).inserted {
                            batch.append(prepared, line: line, item: index)
                        } else {
                            try await accept(prepared, line: line, item: index, before: index)
                        }
                    }
                case .deletion(let given, _, let line):
                    let (id, owner) = try await place(given, line: line, consumed: index)
                    try await accept(deletion: id, owner: owner, line: line, item: index, before: index)
                }
            } catch let failed as Failure where failed.isCancellation && importer.isCancelled {
                // A cancel that reached a store call (a zone's lookup) is the caller's cancel.
                summary.read -= 1
                itemInHand = 0
                try await settleAll()
                stop = stop ?? .cancelled
                break
            }
            itemInHand = 0
            if stop != nil { break }
            switch mode {
            case .batches:
                if batch.isFull(atCount: batchSize) { try await submitBatch(endItems: consumed) }
            case .atomic:
                if importer.isCancelled { stop = .cancelled }
            }
            if summary.read & 255 == 0 { report() }
        }
        if stop == nil && consumed < skip {
            // The checkpoint (or the store's record of its job) counts items past the end of the
            // input: it was made with another input of the same size, or edited. Ending here
            // would report an import of what was never read, and remove the checkpoint.
            throw failure(.checkpoint, StratusError(.invalidArguments, "it says the first \(skip) input items were settled, but the input holds \(consumed): the checkpoint was made with another input, or edited. Remove the checkpoint to import the whole input"))
        }
        return try await finish(consumed: consumed)
    }

    /// The end of the reading: the last batches, the checkpoint, the summary.
    private func finish(consumed: Int) async throws -> RecordImporter.Summary {
        if stop == nil {
            switch mode {
            case .batches:
                try await finishBatches(consumed: consumed)
            case .atomic:
                try await writeAtomically()
            }
        } else if mode == .batches {
            try await settleAll()
        }
        if stop == nil {
            stop = .finished
            if simulation == nil {
                do {
                    try checkpointStore?.remove()
                    if let job { try await database.engineCall { engine, _ in try engine.removeJobProgress(job) } }
                } catch { throw failure(.checkpoint, error) }
            }
        }
        summary.end = stop ?? .finished
        report()
        return summary
    }

    // MARK: - Zones and owners

    /// The record as it is written: in the zone the import's rules put it (see
    /// ``zone(for:line:consumed:)``), keeping the owner's name the input gave when it differs.
    /// The record placed as the last record was, when it names the same zone; `nil` otherwise.
    private func placedLikeTheLast(_ record: Record) -> Record? {
        guard let lastGivenZone, lastGivenZone.isSameZone(as: record.recordID.zoneID) else { return nil }
        let (zoneID, keptOwner) = lastPlacement
        if zoneID.isSameZone(as: record.recordID.zoneID) && keptOwner == nil { return record }
        return record.copy(into: zoneID, ownerRecordName: keptOwner)
    }

    private func place(_ record: Record, line: Int, consumed: Int) async throws -> Record {
        let given = record.recordID.zoneID
        let (zoneID, keptOwner) = try await zone(for: given, line: line, recordName: record.recordID.recordName, consumed: consumed)
        if zoneID == given && keptOwner == nil { return record }
        return record.copy(into: zoneID, ownerRecordName: keptOwner)
    }

    /// A deletion's record ID in the zone it goes to, and the owner its input zone had when
    /// that is another owner's zone imported as the current user's.
    private func place(_ id: Record.ID, line: Int, consumed: Int) async throws -> (Record.ID, String?) {
        let (zoneID, keptOwner) = try await zone(for: id.zoneID, line: line, recordName: id.recordName, consumed: consumed)
        return (Record.ID(recordName: id.recordName, zoneID: zoneID), keptOwner)
    }

    /// The zone a record the input puts in `given` goes to, and the owner's name to keep for
    /// export: the current user's zone when the input names the current user (by
    /// `__defaultOwner__` or name), the database's default zone (there is one), or another
    /// owner with ``RecordImporter/Options/importsOwnersAsCurrentUser``. Makes sure the zone
    /// exists (creating it when asked), once per zone.
    ///
    /// - Throws: ``RecordImporter/Failure`` (stage `.zones`) for another owner's zone, a zone
    ///   other than the required one, or a missing zone not to be created; what was read before
    ///   is written first.
    private func zone(for given: RecordZone.ID, line: Int, recordName: String, consumed: Int) async throws -> (RecordZone.ID, String?) {
        if let lastGivenZone, lastGivenZone.isSameZone(as: given) { return lastPlacement }
        let placed = try await placement(for: given, line: line, recordName: recordName, consumed: consumed)
        lastGivenZone = given
        lastPlacement = placed
        return placed
    }

    private func placement(for given: RecordZone.ID, line: Int, recordName: String, consumed: Int) async throws -> (RecordZone.ID, String?) {
        var zoneID = given
        var keptOwner: String?
        let owner = given.ownerName
        if owner != RecordZone.ID.currentUserDefaultOwner {
            var isCurrentUser = owner == database.context.userName || database.context.isCurrentUser(owner)
            if !isCurrentUser, directoryContext == nil {
                // The user record name the user directory gives the login (an imported CloudKit
                // owner's, `users add LOGIN --record-name _…`), as every operation acts under.
                directoryContext = (try? await database.engineCall { [database] _, _ in try database.resolvedContext() }) ?? database.context
            }
            let current = directoryContext ?? database.context
            isCurrentUser = isCurrentUser || current.isCurrentUser(owner)
            guard isCurrentUser || given.isDefault || options.importsOwnersAsCurrentUser else {
                let user = "'\(database.context.userName ?? "no user")'" + (current.userRecordName.map { ", user record name \($0)" } ?? "")
                if database.databaseScope == .shared {
                    // Neither piece of the private database's advice fits: the shared database
                    // makes no zones, and a zone of the current user's is no shared one.
                    throw try await stopForZones(consumed: consumed, StratusError(
                        .permissionFailure,
                        "line \(line): record '\(recordName)' is in zone '\(given.zoneName)' of owner '\(owner)', and the shared database shows the current user (\(user)) other users' zones shared with them, where an import restores no owner's zone: import the owner's records into the owner's private database, as that owner (--database private --user LOGIN\(owner.hasPrefix("_") ? "; `stratus users add LOGIN --record-name \(owner)` makes the login" : "")), and share the zone from there",
                        zoneID: given))
                }
                throw try await stopForZones(consumed: consumed, StratusError(
                    .permissionFailure,
                    "line \(line): record '\(recordName)' is in zone '\(given.zoneName)' of owner '\(owner)', who is not the current user (\(user)); import it as the current user's zone with --owner-as-current-user (RecordImporter.Options.importsOwnersAsCurrentUser), \(owner.hasPrefix("_") ? "or as the login whose user record name the owner is (`stratus users add LOGIN --record-name \(owner)` makes one; then --user LOGIN)" : "or as that user (--user \(owner))")",
                    zoneID: given))
            }
            zoneID = RecordZone.ID(zoneName: given.zoneName)
            if !isCurrentUser { keptOwner = owner }
        }
        if let required = options.requiredZone, zoneID.zoneName != required.zoneName {
            throw try await stopForZones(consumed: consumed, StratusError(
                .invalidArguments,
                "line \(line): record '\(recordName)' names zone '\(zoneID.zoneName)', but the import is into zone '\(required.zoneName)' (--zone); leave --zone out to import records into the zones they name",
                zoneID: zoneID))
        }
        if !knownZones.contains(zoneID) { try await ensureZone(zoneID, line: line, recordName: recordName, consumed: consumed) }
        return (zoneID, keptOwner)
    }

    /// `word` as a shell reads it back: bare when it holds only plain characters, else quoted.
    static func shellWord(_ word: String) -> String {
        let plain = !word.isEmpty && word.unicodeScalars.allSatisfy { $0.isASCII && ($0.properties.isAlphabetic || $0.properties.numericType != nil || "._@-+=:,/".unicodeScalars.contains($0)) }
        return plain ? word : "'" + word.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }

    private func ensureZone(_ zoneID: RecordZone.ID, line: Int, recordName: String, consumed: Int) async throws {
        do {
            _ = try await database.recordZone(for: zoneID)
            knownZones.insert(zoneID)
            return
        } catch let error as StratusError where error.code == .zoneNotFound {
            guard options.createsZones else {
                let scope = database.databaseScope
                // A private zone is one user's: the command that makes it names that user.
                let user = scope == .public ? "" : database.user?.login.map { " --user " + Self.shellWord($0) } ?? ""
                throw try await stopForZones(consumed: consumed, StratusError(
                    .zoneNotFound,
                    "line \(line): record '\(recordName)' is in zone '\(zoneID.zoneName)', which does not exist in the \(scope.name) database; create it with `stratus zones create \(Self.shellWord(zoneID.zoneName)) --database \(scope.name)\(user)` or import with --create-zones",
                    zoneID: zoneID))
            }
        } catch {
            throw failure(.store, error)
        }
        if let simulation {
            simulation.createZone(RecordZone(zoneID: zoneID), in: database.context)
        } else if mode == .atomic {
            // Made just before the one write, so that an atomic import that writes nothing
            // (a record rejected) makes no zone either.
            atomicZonesToCreate.append(zoneID)
            knownZones.insert(zoneID)
            return
        } else {
            do {
                _ = try await database.save(RecordZone(zoneID: zoneID))
            } catch {
                throw failure(.store, error)
            }
        }
        knownZones.insert(zoneID)
        summary.createdZones.append(zoneID)
    }

    /// Writes what was read before the item at `consumed`, then answers the failure to throw.
    private func stopForZones(consumed: Int, _ error: StratusError) async throws -> Failure {
        if mode == .batches {
            try await submitBatch(endItems: consumed)
            try await settleAll()
        }
        return failure(.zones, error)
    }

    // MARK: - Reading

    /// The one check of each imported record, on the reading task, which also prepares it for
    /// the store (so the writing side neither checks nor encodes it again).
    private func prepare(_ record: Record) -> Result<PreparedSave, StratusError> {
        Result { () throws(StratusError) in try PreparedSave(record, namesChecked: source.checksRecordNames) }
    }

    /// A restored share without a root, given the root a record read before it names (in an
    /// earlier batch: within one request the store's share rules find it themselves), so that
    /// its participants reach that record; a root is remembered for the share it names.
    private func linkingShareToRoot(_ prepared: PreparedSave) -> PreparedSave {
        if let share = StoredShare.sharedRecordName(in: prepared.jsonExtras) {
            rootsByShare[Record.ID(recordName: share, zoneID: prepared.recordID.zoneID)] = prepared.recordID.recordName
            return prepared
        }
        guard prepared.record.recordType == Record.SystemType.share, prepared.recordID.recordName != Share.zoneWideShareName,
              prepared.jsonExtras.members[StoredShare.rootRecordNameMember] == nil, let root = rootsByShare[prepared.recordID] else { return prepared }
        let record = prepared.record
        var extras = record.jsonExtras
        StoredShare.writeRoot(root, into: &extras)
        record.jsonExtras = extras
        return (try? PreparedSave(record, namesChecked: source.checksRecordNames)) ?? prepared
    }

    /// What `read` takes from the source (its next item, or the items it skips). When the
    /// source fails, what was read before is settled first, so that the failure says what was
    /// written and the checkpoint is past it; nil when the run was cancelled while reading.
    private func fromInput<Answer>(consumed: Int, _ read: () throws -> Answer) async throws -> Answer? {
        do {
            return try read()
        } catch let error as StratusError where error.code == .operationCancelled && importer.isCancelled {
            // A source that saw the stop while reading (RecordReadOptions.stopRequested): the
            // import stops as cancelled, settling what it read before, as between batches.
            if mode == .batches { try await settleAll() }
            stop = .cancelled
            return nil
        } catch {
            if mode == .batches {
                try await submitBatch(endItems: consumed)
                try await settleAll()
            }
            throw failure(.input, error)
        }
    }

    /// Takes a record into the import; `before` is where the input is (every item before it is
    /// batched, settled or waiting), so where a batch that must end now ends.
    private func accept(_ record: PreparedSave, line: Int, item: Int, before endItems: Int) async throws {
        switch mode {
        case .atomic:
            let name = record.recordID.recordName
            if let first = atomicNames[name] {
                try await reject(RecordRejection(
                    line: line, column: 0, recordName: name,
                    message: "record '\(name)' is already in this atomic import (line \(first)); an atomic import writes each record once"), item: item)
                return
            }
            // A store request saves before it deletes: a save after a deletion in its zone would
            // be written before it, and the deletion's cascade could take the record saved.
            if let deletion = atomicDeletionZones[record.recordID.zoneID] {
                try await reject(RecordRejection(
                    line: line, column: 0, recordName: name,
                    message: "record '\(name)' is saved after a deletion in its zone (line \(deletion)); an atomic import writes its saves before its deletions, so it cannot keep that order: put the deletions last, or import without --atomic"), item: item)
                return
            }
            try await requireAtomicZone(record.recordID.zoneID)
            atomicNames[name] = line
            batch.append(record, line: line, item: item)
            try checkAtomicSize()
        case .batches:
            // A store request saves before it deletes: a save after a deletion starts the next
            // segment, so that input order wins (a cascade of the deletion cannot take the record
            // saved after it, and a child saved after its parent's deletion finds it missing).
            let follows = batch.names.contains(record.recordID.recordName) || batch.segmentHasDeletions
            if follows && continuesInNextSegment(hasParent: record.parent != nil) {
                batch.startSegment()
            } else if follows || (holdsForParents && record.parent != nil && batch.segmentCount > 1) {
                try await submitBatch(endItems: endItems)
                if stop != nil { return }
            }
            if waitsBehindReleased(ImportParentWaits.Item(entry: .save(record), line: line, item: item)) { return }
            batch.names.insert(record.recordID.recordName)
            if waits.isWaiting(record.recordID) {
                // An earlier item of the record waits for its parent: this one waits behind it.
                batch.names.remove(record.recordID.recordName)
                waits.wait(behind: ImportParentWaits.Item(entry: .save(record), line: line, item: item))
                return
            }
            batch.append(record, line: line, item: item)
        }
    }

    private func accept(deletion id: Record.ID, owner: String?, line: Int, item: Int, before endItems: Int) async throws {
        switch mode {
        case .atomic:
            if let first = atomicNames[id.recordName] {
                try await reject(RecordRejection(
                    line: line, column: 0, recordName: id.recordName,
                    message: "record '\(id.recordName)' is already in this atomic import (line \(first)); an atomic import writes each record once"), item: item)
                return
            }
            try await requireAtomicZone(id.zoneID)
            atomicNames[id.recordName] = line
            if atomicDeletionZones[id.zoneID] == nil { atomicDeletionZones[id.zoneID] = line }
            batch.append(deletion: id, owner: owner, line: line, item: item)
            try checkAtomicSize()
        case .batches:
            if batch.names.contains(id.recordName) {
                if continuesInNextSegment(hasParent: false) { batch.startSegment() } else { try await submitBatch(endItems: endItems) }
            }
            if stop != nil { return }
            if waits.isAwaited(id), isBeingWritten(id) {
                // Records before it in the input wait for this record as their parent, which a
                // batch not settled yet writes: that batch is settled, so that they are released
                // and written before the deletion, as the input orders them.
                try await submitBatch(endItems: endItems)
                try await settleAll()
                if stop != nil { return }
            }
            let waiting = ImportParentWaits.Item(entry: .deletion(id, owner: owner), line: line, item: item)
            if waitsBehindReleased(waiting) { return }
            if waits.isWaiting(id) {
                waits.wait(behind: waiting)
                return
            }
            batch.names.insert(id.recordName)
            batch.append(deletion: id, owner: owner, line: line, item: item)
        }
    }

    /// Whether an item that cannot share the batch's last segment (its record is named there
    /// already, or it is a save after a deletion) starts the batch's next segment rather than
    /// ending the batch: then input whose names repeat is written in as few transactions as
    /// any other. Not where the batch's items are taken apart by ID (records held back for a
    /// parent, released by one, or tried all or nothing to find where a reject limit falls):
    /// such a batch ends, as a batch names each record once there.
    private func continuesInNextSegment(hasParent: Bool) -> Bool {
        options.maximumRejects == nil && waits.isEmpty && ready.isEmpty && !(holdsForParents && (hasParent || batch.hasParents))
    }

    // MARK: - Parents later in the input

    /// Batches the items a settled batch released, in input order, before the next input
    /// item is read (`consumed` items were read).
    private func batchReady(consumed: Int) async throws {
        while let next = ready.first, stop == nil {
            // The item stays in `ready` while it is batched, so that a batch ended now counts it
            // pending. Batching it can settle a batch that releases more, earlier in the input
            // than it: what is taken out after is this item, wherever it is now.
            switch next.entry {
            case .save(let save): try await accept(save, line: next.line, item: next.item, before: consumed)
            case .deletion(let id, let owner): try await accept(deletion: id, owner: owner, line: next.line, item: next.item, before: consumed)
            }
            // It stays only where it went back behind them (``waitsBehindReleased(_:)``).
            if !ready.contains(where: { $0.item < next.item }), let index = ready.firstIndex(where: { $0.item == next.item }) {
                ready.remove(at: index)
            }
            if stop == nil && batch.isFull(atCount: batchSize) { try await submitBatch(endItems: consumed) }
        }
    }

    /// The end of the input: the last batches, then what waited for a parent, which the store
    /// then accepts or rejects.
    private func finishBatches(consumed: Int) async throws {
        while stop == nil {
            try await batchReady(consumed: consumed)
            if stop != nil { break }
            try await submitBatch(endItems: consumed)
            try await settleAll()
            if !ready.isEmpty { continue }
            guard !waits.isEmpty else { break }
            holdsForParents = false
            ready = waits.releaseAll()
        }
    }

    /// Takes out of the batch being submitted the records whose parent is neither stored, nor
    /// in this batch, nor in a batch before it that the store has not settled yet: they wait
    /// for a later batch to write it (as do children of records that wait).
    private func holdBackRecordsWithoutParents() async throws {
        guard holdsForParents, batch.hasParents else { return }
        func parentID(_ save: PreparedSave) -> Record.ID? {
            save.parent.map { Record.ID(recordName: $0.recordID.recordName, zoneID: save.recordID.zoneID) }
        }
        var indexByID: [Record.ID: Int] = [:]
        for (index, save) in batch.records.enumerated() { indexByID[save.recordID] = index }
        // What the batches not settled yet leave, in their order: a record saved there is
        // coming; one deleted there after its last save is going, whatever the store holds now.
        var coming: Set<Record.ID> = []
        var going: Set<Record.ID> = []
        for flight in inFlight {
            for number in 0..<flight.batch.segmentCount {
                let (saves, deletions) = flight.batch.segment(number)
                for index in saves {
                    let id = flight.batch.records[index].recordID
                    coming.insert(id)
                    if !going.isEmpty { going.remove(id) }
                }
                for index in deletions {
                    let id = flight.batch.deletions[index]
                    going.insert(id)
                    if !coming.isEmpty { coming.remove(id) }
                }
            }
        }
        var unknown: Set<Record.ID> = []
        for save in batch.records {
            if let parent = parentID(save), indexByID[parent] == nil, !coming.contains(parent), !going.contains(parent) { unknown.insert(parent) }
        }
        let stored = unknown.isEmpty ? [] : try await existingRecords(unknown)
        // Whether each record of the batch waits: its parent is missing, or waits itself.
        var waitsByIndex: [Int: Bool] = [:]
        func waiting(_ index: Int, depth: Int = 0) -> Bool {
            if let known = waitsByIndex[index] { return known }
            guard let parent = parentID(batch.records[index]) else { return false }
            let result: Bool
            if let parentIndex = indexByID[parent] {
                // A cycle of parents is the store's to refuse.
                result = depth < batch.records.count && parentIndex != index && waiting(parentIndex, depth: depth + 1)
            } else {
                // A parent whose deletion, earlier in the input than this record, waits behind
                // the parent's own waiting items is gone at this record's turn: it waits too,
                // for the parent to be written again. (Waiting saves of the parent do not
                // hold it: the parent is there, stored or coming.)
                result = waits.waitsToDelete(parent) || (!coming.contains(parent) && (going.contains(parent) || !stored.contains(parent)))
            }
            waitsByIndex[index] = result
            return result
        }
        let held = batch.records.indices.filter { waiting($0) }
        guard !held.isEmpty else { return }
        let heldIDs = Set(held.map { batch.records[$0].recordID })
        for index in held {
            let save = batch.records[index]
            waits.wait(ImportParentWaits.Item(entry: .save(save), line: batch.recordLines[index], item: batch.recordItems[index]), forParent: parentID(save)!)
        }
        var kept = batch.writes(excluding: heldIDs)
        for (index, rejection) in batch.rejections.enumerated() { kept.append(rejection, item: batch.rejectionItems[index]) }
        kept.names = batch.names.subtracting(heldIDs.map(\.recordName))
        batch = kept
    }

    /// Which of `ids` the store holds (or, in a dry run, would hold by now).
    private func existingRecords(_ ids: Set<Record.ID>) async throws -> Set<Record.ID> {
        do {
            // As the batches' operations see the database: the user directory's record name and roles.
            return try await database.engineCall { [simulation, database] engine, _ in
                let context = try database.resolvedContext()
                if let simulation { return try simulation.existingRecords(Array(ids), engine: engine, context: context) }
                return Set(try engine.fetchRecords(Array(ids), in: context).keys)
            }
        } catch {
            throw failure(.store, error)
        }
    }

    /// The items not settled by a batch that ends the input at `endItems`: those that wait,
    /// those released but not batched yet, and those a resumed checkpoint named pending that
    /// are not read again yet (a batch of them ends where that checkpoint did, past the rest).
    private func pendingItems(before endItems: Int) -> [Int] {
        let unread = resumedPending.isEmpty || readEnd >= endItems ? [] : resumedPending.filter { $0 >= readEnd && $0 < endItems }
        guard !waits.isEmpty || !ready.isEmpty || !unread.isEmpty else { return [] }
        return Set(waits.items + ready.map(\.item) + unread).filter { $0 < endItems }.sorted()
    }

    /// Whether a batch submitted and not settled yet (or the one being read) saves the record `id`.
    private func isBeingWritten(_ id: Record.ID) -> Bool {
        batch.records.contains { $0.recordID == id } || inFlight.contains { $0.batch.records.contains { $0.recordID == id } }
    }

    /// Whether `item` goes behind items earlier in the input that a settled batch released and
    /// that are not batched yet (the batch that ended for it settled one): it is then batched
    /// after them, in input order (an item read from the input is put among them; one of them
    /// stays where it is), before the next input item is read.
    private func waitsBehindReleased(_ item: ImportParentWaits.Item) -> Bool {
        guard !ready.isEmpty, ready.contains(where: { $0.item < item.item }) else { return false }
        if !ready.contains(where: { $0.item == item.item }) {
            let index = ready.firstIndex { $0.item > item.item } ?? ready.endIndex
            ready.insert(item, at: index)
        }
        return true
    }

    /// After a batch settled: the records that waited for the records it wrote are ready.
    private func release(written batch: ImportBatch, failed: Set<Record.ID>) {
        guard !waits.isEmpty else { return }
        var released: [ImportParentWaits.Item] = []
        for save in batch.records where !failed.contains(save.recordID) {
            released += waits.release(parent: save.recordID)
        }
        guard !released.isEmpty else { return }
        ready = (ready + released).sorted { $0.item < $1.item }
    }

    /// A rejected item: reported at once in a dry run or an atomic import; otherwise kept with
    /// its batch, so that it is reported in input order among the store's rejects.
    private func reject(_ rejection: RecordRejection, item: Int) async throws {
        switch mode {
        case .atomic:
            try report(rejection)
            summary.failed += 1
            if let maximum = options.maximumRejects, rejectsSoFar > maximum { stop = .rejectLimitReached }
        case .batches:
            batch.append(rejection, item: item)
            // The limit now falls in this batch or before it: settle up to it.
            if let maximum = options.maximumRejects, rejectsSoFar + batch.rejections.count > maximum {
                try await submitBatch(endItems: item + 1)
                try await settleAll()
            }
        }
    }

    private func flushRejects() throws {
        do {
            try rejects?.flush()
        } catch {
            throw failure(.rejects, error)
        }
    }

    private func report(_ rejection: RecordRejection) throws {
        do {
            try rejects?.reject(rejection)
        } catch {
            throw failure(.rejects, error)
        }
    }

    // MARK: - Batches

    /// Hands the batch being read to the store. Batches commit in input order and are settled
    /// in that order, so a checkpoint never passes an unsettled batch. `requestedEnd` is where
    /// the reading is (every item before it is batched, settled, waiting or ready).
    private func submitBatch(endItems requestedEnd: Int) async throws {
        readEnd = requestedEnd
        if !resumedPending.isEmpty, let last = resumedPending.max(), requestedEnd > last { resumedPending = [] }
        try await holdBackRecordsWithoutParents()
        guard !batch.isEmpty else { return }
        batchesSubmitted += 1
        var next = batch
        batch = ImportBatch(capacity: batchSize)
        handingOver = next.count
        defer { handingOver = 0 }
        while inFlight.count >= maximumInFlight {
            try await settleOldest()
            if stop != nil { return }
        }
        // A batch of records a parent released may end where the one before it ended.
        var endItems = max(requestedEnd, submittedEnd)
        submittedEnd = endItems
        guard let maximum = options.maximumRejects else {
            let pending = pendingItems(before: endItems)
            inFlight.append(Flight(pending: submit(next, atomic: false, endItems: endItems, pendingItems: pending), batch: next, endItems: endItems, probe: false, pendingItems: pending))
            return
        }
        // Every item of a batch could be rejected: when that would pass the limit, find where
        // the limit falls before anything after it is written. Nothing is in flight now.
        let allowance = maximum - rejectsSoFar
        if next.rejections.count > allowance {
            // The input's own rejects already pass the limit: nothing after that one is written,
            // and the batch (the progress its transaction records) ends there.
            let cut = next.rejectionItems[allowance] + 1
            next = next.prefix(before: cut)
            endItems = max(cut, settledEnd)
        }
        if next.count <= allowance || next.writeCount == 0 {
            let pending = pendingItems(before: endItems)
            // A checkpointed batch that writes nothing still records the job's progress, so that
            // the store always knows the job its checkpoint names.
            inFlight.append(Flight(pending: next.writeCount == 0 && job == nil ? nil : submit(next, atomic: false, endItems: endItems, pendingItems: pending), batch: next, endItems: endItems,
                                   probe: false, pendingItems: pending))
            return
        }
        // The batch is tried all or nothing (in any zone: the try is the job's, not a CloudKit
        // request); when it fails, what comes before the limit is written without the rejects.
        // The shared database writes each owner's records in a transaction of their own, so
        // there a try is all or nothing only for one owner's zones.
        let isOneTransaction = database.databaseScope != .shared || Set(next.zoneIDs.map(\.ownerName)).count <= 1
        if next.writeCount <= ModifyRecordsOperation.maximumAtomicItems, isOneTransaction {
            let pending = pendingItems(before: endItems)
            inFlight.append(Flight(pending: submit(next, atomic: true, endItems: endItems, pendingItems: pending), batch: next, endItems: endItems, probe: true, pendingItems: pending))
            return
        }
        // A batch that cannot be tried whole: pieces no larger than the allowance + 1, each
        // settled before the next, so that a piece reaches the limit only with its last item.
        while !next.isEmpty && stop == nil {
            let items = next.itemIndexes
            let size = max(1, options.maximumRejects.map { $0 - rejectsSoFar + 1 } ?? items.count)
            let piece: ImportBatch
            var pieceEnd: Int
            if items.count > size {
                piece = next.prefix(before: items[size])
                pieceEnd = items[size]
                next = next.suffix(from: items[size])
            } else {
                piece = next
                pieceEnd = endItems
                next = ImportBatch()
            }
            // Records a parent released come before the input's own: a piece of them ends
            // where the batch before ended, the rest of them pending.
            pieceEnd = max(pieceEnd, settledEnd)
            let pending = Array(Set(pendingItems(before: pieceEnd) + next.itemIndexes.filter { $0 < pieceEnd })).sorted()
            inFlight.append(Flight(pending: piece.writeCount == 0 && job == nil ? nil : submit(piece, atomic: false, endItems: pieceEnd, pendingItems: pending), batch: piece, endItems: pieceEnd,
                                   probe: false, pendingItems: pending))
            try await settleAll()
        }
    }

    /// The mode the batches are written in: the options', or `.forceReplace` for whole versions
    /// a `.forceUpdate` import is told to replace with.
    var writeMode: RecordWriteMode {
        options.writeMode == .forceUpdate && options.replacesWithWholeVersions && source.holdsWholeVersions ? .forceReplace : options.writeMode
    }

    /// Submits a batch; `endItems` (where the batch ends in the input) is recorded as the job's
    /// progress in the batch's own transaction.
    private func submit(_ batch: ImportBatch, atomic: Bool, endItems: Int? = nil, pendingItems: [Int] = []) -> PendingBatchSave {
        precondition(!atomic || batch.segmentCount == 1, "an all-or-nothing batch names each record once")
        let op = batch.segmentCount == 1 ? ModifyRecordsOperation(preparedSaves: batch.records) : ModifyRecordsOperation(preparedSegments: batch.requestSegments)
        op.stopsOnStoreFailure = true
        if let job, let endItems {
            // The store's rejects of the batch are known in its transaction only: the record
            // that commits with it counts them too, so that a run killed before the batch is
            // settled resumes knowing them.
            let rejected = rejectsSoFar + batch.rejections.count
            op.jobProgress = (job, Int64(endItems), ImportCheckpoint.progressText(pendingItems: pendingItems, itemsRejected: rejected))
            op.jobProgressTextAfterFailures = { failures in ImportCheckpoint.progressText(pendingItems: pendingItems, itemsRejected: rejected + failures) }
        }
        if batch.segmentCount == 1 { op.recordIDsToDelete = batch.deletions }
        op.deletedRecordOwners = batch.deletionOwners
        op.writeMode = writeMode
        op.isAtomic = atomic
        // An atomic batch here is all or nothing across zones: a probe that failed must have
        // written nothing, and an atomic import writes every record or none.
        op.isAtomicAcrossZones = atomic
        op.preservesSystemFields = options.preservesSystemFields
        op.maximumAssetSize = options.maximumAssetSize
        op.writesSystemRecords = options.writesSystemRecords
        op.simulation = simulation
        // One transaction per batch: a bulk load writes faster in larger transactions than in
        // CloudKit's 400-item requests.
        op.itemsPerBatch = max(batchSize, 1)
        return saver.submit(op)
    }

    private func settleAll() async throws {
        while !inFlight.isEmpty { try await settleOldest() }
    }

    /// Waits for the oldest batch, reports its rejects in input order, counts what it did and
    /// moves the checkpoint past it; with a reject limit, stops where the limit falls.
    private func settleOldest() async throws {
        let flight = inFlight.removeFirst()
        var outcome: BatchSaveOutcome?
        if let pending = flight.pending { outcome = try await self.outcome(of: pending) }
        let batch = flight.batch
        // An all-or-nothing try that failed wrote nothing; its items that failed only because
        // another did are not rejects.
        let rolledBack = flight.probe && outcome.map { $0.succeeded == 0 && $0.hasFailures } == true
        let events = Self.rejections(of: flight, outcome: outcome, rolledBack: rolledBack)
        let failedIDs = Set(events.compactMap(\.id))
        let allowance = options.maximumRejects.map { $0 - rejectsSoFar } ?? Int.max

        // What the store committed is counted before the rejections are reported: a reject
        // sink that fails (a full disk) must not make the summary deny the batch's writes.
        if !rolledBack, let outcome { count(outcome) }
        if events.count > allowance {
            let cut = events[allowance]
            var rejections = events[...allowance].map(\.rejection)
            summary.failed += allowance + 1
            stop = .rejectLimitReached
            // Nothing after the cut was written; records a parent released, which come before
            // the input's own, may fall after it below where the batch before ended.
            let end = max(cut.item + 1, settledEnd)
            let pending = Set(pendingItems(before: end) + flight.pendingItems.filter { $0 < end } + batch.itemIndexes.filter { $0 > cut.item && $0 < end }).sorted()
            if rolledBack {
                rejections += try await write(batch.prefix(before: cut.item).writes(excluding: failedIDs), endItems: end, pendingItems: pending)
            }
            try await reportSettled(rejections, settling: end, pendingItems: pending)
            try saveCheckpoint(end, pendingItems: pending)
            report()
            return
        }
        var rejections = events.map(\.rejection)
        summary.failed += events.count
        if rolledBack {
            rejections += try await write(batch.writes(excluding: failedIDs), endItems: flight.endItems, pendingItems: flight.pendingItems)
        }
        try await reportSettled(rejections, settling: flight.endItems, pendingItems: flight.pendingItems)
        // Records that waited for what this batch wrote go into the next batch.
        release(written: batch, failed: failedIDs)
        if stop == nil { try saveCheckpoint(flight.endItems, pendingItems: flight.pendingItems) }
        report()
    }

    /// Reports the rejections of a batch the store has settled (already counted), in input
    /// order. When the sink fails, the checkpoint moves past the batch (it is in the store, and
    /// the store's record of the job says so) holding the rejections, which the resumed run
    /// reports first.
    private func reportSettled(_ rejections: [RecordRejection], settling end: Int, pendingItems: [Int]) async throws {
        do {
            for rejection in rejections { try report(rejection) }
            try flushRejects()
        } catch let failed as Failure where failed.stage == .rejects && simulation == nil {
            // The batches in flight commit whatever the sink does: they are settled too, without
            // reporting, so that the summary counts what the store holds and the checkpoint
            // keeps their rejections with the batch's for the resumed run to report.
            var unreported = rejections
            var (end, pendingItems) = (end, pendingItems)
            while !inFlight.isEmpty {
                let flight = inFlight.removeFirst()
                guard let pending = flight.pending, let outcome = try? await outcome(of: pending) else { break }
                // A try of a batch all or nothing that failed wrote nothing: the run stops before it.
                if flight.probe && outcome.succeeded == 0 && outcome.hasFailures { break }
                count(outcome)
                let events = Self.rejections(of: flight, outcome: outcome, rolledBack: false)
                summary.failed += events.count
                unreported += events.map(\.rejection)
                (end, pendingItems) = (flight.endItems, flight.pendingItems)
            }
            // A checkpoint that cannot hold them either: the sink's failure is the one to tell.
            try? saveCheckpoint(end, pendingItems: pendingItems, unreportedRejections: unreported)
            throw Failure(stage: .rejects, error: failed.error, summary: summary)
        }
    }

    /// The rejects of a settled batch, in input order: the store's (not, for a try all or
    /// nothing that was rolled back, those that failed only because another did), and the
    /// input's own.
    private static func rejections(of flight: Flight, outcome: BatchSaveOutcome?, rolledBack: Bool) -> [(item: Int, rejection: RecordRejection, id: Record.ID?)] {
        let batch = flight.batch
        var events: [(item: Int, rejection: RecordRejection, id: Record.ID?)] = []
        if let outcome, outcome.hasFailures {
            for (segment, failures) in outcome.failuresBySegment.enumerated() where !failures.isEmpty {
                let places = batch.places(inSegment: segment)
                for (id, error) in failures where !(rolledBack && error.code == .batchRequestFailed) {
                    let place = places[id] ?? (line: 0, item: flight.endItems - 1)
                    events.append((place.item, RecordRejection(line: place.line, column: 0, recordName: id.recordName, message: error.description), id))
                }
            }
        }
        for (index, rejection) in batch.rejections.enumerated() { events.append((batch.rejectionItems[index], rejection, nil)) }
        events.sort { $0.item < $1.item }
        return events
    }

    /// Writes what an all-or-nothing try showed would succeed, and reports what fails now
    /// (only a concurrent writer can make something fail that did not before); the job's
    /// progress (`endItems`, `pendingItems`) is recorded with it, even when nothing is left.
    /// Answers the rejections to report, in input order.
    private func write(_ batch: ImportBatch, endItems: Int, pendingItems: [Int]) async throws -> [RecordRejection] {
        guard batch.writeCount > 0 || job != nil else { return [] }
        let outcome = try await outcome(of: submit(batch, atomic: false, endItems: endItems, pendingItems: pendingItems))
        count(outcome)
        let places = batch.places()
        let failures = outcome.failures.map { (place: places[$0.key] ?? (line: 0, item: 0), id: $0.key, error: $0.value) }.sorted { $0.place.item < $1.place.item }
        summary.failed += failures.count
        if let maximum = options.maximumRejects, rejectsSoFar > maximum { stop = .rejectLimitReached }
        return failures.map { RecordRejection(line: $0.place.line, column: 0, recordName: $0.id.recordName, message: $0.error.description) }
    }

    private func outcome(of pending: PendingBatchSave) async throws -> BatchSaveOutcome {
        do {
            return try await pending.outcome
        } catch {
            throw failure(.store, error)
        }
    }

    private func count(_ outcome: BatchSaveOutcome) {
        summary.created += outcome.created
        summary.updated += outcome.updated
        summary.unchanged += outcome.unchanged
        summary.deleted += outcome.deleted
        if simulation != nil { summary.valid += outcome.succeeded }
    }

    /// The job's rejects: this run's and those of the runs it resumes, which the reject limit
    /// counts together.
    private var rejectsSoFar: Int { summary.failed + summary.failedInEarlierRuns }

    private func saveCheckpoint(_ itemsSettled: Int, pendingItems: [Int], unreportedRejections: [RecordRejection] = []) throws {
        settledEnd = max(settledEnd, itemsSettled)
        do {
            try checkpointStore?.save(ImportCheckpoint(itemsSettled: itemsSettled, job: job, pendingItems: pendingItems, itemsRejected: rejectsSoFar,
                                                       unreportedRejections: unreportedRejections))
        } catch {
            throw failure(.checkpoint, error)
        }
    }

    // MARK: - Atomic imports

    private func requireAtomicZone(_ zoneID: RecordZone.ID) async throws {
        guard try await zonesAreAtomic([zoneID], missingIsAtomic: true) else {
            throw failure(.atomicity, StratusError(
                .invalidArguments,
                zoneID.isDefault
                    ? "the default zone has no atomic capability (as CloudKit's), so its records cannot be written all or nothing; import without --atomic (isAtomic), or into a custom zone"
                    : "zone '\(zoneID.zoneName)' was created without the atomic capability, so its records cannot be written all or nothing; import without --atomic (isAtomic), or into an atomic zone",
                zoneID: zoneID))
        }
    }

    private func checkAtomicSize() throws {
        guard batch.writeCount > ModifyRecordsOperation.maximumAtomicItems else { return }
        throw failure(.store, StratusError(
            .limitExceeded, "an atomic import holds at most \(ModifyRecordsOperation.maximumAtomicItems) records; the input has more. Nothing was written."))
    }

    private func writeAtomically() async throws {
        if summary.failed > 0 {
            stop = .atomicImportRejected
            return
        }
        guard batch.writeCount > 0 else { return }
        for zoneID in atomicZonesToCreate {
            do {
                _ = try await database.save(RecordZone(zoneID: zoneID))
            } catch {
                throw failure(.store, error)
            }
            summary.createdZones.append(zoneID)
        }
        atomicZonesToCreate = []
        let all = batch
        batch = ImportBatch()
        let outcome = try await outcome(of: submit(all, atomic: true))
        if !outcome.hasFailures {
            count(outcome)
            return
        }
        let places = all.places()
        let own = outcome.failures.filter { $0.value.code != .batchRequestFailed }
            .map { (place: places[$0.key] ?? (line: 0, item: 0), id: $0.key, error: $0.value) }
            .sorted { $0.place.item < $1.place.item }
        for failure in own {
            try report(RecordRejection(line: failure.place.line, column: 0, recordName: failure.id.recordName, message: failure.error.description))
        }
        summary.failed += own.count
        stop = .atomicImportRejected
    }

    // MARK: - Zones

    /// Whether every zone applies atomic requests atomically; a zone that does not exist is
    /// not (its records fail anyway) unless `missingIsAtomic`.
    private func zonesAreAtomic(_ zoneIDs: Set<RecordZone.ID>, missingIsAtomic: Bool = false) async throws -> Bool {
        for zoneID in zoneIDs {
            if zoneIsAtomic[zoneID] == nil {
                do {
                    let zone = try await database.recordZone(for: zoneID)
                    zoneIsAtomic[zoneID] = zone.capabilities.contains(.atomic)
                } catch let error as StratusError where error.code == .zoneNotFound {
                    // A zone a dry run would create is created atomic.
                    zoneIsAtomic[zoneID] = missingIsAtomic || (simulation != nil && knownZones.contains(zoneID))
                } catch {
                    throw failure(.store, error)
                }
            }
            if zoneIsAtomic[zoneID] == false { return false }
        }
        return true
    }

    // MARK: - Reporting

    private func report() {
        guard let progress else { return }
        let pending = batch.count + handingOver + itemInHand + inFlight.reduce(0) { $0 + $1.batch.count } + waits.count + ready.count
        progress(RecordImporter.Progress(summary: summary, pending: pending, bytesRead: source.bytesRead))
    }

    private func failure(_ stage: Failure.Stage, _ error: any Error) -> Failure {
        if let failure = error as? Failure { return failure }
        return Failure(stage: stage, error: error, summary: summary)
    }
}
