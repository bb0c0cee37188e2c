import Foundation

/// A change feed's token kept in a file, as `stratus changes --token-file` keeps it, so that
/// a program run from cron exports each change exactly once: a ``RecordZoneChangeFeed`` or
/// ``NotificationFeed`` saves the token only after the batch before it was applied.
///
/// Each save replaces the file whole (a temporary file beside it, synced, renamed over it, the
/// folder synced), so a crash or a kill leaves the old token or the new one, and a save that
/// fails leaves the old one. The file is locked while the object lives: an overlapping run of
/// the job is refused with ``JobFileError/Reason/inUse(lockFile:)``.
///
/// ```swift
/// let tokens = try ChangeTokenFile(path: "/var/lib/jobs/photos.token")
/// let feed = RecordZoneChangeFeed(database: database, zoneID: RecordZone.ID(zoneName: "Photos"))
/// _ = try await feed.run(tokens: tokens) { batch in try mirror.apply(batch.changes) }
/// ```
///
/// The file is text (the format `stratus` has always written). Its first line is the token,
/// empty before the first batch, so `head -1 FILE` gives it to other tools; the lines after it
/// are the ``outputCommit``, when there is one:
///
/// ```
/// stk1_eyJjb250YWluZXJJZGVudGlmaWVyIjoi…
/// output-file=2049:1311042
/// output-length=52817
/// output-path=/var/exports/photos-2026-11-21.ndjson
/// output-link=/var/lib/jobs/photos.token.output-9f2c41d07ab3e8c5
/// ```
public final class ChangeTokenFile: ChangeTokenStore {
    /// The largest file taken for a token file: a token and an output's commit are a few
    /// hundred bytes, so a larger file (an export named by mistake) is refused unread.
    public static let maximumSize = 1 << 20

    /// The file's name as given.
    public var path: String { file.path }
    /// The file the name resolves to, which is locked and replaced (so that a link stays a link).
    package var resolvedPath: String { file.resolvedPath }
    /// The token saved last, or nil to start at the beginning.
    public private(set) var token: ServerChangeToken?
    /// The output file the batches up to ``token`` went to and how much of it they fill, if
    /// the program keeps one; saved with the next ``saveToken(_:)`` or ``save()``.
    public var outputCommit: OutputCommit?
    private let file: JobFile

    /// Locks the token file `path` and reads it; a missing or empty file means "from the
    /// beginning".
    ///
    /// ```swift
    /// let tokens = try ChangeTokenFile(path: "photos.token")
    /// print(tokens.token == nil ? "from the beginning" : "going on")
    /// ```
    ///
    /// - Throws: ``JobFileError``: `inUse` while another run (or another object) holds the
    ///   file, `notARegularFile`, `cannotWrite` when its lock file cannot be made; `damaged`,
    ///   `holdsAnotherKind`, `newerFormat`, `tooLarge` (over ``maximumSize``), `cannotRead`
    ///   when it cannot be read (the file is left as it is).
    public init(path: String) throws {
        file = try JobFile(path: path, file: .changeTokenFile)
        guard let data = try file.contents(atMost: Self.maximumSize) else { return }
        let lines = String(decoding: data, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.trimmingCharacters(in: .whitespaces) }
        let first = lines.first ?? ""
        // Anything but a token (the input, an export, another job's checkpoint named by
        // mistake) is left to its owner; a token that does not read is this job's, damaged.
        guard first.isEmpty || first.hasPrefix("stk") else { throw file.refusal(.holdsAnotherKind(JobFile.kind(holding: data))) }
        if let line = lines.first(where: { $0.hasPrefix("format=") }) {
            guard let format = Int(line.dropFirst(7)) else { throw file.refusal(.damaged("an unreadable line '\(line.prefix(40))'")) }
            if format > JobFile.format { throw file.refusal(.newerFormat(format)) }
        }
        if !first.isEmpty {
            do {
                token = try ServerChangeToken(serialized: first)
            } catch {
                throw file.refusal(.damaged("its first line is no change token: \(error)"))
            }
        }
        let values = try Self.values(in: lines.dropFirst(), of: file)
        // The committed output is what lets the next run cut a killed run's tail off: a line of
        // it that does not read is damage, not a token without one. (Versions before output
        // paths were kept wrote the file and its length alone: those name no output to cut.)
        if let identity = values["output-file"], !Self.isFileIdentity(identity) { throw Self.damagedOutput(file, "output-file") }
        if let length = values["output-length"], (Int64(length) ?? -1) < 0 { throw Self.damagedOutput(file, "output-length") }
        if values["output-path"]?.isEmpty == true { throw Self.damagedOutput(file, "output-path") }
        if values["output-link"]?.isEmpty == true { throw Self.damagedOutput(file, "output-link") }
        if let identity = values["output-file"], let length = values["output-length"].flatMap({ Int64($0) }), let outputPath = values["output-path"] {
            outputCommit = OutputCommit(fileIdentity: identity, length: length, path: outputPath, link: values["output-link"])
        }
    }

    private static func damagedOutput(_ file: JobFile, _ key: String) -> JobFileError {
        file.refusal(.damaged("its \(key) line, which names the output a killed run's tail is cut from, does not read"))
    }

    /// Whether `text` is a file's identity as the token file writes it: `device:inode`.
    private static func isFileIdentity(_ text: String) -> Bool {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        return parts.count == 2 && parts.allSatisfy { !$0.isEmpty && $0.allSatisfy(\.isASCII) && UInt64($0) != nil }
    }

    /// The `key=value` lines after the token.
    private static func values(in lines: ArraySlice<String>, of file: JobFile) throws -> [String: String] {
        var values: [String: String] = [:]
        for line in lines where !line.isEmpty {
            let parts = line.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, ["format", "output-file", "output-length", "output-path", "output-link"].contains(parts[0]) else {
                throw file.refusal(.damaged("an unknown line '\(line.prefix(40))'"))
            }
            values[parts[0]] = parts[1]
        }
        return values
    }

    /// The token saved last.
    public func loadToken() throws -> ServerChangeToken? { token }

    /// Saves `token` (with ``outputCommit``) durably.
    ///
    /// - Throws: ``JobFileError`` `cannotWrite`; the file then holds what it held.
    public func saveToken(_ token: ServerChangeToken) throws {
        let previous = self.token
        self.token = token
        do {
            try save()
        } catch {
            self.token = previous
            throw error
        }
    }

    /// Saves the token and ``outputCommit`` as they are now durably (an output's commit before
    /// the first batch's token).
    ///
    /// - Throws: ``JobFileError`` `cannotWrite`, also for an output path with a line break,
    ///   which the file cannot hold; the file then holds what it held.
    public func save() throws {
        var text = (token?.serialized ?? "") + "\n"
        if let output = outputCommit {
            guard !(output.path + (output.link ?? "") + output.fileIdentity).contains(where: \.isNewline) else {
                throw JobFileError(path: path, file: .changeTokenFile, reason: .cannotWrite(errno: EINVAL),
                                   message: "cannot write the token file \(path): the output's path \(output.path) has a line break, which a token file cannot hold")
            }
            text += "output-file=\(output.fileIdentity)\noutput-length=\(output.length)\noutput-path=\(output.path)\n"
            if let link = output.link { text += "output-link=\(link)\n" }
        }
        try file.replace(with: Data(text.utf8))
    }
}
