import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// SyncKit's upload side (mentrena/SyncKit, MIT, Copyright (c) Manuel Entrena), ported
// mechanically: SyncKit/Classes/QSSynchronizer/Operations/ModifyRecordsOperation.swift (commit
// 5a7b914a160054256a227bace05554463a2e8605) and the upload half of CloudKitSynchronizer+Sync.swift
// (079f945d13aded63f903bfcff1710da24a9a22e2), with `addMetadata(to:)` and the keys of
// CloudKitSynchronizer.swift. Its download half is ported in ZoneChangesFetcherTests.swift, its
// database adapter, subscriptions and `CloudKitSynchronizerOperation` in
// SyncKitSubscriptionsTests.swift (used here as they are).
//
// Its CloudKit habits that other ported code does not have: a zone made on first upload only
// when fetching it fails with `zoneNotFound` or `userDeletedZone` (read as `(error as
// NSError).code == CKError.zoneNotFound.rawValue`); records sent `batchSize` at a time (200 to
// start), the batch size halved when a request fails with `limitExceeded` — itself or inside a
// `partialFailure`, read as `userInfo[CKPartialErrorsByItemIDKey] as? [CKRecord.ID: NSError]` — and
// grown by 5 after each success; every record stamped with the device's identifier and the
// model's compatibility version; deletions sent the same way, the IDs reported back from the
// completion block's `deletedRecordIDs ?? []` even when the request failed; and a wrapper
// operation that collects, from the older `perRecordCompletionBlock`, the server's version of
// each record that conflicted (`error.userInfo[CKRecordChangedErrorServerRecordKey] as? CKRecord`).
//
// What the port changes, besides the README's substitutions: SyncKit's `ModifyRecordsOperation`
// is `SyncKitModifyRecordsOperation` here, as Stratus has a `ModifyRecordsOperation` (CloudKit's
// is `CKModifyRecordsOperation`). `ModelAdapter` (an `@objc` protocol of 20 members over Core
// Data or Realm) is cut down to the six the upload calls, and the synchronizer to the state the
// upload reads; `debugPrint` lines are kept.

// MARK: - The parts of ModelAdapter and CloudKitSynchronizer the upload uses

protocol ModelAdapter: AnyObject {
    var recordZoneID: RecordZone.ID { get }
    var serverChangeToken: ServerChangeToken? { get }
    func recordsToUpload(limit: Int) -> [Record]
    func didUpload(savedRecords: [Record])
    func recordIDsMarkedForDeletion(limit: Int) -> [Record.ID]
    func didDelete(recordIDs: [Record.ID])
}

final class CloudKitSynchronizer: @unchecked Sendable {
    static let defaultBatchSize = 200
    static let deviceUUIDKey = "QSCloudKitDeviceUUIDKey"
    static let modelCompatibilityVersionKey = "QSCloudKitModelCompatibilityVersionKey"

    let database: CloudKitDatabaseAdapter
    let deviceIdentifier: String
    var compatibilityVersion: Int = 0
    var batchSize: Int = CloudKitSynchronizer.defaultBatchSize
    var modelAdapters: [ModelAdapter] = []
    let dispatchQueue = DispatchQueue(label: "QSCloudKitSynchronizer")
    weak var currentOperation: Operation?

    init(database: CloudKitDatabaseAdapter, deviceIdentifier: String) {
        self.database = database
        self.deviceIdentifier = deviceIdentifier
    }

    func addMetadata(to records: [Record]) {
        records.forEach {
            $0[CloudKitSynchronizer.deviceUUIDKey] = self.deviceIdentifier
            if self.compatibilityVersion > 0 {
                $0[CloudKitSynchronizer.modelCompatibilityVersionKey] = self.compatibilityVersion
            }
        }
    }
}

// MARK: - Operations/ModifyRecordsOperation.swift

