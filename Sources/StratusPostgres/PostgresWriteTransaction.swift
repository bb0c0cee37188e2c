import Foundation
@_spi(StratusEngine) import Stratus
import StratusSQL

extension PostgresEngine {
    @_spi(StratusEngine)
    public func writeRecords<T>(in database: DatabaseContext, _ body: (any RecordWriteTransaction) throws -> T) throws -> T {
        var copies = !copyRefused.withLock { $0 }
        while true {
            var failedCopy: (zones: Set<Int64>, error: StratusError?)?
            var inserted: [Int64: Int] = [:]
            do {
                // Schema changes (which rebuild a type's words and indexes from the rows
                // committed, and check the values records hold) and environment resets wait for
                // the record writes in flight, and those after them wait for the change: a write
                // never goes by the schema it read before the change.
                let result = try writeTransaction(writingRecordsOf: database.storageContainer) { connection -> T in
                    let transaction = PostgresWriteTransaction(engine: self, connection: connection, context: database, now: Date(), copiesNewRecords: copies)
                    do {
                        let result = try body(transaction)
                        try transaction.writeDeferredDeletes()
                        try transaction.writeDeferredUpdates()
                        try transaction.finishCopy()
                        try transaction.storeChangeSequences()
                        inserted = transaction.insertedCounts
                        return result
                    } catch {
                        if transaction.copyFailed { failedCopy = (transaction.copiedZones, connection.openCopyFailure) }
                        throw error
                    }
                }
                compactIfDue()
                analyzeIfGrown(inserted)
                return result
            } catch {
                guard copies, let failedCopy else { throw error }
                // Run again with checked inserts, which say which rows were new.
                copies = false
                noteCopyFailure(failedCopy.error, zones: failedCopy.zones)
            }
        }
    }
}

/// Stores rows inside one transaction, numbering each change in its zone's sequence. The
/// first use of a zone takes its row lock, so that writers of one zone commit their changes in
/// the order of their numbers (on any number of machines); writers of other zones go on.
final class PostgresWriteTransaction: RecordWriteTransaction {
    let engine: PostgresEngine
    let connection: PostgresConnection
    let context: DatabaseContext
    let now: Date
    private var zones: [RecordZone.ID: Int] = [:]
    private var states: [ZoneState] = []
    private var searchable: [String: [String]] = [:]
    /// Record type schemas as this transaction read them (`nil`: the type has none).
    private var typeSchemas = TransactionSchemaCache()
    /// Stored records read ahead (``prefetchStoredRecords(_:)``), each until it is read or this
    /// transaction writes it; `.some(nil)`: no such record. Keyed by the zone's row, which the
    /// two spellings of a zone's owner (`__defaultOwner__`, the user's record name) share.
    private var prefetched: [PrefetchKey: Record?] = [:]
    private struct PrefetchKey: Hashable {
        let zoneRow: Int64
        let recordName: String
    }
    /// Records this transaction wrote whose row holds nothing beside itself (no `.deleteSelf`
    /// references, assets, words or JSON extras), as the store holds them: a record named
    /// again in the transaction (an import whose input repeats names) is read from here, and
    /// its next versions replace the rows in one statement for them all
    /// (``writeDeferredUpdates()``), where each would cost round trips. Used only where this
    /// role's reads and writes of rows are the rows themselves (``rowsAreRoleOwn()``).
    private var written: [PrefetchKey: WrittenRow] = [:]
    private struct WrittenRow {
        var row: RecordRow
        /// The row's change position.
        var sequence: Int64
        /// Whether the store's row is still an earlier version, this one to be written by
        /// ``writeDeferredUpdates()``.
        var deferred: Bool
    }
    /// Rows ``insertNewRecords(_:)`` inserted and ``written`` does not hold yet, as they came:
    /// an import of distinct names, which never reads a record it wrote, keys none of them.
    private var insertedRuns: [(zoneRow: Int64, firstSequence: Int64, rows: [RecordRow], inserted: [Bool])] = []
    /// New records this transaction inserted, by zone row (for ``PostgresEngine/analyzeIfGrown(_:)``).
    private(set) var insertedCounts: [Int64: Int] = [:]
    /// Deletions of records read ahead that ``deleteRecord(_:)`` answered and
    /// ``writeDeferredDeletes()`` writes together: each with the type its tombstone takes and
    /// its change position.
    private var deferredDeletes: [(id: Record.ID, zoneRow: Int64, recordName: String, recordType: String, sequence: Int64)] = []
    /// What a tombstone written over an earlier one of the name (deleted, made again, deleted
    /// again) takes from the new one: its type, position, time and roots.
    static let tombstoneConflict = """
        ON CONFLICT (zone_id, record_name) DO UPDATE SET record_type = excluded.record_type, change_seq = excluded.change_seq,
            deleted_at = excluded.deleted_at, left_roots = excluded.left_roots
        """
    /// The most deletions deferred before they are written.
    static let maximumDeferredDeletes = 1_000
    /// The most row versions deferred before they are written.
    static let maximumDeferredUpdates = 1_000
    /// The keys of ``written`` whose update is deferred, in the order first deferred (a key
    /// may stay here after a write of all its columns: ``WrittenRow/deferred`` says).
    private var deferredKeys: [PrefetchKey] = []
    /// The words of rows this transaction replaced, written together by ``writePendingWords()``:
    /// a statement each would cost a role that row-level security binds the planning of its
    /// policies. `clearing`: the old version's words (and a tombstone it left) go there too,
    /// else they went with the statement that took its other derived rows. A row's later
    /// version, or its deletion, replaces or drops its entry.
    private var pendingWords: [PrefetchKey: (zone: Int, fields: [String: FieldValue], searchable: [String], clearing: Bool)] = [:]
    /// The keys of ``pendingWords`` in the order first queued (a key may stay after its entry went).
    private var pendingWordKeys: [PrefetchKey] = []
    /// Whether the connection's role owns the records table without forced row-level
    /// security: its reads see every row and no policy or trigger refuses its writes, so a
    /// row it wrote is what it wrote. Asked once, when first needed (``rowsAreRoleOwn()``).
    private var roleOwnsRows: Bool?
    /// Asset content that rows named before this transaction and no longer name.
    private(set) var releasedAssetContents: Set<String> = []
    /// Whether new rows go in with `COPY` (``copyNewRecords(_:zone:)``), and the zones they went to.
    let copiesNewRecords: Bool
    private(set) var copiedZones: Set<Int64> = []

    private struct ZoneState {
        let id: RecordZone.ID
        let row: Int64
        var sequence: Int64
        let capabilities: RecordZone.Capabilities
        var changed = false
        var hasTombstones: Bool?
        /// Whether rows of the zone have `.deleteSelf` references or name asset content (rows
        /// of `refs` or `asset_refs`), asked once (``updateStoredRecord(_:)``).
        var hasDerivedReferences: Bool?
        /// Whether rows of the zone have words in `record_tokens`, asked once.
        var hasWords: Bool?
    }

    init(engine: PostgresEngine, connection: PostgresConnection, context: DatabaseContext, now: Date, copiesNewRecords: Bool = false) {
        self.engine = engine
        self.connection = connection
        self.context = context
        self.now = now
        self.copiesNewRecords = copiesNewRecords
        connection.openCopyFailure = nil
    }

    // MARK: - Zones

    func zoneCapabilities(_ zoneID: RecordZone.ID) throws -> RecordZone.Capabilities? {
        try zoneIndex(zoneID).map { states[$0].capabilities }
    }

    private func zoneIndex(_ zoneID: RecordZone.ID) throws -> Int? {
        if let known = zones[zoneID] { return known }
        guard let zone = try engine.lockedZone(zoneID, context, on: connection) else {
            // Row-level security hides from a lock the rows a role may read but not change: an
            // accepted participant's role reads the owner's zone, whose change history only
            // the owner's rows write.
            if try !rowsAreRoleOwn(), try engine.zoneHistory(zoneID, context, on: connection) != nil {
                throw StratusError(.permissionFailure, """
                    role \(engine.loginRole) reads zone '\(zoneID.zoneName)' but may not write it: writes through Stratus in another user's zone \
                    (which keep its owner's change history) run on a connection as the tables' owner, acting for the participant (userName:)
                    """)
            }
            return nil
        }
        // Another spelling of a zone already written (its owner's record name for
        // `__defaultOwner__`): one zone, one count of changes.
        if let same = states.firstIndex(where: { $0.row == zone.row }) {
            zones[zoneID] = same
            return same
        }
        // Stratus counts a zone's changes from 0 and a transaction adds far fewer than 2^40:
        // a count beyond this was written outside Stratus, and counting on would overflow.
        guard zone.sequence >= 0, zone.sequence <= Int64.max - (1 << 40) else {
            throw StratusError(.internalError, """
                zone '\(zoneID.zoneName)' has counted \(zone.sequence) changes (zones.change_seq), which no write through Stratus reaches: \
                the row was changed in SQL, and the zone takes no more writes until the store's owner sets it back
                """)
        }
        states.append(ZoneState(id: zoneID, row: zone.row, sequence: zone.sequence, capabilities: zone.capabilities))
        zones[zoneID] = states.count - 1
        return states.count - 1
    }

