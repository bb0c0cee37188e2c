import Foundation
import Stratus
import StratusSQLite
import StratusStores
import StratusTestSupport
import Testing

// Andrew Podkovyrin's CloudSync (MIT, Copyright © 2019 Andrew Podkovyrin; the search index did not
// name its repository), a one-zone sync of an app's own records through the private database,
// ported mechanically: CloudSync.swift, CloudSync+Verify (`verifyAndSync`), CloudSync+Fetch,
// CloudSync+Modify, CloudSync+DeleteZone, CloudSync+State, CloudSync+Notifications,
// CKContainer+AccountStatus.swift and Error+CloudKit.swift.
//
// Its CloudKit habits that other ported code does not have: everything is driven from the main
// thread (`assert(Thread.isMainThread)` at each entry, every result hopped back with
// `DispatchQueue.main.async`), and set-up is sequenced by a serial working queue that adds an
// operation and then blocks in `waitUntilAllOperationsAreFinished()` before reading the flag the
// operation's final block set; an account check that turns every status but `.available` into a
// `CKError` the app makes itself (`CKError(.notAuthenticated)` for `.noAccount`, which CloudKit
// reports without an error); a `CKDatabaseSubscription` with content-available; uploads with
// `savePolicy = .changedKeys`, where a record object the app never saved may stand for a stored
// one, and a stale copy is written without a conflict; a database-change fetch whose
// `recordZoneWithIDWasDeletedBlock` makes the app report `CKError(.userDeletedZone)`; error
// classes written as `[.zoneNotFound, .userDeletedZone].contains(ckError.code)` and looked for
// inside `partialErrorsByItemID`; the saved records subtracted from the upload buffer as a
// `Set<CKRecord>`; and the change fetch built with `ZoneConfiguration` behind
// `#available(iOS 12.0, *)` (true on Linux), `ZoneOptions` otherwise.
//
// What the port changes besides the README's substitutions, each marked where it is:
// - The declarations are `fileprivate` (they were `public` in the package): this test module
//   holds Cirrus's port, whose `Error` extension has the same member names.
// - The container is handed in (a store file per test) instead of `CKContainer(identifier:
//   configuration.containerIdentifier)`.
// - os.log is not on Linux: `OSLog` and `os_log` are the module's stand-ins (NetNewsWire's and
//   Greasy Trail's ports), with `OSLog.default` added here.
// - Reachability and UIKit are not on Linux (nor CloudKit): the reachability and
//   will-enter-foreground observers are left out, and with them `processSubscriptionNotification`,
//   which parses a push (`CKNotification(fromRemoteNotificationDictionary:)`, README "Not
//   available") and answers a `UIBackgroundFetchResult`.
// - `#selector` needs the Objective-C runtime: the `.CKAccountChanged` observer is the block
//   form, its token kept to remove it (README, "Containers").
// - Every `assert(Thread.isMainThread)` is `dispatchPrecondition(condition: .onQueue(.main))`,
//   which asks what the app means (the main queue, which its results are sent to): on Linux the
//   main queue runs on the main thread only while that thread runs `RunLoop.main`; after
//   `dispatchMain()`, as in `swift test`, a worker thread drains it, and `@MainActor` code with
//   it, so `Thread.isMainThread` is false there (README, "Around CloudKit").
// - One change is the toolchain's, not Stratus's: Dispatch's `async(execute:)` takes a
//   `@Sendable` closure (on Apple's platforms too), so handing it the non-Sendable
//   `successBlock` inside the working queue's block warns; the port wraps the call in a closure.
// - The package's `Configuration` and `Constants` are not in the index; they hold what the code
//   reads from them, the subscription ID as the author's earlier CloudKitStorage names it.
//
// Gap met and fixed in Stratus: the saved records CloudSync subtracts from its upload buffer are
// the store's copies, so the buffer keeps the objects it sent and the next sync sends them again
// with `.changedKeys`, holding the stored values. Stratus wrote nothing for such a save (no new
// change tag, no change for the other devices); CloudKit makes every save a new version ("Every
// time CloudKit saves a record, the server updates the record's change token"), and so does
// Stratus now for saves through a save policy (README, "Save policies").

// MARK: - Linux stand-ins for os.log

extension OSLog {
    fileprivate static let `default` = OSLog(subsystem: "", category: "")
}

// MARK: - Configuration, Constants

fileprivate struct Configuration {
    let containerIdentifier: String
    let zoneID: RecordZone.ID
}

fileprivate enum Constants {
    static let subscriptionID = "private-database-changes"
}

// MARK: - CloudSync.swift

// public struct CloudFetchedData {
fileprivate struct CloudFetchedData {
    public let changedRecords: [Record]
    public let deletedRecordIDs: [Record.ID]

    public var isEmpty: Bool { changedRecords.isEmpty && deletedRecordIDs.isEmpty }
}

// public enum CloudFetchResult {
fileprivate enum CloudFetchResult {
    case success(CloudFetchedData)
    case failure(Error)
}

// public final class CloudSync {
fileprivate final class CloudSync {
    public let zoneID: RecordZone.ID

    /// Called on irrecoverable error.
    public var errorHandler: ((Error) -> Void)?

    /// Called after records were updated with CloudKit data.
    public var didChangeRecords: (([Record]) -> Void)?

    /// Called when records were deleted remotely.
    public var didDeleteRecords: (([String]) -> Void)?

    let log = OSLog(subsystem: "CloudSync", category: String(describing: CloudSync.self))

    let defaults: UserDefaults

    var saveBuffer: [Record] = []
    var deleteBuffer: [Record.ID] = []

    var isMonitoringNotifications = false
    // The block-form observer's token (see CloudSync+Notifications).
    var accountObserver: NSObjectProtocol?

    private(set) lazy var workingQueue = {
        DispatchQueue(label: "CloudSync.WorkingQueue", qos: .userInitiated)
    }()

    let container: Container
    var database: Database { container.privateCloudDatabase }

    private(set) lazy var operationQueue: OperationQueue = {
        let queue = OperationQueue()
        // don't allow simultaneous operations to prevent collisions
        queue.maxConcurrentOperationCount = 1
        queue.underlyingQueue = underlyingQueue
        queue.name = "CloudSync.Queue"
        return queue
    }()

    private lazy var underlyingQueue = {
        DispatchQueue(label: "CloudSync.UnderlyingQueue", qos: .userInitiated)
    }()

    // `reachability`: left out (Reachability is not on Linux).

    // public init(defaults: UserDefaults, configuration: Configuration) {
    public init(defaults: UserDefaults, configuration: Configuration, container: Container) {
        zoneID = configuration.zoneID
        self.defaults = defaults
        // container = CKContainer(identifier: configuration.containerIdentifier)
        self.container = container
    }
}

