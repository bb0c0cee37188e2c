import Foundation

extension JSONCursor {
    // MARK: - Strings

    /// The text of a string token. ``scanString()`` has checked it, so decoding cannot fail
    /// (a token with a noted problem decodes leniently).
    @inlinable
    package func string(_ token: Token) -> String {
        if token.flags & Token.hasEscape == 0 {
            return String(decoding: UnsafeBufferPointer(start: base + token.start + 1, count: token.end - token.start - 2), as: UTF8.self)
        }
        return String(decoding: unescaped(token), as: UTF8.self)
    }

    /// A string token's text for a message: decoded leniently and cut to `limit` characters.
    @usableFromInline package func quoted(_ token: Token, limit: Int = 60) -> String {
        let text = token.kind == .string ? string(token) : String(decoding: UnsafeBufferPointer(start: base + token.start, count: token.end - token.start), as: UTF8.self)
        return text.count > limit ? String(text.prefix(limit)) + "…" : text
    }

    /// Calls `body` with the string's bytes, unescaped (a copy only when there are escapes).
    @inlinable
    package func withStringBytes<R>(_ token: Token, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        if token.flags & Token.hasEscape == 0 {
            return body(UnsafeBufferPointer(start: base + token.start + 1, count: token.end - token.start - 2))
        }
        return unescaped(token).withUnsafeBufferPointer(body)
    }

    /// Whether the string token's text equals `text` (escapes allowed in the input). A key
    /// without escapes is compared as bytes, inline; no `String` is made.
    @inlinable @inline(__always)
    package func stringEquals(_ token: Token, _ text: StaticString) -> Bool {
        if token.flags & Token.hasEscape == 0 {
            return token.end - token.start - 2 == text.utf8CodeUnitCount && matches(token.start + 1, text)
        }
        return escapedStringEquals(token, text)
    }

    @usableFromInline
    func escapedStringEquals(_ token: Token, _ text: StaticString) -> Bool {
        withStringBytes(token) { bytes in
            bytes.count == text.utf8CodeUnitCount && memcmp(bytes.baseAddress!, text.utf8Start, bytes.count) == 0
        }
    }

    /// The bytes of a string token with its escapes undone. A lone or broken surrogate reads
    /// as U+FFFD (``scanString()`` notes it as a problem).
    @usableFromInline
    func unescaped(_ token: Token) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(token.end - token.start)
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
                var scalar = i + 6 <= end ? JSONText.hexValue(base + i + 2) ?? 0xFFFD : 0xFFFD
                i += 6
                if JSONText.isHighSurrogate(scalar) && i + 6 <= end && base[i] == UInt8(ascii: "\\") && base[i + 1] == UInt8(ascii: "u"),
                   let low = JSONText.hexValue(base + i + 2), JSONText.isLowSurrogate(low) {
                    scalar = JSONText.scalarValue(high: scalar, low: low)
                    i += 6
                }
                JSONText.appendUTF8(Unicode.Scalar(scalar) ?? "\u{FFFD}", to: &out)
                continue
            default: out.append(e)
            }
            i += 2
        }
        return out
    }

    // MARK: - Numbers

    /// The number's text for a message.
    @usableFromInline package func numberText(_ token: Token) -> String {
        let count = token.end - token.start
        let text = String(decoding: UnsafeBufferPointer(start: base + token.start, count: min(count, 40)), as: UTF8.self)
        return count > 40 ? text + "…" : text
    }

    /// The number as an exact `Int64` when its text is an integer (no fraction, no exponent).
    @inlinable
    package func exactInteger(_ token: Token) -> IntegerConversion {
        guard token.flags & Token.isInteger != 0 else { return .notInteger }
        return DecimalText.int64(base + token.start, count: token.end - token.start)
    }

    /// The number as the nearest `Double`, or nil when it is too large to be finite.
    @inlinable
    package func double(_ token: Token) -> Double? {
        guard let value = DecimalText.double(base + token.start, count: token.end - token.start), value.isFinite else { return nil }
        return value
    }

    // MARK: - Base64

    /// Decodes standard base64 (padding optional), or nil for any other byte.
    @usableFromInline package func base64(_ token: Token) -> Data? {
        withStringBytes(token) { Base64.decode($0) }
    }
}
