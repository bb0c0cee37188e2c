import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

@Suite("Operation dependencies and pipelines", .timeLimit(.minutes(30)))
struct OperationDependencyTests {
    static func queue(_ name: String) -> OperationQueue {
        let queue = OperationQueue()
        queue.name = name
        queue.maxConcurrentOperationCount = 2
        return queue
    }

    @Test("a query on queue B that depends on a modify on queue A sees its writes")
    func dependencyAcrossQueues() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            let queueA = Self.queue("A"), queueB = Self.queue("B")
            let order = BlockLog<String>()

            let modify = ModifyRecordsOperation(recordsToSave: items(250))
            modify.database = database
            modify.perRecordSaveBlock = { _, result in if case .failure = result { order.record("save failed") } }
            modify.modifyRecordsResultBlock = { _ in order.record("modify finished") }

            let query = QueryOperation(query: Query(recordType: "Item"))
            query.database = database
            query.resultsLimit = 1_000
            let seen = Box(0)
            query.recordMatchedBlock = { _, result in
                if case .success = result {
                    if seen.update({ $0 += 1; return $0 }) == 1 { order.record("query saw a record") }
                }
            }
            query.queryResultBlock = { _ in order.record("query finished") }
            query.addDependency(modify)

            // The query is queued first, and queue A is held back: only the dependency orders them.
            queueA.isSuspended = true
            queueA.addOperation(modify)
            queueB.addOperation(query)
            queueA.isSuspended = false
            await waitUntilFinished([modify, query])