extension CloudSync {
    func start(currentRecords: [Record], fetchCompletion: ((CloudFetchResult) -> Void)? = nil) {
        dispatchPrecondition(condition: .onQueue(.main))
        assert(errorHandler != nil && didChangeRecords != nil && didDeleteRecords != nil,
               "Provide CloudSync handlers before starting up")

        saveBuffer = currentRecords

        startMonitoringNotifications()
        verifyAndSync(fetchCompletion: fetchCompletion)
    }

    func stop() {
        dispatchPrecondition(condition: .onQueue(.main))

        stopMonitoringNotifications()
        resetState()
        operationQueue.cancelAllOperations()
        saveBuffer = []
        deleteBuffer = []
    }

    func disable(completion: @escaping (Error?) -> Void) {
        dispatchPrecondition(condition: .onQueue(.main))

        deleteZone(completion: completion)
    }

    func save(records: [Record]) {
        dispatchPrecondition(condition: .onQueue(.main))

        if records.isEmpty {
            return
        }

        saveBuffer.append(contentsOf: records)
        modify(recordsToSave: records)
    }

    func delete(recordIDs: [Record.ID]) {
        dispatchPrecondition(condition: .onQueue(.main))

        if recordIDs.isEmpty {
            return
        }

        deleteBuffer.append(contentsOf: recordIDs)
        modify(recordIDsToDelete: recordIDs)
    }

    // `processSubscriptionNotification(with:completion:)`: left out (it parses a push with
    // `CKNotification(fromRemoteNotificationDictionary:)` and answers a UIKit type).
}

// MARK: - CloudSync+Verify

extension CloudSync {
    func verifyAndSync(fetchCompletion: ((CloudFetchResult) -> Void)?) {
        dispatchPrecondition(condition: .onQueue(.main))

        os_log("Verifying account and syncing (modify + fetch)", log: log, type: .info)

        verifyAccountAndPerformIfSuccess { [weak self] in
            guard let self = self else { return }

            self.modify(recordsToSave: self.saveBuffer,
                        recordIDsToDelete: self.deleteBuffer,
                        completion: { [weak self] _ in
                            self?.fetchChanges(completion: fetchCompletion)
            })
        }
    }

    func verifyAndFetch() {
        dispatchPrecondition(condition: .onQueue(.main))

        os_log("Verifying account and fetching", log: log, type: .info)

        verifyAccountAndPerformIfSuccess { [weak self] in
            self?.fetchChanges()
        }
    }
}

// MARK: Verify Account

private extension CloudSync {
    /// Verifies iCloud account status and continues in case of success.
    private func verifyAccountAndPerformIfSuccess(successBlock: @escaping () -> Void) {
        dispatchPrecondition(condition: .onQueue(.main))

        container.accountStatus(log) { [weak self] error in
            guard let self = self else { return }

            if let error = error {
                self.operationQueue.cancelAllOperations()

                DispatchQueue.main.async {
                    self.errorHandler?(error)
                }
            }
            else {
                self.workingQueue.async { [weak self] in
                    guard let self = self else { return }

                    self.createZoneIfNeeded()
                    self.operationQueue.waitUntilAllOperationsAreFinished()
                    guard self.isCustomZoneCreated else { return }

                    self.createSubscriptionIfNeeded()
                    self.operationQueue.waitUntilAllOperationsAreFinished()
                    guard self.isSubscriptionCreated else { return }

                    // DispatchQueue.main.async(execute: successBlock)
                    DispatchQueue.main.async { successBlock() }
                }
            }
        }
    }
}

// MARK: Create Custom Zone

private extension CloudSync {
    private func createZoneIfNeeded() {
        guard !isCustomZoneCreated else {
            os_log("Already have custom zone, skipping creation but checking if zone really exists",
                   log: log, type: .debug)

            checkZone()

            return
        }

        os_log("Creating CloudKit zone %@", log: log, type: .info, zoneID.zoneName)

        let zone = RecordZone(zoneID: zoneID)
        let operation = ModifyRecordZonesOperation(recordZonesToSave: [zone], recordZoneIDsToDelete: nil)

        operation.modifyRecordZonesCompletionBlock = { [weak self] _, _, error in
            guard let self = self else { return }

            if let error = error {
                os_log("Failed to create custom CloudKit zone: %{public}@",
                       log: self.log, type: .error, String(describing: error))

                let retrying = error.retryCloudKitOperationIfPossible(self.log) {
                    self.createZoneIfNeeded()
                }
                if !retrying {
                    if let error = error.cloudKitUserActionNeeded {
                        DispatchQueue.main.async {
                            self.errorHandler?(error)
                        }
                    }
                }
            }
            else {
                os_log("Zone created successfully", log: self.log, type: .info)
                self.isCustomZoneCreated = true
            }
        }

        operation.qualityOfService = .userInitiated
        operation.database = database

        operationQueue.addOperation(operation)
    }

    private func checkZone() {
        let operation = FetchRecordZonesOperation(recordZoneIDs: [zoneID])

        operation.fetchRecordZonesCompletionBlock = { [weak self] ids, error in
            guard let self = self else { return }

            if let error = error {
                os_log("Failed to check for custom zone existence: %{public}@",
                       log: self.log, type: .error, String(describing: error))

                let retrying = error.retryCloudKitOperationIfPossible(self.log, idempotent: true) {
                    self.checkZone()
                }
                if !retrying {
                    os_log("Irrecoverable error when fetching custom zone, assuming it doesn't exist: %{public}@",
                           log: self.log, type: .error, String(describing: error))

                    DispatchQueue.main.async {
                        self.isCustomZoneCreated = false

                        if let error = error.cloudKitUserActionNeeded {
                            self.errorHandler?(error)
                        }
                        else {
                            self.createZoneIfNeeded()
                        }
                    }
                }
            }
            else if ids == nil || ids?.isEmpty == true {
                os_log("Custom zone reported as existing, but it doesn't exist. Creating.",
                       log: self.log, type: .error)

                DispatchQueue.main.async {
                    self.isCustomZoneCreated = false
                    self.createZoneIfNeeded()
                }
            }
        }

        operation.qualityOfService = .userInitiated
        operation.database = database

        operationQueue.addOperation(operation)
    }
}

// MARK: Create Subscription

private extension CloudSync {
    private func createSubscriptionIfNeeded() {
        guard !isSubscriptionCreated else {
            os_log("Already subscribed to private database changes, skipping subscription but checking if it really exists",
                   log: log, type: .debug)

            checkSubscription()

            return
        }

        let subscription = DatabaseSubscription(subscriptionID: Constants.subscriptionID)

        let notificationInfo = Subscription.NotificationInfo()
        notificationInfo.shouldSendContentAvailable = true
        subscription.notificationInfo = notificationInfo

        let operation = ModifySubscriptionsOperation(subscriptionsToSave: [subscription],
                                                     subscriptionIDsToDelete: nil)

        operation.modifySubscriptionsCompletionBlock = { [weak self] _, _, error in
            guard let self = self else { return }

            if let error = error {
                os_log("Failed to create private CloudKit subscription: %{public}@",
                       log: self.log, type: .error, String(describing: error))

                let retrying = error.retryCloudKitOperationIfPossible(self.log) {
                    self.createSubscriptionIfNeeded()
                }
                if !retrying {
                    if let error = error.cloudKitUserActionNeeded {
                        DispatchQueue.main.async {
                            self.errorHandler?(error)
                        }
                    }
                }
            }
            else {
                os_log("Private subscription created successfully", log: self.log, type: .info)
                self.isSubscriptionCreated = true
            }
        }

        operation.database = database
        operation.qualityOfService = .userInitiated

        operationQueue.addOperation(operation)
    }

