import Foundation
import Synchronization

/// How a ``SyncEngine`` talks to your app, as `CKSyncEngineDelegate`: it hands over events one
/// at a time and asks for the record changes to send.
///
/// Do not `await` ``SyncEngine/fetchChanges(_:)`` or ``SyncEngine/sendChanges(_:)`` inside
/// ``handleEvent(_:syncEngine:)``: they wait for their own events, which wait for the handler to
/// return. Start them in a detached task instead.
///
/// ```swift
/// final actor Contacts: SyncEngineDelegate {
///     func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async { … }
///     func nextRecordZoneChangeBatch(_ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine) async -> SyncEngine.RecordZoneChangeBatch? {
///         let pending = syncEngine.state.pendingRecordZoneChanges.filter { context.options.scope.contains($0) }
///         return await SyncEngine.RecordZoneChangeBatch(pendingChanges: pending) { id in await self.record(for: id) }
///     }
/// }
/// ```
public protocol SyncEngineDelegate: AnyObject, Sendable {
    /// Called for each event, in order; the next event waits for this one to return.
    func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async
    /// The next batch of record changes to send, or `nil` when there is nothing more to send.
    func nextRecordZoneChangeBatch(_ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine) async -> SyncEngine.RecordZoneChangeBatch?
    /// The options to fetch the next zone with; by default the context's.
    func nextFetchChangesOptions(_ context: SyncEngine.FetchChangesContext, syncEngine: SyncEngine) async -> SyncEngine.FetchChangesOptions
}

extension SyncEngineDelegate {
    public func nextFetchChangesOptions(_ context: SyncEngine.FetchChangesContext, syncEngine: SyncEngine) async -> SyncEngine.FetchChangesOptions {
        context.options
    }
}

/// Keeps a local copy of a database in step with the store, as `CKSyncEngine`: it fetches the
/// changes of the database's zones since its saved tokens, sends the app's pending changes
/// (zones first, then the record batches the delegate builds), and reports everything to the
/// delegate as ``Event``s, the state to keep among them.
///
/// ```swift
/// var configuration = SyncEngine.Configuration(database: container.privateCloudDatabase,
///                                              stateSerialization: savedState, delegate: self)
/// configuration.automaticallySync = false
/// let syncEngine = SyncEngine(configuration)
/// syncEngine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneName: "Contacts"))])
/// syncEngine.state.add(pendingRecordZoneChanges: [.saveRecord(contactID)])
/// try await syncEngine.sendChanges()
/// try await syncEngine.fetchChanges()
/// ```
///
/// What differs from CloudKit: a Linux server gets no push notifications, so an engine that
/// syncs by itself sends soon after changes are added, fetches when it starts, and then asks
/// the store every ``Configuration/changePollInterval`` seconds (10 by default) whether other
/// devices changed anything, fetching when they did; ``fetchChanges(_:)`` fetches at once.
/// Transient errors (`networkFailure`, `serviceUnavailable`, `zoneBusy`, `requestRateLimited`,
/// …) keep their changes pending; an engine that syncs by itself tries again after the
/// error's `retryAfterSeconds` (5 s when it gives none).
public final class SyncEngine: Sendable, CustomStringConvertible {
    /// How an engine is set up, as `CKSyncEngine.Configuration`.
    ///
    /// ```swift
    /// var configuration = SyncEngine.Configuration(database: database, stateSerialization: nil, delegate: delegate)
    /// configuration.automaticallySync = false   // tests drive fetches and sends themselves
    /// ```
    public struct Configuration: Sendable, CustomStringConvertible {
        /// The database to sync: a private or shared database.
        public var database: Database
        /// The state last received in an ``Event/stateUpdate(_:)``, or `nil` the first time.
        public var stateSerialization: State.Serialization?
        /// Receives the engine's events; the engine holds it weakly, so that an app object that
        /// holds the engine makes no cycle.
        public var delegate: any SyncEngineDelegate
        /// Whether the engine sends added changes and fetches at start by itself (default true).
        public var automaticallySync = true
        /// Kept for CloudKit code that names its database subscription; Stratus makes none.
        public var subscriptionID: Subscription.ID?
        /// How often an engine that syncs by itself asks the store whether other devices
        /// changed anything, in seconds (Stratus's stand-in for CloudKit's push; not in
        /// CloudKit's API). It fetches only when something changed; `nil` (or `.infinity`) never
        /// asks. Taken as at least 0.01 and at most 86,400 (a day).
        ///
        /// ```swift
        /// configuration.changePollInterval = 2
        /// ```
        public var changePollInterval: Double? = 10

