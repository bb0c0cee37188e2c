import Foundation
@_spi(StratusEngine) import Stratus
import StratusPostgres
import StratusTestSupport
import Testing

/// Reads that may lag go to a hot standby; a lagging standby never makes a change feed skip,
/// repeat or expire (a token ahead of it is read on the primary).
@Suite("PostgreSQL reads from a hot standby", .requiresPostgres, .timeLimit(.minutes(30)))
struct PostgresStandbyTests {
    @Test("queries, exports and change reads on a streaming standby; paused replay: no change skipped, repeated or expired")
    func standbyReads() async throws {
        let primary = try PostgresOwnCluster()
        let standby = try primary.standby()
        let writer = Container(identifier: "com.example.standby", engine: try PostgresEngine(url: primary.url), userName: "writer").publicCloudDatabase
        let readerEngine = try PostgresEngine(url: primary.url, readURL: standby.url)
        let reader = Container(identifier: "com.example.standby", engine: readerEngine, userName: "writer").publicCloudDatabase
        let standbyConnection = try PostgresConnection(url: standby.url)
        let primaryConnection = try PostgresConnection(url: primary.url)
        func caughtUp() throws {
            let target = try primaryConnection.query("SELECT pg_current_wal_lsn()::text")[0].text(0) ?? ""
            // Minutes, not 12 s: replay on a loaded machine can lag far behind without anything
            // being wrong.
            let deadline = ContinuousClock.now + .seconds(300)
            while ContinuousClock.now < deadline {
                if try standbyConnection.query("SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", [.text(target)])[0].bool(0) == true { return }
                usleep(20_000)
            }
            throw PostgresTestServerError(message: "the standby did not catch up")
        }
        // pg_wal_replay_pause() asks for a pause; the standby looks at the request before it
        // replays each record, so no write after it is replayed (the state reads "paused" only
        // once a record waits).
        func pauseReplay() throws {
            _ = try standbyConnection.query("SELECT pg_wal_replay_pause()")
            let state = try standbyConnection.query("SELECT pg_get_wal_replay_pause_state()")[0].text(0)
            guard state == "pause requested" || state == "paused" else { throw PostgresTestServerError(message: "the standby's replay is \(state ?? "in no known state")") }
        }
        // A failure while paused leaves no paused standby to the suites after this one.
        defer { _ = try? standbyConnection.query("SELECT pg_wal_replay_resume()") }

        try await TestDatabase.save(makeRecords("Item", count: 200) { ["n": .int64(Int64($0))] }, in: writer)
        try caughtUp()
        #expect(try await reader.countRecords(matching: Query(recordType: "Item")) == 200)
        let first = try await reader.recordZoneChanges(inZoneWith: .default, since: nil)
        #expect(first.modificationResultsByID.count == 200)

        // Replay paused: the standby lags the primary by 100 records.
        try pauseReplay()
        try await TestDatabase.save(makeRecords("Item", count: 100, prefix: "late") { ["n": .int64(Int64($0))] }, in: writer)
        #expect(try await reader.countRecords(matching: Query(recordType: "Item")) == 200, "the count is the standby's")
        var exported = 0
        for try await _ in reader.allRecords(matching: Query(recordType: "Item")) { exported += 1 }
        #expect(exported == 200, "the export reads the standby's one snapshot")
        let lagging = try await reader.recordZoneChanges(inZoneWith: .default, since: first.changeToken)
        #expect(lagging.modificationResultsByID.isEmpty && lagging.deletions.isEmpty, "nothing new on the lagging standby yet")
        // A token the primary handed out is ahead of the standby: read on the primary, not expired.
        let fromPrimary = try await writer.recordZoneChanges(inZoneWith: .default, since: first.changeToken)
        #expect(fromPrimary.modificationResultsByID.count == 100)
        let ahead = try await reader.recordZoneChanges(inZoneWith: .default, since: fromPrimary.changeToken)
        #expect(ahead.modificationResultsByID.isEmpty, "a token ahead of the standby is answered, not expired")

        // Replay again: the lagging reader goes on from its own token and sees the 100, once.
        _ = try standbyConnection.query("SELECT pg_wal_replay_resume()")
        try caughtUp()
        let resumed = try await reader.recordZoneChanges(inZoneWith: .default, since: lagging.changeToken)
        #expect(Set(resumed.modificationResultsByID.keys.map(\.recordName)) == Set((0..<100).map { recordName("late", $0) }))
        let after = try await reader.recordZoneChanges(inZoneWith: .default, since: resumed.changeToken)
        #expect(after.modificationResultsByID.isEmpty)
        // Writes go to the primary even through the reader's engine.
        try await TestDatabase.save([makeRecord("Item", "via-reader")], in: reader)
        #expect(try await writer.record(for: Record.ID(recordName: "via-reader")).recordType == "Item")

        // Jobs that write what they read read the primary: the lagging standby hides what was just saved.
        try pauseReplay()
        try await TestDatabase.save(makeRecords("Job", count: 50, prefix: "job") { ["n": .int64(Int64($0))] }, in: writer)
        #expect(try await reader.countRecords(matching: Query(recordType: "Job")) == 0, "the standby lags")
        let latest = QueryOperation(query: Query(recordType: "Job"))
        latest.fetchAllResults = true
        latest.readsLatestCommits = true
        #expect(await runQueryPage(latest, on: reader).records.count == 50, "readsLatestCommits reads the primary")
        let updated = try await RecordUpdater(database: reader, query: Query(recordType: "Job"), setting: ["seen": .int64(1)]).run()
        #expect(updated.updated == 50 && updated.failed == 0, "\(updated)")
        let copied = QueryOperation(query: Query(recordType: "Job"))
        copied.fetchAllResults = true
        let save = ModifyRecordsOperation(savingRecordsFrom: copied) { records in
            for record in records { record["seen"] = 2 as Int64 }
            return records
        }
        save.savePolicy = .changedKeys
        let saved = Box(0)
        save.perRecordSaveBlock = { _, result in if case .success = result { saved.update { $0 += 1 } } }
        try await reader.run([copied, save])
        #expect(saved.value == 50, "a pipeline whose stage writes what its query reads reads the primary")
        let deleted = try await RecordDeleter(database: reader, query: Query(recordType: "Job", predicate: QueryPredicate(format: "seen == 2"))).run()
        #expect(deleted.deleted == 50 && deleted.failed == 0, "\(deleted)")
        #expect(try await writer.countRecords(matching: Query(recordType: "Job")) == 0)
        _ = try standbyConnection.query("SELECT pg_wal_replay_resume()")
    }
}
