import Foundation
import Stratus
import Testing

extension ZoneConformance {
    static let syncEngineCases: [TestCase] = [
        TestCase("sync engine: two devices converge through sends and fetches, each change fetched once", syncEngineDevicesConverge),
        TestCase("sync engine: after a reset of the development environment its token expires, and the zones the reset removed are reported deleted", syncEngineSeesAResetsZonesGo),
        TestCase("sync engine: a listing from the beginning cancelled after its first page starts again, and still reports the zones gone", syncEngineRelistsAfterAnInterruption),
        TestCase("sync engine: fetched records come oldest first, in the order they were saved; events describe themselves", syncEngineFetchesInCommitOrder),
    ]

    /// A device's copy of the Notes zone, kept by a ``SyncEngineDelegate`` as an app keeps it.
    final actor NotesReplica: SyncEngineDelegate {
        var titles: [String: String] = [:]
        var systemFields: [String: Record] = [:]
        var fetchedModifications = 0
        var fetchedDeletions = 0
        /// The names of the records fetched, in the order the events gave them.
        var fetchedNames: [String] = []
        /// How each event and its context described itself.
        var eventDescriptions: [String] = []
        var deletedZones: [RecordZone.ID] = []
        var stateSerialization: SyncEngine.State.Serialization?

        func edit(_ name: String, title: String?) {
            titles[name] = title
        }

        func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
            switch event {
            case .willFetchChanges(let will): eventDescriptions.append("\(will) \(will.context.reason.description)")
            case .fetchedRecordZoneChanges(let changes): eventDescriptions.append(changes.description)
            default: break
            }
            switch event {
            case .stateUpdate(let update):
                stateSerialization = update.stateSerialization
            case .fetchedDatabaseChanges(let changes):
                // The app drops what it kept of a deleted zone (a copy keeps one zone, Notes).
                for deletion in changes.deletions {
                    deletedZones.append(deletion.zoneID)
                    if deletion.zoneID.zoneName == notes.zoneName { titles = [:]; systemFields = [:] }
                }
            case .fetchedRecordZoneChanges(let changes):
                for modification in changes.modifications {
                    titles[modification.record.recordID.recordName] = modification.record["title"] as? String
                    systemFields[modification.record.recordID.recordName] = modification.record
                }
                for deletion in changes.deletions {
                    titles[deletion.recordID.recordName] = nil
                    systemFields[deletion.recordID.recordName] = nil
                }
                fetchedNames += changes.modifications.map(\.record.recordID.recordName)
                #expect(Set(changes.modifications.map(\.record.recordID)).count == changes.modifications.count, "a record once in a batch")
                fetchedModifications += changes.modifications.count
                fetchedDeletions += changes.deletions.count
            case .sentRecordZoneChanges(let sent):
                for record in sent.savedRecords { systemFields[record.recordID.recordName] = record }
                for id in sent.deletedRecordIDs { systemFields[id.recordName] = nil }
            default:
                break
            }
        }

