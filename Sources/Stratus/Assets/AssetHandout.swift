import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The file a fetched asset hands to the app (``Asset/fileURL``): the app's own copy of the
/// store's content, made the first time it is asked for, as CloudKit hands out a downloaded
/// copy. Moving, deleting or writing it never changes the store.
///
/// The store keeps each content once, in a read-only file every record with those bytes shares;
/// giving that file to the app would let one `removeItem` (or, for a process running as root,
/// which ignores file modes, one write) destroy the asset of every record that shares it. A
/// hard link would not help: it is the same file, so a write through it changes the store's
/// content. So the app gets a copy, cloned where the file system can (`FICLONE`: blocks shared
/// until either file is written, so a clone costs no time and no space), copied in the kernel
/// otherwise. Copies of one ``Asset`` value share its file; each fetch makes its own.
///
/// ```swift
/// let handout = AssetHandout(content: storeFile, identifier: sha256Hex)
/// let url = handout.fileURL()       // <store>.assets/handout/<process>/<sha256>.<n>
/// ```
final class AssetHandout: Sendable {
    /// The store's own read-only file with the content; Stratus reads it, the app never sees it.
    let content: URL
    /// The content's SHA-256, which names the handed-out files.
    let identifier: String
    /// The asset's size: content of another size is damaged, and is not handed out as the asset.
    let size: Int64?
    private let current = Mutex<URL?>(nil)

    init(content: URL, identifier: String, size: Int64? = nil) {
        self.content = content
        self.identifier = identifier
        self.size = size
    }

    /// The app's file with the content: made at the first call, and made again when it is gone
    /// (the app moved or deleted it, or the staging folder's cleanup removed it); `nil` when
    /// no copy can be made (the content left the store since it was read, the disk is full).
    func fileURL() -> URL? {
        current.withLock { url in
            if let existing = url, AssetHandouts.isRegularFile(existing) { return existing }
            url = AssetHandouts.handOut(content, identifier: identifier, size: size)
            return url
        }
    }
}

/// Where handed-out asset files live, and when they go.
///
/// Each process hands out into its own folder beside the store's content, on the same file
/// system (`<store>.assets/handout/<process>/` on SQLite, the asset cache folder on
/// PostgreSQL), private to the store's user; when that folder cannot be written (a read-only
/// store), into `$TMPDIR/stratus-handouts-<uid>/handout/<process>/`. A process's folder is
/// named after its asset holder (``AssetHolder``), whose lock shows it is alive.
///
/// Cleanup:
/// - a handed-out file is removed an hour after it was made (``retention``), by the process
///   itself when it hands out another file (at most once a minute); an ``Asset`` asked for its
///   ``Asset/fileURL`` again makes a new copy;
/// - the folder of a process that ended, however it ended, is removed by the next process that
///   reads or writes assets of the store, and by ``Database/collectUnreferencedAssets()``
///   (`stratus assets gc`).
enum AssetHandouts {
    /// How long a handed-out file is kept: files made earlier are removed by the next sweep.
    static let retention: TimeInterval = 3_600
    /// How often a process sweeps its own folder, at most.
    static let sweepInterval: TimeInterval = 60

    /// The subfolder of a store's local folder that holds the processes' folders.
    static let folderName = "handout"

    private static let counter = Atomic<Int>(0)
    /// When each of this process's folders was last swept, by path.
    private static let lastSweeps = Mutex<[String: Date]>([:])

    /// A new file with `content`'s bytes that the app owns, or `nil` when none can be made
    /// (also when `content` is not `size` bytes long: a damaged assets folder).
    static func handOut(_ content: URL, identifier: String, size: Int64? = nil) -> URL? {
        for directory in localDirectories(for: content) {
            do {
                return try handOut(content, identifier: identifier, size: size, in: directory)
            } catch {
                continue
            }
        }
        return nil
    }

    /// Where to hand out: the store's local folder (the content file's folder is its `sha256`
    /// subfolder, see ``AssetContentStore/contentURL(_:)``), then a private temporary folder.
    static func localDirectories(for content: URL) -> [URL] {
        var directories: [URL] = []
        let folder = content.deletingLastPathComponent()
        if folder.lastPathComponent == "sha256" { directories.append(folder.deletingLastPathComponent()) }
        directories.append(temporaryDirectory)
        return directories
    }

