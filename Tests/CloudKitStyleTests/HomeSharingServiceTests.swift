import Foundation
import Stratus
import StratusSQLite
import StratusTestSupport
import Testing

// The direct-CloudKit sync of a home-maintenance app (its CloudSharingService.swift), ported
// mechanically without its Core Data and CKShare parts. Its CloudKit habits: waiting for an
// operation with `op.completionBlock = { cont.resume() }` (Foundation's own block, not a
// CloudKit result block); `CKModifyRecordsOperation(recordsToSave: records)` with one argument;
// field values chosen by a function that returns `CKRecordValueProtocol?` (`NSNumber`, `NSData`,
// a `CKAsset` written to a temporary file, or `raw as? CKRecordValueProtocol`) and stored through
// `record[key] = value` or `record.encryptedValues[key] = value`; values read back with
// `raw as? NSNumber`, `raw as? CKAsset` and `asset.fileURL`; a database compared with `===`;
// the older tuple pattern `case .success(let (token, _, _))` in `recordZoneFetchResultBlock`.
// The CloudKit original is in the comments.

final class HomeSyncService: @unchecked Sendable {
    enum Kind { case uuid, bool, int32, data, externalData, other }

    let container: Container
    private let lock = NSLock()
    private var tokens: [String: ServerChangeToken] = [:]
    let log = SampleLog()

    init(container: Container) { self.container = container }

    func loadToken(key: String) -> ServerChangeToken? { lock.withLock { tokens[key] } }
    func saveToken(_ token: ServerChangeToken, key: String) { lock.withLock { tokens[key] = token } }

    // private static func ckValue(_ raw: Any, for attr: NSAttributeDescription) -> CKRecordValueProtocol? {
    //     case .booleanAttributeType: return (raw as? Bool).map { NSNumber(value: $0 ? 1 : 0) }
    //     case .binaryDataAttributeType: … return CKAsset(fileURL: url) … return data as NSData
    //     default: return raw as? CKRecordValueProtocol
    static func ckValue(_ raw: Any, for kind: Kind) -> RecordValueProtocol? {
        switch kind {
        case .uuid:
            return (raw as? UUID)?.uuidString
        case .bool:
            return (raw as? Bool).map { NSNumber(value: $0 ? 1 : 0) }
        case .int32:
            return (raw as? Int32).map { NSNumber(value: Int($0)) }
        case .externalData:
            guard let data = raw as? Data, !data.isEmpty else { return nil }
            let url = FileManager.default.temporaryDirectory.appendingPathComponent(UUID().uuidString)
            try? data.write(to: url)
            return Asset(fileURL: url)
        case .data:
            guard let data = raw as? Data, !data.isEmpty else { return nil }
            return data
        case .other:
            return raw as? RecordValueProtocol
        }
    }

    // case .booleanAttributeType: return (raw as? NSNumber).map { $0.intValue != 0 }
    // case .integer32AttributeType: return (raw as? NSNumber).map { Int32($0.intValue) }
    // case .binaryDataAttributeType: if let asset = raw as? CKAsset, let url = asset.fileURL { return try? Data(contentsOf: url) }
    static func coreDataValue(_ raw: Any, for kind: Kind) -> Any? {
        switch kind {
        case .uuid:
            return (raw as? String).flatMap(UUID.init(uuidString:))
        case .bool:
            return (raw as? NSNumber).map { $0.intValue != 0 }
        case .int32:
            return (raw as? NSNumber).map { Int32($0.intValue) }
        case .data, .externalData:
            if let asset = raw as? Asset, let url = asset.fileURL {
                return try? Data(contentsOf: url)
            }
            return raw as? Data
        case .other:
            return raw
        }
    }

    func makeRecord(type: String, id: UUID, zoneID: RecordZone.ID, fields: [(String, Any, Kind)], encrypted: Set<String>) -> Record {
        let record = Record(recordType: type, recordID: Record.ID(recordName: id.uuidString, zoneID: zoneID))
        for (key, raw, kind) in fields {
            guard let value = Self.ckValue(raw, for: kind) else { continue }
            if encrypted.contains(key) {
                record.encryptedValues[key] = value
            } else {
                record[key] = value
            }
        }
        return record
    }

