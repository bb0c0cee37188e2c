import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// NetNewsWire's CloudKit layer (Ranchero-Software/NetNewsWire, RSCore's CloudKitSync:
// `CloudKitZone.swift`, `CloudKitResult.swift`, `NetNewsWireCloudKitError.swift`, and the Account module's
// `CloudKitAccountZone.swift`), ported. It is the pattern of a whole class of apps: every call
// goes through an operation, and every failure is resolved the same way — `zoneNotFound` makes
// the zone and tries again, `CKErrorRetryAfterKey` waits, `limitExceeded` splits the batch into
// chunks of 200, `changeTokenExpired` drops the token and fetches everything, and a
// `serverRecordChanged` inside a partial failure of a "save if new" is success.
//
// What the port changes, mechanically: the `CK` prefix; `NSPredicate` → `QueryPredicate`
// (`try!` in the account zone's non-throwing helpers, as the README says); `os_log` → the small
// stand-in below (Linux has no os.log; not Stratus's concern); `url.md5String` (RSCore's
// `FoundationExtras`) → a stable FNV-1a hex name (no CommonCrypto on Linux). Left out:
// `receiveRemoteNotification(userInfo:)` (`CKRecordZoneNotification(fromRemoteNotificationDictionary:)`
// parses an APNs push, which a Linux server never receives; see "Not available" in the
// README), and `importOPML` (it reads RSParser's OPML types, not CloudKit). The change token
// lives in `userDefaults`, as NetNewsWire's later versions inject it, so each test has its own.

// MARK: - Linux stand-ins for os.log

struct OSLog {
    init(subsystem: String, category: String) {}
}
/// `os_log(.error, log: log, "%@ zone …", …)`: kept at the call sites, printed nowhere.
func os_log(_ type: OSLogType, log: OSLog, _ message: StaticString, _ arguments: Any...) {}

// MARK: - CloudKitError.swift (RSCore)

// `final class CloudKitError`: renamed, as the TableSynchronizer port in this module has one.
final class NetNewsWireCloudKitError: LocalizedError, @unchecked Sendable {

	let error: Error

	init(_ error: Error) {
		self.error = error
	}

	var errorDescription: String? {
		// guard let ckError = error as? CKError else {
		guard let ckError = error as? StratusError else {
			return error.localizedDescription
		}

		switch ckError.code {
		case .changeTokenExpired:
			return NSLocalizedString("Change Token Expired: The previous server change token is too old.", comment: "Change token expired")
		case .limitExceeded:
			return NSLocalizedString("Limit Exceeded: The request to the server is too large.", comment: "Limit exceeded")
		case .serverRecordChanged:
			return NSLocalizedString("Server Record Changed: The record was rejected because the version on the server is different.", comment: "Server record changed")
		case .unknownItem:
			return NSLocalizedString("Unknown Item: The specified record does not exist.", comment: "Unknown item")
		case .zoneNotFound:
			return NSLocalizedString("Zone Not Found: The specified record zone does not exist on the server.", comment: "Zone not found")
		default:
			return NSLocalizedString("Unhandled Error", comment: "Unknown iCloud Error")
		}
	}
}

// MARK: - CloudKitResult.swift (RSCore)

enum CloudKitZoneResult {
	case success
	case retry(afterSeconds: Double)
	case limitExceeded
	case changeTokenExpired
	// case partialFailure(errors: [AnyHashable: CKError])
	case partialFailure(errors: [AnyHashable: StratusError])
	case serverRecordChanged
	case zoneNotFound
	case userDeletedZone
	case failure(error: Error)

	static func resolve(_ error: Error?) -> CloudKitZoneResult {
		guard error != nil else { return .success }

		// guard let ckError = error as? CKError else {
		guard let ckError = error as? StratusError else {
			return .failure(error: error!)
		}

		switch ckError.code {
		case .serviceUnavailable, .requestRateLimited, .zoneBusy:
			// if let retry = ckError.userInfo[CKErrorRetryAfterKey] as? NSNumber {
			if let retry = ckError.userInfo[ErrorRetryAfterKey] as? NSNumber {
				return .retry(afterSeconds: retry.doubleValue)
			} else {
				return .failure(error: NetNewsWireCloudKitError(ckError))
			}
		case .zoneNotFound:
			return .zoneNotFound
		case .userDeletedZone:
			return .userDeletedZone
		case .changeTokenExpired:
			return .changeTokenExpired
		case .serverRecordChanged:
			return .serverRecordChanged
		case .partialFailure:
			// if let partialErrors = ckError.userInfo[CKPartialErrorsByItemIDKey] as? [AnyHashable: CKError] {
			if let partialErrors = ckError.userInfo[PartialErrorsByItemIDKey] as? [AnyHashable: StratusError] {
				if let zoneResult = anyRequestErrors(partialErrors) {
					return zoneResult
				} else {
					return .partialFailure(errors: partialErrors)
				}
			} else {
				return .failure(error: NetNewsWireCloudKitError(ckError))
			}
		case .limitExceeded:
			return .limitExceeded
		default:
			return .failure(error: NetNewsWireCloudKitError(ckError))
		}
	}
}

private extension CloudKitZoneResult {

	static func anyRequestErrors(_ errors: [AnyHashable: StratusError]) -> CloudKitZoneResult? {
		if errors.values.contains(where: { $0.code == .changeTokenExpired }) {
			return .changeTokenExpired
		}
		if errors.values.contains(where: { $0.code == .zoneNotFound }) {
			return .zoneNotFound
		}
		if errors.values.contains(where: { $0.code == .userDeletedZone }) {
			return .userDeletedZone
		}
		return nil
	}
}

// MARK: - CloudKitZone.swift (RSCore)

enum CloudKitZoneError: LocalizedError {
	case userDeletedZone
	case corruptAccount
	case unknown

	var errorDescription: String? {
		switch self {
		case .userDeletedZone:
			return NSLocalizedString("The iCloud data was deleted. Please remove the application iCloud account and add it again to continue using the application’s iCloud support.", comment: "User deleted zone.")
		case .corruptAccount:
			return NSLocalizedString("There is an unrecoverable problem with your application iCloud account.", comment: "Corrupt account.")
		default:
			return NSLocalizedString("An unexpected CloudKit error occurred.", comment: "An unexpected CloudKit error occurred.")
		}
	}
}

protocol CloudKitZoneDelegate: AnyObject {

	@MainActor func cloudKitDidModify(changed: [Record], deleted: [CloudKitRecordKey], completion: @escaping (Result<Void, Error>) -> Void)
}

// typealias CloudKitRecordKey = (recordType: CKRecord.RecordType, recordID: CKRecord.ID)
typealias CloudKitRecordKey = (recordType: Record.RecordType, recordID: Record.ID)

protocol CloudKitZone: AnyObject {

	static var qualityOfService: QualityOfService { get }

	var zoneID: RecordZone.ID { get }

	// `@MainActor var log: OSLog { get }`. Stratus's operation blocks are `@Sendable` (CloudKit's
	// are plain closures), so what a block reads must be reachable off the main actor: the log
	// and the defaults (the original's `UserDefaults.standard`, a global) are.
	nonisolated var log: OSLog { get }
	nonisolated var userDefaults: UserDefaults { get }

	@MainActor var container: Container? { get }
	@MainActor var database: Database? { get }
	@MainActor var delegate: CloudKitZoneDelegate? { get set }

	/// Reset the change token used to determine what point in time we are doing changes fetches
	@MainActor func resetChangeToken()

