import Foundation
@_spi(StratusEngine) import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

@Suite("Operation configuration and groups, as CKOperation's", .timeLimit(.minutes(30)))
struct OperationConfigurationTests {
    @Test("a configuration has CloudKit's defaults; an operation's is never nil, and assigning copies it")
    func defaultsAndCopies() {
        let configuration = Operation.Configuration()
        #expect(configuration.timeoutIntervalForRequest == 60)
        #expect(configuration.timeoutIntervalForResource == 604_800)
        #expect(configuration.qualityOfService == .default)
        #expect(configuration.isLongLived == false)
        #expect(configuration.allowsCellularAccess == true)
        #expect(configuration.container == nil)

        let op = QueryOperation(query: Query(recordType: "Item"))
        #expect(op.configuration != nil)
        op.configuration.timeoutIntervalForRequest = 10
        #expect(op.timeoutIntervalForRequest == 10, "the configuration read from an operation is its own")
        configuration.timeoutIntervalForResource = 30
        op.configuration = configuration
        configuration.timeoutIntervalForResource = 99
        #expect(op.timeoutIntervalForResource == 30, "assigning copies, as CloudKit's @NSCopying property")
        #expect(op.timeoutIntervalForRequest == 60, "the assigned configuration replaces the earlier one")
        op.configuration = nil
        #expect(op.timeoutIntervalForResource == 604_800)
        #expect(!op.operationID.isEmpty && op.operationID != QueryOperation(query: Query(recordType: "Item")).operationID)
    }

    @Test("explicit values win over the group's default configuration, which wins over the defaults")
    func groupPrecedence() {
        let group = OperationGroup()
        group.name = "sync"
        group.quantity = 3
        group.expectedSendSize = .kilobytes
        group.defaultConfiguration.timeoutIntervalForResource = 100
        group.defaultConfiguration.qualityOfService = .utility
        let op = FetchRecordsOperation(recordIDs: [])
        op.group = group
        #expect(op.group === group)
        #expect(op.timeoutIntervalForResource == 100)
        #expect(op.qualityOfService == .utility, "the configured quality of service is the operation's")
        op.configuration.timeoutIntervalForResource = 5
        #expect(op.timeoutIntervalForResource == 5)
        #expect(op.timeoutIntervalForRequest == 60)
        op.configuration.qualityOfService = .userInitiated
        op.configuration = op.configuration
        #expect(op.qualityOfService == .userInitiated)
        #expect(group.expectedSendSize == .kilobytes && group.quantity == 3 && group.name == "sync")
        #expect(!group.operationGroupID.isEmpty)
    }

    @Test("isLongLived and allowsCellularAccess are accepted; the operation runs as usual")
    func acceptedSettings() async throws {
        try await SQLiteFixture.with { fixture in
            try await TestDatabase.save(items(2), in: fixture.database)
            let op = QueryOperation(query: Query(recordType: "Item"))
            op.configuration.isLongLived = true
            op.configuration.allowsCellularAccess = false
            op.isLongLived = true
            let persisted = Box(false)
            op.longLivedOperationWasPersistedBlock = { persisted.value = true }
            let count = Box(0)
            op.recordFetchedBlock = { _ in count.update { $0 += 1 } }
            await run(op, on: fixture.database)
            #expect(count.value == 2)
            #expect(op.isLongLived)
            #expect(!persisted.value, "Stratus operations are never persisted")
        }
    }

