import Foundation
import Stratus
import StratusSQLite
import StratusStores
import StratusTestSupport
import Testing

// A small sync library in the style of the CloudKit sync libraries, ported mechanically: it
// keeps change tokens and each record's system fields as NSKeyedArchiver data (as it would in
// UserDefaults), uses the older operation blocks, and reads errors as NSErrors in CKErrorDomain,
// treating a partial failure as per-record failures and resolving conflicts from the server record.

final class NoteSyncEngine {
    let database: Database
    let zoneID = RecordZone.ID(zoneName: "Notes", ownerName: CurrentUserDefaultName)
    /// What the app shows: note texts by record name.
    private(set) var notes: [String: String] = [:]
    /// What would live in UserDefaults: archived tokens and system fields.
    private(set) var defaults: [String: Data] = [:]
    private var pending: Set<String> = []
    private var clientChangeCounter = 0
    private(set) var lastClientChangeTokenSeen: Data?
    private(set) var conflictsResolved = 0
    private var changedZoneIDs: [RecordZone.ID] = []
    private let lock = NSLock()

    init(database: Database) {
        self.database = database
    }

    // MARK: Local edits

    func edit(_ name: String, text: String) {
        lock.lock(); defer { lock.unlock() }
        notes[name] = text
        pending.insert(name)
    }

    // MARK: Zone

    func createZone(completion: @escaping (Error?) -> Void) {
        let operation = ModifyRecordZonesOperation(recordZonesToSave: [RecordZone(zoneID: zoneID)], recordZoneIDsToDelete: nil)
        operation.modifyRecordZonesCompletionBlock = { _, _, error in completion(error) }
        operation.qualityOfService = .userInitiated
        database.add(operation)
    }

    // MARK: Fetching

    private func token(_ key: String) -> ServerChangeToken? {
        guard let data = defaults[key] else { return nil }
        return try? NSKeyedUnarchiver.unarchivedObject(ofClass: ServerChangeToken.self, from: data)
    }

    private func store(_ token: ServerChangeToken?, _ key: String) {
        guard let token = token, let data = try? NSKeyedArchiver.archivedData(withRootObject: token, requiringSecureCoding: true) else { return }
        defaults[key] = data
    }

    private func storeSystemFields(of record: Record) {
        let coder = NSKeyedArchiver(requiringSecureCoding: true)
        record.encodeSystemFields(with: coder)
        coder.finishEncoding()
        defaults["fields." + record.recordID.recordName] = coder.encodedData
    }

    func fetchChanges(completion: @escaping (Error?) -> Void) {
        changedZoneIDs = []
        let operation = FetchDatabaseChangesOperation(previousServerChangeToken: token("databaseToken"))
        operation.recordZoneWithIDChangedBlock = { zoneID in self.changedZoneIDs.append(zoneID) }
        operation.changeTokenUpdatedBlock = { token in self.store(token, "databaseToken") }
        operation.fetchDatabaseChangesCompletionBlock = { token, _, error in
            if let error = error {
                completion(error)
                return
            }
            self.store(token, "databaseToken")
            let zones = self.changedZoneIDs.filter { $0.zoneName == self.zoneID.zoneName }
            if zones.isEmpty {
                completion(nil)
            } else {
                self.fetchZoneChanges(completion: completion)
            }
        }
        database.add(operation)
    }

    private func fetchZoneChanges(completion: @escaping (Error?) -> Void) {
        let options = FetchRecordZoneChangesOperation.ZoneOptions()
        options.previousServerChangeToken = token("zoneToken")
        options.resultsLimit = 2
        let operation = FetchRecordZoneChangesOperation(recordZoneIDs: [zoneID], optionsByRecordZoneID: [zoneID: options])
        operation.recordChangedBlock = { record in
            self.lock.lock(); defer { self.lock.unlock() }
            if !self.pending.contains(record.recordID.recordName) {
                self.notes[record.recordID.recordName] = record["text"] as? String
            }
            self.storeSystemFields(of: record)
        }
        operation.recordWithIDWasDeletedBlock = { recordID, _ in
            self.lock.lock(); defer { self.lock.unlock() }
            self.notes[recordID.recordName] = nil
        }
        operation.recordZoneChangeTokensUpdatedBlock = { _, token, clientChangeTokenData in
            self.store(token, "zoneToken")
            self.lastClientChangeTokenSeen = clientChangeTokenData
        }
        operation.recordZoneFetchCompletionBlock = { _, token, clientChangeTokenData, _, error in
            if let nsError = error as NSError?, nsError.domain == CKErrorDomainName, nsError.code == StratusError.Code.changeTokenExpired.rawValue {
                self.defaults["zoneToken"] = nil
                return
            }
            self.store(token, "zoneToken")
            self.lastClientChangeTokenSeen = clientChangeTokenData
        }
        operation.fetchRecordZoneChangesCompletionBlock = { error in completion(error) }
        database.add(operation)
    }

    // MARK: Pushing

