import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// Zavala's CloudKit layer (vincode-io/Zavala: VinCloudKit's `VCKZone.swift`, `VCKResult.swift`,
// `VCKError.swift`, `VCKModel.swift`, `CKRecord+VCK.swift`, and VinOutlineKit's
// `Row+CloudKit.swift`), ported. The outliner keeps each document in a zone of its own and
// saves rows with `isAtomic = true` under `.ifServerRecordUnchanged`; it keeps each row's
// system fields as `encodeSystemFields(with:)` data (`record.metadata`) and rebuilds the record
// to save from it with `CKRecord(coder:)`; per-record `batchRequestFailed` items are "nothing
// wrong with this record", `serverRecordChanged` items are merged three ways (client, ancestor,
// server) from `error.serverRecord`; `CKPartialErrorsByItemIDKey` is read as
// `[AnyHashable: CKError]` to find a zone that is gone; and zone changes come through one
// `CKFetchRecordZoneChangesOperation.ZoneConfiguration` with `recordZoneChangeTokensUpdatedBlock`
// and `recordZoneFetchResultBlock` handing batches on, and `changeTokenExpired` starting over.
//
// What the port changes: the `CK` prefix; `os.Logger` → the stand-in below (Canopy's port in
// this module has `Logger`; this adds the levels and `privacy:` interpolation Zavala uses);
// `VCKModel` is `@MainActor`, as the `await`s of this `VCKZone` release require; the merge of
// `OrderedSet`s (swift-collections) is left out. `Row` is Zavala's `Row+CloudKit.swift` on a
// row cut down to the fields the tests need (`order`, `parentRowID`, `isComplete`,
// `topicData`), its attributed-string merge of `topicData` done on the bytes.

// MARK: - Stand-ins for os.Logger's levels and privacy

struct OSLogPrivacy { static let `public` = OSLogPrivacy(), `private` = OSLogPrivacy() }

extension DefaultStringInterpolation {
	/// `"\(value, privacy: .public)"` in an `os.Logger` message.
	mutating func appendInterpolation<T>(_ value: T, privacy: OSLogPrivacy) {
		appendInterpolation(String(describing: value))
	}
}

extension Logger {
	func info(_ message: String) {}
	func debug(_ message: String) {}
}

// MARK: - VCKError.swift

enum VCKError: LocalizedError {
	case userDeletedZone
	case corruptAccount
	case maxChildCountExceeded
	case unknown
}

// MARK: - VCKResult.swift

enum VCKResult {
	case success
	case retry(afterSeconds: Double)
	case limitExceeded
	case changeTokenExpired
	case partialFailure(error: StratusError)
	case serverRecordChanged(error: StratusError)
	case zoneNotFound
	case userDeletedZone
	case failure(error: Error)

	static func refine(_ error: Error?) -> VCKResult {
        guard error != nil else { return .success }

        guard let ckError = error as? StratusError else {
            return .failure(error: error!)
        }

		switch ckError.code {
		case .serviceUnavailable, .requestRateLimited, .zoneBusy:
			if let retry = ckError.retryAfterSeconds {
				return .retry(afterSeconds: retry)
			} else {
				return .failure(error: ckError)
			}
		case .zoneNotFound:
			return .zoneNotFound
		case .userDeletedZone:
			return .userDeletedZone
		case .changeTokenExpired:
			return .changeTokenExpired
		case .serverRecordChanged:
			return .serverRecordChanged(error: ckError)
		case .partialFailure:
			if let partialErrors = ckError.userInfo[PartialErrorsByItemIDKey] as? [AnyHashable: StratusError] {
				if let zoneResult = anyRequestErrors(partialErrors) {
					return zoneResult
				} else {
					return .partialFailure(error: ckError)
				}
			} else {
				return .failure(error: ckError)
			}
		case .limitExceeded:
			return .limitExceeded
		default:
			return .failure(error: ckError)
		}
	}

}

private extension VCKResult {

	static func anyRequestErrors(_ errors: [AnyHashable: StratusError]) -> VCKResult? {
		if errors.values.contains(where: { $0.code == .changeTokenExpired } ) {
			return .changeTokenExpired
		}
		if errors.values.contains(where: { $0.code == .zoneNotFound } ) {
			return .zoneNotFound
		}
		if errors.values.contains(where: { $0.code == .userDeletedZone } ) {
			return .userDeletedZone
		}
		return nil
	}

}

// MARK: - CKRecord+VCK.swift

extension Record {

	convenience init?(_ data: Data) {
		guard let unarchiver = try? NSKeyedUnarchiver(forReadingFrom: data) else {
			return nil
		}
		unarchiver.requiresSecureCoding = true
		self.init(coder: unarchiver)
	}

	var metadata: Data {
		get {
			let archiver = NSKeyedArchiver(requiringSecureCoding: true)
			encodeSystemFields(with: archiver)
			return archiver.encodedData
		}
	}

	func isEqual<T: Equatable>(key: String, valueType: T.Type, other: Record) -> Bool {
		guard let value = object(forKey: key) as? T,
			  let otherValue = other.object(forKey: key) as? T,
			  value == otherValue else { return false }
		return true
	}

}

// MARK: - VCKModel.swift

