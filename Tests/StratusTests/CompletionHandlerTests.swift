import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

/// The callback forms CloudKit tutorials use, each awaited through a continuation.
@Suite("Convenience API (completion handlers)", .timeLimit(.minutes(30)))
struct CompletionHandlerTests {
    struct Outcome<Value: Sendable>: Sendable {
        var value: Value?
        var error: (any Error)?
        var calls = 1
    }

    /// Calls `start` and waits for its handler; counts how often the handler runs.
    static func callback<Value: Sendable>(_ start: (@escaping @Sendable (Value?, (any Error)?) -> Void) -> Void) async -> Outcome<Value> {
        let calls = Box(0)
        let outcome = await withCheckedContinuation { (continuation: CheckedContinuation<Outcome<Value>, Never>) in
            start { value, error in
                if calls.update({ $0 += 1; return $0 }) == 1 {
                    continuation.resume(returning: Outcome(value: value, error: error))
                }
            }
        }
        return Outcome(value: outcome.value, error: outcome.error, calls: calls.value)
    }

    @Test("save(_:completionHandler:), fetch(withRecordID:completionHandler:), delete(withRecordID:completionHandler:)")
    func saveFetchDelete() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            let record = makeRecord("Todo", "todo-1", ["title": .string("Buy milk"), "checked": .int64(0)])
            let saved = await Self.callback { database.save(record, completionHandler: $0) }
            #expect(saved.error == nil)
            #expect(saved.value?["title"] as? String == "Buy milk")
            #expect(saved.value?.recordChangeTag != nil)

            let again = await Self.callback { database.save(makeRecord("Todo", "todo-1"), completionHandler: $0) }
            #expect(again.value == nil)
            #expect(stratusError(again.error)?.code == .serverRecordChanged)

            let fetched = await Self.callback { database.fetch(withRecordID: record.recordID, completionHandler: $0) }
            #expect(fetched.error == nil)
            #expect(fetched.value?.recordChangeTag == saved.value?.recordChangeTag)
            #expect(fetched.value?.fieldValue(forKey: "checked") == .int64(0))

            let missing = await Self.callback { database.fetch(withRecordID: Record.ID(recordName: "nope"), completionHandler: $0) }
            #expect(missing.value == nil)
            #expect(stratusError(missing.error)?.code == .unknownItem)

            let deleted = await Self.callback { database.delete(withRecordID: record.recordID, completionHandler: $0) }
            #expect(deleted.error == nil)
            #expect(deleted.value == record.recordID)
            let gone = await Self.callback { database.fetch(withRecordID: record.recordID, completionHandler: $0) }
            #expect(stratusError(gone.error)?.code == .unknownItem)

            let invalid = await Self.callback { database.save(makeRecord("Todo", "_reserved"), completionHandler: $0) }
            #expect(stratusError(invalid.error)?.code == .invalidArguments)
            for outcome in [saved.calls, again.calls, fetched.calls, missing.calls, deleted.calls, gone.calls, invalid.calls] {
                #expect(outcome == 1, "each handler runs exactly once")
            }
        }
    }

    @Test("perform(_:inZoneWith:completionHandler:) returns the first page of matches")
    func perform() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await TestDatabase.save(items(20) + items(3, prefix: "other", type: "Other"), in: database)
            let query = try Query(recordType: "Item", format: "even == %@", 1)
            query.sortDescriptors = [RecordSortDescriptor(key: "n", ascending: false)]
            let outcome = await Self.callback { database.perform(query, inZoneWith: nil, completionHandler: $0) }
            #expect(outcome.error == nil)
            #expect(outcome.value?.map(\.recordID.recordName) == (0..<20).filter { $0 % 2 == 0 }.reversed().map { recordName("item", $0) })

            let inDefault = await Self.callback { database.perform(Query(recordType: "Other"), inZoneWith: .default, completionHandler: $0) }
            #expect(inDefault.value?.count == 3)

            let failing = await Self.callback { database.perform(query, inZoneWith: RecordZone.ID(zoneName: "Nope"), completionHandler: $0) }
            #expect(failing.value == nil)
            #expect(stratusError(failing.error)?.code == .zoneNotFound)
            #expect(outcome.calls == 1 && inDefault.calls == 1 && failing.calls == 1)
        }
    }
}