    private func recordToSave(_ name: String) -> Record {
        let record: Record
        if let data = defaults["fields." + name], let coder = try? NSKeyedUnarchiver(forReadingFrom: data),
           let restored = Record(coder: coder) {
            record = restored
        } else {
            record = Record(recordType: "Note", recordID: Record.ID(recordName: name, zoneID: zoneID))
        }
        record["text"] = notes[name] as RecordValue?
        return record
    }

    func push(completion: @escaping (Error?) -> Void) {
        lock.lock()
        let records = pending.sorted().map(recordToSave)
        clientChangeCounter += 1
        let clientToken = Data("client-\(clientChangeCounter)".utf8)
        lock.unlock()
        guard !records.isEmpty else {
            completion(nil)
            return
        }
        let operation = ModifyRecordsOperation(recordsToSave: records, recordIDsToDelete: nil)
        operation.savePolicy = .ifServerRecordUnchanged
        operation.clientChangeTokenData = clientToken
        operation.perRecordCompletionBlock = { record, error in
            guard error == nil else { return }
            self.lock.lock(); defer { self.lock.unlock() }
            self.pending.remove(record.recordID.recordName)
            self.storeSystemFields(of: record)
        }
        operation.modifyRecordsCompletionBlock = { _, _, error in
            guard let error = error else {
                completion(nil)
                return
            }
            // What CloudKit sync code does: a partial failure is per-record failures.
            let nsError = error as NSError
            guard nsError.domain == CKErrorDomainName, nsError.code == StratusError.Code.partialFailure.rawValue,
                  let partial = nsError.userInfo[PartialErrorsByItemIDKey] as? [AnyHashable: Error]
            else {
                completion(error)
                return
            }
            var retry = false
            for (key, itemError) in partial {
                guard let recordID = key as? Record.ID else { continue }
                let itemNSError = itemError as NSError
                if itemNSError.code == StratusError.Code.serverRecordChanged.rawValue,
                   let server = itemNSError.userInfo[RecordChangedErrorServerRecordKey] as? Record {
                    self.lock.lock()
                    let mine = self.notes[recordID.recordName] ?? ""
                    let theirs = server["text"] as? String ?? ""
                    self.notes[recordID.recordName] = theirs + " + " + mine
                    self.storeSystemFields(of: server)
                    self.conflictsResolved += 1
                    self.lock.unlock()
                    retry = true
                } else if itemNSError.code == StratusError.Code.batchRequestFailed.rawValue {
                    retry = true
                }
            }
            if retry {
                self.push(completion: completion)
            } else {
                completion(error)
            }
        }
        database.add(operation)
    }
}

/// The domain a CloudKit sync library compares against (`CKErrorDomain` after the port).
let CKErrorDomainName = ErrorDomain

@Suite("A CloudKit sync library, ported mechanically", .timeLimit(.minutes(30)))
struct SyncLibraryTests {
    func wait(_ start: (@escaping (Error?) -> Void) -> Void) async -> Error? {
        await awaitCallback { done in start { done($0) } }
    }

    @Test("two devices sync through one store: changes arrive, a conflict is a partial failure resolved from the server record", arguments: TestEngine.all)
    func twoDevices(engine: TestEngine) async throws {
        try await withStore(on: engine) { location, store in
            // Two "devices": two engines on the same store, the same user.
            let phone = NoteSyncEngine(database: Container(identifier: "iCloud.com.example.notes", engine: try openOwnEngine(location), userName: "alice").privateCloudDatabase)
            let laptop = NoteSyncEngine(database: Container(identifier: "iCloud.com.example.notes", engine: try openOwnEngine(location), userName: "alice").privateCloudDatabase)

            #expect(await wait(phone.createZone) == nil)
            phone.edit("groceries", text: "milk")
            phone.edit("ideas", text: "sync")
            phone.edit("todo", text: "call")
            #expect(await wait(phone.push) == nil)

            #expect(await wait(laptop.fetchChanges) == nil)
            #expect(laptop.notes == ["groceries": "milk", "ideas": "sync", "todo": "call"])

            laptop.edit("groceries", text: "bread")
            #expect(await wait(laptop.push) == nil)

            // The phone's copy is stale: saving it is a conflict, reported as a partial failure.
            phone.edit("groceries", text: "eggs")
            #expect(await wait(phone.push) == nil, "the partial failure is handled, not fatal")
            #expect(phone.conflictsResolved == 1)
            #expect(phone.notes["groceries"] == "bread + eggs")

            #expect(await wait(laptop.fetchChanges) == nil)
            #expect(laptop.notes["groceries"] == "bread + eggs")
            #expect(await wait(phone.fetchChanges) == nil)
            // Pushes 1 and 3 wrote (push 2 was the conflict, which wrote nothing): the last written comes back.
            #expect(phone.lastClientChangeTokenSeen == Data("client-3".utf8), "the phone's own last client token comes back")

            // Nothing new: the archived tokens continue where the last fetch stopped.
            #expect(await wait(laptop.fetchChanges) == nil)
            #expect(laptop.notes.count == 3)
        }
    }
}
