import Foundation
import Stratus
import StratusSQLite
import StratusStores
import StratusTestSupport
import Testing

// Cirrus (github.com/jayhickey/Cirrus, MIT), a sync engine for `Codable` models, ported. Each
// file as its last stored version has it: `Sources/Cirrus/SyncEngine.swift`,
// `SyncEngine+Zone.swift`, `SyncEngine+Subscription.swift`, `SyncEngine+RemoteChangeTracking.swift`,
// `SyncEngine+RecordModification.swift`, `RecordModifyingContext.swift`,
// `UploadRecordContext.swift` and `DeleteRecordContext.swift` at commit
// aea6247cac3566038195f436a779f180f2781b7a; `Sources/Cirrus/Error+CloudKit.swift` at
// 9f6138ca74e5cbcae9b20996ea9f003f701416fc (the version that retries `limitExceeded` at once);
// `Sources/Cirrus/SyncEngine+AccountStatus.swift` at 9a443756663119da6d08f8fcbed75338b7fd74d4; and
// its two helper modules, `Sources/CloudKitCodable/` and `Sources/CKRecordCoder/`, with the
// example app's `Example/CirrusExample/Models/Bookmark.swift`, at
// 07882fcda9e7ab8a6f4f59fb21f2535a74e47224.
//
// Its CloudKit habits that other ported code does not have: one private zone and one
// `CKRecordZoneSubscription` per model type (with `recordType` and `shouldSendContentAvailable`),
// made once and then checked on every launch with `CKFetchRecordZonesOperation` and
// `CKFetchSubscriptionsOperation(subscriptionIDs:)` (`fetchSubscriptionCompletionBlock`), made
// again when the check fails without `retryAfterSeconds` (a missing zone is `zoneNotFound`, a
// missing subscription `unknownItem`, each inside a `partialFailure`); every operation on an
// `OperationQueue` of its own whose `underlyingQueue` is a serial queue, waited for with
// `waitUntilAllOperationsAreFinished()` from another serial queue; a change fetch built empty and
// filled in (`configurationsByRecordZoneID` with a `ZoneConfiguration(previousServerChangeToken:
// resultsLimit: nil, desiredKeys: nil)`, `recordZoneIDs`), its token archived in `UserDefaults`
// and dropped on `changeTokenExpired`; and a modify whose `partialFailure` is taken apart by
// code: `serverRecordChanged` resolved through the models decoded from `clientRecord` and
// `serverRecord` and sent as the server record, `batchRequestFailed` sent again, `unknownItem`
// given up, `limitExceeded` halved.
//
// What the port changes, each marked where it is: the `CK` prefix (`CKError` → `StratusError`);
// the declarations are `fileprivate`, as this test module holds other ports with the same names
// (Harmony's `CKRecordEncoder`) and Stratus has a `SyncEngine` and an `AccountStatus` of its own;
// the `CKRecordCoder` module's three names that another port has are in an `enum CKRecordCoder`,
// so the code outside names them as the module would be named (`CKRecordCoder.CKRecordEncoder`);
// Combine is not on Linux, so `PassthroughSubject` and `AnyCancellable` are the small stand-ins
// below and `@Published` is dropped; `CKContainer(identifier:)` takes the store file and user
// (README, "Containers"). What Linux or Stratus lacks is in the report at the end of this comment.
//
// Gaps met (each also marked where it is):
// - `[CKRecordValue] as CKRecordValue` does not compile: `[any RecordValue]` is no `RecordValue`
//   (an existential conforms to no protocol), where CloudKit bridges the list to an `NSArray`.
// - No `Notification.Name.CKAccountChanged`: fixed, `.AccountChanged` (never posted, as a
//   container's user does not change while it is open); Combine's `publisher(for:)` becomes
//   `addObserver(forName:object:queue:using:)`.
// - A Linux server receives no push: the tests hand the engine the push payload of what the
//   notification feed holds (`remoteNotificationDictionary`), as the Private Sync port does.
// - `UserDefaults.setValue(_:forKey:)` is key-value coding, not on Linux: `set(_:forKey:)`.
// - A model with a file URL becomes a record with a `CKAsset`, and the encoder's size check
//   archives its `[String: CKRecordValue]`, which traps on an `Asset` value (README,
//   "Archiving"): the tests' bookmarks hold web URLs.
// - Archiving a record costs about half a millisecond here, and the upload buffer archives itself
//   again for each record it adds or removes: 450 models took four minutes to upload. Past 400
//   items CloudKit answers `limitExceeded` and Cirrus halves the request; Stratus splits it itself.

// MARK: - Linux stand-ins for Combine

/// Combine's `PassthroughSubject`, as far as Cirrus and its tests use it: `send`, `sink`, and
/// `eraseToAnyPublisher()`. Values go to the subscribers at once, on the thread that sends.
///
/// One difference from Combine: values sent before anyone has subscribed are kept for the first
/// subscriber. The engine starts its first fetch from `init` on its own queue, and a test can
/// only subscribe once `init` has returned; on a busy machine the fetch's models came out first
/// and were dropped (as Combine would drop them), and the test waited for them in vain.
fileprivate final class PassthroughSubject<Output, Failure: Error>: @unchecked Sendable {
  private let lock = NSLock()
  private var subscribers: [UUID: (Output) -> Void] = [:]
  private var sentBeforeAnySubscriber: [Output] = []
  private var everSubscribed = false

  func send(_ value: Output) {
    let receivers: [(Output) -> Void] = lock.withLock {
      if !everSubscribed { sentBeforeAnySubscriber.append(value) }
      return Array(subscribers.values)
    }
    receivers.forEach { $0(value) }
  }

  func sink(receiveValue: @escaping (Output) -> Void) -> AnyCancellable {
    let id = UUID()
    // Held while the kept values are handed over, so a value sent meanwhile comes after them.
    lock.lock()
    let kept = everSubscribed ? [] : sentBeforeAnySubscriber
    everSubscribed = true
    sentBeforeAnySubscriber = []
    kept.forEach(receiveValue)
    subscribers[id] = receiveValue
    lock.unlock()
    return AnyCancellable { [weak self] in self?.lock.withLock { _ = self?.subscribers.removeValue(forKey: id) } }
  }

  func eraseToAnyPublisher() -> AnyPublisher<Output, Failure> { AnyPublisher(subject: self) }
}

fileprivate struct AnyPublisher<Output, Failure: Error> {
  let subject: PassthroughSubject<Output, Failure>
  func sink(receiveValue: @escaping (Output) -> Void) -> AnyCancellable { subject.sink(receiveValue: receiveValue) }
}

fileprivate final class AnyCancellable: Hashable {
  private let cancelBlock: () -> Void
  init(_ cancel: @escaping () -> Void) { cancelBlock = cancel }
  deinit { cancelBlock() }
  func store(in set: inout Set<AnyCancellable>) { set.insert(self) }
  static func == (lhs: AnyCancellable, rhs: AnyCancellable) -> Bool { lhs === rhs }
  func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}

// MARK: - CloudKitCodable/CloudKitCodable.swift

fileprivate protocol CloudKitEncodable: Encodable {}

fileprivate protocol CloudKitDecodable: Decodable {}

fileprivate typealias CloudKitIdentifier = String

fileprivate protocol CloudKitCodable: CloudKitEncodable & CloudKitDecodable & Hashable {
  /// A property for storing system fields from CloudKit.
  ///
  /// This value is managed by the sync engine and should be set to nil when creating a new model.
  /// If you are persisting your models locally, be sure to persist this property so it can be read by the sync
  /// engine when peforming updates to your model.
  var cloudKitSystemFields: Data? { get set }

  /// A unique identifier for the model used to locate records in the CloudKit database.
  var cloudKitIdentifier: CloudKitIdentifier { get }

  /// A function for resolving conflicts between a the server and client record. Use this to determine
  /// how conflicts between two models with the same `cloudKitIdentifier` should be resolved.
  static func resolveConflict(clientModel: Self, serverModel: Self) -> Self?
}

// MARK: - CloudKitCodable/CloudKitCodable+LastModifiedDate.swift

extension CloudKitCodable {
  /// The time when the record was last saved to the server.
  public var cloudKitLastModifiedDate: Date? {
    guard let data = cloudKitSystemFields,
      let coder = try? NSKeyedUnarchiver(forReadingFrom: data)
    else { return nil }
    coder.requiresSecureCoding = true
    // let record = CKRecord(coder: coder)
    let record = Record(coder: coder)
    coder.finishDecoding()
    return record?.modificationDate
  }
}

// MARK: - CKRecordCoder/CloudKitSystemFieldsKeyName.swift

fileprivate let _CloudKitSystemFieldsKeyName = "cloudKitSystemFields"

// MARK: - CKRecordCoder/CloudKitCodable+RecordType.swift

extension CloudKitCodable {
  // var cloudKitRecordType: CKRecord.RecordType {
  var cloudKitRecordType: Record.RecordType {
    return String(describing: type(of: self))
  }
}

// MARK: - CKRecordCoder/CKRecordEncodingError.swift

fileprivate enum CKRecordEncodingError: Error {
  case unsupportedValueForKey(String)
  case systemFieldsDecode(String)
  case referencesNotSupported(String)

  public var localizedDescription: String {
    switch self {
    case .unsupportedValueForKey(let key):
      return """
        The value of key \(key) is not supported. Only values that can be converted to
        CKRecordValue are supported. Check the CloudKit documentation to see which types
        can be used.
        """
    case .systemFieldsDecode(let info):
      return "Failed to process \(_CloudKitSystemFieldsKeyName): \(info)"
    case .referencesNotSupported(let key):
      return "References are not supported by CKRecordEncoder yet. Key \(key)."
    }
  }
}

// MARK: - CKRecordCoder/CKRecordEncoder.swift