	/// Generates a new CKRecord.ID using a UUID for the record's name
	@MainActor func generateRecordID() -> Record.ID

	/// Subscribe to changes at a zone level
	@MainActor func subscribeToZoneChanges()
}

@MainActor extension CloudKitZone {

	nonisolated static var qualityOfService: QualityOfService {
		return .default
	}

	nonisolated var oldChangeTokenKey: String {
		return "cloudkit.server.token.\(zoneID.zoneName)"
	}

	nonisolated var changeTokenKey: String {
		return "cloudkit.server.token.\(zoneID.zoneName).\(zoneID.ownerName)"
	}

	// Set from the change fetch's blocks, which run on the operation's thread.
	nonisolated var changeToken: ServerChangeToken? {
		get {
			guard let tokenData = userDefaults.object(forKey: changeTokenKey) as? Data else { return nil }
			return try? NSKeyedUnarchiver.unarchivedObject(ofClass: ServerChangeToken.self, from: tokenData)
		}
		set {
			guard let token = newValue, let data = try? NSKeyedArchiver.archivedData(withRootObject: token, requiringSecureCoding: false) else {
				userDefaults.removeObject(forKey: changeTokenKey)
				return
			}
			userDefaults.set(data, forKey: changeTokenKey)
		}
	}

	/// Moves the change token to the new key name.  This can eventually be removed.
	func migrateChangeToken() {
		if let tokenData = userDefaults.object(forKey: oldChangeTokenKey) as? Data,
		   let oldChangeToken = try? NSKeyedUnarchiver.unarchivedObject(ofClass: ServerChangeToken.self, from: tokenData) {
			changeToken = oldChangeToken
			userDefaults.removeObject(forKey: oldChangeTokenKey)
		}
	}

	/// Reset the change token used to determine what point in time we are doing changes fetches
	func resetChangeToken() {
		changeToken = nil
	}

	func generateRecordID() -> Record.ID {
		return Record.ID(recordName: UUID().uuidString, zoneID: zoneID)
	}

	func delay(for seconds: Double) async {
		try? await Task.sleep(for: .seconds(1))
	}

	nonisolated func retryIfPossible(after: Double, block: @escaping @Sendable @MainActor () -> ()) {
		let delayTime = DispatchTime.now() + after
		DispatchQueue.main.asyncAfter(deadline: delayTime, execute: {
			Task { @MainActor in
				block()
			}
		})
	}

	/// Retrieves the zone record for this zone only. If the record isn't found it will be created.
	func fetchZoneRecord(completion: @escaping @Sendable (Result<RecordZone?, Error>) -> Void) {

		let op = FetchRecordZonesOperation(recordZoneIDs: [zoneID])
		op.qualityOfService = Self.qualityOfService

		// `var zoneRecords`: `nonisolated(unsafe)`, as a `@Sendable` block mutates it; an
		// operation's blocks run one at a time, the final block last.
		nonisolated(unsafe) var zoneRecords = [RecordZone.ID : RecordZone]()

		op.perRecordZoneResultBlock = { recordZoneID, recordZoneResult in

			switch recordZoneResult {

			case .success(let recordZone):
				zoneRecords[recordZoneID] = recordZone

			case .failure(let error):
				completion(.failure(NetNewsWireCloudKitError(error)))
			}
		}

		op.fetchRecordZonesResultBlock = { [weak self] result in

			Task { @MainActor in

				guard let self else {
					completion(.failure(CloudKitZoneError.unknown))
					return
				}

				switch result {

				case .success:
					completion(.success(zoneRecords[self.zoneID]))

				case .failure(let error):

					switch CloudKitZoneResult.resolve(error) {
					case .zoneNotFound, .userDeletedZone:

						do {
							let recordZone = try await self.createZoneRecord()
							completion(.success(recordZone))
						} catch {
							completion(.failure(error))
						}

					case .retry(let timeToWait):
						os_log(.error, log: self.log, "%@ zone fetch changes retry in %f seconds.", self.zoneID.zoneName, timeToWait)
						await self.delay(for: timeToWait)
						self.fetchZoneRecord(completion: completion)
					default:
						DispatchQueue.main.async {
							completion(.failure(NetNewsWireCloudKitError(error)))
						}
					}
				}
			}
		}

		database?.add(op)
	}

	/// Creates the zone record
	func createZoneRecord() async throws -> RecordZone {

		guard let database else { throw CloudKitZoneError.unknown }

		do {
			return try await database.save(RecordZone(zoneID: zoneID))
		} catch {
			throw NetNewsWireCloudKitError(error)
		}
	}

	/// Subscribes to zone changes
	func subscribeToZoneChanges() {

		Task { @MainActor in
			let subscription = RecordZoneSubscription(zoneID: zoneID, subscriptionID: zoneID.zoneName)

			// let info = CKSubscription.NotificationInfo()
			let info = Subscription.NotificationInfo()
			info.shouldSendContentAvailable = true
			subscription.notificationInfo = info

			do {
				_ = try await save(subscription)
			} catch {
				os_log(.error, log: self.log, "%@ zone subscribe to changes error: %@", self.zoneID.zoneName, error.localizedDescription)
			}
		}
	}

	/// Issue a CKQuery and return the resulting CKRecords.
	func query(_ ckQuery: Query, desiredKeys: [String]? = nil) async throws -> [Record] {

		try await withCheckedThrowingContinuation { continuation in
			Task { @MainActor in
				self.query(ckQuery, desiredKeys: desiredKeys) { result in
					switch result {
					case .success(let records):
						continuation.resume(returning: records)
					case .failure(let error):
						continuation.resume(throwing: error)
					}
				}
			}
		}
	}

	/// Issue a CKQuery and return the resulting CKRecords.
	func query(_ ckQuery: Query, desiredKeys: [String]? = nil, completion: @escaping @Sendable (Result<[Record], Error>) -> Void) {
		nonisolated(unsafe) var records = [Record]()  // `var records`, as above

		let op = QueryOperation(query: ckQuery)
		op.qualityOfService = Self.qualityOfService

		if let desiredKeys = desiredKeys {
			op.desiredKeys = desiredKeys
		}

		op.recordMatchedBlock = { recordID, recordResult in
			switch recordResult {
			case .success(let record):
				records.append(record)
			case .failure(let error):
				os_log(.error, log: self.log, "query recordMatchedBlock error recordID: %@ error: %@", recordID, error.localizedDescription)
			}
		}

		op.queryResultBlock = { [weak self] result in

			Task { @MainActor in

				guard let self else {
					completion(.failure(CloudKitZoneError.unknown))
					return
				}

				switch result {

				case .success(let cursor):
					if let cursor {
						self.query(cursor: cursor, desiredKeys: desiredKeys, carriedRecords: records, completion: completion)
					} else {
						completion(.success(records))
					}

				case .failure(let error):

					switch CloudKitZoneResult.resolve(error) {

					case .zoneNotFound:
						do {
							_ = try await self.createZoneRecord()
							self.query(ckQuery, desiredKeys: desiredKeys, completion: completion)
						} catch {
							completion(.failure(error))
						}

					case .retry(let timeToWait):
						os_log(.error, log: self.log, "%@ zone query retry in %f seconds.", self.zoneID.zoneName, timeToWait)
						await self.delay(for: timeToWait)
						self.query(ckQuery, desiredKeys: desiredKeys, completion: completion)

					case .userDeletedZone:
						completion(.failure(CloudKitZoneError.userDeletedZone))

					default:
						completion(.failure(NetNewsWireCloudKitError(error)))
					}
				}
			}
		}

		database?.add(op)
	}

