import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// A table-to-zone synchronizer in the style of CloudKitSynchronizer
// (kellyhuberty/CloudKitSynchronizer: Operations/CloudKitRecordPushOperation.swift,
// CloudKitRecordPullOperation.swift, CloudKitSubscriptionSyncOperation.swift), ported
// mechanically. Its CloudKit habits that other ported code does not have: a
// `CKFetchSubscriptionsOperation.fetchAllSubscriptionsOperation()` held in a stored property and
// a `CKModifySubscriptionsOperation`, both given a `database` and run by calling `start()`
// directly (no queue), waited for with a semaphore signalled from the NSOperation
// `completionBlock`; query subscriptions built per table with
// `CKQuerySubscription(recordType:predicate:subscriptionID:options:)`, options unioned one event
// at a time, and a `zoneID` set afterwards; pushes that, on failure, read the records and IDs
// back from the operation (`recordsToSave`, `recordIDsToDelete`) to report them; pulls built
// with `configurationsByRecordZoneID`, `qualityOfService = .userInteractive`, and the older
// `recordChangedBlock`, `recordWithIDWasDeletedBlock`, `recordZoneChangeTokensUpdatedBlock`
// and `recordZoneFetchCompletionBlock`; and each `CKError.Code` mapped to a recovery with a
// `switch` that names every case, then `@unknown default`. The CloudKit original is in the
// comments.

