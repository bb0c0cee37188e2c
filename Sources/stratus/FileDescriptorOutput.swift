import Foundation

/// Writes bytes to a file descriptor, all of them, retrying short writes and interruptions.
enum FileDescriptorOutput {
    /// Whether the regular file at `path` (the file `status` describes, when given) is not
    /// empty and ends within a line, read through a descriptor of its own (a writer's may be
    /// write-only): what is appended must start on a line of its own.
    static func endsWithinLine(_ path: String, sameFileAs status: stat? = nil) -> Bool {
        let reader = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard reader >= 0 else { return false }
        defer { close(reader) }
        var opened = stat()
        var last: UInt8 = 0
        guard fstat(reader, &opened) == 0, opened.st_mode & S_IFMT == S_IFREG, opened.st_size > 0,
              status.map({ opened.st_ino == $0.st_ino && opened.st_dev == $0.st_dev }) ?? true,
              pread(reader, &last, 1, opened.st_size - 1) == 1 else { return false }
        return last != UInt8(ascii: "\n")
    }

    static func writeAll(_ data: Data, to descriptor: Int32, name: String) throws {
        try data.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = Glibc.write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    throw CommandFailure.system(.cannotCreateOutput, "cannot write to \(name)")
                }
                offset += written
            }
        }
    }

    /// "device:inode" of an open file: the file, not its name, so a rotated output is noticed.
    static func identity(of descriptor: Int32) throws -> (identity: String, size: Int64) {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw CommandFailure.system(.cannotCreateOutput, "cannot inspect the output file") }
        return ("\(info.st_dev):\(info.st_ino)", Int64(info.st_size))
    }
}