	/// Query CKRecords using a CKQuery Cursor
	func query(cursor: QueryOperation.Cursor, desiredKeys: [String]? = nil, carriedRecords: [Record], completion: @escaping @Sendable (Result<[Record], Error>) -> Void) {
		nonisolated(unsafe) var records = carriedRecords  // `var records`, as above

		let op = QueryOperation(cursor: cursor)
		op.qualityOfService = Self.qualityOfService

		if let desiredKeys = desiredKeys {
			op.desiredKeys = desiredKeys
		}

		op.recordMatchedBlock = { recordID, recordResult in
			switch recordResult {
			case .success(let record):
				records.append(record)
			case .failure(let error):
				os_log(.error, log: self.log, "query cursor recordMatchedBlock error recordID: %@ error: %@", recordID, error.localizedDescription)
			}
		}

		op.queryResultBlock = { [weak self] result in

			Task { @MainActor in

				guard let self else {
					completion(.failure(CloudKitZoneError.unknown))
					return
				}

				switch result {

				case .success(let newCursor):
					if let newCursor = newCursor {
						self.query(cursor: newCursor, desiredKeys: desiredKeys, carriedRecords: records, completion: completion)
					} else {
						completion(.success(records))
					}

				case .failure(let error):

					switch CloudKitZoneResult.resolve(error) {

					case .zoneNotFound:

						do {
							_ = try await self.createZoneRecord()
							self.query(cursor: cursor, desiredKeys: desiredKeys, carriedRecords: records, completion: completion)
						} catch {
							completion(.failure(error))
						}

					case .retry(let timeToWait):
						os_log(.error, log: self.log, "%@ zone query retry in %f seconds.", self.zoneID.zoneName, timeToWait)
						await self.delay(for: timeToWait)
						self.query(cursor: cursor, desiredKeys: desiredKeys, carriedRecords: records, completion: completion)

					case .userDeletedZone:
						completion(.failure(CloudKitZoneError.userDeletedZone))

					default:
						completion(.failure(NetNewsWireCloudKitError(error)))
					}
				}
			}
		}

		database?.add(op)
	}

	/// Fetch a CKRecord by using its externalID
	func fetch(externalID: String?) async throws -> Record {

		guard let externalID else { throw CloudKitZoneError.corruptAccount }
		guard let database else { throw CloudKitZoneError.unknown }

		let recordID = Record.ID(recordName: externalID, zoneID: zoneID)

		do {
			return try await database.record(for: recordID)
		} catch {

			switch CloudKitZoneResult.resolve(error) {

			case .zoneNotFound:

				do {
					_ = try await self.createZoneRecord()
					return try await fetch(externalID: externalID)
				} catch {
					throw error
				}

			case .retry(let timeToWait):
				os_log(.error, log: self.log, "%@ zone fetch retry in %f seconds.", self.zoneID.zoneName, timeToWait)
				await delay(for: timeToWait)
				return try await fetch(externalID: externalID)

			case .userDeletedZone:
				throw CloudKitZoneError.userDeletedZone

			default:
				throw NetNewsWireCloudKitError(error)
			}
		}
	}

	/// Save the CKRecord
	func save(_ record: Record) async throws {

		try await withCheckedThrowingContinuation { continuation in
			self.save(record) { result in
				switch result {
				case .success:
					continuation.resume()
				case .failure(let error):
					continuation.resume(throwing: error)
				}
			}
		}
	}

	/// Save the CKRecord
	func save(_ record: Record, completion: @escaping @Sendable (Result<Void, Error>) -> Void) {
		modify(recordsToSave: [record], recordIDsToDelete: [], completion: completion)
	}

	/// Save the CKRecords
	func save(_ records: [Record]) async throws {

		try await withCheckedThrowingContinuation { continuation in
			self.save(records) { result in
				switch result {
				case .success:
					continuation.resume()
				case .failure(let error):
					continuation.resume(throwing: error)
				}
			}
		}
	}

	/// Save the CKRecords
	func save(_ records: [Record], completion: @escaping @Sendable (Result<Void, Error>) -> Void) {
		modify(recordsToSave: records, recordIDsToDelete: [], completion: completion)
	}

	/// Saves or modifies the records as long as they are unchanged relative to the local version
	func saveIfNew(_ records: [Record]) async throws {

		try await withCheckedThrowingContinuation { continuation in
			self.saveIfNew(records) { result in
				switch result {
				case .success:
					continuation.resume()
				case .failure(let error):
					continuation.resume(throwing: error)
				}
			}
		}
	}

	/// Saves or modifies the records as long as they are unchanged relative to the local version
	func saveIfNew(_ records: [Record], completion: @escaping (Result<Void, Error>) -> Void) {

		let op = ModifyRecordsOperation(recordsToSave: records, recordIDsToDelete: [Record.ID]())
		op.savePolicy = .ifServerRecordUnchanged
		op.isAtomic = false
		op.qualityOfService = Self.qualityOfService

		op.modifyRecordsResultBlock = { [weak self] result in

			guard let self else {
				completion(.failure(CloudKitZoneError.unknown))
				return
			}

			Task { @MainActor in

				switch result {

				case .success:
					completion(.success(()))

				case .failure(let error):

					switch CloudKitZoneResult.resolve(error) {
					case .success, .partialFailure:
						completion(.success(()))

					case .zoneNotFound:

						do {
							_ = try await self.createZoneRecord()
							self.saveIfNew(records, completion: completion)
						} catch {
							completion(.failure(error))
						}

					case .userDeletedZone:
						completion(.failure(CloudKitZoneError.userDeletedZone))

					case .retry(let timeToWait):
						self.retryIfPossible(after: timeToWait) {
							self.saveIfNew(records, completion: completion)
						}

					case .limitExceeded:

						var chunkedRecords = records.chunked(into: 200)

						@MainActor func saveChunksIfNew() {
							if let records = chunkedRecords.popLast() {
								self.saveIfNew(records) { result in
									switch result {
									case .success:
										os_log(.info, log: self.log, "Saved %d chunked new records.", records.count)
										saveChunksIfNew()
									case .failure(let error):
										completion(.failure(error))
									}
								}
							} else {
								completion(.success(()))
							}
						}

						saveChunksIfNew()

					default:
						completion(.failure(NetNewsWireCloudKitError(error)))
					}
				}
			}
		}

		database?.add(op)
	}

	/// Save the CKSubscription
	func save(_ subscription: Subscription) async throws -> Subscription {

		guard let database else { throw CloudKitZoneError.unknown }

		do {
			return try await database.save(subscription)

		} catch {

			switch CloudKitZoneResult.resolve(error) {

			case .zoneNotFound:
				_ = try await createZoneRecord()
				return try await save(subscription)

			case .retry(let timeToWait):
				os_log(.error, log: self.log, "%@ zone save subscription retry in %f seconds.", self.zoneID.zoneName, timeToWait)
				await delay(for: timeToWait)
				return try await save(subscription)

			default:
				throw NetNewsWireCloudKitError(error)
			}
		}
	}

	/// Delete CKRecords using a CKQuery
	func delete(ckQuery: Query) async throws {

		try await withCheckedThrowingContinuation { continuation in
			self.delete(ckQuery: ckQuery) { result in
				switch result {
				case .success:
					continuation.resume()
				case .failure(let error):
					continuation.resume(throwing: error)
				}
			}
		}
	}

