import Foundation
@_spi(StratusEngine) import Stratus
import StratusSQL

extension SQLiteEngine {
    @_spi(StratusEngine)
    public func writeRecords<T>(in database: DatabaseContext, _ body: (any RecordWriteTransaction) throws -> T) throws -> T {
        let result = try writeTransaction { connection -> T in
            let transaction = SQLiteWriteTransaction(engine: self, connection: connection, context: database, now: Date())
            let result = try body(transaction)
            try transaction.storeChangeSequences()
            return result
        }
        compactIfDue()
        return result
    }
}

/// Stores rows inside one `BEGIN IMMEDIATE` transaction of the writer, numbering each change
/// in its zone's sequence and keeping the reference, word and tombstone tables true.
final class SQLiteWriteTransaction: RecordWriteTransaction {
    let engine: SQLiteEngine
    let connection: SQLiteConnection
    let context: DatabaseContext
    let now: Date
    /// The zones this transaction touched, each loaded once: found by ID through
    /// `zoneIndexes`, or without hashing through `lastZone` (requests nearly always stay in
    /// one zone), and by row with a scan of the few there are.
    private var zones: [ZoneState] = []
    private var zoneIndexes: [RecordZone.ID: Int] = [:]
    private var lastZone: (id: RecordZone.ID, index: Int)?
    /// Record type schemas, read once per transaction (`nil`: the type has none); the last
    /// type's searchable fields without hashing.
    private var typeSchemas = TransactionSchemaCache()
    private var lastSearchable: (recordType: String, fields: [String])?
    /// Whether a grown type changed the indexes the schemas declare.
    private var indexesChanged = false
    /// The multi-row inserts and upserts by number of rows, prepared once per transaction.
    /// The stored-record read, prepared once per transaction (an update reads every record).
    private var selectRecord: SQLiteStatement?
    /// The check of a stored record an update without reading expects, prepared once per transaction.
    private var checkStoredUpdate: SQLiteStatement?
    private var insertStatements = RunStatements()
    /// Rows that ``writeRecord(_:replacing:)`` wrote and ``deleteRecord(_:)`` deleted, still to
    /// be written to or removed from `records`: written together, up to ``maximumRunLength`` to
    /// a statement, before anything reads or writes a pending name, and before the table is
    /// read as a whole. A statement that moves or removes a row opens every index of the table,
    /// which a schema with many indexes makes cost more than the row (BENCHMARKS.md,
    /// 2026-12-02 07:20). A name is pending once at most, so the two kinds commute.
    private var pendingWrites: [PendingWrite] = []
    private var pendingWrittenNames: Set<PendingName> = []
    private var pendingRowDeletions: [Int64] = []
    private var pendingDeletedNames: Set<PendingName> = []
    /// Rows ``updateStoredRecord(_:)`` checked and merged, still to be moved to their new
    /// change keys, as pending writes are.
    private var pendingUpdates: [PendingUpdate] = []
    private var pendingUpdatedNames: Set<PendingName> = []
    private var upsertStatements = RunStatements()
    private var moveStatements = RunStatements()
    private var deleteStatements = RunStatements()
    private var texts = TextArena()
    /// Asset content that rows named before this transaction and no longer name.
    private(set) var releasedAssetContents: Set<String> = []
    /// Whether any record names asset content (nil until asked): when none does and a row
    /// names none, its write need not look at `asset_refs`.
    private var storeHasAssetRefs: Bool?

    /// Statements of one kind for runs of rows, prepared once per transaction for each run
    /// length (1 to ``maximumRunLength``) the transaction meets.
    private struct RunStatements {
        private var prepared: [SQLiteStatement?] = []

        /// The statement for `rows` rows, prepared from `sql(rows)` the first time.
        mutating func statement(rows: Int, on connection: SQLiteConnection, sql: (Int) -> String) throws -> SQLiteStatement {
            if prepared.isEmpty { prepared = Array(repeating: nil, count: SQLiteWriteTransaction.maximumRunLength + 1) }
            if let known = prepared[rows] { return known }
            let statement = try connection.statement(sql(rows))
            prepared[rows] = statement
            return statement
        }
    }

    /// `placeholders` repeated `count` times, separated by commas: a run's `VALUES` or `IN` list.
    private static func list(of placeholders: String, count: Int) -> String {
        Array(repeating: placeholders, count: count).joined(separator: ", ")
    }

    private struct PendingName: Hashable {
        let zoneRow: Int64
        let name: String
    }

    private struct PendingWrite {
        let row: RecordRow
        let zoneRow: Int64
        let sequence: Int64
    }

    private struct PendingUpdate {
        let oldChangeKey: Int64
        let newChangeKey: Int64
        let modifiedAt: Double
        let modifiedBy: String
        let changeTag: String
        let fields: [UInt8]
    }

