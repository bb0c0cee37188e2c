import Stratus
// The test's store on each engine (scaffolding; the port itself imports Stratus alone).
import StratusTestSupport
import Testing

// A sync operation written against CloudKit with `import CloudKit` as its only import of
// Apple's frameworks (Nick Harris's CloudKitSyncPOC, as updated for Swift 4): it uses `Data`,
// `UserDefaults` and `NSKeyedArchiver`, which CloudKit's module makes visible, and subclasses
// CKModifyRecordsOperation through its designated `init()`. Ported with `import Stratus` alone.
final class SaveChangedNotesOperation: ModifyRecordsOperation, @unchecked Sendable {
    let tokenKey: String

    init(notes: [Record], tokenKey: String) {
        self.tokenKey = tokenKey
        super.init()
        recordsToSave = notes
        savePolicy = .changedKeys
    }

    // class ModifyRecordsFromManagedObjectsOperation: CKModifyRecordsOperation { override init() { super.init() } … }
    override init() {
        tokenKey = "none"
        super.init()
    }
}

@Suite("CloudKit code whose only import is CloudKit")
struct StratusImportAloneTests {
    @Test("Foundation's types are visible through import Stratus, and ModifyRecordsOperation has CloudKit's designated init() to override", arguments: TestEngine.all)
    func foundationThroughStratus(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let zone = try await database.save(RecordZone(zoneName: "Notes"))

            let note = Record(recordType: "Note", recordID: Record.ID(recordName: "n1", zoneID: zone.zoneID))
            note["body"] = Data("hello".utf8)
            let save = SaveChangedNotesOperation(notes: [note], tokenKey: "notes-token")
            let plain = SaveChangedNotesOperation()
            #expect(plain.recordsToSave == nil && plain.tokenKey == "none")
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                save.modifyRecordsResultBlock = { continuation.resume(with: $0) }
                database.add(save)
            }

            // The change token, archived into UserDefaults as the original does.
            let changes = try await database.recordZoneChanges(inZoneWith: zone.zoneID, since: nil)
            let archived = try NSKeyedArchiver.archivedData(withRootObject: changes.changeToken, requiringSecureCoding: true)
            let defaults = UserDefaults(suiteName: "stratus-import-alone-\(UUID().uuidString)")!
            defaults.set(archived, forKey: save.tokenKey)
            let restored = try NSKeyedUnarchiver.unarchivedObject(ofClass: ServerChangeToken.self, from: defaults.data(forKey: save.tokenKey) ?? Data())
            #expect(restored == changes.changeToken)
            let again = try await database.recordZoneChanges(inZoneWith: zone.zoneID, since: restored)
            #expect(again.modificationResultsByID.isEmpty)
            let fetched = try await database.record(for: note.recordID)
            #expect(fetched["body"] as? Data == Data("hello".utf8))
        }
    }
}
