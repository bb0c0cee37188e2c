import Foundation
import Synchronization

/// Saves an import's batches one after another in the order given, each started from the
/// final block of the one before it, so that the store's writer goes from batch to batch
/// without waiting for the reading task to notice. After a batch fails as a whole (not
/// `partialFailure`), the batches after it are not started and fail with the same error.
final class ImportBatchSaver: Sendable {
    private let database: Database
    private struct State {
        var waiting: [(ModifyRecordsOperation, PendingBatchSave)] = []
        var running = false
        var failure: (any Error)?
    }
    private let state = Mutex(State())

    init(database: Database) { self.database = database }

    /// Queues `op` after every operation submitted before it; its outcome arrives in the answer.
    func submit(_ op: ModifyRecordsOperation) -> PendingBatchSave {
        let pending = PendingBatchSave()
        let outcome = pending.outcomeSoFar
        op.perRecordWriteKindBlock = { _, kind in outcome.count(kind) }
        op.perRecordDeleteBlock = { _, result in if case .success = result { outcome.countDeletion() } }
        // Weakly: the operation keeps its blocks, and with them the batch's records.
        op.modifyRecordsResultBlock = { [self, weak op] result in
            let stops: (any Error)?
            switch result {
            case .success: stops = nil
            case .failure(let error as StratusError) where error.code == .partialFailure:
                // Items that failed are in the partial failure's per-item errors, or for a
                // request of segments (which may name a record in each) in each segment's.
                let bySegment = op?.failuresBySegment ?? []
                outcome.failuresBySegment = bySegment.isEmpty ? [error.partialErrorsByRecordID] : bySegment
                stops = nil
            case .failure(let error): stops = error
            }
            startNext(after: stops)
            if let stops { pending.finish(.failure(stops)) } else { pending.finish(.success(outcome)) }
        }
        let (startNow, failure) = state.withLock { state -> (Bool, (any Error)?) in
            if let failure = state.failure { return (false, failure) }
            if state.running {
                state.waiting.append((op, pending))
                return (false, nil)
            }
            state.running = true
            return (true, nil)
        }
        if let failure { pending.finish(.failure(failure)) } else if startNow { database.add(op) }
        return pending
    }

    private func startNext(after failure: (any Error)?) {
        let (next, dropped) = state.withLock { state -> ((ModifyRecordsOperation, PendingBatchSave)?, [(ModifyRecordsOperation, PendingBatchSave)]) in
            if let failure {
                state.failure = failure
                state.running = false
                defer { state.waiting.removeAll() }
                return (nil, state.waiting)
            }
            guard !state.waiting.isEmpty else {
                state.running = false
                return (nil, [])
            }
            return (state.waiting.removeFirst(), [])
        }
        for (_, pending) in dropped { pending.finish(.failure(failure!)) }
        if let (op, _) = next { database.add(op) }
    }
}

/// One submitted batch: what happened to it, once its operation finished.
final class PendingBatchSave: Sendable {
    /// Filled by the operation's blocks while it runs.
    let outcomeSoFar = BatchSaveOutcome()
    private let state = Mutex<(result: Result<BatchSaveOutcome, any Error>?, waiter: CheckedContinuation<BatchSaveOutcome, any Error>?)>((nil, nil))

    func finish(_ result: Result<BatchSaveOutcome, any Error>) {
        let waiter = state.withLock { state -> CheckedContinuation<BatchSaveOutcome, any Error>? in
            guard let waiter = state.waiter else {
                state.result = result
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume(with: result)
    }

    /// What the batch did; throws what stopped it.
    var outcome: BatchSaveOutcome {
        get async throws {
            try await withCheckedThrowingContinuation { continuation in
                let ready = state.withLock { state -> Result<BatchSaveOutcome, any Error>? in
                    if let result = state.result { return result }
                    state.waiter = continuation
                    return nil
                }
                if let ready { continuation.resume(with: ready) }
            }
        }
    }
}

/// What a batch did: kinds counted by the operation's per-record blocks, failures taken from
/// its final result. Each segment of a batch (``ImportBatch/segmentCount``) names a record
/// once, so a segment's failures by ID are failures by item.
final class BatchSaveOutcome: Sendable {
    private let counts = Mutex((created: 0, updated: 0, unchanged: 0, deleted: 0))
    private let failed = Mutex<[[Record.ID: StratusError]]>([])

    func count(_ kind: RecordWriteKind) {
        counts.withLock { counts in
            switch kind {
            case .created: counts.created += 1
            case .updated: counts.updated += 1
            case .unchanged: counts.unchanged += 1
            }
        }
    }

    func countDeletion() { counts.withLock { $0.deleted += 1 } }

    var created: Int { counts.withLock { $0.created } }
    var updated: Int { counts.withLock { $0.updated } }
    var unchanged: Int { counts.withLock { $0.unchanged } }
    var deleted: Int { counts.withLock { $0.deleted } }
    /// Items written (or found unchanged) by the batch.
    var succeeded: Int { counts.withLock { $0.created + $0.updated + $0.unchanged + $0.deleted } }
    /// The failures of a batch of one segment (of the first, for a batch of several).
    var failures: [Record.ID: StratusError] { failed.withLock { $0.first ?? [:] } }
    /// Each segment's failures, in segment order (empty, or with a dictionary per segment).
    var failuresBySegment: [[Record.ID: StratusError]] {
        get { failed.withLock { $0 } }
        set { failed.withLock { $0 = newValue } }
    }
    /// Whether any item of the batch failed.
    var hasFailures: Bool { failed.withLock { $0.contains { !$0.isEmpty } } }
}
