import Foundation
@_spi(StratusEngine) import Stratus
import StratusSQL

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
                // Distinct by bytes, as logins are keyed (a Set of Strings would take "é" composed
                // and decomposed as one).
                var asked = Set<[UInt8]>()
                for login in logins where asked.insert(Array(login.utf8)).inserted {
                    try select.bind([.text(containerIdentifier), .text(login)])
                    try read(select)
                }
            } else {
                let select = try connection.statement("SELECT login, user_record_name, roles FROM user_directory WHERE container = ? ORDER BY login")
                try select.bind([.text(containerIdentifier)])
                try read(select)
            }
            return try addDiscovery(to: entries, containerIdentifier: containerIdentifier, on: connection)
        }
    }

    @_spi(StratusEngine) public func modifyUserDirectory(containerIdentifier: String, saving entries: [UserDirectoryEntry], deletingLogins logins: [String]) throws {
        try writeTransaction { connection in
            for table in ["user_directory", "user_identities", "user_addresses"] {
                let delete = try connection.statement("DELETE FROM \(table) WHERE container = ? AND login = ?")
                for login in logins + entries.map(\.login) {
                    delete.reset()
                    try delete.bind([.text(containerIdentifier), .text(login)])
                    try delete.step()
                }
            }
            let insert = try connection.statement("INSERT INTO user_directory(container, login, user_record_name, roles) VALUES (?, ?, ?, ?)")
            let identity = try connection.statement("INSERT INTO user_identities(container, login, name_components, discoverable) VALUES (?, ?, ?, ?)")
            let holder = try connection.statement("SELECT login FROM user_addresses WHERE container = ? AND address_key = ?")
            let address = try connection.statement("INSERT INTO user_addresses(container, address_key, login, position, address) VALUES (?, ?, ?, ?, ?)")
            for entry in entries {
                insert.reset()
                try insert.bind([.text(containerIdentifier), .text(entry.login), .text(entry.userRecordName), .text(UserDirectoryEntry.storedRoles(entry.roles))])
                do {
                    try insert.step()
                } catch let error as StratusError where error.message.contains("UNIQUE") {
                    throw entry.duplicateRecordNameError(containerIdentifier: containerIdentifier)
                }
                identity.reset()
                try identity.bind([.text(containerIdentifier), .text(entry.login), UserDirectoryEntry.storedNameComponents(entry.nameComponents).map(SQLValue.text) ?? .null,
                                   .integer(entry.isDiscoverable ? 1 : 0)])
                try identity.step()
                for (position, stored) in entry.storedAddresses.enumerated() {
                    // The entry's own rows are gone: a holder left is another login.
                    holder.reset()
                    try holder.bind([.text(containerIdentifier), .text(stored.key)])
                    if try holder.step() {
                        let other = holder.text(0) ?? ""
                        holder.reset()
                        throw entry.duplicateAddressError(stored.address, otherLogin: other, containerIdentifier: containerIdentifier)
                    }
                    holder.reset()
                    address.reset()
                    try address.bind([.text(containerIdentifier), .text(stored.key), .text(entry.login), .integer(Int64(position)), .text(stored.address)])
                    try address.step()
                }
            }
        }
    }

    @_spi(StratusEngine) public func findUsers(containerIdentifier: String, addressKeys: [String], userRecordNames: [String]) throws -> [UserDirectoryEntry] {
        try readTransaction { connection in
            var logins: Set<String> = []
            let byAddress = try connection.statement("SELECT login FROM user_addresses WHERE container = ? AND address_key = ?")
            for key in Set(addressKeys) {
                byAddress.reset()
                try byAddress.bind([.text(containerIdentifier), .text(key)])
                while try byAddress.step() { logins.insert(byAddress.text(0) ?? "") }
            }
            byAddress.reset()
            var entries: [UserDirectoryEntry] = []
            for (column, values) in [("user_record_name", Set(userRecordNames)), ("login", logins)] {
                let select = try connection.statement("SELECT login, user_record_name, roles FROM user_directory WHERE container = ? AND \(column) = ?")
                for value in values {
                    select.reset()
                    try select.bind([.text(containerIdentifier), .text(value)])
                    while try select.step() {
                        entries.append(UserDirectoryEntry(login: select.text(0) ?? "", userRecordName: select.text(1) ?? "", roles: try UserDirectoryEntry.roles(stored: select.text(2) ?? "[]")))
                    }
                }
                select.reset()
            }
            var seen: Set<String> = []
            let distinct = entries.filter { seen.insert($0.login).inserted }.sorted { $0.login < $1.login }
            return try addDiscovery(to: distinct, containerIdentifier: containerIdentifier, on: connection)
        }
    }

    @_spi(StratusEngine) public func saveUserDiscoverability(containerIdentifier: String, login: String, userRecordName: String, isDiscoverable: Bool) throws {
        try writeTransaction { connection in
            let known = try connection.statement("SELECT 1 FROM user_directory WHERE container = ? AND login = ?")
            try known.bind([.text(containerIdentifier), .text(login)])
            let hasEntry = try known.step()
            known.reset()
            if !hasEntry {
                // Not INSERT OR IGNORE: a record name another login has must fail, not leave the
                // login without an entry that finds it.
                let entry = try connection.statement("INSERT INTO user_directory(container, login, user_record_name, roles) VALUES (?, ?, ?, ?)")
                try entry.bind([.text(containerIdentifier), .text(login), .text(userRecordName), .text(UserDirectoryEntry.storedRoles([]))])
                do {
                    try entry.step()
                } catch let error as StratusError where error.message.contains("UNIQUE") {
                    entry.reset()
                    throw UserDirectoryEntry(login: login, userRecordName: userRecordName).duplicateRecordNameError(containerIdentifier: containerIdentifier)
                }
                entry.reset()
            }
            let consent = try connection.statement("""
                INSERT INTO user_identities(container, login, discoverable) VALUES (?, ?, ?)
                ON CONFLICT(container, login) DO UPDATE SET discoverable = excluded.discoverable
                """)
            try consent.bind([.text(containerIdentifier), .text(login), .integer(isDiscoverable ? 1 : 0)])
            try consent.step()
            consent.reset()
        }
    }

    /// `entries` with their names, discoverability and addresses.
    private func addDiscovery(to entries: [UserDirectoryEntry], containerIdentifier: String, on connection: SQLiteConnection) throws -> [UserDirectoryEntry] {
        let identity = try connection.statement("SELECT name_components, discoverable FROM user_identities WHERE container = ? AND login = ?")
        let addresses = try connection.statement("SELECT address_key, address FROM user_addresses WHERE container = ? AND login = ? ORDER BY position")
        var found = entries
        for index in found.indices {
            let login = found[index].login
            identity.reset()
            try identity.bind([.text(containerIdentifier), .text(login)])
            if try identity.step() {
                found[index].nameComponents = try UserDirectoryEntry.nameComponents(stored: identity.isNull(0) ? nil : identity.text(0))
                found[index].isDiscoverable = identity.int64(1) != 0
            }
            identity.reset()
            addresses.reset()
            try addresses.bind([.text(containerIdentifier), .text(login)])
            var stored: [UserDirectoryEntry.StoredAddress] = []
            while try addresses.step() { stored.append(UserDirectoryEntry.StoredAddress(key: addresses.text(0) ?? "", address: addresses.text(1) ?? "")) }
            addresses.reset()
            found[index].setAddresses(stored: stored)
        }
        return found
    }
}
