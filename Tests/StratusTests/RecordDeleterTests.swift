import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Synchronization
import Testing

/// ``RecordDeleter``, the job behind `stratus delete --type … --where …`, through the public API.
@Suite("RecordDeleter", .timeLimit(.minutes(30)))
struct RecordDeleterTests {
    /// Tasks t-00000…t-00024 (`n` 0…24) and five Notes in the public default zone.
    static func tasks(_ fixture: SQLiteFixture) async throws -> Database {
        let database = fixture.container().publicCloudDatabase
        _ = try await TestDatabase.save(makeRecords("Task", count: 25, prefix: "t") { ["n": .int64(Int64($0))] }, in: database)
        _ = try await TestDatabase.save(makeRecords("Note", count: 5, prefix: "o") { ["n": .int64(Int64($0))] }, in: database)
        return database
    }

    static func options(batchSize: Int, dryRun: Bool = false) -> RecordDeleter.Options {
        var options = RecordDeleter.Options()
        options.batchSize = batchSize
        options.isDryRun = dryRun
        return options
    }

    static func names(_ recordType: String, in database: Database) async throws -> [String] {
        try await TestDatabase.queryAll(Query(recordType: recordType, predicate: QueryPredicate(value: true)), in: database).map(\.recordID.recordName).sorted()
    }

    @Test("a dry run counts the matches and deletes nothing; the run deletes them in batches, reports progress, and leaves the rest; a run after it matches none")
    func dryRunThenRun() async throws {
        try await SQLiteFixture.with { fixture in
            let database = try await Self.tasks(fixture)
            let query = Query(recordType: "Task", predicate: try QueryPredicate(format: "n < %@", 10))
            let dry = try await RecordDeleter(database: database, query: query, options: Self.options(batchSize: 4, dryRun: true)).run()
            #expect(dry.matched == 10 && dry.deleted == 0 && dry.notFound == 0 && dry.failed == 0 && dry.end == .finished, "\(dry)")
            #expect(try await Self.names("Task", in: database).count == 25, "a dry run deletes nothing")

            let options = Self.options(batchSize: 4)
            let reports = Reports()
            let summary = try await RecordDeleter(database: database, query: query, options: options).run(progress: { reports.add($0.deleted) })
            #expect(summary.matched == 10 && summary.deleted == 10 && summary.notFound == 0 && summary.failed == 0 && summary.end == .finished, "\(summary)")
            #expect(reports.last == 10, "the last progress report is the whole run: \(reports.all)")
            #expect(try await Self.names("Task", in: database) == (10..<25).map { recordName("t", $0) })
            #expect(try await Self.names("Note", in: database).count == 5, "another type is left alone")

            let again = try await RecordDeleter(database: database, query: query, options: options).run()
            #expect(again.matched == 0 && again.deleted == 0 && again.end == .finished, "\(again)")
        }
    }

    @Test("a run resumed from a checkpoint reports the records the runs before it failed to delete")
    func failuresOfEarlierRunsCount() async throws {
        try await SQLiteFixture.with { fixture in
            _ = try await TestDatabase.save(makeRecords("Item", count: 5, prefix: "a") { _ in [:] }, in: fixture.container(user: "bob").publicCloudDatabase)
            let database = fixture.container().publicCloudDatabase
            _ = try await TestDatabase.save(makeRecords("Item", count: 30, prefix: "b") { _ in [:] }, in: database)
            let stopping = RecordDeleter(database: database, query: Query(recordType: "Item"), options: Self.options(batchSize: 10))
            let first = try await stopping.run(checkpoint: PipelineCheckpoint(job: "purge"), failed: { _, _ in stopping.cancel() })
            #expect(first.end == .cancelled && first.failed == 5, "bob's records: \(first)")
            let second = try await RecordDeleter(database: database, query: Query(recordType: "Item"), options: Self.options(batchSize: 10))
                .run(checkpoint: PipelineCheckpoint(job: "purge"))
            #expect(second.end == .finished && second.failed == 0 && second.failedInEarlierRuns == 5, "\(second)")
            let left = try await Self.names("Item", in: database)
            #expect(first.deleted + second.deleted == 30 && left.count == 5, "\(first) \(second) \(left)")
        }
    }

    @Test("with a checkpoint the run completes and removes its position: the next run with it starts afresh and deletes the new matches")
    func checkpointedRun() async throws {
        try await SQLiteFixture.with { fixture in
            let database = try await Self.tasks(fixture)
            let query = Query(recordType: "Task", predicate: try QueryPredicate(format: "n >= %@", 20))
            let options = Self.options(batchSize: 2)
            let first = try await RecordDeleter(database: database, query: query, options: options).run(checkpoint: PipelineCheckpoint(job: "purge"))
            #expect(first.deleted == 5 && first.end == .finished, "\(first)")

            _ = try await TestDatabase.save([makeRecord("Task", "late", ["n": .int64(30)])], in: database)
            let second = try await RecordDeleter(database: database, query: query, options: options).run(checkpoint: PipelineCheckpoint(job: "purge"))
            #expect(second.matched == 1 && second.deleted == 1, "a completed job kept no position: \(second)")
            #expect(try await Self.names("Task", in: database) == (0..<20).map { recordName("t", $0) })
        }
    }
}

/// Progress reports, from whichever thread the job calls on.
private final class Reports: Sendable {
    private let values = Mutex<[Int]>([])
    func add(_ value: Int) { values.withLock { $0.append(value) } }
    var all: [Int] { values.withLock { $0 } }
    var last: Int? { all.last }
}
