import Foundation
import Stratus
import StratusTestSupport
import Testing

/// A checkpoint store that fails (as a killed process would stop) at its `failingSave`-th save,
/// after the batch before it committed.
private final class CrashingCheckpoint: ImportCheckpointStore {
    var saved: ImportCheckpoint?
    var saves = 0
    var failingSave: Int?
    func load() throws -> ImportCheckpoint? { saved }
    func save(_ checkpoint: ImportCheckpoint) throws {
        saves += 1
        if saves == failingSave { throw StratusError(.internalError, "killed before the checkpoint moved") }
        saved = checkpoint
    }
    func remove() throws { saved = nil }
}

@Suite("Imports record their progress in the store", .timeLimit(.minutes(30)))
struct ImportJobProgressTests {
    @Test("killed after a batch committed but before the checkpoint moved: a create-mode resume rejects nothing and ends with the input")
    func resumeAfterCommittedBatch() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            let records = { (0..<500).map { makeRecord("Item", String(format: "item-%04d", $0), ["n": .int64(Int64($0))]) } }
            var options = RecordImporter.Options()
            options.writeMode = .create
            options.batchSize = 100
            let importer = RecordImporter(database: database, options: options)
            let checkpoint = CrashingCheckpoint()
            // Save 1 names the job; saves 2 and 3 follow batches 1 and 2; save 3 "fails".
            checkpoint.failingSave = 3
            await #expect(throws: (any Error).self) {
                _ = try await importer.run(from: ItemSource(records: records()), checkpoint: checkpoint)
            }
            #expect(checkpoint.saved?.itemsSettled == 100, "the file says one batch, the store has two")
            checkpoint.failingSave = nil
            let rejects = RejectLog()
            let summary = try await importer.run(from: ItemSource(records: records()), rejects: rejects, checkpoint: checkpoint)
            #expect(rejects.rejections.isEmpty, "nothing rejected as 'already exists': \(rejects.rejections.prefix(3))")
            #expect(summary.failed == 0 && summary.created == 300, "\(summary)")
            #expect(try await storedNames(database).count == 500)
            #expect(checkpoint.saved == nil, "the finished import removed its checkpoint")
        }
    }

    @Test("killed after a batch with rejects committed but before the checkpoint moved: the resumed import counts that batch's rejects, the input's and the store's, from the store's record")
    func rejectsOfCommittedBatch() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            // In create mode the store rejects item-0150, which exists.
            try await database.save(makeRecord("Item", "item-0150", [:]))
            let items = {
                (0..<300).map { index -> RecordSourceItem in
                    index == 30 || index == 130 || index == 140
                        ? .rejected(RecordRejection(line: index + 1, column: 1, recordName: nil, message: "unreadable"))
                        : .record(makeRecord("Item", String(format: "item-%04d", index), [:]), line: index + 1)
                }
            }
            var options = RecordImporter.Options()
            options.batchSize = 100
            options.writeMode = .create
            let importer = RecordImporter(database: database, options: options)
            let checkpoint = CrashingCheckpoint()
            checkpoint.failingSave = 3
            await #expect(throws: (any Error).self) {
                _ = try await importer.run(from: ItemSource(items()), checkpoint: checkpoint)
            }
            #expect(checkpoint.saved?.itemsSettled == 100 && checkpoint.saved?.itemsRejected == 1, "the file says one batch and one reject, the store two batches and four")
            checkpoint.failingSave = nil
            let summary = try await importer.run(from: ItemSource(items()), checkpoint: checkpoint)
            #expect(summary.skipped == 200 && summary.failed == 0 && summary.failedInEarlierRuns == 4, "\(summary)")
            #expect(try await storedNames(database).count == 297)
        }
    }
}