        /// A configuration for syncing `database`, starting from the state saved last time (nil on
        /// first launch), reporting to `delegate`, as `CKSyncEngine.Configuration`'s initialiser.
        ///
        /// ```swift
        /// let configuration = SyncEngine.Configuration(database: container.privateCloudDatabase, stateSerialization: savedState, delegate: self)
        /// let engine = SyncEngine(configuration)
        /// ```
        public init(database: Database, stateSerialization: State.Serialization?, delegate: any SyncEngineDelegate) {
            self.database = database
            self.stateSerialization = stateSerialization
            self.delegate = delegate
        }

        public var description: String {
            "SyncEngine.Configuration(\(database.databaseScope.name) database, automaticallySync: \(automaticallySync))"
        }
    }

    /// The database the engine syncs.
    public let database: Database
    /// What the engine keeps between runs; add the changes to send here.
    public let state: State
    private let delegateReference: WeakDelegate
    private let automaticallySync: Bool
    private let changePollInterval: Double?
    private let gate = SyncGate()
    private let schedule = Mutex(Schedule())
    /// The problem with the state serialization given, reported by the first sync.
    private let unreadableState: StratusError?

    /// Errors the engine keeps changes pending for, and tries again after, as CloudKit's does.
    static let transientCodes: Set<StratusError.Code> = [
        .notAuthenticated, .accountTemporarilyUnavailable, .networkFailure, .networkUnavailable,
        .requestRateLimited, .serviceUnavailable, .zoneBusy, .operationCancelled, .batchRequestFailed,
    ]

    private struct Schedule {
        var sendTask: Task<Void, Never>?
        var fetchTask: Task<Void, Never>?
        var stateUpdateTask: Task<Void, Never>?
        var pollTask: Task<Void, Never>?

        /// The syncs scheduled by ``SyncEngine/schedule(_:after:_:)``.
        enum Slot: Sendable { case send, fetch }

        subscript(slot: Slot) -> Task<Void, Never>? {
            get { slot == .send ? sendTask : fetchTask }
            set { if slot == .send { sendTask = newValue } else { fetchTask = newValue } }
        }
        /// Raised by ``cancelOperations()``: a running fetch or send stops at its next step.
        var generation = 0
    }

    /// Starts an engine; one that syncs by itself fetches at once and sends what is pending.
    public init(_ configuration: Configuration) {
        database = configuration.database
        delegateReference = WeakDelegate(configuration.delegate)
        automaticallySync = configuration.automaticallySync
        // NaN and infinity never poll (`nil`); at most once a day is as good as never, and keeps
        // the nanoseconds within UInt64.
        changePollInterval = configuration.changePollInterval.flatMap { $0.isFinite ? min(max($0, 0.01), 86_400) : nil }
        var stored = Stored()
        var unreadable: StratusError?
        if let serialization = configuration.stateSerialization {
            do {
                stored = try serialization.decoded()
            } catch {
                let reason = (error as? StratusError)?.message ?? "\(error)"
                unreadable = StratusError(.invalidArguments, "the sync engine's state serialization cannot be read (\(reason)); start with nil to fetch everything again")
            }
        }
        unreadableState = unreadable
        state = State(stored)
        let stateChanged: @Sendable () -> Void = { [weak self] in self?.stateChangedByApp() }
        state.changed.withLock { $0 = stateChanged }
        if automaticallySync {
            scheduleFetch(after: 0)
            if !stored.pendingRecordZoneChanges.isEmpty || !stored.pendingDatabaseChanges.isEmpty || stored.hasPendingUntrackedChanges {
                scheduleSend(after: 0)
            }
            startPolling()
        }
    }

    deinit {
        schedule.withLock { schedule in
            schedule.sendTask?.cancel()
            schedule.fetchTask?.cancel()
            schedule.pollTask?.cancel()
        }
    }

    public var description: String { "SyncEngine(\(database.databaseScope.name) database, \(state))" }

    // MARK: - Fetching

    /// Fetches the database's changes since the state's tokens now, and returns once the
    /// delegate has handled every event of the fetch.
    ///
    /// ```swift
    /// try await syncEngine.fetchChanges()
    /// ```
    ///
    /// - Throws: `notAuthenticated` with no signed-in user; `invalidArguments` for the public
    ///   database or an unreadable state; `operationCancelled` after ``cancelOperations()``;
    ///   the first error of a zone's fetch other than its deletion (the other zones are fetched).
    public func fetchChanges(_ options: FetchChangesOptions = FetchChangesOptions()) async throws {
        try await fetch(options, reason: .manual)
    }

    private func fetch(_ options: FetchChangesOptions, reason: SyncReason) async throws {
        try await syncTurn { generation in try await fetchInTurn(options, reason: reason, generation: generation) }
    }