    private func existingZone(_ zoneID: RecordZone.ID) throws -> Int {
        guard let index = try zoneIndex(zoneID) else {
            throw StratusError.zoneNotFound(zoneID, in: context)
        }
        return index
    }

    private func nextSequence(_ zone: Int, count: Int64 = 1) -> Int64 {
        states[zone].sequence += count
        states[zone].changed = true
        return states[zone].sequence
    }

    /// Whether rows of the zone have `.deleteSelf` references or name asset content: read once
    /// per transaction (the zone's lock keeps other writers from adding any), then kept by
    /// this transaction's writes.
    private func hasDerivedReferences(_ zone: Int) throws -> Bool {
        if let known = states[zone].hasDerivedReferences { return known }
        let found = try !connection.query("""
            SELECT 1 FROM refs WHERE zone_id = $1 UNION ALL SELECT 1 FROM asset_refs WHERE zone_id = $1 LIMIT 1
            """, [.int64(states[zone].row)]).isEmpty
        states[zone].hasDerivedReferences = found
        return found
    }

    private func hasWords(_ zone: Int) throws -> Bool {
        if let known = states[zone].hasWords { return known }
        let found = try !connection.query("SELECT 1 FROM record_tokens WHERE zone_id = $1 LIMIT 1", [.int64(states[zone].row)]).isEmpty
        states[zone].hasWords = found
        return found
    }

    private func hasTombstones(_ zone: Int) throws -> Bool {
        if let known = states[zone].hasTombstones { return known }
        let found = try !connection.query("SELECT 1 FROM tombstones WHERE zone_id = $1 LIMIT 1", [.int64(states[zone].row)]).isEmpty
        states[zone].hasTombstones = found
        return found
    }

    /// Writes back each touched zone's change sequence, and notes each changed zone as a
    /// change of its database (last: the database's history row stays locked until commit).
    func storeChangeSequences() throws {
        for zone in states where zone.changed {
            try engine.noteDatabaseChange(zoneRow: zone.row, zoneSequence: zone.sequence, context, on: connection)
        }
    }

    // MARK: - Reading inside the transaction

    func storedRecord(_ id: Record.ID) throws -> Record? {
        guard let zone = try zoneIndex(id.zoneID) else { return nil }
        if try hasWritten(), let mine = written[PrefetchKey(zoneRow: states[zone].row, recordName: id.recordName)], try rowsAreRoleOwn() {
            return try Self.record(mine.row, as: id, engine: engine)
        }
        // A record read ahead under the other spelling of its zone is read again, to carry this
        // one. What was read ahead stays until the record is written: a deletion checks it too.
        if !prefetched.isEmpty, let read = prefetched[PrefetchKey(zoneRow: states[zone].row, recordName: id.recordName)],
           read.map({ $0.recordID.zoneID == id.zoneID }) ?? true {
            return read
        }
        try writeDeferredDeletes()
        guard let row = try connection.query("SELECT \(PostgresSchema.recordColumns) FROM records r WHERE r.zone_id = $1 AND r.record_name = $2",
                                             [.int64(states[zone].row), .text(id.recordName)]).first else { return nil }
        return try engine.decodeRecord(row, zoneID: id.zoneID)
    }

    /// One read per zone for a batch of updates, instead of a round trip per record. Zones are
    /// locked in the order the request names them, as its saves would lock them.
    func prefetchStoredRecords(_ ids: [Record.ID]) throws {
        try writeDeferredDeletes()
        var zoneOrder: [RecordZone.ID] = []
        var names: [RecordZone.ID: Set<String>] = [:]
        for id in ids {
            if names[id.zoneID] == nil { zoneOrder.append(id.zoneID) }
            names[id.zoneID, default: []].insert(id.recordName)
        }
        for zoneID in zoneOrder {
            guard let zone = try zoneIndex(zoneID), let inZone = names[zoneID] else { continue }
            let zoneRow = states[zone].row
            var found: [String: Record] = [:]
            for row in try connection.query("SELECT \(PostgresSchema.recordColumns) FROM records r WHERE r.zone_id = $1 AND r.record_name = ANY($2::text[])",
                                            [.int64(zoneRow), .textArray(Array(inZone))]) {
                let record = try engine.decodeRecord(row, zoneID: zoneID)
                found[record.recordID.recordName] = record
            }
            for name in inZone { prefetched[PrefetchKey(zoneRow: zoneRow, recordName: name)] = .some(found[name]) }
        }
    }

    /// What this transaction writes of a record is no longer what was read ahead of it.
    private func forgetPrefetched(zoneRow: Int64, recordName: String) {
        if !prefetched.isEmpty { prefetched[PrefetchKey(zoneRow: zoneRow, recordName: recordName)] = nil }
    }

    func recordExists(_ id: Record.ID) throws -> Bool {
        guard let zone = try zoneIndex(id.zoneID) else { return false }
        if try hasWritten(), written[PrefetchKey(zoneRow: states[zone].row, recordName: id.recordName)] != nil, try rowsAreRoleOwn() { return true }
        try writeDeferredDeletes()
        return try !connection.query("SELECT 1 FROM records WHERE zone_id = $1 AND record_name = $2", [.int64(states[zone].row), .text(id.recordName)]).isEmpty
    }

    func deleteSelfSources(of id: Record.ID) throws -> [String] {
        guard let zone = try zoneIndex(id.zoneID), try hasDerivedReferences(zone) else { return [] }
        try writeDeferredDeletes()
        return try connection.query("SELECT source_name FROM refs WHERE zone_id = $1 AND target_name = $2", [.int64(states[zone].row), .text(id.recordName)])
            .map { try $0.text(0) ?? "" }
    }

    func deleteSelfReferenceCount(to target: Record.ID, excludingSource source: String) throws -> Int {
        guard let zone = try zoneIndex(target.zoneID) else { return 0 }
        try writeDeferredDeletes()
        return Int(try connection.query("SELECT count(*) FROM refs WHERE zone_id = $1 AND target_name = $2 AND source_name <> $3",
                                        [.int64(states[zone].row), .text(target.recordName), .text(source)]).first?.int64(0) ?? 0)
    }

    // MARK: - Record type schemas

    func recordTypeSchema(_ recordType: String) throws -> RecordTypeSchema? {
        try typeSchemas.schema(recordType) { try engine.loadSchema($0, storageContainer: context.storageContainer, on: connection) }
    }

    func containerSchema() throws -> ContainerSchema {
        try engine.loadContainerSchema(context.storageContainer, on: connection)
    }

    /// Writes a type development grew, optimistically: under the schema lock, the stored type
    /// must still be the one this transaction read, or another writer grew it meanwhile and
    /// this transaction is retried (`zoneBusy`), to check its records against that.
    func saveRecordTypeSchema(_ schema: RecordTypeSchema) throws {
        let read = try recordTypeSchema(schema.recordType)
        guard read != schema else { return }
        // Indexes built below read the rows: they hold every version written.
        _ = try hasWritten()
        try writeDeferredDeletes()
        try writeDeferredUpdates()
        // Not the schema lock, which this transaction holds shared: two writers growing types
        // would each wait for the other's share.
        try connection.execute("SELECT pg_advisory_xact_lock(\(PostgresEngine.schemaGrowthLock))")
        let stored = try engine.loadSchema(schema.recordType, storageContainer: context.storageContainer, on: connection)
        guard stored == read else {
            throw StratusError(.zoneBusy, "record type \(schema.recordType) changed while this write ran (another writer added fields); retrying against it", retryAfterSeconds: 0.01)
        }
        try engine.storeRecordType(schema, replacing: read, storageContainer: context.storageContainer, on: connection)
        if Set(PostgresDialect(table: "").indexKeys(for: schema)) != Set(read.map { PostgresDialect(table: "").indexKeys(for: $0) } ?? []) {
            try PostgresEngine.synchronizeIndexes(on: connection)
        }
        typeSchemas.remember(schema)
        searchable[schema.recordType] = nil
    }

    func saveJobProgress(_ job: String, position: Int64, text: String?) throws {
        try connection.execute("""
            INSERT INTO job_progress(job, position, position_text, updated_at) VALUES ($1, $2, $3, $4)
            ON CONFLICT (job) DO UPDATE SET position = excluded.position, position_text = excluded.position_text, updated_at = excluded.updated_at
            """, [.text(job), .int64(position), text.map { .text($0) } ?? .null, .double(now.timeIntervalSinceReferenceDate)])
    }