class SyncKitModifyRecordsOperation: CloudKitSynchronizerOperation, @unchecked Sendable {
    let database: CloudKitDatabaseAdapter
    let records: [Record]?
    let recordIDsToDelete: [Record.ID]?

    let completion: ([Record]?, [Record.ID]?, [Record], Error?) -> ()

    init(database: CloudKitDatabaseAdapter, records: [Record]?, recordIDsToDelete: [Record.ID]?, completion: @escaping ([Record]?, [Record.ID]?, [Record], Error?) -> ()) {
        self.database = database
        self.records = records
        self.recordIDsToDelete = recordIDsToDelete
        self.completion = completion
    }

    private var conflictedRecords = [Record]()

    let dispatchQueue = DispatchQueue(label: "modifyRecordsDispatchQueue")
    weak var internalOperation: ModifyRecordsOperation?

    override func start() {
        let operation = ModifyRecordsOperation(recordsToSave: records, recordIDsToDelete: recordIDsToDelete)

        operation.perRecordCompletionBlock = { record, error in
            if let error = error as? StratusError,
                error.code == StratusError.serverRecordChanged,
                let serverRecord = error.userInfo[RecordChangedErrorServerRecordKey] as? Record{
                self.conflictedRecords.append(serverRecord)
            }
        }
        operation.modifyRecordsCompletionBlock = { saved, deleted, operationError in

            self.completion(saved, deleted, self.conflictedRecords, operationError)
        }

        internalOperation = operation
        database.add(operation)
    }

    override func cancel() {
        internalOperation?.cancel()
        super.cancel()
    }
}

// MARK: - CloudKitSynchronizer+Sync.swift: utilities

extension CloudKitSynchronizer {

    func isServerRecordChangedError(_ error: NSError) -> Bool {

        if error.code == StratusError.partialFailure.rawValue,
            let errorsByItemID = error.userInfo[PartialErrorsByItemIDKey] as? [Record.ID: NSError],
            errorsByItemID.values.contains(where: { (error) -> Bool in
                return error.code == StratusError.serverRecordChanged.rawValue
            }) {

            return true
        }

        return error.code == StratusError.serverRecordChanged.rawValue
    }

    func isZoneNotFoundOrDeletedError(_ error: Error?) -> Bool {
        if let error = error {
            let nserror = error as NSError
            return nserror.code == StratusError.zoneNotFound.rawValue || nserror.code == StratusError.userDeletedZone.rawValue
        } else {
            return false
        }
    }

    func isLimitExceededError(_ error: NSError) -> Bool {

        if error.code == StratusError.partialFailure.rawValue,
            let errorsByItemID = error.userInfo[PartialErrorsByItemIDKey] as? [Record.ID: NSError],
            errorsByItemID.values.contains(where: { (error) -> Bool in
                return error.code == StratusError.limitExceeded.rawValue
            }) {

            return true
        }

        return error.code == StratusError.limitExceeded.rawValue
    }

    func sequential<T>(objects: [T], closure: @escaping (T, @escaping (Error?)->())->(), final: @escaping  (Error?)->()) {

        guard let first = objects.first else {
            final(nil)
            return
        }

        closure(first) { error in
            guard error == nil else {
                final(error)
                return
            }

            var remaining = objects
            remaining.removeFirst()
            self.sequential(objects: remaining, closure: closure, final: final)
        }
    }

    func needsZoneSetup(adapter: ModelAdapter) -> Bool {
        return adapter.serverChangeToken == nil
    }
}

// MARK: - CloudKitSynchronizer+Sync.swift: upload changes

extension CloudKitSynchronizer {

    func uploadChanges(completion: @escaping (Error?)->()) {

        sequential(objects: modelAdapters, closure: setupZoneAndUploadRecords) { (error) in
            guard error == nil else { completion(error); return }

            self.sequential(objects: self.modelAdapters, closure: self.uploadDeletions, final: completion)
        }
    }

