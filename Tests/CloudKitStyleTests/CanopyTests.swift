import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// Canopy (tact/Canopy), a CloudKit wrapper that gives an app async calls returning `Result`s,
// ported: `Targets/Canopy/Sources/CKDatabaseAPI/CKDatabaseAPI.swift` with
// `CKDatabaseAPI+SimulatedFail.swift`, `Features/QueryRecords.swift`,
// `CKContainerAPI/CKContainerAPI.swift`, the zone, subscription and request errors of
// `Errors/`, `CanopyResultRecord`, the token stores of `TokenStore/`, the settings and results
// types, the archives of `CanopyTypes/Sources/Archiving/` (zones, subscriptions, cursors and
// change tokens kept with `NSKeyedArchiver`), and `Canopy/Canopy.swift`. Its modify path (`Features/ModifyRecords.swift`, the
// record error `CKRecordError` and the `CKDatabaseType` / `CKContainerType` protocols) was
// ported before, in `InjectableDatabaseTests.swift`; this port calls it.
// Its CloudKit habits that other ported code does not have: every operation wrapped in
// `withCheckedContinuation`, its per-item blocks remembering the last failure and the final
// block failing the whole call with it; queries paged by `CKQueryOperation(cursor:)` with
// `zoneID` and `desiredKeys` set on the cursor's operation too (CloudKit takes the zone from
// the cursor); a "delete by query" that queries with `desiredKeys = []`; one
// `CKFetchRecordZoneChangesOperation(recordZoneIDs:configurationsByRecordZoneID:)` for several
// zones, its configurations made in a task group from an async token store, with
// `fetchAllChanges = true`, `recordWasChangedBlock`, `recordWithIDWasDeletedBlock` (record
// types kept), `recordZoneFetchResultBlock` read as `.success((token, _, _))`, and
// `desiredKeys = []` to fetch only the change token; `CKFetchDatabaseChangesOperation` with its
// purged block and `.success((token, _))`; a token dropped from the store on
// `changeTokenExpired`; tokens archived into `UserDefaults` with
// `NSKeyedArchiver(requiringSecureCoding: false)`; zone and subscription operations whose
// per-item failure fails the call; errors flattened into Codable structs that read
// `errorCode`, `retryAfterSeconds` and `partialErrorsByItemID` (keys cast back to
// `CKRecordZone.ID` or `CKSubscription.ID`), and simulated failures built with
// `CKError(code, userInfo: [CKErrorRetryAfterKey: NSNumber(10), CKPartialErrorsByItemIDKey: …])`;
// records made Codable by archiving the whole `CKRecord` with `requiringSecureCoding: true`.
//
// What the port changes: the `CK` prefix of CloudKit's names (Canopy's own types keep theirs:
// `CKRecordZoneError`, `CKDatabaseAPI`, … are Canopy's; its `CKRecordError` is the earlier
// port's `RecordError`); `os.log`'s `Logger` and groue/Semaphore's `AsyncSemaphore` → the small
// stand-ins below (not CloudKit); `UserDefaults.standard` in the token store → a `UserDefaults`
// the store is given, so each test has its own; `Double(NSEC_PER_SEC)` (Darwin's) →
// `1_000_000_000`; `public` dropped (this is a test module). The `var`s the operations' blocks
// fill are marked `nonisolated(unsafe)` and the progress block's type is `@Sendable`: Stratus's
// blocks are `@Sendable`, and inside an `async` function Swift 5 mode warns about a captured
// `var` they change (see the README's "Operations"); `CKDatabaseAPIType` and `CKContainerAPIType`,
// protocols for test doubles, are left out and the API classes used directly. Left out, as
// they need sharing (not in Stratus, see the README): `CKShare` (`asCKShare`, `share`), share
// participants and accepting shares; and `MockCanopyResultRecord`, the replaying mock
// databases and the account-changed stream, which are test doubles of CloudKit rather than code
// that uses it. The query tests name their zone: Canopy passes the caller's `zoneID`, where
// `nil` means every zone in CloudKit's current documentation, and Stratus's nil-zone query is
// being changed.

// MARK: - Stand-ins for os.log and groue/Semaphore

struct Logger {
  init(subsystem: String, category: String) {}
  func error(_ message: String) {}
}

/// groue/Semaphore's `AsyncSemaphore(value:)`, as much as Canopy uses: `wait()` and `signal()`.
actor AsyncSemaphore {
  private var value: Int
  private var waiters: [CheckedContinuation<Void, Never>] = []

  init(value: Int) { self.value = value }

  func wait() async {
    value -= 1
    if value >= 0 { return }
    await withCheckedContinuation { waiters.append($0) }
  }

  nonisolated func signal() {
    Task { await release() }
  }

  private func release() {
    value += 1
    if !waiters.isEmpty { waiters.removeFirst().resume() }
  }
}

// MARK: - Errors/CKTransactionError.swift

protocol CKTransactionError: Error {
  var code: Int { get }
  var localizedDescription: String { get }
  var retryAfterSeconds: Double { get }
  var errorDump: String { get }
  var hasMultipleErrors: Bool { get }
}

extension CKTransactionError {
  // var ckErrorCode: CKError.Code? {
  var ckErrorCode: StratusError.Code? {
    StratusError.Code(rawValue: code)
  }

  var isRetriable: Bool {
    guard let error = ckErrorCode else { return false }
    return Self.retriableErrors.contains(error)
  }

  static var networkErrors: Set<StratusError.Code> {
    [.networkUnavailable, .networkFailure, .serviceUnavailable, .serverResponseLost, .requestRateLimited, .zoneBusy]
  }

  static var batchErrors: Set<StratusError.Code> {
    [.limitExceeded, .partialFailure, .batchRequestFailed]
  }

  static var retriableErrors: Set<StratusError.Code> {
    networkErrors.union(batchErrors)
  }

  static var requestErrors: Set<StratusError.Code> {
    [.invalidArguments, .changeTokenExpired, .serverRejectedRequest, .constraintViolation]
  }

  static var conflictErrors: Set<StratusError.Code> {
    [.serverRecordChanged]
  }

  static var notFoundErrors: Set<StratusError.Code> {
    [.unknownItem, .assetFileNotFound, .zoneNotFound, .referenceViolation, .assetNotAvailable, .userDeletedZone]
  }

  static var accountErrors: Set<StratusError.Code> {
    [.quotaExceeded, .notAuthenticated, .participantMayNeedVerification, .managedAccountRestricted]
  }

  static var nonRecoverableErrors: Set<StratusError.Code> {
    [.internalError, .badContainer, .missingEntitlement, .incompatibleVersion, .badDatabase]
  }
}

// MARK: - Errors/CKRecordZoneError.swift, CKSubscriptionError.swift, CKRequestError.swift

struct CKRecordZoneError: CKTransactionError, Codable, Equatable, Sendable {
  let code: Int
  let localizedDescription: String
  let retryAfterSeconds: Double
  let errorDump: String
  let batchErrors: [String: CKRecordZoneError]

  var hasMultipleErrors: Bool {
    !batchErrors.isEmpty
  }

  init(from error: Error) {
    self.errorDump = String(describing: error)
    self.localizedDescription = error.localizedDescription

    if let ckError = error as? StratusError {
      self.code = ckError.errorCode
      self.retryAfterSeconds = ckError.retryAfterSeconds ?? 0
      self.batchErrors = CKRecordZoneError.parseBatchErrors(dict: ckError.partialErrorsByItemID ?? [:])
    } else {
      let nsError = error as NSError
      self.code = nsError.code
      self.retryAfterSeconds = (nsError.userInfo[ErrorRetryAfterKey] as? NSNumber)?.doubleValue ?? 0
      self.batchErrors = CKRecordZoneError.parseBatchErrors(dict: (nsError.userInfo[PartialErrorsByItemIDKey] as? [AnyHashable: Error]) ?? [:])
    }
  }

  private static func parseBatchErrors(dict: [AnyHashable: Error]) -> [String: CKRecordZoneError] {
    dict.reduce(into: [:]) { partial, element in
      // guard let zoneID = element.key as? CKRecordZone.ID, let zoneError = element.value as? CKError else {
      guard let zoneID = element.key as? RecordZone.ID, let zoneError = element.value as? StratusError else {
        return
      }
      partial[zoneID.zoneName] = CKRecordZoneError(from: zoneError)
    }
  }

  static func == (lhs: CKRecordZoneError, rhs: CKRecordZoneError) -> Bool {
    lhs.code == rhs.code &&
      lhs.retryAfterSeconds == rhs.retryAfterSeconds &&
      lhs.batchErrors == rhs.batchErrors
  }
}

struct CKSubscriptionError: CKTransactionError, Codable, Equatable, Sendable {
  let code: Int
  let localizedDescription: String
  let retryAfterSeconds: Double
  let errorDump: String
  let batchErrors: [String: CKSubscriptionError]

  var hasMultipleErrors: Bool {
    !batchErrors.isEmpty
  }

  init(from error: Error) {
    self.errorDump = String(describing: error)
    self.localizedDescription = error.localizedDescription

    if let ckError = error as? StratusError {
      self.code = ckError.errorCode
      self.retryAfterSeconds = ckError.retryAfterSeconds ?? 0
      self.batchErrors = CKSubscriptionError.parseBatchErrors(dict: ckError.partialErrorsByItemID ?? [:])
    } else {
      let nsError = error as NSError
      self.code = nsError.code
      self.retryAfterSeconds = (nsError.userInfo[ErrorRetryAfterKey] as? NSNumber)?.doubleValue ?? 0
      self.batchErrors = CKSubscriptionError.parseBatchErrors(dict: (nsError.userInfo[PartialErrorsByItemIDKey] as? [AnyHashable: Error]) ?? [:])
    }
  }

  private static func parseBatchErrors(dict: [AnyHashable: Error]) -> [String: CKSubscriptionError] {
    dict.reduce(into: [:]) { partial, element in
      // guard let subID = element.key as? CKSubscription.ID, let zoneError = element.value as? CKError else {
      guard let subID = element.key as? Subscription.ID, let zoneError = element.value as? StratusError else {
        return
      }
      partial[subID] = CKSubscriptionError(from: zoneError)
    }
  }

  static func == (lhs: CKSubscriptionError, rhs: CKSubscriptionError) -> Bool {
    lhs.code == rhs.code &&
      lhs.retryAfterSeconds == rhs.retryAfterSeconds
  }
}

