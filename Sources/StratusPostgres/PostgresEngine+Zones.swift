import Foundation
@_spi(StratusEngine) import Stratus

extension PostgresEngine {
    @_spi(StratusEngine)
    public func fetchZones(in database: DatabaseContext) throws -> [RecordZone] {
        // The shared database's own rows hold no zones: the core reaches owners' shared zones
        // through contexts that name the owner (DatabaseContext.sharedOwner).
        if database.scope == .shared && database.sharedOwner == nil { return [] }
        return try readTransaction(mayLag: false) { connection in
            var zones = try connection.query("""
                SELECT zone_name, zone_owner, capabilities FROM zones WHERE container = $1 AND db = $2 AND owner = $3 ORDER BY zone_name, zone_owner
                """, Self.databaseKey(database)).map { row in
                RecordZone(zoneID: Self.zoneID(name: try row.text(0) ?? "", owner: try row.text(1) ?? ""),
                           capabilities: RecordZone.Capabilities(rawValue: UInt(truncatingIfNeeded: try row.int64(2) ?? 0)))
            }
            if !zones.contains(where: { $0.zoneID.isDefault }) { zones.insert(.default, at: 0) }
            return zones
        }
    }

    @_spi(StratusEngine)
    public func fetchZones(_ zoneIDs: [RecordZone.ID], in database: DatabaseContext) throws -> [RecordZone] {
        if database.scope == .shared && database.sharedOwner == nil { return [] }
        let wanted = Array(Set(zoneIDs.map(database.canonical)))
        guard !wanted.isEmpty else { return [] }
        return try readTransaction(mayLag: false) { connection in
            // Planned for the table as it is: a plan cached while `zones` held a few rows reads
            // the database's zones by their change index, every zone per lookup (an import
            // that creates thousands of zones).
            var zones = try connection.query("""
                SELECT z.zone_name, z.zone_owner, z.capabilities FROM zones z
                JOIN unnest($4::text[], $5::text[]) AS w(zone_name, zone_owner) ON w.zone_name = z.zone_name AND w.zone_owner = z.zone_owner
                WHERE z.container = $1 AND z.db = $2 AND z.owner = $3
                """, Self.databaseKey(database) + [.textArray(wanted.map(\.zoneName)), .textArray(wanted.map { Self.zoneOwner($0, database) })], prepare: false).map { row in
                RecordZone(zoneID: Self.zoneID(name: try row.text(0) ?? "", owner: try row.text(1) ?? ""),
                           capabilities: RecordZone.Capabilities(rawValue: UInt(truncatingIfNeeded: try row.int64(2) ?? 0)))
            }
            if wanted.contains(where: \.isDefault) && !zones.contains(where: { $0.zoneID.isDefault }) { zones.append(.default) }
            return zones
        }
    }

    @_spi(StratusEngine)
    public func modifyZones(
        saving zones: [RecordZone], deleting zoneIDs: [RecordZone.ID], in database: DatabaseContext,
        notify: (_ outcome: ZoneModifyOutcome, _ transaction: any RecordWriteTransaction) throws -> Void
    ) throws -> ZoneModifyOutcome {
        let outcome = try writeTransaction { connection -> ZoneModifyOutcome in
            var outcome = ZoneModifyOutcome()
            // The database's change numbers are taken last, after the subscriptions' notices,
            // in the order record writers lock them (zone, then feeds, then the database's
            // history): the other order deadlocked against them.
            var createdZoneRows: [Int64] = []
            var deletedZones: [RecordZone.ID] = []
            var deletedRows: Set<Int64> = []
            for zone in zones {
                // A zone found existing by the insert may be deleted by another writer before it
                // is read (read committed): then it is inserted again.
                var saved: RecordZone?
                for _ in 0..<3 where saved == nil {
                    if try insertZone(zone.zoneID, capabilities: zone.capabilities, database, on: connection),
                       let inserted = try zoneHistory(zone.zoneID, database, on: connection) {
                        createdZoneRows.append(inserted.row)
                        saved = zone
                    } else if let existing = try zoneHistory(zone.zoneID, database, on: connection) {
                        saved = RecordZone(zoneID: zone.zoneID, capabilities: existing.capabilities)
                    }
                }
                guard let saved else {
                    throw StratusError(.zoneBusy, "zone '\(zone.zoneID.zoneName)' was deleted by another writer each time it was saved; try again", zoneID: zone.zoneID)
                }
                outcome.saveResults[zone.zoneID] = .success(saved)
            }
            for zoneID in zoneIDs {
                guard let zone = try zoneHistory(zoneID, database, on: connection, lock: true) else {
                    outcome.deleteResults[zoneID] = .failure(StratusError.zoneNotFound(zoneID, in: database))
                    continue
                }
                for table in ["refs", "record_tokens", "asset_refs", "records", "tombstones", "hierarchy_moves", "zones"] {
                    try connection.execute("DELETE FROM \(table) WHERE zone_id = $1", [.int64(zone.row)])
                }
                deletedZones.append(zoneID)
                deletedRows.insert(zone.row)
                outcome.deleteResults[zoneID] = .success(())
            }
            try notify(outcome, PostgresWriteTransaction(engine: self, connection: connection, context: database, now: Date(), copiesNewRecords: false))
            // The zones' shares went with their records: a zone made again under the name
            // shares nothing (row-level security reads these rows). After `notify`, which tells
            // their participants.
            if database.storageScope == .private {
                for zoneID in deletedZones where Self.zoneOwner(zoneID, database).isEmpty {
                    for table in ["share_index", "share_members"] {
                        try connection.execute("DELETE FROM \(table) WHERE container = $1 AND owner = $2 AND zone_name = $3",
                                               [.text(database.storageContainer), .text(database.storageOwner), .text(zoneID.zoneName)])
                    }
                }
            }
            // A zone the request created and deleted again is noted by its deletion only.
            for row in createdZoneRows where !deletedRows.contains(row) { try noteDatabaseChange(zoneRow: row, database, on: connection) }
            for zoneID in deletedZones {
                let sequence = try noteDatabaseChange(zoneRow: nil, database, on: connection)
                try connection.execute("""
                    INSERT INTO zone_tombstones(container, db, owner, zone_name, zone_owner, db_change_seq, deleted_at) VALUES ($1, $2, $3, $4, $5, $6, $7)
                    ON CONFLICT (container, db, owner, zone_name, zone_owner) DO UPDATE SET db_change_seq = excluded.db_change_seq, deleted_at = excluded.deleted_at
                    """, Self.databaseKey(database) + [.text(zoneID.zoneName), .text(Self.zoneOwner(zoneID, database)), .int64(sequence), .double(Date().timeIntervalSinceReferenceDate)])
            }
            return outcome
        }
        compactIfDue()
        return outcome
    }

    /// The row of a zone a writer uses, locked for the transaction; the default zone is
    /// created on first use.
    func lockedZone(_ zoneID: RecordZone.ID, _ database: DatabaseContext, on connection: PostgresConnection) throws -> ZoneHistory? {
        if let zone = try zoneHistory(zoneID, database, on: connection, lock: true) { return zone }
        guard zoneID.isDefault, database.storageScope != .shared else { return nil }
        try insertZone(zoneID, capabilities: RecordZone.default.capabilities, database, on: connection)
        return try zoneHistory(zoneID, database, on: connection, lock: true)
    }
}