enum VCKMergeScenario {
	case clientWins
	case serverWins
	case merge

	static func evaluate<T>(client: T?, ancestor: T?, server: T?) -> Self where T:Equatable {
		if let ancestor {
			// If the value was deleted or is the same as before the client change, client wins
			guard let server, server != ancestor else { return .clientWins }

			// The client is trying to delete, but the server has newer value
			guard client != nil else { return .serverWins }

			// We have all 3 values and need to do a 3 way merge
			return .merge
		} else {
			// If the value was deleted or never existed, client wins
			guard server != nil else { return .clientWins }

			// The client is trying to delete, but the server has newer value
			guard client != nil else { return .serverWins }

			// We have both a server and client, try to merge if possible
			return .merge
		}
	}
}

@MainActor
protocol VCKModel {

	var cloudKitRecordID: Record.ID { get }
	var cloudKitMetaData: Data? { get set }

	func apply(_ record: Record)
	func apply(_ error: StratusError)
	func buildRecord() -> Record
	func clearSyncData()
	func deleteTempFiles()

}

extension VCKModel {

	func merge<T>(client: T?, ancestor: T?, server: T?) -> T? where T:Equatable {
		switch VCKMergeScenario.evaluate(client: client, ancestor: ancestor, server: server) {
		case .clientWins:
			return client
		case .serverWins:
			return server
		case .merge:
			return client
		}
	}

	func merge<T>(client: [T]?, ancestor: [T]?, server: [T]?) -> [T]? where T:Equatable {
		switch VCKMergeScenario.evaluate(client: client, ancestor: ancestor, server: server) {
		case .clientWins:
			return client
		case .serverWins:
			return server
		case .merge:
			guard let client, let server else { fatalError("We should always have both a server or client if we are merging") }
			let diff = server.difference(from: ancestor ?? [])
			guard let merged = client.applying(diff) else {
				return client
			}
			return merged
		}
	}
}

// MARK: - VCKZone.swift

struct VCKChangeTokenKey: Hashable, Codable, Sendable {
	let zoneName: String
	let ownerName: String
}

enum VCKModifyStrategy {
	case overWriteServerValue
	case onlyIfServerUnchanged

	var recordSavePolicy: ModifyRecordsOperation.RecordSavePolicy {
		switch self {
		case .overWriteServerValue:
			return .changedKeys
		case .onlyIfServerUnchanged:
			return .ifServerRecordUnchanged
		}
	}
}

protocol VCKZoneDelegate: AnyObject {
	func store(changeToken: Data?, key: VCKChangeTokenKey) async
	func findChangeToken(key: VCKChangeTokenKey) async -> Data?
	func cloudKitDidModify(changed: [Record], deleted: [CloudKitRecordKey]) async throws;
}

// `typealias CloudKitRecordKey = (recordType:, recordID:)`: the same as NetNewsWire's, ported in this module.

protocol VCKZone: AnyObject {

	static var qualityOfService: QualityOfService { get }

	var logger: Logger { get }
	var zoneID: RecordZone.ID { get }

	var container: Container? { get }
	var database: Database? { get }
	var delegate: VCKZoneDelegate? { get }

	/// Generates a new CKRecord.ID using a UUID for the record's name
	func generateRecordID() -> Record.ID

	/// Subscribe to changes at a zone level
	func subscribeToZoneChanges() async throws

}

extension VCKZone {

	// My observation has been that QoS is treated differently for CloudKit operations on macOS vs iOS.
	// .userInitiated is too aggressive on iOS and can lead the UI slowing down and appearing to block.
	// .default (or lower) on macOS will sometimes hang for extended periods of time and appear to hang.
	static var qualityOfService: QualityOfService {
		#if os(macOS) || targetEnvironment(macCatalyst)
		return .userInitiated
		#else
		return .default
		#endif
	}

	private var changeTokenKey: VCKChangeTokenKey {
		return VCKChangeTokenKey(zoneName: zoneID.zoneName, ownerName: zoneID.ownerName)
	}

	private var changeToken: ServerChangeToken? {
		get async {
			guard let tokenData = await delegate!.findChangeToken(key: changeTokenKey) else { return nil }
			return try? NSKeyedUnarchiver.unarchivedObject(ofClass: ServerChangeToken.self, from: tokenData)
		}
	}

	func setChangeToken(_ token: ServerChangeToken?) {
		guard let token, let tokenData = try? NSKeyedArchiver.archivedData(withRootObject: token, requiringSecureCoding: false) else {
			Task {
				await delegate!.store(changeToken: nil, key: changeTokenKey)
			}
			return
		}
		Task {
			await delegate!.store(changeToken: tokenData, key: changeTokenKey)
		}
	}

	func generateRecordID() -> Record.ID {
		return Record.ID(recordName: UUID().uuidString, zoneID: zoneID)
	}

