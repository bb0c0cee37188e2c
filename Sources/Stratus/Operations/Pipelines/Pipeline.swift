import Foundation
import Synchronization

/// What every stage of one pipeline shares: who the stages are, whether the pipeline stopped
/// (cancelled, or failed by a stage), and how far every last stage got, which is the position
/// a checkpoint keeps and a stopped pipeline reports.
///
/// A pipeline is made when the first consumer attaches to a producer (or a source is given a
/// checkpoint), and every consumer attached later joins its producer's pipeline.
final class Pipeline: Sendable {
    private struct Stage {
        weak var operation: DatabaseOperation?
        let id: ObjectIdentifier
        let name: String
        var consumers = 0
        var finished = false
        var completedSequence = -1
    }

    /// Why a pipeline stopped before its source was exhausted.
    enum Stop {
        /// Cancelled through `stage`.
        case cancelled(stage: String, id: ObjectIdentifier)
        case failed(StratusError, stage: String, id: ObjectIdentifier)

        /// The stage that stopped the pipeline.
        var stageID: ObjectIdentifier {
            switch self {
            case .cancelled(_, let id): id
            case .failed(_, _, let id): id
            }
        }
    }

    private struct State {
        var stages: [Stage] = []
        var outputs: [any PipelineOutputEnd] = []
        var stop: Stop?
        /// The source's position after each batch not yet completed by every last stage.
        var positions: [Int: PipelinePosition] = [:]
        var completedSequence = -1
        var completedPosition: PipelinePosition?
        var checkpoint: PipelineCheckpoint?
        var engine: (any StorageEngine)?
        /// The position the file store holds, so that it never goes back.
        var savedSequence = -1
        /// A stage recorded the job's position in the store's transactions.
        var isRecordedInStore = false
        /// The source stopped with more to read (a query's one page): the job is not done.
        var sourceHasMore = false
        /// The failures the job's earlier runs recorded in the store.
        var failuresBefore = 0
        /// The failures of this run's batches each writing stage recorded last (a batch's may
        /// be recorded again, by a retried transaction), and of those before them.
        var latestFailures: [ObjectIdentifier: (sequence: Int, failures: Int)] = [:]
        var failuresBeforeLatest = 0
    }
    private let state = Mutex(State())
    /// Serializes saves of the checkpoint store, which happen outside `state`'s lock.
    private let saveLock = NSLock()
    /// Stages that started, and those of them whose outcome is known after a stop: a stopped
    /// pipeline's stages report once every started stage settled, so that all report the
    /// same position (a write in progress when the pipeline stopped still commits).
    private let settling = NSCondition()
    private nonisolated(unsafe) var started = Set<ObjectIdentifier>()
    private nonisolated(unsafe) var settled = Set<ObjectIdentifier>()

    init() {}

    // MARK: - Members

    /// Adds a stage (once).
    func add(_ operation: DatabaseOperation) {
        state.withLock { state in
            let id = ObjectIdentifier(operation)
            guard !state.stages.contains(where: { $0.id == id }) else { return }
            state.stages.append(Stage(operation: operation, id: id, name: String(describing: type(of: operation))))
        }
    }

    /// The source stopped before its end (a query without `fetchAllResults` reads one page): a
    /// run that completes keeps its checkpoint's position, so that the next run goes on after it.
    func sourceStoppedWithMoreToRead() {
        state.withLock { $0.sourceHasMore = true }
    }

    /// Every stage still in memory.
    var stages: [DatabaseOperation] { state.withLock { $0.stages.compactMap(\.operation) } }

    /// The name of a stage that was released without running to its end: nothing will run it,
    /// and its producer would wait for it.
    var releasedStageName: String? {
        state.withLock { state in state.stages.first { $0.operation == nil && !$0.finished }?.name }
    }

    /// Every stage's identity.
    var stageIdentifiers: Set<ObjectIdentifier> { state.withLock { Set($0.stages.map(\.id)) } }

    /// The stages that record the pipeline's position in their writes' transactions.
    var positionRecordingStages: [DatabaseOperation] {
        state.withLock { $0.stages.compactMap(\.operation).filter(\.recordsPipelinePositions) }
    }

    /// Records that `consumer` takes `producer`'s batches through `output`.
    func connect(_ consumer: DatabaseOperation, to producer: DatabaseOperation, through output: any PipelineOutputEnd) {
        add(producer)
        add(consumer)
        state.withLock { state in
            if let index = state.stages.firstIndex(where: { $0.id == ObjectIdentifier(producer) }) { state.stages[index].consumers += 1 }
            if !state.outputs.contains(where: { $0 === output }) { state.outputs.append(output) }
        }
    }

    /// A stage started running.
    func start(_ operation: DatabaseOperation) {
        settling.withLock { _ = started.insert(ObjectIdentifier(operation)) }
    }

