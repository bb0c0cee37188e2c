import Foundation
import Stratus
import StratusPostgres
import StratusTestSupport
import Synchronization
import Testing

/// Opens a fresh PostgreSQL store: an engine on a schema of its own in the test server's
/// database. The schemas are kept until the test process ends (the server is throwaway).
let postgresFactory: EngineConformance.EngineFactory = { directory in
    let schema = try PostgresTestServer.makeSchema()
    keptSchemas.withLock { $0.append(schema) }
    return try PostgresEngine(url: schema.url, maximumConnections: 4, assetCacheDirectory: directory.appendingPathComponent("asset-cache"))
}

private let keptSchemas = Mutex<[PostgresTestSchema]>([])

@Suite("PostgreSQL engine conformance", .requiresPostgres, .timeLimit(.minutes(30)))
struct PostgresConformanceTests {
    @Test("conformance", arguments: EngineConformance.cases)
    func conformance(_ testCase: EngineConformance.TestCase) async throws {
        try await testCase.run(with: postgresFactory)
    }

    @Test("zone conformance", arguments: ZoneConformance.cases)
    func zoneConformance(_ testCase: EngineConformance.TestCase) async throws {
        try await testCase.run(with: postgresFactory)
    }

    @Test("subscription conformance", arguments: SubscriptionConformance.cases)
    func subscriptionConformance(_ testCase: EngineConformance.TestCase) async throws {
        try await testCase.run(with: postgresFactory)
    }
}
