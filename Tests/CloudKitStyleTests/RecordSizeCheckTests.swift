import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// The record encoder of Harmony (aaronpearce/Harmony, Harmony/CKRecordCoder/CKRecordEncoder.swift),
// ported mechanically. Its CloudKit habits that other ported code does not have: the values
// an `Encoder` collects are kept as `[String: CKRecordValue]` keyed by the coding path joined with
// `_`; the record is named `"<type>|<name>"`, or rebuilt from archived system fields by a
// `static func decodeSystemFields(with:)` (`NSKeyedUnarchiver(forReadingFrom:)`,
// `requiresSecureCoding = true`, `CKRecord(coder:)`, `finishDecoding()`); and before the record
// is handed out, its size is checked by archiving that dictionary with
// `NSKeyedArchiver.archivedData(withRootObject:requiringSecureCoding:)` and comparing with
// CloudKit's 1 MB, the message sized with a `ByteCountFormatter`. The values here are strings,
// numbers, dates, data and lists of them; a dictionary holding a `Record.Reference`, `Location`
// or `Asset` does not archive on Linux (README, "Archiving"). The CloudKit original is in the
// comments.

@Suite("Harmony's record encoder with its size check, ported")
struct RecordSizeCheckTests {
    struct Note: Codable, HRecord {
        static let recordType = "Note"
        var id: String
        var title: String
        var body: String
        var pinned: Bool
        var rating: Double
        var tags: [String]
        var created: Date
        var attachment: Data
        var recordID: Record.ID { Record.ID(recordName: id) }
    }

    @Test("a model encodes into a record named type|name; its system fields bring the change tag back", arguments: TestEngine.all)
    func encodeAndRestore(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let zone = RecordZone.ID(zoneName: "Notes", ownerName: CurrentUserDefaultName)
            let database = container.privateCloudDatabase
            _ = try await database.modifyRecordZones(saving: [RecordZone(zoneID: zone)], deleting: [])
            let note = Note(id: "n1", title: "Groceries", body: "eggs", pinned: true, rating: 4.5, tags: ["home", "list"],
                            created: Date(timeIntervalSince1970: 1_700_000_000), attachment: Data([1, 2, 3]))
            let record = try CKRecordEncoder(zoneID: zone).encode(note)
            #expect(record.recordID == Record.ID(recordName: "Note|n1", zoneID: zone))
            #expect(record["title"] as? String == "Groceries")
            #expect(record["pinned"] as? Bool == true)
            #expect(record["rating"] as? Double == 4.5)
            #expect(record["tags"] as? [String] == ["home", "list"])
            #expect(record["created"] as? Date == note.created)
            #expect(record["attachment"] as? Data == Data([1, 2, 3]))
            let saved = try await database.save(record)

            // The app keeps the system fields, as Harmony does, and rebuilds the record from them.
            let archiver = NSKeyedArchiver(requiringSecureCoding: true)
            saved.encodeSystemFields(with: archiver)
            archiver.finishEncoding()
            let restored = try #require(CKRecordEncoder.decodeSystemFields(with: archiver.encodedData))
            #expect(restored.recordID == saved.recordID)
            #expect(restored.recordChangeTag == saved.recordChangeTag)
            restored["title"] = "Groceries for Sunday"
            _ = try await database.save(restored)
            #expect(CKRecordEncoder.decodeSystemFields(with: Data("not an archive".utf8)) == nil)
        }
    }

    @Test("a record over 1 MB is refused before it is sent, naming its size")
    func sizeCheck() throws {
        let zone = RecordZone.ID(zoneName: "Notes", ownerName: CurrentUserDefaultName)
        var note = Note(id: "big", title: "Scan", body: "", pinned: false, rating: 0, tags: [], created: Date(), attachment: Data())
        note.attachment = Data(count: 1_100_000)
        #expect {
            _ = try CKRecordEncoder(zoneID: zone).encode(note)
        } throws: { error in
            guard case EncodingError.invalidValue(_, let context) = error else { return false }
            return context.debugDescription.hasPrefix("CKRecord is too large. Record is 1")
        }
        note.attachment = Data(count: 900_000)
        #expect(try CKRecordEncoder(zoneID: zone).encode(note)["attachment"] as? Data == note.attachment)
    }
}

// public protocol HRecord: Codable { static var recordType: String { get }; var recordID: CKRecord.ID { get } }
protocol HRecord: Codable {
    static var recordType: String { get }
    var recordID: Record.ID { get }
}

public final class CKRecordEncoder {
    // The maximum amount of data that can be stored by a record (1 MB)
    private let maximumAllowedRecordSizeInBytes: Int = 1 * 1024 * 1024
    public var zoneID: RecordZone.ID

    public init(zoneID: RecordZone.ID) {
        self.zoneID = zoneID
    }

    func encode<E: HRecord>(_ value: E) throws -> Record {
        let type = E.recordType
        let recordName = value.recordID.recordName
        let encoder = _CKRecordEncoder(recordTypeName: type, recordName: recordName, zoneID: zoneID)
        try value.encode(to: encoder)
        let record = encoder.buildRecord()
        try validateSize(for: encoder.storage.keys)
        return record
    }

