import Foundation
@_spi(StratusEngine) import Stratus
import StratusSQLite
import StratusTestSupport
import Synchronization
import Testing

// Safe writes through the public API, beyond what the engine conformance suite checks:
// conflicts and merging, save policies on stale copies, batch splitting and the atomic
// promise, record size, parents and .deleteSelf limits, and retries of transient failures.

// MARK: - Helpers

/// A storage engine that forwards to another engine, records what each write transaction
/// stored, and can fail calls with scripted errors (to test retries without timing games).
final class ScriptedEngine: StorageEngine, Sendable {
    struct ModifyCall: Sendable {
        var saves: [String]
        var deletes: [String]
        /// Field bytes of the saves, as the 2 MB request limit counts them (roughly).
        var bytes: Int
    }

    struct Script: Sendable {
        /// Errors the next write calls throw, one per call, before anything is forwarded.
        var writeFailures: [StratusError] = []
        /// Thrown by every write call (after `writeFailures` ran out) when set.
        var alwaysFailWrites: StratusError?
        /// Thrown by every query call when set.
        var alwaysFailQueries: StratusError?
        /// The engine's preferred import batch size, instead of the base engine's, when set.
        var importBatchSize: Int?
        /// Write calls that reach the base engine before `writeFailures` and
        /// `alwaysFailWrites` apply: the store becomes busy in the middle of a request.
        var passingWrites = 0
    }

    let base: any StorageEngine
    private let state = Mutex<(script: Script, calls: [ModifyCall], writeAttempts: Int, queryAttempts: Int)>((Script(), [], 0, 0))

    init(_ base: any StorageEngine) { self.base = base }

    func script(_ change: (inout Script) -> Void) { state.withLock { change(&$0.script) } }
    /// The write transactions that reached the base engine, in order.
    var modifyCalls: [ModifyCall] { state.withLock { $0.calls } }
    /// Every write call, including the ones failed by the script.
    var writeAttempts: Int { state.withLock { $0.writeAttempts } }
    var queryAttempts: Int { state.withLock { $0.queryAttempts } }

    var storeIdentifier: String { get throws { try base.storeIdentifier } }

    var preferredImportBatchSize: Int { state.withLock { $0.script.importBatchSize } ?? base.preferredImportBatchSize }

    func writeRecords<T>(in database: DatabaseContext, _ body: (any RecordWriteTransaction) throws -> T) throws -> T {
        let failure = state.withLock { s -> StratusError? in
            s.writeAttempts += 1
            if s.script.passingWrites > 0 {
                s.script.passingWrites -= 1
                return nil
            }
            if !s.script.writeFailures.isEmpty { return s.script.writeFailures.removeFirst() }
            return s.script.alwaysFailWrites
        }
        if let failure { throw failure }
        let recorder = RecordingTransaction()
        defer { state.withLock { $0.calls.append(recorder.call) } }
        return try base.writeRecords(in: database) { transaction in
            recorder.base = transaction
            return try body(recorder)
        }
    }

    func queryRecords(_ query: CompiledQuery, in database: DatabaseContext, after position: QueryPosition?, limit: Int) throws -> QueryPage {
        let failure = state.withLock { s -> StratusError? in
            s.queryAttempts += 1
            return s.script.alwaysFailQueries
        }
        if let failure { throw failure }
        return try base.queryRecords(query, in: database, after: position, limit: limit)
    }

    func fetchRecords(_ ids: [Record.ID], in database: DatabaseContext) throws -> [Record.ID: Record] { try base.fetchRecords(ids, in: database) }
    func deleteSelfSources(of id: Record.ID, in database: DatabaseContext) throws -> [String] { try base.deleteSelfSources(of: id, in: database) }
    func hasChildRecords(of id: Record.ID, in database: DatabaseContext) throws -> Bool { try base.hasChildRecords(of: id, in: database) }
    func openQueryStream(_ query: CompiledQuery, in database: DatabaseContext, after position: QueryPosition?) throws -> any QueryStream {
        try base.openQueryStream(query, in: database, after: position)
    }
    func countRecords(_ query: CompiledQuery, in database: DatabaseContext) throws -> Int { try base.countRecords(query, in: database) }
    func fetchSchema(storageContainer: String) throws -> ContainerSchema { try base.fetchSchema(storageContainer: storageContainer) }
    func modifySchema<T>(storageContainer: String, _ body: (inout ContainerSchema) throws -> T) throws -> T {
        try base.modifySchema(storageContainer: storageContainer, body)
    }
    func modifySchema<T>(storageContainer: String, comparedWith other: String, _ body: (inout ContainerSchema, ContainerSchema) throws -> T) throws -> T {
        try base.modifySchema(storageContainer: storageContainer, comparedWith: other, body)
    }
    func resetEnvironment(storageContainer: String, toSchemaOf schemaSource: String) throws { try base.resetEnvironment(storageContainer: storageContainer, toSchemaOf: schemaSource) }
    func fetchUserDirectory(containerIdentifier: String, logins: [String]?) throws -> [UserDirectoryEntry] {
        try base.fetchUserDirectory(containerIdentifier: containerIdentifier, logins: logins)
    }
    func modifyUserDirectory(containerIdentifier: String, saving entries: [UserDirectoryEntry], deletingLogins logins: [String]) throws {
        try base.modifyUserDirectory(containerIdentifier: containerIdentifier, saving: entries, deletingLogins: logins)
    }
    func findUsers(containerIdentifier: String, addressKeys: [String], userRecordNames: [String]) throws -> [UserDirectoryEntry] {
        try base.findUsers(containerIdentifier: containerIdentifier, addressKeys: addressKeys, userRecordNames: userRecordNames)
    }
    func saveUserDiscoverability(containerIdentifier: String, login: String, userRecordName: String, isDiscoverable: Bool) throws {
        try base.saveUserDiscoverability(containerIdentifier: containerIdentifier, login: login, userRecordName: userRecordName, isDiscoverable: isDiscoverable)
    }
    func countRecordsByType(in database: DatabaseContext, zoneID: RecordZone.ID) throws -> [String: Int] { try base.countRecordsByType(in: database, zoneID: zoneID) }
    func inventory() throws -> StoreInventory { try base.inventory() }
    func assetContents(for database: DatabaseContext) -> any AssetContentStore { base.assetContents(for: database) }
    func jobProgress(_ job: String) throws -> Int64? { try base.jobProgress(job) }
    func jobProgressText(_ job: String) throws -> String? { try base.jobProgressText(job) }
    func removeJobProgress(_ job: String) throws { try base.removeJobProgress(job) }
    func checkIntegrity() throws -> [String] { try base.checkIntegrity() }
    func fetchZones(in database: DatabaseContext) throws -> [RecordZone] { try base.fetchZones(in: database) }
    func modifyZones(
        saving zones: [RecordZone], deleting zoneIDs: [RecordZone.ID], in database: DatabaseContext,
        notify: (_ outcome: ZoneModifyOutcome, _ transaction: any RecordWriteTransaction) throws -> Void
    ) throws -> ZoneModifyOutcome {
        try base.modifyZones(saving: zones, deleting: zoneIDs, in: database, notify: notify)
    }
    func fetchZoneChanges(_ request: ZoneChangesRequest, in database: DatabaseContext) throws -> ZoneChangeBatch { try base.fetchZoneChanges(request, in: database) }
    func fetchDatabaseChanges(after position: ChangePosition?, limit: Int, in database: DatabaseContext) throws -> DatabaseChangeBatch {
        try base.fetchDatabaseChanges(after: position, limit: limit, in: database)
    }
    func compactChangeHistory(in database: DatabaseContext, deletedBefore cutoff: Date) throws -> ChangeHistoryCompaction {
        try base.compactChangeHistory(in: database, deletedBefore: cutoff)
    }
}

