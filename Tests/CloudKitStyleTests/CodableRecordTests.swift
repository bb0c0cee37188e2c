import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// A Codable encoder and decoder for records in the style of CloudKitCodable, ported. Model
// types are `Codable`; the encoder writes each property as a record value (a file URL as an
// asset, a remote URL as a string, String- and Int-backed enums as their raw values, any other
// Codable value as JSON data), and rebuilds the record from the archived system fields the model
// keeps (`CKRecord(coder:)` on an `NSKeyedUnarchiver(forReadingFrom:)`), so the next save is
// checked against the change tag. The decoder reads fields back generically,
// `record[key] as? T`, Booleans as `Int64`, and archives the system fields with
// `NSKeyedArchiver(requiringSecureCoding:)`. What the port changes: CloudKitCodable returns
// arrays `as NSArray`, strings `as NSString` and data `as NSData` for its `CKRecordValue`
// results; those Foundation classes are not record values on Linux (README, "Records"), so the
// Swift values are returned as they are. The CloudKit original is in the comments.

let systemFieldsKeyName = "cloudKitSystemFields"

protocol CloudKitRecordRepresentable {
    var cloudKitSystemFields: Data? { get }
    var cloudKitRecordType: String { get }
    var cloudKitIdentifier: String { get }
}

protocol CustomCloudKitCodable: CloudKitRecordRepresentable & Codable {}

protocol CloudKitStringEnum: Codable, RawRepresentable where RawValue == String {}
protocol CloudKitIntEnum: Codable, RawRepresentable where RawValue == Int {}

enum RecordEncodingError: Error {
    case systemFieldsDecode(String)
}

// MARK: - Encoder

final class RecordEncoder {
    var zoneID: RecordZone.ID?
    init(zoneID: RecordZone.ID? = nil) { self.zoneID = zoneID }

    func encode(_ value: Encodable) throws -> Record {
        let custom = value as? CloudKitRecordRepresentable
        let encoder = RecordEncoderImplementation(
            recordTypeName: custom?.cloudKitRecordType ?? String(describing: type(of: value)),
            zoneID: zoneID, recordName: custom?.cloudKitIdentifier ?? UUID().uuidString)
        try value.encode(to: encoder)
        return try encoder.record()
    }
}

final class RecordEncoderImplementation: Encoder {
    let recordTypeName: String
    let zoneID: RecordZone.ID?
    let recordName: String
    var codingPath: [CodingKey] = []
    var userInfo: [CodingUserInfoKey: Any] = [:]
    var storage: [String: RecordValue] = [:]
    var metaRecord: Record?

    init(recordTypeName: String, zoneID: RecordZone.ID?, recordName: String) {
        self.recordTypeName = recordTypeName
        self.zoneID = zoneID
        self.recordName = recordName
    }

    func record() throws -> Record {
        // let zid = zoneID ?? CKRecordZone.ID(zoneName: CKRecordZone.ID.defaultZoneName, ownerName: CKCurrentUserDefaultName)
        let zid = zoneID ?? RecordZone.ID(zoneName: RecordZone.ID.defaultZoneName, ownerName: CurrentUserDefaultName)
        let output = metaRecord ?? Record(recordType: recordTypeName, recordID: Record.ID(recordName: recordName, zoneID: zid))
        precondition(output.recordType == recordTypeName, "record type mismatch")
        for (key, value) in storage { output[key] = value }
        return output
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(KeyedContainer<Key>(encoder: self))
    }
    func unkeyedContainer() -> UnkeyedEncodingContainer { fatalError("Not implemented") }
    func singleValueContainer() -> SingleValueEncodingContainer { fatalError("Not implemented") }

    struct KeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
        let encoder: RecordEncoderImplementation
        var codingPath: [CodingKey] { encoder.codingPath }

        mutating func encodeNil(forKey key: Key) throws { encoder.storage[key.stringValue] = nil }

        mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
            guard key.stringValue != systemFieldsKeyName else {
                guard let systemFields = value as? Data else {
                    throw RecordEncodingError.systemFieldsDecode("\(systemFieldsKeyName) property must be of type Data")
                }
                // let coder = try NSKeyedUnarchiver(forReadingFrom: systemFields)
                // coder.requiresSecureCoding = true
                // metaRecord = CKRecord(coder: coder)
                // coder.finishDecoding()
                let coder = try NSKeyedUnarchiver(forReadingFrom: systemFields)
                coder.requiresSecureCoding = true
                encoder.metaRecord = Record(coder: coder)
                coder.finishDecoding()
                return
            }
            encoder.storage[key.stringValue] = try produceCloudKitValue(for: value)
        }

        private func produceCloudKitValue<T: Encodable>(for value: T) throws -> RecordValue {
            if let url = value as? URL {
                // url.isFileURL ? CKAsset(fileURL: url) : url.absoluteString as CKRecordValue
                return url.isFileURL ? Asset(fileURL: url) : url.absoluteString as RecordValue
            } else if let ckValue = value as? RecordValue {
                // CloudKitCodable first checks `collection as? [CKRecordValue]` and returns it
                // `as NSArray`, because on Apple platforms every array casts to CKRecordValue. A
                // Stratus array is a record value only when its elements are, so this one cast
                // sorts [String] (stored) from [Pet] (JSON) by itself.
                return ckValue
            } else if let stringValue = (value as? any CloudKitStringEnum)?.rawValue {
                return stringValue                                   // stringValue as NSString
            } else if let intValue = (value as? any CloudKitIntEnum)?.rawValue {
                return NSNumber(value: Int(intValue))
            } else {
                let encoded = try JSONEncoder().encode(value)
                return encoded                                       // encodedChild as NSData
            }
        }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> { fatalError("Not implemented") }
        mutating func nestedUnkeyedContainer(forKey key: Key) -> UnkeyedEncodingContainer { fatalError("Not implemented") }
        mutating func superEncoder() -> Encoder { fatalError("Not implemented") }
        mutating func superEncoder(forKey key: Key) -> Encoder { fatalError("Not implemented") }
    }
}

