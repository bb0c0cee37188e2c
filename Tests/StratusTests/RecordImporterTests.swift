import Foundation
@_spi(StratusEngine) import Stratus
import StratusSQLite
import StratusTestSupport
import Synchronization
import Testing

/// A source of prepared items; `onRead` runs as each item is read (1-based count).
final class ItemSource: RecordSource {
    private var items: [RecordSourceItem]
    private var index = 0
    var onRead: ((Int) -> Void)?

    init(_ items: [RecordSourceItem]) { self.items = items }

    /// One record per line, `line` = position + 1.
    convenience init(records: [Record]) {
        self.init(records.enumerated().map { .record($0.element, line: $0.offset + 1) })
    }

    func nextItem() throws -> RecordSourceItem? {
        guard index < items.count else { return nil }
        defer { index += 1 }
        onRead?(index + 1)
        return items[index]
    }
}

/// Every rejection, in the order reported.
final class RejectLog: RecordRejectSink {
    var rejections: [RecordRejection] = []
    func reject(_ rejection: RecordRejection) throws { rejections.append(rejection) }
    var lines: [Int] { rejections.map(\.line) }
}

/// A checkpoint kept in memory, with every value saved.
final class MemoryCheckpoint: ImportCheckpointStore {
    var saved: ImportCheckpoint?
    var history: [Int] = []
    func load() throws -> ImportCheckpoint? { saved }
    func save(_ checkpoint: ImportCheckpoint) throws {
        saved = checkpoint
        history.append(checkpoint.itemsSettled)
    }
    func remove() throws { saved = nil }
}

/// Record names in the store, sorted.
func storedNames(_ database: Database, type: String = "Item", zoneID: RecordZone.ID? = nil) async throws -> [String] {
    var names: [String] = []
    for try await record in database.allRecords(matching: Query(recordType: type), inZoneWith: zoneID, desiredKeys: []) {
        names.append(record.recordID.recordName)
    }
    return names.sorted()
}

@Suite("RecordImporter", .timeLimit(.minutes(30)))
struct RecordImporterTests {
    static func options(_ configure: (inout RecordImporter.Options) -> Void) -> RecordImporter.Options {
        var options = RecordImporter.Options()
        configure(&options)
        return options
    }

    @Test("batches in flight write every record; counts say created, then unchanged, then updated")
    func batchesAndCounts() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            let importer = RecordImporter(database: database, options: Self.options { $0.batchSize = 97; $0.batchesInFlight = 3 })
            let first = try await importer.run(from: ItemSource(records: items(1_000)))
            #expect(first.created == 1_000 && first.failed == 0 && first.read == 1_000 && first.end == .finished, "\(first)")
            #expect(try await storedNames(database).count == 1_000)

            let again = try await importer.run(from: ItemSource(records: items(1_000)))
            #expect(again.unchanged == 1_000 && again.created == 0, "re-running the same input changes nothing: \(again)")