    /// Runs one fetch or send: one at a time, in the order they asked, after the account check.
    /// The generation is read before waiting, so that ``cancelOperations()`` made while this
    /// waits for another sync cancels it too.
    private func syncTurn(_ body: (_ generation: Int) async throws -> Void) async throws {
        let generation = currentGeneration
        await gate.enter()
        defer { gate.leave() }
        try checkNotCancelled(since: generation)
        try await beginSync()
        try await body(generation)
    }

    private func fetchInTurn(_ options: FetchChangesOptions, reason: SyncReason, generation: Int) async throws {
        let context = FetchChangesContext(reason: reason, options: options)
        // The engine's requests run in the options' operation group.
        let requests = Database(database, configuration: nil, group: options.operationGroup)
        await emit(.willFetchChanges(Event.WillFetchChanges(context: context)))
        var firstError: StratusError?
        do {
            try await fetchDatabaseChanges(requests, generation: generation)
            var options = options
            var fetched = Set<RecordZone.ID>()
            while true {
                try checkNotCancelled(since: generation)
                if let delegate = delegateReference.delegate {
                    options = await delegate.nextFetchChangesOptions(FetchChangesContext(reason: reason, options: options), syncEngine: self)
                }
                // The default zone is left out also where a state saved by an earlier version names it.
                let waiting = state.zoneIDsWithUnfetchedServerChanges.filter { !$0.isDefault && options.scope.contains($0) && !fetched.contains($0) }
                guard let zoneID = options.prioritizedZoneIDs.first(where: waiting.contains) ?? waiting.first else { break }
                fetched.insert(zoneID)
                if let error = try await fetchZone(zoneID, requests, generation: generation), firstError == nil { firstError = error }
            }
        } catch {
            await emitStateUpdateIfNeeded()
            await emit(.didFetchChanges(Event.DidFetchChanges(context: context)))
            throw error
        }
        await emitStateUpdateIfNeeded()
        await emit(.didFetchChanges(Event.DidFetchChanges(context: context)))
        if let firstError { throw firstError }
    }

    private func fetchDatabaseChanges(_ requests: Database, generation: Int) async throws {
        var expiredOnce = false
        var token = state.stored.withLock { $0.databaseToken }
        // A fetch from no token (a new engine, or one whose token expired because the history
        // was compacted or the development environment was reset) lists every zone there is,
        // and reports no deletion: the zones the engine knows that the whole listing leaves out
        // are gone. Its token is kept only once the listing is whole, so that one interrupted
        // (cancelled, failed, the app killed) starts again from the beginning next time.
        var listing = token == nil
        var listed: Set<RecordZone.ID> = []
        while true {
            try checkNotCancelled(since: generation)
            let changes: (modifications: [Database.DatabaseChange.Modification], deletions: [Database.DatabaseChange.Deletion], changeToken: ServerChangeToken, moreComing: Bool)
            do {
                changes = try await requests.databaseChanges(since: token)
            } catch let error as StratusError where error.code == .changeTokenExpired && !expiredOnce {
                // Start over, as CloudKit's engine does.
                expiredOnce = true
                token = nil
                listing = true
                listed = []
                state.stored.withLock { $0.databaseToken = nil; $0.needsUpdateEvent = true }
                continue
            }
            let whole = !changes.moreComing
            // CloudKit's default zone keeps no change history, so its engine never fetches it: a
            // delegate written for custom zones would take records other code keeps there for its own.
            var modifications = changes.modifications.filter { !$0.zoneID.isDefault }
            if listing { listed.formUnion(modifications.map(\.zoneID)) }
            if database.databaseScope == .shared {
                var changed: [Database.DatabaseChange.Modification] = []
                for modification in modifications where await hasNewChanges(in: modification.zoneID, requests) { changed.append(modification) }
                modifications = changed
            }
            state.stored.withLock { stored in
                for deletion in changes.deletions {
                    stored.zoneIDsWithUnfetchedServerChanges.removeAll { $0 == deletion.zoneID }
                    stored.setToken(nil, for: deletion.zoneID)
                }
                for modification in modifications where !stored.zoneIDsWithUnfetchedServerChanges.contains(modification.zoneID) {
                    stored.zoneIDsWithUnfetchedServerChanges.append(modification.zoneID)
                }
                if !listing || whole { stored.databaseToken = changes.changeToken }
                stored.needsUpdateEvent = true
            }
            token = changes.changeToken
            if !modifications.isEmpty || !changes.deletions.isEmpty {
                await emit(.fetchedDatabaseChanges(Event.FetchedDatabaseChanges(modifications: modifications, deletions: changes.deletions)))
            }
            if whole && listing { await reportZonesLeftOut(of: listed) }
            await emitStateUpdateIfNeeded()
            if whole { return }
        }
    }

