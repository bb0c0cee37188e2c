import Foundation
import Synchronization

/// An operation whose records can feed the operations that depend on it.
///
/// Pipelines hand results forward through dependencies, not shared variables: a consumer made
/// with ``ModifyRecordsOperation/init(savingRecordsFrom:transform:)`` or
/// ``DeleteRecordsOperation/init(deletingRecordsFrom:where:)`` depends on its producer, and
/// reads the producer's records when it starts, after the producer finished. Producer and
/// consumer may run on different queues.
///
/// ```swift
/// let query = QueryOperation(query: Query(recordType: "Todo", format: "checked == %@", 0))
/// let markDone = ModifyRecordsOperation(savingRecordsFrom: query) { records in
///     records.forEach { $0["checked"] = 1 }
///     return records
/// }
/// database.add(query)
/// otherQueueDatabase.add(markDone)   // waits for `query`, then saves what it matched
/// ```
///
/// Create the consumer before the producer is added to a queue: swift-corelibs-foundation
/// can miss a dependency added while the other operation is finishing.
///
/// A producer keeps its records only when a consumer is attached, and only those that
/// succeeded; a producer whose final result is a failure other than `partialFailure` makes
/// its consumers fail with that error.
public protocol RecordProducingOperation: DatabaseOperation {
    /// Where the operation's records go once a consumer is attached.
    var recordOutput: RecordOutput { get }
}

/// The records an operation produced, for the operations that depend on it.
public final class RecordOutput: Sendable {
    private struct State {
        var records: [Record] = []
        var failure: StratusError?
        var isComplete = false
    }
    private let state = Mutex(State())
    /// Read for every record produced; an atomic load keeps producers without consumers lock-free.
    private let isCollecting = Atomic<Bool>(false)

    init() {}

    /// Turns collection on; consumers call this when they attach.
    func startCollecting() { isCollecting.store(true, ordering: .releasing) }

    /// Whether a consumer is attached (and so wants the records).
    var isWanted: Bool { isCollecting.load(ordering: .acquiring) }

    func append(_ record: Record) {
        guard isCollecting.load(ordering: .acquiring) else { return }
        state.withLock { $0.records.append(record) }
    }

    func complete(with error: StratusError?) {
        state.withLock { s in
            s.isComplete = true
            if let error, error.code != .partialFailure { s.failure = error }
        }
    }

    /// The records produced. Call only after the producer finished (a dependency guarantees it).
    ///
    /// - Throws: the producer's final error, when it failed as a whole.
    public func records() throws -> [Record] {
        try state.withLock { s in
            guard s.isComplete else {
                throw StratusError(.invalidArguments, "the producing operation has not finished; make the consumer depend on it")
            }
            if let failure = s.failure {
                var error = failure
                error.message = "the operation this one depends on failed: \(failure.message)"
                throw error
            }
            return s.records
        }
    }
}