    // let op = CKModifyRecordsOperation(recordsToSave: records)
    // op.savePolicy = .allKeys; op.isAtomic = false
    // op.perRecordSaveBlock = { recordID, result in if case .failure(let error) = result { … } }
    func saveRecords(_ records: [Record], to database: Database) async {
        guard !records.isEmpty else { return }
        let op = ModifyRecordsOperation(recordsToSave: records)
        op.savePolicy = .allKeys
        op.isAtomic = false
        op.perRecordSaveBlock = { recordID, result in
            if case .failure(let error) = result {
                self.log.append("saveRecords FAILED for record=\(recordID.recordName): \((error as NSError).code)")
            }
        }
        await withCheckedContinuation { cont in
            op.modifyRecordsResultBlock = { result in
                switch result {
                case .success: self.log.append("saveRecords OK — \(records.count) record(s)")
                case .failure: self.log.append("saveRecords operation FAILED")
                }
                cont.resume()
            }
            database.add(op)
        }
    }

    // let op = CKModifyRecordsOperation(recordsToSave: nil, recordIDsToDelete: [...])
    // await withCheckedContinuation { cont in op.completionBlock = { cont.resume() }; database.add(op) }
    func deleteRecord(id: UUID, zoneID: RecordZone.ID, in database: Database) async {
        let op = ModifyRecordsOperation(recordsToSave: nil, recordIDsToDelete: [Record.ID(recordName: id.uuidString, zoneID: zoneID)])
        await withCheckedContinuation { cont in
            op.completionBlock = { cont.resume() }
            database.add(op)
        }
    }

    /// What one pull found: the records to upsert, the IDs to delete, the zones that are gone.
    struct Pulled {
        var upserted: [Record] = []
        var deleted: [Record.ID] = []
        var deletedZones: [RecordZone.ID] = []
    }

    // let op = CKFetchDatabaseChangesOperation(previousServerChangeToken: loadToken(key: tokenKey))
    // op.recordZoneWithIDChangedBlock = { changedZones.append($0) }
    // op.fetchDatabaseChangesResultBlock = { [weak self] result in
    //     case .success(let (token, _)): self?.saveToken(token, key: tokenKey)
    // await withCheckedContinuation { cont in op.completionBlock = { cont.resume() }; database.add(op) }
    func fetchDatabaseChanges(in database: Database, tokenKey: String) async -> Pulled {
        var changedZones: [RecordZone.ID] = []
        var deletedZones: [RecordZone.ID] = []
        let op = FetchDatabaseChangesOperation(previousServerChangeToken: loadToken(key: tokenKey))
        op.recordZoneWithIDChangedBlock = { changedZones.append($0) }
        op.recordZoneWithIDWasDeletedBlock = { deletedZones.append($0) }
        op.fetchDatabaseChangesResultBlock = { [weak self] result in
            switch result {
            case .success(let (token, _)): self?.saveToken(token, key: tokenKey)
            case .failure(let error): self?.log.append("fetchDatabaseChanges FAILED: \(error)")
            }
        }
        await withCheckedContinuation { cont in
            op.completionBlock = { cont.resume() }
            database.add(op)
        }
        var pulled = Pulled()
        if !changedZones.isEmpty {
            pulled = await fetchZoneChanges(zoneIDs: changedZones, in: database)
        }
        pulled.deletedZones = deletedZones
        return pulled
    }

    // let cfg = CKFetchRecordZoneChangesOperation.ZoneConfiguration()
    // op.recordWasChangedBlock = { recordID, result in … }
    // op.recordWithIDWasDeletedBlock = { id, _ in toDelete.append(id) }
    // op.recordZoneFetchResultBlock = { zoneID, result in case .success(let (token, _, _)): newTokens[zoneID] = token
    func fetchZoneChanges(zoneIDs: [RecordZone.ID], in database: Database) async -> Pulled {
        var configs: [RecordZone.ID: FetchRecordZoneChangesOperation.ZoneConfiguration] = [:]
        for id in zoneIDs {
            let cfg = FetchRecordZoneChangesOperation.ZoneConfiguration()
            cfg.previousServerChangeToken = loadToken(key: "zone-\(id.zoneName)")
            configs[id] = cfg
        }
        var toUpsert: [Record] = []
        var toDelete: [Record.ID] = []
        var newTokens: [RecordZone.ID: ServerChangeToken] = [:]
        let op = FetchRecordZoneChangesOperation(recordZoneIDs: zoneIDs, configurationsByRecordZoneID: configs)
        op.recordWasChangedBlock = { recordID, result in
            switch result {
            case .success(let r): toUpsert.append(r)
            case .failure(let error): self.log.append("fetchZoneChanges record=\(recordID.recordName) FAILED: \(error)")
            }
        }
        op.recordWithIDWasDeletedBlock = { id, _ in toDelete.append(id) }
        op.recordZoneFetchResultBlock = { zoneID, result in
            switch result {
            case .success(let (token, _, _)): newTokens[zoneID] = token
            case .failure(let error): self.log.append("fetchZoneChanges zone=\(zoneID.zoneName) FAILED: \(error)")
            }
        }
        await withCheckedContinuation { cont in
            op.completionBlock = { cont.resume() }
            database.add(op)
        }
        for (zoneID, token) in newTokens { saveToken(token, key: "zone-\(zoneID.zoneName)") }
        return Pulled(upserted: toUpsert, deleted: toDelete)
    }
}

