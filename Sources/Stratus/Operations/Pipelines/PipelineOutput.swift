import Foundation
import Synchronization

/// Where a pipeline stage's batches go: to every consumer attached to it, as they are produced.
///
/// A consumer attaches when it is made (``ModifyRecordsOperation/init(savingRecordsFrom:transform:)``,
/// ``DeleteRecordsOperation/init(deletingRecordsFrom:where:)``, ``TransformOperation``,
/// ``ConsumeOperation``); each consumer gets every batch (fan-out), on its own queue. The
/// producer hands a batch to each consumer and waits while any consumer holds
/// ``maximumBatchesInFlight`` batches it has not finished (back-pressure), so memory holds a
/// bounded number of batches however much the source reads.
///
/// ```swift
/// let query = QueryOperation(query: Query(recordType: "Event"))
/// query.fetchAllResults = true
/// query.recordOutput.maximumBatchesInFlight = 4
/// ```
public final class PipelineOutput<Element: Sendable>: Sendable {
    private struct State {
        var channels: [PipelineChannel<Element>] = []
        var maximumBatchesInFlight = PipelineOutput.defaultMaximumBatchesInFlight
        /// Elements kept for ``records()``, when a consumer depends on the producer.
        var kept: [Element] = []
        var keepsElements = false
        var failure: StratusError?
        var isComplete = false
    }
    private let state = Mutex(State())

    /// Batches a consumer may hold before the producer waits, unless set: 2 (one being
    /// worked on, one waiting), while the producer reads the next.
    public static var defaultMaximumBatchesInFlight: Int { 2 }

    init() {}

    /// How many batches each consumer may hold (received or waiting, not yet finished) before
    /// the producer waits for it. Set it before the producer starts.
    ///
    /// ```swift
    /// query.recordOutput.maximumBatchesInFlight = 1   // strictly one batch at a time
    /// ```
    ///
    /// - Precondition: the value is positive (a programmer error).
    public var maximumBatchesInFlight: Int {
        get { state.withLock { $0.maximumBatchesInFlight } }
        set {
            precondition(newValue > 0, "maximumBatchesInFlight must be positive")
            state.withLock { $0.maximumBatchesInFlight = newValue }
        }
    }

    /// The most batches any consumer holds right now (sent to it and not finished): never
    /// more than ``maximumBatchesInFlight`` while the producer runs ahead of it.
    ///
    /// ```swift
    /// query.recordMatchedBlock = { _, _ in assert(query.recordOutput.batchesInFlight <= 2) }
    /// ```
    public var batchesInFlight: Int {
        state.withLock { $0.channels }.map(\.batchesInFlight).max() ?? 0
    }

    /// How many consumers are attached.
    public var consumerCount: Int { state.withLock { $0.channels.count } }

    /// Whether a consumer is attached (and so wants the batches).
    var hasConsumers: Bool { consumerCount > 0 }

    /// Attaches a consumer; its batches arrive through the channel.
    func attach(consumer: Operation) -> PipelineChannel<Element> {
        state.withLock { state in
            let channel = PipelineChannel<Element>(consumer: consumer, bound: state.maximumBatchesInFlight)
            state.channels.append(channel)
            return channel
        }
    }

    /// Called when the producer starts: a consumer that depends on the producer, or on any
    /// other stage of its pipeline (another consumer of it, say), directly or through other
    /// operations, cannot take anything before the producer finished (no stage finishes before
    /// the producer does), so the producer hands it everything without waiting, and keeps the
    /// elements for ``records()``.
    func prepare(producer: Operation) {
        let channels = state.withLock { state in
            for channel in state.channels { channel.setBound(state.maximumBatchesInFlight) }
            return state.channels
        }
        let stages = (producer as? DatabaseOperation)?.pipeline?.stageIdentifiers ?? []
        var waitsForProducer = false
        for channel in channels {
            guard let consumer = channel.consumingOperation,
                  Self.operation(consumer, dependsOnAnyOf: stages.union([ObjectIdentifier(producer)])) else { continue }
            channel.removeBound()
            waitsForProducer = true
        }
        if waitsForProducer { state.withLock { $0.keepsElements = true } }
    }

    /// Whether `operation` waits, through its dependencies, for one of the operations `others`
    /// identifies.
    static func operation(_ operation: Operation, dependsOnAnyOf others: Set<ObjectIdentifier>) -> Bool {
        var seen = Set<ObjectIdentifier>()
        var stack = operation.dependencies
        while let next = stack.popLast() {
            let id = ObjectIdentifier(next)
            if others.contains(id) { return true }
            if seen.insert(id).inserted { stack += next.dependencies }
        }
        return false
    }

    /// Hands `batch` to every consumer, waiting for each that holds its maximum. Consumers
    /// after the first get their own copies of records, so that one consumer's changes never
    /// reach another. Answers false when the pipeline stopped.
    func send(_ batch: PipelineBatch<Element>) -> Bool {
        let channels = state.withLock { state in
            if state.keepsElements { state.kept += batch.elements }
            return state.channels
        }
        // Copies are made before the first consumer can change a record.
        let batches = channels.indices.map { index -> PipelineBatch<Element> in
            guard index > 0, let records = batch.elements as? [Record] else { return batch }
            var copy = batch
            copy.elements = records.map { $0.copy() as! Record } as! [Element]
            return copy
        }
        for (channel, batch) in zip(channels, batches) {
            guard channel.send(batch) else { return false }
        }
        return true
    }

    /// The producer finished: consumers take what is queued, then end.
    func finish() {
        for channel in state.withLock({ $0.channels }) { channel.finish() }
    }

    /// The pipeline stopped: consumers end at once, producers stop waiting.
    func close() {
        for channel in state.withLock({ $0.channels }) { channel.close() }
    }

    /// Records the producer's final result for ``records()``.
    func complete(with error: StratusError?) {
        state.withLock { state in
            state.isComplete = true
            if let error, error.code != .partialFailure { state.failure = error }
        }
    }

    /// The elements the producer produced, for a consumer that depends on the producer and so
    /// runs after it finished. Kept only for such consumers; empty otherwise (streaming
    /// consumers take the batches as they come, and nothing is kept). Call only after the
    /// producer finished.
    ///
    /// ```swift
    /// consumer.addDependency(query)          // the consumer runs after the query finished
    /// let all = try query.recordOutput.records()
    /// ```
    ///
    /// - Throws: the producer's final error, when it failed as a whole; `invalidArguments`
    ///   before the producer finished.
    public func records() throws -> [Element] {
        try state.withLock { s in
            guard s.isComplete else {
                throw StratusError(.invalidArguments, "the producing operation has not finished; make the consumer depend on it")
            }
            if let failure = s.failure {
                var error = failure
                error.message = "the operation this one depends on failed: \(failure.message)"
                throw error
            }
            return s.kept
        }
    }
}

/// The records an operation produces, for the operations that consume them.
public typealias RecordOutput = PipelineOutput<Record>
