import Foundation

/// The hand-off from a producer to one consumer: batches in order, at most ``bound`` of them
/// in flight (sent and not yet acknowledged by the consumer). The producer waits while the
/// consumer holds that many; the consumer waits while none is queued.
///
/// ```swift
/// guard channel.send(batch) else { return }          // producer: false when the pipeline stopped
/// while let batch = channel.receive() { …; channel.acknowledge() }   // consumer
/// ```
final class PipelineChannel<Element: Sendable>: @unchecked Sendable {
    // @unchecked: every mutable field is read and written with `condition` locked.
    private let condition = NSCondition()
    private var queued: [PipelineBatch<Element>] = []
    private var head = 0
    private var inFlight = 0
    /// Producers waiting in ``send(_:)`` for room.
    private var sendersWaiting = 0
    private var bound: Int
    private var finished = false
    private var closed = false
    /// The consuming stage, to tell at the producer's start whether it depends on the producer.
    private weak var consumer: Operation?

    init(consumer: Operation, bound: Int) {
        self.consumer = consumer
        self.bound = bound
    }

    /// The consumer, if it still exists.
    var consumingOperation: Operation? { condition.withLock { consumer } }

    /// Sets how many batches may be in flight (the producer's setting when it starts).
    func setBound(_ newBound: Int) {
        condition.withLock {
            if bound != .max { bound = newBound }
            condition.broadcast()
        }
    }

    /// Lets the producer run ahead without a bound: for a consumer that starts only after the
    /// producer finished (it depends on it), so that waiting for it would never end.
    func removeBound() {
        condition.withLock {
            bound = .max
            condition.broadcast()
        }
    }

    /// Batches sent and not yet acknowledged.
    var batchesInFlight: Int { condition.withLock { inFlight } }

    /// Queues `batch`, first waiting while the consumer holds ``bound`` batches. Answers false
    /// (and queues nothing) when the pipeline stopped.
    func send(_ batch: PipelineBatch<Element>) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while inFlight >= bound && !closed {
            sendersWaiting += 1
            condition.wait()
            sendersWaiting -= 1
        }
        guard !closed else { return false }
        queued.append(batch)
        inFlight += 1
        condition.broadcast()
        return true
    }

    /// The next batch, waiting for one; nil once the producer finished and every batch was
    /// taken, or at once when the pipeline stopped.
    func receive() -> PipelineBatch<Element>? {
        condition.lock()
        defer { condition.unlock() }
        while head == queued.count && !finished && !closed { condition.wait() }
        return takeQueued()
    }

    /// The consumer is done with one batch it received (its writes committed, its own batch
    /// handed on): the producer may send another.
    /// The next batch when one is queued, or about to be: a producer that waited for room
    /// and has it now is waited for (briefly); otherwise `nil` at once (also when the channel
    /// is closed). A consumer takes it while still working on the one before.
    func receiveIfQueued() -> PipelineBatch<Element>? {
        condition.withLock {
            let deadline = Date(timeIntervalSinceNow: 0.05)
            while head == queued.count && sendersWaiting > 0 && inFlight < bound && !closed && condition.wait(until: deadline) {}
            return takeQueued()
        }
    }

    /// The first queued batch, taken off the queue; nil when none is queued or the channel
    /// is closed. The caller holds the lock.
    private func takeQueued() -> PipelineBatch<Element>? {
        guard !closed, head < queued.count else { return nil }
        let batch = queued[head]
        head += 1
        if head == queued.count {
            queued.removeAll(keepingCapacity: true)
            head = 0
        }
        return batch
    }

    func acknowledge() {
        condition.withLock {
            inFlight -= 1
            condition.broadcast()
        }
    }

    /// The producer sends nothing more; queued batches are still received.
    func finish() {
        condition.withLock {
            finished = true
            condition.broadcast()
        }
    }

    /// The pipeline stopped: queued batches are dropped, and waiting on either side ends.
    func close() {
        condition.withLock {
            closed = true
            queued.removeAll()
            head = 0
            condition.broadcast()
        }
    }
}
