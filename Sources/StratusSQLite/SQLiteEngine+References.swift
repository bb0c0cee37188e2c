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
}
