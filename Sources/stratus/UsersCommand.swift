import Foundation
import Stratus
import StratusPostgres

/// `stratus users`: the container's user directory (who each login is and which roles it holds)
/// and, on PostgreSQL, the row-level security that makes each Stratus user a database role.
struct UsersCommand: Command {
    static let name = "users"
    static let summary = "logins, their user record names and roles; PostgreSQL row-level security"
    static let usage = [
        "stratus users list [--json] [store options]",
        "stratus users add LOGIN [--record-name NAME] [--role ROLE]... [--email ADDRESS]... [--phone NUMBER]... [--given-name NAME] [--family-name NAME] [--discoverable | --undiscoverable] [store options]",
        "stratus users remove LOGIN... [store options]",
        "stratus users row-security --group ROLE [--print] [store options]",
    ]
    static let discussion = """
        A login without an entry acts under a user record name derived from the container and
        the login, the same in every process; an entry maps a login onto another record name (the
        owner of records imported from CloudKit) and gives it custom security roles.

          list          one line per entry: LOGIN, a tab, the user record name, a tab and its
                        roles (comma-separated); --json prints one object per line, with the
                        email addresses, phone numbers, name and discoverability too.
          add           saves an entry, replacing the login's: its record name (--record-name, else
                        the one it has, else the derived one), its roles (each --role), email
                        addresses (each --email), phone numbers (each --phone) and name
                        (--given-name, --family-name): none of them without their options. Its
                        discoverability stays as it is (the user's consent, which the user gives
                        with requestApplicationPermission) unless --discoverable or
                        --undiscoverable sets it: other users find a discoverable user by
                        email address, phone number or user record ID.
          remove        removes entries: the logins act under their derived names again.
          row-security  PostgreSQL only: makes every member of the group ROLE reach the public
                        database and its own private rows only, and write only its own rows
                        (public records it creates, created or whose grants let it write), even
                        with raw SQL. Run it as the role that owns the store's tables (again
                        after an upgrade does no harm; for another group than the one it was
                        set up for it is refused, as that group's members would lose their
                        rows); --print prints the SQL instead. Each user then connects as a
                        PostgreSQL role whose name is its login (the default --user on
                        PostgreSQL) and needs an entry here (`users add LOGIN`).
        """
    static let options: [Option] = [
        Option(flag: "--json", "list: one JSON object per entry"),
        Option("--record-name", "NAME", "add: the user record name the login acts under (`_` and 32 hexadecimal digits, or any record name)", default: "the login's, else derived"),
        Option("--role", "ROLE", "add: a custom security role the login holds (repeat for more)", default: "none", repeatable: true),
        Option("--email", "ADDRESS", "add: an email address user discovery finds the login by (repeat for more)", default: "none", repeatable: true),
        Option("--phone", "NUMBER", "add: a phone number user discovery finds the login by (repeat for more)", default: "none", repeatable: true),
        Option("--given-name", "NAME", "add: the user's given name, as discovered identities show it", default: "none"),
        Option("--family-name", "NAME", "add: the user's family name, as discovered identities show it", default: "none"),
        Option(flag: "--discoverable", "add: other users may find the login (as if it granted .userDiscoverability)"),
        Option(flag: "--undiscoverable", "add: other users may not find the login"),
        Option("--group", "ROLE", "row-security: the PostgreSQL role whose members are Stratus users", default: "required"),
        Option(flag: "--print", "row-security: print the SQL instead of running it"),
    ]

    enum Action: Equatable {
        case list(json: Bool)
        case add(login: String, recordName: String?, roles: [String], discovery: Discovery)
        case remove(logins: [String])
        case rowSecurity(group: String, printOnly: Bool)
    }

    /// What `users add` gives discovery: addresses and a name, and discoverability when set.
    struct Discovery: Equatable {
        var emailAddresses: [String] = []
        var phoneNumbers: [String] = []
        var nameComponents: PersonNameComponents?
        var isDiscoverable: Bool?
    }

    var store: StoreOptions
    var action: Action

