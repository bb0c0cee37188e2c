import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

/// Values an app can pass that CloudKit answers with an error: the operation fails with
/// `invalidArguments` naming the value, and the process goes on (a trap here ends a server).
@Suite("Arguments CloudKit refuses fail the operation, not the process", .timeLimit(.minutes(30)))
struct RefusedArgumentsTests {
    static func finalError(of operation: DatabaseOperation, on database: Database, _ observe: (Box<(any Error)?>) -> Void) async -> StratusError? {
        let failure = Box<(any Error)?>(nil)
        observe(failure)
        await run(operation, on: database)
        return stratusError(failure.value)
    }

    @Test("a negative resultsLimit on a query, a database change fetch, a zone's change configuration and a notification fetch is invalidArguments naming the limit")
    func negativeResultsLimits() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.container().privateCloudDatabase
            let zone = try await database.save(RecordZone(zoneName: "Notes"))
            _ = try await database.save(Record(recordType: "Note", recordID: Record.ID(recordName: "n1", zoneID: zone.zoneID)))

            let query = QueryOperation(query: Query(recordType: "Note"))
            query.zoneID = zone.zoneID
            query.resultsLimit = -1
            let queryError = await Self.finalError(of: query, on: database) { failure in
                query.queryResultBlock = { if case .failure(let error) = $0 { failure.value = error } }
            }
            #expect(queryError?.code == .invalidArguments && queryError?.message.contains("resultsLimit is -1") == true, "\(String(describing: queryError))")

            let databaseChanges = FetchDatabaseChangesOperation(previousServerChangeToken: nil)
            databaseChanges.resultsLimit = -5
            let databaseError = await Self.finalError(of: databaseChanges, on: database) { failure in
                databaseChanges.fetchDatabaseChangesResultBlock = { if case .failure(let error) = $0 { failure.value = error } }
            }
            #expect(databaseError?.code == .invalidArguments && databaseError?.message.contains("resultsLimit is -5") == true, "\(String(describing: databaseError))")