    // MARK: - Writing rows

    /// The records columns, in the order the writes bind them.
    private static let columns = "zone_id, record_name, owner, record_type, created_at, created_by, modified_at, modified_by, change_tag, change_seq, fields, exact_fields, parent_name"

    func insertNewRecords(_ rows: [RecordRow]) throws -> [Bool] {
        guard let first = rows.first else { return [] }
        try writeDeferredDeletes()
        let zone = try existingZone(first.recordID.zoneID)
        for row in rows { forgetPrefetched(zoneRow: states[zone].row, recordName: row.recordID.recordName) }
        let base = states[zone].sequence
        let inserted = try copyNewRecords(rows, zone: zone) ?? insertNewRecordsChecked(rows, zone: zone)
        if inserted.contains(true), try hasTombstones(zone) {
            let insertedNames = rows.indices.filter { inserted[$0] }.map { rows[$0].recordID.recordName }
            try connection.execute("DELETE FROM tombstones WHERE zone_id = $1 AND record_name = ANY($2)", [.int64(states[zone].row), .textArray(insertedNames)])
        }
        var wordlessType: String?
        var worded: [(name: String, fields: [String: FieldValue], searchable: [String])] = []
        for index in rows.indices where inserted[index] {
            // Rows of types without searchable fields have no words to index (rows mostly
            // repeat the type of the row before).
            let type = rows[index].recordType
            if type == wordlessType { continue }
            let searchable = try searchableFields(type)
            guard !searchable.isEmpty else {
                wordlessType = type
                continue
            }
            worded.append((rows[index].recordID.recordName, rows[index].fields, searchable))
        }
        if !worded.isEmpty {
            // A later replacement of these rows must clear their words: the zone has words now.
            states[zone].hasWords = true
            try engine.replaceTokens(zoneRow: states[zone].row, owner: context.storageOwner, records: worded, on: connection)
        }
        if inserted.contains(true) { insertedRuns.append((states[zone].row, base + 1, rows, inserted)) }
        insertedCounts[states[zone].row, default: 0] += inserted.count(where: \.self)
        return inserted
    }

    /// Inserts the rows with one `INSERT … ON CONFLICT DO NOTHING`, which answers which were new.
    private func insertNewRecordsChecked(_ rows: [RecordRow], zone: Int) throws -> [Bool] {
        let first = rows[0]
        let zoneRow = states[zone].row
        let base = states[zone].sequence
        var columns = RowColumns()
        for (offset, row) in rows.enumerated() {
            precondition(row.recordID.zoneID.isSameZone(as: first.recordID.zoneID) && row.parent == nil, "insertNewRecords takes rows of one zone without parents")
            columns.append(row, sequence: base + Int64(offset) + 1)
        }
        let result = try connection.query("""
            INSERT INTO records(\(Self.columns))
            SELECT $1, n, $2, t, ca, cb, ma, mb, tag, seq, doc::jsonb, ex, NULL
            FROM unnest($3::text[], $4::text[], $5::float8[], $6::text[], $7::float8[], $8::text[], $9::text[], $10::int8[], $11::text[], $12::text[])
                AS u(n, t, ca, cb, ma, mb, tag, seq, doc, ex)
            ON CONFLICT (zone_id, record_name) DO NOTHING
            RETURNING change_seq
            """, [.int64(zoneRow), .text(context.storageOwner)] + columns.parameters)
        let insertedSequences = Set(try result.map { try $0.int64(0) ?? 0 })
        // Every row's change number is taken, also those of rows that were not inserted.
        if !insertedSequences.isEmpty { _ = nextSequence(zone, count: Int64(rows.count)) }
        return (0..<rows.count).map { insertedSequences.contains(base + Int64($0) + 1) }
    }

    /// Streams rows all believed new into `records` with binary `COPY`, which writes rows in
    /// bulk and skips the index probe and speculative insertion of `ON CONFLICT` (a bulk
    /// import's common case). The COPY stays open for the transaction's next rows and ends
    /// before its next statement, so that the server stores these rows while the caller
    /// prepares more. No other writer can insert into the zone meanwhile: this transaction
    /// holds its row lock.
    ///
    /// When a row's name turns out to be stored already (or repeats another's), or the server
    /// refuses the COPY (row-level security refuses `COPY FROM` to the roles it binds), the
    /// transaction has failed: ``PostgresEngine/writeRecords(in:_:)`` runs it again with
    /// checked inserts (``copyFailed``).
    ///
    /// Answers every row inserted, or `nil` when the caller is to insert them checked.
    private func copyNewRecords(_ rows: [RecordRow], zone: Int) throws -> [Bool]? {
        guard copiesNewRecords, engine.mayCopy(intoZone: states[zone].row) else { return nil }
        let zoneRow = states[zone].row
        let base = states[zone].sequence
        // What the rows' writes read afterwards is read (once) before the COPY: a statement
        // ends an open COPY.
        _ = try hasTombstones(zone)
        var lastType: String?
        for index in rows.indices where rows[index].recordType != lastType {
            lastType = rows[index].recordType
            _ = try searchableFields(rows[index].recordType)
        }
        copiedZones.insert(zoneRow)
        let starts = !connection.isCopying
        if starts { try connection.beginCopy("COPY records(\(Self.columns)) FROM STDIN (FORMAT binary)") }
        var copy = PostgresBinaryCopy(header: starts, reservingCapacity: rows.count * 512)
        for index in rows.indices {
            precondition(rows[index].recordID.zoneID.isSameZone(as: rows[0].recordID.zoneID) && rows[index].parent == nil, "insertNewRecords takes rows of one zone without parents")
            Self.append(rows[index], zoneRow: zoneRow, owner: context.storageOwner, sequence: base + Int64(index) + 1, to: &copy)
        }
        try connection.sendCopyData(copy.bytes)
        _ = nextSequence(zone, count: Int64(rows.count))
        return Array(repeating: true, count: rows.count)
    }

    /// A row of `records` in binary COPY form (the columns of ``columns``).
    private static func append(_ row: borrowing RecordRow, zoneRow: Int64, owner: String, sequence: Int64, to copy: inout PostgresBinaryCopy) {
        copy.beginRow(fields: 13)
        copy.int64(zoneRow)
        copy.text(row.recordID.recordName)
        copy.text(owner)
        copy.text(row.recordType)
        copy.double(row.systemFields.creationDate!.timeIntervalSinceReferenceDate)
        copy.text(row.systemFields.creatorUserRecordID!.recordName)
        copy.double(row.systemFields.modificationDate!.timeIntervalSinceReferenceDate)
        copy.text(row.systemFields.lastModifiedUserRecordID!.recordName)
        copy.text(row.systemFields.recordChangeTag!)
        copy.int64(sequence)
        if !mayNeedExactDocument(row.document) {
            copy.jsonb(utf8: row.document)
            copy.null()
        } else {
            let (document, exactDocument) = documents(of: copy row)
            copy.jsonb(utf8: document.utf8)
            if let exactDocument { copy.text(exactDocument) } else { copy.null() }
        }
        copy.null()
    }

    /// Ends the COPY of new rows, if one is open.
    ///
    /// - Throws: the COPY's error, also when an earlier statement ended it and the caller
    ///   went on.
    func finishCopy() throws {
        if connection.isCopying { try connection.endCopy() }
        if let failure = connection.openCopyFailure { throw failure }
    }

    /// Whether a COPY of this transaction failed in a way that checked inserts do not (a
    /// stored name, a refusal, a value the server does not take as COPY sends it): the
    /// transaction is then run again without COPY. Failures of the connection, cancellations
    /// and lock conflicts are not: they are reported as they are.
    var copyFailed: Bool {
        guard connection.isOpen, let state = connection.openCopyFailure?.sqlState else { return false }
        return ["22", "23", "0A", "42"].contains(String(state.prefix(2)))
    }

