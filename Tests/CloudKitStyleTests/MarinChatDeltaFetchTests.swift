import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// The delta fetch of 4-Marin's chat manager (2001Y/app-4-marin:
// `forMarin/Controllers/CloudKitChatManager.swift`), ported. A `@MainActor` class that keeps a
// change token per database scope and per zone (keyed `"\(scope.rawValue)|zone|owner"`), archives
// them with `NSKeyedArchiver(requiringSecureCoding: true)` into `UserDefaults` (the zone tokens
// as one `[String: Data]` dictionary), and fetches with `CKFetchDatabaseChangesOperation`
// (`changeTokenUpdatedBlock`, `fetchDatabaseChangesResultBlock`'s `serverChangeToken`, the
// default zone left out by `CKRecordZone.ID.defaultZoneName`) and one
// `CKFetchRecordZoneChangesOperation` over several zones, each with a
// `ZoneConfiguration(previousServerChangeToken:resultsLimit:desiredKeys:)`, in a named
// `CKOperationGroup`. `changeTokenExpired`, `zoneNotFound` and `userDeletedZone`, alone or inside
// a `partialFailure`'s `partialErrorsByItemID`, mean "start again" (`requiresFullReset`). Its
// tutorial messages are saved with `rec["text"] = body as CKRecordValue`.
//
// What the port changes: the README's substitutions (the `CK` prefix, `.CKAccountChanged` →
// `.AccountChanged`); the container is handed in (`CKContainer(identifier:)` is
// `try! Container(identifier:)` by the README; the tests need a store each) and `init` is not
// `private` (the app's `static let shared` is the only caller); `log(_:category:)` is the stand-in
// below; the functions the tests call are not `private`; the account observer's token is
// dropped with `_ =` (Linux's Foundation warns otherwise, see the README). Left out: everything about rooms,
// shares, signalling and profiles (sharing is not in Stratus, see the README), SwiftData and
// the sync-engine reset.

// MARK: - Stand-ins

/// The app's logger (`log("…", category: "zone")`), kept for the tests.
let marinLog = SampleLog()
func log(_ message: String, category: String) { marinLog.append("[\(category)] \(message)") }

enum CloudKitChatError: Error {
    case requiresFullReset
    case recordSaveFailed
    case userNotAuthenticated
}

// MARK: - CloudKitChatManager.swift (the delta fetch)

@MainActor
final class CloudKitChatManager {
    private let container: Container
    let privateDB: Database
    let sharedDB: Database

    private let privateDBTokenKey = "CloudKitChatManager.PrivateDBChangeToken"
    private let sharedDBTokenKey = "CloudKitChatManager.SharedDBChangeToken"
    private let zoneTokenKey = "CloudKitChatManager.ZoneChangeTokens"

    private var privateDBChangeToken: ServerChangeToken?
    private var sharedDBChangeToken: ServerChangeToken?
    private var zoneChangeTokens: [String: ServerChangeToken] = [:]

    struct DatabaseChangeSummary {
        let changedZoneIDs: [RecordZone.ID]
        let deletedZoneIDs: [RecordZone.ID]
    }

    struct ZoneChangeBatch {
        let changedRecords: [Record]
        let deletedRecordIDs: [Record.ID]
    }

    var currentUserID: String?
    var accountChanges = 0

    init(container: Container) {
        self.container = container
        self.privateDB = container.privateCloudDatabase
        self.sharedDB = container.sharedCloudDatabase
        setupSyncNotificationObservers()
        loadChangeTokens()
    }

    private func setupSyncNotificationObservers() {
        // `_ =`: Linux's Foundation does not mark the observer token discardable (see the README).
        _ = NotificationCenter.default.addObserver(
            forName: Notification.Name.AccountChanged,
            object: nil,
            queue: .main
        ) { [weak self] _ in
            Task { [weak self] in
                await self?.handleAccountChanged()
            }
        }
    }