            let configuration = FetchRecordZoneChangesOperation.ZoneConfiguration(previousServerChangeToken: nil, resultsLimit: -2, desiredKeys: nil)
            let zoneChanges = FetchRecordZoneChangesOperation(recordZoneIDs: [zone.zoneID], configurationsByRecordZoneID: [zone.zoneID: configuration])
            let zoneFailure = Box<(any Error)?>(nil)
            let zoneError = await Self.finalError(of: zoneChanges, on: database) { failure in
                zoneChanges.recordZoneFetchResultBlock = { _, result in if case .failure(let error) = result { zoneFailure.value = error } }
                zoneChanges.fetchRecordZoneChangesResultBlock = { if case .failure(let error) = $0 { failure.value = error } }
            }
            let zoneRefusal = stratusError(zoneFailure.value)
            #expect(zoneRefusal?.code == .invalidArguments && zoneRefusal?.message.contains("resultsLimit") == true && zoneRefusal?.message.contains("-2") == true,
                    "\(String(describing: zoneRefusal))")
            #expect(zoneError?.code == .partialFailure && zoneError?.partialErrorsByZoneID[zone.zoneID]?.code == .invalidArguments, "\(String(describing: zoneError))")

            let notifications = FetchNotificationChangesOperation(previousServerChangeToken: nil)
            notifications.resultsLimit = Int.min
            let notificationError = await Self.finalError(of: notifications, on: database) { failure in
                notifications.fetchNotificationChangesResultBlock = { if case .failure(let error) = $0 { failure.value = error } }
            }
            #expect(notificationError?.code == .invalidArguments && notificationError?.message.contains("resultsLimit is \(Int.min)") == true,
                    "\(String(describing: notificationError))")

            // The process is still here, and so is the store: the same operations with valid limits work.
            let records = try await database.records(matching: Query(recordType: "Note"), inZoneWith: zone.zoneID, resultsLimit: 1).matchResults
            #expect(records.map(\.0.recordName) == ["n1"])
        }
    }

    @Test("a bad container identifier or user name: the throwing initialisers throw before a store is made; Container(identifier:engine:) fails every operation instead")
    func badContainerArguments() async throws {
        try await SQLiteFixture.with { fixture in
            let path = fixture.store.path("never-made.sqlite")
            for identifier in ["", "com.example\nnext", String(repeating: "x", count: 256)] {
                let error = stratusError(await caughtError { try Container(identifier: identifier, storePath: path, userName: "alice") })
                #expect(error?.code == .badContainer, "\(identifier.debugDescription): \(String(describing: error))")
            }
            for userName in ["", "al\u{0}ice", String(repeating: "a", count: 256)] {
                let error = stratusError(await caughtError { try Container(identifier: "com.example", storePath: path, userName: userName) })
                #expect(error?.code == .invalidArguments, "\(userName.debugDescription): \(String(describing: error))")
            }
            #expect(!FileManager.default.fileExists(atPath: path), "nothing was opened")

            // CKContainer(identifier:) cannot fail; its operations do.
            let unnamed = Container(identifier: "", engine: fixture.engine, userName: "alice")
            let saved = stratusError(await caughtError { try await unnamed.publicCloudDatabase.save(Record(recordType: "Note")) })
            #expect(saved?.code == .badContainer, "\(String(describing: saved))")
            let nobody = Container(identifier: "com.example", engine: fixture.engine, userName: "")
            let fetched = stratusError(await caughtError { try await nobody.privateCloudDatabase.allRecordZones() })
            #expect(fetched?.code == .invalidArguments, "\(String(describing: fetched))")
            // Nor do the calls that read the store directly.
            let direct: [(String, () async throws -> Void)] = [
                ("collectUnreferencedAssets", { _ = try await unnamed.privateCloudDatabase.collectUnreferencedAssets() }),
                ("assetContentInventory", { _ = try await unnamed.privateCloudDatabase.assetContentInventory() }),
                ("NotificationFeed.currentToken", { _ = try await NotificationFeed(database: unnamed.privateCloudDatabase).currentToken() }),
                ("AssetAttacher.run", { _ = try await AssetAttacher(database: unnamed.privateCloudDatabase, folder: fixture.store.directory).run() }),
                ("accountStatus", { _ = try await unnamed.accountStatus() }),
                ("userRecordID", { _ = try await unnamed.userRecordID() }),
            ]
            for (call, body) in direct {
                let error = stratusError(await caughtError { try await body() })
                #expect(error?.code == .badContainer, "\(call): \(String(describing: error))")
            }
            // The completion handler form answers as the async call does.
            let (status, statusError) = await withCheckedContinuation { (continuation: CheckedContinuation<(AccountStatus, StratusError?), Never>) in
                unnamed.accountStatus { status, error in continuation.resume(returning: (status, error as? StratusError)) }
            }
            #expect(status == .couldNotDetermine && statusError?.code == .badContainer, "\(status) \(String(describing: statusError))")
            let anonymous = Container.anonymous(identifier: "bad\nname", engine: fixture.engine)
            let listed = stratusError(await caughtError { try await anonymous.publicCloudDatabase.records(matching: Query(recordType: "Note")) })
            #expect(listed?.code == .badContainer, "\(String(describing: listed))")
            // The store is there for a container with good arguments.
            _ = try await fixture.container().publicCloudDatabase.save(Record(recordType: "Note", recordID: Record.ID(recordName: "kept")))
            #expect(try await fixture.container().publicCloudDatabase.record(for: Record.ID(recordName: "kept")).recordType == "Note")
        }
    }

    @Test("resultsLimit Int.max on change fetches is served in batches, not an overflow")
    func largestResultsLimits() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.container().privateCloudDatabase
            let zone = try await database.save(RecordZone(zoneName: "Notes"))
            _ = try await database.save(Record(recordType: "Note", recordID: Record.ID(recordName: "n1", zoneID: zone.zoneID)))
            let zones = try await database.databaseChanges(since: nil, resultsLimit: Int.max)
            #expect(zones.modifications.map(\.zoneID) == [zone.zoneID] && !zones.moreComing)
            let records = try await database.recordZoneChanges(inZoneWith: zone.zoneID, since: nil, resultsLimit: Int.max)
            #expect(records.modificationResultsByID.keys.map(\.recordName) == ["n1"] && !records.moreComing)
            let notifications = FetchNotificationChangesOperation(previousServerChangeToken: nil)
            notifications.resultsLimit = Int.max
            let failure = await Self.finalError(of: notifications, on: database) { failure in
                notifications.fetchNotificationChangesResultBlock = { if case .failure(let error) = $0 { failure.value = error } }
            }
            #expect(failure == nil, "\(String(describing: failure))")
        }
    }

    @Test("a date at a non-finite time is refused with invalidArguments, in a field, a list, a predicate and a subscription; archiving such a subscription does not trap")
    func nonFiniteDates() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.container().publicCloudDatabase
            let never = Date(timeIntervalSinceReferenceDate: .infinity)
            let event = Record(recordType: "Event", recordID: Record.ID(recordName: "e1"))
            event["due"] = never
            let single = stratusError(await caughtError { try await database.save(event) })
            #expect(single?.code == .invalidArguments && single?.message.contains("field 'due'") == true, "\(String(describing: single))")
            event["due"] = [Date(), Date(timeIntervalSinceReferenceDate: .nan)]
            let list = stratusError(await caughtError { try await database.save(event) })
            #expect(list?.code == .invalidArguments, "\(String(describing: list))")
            event["due"] = Date(timeIntervalSinceReferenceDate: 0)
            _ = try await database.save(event)

            let query = Query(recordType: "Event", predicate: try QueryPredicate(format: "due < %@", never))
            let queried = stratusError(await caughtError { try await database.records(matching: query) })
            #expect(queried?.code == .invalidArguments && queried?.message.contains("non-finite") == true, "\(String(describing: queried))")
            let subscription = QuerySubscription(recordType: "Event", predicate: try QueryPredicate(format: "due < %@", never), subscriptionID: "late", options: [.firesOnRecordCreation])
            subscription.notificationInfo = NotificationInfo()
            let subscribed = stratusError(await caughtError { try await database.save(subscription) })
            #expect(subscribed?.code == .invalidArguments, "\(String(describing: subscribed))")
            let archive = try NSKeyedArchiver.archivedData(withRootObject: subscription, requiringSecureCoding: true)
            let back = try NSKeyedUnarchiver.unarchivedObject(ofClass: QuerySubscription.self, from: archive)
            #expect(back?.subscriptionID == "late")

            let nowhere = Location(latitude: .nan, longitude: 0)
            let near = Query(recordType: "Event", predicate: try QueryPredicate(format: "distanceToLocation:fromLocation:(place, %@) < 5", nowhere))
            let located = stratusError(await caughtError { try await database.records(matching: near) })
            #expect(located?.code == .invalidArguments, "\(String(describing: located))")
            let sorted = Query(recordType: "Event")
            sorted.sortDescriptors = [LocationSortDescriptor(key: "place", relativeLocation: nowhere)]
            let sortedError = stratusError(await caughtError { try await database.records(matching: sorted) })
            #expect(sortedError?.code == .invalidArguments, "\(String(describing: sortedError))")
        }
    }

    @Test("a reference or an asset in encryptedValues is refused with invalidArguments, as CloudKit encrypts every type but those")
    func encryptedReferenceOrAsset() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.container().privateCloudDatabase
            let file = fixture.store.directory.appendingPathComponent("photo.bin")
            try Data([1, 2, 3]).write(to: file)
            let linked = Record(recordType: "Trip", recordID: Record.ID(recordName: "t1"))
            linked.encryptedValues["owner"] = Record.Reference(recordID: Record.ID(recordName: "someone"), action: .none)
            let reference = stratusError(await caughtError { try await database.save(linked) })
            #expect(reference?.code == .invalidArguments && reference?.message.contains("field 'owner'") == true, "\(String(describing: reference))")
            let pictured = Record(recordType: "Trip", recordID: Record.ID(recordName: "t2"))
            pictured.encryptedValues["photo"] = Asset(fileURL: file)
            let asset = stratusError(await caughtError { try await database.save(pictured) })
            #expect(asset?.code == .invalidArguments && asset?.message.contains("field 'photo' holds an ASSETID in encryptedValues") == true, "\(String(describing: asset))")
            #expect(reference?.message.contains("field 'owner' holds a REFERENCE in encryptedValues") == true, "\(String(describing: reference))")
            let diary = Record(recordType: "Trip", recordID: Record.ID(recordName: "t3"))
            diary.encryptedValues["note"] = "Met a marmot"
            diary["owner"] = Record.Reference(recordID: Record.ID(recordName: "someone"), action: .none)
            _ = try await database.save(diary)
        }
    }

    /// Records from memory, for a ReadRecordsOperation.
    final class ListedRecords: RecordSource {
        var records: [Record]
        init(_ records: [Record]) { self.records = records }
        func nextItem() throws -> RecordSourceItem? { records.isEmpty ? nil : .record(records.removeFirst(), line: 1) }
    }

    @Test("a batchSize of 0 on DeleteRecordsOperation or ReadRecordsOperation fails the operation with invalidArguments; nothing is deleted")
    func zeroBatchSizes() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.container().publicCloudDatabase
            let kept = try await database.save(Record(recordType: "Item", recordID: Record.ID(recordName: "kept")))
            let delete = DeleteRecordsOperation(recordIDs: [kept.recordID])
            delete.batchSize = 0
            let deleteError = await Self.finalError(of: delete, on: database) { failure in
                delete.deleteRecordsResultBlock = { if case .failure(let error) = $0 { failure.value = error } }
            }
            #expect(deleteError?.code == .invalidArguments && deleteError?.message.contains("batchSize is 0") == true, "\(String(describing: deleteError))")
            #expect(try await database.record(for: kept.recordID).recordID == kept.recordID)

            let read = ReadRecordsOperation(source: ListedRecords([Record(recordType: "Item")]))
            read.batchSize = 0
            let readError = await Self.finalError(of: read, on: database) { failure in
                read.readRecordsResultBlock = { if case .failure(let error) = $0 { failure.value = error } }
            }
            #expect(readError?.code == .invalidArguments && readError?.message.contains("batchSize is 0") == true, "\(String(describing: readError))")
        }
    }

    @Test("numbers set through setValue as one untyped list, integers and doubles mixed (JSON's [4, 4.5]), are a DOUBLE list, as CloudKit stores an NSArray of NSNumbers")
    func mixedNumberList() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.container().publicCloudDatabase
            let rating = Record(recordType: "Rating", recordID: Record.ID(recordName: "r1"))
            rating.setValue([4, 4.5] as [Any], forKey: "scores")
            let json = try JSONSerialization.jsonObject(with: Data(#"{"history": [1, 2.5, 3]}"#.utf8)) as! [String: Any]
            rating.setValuesForKeys(json)
            _ = try await database.save(rating)
            let stored = try await database.record(for: rating.recordID)
            #expect(stored["scores"] as? [Double] == [4, 4.5])
            #expect(stored["history"] as? [Double] == [1, 2.5, 3])
        }
    }

    @Test("a sync engine told to poll every .infinity, .nan or 1e300 seconds starts, sends and fetches")
    @MainActor func unboundedPollInterval() async throws {
        let store = try TemporaryStore(prefix: "poll-interval")
        defer { store.remove() }
        do {
            for (index, interval) in [Double.infinity, .nan, 1e300].enumerated() {
                let delegate = MainActorNotes()
                let database = try Container(identifier: "iCloud.com.example.notes", storePath: store.path(), userName: "alice").privateCloudDatabase
                var configuration = SyncEngine.Configuration(database: database, stateSerialization: nil, delegate: delegate)
                configuration.changePollInterval = interval
                let engine = SyncEngine(configuration)
                let zone = RecordZone.ID(zoneName: "Notes")
                delegate.titles["n\(index)"] = "polled every \(interval)"
                engine.state.add(pendingDatabaseChanges: [.saveZone(RecordZone(zoneID: zone))])
                engine.state.add(pendingRecordZoneChanges: [.saveRecord(Record.ID(recordName: "n\(index)", zoneID: zone))])
                try await engine.sendChanges()
                try await engine.fetchChanges()
                #expect(delegate.events.contains("didSendChanges"), "\(interval): \(delegate.events)")
            }
        }
    }
}
