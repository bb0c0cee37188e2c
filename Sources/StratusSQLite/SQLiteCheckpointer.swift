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
final class SQLiteCheckpointer: @unchecked Sendable {
    // @unchecked: `connection` is touched only by the one background run at a time that
    // `state` admits; `state` is guarded by `lock`.

    /// Log pages after which a commit wakes the checkpointer (SQLite's automatic threshold).
    static let backgroundFrames: Int32 = 1_000
    /// Log pages after which the committing writer checkpoints itself.
    static let synchronousFrames: Int32 = 10_000

    private let path: String
    private let busyTimeoutMilliseconds: Int32
    private let lock = NSLock()
    private var isRunning = false
    private var isRequestedAgain = false
    private var connection: SQLiteConnection?

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
            if frames >= SQLiteCheckpointer.synchronousFrames {
                sqlite3_wal_checkpoint_v2(handle, name, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
            } else if frames >= SQLiteCheckpointer.backgroundFrames {
                Unmanaged<SQLiteCheckpointer>.fromOpaque(context).takeUnretainedValue().requestCheckpoint()
            }
            return SQLITE_OK
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    func uninstall(from connection: SQLiteConnection) {
        sqlite3_wal_hook(connection.handle, nil, nil)
    }

    /// Starts a background checkpoint, or asks the running one to go once more.
    func requestCheckpoint() {
        let start = lock.withLock { () -> Bool in
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