    /// Reports as deleted the zones the engine knows (by their tokens, or as waiting to be
    /// fetched) that a whole listing from no token left out: without this the delegate would
    /// keep the records of zones deleted while the history was compacted, or of every zone a
    /// reset of the development environment removed.
    private func reportZonesLeftOut(of listed: Set<RecordZone.ID>) async {
        let gone = state.stored.withLock { stored -> [RecordZone.ID] in
            var known = stored.zoneTokens.map(\.zoneID)
            for zoneID in stored.zoneIDsWithUnfetchedServerChanges where !known.contains(zoneID) { known.append(zoneID) }
            let gone = known.filter { !$0.isDefault && !listed.contains($0) }
            for zoneID in gone {
                stored.zoneIDsWithUnfetchedServerChanges.removeAll { $0 == zoneID }
                stored.setToken(nil, for: zoneID)
            }
            if !gone.isEmpty { stored.needsUpdateEvent = true }
            return gone
        }
        guard !gone.isEmpty else { return }
        await emit(.fetchedDatabaseChanges(Event.FetchedDatabaseChanges(modifications: [], deletions: gone.map { Database.DatabaseChange.Deletion(zoneID: $0) })))
    }

    /// Fetches one zone's changes; answers the error it ended with (a deleted zone ends
    /// quietly: the database's changes report its deletion).
    private func fetchZone(_ zoneID: RecordZone.ID, _ requests: Database, generation: Int) async throws -> StratusError? {
        await emit(.willFetchRecordZoneChanges(Event.WillFetchRecordZoneChanges(zoneID: zoneID)))
        var failure: StratusError?
        var expiredOnce = false
        while true {
            do {
                try checkNotCancelled(since: generation)
                let token = state.stored.withLock { $0.token(for: zoneID) }
                let batch = try await requests.zoneChangeBatch(inZoneWith: zoneID, since: token, desiredKeys: nil, resultsLimit: nil)
                // In commit order, oldest first, as CloudKit's engine typically delivers them
                // (a dictionary by record ID would shuffle them).
                var modifications: [Database.RecordZoneChange.Modification] = []
                var deletions: [Database.RecordZoneChange.Deletion] = []
                for change in batch.changes {
                    switch change {
                    case .changed(let record): modifications.append(Database.RecordZoneChange.Modification(record: record))
                    case .deleted(let id, let type): deletions.append(Database.RecordZoneChange.Deletion(recordID: id, recordType: type))
                    }
                }
                if !modifications.isEmpty || !deletions.isEmpty {
                    await emit(.fetchedRecordZoneChanges(Event.FetchedRecordZoneChanges(modifications: modifications, deletions: deletions)))
                }
                state.stored.withLock { stored in
                    stored.setToken(batch.changeToken, for: zoneID)
                    if !batch.moreComing { stored.zoneIDsWithUnfetchedServerChanges.removeAll { $0 == zoneID } }
                    stored.needsUpdateEvent = true
                }
                await emitStateUpdateIfNeeded()
                if !batch.moreComing { break }
            } catch let error as StratusError where error.code == .changeTokenExpired && !expiredOnce {
                expiredOnce = true
                state.stored.withLock { $0.setToken(nil, for: zoneID); $0.needsUpdateEvent = true }
            } catch let error as StratusError where error.code == .zoneNotFound || error.code == .userDeletedZone {
                state.stored.withLock { stored in
                    stored.setToken(nil, for: zoneID)
                    stored.zoneIDsWithUnfetchedServerChanges.removeAll { $0 == zoneID }
                    stored.needsUpdateEvent = true
                }
                failure = error
                break
            } catch let error as StratusError {
                await emit(.didFetchRecordZoneChanges(Event.DidFetchRecordZoneChanges(zoneID: zoneID, error: error)))
                if error.code == .operationCancelled { throw error }
                return error
            }
        }
        await emit(.didFetchRecordZoneChanges(Event.DidFetchRecordZoneChanges(zoneID: zoneID, error: failure)))
        return nil
    }

    // MARK: - Sending

    /// Sends the pending changes now: zone changes first, then the delegate's record batches
    /// until it answers `nil`, and returns once the delegate has handled every event.
    ///
    /// A change that fails leaves the pending list (the delegate decides, in
    /// ``Event/sentRecordZoneChanges(_:)``, whether to add it again), except after a transient
    /// error; a change added again while the send runs is sent by the next one (also when its
    /// older version was saved: the new edit stays pending). Each record is tried once per
    /// send, so when every change of the delegate's next batch was tried already (failed with a
    /// transient error, say) the send ends there, and the changes after them wait for the next.
    ///
    /// ```swift
    /// try await syncEngine.sendChanges()
    /// ```
    ///
    /// - Throws: `partialFailure` naming each record and zone that failed; `notAuthenticated`
    ///   with no signed-in user; `operationCancelled` after ``cancelOperations()``.
    public func sendChanges(_ options: SendChangesOptions = SendChangesOptions()) async throws {
        try await send(options, reason: .manual)
    }

