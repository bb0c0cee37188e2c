import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

/// Every operation calls every block with the right values, each item once, never two blocks
/// at once, and the final block last.
@Suite("Operation blocks", .timeLimit(.minutes(30)))
struct OperationBlockTests {
    /// A block event: which block, which record, what result.
    enum Event: Sendable, Hashable {
        case item(String, StratusError.Code?)
        case delete(String, StratusError.Code?)
        case final(StratusError.Code?)
    }

    static func code<T>(_ result: Result<T, any Error>) -> StratusError.Code? {
        if case .failure(let error) = result { return (error as? StratusError)?.code ?? .internalError }
        return nil
    }

    /// Checks the log: per-item events first (each record once), then exactly one final event.
    static func expectWellOrdered(_ log: BlockLog<Event>, items: Int) {
        let events = log.events
        #expect(log.overlaps == 0, "blocks of one operation never run at once")
        #expect(events.count == items + 1)
        guard let last = events.last, case .final = last else {
            Issue.record("the final block must run last: \(events.suffix(3))")
            return
        }
        #expect(events.dropLast().allSatisfy { if case .final = $0 { false } else { true } }, "exactly one final block")
    }

    @Test("FetchRecordsOperation: per-record results, desiredKeys, missing IDs, final last")
    func fetchBlocks() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            let saved = try await TestDatabase.save(items(5) + [makeRecord("Item", "wide", ["a": .string("A"), "b": .string("B"), "n": .int64(9)])], in: database)
            let ids = [saved[3].recordID, Record.ID(recordName: "missing"), saved[0].recordID, Record.ID(recordName: "wide")]
            let log = BlockLog<Event>()
            let records = Box<[Record.ID: Record]>([:])
            let mismatches = Box(0)
            let op = FetchRecordsOperation(recordIDs: ids)
            op.desiredKeys = ["n", "a"]
            op.perRecordResultBlock = { id, result in
                if case .success(let record) = result {
                    records.update { $0[id] = record }
                    if record.recordID != id { mismatches.update { $0 += 1 } }
                }
                log.record(.item(id.recordName, Self.code(result)))
            }
            op.fetchRecordsResultBlock = { result in log.record(.final(Self.code(result))) }
            await run(op, on: database)

