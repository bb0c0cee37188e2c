import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// LockKit's blocking CloudKit helpers, ported mechanically: colemancda/Lock,
// LockKit/CloudKit/CloudKit.swift (the `CKContainer` and `CKDatabase` extensions). Each helper
// configures its operation through `operation.configuration.…` (the getter's object, changed in
// place), adds it and waits on a semaphore, as server-side and command-line CloudKit code does.
// Left out: user discovery and sharing, which Stratus does not have (see README).

extension Container {
    func accountStatus() throws -> AccountStatus {
        let semaphore = DispatchSemaphore(value: 0)
        var result: Result<AccountStatus, Swift.Error>!
        accountStatus { (status, error) in
            defer { semaphore.signal() }
            if let error = error {
                result = .failure(error)
            } else {
                result = .success(status)
            }
        }
        semaphore.wait()
        switch result! {
        case let .success(status):
            return status
        case let .failure(error):
            throw error
        }
    }

    func fetchUserRecordID() throws -> Record.ID {
        let semaphore = DispatchSemaphore(value: 0)
        var result: Result<Record.ID, Swift.Error>!
        fetchUserRecordID { (recordID, error) in
            defer { semaphore.signal() }
            if let recordID = recordID {
                result = .success(recordID)
            } else if let error = error {
                result = .failure(error)
            } else {
                fatalError()
            }
        }
        semaphore.wait()
        switch result! {
        case let .success(recordID):
            return recordID
        case let .failure(error):
            throw error
        }
    }
}

extension Database {
    @discardableResult
    func fetch(_ operation: FetchRecordsOperation) throws -> [Record.ID: Record] {
        var cloudKitError: Swift.Error?
        var recordsByRecordID = [Record.ID: Record]()
        let semaphore = DispatchSemaphore(value: 0)
        operation.configuration.isLongLived = false
        operation.configuration.allowsCellularAccess = true
        operation.configuration.qualityOfService = .userInitiated
        operation.fetchRecordsCompletionBlock = {
            recordsByRecordID = $0 ?? [:]
            cloudKitError = $1
            semaphore.signal()
        }
        add(operation)
        semaphore.wait()
        if let error = cloudKitError {
            throw error
        }
        return recordsByRecordID
    }

    func modify(_ operation: ModifyRecordsOperation) throws {
        var cloudKitError: Swift.Error?
        let semaphore = DispatchSemaphore(value: 0)
        operation.configuration.isLongLived = false
        operation.configuration.allowsCellularAccess = true
        operation.configuration.qualityOfService = .userInitiated
        operation.modifyRecordsCompletionBlock = { (savedRecords, deletedRecords, error) in
            cloudKitError = error
            semaphore.signal()
        }
        add(operation)
        semaphore.wait()
        if let error = cloudKitError {
            throw error
        }
    }

    @discardableResult
    func query(_ operation: QueryOperation,
               record: @escaping (Record) throws -> (Bool)) throws -> QueryOperation.Cursor? {
        var cursor: QueryOperation.Cursor?
        var cloudKitError: Swift.Error?
        let semaphore = DispatchSemaphore(value: 0)
        operation.configuration.isLongLived = false
        operation.configuration.allowsCellularAccess = true
        operation.configuration.qualityOfService = .userInitiated
        operation.queryCompletionBlock = {
            cursor = $0
            cloudKitError = $1
            semaphore.signal()
        }
        operation.recordFetchedBlock = {
            do {
                if try record($0) == false {
                    operation.cancel()
                    semaphore.signal()
                }
            }
            catch { cloudKitError = error }
        }
        add(operation)
        semaphore.wait()
        if let error = cloudKitError {
            throw error
        }
        return cursor
    }

