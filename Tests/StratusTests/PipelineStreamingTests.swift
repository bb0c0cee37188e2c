import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

/// Pipelines that stream: batches handed on as they are produced, a bounded number in flight,
/// cancellation and failure across every stage, fan-out, typed hand-offs, stages on their own
/// queues, and dependencies between pipelines.
@Suite("Streaming pipelines", .timeLimit(.minutes(30)))
struct PipelineStreamingTests {
    static func queue(_ name: String, slots: Int = 2) -> OperationQueue {
        let queue = OperationQueue()
        queue.name = name
        queue.maxConcurrentOperationCount = slots
        return queue
    }

    /// A query over every page of `Item`, `pageSize` records per batch.
    static func everyItem(pageSize: Int = 10, inFlight: Int = 2) -> QueryOperation {
        let query = QueryOperation(query: Query(recordType: "Item"))
        query.fetchAllResults = true
        query.resultsLimit = pageSize
        query.recordOutput.maximumBatchesInFlight = inFlight
        return query
    }

    /// Runs `operations` (each on `database`, on its own queue) and waits for them all.
    static func run(_ operations: [DatabaseOperation], on database: Database) async -> [OperationQueue] {
        let queues = operations.enumerated().map { queue("stage-\($0.offset)") }
        for (operation, queue) in zip(operations, queues) {
            operation.database = database
            queue.addOperation(operation)
        }
        await waitUntilFinished(operations)
        return queues
    }

    static func int(_ record: Record, _ key: String) -> Int64? {
        if case .int64(let value)? = record.fieldValue(forKey: key) { return value }
        return nil
    }