struct CKRequestError: CKTransactionError, Codable, Equatable, Sendable {
  let code: Int
  let localizedDescription: String
  let retryAfterSeconds: Double
  let errorDump: String

  var hasMultipleErrors: Bool {
    false
  }

  init(from error: Error) {
    self.errorDump = String(describing: error)
    self.localizedDescription = error.localizedDescription

    if let ckError = error as? StratusError {
      self.code = ckError.errorCode
      self.retryAfterSeconds = ckError.retryAfterSeconds ?? 0
    } else {
      let nsError = error as NSError
      self.code = nsError.code
      self.retryAfterSeconds = (nsError.userInfo[ErrorRetryAfterKey] as? NSNumber)?.doubleValue ?? 0
    }
  }

  static func == (lhs: CKRequestError, rhs: CKRequestError) -> Bool {
    lhs.code == rhs.code &&
      lhs.retryAfterSeconds == rhs.retryAfterSeconds
  }
}

// MARK: - Errors/CanopyError.swift

enum CanopyError: Error, Codable, Equatable, Sendable {
  case unknown
  case ckAccountError(String, Int) // description, code
  case ckRecordError(RecordError)
  case ckRecordZoneError(CKRecordZoneError)
  case ckSubscriptionError(CKSubscriptionError)
  case ckChangeTokenExpired
  case ckRequestError(CKRequestError)
  case canceled

  var code: Int {
    switch self {
    case let .ckRecordError(error): return error.code
    case let .ckRecordZoneError(error): return error.code
    case let .ckSubscriptionError(error): return error.code
    case let .ckRequestError(error): return error.code
    case .unknown: return 999
    case let .ckAccountError(_, code): return code
    // case .ckChangeTokenExpired: return CKError.Code.changeTokenExpired.rawValue
    case .ckChangeTokenExpired: return StratusError.Code.changeTokenExpired.rawValue
    case .canceled: return 1003
    }
  }

  init(from error: Error) {
    // if let requestError = error as? CKError {
    if let requestError = error as? StratusError {
      switch requestError.code {
      case .changeTokenExpired:
        self = .ckChangeTokenExpired
      default:
        self = .ckRequestError(CKRequestError(from: requestError))
      }
    } else {
      self = .ckRequestError(CKRequestError(from: error as NSError))
    }
  }

  static func accountError(from error: Error) -> CanopyError {
    if let accountError = error as? StratusError {
      return CanopyError.ckAccountError(accountError.localizedDescription, accountError.errorCode)
    } else {
      return CanopyError.ckAccountError(String(describing: error), 0)
    }
  }
}

// MARK: - Results/

// typealias PerRecordIDProgressBlock = (CKRecord.ID, Double) -> Void
typealias PerRecordIDProgressBlock = @Sendable (Record.ID, Double) -> Void


struct FetchRecordsResult: Equatable, Sendable {
  let foundRecords: [CanopyResultRecord]
  let notFoundRecordIDs: [Record.ID]
}

struct ModifyZonesResult: Sendable {
  let savedZones: [RecordZone]
  let deletedZoneIDs: [RecordZone.ID]
}

struct ModifySubscriptionsResult: Sendable {
  let savedSubscriptions: [Subscription]
  let deletedSubscriptionIDs: [Subscription.ID]
}

struct FetchDatabaseChangesResult: Equatable, Sendable {
  let changedRecordZoneIDs: [RecordZone.ID]
  let deletedRecordZoneIDs: [RecordZone.ID]
  let purgedRecordZoneIDs: [RecordZone.ID]
}

struct DeletedCKRecord: Equatable, Sendable {
  // let recordID: CKRecord.ID; let recordType: CKRecord.RecordType
  let recordID: Record.ID
  let recordType: Record.RecordType
}

struct FetchZoneChangesResult: Equatable, Sendable {
  let records: [CanopyResultRecord]
  let deletedRecords: [DeletedCKRecord]

  static var empty: FetchZoneChangesResult {
    FetchZoneChangesResult(records: [], deletedRecords: [])
  }
}

enum FetchZoneChangesMethod: Sendable {
  case changeTokenAndAllData
  case changeTokenAndSpecificKeys([Record.FieldKey])
  case changeTokenOnly

  var desiredKeys: [Record.FieldKey]? {
    switch self {
    case .changeTokenAndAllData:
      return nil
    case let .changeTokenAndSpecificKeys(keys):
      return keys
    case .changeTokenOnly:
      return []
    }
  }
}

// MARK: - CanopyResultRecord/CanopyResultRecord.swift (without the mock kind and CKShare)

protocol CanopyRecordValueGetting {
  // subscript(key: String) -> CKRecordValueProtocol? { get }
  subscript(key: String) -> RecordValueProtocol? { get }
}

struct CanopyResultRecord: @unchecked Sendable {
  enum Kind {
    case ckRecord(Record, CKRecordEncryptedValuesReader)
  }

  struct CKRecordEncryptedValuesReader: CanopyRecordValueGetting {
    let record: Record
    subscript(key: String) -> RecordValueProtocol? {
      record.encryptedValues[key]
    }
  }

  let kind: Kind

  init(ckRecord: Record) {
    kind = .ckRecord(ckRecord, .init(record: ckRecord))
  }

  func boolForKey(_ key: String) -> Bool? {
    let boolCandidate = self[key]
    if let boolValue = boolCandidate as? Bool {
      return boolValue
    } else if let binaryIntegerValue = boolCandidate as? any BinaryInteger {
      return binaryIntegerValue.boolValue
    } else {
      return nil
    }
  }
}

extension BinaryInteger {
  var boolValue: Bool {
    self == Self.zero ? false : true
  }
}

extension CanopyResultRecord: Equatable {
  static func == (lhs: CanopyResultRecord, rhs: CanopyResultRecord) -> Bool {
    // CKRecords are equal only if they are the same object reference.
    switch (lhs.kind, rhs.kind) {
    case (.ckRecord(let lhsRecord, _), .ckRecord(let rhsRecord, _)): lhsRecord == rhsRecord
    }
  }
}

extension CanopyResultRecord: Codable {
  enum CodingKeys: CodingKey {
    case type
    case backingValue
  }

  init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    let kindTypeString = try container.decode(String.self, forKey: .type)
    guard kindTypeString == "ckRecord" else {
      throw DecodingError.dataCorrupted(
        DecodingError.Context(codingPath: [CodingKeys.type], debugDescription: "Invalid backing value type: \(kindTypeString)")
      )
    }
    let ckRecordData = try container.decode(Data.self, forKey: .backingValue)
    guard let ckRecord = try? NSKeyedUnarchiver.unarchivedObject(
      ofClass: Record.self,
      from: ckRecordData
    ) else {
      throw DecodingError.dataCorrupted(
        DecodingError.Context(codingPath: [CodingKeys.backingValue], debugDescription: "Invalid data for CKRecord")
      )
    }
    kind = .ckRecord(ckRecord, CKRecordEncryptedValuesReader(record: ckRecord))
  }

  func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    switch kind {
    case .ckRecord(let ckRecord, _):
      try container.encode("ckRecord", forKey: .type)
      let ckRecordData = try NSKeyedArchiver.archivedData(
        withRootObject: ckRecord,
        requiringSecureCoding: true
      )
      try container.encode(ckRecordData, forKey: .backingValue)
    }
  }
}

extension CanopyResultRecord {
  var recordID: Record.ID {
    switch kind { case .ckRecord(let ckRecord, _): ckRecord.recordID }
  }

  var recordType: Record.RecordType {
    switch kind { case .ckRecord(let ckRecord, _): ckRecord.recordType }
  }

  var creationDate: Date? {
    switch kind { case .ckRecord(let ckRecord, _): ckRecord.creationDate }
  }

  var creatorUserRecordID: Record.ID? {
    switch kind { case .ckRecord(let ckRecord, _): ckRecord.creatorUserRecordID }
  }

  var modificationDate: Date? {
    switch kind { case .ckRecord(let ckRecord, _): ckRecord.modificationDate }
  }

  var recordChangeTag: String? {
    switch kind { case .ckRecord(let ckRecord, _): ckRecord.recordChangeTag }
  }

  var parent: Record.Reference? {
    switch kind { case .ckRecord(let ckRecord, _): ckRecord.parent }
  }

  subscript(key: String) -> (any RecordValueProtocol)? {
    switch kind { case .ckRecord(let ckRecord, _): ckRecord[key] }
  }

  var encryptedValues: any CanopyRecordValueGetting {
    switch kind { case .ckRecord(_, let reader): reader }
  }
}

extension Record {
  var canopyResultRecord: CanopyResultRecord {
    CanopyResultRecord(ckRecord: self)
  }
}

// MARK: - Settings/

enum RequestBehavior: Equatable, Sendable {
  case regular(Double?)
  case simulatedFail(Double?)
  case simulatedFailWithPartialErrors(Double?)
}

protocol CanopySettingsType: Sendable {
  var modifyRecordsBehavior: RequestBehavior { get }
  var fetchDatabaseChangesBehavior: RequestBehavior { get }
  var fetchZoneChangesBehavior: RequestBehavior { get }
  var autoBatchTooLargeModifyOperations: Bool { get }
  var autoRetryForRetriableErrors: Bool { get }
}

struct CanopySettings: CanopySettingsType {
  var modifyRecordsBehavior: RequestBehavior = .regular(nil)
  var fetchDatabaseChangesBehavior: RequestBehavior = .regular(nil)
  var fetchZoneChangesBehavior: RequestBehavior = .regular(nil)
  var autoBatchTooLargeModifyOperations = true
  var autoRetryForRetriableErrors = true
}

// MARK: - TokenStore/

protocol TokenStoreType: Sendable {
  func storeToken(_ token: ServerChangeToken?, forDatabaseScope scope: Database.Scope) async
  func tokenForDatabaseScope(_ scope: Database.Scope) async -> ServerChangeToken?
  func storeToken(_ token: ServerChangeToken?, forRecordZoneID zoneID: RecordZone.ID) async
  func tokenForRecordZoneID(_ zoneID: RecordZone.ID) async -> ServerChangeToken?
  func clear() async
}

