import Foundation
import Stratus

extension SQLiteEngine {
    public func modifyRecords(_ request: ModifyRequest, in database: DatabaseContext) throws -> ModifyOutcome {
        let now = Date()
        var appliedAtomically = request.isAtomic
        var outcome = try writeTransaction { connection -> ModifyOutcome in
            var writer = ZoneWriter(engine: self, connection: connection, context: database, now: now, returnsSavedRecords: request.returnsSavedRecords)
            var outcome = ModifyOutcome()
            // Parents in the request are saved before their children, so that a child's parent
            // check sees whether its parent's save succeeded; results stay in request order.
            let records = request.recordsToSave
            let order = Record.parentsFirst(records)
            if order.elementsEqual(records.indices) {
                outcome.saveResults.reserveCapacity(records.count)
                var next = records.startIndex
                while next < records.endIndex {
                    next += try writer.saveRun(records[next...], mode: request.writeMode, preservingSystemFields: request.preservesSystemFields, into: &outcome.saveResults)
                }
            } else {
                var results = [Result<(Record, RecordWriteKind), StratusError>?](repeating: nil, count: records.count)
                var one: [Result<(Record, RecordWriteKind), StratusError>] = []
                for index in order {
                    one.removeAll(keepingCapacity: true)
                    _ = try writer.saveRun(records[index...index], mode: request.writeMode, preservingSystemFields: request.preservesSystemFields, into: &one)
                    results[index] = one[0]
                }
                outcome.saveResults = results.map { $0! }
            }
            for id in request.recordIDsToDelete {
                outcome.deleteResults.append(try writer.delete(id, cascade: &outcome.cascadeDeletedIDs))
            }
            try writer.storeChangeSequences()
            appliedAtomically = request.isAtomic && writer.touchedZonesAreAtomic
            if appliedAtomically && outcome.hasFailure {
                throw AtomicFailure(outcome: outcome)
            }
            return outcome
        } catchingAtomic: { $0 }
        if appliedAtomically && outcome.hasFailure { outcome.markOthersBatchFailed(request) }
        compactIfDue()
        return outcome
    }

    /// Like ``writeTransaction(_:)``, but an ``AtomicFailure`` rolls back and still answers.
    fileprivate func writeTransaction(_ body: (SQLiteConnection) throws -> ModifyOutcome, catchingAtomic: (ModifyOutcome) -> ModifyOutcome) throws -> ModifyOutcome {
        do {
            return try writeTransaction(body)
        } catch let failure as AtomicFailure {
            return catchingAtomic(failure.outcome)
        }
    }
}

/// Thrown inside a transaction to roll back an atomic request that had an item failure.
private struct AtomicFailure: Error {
    let outcome: ModifyOutcome
}

extension ModifyOutcome {
    var hasFailure: Bool {
        saveResults.contains { if case .failure = $0 { true } else { false } }
            || deleteResults.contains { if case .failure = $0 { true } else { false } }
    }

    /// After an atomic rollback, items that had succeeded report `batchRequestFailed`.
    mutating func markOthersBatchFailed(_ request: ModifyRequest) {
        func failed(_ id: Record.ID) -> StratusError {
            StratusError(.batchRequestFailed, "record '\(id.recordName)' was not written because another item of the atomic request failed", recordID: id)
        }
        for (index, result) in saveResults.enumerated() {
            if case .success = result { saveResults[index] = .failure(failed(request.recordsToSave[index].recordID)) }
        }
        for (index, result) in deleteResults.enumerated() {
            if case .success = result { deleteResults[index] = .failure(failed(request.recordIDsToDelete[index])) }
        }
        cascadeDeletedIDs = []
    }
}

/// Writes records inside one transaction, numbering each change in its zone's sequence.
struct ZoneWriter {
    let engine: SQLiteEngine
    let connection: SQLiteConnection
    let context: DatabaseContext
    let now: Date
    /// The zones this transaction touched, each loaded once: found by ID through
    /// `zoneIndexes`, or without hashing through `lastZone` (batches nearly always stay in
    /// one zone), and by row with a scan of the few there are.
    private var zones: [ZoneState] = []
    private var zoneIndexes: [RecordZone.ID: Int] = [:]
    private var lastZone: (id: RecordZone.ID, index: Int)?
    /// Searchable fields per record type, read once per transaction; the last type's without hashing.
    private var searchable: [String: [String]] = [:]
    private var lastSearchable: (recordType: String, fields: [String])?