    // public static func decodeSystemFields(with systemFields: Data) -> CKRecord? {
    //     guard let coder = try? NSKeyedUnarchiver(forReadingFrom: systemFields) else { return nil }
    //     coder.requiresSecureCoding = true
    //     let record = CKRecord(coder: coder)
    //     coder.finishDecoding()
    //     return record
    // }
    public static func decodeSystemFields(with systemFields: Data) -> Record? {
        guard let coder = try? NSKeyedUnarchiver(forReadingFrom: systemFields) else { return nil }
        coder.requiresSecureCoding = true
        let record = Record(coder: coder)
        coder.finishDecoding()
        return record
    }

    // private func validateSize(for recordKeyValues: [String: CKRecordValue]) throws {
    //     guard let recordData = try? NSKeyedArchiver.archivedData(withRootObject: recordKeyValues, requiringSecureCoding: true)
    //     else { return }
    //     if recordData.count >= maximumAllowedRecordSizeInBytes { … throw EncodingError.invalidValue(Any.self, context) }
    // }
    private func validateSize(for recordKeyValues: [String: RecordValue]) throws {
        guard let recordData = try? NSKeyedArchiver.archivedData(withRootObject: recordKeyValues, requiringSecureCoding: true)
        else { return }
        if recordData.count >= maximumAllowedRecordSizeInBytes {
            let context = EncodingError.Context(
                codingPath: [],
                debugDescription:
                    "CKRecord is too large. Record is \(formattedSize(ofDataCount: recordData.count)), the maxmimum allowed size is \(formattedSize(ofDataCount: maximumAllowedRecordSizeInBytes)))"
            )
            throw EncodingError.invalidValue(Any.self, context)
        }
    }

    private func formattedSize(ofDataCount dataCount: Int) -> String {
        let formatter = ByteCountFormatter()
        formatter.allowedUnits = [.useKB, .useMB]
        formatter.countStyle = .binary
        return formatter.string(fromByteCount: Int64(dataCount))
    }
}

final class _CKRecordEncoder {
    let recordTypeName: Record.RecordType
    let recordName: String
    let zoneID: RecordZone.ID
    var codingPath: [CodingKey] = []
    var userInfo: [CodingUserInfoKey: Any] = [:]
    var storage: Storage

    init(recordTypeName: Record.RecordType, recordName: String, zoneID: RecordZone.ID, storage: Storage = Storage()) {
        self.recordTypeName = recordTypeName
        self.recordName = recordName
        self.zoneID = zoneID
        self.storage = storage
    }
}

extension _CKRecordEncoder {
    final class Storage {
        private(set) var record: Record?
        private(set) var keys: [String: RecordValue] = [:]

        func set(record: Record?) {
            self.record = record
        }

        func encode(codingPath: [CodingKey], value: RecordValue?) {
            let key = codingPath.map { $0.stringValue }.joined(separator: "_")
            keys[key] = value
        }
    }

    // let output: CKRecord = storage.record
    //     ?? CKRecord(recordType: recordTypeName, recordID: CKRecord.ID(recordName: "\(recordTypeName)|\(recordName)", zoneID: zoneID))
    // storage.keys.forEach { (key, value) in output[key] = value }
    func buildRecord() -> Record {
        let output: Record =
            storage.record
            ?? Record(recordType: recordTypeName, recordID: Record.ID(recordName: "\(recordTypeName)|\(recordName)", zoneID: zoneID))
        guard output.recordType == recordTypeName else {
            fatalError("CloudKit record type mismatch: the record should be of type \(recordTypeName) but it was of type \(output.recordType).")
        }
        storage.keys.forEach { (key, value) in output[key] = value }
        return output
    }
}

extension _CKRecordEncoder: Encoder {
    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        let container = CKRecordKeyedEncodingContainer<Key>(storage: storage)
        container.codingPath = codingPath
        return KeyedEncodingContainer(container)
    }

    func unkeyedContainer() -> UnkeyedEncodingContainer {
        fatalError("Not implemented")
    }

    func singleValueContainer() -> SingleValueEncodingContainer {
        fatalError("Not implemented")
    }
}

/// Harmony's keyed container, in the few forms the model above needs: each value stored as the
/// record value it is, under its coding path.
final class CKRecordKeyedEncodingContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let storage: _CKRecordEncoder.Storage
    var codingPath: [CodingKey] = []

    init(storage: _CKRecordEncoder.Storage) {
        self.storage = storage
    }

    func encodeNil(forKey key: Key) throws {
        storage.encode(codingPath: codingPath + [key], value: nil)
    }

    func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        // if let value = value as? CKRecordValue { storage.encode(codingPath: codingPath + [key], value: value) }
        if let value = value as? RecordValue {
            storage.encode(codingPath: codingPath + [key], value: value)
        } else {
            storage.encode(codingPath: codingPath + [key], value: try JSONEncoder().encode(value))
        }
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        fatalError("Not implemented")
    }

    func nestedUnkeyedContainer(forKey key: Key) -> UnkeyedEncodingContainer {
        fatalError("Not implemented")
    }

    func superEncoder() -> Encoder {
        fatalError("Not implemented")
    }

    func superEncoder(forKey key: Key) -> Encoder {
        fatalError("Not implemented")
    }
}
