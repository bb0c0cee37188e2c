import Foundation

/// A command's words, checked against its option table: every `--option` is one the command
/// declares, every value is present, and the rest are positional arguments.
///
/// ```swift
/// let arguments = try ParsedArguments(["in.ndjson", "--batch-size", "500"], options: ImportCommand.allOptions)
/// arguments.value("--batch-size")   // "500"
/// arguments.positionals            // ["in.ndjson"]
/// ```
struct ParsedArguments {
    /// The words that are not options or their values, in order.
    let positionals: [String]
    private let values: [String: [String]]
    private let flags: Set<String>

    /// Reads `words` (`--name VALUE`, `--name=VALUE`, `--flag`; `--` ends the options; `-` alone
    /// is a positional argument, standing for stdin).
    ///
    /// - Throws: ``UsageError`` for an unknown option, a missing value (an option of the command
    ///   where its value should be is one), a value given to a flag, an empty file, folder or
    ///   store name, or an option given twice that takes one value.
    init(_ words: [String], options: [Option]) throws {
        let table = Dictionary(options.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        var positionals: [String] = []
        var values: [String: [String]] = [:]
        var flags: Set<String> = []
        var index = 0
        var optionsEnded = false
        while index < words.count {
            let word = words[index]
            index += 1
            if optionsEnded || word == "-" || !word.hasPrefix("-") {
                positionals.append(word)
                continue
            }
            if word == "--" {
                optionsEnded = true
                continue
            }
            let (name, inline) = Self.split(word)
            guard let option = table[name] else {
                throw UsageError(message: "unknown option \(name)" + Suggestion.didYouMean(name, among: options.map(\.name)))
            }
            guard option.takesValue else {
                if inline != nil { throw UsageError(message: "\(name) takes no value") }
                flags.insert(name)
                continue
            }
            let value: String
            if let inline {
                value = inline
            } else {
                guard index < words.count else { throw UsageError(message: "\(name) needs a value (\(option.value!))") }
                value = words[index]
                // `--output --force` is an option whose value was left out, not a file named
                // --force: the next option would be swallowed and the command run without it.
                if value.hasPrefix("--"), table[Self.split(value).name] != nil {
                    throw UsageError(message: "\(name) needs a value (\(option.value!)) before \(Self.split(value).name); a value that starts with -- is written \(name)=\(value)")
                }
                index += 1
            }
            if value.isEmpty, let placeholder = option.value, Self.namesAFile(placeholder) {
                // An unset shell variable (`--assets-dir "$DIR"`) would otherwise name the
                // current folder, or fail only after the work was done.
                throw UsageError(message: "\(name) needs a non-empty value (\(placeholder))")
            }
            if !option.repeatable, let earlier = values[name]?.first, earlier != value {
                throw UsageError(message: "\(name) is given twice ('\(earlier)' and '\(value)')")
            }
            values[name, default: []].append(value)
        }
        self.positionals = positionals
        self.values = values
        self.flags = flags
        try Self.refuseSharedFiles(values, table: table)
    }

    /// Two file or folder options naming one path (`--token-file t --output t`) would write
    /// over each other, the second after the first reported success: refused before anything
    /// is opened. Stores are checked by the commands that open them; devices and FIFOs
    /// (`--output /dev/stdout`) may be shared.
    private static func refuseSharedFiles(_ values: [String: [String]], table: [String: Option]) throws {
        var seen: [FileIdentity: String] = [:]
        for (name, given) in values.sorted(by: { $0.key < $1.key }) {
            guard let placeholder = table[name]?.value,
                  placeholder.split(separator: "|").contains(where: { $0 == "FILE" || $0 == "DIR" }) else { continue }
            for value in Set(given) where value != "-" {
                guard let identity = FileIdentity(path: value) else { continue }
                if let earlier = seen[identity], earlier != name {
                    throw UsageError(message: "\(earlier) and \(name) both name '\(value)'; give each its own file")
                }
                seen[identity] = name
            }
        }
    }

    /// What a path names: an existing regular file or folder by device and inode, a path not
    /// made yet by its absolute spelling; nil for a device, FIFO or socket.
    private enum FileIdentity: Hashable {
        case existing(dev_t, ino_t)
        case planned(String)

        init?(path: String) {
            var status = stat()
            if stat(path, &status) == 0 {
                let kind = status.st_mode & S_IFMT
                guard kind == S_IFREG || kind == S_IFDIR else { return nil }
                self = .existing(status.st_dev, status.st_ino)
            } else {
                // Its folder may be a link (`link/t` and `real/t`): resolved as a store path is;
                // so may the path itself, to a file not made yet, which a write makes there.
                self = .planned(StoreFileGuard.canonical(Self.danglingLinkTarget(path) ?? path))
            }
        }

        /// Where `path`, a symbolic link to nothing yet, points (followed link by link, as
        /// opening it to write does): nil when `path` is no link, or the chain does not end.
        private static func danglingLinkTarget(_ path: String) -> String? {
            var current = path
            for _ in 0..<40 {
                var info = stat()
                guard lstat(current, &info) == 0, info.st_mode & S_IFMT == S_IFLNK else { return current == path ? nil : current }
                guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: current) else { return nil }
                let folder = (current as NSString).deletingLastPathComponent
                current = target.hasPrefix("/") || folder.isEmpty ? target : folder + "/" + target
            }
            return nil
        }
    }

    /// Whether an option with this value placeholder names a file, a folder or a store.
    private static func namesAFile(_ placeholder: String) -> Bool {
        placeholder.split(separator: "|").contains { ["FILE", "DIR", "PATH", "URL"].contains($0) }
    }

    private static func split(_ word: String) -> (name: String, value: String?) {
        guard word.hasPrefix("--"), let equals = word.firstIndex(of: "=") else { return (word, nil) }
        return (String(word[..<equals]), String(word[word.index(after: equals)...]))
    }

    /// The option's value, or nil when it was not given.
    func value(_ name: String) -> String? { values[name]?.last }

    /// Every value of a repeatable option, in order.
    func values(_ name: String) -> [String] { values[name] ?? [] }

    /// Whether a flag was given.
    func flag(_ name: String) -> Bool { flags.contains(name) }

    /// Whether an option (flag or value) was given.
    func has(_ name: String) -> Bool { flags.contains(name) || values[name] != nil }

    /// Fails when there are positional arguments the command does not take.
    func expectNoPositionals() throws {
        if let stray = positionals.first { throw UsageError(message: "unexpected argument '\(stray)'") }
    }

    /// A positive whole number, or a usage error that names the option and quotes the text.
    func positiveInteger(_ name: String) throws -> Int? {
        guard let text = value(name) else { return nil }
        guard let number = Int(text), number > 0 else { throw UsageError(message: "\(name) must be a positive number, not '\(text)'") }
        return number
    }

    /// A whole number of 0 or more.
    func count(_ name: String) throws -> Int? {
        guard let text = value(name) else { return nil }
        guard let number = Int(text), number >= 0 else { throw UsageError(message: "\(name) must be a number (0 or more), not '\(text)'") }
        return number
    }

    /// `a,b,c` as a list; empty items are a usage error.
    func list(_ name: String) throws -> [String]? {
        guard let text = value(name) else { return nil }
        let items = text.split(separator: ",", omittingEmptySubsequences: false).map { String($0) }
        if items.contains(where: \.isEmpty) { throw UsageError(message: "\(name) takes a comma-separated list without empty items, not '\(text)'") }
        return items
    }
}