    private func send(_ options: SendChangesOptions, reason: SyncReason) async throws {
        try await syncTurn { generation in try await sendInTurn(options, reason: reason, generation: generation) }
    }

    private func sendInTurn(_ options: SendChangesOptions, reason: SyncReason, generation: Int) async throws {
        let hasWork = state.stored.withLock { stored in
            stored.hasPendingUntrackedChanges
                || stored.pendingDatabaseChanges.contains { options.scope.containsZone($0.zoneID) }
                || stored.pendingRecordZoneChanges.contains { options.scope.contains($0) }
        }
        guard hasWork else {
            await emitStateUpdateIfNeeded()
            return
        }
        let context = SendChangesContext(reason: reason, options: options)
        let requests = Database(database, configuration: nil, group: options.operationGroup)
        await emit(.willSendChanges(Event.WillSendChanges(context: context)))
        var failures = SendFailures()
        do {
            var attempted = Set<Record.ID>()
            var attemptedZones = Set<RecordZone.ID>()
            while true {
                try await sendDatabaseChanges(options.scope, requests, attempted: &attemptedZones, failures: &failures, generation: generation)
                try checkNotCancelled(since: generation)
                // What the app has added so far: a change it adds again from here on is a newer
                // edit, which this batch's success does not settle.
                let versions = state.stored.withLock { $0.recordChangeVersions }
                guard let delegate = delegateReference.delegate,
                      var batch = await delegate.nextRecordZoneChangeBatch(context, syncEngine: self) else {
                    if case .all = options.scope { state.stored.withLock { $0.hasPendingUntrackedChanges = false } }
                    break
                }
                // A change the app adds again while this send runs (after a conflict, say) waits for
                // the next send, as CloudKit's engine does: each record is tried once per send.
                batch.recordsToSave.removeAll { attempted.contains($0.recordID) }
                batch.recordIDsToDelete.removeAll { attempted.contains($0) }
                guard !batch.recordsToSave.isEmpty || !batch.recordIDsToDelete.isEmpty else { break }
                attempted.formUnion(batch.recordsToSave.map(\.recordID))
                attempted.formUnion(batch.recordIDsToDelete)
                try await sendRecordBatch(batch, requests, versions: versions, failures: &failures, generation: generation)
            }
        } catch {
            await emitStateUpdateIfNeeded()
            await emit(.didSendChanges(Event.DidSendChanges(context: context)))
            throw error
        }
        await emitStateUpdateIfNeeded()
        await emit(.didSendChanges(Event.DidSendChanges(context: context)))
        if automaticallySync, let retryAfter = failures.retryAfter { scheduleSend(after: retryAfter) }
        if let error = failures.error { throw error }
    }

    private struct SendFailures {
        var byRecordID: [Record.ID: StratusError] = [:]
        var byZoneID: [RecordZone.ID: StratusError] = [:]
        var retryAfter: Double?

        /// Keeps a failed item's error, and when it is transient, how long to wait before trying again.
        mutating func note(_ error: StratusError, record: Record.ID? = nil, zone: RecordZone.ID? = nil) {
            if let record { byRecordID[record] = error }
            if let zone { byZoneID[zone] = error }
            guard SyncEngine.transientCodes.contains(error.code) else { return }
            retryAfter = max(retryAfter ?? 0, error.retryAfterSeconds ?? 5)
        }

        var error: StratusError? {
            guard !byRecordID.isEmpty || !byZoneID.isEmpty else { return nil }
            var error = StratusError(.partialFailure, "\(byRecordID.count) record change(s) and \(byZoneID.count) zone change(s) failed to send", partialErrors: byRecordID)
            error.partialErrorsByZoneID = byZoneID
            error.retryAfterSeconds = retryAfter
            return error
        }
    }

    /// One item's outcome in a request: its own result, else the whole request's failure, else
    /// an internal error for a result the request did not give.
    private static func outcome<Value>(_ result: Result<Value, any Error>?, _ requestFailure: StratusError?, missing: @autoclosure () -> StratusError) -> Result<Value, StratusError> {
        if let result { return result.mapError(stratusError) }
        return .failure(requestFailure ?? missing())
    }

    /// Whether an outcome takes its change off the pending list: a success does, and so does a
    /// failure the app must resolve; a transient failure keeps it for the next send.
    private static func settles<Value>(_ outcome: Result<Value, StratusError>) -> Bool {
        guard case .failure(let error) = outcome else { return true }
        return !transientCodes.contains(error.code)
    }

