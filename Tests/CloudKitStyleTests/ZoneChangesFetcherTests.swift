import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// The zone-changes download of SyncKit (mentrena/SyncKit: Operations/FetchZoneChangesOperation.swift
// and CloudKitSynchronizer+Sync.swift), ported mechanically. Its CloudKit habits that other
// ported code does not have: an `Operation` subclass that overrides `start()` and `cancel()` and
// runs a `CKFetchRecordZoneChangesOperation` it keeps in a `weak var`; one fetch for several
// zones with the older `ZoneOptions` (`previousServerChangeToken`, `desiredKeys`) and
// `fetchAllChanges = false`, fetching again only the zones that reported `moreComing`, each with
// the token its last batch ended at; records the device wrote itself skipped by a device
// identifier kept in each record, and a newer model detected by `record[key] as? Int`; per-zone
// results collected on a serial `DispatchQueue`; the final block's error ignored when it is
// `partialFailure` (`(error as NSError).code != CKError.partialFailure.rawValue`), because each
// zone's error came to `recordZoneFetchCompletionBlock`; and a zone that is gone recognised with
// `(error as NSError).code == CKError.zoneNotFound.rawValue || … userDeletedZone`. The CloudKit
// original is in the comments.

@Suite("SyncKit's zone-changes download, ported")
struct ZoneChangesFetcherTests {
    @Test("a zone with more changes than one batch is fetched again from its token until it has none", arguments: TestEngine.all)
    func moreComing(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let notes = RecordZone.ID(zoneName: "Notes", ownerName: CurrentUserDefaultName)
            let tags = RecordZone.ID(zoneName: "Tags", ownerName: CurrentUserDefaultName)
            _ = try await database.modifyRecordZones(saving: [RecordZone(zoneID: notes), RecordZone(zoneID: tags)], deleting: [])
            // 450 notes from another device (more than one 400-change batch), 2 tags, and one note
            // this device wrote itself.
            var records = (1...450).map { n -> Record in
                let record = Record(recordType: "Note", recordID: Record.ID(recordName: "note-\(n)", zoneID: notes))
                record[ZoneSynchronizer.deviceUUIDKey] = "other-device"
                record[ZoneSynchronizer.modelCompatibilityVersionKey] = 1
                return record
            }
            let mine = Record(recordType: "Note", recordID: Record.ID(recordName: "mine", zoneID: notes))
            mine[ZoneSynchronizer.deviceUUIDKey] = "this-device"
            records.append(mine)
            records += ["red", "blue"].map { Record(recordType: "Tag", recordID: Record.ID(recordName: $0, zoneID: tags)) }
            _ = try await database.modifyRecords(saving: records, deleting: [])

            let synchronizer = ZoneSynchronizer(database: database, deviceIdentifier: "this-device", modelVersion: 1)
            let error = await synchronizer.fetchZoneChanges([notes, tags])
            #expect(error == nil)
            #expect(synchronizer.downloaded[notes]?.count == 450)
            #expect(synchronizer.downloaded[notes]?.contains("mine") == false)
            #expect(synchronizer.downloaded[tags]?.sorted() == ["blue", "red"])
            // The notes zone needed a second fetch; the tags zone did not.
            #expect(synchronizer.fetchedZones == [[notes, tags], [notes]])

            // Nothing new since the kept tokens: one empty round.
            let deleted = Record.ID(recordName: "note-7", zoneID: notes)
            _ = try await database.modifyRecords(saving: [], deleting: [deleted])
            let again = ZoneSynchronizer(database: database, deviceIdentifier: "this-device", modelVersion: 1)
            again.activeZoneTokens = synchronizer.activeZoneTokens
            #expect(await again.fetchZoneChanges([notes, tags]) == nil)
            #expect(again.downloaded[notes, default: []].isEmpty)
            #expect(again.deletedIDs[notes] == [deleted])
            #expect(again.fetchedZones == [[notes, tags]])
        }
    }

    @Test("a deleted zone's error comes per zone, the final partialFailure is ignored, and the other zone is read", arguments: TestEngine.all)
    func deletedZone(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let kept = RecordZone.ID(zoneName: "Kept", ownerName: CurrentUserDefaultName)
            let gone = RecordZone.ID(zoneName: "Gone", ownerName: CurrentUserDefaultName)
            _ = try await database.modifyRecordZones(saving: [RecordZone(zoneID: kept), RecordZone(zoneID: gone)], deleting: [])
            _ = try await database.modifyRecords(saving: [Record(recordType: "Note", recordID: Record.ID(recordName: "a", zoneID: kept))], deleting: [])
            _ = try await database.modifyRecordZones(saving: [], deleting: [gone])

            let synchronizer = ZoneSynchronizer(database: database, deviceIdentifier: "this-device", modelVersion: 1)
            let error = await synchronizer.fetchZoneChanges([kept, gone])
            #expect(error == nil)
            #expect(synchronizer.downloaded[kept] == ["a"])
            #expect(synchronizer.deletedZoneIDs == [gone])
        }
    }

    @Test("a record from a newer model stops the download with the synchronizer's own error", arguments: TestEngine.all)
    func newerModel(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let notes = RecordZone.ID(zoneName: "Notes", ownerName: CurrentUserDefaultName)
            _ = try await database.modifyRecordZones(saving: [RecordZone(zoneID: notes)], deleting: [])
            let newer = Record(recordType: "Note", recordID: Record.ID(recordName: "v2", zoneID: notes))
            newer[ZoneSynchronizer.modelCompatibilityVersionKey] = 2
            _ = try await database.modifyRecords(saving: [newer], deleting: [])

            let synchronizer = ZoneSynchronizer(database: database, deviceIdentifier: "this-device", modelVersion: 1)
            let error = await synchronizer.fetchZoneChanges([notes])
            #expect(error as? ZoneSynchronizer.SyncError == .higherModelVersionFound)
        }
    }
}

