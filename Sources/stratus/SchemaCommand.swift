import Foundation
import Stratus
import StratusTransfer

/// `stratus schema export|import|validate|diff|deploy|reset`: a container's schema as
/// CloudKit's `.ckdb` files describe it, per environment.
struct SchemaCommand: Command {
    static let name = "schema"
    static let summary = "export, import, validate, diff, deploy and reset schemas (.ckdb)"
    static let usage = [
        "stratus schema export [--output FILE [--force]] [store options]",
        "stratus schema import FILE [store options]",
        "stratus schema validate FILE [store options]",
        "stratus schema diff FILE [store options]",
        "stratus schema deploy [store options]",
        "stratus schema reset --yes [store options]",
    ]
    static let discussion = """
        Schemas are written in CloudKit's schema language, as `cktool export-schema` writes them.
        Each environment (--environment) has its own: development grows as records are saved,
        production changes only by deploying.
          export    prints the environment's schema (or writes it to --output FILE).
          import    checks FILE and replaces the development schema with it: roles, record types,
                    fields, indexes (built over the records stored) and grants. It must keep every
                    record type and field production has, with its type, and may not change the
                    type of a field that records hold (exit 65, nothing changed).
          validate  checks FILE (its syntax, with line and column, and CloudKit's rules) and, when
                    the store exists, that import would accept it. Exit 0 when it is valid.
          diff      prints what changes from the environment's schema to FILE, one line each
                    (+ added, - removed, ~ changed). Exit 0 when they are the same, 1 when not.
          deploy    copies the development schema to production. Additive only: a record type or
                    field production has that development removed or retyped fails the deploy
                    (exit 65), and production stays as it was. Records are not copied.
          reset     deletes every record and zone of the development environment (every database,
                    every user) and sets its schema back to production's. Needs --yes.
        A FILE of - is standard input (`… | stratus schema import -`).
        """
    static let options: [Option] = [
        Option("--output", "FILE", "export: write the schema to FILE as `stratus export --output` writes: a file under a temporary name, synced and moved into place when complete (a symbolic link is followed and stays a link); a FIFO, a device or /dev/stdout directly", default: "stdout"),
        Option(flag: "--force", "export: replace an existing FILE, or create the missing target of a symbolic link"),
        Option(flag: "--yes", "reset: confirm deleting the development environment's data"),
    ]
    static let exitNotes: String? = """
        schema diff exits 1 when the schemas differ; import, validate and deploy exit 65 for a
        file or a change CloudKit would refuse.
        """

    enum Action: Equatable {
        case export(output: OutputOptions)
        case importFile(String)
        case validate(String)
        case diff(String)
        case deploy
        case reset
    }

    var store: StoreOptions
    var action: Action

    static func parse(_ arguments: ParsedArguments) throws -> SchemaCommand {
        var words = arguments.positionals
        guard !words.isEmpty else { throw UsageError(message: "say export, import, validate, diff, deploy or reset") }
        let verb = words.removeFirst()
        func file() throws -> String {
            guard let path = words.first else { throw UsageError(message: "\(verb) needs a schema FILE") }
            // An unset shell variable (`schema import "$FILE"`), as for a FILE option.
            if path.isEmpty { throw UsageError(message: "\(verb) needs a non-empty schema FILE") }
            if let extra = words.dropFirst().first { throw UsageError(message: "unexpected argument '\(extra)'") }
            return path
        }
        func nothingMore() throws {
            if let extra = words.first { throw UsageError(message: "unexpected argument '\(extra)'") }
        }
        let action: Action
        switch verb {
        case "export": try nothingMore(); action = .export(output: try OutputOptions(arguments))
        case "import": action = .importFile(try file())
        case "validate": action = .validate(try file())
        case "diff": action = .diff(try file())
        case "deploy": try nothingMore(); action = .deploy
        case "reset": try nothingMore(); action = .reset
        default: throw UsageError(message: "unknown schema action '\(verb)'; say export, import, validate, diff, deploy or reset")
        }
        if arguments.has("--output") || arguments.flag("--force"), case .export = action {} else if arguments.has("--output") || arguments.flag("--force") {
            throw UsageError(message: "\(arguments.has("--output") ? "--output" : "--force") belongs to schema export")
        }
        if arguments.flag("--yes") && action != .reset { throw UsageError(message: "--yes belongs to schema reset") }
        let store = try StoreOptions(arguments)
        // STRATUS_ENVIRONMENT is a default for the commands that work in one environment;
        // deploy works in both, so only the option is a mistake there.
        let fromVariable = arguments.has("--environment") ? "" : " (STRATUS_ENVIRONMENT is set to production; give --environment development)"
        switch action {
        case .importFile where store.environment == .production:
            throw UsageError(message: "import replaces the development schema; production's changes only by `stratus schema deploy`\(fromVariable)")
        case .deploy where arguments.has("--environment"):
            throw UsageError(message: "deploy always copies development to production; it takes no --environment")
        case .reset where store.environment == .production:
            throw UsageError(message: "reset is for the development environment only; production is never reset\(fromVariable)")
        case .reset where !arguments.flag("--yes"):
            throw UsageError(message: "reset deletes every record and zone of the development environment and sets its schema back to production's; run it again with --yes")
        default: break
        }
        return SchemaCommand(store: store, action: action)
    }