    private struct ZoneState {
        let id: RecordZone.ID
        let row: Int64
        var sequence: Int64
        let capabilities: RecordZone.Capabilities
        var changed: Bool
        /// Whether the zone has any record tombstone (nil until asked). A record in a zone
        /// without any has none to clear, which spares bulk writes a delete per record.
        var hasTombstones: Bool?
        /// Whether any record of the zone holds a `.deleteSelf` reference (nil until asked). A
        /// replaced record in a zone without any has none to clear, which spares bulk updates
        /// a delete per record.
        var hasReferences: Bool?
    }

    init(engine: SQLiteEngine, connection: SQLiteConnection, context: DatabaseContext, now: Date) {
        self.engine = engine
        self.connection = connection
        self.context = context
        self.now = now
    }

    // MARK: - Zones

    func zoneCapabilities(_ zoneID: RecordZone.ID) throws -> RecordZone.Capabilities? {
        try zoneIndex(zoneID).map { zones[$0].capabilities }
    }

    /// The index in `zones` of a zone, loading it (and creating the default zone) on first use.
    private func zoneIndex(_ zoneID: RecordZone.ID) throws -> Int? {
        if let last = lastZone, last.id == zoneID { return last.index }
        if let known = zoneIndexes[zoneID] {
            lastZone = (zoneID, known)
            return known
        }
        guard let row = try engine.zoneRowID(zoneID, context, on: connection, createDefault: true) else { return nil }
        // Another spelling of a zone already written (its owner's record name for
        // `__defaultOwner__`): one zone, one count of changes.
        if let same = zones.firstIndex(where: { $0.row == row }) {
            zoneIndexes[zoneID] = same
            lastZone = (zoneID, same)
            return same
        }
        let select = try connection.statement("SELECT z.change_seq, s.capabilities FROM zones z JOIN zone_state s ON s.zone_id = z.zone_id WHERE z.zone_id = ?")
        try select.bind([.integer(row)])
        guard try select.step() else { throw StratusError(.badDatabase, "zone '\(zoneID.zoneName)' has no change state; the store was not created by this version of Stratus") }
        zones.append(ZoneState(id: zoneID, row: row, sequence: select.int64(0), capabilities: RecordZone.Capabilities(rawValue: UInt(truncatingIfNeeded: select.int64(1))), changed: false))
        select.reset()
        zoneIndexes[zoneID] = zones.count - 1
        lastZone = (zoneID, zones.count - 1)
        return zones.count - 1
    }

    /// The zone of a record the caller knows to exist (it asked ``zoneCapabilities(_:)`` first).
    private func existingZone(_ zoneID: RecordZone.ID) throws -> Int {
        guard let index = try zoneIndex(zoneID) else {
            throw StratusError.zoneNotFound(zoneID, in: context)
        }
        return index
    }

    private func nextSequence(_ zone: Int) throws -> Int64 {
        guard zones[zone].sequence < SQLiteSchema.maximumSequence else { throw Self.sequenceExhausted(zones[zone].id) }
        zones[zone].sequence += 1
        zones[zone].changed = true
        return zones[zone].sequence
    }

    private static func sequenceExhausted(_ zoneID: RecordZone.ID) -> StratusError {
        StratusError(.limitExceeded, "zone '\(zoneID.zoneName)' has used all \(SQLiteSchema.maximumSequence) change numbers a zone has; copy its records into a new zone", zoneID: zoneID)
    }

    // Asked for every row written: the answer is kept per transaction (a write that adds such
    // a row sets it), and only the first question reads the table.
    private func zoneHasTombstones(_ zone: Int) throws -> Bool {
        if let known = zones[zone].hasTombstones { return known }
        zones[zone].hasTombstones = try zoneHasRows(zone, in: "tombstones")
        return zones[zone].hasTombstones!
    }

    private func zoneHasReferences(_ zone: Int) throws -> Bool {
        if let known = zones[zone].hasReferences { return known }
        zones[zone].hasReferences = try zoneHasRows(zone, in: "refs")
        return zones[zone].hasReferences!
    }

    /// Whether `table` holds a row of the zone.
    private func zoneHasRows(_ zone: Int, in table: StaticString) throws -> Bool {
        let probe = try connection.statement("SELECT 1 FROM \(table) WHERE zone_id = ? LIMIT 1")
        try probe.bind([.integer(zones[zone].row)])
        defer { probe.reset() }
        return try probe.step()
    }