/// The module `CKRecordCoder`'s classes whose names Harmony's port in this module has too.
fileprivate enum CKRecordCoder {

  public final class CKRecordEncoder {
    // The maximum amount of data that can be stored by a record (1 MB)
    private let maximumAllowedRecordSizeInBytes: Int = 1 * 1024 * 1024

    // public var zoneID: CKRecordZone.ID
    public var zoneID: RecordZone.ID

    // public init(zoneID: CKRecordZone.ID) {
    public init(zoneID: RecordZone.ID) {
      self.zoneID = zoneID
    }

    // public func encode<E: CloudKitCodable>(_ value: E) throws -> CKRecord {
    public func encode<E: CloudKitCodable>(_ value: E) throws -> Record {
      let type = value.cloudKitRecordType
      let recordName = value.cloudKitIdentifier

      let encoder = _CKRecordEncoder(
        recordTypeName: type,
        recordName: recordName,
        zoneID: zoneID
      )

      try value.encode(to: encoder)

      let record = encoder.buildRecord()

      try validateSize(for: encoder.storage.keys)

      return record
    }

    // public static func decodeSystemFields(with systemFields: Data) -> CKRecord? {
    public static func decodeSystemFields(with systemFields: Data) -> Record? {
      guard let coder = try? NSKeyedUnarchiver(forReadingFrom: systemFields) else { return nil }
      coder.requiresSecureCoding = true
      // let record = CKRecord(coder: coder)
      let record = Record(coder: coder)
      coder.finishDecoding()
      return record
    }

    // private func validateSize(for recordKeyValues: [String: CKRecordValue]) throws {
    private func validateSize(for recordKeyValues: [String: RecordValue]) throws {
      guard
        let recordData = try? NSKeyedArchiver.archivedData(
          withRootObject: recordKeyValues,
          requiringSecureCoding: true
        )
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
    // let recordTypeName: CKRecord.RecordType
    let recordTypeName: Record.RecordType
    let recordName: String
    // let zoneID: CKRecordZone.ID
    let zoneID: RecordZone.ID
    var codingPath: [CodingKey] = []
    var userInfo: [CodingUserInfoKey: Any] = [:]

    var storage: Storage

    init(
      // recordTypeName: CKRecord.RecordType,
      recordTypeName: Record.RecordType,
      recordName: String,
      // zoneID: CKRecordZone.ID,
      zoneID: RecordZone.ID,
      storage: Storage = Storage()
    ) {
      self.recordTypeName = recordTypeName
      self.recordName = recordName
      self.zoneID = zoneID
      self.storage = storage
    }
  }

  // MARK: CKRecordCoder/CKRecordKeyedEncodingContainer.swift

  final class CKRecordKeyedEncodingContainer<Key: CodingKey> {
    var storage: _CKRecordEncoder.Storage
    var codingPath: [CodingKey] = []
    var userInfo: [CodingUserInfoKey: Any] = [:]
    lazy var jsonEncoder: JSONEncoder = {
      return JSONEncoder()
    }()

    init(storage: _CKRecordEncoder.Storage) {
      self.storage = storage
    }
  }
}

extension CKRecordCoder._CKRecordEncoder {
  final class Storage {
    // private(set) var record: CKRecord?
    private(set) var record: Record?
    // private(set) var keys: [String: CKRecordValue] = [:]
    private(set) var keys: [String: RecordValue] = [:]

    // func set(record: CKRecord?) {
    func set(record: Record?) {
      self.record = record
    }

    // func encode(codingPath: [CodingKey], value: CKRecordValue?) {
    func encode(codingPath: [CodingKey], value: RecordValue?) {
      let key =
        codingPath
        .map { $0.stringValue }
        .joined(separator: "_")
      keys[key] = value
    }
  }

  // func buildRecord() -> CKRecord {
  func buildRecord() -> Record {
    // let output: CKRecord =
    let output: Record =
      storage.record
      // ?? CKRecord(
      ?? Record(
        recordType: recordTypeName,
        // recordID: CKRecord.ID(
        recordID: Record.ID(
          recordName: recordName,
          zoneID: zoneID)
      )

    guard output.recordType == recordTypeName else {
      fatalError(
        """
        CloudKit record type mismatch: the record should be of type \(recordTypeName) but it was
        of type \(output.recordType). This is probably a result of corrupted cloudKitSystemData
        or a change in record/type name that must be corrected in your type by adopting CustomCloudKitEncodable.
        """
      )
    }

    storage.keys.forEach { (key, value) in output[key] = value }
    return output
  }
}

extension CKRecordCoder._CKRecordEncoder: Encoder {

  func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
    // let container = CKRecordKeyedEncodingContainer<Key>(storage: storage)
    let container = CKRecordCoder.CKRecordKeyedEncodingContainer<Key>(storage: storage)
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

extension CKRecordCoder.CKRecordKeyedEncodingContainer: KeyedEncodingContainerProtocol {
  func encodeNil(forKey key: Key) throws {
    storage.encode(codingPath: codingPath + [key], value: nil)
  }

  func encode<T>(_ value: T, forKey key: Key) throws where T: Encodable {
    guard !(value is CloudKitEncodable) && !(value is [CloudKitEncodable]) else {
      throw CKRecordEncodingError.referencesNotSupported(
        codingPath.map { $0.stringValue }.joined(separator: "-"))
    }

    if key.stringValue == _CloudKitSystemFieldsKeyName {
      guard let systemFieldsData = value as? Data else {
        throw CKRecordEncodingError.systemFieldsDecode(
          "\(_CloudKitSystemFieldsKeyName) property must be of type Data.")
      }
      // storage.set(record: CKRecordEncoder.decodeSystemFields(with: systemFieldsData))
      storage.set(record: CKRecordCoder.CKRecordEncoder.decodeSystemFields(with: systemFieldsData))
    } else if let value = value as? URL {
      storage.encode(codingPath: codingPath + [key], value: URLTransformer.encode(value))
    } else if let value = value as? [URL] {
      // storage.encode(
      //   codingPath: codingPath + [key], value: value.map(URLTransformer.encode) as CKRecordValue)
      // Gap: `[any RecordValue]` is no `RecordValue` (CloudKit bridges `[CKRecordValue]` to an
      // `NSArray`), so the list is built with its element type: assets or strings.
      storage.encode(
        codingPath: codingPath + [key],
        value: value.allSatisfy(\.isFileURL)
          ? value.map { Asset(fileURL: $0) } as RecordValue : value.map(\.absoluteString) as RecordValue)
    // } else if let value = value as? CKRecordValue {
    } else if let value = value as? RecordValue {
      storage.encode(codingPath: codingPath + [key], value: value)
    } else {
      do {
        let encoder = CKRecordSingleValueEncoder(storage: storage, codingPath: codingPath + [key])
        try value.encode(to: encoder)
      } catch {
        storage.encode(
          // codingPath: codingPath + [key], value: try jsonEncoder.encode(value) as CKRecordValue)
          codingPath: codingPath + [key], value: try jsonEncoder.encode(value) as RecordValue)
      }
    }
  }

  func nestedContainer<NestedKey>(keyedBy keyType: NestedKey.Type, forKey key: Key)
    -> KeyedEncodingContainer<NestedKey> where NestedKey: CodingKey
  {
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

// MARK: - CKRecordCoder/CKRecordSingleValueEncoder.swift

fileprivate enum CKRecordSingleValueEncodingError: Error {
  case unableToEncode
}

fileprivate struct CKRecordSingleValueEncoder: Encoder {
  // private var storage: _CKRecordEncoder.Storage
  private var storage: CKRecordCoder._CKRecordEncoder.Storage
  var codingPath: [CodingKey]
  var userInfo: [CodingUserInfoKey: Any] = [:]

  // init(storage: _CKRecordEncoder.Storage, codingPath: [CodingKey]) {
  init(storage: CKRecordCoder._CKRecordEncoder.Storage, codingPath: [CodingKey]) {
    self.storage = storage
    self.codingPath = codingPath
  }

  func container<Key>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> where Key: CodingKey {
    return KeyedEncodingContainer(DummyKeyedEncodingContainer())
  }

  func unkeyedContainer() -> UnkeyedEncodingContainer {
    return DummyUnkeyedCodingContainer()
  }

  func singleValueContainer() -> SingleValueEncodingContainer {
    var container = SingleCKRecordValueEncodingContainer(storage: storage)
    container.codingPath = codingPath
    return container
  }
}

fileprivate struct SingleCKRecordValueEncodingContainer: SingleValueEncodingContainer {
  // var storage: _CKRecordEncoder.Storage
  var storage: CKRecordCoder._CKRecordEncoder.Storage
  var codingPath: [CodingKey] = []

  mutating func encodeNil() throws {
    storage.encode(codingPath: codingPath, value: nil)
  }

  mutating func encode<T>(_ value: T) throws where T: Encodable {
    // guard let value = value as? CKRecordValue else {
    guard let value = value as? RecordValue else {
      throw CKRecordSingleValueEncodingError.unableToEncode
    }
    storage.encode(codingPath: codingPath, value: value)
  }
}

fileprivate struct DummyKeyedEncodingContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
  var codingPath: [CodingKey] = []

  mutating func encodeNil(forKey key: Key) throws {
    throw CKRecordSingleValueEncodingError.unableToEncode
  }

  mutating func encode<T>(_ value: T, forKey key: Key) throws where T: Encodable {
    throw CKRecordSingleValueEncodingError.unableToEncode
  }

  mutating func nestedContainer<NestedKey>(keyedBy keyType: NestedKey.Type, forKey key: Key)
    -> KeyedEncodingContainer<NestedKey> where NestedKey: CodingKey
  {
    fatalError("Not implemented")
  }

  mutating func nestedUnkeyedContainer(forKey key: Key) -> UnkeyedEncodingContainer {
    fatalError("Not implemented")
  }

  mutating func superEncoder() -> Encoder {
    fatalError("Not implemented")
  }

  mutating func superEncoder(forKey key: Key) -> Encoder {
    fatalError("Not implemented")
  }
}

fileprivate struct DummyUnkeyedCodingContainer: UnkeyedEncodingContainer {
  var codingPath: [CodingKey] = []
  var count: Int = 0

  mutating func encodeNil() throws {
    throw CKRecordSingleValueEncodingError.unableToEncode
  }

  mutating func encode<T>(_ value: T) throws where T: Encodable {
    throw CKRecordSingleValueEncodingError.unableToEncode
  }

  mutating func nestedContainer<NestedKey>(keyedBy keyType: NestedKey.Type)
    -> KeyedEncodingContainer<NestedKey> where NestedKey: CodingKey
  {
    fatalError("Not implemented")
  }

  mutating func nestedUnkeyedContainer() -> UnkeyedEncodingContainer {
    fatalError("Not implemented")
  }

  mutating func superEncoder() -> Encoder {
    fatalError("Not implemented")
  }
}

// MARK: - CKRecordCoder/CKRecordDecoder.swift

fileprivate final class CKRecordDecoder {

  // public func decode<T: Decodable>(_ type: T.Type, from record: CKRecord) throws -> T {
  public func decode<T: Decodable>(_ type: T.Type, from record: Record) throws -> T {
    let decoder = _CKRecordDecoder(record: record)
    return try T(from: decoder)
  }

  public init() {}
}

fileprivate final class _CKRecordDecoder {
  var codingPath: [CodingKey] = []
  var userInfo: [CodingUserInfoKey: Any] = [:]

  // private var record: CKRecord
  private var record: Record

  // init(record: CKRecord) {
  init(record: Record) {
    self.record = record
  }
}

extension _CKRecordDecoder: Decoder {

  func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
    let container = CKRecordKeyedDecodingContainer<Key>(record: record)
    return KeyedDecodingContainer(container)
  }

  func unkeyedContainer() throws -> UnkeyedDecodingContainer {
    fatalError("Not implemented")
  }

  func singleValueContainer() throws -> SingleValueDecodingContainer {
    fatalError("No implemented")
  }
}

// MARK: - CKRecordCoder/CKRecordKeyedDecodingContainer.swift

fileprivate final class CKRecordKeyedDecodingContainer<Key: CodingKey> {
  // var record: CKRecord
  var record: Record
  var codingPath: [CodingKey] = []
  var userInfo: [CodingUserInfoKey: Any] = [:]
  lazy var jsonDecoder: JSONDecoder = {
    return JSONDecoder()
  }()

  // init(record: CKRecord) {
  init(record: Record) {
    self.record = record
  }

  private lazy var systemFieldsData: Data = {
    return encodeSystemFields()
  }()

  func nestedCodingPath(forKey key: CodingKey) -> [CodingKey] {
    return self.codingPath + [key]
  }
}

extension CKRecordKeyedDecodingContainer: KeyedDecodingContainerProtocol {
  var allKeys: [Key] {
    return self.record.allKeys().compactMap { Key(stringValue: $0) }
  }

  func contains(_ key: Key) -> Bool {
    // CKRecord does not contain a key that represents the system field information. The system fields data
    // must be extracted separately. Returning true here tells the decoder that we can extract this value.
    guard key.stringValue != _CloudKitSystemFieldsKeyName else { return true }

    // All other keys must be present in the CKRecord in order to be decoded.
    return allKeys.contains(where: { $0.stringValue == key.stringValue })
  }

  func decodeNil(forKey key: Key) throws -> Bool {
    if key.stringValue == _CloudKitSystemFieldsKeyName {
      return systemFieldsData.count == 0
    } else {
      return record[key.stringValue] == nil
    }
  }

  func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
    // Extract system fields data from CKRecord.
    if key.stringValue == _CloudKitSystemFieldsKeyName {
      return systemFieldsData as! T
    } else if type == URL.self {
      return try URLTransformer.decodeSingle(record: record, key: key, codingPath: codingPath) as! T
    } else if type == [URL].self {
      return try URLTransformer.decodeMany(record: record, key: key, codingPath: codingPath) as! T
    } else if let value = record[key.stringValue] as? T {
      return value
    } else if let value = record[key.stringValue] as? Data,
      let decodedValue = try? jsonDecoder.decode(type, from: value)
    {
      return decodedValue
    }

    let decoder = CKRecordSingleValueDecoder(record: record, codingPath: codingPath + [key])
    guard let decodedValue = try? type.init(from: decoder) else {
      let context = DecodingError.Context(
        codingPath: codingPath,
        debugDescription: "Value could not be decoded for key \(key)."
      )
      throw DecodingError.typeMismatch(type, context)
    }

    return decodedValue
  }

  func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws
    -> KeyedDecodingContainer<NestedKey>
  {
    fatalError("Not implemented")
  }

  func nestedUnkeyedContainer(forKey key: Key) throws -> UnkeyedDecodingContainer {
    fatalError("Not implemented")
  }

  func superDecoder() throws -> Decoder {
    return _CKRecordDecoder(record: record)
  }

  func superDecoder(forKey key: Key) throws -> Decoder {
    let decoder = _CKRecordDecoder(record: record)
    decoder.codingPath = [key]
    return decoder
  }

  private func encodeSystemFields() -> Data {
    let coder = NSKeyedArchiver(requiringSecureCoding: true)
    record.encodeSystemFields(with: coder)
    coder.finishEncoding()
    return coder.encodedData
  }
}

// MARK: - CKRecordCoder/CKRecordSingleValueDecoder.swift

fileprivate enum CKRecordSingleValueDecodingError: Error {
  case codingPathMissing
  case unableToDecode
}

fileprivate final class CKRecordSingleValueDecoder: Decoder {
  // private var record: CKRecord
  private var record: Record
  var codingPath: [CodingKey]
  var userInfo: [CodingUserInfoKey: Any] = [:]

  // init(record: CKRecord, codingPath: [CodingKey]) {
  init(record: Record, codingPath: [CodingKey]) {
    self.record = record
    self.codingPath = codingPath
  }

  func container<Key>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key>
  where Key: CodingKey {
    return KeyedDecodingContainer(DummyKeyedDecodingContainer())
  }

  func unkeyedContainer() throws -> UnkeyedDecodingContainer {
    return DummyUnkeyedDecodingContainer()
  }

  func singleValueContainer() throws -> SingleValueDecodingContainer {
    var container = SingleCKRecordValueDecodingContainer(record: record)
    container.codingPath = codingPath
    return container
  }
}

fileprivate struct SingleCKRecordValueDecodingContainer: SingleValueDecodingContainer {
  var codingPath: [CodingKey] = []
  // var record: CKRecord
  var record: Record

  func decodeNil() -> Bool {
    guard let key = codingPath.first else { return true }
    guard let _ = record[key.stringValue] else { return true }
    return false
  }

  func decode<T>(_ type: T.Type) throws -> T where T: Decodable {
    guard let key = codingPath.first else {
      throw CKRecordSingleValueDecodingError.codingPathMissing
    }
    guard let value = record[key.stringValue] as? T else {
      throw CKRecordSingleValueDecodingError.unableToDecode
    }
    return value
  }
}

fileprivate struct DummyKeyedDecodingContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
  var codingPath: [CodingKey] = []
  var allKeys: [Key] = []

  func contains(_ key: Key) -> Bool { return true }

  func decodeNil(forKey key: Key) throws -> Bool {
    throw CKRecordSingleValueDecodingError.unableToDecode
  }

  func decode<T>(_ type: T.Type, forKey key: Key) throws -> T where T: Decodable {
    throw CKRecordSingleValueDecodingError.unableToDecode
  }

  func nestedContainer<NestedKey>(
    keyedBy type: NestedKey.Type,
    forKey key: Key
  ) throws -> KeyedDecodingContainer<NestedKey> where NestedKey: CodingKey {
    fatalError("Not implemented")
  }

  func nestedUnkeyedContainer(forKey key: Key) throws -> UnkeyedDecodingContainer {
    fatalError("Not implemented")
  }

  func superDecoder() throws -> Decoder { fatalError("Not implemented") }

  func superDecoder(forKey key: Key) throws -> Decoder { fatalError("Not implemented") }
}

