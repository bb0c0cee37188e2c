import CloudKit
import Foundation
import StratusTestSupport
import Testing

// sqlite-data (pointfreeco) keeps a modification date per field beside each value, written
// through a setter of its own extension of CKRecordKeyValueSetting, on a record and on its
// encryptedValues alike. On Apple's platforms the protocol is class-bound and encryptedValues
// an object, so such a setter works through a `let` and a get-only property.
extension CKRecordKeyValueSetting {
    subscript(modifiedAt key: String) -> Date {
        get { self["\(key)_modifiedAt"] as? Date ?? .distantPast }
        set { self["\(key)_modifiedAt"] = newValue }
    }

    var editCount: Int64 {
        get { self["editCount"] as? Int64 ?? 0 }
        set { self["editCount"] = newValue }
    }
}

extension CKRecord {
    func setValue(_ value: String, forKey key: String, at date: Date, encrypted: Bool) {
        let values: any CKRecordKeyValueSetting = encrypted ? encryptedValues : self
        values[key] = value
        values[modifiedAt: key] = date
    }
}

@Suite struct PortedExtensionTests {
    @Test("setters of an app's CKRecordKeyValueSetting extension write to a record and to its encrypted values, and the writes are stored")
    func keyValueSettingExtensionSettersWrite() async throws {
        try await TemporaryStore.with { store in
            let database = try CKContainer(identifier: "iCloud.com.example.notes", storePath: store.path(), userName: "ada").privateCloudDatabase
            let zone = try await database.save(CKRecordZone(zoneName: "Notes"))
            let note = CKRecord(recordType: "Note", recordID: CKRecord.ID(recordName: "note-1", zoneID: zone.zoneID))
            let titled = Date(timeIntervalSince1970: 1_700_000_000)
            let hidden = Date(timeIntervalSince1970: 1_700_000_500)
            note.setValue("Groceries", forKey: "title", at: titled, encrypted: false)
            note.setValue("PIN 4921", forKey: "secret", at: hidden, encrypted: true)
            note.editCount = 2
            note.encryptedValues.editCount = 5

            #expect(note[modifiedAt: "title"] == titled)
            #expect(note.encryptedValues[modifiedAt: "secret"] == hidden)
            #expect(note[modifiedAt: "never"] == .distantPast)
            #expect(Set(note.encryptedValues.changedKeys()) == ["secret", "secret_modifiedAt", "editCount"])

            let fetched = try await database.record(for: try await database.save(note).recordID)
            #expect(fetched["title"] as? String == "Groceries")
            #expect(fetched[modifiedAt: "title"] == titled)
            #expect(fetched.encryptedValues["secret"] as? String == "PIN 4921")
            #expect(fetched.encryptedValues[modifiedAt: "secret"] == hidden)
            // One key holds one value: the encrypted write of editCount replaced the plain one.
            #expect(fetched.encryptedValues.editCount == 5)
        }
    }

    @Test("a CKQuery copies with its own sort order and archives with NSSecureCoding")
    func queryCopiesAndArchives() throws {
        let query = CKQuery(recordType: "Note", predicate: NSPredicate(format: "title BEGINSWITH %@ AND pinned == 1", "Gro"))
        query.sortDescriptors = [NSSortDescriptor(key: "modificationDate", ascending: false)]
        let copy = try #require(query.copy() as? CKQuery)
        #expect(copy !== query && copy.recordType == "Note" && copy.predicate == query.predicate)
        copy.sortDescriptors = nil
        #expect(query.sortDescriptors?.count == 1 && copy.sortDescriptors == nil, "the copy's sort order is its own")

        let data = try NSKeyedArchiver.archivedData(withRootObject: query, requiringSecureCoding: true)
        let restored = try #require(try NSKeyedUnarchiver.unarchivedObject(ofClass: CKQuery.self, from: data))
        #expect(restored.recordType == "Note" && restored.predicate == query.predicate)
        #expect(restored.sortDescriptors == query.sortDescriptors)
        #expect(restored.description == query.description)

        let unsorted = CKQuery(recordType: "Note", predicate: NSPredicate(value: true))
        let restoredUnsorted = try #require(try NSKeyedUnarchiver.unarchivedObject(ofClass: CKQuery.self,
                                                                                   from: NSKeyedArchiver.archivedData(withRootObject: unsorted, requiringSecureCoding: true)))
        #expect(restoredUnsorted.sortDescriptors == nil, "no order stays no order, not an empty one")

    }
}
