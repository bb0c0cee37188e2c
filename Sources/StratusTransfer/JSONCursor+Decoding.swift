import Foundation
import Stratus

/// The outcome of reading a number as an `Int64`.
enum IntegerConversion {
    case value(Int64)
    case notInteger
    case outOfRange
}

extension JSONCursor {
    // MARK: - Strings

    /// The text of a string token. ``scanString()`` has checked it, so decoding cannot fail.
    func string(_ token: Token) -> String {
        let count = token.end - token.start - 2
        if token.flags & Token.hasEscape == 0 {
            return String(decoding: UnsafeBufferPointer(start: base + token.start + 1, count: count), as: UTF8.self)
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count)
        unescape(token, into: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A string token's text for a message: decoded leniently and cut to `limit` characters.
    func quoted(_ token: Token, limit: Int = 60) -> String {
        let text = token.kind == .string ? string(token) : String(decoding: UnsafeBufferPointer(start: base + token.start, count: token.end - token.start), as: UTF8.self)
        return text.count > limit ? String(text.prefix(limit)) + "…" : text
    }

    /// Calls `body` with the string's bytes, unescaped (a copy only when there are escapes).
    func withStringBytes<R>(_ token: Token, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        if token.flags & Token.hasEscape == 0 {
            return body(UnsafeBufferPointer(start: base + token.start + 1, count: token.end - token.start - 2))
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(token.end - token.start)
        unescape(token, into: &bytes)
        return bytes.withUnsafeBufferPointer(body)
    }

    /// Whether the string token's text equals `text` (escapes allowed in the input).
    func stringEquals(_ token: Token, _ text: StaticString) -> Bool {
        if token.flags & Token.hasEscape == 0 {
            return token.end - token.start - 2 == text.utf8CodeUnitCount && matches(token.start + 1, text)
        }
        return withStringBytes(token) { bytes in
            bytes.count == text.utf8CodeUnitCount && memcmp(bytes.baseAddress!, text.utf8Start, bytes.count) == 0
        }
    }

    private func unescape(_ token: Token, into out: inout [UInt8]) {
        var i = token.start + 1
        let end = token.end - 1
        while i < end {
            let b = base[i]
            if b != UInt8(ascii: "\\") {
                out.append(b)
                i += 1
                continue
            }
            let e = base[i + 1]
            switch e {
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = hexValue(i + 2)
                i += 6
                if scalar >= 0xD800 && scalar <= 0xDBFF && i + 6 <= end && base[i] == UInt8(ascii: "\\") && base[i + 1] == UInt8(ascii: "u") {
                    let low = hexValue(i + 2)
                    if low >= 0xDC00 && low <= 0xDFFF {
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        i += 6
                    }
                }
                appendUTF8(Unicode.Scalar(scalar) ?? "\u{FFFD}", to: &out)
                continue
            default: out.append(e)
            }
            i += 2
        }
    }

    private func hexValue(_ i: Int) -> UInt32 {
        var value: UInt32 = 0
        for k in 0..<4 {
            let c = base[i + k]
            let digit: UInt8 =
                c <= UInt8(ascii: "9") ? c &- UInt8(ascii: "0") : (c | 0x20) &- UInt8(ascii: "a") &+ 10
            value = value << 4 | UInt32(digit & 0xF)
        }
        return value
    }

    private func appendUTF8(_ scalar: Unicode.Scalar, to out: inout [UInt8]) {
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

    // MARK: - Numbers

    /// The number's text for a message.
    func numberText(_ token: Token) -> String {
        let count = token.end - token.start
        let text = String(decoding: UnsafeBufferPointer(start: base + token.start, count: min(count, 40)), as: UTF8.self)
        return count > 40 ? text + "…" : text
    }

    /// The number as an exact `Int64`; `2.0` and `1e3` are integers, `1.5` is not.
    func integer(_ token: Token) -> IntegerConversion {
        guard token.flags & Token.isInteger != 0 else {
            let decimal = ExactDecimal(base + token.start, count: token.end - token.start)
            return decimal.integer
        }
        var i = token.start
        let negative = base[i] == UInt8(ascii: "-")
        if negative { i += 1 }
        var magnitude: UInt64 = 0
        while i < token.end {
            let (times10, o1) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, o2) = times10.addingReportingOverflow(UInt64(base[i] &- UInt8(ascii: "0")))
            if o1 || o2 { return .outOfRange }
            magnitude = sum
            i += 1
        }
        if negative {
            guard magnitude <= 1 << 63 else { return .outOfRange }
            return .value(Int64(bitPattern: 0 &- magnitude))
        }
        guard magnitude <= UInt64(Int64.max) else { return .outOfRange }
        return .value(Int64(magnitude))
    }

    /// The number as the nearest `Double`, or nil when it is too large to be finite.
    func double(_ token: Token) -> Double? {
        if let fast = fastDouble(token) { return fast }
        let text = String(decoding: UnsafeBufferPointer(start: base + token.start, count: token.end - token.start), as: UTF8.self)
        guard let value = Double(text), value.isFinite else { return nil }
        return value
    }

    /// Clinger's fast path: a significand below 2^53 scaled by an exact power of ten is
    /// correctly rounded by one multiplication or division.
    private func fastDouble(_ token: Token) -> Double? {
        var i = token.start
        let negative = base[i] == UInt8(ascii: "-")
        if negative { i += 1 }
        var significand: UInt64 = 0
        var digits = 0
        var exponent = 0
        var afterPoint = false
        while i < token.end {
            let b = base[i]
            if b == UInt8(ascii: ".") {
                afterPoint = true
            } else if b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") {
                if significand != 0 || b != UInt8(ascii: "0") {
                    digits += 1
                    if digits > 19 { return nil }
                    significand = significand * 10 + UInt64(b - UInt8(ascii: "0"))
                }
                if afterPoint { exponent -= 1 }
            } else {
                break
            }
            i += 1
        }
        if i < token.end {
            // An exponent: e, E, then an optional sign and digits.
            i += 1
            var negativeExponent = false
            if base[i] == UInt8(ascii: "-") || base[i] == UInt8(ascii: "+") {
                negativeExponent = base[i] == UInt8(ascii: "-")
                i += 1
            }
            var e = 0
            while i < token.end {
                e = e * 10 + Int(base[i] - UInt8(ascii: "0"))
                if e > 400 { return nil }
                i += 1
            }
            exponent += negativeExponent ? -e : e
        }
        guard significand <= 1 << 53 else { return nil }
        var value = Double(significand)
        if exponent < 0 {
            guard exponent >= -22 else { return significand == 0 ? (negative ? -0.0 : 0.0) : nil }
            value /= JSONCursor.powersOfTen[-exponent]
        } else if exponent > 0 {
            guard exponent <= 22 else { return significand == 0 ? (negative ? -0.0 : 0.0) : nil }
            value *= JSONCursor.powersOfTen[exponent]
        }
        return negative ? -value : value
    }

    static let powersOfTen: [Double] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
        1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
    ]

    /// A timestamp in milliseconds since 1970 as a date, exactly: the reverse of
    /// ``TimestampText``, so a date written and read back is the same `Date`. Nil when not finite.
    func timestamp(_ token: Token) -> Date? {
        if token.flags & Token.isInteger != 0, case .value(let ms) = integer(token) {
            let (sinceReference, overflow) = ms.subtractingReportingOverflow(TimestampText.referenceDateMilliseconds)
            if !overflow && sinceReference.magnitude < 1 << 53 {
                // Both operands exact, so the division is correctly rounded.
                return Date(timeIntervalSinceReferenceDate: Double(sinceReference) / 1000)
            }
        }
        let decimal = ExactDecimal(base + token.start, count: token.end - token.start)
        return TimestampText.date(fromMilliseconds: decimal)
    }

    // MARK: - Base64

    /// Decodes standard base64 (padding optional), or nil for any other byte.
    func base64(_ token: Token) -> Data? {
        withStringBytes(token) { Base64.decode($0) }
    }
}
