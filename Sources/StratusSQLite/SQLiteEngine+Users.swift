import Foundation
@_spi(StratusEngine) import Stratus

extension SQLiteEngine {
    @_spi(StratusEngine) public func fetchUserDirectory(containerIdentifier: String, logins: [String]?) throws -> [UserDirectoryEntry] {
        try readTransaction { connection in
            var entries: [UserDirectoryEntry] = []
            func read(_ select: SQLiteStatement) throws {
                while try select.step() {
                    let roles = try UserDirectoryEntry.roles(stored: select.text(2) ?? "[]")
                    entries.append(UserDirectoryEntry(login: select.text(0) ?? "", userRecordName: select.text(1) ?? "", roles: roles))
                }
                select.reset()
            }
            if let logins {
                let select = try connection.statement("SELECT login, user_record_name, roles FROM user_directory WHERE container = ? AND login = ?")
                for login in Set(logins).sorted() {
                    try select.bind([.text(containerIdentifier), .text(login)])
                    try read(select)
                }
            } else {
                let select = try connection.statement("SELECT login, user_record_name, roles FROM user_directory WHERE container = ? ORDER BY login")
                try select.bind([.text(containerIdentifier)])
                try read(select)
            }
            return entries
        }
    }

    @_spi(StratusEngine) public func modifyUserDirectory(containerIdentifier: String, saving entries: [UserDirectoryEntry], deletingLogins logins: [String]) throws {
        try writeTransaction { connection in
            let delete = try connection.statement("DELETE FROM user_directory WHERE container = ? AND login = ?")
            for login in logins + entries.map(\.login) {
                delete.reset()
                try delete.bind([.text(containerIdentifier), .text(login)])
                try delete.step()
            }
            let insert = try connection.statement("INSERT INTO user_directory(container, login, user_record_name, roles) VALUES (?, ?, ?, ?)")
            for entry in entries {
                insert.reset()
                try insert.bind([.text(containerIdentifier), .text(entry.login), .text(entry.userRecordName), .text(UserDirectoryEntry.storedRoles(entry.roles))])
                do {
                    try insert.step()
                } catch let error as StratusError where error.message.contains("UNIQUE") {
                    throw entry.duplicateRecordNameError(containerIdentifier: containerIdentifier)
                }
            }
        }
    }
}