    func run() async throws -> ExitCode {
        switch action {
        case .export(let output):
            let schema = try await store.openContainer(.existing).schema()
            if let path = output.path {
                // As export's --output: a FIFO or a device is written, never replaced by a file
                // (an atomic write renamed a file over /dev/null when run as root), and an
                // existing file is replaced only with --force.
                let file = try OutputFile(path: path, force: output.force)
                do {
                    try file.handle.write(contentsOf: SchemaWriter().data(for: schema))
                    try file.commit()
                } catch let failure as CommandFailure {
                    file.abandon()
                    throw failure
                } catch {
                    file.abandon()
                    throw CommandFailure(.cannotCreateOutput, "cannot write \(path): \(error.localizedDescription)")
                }
                // The file holds Users whether or not the stored schema declares it (SchemaWriter adds it).
                var written = schema
                written.includeUsersRecordType()
                StratusCommand.note("wrote the \(store.environment) schema (\(Self.describe(written, countingUsers: true))) to \(path)")
            } else {
                try StandardOutput.write(SchemaWriter().data(for: schema))
            }
            return .success

        case .importFile(let path):
            let (file, declaresUsers) = try Self.read(path)
            let container = try store.openContainer(.createIfMissing)
            let before = try await container.schema()
            let schema = file.keepingCompoundIndexes(of: before)
            let imported = try await Self.refusingData { try await container.replaceSchema(schema) }
            let changes = before.changes(to: imported)
            StratusCommand.note("imported \(Self.shown(path)) as the development schema (\(Self.describe(file, countingUsers: declaresUsers))): \(changes.isEmpty ? "no change" : "\(changes.count) change(s)")")
            let kept = Self.compoundIndexCount(schema) - Self.compoundIndexCount(file)
            if kept > 0 {
                StratusCommand.note("kept \(kept) compound index(es) of the stored schema, which the schema language cannot express")
            }
            // CloudKit's development schema may drop a type whose records remain; say so, so
            // that a type left out of a file by mistake is noticed.
            let dropped = changes.compactMap { change -> String? in
                if case .recordTypeRemoved(let type) = change { type } else { nil }
            }
            // A file without GRANT lines for a type takes its grants away (CloudKit's rule), which
            // a file written for Stratus before 0.11 did not: say so where records are at stake.
            let sealed = changes.compactMap { change -> String? in
                if case .grantsChanged(let type, let old, let new) = change, !old.isEmpty, new.isEmpty { type } else { nil }
            }
            guard !dropped.isEmpty || !sealed.isEmpty else { return .success }
            let counts = try await container.recordCountsByType()
            // The types of `types` that hold records, each with its count.
            func holdingRecords(_ types: [String], _ suffix: String = "") -> String? {
                let holding = types.filter { (counts[$0] ?? 0) > 0 }.sorted()
                return holding.isEmpty ? nil : holding.map { "\($0) (\(StoreReport.counted(counts[$0] ?? 0, "record"))\(suffix))" }.joined(separator: ", ")
            }
            if let listed = holdingRecords(sealed, " in all databases") {
                StratusCommand.log("note: the file gives \(listed) no GRANT lines, so it now grants nothing: users can no longer read, create or change its records in the public database (the private and shared databases are not affected); add GRANT lines to keep it usable there")
            }
            if let listed = holdingRecords(dropped) {
                StratusCommand.log("note: the schema no longer declares \(listed), whose records stay: they are still read, and a development save of one declares its type again; delete them with `stratus delete --type TYPE --all --yes`")
            }
            return .success

        case .validate(let path):
            let (schema, declaresUsers) = try Self.read(path)
            if let container = try Self.existingContainer(store) {
                try await Self.refusingData { try await container.container(in: .development).checkSchemaReplacement(schema, for: "import \(Self.shown(path))") }
            }
            StratusCommand.note("\(Self.shown(path)) is valid (\(Self.describe(schema, countingUsers: declaresUsers)))")
            return .success

        case .diff(let path):
            let schema = try Self.read(path).schema
            let stored = try await store.openContainer(.existing).schema()
            let changes = stored.changes(to: schema.keepingCompoundIndexes(of: stored))
            let output = changes.map { $0.description + "\n" }.joined()
            try StandardOutput.write(output)
            StratusCommand.log(changes.isEmpty ? "the \(store.environment) schema and \(Self.shown(path)) are the same" : "\(changes.count) difference(s) from the \(store.environment) schema to \(Self.shown(path))")
            return changes.isEmpty ? .success : .someFailed

        case .deploy:
            let container = try store.openContainer(.existing)
            let production = try await container.container(in: .production).schema()
            let deployed = try await Self.refusingData { try await container.deploySchema() }
            let changes = production.changes(to: deployed)
            for change in changes { StratusCommand.note("deployed: \(change)") }
            StratusCommand.note(changes.isEmpty ? "production already had the development schema" : "deployed \(changes.count) change(s) to production (\(Self.describe(deployed, countingUsers: false, sayingSo: true)))")
            return .success

        case .reset:
            let container = try store.openContainer(.existing)
            try await container.resetDevelopmentEnvironment()
            StratusCommand.note("reset the development environment of \(container.identifier): its records and zones are deleted, its schema is production's")
            return .success
        }
    }