extension RecordZone.ID {
  // var ckDatabaseScope: CKDatabase.Scope {
  //   (ownerName == CKCurrentUserDefaultName) ? .private : .shared
  var ckDatabaseScope: Database.Scope {
    (ownerName == CurrentUserDefaultName) ? .private : .shared
  }
}

extension Database.Scope {
  var asString: String {
    switch self {
    case .public: "public"
    case .private: "private"
    case .shared: "shared"
    @unknown default: "unknown"
    }
  }
}

/// Canopy's `UserDefaultsTokenStore`; `UserDefaults.standard` → the `defaults` it is given.
struct UserDefaultsTokenStore: TokenStoreType, @unchecked Sendable {
  private let logger = Logger(subsystem: "Canopy", category: "UserDefaultsTokenStore")
  let defaults: UserDefaults

  init(defaults: UserDefaults) { self.defaults = defaults }

  func storeToken(_ token: ServerChangeToken?, forDatabaseScope scope: Database.Scope) {
    guard let token else {
      defaults.removeObject(forKey: defaultsKeyForDatabaseScope(scope))
      return
    }
    do {
      let tokenData = try NSKeyedArchiver.archivedData(withRootObject: token, requiringSecureCoding: false)
      defaults.set(tokenData, forKey: defaultsKeyForDatabaseScope(scope))
    } catch {
      logger.error("Error encoding CloudKit database change token for storage: \(error)")
    }
  }

  func tokenForDatabaseScope(_ scope: Database.Scope) -> ServerChangeToken? {
    if let tokenData = defaults.data(forKey: defaultsKeyForDatabaseScope(scope)),
       let token = try? NSKeyedUnarchiver.unarchivedObject(ofClass: ServerChangeToken.self, from: tokenData)
    {
      return token
    }
    return nil
  }

  func storeToken(_ token: ServerChangeToken?, forRecordZoneID zoneID: RecordZone.ID) {
    guard let token else {
      defaults.removeObject(forKey: defaultsKeyForZoneID(zoneID))
      return
    }
    do {
      let tokenData = try NSKeyedArchiver.archivedData(withRootObject: token, requiringSecureCoding: false)
      defaults.set(tokenData, forKey: defaultsKeyForZoneID(zoneID))
    } catch {
      logger.error("Error encoding CloudKit record zone change token for storage: \(error)")
    }
  }

  func tokenForRecordZoneID(_ zoneID: RecordZone.ID) -> ServerChangeToken? {
    if let tokenData = defaults.data(forKey: defaultsKeyForZoneID(zoneID)),
       let token = try? NSKeyedUnarchiver.unarchivedObject(ofClass: ServerChangeToken.self, from: tokenData)
    {
      return token
    }
    return nil
  }

  func clear() async {
    let scopes: [Database.Scope] = [.private, .public, .shared]
    for scope in scopes {
      defaults.removeObject(forKey: defaultsKeyForDatabaseScope(scope))
    }
    for key in defaults.dictionaryRepresentation().keys {
      if key.hasPrefix("recordZoneServerChangeToken:") {
        defaults.removeObject(forKey: key)
      }
    }
  }

  private func defaultsKeyForDatabaseScope(_ scope: Database.Scope) -> String {
    switch scope {
    case .public: return "publicCKDatabaseServerChangeToken"
    case .private: return "privateCKDatabaseServerChangeToken"
    case .shared: return "sharedCKDatabaseServerChangeToken"
    @unknown default: fatalError("Unknown CKDatabase scope")
    }
  }

  private func defaultsKeyForZoneID(_ zoneID: RecordZone.ID) -> String {
    "recordZoneServerChangeToken:\(zoneID.ckDatabaseScope.asString):\(zoneID.ownerName):\(zoneID.zoneName)"
  }
}

// MARK: - Features/QueryRecords.swift

struct QueryRecords {
  enum QueryOperationStartingPoint {
    case query(Query)
    // case cursor(CKQueryOperation.Cursor)
    case cursor(QueryOperation.Cursor)
  }

  enum QueryOperationResult {
    case records([Record])
    case recordsAndCursor([Record], QueryOperation.Cursor)
    case error(RecordError)
  }

  static func with(
    _ query: Query,
    recordZoneID: RecordZone.ID?,
    database: DatabaseType,
    desiredKeys: [Record.FieldKey]? = nil,
    resultsLimit: Int? = nil,
    qualityOfService: QualityOfService = .default
  ) async -> Result<[CanopyResultRecord], RecordError> {
    var startingPoint = QueryOperationStartingPoint.query(query)
    var records: [Record] = []

    while true {
      let queryOperationResult = await performOneOperation(
        with: startingPoint,
        recordZoneID: recordZoneID,
        database: database,
        desiredKeys: desiredKeys,
        resultsLimit: resultsLimit,
        qualityOfService: qualityOfService
      )

      switch queryOperationResult {
      case let .error(error):
        return .failure(error)
      case let .records(newRecords):
        let ckRecords = records + newRecords
        return .success(ckRecords.map(\.canopyResultRecord))
      case let .recordsAndCursor(newRecords, cursor):
        guard !Task.isCancelled else {
          return .failure(.init(from: StratusError(StratusError.Code.operationCancelled)))
        }
        // With a results limit, one page is the answer even when there is a cursor.
        if resultsLimit != nil {
          let ckRecords = records + newRecords
          return .success(ckRecords.map(\.canopyResultRecord))
        }
        startingPoint = QueryOperationStartingPoint.cursor(cursor)
        records += newRecords
      }
    }
  }

  private static func performOneOperation(
    with startingPoint: QueryOperationStartingPoint,
    recordZoneID: RecordZone.ID?,
    database: DatabaseType,
    desiredKeys: [Record.FieldKey]? = nil,
    resultsLimit: Int? = nil,
    qualityOfService: QualityOfService = .userInitiated
  ) async -> QueryOperationResult {
    await withCheckedContinuation { continuation in
      nonisolated(unsafe) var records: [Record] = []
      nonisolated(unsafe) var recordError: RecordError?

      let operation: QueryOperation
      switch startingPoint {
      case let .cursor(cursor):
        operation = QueryOperation(cursor: cursor)
      case let .query(query):
        operation = QueryOperation(query: query)
      }

      operation.zoneID = recordZoneID
      operation.desiredKeys = desiredKeys
      operation.qualityOfService = qualityOfService

      if let resultsLimit {
        operation.resultsLimit = resultsLimit
      }

      operation.recordMatchedBlock = { _, result in
        switch result {
        case let .failure(error):
          recordError = .init(from: error)
        case let .success(record):
          records.append(record)
        }
      }

      operation.queryResultBlock = { result in
        switch result {
        case let .success(cursor):
          if let recordError {
            continuation.resume(returning: .error(recordError))
            return
          }
          if let cursor {
            continuation.resume(returning: .recordsAndCursor(records, cursor))
          } else {
            continuation.resume(returning: .records(records))
          }
        case let .failure(error):
          continuation.resume(returning: .error(.init(from: error)))
        }
      }

      database.add(operation)
    }
  }
}

// MARK: - CKDatabaseAPI/CKDatabaseAPI.swift

final class CKDatabaseAPI: @unchecked Sendable {
  private let database: DatabaseType
  // private let databaseScope: CKDatabase.Scope
  private let databaseScope: Database.Scope
  internal let settingsProvider: () async -> CanopySettingsType
  private let tokenStore: TokenStoreType
  private let fetchDatabaseChangesSemaphore = AsyncSemaphore(value: 1)
  private let fetchZoneChangesSemaphore = AsyncSemaphore(value: 1)

  init(
    database: DatabaseType,
    databaseScope: Database.Scope,
    settingsProvider: @escaping () async -> CanopySettingsType = { CanopySettings() },
    tokenStore: TokenStoreType
  ) {
    self.database = database
    self.databaseScope = databaseScope
    self.settingsProvider = settingsProvider
    self.tokenStore = tokenStore
  }

  func modifyRecords(
    saving recordsToSave: [Record]?,
    deleting recordIDsToDelete: [Record.ID]?,
    qualityOfService qos: QualityOfService = .default
  ) async -> Result<ModifyRecordsResult, RecordError> {
    let settings = await settingsProvider()
    let modifyRecordsBehavior = settings.modifyRecordsBehavior
    switch modifyRecordsBehavior {
    case let .regular(delay):
      if let delay {
        try? await Task.sleep(nanoseconds: UInt64(delay * 1_000_000_000))
      }
    case let .simulatedFail(delay), let .simulatedFailWithPartialErrors(delay):
      if let delay {
        try? await Task.sleep(nanoseconds: UInt64(delay * 1_000_000_000))
      }
      let includePartialErrors: Bool
      if case .simulatedFailWithPartialErrors = modifyRecordsBehavior {
        includePartialErrors = true
      } else {
        includePartialErrors = false
      }
      return .failure(
        randomCKRecordError(
          codes: CKRequestError.retriableErrors,
          saving: recordsToSave,
          deleting: recordIDsToDelete,
          includePartialErrors: includePartialErrors
        )
      )
    }

    // ModifyRecords is ported in InjectableDatabaseTests.swift, without the progress block,
    // the quality of service and the switch for retries.
    return await ModifyRecords.with(
      recordsToSave: recordsToSave,
      recordIDsToDelete: recordIDsToDelete,
      database: database,
      autoBatchToSmallerWhenLimitExceeded: settings.autoBatchTooLargeModifyOperations
    )
  }

  func queryRecords(
    with query: Query,
    in zoneID: RecordZone.ID?,
    resultsLimit: Int? = nil,
    qualityOfService qos: QualityOfService = .default
  ) async -> Result<[CanopyResultRecord], RecordError> {
    await QueryRecords.with(
      query,
      recordZoneID: zoneID,
      database: database,
      resultsLimit: resultsLimit,
      qualityOfService: qos
    )
  }

  func deleteRecords(
    with query: Query,
    in zoneID: RecordZone.ID?,
    qualityOfService qos: QualityOfService = .default
  ) async -> Result<ModifyRecordsResult, RecordError> {
    let recordsResult = await QueryRecords.with(
      query,
      recordZoneID: zoneID,
      database: database,
      desiredKeys: [],
      qualityOfService: qos
    )

    switch recordsResult {
    case let .success(records):
      guard !records.isEmpty else {
        return .success(.init(savedRecords: [], deletedRecordIDs: []))
      }
      let recordIDs = records.map(\.recordID)
      return await modifyRecords(
        saving: nil,
        deleting: recordIDs,
        qualityOfService: qos
      )
    case let .failure(error):
      return .failure(error)
    }
  }

