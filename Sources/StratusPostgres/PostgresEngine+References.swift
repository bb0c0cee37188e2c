@_spi(StratusEngine) import Stratus

extension PostgresEngine {
    @_spi(StratusEngine)
    public func deleteSelfSources(of id: Record.ID, in database: DatabaseContext) throws -> [String] {
        // Read from the primary, as fetches by ID are: what a write would see.
        try readTransaction(mayLag: false) { connection in
            guard let zone = try zoneHistory(id.zoneID, database, on: connection) else { return [] }
            return try connection.query("SELECT source_name FROM refs WHERE zone_id = $1 AND target_name = $2", [.int64(zone.row), .text(id.recordName)])
                .map { try $0.text(0) ?? "" }
        }
    }

    @_spi(StratusEngine)
    public func hasChildRecords(of id: Record.ID, in database: DatabaseContext) throws -> Bool {
        try readTransaction(mayLag: false) { connection in
            guard let zone = try zoneHistory(id.zoneID, database, on: connection) else { return false }
            // `records_by_parent` answers it.
            return try !connection.query("SELECT 1 FROM records WHERE zone_id = $1 AND parent_name = $2 LIMIT 1", [.int64(zone.row), .text(id.recordName)]).isEmpty
        }
    }
}