    private func sendDatabaseChanges(_ scope: SendChangesOptions.Scope, _ requests: Database, attempted: inout Set<RecordZone.ID>, failures: inout SendFailures, generation: Int) async throws {
        while true {
            try checkNotCancelled(since: generation)
            let changes = state.pendingDatabaseChanges.filter { scope.containsZone($0.zoneID) && !attempted.contains($0.zoneID) }
                .prefix(RecordZoneChangeBatch.maximumChangeCount)
            guard !changes.isEmpty else { return }
            attempted.formUnion(changes.map(\.zoneID))
            var zonesToSave: [RecordZone] = []
            var zonesToDelete: [RecordZone.ID] = []
            for change in changes {
                switch change {
                case .saveZone(let zone): zonesToSave.append(zone)
                case .deleteZone(let id): zonesToDelete.append(id)
                }
            }
            var results: (saveResults: [RecordZone.ID: Result<RecordZone, any Error>], deleteResults: [RecordZone.ID: Result<Void, any Error>]) = ([:], [:])
            var requestFailure: StratusError?
            do {
                results = try await requests.modifyRecordZones(saving: zonesToSave, deleting: zonesToDelete)
            } catch {
                requestFailure = Self.stratusError(error)
            }
            var saved: [RecordZone] = [], failedSaves: [Event.SentDatabaseChanges.FailedZoneSave] = []
            var deleted: [RecordZone.ID] = [], failedDeletes: [RecordZone.ID: StratusError] = [:]
            var settled: [PendingDatabaseChange] = []
            for zone in zonesToSave {
                let outcome = Self.outcome(results.saveResults[zone.zoneID], requestFailure, missing: Self.noResult(zone: zone.zoneID))
                switch outcome {
                case .success(let stored): saved.append(stored)
                case .failure(let error):
                    failedSaves.append(.init(zone: zone, error: error))
                    failures.note(error, zone: zone.zoneID)
                }
                if Self.settles(outcome) { settled.append(.saveZone(zone)) }
            }
            for id in zonesToDelete {
                let outcome = Self.outcome(results.deleteResults[id], requestFailure, missing: Self.noResult(zone: id))
                switch outcome {
                case .success: deleted.append(id)
                case .failure(let error):
                    failedDeletes[id] = error
                    failures.note(error, zone: id)
                }
                if Self.settles(outcome) { settled.append(.deleteZone(id)) }
            }
            state.stored.withLock { stored in
                _ = stored.remove(settled)
                for id in deleted { stored.setToken(nil, for: id); stored.zoneIDsWithUnfetchedServerChanges.removeAll { $0 == id } }
                stored.needsUpdateEvent = true
            }
            await emit(.sentDatabaseChanges(Event.SentDatabaseChanges(savedZones: saved, failedZoneSaves: failedSaves, deletedZoneIDs: deleted, failedZoneDeletes: failedDeletes)))
            await emitStateUpdateIfNeeded()
        }
    }

    private func sendRecordBatch(_ batch: RecordZoneChangeBatch, _ requests: Database, versions: [Record.ID: Int], failures: inout SendFailures, generation: Int) async throws {
        try checkNotCancelled(since: generation)
        var results: (saveResults: [Record.ID: Result<Record, any Error>], deleteResults: [Record.ID: Result<Void, any Error>]) = ([:], [:])
        var requestFailure: StratusError?
        do {
            results = try await requests.modifyRecords(saving: batch.recordsToSave, deleting: batch.recordIDsToDelete,
                                                       savePolicy: .ifServerRecordUnchanged, atomically: batch.atomicByZone, throwsAtomicFailure: false)
        } catch {
            requestFailure = Self.stratusError(error)
        }
        var saved: [Record] = [], failedSaves: [Event.SentRecordZoneChanges.FailedRecordSave] = []
        var deleted: [Record.ID] = [], failedDeletes: [Record.ID: StratusError] = [:]
        var settled: [PendingRecordZoneChange] = []
        for record in batch.recordsToSave {
            let id = record.recordID
            let outcome = Self.outcome(results.saveResults[id], requestFailure, missing: Self.noResult(record: id))
            switch outcome {
            case .success(let stored): saved.append(stored)
            case .failure(let error):
                failedSaves.append(.init(record: record, error: error))
                failures.note(error, record: id)
            }
            if Self.settles(outcome) { settled.append(.saveRecord(id)) }
        }
        for id in batch.recordIDsToDelete {
            let outcome = Self.outcome(results.deleteResults[id], requestFailure, missing: Self.noResult(record: id))
            switch outcome {
            case .success: deleted.append(id)
            case .failure(let error):
                failedDeletes[id] = error
                failures.note(error, record: id)
            }
            if Self.settles(outcome) { settled.append(.deleteRecord(id)) }
        }
        state.stored.withLock { stored in
            stored.remove(settled, ifUnchangedSince: versions)
            stored.needsUpdateEvent = true
        }
        await emit(.sentRecordZoneChanges(Event.SentRecordZoneChanges(savedRecords: saved, failedRecordSaves: failedSaves, deletedRecordIDs: deleted, failedRecordDeletes: failedDeletes)))
        await emitStateUpdateIfNeeded()
    }

