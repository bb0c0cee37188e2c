import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// Forked's CloudKit asset store (drewmccormack/Forked: `Sources/ForkedCloudKit/CloudKitAssets.swift`,
// at commit 02c5a5b), ported. A folder of files kept in sync through `CKSyncEngine`: the engine's
// state archived as JSON into a file inside that folder on every `stateUpdate`; a zone created
// through `state.add(pendingDatabaseChanges: [.saveZone(…)])`; each added file a pending
// `.saveRecord` whose record `nextRecordZoneChangeBatch` builds afresh (a new `CKRecord`, no
// system fields kept) with the file as a `CKAsset`, or split into `asset_partN` assets past 50 MB;
// deletions sent as a soft delete (`deleted = true`, every asset field set to `nil`); fetched
// modifications fetched again with `engine.database.record(for:)` and written back into the
// folder; local and remote changes announced on `AsyncStream`s; failed sends ignored.
//
// What the port changes: the README's substitutions (the `CK` prefix; `CKSyncEngine` is
// `SyncEngine`); `import AsyncAlgorithms` is dropped (nothing in the file uses it); `engine` is not
// `private` (the tests drive `sendChanges()` and `fetchChanges()` as Apple's sample tests drive
// theirs, beside the engine's own automatic syncing, which this code keeps on); `self.` is written
// in one closure nested in a `[weak self]` closure, which Swift 6 language mode (Forked's) reads
// with implicit `self` and Swift 5 mode (this test target's, as most CloudKit code) does not.

private enum AssetRecordKey {
    case deleted
    case asset
    case numberOfParts
    case totalSize
    case assetPart(Int)

    var string: String {
        switch self {
        case .deleted:
            return "deleted"
        case .asset:
            return "asset"
        case .numberOfParts:
            return "numberOfParts"
        case .totalSize:
            return "totalSize"
        case .assetPart(let partNumber):
            return "asset_part\(partNumber)"
        }
    }
}

public struct AssetChange: Sendable {
    public let fileName: String
    public let initiatedLocally: Bool
}

@available(iOS 17.0, tvOS 17.0, watchOS 10.0, macOS 14.0, *)
public final class CloudKitAssets: @unchecked Sendable {
    public enum Error: Swift.Error {
        case sourceIsNotAFile
        case assetAlreadyExists
        case assetNotFound
        case syncEngineNotReady
        case assetTooLarge
    }

    private static let stateFileName = "_CloudKitAssets_State.json"
    private static let maxTotalSize: Int64 = 250 * 1024 * 1024 // 250MB in bytes

    public let rootDirectory: URL
    public let cloudKitContainer: Container
    public let zoneID: RecordZone.ID
    public let recordType: Record.RecordType = "ForkedAsset"

    // Not `private` in the port: the tests call `sendChanges()` and `fetchChanges()`.
    var engine: SyncEngine?
    private let stateURL: URL
    private let lock = NSRecursiveLock()

    private typealias StreamID = UInt64
    private var nextStreamID: StreamID = 0
    private var continuations: [StreamID: AsyncStream<AssetChange>.Continuation] = [:]

    public init(rootDirectory: URL, zoneName: String, cloudKitContainer: Container = .default(), syncImmediately: Bool = true) throws {
        self.rootDirectory = rootDirectory
        self.cloudKitContainer = cloudKitContainer
        self.zoneID = RecordZone.ID(zoneName: zoneName)
        self.stateURL = rootDirectory.appendingPathComponent(Self.stateFileName)

        try FileManager.default.createDirectory(at: rootDirectory, withIntermediateDirectories: true)

        if syncImmediately {
            startSyncing()
        }
    }

    public func startSyncing() {
        guard engine == nil else { return }

        let stateSerialization: SyncEngine.State.Serialization?
        if let data = try? Data(contentsOf: stateURL),
           let state = try? JSONDecoder().decode(SyncEngine.State.Serialization.self, from: data) {
            stateSerialization = state
        } else {
            stateSerialization = nil
        }

        let configuration = SyncEngine.Configuration(
            database: cloudKitContainer.privateCloudDatabase,
            stateSerialization: stateSerialization,
            delegate: self
        )
        engine = SyncEngine(configuration)

        let zone = RecordZone(zoneID: zoneID)
        engine!.state.add(pendingDatabaseChanges: [.saveZone(zone)])
    }