/// Forwards a write transaction and notes each record it handled (a save looks the record
/// up or inserts it; the first time counts) and each record it deleted.
final class RecordingTransaction: RecordWriteTransaction {
    var base: (any RecordWriteTransaction)!
    private(set) var call = ScriptedEngine.ModifyCall(saves: [], deletes: [], bytes: 0)
    private var seen: Set<Record.ID> = []

    /// A record first seen by a look-up, until something else happens to it: a delete in the
    /// public database looks its record up first (for its type and creator), which is no save.
    private var lookedUp: Record.ID?

    private func note(_ id: Record.ID, bytes: Int) {
        lookedUp = nil
        guard seen.insert(id).inserted else { return }
        call.saves.append(id.recordName)
        call.bytes += bytes
    }

    func zoneCapabilities(_ zoneID: RecordZone.ID) throws -> RecordZone.Capabilities? { try base.zoneCapabilities(zoneID) }
    func storedRecord(_ id: Record.ID) throws -> Record? {
        let isNew = !seen.contains(id)
        note(id, bytes: 0)
        if isNew { lookedUp = id }
        return try base.storedRecord(id)
    }
    func recordExists(_ id: Record.ID) throws -> Bool { try base.recordExists(id) }
    func insertNewRecords(_ rows: [RecordRow]) throws -> [Bool] {
        for row in rows { note(row.recordID, bytes: Record.fieldDataSize(of: row.fields)) }
        return try base.insertNewRecords(rows)
    }
    func writeRecord(_ row: RecordRow, replacing: Bool) throws {
        try base.writeRecord(row, replacing: replacing)
    }
    func recordTypeSchema(_ recordType: String) throws -> RecordTypeSchema? { try base.recordTypeSchema(recordType) }
    func saveRecordTypeSchema(_ schema: RecordTypeSchema) throws { try base.saveRecordTypeSchema(schema) }
    func containerSchema() throws -> ContainerSchema { try base.containerSchema() }
    func deleteRecord(_ id: Record.ID) throws -> Bool {
        if lookedUp == id, call.saves.last == id.recordName {
            call.saves.removeLast()
            seen.remove(id)
        }
        lookedUp = nil
        call.deletes.append(id.recordName)
        return try base.deleteRecord(id)
    }
    func deleteSelfSources(of id: Record.ID) throws -> [String] { try base.deleteSelfSources(of: id) }
    func deleteSelfReferenceCount(to target: Record.ID, excludingSource source: String) throws -> Int {
        try base.deleteSelfReferenceCount(to: target, excludingSource: source)
    }
    var releasedAssetContents: Set<String> { base.releasedAssetContents }
    func saveJobProgress(_ job: String, position: Int64, text: String?) throws { try base.saveJobProgress(job, position: position, text: text) }
}

/// What one ``ModifyRecordsOperation`` reported, with the order of its per-item save blocks.
struct ModifyRun: Sendable {
    var saveOrder: [Record.ID] = []
    var saves: [Record.ID: Result<Record, any Error>] = [:]
    var deletes: [Record.ID: Result<Void, any Error>] = [:]
    var final: Result<Void, any Error>?

    var finalError: StratusError? { SafeWriteTests.failure(final) }
    var succeeded: [Record.ID] { saveOrder.filter { if case .success? = saves[$0] { true } else { false } } }
}

@Suite("Safe writes: conflicts, batches, references, retries", .timeLimit(.minutes(30)))
struct SafeWriteTests {
    static func failure<T>(_ result: Result<T, any Error>?) -> StratusError? {
        if case .failure(let error)? = result { return error as? StratusError }
        return nil
    }

    /// Runs one ModifyRecordsOperation and collects every block call.
    static func modify(
        _ database: Database, saving: [Record] = [], deleting: [Record.ID] = [], atomic: Bool,
        policy: ModifyRecordsOperation.SavePolicy = .ifServerRecordUnchanged, retryPolicy: RetryPolicy? = nil
    ) async -> ModifyRun {
        let run = Box(ModifyRun())
        let op = ModifyRecordsOperation(recordsToSave: saving, recordIDsToDelete: deleting)
        op.isAtomic = atomic
        op.savePolicy = policy
        op.retryPolicy = retryPolicy
        op.perRecordSaveBlock = { id, result in run.update { $0.saveOrder.append(id); $0.saves[id] = result } }
        op.perRecordDeleteBlock = { id, result in run.update { $0.deletes[id] = result } }
        op.modifyRecordsResultBlock = { result in run.update { $0.final = result } }
        await StratusTestSupport.run(op, on: database)
        return run.value
    }

    /// A store on a scripted engine: alice's public database, the engine, and the store itself.
    /// A custom zone, which has the atomic capability (the default zone has not, as CloudKit's).
    static func atomicZone(in database: Database) async throws -> RecordZone.ID {
        try await database.save(RecordZone(zoneName: "Atomic")).zoneID
    }

    static func scripted(retryPolicy: RetryPolicy = RetryPolicy()) throws -> (Database, ScriptedEngine, TemporaryStore) {
        let store = try TemporaryStore(prefix: "stratus-safe")
        let engine = ScriptedEngine(try SQLiteEngine(path: store.path()))
        let container = Container(identifier: SQLiteFixture.identifier, engine: engine, userName: "alice", retryPolicy: retryPolicy)
        return (container.publicCloudDatabase, engine, store)
    }

    static func count(_ type: String, in database: Database, zoneID: RecordZone.ID? = nil) async throws -> Int {
        try await TestDatabase.queryAll(Query(recordType: type), in: database, zoneID: zoneID).count
    }

    /// The zone's changes after `token` (an empty list when nothing was written since).
    static func changes(since token: ServerChangeToken?, in database: Database, zoneID: RecordZone.ID = .default) async throws -> (count: Int, token: ServerChangeToken) {
        let batch = try await database.recordZoneChanges(inZoneWith: zoneID, since: token)
        return (batch.modificationResultsByID.count + batch.deletions.count, batch.changeToken)
    }

    // MARK: - Conflicts

    @Test("serverRecordChanged carries server, client and ancestor records; merging and saving again succeeds")
    func conflictCarriesRecordsAndMergeSucceeds() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await database.save(makeRecord("Doc", "doc", ["title": .string("draft"), "n": .int64(1), "tags": .stringList(["a"])]))
            let mine = try await database.record(for: Record.ID(recordName: "doc"))
            let theirs = try await database.record(for: Record.ID(recordName: "doc"))
            theirs["title"] = "their title"
            let theirsSaved = try await database.save(theirs)