            let changed = items(10).map { record -> Record in
                record.setFieldValue(.int64(-1), forKey: "n")
                return record
            }
            let update = try await importer.run(from: ItemSource(records: changed))
            #expect(update.updated == 10 && update.unchanged == 0, "\(update)")
        }
    }

    @Test("every rejected item is reported once, in input order, whatever rejected it; several failing lines with one record name are each reported")
    func rejectsReportedOnce() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await database.save(makeRecord("Item", "exists", ["n": .int64(0)]))
            let invalid = makeRecord("Item", "nan", ["n": .double(.nan)])
            let source = ItemSource([
                .record(makeRecord("Item", "a"), line: 1),
                .rejected(RecordRejection(line: 2, column: 5, recordName: nil, message: "not JSON")),
                .record(makeRecord("Item", "exists"), line: 3),
                .record(invalid, line: 4),
                .record(makeRecord("Item", "dup", ["n": .int64(1)]), line: 5),
                .record(makeRecord("Item", "dup", ["n": .int64(2)]), line: 6),
                .record(makeRecord("Item", "dup", ["n": .int64(3)]), line: 7),
                .record(makeRecord("Item", "b"), line: 8),
            ])
            let rejects = RejectLog()
            let importer = RecordImporter(database: database, options: Self.options { $0.writeMode = .create; $0.batchSize = 100 })
            let summary = try await importer.run(from: source, rejects: rejects)
            #expect(rejects.lines == [2, 3, 4, 6, 7], "\(rejects.rejections)")
            #expect(summary.failed == 5 && summary.created == 3 && summary.read == 8, "\(summary)")
            #expect(rejects.rejections.filter { $0.recordName == "dup" }.allSatisfy { $0.message.contains("exists") }, "\(rejects.rejections)")
            #expect(try await database.record(for: Record.ID(recordName: "dup")).fieldValue(forKey: "n") == .int64(1), "the first line of a name is applied first")
        }
    }

    /// The store holds r10, r20, …, r100; importing r1…r100 in create mode rejects those ten.
    static func tenExisting(_ database: Database, zoneID: RecordZone.ID = .default) async throws -> [Record] {
        for n in stride(from: 10, through: 100, by: 10) {
            try await database.save(makeRecord("Item", "r\(n)", zoneID: zoneID, ["n": .int64(Int64(n))]))
        }
        return (1...100).map { makeRecord("Item", "r\($0)", zoneID: zoneID, ["n": .int64(Int64($0))]) }
    }

    @Test("maximumRejects N stops at the (N+1)th store reject whatever the batch size: everything before it is written, nothing after", arguments: [1, 7, 33, 2_000])
    func rejectLimitAtWriteTime(batchSize: Int) async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            let input = try await Self.tenExisting(database)
            let rejects = RejectLog()
            let importer = RecordImporter(database: database, options: Self.options { $0.writeMode = .create; $0.batchSize = batchSize; $0.maximumRejects = 5 })
            let summary = try await importer.run(from: ItemSource(records: input), rejects: rejects)
            #expect(summary.end == .rejectLimitReached, "\(summary)")
            #expect(summary.failed == 6 && rejects.lines == [10, 20, 30, 40, 50, 60], "\(rejects.lines)")
            #expect(summary.created == 54, "\(summary)")
            let expected = ((1...59).map { "r\($0)" } + (6...10).map { "r\($0 * 10)" }).sorted()
            #expect(try await storedNames(database) == expected)
        }
    }

    @Test("in a zone without the atomic capability the reject limit holds too")
    func rejectLimitInNonAtomicZone() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            let zone = RecordZone.ID(zoneName: "Loose")
            try await database.save(RecordZone(zoneID: zone, capabilities: [.fetchChanges]))
            let input = try await Self.tenExisting(database, zoneID: zone)
            let rejects = RejectLog()
            let importer = RecordImporter(database: database, options: Self.options { $0.writeMode = .create; $0.maximumRejects = 2 })
            let summary = try await importer.run(from: ItemSource(records: input), rejects: rejects)
            #expect(summary.end == .rejectLimitReached && summary.failed == 3 && rejects.lines == [10, 20, 30], "\(summary) \(rejects.lines)")
            #expect(try await storedNames(database, zoneID: zone) == ((1...29).map { "r\($0)" } + (3...10).map { "r\($0 * 10)" }).sorted())
        }
    }

    @Test("the reject limit counts input and store rejects together, in input order")
    func rejectLimitAcrossStages() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            var input = try await Self.tenExisting(database).enumerated().map { RecordSourceItem.record($0.element, line: $0.offset + 1) }
            // Lines 15 and 35 are unreadable: rejects 1 (r10), 2 (line 15), 3 (r20), 4 (r30), 5 (line 35).
            input[14] = .rejected(RecordRejection(line: 15, column: 1, recordName: nil, message: "broken"))
            input[34] = .rejected(RecordRejection(line: 35, column: 1, recordName: nil, message: "broken"))
            for size in [4, 500] {
                let target = try SQLiteFixture()
                defer { target.store.remove() }
                _ = try await Self.tenExisting(target.database)
                let rejects = RejectLog()
                let importer = RecordImporter(database: target.database, options: Self.options { $0.writeMode = .create; $0.batchSize = size; $0.maximumRejects = 4 })
                let summary = try await importer.run(from: ItemSource(input), rejects: rejects)
                #expect(rejects.lines == [10, 15, 20, 30, 35] && summary.failed == 5, "batch size \(size): \(rejects.lines)")
                let names = try await storedNames(target.database)
                #expect(names.contains("r34") && !names.contains("r36"), "batch size \(size): written up to the fifth reject, nothing after: \(names)")
            }
        }
    }

    @Test("without a batch size an import writes in the batches its store prefers; a batch size given wins")
    func storesPreferredBatches() async throws {
        let (database, engine, store) = try SafeWriteTests.scripted()
        defer { _ = store }
        #expect(engine.base.preferredImportBatchSize == 2_000, "SQLite's preference")
        engine.script { $0.importBatchSize = 300 }
        let preferred = MemoryCheckpoint()
        let summary = try await RecordImporter(database: database).run(from: ItemSource(records: items(1_000)), checkpoint: preferred)
        #expect(summary.created == 1_000, "\(summary)")
        #expect(preferred.history == [0, 300, 600, 900, 1_000], "named, then checkpointed after each batch of 300")
        #expect(engine.modifyCalls.map(\.saves.count) == [300, 300, 300, 100], "a transaction per batch")

        let chosen = MemoryCheckpoint()
        _ = try await RecordImporter(database: database, options: Self.options { $0.batchSize = 450 })
            .run(from: ItemSource(records: items(1_000, prefix: "again")), checkpoint: chosen)
        #expect(chosen.history == [0, 450, 900, 1_000], "the caller's batch size")
    }

    @Test("cancel() stops after the batch being read; the summary and the checkpoint say what was done")
    func cancellation() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            let source = ItemSource(records: items(1_000))
            let checkpoint = MemoryCheckpoint()
            let importer = RecordImporter(database: database, options: Self.options { $0.batchSize = 100 })
            source.onRead = { if $0 == 250 { importer.cancel() } }
            let summary = try await importer.run(from: source, checkpoint: checkpoint)
            #expect(summary.end == .cancelled, "\(summary)")
            #expect(summary.created == 300, "the batch being read when cancelled is finished: \(summary)")
            #expect(try await storedNames(database).count == 300)
            #expect(checkpoint.saved?.itemsSettled == 300)
        }
    }

    @Test("cancel() and task cancellation stop an import whose batches end early (with a reject limit, deletions between records and a record named twice): after the batch being read")
    func cancellationOfEarlyEndingBatches() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            // With a reject limit (whose all-or-nothing tries take a batch apart by ID), a
            // deletion after every 20th record ends each batch of 100 early; so does a name
            // repeated. Without one they start a segment of the batch instead.
            var input: [RecordSourceItem] = []
            for (offset, record) in items(2_000).enumerated() {
                input.append(.record(record, line: input.count + 1))
                if offset % 20 == 0 { input.append(.deletion(Record.ID(recordName: "gone-\(offset)"), recordType: "Item", line: input.count + 1)) }
                if offset % 37 == 0 { input.append(.record(record, line: input.count + 1)) }
            }
            let source = ItemSource(input)
            let checkpoint = MemoryCheckpoint()
            let importer = RecordImporter(database: database, options: Self.options { $0.batchSize = 100; $0.maximumRejects = 10_000 })
            source.onRead = { if $0 == 250 { importer.cancel() } }
            let summary = try await importer.run(from: source, checkpoint: checkpoint)
            #expect(summary.end == .cancelled, "\(summary)")
            #expect(summary.read < 300, "stopped after the batch being read: \(summary)")
            let stored = try await storedNames(database).count
            #expect(stored == summary.created && stored > 0 && stored < 300, "\(summary)")
            let settled = try #require(checkpoint.saved?.itemsSettled)
            #expect(settled <= summary.read)

            let resumed = try await RecordImporter(database: database, options: Self.options { $0.batchSize = 100; $0.maximumRejects = 10_000 }).run(from: ItemSource(input), checkpoint: checkpoint)
            #expect(resumed.end == .finished, "\(resumed)")
            #expect(try await storedNames(database).count == 2_000, "every record once across the runs")

            let byTask = RecordImporter(database: database, options: Self.options { $0.batchSize = 100; $0.maximumRejects = 10_000 })
            let again = ItemSource(input)
            again.onRead = { count in if count == 120 { withUnsafeCurrentTask { $0?.cancel() } } }
            let cancelled = try await Task { try await byTask.run(from: again) }.value
            #expect(cancelled.end == .cancelled && cancelled.read < 200, "\(cancelled)")
        }
    }

    @Test("cancel() stops an import whose names repeat (deletions between records, names twice) after the batch being read, which holds its batch size of items like any other")
    func cancellationOfBatchesWithRepeatedNames() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            var input: [RecordSourceItem] = []
            for (offset, record) in items(1_000).enumerated() {
                input.append(.record(record, line: input.count + 1))
                input.append(.record(record, line: input.count + 1))
                input.append(.deletion(Record.ID(recordName: "gone-\(offset)"), recordType: "Item", line: input.count + 1))
                input.append(.deletion(Record.ID(recordName: "gone-\(offset)"), recordType: "Item", line: input.count + 1))
            }
            let source = ItemSource(input)
            let checkpoint = MemoryCheckpoint()
            let importer = RecordImporter(database: database, options: Self.options { $0.batchSize = 100 })
            source.onRead = { if $0 == 250 { importer.cancel() } }
            let summary = try await importer.run(from: source, checkpoint: checkpoint)
            #expect(summary.end == .cancelled && summary.read == 300, "\(summary)")
            #expect(summary.created == 75 && summary.updated + summary.unchanged == 75 && summary.deleted == 150, "\(summary)")
            #expect(checkpoint.saved?.itemsSettled == 300)
            let resumed = try await RecordImporter(database: database, options: Self.options { $0.batchSize = 100 }).run(from: ItemSource(input), checkpoint: checkpoint)
            #expect(resumed.end == .finished && resumed.skipped == 300 && resumed.created == 925, "\(resumed)")
            #expect(try await storedNames(database).count == 1_000)
        }
    }

    @Test("a reject sink that fails (a full disk) loses no reject: the checkpoint keeps the settled batch's rejections and the resumed run reports them first, each once")
    func failingRejectSinkLosesNothing() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            var input = items(300).enumerated().map { RecordSourceItem.record($0.element, line: $0.offset + 1) }
            for line in [5, 40, 120, 250] { input[line - 1] = .rejected(RecordRejection(line: line, column: 1, recordName: nil, message: "broken")) }
            /// Takes rejections, and fails its first flush as a full disk would.
            final class FullDisk: RecordRejectSink {
                var taken: [RecordRejection] = []
                var flushes = 0
                func reject(_ rejection: RecordRejection) throws { taken.append(rejection) }
                func flush() throws {
                    flushes += 1
                    if flushes == 1 { taken = []; throw StratusError(.internalError, "no space left on device") }
                }
            }
            let checkpoint = MemoryCheckpoint()
            let options = Self.options { $0.batchSize = 100 }
            let full = FullDisk()
            do {
                _ = try await RecordImporter(database: database, options: options).run(from: ItemSource(input), rejects: full, checkpoint: checkpoint)
                Issue.record("the sink's failure is the run's")
            } catch let failure as RecordImporter.Failure {
                #expect(failure.stage == .rejects, "\(failure)")
            }
            let kept = try #require(checkpoint.saved)
            #expect(kept.itemsSettled == 100 && kept.itemsRejected == 2 && kept.unreportedRejections.map(\.line) == [5, 40], "\(kept)")

            let log = RejectLog()
            let resumed = try await RecordImporter(database: database, options: options).run(from: ItemSource(input), rejects: log, checkpoint: checkpoint)
            #expect(resumed.end == .finished && resumed.failedInEarlierRuns == 2 && resumed.failed == 2, "\(resumed)")
            #expect(log.lines == [5, 40, 120, 250], "every reject once, in input order")
            #expect(try await storedNames(database).count == 296)
        }
    }

    @Test("a reject sink that fails with batches in flight: the failure's summary counts every record the store committed, the batches after the failing one too (found by a data tester)")
    func failingRejectSinkCountsWhatCommitted() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            var input = items(600).enumerated().map { RecordSourceItem.record($0.element, line: $0.offset + 1) }
            for line in stride(from: 10, through: 600, by: 50) { input[line - 1] = .rejected(RecordRejection(line: line, column: 1, recordName: nil, message: "broken")) }
            final class FullDisk: RecordRejectSink {
                func reject(_ rejection: RecordRejection) throws { throw StratusError(.internalError, "no space left on device") }
            }
            let options = Self.options { $0.batchSize = 50; $0.batchesInFlight = 3 }
            do {
                _ = try await RecordImporter(database: database, options: options).run(from: ItemSource(input), rejects: FullDisk())
                Issue.record("the sink's failure is the run's")
            } catch let failure as RecordImporter.Failure {
                #expect(failure.stage == .rejects, "\(failure)")
                let stored = try await storedNames(database).count
                #expect(failure.summary.created == stored, "the summary says what the store holds: \(failure.summary) vs \(stored) stored")
                #expect(stored >= 49 && stored < 588, "the first batch committed, and the import stopped: \(stored)")
            }
        }
    }

    @Test("a cancelled importer runs again; task cancellation before the first record ends cancelled, not as a store failure; progress's done count never goes back")
    func reuseEarlyCancellationAndProgress() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            let options = Self.options { $0.batchSize = 100; $0.batchesInFlight = 2 }
            let importer = RecordImporter(database: database, options: options)
            let first = ItemSource(records: items(1_000))
            first.onRead = { if $0 == 250 { importer.cancel() } }
            #expect(try await importer.run(from: first).end == .cancelled)
            let done = Mutex<[Int]>([])
            // A name again every 30 records ends batches early, as deletions between records do.
            var repeating: [Record] = []
            for (offset, record) in items(1_000, prefix: "second").enumerated() {
                repeating.append(record)
                if offset % 30 == 0 { repeating.append(record) }
            }
            let second = try await importer.run(from: ItemSource(records: repeating)) { progress in
                done.withLock { $0.append(progress.summary.read - progress.pending) }
            }
            #expect(second.end == .finished && second.created == 1_000, "the cancel ended with the run it stopped: \(second)")
            let counts = done.withLock { $0 }
            #expect(!counts.isEmpty && counts == counts.sorted(), "done never goes back: \(counts)")

            // In a zone of its own, the first record looks its zone up: a cancel there is the caller's.
            let zoned = makeRecords("Item", count: 50, prefix: "z", zoneID: RecordZone.ID(zoneName: "Elsewhere")) { i in ["n": .int64(Int64(i))] }
            let early = try await Task {
                withUnsafeCurrentTask { $0?.cancel() }
                return try await RecordImporter(database: database, options: Self.options { $0.createsZones = true }).run(from: ItemSource(records: zoned))
            }.value
            #expect(early.end == .cancelled && early.created == 0, "\(early)")
        }
    }

    @Test("task cancellation stops an import the same way")
    func taskCancellation() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            let importer = RecordImporter(database: database, options: Self.options { $0.batchSize = 50 })
            let source = ItemSource(records: items(500))
            // The source is read on the importer's task: cancel that task as item 120 is read.
            source.onRead = { count in if count == 120 { withUnsafeCurrentTask { $0?.cancel() } } }
            let summary = try await Task { try await importer.run(from: source) }.value
            #expect(summary.end == .cancelled && summary.created == 150, "\(summary)")
        }
    }

    @Test("a checkpoint resumes after the last settled batch: every record written once across the runs")
    func checkpointResume() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            let input = items(1_000)
            let checkpoint = MemoryCheckpoint()
            let options = Self.options { $0.batchSize = 64; $0.writeMode = .create }
            let first = RecordImporter(database: database, options: options)
            let source = ItemSource(records: input)
            source.onRead = { if $0 == 500 { first.cancel() } }
            let stopped = try await first.run(from: source, checkpoint: checkpoint)
            #expect(stopped.end == .cancelled)
            let settled = try #require(checkpoint.saved?.itemsSettled)
            #expect(settled == stopped.created && checkpoint.history == checkpoint.history.sorted())

            let resumed = try await RecordImporter(database: database, options: options).run(from: ItemSource(records: input), checkpoint: checkpoint)
            #expect(resumed.skipped == settled && resumed.failed == 0, "create mode: nothing is written twice: \(resumed)")
            #expect(resumed.created + stopped.created == 1_000)
            #expect(checkpoint.saved == nil, "removed when the input is done")
            #expect(try await storedNames(database).count == 1_000)
        }
    }

    @Test("a resumed import counts the rejects of the runs before it, and the reject limit is the job's")
    func rejectsAcrossResumes() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            // r10, r20, …, r100 exist: create mode rejects them.
            let input = try await Self.tenExisting(database)
            let checkpoint = MemoryCheckpoint()
            let options = Self.options { $0.batchSize = 20; $0.writeMode = .create; $0.maximumRejects = 7 }
            let first = RecordImporter(database: database, options: options)
            let source = ItemSource(records: input)
            source.onRead = { if $0 == 50 { first.cancel() } }
            let stopped = try await first.run(from: source, checkpoint: checkpoint)
            #expect(stopped.end == .cancelled && stopped.failed == 6 && stopped.failedInEarlierRuns == 0, "r10…r60: \(stopped)")
            #expect(checkpoint.saved?.itemsSettled == 60 && checkpoint.saved?.itemsRejected == 6)

            let rejects = RejectLog()
            let resumed = try await RecordImporter(database: database, options: options).run(from: ItemSource(records: input), rejects: rejects, checkpoint: checkpoint)
            #expect(resumed.end == .rejectLimitReached, "r70 makes 7, r80 makes 8: \(resumed)")
            #expect(resumed.failed == 2 && resumed.failedInEarlierRuns == 6 && rejects.lines == [70, 80], "\(resumed) \(rejects.lines)")
            #expect(checkpoint.saved?.itemsSettled == 80 && checkpoint.saved?.itemsRejected == 8)
            let afterLimit = try await storedNames(database)
            #expect(afterLimit.contains("r79") && !afterLimit.contains("r81"))

            let again = try await RecordImporter(database: database, options: options).run(from: ItemSource(records: input), checkpoint: checkpoint)
            #expect(again.end == .rejectLimitReached && again.read == 0 && again.failedInEarlierRuns == 8, "stopped before reading: \(again)")
            #expect(try await storedNames(database) == afterLimit, "nothing more written")

            let larger = Self.options { $0.batchSize = 20; $0.writeMode = .create; $0.maximumRejects = 10 }
            let rest = try await RecordImporter(database: database, options: larger).run(from: ItemSource(records: input), checkpoint: checkpoint)
            #expect(rest.end == .finished && rest.failed == 2 && rest.failedInEarlierRuns == 8 && rest.created == 18, "r81…r100 but r90, r100: \(rest)")
            #expect(try await storedNames(database).count == 100)
            #expect(checkpoint.saved == nil)
        }
    }

    @Test("deletions apply in input order among saves")
    func deletions() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await database.save(makeRecord("Item", "gone"))
            let a = Record.ID(recordName: "a")
            let source = ItemSource([
                .record(makeRecord("Item", "a", ["n": .int64(1)]), line: 1),
                .deletion(a, recordType: "Item", line: 2),
                .record(makeRecord("Item", "a", ["n": .int64(3)]), line: 3),
                .deletion(Record.ID(recordName: "gone"), recordType: "Item", line: 4),
                .record(makeRecord("Item", "b"), line: 5),
                .deletion(Record.ID(recordName: "b"), recordType: nil, line: 6),
            ])
            let summary = try await RecordImporter(database: database).run(from: source)
            #expect(summary.deleted == 3 && summary.failed == 0, "\(summary)")
            #expect(try await storedNames(database) == ["a"])
            #expect(try await database.record(for: a).fieldValue(forKey: "n") == .int64(3))
        }
    }

    @Test("atomic: one reject writes nothing; a zone without the atomic capability (the default zone, or one created without it) is refused before anything is written")
    func atomic() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            let zone = try await database.save(RecordZone(zoneName: "Atomic")).zoneID
            try await database.save(makeRecord("Item", "item-00003", zoneID: zone))
            let rejects = RejectLog()
            let options = Self.options { $0.isAtomic = true; $0.writeMode = .create }
            let records = makeRecords("Item", count: 5, prefix: "item", zoneID: zone) { i in ["n": .int64(Int64(i))] }
            let summary = try await RecordImporter(database: database, options: options).run(from: ItemSource(records: records), rejects: rejects)
            #expect(summary.end == .atomicImportRejected && summary.created == 0, "\(summary)")
            #expect(rejects.rejections.map(\.recordName) == ["item-00003"], "only the record that failed is a reject: \(rejects.rejections)")
            #expect(try await storedNames(database, zoneID: zone) == ["item-00003"])

            await #expect {
                try await RecordImporter(database: database, options: options).run(from: ItemSource(records: items(3)))
            } throws: { error in
                guard let failure = error as? RecordImporter.Failure, let cause = failure.error as? StratusError else { return false }
                return failure.stage == .atomicity && cause.code == .invalidArguments && cause.message.contains("atomic")
            }
            #expect(try await storedNames(database, zoneID: .default).isEmpty, "the default zone has no atomic capability, as CloudKit's")

            let loose = RecordZone.ID(zoneName: "Loose")
            try await database.save(RecordZone(zoneID: loose, capabilities: [.fetchChanges]))
            let looseRecords = (0..<3).map { makeRecord("Item", "l\($0)", zoneID: loose) }
            await #expect {
                try await RecordImporter(database: database, options: options).run(from: ItemSource(records: looseRecords))
            } throws: { error in
                guard let failure = error as? RecordImporter.Failure, let cause = failure.error as? StratusError else { return false }
                return failure.stage == .atomicity && cause.code == .invalidArguments && cause.message.contains("atomic")
            }
            #expect(try await storedNames(database, zoneID: loose).isEmpty)
        }
    }

    @Test("a dry run on a store opened read-only finds what the real run would: a type conflict, a record created twice, a deletion's cascade seen by a later line")
    func dryRunOnReadOnlyStore() async throws {
        func seed(_ database: Database) async throws {
            try await TestDatabase.save([
                makeRecord("Item", "list", ["n": .int64(1)]),
                makeRecord("Item", "entry", ["n": .int64(2), "up": .reference(reference("list", .deleteSelf))]),
            ], in: database)
        }
        try await SQLiteFixture.with { fixture in
            try await seed(fixture.database)
            let readOnly = try SQLiteEngine(path: fixture.store.path(), readOnly: true)
            let database = Container(identifier: SQLiteFixture.identifier, engine: readOnly, userName: "alice").publicCloudDatabase
            let items: [RecordSourceItem] = [
                .record(makeRecord("Item", "fresh", ["n": .int64(3)]), line: 1),
                .record(makeRecord("Item", "wrong", ["n": .string("text")]), line: 2),
                .record(makeRecord("Item", "fresh", ["n": .int64(4)]), line: 3),
                .deletion(Record.ID(recordName: "list"), recordType: "Item", line: 4),
                .record(makeRecord("Item", "entry", ["n": .int64(5)]), line: 5),
            ]
            for mode in [RecordWriteMode.create, .update] {
                let rejects = RejectLog()
                let dry = try await RecordImporter(database: database, options: Self.options { $0.isDryRun = true; $0.writeMode = mode; $0.batchSize = 1 })
                    .run(from: ItemSource(items), rejects: rejects)
                let realRejects = RejectLog()
                let copy = try SQLiteFixture()
                defer { copy.store.remove() }
                try await seed(copy.database)
                let real = try await RecordImporter(database: copy.database, options: Self.options { $0.writeMode = mode; $0.batchSize = 1 })
                    .run(from: ItemSource(items), rejects: realRejects)
                #expect(realRejects.lines == (mode == .create ? [2, 3] : [1, 2, 3, 5]), "\(mode): \(realRejects.rejections.map(\.message))")
                #expect(rejects.lines == realRejects.lines, "\(mode): \(rejects.rejections.map(\.message)) vs \(realRejects.rejections.map(\.message))")
                #expect(dry.failed == real.failed && dry.valid == real.created + real.updated + real.unchanged + real.deleted, "\(mode): \(dry) vs \(real)")
            }
            #expect(try await storedNames(fixture.database) == ["entry", "list"], "the dry run wrote nothing")
        }
    }

    @Test("a dry run validates and counts without writing, and refuses a checkpoint store; a failing source stops after writing what it read before")
    func dryRunAndSourceFailure() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            let source = ItemSource(records: items(10) + [makeRecord("Item", "bad", ["n": .double(.infinity)])])
            let dry = try await RecordImporter(database: database, options: Self.options { $0.isDryRun = true }).run(from: source)
            #expect(dry.valid == 10 && dry.failed == 1 && dry.created == 10, "a dry run counts what the real run would: \(dry)")
            #expect(try await storedNames(database).isEmpty)

            // A dry run writes nothing, so it keeps no checkpoint: one given is refused, untouched.
            let checkpoint = MemoryCheckpoint()
            await #expect {
                try await RecordImporter(database: database, options: Self.options { $0.isDryRun = true; $0.batchSize = 2 })
                    .run(from: ItemSource(records: items(10)), checkpoint: checkpoint)
            } throws: { error in
                guard let failure = error as? RecordImporter.Failure, let error = failure.error as? StratusError else { return false }
                return failure.stage == .checkpoint && error.code == .invalidArguments
            }
            #expect(checkpoint.history.isEmpty && checkpoint.saved == nil, "\(checkpoint.history)")

            final class Broken: RecordSource {
                var left = 150
                func nextItem() throws -> RecordSourceItem? {
                    left -= 1
                    if left < 0 { throw StratusError(.invalidArguments, "unexpected end of input (line 151, column 1)") }
                    return .record(makeRecord("Item", "x\(left)"), line: 150 - left)
                }
            }
            await #expect {
                try await RecordImporter(database: database, options: Self.options { $0.batchSize = 100 }).run(from: Broken())
            } throws: { error in
                guard let failure = error as? RecordImporter.Failure else { return false }
                return failure.stage == .input && failure.summary.created == 150
            }
        }
    }
}
