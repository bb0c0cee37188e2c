import Foundation
import Stratus
import StratusTransfer

/// `stratus zones list|create|delete`: a database's zones.
struct ZonesCommand: Command {
    static let name = "zones"
    static let summary = "list, create and delete zones"
    static let usage = [
        "stratus zones list [store options]",
        "stratus zones create NAME... [--no-atomic] [store options]",
        "stratus zones delete NAME... --yes [--as-administrator] [store options]",
    ]
    static let discussion = """
        list prints each zone of the database as one line of JSON, as CloudKit's zones/list
        answers it: {"zoneID":{"zoneName":…,"ownerRecordName":…},"atomic":true,"fetchChanges":true}.
        create makes zones (an existing zone is left as it is) and prints them the same way.
        delete deletes zones with every record in them (so it needs --yes, as `stratus delete`
        does) and prints {"zoneID":{…},"deleted":true} for each. Zones live in the private and
        public databases; a zone that fails is reported on stderr and makes the exit code 1. A
        public zone holds every user's records: only the store's administrator deletes one
        (--as-administrator). The shared database lists the zones other users share with you;
        delete there leaves a zone's shares (the owner's zone and records stay), naming its
        owner with --zone-owner as list prints it: zones delete Lists --database shared
        --zone-owner _9f2c… --yes.
        """
    static let options: [Option] = [
        Option(flag: "--no-atomic", "create: zones whose modify requests apply item by item, as CloudKit's zones without the atomic capability (zones are atomic by default)"),
        Option(flag: "--yes", "delete: really delete the zones and every record in them (in the shared database: really leave them)"),
        Option(flag: "--as-administrator", "delete: delete zones of the public database as the store's administrator, every user's records in them included (on PostgreSQL, row-level security still binds the login role)"),
    ]

    enum Action {
        case list, create([String]), delete([String])

        var isCreate: Bool { if case .create = self { true } else { false } }
        var isList: Bool { if case .list = self { true } else { false } }
    }

    var store: StoreOptions
    var action: Action
    var atomic: Bool
    var asAdministrator = false

    static func parse(_ arguments: ParsedArguments) throws -> ZonesCommand {
        var words = arguments.positionals
        guard !words.isEmpty else { throw UsageError(message: "say list, create or delete") }
        let verb = words.removeFirst()
        let action: Action
        switch verb {
        case "list":
            if let extra = words.first { throw UsageError(message: "unexpected argument '\(extra)'") }
            action = .list
        case "create", "delete":
            if words.isEmpty { throw UsageError(message: "name at least one zone to \(verb)") }
            for word in words { try StoreOptions.refuseURL(word, as: "zones \(verb)", naming: "zone names (such as Notes)") }
            action = verb == "create" ? .create(words) : .delete(words)
        default:
            throw UsageError(message: "unknown zones action '\(verb)'; say list, create or delete")
        }
        if arguments.flag("--no-atomic"), !action.isCreate { throw UsageError(message: "--no-atomic belongs to zones create") }
        let store = try StoreOptions(arguments, namesZones: true)
        if case .delete = action {
            guard arguments.flag("--yes") else {
                throw UsageError(message: store.scope == .shared
                                 ? "deleting a zone of the shared database leaves its shares: add --yes to confirm"
                                 : "deleting a zone deletes every record in it: add --yes to confirm")
            }
        } else if arguments.flag("--yes") {
            throw UsageError(message: "--yes belongs to zones delete")
        }
        let asAdministrator = arguments.flag("--as-administrator")
        if case .delete = action {} else if asAdministrator { throw UsageError(message: "--as-administrator belongs to zones delete") }
        if asAdministrator && store.scope != .public {
            throw UsageError(message: "--as-administrator is for the public database, whose zones hold every user's records; a private database's zones are its owner's to delete")
        }
        return ZonesCommand(store: store, action: action, atomic: !arguments.flag("--no-atomic"), asAdministrator: asAdministrator)
    }

    func run() async throws -> ExitCode {
        let database: Database
        if asAdministrator {
            database = try store.openAdministratorDatabase(.existing)
        } else {
            database = try store.openDatabase(action.isCreate ? .createIfMissing : action.isList ? .read : .existing)
        }
        switch action {
        case .list:
            for zone in try await database.allRecordZones() { try StandardOutput.line(RecordJSONWriter.json(for: zone)) }
            return .success
        case .create(let names):
            let capabilities: RecordZone.Capabilities = atomic ? [.fetchChanges, .atomic] : [.fetchChanges]
            let zones = names.map { RecordZone(zoneID: store.zone(named: $0), capabilities: capabilities) }
            let (saved, _) = try await database.modifyRecordZones(saving: zones, deleting: [])
            var failed = 0
            for zone in zones {
                switch saved[zone.zoneID] {
                case .success(let stored)?: try StandardOutput.line(RecordJSONWriter.json(for: stored))
                case .failure(let error)?: failed += 1; StratusCommand.log("zone \(zone.zoneID.zoneName): \(error)")
                case nil: failed += 1
                }
            }
            return failed == 0 ? .success : .someFailed
        case .delete(let names):
            let ids = names.map(store.zone(named:))
            let (_, deleted) = try await database.modifyRecordZones(saving: [], deleting: ids)
            var failed = 0
            for id in ids {
                switch deleted[id] {
                case .success?: try StandardOutput.line(RecordJSONWriter.json(forDeletedZone: id))
                case .failure(let error)?: failed += 1; StratusCommand.log("zone \(id.zoneName): \(error)")
                case nil: failed += 1
                }
            }
            return failed == 0 ? .success : .someFailed
        }
    }
}
