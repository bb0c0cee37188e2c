import Foundation

/// Opens a file the command reads (an input, a names file, a schema file), saying why when it
/// cannot: a cron job's log then tells a missing folder from a missing right; and reads what a
/// descriptor holds up to a limit.
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

    /// What `descriptor` (a file, a pipe, a device) holds, read with the system's own calls
    /// until its end or until more than `limit` bytes came: `limit + 1` bytes say it holds
    /// more, so that a device such as `/dev/zero` or a FIFO that never ends is not read until
    /// memory runs out.
    ///
    /// - Throws: ``CommandFailure`` `inputMissing` naming `what` when a read fails.
    static func bytes(of descriptor: Int32, atMost limit: Int, what: String) throws -> Data {
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while data.count <= limit {
            let count = buffer.withUnsafeMutableBytes { Foundation.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw CommandFailure.system(.inputMissing, "cannot read \(what)")
            }
            if count == 0 { break }
            data.append(contentsOf: buffer[..<count])
        }
        return data
    }
}