	func fetchRecordZone() async throws -> RecordZone {
		return try await withCheckedThrowingContinuation { continuation in
			let op = FetchRecordZonesOperation(recordZoneIDs: [zoneID])
			op.qualityOfService = Self.qualityOfService

			op.perRecordZoneResultBlock = { [weak self] _, result in
				guard let self else {
					continuation.resume(throwing: VCKError.unknown)
					return
				}

				switch result {
				case .success(let recordZone):
					continuation.resume(returning: recordZone)
				case .failure(let error):
					switch VCKResult.refine(error) {
					case .zoneNotFound, .userDeletedZone:
						Task {
							do {
								try await self.createRecordZone()
								let recordZone = try await self.fetchRecordZone()
								continuation.resume(returning: recordZone)
							} catch {
								continuation.resume(throwing: error)
							}
						}
					case .retry(let timeToWait):
						self.logger.error("\(self.zoneID.zoneName, privacy: .public) zone fetch changes retry in \(timeToWait, privacy: .public) seconds.")
						Task {
							do {
								try await Task.sleep(for: .seconds(timeToWait))
								let recordZone = try await self.fetchRecordZone()
								continuation.resume(returning: recordZone)
							} catch {
								continuation.resume(throwing: error)
							}
						}
					default:
						continuation.resume(throwing: error)
					}
				}
			}

			database?.add(op)
		}
	}

	/// Creates the record zone
	func createRecordZone() async throws {
		guard let database else {
			throw VCKError.unknown
		}

		try await database.save(RecordZone(zoneID: zoneID))
	}

	/// Subscribes to zone changes
	func subscribeToZoneChanges() async throws {
		let subscription = RecordZoneSubscription(zoneID: zoneID, subscriptionID: "\(zoneID.zoneName)-changes")

		let info = Subscription.NotificationInfo()
        info.shouldSendContentAvailable = true
        subscription.notificationInfo = info

		try await save(subscription)
    }

	/// Fetch a CKRecord by using its externalID
	func fetch(externalID: String) async throws -> Record? {
		let recordID = Record.ID(recordName: externalID, zoneID: zoneID)

		do {
			return try await database?.record(for: recordID)
		} catch {
			switch VCKResult.refine(error) {
			case .zoneNotFound:
				try await createRecordZone()
				return try await fetch(externalID: externalID)
			case .retry(let timeToWait):
				logger.error("\(self.zoneID.zoneName, privacy: .public) zone fetch retry in \(timeToWait, privacy: .public) seconds.")
				try await Task.sleep(for: .seconds(timeToWait))
				return try await self.fetch(externalID: externalID)
			case .userDeletedZone:
				throw VCKError.userDeletedZone
			default:
				throw error
			}
		}
	}

	/// Save the CKSubscription
	@discardableResult
	func save(_ subscription: Subscription) async throws -> Subscription {
		guard let database else {
			throw VCKError.unknown
		}

		do {
			return try await database.save(subscription)
		} catch {
			switch VCKResult.refine(error) {
			case .zoneNotFound:
				try await createRecordZone()
				return try await save(subscription)
			case .retry(let timeToWait):
				self.logger.error("\(self.zoneID.zoneName, privacy: .public) zone save subscription retry in \(timeToWait, privacy: .public) seconds.")
				try await Task.sleep(for: .seconds(timeToWait))
				return try await save(subscription)
			default:
				throw error
			}
		}
	}


