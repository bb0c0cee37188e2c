import Foundation
@_spi(StratusEngine) import Stratus
import Testing

// MARK: - Pipelines: positions committed with the writes, resumed exactly once

extension EngineConformance {
    static let pipelineCases: [TestCase] = [
        TestCase("a job's text position commits with its transaction: rolled back with it, replaced, read back, removed", jobPositionText),
        TestCase("a checkpointed query pipeline stopped mid-way goes on after the last batch it committed: every record changed exactly once", checkpointedQueryPipeline),
        TestCase("a checkpointed query pipeline over every zone stopped mid-way goes on after its last batch, reads each zone from one snapshot, refuses an old default-zone checkpoint; DeleteRecordsOperation(query:) without a zone deletes in the default zone", checkpointedZoneWidePipeline),
        TestCase("a checkpointed change-feed pipeline resumes after its token; a record written twice would fail on its change tag", checkpointedChangePipeline),
        TestCase("a change-feed pipeline that saves into the zone it reads ends where the zone was when it began: every record saved once; the next feed reads those saves", changeFeedSavingIntoItsZone),
        TestCase("a pipeline's deletions, like its saves, check change tags: a record changed after it was read is not deleted but fails serverRecordChanged", pipelineDeletesCheckTags),
        TestCase("a pipeline deleting many records read ahead: .deleteSelf children go with their parents, a record changed since stays, each deletion is one change after the read, and a name deleted can be saved again", pipelineDeletesMany),
    ]

    /// Records held in memory, as read earlier (with the change tags they had then).
    final class HeldRecords: RecordSource, @unchecked Sendable {
        private var pending: [Record]
        init(_ records: [Record]) { pending = records.reversed() }
        func nextItem() throws -> RecordSourceItem? { pending.popLast().map { .record($0, line: 0) } }
        var bytesRead: Int { 0 }
        func willSave(as mode: RecordWriteMode) {}
    }

    /// Deletes `records`, as read earlier, through a pipeline (`ReadRecordsOperation` →
    /// `DeleteRecordsOperation`, whose deletions check the tags they were read with): each
    /// record's result.
    static func deleteThroughPipeline(_ records: [Record], in database: Database) async -> [Record.ID: Result<Void, any Error>] {
        let source = ReadRecordsOperation(source: HeldRecords(records))
        let purge = DeleteRecordsOperation(deletingRecordsFrom: source)
        let results = Box<[Record.ID: Result<Void, any Error>]>([:])
        purge.perRecordDeleteBlock = { id, result in results.value[id] = result }
        let queue = OperationQueue()
        for stage in [source, purge] as [DatabaseOperation] {
            stage.database = database
            queue.addOperation(stage)
        }
        await waitUntilFinished([source, purge])
        return results.value
    }

    static func pipelineDeletesCheckTags(_ env: Environment) async throws {
        let database = env.container().privateCloudDatabase
        let zone = RecordZone.ID(zoneName: "Purge")
        _ = try await database.modifyRecordZones(saving: [RecordZone(zoneID: zone)], deleting: [])
        try await TestDatabase.save(makeRecords("Doc", count: 4, zoneID: zone) { _ in ["doomed": .int64(1)] }, in: database)
        let read = try await TestDatabase.queryAll(Query(recordType: "Doc"), in: database, zoneID: zone)
        #expect(read.count == 4)
        // Rescued by someone else after the purge read it.
        let rescued = try #require(read.first)
        let fresh = try await database.record(for: rescued.recordID)
        fresh["doomed"] = 0
        try await database.save(fresh)

        let results = await deleteThroughPipeline(read, in: database)
        #expect(results.count == 4)
        guard case .failure(let error as StratusError)? = results[rescued.recordID] else {
            Issue.record("the rescued record's deletion failed: \(String(describing: results[rescued.recordID]))")
            return
        }
        #expect(error.code == .serverRecordChanged && error.serverRecord == nil, "the stored record is not handed to a deleter: \(error)")
        let left = try await TestDatabase.queryAll(Query(recordType: "Doc"), in: database, zoneID: zone)
        #expect(left.map(\.recordID) == [rescued.recordID], "the others are deleted, the rescued record stays")
    }