    func writeRecord(_ row: RecordRow, replacing: Bool) throws {
        try writeDeferredDeletes()
        let zone = try existingZone(row.recordID.zoneID)
        let zoneRow = states[zone].row
        forgetPrefetched(zoneRow: zoneRow, recordName: row.recordID.recordName)
        let key = PrefetchKey(zoneRow: zoneRow, recordName: row.recordID.recordName)
        if try hasWritten(), replacing, let previous = written[key] {
            // The row holds a version this transaction wrote, with nothing beside it: a next
            // version with nothing beside it either only replaces the row's columns.
            if try isPlain(row), try rowsAreRoleOwn() {
                written[key] = WrittenRow(row: row, sequence: nextSequence(zone), deferred: true)
                if !previous.deferred { deferredKeys.append(key) }
                return
            }
            // The write below replaces every column: a deferred version is not written.
            written[key] = nil
        }
        // A stored row replaced by one with nothing beside it, in a zone where no row has
        // anything beside it (no .deleteSelf references, asset references or words): only its
        // columns change, written with others in one statement (a re-run import's common case).
        if replacing, try isPlain(row), try rowsAreRoleOwn(), try !hasDerivedReferences(zone), try !hasWords(zone) {
            written[key] = WrittenRow(row: row, sequence: nextSequence(zone), deferred: true)
            deferredKeys.append(key)
            if deferredKeys.count >= Self.maximumDeferredUpdates { try writeDeferredUpdates() }
            return
        }
        let system = row.systemFields
        let (document, exactDocument) = Self.documents(of: row)
        let parent = row.parent.map { PostgresValue.text($0.recordID.recordName) } ?? .null
        // What the replaced row named before: the asset contents it no longer names are
        // candidates for collection.
        var previousAssets: Set<String> = []
        // Whether the old version's words and tombstone go with the words written together
        // (``writePendingWords()``) rather than in a statement of this row's own.
        var clearsWithWords = false
        if replacing {
            // An update, not an upsert: row-level security checks an upsert's proposed row as an
            // insert, creator included, also when it replaces a stored row. The caller read the
            // row under the zone's lock, so it is there; a row the update does not reach is one
            // row-level security keeps from this role.
            let changed = try connection.execute("""
                UPDATE records SET record_type = $3, modified_at = $4, modified_by = $5, change_tag = $6, change_seq = $7,
                    fields = $8::jsonb, exact_fields = $9, parent_name = $10, created_at = $11, created_by = $12
                WHERE zone_id = $1 AND record_name = $2
                """, [.int64(zoneRow), .text(row.recordID.recordName), .text(row.recordType),
                      .double(system.modificationDate!.timeIntervalSinceReferenceDate), .text(system.lastModifiedUserRecordID!.recordName),
                      .text(system.recordChangeTag!), .int64(nextSequence(zone)), .text(document), exactDocument.map(PostgresValue.text) ?? .null, parent,
                      .double(system.creationDate!.timeIntervalSinceReferenceDate), .text(system.creatorUserRecordID!.recordName)])
            if changed == 0 { throw rowSecurityRefusal("change", row.recordID) }
            // In a zone without references or asset references, the old version had only words
            // and perhaps a tombstone beside it: they go with the words written together.
            clearsWithWords = try row.deleteSelfTargets.isEmpty && row.assetContentIdentifiers.isEmpty && !hasDerivedReferences(zone)
            if !clearsWithWords {
                // The rows derived from the old version (references, words, a tombstone, asset
                // references) go in one statement, not four. A statement of its own after the
                // UPDATE: row-level security lets a role delete a public record's derived rows once
                // the record is its own write, which a statement that also updated the row would not
                // see (all of a statement's parts read the snapshot taken before it).
                let gone = try connection.query("""
                    WITH old_refs AS (
                        DELETE FROM refs WHERE zone_id = $1 AND source_name = $2
                    ), old_words AS (
                        DELETE FROM record_tokens WHERE zone_id = $1 AND record_name = $2
                    ), old_tombstone AS (
                        DELETE FROM tombstones WHERE zone_id = $1 AND record_name = $2
                    )
                    DELETE FROM asset_refs WHERE zone_id = $1 AND record_name = $2 RETURNING content_id
                    """, [.int64(zoneRow), .text(row.recordID.recordName)])
                for named in gone { if let content = try named.text(0) { previousAssets.insert(content) } }
            }
        } else {
            try connection.execute("""
                INSERT INTO records(\(Self.columns)) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::jsonb, $12, $13)
                ON CONFLICT (zone_id, record_name) DO UPDATE SET
                    record_type = excluded.record_type, modified_at = excluded.modified_at, modified_by = excluded.modified_by,
                    created_at = excluded.created_at, created_by = excluded.created_by,
                    change_tag = excluded.change_tag, change_seq = excluded.change_seq, fields = excluded.fields,
                    exact_fields = excluded.exact_fields, parent_name = excluded.parent_name
                """, [.int64(zoneRow), .text(row.recordID.recordName), .text(context.storageOwner), .text(row.recordType),
                      .double(system.creationDate!.timeIntervalSinceReferenceDate), .text(system.creatorUserRecordID!.recordName),
                      .double(system.modificationDate!.timeIntervalSinceReferenceDate), .text(system.lastModifiedUserRecordID!.recordName),
                      .text(system.recordChangeTag!), .int64(nextSequence(zone)), .text(document),
                      exactDocument.map(PostgresValue.text) ?? .null, parent])
        }
        if !row.deleteSelfTargets.isEmpty || !row.assetContentIdentifiers.isEmpty { states[zone].hasDerivedReferences = true }
        if !row.deleteSelfTargets.isEmpty {
            try connection.execute("""
                INSERT INTO refs(zone_id, target_name, source_name, owner) SELECT $1, t, $2, $3 FROM unnest($4::text[]) AS t ON CONFLICT DO NOTHING
                """, [.int64(zoneRow), .text(row.recordID.recordName), .text(context.storageOwner), .textArray(Array(row.deleteSelfTargets))])
        }
        if !replacing { insertedCounts[zoneRow, default: 0] += 1 }
        if replacing {
            // Its old words are gone already; the new ones go with those of other replaced rows.
            try deferWords(of: row, zone: zone, key: key, clearing: clearsWithWords)
        } else {
            try replaceWords(of: row, zone: zone, isNew: true)
        }
        releasedAssetContents.formUnion(previousAssets.subtracting(row.assetContentIdentifiers))
        try addAssetReferences(of: row, zoneRow: zoneRow)
        if try !replacing && hasTombstones(zone) {
            try connection.execute("DELETE FROM tombstones WHERE zone_id = $1 AND record_name = $2", [.int64(zoneRow), .text(row.recordID.recordName)])
        }
        try remember(row, zoneRow: zoneRow, sequence: states[zone].sequence)
    }

    /// Writes the changed fields over the stored row in one statement that checks the row is
    /// the one the update expects, without reading it first. Declines (false, nothing written)
    /// where the row's derived data would need its stored values (a zone with `.deleteSelf`
    /// references or asset references, a type with searchable fields), where documents need
    /// their exact text beside the `jsonb` copy (U+0000, -0.0, large whole doubles: the changes
    /// are judged by their bytes, the stored row by its `exact_fields`), for a record a policy
    /// keeps this role from writing (``rowsAreRoleOwn()``: the general way says why), and for a
    /// record this transaction already wrote: the general way reads and writes those.
    func updateStoredRecord(_ update: StoredRecordUpdate) throws -> Bool {
        try updateStoredRecords([update])[0]
    }