    func handleAccountChanged() async {
        log("[ACCOUNT] CloudKit account change detected. Resetting state...", category: "account")
        currentUserID = nil
        accountChanges += 1
        clearAllChangeTokens()
    }

    // MARK: - Tutorial Seeding (CloudKit)
    /// ルーム作成時にチュートリアルメッセージをCloudKitへ投入
    func seedTutorialMessages(to zoneID: RecordZone.ID, ownerID: String) async {
        let samples: [String] = [
            "4-Marinへようこそ！🌊",
            "大切な人と2人だけの空間です",
            "😊",
            "画像も送れます📸",
            "リアクションもできるよ",
            "長押しで編集もできます",
            "ビデオ通話やカレンダー共有も",
            "2人だけの思い出を作ろう💕"
        ]
        var records: [Record] = []
        let roomID = zoneID.zoneName
        for (idx, body) in samples.enumerated() {
            let recID = Record.ID(recordName: UUID().uuidString, zoneID: zoneID)
            let rec = Record(recordType: "Message", recordID: recID)
            rec["roomID"] = roomID as RecordValue
            rec["senderID"] = ownerID as RecordValue
            rec["text"] = body as RecordValue
            let ts = Date().addingTimeInterval(TimeInterval(idx))
            rec["timestamp"] = ts as RecordValue
            records.append(rec)
        }
        do {
            _ = try await privateDB.modifyRecords(saving: records, deleting: [])
            log("✅ [SEED] Seeded tutorial messages (\(records.count)) to zone: \(roomID)", category: "zone")
        } catch {
            log("⚠️ [SEED] Failed to seed tutorial messages: \(error)", category: "zone")
        }
    }

    // MARK: - Change Tokens & Delta Fetch

    private func database(for scope: Database.Scope) -> Database {
        switch scope {
        case .shared: return sharedDB
        default: return privateDB
        }
    }

    private func changeToken(for scope: Database.Scope) -> ServerChangeToken? {
        switch scope {
        case .shared: return sharedDBChangeToken
        default: return privateDBChangeToken
        }
    }

    private func setChangeToken(_ token: ServerChangeToken?, for scope: Database.Scope) {
        switch scope {
        case .shared: sharedDBChangeToken = token
        default: privateDBChangeToken = token
        }
    }

    private func zoneTokenKey(for scope: Database.Scope, zoneID: RecordZone.ID) -> String {
        let ownerName = zoneID.ownerName
        return "\(scope.rawValue)|\(zoneID.zoneName)|\(ownerName)"
    }

    func zoneToken(for scope: Database.Scope, zoneID: RecordZone.ID) -> ServerChangeToken? {
        zoneChangeTokens[zoneTokenKey(for: scope, zoneID: zoneID)]
    }

    private func setZoneToken(_ token: ServerChangeToken?, for scope: Database.Scope, zoneID: RecordZone.ID) {
        let key = zoneTokenKey(for: scope, zoneID: zoneID)
        if let token {
            zoneChangeTokens[key] = token
        } else {
            zoneChangeTokens.removeValue(forKey: key)
        }
    }

    private func loadChangeTokens() {
        let defaults = UserDefaults.standard
        if let data = defaults.data(forKey: privateDBTokenKey),
           let token = try? NSKeyedUnarchiver.unarchivedObject(ofClass: ServerChangeToken.self, from: data) {
            privateDBChangeToken = token
        }
        if let data = defaults.data(forKey: sharedDBTokenKey),
           let token = try? NSKeyedUnarchiver.unarchivedObject(ofClass: ServerChangeToken.self, from: data) {
            sharedDBChangeToken = token
        }
        if let raw = defaults.dictionary(forKey: zoneTokenKey) as? [String: Data] {
            var restored: [String: ServerChangeToken] = [:]
            for (key, data) in raw {
                if let token = try? NSKeyedUnarchiver.unarchivedObject(ofClass: ServerChangeToken.self, from: data) {
                    restored[key] = token
                }
            }
            zoneChangeTokens = restored
        }
    }

