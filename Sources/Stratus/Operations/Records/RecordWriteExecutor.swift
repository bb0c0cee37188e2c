import Foundation

/// Saves and deletes for one engine transaction, as operations hand them to
/// ``RecordWriteExecutor``: records already prepared, and how to write them.
struct ModifyRequest: Sendable {
    var saves: [PreparedSave]
    var recordIDsToDelete: [Record.ID]
    var writeMode: RecordWriteMode
    /// Keep the system fields the records carry; see ``RecordWriteRules``.
    var preservesSystemFields: Bool
    /// With ``preservesSystemFields``: the saves are the stored versions themselves, changed
    /// only where the store's copy lacked something (asset content attached), so they keep their
    /// change tag and what their JSON left out even where their values change.
    var keepsGivenVersion = false
    /// When true, a save that sends keys but would leave a record as the store holds it is still
    /// a new version (new change tag and modification date, a change in the zone's feed), as
    /// every save through CloudKit's save policies is; when false (a `writeMode`, a restore), such
    /// a save in a mode that does not check change tags writes nothing and is
    /// ``RecordWriteKind/unchanged``.
    var writesUnchangedRecords = false
    /// When true, nothing is written if any item fails (in zones with the atomic capability).
    var isAtomic: Bool
    /// With ``isAtomic``: nothing is written if any item fails, whatever the zones' capabilities.
    /// No CloudKit request is: a job's own all-or-nothing try (the batch in which an import's
    /// reject limit may fall, tried whole before it is written record by record).
    var rollsBackInEveryZone = false
    /// When false, nobody looks at the stored records: a successful save's result may carry
    /// the request's own record instead of a new one with the store's system fields, which
    /// spares a bulk import a record per record.
    var returnsSavedRecords: Bool
    /// A job's position to record in the same transaction (an import's settled items, a
    /// pipeline's source position).
    var jobProgress: JobProgressEntry?
    /// Whether the saves restore CloudKit's own records as the system made them
    /// (``RecordTypeRules/systemCreator(of:)``).
    var writesSystemRecords = false
    /// Where a dry run writes instead of the store (``WriteSimulation``); `nil` for a real write.
    var simulation: WriteSimulation?
    /// The change tag each record to delete had when it was read (a query's page, a pipeline's
    /// batch): a record changed since is not deleted but fails `serverRecordChanged`, since it
    /// may no longer be what was selected. Records without an entry are deleted whatever they hold.
    var deletedRecordTags: [Record.ID: String] = [:]
    /// For a deletion from another owner's zone that an import took as the current user's
    /// zone: that owner. A stored record that came from the zone of that name of a different
    /// owner (``Record/JSONExtras/ownerRecordName``) is not deleted, as a save of it is not
    /// written over (``Writer/ownerConflict(_:existing:)``).
    var deletedRecordOwners: [Record.ID: String] = [:]

    /// The mode `save` is written in: ``writeMode``, but a share saved through a save policy
    /// (``writesUnchangedRecords``) checks its change tag, as CloudKit saves a share as
    /// `.ifServerRecordUnchanged` whatever the policy: a device holding a stale share gets
    /// `serverRecordChanged` instead of overwriting another's participants.
    func writeMode(for save: PreparedSave) -> RecordWriteMode {
        writesUnchangedRecords && writeMode == .forceUpdate && ShareRules.isShare(save) ? .ifServerRecordUnchanged : writeMode
    }

    init(saves: [PreparedSave], recordIDsToDelete: [Record.ID] = [], writeMode: RecordWriteMode, preservesSystemFields: Bool = false,
         isAtomic: Bool, returnsSavedRecords: Bool = true) {
        self.saves = saves
        self.recordIDsToDelete = recordIDsToDelete
        self.writeMode = writeMode
        self.preservesSystemFields = preservesSystemFields
        self.isAtomic = isAtomic
        self.returnsSavedRecords = returnsSavedRecords
    }
}

/// What a ``ModifyRequest`` did: a result for every item, in request order.
struct ModifyOutcome: Sendable {
    /// Whether an item's failure rolled the atomic request back, so that nothing was written.
    var rolledBack = false
    /// For each save, in order: the record as stored and what kind of write it was, or its error.
    var saveResults: [Result<(Record, RecordWriteKind), StratusError>] = []
    /// For each record ID to delete, in order: whether a stored record was deleted, or the error.
    var deleteResults: [Result<Bool, StratusError>] = []
    /// Records deleted because a `.deleteSelf` reference pointed at a deleted record.
    var cascadeDeletedIDs: [Record.ID] = []
    /// Asset content the written rows no longer name: candidates for collection.
    var releasedAssetContents: Set<String> = []
    /// The roots of record-level shares whose hierarchies records left or came into, by zone
    /// name (``ShareHierarchyMoves``): their participants are told, as of a deletion.
    var hierarchyMovedRoots: [String: Set<String>] = [:]
    /// The roots of record-level shares whose hierarchies deleted records were in, by zone name,
    /// for each zone whose deletions ``ShareHierarchyMoves`` followed (empty: in none): only
    /// their participants are told. A zone not here tells every participant of a deletion.
    var hierarchyDeletedRoots: [String: Set<String>] = [:]

    /// How many saves and deletions failed.
    var failureCount: Int {
        saveResults.reduce(0) { if case .failure = $1 { $0 + 1 } else { $0 } } + deleteResults.reduce(0) { if case .failure = $1 { $0 + 1 } else { $0 } }
    }

    var hasFailure: Bool {
        saveResults.contains { if case .failure = $0 { true } else { false } }
            || deleteResults.contains { if case .failure = $0 { true } else { false } }
    }
}

