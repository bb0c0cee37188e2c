import Foundation

/// JSON and CSV text appended as UTF-8 bytes: no intermediate `String`s on the hot path.
struct ByteOutput {
    var bytes: [UInt8] = []
    /// The first value that JSON cannot hold faithfully (a non-finite number, an asset without
    /// a file); it is written as `null` or `""` and reported here so strict callers can refuse.
    var problem: String?

    var count: Int { bytes.count }

    @inline(__always)
    mutating func append(_ byte: UInt8) { bytes.append(byte) }

    @inline(__always)
    mutating func append(_ text: StaticString) {
        bytes.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    mutating func appendRaw(_ text: String) {
        var text = text
        text.withUTF8 { bytes.append(contentsOf: $0) }
    }

    mutating func appendRaw(_ other: ByteOutput) {
        bytes.append(contentsOf: other.bytes)
    }

    /// Appends a JSON string literal, escaping quotes, backslashes and control characters.
    mutating func appendString(_ text: String) {
        bytes.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { utf8 in
            var run = 0
            for i in 0..<utf8.count {
                let b = utf8[i]
                guard b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") || b < 0x20 else { continue }
                if run < i { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[run..<i])) }
                run = i + 1
                switch b {
                case UInt8(ascii: "\""): append("\\\"")
                case UInt8(ascii: "\\"): append("\\\\")
                case 0x0A: append("\\n")
                case 0x0D: append("\\r")
                case 0x09: append("\\t")
                default:
                    append("\\u00")
                    bytes.append(Self.hexDigits[Int(b >> 4)])
                    bytes.append(Self.hexDigits[Int(b & 0xF)])
                }
            }
            if run < utf8.count { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[run...])) }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    mutating func appendInt(_ value: Int64) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        appendUnsigned(value.magnitude)
    }

    /// Appends the decimal digits of `value`, with leading zeros up to `width` digits.
    mutating func appendUnsigned(_ value: UInt64, width: Int = 1) {
        var digits = 1
        var rest = value
        while rest >= 10 {
            rest /= 10
            digits += 1
        }
        let count = Swift.max(digits, width)
        let start = bytes.count
        bytes.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: count))
        bytes.withUnsafeMutableBufferPointer { buffer in
            var magnitude = value
            var i = start + count - 1
            repeat {
                buffer[i] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
                i -= 1
            } while magnitude > 0
        }
    }

    /// Appends the shortest text that reads back as the same `Double` (`2.0`, `1e-05`).
    mutating func appendDouble(_ value: Double, field: String) {
        guard value.isFinite else {
            if problem == nil { problem = "field '\(field)' holds a non-finite number, which JSON cannot hold" }
            append("null")
            return
        }
        appendRaw(value.description)
    }

    /// Appends milliseconds since 1970, exactly (see ``TimestampText``).
    mutating func appendTimestamp(_ date: Date, field: @autoclosure () -> String) {
        let seconds = date.timeIntervalSinceReferenceDate
        guard seconds.isFinite else {
            if problem == nil { problem = "field '\(field())' holds a non-finite date" }
            append("null")
            return
        }
        if let milliseconds = TimestampText.wholeMilliseconds(seconds) {
            appendInt(milliseconds)
        } else if seconds.bitPattern == lastFraction.seconds {
            bytes.append(contentsOf: lastFraction.text)
        } else {
            let start = bytes.count
            TimestampText.append(seconds, to: &self)
            lastFraction.seconds = seconds.bitPattern
            lastFraction.text.removeAll(keepingCapacity: true)
            lastFraction.text.append(contentsOf: bytes[start...])
        }
    }

    /// The last timestamp written with a fraction, and its text. A record's creation and
    /// modification dates are mostly one `Date`, and the records of one save share it, so
    /// this one entry saves most of the decimal work on such dates.
    private var lastFraction: (seconds: UInt64, text: [UInt8]) = (Double.nan.bitPattern, [])

    mutating func appendBase64(_ data: Data) {
        bytes.append(UInt8(ascii: "\""))
        Base64.encode(data, to: &bytes)
        bytes.append(UInt8(ascii: "\""))
    }

    /// Appends `cell` as a CSV cell, quoted (with quotes doubled) when it holds a comma, a
    /// quote or a line break, or is empty and `quoteEmpty` asks for `""`.
    mutating func appendCSVCell(_ cell: UnsafeBufferPointer<UInt8>, quoteEmpty: Bool = false) {
        var needsQuotes = cell.isEmpty && quoteEmpty
        for b in cell where b == UInt8(ascii: ",") || b == UInt8(ascii: "\"") || b == 0x0A || b == 0x0D {
            needsQuotes = true
            break
        }
        guard needsQuotes else {
            bytes.append(contentsOf: cell)
            return
        }
        bytes.append(UInt8(ascii: "\""))
        for b in cell {
            bytes.append(b)
            if b == UInt8(ascii: "\"") { bytes.append(b) }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    mutating func appendCSVCell(_ text: String, quoteEmpty: Bool = false) {
        var text = text
        text.withUTF8 { appendCSVCell($0, quoteEmpty: quoteEmpty) }
    }
}