    private struct ZoneState {
        let row: Int64
        var sequence: Int64
        let capabilities: RecordZone.Capabilities
        var changed: Bool
        /// Whether the zone has any record tombstone (nil until asked). A new record in a zone
        /// without any has none to clear, which spares bulk imports a delete per record.
        var hasTombstones: Bool?

        mutating func bumpSequence() -> Int64 {
            sequence += 1
            changed = true
            return sequence
        }
    }

    private mutating func zoneHasTombstones(_ zoneRow: Int64) throws -> Bool {
        guard let index = zones.firstIndex(where: { $0.row == zoneRow }) else { return true }
        if let known = zones[index].hasTombstones { return known }
        let probe = try connection.statement("SELECT 1 FROM tombstones WHERE zone_id = ? LIMIT 1")
        try probe.bind([.integer(zoneRow)])
        let found = try probe.step()
        probe.reset()
        zones[index].hasTombstones = found
        return found
    }

    /// The record upsert, prepared once per transaction, and the buffer each field document is
    /// encoded into: the per-record work of a large import.
    private var upsert: SQLiteStatement?
    /// The multi-row inserts by number of rows, and the run being written.
    private var insertStatements: [SQLiteStatement?] = []
    private var run: [NewRecord] = []
    private var lastInsertConflicted = false
    private var document: [UInt8] = []
    private var texts = TextArena()

    /// Whether saves answer with the stored record (see ``Stratus/ModifyRequest/returnsSavedRecords``).
    let returnsSavedRecords: Bool

    init(engine: SQLiteEngine, connection: SQLiteConnection, context: DatabaseContext, now: Date, returnsSavedRecords: Bool = true) {
        self.engine = engine
        self.connection = connection
        self.context = context
        self.now = now
        self.returnsSavedRecords = returnsSavedRecords
    }

    /// Saves one record by the general path: read the stored record, apply the save rules,
    /// write. Item failures (a stale tag, a missing zone or asset file) come back as the
    /// result; store failures (busy, disk full) are thrown and abort the transaction.
    mutating func save(_ record: Record, mode: RecordWriteMode, preservingSystemFields: Bool) throws -> Result<(Record, RecordWriteKind), StratusError> {
        guard let zoneRow = try zone(record.recordID.zoneID) else { return .failure(zoneNotFound(record.recordID)) }
        let existing = try engine.loadRecord(record.recordID, zoneRow: zoneRow, on: connection)
        let resolved: Record
        let kind: RecordWriteKind
        switch RecordWriteRules.resolveSave(record, existing: existing, mode: mode, preservingSystemFields: preservingSystemFields, context: context, now: now) {
        case .success(let (r, k)): (resolved, kind) = (r, k)
        case .failure(let error): return .failure(error)
        }
        if kind == .unchanged { return .success((resolved, kind)) }
        let stored: Record
        switch try engine.storeAssets(of: resolved) {
        case .success(let r): stored = r
        case .failure(let error): return .failure(error)
        }
        let fields = stored.fieldValues
        // A new record has the size its validation checked; a merge with stored fields can grow.
        if kind != .created, case let size = Record.fieldDataSize(of: fields), size > Record.maximumFieldDataSize {
            return .failure(StratusError(.limitExceeded, "record '\(record.recordID.recordName)': with the stored fields it keeps, it would hold \(size) bytes of field data; the limit is \(Record.maximumFieldDataSize) bytes (assets excluded)", recordID: record.recordID))
        }
        let parent = stored.parent
        let deleteSelfTargets = Self.deleteSelfTargets(of: fields)
        if let problem = try referenceProblem(stored, parent: parent, deleteSelfTargets: deleteSelfTargets, zoneRow: zoneRow) { return .failure(problem) }
        if upsert == nil {
            upsert = try connection.statement(Self.insertRecord + """
                ON CONFLICT(zone_id, record_name) DO UPDATE SET
                    record_type = excluded.record_type, modified_at = excluded.modified_at, modified_by = excluded.modified_by,
                    change_tag = excluded.change_tag, change_key = excluded.change_key, fields = excluded.fields,
                    parent_name = excluded.parent_name
                """)
        }
        FieldDocument.encode(fields, encryptedKeys: stored.encryptedKeys, into: &document)
        try write(stored.recordID, type: stored.recordType, system: stored.systemFields, document: document, parent: parent,
                  sequence: try nextSequence(record.recordID.zoneID), zoneRow: zoneRow, with: upsert!)
        try finishWrite(of: stored.recordID.recordName, type: stored.recordType, fields: fields, deleteSelfTargets: deleteSelfTargets, zoneRow: zoneRow, isNew: kind == .created)
        return .success((stored, kind))
    }