    func setupZoneAndUploadRecords(adapter: ModelAdapter, completion: @escaping (Error?)->()) {
        setupRecordZoneIfNeeded(adapter: adapter) { (error) in

            guard error == nil else { completion(error); return }

            self.uploadRecords(adapter: adapter, completion: { (error) in
                guard error == nil else { completion(error); return }

                completion(nil)
            })
        }
    }

    func setupRecordZoneIfNeeded(adapter: ModelAdapter, completion: @escaping (Error?)->()) {
        guard needsZoneSetup(adapter: adapter) else {
            completion(nil)
            return
        }

        setupRecordZoneID(adapter.recordZoneID, completion: completion)
    }

    func setupRecordZoneID(_ zoneID: RecordZone.ID, completion: @escaping (Error?)->()) {
        database.fetch(withRecordZoneID: zoneID) { (zone, error) in
            if self.isZoneNotFoundOrDeletedError(error) {
                let newZone = RecordZone(zoneID: zoneID)
                self.database.save(zone: newZone, completionHandler: { (zone, error) in
                    if error == nil && zone != nil {
                        debugPrint("QSCloudKitSynchronizer >> Created custom record zone: \(newZone.description)")
                    }
                    completion(error)
                })
            } else {
                completion(error)
            }
        }
    }

    func uploadRecords(adapter: ModelAdapter,  completion: @escaping (Error?)->()) {
        let records = adapter.recordsToUpload(limit: batchSize)
        let recordCount = records.count
        let requestedBatchSize = batchSize
        guard recordCount > 0 else { completion(nil); return }

        //Add metadata: device UUID and model version
        addMetadata(to: records)

        let modifyRecordsOperation = ModifyRecordsOperation(recordsToSave: records, recordIDsToDelete: nil)

        modifyRecordsOperation.modifyRecordsCompletionBlock = { savedRecords, deletedRecordIDs, operationError in

            self.dispatchQueue.async {

                if let error = operationError {
                    if self.isLimitExceededError(error as NSError) {
                        self.batchSize = self.batchSize / 2
                    }
                    completion(error)
                } else {
                    if self.batchSize < CloudKitSynchronizer.defaultBatchSize {
                        self.batchSize = self.batchSize + 5
                    }

                    adapter.didUpload(savedRecords: savedRecords ?? [])

                    debugPrint("QSCloudKitSynchronizer >> Uploaded \(savedRecords?.count ?? 0) records")

                    if recordCount >= requestedBatchSize {
                        self.uploadRecords(adapter: adapter, completion: completion)
                    } else {
                        completion(nil)
                    }
                }
            }
        }

        currentOperation = modifyRecordsOperation
        database.add(modifyRecordsOperation)
    }

    func uploadDeletions(adapter: ModelAdapter, completion: @escaping (Error?)->()) {

        let recordIDs = adapter.recordIDsMarkedForDeletion(limit: batchSize)
        let recordCount = recordIDs.count

        guard recordCount > 0 else {
            completion(nil)
            return
        }

        let modifyRecordsOperation = ModifyRecordsOperation(recordsToSave: nil, recordIDsToDelete: recordIDs)
        modifyRecordsOperation.modifyRecordsCompletionBlock = { savedRecords, deletedRecordIDs, operationError in
            self.dispatchQueue.async {
                debugPrint("QSCloudKitSynchronizer >> Deleted \(recordCount) records")

                if let error = operationError,
                    self.isLimitExceededError(error as NSError) {

                    self.batchSize = self.batchSize / 2
                } else if self.batchSize < CloudKitSynchronizer.defaultBatchSize {
                    self.batchSize = self.batchSize + 5
                }

                adapter.didDelete(recordIDs: deletedRecordIDs ?? [])

                completion(operationError)
            }
        }

        currentOperation = modifyRecordsOperation
        database.add(modifyRecordsOperation)
    }
}

// MARK: - The app's side: a model adapter over an in-memory list of notes