  func fetchRecords(
    with recordIDs: [Record.ID],
    desiredKeys: [Record.FieldKey]? = nil,
    perRecordIDProgressBlock: PerRecordIDProgressBlock? = nil,
    qualityOfService qos: QualityOfService = .default
  ) async -> Result<FetchRecordsResult, RecordError> {
    await withCheckedContinuation { continuation in
      nonisolated(unsafe) var foundRecords: [Record] = []
      nonisolated(unsafe) var notFoundRecordIDs: [Record.ID] = []
      nonisolated(unsafe) var recordError: RecordError?

      let fetchRecordsOperation = FetchRecordsOperation(recordIDs: recordIDs)
      fetchRecordsOperation.perRecordProgressBlock = perRecordIDProgressBlock
      fetchRecordsOperation.qualityOfService = qos
      fetchRecordsOperation.desiredKeys = desiredKeys

      fetchRecordsOperation.perRecordResultBlock = { recordId, result in
        switch result {
        case let .failure(error):
          // if let error = error as? CKError, error.code == .unknownItem {
          if let error = error as? StratusError, error.code == .unknownItem {
            // The fetch went well, the record does not exist.
            notFoundRecordIDs.append(recordId)
          } else {
            recordError = .init(from: error)
          }
        case let .success(record):
          foundRecords.append(record)
        }
      }

      fetchRecordsOperation.fetchRecordsResultBlock = { result in
        switch result {
        case .success:
          if let recordError {
            continuation.resume(returning: .failure(recordError))
          } else {
            continuation.resume(
              returning: .success(
                .init(foundRecords: foundRecords.map(\.canopyResultRecord), notFoundRecordIDs: notFoundRecordIDs)
              )
            )
          }
        case let .failure(error):
          continuation.resume(returning: .failure(.init(from: error)))
        }
      }

      database.add(fetchRecordsOperation)
    }
  }

  func modifyZones(
    saving recordZonesToSave: [RecordZone]?,
    deleting recordZoneIDsToDelete: [RecordZone.ID]?,
    qualityOfService qos: QualityOfService = .default
  ) async -> Result<ModifyZonesResult, CKRecordZoneError> {
    await withCheckedContinuation { continuation in
      let zoneOperation = ModifyRecordZonesOperation(recordZonesToSave: recordZonesToSave, recordZoneIDsToDelete: recordZoneIDsToDelete)
      zoneOperation.qualityOfService = qos

      nonisolated(unsafe) var savedZones: [RecordZone] = []
      nonisolated(unsafe) var deletedZoneIDs: [RecordZone.ID] = []
      nonisolated(unsafe) var recordZoneError: CKRecordZoneError?

      zoneOperation.perRecordZoneSaveBlock = { _, result in
        switch result {
        case let .failure(error):
          recordZoneError = CKRecordZoneError(from: error)
        case let .success(zone):
          savedZones.append(zone)
        }
      }

      zoneOperation.perRecordZoneDeleteBlock = { zoneId, result in
        switch result {
        case let .failure(error):
          recordZoneError = CKRecordZoneError(from: error)
        case .success:
          deletedZoneIDs.append(zoneId)
        }
      }

      zoneOperation.modifyRecordZonesResultBlock = { result in
        switch result {
        case let .failure(error):
          continuation.resume(returning: .failure(CKRecordZoneError(from: error)))
        case .success:
          if let recordZoneError {
            continuation.resume(returning: .failure(recordZoneError))
          } else {
            continuation.resume(returning: .success(.init(savedZones: savedZones, deletedZoneIDs: deletedZoneIDs)))
          }
        }
      }

      database.add(zoneOperation)
    }
  }

  private enum FetchZonesType {
    case allZones
    case zoneIDs([RecordZone.ID])
  }

  func fetchZones(
    with recordZoneIDs: [RecordZone.ID], qualityOfService qos: QualityOfService = .default
  ) async -> Result<[RecordZone], CKRecordZoneError> {
    await fetchZones(type: .zoneIDs(recordZoneIDs), qualityOfService: qos)
  }

  func fetchAllZones(
    qualityOfService qos: QualityOfService = .default
  ) async -> Result<[RecordZone], CKRecordZoneError> {
    await fetchZones(type: .allZones, qualityOfService: qos)
  }

  private func fetchZones(
    type: FetchZonesType, qualityOfService: QualityOfService
  ) async -> Result<[RecordZone], CKRecordZoneError> {
    await withCheckedContinuation { continuation in
      let zoneOperation: FetchRecordZonesOperation
      switch type {
      case .allZones:
        zoneOperation = FetchRecordZonesOperation.fetchAllRecordZonesOperation()
      case let .zoneIDs(zoneIDs):
        zoneOperation = FetchRecordZonesOperation(recordZoneIDs: zoneIDs)
      }
      zoneOperation.qualityOfService = qualityOfService

      nonisolated(unsafe) var zones: [RecordZone] = []
      nonisolated(unsafe) var recordZoneError: CKRecordZoneError?

      zoneOperation.perRecordZoneResultBlock = { _, result in
        switch result {
        case let .success(zone):
          zones.append(zone)
        case let .failure(error):
          recordZoneError = CKRecordZoneError(from: error)
        }
      }

      zoneOperation.fetchRecordZonesResultBlock = { result in
        switch result {
        case .success:
          if let recordZoneError {
            continuation.resume(returning: .failure(recordZoneError))
          } else {
            continuation.resume(returning: .success(zones))
          }
        case let .failure(error):
          continuation.resume(returning: .failure(CKRecordZoneError(from: error)))
        }
      }

      database.add(zoneOperation)
    }
  }

  func modifySubscriptions(
    saving subscriptionsToSave: [Subscription]?,
    deleting subscriptionIDsToDelete: [Subscription.ID]?,
    qualityOfService qos: QualityOfService = .default
  ) async -> Result<ModifySubscriptionsResult, CKSubscriptionError> {
    await withCheckedContinuation { continuation in
      let subscriptionOperation = ModifySubscriptionsOperation(subscriptionsToSave: subscriptionsToSave, subscriptionIDsToDelete: subscriptionIDsToDelete)
      subscriptionOperation.qualityOfService = qos

      nonisolated(unsafe) var savedSubscriptions: [Subscription] = []
      nonisolated(unsafe) var deletedSubscriptionIDs: [Subscription.ID] = []
      nonisolated(unsafe) var subscriptionError: CKSubscriptionError?

      subscriptionOperation.perSubscriptionSaveBlock = { _, result in
        switch result {
        case let .failure(error):
          subscriptionError = CKSubscriptionError(from: error)
        case let .success(subscription):
          savedSubscriptions.append(subscription)
        }
      }

      subscriptionOperation.perSubscriptionDeleteBlock = { subscriptionId, result in
        switch result {
        case let .failure(error):
          subscriptionError = CKSubscriptionError(from: error)
        case .success:
          deletedSubscriptionIDs.append(subscriptionId)
        }
      }

      subscriptionOperation.modifySubscriptionsResultBlock = { result in
        switch result {
        case let .failure(error):
          continuation.resume(returning: .failure(CKSubscriptionError(from: error)))
        case .success:
          if let subscriptionError {
            continuation.resume(returning: .failure(subscriptionError))
          } else {
            continuation.resume(
              returning: .success(
                .init(savedSubscriptions: savedSubscriptions, deletedSubscriptionIDs: deletedSubscriptionIDs)
              )
            )
          }
        }
      }
      database.add(subscriptionOperation)
    }
  }

  func fetchDatabaseChanges(
    qualityOfService qos: QualityOfService = .default
  ) async -> Result<FetchDatabaseChangesResult, CanopyError> {
    await fetchDatabaseChangesSemaphore.wait()
    defer { fetchDatabaseChangesSemaphore.signal() }

    let databaseScope = self.databaseScope
    let fetchDatabaseChangesBehavior = await settingsProvider().fetchDatabaseChangesBehavior
    switch fetchDatabaseChangesBehavior {
    case let .regular(delay):
      if let delay {
        try? await Task.sleep(nanoseconds: UInt64(delay * 1_000_000_000))
      }
    case let .simulatedFail(delay), let .simulatedFailWithPartialErrors(delay):
      if let delay {
        try? await Task.sleep(nanoseconds: UInt64(delay * 1_000_000_000))
      }
      return .failure(CanopyError.ckRequestError(randomCKRequestError(codes: CKRequestError.retriableErrors)))
    }

    let database = database
    let tokenStore = tokenStore
    let token = await tokenStore.tokenForDatabaseScope(databaseScope)

    return await withCheckedContinuation { continuation in
      nonisolated(unsafe) var changedRecordZoneIDs: [RecordZone.ID] = []
      nonisolated(unsafe) var deletedRecordZoneIDs: [RecordZone.ID] = []
      nonisolated(unsafe) var purgedRecordZoneIDs: [RecordZone.ID] = []

      let changesOperation = FetchDatabaseChangesOperation(previousServerChangeToken: token)
      changesOperation.qualityOfService = qos
      changesOperation.fetchAllChanges = true

      changesOperation.recordZoneWithIDChangedBlock = { recordZoneID in
        changedRecordZoneIDs.append(recordZoneID)
      }

      changesOperation.recordZoneWithIDWasDeletedBlock = { recordZoneID in
        deletedRecordZoneIDs.append(recordZoneID)
      }

      changesOperation.recordZoneWithIDWasPurgedBlock = { recordZoneID in
        purgedRecordZoneIDs.append(recordZoneID)
      }

      changesOperation.fetchDatabaseChangesResultBlock = { result in
        switch result {
        case let .failure(error):
          let requestError = CanopyError(from: error)
          if requestError == .ckChangeTokenExpired {
            // The token is too old: forget it, and let the caller start over.
            Task {
              await tokenStore.storeToken(nil, forDatabaseScope: databaseScope)
              continuation.resume(returning: .failure(requestError))
            }
          } else {
            continuation.resume(returning: .failure(requestError))
          }
        case let .success((token, _)):
          // moreComing is false: fetchAllChanges is true.
          Task { [changedRecordZoneIDs, deletedRecordZoneIDs, purgedRecordZoneIDs] in
            await tokenStore.storeToken(token, forDatabaseScope: databaseScope)
            continuation.resume(
              returning: .success(
                .init(
                  changedRecordZoneIDs: changedRecordZoneIDs,
                  deletedRecordZoneIDs: deletedRecordZoneIDs,
                  purgedRecordZoneIDs: purgedRecordZoneIDs
                )
              )
            )
          }
        }
      }
      database.add(changesOperation)
    }
  }

