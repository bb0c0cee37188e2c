import Foundation

/// Writes a command's answer to stdout, and fails when it cannot be written: a full disk or a
/// closed pipe is exit 73 with a message, never a crash (`FileHandle.write(_:)` traps on
/// errors) nor exit 0 with the answer lost (`print` buffers, and the buffer's failure to flush
/// at exit is silent).
///
/// ```swift
/// try StandardOutput.write("42\n")
/// ```
enum StandardOutput {
    /// - Throws: ``CommandFailure`` `cannotCreateOutput` when stdout takes less than all of it.
    static func write(_ text: String) throws {
        var text = text
        try text.withUTF8 { try write(UnsafeRawBufferPointer($0)) }
    }

    /// - Throws: ``CommandFailure`` `cannotCreateOutput` when stdout takes less than all of it.
    static func write(_ data: Data) throws {
        try data.withUnsafeBytes { try write($0) }
    }

    /// A line: `text` and a newline, as `print` writes it.
    ///
    /// - Throws: ``CommandFailure`` `cannotCreateOutput` when stdout takes less than all of it.
    static func line(_ text: String) throws {
        try write(text + "\n")
    }

    private static func write(_ bytes: UnsafeRawBufferPointer) throws {
        guard var next = bytes.baseAddress else { return }
        var remaining = bytes.count
        while remaining > 0 {
            let written = Foundation.write(STDOUT_FILENO, next, remaining)
            if written < 0 {
                if errno == EINTR { continue }
                throw CommandFailure.system(.cannotCreateOutput, "cannot write to standard output")
            }
            next += written
            remaining -= written
        }
    }
}

/// Writes messages to stderr, best effort: a message that cannot be written is dropped (a full
/// disk under the log must not stop a job or hide its exit code). Control characters other
/// than newline, tab and carriage return are shown escaped (`\u{1B}`): messages quote names and
/// values from untrusted input, and raw escape sequences would drive the reader's terminal.
///
/// ```swift
/// StandardError.write("stratus: imported 3\n")
/// ```
enum StandardError {
    static func write(_ text: String) {
        var shown = text
        if text.unicodeScalars.contains(where: isHidden) {
            shown = ""
            for scalar in text.unicodeScalars {
                if isHidden(scalar) {
                    shown += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
                } else {
                    shown.unicodeScalars.append(scalar)
                }
            }
        }
        shown.withUTF8 { bytes in
            guard var next = UnsafeRawPointer(bytes.baseAddress) else { return }
            var remaining = bytes.count
            while remaining > 0 {
                let written = Foundation.write(STDERR_FILENO, next, remaining)
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else { return }
                next += written
                remaining -= written
            }
        }
    }

    /// C0 and C1 control characters and DEL, but for newline, tab and carriage return.
    private static func isHidden(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x0A, 0x09, 0x0D: false
        case 0x00...0x1F, 0x7F...0x9F: true
        default: false
        }
    }
}