    public func addAsset(at fileURL: URL, named fileName: String? = nil) throws {
        guard let engine else {
            throw Error.syncEngineNotReady
        }

        let resourceValues = try fileURL.resourceValues(forKeys: [.isDirectoryKey])
        guard let isDirectory = resourceValues.isDirectory,
              !isDirectory else {
            throw Error.sourceIsNotAFile
        }

        guard let fileSize = try? FileManager.default.attributesOfItem(atPath: fileURL.path)[.size] as? Int64,
              fileSize <= Self.maxTotalSize else {
            throw Error.assetTooLarge
        }

        let sourceFileName = fileURL.lastPathComponent
        let targetFileName = fileName ?? sourceFileName
        let assetURL = rootDirectory.appendingPathComponent(targetFileName)

        if FileManager.default.fileExists(atPath: assetURL.path) {
            throw Error.assetAlreadyExists
        }

        try FileManager.default.copyItem(at: fileURL, to: assetURL)

        let recordID = Record.ID(recordName: targetFileName, zoneID: zoneID)

        engine.state.add(pendingRecordZoneChanges: [.saveRecord(recordID)])

        addToChangeStreams(AssetChange(fileName: targetFileName, initiatedLocally: true))
    }

    public func addAsset(data: Data, named fileName: String) throws {
        guard let engine else {
            throw Error.syncEngineNotReady
        }

        let assetURL = rootDirectory.appendingPathComponent(fileName)

        if FileManager.default.fileExists(atPath: assetURL.path) {
            throw Error.assetAlreadyExists
        }

        try data.write(to: assetURL)

        let recordID = Record.ID(recordName: fileName, zoneID: zoneID)

        engine.state.add(pendingRecordZoneChanges: [.saveRecord(recordID)])

        addToChangeStreams(AssetChange(fileName: fileName, initiatedLocally: true))
    }

    public func deleteAsset(named fileName: String) throws {
        guard let engine else {
            throw Error.syncEngineNotReady
        }

        let assetURL = rootDirectory.appendingPathComponent(fileName)

        let recordID = Record.ID(recordName: fileName, zoneID: zoneID)
        let record = Record(recordType: recordType, recordID: recordID)
        record[AssetRecordKey.deleted.string] = true
        record[AssetRecordKey.asset.string] = nil
        record[AssetRecordKey.numberOfParts.string] = nil
        record[AssetRecordKey.totalSize.string] = nil
        for partNumber in 1...Record.maxParts {
            record[AssetRecordKey.assetPart(partNumber).string] = nil
        }

        engine.state.add(pendingRecordZoneChanges: [.saveRecord(recordID)])

        try? FileManager.default.removeItem(at: assetURL)

        addToChangeStreams(AssetChange(fileName: fileName, initiatedLocally: true))
    }

    public func listAssets() throws -> [URL] {
        let contents = try FileManager.default.contentsOfDirectory(at: rootDirectory, includingPropertiesForKeys: [.isHiddenKey, .isDirectoryKey])
        return contents.filter { url in
            let fileName = url.lastPathComponent
            guard fileName != Self.stateFileName,
                  fileName != ".DS_Store" else {
                return false
            }

            guard let resourceValues = try? url.resourceValues(forKeys: [.isHiddenKey, .isDirectoryKey]),
                  let isHidden = resourceValues.isHidden,
                  let isDirectory = resourceValues.isDirectory,
                  !isHidden,
                  !isDirectory else {
                return false
            }

            return true
        }
    }

    public func data(forAssetNamed fileName: String) throws -> Data {
        let assetURL = rootDirectory.appendingPathComponent(fileName)
        guard FileManager.default.fileExists(atPath: assetURL.path) else {
            throw Error.assetNotFound
        }
        return try Data(contentsOf: assetURL)
    }
}

@available(iOS 17.0, tvOS 17.0, watchOS 10.0, macOS 14.0, *)
extension CloudKitAssets {
    private func serialize<T>(_ operation: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try operation()
    }

    public var changeStream: AsyncStream<AssetChange> {
        AsyncStream { continuation in
            serialize {
                let currentID = nextStreamID
                continuations[currentID] = continuation
                continuation.onTermination = { @Sendable [weak self] _ in
                    guard let self else { return }
                    serialize {
                        self.continuations[currentID] = nil     // `self.`: see the note at the top
                    }
                }
                nextStreamID += 1
            }
        }
    }

    private func addToChangeStreams(_ change: AssetChange) {
        serialize {
            for continuation in continuations.values {
                continuation.yield(change)
            }
        }
    }
}

