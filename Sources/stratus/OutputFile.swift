import Foundation
import Stratus

/// Where `--output FILE` writes, decided the way shell redirection would, but without ever
/// leaving half a file under the name:
///
/// - a new name, or a regular file (with `--force`): a temporary file beside it, synced and
///   renamed over it when complete, so a reader never sees half a file (a file replaced keeps
///   its permissions; another hard link to it keeps the old content);
/// - a symbolic link: followed, as `>` follows it: its target is replaced the same way and the
///   link stays a link; a link to a file that does not exist needs `--force` (a typo'd link
///   must not create a file somewhere else);
/// - a FIFO or a character device (`/dev/null`, a terminal): written directly, no `--force`
///   (nothing is overwritten); `-`, `/dev/stdout`, `/dev/stderr`, `/dev/fd/N` and
///   `/proc/self/fd/N` write to that open descriptor itself, as `>&N` would;
/// - a directory, a block device or a socket: refused (exit 73).
///
/// ```swift
/// let output = try OutputFile(path: "out.ndjson", force: false)
/// try output.handle.write(contentsOf: data)
/// try output.commit()
/// ```
struct OutputFile {
    let handle: FileHandle
    /// The temporary file and the name it is renamed to when complete, for regular files, and
    /// whether that may replace a file there then.
    private let replacement: (temporary: String, final: String, replaces: Bool)?

    /// - Throws: ``CommandFailure`` `cannotCreateOutput` (exit 73) for an existing file without
    ///   `--force`, a dangling link without `--force`, a directory, or one that cannot be made.
    init(path: String?, force: Bool) throws {
        guard let path, path != "-" else {
            handle = .standardOutput
            replacement = nil
            return
        }
        if let descriptor = Self.openDescriptorNamed(path) {
            let copy = dup(descriptor)
            guard copy >= 0 else { throw CommandFailure.system(.cannotCreateOutput, "cannot write to \(path)") }
            handle = FileHandle(fileDescriptor: copy, closeOnDealloc: true)
            replacement = nil
            return
        }
        var info = stat()
        var target = path
        if lstat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFLNK {
            target = JobFile.resolve(path)
            if stat(path, &info) != 0 {
                guard force else {
                    throw CommandFailure(.cannotCreateOutput, "\(path) is a symbolic link to \(target), which does not exist; pass --force to create it")
                }
                info = stat()
            }
        } else if lstat(path, &info) != 0 {
            info = stat()
        }
        switch info.st_mode & S_IFMT {
        case S_IFIFO, S_IFCHR:
            let descriptor = open(path, O_WRONLY | O_CLOEXEC)
            guard descriptor >= 0 else { throw CommandFailure.system(.cannotCreateOutput, "cannot open \(path)") }
            handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
            replacement = nil
            return
        case S_IFDIR:
            throw CommandFailure(.cannotCreateOutput, "\(path) is a directory")
        case S_IFBLK, S_IFSOCK:
            throw CommandFailure(.cannotCreateOutput, "\(path) is a block device or a socket; export writes files, FIFOs and character devices")
        case S_IFREG:
            guard force else { throw CommandFailure(.cannotCreateOutput, "\(path) exists; pass --force to overwrite it") }
        default:
            break  // does not exist yet
        }
        Self.removeLeftPartials(of: target)
        // The pid names the run for whoever looks; the random part keeps two runs with one pid
        // (in two containers sharing the folder) apart.
        let temporary = target + ".partial-\(getpid())-" + String(UInt32.random(in: 0x1000_0000...UInt32.max), radix: 16)
        let replacing = info.st_mode & S_IFMT == S_IFREG
        // A new file holds a store's records, so it is as private as the store (0600), as the
        // asset files beside it are; a file replaced keeps its permissions, as under `>` (its
        // replacement is private until then, so that nobody opens a private file's content
        // meanwhile).
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if descriptor >= 0 {
            // Held while this run writes it: another run removes only a partial file nobody
            // holds (a pid says nothing across PID namespaces, containers or NFS hosts).
            _ = flock(descriptor, LOCK_EX | LOCK_NB)
            if replacing { _ = fchmod(descriptor, info.st_mode & 0o7777) }
        }
        guard descriptor >= 0 else {
            // The user named `path`, not the temporary file written beside it: say which folder fails.
            let reason = String(cString: strerror(errno))
            let folder = (target as NSString).deletingLastPathComponent
            var isFolder: ObjCBool = false
            let folderExists = FileManager.default.fileExists(atPath: folder.isEmpty ? "." : folder, isDirectory: &isFolder)
            let why = folderExists && isFolder.boolValue ? reason : "the folder \(folder) does not exist"
            throw CommandFailure(.cannotCreateOutput, "cannot create \(path): \(why)")
        }
        handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        replacement = (temporary, target, force)
    }