  func fetchZoneChanges(
    recordZoneIDs: [RecordZone.ID],
    fetchMethod: FetchZoneChangesMethod,
    qualityOfService qos: QualityOfService = .default
  ) async -> Result<FetchZoneChangesResult, CanopyError> {
    await fetchZoneChangesSemaphore.wait()
    defer { fetchZoneChangesSemaphore.signal() }

    let fetchZoneChangesBehavior = await settingsProvider().fetchZoneChangesBehavior
    switch fetchZoneChangesBehavior {
    case let .regular(delay):
      if let delay {
        try? await Task.sleep(nanoseconds: UInt64(delay * 1_000_000_000))
      }
    case let .simulatedFail(delay), let .simulatedFailWithPartialErrors(delay):
      if let delay {
        try? await Task.sleep(nanoseconds: UInt64(delay * 1_000_000_000))
      }
      return .failure(CanopyError.ckRequestError(randomCKRequestError(codes: CKRequestError.retriableErrors)))
    }

    let db = database
    let tokenStore = tokenStore

    // typealias ZoneConfiguration = CKFetchRecordZoneChangesOperation.ZoneConfiguration
    typealias ZoneConfiguration = FetchRecordZoneChangesOperation.ZoneConfiguration

    let configurations = await withTaskGroup(
      of: (RecordZone.ID, ZoneConfiguration).self,
      returning: [RecordZone.ID: ZoneConfiguration].self
    ) { group in
      for zoneID in recordZoneIDs {
        group.addTask {
          let token = await tokenStore.tokenForRecordZoneID(zoneID)
          return (
            zoneID,
            ZoneConfiguration(
              previousServerChangeToken: token,
              resultsLimit: nil,
              desiredKeys: fetchMethod.desiredKeys
            )
          )
        }
      }
      var results: [RecordZone.ID: ZoneConfiguration] = [:]
      for await result in group {
        results[result.0] = result.1
      }
      return results
    }

    return await withCheckedContinuation { continuation in
      nonisolated(unsafe) var records: [Record] = []
      nonisolated(unsafe) var deleted: [DeletedCKRecord] = []
      nonisolated(unsafe) var recordError: RecordError?
      nonisolated(unsafe) var zoneError: CKRecordZoneError?
      nonisolated(unsafe) var zoneTokens: [RecordZone.ID: ServerChangeToken] = [:]
      nonisolated(unsafe) var zoneIDWithExpiredToken: RecordZone.ID?

      let changesOperation = FetchRecordZoneChangesOperation(recordZoneIDs: recordZoneIDs, configurationsByRecordZoneID: configurations)
      changesOperation.qualityOfService = qos
      changesOperation.fetchAllChanges = true

      changesOperation.recordWasChangedBlock = { _, result in
        switch result {
        case let .failure(error):
          recordError = RecordError(from: error)
        case let .success(record):
          records.append(record)
        }
      }

      changesOperation.recordWithIDWasDeletedBlock = { recordID, recordType in
        deleted.append(DeletedCKRecord(recordID: recordID, recordType: recordType))
      }

      changesOperation.recordZoneFetchResultBlock = { zoneID, result in
        switch result {
        case let .failure(error):
          if zoneError == nil {
            // if let ckError = error as? CKError, ckError.code == .changeTokenExpired {
            if let ckError = error as? StratusError, ckError.code == .changeTokenExpired {
              zoneIDWithExpiredToken = zoneID
            }
            zoneError = CKRecordZoneError(from: error)
          }
        case let .success((serverChangeToken, _, _)):
          zoneTokens[zoneID] = serverChangeToken
        }
      }

      changesOperation.fetchRecordZoneChangesResultBlock = { result in
        switch result {
        case let .failure(error):
          continuation.resume(returning: .failure(CanopyError(from: error)))
        case .success:
          if let recordError {
            continuation.resume(returning: .failure(.ckRecordError(recordError)))
          } else if let zoneError {
            Task { [zoneIDWithExpiredToken] in
              if let zoneIDWithExpiredToken {
                await tokenStore.storeToken(nil, forRecordZoneID: zoneIDWithExpiredToken)
              }
              continuation.resume(returning: .failure(.ckRecordZoneError(zoneError)))
            }
          } else {
            Task { [zoneTokens, records, deleted] in
              for (zoneID, token) in zoneTokens {
                await tokenStore.storeToken(token, forRecordZoneID: zoneID)
              }
              switch fetchMethod {
              case .changeTokenOnly:
                continuation.resume(returning: .success(FetchZoneChangesResult.empty))
              case .changeTokenAndAllData, .changeTokenAndSpecificKeys:
                continuation.resume(
                  returning: .success(.init(records: records.map(\.canopyResultRecord), deletedRecords: deleted))
                )
              }
            }
          }
        }
      }
      db.add(changesOperation)
    }
  }
}

// MARK: - CKDatabaseAPI/CKDatabaseAPI+SimulatedFail.swift

extension CKDatabaseAPI {
  func randomCKRecordError(
    codes: Set<StratusError.Code>,
    saving recordsToSave: [Record]? = nil,
    deleting recordIDsToDelete: [Record.ID]? = nil,
    includePartialErrors: Bool = false
  ) -> RecordError {
    let code = codes.randomElement()!
    var info: [String: Any] = [:]

    if CKRequestError.retriableErrors.contains(code) {
      // info[CKErrorRetryAfterKey] = NSNumber(10)
      info[ErrorRetryAfterKey] = NSNumber(10)
    }

    if includePartialErrors {
      let otherCodes = codes.subtracting([.partialFailure])

      var partialErrors: [AnyHashable: Error] = [:]
      if let saved = recordsToSave {
        for oneSaved in saved {
          partialErrors[oneSaved.recordID] = randomCKRecordError(codes: otherCodes).ckError
        }
      }
      if let deleted = recordIDsToDelete {
        for oneDeleted in deleted {
          partialErrors[oneDeleted] = randomCKRecordError(codes: otherCodes).ckError
        }
      }
      // info[CKPartialErrorsByItemIDKey] = partialErrors
      info[PartialErrorsByItemIDKey] = partialErrors
    }

    // let error = CKError(code, userInfo: info)
    let error = StratusError(code, userInfo: info)
    return RecordError(from: error)
  }

  func randomCKRequestError(codes: Set<StratusError.Code>) -> CKRequestError {
    let code = codes.randomElement()!
    var info: [String: Any] = [:]
    if CKRequestError.retriableErrors.contains(code) {
      info[ErrorRetryAfterKey] = NSNumber(10)
    }
    let error = StratusError(code, userInfo: info)
    return CKRequestError(from: error)
  }
}

// MARK: - CKContainerAPI/CKContainerAPI.swift (without sharing and the account-changed stream)

actor CKContainerAPI {
  let container: ContainerType

  init(_ container: ContainerType) {
    self.container = container
  }

  var userRecordID: Result<Record.ID?, RecordError> {
    get async {
      await withCheckedContinuation { continuation in
        container.fetchUserRecordID { recordID, error in
          if let error {
            continuation.resume(returning: .failure(RecordError(from: error)))
          } else {
            continuation.resume(returning: .success(recordID))
          }
        }
      }
    }
  }

  // var accountStatus: Result<CKAccountStatus, CanopyError> {
  var accountStatus: Result<AccountStatus, CanopyError> {
    get async {
      await withCheckedContinuation { continuation in
        container.accountStatus { accountStatus, error in
          if let error {
            continuation.resume(returning: .failure(CanopyError.accountError(from: error)))
          } else {
            continuation.resume(returning: .success(accountStatus))
          }
        }
      }
    }
  }
}

// MARK: - Canopy/Canopy.swift

actor Canopy {
  private let containerProvider: @Sendable () -> ContainerType
  private let publicCloudDatabaseProvider: @Sendable () -> DatabaseType
  private let privateCloudDatabaseProvider: @Sendable () -> DatabaseType
  private let sharedCloudDatabaseProvider: @Sendable () -> DatabaseType
  private let settingsProvider: @Sendable () -> CanopySettingsType
  private let tokenStoreProvider: @Sendable () -> TokenStoreType

  private var containerAPI: CKContainerAPI?
  // private var databaseAPIs: [CKDatabase.Scope: CKDatabaseAPI] = [:]
  private var databaseAPIs: [Database.Scope: CKDatabaseAPI] = [:]

  init(
    // container: … = CKContainer.default(),
    container: @escaping @autoclosure @Sendable () -> ContainerType = Container.default(),
    publicCloudDatabase: @escaping @autoclosure @Sendable () -> DatabaseType = Container.default().publicCloudDatabase,
    privateCloudDatabase: @escaping @autoclosure @Sendable () -> DatabaseType = Container.default().privateCloudDatabase,
    sharedCloudDatabase: @escaping @autoclosure @Sendable () -> DatabaseType = Container.default().sharedCloudDatabase,
    settings: @escaping @Sendable () -> CanopySettingsType = { CanopySettings() },
    tokenStore: @escaping @autoclosure @Sendable () -> TokenStoreType
  ) {
    self.containerProvider = container
    self.publicCloudDatabaseProvider = publicCloudDatabase
    self.privateCloudDatabaseProvider = privateCloudDatabase
    self.sharedCloudDatabaseProvider = sharedCloudDatabase
    self.settingsProvider = settings
    self.tokenStoreProvider = tokenStore
  }

  func databaseAPI(usingDatabaseScope scope: Database.Scope) async -> CKDatabaseAPI {
    if let existingAPI = databaseAPIs[scope] {
      return existingAPI
    }
    let databaseAPI: CKDatabaseAPI
    switch scope {
    case .public:
      databaseAPI = api(using: publicCloudDatabaseProvider(), scope: .public)
    case .private:
      databaseAPI = api(using: privateCloudDatabaseProvider(), scope: .private)
    case .shared:
      databaseAPI = api(using: sharedCloudDatabaseProvider(), scope: .shared)
    @unknown default:
      fatalError("Unknown CKDatabase scope: \(scope)")
    }
    databaseAPIs[scope] = databaseAPI
    return databaseAPI
  }

  func containerAPI() async -> CKContainerAPI {
    if let containerAPI {
      return containerAPI
    } else {
      let newContainerAPI = CKContainerAPI(containerProvider())
      containerAPI = newContainerAPI
      return newContainerAPI
    }
  }

  private func api(using database: DatabaseType, scope: Database.Scope) -> CKDatabaseAPI {
    CKDatabaseAPI(
      database: database,
      databaseScope: scope,
      settingsProvider: settingsProvider,
      tokenStore: tokenStoreProvider()
    )
  }
}

