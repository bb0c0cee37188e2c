import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport

/// A container on a fresh store file, as a ported app opens it: `CKContainer(identifier:)`
/// becomes `try Container(identifier:storePath:)` (opening a file can fail).
func withContainer<T>(_ body: (Container) async throws -> T) async throws -> T {
    try await TemporaryStore.with(prefix: "cloudkit-style") { store in
        try await body(try Container(identifier: "iCloud.com.example.app", storePath: store.path(), userName: "alice"))
    }
}

/// Waits for a completion handler, as a test of callback code does.
func awaitCallback<T: Sendable>(_ start: (@escaping @Sendable (T) -> Void) -> Void) async -> T {
    await withCheckedContinuation { (continuation: CheckedContinuation<T, Never>) in
        start { continuation.resume(returning: $0) }
    }
}

/// What a ported sample logs through its `os_log`, kept for the sample's tests. Samples log
/// from operation threads and the main queue alike, so writes and reads take a lock.
final class SampleLog: @unchecked Sendable {
    private let lock = NSLock()
    private var kept: [String] = []

    func append(_ message: String) { lock.withLock { kept.append(message) } }

    /// Every message so far, oldest first.
    var messages: [String] { lock.withLock { kept } }
}

/// Apple's `OSLogType` (os.log is not on Linux), for the ported programs that log through their
/// own `os_log` or log handler; every level Apple's has, so each port keeps its call sites.
enum OSLogType { case `default`, info, debug, error, fault }