/// The write policy of Stratus, applied once above every engine: CloudKit's save rules,
/// parents before children, references and cascades, sizes, and atomicity with its
/// relabelling. Engines supply a ``RecordWriteTransaction`` and store what this decides.
///
/// ```swift
/// let outcome = try RecordWriteExecutor.apply(request, engine: engine, context: context)
/// ```
enum RecordWriteExecutor {
    /// How many `.deleteSelf` references may point at one record (CloudKit's limit).
    static let maximumDeleteSelfReferences = 750

    /// The most new records handed to the engine in one ``RecordWriteTransaction/insertNewRecords(_:)``.
    static let maximumNewRun = 256

    /// The most saves handed to the engine in one ``RecordWriteTransaction/updateStoredRecords(_:)``.
    static let maximumUpdateRun = 1_000

    /// Runs `request` in one engine transaction.
    ///
    /// Saves run in request order, which the caller makes parents-first
    /// (``PreparedSave/parentsFirst(_:)``), so that a child's parent check sees its parent's save.
    /// An atomic request in zones that all have the atomic capability is rolled back when an
    /// item fails: that item keeps its error, every other item reports `batchRequestFailed`.
    ///
    /// With a ``ModifyRequest/simulation``, the request runs against the simulation instead
    /// of a write transaction of the store: the same policy, and nothing written.
    ///
    /// - Throws: store failures (busy, disk full), after which nothing was written.
    static func apply(_ request: ModifyRequest, engine: any StorageEngine, context: DatabaseContext) throws -> ModifyOutcome {
        // The shared database decides what its user may write, then writes in the owners' rows.
        if let shared = engine as? SharedDatabaseEngine, context.sharedOwner == nil, request.simulation == nil {
            return try shared.apply(request, context: context)
        }
        do {
            guard let simulation = request.simulation else {
                return try engine.writeRecords(in: context) { transaction in try run(request, in: transaction, engine: engine, context: context) }
            }
            let read = request.saves.map(\.recordID) + request.saves.compactMap { save in save.parent.map { Record.ID(recordName: $0.recordID.recordName, zoneID: save.recordID.zoneID) } }
                + request.recordIDsToDelete
            return try simulation.run(engine: engine, context: context, prefetching: read) { transaction in
                try run(request, in: transaction, engine: engine, context: context)
            }
        } catch let rollback as AtomicRollback {
            var outcome = rollback.outcome
            outcome.relabelForAtomicFailure(saves: request.saves.map(\.recordID), deletes: request.recordIDsToDelete)
            outcome.rolledBack = true
            return outcome
        }
    }

    /// Runs non-atomic `requests` one after another in one engine transaction, as if each were
    /// a transaction of its own committed in that order: a later request sees what an earlier
    /// one wrote, so that requests may name the same record (an import whose input names a
    /// record again: a repeated update, a creation then its deletion). The job progress of the
    /// last request is recorded, counting the failures of them all. Answers an outcome for
    /// each request, in order.
    ///
    /// ```swift
    /// let outcomes = try RecordWriteExecutor.apply([create, thenDelete], engine: engine, context: context)
    /// ```
    ///
    /// - Precondition: no request is atomic (a programmer error: a rollback would need to
    ///   undo the requests before it, which their callers were told committed).
    /// - Throws: store failures (busy, disk full), after which nothing was written.
    static func apply(_ requests: [ModifyRequest], engine: any StorageEngine, context: DatabaseContext) throws -> [ModifyOutcome] {
        guard requests.count > 1, !(engine is SharedDatabaseEngine) else { return try requests.map { try apply($0, engine: engine, context: context) } }
        precondition(!requests.contains(where: \.isAtomic), "requests applied in one transaction are not atomic")
        // A dry run keeps nothing between its simulated transactions: one after another is the same.
        if requests.contains(where: { $0.simulation != nil }) { return try requests.map { try apply($0, engine: engine, context: context) } }
        let progress = requests[requests.count - 1].jobProgress
        return try engine.writeRecords(in: context) { transaction in
            var outcomes: [ModifyOutcome] = []
            outcomes.reserveCapacity(requests.count)
            // Record writes change no subscription: one look at them serves every request.
            let subscriptions = try SubscriptionIndexCache.index(for: transaction, engine: engine, context: context)
            // Records an earlier request saved exist: a later one saves them the general way
            // at once, rather than trying them as new rows that the engine then refuses.
            var saved: Set<Record.ID> = []
            // Every request's notifications, appended once at the end (feeds locked in one order).
            var rows: [NotificationRow] = []
            for var request in requests {
                request.jobProgress = nil
                let outcome = try run(request, in: transaction, engine: engine, context: context, subscriptions: .some(subscriptions), saved: saved,
                                      gatheringNotifications: &rows)
                for (save, result) in zip(request.saves, outcome.saveResults) {
                    if case .success = result { saved.insert(save.recordID) }
                }
                saved.subtract(request.recordIDsToDelete)
                saved.subtract(outcome.cascadeDeletedIDs)
                outcomes.append(outcome)
            }
            try SubscriptionNotifier.append(rows, in: transaction)
            if let progress {
                let failures = outcomes.reduce(0) { $0 + $1.failureCount }
                try transaction.saveJobProgress(progress.job, position: progress.position, text: progress.textAfterFailures.map { $0(failures) } ?? progress.text)
            }
            return outcomes
        }
    }

    /// Runs `request` in `transaction`: its writes, its job progress and its notifications.
    /// Throws ``AtomicRollback`` to roll back an atomic request with a failed item.
    /// `subscriptions`: the subscriptions the transaction sees, when the caller looked already.
    /// `saved`: records the transaction saved before (``Writer/saved``).
    private static func run(_ request: ModifyRequest, in transaction: any RecordWriteTransaction, engine: any StorageEngine, context: DatabaseContext,
                            subscriptions: SubscriptionIndex?? = nil, saved: Set<Record.ID> = []) throws -> ModifyOutcome {
        var rows: [NotificationRow] = []
        let outcome = try run(request, in: transaction, engine: engine, context: context, subscriptions: subscriptions, saved: saved, gatheringNotifications: &rows)
        try SubscriptionNotifier.append(rows, in: transaction)
        return outcome
    }

