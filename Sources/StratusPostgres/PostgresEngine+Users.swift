import Foundation
@_spi(StratusEngine) import Stratus

extension PostgresEngine {
    @_spi(StratusEngine)
    public func fetchUserDirectory(containerIdentifier: String, logins: [String]?) throws -> [UserDirectoryEntry] {
        try readTransaction(mayLag: false) { connection in
            let rows = if let logins {
                try connection.query("SELECT login, user_record_name, roles FROM user_directory WHERE container = $1 AND login = ANY($2) ORDER BY login",
                                     [.text(containerIdentifier), .textArray(Array(Set(logins)))])
            } else {
                try connection.query("SELECT login, user_record_name, roles FROM user_directory WHERE container = $1 ORDER BY login", [.text(containerIdentifier)])
            }
            return try rows.map { row in
                UserDirectoryEntry(login: try row.text(0) ?? "", userRecordName: try row.text(1) ?? "", roles: try UserDirectoryEntry.roles(stored: try row.text(2) ?? "[]"))
            }
        }
    }

    @_spi(StratusEngine)
    public func modifyUserDirectory(containerIdentifier: String, saving entries: [UserDirectoryEntry], deletingLogins logins: [String]) throws {
        try writeTransaction { connection in
            try connection.execute("DELETE FROM user_directory WHERE container = $1 AND login = ANY($2)",
                                   [.text(containerIdentifier), .textArray(logins + entries.map(\.login))])
            for entry in entries {
                do {
                    try connection.execute("INSERT INTO user_directory(container, login, user_record_name, roles) VALUES ($1, $2, $3, $4)",
                                           [.text(containerIdentifier), .text(entry.login), .text(entry.userRecordName), .text(UserDirectoryEntry.storedRoles(entry.roles))])
                } catch let error as StratusError where error.sqlState == "23505" {
                    throw entry.duplicateRecordNameError(containerIdentifier: containerIdentifier)
                }
            }
        }
    }
}
