import Foundation
import Synchronization

/// A zone's changes since a kept token, batch by batch and exactly once, the job behind
/// `stratus changes`: built on ``FetchRecordZoneChangesOperation``, with cancellation between
/// batches and a ``ChangeTokenStore`` that keeps the token of the last applied batch.
///
/// ```swift
/// let feed = RecordZoneChangeFeed(database: database, zoneID: RecordZone.ID(zoneName: "Photos"))
/// let summary = try await feed.run(tokens: tokenFile) { batch in
///     for change in batch.changes {
///         switch change {
///         case .changed(let record): upsert(record)
///         case .deleted(let id, _): remove(id)
///         }
///     }
/// }
/// print("\(summary.changed) changed, \(summary.deleted) deleted")
/// ```
///
/// Changes come in commit order, a record at most once per batch (in its current state); a
/// record's states arrive in the order they were committed and its deletion after them. The
/// token is saved only after `apply` returned, so a run stopped anywhere (a kill included)
/// delivers the unsaved batch again and nothing else twice.
public final class RecordZoneChangeFeed: Sendable {
    /// One change of the zone.
    ///
    /// ```swift
    /// for change in batch.changes {
    ///     switch change {
    ///     case .changed(let record): upsert(record)
    ///     case .deleted(let id, let recordType): remove(id, of: recordType)
    ///     }
    /// }
    /// ```
    public enum Change: Sendable {
        /// The record as it is now (restricted to the desired keys).
        case changed(Record)
        /// The record was deleted; its type is kept in the tombstone.
        case deleted(Record.ID, recordType: String)

        /// The ID of the record the change is about.
        public var recordID: Record.ID {
            switch self {
            case .changed(let record): record.recordID
            case .deleted(let id, _): id
            }
        }
    }

    /// One batch of changes and the token after it.
    ///
    /// ```swift
    /// let batch = try await feed.nextBatch(after: token, limit: 400)
    /// for change in batch.changes { print(change.recordID.recordName) }
    /// ```
    public struct Batch: Sendable {
        /// In commit order.
        public let changes: [Change]
        /// Where the next batch starts; keep it once the changes are applied.
        public let token: ServerChangeToken
        /// Whether more changes remain after this batch.
        public let moreComing: Bool
        /// Records changed in the batch's part of the history that the reader may not read
        /// (the READ permission of their type): left out of ``changes``, as they are of its
        /// queries, so that they never hold the feed up.
        public let unreadable: [Record.ID]
    }

    /// Why a run ended.
    ///
    /// ```swift
    /// if summary.end == .limitReached { print("more changes wait for the next run") }
    /// ```
    public enum End: Sendable, Hashable {
        /// No changes remain.
        case finished
        /// The run's limit was reached; more may remain.
        case limitReached
        /// ``RecordZoneChangeFeed/cancel()`` or task cancellation stopped it after a batch.
        case cancelled
    }

    /// What a run delivered.
    ///
    /// ```swift
    /// let summary = try await feed.run(tokens: tokenFile) { apply($0) }
    /// print(summary.changed, summary.deleted, summary.moreComing)
    /// ```
    public struct Summary: Sendable, Hashable {
        /// Records delivered in their current state.
        public var changed = 0
        /// Deletions delivered.
        public var deleted = 0
        /// Changed records left out because the reader may not read them (``Batch/unreadable``).
        public var unreadable = 0
        /// Batches applied (and tokens saved).
        public var batches = 0
        /// Whether the last batch said more changes remain.
        public var moreComing = false
        /// Why the run ended.
        public var end = End.finished

        /// An empty summary.
        public init() {}
    }

    /// The database read.
    public let database: Database
    /// The zone whose changes are delivered.
    public let zoneID: RecordZone.ID
    /// The fields of changed records to deliver; nil: every field.
    public let desiredKeys: [String]?
    /// Changes per batch (and per saved token).
    public let batchSize: Int
    private let cancelled = Atomic<Bool>(false)