    /// ``run(_:in:engine:context:subscriptions:saved:)``, adding the request's notifications to
    /// `rows` for the caller to append with the transaction's others.
    private static func run(_ request: ModifyRequest, in transaction: any RecordWriteTransaction, engine: any StorageEngine, context: DatabaseContext,
                            subscriptions: SubscriptionIndex??, saved: Set<Record.ID>, gatheringNotifications rows: inout [NotificationRow]) throws -> ModifyOutcome {
        let formerMembers = request.simulation == nil ? try SharedDatabaseNotifier.membersBefore(request, in: transaction, context: context) : []
        var writer = Writer(transaction: transaction, request: request, context: context)
        writer.saved = saved
        // Subscriptions that writes of this database may fire, as this transaction sees them.
        writer.notifier = try (subscriptions ?? SubscriptionIndexCache.index(for: transaction, engine: engine, context: context))
            .map { SubscriptionNotifier(index: $0, context: context, transaction: transaction) }
        var outcome = try writer.run()
        outcome.releasedAssetContents = transaction.releasedAssetContents
        if let progress = request.jobProgress {
            let text = progress.textAfterFailures.map { $0(outcome.failureCount) } ?? progress.text
            try transaction.saveJobProgress(progress.job, position: progress.position, text: text)
        }
        if request.isAtomic, outcome.hasFailure, request.rollsBackInEveryZone || writer.touchedZonesAreAtomic {
            throw AtomicRollback(outcome: outcome)
        }
        // The notifications commit with the writes that fired them, or not at all: the
        // database's own subscriptions', and those of the participants of its shared zones.
        rows += try writer.notifier?.finishedRows(in: transaction) ?? []
        if request.simulation == nil {
            rows += try SharedDatabaseNotifier.rows(for: request, outcome, formerMembers: formerMembers, in: transaction, engine: engine, context: context)
        }
        return outcome
    }

    /// Thrown inside the transaction so that the engine rolls an atomic request back.
    private struct AtomicRollback: Error {
        let outcome: ModifyOutcome
    }

    /// Removes the asset content that a committed write stopped naming (replaced values,
    /// deleted records), unless a later write named it again. Errors are not the write's: the
    /// next collection removes what is left.
    static func collectReleasedAssets(_ outcome: ModifyOutcome, engine: any StorageEngine, context: DatabaseContext) {
        guard !outcome.releasedAssetContents.isEmpty else { return }
        _ = try? AssetCollector.collect(engine.assetContents(for: context), releasing: nil, candidates: outcome.releasedAssetContents)
    }

    /// The error of an item that was not written because another item of its atomic request failed.
    static func batchFailed(_ id: Record.ID) -> StratusError {
        StratusError(.batchRequestFailed, "record '\(id.recordName)' was not written because another item of the atomic request failed", recordID: id)
    }

    // MARK: - One transaction

    private struct Writer {
        let transaction: any RecordWriteTransaction
        let request: ModifyRequest
        let context: DatabaseContext
        private var takenNow: Date?
        /// The time of this request's writes, taken when first needed after each zone is first
        /// locked, so that where writers wait for a zone's lock (PostgreSQL) a later commit
        /// never carries an earlier modification date than the one before it in that zone.
        var now: Date {
            mutating get {
                if let takenNow { return takenNow }
                let taken = Date().wholeMilliseconds
                takenNow = taken
                return taken
            }
        }
        private(set) var outcome = ModifyOutcome()
        /// Decides what the writes fire; `nil` when no subscription could fire.
        var notifier: SubscriptionNotifier?
        /// Capabilities of the zones touched; `nil` for a zone that does not exist. The last
        /// zone is kept apart because a request nearly always stays in one.
        private var zones: [RecordZone.ID: RecordZone.Capabilities?] = [:]
        private var lastZone: (id: RecordZone.ID, capabilities: RecordZone.Capabilities?)?
        /// After a new record turned out to exist, the rest of the request is saved the general
        /// way: a re-run import would otherwise try every record twice.
        private var newRunConflicted = false
        /// Records saved earlier in the transaction (by an earlier request of it): they exist,
        /// so they are not tried as new rows.
        var saved: Set<Record.ID> = []
        /// Types enforced, grown in development, and security roles in the public database.
        private var typeRules: RecordTypeRules
        /// Sharing's rules: shares, their roots and their deletion.
        private var shares: ShareRules
        /// Records moving between the hierarchies of record-level shares.
        private var hierarchy: ShareHierarchyMoves

        init(transaction: any RecordWriteTransaction, request: ModifyRequest, context: DatabaseContext) {
            self.transaction = transaction
            self.request = request
            self.context = context
            self.typeRules = RecordTypeRules(context: context, writesSystemRecords: request.writesSystemRecords)
            self.shares = ShareRules(request: request, context: context)
            self.hierarchy = ShareHierarchyMoves(context: context)
        }

        var touchedZonesAreAtomic: Bool {
            zones.values.allSatisfy { $0?.contains(.atomic) ?? true } && (lastZone?.capabilities?.contains(.atomic) ?? true)
        }