// MARK: - CanopyTypes/Sources/Archiving/ (what the replaying test doubles keep)

struct CloudKitRecordIDArchive: Codable {
  private let data: Data

  // var recordIDs: [CKRecord.ID] {
  var recordIDs: [Record.ID] {
    do {
      let decodedRecordIDs = try NSKeyedUnarchiver.unarchiveTopLevelObjectWithData(data)
      // return decodedRecordIDs as? [CKRecord.ID] ?? []
      return decodedRecordIDs as? [Record.ID] ?? []
    } catch {
      return []
    }
  }

  // init(recordIDs: [CKRecord.ID]) {
  init(recordIDs: [Record.ID]) {
    guard !recordIDs.isEmpty else {
      self.data = Data()
      return
    }
    do {
      self.data = try NSKeyedArchiver.archivedData(withRootObject: recordIDs, requiringSecureCoding: true)
    } catch {
      self.data = Data()
    }
  }
}

struct CloudKitRecordZoneArchive: Codable {
  private let data: Data

  // var zones: [CKRecordZone] {
  var zones: [RecordZone] {
    do {
      let decodedRecords = try NSKeyedUnarchiver.unarchiveTopLevelObjectWithData(data)
      return decodedRecords as? [RecordZone] ?? []
    } catch {
      return []
    }
  }

  init(zones: [RecordZone]) {
    guard !zones.isEmpty else {
      self.data = Data()
      return
    }
    do {
      self.data = try NSKeyedArchiver.archivedData(withRootObject: zones, requiringSecureCoding: true)
    } catch {
      self.data = Data()
    }
  }
}

struct CloudKitSubscriptionArchive: Codable {
  private let data: Data

  // var subscription: CKSubscription {
  //   let decodedRecord = try! NSKeyedUnarchiver.unarchivedObject(ofClass: CKSubscription.self, from: data)!
  var subscription: Subscription {
    let decodedRecord = try! NSKeyedUnarchiver.unarchivedObject(ofClass: Subscription.self, from: data)!
    return decodedRecord
  }

  init(subscription: Subscription) {
    self.data = try! NSKeyedArchiver.archivedData(withRootObject: subscription, requiringSecureCoding: true)
  }
}

/// Archive optionally containing a cursor.
struct CloudKitCursorArchive: Codable {
  private let data: Data

  // var cursor: CKQueryOperation.Cursor? {
  var cursor: QueryOperation.Cursor? {
    do {
      let decodedRecord = try NSKeyedUnarchiver.unarchivedObject(ofClass: QueryOperation.Cursor.self, from: data)
      return decodedRecord
    } catch {
      return nil
    }
  }

  init(cursor: QueryOperation.Cursor?) {
    if let cursor {
      do {
        self.data = try NSKeyedArchiver.archivedData(withRootObject: cursor, requiringSecureCoding: true)
      } catch {
        self.data = Data()
      }
    } else {
      self.data = Data()
    }
  }
}

struct CloudKitServerChangeTokenArchive: Codable {
  private let data: Data

  // var token: CKServerChangeToken {
  var token: ServerChangeToken {
    let decodedRecord = try! NSKeyedUnarchiver.unarchivedObject(ofClass: ServerChangeToken.self, from: data)!
    return decodedRecord
  }

  init(token: ServerChangeToken) {
    self.data = try! NSKeyedArchiver.archivedData(withRootObject: token, requiringSecureCoding: true)
  }
}

// MARK: - Tests

@Suite("Canopy's database and container API, ported from CloudKit", .timeLimit(.minutes(30)))
struct CanopyTests {
  /// A Canopy on the container, its tokens in a `UserDefaults` suite of the test's own.
  private func canopy(
    _ container: Container, defaults: UserDefaults, settings: CanopySettings = CanopySettings()
  ) -> Canopy {
    let tokenStore = UserDefaultsTokenStore(defaults: defaults)
    return Canopy(
      container: container,
      publicCloudDatabase: container.publicCloudDatabase,
      privateCloudDatabase: container.privateCloudDatabase,
      sharedCloudDatabase: container.sharedCloudDatabase,
      settings: { settings },
      tokenStore: tokenStore
    )
  }

  private func withDefaults<T>(_ body: (UserDefaults) async throws -> T) async throws -> T {
    let suite = "canopy-tests-\(UUID().uuidString)"
    let defaults = try #require(UserDefaults(suiteName: suite))
    defer { defaults.removePersistentDomain(forName: suite) }
    return try await body(defaults)
  }

  private func notes(_ range: Range<Int>, in zoneID: RecordZone.ID) -> [Record] {
    range.map { index in
      let record = Record(recordType: "Note", recordID: Record.ID(recordName: "note-\(index)", zoneID: zoneID))
      record["index"] = index
      record["title"] = "Note \(index)"
      record["body"] = String(repeating: "text ", count: 3)
      return record
    }
  }

  private func makeZone(_ name: String, _ api: CKDatabaseAPI) async throws -> RecordZone.ID {
    let zone = RecordZone(zoneName: name)
    let saved = try await api.modifyZones(saving: [zone], deleting: nil).get()
    #expect(saved.savedZones.map(\.zoneID) == [zone.zoneID])
    return zone.zoneID
  }

  @Test("a query pages through cursors to the last record; a results limit answers its first page", arguments: TestEngine.all)
  func queryPagesThroughCursors(engine: TestEngine) async throws {
    try await withContainer(on: engine) { container in
      try await withDefaults { defaults in
        let api = await canopy(container, defaults: defaults).databaseAPI(usingDatabaseScope: .private)
        let zoneID = try await makeZone("Notes", api)
        let saved = try await api.modifyRecords(saving: notes(0..<250, in: zoneID), deleting: nil).get()
        #expect(saved.savedRecords.count == 250)

        let query = Query(recordType: "Note", predicate: QueryPredicate(value: true))
        query.sortDescriptors = [RecordSortDescriptor(key: "index", ascending: true)]
        // 250 records are three pages of the store's default page size: two cursors followed.
        let all = try await api.queryRecords(with: query, in: zoneID).get()
        #expect(all.map { $0["index"] as? Int } == (0..<250).map { Optional($0) })
        #expect(all.allSatisfy { $0.recordChangeTag != nil && $0.creationDate != nil })

        let firstPage = try await api.queryRecords(with: query, in: zoneID, resultsLimit: 10).get()
        #expect(firstPage.map(\.recordID.recordName) == (0..<10).map { "note-\($0)" })

        let filtered = Query(recordType: "Note", predicate: try QueryPredicate(format: "index >= %@", 240))
        #expect(try await api.queryRecords(with: filtered, in: zoneID).get().count == 10)
        #expect(try await api.queryRecords(with: query, in: .default).get().isEmpty)
      }
    }
  }

  @Test("delete by query deletes every match, across pages, and nothing else", arguments: TestEngine.all)
  func deleteByQuery(engine: TestEngine) async throws {
    try await withContainer(on: engine) { container in
      try await withDefaults { defaults in
        let api = await canopy(container, defaults: defaults).databaseAPI(usingDatabaseScope: .private)
        let zoneID = try await makeZone("Notes", api)
        _ = try await api.modifyRecords(saving: notes(0..<230, in: zoneID), deleting: nil).get()

        let old = Query(recordType: "Note", predicate: try QueryPredicate(format: "index < %@", 120))
        let deleted = try await api.deleteRecords(with: old, in: zoneID).get()
        #expect(Set(deleted.deletedRecordIDs.map(\.recordName)) == Set((0..<120).map { "note-\($0)" }))

        let everything = Query(recordType: "Note", predicate: QueryPredicate(value: true))
        let left = try await api.queryRecords(with: everything, in: zoneID).get()
        #expect(Set(left.map(\.recordID.recordName)) == Set((120..<230).map { "note-\($0)" }))
        // Nothing left to match: an empty success, no operation with nothing in it.
        let again = try await api.deleteRecords(with: old, in: zoneID).get()
        #expect(again.deletedRecordIDs.isEmpty && again.savedRecords.isEmpty)
      }
    }
  }

  @Test("fetching records: desired keys limit the fields; a missing ID fails the call with partialFailure naming it", arguments: TestEngine.all)
  func fetchRecordsReportsMissing(engine: TestEngine) async throws {
    try await withContainer(on: engine) { container in
      try await withDefaults { defaults in
        let api = await canopy(container, defaults: defaults).databaseAPI(usingDatabaseScope: .private)
        let zoneID = try await makeZone("Notes", api)
        _ = try await api.modifyRecords(saving: notes(0..<3, in: zoneID), deleting: nil).get()
        let missing = Record.ID(recordName: "note-99", zoneID: zoneID)
        let ids = [Record.ID(recordName: "note-0", zoneID: zoneID), missing, Record.ID(recordName: "note-2", zoneID: zoneID)]

        let fetched = try await api.fetchRecords(with: [ids[0], ids[2]], desiredKeys: ["title"]).get()
        #expect(Set(fetched.foundRecords.map(\.recordID.recordName)) == ["note-0", "note-2"])
        #expect(fetched.notFoundRecordIDs.isEmpty)
        #expect(fetched.foundRecords.allSatisfy { $0["title"] != nil && $0["body"] == nil })

        // Canopy counts on a final success after the missing record's unknownItem; CloudKit ends
        // the operation with partialFailure, the unknownItem in it (the same holds for zones,
        // below), so the call fails and names the missing record.
        guard case .failure(let partial) = await api.fetchRecords(with: ids) else {
          Issue.record("a fetch with a missing record succeeded")
          return
        }
        #expect(partial.code == StratusError.Code.partialFailure.rawValue)
        #expect(partial.batchErrors.mapValues(\.code) == ["note-99": StratusError.Code.unknownItem.rawValue])

        // A record in a zone that does not exist: zoneNotFound, not unknownItem.
        let elsewhere = Record.ID(recordName: "note-0", zoneID: RecordZone.ID(zoneName: "Nowhere"))
        guard case .failure(let error) = await api.fetchRecords(with: [elsewhere]) else {
          Issue.record("a record in a missing zone was fetched")
          return
        }
        #expect(error.code == StratusError.Code.partialFailure.rawValue)
        #expect(error.batchErrors["note-0"]?.code == StratusError.Code.zoneNotFound.rawValue)
      }
    }
  }

