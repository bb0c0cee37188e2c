import Foundation
import Stratus
import Synchronization

/// Saves an import's batches one after another in the order given, each started from the
/// final block of the one before it, so that the store's writer goes from batch to batch
/// without waiting for the reading thread to notice. After a batch fails as a whole (not
/// `partialFailure`), the batches after it are not started and fail with the same error.
final class BatchSaver: Sendable {
    private let database: Database
    private struct State {
        var waiting: [(ModifyRecordsOperation, PendingSave)] = []
        var running = false
        var failure: (any Error)?
    }
    private let state = Mutex(State())

    init(database: Database) { self.database = database }

    /// Queues `op` after every operation submitted before it; its outcome arrives in the answer.
    func submit(_ op: ModifyRecordsOperation) -> PendingSave {
        let pending = PendingSave()
        op.perRecordWriteKindBlock = { _, kind in pending.tally.count(kind) }
        op.modifyRecordsResultBlock = { [self] result in
            let stops: (any Error)?
            switch result {
            case .success: stops = nil
            case .failure(let error as StratusError) where error.code == .partialFailure:
                // Records that failed are in the partial failure's per-item errors.
                pending.tally.failures = error.partialErrorsByRecordID.map { ($0.key, $0.value) }
                stops = nil
            case .failure(let error): stops = error
            }
            startNext(after: stops)
            if let stops { pending.finish(.failure(stops)) } else { pending.finish(.success(pending.tally)) }
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
        let (next, dropped) = state.withLock { state -> ((ModifyRecordsOperation, PendingSave)?, [(ModifyRecordsOperation, PendingSave)]) in
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
final class PendingSave: Sendable {
    /// Filled by the operation's blocks while it runs.
    let tally = SaveOutcome()
    private let state = Mutex<(result: Result<SaveOutcome, any Error>?, waiter: CheckedContinuation<SaveOutcome, any Error>?)>((nil, nil))

    func finish(_ result: Result<SaveOutcome, any Error>) {
        let waiter = state.withLock { state -> CheckedContinuation<SaveOutcome, any Error>? in
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
    var outcome: SaveOutcome {
        get async throws {
            try await withCheckedThrowingContinuation { continuation in
                let ready = state.withLock { state -> Result<SaveOutcome, any Error>? in
                    if let result = state.result { return result }
                    state.waiter = continuation
                    return nil
                }
                if let ready { continuation.resume(with: ready) }
            }
        }
    }
}

/// What a batch did: kinds counted by the operation's per-record block, failures taken from
/// its final result.
final class SaveOutcome: Sendable {
    private let kinds = Mutex((created: 0, updated: 0, unchanged: 0))
    private let failed = Mutex<[(Record.ID, StratusError)]>([])

    func count(_ kind: RecordWriteKind) {
        kinds.withLock { kinds in
            switch kind {
            case .created: kinds.created += 1
            case .updated: kinds.updated += 1
            case .unchanged: kinds.unchanged += 1
            }
        }
    }

    var created: Int { kinds.withLock { $0.created } }
    var updated: Int { kinds.withLock { $0.updated } }
    var unchanged: Int { kinds.withLock { $0.unchanged } }
    var failures: [(Record.ID, StratusError)] {
        get { failed.withLock { $0 } }
        set { failed.withLock { $0 = newValue } }
    }
}