    private static func noResult(zone: RecordZone.ID) -> StratusError {
        StratusError(.internalError, "the store gave no result for zone '\(zone.zoneName)'", zoneID: zone)
    }

    private static func noResult(record: Record.ID) -> StratusError {
        StratusError(.internalError, "the store gave no result for record '\(record.recordName)'", recordID: record)
    }

    // MARK: - Cancelling

    /// Stops the scheduled syncs and makes a running fetch or send stop at its next step
    /// (`operationCancelled`); a request already sent completes. Pending changes stay.
    ///
    /// ```swift
    /// await syncEngine.cancelOperations()
    /// ```
    public func cancelOperations() async {
        schedule.withLock { schedule in
            schedule.generation += 1
            schedule.sendTask?.cancel()
            schedule.fetchTask?.cancel()
            schedule.sendTask = nil
            schedule.fetchTask = nil
        }
    }

    private var currentGeneration: Int { schedule.withLock { $0.generation } }

    private func checkNotCancelled(since generation: Int) throws {
        if currentGeneration != generation || Task.isCancelled {
            throw StratusError(.operationCancelled, "the sync engine's operations were cancelled")
        }
    }

    // MARK: - Shared steps

    /// Checks the state and the account before a sync: reports a change of user (and clears
    /// the previous user's state), refuses the public database and a database without a user.
    private func beginSync() async throws {
        if let unreadableState { throw unreadableState }
        guard database.databaseScope != .public else {
            throw StratusError(.invalidArguments, "a sync engine syncs a private or shared database; the public database has no zones of its own to track")
        }
        let current: String?
        do {
            current = try database.resolvedContext().userRecordName
        } catch let error as StratusError where error.code == .notAuthenticated {
            current = nil
        }
        let previous = state.stored.withLock { $0.userRecordName }
        if previous != current {
            let change: Event.AccountChange.ChangeType? = switch (previous, current) {
            case (nil, let now?): .signIn(currentUser: Record.ID(recordName: now))
            case (let before?, nil): .signOut(previousUser: Record.ID(recordName: before))
            case (let before?, let now?): .switchAccounts(previousUser: Record.ID(recordName: before), currentUser: Record.ID(recordName: now))
            case (nil, nil): nil
            }
            state.stored.withLock { stored in
                if previous == nil {
                    // The first sync with a user keeps the changes the app added before it.
                    stored.userRecordName = current
                    stored.needsUpdateEvent = true
                } else {
                    stored.reset(for: current)
                }
            }
            if let change { await emit(.accountChange(Event.AccountChange(changeType: change))) }
            await emitStateUpdateIfNeeded()
        }
        if current == nil {
            throw StratusError(.notAuthenticated, "the \(database.databaseScope.name) database has no signed-in user, so there is nothing to sync")
        }
    }

    private func emit(_ event: Event) async {
        guard let delegate = delegateReference.delegate else { return }
        await delegate.handleEvent(event, syncEngine: self)
    }

    private func emitStateUpdateIfNeeded() async {
        let serialization: State.Serialization? = state.stored.withLock { stored in
            guard stored.needsUpdateEvent else { return nil }
            stored.needsUpdateEvent = false
            return State.Serialization(stored)
        }
        if let serialization { await emit(.stateUpdate(Event.StateUpdate(stateSerialization: serialization))) }
    }

    private static func stratusError(_ error: any Error) -> StratusError {
        if let error = error as? StratusError { return error }
        if error is CancellationError { return StratusError(.operationCancelled, "the sync was cancelled") }
        var wrapped = StratusError(.internalError, "\(error)")
        wrapped.underlyingError = error
        return wrapped
    }

    // MARK: - Scheduling

    /// After the app changed the state: the state update CloudKit's engine gives for it, and
    /// (syncing by itself) a send soon.
    private func stateChangedByApp() {
        if automaticallySync { scheduleSend(after: 0.05) }
        schedule.withLock { schedule in
            guard schedule.stateUpdateTask == nil else { return }
            schedule.stateUpdateTask = Task.detached { [weak self] in
                guard let self else { return }
                await self.gate.enter()
                self.schedule.withLock { $0.stateUpdateTask = nil }
                await self.emitStateUpdateIfNeeded()
                self.gate.leave()
            }
        }
    }

    private func scheduleSend(after delay: Double) {
        schedule(.send, after: delay) { engine in
            try? await engine.send(SendChangesOptions(), reason: .scheduled)
        }
    }