@Suite("A home app's direct CloudKit sync, ported")
struct HomeSharingServiceTests {
    @Test("values chosen as RecordValueProtocol, plain and encrypted, read back as the app's own types", arguments: TestEngine.all)
    func valuesRoundTrip(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let service = HomeSyncService(container: container)
            let database = container.privateCloudDatabase
            // if db === ckContainer.privateCloudDatabase { privateRecords.append(record) }
            #expect(database === container.privateCloudDatabase)
            let zoneID = RecordZone.ID(zoneName: "home-1", ownerName: CurrentUserDefaultName)
            _ = try await database.save(RecordZone(zoneID: zoneID))

            let id = UUID()
            let photo = Data((0..<64).map { UInt8($0) })
            let record = service.makeRecord(type: "Appliance", id: id, zoneID: zoneID, fields: [
                ("homeID", UUID(uuidString: "8C1B2D8E-6F0A-4C65-9C9E-2B4A7C1D0E11")!, .uuid),
                ("isActive", true, .bool),
                ("warrantyYears", Int32(3), .int32),
                ("manual", photo, .externalData),
                ("notes", "Filter every 3 months", .other),
                ("serial", "SN-123", .other),
                ("thumbnail", Data([1, 2, 3]), .data),
            ], encrypted: ["serial"])
            // The app writes external data into a temporary file for its asset (iOS empties that
            // folder itself; a test run here must not leave the file).
            defer { (record["manual"] as? Asset)?.fileURL.map { try? FileManager.default.removeItem(at: $0) } }
            #expect(record.encryptedValues.allKeys() == ["serial"])
            await service.saveRecords([record], to: database)
            #expect(service.log.messages == ["saveRecords OK — 1 record(s)"])

            let pulled = await service.fetchDatabaseChanges(in: database, tokenKey: "privateDB")
            let fetched = try #require(pulled.upserted.first { $0.recordID.recordName == id.uuidString })
            #expect(HomeSyncService.coreDataValue(fetched["homeID"] as Any, for: .uuid) as? UUID == UUID(uuidString: "8C1B2D8E-6F0A-4C65-9C9E-2B4A7C1D0E11"))
            #expect(HomeSyncService.coreDataValue(fetched["isActive"] as Any, for: .bool) as? Bool == true)
            #expect(HomeSyncService.coreDataValue(fetched["warrantyYears"] as Any, for: .int32) as? Int32 == 3)
            #expect(HomeSyncService.coreDataValue(fetched["manual"] as Any, for: .externalData) as? Data == photo)
            #expect(HomeSyncService.coreDataValue(fetched["thumbnail"] as Any, for: .data) as? Data == Data([1, 2, 3]))
            #expect(fetched.encryptedValues["serial"] as? String == "SN-123")
            #expect(fetched["notes"] as? String == "Filter every 3 months")
        }
    }

    @Test("completionBlock wakes the waiter after the result blocks, for a delete and for both change fetches", arguments: TestEngine.all)
    func completionBlockWaits(engine: TestEngine) async throws {
        try await withContainer(on: engine) { container in
            let service = HomeSyncService(container: container)
            let database = container.privateCloudDatabase
            let zoneID = RecordZone.ID(zoneName: "home-2", ownerName: CurrentUserDefaultName)
            _ = try await database.save(RecordZone(zoneID: zoneID))
            let ids = [UUID(), UUID()]
            await service.saveRecords(ids.map { service.makeRecord(type: "Task", id: $0, zoneID: zoneID, fields: [("title", "Clean", .other)], encrypted: []) }, to: database)

            let first = await service.fetchDatabaseChanges(in: database, tokenKey: "privateDB")
            #expect(Set(first.upserted.map(\.recordID.recordName)) == Set(ids.map(\.uuidString)))
            #expect(service.loadToken(key: "privateDB") != nil)
            #expect(service.loadToken(key: "zone-home-2") != nil)

            await service.deleteRecord(id: ids[0], zoneID: zoneID, in: database)
            let second = await service.fetchDatabaseChanges(in: database, tokenKey: "privateDB")
            #expect(second.upserted.isEmpty)
            #expect(second.deleted == [Record.ID(recordName: ids[0].uuidString, zoneID: zoneID)])

            _ = try await database.deleteRecordZone(withID: zoneID)
            let third = await service.fetchDatabaseChanges(in: database, tokenKey: "privateDB")
            #expect(third.deletedZones == [zoneID])
        }
    }
}
