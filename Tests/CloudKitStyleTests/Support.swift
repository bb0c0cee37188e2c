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