@Suite("A table synchronizer in the style of CloudKitSynchronizer, ported")
struct TableSynchronizerTests {
    @Test("subscriptions are fetched and saved by operations started directly, without a queue", arguments: TestEngine.all)
    func subscriptionsByDirectStart(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let zone = RecordZone.ID(zoneName: "Words", ownerName: CurrentUserDefaultName)
            _ = try await database.modifyRecordZones(saving: [RecordZone(zoneID: zone)], deleting: [])
            let sync = SubscriptionSync(database: database, tables: [
                TableConfiguration(tableName: "Word", zoneName: "Words", events: [.create, .update]),
                TableConfiguration(tableName: "List", zoneName: "Words", events: [.create, .update, .delete]),
            ])
            let saved = try await ChildProcess.onOwnThread { sync.run() }
            #expect(saved.error == nil)
            #expect(saved.before.isEmpty)
            let subscriptions = try await database.allSubscriptions()
            #expect(Set(subscriptions.map(\.subscriptionID)) == ["WordCreateUpdate_Words", "ListCreateUpdateDelete_Words"])
            let list = try #require(subscriptions.first { $0.subscriptionID == "ListCreateUpdateDelete_Words" } as? QuerySubscription)
            #expect(list.querySubscriptionOptions == [.firesOnRecordCreation, .firesOnRecordUpdate, .firesOnRecordDeletion])
            #expect(list.zoneID == RecordZone.ID(zoneName: "Words", ownerName: CurrentUserDefaultName))
            #expect(list.notificationInfo?.shouldSendContentAvailable == true)

            // A second run sees what the first one saved, through the same stored operation shape.
            let again = try await ChildProcess.onOwnThread { SubscriptionSync(database: database, tables: []).fetchOnly() }
            #expect(Set(again.keys) == ["WordCreateUpdate_Words", "ListCreateUpdateDelete_Words"])
        }
    }

    @Test("a push reports each saved record, and on failure reads the records back from the operation", arguments: TestEngine.all)
    func pushReportsRecords(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let zone = RecordZone.ID(zoneName: "Words", ownerName: CurrentUserDefaultName)
            _ = try await database.modifyRecordZones(saving: [RecordZone(zoneID: zone)], deleting: [])
            let delegate = PushLog()

            let words = ["apple", "pear"].map { name -> Record in
                let record = Record(recordType: "Word", recordID: Record.ID(recordName: name, zoneID: zone))
                record["text"] = name
                return record
            }
            let push = RecordPush(delegate: delegate)
            push.updates = words
            await push.run(on: database)
            #expect(delegate.updated.map(\.0).sorted() == ["apple", "pear"])
            #expect(delegate.updated.allSatisfy { $0.1 == .success })

            // A push into a zone that does not exist: each record fails on its own
            // (perRecordCompletionBlock, zoneNotFound), and the final block's partialFailure
            // sends the push back to `recordsToSave` and `recordIDsToDelete` for what to report.
            delegate.updated = []
            let missing = RecordZone.ID(zoneName: "Gone", ownerName: CurrentUserDefaultName)
            let stray = Record(recordType: "Word", recordID: Record.ID(recordName: "plum", zoneID: missing))
            let failing = RecordPush(delegate: delegate)
            failing.updates = [stray]
            failing.deleteIds = [Record.ID(recordName: "fig", zoneID: missing)]
            await failing.run(on: database)
            #expect(delegate.updated.map(\.0) == ["plum", "plum"])
            #expect(delegate.updated.map(\.1) == [.error(.unhandled), .error(.retryLater)])
            #expect(delegate.deleted.map(\.0) == ["fig"])
            #expect(delegate.deleted.map(\.1) == [.error(.retryLater)])
        }
    }

    @Test("a pull through configurationsByRecordZoneID delivers changes, deletions and the new token", arguments: TestEngine.all)
    func pullWithTokens(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let zone = RecordZone.ID(zoneName: "Words", ownerName: CurrentUserDefaultName)
            _ = try await database.modifyRecordZones(saving: [RecordZone(zoneID: zone)], deleting: [])
            let apple = Record(recordType: "Word", recordID: Record.ID(recordName: "apple", zoneID: zone))
            let pear = Record(recordType: "Word", recordID: Record.ID(recordName: "pear", zoneID: zone))
            _ = try await database.modifyRecords(saving: [apple, pear], deleting: [])

            let log = PullLog()
            await RecordPull(zoneId: zone, previousServerChangeToken: nil, delegate: log).run(on: database)
            #expect(log.updated.sorted() == ["apple", "pear"])
            #expect(log.completed == 1)
            let token = try #require(log.tokens.last ?? nil)

            _ = try await database.modifyRecords(saving: [], deleting: [pear.recordID])
            let next = PullLog()
            await RecordPull(zoneId: zone, previousServerChangeToken: token, delegate: next).run(on: database)
            #expect(next.updated.isEmpty)
            #expect(next.deleted == ["pear"])
            #expect(next.completed == 1)
        }
    }

    @Test("every CKError code maps to a recovery, as the synchronizer's switch does")
    func recoveryForEveryCode() {
        #expect(CloudKitError(error: StratusError(.serverRecordChanged)).code == .recordConflict)
        #expect(CloudKitError(error: StratusError(.changeTokenExpired)).code == .fullRepull)
        #expect(CloudKitError(error: StratusError(.zoneBusy)).code == .retryLater)
        #expect(CloudKitError(error: StratusError(.badContainer)).code == .haltSync)
        #expect(CloudKitError(error: StratusError(.accountTemporarilyUnavailable)).code == .haltSync)
        #expect(CloudKitError(error: StratusError(.zoneBusy, "busy")).localizedDescription == "busy")
    }
}

// MARK: - Subscriptions

struct TableConfiguration {
    enum Event { case create, update, delete }
    let tableName: String
    let zoneName: String
    let events: Set<Event>
}

