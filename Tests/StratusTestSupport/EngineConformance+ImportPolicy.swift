import Foundation
import Stratus
import Testing

// MARK: - Write policy as every way of saving applies it: operations, pipelines and the importer

extension EngineConformance {
    static let importPolicyCases: [TestCase] = [
        TestCase("references: a reference, reference list or parent into another zone is invalidArguments for every way of saving; nothing is stored", crossZoneReferencesRefused),
        TestCase("import: a dry run rejects what the real run does, batch after batch (a type grown by an earlier line, a record created twice, a cascade of a deletion), and changes nothing", dryRunMatchesRealRun),
        TestCase("import: children before their parents import whatever the batch size (chains, repeated lines in input order); as new writes an orphan is rejected at the end; restored, it keeps its missing parent", childrenBeforeParents),
        TestCase("import: killed between a batch's commit and its checkpoint while children wait for parents, a create-mode resume writes each record once", childrenBeforeParentsResume),
    ]

    /// A source of records in memory, one per line.
    final class RecordList: RecordSource {
        private var items: [RecordSourceItem]
        init(_ records: [Record]) { items = records.enumerated().map { .record($0.element, line: $0.offset + 1) } }
        init(items: [RecordSourceItem]) { self.items = items }
        func nextItem() throws -> RecordSourceItem? { items.isEmpty ? nil : items.removeFirst() }
    }

    /// A checkpoint store that fails (as a killed process stops) at its `failingSave`-th save,
    /// after the batch before it committed.
    final class CrashingCheckpoint: ImportCheckpointStore {
        var saved: ImportCheckpoint?
        var saves = 0
        var failingSave: Int?
        func load() throws -> ImportCheckpoint? { saved }
        func save(_ checkpoint: ImportCheckpoint) throws {
            saves += 1
            if saves == failingSave { throw StratusError(.internalError, "killed before the checkpoint moved") }
            saved = checkpoint
        }
        func remove() throws { saved = nil }
    }

    /// Every rejection an importer reported, in order.
    final class Rejections: RecordRejectSink {
        var all: [RecordRejection] = []
        func reject(_ rejection: RecordRejection) throws { all.append(rejection) }
    }

    static func crossZoneReferencesRefused(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        let other = RecordZone.ID(zoneName: "Other")
        _ = try await database.save(RecordZone(zoneID: other))
        try await database.save(makeRecord("Node", "t", zoneID: other))
        let target = Record.Reference(recordID: Record.ID(recordName: "t", zoneID: other), action: .deleteSelf)
        func offenders(_ prefix: String) -> [Record] {
            let byParent = makeRecord("Node", "\(prefix)-parent")
            byParent.parent = Record.Reference(recordID: target.recordID, action: .none)
            return [
                makeRecord("Node", "\(prefix)-reference", ["up": .reference(target)]),
                makeRecord("Node", "\(prefix)-list", ["ups": .referenceList([reference("t", .none), target])]),
                byParent,
            ]
        }
        func expectNothingStored(_ records: [Record], _ how: String) async throws {
            for record in records {
                #expect(try await TestDatabase.exists(record.recordID.recordName, in: database) == false, "\(how): \(record.recordID.recordName) stored")
            }
        }

        for atomic in [true, false] {
            let records = offenders(atomic ? "atomic" : "each")
            let report = await modify(database, saving: records, atomic: atomic, policy: .allKeys)
            for record in records {
                #expect(errorCode(report.saves[record.recordID]) == .invalidArguments, "ModifyRecordsOperation (atomic: \(atomic)): \(record.recordID.recordName)")
            }
            try await expectNothingStored(records, "ModifyRecordsOperation")
        }
        let single = offenders("save")[0]
        #expect(stratusError(await caughtError { try await database.save(single) })?.code == .invalidArguments, "database.save")

        let imported = offenders("import")
        let rejections = Rejections()
        let summary = try await RecordImporter(database: database).run(from: RecordList(imported), rejects: rejections)
        #expect(summary.failed == 3 && summary.created == 0, "RecordImporter: \(summary)")
        #expect(rejections.all.allSatisfy { $0.message.contains("zone 'Other'") }, "\(rejections.all.map(\.message))")
        try await expectNothingStored(imported, "RecordImporter")

        // Deleting the target in its own zone leaves the records of the default zone alone:
        // nothing points at it from there.
        try await database.save(makeRecord("Node", "bystander"))
        _ = try await database.modifyRecords(saving: [], deleting: [target.recordID])
        #expect(try await TestDatabase.exists("bystander", in: database))
    }

    static func dryRunMatchesRealRun(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        try await TestDatabase.save([
            makeRecord("Node", "list", ["n": .int64(1)]),
            makeRecord("Node", "entry", ["n": .int64(2), "up": .reference(reference("list", .deleteSelf))]),
        ], in: database)
        let input: [RecordSourceItem] = [
            .record(makeRecord("Node", "fresh", ["n": .int64(3), "label": .string("a")]), line: 1),
            .record(makeRecord("Node", "wrong", ["label": .int64(4)]), line: 2),
            .record(makeRecord("Node", "fresh", ["n": .int64(5)]), line: 3),
            .deletion(Record.ID(recordName: "list"), recordType: "Node", line: 4),
            .record(makeRecord("Node", "entry", ["n": .int64(6)]), line: 5),
        ]
        var options = RecordImporter.Options()
        options.writeMode = .create
        options.batchSize = 1
        options.isDryRun = true
        let dryRejects = Rejections()
        let dry = try await RecordImporter(database: database, options: options).run(from: RecordList(items: input), rejects: dryRejects)
        #expect(try await TestDatabase.exists("fresh", in: database) == false, "a dry run writes nothing")
        #expect(try await TestDatabase.exists("list", in: database), "a dry run deletes nothing")
        #expect(try await env.container().schema().recordType("Node")?.field("label") == nil, "a dry run grows no type")
        options.isDryRun = false
        let realRejects = Rejections()
        let real = try await RecordImporter(database: database, options: options).run(from: RecordList(items: input), rejects: realRejects)
        #expect(realRejects.all.map(\.line) == [2, 3], "\(realRejects.all.map(\.message))")
        #expect(dryRejects.all.map(\.line) == realRejects.all.map(\.line), "\(dryRejects.all.map(\.message))")
        #expect(dryRejects.all.map(\.message) == realRejects.all.map(\.message))
        #expect(dry.valid == 3 && dry.created == real.created && dry.deleted == real.deleted && dry.failed == real.failed, "\(dry) vs \(real)")
    }