    private func checkSubscription() {
        let operation = FetchSubscriptionsOperation(subscriptionIDs: [Constants.subscriptionID])

        operation.fetchSubscriptionCompletionBlock = { [weak self] ids, error in
            guard let self = self else { return }

            if let error = error {
                os_log("Failed to check for private zone subscription existence: %{public}@",
                       log: self.log, type: .error, String(describing: error))

                let retrying = error.retryCloudKitOperationIfPossible(self.log, idempotent: true) {
                    self.checkSubscription()
                }
                if !retrying {
                    os_log("Irrecoverable error when fetching private zone subscription, assuming it doesn't exist: %{public}@",
                           log: self.log, type: .error, String(describing: error))

                    DispatchQueue.main.async {
                        if let error = error.cloudKitUserActionNeeded {
                            self.errorHandler?(error)
                        }

                        self.isSubscriptionCreated = false
                        self.createSubscriptionIfNeeded()
                    }
                }
            }
            else if ids == nil || ids?.isEmpty == true {
                os_log("Private subscription reported as existing, but it doesn't exist. Creating.",
                       log: self.log, type: .error)

                DispatchQueue.main.async {
                    self.isSubscriptionCreated = false
                    self.createSubscriptionIfNeeded()
                }
            }
        }

        operation.database = database
        operation.qualityOfService = .userInitiated

        operationQueue.addOperation(operation)
    }
}

// MARK: - CloudSync+Fetch

extension CloudSync {
    func fetchChanges(completion: ((CloudFetchResult) -> Void)? = nil) {
        os_log("Fetching changes", log: log, type: .debug)

        dispatchPrecondition(condition: .onQueue(.main))

        fetchDatabaseChanges { [weak self] result in
            guard let self = self else { return }

            dispatchPrecondition(condition: .onQueue(.main))

            switch result {
            case .notChanged:
                let fetchedData = CloudFetchedData(changedRecords: [], deletedRecordIDs: [])
                completion?(.success(fetchedData))
            case let .failed(error):
                completion?(.failure(error))
            case .zoneChanged:
                self.fetchZoneChanges(completion: completion)
            case .zoneDeleted:
                // let error = CKError(.userDeletedZone)
                let error = StratusError(.userDeletedZone)
                self.errorHandler?(error)
                completion?(.failure(error))
            }
        }
    }
}

// MARK: Fetch Database Changes

private extension CloudSync {
    private enum FetchDatabaseChangesResult {
        case notChanged
        case failed(Error)
        case zoneChanged
        case zoneDeleted
    }

    private func fetchDatabaseChanges(completion: @escaping (FetchDatabaseChangesResult) -> Void) {
        os_log("Fetching database changes", log: log, type: .debug)

        dispatchPrecondition(condition: .onQueue(.main))

        var zoneChanged = false
        var zoneDeleted = false

        let operation = FetchDatabaseChangesOperation(previousServerChangeToken: previousDatabaseChangeToken)

        operation.recordZoneWithIDChangedBlock = { [weak self] zoneID in
            if zoneID == self?.zoneID {
                zoneChanged = true
            }
        }

        operation.recordZoneWithIDWasDeletedBlock = { [weak self] zoneID in
            if zoneID == self?.zoneID {
                zoneDeleted = true
            }
        }

        operation.changeTokenUpdatedBlock = { [weak self] token in
            self?.previousDatabaseChangeToken = token
        }

        operation.fetchDatabaseChangesCompletionBlock = { [weak self] token, _, error in
            guard let self = self else { return }

            if let error = error {
                os_log("Failed to fetch database changes: %{public}@",
                       log: self.log, type: .error, String(describing: error))

                // if let error = error as? CKError {
                if let error = error as? StratusError {
                    if error.code == .changeTokenExpired {
                        os_log("Change token expired, resetting token and trying again",
                               log: self.log, type: .error)

                        self.previousDatabaseChangeToken = nil
                        self.fetchDatabaseChanges(completion: completion)

                        return
                    }

                    let retrying = error.retryCloudKitOperationIfPossible(self.log, idempotent: true) {
                        self.fetchDatabaseChanges(completion: completion)
                    }
                    if retrying {
                        return
                    }
                }

                DispatchQueue.main.async {
                    if let error = error.cloudKitUserActionNeeded {
                        self.errorHandler?(error)
                    }
                    completion(.failed(error))
                }

                return
            }

            os_log("Commiting new database change token", log: self.log, type: .debug)
            self.previousDatabaseChangeToken = token

            let result: FetchDatabaseChangesResult
            if zoneDeleted {
                result = .zoneDeleted
            }
            else if zoneChanged {
                result = .zoneChanged
            }
            else {
                result = .notChanged
            }

            DispatchQueue.main.async {
                completion(result)
            }
        }

        operation.database = database
        operation.qualityOfService = .userInitiated

        operationQueue.addOperation(operation)
    }
}

// MARK: Fetch Zone Changes

private extension CloudSync {
    private func fetchZoneChanges(completion: ((CloudFetchResult) -> Void)?) {
        os_log("Fetching zone changes", log: log, type: .debug)

        dispatchPrecondition(condition: .onQueue(.main))

        var changedRecords = [Record]()
        var deletedRecordIDs = [Record.ID]()
        var retryingZoneError = false

        let operation: FetchRecordZoneChangesOperation
        if #available(iOS 12.0, *) {
            let options = FetchRecordZoneChangesOperation.ZoneConfiguration()
            options.previousServerChangeToken = previousZoneChangeToken
            let configurations = [zoneID: options]
            operation = FetchRecordZoneChangesOperation(recordZoneIDs: [zoneID],
                                                        configurationsByRecordZoneID: configurations)
        }
        else {
            let options = FetchRecordZoneChangesOperation.ZoneOptions()
            options.previousServerChangeToken = previousZoneChangeToken
            let configurations = [zoneID: options]
            operation = FetchRecordZoneChangesOperation(recordZoneIDs: [zoneID],
                                                        optionsByRecordZoneID: configurations)
        }

        operation.recordChangedBlock = { changedRecords.append($0) }

        operation.recordWithIDWasDeletedBlock = { recordID, _ in deletedRecordIDs.append(recordID) }

        operation.recordZoneChangeTokensUpdatedBlock = { [weak self] _, token, _ in
            guard let token = token else { return }

            self?.previousZoneChangeToken = token
        }

