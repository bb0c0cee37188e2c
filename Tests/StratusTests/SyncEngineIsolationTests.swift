import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

/// An app's sync controller as Swift 6 apps write it: isolated to the main actor, its state
/// read and written there, the engine's delegate all the same.
@MainActor
final class MainActorNotes: SyncEngineDelegate {
    var titles: [String: String] = [:]
    var events: [String] = []

    func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
        events.append(event.description)
        if case .fetchedRecordZoneChanges(let changes) = event {
            for modification in changes.modifications {
                titles[modification.record.recordID.recordName] = modification.record["title"] as? String
            }
        }
    }

    func nextRecordZoneChangeBatch(_ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine) async -> SyncEngine.RecordZoneChangeBatch? {
        let pending = syncEngine.state.pendingRecordZoneChanges.filter { context.options.scope.contains($0) }
        let titles = titles
        return await SyncEngine.RecordZoneChangeBatch(pendingChanges: pending) { id in
            guard let title = titles[id.recordName] else { return nil }
            let record = Record(recordType: "Note", recordID: id)
            record["title"] = title
            return record
        }
    }
}

@Suite struct SyncEngineIsolationTests {
    @Test @MainActor func aMainActorDelegateSendsAndFetches() async throws {
        let store = try TemporaryStore(prefix: "sync-engine-main-actor")
        defer { store.remove() }
        do {
            let zone = RecordZone.ID(zoneName: "Notes")
            func engine(_ delegate: MainActorNotes) throws -> SyncEngine {
                let database = try Container(identifier: "iCloud.com.example.notes", storePath: store.path(), userName: "alice").privateCloudDatabase
                var configuration = SyncEngine.Configuration(database: database, stateSerialization: nil, delegate: delegate)
                configuration.automaticallySync = false
                return SyncEngine(configuration)
            }
            let phone = MainActorNotes(), laptop = MainActorNotes()
            let phoneEngine = try engine(phone), laptopEngine = try engine(laptop)
            phone.titles["n1"] = "from the phone"
            phoneEngine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: zone))])
            phoneEngine.state.add(pendingRecordZoneChanges: [.saveRecord(Record.ID(recordName: "n1", zoneID: zone))])
            try await phoneEngine.sendChanges()
            try await laptopEngine.fetchChanges()
            #expect(laptop.titles == ["n1": "from the phone"])
            #expect(phone.events.contains("didSendChanges"))
        }
    }
}
