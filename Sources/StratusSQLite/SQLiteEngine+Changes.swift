import Foundation
@_spi(StratusEngine) import Stratus
import StratusSQL
import Synchronization

extension SQLiteEngine {
    @_spi(StratusEngine) public func fetchZoneChanges(_ request: ZoneChangesRequest, in database: DatabaseContext) throws -> ZoneChangeBatch {
        precondition(request.limit > 0, "fetchZoneChanges needs a positive limit")
        return try readTransaction { connection in
            guard let zone = try zoneHistory(request.zoneID, database, on: connection) else {
                return try ChangeHistoryRules.historyOfMissingZone(request, in: database, store: try storeIdentity(on: connection))
            }
            try ChangeHistoryRules.requireHistory(of: request.zoneID, capabilities: zone.capabilities)
            let incarnation = try zoneIncarnation(zone.row, on: connection)
            let after = try ChangeHistoryRules.sequence(after: request.position, incarnation: incarnation, current: zone.sequence, start: zone.start, of: "zone '\(request.zoneID.zoneName)'")
            let end = ChangeHistoryRules.end(of: request, current: zone.sequence, after: after)

            // Two index-ordered reads, each bounded, then a merge: a large backlog costs no
            // more per batch than a small one.
            var changes: [(sequence: Int64, change: ZoneChangeBatch.Change)] = []
            // A zone's rows are the range of change keys with its row in the high bits.
            let records = try connection.statement("SELECT \(SQLiteSchema.recordColumns), r.change_key FROM records r WHERE r.change_key > ? AND r.change_key <= ? ORDER BY r.change_key LIMIT ?")
            try records.bind([.integer(SQLiteSchema.changeKey(zoneRow: zone.row, sequence: after)), .integer(SQLiteSchema.changeKey(zoneRow: zone.row, sequence: end)),
                              .integer(Int64(request.limit) + 1)])
            while try records.step() {
                let record = try decodeRecord(records, zoneID: request.zoneID).restricted(to: request.desiredKeys)
                changes.append((records.int64(SQLiteSchema.recordColumnCount) & SQLiteSchema.maximumSequence, .changed(record)))
            }
            let tombstones = try connection.statement("SELECT record_name, record_type, change_seq, left_roots FROM tombstones WHERE zone_id = ? AND change_seq > ? AND change_seq <= ? ORDER BY change_seq LIMIT ?")
            try tombstones.bind([.integer(zone.row), .integer(after), .integer(end), .integer(Int64(request.limit) + 1)])
            var deletedRecordRoots: [String: Set<String>] = [:]
            while try tombstones.step() {
                let id = Record.ID(recordName: tombstones.text(0) ?? "", zoneID: request.zoneID)
                changes.append((tombstones.int64(2), .deleted(id, recordType: tombstones.text(1) ?? "")))
                if request.includesHierarchyMoves, let roots = tombstones.text(3) { deletedRecordRoots[id.recordName] = HierarchyMove.roots(decoding: roots) }
            }
            var moves: [(sequence: Int64, move: HierarchyMove)] = []
            if request.includesHierarchyMoves {
                let select = try connection.statement("""
                    SELECT record_name, record_type, change_seq, left_roots FROM hierarchy_moves WHERE zone_id = ? AND change_seq > ? AND change_seq <= ?
                    ORDER BY change_seq LIMIT ?
                    """)
                try select.bind([.integer(zone.row), .integer(after), .integer(end), .integer(Int64(request.limit) + 1)])
                while try select.step() {
                    let id = Record.ID(recordName: select.text(0) ?? "", zoneID: request.zoneID)
                    moves.append((select.int64(2), HierarchyMove(recordID: id, recordType: select.text(1) ?? "", leftRoots: HierarchyMove.roots(decoding: select.text(3)))))
                }
            }
            return ChangeHistoryRules.zoneBatch(of: changes, moves: moves, deletedRecordRoots: deletedRecordRoots, limit: request.limit, current: end, incarnation: incarnation,
                                                zoneEnd: ChangePosition(incarnation: incarnation, sequence: zone.sequence))
        }
    }

    @_spi(StratusEngine) public func fetchDatabaseChanges(after position: ChangePosition?, limit: Int, in database: DatabaseContext) throws -> DatabaseChangeBatch {
        precondition(limit > 0, "fetchDatabaseChanges needs a positive limit")
        return try readTransaction { connection in
            let incarnation = try storeIdentity(on: connection)
            var current: Int64 = 0, start: Int64 = 0
            let history = try connection.statement("SELECT change_seq, history_start FROM database_history WHERE container = ? AND db = ? AND owner = ?")
            try history.bind(Self.databaseKey(database))
            if try history.step() {
                current = history.int64(0)
                start = history.int64(1)
                history.reset()
            }
            let after = try ChangeHistoryRules.sequence(after: position, incarnation: incarnation, current: current, start: start, of: "the \(database.scope.name) database")

            var changes: [(sequence: Int64, change: DatabaseChangeBatch.Change)] = []
            let changed = try connection.statement("""
                SELECT z.zone_name, z.zone_owner, s.db_change_seq FROM zones z JOIN zone_state s ON s.zone_id = z.zone_id
                WHERE z.container = ? AND z.db = ? AND z.owner = ? AND s.db_change_seq > ? ORDER BY s.db_change_seq LIMIT ?
                """)
            try changed.bind(Self.databaseKey(database) + [.integer(after), .integer(Int64(limit) + 1)])
            while try changed.step() {
                changes.append((changed.int64(2), .zoneChanged(Self.zoneID(name: changed.text(0) ?? "", owner: changed.text(1) ?? ""))))
            }
            let deleted = try connection.statement("""
                SELECT zone_name, zone_owner, db_change_seq FROM zone_tombstones
                WHERE container = ? AND db = ? AND owner = ? AND db_change_seq > ? ORDER BY db_change_seq LIMIT ?
                """)
            try deleted.bind(Self.databaseKey(database) + [.integer(after), .integer(Int64(limit) + 1)])
            while try deleted.step() {
                changes.append((deleted.int64(2), .zoneDeleted(Self.zoneID(name: deleted.text(0) ?? "", owner: deleted.text(1) ?? ""))))
            }
            return ChangeHistoryRules.databaseBatch(of: changes, limit: limit, current: current, incarnation: incarnation)
        }
    }