// fileprivate extension TableConfigurable {
//     var ckSubscriptions: SubscriptionDictionary {
//         for subscription in subscriptions {
//             var options: CKQuerySubscription.Options = []
//             var identifier = "\(self.tableName)"
//             if subscription.sendEvents.contains(.create) {
//                 identifier = identifier + "Create"
//                 options = options.union(.firesOnRecordCreation)
//             }
//             …
//             let newSubscription = CKQuerySubscription(recordType: self.tableName,
//                                                       predicate: NSPredicate(value: true),
//                                                       subscriptionID: identifier,
//                                                       options: options)
//             newSubscription.zoneID = CKRecordZone.ID(zoneName: …, ownerName: CKCurrentUserDefaultName)
//             newSubscription.notificationInfo = subscription.notificationInfo
//             returnedSubscriptions[newSubscription.subscriptionID] = newSubscription
//         }
//     }
// }
extension TableConfiguration {
    var ckSubscriptions: [Subscription.ID: Subscription] {
        var options: QuerySubscription.Options = []
        var identifier = "\(self.tableName)"
        if events.contains(.create) {
            identifier = identifier + "Create"
            options = options.union(.firesOnRecordCreation)
        }
        if events.contains(.update) {
            identifier = identifier + "Update"
            options = options.union(.firesOnRecordUpdate)
        }
        if events.contains(.delete) {
            identifier = identifier + "Delete"
            options = options.union(.firesOnRecordDeletion)
        }
        identifier = identifier + "_\(zoneName)"
        let newSubscription = QuerySubscription(recordType: self.tableName,
                                                predicate: QueryPredicate(value: true),
                                                subscriptionID: identifier,
                                                options: options)
        newSubscription.zoneID = RecordZone.ID(zoneName: zoneName, ownerName: CurrentUserDefaultName)
        let info = Subscription.NotificationInfo()
        info.shouldSendContentAvailable = true
        newSubscription.notificationInfo = info
        return [newSubscription.subscriptionID: newSubscription]
    }
}

/// CloudKitSubscriptionSyncOperation: fetches what is there, then saves what the tables need.
final class SubscriptionSync: @unchecked Sendable {
    let database: Database
    let configurations: [TableConfiguration]
    // private var fetchOperation: CKFetchSubscriptionsOperation = CKFetchSubscriptionsOperation.fetchAllSubscriptionsOperation()
    private var fetchOperation: FetchSubscriptionsOperation = FetchSubscriptionsOperation.fetchAllSubscriptionsOperation()

    init(database: Database, tables: [TableConfiguration]) {
        self.database = database
        self.configurations = tables
    }

    func run() -> (before: [Subscription.ID: Subscription], error: Error?) {
        let before = pullCurrentSubscriptions()
        var required = [Subscription.ID: Subscription]()
        for table in configurations {
            required.merge(table.ckSubscriptions) { lh, _ in lh }
        }
        let error = modifySubscriptions(add: Array(required.values), remove: [])
        return (before, error)
    }

    func fetchOnly() -> [Subscription.ID: Subscription] { pullCurrentSubscriptions() }

    // private func pullCurrentSubscriptions() async -> SubscriptionDictionary {
    //     fetchOperation.qualityOfService = .userInteractive
    //     fetchOperation.database = database
    //     var currentSubscriptions = [CKSubscription.ID: CKSubscription]()
    //     let semaphore = DispatchSemaphore(value: 0)
    //     fetchOperation.perSubscriptionResultBlock = { (id: CKSubscription.ID, result: Result<CKSubscription, Error>) in
    //         switch result {
    //         case .success(let subscription): currentSubscriptions[id] = subscription
    //         case .failure(let error): fetchError = error
    //         }
    //     }
    //     fetchOperation.completionBlock = { semaphore.signal() }
    //     fetchOperation.start()
    //     semaphore.wait()
    //     return currentSubscriptions
    // }
    private func pullCurrentSubscriptions() -> [Subscription.ID: Subscription] {
        fetchOperation.qualityOfService = .userInteractive
        fetchOperation.database = database
        let currentSubscriptions = Collected<[Subscription.ID: Subscription]>([:])
        let semaphore = DispatchSemaphore(value: 0)
        fetchOperation.perSubscriptionResultBlock = { (id: Subscription.ID, result: Result<Subscription, Error>) in
            switch result {
            case .success(let subscription):
                currentSubscriptions.value[id] = subscription
            case .failure:
                break
            }
        }
        fetchOperation.completionBlock = {
            semaphore.signal()
        }
        fetchOperation.start()
        semaphore.wait()
        return currentSubscriptions.value
    }

