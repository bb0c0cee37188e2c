import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

/// `Database.run(_:)`: a pipeline's stages added and waited for as one piece of work, with one
/// error that explains how it ended.
@Suite("Running a whole pipeline", .timeLimit(.minutes(30)))
struct PipelineRunTests {
    static func int(_ record: Record, _ key: String) -> Int64? {
        if case .int64(let value)? = record.fieldValue(forKey: key) { return value }
        return nil
    }

    @Test("a fan-out run returns once every stage's final block has run, with every record saved and every batch consumed")
    func fanOutCompletes() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(120), in: database)
            let query = PipelineStreamingTests.everyItem(pageSize: 25)
            let mark = ModifyRecordsOperation(savingRecordsFrom: query) { records in
                for record in records { record["marked"] = 1 }
                return records
            }
            let seen = Box(0), finals = Box<[String]>([])
            let count = ConsumeOperation(consuming: query) { (records: [Record]) in seen.update { $0 += records.count } }
            query.queryResultBlock = { _ in finals.update { $0.append("query") } }
            mark.modifyRecordsResultBlock = { _ in finals.update { $0.append("mark") } }
            count.consumeResultBlock = { _ in finals.update { $0.append("count") } }

            try await database.run([query, mark, count])

            #expect(finals.value.sorted() == ["count", "mark", "query"])
            #expect(seen.value == 120)
            #expect(try await TestDatabase.queryAll(try Query(recordType: "Item", format: "marked == 1"), in: database).count == 120)
            // Operations that finished already, and no operations, complete at once.
            try await database.run([query, mark])
            try await database.run([])
        }
    }

    @Test("a failing stage: the run throws that stage's own error, with the position every stage reports")
    func failingStage() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(200), in: database)
            let query = PipelineStreamingTests.everyItem(pageSize: 10)
            let batches = Box(0)
            let check = TransformOperation(transforming: query) { (records: [Record]) -> [Record] in
                if batches.update({ $0 += 1; return $0 }) == 4 { throw StratusError(.limitExceeded, "the fourth batch is refused") }
                return records
            }
            let save = ModifyRecordsOperation(savingRecordsFrom: check) { records in
                for record in records { record["ok"] = 1 }
                return records
            }
            let saveFinal = Box<Result<Void, any Error>?>(nil)
            save.modifyRecordsResultBlock = { saveFinal.value = $0 }

            let thrown = await #expect(throws: StratusError.self) { try await database.run([query, check, save]) }
            let error = try #require(thrown)
            #expect(error.code == .limitExceeded && error.message == "the fourth batch is refused", "\(error)")
            let saveError = try #require(finalError(saveFinal.value), "the save stage's final block ran before the run returned")
            #expect(error.pipelinePosition == saveError.pipelinePosition)
            let written = try await TestDatabase.queryAll(try Query(recordType: "Item", format: "ok == 1"), in: database).count
            #expect(written <= 30 && written % 10 == 0)
        }
    }

    @Test("a cancelled stage: the run throws operationCancelled, and every other stage's error names the stage that was cancelled")
    func cancelledStage() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(300), in: database)
            let query = PipelineStreamingTests.everyItem(pageSize: 10)
            let stages = Box<[Operation]>([])
            let transformed = Box(0)
            let bump = TransformOperation(transforming: query) { (records: [Record]) -> [Record] in
                if transformed.update({ $0 += 1; return $0 }) == 3 { stages.value[1].cancel() }
                for record in records { record["count"] = (Self.int(record, "count") ?? 0) + 1 }
                return records
            }
            let save = ModifyRecordsOperation(savingRecordsFrom: bump)
            stages.value = [query, bump, save]
            let queryFinal = Box<Result<QueryOperation.Cursor?, any Error>?>(nil), saveFinal = Box<Result<Void, any Error>?>(nil)
            query.queryResultBlock = { queryFinal.value = $0 }
            save.modifyRecordsResultBlock = { saveFinal.value = $0 }

            let thrown = await #expect(throws: StratusError.self) { try await database.run([query, bump, save]) }
            #expect(thrown?.code == .operationCancelled)
            for other in [finalError(queryFinal.value), finalError(saveFinal.value)] {
                let error = try #require(other)
                #expect(error.code == .operationCancelled)
                #expect(error.message.contains("the pipeline's TransformOperation was cancelled"), "\(error.message)")
            }
            let counted = try await TestDatabase.queryAll(try Query(recordType: "Item", format: "count == 1"), in: database).count
            #expect(counted < 300 && counted % 10 == 0)
        }
    }

    @Test("cancelling the task that awaits the run cancels every stage: the run throws operationCancelled and the source stops early")
    func taskCancellation() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(300), in: database)
            let query = PipelineStreamingTests.everyItem(pageSize: 10)
            let firstBatch = DispatchSemaphore(value: 0), goOn = DispatchSemaphore(value: 0)
            let batches = Box(0)
            let hold = TransformOperation(transforming: query) { (records: [Record]) -> [Record] in
                if batches.update({ $0 += 1; return $0 }) == 1 {
                    firstBatch.signal()
                    goOn.wait()
                }
                return records
            }
            let produced = Box(0)
            query.recordMatchedBlock = { _, _ in produced.update { $0 += 1 } }
            let consume = ConsumeOperation(consuming: hold) { (_: [Record]) in }
            let run = Task { try await database.run([query, hold, consume]) }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                DispatchQueue.global().async { firstBatch.wait(); continuation.resume() }
            }
            run.cancel()
            goOn.signal()
            let result = await run.result
            #expect(finalError(result)?.code == .operationCancelled, "\(result)")
            #expect(hold.isCancelled && consume.isCancelled && query.isCancelled)
            #expect(produced.value < 300, "the source stopped before reading everything")
        }
    }

    @Test("a save stage that could not write some records: the run throws partialFailure naming each, after the stages completed the rest")
    func partialFailure() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(50), in: database)
            let query = PipelineStreamingTests.everyItem(pageSize: 10)
            // A new record under a stored record's name is refused alone, as CloudKit refuses it.
            let clash = Record.ID(recordName: recordName("item", 7))
            let touch = TransformOperation(transforming: query) { (records: [Record]) -> [Record] in
                records.map { record in
                    guard record.recordID == clash else { record["touched"] = 1; return record }
                    return Record(recordType: "Item", recordID: clash)
                }
            }
            let save = ModifyRecordsOperation(savingRecordsFrom: touch)
            save.isAtomic = false

            let thrown = await #expect(throws: StratusError.self) { try await database.run([query, touch, save]) }
            let error = try #require(thrown)
            #expect(error.code == .partialFailure, "\(error)")
            #expect(Array(error.partialErrorsByRecordID.keys) == [clash])
            #expect(try await TestDatabase.queryAll(try Query(recordType: "Item", format: "touched == 1"), in: database).count == 49)
        }
    }

    @Test("the completion-handler form calls its handler once, after every stage's final block")
    func completionHandler() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(40), in: database)
            let query = PipelineStreamingTests.everyItem(pageSize: 10)
            let consumed = Box(0), finals = Box(0)
            let consume = ConsumeOperation(consuming: query) { (records: [Record]) in consumed.update { $0 += records.count } }
            query.queryResultBlock = { _ in finals.update { $0 += 1 } }
            consume.consumeResultBlock = { _ in finals.update { $0 += 1 } }
            let answer: (Result<Void, any Error>, Int) = await withCheckedContinuation { continuation in
                database.run([query, consume]) { result in continuation.resume(returning: (result, finals.value)) }
            }
            #expect(finalError(answer.0) == nil)
            #expect(answer.1 == 2, "both final blocks ran before the handler")
            #expect(consumed.value == 40)
        }
    }

    @Test("a checkpointed pipeline whose position no one store would say exactly is refused before anything is read: two stages that write the store, or a writing stage on another store than the source's (found by a pipeline tester: records were skipped and done twice after kills)")
    func checkpointNeedsOneWriterInTheSourcesStore() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(30), in: database)
            let query = PipelineStreamingTests.everyItem(pageSize: 10)
            query.checkpoint = PipelineCheckpoint(job: "two-writers")
            let first = ModifyRecordsOperation(savingRecordsFrom: query) { records in
                for record in records { record["count"] = (Self.int(record, "count") ?? 0) + 1 }
                return records
            }
            let audit = TransformOperation(transforming: query) { (records: [Record]) in
                records.map { Record(recordType: "Audit", recordID: Record.ID(recordName: "audit-" + $0.recordID.recordName)) }
            }
            let second = ModifyRecordsOperation(savingRecordsFrom: audit) { $0 }
            let finals = Box<[StratusError?]>([])
            first.modifyRecordsResultBlock = { result in finals.update { $0.append(finalError(result)) } }
            second.modifyRecordsResultBlock = { result in finals.update { $0.append(finalError(result)) } }
            await #expect(throws: StratusError.self) { try await database.run([query, first, audit, second]) }
            #expect(finals.value.count == 2 && finals.value.allSatisfy { $0?.message.contains("2 stages write it") == true }, "\(finals.value)")
            #expect(try await TestDatabase.queryAll(try Query(recordType: "Item", format: "count == 1"), in: database).isEmpty, "nothing was written")

            let other = try Container(identifier: SQLiteFixture.identifier, storePath: fixture.store.path("other.sqlite"), userName: "alice").publicCloudDatabase
            let elsewhere = PipelineStreamingTests.everyItem(pageSize: 10)
            elsewhere.checkpoint = PipelineCheckpoint(job: "copy-elsewhere")
            let copy = ModifyRecordsOperation(savingRecordsFrom: elsewhere) { records in
                records.map { Record(recordType: "Item", recordID: $0.recordID) }
            }
            let copyFinal = Box<StratusError?>(nil)
            copy.modifyRecordsResultBlock = { copyFinal.value = finalError($0) }
            other.add(copy)
            database.add(elsewhere)
            await waitUntilFinished([elsewhere, copy])
            #expect(copyFinal.value?.code == .invalidArguments && copyFinal.value?.message.contains("not the store its source reads") == true, "\(String(describing: copyFinal.value))")
            #expect(try await TestDatabase.queryAll(Query(recordType: "Item"), in: other).isEmpty)
        }
    }

    @Test("a pipeline stopped before its first batch completed gives no resumeCursor (start over), not the query's own cursor past records no stage finished (found by a pipeline tester: resuming from it skipped a page)")
    func noResumeCursorBeforeTheFirstBatch() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(50), in: database)
            let query = PipelineStreamingTests.everyItem(pageSize: 10)
            let check = TransformOperation(transforming: query) { (records: [Record]) -> [Record] in
                query.cancel()
                return records
            }
            let count = ConsumeOperation(consuming: check) { (_: [Record]) in }
            let queryFinal = Box<StratusError?>(nil)
            query.queryResultBlock = { queryFinal.value = finalError($0) }
            await #expect(throws: StratusError.self) { try await database.run([query, check, count]) }
            let error = try #require(queryFinal.value)
            #expect(error.code == .operationCancelled && error.pipelinePosition == nil, "\(error)")
            #expect(error.resumeCursor == nil, "no batch was completed: \(String(describing: error.resumeCursor))")
        }
    }

    @Test("a consumer attached to a producer that had started or finished fails saying so, rather than reporting success over part of the batches, or never reporting (found by a pipeline tester)")
    func lateConsumersFail() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(30), in: database)
            let query = PipelineStreamingTests.everyItem(pageSize: 10)
            let first = ConsumeOperation(consuming: query) { (_: [Record]) in }
            try await database.run([query, first])
            let late = ConsumeOperation(consuming: query) { (_: [Record]) in }
            let final = Box<StratusError?>(nil)
            late.consumeResultBlock = { final.value = finalError($0) }
            database.add(late)
            await waitUntilFinished([late])
            #expect(final.value?.code == .invalidArguments && final.value?.message.contains("after that had started") == true, "\(String(describing: final.value))")
        }
    }

    @Test("a pipeline run without one of its stages is refused before anything runs, naming the stage, rather than waiting forever; run again whole it completes (found by a pipeline tester)")
    func stageLeftOutIsRefused() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(30), in: database)
            let query = PipelineStreamingTests.everyItem(pageSize: 10)
            let mark = TransformOperation(transforming: query) { (records: [Record]) -> [Record] in
                for record in records { record["marked"] = 1 }
                return records
            }
            let save = ModifyRecordsOperation(savingRecordsFrom: mark)
            let thrown = await #expect(throws: StratusError.self) { try await database.run([query, save]) }
            #expect(thrown?.code == .invalidArguments && thrown?.message.contains("TransformOperation, a stage of the pipeline") == true, "\(String(describing: thrown))")
            #expect(!query.isFinished && !save.isFinished)
            #expect(try await TestDatabase.queryAll(try Query(recordType: "Item", format: "marked == 1"), in: database).isEmpty)

            try await database.run([query, mark, save])
            #expect(try await TestDatabase.queryAll(try Query(recordType: "Item", format: "marked == 1"), in: database).count == 30)

            // A stage added to the database already is run by it, and need not be given.
            let second = PipelineStreamingTests.everyItem(pageSize: 10)
            let count = Box(0)
            let consume = ConsumeOperation(consuming: second) { (records: [Record]) in count.update { $0 += records.count } }
            database.add(second)
            try await database.run([consume])
            #expect(count.value == 30)

            // A stage the app runs on a queue of its own names its database, and may wait there
            // (here behind a dependency) while run has the rest.
            let third = PipelineStreamingTests.everyItem(pageSize: 10)
            let counted = Box(0)
            let own = ConsumeOperation(consuming: third) { (records: [Record]) in counted.update { $0 += records.count } }
            own.database = database
            let warmUp = BlockOperation { Thread.sleep(forTimeInterval: 0.05) }
            own.addDependency(warmUp)
            let queue = OperationQueue()
            queue.addOperation(own)
            queue.addOperation(warmUp)
            try await database.run([third])
            await waitUntilFinished([own])
            #expect(counted.value == 30)

            // A consumer released before it ran would never take its producer's batches.
            let fourth = PipelineStreamingTests.everyItem(pageSize: 10)
            do { _ = ConsumeOperation(consuming: fourth) { (_: [Record]) in } }
            let released = await #expect(throws: StratusError.self) { try await database.run([fourth]) }
            #expect(released?.code == .invalidArguments && released?.message.contains("released before it ran") == true, "\(String(describing: released))")
        }
    }

    @Test("a writing stage whose store fails reports, with the store's error, how many records it had written, as a stage stopped otherwise does (found by a pipeline tester)")
    func failingStoreStageSaysHowFarItGot() async throws {
        let (database, engine, store) = try SafeWriteTests.scripted()
        defer { store.remove() }
        try await TestDatabase.save(items(40), in: database)
        let full = StratusError(.quotaExceeded, "the disk is full")

        let query = PipelineStreamingTests.everyItem(pageSize: 10)
        let save = ModifyRecordsOperation(savingRecordsFrom: query) { records in
            for record in records { record["ok"] = 1 }
            return records
        }
        engine.script { $0.passingWrites = 2; $0.alwaysFailWrites = full }
        let saveError = await #expect(throws: StratusError.self) { try await database.run([query, save]) }
        #expect(saveError?.code == .quotaExceeded && saveError?.completedItemCount == 20, "\(String(describing: saveError))")

        engine.script { $0.passingWrites = 0; $0.alwaysFailWrites = nil }
        let source = PipelineStreamingTests.everyItem(pageSize: 10)
        let delete = DeleteRecordsOperation(deletingRecordsFrom: source)
        engine.script { $0.passingWrites = 1; $0.alwaysFailWrites = full }
        let deleteError = await #expect(throws: StratusError.self) { try await database.run([source, delete]) }
        #expect(deleteError?.code == .quotaExceeded && deleteError?.completedItemCount == 10, "\(String(describing: deleteError))")
    }

    @Test("a stage cancelled before it starts names its class as every other message does, without its generic arguments (found by a pipeline tester)")
    func cancelledBeforeStartNamesTheStage() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(5), in: database)
            let query = PipelineStreamingTests.everyItem(pageSize: 10)
            let transform = TransformOperation(transforming: query) { (records: [Record]) -> [Record] in records }
            let final = Box<StratusError?>(nil)
            transform.transformResultBlock = { final.value = finalError($0) }
            transform.cancel()
            await #expect(throws: StratusError.self) { try await database.run([query, transform]) }
            let message = try #require(final.value?.message)
            #expect(message.contains("TransformOperation") && !message.contains("<"), "\(message)")
        }
    }

    @Test("a stopped job's position, discarded, makes the next run start from the beginning; a completed job has none to discard")
    func discardedPosition() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(100), in: database)
            func bumpEvery(stoppingAfter stopBatch: Int?) async throws {
                let query = PipelineStreamingTests.everyItem(pageSize: 10)
                query.checkpoint = PipelineCheckpoint(job: "bump")
                let batches = Box(0)
                let bump = ModifyRecordsOperation(savingRecordsFrom: query) { records in
                    for record in records { record["count"] = (Self.int(record, "count") ?? 0) + 1 }
                    return records
                }
                let stop = ConsumeOperation(consuming: query) { (_: [Record]) in
                    if batches.update({ $0 += 1; return $0 }) == stopBatch { throw StratusError(.limitExceeded, "stop here") }
                }
                try await database.run([query, bump, stop])
            }
            await #expect(throws: StratusError.self) { try await bumpEvery(stoppingAfter: 3) }
            let first = try await TestDatabase.queryAll(try Query(recordType: "Item", format: "count == 1"), in: database).count
            #expect(first > 0 && first < 100)

            #expect(try await database.discardPipelinePosition(job: "bump"))
            try await bumpEvery(stoppingAfter: nil)
            let counts = try await TestDatabase.queryAll(Query(recordType: "Item"), in: database).map { Self.int($0, "count") ?? 0 }
            #expect(counts.filter { $0 == 2 }.count == first, "the first run's records bumped again: the second run started over")
            #expect(counts.filter { $0 == 1 }.count == 100 - first)
            #expect(try await database.discardPipelinePosition(job: "bump") == false, "a completed run removed its position")
        }
    }
}