        mutating func run() throws -> ModifyOutcome {
            outcome.saveResults.reserveCapacity(request.saves.count)
            // Saves that can only update (a tagged record, an update mode) each read their
            // stored record: an engine with round trips reads them together first. Those that
            // may be written without reading are read only if the engine declines them.
            let updates = request.saves.filter { !request.writeMode.mayCreate(changeTag: $0.systemFields.recordChangeTag) && !mayUpdateWithoutReading($0) }
                .map(\.recordID)
            if updates.count > 1 { try transaction.prefetchStoredRecords(updates) }
            // Shares are saved before the other records, so that their roots' saves know which
            // share this request linked them to; their results keep their places.
            var sharesSaved: [Int: Result<(Record, RecordWriteKind), StratusError>] = [:]
            for (index, save) in request.saves.enumerated() where ShareRules.isShare(save) {
                sharesSaved[index] = try self.save(save)
            }
            var next = 0
            while next < request.saves.count {
                if let result = sharesSaved[next] {
                    outcome.saveResults.append(result)
                    next += 1
                } else {
                    next += try saveRun(from: next)
                }
            }
            // Deletions each read their stored record where a check needs it (a change tag, an
            // owner, the roles): an engine with round trips reads them together first.
            var checked: [Record.ID] = []
            for id in request.recordIDsToDelete
            where try typeRules.checksDeletes || request.deletedRecordTags[id] != nil || request.deletedRecordOwners[id] != nil || shares.mayDeleteRecordShares(in: id.zoneID, transaction)
                || hierarchy.tracks(id.zoneID, in: transaction) {
                checked.append(id)
            }
            if checked.count > 1 { try transaction.prefetchStoredRecords(checked) }
            for id in request.recordIDsToDelete {
                outcome.deleteResults.append(try delete(id))
            }
            (outcome.hierarchyMovedRoots, outcome.hierarchyDeletedRoots) = try hierarchy.finish(in: transaction)
            try typeRules.storeGrowth(in: transaction)
            return outcome
        }

        private mutating func capabilities(_ zoneID: RecordZone.ID) throws -> RecordZone.Capabilities? {
            if let lastZone, lastZone.id == zoneID { return lastZone.capabilities }
            if let lastZone { zones[lastZone.id] = lastZone.capabilities }
            // The write policy decides here, once per zone, what a zone can do (the default
            // zone is never atomic, whatever its stored row says).
            let found: RecordZone.Capabilities?
            if let known = zones[zoneID] {
                found = known
            } else {
                found = try transaction.zoneCapabilities(zoneID).map { ZoneRules.capabilities(of: zoneID, stored: $0) }
                // The zone is locked now: its writes are dated from here.
                takenNow = nil
            }
            lastZone = (zoneID, found)
            return found
        }

        private func zoneNotFound(_ id: Record.ID) -> StratusError {
            ZoneRules.zoneNotFound(id.zoneID, context, recordID: id)
        }

        // MARK: Saves

        /// Saves records from `start` and appends a result for each; answers how many. Records
        /// that would be new (the rules create them, and they have no parent, assets or
        /// `.deleteSelf` references, whose checks and side effects must see the store first)
        /// go to the engine together without a read each: a bulk import's common case. Any of
        /// them that turns out to exist is then saved the general way.
        private mutating func saveRun(from start: Int) throws -> Int {
            let saves = request.saves
            let first = saves[start]
            if mayUpdateWithoutReading(first) { return try updateRun(from: start) }
            guard request.writeMode.mayCreate(changeTag: first.systemFields.recordChangeTag), !newRunConflicted, !saved.contains(first.recordID), !shares.mustSee(first),
                  try capabilities(first.recordID.zoneID) != nil else {
                outcome.saveResults.append(try save(first))
                return 1
            }
            var rows: [RecordRow] = []
            var resolutions: [RecordWriteRules.Resolution] = []
            for save in saves[start...].prefix(RecordWriteExecutor.maximumNewRun) {
                guard save.recordID.zoneID.isSameZone(as: first.recordID.zoneID), save.parent == nil, !saved.contains(save.recordID), !shares.mustSee(save),
                      case .success(let new) = RecordWriteRules.resolve(save, existing: nil, mode: request.writeMode(for: save), preservingSystemFields: request.preservesSystemFields, context: context, now: now),
                      new.kind == .created, try typeRules.admitsNewRow(save, in: transaction) else { break }
                // A new record stores exactly its incoming values: the document prepared with it.
                // Its document is the one prepared, unless the save changed what it keeps of the JSON.
                rows.append(RecordRow(recordID: save.recordID, recordType: save.record.recordType, systemFields: new.systemFields, fields: save.fields,
                                      encryptedKeys: save.encryptedKeys, parent: nil,
                                      document: new.jsonExtras == save.jsonExtras ? save.document
                                          : FieldDocument.encodedBytes(save.fields, encryptedKeys: save.encryptedKeys, jsonExtras: new.jsonExtras),
                                      jsonExtras: new.jsonExtras))
                resolutions.append(new)
            }
            guard !rows.isEmpty else {
                outcome.saveResults.append(try save(first))
                return 1
            }
            // Before the engine streams the rows: whether the zone's hierarchies are tracked.
            _ = try hierarchy.tracks(first.recordID.zoneID, in: transaction)
            let inserted = try transaction.insertNewRecords(rows)
            for (offset, wasInserted) in inserted.enumerated() {
                let save = saves[start + offset]
                if wasInserted {
                    let row = rows[offset]
                    notifier?.saved(row.recordID, recordType: row.recordType, system: row.systemFields, fields: row.fields, parent: row.parent, created: true)
                    try hierarchy.saved(row.recordID, recordType: row.recordType, parentBefore: nil, parentAfter: nil, created: true, in: transaction)
                    outcome.saveResults.append(.success((request.returnsSavedRecords ? resolutions[offset].record(for: save) : save.record, .created)))
                } else {
                    if !newRunConflicted {
                        // A re-run import: the rest of the request names stored records, each
                        // read the general way; an engine with round trips reads them together.
                        newRunConflicted = true
                        let rest = saves[(start + offset)...].map(\.recordID)
                        if rest.count > 1 { try transaction.prefetchStoredRecords(rest) }
                    }
                    outcome.saveResults.append(try self.save(save))
                }
            }
            return rows.count
        }