// class FetchZoneChangesOperationZoneResult: NSObject {
//     var downloadedRecords = [CKRecord]()
//     var deletedRecordIDs = [CKRecord.ID]()
//     var serverChangeToken: CKServerChangeToken?
//     var error: Error?
//     var moreComing: Bool = false
// }
final class FetchZoneChangesOperationZoneResult: NSObject, @unchecked Sendable {
    var downloadedRecords = [Record]()
    var deletedRecordIDs = [Record.ID]()
    var serverChangeToken: ServerChangeToken?
    var error: Error?
    var moreComing: Bool = false
}

/// SyncKit's `CloudKitSynchronizerOperation`: an `Operation` that finishes when told to.
class SynchronizerOperation: Operation, @unchecked Sendable {
    var errorHandler: ((SynchronizerOperation, Error) -> Void)?
    private var done = false
    override var isAsynchronous: Bool { true }
    override var isFinished: Bool { done }

    func finish(error: Error?) {
        if let error { errorHandler?(self, error) }
        willChangeValue(forKey: "isFinished")
        done = true
        didChangeValue(forKey: "isFinished")
    }
}

/// FetchZoneChangesOperation: one CKFetchRecordZoneChangesOperation for several zones.
final class FetchZoneChangesOperation: SynchronizerOperation, @unchecked Sendable {
    let database: Database
    let zoneIDs: [RecordZone.ID]
    var zoneChangeTokens: [RecordZone.ID: ServerChangeToken]
    let modelVersion: Int
    let ignoreDeviceIdentifier: String?
    let completion: ([RecordZone.ID: FetchZoneChangesOperationZoneResult]) -> Void
    let desiredKeys: [String]?
    var zoneResults = [RecordZone.ID: FetchZoneChangesOperationZoneResult]()
    let dispatchQueue = DispatchQueue(label: "fetchZoneChangesDispatchQueue")
    weak var internalOperation: FetchRecordZoneChangesOperation?

