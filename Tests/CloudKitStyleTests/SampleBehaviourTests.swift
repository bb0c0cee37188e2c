import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// Behaviours CloudKit code in the shape of Apple's samples and of command-line tools counts on:
// database change feeds with zone deletions, assets from temporary files, reference lists,
// the predicate forms of CloudKit's CKQuery documentation, and query notifications.

@Suite("CloudKit sample behaviours, ported")
struct SampleBehaviourTests {
    // let op = CKFetchDatabaseChangesOperation(previousServerChangeToken: token)
    // op.recordZoneWithIDChangedBlock / recordZoneWithIDWasDeletedBlock / recordZoneWithIDWasPurgedBlock
    // op.changeTokenUpdatedBlock = { token in save(token) }; op.fetchDatabaseChangesResultBlock = { … }
    @Test("CKFetchDatabaseChangesOperation: changed and deleted zones, paged with fetchAllChanges", arguments: TestEngine.all)
    func databaseChanges(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let names = ["Inbox", "Notes", "Trips"]
            _ = try await database.modifyRecordZones(saving: names.map { RecordZone(zoneName: $0) })

            let first = try await fetchDatabaseChanges(database, since: nil, resultsLimit: 1)
            #expect(Set(first.changed.map(\.zoneName)) == Set(names))
            #expect(first.deleted.isEmpty && first.purged.isEmpty)
            #expect(first.moreComing == false, "fetchAllChanges (the default) reads every page")
            #expect(!first.tokenUpdates.isEmpty, "changeTokenUpdatedBlock reports the pages' tokens")

            try await database.deleteRecordZone(withID: RecordZone.ID(zoneName: "Notes"))
            let note = Record(recordType: "Trip", recordID: Record.ID(zoneID: RecordZone.ID(zoneName: "Trips")))
            _ = try await database.save(note)
            let second = try await fetchDatabaseChanges(database, since: first.token, resultsLimit: 0)
            #expect(second.changed.map(\.zoneName) == ["Trips"])
            #expect(second.deleted.map(\.zoneName) == ["Notes"])
            #expect(second.purged.isEmpty)

            let third = try await fetchDatabaseChanges(database, since: second.token, resultsLimit: 0)
            #expect(third.changed.isEmpty && third.deleted.isEmpty)
        }
    }

    private struct DatabaseChanges {
        var changed: [RecordZone.ID] = []
        var deleted: [RecordZone.ID] = []
        var purged: [RecordZone.ID] = []
        var tokenUpdates: [ServerChangeToken] = []
        var token: ServerChangeToken?
        var moreComing = true
    }

    private func fetchDatabaseChanges(_ database: Database, since token: ServerChangeToken?, resultsLimit: Int) async throws -> DatabaseChanges {
        let changes = Collected(DatabaseChanges())
        let failure = Collected<Error?>(nil)
        let operation = FetchDatabaseChangesOperation(previousServerChangeToken: token)
        operation.resultsLimit = resultsLimit
        await run(database) { finish in
            operation.recordZoneWithIDChangedBlock = { changes.value.changed.append($0) }
            operation.recordZoneWithIDWasDeletedBlock = { changes.value.deleted.append($0) }
            operation.recordZoneWithIDWasPurgedBlock = { changes.value.purged.append($0) }
            operation.changeTokenUpdatedBlock = { changes.value.tokenUpdates.append($0) }
            operation.fetchDatabaseChangesResultBlock = { result in
                switch result {
                case .success((let token, let moreComing)):
                    changes.value.token = token
                    changes.value.moreComing = moreComing
                case .failure(let error):
                    failure.value = error
                }
                finish()
            }
            return operation
        }
        if let error = failure.value { throw error }
        return changes.value
    }

    // let url = FileManager.default.temporaryDirectory.appendingPathComponent(UUID().uuidString)
    // try data.write(to: url); record["photo"] = CKAsset(fileURL: url); save; try? FileManager.default.removeItem(at: url)
    @Test("CKAsset from a temporary file, removed after the save; a missing file is assetFileNotFound", arguments: TestEngine.all)
    func temporaryFileAssets(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let bytes = Data("not really a JPEG".utf8)
            let url = FileManager.default.temporaryDirectory.appendingPathComponent(UUID().uuidString).appendingPathExtension("jpg")
            try bytes.write(to: url)
            let photo = Record(recordType: "Photo", recordID: Record.ID(recordName: "p1"))
            photo["image"] = Asset(fileURL: url)
            photo["title"] = "Beach"
            let saved = try await database.save(photo)
            try? FileManager.default.removeItem(at: url)
            #expect((saved["image"] as? Asset) != nil)

            let fetched = try await database.record(for: Record.ID(recordName: "p1"))
            let asset = try #require(fetched["image"] as? Asset)
            let fileURL = try #require(asset.fileURL)
            #expect(try Data(contentsOf: fileURL) == bytes)

            let broken = Record(recordType: "Photo", recordID: Record.ID(recordName: "p2"))
            broken["image"] = Asset(fileURL: FileManager.default.temporaryDirectory.appendingPathComponent(UUID().uuidString))
            let error = await caughtError { try await database.save(broken) }
            #expect((error as? StratusError)?.code == .assetFileNotFound)
        }
    }

    // list["items"] = items.map { CKRecord.Reference(recordID: $0.recordID, action: .none) }
    // NSPredicate(format: "items CONTAINS %@", CKRecord.Reference(recordID: id, action: .none))
    @Test("reference lists: saved, read back, and queried with CONTAINS and ANY", arguments: TestEngine.all)
    func referenceLists(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.publicCloudDatabase
            let items = (1...3).map { Record(recordType: "Item", recordID: Record.ID(recordName: "i\($0)")) }
            let weekly = Record(recordType: "List", recordID: Record.ID(recordName: "weekly"))
            weekly["items"] = items.prefix(2).map { Record.Reference(recordID: $0.recordID, action: .none) }
            let party = Record(recordType: "List", recordID: Record.ID(recordName: "party"))
            party["items"] = [Record.Reference(record: items[2], action: .none)]
            _ = try await database.modifyRecords(saving: items + [weekly, party], deleting: [])

            let fetched = try await database.record(for: weekly.recordID)
            let references = try #require(fetched["items"] as? [Record.Reference])
            #expect(references.map(\.recordID.recordName) == ["i1", "i2"])

            let withI2 = try QueryPredicate(format: "items CONTAINS %@", Record.Reference(recordID: Record.ID(recordName: "i2"), action: .none))
            #expect(try await names(database, "List", withI2) == ["weekly"])
            let anyI3 = try QueryPredicate(format: "ANY items == %@", Record.ID(recordName: "i3"))
            #expect(try await names(database, "List", anyI3) == ["party"])
            let eitherList = try QueryPredicate(format: "ANY items IN %@", [Record.ID(recordName: "i1"), Record.ID(recordName: "i3")])
            #expect(try await names(database, "List", eitherList) == ["party", "weekly"])
        }
    }

    // The forms of CKQuery's documentation, with NSSortDescriptor and CKLocationSortDescriptor.
    @Test("CKQuery predicate forms: IN (array or set), BETWEEN, %K, recordID, creationDate, distance, self CONTAINS, NOT IN", arguments: TestEngine.all)
    func predicateForms(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.publicCloudDatabase
            let places: [(String, String, Int, Double, Double, String)] = [
                ("cafe", "food", 4, 59.91, 10.75, "Quiet cafe by the harbour"),
                ("museum", "culture", 5, 59.90, 10.72, "Ships and history"),
                ("diner", "food", 2, 60.39, 5.32, "Burgers near the fish market"),
            ]
            let start = Date()
            for (name, kind, stars, lat, lon, text) in places {
                let record = Record(recordType: "Place", recordID: Record.ID(recordName: name))
                record["kind"] = kind
                record["stars"] = stars
                record["location"] = Location(latitude: lat, longitude: lon)
                record["blurb"] = text
                _ = try await database.save(record)
            }
            let oslo = Location(latitude: 59.91, longitude: 10.75)

            #expect(try await names(database, "Place", try QueryPredicate(format: "kind IN %@", ["culture", "food"])) == ["cafe", "diner", "museum"])
            #expect(try await names(database, "Place", try QueryPredicate(format: "stars BETWEEN %@", [3, 5])) == ["cafe", "museum"])
            #expect(try await names(database, "Place", try QueryPredicate(format: "stars BETWEEN {2, 4}")) == ["cafe", "diner"])
            #expect(try await names(database, "Place", try QueryPredicate(format: "%K == %@", "kind", "FOOD")) == ["cafe", "diner"])
            #expect(try await names(database, "Place", try QueryPredicate(format: "recordID == %@", Record.ID(recordName: "museum"))) == ["museum"])
            #expect(try await names(database, "Place", try QueryPredicate(format: "NOT (recordID IN %@)", [Record.ID(recordName: "museum")])) == ["cafe", "diner"])
            // let seen: Set<CKRecord.ID> = …; NSPredicate(format: "NOT (recordID IN %@)", seen) — NSPredicate takes a set for IN
            let seen: Set<Record.ID> = [Record.ID(recordName: "cafe"), Record.ID(recordName: "diner")]
            #expect(try await names(database, "Place", try QueryPredicate(format: "NOT (recordID IN %@)", seen)) == ["museum"])
            #expect(try await names(database, "Place", try QueryPredicate(format: "kind IN %@", Set(["culture"]))) == ["museum"])
            #expect(try await names(database, "Place", try QueryPredicate(format: "creationDate > %@", start.addingTimeInterval(-60))).count == 3)
            #expect(try await names(database, "Place", try QueryPredicate(format: "creationDate > %@", Date().addingTimeInterval(60))).isEmpty)
            #expect(try await names(database, "Place",
                                    try QueryPredicate(format: "distanceToLocation:fromLocation:(%K, %@) < %f", "location", oslo, 10.0)) == ["cafe", "museum"])
            #expect(try await names(database, "Place", try QueryPredicate(format: "self CONTAINS %@", "harbour")) == ["cafe"])
            #expect(try await names(database, "Place", try QueryPredicate(format: "SELF CONTAINS %@", "Fish")) == ["diner"])

            let bergen = Location(latitude: 60.39, longitude: 5.32)
            let query = Query(recordType: "Place", predicate: QueryPredicate(value: true))
            query.sortDescriptors = [LocationSortDescriptor(key: "location", relativeLocation: bergen)]
            let (nearest, _) = try await database.records(matching: query)
            #expect(nearest.map(\.0.recordName) == ["diner", "museum", "cafe"])
            query.sortDescriptors = [RecordSortDescriptor(key: "stars", ascending: false)]
            let (best, _) = try await database.records(matching: query)
            #expect(best.map(\.0.recordName) == ["museum", "cafe", "diner"])
        }
    }

    // let subscription = CKQuerySubscription(recordType: "Order", predicate: …, subscriptionID: "big-orders",
    //                                        options: [.firesOnRecordCreation, .firesOnRecordUpdate])
    // info.alertBody = "New order"; info.desiredKeys = ["total"]; info.shouldBadge = true; info.soundName = "default"
    @Test("CKQuerySubscription with notificationInfo: the notification's reason, fields and texts", arguments: TestEngine.all)
    func querySubscriptionNotifications(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.publicCloudDatabase
            let subscription = QuerySubscription(recordType: "Order", predicate: try QueryPredicate(format: "total > %d", 100),
                                                 subscriptionID: "big-orders", options: [.firesOnRecordCreation, .firesOnRecordUpdate])
            let info = Subscription.NotificationInfo()
            info.alertBody = "New big order"
            info.desiredKeys = ["total"]
            info.shouldBadge = true
            info.soundName = "default"
            info.category = "ORDER"
            subscription.notificationInfo = info
            let saved = await awaitCallback { done in database.save(subscription) { saved, error in done(saved?.subscriptionID ?? "\(error!)") } }
            #expect(saved == "big-orders")

            let small = Record(recordType: "Order", recordID: Record.ID(recordName: "o1"))
            small["total"] = 20
            small["customer"] = "ann"
            let big = Record(recordType: "Order", recordID: Record.ID(recordName: "o2"))
            big["total"] = 250
            big["customer"] = "bob"
            _ = try await database.modifyRecords(saving: [small, big])

            let notifications = Collected<[StratusNotification]>([])
            let fetch = FetchNotificationChangesOperation()
            await run(database) { finish in
                fetch.notificationChangedBlock = { notifications.value.append($0) }
                fetch.fetchNotificationChangesResultBlock = { _ in finish() }
                return fetch
            }
            let queryNotifications = notifications.value.compactMap { $0 as? QueryNotification }
            #expect(queryNotifications.count == 1)
            let notification = try #require(queryNotifications.first)
            #expect(notification.notificationType == .query)
            #expect(notification.subscriptionID == "big-orders")
            #expect(notification.queryNotificationReason == .recordCreated)
            #expect(notification.recordID?.recordName == "o2")
            #expect(notification.databaseScope == .public)
            #expect((notification.recordFields?["total"] as? Int) == 250)
            #expect(notification.recordFields?["customer"] == nil, "only desiredKeys are sent")
            #expect(notification.alertBody == "New big order")
            #expect(notification.soundName == "default")
            #expect(notification.category == "ORDER")
        }
    }
}

private func names(_ database: Database, _ type: String, _ predicate: QueryPredicate) async throws -> [String] {
    let (matched, _) = try await database.records(matching: Query(recordType: type, predicate: predicate))
    return matched.map(\.0.recordName).sorted()
}