    /// ``updateStoredRecord(_:)`` for many records in one statement: the checks made for each
    /// update before anything is sent, and the conditions on each stored row in SQL. The rows
    /// written take the zone's next change positions in the order of the updates.
    func updateStoredRecords(_ updates: [StoredRecordUpdate]) throws -> [Bool] {
        guard let first = updates.first else { return [] }
        try writeDeferredDeletes()
        let zone = try existingZone(first.recordID.zoneID)
        let zoneRow = states[zone].row
        // Updates of several zones, or of one record twice, go one after another, as the
        // protocol's answers are those of one call per update.
        var names: Set<String> = []
        guard try updates.allSatisfy({ try zoneIndex($0.recordID.zoneID) == zone && names.insert($0.recordID.recordName).inserted }) else {
            return try updates.map { try updateStoredRecords([$0])[0] }
        }
        var answers = [Bool](repeating: false, count: updates.count)
        let underPolicies = try !rowsAreRoleOwn()
        if try hasDerivedReferences(zone) { return answers }
        let checksWritten = try hasWritten()
        var sent: [Int] = [], sentNames: [String?] = [], documents: [String?] = [], expectedTags: [String?] = [], types: [String?] = []
        var creators: [String?] = [], tags: [String?] = [], dates: [Double?] = [], rooms: [Int64?] = [], modifiers: [String?] = []
        for (index, update) in updates.enumerated() {
            let name = update.recordID.recordName
            guard !Self.mayNeedExactDocument(update.changes), try searchableFields(update.recordType).isEmpty,
                  !checksWritten || written[PrefetchKey(zoneRow: zoneRow, recordName: name)] == nil else { continue }
            sent.append(index)
            sentNames.append(name)
            documents.append(String(decoding: update.changes, as: UTF8.self))
            expectedTags.append(update.expectedChangeTag)
            types.append(update.recordType)
            creators.append(update.requiredCreatorRecordName)
            tags.append(update.changeTag)
            dates.append(update.modificationDate.timeIntervalSinceReferenceDate)
            rooms.append(Int64(update.maximumStoredDocumentLength))
            modifiers.append(update.lastModifiedUserRecordName)
        }
        guard !sent.isEmpty else { return answers }
        // The conditions are updateStoredRecord's; the rows that meet them are numbered in the
        // order of the updates, from the zone's next change position.
        let statement = { try self.connection.query("""
            WITH u AS (
                SELECT u.*, row_number() OVER (ORDER BY u.ord) AS n
                FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::float8[], $9::int8[], $10::text[])
                    WITH ORDINALITY AS u(name, doc, expected, type, creator, tag, modified, room, modifier, ord)
                JOIN records AS r ON r.zone_id = $1 AND r.record_name = u.name
                WHERE r.change_tag = u.expected AND r.record_type = u.type AND r.parent_name IS NULL
                    AND (u.creator IS NULL OR r.created_by = u.creator) AND r.exact_fields IS NULL
                    AND NOT (r.fields ?| ARRAY[$11::text, $12::text]) AND length(r.fields::text) <= u.room
            )
            UPDATE records AS r SET
                fields = (r.fields || u.doc::jsonb) - ARRAY(SELECT e.key FROM jsonb_each(u.doc::jsonb) AS e WHERE jsonb_typeof(e.value) = 'null'),
                modified_at = GREATEST(u.modified, (round(r.modified_at * 1000) + 1) / 1000::float8),
                modified_by = u.modifier, change_tag = u.tag, change_seq = $13 + u.n
            FROM u
            WHERE r.zone_id = $1 AND r.record_name = u.name
            RETURNING u.ord, u.n
            """, [.int64(zoneRow), .textArray(sentNames), .textArray(documents), .textArray(expectedTags), .textArray(types), .textArray(creators),
                  .textArray(tags), .doubleArray(dates), .int64Array(rooms), .textArray(modifiers),
                  .text(FieldDocument.encryptedKeysMember), .text(FieldDocument.jsonExtrasMember), .int64(self.states[zone].sequence)]) }
        let rows: PostgresResult
        if underPolicies {
            // A row a policy lets this role read but not write is passed over (the general way
            // then reports it alone), but one whose new version fails a policy's check refuses
            // the whole statement: the batch is tried in a savepoint, and when refused, each
            // update goes the general way.
            do {
                rows = try connection.savepoint(statement)
            } catch let error as StratusError where error.code == .permissionFailure {
                return answers
            }
        } else {
            rows = try statement()
        }
        guard !rows.isEmpty else { return answers }
        var updatedNames: [String?] = []
        // The places given out: under policies a row this role may read but not write is
        // numbered and not written, so the last place can lie past the count of rows written.
        var lastPlace: Int64 = 0
        for row in rows {
            lastPlace = Swift.max(lastPlace, try row.int64(1) ?? 0)
            guard let ordinal = try row.int64(0), ordinal >= 1, ordinal <= Int64(sent.count) else {
                throw StratusError(.internalError, "an update of many records answered a row it was not sent")
            }
            let index = sent[Int(ordinal) - 1]
            answers[index] = true
            let name = updates[index].recordID.recordName
            updatedNames.append(name)
            forgetPrefetched(zoneRow: zoneRow, recordName: name)
        }
        _ = nextSequence(zone, count: lastPlace)
        if try hasTombstones(zone) {
            try connection.execute("DELETE FROM tombstones WHERE zone_id = $1 AND record_name = ANY($2::text[])", [.int64(zoneRow), .textArray(updatedNames)])
        }
        return answers
    }

    // MARK: - Records written in this transaction

    /// Whether a row holds nothing but its columns: no `.deleteSelf` references, assets or
    /// words (its type has no searchable fields) in other tables, and no JSON extras (whose
    /// text `jsonb` may change, so that the row read back would not be the row written).
    private func isPlain(_ row: RecordRow) throws -> Bool {
        try row.deleteSelfTargets.isEmpty && row.jsonExtras.isEmpty && !row.fields.values.contains { !$0.assets.isEmpty }
            && searchableFields(row.recordType).isEmpty
    }

    /// Whether ``written`` holds any record, once it holds the rows inserted so far (in the
    /// order they were written, as every change of it comes after this).
    private func hasWritten() throws -> Bool {
        for run in insertedRuns {
            for index in run.rows.indices where run.inserted[index] {
                try remember(run.rows[index], zoneRow: run.zoneRow, sequence: run.firstSequence + Int64(index))
            }
        }
        insertedRuns = []
        return !written.isEmpty
    }

    /// Keeps a row this transaction wrote (at change position `sequence`) for the reads and
    /// writes of its record that follow when it is plain, and forgets an earlier one otherwise.
    private func remember(_ row: RecordRow, zoneRow: Int64, sequence: Int64) throws {
        let key = PrefetchKey(zoneRow: zoneRow, recordName: row.recordID.recordName)
        written[key] = try isPlain(row) ? WrittenRow(row: row, sequence: sequence, deferred: false) : nil
    }

    /// Whether this role's reads and writes of `records` rows are the rows themselves (see
    /// ``roleOwnsRows``). Other roles read every record from the store and write it there.
    private func rowsAreRoleOwn() throws -> Bool {
        if let known = roleOwnsRows { return known }
        let owns = try connection.query("""
            SELECT pg_catalog.pg_has_role(CURRENT_USER, c.relowner, 'USAGE') AND NOT c.relforcerowsecurity
            FROM pg_catalog.pg_class c WHERE c.oid = to_regclass('records')
            """).first?.bool(0) ?? false
        roleOwnsRows = owns
        return owns
    }

    /// The record the store answers for `row` (``PostgresEngine/decodeRecord(_:zoneID:)``),
    /// under `id`'s spelling of its zone.
    private static func record(_ row: RecordRow, as id: Record.ID, engine: PostgresEngine) throws -> Record {
        let system = row.systemFields
        let stored = Record.SystemFields(
            creationDate: system.creationDate, modificationDate: system.modificationDate,
            creatorUserRecordID: system.creatorUserRecordID.map { Record.ID(recordName: $0.recordName) },
            lastModifiedUserRecordID: system.lastModifiedUserRecordID.map { Record.ID(recordName: $0.recordName) },
            recordChangeTag: system.recordChangeTag)
        let decoded = try row.document.withUnsafeBufferPointer { bytes in
            try FieldDocument.decodeStoredDocument(utf8: bytes, zoneID: id.zoneID) { engine.cachedAssetURL($0) }
        }
        let parent = row.parent.map { Record.Reference(recordID: Record.ID(recordName: $0.recordID.recordName, zoneID: id.zoneID), action: .none) }
        return Record.stored(recordType: row.recordType, recordID: Record.ID(recordName: row.recordID.recordName, zoneID: id.zoneID), systemFields: stored,
                      fields: decoded.fields, parent: parent, encryptedKeys: decoded.encryptedKeys, jsonExtras: decoded.jsonExtras)
    }

    /// The columns of rows written by one array-bound statement, an array per column, in the
    /// order the statements' `unnest` reads them: name, type, created at and by, modified at and
    /// by, change tag, change position, document and its exact text.
    private struct RowColumns {
        private var names: [String?] = [], types: [String?] = [], created: [Double?] = [], creators: [String?] = []
        private var modified: [Double?] = [], modifiers: [String?] = [], tags: [String?] = [], sequences: [Int64?] = []
        private var documents: [String?] = [], exact: [String?] = []

        mutating func append(_ row: RecordRow, sequence: Int64) {
            let system = row.systemFields
            names.append(row.recordID.recordName)
            types.append(row.recordType)
            created.append(system.creationDate!.timeIntervalSinceReferenceDate)
            creators.append(system.creatorUserRecordID!.recordName)
            modified.append(system.modificationDate!.timeIntervalSinceReferenceDate)
            modifiers.append(system.lastModifiedUserRecordID!.recordName)
            tags.append(system.recordChangeTag!)
            sequences.append(sequence)
            let (document, exactDocument) = PostgresWriteTransaction.documents(of: row)
            documents.append(document)
            exact.append(exactDocument)
        }

        var parameters: [PostgresValue] {
            [.textArray(names), .textArray(types), .doubleArray(created), .textArray(creators), .doubleArray(modified),
             .textArray(modifiers), .textArray(tags), .int64Array(sequences), .textArray(documents), .textArray(exact)]
        }
    }

