import Foundation
import Stratus
import StratusTransfer

/// `stratus subscriptions create|list|delete`: the current user's subscriptions of a database.
struct SubscriptionsCommand: Command {
    static let name = "subscriptions"
    static let summary = "create, list and delete subscriptions (what fills the notification feed)"
    static let usage = [
        "stratus subscriptions create ID --type TYPE [--where PREDICATE] [--on create,update,delete] [--once] [--all-zones] [--keys K1,K2] [store options]",
        "stratus subscriptions create ID --zone-wide [--type TYPE] [store options]",
        "stratus subscriptions create ID --database-wide [--type TYPE] [store options]",
        "stratus subscriptions list [store options]",
        "stratus subscriptions delete ID... [store options]",
    ]
    static let discussion = """
        create saves a subscription of the user (--user) in the database (--database); saving an
        ID again replaces that subscription. With --type it is a query subscription: records of
        TYPE in the zone --zone names (every zone with --all-zones) that match --where fire it
        when created, updated or deleted (--on chooses). As in CloudKit, an update fires when
        the record matches after it, also when it did not match before (reported as
        recordUpdated), and a record an update makes stop matching fires nothing; a deletion
        fires when the record matched. --zone-wide makes a zone subscription of the --zone zone
        (one notification per write that changes records there), --database-wide a database
        subscription (private and shared databases only, as in CloudKit). list prints each
        subscription as a line of JSON in the shape of CloudKit's subscriptions/list, a query
        subscription's recordType and predicate (as --where takes it) at the top level; delete
        deletes subscriptions by ID. Notifications go to the user's feed in the container: read
        it with `stratus notifications` or `stratus watch`. A subscription that fails is
        reported on stderr and makes the exit code 1.
        """
    static let options: [Option] = [
        Option("--type", "TYPE", "the record type a query subscription watches (with --zone-wide or --database-wide: only changes of this type)", default: "none"),
        .predicate,
        Option("--on", "EVENTS", "which writes fire a query subscription: a comma-separated list of create, update, delete", default: "create,update,delete"),
        Option(flag: "--once", "the query subscription fires once, then is deleted (firesOnce)"),
        Option(flag: "--all-zones", "the query subscription watches every zone of the database, not only --zone"),
        Option("--keys", "K1,K2", "fields whose values query notifications carry (desiredKeys)", default: "none"),
        Option(flag: "--zone-wide", "create a zone subscription of the --zone zone"),
        Option(flag: "--database-wide", "create a database subscription"),
    ]

    enum Action {
        case create(Subscription)
        case list
        case delete([String])
    }

    var store: StoreOptions
    var action: Action

    static func parse(_ arguments: ParsedArguments) throws -> SubscriptionsCommand {
        let store = try StoreOptions(arguments)
        var words = arguments.positionals
        guard !words.isEmpty else { throw UsageError(message: "say create, list or delete") }
        let verb = words.removeFirst()
        let createOnly = ["--type", "--where", "--on", "--once", "--all-zones", "--keys", "--zone-wide", "--database-wide"]
        switch verb {
        case "list", "delete":
            if let option = createOnly.first(where: arguments.has) { throw UsageError(message: "\(option) belongs to subscriptions create") }
            if verb == "list" {
                if let extra = words.first { throw UsageError(message: "unexpected argument '\(extra)'") }
                return SubscriptionsCommand(store: store, action: .list)
            }
            if words.isEmpty { throw UsageError(message: "name at least one subscription to delete") }
            return SubscriptionsCommand(store: store, action: .delete(words))
        case "create":
            guard words.count == 1, let id = words.first else {
                throw UsageError(message: words.isEmpty ? "name the subscription to create" : "create takes one subscription ID, not \(words.count)")
            }
            return SubscriptionsCommand(store: store, action: .create(try subscription(id, arguments, store: store)))
        default:
            throw UsageError(message: "unknown subscriptions action '\(verb)'; say create, list or delete")
        }
    }