    @Test("the resource timeout stops the operation with networkFailure over NSURLErrorTimedOut, keeping what was done")
    func resourceTimeout() async throws {
        // The timer runs from the operation's start, so the first batch must commit before it
        // fires, which a starved machine can miss however long the timeout. An attempt that
        // saved nothing shows nothing about what a timeout keeps: it is made again, on a new
        // store, with a longer timeout. In an attempt that saved a batch, the batch held below
        // makes the timeout, not the machine's speed, end the operation.
        var savedSome = false
        for timeout in [3.0, 30, 120] where !savedSome {
            savedSome = try await SQLiteFixture.with { fixture -> Bool in
                let op = ModifyRecordsOperation(recordsToSave: items(5))
                op.isAtomic = false
                op.itemsPerBatch = 1
                op.configuration.timeoutIntervalForResource = timeout
                let saved = Box(0)
                op.perRecordSaveBlock = { [op] _, _ in
                    saved.update { $0 += 1 }
                    // Hold the first batch until the timer has fired (bounded by minutes, longer
                    // than any timeout here, in case it never does).
                    let deadline = Date().addingTimeInterval(300)
                    while !op.isCancelled && Date() < deadline { Thread.sleep(forTimeInterval: 0.005) }
                }
                let final = Box<Result<Void, any Error>?>(nil)
                let older = Box<(any Error)?>(nil)
                op.modifyRecordsResultBlock = { final.value = $0 }
                op.modifyRecordsCompletionBlock = { _, _, error in older.value = error }
                await run(op, on: fixture.database)
                // Whether or not it saved, the timeout ends the operation the same way.
                let error = try #require(finalError(final.value))
                #expect(error.code == .networkFailure)
                let underlying = try #require(error.underlyingError as NSError?)
                #expect(underlying.domain == "NSURLErrorDomain" && underlying.code == -1001)
                #expect(((error as NSError).userInfo[NSUnderlyingErrorKey] as? NSError)?.code == -1001)
                #expect(error.message.contains("timeoutIntervalForResource"))
                #expect(stratusError(older.value)?.code == .networkFailure)
                #expect(op.isCancelled, "a timed-out operation stops as a cancelled one does")
                guard saved.value > 0 || (error.completedItemCount ?? 0) > 0 else { return false }
                #expect(error.completedItemCount == 1, "the batch written before the timeout is reported")
                #expect(saved.value == 1)
                return true
            }
        }
        #expect(savedSome, "no attempt saved a batch before its timeout")
    }

    @Test("the resource timeout stops operations that fill every worker thread of the machine")
    func resourceTimeoutUnderFullPool() async throws {
        try await SQLiteFixture.with { fixture in
            try await TestDatabase.save(items(1), in: fixture.database)
            // One operation more than the machine has cores, each holding its thread until
            // cancelled (bounded by minutes, in case the timeout never comes).
            let count = ProcessInfo.processInfo.activeProcessorCount + 1
            let queue = OperationQueue()
            queue.maxConcurrentOperationCount = count
            let finals = Box([Result<QueryOperation.Cursor?, any Error>]())
            let operations = (0..<count).map { _ in
                let op = QueryOperation(query: Query(recordType: "Item"))
                op.database = fixture.database
                op.configuration.timeoutIntervalForResource = 1
                op.recordMatchedBlock = { [op] _, _ in
                    let deadline = Date().addingTimeInterval(300)
                    while !op.isCancelled && Date() < deadline { Thread.sleep(forTimeInterval: 0.005) }
                }
                op.queryResultBlock = { result in finals.update { $0.append(result) } }
                return op
            }
            for op in operations { queue.addOperation(op) }
            await waitUntilFinished(operations)
            #expect(finals.value.count == count)
            for result in finals.value {
                #expect(errorCode(result) == .networkFailure, "each operation timed out: \(result)")
            }
        }
    }

    @Test("the request timeout ends retries of a busy store with networkFailure over NSURLErrorTimedOut")
    func requestTimeout() async throws {
        try await TemporaryStore.with(prefix: "stratus-timeout") { store in
            let engine = try SQLiteEngine(path: store.path(), busyTimeout: .milliseconds(20))
            let blocker = try SQLiteEngine(path: store.path())
            let container = Container(identifier: "com.example.timeout", engine: engine, userName: "alice")
            let database = container.publicCloudDatabase
            let holding = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
            DispatchQueue.global().async {
                let context = DatabaseContext(containerIdentifier: "com.example.timeout", scope: .public, userName: "bob")
                _ = try? blocker.writeRecords(in: context) { _ in
                    holding.signal()
                    release.wait()
                }
            }
            await wait(for: holding)
            let op = ModifyRecordsOperation(recordsToSave: [Record(recordType: "Item")])
            op.retryPolicy = RetryPolicy(maximumAttempts: 10_000, initialDelay: 0.01, maximumDelay: 0.01)
            op.configuration.timeoutIntervalForRequest = 0.3
            let final = Box<Result<Void, any Error>?>(nil)
            op.modifyRecordsResultBlock = { final.value = $0 }
            await run(op, on: database)
            release.signal()
            let error = try #require(finalError(final.value))
            #expect(error.code == .networkFailure)
            #expect((error.underlyingError as NSError?)?.code == -1001)
            #expect(error.message.contains("timeoutIntervalForRequest"))
        }
    }

