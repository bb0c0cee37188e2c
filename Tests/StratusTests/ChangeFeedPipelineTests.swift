import Foundation
@_spi(StratusEngine) import Stratus
import StratusTestSupport
import Testing

/// A checkpointed pipeline whose source is a zone's change feed and whose save stage writes
/// back into that zone: stopped and resumed, it processes every record exactly once, since a
/// resumed run ends where the first run fixed the end and its own saves lie after it.
@Suite("Change-feed pipelines saving into the zone they read", .timeLimit(.minutes(30)))
struct ChangeFeedPipelineTests {
    static let zone = RecordZone.ID(zoneName: "Drafts")
    static let batchSize = 10

    /// How many times the transform was handed each record, by record name.
    final class TransformCounts: @unchecked Sendable {
        // @unchecked: `lock` guards `counts`.
        private let lock = NSLock()
        private var counts: [String: Int] = [:]
        var byName: [String: Int] { lock.withLock { counts } }
        /// How many records were handed over in all.
        var total: Int { lock.withLock { counts.values.reduce(0, +) } }
        /// Records by how many times each was transformed, for messages: `[1: 40, 2: 10]`.
        var histogram: [Int: Int] { Dictionary(grouping: byName.values) { $0 }.mapValues(\.count) }
        func count(_ records: [Record]) {
            lock.withLock { for record in records { counts[record.recordID.recordName, default: 0] += 1 } }
        }
    }

    static func revision(_ record: Record) -> Int64? {
        if case .int64(let value)? = record.fieldValue(forKey: "revision") { return value }
        return nil
    }

    static func makeZone(with count: Int, in database: Database) async throws {
        _ = try await database.modifyRecordZones(saving: [RecordZone(zoneID: zone)], deleting: [])
        try await TestDatabase.save(makeRecords("Draft", count: count, prefix: "draft", zoneID: zone) { _ in ["revision": .int64(0)] }, in: database)
    }

    /// One run of the job: the zone's change feed, from its beginning or the checkpoint, into a
    /// save of the same records with `revision` one higher. With `stopAfter`, the transform
    /// cancels every stage once this run transformed that many records. Answers the save
    /// stage's error.
    static func runJob(on database: Database, checkpoint: PipelineCheckpoint, counts: TransformCounts, stopAfter: Int?) async -> StratusError? {
        let feed = FetchRecordZoneChangesOperation(
            recordZoneIDs: [zone], configurationsByRecordZoneID: [zone: .init(previousServerChangeToken: nil, resultsLimit: batchSize, desiredKeys: nil)])
        feed.checkpoint = checkpoint
        // One batch at a time: the save transforms a batch only after the one before committed,
        // and writes a batch whole once transformed, so every transform counted is committed.
        feed.recordOutput.maximumBatchesInFlight = 1
        let stages = Box<[Operation]>([])
        let thisRun = Box(0)
        let bump = ModifyRecordsOperation(savingRecordsFrom: feed) { records in
            counts.count(records)
            for record in records { record["revision"] = (revision(record) ?? 0) + 1 }
            if let stopAfter, thisRun.update({ $0 += records.count; return $0 }) >= stopAfter { stages.value.forEach { $0.cancel() } }
            return records
        }
        bump.isAtomic = false
        stages.value = [feed, bump]
        let final = Box<Result<Void, any Error>?>(nil)
        bump.modifyRecordsResultBlock = { final.value = $0 }
        _ = await PipelineStreamingTests.run([feed, bump], on: database)
        return finalError(final.value)
    }

    @Test("a checkpointed change-feed pipeline that saves into the zone it reads, run whole or cancelled and resumed from its checkpoint, transforms and saves every record exactly once",
          arguments: [[], [20], [10, 20]])
    func resumedRunsEndWhereTheFirstBegan(_ stops: [Int]) async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.container().privateCloudDatabase
            try await Self.makeZone(with: 50, in: database)
            let checkpoint = PipelineCheckpoint(job: "bump-drafts")
            let counts = TransformCounts()
            for stop in stops {
                let stopped = await Self.runJob(on: database, checkpoint: checkpoint, counts: counts, stopAfter: stop)
                #expect(stopped?.code == .operationCancelled, "\(String(describing: stopped))")
                #expect(try fixture.engine.jobProgressText(checkpoint.job)?.hasPrefix("stk1_") == true, "the stopped run left its position")
            }
            let finished = await Self.runJob(on: database, checkpoint: checkpoint, counts: counts, stopAfter: nil)
            #expect(finished == nil, "\(String(describing: finished))")

            #expect(counts.byName.count == 50 && counts.histogram == [1: 50], "records by times transformed: \(counts.histogram)")
            let drafts = try await TestDatabase.queryAll(Query(recordType: "Draft"), in: database, zoneID: Self.zone)
            let revisions = Dictionary(grouping: drafts) { Self.revision($0) ?? -1 }.mapValues(\.count)
            #expect(drafts.count == 50 && revisions == [1: 50], "records by revision: \(revisions)")
            #expect(try fixture.engine.jobProgressText(checkpoint.job) == nil, "the completed job's position is removed")
        }
    }

    @Test("a change-feed checkpoint that keeps no read end (as versions before it saved) resumes after its token and reads to the zone's end when the run begins, as it did")
    func checkpointWithoutReadEnd() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.container().privateCloudDatabase
            try await Self.makeZone(with: 30, in: database)
            // A token handed to a block is a bare position, as every change-feed checkpoint was.
            let firstBatch = FetchRecordZoneChangesOperation(
                recordZoneIDs: [Self.zone], configurationsByRecordZoneID: [Self.zone: .init(previousServerChangeToken: nil, resultsLimit: Self.batchSize, desiredKeys: nil)])
            firstBatch.fetchAllChanges = false
            let token = Box<ServerChangeToken?>(nil)
            firstBatch.recordZoneFetchResultBlock = { _, result in if case .success(let answer) = result { token.value = answer.serverChangeToken } }
            _ = await PipelineStreamingTests.run([firstBatch], on: database)
            let bareToken = try #require(token.value)
            try await TestDatabase.save(makeRecords("Draft", count: 20, prefix: "later", zoneID: Self.zone) { _ in ["revision": .int64(0)] }, in: database)

            let store = MemoryPipelineCheckpoint()
            try store.save(PipelineCheckpointStoreEntry(job: "bump-drafts", position: .changes(bareToken)))
            let counts = TransformCounts()
            let finished = await Self.runJob(on: database, checkpoint: try PipelineCheckpoint(store: store), counts: counts, stopAfter: nil)
            #expect(finished == nil, "\(String(describing: finished))")

            let expected = Set((Self.batchSize..<30).map { recordName("draft", $0) } + (0..<20).map { recordName("later", $0) })
            #expect(Set(counts.byName.keys) == expected && counts.histogram == [1: 40], "records by times transformed: \(counts.histogram)")
            let drafts = try await TestDatabase.queryAll(Query(recordType: "Draft"), in: database, zoneID: Self.zone)
            let revisions = Dictionary(grouping: drafts) { Self.revision($0) ?? -1 }.mapValues(\.count)
            #expect(revisions == [0: Self.batchSize, 1: 40], "records by revision: \(revisions)")
            #expect(store.entry == nil)
        }
    }
}
