import Foundation
import Stratus

/// `stratus assets gc|attach|get|info`: the store's asset content.
struct AssetsCommand: Command {
    static let name = "assets"
    static let summary = "collect unreferenced asset content, attach downloaded CloudKit assets, read content"
    static let usage = [
        "stratus assets gc [store options]",
        "stratus assets attach DIR [--follow-symlinks] [--as-administrator] [store options]",
        "stratus assets get RECORD_NAME FIELD [--index N] [--output FILE [--force]] [store options]",
        "stratus assets info [store options]",
    ]
    static let discussion = """
        Asset content is kept once per content (by its SHA-256), private to the store's user, and
        written before the records that name it. Writes remove the content they stop naming
        (replaced values, deleted records, failed saves) on their own.

        gc removes every content no record names and what stopped writers left (unfinished
        copies, holds), safely while other processes write; it prints what it removed.

        attach gives CloudKit assets kept without content (imported with their https downloadURL)
        the files of DIR: a file named by the asset's fileChecksum in base64url ('+' as '-', '/'
        as '_'), or DIR/<record name>/<field> (a list's assets <field>.<index>, from 0; record
        name bytes other than letters, digits, '.', '_', '-' as %XX). A file whose size differs
        from the asset's CloudKit size is not attached. Records keep their change tag and
        modification date. Files are read as import reads them: regular files inside DIR only.
        In the public database a user may only save the records its security roles let it
        write; --as-administrator attaches to every user's records (an export of a public
        database restored with import --as-administrator).

        get writes one asset's content to stdout or FILE; an asset whose content the store does
        not hold (a CloudKit asset not attached) is exit 66 (assetNotAvailable).

        info prints how many contents the store holds for the database and their bytes.
        """
    static let options: [Option] = [
        Option(flag: "--follow-symlinks", "attach: follow symbolic links that stay inside DIR"),
        Option(flag: "--as-administrator", "attach: to the public database's records as the store's administrator, whoever created them (on PostgreSQL, row-level security still binds the login role)"),
        Option("--index", "N", "get: the asset of a list field at N (from 0)", default: "0"),
    ]
    static let optionGroups: [OptionGroup] = [.output, .store]

    enum Action {
        case gc, attach(String), get(String, String), info
    }

    var store: StoreOptions
    var action: Action
    var followSymlinks = false
    var asAdministrator = false
    var index = 0
    var output: OutputOptions

    static func parse(_ arguments: ParsedArguments) throws -> AssetsCommand {
        var words = arguments.positionals
        guard !words.isEmpty else { throw UsageError(message: "say gc, attach, get or info") }
        let verb = words.removeFirst()
        let action: Action
        switch (verb, words.count) {
        case ("gc", 0): action = .gc
        case ("info", 0): action = .info
        case ("attach", 1) where words[0].isEmpty: throw UsageError(message: "assets attach needs a non-empty folder")
        case ("attach", 1): action = .attach(words[0])
        case ("get", 2): action = .get(words[0], words[1])
        case ("gc", _), ("info", _), ("attach", _), ("get", _):
            throw UsageError(message: "assets \(verb) takes \(verb == "attach" ? "a folder" : verb == "get" ? "a record name and a field" : "no arguments")")
        default:
            throw UsageError(message: "unknown assets action '\(verb)'; say gc, attach, get or info")
        }
        var command = AssetsCommand(store: try StoreOptions(arguments), action: action, output: try OutputOptions(arguments))
        command.followSymlinks = arguments.flag("--follow-symlinks")
        command.index = try arguments.count("--index") ?? 0
        command.asAdministrator = arguments.flag("--as-administrator")
        if command.followSymlinks, case .attach = action {} else if command.followSymlinks {
            throw UsageError(message: "--follow-symlinks belongs to assets attach")
        }
        if command.asAdministrator, case .attach = action {} else if command.asAdministrator {
            throw UsageError(message: "--as-administrator belongs to assets attach")
        }
        if command.asAdministrator { try command.store.checkAdministratorScope() }
        return command
    }

    func run() async throws -> ExitCode {
        let database = try asAdministrator ? store.openAdministratorDatabase(.existing) : store.openDatabase(.existing)
        switch action {
        case .gc:
            let collected = try await database.collectUnreferencedAssets()
            // What was removed is a report, not output a script reads: a cron job's --quiet run says nothing.
            if !StratusCommand.isQuiet.load(ordering: .relaxed) {
                try StandardOutput.line("removed \(Progress.grouped(collected.removedContents)) unreferenced content(s) (\(Progress.grouped(Int(collected.removedBytes))) bytes), \(Progress.grouped(collected.removedUploads)) unfinished \(collected.removedUploads == 1 ? "copy" : "copies"), \(Progress.grouped(collected.releasedHolds)) hold(s) of stopped writers")
            }
            return .success
        case .info:
            let (count, bytes) = try await database.assetContentInventory()
            try StandardOutput.line("\(count) content(s), \(Progress.grouped(Int(bytes))) bytes")
            return .success
        case .attach(let folder):
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: folder, isDirectory: &isFolder), isFolder.boolValue else {
                throw CommandFailure(.inputMissing, "\(folder) is not a folder")
            }
            let attacher = AssetAttacher(database: database, folder: URL(fileURLWithPath: folder, isDirectory: true).standardizedFileURL,
                                         followsSymlinks: followSymlinks, zoneIDs: store.zoneGiven ? [store.zoneID] : nil)
            let summary = try await attacher.run()
            for failure in summary.failures.prefix(10) { StratusCommand.log(failure) }
            StratusCommand.note("attached \(summary.attached), not found \(summary.notFound), size differs \(summary.sizeDiffers), failed \(summary.failures.count)")
            return summary.failures.isEmpty ? .success : .someFailed
        case .get(let name, let field):
            let id = Record.ID(recordName: name, zoneID: store.zoneID)
            let record: Record
            do {
                record = try await database.record(for: id)
            } catch let error as StratusError where error.code == .unknownItem {
                throw CommandFailure(.inputMissing, "there is no record '\(name)' in zone \(store.zoneID.zoneName)")
            }
            let asset: Asset
            switch record.fieldValue(forKey: field) {
            case .asset(let one)? where index == 0: asset = one
            // A field of one asset has no element past the first: answering that asset would
            // hand out another content than the one asked for.
            case .asset?: throw CommandFailure(.inputMissing, "field '\(field)' of '\(name)' holds one asset, not a list; --index \(index) is past it")
            case .assetList(let list)? where index < list.count: asset = list[index]
            case .assetList(let list)?: throw CommandFailure(.inputMissing, "field '\(field)' of '\(name)' holds \(list.count) asset(s); --index \(index) is past them")
            default: throw CommandFailure(.inputMissing, "record '\(name)' has no asset field '\(field)'")
            }
            let url: URL
            do {
                url = try await database.assetContentURL(for: asset)
            } catch let error as StratusError where error.code == .assetNotAvailable {
                throw CommandFailure(.inputMissing, "assetNotAvailable: \(error.message)")
            }
            let out = try OutputFile(path: output.path, force: output.force)
            do {
                guard let input = FileHandle(forReadingAtPath: url.path) else { throw CommandFailure(.inputMissing, "cannot read \(url.path)") }
                while let chunk = try input.read(upToCount: 1 << 20), !chunk.isEmpty {
                    // A closed pipe or a full disk is the output's failure (73, with the system's reason), as export's.
                    try FileDescriptorOutput.writeAll(chunk, to: out.handle.fileDescriptor, name: output.path ?? "stdout")
                }
                try out.commit()
            } catch {
                out.abandon()
                throw error
            }
            return .success
        }
    }
}