        /// Saves from `start` that may be written without reading (``mayUpdateWithoutReading(_:)``)
        /// and appends a result for each; answers how many. A run of them in one zone goes to
        /// the engine together (``RecordWriteTransaction/updateStoredRecords(_:)``), a bulk
        /// update's common case; those the engine declines are then read together and saved
        /// the general way.
        private mutating func updateRun(from start: Int) throws -> Int {
            let saves = request.saves
            let zoneID = saves[start].recordID.zoneID
            var updates: [StoredRecordUpdate] = []
            var names: Set<String> = []
            if try capabilities(zoneID) != nil {
                for save in saves[start...].prefix(RecordWriteExecutor.maximumUpdateRun) {
                    // A record named twice is saved twice, in order: the second save sees the first.
                    guard save.recordID.zoneID == zoneID, mayUpdateWithoutReading(save), !names.contains(save.recordID.recordName), let update = try storedRecordUpdate(save) else { break }
                    names.insert(save.recordID.recordName)
                    updates.append(update)
                }
            }
            guard !updates.isEmpty else {
                outcome.saveResults.append(try save(saves[start], tryingWithoutReading: false))
                return 1
            }
            let written = try transaction.updateStoredRecords(updates)
            guard written.count == updates.count else {
                throw StratusError(.internalError, "the engine answered for \(written.count) of \(updates.count) updates")
            }
            let declined = updates.indices.filter { !written[$0] }.map { saves[start + $0].recordID }
            if declined.count > 1 { try transaction.prefetchStoredRecords(declined) }
            for offset in updates.indices {
                let save = saves[start + offset]
                outcome.saveResults.append(written[offset] ? .success((save.record, .updated)) : try self.save(save, tryingWithoutReading: false))
            }
            return updates.count
        }