    /// Writes the deletions ``deleteRecord(_:)`` deferred in one statement: the rows, what was
    /// derived from them (references, words, asset references, whose contents may then be
    /// collected) and their tombstones.
    func writeDeferredDeletes() throws {
        guard !deferredDeletes.isEmpty else { return }
        let deletions = deferredDeletes
        deferredDeletes = []
        guard try rowsAreRoleOwn() else { return try writeDeferredDeletesUnderPolicies(deletions) }
        let rows = try connection.query("""
            WITH u AS (SELECT * FROM unnest($1::int8[], $2::text[], $3::text[], $4::int8[]) AS u(z, n, t, seq)),
                d AS (DELETE FROM records AS r USING u WHERE r.zone_id = u.z AND r.record_name = u.n RETURNING 1),
                rf AS (DELETE FROM refs AS f USING u WHERE f.zone_id = u.z AND f.source_name = u.n),
                tk AS (DELETE FROM record_tokens AS k USING u WHERE k.zone_id = u.z AND k.record_name = u.n),
                ar AS (DELETE FROM asset_refs AS a USING u WHERE a.zone_id = u.z AND a.record_name = u.n RETURNING a.content_id),
                tb AS (
                    INSERT INTO tombstones(zone_id, record_name, owner, record_type, change_seq, deleted_at, left_roots) SELECT u.z, u.n, $5, u.t, u.seq, $6, '[]' FROM u
                    \(Self.tombstoneConflict)
                )
            SELECT (SELECT count(*) FROM d), ar.content_id FROM (SELECT 1) AS one LEFT JOIN ar ON true
            """, [.int64Array(deletions.map(\.zoneRow)), .textArray(deletions.map(\.recordName)), .textArray(deletions.map(\.recordType)),
                  .int64Array(deletions.map(\.sequence)), .text(context.storageOwner), .double(now.timeIntervalSinceReferenceDate)])
        // Each row was read in this transaction, under its zone's lock, by a role no policy binds.
        guard let deleted = try rows.first?.int64(0), deleted == Int64(deletions.count) else {
            throw StratusError(.internalError, "records this transaction read to delete were not there to delete")
        }
        for row in rows { if let content = try row.text(1) { releasedAssetContents.insert(content) } }
    }

    /// ``writeDeferredDeletes()`` for a role that row-level security binds, in two statements:
    /// the rows with what was derived from them, then their tombstones (whose policy admits a
    /// tombstone of a row that is gone, which a statement's own deletion is not to itself).
    /// A row the role read but that its policies keep it from deleting fails the write.
    private func writeDeferredDeletesUnderPolicies(_ deletions: [(id: Record.ID, zoneRow: Int64, recordName: String, recordType: String, sequence: Int64)]) throws {
        let rows = try connection.query("""
            WITH u AS (SELECT * FROM unnest($1::int8[], $2::text[]) AS u(z, n)),
                d AS (DELETE FROM records AS r USING u WHERE r.zone_id = u.z AND r.record_name = u.n RETURNING r.zone_id AS z, r.record_name AS n),
                rf AS (DELETE FROM refs AS f USING d WHERE f.zone_id = d.z AND f.source_name = d.n),
                tk AS (DELETE FROM record_tokens AS k USING d WHERE k.zone_id = d.z AND k.record_name = d.n),
                ar AS (DELETE FROM asset_refs AS a USING d WHERE a.zone_id = d.z AND a.record_name = d.n RETURNING a.content_id)
            SELECT d.z, d.n, NULL::text FROM d UNION ALL SELECT NULL, NULL, ar.content_id FROM ar
            """, [.int64Array(deletions.map(\.zoneRow)), .textArray(deletions.map(\.recordName))])
        var deleted: Set<PrefetchKey> = []
        for row in rows {
            if let content = try row.text(2) { releasedAssetContents.insert(content) }
            if let zoneRow = try row.int64(0) { deleted.insert(PrefetchKey(zoneRow: zoneRow, recordName: try row.text(1) ?? "")) }
        }
        if let refused = deletions.first(where: { !deleted.contains(PrefetchKey(zoneRow: $0.zoneRow, recordName: $0.recordName)) }) {
            throw rowSecurityRefusal("delete", refused.id)
        }
        try connection.execute("""
            INSERT INTO tombstones(zone_id, record_name, owner, record_type, change_seq, deleted_at, left_roots)
            SELECT u.z, u.n, $3, u.t, u.seq, $4, '[]' FROM unnest($1::int8[], $2::text[], $5::text[], $6::int8[]) AS u(z, n, t, seq)
            \(Self.tombstoneConflict)
            """, [.int64Array(deletions.map(\.zoneRow)), .textArray(deletions.map(\.recordName)), .text(context.storageOwner), .double(now.timeIntervalSinceReferenceDate),
                  .textArray(deletions.map(\.recordType)), .int64Array(deletions.map(\.sequence))])
    }

    /// Writes the versions whose update was deferred (``writeRecord(_:replacing:)``) in one
    /// statement: before a statement that reads or replaces what their rows hold, and before commit.
    func writeDeferredUpdates() throws {
        try writePendingWords()
        guard !deferredKeys.isEmpty else { return }
        var zoneRows: [Int64?] = [], columns = RowColumns(), parents: [String?] = []
        for key in deferredKeys {
            guard var entry = written[key], entry.deferred else { continue }
            entry.deferred = false
            written[key] = entry
            zoneRows.append(key.zoneRow)
            columns.append(entry.row, sequence: entry.sequence)
            parents.append(entry.row.parent?.recordID.recordName)
        }
        deferredKeys = []
        let count = zoneRows.count
        guard count > 0 else { return }
        // A stored row replaced here may have left a tombstone of an earlier deletion behind.
        let changed = try connection.execute("""
            WITH u AS (
                SELECT * FROM unnest($1::int8[], $2::text[], $3::text[], $4::float8[], $5::text[], $6::float8[], $7::text[], $8::text[], $9::int8[], $10::text[], $11::text[], $12::text[])
                    AS u(z, n, t, ca, cb, ma, mb, tag, seq, doc, ex, p)
            ), old_tombstones AS (
                DELETE FROM tombstones AS b USING u WHERE b.zone_id = u.z AND b.record_name = u.n
            )
            UPDATE records AS r SET record_type = u.t, created_at = u.ca, created_by = u.cb, modified_at = u.ma, modified_by = u.mb,
                change_tag = u.tag, change_seq = u.seq, fields = u.doc::jsonb, exact_fields = u.ex, parent_name = u.p
            FROM u
            WHERE r.zone_id = u.z AND r.record_name = u.n
            """, [.int64Array(zoneRows)] + columns.parameters + [.textArray(parents)])
        // Each row was written by this transaction, under its zone's lock, by a role no policy binds.
        guard changed == count else {
            throw StratusError(.internalError, "\(count - changed) of \(count) records this transaction wrote were not there to update")
        }
    }

    /// Adds the `asset_refs` rows of what a record's row names (a replaced row's old ones are
    /// gone with the statement that replaced it).
    private func addAssetReferences(of row: RecordRow, zoneRow: Int64) throws {
        let identifiers = row.assetContentIdentifiers
        guard !identifiers.isEmpty else { return }
        try connection.execute("""
            INSERT INTO asset_refs(zone_id, record_name, content_id, owner) SELECT $1, $2, c, $3 FROM unnest($4::text[]) AS c ON CONFLICT DO NOTHING
            """, [.int64(zoneRow), .text(row.recordID.recordName), .text(context.storageOwner), .textArray(Array(identifiers))])
    }

    /// The searchable fields of a record type, read once per transaction.
    private func searchableFields(_ type: String) throws -> [String] {
        if let known = searchable[type] { return known }
        let fields = try recordTypeSchema(type)?.searchableFields ?? []
        searchable[type] = fields
        return fields
    }

    /// Queues the words of a replaced row (``pendingWords``), in place of any queued for an
    /// earlier version of it; `clearing`: the old version's words and tombstone go first.
    private func deferWords(of row: RecordRow, zone: Int, key: PrefetchKey, clearing: Bool) throws {
        let fields = try searchableFields(row.recordType)
        let leftBehind = try clearing && (hasWords(zone) || hasTombstones(zone))
        guard !fields.isEmpty || leftBehind else {
            pendingWords[key] = nil
            return
        }
        // A later replacement of this row must clear its words: the zone has words now.
        if !fields.isEmpty { states[zone].hasWords = true }
        if pendingWords.updateValue((zone, row.fields, fields, clearing), forKey: key) == nil { pendingWordKeys.append(key) }
        if pendingWords.count >= Self.maximumDeferredUpdates { try writePendingWords() }
    }