	/// Modify and delete the supplied CKRecords and CKRecord.IDs
	func modify(modelsToSave: [VCKModel], recordIDsToDelete: [Record.ID], strategy: VCKModifyStrategy) async throws -> ([Record], [Record.ID]) {
		guard !(modelsToSave.isEmpty && recordIDsToDelete.isEmpty) else {
			return ([], [])
		}

		var recordsToSave = [Record]()
		for modelToSave in modelsToSave {
			recordsToSave.append(await modelToSave.buildRecord())
		}

		return try await withCheckedThrowingContinuation { continuation in

			var perRecordError: Error?

			var savedRecords = [Record]()
			var deletedRecordIDs = [Record.ID]()

			var savesToRetry = [(Record.ID, StratusError?)]()
			var deletesToRetry = [Record.ID]()

			let op = ModifyRecordsOperation(recordsToSave: recordsToSave, recordIDsToDelete: recordIDsToDelete)
			op.savePolicy = strategy.recordSavePolicy
			op.isAtomic = true
			op.qualityOfService = Self.qualityOfService

			op.perRecordSaveBlock = { recordID, result in
				switch result {
				case .success(let record):
					savedRecords.append(record)
				case .failure(let error):
					guard let ckError = error as? StratusError else { break }

					switch ckError.code {
					case .zoneNotFound, .userDeletedZone:
						perRecordError = error
						op.cancel()
					case .batchRequestFailed:
						// Nothing wrong with this record, it was just part of the batch that failed.
						savesToRetry.append((recordID, nil))
					case .unknownItem:
						// The record was deleted by another device or user, so don't try to update it.
						break
					case .limitExceeded:
						perRecordError = VCKError.maxChildCountExceeded
						op.cancel()
					case .serverRecordChanged:
						savesToRetry.append((recordID, ckError))
					default:
						// Won't sync and I don't know why
						self.logger.error("Unhandled per record error:  \(ckError.localizedDescription, privacy: .public).")
						perRecordError = error
						op.cancel()
					}
				}
			}

			op.perRecordDeleteBlock = { recordID, result in
				switch result {
				case .success:
					deletedRecordIDs.append(recordID)
				case .failure(let error):
					guard let ckError = error as? StratusError else { break }
					switch ckError.code {
					case .zoneNotFound, .userDeletedZone:
						perRecordError = error
						op.cancel()
					default:
						deletesToRetry.append(recordID)
					}
				}
			}

			op.modifyRecordsResultBlock = { [weak self] result in
				guard let self else {
					continuation.resume(throwing: VCKError.unknown)
					return
				}

				func handleError(_ error: Error) {
					let modelsToSend = modelsToSave
					let deletesToSend = recordIDsToDelete

					let refinedResult = VCKResult.refine(error)
					switch refinedResult {
					case .zoneNotFound, .userDeletedZone:
						continuation.resume(throwing: error)
					case .retry(let timeToWait):
						self.logger.error("\(self.zoneID.zoneName, privacy: .public) zone modify retry in \(timeToWait, privacy: .public) seconds.")
						Task {
							do {
								try await Task.sleep(for: .seconds(timeToWait))
								let result = try await self.modify(modelsToSave: modelsToSend, recordIDsToDelete: deletesToSend, strategy: strategy)
								continuation.resume(returning: result)
							} catch {
								continuation.resume(throwing: error)
							}
						}
					case .limitExceeded:
						Task {
							do {
								let modelsToSaveChunks = modelsToSave.chunked(into: 200)
								let recordIDsToDeleteChunks = recordIDsToDelete.chunked(into: 200)

								var savedRecords = [Record]()
								var deletedRecordIDs = [Record.ID]()

								for modelsToSaveChunk in modelsToSaveChunks {
									let result = try await self.modify(modelsToSave: modelsToSaveChunk, recordIDsToDelete: [], strategy: strategy)
									savedRecords.append(contentsOf: result.0)
								}

								for recordIDsToDeleteChunk in recordIDsToDeleteChunks {
									let result = try await self.modify(modelsToSave: [], recordIDsToDelete: recordIDsToDeleteChunk, strategy: strategy)
									deletedRecordIDs.append(contentsOf: result.1)
								}

								continuation.resume(returning: (savedRecords, deletedRecordIDs))
							} catch {
								continuation.resume(throwing: error)
							}
						}

					case .serverRecordChanged(let ckError):
						Task {
							self.logger.info("Modify failed: \(ckError.localizedDescription, privacy: .public). Attempting to recover...")
							await modelsToSave[0].apply(ckError)
							self.logger.info("\(modelsToSave.count, privacy: .public) records resolved. Attempting Modify again...")

							do {
								let result = try await self.modify(modelsToSave: modelsToSave, recordIDsToDelete: recordIDsToDelete, strategy: strategy)
								continuation.resume(returning: result)
							} catch {
								continuation.resume(throwing: error)
							}
						}

					default:
						continuation.resume(throwing: error)
					}
				}

				switch result {
				case .success:
					if savesToRetry.isEmpty && deletesToRetry.isEmpty {
						self.logger.info("Successfully modified \(savedRecords.count, privacy: .public) records and deleted \(deletedRecordIDs.count, privacy: .public) records.")
						continuation.resume(returning: (savedRecords, deletedRecordIDs))
					} else {
						let savesToSend = savesToRetry
						let deletesToSend = deletesToRetry

						Task { @MainActor in
							var modelsToRetry = [VCKModel]()

							for (recordID, ckError) in savesToSend {
								if let model = modelsToSave.first(where: { $0.cloudKitRecordID == recordID }) {
									if let ckError {
										model.apply(ckError)
									}
									modelsToRetry.append(model)
								}
							}

							self.logger.info("Modify failed. \(modelsToRetry.count, privacy: .public) records resolved. Attempting Modify again...")

							do {
								let result = try await self.modify(modelsToSave: modelsToRetry, recordIDsToDelete: deletesToSend, strategy: strategy)
								continuation.resume(returning: result)
							} catch {
								continuation.resume(throwing: error)
							}
						}
					}
				case .failure(let error):
					if let perRecordError {
						handleError(perRecordError)
					} else {
						handleError(error)
					}
				}
			}

			database?.add(op)
		}
	}

