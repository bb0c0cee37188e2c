import Foundation
import Stratus
import StratusPostgres
import StratusSQLite
import StratusStores
import StratusTestSupport

/// A container on a fresh store of `engine`, as a ported app opens it: `CKContainer(identifier:)`
/// becomes `try Container(identifier:store:)` on the store the test gives it (an SQLite file, or
/// a schema of the PostgreSQL server the tests start), so each port runs on both engines.
///
/// ```swift
/// @Test(arguments: TestEngine.all)
/// func savesANote(engine: TestEngine) async throws {
///     try await withContainer(on: engine) { container in … }
/// }
/// ```
///
/// - Throws: cancels the test case when the engine is PostgreSQL and no server is available.
func withContainer<T>(on engine: TestEngine, _ body: (Container) async throws -> T) async throws -> T {
    try await withStore(on: engine) { store, _ in
        try await body(try Container(identifier: "iCloud.com.example.app", store: store, userName: "alice"))
    }
}

/// A fresh store location of `engine` (an SQLite file's path or a PostgreSQL URL, nothing made
/// yet) and the test's temporary folder, for a port that opens its store itself, or opens the
/// same store again as a second process of the app would.
///
/// - Throws: cancels the test case when the engine is PostgreSQL and no server is available.
func withStore<T>(on engine: TestEngine, _ body: (_ store: String, _ folder: TemporaryStore) async throws -> T) async throws -> T {
    guard engine == .postgres else { return try await withStoreOpened(on: engine, body) }
    return try await PostgresPortGate.shared.admitting { try await withStoreOpened(on: engine, body) }
}

private func withStoreOpened<T>(on engine: TestEngine, _ body: (_ store: String, _ folder: TemporaryStore) async throws -> T) async throws -> T {
    try await TemporaryStore.with(prefix: "cloudkit-style") { folder in
        let locations = try await TestStoreLocations(engine: engine, folder: folder)
        // The PostgreSQL schema is dropped when `locations` goes: not before the body is done.
        defer { withExtendedLifetime(locations) {} }
        return try await body(try await locations.newStore("store"), folder)
    }
}

/// How many ports use the PostgreSQL test server at once. Swift Testing starts every test case
/// of the run together, and each port's engine keeps a pool of connections: the ports alone,
/// all at once beside the other suites, ran the server out of connections (`too many
/// clients`). A port inside another's admission (a second store of the same test) is admitted
/// with it, so that nested stores cannot wait for each other.
actor PostgresPortGate {
    static let shared = PostgresPortGate(width: 6)
    @TaskLocal static var isAdmitted = false

    private let width: Int
    private var running = 0
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(width: Int) { self.width = width }

    nonisolated func admitting<T>(_ body: () async throws -> T) async throws -> T {
        if Self.isAdmitted { return try await body() }
        await enter()
        do {
            let result = try await Self.$isAdmitted.withValue(true) { try await body() }
            await leave()
            return result
        } catch {
            await leave()
            throw error
        }
    }

    private func enter() async {
        if running < width {
            running += 1
            return
        }
        // The place is handed over by ``leave()``, which keeps `running` as it is.
        await withCheckedContinuation { waiting.append($0) }
    }

    private func leave() {
        if waiting.isEmpty {
            running -= 1
        } else {
            waiting.removeFirst().resume()
        }
    }
}

/// An engine of its own on the store at `location` (an SQLite file's path or a PostgreSQL URL),
/// as a second process of the app opens the store: containers made with `store:` share one
/// engine per store in a process.
func openOwnEngine(_ location: String) throws -> any StorageEngine {
    PostgresEngine.isStoreURL(location) ? try PostgresEngine(url: location) : try SQLiteEngine(path: location)
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
