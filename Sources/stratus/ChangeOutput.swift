import Foundation
import Stratus

/// Where `stratus changes` writes: stdout, or an output file it commits with the token.
///
/// An output file is opened (and created) only when the first change is written, so that a
/// run with nothing new leaves no empty file behind (a cron job that names its output by date
/// gets a file only for runs that found changes).
final class ChangeOutput {
    private var descriptor: Int32
    private let name: String
    /// For an output file: the path to open and the token file that commits it.
    private let outputPath: String?
    private let tokens: ChangeTokenFile
    /// For an output file once opened: its identity, path, committed length and the link that holds it.
    private var commit: ChangeTokenFile.OutputCommit?
    /// Whether `--output` names a device or a pipe, written as a stream like stdout.
    private var isStream = false
    /// The output file this run holds locked (its identity and the descriptor of the lock),
    /// until the process ends: two jobs writing one file would cut back and interleave each
    /// other's changes.
    private var locked: (identity: String, descriptor: Int32)?

    /// Prepares the output. For a file, first cuts the last committed output file back to its
    /// committed length (through the link that holds it, wherever the file went), which drops
    /// what a killed run wrote after its last commit, also when this run writes to another
    /// file; the file this run names is opened by the first ``append(_:)``.
    ///
    /// - Throws: ``CommandFailure`` `cannotCreateOutput` when the committed file cannot be cut
    ///   back (one something emptied or cut since is released, with a note).
    init(outputPath given: String?, tokens: ChangeTokenFile) throws {
        // `-` is stdout, as for export; a path with a line break cannot be kept in the token file.
        let outputPath = given == "-" ? nil : given
        if let outputPath, outputPath.contains(where: \.isNewline) {
            throw UsageError(message: "the output file's path has a line break, which the token file cannot hold; name it without one")
        }
        self.outputPath = outputPath
        self.tokens = tokens
        guard let outputPath else {
            descriptor = STDOUT_FILENO
            name = "stdout"
            return
        }
        descriptor = -1
        name = outputPath
        var committed = tokens.outputCommit
        if let held = committed, !Self.isOwnLink(held, tokenPath: tokens.resolvedPath) {
            // A token file copied from another job's (a second consumer started at its place),
            // or edited: the output and the link it names are not this job's to cut or remove.
            tokens.outputCommit = nil
            committed = nil
        }
        Self.removeStrayLinks(of: tokens.resolvedPath, besideOutputs: [outputPath] + (committed.map { [$0.path] } ?? []), keeping: committed?.link)
        if let committed { try cutBack(committed) }
    }

    /// Whether the link a token file names is the one this token file made: beside it and
    /// named after it, or (the token on another file system) hidden beside the output and
    /// holding the output file the token names.
    private static func isOwnLink(_ committed: ChangeTokenFile.OutputCommit, tokenPath: String) -> Bool {
        guard let link = committed.link else { return true }
        if link.hasPrefix(tokenPath + ".output-") && !link.dropFirst(tokenPath.count + 8).contains("/") { return true }
        // Beside the output, the link's name carries its token file's mark: a copy of the
        // token file elsewhere names the same link, but is not the job that made it.
        let output = URL(fileURLWithPath: JobFile.resolve(committed.path))
        let besideOutput = output.deletingLastPathComponent().appendingPathComponent(".\(output.lastPathComponent).stratus-\(tokenMark(tokenPath))-").path
        return link.hasPrefix(besideOutput) && identity(of: link) == committed.fileIdentity
    }

    /// A short mark of the token file's path, in the names of links beside outputs.
    private static func tokenMark(_ tokenPath: String) -> String {
        String(SHA256Hasher.digest(Array(tokenPath.utf8)).hexadecimal.prefix(12))
    }

    deinit {
        if descriptor >= 0 && descriptor != STDOUT_FILENO { close(descriptor) }
        if let locked, locked.descriptor != descriptor { close(locked.descriptor) }
    }