	/// Fetch all the changes in the CKZone since the last time we checked
	func fetchChangesInZone(incremental: Bool = true) async throws {

		var updatedRecords = [Record]()
		var deletedRecordKeys = [CloudKitRecordKey]()

		@Sendable func wasChanged(updated: [Record], deleted: [CloudKitRecordKey], token: ServerChangeToken?) async throws {
			logger.debug("Received \(updated.count, privacy: .public) updated records and \(deleted.count, privacy: .public) delete requests.")
			try await delegate?.cloudKitDidModify(changed: updated, deleted: deleted)
			self.setChangeToken(token)
		}

		let zoneConfig = FetchRecordZoneChangesOperation.ZoneConfiguration()
		zoneConfig.previousServerChangeToken = await changeToken

		return try await withCheckedThrowingContinuation { continuation in

			var perRecordError: Error?

			let op = FetchRecordZoneChangesOperation(recordZoneIDs: [zoneID], configurationsByRecordZoneID: [zoneID: zoneConfig])
			op.fetchAllChanges = true
			op.qualityOfService = Self.qualityOfService

			op.recordZoneChangeTokensUpdatedBlock = { zoneID, token, _ in
				guard incremental else { return }

				let updatedRecordsToSend = updatedRecords
				let deletedRecordKeysToSend = deletedRecordKeys

				Task { @MainActor in
					do {
						try await wasChanged(updated: updatedRecordsToSend, deleted: deletedRecordKeysToSend, token: token)
					} catch {
						op.cancel()
						continuation.resume(throwing: error)
					}
				}

				updatedRecords = [Record]()
				deletedRecordKeys = [CloudKitRecordKey]()
			}

			op.recordWasChangedBlock = { _, result in
				switch result {
				case .success(let record):
					updatedRecords.append(record)
				case .failure(let error):
					perRecordError = error
					op.cancel()
				}
			}

			op.recordWithIDWasDeletedBlock = { recordID, recordType in
				let recordKey = CloudKitRecordKey(recordType: recordType, recordID: recordID)
				deletedRecordKeys.append(recordKey)
			}

			op.recordZoneFetchResultBlock = { zoneID, result in
				switch result {
				case .success((let token, _, _)):
					let updatedRecordsToSend = updatedRecords
					let deletedRecordKeysToSend = deletedRecordKeys
					Task { @MainActor in
						do {
							try await wasChanged(updated: updatedRecordsToSend, deleted: deletedRecordKeysToSend, token: token)
						} catch {
							op.cancel()
							continuation.resume(throwing: error)
						}
					}
				case .failure:
					break
				}
				updatedRecords = [Record]()
				deletedRecordKeys = [CloudKitRecordKey]()
			}

			op.fetchRecordZoneChangesResultBlock = { [weak self] result in
				guard let self else {
					continuation.resume(throwing: VCKError.unknown)
					return
				}

				func handleError(_ error: Error) {
					switch VCKResult.refine(error) {
					case .zoneNotFound, .userDeletedZone:
						continuation.resume(throwing: error)
					case .retry(let timeToWait):
						self.logger.error("\(self.zoneID.zoneName, privacy: .public) zone fetch changes retry in \(timeToWait, privacy: .public) seconds.")
						Task {
							do {
								try await Task.sleep(for: .seconds(timeToWait))
								try await self.fetchChangesInZone(incremental: incremental)
								continuation.resume()
							} catch {
								continuation.resume(throwing: error)
							}
						}
					case .changeTokenExpired:
						Task {
							self.setChangeToken(nil)
							try await self.fetchChangesInZone(incremental: incremental)
							continuation.resume()
						}
					default:
						continuation.resume(throwing: error)
					}
				}

				switch result {
				case .success:
					continuation.resume()
				case .failure(let error):
					if let perRecordError {
						handleError(perRecordError)
					} else {
						handleError(error)
					}
				}
			}

			database?.add(op)

		}
    }

}

// MARK: - Row+CloudKit.swift, on a row cut down to four fields

@MainActor
final class Outline {
	let id: String
	let zoneID: RecordZone.ID
	init(id: String, zoneID: RecordZone.ID) { self.id = id; self.zoneID = zoneID }
}

@MainActor
final class Row: VCKModel {
	struct CloudKitRecord {
		static let recordType = "Row"
		struct Fields {
			static let outline = "outline"
			static let subtype = "subtype"
			static let topicData = "topicData"
			static let isComplete = "isComplete"
			static let rowOrder = "rowOrder" // Deprecated, kept for backward compatibility
			static let order = "order"       // Fractional indexing order
			static let parentRowID = "parentRowID" // Parent row ID (nil = parent is Outline)
		}
	}

	let entityID: String
	var outline: Outline?
	var cloudKitMetaData: Data?
	var isCloudKitMerging = false

	var order: String? { willSet { if ancestorOrder == nil { ancestorOrder = order } } }
	var parentID: String? { willSet { if ancestorParentID == nil { ancestorParentID = parentID } } }
	var isComplete: Bool? { willSet { if ancestorIsComplete == nil { ancestorIsComplete = isComplete } } }
	var topicData: Data? { willSet { if ancestorTopicData == nil { ancestorTopicData = topicData } } }

	// What the row was before this device changed it, and what the server has (from a conflict).
	var ancestorOrder: String?, serverOrder: String?
	var ancestorParentID: String?, serverParentID: String?
	var ancestorIsComplete: Bool?, serverIsComplete: Bool?
	var ancestorTopicData: Data?, serverTopicData: Data?

	init(entityID: String, outline: Outline) {
		self.entityID = entityID
		self.outline = outline
	}

	var cloudKitRecordID: Record.ID {
		guard let zoneID = outline?.zoneID else { fatalError("Missing Outline in Row.") }
		return Record.ID(recordName: entityID.description, zoneID: zoneID)
	}

