import Foundation
@_spi(StratusEngine) import Stratus
import StratusSQLite
import StratusTestSupport
import Synchronization
import Testing

/// A checkpoint kept in memory, counting its saves.
final class MemoryCopyCheckpoint: StoreCopier.CheckpointStore, @unchecked Sendable {
    // @unchecked: used by one copy at a time, from its task.
    var saved: StoreCopier.Checkpoint?
    var saves = 0

    func load() throws -> StoreCopier.Checkpoint? { saved }
    func save(_ checkpoint: StoreCopier.Checkpoint) throws {
        saved = checkpoint
        saves += 1
    }
}

/// ``StoreCopier`` through its public API: cancel and resume, what compare() finds.
@Suite("StoreCopier", .timeLimit(.minutes(30)))
struct StoreCopierTests {
    static func fill(_ engine: SQLiteEngine) async throws {
        let database = Container(identifier: "com.example.copy", engine: engine, userName: "alice").publicCloudDatabase
        _ = try await database.modifyRecords(saving: items(1_200), deleting: [])
        try await database.save(RecordZone(zoneName: "Side"))
        _ = try await database.modifyRecords(saving: items(30, prefix: "side").map { record in
            let copy = Record(recordType: record.recordType, recordID: Record.ID(recordName: record.recordID.recordName, zoneID: RecordZone.ID(zoneName: "Side")))
            for (key, value) in record.fieldValues { copy.setFieldValue(value, forKey: key) }
            return copy
        }, deleting: [])
    }

    /// A source store filled by ``fill(_:)`` and an empty destination, in `store`'s folder.
    static func filledSourceAndEmptyDestination(_ store: TemporaryStore) async throws -> (SQLiteEngine, SQLiteEngine) {
        let source = try SQLiteEngine(path: store.path("source.sqlite"))
        let destination = try SQLiteEngine(path: store.path("destination.sqlite"))
        try await fill(source)
        return (source, destination)
    }

    @Test("cancelled after a batch, the copy keeps its checkpoint; run again it goes on and ends with the source; once complete, a run again copies nothing")
    func cancelAndResume() async throws {
        try await TemporaryStore.with { store in
            let (source, destination) = try await Self.filledSourceAndEmptyDestination(store)
            let copier = StoreCopier(from: source, to: destination, batchSize: 100)
            let checkpoint = MemoryCopyCheckpoint()
            let progressed = Atomic<Int>(0)
            let first = try await copier.run(checkpointStore: checkpoint) { copied in
                progressed.store(copied, ordering: .relaxed)
                if copied >= 300 { copier.cancel() }
            }
            #expect(first.end == .cancelled)
            // Zone Side (30 records) sorts before _defaultZone, then batches of 100 up to 300.
            #expect(first.recordsCopied == 330 && progressed.load(ordering: .relaxed) == 330)
            #expect(first.zonesCopied == 1)
            let position = try #require(checkpoint.saved?.position)
            #expect(position.recordType == "Item" && position.recordName == "item-00299")

            let again = StoreCopier(from: source, to: destination, batchSize: 100)
            let second = try await again.run(checkpointStore: checkpoint)
            #expect(second.end == .finished && second.failures.isEmpty)
            #expect(second.recordsCopied == 1_230 - 330 && second.zonesSkipped == 1, "the second run starts after the checkpoint")
            #expect(checkpoint.saved?.zonesCopied.count == 2 && checkpoint.saved?.position == nil, "a complete copy's checkpoint says every zone is copied")
            let third = try await StoreCopier(from: source, to: destination).run(checkpointStore: checkpoint)
            #expect(third.recordsCopied == 0 && third.zonesSkipped == 2, "run again, it copies nothing")
            let comparisons = try await again.compare()
            #expect(comparisons.count == 2 && comparisons.allSatisfy(\.matches), "\(comparisons)")
            #expect(comparisons.map(\.source.records).sorted() == [30, 1_200])
        }
    }

    @Test("a destination that lost its last commits (asynchronous commit, a failover) holds less than the checkpoint says: the copy goes on from what the destination holds and ends with the source")
    func destinationLostCommits() async throws {
        try await TemporaryStore.with { store in
            let (source, destination) = try await Self.filledSourceAndEmptyDestination(store)
            let job = "stratus.copy." + (try source.storeIdentifier)
            let copier = StoreCopier(from: source, to: destination, batchSize: 100)
            let checkpoint = MemoryCopyCheckpoint()
            let recordAt200 = Mutex<String?>(nil)
            _ = try await copier.run(checkpointStore: checkpoint) { copied in
                // Side's 30, then the default zone's first 200: what the destination recorded then.
                if copied == 230 { recordAt200.withLock { $0 = try? destination.jobProgressText(job) } }
                if copied >= 300 { copier.cancel() }
            }
            #expect(checkpoint.saved?.position?.recordName == "item-00299")
            let earlier = try #require(recordAt200.withLock { $0 })
            // The destination loses its last batch and the record written after it.
            let copy = Container(identifier: "com.example.copy", engine: destination, userName: "alice").publicCloudDatabase
            _ = try await copy.modifyRecords(saving: [], deleting: (200..<300).map { Record.ID(recordName: String(format: "item-%05d", $0)) })
            let context = DatabaseContext.administrator(containerIdentifier: "com.example.copy", environment: .development, scope: .public, owner: "")
            try destination.writeRecords(in: context) { try $0.saveJobProgress(job, position: 1, text: earlier) }

            let resumed = try await StoreCopier(from: source, to: destination, batchSize: 100).run(checkpointStore: checkpoint)
            #expect(resumed.end == .finished && resumed.failures.isEmpty)
            #expect(resumed.recordsCopied == 1_000, "from item-00200 on: \(resumed)")
            let comparisons = try await copier.compare()
            #expect(comparisons.count == 2 && comparisons.allSatisfy(\.matches), "\(comparisons)")
        }
    }