fileprivate struct DummyUnkeyedDecodingContainer: UnkeyedDecodingContainer {
  var codingPath: [CodingKey] = []
  var count: Int? = nil
  var isAtEnd: Bool = true
  var currentIndex: Int = 0

  mutating func decodeNil() throws -> Bool { throw CKRecordSingleValueDecodingError.unableToDecode }

  mutating func decode<T>(_ type: T.Type) throws -> T where T: Decodable {
    throw CKRecordSingleValueDecodingError.unableToDecode
  }

  mutating func nestedContainer<NestedKey>(
    keyedBy type: NestedKey.Type
  ) throws -> KeyedDecodingContainer<NestedKey> where NestedKey: CodingKey {
    fatalError("Not implemented")
  }

  mutating func nestedUnkeyedContainer() throws -> UnkeyedDecodingContainer {
    fatalError("Not implemented")
  }

  mutating func superDecoder() throws -> Decoder { fatalError("Not implemented") }
}

// MARK: - CKRecordCoder/URLTransformer.swift

fileprivate enum URLTransformer {
  // static func encode(_ value: URL) -> CKRecordValue {
  static func encode(_ value: URL) -> RecordValue {
    if value.isFileURL {
      // return CKAsset(fileURL: value)
      return Asset(fileURL: value)
    } else {
      // return value.absoluteString as CKRecordValue
      return value.absoluteString as RecordValue
    }
  }

  // static func decodeMany(record: CKRecord, key: CodingKey, codingPath: [CodingKey]) throws -> [URL]
  static func decodeMany(record: Record, key: CodingKey, codingPath: [CodingKey]) throws -> [URL]
  {
    if let array = record[key.stringValue] as? [Any] {
      return try array.map { try decodeValue(value: $0, codingPath: codingPath) }
    }
    return []
  }

  // static func decodeSingle(record: CKRecord, key: CodingKey, codingPath: [CodingKey]) throws -> URL
  static func decodeSingle(record: Record, key: CodingKey, codingPath: [CodingKey]) throws -> URL
  {
    return try decodeValue(value: record[key.stringValue] as Any, codingPath: codingPath)
  }

  private static func decodeValue(value: Any, codingPath: [CodingKey]) throws -> URL {
    // if let asset = value as? CKAsset {
    if let asset = value as? Asset {
      guard let url = asset.fileURL else {
        let context = DecodingError.Context(
          codingPath: codingPath, debugDescription: "CKAsset URL was nil.")
        throw DecodingError.valueNotFound(URL.self, context)
      }
      return url
    }

    guard let str = value as? String else {
      let context = DecodingError.Context(
        codingPath: codingPath,
        debugDescription: "URL should have been encoded as String in CKRecord."
      )
      throw DecodingError.typeMismatch(URL.self, context)
    }

    guard let url = URL(string: str) else {
      let context = DecodingError.Context(
        codingPath: codingPath,
        debugDescription: "The string \(str) is not a valid url."
      )
      throw DecodingError.typeMismatch(URL.self, context)
    }
    return url
  }
}

// MARK: - Cirrus/SyncEngine.swift