/// A model adapter as an app writes one: local notes, which of them changed since the last
/// upload, which were deleted; what the synchronizer reports back is kept for the tests.
final class NotesModelAdapter: ModelAdapter, @unchecked Sendable {
    let recordZoneID: RecordZone.ID
    var serverChangeToken: ServerChangeToken?
    private var pendingUploads: [(name: String, text: Data)]
    private var pendingDeletions: [String]
    private(set) var uploadedBatches: [[Record]] = []
    private(set) var deletedIDs: [Record.ID] = []

    init(zoneID: RecordZone.ID, notes: [(name: String, text: Data)], deletions: [String] = []) {
        recordZoneID = zoneID
        pendingUploads = notes
        pendingDeletions = deletions
    }

    func recordsToUpload(limit: Int) -> [Record] {
        pendingUploads.prefix(limit).map { note in
            let record = Record(recordType: "Note", recordID: Record.ID(recordName: note.name, zoneID: recordZoneID))
            record["text"] = note.text
            return record
        }
    }

    func didUpload(savedRecords: [Record]) {
        uploadedBatches.append(savedRecords)
        let names = Set(savedRecords.map(\.recordID.recordName))
        pendingUploads.removeAll { names.contains($0.name) }
    }

    func recordIDsMarkedForDeletion(limit: Int) -> [Record.ID] {
        pendingDeletions.prefix(limit).map { Record.ID(recordName: $0, zoneID: recordZoneID) }
    }

    func didDelete(recordIDs: [Record.ID]) {
        deletedIDs += recordIDs
        let names = Set(recordIDs.map(\.recordName))
        pendingDeletions.removeAll { names.contains($0) }
    }
}

// MARK: - Tests

@Suite("SyncKit's upload, ported")
struct SyncKitUploadTests {
    private let zoneID = RecordZone.ID(zoneName: "QSCloudKitCustomZoneName", ownerName: CurrentUserDefaultName)

    private func notes(_ count: Int) -> [(name: String, text: Data)] {
        (0..<count).map { (name: "note-\($0)", text: Data("text \($0)".utf8)) }
    }

    private func upload(_ synchronizer: CloudKitSynchronizer) async -> Error? {
        await awaitCallback { done in synchronizer.uploadChanges { done($0) } }
    }