    init(database: Database, zoneIDs: [RecordZone.ID], zoneChangeTokens: [RecordZone.ID: ServerChangeToken], modelVersion: Int,
         ignoreDeviceIdentifier: String?, desiredKeys: [String]?,
         completion: @escaping ([RecordZone.ID: FetchZoneChangesOperationZoneResult]) -> Void) {
        self.database = database
        self.zoneIDs = zoneIDs
        self.zoneChangeTokens = zoneChangeTokens
        self.modelVersion = modelVersion
        self.ignoreDeviceIdentifier = ignoreDeviceIdentifier
        self.desiredKeys = desiredKeys
        self.completion = completion
        super.init()
    }

    override func start() {
        for zone in zoneIDs {
            zoneResults[zone] = FetchZoneChangesOperationZoneResult()
        }
        performFetchOperation(with: zoneIDs)
    }

    // func performFetchOperation(with zones: [CKRecordZone.ID]) {
    //     var higherModelVersionFound = false
    //     var zoneOptions = [CKRecordZone.ID: CKFetchRecordZoneChangesOperation.ZoneOptions]()
    //     for zoneID in zones {
    //         let options = CKFetchRecordZoneChangesOperation.ZoneOptions()
    //         options.previousServerChangeToken = zoneChangeTokens[zoneID]
    //         options.desiredKeys = desiredKeys
    //         zoneOptions[zoneID] = options
    //     }
    //     let operation = CKFetchRecordZoneChangesOperation(recordZoneIDs: zones, optionsByRecordZoneID: zoneOptions)
    //     operation.fetchAllChanges = false
    //     operation.recordChangedBlock = { record in
    //         let ignoreDeviceIdentifier: String = self.ignoreDeviceIdentifier ?? " "
    //         self.dispatchQueue.async {
    //             let isShare = record is CKShare
    //             if ignoreDeviceIdentifier != record[CloudKitSynchronizer.deviceUUIDKey] as? String || isShare {
    //                 if !isShare, let version = record[CloudKitSynchronizer.modelCompatibilityVersionKey] as? Int,
    //                     self.modelVersion > 0 && version > self.modelVersion {
    //                     higherModelVersionFound = true
    //                 } else {
    //                     self.zoneResults[record.recordID.zoneID]?.downloadedRecords.append(record)
    //                 }
    //             }
    //         }
    //     }
    //     operation.recordWithIDWasDeletedBlock = { recordID, recordType in … deletedRecordIDs.append(recordID) }
    //     operation.recordZoneFetchCompletionBlock = { zoneID, serverChangeToken, clientChangeTokenData, moreComing, recordZoneError in
    //         self.dispatchQueue.async {
    //             let results = self.zoneResults[zoneID]!
    //             results.error = recordZoneError
    //             results.serverChangeToken = serverChangeToken
    //             if !higherModelVersionFound { if moreComing { results.moreComing = true } }
    //         }
    //     }
    //     operation.fetchRecordZoneChangesCompletionBlock = { operationError in
    //         self.dispatchQueue.async {
    //             if let error = operationError,
    //                 (error as NSError).code != CKError.partialFailure.rawValue { // Partial errors are returned per zone
    //                 self.finish(error: error)
    //             } else if higherModelVersionFound {
    //                 self.finish(error: CloudKitSynchronizer.SyncError.higherModelVersionFound)
    //             } else if self.isCancelled {
    //                 self.finish(error: CloudKitSynchronizer.SyncError.cancelled)
    //             } else {
    //                 self.completion(self.zoneResults)
    //                 self.finish(error: nil)
    //             }
    //         }
    //     }
    //     internalOperation = operation
    //     self.database.add(operation)
    // }
    func performFetchOperation(with zones: [RecordZone.ID]) {
        // SyncKit's `var higherModelVersionFound`, which its blocks set and read on dispatchQueue.
        let higherModelVersionFound = Collected(false)
        var zoneOptions = [RecordZone.ID: FetchRecordZoneChangesOperation.ZoneOptions]()
        for zoneID in zones {
            let options = FetchRecordZoneChangesOperation.ZoneOptions()
            options.previousServerChangeToken = zoneChangeTokens[zoneID]
            options.desiredKeys = desiredKeys
            zoneOptions[zoneID] = options
        }
        let operation = FetchRecordZoneChangesOperation(recordZoneIDs: zones, optionsByRecordZoneID: zoneOptions)
        operation.fetchAllChanges = false
        operation.recordChangedBlock = { record in
            let ignoreDeviceIdentifier: String = self.ignoreDeviceIdentifier ?? " "
            self.dispatchQueue.async {
                if ignoreDeviceIdentifier != record[ZoneSynchronizer.deviceUUIDKey] as? String {
                    if let version = record[ZoneSynchronizer.modelCompatibilityVersionKey] as? Int,
                        self.modelVersion > 0 && version > self.modelVersion {
                        higherModelVersionFound.value = true
                    } else {
                        self.zoneResults[record.recordID.zoneID]?.downloadedRecords.append(record)
                    }
                }
            }
        }
        operation.recordWithIDWasDeletedBlock = { recordID, recordType in
            self.dispatchQueue.async {
                self.zoneResults[recordID.zoneID]?.deletedRecordIDs.append(recordID)
            }
        }
        operation.recordZoneFetchCompletionBlock = {
            zoneID, serverChangeToken, clientChangeTokenData, moreComing, recordZoneError in
            self.dispatchQueue.async {
                let results = self.zoneResults[zoneID]!
                results.error = recordZoneError
                results.serverChangeToken = serverChangeToken
                if !higherModelVersionFound.value {
                    if moreComing {
                        results.moreComing = true
                    }
                }
            }
        }
        operation.fetchRecordZoneChangesCompletionBlock = { operationError in
            self.dispatchQueue.async {
                if let error = operationError,
                    (error as NSError).code != StratusError.partialFailure.rawValue { // Partial errors are returned per zone
                    self.finish(error: error)
                } else if higherModelVersionFound.value {
                    self.finish(error: ZoneSynchronizer.SyncError.higherModelVersionFound)
                } else if self.isCancelled {
                    self.finish(error: ZoneSynchronizer.SyncError.cancelled)
                } else {
                    self.completion(self.zoneResults)
                    self.finish(error: nil)
                }
            }
        }
        internalOperation = operation
        self.database.add(operation)
    }