        operation.recordZoneFetchCompletionBlock = { [weak self] _, token, _, _, error in
            guard let self = self else { return }

            // if let error = error as? CKError {
            if let error = error as? StratusError {
                os_log("Failed to fetch record zone changes: %{public}@",
                       log: self.log, type: .error, String(describing: error))

                if error.code == .changeTokenExpired {
                    os_log("Zone change token expired, resetting token and trying again",
                           log: self.log, type: .error)

                    self.previousZoneChangeToken = nil
                    retryingZoneError = true

                    DispatchQueue.main.async {
                        self.fetchZoneChanges(completion: completion)
                    }
                }
                else {
                    retryingZoneError = error.retryCloudKitOperationIfPossible(self.log, idempotent: true) {
                        self.fetchZoneChanges(completion: completion)
                    }
                }
            }
            else {
                os_log("Commiting new zone change token", log: self.log, type: .debug)

                self.previousZoneChangeToken = token
            }
        }

        operation.fetchRecordZoneChangesCompletionBlock = { [weak self] error in
            guard let self = self else { return }

            if retryingZoneError {
                return
            }

            if let error = error {
                os_log("Failed to fetch record zone changes: %{public}@",
                       log: self.log, type: .error, String(describing: error))

                let retrying = error.retryCloudKitOperationIfPossible(self.log, idempotent: true) {
                    self.fetchZoneChanges(completion: completion)
                }
                if !retrying {
                    DispatchQueue.main.async {
                        if let error = error.cloudKitUserActionNeeded {
                            self.errorHandler?(error)
                        }

                        completion?(.failure(error))
                    }
                }
            }
            else {
                DispatchQueue.main.async {
                    os_log("Finished record zone changes fetch with %{public}d changed record(s) and %{public}d deleted record(s)",
                           log: self.log, type: .info, changedRecords.count, deletedRecordIDs.count)

                    if !changedRecords.isEmpty {
                        self.didChangeRecords?(changedRecords)
                    }

                    if !deletedRecordIDs.isEmpty {
                        let deletedIdentifiers = deletedRecordIDs.map { $0.recordName }
                        self.didDeleteRecords?(deletedIdentifiers)
                    }

                    let fetchedData = CloudFetchedData(changedRecords: changedRecords,
                                                       deletedRecordIDs: deletedRecordIDs)
                    completion?(.success(fetchedData))
                }
            }
        }

        operation.database = database
        operation.qualityOfService = .userInitiated

        operationQueue.addOperation(operation)
    }
}

// MARK: - CloudSync+Modify

extension CloudSync {
    func modify(recordsToSave: [Record] = [],
                recordIDsToDelete: [Record.ID] = [],
                completion: ((Error?) -> Void)? = nil) {
        dispatchPrecondition(condition: .onQueue(.main))

        if recordsToSave.isEmpty && recordIDsToDelete.isEmpty {
            completion?(nil)

            return
        }

        os_log("Modify with %{public}d record(s) to save, %{public}d record(s) to delete",
               log: log, type: .debug, recordsToSave.count, recordIDsToDelete.count)

        let operation = ModifyRecordsOperation(recordsToSave: recordsToSave,
                                               recordIDsToDelete: recordIDsToDelete)

        operation.perRecordCompletionBlock = { [weak self] record, error in
            guard let self = self else { return }

            // We're only interested in conflict errors here
            guard let error = error, error.isCloudKitConflict else { return }

            os_log("CloudKit conflict with record of type %{public}@", log: self.log, type: .error, record.recordType)

            guard let resolvedRecord = error.resolveConflict(self.log, with: recentRecordConflictResolver) else {
                os_log("Resolving conflict with record of type %{public}@ returned a nil record. Giving up.",
                       log: self.log, type: .error, record.recordType)

                return
            }

            os_log("Conflict resolved, will retry upload", log: self.log, type: .info)

            DispatchQueue.main.async {
                self.modify(recordsToSave: [resolvedRecord], completion: completion)
            }
        }

        operation.modifyRecordsCompletionBlock = { [weak self] savedRecords, deletedRecordIDs, error in
            guard let self = self else { return }

            if let error = error {
                os_log("Failed to upload records: %{public}@",
                       log: self.log, type: .error, String(describing: error))

                DispatchQueue.main.async {
                    self.handleModifyError(error,
                                           recordsToSave: recordsToSave,
                                           recordIDsToDelete: recordIDsToDelete,
                                           completion: completion)
                }
            }
            else {
                os_log("Successfully modified %{public}d record(s), deleted %{public}d record(s)",
                       log: self.log, type: .info, recordsToSave.count, recordIDsToDelete.count)

                DispatchQueue.main.async {
                    if let savedRecords = savedRecords, !savedRecords.isEmpty {
                        let bufferSet = Set(self.saveBuffer)
                        let savedSet = Set(savedRecords)
                        self.saveBuffer = Array(bufferSet.subtracting(savedSet))

                        self.didChangeRecords?(savedRecords)
                    }

                    if let deletedRecordIDs = deletedRecordIDs, !deletedRecordIDs.isEmpty {
                        let bufferSet = Set(self.deleteBuffer)
                        let deletedSet = Set(deletedRecordIDs)
                        self.deleteBuffer = Array(bufferSet.subtracting(deletedSet))

                        let deletedIdentifiers = deletedRecordIDs.map { $0.recordName }
                        self.didDeleteRecords?(deletedIdentifiers)
                    }

                    completion?(nil)
                }
            }
        }

        // Modify record happens when user changes the corresponding object
        // that means we don't care much about what's currently stored in CloudKit
        operation.savePolicy = .changedKeys

        operation.database = database
        operation.qualityOfService = .userInitiated

        operationQueue.addOperation(operation)
    }
}

// MARK: Error Handling

private extension CloudSync {
    private func handleModifyError(_ error: Error,
                                   recordsToSave: [Record],
                                   recordIDsToDelete: [Record.ID],
                                   completion: ((Error?) -> Void)?) {
        dispatchPrecondition(condition: .onQueue(.main))

        // guard let ckError = error as? CKError else {
        guard let ckError = error as? StratusError else {
            os_log("Error was not a CKError, giving up: %{public}@",
                   log: log, type: .fault, String(describing: error))

            completion?(error)

            return
        }

        if ckError.code == .limitExceeded {
            os_log("CloudKit batch limit exceeded, sending records in chunks", log: log, type: .error)

            let splittedRecordsToSave = recordsToSave.splitInHalf()
            let splittedRecordIDsToDelete = recordIDsToDelete.splitInHalf()

            modify(recordsToSave: splittedRecordsToSave.firstHalf,
                   recordIDsToDelete: splittedRecordIDsToDelete.firstHalf,
                   completion: completion)

            modify(recordsToSave: splittedRecordsToSave.secondHalf,
                   recordIDsToDelete: splittedRecordIDsToDelete.secondHalf,
                   completion: completion)
        }
        else {
            let retrying = error.retryCloudKitOperationIfPossible(log) {
                self.modify(recordsToSave: recordsToSave,
                            recordIDsToDelete: recordIDsToDelete,
                            completion: completion)
            }
            if !retrying {
                os_log("Error is not recoverable: %{public}@",
                       log: log, type: .error, String(describing: error))

                if let error = error.cloudKitUserActionNeeded {
                    errorHandler?(error)
                }

                completion?(error)
            }
        }
    }
}