    private func persistChangeTokens() {
        let defaults = UserDefaults.standard
        if let token = privateDBChangeToken,
           let data = try? NSKeyedArchiver.archivedData(withRootObject: token, requiringSecureCoding: true) {
            defaults.set(data, forKey: privateDBTokenKey)
        } else {
            defaults.removeObject(forKey: privateDBTokenKey)
        }
        if let token = sharedDBChangeToken,
           let data = try? NSKeyedArchiver.archivedData(withRootObject: token, requiringSecureCoding: true) {
            defaults.set(data, forKey: sharedDBTokenKey)
        } else {
            defaults.removeObject(forKey: sharedDBTokenKey)
        }
        var raw: [String: Data] = [:]
        for (key, token) in zoneChangeTokens {
            if let data = try? NSKeyedArchiver.archivedData(withRootObject: token, requiringSecureCoding: true) {
                raw[key] = data
            }
        }
        defaults.set(raw, forKey: zoneTokenKey)
    }

    private func clearChangeTokens(for scope: Database.Scope) {
        setChangeToken(nil, for: scope)
        let prefix = "\(scope.rawValue)|"
        zoneChangeTokens = zoneChangeTokens.filter { !$0.key.hasPrefix(prefix) }
    }

    func clearAllChangeTokens() {
        clearChangeTokens(for: .private)
        clearChangeTokens(for: .shared)
        persistChangeTokens()
    }

    private func shouldTriggerFullReset(for error: Error) -> Bool {
        guard let ckError = error as? StratusError else { return false }
        switch ckError.code {
        case .changeTokenExpired, .zoneNotFound, .userDeletedZone:
            return true
        case .partialFailure:
            if let partials = ckError.partialErrorsByItemID?.values {
                return partials.contains { shouldTriggerFullReset(for: $0) }
            }
            return false
        default:
            return false
        }
    }

    func fetchDatabaseChanges(scope: Database.Scope) async throws -> DatabaseChangeSummary {
        let database = database(for: scope)
        let previousToken = changeToken(for: scope)
        return try await withCheckedThrowingContinuation { continuation in
            let operation = FetchDatabaseChangesOperation(previousServerChangeToken: previousToken)
            operation.qualityOfService = .userInitiated
            var changed: [RecordZone.ID] = []
            var deleted: [RecordZone.ID] = []

            operation.recordZoneWithIDChangedBlock = { zoneID in
                if zoneID.zoneName != RecordZone.ID.defaultZoneName {
                    changed.append(zoneID)
                }
            }

            operation.recordZoneWithIDWasDeletedBlock = { zoneID in
                if zoneID.zoneName != RecordZone.ID.defaultZoneName {
                    deleted.append(zoneID)
                    self.setZoneToken(nil, for: scope, zoneID: zoneID)
                }
            }

            operation.changeTokenUpdatedBlock = { newToken in
                self.setChangeToken(newToken, for: scope)
            }

            operation.fetchDatabaseChangesResultBlock = { result in
                switch result {
                case .success(let payload):
                    self.setChangeToken(payload.serverChangeToken, for: scope)
                    self.persistChangeTokens()
                    continuation.resume(returning: DatabaseChangeSummary(changedZoneIDs: changed, deletedZoneIDs: deleted))
                case .failure(let error):
                    if self.shouldTriggerFullReset(for: error) {
                        self.clearChangeTokens(for: scope)
                        self.persistChangeTokens()
                        continuation.resume(throwing: CloudKitChatError.requiresFullReset)
                    } else {
                        continuation.resume(throwing: error)
                    }
                }
            }

            database.add(operation)
        }
    }

    func extractSavedRecord(from results: [Record.ID: Result<Record, Error>], recordID: Record.ID) throws -> Record {
        guard let outcome = results[recordID] else {
            throw CloudKitChatError.recordSaveFailed
        }
        switch outcome {
        case .success(let record):
            return record
        case .failure(let error):
            throw error
        }
    }