    /// Writes back each touched zone's change sequence, and notes each changed zone as a
    /// change of its database. Called once, before the transaction commits.
    func storeChangeSequences() throws {
        try applyPendingChanges()
        for zone in zones where zone.changed {
            let update = try connection.statement("UPDATE zones SET change_seq = ? WHERE zone_id = ?")
            try update.bind([.integer(zone.sequence), .integer(zone.row)])
            try update.step()
            try engine.noteDatabaseChange(zoneRow: zone.row, context, on: connection)
        }
        if indexesChanged { try engine.synchronizeIndexes(on: connection) }
    }

    // MARK: - Reading inside the transaction

    func storedRecord(_ id: Record.ID) throws -> Record? {
        guard let zone = try zoneIndex(id.zoneID) else { return nil }
        try applyPendingChanges(naming: id.recordName, zoneRow: zones[zone].row)
        if selectRecord == nil { selectRecord = try connection.statement(SQLiteEngine.selectRecordByName) }
        return try engine.loadRecord(id, zoneRow: zones[zone].row, with: selectRecord!)
    }

    func recordExists(_ id: Record.ID) throws -> Bool {
        guard let zone = try zoneIndex(id.zoneID) else { return false }
        return try storedChangeKey(of: id.recordName, zoneRow: zones[zone].row) != nil
    }

    func storedChangeTag(_ id: Record.ID) throws -> String? {
        guard let zone = try zoneIndex(id.zoneID) else { return nil }
        try applyPendingChanges(naming: id.recordName, zoneRow: zones[zone].row)
        let select = try connection.statement("SELECT change_tag FROM records WHERE zone_id = ? AND record_name = ?")
        try select.bind([.integer(zones[zone].row), .text(id.recordName)])
        defer { select.reset() }
        return try select.step() ? select.text(0) : nil
    }

    /// The change key of the stored record named `name`, if there is one.
    private func storedChangeKey(of name: String, zoneRow: Int64) throws -> Int64? {
        try applyPendingChanges(naming: name, zoneRow: zoneRow)
        let select = try connection.statement("SELECT change_key FROM records WHERE zone_id = ? AND record_name = ?")
        try select.bind([.integer(zoneRow), .text(name)])
        defer { select.reset() }
        return try select.step() ? select.int64(0) : nil
    }

    func deleteSelfSources(of id: Record.ID) throws -> [String] {
        guard let zone = try zoneIndex(id.zoneID) else { return [] }
        let sources = try connection.statement("SELECT source_name FROM refs WHERE zone_id = ? AND target_name = ?")
        try sources.bind([.integer(zones[zone].row), .text(id.recordName)])
        var names: [String] = []
        while try sources.step() { names.append(sources.text(0) ?? "") }
        return names
    }

    func deleteSelfReferenceCount(to target: Record.ID, excludingSource source: String) throws -> Int {
        guard let zone = try zoneIndex(target.zoneID) else { return 0 }
        let count = try connection.statement("SELECT count(*) FROM refs WHERE zone_id = ? AND target_name = ? AND source_name != ?")
        try count.bind([.integer(zones[zone].row), .text(target.recordName), .text(source)])
        defer { count.reset() }
        _ = try count.step()
        return Int(count.int64(0))
    }

    func saveJobProgress(_ job: String, position: Int64, text: String?) throws {
        let save = try connection.statement("INSERT OR REPLACE INTO job_progress(job, position, position_text, updated_at) VALUES (?, ?, ?, ?)")
        try save.bind([.text(job), .integer(position), text.map { .text($0) } ?? .null, .real(now.timeIntervalSinceReferenceDate)])
        try save.step()
    }

    // MARK: - Writing rows

    /// The most new records one multi-row `INSERT` writes.
    static let maximumRunLength = 32

    func insertNewRecords(_ rows: [RecordRow]) throws -> [Bool] {
        guard let firstRow = rows.first else { return [] }
        try applyPendingChanges()
        let zone = try existingZone(firstRow.recordID.zoneID)
        var inserted: [Bool] = []
        inserted.reserveCapacity(rows.count)
        var start = 0
        while start < rows.count {
            let run = rows[start..<min(rows.count, start + Self.maximumRunLength)]
            try insertRun(run, zone: zone, into: &inserted)
            start = run.endIndex
        }
        return inserted
    }

