import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Synchronization
import Testing

@Suite("Change tracking operations", .timeLimit(.minutes(30)))
struct ChangeTrackingTests {
    static let photos = RecordZone.ID(zoneName: "Photos")
    static let notes = RecordZone.ID(zoneName: "Notes")

    @Test("several zones with their own configurations: per-zone blocks in order, a failing zone alone, the final block last")
    func severalZones() async throws {
        try await ZoneTestStore.with { fixture async throws in
            let database = fixture.container().privateCloudDatabase
            _ = try await database.modifyRecordZones(saving: [RecordZone(zoneID: Self.photos), RecordZone(zoneID: Self.notes)], deleting: [])
            try await TestDatabase.save((0..<5).map { makeRecord("Photo", "p\($0)", zoneID: Self.photos, ["title": .string("t\($0)"), "size": .int64(Int64($0))]) }, in: database)
            let notesToken = try #require(await fetchChanges(Self.notes, since: nil, in: database).token)
            try await database.save(makeRecord("Note", "n1", zoneID: Self.notes))
            try await database.deleteRecord(withID: Record.ID(recordName: "p0", zoneID: Self.photos))
            try await database.save(makeRecord("Note", "n2", zoneID: Self.notes))

            let missing = RecordZone.ID(zoneName: "Missing")
            let op = FetchRecordZoneChangesOperation(
                recordZoneIDs: [Self.photos, missing, Self.notes],
                configurationsByRecordZoneID: [
                    Self.photos: .init(previousServerChangeToken: nil, resultsLimit: 2, desiredKeys: ["title"]),
                    Self.notes: .init(previousServerChangeToken: notesToken),
                ])
            let log = BlockLog<String>()
            let keys = Box<Set<String>>([])
            op.recordWasChangedBlock = { id, result in
                if case .success(let record) = result { keys.update { $0.formUnion(record.allKeys()) } }
                log.record("changed \(id.recordName)")
            }
            op.recordWithIDWasDeletedBlock = { id, type in log.record("deleted \(id.recordName) \(type)") }
            op.recordZoneChangeTokensUpdatedBlock = { id, token, _ in log.record("token \(id.zoneName) \(token != nil)") }
            op.recordZoneFetchResultBlock = { id, result in
                switch result {
                case .success(let (_, _, moreComing)): log.record("zone \(id.zoneName) done moreComing=\(moreComing)")
                case .failure(let error): log.record("zone \(id.zoneName) \(stratusError(error)?.code.description ?? "?")")
                }
            }
            let final = Box<StratusError?>(nil)
            op.fetchRecordZoneChangesResultBlock = { result in
                final.value = finalZoneError(result)
                log.record("final")
            }
            await run(op, on: database)
            #expect(log.events == [
                "changed p1", "changed p2", "token Photos true",
                "changed p3", "changed p4", "token Photos true",
                "deleted p0 Photo", "zone Photos done moreComing=false",
                "zone Missing zoneNotFound",
                "changed n1", "changed n2", "zone Notes done moreComing=false",
                "final",
            ])
            #expect(log.overlaps == 0)
            #expect(keys.value == ["title"])
            #expect(final.value?.code == .partialFailure)
            #expect(final.value?.partialErrorsByZoneID.keys.map(\.zoneName) == ["Missing"])
        }
    }

    @Test("fetchAllChanges off: one batch per zone, moreComing, and no intermediate token block")
    func oneBatchAtATime() async throws {
        try await ZoneTestStore.with { fixture async throws in
            let database = fixture.container().privateCloudDatabase
            try await database.save(RecordZone(zoneID: Self.photos))
            try await TestDatabase.save(makeRecords("Photo", count: 10, zoneID: Self.photos) { _ in [:] }, in: database)
            let first = await fetchChanges(Self.photos, since: nil, in: database, resultsLimit: 4, fetchAllChanges: false)
            #expect(first.events.count == 4)
            #expect(first.moreComing)
            #expect(first.tokenUpdates == 0)
            let rest = await fetchChanges(Self.photos, since: first.token, in: database, resultsLimit: 100, fetchAllChanges: false)
            #expect(rest.events.count == 6)
            #expect(rest.moreComing == false)
        }
    }

    @Test("every intermediate token resumes exactly after the changes delivered before it")
    func intermediateTokensResume() async throws {
        try await ZoneTestStore.with { fixture async throws in
            let database = fixture.container().privateCloudDatabase
            try await database.save(RecordZone(zoneID: Self.photos))
            try await TestDatabase.save(makeRecords("Photo", count: 23, zoneID: Self.photos) { _ in [:] }, in: database)
            let whole = await fetchChanges(Self.photos, since: nil, in: database).events

            let progress = Box<[(delivered: Int, token: ServerChangeToken)]>([])
            let delivered = Box(0)
            let op = FetchRecordZoneChangesOperation(recordZoneIDs: [Self.photos], configurationsByRecordZoneID: [Self.photos: .init(resultsLimit: 5)])
            op.recordWasChangedBlock = { _, _ in delivered.update { $0 += 1 } }
            op.recordZoneChangeTokensUpdatedBlock = { _, token, _ in
                if let token { progress.update { $0.append((delivered.value, token)) } }
            }
            await run(op, on: database)
            #expect(progress.value.map(\.delivered) == [5, 10, 15, 20])
            for (count, token) in progress.value {
                let resumed = await fetchChanges(Self.photos, since: try ServerChangeToken(serialized: token.serialized), in: database)
                #expect(Array(whole.prefix(count)) + resumed.events == whole)
            }
        }
    }

    @Test("cancelling mid-fetch stops promptly; resuming from the last token loses nothing")
    func cancellationKeepsTokensSafe() async throws {
        try await ZoneTestStore.with { fixture async throws in
            let database = fixture.container().privateCloudDatabase
            try await database.save(RecordZone(zoneID: Self.photos))
            try await TestDatabase.save(makeRecords("Photo", count: 60, zoneID: Self.photos) { _ in [:] }, in: database)
            let whole = await fetchChanges(Self.photos, since: nil, in: database).events

            let op = FetchRecordZoneChangesOperation(recordZoneIDs: [Self.photos], configurationsByRecordZoneID: [Self.photos: .init(resultsLimit: 10)])
            let seen = Box<[String]>([])
            let lastToken = Box<(Int, ServerChangeToken)?>(nil)
            let zoneResult = Box<StratusError.Code?>(nil)
            let final = Box<StratusError?>(nil)
            op.recordWasChangedBlock = { [weak op] id, _ in
                let count = seen.update { $0.append("+" + id.recordName); return $0.count }
                if count == 25 { op?.cancel() }
            }
            op.recordZoneChangeTokensUpdatedBlock = { _, token, _ in if let token { lastToken.value = (seen.value.count, token) } }
            op.recordZoneFetchResultBlock = { _, result in zoneResult.value = errorCode(result) }
            op.fetchRecordZoneChangesResultBlock = { final.value = finalZoneError($0) }
            await run(op, on: database)
            #expect(seen.value.count == 30, "the batch in progress is finished, no further batch starts")
            #expect(zoneResult.value == .operationCancelled)
            #expect(final.value?.code == .operationCancelled)
            #expect(final.value?.completedItemCount == 30)
            let (count, token) = try #require(lastToken.value)
            #expect(count == 30)
            let resumed = await fetchChanges(Self.photos, since: token, in: database)
            #expect(seen.value + resumed.events == whole)
        }
    }

    @Test("changed records feed a pipeline: a zone's changes copied into another zone")
    func changesFeedAPipeline() async throws {
        try await ZoneTestStore.with { fixture async throws in
            let database = fixture.container().privateCloudDatabase
            _ = try await database.modifyRecordZones(saving: [RecordZone(zoneID: Self.photos), RecordZone(zoneID: Self.notes)], deleting: [])
            try await TestDatabase.save((0..<3).map { makeRecord("Photo", "p\($0)", zoneID: Self.photos, ["n": .int64(Int64($0))]) }, in: database)
            let changes = FetchRecordZoneChangesOperation(recordZoneIDs: [Self.photos])
            let copy = ModifyRecordsOperation(savingRecordsFrom: changes) { records in
                records.map { makeRecord("Copy", $0.recordID.recordName, zoneID: Self.notes, ["n": $0.fieldValue(forKey: "n")!]) }
            }
            database.add(changes)
            database.add(copy)
            await waitUntilFinished([changes, copy])
            let copied = try await TestDatabase.queryAll(Query(recordType: "Copy"), in: database, zoneID: Self.notes)
            #expect(copied.map { $0["n"] as? Int64 } == [0, 1, 2])
        }
    }

    @Test("the convenience forms: recordZoneChanges and databaseChanges, batch by batch")
    func convenienceForms() async throws {
        try await ZoneTestStore.with { fixture async throws in
            let database = fixture.container().privateCloudDatabase
            try await database.save(RecordZone(zoneID: Self.photos))
            try await TestDatabase.save(makeRecords("Photo", count: 5, zoneID: Self.photos) { _ in [:] }, in: database)
            try await database.deleteRecord(withID: Record.ID(recordName: recordName("r", 4), zoneID: Self.photos))

            var token: ServerChangeToken?
            var modified: [String] = []
            var deleted: [Record.ID] = []
            var more = true
            var calls = 0
            while more {
                let batch = try await database.recordZoneChanges(inZoneWith: Self.photos, since: token, resultsLimit: 2)
                modified += try batch.modificationResultsByID.map { try $0.value.get().record.recordID.recordName }
                deleted += batch.deletions.map(\.recordID)
                #expect(batch.deletions.allSatisfy { $0.recordType == "Photo" })
                (token, more) = (batch.changeToken, batch.moreComing)
                calls += 1
            }
            #expect(Set(modified) == Set((0..<4).map { recordName("r", $0) }))
            #expect(deleted == [Record.ID(recordName: recordName("r", 4), zoneID: Self.photos)])
            #expect(calls == 3)

            let missing = await caughtError { try await database.recordZoneChanges(inZoneWith: Self.notes, since: nil) }
            #expect(stratusError(missing)?.code == .zoneNotFound)
            let otherZone = await caughtError { try await database.recordZoneChanges(inZoneWith: Self.notes, since: token) }
            #expect(stratusError(otherZone)?.code == .changeTokenExpired)

            let (modifications, deletions, databaseToken, moreComing) = try await database.databaseChanges(since: nil, resultsLimit: 10)
            #expect(modifications.map(\.zoneID) == [Self.photos])
            #expect(deletions.isEmpty && !moreComing)
            try await database.deleteRecordZone(withID: Self.photos)
            let after = try await database.databaseChanges(since: databaseToken)
            #expect(after.deletions.map(\.zoneID) == [Self.photos])
        }
    }

    /// The exactly-once property against writers that are other processes: three `churn`
    /// writers save, update and delete records in one zone while this process follows the
    /// zone's tokens in small random batches (each token going through its text form, as a
    /// process restart would); `churn verify` then checks what was read against the writers'
    /// own logs: each committed state once, per record in commit order, nothing lost.
    @Test("exactly once, in order, while writer processes write concurrently", .timeLimit(.minutes(30)))
    func exactlyOnceUnderConcurrentWriters() async throws {
        let churn = try ChildProcess.builtExecutable("churn")
        try await ZoneTestStore.with { fixture async throws in
            let database = fixture.container().publicCloudDatabase
            let zone = RecordZone.ID(zoneName: "Feed")
            try await database.save(RecordZone(zoneID: zone))
            let seed = UInt64.random(in: 0..<1_000_000)
            // Writers and reader start together on a thread of their own, so that other tests
            // occupying the cooperative pool cannot keep the reader from overlapping the writers.
            // Each writer's shell stops itself before it becomes churn: the reader lets them go
            // (see followChanges), so that the overlap does not depend on who is scheduled first.
            let logs = ["a", "b", "c"].map { fixture.store.path("\($0).log") }
            let (writers, lines, readsWhileWriting) = try await ChildProcess.onOwnThread {
                let writers = try ["a", "b", "c"].map { name in
                    try ZoneTestProgram.start("/bin/sh", ["-c", #"kill -STOP $$ && exec "$0" "$@""#, churn,
                        "--store", fixture.path, "--container", ZoneTestStore.identifier, "--zone", "Feed", "--user", "w\(name)",
                        "--writer", name, "--operations", "250", "--seed", "\(seed)\(name.unicodeScalars.first!.value)",
                        "--pause-ms", "4", "--log", fixture.store.path("\(name).log"),
                    ], in: fixture.store)
                }
                let (lines, reads) = try Self.followChanges(in: zone, of: database, whileRunning: writers, logs: logs)
                return (writers, lines, reads)
            }
            for writer in writers {
                let status = await writer.wait()
                #expect(status.exitCode == 0, "writer failed: \(status.stderr)")
            }

            let export = fixture.store.url("read.ndjson")
            try Data(lines.utf8).write(to: export)
            let check = try await ZoneTestProgram.run(churn, ["verify"] + ["a", "b", "c"].flatMap { ["--log", fixture.store.path("\($0).log")] } + [export.path], in: fixture.store)
            #expect(check.exitCode == 0, "\(check.stdout)\n\(check.stderr)")
            #expect(check.stdout.contains(": ok"), "\(check.stdout)")
            #expect(readsWhileWriting > 3, "the reader overlapped the writers (\(readsWhileWriting) non-empty reads)")
        }
    }

    /// Follows a zone's tokens in small random batches while the writers run, then until
    /// nothing remains, each token going through its text form. Answers what was read as
    /// export lines for `churn verify`, and how many reads found changes while writers ran.
    /// Blocks its thread (it runs each operation on it): call it on its own thread.
    ///
    /// The writers come stopped (SIGSTOP). The first reads are made certain to overlap them,
    /// whatever the machine's load: the writers go on until their `logs` show more commits,
    /// are stopped again (perhaps inside a transaction) and a batch is read while they are
    /// alive. Then they run freely while the reading goes on at random moments.
    static func followChanges(in zone: RecordZone.ID, of database: Database, whileRunning writers: [ChildProcess], logs: [String]) throws -> (String, Int) {
        var token: String?
        var lines = ""
        func readBatch() throws -> Bool {
            let previous = try token.map { try ServerChangeToken(serialized: $0) }
            let config = FetchRecordZoneChangesOperation.ZoneConfiguration(previousServerChangeToken: previous, resultsLimit: Int.random(in: 1...25))
            let op = FetchRecordZoneChangesOperation(recordZoneIDs: [zone], configurationsByRecordZoneID: [zone: config])
            op.fetchAllChanges = false
            op.database = database
            let batch = Box("")
            let end = Box<Result<(serverChangeToken: ServerChangeToken, clientChangeTokenData: Data?, moreComing: Bool), any Error>?>(nil)
            op.recordWasChangedBlock = { id, result in
                guard case .success(let record) = result else { return }
                batch.update { $0 += "{\"recordName\":\"\(id.recordName)\",\"recordChangeTag\":\"\(record.recordChangeTag!)\",\"fields\":{\"version\":{\"value\":\(record["version"] as! Int64)}}}\n" }
            }
            op.recordWithIDWasDeletedBlock = { id, _ in batch.update { $0 += "{\"recordName\":\"\(id.recordName)\",\"deleted\":true}\n" } }
            op.recordZoneFetchResultBlock = { _, result in end.value = result }
            // Started here rather than on a queue; its work runs on a thread of its own, which
            // this (dedicated) thread waits for.
            op.start()
            op.waitUntilFinished()
            guard let result = end.value else { throw StratusError(.internalError, "no zone result") }
            let (newToken, _, moreComing) = try result.get()
            lines += batch.value
            token = newToken.serialized
            return moreComing || !batch.value.isEmpty
        }
        func logged() -> Int {
            logs.reduce(0) { count, path in count + (FileManager.default.contents(atPath: path).map { $0.filter { $0 == 0x0A }.count } ?? 0) }
        }
        func stopped(_ writer: ChildProcess) -> Bool {
            // The state letter after the command's closing parenthesis in /proc/PID/stat.
            guard writer.isRunning, let stat = try? String(contentsOfFile: "/proc/\(writer.pid)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { return !writer.isRunning }
            return stat[close...].dropFirst(2).first == "T"
        }
        // A SIGCONT that came before a shell stopped itself would be lost.
        while !writers.allSatisfy(stopped) { usleep(1_000) }
        var readsWhileWriting = 0
        for _ in 0..<5 {
            let before = logged()
            for writer in writers { writer.signal(SIGCONT) }
            while logged() == before && writers.contains(where: \.isRunning) { usleep(1_000) }
            for writer in writers { writer.signal(SIGSTOP) }
            // Stopped before their last operation: what they committed since the last read is
            // there to be read, while they are still writing.
            let writing = writers.contains(where: \.isRunning)
            if try readBatch() && writing { readsWhileWriting += 1 }
        }
        for writer in writers { writer.signal(SIGCONT) }
        while writers.contains(where: \.isRunning) {
            if try readBatch() { readsWhileWriting += 1 }
            usleep(UInt32.random(in: 0...3_000))
        }
        // Every writer has exited, so every change is committed: read to the end.
        while try readBatch() {}
        return (lines, readsWhileWriting)
    }
}
