import Foundation

/// Where a dry run writes instead of the store: each request's writes are applied to a picture
/// of one database in memory, laid over what the store holds, by the same write policy a real
/// write applies (``RecordWriteExecutor``: types, schema growth and production's refusals,
/// write modes and change tags, parents, references and cascades, sizes, security roles), so
/// that a dry run finds what the real run would, and the store never changes.
///
/// One simulation lasts a whole dry run: what its earlier requests wrote (records, deletions
/// and their cascades, the fields development grew, the zones the run would create) is what
/// its later ones see, as the store would show them. A request that an atomic rollback undoes
/// leaves nothing behind. The store is only read, through the engine's reads
/// (``StorageEngine/fetchRecords(_:in:)``, ``StorageEngine/fetchZones(in:)``,
/// ``StorageEngine/fetchSchema(storageContainer:)``, ``StorageEngine/deleteSelfSources(of:in:)``),
/// so a store opened read-only serves a dry run. Asset sources are opened, checked and hashed
/// as a save does (``AssetStaging``); their content is not kept. Notifications are not sent
/// and job positions not recorded.
///
/// ```swift
/// let simulation = WriteSimulation()
/// let op = ModifyRecordsOperation(preparedSaves: saves)
/// op.simulation = simulation            // every result as a write would give it; nothing stored
/// database.add(op)
/// ```
///
/// What it keeps of each record it wrote is its stored form (type, system fields, parent and
/// field document), as a store keeps it.
package final class WriteSimulation: @unchecked Sendable {
    // @unchecked: the state below is only touched inside `run` and `createZone`, which hold
    // `lock` for their whole duration, so that no two threads ever touch it at once.
    private let lock = NSLock()

    /// A record as the simulation stored it.
    fileprivate struct Row {
        let recordType: String
        let systemFields: Record.SystemFields
        let parent: Record.Reference?
        let document: [UInt8]
        let deleteSelfTargets: Set<String>

        init(_ row: RecordRow) {
            recordType = row.recordType
            systemFields = row.systemFields
            parent = row.parent
            document = row.document
            deleteSelfTargets = row.deleteSelfTargets
        }
    }

    /// What the simulation did to a record: wrote it, or deleted it.
    fileprivate enum Entry {
        case written(Row)
        case deleted
    }

    /// Records written or deleted, by ID (in the zone's one spelling, see ``key(_:)``).
    private var entries: [Record.ID: Entry] = [:]
    /// The names of written records whose `.deleteSelf` references point at each target.
    private var sourcesByTarget: [Record.ID: Set<String>] = [:]
    /// Record types as the simulation grew them.
    private var schemas: [String: RecordTypeSchema] = [:]
    /// Zones the simulated run creates, with their capabilities.
    private var createdZones: [RecordZone.ID: RecordZone.Capabilities] = [:]
    /// The database simulated: set by the first request.
    private var context: DatabaseContext?

    /// A simulation of a database as the store holds it now.
    package init() {}

    /// Runs `body` against the simulation, as ``StorageEngine/writeRecords(in:_:)`` runs it
    /// against a write transaction: kept when it returns, undone when it throws (the error is
    /// rethrown). `prefetching` names the records `body` will read: read from the store in one
    /// call.
    ///
    /// - Precondition: every call simulates the same database (a programmer error).
    func run<T>(engine: any StorageEngine, context: DatabaseContext, prefetching ids: [Record.ID], _ body: (any RecordWriteTransaction) throws -> T) throws -> T {
        lock.lock()
        defer { lock.unlock() }
        precondition(self.context == nil || self.context == context, "a write simulation follows one database")
        self.context = context
        let transaction = SimulatedTransaction(simulation: self, engine: engine, context: context)
        do {
            try transaction.prefetch(ids)
            return try body(transaction)
        } catch {
            transaction.rollBack()
            throw error
        }
    }

    /// Which of `ids` the simulated database holds now: what the store holds, as the
    /// simulation's writes and deletions changed it.
    func existingRecords(_ ids: [Record.ID], engine: any StorageEngine, context: DatabaseContext) throws -> Set<Record.ID> {
        try run(engine: engine, context: context, prefetching: ids) { transaction in
            Set(try ids.filter { try transaction.recordExists($0) })
        }
    }

    /// Records that the simulated run created a zone (an import that creates the zones its
    /// input names), with the capabilities a created zone gets.
    package func createZone(_ zone: RecordZone, in context: DatabaseContext) {
        lock.withLock { createdZones[Self.zoneKey(zone.zoneID, context)] = zone.capabilities }
    }

    /// The asset content store a simulated save stages its assets in: sources are read and
    /// hashed, and nothing is kept.
    var assetContents: any AssetContentStore { DiscardedAssetContents() }

    // MARK: - State, under the lock

    /// A zone ID in one spelling: the current user's zones by `__defaultOwner__`.
    fileprivate static func zoneKey(_ zoneID: RecordZone.ID, _ context: DatabaseContext) -> RecordZone.ID {
        context.isCurrentUser(zoneID.ownerName) && zoneID.ownerName != RecordZone.ID.currentUserDefaultOwner
            ? RecordZone.ID(zoneName: zoneID.zoneName) : zoneID
    }

    fileprivate func entry(_ key: Record.ID) -> Entry? { entries[key] }
    fileprivate func sources(of key: Record.ID) -> Set<String> { sourcesByTarget[key] ?? [] }
    fileprivate func schema(_ name: String) -> RecordTypeSchema? { schemas[name] }
    fileprivate var grownSchemas: [RecordTypeSchema] { Array(schemas.values) }
    fileprivate func createdZone(_ key: RecordZone.ID) -> RecordZone.Capabilities? { createdZones[key] }

    /// Sets (or, with `nil`, forgets) what the simulation did to a record; answers what it said before.
    @discardableResult
    fileprivate func set(_ key: Record.ID, _ entry: Entry?) -> Entry? {
        let previous = entries[key]
        if case .written(let old)? = previous {
            for target in old.deleteSelfTargets {
                sourcesByTarget[Record.ID(recordName: target, zoneID: key.zoneID)]?.remove(key.recordName)
            }
        }
        entries[key] = entry
        if case .written(let new)? = entry {
            for target in new.deleteSelfTargets {
                sourcesByTarget[Record.ID(recordName: target, zoneID: key.zoneID), default: []].insert(key.recordName)
            }
        }
        return previous
    }

    @discardableResult
    fileprivate func setSchema(_ schema: RecordTypeSchema?, for name: String) -> RecordTypeSchema? {
        let previous = schemas[name]
        schemas[name] = schema
        return previous
    }
}

