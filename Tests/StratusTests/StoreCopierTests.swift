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

/// A checkpoint kept in memory that keeps every checkpoint saved, and fails the save after
/// `failingAfter` of them, as a kill stops a copy between two saves.
final class HistoryCopyCheckpoint: StoreCopier.CheckpointStore, @unchecked Sendable {
    // @unchecked: used by one copy at a time, from its task.
    var history: [StoreCopier.Checkpoint] = []
    let failingAfter: Int

    init(failingAfter: Int) { self.failingAfter = failingAfter }

    func load() throws -> StoreCopier.Checkpoint? { nil }
    func save(_ checkpoint: StoreCopier.Checkpoint) throws {
        guard history.count < failingAfter else { throw StratusError(.internalError, "killed") }
        history.append(checkpoint)
    }
}

/// A checkpoint that starts from a saved one, keeps every checkpoint saved, and fails the save
/// after `failingAfter` of them, as a kill stops a copy that went on from a checkpoint.
final class ResumedCopyCheckpoint: StoreCopier.CheckpointStore, @unchecked Sendable {
    // @unchecked: used by one copy at a time, from its task.
    let start: StoreCopier.Checkpoint
    var history: [StoreCopier.Checkpoint] = []
    let failingAfter: Int

    init(_ start: StoreCopier.Checkpoint, failingAfter: Int) {
        self.start = start
        self.failingAfter = failingAfter
    }

    func load() throws -> StoreCopier.Checkpoint? { history.last ?? start }
    func save(_ checkpoint: StoreCopier.Checkpoint) throws {
        guard history.count < failingAfter else { throw StratusError(.internalError, "killed") }
        history.append(checkpoint)
    }
}

/// A copy checkpoint as the version of dd9973b encodes it: every zone copied, listed.
private struct ListingCopyCheckpoint: Encodable {
    var sourceIdentifier: String
    var destinationIdentifier: String
    var schemasCopied: Bool
    var zonesCopied: [StoreCopier.ZoneKey]
    var position: StoreCopier.Checkpoint.Position?
}

/// The destination's record of a copy as the version of dd9973b writes it.
private struct ListingDestinationProgress: Encodable {
    var zonesCopied: Int
    var position: StoreCopier.Checkpoint.Position?
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

    /// ``fill(_:)``, then `zones` more zones (`Z00`, `Z01`…) of `records` records each.
    static func fillWithZones(_ engine: SQLiteEngine, zones: Int, records: Int) async throws {
        try await fill(engine)
        let database = Container(identifier: "com.example.copy", engine: engine, userName: "alice").publicCloudDatabase
        let zoneIDs = (0..<zones).map { RecordZone.ID(zoneName: String(format: "Z%02d", $0)) }
        _ = try await database.modifyRecordZones(saving: zoneIDs.map { RecordZone(zoneID: $0) }, deleting: [])
        let all = zoneIDs.flatMap { zone in
            (0..<records).map { index in
                let record = Record(recordType: index % 2 == 0 ? "Item" : "Part", recordID: Record.ID(recordName: String(format: "%@-%03d", zone.zoneName, index), zoneID: zone))
                record["n"] = Int64(index)
                return record
            }
        }
        _ = try await database.modifyRecords(saving: all, deleting: [])
    }

