/// JSON string text both ways: which bytes a string literal escapes, and what a `\u` escape
/// reads back as. The one escaper (``ByteOutput/appendString(_:)``), the one reader
/// (``JSONCursor``) and the predicate lexer's `\u` escapes share these rules.
///
/// ```swift
/// var out = ""
/// JSONText.appendString("say \"hi\"", to: &out)   // "say \"hi\""
/// ```
@usableFromInline package enum JSONText {
    /// Appends `s` as a JSON string literal, escaped as ``ByteOutput/appendString(_:)`` escapes.
    @usableFromInline package static func appendString(_ s: String, to out: inout String) {
        var bytes = ByteOutput(capacity: s.utf8.count + 2)
        bytes.appendString(s)
        out += String(decoding: bytes.bytes, as: UTF8.self)
    }

    /// The high bit of each byte of `word` (little-endian) that a string literal must escape:
    /// a quote, a backslash or a control character. The lowest set bit marks the first such
    /// byte exactly; borrows may flag bytes above it.
    @inlinable @inline(__always)
    package static func escapeMask(_ word: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let quote = word ^ (ones &* 0x22)
        let backslash = word ^ (ones &* 0x5C)
        // A byte is zero, or below 0x20, where subtracting borrows into its high bit.
        let hasQuote = (quote &- ones) & ~quote
        let hasBackslash = (backslash &- ones) & ~backslash
        let hasControl = (word &- ones &* 0x20) & ~word
        return (hasQuote | hasBackslash | hasControl) & 0x8080_8080_8080_8080
    }

    /// The value of the four hex digits at `p` (either case), or nil when one is not a hex digit.
    @inlinable
    package static func hexValue(_ p: UnsafePointer<UInt8>) -> UInt32? {
        var value: UInt32 = 0
        for k in 0..<4 {
            let c = p[k]
            let digit: UInt8
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = c &- UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = c &- UInt8(ascii: "a") &+ 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = c &- UInt8(ascii: "A") &+ 10
            default: return nil
            }
            value = value << 4 | UInt32(digit)
        }
        return value
    }

    /// Whether `unit` is the first half of a UTF-16 surrogate pair.
    @usableFromInline package static func isHighSurrogate(_ unit: UInt32) -> Bool { unit >= 0xD800 && unit <= 0xDBFF }

    /// Whether `unit` is the second half of a UTF-16 surrogate pair.
    @usableFromInline package static func isLowSurrogate(_ unit: UInt32) -> Bool { unit >= 0xDC00 && unit <= 0xDFFF }

    /// The scalar value a surrogate pair stands for.
    @usableFromInline package static func scalarValue(high: UInt32, low: UInt32) -> UInt32 {
        0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)
    }

    /// Appends the UTF-8 bytes of `scalar`.
    @usableFromInline package static func appendUTF8(_ scalar: Unicode.Scalar, to out: inout [UInt8]) {
        let v = scalar.value
        switch v {
        case 0..<0x80: out.append(UInt8(v))
        case 0x80..<0x800: out.append(0xC0 | UInt8(v >> 6)); out.append(0x80 | UInt8(v & 0x3F))
        case 0x800..<0x10000:
            out.append(0xE0 | UInt8(v >> 12)); out.append(0x80 | UInt8((v >> 6) & 0x3F)); out.append(0x80 | UInt8(v & 0x3F))
        default:
            out.append(0xF0 | UInt8(v >> 18)); out.append(0x80 | UInt8((v >> 12) & 0x3F))
            out.append(0x80 | UInt8((v >> 6) & 0x3F)); out.append(0x80 | UInt8(v & 0x3F))
        }
    }
}