/// One simulated request: reads the simulation first and the store below it, writes into the
/// simulation, and remembers how to undo its writes.
private final class SimulatedTransaction: RecordWriteTransaction {
    let simulation: WriteSimulation
    let engine: any StorageEngine
    let context: DatabaseContext
    /// What the simulation held before each change of this request, oldest first.
    private var journal: [Change] = []
    /// The store's records, zones, schema and `.deleteSelf` sources, each read once.
    private var storeRecords: [Record.ID: Record?] = [:]
    private var storeZones: [RecordZone.ID: RecordZone.Capabilities]?
    private var storeSchema: ContainerSchema?
    private var storeSources: [Record.ID: [String]] = [:]

    private enum Change {
        case record(Record.ID, WriteSimulation.Entry?)
        case schema(String, RecordTypeSchema?)
    }

    init(simulation: WriteSimulation, engine: any StorageEngine, context: DatabaseContext) {
        self.simulation = simulation
        self.engine = engine
        self.context = context
    }

    private func key(_ id: Record.ID) -> Record.ID {
        Record.ID(recordName: id.recordName, zoneID: WriteSimulation.zoneKey(id.zoneID, context))
    }

    /// Reads from the store, in one call, the records of `ids` the simulation does not hold.
    func prefetch(_ ids: [Record.ID]) throws {
        var wanted: [Record.ID] = []
        var seen: Set<Record.ID> = []
        for id in ids {
            let key = key(id)
            guard simulation.entry(key) == nil, storeRecords[key] == nil, seen.insert(key).inserted else { continue }
            wanted.append(id)
        }
        guard !wanted.isEmpty else { return }
        let found = try engine.fetchRecords(wanted, in: context)
        for id in wanted { storeRecords[key(id)] = .some(found[id]) }
    }

    /// Undoes this request's changes, newest first.
    func rollBack() {
        for change in journal.reversed() {
            switch change {
            case .record(let key, let entry): simulation.set(key, entry)
            case .schema(let name, let schema): simulation.setSchema(schema, for: name)
            }
        }
        journal.removeAll()
    }

    private func write(_ key: Record.ID, _ entry: WriteSimulation.Entry) {
        journal.append(.record(key, simulation.set(key, entry)))
    }

    /// The record as the store holds it, read once.
    private func storeRecord(_ id: Record.ID, key: Record.ID) throws -> Record? {
        if let known = storeRecords[key] { return known }
        let found = try engine.fetchRecords([id], in: context)[id]
        storeRecords[key] = .some(found)
        return found
    }

    // MARK: RecordWriteTransaction

    func zoneCapabilities(_ zoneID: RecordZone.ID) throws -> RecordZone.Capabilities? {
        let key = WriteSimulation.zoneKey(zoneID, context)
        if let created = simulation.createdZone(key) { return created }
        if storeZones == nil {
            var zones: [RecordZone.ID: RecordZone.Capabilities] = [:]
            for zone in try engine.fetchZones(in: context) { zones[WriteSimulation.zoneKey(zone.zoneID, context)] = zone.capabilities }
            storeZones = zones
        }
        return storeZones?[key]
    }