    /// Every zone of `engine`'s inventory, in the order a copy goes through them.
    static func zoneKeys(_ engine: SQLiteEngine) throws -> [StoreCopier.ZoneKey] {
        try engine.inventory().databases.flatMap { database in database.zones.map { StoreCopier.ZoneKey(database: database, zone: $0.zone.zoneID) } }.sorted()
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
            let complete = try #require(checkpoint.saved)
            #expect(complete.zonesCopiedThrough?.zoneName == "_defaultZone" && complete.zonesNotCopied.isEmpty && complete.position == nil,
                    "a complete copy's checkpoint says every zone is copied: \(complete)")
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
            let copier = StoreCopier(from: source, to: destination, batchSize: 100, checkpointInterval: .zero)
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
            // The first copier was cancelled: its comparison would stop at once.
            let comparisons = try await StoreCopier(from: source, to: destination).compare()
            #expect(comparisons.count == 2 && comparisons.allSatisfy(\.matches), "\(comparisons)")
        }
    }

    @Test("compare() of a cancelled copier stops with CancellationError (a signal does not wait for both stores to be read whole)")
    func compareStopsWhenCancelled() async throws {
        try await TemporaryStore.with { store in
            let (source, destination) = try await Self.filledSourceAndEmptyDestination(store)
            let copier = StoreCopier(from: source, to: destination)
            #expect(try await copier.run().failures.isEmpty)
            copier.cancel()
            await #expect(throws: CancellationError.self) { _ = try await copier.compare() }
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

    @Test("a copy of many zones killed between two checkpoints goes on from the last one saved (its destination holds more) and ends with exactly the source; its checkpoint names no zone it copied")
    func killedBetweenCheckpointsAmongManyZones() async throws {
        try await TemporaryStore.with { store in
            let source = try SQLiteEngine(path: store.path("source.sqlite"))
            let destination = try SQLiteEngine(path: store.path("destination.sqlite"))
            try await Self.fillWithZones(source, zones: 40, records: 7)
            let keys = try Self.zoneKeys(source)
            // A save after every batch and zone, until the 60th fails as a kill would stop it.
            let killed = HistoryCopyCheckpoint(failingAfter: 60)
            await #expect(throws: StratusError.self) {
                try await StoreCopier(from: source, to: destination, batchSize: 4, checkpointInterval: .zero).run(checkpointStore: killed)
            }
            // A checkpoint saved mid-way: the destination holds what the copy wrote after it.
            let midway = killed.history[30]
            let through = try #require(midway.zonesCopiedThrough)
            #expect(midway.zonesCopied.isEmpty && midway.zonesNotCopied.isEmpty, "\(midway)")
            let passed = keys.filter { $0 <= through }.count
            #expect(passed > 5 && passed < keys.count - 10, "mid-way: \(passed) of \(keys.count) zones")

            let checkpoint = MemoryCopyCheckpoint()
            checkpoint.saved = midway
            let resumed = try await StoreCopier(from: source, to: destination, batchSize: 4).run(checkpointStore: checkpoint)
            #expect(resumed.end == .finished && resumed.failures.isEmpty, "\(resumed)")
            #expect(resumed.zonesSkipped == passed && resumed.zonesCopied == keys.count - passed, "\(resumed)")
            let comparisons = try await StoreCopier(from: source, to: destination).compare()
            #expect(comparisons.count == keys.count && comparisons.allSatisfy(\.matches), "\(comparisons.filter { !$0.matches })")
            let complete = try #require(checkpoint.saved)
            #expect(complete.zonesCopiedThrough == keys.last && complete.zonesNotCopied.isEmpty && complete.zonesCopied.isEmpty && complete.position == nil)
            #expect(keys.allSatisfy(complete.isCopied))
        }
    }

    @Test("a checkpoint written by the version of dd9973b (every zone copied listed), with the destination's record of it, is gone on from: the zones it lists are skipped, its zone is copied from its position, and the copy ends with exactly the source")
    func goesOnFromListingCheckpoint() async throws {
        try await TemporaryStore.with { store in
            let source = try SQLiteEngine(path: store.path("source.sqlite"))
            let destination = try SQLiteEngine(path: store.path("destination.sqlite"))
            try await Self.fillWithZones(source, zones: 12, records: 9)
            let keys = try Self.zoneKeys(source)
            // The destination holds what a copy stopped mid-way wrote: up to a position in a zone.
            let killed = HistoryCopyCheckpoint(failingAfter: 25)
            await #expect(throws: StratusError.self) {
                try await StoreCopier(from: source, to: destination, batchSize: 4, checkpointInterval: .zero).run(checkpointStore: killed)
            }
            let stopped = try #require(killed.history.last { $0.position != nil && $0.zonesCopiedThrough != nil })
            let position = try #require(stopped.position)
            let listed = keys.filter { $0 <= stopped.zonesCopiedThrough! }
            let sourceIdentifier = try source.storeIdentifier
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            let file = try encoder.encode(ListingCopyCheckpoint(sourceIdentifier: sourceIdentifier, destinationIdentifier: try destination.storeIdentifier,
                                                                schemasCopied: true, zonesCopied: listed, position: position))
            #expect(!String(decoding: file, as: UTF8.self).contains("zonesCopiedThrough"))
            let record = String(decoding: try JSONEncoder().encode(ListingDestinationProgress(zonesCopied: listed.count, position: position)), as: UTF8.self)
            let context = DatabaseContext.administrator(containerIdentifier: position.zone.containerIdentifier, environment: .development, scope: .public, owner: "")
            try destination.writeRecords(in: context) { try $0.saveJobProgress("stratus.copy." + sourceIdentifier, position: Int64(listed.count), text: record) }

            let checkpoint = MemoryCopyCheckpoint()
            checkpoint.saved = try JSONDecoder().decode(StoreCopier.Checkpoint.self, from: file)
            let resumed = try await StoreCopier(from: source, to: destination, batchSize: 4).run(checkpointStore: checkpoint)
            #expect(resumed.end == .finished && resumed.failures.isEmpty, "\(resumed)")
            #expect(resumed.zonesSkipped == listed.count && resumed.zonesCopied == keys.count - listed.count, "\(resumed)")
            // Every record after the position: those of the listed zones and up to it are not copied again.
            let inventory = try source.inventory()
            let total = inventory.databases.reduce(0) { $0 + $1.zones.reduce(0) { $0 + $1.recordCounts.values.reduce(0, +) } }
            let inListed = inventory.databases.reduce(0) { sum, database in
                sum + database.zones.filter { listed.contains(StoreCopier.ZoneKey(database: database, zone: $0.zone.zoneID)) }.reduce(0) { $0 + $1.recordCounts.values.reduce(0, +) }
            }
            let reader = Container(identifier: "com.example.copy", engine: source, userName: "alice").publicCloudDatabase
            var upToPosition = 0
            for try await copied in reader.allRecords(matching: Query(recordType: position.recordType), inZoneWith: position.zone.zoneID) {
                if !position.recordName.utf8.lexicographicallyPrecedes(copied.recordID.recordName.utf8) { upToPosition += 1 }
            }
            let before = try #require(inventory.databases.flatMap(\.zones).first { $0.zone.zoneID == position.zone.zoneID })
            upToPosition += before.recordCounts.filter { $0.key.utf8.lexicographicallyPrecedes(position.recordType.utf8) }.values.reduce(0, +)
            #expect(upToPosition > 0)
            #expect(resumed.recordsCopied == total - inListed - upToPosition, "\(resumed.recordsCopied) of \(total)")
            let comparisons = try await StoreCopier(from: source, to: destination).compare()
            #expect(comparisons.count == keys.count && comparisons.allSatisfy(\.matches), "\(comparisons.filter { !$0.matches })")
            let complete = try #require(checkpoint.saved)
            #expect(complete.zonesCopied == listed && complete.zonesCopiedThrough == keys.last && keys.allSatisfy(complete.isCopied))
        }
    }

    @Test("zones made in the source after a copy stopped that sort before the last zone it passed are copied when it goes on, also when it is killed again and again while it copies them; a zone deleted from the source since stays in the destination, and compare() names it")
    func goesOnWithZonesMadeBeforeItsMark() async throws {
        try await TemporaryStore.with { store in
            let source = try SQLiteEngine(path: store.path("source.sqlite"))
            let destination = try SQLiteEngine(path: store.path("destination.sqlite"))
            try await Self.fillWithZones(source, zones: 20, records: 7)
            let killed = HistoryCopyCheckpoint(failingAfter: 40)
            await #expect(throws: StratusError.self) {
                try await StoreCopier(from: source, to: destination, batchSize: 4, checkpointInterval: .zero).run(checkpointStore: killed)
            }
            var saved = killed.history[20]
            let through = try #require(saved.zonesCopiedThrough)
            let passed = try Self.zoneKeys(source).filter { $0 <= through }
            #expect(passed.count > 2, "mid-way: \(passed)")

            // Made after the stop: zones of the same database whose names sort before every zone
            // passed, and a container whose name sorts first, with records in its default zone.
            let database = Container(identifier: "com.example.copy", engine: source, userName: "alice").publicCloudDatabase
            let early = ["A0", "A1", "A2"].map { RecordZone.ID(zoneName: $0) }
            _ = try await database.modifyRecordZones(saving: early.map { RecordZone(zoneID: $0) }, deleting: [])
            _ = try await database.modifyRecords(saving: early.flatMap { zone in
                (0..<7).map { index in
                    let record = Record(recordType: "Item", recordID: Record.ID(recordName: "\(zone.zoneName)-\(index)", zoneID: zone))
                    record["n"] = Int64(index)
                    return record
                }
            }, deleting: [])
            let first = Container(identifier: "com.example.aaa", engine: source, userName: "alice").publicCloudDatabase
            _ = try await first.modifyRecords(saving: (0..<5).map { Record(recordType: "Item", recordID: Record.ID(recordName: "first-\($0)")) }, deleting: [])
            // A zone the copy passed, deleted from the source since.
            let gone = try #require(passed.first { $0.zoneName == "Z00" })
            let administrator = Database(engine: source, context: .administrator(containerIdentifier: "com.example.copy", environment: .development, scope: .public, owner: ""))
            let deleted = try await administrator.modifyRecordZones(saving: [], deleting: [gone.zoneID]).deleteResults[gone.zoneID]
            #expect(throws: Never.self) { try deleted?.get() }
            #expect(try Self.zoneKeys(source).contains(gone) == false)
            let made = try Self.zoneKeys(source).filter { $0.zoneName.hasPrefix("A") || $0.containerIdentifier == "com.example.aaa" }
            #expect(made.count == 4 && made.allSatisfy { $0 < through && saved.isCopied($0) }, "\(made)")

            // Runs killed at their third save, each going on from the last one saved, then one to the end.
            var stoppedInMadeZone = false
            for _ in 0..<8 {
                let run = ResumedCopyCheckpoint(saved, failingAfter: 3)
                do {
                    _ = try await StoreCopier(from: source, to: destination, batchSize: 4, checkpointInterval: .zero).run(checkpointStore: run)
                    break
                } catch let error as StratusError where error.message == "killed" {
                    saved = run.history.last ?? saved
                }
                if let zone = saved.position?.zone, made.contains(zone) { stoppedInMadeZone = true }
            }
            #expect(stoppedInMadeZone, "a run was killed while it copied a zone made since")
            let last = try await StoreCopier(from: source, to: destination, batchSize: 4).run(checkpointStore: ResumedCopyCheckpoint(saved, failingAfter: .max))
            #expect(last.end == .finished && last.failures.isEmpty, "\(last)")
            let differing = try await StoreCopier(from: source, to: destination).compare().filter { !$0.matches }
            #expect(differing.map(\.zone) == [gone], "only the zone the source no longer holds differs: \(differing)")
            #expect(differing.first?.source.records == 0 && differing.first?.destination.records == 7)
        }
    }
}
