import Foundation
import Stratus
import StratusTestSupport
import Testing

// What a CloudKit developer new to Stratus builds with its streaming pipelines, written from the
// README ("Pipelines", "Checkpoints", "Jobs"), the DocC of the public API and samples/Pipeline and
// samples/Reprice only: query → transform → save with a checkpoint, a fan-out with a typed
// hand-off, a delete by query, a failing transform, a cancel from the middle stage, the import
// and export jobs, and two pipelines chained by a dependency on OperationQueues of its own.

/// Each stage's final result, by the stage's name, kept as its final block reports it; `wait()`
/// returns once every stage given a block reported. A pipeline has no single completion, so
/// the app collects its stages' final blocks, as it would several CloudKit operations'.
private final class StageResults: @unchecked Sendable {
    private let lock = NSLock()
    private var results: [String: Result<Void, Error>] = [:]
    private let group = DispatchGroup()

    /// A final block for the stage `name`; make it before the stage is added to a queue.
    func block(_ name: String) -> (Result<Void, Error>) -> Void {
        group.enter()
        return { result in
            self.lock.withLock { self.results[name] = result }
            self.group.leave()
        }
    }

    func wait() async -> [String: Result<Void, Error>] {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            group.notify(queue: .global()) { continuation.resume() }
        }
        return lock.withLock { results }
    }
}

/// A count several operation threads add to.
private final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    @discardableResult func add(_ n: Int = 1) -> Int { lock.withLock { count += n; return count } }
    var value: Int { lock.withLock { count } }
}

private func stratusError(_ result: Result<Void, Error>?) -> StratusError? {
    guard case .failure(let error)? = result else { return nil }
    return error as? StratusError
}

private func productName(_ i: Int) -> String { "p-" + String(repeating: "0", count: max(0, 4 - String(i).count)) + String(i) }

/// `count` products p-0000… with price i and revision 0.
private func seedProducts(_ database: Database, count: Int) async throws {
    let products = (0..<count).map { i -> Record in
        let product = Record(recordType: "Product", recordID: Record.ID(recordName: productName(i)))
        product["price"] = Double(i)
        product["revision"] = Int64(0)
        return product
    }
    let (saved, _) = try await database.modifyRecords(saving: products, deleting: [])
    #expect(saved.values.allSatisfy { (try? $0.get()) != nil })
}

/// Every product's revision, by record name.
private func revisions(_ database: Database) async throws -> [String: Int64] {
    var revisions: [String: Int64] = [:]
    for try await product in database.allRecords(matching: Query(recordType: "Product")) {
        revisions[product.recordID.recordName] = product["revision"] ?? -1
    }
    return revisions
}

private struct BadRecord: Error { let name: String }

/// The three-stage reprice of README's "Pipelines" section: every product, a page of 100 at a
/// time, price × 2 and revision + 1, saved with change tags checked.
private final class Reprice {
    let query: QueryOperation
    let transform: TransformOperation<Record, Record>
    let save: ModifyRecordsOperation
    let results = StageResults()
    let transformed = Counter()
    let saved = Counter()

    init(job: String?, failOn badName: String? = nil, beforeBatch: (@Sendable (Int) -> Void)? = nil) throws {
        query = QueryOperation(query: Query(recordType: "Product"))
        query.fetchAllResults = true
        query.resultsLimit = 100
        if let job { query.checkpoint = PipelineCheckpoint(job: job) }
        let transformed = transformed
        let batches = Counter()
        transform = TransformOperation(transforming: query) { (products: [Record]) -> [Record] in
            beforeBatch?(batches.add())
            for product in products {
                if product.recordID.recordName == badName { throw BadRecord(name: badName!) }
                let price: Double = product["price"] ?? 0, revision: Int64 = product["revision"] ?? 0
                product["price"] = price * 2
                product["revision"] = revision + 1
            }
            transformed.add(products.count)
            return products
        }
        save = ModifyRecordsOperation(savingRecordsFrom: transform)
        save.isAtomic = false
        let saved = saved
        save.perRecordSaveBlock = { _, result in if case .success = result { saved.add() } }
        let queryDone = results.block("query")
        query.queryResultBlock = { queryDone($0.map { _ in () }) }
        transform.transformResultBlock = results.block("transform")
        save.modifyRecordsResultBlock = results.block("save")
    }

