import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

@Suite("SQLite subscriptions and notifications", .timeLimit(.minutes(30)))
struct SubscriptionConformanceTests {
    @Test("subscription conformance", arguments: SubscriptionConformance.cases)
    func conformance(_ testCase: EngineConformance.TestCase) async throws {
        try await testCase.run(with: sqliteFactory)
    }

    @Test("the subscription suite covers every area it promises")
    func suiteIsComplete() {
        let names = SubscriptionConformance.cases.map(\.name)
        #expect(Set(names).count == names.count, "case names are unique")
        for area in ["subscriptions:", "notifications:", "feed:", "rules", "firesOnce", "oracle", "compaction", "read", "follow"] {
            #expect(names.contains { $0.contains(area) }, "a case about \(area)")
        }
    }
}
