import Foundation
@_spi(StratusEngine) import Stratus

extension PostgresEngine {
    @_spi(StratusEngine)
    public func fetchZoneChanges(_ request: ZoneChangesRequest, in database: DatabaseContext) throws -> ZoneChangeBatch {
        precondition(request.limit > 0, "fetchZoneChanges needs a positive limit")
        let batch = try readingStandbyFirst(for: database) { mayLag in try zoneChanges(request, in: database, mayLag: mayLag) }
        try materializeAssets(of: batch.changes.compactMap { if case .changed(let record) = $0 { record } else { nil } }, owner: database.storageOwner)
        return batch
    }

    /// Runs a change read on the standby, when there is one, and again on the primary when the
    /// standby cannot answer it: a token handed out by the primary can be ahead of a lagging
    /// standby, and a zone new on the primary missing there. A standby replays commits in
    /// order, so what it answers is a prefix of the history, never with a change skipped.
    ///
    /// A standby that cannot be reached, or that holds another store, is an error, not a
    /// reason to read the primary: the reads were sent to the standby to spare the primary.
    ///
    /// A context that reads what it writes (``Stratus/DatabaseContext/readsLatestCommits``)
    /// reads the primary: a lagging standby would hide records from an update by query.
    func readingStandbyFirst<T>(for database: DatabaseContext, _ read: (Bool) throws -> T) throws -> T {
        guard readPool !== pool, !database.readsLatestCommits else { return try read(false) }
        try checkStandby()
        do {
            return try read(true)
        } catch let error as StratusError where [.changeTokenExpired, .zoneNotFound].contains(error.code) || error.isTransient {
            return try read(false)
        }
    }

    private func zoneChanges(_ request: ZoneChangesRequest, in database: DatabaseContext, mayLag: Bool) throws -> ZoneChangeBatch {
        try readTransaction(mayLag: mayLag) { connection -> ZoneChangeBatch in
            guard let zone = try zoneHistory(request.zoneID, database, on: connection) else {
                return try ChangeHistoryRules.historyOfMissingZone(request, in: database, store: identity)
            }
            try ChangeHistoryRules.requireHistory(of: request.zoneID, capabilities: zone.capabilities)
            let incarnation = zoneIncarnation(zone.row)
            let after = try ChangeHistoryRules.sequence(after: request.position, incarnation: incarnation, current: zone.sequence, start: zone.start, of: "zone '\(request.zoneID.zoneName)'")
            let end = ChangeHistoryRules.end(of: request, current: zone.sequence, after: after)
            // Two index-ordered reads, each bounded, then a merge: a large backlog costs no
            // more per batch than a small one. Writers of the zone number their changes under
            // the zone's row lock, so this snapshot holds a prefix of the zone's history.
            var changes: [(sequence: Int64, change: ZoneChangeBatch.Change)] = []
            let records = try connection.query("""
                SELECT \(PostgresSchema.recordColumns), r.change_seq FROM records r WHERE r.zone_id = $1 AND r.change_seq > $2 AND r.change_seq <= $3
                ORDER BY r.change_seq LIMIT $4
                """, [.int64(zone.row), .int64(after), .int64(end), .int64(Int64(request.limit) + 1)])
            var recent = PostgresRecentTexts(keepsDocumentShape: true)
            for row in records {
                let record = try decodeRecord(row, zoneID: request.zoneID, recent: &recent).restricted(to: request.desiredKeys)
                changes.append((try row.int64(PostgresSchema.recordColumnCount) ?? 0, .changed(record)))
            }
            let tombstones = try connection.query("""
                SELECT record_name, record_type, change_seq, left_roots::text FROM tombstones WHERE zone_id = $1 AND change_seq > $2 AND change_seq <= $3
                ORDER BY change_seq LIMIT $4
                """, [.int64(zone.row), .int64(after), .int64(end), .int64(Int64(request.limit) + 1)])
            var deletedRecordRoots: [String: Set<String>] = [:]
            for row in tombstones {
                let id = Record.ID(recordName: try row.text(0) ?? "", zoneID: request.zoneID)
                changes.append((try row.int64(2) ?? 0, .deleted(id, recordType: try row.text(1) ?? "")))
                if request.includesHierarchyMoves, let roots = try row.text(3) { deletedRecordRoots[id.recordName] = HierarchyMove.roots(decoding: roots) }
            }
            var moves: [(sequence: Int64, move: HierarchyMove)] = []
            if request.includesHierarchyMoves {
                let rows = try connection.query("""
                    SELECT record_name, record_type, change_seq, left_roots::text FROM hierarchy_moves WHERE zone_id = $1 AND change_seq > $2 AND change_seq <= $3
                    ORDER BY change_seq LIMIT $4
                    """, [.int64(zone.row), .int64(after), .int64(end), .int64(Int64(request.limit) + 1)])
                for row in rows {
                    let id = Record.ID(recordName: try row.text(0) ?? "", zoneID: request.zoneID)
                    moves.append((try row.int64(2) ?? 0, HierarchyMove(recordID: id, recordType: try row.text(1) ?? "", leftRoots: HierarchyMove.roots(decoding: try row.text(3)))))
                }
            }
            return ChangeHistoryRules.zoneBatch(of: changes, moves: moves, deletedRecordRoots: deletedRecordRoots, limit: request.limit, current: end, incarnation: incarnation,
                                                zoneEnd: ChangePosition(incarnation: incarnation, sequence: zone.sequence))
        }
    }

