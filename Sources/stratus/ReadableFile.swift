import Foundation

/// Opens a file the command reads (an input, a names file, a token file), saying why when it
/// cannot: a cron job's log then tells a missing folder from a missing right.
///
/// ```swift
/// let handle = try ReadableFile.open("names.txt", what: "names file")   // "cannot read the names file names.txt: Permission denied" (77)
/// ```
enum ReadableFile {
    /// - Throws: ``CommandFailure`` `permissionDenied` when the user may not read the file,
    ///   else `inputMissing`, with the system's reason.
    static func open(_ path: String, what: String) throws -> FileHandle {
        let descriptor = Foundation.open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw CommandFailure.system(errno == EACCES || errno == EPERM ? .permissionDenied : .inputMissing, "cannot read the \(what) \(path)")
        }
        return FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
    }
}
