import Foundation
import Stratus
import StratusPostgres

/// `stratus info`: what a store holds, every container, database, owner and zone with its
/// records by type, the tables' version and the store's size.
struct InfoCommand: Command {
    static let name = "info"
    static let summary = "what a store holds: containers, databases, zones, record types and counts"
    static let usage = ["stratus info [--json] [--store PATH|URL]"]
    static let discussion = """
        Prints every container of the store with its databases (a private database once per
        owner), their zones with their capabilities and record counts by type, the record types
        of each container's schema, the version of the store's tables and the store's size;
        the counts come from one snapshot. --json prints one JSON object instead:
        {"store","engine","schemaVersion","sizeInBytes","records","containers":[
        {"containerIdentifier","schemaRecordTypes","productionSchemaRecordTypes","records","databases":[
        {"database","environment","owner" ("" for the public database),"records","zones":[
        {"zoneID","atomic","fetchChanges","records","recordTypes":{TYPE:COUNT}}]}]}]}.
        """
    static let options: [Option] = [Option(flag: "--json", "print one JSON object")]
    static let optionGroups: [OptionGroup] = [.storeLocation]

    var store: StoreOptions
    var json: Bool

    static func parse(_ arguments: ParsedArguments) throws -> InfoCommand {
        try arguments.expectNoPositionals()
        return InfoCommand(store: try StoreOptions(arguments, locationOnly: true), json: arguments.flag("--json"))
    }

    func run() async throws -> ExitCode {
        let container = try store.openContainer(.read)
        let inventory = try await container.storeInventory()
        var schemaTypes: [String: [String]] = [:], productionTypes: [String: [String]] = [:]
        for identifier in inventory.containersWithSchemas where !identifier.isEmpty {
            let development = Container(identifier: identifier, engine: container.engine, userName: container.userName, environment: .development)
            schemaTypes[identifier] = try await development.schemas().map(\.recordType).sorted()
            productionTypes[identifier] = try await development.container(in: .production).schemas().map(\.recordType).sorted()
        }
        let report = StoreReport(inventory: inventory, schemaTypes: schemaTypes, productionSchemaTypes: productionTypes)
        let location = StoreOptions.describe(container.engine)
        let engineName = container.engine is PostgresEngine ? "postgresql" : "sqlite"
        if json {
            try StandardOutput.line(report.json(store: location, engine: engineName))
        } else {
            try StandardOutput.write(report.text(store: location, engine: engineName == "sqlite" ? "SQLite" : "PostgreSQL"))
        }
        return .success
    }
}

extension OptionGroup {
    /// Only which store: for commands that read a whole store (every container and user).
    static let storeLocation = OptionGroup(title: "Store options", placeholder: "[--store PATH|URL]", options: [
        Option("--store", "PATH|URL", "the store: an SQLite file, or a PostgreSQL database as postgresql://[user@]host[:port]/dbname (a password is never printed)",
               default: "$STRATUS_STORE, else ~/.local/share/stratus/default.sqlite"),
    ])
}

/// A store's inventory arranged by container, for `stratus info`.
struct StoreReport {
    struct ContainerEntry {
        var identifier: String
        var schemaRecordTypes: [String]
        var productionSchemaRecordTypes: [String] = []
        var databases: [StoreInventory.DatabaseEntry]
        var records: Int { databases.reduce(0) { $0 + StoreReport.records(in: $1) } }
    }

    var containers: [ContainerEntry]
    var schemaVersion: Int
    var sizeInBytes: Int64?
    var records: Int { containers.reduce(0) { $0 + $1.records } }

    init(inventory: StoreInventory, schemaTypes: [String: [String]], productionSchemaTypes: [String: [String]] = [:]) {
        var byContainer: [String: ContainerEntry] = [:]
        for database in inventory.databases {
            byContainer[database.containerIdentifier, default: ContainerEntry(identifier: database.containerIdentifier, schemaRecordTypes: [], databases: [])]
                .databases.append(database)
        }
        for (identifier, types) in schemaTypes {
            byContainer[identifier, default: ContainerEntry(identifier: identifier, schemaRecordTypes: [], databases: [])].schemaRecordTypes = types
        }
        for (identifier, types) in productionSchemaTypes where !types.isEmpty {
            byContainer[identifier, default: ContainerEntry(identifier: identifier, schemaRecordTypes: [], databases: [])].productionSchemaRecordTypes = types
        }
        containers = byContainer.values.sorted { $0.identifier < $1.identifier }
        schemaVersion = inventory.schemaVersion
        sizeInBytes = inventory.sizeInBytes
    }

