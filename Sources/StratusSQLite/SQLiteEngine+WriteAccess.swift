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
                if access(file, W_OK) != 0 { return "you may not write \(file)" }
            } else if access(folder, W_OK) != 0 {
                return "you may not write its folder \(folder), where \(file) is made"
            }
        }
        return nil
    }
}