    /// Adds the stages, consumers first, and waits for every final block.
    func run(on database: Database) async -> [String: Result<Void, Error>] {
        for stage in [save, transform, query] as [DatabaseOperation] { database.add(stage) }
        return await results.wait()
    }
}

@Suite struct PipelineNewUserTests {
    // 1. query → transform → save with a checkpoint; cancelled, then run again: each product
    //    repriced exactly once, the second run starting where the first stopped.
    @Test(arguments: TestEngine.all) func checkpointedRepriceGoesOnAfterACancel(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.publicCloudDatabase
            try await seedProducts(database, count: 1_000)

            // First run: cancelled from the save's per-record block once 250 products were saved
            // (inside the third batch, which, begun, is written whole).
            let first = try Reprice(job: "reprice-test")
            let save = first.save, saved = first.saved
            first.save.perRecordSaveBlock = { [unowned save] _, result in
                if case .success = result, saved.add() == 250 { save.cancel() }
            }
            let stopped = await first.run(on: database)
            for stage in ["query", "transform", "save"] {
                #expect(stratusError(stopped[stage])?.code == .operationCancelled, "\(stage): \(String(describing: stopped[stage]))")
            }
            let savedFirst = first.saved.value
            #expect(savedFirst >= 250 && savedFirst < 1_000)
            #expect(stratusError(stopped["save"])?.completedItemCount == savedFirst)
            #expect(stratusError(stopped["save"])?.pipelinePosition != nil)

            // Second run: the same code, the same job.
            let second = try Reprice(job: "reprice-test")
            let finished = await second.run(on: database)
            for stage in ["query", "transform", "save"] {
                #expect((try? finished[stage]?.get()) != nil, "\(stage): \(String(describing: finished[stage]))")
            }
            #expect(second.transformed.value == 1_000 - savedFirst)
            #expect(second.saved.value == 1_000 - savedFirst)
            let after = try await revisions(database)
            #expect(after.count == 1_000)
            #expect(after.values.allSatisfy { $0 == 1 })
            let product7: Record = try await database.record(for: Record.ID(recordName: productName(7)))
            #expect(product7["price"] as Double? == 14)

            // README: "Once a pipeline completes, its position is removed: running it again is a
            // new run". Waiting as README's example does, for the save's final block only, is
            // enough: the next run of the job reads every product again.
            for expectedRevision in [Int64(2), 3] {
                let again = try Reprice(job: "reprice-test")
                let result: Result<Void, Error> = await withCheckedContinuation { continuation in
                    again.save.modifyRecordsResultBlock = { continuation.resume(returning: $0) }
                    for stage in [again.query, again.transform, again.save] as [DatabaseOperation] { database.add(stage) }
                }
                #expect((try? result.get()) != nil, "\(result)")
                #expect(again.transformed.value == 1_000)
                #expect(try await revisions(database).values.allSatisfy { $0 == expectedRevision })
            }
        }
    }

    // 2. Fan-out: one query feeding a save and, through a typed hand-off, a summary of its own.
    @Test(arguments: TestEngine.all) func fanOutToASaveAndATypedSummary(engine: TestEngine) async throws {
        struct OrderLine: Sendable { let name: String; let total: Double }
        try await withContainer(on: engine) { container in
            let database = container.publicCloudDatabase
            let orders = (0..<500).map { i -> Record in
                let order = Record(recordType: "Order", recordID: Record.ID(recordName: "o-\(i)"))
                order["total"] = Double(i)
                order["exported"] = Int64(0)
                return order
            }
            _ = try await database.modifyRecords(saving: orders, deleting: [])

            let query = QueryOperation(query: Query(recordType: "Order"))
            query.fetchAllResults = true
            query.resultsLimit = 64
            // Consumer 1: mark every order exported (and zero its total in its own copy).
            let mark = ModifyRecordsOperation(savingRecordsFrom: query) { records in
                for record in records { record["exported"] = Int64(1); record["total"] = 0.0 }
                return records
            }
            mark.isAtomic = false
            // Consumer 2: records → OrderLine → a summary.
            let lines = TransformOperation(transforming: query) { records in
                records.map { OrderLine(name: $0.recordID.recordName, total: $0["total"] ?? -1) }
            }
            let totals = Totals()
            let summary = ConsumeOperation(consuming: lines) { (batch: [OrderLine]) in
                totals.add(batch.map { ($0.name, $0.total) })
            }
            let results = StageResults()
            let queryDone = results.block("query")
            query.queryResultBlock = { queryDone($0.map { _ in () }) }
            mark.modifyRecordsResultBlock = results.block("mark")
            lines.transformResultBlock = results.block("lines")
            summary.consumeResultBlock = results.block("summary")

            // The summary's two stages on a queue of the app's own, with room for both.
            let reportQueue = OperationQueue()
            reportQueue.maxConcurrentOperationCount = 2
            reportQueue.addOperation(lines)
            reportQueue.addOperation(summary)
            database.add(mark)
            database.add(query)
            let outcome = await results.wait()

            for stage in ["query", "mark", "lines", "summary"] {
                #expect((try? outcome[stage]?.get()) != nil, "\(stage): \(String(describing: outcome[stage]))")
            }
            // Each consumer got every record, in its own copy: the save's zeroed totals never
            // reached the summary.
            #expect(totals.names.count == 500)
            #expect(totals.sum == Double((0..<500).reduce(0, +)))
            let exported = try await database.countRecords(matching: Query(recordType: "Order", predicate: try QueryPredicate(format: "exported == 1")))
            #expect(exported == 500)
        }
    }

    // 3. A pipeline that deletes what a query matches.
    @Test(arguments: TestEngine.all) func deleteByQueryPipeline(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.publicCloudDatabase
            let sessions = (0..<600).map { i -> Record in
                let session = Record(recordType: "Session", recordID: Record.ID(recordName: "s-\(i)"))
                session["expired"] = Int64(i % 2)
                return session
            }
            _ = try await database.modifyRecords(saving: sessions, deleting: [])

            let expired = QueryOperation(query: Query(recordType: "Session", predicate: try QueryPredicate(format: "expired == 1")))
            expired.fetchAllResults = true
            expired.resultsLimit = 50
            expired.desiredKeys = []                        // the IDs are enough
            let purge = DeleteRecordsOperation(deletingRecordsFrom: expired)
            let deleted = Counter()
            purge.perRecordDeleteBlock = { _, result in if case .success = result { deleted.add() } }
            let results = StageResults()
            let queryDone = results.block("query")
            expired.queryResultBlock = { queryDone($0.map { _ in () }) }
            purge.deleteRecordsResultBlock = results.block("purge")
            database.add(purge)
            database.add(expired)
            let outcome = await results.wait()

            #expect((try? outcome["query"]?.get()) != nil)
            #expect((try? outcome["purge"]?.get()) != nil)
            #expect(deleted.value == 300)
            #expect(try await database.countRecords(matching: Query(recordType: "Session")) == 300)
            #expect(try await database.countRecords(matching: Query(recordType: "Session", predicate: try QueryPredicate(format: "expired == 1"))) == 0)
        }
    }

    // 4. A transform that throws on one record: what each stage's final block reports, and the
    //    position the pipeline reached; then the job run again after the fix.
    @Test(arguments: TestEngine.all) func aThrowingTransformStopsEveryStageAtOnePosition(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.publicCloudDatabase
            try await seedProducts(database, count: 500)

            // The transform throws on p-0250 (batch 3), once the save has saved batches 1 and 2:
            // an order of events, not a timing.
            let twoBatchesSaved = DispatchSemaphore(value: 0)
            let failing = try Reprice(job: "reprice-failing", failOn: productName(250)) { batch in
                if batch == 3 { _ = twoBatchesSaved.wait(timeout: .now() + 120) }
            }
            let saved = failing.saved
            failing.save.perRecordSaveBlock = { _, result in
                if case .success = result, saved.add() == 200 { twoBatchesSaved.signal() }
            }
            let outcome = await failing.run(on: database)

            let errors = ["query", "transform", "save"].map { stratusError(outcome[$0]) }
            for (stage, error) in zip(["query", "transform", "save"], errors) {
                #expect(error?.code == .internalError, "\(stage): \(String(describing: error))")
                #expect((error?.underlyingError as? BadRecord)?.name == productName(250), "\(stage)")
                #expect(error?.pipelinePosition != nil, "\(stage)")
            }
            #expect(errors[1]?.message.contains("TransformOperation") == true, "\(String(describing: errors[1]?.message))")
            #expect(errors[2]?.completedItemCount == 200)
            // Every stage reports the same position: after p-0199, where a resumed run starts.
            #expect(Set(errors.map { $0?.pipelinePosition }).count == 1)
            guard case .query(let cursor)? = errors[2]?.pipelinePosition else {
                Issue.record("no query position: \(String(describing: errors[2]?.pipelinePosition))")
                return
            }
            let next = QueryOperation(cursor: cursor)
            next.resultsLimit = 1
            let firstAfter = Counter()
            var firstName: String?
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                next.recordMatchedBlock = { id, _ in if firstAfter.add() == 1 { firstName = id.recordName } }
                next.queryResultBlock = { _ in continuation.resume() }
                database.add(next)
            }
            #expect(firstName == productName(200))

            // Fixed, run again: goes on after p-0199, every product repriced exactly once.
            let fixed = try Reprice(job: "reprice-failing")
            let done = await fixed.run(on: database)
            #expect((try? done["save"]?.get()) != nil, "\(String(describing: done["save"]))")
            #expect(fixed.transformed.value == 300)
            let after = try await revisions(database)
            #expect(after.count == 500 && after.values.allSatisfy { $0 == 1 })
        }
    }

    // 5. Cancelling the middle stage stops the whole pipeline; what was saved is what is reported.
    @Test(arguments: TestEngine.all) func cancellingTheMiddleStageStopsThePipeline(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.publicCloudDatabase
            try await seedProducts(database, count: 600)

            let oneBatchSaved = DispatchSemaphore(value: 0)
            let middle = OperationHolder()
            let reprice = try Reprice(job: nil) { batch in
                // The transform cancels itself at its third batch, once the first batch is saved.
                if batch == 3 {
                    _ = oneBatchSaved.wait(timeout: .now() + 120)
                    middle.operation?.cancel()
                }
            }
            middle.operation = reprice.transform
            let saved = reprice.saved
            reprice.save.perRecordSaveBlock = { _, result in
                if case .success = result, saved.add() == 100 { oneBatchSaved.signal() }
            }
            let outcome = await reprice.run(on: database)

            for stage in ["query", "transform", "save"] {
                #expect(stratusError(outcome[stage])?.code == .operationCancelled, "\(stage): \(String(describing: outcome[stage]))")
                #expect(stratusError(outcome[stage])?.pipelinePosition != nil, "\(stage)")
            }
            // README: "a cancelled query's error carries resumeCursor".
            #expect(stratusError(outcome["query"])?.resumeCursor != nil)
            let savedCount = reprice.saved.value
            #expect(savedCount >= 100 && savedCount < 600)
            #expect(stratusError(outcome["save"])?.completedItemCount == savedCount)
            let after = try await revisions(database)
            #expect(after.values.filter { $0 == 1 }.count == savedCount)
            #expect(after.values.allSatisfy { $0 == 0 || $0 == 1 })
        }
    }

    // 6. The jobs: RecordImporter from NDJSON text and from a file, RecordExporter to an NDJSON
    //    file, each with its progress callback. (CloudKitStyleTests does not link
    //    StratusTransfer, so the NDJSON reader and writer are the app's own RecordSource and
    //    RecordSink.)
    @Test(arguments: TestEngine.all) func importAndExportNDJSONWithProgress(engine: TestEngine) async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pipeuser-jobs-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try await withContainer(on: engine) { container in
            let database = container.publicCloudDatabase
            let text = (0..<700).map { #"{"recordName":"n-\#($0)","recordType":"Note","fields":{"title":{"value":"Note \#($0)"},"n":{"value":\#($0)}}}"# }
                .joined(separator: "\n") + "\n"

            // From text in memory.
            var options = RecordImporter.Options()
            options.batchSize = 100
            let lastProgress = ProgressLog()
            let summary = try await RecordImporter(database: database, options: options)
                .run(from: NDJSONSource(text: text)) { progress in lastProgress.keep(progress.summary.created, progress.pending) }
            #expect(summary.created == 700 && summary.failed == 0 && summary.end == .finished)
            #expect(lastProgress.calls > 0)
            #expect(lastProgress.last?.0 == 700 && lastProgress.last?.1 == 0)

            // From a file: the same lines again are unchanged (the default write mode).
            let input = folder.appendingPathComponent("notes.ndjson")
            try Data(text.utf8).write(to: input)
            let again = try await RecordImporter(database: database, options: options)
                .run(from: NDJSONSource(text: String(contentsOf: input, encoding: .utf8)))
            #expect(again.unchanged == 700 && again.created == 0)

            // Export to a file, with progress after each page.
            let output = folder.appendingPathComponent("export.ndjson")
            _ = FileManager.default.createFile(atPath: output.path, contents: nil)
            let handle = try FileHandle(forWritingTo: output)
            let sink = NDJSONSink(handle: handle)
            let pages = ProgressLog()
            let query = Query(recordType: "Note")
            query.sortDescriptors = [RecordSortDescriptor(key: "n", ascending: true)]
            let exported = try await RecordExporter(database: database, query: query, pageSize: 250)
                .run(into: sink) { count in pages.keep(count, 0) }
            try handle.close()
            #expect(exported.exported == 700 && exported.end == .finished)
            #expect(pages.values == [250, 500, 700])
            let lines = try String(contentsOf: output, encoding: .utf8).split(separator: "\n")
            #expect(lines.count == 700)
            #expect(lines.first?.contains(#""recordName":"n-0""#) == true)
            #expect(lines.last?.contains(#""recordName":"n-699""#) == true)
        }
    }

    // 7. Two pipelines on OperationQueues of the app's own: the second starts after the first
    //    finished (its query depends on the first pipeline's save).
    @Test(arguments: TestEngine.all) func aPipelineThatDependsOnAnother(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.publicCloudDatabase
            let todos = (0..<300).map { i -> Record in
                let todo = Record(recordType: "Todo", recordID: Record.ID(recordName: "t-\(i)"))
                todo["checked"] = Int64(0)
                return todo
            }
            _ = try await database.modifyRecords(saving: todos, deleting: [])

            // Pipeline A: mark every open to-do done.
            let open = QueryOperation(query: Query(recordType: "Todo", predicate: try QueryPredicate(format: "checked == 0")))
            open.fetchAllResults = true
            open.resultsLimit = 40
            let markDone = ModifyRecordsOperation(savingRecordsFrom: open) { records in
                records.forEach { $0["checked"] = Int64(1) }
                return records
            }
            markDone.isAtomic = false
            // Pipeline B: count the done ones, after A finished.
            let done = QueryOperation(query: Query(recordType: "Todo", predicate: try QueryPredicate(format: "checked == 1")))
            done.fetchAllResults = true
            done.resultsLimit = 40
            let counted = Counter()
            let count = ConsumeOperation(consuming: done) { (batch: [Record]) in counted.add(batch.count) }
            done.addDependency(markDone)

            let results = StageResults()
            let openDone = results.block("open"), doneDone = results.block("done")
            open.queryResultBlock = { openDone($0.map { _ in () }) }
            markDone.modifyRecordsResultBlock = results.block("markDone")
            done.queryResultBlock = { doneDone($0.map { _ in () }) }
            count.consumeResultBlock = results.block("count")

            let queueA = OperationQueue(), queueB = OperationQueue()
            queueA.maxConcurrentOperationCount = 2
            queueB.maxConcurrentOperationCount = 2
            for stage in [open, markDone, done] as [DatabaseOperation] { stage.database = database }
            queueB.addOperation(count)
            queueB.addOperation(done)
            queueA.addOperation(markDone)
            queueA.addOperation(open)
            let outcome = await results.wait()

            for stage in ["open", "markDone", "done", "count"] {
                #expect((try? outcome[stage]?.get()) != nil, "\(stage): \(String(describing: outcome[stage]))")
            }
            #expect(counted.value == 300)
        }
    }
}

