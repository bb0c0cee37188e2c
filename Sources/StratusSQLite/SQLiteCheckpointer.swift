import CSQLite
import Dispatch
import Foundation

/// Copies committed pages from the write-ahead log into the database file off the writer's
/// thread.
///
/// SQLite's automatic checkpoint runs inside the `COMMIT` that takes the log past 1,000 pages,
/// so the writer stops to copy pages and sync the file: about a fifth of a bulk import's time.
/// Instead, the writer connection's WAL hook wakes this checkpointer, which runs a passive
/// checkpoint (it never blocks writers or readers) on a connection of its own on a background
/// queue. Should the log still grow past ``synchronousFrames`` (the checkpointer cannot keep
/// up, or a reader holds an old snapshot), the committing writer checkpoints itself, as SQLite
/// would, so the log stays bounded. A checkpoint is crash-safe wherever it runs.
///
/// While a reader holds a snapshot (a query stream, a pipeline's source), no checkpoint can
/// copy the pages written after it, and SQLite sorts the whole log before it finds that out:
/// a checkpoint in every commit would cost time growing with the log, and a long pipeline
/// writing its own source's store would slow down quadratically. So after a checkpoint that
/// left pages in the log, the writer tries again only once the log doubled or a second passed.
final class SQLiteCheckpointer: @unchecked Sendable {
    // @unchecked: `connection` is touched only by the one background run at a time that
    // `isRunning` admits, or by ``close(foldingLog:)`` once none can run; `isRunning`,
    // `isClosed`, `isRequestedAgain` and the retry fields are guarded by `lock`.

    /// Log pages after which a commit wakes the checkpointer (SQLite's automatic threshold).
    static let backgroundFrames: Int32 = 1_000
    /// Log pages after which the committing writer checkpoints itself.
    static let synchronousFrames: Int32 = 10_000

    private let path: String
    private let busyTimeoutMilliseconds: Int32
    private let lock = NSCondition()
    private var isRunning = false
    /// Set by ``close(foldingLog:)``: no checkpoint starts any more.
    private var isClosed = false
    private var isRequestedAgain = false
    private var connection: SQLiteConnection?
    /// After a checkpoint in a commit left pages in the log: the log size, and the time, after
    /// which a commit tries again (0 and nil: at every commit past ``synchronousFrames``).
    private var retryFrames: Int32 = 0
    private var retryTime: ContinuousClock.Instant?
    /// How long the writer waits before trying again a checkpoint that left pages in the log.
    static let retryInterval = Duration.seconds(1)

    init(path: String, busyTimeoutMilliseconds: Int32) {
        self.path = path
        self.busyTimeoutMilliseconds = busyTimeoutMilliseconds
    }

    /// Makes `connection` (the writer) wake this checkpointer after its commits, instead of
    /// checkpointing in the commit. The writer must not outlive the checkpointer: call
    /// ``uninstall(from:)`` before releasing it.
    func install(on connection: SQLiteConnection) {
        sqlite3_wal_hook(connection.handle, { context, handle, name, frames in
            guard let context else { return SQLITE_OK }
            let checkpointer = Unmanaged<SQLiteCheckpointer>.fromOpaque(context).takeUnretainedValue()
            if frames >= SQLiteCheckpointer.synchronousFrames {
                checkpointer.checkpointInCommit(handle, name, frames: frames)
            } else {
                checkpointer.logRestarted()
                if frames >= SQLiteCheckpointer.backgroundFrames { checkpointer.requestCheckpoint() }
            }
            return SQLITE_OK
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    func uninstall(from connection: SQLiteConnection) {
        guard let handle = connection.handle else { return }
        sqlite3_wal_hook(handle, nil, nil)
    }

    /// Waits for the running checkpoint, if any, to end, then closes this checkpointer's
    /// connection (see ``SQLiteConnection/close(foldingLog:)``); later requests start none.
    func close(foldingLog: Bool) {
        lock.withLock {
            isClosed = true
            while isRunning { lock.wait() }
        }
        // No run can start any more, so the connection is this thread's.
        connection?.close(foldingLog: foldingLog)
        connection = nil
    }

    /// Checkpoints in the writer's commit, once the log holds `frames` pages, unless the last
    /// such checkpoint left pages in the log and the log has neither doubled since nor aged a
    /// ``retryInterval``.
    private func checkpointInCommit(_ handle: OpaquePointer?, _ name: UnsafePointer<CChar>?, frames: Int32) {
        let now = ContinuousClock.now
        let due = lock.withLock { frames >= retryFrames || retryTime.map { now >= $0 } ?? true }
        guard due else { return }
        var log: Int32 = 0
        var copied: Int32 = 0
        let result = sqlite3_wal_checkpoint_v2(handle, name, SQLITE_CHECKPOINT_PASSIVE, &log, &copied)
        let leftPages = result != SQLITE_OK || copied < log
        lock.withLock {
            retryFrames = leftPages ? (frames > Int32.max / 2 ? .max : frames * 2) : 0
            retryTime = leftPages ? now + Self.retryInterval : nil
        }
    }

    /// The log is short again (a checkpoint copied it all and a writer started it over).
    private func logRestarted() {
        lock.withLock {
            retryFrames = 0
            retryTime = nil
        }
    }

    /// Starts a background checkpoint, or asks the running one to go once more.
    func requestCheckpoint() {
        let start = lock.withLock { () -> Bool in
            if isClosed { return false }
            if isRunning {
                isRequestedAgain = true
                return false
            }
            isRunning = true
            return true
        }
        guard start else { return }
        DispatchQueue.global(qos: .utility).async { [self] in run() }
    }

    private func run() {
        while true {
            checkpoint()
            let again = lock.withLock { () -> Bool in
                if isRequestedAgain {
                    isRequestedAgain = false
                    return true
                }
                isRunning = false
                lock.broadcast()
                return false
            }
            if !again { return }
        }
    }

    private func checkpoint() {
        do {
            if connection == nil {
                connection = try SQLiteConnection(path: path, create: false, busyTimeoutMilliseconds: busyTimeoutMilliseconds)
            }
            // Passive: copies what no reader still needs and never waits; what is left is
            // copied by the next checkpoint. Failures (a store removed meanwhile) only leave
            // the pages in the log, where they are as safe as in the file.
            sqlite3_wal_checkpoint_v2(connection?.handle, nil, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
        } catch {
            connection = nil
        }
    }
}