  @Test("zones: saved, listed, fetched by ID (a missing one fails the call with its own error), deleted", arguments: TestEngine.all)
  func zones(engine: TestEngine) async throws {
    try await withContainer(on: engine) { container in
      try await withDefaults { defaults in
        let api = await canopy(container, defaults: defaults).databaseAPI(usingDatabaseScope: .private)
        let saved = try await api.modifyZones(saving: [RecordZone(zoneName: "A"), RecordZone(zoneName: "B")], deleting: nil).get()
        #expect(Set(saved.savedZones.map(\.zoneID.zoneName)) == ["A", "B"])

        let all = try await api.fetchAllZones().get()
        #expect(Set(all.map(\.zoneID.zoneName)) == ["A", "B", RecordZone.ID.default.zoneName])
        let a = RecordZone.ID(zoneName: "A")
        #expect(try await api.fetchZones(with: [a]).get().map(\.zoneID) == [a])

        let missing = RecordZone.ID(zoneName: "Missing")
        guard case .failure(let error) = await api.fetchZones(with: [a, missing]) else {
          Issue.record("fetching a missing zone succeeded")
          return
        }
        // CloudKit ends the operation with partialFailure, the missing zone's own error in it.
        #expect(error.code == StratusError.Code.partialFailure.rawValue)
        #expect(error.batchErrors["Missing"]?.code == StratusError.Code.zoneNotFound.rawValue)
        #expect(error.hasMultipleErrors)

        let deleted = try await api.modifyZones(saving: nil, deleting: [a]).get()
        #expect(deleted.deletedZoneIDs == [a])
        #expect(Set(try await api.fetchAllZones().get().map(\.zoneID.zoneName)) == ["B", RecordZone.ID.default.zoneName])
      }
    }
  }

  @Test("subscriptions: saved and deleted in one call; deleting an unknown one fails the call", arguments: TestEngine.all)
  func subscriptions(engine: TestEngine) async throws {
    try await withContainer(on: engine) { container in
      try await withDefaults { defaults in
        let api = await canopy(container, defaults: defaults).databaseAPI(usingDatabaseScope: .private)
        let zoneID = try await makeZone("Notes", api)
        let zoneSubscription = RecordZoneSubscription(zoneID: zoneID, subscriptionID: "notes-zone")
        let info = NotificationInfo()
        info.shouldSendContentAvailable = true
        zoneSubscription.notificationInfo = info
        let database = DatabaseSubscription(subscriptionID: "everything")
        database.notificationInfo = info
        let saved = try await api.modifySubscriptions(saving: [zoneSubscription, database], deleting: nil).get()
        #expect(Set(saved.savedSubscriptions.map(\.subscriptionID)) == ["notes-zone", "everything"])
        #expect(Set(try await container.privateCloudDatabase.allSubscriptions().map(\.subscriptionID)) == ["notes-zone", "everything"])

        let removed = try await api.modifySubscriptions(saving: nil, deleting: ["everything"]).get()
        #expect(removed.deletedSubscriptionIDs == ["everything"])

        guard case .failure(let error) = await api.modifySubscriptions(saving: nil, deleting: ["never-saved"]) else {
          Issue.record("deleting an unknown subscription succeeded")
          return
        }
        #expect(error.code == StratusError.Code.partialFailure.rawValue)
        #expect(error.batchErrors["never-saved"]?.code == StratusError.Code.unknownItem.rawValue)
        #expect(try await container.privateCloudDatabase.allSubscriptions().map(\.subscriptionID) == ["notes-zone"])
      }
    }
  }

  @Test("database and zone changes: tokens kept in UserDefaults, each change read once, deletions with their record type", arguments: TestEngine.all)
  func changesWithTokenStore(engine: TestEngine) async throws {
    try await withContainer(on: engine) { container in
      try await withDefaults { defaults in
        let api = await canopy(container, defaults: defaults).databaseAPI(usingDatabaseScope: .private)
        let zoneID = try await makeZone("Notes", api)
        _ = try await api.modifyRecords(saving: notes(0..<3, in: zoneID), deleting: nil).get()

        let first = try await api.fetchDatabaseChanges().get()
        #expect(first.changedRecordZoneIDs.contains(zoneID))
        #expect(defaults.data(forKey: "privateCKDatabaseServerChangeToken") != nil)
        #expect(try await api.fetchDatabaseChanges().get() == FetchDatabaseChangesResult(changedRecordZoneIDs: [], deletedRecordZoneIDs: [], purgedRecordZoneIDs: []))

        let initial = try await api.fetchZoneChanges(recordZoneIDs: [zoneID], fetchMethod: .changeTokenAndAllData).get()
        #expect(Set(initial.records.map(\.recordID.recordName)) == ["note-0", "note-1", "note-2"])
        #expect(initial.deletedRecords.isEmpty)
        let zoneKey = "recordZoneServerChangeToken:private:\(CurrentUserDefaultName):Notes"
        #expect(defaults.data(forKey: zoneKey) != nil)

        _ = try await api.modifyRecords(saving: notes(3..<4, in: zoneID), deleting: [Record.ID(recordName: "note-1", zoneID: zoneID)]).get()
        let next = try await api.fetchZoneChanges(recordZoneIDs: [zoneID], fetchMethod: .changeTokenAndSpecificKeys(["title"])).get()
        #expect(next.records.map(\.recordID.recordName) == ["note-3"])
        #expect(next.records.first?["title"] as? String == "Note 3")
        #expect(next.records.first?["body"] == nil)
        #expect(next.deletedRecords == [DeletedCKRecord(recordID: Record.ID(recordName: "note-1", zoneID: zoneID), recordType: "Note")])
        #expect(try await api.fetchZoneChanges(recordZoneIDs: [zoneID], fetchMethod: .changeTokenAndAllData).get() == .empty)

        #expect(try await api.fetchDatabaseChanges().get().changedRecordZoneIDs == [zoneID])
        _ = try await api.modifyZones(saving: nil, deleting: [zoneID]).get()
        #expect(try await api.fetchDatabaseChanges().get().deletedRecordZoneIDs == [zoneID])
      }
    }
  }

  @Test("changeTokenOnly catches up without the history: only later changes come back", arguments: TestEngine.all)
  func changeTokenOnly(engine: TestEngine) async throws {
    try await withContainer(on: engine) { container in
      try await withDefaults { defaults in
        let api = await canopy(container, defaults: defaults).databaseAPI(usingDatabaseScope: .private)
        let notesZone = try await makeZone("Notes", api)
        let tasksZone = try await makeZone("Tasks", api)
        _ = try await api.modifyRecords(saving: notes(0..<5, in: notesZone) + notes(0..<2, in: tasksZone), deleting: nil).get()

        let caughtUp = try await api.fetchZoneChanges(recordZoneIDs: [notesZone, tasksZone], fetchMethod: .changeTokenOnly).get()
        #expect(caughtUp == .empty)

        _ = try await api.modifyRecords(saving: notes(7..<8, in: notesZone) + notes(9..<10, in: tasksZone), deleting: nil).get()
        let later = try await api.fetchZoneChanges(recordZoneIDs: [notesZone, tasksZone], fetchMethod: .changeTokenAndAllData).get()
        #expect(Set(later.records.map { "\($0.recordID.zoneID.zoneName)/\($0.recordID.recordName)" }) == ["Notes/note-7", "Tasks/note-9"])
      }
    }
  }

