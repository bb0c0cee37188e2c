import Foundation
import Stratus

/// The state `stratus changes` keeps between runs: the change token, and with `--output` how
/// much of the output file is committed.
///
/// The file is replaced whole (a temporary file, fsync, rename, fsync of the folder), so a
/// crash leaves the old state or the new one, never half of either. Its first line is the
/// token, so `head -1 FILE` gives it to other tools.
///
/// ```
/// stk1_eyJjb250YWluZXJJZGVudGlmaWVyIjoi…
/// output-file=2049:1311042
/// output-length=52817
/// output-path=/var/exports/photos-2026-11-21.ndjson
/// output-link=/var/lib/jobs/photos.token.output-9f2c41d07ab3e8c5
/// ```
///
/// `output-link` is a hard link the tool keeps to the output file it committed last (beside
/// the token file, or hidden beside the output when they are on different file systems). It
/// keeps that file's inode in use, so a file made later under the same name (after the
/// consumer deleted the old one) can never get its device and inode number and be taken for
/// it; and the tool can cut the file back even after it was moved away.
struct ChangeTokenFile: Equatable {
    var token: ServerChangeToken?
    /// The output file the last batch went to, and how much of it is committed.
    var output: OutputCommit?

    struct OutputCommit: Equatable {
        /// "device:inode": the file itself, so that a file renamed away or replaced is noticed.
        var fileIdentity: String
        var length: Int64
        var path: String
        /// The hard link that holds the file (nil in token files of older versions).
        var link: String?
    }

    /// Reads the state; a missing or empty file means "from the beginning".
    ///
    /// - Throws: ``CommandFailure`` when the file cannot be read or is not a token file.
    static func read(_ path: String) throws -> ChangeTokenFile {
        guard FileManager.default.fileExists(atPath: path) else { return ChangeTokenFile() }
        // A token and the output's commit: a few hundred bytes.
        let data = try KeptFile.contents(of: path, atMost: 1 << 20, what: "token file")
        // The first line is the token, empty before the first batch was committed.
        let lines = String(decoding: data, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        var state = ChangeTokenFile()
        if let first = lines.first, !first.isEmpty {
            do {
                state.token = try ServerChangeToken(serialized: first)
            } catch {
                // Removing the file starts the feed again from the beginning; advised only for
                // what was a token: a file named by mistake (the input, an export, another
                // job's file) is left to its owner.
                let advice = first.hasPrefix("stk") ? "remove it to start from the beginning" : "name another file for --token-file (this one is left as it is)"
                throw CommandFailure(.dataError, "the token file \(path) does not hold a change token (\(error)); \(advice)")
            }
        }
        var identity: String?, length: Int64?, outputPath: String?, link: String?
        for line in lines.dropFirst() where !line.isEmpty {
            let parts = line.split(separator: "=", maxSplits: 1).map(String.init)
            switch (parts.first, parts.count) {
            case ("output-file", 2): identity = parts[1]
            case ("output-length", 2): length = Int64(parts[1])
            case ("output-path", 2): outputPath = parts[1]
            case ("output-link", 2): link = parts[1]
            default: throw CommandFailure(.dataError, "the token file \(path) has an unknown line '\(line.prefix(40))'")
            }
        }
        if let identity, let length, let outputPath {
            state.output = OutputCommit(fileIdentity: identity, length: length, path: outputPath, link: link)
        }
        return state
    }

    /// Replaces the file with this state, durably (see ``KeptFile/replace(_:with:)``).
    ///
    /// - Throws: ``CommandFailure`` `cannotCreateOutput` when it cannot be written.
    func write(to resolvedPath: String) throws {
        var text = (token?.serialized ?? "") + "\n"
        if let output {
            text += "output-file=\(output.fileIdentity)\noutput-length=\(output.length)\noutput-path=\(output.path)\n"
            if let link = output.link { text += "output-link=\(link)\n" }
        }
        try KeptFile.replace(resolvedPath, with: Data(text.utf8))
    }
}

/// The token file as the change feed's token store: the token and the output's committed
/// state are written together, after the batch before them was written and synced.
///
/// The file is locked and written as the file its name resolves to, so that a symbolic link to
/// it names the same job (two runs through two names exclude each other) and stays a link.
extension ChangeTokenFileStore {
    /// How `command` ends when its feed refused the token in `path`: a token of another history
    /// (another kind, user, zone or container) is a usage error (64) that keeps the file, as it
    /// is still good for the job that made it; an expired one, or one of another store (the
    /// store at the path was replaced), is a data error (65), whose file is done with
    /// (`startAgain` says what removing it does).
    static func refused(_ error: StratusError, path: String?, command: String, startAgain: String) -> ExitCode {
        let file = path ?? "the token file"
        // A token of another store (the store at this path was replaced: a copy moved into
        // its place, a restore) is done with, as its help says: no options reach the old store.
        if let mismatch = error.underlyingError as? ServerChangeToken.Mismatch, mismatch.isFromAnotherStore {
            StratusCommand.log("\(command): \(file) holds the position of \(mismatch.tokenHistory); this store is another one (a copy moved into its place, a restore, or another store named)")
            StratusCommand.log("the token in \(file) belongs to another store: \(startAgain)")
            return .dataError
        }
        if let mismatch = error.underlyingError as? ServerChangeToken.Mismatch {
            StratusCommand.usageFailure(
                "\(command): \(file) holds the position of \(mismatch.tokenHistory); this run asks for \(mismatch.requestedHistory): run with the options the token was made with, or give another --token-file",
                pointer: "Run 'stratus \(command) --help' for usage.")
        }
        StratusCommand.log(error.message)
        StratusCommand.log("the token in \(file) has expired: \(startAgain)")
        return .dataError
    }
}

final class ChangeTokenFileStore: ChangeTokenStore {
    /// The name the user gave.
    let path: String
    /// The file that name resolves to.
    let resolvedPath: String
    var state: ChangeTokenFile

