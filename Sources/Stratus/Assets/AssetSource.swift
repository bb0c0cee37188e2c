import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// An asset's source file, opened the one safe way: as a regular file, read only.
///
/// - The last component is opened with `O_NOFOLLOW`: a symbolic link is refused, never
///   followed (unless the asset's folder allows links, and then only to files inside it).
/// - It is opened with `O_NONBLOCK` and checked with `fstat` before a byte is read: a FIFO
///   neither blocks the open nor the read, and a directory, FIFO, socket or device (`/dev/zero`)
///   is refused with what it is.
/// - A source confined to a folder (``Asset/init(path:in:followsSymlinks:)``, what
///   `--assets-dir` makes) is walked component by component from the folder with `openat`
///   and `O_NOFOLLOW`: an absolute path or a `..` component is refused before anything is
///   opened, and no link inside the folder leads out of it.
/// - Nothing of the source is changed: no `chmod`, no write, not even its access time
///   beyond what reading does.
struct AssetSource {
    let file: FileDescriptor
    let size: Int64
    /// The source as messages name it.
    let displayPath: String
    /// The SHA-256 (lowercase hexadecimal) the content must have, when its name states one.
    var expectedDigest: String?
    /// The source is a store's content file (``Asset/Source/storedContent(digest:)``), not a
    /// file of the user's.
    var isStoredContent = false

    /// Opens the source of `asset` (which needs content), refusing what is not a regular file
    /// or larger than `maximumSize`.
    ///
    /// - Throws: ``StratusError``: `assetFileNotFound` (missing or unreadable), `invalidArguments`
    ///   (not a regular file, a link, a path leaving its folder), `limitExceeded` (too large).
    static func open(_ asset: Asset, maximumSize: Int64, field: String, recordID: Record.ID) throws(StratusError) -> AssetSource {
        func fail(_ code: StratusError.Code, _ message: String) -> StratusError {
            StratusError(code, "record '\(recordID.recordName)': asset field '\(field)': \(message)", recordID: recordID)
        }
        let opened: (FileDescriptor, String)
        var expectedDigest: String?
        switch asset.source {
        case .confined(let root, let path, let followsSymlinks, let digest)?:
            opened = try openConfined(root: root, path: path, followsSymlinks: followsSymlinks, fail)
            expectedDigest = digest
        case nil, .storedContent?:
            guard let url = asset.contentURL else { throw fail(.invalidArguments, "the asset has no file to read") }
            if case .storedContent(let digest)? = asset.source { expectedDigest = digest }
            do {
                opened = (try FileDescriptor.open(url.path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY), url.path)
            } catch {
                throw openFailure(error, url.path, fail)
            }
        }
        let (file, display) = opened
        let info: stat
        do { info = try file.status() } catch { throw fail(.assetFileNotFound, "cannot read \(display): \(error.reason)") }
        let kind = info.st_mode & S_IFMT
        guard kind == S_IFREG else { throw fail(.invalidArguments, "\(display) is \(describe(kind)), not a regular file; an asset's source must be a regular file") }
        // Regular files never block; reading goes back to the ordinary mode.
        _ = fcntl(file.raw, F_SETFL, fcntl(file.raw, F_GETFL) & ~O_NONBLOCK)
        let size = Int64(info.st_size)
        if size > maximumSize {
            throw fail(.limitExceeded, "\(display) holds \(size) bytes; the limit for one asset is \(maximumSize) bytes")
        }
        var source = AssetSource(file: file, size: size, displayPath: display, expectedDigest: expectedDigest)
        if case .storedContent? = asset.source { source.isStoredContent = true }
        return source
    }

