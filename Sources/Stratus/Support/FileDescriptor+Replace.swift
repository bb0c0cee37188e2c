import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension FileDescriptor {
    /// Replaces the file at `path` with `data` so that a crash at any moment leaves the old
    /// contents or the new, never part of either: a temporary file beside it (`PATH.tmp-PID`,
    /// private to this user), synced, renamed over it, then the folder synced so that the
    /// rename itself survives. On failure the temporary file is removed and `path` is as it was.
    ///
    /// The file's name is replaced, not written through: `path` should be the name a link
    /// resolves to, if a link is to stay a link.
    ///
    /// ```swift
    /// try FileDescriptor.replaceFile(at: "/var/lib/jobs/import.checkpoint", with: Data(json.utf8))
    /// ```
    ///
    /// - Throws: ``POSIXFailure`` naming the step and the file (`create PATH.tmp-PID`,
    ///   `write to …`, `sync …`, `move … into place at PATH`) with `errno`.
    package static func replaceFile(at path: String, with data: Data) throws(POSIXFailure) {
        let temporary = temporaryName(for: path)
        // Job state names a store's records and positions: private, like the store.
        let file: FileDescriptor
        do throws(POSIXFailure) {
            file = try open(temporary, O_WRONLY | O_CREAT | O_TRUNC, mode: 0o600)
        } catch {
            throw POSIXFailure(errno: error.errno, operation: "create \(temporary)")
        }
        do throws(POSIXFailure) {
            do throws(POSIXFailure) {
                try data.withUnsafeBytes { bytes in Result { () throws(POSIXFailure) in try file.write(bytes) } }.get()
            } catch {
                throw POSIXFailure(errno: error.errno, operation: "write to \(temporary)")
            }
            do throws(POSIXFailure) { try file.sync() } catch { throw POSIXFailure(errno: error.errno, operation: "sync \(temporary)") }
            file.close()
            guard rename(temporary, path) == 0 else { throw POSIXFailure(errno: errno, operation: "move \(temporary) into place at \(path)") }
        } catch {
            file.close()
            unlink(temporary)
            throw error
        }
        // The new contents are in place; a folder that cannot be synced (a file system without
        // directory fsync) leaves the rename to the next sync, as nothing better can be done.
        try? syncDirectory(URL(fileURLWithPath: path).deletingLastPathComponent())
    }

    /// The temporary file ``replaceFile(at:with:)`` writes beside `path` in this process.
    package static func temporaryName(for path: String) -> String { path + ".tmp-\(getpid())" }

    /// Whether `name` (a file name, no folder) is one of ``replaceFile(at:with:)``'s temporary
    /// files for the file named `fileName`, which a process killed while writing leaves behind.
    package static func isTemporaryName(_ name: String, for fileName: String) -> Bool {
        let prefix = fileName + ".tmp-"
        return name.hasPrefix(prefix) && name.count > prefix.count && name.dropFirst(prefix.count).allSatisfy(\.isNumber)
    }
}