    /// Locks the output file open at `file` (identity `identity`) for this run, unless it holds
    /// it already.
    ///
    /// - Throws: ``CommandFailure`` `temporaryFailure` (exit 75) when another run holds it.
    private func lock(_ file: Int32, identity: String, path: String) throws {
        if let locked, locked.identity == identity { return }
        // Only a regular file is cut back and appended to; a device (`/dev/null`) or a pipe is
        // shared by design.
        var status = stat()
        guard fstat(file, &status) == 0, status.st_mode & S_IFMT == S_IFREG else { return }
        if flock(file, LOCK_EX | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK else {
                throw CommandFailure.system(.cannotCreateOutput, "cannot lock the output file \(path), which keeps two runs from writing it at once")
            }
            throw CommandFailure(.temporaryFailure, "the output file \(path) is locked: a consumer holds it (flock, while it empties the file), another run is writing it (a job of another token file, or this one started twice), or both; try again later, and give each job its own output file")
        }
        if let locked, locked.descriptor != descriptor { close(locked.descriptor) }
        locked = (identity, file)
    }

    /// Opens the output file; for a new file, holds it with a link and records it in the token
    /// file before anything is written.
    ///
    /// - Throws: ``CommandFailure`` `cannotCreateOutput` when it cannot be opened or recorded.
    private func openFile(_ outputPath: String) throws {
        let committed = tokens.outputCommit
        // The name itself (a symbolic link, dangling or not, is the user's, never removed).
        var named = stat()
        let existed = lstat(outputPath, &named) == 0
        // Created as private as the store whose records it holds.
        descriptor = Glibc.open(outputPath, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw CommandFailure.system(.cannotCreateOutput, "cannot open the output file \(outputPath)") }
        var kind = stat()
        if fstat(descriptor, &kind) == 0, kind.st_mode & S_IFMT != S_IFREG {
            // A device (`/dev/null`) or a pipe is written as stdout is: nothing of it can be
            // held, cut back or appended to later, so the token keeps no output for it.
            isStream = true
            return
        }
        let (identity, size) = try FileDescriptorOutput.identity(of: descriptor)
        try lock(descriptor, identity: identity, path: outputPath)
        if let committed, committed.fileIdentity == identity, committed.link.map({ Self.identity(of: $0) == identity }) ?? true {
            // The committed file itself: its link kept its inode from being reused.
            var same = committed
            same.path = outputPath
            if same.link == nil, let link = Self.hold(outputPath, tokenPath: tokens.resolvedPath) {
                // A token file of an older version: hold the file from now on.
                same.link = link
                tokens.outputCommit = same
                try tokens.save()
            }
            commit = same
        } else {
            // A new (or rotated) output file: what it holds already is not ours. A file that
            // another job's token holds (by its link) is that job's: appended to here, its next
            // run would cut back what this one commits.
            var status = stat()
            if fstat(descriptor, &status) == 0, status.st_mode & S_IFMT == S_IFREG, status.st_nlink > 1, size > 0 {
                throw CommandFailure(.temporaryFailure, "the output file \(outputPath) is another job's: it has \(status.st_nlink - 1) other link(s), as a job's token file keeps to its output; give each job its own output file (or, if no job writes it any more, move it away)")
            }
            // What it holds that ends within a line is ended first: the first change must be a
            // line of its own, or a consumer reading lines loses it.
            var length = size
            if size > 0, FileDescriptorOutput.endsWithinLine(outputPath, sameFileAs: status) {
                var newline = UInt8(ascii: "\n")
                guard pwrite(descriptor, &newline, 1, off_t(size)) == 1, fsync(descriptor) == 0 else {
                    throw CommandFailure.system(.cannotCreateOutput, "cannot write the output file \(outputPath)")
                }
                length += 1
            }
            // Hold it and commit its identity before writing, so that a kill during the first
            // batch is cut away next time.
            let link = Self.hold(outputPath, tokenPath: tokens.resolvedPath)
            commit = ChangeTokenFile.OutputCommit(fileIdentity: identity, length: length, path: outputPath, link: link)
            tokens.outputCommit = commit
            do {
                try tokens.save()
            } catch {
                // Nothing was committed: neither the link nor a file this run made stays.
                if let link { unlink(link) }
                if !existed && length == 0 { unlink(outputPath) }
                throw error
            }
            // Only the link that holds the committed file: a token file names it, and an edited
            // one must not make a run remove any file it names.
            if let old = committed?.link, old != link, Self.identity(of: old) == committed?.fileIdentity { unlink(old) }
        }
        guard lseek(descriptor, off_t(commit!.length), SEEK_SET) >= 0 else { throw CommandFailure.system(.cannotCreateOutput, "cannot seek in \(outputPath)") }
    }

