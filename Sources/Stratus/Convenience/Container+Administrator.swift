import Foundation

extension Container {
    /// A Stratus extension: the public database as the store's administrator sees it, for
    /// backups, restores and whole-store copies (`stratus import --as-administrator`): no user,
    /// so the security roles of the public database, which are the apps' rules, do not limit
    /// what it reads and writes, and records saved through it keep the creator and modifier
    /// they hold. Whoever can open the store can act as its administrator: on SQLite, whoever
    /// can read and write the file; on PostgreSQL, the server's roles and row-level security
    /// still decide what the connection reaches.
    ///
    /// ```swift
    /// let restore = RecordImporter(database: container.administratorPublicDatabase)
    /// ```
    public var administratorPublicDatabase: Database {
        Database(engine: engine, context: .administrator(containerIdentifier: identifier, environment: environment, scope: .public, owner: ""))
    }
}
