import CloudKit
import Foundation
import StratusTestSupport

/// A fresh store of one engine for a CloudKit program under test: its containers are what
/// `CKContainer(identifier:)` opens for an app, given the test's store instead of
/// `$STRATUS_STORE`, acting as the user the test names.
struct TestCloud {
    /// An SQLite file's path or a PostgreSQL URL.
    let store: String
    /// The test's temporary folder, for files an app writes (assets).
    let folder: TemporaryStore

    /// The container `identifier` in this store, acting as `user`.
    func container(_ identifier: String = "iCloud.com.example.gallery", user: String = "ada") throws -> CKContainer {
        try CKContainer(identifier: identifier, store: store, userName: user)
    }
}

/// A fresh store of `engine` (an SQLite file in the test's folder, or a schema of the
/// PostgreSQL server the tests start) for one test.
///
/// ```swift
/// @Test(arguments: TestEngine.all)
/// func savesANote(engine: TestEngine) async throws {
///     try await withTestCloud(on: engine) { cloud in
///         let database = try cloud.container().privateCloudDatabase
///     }
/// }
/// ```
///
/// - Throws: cancels the test case when the engine is PostgreSQL and no server is available.
func withTestCloud<T>(on engine: TestEngine, _ body: (TestCloud) async throws -> T) async throws -> T {
    try await TemporaryStore.with(prefix: "cloudkit-names") { folder in
        let locations = try await TestStoreLocations(engine: engine, folder: folder)
        // The PostgreSQL schema is dropped when `locations` goes: not before the body is done.
        defer { withExtendedLifetime(locations) {} }
        return try await body(TestCloud(store: try await locations.newStore("store"), folder: folder))
    }
}

/// Waits for a completion handler, as a test of callback code does.
func awaitCompletion<T>(_ start: (@escaping (T) -> Void) -> Void) async -> T {
    await withCheckedContinuation { (continuation: CheckedContinuation<T, Never>) in
        start { continuation.resume(returning: $0) }
    }
}