    static func parse(_ arguments: ParsedArguments) throws -> UsersCommand {
        var words = arguments.positionals
        guard !words.isEmpty else { throw UsageError(message: "say list, add, remove or row-security") }
        let verb = words.removeFirst()
        let action: Action
        switch verb {
        case "list":
            if let extra = words.first { throw UsageError(message: "unexpected argument '\(extra)'") }
            action = .list(json: arguments.flag("--json"))
        case "add":
            guard words.count == 1, let login = words.first else { throw UsageError(message: "add takes one LOGIN") }
            try checkLogin(login)
            let roles = arguments.values("--role")
            for role in roles where role.isEmpty || role.hasPrefix("_") {
                throw UsageError(message: "--role '\(role)': a custom role is a name not starting with '_' (CloudKit's own roles apply by themselves)")
            }
            var discovery = Discovery(emailAddresses: arguments.values("--email"), phoneNumbers: arguments.values("--phone"))
            for address in discovery.emailAddresses {
                do { try UserDirectoryEntry.checkEmailAddress(address) } catch { throw UsageError(message: "--email: \(error.message)") }
            }
            for number in discovery.phoneNumbers {
                do { try UserDirectoryEntry.checkPhoneNumber(number) } catch { throw UsageError(message: "--phone: \(error.message)") }
            }
            let given = arguments.value("--given-name"), family = arguments.value("--family-name")
            if given != nil || family != nil { discovery.nameComponents = PersonNameComponents(givenName: given, familyName: family) }
            switch (arguments.flag("--discoverable"), arguments.flag("--undiscoverable")) {
            case (true, true): throw UsageError(message: "--discoverable and --undiscoverable contradict each other; give one")
            case (true, false): discovery.isDiscoverable = true
            case (false, true): discovery.isDiscoverable = false
            case (false, false): discovery.isDiscoverable = nil
            }
            action = .add(login: login, recordName: arguments.value("--record-name"), roles: roles, discovery: discovery)
        case "remove":
            guard !words.isEmpty else { throw UsageError(message: "remove takes one or more LOGINs") }
            for login in words { try checkLogin(login) }
            action = .remove(logins: words)
        case "row-security":
            if let extra = words.first { throw UsageError(message: "unexpected argument '\(extra)'") }
            guard let group = arguments.value("--group"), !group.isEmpty else { throw UsageError(message: "row-security needs --group ROLE") }
            action = .rowSecurity(group: group, printOnly: arguments.flag("--print"))
        default:
            throw UsageError(message: "unknown users action '\(verb)'; say list, add, remove or row-security")
        }
        let addOptions = ["--record-name", "--role", "--email", "--phone", "--given-name", "--family-name", "--discoverable", "--undiscoverable"].map { ($0, "add") }
        for (option, belongs) in [("--json", "list"), ("--group", "row-security"), ("--print", "row-security")] + addOptions
        where arguments.has(option) && verb != belongs {
            throw UsageError(message: "\(option) belongs to users \(belongs)")
        }
        return UsersCommand(store: try StoreOptions(arguments), action: action)
    }

    private static func checkLogin(_ login: String) throws {
        do { try UserDirectoryEntry.checkLogin(login) } catch { throw UsageError(message: "login '\(login)': \(error.localizedDescription)") }
    }

    /// Runs a change of the user directory; on PostgreSQL a role the database does not let
    /// write it (a member of the row-level security group) is told who may, rather than
    /// shown the server's `permission denied for table user_directory`.
    static func changingDirectory(_ change: () async throws -> Void) async throws {
        do {
            try await change()
        } catch let error as StratusError where error.code == .permissionFailure && error.sqlState == "42501" {
            throw CommandFailure(.permissionDenied, "only the role that owns the store's tables changes the user directory (run stratus users add or remove as that role): \(error.message)")
        } catch let error as StratusError where error.code == .constraintViolation {
            // Another login has the record name: the command's data conflicts with the directory's.
            throw CommandFailure(.dataError, error.message)
        }
    }

