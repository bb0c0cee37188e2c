import Foundation
@_spi(StratusEngine) import Stratus

extension SQLiteEngine {
    @_spi(StratusEngine)
    public func inventory() throws -> StoreInventory {
        try readTransaction { connection in
            var counts: [Int64: [String: Int]] = [:]
            let byType = try connection.statement("SELECT zone_id, record_type, count(*) FROM records GROUP BY zone_id, record_type")
            while try byType.step() { counts[byType.int64(0), default: [:]][byType.text(1) ?? ""] = Int(byType.int64(2)) }
            var databases = StoreInventory.DatabaseList()
            let zones = try connection.statement("""
                SELECT z.container, z.db, z.owner, z.zone_name, z.zone_owner, s.capabilities, z.zone_id FROM zones z JOIN zone_state s ON s.zone_id = z.zone_id
                ORDER BY z.container, z.db, z.owner, z.zone_name, z.zone_owner
                """)
            while try zones.step() {
                let zone = RecordZone(zoneID: Self.zoneID(name: zones.text(3) ?? "", owner: zones.text(4) ?? ""),
                                      capabilities: RecordZone.Capabilities(rawValue: Int(zones.int64(5))))
                databases.add(storageContainer: zones.text(0) ?? "", scope: Database.Scope(rawValue: Int(zones.int64(1))) ?? .public, owner: zones.text(2) ?? "",
                              zone: StoreInventory.ZoneEntry(zone: zone, recordCounts: counts[zones.int64(6)] ?? [:]))
            }
            // Databases that hold only subscriptions.
            let subscribed = try connection.statement("SELECT DISTINCT container, db, owner FROM subscriptions ORDER BY container, db, owner")
            while try subscribed.step() {
                databases.add(storageContainer: subscribed.text(0) ?? "", scope: Database.Scope(rawValue: Int(subscribed.int64(1))) ?? .public, owner: subscribed.text(2) ?? "")
            }
            var containers: [String] = []
            let schemas = try connection.statement("SELECT container FROM record_types UNION SELECT container FROM schema_roles ORDER BY 1")
            while try schemas.step() { containers.append(schemas.text(0) ?? "") }
            let size = try connection.queryText("SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()").flatMap { Int64($0) }
            return StoreInventory(databases: databases.entries, schemaStorageContainers: containers, sizeInBytes: size, schemaVersion: Int(SQLiteSchema.version))
        }
    }

    /// SQLite's own `integrity_check` of every page and index of the file.
    @_spi(StratusEngine)
    public func checkIntegrity() throws -> [String] {
        try readTransaction { connection in
            let check = try connection.uncachedStatement("PRAGMA integrity_check")
            var problems: [String] = []
            while try check.step() {
                let line = check.text(0) ?? ""
                if line != "ok" { problems.append(line) }
            }
            return problems
        }
    }
}
