import Foundation
import Stratus
import Testing

// MARK: - Write policy as every way of saving applies it: operations, pipelines and the importer

extension EngineConformance {
    static let importPolicyCases: [TestCase] = [
        TestCase("references: a reference, reference list or parent into another zone is invalidArguments for every way of saving; nothing is stored", crossZoneReferencesRefused),
        TestCase("import: a dry run rejects what the real run does, batch after batch (a type grown by an earlier line, a record created twice, a cascade of a deletion), and changes nothing", dryRunMatchesRealRun),
    ]

    /// A source of records in memory, one per line.
    final class RecordList: RecordSource {
        private var items: [RecordSourceItem]
        init(_ records: [Record]) { items = records.enumerated().map { .record($0.element, line: $0.offset + 1) } }
        init(items: [RecordSourceItem]) { self.items = items }
        func nextItem() throws -> RecordSourceItem? { items.isEmpty ? nil : items.removeFirst() }
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
}
