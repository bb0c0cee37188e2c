import Foundation
import StratusPostgres
import Synchronization
import Testing

/// The engine a test's stores run on, for tests that run on both (the CLI's end-to-end tests).
///
/// ```swift
/// @Test(arguments: TestEngine.all)
/// func count(engine: TestEngine) async throws {
///     let locations = try await TestStoreLocations(engine: engine, folder: store)   // PostgreSQL: skipped with the reason when no server
///     let path = try await locations.newStore("a")
///     …
/// ```
public enum TestEngine: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgres

    public static let all = allCases

    public var testDescription: String { self == .sqlite ? "SQLite" : "PostgreSQL" }

    /// Cancels the running test case, saying why, when the engine is PostgreSQL and no server
    /// is available (the case is then reported as skipped, not passed). The first call may
    /// start the server: it waits on a thread of its own, not on the cooperative pool, which
    /// other tests need meanwhile.
    public func requireAvailable() async throws {
        guard self == .postgres else { return }
        if !(try await ChildProcess.onOwnThread { PostgresTestServer.isAvailable }) {
            try Test.cancel("needs PostgreSQL (\(PostgresTestServer.unavailableReason ?? "no server")): install the server (Debian: postgresql) or set STRATUS_TEST_POSTGRES_URL")
        }
    }
}

/// Where a test's stores of one engine live: SQLite files in the test's temporary folder, or
/// fresh PostgreSQL schemas, dropped when this value goes away.
public final class TestStoreLocations: Sendable {
    public let engine: TestEngine
    public let folder: TemporaryStore
    private let schemas = Mutex<[PostgresTestSchema]>([])

    /// - Throws: cancels the test case when the engine is PostgreSQL and no server is available.
    public init(engine: TestEngine, folder: TemporaryStore) async throws {
        try await engine.requireAvailable()
        self.engine = engine
        self.folder = folder
    }

    /// A new store location (nothing is created): `NAME.sqlite` in the folder, or the URL of a
    /// new PostgreSQL schema (made on a thread of its own: the first one creates the test
    /// database, which takes a while on a busy machine).
    ///
    /// - Throws: when the schema cannot be made.
    public func newStore(_ name: String) async throws -> String {
        guard engine == .postgres else { return folder.path(name.hasSuffix(".sqlite") ? name : name + ".sqlite") }
        let schema = try await ChildProcess.onOwnThread { try PostgresTestServer.makeSchema() }
        schemas.withLock { $0.append(schema) }
        return schema.url
    }

    /// Whether a store exists at `location`: the SQLite file, or Stratus's tables in the
    /// PostgreSQL schema.
    public func exists(_ location: String) -> Bool {
        guard PostgresEngine.isStoreURL(location) else { return FileManager.default.fileExists(atPath: location) }
        guard let connection = try? PostgresConnection(url: location),
              let rows = try? connection.query("SELECT to_regclass('meta') IS NOT NULL") else { return false }
        return (try? rows.first?.bool(0)) == true
    }
}