            Self.expectWellOrdered(log, items: 4)
            #expect(mismatches.value == 0, "each record comes with its own ID")
            #expect(Set(log.events.dropLast()) == [
                .item("item-00003", nil), .item("missing", .unknownItem), .item("item-00000", nil), .item("wide", nil),
            ])
            #expect(log.events.last == .final(.partialFailure))
            #expect(records.value[saved[3].recordID]?.fieldValues == ["n": .int64(3)])
            #expect(records.value[Record.ID(recordName: "wide")]?.fieldValues == ["n": .int64(9), "a": .string("A")])
            #expect(records.value[saved[0].recordID]?.recordChangeTag == saved[0].recordChangeTag)

            // All found: the final result is success.
            let clean = BlockLog<Event>()
            let all = FetchRecordsOperation(recordIDs: saved.map(\.recordID))
            all.perRecordResultBlock = { id, result in clean.record(.item(id.recordName, Self.code(result))) }
            all.fetchRecordsResultBlock = { result in clean.record(.final(Self.code(result))) }
            await run(all, on: database)
            Self.expectWellOrdered(clean, items: saved.count)
            #expect(clean.events.last == .final(nil))
        }
    }

    @Test("ModifyRecordsOperation: per-record save and delete results, then the final block")
    func modifyBlocks() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(3, prefix: "old"), in: database)
            let toSave = items(4, prefix: "new")
            let toDelete = [Record.ID(recordName: "old-00000"), Record.ID(recordName: "old-00002"), Record.ID(recordName: "never")]
            let log = BlockLog<Event>()
            let stored = Box<[Record.ID: Record]>([:])
            let op = ModifyRecordsOperation(recordsToSave: toSave, recordIDsToDelete: toDelete)
            op.perRecordSaveBlock = { id, result in
                if case .success(let record) = result { stored.update { $0[id] = record } }
                log.record(.item(id.recordName, Self.code(result)))
            }
            op.perRecordDeleteBlock = { id, result in log.record(.delete(id.recordName, Self.code(result))) }
            op.modifyRecordsResultBlock = { result in log.record(.final(Self.code(result))) }
            await run(op, on: database)

            Self.expectWellOrdered(log, items: toSave.count + toDelete.count)
            #expect(Set(log.events.dropLast()) == Set(toSave.map { Event.item($0.recordID.recordName, nil) } + toDelete.map { Event.delete($0.recordName, nil) }))
            #expect(log.events.last == .final(nil))
            for record in toSave {
                let saved = try #require(stored.value[record.recordID])
                #expect(saved.recordChangeTag != nil)
                #expect(saved.fieldValues == record.fieldValues)
                #expect(saved.systemFields.creatorUserRecordID.map { UserDirectoryEntry.isUserRecordName($0.recordName) } == true)
            }
            #expect(try await TestDatabase.exists("old-00001", in: database))
            #expect(try await TestDatabase.exists("old-00000", in: database) == false)
            #expect(try await TestDatabase.exists("new-00003", in: database))
        }
    }

    @Test("a large non-atomic modify reports every item once, in batches, before the final block")
    func largeModifyBlocks() async throws {
        try await SQLiteFixture.with { fixture in
            let records = items(1_234)
            let log = BlockLog<Event>()
            let op = ModifyRecordsOperation(recordsToSave: records)
            op.isAtomic = false
            op.perRecordSaveBlock = { id, result in log.record(.item(id.recordName, Self.code(result))) }
            op.modifyRecordsResultBlock = { result in log.record(.final(Self.code(result))) }
            await run(op, on: fixture.database)
            Self.expectWellOrdered(log, items: records.count)
            #expect(Set(log.events.dropLast()) == Set(records.map { Event.item($0.recordID.recordName, nil) }))
            #expect(log.events.last == .final(nil))
            let stored = try await TestDatabase.queryAll(Query(recordType: "Item"), in: fixture.database)
            #expect(stored.count == records.count)
        }
    }

    @Test("DeleteRecordsOperation by IDs and by query, in batches")
    func deleteBlocks() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(30), in: database)

            let log = BlockLog<Event>()
            let ids = [Record.ID(recordName: "item-00001"), Record.ID(recordName: "item-00002"), Record.ID(recordName: "nothing-here")]
            let byID = DeleteRecordsOperation(recordIDs: ids)
            byID.perRecordDeleteBlock = { id, result in log.record(.delete(id.recordName, Self.code(result))) }
            byID.deleteRecordsResultBlock = { result in log.record(.final(Self.code(result))) }
            await run(byID, on: database)
            Self.expectWellOrdered(log, items: 3)
            #expect(Set(log.events.dropLast()) == [.delete("item-00001", nil), .delete("item-00002", nil), .delete("nothing-here", nil)])
            #expect(log.events.last == .final(nil))

            // By query: the even records left (14 of them), 4 per batch.
            let queryLog = BlockLog<Event>()
            let byQuery = DeleteRecordsOperation(query: try Query(recordType: "Item", format: "even == %@", 1))
            byQuery.batchSize = 4
            byQuery.perRecordDeleteBlock = { id, result in queryLog.record(.delete(id.recordName, Self.code(result))) }
            byQuery.deleteRecordsResultBlock = { result in queryLog.record(.final(Self.code(result))) }
            await run(byQuery, on: database)
            let evens = (0..<30).filter { $0 % 2 == 0 && $0 != 2 }.map { recordName("item", $0) }
            Self.expectWellOrdered(queryLog, items: evens.count)
            #expect(Set(queryLog.events.dropLast()) == Set(evens.map { Event.delete($0, nil) }))
            #expect(queryLog.events.last == .final(nil))
            let left = TestDatabase.names(try await TestDatabase.queryAll(Query(recordType: "Item"), in: database))
            #expect(left == (0..<30).filter { $0 % 2 == 1 && $0 != 1 }.map { recordName("item", $0) })
        }
    }

    @Test("QueryOperation: records in order, resultsLimit, cursor, desiredKeys, zone")
    func queryBlocks() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(150), in: database)
            let query = try Query(recordType: "Item", format: "n >= %@", 20)
            query.sortDescriptors = [RecordSortDescriptor(key: "n", ascending: false)]

            let log = BlockLog<Event>()
            let matched = Box<[Record]>([])
            let cursor = Box<QueryOperation.Cursor?>(nil)
            let mismatches = Box(0)
            let op = QueryOperation(query: query)
            op.resultsLimit = 50
            op.desiredKeys = ["n"]
            op.zoneID = .default
            op.recordMatchedBlock = { id, result in
                if case .success(let record) = result {
                    if record.recordID != id { mismatches.update { $0 += 1 } }
                    matched.update { $0.append(record) }
                }
                log.record(.item(id.recordName, Self.code(result)))
            }
            op.queryResultBlock = { result in
                if case .success(let next) = result { cursor.value = next }
                log.record(.final(Self.code(result)))
            }
            await run(op, on: database)
            Self.expectWellOrdered(log, items: 50)
            #expect(mismatches.value == 0)
            #expect(log.events.last == .final(nil))
            #expect(matched.value.map { $0.fieldValue(forKey: "n") } == (100..<150).reversed().map { FieldValue.int64(Int64($0)) })
            #expect(matched.value.allSatisfy { $0.allKeys() == ["n"] })
            let next = try #require(cursor.value, "more records match, so a cursor comes back")

            // The rest through the cursor; the last page has no cursor.
            let rest = QueryOperation(cursor: next)
            rest.resultsLimit = 500
            let page = await runQueryPage(rest, on: database)
            #expect(page.error == nil)
            #expect(page.cursor == nil)
            #expect(page.records.map { $0.fieldValue(forKey: "n") } == (20..<100).reversed().map { FieldValue.int64(Int64($0)) })

            // The default limit is QueryOperation.defaultResultsLimit.
            let unlimited = QueryOperation(query: Query(recordType: "Item"))
            let defaultPage = await runQueryPage(unlimited, on: database)
            #expect(defaultPage.records.count == QueryOperation.defaultResultsLimit)
            #expect(defaultPage.cursor != nil)
        }
    }

    @Test("blocks of concurrent operations on one database never overlap within an operation")
    func concurrentOperationsKeepTheirBlocksSerial() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(600), in: database)
            var operations: [Operation] = []
            var logs: [BlockLog<Event>] = []
            for index in 0..<4 {
                let log = BlockLog<Event>()
                logs.append(log)
                if index % 2 == 0 {
                    let op = QueryOperation(query: Query(recordType: "Item"))
                    op.resultsLimit = 600
                    op.recordMatchedBlock = { id, result in log.record(.item(id.recordName, Self.code(result))) }
                    op.queryResultBlock = { result in log.record(.final(Self.code(result))) }
                    operations.append(op)
                    database.add(op)
                } else {
                    let op = FetchRecordsOperation(recordIDs: (0..<600).map { Record.ID(recordName: recordName("item", $0)) })
                    op.perRecordResultBlock = { id, result in log.record(.item(id.recordName, Self.code(result))) }
                    op.fetchRecordsResultBlock = { result in log.record(.final(Self.code(result))) }
                    operations.append(op)
                    database.add(op)
                }
            }
            await waitUntilFinished(operations)
            for log in logs {
                Self.expectWellOrdered(log, items: 600)
                #expect(log.events.last == .final(nil))
            }
        }
    }

    @Test("an operation without a database fails with invalidArguments")
    func operationWithoutDatabase() async throws {
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 2
        let finals = Box<[String: StratusError.Code]>([:])
        let items = Box(0)
        let fetch = FetchRecordsOperation(recordIDs: [Record.ID(recordName: "x")])
        fetch.perRecordResultBlock = { _, _ in items.update { $0 += 1 } }
        fetch.fetchRecordsResultBlock = { result in finals.update { $0["fetch"] = finalError(result)?.code } }
        let modify = ModifyRecordsOperation(recordsToSave: [makeRecord("Item", "x")])
        modify.perRecordSaveBlock = { _, _ in items.update { $0 += 1 } }
        modify.modifyRecordsResultBlock = { result in finals.update { $0["modify"] = finalError(result)?.code } }
        let delete = DeleteRecordsOperation(recordIDs: [Record.ID(recordName: "x")])
        delete.perRecordDeleteBlock = { _, _ in items.update { $0 += 1 } }
        delete.deleteRecordsResultBlock = { result in finals.update { $0["delete"] = finalError(result)?.code } }
        let query = QueryOperation(query: Query(recordType: "Item"))
        query.recordMatchedBlock = { _, _ in items.update { $0 += 1 } }
        query.queryResultBlock = { result in finals.update { $0["query"] = finalError(result)?.code } }
        let operations: [Operation] = [fetch, modify, delete, query]
        for operation in operations { queue.addOperation(operation) }
        await waitUntilFinished(operations)
        #expect(finals.value == ["fetch": .invalidArguments, "modify": .invalidArguments, "delete": .invalidArguments, "query": .invalidArguments])
        #expect(items.value == 0)
    }
}
