import Foundation
import Synchronization

/// Runs a job's pipeline: its stages on a queue with a slot for each, cancelled together, and
/// waited for until the last stage's final block reports.
final class PipelineJobRun: Sendable {
    private struct State {
        var stages: [DatabaseOperation] = []
        var isCancelled = false
    }
    private let state = Mutex(State())
    private let queue: OperationQueue

    init(name: String) {
        let queue = OperationQueue()
        queue.name = name
        // Every stage runs for as long as the pipeline does.
        queue.maxConcurrentOperationCount = 4
        self.queue = queue
    }

    var isCancelled: Bool { state.withLock { $0.isCancelled } }

    /// Stops every stage at its next batch; callable from any thread, also before ``run``.
    func cancel() {
        let stages = state.withLock { state -> [DatabaseOperation] in
            state.isCancelled = true
            return state.stages
        }
        stages.first?.cancel()
    }

    /// Runs `stages` on `database`; `last`'s final block must call `finish` once. Task
    /// cancellation cancels the pipeline.
    func run(
        _ stages: [DatabaseOperation], on database: Database,
        last: (@escaping @Sendable (Result<Void, any Error>) -> Void) -> Void
    ) async -> Result<Void, any Error> {
        precondition(stages.count <= queue.maxConcurrentOperationCount, "a job pipeline has at most 4 stages")
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<Void, any Error>, Never>) in
                last { continuation.resume(returning: $0) }
                let cancelled = state.withLock { state -> Bool in
                    state.stages = stages
                    return state.isCancelled
                }
                for stage in stages { stage.database = database }
                if cancelled { stages.first?.cancel() }
                queue.addOperations(stages, waitUntilFinished: false)
            }
        } onCancel: {
            cancel()
        }
        // The stages ended: let go of them. A stage's block that holds the job (to cancel it)
        // would otherwise keep the stages, and through them the job's store, for ever. A cancel
        // ends with the run it stopped: a job kept for a nightly run runs again, as an
        // importer or exporter does.
        state.withLock { state in
            state.stages = []
            state.isCancelled = false
        }
        return result
    }
}

/// Counts what a job's stages report, from their threads.
final class PipelineJobTally<Summary: Sendable>: Sendable {
    private let summary: Mutex<Summary>
    init(_ summary: Summary) { self.summary = Mutex(summary) }
    @discardableResult
    func update<R: Sendable>(_ body: (inout Summary) -> R) -> R { summary.withLock { body(&$0) } }
    var value: Summary { summary.withLock { $0 } }
}

extension PipelineCheckpoint {
    /// The records the store refused in the job's earlier runs, as its batches' transactions
    /// recorded them (0 for a job the store has no record of).
    func failuresRecorded(in database: Database) async throws -> Int {
        let job = self.job
        return try await database.engineCall { engine, _ in try PipelineJobProgress.failuresRecorded(for: job, in: engine) }
    }
}