    override func cancel() {
        internalOperation?.cancel()
        super.cancel()
    }
}

/// The part of SyncKit's CloudKitSynchronizer that downloads zone changes.
final class ZoneSynchronizer: @unchecked Sendable {
    static let deviceUUIDKey = "QSCloudKitDeviceUUIDKey"
    static let modelCompatibilityVersionKey = "QSCloudKitModelCompatibilityVersionKey"
    enum SyncError: Error, Equatable { case cancelled, higherModelVersionFound }

    let database: Database
    let deviceIdentifier: String
    let compatibilityVersion: Int
    let dispatchQueue = DispatchQueue(label: "QSCloudKitSynchronizer")
    let operationQueue = OperationQueue()
    var activeZoneTokens = [RecordZone.ID: ServerChangeToken]()
    var downloaded = [RecordZone.ID: [String]]()
    var deletedIDs = [RecordZone.ID: [Record.ID]]()
    var deletedZoneIDs = [RecordZone.ID]()
    var fetchedZones = [[RecordZone.ID]]()

    init(database: Database, deviceIdentifier: String, modelVersion: Int) {
        self.database = database
        self.deviceIdentifier = deviceIdentifier
        self.compatibilityVersion = modelVersion
        operationQueue.maxConcurrentOperationCount = 1
    }

    func fetchZoneChanges(_ zoneIDs: [RecordZone.ID]) async -> Error? {
        await withCheckedContinuation { continuation in
            fetchZoneChanges(zoneIDs) { error in continuation.resume(returning: error) }
        }
    }