    @_spi(StratusEngine)
    public func fetchDatabaseChanges(after position: ChangePosition?, limit: Int, in database: DatabaseContext) throws -> DatabaseChangeBatch {
        precondition(limit > 0, "fetchDatabaseChanges needs a positive limit")
        return try readingStandbyFirst(for: database) { mayLag in try databaseChanges(after: position, limit: limit, in: database, mayLag: mayLag) }
    }

    private func databaseChanges(after position: ChangePosition?, limit: Int, in database: DatabaseContext, mayLag: Bool) throws -> DatabaseChangeBatch {
        try readTransaction(mayLag: mayLag) { connection in
            var current: Int64 = 0, start: Int64 = 0
            if let row = try connection.query("SELECT change_seq, history_start FROM database_history WHERE container = $1 AND db = $2 AND owner = $3",
                                              Self.databaseKey(database)).first {
                current = try row.int64(0) ?? 0
                start = try row.int64(1) ?? 0
            }
            let after = try ChangeHistoryRules.sequence(after: position, incarnation: identity, current: current, start: start, of: "the \(database.scope.name) database")
            var changes: [(sequence: Int64, change: DatabaseChangeBatch.Change)] = []
            for row in try connection.query("""
                SELECT zone_name, zone_owner, db_change_seq FROM zones WHERE container = $1 AND db = $2 AND owner = $3 AND db_change_seq > $4 AND db_change_seq <= $5
                ORDER BY db_change_seq LIMIT $6
                """, Self.databaseKey(database) + [.int64(after), .int64(current), .int64(Int64(limit) + 1)]) {
                changes.append((try row.int64(2) ?? 0, .zoneChanged(Self.zoneID(name: try row.text(0) ?? "", owner: try row.text(1) ?? ""))))
            }
            for row in try connection.query("""
                SELECT zone_name, zone_owner, db_change_seq FROM zone_tombstones WHERE container = $1 AND db = $2 AND owner = $3 AND db_change_seq > $4 AND db_change_seq <= $5
                ORDER BY db_change_seq LIMIT $6
                """, Self.databaseKey(database) + [.int64(after), .int64(current), .int64(Int64(limit) + 1)]) {
                changes.append((try row.int64(2) ?? 0, .zoneDeleted(Self.zoneID(name: try row.text(0) ?? "", owner: try row.text(1) ?? ""))))
            }
            return ChangeHistoryRules.databaseBatch(of: changes, limit: limit, current: current, incarnation: identity)
        }
    }

    // MARK: - Compaction

    @_spi(StratusEngine)
    public func compactChangeHistory(in database: DatabaseContext, deletedBefore cutoff: Date) throws -> ChangeHistoryCompaction {
        try writeTransaction { connection in try compact(database, deletedBefore: cutoff, on: connection) }
    }