// MARK: - Decoder

final class RecordDecoder {
    func decode<T: Decodable>(_ type: T.Type, from record: Record) throws -> T {
        try T(from: RecordDecoderImplementation(record: record))
    }
}

final class RecordDecoderImplementation: Decoder {
    let record: Record
    var codingPath: [CodingKey] = []
    var userInfo: [CodingUserInfoKey: Any] = [:]
    init(record: Record) { self.record = record }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(KeyedContainer<Key>(record: record))
    }
    func unkeyedContainer() throws -> UnkeyedDecodingContainer { fatalError("Not implemented") }
    func singleValueContainer() throws -> SingleValueDecodingContainer { fatalError("Not implemented") }

    struct KeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
        let record: Record
        var codingPath: [CodingKey] = []

        var allKeys: [Key] { record.allKeys().compactMap { Key(stringValue: $0) } }

        func contains(_ key: Key) -> Bool {
            key.stringValue == systemFieldsKeyName || allKeys.contains { $0.stringValue == key.stringValue }
        }

        func decodeNil(forKey key: Key) throws -> Bool {
            key.stringValue == systemFieldsKeyName ? false : record[key.stringValue] == nil
        }

        private func typeMismatch<T>(_ type: T.Type, _ message: String) -> DecodingError {
            DecodingError.typeMismatch(type, DecodingError.Context(codingPath: codingPath, debugDescription: message))
        }

        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
            guard contains(key) else {
                throw DecodingError.keyNotFound(key, DecodingError.Context(codingPath: codingPath, debugDescription: "key not found: \(key)"))
            }
            if key.stringValue == systemFieldsKeyName {
                // let coder = NSKeyedArchiver.init(requiringSecureCoding: true)
                // record.encodeSystemFields(with: coder); coder.finishEncoding(); return coder.encodedData
                let coder = NSKeyedArchiver(requiringSecureCoding: true)
                record.encodeSystemFields(with: coder)
                coder.finishEncoding()
                return coder.encodedData as! T
            }
            // Bools are encoded as Int64 in CloudKit
            if type == Bool.self {
                guard let intValue = record[key.stringValue] as? Int64 else { throw typeMismatch(type, "Bool should have been encoded as Int64") }
                return (intValue == 1) as! T
            }
            if type == URL.self {
                if let asset = record[key.stringValue] as? Asset, let url = asset.fileURL { return url as! T }
                guard let string = record[key.stringValue] as? String, let url = URL(string: string) else { throw typeMismatch(type, "URL") }
                return url as! T
            }
            if let stringEnumType = T.self as? any CloudKitStringEnum.Type {
                guard let stringValue = record[key.stringValue] as? String, let value = stringEnumType.init(rawValue: stringValue) else {
                    throw typeMismatch(type, "Expected a rawValue String")
                }
                return value as! T
            }
            if let intEnumType = T.self as? any CloudKitIntEnum.Type {
                guard let intValue = record[key.stringValue] as? Int, let value = intEnumType.init(rawValue: intValue) else {
                    throw typeMismatch(type, "Expected a rawValue Int")
                }
                return value as! T
            }
            if T.self != Data.self, let nestedData = record[key.stringValue] as? Data {
                return try JSONDecoder().decode(T.self, from: nestedData)
            }
            guard let value = record[key.stringValue] as? T else {
                throw typeMismatch(type, "CKRecordValue couldn't be converted to \"\(String(describing: type))\"")
            }
            return value
        }

        func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> { fatalError("Not implemented") }
        func nestedUnkeyedContainer(forKey key: Key) throws -> UnkeyedDecodingContainer { fatalError("Not implemented") }
        func superDecoder() throws -> Decoder { RecordDecoderImplementation(record: record) }
        func superDecoder(forKey key: Key) throws -> Decoder { RecordDecoderImplementation(record: record) }
    }
}

// MARK: - A model

enum Mood: String, CloudKitStringEnum { case happy, grumpy }
enum Level: Int, CloudKitIntEnum { case junior = 1, senior = 3 }

struct Pet: Codable, Equatable {
    var name: String
    var legs: Int
}