    @Test("a slow consumer bounds the producer: never more than maximumBatchesInFlight batches, plus the one it reads, ahead of what the consumer finished")
    func backPressure() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(200), in: database)
            let query = Self.everyItem(pageSize: 10, inFlight: 2)
            let output = query.recordOutput
            let produced = Box(0), saved = Box(0), mostInFlight = Box(0), aheadOfFirstSave = Box(0)
            let violations = Box<[String]>([])
            let gate = DispatchSemaphore(value: 0)
            query.recordMatchedBlock = { _, _ in
                let done = saved.value
                let count = produced.update { $0 += 1; return $0 }
                // Batch k is read only after batch k-1 was handed on, which needs the consumer to
                // hold fewer than 2: k ≤ finished + 2, so what was read ≤ saved + 3 batches.
                if count > done + 30 { violations.update { $0.append("read \(count) records while \(done) were saved") } }
                mostInFlight.update { $0 = max($0, output.batchesInFlight) }
                if done == 0 { aheadOfFirstSave.update { $0 = max($0, count) } }
                if count == 30 { gate.signal() }
            }
            let save = ModifyRecordsOperation(savingRecordsFrom: query) { records in
                // The consumer holds its first batch until the producer read all it may read.
                if records.first?.recordID.recordName == recordName("item", 0) { gate.wait() }
                for record in records { record["seen"] = 1 }
                return records
            }
            save.perRecordSaveBlock = { _, result in if case .success = result { saved.update { $0 += 1 } } }
            let final = Box<Result<Void, any Error>?>(nil)
            save.modifyRecordsResultBlock = { final.value = $0 }
            let queryFinal = Box<Result<QueryOperation.Cursor?, any Error>?>(nil)
            query.queryResultBlock = { queryFinal.value = $0 }
            _ = await Self.run([query, save], on: database)

            #expect(violations.value.isEmpty, "\(violations.value.prefix(3))")
            #expect(aheadOfFirstSave.value == 30, "the producer read exactly 3 batches before the consumer finished one")
            #expect(mostInFlight.value <= 2)
            #expect(finalError(final.value) == nil)
            if case .success(let cursor)? = queryFinal.value { #expect(cursor == nil) } else { Issue.record("query: \(String(describing: queryFinal.value))") }
            #expect(produced.value == 200 && saved.value == 200)
            let seen = try await TestDatabase.queryAll(try Query(recordType: "Item", format: "seen == 1"), in: database)
            #expect(seen.count == 200)
        }
    }

    @Test("cancelling any stage stops every stage promptly; each final block reports what it did and the position reached, from which the rest is done exactly once", arguments: [0, 1, 2])
    func cancellationFromAnyStage(_ stage: Int) async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(300), in: database)
            let query = Self.everyItem(pageSize: 10)
            let stages = Box<[Operation]>([])
            let produced = Box(0), transformed = Box(0), saved = Box<[String]>([])
            query.recordMatchedBlock = { _, _ in
                if produced.update({ $0 += 1; return $0 }) == 55 && stage == 0 { stages.value[0].cancel() }
            }
            let bump = TransformOperation(transforming: query) { (records: [Record]) -> [Record] in
                if transformed.update({ $0 += 1; return $0 }) == 4 && stage == 1 { stages.value[1].cancel() }
                for record in records { record["count"] = (Self.int(record, "count") ?? 0) + 1 }
                return records
            }
            let save = ModifyRecordsOperation(savingRecordsFrom: bump)
            save.perRecordSaveBlock = { id, result in
                guard case .success = result else { return }
                if saved.update({ $0.append(id.recordName); return $0.count }) == 35 && stage == 2 { stages.value[2].cancel() }
            }
            stages.value = [query, bump, save]
            let finals = Box<[String: [StratusError?]]>([:])
            query.queryResultBlock = { result in finals.update { $0["query", default: []].append(finalError(result)) } }
            bump.transformResultBlock = { result in finals.update { $0["transform", default: []].append(finalError(result)) } }
            save.modifyRecordsResultBlock = { result in finals.update { $0["save", default: []].append(finalError(result)) } }
            _ = await Self.run([query, bump, save], on: database)

            for name in ["query", "transform", "save"] {
                let reported = finals.value[name] ?? []
                #expect(reported.count == 1, "\(name)'s final block ran \(reported.count) times")
                #expect(reported.first??.code == .operationCancelled, "\(name): \(String(describing: reported.first))")
            }
            let saveError = try #require(finals.value["save"]?.first ?? nil)
            let written = saved.value
            #expect(saveError.completedItemCount == written.count)
            #expect(written == (0..<written.count).map { recordName("item", $0) }, "whole batches, in order")
            #expect(written.count % 10 == 0)
            #expect(produced.value < 300, "the source stopped before reading everything")
            // Every stage reports the same position: after the last record every stage finished.
            let position = saveError.pipelinePosition
            for name in ["query", "transform"] { #expect(finals.value[name]?.first??.pipelinePosition == position) }
            if written.isEmpty {
                #expect(position == nil)
            } else {
                guard case .query(let cursor)? = position else { Issue.record("no query position: \(String(describing: position))"); return }
                #expect(cursor.description == "Cursor(Item after \(written.last!))")
                #expect(saveError.resumeCursor == cursor)
            }

            // Going on from the position reached: every record counted exactly once.
            let rest: QueryOperation
            if case .query(let cursor)? = position { rest = QueryOperation(cursor: cursor) } else { rest = QueryOperation(query: Query(recordType: "Item")) }
            rest.fetchAllResults = true
            let finish = ModifyRecordsOperation(savingRecordsFrom: rest) { records in
                for record in records { record["count"] = (Self.int(record, "count") ?? 0) + 1 }
                return records
            }
            let finishFinal = Box<Result<Void, any Error>?>(nil)
            finish.modifyRecordsResultBlock = { finishFinal.value = $0 }
            _ = await Self.run([rest, finish], on: database)
            #expect(finalError(finishFinal.value) == nil)
            let all = try await TestDatabase.queryAll(Query(recordType: "Item"), in: database)
            #expect(all.count == 300 && all.allSatisfy { Self.int($0, "count") == 1 }, "counts: \(Dictionary(grouping: all) { Self.int($0, "count") ?? 0 }.mapValues(\.count))")
        }
    }

    @Test("a failing stage fails the pipeline: its own error, every other stage stopped with that error and the position reached")
    func failurePropagation() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(200), in: database)
            let query = Self.everyItem(pageSize: 10)
            let batches = Box(0)
            let check = TransformOperation(transforming: query) { (records: [Record]) -> [Record] in
                if batches.update({ $0 += 1; return $0 }) == 4 { throw StratusError(.limitExceeded, "the fourth batch is refused") }
                return records
            }
            let save = ModifyRecordsOperation(savingRecordsFrom: check) { records in
                for record in records { record["ok"] = 1 }
                return records
            }
            let saved = Box<[String]>([])
            save.perRecordSaveBlock = { id, result in if case .success = result { saved.update { $0.append(id.recordName) } } }
            let queryFinal = Box<Result<QueryOperation.Cursor?, any Error>?>(nil), checkFinal = Box<Result<Void, any Error>?>(nil), saveFinal = Box<Result<Void, any Error>?>(nil)
            query.queryResultBlock = { queryFinal.value = $0 }
            check.transformResultBlock = { checkFinal.value = $0 }
            save.modifyRecordsResultBlock = { saveFinal.value = $0 }
            _ = await Self.run([query, check, save], on: database)

            let own = try #require(finalError(checkFinal.value))
            #expect(own.code == .limitExceeded && own.message == "the fourth batch is refused")
            for other in [finalError(queryFinal.value), finalError(saveFinal.value)] {
                let error = try #require(other)
                #expect(error.code == .limitExceeded)
                #expect(error.message.contains("stopped because the pipeline's TransformOperation") && error.message.contains("the fourth batch is refused"), "\(error.message)")
                #expect((error.underlyingError as? StratusError)?.message == "the fourth batch is refused")
                #expect(error.pipelinePosition == own.pipelinePosition)
            }
            let written = saved.value
            #expect(written.count <= 30 && written.count % 10 == 0)
            #expect(written == (0..<written.count).map { recordName("item", $0) })
            if let last = written.last {
                guard case .query(let cursor)? = own.pipelinePosition else { Issue.record("no position"); return }
                #expect(cursor.description == "Cursor(Item after \(last))")
            } else {
                #expect(own.pipelinePosition == nil)
            }
            #expect(try await TestDatabase.queryAll(try Query(recordType: "Item", format: "ok == 1"), in: database).count == written.count)
        }
    }

    struct BadBatch: Error, Equatable { let number: Int }

    @Test("an error the app's closure throws fails its stage with that error as underlyingError, in every stage's result, and the stage says how much it completed")
    func appErrorsKeptAsUnderlying() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(100), in: database)
            let query = Self.everyItem(pageSize: 10)
            let batches = Box(0)
            let save = ModifyRecordsOperation(savingRecordsFrom: query) { records in
                let number = batches.update { $0 += 1; return $0 }
                if number == 3 { throw BadBatch(number: number) }
                return records
            }
            let consumed = Box(0)
            let consume = ConsumeOperation(consuming: save) { (records: [Record]) in consumed.update { $0 += records.count } }
            let queryFinal = Box<Result<QueryOperation.Cursor?, any Error>?>(nil)
            let saveFinal = Box<Result<Void, any Error>?>(nil), consumeFinal = Box<Result<Void, any Error>?>(nil)
            query.queryResultBlock = { queryFinal.value = $0 }
            save.modifyRecordsResultBlock = { saveFinal.value = $0 }
            consume.consumeResultBlock = { consumeFinal.value = $0 }
            _ = await Self.run([query, save, consume], on: database)
            let own = try #require(finalError(saveFinal.value))
            #expect(own.code == .internalError && own.message.contains("the closure given to ModifyRecordsOperation threw BadBatch"), "\(own.message)")
            #expect(own.underlyingError as? BadBatch == BadBatch(number: 3))
            #expect(own.completedItemCount == 20, "two batches were saved before the third threw")
            for other in [finalError(queryFinal.value), finalError(consumeFinal.value)] {
                let error = try #require(other)
                #expect(error.underlyingError as? BadBatch == BadBatch(number: 3), "every stage's result carries the app's error: \(error)")
            }
        }
    }

    @Test("a checkpoint store that cannot save stops the pipeline with an error that says so, its own as underlyingError; stages are named without generic arguments")
    func checkpointStoreFailure() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(100), in: database)
            let query = Self.everyItem(pageSize: 10)
            query.checkpoint = try PipelineCheckpoint(store: FailingPipelineCheckpoint(succeeding: 2))
            let consume = ConsumeOperation(consuming: query) { (_: [Record]) in }
            let queryFinal = Box<Result<QueryOperation.Cursor?, any Error>?>(nil), consumeFinal = Box<Result<Void, any Error>?>(nil)
            query.queryResultBlock = { queryFinal.value = $0 }
            consume.consumeResultBlock = { consumeFinal.value = $0 }
            _ = await Self.run([query, consume], on: database)
            let own = try #require(finalError(consumeFinal.value))
            #expect(own.message.contains("the pipeline's checkpoint store could not save the position of job") && own.underlyingError is FailingPipelineCheckpoint.DiskFull, "\(own)")
            let other = try #require(finalError(queryFinal.value))
            #expect(other.message.contains("stopped because the pipeline's ConsumeOperation failed"), "\(other.message)")
        }
    }

    @Test("a partialFailure thrown by a closure (its own save that failed in part) stops the pipeline instead of passing for a stage's partial success")
    func partialFailureThrownByAClosure() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(100), in: database)
            let query = Self.everyItem(pageSize: 10)
            let batches = Box(0)
            let audit = TransformOperation(transforming: query) { (records: [Record]) -> [Record] in
                if batches.update({ $0 += 1; return $0 }) == 2 { throw StratusError(.partialFailure, "1 of 10 audit records failed") }
                return records
            }
            let save = ModifyRecordsOperation(savingRecordsFrom: audit) { records in
                for record in records { record["audited"] = 1 }
                return records
            }
            let queryFinal = Box<Result<QueryOperation.Cursor?, any Error>?>(nil)
            let auditFinal = Box<Result<Void, any Error>?>(nil), saveFinal = Box<Result<Void, any Error>?>(nil)
            query.queryResultBlock = { queryFinal.value = $0 }
            audit.transformResultBlock = { auditFinal.value = $0 }
            save.modifyRecordsResultBlock = { saveFinal.value = $0 }
            _ = await Self.run([query, audit, save], on: database)
            let own = try #require(finalError(auditFinal.value))
            #expect(own.code == .internalError && (own.underlyingError as? StratusError)?.code == .partialFailure, "\(own)")
            #expect(finalError(saveFinal.value) != nil && finalError(queryFinal.value) != nil, "no stage passes for a success")
            // Batch one may or may not have been begun when the second batch stopped the pipeline.
            #expect([0, 10].contains(try await TestDatabase.queryAll(try Query(recordType: "Item", format: "audited == 1"), in: database).count))
        }
    }

    @Test("a save stage takes batches while it writes the one before: each written once and in order; a batch its transform refuses fails it after every batch before")
    func saveStageTakesBatchesAhead() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(100), in: database)
            for refusedBatch in [nil, 5] as [Int?] {
                let query = Self.everyItem(pageSize: 10, inFlight: 4)
                let transformed = Box(0)
                let save = ModifyRecordsOperation(savingRecordsFrom: query) { records in
                    if transformed.update({ $0 += 1; return $0 }) == refusedBatch { throw StratusError(.limitExceeded, "batch \(refusedBatch!) is refused") }
                    for record in records { record["count"] = (Self.int(record, "count") ?? 0) + 1 }
                    return records
                }
                let saved = Box<[String]>([])
                save.perRecordSaveBlock = { id, result in if case .success = result { saved.update { $0.append(id.recordName) } } }
                let saveFinal = Box<Result<Void, any Error>?>(nil)
                save.modifyRecordsResultBlock = { saveFinal.value = $0 }
                _ = await Self.run([query, save], on: database)

                let expected = refusedBatch.map { ($0 - 1) * 10 } ?? 100
                #expect(saved.value == (0..<expected).map { recordName("item", $0) })
                if let refusedBatch {
                    let error = try #require(finalError(saveFinal.value))
                    #expect(error.code == .limitExceeded && error.message == "batch \(refusedBatch) is refused", "\(error.message)")
                } else {
                    #expect(finalError(saveFinal.value) == nil)
                }
            }
            // Every record once in the complete run, the first 40 again in the refused one.
            let all = try await TestDatabase.queryAll(Query(recordType: "Item"), in: database)
            #expect(all.count == 100 && all.allSatisfy { Self.int($0, "count") == (Int(recordNumber($0)) < 40 ? 2 : 1) })
        }
    }

    private func recordNumber(_ record: Record) -> Int { Int(record.recordID.recordName.split(separator: "-").last ?? "") ?? -1 }

    @Test("a consumer that fails after its producer finished stops the pipeline: every stage reports, none waits for the finished producer")
    func failureAfterProducerFinished() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(20), in: database)
            let query = Self.everyItem(pageSize: 10, inFlight: 4)
            let consume = ConsumeOperation(consuming: query) { (_: [Record]) in
                // The producer hands on both batches without waiting and finishes first. The bound
                // is minutes, so that only a producer that never finishes reaches it.
                let deadline = ContinuousClock.now + .seconds(300)
                while !query.isFinished && ContinuousClock.now < deadline { usleep(1_000) }
                throw StratusError(.limitExceeded, "refused after the producer finished")
            }
            let queryFinal = Box<Result<QueryOperation.Cursor?, any Error>?>(nil), consumeFinal = Box<Result<Void, any Error>?>(nil)
            query.queryResultBlock = { queryFinal.value = $0 }
            consume.consumeResultBlock = { consumeFinal.value = $0 }
            _ = await Self.run([query, consume], on: database)

            #expect(query.isFinished && consume.isFinished)
            let error = try #require(finalError(consumeFinal.value))
            #expect(error.code == .limitExceeded && error.message == "refused after the producer finished")
            #expect(error.pipelinePosition == nil, "no batch was completed")
            #expect(queryFinal.value != nil, "the producer reported")
        }
    }

    @Test("fan-out: every consumer gets every batch, each its own copies of the records")
    func fanOut() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(120), in: database)
            let query = Self.everyItem(pageSize: 25)
            let mark = ModifyRecordsOperation(savingRecordsFrom: query) { records in
                for record in records { record["marked"] = 1 }
                return records
            }
            let seen = Box<[String]>([]), markedSeen = Box(0)
            let list = ConsumeOperation(consuming: query) { (records: [Record]) in
                seen.update { $0 += records.map(\.recordID.recordName) }
                markedSeen.update { $0 += records.filter { $0.fieldValue(forKey: "marked") != nil }.count }
            }
            let ids = Box<[String]>([])
            let names = TransformOperation(transforming: query) { (records: [Record]) in records.map(\.recordID.recordName) }
            let collect = ConsumeOperation(consuming: names) { (batch: [String]) in ids.update { $0 += batch } }
            let finals = Box<[StratusError?]>([])
            mark.modifyRecordsResultBlock = { result in finals.update { $0.append(finalError(result)) } }
            list.consumeResultBlock = { result in finals.update { $0.append(finalError(result)) } }
            collect.consumeResultBlock = { result in finals.update { $0.append(finalError(result)) } }
            #expect(query.recordOutput.consumerCount == 3)
            _ = await Self.run([query, mark, list, names, collect], on: database)

            let expected = (0..<120).map { recordName("item", $0) }
            #expect(finals.value.count == 3 && finals.value.allSatisfy { $0 == nil }, "\(finals.value)")
            #expect(seen.value == expected)
            #expect(ids.value == expected)
            #expect(markedSeen.value == 0, "one consumer's changes never reach another")
            #expect(try await TestDatabase.queryAll(try Query(recordType: "Item", format: "marked == 1"), in: database).count == 120)
        }
    }

    @Test("stages on three queues: each stage's closures and blocks run on its own thread, one thread per stage; a typed hand-off reaches a custom consumer")
    func crossQueueTypedHandOff() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(90), in: database)
            let query = Self.everyItem(pageSize: 20)
            let places = Box<Set<String>>([])
            // Where each ran: the stage's own thread (an operation works on a queue of its own,
            // as CloudKit's do, not on the `OperationQueue`'s thread).
            @Sendable func note(_ stage: String) { places.update { _ = $0.insert("\(stage)@\(pthread_self())") } }
            query.recordMatchedBlock = { _, _ in note("query") }
            query.queryResultBlock = { _ in note("query-final") }
            let sums = TransformOperation(transforming: query) { (records: [Record]) -> [Int64] in
                note("transform")
                return [records.reduce(0) { $0 + (Self.int($1, "n") ?? 0) }]
            }
            sums.transformResultBlock = { _ in note("transform-final") }
            let total = Box<Int64>(0), batches = Box(0)
            let add = ConsumeOperation(consuming: sums) { (partial: [Int64]) in
                note("consume")
                batches.update { $0 += 1 }
                total.update { $0 += partial.reduce(0, +) }
            }
            let final = Box<Result<Void, any Error>?>(nil)
            add.consumeResultBlock = { note("consume-final"); final.value = $0 }
            let queues = ["A", "B", "C"].map { Self.queue($0) }
            query.database = database
            // Added last first: each waits for its batches, on its own queue.
            queues[2].addOperation(add)
            queues[1].addOperation(sums)
            queues[0].addOperation(query)
            await waitUntilFinished([query, sums, add])

            #expect(finalError(final.value) == nil)
            #expect(total.value == Int64((0..<90).reduce(0, +)))
            #expect(batches.value == 5, "one sum per batch of 20")
            var threads: [String: Set<Substring>] = [:]
            for place in places.value {
                let parts = place.split(separator: "@")
                threads[String(parts[0].split(separator: "-")[0]), default: []].insert(parts[1])
            }
            #expect(threads.keys.sorted() == ["consume", "query", "transform"], "\(places.value)")
            #expect(threads.values.allSatisfy { $0.count == 1 }, "each stage's closures and blocks on one thread: \(places.value)")
            #expect(Set(threads.values.compactMap(\.first)).count == 3, "three stages, three threads: \(places.value)")
        }
    }

    @Test("a pipeline that depends on another starts after it and sees its writes")
    func dependenciesBetweenPipelines() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(150), in: database)
            let first = Self.everyItem(pageSize: 40)
            let stamp = ModifyRecordsOperation(savingRecordsFrom: first) { records in
                for record in records { record["stage"] = 1 }
                return records
            }
            let second = QueryOperation(query: try Query(recordType: "Item", format: "stage == 1"))
            second.fetchAllResults = true
            second.addDependency(stamp)
            let counted = Box(0)
            let count = ConsumeOperation(consuming: second) { (records: [Record]) in counted.update { $0 += records.count } }
            let final = Box<Result<Void, any Error>?>(nil)
            count.consumeResultBlock = { final.value = $0 }
            // The second pipeline is queued first; only the dependency orders them.
            _ = await Self.run([second, count, first, stamp], on: database)
            #expect(finalError(final.value) == nil)
            #expect(counted.value == 150)
        }
    }

    @Test("stages added with database.add run beside its other operations: six stages complete, and a save made while the last one waits for it completes")
    func stagesAddedToTheDatabase() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(100), in: database)
            let query = Self.everyItem(pageSize: 10)
            let first = TransformOperation(transforming: query) { (records: [Record]) in records }
            let second = TransformOperation(transforming: first) { (records: [Record]) in records.map(\.recordID.recordName) }
            let third = TransformOperation(transforming: second) { (names: [String]) in names }
            let fourth = TransformOperation(transforming: third) { (names: [String]) in names }
            let otherSaved = DispatchSemaphore(value: 0)
            let seen = Box<[String]>([])
            let last = ConsumeOperation(consuming: fourth) { (names: [String]) in
                // Holds the whole pipeline until an ordinary operation of the database has run.
                if seen.value.isEmpty { otherSaved.wait() }
                seen.update { $0 += names }
            }
            let final = Box<Result<Void, any Error>?>(nil)
            last.consumeResultBlock = { final.value = $0 }
            let stages: [DatabaseOperation] = [query, first, second, third, fourth, last]
            for stage in stages { database.add(stage) }
            _ = try await database.save(Record(recordType: "Other", recordID: Record.ID(recordName: "beside")))
            otherSaved.signal()
            await waitUntilFinished(stages)
            #expect(finalError(final.value) == nil)
            #expect(seen.value == (0..<100).map { recordName("item", $0) })
        }
    }

    @Test("a checkpointed query without fetchAllResults reads one page per run and goes on with the next; the run that reads the last page removes the position")
    func onePagePerRun() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(25), in: database)
            func run() async -> StratusError? {
                let query = QueryOperation(query: Query(recordType: "Item"))
                query.resultsLimit = 10
                query.checkpoint = PipelineCheckpoint(job: "a-page-a-night")
                let bump = ModifyRecordsOperation(savingRecordsFrom: query) { records in
                    for record in records { record["runs"] = (Self.int(record, "runs") ?? 0) + 1 }
                    return records
                }
                let final = Box<Result<Void, any Error>?>(nil)
                bump.modifyRecordsResultBlock = { final.value = $0 }
                _ = await Self.run([query, bump], on: database)
                return finalError(final.value)
            }
            func runs() async throws -> [Int64] {
                try await TestDatabase.queryAll(Query(recordType: "Item"), in: database).sorted { $0.recordID.recordName < $1.recordID.recordName }.map { Self.int($0, "runs") ?? 0 }
            }
            for _ in 0..<3 { #expect(await run() == nil) }
            #expect(try await runs() == Array(repeating: 1, count: 25), "three runs of one page each: every record once")
            #expect(await run() == nil)
            #expect(try await runs() == Array(repeating: 2, count: 10) + Array(repeating: 1, count: 15), "the last page's run removed the position: a new run starts over")
        }
    }

    @Test("a consumer that depends on another consumer of its producer gets every batch after that one finished, rather than holding the pipeline up forever")
    func consumerDependingOnAnotherConsumer() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(300), in: database)
            let query = Self.everyItem(pageSize: 10, inFlight: 1)
            let save = ModifyRecordsOperation(savingRecordsFrom: query) { records in
                for record in records { record["audited"] = 1 }
                return records
            }
            let audited = Box<[String]>([])
            let audit = ConsumeOperation(consuming: query) { (records: [Record]) in audited.update { $0 += records.map(\.recordID.recordName) } }
            audit.addDependency(save)
            let finals = Box<[StratusError?]>([])
            save.modifyRecordsResultBlock = { result in finals.update { $0.append(finalError(result)) } }
            audit.consumeResultBlock = { result in finals.update { $0.append(finalError(result)) } }
            _ = await Self.run([query, save, audit], on: database)
            #expect(finals.value.count == 2 && finals.value.allSatisfy { $0 == nil }, "\(finals.value)")
            #expect(audited.value == (0..<300).map { recordName("item", $0) })
            #expect(try await TestDatabase.queryAll(try Query(recordType: "Item", format: "audited == 1"), in: database).count == 300)
        }
    }

    @Test("a consumer that depends on its producer gets every batch after it finished; records() holds them")
    func consumerDependingOnProducer() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(500), in: database)
            let query = Self.everyItem(pageSize: 10, inFlight: 1)
            let save = ModifyRecordsOperation(savingRecordsFrom: query) { records in
                for record in records { record["late"] = 1 }
                return records
            }
            save.addDependency(query)
            let final = Box<Result<Void, any Error>?>(nil)
            save.modifyRecordsResultBlock = { final.value = $0 }
            // One queue slot: the query must finish (without waiting for the consumer) first.
            let serial = Self.queue("serial", slots: 1)
            query.database = database
            save.database = database
            serial.addOperation(save)
            serial.addOperation(query)
            await waitUntilFinished([query, save])
            #expect(finalError(final.value) == nil)
            #expect(try query.recordOutput.records().count == 500)
            #expect(try await TestDatabase.queryAll(try Query(recordType: "Item", format: "late == 1"), in: database).count == 500)
        }
    }

    @Test("a checkpoint kept in a store of the caller's: saved after each completed batch, resumed from, removed at the end")
    func checkpointStore() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(100), in: database)
            let store = MemoryPipelineCheckpoint()
            let seen = Box<[String]>([])
            func run(stopAfter: Int?) async throws -> StratusError? {
                let query = Self.everyItem(pageSize: 10)
                query.checkpoint = try PipelineCheckpoint(store: store)
                let stages = Box<[Operation]>([])
                let consume = ConsumeOperation(consuming: query) { (records: [Record]) in
                    let count = seen.update { $0 += records.map(\.recordID.recordName); return $0.count }
                    if let stopAfter, count >= stopAfter { stages.value.forEach { $0.cancel() } }
                }
                stages.value = [consume]
                let final = Box<Result<Void, any Error>?>(nil)
                consume.consumeResultBlock = { final.value = $0 }
                _ = await Self.run([query, consume], on: database)
                return finalError(final.value)
            }
            let stopped = try #require(try await run(stopAfter: 40))
            #expect(stopped.code == .operationCancelled)
            let entry = try #require(store.entry)
            guard case .query(let cursor)? = entry.position else { Issue.record("\(entry)"); return }
            #expect(cursor.description == "Cursor(Item after \(recordName("item", 39)))", "saved after the batch the consumer finished")
            #expect(try await run(stopAfter: nil) == nil)
            #expect(seen.value == (0..<100).map { recordName("item", $0) }, "each record once")
            #expect(store.entry == nil, "removed when the pipeline completed")
            #expect(store.saves >= 10)
        }
    }

    @Test("a checkpoint of a save that wrote to one store is refused by a store without the job's record (another store, or one put back from a copy), which stays unchanged; the first store resumes")
    func checkpointOfAnotherStore() async throws {
        try await SQLiteFixture.with { written in
            try await SQLiteFixture.with { other in
                try await TestDatabase.save(items(100), in: written.database)
                try await TestDatabase.save(items(100), in: other.database)
                let store = MemoryPipelineCheckpoint()
                func bump(_ database: Database, stopAfter: Int?) async throws -> StratusError? {
                    let query = Self.everyItem(pageSize: 10)
                    query.checkpoint = try PipelineCheckpoint(store: store)
                    let saved = Box(0)
                    let save = ModifyRecordsOperation(savingRecordsFrom: query) { records in
                        for record in records { record["count"] = (Self.int(record, "count") ?? 0) + 1 }
                        return records
                    }
                    save.perRecordSaveBlock = { _, result in
                        guard case .success = result else { return }
                        if let stopAfter, saved.update({ $0 += 1; return $0 }) == stopAfter { save.cancel() }
                    }
                    let final = Box<Result<Void, any Error>?>(nil)
                    save.modifyRecordsResultBlock = { final.value = $0 }
                    _ = await Self.run([query, save], on: database)
                    return finalError(final.value)
                }
                let stopped = try #require(try await bump(written.database, stopAfter: 30))
                #expect(stopped.code == .operationCancelled)
                let entry = try #require(store.entry)
                #expect(entry.isRecordedInStore && entry.position != nil, "\(entry)")

                let refused = try #require(try await bump(other.database, stopAfter: nil))
                #expect(refused.code == .invalidArguments)
                #expect(refused.message.contains("this store holds no record of that job"), "\(refused.message)")
                #expect(store.entry == entry, "a refused checkpoint is left as it was")
                let untouched = try await TestDatabase.queryAll(Query(recordType: "Item"), in: other.database)
                #expect(untouched.count == 100 && untouched.allSatisfy { Self.int($0, "count") == nil })

                #expect(try await bump(written.database, stopAfter: nil) == nil)
                let all = try await TestDatabase.queryAll(Query(recordType: "Item"), in: written.database)
                #expect(all.count == 100 && all.allSatisfy { Self.int($0, "count") == 1 }, "each record once")
                #expect(store.entry == nil, "removed when the pipeline completed")
            }
        }
    }

    @Test("a file reader feeds a save: batches of input items, rejected items reported, records saved")
    func readerFeedsSave() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            let source = NumberedItemSource(count: 250, rejectEvery: 50)
            let read = ReadRecordsOperation(source: source)
            read.batchSize = 60
            let rejected = Box<[Int]>([])
            read.rejectedItemBlock = { rejection in rejected.update { $0.append(rejection.line) } }
            let save = ModifyRecordsOperation(savingRecordsFrom: read)
            save.savePolicy = .allKeys
            let batches = Box<[Int]>([])
            let count = ConsumeOperation(consuming: save) { (saved: [Record]) in batches.update { $0.append(saved.count) } }
            let final = Box<Result<Void, any Error>?>(nil)
            count.consumeResultBlock = { final.value = $0 }
            _ = await Self.run([read, save, count], on: database)
            #expect(finalError(final.value) == nil)
            #expect(rejected.value == [50, 100, 150, 200, 250])
            #expect(batches.value == [59, 59, 59, 59, 9], "a save hands on what each batch saved")
            let stored = try await TestDatabase.queryAll(Query(recordType: "Item"), in: database)
            #expect(stored.count == 245)
        }
    }
}