    /// The most new records one multi-row `INSERT` writes.
    static let maximumRunLength = 32

    /// A record of a run, with what the save rules made of it.
    private struct NewRecord {
        let record: Record
        let resolution: RecordWriteRules.Resolution
    }

    /// Saves records from the start of `records` and appends a result for each it saved;
    /// returns how many that was. Consecutive records that would be new (the save rules
    /// create them, and they have no parent, assets or `.deleteSelf` references, whose checks
    /// and side effects must see the store first) are written together by one multi-row
    /// `INSERT … DO NOTHING` instead of a read and a write each: a large import's common case,
    /// at a fraction of the statements. Any of them that turns out to exist (or to repeat a name
    /// of the run) is then saved by the general path, and so is every record after a conflict
    /// in this transaction, so that re-running an import does not pay for two attempts each.
    mutating func saveRun(_ records: ArraySlice<Record>, mode: RecordWriteMode, preservingSystemFields: Bool,
                          into results: inout [Result<(Record, RecordWriteKind), StratusError>]) throws -> Int {
        let first = records[records.startIndex]
        guard mode != .update && mode != .replace && !lastInsertConflicted, let zone = try zoneIndex(first.recordID.zoneID) else {
            results.append(try save(first, mode: mode, preservingSystemFields: preservingSystemFields))
            return 1
        }
        run.removeAll(keepingCapacity: true)
        for record in records.prefix(Self.maximumRunLength) {
            guard record.recordID.zoneID == first.recordID.zoneID,
                  case .success(let new) = RecordWriteRules.resolve(record, existing: nil, mode: mode, preservingSystemFields: preservingSystemFields, context: context, now: now),
                  new.kind == .created, new.parent == nil, !new.fields.values.contains(where: \.needsStoredRecordFirst) else { break }
            run.append(NewRecord(record: record, resolution: new))
        }
        guard !run.isEmpty else {
            results.append(try save(first, mode: mode, preservingSystemFields: preservingSystemFields))
            return 1
        }
        let zoneRow = zones[zone].row
        let base = zones[zone].sequence
        guard base + Int64(run.count) <= SQLiteSchema.maximumSequence else { throw Self.sequenceExhausted(first.recordID.zoneID) }
        let statement = try insertStatement(rows: run.count)
        statement.resetKeepingBindings()   // every parameter is bound below
        texts.removeAll()
        for (offset, new) in run.enumerated() {
            // A new record stores exactly the incoming fields, so the document its validation
            // prepared (usually on the producer's thread) is the one to write.
            assert(new.resolution.fields == new.record.fieldValues && new.resolution.encryptedKeys == new.record.encryptedKeys, "a created record stores the incoming fields")
            try bindRow(new.record.recordID, type: new.record.recordType, system: new.resolution.systemFields, document: new.record.encodedFieldDocument(),
                        sequence: base + Int64(offset) + 1, zoneRow: zoneRow, at: Int32(offset * Self.parametersPerNewRow), to: statement)
        }
        try statement.step(bindingInPlace: texts)
        let inserted = connection.changes
        if inserted > 0 {
            // The run's change numbers are taken, also those of rows that were not inserted.
            zones[zone].sequence += Int64(run.count)
            zones[zone].changed = true
        }
        let allInserted = inserted == run.count
        if !allInserted { lastInsertConflicted = true }
        for (offset, new) in run.enumerated() {
            let record = new.record
            if try allInserted || storedChangeKey(of: record.recordID.recordName, zoneRow: zoneRow) == SQLiteSchema.changeKey(zoneRow: zoneRow, sequence: base + Int64(offset) + 1) {
                try finishWrite(of: record.recordID.recordName, type: record.recordType, fields: new.resolution.fields, deleteSelfTargets: [], zoneRow: zoneRow, isNew: true)
                results.append(.success((returnsSavedRecords ? new.resolution.record(for: record) : record, .created)))
            } else {
                results.append(try save(record, mode: mode, preservingSystemFields: preservingSystemFields))
            }
        }
        return run.count
    }

    /// The change key of the stored record named `name`, if there is one.
    private func storedChangeKey(of name: String, zoneRow: Int64) throws -> Int64? {
        let select = try connection.statement("SELECT change_key FROM records WHERE zone_id = ? AND record_name = ?")
        try select.bind([.integer(zoneRow), .text(name)])
        defer { select.reset() }
        return try select.step() ? select.int64(0) : nil
    }