	func apply(_ record: Record) {
		if let metaData = cloudKitMetaData,
		   let recordChangeTag = Record(metaData)?.recordChangeTag,
		   record.recordChangeTag == recordChangeTag {
			return
		}

		cloudKitMetaData = record.metadata

		if let serverOrderValue = record[Row.CloudKitRecord.Fields.order] as? String {
			if serverOrderValue != order {
				order = serverOrderValue
			}
		}

		let serverParentIDValue = record[Row.CloudKitRecord.Fields.parentRowID] as? String
		if serverParentIDValue != parentID {
			parentID = serverParentIDValue
		}

		let serverIsComplete = record[Row.CloudKitRecord.Fields.isComplete] as? String == "1" ? true : false
		if serverIsComplete != isComplete {
			isComplete = serverIsComplete
		}

		let serverTopicData = record[Row.CloudKitRecord.Fields.topicData] as? Data
		if serverTopicData != topicData {
			topicData = serverTopicData
		}

		clearSyncData()
	}

	func apply(_ error: StratusError) {
		guard let record = error.serverRecord else { return }
		cloudKitMetaData = record.metadata

		// Capture server values for fractional indexing fields
		serverOrder = record[Row.CloudKitRecord.Fields.order] as? String
		serverParentID = record[Row.CloudKitRecord.Fields.parentRowID] as? String

		serverIsComplete = record[Row.CloudKitRecord.Fields.isComplete] as? String == "1" ? true : false
		serverTopicData = record[Row.CloudKitRecord.Fields.topicData] as? Data

		isCloudKitMerging = true
	}

	func buildRecord() -> Record {
		// (`guard let zoneID = outline?.zoneID, let parent else { return nil }` in Zavala, whose
		// rows have rows as parents too; these rows' parent is the outline.)
		guard let outline else { fatalError("Missing Outline in Row.") }
		let zoneID = outline.zoneID

		let record: Record = {
			if let syncMetaData = cloudKitMetaData, let record = Record(syncMetaData) {
				return record
			} else {
				return Record(recordType: Row.CloudKitRecord.recordType, recordID: cloudKitRecordID)
			}
		}()

		let parentRecordID = Record.ID(recordName: outline.id, zoneID: zoneID)
		record.parent = Record.Reference(recordID: parentRecordID, action: .none)

		record[Row.CloudKitRecord.Fields.outline] = Record.Reference(recordID: parentRecordID, action: .deleteSelf)
		record[Row.CloudKitRecord.Fields.subtype] = "text"

		// Write empty rowOrder for backward compatibility with older clients
		record[Row.CloudKitRecord.Fields.rowOrder] = [String]()

		// Write fractional indexing order with three-way merge
		let recordOrder = merge(client: order, ancestor: ancestorOrder, server: serverOrder) ?? ""
		record[Row.CloudKitRecord.Fields.order] = recordOrder

		// Write parentRowID with three-way merge
		let recordParentID = merge(client: parentID, ancestor: ancestorParentID, server: serverParentID)
		record[Row.CloudKitRecord.Fields.parentRowID] = recordParentID

		let recordIsComplete = merge(client: isComplete, ancestor: ancestorIsComplete, server: serverIsComplete) ?? false
		record[Row.CloudKitRecord.Fields.isComplete] = recordIsComplete ? "1" : "0"

		let recordTopicData = merge(client: topicData, ancestor: ancestorTopicData, server: serverTopicData)
		record[Row.CloudKitRecord.Fields.topicData] = recordTopicData

		return record
	}

	func clearSyncData() {
		isCloudKitMerging = false

		ancestorOrder = nil
		serverOrder = nil

		ancestorParentID = nil
		serverParentID = nil

		ancestorIsComplete = nil
		serverIsComplete = nil

		ancestorTopicData = nil
		serverTopicData = nil
	}

	func deleteTempFiles() {}
}

// MARK: - The app's zone and delegate, for the tests

final class OutlineZone: VCKZone {
	let logger = Logger(subsystem: "io.vincode.Zavala", category: "VinOutlineKit")
	let zoneID: RecordZone.ID
	let container: Container?
	let database: Database?
	weak var delegate: VCKZoneDelegate?

	init(container: Container, zoneID: RecordZone.ID) {
		self.container = container
		self.database = container.privateCloudDatabase
		self.zoneID = zoneID
	}
}

/// The account's side of `VCKZoneDelegate`: where tokens are kept and changes applied.
actor OutlineStore: VCKZoneDelegate {
	var tokens: [VCKChangeTokenKey: Data] = [:]
	var changed: [String] = []
	var deleted: [String] = []
	var batches = 0

	func store(changeToken: Data?, key: VCKChangeTokenKey) async { tokens[key] = changeToken }
	func findChangeToken(key: VCKChangeTokenKey) async -> Data? { tokens[key] }
	func cloudKitDidModify(changed: [Record], deleted: [CloudKitRecordKey]) async throws {
		batches += 1
		self.changed += changed.map(\.recordID.recordName)
		self.deleted += deleted.map(\.recordID.recordName)
	}
	func forget(_ key: VCKChangeTokenKey) { tokens[key] = nil }
	func setToken(_ data: Data, for key: VCKChangeTokenKey) { tokens[key] = data }
}

// MARK: - Tests

