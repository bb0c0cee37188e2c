// Names other libraries give their own types, which CloudKit programs import beside CloudKit:
// GRDB's `Database` and `Record`, IceCream's `SyncEngine`, PostgresNIO's `PostgresConnection`
// and `PostgresRow`, a dependency injector's `Container`, a query builder's `Query`. Apple's
// CloudKit module takes none of them, so `import CloudKit` must not either.

/// GRDB's database connection.
public final class Database {
    public let path: String
    public init(path: String) { self.path = path }
}

/// GRDB's record base class.
open class Record {
    public init() {}
    open class var databaseTableName: String { "record" }
}

/// IceCream's sync engine.
public final class SyncEngine {
    public let objectTypes: [String]
    public init(objects: [String]) { objectTypes = objects }
}

/// PostgresNIO's connection and row.
public final class PostgresConnection {
    public init() {}
}

public struct PostgresRow {
    public init() {}
}

/// A dependency injection container (Swinject's, Factory's).
public final class Container {
    public init() {}
    public func resolve<T>(_ type: T.Type) -> T? { nil }
}

/// A query builder's query (FluentKit's `QueryBuilder` users name one so).
public struct Query {
    public let table: String
    public init(table: String) { self.table = table }
}