    // let modifyOperation = CKModifySubscriptionsOperation(subscriptionsToSave: add, subscriptionIDsToDelete: remove)
    // modifyOperation.qualityOfService = .userInteractive
    // modifyOperation.database = database
    // modifyOperation.perSubscriptionSaveBlock = { id, result in if case .failure(let error) = result { modifyError = error } }
    // modifyOperation.perSubscriptionDeleteBlock = { id, result in … }
    // modifyOperation.completionBlock = { semaphore.signal() }
    // modifyOperation.start()
    // semaphore.wait()
    private func modifySubscriptions(add: [Subscription], remove: [Subscription.ID]) -> Error? {
        let modifyOperation = ModifySubscriptionsOperation(subscriptionsToSave: add, subscriptionIDsToDelete: remove)
        modifyOperation.qualityOfService = .userInteractive
        modifyOperation.database = database
        let semaphore = DispatchSemaphore(value: 0)
        let modifyError = Collected<Error?>(nil)
        modifyOperation.perSubscriptionSaveBlock = { id, result in
            if case .failure(let error) = result {
                modifyError.value = error
            }
        }
        modifyOperation.perSubscriptionDeleteBlock = { id, result in
            if case .failure(let error) = result {
                modifyError.value = error
            }
        }
        modifyOperation.completionBlock = {
            semaphore.signal()
        }
        modifyOperation.start()
        semaphore.wait()
        return modifyError.value
    }
}

// MARK: - Push

enum CloudRecordOperationStatus: Equatable {
    case success
    case error(CloudKitError.RecoveryType)
}

final class PushLog: @unchecked Sendable {
    var updated: [(String, CloudRecordOperationStatus)] = []
    var deleted: [(String, CloudRecordOperationStatus)] = []
}

/// CloudKitRecordPushOperation: one modify operation; records reported one by one, and on
/// failure read back from the operation.
final class RecordPush: @unchecked Sendable {
    weak var delegate: PushLog?
    var updates: [Record] = []
    var deleteIds: [Record.ID] = []
    private var _pushOperation: ModifyRecordsOperation!

    init(delegate: PushLog) { self.delegate = delegate }

    func run(on database: Database) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let operation = createOperation()
            operation.completionBlock = { continuation.resume() }
            database.add(operation)
        }
    }

    // _pushOperation = CKModifyRecordsOperation(recordsToSave: updates, recordIDsToDelete: deleteIds)
    // _pushOperation.perRecordCompletionBlock = { (record, error) in
    //     let status: CloudRecordOperationStatus
    //     if let error = error as? CKError { status = .error(CloudKitError(error: error)) } else { status = .success }
    //     self.delegate?.cloudPushOperation(self, processedUpdatedRecords: [record], status: status)
    // }
    // _pushOperation.modifyRecordsCompletionBlock = { (savedRecords, deletedRecordIds, error) in
    //     if let error = error as? CKError {
    //         self.processModificationError(saving: savedRecords, deleted: deletedRecordIds, ckError: error)
    //         return
    //     }
    //     self.delegate?.cloudPushOperation(self, processedDeletedRecords: deletedRecordIds ?? [], status: .success)
    // }
    func createOperation() -> DatabaseOperation {
        _pushOperation = ModifyRecordsOperation(recordsToSave: updates, recordIDsToDelete: deleteIds)
        _pushOperation.perRecordCompletionBlock = { (record, error) in
            let status: CloudRecordOperationStatus
            if let error = error as? StratusError {
                status = .error(CloudKitError(error: error).code)
            } else {
                status = .success
            }
            self.delegate?.updated.append((record.recordID.recordName, status))
        }
        _pushOperation.modifyRecordsCompletionBlock = { (savedRecords, deletedRecordIds, error) in
            if let error = error as? StratusError {
                self.processModificationError(saving: savedRecords, deleted: deletedRecordIds, ckError: error)
                return
            }
            for id in deletedRecordIds ?? [] {
                self.delegate?.deleted.append((id.recordName, .success))
            }
        }
        return _pushOperation
    }

    // if saving?.count ?? 0 > 0 { erroredUpdatedRecords = saving } else { erroredUpdatedRecords = _pushOperation.recordsToSave }
    // if deleted?.count ?? 0 > 0 { erroredDeletedRecordIDs = deleted } else { erroredDeletedRecordIDs = _pushOperation.recordIDsToDelete }
    func processModificationError(saving: [Record]?, deleted: [Record.ID]?, ckError: StratusError) {
        let status = CloudRecordOperationStatus.error(CloudKitError(error: ckError).code)
        let erroredUpdatedRecords: [Record]?
        let erroredDeletedRecordIDs: [Record.ID]?
        if saving?.count ?? 0 > 0 {
            erroredUpdatedRecords = saving
        } else {
            erroredUpdatedRecords = _pushOperation.recordsToSave
        }
        if deleted?.count ?? 0 > 0 {
            erroredDeletedRecordIDs = deleted
        } else {
            erroredDeletedRecordIDs = _pushOperation.recordIDsToDelete
        }
        for id in erroredDeletedRecordIDs ?? [] {
            delegate?.deleted.append((id.recordName, status))
        }
        for record in erroredUpdatedRecords ?? [] {
            delegate?.updated.append((record.recordID.recordName, status))
        }
    }
}

