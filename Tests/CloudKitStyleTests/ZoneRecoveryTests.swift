import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// The recovery CloudKit's sync guides ask of every private-database writer, ported: a save that
// meets a missing zone (`zoneNotFound`, or `userDeletedZone` after the user cleared iCloud data)
// creates the zone with `CKModifyRecordZonesOperation` and its iOS 15 blocks, then sends the
// same records again. The CloudKit original is in the comments.

/// Pushes notes into one zone, creating it when CloudKit says it is missing.
final class RecoveringWriter: @unchecked Sendable {
    let database: Database
    let zoneID = RecordZone.ID(zoneName: "Journal", ownerName: CurrentUserDefaultName)
    private let lock = NSLock()
    private(set) var zonesCreated = 0
    private(set) var attempts = 0

    init(database: Database) { self.database = database }

    /// Whether an error means the zone must be made again: the error itself, or every item of a
    /// partial failure.
    // if let ckError = error as? CKError, ckError.code == .partialFailure,
    //    let errors = ckError.partialErrorsByItemID?.values { … }
    static func needsZone(_ error: Error) -> Bool {
        guard let ckError = error as? StratusError else { return false }
        switch ckError.code {
        case .zoneNotFound, .userDeletedZone:
            return true
        case .partialFailure:
            let errors = (ckError.partialErrorsByItemID ?? [:]).values.compactMap { $0 as? StratusError }
            return errors.contains { $0.code == .zoneNotFound || $0.code == .userDeletedZone }
                && errors.allSatisfy { [.zoneNotFound, .userDeletedZone, .batchRequestFailed].contains($0.code) }
        default:
            return false
        }
    }

    // let op = CKModifyRecordZonesOperation(recordZonesToSave: [CKRecordZone(zoneID: zoneID)], recordZoneIDsToDelete: nil)
    // op.perRecordZoneSaveBlock = { zoneID, result in … }
    // op.modifyRecordZonesResultBlock = { result in … }
    func createZone() async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
            let op = ModifyRecordZonesOperation(recordZonesToSave: [RecordZone(zoneID: zoneID)], recordZoneIDsToDelete: nil)
            op.perRecordZoneSaveBlock = { _, result in
                if case .success = result {
                    self.lock.lock(); self.zonesCreated += 1; self.lock.unlock()
                }
            }
            op.modifyRecordZonesResultBlock = { result in continuation.resume(with: result) }
            database.add(op)
        }
    }

    func push(_ notes: [String: String]) async throws -> [Record] {
        let records = notes.map { name, text -> Record in
            let record = Record(recordType: "Entry", recordID: Record.ID(recordName: name, zoneID: zoneID))
            record["text"] = text
            return record
        }
        do {
            return try await send(records)
        } catch where Self.needsZone(error) {
            try await createZone()
            return try await send(records)
        }
    }

    private func send(_ records: [Record]) async throws -> [Record] {
        lock.withLock { attempts += 1 }
        let (saveResults, _) = try await database.modifyRecords(saving: records, deleting: [], savePolicy: .changedKeys, atomically: true)
        return try saveResults.values.map { try $0.get() }
    }
}

@Suite("Recreating a missing zone and sending again, as CloudKit's sync guides ask")
struct ZoneRecoveryTests {
    @Test("a save into a missing zone fails with zoneNotFound; the writer makes the zone and the retry saves; again after the zone is deleted", arguments: TestEngine.all)
    func missingZone(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let writer = RecoveringWriter(database: container.privateCloudDatabase)
            let saved = try await writer.push(["monday": "Rain", "tuesday": "Sun"])
            #expect(saved.count == 2)
            #expect(writer.zonesCreated == 1)
            #expect(writer.attempts == 2)

            // The zone deleted elsewhere (another device, the user): the next push recovers again.
            try await container.privateCloudDatabase.deleteRecordZone(withID: writer.zoneID)
            let again = try await writer.push(["wednesday": "Wind"])
            #expect(again.map(\.recordID.recordName) == ["wednesday"])
            #expect(writer.zonesCreated == 2)
            let (matches, _) = try await container.privateCloudDatabase.records(matching: Query(recordType: "Entry", predicate: QueryPredicate(value: true)), inZoneWith: writer.zoneID)
            #expect(matches.map(\.0.recordName) == ["wednesday"])  // the deleted zone's entries went with it
        }
    }

    @Test("the errors the writer reads: zoneNotFound (CKErrorDomain 26) per item, inside partialFailure from the operation", arguments: TestEngine.all)
    func theErrorItReads(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let zoneID = RecordZone.ID(zoneName: "Nowhere")
            let record = Record(recordType: "Entry", recordID: Record.ID(recordName: "x", zoneID: zoneID))
            // The async modifyRecords answers each item's result when not atomic; the request
            // itself succeeds.
            let (results, _) = try await container.privateCloudDatabase.modifyRecords(saving: [record], deleting: [], savePolicy: .changedKeys, atomically: false)
            guard case .failure(let error)? = results[record.recordID] else {
                Issue.record("the save into a missing zone did not fail")
                return
            }
            #expect((error as? StratusError)?.code == .zoneNotFound)
            #expect((error as NSError).domain == "CKErrorDomain" && (error as NSError).code == 26)
            #expect(RecoveringWriter.needsZone(error))

            // Atomically (CloudKit's default), the request fails as a whole, as CloudKit documents
            // ("when atomically is true and one or more of the specified changes fail").
            do {
                _ = try await container.privateCloudDatabase.modifyRecords(saving: [record], deleting: [], savePolicy: .changedKeys, atomically: true)
                Issue.record("an atomic request that wrote nothing throws")
            } catch {
                #expect((error as? StratusError)?.code == .partialFailure)
                #expect(RecoveringWriter.needsZone(error))
            }

            // The operation form reports it inside a partial failure, as the writer also expects.
            let final: Error? = await withCheckedContinuation { continuation in
                let op = ModifyRecordsOperation(recordsToSave: [record], recordIDsToDelete: nil)
                op.modifyRecordsResultBlock = { result in
                    if case .failure(let error) = result { continuation.resume(returning: error) } else { continuation.resume(returning: nil) }
                }
                container.privateCloudDatabase.add(op)
            }
            #expect((final as? StratusError)?.code == .partialFailure)
            #expect(RecoveringWriter.needsZone(try #require(final)))
        }
    }
}