    @Test("compare() finds a zone whose records differ in a field, a change tag or a count, and a zone only the destination has")
    func compareFindsDifferences() async throws {
        try await TemporaryStore.with { store in
            let (source, destination) = try await Self.filledSourceAndEmptyDestination(store)
            let copier = StoreCopier(from: source, to: destination)
            #expect(try await copier.run().failures.isEmpty)
            #expect(try await copier.compare().allSatisfy(\.matches))

            let copy = Container(identifier: "com.example.copy", engine: destination, userName: "alice").publicCloudDatabase
            let changed = try await copy.record(for: Record.ID(recordName: "item-00007"))
            changed["n"] = Int64(-7)
            _ = try await copy.save(changed)
            let differing = try await copier.compare().filter { !$0.matches }
            #expect(differing.map(\.zone.zoneName) == ["_defaultZone"])
            #expect(differing.first?.source.records == differing.first?.destination.records, "same count, another checksum")

            let other = Container(identifier: "com.example.extra", engine: destination, userName: "bob").privateCloudDatabase
            _ = try await other.save(Record(recordType: "Stray", recordID: Record.ID(recordName: "stray")))
            let all = try await copier.compare()
            let extra = try #require(all.last)
            #expect(extra.zone.containerIdentifier == "com.example.extra" && extra.zone.owner == UserDirectoryEntry.derivedRecordName(containerIdentifier: "com.example.extra", login: "bob") && extra.source.records == 0 && extra.destination.records == 1)
            #expect(!extra.matches)
        }
    }

    @Test("the destination's schemas are the source's after a copy, also where records hold types and fields the development schema dropped; differingSchemas() names a schema that differs")
    func schemasAfterRecords() async throws {
        try await TemporaryStore.with { store in
            let (source, destination) = try await Self.filledSourceAndEmptyDestination(store)
            let container = Container(identifier: "com.example.copy", engine: source, userName: "alice")
            let gone = Record(recordType: "Gone", recordID: Record.ID(recordName: "gone-1"))
            gone["note"] = "kept by the record, dropped by the schema"
            _ = try await container.publicCloudDatabase.save(gone)
            var schema = try await container.schema()
            schema.recordTypes.removeAll { $0.recordType == "Gone" }
            let itemIndex = try #require(schema.recordTypes.firstIndex { $0.recordType == "Item" })
            schema.recordTypes[itemIndex].fields.removeAll { $0.name == "even" }
            _ = try await container.replaceSchema(schema)
            let kept = try await container.schema()

            let copier = StoreCopier(from: source, to: destination)
            #expect(try await copier.run().failures.isEmpty)
            #expect(try await copier.compare().allSatisfy(\.matches))
            let copied = try await Container(identifier: "com.example.copy", engine: destination, userName: "alice").schema()
            #expect(copied == kept, "no type or field grows back from the records: \(copied.recordTypes.map(\.recordType))")
            #expect(try await copier.differingSchemas().isEmpty)

            var other = kept
            other.recordTypes.removeAll { $0.recordType == "Item" }
            _ = try await Container(identifier: "com.example.copy", engine: destination, userName: "alice").replaceSchema(other)
            #expect(try await copier.differingSchemas() == ["com.example.copy (development)"])
        }
    }

    @Test("a destination that holds records is refused without a checkpoint; a checkpoint of other stores is refused")
    func refusals() async throws {
        try await TemporaryStore.with { store in
            let (source, destination) = try await Self.filledSourceAndEmptyDestination(store)
            try await Self.fill(destination)
            await #expect(throws: StratusError.self) { try await StoreCopier(from: source, to: destination).run() }
            let foreign = MemoryCopyCheckpoint()
            foreign.saved = StoreCopier.Checkpoint(sourceIdentifier: "a", destinationIdentifier: "b")
            let error = await #expect(throws: StratusError.self) { try await StoreCopier(from: source, to: destination).run(checkpointStore: foreign) }
            #expect(error?.message.contains("other stores") == true)
        }
    }
}
