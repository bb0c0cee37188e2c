import Foundation
import Stratus
import Testing

// MARK: - What a store holds

extension EngineConformance {
    static let inventoryCases: [TestCase] = [
        TestCase("inventory: every container, database, owner and zone with record counts by type; integrity check passes", inventoryListsTheStore),
    ]

    static func inventoryListsTheStore(_ env: Environment) async throws {
        let alice = env.container(user: "alice")
        let bob = Container(identifier: "com.example.other", engine: env.engine, userName: "bob")
        try await TestDatabase.save(makeRecords("Note", count: 3) { ["n": .int64(Int64($0))] } + [makeRecord("Task", "t1")], in: alice.publicCloudDatabase)
        let photos = try await alice.privateCloudDatabase.save(RecordZone(zoneName: "Photos"))
        try await TestDatabase.save(makeRecords("Photo", count: 2, zoneID: photos.zoneID) { _ in [:] }, in: alice.privateCloudDatabase)
        try await TestDatabase.save([makeRecord("Item", "i1")], in: bob.publicCloudDatabase)

        let inventory = try await alice.storeInventory()
        func database(_ container: String, _ scope: Database.Scope) -> StoreInventory.DatabaseEntry? {
            inventory.databases.first { $0.containerIdentifier == container && $0.scope == scope }
        }
        let alicePublic = try #require(database(Environment.containerIdentifier, .public))
        #expect(alicePublic.zones.map(\.zone.zoneID.zoneName) == ["_defaultZone"])
        #expect(alicePublic.zones.first?.recordCounts == ["Note": 3, "Task": 1])
        let alicePrivate = try #require(database(Environment.containerIdentifier, .private))
        #expect(!alicePrivate.owner.isEmpty, "a private database names its owner")
        #expect(alicePrivate.zones.first { $0.zone.zoneID.zoneName == "Photos" }?.recordCounts == ["Photo": 2])
        #expect(database("com.example.other", .public)?.zones.first?.recordCounts == ["Item": 1])
        #expect(inventory.schemaVersion > 0)
        #expect(try await alice.checkStoreIntegrity().isEmpty)
    }
}