    static func records(in database: StoreInventory.DatabaseEntry) -> Int {
        database.zones.reduce(0) { $0 + records(in: $1) }
    }

    static func records(in zone: StoreInventory.ZoneEntry) -> Int {
        zone.recordCounts.values.reduce(0, +)
    }

    /// The database's name as people say it: `public`, `private (_6c1f…)` (its owner's user
    /// record name), `production public`.
    static func databaseName(_ database: StoreInventory.DatabaseEntry) -> String {
        let name = database.owner.isEmpty ? "\(database.scope)" : "\(database.scope) (\(database.owner))"
        return database.environment == .production ? "production " + name : name
    }

    static func capabilities(_ zone: RecordZone) -> String {
        var names: [String] = []
        if zone.capabilities.contains(.atomic) { names.append("atomic") }
        if zone.capabilities.contains(.fetchChanges) { names.append("fetchChanges") }
        return names.isEmpty ? "no capabilities" : names.joined(separator: ", ")
    }

    /// The human-readable report: one block per container, indented by database and zone.
    func text(store: String, engine: String) -> String {
        var size = ""
        if let sizeInBytes { size = ", " + Self.bytes(sizeInBytes) }
        var out = "store \(store) (\(engine), tables version \(schemaVersion)\(size))\n"
        out += "\(Self.counted(records, "record")) in \(Self.counted(containers.count, "container"))\n"
        for container in containers {
            out += "\ncontainer \(container.identifier): \(Self.counted(container.records, "record"))\n"
            out += "  schema: " + (container.schemaRecordTypes.isEmpty ? "none" : container.schemaRecordTypes.joined(separator: ", ")) + "\n"
            if !container.productionSchemaRecordTypes.isEmpty {
                out += "  production schema: " + container.productionSchemaRecordTypes.joined(separator: ", ") + "\n"
            }
            for database in container.databases {
                out += "  \(Self.databaseName(database)) database: \(Self.counted(database.zones.count, "zone")), \(Self.counted(Self.records(in: database), "record"))\n"
                for zone in database.zones {
                    let owner = zone.zone.zoneID.ownerName == RecordZone.ID.currentUserDefaultOwner ? "" : " of \(zone.zone.zoneID.ownerName)"
                    out += "    zone \(zone.zone.zoneID.zoneName)\(owner) (\(Self.capabilities(zone.zone))): \(Self.counted(Self.records(in: zone), "record"))\n"
                    let width = zone.recordCounts.keys.map(\.count).max() ?? 0
                    for (type, count) in zone.recordCounts.sorted(by: { $0.key < $1.key }) {
                        out += "      " + type.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + Progress.grouped(count) + "\n"
                    }
                }
            }
        }
        return out
    }

    /// The report as one JSON object (keys sorted).
    func json(store: String, engine: String) -> String {
        var object: [String: Any] = [
            "store": store, "engine": engine, "schemaVersion": schemaVersion, "records": records,
            "containers": containers.map { container -> [String: Any] in
                [
                    "containerIdentifier": container.identifier,
                    "schemaRecordTypes": container.schemaRecordTypes,
                    "productionSchemaRecordTypes": container.productionSchemaRecordTypes,
                    "records": container.records,
                    "databases": container.databases.map { database -> [String: Any] in
                        [
                            "database": "\(database.scope)", "environment": "\(database.environment)", "owner": database.owner,
                            "records": Self.records(in: database),
                            "zones": database.zones.map { zone -> [String: Any] in
                                [
                                    "zoneID": ["zoneName": zone.zone.zoneID.zoneName, "ownerRecordName": zone.zone.zoneID.ownerName],
                                    "atomic": zone.zone.capabilities.contains(.atomic),
                                    "fetchChanges": zone.zone.capabilities.contains(.fetchChanges),
                                    "records": Self.records(in: zone),
                                    "recordTypes": zone.recordCounts,
                                ]
                            },
                        ]
                    },
                ]
            },
        ]
        if let sizeInBytes { object["sizeInBytes"] = sizeInBytes }
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    /// `1 record`, `1,200 records`.
    static func counted(_ count: Int, _ noun: String) -> String {
        Progress.grouped(count) + " " + noun + (count == 1 ? "" : "s")
    }

    /// `1.2 MB`, `512 bytes`.
    static func bytes(_ count: Int64) -> String {
        if count < 1_024 { return "\(count) bytes" }
        let units = ["KB", "MB", "GB", "TB"]
        var value = Double(count) / 1_024
        var unit = 0
        while value >= 1_024 && unit < units.count - 1 {
            value /= 1_024
            unit += 1
        }
        return String(format: value < 10 ? "%.1f" : "%.0f", value) + " " + units[unit]
    }
}