    private static func openConfined(root: URL, path: String, followsSymlinks: Bool, _ fail: (StratusError.Code, String) -> StratusError) throws(StratusError) -> (FileDescriptor, String) {
        let display = path
        if path.hasPrefix("/") {
            throw fail(.invalidArguments, "the path '\(path)' is absolute; asset paths are relative to the assets folder (\(root.path)) and stay inside it")
        }
        let components = path.split(separator: "/", omittingEmptySubsequences: true).filter { $0 != "." }.map(String.init)
        if components.contains("..") {
            throw fail(.invalidArguments, "the path '\(path)' has a '..' component; asset paths stay inside the assets folder (\(root.path))")
        }
        guard !components.isEmpty else { throw fail(.invalidArguments, "the asset path is empty") }
        if path.utf8.contains(0) { throw fail(.invalidArguments, "the asset path holds a NUL character") }
        let directory: FileDescriptor
        do {
            directory = try FileDescriptor.open(root.path, O_RDONLY | O_DIRECTORY)
        } catch {
            throw fail(.assetFileNotFound, "cannot open the assets folder \(root.path): \(error.reason)")
        }
        if followsSymlinks {
            // Links are followed, but where they lead must still be inside the folder. The path
            // is resolved with O_PATH, which opens nothing: a file, FIFO or device outside the
            // folder is never opened (opening a FIFO wakes its writer; opening some devices acts).
            // Only a regular file found inside is opened, through the descriptor resolved.
            let located: FileDescriptor
            do {
                located = try FileDescriptor.open(components.joined(separator: "/"), in: directory, Self.pathOnly)
            } catch {
                if error.errno == ELOOP {
                    throw fail(.invalidArguments, "\(display): its symbolic links lead in a loop (or through more than 40 links), so it names no file")
                }
                throw openFailure(error, display, in: root.path, fail)
            }
            guard let rootPath = realPath(of: directory.raw), let filePath = realPath(of: located.raw),
                  filePath.hasPrefix(rootPath.hasSuffix("/") ? rootPath : rootPath + "/") else {
                throw fail(.invalidArguments, "\(display) leads outside the assets folder (\(root.path)) through a symbolic link")
            }
            let kind: mode_t
            do { kind = try located.status().st_mode & S_IFMT } catch { throw fail(.assetFileNotFound, "cannot read \(display): \(error.reason)") }
            guard kind == S_IFREG else { throw fail(.invalidArguments, "\(display) is \(describe(kind)), not a regular file; an asset's source must be a regular file") }
            do {
                return (try FileDescriptor.open("/proc/self/fd/\(located.raw)", O_RDONLY | O_NONBLOCK | O_NOCTTY), display)
            } catch {
                throw openFailure(error, display, in: root.path, fail)
            }
        }
        var current = directory
        for (index, component) in components.enumerated() {
            let last = index == components.count - 1
            do {
                current = try FileDescriptor.open(component, in: current, last ? O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY : O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
            } catch {
                // Without following links, a link anywhere on the way is refused.
                if !last && (error.errno == ENOTDIR || error.errno == ELOOP), isSymbolicLink(component, in: current) {
                    throw fail(.invalidArguments, "\(display): '\(component)' is a symbolic link; links are not followed (--follow-symlinks follows those that stay in the folder)")
                }
                throw openFailure(error, display, in: root.path, fail)
            }
        }
        return (current, display)
    }

    /// Linux's `O_PATH` (which Glibc's Swift module does not export): a descriptor that names
    /// a file without opening it, for `fstat`, `/proc/self/fd` and opening it again.
    private static let pathOnly: Int32 = 0o10000000

    /// - Parameter folder: the assets folder a relative path was looked for in, named when the
    ///   file is missing (the path alone does not say where it was looked for).
    private static func openFailure(_ error: POSIXFailure, _ display: String, in folder: String? = nil, _ fail: (StratusError.Code, String) -> StratusError) -> StratusError {
        switch error.errno {
        case ELOOP:
            return fail(.invalidArguments, "\(display) is a symbolic link; asset sources are read only as regular files and links are not followed")
        case ENOENT, ENOTDIR:
            return fail(.assetFileNotFound, "\(display) does not exist" + (folder.map { " in the assets folder \($0)" } ?? ""))
        case EACCES, EPERM:
            return fail(.assetFileNotFound, "\(display) cannot be read: permission denied")
        case ENXIO:
            // What opening a socket answers (one bound in the folder, as a program's is).
            return fail(.invalidArguments, "\(display) is a socket (or a device without a driver), not a regular file; an asset's source must be a regular file")
        default:
            return fail(.assetFileNotFound, "cannot open \(display): \(error.reason)")
        }
    }

    private static func isSymbolicLink(_ name: String, in directory: FileDescriptor) -> Bool {
        var info = stat()
        return fstatat(directory.raw, name, &info, AT_SYMLINK_NOFOLLOW) == 0 && info.st_mode & S_IFMT == S_IFLNK
    }

    /// The path an open descriptor names, as the kernel resolved it.
    private static func realPath(of descriptor: Int32) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink("/proc/self/fd/\(descriptor)", &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private static func describe(_ kind: mode_t) -> String {
        switch kind {
        case S_IFDIR: "a directory"
        case S_IFIFO: "a FIFO"
        case S_IFCHR: "a character device"
        case S_IFBLK: "a block device"
        case S_IFSOCK: "a socket"
        case S_IFLNK: "a symbolic link"
        default: "not a regular file"
        }
    }
}