@MainActor
private func makeOutline(_ container: Container, rows names: [String]) async throws -> (OutlineZone, Outline, [Row]) {
	let zoneID = RecordZone.ID(zoneName: "Outline-A", ownerName: CurrentUserDefaultName)
	let zone = OutlineZone(container: container, zoneID: zoneID)
	try await zone.createRecordZone()
	let outline = Outline(id: "outline-a", zoneID: zoneID)
	let outlineRecord = Record(recordType: "Outline", recordID: Record.ID(recordName: outline.id, zoneID: zoneID))
	outlineRecord["title"] = "Groceries"
	try await container.privateCloudDatabase.save(outlineRecord)
	let rows = names.enumerated().map { index, name -> Row in
		let row = Row(entityID: name, outline: outline)
		row.order = "a\(index)"
		row.isComplete = false
		row.topicData = Data(name.utf8)
		row.clearSyncData()
		return row
	}
	return (zone, outline, rows)
}

@Suite("Zavala's zone: atomic saves from kept system fields, three-way merges and zone changes, ported")
struct ZavalaZoneMergeTests {
	@Test("rows saved atomically come back with change tags, and the kept metadata rebuilds the record for the next save", arguments: TestEngine.all)
	@MainActor
	func saveAndResave(engine: TestEngine) async throws {
		try await withContainer(on: engine) { container in
			let (zone, _, rows) = try await makeOutline(container, rows: ["milk", "eggs"])
			let (saved, deleted) = try await zone.modify(modelsToSave: rows, recordIDsToDelete: [], strategy: .onlyIfServerUnchanged)
			#expect(saved.map(\.recordID.recordName).sorted() == ["eggs", "milk"])
			#expect(deleted.isEmpty)
			for record in saved { rows.first { $0.entityID == record.recordID.recordName }!.cloudKitMetaData = record.metadata }

			// The metadata is the system fields alone: the record it rebuilds has the change tag
			// and no values.
			let rebuilt = try #require(Record(rows[0].cloudKitMetaData!))
			#expect(rebuilt.recordChangeTag == saved.first { $0.recordID.recordName == "milk" }?.recordChangeTag)
			#expect(rebuilt.allKeys().isEmpty)
			#expect(rebuilt.isEqual(key: "order", valueType: String.self, other: saved[0]) == false)

			// A local edit saves over the kept change tag without a conflict.
			rows[0].isComplete = true
			_ = try await zone.modify(modelsToSave: [rows[0]], recordIDsToDelete: [], strategy: .onlyIfServerUnchanged)
			let stored = try await container.privateCloudDatabase.record(for: rows[0].cloudKitRecordID)
			#expect(stored["isComplete"] as? String == "1")
			#expect((stored["outline"] as? Record.Reference)?.action == .deleteSelf)
			#expect(stored.parent?.recordID.recordName == "outline-a")
			#expect(stored["rowOrder"] as? [String] == [])
		}
	}

