import Foundation

/// Rows in `COPY … FROM STDIN (FORMAT binary)` form, built in one buffer: the header (once per
/// COPY), then per row its field count and each field as a length and PostgreSQL's binary
/// form of the value. Values travel as the server keeps them: integers and doubles exactly
/// (every bit), text without escaping. The trailer is optional: the end of the data ends the
/// rows too.
///
/// ```swift
/// var copy = PostgresBinaryCopy()
/// copy.beginRow(fields: 2)
/// copy.int64(7)
/// copy.text("seven")
/// try connection.copyIn("COPY notes (id, body) FROM STDIN (FORMAT binary)") { try $0.write(copy.bytes) }
/// ```
struct PostgresBinaryCopy {
    private(set) var bytes: [UInt8] = []

    /// `PGCOPY\n\377\r\n\0`, no flags, no header extension.
    private static let header: [UInt8] = [0x50, 0x47, 0x43, 0x4F, 0x50, 0x59, 0x0A, 0xFF, 0x0D, 0x0A, 0x00, 0, 0, 0, 0, 0, 0, 0, 0]

    /// A buffer that starts with the header, or (`header` false) with the rows that follow
    /// those sent before.
    init(header: Bool = true, reservingCapacity capacity: Int = 0) {
        bytes.reserveCapacity(capacity + Self.header.count)
        if header { bytes.append(contentsOf: Self.header) }
    }

    mutating func beginRow(fields: Int) { appendBigEndian(Int16(fields)) }

    mutating func null() { appendBigEndian(Int32(-1)) }

    mutating func int64(_ value: Int64) {
        appendBigEndian(Int32(8))
        appendBigEndian(value)
    }

    mutating func double(_ value: Double) {
        appendBigEndian(Int32(8))
        appendBigEndian(value.bitPattern)
    }

    /// Text as UTF-8 (the server checks it; text with NUL is refused there).
    mutating func text(_ value: String) {
        var value = value
        value.withUTF8 { utf8 in
            appendBigEndian(Int32(utf8.count))
            bytes.append(contentsOf: utf8)
        }
    }

    /// Text given as UTF-8 bytes.
    mutating func text(utf8: some Collection<UInt8>) {
        appendBigEndian(Int32(utf8.count))
        bytes.append(contentsOf: utf8)
    }

    /// A `jsonb` value from the document's text: binary jsonb is a version byte (1), then the text.
    mutating func jsonb(utf8: some Collection<UInt8>) {
        appendBigEndian(Int32(utf8.count + 1))
        bytes.append(1)
        bytes.append(contentsOf: utf8)
    }

    private mutating func appendBigEndian<T: FixedWidthInteger>(_ value: T) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }
}