            mine["n"] = 2
            let run = await Self.modify(database, saving: [mine], atomic: true)
            let error = try #require(Self.failure(run.saves[mine.recordID]), "a stale save must fail")
            #expect(error.code == .serverRecordChanged)
            #expect(run.finalError?.code == .partialFailure)
            #expect(run.finalError?.partialErrorsByRecordID[mine.recordID]?.code == .serverRecordChanged)

            let server = try #require(error.serverRecord, "serverRecordChanged carries the server record")
            #expect(server.recordChangeTag == theirsSaved.recordChangeTag)
            #expect(server["title"] as? String == "their title")
            #expect(server.fieldValue(forKey: "n") == .int64(1))
            #expect(server.changedKeys().isEmpty)

            let client = try #require(error.clientRecord, "serverRecordChanged carries the client record")
            #expect(client.recordChangeTag == mine.recordChangeTag)
            #expect(client.fieldValue(forKey: "n") == .int64(2))
            #expect(client["title"] as? String == "draft")
            #expect(client.changedKeys() == ["n"])

            // The client's change was based on the record it fetched, so the ancestor is known.
            #expect(error.ancestorRecord != nil, "a conflict on a fetched record should carry ancestorRecord, the version the change was based on")
            if let ancestor = error.ancestorRecord {
                #expect(ancestor.recordChangeTag == mine.recordChangeTag)
                #expect(ancestor.fieldValue(forKey: "n") == .int64(1))
                #expect(ancestor["title"] as? String == "draft")
            }

