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
        "stratus users edit LOGIN [--record-name NAME] [--role ROLE]... [--remove-role ROLE]... [--email ADDRESS]... [--remove-email ADDRESS]... [--phone NUMBER]... [--remove-phone NUMBER]... [--given-name NAME] [--family-name NAME] [--discoverable | --undiscoverable] [store options]",
        "stratus users remove LOGIN... [store options]",
        "stratus users row-security --group ROLE [--print] [store options]",
    ]
    static let discussion = """
        A login without an entry acts under a user record name derived from the container and
        the login, the same in every process; an entry maps a login onto another record name (the
        owner of records imported from CloudKit) and gives it custom security roles.

          list          one line per entry: LOGIN, a tab, the user record name, a tab and its
                        roles (comma-separated; a role that is not a plain word in double
                        quotes); --json prints one object per line, with the
                        email addresses, phone numbers, name and discoverability too.
          add           saves an entry, replacing the login's: its record name (--record-name, else
                        the one it has, else the derived one), its roles (each --role), email
                        addresses (each --email), phone numbers (each --phone) and name
                        (--given-name, --family-name): none of them without their options. Its
                        discoverability stays as it is (the user's consent, which the user gives
                        with requestApplicationPermission) unless --discoverable or
                        --undiscoverable sets it: other users find a discoverable user by
                        email address, phone number or user record ID.
          edit          changes an entry the directory has and keeps the rest of it: --role,
                        --email and --phone add to the login's, --remove-role, --remove-email
                        and --remove-phone take away, --record-name, --given-name and
                        --family-name replace (an empty name clears it), --discoverable and
                        --undiscoverable set discoverability. A login without an entry is
                        refused (66): users add makes one.
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
        Option("--record-name", "NAME", "add, edit: the user record name the login acts under (`_` and 32 hexadecimal digits, as CloudKit's, or another record name starting with `_`)", default: "the login's, else derived"),
        Option("--role", "ROLE", "add, edit: a custom security role the login holds (repeat for more)", default: "none", repeatable: true),
        Option("--email", "ADDRESS", "add, edit: an email address user discovery finds the login by (repeat for more)", default: "none", repeatable: true),
        Option("--phone", "NUMBER", "add, edit: a phone number user discovery finds the login by (repeat for more)", default: "none", repeatable: true),
        Option("--given-name", "NAME", "add, edit: the user's given name, as discovered identities show it", default: "none"),
        Option("--family-name", "NAME", "add, edit: the user's family name, as discovered identities show it", default: "none"),
        Option(flag: "--discoverable", "add, edit: other users may find the login (as if it granted .userDiscoverability)"),
        Option(flag: "--undiscoverable", "add, edit: other users may not find the login"),
        Option("--remove-role", "ROLE", "edit: a role the login no longer holds (repeat for more)", default: "none", repeatable: true),
        Option("--remove-email", "ADDRESS", "edit: an email address the login is no longer found by (repeat for more)", default: "none", repeatable: true),
        Option("--remove-phone", "NUMBER", "edit: a phone number the login is no longer found by (repeat for more)", default: "none", repeatable: true),
        Option("--group", "ROLE", "row-security: the PostgreSQL role whose members are Stratus users", default: "required"),
        Option(flag: "--print", "row-security: print the SQL instead of running it"),
    ]

    enum Action: Equatable {
        case list(json: Bool)
        case add(login: String, recordName: String?, roles: [String], discovery: Discovery)
        case edit(login: String, changes: Edit)
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

    /// What `users edit` changes of an entry; what it leaves nil or empty stays as it is.
    struct Edit: Equatable {
        var recordName: String?
        var addedRoles: [String] = []
        var removedRoles: [String] = []
        var addedEmailAddresses: [String] = []
        var removedEmailAddresses: [String] = []
        var addedPhoneNumbers: [String] = []
        var removedPhoneNumbers: [String] = []
        var givenName: String?
        var familyName: String?
        var isDiscoverable: Bool?

        var isEmpty: Bool { self == Edit() }

        /// `entry` with the changes made, in the order the options name them.
        func applied(to entry: UserDirectoryEntry) -> UserDirectoryEntry {
            // Email addresses are one address in any case, as the directory compares them.
            func edited(_ list: [String], adding added: [String], removing removed: [String], key: (String) -> String = { $0 }) -> [String] {
                let removedKeys = Set(removed.map(key))
                var result = list.filter { !removedKeys.contains(key($0)) }
                for item in added where !result.contains(where: { key($0) == key(item) }) { result.append(item) }
                return result
            }
            var name = entry.nameComponents ?? PersonNameComponents()
            if let givenName { name.givenName = givenName.isEmpty ? nil : givenName }
            if let familyName { name.familyName = familyName.isEmpty ? nil : familyName }
            let roles = entry.roles.subtracting(removedRoles.map { SecurityRole($0) }).union(addedRoles.map { SecurityRole($0) })
            return UserDirectoryEntry(
                login: entry.login, userRecordName: recordName ?? entry.userRecordName, roles: roles,
                emailAddresses: edited(entry.emailAddresses, adding: addedEmailAddresses, removing: removedEmailAddresses, key: { $0.lowercased() }),
                phoneNumbers: edited(entry.phoneNumbers, adding: addedPhoneNumbers, removing: removedPhoneNumbers),
                nameComponents: name == PersonNameComponents() ? nil : name,
                isDiscoverable: isDiscoverable ?? entry.isDiscoverable)
        }
    }

    var store: StoreOptions
    var action: Action

    static func parse(_ arguments: ParsedArguments) throws -> UsersCommand {
        var words = arguments.positionals
        guard !words.isEmpty else { throw UsageError(message: "say list, add, edit, remove or row-security") }
        let verb = words.removeFirst()
        let action: Action
        switch verb {
        case "list":
            if let extra = words.first { throw UsageError(message: "unexpected argument '\(extra)'") }
            action = .list(json: arguments.flag("--json"))
        case "add":
            guard words.count == 1, let login = words.first else { throw UsageError(message: "add takes one LOGIN") }
            try checkLogin(login)
            let roles = try checkedRoles(arguments, "--role")
            var discovery = Discovery(emailAddresses: try checkedEmailAddresses(arguments, "--email"), phoneNumbers: try checkedPhoneNumbers(arguments, "--phone"))
            let given = arguments.value("--given-name"), family = arguments.value("--family-name")
            if given != nil || family != nil { discovery.nameComponents = PersonNameComponents(givenName: given, familyName: family) }
            discovery.isDiscoverable = try discoverability(arguments)
            action = .add(login: login, recordName: try checkedRecordName(arguments, login: login), roles: roles, discovery: discovery)
        case "edit":
            guard words.count == 1, let login = words.first else { throw UsageError(message: "edit takes one LOGIN") }
            try checkLogin(login)
            let changes = Edit(
                recordName: try checkedRecordName(arguments, login: login),
                addedRoles: try checkedRoles(arguments, "--role"), removedRoles: arguments.values("--remove-role"),
                addedEmailAddresses: try checkedEmailAddresses(arguments, "--email"), removedEmailAddresses: arguments.values("--remove-email"),
                addedPhoneNumbers: try checkedPhoneNumbers(arguments, "--phone"), removedPhoneNumbers: arguments.values("--remove-phone"),
                givenName: arguments.value("--given-name"), familyName: arguments.value("--family-name"),
                isDiscoverable: try discoverability(arguments))
            guard !changes.isEmpty else { throw UsageError(message: "edit needs a change: --record-name, --role, --email, --phone, their --remove- forms, a name or discoverability") }
            action = .edit(login: login, changes: changes)
        case "remove":
            guard !words.isEmpty else { throw UsageError(message: "remove takes one or more LOGINs") }
            for login in words { try checkLogin(login) }
            action = .remove(logins: words)
        case "row-security":
            if let extra = words.first { throw UsageError(message: "unexpected argument '\(extra)'") }
            guard let group = arguments.value("--group"), !group.isEmpty else { throw UsageError(message: "row-security needs --group ROLE") }
            action = .rowSecurity(group: group, printOnly: arguments.flag("--print"))
        default:
            throw UsageError(message: "unknown users action '\(verb)'; say list, add, edit, remove or row-security")
        }
        let entryOptions = ["--record-name", "--role", "--email", "--phone", "--given-name", "--family-name", "--discoverable", "--undiscoverable"].map { ($0, ["add", "edit"]) }
        let editOptions = ["--remove-role", "--remove-email", "--remove-phone"].map { ($0, ["edit"]) }
        for (option, belongs) in [("--json", ["list"]), ("--group", ["row-security"]), ("--print", ["row-security"])] + entryOptions + editOptions
        where arguments.has(option) && !belongs.contains(verb) {
            throw UsageError(message: "\(option) belongs to users \(belongs.joined(separator: " and "))")
        }
        return UsersCommand(store: try StoreOptions(arguments), action: action)
    }

    /// `--record-name`, checked before the store is opened (a refused name makes no store).
    private static func checkedRecordName(_ arguments: ParsedArguments, login: String) throws -> String? {
        guard let name = arguments.value("--record-name") else { return nil }
        do { try UserDirectoryEntry.checkUserRecordName(name, of: login) } catch { throw UsageError(message: "--record-name: \(error.message)") }
        return name
    }

    private static func checkedRoles(_ arguments: ParsedArguments, _ option: String) throws -> [String] {
        let roles = arguments.values(option)
        for role in roles where role.isEmpty || role.hasPrefix("_") {
            throw UsageError(message: "\(option) '\(role)': a custom role is a name not starting with '_' (CloudKit's own roles apply by themselves)")
        }
        for role in roles {
            // The directory's own rule (no '"', no control character: what a schema's CREATE ROLE
            // can name), refused as a usage error before the store is opened.
            do { try SecurityRole(role).validate() } catch { throw UsageError(message: "\(option) \(String(reflecting: role)): \(error.message)") }
        }
        return roles
    }

    private static func checkedEmailAddresses(_ arguments: ParsedArguments, _ option: String) throws -> [String] {
        let addresses = arguments.values(option)
        for address in addresses {
            do { try UserDirectoryEntry.checkEmailAddress(address) } catch { throw UsageError(message: "\(option): \(error.message)") }
        }
        return addresses
    }

    private static func checkedPhoneNumbers(_ arguments: ParsedArguments, _ option: String) throws -> [String] {
        let numbers = arguments.values(option)
        for number in numbers {
            do { try UserDirectoryEntry.checkPhoneNumber(number) } catch { throw UsageError(message: "\(option): \(error.message)") }
        }
        return numbers
    }

    private static func discoverability(_ arguments: ParsedArguments) throws -> Bool? {
        switch (arguments.flag("--discoverable"), arguments.flag("--undiscoverable")) {
        case (true, true): throw UsageError(message: "--discoverable and --undiscoverable contradict each other; give one")
        case (true, false): true
        case (false, true): false
        case (false, false): nil
        }
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
                    out += "\(entry.login)\t\(entry.userRecordName)\t\(roles.map(Self.listed).joined(separator: ","))\n"
                }
            }
            try StandardOutput.write(out)
            return .success

        case .add(let login, let recordName, let roles, let discovery):
            let container = try store.openContainer(.createIfMissing)
            let users = try await container.users()
            let existing = users.first { $0.hasLogin(login) }
            // Equal as Swift strings (canonically), yet another login by its bytes.
            let lookalike = existing == nil ? users.first { $0.login == login } : nil
            let name = recordName ?? existing?.userRecordName ?? UserDirectoryEntry.derivedRecordName(containerIdentifier: container.identifier, login: login)
            let entry = UserDirectoryEntry(login: login, userRecordName: name, roles: Set(roles.map { SecurityRole($0) }),
                                           emailAddresses: discovery.emailAddresses, phoneNumbers: discovery.phoneNumbers, nameComponents: discovery.nameComponents,
                                           isDiscoverable: discovery.isDiscoverable ?? existing?.isDiscoverable ?? false)
            try await Self.changingDirectory { try await container.saveUsers([entry]) }
            StratusCommand.note("\(existing == nil ? "added" : "replaced") \(login): \(Self.described(entry))")
            if let lookalike {
                func spelled(_ text: String) -> String { text.unicodeScalars.map { $0.isASCII ? String($0) : String(format: "U+%04X", $0.value) }.joined(separator: " ") }
                StratusCommand.log("note: the login \(login) (\(spelled(login))) differs from the login \(lookalike.login) (\(spelled(lookalike.login)), \(lookalike.userRecordName)) only in how its Unicode characters are composed: they are two users; `users remove` the one not wanted")
            }
            try await noteProblems(of: entry, roles: roles, in: container)
            return .success

        case .edit(let login, let changes):
            let container = try store.openContainer(.existing)
            guard let existing = try await container.users().first(where: { $0.hasLogin(login) }) else {
                throw CommandFailure(.inputMissing, "\(login) has no entry in the user directory of \(store.storeOrigin); stratus users add \(login) makes one")
            }
            for (option, asked, had) in [("--remove-role", changes.removedRoles, existing.roles.map(\.name)),
                                         ("--remove-email", changes.removedEmailAddresses.map { $0.lowercased() }, existing.emailAddresses.map { $0.lowercased() }),
                                         ("--remove-phone", changes.removedPhoneNumbers, existing.phoneNumbers)] {
                for item in asked where !had.contains(item) { StratusCommand.log("note: \(option) \(item): \(login) did not have it") }
            }
            let entry = changes.applied(to: existing)
            guard entry != existing else {
                StratusCommand.note("\(login) unchanged: \(Self.described(entry))")
                return .success
            }
            try await Self.changingDirectory { try await container.saveUsers([entry]) }
            StratusCommand.note("edited \(login): \(Self.described(entry))")
            try await noteProblems(of: entry, roles: changes.addedRoles, in: container)
            return .success

        case .remove(let logins):
            let container = try store.openContainer(.existing)
            let known = try await container.users()
            try await Self.changingDirectory { try await container.removeUsers(logins: logins) }
            let missing = logins.filter { login in !known.contains { $0.hasLogin(login) } }
            // Logins not in the directory are worth a look even under --quiet.
            let said = "removed \(logins.count - missing.count) of \(logins.count)" + (missing.isEmpty ? "" : "; not in the directory: \(missing.joined(separator: ", "))")
            if missing.isEmpty { StratusCommand.note(said) } else { StratusCommand.log(said) }
            return .success

        case .rowSecurity(let group, let printOnly):
            // The administrator sets security up first on a new database: its tables are made
            // then (an SQLite path is never made: it has no roles).
            let isPostgres = PostgresEngine.isStoreURL(store.resolvedStorePath)
            let engine = try StoreOptions.openEngine(store.resolvedStorePath, access: isPostgres && !printOnly ? .createIfMissing : .existing, origin: store.storeOrigin)
            guard let postgres = engine as? PostgresEngine else {
                throw UsageError(message: "row-security is for a PostgreSQL store; \(store.storeOrigin) is an SQLite file, whose readers are whoever may read the file")
            }
            if printOnly {
                try StandardOutput.write(try postgres.rowLevelSecuritySQL(group: group))
            } else {
                try postgres.enableRowLevelSecurity(group: group)
                StratusCommand.note("members of \(group) now reach the public database and their own private rows only, in \(postgres.redactedURL)")
            }
            return .success
        }
    }

    /// A role as `list` writes it: bare when it is a plain word, else in double quotes as a
    /// schema writes it, so a role named `a,b` is not read as the roles `a` and `b`.
    static func listed(_ role: String) -> String {
        let plain = role.unicodeScalars.allSatisfy { $0.properties.isAlphabetic || $0.properties.numericType != nil || $0 == "_" || $0 == "-" || $0 == "." }
        return plain ? role : "\"\(role)\""
    }

    /// An entry as `add` and `edit` report it: its record name, roles and discoverability.
    private static func described(_ entry: UserDirectoryEntry) -> String {
        let roles = entry.roles.map(\.name).sorted()
        return "\(entry.userRecordName)\(roles.isEmpty ? "" : " with " + roles.joined(separator: ", "))\(entry.isDiscoverable ? ", discoverable" : "")"
    }

    /// Notes what would keep a saved entry from working: its login is no role that may use a
    /// PostgreSQL store with row-level security, or `roles` names roles no schema declares.
    private func noteProblems(of entry: UserDirectoryEntry, roles: [String], in container: Container) async throws {
        // The entry is kept all the same (the role may be made later), but a misspelt login
        // would leave the user's role without rows and no one told.
        if let postgres = container.engine as? PostgresEngine, let problem = try postgres.rowSecurityLoginProblem(entry.login) {
            StratusCommand.log("note: \(problem)")
        }
        // Given all the same (a schema may come later), but a misspelt role grants nothing.
        let declared = Set(try await container.schema().roles.map(\.name))
        for role in Set(roles).subtracting(declared).sorted() {
            let known = declared.isEmpty ? "declares no role yet" : "declares " + declared.sorted().joined(separator: ", ")
            StratusCommand.log("note: the \(store.environment) schema \(known), not \(role): the role grants nothing until a schema declares it (CREATE ROLE \(role); in a schema file, then stratus schema import)")
        }
    }
}