// MARK: - Pull

final class PullLog: @unchecked Sendable {
    var updated: [String] = []
    var deleted: [String] = []
    var tokens: [ServerChangeToken?] = []
    var completed = 0
}

/// CloudKitRecordPullOperation: one zone's changes since a token.
final class RecordPull: @unchecked Sendable {
    var zoneId: RecordZone.ID?
    var previousServerChangeToken: ServerChangeToken?
    weak var delegate: PullLog?
    private var _pullOperation: FetchRecordZoneChangesOperation!

    init(zoneId: RecordZone.ID, previousServerChangeToken: ServerChangeToken?, delegate: PullLog) {
        self.zoneId = zoneId
        self.previousServerChangeToken = previousServerChangeToken
        self.delegate = delegate
    }

    func run(on database: Database) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let operation = createOperation(database: database)
            operation.completionBlock = { continuation.resume() }
            OperationQueue().addOperation(operation)
        }
    }

    // var zoneIdsConfigurations = [CKRecordZone.ID: CKFetchRecordZoneChangesOperation.ZoneConfiguration]()
    // if let zoneId = zoneId {
    //     zoneIds.append(zoneId)
    //     let configuration = CKFetchRecordZoneChangesOperation.ZoneConfiguration()
    //     configuration.previousServerChangeToken = previousServerChangeToken
    //     zoneIdsConfigurations = [zoneId: configuration]
    // }
    // _pullOperation = CKFetchRecordZoneChangesOperation(recordZoneIDs: zoneIds, configurationsByRecordZoneID: zoneIdsConfigurations)
    // _pullOperation.qualityOfService = .userInteractive
    // _pullOperation.database = database
    // _pullOperation.recordChangedBlock = { [weak self] (record) in … processedUpdatedRecords: [record] … }
    // _pullOperation.recordWithIDWasDeletedBlock = { (recordId, recordType) in … processedDeletedRecordIds: [recordId] … }
    // _pullOperation.recordZoneChangeTokensUpdatedBlock = { (_, serverChangeToken, _) in … pulledNewChangeTag: serverChangeToken }
    // _pullOperation.fetchRecordZoneChangesCompletionBlock = { (error) in }
    // _pullOperation.recordZoneFetchCompletionBlock = { (_, serverChangeToken, _, _, error) in
    //     self.delegate?.cloudPullOperationDidComplete(self)
    //     self.delegate?.cloudPullOperation(self, pulledNewChangeTag: serverChangeToken)
    // }
    func createOperation(database: Database) -> DatabaseOperation {
        var zoneIds = [RecordZone.ID]()
        var zoneIdsConfigurations = [RecordZone.ID: FetchRecordZoneChangesOperation.ZoneConfiguration]()
        if let zoneId = zoneId {
            zoneIds.append(zoneId)
            let configuration = FetchRecordZoneChangesOperation.ZoneConfiguration()
            configuration.previousServerChangeToken = previousServerChangeToken
            zoneIdsConfigurations = [zoneId: configuration]
        }
        _pullOperation = FetchRecordZoneChangesOperation(
            recordZoneIDs: zoneIds,
            configurationsByRecordZoneID: zoneIdsConfigurations
        )
        _pullOperation.qualityOfService = .userInteractive
        _pullOperation.database = database
        _pullOperation.recordChangedBlock = { [weak self] (record) in
            guard let self = self else {
                return
            }
            self.delegate?.updated.append(record.recordID.recordName)
        }
        _pullOperation.recordWithIDWasDeletedBlock = { (recordId, recordType) in
            self.delegate?.deleted.append(recordId.recordName)
        }
        _pullOperation.recordZoneChangeTokensUpdatedBlock = { (_, serverChangeToken, _) in
            self.delegate?.tokens.append(serverChangeToken)
        }
        _pullOperation.fetchRecordZoneChangesCompletionBlock = { (error) in
        }
        _pullOperation.recordZoneFetchCompletionBlock = { (_, serverChangeToken, _, _, error) in
            self.delegate?.completed += 1
            self.delegate?.tokens.append(serverChangeToken)
        }
        return _pullOperation
    }
}

