import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// The system calls under names the type's own methods do not shadow.
private func systemOpen(_ path: String, _ flags: Int32, _ mode: mode_t) -> Int32 { open(path, flags, mode) }
private func systemClose(_ fd: Int32) -> Int32 { close(fd) }
private func systemRead(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int { read(fd, buffer, count) }
private func systemWrite(_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int { write(fd, buffer, count) }

/// An open file descriptor, closed when the value goes away (or by ``close()``): the one owner
/// of a descriptor that asset code reads, writes and syncs through POSIX calls.
///
/// ```swift
/// let file = try FileDescriptor.open(path, O_RDONLY | O_NOFOLLOW)
/// let count = try file.read(into: buffer)
/// ```
package final class FileDescriptor {
    /// The descriptor; -1 once closed.
    package private(set) var raw: Int32

    package init(raw: Int32) { self.raw = raw }

    deinit { if raw >= 0 { _ = systemClose(raw) } }

    /// Opens `path` with `flags` (close-on-exec added) and, for a new file, `mode`.
    ///
    /// - Throws: ``POSIXFailure`` with `errno`.
    package static func open(_ path: String, _ flags: Int32, mode: mode_t = 0o600) throws(POSIXFailure) -> FileDescriptor {
        let fd = systemOpen(path, flags | O_CLOEXEC, mode)
        guard fd >= 0 else { throw POSIXFailure(errno: errno, operation: "open") }
        return FileDescriptor(raw: fd)
    }

    /// Opens `name` relative to the directory `directory` (`openat`).
    ///
    /// - Throws: ``POSIXFailure`` with `errno`.
    package static func open(_ name: String, in directory: FileDescriptor, _ flags: Int32, mode: mode_t = 0o600) throws(POSIXFailure) -> FileDescriptor {
        let fd = openat(directory.raw, name, flags | O_CLOEXEC, mode)
        guard fd >= 0 else { throw POSIXFailure(errno: errno, operation: "open") }
        return FileDescriptor(raw: fd)
    }

    /// Closes now.
    package func close() {
        if raw >= 0 { _ = systemClose(raw) }
        raw = -1
    }

    /// The file's status (`fstat`).
    ///
    /// - Throws: ``POSIXFailure`` with `errno`.
    package func status() throws(POSIXFailure) -> stat {
        var info = stat()
        guard fstat(raw, &info) == 0 else { throw POSIXFailure(errno: errno, operation: "fstat") }
        return info
    }

    /// Reads up to `buffer.count` bytes; 0 at the end. Retries on `EINTR`.
    ///
    /// - Throws: ``POSIXFailure`` with `errno`.
    package func read(into buffer: UnsafeMutableRawBufferPointer) throws(POSIXFailure) -> Int {
        while true {
            let n = systemRead(raw, buffer.baseAddress, buffer.count)
            if n >= 0 { return n }
            if errno != EINTR { throw POSIXFailure(errno: errno, operation: "read") }
        }
    }

    /// Writes all of `bytes`. Retries on `EINTR` and short writes.
    ///
    /// - Throws: ``POSIXFailure`` with `errno` (`ENOSPC` for a full disk).
    package func write(_ bytes: UnsafeRawBufferPointer) throws(POSIXFailure) {
        guard let base = bytes.baseAddress else { return }
        var written = 0
        while written < bytes.count {
            let n = systemWrite(raw, base + written, bytes.count - written)
            if n > 0 {
                written += n
            } else if n < 0 && errno != EINTR {
                throw POSIXFailure(errno: errno, operation: "write")
            }
        }
    }

    /// Flushes the file's data and size to the disk (`fdatasync`); for a directory, `fsync`,
    /// which makes its entries durable.
    ///
    /// - Throws: ``POSIXFailure`` with `errno`.
    package func sync(directory: Bool = false) throws(POSIXFailure) {
        let rc = directory ? fsync(raw) : fdatasync(raw)
        guard rc == 0 else { throw POSIXFailure(errno: errno, operation: directory ? "fsync" : "fdatasync") }
    }

    /// Syncs the directory at `url` (so that renames into it survive a crash).
    ///
    /// - Throws: ``POSIXFailure`` with `errno`.
    package static func syncDirectory(_ url: URL) throws(POSIXFailure) {
        let directory = try open(url.path, O_RDONLY | O_DIRECTORY)
        try directory.sync(directory: true)
    }

    /// Creates `url` as a folder of this user's own, private to them (0700), in a folder others
    /// may write (a temporary folder): one that exists already is used only when it is a real
    /// folder (no link) owned by this user (``checkOwnDirectory(_:)``).
    ///
    /// ```swift
    /// try FileDescriptor.makeOwnDirectory(FileManager.default.temporaryDirectory.appendingPathComponent("stratus-handouts-\(geteuid())"))
    /// ```
    ///
    /// - Throws: ``POSIXFailure`` with `errno`: the folder cannot be made, or is not this user's.
    package static func makeOwnDirectory(_ url: URL) throws(POSIXFailure) {
        if mkdir(url.path, 0o700) == 0 { return }
        guard errno == EEXIST else { throw POSIXFailure(errno: errno, operation: "mkdir \(url.path)") }
        _ = try checkOwnDirectory(url)
    }

    /// Whether `url` exists, as a folder this user may keep private data in, in a folder others
    /// may write: a real folder (no link) owned by this user, made private (0700) if it was not.
    /// Anyone who made it first, or could swap what is inside, could read or replace what
    /// Stratus keeps there.
    ///
    /// ```swift
    /// if try !FileDescriptor.checkOwnDirectory(cache) { _ = mkdir(cache.path, 0o700) }
    /// ```
    ///
    /// - Returns: `false` when nothing is at `url`.
    /// - Throws: ``POSIXFailure`` with `EACCES` for another user's folder, `ENOTDIR` for a link
    ///   or a file.
    package static func checkOwnDirectory(_ url: URL) throws(POSIXFailure) -> Bool {
        let path = url.path
        var info = stat()
        guard lstat(path, &info) == 0 else {
            if errno == ENOENT { return false }
            throw POSIXFailure(errno: errno, operation: "stat \(path)")
        }
        guard info.st_mode & S_IFMT == S_IFDIR else { throw POSIXFailure(errno: ENOTDIR, operation: "use \(path), which is a link or a file, not a folder of this user's,") }
        guard info.st_uid == geteuid() else {
            throw POSIXFailure(errno: EACCES, operation: "use \(path), a folder another user (uid \(info.st_uid)) made; remove it or name another folder,")
        }
        if info.st_mode & 0o077 != 0 && chmod(path, 0o700) != 0 { throw POSIXFailure(errno: errno, operation: "chmod \(path)") }
        return true
    }

    /// When this process is root, gives `path`, which it just made, the owner of its folder when
    /// that is another user, as SQLite gives its log files the store file's owner: root writing
    /// into another user's store (a root cron job, `sudo stratus import`) must leave folders that
    /// user can enter and files it can read.
    ///
    /// ```swift
    /// let file = try FileDescriptor.open(path, O_WRONLY | O_CREAT | O_EXCL, mode: 0o600)
    /// FileDescriptor.inheritFolderOwner(path)
    /// ```
    package static func inheritFolderOwner(_ path: String) {
        giveToOwner(of: URL(fileURLWithPath: path).deletingLastPathComponent().path, path)
    }

    /// When this process is root, gives `path`, which root owns, the owner of `source` when that
    /// is another user (``inheritFolderOwner(_:)``: a store's asset folder takes the store
    /// file's owner).
    ///
    /// ```swift
    /// FileDescriptor.giveToOwner(of: storePath, storePath + ".assets")
    /// ```
    package static func giveToOwner(of source: String, _ path: String) {
        guard geteuid() == 0 else { return }
        var owner = stat(), item = stat()
        guard stat(source, &owner) == 0, owner.st_uid != 0, lstat(path, &item) == 0, item.st_uid == 0 else { return }
        _ = lchown(path, owner.st_uid, owner.st_gid)
    }

    /// Creates `url` (and missing parents) as folders private to this user (0700), and makes an
    /// existing `url` private too: Stratus's own folders hold copies of private data.
    ///
    /// - Throws: ``POSIXFailure`` with `errno`.
    package static func makePrivateDirectory(_ url: URL) throws(POSIXFailure) {
        let path = url.path
        if mkdir(path, 0o700) == 0 { return inheritFolderOwner(path) }
        switch errno {
        case EEXIST:
            var info = stat()
            guard lstat(path, &info) == 0 else { throw POSIXFailure(errno: errno, operation: "stat") }
            guard info.st_mode & S_IFMT == S_IFDIR else { throw POSIXFailure(errno: ENOTDIR, operation: "mkdir") }
            if info.st_mode & 0o077 != 0 && chmod(path, 0o700) != 0 { throw POSIXFailure(errno: errno, operation: "chmod") }
        case ENOENT:
            try makePrivateDirectory(url.deletingLastPathComponent())
            if mkdir(path, 0o700) == 0 { return inheritFolderOwner(path) }
            if errno != EEXIST { throw POSIXFailure(errno: errno, operation: "mkdir") }
        default:
            throw POSIXFailure(errno: errno, operation: "mkdir")
        }
    }
}

/// A failed system call: which, and `errno`.
package struct POSIXFailure: Error, CustomStringConvertible {
    package let errno: Int32
    package let operation: String

    package init(errno: Int32, operation: String) {
        self.errno = errno
        self.operation = operation
    }

    /// The system's text for the error (`No such file or directory`).
    package var reason: String { String(cString: strerror(errno)) }

    package var description: String { "\(operation): \(reason)" }
}