        func nextRecordZoneChangeBatch(_ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine) async -> SyncEngine.RecordZoneChangeBatch? {
            let pending = syncEngine.state.pendingRecordZoneChanges.filter { context.options.scope.contains($0) }
            let titles = titles, systemFields = systemFields
            return await SyncEngine.RecordZoneChangeBatch(pendingChanges: pending) { id in
                guard let title = titles[id.recordName] else { return nil }
                let record = systemFields[id.recordName]?.copy() as? Record ?? Record(recordType: "Note", recordID: id)
                record["title"] = title
                return record
            }
        }
    }

    static func syncEngineDevicesConverge(_ env: Environment) async throws {
        func engine(_ replica: NotesReplica, state: SyncEngine.State.Serialization? = nil) -> SyncEngine {
            var configuration = SyncEngine.Configuration(database: env.container().privateCloudDatabase, stateSerialization: state, delegate: replica)
            configuration.automaticallySync = false
            return SyncEngine(configuration)
        }
        let phone = NotesReplica(), laptop = NotesReplica()
        let phoneEngine = engine(phone), laptopEngine = engine(laptop)
        let ids = (1...3).map { Record.ID(recordName: "n\($0)", zoneID: notes) }
        for (index, id) in ids.enumerated() { await phone.edit(id.recordName, title: "note \(index + 1)") }
        phoneEngine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: notes))])
        phoneEngine.state.add(pendingRecordZoneChanges: ids.map { .saveRecord($0) })
        try await phoneEngine.sendChanges()
        #expect(phoneEngine.state.pendingRecordZoneChanges.isEmpty)

        try await laptopEngine.fetchChanges()
        #expect(await laptop.titles == ["n1": "note 1", "n2": "note 2", "n3": "note 3"])

        await laptop.edit("n1", title: "note 1, edited")
        await laptop.edit("n2", title: nil)
        laptopEngine.state.add(pendingRecordZoneChanges: [.saveRecord(ids[0]), .deleteRecord(ids[1])])
        try await laptopEngine.sendChanges()

        try await phoneEngine.fetchChanges()
        let expected = ["n1": "note 1, edited", "n3": "note 3"]
        #expect(await phone.titles == expected)
        #expect(await laptop.titles == expected)

        // The laptop's own changes come back to it once, as CloudKit's do.
        try await laptopEngine.fetchChanges()
        #expect(await laptop.titles == expected)
        // Started again from its saved state, the laptop fetches only what is new: nothing.
        let before = await laptop.fetchedModifications + laptop.fetchedDeletions
        let restarted = engine(laptop, state: await laptop.stateSerialization)
        try await restarted.fetchChanges()
        #expect(await laptop.fetchedModifications + laptop.fetchedDeletions == before)
        #expect(await laptop.titles == expected)

        // The store holds what both devices hold.
        let stored = try await env.container().privateCloudDatabase.records(matching: Query(recordType: "Note", predicate: QueryPredicate(value: true)), inZoneWith: notes)
        let storedTitles = Dictionary(uniqueKeysWithValues: try stored.matchResults.map { ($0.0.recordName, try $0.1.get()["title"] as? String ?? "") })
        #expect(storedTitles == expected)
    }

    static func syncEngineFetchesInCommitOrder(_ env: Environment) async throws {
        func engine(_ replica: NotesReplica) -> SyncEngine {
            var configuration = SyncEngine.Configuration(database: env.container().privateCloudDatabase, stateSerialization: nil, delegate: replica)
            configuration.automaticallySync = false
            return SyncEngine(configuration)
        }
        let phone = NotesReplica(), laptop = NotesReplica()
        let phoneEngine = engine(phone), laptopEngine = engine(laptop)
        phoneEngine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: notes))])
        // Saved one by one in an order that neither names nor hashes give.
        let order = ["n07", "n02", "n11", "n00", "n09", "n04", "n10", "n01", "n08", "n03", "n06", "n05"]
        for name in order {
            await phone.edit(name, title: "note \(name)")
            phoneEngine.state.add(pendingRecordZoneChanges: [.saveRecord(Record.ID(recordName: name, zoneID: notes))])
            try await phoneEngine.sendChanges()
        }
        try await laptopEngine.fetchChanges()
        #expect(await laptop.fetchedNames == order)
        let descriptions = await laptop.eventDescriptions
        #expect(descriptions.contains("WillFetchChanges(FetchChangesContext(reason: manual, options: FetchChangesOptions(scope: all))) manual"), "\(descriptions)")
        #expect(descriptions.contains("FetchedRecordZoneChanges(12 modification(s), 0 deletion(s))"), "\(descriptions)")
    }

    static func syncEngineSeesAResetsZonesGo(_ env: Environment) async throws {
        let container = env.container()
        let replica = NotesReplica()
        var configuration = SyncEngine.Configuration(database: container.privateCloudDatabase, stateSerialization: nil, delegate: replica)
        configuration.automaticallySync = false
        let engine = SyncEngine(configuration)
        let scratch = RecordZone.ID(zoneName: "Scratch")
        try await container.privateCloudDatabase.save(RecordZone(zoneID: notes))
        try await container.privateCloudDatabase.save(RecordZone(zoneID: scratch))
        let note = Record(recordType: "Note", recordID: Record.ID(recordName: "n1", zoneID: notes))
        note["title"] = "kept until the reset"
        _ = try await container.privateCloudDatabase.save(note)
        try await engine.fetchChanges()
        #expect(await replica.titles == ["n1": "kept until the reset"])
        #expect(await replica.deletedZones.isEmpty)

        try await container.resetDevelopmentEnvironment()
        try await engine.fetchChanges()
        #expect(await replica.deletedZones.map(\.zoneName).sorted() == [notes.zoneName, "Scratch"])
        let kept = await replica.titles
        #expect(kept.isEmpty, "nothing of before the reset is kept: \(kept)")
        // Reported once: the next fetch has nothing to say.
        try await engine.fetchChanges()
        #expect(await replica.deletedZones.count == 2)
    }

    /// A delegate that cancels its engine's work at the first database changes it is given.
    final actor CancellingReplica: SyncEngineDelegate {
        var cancels = true
        var deletedZones: [RecordZone.ID] = []

        func stopCancelling() { cancels = false }
        func startCancelling() { cancels = true }

        func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
            guard case .fetchedDatabaseChanges(let changes) = event else { return }
            deletedZones += changes.deletions.map(\.zoneID)
            if cancels && !changes.modifications.isEmpty { await syncEngine.cancelOperations() }
        }

        func nextRecordZoneChangeBatch(_ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine) async -> SyncEngine.RecordZoneChangeBatch? { nil }
    }

    static func syncEngineRelistsAfterAnInterruption(_ env: Environment) async throws {
        let container = env.container()
        let database = container.privateCloudDatabase
        try await database.save(RecordZone(zoneName: "Gone"))
        let replica = CancellingReplica()
        await replica.stopCancelling()
        var configuration = SyncEngine.Configuration(database: database, stateSerialization: nil, delegate: replica)
        configuration.automaticallySync = false
        let engine = SyncEngine(configuration)
        try await engine.fetchChanges()

        // After the reset the user has more zones than one page of database changes lists.
        try await container.resetDevelopmentEnvironment()
        let count = FetchDatabaseChangesOperation.defaultResultsLimit + 20
        _ = try await database.modifyRecordZones(saving: (0..<count).map { RecordZone(zoneName: "Z\($0)") }, deleting: [])
        await replica.startCancelling()
        let cancelled = stratusError(await caughtError { try await engine.fetchChanges() })
        #expect(cancelled?.code == .operationCancelled, "the delegate cancelled the listing after its first page")
        #expect(await replica.deletedZones.isEmpty)
        await replica.stopCancelling()
        try await engine.fetchChanges()
        #expect(await replica.deletedZones.map(\.zoneName) == ["Gone"])
    }
}