    /// One multi-row `INSERT … ON CONFLICT DO NOTHING`, then each row's derived data.
    private func insertRun(_ run: ArraySlice<RecordRow>, zone: Int, into inserted: inout [Bool]) throws {
        let zoneRow = zones[zone].row
        let base = zones[zone].sequence
        guard base + Int64(run.count) <= SQLiteSchema.maximumSequence else { throw Self.sequenceExhausted(zones[zone].id) }
        let statement = try insertStatement(rows: run.count)
        statement.resetKeepingBindings()   // every parameter is bound below
        // The arena is taken out of the transaction for the run: each text added to a stored
        // property would be an exclusivity check.
        var arena = TextArena()
        swap(&arena, &texts)
        defer { swap(&arena, &texts) }
        arena.removeAll()
        // As the rows spell it (the zone's state may be kept under its other spelling).
        let zoneID = run[run.startIndex].recordID.zoneID
        for (offset, row) in run.enumerated() {
            precondition(row.recordID.zoneID.isSameZone(as: zoneID) && row.parent == nil, "insertNewRecords takes rows of one zone without parents")
            try bindRow(row, sequence: base + Int64(offset) + 1, zoneRow: zoneRow, at: Int32(offset * Self.parametersPerNewRow), to: statement, texts: &arena)
        }
        try statement.step(bindingInPlace: arena)
        let insertedCount = connection.changes
        if insertedCount > 0 {
            // The run's change numbers are taken, also those of rows that were not inserted.
            zones[zone].sequence += Int64(run.count)
            zones[zone].changed = true
        }
        for (offset, row) in run.enumerated() {
            let wasInserted = try insertedCount == run.count
                || storedChangeKey(of: row.recordID.recordName, zoneRow: zoneRow) == SQLiteSchema.changeKey(zoneRow: zoneRow, sequence: base + Int64(offset) + 1)
            if wasInserted {
                try finishWrite(of: row, zone: zone, isNew: true)
            }
            inserted.append(wasInserted)
        }
    }

    func writeRecord(_ row: RecordRow, replacing: Bool) throws {
        let zone = try existingZone(row.recordID.zoneID)
        let zoneRow = zones[zone].row
        try applyPendingChanges(naming: row.recordID.recordName, zoneRow: zoneRow)
        pendingWrites.append(PendingWrite(row: row, zoneRow: zoneRow, sequence: try nextSequence(zone)))
        pendingWrittenNames.insert(PendingName(zoneRow: zoneRow, name: row.recordID.recordName))
        // What the row's derived tables hold does not depend on its row in `records`.
        try finishWrite(of: row, zone: zone, isNew: !replacing)
        try replaceAssetReferences(of: row.recordID.recordName, identifiers: row.assetContentIdentifiers, zoneRow: zones[zone].row, isNew: !replacing)
        if pendingWrites.count == Self.maximumRunLength { try applyPendingWrites() }
    }

    func updateStoredRecord(_ update: StoredRecordUpdate) throws -> Bool {
        let zone = try existingZone(update.recordID.zoneID)
        let zoneRow = zones[zone].row
        let name = update.recordID.recordName
        try applyPendingChanges(naming: name, zoneRow: zoneRow)
        // The derived data of a row that may hold references, assets or searched words needs
        // its stored values: such a save takes the general way.
        if try zoneHasReferences(zone) || anyAssetReferences() || !searchableFields(of: update.recordType).isEmpty { return false }
        if checkStoredUpdate == nil { checkStoredUpdate = try connection.statement(Self.checkStoredUpdate) }
        let check = checkStoredUpdate!
        check.resetKeepingBindings()   // every parameter is bound below
        texts.removeAll()
        texts.add(utf8: update.changes, at: 1)
        try check.bind(Int64(update.maximumStoredDocumentLength), at: 2)
        try check.bind(.real(update.modificationDate.timeIntervalSinceReferenceDate), at: 3)
        texts.add(update.lastModifiedUserRecordName, at: 4)
        try check.bind(zoneRow, at: 5)
        texts.add(name, at: 6)
        texts.add(update.expectedChangeTag, at: 7)
        texts.add(update.recordType, at: 8)
        if let creator = update.requiredCreatorRecordName { texts.add(creator, at: 9) } else { try check.bind(.null, at: 9) }
        // Not the record the update expects, or a merge that does not fit: nothing is taken.
        guard try check.step(bindingInPlace: texts), !check.isNull(1) else {
            check.reset()
            return false
        }
        let merged = check.withTextBytes(1) { Array($0!) }
        let pending = PendingUpdate(oldChangeKey: check.int64(0), newChangeKey: SQLiteSchema.changeKey(zoneRow: zoneRow, sequence: try nextSequence(zone)),
                                    modifiedAt: check.double(2), modifiedBy: check.text(3) ?? "", changeTag: update.changeTag, fields: merged)
        check.reset()
        pendingUpdates.append(pending)
        pendingUpdatedNames.insert(PendingName(zoneRow: zoneRow, name: name))
        if pendingUpdates.count == Self.maximumRunLength { try applyPendingUpdates() }
        if try zoneHasTombstones(zone) {
            let clearTombstone = try connection.statement("DELETE FROM tombstones WHERE zone_id = ? AND record_name = ?")
            try clearTombstone.bind([.integer(zoneRow), .text(name)])
            try clearTombstone.step()
        }
        return true
    }

