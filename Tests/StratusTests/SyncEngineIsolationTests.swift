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
    @Test("the engine fetches custom zones only, as CloudKit's: records other code keeps in the default zone never reach its delegate")
    @MainActor func theDefaultZoneIsNotFetched() async throws {
        let store = try TemporaryStore(prefix: "sync-engine-default-zone")
        defer { store.remove() }
        do {
            let database = try Container(identifier: "iCloud.com.example.notes", storePath: store.path(), userName: "alice").privateCloudDatabase
            let settings = Record(recordType: "Settings", recordID: Record.ID(recordName: "settings"))
            settings["title"] = "dark mode"
            _ = try await database.save(settings)
            let zone = try await database.save(RecordZone(zoneName: "Notes")).zoneID
            let note = Record(recordType: "Note", recordID: Record.ID(recordName: "n1", zoneID: zone))
            note["title"] = "hello"
            _ = try await database.save(note)

            let laptop = MainActorNotes()
            var configuration = SyncEngine.Configuration(database: database, stateSerialization: nil, delegate: laptop)
            configuration.automaticallySync = false
            let engine = SyncEngine(configuration)
            try await engine.fetchChanges()
            #expect(laptop.titles == ["n1": "hello"], "\(laptop.events)")
            #expect(!laptop.events.contains { $0.contains(RecordZone.ID.defaultZoneName) }, "\(laptop.events)")
        }
    }

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
