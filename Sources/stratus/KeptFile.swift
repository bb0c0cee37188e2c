import Foundation

/// The files a job keeps between runs (token files, checkpoints), named the way the user names
/// them but locked and written as the file the name resolves to: two names of one file (a
/// symbolic link and its target) lock the same lock, and a link stays a link.
enum KeptFile {
    /// The path `path` resolves to: symbolic links followed, also a dangling link to the file
    /// it would create, and links among the folders. A path whose folder does not exist is
    /// returned as an absolute path.
    static func resolve(_ path: String) -> String {
        var current = URL(fileURLWithPath: path).standardizedFileURL.path
        for _ in 0..<40 {
            if let real = realpath(current, nil) {
                defer { free(real) }
                return String(cString: real)
            }
            // Missing: a dangling link points on; otherwise resolve the folder.
            var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            let length = readlink(current, &buffer, buffer.count - 1)
            guard length > 0 else { break }
            let target = String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            current = target.hasPrefix("/")
                ? URL(fileURLWithPath: target).standardizedFileURL.path
                : URL(fileURLWithPath: current).deletingLastPathComponent().appendingPathComponent(target).standardizedFileURL.path
        }
        let url = URL(fileURLWithPath: current)
        let folder = url.deletingLastPathComponent().path
        guard let real = realpath(folder, nil) else { return current }
        defer { free(real) }
        return String(cString: real) + "/" + url.lastPathComponent
    }