    /// What ``updateStoredRecord(_:)`` checks and reads before its row is moved: the stored
    /// row's change key, its fields with the changed ones merged in, the version's date (a
    /// millisecond after the stored one when that is as late as the update's, as the general
    /// way dates it) and modifier ('' for the creator), when the row is as the update expects.
    /// The merge answers NULL for a document that is too long (in bytes, which are at least
    /// its characters) or holds more than fields: the checks cost no second read of the document.
    private static let checkStoredUpdate = """
        SELECT change_key, stratus_merge_fields(fields, ?1, ?2), max(?3, (round(modified_at * 1000) + 1) / 1000.0), CASE ?4 WHEN created_by THEN '' ELSE ?4 END
        FROM records WHERE zone_id = ?5 AND record_name = ?6 AND change_tag = ?7 AND record_type = ?8 AND parent_name IS NULL
            AND (?9 IS NULL OR created_by = ?9)
        """

    /// Keeps `asset_refs` true for a record's row: what it names now, and, for a replaced row,
    /// what it named before and no longer does (a candidate for collection).
    private func replaceAssetReferences(of recordName: String, identifiers: Set<String>, zoneRow: Int64, isNew: Bool) throws {
        if identifiers.isEmpty, try !anyAssetReferences() { return }
        var previous: Set<String> = []
        if !isNew {
            previous = try removeAssetReferences(of: recordName, zoneRow: zoneRow)
        }
        releasedAssetContents.formUnion(previous.subtracting(identifiers))
        guard !identifiers.isEmpty else { return }
        storeHasAssetRefs = true
        let insert = try connection.statement("INSERT OR IGNORE INTO asset_refs(content_id, zone_id, record_name) VALUES (?, ?, ?)")
        for identifier in identifiers {
            insert.reset()
            try insert.bind([.text(identifier), .integer(zoneRow), .text(recordName)])
            try insert.step()
        }
    }

    /// Deletes a record's `asset_refs` rows and answers what they named.
    private func removeAssetReferences(of recordName: String, zoneRow: Int64) throws -> Set<String> {
        guard try anyAssetReferences() else { return [] }
        let select = try connection.statement("SELECT content_id FROM asset_refs WHERE zone_id = ? AND record_name = ?")
        try select.bind([.integer(zoneRow), .text(recordName)])
        var named: Set<String> = []
        while try select.step() { named.insert(select.text(0) ?? "") }
        select.reset()
        guard !named.isEmpty else { return [] }
        let delete = try connection.statement("DELETE FROM asset_refs WHERE zone_id = ? AND record_name = ?")
        try delete.bind([.integer(zoneRow), .text(recordName)])
        try delete.step()
        return named
    }

    private func anyAssetReferences() throws -> Bool {
        if let known = storeHasAssetRefs { return known }
        let probe = try connection.statement("SELECT 1 FROM asset_refs LIMIT 1")
        let found = try probe.step()
        probe.reset()
        storeHasAssetRefs = found
        return found
    }

    /// Parameters of one row of the multi-row insert: every column of ``insertColumns`` but
    /// the parent, which a new record of a run does not have.
    private static let parametersPerNewRow = 10
    /// Parameters of a row ``writeRecord(_:replacing:)`` writes: a new row's and the parent.
    private static let parametersPerWrittenRow = 11

    /// `INSERT … VALUES (…), (…) … ON CONFLICT DO NOTHING` for `rows` new records, prepared once
    /// per transaction for each length.
    private func insertStatement(rows: Int) throws -> SQLiteStatement {
        try insertStatements.statement(rows: rows, on: connection) { rows in
            Self.insertColumns + " VALUES " + Self.list(of: "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)", count: rows) + " ON CONFLICT(zone_id, record_name) DO NOTHING"
        }
    }


    /// Every column of a record's row, in the order ``bindRow(_:sequence:zoneRow:at:to:)`` binds them, parent last.
    private static let insertColumns = "INSERT INTO records(zone_id, record_name, record_type, created_at, created_by, modified_at, modified_by, change_tag, change_key, fields, parent_name)"

    /// Binds a row's columns but the parent to the parameters after `offset`: numbers now,
    /// texts into `texts` for ``SQLiteStatement/step(bindingInPlace:)``. Column by column: an
    /// array of values per record costs more than the binding.
    private func bindRow(_ row: RecordRow, sequence: Int64, zoneRow: Int64, at offset: Int32, to statement: SQLiteStatement, texts: inout TextArena) throws {
        let system = row.systemFields
        try statement.bind(zoneRow, at: offset + 1)
        texts.add(row.recordID.recordName, at: offset + 2)
        texts.add(row.recordType, at: offset + 3)
        try statement.bind(.real(system.creationDate!.timeIntervalSinceReferenceDate), at: offset + 4)
        texts.add(system.creatorUserRecordID!.recordName, at: offset + 5)
        try statement.bind(.real(system.modificationDate!.timeIntervalSinceReferenceDate), at: offset + 6)
        let modifier = system.lastModifiedUserRecordID!.recordName
        texts.add(modifier == system.creatorUserRecordID!.recordName ? "" : modifier, at: offset + 7)
        texts.add(system.recordChangeTag!, at: offset + 8)
        try statement.bind(SQLiteSchema.changeKey(zoneRow: zoneRow, sequence: sequence), at: offset + 9)
        texts.add(utf8: row.document, at: offset + 10)
    }