    /// A feed of `zoneID`'s changes.
    ///
    /// ```swift
    /// let feed = RecordZoneChangeFeed(database: database, zoneID: zone, desiredKeys: ["title"], batchSize: 500)
    /// ```
    ///
    /// - Precondition: `batchSize` is positive (a programmer error).
    public init(database: Database, zoneID: RecordZone.ID, desiredKeys: [String]? = nil, batchSize: Int = 1_000) {
        precondition(batchSize > 0, "the batch size must be positive")
        self.database = database
        self.zoneID = zoneID
        self.desiredKeys = desiredKeys
        self.batchSize = batchSize
    }

    /// Asks a running feed to stop after the batch being applied; callable from any thread.
    ///
    /// ```swift
    /// signalSource.setEventHandler { feed.cancel() }
    /// ```
    public func cancel() { cancelled.store(true, ordering: .relaxed) }

    /// Whether ``cancel()`` was called or the running task was cancelled.
    public var isCancelled: Bool { cancelled.load(ordering: .relaxed) || Task.isCancelled }

    /// Delivers the changes after the token in `tokens`, batch by batch, to `apply`, saving
    /// each batch's token once `apply` returned.
    ///
    /// ```swift
    /// try await feed.run(tokens: tokenFile, limit: 10_000) { batch in try output.append(batch) }
    /// ```
    ///
    /// - Parameter limit: stop after about this many changes (the next run continues).
    /// - Throws: `changeTokenExpired` (start again without a token and replace what you kept),
    ///   `zoneNotFound`, what `apply` or the token store throws.
    public func run(tokens: some ChangeTokenStore, limit: Int? = nil, apply: (Batch) async throws -> Void) async throws -> Summary {
        var summary = Summary()
        var token = try tokens.loadToken()
        var delivered = 0
        let limit = limit ?? Int.max
        while true {
            if delivered >= limit {
                summary.end = .limitReached
                break
            }
            let batch = try await nextBatch(after: token, limit: min(batchSize, limit - delivered))
            try await apply(batch)
            try tokens.saveToken(batch.token)
            token = batch.token
            summary.batches += 1
            summary.moreComing = batch.moreComing
            delivered += batch.changes.count + batch.unreadable.count
            summary.unreadable += batch.unreadable.count
            for change in batch.changes {
                if case .changed = change { summary.changed += 1 } else { summary.deleted += 1 }
            }
            guard batch.moreComing else { break }
            if isCancelled {
                summary.end = .cancelled
                break
            }
        }
        return summary
    }

    /// One batch of changes after `token`, in commit order; task cancellation cancels the fetch.
    ///
    /// ```swift
    /// let batch = try await feed.nextBatch(after: nil, limit: 100)
    /// ```
    ///
    /// - Throws: `changeTokenExpired`, `zoneNotFound`, `operationCancelled`.
    public func nextBatch(after token: ServerChangeToken?, limit: Int) async throws -> Batch {
        let (changes, failures, newToken, moreComing) = try await database.zoneChangeBatch(inZoneWith: zoneID, since: token, desiredKeys: desiredKeys, resultsLimit: limit)
        var unreadable: [Record.ID] = []
        for (id, error) in failures {
            // Not readable by this reader: its roles (permissionFailure), or no user signed in
            // where only signed-in users may read (notAuthenticated).
            if let code = (error as? StratusError)?.code, code == .permissionFailure || code == .notAuthenticated {
                unreadable.append(id)
                continue
            }
            // A change that cannot be delivered must not be skipped by saving the token after it.
            var failure = error as? StratusError ?? StratusError(.internalError, "\(error)")
            failure.message = "the changed record '\(id.recordName)' could not be read: \(failure.message)"
            failure.recordID = id
            throw failure
        }
        return Batch(changes: changes, token: newToken, moreComing: moreComing, unreadable: unreadable)
    }
}
