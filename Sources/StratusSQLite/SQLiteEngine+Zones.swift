import Foundation
@_spi(StratusEngine) import Stratus
import StratusSQL

extension SQLiteEngine {
    @_spi(StratusEngine) public func fetchZones(in database: DatabaseContext) throws -> [RecordZone] {
        // The shared database's own rows hold no zones: the core reaches owners' shared zones
        // through contexts that name the owner (DatabaseContext.sharedOwner).
        if database.scope == .shared && database.sharedOwner == nil { return [] }
        return try readTransaction { connection in
            let select = try connection.statement("""
                SELECT z.zone_name, z.zone_owner, s.capabilities FROM zones z JOIN zone_state s ON s.zone_id = z.zone_id
                WHERE z.container = ? AND z.db = ? AND z.owner = ? ORDER BY z.zone_name, z.zone_owner
                """)
            try select.bind(Self.databaseKey(database))
            var zones: [RecordZone] = []
            while try select.step() {
                let id = Self.zoneID(name: select.text(0) ?? "", owner: select.text(1) ?? "")
                zones.append(RecordZone(zoneID: id, capabilities: RecordZone.Capabilities(rawValue: UInt(truncatingIfNeeded: select.int64(2)))))
            }
            if !zones.contains(where: { $0.zoneID.isDefault }) { zones.insert(.default, at: 0) }
            return zones
        }
    }

    @_spi(StratusEngine) public func fetchZones(_ zoneIDs: [RecordZone.ID], in database: DatabaseContext) throws -> [RecordZone] {
        if database.scope == .shared && database.sharedOwner == nil { return [] }
        return try readTransaction { connection in
            let select = try connection.statement("""
                SELECT s.capabilities FROM zones z JOIN zone_state s ON s.zone_id = z.zone_id
                WHERE z.container = ? AND z.db = ? AND z.owner = ? AND z.zone_name = ? AND z.zone_owner = ?
                """)
            var zones: [RecordZone] = []
            for id in Set(zoneIDs.map(database.canonical)) {
                select.reset()
                try select.bind(Self.databaseKey(database) + [.text(id.zoneName), .text(Self.zoneOwner(id, database))])
                if try select.step() {
                    zones.append(RecordZone(zoneID: id, capabilities: RecordZone.Capabilities(rawValue: UInt(truncatingIfNeeded: select.int64(0)))))
                } else if id.isDefault {
                    zones.append(.default)
                }
            }
            select.reset()
            return zones
        }
    }

    @_spi(StratusEngine) public func modifyZones(
        saving zones: [RecordZone], deleting zoneIDs: [RecordZone.ID], in database: DatabaseContext,
        notify: (_ outcome: ZoneModifyOutcome, _ transaction: any RecordWriteTransaction) throws -> Void
    ) throws -> ZoneModifyOutcome {
        let outcome = try writeTransaction { connection -> ZoneModifyOutcome in
            var outcome = ZoneModifyOutcome()
            for zone in zones {
                outcome.saveResults[zone.zoneID] = .success(try saveZone(zone, database, on: connection))
            }
            for zoneID in zoneIDs {
                outcome.deleteResults[zoneID] = try deleteZone(zoneID, database, on: connection)
            }
            try notify(outcome, SQLiteWriteTransaction(engine: self, connection: connection, context: database, now: Date()))
            // The zones' shares went with their records: a zone made again under the name shares nothing.
            if database.storageScope == .private {
                for zoneID in zoneIDs where Self.zoneOwner(zoneID, database).isEmpty {
                    guard case .success = outcome.deleteResults[zoneID] else { continue }
                    for table in ["share_index", "share_members"] {
                        let delete = try connection.statement("DELETE FROM \(table) WHERE container = ? AND owner = ? AND zone_name = ?")
                        try delete.bind([.text(database.storageContainer), .text(database.storageOwner), .text(zoneID.zoneName)])
                        try delete.step()
                    }
                }
            }
            return outcome
        }
        compactIfDue()
        return outcome
    }

    /// Creates the zone unless it exists; answers it as stored.
    private func saveZone(_ zone: RecordZone, _ database: DatabaseContext, on connection: SQLiteConnection) throws -> RecordZone {
        if let existing = try zoneHistory(zone.zoneID, database, on: connection) {
            return RecordZone(zoneID: zone.zoneID, capabilities: existing.capabilities)
        }
        let row = try insertZone(zone.zoneID, capabilities: zone.capabilities, database, on: connection)
        try noteDatabaseChange(zoneRow: row, database, on: connection)
        return zone
    }