    func fetchRecordZoneChanges(scope: Database.Scope,
                                zoneIDs: [RecordZone.ID],
                                desiredKeys: [String]? = nil) async throws -> ZoneChangeBatch {
        guard !zoneIDs.isEmpty else {
            return ZoneChangeBatch(changedRecords: [], deletedRecordIDs: [])
        }

        let database = database(for: scope)
        var configurations: [RecordZone.ID: FetchRecordZoneChangesOperation.ZoneConfiguration] = [:]
        for zoneID in zoneIDs {
            let configuration = FetchRecordZoneChangesOperation.ZoneConfiguration(
                previousServerChangeToken: zoneToken(for: scope, zoneID: zoneID),
                resultsLimit: nil,
                desiredKeys: desiredKeys
            )
            configurations[zoneID] = configuration
        }

        return try await withCheckedThrowingContinuation { continuation in
            let operation = FetchRecordZoneChangesOperation(recordZoneIDs: zoneIDs, configurationsByRecordZoneID: configurations)
            operation.qualityOfService = .userInitiated
            let group = OperationGroup()
            group.name = "sync.fetchZoneChanges.\(scope.rawValue)"
            operation.group = group

            var changedRecords: [Record] = []
            var deletedRecordIDs: [Record.ID] = []
            var requiresReset = false

            operation.recordWasChangedBlock = { _, result in
                switch result {
                case .success(let record):
                    changedRecords.append(record)
                case .failure(let error):
                    log("[SYNC] Failed to fetch changed record: \(error)", category: "sync")
                }
            }

            operation.recordWithIDWasDeletedBlock = { recordID, _ in
                deletedRecordIDs.append(recordID)
            }

            operation.recordZoneChangeTokensUpdatedBlock = { zoneID, token, _ in
                self.setZoneToken(token, for: scope, zoneID: zoneID)
            }

            operation.recordZoneFetchResultBlock = { zoneID, result in
                switch result {
                case .success(let payload):
                    self.setZoneToken(payload.serverChangeToken, for: scope, zoneID: zoneID)
                case .failure(let error):
                    if self.shouldTriggerFullReset(for: error) {
                        self.setZoneToken(nil, for: scope, zoneID: zoneID)
                        requiresReset = true
                    } else {
                        log("[SYNC] Zone fetch error for \(zoneID.zoneName): \(error)", category: "sync")
                    }
                }
            }

            operation.fetchRecordZoneChangesResultBlock = { result in
                if requiresReset {
                    self.persistChangeTokens()
                    continuation.resume(throwing: CloudKitChatError.requiresFullReset)
                    return
                }

                switch result {
                case .success:
                    self.persistChangeTokens()
                    continuation.resume(returning: ZoneChangeBatch(changedRecords: changedRecords, deletedRecordIDs: deletedRecordIDs))
                case .failure(let error):
                    if self.shouldTriggerFullReset(for: error) {
                        self.persistChangeTokens()
                        continuation.resume(throwing: CloudKitChatError.requiresFullReset)
                    } else {
                        continuation.resume(throwing: error)
                    }
                }
            }

            database.add(operation)
        }
    }
}

// MARK: - Tests

private let tokenKeys = ["CloudKitChatManager.PrivateDBChangeToken", "CloudKitChatManager.SharedDBChangeToken", "CloudKitChatManager.ZoneChangeTokens"]

/// The app keeps its tokens in `UserDefaults.standard`; each test starts without them.
private func forgetTokens() {
    for key in tokenKeys { UserDefaults.standard.removeObject(forKey: key) }
}