@available(iOS 17.0, tvOS 17.0, watchOS 10.0, macOS 14.0, *)
extension CloudKitAssets: SyncEngineDelegate {
    public func handleEvent(_ event: SyncEngine.Event, syncEngine: SyncEngine) async {
        switch event {
        case .stateUpdate(let event):
            try? JSONEncoder().encode(event.stateSerialization).write(to: stateURL)

        case .accountChange(let event):
            switch event.changeType {
            case .signIn, .switchAccounts:
                try? FileManager.default.removeItem(at: stateURL)

                if let files = try? listAssets() {
                    for fileURL in files {
                        let fileName = fileURL.lastPathComponent
                        let recordID = Record.ID(recordName: fileName, zoneID: zoneID)
                        engine?.state.add(pendingRecordZoneChanges: [.saveRecord(recordID)])
                    }
                }
            case .signOut:
                try? FileManager.default.removeItem(at: stateURL)
                break
            @unknown default:
                break
            }

        case .fetchedRecordZoneChanges(let event):
            for modification in event.modifications {
                let fileName = modification.record.recordID.recordName
                let recordID = Record.ID(recordName: fileName, zoneID: zoneID)
                if let asset = try? await engine?.database.record(for: recordID) {
                    let destinationURL = rootDirectory.appendingPathComponent(fileName)
                    try? asset.reconstructAsset(to: destinationURL)
                    addToChangeStreams(AssetChange(fileName: fileName, initiatedLocally: false))
                }
            }

        case .sentRecordZoneChanges:
            break

        default:
            break
        }
    }

    public func nextRecordZoneChangeBatch(_ context: SyncEngine.SendChangesContext, syncEngine: SyncEngine) async -> SyncEngine.RecordZoneChangeBatch? {
        let pendingChanges = syncEngine.state.pendingRecordZoneChanges.filter { context.options.scope.contains($0) }
        return await SyncEngine.RecordZoneChangeBatch(pendingChanges: pendingChanges) { [self] recordID in
            let fileName = recordID.recordName
            let assetURL = rootDirectory.appendingPathComponent(fileName)

            let record = Record(recordType: recordType, recordID: recordID)

            if FileManager.default.fileExists(atPath: assetURL.path) {
                try? record.addAsset(assetURL)
            } else {
                record[AssetRecordKey.deleted.string] = true
            }

            return record
        }
    }
}

@available(iOS 17.0, tvOS 17.0, watchOS 10.0, macOS 14.0, *)
extension Record {
    static let maxPartSize: Int64 = 50 * 1024 * 1024 // 50MB in bytes
    static let maxParts = 5

    func addAsset(_ fileURL: URL) throws {
        let fileSize = try? FileManager.default.attributesOfItem(atPath: fileURL.path)[.size] as? Int64 ?? 0

        self[AssetRecordKey.deleted.string] = false

        if fileSize ?? 0 <= Self.maxPartSize {
            let asset = Asset(fileURL: fileURL)
            self[AssetRecordKey.asset.string] = asset
        } else {
            let numberOfParts = Swift.min(Self.maxParts, Int((fileSize! + Self.maxPartSize - 1) / Self.maxPartSize))

            let tempDir = FileManager.default.temporaryDirectory.appendingPathComponent(UUID().uuidString)
            try? FileManager.default.createDirectory(at: tempDir, withIntermediateDirectories: true)

            defer {
                try? FileManager.default.removeItem(at: tempDir)
            }

            if let fileHandle = try? FileHandle(forReadingFrom: fileURL) {
                for partNumber in 1...numberOfParts {
                    let partURL = tempDir.appendingPathComponent("part\(partNumber)")
                    if let partHandle = try? FileHandle(forWritingTo: partURL) {
                        let bytesToRead = Swift.min(Self.maxPartSize, fileSize! - Int64(partNumber - 1) * Self.maxPartSize)
                        if let data = try? fileHandle.read(upToCount: Int(bytesToRead)) {
                            try? partHandle.write(contentsOf: data)
                        }
                        try? partHandle.close()

                        let partAsset = Asset(fileURL: partURL)
                        self[AssetRecordKey.assetPart(partNumber).string] = partAsset
                    }
                }
                try? fileHandle.close()
            }

            self[AssetRecordKey.numberOfParts.string] = numberOfParts
            if let fileSize = fileSize {
                self[AssetRecordKey.totalSize.string] = fileSize
            }
        }
    }