    /// Items whose children come first: `c2` (twice) and `c1` before their parent `p`, which
    /// comes before its own parent `g`; `orphan`'s parent never comes; `plain` records between.
    static func familyInput(prefix: String = "") -> [RecordSourceItem] {
        func node(_ name: String, parent: String?, _ n: Int64) -> Record {
            let record = makeRecord("Node", prefix + name, ["n": .int64(n)])
            if let parent { record.parent = Record.Reference(recordID: Record.ID(recordName: prefix + parent), action: .none) }
            return record
        }
        let records = [
            node("c1", parent: "p", 1), node("plain1", parent: nil, 2), node("c2", parent: "p", 3), node("orphan", parent: "nobody", 4),
            node("p", parent: "g", 5), node("plain2", parent: nil, 6), node("g", parent: nil, 7), node("plain3", parent: nil, 8),
        ]
        var items = records.enumerated().map { RecordSourceItem.record($0.element, line: $0.offset + 1) }
        // c2 again after its first line, before its parent: applied after the first.
        items.insert(.record(node("c2", parent: "p", 33), line: 4), at: 3)
        return items.enumerated().map { index, item in
            guard case .record(let record, _) = item else { return item }
            return .record(record, line: index + 1)
        }
    }

    static func childrenBeforeParents(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        for (index, size) in [1, 2, 3, 2_000].enumerated() {
            let prefix = "b\(index)-"
            var options = RecordImporter.Options()
            options.batchSize = size
            options.preservesSystemFields = false   // new writes: a parent must exist
            let rejections = Rejections()
            let summary = try await RecordImporter(database: database, options: options).run(from: RecordList(items: familyInput(prefix: prefix)), rejects: rejections)
            #expect(rejections.all.map(\.recordName) == [prefix + "orphan"], "batches of \(size): \(rejections.all.map(\.message))")
            #expect(rejections.all.first?.message.contains("parent") == true)
            #expect(summary.created == 7 && summary.updated == 1 && summary.failed == 1, "batches of \(size): \(summary)")
            let c2 = try await database.record(for: Record.ID(recordName: prefix + "c2"))
            #expect(c2["n"] as? Int64 == 33, "the later line of c2 applies last (batches of \(size))")
            #expect(c2.parent?.recordID.recordName == prefix + "p")
        }
        // Restored as they were (the default), the orphan keeps its parent that never came, as
        // CloudKit keeps a child whose parent was deleted.
        var restoring = RecordImporter.Options()
        restoring.batchSize = 2
        let rejections = Rejections()
        let summary = try await RecordImporter(database: database, options: restoring).run(from: RecordList(items: familyInput(prefix: "r-")), rejects: rejections)
        #expect(rejections.all.isEmpty && summary.created == 8 && summary.updated == 1, "\(summary): \(rejections.all.map(\.message))")
        let orphan = try await database.record(for: Record.ID(recordName: "r-orphan"))
        #expect(orphan.parent?.recordID.recordName == "r-nobody")
    }

    static func childrenBeforeParentsResume(_ env: Environment) async throws {
        let database = env.container().publicCloudDatabase
        // Every save a kill could interrupt (1 names the job; the others follow batches).
        for failing in 2...8 {
            let prefix = "k\(failing)-"
            var options = RecordImporter.Options()
            options.batchSize = 1
            options.writeMode = .create
            options.preservesSystemFields = false   // new writes: a parent must exist
            let checkpoint = CrashingCheckpoint()
            checkpoint.failingSave = failing
            let firstRejects = Rejections()
            var first: RecordImporter.Summary?
            do {
                first = try await RecordImporter(database: database, options: options).run(from: RecordList(items: familyInput(prefix: prefix)), rejects: firstRejects, checkpoint: checkpoint)
            } catch let failure as RecordImporter.Failure {
                #expect(failure.stage == .checkpoint, "\(failure)")
                checkpoint.failingSave = nil
                let rejects = Rejections()
                _ = try await RecordImporter(database: database, options: options).run(from: RecordList(items: familyInput(prefix: prefix)), rejects: rejects, checkpoint: checkpoint)
                // In create mode, a line written twice would be rejected as existing.
                // c2's second line creates a record its first line created: rejected once, in
                // both runs together; nothing else is (a line written twice would be).
                let all = (firstRejects.all + rejects.all).map { $0.recordName ?? "" }
                #expect(all.sorted() == [prefix + "c2", prefix + "orphan"], "killed at save \(failing): \((firstRejects.all + rejects.all).map(\.message))")
            }
            if let first { #expect(first.failed == 2, "\(first)") }
            for name in ["c1", "c2", "p", "g", "plain1", "plain2", "plain3"] {
                #expect(try await TestDatabase.exists(prefix + name, in: database), "killed at save \(failing): \(name)")
            }
            #expect(try await TestDatabase.exists(prefix + "orphan", in: database) == false)
        }
    }
}