    private func scheduleFetch(after delay: Double) {
        schedule(.fetch, after: delay) { engine in
            do {
                try await engine.fetch(FetchChangesOptions(), reason: .scheduled)
            } catch let error as StratusError where Self.transientCodes.contains(error.code) && error.code != .operationCancelled {
                engine.scheduleFetch(after: error.retryAfterSeconds ?? 5)
            } catch {}
        }
    }

    /// Runs `work` after `delay` seconds in a task of its own, unless one is already waiting in
    /// `slot`; the slot is free again once the work starts, so that what the work finds to do
    /// later is scheduled anew. The task holds the engine only while it works.
    private func schedule(_ slot: Schedule.Slot, after delay: Double, _ work: @escaping @Sendable (SyncEngine) async -> Void) {
        schedule.withLock { schedule in
            guard schedule[slot] == nil else { return }
            schedule[slot] = Task.detached { [weak self] in
                if delay > 0 { try? await Task.sleep(nanoseconds: UInt64(delay * 1_000_000_000)) }
                guard let self, !Task.isCancelled else { return }
                self.schedule.withLock { $0[slot] = nil }
                await work(self)
            }
        }
    }

    /// Asks the store every ``Configuration/changePollInterval`` seconds whether the database
    /// changed since the state's token, and fetches when it did (or when zones wait).
    private func startPolling() {
        guard let interval = changePollInterval else { return }
        let task = Task.detached { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(nanoseconds: UInt64(interval * 1_000_000_000))
                guard let self, !Task.isCancelled else { return }
                if await self.hasUnfetchedChanges() { try? await self.fetch(FetchChangesOptions(), reason: .scheduled) }
            }
        }
        schedule.withLock { $0.pollTask = task }
    }

    /// Whether a zone the engine has fetched before has changes past its token, by a quiet
    /// look at its first change. The shared database lists every zone a participant reaches
    /// as changed at every look (see the README's sharing section); without this look the
    /// engine would report each of them, and fetch them all, at every fetch and every poll,
    /// where CloudKit's engine reports only zones with new changes.
    private func hasNewChanges(in zoneID: RecordZone.ID, _ requests: Database) async -> Bool {
        guard let token = state.stored.withLock({ $0.token(for: zoneID) }) else { return true }
        do {
            let first = try await requests.zoneChangeBatch(inZoneWith: zoneID, since: token, desiredKeys: [], resultsLimit: 1)
            return !first.changes.isEmpty || !first.failures.isEmpty || first.moreComing
        } catch let error as StratusError where Self.transientCodes.contains(error.code) {
            // As the poll's own look: a store that is busy or away now is asked again next time.
            return false
        } catch {
            // A zone gone or a token expired: the fetch finds out and reports it.
            return true
        }
    }

    /// Whether a fetch would find something: a quiet look at the database's changes, which
    /// delivers nothing and keeps the state as it is.
    private func hasUnfetchedChanges() async -> Bool {
        let (token, waiting) = state.stored.withLock { ($0.databaseToken, !$0.zoneIDsWithUnfetchedServerChanges.isEmpty) }
        if waiting || token == nil { return true }
        do {
            guard database.databaseScope == .shared else {
                let changes = try await database.databaseChanges(since: token, resultsLimit: 1)
                return !changes.modifications.isEmpty || !changes.deletions.isEmpty
            }
            let changes = try await database.databaseChanges(since: token)
            if !changes.deletions.isEmpty { return true }
            for modification in changes.modifications where !modification.zoneID.isDefault {
                if await hasNewChanges(in: modification.zoneID, database) { return true }
            }
            return changes.moreComing
        } catch let error as StratusError where Self.transientCodes.contains(error.code) {
            return false
        } catch {
            // An expired token, say: the fetch knows how to start over, and reports the rest.
            return true
        }
    }

}

/// The engine's delegate, held weakly (CloudKit's configuration holds its delegate weakly too).
private final class WeakDelegate: @unchecked Sendable {
    // Written once, in init; the runtime clears it atomically when the delegate goes away.
    weak var delegate: (any SyncEngineDelegate)?
    init(_ delegate: any SyncEngineDelegate) { self.delegate = delegate }
}

/// Lets one fetch or send run at a time, in the order they asked.
private final class SyncGate: Sendable {
    private let state = Mutex<(busy: Bool, waiting: [CheckedContinuation<Void, Never>])>((false, []))

    func enter() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let enterNow = state.withLock { state -> Bool in
                if !state.busy {
                    state.busy = true
                    return true
                }
                state.waiting.append(continuation)
                return false
            }
            if enterNow { continuation.resume() }
        }
    }

    func leave() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.waiting.isEmpty {
                state.busy = false
                return nil
            }
            return state.waiting.removeFirst()
        }
        next?.resume()
    }
}