    @Test("the zone is made on first upload; records go batchSize at a time, stamped with the device and model version", arguments: TestEngine.all)
    func uploadsInBatches(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let synchronizer = CloudKitSynchronizer(database: DefaultCloudKitDatabaseAdapter(database: database), deviceIdentifier: "device-A")
            synchronizer.compatibilityVersion = 2
            synchronizer.batchSize = 2
            let adapter = NotesModelAdapter(zoneID: zoneID, notes: notes(5))
            synchronizer.modelAdapters = [adapter]

            #expect(await upload(synchronizer) == nil)
            // A first full batch of 2, then the batch grows by 5 and the 3 left fit in it.
            #expect(adapter.uploadedBatches.map(\.count) == [2, 3])
            #expect(synchronizer.batchSize == 12)
            #expect(adapter.uploadedBatches.joined().allSatisfy { $0.recordChangeTag != nil })

            let zone = try await database.recordZone(for: zoneID)
            #expect(zone.zoneID == zoneID)
            let stored = try await database.records(for: (0..<5).map { Record.ID(recordName: "note-\($0)", zoneID: zoneID) })
            for (id, result) in stored {
                let record = try result.get()
                #expect(record[CloudKitSynchronizer.deviceUUIDKey] as? String == "device-A")
                #expect(record[CloudKitSynchronizer.modelCompatibilityVersionKey] as? Int == 2)
                #expect(record["text"] as? Data == Data("text \(id.recordName.dropFirst(5))".utf8))
            }
        }
    }

    @Test("a record over the size limit fails the request with limitExceeded inside partialFailure, and the batch size halves", arguments: TestEngine.all)
    func limitExceededHalvesTheBatch(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let synchronizer = CloudKitSynchronizer(database: DefaultCloudKitDatabaseAdapter(database: database), deviceIdentifier: "device-A")
            let oversized = (name: "big", text: Data(count: 1_100_000))
            let adapter = NotesModelAdapter(zoneID: zoneID, notes: [oversized] + notes(2))
            synchronizer.modelAdapters = [adapter]

            let error = try #require(await upload(synchronizer))
            #expect((error as NSError).code == StratusError.partialFailure.rawValue)
            #expect(synchronizer.isLimitExceededError(error as NSError))
            #expect(!synchronizer.isServerRecordChangedError(error as NSError))
            #expect(synchronizer.batchSize == CloudKitSynchronizer.defaultBatchSize / 2)
            #expect(adapter.uploadedBatches.isEmpty, "the failed batch is not reported as uploaded")
        }
    }

    @Test("deletions go after the uploads; the deleted IDs come back to the adapter", arguments: TestEngine.all)
    func deletionsFollowUploads(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let synchronizer = CloudKitSynchronizer(database: DefaultCloudKitDatabaseAdapter(database: database), deviceIdentifier: "device-A")
            let first = NotesModelAdapter(zoneID: zoneID, notes: notes(3))
            synchronizer.modelAdapters = [first]
            #expect(await upload(synchronizer) == nil)

            let second = NotesModelAdapter(zoneID: zoneID, notes: [], deletions: ["note-0", "note-2"])
            second.serverChangeToken = try await database.recordZoneChanges(inZoneWith: zoneID, since: nil).changeToken
            synchronizer.modelAdapters = [second]
            #expect(await upload(synchronizer) == nil)
            #expect(Set(second.deletedIDs.map(\.recordName)) == ["note-0", "note-2"])

            let left = try await database.records(matching: Query(recordType: "Note", predicate: QueryPredicate(value: true)), inZoneWith: zoneID)
            #expect(left.matchResults.map(\.0.recordName) == ["note-1"])
        }
    }

    @Test("a stale save conflicts: the wrapper collects the server's records, and the error reads as serverRecordChanged", arguments: TestEngine.all)
    func conflictsCollectServerRecords(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let adapter = DefaultCloudKitDatabaseAdapter(database: database)
            let synchronizer = CloudKitSynchronizer(database: adapter, deviceIdentifier: "device-A")
            let notesAdapter = NotesModelAdapter(zoneID: zoneID, notes: notes(1))
            synchronizer.modelAdapters = [notesAdapter]
            #expect(await upload(synchronizer) == nil)

            // Two devices hold the same version; the other one saves first.
            let id = Record.ID(recordName: "note-0", zoneID: zoneID)
            let mine = try await database.record(for: id)
            let theirs = try await database.record(for: id)
            theirs["text"] = Data("theirs".utf8)
            _ = try await database.save(theirs)

            mine["text"] = Data("mine".utf8)
            let added = Record(recordType: "Note", recordID: Record.ID(recordName: "note-new", zoneID: zoneID))
            added["text"] = Data("new".utf8)
            let (saved, conflicted, error): ([Record]?, [Record], Error?) = await awaitCallback { done in
                let operation = SyncKitModifyRecordsOperation(database: adapter, records: [mine, added], recordIDsToDelete: nil) { saved, _, conflicted, error in
                    done((saved, conflicted, error))
                }
                operation.start()
            }
            #expect(conflicted.map(\.recordID) == [id])
            #expect(conflicted.first?["text"] as? Data == Data("theirs".utf8))
            let failure = try #require(error)
            #expect(synchronizer.isServerRecordChangedError(failure as NSError))
            #expect(!synchronizer.isLimitExceededError(failure as NSError))
            // The zone is atomic: the new record was not saved either.
            #expect(saved?.isEmpty ?? true)
            await #expect(throws: StratusError.self) { try await database.record(for: added.recordID) }
        }
    }
}