    @Test("configuredWith gives the database's operations its configuration (below their own) and group")
    func configuredWith() async throws {
        try await SQLiteFixture.with { fixture in
            let configuration = Operation.Configuration()
            configuration.timeoutIntervalForResource = 42
            configuration.qualityOfService = .userInitiated
            let group = OperationGroup()
            let record = Record(recordType: "Item", recordID: Record.ID(recordName: "configured"))
            let saved = try await fixture.database.configuredWith(configuration: configuration, group: group) { database in
                try await database.save(record)
            }
            #expect(saved.recordChangeTag != nil)

            let op = FetchRecordsOperation(recordIDs: [record.recordID])
            op.configuration.timeoutIntervalForRequest = 7
            let fetched = Box<Record?>(nil)
            op.perRecordResultBlock = { _, result in fetched.value = try? result.get() }
            let added = fixture.database.configuredWith(group: group) { database -> DatabaseOperation in
                database.add(op)
                return op
            }
            await waitUntilFinished([added])
            #expect(op.group === group)
            #expect(fetched.value?.recordID == record.recordID)

            let plain = FetchRecordsOperation(recordIDs: [])
            let configured = fixture.database.configuredWith(configuration: configuration) { $0 }
            let own = FetchRecordsOperation(recordIDs: [])
            own.configuration.timeoutIntervalForResource = 1
            configured.add(plain)
            configured.add(own)
            await waitUntilFinished([plain, own])
            #expect(plain.timeoutIntervalForResource == 42)
            #expect(plain.qualityOfService == .userInitiated)
            #expect(own.timeoutIntervalForResource == 1, "the operation's own value wins")
        }
    }

    @Test("an operation without a database runs on its configuration's container's private database; Container.add too")
    func containerDefaults() async throws {
        try await SQLiteFixture.with { fixture in
            let container = fixture.container()
            let note = Record(recordType: "Note", recordID: Record.ID(recordName: "private-note"))
            try await container.privateCloudDatabase.save(note)

            let op = FetchRecordsOperation(recordIDs: [note.recordID])
            op.configuration.container = container
            let found = Box(false)
            op.perRecordResultBlock = { _, result in found.value = (try? result.get()) != nil }
            let queue = OperationQueue()
            queue.maxConcurrentOperationCount = 1
            queue.addOperation(op)
            await waitUntilFinished([op])
            #expect(found.value)

            let viaContainer = FetchRecordsOperation(recordIDs: [note.recordID])
            let foundAgain = Box(false)
            viaContainer.perRecordResultBlock = { _, result in foundAgain.value = (try? result.get()) != nil }
            container.add(viaContainer)
            await waitUntilFinished([viaContainer])
            #expect(foundAgain.value)
            #expect(viaContainer.database?.databaseScope == .private)

            // Run through its configuration's container, a modify's client change token is kept as
            // an added one's is.
            let zone = try await container.privateCloudDatabase.save(RecordZone(zoneName: "Sync")).zoneID
            let save = ModifyRecordsOperation(recordsToSave: [makeRecord("Note", "n1", zoneID: zone)])
            save.configuration.container = container
            save.clientChangeTokenData = Data("via-configuration".utf8)
            queue.addOperation(save)
            await waitUntilFinished([save])
            let fetch = FetchRecordZoneChangesOperation(recordZoneIDs: [zone])
            let token = Box<Data?>(nil)
            fetch.recordZoneFetchResultBlock = { _, result in if case .success(let fetched) = result { token.value = fetched.clientChangeTokenData } }
            await run(fetch, on: container.privateCloudDatabase)
            #expect(token.value == Data("via-configuration".utf8))
        }
    }

    @Test("a quality of service set on the configuration in place, or on the group's default after joining it, becomes the operation's")
    func qualityOfServiceSetInPlace() async throws {
        try await SQLiteFixture.with { fixture in
            let op = QueryOperation(query: Query(recordType: "Item"))
            op.configuration.qualityOfService = .userInitiated
            let group = OperationGroup()
            let grouped = QueryOperation(query: Query(recordType: "Item"))
            grouped.group = group
            group.defaultConfiguration.qualityOfService = .utility
            for operation in [op, grouped] { fixture.database.add(operation) }
            await waitUntilFinished([op, grouped])
            #expect(op.qualityOfService == .userInitiated)
            #expect(grouped.qualityOfService == .utility)
        }
    }
}
