import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// The iOS 15 `Result` completion forms of `CKDatabase` for zones, subscriptions and changes,
// and the async `recordZones(for:)`, as ported code calls them.
@Suite("CKDatabase's Result completion forms")
struct ResultCompletionFormsTests {
    // database.modifyRecordZones(saving:deleting:) { result in … }, fetch(withRecordZoneIDs:),
    // recordZones(for:), modifySubscriptions(saving:deleting:) { result in … }, fetch(withSubscriptionIDs:),
    // fetchDatabaseChanges(since:), fetchRecordZoneChanges(inZoneWith:since:)
    @Test("the Result completion forms of zones, subscriptions and changes, and async recordZones(for:)", arguments: TestEngine.all)
    func resultCompletionForms(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let photos = RecordZone(zoneName: "Photos")
            let missing = RecordZone.ID(zoneName: "Missing")

            let modified = await awaitCallback { database.modifyRecordZones(saving: [photos], deleting: [], completionHandler: $0) }
            let saved = try modified.get()
            #expect(try saved.saveResults[photos.zoneID]?.get().zoneID == photos.zoneID && saved.deleteResults.isEmpty)

            let fetched = try await awaitCallback { database.fetch(withRecordZoneIDs: [photos.zoneID, missing], completionHandler: $0) }.get()
            #expect(try fetched[photos.zoneID]?.get().capabilities.contains(.fetchChanges) == true)
            #expect(fetched[missing].map { result -> StratusError.Code? in
                if case .failure(let error) = result { return (error as? StratusError)?.code }
                return nil
            } == .zoneNotFound)
            let zones = try await database.recordZones(for: [photos.zoneID, missing])
            #expect(zones.count == 2 && (try? zones[photos.zoneID]?.get()) != nil && (try? zones[missing]?.get()) == nil)

            let subscription = RecordZoneSubscription(zoneID: photos.zoneID, subscriptionID: "photos")
            subscription.notificationInfo = NotificationInfo()
            let subscribed = try await awaitCallback { database.modifySubscriptions(saving: [subscription], deleting: [], completionHandler: $0) }.get()
            #expect(try subscribed.saveResults["photos"]?.get().subscriptionID == "photos")
            let found = try await awaitCallback { database.fetch(withSubscriptionIDs: ["photos", "nope"], completionHandler: $0) }.get()
            #expect((try? found["photos"]?.get()) != nil && (try? found["nope"]?.get()) == nil && found.count == 2)
            let removed = try await awaitCallback { database.modifySubscriptions(saving: [], deleting: ["photos"], completionHandler: $0) }.get()
            #expect(removed.deleteResults["photos"].map { (try? $0.get()) != nil } == true)

            _ = try await database.save(Record(recordType: "Photo", recordID: Record.ID(recordName: "p1", zoneID: photos.zoneID)))
            let changes = try await awaitCallback { database.fetchDatabaseChanges(since: nil, completionHandler: $0) }.get()
            #expect(changes.modifications.contains { $0.zoneID == photos.zoneID })
            let zoneChanges = try await awaitCallback { database.fetchRecordZoneChanges(inZoneWith: photos.zoneID, since: nil, completionHandler: $0) }.get()
            #expect(zoneChanges.modificationResultsByID.keys.map(\.recordName) == ["p1"] && !zoneChanges.moreComing)

            let deleted = try await awaitCallback { database.modifyRecordZones(saving: [], deleting: [photos.zoneID], completionHandler: $0) }.get()
            #expect(deleted.deleteResults[photos.zoneID].map { (try? $0.get()) != nil } == true)
            let after = try await awaitCallback { database.fetchDatabaseChanges(since: changes.changeToken, completionHandler: $0) }.get()
            #expect(after.deletions.map(\.zoneID) == [photos.zoneID])
        }
    }
}