	/// Delete CKRecords using a CKQuery
	func delete(ckQuery: Query, completion: @escaping @Sendable (Result<Void, Error>) -> Void) {

		nonisolated(unsafe) var records = [Record]()  // `var records`, as above

		let op = QueryOperation(query: ckQuery)
		op.qualityOfService = Self.qualityOfService

		op.recordMatchedBlock = { recordID, recordResult in
			switch recordResult {
			case .success(let record):
				records.append(record)
			case .failure(let error):
				os_log(.error, log: self.log, "delete query recordMatchedBlock error recordID: %@ error: %@", recordID, error.localizedDescription)
			}
		}

		op.queryResultBlock = { [weak self] result in

			guard let self else {
				completion(.failure(CloudKitZoneError.unknown))
				return
			}

			// Stratus: the original calls its main-actor methods here directly, which a
			// `@Sendable` block cannot; it hops as NetNewsWire's other result blocks do.
			Task { @MainActor in
			switch result {

			case .success(let cursor):
				if let cursor = cursor {
					self.delete(cursor: cursor, carriedRecords: records, completion: completion)
				} else {
					guard !records.isEmpty else {
						DispatchQueue.main.async {
							completion(.success(()))
						}
						return
					}

					let recordIDs = records.map { $0.recordID }
					self.modify(recordsToSave: [], recordIDsToDelete: recordIDs, completion: completion)
				}

			case .failure(let error):
				completion(.failure(error))
			}
			}
		}

		database?.add(op)
	}

	/// Delete CKRecords using a CKQuery
	func delete(cursor: QueryOperation.Cursor, carriedRecords: [Record], completion: @escaping @Sendable (Result<Void, Error>) -> Void) {

		nonisolated(unsafe) var records = [Record]()  // `var records`, as above

		let op = QueryOperation(cursor: cursor)
		op.qualityOfService = Self.qualityOfService

		op.recordMatchedBlock = { recordID, recordResult in
			switch recordResult {
			case .success(let record):
				records.append(record)
			case .failure(let error):
				os_log(.error, log: self.log, "delete cursor recordMatchedBlock error recordID: %@ error: %@", recordID, error.localizedDescription)
			}
		}

		op.queryResultBlock = { [weak self] result in

			guard let self else {
				completion(.failure(CloudKitZoneError.unknown))
				return
			}

			Task { @MainActor in  // Stratus: as in delete(ckQuery:)
			switch result {

			case .success(let cursor):

				records.append(contentsOf: carriedRecords)

				if let cursor {
					self.delete(cursor: cursor, carriedRecords: records, completion: completion)
				} else {
					let recordIDs = records.map { $0.recordID }
					self.modify(recordsToSave: [], recordIDsToDelete: recordIDs, completion: completion)
				}

			case .failure(let error):
				completion(.failure(error))
			}
			}
		}

		database?.add(op)
	}

	/// Delete a CKRecord using its externalID
	func delete(externalID: String?) async throws {

		try await withCheckedThrowingContinuation { continuation in
			self.delete(externalID: externalID) { result in
				switch result {
				case .success:
					continuation.resume()
				case .failure(let error):
					continuation.resume(throwing: error)
				}
			}
		}
	}

	/// Delete a CKRecord using its externalID
	func delete(externalID: String?, completion: @escaping @Sendable (Result<Void, Error>) -> Void) {
		guard let externalID = externalID else {
			completion(.failure(CloudKitZoneError.corruptAccount))
			return
		}

		let recordID = Record.ID(recordName: externalID, zoneID: zoneID)
		modify(recordsToSave: [], recordIDsToDelete: [recordID], completion: completion)
	}

	/// Delete a CKSubscription
	func delete(subscriptionID: String) async throws {

		guard let database else { throw CloudKitZoneError.unknown }

		do {
			_ = try await database.deleteSubscription(withID: subscriptionID)
		} catch {

			switch CloudKitZoneResult.resolve(error) {

			case .retry(let timeToWait):
				os_log(.error, log: self.log, "%@ zone delete subscription retry in %f seconds.", self.zoneID.zoneName, timeToWait)
				await self.delay(for: timeToWait)
				try await delete(subscriptionID: subscriptionID)

			default:
				throw NetNewsWireCloudKitError(error)
			}
		}
	}

	/// Modify and delete the supplied CKRecords and CKRecord.IDs
	func modify(recordsToSave: [Record], recordIDsToDelete: [Record.ID]) async throws {

		try await withCheckedThrowingContinuation { continuation in
			self.modify(recordsToSave: recordsToSave, recordIDsToDelete: recordIDsToDelete) { result in
				switch result {
				case .success:
					continuation.resume()
				case .failure(let error):
					continuation.resume(throwing: error)
				}
			}
		}
	}

	/// Modify and delete the supplied CKRecords and CKRecord.IDs
	func modify(recordsToSave: [Record], recordIDsToDelete: [Record.ID], completion: @escaping @Sendable (Result<Void, Error>) -> Void) {

		guard !(recordsToSave.isEmpty && recordIDsToDelete.isEmpty) else {
			DispatchQueue.main.async {
				completion(.success(()))
			}
			return
		}

		let op = ModifyRecordsOperation(recordsToSave: recordsToSave, recordIDsToDelete: recordIDsToDelete)
		op.savePolicy = .changedKeys
		op.isAtomic = true
		op.qualityOfService = Self.qualityOfService

		op.modifyRecordsResultBlock = { [weak self] result in

			guard let self else {
				completion(.failure(CloudKitZoneError.unknown))
				return
			}

			switch result {

			case .success:
				DispatchQueue.main.async {
					completion(.success(()))
				}

			case .failure(let error):

				switch CloudKitZoneResult.resolve(error) {
				case .success:
					DispatchQueue.main.async {
						completion(.success(()))
					}
				case .zoneNotFound:

					Task { @MainActor in
						do {
							_ = try await self.createZoneRecord()
							self.modify(recordsToSave: recordsToSave, recordIDsToDelete: recordIDsToDelete, completion: completion)
						} catch {
							completion(.failure(error))
						}
					}

				case .userDeletedZone:
					DispatchQueue.main.async {
						completion(.failure(CloudKitZoneError.userDeletedZone))
					}
				case .retry(let timeToWait):
					os_log(.error, log: self.log, "%@ zone modify retry in %f seconds.", self.zoneID.zoneName, timeToWait)
					self.retryIfPossible(after: timeToWait) {
						self.modify(recordsToSave: recordsToSave, recordIDsToDelete: recordIDsToDelete, completion: completion)
					}
				case .limitExceeded:
					var recordToSaveChunks = recordsToSave.chunked(into: 200)
					var recordIDsToDeleteChunks = recordIDsToDelete.chunked(into: 200)

					@MainActor func saveChunks(completion: @escaping (Result<Void, Error>) -> Void) {
						if !recordToSaveChunks.isEmpty {
							let records = recordToSaveChunks.removeFirst()

							Task { @MainActor in
								do {
									try await self.modify(recordsToSave: records, recordIDsToDelete: [])
									os_log(.info, log: self.log, "Saved %d chunked records.", records.count)
									saveChunks(completion: completion)
								} catch {
									completion(.failure(error))
								}
							}
						} else {
							completion(.success(()))
						}
					}

					func deleteChunks() {
						if !recordIDsToDeleteChunks.isEmpty {
							let records = recordIDsToDeleteChunks.removeFirst()

							Task { @MainActor in

								do {
									try await self.modify(recordsToSave: [], recordIDsToDelete: records)
									os_log(.info, log: self.log, "Deleted %d chunked records.", records.count)
									deleteChunks()
								} catch {
									completion(.failure(error))
								}
							}

						} else {
							DispatchQueue.main.async {
								completion(.success(()))
							}
						}
					}

					Task { @MainActor in
						saveChunks() { result in
							switch result {
							case .success:
								deleteChunks()
							case .failure(let error):
								DispatchQueue.main.async {
									completion(.failure(error))
								}
							}
						}
					}

				default:
					DispatchQueue.main.async {
						completion(.failure(NetNewsWireCloudKitError(error)))
					}
				}
			}
		}

		database?.add(op)
	}

