import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A file a job keeps between runs (a checkpoint, a token file), locked while its object
/// lives, read with a size limit, and replaced whole and durably: what ``ImportCheckpointFile``,
/// ``PipelineCheckpointFile``, ``CopyCheckpointFile`` and ``ChangeTokenFile`` share.
///
/// It is named the way the user names it but locked and written as the file the name resolves
/// to: two names of one file (a symbolic link and its target) lock the same lock, and a link
/// stays a link.
///
/// ```swift
/// let file = try JobFile(path: "import.checkpoint", file: .importCheckpoint)
/// if let data = try file.contents(atMost: 1 << 20) { … }
/// try file.replace(with: Data("{}".utf8))
/// ```
package final class JobFile {
    /// The format of job files this version reads and writes; a file that says it is of a
    /// later one (a `format` member, or a `format=` line) is refused, not misread. Files of
    /// format 1 carry no such mark, so that they stay byte for byte what earlier versions wrote.
    package static let format = 1

    /// The name as given.
    package let path: String
    /// The file that name resolves to: locked and written.
    package let resolvedPath: String
    /// What the file holds.
    package let file: JobFileError.FileKind
    /// The open lock file, whose lock goes with it (the kernel also drops it when the process
    /// ends, however it ends).
    private let lock: FileDescriptor

    /// Locks the file `path` for `file` (`PATH.lock` beside the file the name resolves to) and
    /// removes the temporary files a run killed while writing it left.
    ///
    /// - Throws: ``JobFileError`` `inUse` when another run (or another object of this process)
    ///   holds the lock, `notARegularFile` for a device, a pipe or a folder, `cannotWrite` when
    ///   the lock file cannot be made.
    package init(path: String, file: JobFileError.FileKind) throws(JobFileError) {
        self.path = path
        self.file = file
        resolvedPath = Self.resolve(path)
        // The file is replaced by renaming a new one over it: a device, a pipe or a folder
        // named here would be replaced (as root, `/dev/null` itself) or the rename would fail
        // after the work was done. Refused before anything is made, the lock file included.
        // The name as given too: `<(…)` names a pipe through /dev/fd, which resolves to no path.
        var info = stat()
        if stat(resolvedPath, &info) == 0 || stat(path, &info) == 0, info.st_mode & S_IFMT != S_IFREG {
            throw JobFileError(path: path, file: file, reason: .notARegularFile)
        }
        let lockPath = resolvedPath + ".lock"
        do throws(POSIXFailure) {
            lock = try FileDescriptor.open(lockPath, O_RDWR | O_CREAT, mode: 0o600)
        } catch {
            // One that exists is another user's (a run as root before): say whose.
            var lockInfo = stat()
            let message = stat(lockPath, &lockInfo) == 0
                ? "cannot open the lock file \(lockPath) (owner uid \(lockInfo.st_uid), mode \(String(lockInfo.st_mode & 0o777, radix: 8))) for writing: \(error.reason); run the job as that user, or remove the lock file when no run holds it"
                : "cannot create the lock file \(lockPath): \(error.reason)"
            throw JobFileError(path: path, file: file, reason: .cannotWrite(errno: error.errno), message: message)
        }
        if flock(lock.raw, LOCK_EX | LOCK_NB) != 0 {
            throw JobFileError(path: path, file: file, reason: .inUse(lockFile: lockPath))
        }
        removeLeftTemporaries()
    }

    deinit {
        // Unlocked before the descriptor closes: a child process this program is starting at
        // this moment holds a copy of the descriptor until it execs, and with it the lock, so
        // the next run of the job in this process would be refused (`inUse`) for no one.
        _ = flock(lock.raw, LOCK_UN)
    }

    /// The refusal of this file for `reason`.
    package func refusal(_ reason: JobFileError.Reason) -> JobFileError {
        JobFileError(path: path, file: file, reason: reason)
    }

    /// The file's contents, or nil when there is no file; read only when it holds at most
    /// `limit` bytes, so that another file named by mistake (an export, a sparse file) is
    /// refused at once instead of read whole into memory.
    ///
    /// - Throws: ``JobFileError`` `cannotRead` with the system's reason, `tooLarge`.
    package func contents(atMost limit: Int) throws(JobFileError) -> Data? {
        guard FileManager.default.fileExists(atPath: resolvedPath) else { return nil }
        var data = Data()
        do throws(POSIXFailure) {
            let reader = try FileDescriptor.open(resolvedPath, O_RDONLY)
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while data.count <= limit {
                let count = try buffer.withUnsafeMutableBytes { bytes in Result { () throws(POSIXFailure) in try reader.read(into: bytes) } }.get()
                if count == 0 { break }
                data.append(contentsOf: buffer[..<count])
            }
        } catch {
            throw refusal(.cannotRead(errno: error.errno))
        }
        guard data.count <= limit else { throw refusal(.tooLarge(limit: limit)) }
        return data
    }

    /// Replaces the file with `data` durably (``FileDescriptor/replaceFile(at:with:)``): after
    /// a crash, or when this fails, the file holds the old contents or the new.
    ///
    /// - Throws: ``JobFileError`` `cannotWrite`, naming the step that failed.
    package func replace(with data: Data) throws(JobFileError) {
        do throws(POSIXFailure) {
            try FileDescriptor.replaceFile(at: resolvedPath, with: data)
        } catch {
            throw JobFileError(path: path, file: file, reason: .cannotWrite(errno: error.errno), message: "cannot \(error.description)")
        }
    }

    /// Removes the file (the lock file stays, for the runs that wait on it).
    package func remove() {
        unlink(resolvedPath)
    }

    /// Removes the temporary files of ``replace(with:)`` that a run killed mid-write left
    /// beside the file. Called holding the lock: no other run of the job is writing one.
    private func removeLeftTemporaries() {
        let url = URL(fileURLWithPath: resolvedPath)
        let folder = url.deletingLastPathComponent().path
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return }
        for name in names where FileDescriptor.isTemporaryName(name, for: url.lastPathComponent) {
            unlink(folder + "/" + name)
        }
    }

    // MARK: - Checkpoints (JSON)

    /// Writes a checkpoint's members in key order, the same in every process: the member that
    /// names its kind (`command`, `input`) then comes before the long lists (`pendingItems`,
    /// `position`), where ``decodeCheckpoint(_:from:key:)`` finds it at once.
    package static var checkpointEncoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return encoder
    }

    /// Decodes a checkpoint file's contents. Every checkpoint is one JSON object with `key`
    /// near its start: anything else (an array, an input file, binary data) is refused before
    /// it is parsed, as Foundation builds the whole JSON tree first, at some thirty times the
    /// file's size.
    ///
    /// - Throws: ``JobFileError`` `holdsAnotherKind` (saying what it holds when it is another
    ///   kind of job file), `newerFormat`, `damaged` (naming the member that does not read) for
    ///   a file of this kind that does not decode, `belongsToAnotherJob` for a pipeline
    ///   checkpoint of another job that does not decode.
    package func decodeCheckpoint<T: Decodable>(_ type: T.Type, from data: Data, key: String) throws(JobFileError) -> T {
        // The key every such checkpoint writes: another JSON object, however large, is refused
        // without being parsed. Looked for in the whole file, which its kind's size limit
        // bounds: files of earlier versions wrote their members in any order, a list of
        // hundreds of kilobytes before it.
        guard Self.firstSignificantByte(of: data) == UInt8(ascii: "{"), data.firstRange(of: Data("\"\(key)\":".utf8)) != nil else {
            throw refusal(.holdsAnotherKind(Self.kind(holding: data)))
        }
        try checkFormat(of: data)
        do {
            return try JSONDecoder().decode(type, from: data)
        } catch {
            let held = Self.kind(holding: data)
            if held == file { throw refusal(.damaged(Self.unreadableMember(error))) }
            // Another job's pipeline checkpoint is that job's, damaged or not.
            if case .pipelineCheckpoint(let owner)? = held, case .pipelineCheckpoint = file { throw refusal(.belongsToAnotherJob(owner)) }
            throw refusal(.holdsAnotherKind(held))
        }
    }

    /// Refuses a checkpoint whose `format` member says it is of a later format than ``format``.
    private func checkFormat(of data: Data) throws(JobFileError) {
        struct Mark: Decodable { var format: Int? }
        // Format 1 has no mark: the whole file is parsed a second time only when one may be there.
        guard data.firstRange(of: Data("\"format\":".utf8)) != nil else { return }
        let mark: Mark
        do {
            mark = try JSONDecoder().decode(Mark.self, from: data)
        } catch {
            throw refusal(.damaged(Self.unreadableMember(error)))
        }
        if let format = mark.format, format > Self.format { throw refusal(.newerFormat(format)) }
    }

    /// Which kind of job file `data` looks like, from the members each kind always writes;
    /// nil for anything else.
    package static func kind(holding data: Data) -> JobFileError.FileKind? {
        // A job file is small and an object; nothing else is parsed to say what it is.
        guard firstSignificantByte(of: data) == UInt8(ascii: "{"), data.count <= 1 << 20,
              let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else { return nil }
        if object["input"] is String, object["committedItems"] != nil {
            return .importCheckpoint
        } else if let command = object["command"] as? String, object["job"] is String {
            return .pipelineCheckpoint(belongsTo: command)
        } else if object["sourceIdentifier"] is String, object["destinationIdentifier"] is String {
            return .copyCheckpoint
        }
        return nil
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

    // MARK: - Paths

    /// The path `path` resolves to: symbolic links followed, also a dangling link to the file
    /// it would create, and links among the folders. A path whose folder does not exist is
    /// returned as an absolute path.
    ///
    /// ```swift
    /// let target = JobFile.resolve("latest.checkpoint")   // "/var/lib/jobs/2026-12-04.checkpoint"
    /// ```
    package static func resolve(_ path: String) -> String {
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
}