            // Merge: the server's record with the client's changed keys, saved again.
            for key in client.changedKeys() { server.setFieldValue(client.fieldValue(forKey: key), forKey: key) }
            let merged = try await database.save(server)
            #expect(merged.recordChangeTag != theirsSaved.recordChangeTag)
            let stored = try await database.record(for: mine.recordID)
            #expect(stored["title"] as? String == "their title")
            #expect(stored.fieldValue(forKey: "n") == .int64(2))
            #expect(stored.fieldValue(forKey: "tags") == .stringList(["a"]))
            #expect(stored.recordChangeTag == merged.recordChangeTag)
        }
    }

    @Test("read-modify-write from concurrent operations with merge on conflict loses no update")
    func concurrentIncrementsLoseNothing() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            let id = Record.ID(recordName: "counter")
            try await database.save(makeRecord("Counter", "counter", ["n": .int64(0)]))
            let writers = 4, increments = 25
            let conflicts = Box(0)
            try await withThrowingTaskGroup(of: [Int64].self) { group in
                for _ in 0..<writers {
                    group.addTask {
                        var won: [Int64] = []
                        var base = try await database.record(for: id)
                        while won.count < increments {
                            guard case .int64(let n)? = base.fieldValue(forKey: "n") else { throw StratusError(.internalError, "counter has no n") }
                            base["n"] = n + 1
                            do {
                                _ = try await database.save(base)
                                won.append(n + 1)
                                base = try await database.record(for: id)
                            } catch let error as StratusError where error.code == .serverRecordChanged {
                                conflicts.update { $0 += 1 }
                                base = try #require(error.serverRecord)
                            }
                        }
                        return won
                    }
                }
                var all: [Int64] = []
                for try await won in group { all += won }
                #expect(all.sorted() == (1...Int64(writers * increments)).map { $0 }, "every value is won by exactly one writer")
            }
            #expect(try await database.record(for: id).fieldValue(forKey: "n") == .int64(Int64(writers * increments)))
            print("concurrent increments: \(writers * increments) increments, \(conflicts.value) conflicts detected and merged")
        }
    }

    @Test("a new record (no change tag) whose name exists: serverRecordChanged by default, merged by .changedKeys")
    func newRecordOverExistingName() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            let existing = try await database.save(makeRecord("Doc", "taken", ["a": .int64(1), "b": .int64(2)]))
            let newcomer = makeRecord("Doc", "taken", ["a": .int64(10)])
            let run = await Self.modify(database, saving: [newcomer, makeRecord("Doc", "free", ["a": .int64(3)])], atomic: false)
            let error = try #require(Self.failure(run.saves[newcomer.recordID]))
            #expect(error.code == .serverRecordChanged)
            #expect(error.serverRecord?.recordChangeTag == existing.recordChangeTag)
            #expect(error.clientRecord?.recordChangeTag == nil)
            // As CloudKit: all three records, the ancestor of a new record without fields.
            let ancestor = try #require(error.ancestorRecord, "handlers that require all three records of a conflict get them")
            #expect(ancestor.recordID == newcomer.recordID && ancestor.recordType == "Doc" && ancestor.allKeys().isEmpty && ancestor.recordChangeTag == nil)
            #expect((error as NSError).userInfo[RecordChangedErrorAncestorRecordKey] is Record)
            #expect(error.message.contains(".allKeys") || error.message.contains(".changedKeys"), "the message says how to overwrite: \(error.message)")
            #expect(try await TestDatabase.exists("free", in: database))
            #expect(try await database.record(for: newcomer.recordID).fieldValues == ["a": .int64(1), "b": .int64(2)])

            let merged = await Self.modify(database, saving: [newcomer], atomic: true, policy: .changedKeys)
            #expect(Self.failure(merged.saves[newcomer.recordID]) == nil)
            #expect(try await database.record(for: newcomer.recordID).fieldValues == ["a": .int64(10), "b": .int64(2)])
        }
    }

    @Test(".changedKeys on a stale copy writes only its changes (sets and removals) and keeps keys others added")
    func changedKeysOnStaleCopy() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await database.save(makeRecord("Doc", "doc", ["a": .int64(1), "b": .int64(2)]))
            let stale = try await database.record(for: Record.ID(recordName: "doc"))
            let other = try await database.record(for: Record.ID(recordName: "doc"))
            other["b"] = 20
            other["c"] = "added by someone else"
            let otherSaved = try await database.save(other)

            stale["a"] = nil
            stale["d"] = 4
            let run = await Self.modify(database, saving: [stale], atomic: true, policy: .changedKeys)
            let saved = try #require(try run.saves[stale.recordID]?.get())
            let expected: [String: FieldValue] = ["b": .int64(20), "c": .string("added by someone else"), "d": .int64(4)]
            #expect(saved.fieldValues == expected)
            #expect(saved.recordChangeTag != otherSaved.recordChangeTag && saved.recordChangeTag != stale.recordChangeTag)
            #expect(try await database.record(for: stale.recordID).fieldValues == expected)
        }
    }

    @Test(".allKeys on a stale copy overwrites every key the client holds; a key only the store holds stays, as in CloudKit")
    func allKeysOnStaleCopy() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            let original = try await database.save(makeRecord("Doc", "doc", ["a": .int64(1), "b": .int64(2)]))
            let stale = try await database.record(for: Record.ID(recordName: "doc"))
            let other = try await database.record(for: Record.ID(recordName: "doc"))
            other["b"] = 20
            other["c"] = "added by someone else"
            try await database.save(other)

            stale["a"] = 10
            let run = await Self.modify(database, saving: [stale], atomic: true, policy: .allKeys)
            let saved = try #require(try run.saves[stale.recordID]?.get())
            let expected: [String: FieldValue] = ["a": .int64(10), "b": .int64(2), "c": .string("added by someone else")]
            #expect(saved.fieldValues == expected)
            let stored = try await database.record(for: stale.recordID)
            #expect(stored.fieldValues == expected)
            #expect(stored.creationDate == original.creationDate)
            #expect(stored.recordChangeTag == saved.recordChangeTag)
        }
    }

    // MARK: - Batches

    @Test("a non-atomic request of 1,001 items is split into ≤ 400-item transactions, in order, with one partialFailure map")
    func nonAtomicSplitKeepsOrder() async throws {
        let (database, engine, store) = try Self.scripted()
        defer { store.remove() }
        try await database.save(makeRecord("Item", "item-00450", ["n": .int64(-1)]))
        var records = items(1_001)
        records[5] = makeRecord("Item", "_item-bad", ["n": .int64(5)])                           // invalid name
        let oversized = makeRecord("Item", "item-00999", ["blob": .bytes(Data(count: Record.maximumFieldDataSize + 1))])
        records[999] = oversized
        let deletes = [Record.ID(recordName: "item-00450-missing")]
        let before = engine.modifyCalls.count
        let run = await Self.modify(database, saving: records, deleting: deletes, atomic: false)

        // Each item is reported exactly once; the valid ones in request order.
        #expect(run.saveOrder.count == records.count)
        #expect(Set(run.saveOrder).count == records.count)
        let failing: Set<String> = ["_item-bad", "item-00450", "item-00999"]
        let validOrder = records.map(\.recordID.recordName).filter { !["_item-bad", "item-00999"].contains($0) }
        #expect(run.saveOrder.map(\.recordName).filter { !["_item-bad", "item-00999"].contains($0) } == validOrder)
        #expect(Set(run.succeeded.map(\.recordName)) == Set(records.map(\.recordID.recordName)).subtracting(failing))

        let final = try #require(run.finalError)
        #expect(final.code == .partialFailure)
        #expect(Set(final.partialErrorsByRecordID.keys.map(\.recordName)) == failing)
        #expect(final.partialErrorsByRecordID[records[5].recordID]?.code == .invalidArguments)
        #expect(final.partialErrorsByRecordID[Record.ID(recordName: "item-00450")]?.code == .serverRecordChanged)
        #expect(final.partialErrorsByRecordID[oversized.recordID]?.code == .limitExceeded)
        #expect(Self.failure(run.deletes[deletes[0]]) == nil && run.deletes[deletes[0]] != nil)

        // The engine saw transactions of at most 400 items that, concatenated, are the valid request in order.
        let calls = Array(engine.modifyCalls.dropFirst(before))
        #expect(calls.count == 3, "999 valid saves and 1 delete make 3 transactions: \(calls.map { $0.saves.count + $0.deletes.count })")
        #expect(calls.allSatisfy { $0.saves.count + $0.deletes.count <= ModifyRecordsOperation.maximumItemsPerBatch })
        #expect(calls.flatMap(\.saves) == validOrder)
        #expect(calls.flatMap(\.deletes) == ["item-00450-missing"])
        #expect(try await Self.count("Item", in: database) == 1_001 - 2)
        #expect(try await database.record(for: Record.ID(recordName: "item-00450")).fieldValue(forKey: "n") == .int64(-1))
    }

    @Test("itemsPerBatch sets the transaction size of a non-atomic request; 2 MB still ends a transaction")
    func itemsPerBatch() async throws {
        let (database, engine, store) = try Self.scripted()
        defer { store.remove() }
        let records = items(2_500)
        let op = ModifyRecordsOperation(recordsToSave: records)
        op.isAtomic = false
        op.itemsPerBatch = 1_000
        let kinds = Box([RecordWriteKind]())
        op.perRecordWriteKindBlock = { _, kind in kinds.update { $0.append(kind) } }
        await StratusTestSupport.run(op, on: database)
        #expect(engine.modifyCalls.map(\.saves.count) == [1_000, 1_000, 500])
        #expect(kinds.value.count == 2_500 && kinds.value.allSatisfy { $0 == .created })
        #expect(try await Self.count("Item", in: database) == 2_500)

        let big = (0..<6).map { i in makeRecord("Blob", recordName("blob", i), ["data": .bytes(patternBytes(count: 600_000, seed: UInt8(i)))]) }
        let bulk = ModifyRecordsOperation(recordsToSave: big)
        bulk.isAtomic = false
        bulk.itemsPerBatch = 1_000
        let before = engine.modifyCalls.count
        await StratusTestSupport.run(bulk, on: database)
        let calls = engine.modifyCalls.dropFirst(before)
        #expect(calls.count >= 2 && calls.allSatisfy { $0.bytes <= ModifyRecordsOperation.maximumBytesPerBatch }, "\(calls.map(\.bytes))")
        #expect(calls.flatMap(\.saves) == big.map(\.recordID.recordName))
    }

    @Test("a non-atomic request over 2 MB is split by size, in order; an atomic one stays one transaction")
    func splitBySize() async throws {
        let (database, engine, store) = try Self.scripted()
        defer { store.remove() }
        let big = (0..<12).map { i in makeRecord("Blob", recordName("blob", i), ["data": .bytes(patternBytes(count: 400_000, seed: UInt8(i)))]) }
        let run = await Self.modify(database, saving: big, atomic: false)
        #expect(run.finalError == nil)
        #expect(run.saveOrder == big.map(\.recordID))
        let calls = engine.modifyCalls
        #expect(calls.count >= 3, "4.8 MB needs at least 3 requests of 2 MB")
        #expect(calls.allSatisfy { $0.bytes <= ModifyRecordsOperation.maximumBytesPerBatch }, "\(calls.map(\.bytes))")
        #expect(calls.flatMap(\.saves) == big.map(\.recordID.recordName))
        for (i, record) in big.enumerated() {
            #expect(try await database.record(for: record.recordID).fieldValue(forKey: "data") == .bytes(patternBytes(count: 400_000, seed: UInt8(i))))
        }

        // Atomic (in an atomic zone): the same size in one transaction (the atomic promise is never split).
        let zone = try await Self.atomicZone(in: database)
        let atomicBig = (0..<12).map { i in makeRecord("Blob", recordName("atomic", i), zoneID: zone, ["data": .bytes(patternBytes(count: 400_000, seed: UInt8(i)))]) }
        let before = engine.modifyCalls.count
        let atomicRun = await Self.modify(database, saving: atomicBig, atomic: true)
        #expect(atomicRun.finalError == nil)
        #expect(engine.modifyCalls.count == before + 1)
        #expect(engine.modifyCalls.last?.saves.count == 12)
    }

    @Test("an atomic request of 1,001 items is one transaction; one failure anywhere writes nothing and changes no history")
    func atomicRequestAllOrNothing() async throws {
        let (database, engine, store) = try Self.scripted()
        defer { store.remove() }
        let zone = try await Self.atomicZone(in: database)
        try await database.save(makeRecord("Item", "existing", zoneID: zone, ["n": .int64(0)]))
        try await TestDatabase.save([
            makeRecord("Node", "root", zoneID: zone),
            makeRecord("Node", "leaf", zoneID: zone, ["up": .reference(reference("root", .deleteSelf, zoneID: zone))]),
        ], in: database)
        let token = try await Self.changes(since: nil, in: database, zoneID: zone).token

        var records = makeRecords("Item", count: 1_001, prefix: "item", zoneID: zone) { i in ["n": .int64(Int64(i))] }
        let conflicting = makeRecord("Item", "existing", zoneID: zone, ["n": .int64(99)])   // no tag: conflicts in the engine
        records[700] = conflicting
        let root = Record.ID(recordName: "root", zoneID: zone)
        let before = engine.modifyCalls.count
        let run = await Self.modify(database, saving: records, deleting: [root], atomic: true)
        #expect(engine.modifyCalls.count == before + 1, "an atomic request is one engine call")
        #expect(engine.modifyCalls.last?.saves.count == 1_001)
        #expect(errorCode(run.saves[conflicting.recordID]) == .serverRecordChanged)
        let others = records.filter { $0.recordID != conflicting.recordID }
        #expect(others.allSatisfy { errorCode(run.saves[$0.recordID]) == .batchRequestFailed })
        #expect(errorCode(run.deletes[root]) == .batchRequestFailed)
        #expect(run.finalError?.code == .partialFailure)
        #expect(run.finalError?.partialErrorsByRecordID.count == 1_002)

        #expect(try await Self.count("Item", in: database, zoneID: zone) == 1, "nothing of the atomic request was written")
        #expect(try await TestDatabase.exists("root", zoneID: zone, in: database), "the delete was rolled back")
        #expect(try await TestDatabase.exists("leaf", zoneID: zone, in: database), "the cascade was rolled back")
        #expect(try await Self.changes(since: token, in: database, zoneID: zone).count == 0, "the zone's change history did not move")

        // Without the failing item the same request commits whole.
        records[700] = makeRecord("Item", "item-00700", zoneID: zone, ["n": .int64(700)])
        let retry = await Self.modify(database, saving: records, atomic: true)
        #expect(retry.finalError == nil)
        #expect(try await Self.count("Item", in: database, zoneID: zone) == 1_002)
    }

    @Test("an atomic request above maximumAtomicItems is limitExceeded, and nothing reaches the store")
    func atomicRequestTooLarge() async throws {
        let (database, engine, store) = try Self.scripted()
        defer { store.remove() }
        let zone = try await Self.atomicZone(in: database)
        let count = ModifyRecordsOperation.maximumAtomicItems + 1
        var records: [Record] = []
        records.reserveCapacity(count)
        for i in 0..<count {
            let record = Record(recordType: "Tiny", recordID: Record.ID(recordName: "t\(i)", zoneID: zone))
            record.setFieldValue(.int64(Int64(i)), forKey: "n")
            records.append(record)
        }
        let run = await Self.modify(database, saving: records, atomic: true)
        let final = try #require(run.finalError)
        #expect(final.code == .limitExceeded)
        #expect(final.message.contains("\(ModifyRecordsOperation.maximumAtomicItems)"), "\(final.message)")
        #expect(run.succeeded.isEmpty, "no item is reported saved")
        #expect(engine.writeAttempts == 0, "the request never reached the store")
        #expect(try await Self.count("Tiny", in: database, zoneID: zone) == 0)

        // With records of the default zone (written one by one) in front, and of another
        // atomic zone: refused before any zone is written, so that splitting the request in
        // half and sending both, as CloudKit prescribes, sends nothing twice.
        let other = try await database.save(RecordZone(zoneName: "Other")).zoneID
        let front = (0..<10).map { Record(recordType: "Tiny", recordID: Record.ID(recordName: "d\($0)")) } + [Record(recordType: "Tiny", recordID: Record.ID(recordName: "o", zoneID: other))]
        let mixed = await Self.modify(database, saving: front + records, atomic: true)
        #expect(mixed.finalError?.code == .limitExceeded, "\(String(describing: mixed.finalError))")
        #expect(mixed.succeeded.isEmpty && engine.writeAttempts == 0, "nothing written, nothing reported saved")
        #expect(try await Self.count("Tiny", in: database) == 0)
    }

    @Test("a store that becomes busy after part of a request committed: partialFailure names the unwritten items (retryable), the written ones succeed, and sending the failed items again saves each record once")
    func busyAfterPartOfRequest() async throws {
        let (database, engine, store) = try Self.scripted(retryPolicy: RetryPolicy(maximumAttempts: 1))
        defer { store.remove() }
        let busy = StratusError(.zoneBusy, "the store is busy (scripted)", retryAfterSeconds: 0.01)
        // A non-atomic request of 1,000 is written 400 at a time: the second transaction fails.
        let records = (0..<1_000).map { makeRecord("Item", String(format: "item-%04d", $0), ["n": .int64(Int64($0))]) }
        engine.script { $0.passingWrites = 1; $0.writeFailures = [busy] }
        let run = await Self.modify(database, saving: records, atomic: false)
        let final = try #require(run.finalError)
        #expect(final.code == .partialFailure, "not a whole-request error: 400 items were written: \(final)")
        #expect(final.partialErrorsByRecordID.count == 600 && final.partialErrorsByRecordID.values.allSatisfy { $0.code == .zoneBusy && $0.retryAfterSeconds != nil })
        #expect(final.partialErrorsByRecordID[records[999].recordID]?.recordID == records[999].recordID)
        #expect(run.succeeded.count == 400 && run.saves.count == 1_000, "every item answered once")
        #expect(try await Self.count("Item", in: database) == 400)
        // CloudKit's handler: send the failed items again.
        let failedRecords = records.filter { final.partialErrorsByRecordID[$0.recordID] != nil }
        let retry = await Self.modify(database, saving: failedRecords, atomic: false)
        #expect(retry.finalError == nil, "\(String(describing: retry.finalError))")
        #expect(try await Self.count("Item", in: database) == 1_000)

        // The async form answers each item, so the caller knows what was saved.
        let more = (0..<500).map { makeRecord("More", "more-\($0)") }
        engine.script { $0.passingWrites = 1; $0.writeFailures = [busy] }
        let results = try await database.modifyRecords(saving: more, atomically: false).saveResults
        #expect(results.count == 500 && results.values.filter { (try? $0.get()) != nil }.count == 400)

        // An atomic request across two zones: each zone is atomic; the second zone's
        // transaction fails after the first zone's committed.
        let zoneA = try await database.save(RecordZone(zoneName: "A")).zoneID
        let zoneB = try await database.save(RecordZone(zoneName: "B")).zoneID
        let pair = [makeRecord("Pair", "a", zoneID: zoneA), makeRecord("Pair", "b1", zoneID: zoneB), makeRecord("Pair", "b2", zoneID: zoneB)]
        engine.script { $0.passingWrites = 1; $0.writeFailures = [busy] }
        let zones = await Self.modify(database, saving: pair, atomic: true)
        #expect(zones.finalError?.code == .partialFailure, "\(String(describing: zones.finalError))")
        #expect(Set(zones.finalError.map { Array($0.partialErrorsByRecordID.keys) } ?? []) == [pair[1].recordID, pair[2].recordID])
        #expect(zones.succeeded == [pair[0].recordID])

        // A job's request stops with the failure instead, whatever committed before it: an
        // import's batch split by the 2 MB limit rejects no record for the store being busy.
        let big = String(repeating: "x", count: 900_000)
        let large = (0..<3).map { makeRecord("Large", "large-\($0)", ["text": .string(big)]) }
        let source = ItemSource(records: large)
        var importOptions = RecordImporter.Options()
        importOptions.batchSize = 3
        engine.script { $0.passingWrites = 1; $0.writeFailures = [busy] }
        do {
            let summary = try await RecordImporter(database: database, options: importOptions).run(from: source)
            Issue.record("the import went on as if the store had answered: \(summary)")
        } catch let failure as RecordImporter.Failure {
            #expect(failure.stage == .store && failure.summary.failed == 0, "\(failure)")
            #expect((failure.error as? StratusError)?.code == .zoneBusy, "\(failure.error)")
        }

        // The first transaction failing is still the request's failure, as before.
        engine.script { $0.passingWrites = 0; $0.writeFailures = [busy] }
        let whole = await Self.modify(database, saving: [makeRecord("Item", "late")], atomic: false)
        #expect(whole.finalError?.code == .zoneBusy)
    }

    // MARK: - Record size

    @Test("field data over 1 MB is limitExceeded (assets excluded); exactly 1 MB is fine")
    func recordSizeLimit() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            let limit = Record.maximumFieldDataSize
            let exact = makeRecord("Blob", "exact", ["data": .bytes(Data(count: limit - "data".utf8.count))])
            #expect(exact.fieldDataSize == limit)
            try await database.save(exact)

            let over = makeRecord("Blob", "over", ["data": .bytes(Data(count: limit - "data".utf8.count + 1))])
            #expect(stratusError(await caughtError { try await database.save(over) })?.code == .limitExceeded)
            // Multi-byte text counts in bytes: 333,334 × "€" (3 bytes each) is over the limit.
            let euros = makeRecord("Blob", "euros", ["t": .string(String(repeating: "€", count: 333_334))])
            #expect(stratusError(await caughtError { try await database.save(euros) })?.code == .limitExceeded)
            // Many fields add up.
            let many = makeRecord("Blob", "many", Dictionary(uniqueKeysWithValues: (0..<11).map { ("f\($0)", FieldValue.bytes(Data(count: 100_000))) }))
            #expect(stratusError(await caughtError { try await database.save(many) })?.code == .limitExceeded)
            for name in ["over", "euros", "many"] { #expect(try await TestDatabase.exists(name, in: database) == false) }

            // An asset's contents do not count.
            let file = try fixture.store.writeFile("big.bin", patternBytes(count: 1_500_000, seed: 3))
            let withAsset = makeRecord("Blob", "asset", ["note": .string("small")])
            withAsset["file"] = Asset(fileURL: file)
            try await database.save(withAsset)
            #expect(try await TestDatabase.exists("asset", in: database))

            // In a non-atomic batch (and in the default zone, which is not atomic) only the
            // oversized record fails; in an atomic one in an atomic zone all do.
            let batch = [makeRecord("Blob", "b1"), makeRecord("Blob", "b-over", ["data": .bytes(Data(count: limit + 1))]), makeRecord("Blob", "b2")]
            let nonAtomic = await Self.modify(database, saving: batch, atomic: false)
            #expect(errorCode(nonAtomic.saves[batch[1].recordID]) == .limitExceeded)
            #expect(nonAtomic.succeeded.map(\.recordName).sorted() == ["b1", "b2"])
            let defaultZoneBatch = [makeRecord("Blob", "d1"), makeRecord("Blob", "d-over", ["data": .bytes(Data(count: limit + 1))])]
            let inDefaultZone = await Self.modify(database, saving: defaultZoneBatch, atomic: true)
            #expect(errorCode(inDefaultZone.saves[defaultZoneBatch[1].recordID]) == .limitExceeded)
            #expect(inDefaultZone.succeeded.map(\.recordName) == ["d1"])
            let zone = try await Self.atomicZone(in: database)
            let atomicBatch = [makeRecord("Blob", "a1", zoneID: zone), makeRecord("Blob", "a-over", zoneID: zone, ["data": .bytes(Data(count: limit + 1))])]
            let atomic = await Self.modify(database, saving: atomicBatch, atomic: true)
            #expect(errorCode(atomic.saves[atomicBatch[1].recordID]) == .limitExceeded)
            #expect(errorCode(atomic.saves[atomicBatch[0].recordID]) == .batchRequestFailed)
            #expect(try await TestDatabase.exists("a1", zoneID: zone, in: database) == false)
        }
    }

    @Test("a .changedKeys save that would make the stored record exceed 1 MB is limitExceeded")
    func mergedRecordOverLimit() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await database.save(makeRecord("Blob", "grow", ["a": .bytes(Data(count: 600_000))]))
            // The client's record alone is small enough; merged with the stored keys it is not.
            let partial = makeRecord("Blob", "grow", ["b": .bytes(Data(count: 600_000))])
            let run = await Self.modify(database, saving: [partial], atomic: true, policy: .changedKeys)
            #expect(errorCode(run.saves[partial.recordID]) == .limitExceeded,
                    "the stored record would hold 1.2 MB of field data; got \(String(describing: run.saves[partial.recordID]))")
            let stored = try await database.record(for: partial.recordID)
            #expect(stored.fieldDataSize <= Record.maximumFieldDataSize, "the store holds a record of \(stored.fieldDataSize) bytes")
        }
    }

    // MARK: - References

    @Test(".deleteSelf cascades through a 1,500-record chain, cycles and fan-outs in one transaction")
    func cascadeIsOneTransaction() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            let chainLength = 1_500
            var chain = [makeRecord("Node", "n-0")]
            for i in 1..<chainLength {
                chain.append(makeRecord("Node", "n-\(i)", ["up": .reference(reference("n-\(i - 1)", .deleteSelf))]))
            }
            // A fan-out below the middle and a cycle hanging off the end.
            chain += (0..<50).map { makeRecord("Node", "fan-\($0)", ["ups": .referenceList([reference("n-700", .deleteSelf), reference("keep", .none)])]) }
            chain.append(makeRecord("Node", "cycle-a", ["up": .reference(reference("n-\(chainLength - 1)", .deleteSelf)), "peer": .reference(reference("cycle-b", .deleteSelf))]))
            chain.append(makeRecord("Node", "cycle-b", ["peer": .reference(reference("cycle-a", .deleteSelf))]))
            chain.append(makeRecord("Node", "keep", ["weak": .reference(reference("n-0", .none))]))
            try await TestDatabase.save(chain, in: database)
            let total = chain.count

            // A reader polls while the root is deleted: it sees the whole graph or what is left
            // after the cascade, never a part of it.
            let compiled = try CompiledQuery(Query(recordType: "Node"), zoneID: .default, desiredKeys: [])
            let engine = fixture.engine
            let context = database.context
            let stop = Box(false)
            let seen = Box<Set<Int>>([])
            let pages = Box(0)
            let reader = Thread {
                while !stop.value {
                    if let page = try? engine.queryRecords(compiled, in: context, after: nil, limit: 5_000) {
                        seen.update { _ = $0.insert(page.records.count) }
                    }
                    pages.update { $0 += 1 }
                }
            }
            reader.start()
            // The reader is reading before the delete starts and until after it ends: the delete
            // waits for its first page, and it stops only once it has read a page begun after
            // the delete returned (the second one finished since).
            func waitForPages(_ count: Int) async throws {
                let deadline = ContinuousClock.now + .seconds(300)
                while pages.value < count && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
            }
            try await waitForPages(1)
            let results = try await database.modifyRecords(saving: [], deleting: [Record.ID(recordName: "n-0")])
            try await waitForPages(pages.value + 2)
            stop.value = true
            #expect(seen.value.contains(total) && seen.value.contains(1), "the reader read before and after the delete: \(seen.value.sorted())")
            #expect(errorCode(results.deleteResults[Record.ID(recordName: "n-0")]) == nil)

            let left = try await TestDatabase.queryAll(Query(recordType: "Node"), in: database)
            #expect(TestDatabase.names(left) == ["keep"], "only the record without a .deleteSelf path remains")
            while reader.isExecuting { try await Task.sleep(for: .milliseconds(10)) }
            let counts = seen.value
            #expect(counts.isSubset(of: [total, 1]), "a reader saw a partial cascade: record counts \(counts.sorted())")
        }
    }

    @Test("a parent must exist or be saved in the same request, else referenceViolation")
    func parentMustExist() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            func child(_ name: String, parent: String, zone: RecordZone.ID = .default) -> Record {
                let record = makeRecord("Page", name, zoneID: zone, ["n": .int64(1)])
                record.parent = Record.Reference(recordID: Record.ID(recordName: parent, zoneID: zone), action: .none)
                return record
            }
            // Missing parent.
            let orphan = child("orphan", parent: "no-such-book")
            let error = await caughtError { try await database.save(orphan) }
            #expect(stratusError(error)?.code == .referenceViolation)
            #expect(stratusError(error)?.message.contains("no-such-book") == true)
            #expect(try await TestDatabase.exists("orphan", in: database) == false)

            // Parent saved later in the same request (atomic and not).
            for atomic in [true, false] {
                let page = child("page-\(atomic)", parent: "book-\(atomic)")
                let book = makeRecord("Book", "book-\(atomic)")
                let run = await Self.modify(database, saving: [page, book], atomic: atomic)
                #expect(run.finalError == nil, "atomic \(atomic): \(String(describing: run.finalError))")
                #expect(try await database.record(for: page.recordID).parent?.recordID.recordName == "book-\(atomic)")
            }
            // Parent already stored.
            try await database.save(child("page-2", parent: "book-true"))
            // Parent in another zone: rejected before the store.
            let crossZone = makeRecord("Page", "cross")
            crossZone.parent = Record.Reference(recordID: Record.ID(recordName: "book-true", zoneID: RecordZone.ID(zoneName: "Other")), action: .none)
            #expect(stratusError(await caughtError { try await database.save(crossZone) })?.code == .invalidArguments)

            // An atomic request (in an atomic zone) whose only problem is a missing parent writes nothing.
            let zone = try await Self.atomicZone(in: database)
            let run = await Self.modify(database, saving: [makeRecord("Book", "fine", zoneID: zone), child("bad", parent: "missing", zone: zone)], atomic: true)
            #expect(errorCode(run.saves[Record.ID(recordName: "bad", zoneID: zone)]) == .referenceViolation)
            #expect(errorCode(run.saves[Record.ID(recordName: "fine", zoneID: zone)]) == .batchRequestFailed)
            #expect(try await TestDatabase.exists("fine", zoneID: zone, in: database) == false)
        }
    }

    @Test("a parent in the same request that fails itself does not count as existing")
    func parentThatFailsInTheSameRequest() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            let book = makeRecord("Book", "book")
            book.parent = reference("shelf-that-does-not-exist")      // fails: referenceViolation
            let page = makeRecord("Page", "page")
            page.parent = reference("book")
            let run = await Self.modify(database, saving: [book, page], atomic: false)
            #expect(errorCode(run.saves[book.recordID]) == .referenceViolation)
            #expect(try await TestDatabase.exists("book", in: database) == false)
            #expect(errorCode(run.saves[page.recordID]) == .referenceViolation,
                    "page's parent 'book' was not saved, so page must not be stored: \(String(describing: run.saves[page.recordID]))")
            if try await TestDatabase.exists("page", in: database) {
                Issue.record("the store holds 'page' whose parent 'book' does not exist")
            }
        }
    }

    @Test("a parent later in a request that the operation splits into several transactions still counts")
    func parentAcrossSplitBatches() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            var records = items(500, prefix: "filler")
            let page = makeRecord("Page", "page")
            page.parent = reference("book")
            records.insert(page, at: 0)
            records.append(makeRecord("Book", "book"))       // item 502: in the second transaction
            let run = await Self.modify(database, saving: records, atomic: false)
            #expect(run.finalError == nil, "the parent is saved by the same request: \(String(describing: run.finalError))")
            let pageSaved = try await TestDatabase.exists("page", in: database)
            let bookSaved = try await TestDatabase.exists("book", in: database)
            #expect(pageSaved && bookSaved)
        }
    }

    @Test("750 .deleteSelf references may point at one record; the 751st is limitExceeded")
    func deleteSelfReferenceLimit() async throws {
        try await SQLiteFixture.with { fixture in
            let database = fixture.database
            try await database.save(makeRecord("List", "list"))
            let referrers = makeRecords("Item", count: 750, prefix: "ref") { _ in ["list": .reference(reference("list", .deleteSelf))] }
            try await TestDatabase.save(referrers, in: database)
            // .none references are not counted.
            try await TestDatabase.save(makeRecords("Item", count: 20, prefix: "weak") { _ in ["list": .reference(reference("list", .none))] }, in: database)

            let extra = makeRecord("Item", "ref-extra", ["list": .reference(reference("list", .deleteSelf))])
            let error = await caughtError { try await database.save(extra) }
            #expect(stratusError(error)?.code == .limitExceeded)
            #expect(stratusError(error)?.message.contains("750") == true, "\(String(describing: error))")
            #expect(try await TestDatabase.exists("ref-extra", in: database) == false)
            // A list holding the reference several times is one referrer, and still the 751st.
            let listy = makeRecord("Item", "ref-listy", ["lists": .referenceList([reference("list", .deleteSelf), reference("list", .deleteSelf)])])
            #expect(stratusError(await caughtError { try await database.save(listy) })?.code == .limitExceeded)

            // Re-saving one of the 750 is fine; turning one into .none frees a place.
            let first = try await database.record(for: referrers[0].recordID)
            first["note"] = "re-saved"
            try await database.save(first)
            let second = try await database.record(for: referrers[1].recordID)
            second["list"] = reference("list", .none)
            try await database.save(second)
            try await database.save(extra)

            // In a request marked atomic in the default zone (not atomic, as CloudKit's) the
            // 751st fails alone.
            let more = [makeRecord("Item", "atomic-ok"), makeRecord("Item", "atomic-751", ["list": .reference(reference("list", .deleteSelf))])]
            let run = await Self.modify(database, saving: more, atomic: true)
            #expect(errorCode(run.saves[more[1].recordID]) == .limitExceeded)
            #expect(run.succeeded == [more[0].recordID])

            // Deleting the target removes all 750 referrers, and only them.
            try await database.deleteRecord(withID: Record.ID(recordName: "list"))
            let left = TestDatabase.names(try await TestDatabase.queryAll(Query(recordType: "Item"), in: database))
            #expect(left.count == 22, "20 weak referrers, the one turned into .none and atomic-ok remain")
            #expect(left.contains("ref-00001") && !left.contains("ref-00000") && !left.contains("ref-extra"))
        }
    }

    // MARK: - Retries

    @Test("a busy store is retried per the container's policy; the final error says how many attempts")
    func containerRetryPolicy() async throws {
        let (database, engine, store) = try Self.scripted(retryPolicy: RetryPolicy(maximumAttempts: 2, initialDelay: 0.001, maximumDelay: 0.01))
        defer { store.remove() }
        engine.script { $0.alwaysFailWrites = StratusError(.zoneBusy, "the store is busy (scripted)", retryAfterSeconds: 0.01) }
        let record = makeRecord("Item", "busy")
        let run = await Self.modify(database, saving: [record], atomic: true)
        let error = try #require(run.finalError)
        #expect(error.code == .zoneBusy)
        #expect(error.message.contains("after 2 attempts"), "\(error.message)")
        #expect(error.retryAfterSeconds != nil)
        #expect(engine.writeAttempts == 2)
        #expect(run.succeeded.isEmpty, "nothing is reported saved")

        // The operation's own policy wins over the container's.
        let own = await Self.modify(database, saving: [record], atomic: true, retryPolicy: RetryPolicy(maximumAttempts: 4, initialDelay: 0.001, maximumDelay: 0.01))
        #expect(own.finalError?.code == .zoneBusy)
        #expect(own.finalError?.message.contains("after 4 attempts") == true, "\(String(describing: own.finalError))")
        #expect(engine.writeAttempts == 2 + 4)

        // No retry at all.
        let once = await Self.modify(database, saving: [record], atomic: true, retryPolicy: RetryPolicy(maximumAttempts: 1))
        #expect(once.finalError?.message.contains("after 1 attempt") == true, "\(String(describing: once.finalError))")
        #expect(engine.writeAttempts == 2 + 4 + 1)

        // The convenience API surfaces the same error, and queries are retried the same way.
        let thrown = stratusError(await caughtError { try await database.save(record) })
        #expect(thrown?.code == .zoneBusy && thrown?.message.contains("after 2 attempts") == true, "\(String(describing: thrown))")
        engine.script { $0.alwaysFailQueries = StratusError(.zoneBusy, "busy (scripted)", retryAfterSeconds: 0.01) }
        let queryError = stratusError(await caughtError { try await database.records(matching: Query(recordType: "Item")) })
        #expect(queryError?.code == .zoneBusy && queryError?.message.contains("after 2 attempts") == true, "\(String(describing: queryError))")
        #expect(engine.queryAttempts == 2)
        engine.script { $0 = ScriptedEngine.Script() }
        #expect(try await TestDatabase.exists("busy", in: database) == false)
    }

    @Test("the default policy makes 5 attempts; transient failures then success write once; other errors are not retried")
    func retryOutcomes() async throws {
        let (database, engine, store) = try Self.scripted()
        defer { store.remove() }
        let busy = StratusError(.zoneBusy, "busy (scripted)", retryAfterSeconds: 0.001)
        engine.script { $0.alwaysFailWrites = busy }
        let fast = RetryPolicy(maximumAttempts: 5, initialDelay: 0.001, maximumDelay: 0.005)
        #expect(RetryPolicy().maximumAttempts == 5)
        let defaults = await Self.modify(database, saving: [makeRecord("Item", "x")], atomic: true)
        #expect(defaults.finalError?.message.contains("after 5 attempts") == true, "\(String(describing: defaults.finalError))")
        #expect(engine.writeAttempts == 5)

        engine.script { $0 = ScriptedEngine.Script(writeFailures: [busy, StratusError(.serviceUnavailable, "down (scripted)")]) }
        let recovered = await Self.modify(database, saving: [makeRecord("Item", "recovered", ["n": .int64(1)])], atomic: true, retryPolicy: fast)
        #expect(recovered.finalError == nil)
        #expect(engine.writeAttempts == 5 + 3)
        #expect(try await database.record(for: Record.ID(recordName: "recovered")).fieldValue(forKey: "n") == .int64(1))

        engine.script { $0 = ScriptedEngine.Script(writeFailures: [StratusError(.internalError, "disk on fire (scripted)")]) }
        let broken = await Self.modify(database, saving: [makeRecord("Item", "broken")], atomic: true, retryPolicy: fast)
        #expect(broken.finalError?.code == .internalError)
        #expect(broken.finalError?.message.contains("attempt") == false)
        #expect(engine.writeAttempts == 5 + 3 + 1)
        #expect(try await TestDatabase.exists("broken", in: database) == false)
    }

    @Test("retryAfter is honoured, and backoff grows exponentially with jitter up to the maximum")
    func retryDelays() async throws {
        let (database, engine, store) = try Self.scripted()
        defer { store.remove() }
        engine.script { $0.writeFailures = [StratusError(.zoneBusy, "busy (scripted)", retryAfterSeconds: 0.4)] }
        let start = ContinuousClock.now
        let run = await Self.modify(database, saving: [makeRecord("Item", "later")], atomic: true,
                                    retryPolicy: RetryPolicy(maximumAttempts: 3, initialDelay: 0.001, maximumDelay: 0.002))
        #expect(run.finalError == nil)
        #expect(ContinuousClock.now - start >= .milliseconds(400), "the retry waited less than retryAfter")

        let policy = RetryPolicy(maximumAttempts: 10, initialDelay: 0.1, maximumDelay: 1)
        for attempt in 2...8 {
            let nominal = min(1, 0.1 * pow(2, Double(attempt - 2)))
            let delays = (0..<200).map { _ in policy.delay(beforeAttempt: attempt, retryAfter: nil) }
            #expect(delays.allSatisfy { $0 >= nominal * 0.5 - 1e-9 && $0 <= nominal + 1e-9 }, "attempt \(attempt): \(delays.min()!)…\(delays.max()!) vs \(nominal)")
            #expect(Set(delays).count > 1, "attempt \(attempt): delays are jittered")
        }
        #expect(policy.delay(beforeAttempt: 2, retryAfter: 3) >= 3)
    }
}
