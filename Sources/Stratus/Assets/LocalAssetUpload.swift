import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// An asset upload into a file of a local folder private to the store's user: what engines
/// keep content in (SQLite) or stage it in before it goes into the database (PostgreSQL).
/// The file is named `<holder>-<number>.partial`, so that a collection can tell whose it is.
///
/// ```swift
/// let upload = try LocalAssetUpload.create(in: folder, holder: hold)
/// try upload.write(chunk)
/// ```
package final class LocalAssetUpload: AssetUpload {
    package let url: URL
    package let file: FileDescriptor
    private var committed = false
    private var abandoned = false

    private static let counter = Atomic<Int>(0)

    package init(url: URL, file: FileDescriptor) {
        self.url = url
        self.file = file
    }

    /// A new upload file in `folder` (made private, 0700, when missing), readable by its user only.
    ///
    /// - Throws: ``StratusError`` when the folder or file cannot be made.
    package static func create(in folder: URL, holder: String) throws -> LocalAssetUpload {
        let number = counter.wrappingAdd(1, ordering: .relaxed).newValue
        let url = folder.appendingPathComponent("\(holder)-\(number).partial")
        do throws(POSIXFailure) {
            try FileDescriptor.makePrivateDirectory(folder)
            let file = try FileDescriptor.open(url.path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o600)
            // The content this file becomes is the store's user's to read.
            FileDescriptor.inheritFolderOwner(url.path)
            return LocalAssetUpload(url: url, file: file)
        } catch {
            throw error.storeError("create the asset upload \(url.path)")
        }
    }

    package func write(_ bytes: UnsafeRawBufferPointer) throws {
        do throws(POSIXFailure) { try file.write(bytes) } catch { throw error.storeError("write the asset upload \(url.path)") }
    }

    package func finishWriting() {}

    /// Says that the file was moved to its content name: abandoning it no longer removes it.
    package func markCommitted() { committed = true }

    package func abandon() {
        guard !abandoned else { return }
        abandoned = true
        file.close()
        if !committed { unlink(url.path) }
    }

    deinit { abandon() }

    /// Unfinished uploads in `folder` whose holder is gone (by the name's part before its
    /// last `-`): removes them and answers how many.
    package static func removeAbandoned(in folder: URL, isHolderAlive: (String) -> Bool) -> Int {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder.path) else { return 0 }
        var removed = 0
        for name in names where name.hasSuffix(".partial") {
            guard let dash = name.lastIndex(of: "-") else { continue }
            if !isHolderAlive(String(name[..<dash])) && unlink(folder.appendingPathComponent(name).path) == 0 { removed += 1 }
        }
        return removed
    }
}

extension POSIXFailure {
    /// The failure as a store error: `quotaExceeded` for a full disk or a file size limit
    /// (`ulimit -f`), `internalError` otherwise.
    package func storeError(_ what: String) -> StratusError {
        StratusError(errno == ENOSPC || errno == EDQUOT || errno == EFBIG ? .quotaExceeded : .internalError, "cannot \(what): \(reason)")
    }
}