    static func pipelineDeletesMany(_ env: Environment) async throws {
        let database = env.container().privateCloudDatabase
        // A zone whose records have .deleteSelf children, and one whose records have none.
        let linked = RecordZone.ID(zoneName: "Linked"), plain = RecordZone.ID(zoneName: "Plain")
        _ = try await database.modifyRecordZones(saving: [RecordZone(zoneID: linked), RecordZone(zoneID: plain)], deleting: [])
        try await TestDatabase.save(makeRecords("Doc", count: 30, prefix: "d", zoneID: linked) { ["n": .int64(Int64($0))] }, in: database)
        try await TestDatabase.save(makeRecords("Note", count: 10, prefix: "c", zoneID: linked) {
            ["of": .reference(reference(recordName("d", $0 * 3), .deleteSelf, zoneID: linked))]
        }, in: database)
        try await TestDatabase.save(makeRecords("Doc", count: 1_500, prefix: "p", zoneID: plain) { ["n": .int64(Int64($0))] }, in: database)

        func purge(_ zone: RecordZone.ID, changing changed: String? = nil) async throws -> (results: [Record.ID: Result<Void, any Error>], start: ServerChangeToken) {
            let read = try await TestDatabase.queryAll(Query(recordType: "Doc"), in: database, zoneID: zone)
            if let changed {
                let fresh = try await database.record(for: Record.ID(recordName: changed, zoneID: zone))
                fresh["n"] = Int64(-1)
                try await database.save(fresh)
            }
            let start = try await database.recordZoneChanges(inZoneWith: zone, since: nil).changeToken
            return (await deleteThroughPipeline(read, in: database), start)
        }
        func deletions(in zone: RecordZone.ID, since start: ServerChangeToken) async throws -> (names: [String], end: ServerChangeToken?) {
            var token: ServerChangeToken? = start, more = true, names: [String] = []
            while more {
                let batch = try await database.recordZoneChanges(inZoneWith: zone, since: token, resultsLimit: 200)
                #expect(batch.modificationResultsByID.isEmpty, "\(zone.zoneName): no record changed")
                names += batch.deletions.map(\.recordID.recordName)
                token = batch.changeToken
                more = batch.moreComing
            }
            return (names, token)
        }

        let rescued = recordName("d", 5)
        let linkedPurge = try await purge(linked, changing: rescued)
        #expect(linkedPurge.results.count == 30)
        for (id, result) in linkedPurge.results {
            switch result {
            case .success: #expect(id.recordName != rescued)
            case .failure(let error): #expect(id.recordName == rescued && (error as? StratusError)?.code == .serverRecordChanged, "\(id.recordName): \(error)")
            }
        }
        #expect(TestDatabase.names(try await TestDatabase.queryAll(Query(recordType: "Doc"), in: database, zoneID: linked)) == [rescued])
        #expect(try await TestDatabase.queryAll(Query(recordType: "Note"), in: database, zoneID: linked).isEmpty, "every child went with its parent")
        let linkedDeletions = try await deletions(in: linked, since: linkedPurge.start).names
        expectSameOrder(linkedDeletions.sorted(), ((0..<30).filter { $0 != 5 }.map { recordName("d", $0) } + (0..<10).map { recordName("c", $0) }).sorted(),
                        "each deletion, children included, once")

        let plainPurge = try await purge(plain)
        #expect(plainPurge.results.count == 1_500 && plainPurge.results.values.allSatisfy { if case .success = $0 { true } else { false } })
        #expect(try await database.countRecords(matching: Query(recordType: "Doc"), inZoneWith: plain) == 0)
        let plainDeletions = try await deletions(in: plain, since: plainPurge.start)
        expectSameOrder(plainDeletions.names, (0..<1_500).map { recordName("p", $0) }, "each deletion once, in the order deleted")

        // A name deleted is free: saved again, it is a new record, and a change after the deletion.
        let again = try await database.save(makeRecord("Doc", recordName("p", 7), zoneID: plain, ["n": .int64(7)]))
        #expect(again["n"] as? Int64 == 7)
        let after = try await database.recordZoneChanges(inZoneWith: plain, since: plainDeletions.end)
        #expect(after.modificationResultsByID.keys.map(\.recordName) == [recordName("p", 7)] && after.deletions.isEmpty)
    }