    // func fetchZoneChanges(_ zoneIDs: [CKRecordZone.ID], completion: @escaping (Error?)->()) {
    //     let operation = FetchZoneChangesOperation(database: database, zoneIDs: zoneIDs, zoneChangeTokens: activeZoneTokens,
    //                                               modelVersion: compatibilityVersion, ignoreDeviceIdentifier: deviceIdentifier,
    //                                               desiredKeys: nil) { (zoneResults) in
    //         self.dispatchQueue.async {
    //             var pendingZones = [CKRecordZone.ID]()
    //             var error: Error? = nil
    //             for (zoneID, result) in zoneResults {
    //                 if let resultError = result.error {
    //                     if (self.isZoneNotFoundOrDeletedError(error)) { self.notifyProviderForDeletedZoneIDs([zoneID]) }
    //                     else { error = resultError; break }
    //                 } else {
    //                     self.activeZoneTokens[zoneID] = result.serverChangeToken
    //                     adapter?.saveChanges(in: result.downloadedRecords)
    //                     adapter?.deleteRecords(with: result.deletedRecordIDs)
    //                     if result.moreComing { pendingZones.append(zoneID) }
    //                 }
    //             }
    //             if pendingZones.count > 0 && error == nil { self.fetchZoneChanges(pendingZones, completion: completion) }
    //             else { completion(error) }
    //         }
    //     }
    //     runOperation(operation)
    // }
    func fetchZoneChanges(_ zoneIDs: [RecordZone.ID], completion: @escaping (Error?) -> Void) {
        fetchedZones.append(zoneIDs)
        let operation = FetchZoneChangesOperation(
            database: database, zoneIDs: zoneIDs, zoneChangeTokens: activeZoneTokens, modelVersion: compatibilityVersion,
            ignoreDeviceIdentifier: deviceIdentifier, desiredKeys: nil
        ) { (zoneResults) in
            self.dispatchQueue.async {
                var pendingZones = [RecordZone.ID]()
                var error: Error? = nil
                // SyncKit walks a dictionary; the zones are taken in the order they were asked
                // for here, so that the rounds the test reads are in a known order.
                for zoneID in zoneIDs {
                    guard let result = zoneResults[zoneID] else { continue }
                    if let resultError = result.error {
                        // SyncKit passes `error` (still nil) here, not `resultError`; the port
                        // passes the zone's error, as the function's name intends.
                        if self.isZoneNotFoundOrDeletedError(resultError) {
                            self.deletedZoneIDs.append(zoneID)
                        } else {
                            error = resultError
                            break
                        }
                    } else {
                        self.activeZoneTokens[zoneID] = result.serverChangeToken
                        self.downloaded[zoneID, default: []] += result.downloadedRecords.map(\.recordID.recordName)
                        self.deletedIDs[zoneID, default: []] += result.deletedRecordIDs
                        if result.moreComing {
                            pendingZones.append(zoneID)
                        }
                    }
                }
                if pendingZones.count > 0 && error == nil {
                    self.fetchZoneChanges(pendingZones, completion: completion)
                } else {
                    completion(error)
                }
            }
        }
        runOperation(operation, completion: completion)
    }

    // func runOperation(_ operation: CloudKitSynchronizerOperation) {
    //     operation.errorHandler = { [weak self] operation, error in self?.finishSynchronization(error: error) }
    //     currentOperation = operation
    //     operationQueue.addOperation(operation)
    // }
    func runOperation(_ operation: SynchronizerOperation, completion: @escaping (Error?) -> Void) {
        operation.errorHandler = { operation, error in
            completion(error)
        }
        operationQueue.addOperation(operation)
    }

    // func isZoneNotFoundOrDeletedError(_ error: Error?) -> Bool {
    //     if let error = error {
    //         let nserror = error as NSError
    //         return nserror.code == CKError.zoneNotFound.rawValue || nserror.code == CKError.userDeletedZone.rawValue
    //     } else { return false }
    // }
    func isZoneNotFoundOrDeletedError(_ error: Error?) -> Bool {
        if let error = error {
            let nserror = error as NSError
            return nserror.code == StratusError.zoneNotFound.rawValue || nserror.code == StratusError.userDeletedZone.rawValue
        } else {
            return false
        }
    }
}