struct Person: CustomCloudKitCodable, Equatable {
    var cloudKitSystemFields: Data?
    var cloudKitRecordType: String { "Person" }
    var cloudKitIdentifier: String { name.lowercased() }
    var name: String
    var age: Int
    var bytes: Int64
    var isDeveloper: Bool
    var rating: Double
    var ratio: Float
    var joined: Date
    var website: URL
    var avatar: URL?
    var tags: [String]
    var scores: [Int]
    var pets: [Pet]
    var favourite: Pet
    var mood: Mood
    var level: Level
    var nickname: String?
    var blob: Data

    static func == (lhs: Person, rhs: Person) -> Bool {
        lhs.name == rhs.name && lhs.age == rhs.age && lhs.bytes == rhs.bytes && lhs.isDeveloper == rhs.isDeveloper
            && lhs.rating == rhs.rating && lhs.ratio == rhs.ratio && lhs.joined == rhs.joined && lhs.website == rhs.website
            && lhs.tags == rhs.tags && lhs.scores == rhs.scores && lhs.pets == rhs.pets && lhs.favourite == rhs.favourite
            && lhs.mood == rhs.mood && lhs.level == rhs.level && lhs.nickname == rhs.nickname && lhs.blob == rhs.blob
    }
}

@Suite("Codable models as records (CloudKitCodable), ported", .timeLimit(.minutes(30)))
struct CodableRecordTests {
    @Test("a Codable model encodes to a record, round-trips through the store, and decodes generically with as? T", arguments: TestEngine.all)
    func roundTrip(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let avatarFile = FileManager.default.temporaryDirectory.appendingPathComponent("avatar-\(UUID().uuidString).png")
            try Data("png".utf8).write(to: avatarFile)
            defer { try? FileManager.default.removeItem(at: avatarFile) }
            let person = Person(
                cloudKitSystemFields: nil, name: "Ada", age: 36, bytes: 1 << 40, isDeveloper: true, rating: 4.5, ratio: 0.25,
                joined: Date(timeIntervalSince1970: 1_700_000_000), website: URL(string: "https://example.com/ada")!, avatar: avatarFile,
                tags: ["math", "engines"], scores: [3, 1, 4], pets: [Pet(name: "Rex", legs: 4), Pet(name: "Tweety", legs: 2)],
                favourite: Pet(name: "Rex", legs: 4), mood: .happy, level: .senior, nickname: nil, blob: Data([0, 1, 2]))

            let record = try RecordEncoder().encode(person)
            #expect(record.recordType == "Person")
            #expect(record.recordID.recordName == "ada")
            #expect(record.recordID.zoneID == .default)
            #expect(record.fieldValue(forKey: "tags") == .stringList(["math", "engines"]))
            #expect(record.fieldValue(forKey: "mood") == .string("happy"))
            #expect(record.fieldValue(forKey: "level") == .int64(3))
            #expect(record.fieldValue(forKey: "isDeveloper") == .int64(1))
            #expect(record.fieldValue(forKey: "website") == .string("https://example.com/ada"))
            #expect(record["pets"] is Data)                       // [Pet] is no record value: JSON
            #expect(record["nickname"] == nil)

            let saved = try await container.publicCloudDatabase.save(record)
            let fetched = try await container.publicCloudDatabase.record(for: saved.recordID)
            let decoded = try RecordDecoder().decode(Person.self, from: fetched)
            #expect(decoded == person)
            let avatar = try #require(decoded.avatar)
            #expect(try Data(contentsOf: avatar) == Data("png".utf8))
            #expect(decoded.cloudKitSystemFields != nil)
        }
    }

    @Test("the decoded model's archived system fields make the next save a checked update; a stale copy is serverRecordChanged", arguments: TestEngine.all)
    func systemFieldsCarryTheChangeTag(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            var person = Person(
                cloudKitSystemFields: nil, name: "Grace", age: 45, bytes: 0, isDeveloper: true, rating: 5, ratio: 1,
                joined: Date(timeIntervalSince1970: 0), website: URL(string: "https://example.com/grace")!, avatar: nil,
                tags: [], scores: [], pets: [], favourite: Pet(name: "Bug", legs: 6), mood: .grumpy, level: .junior, nickname: "Amazing", blob: Data())
            let database = container.publicCloudDatabase
            let first = try await database.save(try RecordEncoder().encode(person))
            person = try RecordDecoder().decode(Person.self, from: first)
            let stale = person

            person.level = .senior
            let update = try RecordEncoder().encode(person)
            #expect(update.recordChangeTag == first.recordChangeTag)
            let second = try await database.save(update)
            #expect(second.recordChangeTag != first.recordChangeTag)
            #expect(try RecordDecoder().decode(Person.self, from: try await database.record(for: second.recordID)).level == .senior)

            var failure: StratusError?
            do {
                _ = try await database.save(try RecordEncoder().encode(stale))
            } catch let error as StratusError {
                failure = error
            }
            #expect(failure?.code == .serverRecordChanged)
            #expect(failure?.serverRecord?["level"] as? Int == 3)
        }
    }
}