    /// Writes `data` and makes it durable; answers the output's new committed state (`nil` for
    /// stdout, and for a file while nothing was written to it). Nothing is opened for no data.
    func append(_ data: Data) throws -> ChangeTokenFile.OutputCommit? {
        guard !data.isEmpty else { return commit }
        if descriptor < 0, let outputPath { try openFile(outputPath) }
        if let commit, !isStream {
            // Cut shorter in place while this run wrote it (`: > file`, a copy-and-truncate
            // rotation): the next write would leave a hole of NUL bytes where changes were.
            var now = stat()
            if fstat(descriptor, &now) == 0, Int64(now.st_size) < commit.length {
                throw CommandFailure(.cannotCreateOutput, "the output file \(outputPath ?? name) was cut to \(now.st_size) bytes while this run wrote it (it had \(commit.length) committed bytes): the token was not moved past this batch; rotate output files by renaming them, not by truncating them")
            }
        }
        try FileDescriptorOutput.writeAll(data, to: descriptor, name: name)
        // stdout may be a pipe or terminal, which cannot be synced; a redirected file can.
        if fsync(descriptor) != 0 && errno != EINVAL && errno != EROFS {
            throw CommandFailure.system(.cannotCreateOutput, "cannot sync \(name)")
        }
        guard var commit, !isStream else { return nil }
        // Removed, moved or replaced while this run wrote it: the changes are only in a file
        // no name leads to (and the link the next run drops), so the token must not move on.
        if let outputPath, Self.identity(of: outputPath) != commit.fileIdentity {
            let kept = commit.link.map { "; what the file held (\(commit.length) committed bytes, the changes the token moved past) is still in \($0) until the next run: copy it out first" } ?? ""
            throw CommandFailure(.cannotCreateOutput, "the output file \(outputPath) was removed, moved or replaced while this run wrote it: the token was not moved past this batch, which the next run writes again\(kept)")
        }
        commit.length += Int64(data.count)
        self.commit = commit
        return commit
    }

    // MARK: - The committed file

    /// Truncates the committed output file to its committed length. Through its link, the
    /// file is found wherever it went; without one (older token files), only at its path.
    private func cutBack(_ committed: ChangeTokenFile.OutputCommit) throws {
        let descriptor = open(committed.link ?? committed.path, O_WRONLY | O_CLOEXEC)
        if descriptor < 0, let link = committed.link {
            // Removed (taken for a stray file). The file at the output's path is not looked at:
            // without the link its inode may belong to a new file made under that name.
            StratusCommand.log("the link \(link) that held the output file \(committed.path) was removed: if a run was killed after its last commit, what it wrote after it was not cut off (leave the links the token file names)")
            return
        }
        // Gone (rotated or deleted, and no link): nothing of it is uncommitted.
        guard descriptor >= 0 else { return }
        var kept = false
        defer { if !kept { close(descriptor) } }
        let (identity, size) = try FileDescriptorOutput.identity(of: descriptor)
        guard identity == committed.fileIdentity else { return }
        // A device an older version recorded as an output (`/dev/null`): nothing to cut back.
        var kind = stat()
        guard fstat(descriptor, &kind) == 0, kind.st_mode & S_IFMT == S_IFREG else { return }
        // Cut back only what no other run is writing; held until the run ends.
        try lock(descriptor, identity: identity, path: committed.path)
        kept = true
        guard size >= committed.length else {
            // Emptied or cut since the last run (a consumer that truncates what it read, a
            // copy-and-truncate rotation): what it held was committed, and a kill cannot have
            // left more. Nothing to cut back: released, as a file moved away is, and written
            // as a new output; the changes it held are not written again.
            // Emptied is what a consumer that truncates what it read does every time (said unless
            // --quiet); cut to some other length is worth a look whatever the options.
            let said = "note: the output file \(committed.path) holds \(size) bytes, fewer than the \(committed.length) the token committed to it: something emptied or cut it since the last run (a consumer that truncates what it read?); the changes it held are not written again (to export the zone's whole history again, remove the token file)"
            if size == 0 { StratusCommand.note(said) } else { StratusCommand.log(said) }
            if let link = committed.link { unlink(link) }
            tokens.outputCommit = nil
            try tokens.save()
            return
        }
        guard size == committed.length || (ftruncate(descriptor, off_t(committed.length)) == 0 && fsync(descriptor) == 0) else {
            throw CommandFailure.system(.cannotCreateOutput, "cannot cut \(committed.path) back to its committed length")
        }
        if size > committed.length, Self.identity(of: committed.path) != identity {
            // Cut where the link holds it; a copy made of it since (a move to another disk is a
            // copy) still holds what the stopped run wrote past its last commit, which the next
            // run writes again.
            StratusCommand.log("warning: the output file \(committed.path) was moved or removed after a run that stopped with \(Int64(size) - committed.length) bytes past its last commit: a copy of it made since (a move to another file system) holds them too, and this run writes those changes again; cut such a copy to its first \(committed.length) bytes (truncate -s \(committed.length) FILE)")
        }
    }

