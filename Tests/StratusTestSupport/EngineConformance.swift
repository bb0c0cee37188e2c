import Foundation
import Stratus
import Testing

/// The behaviour every ``StorageEngine`` must show, as a list of named test cases.
///
/// Each case opens a fresh store through a factory, then drives it through ``Container``,
/// ``Database`` and the operations, so that every engine (SQLite, PostgreSQL, …) runs exactly
/// the same checks. Run the list as a parameterized test:
///
/// ```swift
/// @Test(arguments: EngineConformance.cases)
/// func conformance(_ testCase: EngineConformance.TestCase) async throws {
///     try await testCase.run { directory in
///         try SQLiteEngine(path: directory.appendingPathComponent("store.sqlite").path)
///     }
/// }
/// ```
public enum EngineConformance {
    /// Opens a new, empty store. `directory` is a fresh temporary directory the engine may use
    /// (an engine with a server store may ignore it and use a fresh database instead).
    public typealias EngineFactory = @Sendable (_ directory: URL) throws -> any StorageEngine

    /// What a case runs against: one fresh store.
    public struct Environment: Sendable {
        public let store: TemporaryStore
        public let engine: any StorageEngine
        /// Opens the case another, separate store of the same engine (in a fresh directory
        /// inside ``store``): for checks that span two stores.
        public let makeAnotherEngine: @Sendable () throws -> any StorageEngine

        /// The container identifier every case uses.
        public static let containerIdentifier = "com.example.conformance"

        /// A container on the store, acting as `user`.
        public func container(user: String = "alice") -> Container {
            Container(identifier: Environment.containerIdentifier, engine: engine, userName: user)
        }
    }

    /// One named conformance check.
    public struct TestCase: Sendable, CustomStringConvertible, CustomTestStringConvertible {
        public let name: String
        let body: @Sendable (Environment) async throws -> Void

        public init(_ name: String, _ body: @escaping @Sendable (Environment) async throws -> Void) {
            self.name = name
            self.body = body
        }

        /// Runs the check on a new store that `factory` opens in a fresh temporary directory,
        /// which is removed afterwards.
        public func run(with factory: @escaping EngineFactory) async throws {
            let store = try TemporaryStore(prefix: "stratus-conformance")
            defer { store.remove() }
            let engine = try factory(store.directory)
            let another: @Sendable () throws -> any StorageEngine = {
                let directory = store.directory.appendingPathComponent("another-\(UUID().uuidString.lowercased())", isDirectory: true)
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
                return try factory(directory)
            }
            try await body(Environment(store: store, engine: engine, makeAnotherEngine: another))
        }

        public var description: String { name }
        public var testDescription: String { name }
    }

    /// Every case, in a stable order.
    public static var cases: [TestCase] {
        roundTripCases + systemFieldCases + savePolicyCases + quietSaveCases + batchCases + validationCases
            + fetchAndDeleteCases + queryCases + pagingCases + scopeCases + queryLanguageCases + ruleCases + streamCases + inventoryCases
            + environmentCases + roleCases + userRecordCases + assetCases + pipelineCases + importPolicyCases + repeatedNameCases + encryptionCases + zoneWideQueryCases
            + sharingCases
            + sharingParticipantCases + sharedHierarchyCases + userDiscoveryCases
    }
}