    /// Records that `operation` knows its outcome; when the pipeline stopped, also waits until
    /// every stage that started knows its own (they all stop at their next batch). A stage
    /// that finished before the stop counts as settled, or the others would wait for it forever.
    private func settle(_ operation: DatabaseOperation, waiting: Bool) {
        settling.lock()
        defer { settling.unlock() }
        settled.insert(ObjectIdentifier(operation))
        settling.broadcast()
        guard waiting else { return }
        while !started.isSubset(of: settled) { settling.wait() }
    }

    /// Whether `operation` hands its batches to nobody (a last stage of the pipeline).
    func isLastStage(_ operation: DatabaseOperation) -> Bool {
        state.withLock { state in state.stages.first { $0.id == ObjectIdentifier(operation) }?.consumers ?? 0 } == 0
    }

    // MARK: - The source

    /// The source starts: where its checkpoint is kept, on which database, and the position it
    /// starts after.
    func begin(checkpoint: PipelineCheckpoint?, engine: any StorageEngine, startPosition: PipelinePosition?, failuresBefore: Int = 0) {
        state.withLock { state in
            state.checkpoint = checkpoint
            state.engine = engine
            state.completedPosition = startPosition
            state.failuresBefore = failuresBefore
        }
    }

    /// The job's failures once `stage`'s transaction for batch `sequence` commits with
    /// `failures`: the earlier runs', and those of the batches every writing stage wrote
    /// before. A stage writes its batches in order, so its earlier ones have committed; a
    /// batch's transaction may record more than once (retried after a busy store), so its count
    /// replaces, never adds.
    func failuresRecorded(by stage: ObjectIdentifier, sequence: Int, _ failures: Int) -> Int {
        state.withLock { state in
            if let latest = state.latestFailures[stage], latest.sequence != sequence { state.failuresBeforeLatest += latest.failures }
            state.latestFailures[stage] = (sequence, failures)
            return state.failuresBefore + state.failuresBeforeLatest + state.latestFailures.values.reduce(0) { $0 + $1.failures }
        }
    }

    /// The checkpoint the source was given, for the stages that record its position.
    var checkpoint: PipelineCheckpoint? { state.withLock { $0.checkpoint } }

    /// A stage records the job's position in a transaction of the store: from then on the
    /// checkpoint store says so, and a store without the job's position is refused.
    func recordsPositionInStore() {
        state.withLock { $0.isRecordedInStore = true }
    }

    /// The source's position once batch `sequence` is done.
    func register(sequence: Int, position: PipelinePosition?) {
        guard let position else { return }
        state.withLock { $0.positions[sequence] = position }
    }

    /// The position after batch `sequence`, as registered by the source.
    func position(after sequence: Int) -> PipelinePosition? {
        state.withLock { $0.positions[sequence] }
    }

    /// A last stage finished batch `sequence`. Once every last stage finished it, its
    /// position is the pipeline's, and the checkpoint store (if any) saves it.
    ///
    /// - Throws: what the checkpoint store throws.
    func complete(sequence: Int, by operation: DatabaseOperation) throws {
        let advanced = state.withLock { state -> Bool in
            guard let index = state.stages.firstIndex(where: { $0.id == ObjectIdentifier(operation) }) else { return false }
            state.stages[index].completedSequence = max(state.stages[index].completedSequence, sequence)
            let last = state.stages.filter { $0.consumers == 0 }
            let completed = last.map(\.completedSequence).min() ?? sequence
            guard completed > state.completedSequence else { return false }
            for done in (state.completedSequence + 1)...completed {
                if let position = state.positions.removeValue(forKey: done) { state.completedPosition = position }
            }
            state.completedSequence = completed
            return state.checkpoint?.store != nil
        }
        if advanced { try saveCheckpoint() }
    }

    /// Saves the completed position in the checkpoint store, in order.
    private func saveCheckpoint() throws {
        try saveLock.withLock {
            let (entry, sequence) = state.withLock { state -> (PipelineCheckpointStoreEntry?, Int) in
                guard let checkpoint = state.checkpoint, state.completedSequence > state.savedSequence else { return (nil, 0) }
                return (PipelineCheckpointStoreEntry(job: checkpoint.job, position: state.completedPosition, isRecordedInStore: state.isRecordedInStore),
                        state.completedSequence)
            }
            guard let entry, let store = checkpoint?.store else { return }
            do {
                try store.save(entry)
            } catch {
                var failure = StratusError(.internalError, "the pipeline's checkpoint store could not save the position of job '\(entry.job)': \(error)")
                failure.underlyingError = error
                throw failure
            }
            state.withLock { $0.savedSequence = max($0.savedSequence, sequence) }
        }
    }

    /// The position every last stage reached.
    var completedPosition: PipelinePosition? { state.withLock { $0.completedPosition } }

    // MARK: - Stopping

    /// Whether the pipeline was cancelled or failed.
    var isStopped: Bool { state.withLock { $0.stop != nil } }

    /// Why it stopped, if it did.
    var stop: Stop? { state.withLock { $0.stop } }

