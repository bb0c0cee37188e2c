import Foundation

/// Removes old tombstones of a database: deletions of records and zones older than a
/// retention period. A Stratus addition; CloudKit compacts on its own schedule.
///
/// Change tokens from before the newest removed tombstone expire (`changeTokenExpired`), since
/// a reader following them would miss deletions; readers then fetch again without a token.
/// Keep the retention longer than the longest gap between two runs of your change readers.
///
/// ```swift
/// let op = CompactChangeHistoryOperation(retention: 30 * 86_400)   // keep 30 days of deletions
/// op.compactChangeHistoryResultBlock = { print($0) }
/// database.add(op)
/// ```
public final class CompactChangeHistoryOperation: DatabaseOperation, @unchecked Sendable {
    /// Tombstones younger than this many seconds are kept.
    public var retention: TimeInterval
    /// Called once at the end: how many record and zone tombstones were removed, or the error
    /// (`invalidArguments` for a negative or infinite ``retention``).
    ///
    /// ```swift
    /// op.compactChangeHistoryResultBlock = { result in if let done = try? result.get() { print(done.recordTombstonesRemoved) } }
    /// ```
    public var compactChangeHistoryResultBlock: ((Result<ChangeHistoryCompaction, any Error>) -> Void)?

    private var compaction = ChangeHistoryCompaction()

    /// An operation that removes the tombstones older than `retention` seconds.
    ///
    /// ```swift
    /// let op = CompactChangeHistoryOperation(retention: 7 * 86_400)   // keep a week of deletions
    /// ```
    public init(retention: TimeInterval) {
        self.retention = retention
        super.init()
    }

    override func execute(engine: any StorageEngine, context: DatabaseContext) throws -> StratusError? {
        guard retention >= 0, retention.isFinite else {
            return StratusError(.invalidArguments, "a retention must be a finite, non-negative number of seconds")
        }
        let cutoff = Date(timeIntervalSinceNow: -retention)
        compaction = try withRetry { try engine.compactChangeHistory(in: context, deletedBefore: cutoff) }
        return nil
    }

    override func complete(with error: StratusError?) {
        compactChangeHistoryResultBlock?(error.map { .failure($0) } ?? .success(compaction))
    }
}