@Suite("4-Marin's delta fetch, ported", .serialized)
@MainActor
struct MarinChatDeltaFetchTests {
    @Test("rooms: the database fetch names the changed zones (not the default zone), the zone fetch their messages, and the kept tokens make the next fetch a delta", arguments: TestEngine.all)
    func deltaFetch(engine: TestEngine) async throws {
        forgetTokens()
        defer { forgetTokens() }
        try await withContainer(on: engine) { container in
            let manager = CloudKitChatManager(container: container)
            let roomA = RecordZone.ID(zoneName: "room-a")
            let roomB = RecordZone.ID(zoneName: "room-b")
            _ = try await manager.privateDB.modifyRecordZones(saving: [RecordZone(zoneID: roomA), RecordZone(zoneID: roomB)], deleting: [])
            await manager.seedTutorialMessages(to: roomA, ownerID: "_owner")
            await manager.seedTutorialMessages(to: roomB, ownerID: "_owner")
            let loose = Record(recordType: "Note", recordID: Record.ID(recordName: "loose"))
            _ = try await manager.privateDB.save(loose)

            let summary = try await manager.fetchDatabaseChanges(scope: .private)
            #expect(Set(summary.changedZoneIDs) == [roomA, roomB])
            #expect(summary.deletedZoneIDs.isEmpty)

            let batch = try await manager.fetchRecordZoneChanges(scope: .private, zoneIDs: summary.changedZoneIDs, desiredKeys: ["text", "timestamp"])
            #expect(batch.changedRecords.count == 16)
            let first = try #require(batch.changedRecords.first { $0["text"] as? String == "4-Marinへようこそ！🌊" })
            #expect(first["timestamp"] is Date)
            #expect(first["roomID"] == nil, "only the desired keys")
            #expect(manager.zoneToken(for: .private, zoneID: roomA) != nil && manager.zoneToken(for: .private, zoneID: roomB) != nil)

            // Nothing new: the database names no zone, the zones give nothing.
            #expect(try await manager.fetchDatabaseChanges(scope: .private).changedZoneIDs.isEmpty)
            let none = try await manager.fetchRecordZoneChanges(scope: .private, zoneIDs: [roomA, roomB])
            #expect(none.changedRecords.isEmpty && none.deletedRecordIDs.isEmpty)

            // One message deleted in room A, one added in room B.
            let gone = first.recordID
            _ = try await manager.privateDB.modifyRecords(saving: [], deleting: [gone])
            let reply = Record(recordType: "Message", recordID: Record.ID(recordName: "reply", zoneID: roomB))
            reply["text"] = "ありがとう"
            _ = try await manager.privateDB.save(reply)
            let next = try await manager.fetchDatabaseChanges(scope: .private)
            #expect(Set(next.changedZoneIDs) == [roomA, roomB])
            let delta = try await manager.fetchRecordZoneChanges(scope: .private, zoneIDs: next.changedZoneIDs)
            #expect(delta.changedRecords.map(\.recordID.recordName) == ["reply"])
            #expect(delta.deletedRecordIDs == [gone])
        }
    }

    @Test("tokens archived into UserDefaults carry over to a new manager; clearing them starts from the beginning", arguments: TestEngine.all)
    func tokensPersist(engine: TestEngine) async throws {
        forgetTokens()
        defer { forgetTokens() }
        try await withContainer(on: engine) { container in
            let manager = CloudKitChatManager(container: container)
            let room = RecordZone.ID(zoneName: "room")
            _ = try await manager.privateDB.save(RecordZone(zoneID: room))
            await manager.seedTutorialMessages(to: room, ownerID: "_owner")
            _ = try await manager.fetchDatabaseChanges(scope: .private)
            _ = try await manager.fetchRecordZoneChanges(scope: .private, zoneIDs: [room])
            let stored = UserDefaults.standard.dictionary(forKey: "CloudKitChatManager.ZoneChangeTokens") as? [String: Data]
            #expect(stored?.keys.sorted() == ["2|room|__defaultOwner__"], "scope raw value (private is 2, as CloudKit's), zone name, owner")

            let relaunched = CloudKitChatManager(container: container)
            #expect(try await relaunched.fetchDatabaseChanges(scope: .private).changedZoneIDs.isEmpty)
            #expect(try await relaunched.fetchRecordZoneChanges(scope: .private, zoneIDs: [room]).changedRecords.isEmpty)

            relaunched.clearAllChangeTokens()
            #expect(try await relaunched.fetchDatabaseChanges(scope: .private).changedZoneIDs == [room])
            #expect(try await relaunched.fetchRecordZoneChanges(scope: .private, zoneIDs: [room]).changedRecords.count == 8)
        }
    }

