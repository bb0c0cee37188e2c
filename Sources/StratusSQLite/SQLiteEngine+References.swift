@_spi(StratusEngine) import Stratus

extension SQLiteEngine {
    @_spi(StratusEngine) public func deleteSelfSources(of id: Record.ID, in database: DatabaseContext) throws -> [String] {
        try readTransaction { connection in
            guard let zone = try zoneRowID(id.zoneID, database, on: connection, createDefault: false) else { return [] }
            let sources = try connection.statement("SELECT source_name FROM refs WHERE zone_id = ? AND target_name = ?")
            defer { sources.reset() }
            try sources.bind([.integer(zone), .text(id.recordName)])
            var names: [String] = []
            while try sources.step() { names.append(sources.text(0) ?? "") }
            return names
        }
    }

    @_spi(StratusEngine) public func hasChildRecords(of id: Record.ID, in database: DatabaseContext) throws -> Bool {
        try readTransaction { connection in
            guard let zone = try zoneRowID(id.zoneID, database, on: connection, createDefault: false) else { return false }
            // `records_by_parent` answers it; `parent_name = ?` implies the index's `IS NOT NULL`.
            let children = try connection.statement("SELECT 1 FROM records WHERE zone_id = ? AND parent_name = ? LIMIT 1")
            defer { children.reset() }
            try children.bind([.integer(zone), .text(id.recordName)])
            return try children.step()
        }
    }
}