    func reconstructAsset(to destinationURL: URL) throws {
        if let isDeleted = self[AssetRecordKey.deleted.string] as? Bool, isDeleted {
            try? FileManager.default.removeItem(at: destinationURL)
            return
        }

        if let numberOfParts = self[AssetRecordKey.numberOfParts.string] as? Int {
            let tempDir = FileManager.default.temporaryDirectory.appendingPathComponent(UUID().uuidString)
            try? FileManager.default.createDirectory(at: tempDir, withIntermediateDirectories: true)

            defer {
                try? FileManager.default.removeItem(at: tempDir)
            }

            var partURLs: [URL] = []
            for partNumber in 1...numberOfParts {
                if let partAsset = self[AssetRecordKey.assetPart(partNumber).string] as? Asset,
                   let sourceURL = partAsset.fileURL {
                    let partURL = tempDir.appendingPathComponent("part\(partNumber)")
                    _ = try? FileManager.default.copyItem(at: sourceURL, to: partURL)
                    partURLs.append(partURL)
                }
            }

            if let outputHandle = try? FileHandle(forWritingTo: destinationURL) {
                for partURL in partURLs {
                    var partHandle: FileHandle?
                    if let handle = try? FileHandle(forReadingFrom: partURL),
                       let data = try? handle.readToEnd() {
                        try? outputHandle.write(contentsOf: data)
                        partHandle = handle
                    }
                    try? partHandle?.close()
                }
                try? outputHandle.close()
            }
        } else if let assetReference = self[AssetRecordKey.asset.string] as? Asset,
                  let sourceURL = assetReference.fileURL {
            _ = try? FileManager.default.copyItem(at: sourceURL, to: destinationURL)
        }
    }
}

// MARK: - Tests