    /// Cancels every stage: each stops at its next batch and reports what it did.
    func stop(cancelledBy operation: DatabaseOperation) {
        halt(.cancelled(stage: Self.name(of: operation), id: ObjectIdentifier(operation)))
    }

    /// A stage failed as a whole: every other stage stops and reports the failure.
    func fail(_ error: StratusError, by operation: DatabaseOperation) {
        halt(.failed(error, stage: Self.name(of: operation), id: ObjectIdentifier(operation)))
    }

    /// A stage's name in messages: its class, without generic arguments (`ConsumeOperation`).
    static func name(of operation: DatabaseOperation) -> String { String(String(describing: type(of: operation)).prefix { $0 != "<" }) }

    private func halt(_ reason: Stop) {
        let (operations, outputs) = state.withLock { state -> ([DatabaseOperation], [any PipelineOutputEnd]) in
            guard state.stop == nil else { return ([], []) }
            state.stop = reason
            return (state.stages.compactMap(\.operation), state.outputs)
        }
        for output in outputs { output.close() }
        // Each operation's own cancel() comes back here and finds the pipeline stopped already.
        for operation in operations where !operation.isCancelled { operation.cancel() }
    }

    /// The error a stage reports when the pipeline stopped under it: the failing stage's code
    /// and message, or `operationCancelled` naming the stage that was cancelled, with what the
    /// stage did and the position reached.
    func stoppedError(_ what: String, completed: Int) -> StratusError {
        var error: StratusError
        switch stop {
        case .failed(let failure, let stage, _)?:
            error = StratusError(failure.code, "\(what) stopped because the pipeline's \(stage) failed: \(failure.message)")
            // The app's own error, when a closure of the app's threw it, is what every stage's
            // caller looks for; else the failing stage's error.
            error.underlyingError = failure.underlyingError.flatMap { $0 is StratusError ? nil : $0 } ?? failure
            error.completedItemCount = completed
        case .cancelled(let stage, _)? where stage != what:
            error = StratusError.cancelled(what, completed: completed)
            error.message += ": the pipeline's \(stage) was cancelled"
        case .cancelled?, nil:
            error = StratusError.cancelled(what, completed: completed)
        }
        return describingPosition(error)
    }

    /// `error` with the position every last stage reached (and, for a query, its cursor).
    func describingPosition(_ error: StratusError) -> StratusError {
        var error = error
        let position = completedPosition
        error.pipelinePosition = position
        // Records after this cursor may have been read but not completed by every stage.
        if case .query(let cursor)? = position { error.resumeCursor = cursor }
        return error
    }

    // MARK: - Finishing

    /// A stage finished with `outcome`: a whole failure fails the pipeline, a cancellation
    /// cancels it, and a stage the pipeline's failure stopped reports that failure. When the
    /// last stage finishes a pipeline that ran to its end, its checkpoint is removed. Answers
    /// the outcome the stage reports.
    func finish(_ operation: DatabaseOperation, outcome: StratusError?, output: (any PipelineOutputEnd)?) -> StratusError? {
        var outcome = outcome
        if let error = outcome, error.code != .partialFailure {
            // Either does nothing when the pipeline stopped already (the error is then the stop's).
            if error.code == .operationCancelled {
                halt(.cancelled(stage: Self.name(of: operation), id: ObjectIdentifier(operation)))
            } else {
                fail(error, by: operation)
            }
        }
        let (allFinished, stop, checkpoint, engine) = state.withLock { state in
            if let index = state.stages.firstIndex(where: { $0.id == ObjectIdentifier(operation) }) { state.stages[index].finished = true }
            // A source that stopped with more to read leaves its position for the next run.
            return (state.stages.allSatisfy(\.finished), state.stop, state.sourceHasMore ? nil : state.checkpoint, state.engine)
        }
        settle(operation, waiting: stop != nil)
        if let error = outcome, error.code != .partialFailure {
            if let stop, stop.stageID != ObjectIdentifier(operation), error.code == .operationCancelled {
                // Stopped by another stage's failure or cancellation (before it started, or
                // between batches): it says which.
                outcome = stoppedError(Self.name(of: operation), completed: error.completedItemCount ?? 0)
            } else {
                outcome = describingPosition(error)
            }
        }
        guard stop == nil else { return outcome }
        output?.finish()
        if allFinished, let checkpoint {
            do {
                // The checkpoint store first: one left behind by a kill in between would say
                // the store records a position it no longer holds, and a run again with it
                // would be refused.
                try checkpoint.store?.remove()
                try engine?.removeJobProgress(checkpoint.job)
            } catch {
                return StratusError(.internalError, "the pipeline completed, but its checkpoint '\(checkpoint.job)' could not be removed: \(error)")
            }
        }
        return outcome
    }
}

/// A stage's output, as the pipeline sees it without its element type.
protocol PipelineOutputEnd: AnyObject, Sendable {
    func finish()
    func close()
    func complete(with error: StratusError?)
    func prepare(producer: Operation)
    var hasConsumers: Bool { get }
}

extension PipelineOutput: PipelineOutputEnd {}
