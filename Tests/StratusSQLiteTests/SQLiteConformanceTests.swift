import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

/// Opens a fresh SQLite store in the conformance suite's temporary directory.
let sqliteFactory: EngineConformance.EngineFactory = { directory in
    try SQLiteEngine(path: directory.appendingPathComponent("store.sqlite").path)
}

@Suite("SQLite engine conformance", .timeLimit(.minutes(30)))
struct SQLiteConformanceTests {
    @Test("conformance", arguments: EngineConformance.cases)
    func conformance(_ testCase: EngineConformance.TestCase) async throws {
        try await testCase.run(with: sqliteFactory)
    }

    @Test("the suite covers every area it promises")
    func suiteIsComplete() {
        let names = EngineConformance.cases.map(\.name)
        #expect(Set(names).count == names.count, "case names are unique")
        #expect(names.count >= 30)
        for area in ["round-trip", "asset", "system fields", "changedKeys", "conflict", "atomic", "invalidArguments", "unknownItem", "deleteSelf", "brute-force", "10,001", "cursor", "private", "shared", "zoneNotFound"] {
            #expect(names.contains { $0.contains(area) }, "a case about \(area)")
        }
    }
}