	@Test("a conflict in an atomic save fails the whole batch: serverRecordChanged for the stale row, batchRequestFailed for the rest, nothing saved", arguments: TestEngine.all)
	@MainActor
	func conflictFailsTheBatch(engine: TestEngine) async throws {
		try await withContainer(on: engine) { container in
			let (zone, _, rows) = try await makeOutline(container, rows: ["milk", "eggs"])
			let (saved, _) = try await zone.modify(modelsToSave: rows, recordIDsToDelete: [], strategy: .onlyIfServerUnchanged)
			for record in saved { rows.first { $0.entityID == record.recordID.recordName }!.cloudKitMetaData = record.metadata }

			// Another device completes "milk" and moves it.
			let other = try await container.privateCloudDatabase.record(for: rows[0].cloudKitRecordID)
			other["isComplete"] = "1"
			other["order"] = "b0"
			try await container.privateCloudDatabase.save(other)

			// This device edits both rows from the metadata it kept.
			rows[0].topicData = Data("oat milk".utf8)
			rows[1].topicData = Data("6 eggs".utf8)
			let error = await #expect(throws: StratusError.self) {
				_ = try await zone.modify(modelsToSave: rows, recordIDsToDelete: [], strategy: .onlyIfServerUnchanged)
			}
			// CloudKit reports per-record failures as a partial failure of the operation, which
			// `VCKResult.refine` passes on (no zone error among them); the retry of `savesToRetry`
			// runs only when the operation succeeds.
			#expect(error?.code == .partialFailure)
			let partial = try #require(error?.partialErrorsByItemID)
			let milkError = partial[rows[0].cloudKitRecordID] as? StratusError
			#expect(milkError?.code == .serverRecordChanged)
			#expect((partial[rows[1].cloudKitRecordID] as? StratusError)?.code == .batchRequestFailed)
			#expect(try await container.privateCloudDatabase.record(for: rows[1].cloudKitRecordID)["topicData"] as? Data == Data("eggs".utf8), "atomic: nothing of the batch was saved")
			// `refine` reads the item errors as `[AnyHashable: CKError]`, as Zavala does.
			#expect((error?.userInfo[PartialErrorsByItemIDKey] as? [AnyHashable: StratusError])?.count == 2)

			// The app applies the conflict to its row (the server's version and tag) and saves
			// again from the server's system fields, without a second conflict. Zavala's merge:
			// this device's text (changed here, not on the server) wins; so do its completion
			// and order, which it kept no ancestor of (with no ancestor, the client wins).
			let conflict = try #require(milkError)
			#expect(conflict.serverRecord?["order"] as? String == "b0")
			#expect(conflict.clientRecord?["topicData"] as? Data == Data("oat milk".utf8))
			rows[0].apply(conflict)
			#expect(rows[0].isCloudKitMerging)
			let (resaved, _) = try await zone.modify(modelsToSave: rows, recordIDsToDelete: [], strategy: .onlyIfServerUnchanged)
			#expect(resaved.count == 2)
			let milk = try await container.privateCloudDatabase.record(for: rows[0].cloudKitRecordID)
			#expect(milk["topicData"] as? Data == Data("oat milk".utf8))
			#expect(milk["isComplete"] as? String == "0" && milk["order"] as? String == "a0")
			#expect(milk.recordChangeTag != other.recordChangeTag)
			#expect(try await container.privateCloudDatabase.record(for: rows[1].cloudKitRecordID)["topicData"] as? Data == Data("6 eggs".utf8))
		}
	}

	@Test("overwriting (changedKeys) saves a stale row without a conflict; a row whose zone is gone makes the zone error the result", arguments: TestEngine.all)
	@MainActor
	func overwriteAndMissingZone(engine: TestEngine) async throws {
		try await withContainer(on: engine) { container in
			let (zone, _, rows) = try await makeOutline(container, rows: ["milk"])
			_ = try await zone.modify(modelsToSave: rows, recordIDsToDelete: [], strategy: .onlyIfServerUnchanged)
			// No metadata was kept: the row builds a new record, which `.changedKeys` saves over
			// the stored one.
			rows[0].order = "z9"
			let (saved, _) = try await zone.modify(modelsToSave: rows, recordIDsToDelete: [], strategy: .overWriteServerValue)
			#expect(saved.first?["order"] as? String == "z9")

			try await container.privateCloudDatabase.deleteRecordZone(withID: zone.zoneID)
			let error = await #expect(throws: StratusError.self) {
				_ = try await zone.modify(modelsToSave: rows, recordIDsToDelete: [], strategy: .overWriteServerValue)
			}
			#expect(error?.code == .zoneNotFound, "the per-record zone error is the one handed on")

			// A fetch by external ID makes the zone again when it is missing, then finds nothing.
			let missing = await #expect(throws: StratusError.self) { _ = try await zone.fetch(externalID: "milk") }
			#expect(missing?.code == .unknownItem)
			#expect(try await zone.fetchRecordZone().zoneID == zone.zoneID)
		}
	}

	@Test("zone changes reach the delegate with their token; the next fetch starts from it; an expired token starts over", arguments: TestEngine.all)
	@MainActor
	func zoneChanges(engine: TestEngine) async throws {
		try await withContainer(on: engine) { container in
			let (zone, _, rows) = try await makeOutline(container, rows: ["milk", "eggs", "bread"])
			let store = OutlineStore()
			zone.delegate = store
			_ = try await zone.modify(modelsToSave: rows, recordIDsToDelete: [], strategy: .onlyIfServerUnchanged)

			try await zone.fetchChangesInZone()
			try await waitUntil { await store.changed.count == 4 }
			#expect(await store.changed.sorted() == ["bread", "eggs", "milk", "outline-a"])
			let key = VCKChangeTokenKey(zoneName: zone.zoneID.zoneName, ownerName: zone.zoneID.ownerName)
			try await waitUntil { await store.tokens[key] != nil }

			_ = try await zone.modify(modelsToSave: [], recordIDsToDelete: [rows[1].cloudKitRecordID], strategy: .onlyIfServerUnchanged)
			let before = await store.batches
			try await zone.fetchChangesInZone()
			try await waitUntil { await store.batches > before }
			try await waitUntil { await !store.deleted.isEmpty }
			#expect(await store.deleted == ["eggs"])
			#expect(await store.changed.count == 4, "nothing new changed since the token")

			// A token of a zone that was deleted and made again no longer applies: the fetch
			// drops it and reads the zone from the start.
			let staleToken = try #require(await store.tokens[key])
			try await container.privateCloudDatabase.deleteRecordZone(withID: zone.zoneID)
			try await zone.createRecordZone()
			let outlineAgain = Record(recordType: "Outline", recordID: Record.ID(recordName: "outline-a", zoneID: zone.zoneID))
			try await container.privateCloudDatabase.save(outlineAgain)
			_ = try await zone.modify(modelsToSave: [rows[0]], recordIDsToDelete: [], strategy: .overWriteServerValue)
			await store.setToken(staleToken, for: key)
			try await zone.fetchChangesInZone()
			try await waitUntil { await store.changed.count == 6 }
			#expect(await store.changed.suffix(2).sorted() == ["milk", "outline-a"])

			try await zone.subscribeToZoneChanges()
			#expect(try await container.privateCloudDatabase.allSubscriptions().map(\.subscriptionID) == ["Outline-A-changes"])
		}
	}
}

/// Waits (at most a minute) for the delegate calls the zone hands to tasks of their own.
private func waitUntil(_ condition: @escaping () async -> Bool) async throws {
	let deadline = Date().addingTimeInterval(60)
	while !(await condition()) {
		guard Date() < deadline else { throw StratusError(.internalError, "timed out waiting for the zone's delegate") }
		try await Task.sleep(for: .milliseconds(10))
	}
}
