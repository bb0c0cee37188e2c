import Foundation
@_spi(StratusEngine) import Stratus

extension SQLiteEngine {
    /// Fails when this process may not write the store's file as a writing command opens it:
    /// the file, a log file that exists, or the folder where a missing log file is made. An
    /// engine opened read-only on a file its user may write passes: the real run opens the
    /// file again to write.
    ///
    /// - Throws: ``StratusError`` `permissionFailure` saying what access is missing.
    @_spi(StratusEngine) public func checkWriteAccess(in database: DatabaseContext) throws {
        guard FileManager.default.fileExists(atPath: path), let missing = Self.missingAccessToWrite(path) else { return }
        throw StratusError(.permissionFailure, "the store at \(path) cannot be written (\(missing)): writing needs write access to the file and its folder")
    }

    /// What keeps this process from writing the store at `path`, or nil. A store that may be
    /// read but not written opens, and fails only at its first write.
    static func missingAccessToWrite(_ path: String) -> String? {
        let folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
        if access(path, W_OK) != 0 { return "you may not write the file" }
        for file in [path + "-wal", path + "-shm"] {
            if FileManager.default.fileExists(atPath: file) {
                if access(file, W_OK) != 0 {
                    // Made by a process that could only read the store (another user, or the
                    // owner while the store was read-only), with the store's mode then.
                    var info = stat()
                    let owner = lstat(file, &info) == 0 ? " (owner \(userName(info.st_uid)), mode \(String(info.st_mode & 0o777, radix: 8)))" : ""
                    return "you may not write \(file)\(owner), which a process that could only read the store made; once no process has the store open, remove \(path)-shm, and \(path)-wal when it is empty (0 bytes), or give them to the store's owner"
                }
            } else if access(folder, W_OK) != 0 {
                return "you may not write its folder \(folder), where \(file) is made"
            }
        }
        return nil
    }

    /// The login of user ID `uid`, else the number.
    private static func userName(_ uid: uid_t) -> String {
        guard let entry = getpwuid(uid), let name = entry.pointee.pw_name else { return String(uid) }
        return String(cString: name)
    }

    /// Gives this process's own log files of the store at `path` their owner's write permission
    /// back. A reader that may not write the store still makes them, with the store file's
    /// mode (0444 for a store made read-only during a backup): left so, they keep the store's
    /// owner from writing it once the store is writable again. Open descriptors do not mind.
    static func leaveLogFilesWritableByTheirOwner(_ path: String) {
        for file in [path + "-wal", path + "-shm"] {
            var info = stat()
            guard lstat(file, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_uid == geteuid(), info.st_mode & S_IWUSR == 0 else { continue }
            _ = chmod(file, (info.st_mode & 0o777) | S_IWUSR)
        }
    }
}
