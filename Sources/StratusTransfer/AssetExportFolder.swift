import Foundation
import Stratus
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A folder beside an export where asset content is written, so that the export holds its
/// assets byte for byte: `stratus export --assets-dir DIR`, which `stratus import --assets-dir
/// DIR` reads back.
///
/// Each content is written once, streamed (never whole in memory), under a temporary name and
/// renamed when complete: a Stratus asset as `<SHA-256>` (its JSON's `downloadURL` names that
/// file), a CloudKit asset under its `fileChecksum` in base64url (its JSON stays CloudKit's,
/// and an import with the folder finds the content by that name), or, without a checksum, as
/// `<SHA-256>` named by the asset's ``contentFileMember``. A file already in the folder
/// under that name is used when it is a regular file (not a symbolic link) with the very
/// bytes of the content; anything else there stops the export and is left as it is. The
/// folder and its files are private to their user (0700, 0600), like the store they come from.
///
/// ```swift
/// let folder = try AssetExportFolder(directory: URL(fileURLWithPath: "export-assets"))
/// writer.jsonOptions.assetFolder = folder
/// ```
public final class AssetExportFolder: @unchecked Sendable {
    // @unchecked: `written` is touched under `lock` only.
    public let directory: URL
    private let lock = NSLock()
    /// The names written by this folder object, with the stored content each holds.
    private var written: [String: String] = [:]
    /// A failure that is not the record's since it was last taken: a write into the folder
    /// that failed (a full disk, the folder removed), or stored content that cannot be read
    /// whole (damaged or missing: the store's failure, which a record cannot mend).
    private var outputFailure: (any Error)?

    /// Keeps `failure` for ``takeOutputFailure()`` when it is not the record's: the output's
    /// (``RecordWriter/OutputError``) or the store's (a ``StratusError`` other than
    /// `invalidArguments`); answers whether it kept it.
    @discardableResult
    func recordFailureBeyondTheRecord(_ failure: any Error) -> Bool {
        let beyond = failure is RecordWriter.OutputError || (failure as? StratusError).map { $0.code != .invalidArguments } == true
        if beyond { lock.withLock { if outputFailure == nil { outputFailure = failure } } }
        return beyond
    }

    /// The failure of the folder's output or of the store since the last call, if any, the
    /// store's naming `record`.
    func takeFailure(writing record: Record) -> (any Error)? {
        guard let failure = takeOutputFailure() else { return nil }
        guard let stored = failure as? StratusError else { return failure }
        return StratusError(stored.code, "record '\(Naming.shown(recordName: record.recordID.recordName))': \(stored.message)", recordID: record.recordID)
    }

    /// The failure of the folder's output or of the store since the last call, if any.
    private func takeOutputFailure() -> (any Error)? {
        lock.withLock {
            defer { outputFailure = nil }
            return outputFailure
        }
    }

    /// Bytes copied at a time.
    static let chunkSize = 1 << 20

    /// The member an exported CloudKit asset without a `fileChecksum` gets beside CloudKit's:
    /// the name of its content's file in the folder (its SHA-256), which an import with the
    /// folder reads its content from.
    public static let contentFileMember = "stratusContentFile"

    /// A folder at `directory`, created (0700) when missing.
    ///
    /// - Throws: ``StratusError`` `invalidArguments` when `directory` is not a folder, or
    ///   `internalError` when it cannot be made.
    public init(directory: URL) throws {
        self.directory = directory
        do {
            var info = stat()
            // A link to a folder is that folder, as for the import that reads it back.
            if stat(directory.path, &info) == 0 || lstat(directory.path, &info) == 0 {
                guard info.st_mode & S_IFMT == S_IFDIR else {
                    throw StratusError(.invalidArguments, "\(directory.path) exists and is not a folder; name a folder for the assets")
                }
            } else {
                try FileDescriptor.makePrivateDirectory(directory)
            }
            Self.removeLeftTemporaries(in: directory)
        } catch let failure as POSIXFailure {
            throw StratusError(.internalError, "cannot create the assets folder \(directory.path): \(failure.reason)")
        }
    }

