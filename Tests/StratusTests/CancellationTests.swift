import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

@Suite("Cancellation", .timeLimit(.minutes(30)))
struct CancellationTests {
    @Test("cancelled before start: the final block gets operationCancelled and no item block runs")
    func cancelBeforeStart() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(5), in: database)
            let itemCalls = Box(0)
            let finals = Box<[String: StratusError]>([:])

            let fetch = FetchRecordsOperation(recordIDs: [Record.ID(recordName: "item-00000")])
            fetch.perRecordResultBlock = { _, _ in itemCalls.update { $0 += 1 } }
            fetch.fetchRecordsResultBlock = { result in finals.update { $0["fetch"] = finalError(result) } }
            let modify = ModifyRecordsOperation(recordsToSave: [makeRecord("Item", "new")], recordIDsToDelete: [Record.ID(recordName: "item-00001")])
            modify.perRecordSaveBlock = { _, _ in itemCalls.update { $0 += 1 } }
            modify.perRecordDeleteBlock = { _, _ in itemCalls.update { $0 += 1 } }
            modify.modifyRecordsResultBlock = { result in finals.update { $0["modify"] = finalError(result) } }
            let delete = DeleteRecordsOperation(query: Query(recordType: "Item"))
            delete.perRecordDeleteBlock = { _, _ in itemCalls.update { $0 += 1 } }
            delete.deleteRecordsResultBlock = { result in finals.update { $0["delete"] = finalError(result) } }
            let query = QueryOperation(query: Query(recordType: "Item"))
            query.recordMatchedBlock = { _, _ in itemCalls.update { $0 += 1 } }
            query.queryResultBlock = { result in finals.update { $0["query"] = finalError(result) } }

            let operations: [DatabaseOperation] = [fetch, modify, delete, query]
            for op in operations { op.cancel() }
            for op in operations { database.add(op) }
            await waitUntilFinished(operations)

            #expect(itemCalls.value == 0)
            #expect(Set(finals.value.keys) == ["fetch", "modify", "delete", "query"])
            for (name, error) in finals.value {
                #expect(error.code == .operationCancelled, "\(name)")
                #expect(error.completedItemCount == 0, "\(name)")
            }
            #expect(try await TestDatabase.exists("new", in: database) == false)
            #expect(try await TestDatabase.exists("item-00001", in: database))
            #expect(try await TestDatabase.queryAll(Query(recordType: "Item"), in: database).count == 5)
        }
    }

    @Test("cancelling a large DeleteRecordsOperation(query:) stops at the next batch and reports what was deleted")
    func cancelDuringDeleteByQuery() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            let total = 1_000
            try await TestDatabase.save(items(total), in: database)
            let deleted = Box<[String]>([])
            let failures = Box(0)
            let final = Box<Result<Void, any Error>?>(nil)
            let delete = DeleteRecordsOperation(query: Query(recordType: "Item"))
            delete.batchSize = 10
            delete.perRecordDeleteBlock = { [weak delete] id, result in
                guard case .success = result else { failures.update { $0 += 1 }; return }
                let count = deleted.update { $0.append(id.recordName); return $0.count }
                if count == 35 { delete?.cancel() }
            }
            delete.deleteRecordsResultBlock = { final.value = $0 }
            await run(delete, on: database)

            let error = try #require(finalError(final.value), "a cancelled delete reports operationCancelled")
            #expect(error.code == .operationCancelled)
            #expect(failures.value == 0)
            #expect(error.completedItemCount == deleted.value.count, "completedItemCount equals the per-item successes")
            #expect(deleted.value.count >= 35)
            #expect(deleted.value.count <= 35 + delete.batchSize, "stops within one batch of the cancel")
            let left = TestDatabase.names(try await TestDatabase.queryAll(Query(recordType: "Item"), in: database))
            #expect(left.count == total - deleted.value.count, "the store still holds the rest")
            #expect(Set(left).isDisjoint(with: deleted.value))
        }
    }

    @Test("cancelling a running non-atomic modify from another thread stops after the current batch")
    func cancelDuringModifyFromOutside() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            let records = items(1_200)
            let reached = DispatchSemaphore(value: 0)
            let proceed = DispatchSemaphore(value: 0)
            let saved = Box(0)
            let final = Box<Result<Void, any Error>?>(nil)
            let modify = ModifyRecordsOperation(recordsToSave: records)
            modify.isAtomic = false
            modify.perRecordSaveBlock = { _, result in
                guard case .success = result else { return }
                if saved.update({ $0 += 1; return $0 }) == 10 {
                    reached.signal()
                    proceed.wait()
                }
            }
            modify.modifyRecordsResultBlock = { final.value = $0 }
            database.add(modify)
            await wait(for: reached)
            modify.cancel()
            proceed.signal()
            await waitUntilFinished([modify])

            let error = try #require(finalError(final.value))
            #expect(error.code == .operationCancelled)
            #expect(error.completedItemCount == saved.value)
            #expect(saved.value >= 10 && saved.value < records.count)
            #expect(saved.value <= ModifyRecordsOperation.maximumItemsPerBatch)
            #expect(try await TestDatabase.queryAll(Query(recordType: "Item"), in: database).count == saved.value)
        }
    }

    @Test("cancelling a modify while its last batch is written ends with operationCancelled; the batch's saves stay reported")
    func cancelDuringLastModifyBatch() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            let records = items(30)
            let saved = Box(0)
            let final = Box<Result<Void, any Error>?>(nil)
            let modify = ModifyRecordsOperation(recordsToSave: records)
            modify.isAtomic = false
            modify.itemsPerBatch = 10
            modify.perRecordSaveBlock = { [weak modify] _, result in
                guard case .success = result else { return }
                if saved.update({ $0 += 1; return $0 }) == 25 { modify?.cancel() }
            }
            modify.modifyRecordsResultBlock = { final.value = $0 }
            await run(modify, on: database)

            let error = try #require(finalError(final.value), "a modify cancelled before it finished is not a success")
            #expect(error.code == .operationCancelled)
            #expect(saved.value == 30, "the last batch was committed and each of its saves reported")
            #expect(error.completedItemCount == 30)
            #expect(try await TestDatabase.queryAll(Query(recordType: "Item"), in: database).count == 30)
        }
    }

    @Test("cancelling a one-batch modify while it is written ends with operationCancelled")
    func cancelDuringOnlyModifyBatch() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            let final = Box<Result<Void, any Error>?>(nil)
            let completion = Box<(saved: Int, error: StratusError?)?>(nil)
            let modify = ModifyRecordsOperation(recordsToSave: items(3))
            modify.perRecordSaveBlock = { [weak modify] _, _ in modify?.cancel() }
            modify.modifyRecordsResultBlock = { final.value = $0 }
            modify.modifyRecordsCompletionBlock = { saved, _, error in completion.value = (saved?.count ?? 0, stratusError(error)) }
            await run(modify, on: database)

            #expect(finalError(final.value)?.code == .operationCancelled)
            #expect(completion.value?.saved == 3, "the older block still gets what was written")
            #expect(completion.value?.error?.code == .operationCancelled)
        }
    }

    @Test("cancelling a delete by IDs or by query while its last batch is deleted ends with operationCancelled")
    func cancelDuringLastDeleteBatch() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(30), in: database)
            let byID = DeleteRecordsOperation(recordIDs: (0..<15).map { Record.ID(recordName: recordName("item", $0)) })
            let byQuery = DeleteRecordsOperation(query: Query(recordType: "Item"))
            for delete in [byID, byQuery] {
                let deleted = Box(0)
                let final = Box<Result<Void, any Error>?>(nil)
                delete.batchSize = 5
                delete.perRecordDeleteBlock = { [weak delete] _, result in
                    guard case .success = result else { return }
                    if deleted.update({ $0 += 1; return $0 }) == 13 { delete?.cancel() }
                }
                delete.deleteRecordsResultBlock = { final.value = $0 }
                await run(delete, on: database)
                let error = try #require(finalError(final.value), "a delete cancelled before it finished is not a success")
                #expect(error.code == .operationCancelled)
                #expect(deleted.value == 15)
                #expect(error.completedItemCount == 15)
            }
            #expect(try await TestDatabase.queryAll(Query(recordType: "Item"), in: database).isEmpty)
        }
    }

    @Test("cancelling a pipeline's writing stage while it writes the last batch ends it with operationCancelled")
    func cancelDuringLastPipelineBatch() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(30), in: database)
            for deletes in [false, true] {
                let query = QueryOperation(query: Query(recordType: "Item"))
                query.fetchAllResults = true
                query.resultsLimit = 10
                let done = Box(0)
                let final = Box<Result<Void, any Error>?>(nil)
                let stage: DatabaseOperation
                if deletes {
                    let delete = DeleteRecordsOperation(deletingRecordsFrom: query)
                    delete.perRecordDeleteBlock = { [weak delete] _, _ in
                        if done.update({ $0 += 1; return $0 }) == 25 { delete?.cancel() }
                    }
                    delete.deleteRecordsResultBlock = { final.value = $0 }
                    stage = delete
                } else {
                    let save = ModifyRecordsOperation(savingRecordsFrom: query) { records in
                        records.forEach { $0["seen"] = 1 }
                        return records
                    }
                    save.perRecordSaveBlock = { [weak save] _, _ in
                        if done.update({ $0 += 1; return $0 }) == 25 { save?.cancel() }
                    }
                    save.modifyRecordsResultBlock = { final.value = $0 }
                    stage = save
                }
                query.database = database
                stage.database = database
                let queue = OperationQueue()
                queue.maxConcurrentOperationCount = 2
                queue.addOperation(query)
                queue.addOperation(stage)
                await waitUntilFinished([query, stage])
                let error = try #require(finalError(final.value), "deletes: \(deletes)")
                #expect(error.code == .operationCancelled, "deletes: \(deletes)")
                #expect(done.value == 30, "deletes: \(deletes)")
            }
        }
    }

    @Test("a fetch or a query cancelled during its last batch ends with operationCancelled; that batch stays reported")
    func cancelDuringLastReadBatch() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(30), in: database)

            let fetched = Box(0)
            let fetchFinal = Box<Result<Void, any Error>?>(nil)
            let fetch = FetchRecordsOperation(recordIDs: (0..<30).map { Record.ID(recordName: recordName("item", $0)) })
            fetch.perRecordResultBlock = { [weak fetch] _, _ in
                if fetched.update({ $0 += 1; return $0 }) == 28 { fetch?.cancel() }
            }
            fetch.fetchRecordsResultBlock = { fetchFinal.value = $0 }
            await run(fetch, on: database)
            let fetchError = finalError(fetchFinal.value)
            #expect(fetchError?.code == .operationCancelled, "a fetch cancelled before it finished is not a success")
            #expect(fetched.value == 30)
            #expect(fetchError?.completedItemCount == 30)

            for fetchAll in [false, true] {
                let matched = Box(0)
                let final = Box<Result<QueryOperation.Cursor?, any Error>?>(nil)
                let query = QueryOperation(query: Query(recordType: "Item"))
                query.fetchAllResults = fetchAll
                query.resultsLimit = fetchAll ? 10 : 30
                query.recordMatchedBlock = { [weak query] _, _ in
                    if matched.update({ $0 += 1; return $0 }) == 27 { query?.cancel() }
                }
                query.queryResultBlock = { final.value = $0 }
                await run(query, on: database)
                let error = finalError(final.value)
                #expect(error?.code == .operationCancelled, "fetchAllResults: \(fetchAll)")
                #expect(matched.value == 30, "fetchAllResults: \(fetchAll)")
                #expect(error?.completedItemCount == 30, "fetchAllResults: \(fetchAll)")
                if let resume = error?.resumeCursor {
                    let rest = await runQueryPage(QueryOperation(cursor: resume), on: database)
                    #expect(rest.error == nil && rest.records.isEmpty, "nothing is left after the last batch; fetchAllResults: \(fetchAll)")
                }
            }
        }
    }

    @Test("zone and subscription operations cancelled in their last item's block end with operationCancelled; what they wrote stays reported")
    func cancelDuringZoneAndSubscriptionBlocks() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            let zoneIDs = (0..<3).map { RecordZone.ID(zoneName: "Z\($0)") }

            let savedZones = Box(0)
            let zoneFinal = Box<Result<Void, any Error>?>(nil)
            let saveZones = ModifyRecordZonesOperation(recordZonesToSave: zoneIDs.map { RecordZone(zoneID: $0) }, recordZoneIDsToDelete: nil)
            saveZones.perRecordZoneSaveBlock = { [weak saveZones] _, _ in
                if savedZones.update({ $0 += 1; return $0 }) == 3 { saveZones?.cancel() }
            }
            saveZones.modifyRecordZonesResultBlock = { zoneFinal.value = $0 }
            await run(saveZones, on: database)
            #expect(finalError(zoneFinal.value)?.code == .operationCancelled)
            #expect(finalError(zoneFinal.value)?.completedItemCount == 3)
            let zonesNow = Set(try await database.allRecordZones().map(\.zoneID))
            #expect(zonesNow.isSuperset(of: zoneIDs), "the zones written stay written")

            let fetchFinal = Box<Result<Void, any Error>?>(nil)
            let fetchZones = FetchRecordZonesOperation(recordZoneIDs: zoneIDs)
            fetchZones.perRecordZoneResultBlock = { [weak fetchZones] id, _ in if id == zoneIDs.last { fetchZones?.cancel() } }
            fetchZones.fetchRecordZonesResultBlock = { fetchFinal.value = $0 }
            await run(fetchZones, on: database)
            #expect(finalError(fetchFinal.value)?.code == .operationCancelled)

            let subscription = QuerySubscription(recordType: "Item", predicate: QueryPredicate(value: true), subscriptionID: "items", options: [.firesOnRecordCreation])
            let info = NotificationInfo()
            info.shouldSendContentAvailable = true
            subscription.notificationInfo = info
            let subscriptionFinal = Box<Result<Void, any Error>?>(nil)
            let saveSubscription = ModifySubscriptionsOperation(subscriptionsToSave: [subscription], subscriptionIDsToDelete: nil)
            saveSubscription.perSubscriptionSaveBlock = { [weak saveSubscription] _, _ in saveSubscription?.cancel() }
            saveSubscription.modifySubscriptionsResultBlock = { subscriptionFinal.value = $0 }
            await run(saveSubscription, on: database)
            #expect(finalError(subscriptionFinal.value)?.code == .operationCancelled)
            let subscriptionsNow = try await database.allSubscriptions().map(\.subscriptionID)
            #expect(subscriptionsNow == ["items"], "the subscription written stays written")

            let fetchSubscriptionsFinal = Box<Result<Void, any Error>?>(nil)
            let fetchSubscriptions = FetchSubscriptionsOperation(subscriptionIDs: ["items"])
            fetchSubscriptions.perSubscriptionResultBlock = { [weak fetchSubscriptions] _, _ in fetchSubscriptions?.cancel() }
            fetchSubscriptions.fetchSubscriptionsResultBlock = { fetchSubscriptionsFinal.value = $0 }
            await run(fetchSubscriptions, on: database)
            #expect(finalError(fetchSubscriptionsFinal.value)?.code == .operationCancelled)
        }
    }

    @Test("change reads and a file reader cancelled during their last batch end with operationCancelled")
    func cancelDuringLastChangeBatch() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            let zone = try await database.save(RecordZone(zoneName: "Cancels")).zoneID
            try await TestDatabase.save(items(12).map { Record(recordType: "Item", recordID: Record.ID(recordName: $0.recordID.recordName, zoneID: zone)) }, in: database)

            let changed = Box(0)
            let zoneResults = Box(0)
            let zoneFinal = Box<Result<Void, any Error>?>(nil)
            let zoneChanges = FetchRecordZoneChangesOperation(recordZoneIDs: [zone])
            zoneChanges.recordWasChangedBlock = { [weak zoneChanges] _, _ in
                if changed.update({ $0 += 1; return $0 }) == 12 { zoneChanges?.cancel() }
            }
            zoneChanges.recordZoneFetchResultBlock = { _, result in
                if case .success = result { zoneResults.update { $0 += 1 } }
            }
            zoneChanges.fetchRecordZoneChangesResultBlock = { zoneFinal.value = $0 }
            await run(zoneChanges, on: database)
            #expect(finalError(zoneFinal.value)?.code == .operationCancelled, "a change read cancelled before it finished is not a success")
            #expect(changed.value == 12)
            #expect(zoneResults.value == 1, "the zone's changes and token were delivered before the cancellation was seen")

            let databaseFinal = Box<Result<(serverChangeToken: ServerChangeToken, moreComing: Bool), any Error>?>(nil)
            let databaseChanges = FetchDatabaseChangesOperation()
            databaseChanges.recordZoneWithIDChangedBlock = { [weak databaseChanges] _ in databaseChanges?.cancel() }
            databaseChanges.fetchDatabaseChangesResultBlock = { databaseFinal.value = $0 }
            await run(databaseChanges, on: database)
            #expect(finalError(databaseFinal.value)?.code == .operationCancelled)

            let source = CallingAtEnd(NumberedItemSource(count: 30, rejectEvery: 1_000))
            let read = ReadRecordsOperation(source: source)
            read.batchSize = 10
            let readFinal = Box<Result<Void, any Error>?>(nil)
            read.readRecordsResultBlock = { readFinal.value = $0 }
            source.atEnd = { [weak read] in read?.cancel() }
            let consumed = Box(0)
            let consume = ConsumeOperation(consuming: read) { (records: [Record]) in consumed.update { $0 += records.count } }
            let queue = OperationQueue()
            queue.maxConcurrentOperationCount = 2
            queue.addOperation(read)
            queue.addOperation(consume)
            await waitUntilFinished([read, consume])
            #expect(finalError(readFinal.value)?.code == .operationCancelled, "a reader cancelled after its input ended, before it finished, is not a success")
        }
    }

    @Test("cancelling a running fetch stops after the current batch")
    func cancelDuringFetch() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(1_000), in: database)
            let results = Box(0)
            let final = Box<Result<Void, any Error>?>(nil)
            let fetch = FetchRecordsOperation(recordIDs: (0..<1_000).map { Record.ID(recordName: recordName("item", $0)) })
            fetch.perRecordResultBlock = { [weak fetch] _, _ in
                if results.update({ $0 += 1; return $0 }) == 5 { fetch?.cancel() }
            }
            fetch.fetchRecordsResultBlock = { final.value = $0 }
            await run(fetch, on: database)
            let error = try #require(finalError(final.value))
            #expect(error.code == .operationCancelled)
            #expect(error.completedItemCount == results.value)
            #expect(results.value >= 5 && results.value <= FetchRecordsOperation.batchSize)
        }
    }

    @Test("a cancelled query reports a cursor to resume from, and resuming returns the rest")
    func cancelledQueryResumes() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(2_500), in: database)
            let query = Query(recordType: "Item")
            query.sortDescriptors = [RecordSortDescriptor(key: "n", ascending: false)]
            let matched = Box<[String]>([])
            let final = Box<Result<QueryOperation.Cursor?, any Error>?>(nil)
            let op = QueryOperation(query: query)
            op.resultsLimit = 2_500
            op.recordMatchedBlock = { [weak op] id, _ in
                if matched.update({ $0.append(id.recordName); return $0.count }) == 7 { op?.cancel() }
            }
            op.queryResultBlock = { final.value = $0 }
            await run(op, on: database)
            let error = try #require(finalError(final.value))
            #expect(error.code == .operationCancelled)
            #expect(error.completedItemCount == matched.value.count)
            #expect(matched.value.count >= 7 && matched.value.count < 2_500)
            let resume = try #require(error.resumeCursor, "a cancelled query says where to resume")
            let rest = QueryOperation(cursor: resume)
            rest.resultsLimit = 5_000
            let page = await runQueryPage(rest, on: database)
            #expect(page.error == nil)
            #expect(matched.value + TestDatabase.names(page.records) == (0..<2_500).reversed().map { recordName("item", $0) })
        }
    }

    @Test("cancelling the task of an async call cancels its operation (task already cancelled)")
    func taskCancelledBeforeCall() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            let record = makeRecord("Item", "never-saved", ["n": .int64(1)])
            let task = Task {
                withUnsafeCurrentTask { $0?.cancel() }
                return try await database.save(record)
            }
            let error = await caughtError { try await task.value }
            #expect(stratusError(error)?.code == .operationCancelled, "got \(String(describing: error))")
            let stored = try await TestDatabase.exists("never-saved", in: database)
            #expect(stored == false)
        }
    }

    @Test("cancelling the task of a waiting async call cancels its queued operation")
    func taskCancelledWhileWaiting() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(3), in: database)
            // Occupy every slot of the database's queue so the call's operation must wait.
            let started = DispatchSemaphore(value: 0)
            let release = DispatchSemaphore(value: 0)
            let slots = database.operationQueue.maxConcurrentOperationCount
            #expect(slots > 0 && slots < 64, "the database queue has a bounded width")
            let blockers = (0..<slots).map { _ in
                BlockOperation {
                    started.signal()
                    release.wait()
                }
            }
            for blocker in blockers { database.operationQueue.addOperation(blocker) }
            for _ in 0..<slots { await wait(for: started) }

            let task = Task { try await database.records(matching: Query(recordType: "Item")) }
            // Wait until the call's operation is queued behind the blockers. The bound is minutes
            // (not 10,000 short sleeps): a starved cooperative pool can take seconds to run the
            // task, and a cancel before the operation is queued would test something else.
            let deadline = ContinuousClock.now + .seconds(300)
            while database.operationQueue.operationCount <= slots && ContinuousClock.now < deadline {
                try await Task.sleep(nanoseconds: 1_000_000)
            }
            #expect(database.operationQueue.operationCount == slots + 1, "the query operation is queued")
            task.cancel()
            for _ in 0..<slots { release.signal() }
            let error = await caughtError { try await task.value }
            #expect(stratusError(error)?.code == .operationCancelled, "got \(String(describing: error))")
            await waitUntilFinished(blockers)
        }
    }
}

/// A source that calls ``atEnd`` when its input has ended, before it says so.
final class CallingAtEnd: RecordSource, @unchecked Sendable {
    // @unchecked: the reading operation calls nextItem from one thread at a time.
    private let wrapped: any RecordSource
    var atEnd: (() -> Void)?
    init(_ wrapped: any RecordSource) { self.wrapped = wrapped }
    func nextItem() throws -> RecordSourceItem? {
        guard let item = try wrapped.nextItem() else {
            atEnd?()
            return nil
        }
        return item
    }
}