    /// The fallback in the machine's temporary folder, which every user may write in: used
    /// only as a folder of this user's own (``FileDescriptor/makeOwnDirectory(_:)``).
    private static var temporaryDirectory: URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("stratus-handouts-\(geteuid())", isDirectory: true)
    }

    private static func handOut(_ content: URL, identifier: String, size: Int64?, in directory: URL) throws -> URL {
        if directory == temporaryDirectory {
            try FileDescriptor.makeOwnDirectory(directory)
        } else {
            // A store's folder that is gone (the store was deleted while an asset of it was
            // held) is not made again for a copy: only its `handout` levels are ever made.
            var info = stat()
            guard lstat(directory.path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else { throw POSIXFailure(errno: ENOENT, operation: "stat") }
        }
        let holder = try AssetHolder.shared(in: directory)
        let folder = directory.appendingPathComponent(folderName, isDirectory: true).appendingPathComponent(holder.name, isDirectory: true)
        try FileDescriptor.makePrivateDirectory(folder)
        sweepIfDue(folder)
        let number = counter.wrappingAdd(1, ordering: .relaxed).newValue
        let name = SHA256Hasher.Digest.isHexadecimal(identifier) ? identifier : "asset"
        let destination = folder.appendingPathComponent("\(name).\(number)")
        try copy(content, to: destination, size: size)
        return destination
    }

    /// Copies `source` into a new file `destination` (0600): a clone where the file system can
    /// make one, else a copy inside the kernel (`sendfile`), else read and written. Copies
    /// nothing when `source` is not `expectedSize` bytes long (EIO).
    static func copy(_ source: URL, to destination: URL, size expectedSize: Int64? = nil) throws(POSIXFailure) {
        let input = try FileDescriptor.open(source.path, O_RDONLY | O_NOFOLLOW)
        let size = Int64(try input.status().st_size)
        if let expectedSize, expectedSize != size { throw POSIXFailure(errno: EIO, operation: "copy") }
        let output = try FileDescriptor.open(destination.path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o600)
        do throws(POSIXFailure) {
            #if os(Linux)
            // FICLONE = _IOW(0x94, 9, int): the destination shares the source's blocks, copied
            // on write, so writing either file never changes the other.
            if ioctl(output.raw, UInt(0x4004_9409), input.raw) == 0 { return }
            #endif
            var offset = off_t(0)
            kernelCopy: while Int64(offset) < size {
                let sent = sendfile(output.raw, input.raw, &offset, Int(min(size - Int64(offset), 1 << 30)))
                if sent > 0 { continue }
                if sent == 0 { break }
                switch errno {
                case EINTR: continue
                case EINVAL, ENOSYS, EOPNOTSUPP: break kernelCopy
                default: throw POSIXFailure(errno: errno, operation: "sendfile")
                }
            }
            if Int64(offset) < size {
                guard lseek(input.raw, offset, SEEK_SET) >= 0 else { throw POSIXFailure(errno: errno, operation: "lseek") }
                let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
                defer { buffer.deallocate() }
                while true {
                    let count = try input.read(into: buffer)
                    if count == 0 { break }
                    try output.write(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
                }
            }
            guard Int64(try output.status().st_size) == size else { throw POSIXFailure(errno: EIO, operation: "copy") }
        } catch {
            unlink(destination.path)
            throw error
        }
    }

    /// Removes the files of this process's `folder` made more than ``retention`` ago, at most
    /// once per ``sweepInterval``.
    static func sweepIfDue(_ folder: URL, now: Date = Date()) {
        let due = lastSweeps.withLock { sweeps -> Bool in
            if let last = sweeps[folder.path], now.timeIntervalSince(last) < sweepInterval { return false }
            sweeps[folder.path] = now
            return true
        }
        if due { _ = removeFiles(in: folder, madeBefore: now.addingTimeInterval(-retention)) }
    }

    /// Removes the regular files in `folder` whose status changed last before `cutoff` (a
    /// handed-out file's status changes when it is made, renamed or written); answers how many.
    @discardableResult
    static func removeFiles(in folder: URL, madeBefore cutoff: Date) -> Int {
        var removed = 0
        let limit = cutoff.timeIntervalSince1970
        for name in (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? [] {
            let path = folder.appendingPathComponent(name).path
            var info = stat()
            guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { continue }
            if Double(info.st_ctim.tv_sec) + Double(info.st_ctim.tv_nsec) / 1e9 < limit, unlink(path) == 0 { removed += 1 }
        }
        return removed
    }

    /// Removes the folders of this machine's processes that ended from `directory`'s handout
    /// folder; answers how many.
    @discardableResult
    static func removeEnded(in directory: URL) -> Int {
        let parent = directory.appendingPathComponent(folderName, isDirectory: true)
        var removed = 0
        for name in (try? FileManager.default.contentsOfDirectory(atPath: parent.path)) ?? [] where !name.hasPrefix(".") {
            guard !AssetHolder.isAlive(name, in: directory) else { continue }
            if (try? FileManager.default.removeItem(at: parent.appendingPathComponent(name, isDirectory: true))) != nil { removed += 1 }
        }
        return removed
    }

    static func isRegularFile(_ url: URL) -> Bool {
        var info = stat()
        return lstat(url.path, &info) == 0 && info.st_mode & S_IFMT == S_IFREG
    }
}