    func storedRecord(_ id: Record.ID) throws -> Record? {
        let key = key(id)
        switch simulation.entry(key) {
        case .deleted?: return nil
        case .written(let row)?:
            let decoded = try row.document.withUnsafeBufferPointer { bytes in
                try FieldDocument.decodeStoredDocument(utf8: bytes, zoneID: id.zoneID) { _ in nil }
            }
            return Record.stored(recordType: row.recordType, recordID: id, systemFields: row.systemFields, fields: decoded.fields,
                          parent: row.parent?.inZone(id.zoneID), encryptedKeys: decoded.encryptedKeys, jsonExtras: decoded.jsonExtras)
        case nil:
            return try storeRecord(id, key: key)
        }
    }

    func recordExists(_ id: Record.ID) throws -> Bool {
        let key = key(id)
        switch simulation.entry(key) {
        case .deleted?: return false
        case .written?: return true
        case nil: return try storeRecord(id, key: key) != nil
        }
    }

    func insertNewRecords(_ rows: [RecordRow]) throws -> [Bool] {
        var named: Set<Record.ID> = []
        return try rows.map { row in
            let key = key(row.recordID)
            guard named.insert(key).inserted, try !recordExists(row.recordID) else { return false }
            write(key, .written(WriteSimulation.Row(row)))
            return true
        }
    }

    func writeRecord(_ row: RecordRow, replacing: Bool) throws {
        write(key(row.recordID), .written(WriteSimulation.Row(row)))
    }

    func deleteRecord(_ id: Record.ID) throws -> Bool {
        guard try recordExists(id) else { return false }
        write(key(id), .deleted)
        return true
    }

    func deleteSelfSources(of id: Record.ID) throws -> [String] {
        let key = key(id)
        let stored: [String]
        if let known = storeSources[key] {
            stored = known
        } else {
            stored = try engine.deleteSelfSources(of: id, in: context)
            storeSources[key] = stored
        }
        // The store's sources that the simulation did not write again or delete, and its own.
        var names = simulation.sources(of: key)
        for name in stored where simulation.entry(Record.ID(recordName: name, zoneID: key.zoneID)) == nil { names.insert(name) }
        return names.sorted()
    }

    func deleteSelfReferenceCount(to target: Record.ID, excludingSource source: String) throws -> Int {
        try deleteSelfSources(of: target).filter { $0 != source }.count
    }

    func recordTypeSchema(_ recordType: String) throws -> RecordTypeSchema? {
        if let grown = simulation.schema(recordType) { return grown }
        if storeSchema == nil { storeSchema = try engine.fetchSchema(storageContainer: context.storageContainer) }
        return storeSchema?.recordType(recordType)
    }

    func containerSchema() throws -> ContainerSchema {
        if storeSchema == nil { storeSchema = try engine.fetchSchema(storageContainer: context.storageContainer) }
        var schema = storeSchema ?? ContainerSchema()
        for grown in simulation.grownSchemas {
            schema.recordTypes.removeAll { $0.recordType == grown.recordType }
            schema.recordTypes.append(grown)
        }
        return schema
    }

    func saveRecordTypeSchema(_ schema: RecordTypeSchema) throws {
        journal.append(.schema(schema.recordType, simulation.setSchema(schema, for: schema.recordType)))
    }

    func saveJobProgress(_ job: String, position: Int64, text: String?) throws {}

    // A dry run writes no share index, as it writes no share.
    func indexShare(_ shareRecordName: String, zoneName: String, token: String, rootRecordName: String?, members: [ShareIndexMember]) throws {}
    func removeShareFromIndex(_ shareRecordName: String, zoneName: String) throws {}

    var releasedAssetContents: Set<String> { [] }

    func subscriptionVersion() throws -> Int64? { nil }
    func fetchSubscriptions() throws -> SubscriptionSet { SubscriptionSet(version: 0, subscriptions: []) }
    func deleteSubscriptions(_ keys: [SubscriptionKey]) throws -> Set<SubscriptionKey> { [] }
    func appendNotifications(_ rows: [NotificationRow]) throws {}
}

/// An asset content store that keeps nothing: a simulated save reads and hashes its sources
/// (the same checks and identifiers as a real save) and drops what it read.
private struct DiscardedAssetContents: AssetContentStore {
    var localDirectory: URL { FileManager.default.temporaryDirectory }

    func beginUpload(holder: String) throws -> any AssetUpload { DiscardedUpload() }
    /// Content a save names without uploading it is taken to be there: a dry run does not hold it.
    func hold(_ identifiers: Set<String>, holder: String) throws -> Set<String> { identifiers }
    func commit(_ uploads: [(upload: any AssetUpload, identifier: String)]) throws {}
    func contentURL(_ identifier: String) -> URL? { nil }
    func contentFile(_ identifier: String) throws -> URL? { nil }
    func visibleContent(_ identifiers: Set<String>) throws -> Set<String> { identifiers }
    func collect(releasing holder: String?, candidates: Set<String>?, isHolderAlive: (String) -> Bool) throws -> AssetCollection { AssetCollection() }
    func inventory() throws -> (identifiers: Set<String>, bytes: Int64) { ([], 0) }

    private final class DiscardedUpload: AssetUpload {
        func write(_ bytes: UnsafeRawBufferPointer) throws {}
        func finishWriting() {}
        func abandon() {}
    }
}
