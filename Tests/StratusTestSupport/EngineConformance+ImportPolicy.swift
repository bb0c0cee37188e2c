import Foundation
import Stratus
import Testing

// MARK: - Write policy as every way of saving applies it: operations, pipelines and the importer

extension EngineConformance {
    static let importPolicyCases: [TestCase] = [
        TestCase("references: a reference, reference list or parent into another zone is invalidArguments for every way of saving; nothing is stored", crossZoneReferencesRefused),
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
}