    /// One life of a zone: zone rows are never reused, and the store identity tells stores apart.
    func zoneIncarnation(_ zoneRow: Int64, on connection: SQLiteConnection) throws -> String {
        ChangeHistoryRules.zoneIncarnation(store: try storeIdentity(on: connection), zoneRow: zoneRow)
    }

    /// The random identity the store got when it was created.
    func storeIdentity(on connection: SQLiteConnection) throws -> String {
        guard let identity = try connection.queryText("SELECT store_uuid FROM store_info WHERE id = 1") else {
            throw StratusError(.badDatabase, "the store has no store_info row; it was not created by this version of Stratus")
        }
        return identity
    }

    // MARK: - Compaction

    @_spi(StratusEngine) public func compactChangeHistory(in database: DatabaseContext, deletedBefore cutoff: Date) throws -> ChangeHistoryCompaction {
        try writeTransaction { connection in try compact(database, deletedBefore: cutoff, on: connection) }
    }

    /// Removes tombstones deleted before `cutoff` (of one database, or of the whole store when
    /// `database` is `nil`), and moves each history's start past the newest one removed.
    func compact(_ database: DatabaseContext?, deletedBefore cutoff: Date, on connection: SQLiteConnection) throws -> ChangeHistoryCompaction {
        var result = ChangeHistoryCompaction()
        let cutoffValue = SQLValue.real(cutoff.timeIntervalSinceReferenceDate)
        let scope = database.map(Self.databaseKey)

        // Hierarchy moves are history as tombstones are: kept as long, and the history starts after them.
        for (table, dated) in [("tombstones", "deleted_at"), ("hierarchy_moves", "moved_at")] {
            let zones = try connection.statement(scope == nil
                ? "SELECT zone_id, max(change_seq), count(*) FROM \(table) WHERE \(dated) < ? GROUP BY zone_id"
                : "SELECT t.zone_id, max(t.change_seq), count(*) FROM \(table) t JOIN zones z ON z.zone_id = t.zone_id WHERE t.\(dated) < ? AND z.container = ? AND z.db = ? AND z.owner = ? GROUP BY t.zone_id")
            try zones.bind([cutoffValue] + (scope ?? []))
            var compacted: [(row: Int64, newest: Int64)] = []
            while try zones.step() {
                compacted.append((zones.int64(0), zones.int64(1)))
                if table == "tombstones" { result.recordTombstonesRemoved += Int(zones.int64(2)) }
            }
            for zone in compacted {
                let advance = try connection.statement("UPDATE zone_state SET history_start = max(history_start, ?) WHERE zone_id = ?")
                try advance.bind([.integer(zone.newest), .integer(zone.row)])
                try advance.step()
                let remove = try connection.statement("DELETE FROM \(table) WHERE zone_id = ? AND \(dated) < ?")
                try remove.bind([.integer(zone.row), cutoffValue])
                try remove.step()
            }
        }

        let databases = try connection.statement(scope == nil
            ? "SELECT container, db, owner, max(db_change_seq), count(*) FROM zone_tombstones WHERE deleted_at < ? GROUP BY container, db, owner"
            : "SELECT container, db, owner, max(db_change_seq), count(*) FROM zone_tombstones WHERE deleted_at < ? AND container = ? AND db = ? AND owner = ? GROUP BY container, db, owner")
        try databases.bind([cutoffValue] + (scope ?? []))
        var compactedDatabases: [(key: [SQLValue], newest: Int64)] = []
        while try databases.step() {
            compactedDatabases.append(([databases.value(0), databases.value(1), databases.value(2)], databases.int64(3)))
            result.zoneTombstonesRemoved += Int(databases.int64(4))
        }
        for entry in compactedDatabases {
            let advance = try connection.statement("UPDATE database_history SET history_start = max(history_start, ?) WHERE container = ? AND db = ? AND owner = ?")
            try advance.bind([.integer(entry.newest)] + entry.key)
            try advance.step()
            let remove = try connection.statement("DELETE FROM zone_tombstones WHERE container = ? AND db = ? AND owner = ? AND deleted_at < ?")
            try remove.bind(entry.key + [cutoffValue])
            try remove.step()
        }
        return result
    }

    /// Compacts the whole store (tombstones and notifications) with ``tombstoneRetention`` when
    /// its ``CompactionSchedule`` says it is due. Called after writes.
    func compactIfDue() {
        guard let cutoff = compaction.takeCutoffIfDue(retention: tombstoneRetention) else { return }
        _ = try? writeTransaction { connection in try compact(nil, deletedBefore: cutoff, on: connection) }
        // Notifications are kept as long as tombstones; their own transaction keeps both short.
        _ = try? writeTransaction { connection in try compactNotifications(createdBefore: cutoff, on: connection) }
    }
}