/// An operation a stage's closure reaches (the closure is made before the operation).
private final class OperationHolder: @unchecked Sendable {
    private let lock = NSLock()
    private weak var held: Operation?
    var operation: Operation? {
        get { lock.withLock { held } }
        set { lock.withLock { held = newValue } }
    }
}

/// What a summary stage added up.
private final class Totals: @unchecked Sendable {
    private let lock = NSLock()
    private var seen = Set<String>(), total = 0.0
    func add(_ lines: [(String, Double)]) { lock.withLock { for (name, value) in lines { seen.insert(name); total += value } } }
    var names: Set<String> { lock.withLock { seen } }
    var sum: Double { lock.withLock { total } }

    // 8. README: "records changed concurrently are reported as failures (serverRecordChanged, in
    //    partialErrorsByItemID), never overwritten", and a save stage with isAtomic = false in a
    //    zone with the atomic capability fails that record alone, not its batch; the pipeline
    //    goes on to its end.
    @Test(arguments: TestEngine.all) func aRecordChangedMeanwhileFailsAloneAndThePipelineGoesOn(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let zoneID = try await database.save(RecordZone(zoneName: "Catalog")).zoneID
            let products = (0..<300).map { i -> Record in
                let product = Record(recordType: "Product", recordID: Record.ID(recordName: productName(i), zoneID: zoneID))
                product["revision"] = Int64(0)
                return product
            }
            _ = try await database.modifyRecords(saving: products, deleting: [])
            let edited = Record.ID(recordName: productName(150), zoneID: zoneID)

            let query = QueryOperation(query: Query(recordType: "Product"))
            query.zoneID = zoneID
            query.fetchAllResults = true
            query.resultsLimit = 100
            let batches = Counter()
            let bump = TransformOperation(transforming: query) { (records: [Record]) -> [Record] in
                if batches.add() == 2 {
                    // Someone else edits p-0150 after the query read it (a write of their own,
                    // waited for on this stage's thread).
                    let written = DispatchSemaphore(value: 0)
                    Task {
                        let other = Record(recordType: "Product", recordID: edited)
                        other["note"] = "edited"
                        _ = try? await database.modifyRecords(saving: [other], deleting: [], savePolicy: .changedKeys)
                        written.signal()
                    }
                    _ = written.wait(timeout: .now() + 120)
                }
                for record in records { record["revision"] = (record["revision"] as Int64? ?? 0) + 1 }
                return records
            }
            let save = ModifyRecordsOperation(savingRecordsFrom: bump)
            save.isAtomic = false
            let results = StageResults()
            let queryDone = results.block("query")
            query.queryResultBlock = { queryDone($0.map { _ in () }) }
            bump.transformResultBlock = results.block("bump")
            save.modifyRecordsResultBlock = results.block("save")
            for stage in [save, bump, query] as [DatabaseOperation] { database.add(stage) }
            let outcome = await results.wait()

            #expect((try? outcome["query"]?.get()) != nil, "\(String(describing: outcome["query"]))")
            #expect((try? outcome["bump"]?.get()) != nil, "\(String(describing: outcome["bump"]))")
            let failure = stratusError(outcome["save"])
            #expect(failure?.code == .partialFailure)
            #expect(failure?.partialErrorsByRecordID.count == 1)
            #expect(failure?.partialErrorsByRecordID[edited]?.code == .serverRecordChanged)
            var revisions: [String: Int64] = [:]
            var note: String?
            for try await product in database.allRecords(matching: Query(recordType: "Product"), inZoneWith: zoneID) {
                revisions[product.recordID.recordName] = product["revision"] ?? -1
                if product.recordID == edited { note = product["note"] }
            }
            #expect(revisions.count == 300)
            #expect(revisions.filter { $0.value == 1 }.count == 299)
            #expect(revisions[productName(150)] == 0 && note == "edited")
        }
    }

    // 9. ConsumeOperation's DocC: a writer that is not Sendable goes in a class of the app's own
    //    that is, written a batch at a time, and finished in the stage's final block.
    @Test(arguments: TestEngine.all) func aConsumerWritesAFileThroughAWriterThatIsNotSendable(engine: TestEngine) async throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("pipeuser-events-\(UUID().uuidString).ndjson")
        defer { try? FileManager.default.removeItem(at: url) }
        try await withContainer(on: engine) { container in
            let database = container.publicCloudDatabase
            let events = (0..<450).map { i -> Record in
                let event = Record(recordType: "Event", recordID: Record.ID(recordName: "e-\(i)"))
                event["n"] = Int64(i)
                return event
            }
            _ = try await database.modifyRecords(saving: events, deleting: [])
            _ = FileManager.default.createFile(atPath: url.path, contents: nil)

            final class EventFile: @unchecked Sendable {      // used by one stage, one batch at a time
                let writer: NDJSONSink
                init(_ writer: NDJSONSink) { self.writer = writer }
                func append(_ events: [Record]) throws { for event in events { try writer.write(event) } }
            }
            let file = EventFile(NDJSONSink(handle: try FileHandle(forWritingTo: url)))
            let query = QueryOperation(query: Query(recordType: "Event"))
            query.fetchAllResults = true
            query.resultsLimit = 100
            let export = ConsumeOperation(consuming: query) { batch in try file.append(batch) }
            let exportQueue = OperationQueue()
            let result: Result<Void, Error> = await withCheckedContinuation { continuation in
                export.consumeResultBlock = { result in
                    try? file.writer.handle.close()
                    continuation.resume(returning: result)
                }
                database.add(query)
                exportQueue.addOperation(export)
            }
            #expect((try? result.get()) != nil, "\(result)")
            let lines = try String(contentsOf: url, encoding: .utf8).split(separator: "\n")
            #expect(lines.count == 450)
            #expect(Set(lines).count == 450)
        }
    }
}

