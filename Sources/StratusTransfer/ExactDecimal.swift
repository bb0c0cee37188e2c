import Foundation
import Stratus

/// A decimal number held exactly, for the conversions a `Double` would round: integrality of
/// `2.0`, and timestamps (milliseconds since 1970 to seconds since 2001 and back). Its text
/// is read by ``Stratus/DecimalText``, the one parser of number text.
///
/// value = (negative ? -1 : 1) × digits × 10^exponent, digits most significant first without
/// leading or trailing zeros (none at all for zero).
struct ExactDecimal: Equatable {
    var negative: Bool
    var digits: [UInt8]
    var exponent: Int

    /// Parses number text in JSON's grammar (a caller checked it), as Swift's `Double.description` also writes it.
    init(_ bytes: UnsafePointer<UInt8>, count: Int) {
        var collected: [UInt8] = []
        // Never stopped: every digit is taken.
        let literal = DecimalText.scan(bytes, count: count) { digit in
            collected.append(digit)
            return true
        }!
        negative = literal.negative
        digits = collected
        exponent = literal.exponent
        normalize()
    }

    init(_ text: String) {
        var text = text
        self = text.withUTF8 { ExactDecimal($0.baseAddress!, count: $0.count) }
    }

    init(_ value: Int64) {
        negative = value < 0
        digits = Array(String(value.magnitude).utf8).map { $0 - UInt8(ascii: "0") }
        exponent = 0
        normalize()
    }

    private init(negative: Bool, digits: [UInt8], exponent: Int) {
        self.negative = negative
        self.digits = digits
        self.exponent = exponent
        normalize()
    }

    private mutating func normalize() {
        if let first = digits.firstIndex(where: { $0 != 0 }) {
            if first > 0 { digits.removeFirst(first) }
            let last = digits.lastIndex(where: { $0 != 0 })!
            exponent += digits.count - 1 - last
            digits.removeLast(digits.count - 1 - last)
        } else {
            digits = []
            exponent = 0
            negative = false
        }
    }

    var isZero: Bool { digits.isEmpty }

    /// The power of ten just above the value's magnitude: 3 for 123, -1 for 0.05.
    var magnitudeExponent: Int { digits.count + exponent }

    /// The value as an `Int64`, if it is a whole number in range.
    var integer: IntegerConversion {
        if isZero { return .value(0) }
        if exponent < 0 { return .notInteger }
        if magnitudeExponent > 19 { return .outOfRange }
        var magnitude: UInt64 = 0
        for d in digits + Array(repeating: 0, count: exponent) {
            let (times10, o1) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, o2) = times10.addingReportingOverflow(UInt64(d))
            if o1 || o2 { return .outOfRange }
            magnitude = sum
        }
        if negative {
            return magnitude <= 1 << 63 ? .value(Int64(bitPattern: 0 &- magnitude)) : .outOfRange
        }
        return magnitude <= UInt64(Int64.max) ? .value(Int64(magnitude)) : .outOfRange
    }

    /// The value times 10^n.
    func shifted(by n: Int) -> ExactDecimal {
        var copy = self
        if !copy.isZero { copy.exponent += n }
        return copy
    }

    /// The exact sum.
    func adding(_ other: ExactDecimal) -> ExactDecimal {
        if other.isZero { return self }
        if isZero { return other }
        let e = min(exponent, other.exponent)
        let a = digits + Array(repeating: 0, count: exponent - e)
        let b = other.digits + Array(repeating: 0, count: other.exponent - e)
        if negative == other.negative {
            return ExactDecimal(negative: negative, digits: Self.add(a, b), exponent: e)
        }
        if Self.compare(a, b) >= 0 {
            return ExactDecimal(negative: negative, digits: Self.subtract(a, b), exponent: e)
        }
        return ExactDecimal(negative: other.negative, digits: Self.subtract(b, a), exponent: e)
    }

    private static func compare(_ a: [UInt8], _ b: [UInt8]) -> Int {
        if a.count != b.count { return a.count < b.count ? -1 : 1 }
        for (x, y) in zip(a, b) where x != y { return x < y ? -1 : 1 }
        return 0
    }

    private static func add(_ a: [UInt8], _ b: [UInt8]) -> [UInt8] {
        var result: [UInt8] = []
        result.reserveCapacity(max(a.count, b.count) + 1)
        var i = a.count - 1, j = b.count - 1
        var carry: UInt8 = 0
        while i >= 0 || j >= 0 || carry > 0 {
            let sum = (i >= 0 ? a[i] : 0) + (j >= 0 ? b[j] : 0) + carry
            result.append(sum % 10)
            carry = sum / 10
            i -= 1
            j -= 1
        }
        return result.reversed()
    }

    /// a - b for a ≥ b.
    private static func subtract(_ a: [UInt8], _ b: [UInt8]) -> [UInt8] {
        var result = a
        var borrow: Int = 0
        var j = b.count - 1
        for i in stride(from: a.count - 1, through: 0, by: -1) {
            var d = Int(a[i]) - borrow - (j >= 0 ? Int(b[j]) : 0)
            borrow = d < 0 ? 1 : 0
            if d < 0 { d += 10 }
            result[i] = UInt8(d)
            j -= 1
        }
        return result
    }

    /// Plain decimal text without an exponent: `-123.045`, `0.5`, `1200`.
    var plainText: String {
        if isZero { return "0" }
        var out = negative ? "-" : ""
        let text = String(decoding: digits.map { $0 + UInt8(ascii: "0") }, as: UTF8.self)
        if exponent >= 0 {
            out += text + String(repeating: "0", count: exponent)
        } else if -exponent < digits.count {
            let split = digits.count + exponent
            out += text.prefix(split) + "." + text.dropFirst(split)
        } else {
            out += "0." + String(repeating: "0", count: -exponent - digits.count) + text
        }
        return out
    }

    /// Text with an exponent, for `Double(_:)` to round correctly: `-12345e-2`.
    var scientificText: String {
        if isZero { return negative ? "-0" : "0" }
        return (negative ? "-" : "") + String(decoding: digits.map { $0 + UInt8(ascii: "0") }, as: UTF8.self) + "e\(exponent)"
    }
}
