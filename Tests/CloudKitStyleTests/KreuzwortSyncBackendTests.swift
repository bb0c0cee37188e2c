import Foundation
import Stratus
import StratusSQLite
import StratusStores
import StratusTestSupport
import Testing

// A crossword app's CKSyncEngine backend, ported mechanically: the `CloudKitSyncBackend` of a
// Swift package ("Kreuzwort", found by its `CKSyncEngine.RecordZoneChangeBatch` use; the file is
// guarded by `#if canImport(CloudKit)`). Its German comments are left out. Changes besides the
// README's substitutions: the container is handed in (a store file per test), `SyncRecord`,
// `SyncBackend` and `SyncError` (from the app's PuzzleKit) are stand-ins below, and the tests
// reach the engine to call `sendChanges()`/`fetchChanges()` instead of waiting for it. The app
// never makes its zone (its author notes it never ran against CloudKit): the tests make it, as
// CloudKit, like Stratus, refuses records for a missing zone.

public struct SyncRecord: Equatable, Sendable {
    public enum Kind: String, Sendable { case puzzle, progress }
    public var kind: Kind
    public var id: String
    public var payload: Data
    public var deviceID: UInt32
}

public enum SyncError: Error { case unavailable }

public protocol SyncBackend: AnyObject {
    var isAvailable: Bool { get }
    func start() async
    func upload(_ records: [SyncRecord]) async throws
    func downloadChanges() async throws -> [SyncRecord]
}

public final class CloudKitSyncBackend: NSObject, SyncBackend, @unchecked Sendable {
    public static let containerIdentifier = "iCloud.com.kreuzwort"
    static let zoneName = "Kreuzwort"
    private static let recordType = "SyncRecord"

    private let container: Container
    private let database: Database
    private let zoneID: RecordZone.ID
    private let stateURL: URL
    private let lock = NSLock()

    private(set) var engine: SyncEngine?
    private var outgoing: [Record.ID: SyncRecord] = [:]
    private var downloaded: [SyncRecord] = []
    private var available = false

    public init(container: Container, stateDirectory: URL) throws {
        self.container = container
        database = container.privateCloudDatabase
        zoneID = RecordZone.ID(zoneName: Self.zoneName, ownerName: CurrentUserDefaultName)
        let base = stateDirectory.appendingPathComponent("Kreuzwort")
        try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
        stateURL = base.appendingPathComponent("cksyncengine.state")
        super.init()
    }

    public var isAvailable: Bool { lock.withLock { available } }

    public func start() async {
        do {
            let status = try await container.accountStatus()
            guard status == .available else {
                lock.withLock { available = false }
                return
            }
        } catch {
            lock.withLock { available = false }
            return
        }

        var configuration = SyncEngine.Configuration(
            database: database,
            stateSerialization: loadState(),
            delegate: self)
        configuration.automaticallySync = true
        let engine = SyncEngine(configuration)
        lock.withLock {
            self.engine = engine
            self.available = true
        }
    }

    public func upload(_ records: [SyncRecord]) async throws {
        guard let engine = lock.withLock({ engine }) else { throw SyncError.unavailable }
        var ids: [Record.ID] = []
        lock.withLock {
            for record in records {
                let id = Record.ID(recordName: "\(record.kind.rawValue)-\(record.id)",
                                   zoneID: zoneID)
                outgoing[id] = record
                ids.append(id)
            }
        }
        engine.state.add(pendingRecordZoneChanges: ids.map { .saveRecord($0) })
    }

    public func downloadChanges() async throws -> [SyncRecord] {
        guard lock.withLock({ engine }) != nil else { throw SyncError.unavailable }
        return lock.withLock {
            let result = downloaded
            downloaded = []
            return result
        }
    }

    var pendingUploads: Int { lock.withLock { outgoing.count } }

    // MARK: - State

    private func loadState() -> SyncEngine.State.Serialization? {
        guard let data = try? Data(contentsOf: stateURL) else { return nil }
        return try? JSONDecoder().decode(SyncEngine.State.Serialization.self, from: data)
    }

    private func save(state: SyncEngine.State.Serialization) {
        guard let data = try? JSONEncoder().encode(state) else { return }
        try? data.write(to: stateURL, options: .atomic)
    }

    // MARK: - Mapping

    private func makeCKRecord(from record: SyncRecord, id: Record.ID) -> Record {
        let ck = Record(recordType: Self.recordType, recordID: id)
        ck["kind"] = record.kind.rawValue as RecordValue
        ck["id"] = record.id as RecordValue
        ck["deviceID"] = Int64(record.deviceID) as RecordValue
        ck["payload"] = record.payload as RecordValue
        return ck
    }

