import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// DitherCalculatorCore's `CloudDatabase` (Nick Kohrn, DitherCalculatorCore/CloudDatabase.swift;
// the search index did not name its repository), ported mechanically: a `Sendable` protocol that
// copies four `CKDatabase` async signatures exactly — `any Error` inside the `Result`, the
// labelled result tuple — and a conformance with an empty body, `extension CKDatabase:
// CloudDatabase {}`. Such a seam compiles only if every signature matches CloudKit's to the
// label and type, so it is a test of Stratus's async `Database` API as much as of the app.
// Changes a Linux port must make: `import CloudKit` → `import Stratus` and the `CK` prefix dropped.

public protocol CloudDatabase: Sendable {
    func deleteRecord(withID recordID: Record.ID) async throws -> Record.ID
    func record(for recordID: Record.ID) async throws -> Record
    func save(_ record: Record) async throws -> Record

    func records(
        matching query: Query,
        inZoneWith zoneID: RecordZone.ID?,
        desiredKeys: [Record.FieldKey]?,
        resultsLimit: Int
    ) async throws -> (
        matchResults: [(Record.ID, Result<Record, any Error>)],
        queryCursor: QueryOperation.Cursor?
    )
}

extension Database: CloudDatabase {}

/// What the calculator does with the seam: a saved preset, looked up, listed and removed,
/// written against `any CloudDatabase` so that tests may hand it a double.
struct PresetStore {
    let database: any CloudDatabase

    func save(name: String, colors: [String]) async throws -> Record {
        let record = Record(recordType: "Preset", recordID: Record.ID(recordName: name))
        record["name"] = name
        record["colors"] = colors
        return try await database.save(record)
    }

    func presets() async throws -> [Record] {
        let query = Query(recordType: "Preset", predicate: QueryPredicate(value: true))
        query.sortDescriptors = [RecordSortDescriptor(key: "name", ascending: true)]
        let (matchResults, _) = try await database.records(matching: query, inZoneWith: nil, desiredKeys: nil,
                                                           resultsLimit: QueryOperation.maximumResults)
        return matchResults.compactMap { try? $0.1.get() }
    }
}

@Suite struct CloudDatabaseSeamTests {
    @Test(arguments: TestEngine.all) func databaseConformsWithAnEmptyExtensionAndRunsThroughTheSeam(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let store = PresetStore(database: container.privateCloudDatabase)
            let saved = try await store.save(name: "floyd-steinberg", colors: ["#000000", "#ffffff"])
            #expect(saved.recordChangeTag != nil)
            _ = try await store.save(name: "atkinson", colors: ["#112233"])

            #expect(try await store.presets().map { $0["name"] as? String } == ["atkinson", "floyd-steinberg"])

            let fetched = try await store.database.record(for: saved.recordID)
            #expect(fetched["colors"] as? [String] == ["#000000", "#ffffff"])

            let deleted = try await store.database.deleteRecord(withID: saved.recordID)
            #expect(deleted == saved.recordID)
            do {
                _ = try await store.database.record(for: saved.recordID)
                Issue.record("a deleted record was fetched")
            } catch let error as StratusError {
                #expect(error.code == .unknownItem)
            }
            #expect(try await store.presets().count == 1)
        }
    }
}