    /// Writes the words ``deferWords(of:zone:key:clearing:)`` queued, a few statements a zone
    /// whatever the number of rows: the tombstones the old versions left, their words (by every
    /// queued name: those whose old words went already have none left), then the new words.
    private func writePendingWords() throws {
        var byZone: [Int: (words: [(name: String, fields: [String: FieldValue], searchable: [String])], clearing: [String])] = [:]
        var zones: [Int] = []
        for key in pendingWordKeys {
            guard let entry = pendingWords.removeValue(forKey: key) else { continue }
            if byZone[entry.zone] == nil { zones.append(entry.zone) }
            byZone[entry.zone, default: ([], [])].words.append((key.recordName, entry.fields, entry.searchable))
            if entry.clearing { byZone[entry.zone, default: ([], [])].clearing.append(key.recordName) }
        }
        pendingWordKeys = []
        for zone in zones {
            guard let (words, clearing) = byZone[zone] else { continue }
            let zoneRow = states[zone].row
            // A stored row replaced here may have left a tombstone of an earlier deletion behind.
            if !clearing.isEmpty, try hasTombstones(zone) {
                try connection.execute("DELETE FROM tombstones WHERE zone_id = $1 AND record_name = ANY($2::text[])", [.int64(zoneRow), .textArray(clearing)])
            }
            try engine.replaceTokens(zoneRow: zoneRow, owner: context.storageOwner, records: words, clearing: try !clearing.isEmpty && hasWords(zone), on: connection)
        }
    }

    /// Keeps the word index of a record of a type with searchable fields.
    private func replaceWords(of row: RecordRow, zone: Int, isNew: Bool, clearing: Bool = true) throws {
        let fields = try searchableFields(row.recordType)
        guard !fields.isEmpty || (!isNew && clearing) else { return }
        // A later replacement of this row must clear its words: the zone has words now.
        if !fields.isEmpty { states[zone].hasWords = true }
        try engine.replaceTokens(zoneRow: states[zone].row, owner: context.storageOwner, recordName: row.recordID.recordName, fields: row.fields, searchable: fields,
                                 clearing: clearing, on: connection)
    }

    /// The document a row's `fields` column holds for queries, and, when that is not the
    /// document itself, the document kept as text (`exact_fields`) for reading.
    ///
    /// `jsonb` cannot hold U+0000 in a string, and keeps numbers as exact decimals, which
    /// turns -0.0 into 0. Strings with U+0000 or U+0001 are stored for queries in
    /// ``PostgresDialect/escaped(_:)`` form (which keeps their order and prefixes, and which
    /// query parameters take too); the exact document is kept beside.
    static func documents(of row: RecordRow) -> (queryable: String, exact: String?) {
        let document = String(decoding: row.document, as: UTF8.self)
        var queryable = document, exact: String?
        let escapes = row.fields.values.contains(where: \.needsEscaping)
        let numbers = numberForms(row.fields)
        if escapes || numbers.largeWhole {
            var escaped = row.fields
            if escapes {
                for (key, value) in row.fields {
                    switch value {
                    case .string(let s): escaped[key] = .string(PostgresDialect.escaped(s))
                    case .stringList(let v): escaped[key] = .stringList(v.map(PostgresDialect.escaped))
                    default: continue
                    }
                }
            }
            // jsonb keeps a number's decimal text exactly: a double of 2^53 or more written as
            // its shortest text (1.152921504606847e+18) would compare as another number than
            // the double's own (1152921504606846976) with integers and queries' values.
            var out = ByteOutput(capacity: row.document.count + 64)
            out.writesExactWholeDoubles = true
            FieldDocument.encode(escaped, encryptedKeys: row.encryptedKeys, jsonExtras: row.jsonExtras, into: &out)
            queryable = String(decoding: out.bytes, as: UTF8.self)
            exact = document
        } else if numbers.negativeZero {
            exact = document
        }
        // What the record's JSON held beside its values (unknown keys, CloudKit's metadata) is
        // kept as given and read from the exact text; its U+0000, which jsonb refuses, is
        // written otherwise in the queryable copy, which no query reads there.
        if mayNeedExactDocument(row.document), let withoutNUL = withoutEscapedNUL(queryable) {
            queryable = withoutNUL
            exact = document
        }
        return (queryable, exact)
    }

    /// `json` with every `\u0000` escape written `\u0001\u0001` (backslashes that escape a
    /// backslash are skipped as pairs), or nil when it has none.
    static func withoutEscapedNUL(_ json: String) -> String? {
        let bytes = Array(json.utf8)
        let backslash = UInt8(ascii: "\\"), zero = UInt8(ascii: "0")
        guard bytes.contains(backslash) else { return nil }
        var out: [UInt8] = []
        var found = false
        var i = 0
        while i < bytes.count {
            if bytes[i] == backslash && i + 1 < bytes.count {
                if bytes[i + 1] == UInt8(ascii: "u") && i + 5 < bytes.count && bytes[i + 2] == zero && bytes[i + 3] == zero && bytes[i + 4] == zero && bytes[i + 5] == zero {
                    if !found { out.reserveCapacity(bytes.count + 8); out.append(contentsOf: bytes[..<i]); found = true }
                    out.append(contentsOf: Array("\\u0001\\u0001".utf8))
                    i += 6
                    continue
                }
                if found { out.append(bytes[i]); out.append(bytes[i + 1]) }
                i += 2
                continue
            }
            if found { out.append(bytes[i]) }
            i += 1
        }
        return found ? String(decoding: out, as: UTF8.self) : nil
    }

    /// Whether a document may hold a value that ``documents(of:)`` treats apart, judged from its
    /// bytes alone: text with U+0000 or U+0001 (written `\u0000`, `\u0001`, with a backslash),
    /// -0.0 (written `-0.0`) or a double of 2^53 or more (its shortest text has an exponent:
    /// `1.152921504606847e+18`). Most documents have no backslash, `-0` or `e+`, and their
    /// fields then need no look; any other (in text, in -0.5) costs that look.
    static func mayNeedExactDocument(_ document: [UInt8]) -> Bool {
        document.withUnsafeBufferPointer { bytes in
            guard let base = bytes.baseAddress, !bytes.isEmpty else { return false }
            if memchr(base, Int32(UInt8(ascii: "\\")), bytes.count) != nil { return true }
            /// Whether `byte` (a rare one, looked for first) occurs with a byte `around` it
            /// (`offset` away) that `test` accepts.
            func occurs(_ byte: UInt8, _ offset: Int, _ test: (UInt8) -> Bool) -> Bool {
                var start = 0
                while start < bytes.count, let found = memchr(base + start, Int32(byte), bytes.count - start) {
                    let at = base.distance(to: found.assumingMemoryBound(to: UInt8.self))
                    if bytes.indices.contains(at + offset) && test(bytes[at + offset]) { return true }
                    start = at + 1
                }
                return false
            }
            return occurs(UInt8(ascii: "-"), 1) { $0 == UInt8(ascii: "0") }
                || occurs(UInt8(ascii: "+"), -1) { $0 == UInt8(ascii: "e") || $0 == UInt8(ascii: "E") }
        }
    }

    /// Which numbers the `fields` column cannot hold as the document writes them: a double of
    /// magnitude 2^53 or more (number or timestamp; the queryable copy writes its exact digits),
    /// and -0.0 (jsonb reads it as 0, so the exact text is kept). One pass over the values.
    static func numberForms(_ fields: [String: FieldValue]) -> (largeWhole: Bool, negativeZero: Bool) {
        var largeWhole = false, negativeZero = false
        func look(_ d: Double) {
            if d.magnitude >= 0x1p53 { largeWhole = true } else if d == 0 && d.sign == .minus { negativeZero = true }
        }
        func look(_ l: Location) {
            for d in [l.latitude, l.longitude, l.altitude, l.horizontalAccuracy, l.verticalAccuracy, l.course, l.speed] where d == 0 && d.sign == .minus { negativeZero = true }
        }
        for value in fields.values {
            switch value {
            case .double(let d): look(d)
            case .doubleList(let v): v.forEach(look)
            case .date(let d): if d.timeIntervalSinceReferenceDate.magnitude >= 0x1p53 { largeWhole = true }
            case .dateList(let v): if v.contains(where: { $0.timeIntervalSinceReferenceDate.magnitude >= 0x1p53 }) { largeWhole = true }
            case .location(let l): look(l)
            case .locationList(let v): v.forEach(look)
            default: continue
            }
        }
        return (largeWhole, negativeZero)
    }

    /// The error for a stored row that a write did not reach: row-level security keeps it from
    /// the connection's role (``PostgresEngine/writeTransaction(_:)`` says why).
    private func rowSecurityRefusal(_ action: String, _ id: Record.ID) -> StratusError {
        var error = StratusError(.permissionFailure, "row-level security does not let this role \(action) record '\(id.recordName)'", recordID: id)
        error.sqlState = "42501"
        return error
    }