// MARK: Conflict Resolver

private func recentRecordConflictResolver(clientRecord: Record, serverRecord: Record) -> Record? {
    // Most recent record wins. This might not be the best solution but YOLO.

    guard let clientDate = clientRecord.modificationDate, let serverDate = serverRecord.modificationDate else {
        return clientRecord
    }

    if clientDate > serverDate {
        return clientRecord
    }
    else {
        return serverRecord
    }
}

// MARK: Array Extension

private extension Array {
    /// Splits Array into two halves.
    /// If elements count is odd `secondHalf` will have `count / 2 + 1` elements
    /// - Returns: Tuple with two halves
    func splitInHalf() -> (firstHalf: [Element], secondHalf: [Element]) {
        let midpoint = count / 2
        let firstHalf = self[..<midpoint]
        let secondHalf = self[midpoint...]

        return (Array(firstHalf), Array(secondHalf))
    }
}

// MARK: - CloudSync+DeleteZone

extension CloudSync {
    func deleteZone(completion: @escaping (Error?) -> Void) {
        os_log("Deleting CloudKit zone %@", log: log, type: .info, zoneID.zoneName)

        // Since we're removing all the data, stop any operations
        operationQueue.cancelAllOperations()

        let operation = ModifyRecordZonesOperation(recordZonesToSave: nil, recordZoneIDsToDelete: [zoneID])

        operation.modifyRecordZonesCompletionBlock = { [weak self] _, _, error in
            guard let self = self else { return }

            if let error = error {
                os_log("Failed to delete custom CloudKit zone: %{public}@",
                       log: self.log, type: .error, String(describing: error))

                let retrying = error.retryCloudKitOperationIfPossible(self.log) {
                    self.deleteZone(completion: completion)
                }
                if !retrying {
                    // don't handle error globally here, because it's always user-initiated action
                    // and error will be handled in completion block
                    DispatchQueue.main.async {
                        completion(error)
                    }
                }
            }
            else {
                os_log("Zone deleted successfully", log: self.log, type: .info)
                self.isCustomZoneCreated = false

                DispatchQueue.main.async {
                    completion(nil)
                }
            }
        }

        operation.qualityOfService = .userInitiated
        operation.database = database

        operationQueue.addOperation(operation)
    }
}

// MARK: - CloudSync+State

extension CloudSync {
    private enum Keys {
        static let createdCustomZoneKey = "CloudSync.CreatedCustomZone"
        static let createdSubscriptionKey = "CloudSync.CreatedSubscription"
        static let previousDatabaseChangeTokenKey = "CloudSync.PreviousDatabaseChangeToken"
        static let previousZoneChangeTokenKey = "CloudSync.PreviousZoneChangeToken"
    }

    var isCustomZoneCreated: Bool {
        get { defaults.bool(forKey: Keys.createdCustomZoneKey) }
        set { defaults.set(newValue, forKey: Keys.createdCustomZoneKey) }
    }

    var isSubscriptionCreated: Bool {
        get { defaults.bool(forKey: Keys.createdSubscriptionKey) }
        set { defaults.set(newValue, forKey: Keys.createdSubscriptionKey) }
    }

    var previousDatabaseChangeToken: ServerChangeToken? {
        get {
            guard let tokenData = defaults.object(forKey: Keys.previousDatabaseChangeTokenKey) as? Data else {
                return nil
            }

            do {
                return try NSKeyedUnarchiver.unarchivedObject(ofClass: ServerChangeToken.self, from: tokenData)
            }
            catch {
                os_log("Failed to decode CKServerChangeToken for key previousDatabaseChangeToken",
                       log: log, type: .error)
                return nil
            }
        }
        set {
            let key = Keys.previousDatabaseChangeTokenKey

            guard let newValue = newValue else {
                defaults.removeObject(forKey: key)
                return
            }

            do {
                let data = try NSKeyedArchiver.archivedData(withRootObject: newValue, requiringSecureCoding: true)
                defaults.set(data, forKey: key)
            }
            catch {
                defaults.removeObject(forKey: key)
                os_log("Failed to encode change token: %{public}@ for key previousDatabaseChangeToken",
                       log: log, type: .error, String(describing: error))
            }
        }
    }

    var previousZoneChangeToken: ServerChangeToken? {
        get {
            guard let tokenData = defaults.object(forKey: Keys.previousZoneChangeTokenKey) as? Data else {
                return nil
            }

            do {
                return try NSKeyedUnarchiver.unarchivedObject(ofClass: ServerChangeToken.self, from: tokenData)
            }
            catch {
                os_log("Failed to decode CKServerChangeToken for key previousZoneChangeToken",
                       log: log, type: .error)
                return nil
            }
        }
        set {
            let key = Keys.previousZoneChangeTokenKey

            guard let newValue = newValue else {
                defaults.removeObject(forKey: key)
                return
            }

            do {
                let data = try NSKeyedArchiver.archivedData(withRootObject: newValue, requiringSecureCoding: true)
                defaults.set(data, forKey: key)
            }
            catch {
                defaults.removeObject(forKey: key)
                os_log("Failed to encode change token: %{public}@ for key previousZoneChangeToken",
                       log: log, type: .error, String(describing: error))
            }
        }
    }

    func resetState() {
        isCustomZoneCreated = false
        isSubscriptionCreated = false
        previousDatabaseChangeToken = nil
        previousZoneChangeToken = nil
    }
}

// MARK: - CloudSync+Notifications

