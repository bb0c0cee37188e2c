import Foundation
@_spi(StratusEngine) import Stratus

extension PostgresEngine {
    @_spi(StratusEngine)
    public func fetchUserDirectory(containerIdentifier: String, logins: [String]?) throws -> [UserDirectoryEntry] {
        try readTransaction(mayLag: false) { connection in
            if let logins {
                return try Self.readEntries(on: connection, containerIdentifier: containerIdentifier, where: "d.login = ANY($2)", [.textArray(logins)])
            }
            return try Self.readEntries(on: connection, containerIdentifier: containerIdentifier, where: "true", [])
        }
    }

    @_spi(StratusEngine)
    public func modifyUserDirectory(containerIdentifier: String, saving entries: [UserDirectoryEntry], deletingLogins logins: [String]) throws {
        try writeTransaction { connection in
            for table in ["user_directory", "user_identities", "user_addresses"] {
                try connection.execute("DELETE FROM \(table) WHERE container = $1 AND login = ANY($2)",
                                       [.text(containerIdentifier), .textArray(logins + entries.map(\.login))])
            }
            for entry in entries {
                // Row-level security knows a member by the record names the directory gives its
                // login, in every container of the store: another login's record name in another
                // container would open that user's private rows to this login's role (in this
                // container the directory's unique key refuses it below).
                if let other = try connection.query("SELECT container, login FROM user_directory WHERE user_record_name = $1 AND login <> $2 AND container <> $3 LIMIT 1",
                                                    [.text(entry.userRecordName), .text(entry.login), .text(containerIdentifier)]).first {
                    throw StratusError(.constraintViolation, "login '\(entry.login)' cannot have user record name \(entry.userRecordName): login '\(try other.text(1) ?? "")' of container \(try other.text(0) ?? "") has it, and in a PostgreSQL store a user record name names one login in every container (row-level security knows users by it); give another record name")
                }
                do {
                    try connection.execute("INSERT INTO user_directory(container, login, user_record_name, roles) VALUES ($1, $2, $3, $4)",
                                           [.text(containerIdentifier), .text(entry.login), .text(entry.userRecordName), .text(UserDirectoryEntry.storedRoles(entry.roles))])
                } catch let error as StratusError where error.sqlState == "23505" {
                    throw entry.duplicateRecordNameError(containerIdentifier: containerIdentifier)
                }
                try connection.execute("INSERT INTO user_identities(container, login, name_components, discoverable) VALUES ($1, $2, $3, $4)",
                                       [.text(containerIdentifier), .text(entry.login), UserDirectoryEntry.storedNameComponents(entry.nameComponents).map(PostgresValue.text) ?? .null,
                                        .bool(entry.isDiscoverable)])
                for (position, stored) in entry.storedAddresses.enumerated() {
                    // The entry's own rows are gone: a holder left is another login.
                    if let other = try connection.query("SELECT login FROM user_addresses WHERE container = $1 AND address_key = $2",
                                                        [.text(containerIdentifier), .text(stored.key)]).first {
                        throw entry.duplicateAddressError(stored.address, otherLogin: try other.text(0) ?? "", containerIdentifier: containerIdentifier)
                    }
                    try connection.execute("INSERT INTO user_addresses(container, address_key, login, position, address) VALUES ($1, $2, $3, $4, $5)",
                                           [.text(containerIdentifier), .text(stored.key), .text(entry.login), .int64(Int64(position)), .text(stored.address)])
                }
            }
        }
    }

    @_spi(StratusEngine)
    public func findUsers(containerIdentifier: String, addressKeys: [String], userRecordNames: [String]) throws -> [UserDirectoryEntry] {
        try readTransaction(mayLag: false) { connection in
            // With row-level security, a member reads another login's addresses only while it is
            // discoverable: an address of an undiscoverable user finds no one here.
            try Self.readEntries(on: connection, containerIdentifier: containerIdentifier, where: """
                (d.user_record_name = ANY($2) OR d.login IN (SELECT a.login FROM user_addresses a WHERE a.container = $1 AND a.address_key = ANY($3)))
                """, [.textArray(Array(Set(userRecordNames))), .textArray(Array(Set(addressKeys)))])
        }
    }

    @_spi(StratusEngine)
    public func saveUserDiscoverability(containerIdentifier: String, login: String, userRecordName: String, isDiscoverable: Bool) throws {
        try writeTransaction { connection in
            // Asked first: a member of the row-level security group may not add to the directory
            // (an INSERT … ON CONFLICT DO NOTHING is refused even when the entry is there).
            let known = try connection.query("SELECT 1 FROM user_directory WHERE container = $1 AND login = $2", [.text(containerIdentifier), .text(login)])
            if known.isEmpty {
                do {
                    try connection.execute("INSERT INTO user_directory(container, login, user_record_name, roles) VALUES ($1, $2, $3, $4)",
                                           [.text(containerIdentifier), .text(login), .text(userRecordName), .text(UserDirectoryEntry.storedRoles([]))])
                } catch var error as StratusError where error.sqlState == "42501" {
                    error.message = "the user directory of container \(containerIdentifier) has no entry for '\(login)', and only the store's administrator may add one: ask them to run `stratus users add \(login) --container \(containerIdentifier)`, then ask for the permission again (\(error.message))"
                    throw error
                }
            }
            try connection.execute("""
                INSERT INTO user_identities(container, login, discoverable) VALUES ($1, $2, $3)
                ON CONFLICT (container, login) DO UPDATE SET discoverable = excluded.discoverable
                """, [.text(containerIdentifier), .text(login), .bool(isDiscoverable)])
        }
    }

    /// The directory's entries of the container that `condition` (over `d`, with `parameters`
    /// from `$2`) selects, in login order, with what of their names, discoverability and
    /// addresses the connection may read.
    private static func readEntries(on connection: PostgresConnection, containerIdentifier: String, where condition: String, _ parameters: [PostgresValue]) throws -> [UserDirectoryEntry] {
        let rows = try connection.query("""
            SELECT d.login, d.user_record_name, d.roles, i.name_components, coalesce(i.discoverable, false)
            FROM user_directory d LEFT JOIN user_identities i ON i.container = d.container AND i.login = d.login
            WHERE d.container = $1 AND \(condition) ORDER BY d.login
            """, [.text(containerIdentifier)] + parameters)
        var entries = try rows.map { row in
            UserDirectoryEntry(login: try row.text(0) ?? "", userRecordName: try row.text(1) ?? "", roles: try UserDirectoryEntry.roles(stored: try row.text(2) ?? "[]"),
                               nameComponents: try UserDirectoryEntry.nameComponents(stored: try row.text(3)), isDiscoverable: try row.bool(4) ?? false)
        }
        guard !entries.isEmpty else { return [] }
        var addresses: [String: [UserDirectoryEntry.StoredAddress]] = [:]
        for row in try connection.query("SELECT login, address_key, address FROM user_addresses WHERE container = $1 AND login = ANY($2) ORDER BY login, position",
                                        [.text(containerIdentifier), .textArray(entries.map(\.login))]) {
            addresses[try row.text(0) ?? "", default: []].append(UserDirectoryEntry.StoredAddress(key: try row.text(1) ?? "", address: try row.text(2) ?? ""))
        }
        for index in entries.indices { entries[index].setAddresses(stored: addresses[entries[index].login] ?? []) }
        return entries
    }
}