    /// A new hard link to `path` under a random name: beside the token file, or, on another
    /// file system, hidden beside the output. Nil (with a notice) where links cannot be made.
    private static func hold(_ given: String, tokenPath: String) -> String? {
        // The file itself, not a symbolic link naming it: a link to a link holds nothing, and
        // the file would not show it is another job's (its link count).
        let path = JobFile.resolve(given)
        let id = String(UInt64.random(in: .min ... .max), radix: 16)
        let besideToken = tokenPath + ".output-" + id
        if link(path, besideToken) == 0 { return besideToken }
        if errno == EXDEV {
            let url = URL(fileURLWithPath: path)
            let besideOutput = url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).stratus-\(tokenMark(tokenPath))-\(id)").path
            if link(path, besideOutput) == 0 { return besideOutput }
        }
        StratusCommand.log("cannot keep a link to \(path) (\(String(cString: strerror(errno)))); if it is deleted and its name reused, the next run may not tell the new file from it")
        return nil
    }

    /// Links that no state names (left by a run killed, or failed, between making a link and
    /// recording it): beside the token file, and this token file's hidden links beside the
    /// outputs it names (made there when the token is on another file system) that are the last
    /// name of their file, which would otherwise keep every output a consumer removed on the disk.
    private static func removeStrayLinks(of tokenPath: String, besideOutputs outputs: [String], keeping kept: String?) {
        let url = URL(fileURLWithPath: tokenPath)
        let prefix = url.lastPathComponent + ".output-"
        let folder = url.deletingLastPathComponent()
        if let names = try? FileManager.default.contentsOfDirectory(atPath: folder.path) {
            for name in names where name.hasPrefix(prefix) {
                let path = folder.appendingPathComponent(name).path
                if path != kept { unlink(path) }
            }
        }
        // Only a link that is its file's last name: the mark is the token file's path, which
        // another host's or container's job may share (one output volume, `/state/token` in
        // each), and whose committed link holds an output that still has its own name.
        let mark = ".stratus-\(tokenMark(tokenPath))-"
        let outputFolders = Set(outputs.map { URL(fileURLWithPath: JobFile.resolve($0)).deletingLastPathComponent().path })
        for outputFolder in outputFolders {
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: outputFolder) else { continue }
            for name in names where name.hasPrefix(".") && name.contains(mark) {
                let path = URL(fileURLWithPath: outputFolder).appendingPathComponent(name).path
                var info = stat()
                guard path != kept, lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_nlink == 1 else { continue }
                unlink(path)
            }
        }
    }

    private static func identity(of path: String) -> String? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return "\(info.st_dev):\(info.st_ino)"
    }
}