    static func jobPositionText(_ env: Environment) async throws {
        let engine = env.engine
        let context = env.container().publicCloudDatabase.context
        struct Rollback: Error {}
        _ = try? engine.writeRecords(in: context) { transaction in
            try transaction.saveJobProgress("job", position: 1, text: "stc2_rolled-back")
            throw Rollback()
        }
        #expect(try engine.jobProgressText("job") == nil)
        #expect(try engine.jobProgress("job") == nil)
        try engine.writeRecords(in: context) { try $0.saveJobProgress("job", position: 2, text: "stc2_first") }
        #expect(try engine.jobProgressText("job") == "stc2_first")
        #expect(try engine.jobProgress("job") == 2)
        try engine.writeRecords(in: context) { try $0.saveJobProgress("job", position: 3, text: "stc2_second") }
        #expect(try engine.jobProgressText("job") == "stc2_second")
        // An import's progress has no text.
        try engine.writeRecords(in: context) { try $0.saveJobProgress("import", position: 4_000, text: nil) }
        #expect(try engine.jobProgress("import") == 4_000)
        #expect(try engine.jobProgressText("import") == nil)
        try engine.removeJobProgress("job")
        #expect(try engine.jobProgressText("job") == nil)
        #expect(try engine.jobProgress("job") == nil)
    }

    /// Runs a query → bump → save pipeline with `checkpoint`; cancels it from the save once it
    /// saved `stopAfter` records. Answers the save's final error.
    private static func bumpPipeline(
        _ database: Database, checkpoint: PipelineCheckpoint?, stopAfter: Int?, sortedBy sort: [RecordSortDescriptor] = []
    ) async throws -> StratusError? {
        let counters = Query(recordType: "Counter")
        counters.sortDescriptors = sort
        let query = QueryOperation(query: counters)
        query.fetchAllResults = true
        query.resultsLimit = 25
        query.checkpoint = checkpoint
        let bump = TransformOperation(transforming: query) { (records: [Record]) -> [Record] in
            for record in records {
                let count: Int64 = if case .int64(let n)? = record.fieldValue(forKey: "count") { n } else { 0 }
                record["count"] = count + 1
            }
            return records
        }
        let save = ModifyRecordsOperation(savingRecordsFrom: bump)
        save.isAtomic = false
        let saved = Box(0)
        let stages = Box<[Operation]>([])
        save.perRecordSaveBlock = { _, result in
            guard case .success = result else { return }
            if let stopAfter, saved.update({ $0 += 1; return $0 }) == stopAfter { stages.value.forEach { $0.cancel() } }
        }
        stages.value = [query, bump, save]
        let final = Box<Result<Void, any Error>?>(nil)
        save.modifyRecordsResultBlock = { final.value = $0 }
        let queues = (0..<3).map { _ in OperationQueue() }
        for (stage, queue) in zip([query, bump, save] as [DatabaseOperation], queues) {
            queue.maxConcurrentOperationCount = 1
            stage.database = database
            queue.addOperation(stage)
        }
        await waitUntilFinished([query, bump, save])
        if case .failure(let error)? = final.value { return error as? StratusError ?? StratusError(.internalError, "\(error)") }
        return nil
    }

    static func checkpointedQueryPipeline(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        let count = 400
        try await TestDatabase.save(makeRecords("Counter", count: count) { ["count": .int64(0), "n": .int64(Int64($0))] }, in: database)
        let checkpoint = PipelineCheckpoint(job: "bump-counters")

        let stopped = try #require(try await bumpPipeline(database, checkpoint: checkpoint, stopAfter: 110))
        #expect(stopped.code == .operationCancelled)
        // Batches of 25 written whole: the one holding the 110th record completed too.
        let written = try await TestDatabase.queryAll(try Query(recordType: "Counter", format: "count == 1"), in: database)
        #expect(written.count == 125, "\(written.count) records written")
        let text = try #require(try env.engine.jobProgressText(checkpoint.job), "the store keeps the job's position")
        guard case .query(let cursor) = try PipelinePosition(serialized: text) else { Issue.record("not a query position: \(text)"); return }
        #expect(cursor.description == "Cursor(Counter after \(recordName("r", 124)))")
        #expect(stopped.pipelinePosition == .query(cursor))

        #expect(try await bumpPipeline(database, checkpoint: checkpoint, stopAfter: nil) == nil)
        let all = try await TestDatabase.queryAll(Query(recordType: "Counter"), in: database)
        let counts = Dictionary(grouping: all) { $0.fieldValue(forKey: "count") }.mapValues(\.count)
        #expect(all.count == count && counts == [.int64(1): count], "each record once: \(counts)")
        #expect(try env.engine.jobProgressText(checkpoint.job) == nil, "removed when the pipeline completed")

        // A checkpoint is a place in its own query: another query refuses it.
        try env.engine.writeRecords(in: database.context) { try $0.saveJobProgress("other", position: 1, text: text) }
        let other = QueryOperation(query: try Query(recordType: "Counter", format: "n > 5"))
        other.fetchAllResults = true
        other.checkpoint = PipelineCheckpoint(job: "other")
        let result = await runQueryPage(other, on: database)
        #expect((result.error as? StratusError)?.code == .invalidArguments, "\(String(describing: result.error))")
    }

