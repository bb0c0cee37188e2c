import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

@Suite("SQLite zones and change tracking", .timeLimit(.minutes(30)))
struct ZoneConformanceTests {
    private static let factory: EngineConformance.EngineFactory = { directory in
        try SQLiteEngine(path: directory.appendingPathComponent("store.sqlite").path)
    }

    @Test("zone conformance", arguments: ZoneConformance.cases)
    func conformance(_ testCase: EngineConformance.TestCase) async throws {
        try await testCase.run(with: Self.factory)
    }

    @Test("the zone suite covers every area it promises")
    func suiteIsComplete() {
        let names = ZoneConformance.cases.map(\.name)
        #expect(Set(names).count == names.count, "case names are unique")
        for area in ["zones:", "changes:", "expiry:", "capabilities:", "database changes:", "compaction", "zoneNotFound", "desiredKeys", "serialized"] {
            #expect(names.contains { $0.contains(area) }, "a case about \(area)")
        }
    }

    @Test("tokens survive reopening the store, and a token of another store expires")
    func tokensFollowTheStoreFile() async throws {
        try await TemporaryStore.with { store in
            let zone = RecordZone.ID(zoneName: "Photos")
            let first = Container(identifier: "com.example.zones", engine: try SQLiteEngine(path: store.path("a.sqlite")), userName: "alice").privateCloudDatabase
            try await first.save(RecordZone(zoneID: zone))
            try await first.save(makeRecord("Photo", "p1", zoneID: zone))
            let token = try #require(await fetchChanges(zone, since: nil, in: first).token)
            try await first.save(makeRecord("Photo", "p2", zoneID: zone))

            // A second engine on the same file (another process, as far as the store knows).
            let reopened = Container(identifier: "com.example.zones", engine: try SQLiteEngine(path: store.path("a.sqlite")), userName: "alice").privateCloudDatabase
            #expect(await fetchChanges(zone, since: token, in: reopened).events == ["+p2"])

            // The same container, user and zone name in another store file is another history.
            let other = Container(identifier: "com.example.zones", engine: try SQLiteEngine(path: store.path("b.sqlite")), userName: "alice").privateCloudDatabase
            try await other.save(RecordZone(zoneID: zone))
            try await other.save(makeRecord("Photo", "p1", zoneID: zone))
            try await other.save(makeRecord("Photo", "p3", zoneID: zone))
            #expect(stratusError(await fetchChanges(zone, since: token, in: other).error)?.code == .changeTokenExpired)
            let databaseToken = try await first.databaseChanges(since: nil).changeToken
            let foreignDatabase = await caughtError { try await other.databaseChanges(since: databaseToken) }
            #expect(stratusError(foreignDatabase)?.code == .changeTokenExpired)
        }
    }

    @Test("the engine compacts tombstones older than its retention on its own")
    func automaticCompaction() async throws {
        try await TemporaryStore.with { store in
            let engine = try SQLiteEngine(path: store.path(), tombstoneRetention: .zero)
            #expect(engine.tombstoneRetention == .zero)
            let database = Container(identifier: "com.example.zones", engine: engine, userName: "alice").privateCloudDatabase
            try await database.save(makeRecord("Note", "n1"))
            let token = try #require(await fetchChanges(.default, since: nil, in: database).token)
            // The first write of this engine compacts; the deletion's tombstone goes at once.
            try await database.deleteRecord(withID: Record.ID(recordName: "n1"))
            #expect(stratusError(await fetchChanges(.default, since: token, in: database).error)?.code == .changeTokenExpired)
            #expect(await fetchChanges(.default, since: nil, in: database).events.isEmpty)

            let keeping = try SQLiteEngine(path: store.path("keep.sqlite"), tombstoneRetention: nil)
            let kept = Container(identifier: "com.example.zones", engine: keeping, userName: "alice").privateCloudDatabase
            try await kept.save(makeRecord("Note", "n1"))
            try await kept.deleteRecord(withID: Record.ID(recordName: "n1"))
            #expect(await fetchChanges(.default, since: nil, in: kept).events == ["-n1:Note"])
            #expect(SQLiteEngine.defaultTombstoneRetention == .seconds(30 * 86_400))
        }
    }

    @Test("a zone's change numbering stays in commit order across many small transactions")
    func numberingFollowsCommits() async throws {
        try await TemporaryStore.with { store in
            let database = Container(identifier: "com.example.zones", engine: try SQLiteEngine(path: store.path()), userName: "alice").publicCloudDatabase
            let zone = RecordZone.ID(zoneName: "Feed")
            try await database.save(RecordZone(zoneID: zone))
            // Writers on several tasks; each record is saved once, so every save is one change.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for writer in 0..<4 {
                    group.addTask {
                        for i in 0..<25 { try await database.save(makeRecord("Post", "w\(writer)-\(i)", zoneID: zone)) }
                    }
                }
                try await group.waitForAll()
            }
            let changes = await fetchChanges(zone, since: nil, in: database, resultsLimit: 7)
            #expect(changes.events.count == 100)
            #expect(Set(changes.events).count == 100)
            // Each writer's saves committed in order, so they arrive in order.
            for writer in 0..<4 {
                let mine = changes.events.filter { $0.hasPrefix("+w\(writer)-") }
                #expect(mine == (0..<25).map { "+w\(writer)-\($0)" })
            }
        }
    }
}