	/// Fetch all the changes in the CKZone since the last time we checked
	func fetchChangesInZone() async throws {

		try await withCheckedThrowingContinuation { continuation in
			self.fetchChangesInZone { result in
				switch result {
				case .success:
					continuation.resume()
				case .failure(let error):
					continuation.resume(throwing: error)
				}
			}
		}
	}

	/// Fetch all the changes in the CKZone since the last time we checked
	func fetchChangesInZone(completion: @escaping (Result<Void, Error>) -> Void) {

		guard let database else {
			completion(.failure(CloudKitZoneError.unknown))
			return
		}

		nonisolated(unsafe) var changedRecords = [Record]()  // `var changedRecords`, as above
		nonisolated(unsafe) var deletedRecordKeys = [CloudKitRecordKey]()

		let zoneConfig = FetchRecordZoneChangesOperation.ZoneConfiguration()
		zoneConfig.previousServerChangeToken = changeToken
		let op = FetchRecordZoneChangesOperation(recordZoneIDs: [zoneID], configurationsByRecordZoneID: [zoneID: zoneConfig])
		op.fetchAllChanges = true
		op.qualityOfService = Self.qualityOfService

		op.recordZoneChangeTokensUpdatedBlock = { zoneID, token, _ in
			self.changeToken = token
		}

		op.recordWasChangedBlock = { recordID, result in

			if let record = try? result.get() {
				changedRecords.append(record)
			}
		}

		op.recordWithIDWasDeletedBlock = { recordID, recordType in
			let recordKey = CloudKitRecordKey(recordType: recordType, recordID: recordID)
			deletedRecordKeys.append(recordKey)
		}

		op.recordZoneFetchResultBlock = { recordZoneID, result in

			if let (token, _, _) = try? result.get() {
				self.changeToken = token
			}
		}

		op.fetchRecordZoneChangesResultBlock = { [weak self] result in

			guard let self else {
				completion(.failure(CloudKitZoneError.unknown))
				return
			}

			Task { @MainActor in

				switch result {

				case .success:
					self.delegate?.cloudKitDidModify(changed: changedRecords, deleted: deletedRecordKeys, completion: completion)

				case .failure(let error):

					switch CloudKitZoneResult.resolve(error) {
					case .zoneNotFound:

						do {
							_ = try await self.createZoneRecord()
							self.fetchChangesInZone(completion: completion)
						} catch {
							completion(.failure(error))
						}

					case .userDeletedZone:
						completion(.failure(CloudKitZoneError.userDeletedZone))

					case .retry(let timeToWait):
						os_log(.error, log: self.log, "%@ zone fetch changes retry in %f seconds.", self.zoneID.zoneName, timeToWait)
						await self.delay(for: timeToWait)
						self.fetchChangesInZone(completion: completion)

					case .changeTokenExpired:
						self.changeToken = nil
						self.fetchChangesInZone(completion: completion)

					default:
						completion(.failure(NetNewsWireCloudKitError(error)))
					}
				}
			}
		}

		database.add(op)
	}
}

// RSCore's `Array.chunked(into:)`.
extension Array {
	func chunked(into size: Int) -> [[Element]] {
		return stride(from: 0, to: count, by: size).map {
			Array(self[$0 ..< Swift.min($0 + size, count)])
		}
	}
}

// RSCore's `CKRecord.externalID`.
extension Record {
	var externalID: String {
		return recordID.recordName
	}
}

// MARK: - CloudKitAccountZone.swift (Account)

enum CloudKitAccountZoneError: LocalizedError {
	case unknown
	var errorDescription: String? {
		return NSLocalizedString("An unexpected CloudKit error occurred.", comment: "An unexpected CloudKit error occurred.")
	}
}

@MainActor final class CloudKitAccountZone: CloudKitZone {

	let zoneID: RecordZone.ID

	let log = OSLog(subsystem: "com.ranchero.NetNewsWire", category: "CloudKit")
	// `let userDefaults`: read from the blocks (see CloudKitZone); UserDefaults is thread-safe,
	// though swift-corelibs-foundation does not mark it Sendable.
	nonisolated(unsafe) let userDefaults: UserDefaults

	weak var container: Container?
	weak var database: Database?
	var delegate: CloudKitZoneDelegate?

	struct CloudKitFeed {
		static let recordType = "AccountWebFeed"
		struct Fields {
			static let url = "url"
			static let name = "name"
			static let editedName = "editedName"
			static let homePageURL = "homePageURL"
			static let containerExternalIDs = "containerExternalIDs"
		}
	}

	struct CloudKitContainer {
		static let recordType = "AccountContainer"
		struct Fields {
			static let isAccount = "isAccount"
			static let name = "name"
		}
	}

	init(container: Container, userDefaults: UserDefaults) {
		self.container = container
		self.database = container.privateCloudDatabase
		self.zoneID = RecordZone.ID(zoneName: "Account", ownerName: CurrentUserDefaultName)
		self.userDefaults = userDefaults
		migrateChangeToken()
	}

	///  Persist a web feed record to iCloud and return the external key
	func createFeed(url: String, name: String?, editedName: String?, homePageURL: String?, containerExternalID: String) async throws -> String {

		let recordID = Record.ID(recordName: url.md5String, zoneID: zoneID)
		let record = Record(recordType: CloudKitFeed.recordType, recordID: recordID)
		record[CloudKitFeed.Fields.url] = url
		record[CloudKitFeed.Fields.name] = name
		if let editedName = editedName {
			record[CloudKitFeed.Fields.editedName] = editedName
		}
		if let homePageURL = homePageURL {
			record[CloudKitFeed.Fields.homePageURL] = homePageURL
		}

		record[CloudKitFeed.Fields.containerExternalIDs] = [containerExternalID]

		try await save(record)
		return record.externalID
	}

	/// Rename the given web feed
	func renameFeed(externalID: String, editedName: String?) async throws {

		let recordID = Record.ID(recordName: externalID, zoneID: zoneID)
		let record = Record(recordType: CloudKitFeed.recordType, recordID: recordID)
		record[CloudKitFeed.Fields.editedName] = editedName

		try await save(record)
	}

	/// Removes a web feed from a container and optionally deletes it, returning true if deleted
	@discardableResult
	func removeFeed(externalID: String, from containerExternalID: String) async throws -> Bool {

		do {
			let record = try await fetch(externalID: externalID)

			if let containerExternalIDs = record[CloudKitFeed.Fields.containerExternalIDs] as? [String] {

				var containerExternalIDSet = Set(containerExternalIDs)
				containerExternalIDSet.remove(containerExternalID)

				if containerExternalIDSet.isEmpty {
					try await delete(externalID: externalID)
					return true
				} else {
					record[CloudKitFeed.Fields.containerExternalIDs] = Array(containerExternalIDSet)
					try await save(record)
					return false
				}
			}

			return false
		} catch {
			// if let ckError = ((error as? NetNewsWireCloudKitError)?.error as? CKError), ckError.code == .unknownItem {
			if let ckError = ((error as? NetNewsWireCloudKitError)?.error as? StratusError), ckError.code == .unknownItem {
				return true
			} else {
				throw error
			}
		}
	}