    /// Removes the temporary files that runs killed before their rename left beside `target`
    /// (`FILE.partial-PID-RANDOM` of a process that is gone): a job killed every day by `timeout -s
    /// KILL` would otherwise fill the disk with them.
    private static func removeLeftPartials(of target: String) {
        let url = URL(fileURLWithPath: target)
        let prefix = url.lastPathComponent + ".partial-"
        let folder = url.deletingLastPathComponent().path
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return }
        for name in names where name.hasPrefix(prefix) {
            // `FILE.partial-PID-RANDOM`, or `FILE.partial-PID` of earlier versions.
            let pidText = name.dropFirst(prefix.count).prefix { $0 != "-" }
            guard let pid = pid_t(pidText), pid != getpid(), kill(pid, 0) != 0, errno == ESRCH else { continue }
            // A run still writing it holds its lock (a process of another PID namespace, or of
            // another host on a shared folder, has a pid this one does not see).
            let descriptor = open(folder + "/" + name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
            guard descriptor >= 0 else { continue }
            defer { close(descriptor) }
            guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else { continue }
            unlink(folder + "/" + name)
        }
    }

    /// The descriptor a name of an open descriptor stands for (`/dev/stdout`, `/dev/fd/3`).
    private static func openDescriptorNamed(_ path: String) -> Int32? {
        switch path {
        case "/dev/stdout": return STDOUT_FILENO
        case "/dev/stderr": return STDERR_FILENO
        default:
            for prefix in ["/dev/fd/", "/proc/self/fd/"] where path.hasPrefix(prefix) {
                return Int32(path.dropFirst(prefix.count))
            }
            return nil
        }
    }

    /// Makes the output complete: a regular file is synced and renamed into place.
    ///
    /// - Throws: ``CommandFailure`` `cannotCreateOutput` when it cannot be synced or moved.
    func commit() throws {
        guard let (temporary, final, replaces) = replacement else { return }
        do {
            try handle.synchronize()
        } catch {
            throw CommandFailure(.cannotCreateOutput, "cannot write \(final): \(error.localizedDescription)")
        }
        guard replaces else {
            // Without --force, a file another run put there meanwhile is not replaced: a link
            // fails where a name exists, which a rename would not.
            if link(temporary, final) == 0 {
                unlink(temporary)
                return
            }
            // A file system without hard links gets the rename after a look.
            var info = stat()
            if errno == EEXIST || lstat(final, &info) == 0 {
                unlink(temporary)
                throw CommandFailure(.cannotCreateOutput, "\(final) was created by something else while this export ran; pass --force to overwrite it (this export is not kept)")
            }
            guard rename(temporary, final) == 0 else {
                throw CommandFailure.system(.cannotCreateOutput, "cannot move \(temporary) to \(final)")
            }
            return
        }
        guard rename(temporary, final) == 0 else {
            throw CommandFailure.system(.cannotCreateOutput, "cannot move \(temporary) to \(final)")
        }
    }

    /// Drops an incomplete output: the temporary file goes; what went to a FIFO or device stays.
    func abandon() {
        guard let (temporary, _, _) = replacement else { return }
        unlink(temporary)
    }
}
