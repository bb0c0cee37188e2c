import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

/// Values an app can pass that CloudKit answers with an error: the operation fails with
/// `invalidArguments` naming the value, and the process goes on (a trap here ends a server).
@Suite("Arguments CloudKit refuses fail the operation, not the process", .timeLimit(.minutes(10)))
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
}