    func run() async throws -> ExitCode {
        switch action {
        case .list(let json):
            let entries = try await store.openContainer(.read).users()
            var out = ""
            for entry in entries {
                let roles = entry.roles.map(\.name).sorted()
                if json {
                    var object: [String: Any] = ["login": entry.login, "userRecordName": entry.userRecordName, "roles": roles,
                                                 "emailAddresses": entry.emailAddresses, "phoneNumbers": entry.phoneNumbers, "discoverable": entry.isDiscoverable]
                    if let name = entry.nameComponents {
                        object["name"] = ["givenName": name.givenName, "familyName": name.familyName, "middleName": name.middleName,
                                          "namePrefix": name.namePrefix, "nameSuffix": name.nameSuffix, "nickname": name.nickname].compactMapValues { $0 }
                    }
                    let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
                    out += String(decoding: data, as: UTF8.self) + "\n"
                } else {
                    out += "\(entry.login)\t\(entry.userRecordName)\t\(roles.joined(separator: ","))\n"
                }
            }
            try StandardOutput.write(out)
            return .success

        case .add(let login, let recordName, let roles, let discovery):
            let container = try store.openContainer(.createIfMissing)
            let existing = try await container.users().first { $0.login == login }
            let name = recordName ?? existing?.userRecordName ?? UserDirectoryEntry.derivedRecordName(containerIdentifier: container.identifier, login: login)
            let entry = UserDirectoryEntry(login: login, userRecordName: name, roles: Set(roles.map { SecurityRole($0) }),
                                           emailAddresses: discovery.emailAddresses, phoneNumbers: discovery.phoneNumbers, nameComponents: discovery.nameComponents,
                                           isDiscoverable: discovery.isDiscoverable ?? existing?.isDiscoverable ?? false)
            try await Self.changingDirectory { try await container.saveUsers([entry]) }
            StratusCommand.log("\(existing == nil ? "added" : "replaced") \(login): \(name)\(roles.isEmpty ? "" : " with " + roles.sorted().joined(separator: ", "))\(entry.isDiscoverable ? ", discoverable" : "")")
            // The entry is kept all the same (the role may be made later), but a misspelt login
            // would leave the user's role without rows and no one told.
            if let postgres = container.engine as? PostgresEngine, let problem = try postgres.rowSecurityLoginProblem(login) {
                StratusCommand.log("note: \(problem)")
            }
            // Given all the same (a schema may come later), but a misspelt role grants nothing.
            let declared = Set(try await container.schema().roles.map(\.name))
            for role in Set(roles).subtracting(declared).sorted() {
                let known = declared.isEmpty ? "declares no role yet" : "declares " + declared.sorted().joined(separator: ", ")
                StratusCommand.log("note: the \(store.environment) schema \(known), not \(role): the role grants nothing until a schema declares it (CREATE ROLE \(role); in a schema file, then stratus schema import)")
            }
            return .success

        case .remove(let logins):
            let container = try store.openContainer(.existing)
            let known = Set(try await container.users().map(\.login))
            try await Self.changingDirectory { try await container.removeUsers(logins: logins) }
            let missing = logins.filter { !known.contains($0) }
            StratusCommand.log("removed \(logins.count - missing.count) of \(logins.count)" + (missing.isEmpty ? "" : "; not in the directory: \(missing.joined(separator: ", "))"))
            return .success

        case .rowSecurity(let group, let printOnly):
            let engine = try StoreOptions.openEngine(store.resolvedStorePath, access: .existing, origin: store.storeOrigin)
            guard let postgres = engine as? PostgresEngine else {
                throw UsageError(message: "row-security is for a PostgreSQL store; \(store.storeOrigin) is an SQLite file, whose readers are whoever may read the file")
            }
            if printOnly {
                try StandardOutput.write(try postgres.rowLevelSecuritySQL(group: group))
            } else {
                try postgres.enableRowLevelSecurity(group: group)
                StratusCommand.log("members of \(group) now reach the public database and their own private rows only, in \(postgres.redactedURL)")
            }
            return .success
        }
    }
}