    /// How many compound indexes the schema's record types declare.
    static func compoundIndexCount(_ schema: ContainerSchema) -> Int {
        schema.recordTypes.reduce(0) { $0 + $1.compoundIndexes.count }
    }

    /// The store's container when there is a store, `nil` when there is none (an SQLite file
    /// that is not there, a PostgreSQL database without Stratus's tables): validate then checks
    /// the file alone.
    static func existingContainer(_ store: StoreOptions) throws -> Container? {
        do {
            return try store.openContainer(.read)
        } catch let failure as CommandFailure where failure.code == .inputMissing {
            return nil
        } catch let error as StratusError where error.code == .badContainer {
            return nil
        }
    }

    /// A schema file, read and checked: exit 66 when it cannot be read, 65 with its line and
    /// column when it breaks the language or CloudKit's rules. `declaresUsers` tells whether the file declares the `Users` type, which the schema has
    /// either way (CloudKit's containers always have it; hand-written files leave it out).
    static func read(_ path: String) throws -> (schema: ContainerSchema, declaresUsers: Bool) {
        let data = try readFile(path)
        do {
            var reader = SchemaReader()
            reader.includesUsersRecordType = false
            var schema = try reader.read(data)
            let declaresUsers = schema.recordType(ContainerSchema.usersRecordType) != nil
            schema.includeUsersRecordType()
            try schema.validate()
            return (schema, declaresUsers)
        } catch let error as StratusError {
            // The reader's messages start with the line and column.
            throw CommandFailure(.dataError, "\(shown(path)):" + (error.line == nil ? " " : "") + error.message)
        }
    }

    /// How messages name a schema FILE argument: `-` is standard input.
    static func shown(_ path: String) -> String { path == "-" ? "stdin" : path }

    /// The bytes of the schema file at `path`, read with the system's own calls so that a
    /// folder, a device or a missing file is named as what it is (Foundation's messages for
    /// them are a permission error and a bare error number). At most
    /// ``SchemaReader/maximumFileSize`` bytes are read: a device such as `/dev/zero`, or a FIFO
    /// that never ends, would otherwise be read until memory runs out.
    ///
    /// - Throws: ``CommandFailure`` `permissionDenied` for a file the user may not read,
    ///   `inputMissing` saying what else is wrong with the file, `dataError` when it is larger
    ///   than the limit.
    static func readFile(_ path: String) throws -> Data {
        let limit = SchemaReader().maximumFileSize
        // `-` is standard input, as for `stratus import`; a duplicate is closed like a file.
        let descriptor = path == "-" ? dup(STDIN_FILENO) : open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            let reason = errno
            // 77 for a file the user may not read, as for every other file a command reads.
            let code: ExitCode = reason == EACCES || reason == EPERM ? .permissionDenied : .inputMissing
            throw CommandFailure(code, "cannot read the schema file \(shown(path)): \(String(cString: strerror(reason)))")
        }
        defer { close(descriptor) }
        var info = stat()
        if fstat(descriptor, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR {
            throw CommandFailure(.inputMissing, "cannot read the schema file \(shown(path)): it is a folder")
        }
        let data = try ReadableFile.bytes(of: descriptor, atMost: limit, what: "the schema file \(shown(path))")
        if data.count > limit {
            throw CommandFailure(.dataError, "\(shown(path)): the schema file is larger than \(limit) bytes; schema files are far smaller (is it the right file?)")
        }
        return data
    }

    /// Runs `body`, turning CloudKit's refusals (`invalidArguments`) into exit 65.
    @discardableResult
    static func refusingData<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as StratusError where error.code == .invalidArguments {
            throw CommandFailure(.dataError, error.message)
        }
    }

    /// How many record types and roles `schema` declares, for messages: `Users`, which every
    /// schema has, is counted with `countingUsers` (a file that declares it, as exports do),
    /// else left out, and said to be with `sayingSo` (`1 record type(s) besides Users`).
    static func describe(_ schema: ContainerSchema, countingUsers: Bool, sayingSo: Bool = false) -> String {
        let types = schema.recordTypes.count { countingUsers || $0.recordType != ContainerSchema.usersRecordType }
        return "\(types) record type(s)\(!countingUsers && sayingSo ? " besides Users" : ""), \(schema.roles.count) role(s)"
    }
}