	func addFeed(externalID: String, to containerExternalID: String) async throws {

		let record = try await fetch(externalID: externalID)

		if let containerExternalIDs = record[CloudKitFeed.Fields.containerExternalIDs] as? [String] {
			var containerExternalIDSet = Set(containerExternalIDs)
			containerExternalIDSet.insert(containerExternalID)
			record[CloudKitFeed.Fields.containerExternalIDs] = Array(containerExternalIDSet)
			try await save(record)
		}
	}

	func findFeedExternalIDs(for folderExternalID: String) async throws -> [String] {

		// let predicate = NSPredicate(format: "containerExternalIDs CONTAINS %@", folderExternalID)
		let predicate = try QueryPredicate(format: "containerExternalIDs CONTAINS %@", folderExternalID)
		let ckQuery = Query(recordType: CloudKitFeed.recordType, predicate: predicate)

		let records = try await query(ckQuery)

		let feedExternalIDs = records.map { $0.externalID }
		return feedExternalIDs
	}

	func findOrCreateAccount() async throws -> String {

		try await withCheckedThrowingContinuation { continuation in

			self.findOrCreateAccount { result in
				switch result {
				case .success(let externalID):
					continuation.resume(returning: externalID)
				case .failure(let error):
					continuation.resume(throwing: error)
				}
			}
		}
	}

	private func findOrCreateAccount(completion: @escaping @Sendable (Result<String, Error>) -> Void) {
		// let predicate = NSPredicate(format: "isAccount = \"1\"")
		let predicate = try! QueryPredicate(format: "isAccount = \"1\"")
		let ckQuery = Query(recordType: CloudKitContainer.recordType, predicate: predicate)
		guard let database else {
			completion(.failure(CloudKitZoneError.unknown))
			return
		}

		// resultsLimit: CKQueryOperation.maximumResults
		database.fetch(withQuery: ckQuery, inZoneWith: zoneID, desiredKeys: nil, resultsLimit: QueryOperation.maximumResults) { [weak self] result in
			Task { @MainActor [weak self] in
				guard let self else {
					completion(.failure(CloudKitZoneError.unknown))
					return
				}

				switch result {
				case .success(let (matchResults, _)):
					var records = [Record]()
					for (_, result) in matchResults {
						do {
							records.append(try result.get())
						} catch {
							completion(.failure(error))
							return
						}
					}
					if !records.isEmpty {
						completion(.success(records[0].externalID))
					} else {
						do {
							let externalID = try await self.createContainer(name: "Account", isAccount: true)
							completion(.success(externalID))
						} catch {
							completion(.failure(error))
						}
					}

				case .failure(let error):
					switch CloudKitZoneResult.resolve(error) {
					case .retry(let timeToWait):
						self.retryIfPossible(after: timeToWait) {
							self.findOrCreateAccount(completion: completion)
						}

					case .zoneNotFound, .userDeletedZone:
						do {
							_ = try await self.createZoneRecord()
							self.findOrCreateAccount(completion: completion)
						} catch {
							completion(.failure(error))
						}

					default:
						do {
							let externalID = try await self.createContainer(name: "Account", isAccount: true)
							completion(.success(externalID))
						} catch {
							completion(.failure(error))
						}
					}
				}
			}
		}
	}

	func createFolder(name: String) async throws -> String {

		return try await createContainer(name: name, isAccount: false)
	}

	func renameFolder(externalID: String, to name: String) async throws {

		let recordID = Record.ID(recordName: externalID, zoneID: zoneID)
		let record = Record(recordType: CloudKitContainer.recordType, recordID: recordID)
		record[CloudKitContainer.Fields.name] = name

		try await save(record)
	}

	func removeFolder(externalID: String) async throws {

		try await delete(externalID: externalID)
	}
}

private extension CloudKitAccountZone {

	func createContainer(name: String, isAccount: Bool) async throws -> String {

		let record = Record(recordType: CloudKitContainer.recordType, recordID: generateRecordID())
		record[CloudKitContainer.Fields.name] = name
		record[CloudKitContainer.Fields.isAccount] = isAccount ? "1" : "0"

		try await save(record)
		return record.externalID
	}
}

// Stands in for FoundationExtras' `String.md5String`: a stable name per URL.
extension String {
	var md5String: String {
		var hash: UInt64 = 0xcbf2_9ce4_8422_2325
		for byte in utf8 {
			hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
		}
		return String(hash, radix: 16)
	}
}

// MARK: - Tests

/// NetNewsWire's account delegate: it hears what `fetchChangesInZone` found.
@MainActor final class AccountChangesCollector: CloudKitZoneDelegate {
	var changed: [Record] = []
	var deleted: [CloudKitRecordKey] = []

	func cloudKitDidModify(changed: [Record], deleted: [CloudKitRecordKey], completion: @escaping (Result<Void, Error>) -> Void) {
		self.changed.append(contentsOf: changed)
		self.deleted.append(contentsOf: deleted)
		completion(.success(()))
	}
}

/// Runs `body` with an account zone on a fresh store and its own defaults domain.
@MainActor func withAccountZone(on engine: TestEngine, _ body: @MainActor (CloudKitAccountZone, Container) async throws -> Void) async throws {
	try await withContainer(on: engine) { container in
		let suite = "stratus-netnewswire-\(UUID().uuidString)"
		let defaults = UserDefaults(suiteName: suite)!
		defer { defaults.removePersistentDomain(forName: suite) }
		let zone = CloudKitAccountZone(container: container, userDefaults: defaults)
		try await body(zone, container)
	}
}

@Suite("NetNewsWire's CloudKitZone and account zone, ported")
@MainActor struct NetNewsWireZoneTests {

	@Test("on a new account the zone is missing: the query's zoneNotFound makes the zone, and the account record is created once", arguments: TestEngine.all)
	func findOrCreateAccount(engine: TestEngine) async throws {
		try await withAccountZone(on: engine) { zone, container in
			let database = container.privateCloudDatabase
			await #expect(throws: StratusError.self) { _ = try await database.recordZone(for: zone.zoneID) }

			let account = try await zone.findOrCreateAccount()
			#expect(try await database.recordZone(for: zone.zoneID).zoneID == zone.zoneID)
			let record = try await database.record(for: Record.ID(recordName: account, zoneID: zone.zoneID))
			#expect(record.recordType == "AccountContainer")
			#expect(record["isAccount"] as? String == "1")

			// A second launch finds it: `isAccount = "1"` matches the stored string.
			#expect(try await zone.findOrCreateAccount() == account)
		}
	}

