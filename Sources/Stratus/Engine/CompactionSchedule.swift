import Foundation
import Synchronization

/// When an engine compacts its store on its own: after writes, at most once an hour per
/// engine (more often when the retention is shorter), so that a store that is written to
/// sheds old tombstones and notifications without a job of its own.
///
/// Every engine keeps one and asks it after each write; the engine only removes what the
/// answer's cutoff names.
///
/// ```swift
/// guard let cutoff = compaction.takeCutoffIfDue(retention: tombstoneRetention) else { return }
/// _ = try? writeTransaction { connection in try compact(nil, deletedBefore: cutoff, on: connection) }
/// ```
@_spi(StratusEngine)
public final class CompactionSchedule: Sendable {
    /// How often automatic compaction runs in one engine, at most.
    public static let interval: Duration = .seconds(3600)

    /// When this engine last compacted on its own.
    private let last = Mutex<ContinuousClock.Instant?>(nil)

    /// A schedule under which the first call is due.
    public init() {}

    /// The date before which tombstones and notifications go, when compaction is due; `nil`
    /// when it is not, or when `retention` is `nil` (they are kept for ever). A due answer
    /// counts as a compaction: the next is due an interval later, whether or not this one
    /// succeeded, so that a busy store just waits for the next chance.
    public func takeCutoffIfDue(retention: Duration?) -> Date? {
        guard let retention else { return nil }
        let interval = min(Self.interval, retention)
        let now = ContinuousClock.now
        let due = last.withLock { last -> Bool in
            if let last, last.duration(to: now) < interval { return false }
            last = now
            return true
        }
        guard due else { return nil }
        return Date(timeIntervalSinceNow: -Double(retention.components.seconds))
    }
}