    static func checkpointedZoneWidePipeline(_ env: Environment) async throws {
        let database = env.container().privateCloudDatabase
        let zones = [RecordZone.ID.default, RecordZone.ID(zoneName: "East"), RecordZone.ID(zoneName: "West")]
        _ = try await database.modifyRecordZones(saving: zones.dropFirst().map { RecordZone(zoneID: $0) }, deleting: [])
        for zone in zones {
            try await TestDatabase.save(makeRecords("Counter", count: 90, zoneID: zone) { ["count": .int64(0), "n": .int64(Int64($0))] }, in: database)
        }
        let checkpoint = PipelineCheckpoint(job: "bump-everywhere")
        let stopped = try #require(try await bumpPipeline(database, checkpoint: checkpoint, stopAfter: 110))
        #expect(stopped.code == .operationCancelled)
        let text = try #require(try env.engine.jobProgressText(checkpoint.job))
        guard case .query(let cursor) = try PipelinePosition(serialized: text) else { Issue.record("not a query position: \(text)"); return }
        #expect(cursor.searchesAllZones)

        #expect(try await bumpPipeline(database, checkpoint: checkpoint, stopAfter: nil) == nil)
        let all = try await TestDatabase.queryAll(Query(recordType: "Counter"), in: database)
        let counts = Dictionary(grouping: all) { $0.fieldValue(forKey: "count") }.mapValues(\.count)
        #expect(all.count == 270 && counts == [.int64(1): 270], "each record of each zone once: \(counts)")

        // Sorted by the modification date each save moves on: every zone is read from one
        // snapshot of its own, so no record comes back after its save.
        #expect(try await bumpPipeline(database, checkpoint: nil, stopAfter: nil, sortedBy: [RecordSortDescriptor(key: "modificationDate", ascending: true)]) == nil)
        let twice = try await TestDatabase.queryAll(Query(recordType: "Counter"), in: database)
        let bumped = Dictionary(grouping: twice) { $0.fieldValue(forKey: "count") }.mapValues(\.count)
        #expect(bumped == [.int64(2): 270], "each record of each zone once more: \(bumped)")

        // A checkpoint of the default zone for the same query comes from a version whose queries
        // without a zone read only it: refused, not widened to every zone.
        let old = QueryOperation(query: Query(recordType: "Counter"))
        old.zoneID = .default
        old.resultsLimit = 5
        let oldCursor = try #require(await runQueryPage(old, on: database).cursor)
        try env.engine.writeRecords(in: database.context) { try $0.saveJobProgress("old-job", position: 1, text: PipelinePosition.query(oldCursor).serialized) }
        let refused = try #require(try await bumpPipeline(database, checkpoint: PipelineCheckpoint(job: "old-job"), stopAfter: nil))
        #expect(refused.message.contains("default zone only"), "\(refused)")

        // A Stratus job that deletes names its zone: no zone is the default zone.
        let purge = DeleteRecordsOperation(query: try Query(recordType: "Counter", format: "n < %@", 30))
        purge.batchSize = 7
        let deleted = Box(0)
        purge.perRecordDeleteBlock = { _, result in if case .success = result { deleted.update { $0 += 1 } } }
        await run(purge, on: database)
        #expect(deleted.value == 30)
        for zone in zones {
            #expect(try await database.countRecords(matching: Query(recordType: "Counter"), inZoneWith: zone) == (zone.isDefault ? 60 : 90), "\(zone.zoneName)")
        }
    }

