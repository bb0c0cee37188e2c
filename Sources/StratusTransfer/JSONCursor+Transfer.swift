import Foundation
import Stratus

// The record readers' short names for the shared cursor's types (``Stratus/JSONCursor``).
typealias Token = JSONCursor.Token
typealias ScanFailure = JSONCursor.Failure
typealias Problem = JSONCursor.Problem

extension JSONCursor {
    /// The number as an exact `Int64`; `2.0` and `1e3` are integers, `1.5` is not.
    func integer(_ token: Token) -> IntegerConversion {
        if token.flags & Token.isInteger != 0 { return exactInteger(token) }
        return ExactDecimal(base + token.start, count: token.end - token.start).integer
    }

    /// A timestamp in milliseconds since 1970 as a date, exactly: the reverse of
    /// ``TimestampText``, so a date written and read back is the same `Date`. Nil when not finite.
    /// A string is read as an ISO 8601 date-time with a zone (`2024-03-01T12:00:00.000Z`), the
    /// form CloudKit's management API (`cktool`, CKTool JS) gives dates in; nil when it is not one.
    func timestamp(_ token: Token) -> Date? {
        if token.kind == .string {
            // A date alone (`2024-03-01`) names a day, not an instant: only a date-time is read.
            return withStringBytes(token) { ISO8601Timestamp.date($0, allowsDateAlone: false) }
        }
        if token.flags & Token.isInteger != 0, case .value(let ms) = exactInteger(token) {
            let (sinceReference, overflow) = ms.subtractingReportingOverflow(TimestampText.referenceDateMilliseconds)
            if !overflow && sinceReference.magnitude < 1 << 53 {
                // Both operands exact, so the division is correctly rounded.
                let date = Date(timeIntervalSinceReferenceDate: Double(sinceReference) / 1000)
                // Within some 35,000 years of 2001 every whole millisecond is a date of its own.
                return sinceReference.magnitude < 1 << 50 || Self.writesBack(ExactDecimal(ms), date) ? date : nil
            }
        }
        let decimal = ExactDecimal(base + token.start, count: token.end - token.start)
        guard let date = TimestampText.date(fromMilliseconds: decimal) else { return nil }
        // A whole number of milliseconds is never stored as another one, as a DOUBLE's whole
        // number is not: far enough out, a date's seconds are coarser than a millisecond, and
        // 9007199254740993 would be written back as 9007199254740992. Beyond 64 bits (1e30,
        // forty digits) the date is far coarser still: only a number it writes back as is kept.
        if case .notInteger = decimal.integer { return date }
        return Self.writesBack(decimal, date) ? date : nil
    }

    /// Whether `date` is written back as exactly the number `milliseconds`.
    static func writesBack(_ milliseconds: ExactDecimal, _ date: Date) -> Bool {
        let text = TimestampText.text(for: date)
        if let whole = text.integer { return ExactDecimal(whole) == milliseconds }
        return text.decimal.map { ExactDecimal($0) } == milliseconds
    }

    /// Why ``timestamp(_:)`` has no date for a number: out of range, or a whole number of
    /// milliseconds a date cannot hold exactly.
    func timestampRefusal(_ token: Token) -> String {
        switch integer(token) {
        case .value:
            return "is out of range: a date holds whole milliseconds exactly only within about 278,000 years of 2001, and this one would be written back as another number"
        case .outOfRange:
            return "is out of range: a whole number of milliseconds beyond 64 bits, which a date does not hold exactly (it would be written back as another number)"
        case .notInteger:
            return "is out of range"
        }
    }
}

extension JSONCursor {
    /// A value's JSON as compact text: its bytes without the whitespace between tokens, so a
    /// pretty-printed input keeps no line breaks. Strings are kept byte for byte.
    func compactText(_ token: Token) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(token.end - token.start)
        var inString = false
        var escaped = false
        var i = token.start
        while i < token.end {
            let b = base[i]
            if inString {
                bytes.append(b)
                if escaped {
                    escaped = false
                } else if b == UInt8(ascii: "\\") {
                    escaped = true
                } else if b == UInt8(ascii: "\"") {
                    inString = false
                }
            } else if b == UInt8(ascii: "\"") {
                inString = true
                bytes.append(b)
            } else if !(b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09) {
                bytes.append(b)
            }
            i += 1
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