extension CloudSync {
    /// Subscribe to Reachability, iCloud account changed and App Will Enter Foreground notifications.
    func startMonitoringNotifications() {
        dispatchPrecondition(condition: .onQueue(.main))

        guard !isMonitoringNotifications else {
            os_log("Skipping %{public}@, already subscribed", log: log, type: .debug, #function)

            return
        }
        isMonitoringNotifications = true

        os_log("Starting notifications monitoring", log: log, type: .debug)

        let notificationCenter = NotificationCenter.default

        // The reachability observer and `reachability.startNotifier()`: left out.

        // notificationCenter.addObserver(self,
        //                                selector: #selector(accountDidChange(_:)),
        //                                name: .CKAccountChanged,
        //                                object: nil)
        accountObserver = notificationCenter.addObserver(forName: .AccountChanged, object: nil, queue: nil) { [weak self] notification in
            self?.accountDidChange(notification)
        }

        // The `UIApplication.willEnterForegroundNotification` observer: left out.
    }

    func stopMonitoringNotifications() {
        dispatchPrecondition(condition: .onQueue(.main))

        guard isMonitoringNotifications else {
            os_log("Skipping %{public}@, already unsubscribed", log: log, type: .debug, #function)

            return
        }
        isMonitoringNotifications = false

        os_log("Stopping notifications monitoring", log: log, type: .debug)

        // reachability.stopNotifier()

        let notificationCenter = NotificationCenter.default
        // notificationCenter.removeObserver(self)
        if let accountObserver { notificationCenter.removeObserver(accountObserver) }
    }

    // MARK: Private

    // @objc
    private func accountDidChange(_ notification: Notification) {
        // assert(!Thread.isMainThread)
        dispatchPrecondition(condition: .notOnQueue(.main))

        os_log("iCloud account has been changed %{public}@",
               log: log, type: .info, String(describing: notification.userInfo))
        DispatchQueue.main.async {
            self.verifyAndFetch()
        }
    }
}

// MARK: - CKContainer+AccountStatus.swift

// public extension CKContainer {
fileprivate extension Container {
    func accountStatus(_ log: OSLog = .default, completion: @escaping (Error?) -> Void) {
        os_log("Verifying account status", log: log, type: .info)

        accountStatus { accountStatus, error in
            // since CloudKit does not return error for `noAccount` status we provide fallback errors
            switch accountStatus {
            case .couldNotDetermine:
                os_log("Account status: Could Not Determine", log: log, type: .info)
                completion(error ?? StratusError(.internalError))
            case .available:
                os_log("Account status: Available", log: log, type: .info)
                completion(nil)
            case .restricted:
                os_log("Account status: Restricted", log: log, type: .info)
                completion(error ?? StratusError(.managedAccountRestricted))
            case .noAccount:
                os_log("Account status: No Account", log: log, type: .info)
                completion(error ?? StratusError(.notAuthenticated))
            case .temporarilyUnavailable:
                os_log("Account status: Temporarily Unavailable", log: log, type: .info)
                completion(error ?? StratusError(.serviceUnavailable))
            @unknown default:
                preconditionFailure("Unhandled account status")
            }
        }
    }
}

// MARK: - Error+CloudKit.swift

// public extension Error {
fileprivate extension Error {
    /// Whether this error represents a "zone not found" or a "user deleted zone" error
    var isCloudKitZoneDeleted: Bool {
        // guard let ckError = self as? CKError else { return false }
        guard let ckError = self as? StratusError else { return false }

        return [.zoneNotFound, .userDeletedZone].contains(ckError.code)
    }

    /// Whether this error represents any CloudKit account related problem
    var isCloudKitAccountProblem: Bool {
        // guard let ckError = self as? CKError else { return false }
        guard let ckError = self as? StratusError else { return false }

        return [.internalError, .notAuthenticated, .managedAccountRestricted].contains(ckError.code)
    }
}

// MARK: Internal

// extension Error {
fileprivate extension Error {
    /// Whether this error is a CloudKit server record changed error, representing a record conflict
    var isCloudKitConflict: Bool {
        // guard let ckError = self as? CKError else { return false }
        guard let ckError = self as? StratusError else { return false }

        return ckError.code == .serverRecordChanged
    }

    /// Returns CKError if the zone was deleted or there is CloudKit account problem
    // var cloudKitUserActionNeeded: CKError? {
    var cloudKitUserActionNeeded: StratusError? {
        cloudKitAccountProblem ?? cloudKitZoneDeleted
    }

    /// Returns CKError if it represents a "zone not found" or a "user deleted zone" error
    private var cloudKitZoneDeleted: StratusError? {
        findCKError { $0.isCloudKitZoneDeleted }
    }

    /// Returns CKError if it represents any CloudKit account related problem
    private var cloudKitAccountProblem: StratusError? {
        findCKError { $0.isCloudKitAccountProblem }
    }

    /// Uses the `resolver` closure to resolve a conflict, returning the conflict-free record
    ///
    /// - Parameter resolver: A closure that will receive the client record as the first param and the server record as the second param.
    /// This closure is responsible for handling the conflict and returning the conflict-free record.
    /// - Returns: The conflict-free record returned by `resolver`
    func resolveConflict(_ log: OSLog, with resolver: (Record, Record) -> Record?) -> Record? {
        // guard let ckError = self as? CKError else {
        guard let ckError = self as? StratusError else {
            os_log("resolveConflict called on an error that was not a CKError. The error was %{public}@",
                   log: log, type: .fault, String(describing: self))
            return nil
        }

        guard ckError.code == .serverRecordChanged else {
            os_log("resolveConflict called on a CKError that was not a serverRecordChanged error. The error was %{public}@",
                   log: log, type: .fault, String(describing: ckError))
            return nil
        }

        guard let clientRecord = ckError.userInfo[RecordChangedErrorClientRecordKey] as? Record else {
            os_log("Failed to obtain client record from serverRecordChanged error. The error was %{public}@",
                   log: log, type: .fault, String(describing: ckError))
            return nil
        }

        guard let serverRecord = ckError.userInfo[RecordChangedErrorServerRecordKey] as? Record else {
            os_log("Failed to obtain server record from serverRecordChanged error. The error was %{public}@",
                   log: log, type: .fault, String(describing: ckError))
            return nil
        }

        return resolver(clientRecord, serverRecord)
    }

    /// Retries a CloudKit operation if the error suggests it
    ///
    /// - Parameters:
    ///   - log: The logger to use for logging information about the error handling, uses the default one if not set
    ///   - block: The block that will execute the operation later if it can be retried
    /// - Returns: Whether or not it was possible to retry the operation
    func retryCloudKitOperationIfPossible(_ log: OSLog,
                                          idempotent: Bool = false,
                                          with block: @escaping () -> Void) -> Bool {
        // guard let ckError = self as? CKError else { return false }
        guard let ckError = self as? StratusError else { return false }

        if let retryAfter = ckError.retryAfterSeconds {
            os_log("Error is recoverable. Will retry after %{public}f seconds", log: log, type: .error, retryAfter)
            DispatchQueue.main.asyncAfter(deadline: .now() + retryAfter, execute: block)

            return true
        }
        else if idempotent && ckError.code == .serverResponseLost {
            // The server received and processed this request, but the response was lost due to a network failure.
            // There is no guarantee that this request succeeded.
            // Your client should re-issue the request (if it is idempotent)

            os_log("Error is recoverable (response was lost). Will retry now", log: log, type: .error)
            DispatchQueue.main.async(execute: block)

            return true
        }

        return false
    }

    // private func findCKError(condition: (CKError) -> Bool) -> CKError? {
    private func findCKError(condition: (StratusError) -> Bool) -> StratusError? {
        // guard let ckError = self as? CKError else { return nil }
        guard let ckError = self as? StratusError else { return nil }

        if condition(ckError) {
            return ckError
        }

        if let partialErrors = ckError.partialErrorsByItemID {
            for error in partialErrors.values {
                // if let innerError = error as? CKError, condition(innerError) {
                if let innerError = error as? StratusError, condition(innerError) {
                    return innerError
                }
            }
        }

        return nil
    }
}

// MARK: - Tests

/// What one device's app hears from CloudSync's handlers, which it calls on the main thread.
fileprivate final class CloudSyncHandlers: @unchecked Sendable {
    private let lock = NSLock()
    private var changed: [Record] = []
    private var deleted: [String] = []
    private var errors: [Error] = []
    private var errorWaiter: CheckedContinuation<Error, Never>?

    func attach(to sync: CloudSync) {
        sync.didChangeRecords = { records in self.lock.withLock { self.changed += records } }
        sync.didDeleteRecords = { names in self.lock.withLock { self.deleted += names } }
        sync.errorHandler = { error in
            let waiter = self.lock.withLock {
                self.errors.append(error)
                defer { self.errorWaiter = nil }
                return self.errorWaiter
            }
            waiter?.resume(returning: error)
        }
    }

    var changedRecords: [Record] { lock.withLock { changed } }
    var deletedNames: [String] { lock.withLock { deleted } }
    var reportedErrors: [Error] { lock.withLock { errors } }

    /// The next error the handler is given (the first one already given, if any).
    func nextError() async -> Error {
        await withCheckedContinuation { continuation in
            let already: Error? = lock.withLock {
                if let first = errors.first { return first }
                errorWaiter = continuation
                return nil
            }
            if let already { continuation.resume(returning: already) }
        }
    }
}

@Suite("Andrew Podkovyrin's CloudSync, ported", .timeLimit(.minutes(30)))
@MainActor
struct CloudSyncTests {
    fileprivate static let zoneID = RecordZone.ID(zoneName: "Notes", ownerName: CurrentUserDefaultName)
    fileprivate static let configuration = Configuration(containerIdentifier: "iCloud.com.example.notes", zoneID: zoneID)

    /// One device: its own defaults and container object on the shared store, as a second
    /// device of the same user.
    fileprivate struct Device {
        let sync: CloudSync
        let handlers = CloudSyncHandlers()
        let defaults: UserDefaults
        let database: Database
    }

    fileprivate static func device(storeLocation: String, suite: String) throws -> Device {
        let container = try Container(identifier: configuration.containerIdentifier, store: storeLocation, userName: "alice")
        let defaults = try #require(UserDefaults(suiteName: suite))
        let device = Device(sync: CloudSync(defaults: defaults, configuration: configuration, container: container),
                            defaults: defaults, database: container.privateCloudDatabase)
        device.handlers.attach(to: device.sync)
        return device
    }

    fileprivate static func withSharedStore<T>(on engine: TestEngine, _ body: (_ storeLocation: String, _ suites: [String]) async throws -> T) async throws -> T {
        try await withStore(on: engine) { location, store in
            let suites = (0..<2).map { _ in "cloudsync-tests-\(UUID().uuidString)" }
            defer { for suite in suites { UserDefaults(suiteName: suite)?.removePersistentDomain(forName: suite) } }
            return try await body(location, suites)
        }
    }

    fileprivate static func note(_ name: String, title: String) -> Record {
        let record = Record(recordType: "Note", recordID: Record.ID(recordName: name, zoneID: zoneID))
        record["title"] = title
        return record
    }

    fileprivate static func start(_ device: Device, with records: [Record] = []) async -> CloudFetchResult {
        await withCheckedContinuation { continuation in
            device.sync.start(currentRecords: records) { continuation.resume(returning: $0) }
        }
    }

    fileprivate static func fetch(_ device: Device) async -> CloudFetchResult {
        await withCheckedContinuation { continuation in
            device.sync.fetchChanges { continuation.resume(returning: $0) }
        }
    }

    fileprivate static func modify(_ device: Device, saving: [Record] = [], deleting: [Record.ID] = []) async -> Error? {
        await withCheckedContinuation { continuation in
            device.sync.modify(recordsToSave: saving, recordIDsToDelete: deleting) { continuation.resume(returning: $0) }
        }
    }

    @Test("starting up makes the zone and a database subscription, uploads the app's records and fetches them back, and keeps its flags and tokens in the defaults", arguments: TestEngine.all)
    func startUp(engine: TestEngine) async throws {
        try await Self.withSharedStore(on: engine) { storeLocation, suites in
            let phone = try Self.device(storeLocation: storeLocation, suite: suites[0])
            let result = await Self.start(phone, with: [Self.note("n1", title: "Milk"), Self.note("n2", title: "Eggs")])

            guard case .success(let fetched) = result else { Issue.record("start failed: \(result)"); return }
            #expect(Set(fetched.changedRecords.map(\.recordID.recordName)) == ["n1", "n2"])
            #expect(fetched.deletedRecordIDs.isEmpty)
            #expect(phone.handlers.reportedErrors.isEmpty)

            let zone = try await phone.database.recordZone(for: Self.zoneID)
            #expect(zone.zoneID == Self.zoneID)
            let subscription = try #require(try await phone.database.subscription(for: "private-database-changes") as? DatabaseSubscription)
            #expect(subscription.notificationInfo?.shouldSendContentAvailable == true)
            #expect(try await phone.database.record(for: Record.ID(recordName: "n1", zoneID: Self.zoneID))["title"] as? String == "Milk")

            #expect(phone.defaults.bool(forKey: "CloudSync.CreatedCustomZone"))
            #expect(phone.defaults.bool(forKey: "CloudSync.CreatedSubscription"))
            for key in ["CloudSync.PreviousDatabaseChangeToken", "CloudSync.PreviousZoneChangeToken"] {
                let data = try #require(phone.defaults.object(forKey: key) as? Data)
                #expect(try NSKeyedUnarchiver.unarchivedObject(ofClass: ServerChangeToken.self, from: data) != nil)
            }

            // The saved records handed to `didChangeRecords` are the store's copies, with change
            // tags, not the objects the app gave (CloudKit's are the server's): the app's
            // `Set<CKRecord>` subtraction, which compares objects, leaves its buffer as it was.
            let saved = phone.handlers.changedRecords.filter { $0.recordID.recordName == "n1" }
            #expect(!saved.isEmpty && saved.allSatisfy { $0.recordChangeTag != nil })
            #expect(phone.sync.saveBuffer.count == 2)

            // So the next sync sends those two never-saved objects again: with `.changedKeys` they
            // update the stored records instead of conflicting with them, and though they hold
            // the stored values, each save is a new version ("Every time CloudKit saves a record,
            // the server updates the record's change token"), which the fetch after it brings back.
            let n1 = Record.ID(recordName: "n1", zoneID: Self.zoneID)
            let tagBefore = try await phone.database.record(for: n1).recordChangeTag
            let again = await Self.fetchAfterVerify(phone)
            guard case .success(let resent) = again else { Issue.record("second sync failed: \(again)"); return }
            #expect(resent.changedRecords.map(\.recordID.recordName).sorted() == ["n1", "n2"])
            #expect(phone.handlers.reportedErrors.isEmpty)
            let stored = try await phone.database.record(for: n1)
            #expect(stored.recordChangeTag != tagBefore)
            #expect(stored["title"] as? String == "Milk")
        }
    }

    fileprivate static func fetchAfterVerify(_ device: Device) async -> CloudFetchResult {
        await withCheckedContinuation { continuation in
            device.sync.verifyAndSync { continuation.resume(returning: $0) }
        }
    }

    @Test("another device fetches what was uploaded, then only what changed since its token: an edit and a deletion; a fetch with nothing new reports nothing", arguments: TestEngine.all)
    func secondDevice(engine: TestEngine) async throws {
        try await Self.withSharedStore(on: engine) { storeLocation, suites in
            let phone = try Self.device(storeLocation: storeLocation, suite: suites[0])
            _ = await Self.start(phone, with: [Self.note("n1", title: "Milk"), Self.note("n2", title: "Eggs")])
            let tablet = try Self.device(storeLocation: storeLocation, suite: suites[1])
            let first = await Self.start(tablet)
            guard case .success(let all) = first else { Issue.record("start failed: \(first)"); return }
            #expect(Set(all.changedRecords.map(\.recordID.recordName)) == ["n1", "n2"])

            let quiet = await Self.fetch(tablet)
            guard case .success(let none) = quiet else { Issue.record("fetch failed: \(quiet)"); return }
            #expect(none.isEmpty)

            let milk = try await phone.database.record(for: Record.ID(recordName: "n1", zoneID: Self.zoneID))
            milk["title"] = "Oat milk"
            #expect(await Self.modify(phone, saving: [milk], deleting: [Record.ID(recordName: "n2", zoneID: Self.zoneID)]) == nil)
            #expect(phone.handlers.deletedNames == ["n2"])

            let later = await Self.fetch(tablet)
            guard case .success(let changes) = later else { Issue.record("fetch failed: \(later)"); return }
            #expect(changes.changedRecords.map { $0["title"] as? String } == ["Oat milk"])
            #expect(changes.deletedRecordIDs == [Record.ID(recordName: "n2", zoneID: Self.zoneID)])
            #expect(tablet.handlers.deletedNames == ["n2"])
        }
    }

    @Test("uploads use .changedKeys: a stale copy is written without serverRecordChanged, and only its changed field replaces the stored one", arguments: TestEngine.all)
    func staleCopyWithChangedKeys(engine: TestEngine) async throws {
        try await Self.withSharedStore(on: engine) { storeLocation, suites in
            let phone = try Self.device(storeLocation: storeLocation, suite: suites[0])
            _ = await Self.start(phone, with: [Self.note("n1", title: "Milk")])
            let tablet = try Self.device(storeLocation: storeLocation, suite: suites[1])
            _ = await Self.start(tablet)
            let id = Record.ID(recordName: "n1", zoneID: Self.zoneID)
            let tabletCopy = try await tablet.database.record(for: id)

            let phoneCopy = try await phone.database.record(for: id)
            phoneCopy["title"] = "Oat milk"
            #expect(await Self.modify(phone, saving: [phoneCopy]) == nil)

            tabletCopy["done"] = true
            #expect(await Self.modify(tablet, saving: [tabletCopy]) == nil)
            #expect(tablet.handlers.reportedErrors.isEmpty)

            let stored = try await tablet.database.record(for: id)
            #expect(stored["title"] as? String == "Oat milk")
            #expect(stored["done"] as? Bool == true)
        }
    }

    @Test("a container without a user is reported as the app's own CKError(.notAuthenticated), and nothing is made", arguments: TestEngine.all)
    func noAccount(engine: TestEngine) async throws {
        try await Self.withSharedStore(on: engine) { storeLocation, suites in
            let anonymous = Container.anonymous(identifier: Self.configuration.containerIdentifier, engine: try StoreLocation(storeLocation).openEngine())
            let defaults = try #require(UserDefaults(suiteName: suites[0]))
            let sync = CloudSync(defaults: defaults, configuration: Self.configuration, container: anonymous)
            let handlers = CloudSyncHandlers()
            handlers.attach(to: sync)

            sync.start(currentRecords: [Self.note("n1", title: "Milk")])
            let error = await handlers.nextError()
            #expect((error as? StratusError)?.code == .notAuthenticated)
            #expect(error.cloudKitUserActionNeeded?.code == .notAuthenticated)
            #expect(!defaults.bool(forKey: "CloudSync.CreatedCustomZone"))

            let alice = try Container(identifier: Self.configuration.containerIdentifier, store: storeLocation, userName: "alice")
            let missing = await #expect(throws: StratusError.self) { _ = try await alice.privateCloudDatabase.recordZone(for: Self.zoneID) }
            #expect(missing?.code == .zoneNotFound)
        }
    }

    @Test("disabling deletes the zone; the other device's next fetch learns it from the database changes and reports CKError(.userDeletedZone)", arguments: TestEngine.all)
    func disable(engine: TestEngine) async throws {
        try await Self.withSharedStore(on: engine) { storeLocation, suites in
            let phone = try Self.device(storeLocation: storeLocation, suite: suites[0])
            _ = await Self.start(phone, with: [Self.note("n1", title: "Milk")])
            let tablet = try Self.device(storeLocation: storeLocation, suite: suites[1])
            _ = await Self.start(tablet)

            let deleted: Error? = await withCheckedContinuation { continuation in
                phone.sync.disable { continuation.resume(returning: $0) }
            }
            #expect(deleted == nil)
            #expect(!phone.defaults.bool(forKey: "CloudSync.CreatedCustomZone"))
            let missing = await #expect(throws: StratusError.self) { _ = try await phone.database.recordZone(for: Self.zoneID) }
            #expect(missing?.code == .zoneNotFound)

            let result = await Self.fetch(tablet)
            guard case .failure(let error) = result else { Issue.record("the fetch succeeded: \(result)"); return }
            #expect((error as? StratusError)?.code == .userDeletedZone)
            #expect(tablet.handlers.reportedErrors.compactMap { ($0 as? StratusError)?.code } == [.userDeletedZone])
        }
    }

    @Test("a save into a zone deleted elsewhere fails with zoneNotFound inside a partial failure, which the app finds and reports", arguments: TestEngine.all)
    func saveIntoDeletedZone(engine: TestEngine) async throws {
        try await Self.withSharedStore(on: engine) { storeLocation, suites in
            let phone = try Self.device(storeLocation: storeLocation, suite: suites[0])
            _ = await Self.start(phone, with: [Self.note("n1", title: "Milk")])
            let tablet = try Self.device(storeLocation: storeLocation, suite: suites[1])
            _ = await Self.start(tablet)
            let _: Error? = await withCheckedContinuation { continuation in
                phone.sync.disable { continuation.resume(returning: $0) }
            }

            let error = await Self.modify(tablet, saving: [Self.note("n3", title: "Bread")])
            let failure = try #require(error as? StratusError)
            #expect(failure.code == .partialFailure)
            #expect(failure.partialErrorsByItemID?.values.compactMap { ($0 as? StratusError)?.code } == [.zoneNotFound])
            #expect(tablet.handlers.reportedErrors.compactMap { ($0 as? StratusError)?.code } == [.zoneNotFound])
        }
    }
}