    /// What follows writing a record's row: its references, words and tombstone.
    private func finishWrite(of row: RecordRow, zone: Int, isNew: Bool) throws {
        let zoneRow = zones[zone].row
        let name = row.recordID.recordName
        try replaceReferences(of: name, targets: row.deleteSelfTargets, zone: zone, isNew: isNew)
        let searchable = try searchableFields(of: row.recordType)
        if !searchable.isEmpty {
            try engine.replaceTokens(zoneRow: zoneRow, recordName: name, fields: row.fields, searchable: searchable, on: connection)
        }
        if try zoneHasTombstones(zone) {
            let clearTombstone = try connection.statement("DELETE FROM tombstones WHERE zone_id = ? AND record_name = ?")
            try clearTombstone.bind([.integer(zoneRow), .text(name)])
            try clearTombstone.step()
        }
    }

    private func replaceReferences(of recordName: String, targets: Set<String>, zone: Int, isNew: Bool) throws {
        let zoneRow = zones[zone].row
        if try !isNew && zoneHasReferences(zone) {
            let clear = try connection.statement("DELETE FROM refs WHERE zone_id = ? AND source_name = ?")
            try clear.bind([.integer(zoneRow), .text(recordName)])
            try clear.step()
        }
        guard !targets.isEmpty else { return }
        zones[zone].hasReferences = true
        let insert = try connection.statement("INSERT OR IGNORE INTO refs(zone_id, target_name, source_name) VALUES (?, ?, ?)")
        for target in targets {
            insert.reset()
            try insert.bind([.integer(zoneRow), .text(target), .text(recordName)])
            try insert.step()
        }
    }

    private func searchableFields(of recordType: String) throws -> [String] {
        if let last = lastSearchable, last.recordType == recordType { return last.fields }
        let fields = try recordTypeSchema(recordType)?.searchableFields ?? []
        lastSearchable = (recordType, fields)
        return fields
    }

    // MARK: - Record type schemas

    func recordTypeSchema(_ recordType: String) throws -> RecordTypeSchema? {
        try typeSchemas.schema(recordType) { try engine.loadSchema($0, storageContainer: context.storageContainer, on: connection) }
    }

    func containerSchema() throws -> ContainerSchema {
        try engine.loadContainerSchema(context.storageContainer, on: connection)
    }

    func saveRecordTypeSchema(_ schema: RecordTypeSchema) throws {
        try applyPendingChanges()   // a changed word index is rebuilt from the stored records
        let old = try recordTypeSchema(schema.recordType)
        guard old != schema else { return }
        if try engine.storeRecordType(schema, replacing: old, storageContainer: context.storageContainer, on: connection) { indexesChanged = true }
        typeSchemas.remember(schema)
        if lastSearchable?.recordType == schema.recordType { lastSearchable = nil }
    }

    // MARK: - Deleting

    func deleteRecord(_ id: Record.ID) throws -> Bool {
        guard let zone = try zoneIndex(id.zoneID) else { return false }
        let zoneRow = zones[zone].row
        let name = id.recordName
        try applyPendingChanges(naming: name, zoneRow: zoneRow)
        let select = try connection.statement("SELECT record_type, change_key FROM records WHERE zone_id = ? AND record_name = ?")
        try select.bind([.integer(zoneRow), .text(name)])
        guard try select.step(), let type = select.text(0) else { return false }
        let changeKey = select.int64(1)
        select.reset()
        pendingRowDeletions.append(changeKey)
        pendingDeletedNames.insert(PendingName(zoneRow: zoneRow, name: name))
        if pendingRowDeletions.count == Self.maximumRunLength { try applyPendingDeletions() }
        let refs = try connection.statement("DELETE FROM refs WHERE zone_id = ? AND source_name = ?")
        try refs.bind([.integer(zoneRow), .text(name)])
        try refs.step()
        let tokens = try connection.statement("DELETE FROM record_tokens WHERE zone_id = ? AND record_name = ?")
        try tokens.bind([.integer(zoneRow), .text(name)])
        try tokens.step()
        releasedAssetContents.formUnion(try removeAssetReferences(of: name, zoneRow: zoneRow))
        zones[zone].hasTombstones = true
        let tombstone = try connection.statement("INSERT OR REPLACE INTO tombstones(zone_id, record_name, record_type, change_seq, deleted_at, left_roots) VALUES (?, ?, ?, ?, ?, '[]')")
        try tombstone.bind([.integer(zoneRow), .text(name), .text(type), .integer(try nextSequence(zone)), .real(now.timeIntervalSinceReferenceDate)])
        try tombstone.step()
        return true
    }

