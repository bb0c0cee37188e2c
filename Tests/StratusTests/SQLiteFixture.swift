import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport

/// A fresh SQLite store in a temporary directory, with containers on it.
final class SQLiteFixture: Sendable {
    static let identifier = "com.example.tests"

    let store: TemporaryStore
    let engine: SQLiteEngine

    init() throws {
        store = try TemporaryStore(prefix: "stratus-ops")
        engine = try SQLiteEngine(path: store.path())
    }

    deinit { store.remove() }

    func container(user: String = "alice", identifier: String = SQLiteFixture.identifier) -> Container {
        Container(identifier: identifier, engine: engine, userName: user)
    }

    /// Alice's public database.
    var database: Database { container().publicCloudDatabase }

    /// Runs `body` with a fresh fixture and removes the store afterwards.
    static func with<T>(_ body: (SQLiteFixture) async throws -> T) async throws -> T {
        let fixture = try SQLiteFixture()
        defer { fixture.store.remove() }
        return try await body(fixture)
    }
}

/// `count` records of type `Item` named `item-00000`…, with `n` = index and `even` = 0/1.
func items(_ count: Int, prefix: String = "item", type: String = "Item") -> [Record] {
    makeRecords(type, count: count, prefix: prefix) { i in ["n": .int64(Int64(i)), "even": .int64(i % 2 == 0 ? 1 : 0)] }
}

/// The final result's error, or `nil` for success.
func finalError<T>(_ result: Result<T, any Error>?) -> StratusError? {
    if case .failure(let error)? = result { return error as? StratusError }
    return nil
}

/// Suspends until `semaphore` is signalled, without blocking a cooperative thread.
func wait(for semaphore: DispatchSemaphore) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        DispatchQueue.global().async {
            semaphore.wait()
            continuation.resume()
        }
    }
}