    // MARK: - Share hierarchies

    func shareRoots(inZone zoneName: String) throws -> Set<String> {
        Set(try connection.query("SELECT root_name FROM share_index WHERE container = $1 AND owner = $2 AND zone_name = $3 AND root_name IS NOT NULL",
                                 [.text(context.storageContainer), .text(context.storageOwner), .text(zoneName)]).compactMap { try $0.text(0) })
    }

    func childRecords(of parentNames: [String], inZone zoneID: RecordZone.ID) throws -> [(parent: String, name: String, recordType: String)] {
        guard let zone = try zoneIndex(zoneID), !parentNames.isEmpty else { return [] }
        // Rows this transaction holds back are written first: an update deferred may be a new parent.
        try writeDeferredDeletes()
        try writeDeferredUpdates()
        return try connection.query("SELECT parent_name, record_name, record_type FROM records WHERE zone_id = $1 AND parent_name = ANY($2::text[])",
                                    [.int64(states[zone].row), .textArray(Array(Set(parentNames)))]).map { row in
            (try row.text(0) ?? "", try row.text(1) ?? "", try row.text(2) ?? "")
        }
    }

    func recordHierarchyMoves(_ moves: [HierarchyMove]) throws {
        var rows: [PrefetchKey: (zone: Int, move: HierarchyMove)] = [:]
        var order: [PrefetchKey] = []
        for move in moves {
            let zone = try existingZone(move.recordID.zoneID)
            let key = PrefetchKey(zoneRow: states[zone].row, recordName: move.recordID.recordName)
            if let earlier = rows[key] {
                rows[key] = (zone, HierarchyMove(recordID: move.recordID, recordType: move.recordType, leftRoots: earlier.move.leftRoots.union(move.leftRoots)))
            } else {
                order.append(key)
                rows[key] = (zone, move)
            }
        }
        guard !order.isEmpty else { return }
        let written = order.compactMap { rows[$0] }
        try connection.execute("""
            INSERT INTO hierarchy_moves(zone_id, record_name, owner, record_type, change_seq, moved_at, left_roots)
            SELECT u.z, u.n, $4, u.t, u.seq, $5, u.r::jsonb FROM unnest($1::int8[], $2::text[], $3::text[], $6::int8[], $7::text[]) AS u(z, n, t, seq, r)
            ON CONFLICT (zone_id, record_name) DO UPDATE SET record_type = excluded.record_type, change_seq = excluded.change_seq, moved_at = excluded.moved_at,
                left_roots = (SELECT coalesce(jsonb_agg(DISTINCT e ORDER BY e), '[]'::jsonb) FROM jsonb_array_elements_text(hierarchy_moves.left_roots || excluded.left_roots) AS e)
            """, [.int64Array(written.map { states[$0.zone].row }), .textArray(written.map(\.move.recordID.recordName)), .textArray(written.map(\.move.recordType)),
                  .text(context.storageOwner), .double(now.timeIntervalSinceReferenceDate),
                  .int64Array(written.map { nextSequence($0.zone) }), .textArray(written.map { HierarchyMove.encodedRoots($0.move.leftRoots) })])
    }

    func recordTombstoneRoots(_ deletions: [HierarchyMove]) throws {
        try writeDeferredDeletes()
        let zones = try deletions.map { try existingZone($0.recordID.zoneID) }
        try connection.execute("""
            UPDATE tombstones AS t SET left_roots = u.r::jsonb FROM unnest($1::int8[], $2::text[], $3::text[]) AS u(z, n, r)
            WHERE t.zone_id = u.z AND t.record_name = u.n
            """, [.int64Array(zones.map { states[$0].row }), .textArray(deletions.map(\.recordID.recordName)),
                  .textArray(deletions.map { HierarchyMove.encodedRoots($0.leftRoots) })])
    }

    // MARK: - Deleting

    func deleteRecord(_ id: Record.ID) throws -> Bool {
        guard let zone = try zoneIndex(id.zoneID) else { return false }
        let zoneRow = states[zone].row
        let key = PrefetchKey(zoneRow: zoneRow, recordName: id.recordName)
        // Its words go with it: none queued for a version this transaction wrote is written.
        pendingWords[key] = nil
        // A record read ahead in this transaction (a bulk deletion's check of its change tag)
        // is there to delete: under the zone's lock nothing takes it away. It is deleted with
        // others in one statement, before anything reads or writes the rows again (where
        // row-level security binds the role, a row it may read but not delete fails the write).
        if !prefetched.isEmpty, case .some(.some(let stored)) = prefetched[key], try !hasWritten() || written[key] == nil {
            prefetched[key] = nil
            deferredDeletes.append((id, zoneRow, id.recordName, stored.recordType, nextSequence(zone)))
            states[zone].hasTombstones = true
            if deferredDeletes.count >= Self.maximumDeferredDeletes { try writeDeferredDeletes() }
            return true
        }
        try writeDeferredDeletes()
        forgetPrefetched(zoneRow: zoneRow, recordName: id.recordName)
        // The tombstone takes the type the row holds.
        if try hasWritten() {
            try writeDeferredUpdates()
            written[PrefetchKey(zoneRow: zoneRow, recordName: id.recordName)] = nil
        }
        // One round trip: the row, what was derived from it (references, words, asset
        // references, whose contents may then be collected) and its tombstone, which takes the
        // type the row held and the zone's next change position. Where row-level security
        // binds the role, the tombstone comes in a statement of its own: its policy admits a
        // tombstone of a row that is gone, which a statement's own deletion is not to itself.
        let tombstoneInOneStatement = try rowsAreRoleOwn()
        let tombstone = """
            INSERT INTO tombstones(zone_id, record_name, owner, record_type, change_seq, deleted_at, left_roots) SELECT $1, $2, $3, d.record_type, $4, $5, '[]' FROM d
            \(Self.tombstoneConflict)
            """
        let rows = try connection.query("""
            WITH d AS (DELETE FROM records WHERE zone_id = $1 AND record_name = $2 RETURNING record_type),
                rf AS (DELETE FROM refs WHERE zone_id = $1 AND source_name = $2 AND EXISTS (SELECT 1 FROM d)),
                tk AS (DELETE FROM record_tokens WHERE zone_id = $1 AND record_name = $2 AND EXISTS (SELECT 1 FROM d)),
                ar AS (DELETE FROM asset_refs WHERE zone_id = $1 AND record_name = $2 AND EXISTS (SELECT 1 FROM d) RETURNING content_id)
            """ + (tombstoneInOneStatement ? ", tb AS (\(tombstone))\n" : "\n") + """
            SELECT d.record_type, ar.content_id FROM d LEFT JOIN ar ON true
            """, [.int64(zoneRow), .text(id.recordName)] + (tombstoneInOneStatement
                ? [.text(context.storageOwner), .int64(states[zone].sequence + 1), .double(now.timeIntervalSinceReferenceDate)] : []))
        guard let type = try rows.first?.text(0) else {
            // A row this role reads but may not delete (row-level security) is a refusal, not a record gone.
            if try recordExists(id) { throw rowSecurityRefusal("delete", id) }
            return false
        }
        for row in rows { if let content = try row.text(1) { releasedAssetContents.insert(content) } }
        if !tombstoneInOneStatement {
            try connection.execute("WITH d(record_type) AS (SELECT $6::text) " + tombstone,
                                   [.int64(zoneRow), .text(id.recordName), .text(context.storageOwner), .int64(states[zone].sequence + 1),
                                    .double(now.timeIntervalSinceReferenceDate), .text(type)])
        }
        _ = nextSequence(zone)
        states[zone].hasTombstones = true
        return true
    }
}

private extension FieldValue {
    /// Whether the value holds text that ``PostgresDialect/escaped(_:)`` changes.
    var needsEscaping: Bool {
        switch self {
        case .string(let s): PostgresDialect.needsEscaping(s)
        case .stringList(let v): v.contains(where: PostgresDialect.needsEscaping)
        default: false
        }
    }
}

extension PostgresEngine {
    @_spi(StratusEngine)
    public func jobProgress(_ job: String) throws -> Int64? {
        try readTransaction(mayLag: false) { try $0.query("SELECT position FROM job_progress WHERE job = $1", [.text(job)]).first?.int64(0) }
    }

    @_spi(StratusEngine)
    public func jobProgressText(_ job: String) throws -> String? {
        try readTransaction(mayLag: false) { try $0.query("SELECT position_text FROM job_progress WHERE job = $1", [.text(job)]).first?.text(0) }
    }

    @_spi(StratusEngine)
    public func removeJobProgress(_ job: String) throws {
        _ = try writeTransaction { try $0.execute("DELETE FROM job_progress WHERE job = $1", [.text(job)]) }
    }
}