    static func changeFeedSavingIntoItsZone(_ env: Environment) async throws {
        let database = env.container().privateCloudDatabase
        let zone = RecordZone.ID(zoneName: "Revisions")
        _ = try await database.modifyRecordZones(saving: [RecordZone(zoneID: zone)], deleting: [])
        try await TestDatabase.save(makeRecords("Doc", count: 300, zoneID: zone) { _ in ["revision": .int64(0)] }, in: database)
        let feed = FetchRecordZoneChangesOperation(
            recordZoneIDs: [zone], configurationsByRecordZoneID: [zone: .init(previousServerChangeToken: nil, resultsLimit: 25, desiredKeys: nil)])
        let bump = ModifyRecordsOperation(savingRecordsFrom: feed) { records in
            for record in records { record["revision"] = ((record["revision"] as? Int64) ?? 0) + 1 }
            return records
        }
        bump.isAtomic = false
        let token = Box<ServerChangeToken?>(nil)
        feed.recordZoneFetchResultBlock = { _, result in if case .success(let answer) = result { token.value = answer.serverChangeToken } }
        let final = Box<Result<Void, any Error>?>(nil)
        bump.modifyRecordsResultBlock = { final.value = $0 }
        let queue = OperationQueue()
        for stage in [feed, bump] as [DatabaseOperation] {
            stage.database = database
            queue.addOperation(stage)
        }
        await waitUntilFinished([feed, bump])
        if case .failure(let error)? = final.value { Issue.record("\(error)") }
        let revisions = try await TestDatabase.queryAll(Query(recordType: "Doc"), in: database, zoneID: zone).map { $0["revision"] as? Int64 }
        #expect(revisions.count == 300 && revisions.allSatisfy { $0 == 1 }, "each record saved once: \(Set(revisions.map { $0.map(String.init) ?? "nil" }))")
        // The saves are changes after the token the feed ended at: the next read gets them.
        var next = token.value, more = true, changed = Set<Record.ID>()
        while more {
            let later = try await database.recordZoneChanges(inZoneWith: zone, since: next)
            changed.formUnion(later.modificationResultsByID.keys)
            (next, more) = (later.changeToken, later.moreComing)
        }
        #expect(changed.count == 300)
    }

    static func checkpointedChangePipeline(_ env: Environment) async throws {
        let database = env.container().privateCloudDatabase
        let feed = RecordZone.ID(zoneName: "Feed"), copies = RecordZone.ID(zoneName: "Copies")
        _ = try await database.modifyRecordZones(saving: [RecordZone(zoneID: feed), RecordZone(zoneID: copies)], deleting: [])
        try await TestDatabase.save(makeRecords("Note", count: 120, zoneID: feed) { ["n": .int64(Int64($0))] }, in: database)
        let checkpoint = PipelineCheckpoint(job: "copy-notes")

        func copyChanges(stopAfter: Int?) async -> (StratusError?, failures: Int) {
            let changes = FetchRecordZoneChangesOperation(
                recordZoneIDs: [feed], configurationsByRecordZoneID: [feed: .init(previousServerChangeToken: nil, resultsLimit: 20, desiredKeys: nil)])
            changes.checkpoint = checkpoint
            // New records in the other zone: saving one twice fails on its change tag.
            let copy = ModifyRecordsOperation(savingRecordsFrom: changes) { records in
                records.map { makeRecord("Note", $0.recordID.recordName, zoneID: copies, ["n": $0.fieldValue(forKey: "n") ?? .int64(-1)]) }
            }
            copy.isAtomic = false
            let saved = Box(0), failures = Box(0)
            let stages = Box<[Operation]>([])
            copy.perRecordSaveBlock = { _, result in
                guard case .success = result else { failures.update { $0 += 1 }; return }
                if let stopAfter, saved.update({ $0 += 1; return $0 }) == stopAfter { stages.value.forEach { $0.cancel() } }
            }
            stages.value = [changes, copy]
            let final = Box<Result<Void, any Error>?>(nil)
            copy.modifyRecordsResultBlock = { final.value = $0 }
            let other = OperationQueue()
            copy.database = database
            other.addOperation(copy)
            database.add(changes)
            await waitUntilFinished([changes, copy])
            if case .failure(let error)? = final.value { return (error as? StratusError, failures.value) }
            return (nil, failures.value)
        }
        let (stopped, firstFailures) = await copyChanges(stopAfter: 50)
        #expect(stopped?.code == .operationCancelled && firstFailures == 0)
        #expect(try env.engine.jobProgressText(checkpoint.job)?.hasPrefix("stk1_") == true)
        let (finished, failures) = await copyChanges(stopAfter: nil)
        #expect(finished == nil && failures == 0, "no record was copied twice: \(String(describing: finished))")
        let copied = try await TestDatabase.queryAll(Query(recordType: "Note"), in: database, zoneID: copies)
        #expect(copied.count == 120)
        #expect(try env.engine.jobProgressText(checkpoint.job) == nil)
    }
}