    func queryAll(_ query: Query,
                  zone: RecordZone.ID? = nil,
                  record: @escaping (Record) throws -> (Bool)) throws {
        var operation = QueryOperation(query: query)
        operation.zoneID = zone
        operation.configuration.isLongLived = false
        operation.configuration.allowsCellularAccess = true
        operation.configuration.qualityOfService = .userInitiated
        var cursor = try self.query(operation, record: record)
        while let queryCursor = cursor {
            operation = .init(cursor: queryCursor)
            operation.zoneID = zone
            cursor = try self.query(operation, record: record)
        }
    }

    func queryAll(_ query: Query, zone: RecordZone.ID? = nil) throws -> [Record] {
        var records = [Record]()
        try queryAll(query, zone: zone) {
            records.append($0)
            return true
        }
        return records
    }

    func modifyZones(save: [RecordZone]?,
                     delete: [RecordZone.ID]? = nil) throws {
        let operation = ModifyRecordZonesOperation(recordZonesToSave: save, recordZoneIDsToDelete: delete)
        var cloudKitError: Swift.Error?
        let semaphore = DispatchSemaphore(value: 0)
        operation.configuration.isLongLived = false
        operation.configuration.allowsCellularAccess = true
        operation.configuration.qualityOfService = .userInitiated
        operation.modifyRecordZonesCompletionBlock = { (saved, deleted, error) in
            cloudKitError = error
            semaphore.signal()
        }
        add(operation)
        semaphore.wait()
        if let error = cloudKitError {
            throw error
        }
    }

    func fetchZones(_ zones: [RecordZone.ID]? = nil) throws -> [RecordZone.ID: RecordZone] {
        let operation = zones.flatMap { FetchRecordZonesOperation(recordZoneIDs: $0) }
            ?? .fetchAllRecordZonesOperation()
        var cloudKitError: Swift.Error?
        var results = [RecordZone.ID: RecordZone]()
        let semaphore = DispatchSemaphore(value: 0)
        operation.configuration.isLongLived = false
        operation.configuration.allowsCellularAccess = true
        operation.configuration.qualityOfService = .userInitiated
        operation.fetchRecordZonesCompletionBlock = {
            results = $0 ?? [:]
            cloudKitError = $1
            semaphore.signal()
        }
        add(operation)
        semaphore.wait()
        if let error = cloudKitError {
            throw error
        }
        return results
    }

    func fetchZone(_ zone: RecordZone.ID) throws -> RecordZone {
        let zones = try fetchZones([zone])
        guard let value = zones[zone] else {
            assertionFailure("Missing zone value")
            throw StratusError(.internalError)
        }
        return value
    }

    func modify(subscriptions save: [Subscription]?, delete: [Subscription.ID]? = nil) throws {
        let operation = ModifySubscriptionsOperation(
            subscriptionsToSave: save,
            subscriptionIDsToDelete: delete
        )
        operation.configuration.isLongLived = false
        operation.configuration.allowsCellularAccess = true
        operation.configuration.qualityOfService = .userInitiated
        var cloudKitError: Swift.Error?
        let semaphore = DispatchSemaphore(value: 0)
        operation.modifySubscriptionsCompletionBlock = { (_, _, error) in
            cloudKitError = error
            semaphore.signal()
        }
        add(operation)
        semaphore.wait()
        if let error = cloudKitError {
            throw error
        }
    }
}