fileprivate final class SyncEngine<Model: CloudKitCodable> {

  public enum ModelChange {
    case deleted(Set<CloudKitIdentifier>)
    case updated(Set<Model>)
  }

  // MARK: - Public Properties

  /// A publisher that sends a `ModelChange` when models are updated or deleted on iCloud. No thread guarantees.
  public private(set) lazy var modelsChanged = modelsChangedSubject.eraseToAnyPublisher()

  /// The current iCloud account status for the user.
  // @Published public internal(set) var accountStatus: AccountStatus = .unknown {
  // (`@Published` is Combine's, not on Linux.)
  public internal(set) var accountStatus: AccountStatus = .unknown {
    willSet {
      // Setup the environment and force a sync if the user account status changes to available while the app is running
      if accountStatus != .unknown,
        newValue == .available
      {
        setupCloudEnvironment()
      }
    }
  }

  // MARK: - Internal Properties

  lazy var privateSubscriptionIdentifier = "\(zoneIdentifier.zoneName).subscription"
  lazy var privateChangeTokenKey = "TOKEN-\(zoneIdentifier.zoneName)"
  lazy var createdPrivateSubscriptionKey = "CREATEDSUBDB-\(zoneIdentifier.zoneName))"
  lazy var createdCustomZoneKey = "CREATEDZONE-\(zoneIdentifier.zoneName))"

  lazy var workQueue = DispatchQueue(
    label: "SyncEngine.Work.\(zoneIdentifier.zoneName)",
    qos: .userInitiated
  )
  private lazy var cloudQueue = DispatchQueue(
    label: "SyncEngine.Cloud.\(zoneIdentifier.zoneName)",
    qos: .userInitiated
  )

  let defaults: UserDefaults
  // let recordType: CKRecord.RecordType
  let recordType: Record.RecordType
  // let zoneIdentifier: CKRecordZone.ID
  let zoneIdentifier: RecordZone.ID

  // let container: CKContainer
  let container: Container
  let logHandler: (String, OSLogType) -> Void

  // lazy var privateDatabase: CKDatabase = container.privateCloudDatabase
  lazy var privateDatabase: Database = container.privateCloudDatabase

  var cancellables = Set<AnyCancellable>()
  let modelsChangedSubject = PassthroughSubject<ModelChange, Never>()

  private lazy var uploadContext: UploadRecordContext<Model> = UploadRecordContext(
    defaults: defaults, zoneID: zoneIdentifier, logHandler: logHandler)
  private lazy var deleteContext: DeleteRecordContext<Model> = DeleteRecordContext(
    defaults: defaults, zoneID: zoneIdentifier, logHandler: logHandler)

  lazy var cloudOperationQueue: OperationQueue = {
    let queue = OperationQueue()

    queue.underlyingQueue = cloudQueue
    queue.name = "SyncEngine.Cloud.\(zoneIdentifier.zoneName))"

    return queue
  }()

  /// - Parameters:
  ///   - defaults: The `UserDefaults` used to store sync state information
  ///   - containerIdentifier: An optional bundle identifier of the app whose container you want to access. The bundle identifier must be in the app’s com.apple.developer.icloud-container-identifiers entitlement. If this value is nil, the default container object will be used.
  ///   - initialItems: An initial array of items to sync
  ///
  /// `initialItems` is used to perform a sync of any local models that don't yet exist in CloudKit. The engine uses the
  /// presence of data in `cloudKitSystemFields` to determine what models to upload. Alternatively, you can just call `upload(_:)` to sync initial items.
  public init(
    defaults: UserDefaults = .standard,
    containerIdentifier: String? = nil,
    // Stratus: the store (an SQLite file's path or a PostgreSQL URL) and the user a container
    // opens (README, "Containers").
    storeLocation: String,
    userName: String,
    initialItems: [Model] = [],
    logHandler: ((String, OSLogType) -> Void)? = nil
  ) {
    self.defaults = defaults
    self.recordType = String(describing: Model.self)
    // let zoneIdent = CKRecordZone.ID(
    let zoneIdent = RecordZone.ID(
      zoneName: self.recordType,
      // ownerName: CKCurrentUserDefaultName
      ownerName: CurrentUserDefaultName
    )
    self.zoneIdentifier = zoneIdent
    if let containerIdentifier = containerIdentifier {
      // self.container = CKContainer(identifier: containerIdentifier)
      self.container = try! Container(
        identifier: containerIdentifier, store: storeLocation, userName: userName)
    } else {
      // self.container = CKContainer.default()
      self.container = Container.default()
    }

    self.logHandler =
      logHandler ?? { string, level in
        // `Logger` (os.log) is not on Linux; the tests pass a handler of their own.
        // let logger = Logger.init(
        //   subsystem: "com.jayhickey.Cirrus.\(zoneIdent)",
        //   category: String(describing: SyncEngine.self)
        // )
        // logger.log(level: level, "\(string)")
      }

    // Add items that haven't been uploaded yet.
    self.uploadContext.buffer(initialItems.filter { $0.cloudKitSystemFields == nil })

    observeAccountStatus()
    setupCloudEnvironment()
  }

  // MARK: - Public Methods

  /// Upload models to CloudKit.
  public func upload(_ models: Model...) {
    upload(models)
  }

  /// Upload an array of models to CloudKit.
  public func upload(_ models: [Model]) {
    logHandler(#function, .debug)

    workQueue.async {
      self.uploadContext.buffer(models)
      self.modifyRecords(with: self.uploadContext)
    }
  }

  /// Delete models from CloudKit.
  public func delete(_ models: Model...) {
    delete(models)
  }

  /// Delete an array of models from CloudKit.
  public func delete(_ models: [Model]) {
    logHandler(#function, .debug)

    workQueue.async {
      // Remove any pending upload items that match the items we want to delete
      self.uploadContext.removeFromBuffer(models)

      self.deleteContext.buffer(models)
      self.modifyRecords(with: self.deleteContext)
    }
  }

  /// Forces a data synchronization with CloudKit.
  ///
  /// Use this method for force sync any data that may not have been able to upload
  /// to CloudKit automatically due to network conditions or other factors.
  ///
  /// This method performs the following actions (in this order):
  /// 1. Uploads any models that were passed to `upload(_:)` and were unable to be uploaded to CloudKit.
  /// 2. Deletes any models that were passed to `delete(_:)` and were unable to be deleted from CloudKit.
  /// 3. Fetches any new model changes from CloudKit.
  public func forceSync() {
    logHandler(#function, .debug)

    workQueue.async {
      self.performUpdate(with: self.uploadContext)
      self.performUpdate(with: self.deleteContext)
      self.fetchRemoteChanges()
    }
  }

  /// Processes remote change push notifications from CloudKit.
  ///
  /// To subscribe to automatic changes, register for CloudKit push notifications by calling `application.registerForRemoteNotifications()`
  /// in your AppDelegate's `application(_:didFinishLaunchingWithOptions:)`. Then, call this method in
  /// `application(_:didReceiveRemoteNotification:fetchCompletionHandler:)` to process remote changes from CloudKit.
  /// - Parameters:
  ///   - userInfo: A dictionary that contains information about the remove notification. Pass the `userInfo` dictionary from `application(_:didReceiveRemoteNotification:fetchCompletionHandler:)` here.
  /// - Returns: Whether or not this notification was processed by the sync engine.
  @discardableResult public func processRemoteChangeNotification(with userInfo: [AnyHashable: Any])
    -> Bool
  {
    logHandler(#function, .debug)

    // guard let notification = CKNotification(fromRemoteNotificationDictionary: userInfo) else {
    guard let notification = StratusNotification(fromRemoteNotificationDictionary: userInfo) else {
      logHandler("Not a CKNotification", .error)
      return false
    }

    guard notification.subscriptionID == privateSubscriptionIdentifier else {
      logHandler("Not our subscription ID", .error)
      return false
    }

    logHandler("Received remote CloudKit notification for user data", .debug)

    self.workQueue.async { [weak self] in
      self?.fetchRemoteChanges()
    }

    return true
  }

  // MARK: - Private Methods

  private func setupCloudEnvironment() {
    workQueue.async { [weak self] in
      guard let self = self else { return }

      // Initialize CloudKit with private custom zone, but bail early if we fail
      guard self.initializeZone(with: self.cloudOperationQueue) else {
        self.logHandler("Unable to initialize zone, bailing from setup early", .error)
        return
      }

      // Subscribe to CloudKit changes, but bail early if we fail
      guard self.initializeSubscription(with: self.cloudOperationQueue) else {
        self.logHandler(
          "Unable to initialize subscription to changes, bailing from setup early", .error)
        return
      }
      self.logHandler("Cloud environment preparation done", .debug)

      self.performUpdate(with: self.uploadContext)
      self.performUpdate(with: self.deleteContext)
      self.fetchRemoteChanges()
    }
  }
}

// MARK: - Cirrus/SyncEngine+AccountStatus.swift

fileprivate enum AccountStatus: Equatable {
  case unknown
  case couldNotDetermine
  case available
  case restricted
  case noAccount
}

extension SyncEngine {

  // MARK: - Internal

  func observeAccountStatus() {
    // NotificationCenter.default.publisher(for: .CKAccountChanged, object: nil).sink {
    //   [weak self] _ in
    //   self?.updateAccountStatus()
    // }
    // .store(in: &cancellables)
    // Combine's `publisher(for:)` is not on Linux: the same observer in the closure form, ended
    // with the engine as the `AnyCancellable` ends it. (Stratus never posts it: a container's
    // user does not change while it is open.)
    let observer = NotificationCenter.default.addObserver(
      forName: .AccountChanged, object: nil, queue: nil
    ) { [weak self] _ in
      self?.updateAccountStatus()
    }
    AnyCancellable { NotificationCenter.default.removeObserver(observer) }
      .store(in: &cancellables)

    updateAccountStatus()
  }

  // MARK: - Private

  private func updateAccountStatus() {
    logHandler(#function, .debug)
    container.accountStatus { [weak self] status, error in
      if let error = error {
        self?.logHandler(
          "Error retriving iCloud account status: \(error.localizedDescription)", .error)
      }

      DispatchQueue.main.async {
        let accountStatus: AccountStatus
        switch status {
        case .available:
          accountStatus = .available
        case .couldNotDetermine:
          accountStatus = .couldNotDetermine
        case .noAccount:
          accountStatus = .noAccount
        case .restricted:
          accountStatus = .restricted
        default:
          accountStatus = .unknown
        }
        self?.accountStatus = accountStatus
      }
    }
  }
}

// MARK: - Cirrus/SyncEngine+Zone.swift

extension SyncEngine {

  // MARK: - Internal

  func initializeZone(with queue: OperationQueue) -> Bool {
    self.createCustomZoneIfNeeded()
    queue.waitUntilAllOperationsAreFinished()
    guard self.createdCustomZone else { return false }
    return true
  }

  // MARK: - Private

  private var createdCustomZone: Bool {
    get {
      return defaults.bool(forKey: createdCustomZoneKey)
    }
    set {
      defaults.set(newValue, forKey: createdCustomZoneKey)
    }
  }

  private func createCustomZoneIfNeeded() {
    guard !createdCustomZone else {
      logHandler(
        "Already have custom zone, skipping creation but checking if zone really exists", .debug)

      checkCustomZone()

      return
    }

    logHandler("Creating CloudKit zone \(zoneIdentifier.zoneName)", .info)

    // let zone = CKRecordZone(zoneID: zoneIdentifier)
    let zone = RecordZone(zoneID: zoneIdentifier)
    // let operation = CKModifyRecordZonesOperation(
    let operation = ModifyRecordZonesOperation(
      recordZonesToSave: [zone],
      recordZoneIDsToDelete: nil
    )

    operation.modifyRecordZonesCompletionBlock = { [weak self] _, _, error in
      guard let self = self else { return }

      if let error = error {
        self.logHandler(
          "Failed to create custom CloudKit zone: \(String(describing: error))", .error)

        error.retryCloudKitOperationIfPossible(self.logHandler, queue: self.workQueue) {
          self.createCustomZoneIfNeeded()
        }
      } else {
        self.logHandler("Zone created successfully", .info)
        self.createdCustomZone = true
      }
    }

    operation.qualityOfService = .userInitiated
    operation.database = privateDatabase

    cloudOperationQueue.addOperation(operation)
  }

  private func checkCustomZone() {
    // let operation = CKFetchRecordZonesOperation(recordZoneIDs: [zoneIdentifier])
    let operation = FetchRecordZonesOperation(recordZoneIDs: [zoneIdentifier])

    operation.fetchRecordZonesCompletionBlock = { [weak self] ids, error in
      guard let self = self else { return }

      if let error = error {
        self.logHandler(
          "Failed to check for custom zone existence: \(String(describing: error))", .error)

        if !error.retryCloudKitOperationIfPossible(
          self.logHandler, queue: self.workQueue, with: { self.checkCustomZone() })
        {
          self.logHandler(
            "Irrecoverable error when fetching custom zone, assuming it doesn't exist: \(String(describing: error))",
            .error)

          self.workQueue.async {
            self.createdCustomZone = false
            self.createCustomZoneIfNeeded()
          }
        }
      } else if ids?.isEmpty ?? true {
        self.logHandler("Custom zone reported as existing, but it doesn't exist. Creating.", .error)
        self.workQueue.async {
          self.createdCustomZone = false
          self.createCustomZoneIfNeeded()
        }
      }
    }

    operation.qualityOfService = .userInitiated
    operation.database = privateDatabase

    cloudOperationQueue.addOperation(operation)
  }
}

// MARK: - Cirrus/SyncEngine+Subscription.swift

extension SyncEngine {

  // MARK: - Internal

  func initializeSubscription(with queue: OperationQueue) -> Bool {
    self.createPrivateSubscriptionsIfNeeded()
    queue.waitUntilAllOperationsAreFinished()
    guard self.createdPrivateSubscription else { return false }
    return true
  }

  // MARK: - Private

  private var createdPrivateSubscription: Bool {
    get {
      return defaults.bool(forKey: createdPrivateSubscriptionKey)
    }
    set {
      defaults.set(newValue, forKey: createdPrivateSubscriptionKey)
    }
  }

  private func createPrivateSubscriptionsIfNeeded() {
    guard !createdPrivateSubscription else {
      logHandler(
        "Already subscribed to private database changes, skipping subscription but checking if it really exists",
        .debug)

      checkSubscription()

      return
    }

    // let subscription = CKRecordZoneSubscription(
    let subscription = RecordZoneSubscription(
      zoneID: zoneIdentifier, subscriptionID: privateSubscriptionIdentifier)

    // let notificationInfo = CKSubscription.NotificationInfo()
    let notificationInfo = Subscription.NotificationInfo()
    notificationInfo.shouldSendContentAvailable = true

    subscription.notificationInfo = notificationInfo
    subscription.recordType = recordType

    // let operation = CKModifySubscriptionsOperation(
    let operation = ModifySubscriptionsOperation(
      subscriptionsToSave: [subscription], subscriptionIDsToDelete: nil)

    operation.database = privateDatabase
    operation.qualityOfService = .userInitiated

    operation.modifySubscriptionsCompletionBlock = { [weak self] _, _, error in
      guard let self = self else { return }

      if let error = error {
        self.logHandler(
          "Failed to create private CloudKit subscription: \(String(describing: error))", .error)

        error.retryCloudKitOperationIfPossible(self.logHandler, queue: self.workQueue) {
          self.createPrivateSubscriptionsIfNeeded()
        }
      } else {
        self.logHandler("Private subscription created successfully", .info)
        self.createdPrivateSubscription = true
      }
    }

    cloudOperationQueue.addOperation(operation)
  }

  private func checkSubscription() {
    // let operation = CKFetchSubscriptionsOperation(subscriptionIDs: [privateSubscriptionIdentifier])
    let operation = FetchSubscriptionsOperation(subscriptionIDs: [privateSubscriptionIdentifier])

    operation.fetchSubscriptionCompletionBlock = { [weak self] ids, error in
      guard let self = self else { return }

      if let error = error {
        self.logHandler(
          "Failed to check for private zone subscription existence: \(String(describing: error))",
          .error)

        if !error.retryCloudKitOperationIfPossible(
          self.logHandler, queue: self.workQueue, with: { self.checkSubscription() })
        {
          self.logHandler(
            "Irrecoverable error when fetching private zone subscription, assuming it doesn't exist: \(String(describing: error))",
            .error)

          self.workQueue.async {
            self.createdPrivateSubscription = false
            self.createPrivateSubscriptionsIfNeeded()
          }
        }
      } else if ids?.isEmpty ?? true {
        self.logHandler(
          "Private subscription reported as existing, but it doesn't exist. Creating.", .error
        )

        self.workQueue.async {
          self.createdPrivateSubscription = false
          self.createPrivateSubscriptionsIfNeeded()
        }
      } else {
        self.logHandler(
          "Private subscription found, the device is subscribed to CloudKit change notifications.",
          .error
        )
      }
    }

    operation.qualityOfService = .userInitiated
    operation.database = privateDatabase

    cloudOperationQueue.addOperation(operation)
  }
}

// MARK: - Cirrus/SyncEngine+RemoteChangeTracking.swift

extension SyncEngine {

  // MARK: - Internal

  func fetchRemoteChanges() {
    logHandler("\(#function)", .debug)

    // var changedRecords: [CKRecord] = []
    // var deletedRecordIDs: [CKRecord.ID] = []
    // Dispatch on Linux takes `async`'s closure as `@Sendable`, so the captured `var`s the
    // closures below change are marked (they are only touched on the serial `workQueue`).
    nonisolated(unsafe) var changedRecords: [Record] = []
    nonisolated(unsafe) var deletedRecordIDs: [Record.ID] = []

    // let operation = CKFetchRecordZoneChangesOperation()
    let operation = FetchRecordZoneChangesOperation()

    // let token: CKServerChangeToken? = privateChangeToken
    let token: ServerChangeToken? = privateChangeToken

    // let config = CKFetchRecordZoneChangesOperation.ZoneConfiguration(
    let config = FetchRecordZoneChangesOperation.ZoneConfiguration(
      previousServerChangeToken: token,
      resultsLimit: nil,
      desiredKeys: nil
    )

    operation.configurationsByRecordZoneID = [zoneIdentifier: config]

    operation.recordZoneIDs = [zoneIdentifier]
    operation.fetchAllChanges = true

    // Called if the record zone fetch was not fully completed
    operation.recordZoneChangeTokensUpdatedBlock = { [weak self] _, changeToken, _ in
      guard let self = self else { return }

      guard let changeToken = changeToken else { return }

      // The fetch may have failed halfway through, so we need to save the change token,
      // emit the current records, and then clear the arrays so we can re-request for the
      // rest of the data.
      self.workQueue.async {
        self.logHandler("Commiting new change token and emitting changes", .debug)

        self.privateChangeToken = changeToken
        self.emitServerChanges(with: changedRecords, deletedRecordIDs: deletedRecordIDs)
        changedRecords = []
        deletedRecordIDs = []
      }
    }

    // Called after the record zone fetch completes
    operation.recordZoneFetchCompletionBlock = { [weak self] _, token, _, _, error in
      guard let self = self else { return }

      // if let error = error as? CKError {
      if let error = error as? StratusError {
        self.logHandler(
          "Failed to fetch record zone changes: \(String(describing: error))", .error)

        if error.code == .changeTokenExpired {
          self.logHandler(
            "Change token expired, resetting token and trying again", .error)

          self.workQueue.async {
            self.privateChangeToken = nil
            self.fetchRemoteChanges()
          }
        } else {
          error.retryCloudKitOperationIfPossible(self.logHandler, queue: self.workQueue) {
            self.fetchRemoteChanges()
          }
        }
      } else {
        self.logHandler("Commiting new change token", .debug)

        self.workQueue.async {
          self.privateChangeToken = token
        }
      }
    }

    operation.recordChangedBlock = { [weak self] record in
      self?.workQueue.async {
        changedRecords.append(record)
      }
    }

    operation.recordWithIDWasDeletedBlock = { [weak self] recordID, recordType in
      // self?.workQueue.async {
      // (`[weak self]` again: Dispatch's closure is `@Sendable` on Linux, and the outer weak
      // `self` is a captured `var` there.)
      self?.workQueue.async { [weak self] in
        guard let engineRecordType = self?.recordType,
          engineRecordType == recordType
        else { return }
        deletedRecordIDs.append(recordID)
      }
    }

    operation.fetchRecordZoneChangesCompletionBlock = { [weak self] error in
      guard let self = self else { return }

      if let error = error {
        self.logHandler(
          "Failed to fetch record zone changes: \(String(describing: error))", .error)

        error.retryCloudKitOperationIfPossible(self.logHandler, queue: self.workQueue) {
          self.fetchRemoteChanges()
        }
      } else {
        self.logHandler("Finished fetching record zone changes", .info)

        self.workQueue.async {
          self.emitServerChanges(with: changedRecords, deletedRecordIDs: deletedRecordIDs)
          changedRecords = []
          deletedRecordIDs = []
        }
      }
    }

    operation.qualityOfService = .userInitiated
    operation.database = privateDatabase

    cloudOperationQueue.addOperation(operation)
  }

  // MARK: - Private

  // private var privateChangeToken: CKServerChangeToken? {
  private var privateChangeToken: ServerChangeToken? {
    get {
      guard let data = defaults.data(forKey: privateChangeTokenKey) else { return nil }
      guard !data.isEmpty else { return nil }

      do {
        let token = try NSKeyedUnarchiver.unarchivedObject(
          // ofClass: CKServerChangeToken.self, from: data)
          ofClass: ServerChangeToken.self, from: data)

        return token
      } catch {
        logHandler(
          "Failed to decode CKServerChangeToken from defaults key privateChangeToken", .error)
        return nil
      }
    }
    set {
      guard let newValue = newValue else {
        // defaults.setValue(Data(), forKey: privateChangeTokenKey)
        // (`setValue(_:forKey:)` is key-value coding, which Foundation on Linux does not have.)
        defaults.set(Data(), forKey: privateChangeTokenKey)
        return
      }

      do {
        let data = try NSKeyedArchiver.archivedData(
          withRootObject: newValue, requiringSecureCoding: true)

        defaults.set(data, forKey: privateChangeTokenKey)
      } catch {
        logHandler(
          "Failed to encode private change token: \(String(describing: error))", .error)
      }
    }
  }

  // private func emitServerChanges(with changedRecords: [CKRecord], deletedRecordIDs: [CKRecord.ID]) {
  private func emitServerChanges(with changedRecords: [Record], deletedRecordIDs: [Record.ID]) {
    guard !changedRecords.isEmpty || !deletedRecordIDs.isEmpty else {
      logHandler("Finished record zone changes fetch with no changes", .info)
      return
    }

    logHandler(
      "Will emit \(changedRecords.count) changed record(s) and \(deletedRecordIDs.count) deleted record(s)",
      .info)

    let models: Set<Model> = Set(
      changedRecords.compactMap { record in
        do {
          let decoder = CKRecordDecoder()
          return try decoder.decode(Model.self, from: record)
        } catch {
          logHandler(
            "Error decoding item from record: \(String(describing: error))", .error)
          return nil
        }
      })

    let deletedIdentifiers = Set(deletedRecordIDs.map(\.recordName))

    modelsChangedSubject.send(.updated(models))
    modelsChangedSubject.send(.deleted(deletedIdentifiers))
  }
}

// MARK: - Cirrus/SyncEngine+RecordModification.swift

extension SyncEngine {

  // MARK: - Internal

  func performUpdate(with context: RecordModifyingContext) {
    self.logHandler("\(#function)", .debug)

    guard !context.recordIDsToDelete.isEmpty || !context.recordsToSave.isEmpty else { return }

    self.logHandler(
      "Using \(context.name) context, found %d local items(s) for upload and \(context.recordsToSave.count) for deletion.",
      .debug
    )

    modifyRecords(with: context)
  }

  func modifyRecords(with context: RecordModifyingContext) {
    modifyRecords(
      toSave: Array(context.recordsToSave.values), recordIDsToDelete: context.recordIDsToDelete,
      context: context)
  }

  // MARK: - Private

  private func modifyRecords(
    // toSave recordsToSave: [CKRecord],
    toSave recordsToSave: [Record],
    // recordIDsToDelete: [CKRecord.ID],
    recordIDsToDelete: [Record.ID],
    context: RecordModifyingContextProvider
  ) {
    guard !recordIDsToDelete.isEmpty || !recordsToSave.isEmpty else { return }

    logHandler(
      "Sending \(recordsToSave.count) record(s) for upload and \(recordIDsToDelete.count) record(s) for deletion.",
      .debug)

    // let operation = CKModifyRecordsOperation(
    let operation = ModifyRecordsOperation(
      recordsToSave: recordsToSave, recordIDsToDelete: recordIDsToDelete)

    operation.modifyRecordsCompletionBlock = { [weak self] serverRecords, deletedRecordIDs, error in
      guard let self = self else { return }

      if let error = error {
        self.logHandler("Failed to \(context.name) records: \(String(describing: error))", .error)

        self.workQueue.async {
          self.handleError(
            error,
            toSave: recordsToSave,
            recordIDsToDelete: recordIDsToDelete,
            context: context
          )
        }
      } else {
        self.logHandler(
          "Successfully \(context.name) record(s). Saved \(recordsToSave.count) and deleted \(recordIDsToDelete.count)",
          .info)

        self.workQueue.async {
          self.modelsChangedSubject.send(
            context.modelChangeForUpdatedRecords(
              recordsSaved: serverRecords ?? [],
              recordIDsDeleted: deletedRecordIDs ?? []
            )
          )
        }
      }
    }

    operation.savePolicy = context.savePolicy
    operation.qualityOfService = .userInitiated
    operation.database = privateDatabase

    cloudOperationQueue.addOperation(operation)
  }

  // MARK: - Private

  private func handleError(
    _ error: Error,
    // toSave recordsToSave: [CKRecord],
    toSave recordsToSave: [Record],
    // recordIDsToDelete: [CKRecord.ID],
    recordIDsToDelete: [Record.ID],
    context: RecordModifyingContextProvider
  ) {
    // guard let ckError = error as? CKError else {
    guard let ckError = error as? StratusError else {
      logHandler(
        "Error was not a CKError, giving up: \(String(describing: error))", .fault)
      return
    }

    switch ckError {

    case _ where ckError.isCloudKitZoneDeleted:
      logHandler(
        "Zone was deleted, recreating zone: \(String(describing: error))", .error)
      guard initializeZone(with: self.cloudOperationQueue) else {
        logHandler(
          "Unable to create zone, error is not recoverable: \(String(describing: error))", .fault)
        return
      }
      self.modifyRecords(
        toSave: recordsToSave,
        recordIDsToDelete: recordIDsToDelete,
        context: context
      )

    // case _ where ckError.code == CKError.Code.limitExceeded:
    case _ where ckError.code == StratusError.Code.limitExceeded:
      logHandler(
        "CloudKit batch limit exceeded, trying to \(context.name) records in chunks", .error)

      let firstHalfSave = Array(recordsToSave[0..<recordsToSave.count / 2])
      let secondHalfSave = Array(recordsToSave[recordsToSave.count / 2..<recordsToSave.count])

      let firstHalfDelete = Array(recordIDsToDelete[0..<recordIDsToDelete.count / 2])
      let secondHalfDelete = Array(
        recordIDsToDelete[recordIDsToDelete.count / 2..<recordIDsToDelete.count])

      let results = [(firstHalfSave, firstHalfDelete), (secondHalfSave, secondHalfDelete)].map {
        // (save: [CKRecord], delete: [CKRecord.ID]) in
        (save: [Record], delete: [Record.ID]) in
        error.retryCloudKitOperationIfPossible(self.logHandler, queue: self.workQueue) {
          self.modifyRecords(
            toSave: save,
            recordIDsToDelete: delete,
            context: context
          )
        }
      }

      if !results.allSatisfy({ $0 == true }) {
        logHandler(
          "Error is not recoverable: \(String(describing: error))", .error)
      }

    case _ where ckError.code == .partialFailure:
      // if let partialErrors = ckError.userInfo[CKPartialErrorsByItemIDKey] as? [CKRecord.ID: Error] {
      if let partialErrors = ckError.userInfo[PartialErrorsByItemIDKey] as? [Record.ID: Error] {
        let recordIDsNotSavedOrDeleted = Set(partialErrors.keys)

        let batchRequestFailedRecordIDs = Set(
          partialErrors.filter({ (_, error) in
            // if let error = error as? CKError,
            if let error = error as? StratusError,
              error.code == .batchRequestFailed
            {
              return true
            }
            return false
          }).keys)

        let serverRecordChangedErrors = partialErrors.filter({ (_, error) in
          // if let error = error as? CKError,
          if let error = error as? StratusError,
            error.code == .serverRecordChanged
          {
            return true
          }
          return false
        }).values

        let unknownItemRecordIDs = Set(
          partialErrors.filter({ (_, error) in
            // if let error = error as? CKError,
            if let error = error as? StratusError,
              error.code == .unknownItem
            {
              return true
            }
            return false
          }).keys)

        context.failedToUpdateRecords(
          recordsSaved: recordsToSave.filter { unknownItemRecordIDs.contains($0.recordID) },
          recordIDsDeleted: recordIDsToDelete.filter(unknownItemRecordIDs.contains)
        )

        let recordsToSaveWithoutUnknowns =
          recordsToSave
          .filter { recordIDsNotSavedOrDeleted.contains($0.recordID) }
          .filter { !unknownItemRecordIDs.contains($0.recordID) }

        let recordIDsToDeleteWithoutUnknowns =
          recordIDsToDelete
          .filter(recordIDsNotSavedOrDeleted.contains)
          .filter { !unknownItemRecordIDs.contains($0) }

        let resolvedConflictsToSave =
          serverRecordChangedErrors
          .compactMap { $0.resolveConflict(logHandler, with: Model.resolveConflict) }

        let conflictsToSaveSet = Set(resolvedConflictsToSave.map(\.recordID))
        let batchRequestFailureRecordsToSave = recordsToSaveWithoutUnknowns.filter {
          !conflictsToSaveSet.contains($0.recordID)
            && batchRequestFailedRecordIDs.contains($0.recordID)
        }

        modifyRecords(
          toSave: batchRequestFailureRecordsToSave + resolvedConflictsToSave,
          recordIDsToDelete: recordIDsToDeleteWithoutUnknowns,
          context: context
        )
      }

    case _ where ckError.code == .serverRecordChanged:
      if let resolvedRecord = error.resolveConflict(logHandler, with: Model.resolveConflict) {
        logHandler("Conflict resolved, will retry upload", .info)
        self.modifyRecords(
          toSave: [resolvedRecord],
          recordIDsToDelete: [],
          context: context
        )
      } else {
        logHandler(
          "Resolving conflict returned a nil record. Giving up.", .error
        )
      }

    case _
    where ckError.code == .serviceUnavailable
      || ckError.code == .networkUnavailable
      || ckError.code == .networkFailure
      || ckError.code == .serverResponseLost:
      logHandler(
        "Unable to connect to iCloud servers: \(String(describing: error))", .info)

    case _ where ckError.code == .unknownItem:
      logHandler(
        "Unknown item, ignoring: \(String(describing: error))", .info)

    default:
      let result = error.retryCloudKitOperationIfPossible(self.logHandler, queue: self.workQueue) {
        self.modifyRecords(
          toSave: recordsToSave,
          recordIDsToDelete: recordIDsToDelete,
          context: context
        )
      }

      if !result {
        logHandler(
          "Error is not recoverable: \( String(describing: error))", .error)
        context.failedToUpdateRecords(
          recordsSaved: recordsToSave, recordIDsDeleted: recordIDsToDelete)
      }
    }
  }
}

// MARK: - Cirrus/Error+CloudKit.swift

// `extension Error {`: file-private, as the model protocol its methods take is.
fileprivate extension Error {

  /// Whether this error represents a "zone not found" or a "user deleted zone" error
  var isCloudKitZoneDeleted: Bool {
    // guard let effectiveError = self as? CKError else { return false }
    guard let effectiveError = self as? StratusError else { return false }

    return [.zoneNotFound, .userDeletedZone].contains(effectiveError.code)
  }

  /// Uses the `resolver` closure to resolve a conflict, returning the conflict-free record
  ///
  /// - Parameter resolver: A closure that will receive the client record as the first param and the server record as the second param.
  /// This closure is responsible for handling the conflict and returning the conflict-free record.
  /// - Returns: The conflict-free record returned by `resolver`
  func resolveConflict<Persistable: CloudKitCodable>(
    _ logger: ((String, OSLogType) -> Void)? = nil,
    with resolver: (Persistable, Persistable) -> Persistable?
  // ) -> CKRecord? {
  ) -> Record? {
    // guard let effectiveError = self as? CKError else {
    guard let effectiveError = self as? StratusError else {
      logger?(
        "resolveConflict called on an error that was not a CKError. The error was \(String(describing: self))",
        .fault)
      return nil
    }

    guard effectiveError.code == .serverRecordChanged else {
      logger?(
        "resolveConflict called on a CKError that was not a serverRecordChanged error. The error was \(String(describing: effectiveError))",
        .fault)
      return nil
    }

    guard let clientRecord = effectiveError.clientRecord else {
      logger?(
        "Failed to obtain client record from serverRecordChanged error. The error was \(String(describing: effectiveError))",
        .fault)
      return nil
    }

    guard let serverRecord = effectiveError.serverRecord else {
      logger?(
        "Failed to obtain server record from serverRecordChanged error. The error was \(String(describing: effectiveError))",
        .fault)
      return nil
    }

    logger?(
      "CloudKit conflict with record of type \(serverRecord.recordType). Running conflict resolver",
      .error)

    // Always return the server record so we don't end up in a conflict loop (the server record has the change tag we want to use)
    // https://developer.apple.com/documentation/cloudkit/ckerror/2325208-serverrecordchanged
    guard
      let clientPersistable = try? CKRecordDecoder().decode(
        Persistable.self, from: clientRecord),
      let serverPersistable = try? CKRecordDecoder().decode(
        Persistable.self, from: serverRecord),
      let resolvedPersistable = resolver(clientPersistable, serverPersistable),
      // let resolvedRecord = try? CKRecordEncoder(zoneID: serverRecord.recordID.zoneID).encode(
      let resolvedRecord = try? CKRecordCoder.CKRecordEncoder(zoneID: serverRecord.recordID.zoneID).encode(
        resolvedPersistable)
    else { return nil }
    resolvedRecord.allKeys().forEach { serverRecord[$0] = resolvedRecord[$0] }
    return serverRecord
  }

  /// Retries a CloudKit operation if the error suggests it
  ///
  /// - Parameters:
  ///   - log: The logger to use for logging information about the error handling, uses the default one if not set
  ///   - block: The block that will execute the operation later if it can be retried
  /// - Returns: Whether or not it was possible to retry the operation
  @discardableResult func retryCloudKitOperationIfPossible(
    _ logger: ((String, OSLogType) -> Void)? = nil, queue: DispatchQueue,
    with block: @escaping () -> Void
  ) -> Bool {
    // guard let effectiveError = self as? CKError else { return false }
    guard let effectiveError = self as? StratusError else { return false }

    let retryDelay: Double
    if let suggestedRetryDelay = effectiveError.retryAfterSeconds {
      retryDelay = suggestedRetryDelay
    // } else if effectiveError.code == CKError.Code.limitExceeded {
    } else if effectiveError.code == StratusError.Code.limitExceeded {
      retryDelay = 0
    } else {
      logger?("Error is not recoverable", .error)
      return false
    }

    logger?("Error is recoverable. Will retry after \(retryDelay) seconds", .error)

    queue.asyncAfter(deadline: .now() + retryDelay) {
      block()
    }

    return true
  }

}

// MARK: - Cirrus/RecordModifyingContext.swift

fileprivate protocol RecordModifyingContext: RecordModifyingContextProvider {
  // var recordsToSave: [CKRecord.ID: CKRecord] { get }
  var recordsToSave: [Record.ID: Record] { get }
  // var recordIDsToDelete: [CKRecord.ID] { get }
  var recordIDsToDelete: [Record.ID] { get }
}

fileprivate protocol RecordModifyingContextProvider {
  var name: String { get }
  // var savePolicy: CKModifyRecordsOperation.RecordSavePolicy { get }
  var savePolicy: ModifyRecordsOperation.RecordSavePolicy { get }
  // func modelChangeForUpdatedRecords<T>(recordsSaved: [CKRecord], recordIDsDeleted: [CKRecord.ID])
  func modelChangeForUpdatedRecords<T>(recordsSaved: [Record], recordIDsDeleted: [Record.ID])
    -> SyncEngine<T>.ModelChange
  // func failedToUpdateRecords(recordsSaved: [CKRecord], recordIDsDeleted: [CKRecord.ID])
  func failedToUpdateRecords(recordsSaved: [Record], recordIDsDeleted: [Record.ID])
}

// MARK: - Cirrus/UploadRecordContext.swift

fileprivate final class UploadRecordContext<Persistable: CloudKitCodable>: RecordModifyingContext {

  private let defaults: UserDefaults
  // private let zoneID: CKRecordZone.ID
  private let zoneID: RecordZone.ID
  private let logHandler: (String, OSLogType) -> Void

  private lazy var uploadBufferKey = "UPLOADBUFFER-\(zoneID.zoneName))"

  init(
    // defaults: UserDefaults, zoneID: CKRecordZone.ID,
    defaults: UserDefaults, zoneID: RecordZone.ID,
    logHandler: @escaping (String, OSLogType) -> Void
  ) {
    self.defaults = defaults
    self.zoneID = zoneID
    self.logHandler = logHandler
  }

  func buffer(_ values: [Persistable]) {
    // let records: [CKRecord]
    let records: [Record]
    do {
      // records = try values.map { try CKRecordEncoder(zoneID: zoneID).encode($0) }
      records = try values.map { try CKRecordCoder.CKRecordEncoder(zoneID: zoneID).encode($0) }
    } catch let error {
      logHandler("Failed to encode records for upload: \(String(describing: error))", .error)
      // records = values.compactMap { try? CKRecordEncoder(zoneID: zoneID).encode($0) }
      records = values.compactMap { try? CKRecordCoder.CKRecordEncoder(zoneID: zoneID).encode($0) }
    }
    records.forEach { recordsToSave[$0.recordID] = $0 }
  }

  func removeFromBuffer(_ values: [Persistable]) {
    // let records = values.compactMap { try? CKRecordEncoder(zoneID: zoneID).encode($0) }
    let records = values.compactMap { try? CKRecordCoder.CKRecordEncoder(zoneID: zoneID).encode($0) }
    records.forEach { recordsToSave.removeValue(forKey: $0.recordID) }
  }

  // MARK: - RecordModifying

  let name = "upload"
  // let savePolicy: CKModifyRecordsOperation.RecordSavePolicy = .ifServerRecordUnchanged
  let savePolicy: ModifyRecordsOperation.RecordSavePolicy = .ifServerRecordUnchanged

  // var recordsToSave: [CKRecord.ID: CKRecord] {
  var recordsToSave: [Record.ID: Record] {
    get {
      guard let data = defaults.data(forKey: uploadBufferKey) else { return [:] }
      do {
        // return try NSKeyedUnarchiver.unarchiveTopLevelObjectWithData(data)
        //   as? [CKRecord.ID: CKRecord] ?? [:]
        return try NSKeyedUnarchiver.unarchiveTopLevelObjectWithData(data)
          as? [Record.ID: Record] ?? [:]
      } catch {
        logHandler("Failed to decode CKRecord.IDs from defaults key uploadBufferKey", .error)
        return [:]
      }
    }
    set {
      do {
        logHandler("Updating \(self.name) buffer with \(newValue.count) items", .info)
        let data = try NSKeyedArchiver.archivedData(
          withRootObject: newValue, requiringSecureCoding: true)
        defaults.set(data, forKey: uploadBufferKey)
      } catch {
        logHandler("Failed to encode record ids for upload: \(String(describing: error))", .error)
      }
    }
  }

  // var recordIDsToDelete: [CKRecord.ID] = []
  var recordIDsToDelete: [Record.ID] = []

  func modelChangeForUpdatedRecords<T: CloudKitCodable>(
    // recordsSaved: [CKRecord], recordIDsDeleted: [CKRecord.ID]
    recordsSaved: [Record], recordIDsDeleted: [Record.ID]
  ) -> SyncEngine<T>.ModelChange {
    let models: Set<T> = Set(
      recordsSaved.compactMap { record in
        do {
          let decoder = CKRecordDecoder()
          return try decoder.decode(T.self, from: record)
        } catch {
          logHandler("Error decoding item from record: \(String(describing: error))", .error)
          return nil
        }
      })

    recordsSaved.forEach { recordsToSave.removeValue(forKey: $0.recordID) }

    return .updated(models)
  }

  // func failedToUpdateRecords(recordsSaved: [CKRecord], recordIDsDeleted: [CKRecord.ID]) {
  func failedToUpdateRecords(recordsSaved: [Record], recordIDsDeleted: [Record.ID]) {
    recordsSaved.forEach { recordsToSave.removeValue(forKey: $0.recordID) }
  }
}

// MARK: - Cirrus/DeleteRecordContext.swift

fileprivate final class DeleteRecordContext<Persistable: CloudKitCodable>: RecordModifyingContext {

  private let defaults: UserDefaults
  // private let zoneID: CKRecordZone.ID
  private let zoneID: RecordZone.ID
  private let logHandler: (String, OSLogType) -> Void

  private lazy var deleteBufferKey = "DELETEBUFFER-\(zoneID.zoneName))"

  init(
    // defaults: UserDefaults, zoneID: CKRecordZone.ID,
    defaults: UserDefaults, zoneID: RecordZone.ID,
    logHandler: @escaping (String, OSLogType) -> Void
  ) {
    self.defaults = defaults
    self.zoneID = zoneID
    self.logHandler = logHandler
  }

  func buffer(_ values: [Persistable]) {
    // let recordIDs: [CKRecord.ID]
    let recordIDs: [Record.ID]
    do {
      // recordIDs = try values.map { try CKRecordEncoder(zoneID: zoneID).encode($0).recordID }
      recordIDs = try values.map { try CKRecordCoder.CKRecordEncoder(zoneID: zoneID).encode($0).recordID }
    } catch let error {
      logHandler("Failed to encode records for delete: \(String(describing: error))", .error)
      // recordIDs = values.compactMap { try? CKRecordEncoder(zoneID: zoneID).encode($0).recordID }
      recordIDs = values.compactMap { try? CKRecordCoder.CKRecordEncoder(zoneID: zoneID).encode($0).recordID }
    }
    recordIDsToDelete.append(contentsOf: recordIDs)
  }

  // MARK: - RecordModifying

  let name = "delete"
  // var savePolicy: CKModifyRecordsOperation.RecordSavePolicy = .ifServerRecordUnchanged
  var savePolicy: ModifyRecordsOperation.RecordSavePolicy = .ifServerRecordUnchanged

  // var recordsToSave: [CKRecord.ID: CKRecord] = [:]
  var recordsToSave: [Record.ID: Record] = [:]

  // var recordIDsToDelete: [CKRecord.ID] {
  var recordIDsToDelete: [Record.ID] {
    get {
      guard let data = defaults.data(forKey: deleteBufferKey) else { return [] }
      do {
        // return try NSKeyedUnarchiver.unarchiveTopLevelObjectWithData(data) as? [CKRecord.ID] ?? []
        return try NSKeyedUnarchiver.unarchiveTopLevelObjectWithData(data) as? [Record.ID] ?? []
      } catch {
        logHandler("Failed to decode CKRecord.IDs from defaults key deleteBufferKey", .error)
        return []
      }
    }
    set {
      do {
        logHandler("Updating \(newValue.count) buffer with %d items", .info)
        let data = try NSKeyedArchiver.archivedData(
          withRootObject: newValue, requiringSecureCoding: true)
        defaults.set(data, forKey: deleteBufferKey)
      } catch {
        logHandler("Failed to encode record ids for deletion: \(String(describing: error))", .error)
      }
    }
  }

  func modelChangeForUpdatedRecords<T: CloudKitCodable>(
    // recordsSaved: [CKRecord], recordIDsDeleted: [CKRecord.ID]
    recordsSaved: [Record], recordIDsDeleted: [Record.ID]
  )
    -> SyncEngine<T>.ModelChange
  {
    let recordIdentifiersDeletedSet = Set(recordIDsDeleted.map(\.recordName))

    recordIDsToDelete.removeAll { recordIDsDeleted.contains($0) }

    return .deleted(recordIdentifiersDeletedSet)
  }

  // func failedToUpdateRecords(recordsSaved: [CKRecord], recordIDsDeleted: [CKRecord.ID]) {
  func failedToUpdateRecords(recordsSaved: [Record], recordIDsDeleted: [Record.ID]) {
    recordIDsToDelete.removeAll { recordIDsDeleted.contains($0) }
  }
}

// MARK: - Example/CirrusExample/Models/Bookmark.swift

fileprivate struct Bookmark {
  public var id: UUID
  public var cloudKitSystemFields: Data?
  public var cloudKitIdentifier: CloudKitIdentifier {
    return id.uuidString
  }

  public var created: Date
  public var title: String
  public var url: URL

  public init(
    id: UUID = UUID(),
    created: Date = Date(),
    title: String,
    url: URL
  ) {
    self.id = id
    self.created = created
    self.title = title
    self.url = url
  }
}

extension Bookmark: CloudKitCodable {
  public static func resolveConflict(clientModel: Self, serverModel: Self) -> Self? {
    if let clientDate = clientModel.cloudKitLastModifiedDate,
      let serverDate = serverModel.cloudKitLastModifiedDate
    {
      return clientDate > serverDate ? clientModel : serverModel
    }
    return serverModel
  }
}

// MARK: - Tests

/// What an engine reported through `modelsChanged` and its log handler, kept for the tests; the
/// engine sends from its work queue.
fileprivate final class EngineReport: @unchecked Sendable {
  private let lock = NSLock()
  private var updatedSets: [Set<Bookmark>] = []
  private var deletedSets: [Set<CloudKitIdentifier>] = []
  private var lines: [String] = []
  private var cancellable: AnyCancellable?

  func watch(_ engine: SyncEngine<Bookmark>) {
    cancellable = engine.modelsChanged.sink { [weak self] change in
      guard let self else { return }
      self.lock.withLock {
        switch change {
        case .updated(let models): self.updatedSets.append(models)
        case .deleted(let identifiers): self.deletedSets.append(identifiers)
        }
      }
    }
  }

  func log(_ line: String, _ level: OSLogType) { lock.withLock { lines.append(line) } }

  /// Every model the engine reported updated, the latest version of each by identifier.
  var updated: [CloudKitIdentifier: Bookmark] {
    lock.withLock {
      var latest: [CloudKitIdentifier: Bookmark] = [:]
      for set in updatedSets { for model in set { latest[model.cloudKitIdentifier] = model } }
      return latest
    }
  }
  var updates: [Set<Bookmark>] { lock.withLock { updatedSets } }
  var deleted: Set<CloudKitIdentifier> { lock.withLock { deletedSets.reduce(into: []) { $0.formUnion($1) } } }
  var messages: [String] { lock.withLock { lines } }
}

/// One device: its own defaults (as the app's `UserDefaults`), an engine on the shared store,
/// and what the engine reported.
fileprivate struct Device {
  let engine: SyncEngine<Bookmark>
  let report: EngineReport
  let defaults: UserDefaults
}

@Suite("Cirrus's sync engine, ported", .timeLimit(.minutes(30)))
struct CirrusSyncEngineTests {
  static let containerIdentifier = "iCloud.com.example.cirrus"
  static let zoneID = RecordZone.ID(zoneName: "Bookmark", ownerName: CurrentUserDefaultName)

  fileprivate static func device(
    storeLocation: String, suite: String, defaults kept: UserDefaults? = nil, initialItems: [Bookmark] = []
  ) throws -> Device {
    let defaults = try kept ?? #require(UserDefaults(suiteName: suite))
    let report = EngineReport()
    let engine = SyncEngine<Bookmark>(
      defaults: defaults, containerIdentifier: containerIdentifier, storeLocation: storeLocation,
      userName: "alice", initialItems: initialItems, logHandler: report.log)
    report.watch(engine)
    return Device(engine: engine, report: report, defaults: defaults)
  }

  /// Lets the engines' queues run until `condition` holds: each engine's work queue is passed
  /// and its operation queue emptied, again and again (work on one queue adds work to the
  /// other), until the condition holds or a generous deadline passes. Runs on a thread of its
  /// own, as the waits block.
  fileprivate static func settle(_ devices: [Device], until condition: @escaping @Sendable () -> Bool) async -> Bool {
    // The engines are not Sendable; this thread only waits on their queues.
    nonisolated(unsafe) let waited = devices.map(\.engine)
    return await withCheckedContinuation { continuation in
      Thread {
        let deadline = Date().addingTimeInterval(1_800)
        while Date() < deadline {
          for engine in waited {
            engine.workQueue.sync {}
            engine.cloudOperationQueue.waitUntilAllOperationsAreFinished()
          }
          if condition() { return continuation.resume(returning: true) }
          Thread.sleep(forTimeInterval: 0.02)
        }
        continuation.resume(returning: false)
      }.start()
    }
  }

  fileprivate static func withDevices<T>(
    on engine: TestEngine, _ body: (_ storeLocation: String, _ suites: [String], _ database: Database) async throws -> T
  ) async throws -> T {
    try await withStore(on: engine) { location, store in
      let suites = (0..<2).map { _ in "cirrus-tests-\(UUID().uuidString)" }
      defer { for suite in suites { UserDefaults(suiteName: suite)?.removePersistentDomain(forName: suite) } }
      let container = try Container(identifier: containerIdentifier, store: location, userName: "alice")
      return try await body(location, suites, container.privateCloudDatabase)
    }
  }
}

extension CirrusSyncEngineTests {
  @Test("starting up makes the zone and its subscription, then uploads the initial items; the saved models come back with system fields", arguments: TestEngine.all)
  func startUpAndUpload(engine: TestEngine) async throws {
    try await Self.withDevices(on: engine) { storeLocation, suites, database in
      let created = Date(timeIntervalSince1970: 1_700_000_000.25)
      let swift = Bookmark(created: created, title: "Swift", url: URL(string: "https://swift.org")!)
      let phone = try Self.device(storeLocation: storeLocation, suite: suites[0], initialItems: [swift])
      let identifier = swift.cloudKitIdentifier
      #expect(await Self.settle([phone]) { phone.report.updated[identifier] != nil })

      let zones = try await database.allRecordZones()
      #expect(zones.map(\.zoneID).contains(Self.zoneID))
      let subscription = try #require(try await database.subscription(for: "Bookmark.subscription") as? RecordZoneSubscription)
      #expect(subscription.zoneID == Self.zoneID)
      #expect(subscription.recordType == "Bookmark")
      #expect(subscription.notificationInfo?.shouldSendContentAvailable == true)
      #expect(phone.defaults.bool(forKey: "CREATEDZONE-Bookmark)"))
      #expect(phone.defaults.bool(forKey: "CREATEDSUBDB-Bookmark)"))

      let record = try await database.record(for: Record.ID(recordName: identifier, zoneID: Self.zoneID))
      #expect(record.recordType == "Bookmark")
      #expect(record["title"] as? String == "Swift")
      #expect(record["url"] as? String == "https://swift.org")
      #expect(record["created"] as? Date == created)
      #expect(record["id"] as? String == identifier)
      #expect(Set(record.allKeys()) == ["id", "created", "title", "url"])

      // The model handed back carries the saved record's system fields.
      let saved = try #require(phone.report.updated[identifier])
      #expect(saved.cloudKitSystemFields != nil)
      #expect(saved.cloudKitLastModifiedDate == record.modificationDate)
      #expect(saved.title == "Swift" && saved.url == swift.url && saved.created == created && saved.id == swift.id)

      // The upload buffer is empty again, and the engine saw the account.
      #expect(phone.defaults.data(forKey: "UPLOADBUFFER-Bookmark)").map { try? NSKeyedUnarchiver.unarchiveTopLevelObjectWithData($0) as? [Record.ID: Record] }??.isEmpty == true)
      #expect(await Self.settle([phone]) { phone.engine.accountStatus == .available })
    }
  }
}

extension CirrusSyncEngineTests {
  @Test("another device fetches what was uploaded, then only what was deleted since, with the token it keeps in its defaults", arguments: TestEngine.all)
  func secondDeviceFetchesChanges(engine: TestEngine) async throws {
    try await Self.withDevices(on: engine) { storeLocation, suites, database in
      let phone = try Self.device(storeLocation: storeLocation, suite: suites[0])
      let forums = Bookmark(title: "Swift Forums", url: URL(string: "https://forums.swift.org")!)
      let evolution = Bookmark(title: "Evolution", url: URL(string: "https://www.swift.org/swift-evolution/")!)
      phone.engine.upload(forums, evolution)
      #expect(await Self.settle([phone]) { phone.report.updated.count == 2 })

      let laptop = try Self.device(storeLocation: storeLocation, suite: suites[1])
      #expect(await Self.settle([laptop]) { laptop.report.updated.count == 2 })
      #expect(laptop.report.updated[forums.cloudKitIdentifier]?.title == "Swift Forums")
      #expect(laptop.report.updated[evolution.cloudKitIdentifier]?.url == evolution.url)
      #expect(laptop.report.updated[evolution.cloudKitIdentifier]?.cloudKitSystemFields != nil)
      #expect(laptop.defaults.data(forKey: "TOKEN-Bookmark")?.isEmpty == false)
      // Saving a zone and a subscription that exist already is no error.
      #expect(laptop.defaults.bool(forKey: "CREATEDZONE-Bookmark)"))
      #expect(laptop.defaults.bool(forKey: "CREATEDSUBDB-Bookmark)"))

      phone.engine.delete(forums)
      #expect(await Self.settle([phone]) { phone.report.deleted == [forums.cloudKitIdentifier] })
      await #expect(throws: StratusError.self) {
        try await database.record(for: Record.ID(recordName: forums.cloudKitIdentifier, zoneID: Self.zoneID))
      }

      let updatesBefore = laptop.report.updates.count
      laptop.engine.forceSync()
      #expect(await Self.settle([laptop]) { laptop.report.deleted == [forums.cloudKitIdentifier] })
      // From its token, the laptop's fetch brought the deletion and no record again.
      #expect(laptop.report.updates.dropFirst(updatesBefore).allSatisfy { $0.isEmpty })
    }
  }

  @Test("a stale edit meets serverRecordChanged inside a partial failure: the newer server model wins, and the records the atomic zone refused with it (batchRequestFailed) are sent again", arguments: TestEngine.all)
  func staleEditIsResolved(engine: TestEngine) async throws {
    try await Self.withDevices(on: engine) { storeLocation, suites, database in
      let phone = try Self.device(storeLocation: storeLocation, suite: suites[0])
      let first = Bookmark(title: "First", url: URL(string: "https://example.com/1")!)
      let second = Bookmark(title: "Second", url: URL(string: "https://example.com/2")!)
      let third = Bookmark(title: "Third", url: URL(string: "https://example.com/3")!)
      phone.engine.upload(first, second, third)
      #expect(await Self.settle([phone]) { phone.report.updated.count == 3 })
      let laptop = try Self.device(storeLocation: storeLocation, suite: suites[1])
      #expect(await Self.settle([laptop]) { laptop.report.updated.count == 3 })

      // The phone edits the first bookmark from the model it got back from its save.
      var phoneEdit = try #require(phone.report.updated[first.cloudKitIdentifier])
      phoneEdit.title = "First, edited on the phone"
      phone.engine.upload(phoneEdit)
      #expect(await Self.settle([phone]) { phone.report.updated[first.cloudKitIdentifier]?.title == "First, edited on the phone" })

      // The laptop edits all three from what it fetched before: its first one is stale.
      var laptopFirst = try #require(laptop.report.updated[first.cloudKitIdentifier])
      var laptopSecond = try #require(laptop.report.updated[second.cloudKitIdentifier])
      var laptopThird = try #require(laptop.report.updated[third.cloudKitIdentifier])
      laptopFirst.title = "First, edited on the laptop"
      laptopSecond.title = "Second, edited on the laptop"
      laptopThird.title = "Third, edited on the laptop"
      laptop.engine.upload(laptopFirst, laptopSecond, laptopThird)
      #expect(await Self.settle([laptop]) {
        laptop.report.updated[second.cloudKitIdentifier]?.title == "Second, edited on the laptop"
          && laptop.report.updated[third.cloudKitIdentifier]?.title == "Third, edited on the laptop"
          && laptop.report.updated[first.cloudKitIdentifier]?.title == "First, edited on the phone"
      })
      #expect(laptop.report.messages.contains("CloudKit conflict with record of type Bookmark. Running conflict resolver"))
      // The second request held the two refused records and the resolved one.
      #expect(laptop.report.messages.filter { $0 == "Sending 3 record(s) for upload and 0 record(s) for deletion." }.count == 2)

      let ids = [first, second, third].map { Record.ID(recordName: $0.cloudKitIdentifier, zoneID: Self.zoneID) }
      let stored = try await database.records(for: ids).mapValues { try $0.get()["title"] as? String }
      #expect(stored[ids[0]] == "First, edited on the phone")
      #expect(stored[ids[1]] == "Second, edited on the laptop")
      #expect(stored[ids[2]] == "Third, edited on the laptop")
      #expect(await Self.settle([laptop]) {
        (laptop.defaults.data(forKey: "UPLOADBUFFER-Bookmark)").flatMap { try? NSKeyedUnarchiver.unarchiveTopLevelObjectWithData($0) as? [Record.ID: Record] }.map { Array($0.values) } ?? []).isEmpty
      })
    }
  }

  @Test("an edit of a bookmark deleted on another device gets unknownItem inside a partial failure: Cirrus gives it up, and it stays deleted", arguments: TestEngine.all)
  func editOfDeletedBookmark(engine: TestEngine) async throws {
    try await Self.withDevices(on: engine) { storeLocation, suites, database in
      let phone = try Self.device(storeLocation: storeLocation, suite: suites[0])
      let gone = Bookmark(title: "Gone", url: URL(string: "https://example.com/gone")!)
      let stays = Bookmark(title: "Stays", url: URL(string: "https://example.com/stays")!)
      phone.engine.upload(gone, stays)
      #expect(await Self.settle([phone]) { phone.report.updated.count == 2 })
      let laptop = try Self.device(storeLocation: storeLocation, suite: suites[1])
      #expect(await Self.settle([laptop]) { laptop.report.updated.count == 2 })

      phone.engine.delete(gone)
      #expect(await Self.settle([phone]) { phone.report.deleted == [gone.cloudKitIdentifier] })

      var edited = try #require(laptop.report.updated[gone.cloudKitIdentifier])
      edited.title = "Gone, edited on the laptop"
      var other = try #require(laptop.report.updated[stays.cloudKitIdentifier])
      other.title = "Stays, edited on the laptop"
      laptop.engine.upload(edited, other)
      #expect(await Self.settle([laptop]) {
        laptop.report.updated[stays.cloudKitIdentifier]?.title == "Stays, edited on the laptop"
          && (laptop.defaults.data(forKey: "UPLOADBUFFER-Bookmark)").flatMap { try? NSKeyedUnarchiver.unarchiveTopLevelObjectWithData($0) as? [Record.ID: Record] }.map { Array($0.values) } ?? []).isEmpty
      })
      #expect(laptop.report.messages.contains {
        $0.hasPrefix("Failed to upload records: partialFailure") && $0.contains("\(gone.cloudKitIdentifier): unknownItem")
      })
      #expect(laptop.report.updated[gone.cloudKitIdentifier]?.title == "Gone")
      await #expect(throws: StratusError.self) {
        try await database.record(for: Record.ID(recordName: gone.cloudKitIdentifier, zoneID: Self.zoneID))
      }
      let kept = try await database.record(for: Record.ID(recordName: stays.cloudKitIdentifier, zoneID: Self.zoneID))
      #expect(kept["title"] as? String == "Stays, edited on the laptop")
    }
  }

  @Test("a fetch of more changes than one batch holds: each intermediate token is kept and the models before it are emitted, then the rest", arguments: TestEngine.all)
  func fetchInSeveralBatches(engine: TestEngine) async throws {
    try await Self.withDevices(on: engine) { storeLocation, suites, database in
      let phone = try Self.device(storeLocation: storeLocation, suite: suites[0])
      #expect(await Self.settle([phone]) { phone.defaults.bool(forKey: "CREATEDSUBDB-Bookmark)") })
      // 450 bookmarks written as Cirrus writes them, in one request (Cirrus's own upload
      // buffer would archive itself again for each of them).
      let created = Date(timeIntervalSince1970: 1_700_000_000)
      let records = (0..<450).map { index -> Record in
        let id = UUID()
        let record = Record(recordType: "Bookmark", recordID: Record.ID(recordName: id.uuidString, zoneID: Self.zoneID))
        record["id"] = id.uuidString
        record["created"] = created
        record["title"] = "Bookmark \(index)"
        record["url"] = "https://example.com/\(index)"
        return record
      }
      let saved = try await database.modifyRecords(saving: records, deleting: [])
      #expect(saved.saveResults.values.allSatisfy { (try? $0.get()) != nil })

      let laptop = try Self.device(storeLocation: storeLocation, suite: suites[1])
      #expect(await Self.settle([laptop]) { laptop.report.updated.count == 450 })
      #expect(Set(laptop.report.updated.values.map(\.title)) == Set((0..<450).map { "Bookmark \($0)" }))
      #expect(laptop.report.updates.filter { !$0.isEmpty }.count >= 2)
      #expect(laptop.report.messages.contains("Commiting new change token and emitting changes"))

      // The token kept at the end resumes after the last change: a forced sync emits nothing.
      let updatesBefore = laptop.report.updates.count
      laptop.engine.forceSync()
      #expect(await Self.settle([laptop]) { laptop.report.messages.contains("Finished record zone changes fetch with no changes") })
      #expect(laptop.report.updates.count == updatesBefore)
    }
  }

  @Test("a zone deleted elsewhere: uploads fail with zoneNotFound and stay buffered, the next launch finds the zone missing and makes it again, a forced sync uploads them, and the other device's token has expired", arguments: TestEngine.all)
  func zoneDeletedElsewhere(engine: TestEngine) async throws {
    try await Self.withDevices(on: engine) { storeLocation, suites, database in
      let phone = try Self.device(storeLocation: storeLocation, suite: suites[0])
      let kept = Bookmark(title: "Kept", url: URL(string: "https://example.com/kept")!)
      phone.engine.upload(kept)
      #expect(await Self.settle([phone]) { phone.report.updated[kept.cloudKitIdentifier] != nil })
      let laptop = try Self.device(storeLocation: storeLocation, suite: suites[1])
      #expect(await Self.settle([laptop]) { laptop.report.updated[kept.cloudKitIdentifier] != nil })

      _ = try await database.deleteRecordZone(withID: Self.zoneID)

      // Each record of the request fails with zoneNotFound inside a partial failure; Cirrus
      // sends none of them again and keeps them in its buffer.
      let offline = Bookmark(title: "Saved while the zone was gone", url: URL(string: "https://example.com/gone")!)
      phone.engine.upload(offline)
      #expect(await Self.settle([phone]) { phone.report.messages.contains { $0.hasPrefix("Failed to upload records:") } })
      #expect(phone.report.messages.contains { $0.hasPrefix("Failed to upload records: partialFailure") && $0.contains(": zoneNotFound]") })
      let buffered = phone.defaults.data(forKey: "UPLOADBUFFER-Bookmark)").flatMap { try? NSKeyedUnarchiver.unarchiveTopLevelObjectWithData($0) as? [Record.ID: Record] }.map { Array($0.values) } ?? []
      #expect(buffered.map(\.recordID.recordName) == [offline.cloudKitIdentifier])

      // The next launch (the same defaults) checks the zone it thinks it made: the fetch fails
      // with no retryAfterSeconds, so the zone is made again.
      let relaunched = try Self.device(storeLocation: storeLocation, suite: suites[0], defaults: phone.defaults)
      #expect(await Self.settle([relaunched]) {
        relaunched.report.messages.contains("Zone created successfully") && relaunched.defaults.bool(forKey: "CREATEDZONE-Bookmark)")
      })
      #expect(relaunched.report.messages.contains {
        $0.hasPrefix("Irrecoverable error when fetching custom zone, assuming it doesn't exist: partialFailure")
          && $0.contains("zone Bookmark: zoneNotFound")
      })
      #expect(try await database.allRecordZones().map(\.zoneID).contains(Self.zoneID))

      relaunched.engine.forceSync()
      #expect(await Self.settle([relaunched]) { relaunched.report.updated[offline.cloudKitIdentifier] != nil })
      let uploaded = try await database.record(for: Record.ID(recordName: offline.cloudKitIdentifier, zoneID: Self.zoneID))
      #expect(uploaded["title"] as? String == "Saved while the zone was gone")

      // The laptop's token is of the zone that was deleted: changeTokenExpired, then a fetch
      // from the start of the new zone.
      laptop.engine.forceSync()
      #expect(await Self.settle([laptop]) { laptop.report.updated[offline.cloudKitIdentifier] != nil })
      #expect(laptop.report.messages.contains("Change token expired, resetting token and trying again"))
    }
  }

  @Test("a subscription deleted elsewhere: the next launch's check gets unknownItem inside a partial failure and saves it again", arguments: TestEngine.all)
  func subscriptionDeletedElsewhere(engine: TestEngine) async throws {
    try await Self.withDevices(on: engine) { storeLocation, suites, database in
      let phone = try Self.device(storeLocation: storeLocation, suite: suites[0])
      #expect(await Self.settle([phone]) { phone.defaults.bool(forKey: "CREATEDSUBDB-Bookmark)") })
      _ = try await database.deleteSubscription(withID: "Bookmark.subscription")
      await #expect(throws: StratusError.self) { try await database.subscription(for: "Bookmark.subscription") }

      let relaunched = try Self.device(storeLocation: storeLocation, suite: suites[0], defaults: phone.defaults)
      #expect(await Self.settle([relaunched]) { relaunched.report.messages.contains("Private subscription created successfully") })
      #expect(relaunched.report.messages.contains {
        $0.hasPrefix("Irrecoverable error when fetching private zone subscription, assuming it doesn't exist: partialFailure")
          && $0.contains("subscription Bookmark.subscription: unknownItem")
      })
      let subscription = try #require(try await database.subscription(for: "Bookmark.subscription") as? RecordZoneSubscription)
      #expect(subscription.zoneID == Self.zoneID)
      #expect(subscription.recordType == "Bookmark")

      // A launch that finds it says so.
      let third = try Self.device(storeLocation: storeLocation, suite: suites[0], defaults: phone.defaults)
      #expect(await Self.settle([third]) {
        third.report.messages.contains("Private subscription found, the device is subscribed to CloudKit change notifications.")
      })
    }
  }

  @Test("the zone subscription's notifications, read from the feed, make the other device fetch; another subscription's are not its own", arguments: TestEngine.all)
  func notificationsStartAFetch(engine: TestEngine) async throws {
    try await Self.withDevices(on: engine) { storeLocation, suites, database in
      let laptop = try Self.device(storeLocation: storeLocation, suite: suites[1])
      #expect(await Self.settle([laptop]) { laptop.defaults.bool(forKey: "CREATEDSUBDB-Bookmark)") })
      let phone = try Self.device(storeLocation: storeLocation, suite: suites[0])
      let news = Bookmark(title: "News", url: URL(string: "https://example.com/news")!)
      phone.engine.upload(news)
      #expect(await Self.settle([phone]) { phone.report.updated[news.cloudKitIdentifier] != nil })

      // Where CloudKit would push, the laptop reads the user's notification feed.
      let (received, token) = try await Self.notifications(of: laptop, since: nil)
      let ours = received.filter { $0.subscriptionID == "Bookmark.subscription" }
      #expect(!ours.isEmpty)
      #expect(ours.allSatisfy { ($0 as? RecordZoneNotification)?.recordZoneID == Self.zoneID })

      for notification in ours { #expect(laptop.engine.processRemoteChangeNotification(with: notification.remoteNotificationDictionary)) }
      #expect(await Self.settle([laptop]) { laptop.report.updated[news.cloudKitIdentifier]?.title == "News" })

      // The zone subscription names a record type: another type saved in the zone fires nothing.
      let note = Record(recordType: "Note", zoneID: Self.zoneID)
      _ = try await database.save(note)
      let (afterNote, afterNoteToken) = try await Self.notifications(of: laptop, since: token)
      #expect(!afterNote.contains { $0.subscriptionID == "Bookmark.subscription" })

      let other = DatabaseSubscription(subscriptionID: "everything")
      other.notificationInfo = NotificationInfo(shouldSendContentAvailable: true)
      _ = try await database.save(other)
      _ = try await database.save(Record(recordType: "Note"))
      let (later, _) = try await Self.notifications(of: laptop, since: afterNoteToken)
      let foreign = try #require(later.first { $0.subscriptionID == "everything" })
      #expect(!laptop.engine.processRemoteChangeNotification(with: foreign.remoteNotificationDictionary))
      #expect(!laptop.engine.processRemoteChangeNotification(with: ["aps": ["alert": "not CloudKit's"]]))
    }
  }
}

extension CirrusSyncEngineTests {
  /// The user's notifications since `token`, read from the feed where CloudKit would push them.
  fileprivate static func notifications(of device: Device, since token: ServerChangeToken?) async throws
    -> ([StratusNotification], ServerChangeToken)
  {
    let operation = FetchNotificationChangesOperation(previousServerChangeToken: token)
    nonisolated(unsafe) var received: [StratusNotification] = []
    operation.notificationChangedBlock = { notification in received.append(notification) }
    let result: Result<(serverChangeToken: ServerChangeToken, moreComing: Bool), Error> = await awaitCallback { done in
      operation.fetchNotificationChangesResultBlock = { result in done(result) }
      device.engine.container.add(operation)
    }
    return (received, try result.get().serverChangeToken)
  }
}