    @Test("a deleted room: the database fetch names it, and a zone fetch of it asks for a full reset and drops its token", arguments: TestEngine.all)
    func deletedRoom(engine: TestEngine) async throws {
        forgetTokens()
        defer { forgetTokens() }
        try await withContainer(on: engine) { container in
            let manager = CloudKitChatManager(container: container)
            let kept = RecordZone.ID(zoneName: "kept")
            let gone = RecordZone.ID(zoneName: "gone")
            _ = try await manager.privateDB.modifyRecordZones(saving: [RecordZone(zoneID: kept), RecordZone(zoneID: gone)], deleting: [])
            await manager.seedTutorialMessages(to: gone, ownerID: "_owner")
            _ = try await manager.fetchDatabaseChanges(scope: .private)
            _ = try await manager.fetchRecordZoneChanges(scope: .private, zoneIDs: [kept, gone])
            #expect(manager.zoneToken(for: .private, zoneID: gone) != nil)

            _ = try await manager.privateDB.deleteRecordZone(withID: gone)
            let summary = try await manager.fetchDatabaseChanges(scope: .private)
            #expect(summary.deletedZoneIDs == [gone])
            #expect(manager.zoneToken(for: .private, zoneID: gone) == nil, "the deletion drops the zone's token")

            // Fetching it anyway: zoneNotFound for that zone, so the app starts over.
            await #expect(throws: CloudKitChatError.self) {
                _ = try await manager.fetchRecordZoneChanges(scope: .private, zoneIDs: [kept, gone])
            }
        }
    }

    @Test("the shared database (no shares in Stratus) fetches as an empty database; a saved record is read out of modifyRecords' results", arguments: TestEngine.all)
    func sharedAndSaveResults(engine: TestEngine) async throws {
        forgetTokens()
        defer { forgetTokens() }
        try await withContainer(on: engine) { container in
            let manager = CloudKitChatManager(container: container)
            let summary = try await manager.fetchDatabaseChanges(scope: .shared)
            #expect(summary.changedZoneIDs.isEmpty && summary.deletedZoneIDs.isEmpty)
            #expect(UserDefaults.standard.data(forKey: "CloudKitChatManager.SharedDBChangeToken") != nil)

            let record = Record(recordType: "Message", recordID: Record.ID(recordName: "m1"))
            record["text"] = "hi"
            let results = try await manager.privateDB.modifyRecords(saving: [record], deleting: [])
            let saved = try manager.extractSavedRecord(from: results.saveResults, recordID: record.recordID)
            #expect(saved["text"] as? String == "hi" && saved.recordChangeTag != nil)
            #expect(throws: CloudKitChatError.self) {
                _ = try manager.extractSavedRecord(from: results.saveResults, recordID: Record.ID(recordName: "other"))
            }
        }
    }

    @Test("an account change clears every kept token", arguments: TestEngine.all)
    func accountChange(engine: TestEngine) async throws {
        forgetTokens()
        defer { forgetTokens() }
        try await withContainer(on: engine) { container in
            let manager = CloudKitChatManager(container: container)
            _ = try await manager.fetchDatabaseChanges(scope: .private)
            #expect(UserDefaults.standard.data(forKey: "CloudKitChatManager.PrivateDBChangeToken") != nil)
            // What the observer of `.AccountChanged` runs (Stratus never posts it, and a post here
            // would reach every other suite's observers in this process).
            await manager.handleAccountChanged()
            #expect(manager.accountChanges == 1)
            #expect(UserDefaults.standard.data(forKey: "CloudKitChatManager.PrivateDBChangeToken") == nil)
        }
    }
}
