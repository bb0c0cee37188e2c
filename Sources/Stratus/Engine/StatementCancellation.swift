import Foundation

/// How an operation's cancellation reaches the statements its work runs on a server: an
/// engine whose statements can wait (a PostgreSQL statement queued behind another
/// transaction's lock) registers a way to stop the one it runs, and a cancelled operation, or
/// one whose resource timeout fired, stops it at once instead of when the lock is released.
///
/// An operation makes its cancellation ``current`` on the thread that does its work; an engine
/// reads it there when it lends a connection:
///
/// ```swift
/// let registration = StatementCancellation.current?.register { canceller.cancel() }
/// defer { registration.map { StatementCancellation.current?.unregister($0) } }
/// ```
@_spi(StratusEngine)
public final class StatementCancellation: @unchecked Sendable {
    // @unchecked: `handlers`, `nextRegistration` and `cancelled` are read and changed under `lock`.
    private let lock = NSLock()
    private var handlers: [UInt64: @Sendable () -> Void] = [:]
    private var nextRegistration: UInt64 = 0
    private var cancelled = false

    public init() {}

    /// The cancellation of the operation whose work runs on this thread, if any.
    public static var current: StatementCancellation? {
        Thread.current.threadDictionary[threadKey] as? StatementCancellation
    }

    private static let threadKey = "com.stratus.statementCancellation"

    /// Runs `body` with this cancellation ``current`` on the calling thread.
    func run<T>(_ body: () throws -> T) rethrows -> T {
        let thread = Thread.current
        let outer = thread.threadDictionary[Self.threadKey]
        thread.threadDictionary[Self.threadKey] = self
        defer { thread.threadDictionary[Self.threadKey] = outer }
        return try body()
    }

    /// Whether the operation was cancelled.
    public var isCancelled: Bool { lock.withLock { cancelled } }

    /// Keeps `handler`, which stops the statement a connection runs, until ``unregister(_:)``;
    /// answers its registration.
    public func register(_ handler: @escaping @Sendable () -> Void) -> UInt64 {
        lock.withLock {
            nextRegistration += 1
            handlers[nextRegistration] = handler
            return nextRegistration
        }
    }

    /// Forgets a handler (its connection went back to its pool).
    public func unregister(_ registration: UInt64) {
        _ = lock.withLock { handlers.removeValue(forKey: registration) }
    }

    /// Stops every registered statement; called when the operation is cancelled.
    func cancel() {
        let stopping = lock.withLock { () -> [@Sendable () -> Void] in
            cancelled = true
            return Array(handlers.values)
        }
        for stop in stopping { stop() }
    }
}