        /// Saves one record the general way: read the stored record, apply the rules, check
        /// sizes and references, store assets, write. Unless `tryingWithoutReading` is false
        /// (the engine declined it already), a save that may be written without reading is
        /// tried that way first.
        private mutating func save(_ save: PreparedSave, tryingWithoutReading: Bool = true) throws -> Result<(Record, RecordWriteKind), StratusError> {
            let id = save.recordID
            guard try capabilities(id.zoneID) != nil else { return .failure(zoneNotFound(id)) }
            if tryingWithoutReading, try updateWithoutReading(save) { return .success((save.record, .updated)) }
            var existing = try transaction.storedRecord(id)
            if let conflict = Self.ownerConflict(save, existing: existing) { return .failure(conflict) }
            // Restoring a record that was deleted and made again with another type where it
            // comes from (a change feed gives only the new record): the stored one goes, without
            // cascades (the source's own deletions say what its cascade took), once the new one
            // passed every check as a new record: a refused save deletes nothing.
            var replacedOfOtherType: Record?
            if let stored = existing, stored.recordType != save.record.recordType, request.writeMode == .forceReplace, request.preservesSystemFields {
                if typeRules.checksDeletes, let denied = try typeRules.checkDelete(id, stored: stored, in: transaction) { return .failure(denied) }
                replacedOfOtherType = stored
                existing = nil
            }
            // Who created a record is told only to its readers: a save naming another type than
            // the stored record's is judged by that type, which may let the caller read it.
            let creator = if let existing, existing.recordType != save.record.recordType, try !typeRules.mayRead(existing, in: transaction) {
                Record.ID?.none
            } else {
                existing?.systemFields.creatorUserRecordID
            }
            if let denied = try typeRules.accessDenial(save, creator: creator, isNew: existing == nil, in: transaction) {
                // A save that would change nothing writes nothing: re-running an import of
                // records others created is not refused (and a refusal reveals no conflict),
                // when the caller may read them. No user writes nothing, changed or not.
                if denied.code != .notAuthenticated, let existing, try typeRules.mayRead(existing, in: transaction) {
                    if case .success(let same) = RecordWriteRules.resolve(save, existing: existing, mode: request.writeMode(for: save), preservingSystemFields: request.preservesSystemFields,
                                                                                 writingUnchanged: request.writesUnchangedRecords, context: context, now: now),
                       same.kind == .unchanged {
                        return .success((existing, .unchanged))
                    }
                } else if denied.code != .notAuthenticated, existing != nil, request.preservesSystemFields {
                    var denied = denied
                    denied.message += "; a restore of records others created that the importing user may not read runs as the store's administrator (--as-administrator)"
                    return .failure(denied)
                }
                return .failure(denied)
            }
            // What the type must grow to hold the record: grown only once the record is written,
            // so that a save refused below (a conflict, a missing record, a size, a parent)
            // changes no schema.
            let growth: RecordTypeRules.Growth?
            switch try typeRules.checkFields(save, in: transaction) {
            case .success(let needed): growth = needed
            case .failure(let problem): return .failure(problem)
            }
            // A caller who may write a stored record but not read it (a moderator's WRITE
            // grant) is answered with what it sent, never the stored record's other values.
            let readsStored = try existing.map { try typeRules.mayRead($0, in: transaction) } ?? true
            var resolution: RecordWriteRules.Resolution
            switch RecordWriteRules.resolve(save, existing: existing, mode: request.writeMode(for: save), preservingSystemFields: request.preservesSystemFields,
                                            keepingGivenVersion: request.keepsGivenVersion, writingUnchanged: request.writesUnchangedRecords,
                                            newRecordCreator: typeRules.systemCreator(of: save), context: context, now: now) {
            case .success(let resolved): resolution = resolved
            case .failure(var error):
                if !readsStored {
                    error.serverRecord = nil
                    // Nor the stored record's type.
                    if error.code == .invalidArguments, let existing, existing.recordType != save.record.recordType {
                        error = StratusError(.permissionFailure, "record '\(id.recordName)' exists, and the caller may not read it, so it cannot be saved as a record of type \(save.record.recordType)", recordID: id)
                    }
                }
                return .failure(error)
            }
            if shares.mustSee(save) || existing?.jsonExtras.isEmpty == false {
                let before = resolution.jsonExtras
                if ShareRules.isShare(save) {
                    if let problem = try shares.resolveShare(save, existing: existing, extras: &resolution.jsonExtras, in: transaction) { return .failure(problem) }
                } else {
                    shares.resolveRoot(save, existing: existing, extras: &resolution.jsonExtras)
                }
                if resolution.kind == .unchanged && resolution.jsonExtras != before {
                    resolution.kind = .updated
                    resolution.systemFields.recordChangeTag = RecordWriteRules.newChangeTag()
                    resolution.systemFields.modificationDate = now
                    resolution.systemFields.lastModifiedUserRecordID = context.userRecordID ?? resolution.systemFields.lastModifiedUserRecordID
                }
            }
            if resolution.kind == .unchanged, let existing {
                guard !readsStored else { return .success((existing, .unchanged)) }
                // To one who may write but not read, "unchanged" would confirm a guess of the
                // stored values: the save is written as a new version, as any other.
                resolution.kind = .updated
                resolution.systemFields.recordChangeTag = RecordWriteRules.newChangeTag()
                resolution.systemFields.modificationDate = now
                resolution.systemFields.lastModifiedUserRecordID = context.userRecordID ?? resolution.systemFields.lastModifiedUserRecordID
            }
            // A new record has the size its preparation checked; a merge with stored fields can grow.
            if resolution.kind != .created, case let size = Record.fieldDataSize(of: resolution.fields), size > Record.maximumFieldDataSize {
                return .failure(StratusError(.limitExceeded, "record '\(id.recordName)': with the stored fields it keeps, it would hold \(size) bytes of field data; the limit is \(Record.maximumFieldDataSize) bytes (assets excluded)", recordID: id))
            }
            let fieldTargets = Self.deleteSelfTargets(of: resolution.fields)
            if let problem = try referenceProblem(id, parent: resolution.parent, deleteSelfTargets: fieldTargets) { return .failure(problem) }
            let deleteSelfTargets = ShareRules.isShare(save) ? fieldTargets.union(ShareRules.deleteSelfTargets(ofShare: id.recordName, extras: resolution.jsonExtras)) : fieldTargets
            let fields = resolution.fields
            // Asset content is in the store before the transaction (AssetStaging): a row names
            // stored content or CloudKit's, never a file still to read.
            if fields.values.contains(where: \.needsAssetContent) {
                return .failure(StratusError(.internalError, "record '\(id.recordName)': an asset's content was not stored before the write", recordID: id))
            }
            // A new record stores its incoming values, whose document was prepared with it.
            let document = resolution.kind == .created && resolution.jsonExtras == save.jsonExtras ? save.document : nil
            let row = RecordRow(recordID: id, recordType: save.record.recordType, systemFields: resolution.systemFields, fields: fields,
                                encryptedKeys: resolution.encryptedKeys, parent: resolution.parent,
                                document: document ?? FieldDocument.encodedBytes(fields, encryptedKeys: resolution.encryptedKeys, jsonExtras: resolution.jsonExtras),
                                deleteSelfTargets: deleteSelfTargets, jsonExtras: resolution.jsonExtras)
            if let replaced = replacedOfOtherType {
                let seen = notifier.map { $0.needsStoredRecordBeforeDeleting(in: id.zoneID) ? replaced : nil } ?? nil
                if try transaction.deleteRecord(id) { notifier?.deleted(id, stored: seen) }
            }
            try transaction.writeRecord(row, replacing: existing != nil)
            let before = existing ?? replacedOfOtherType
            try hierarchy.saved(id, recordType: row.recordType, parentBefore: before?.parent?.recordID.recordName, parentAfter: row.parent?.recordID.recordName,
                                created: before == nil, in: transaction)
            if let growth { typeRules.grow(growth) }
            notifier?.saved(id, recordType: row.recordType, system: row.systemFields, fields: fields, parent: row.parent, created: existing == nil)
            guard request.returnsSavedRecords else { return .success((save.record, resolution.kind)) }
            if !readsStored { return .success((Self.withheld(save, system: row.systemFields), resolution.kind)) }
            let stored = Record.stored(recordType: row.recordType, recordID: id, systemFields: row.systemFields, fields: fields, parent: row.parent,
                                encryptedKeys: row.encryptedKeys, jsonExtras: row.jsonExtras)
            return .success((stored, resolution.kind))
        }

        /// Writes a save's changed fields over the stored record in one step, without reading
        /// it, when the save can only be that: a tagged record in a mode that merges changed
        /// keys into the record the tag names, whose values fit their declared fields, hold no
        /// asset or `.deleteSelf` reference and change neither parent, encryption nor JSON
        /// extras, with nobody to hand the stored record to (the caller, subscriptions).
        /// Answers false, having written nothing, for any other save, and when the stored
        /// record is not the one the tag names (changed since, gone, of another type, another
        /// creator's where only the creator may write, holding a parent or more than fields):
        /// the general way then reads it and reports what CloudKit would.
        private mutating func updateWithoutReading(_ save: PreparedSave) throws -> Bool {
            guard mayUpdateWithoutReading(save), let update = try storedRecordUpdate(save) else { return false }
            return try transaction.updateStoredRecord(update)
        }

        /// Whether the save, by itself and the request, may be written without reading
        /// (``updateWithoutReading(_:)``); the types' rules and the store decide the rest.
        private func mayUpdateWithoutReading(_ save: PreparedSave) -> Bool {
            request.writeMode.mergesChangedKeysOnly(changeTag: save.systemFields.recordChangeTag)
                && save.systemFields.recordChangeTag != nil && context.userRecordName != nil
                && !request.returnsSavedRecords && notifier == nil
                && !save.parentChanged && save.encryptedKeys.isEmpty && save.jsonExtras.isEmpty && !save.changesNeedStoredRecord && !ShareRules.isShare(save)
        }