    /// Writes the asset's content into the folder (unless it is there) and answers its name in
    /// the folder; nil for an asset whose content the store does not have.
    ///
    /// - Throws: ``StratusError`` when the content cannot be read or written.
    public func export(_ asset: Asset) throws -> String? {
        guard let identifier = asset.storedIdentifier, let source = asset.contentURL else { return nil }
        let name = asset.downloadURL != nil || asset.hasCloudKitMetadata ? asset.fileChecksum.flatMap(AssetAttacher.checksumFileName) ?? identifier : identifier
        // Two contents wanting one name (a fileChecksum that is another content's name, or two
        // checksums that differ only where base64 and base64url do) cannot both be written: the
        // second would replace the first's bytes for every record naming the file.
        func claimed() throws -> Bool {
            guard let holder = written[name] else { return false }
            guard holder == identifier else {
                throw StratusError(.invalidArguments, "two different asset contents would have the one file name \(name) in \(directory.path): a CloudKit asset's fileChecksum names another content's file (an input that was not CloudKit's); the export stops rather than write one over the other")
            }
            return true
        }
        // Content that is not the asset's size would be exported as the asset, and the export
        // would read back as the damage under a self-consistent name.
        if let fileSize = asset.damagedContentSize() {
            throw StratusError(.assetFileModified, asset.damagedContentMessage(fileSize: fileSize))
        }
        if try lock.withLock(claimed) { return name }
        let destination = directory.appendingPathComponent(name)
        if try !holdsContent(destination, of: source, digest: identifier) {
            // A name is the content's (its SHA-256, or CloudKit's checksum of it): a file there
            // with other bytes is not an earlier export's, and is not this export's to replace.
            var info = stat()
            if lstat(destination.path, &info) == 0 {
                let there = switch info.st_mode & S_IFMT {
                case S_IFLNK: "a symbolic link of that name is already there (an export writes through no link)"
                case S_IFREG: "a file of that name is already there with other bytes than the asset's content"
                default: "something that is not a regular file is already there under that name"
                }
                // A store whose content changed is the failure to name, not the folder's file.
                let held = try Self.digest(of: source, name: name)
                if held != identifier { throw Self.damagedContent(identifier, holding: held, name: name) }
                throw RecordWriter.OutputError(message: "cannot write the asset \(name) into \(directory.path): \(there), and an export replaces nothing it did not write; move it away, or name another folder")
            }
            try copy(source, to: destination, digest: identifier)
        }
        try lock.withLock {
            if try !claimed() { written[name] = identifier }
        }
        return name
    }

    /// Whether `destination` is a regular file (not a symbolic link, a folder or a device)
    /// holding exactly the bytes of `source`, compared a chunk at a time. Anything else, or a
    /// file that cannot be read, is replaced.
    ///
    /// - Throws: ``StratusError`` `assetFileModified` when both hold the same bytes and those
    ///   do not hash to `digest` (an earlier export of content that was damaged already).
    private func holdsContent(_ destination: URL, of source: URL, digest: String) throws -> Bool {
        var hasher = SHA256Hasher()
        guard matches(destination, source, hashingInto: &hasher) else { return false }
        let held = hasher.finalize().hexadecimal
        if held != digest { throw Self.damagedContent(digest, holding: held, name: destination.lastPathComponent) }
        return true
    }

    /// ``holdsContent(_:of:digest:)``'s comparison, hashing the bytes of `source` it reads.
    private func matches(_ destination: URL, _ source: URL, hashingInto hasher: inout SHA256Hasher) -> Bool {
        var info = stat()
        guard lstat(destination.path, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return false }
        do throws(POSIXFailure) {
            let existing = try FileDescriptor.open(destination.path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK)
            let opened = try existing.status()
            // The file opened is the one looked at, and still a regular file.
            guard opened.st_mode & S_IFMT == S_IFREG, opened.st_ino == info.st_ino, opened.st_dev == info.st_dev else { return false }
            let original = try FileDescriptor.open(source.path, O_RDONLY | O_NOFOLLOW)
            guard try original.status().st_size == opened.st_size else { return false }
            let buffers = UnsafeMutableRawBufferPointer.allocate(byteCount: 2 * Self.compareChunkSize, alignment: 16)
            defer { buffers.deallocate() }
            let mine = UnsafeMutableRawBufferPointer(rebasing: buffers[..<Self.compareChunkSize])
            let theirs = UnsafeMutableRawBufferPointer(rebasing: buffers[Self.compareChunkSize...])
            while true {
                let count = try original.read(into: mine)
                var filled = 0
                while filled < count {
                    let got = try existing.read(into: UnsafeMutableRawBufferPointer(rebasing: theirs[filled..<count]))
                    if got == 0 { return false }
                    filled += got
                }
                if count == 0 { return try existing.read(into: UnsafeMutableRawBufferPointer(rebasing: theirs[..<1])) == 0 }
                if memcmp(mine.baseAddress!, theirs.baseAddress!, count) != 0 { return false }
                hasher.update(UnsafeRawBufferPointer(rebasing: mine[..<count]))
            }
        } catch {
            return false
        }
    }

    /// Bytes compared at a time with a file already in the folder.
    private static let compareChunkSize = 256 << 10