	@Test("feeds: createFeed, renameFeed saves a fresh record under .changedKeys and keeps the other fields, CONTAINS on a list, removeFeed", arguments: TestEngine.all)
	func feedLifecycle(engine: TestEngine) async throws {
		try await withAccountZone(on: engine) { zone, container in
			let account = try await zone.findOrCreateAccount()
			let folder = try await zone.createFolder(name: "Swift")

			let feed = try await zone.createFeed(url: "https://example.com/feed.xml", name: "Example", editedName: nil,
			                                     homePageURL: "https://example.com", containerExternalID: account)
			try await zone.addFeed(externalID: feed, to: folder)
			#expect(try await zone.findFeedExternalIDs(for: folder) == [feed])
			#expect(try await zone.findFeedExternalIDs(for: account) == [feed])

			// renameFeed saves `CKRecord(recordType:recordID:)` with only `editedName` set, no
			// change tag: `.changedKeys` writes that key and leaves url and name as stored.
			try await zone.renameFeed(externalID: feed, editedName: "Renamed")
			let renamed = try await zone.fetch(externalID: feed)
			#expect(renamed["editedName"] as? String == "Renamed")
			#expect(renamed["url"] as? String == "https://example.com/feed.xml")
			#expect(renamed["name"] as? String == "Example")
			#expect((renamed["containerExternalIDs"] as? [String]).map(Set.init) == [account, folder])

			try await zone.renameFolder(externalID: folder, to: "Swift & Co")
			let folderRecord = try await container.privateCloudDatabase.record(for: Record.ID(recordName: folder, zoneID: zone.zoneID))
			#expect(folderRecord["name"] as? String == "Swift & Co")
			#expect(folderRecord["isAccount"] as? String == "0")

			// Out of one folder it stays; out of the last it is deleted; a missing one's
			// `unknownItem` (inside NetNewsWireCloudKitError) counts as deleted.
			#expect(try await zone.removeFeed(externalID: feed, from: folder) == false)
			#expect(try await zone.findFeedExternalIDs(for: folder) == [])
			#expect(try await zone.removeFeed(externalID: feed, from: account) == true)
			#expect(try await zone.removeFeed(externalID: feed, from: account) == true)
			await #expect(throws: StratusError.self) { _ = try await container.privateCloudDatabase.record(for: Record.ID(recordName: feed, zoneID: zone.zoneID)) }
		}
	}

	@Test("a save into the missing zone: partialFailure with zoneNotFound items resolves to .zoneNotFound, the zone is made, the save retried", arguments: TestEngine.all)
	func saveMakesTheZone(engine: TestEngine) async throws {
		try await withAccountZone(on: engine) { zone, container in
			let partial = try await Self.saveError(in: container, zoneID: zone.zoneID)
			guard case .zoneNotFound = CloudKitZoneResult.resolve(partial) else {
				Issue.record("resolve(\(partial)) is not .zoneNotFound")
				return
			}

			let records = (0..<3).map { index -> Record in
				let record = Record(recordType: "AccountWebFeed", recordID: zone.generateRecordID())
				record["url"] = "https://example.com/\(index)"
				return record
			}
			try await zone.save(records)
			let stored = try await container.privateCloudDatabase.records(for: records.map(\.recordID))
			#expect(stored.count == 3)
			#expect(stored.values.allSatisfy { result in (try? result.get()) != nil })
		}
	}

	/// What CloudKit answers an atomic save into a zone that does not exist.
	static func saveError(in container: Container, zoneID: RecordZone.ID) async throws -> Error {
		let record = Record(recordType: "AccountWebFeed", recordID: Record.ID(recordName: "probe", zoneID: zoneID))
		let op = ModifyRecordsOperation(recordsToSave: [record], recordIDsToDelete: nil)
		op.isAtomic = true
		let result: Result<Void, Error> = await awaitCallback { done in
			op.modifyRecordsResultBlock = { result in done(result) }
			container.privateCloudDatabase.add(op)
		}
		guard case .failure(let error) = result else { throw CloudKitZoneError.unknown }
		return error
	}

	@Test("fetchZoneRecord: the per-zone failure, then the zone made after the final partialFailure; an existing zone answers itself", arguments: TestEngine.all)
	func fetchZoneRecord(engine: TestEngine) async throws {
		try await withAccountZone(on: engine) { zone, container in
			// NetNewsWire calls its completion from the per-zone block too, so a missing zone
			// answers twice: the zone's error, then the zone it made.
			let results = try await Self.fetchZoneRecordResults(zone, count: 2)
			guard results.count == 2, case .failure(let first) = results[0], case .success(let made) = results[1] else {
				Issue.record("answers: \(results)")
				return
			}
			#expect(((first as? NetNewsWireCloudKitError)?.error as? StratusError)?.code == .zoneNotFound)
			#expect(made?.zoneID == zone.zoneID)

			let again = try await Self.fetchZoneRecordResults(zone, count: 1)
			guard again.count == 1, case .success(let existing) = again[0] else {
				Issue.record("answers: \(again)")
				return
			}
			#expect(existing?.zoneID == zone.zoneID)
			#expect(existing?.capabilities.contains(.fetchChanges) == true)
		}
	}

	static func fetchZoneRecordResults(_ zone: CloudKitAccountZone, count: Int) async throws -> [Result<RecordZone?, Error>] {
		let collected = ResultsCollector<RecordZone?>(expected: count)
		return await withCheckedContinuation { continuation in
			collected.whenComplete = { continuation.resume(returning: $0) }
			zone.fetchZoneRecord { result in collected.add(result) }
		}
	}

	@Test("query follows cursors past the 100-record page; delete(ckQuery:) deletes every match through the cursor path", arguments: TestEngine.all)
	func queryAndDeleteWithCursors(engine: TestEngine) async throws {
		try await withAccountZone(on: engine) { zone, container in
			let folder = try await zone.createFolder(name: "Many")
			let records = (0..<250).map { index -> Record in
				let record = Record(recordType: "AccountWebFeed", recordID: zone.generateRecordID())
				record["url"] = "https://example.com/\(index)"
				record["containerExternalIDs"] = [folder]
				return record
			}
			try await zone.save(records)

			let query = Query(recordType: "AccountWebFeed", predicate: try QueryPredicate(format: "containerExternalIDs CONTAINS %@", folder))
			let found = try await zone.query(query, desiredKeys: ["url"])
			#expect(found.count == 250)
			#expect(Set(found.map(\.externalID)) == Set(records.map(\.externalID)))
			#expect(found.allSatisfy { record in record["containerExternalIDs"] == nil && record["url"] != nil })

			try await zone.delete(ckQuery: Query(recordType: "AccountWebFeed", predicate: QueryPredicate(value: true)))
			#expect(try await zone.query(Query(recordType: "AccountWebFeed", predicate: QueryPredicate(value: true))).isEmpty)
			// The folder, another type, is untouched.
			#expect(try await zone.fetch(externalID: folder).recordType == "AccountContainer")
		}
	}

	@Test("saveIfNew: a record already on the server fails alone with serverRecordChanged, which NetNewsWire counts as success; the server's copy stays", arguments: TestEngine.all)
	func saveIfNewKeepsTheServerCopy(engine: TestEngine) async throws {
		try await withAccountZone(on: engine) { zone, container in
			_ = try await zone.createZoneRecord()
			let existingID = Record.ID(recordName: "status-1", zoneID: zone.zoneID)
			let existing = Record(recordType: "ArticleStatus", recordID: existingID)
			existing["read"] = 1
			try await zone.save(existing)

			// Another device's view: the same ID, made afresh, and a new one.
			let stale = Record(recordType: "ArticleStatus", recordID: existingID)
			stale["read"] = 0
			let fresh = Record(recordType: "ArticleStatus", recordID: Record.ID(recordName: "status-2", zoneID: zone.zoneID))
			fresh["read"] = 0

			let op = ModifyRecordsOperation(recordsToSave: [stale, fresh], recordIDsToDelete: [])
			op.savePolicy = .ifServerRecordUnchanged
			op.isAtomic = false
			let result: Result<Void, Error> = await awaitCallback { done in
				op.modifyRecordsResultBlock = { result in done(result) }
				container.privateCloudDatabase.add(op)
			}
			guard case .failure(let error) = result, case .partialFailure(let errors) = CloudKitZoneResult.resolve(error) else {
				Issue.record("expected a partial failure, got \(result)")
				return
			}
			#expect(errors.count == 1)
			#expect(errors[AnyHashable(existingID)]?.code == .serverRecordChanged)
			#expect(errors[AnyHashable(existingID)]?.serverRecord?["read"] as? Int == 1)

			let status3 = Record(recordType: "ArticleStatus", recordID: Record.ID(recordName: "status-3", zoneID: zone.zoneID))
			status3["read"] = 0
			let staleAgain = Record(recordType: "ArticleStatus", recordID: existingID)
			staleAgain["read"] = 0
			try await zone.saveIfNew([staleAgain, status3])
			#expect(try await zone.fetch(externalID: "status-1")["read"] as? Int == 1)
			#expect(try await zone.fetch(externalID: "status-3")["read"] as? Int == 0)
		}
	}