            #expect(seen.value == 250)
            #expect(order.events == ["modify finished", "query saw a record", "query finished"])
        }
    }

    @Test("a chain across three queues: modify on A, query on B, delete on C")
    func chainAcrossThreeQueues() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            let queues = ["A", "B", "C"].map(Self.queue)
            let modify = ModifyRecordsOperation(recordsToSave: items(40))
            modify.database = database
            let query = QueryOperation(query: try Query(recordType: "Item", format: "even == %@", 1))
            query.database = database
            query.resultsLimit = 100
            let delete = DeleteRecordsOperation(deletingRecordsFrom: query)
            delete.database = database
            query.addDependency(modify)
            let deleted = Box<[String]>([])
            delete.perRecordDeleteBlock = { id, result in if case .success = result { deleted.update { $0.append(id.recordName) } } }
            let final = Box<Result<Void, any Error>?>(nil)
            delete.deleteRecordsResultBlock = { final.value = $0 }
            queues[2].addOperation(delete)
            queues[1].addOperation(query)
            queues[0].addOperation(modify)
            await waitUntilFinished([modify, query, delete])
            #expect(finalError(final.value) == nil)
            #expect(Set(deleted.value) == Set((0..<40).filter { $0 % 2 == 0 }.map { recordName("item", $0) }))
            let left = TestDatabase.names(try await TestDatabase.queryAll(Query(recordType: "Item"), in: database))
            #expect(left == (0..<40).filter { $0 % 2 == 1 }.map { recordName("item", $0) })
        }
    }

    @Test("pipeline: QueryOperation -> ModifyRecordsOperation(savingRecordsFrom:transform:) on another queue")
    func queryFeedsModify() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(30), in: database)
            let query = QueryOperation(query: try Query(recordType: "Item", format: "even == %@", 0))
            query.resultsLimit = 100
            let transformed = Box(0)
            let markDone = ModifyRecordsOperation(savingRecordsFrom: query) { records in
                transformed.value = records.count
                for record in records { record["done"] = true }
                return records
            }
            let otherQueue = Self.queue("consumer")
            let saved = Box<[String]>([])
            markDone.perRecordSaveBlock = { id, result in if case .success = result { saved.update { $0.append(id.recordName) } } }
            let final = Box<Result<Void, any Error>?>(nil)
            markDone.modifyRecordsResultBlock = { final.value = $0 }
            markDone.database = database
            otherQueue.addOperation(markDone)   // added first; waits for the query
            database.add(query)
            await waitUntilFinished([query, markDone])

            #expect(finalError(final.value) == nil)
            #expect(final.value != nil)
            #expect(transformed.value == 15)
            let odd = (0..<30).filter { $0 % 2 == 1 }.map { recordName("item", $0) }
            #expect(Set(saved.value) == Set(odd))
            let done = try await TestDatabase.queryAll(try Query(recordType: "Item", format: "done == %@", 1), in: database)
            #expect(Set(TestDatabase.names(done)) == Set(odd))
            // The records kept their other fields (the query returned whole records).
            #expect(done.allSatisfy { $0.fieldValue(forKey: "even") == .int64(0) && $0.fieldValue(forKey: "n") != nil })
        }
    }

    @Test("pipeline: FetchRecordsOperation -> DeleteRecordsOperation(deletingRecordsFrom:), skipping failed fetches")
    func fetchFeedsDelete() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(10), in: database)
            let fetch = FetchRecordsOperation(recordIDs: [0, 3, 4, 7].map { Record.ID(recordName: recordName("item", $0)) } + [Record.ID(recordName: "missing")])
            let fetchFinal = Box<Result<Void, any Error>?>(nil)
            fetch.fetchRecordsResultBlock = { fetchFinal.value = $0 }
            let delete = DeleteRecordsOperation(deletingRecordsFrom: fetch) { record in record.fieldValue(forKey: "n") != .int64(4) }
            let deleted = Box<[String]>([])
            delete.perRecordDeleteBlock = { id, result in if case .success = result { deleted.update { $0.append(id.recordName) } } }
            let final = Box<Result<Void, any Error>?>(nil)
            delete.deleteRecordsResultBlock = { final.value = $0 }
            let consumerQueue = Self.queue("consumer")
            delete.database = database
            consumerQueue.addOperation(delete)
            database.add(fetch)
            await waitUntilFinished([fetch, delete])

            #expect(finalError(fetchFinal.value)?.code == .partialFailure)
            #expect(finalError(final.value) == nil)
            #expect(Set(deleted.value) == Set([0, 3, 7].map { recordName("item", $0) }))
            let left = TestDatabase.names(try await TestDatabase.queryAll(Query(recordType: "Item"), in: database))
            #expect(left == [1, 2, 4, 5, 6, 8, 9].map { recordName("item", $0) })
        }
    }

    @Test("a failing producer makes its consumer fail with the producer's error, writing nothing")
    func failingProducerFailsConsumer() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(5), in: database)

            // A query in a zone that does not exist.
            let query = QueryOperation(query: Query(recordType: "Item"))
            query.zoneID = RecordZone.ID(zoneName: "Missing")
            let transformCalls = Box(0)
            let modify = ModifyRecordsOperation(savingRecordsFrom: query) { records in
                transformCalls.update { $0 += 1 }
                return records
            }
            let itemCalls = Box(0)
            modify.perRecordSaveBlock = { _, _ in itemCalls.update { $0 += 1 } }
            let final = Box<Result<Void, any Error>?>(nil)
            modify.modifyRecordsResultBlock = { final.value = $0 }
            database.add(modify)
            database.add(query)
            await waitUntilFinished([query, modify])
            #expect(finalError(final.value)?.code == .zoneNotFound)
            #expect(transformCalls.value == 0)
            #expect(itemCalls.value == 0)

            // A fetch without a database (invalidArguments) feeding a delete.
            let fetch = FetchRecordsOperation(recordIDs: [Record.ID(recordName: "item-00001")])
            let delete = DeleteRecordsOperation(deletingRecordsFrom: fetch)
            let deleteFinal = Box<Result<Void, any Error>?>(nil)
            delete.deleteRecordsResultBlock = { deleteFinal.value = $0 }
            let plainQueue = Self.queue("plain")
            plainQueue.addOperation(fetch)
            database.add(delete)
            await waitUntilFinished([fetch, delete])
            #expect(finalError(deleteFinal.value)?.code == .invalidArguments)
            #expect(try await TestDatabase.exists("item-00001", in: database))

            // A transform that throws fails the consumer with its error.
            let source = QueryOperation(query: Query(recordType: "Item"))
            let refusing = ModifyRecordsOperation(savingRecordsFrom: source) { _ in
                throw StratusError(.limitExceeded, "the transform refuses")
            }
            let refusingFinal = Box<Result<Void, any Error>?>(nil)
            refusing.modifyRecordsResultBlock = { refusingFinal.value = $0 }
            database.add(refusing)
            database.add(source)
            await waitUntilFinished([source, refusing])
            #expect(finalError(refusingFinal.value)?.code == .limitExceeded)

            // A cancelled producer cancels the pipeline.
            let cancelledSource = QueryOperation(query: Query(recordType: "Item"))
            let consumer = DeleteRecordsOperation(deletingRecordsFrom: cancelledSource)
            let consumerFinal = Box<Result<Void, any Error>?>(nil)
            consumer.deleteRecordsResultBlock = { consumerFinal.value = $0 }
            cancelledSource.cancel()
            database.add(consumer)
            database.add(cancelledSource)
            await waitUntilFinished([cancelledSource, consumer])
            #expect(finalError(consumerFinal.value)?.code == .operationCancelled)
            #expect(try await TestDatabase.queryAll(Query(recordType: "Item"), in: database).count == 5)
        }
    }
}