    // MARK: - Share hierarchies

    func shareRoots(inZone zoneName: String) throws -> Set<String> {
        let select = try connection.statement("SELECT root_name FROM share_index WHERE container = ? AND owner = ? AND zone_name = ? AND root_name IS NOT NULL")
        try select.bind([.text(context.storageContainer), .text(context.storageOwner), .text(zoneName)])
        defer { select.reset() }
        var roots: Set<String> = []
        while try select.step() { if let root = select.text(0) { roots.insert(root) } }
        return roots
    }

    func childRecords(of parentNames: [String], inZone zoneID: RecordZone.ID) throws -> [(parent: String, name: String, recordType: String)] {
        guard let zone = try zoneIndex(zoneID) else { return [] }
        try applyPendingChanges()
        // `records_by_parent` answers each name.
        let select = try connection.statement("SELECT record_name, record_type FROM records WHERE zone_id = ? AND parent_name = ?")
        var children: [(parent: String, name: String, recordType: String)] = []
        for parent in Set(parentNames) {
            select.reset()
            try select.bind([.integer(zones[zone].row), .text(parent)])
            while try select.step() { children.append((parent, select.text(0) ?? "", select.text(1) ?? "")) }
        }
        select.reset()
        return children
    }

    func recordHierarchyMoves(_ moves: [HierarchyMove]) throws {
        let earlier = try connection.statement("SELECT left_roots FROM hierarchy_moves WHERE zone_id = ? AND record_name = ?")
        let write = try connection.statement("INSERT OR REPLACE INTO hierarchy_moves(zone_id, record_name, record_type, change_seq, moved_at, left_roots) VALUES (?, ?, ?, ?, ?, ?)")
        for move in moves {
            let zone = try existingZone(move.recordID.zoneID)
            let key: [SQLValue] = [.integer(zones[zone].row), .text(move.recordID.recordName)]
            earlier.reset()
            try earlier.bind(key)
            var roots = move.leftRoots
            if try earlier.step() { roots.formUnion(HierarchyMove.roots(decoding: earlier.text(0))) }
            earlier.reset()
            write.reset()
            try write.bind(key + [.text(move.recordType), .integer(try nextSequence(zone)), .real(now.timeIntervalSinceReferenceDate),
                                  .text(HierarchyMove.encodedRoots(roots))])
            try write.step()
        }
        write.reset()
    }

    func recordTombstoneRoots(_ deletions: [HierarchyMove]) throws {
        let update = try connection.statement("UPDATE tombstones SET left_roots = ? WHERE zone_id = ? AND record_name = ?")
        for deletion in deletions {
            let zone = try existingZone(deletion.recordID.zoneID)
            update.reset()
            try update.bind([.text(HierarchyMove.encodedRoots(deletion.leftRoots)), .integer(zones[zone].row), .text(deletion.recordID.recordName)])
            try update.step()
        }
        update.reset()
    }

    /// Writes and removes the rows of `records` that writes and deletions left pending.
    private func applyPendingChanges() throws {
        try applyPendingWrites()
        try applyPendingUpdates()
        try applyPendingDeletions()
    }

    /// Applies the pending changes when one of them names `name`, so that its row is as written.
    private func applyPendingChanges(naming name: String, zoneRow: Int64) throws {
        guard !pendingWrites.isEmpty || !pendingUpdates.isEmpty || !pendingRowDeletions.isEmpty else { return }
        let key = PendingName(zoneRow: zoneRow, name: name)
        if pendingWrittenNames.contains(key) || pendingUpdatedNames.contains(key) || pendingDeletedNames.contains(key) { try applyPendingChanges() }
    }