// MARK: - Errors

// class CloudKitError : Error, LocalizedError {
//     enum RecoveryType { case unhandled, haltSync, retryLater, recordConflict, constraintViolation, fullRepull, message }
//     init(error: CKError) {
//         switch error.code {
//         case .alreadyShared: code = .unhandled
//         …
//         @unknown default: code = .haltSync
//         }
//     }
// }
final class CloudKitError: Error, LocalizedError {
    enum RecoveryType {
        case unhandled, haltSync, retryLater, recordConflict, constraintViolation, fullRepull, message
    }

    let underlyingError: StratusError
    let code: RecoveryType

    init(error: StratusError) {
        // The original assigns the property `code` in each case; here a local takes the case's
        // value first, because the Swift 6.3.1 compiler used here crashes on the original form
        // (an assertion in its LetPropertyLowering pass), which is no matter of Stratus's API.
        let code: RecoveryType
        switch error.code {
        case .alreadyShared: code = .unhandled
        case .assetFileModified: code = .unhandled
        case .assetFileNotFound: code = .unhandled
        case .badContainer: code = .haltSync
        case .badDatabase: code = .haltSync
        case .batchRequestFailed: code = .retryLater
        case .changeTokenExpired: code = .fullRepull
        case .constraintViolation: code = .constraintViolation
        case .incompatibleVersion: code = .haltSync
        case .internalError: code = .haltSync
        case .invalidArguments: code = .message
        case .limitExceeded: code = .retryLater
        case .managedAccountRestricted: code = .haltSync
        case .missingEntitlement: code = .haltSync
        case .networkFailure: code = .retryLater
        case .networkUnavailable: code = .retryLater
        case .notAuthenticated: code = .haltSync
        case .operationCancelled: code = .retryLater
        case .partialFailure: code = .retryLater
        case .participantMayNeedVerification: code = .unhandled
        case .permissionFailure: code = .unhandled
        case .quotaExceeded: code = .retryLater
        case .referenceViolation: code = .unhandled
        case .requestRateLimited: code = .retryLater
        case .serverRecordChanged: code = .recordConflict
        case .serverRejectedRequest: code = .message
        case .serverResponseLost: code = .retryLater
        case .serviceUnavailable: code = .retryLater
        case .tooManyParticipants: code = .unhandled
        case .unknownItem: code = .unhandled
        case .userDeletedZone: code = .unhandled
        case .zoneBusy: code = .retryLater
        case .zoneNotFound: code = .unhandled
        case .resultsTruncated: code = .unhandled
        case .assetNotAvailable: code = .unhandled
        // The two codes newer than the original's switch, which current SDKs ask for on
        // Apple's platforms too ("switch must be exhaustive").
        case .accountTemporarilyUnavailable: code = .haltSync
        case .participantAlreadyInvited: code = .unhandled
        @unknown default: code = .haltSync
        }
        self.code = code
        underlyingError = error
    }

    var localizedDescription: String {
        return underlyingError.localizedDescription
    }
}