        /// The engine's one-step update for a save that ``mayUpdateWithoutReading(_:)``, when
        /// the types' rules let it go without the stored record; `nil` otherwise.
        private mutating func storedRecordUpdate(_ save: PreparedSave) throws -> StoredRecordUpdate? {
            guard let tag = save.systemFields.recordChangeTag, let user = context.userRecordName else { return nil }
            // The merged record holds at most the stored field data and this save's.
            let room = Record.maximumFieldDataSize - save.fieldDataSize
            guard room > 0, let condition = try typeRules.writeCondition(save, in: transaction),
                  try typeRules.fitsDeclaredFields(save, in: transaction) else { return nil }
            let creator: String? = if case .creator(let name) = condition { name } else { nil }
            return StoredRecordUpdate(
                recordID: save.recordID, recordType: save.record.recordType, expectedChangeTag: tag, requiredCreatorRecordName: creator,
                maximumStoredDocumentLength: room / FieldDocument.maximumFieldDataPerCharacter, modificationDate: now,
                lastModifiedUserRecordName: user, changeTag: RecordWriteRules.newChangeTag(), changes: save.encodedChanges)
        }

        /// The record answered to a caller who may write a stored record but not read it: the
        /// values it sent and the version written, without the creator (who created a record is
        /// part of what only a reader is shown).
        static func withheld(_ save: PreparedSave, system: Record.SystemFields) -> Record {
            var system = system
            system.creatorUserRecordID = nil
            return Record.stored(recordType: save.record.recordType, recordID: save.recordID, systemFields: system, fields: save.fields, parent: save.parent,
                          encryptedKeys: save.encryptedKeys, jsonExtras: save.jsonExtras)
        }

        /// Two owners' zones of one name, both imported as the current user's zone (the input's
        /// owner kept for export, ``Record/JSONExtras/ownerRecordName``), are one zone here: a
        /// record of the second owner's would silently replace the first owner's record of that
        /// name. CloudKit tells such zones apart by their owner, so the second is refused.
        static func ownerConflict(_ save: PreparedSave, existing: Record?) -> StratusError? {
            guard let incoming = save.jsonExtras.ownerRecordName, let stored = existing?.jsonExtras.ownerRecordName, incoming != stored else { return nil }
            let id = save.recordID
            return StratusError(
                .invalidArguments,
                "record '\(id.recordName)' comes from zone '\(id.zoneID.zoneName)' of owner '\(incoming)', but the store's record of that name came from the zone of that name of owner '\(stored)': both were imported as the current user's zone '\(id.zoneID.zoneName)', where one would replace the other; import each owner's zones as a user of its own (--user) or into a store of its own",
                recordID: id)
        }

        /// A parent that does not exist (and was not saved earlier in this request) is a
        /// `referenceViolation`, except where records are restored as they were (system fields
        /// kept, tags not checked: an import, a copy, a mirror), as CloudKit's own data holds
        /// children whose parent was deleted since (a parent has no cascade) and parents that
        /// a later save made a cycle of; a record that would get more than 750 `.deleteSelf`
        /// references is `limitExceeded`. Checked before anything of the record is written.
        private func referenceProblem(_ id: Record.ID, parent: Record.Reference?, deleteSelfTargets: Set<String>) throws -> StratusError? {
            let restores = request.writeMode.restores(preservingSystemFields: request.preservesSystemFields)
            if let parent, !restores, try !transaction.recordExists(Record.ID(recordName: parent.recordID.recordName, zoneID: id.zoneID)) {
                return StratusError(.referenceViolation, "record '\(id.recordName)': its parent '\(parent.recordID.recordName)' does not exist in \(id.zoneID.zoneName) (nor was it saved by this request); save the parent first or in the same request", recordID: id)
            }
            for target in deleteSelfTargets {
                let existing = try transaction.deleteSelfReferenceCount(to: Record.ID(recordName: target, zoneID: id.zoneID), excludingSource: id.recordName)
                if existing >= RecordWriteExecutor.maximumDeleteSelfReferences {
                    return StratusError(.limitExceeded, "record '\(id.recordName)': record '\(target)' already has \(existing) .deleteSelf references; the limit is \(RecordWriteExecutor.maximumDeleteSelfReferences)", recordID: id)
                }
            }
            return nil
        }

        static func deleteSelfTargets(of fields: [String: FieldValue]) -> Set<String> {
            var targets: Set<String> = []
            for value in fields.values {
                switch value {
                case .reference(let r) where r.action == .deleteSelf: targets.insert(r.recordID.recordName)
                case .referenceList(let list): for r in list where r.action == .deleteSelf { targets.insert(r.recordID.recordName) }
                default: break
                }
            }
            return targets
        }

        // MARK: Deletes