    /// Copies the stored content at `source`, whose SHA-256 must be `digest` (its identifier),
    /// into the folder under `destination`'s name: content that bit rot or an edit changed
    /// fails the export, rather than reach a backup that could not be read back.
    private func copy(_ source: URL, to destination: URL, digest: String) throws {
        // A name of this writer's own (process and call), so that nothing else writes into it;
        // the rename puts the whole content under its name at once.
        let temporary = directory.appendingPathComponent(".\(destination.lastPathComponent).\(getpid()).\(Self.nextTemporaryNumber()).partial")
        let input: FileDescriptor
        do throws(POSIXFailure) {
            input = try FileDescriptor.open(source.path, O_RDONLY | O_NOFOLLOW)
        } catch {
            throw StratusError(.internalError, "cannot read the stored asset \(destination.lastPathComponent): \(error.reason)")
        }
        var held = digest
        do throws(POSIXFailure) {
            let output = try FileDescriptor.open(temporary.path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o600)
            // Held while written: another export removes only a temporary file nobody holds.
            _ = flock(output.raw, LOCK_EX | LOCK_NB)
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.chunkSize, alignment: 16)
            defer { buffer.deallocate() }
            var hasher = SHA256Hasher()
            while true {
                let count = try input.read(into: buffer)
                if count == 0 { break }
                let chunk = UnsafeRawBufferPointer(rebasing: buffer[..<count])
                hasher.update(chunk)
                try output.write(chunk)
            }
            held = hasher.finalize().hexadecimal
            if held == digest {
                try output.sync()
                if rename(temporary.path, destination.path) != 0 { throw POSIXFailure(errno: errno, operation: "rename") }
            }
        } catch {
            unlink(temporary.path)
            // The folder's failure, not the store's: where the records go (exit 73 in the tool).
            throw RecordWriter.OutputError(message: "cannot write the asset \(destination.lastPathComponent) into \(directory.path): \(error.reason)")
        }
        if held != digest {
            unlink(temporary.path)
            throw Self.damagedContent(digest, holding: held, name: destination.lastPathComponent)
        }
    }

    /// The SHA-256 of the stored content at `source`, read whole a chunk at a time.
    private static func digest(of source: URL, name: String) throws -> String {
        do throws(POSIXFailure) {
            let input = try FileDescriptor.open(source.path, O_RDONLY | O_NOFOLLOW)
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunkSize, alignment: 16)
            defer { buffer.deallocate() }
            var hasher = SHA256Hasher()
            while true {
                let count = try input.read(into: buffer)
                if count == 0 { return hasher.finalize().hexadecimal }
                hasher.update(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
            }
        } catch {
            throw StratusError(.internalError, "cannot read the stored asset \(name): \(error.reason)")
        }
    }

    /// The failure of an export whose stored content does not hash to the SHA-256 that names it.
    private static func damagedContent(_ digest: String, holding held: String, name: String) -> StratusError {
        StratusError(.assetFileModified, "the stored content \(digest.prefix(12))… (written as \(name)) holds bytes whose SHA-256 is \(held.prefix(12))…: its content file is damaged (a PostgreSQL store's cache file on this machine is made again once removed; a store's own content is named by `stratus check`); the export stops rather than write a backup that cannot be read back")
    }
}

extension AssetExportFolder {
    private static let temporaryCounter = Mutex<UInt64>(0)

    /// Removes the temporary files (`.NAME.PID.N.partial`) that exports killed while writing an
    /// asset left: a job killed every day (`timeout -s KILL`) would otherwise fill the disk
    /// with hidden files. One whose process lives, or that a writer holds (a process of another
    /// PID namespace, or of another host on a shared folder), stays.
    fileprivate static func removeLeftTemporaries(in directory: URL) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else { return }
        for name in names where name.hasPrefix(".") && name.hasSuffix(".partial") {
            let parts = name.dropLast(".partial".count).split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count >= 4, UInt64(parts[parts.count - 1]) != nil, let pid = pid_t(parts[parts.count - 2]),
                  pid != getpid(), kill(pid, 0) != 0, errno == ESRCH else { continue }
            let path = directory.appendingPathComponent(name).path
            let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
            guard descriptor >= 0 else { continue }
            defer { close(descriptor) }
            var info = stat()
            guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG, flock(descriptor, LOCK_EX | LOCK_NB) == 0 else { continue }
            unlink(path)
        }
    }

    /// A number no other temporary file of this process has.
    fileprivate static func nextTemporaryNumber() -> UInt64 {
        temporaryCounter.withLock { count in
            count += 1
            return count
        }
    }
}

extension FieldValue {
    /// Whether the value is an asset or a list of assets.
    var isAsset: Bool {
        switch self {
        case .asset, .assetList: true
        default: false
        }
    }
}