@Suite("LockKit's blocking CloudKit helpers, ported")
struct LockKitBlockingHelpersTests {
    /// Runs blocking code on a thread of its own, as LockKit's callers (a command-line tool, a
    /// background queue) do, so the semaphores never hold a Swift concurrency thread.
    private func blocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try body() }) }.start()
        }
    }

    @Test("configuration set through the operation's configuration getter reaches the operation")
    func configurationGetterChangesTheOperation() {
        let operation = QueryOperation(query: Query(recordType: "Lock", predicate: QueryPredicate(value: true)))
        operation.configuration.isLongLived = true
        operation.configuration.qualityOfService = .userInitiated
        operation.configuration.timeoutIntervalForRequest = 12
        #expect(operation.configuration.isLongLived)
        #expect(operation.configuration.qualityOfService == .userInitiated)
        #expect(operation.configuration.timeoutIntervalForRequest == 12)
    }

    @Test("account status and user record ID answer synchronously", arguments: TestEngine.all)
    func accountAndUser(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let (status, userID) = try await blocking { (try container.accountStatus(), try container.fetchUserRecordID()) }
            #expect(status == .available)
            #expect(userID.recordName.hasPrefix("_"))
        }
    }

    @Test("zones are made, fetched all or one, and a missing one fails the fetch", arguments: TestEngine.all)
    func zones(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let zoneID = RecordZone.ID(zoneName: "Locks", ownerName: CurrentUserDefaultName)
            let (all, one) = try await blocking {
                try database.modifyZones(save: [RecordZone(zoneID: zoneID)])
                return (try database.fetchZones(), try database.fetchZone(zoneID))
            }
            #expect(Set(all.keys) == [RecordZone.ID.default, zoneID])
            #expect(one.zoneID == zoneID)

            let missing = RecordZone.ID(zoneName: "Nowhere", ownerName: CurrentUserDefaultName)
            let error = await #expect(throws: StratusError.self) {
                try await blocking { try database.fetchZone(missing) }
            }
            let code = error?.code
            let itemCode = (error?.partialErrorsByItemID?[missing] as? StratusError)?.code
            #expect(code == .zoneNotFound || (code == .partialFailure && itemCode == .zoneNotFound))
        }
    }

    @Test("query pages through cursors, queryAll reads every page, fetch answers by ID", arguments: TestEngine.all)
    func queryPagesAndFetch(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.publicCloudDatabase
            let records = (0..<7).map { i -> Record in
                let record = Record(recordType: "Lock", recordID: Record.ID(recordName: "lock-\(i)"))
                record["name"] = "Lock \(i)"
                return record
            }
            try await blocking {
                try database.modify(ModifyRecordsOperation(recordsToSave: records, recordIDsToDelete: nil))
            }

            let all = try await blocking { () -> [String] in
                let query = Query(recordType: "Lock", predicate: QueryPredicate(value: true))
                query.sortDescriptors = [RecordSortDescriptor(key: "name", ascending: true)]
                var names = [String]()
                let first = QueryOperation(query: query)
                first.resultsLimit = 3
                var cursor = try database.query(first) { names.append($0["name"] as! String); return true }
                while let next = cursor {
                    let operation = QueryOperation(cursor: next)
                    operation.resultsLimit = 3
                    cursor = try database.query(operation) { names.append($0["name"] as! String); return true }
                }
                return names
            }
            #expect(all == (0..<7).map { "Lock \($0)" })

            let everything = try await blocking {
                try database.queryAll(Query(recordType: "Lock", predicate: QueryPredicate(value: true))).count
            }
            #expect(everything == 7)

            let fetched = try await blocking {
                try database.fetch(FetchRecordsOperation(recordIDs: [Record.ID(recordName: "lock-2")]))
            }
            #expect(fetched[Record.ID(recordName: "lock-2")]?["name"] as? String == "Lock 2")
        }
    }

    @Test("subscriptions are saved and deleted through one modify operation", arguments: TestEngine.all)
    func subscriptions(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.publicCloudDatabase
            let subscription = QuerySubscription(recordType: "Lock", predicate: QueryPredicate(value: true),
                                                 subscriptionID: "locks", options: [.firesOnRecordCreation])
            subscription.notificationInfo = Subscription.NotificationInfo()
            try await blocking { try database.modify(subscriptions: [subscription]) }
            #expect(try await database.allSubscriptions().map(\.subscriptionID) == ["locks"])
            try await blocking { try database.modify(subscriptions: nil, delete: ["locks"]) }
            #expect(try await database.allSubscriptions().isEmpty)
        }
    }
}