/// The last values a progress callback gave, called from the job's task.
private final class ProgressLog: @unchecked Sendable {
    private let lock = NSLock()
    private var kept: [(Int, Int)] = []
    func keep(_ value: Int, _ pending: Int) { lock.withLock { kept.append((value, pending)) } }
    var calls: Int { lock.withLock { kept.count } }
    var last: (Int, Int)? { lock.withLock { kept.last } }
    var values: [Int] { lock.withLock { kept.map(\.0) } }
}

/// NDJSON of CloudKit record objects (`recordName`, `recordType`, `fields` of `{"value": …}`)
/// with strings and numbers, as a ``RecordSource``.
private final class NDJSONSource: RecordSource {
    private var lines: [Substring]
    private var line = 0
    init(text: String) { lines = text.split(separator: "\n", omittingEmptySubsequences: false) }

    func nextItem() throws -> RecordSourceItem? {
        while line < lines.count {
            let text = lines[line]
            line += 1
            if text.isEmpty { continue }
            guard let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
                  let name = object["recordName"] as? String, let type = object["recordType"] as? String else {
                return .rejected(RecordRejection(line: line, column: 1, recordName: nil, message: "not a record object"))
            }
            let record = Record(recordType: type, recordID: Record.ID(recordName: name))
            for (key, field) in object["fields"] as? [String: Any] ?? [:] {
                switch (field as? [String: Any])?["value"] {
                case let string as String: record[key] = string
                case let number as NSNumber where Double(number.int64Value) != number.doubleValue: record[key] = number.doubleValue
                case let number as NSNumber: record[key] = number.int64Value
                default: return .rejected(RecordRejection(line: line, column: 1, recordName: name, message: "field '\(key)' has no string or number value"))
                }
            }
            return .record(record, line: line)
        }
        return nil
    }
}

/// Writes each exported record as a line of NDJSON (its name, type and string or number fields).
private final class NDJSONSink: RecordSink {
    let handle: FileHandle
    init(handle: FileHandle) { self.handle = handle }

    func write(_ record: Record) throws {
        var fields: [String: Any] = [:]
        for key in record.allKeys().sorted() {
            if let value = record[key] as? String { fields[key] = ["value": value] }
            else if let value: Int64 = record[key] { fields[key] = ["value": value] }
            else if let value: Double = record[key] { fields[key] = ["value": value] }
        }
        let object: [String: Any] = ["recordName": record.recordID.recordName, "recordType": record.recordType, "fields": fields]
        var line = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
        line.append(UInt8(ascii: "\n"))
        try handle.write(contentsOf: line)
    }
}