    private func makeSyncRecord(from ck: Record) -> SyncRecord? {
        guard let kindRaw = ck["kind"] as? String,
              let kind = SyncRecord.Kind(rawValue: kindRaw),
              let id = ck["id"] as? String,
              let payload = ck["payload"] as? Data
        else { return nil }
        let device = (ck["deviceID"] as? Int64).map { UInt32(truncatingIfNeeded: $0) } ?? 0
        return SyncRecord(kind: kind, id: id, payload: payload, deviceID: device)
    }
}

extension CloudKitSyncBackend: SyncEngineDelegate {
    public func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
        switch event {
        case .stateUpdate(let update):
            save(state: update.stateSerialization)

        case .fetchedRecordZoneChanges(let changes):
            let records = changes.modifications.compactMap { makeSyncRecord(from: $0.record) }
            lock.withLock { downloaded += records }

        case .sentRecordZoneChanges(let sent):
            for failed in sent.failedRecordSaves {
                let id = failed.record.recordID
                guard lock.withLock({ outgoing[id] != nil }) else { continue }
                syncEngine.state.add(pendingRecordZoneChanges: [.saveRecord(id)])
            }
            lock.withLock {
                for saved in sent.savedRecords { outgoing.removeValue(forKey: saved.recordID) }
            }

        case .accountChange(let change):
            switch change.changeType {
            case .signOut: lock.withLock { available = false }
            case .signIn, .switchAccounts: lock.withLock { available = true }
            @unknown default: break
            }

        default:
            break
        }
    }

    public func nextRecordZoneChangeBatch(
        _ context: SyncEngine.SendChangesContext,
        syncEngine: SyncEngine) async -> SyncEngine.RecordZoneChangeBatch? {
        let scope = context.options.scope
        let pending = syncEngine.state.pendingRecordZoneChanges.filter { scope.contains($0) }
        return await SyncEngine.RecordZoneChangeBatch(pendingChanges: pending) { id in
            guard let record = self.lock.withLock({ self.outgoing[id] }) else { return nil }
            return self.makeCKRecord(from: record, id: id)
        }
    }
}

@Suite("A crossword app's CKSyncEngine backend, ported")
struct KreuzwortSyncBackendTests {
    @Test("records uploaded on one device are downloaded on another, with their typed fields", arguments: TestEngine.all)
    func uploadThenDownloadElsewhere(engine: TestEngine) async throws {
        try await withStore(on: engine) { location, store in
            let phone = try Container(identifier: CloudKitSyncBackend.containerIdentifier, store: location, userName: "alice")
            let laptop = try Container(identifier: CloudKitSyncBackend.containerIdentifier, store: location, userName: "alice")
            let zoneID = RecordZone.ID(zoneName: CloudKitSyncBackend.zoneName, ownerName: CurrentUserDefaultName)
            _ = try await phone.privateCloudDatabase.save(RecordZone(zoneID: zoneID))
            let states = FileManager.default.temporaryDirectory.appendingPathComponent("kreuzwort-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: states) }

            let sender = try CloudKitSyncBackend(container: phone, stateDirectory: states.appendingPathComponent("phone"))
            await sender.start()
            #expect(sender.isAvailable)
            let solved = SyncRecord(kind: .progress, id: "2024-05-01", payload: Data([1, 2, 3]), deviceID: 0xFFFF_FFF0)
            try await sender.upload([solved, SyncRecord(kind: .puzzle, id: "p9", payload: Data("grid".utf8), deviceID: 7)])
            try await sender.engine?.sendChanges()
            #expect(sender.pendingUploads == 0)

            let receiver = try CloudKitSyncBackend(container: laptop, stateDirectory: states.appendingPathComponent("laptop"))
            await receiver.start()
            try await receiver.engine?.fetchChanges()
            let received = try await receiver.downloadChanges()
            #expect(received.sorted { $0.id < $1.id } == [solved, SyncRecord(kind: .puzzle, id: "p9", payload: Data("grid".utf8), deviceID: 7)])
            #expect(try await receiver.downloadChanges().isEmpty)
        }
    }

    @Test("a save into the missing zone fails, and the backend queues it again", arguments: TestEngine.all)
    func missingZoneKeepsTheUploadPending(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let states = FileManager.default.temporaryDirectory.appendingPathComponent("kreuzwort-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: states) }
            let backend = try CloudKitSyncBackend(container: container, stateDirectory: states)
            await backend.start()
            try await backend.upload([SyncRecord(kind: .puzzle, id: "p1", payload: Data(), deviceID: 1)])
            await #expect(throws: StratusError.self) { try await backend.engine?.sendChanges() }
            #expect(backend.pendingUploads == 1)
            #expect(backend.engine?.state.pendingRecordZoneChanges.count == 1)
        }
    }
}