/// A pipeline checkpoint store whose saves fail after the first `succeeding` (a full disk).
final class FailingPipelineCheckpoint: PipelineCheckpointStore, @unchecked Sendable {
    struct DiskFull: Error {}
    // @unchecked: `lock` guards `saves`.
    private let lock = NSLock()
    private var saves = 0
    private let succeeding: Int
    init(succeeding: Int) { self.succeeding = succeeding }
    func load() throws -> PipelineCheckpointStoreEntry? { nil }
    func save(_ entry: PipelineCheckpointStoreEntry) throws {
        try lock.withLock {
            saves += 1
            if saves > succeeding + 1 { throw DiskFull() }
        }
    }
    func remove() throws {}
}

/// A pipeline checkpoint kept in memory, counting its saves.
final class MemoryPipelineCheckpoint: PipelineCheckpointStore, @unchecked Sendable {
    // @unchecked: `lock` guards both fields.
    private let lock = NSLock()
    private var saved: PipelineCheckpointStoreEntry?
    private var count = 0
    var entry: PipelineCheckpointStoreEntry? { lock.withLock { saved } }
    var saves: Int { lock.withLock { count } }
    func load() throws -> PipelineCheckpointStoreEntry? { entry }
    func save(_ entry: PipelineCheckpointStoreEntry) throws { lock.withLock { saved = entry; count += 1 } }
    func remove() throws { lock.withLock { saved = nil } }
}

/// `count` input items, `Item` records named as ``items(_:prefix:type:)`` names them, every
/// `rejectEvery`th a rejected item instead.
final class NumberedItemSource: RecordSource {
    private let count: Int
    private let rejectEvery: Int
    private var line = 0
    init(count: Int, rejectEvery: Int) {
        self.count = count
        self.rejectEvery = rejectEvery
    }
    func nextItem() throws -> RecordSourceItem? {
        guard line < count else { return nil }
        line += 1
        if line % rejectEvery == 0 { return .rejected(RecordRejection(line: line, column: 1, recordName: nil, message: "not a record")) }
        return .record(makeRecord("Item", recordName("item", line), ["n": .int64(Int64(line))]), line: line)
    }
}
