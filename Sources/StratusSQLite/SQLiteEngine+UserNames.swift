import Foundation
@_spi(StratusEngine) import Stratus

extension SQLiteEngine {
    /// Version 5: what was stored under login names (database and zone owners, zone tombstones,
    /// database histories, creators and modifiers of records) moves to the users' derived
    /// record names (``Stratus/UserDirectoryEntry/derivedRecordName(containerIdentifier:login:)``),
    /// which Stratus now names users by. Zone rows and change positions stay, so change tokens
    /// printed before go on working (``Stratus/ServerChangeToken`` accepts the login they name).
    func upgradeUserNames(on connection: SQLiteConnection) throws {
        connection.resetActiveStatements()
        for (table, column) in SQLiteSchema.userColumns {
            let select = try connection.uncachedStatement("SELECT DISTINCT container, \(column) FROM \(table)")
            var pairs: [(container: String, login: String)] = []
            while try select.step() {
                let name = select.text(1) ?? ""
                if SQLiteSchema.wasLogin(name) { pairs.append((select.text(0) ?? "", name)) }
            }
            let update = try connection.uncachedStatement("UPDATE \(table) SET \(column) = ? WHERE container = ? AND \(column) = ?")
            for pair in pairs {
                update.reset()
                try update.bind([.text(UserDirectoryEntry.derivedRecordName(containerIdentifier: pair.container, login: pair.login)), .text(pair.container), .text(pair.login)])
                try update.step()
            }
        }
        for column in ["created_by", "modified_by"] {
            let select = try connection.uncachedStatement("""
                SELECT DISTINCT z.container, r.\(column) FROM records r JOIN zones z ON z.zone_id = r.zone_id
                WHERE r.\(column) != '' AND r.\(column) NOT LIKE '\\_%' ESCAPE '\\'
                """)
            var pairs: [(container: String, login: String)] = []
            while try select.step() { pairs.append((select.text(0) ?? "", select.text(1) ?? "")) }
            let update = try connection.uncachedStatement("UPDATE records SET \(column) = ? WHERE \(column) = ? AND zone_id IN (SELECT zone_id FROM zones WHERE container = ?)")
            for pair in pairs where SQLiteSchema.wasLogin(pair.login) {
                update.reset()
                try update.bind([.text(UserDirectoryEntry.derivedRecordName(containerIdentifier: pair.container, login: pair.login)), .text(pair.login), .text(pair.container)])
                try update.step()
            }
        }
    }
}