        /// Deletes one record (a missing record is not an error) and, through chains, every
        /// record whose `.deleteSelf` reference points at a deleted one.
        private mutating func delete(_ id: Record.ID) throws -> Result<Bool, StratusError> {
            guard try capabilities(id.zoneID) != nil else { return .failure(zoneNotFound(id)) }
            // Cascades follow the references their sources chose to hold, as in CloudKit;
            // the roles decide only what the caller deletes itself.
            // The stored record, read once for the checks that need it.
            var read: Record?? = nil
            if typeRules.checksDeletes {
                let stored = try transaction.storedRecord(id)
                read = .some(stored)
                if let denied = try typeRules.checkDelete(id, stored: stored, in: transaction) { return .failure(denied) }
            }
            // After the roles, so that a refusal reveals no version; the stored record is not
            // handed back, as the caller may not be allowed to read it.
            if let tag = request.deletedRecordTags[id], let stored = try read.map({ $0?.recordChangeTag }) ?? transaction.storedChangeTag(id), stored != tag {
                return .failure(StratusError(.serverRecordChanged, "record '\(id.recordName)' was changed by someone else after it was read (change tag \(tag); the store has \(stored)), so it was not deleted: it may no longer be what was selected", recordID: id))
            }
            if let owner = request.deletedRecordOwners[id], let stored = try (read ?? transaction.storedRecord(id))?.jsonExtras.ownerRecordName, stored != owner {
                return .failure(StratusError(
                    .invalidArguments,
                    "the deletion of record '\(id.recordName)' comes from zone '\(id.zoneID.zoneName)' of owner '\(owner)', but the store's record of that name came from the zone of that name of owner '\(stored)': both were imported as the current user's zone '\(id.zoneID.zoneName)', and that owner's record is not deleted; import each owner's zones as a user of its own (--user) or into a store of its own",
                    recordID: id))
            }
            // A share is read before it goes, so that its root stops naming it.
            if read == nil, try shares.mayDeleteRecordShares(in: id.zoneID, transaction) { read = .some(try transaction.storedRecord(id)) }
            let deletedShare = read.flatMap { $0 }.flatMap { $0.recordType == Record.SystemType.share ? $0 : nil }
            var pending = [id.recordName]
            var seen: Set<String> = []
            var deletedRoot = false
            while let name = pending.popLast() {
                guard seen.insert(name).inserted else { continue }
                let target = Record.ID(recordName: name, zoneID: id.zoneID)
                // Subscriptions that must see the record (its type, its values) read it first.
                let stored = try notifier.map { try $0.needsStoredRecordBeforeDeleting(in: target.zoneID) ? transaction.storedRecord(target) : nil } ?? nil
                // In a zone shared record by record, the record and what was below it leave its hierarchies.
                let tracked = try hierarchy.tracks(target.zoneID, in: transaction) ? try stored ?? transaction.storedRecord(target) : nil
                guard try transaction.deleteRecord(target) else { continue }
                if let tracked { hierarchy.deleted(target, stored: tracked) }
                notifier?.deleted(target, stored: stored)
                if name == id.recordName { deletedRoot = true } else { outcome.cascadeDeletedIDs.append(target) }
                // A share its root's deletion takes along leaves the index with it: row-level
                // security reads the index, and would reach a record made later under the name.
                if name != id.recordName, try shares.mayDeleteRecordShares(in: target.zoneID, transaction) {
                    try ShareRules.unindexDeletedShare(target, context: context, in: transaction)
                }
                pending.append(contentsOf: try transaction.deleteSelfSources(of: target))
            }
            if deletedRoot, let deletedShare { try unlinkRoot(of: deletedShare) }
            if deletedRoot, deletedShare != nil || id.recordName == Share.zoneWideShareName {
                try ShareRules.unindexDeletedShare(id, context: context, in: transaction)
            }
            return .success(deletedRoot)
        }

        /// Clears the `share` member of a deleted share's root, as a new version of the root
        /// (CloudKit clears `record.share` when the share is deleted); a root this request
        /// saved or deleted already needs nothing.
        private mutating func unlinkRoot(of share: Record) throws {
            guard let rootName = StoredShare(share.jsonExtras).rootRecordName else { return }
            let rootID = Record.ID(recordName: rootName, zoneID: share.recordID.zoneID)
            guard let root = try transaction.storedRecord(rootID), root.share?.recordID.recordName == share.recordID.recordName else { return }
            var extras = root.jsonExtras
            extras.members[StoredShare.shareMember] = nil
            var system = root.systemFields
            system.recordChangeTag = RecordWriteRules.newChangeTag()
            system.modificationDate = now
            system.lastModifiedUserRecordID = context.userRecordID ?? system.lastModifiedUserRecordID
            let fields = root.fieldValues
            let row = RecordRow(recordID: rootID, recordType: root.recordType, systemFields: system, fields: fields, encryptedKeys: root.encryptedKeys,
                                parent: root.parent, document: FieldDocument.encodedBytes(fields, encryptedKeys: root.encryptedKeys, jsonExtras: extras),
                                deleteSelfTargets: Self.deleteSelfTargets(of: fields), jsonExtras: extras)
            try transaction.writeRecord(row, replacing: true)
            notifier?.saved(rootID, recordType: row.recordType, system: system, fields: fields, parent: row.parent, created: false)
        }
    }
}

extension ModifyOutcome {
    /// After an atomic rollback, items that had succeeded report `batchRequestFailed`.
    mutating func relabelForAtomicFailure(saves: [Record.ID], deletes: [Record.ID]) {
        for (index, result) in saveResults.enumerated() {
            if case .success = result { saveResults[index] = .failure(RecordWriteExecutor.batchFailed(saves[index])) }
        }
        for (index, result) in deleteResults.enumerated() {
            if case .success = result { deleteResults[index] = .failure(RecordWriteExecutor.batchFailed(deletes[index])) }
        }
        cascadeDeletedIDs = []
        releasedAssetContents = []
    }
}

extension FieldValue {
    /// Whether saving the value stores asset contents or `.deleteSelf` references, whose side
    /// effects need the general path.
    var needsStoredRecordFirst: Bool {
        switch self {
        case .asset, .assetList: true
        case .reference(let r): r.action == .deleteSelf
        case .referenceList(let list): list.contains { $0.action == .deleteSelf }
        default: false
        }
    }

    /// Whether the value holds an asset whose content is still to be read from a file.
    var needsAssetContent: Bool {
        switch self {
        case .asset(let asset): asset.needsContent
        case .assetList(let assets): assets.contains(where: \.needsContent)
        default: false
        }
    }
}