    /// Removes tombstones deleted before `cutoff` (of one database, or of the whole store when
    /// `database` is `nil`), and moves each history's start past the newest one removed.
    func compact(_ database: DatabaseContext?, deletedBefore cutoff: Date, on connection: PostgresConnection) throws -> ChangeHistoryCompaction {
        var result = ChangeHistoryCompaction()
        let cutoffValue = PostgresValue.double(cutoff.timeIntervalSinceReferenceDate)
        let scope = database.map(Self.databaseKey)
        // Hierarchy moves are history as tombstones are: kept as long, and the history starts after them.
        for (table, dated) in [("tombstones", "deleted_at"), ("hierarchy_moves", "moved_at")] {
            let zones = try connection.query(scope == nil
                ? "SELECT zone_id, max(change_seq), count(*) FROM \(table) WHERE \(dated) < $1 GROUP BY zone_id"
                : "SELECT t.zone_id, max(t.change_seq), count(*) FROM \(table) t JOIN zones z ON z.zone_id = t.zone_id WHERE t.\(dated) < $1 AND z.container = $2 AND z.db = $3 AND z.owner = $4 GROUP BY t.zone_id",
                [cutoffValue] + (scope ?? []))
            for row in zones {
                let zoneRow = try row.int64(0) ?? 0
                let newest = try row.int64(1) ?? 0
                try connection.execute("UPDATE zones SET history_start = greatest(history_start, $1) WHERE zone_id = $2", [.int64(newest), .int64(zoneRow)])
                // Only what the history's new start accounts for: a writer that committed since the
                // count (read committed) may have added rows dated before the cutoff.
                let removed = try connection.execute("DELETE FROM \(table) WHERE zone_id = $1 AND \(dated) < $2 AND change_seq <= $3", [.int64(zoneRow), cutoffValue, .int64(newest)])
                if table == "tombstones" { result.recordTombstonesRemoved += removed }
            }
        }
        let databases = try connection.query(scope == nil
            ? "SELECT container, db, owner, max(db_change_seq), count(*) FROM zone_tombstones WHERE deleted_at < $1 GROUP BY container, db, owner"
            : "SELECT container, db, owner, max(db_change_seq), count(*) FROM zone_tombstones WHERE deleted_at < $1 AND container = $2 AND db = $3 AND owner = $4 GROUP BY container, db, owner",
            [cutoffValue] + (scope ?? []))
        for row in databases {
            let key: [PostgresValue] = [.text(try row.text(0) ?? ""), .int64(try row.int64(1) ?? 0), .text(try row.text(2) ?? "")]
            let newest = try row.int64(3) ?? 0
            try connection.execute("UPDATE database_history SET history_start = greatest(history_start, $1) WHERE container = $2 AND db = $3 AND owner = $4",
                                   [.int64(newest)] + key)
            result.zoneTombstonesRemoved += try connection.execute("DELETE FROM zone_tombstones WHERE container = $1 AND db = $2 AND owner = $3 AND deleted_at < $4 AND db_change_seq <= $5",
                                   key + [cutoffValue, .int64(newest)])
        }
        return result
    }

    /// Compacts the whole store (tombstones and notifications) with ``tombstoneRetention`` when
    /// its ``CompactionSchedule`` says it is due. Called after writes.
    func compactIfDue() {
        guard let cutoff = compaction.takeCutoffIfDue(retention: tombstoneRetention) else { return }
        _ = try? writeTransaction { connection in try compact(nil, deletedBefore: cutoff, on: connection) }
        // Notifications are kept as long as tombstones; their own transaction takes no zone lock.
        _ = try? writeTransaction { connection in try compactNotifications(createdBefore: cutoff, on: connection) }
    }

    /// Connects to the standby and, the first time, checks that it holds this store.
    ///
    /// - Throws: `serviceUnavailable` naming the standby when it cannot be reached;
    ///   `invalidArguments` when it holds no Stratus store or another one.
    func checkStandby() throws {
        let checked = standbyChecked.withLock { $0 }
        do {
            try readPool.withConnection { connection in
                guard !checked else { return }
                guard try connection.query("SELECT to_regclass('meta') IS NOT NULL")[0].bool(0) == true else {
                    throw StratusError(.invalidArguments, "the hot standby at \(readPool.redactedURL) holds no Stratus store \(try Self.schemaPhrase(connection)); name a standby of the store at \(redactedURL)")
                }
                let found = try connection.query("SELECT value FROM meta WHERE key = 'identity'").first?.text(0)
                guard found == identity else {
                    throw StratusError(.invalidArguments, "the hot standby at \(readPool.redactedURL) holds another store than the one at \(redactedURL); name a standby of that store")
                }
                standbyChecked.withLock { $0 = true }
            }
        } catch let error as StratusError where error.code == .serviceUnavailable || error.code == .notAuthenticated || error.code == .permissionFailure || error.code == .badContainer {
            var failure = error
            failure.message = "reads that may lag go to the hot standby, which cannot be used: \(error.message)"
            // A standby takes no createdb: it has the databases of its primary, so the URL names the wrong one.
            if error.code == .badContainer, let advice = error.message.range(of: ": a role that may create databases") {
                failure.message = "reads that may lag go to the hot standby, which cannot be used: \(error.message[..<advice.lowerBound]); a standby has the databases of its primary: name the one that holds the store (\(redactedURL))"
            }
            if failure.code == .serviceUnavailable && failure.retryAfterSeconds == nil { failure.retryAfterSeconds = 1 }
            throw failure
        }
    }

    /// `in schema NAME`, for messages.
    static func schemaPhrase(_ connection: PostgresConnection) throws -> String {
        try connection.query("SELECT current_schema()")[0].text(0).map { "in schema \($0)" } ?? "(its search_path names no schema)"
    }
}