    /// Writes the rows ``writeRecord(_:replacing:)`` left pending, in one statement: each row
    /// is inserted, or replaces the stored row of its name (a later row of the same name
    /// replaces an earlier one, as when they were written one after another).
    private func applyPendingWrites() throws {
        guard !pendingWrites.isEmpty else { return }
        let count = pendingWrites.count
        let statement = try upsertStatements.statement(rows: count, on: connection) { rows in
            Self.insertColumns + " VALUES " + Self.list(of: "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", count: rows) + """

                ON CONFLICT(zone_id, record_name) DO UPDATE SET
                    record_type = excluded.record_type, modified_at = excluded.modified_at,
                    created_at = excluded.created_at, created_by = excluded.created_by,
                    modified_by = CASE coalesce(nullif(excluded.modified_by, ''), excluded.created_by)
                        WHEN excluded.created_by THEN '' ELSE coalesce(nullif(excluded.modified_by, ''), excluded.created_by) END,
                    change_tag = excluded.change_tag, change_key = excluded.change_key, fields = excluded.fields,
                    parent_name = excluded.parent_name
                """
        }
        statement.resetKeepingBindings()   // every parameter is bound below
        texts.removeAll()
        for (offset, write) in pendingWrites.enumerated() {
            let base = Int32(offset * Self.parametersPerWrittenRow)
            try bindRow(write.row, sequence: write.sequence, zoneRow: write.zoneRow, at: base, to: statement, texts: &texts)
            if let parent = write.row.parent { texts.add(parent.recordID.recordName, at: base + 11) } else { try statement.bind(.null, at: base + 11) }
        }
        try statement.step(bindingInPlace: texts)
        pendingWrites.removeAll(keepingCapacity: true)
        pendingWrittenNames.removeAll(keepingCapacity: true)
    }

    /// Moves the rows ``updateStoredRecord(_:)`` checked to their new change keys with their
    /// merged fields, in one statement. Each row is found by the change key it had when it was
    /// checked: a pending name is applied before anything else reads or writes it.
    private func applyPendingUpdates() throws {
        guard !pendingUpdates.isEmpty else { return }
        let count = pendingUpdates.count
        let statement = try moveStatements.statement(rows: count, on: connection) { rows in
            """
            WITH moved(old_key, new_key, modified_at, modified_by, change_tag, fields) AS (VALUES \(Self.list(of: "(?, ?, ?, ?, ?, ?)", count: rows)))
            UPDATE records SET change_key = moved.new_key, modified_at = moved.modified_at, modified_by = moved.modified_by,
                change_tag = moved.change_tag, fields = moved.fields
            FROM moved WHERE records.change_key = moved.old_key
            """
        }
        statement.resetKeepingBindings()   // every parameter is bound below
        texts.removeAll()
        for (offset, update) in pendingUpdates.enumerated() {
            let base = Int32(offset * 6)
            try statement.bind(update.oldChangeKey, at: base + 1)
            try statement.bind(update.newChangeKey, at: base + 2)
            try statement.bind(.real(update.modifiedAt), at: base + 3)
            texts.add(update.modifiedBy, at: base + 4)
            texts.add(update.changeTag, at: base + 5)
            texts.add(utf8: update.fields, at: base + 6)
        }
        try statement.step(bindingInPlace: texts)
        guard connection.changes == count else {
            throw StratusError(.internalError, "\(count) updated records were to be moved, but \(connection.changes) rows were")
        }
        pendingUpdates.removeAll(keepingCapacity: true)
        pendingUpdatedNames.removeAll(keepingCapacity: true)
    }

    /// Removes the rows ``deleteRecord(_:)`` deleted from `records`, in one statement.
    private func applyPendingDeletions() throws {
        guard !pendingRowDeletions.isEmpty else { return }
        let count = pendingRowDeletions.count
        let delete = try deleteStatements.statement(rows: count, on: connection) { rows in
            "DELETE FROM records WHERE change_key IN (" + Self.list(of: "?", count: rows) + ")"
        }
        delete.resetKeepingBindings()   // every parameter is bound below
        for (offset, changeKey) in pendingRowDeletions.enumerated() {
            try delete.bind(changeKey, at: Int32(offset + 1))
        }
        try delete.step()
        guard connection.changes == count else {
            throw StratusError(.internalError, "\(count) deleted records were to be removed, but \(connection.changes) rows were")
        }
        pendingRowDeletions.removeAll(keepingCapacity: true)
        pendingDeletedNames.removeAll(keepingCapacity: true)
    }
}

extension SQLiteEngine {
    @_spi(StratusEngine)
    public func jobProgress(_ job: String) throws -> Int64? {
        try readTransaction { connection in
            let select = try connection.statement("SELECT position FROM job_progress WHERE job = ?")
            try select.bind([.text(job)])
            defer { select.reset() }
            return try select.step() ? select.int64(0) : nil
        }
    }

    @_spi(StratusEngine)
    public func jobProgressText(_ job: String) throws -> String? {
        try readTransaction { connection in
            let select = try connection.statement("SELECT position_text FROM job_progress WHERE job = ?")
            try select.bind([.text(job)])
            defer { select.reset() }
            return try select.step() ? select.text(0) : nil
        }
    }

    @_spi(StratusEngine)
    public func removeJobProgress(_ job: String) throws {
        try writeTransaction { connection in
            let delete = try connection.statement("DELETE FROM job_progress WHERE job = ?")
            try delete.bind([.text(job)])
            try delete.step()
        }
    }
}