	@Test("fetchChangesInZone: the token kept archived in defaults, changes and deletions with their record types, only what is new the next time", arguments: TestEngine.all)
	func fetchChangesInZoneWithTokens(engine: TestEngine) async throws {
		try await withAccountZone(on: engine) { zone, container in
			let delegate = AccountChangesCollector()
			zone.delegate = delegate

			// The zone is missing at first: zoneNotFound makes it and the fetch runs again.
			try await zone.fetchChangesInZone()
			#expect(delegate.changed.isEmpty)
			#expect(zone.changeToken != nil)
			#expect(zone.userDefaults.object(forKey: zone.changeTokenKey) is Data)

			let folder = try await zone.createFolder(name: "News")
			let feed = try await zone.createFeed(url: "https://example.org/rss", name: "Org", editedName: nil, homePageURL: nil, containerExternalID: folder)
			try await zone.fetchChangesInZone()
			#expect(Set(delegate.changed.map(\.externalID)) == [folder, feed])

			delegate.changed = []
			try await zone.delete(externalID: feed)
			try await zone.renameFolder(externalID: folder, to: "World")
			try await zone.fetchChangesInZone()
			#expect(delegate.changed.map(\.externalID) == [folder])
			#expect(delegate.changed.first?["name"] as? String == "World")
			#expect(delegate.deleted.map(\.recordID.recordName) == [feed])
			#expect(delegate.deleted.map(\.recordType) == ["AccountWebFeed"])

			// Nothing new: nothing reported.
			delegate.changed = []
			try await zone.fetchChangesInZone()
			#expect(delegate.changed.isEmpty)

			// Reset: everything still there comes again.
			zone.resetChangeToken()
			#expect(zone.changeToken == nil)
			try await zone.fetchChangesInZone()
			#expect(delegate.changed.map(\.externalID).contains(folder))
		}
	}

	@Test("a token under the old key moves to the new one (migrateChangeToken)", arguments: TestEngine.all)
	func migrateChangeToken(engine: TestEngine) async throws {
		try await withContainer(on: engine) { container in
			let suite = "stratus-netnewswire-\(UUID().uuidString)"
			let defaults = UserDefaults(suiteName: suite)!
			defer { defaults.removePersistentDomain(forName: suite) }
			let first = CloudKitAccountZone(container: container, userDefaults: defaults)
			first.delegate = AccountChangesCollector()
			try await first.fetchChangesInZone()
			let data = try #require(defaults.object(forKey: first.changeTokenKey) as? Data)
			defaults.removeObject(forKey: first.changeTokenKey)
			defaults.set(data, forKey: first.oldChangeTokenKey)

			let second = CloudKitAccountZone(container: container, userDefaults: defaults)
			#expect(defaults.object(forKey: second.oldChangeTokenKey) == nil)
			#expect(second.changeToken == first.changeToken)
		}
	}

	@Test("subscriptions: a zone subscription saved (zoneNotFound first makes the zone) and deleted; deleting it again is CloudKit's error", arguments: TestEngine.all)
	func zoneSubscription(engine: TestEngine) async throws {
		try await withAccountZone(on: engine) { zone, container in
			let subscription = RecordZoneSubscription(zoneID: zone.zoneID, subscriptionID: zone.zoneID.zoneName)
			let info = Subscription.NotificationInfo()
			info.shouldSendContentAvailable = true
			subscription.notificationInfo = info

			let saved = try await zone.save(subscription)
			#expect(saved.subscriptionID == "Account")
			let stored = try await container.privateCloudDatabase.allSubscriptions()
			#expect(stored.map(\.subscriptionID) == ["Account"])
			#expect((stored.first as? RecordZoneSubscription)?.zoneID == zone.zoneID)
			#expect(stored.first?.notificationInfo?.shouldSendContentAvailable == true)

			try await zone.delete(subscriptionID: "Account")
			#expect(try await container.privateCloudDatabase.allSubscriptions().isEmpty)
			await #expect(throws: NetNewsWireCloudKitError.self) { try await zone.delete(subscriptionID: "Account") }
		}
	}

	@Test("CloudKitZoneResult reads CKErrorRetryAfterKey as an NSNumber, and the partial errors dictionary as [AnyHashable: CKError]")
	func resolvesStratusErrors() throws {
		guard case .retry(let seconds) = CloudKitZoneResult.resolve(StratusError(.zoneBusy, userInfo: [ErrorRetryAfterKey: 2.5])) else {
			Issue.record("zoneBusy with a retry time is not .retry")
			return
		}
		#expect(seconds == 2.5)
		guard case .failure = CloudKitZoneResult.resolve(StratusError(.serviceUnavailable)) else {
			Issue.record("serviceUnavailable without a retry time is not .failure")
			return
		}
		guard case .limitExceeded = CloudKitZoneResult.resolve(StratusError(.limitExceeded)) else {
			Issue.record("limitExceeded is not .limitExceeded")
			return
		}
		let id = Record.ID(recordName: "a")
		let partial = StratusError(.partialFailure, userInfo: [PartialErrorsByItemIDKey: [id: StratusError(.changeTokenExpired)]])
		guard case .changeTokenExpired = CloudKitZoneResult.resolve(partial) else {
			Issue.record("a partial failure holding changeTokenExpired is not .changeTokenExpired")
			return
		}
		#expect(NetNewsWireCloudKitError(StratusError(.zoneNotFound)).localizedDescription.hasPrefix("Zone Not Found"))
	}

	@Test("a batch of 500 saves in one atomic request: CloudKit would answer limitExceeded and NetNewsWire split it in 200s; Stratus takes it whole", arguments: TestEngine.all)
	func largeBatchSaves(engine: TestEngine) async throws {
		try await withAccountZone(on: engine) { zone, container in
			let records = (0..<500).map { index -> Record in
				let record = Record(recordType: "ArticleStatus", recordID: zone.generateRecordID())
				record["read"] = index % 2
				return record
			}
			try await zone.save(records)
			let all = try await zone.query(Query(recordType: "ArticleStatus", predicate: QueryPredicate(value: true)))
			#expect(all.count == 500)
		}
	}
}

/// Collects `count` answers of a completion handler that may be called more than once.
final class ResultsCollector<Value>: @unchecked Sendable {
	private let lock = NSLock()
	private var results: [Result<Value, Error>] = []
	private let expected: Int
	var whenComplete: (([Result<Value, Error>]) -> Void)?

	init(expected: Int) { self.expected = expected }

	func add(_ result: Result<Value, Error>) {
		lock.lock()
		results.append(result)
		let done = results.count == expected ? (whenComplete, results) : nil
		lock.unlock()
		if let (finish, all) = done { finish?(all) }
	}
}