    /// Holds an exclusive lock on `resolved.lock` for the life of the process, so that two runs
    /// of one job (an overlapping cron) never work from the same state.
    ///
    /// - Throws: ``CommandFailure`` `temporaryFailure` (exit 75) when another run holds it,
    ///   `cannotCreateOutput` when the lock file cannot be made.
    static func lock(_ resolved: String, named name: String, what: String) throws {
        // The file is replaced by renaming a new one over it: a device, a pipe or a folder
        // named here would be replaced (as root, `/dev/null` itself) or the rename would fail
        // after the work was done. Refused before anything is made, the lock file included.
        // The name as given too: `<(…)` names a pipe through /dev/fd, which resolves to no path.
        var info = stat()
        if stat(resolved, &info) == 0 || stat(name, &info) == 0, info.st_mode & S_IFMT != S_IFREG {
            throw CommandFailure(.usage, "the \(what) \(name) is not a regular file (a device, a pipe or a folder): name a file the job may create and replace")
        }
        let lockPath = resolved + ".lock"
        let descriptor = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw CommandFailure.system(.cannotCreateOutput, "cannot create the lock file \(lockPath)") }
        if flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
            close(descriptor)
            throw CommandFailure(.temporaryFailure, "another run is using the \(what) \(name) (it holds \(lockPath)); try again later")
        }
        // Deliberately never closed: the kernel releases the lock when the process ends, however it ends.
        removeLeftTemporaries(of: resolved)
    }

    /// Removes the temporary files of ``replace(_:with:)`` that a run killed mid-write left
    /// beside `resolved`. Called holding the lock: no other run of the job is writing one.
    private static func removeLeftTemporaries(of resolved: String) {
        let url = URL(fileURLWithPath: resolved)
        let prefix = url.lastPathComponent + ".tmp-"
        let folder = url.deletingLastPathComponent().path
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return }
        for name in names where name.hasPrefix(prefix) && name.dropFirst(prefix.count).allSatisfy(\.isNumber) {
            unlink(folder + "/" + name)
        }
    }

    /// What `descriptor` (a file, a pipe, a device) holds, read with the system's own calls
    /// until its end or until more than `limit` bytes came: `limit + 1` bytes say it holds
    /// more, so that a device such as `/dev/zero` or a FIFO that never ends is not read until
    /// memory runs out.
    ///
    /// - Throws: ``CommandFailure`` `inputMissing` naming `what` when a read fails.
    static func bytes(of descriptor: Int32, atMost limit: Int, what: String) throws -> Data {
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while data.count <= limit {
            let count = buffer.withUnsafeMutableBytes { Foundation.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw CommandFailure.system(.inputMissing, "cannot read \(what)")
            }
            if count == 0 { break }
            data.append(contentsOf: buffer[..<count])
        }
        return data
    }

    /// The contents of the kept file at `path`, read only when it holds at most `limit` bytes,
    /// so that another file named by mistake (an export given as `--token-file`, a sparse file)
    /// is refused at once instead of read whole into memory.
    ///
    /// - Throws: ``CommandFailure`` `inputMissing` (`permissionDenied` when the user may not
    ///   read it) when it cannot be read, with the system's reason, `dataError` when it
    ///   is larger than `limit`, naming it as `what`.
    static func contents(of path: String, atMost limit: Int, what: String) throws -> Data {
        let handle = try ReadableFile.open(path, what: what)
        defer { try? handle.close() }
        let data: Data
        do {
            data = try handle.read(upToCount: limit + 1) ?? Data()
        } catch {
            throw CommandFailure(.inputMissing, "cannot read the \(what) \(path): \(error.localizedDescription)")
        }
        guard data.count <= limit else {
            throw CommandFailure(.dataError, "the \(what) \(path) is larger than any \(what) (\(limit / (1 << 20)) MiB); is it the right file?")
        }
        return data
    }

    /// Decodes a checkpoint file's contents. Every checkpoint is one JSON object: anything
    /// else (an array, an input file, binary data) is refused before it is parsed, as Foundation
    /// builds the whole JSON tree first, at some thirty times the file's size.
    ///
    /// `command` is the first word of the command the checkpoint is for (`import`, `update`,
    /// `copy`): a file that is that command's checkpoint but does not decode (edited by hand, or
    /// damaged) is named as such, not as another command's checkpoint.
    ///
    /// - Throws: ``UsageError`` (``notACheckpoint(_:holding:expected:)``, or naming the member of
    ///   a damaged checkpoint of `command` that does not read).
    static func decodeCheckpoint<T: Decodable>(_ type: T.Type, from data: Data, named name: String, expected: String, key: String,
                                               command: String) throws -> T {
        let first = firstSignificantByte(of: data)
        // The key every such checkpoint writes near its start (the one with a list comes later):
        // another JSON object, however large, is refused without being parsed.
        let start = data.prefix(64 << 10)
        guard first == UInt8(ascii: "{"), start.firstRange(of: Data("\"\(key)\":".utf8)) != nil else {
            throw notACheckpoint(name, holding: data, expected: expected)
        }
        do {
            return try JSONDecoder().decode(type, from: data)
        } catch {
            guard checkpointCommand(holding: data) == command else {
                throw notACheckpoint(name, holding: data, expected: expected)
            }
            throw UsageError(message: "the checkpoint file \(name) is a checkpoint of `stratus \(command)` that Stratus cannot read (\(unreadableMember(error))): it was edited or damaged; remove it to start over")
        }
    }

    /// What a checkpoint's decoding failed on, for a message: the member and what was wrong.
    /// The file is known to be a JSON object here, so a failure without a member is a number
    /// Foundation would not convert (a fraction or an out-of-range number for a count).
    private static func unreadableMember(_ error: any Error) -> String {
        func member(_ path: [any CodingKey]) -> String {
            "member '" + path.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".") + "'"
        }
        switch error as? DecodingError {
        case .keyNotFound(let key, let context)?: return "\(member(context.codingPath + [key])) is missing"
        case .valueNotFound(_, let context)? where !context.codingPath.isEmpty: return "\(member(context.codingPath)) is null"
        case .typeMismatch(_, let context)? where !context.codingPath.isEmpty: return "\(member(context.codingPath)) holds a value of another type"
        case .dataCorrupted(let context)? where !context.codingPath.isEmpty: return "\(member(context.codingPath)) holds a value out of range"
        default: return "a number in it does not fit its member (a fraction, or out of range)"
        }
    }

    /// The first byte of `data` that is not JSON white space.
    private static func firstSignificantByte(of data: Data) -> UInt8? {
        data.first { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }
    }

    /// The refusal of a `--checkpoint` file that holds no checkpoint of the command (`expected`,
    /// such as "an import checkpoint"): it names what the file holds when it is another Stratus
    /// command's checkpoint, and never advises removing it, since it may be the input, an
    /// export or another job's checkpoint, named by mistake. The file is left as it is.
    static func notACheckpoint(_ name: String, holding data: Data, expected: String) -> UsageError {
        let holds = checkpointCommand(holding: data).map { "the checkpoint of a `stratus \($0)`" } ?? "no Stratus checkpoint"
        return UsageError(message: "the checkpoint file \(name) holds \(holds), not \(expected); name another file for --checkpoint (this one is left as it is)")
    }

    /// The first word of the command whose checkpoint `data` looks like (`import`, `update`,
    /// `copy`…), from the members each command's checkpoint always writes; nil for anything else.
    private static func checkpointCommand(holding data: Data) -> String? {
        // Another command's checkpoint is small and an object; nothing else is parsed to say what it is.
        let first = firstSignificantByte(of: data)
        guard first == UInt8(ascii: "{"), data.count <= 1 << 20,
              let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else { return nil }
        if object["input"] is String, object["committedItems"] != nil {
            return "import"
        } else if let command = object["command"] as? String, object["job"] is String {
            return command.split(separator: " ").first.map(String.init) ?? command
        } else if object["sourceIdentifier"] is String, object["destinationIdentifier"] is String {
            return "copy"
        }
        return nil
    }

    /// Replaces the file at `resolved` with `data` durably: a temporary file beside it, fsync,
    /// rename over it, fsync of the folder. A crash leaves the old contents or the new.
    ///
    /// - Throws: ``CommandFailure`` `cannotCreateOutput`.
    static func replace(_ resolved: String, with data: Data) throws {
        let temporary = resolved + ".tmp-\(getpid())"
        // Tokens and checkpoints name a store's records and positions: private, like the store.
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw CommandFailure.system(.cannotCreateOutput, "cannot create \(temporary)") }
        do {
            try FileDescriptorOutput.writeAll(data, to: descriptor, name: temporary)
            guard fsync(descriptor) == 0 else { throw CommandFailure.system(.cannotCreateOutput, "cannot sync \(temporary)") }
        } catch {
            close(descriptor)
            unlink(temporary)
            throw error
        }
        close(descriptor)
        guard rename(temporary, resolved) == 0 else {
            let error = CommandFailure.system(.cannotCreateOutput, "cannot move \(temporary) into place at \(resolved)")
            unlink(temporary)
            throw error
        }
        // The rename is durable only once the folder is synced.
        let folder = open(URL(fileURLWithPath: resolved).deletingLastPathComponent().path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if folder >= 0 {
            fsync(folder)
            close(folder)
        }
    }
}
