import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// A model type that keeps some fields encrypted and writes them through one
// `CKRecordKeyValueSetting` value, as encryption-minded apps do:
// `let values: any CKRecordKeyValueSetting = encrypt ? record.encryptedValues : record`,
// keys as `extension CKRecord.FieldKey { static let … }`, typed reads with `??` defaults.

extension Record.FieldKey {
    static let contactName = "name"
    static let contactPhone = "phoneNumber"
    static let contactVisits = "visits"
}

struct Contact {
    var name: String
    var phoneNumber: String
    var visits: Int

    static let recordType: Record.RecordType = "Contact"

    // init(record: CKRecord) { let values: any CKRecordKeyValueSetting = record.encryptedValues; … }
    init(record: Record) {
        let encrypted: any RecordKeyValueSetting = record.encryptedValues
        name = record[.contactName] ?? ""
        phoneNumber = encrypted[.contactPhone] ?? ""
        visits = encrypted[.contactVisits] ?? 0
    }

    init(name: String, phoneNumber: String, visits: Int) {
        self.name = name
        self.phoneNumber = phoneNumber
        self.visits = visits
    }

    // func populate(_ record: CKRecord, encrypt: Bool) { let values: CKRecordKeyValueSetting = encrypt ? record.encryptedValues : record; … }
    func populate(_ record: Record) {
        write(to: record, [.contactName: name])
        write(to: record.encryptedValues, [.contactPhone: phoneNumber, .contactVisits: visits])
    }

    private func write(to values: any RecordKeyValueSetting, _ fields: [Record.FieldKey: any RecordValue]) {
        for (key, value) in fields {
            values[key] = value
        }
    }
}

@Suite("A model with encrypted fields written through CKRecordKeyValueSetting")
struct EncryptedFieldsModelTests {
    @Test("record and record.encryptedValues as one CKRecordKeyValueSetting; the encrypted keys round-trip", arguments: TestEngine.all)
    func keyValueSetting(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let database = container.privateCloudDatabase
            let zone = try await database.save(RecordZone(zoneName: "Contacts"))
            let record = Record(recordType: Contact.recordType, recordID: RecordID(recordName: "c1", zoneID: zone.zoneID))
            Contact(name: "Ada", phoneNumber: "+1 555 0100", visits: 3).populate(record)
            let encrypted: any RecordKeyValueSetting = record.encryptedValues
            #expect(encrypted.allKeys() == [.contactPhone, .contactVisits])
            #expect(encrypted.changedKeys().sorted() == [.contactPhone, .contactVisits])
            #expect((record as any RecordKeyValueSetting).changedKeys().sorted() == [.contactName, .contactPhone, .contactVisits])

            _ = try await database.save(record)
            let fetched = try await database.record(for: record.recordID)
            #expect(fetched.encryptedKeys == [.contactPhone, .contactVisits])
            let contact = Contact(record: fetched)
            #expect(contact.name == "Ada" && contact.phoneNumber == "+1 555 0100" && contact.visits == 3)

            // Removing through the protocol removes the field, as setObject(nil, forKey:) does.
            let values: any RecordKeyValueSetting = fetched.encryptedValues
            values.setObject(nil, forKey: .contactVisits)
            #expect(values.object(forKey: .contactVisits) == nil && values.changedKeys() == [.contactVisits])
            let saved = try await database.save(fetched)
            #expect(saved.encryptedValues.allKeys() == [.contactPhone])
            #expect(Contact(record: saved).visits == 0)
        }
    }
}
