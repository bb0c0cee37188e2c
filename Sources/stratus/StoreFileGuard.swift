import Foundation
import StratusPostgres
import StratusSQLite

/// Refuses a file or folder option (`--reject-file`, `--output`, `--checkpoint`,
/// `--token-file`, `--assets-dir`…) that names one of the store's own files: the SQLite file,
/// its `-wal`, `-shm` and `-journal` files, or its assets folder or a file in it. Appending
/// rejects or changes to them, or exporting asset files over the store's content, would
/// destroy records the command had just reported as written.
///
/// ```swift
/// try StoreFileGuard.check(parsed, options: ImportCommand.allOptions)
/// ```
enum StoreFileGuard {
    /// - Throws: ``UsageError`` naming the option and the store file it names.
    static func check(_ arguments: ParsedArguments, options: [Option]) throws {
        var stores: [String] = []
        if options.contains(where: { $0.name == "--store" }) {
            // A command that takes --store alone (info, check) reads no other store option.
            let locationOnly = !options.contains { $0.name == "--read-store" }
            // Only the path: the command's own parse checks what its zones need.
            stores.append((try StoreOptions(arguments, locationOnly: locationOnly, namesZones: true)).resolvedStorePath)
        }
        for name in ["--from", "--to"] { stores += arguments.values(name) }
        stores.removeAll { PostgresEngine.isStoreURL($0) }
        guard !stores.isEmpty else { return }
        for option in options where option.value?.hasPrefix("FILE") == true || option.value == "DIR" {
            for path in arguments.values(option.name) where path != "-" {
                for store in stores where names(path, fileOf: store) {
                    throw UsageError(message: "\(option.name) \(path) names a file of the store \(store); name another file")
                }
            }
        }
    }

    /// Whether `path` is the store at `store`, one of its companion files, or inside its
    /// assets folder: by device and inode where both exist (hard and symbolic links), else by
    /// their absolute paths with symbolic links resolved.
    static func names(_ path: String, fileOf store: String) -> Bool {
        let companions = [store] + SQLiteEngine.companionSuffixes.map { store + $0 }
        let file = canonical(path)
        if companions.contains(where: { canonical($0) == file }) { return true }
        let assets = canonical(store + ".assets")
        if file == assets || file.hasPrefix(assets + "/") { return true }
        var named = stat()
        guard stat(path, &named) == 0 else { return false }
        return companions.contains { companion in
            var info = stat()
            return stat(companion, &info) == 0 && info.st_dev == named.st_dev && info.st_ino == named.st_ino
        }
    }

    /// The absolute path with every symbolic link resolved that exists: the whole path when it
    /// exists, else its deepest existing folder and the rest as written.
    static func canonical(_ path: String) -> String {
        var existing = URL(fileURLWithPath: path).standardizedFileURL
        var rest: [String] = []
        while true {
            if let resolved = resolved(existing.path) {
                return ([resolved == "/" ? "" : resolved] + rest).joined(separator: "/")
            }
            guard existing.path != "/" else { return URL(fileURLWithPath: path).standardizedFileURL.path }
            rest.insert(existing.lastPathComponent, at: 0)
            existing.deleteLastPathComponent()
        }
    }

    private static func resolved(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}