    /// The subscription the create options describe.
    private static func subscription(_ id: String, _ arguments: ParsedArguments, store: StoreOptions) throws -> Subscription {
        let type = arguments.value("--type")
        let zoneWide = arguments.flag("--zone-wide"), databaseWide = arguments.flag("--database-wide")
        if zoneWide && databaseWide { throw UsageError(message: "--zone-wide and --database-wide do not go together") }
        let info = NotificationInfo()
        info.desiredKeys = try arguments.list("--keys")
        if zoneWide || databaseWide {
            let kind = zoneWide ? "--zone-wide" : "--database-wide"
            for option in ["--where", "--on", "--once", "--all-zones", "--keys"] where arguments.has(option) {
                throw UsageError(message: "\(option) belongs to query subscriptions (--type without \(kind))")
            }
            let made: Subscription
            if zoneWide {
                let zone = RecordZoneSubscription(zoneID: store.zoneID, subscriptionID: id)
                zone.recordType = type
                made = zone
            } else {
                let database = DatabaseSubscription(subscriptionID: id)
                database.recordType = type
                made = database
            }
            made.notificationInfo = info
            return made
        }
        guard let type else { throw UsageError(message: "say what the subscription watches: --type TYPE, --zone-wide or --database-wide") }
        let predicate = try arguments.value("--where").map(QuerySelection.predicate) ?? .all
        var options: QuerySubscription.Options = []
        for name in try arguments.list("--on") ?? ["create", "update", "delete"] {
            guard let option = QuerySubscription.Options.names.first(where: { $0.0 == name })?.1 else {
                throw UsageError(message: "--on takes create, update and delete, not '\(name)'")
            }
            options.insert(option)
        }
        if arguments.flag("--once") { options.insert(.firesOnce) }
        let query = QuerySubscription(recordType: type, predicate: predicate, subscriptionID: id, options: options)
        if !arguments.flag("--all-zones") { query.zoneID = store.zoneID }
        query.notificationInfo = info
        return query
    }

    func run() async throws -> ExitCode {
        switch action {
        case .list:
            let database = try store.openDatabase(.existing)
            for subscription in try await database.allSubscriptions() { try StandardOutput.line(RecordJSONWriter.json(for: subscription)) }
            return .success
        case .create(var subscription):
            let container = try store.openContainer(.createIfMissing)
            let database = container.database(with: store.scope)
            if let query = subscription as? QuerySubscription, let recordType = query.recordType, query.predicate != .all {
                // --where values read by the schema's types (dates, references by record name),
                // as query, count, export, update and delete read them: a condition typed
                // otherwise would never hold, and the subscription would never fire.
                let typed = try await WhereClause.typed(query.predicate, recordType: recordType, in: container)
                // A subscription matches later saves: a field no save declared yet is noted now.
                WhereClause.sayFieldNotes(nothingMatched: true)
                let made = QuerySubscription(recordType: recordType, predicate: typed, subscriptionID: query.subscriptionID,
                                             options: query.querySubscriptionOptions)
                made.zoneID = query.zoneID
                made.notificationInfo = query.notificationInfo
                subscription = made
            }
            let (saved, _) = try await database.modifySubscriptions(saving: [subscription], deleting: [])
            switch saved[subscription.subscriptionID] {
            case .success(let stored)?:
                try StandardOutput.line(RecordJSONWriter.json(for: stored))
                return .success
            case .failure(let error)?:
                StratusCommand.log("subscription \(subscription.subscriptionID): \(error)")
                return .someFailed
            case nil:
                return .someFailed
            }
        case .delete(let ids):
            let database = try store.openDatabase(.existing)
            let (_, deleted) = try await database.modifySubscriptions(saving: [], deleting: ids)
            var failed = 0
            for id in ids {
                switch deleted[id] {
                case .success?: try StandardOutput.line(#"{"subscriptionID":\#(jsonString(id)),"deleted":true}"#)
                case .failure(let error)?: failed += 1; StratusCommand.log("subscription \(id): \(error)")
                case nil: failed += 1
                }
            }
            return failed == 0 ? .success : .someFailed
        }
    }

    private func jsonString(_ text: String) -> String {
        String(decoding: (try? JSONSerialization.data(withJSONObject: [text])).map { $0.dropFirst().dropLast() } ?? Data(), as: UTF8.self)
    }
}