/// Two folders ("devices") of one user, each with its own `CloudKitAssets`; removed afterwards.
private func withTwoDevices(on engine: TestEngine, _ body: (Container, URL, URL) async throws -> Void) async throws {
    try await withContainer(on: engine) { container in
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("cloudkit-style-forked-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: base) }
        try await body(container, base.appendingPathComponent("device-a"), base.appendingPathComponent("device-b"))
    }
}

/// Stops an asset store's engine before its folder is removed.
private func stop(_ assets: CloudKitAssets) async {
    await assets.engine?.cancelOperations()
}

@Suite("Forked's CloudKitAssets (a CKSyncEngine folder sync), ported")
struct ForkedCloudKitAssetsTests {
    @Test("a file added on one device is sent as an asset and written into the other device's folder, announced as a remote change", arguments: TestEngine.all)
    func fileReachesOtherDevice(engine: TestEngine) async throws {
        try await withTwoDevices(on: engine) { container, folderA, folderB in
            let deviceA = try CloudKitAssets(rootDirectory: folderA, zoneName: "ForkedAssets", cloudKitContainer: container)
            let deviceB = try CloudKitAssets(rootDirectory: folderB, zoneName: "ForkedAssets", cloudKitContainer: container)
            let localChanges = deviceA.changeStream
            // Before anything is sent: device B's engine fetches by itself (once at its start,
            // then every 10 s), and a change it fetches before this stream exists is announced
            // to no one, which left the wait for it below waiting for good on a busy machine.
            let remoteChanges = deviceB.changeStream
            try deviceA.addAsset(data: Data("first draft".utf8), named: "draft.txt")
            var local = localChanges.makeAsyncIterator()
            let announced = await local.next()
            #expect(announced?.fileName == "draft.txt" && announced?.initiatedLocally == true)
            #expect(try deviceA.listAssets().map(\.lastPathComponent) == ["draft.txt"], "the state file is not listed")

            try await deviceA.engine!.sendChanges()
            let stored = try await container.privateCloudDatabase.record(for: Record.ID(recordName: "draft.txt", zoneID: deviceA.zoneID))
            #expect(stored.recordType == "ForkedAsset")
            #expect(stored["deleted"] as? Bool == false)
            #expect((stored["asset"] as? Asset).flatMap { $0.fileURL }.flatMap { try? Data(contentsOf: $0) } == Data("first draft".utf8))

            try await deviceB.engine!.fetchChanges()
            #expect(try deviceB.data(forAssetNamed: "draft.txt") == Data("first draft".utf8))
            var remote = remoteChanges.makeAsyncIterator()
            let arrived = await remote.next()
            #expect(arrived?.fileName == "draft.txt" && arrived?.initiatedLocally == false)
            #expect(FileManager.default.fileExists(atPath: folderA.appendingPathComponent("_CloudKitAssets_State.json").path), "state archived on stateUpdate")
            await stop(deviceA); await stop(deviceB)
        }
    }

    @Test("adding a name the folder has is refused; a folder is not a file", arguments: TestEngine.all)
    func refusals(engine: TestEngine) async throws {
        try await withTwoDevices(on: engine) { container, folderA, _ in
            let device = try CloudKitAssets(rootDirectory: folderA, zoneName: "ForkedAssets", cloudKitContainer: container)
            try device.addAsset(data: Data("x".utf8), named: "a.txt")
            #expect(throws: CloudKitAssets.Error.self) { try device.addAsset(data: Data("y".utf8), named: "a.txt") }
            #expect(throws: CloudKitAssets.Error.self) { try device.addAsset(at: folderA) }
            #expect(throws: CloudKitAssets.Error.self) { _ = try device.data(forAssetNamed: "missing.txt") }

            let source = folderA.deletingLastPathComponent().appendingPathComponent("photo.jpg")
            try Data([0xFF, 0xD8, 0xFF]).write(to: source)
            try device.addAsset(at: source, named: "cover.jpg")
            #expect(try device.data(forAssetNamed: "cover.jpg") == Data([0xFF, 0xD8, 0xFF]))
            await stop(device)
        }
    }

    @Test("a deletion is sent as a new record over the stored one: CKSyncEngine saves only if the server record is unchanged, so it fails and the other device keeps the file", arguments: TestEngine.all)
    func softDeleteOfAnUploadedFileConflicts(engine: TestEngine) async throws {
        try await withTwoDevices(on: engine) { container, folderA, folderB in
            let deviceA = try CloudKitAssets(rootDirectory: folderA, zoneName: "ForkedAssets", cloudKitContainer: container)
            let deviceB = try CloudKitAssets(rootDirectory: folderB, zoneName: "ForkedAssets", cloudKitContainer: container)
            try deviceA.addAsset(data: Data("keep me".utf8), named: "notes.txt")
            try await deviceA.engine!.sendChanges()
            try await deviceB.engine!.fetchChanges()
            #expect(try deviceB.data(forAssetNamed: "notes.txt") == Data("keep me".utf8))

            try deviceA.deleteAsset(named: "notes.txt")
            #expect(throws: CloudKitAssets.Error.self) { _ = try deviceA.data(forAssetNamed: "notes.txt") }
            // The engine may already have sent it by itself; either way the save fails (and
            // `sendChanges()` throws when it is the one that sends it).
            try? await deviceA.engine!.sendChanges()
            let stored = try await container.privateCloudDatabase.record(for: Record.ID(recordName: "notes.txt", zoneID: deviceA.zoneID))
            #expect(stored["deleted"] as? Bool == false, "the stored record is unchanged")
            #expect(deviceA.engine!.state.pendingRecordZoneChanges.isEmpty, "a failed change leaves the pending list (the app ignores the failure)")

            try await deviceB.engine!.fetchChanges()
            #expect(try deviceB.data(forAssetNamed: "notes.txt") == Data("keep me".utf8))
            await stop(deviceA); await stop(deviceB)
        }
    }

    @Test("a relaunch reads the archived state: nothing already sent is sent again, and changes since are fetched", arguments: TestEngine.all)
    func relaunch(engine: TestEngine) async throws {
        try await withTwoDevices(on: engine) { container, folderA, folderB in
            var deviceA: CloudKitAssets? = try CloudKitAssets(rootDirectory: folderA, zoneName: "ForkedAssets", cloudKitContainer: container)
            let deviceB = try CloudKitAssets(rootDirectory: folderB, zoneName: "ForkedAssets", cloudKitContainer: container)
            try deviceA!.addAsset(data: Data("one".utf8), named: "one.txt")
            try await deviceA!.engine!.sendChanges()
            await stop(deviceA!)
            deviceA = nil

            try deviceB.addAsset(data: Data("two".utf8), named: "two.txt")
            try await deviceB.engine!.sendChanges()

            let relaunched = try CloudKitAssets(rootDirectory: folderA, zoneName: "ForkedAssets", cloudKitContainer: container)
            try await relaunched.engine!.fetchChanges()
            #expect(Set(try relaunched.listAssets().map(\.lastPathComponent)) == ["one.txt", "two.txt"])
            #expect(try relaunched.data(forAssetNamed: "two.txt") == Data("two".utf8))
            await stop(relaunched); await stop(deviceB)
        }
    }
}