  @Test("an expired database token is dropped from the store, and the next fetch starts over", arguments: TestEngine.all)
  func expiredDatabaseToken(engine: TestEngine) async throws {
    try await withContainer(on: engine) { container in
      try await withDefaults { defaults in
        let api = await canopy(container, defaults: defaults).databaseAPI(usingDatabaseScope: .private)
        let keep = try await makeZone("Keep", api)
        _ = try await api.fetchDatabaseChanges().get()
        let gone = try await makeZone("Gone", api)
        _ = try await api.modifyZones(saving: nil, deleting: [gone]).get()
        // Stratus removes old tombstones when asked (CloudKit on its own schedule); tokens
        // from before them expire.
        let compact = CompactChangeHistoryOperation(retention: 0)
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
          compact.compactChangeHistoryResultBlock = { continuation.resume(with: $0.map { _ in () }) }
          container.privateCloudDatabase.add(compact)
        }

        let expired = await api.fetchDatabaseChanges()
        #expect(expired == .failure(.ckChangeTokenExpired))
        #expect(defaults.data(forKey: "privateCKDatabaseServerChangeToken") == nil)
        let fresh = try await api.fetchDatabaseChanges().get()
        #expect(fresh.changedRecordZoneIDs.contains(keep))
        #expect(!fresh.changedRecordZoneIDs.contains(gone))
      }
    }
  }

  @Test("an expired zone token: CloudKit ends the fetch with partialFailure, which Canopy passes on keeping the token; without it the zone is read from the start", arguments: TestEngine.all)
  func expiredZoneToken(engine: TestEngine) async throws {
    try await withContainer(on: engine) { container in
      try await withDefaults { defaults in
        let api = await canopy(container, defaults: defaults).databaseAPI(usingDatabaseScope: .private)
        let zoneID = try await makeZone("Notes", api)
        _ = try await api.modifyRecords(saving: notes(0..<3, in: zoneID), deleting: nil).get()
        _ = try await api.fetchZoneChanges(recordZoneIDs: [zoneID], fetchMethod: .changeTokenAndAllData).get()
        _ = try await api.modifyRecords(saving: nil, deleting: [Record.ID(recordName: "note-1", zoneID: zoneID)]).get()
        let compact = CompactChangeHistoryOperation(retention: 0)
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
          compact.compactChangeHistoryResultBlock = { continuation.resume(with: $0.map { _ in () }) }
          container.privateCloudDatabase.add(compact)
        }

        // The zone's changeTokenExpired reaches recordZoneFetchResultBlock; the operation then
        // ends with partialFailure, so Canopy answers that and its token clean-up (written for
        // a final success) does not run: the token stays.
        guard case .failure(.ckRequestError(let error)) = await api.fetchZoneChanges(recordZoneIDs: [zoneID], fetchMethod: .changeTokenAndAllData) else {
          Issue.record("a fetch with an expired zone token did not fail as a request")
          return
        }
        #expect(error.code == StratusError.Code.partialFailure.rawValue)
        #expect(error.errorDump.contains("changeTokenExpired"))
        let store = UserDefaultsTokenStore(defaults: defaults)
        #expect(store.tokenForRecordZoneID(zoneID) != nil)

        store.storeToken(nil, forRecordZoneID: zoneID)
        let fresh = try await api.fetchZoneChanges(recordZoneIDs: [zoneID], fetchMethod: .changeTokenAndAllData).get()
        #expect(Set(fresh.records.map(\.recordID.recordName)) == ["note-0", "note-2"])
        #expect(fresh.deletedRecords.isEmpty)

        // A zone that is not there fails the same way, naming zoneNotFound.
        guard case .failure(.ckRequestError(let missing)) = await api.fetchZoneChanges(recordZoneIDs: [RecordZone.ID(zoneName: "Nope")], fetchMethod: .changeTokenAndAllData) else {
          Issue.record("a fetch of a missing zone did not fail")
          return
        }
        #expect(missing.code == StratusError.Code.partialFailure.rawValue)
        #expect(missing.errorDump.contains("zoneNotFound"))
      }
    }
  }

  @Test("simulated failures answer a retriable error with retryAfter and each item's error, and write nothing", arguments: TestEngine.all)
  func simulatedFailures(engine: TestEngine) async throws {
    try await withContainer(on: engine) { container in
      try await withDefaults { defaults in
        var settings = CanopySettings()
        settings.modifyRecordsBehavior = .simulatedFailWithPartialErrors(nil)
        settings.fetchDatabaseChangesBehavior = .simulatedFail(nil)
        let failing = await canopy(container, defaults: defaults, settings: settings).databaseAPI(usingDatabaseScope: .private)
        let working = await canopy(container, defaults: defaults).databaseAPI(usingDatabaseScope: .private)
        let zoneID = try await makeZone("Notes", working)

        guard case .failure(let error) = await failing.modifyRecords(saving: notes(0..<3, in: zoneID), deleting: nil) else {
          Issue.record("a simulated failure saved")
          return
        }
        #expect(CKRequestError.retriableErrors.map(\.rawValue).contains(error.code))
        #expect(error.retryAfterSeconds == 10)
        #expect(Set(error.batchErrors.keys) == ["note-0", "note-1", "note-2"])
        #expect(error.batchErrors.values.allSatisfy { $0.code != StratusError.Code.partialFailure.rawValue })
        let query = Query(recordType: "Note", predicate: QueryPredicate(value: true))
        #expect(try await working.queryRecords(with: query, in: zoneID).get().isEmpty)

        guard case .failure(.ckRequestError(let requestError)) = await failing.fetchDatabaseChanges() else {
          Issue.record("a simulated database-changes failure did not fail as a request error")
          return
        }
        #expect(requestError.isRetriable && requestError.retryAfterSeconds == 10)
        #expect(defaults.data(forKey: "privateCKDatabaseServerChangeToken") == nil)
      }
    }
  }

  @Test("result records are Codable through NSKeyedArchiver, read values, encrypted values and Booleans stored as integers", arguments: TestEngine.all)
  func resultRecordsAreCodable(engine: TestEngine) async throws {
    try await withContainer(on: engine) { container in
      try await withDefaults { defaults in
        let api = await canopy(container, defaults: defaults).databaseAPI(usingDatabaseScope: .private)
        let zoneID = try await makeZone("Notes", api)
        let record = notes(0..<1, in: zoneID)[0]
        record["pinned"] = true
        record["archived"] = 0
        record.encryptedValues["secret"] = "kept"
        _ = try await api.modifyRecords(saving: [record], deleting: nil).get()

        let fetched = try await api.fetchRecords(with: [record.recordID]).get().foundRecords
        let data = try JSONEncoder().encode(fetched)
        let decoded = try JSONDecoder().decode([CanopyResultRecord].self, from: data)
        let copy = try #require(decoded.first)
        let original = try #require(fetched.first)
        #expect(copy.recordID == record.recordID)
        #expect(copy.recordType == "Note")
        #expect(copy.recordChangeTag == original.recordChangeTag)
        #expect(copy.creationDate == original.creationDate)
        #expect(copy["title"] as? String == "Note 0")
        #expect(copy.encryptedValues["secret"] as? String == "kept")
        #expect(copy.boolForKey("pinned") == true)
        #expect(copy.boolForKey("archived") == false)
        #expect(copy.boolForKey("title") == nil)
        // Records compare by identity, as CKRecords do.
        #expect(copy != original)
        #expect(original == fetched[0])

        let garbage = try JSONEncoder().encode(["type": "ckRecord", "backingValue": Data([1, 2, 3]).base64EncodedString()])
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(CanopyResultRecord.self, from: garbage) }
      }
    }
  }

  @Test("the archives Canopy's test doubles keep: zones, subscriptions, a cursor and a change token survive JSON and work", arguments: TestEngine.all)
  func archives(engine: TestEngine) async throws {
    try await withContainer(on: engine) { container in
      try await withDefaults { defaults in
        let api = await canopy(container, defaults: defaults).databaseAPI(usingDatabaseScope: .private)
        let zoneID = try await makeZone("Notes", api)
        let zones = try await api.fetchAllZones().get()
        let zoneArchive = try JSONDecoder().decode(CloudKitRecordZoneArchive.self, from: JSONEncoder().encode(CloudKitRecordZoneArchive(zones: zones)))
        #expect(Set(zoneArchive.zones.map(\.zoneID)) == Set(zones.map(\.zoneID)))
        #expect(zoneArchive.zones.first { $0.zoneID == zoneID }?.capabilities.contains(.atomic) == true)
        let recordIDs = [Record.ID(recordName: "a", zoneID: zoneID), Record.ID(recordName: "b")]
        let idArchive = try JSONDecoder().decode(CloudKitRecordIDArchive.self, from: JSONEncoder().encode(CloudKitRecordIDArchive(recordIDs: recordIDs)))
        #expect(idArchive.recordIDs == recordIDs)
        // Not read back: Canopy keeps an empty list as empty data, and reading that with
        // unarchiveTopLevelObjectWithData stops the program in swift-corelibs-foundation,
        // where Apple's Foundation throws (see the README's "Archiving").

        let subscription = QuerySubscription(recordType: "Note", predicate: try QueryPredicate(format: "index > %@", 5), subscriptionID: "later-notes", options: [.firesOnRecordCreation])
        subscription.zoneID = zoneID
        subscription.notificationInfo = NotificationInfo(alertBody: "New note", desiredKeys: ["title"])
        let subscriptionArchive = try JSONDecoder().decode(CloudKitSubscriptionArchive.self, from: JSONEncoder().encode(CloudKitSubscriptionArchive(subscription: subscription)))
        let restored = try #require(subscriptionArchive.subscription as? QuerySubscription)
        #expect(restored == subscription)
        #expect(restored.notificationInfo?.alertBody == "New note")
        let saved = try await api.modifySubscriptions(saving: [restored], deleting: nil).get()
        #expect(saved.savedSubscriptions.map(\.subscriptionID) == ["later-notes"])

        _ = try await api.modifyRecords(saving: notes(0..<5, in: zoneID), deleting: nil).get()
        let page = try await container.privateCloudDatabase.records(
          matching: Query(recordType: "Note", predicate: QueryPredicate(value: true)), inZoneWith: zoneID, resultsLimit: 2)
        let cursorArchive = try JSONDecoder().decode(CloudKitCursorArchive.self, from: JSONEncoder().encode(CloudKitCursorArchive(cursor: page.queryCursor)))
        let cursor = try #require(cursorArchive.cursor)
        let rest = try await container.privateCloudDatabase.records(continuingMatchFrom: cursor)
        #expect(rest.matchResults.count == 3)
        #expect(CloudKitCursorArchive(cursor: nil).cursor == nil)

        _ = try await api.fetchZoneChanges(recordZoneIDs: [zoneID], fetchMethod: .changeTokenOnly).get()
        let token = try #require(UserDefaultsTokenStore(defaults: defaults).tokenForRecordZoneID(zoneID))
        let tokenArchive = try JSONDecoder().decode(CloudKitServerChangeTokenArchive.self, from: JSONEncoder().encode(CloudKitServerChangeTokenArchive(token: token)))
        #expect(tokenArchive.token == token)
      }
    }
  }

  @Test("the container API answers the account status and the user's record ID; database APIs are made once per scope", arguments: TestEngine.all)
  func containerAPI(engine: TestEngine) async throws {
    try await withContainer(on: engine) { container in
      try await withDefaults { defaults in
        let canopy = canopy(container, defaults: defaults)
        let containerAPI = await canopy.containerAPI()
        #expect(try await containerAPI.accountStatus.get() == .available)
        let userID = try #require(try await containerAPI.userRecordID.get())
        #expect(userID.recordName.hasPrefix("_"))

        let first = await canopy.databaseAPI(usingDatabaseScope: .public)
        let second = await canopy.databaseAPI(usingDatabaseScope: .public)
        #expect(first === second)
        let record = Record(recordType: "Announcement", recordID: Record.ID(recordName: "welcome"))
        record["text"] = "hello"
        _ = try await first.modifyRecords(saving: [record], deleting: nil).get()
        let query = Query(recordType: "Announcement", predicate: QueryPredicate(value: true))
        let found = try await first.queryRecords(with: query, in: .default).get()
        #expect(found.map(\.recordID.recordName) == ["welcome"])
        #expect(found.first?.creatorUserRecordID?.recordName == CurrentUserDefaultName)
        // The private database of the same user does not see the public record.
        let privateAPI = await canopy.databaseAPI(usingDatabaseScope: .private)
        #expect(try await privateAPI.queryRecords(with: query, in: .default).get().isEmpty)
      }
    }
  }
}