    /// Parameters of one row of the multi-row insert: every column of ``insertRecord`` but
    /// the parent, which a new record of a run does not have.
    private static let parametersPerNewRow = 10

    /// `INSERT … VALUES (…), (…) … ON CONFLICT DO NOTHING` for `rows` new records, prepared once
    /// per transaction for each length.
    private mutating func insertStatement(rows: Int) throws -> SQLiteStatement {
        if insertStatements.isEmpty { insertStatements = Array(repeating: nil, count: Self.maximumRunLength + 1) }
        if let known = insertStatements[rows] { return known }
        let row = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)"
        let statement = try connection.statement(Self.insertColumns + " VALUES " + Array(repeating: row, count: rows).joined(separator: ", ")
                                                  + " ON CONFLICT(zone_id, record_name) DO NOTHING")
        insertStatements[rows] = statement
        return statement
    }

    /// Every column of a record's row, in the order ``bindRow(_:type:system:document:sequence:zoneRow:at:to:)`` binds them, parent last.
    private static let insertColumns = "INSERT INTO records(zone_id, record_name, record_type, created_at, created_by, modified_at, modified_by, change_tag, change_key, fields, parent_name)"
    private static let insertRecord = insertColumns + " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)\n"

    /// Binds a record's row and field document to `statement` (``insertRecord`` with a conflict
    /// clause) and runs it. The texts are bound in place from `texts`, reused from record to record.
    private mutating func write(_ id: Record.ID, type: String, system: Record.SystemFields, document: [UInt8], parent: Record.Reference?,
                                sequence: Int64, zoneRow: Int64, with statement: SQLiteStatement) throws {
        statement.resetKeepingBindings()   // every column is bound below
        texts.removeAll()
        try bindRow(id, type: type, system: system, document: document, sequence: sequence, zoneRow: zoneRow, at: 0, to: statement)
        if let parent { texts.add(parent.recordID.recordName, at: 11) } else { try statement.bind(.null, at: 11) }
        try statement.step(bindingInPlace: texts)
    }

    /// Binds a row's columns but the parent to the parameters after `offset`: numbers now,
    /// texts into `texts` for ``SQLiteStatement/step(bindingInPlace:)``. Column by column: an
    /// array of values per record costs more than the binding.
    private mutating func bindRow(_ id: Record.ID, type: String, system: Record.SystemFields, document: [UInt8],
                                  sequence: Int64, zoneRow: Int64, at offset: Int32, to statement: SQLiteStatement) throws {
        try statement.bind(zoneRow, at: offset + 1)
        texts.add(id.recordName, at: offset + 2)
        texts.add(type, at: offset + 3)
        try statement.bind(.real(system.creationDate!.timeIntervalSinceReferenceDate), at: offset + 4)
        texts.add(system.creatorUserRecordID!.recordName, at: offset + 5)
        try statement.bind(.real(system.modificationDate!.timeIntervalSinceReferenceDate), at: offset + 6)
        texts.add(system.lastModifiedUserRecordID!.recordName, at: offset + 7)
        texts.add(system.recordChangeTag!, at: offset + 8)
        try statement.bind(SQLiteSchema.changeKey(zoneRow: zoneRow, sequence: sequence), at: offset + 9)
        texts.add(utf8: document, at: offset + 10)
    }

    /// What follows writing a record's row: its references, words and tombstone.
    private mutating func finishWrite(of name: String, type: String, fields: [String: FieldValue], deleteSelfTargets: Set<String>, zoneRow: Int64, isNew: Bool) throws {
        try replaceReferences(of: name, targets: deleteSelfTargets, zoneRow: zoneRow, isNew: isNew)
        let searchable = try searchableFields(of: type)
        if !searchable.isEmpty {
            try engine.replaceTokens(zoneRow: zoneRow, recordName: name, fields: fields, searchable: searchable, on: connection)
        }
        if try !isNew || zoneHasTombstones(zoneRow) {
            let clearTombstone = try connection.statement("DELETE FROM tombstones WHERE zone_id = ? AND record_name = ?")
            try clearTombstone.bind([.integer(zoneRow), .text(name)])
            try clearTombstone.step()
        }
    }

    /// Deletes one record (a missing record is not an error) and cascades `.deleteSelf`
    /// references through chains, in this transaction.
    mutating func delete(_ id: Record.ID, cascade: inout [Record.ID]) throws -> Result<Void, StratusError> {
        guard let zoneRow = try zone(id.zoneID) else { return .failure(zoneNotFound(id)) }
        var pending = [id.recordName]
        var seen: Set<String> = []
        while let name = pending.popLast() {
            guard seen.insert(name).inserted else { continue }
            guard try deleteRow(name, zoneRow: zoneRow, zoneID: id.zoneID) else { continue }
            if name != id.recordName { cascade.append(Record.ID(recordName: name, zoneID: id.zoneID)) }
            let sources = try connection.statement("SELECT source_name FROM refs WHERE zone_id = ? AND target_name = ?")
            try sources.bind([.integer(zoneRow), .text(name)])
            while try sources.step() { pending.append(sources.text(0) ?? "") }
        }
        return .success(())
    }

    private func zoneNotFound(_ id: Record.ID) -> StratusError {
        StratusError(.zoneNotFound, "zone '\(id.zoneID.zoneName)' does not exist in the \(context.scope) database", recordID: id, zoneID: id.zoneID)
    }

    /// Writes back each touched zone's change sequence, and notes each changed zone as a
    /// change of its database.
    func storeChangeSequences() throws {
        for zone in zones where zone.changed {
            let update = try connection.statement("UPDATE zones SET change_seq = ? WHERE zone_id = ?")
            try update.bind([.integer(zone.sequence), .integer(zone.row)])
            try update.step()
            try engine.noteDatabaseChange(zoneRow: zone.row, context, on: connection)
        }
    }

    /// Whether every zone the transaction touched has the `atomic` capability, so that an
    /// atomic request is applied atomically (CloudKit applies it item by item elsewhere).
    var touchedZonesAreAtomic: Bool {
        zones.allSatisfy { $0.capabilities.contains(.atomic) }
    }

    private mutating func zone(_ zoneID: RecordZone.ID) throws -> Int64? {
        try zoneIndex(zoneID).map { zones[$0].row }
    }

    /// The index in `zones` of a zone, loading it (and creating the default zone) on first use.
    private mutating func zoneIndex(_ zoneID: RecordZone.ID) throws -> Int? {
        if let last = lastZone, last.id == zoneID { return last.index }
        if let known = zoneIndexes[zoneID] {
            lastZone = (zoneID, known)
            return known
        }
        guard let row = try engine.zoneRowID(zoneID, context, on: connection, createDefault: true) else { return nil }
        let select = try connection.statement("SELECT z.change_seq, s.capabilities FROM zones z JOIN zone_state s ON s.zone_id = z.zone_id WHERE z.zone_id = ?")
        try select.bind([.integer(row)])
        guard try select.step() else { throw StratusError(.badDatabase, "zone '\(zoneID.zoneName)' has no change state; the store was not created by this version of Stratus") }
        zones.append(ZoneState(row: row, sequence: select.int64(0), capabilities: RecordZone.Capabilities(rawValue: Int(select.int64(1))), changed: false))
        select.reset()
        zoneIndexes[zoneID] = zones.count - 1
        lastZone = (zoneID, zones.count - 1)
        return zones.count - 1
    }

    private mutating func searchableFields(of recordType: String) throws -> [String] {
        if let last = lastSearchable, last.recordType == recordType { return last.fields }
        let fields = try searchable[recordType] ?? engine.searchableFields(recordType, containerIdentifier: context.containerIdentifier, on: connection)
        searchable[recordType] = fields
        lastSearchable = (recordType, fields)
        return fields
    }

    private mutating func nextSequence(_ zoneID: RecordZone.ID) throws -> Int64 {
        // Runs for every record of an import: the zone is nearly always the last one.
        let sequence = zones[try zoneIndex(zoneID)!].bumpSequence()
        guard sequence <= SQLiteSchema.maximumSequence else { throw Self.sequenceExhausted(zoneID) }
        return sequence
    }

    private static func sequenceExhausted(_ zoneID: RecordZone.ID) -> StratusError {
        StratusError(.limitExceeded, "zone '\(zoneID.zoneName)' has used all \(SQLiteSchema.maximumSequence) change numbers a zone has; copy its records into a new zone", zoneID: zoneID)
    }

    private mutating func deleteRow(_ name: String, zoneRow: Int64, zoneID: RecordZone.ID) throws -> Bool {
        let select = try connection.statement("SELECT record_type FROM records WHERE zone_id = ? AND record_name = ?")
        try select.bind([.integer(zoneRow), .text(name)])
        guard try select.step(), let type = select.text(0) else { return false }
        select.reset()
        let delete = try connection.statement("DELETE FROM records WHERE zone_id = ? AND record_name = ?")
        try delete.bind([.integer(zoneRow), .text(name)])
        try delete.step()
        let refs = try connection.statement("DELETE FROM refs WHERE zone_id = ? AND source_name = ?")
        try refs.bind([.integer(zoneRow), .text(name)])
        try refs.step()
        let tokens = try connection.statement("DELETE FROM record_tokens WHERE zone_id = ? AND record_name = ?")
        try tokens.bind([.integer(zoneRow), .text(name)])
        try tokens.step()
        if let index = zones.firstIndex(where: { $0.row == zoneRow }) { zones[index].hasTombstones = true }
        let tombstone = try connection.statement("INSERT OR REPLACE INTO tombstones(zone_id, record_name, record_type, change_seq, deleted_at) VALUES (?, ?, ?, ?, ?)")
        try tombstone.bind([.integer(zoneRow), .text(name), .text(type), .integer(try nextSequence(zoneID)), .real(now.timeIntervalSinceReferenceDate)])
        try tombstone.step()
        return true
    }

    /// How many `.deleteSelf` references may point at one record (CloudKit's limit).
    static let maximumDeleteSelfReferences = 750

    /// A parent that does not exist (and is not saved in this request) is a
    /// `referenceViolation`; a record that would get more than 750 `.deleteSelf` references is
    /// `limitExceeded`. Checked before anything of the record is written.
    private func referenceProblem(_ record: Record, parent: Record.Reference?, deleteSelfTargets: Set<String>, zoneRow: Int64) throws -> StratusError? {
        if let parent = parent?.recordID.recordName {
            let exists = try connection.statement("SELECT 1 FROM records WHERE zone_id = ? AND record_name = ?")
            try exists.bind([.integer(zoneRow), .text(parent)])
            let found = try exists.step()
            exists.reset()
            if !found {
                return StratusError(.referenceViolation, "record '\(record.recordID.recordName)': its parent '\(parent)' does not exist in \(record.recordID.zoneID.zoneName) (nor was it saved by this request); save the parent first or in the same request", recordID: record.recordID)
            }
        }
        for target in deleteSelfTargets {
            let count = try connection.statement("SELECT count(*) FROM refs WHERE zone_id = ? AND target_name = ? AND source_name != ?")
            try count.bind([.integer(zoneRow), .text(target), .text(record.recordID.recordName)])
            _ = try count.step()
            let existing = count.int64(0)
            count.reset()
            if existing >= Self.maximumDeleteSelfReferences {
                return StratusError(.limitExceeded, "record '\(record.recordID.recordName)': record '\(target)' already has \(existing) .deleteSelf references; the limit is \(Self.maximumDeleteSelfReferences)", recordID: record.recordID)
            }
        }
        return nil
    }

    static func deleteSelfTargets(of fields: [String: FieldValue]) -> Set<String> {
        var targets: Set<String> = []
        for value in fields.values {
            switch value {
            case .reference(let r) where r.action == .deleteSelf: targets.insert(r.recordID.recordName)
            case .referenceList(let list): for r in list where r.action == .deleteSelf { targets.insert(r.recordID.recordName) }
            default: break
            }
        }
        return targets
    }

    private func replaceReferences(of recordName: String, targets: Set<String>, zoneRow: Int64, isNew: Bool) throws {
        if !isNew {
            let clear = try connection.statement("DELETE FROM refs WHERE zone_id = ? AND source_name = ?")
            try clear.bind([.integer(zoneRow), .text(recordName)])
            try clear.step()
        }
        guard !targets.isEmpty else { return }
        let insert = try connection.statement("INSERT OR IGNORE INTO refs(zone_id, target_name, source_name) VALUES (?, ?, ?)")
        for target in targets {
            insert.reset()
            try insert.bind([.integer(zoneRow), .text(target), .text(recordName)])
            try insert.step()
        }
    }
}

private extension FieldValue {
    /// Whether saving the value stores asset bytes or `.deleteSelf` references.
    var needsStoredRecordFirst: Bool {
        switch self {
        case .asset, .assetList: true
        case .reference(let r): r.action == .deleteSelf
        case .referenceList(let list): list.contains { $0.action == .deleteSelf }
        default: false
        }
    }
}
