import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// The zone-changes operation of a radio app (Damien Glancy's Radio:
// FetchRecordZoneChangesOperation.swift), ported mechanically. A `final class` subclass of
// `CKFetchRecordZoneChangesOperation` with the same name as CloudKit's class once the prefix is
// dropped, so it is declared here under the app's own name only after renaming it (README:
// "Dropping the CK prefix can meet a type of the app's own"); it overrides `main()` to set its
// older blocks on itself with `[unowned self]` just before calling `super.main()`, reads
// `optionsByRecordZoneID?.count` and `database?.databaseScope.rawValue`, and stores each zone's
// token through a computed property with a setter on `CKRecordZone.ID` (here `nonmutating`, as
// README says). os_log becomes the shared `SampleLog`. The CloudKit original is in the comments.

/// Where the app keeps each zone's token: `UserDefaults` in the app, a dictionary here.
final class ZoneTokenStore: @unchecked Sendable {
    static let shared = ZoneTokenStore()
    private let lock = NSLock()
    private var tokens: [RecordZone.ID: ServerChangeToken] = [:]
    subscript(zoneID: RecordZone.ID) -> ServerChangeToken? {
        get { lock.withLock { tokens[zoneID] } }
        set { lock.withLock { tokens[zoneID] = newValue } }
    }
}

// extension CKRecordZone.ID {
//   var lastUsedChangeToken: CKServerChangeToken? {
extension RecordZone.ID {
    var lastUsedChangeToken: ServerChangeToken? {
        get { ZoneTokenStore.shared[self] }
        set { ZoneTokenStore.shared[self] = newValue }
    }
}

// final class FetchRecordZoneChangesOperation: CKFetchRecordZoneChangesOperation {
final class RadioFetchRecordZoneChangesOperation: FetchRecordZoneChangesOperation, @unchecked Sendable {
    var changedRecords: [Record] = []
    var deletedRecordIDs: [Record.ID] = []
    let log = SampleLog()

    override func main() {
        if let count = optionsByRecordZoneID?.count {
            log.append("FetchRecordZoneChangesOperation started for \(count) zone(s).")
        }
        setOperationBlocks()
        super.main()
    }

    private func setOperationBlocks() {
        recordChangedBlock = { [unowned self] (record: Record) -> Void in
            self.log.append("FetchRecordZoneChangesOperation record changed: \(record.recordID.recordName)")
            self.changedRecords.append(record)
        }

        recordWithIDWasDeletedBlock = { [unowned self] (recordID: Record.ID, recordType: String) -> Void in
            self.log.append("FetchRecordZoneChangesOperation record deleted: \(recordID.recordName)")
            self.deletedRecordIDs.append(recordID)
        }

        // recordZoneFetchCompletionBlock = { [unowned self] (recordZoneID: CKRecordZone.ID, serverChangeToken: CKServerChangeToken?,
        //                                                     clientChangeTokenData: Data?, _: Bool, error: Error?) -> Void in
        recordZoneFetchCompletionBlock = { [unowned self] (recordZoneID: RecordZone.ID, serverChangeToken: ServerChangeToken?, clientChangeTokenData: Data?, _: Bool, error: Error?) -> Void in
            if let error = error {
                self.log.append("FetchRecordZoneChangesOperation error: \(error.localizedDescription).")
            }
            if let database = self.database {
                self.log.append("FetchRecordZoneChangesOperation new server change token received for database (type=\(database.databaseScope.rawValue)).")
                recordZoneID.lastUsedChangeToken = serverChangeToken
            }
        }
    }
}

@Suite("Radio's zone-changes operation subclass, ported")
struct RadioZoneChangesTests {
    @Test("the subclass sets its blocks in main(), collects changes and deletions, and keeps each zone's token", arguments: TestEngine.all)
    func subclassCollectsChanges(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let zoneID = RecordZone.ID(zoneName: "Stations-\(UUID().uuidString)")
            _ = try await database.save(RecordZone(zoneID: zoneID))
            let stations = ["bbc", "kexp", "fip"].map { Record(recordType: "Station", recordID: Record.ID(recordName: $0, zoneID: zoneID)) }
            _ = try await database.modifyRecords(saving: stations, deleting: [])

            func fetch() async -> RadioFetchRecordZoneChangesOperation {
                // let options = CKFetchRecordZoneChangesOperation.ZoneOptions()
                let options = FetchRecordZoneChangesOperation.ZoneOptions()
                options.previousServerChangeToken = zoneID.lastUsedChangeToken
                let operation = RadioFetchRecordZoneChangesOperation(recordZoneIDs: [zoneID], optionsByRecordZoneID: [zoneID: options])
                await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                    operation.fetchRecordZoneChangesCompletionBlock = { _ in done.resume() }
                    database.add(operation)
                }
                return operation
            }

            let first = await fetch()
            #expect(first.changedRecords.map(\.recordID.recordName).sorted() == ["bbc", "fip", "kexp"])
            #expect(first.log.messages.first == "FetchRecordZoneChangesOperation started for 1 zone(s).")
            #expect(first.log.messages.contains("FetchRecordZoneChangesOperation new server change token received for database (type=\(Database.Scope.private.rawValue))."))
            #expect(zoneID.lastUsedChangeToken != nil)

            _ = try await database.modifyRecords(saving: [], deleting: [stations[0].recordID])
            let second = await fetch()
            #expect(second.changedRecords.isEmpty)
            #expect(second.deletedRecordIDs == [stations[0].recordID])
        }
    }
}
