import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// This process's name as a holder of asset content in one store, and the lock that shows it
/// is alive: a file in the store's local folder (`holders/<name>.lock`) that the process keeps
/// locked (`flock`) for as long as it runs. The kernel drops the lock when the process dies,
/// however it dies, so a collection can tell the holds and uploads of a killed writer from
/// those of a running one at once, without waiting for a grace period.
///
/// Holders on other machines (a shared PostgreSQL store) cannot be checked this way; they
/// count as alive (the engine expires their holds after a day).
final class AssetHolder: @unchecked Sendable {
    // @unchecked: `lock` is opened in `init`, never used again but to keep the lock, and closed
    // only when the holder goes away; the rest is immutable.

    /// The holder's name: `<host>.<process id>.<random>`.
    let name: String
    private let lock: FileDescriptor

    private static let holders = Mutex<[String: AssetHolder]>([:])

    /// This machine's name as holder names carry it: letters, digits and `-` only.
    static let hostName: String = {
        var buffer = [CChar](repeating: 0, count: 256)
        let raw = gethostname(&buffer, buffer.count) == 0
            ? String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : "host"
        let kept = raw.unicodeScalars.map { scalar -> Character in
            scalar.isASCII && (CharacterSet.alphanumerics.contains(scalar) || scalar == "-") ? Character(scalar) : "-"
        }
        return kept.isEmpty ? "host" : String(kept)
    }()

    /// The holder of this process for the store whose local folder is `directory`.
    ///
    /// - Throws: ``StratusError`` `internalError` when the lock file cannot be made.
    static func shared(in directory: URL) throws -> AssetHolder {
        let key = directory.standardizedFileURL.path
        let (holder, created) = try holders.withLock { holders -> (AssetHolder, Bool) in
            if let holder = holders[key] { return (holder, false) }
            let holder = try AssetHolder(directory: directory)
            holders[key] = holder
            return (holder, true)
        }
        // Outside the lock: telling whether a holder is alive reads `holders`.
        if created {
            removeDeadLocks(in: directory, except: holder.name)
            AssetHandouts.removeEnded(in: directory)
        }
        return holder
    }

    private init(directory: URL) throws {
        let nonce = String(UInt64.random(in: 0 ... .max), radix: 16)
        name = "\(Self.hostName).\(getpid()).\(nonce)"
        let folder = Self.holdersFolder(directory)
        do throws(POSIXFailure) {
            try FileDescriptor.makePrivateDirectory(folder)
            // Locked under a temporary name, then renamed: a collection never sees the final
            // name unlocked while the holder lives.
            let temporary = folder.appendingPathComponent(".\(name).new")
            lock = try FileDescriptor.open(temporary.path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o600)
            FileDescriptor.inheritFolderOwner(temporary.path)
            guard flock(lock.raw, LOCK_EX | LOCK_NB) == 0 else { throw POSIXFailure(errno: errno, operation: "flock") }
            guard rename(temporary.path, folder.appendingPathComponent("\(name).lock").path) == 0 else { throw POSIXFailure(errno: errno, operation: "rename") }
        } catch {
            throw StratusError(.internalError, "cannot create the asset holder lock in \(folder.path): \(error.reason)")
        }
    }

    /// Removes the lock files of this machine's holders that are gone (processes that ended).
    static func removeDeadLocks(in directory: URL, except own: String? = nil) {
        let folder = holdersFolder(directory)
        for name in (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? [] where name.hasSuffix(".lock") {
            let holder = String(name.dropLast(".lock".count))
            if holder != own { _ = isAlive(holder, in: directory) }
        }
    }

    private static func holdersFolder(_ directory: URL) -> URL { directory.appendingPathComponent("holders", isDirectory: true) }

    /// Whether `holder` (a name from a hold or an upload in the store with local folder
    /// `directory`) may still use what it holds: a holder of this machine whose lock is free
    /// is gone (its lock file is removed then); one of another machine counts as alive.
    static func isAlive(_ holder: String, in directory: URL) -> Bool {
        let key = directory.standardizedFileURL.path
        if holders.withLock({ $0[key]?.name == holder }) { return true }
        guard let dot = holder.firstIndex(of: "."), holder[..<dot] == hostName else { return true }
        guard !holder.contains("/") else { return false }
        let path = holdersFolder(directory).appendingPathComponent("\(holder).lock").path
        let fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return errno != ENOENT }
        defer { close(fd) }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { return true }
        unlink(path)
        return false
    }
}