    private func deleteZone(_ zoneID: RecordZone.ID, _ database: DatabaseContext, on connection: SQLiteConnection) throws -> Result<Void, StratusError> {
        guard let zone = try zoneHistory(zoneID, database, on: connection) else {
            return .failure(StratusError.zoneNotFound(zoneID, in: database))
        }
        // Every table keyed by zone_id must be cleared here; zone rows are never reused, so a
        // leftover row could never surface in another zone, but it would waste space.
        for table in ["refs", "asset_refs", "records", "tombstones", "hierarchy_moves", "zone_state", "zones"] {
            let delete = try connection.statement("DELETE FROM \(table) WHERE zone_id = ?")
            try delete.bind([.integer(zone.row)])
            try delete.step()
        }
        let sequence = try noteDatabaseChange(zoneRow: nil, database, on: connection)
        let tombstone = try connection.statement("""
            INSERT OR REPLACE INTO zone_tombstones(container, db, owner, zone_name, zone_owner, db_change_seq, deleted_at)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            """)
        try tombstone.bind(Self.databaseKey(database) + [.text(zoneID.zoneName), .text(Self.zoneOwner(zoneID, database)), .integer(sequence), .real(Date().timeIntervalSinceReferenceDate)])
        try tombstone.step()
        return .success(())
    }

    // MARK: - Zone rows

    /// Inserts a zone row and its change state. Zone row IDs are never reused, even after a
    /// zone is deleted, so that nothing keyed by an old row can reappear in a new zone and a
    /// zone's row ID names one life of it.
    func insertZone(_ zoneID: RecordZone.ID, capabilities: RecordZone.Capabilities, _ database: DatabaseContext, on connection: SQLiteConnection) throws -> Int64 {
        let allocate = try connection.statement("""
            UPDATE store_info SET last_zone_id = max(last_zone_id, (SELECT coalesce(max(zone_id), 0) FROM zones)) + 1
            WHERE id = 1 RETURNING last_zone_id
            """)
        guard try allocate.step() else { throw StratusError(.badDatabase, "the store has no store_info row; it was not created by this version of Stratus") }
        let row = allocate.int64(0)
        allocate.reset()
        guard row <= SQLiteSchema.maximumZoneRow else {
            throw StratusError(.limitExceeded, "this store has created \(SQLiteSchema.maximumZoneRow) zones over its life, the most it can; move the container to a new store", zoneID: zoneID)
        }
        let insert = try connection.statement("INSERT INTO zones(zone_id, container, db, owner, zone_name, zone_owner, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)")
        try insert.bind([.integer(row)] + Self.databaseKey(database) + [.text(zoneID.zoneName), .text(Self.zoneOwner(zoneID, database)), .real(Date().timeIntervalSinceReferenceDate)])
        try insert.step()
        let state = try connection.statement("INSERT INTO zone_state(zone_id, capabilities) VALUES (?, ?)")
        try state.bind([.integer(row), .integer(Int64(truncatingIfNeeded: capabilities.rawValue))])
        try state.step()
        return row
    }

    /// A zone's row and where its change history stands.
    struct ZoneHistory {
        var row: Int64
        /// The last change sequence value taken.
        var sequence: Int64
        var capabilities: RecordZone.Capabilities
        /// Positions before this lost tombstones to compaction.
        var start: Int64
    }

    func zoneHistory(_ zoneID: RecordZone.ID, _ database: DatabaseContext, on connection: SQLiteConnection) throws -> ZoneHistory? {
        let select = try connection.statement("""
            SELECT z.zone_id, z.change_seq, s.capabilities, s.history_start FROM zones z JOIN zone_state s ON s.zone_id = z.zone_id
            WHERE z.container = ? AND z.db = ? AND z.owner = ? AND z.zone_name = ? AND z.zone_owner = ?
            """)
        try select.bind(Self.databaseKey(database) + [.text(zoneID.zoneName), .text(Self.zoneOwner(zoneID, database))])
        guard try select.step() else { return nil }
        let history = ZoneHistory(row: select.int64(0), sequence: select.int64(1), capabilities: RecordZone.Capabilities(rawValue: UInt(truncatingIfNeeded: select.int64(2))), start: select.int64(3))
        select.reset()
        return history
    }

    /// Takes the next value of the database's change sequence and, for a zone that changed,
    /// marks the zone with it. Returns the value.
    @discardableResult
    func noteDatabaseChange(zoneRow: Int64?, _ database: DatabaseContext, on connection: SQLiteConnection) throws -> Int64 {
        let bump = try connection.statement("""
            INSERT INTO database_history(container, db, owner, change_seq) VALUES (?, ?, ?, 1)
            ON CONFLICT(container, db, owner) DO UPDATE SET change_seq = change_seq + 1 RETURNING change_seq
            """)
        try bump.bind(Self.databaseKey(database))
        guard try bump.step() else { throw StratusError(.internalError, "taking the database's next change number returned no row") }
        let sequence = bump.int64(0)
        bump.reset()
        if let zoneRow {
            let mark = try connection.statement("UPDATE zone_state SET db_change_seq = ? WHERE zone_id = ?")
            try mark.bind([.integer(sequence), .integer(zoneRow)])
            try mark.step()
        }
        return sequence
    }

    /// The key columns (container, db, owner) of a database's rows.
    static func databaseKey(_ database: DatabaseContext) -> [SQLValue] {
        [.text(database.storageContainer), .integer(Int64(database.storageScope.rawValue)), .text(database.storageOwner)]
    }

    /// A zone ID as the store keeps it: the database user's own zones have an empty owner.
    static func zoneID(name: String, owner: String) -> RecordZone.ID {
        RecordZone.ID(zoneName: name, ownerName: owner.isEmpty ? RecordZone.ID.currentUserDefaultOwner : owner)
    }
}