    /// Locks the token file (held until the process ends) and reads it.
    ///
    /// - Throws: ``CommandFailure`` `temporaryFailure` when another run holds it; others when
    ///   the file cannot be read or is not a token file.
    init(path: String) throws {
        // The token file holds paths one per line (its own link among them).
        if path.contains(where: \.isNewline) { throw UsageError(message: "the token file's path has a line break, which a token file cannot hold; name it without one") }
        self.path = path
        resolvedPath = KeptFile.resolve(path)
        try KeptFile.lock(resolvedPath, named: path, what: "token file")
        state = try ChangeTokenFile.read(resolvedPath)
    }

    func loadToken() throws -> ServerChangeToken? { state.token }

    func saveToken(_ token: ServerChangeToken) throws {
        state.token = token
        try write()
    }

    /// Writes the state as it is now (the output's identity before its first batch).
    func write() throws {
        try state.write(to: resolvedPath)
    }
}

/// Writes bytes to a file descriptor, all of them, retrying short writes and interruptions.
enum FileDescriptorOutput {
    /// Whether the regular file at `path` (the file `status` describes, when given) is not
    /// empty and ends within a line, read through a descriptor of its own (a writer's may be
    /// write-only): what is appended must start on a line of its own.
    static func endsWithinLine(_ path: String, sameFileAs status: stat? = nil) -> Bool {
        let reader = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard reader >= 0 else { return false }
        defer { close(reader) }
        var opened = stat()
        var last: UInt8 = 0
        guard fstat(reader, &opened) == 0, opened.st_mode & S_IFMT == S_IFREG, opened.st_size > 0,
              status.map({ opened.st_ino == $0.st_ino && opened.st_dev == $0.st_dev }) ?? true,
              pread(reader, &last, 1, opened.st_size - 1) == 1 else { return false }
        return last != UInt8(ascii: "\n")
    }

    static func writeAll(_ data: Data, to descriptor: Int32, name: String) throws {
        try data.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = Glibc.write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    throw CommandFailure.system(.cannotCreateOutput, "cannot write to \(name)")
                }
                offset += written
            }
        }
    }

    /// "device:inode" of an open file: the file, not its name, so a rotated output is noticed.
    static func identity(of descriptor: Int32) throws -> (identity: String, size: Int64) {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw CommandFailure.system(.cannotCreateOutput, "cannot inspect the output file") }
        return ("\(info.st_dev):\(info.st_ino)", Int64(info.st_size))
    }
}
