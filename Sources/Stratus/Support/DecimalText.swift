/// The outcome of reading a number as an `Int64`.
@usableFromInline package enum IntegerConversion: Equatable {
    case value(Int64)
    case notInteger
    case outOfRange
}

/// Decimal number text, read exactly: the one parser of number text, shared by the JSON
/// cursor (``JSONCursor``), the stored field document, and the transfer codecs' exact decimals
/// and timestamps. ``read(_:from:limit:)`` checks JSON's grammar and gathers the value in one
/// pass; the conversions (an exact `Int64`, the correctly rounded `Double`) are built on it,
/// and ``scan(_:count:digit:)`` hands over every digit for exact decimal arithmetic.
///
/// ```swift
/// let text: StaticString = "0.125"
/// DecimalText.double(text.utf8Start, count: text.utf8CodeUnitCount)   // 0.125
/// ```
@usableFromInline package enum DecimalText {
    /// Reads a number in JSON's grammar, `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`,
    /// starting at `start`: it stops where the grammar does (or at its first violation, with
    /// ``DecimalReading/isWellFormed`` false). Whether a delimiter follows is the caller's to check.
    @inlinable @inline(__always)
    package static func read(_ base: UnsafePointer<UInt8>, from start: Int, limit: Int) -> DecimalReading {
        var i = start
        var significand: UInt64 = 0
        var digits = 0
        var exponent = 0
        var isInteger = true
        let isNegative = i < limit && base[i] == UInt8(ascii: "-")
        if isNegative { i &+= 1 }
        func stop(_ wellFormed: Bool) -> DecimalReading {
            DecimalReading(end: i, isWellFormed: wellFormed, isInteger: isInteger, isNegative: isNegative,
                           significand: significand, digits: digits, exponent: exponent)
        }
        guard i < limit else { return stop(false) }
        var d = base[i] &- UInt8(ascii: "0")
        guard d < 10 else { return stop(false) }
        i &+= 1
        if d != 0 {
            significand = UInt64(d)
            digits = 1
            while i < limit {
                d = base[i] &- UInt8(ascii: "0")
                guard d < 10 else { break }
                significand = significand &* 10 &+ UInt64(d)
                digits &+= 1
                i &+= 1
            }
        }
        if i < limit && base[i] == UInt8(ascii: ".") {
            isInteger = false
            i &+= 1
            guard i < limit && base[i] &- UInt8(ascii: "0") < 10 else { return stop(false) }
            while i < limit {
                d = base[i] &- UInt8(ascii: "0")
                guard d < 10 else { break }
                // Zeros before the first other digit scale nothing; every fraction digit is a tenth.
                if digits != 0 || d != 0 {
                    significand = significand &* 10 &+ UInt64(d)
                    digits &+= 1
                }
                exponent &-= 1
                i &+= 1
            }
        }
        if i < limit && base[i] | 0x20 == UInt8(ascii: "e") {
            isInteger = false
            i &+= 1
            var negativeExponent = false
            if i < limit && (base[i] == UInt8(ascii: "+") || base[i] == UInt8(ascii: "-")) {
                negativeExponent = base[i] == UInt8(ascii: "-")
                i &+= 1
            }
            guard i < limit && base[i] &- UInt8(ascii: "0") < 10 else { return stop(false) }
            var e = 0
            while i < limit {
                d = base[i] &- UInt8(ascii: "0")
                guard d < 10 else { break }
                e = min(e &* 10 &+ Int(d), 1_000_000)
                i &+= 1
            }
            exponent &+= negativeExponent ? -e : e
        }
        return stop(true)
    }

    /// Reads number text in JSON's grammar (a caller checked it; a leading `.` is read too):
    /// hands each significant digit (leading zeros skipped, most significant first) to
    /// `digit`, which may stop the scan by answering false; returns the sign and the power of
    /// ten that scales the digits handed over (saturated far beyond any range a caller
    /// converts to), or nil when stopped.
    @inlinable @inline(__always)
    package static func scan(_ bytes: UnsafePointer<UInt8>, count: Int, digit: (UInt8) -> Bool) -> (negative: Bool, exponent: Int)? {
        var i = 0
        let negative = count > 0 && bytes[0] == UInt8(ascii: "-")
        if negative { i = 1 }
        var exponent = 0
        // Zeros before the first other digit scale nothing; after the point, each is a tenth.
        while i < count && bytes[i] == UInt8(ascii: "0") { i &+= 1 }
        var inFraction = false
        if i < count && bytes[i] == UInt8(ascii: ".") {
            inFraction = true
            i &+= 1
            while i < count && bytes[i] == UInt8(ascii: "0") {
                exponent &-= 1
                i &+= 1
            }
        }
        if !inFraction {
            while i < count {
                let d = bytes[i] &- UInt8(ascii: "0")
                guard d < 10 else { break }
                guard digit(d) else { return nil }
                i &+= 1
            }
            if i < count && bytes[i] == UInt8(ascii: ".") { i &+= 1 }
        }
        while i < count {
            let d = bytes[i] &- UInt8(ascii: "0")
            guard d < 10 else { break }
            guard digit(d) else { return nil }
            exponent &-= 1
            i &+= 1
        }
        if i < count {
            // An exponent: e, then an optional sign and digits.
            i &+= 1
            var negativeExponent = false
            if i < count && (bytes[i] == UInt8(ascii: "-") || bytes[i] == UInt8(ascii: "+")) {
                negativeExponent = bytes[i] == UInt8(ascii: "-")
                i &+= 1
            }
            var e = 0
            while i < count {
                e = min(e &* 10 &+ Int(bytes[i] &- UInt8(ascii: "0")), 1_000_000)
                i &+= 1
            }
            exponent += negativeExponent ? -e : e
        }
        return (negative, exponent)
    }

    /// Integer text as an exact `Int64`: JSON's integers (no fraction, no exponent) in one pass;
    /// other integer text, such as leading zeros, digit by digit.
    @inlinable
    package static func int64(_ bytes: UnsafePointer<UInt8>, count: Int) -> IntegerConversion {
        let reading = read(bytes, from: 0, limit: count)
        if reading.isWellFormed && reading.end == count { return reading.int64 }
        var magnitude: UInt64 = 0
        guard let (negative, _) = scan(bytes, count: count, digit: { digit in
            let (times10, o1) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, o2) = times10.addingReportingOverflow(UInt64(digit))
            magnitude = sum
            return !(o1 || o2)
        }) else { return .outOfRange }
        if negative {
            guard magnitude <= 1 << 63 else { return .outOfRange }
            return .value(Int64(bitPattern: 0 &- magnitude))
        }
        guard magnitude <= UInt64(Int64.max) else { return .outOfRange }
        return .value(Int64(magnitude))
    }

    /// The nearest `Double` to number text, as `Double(_:)` rounds it (infinite beyond the
    /// largest finite value); nil only for text `Double(_:)` does not read.
    @inlinable
    package static func double(_ bytes: UnsafePointer<UInt8>, count: Int) -> Double? {
        let reading = read(bytes, from: 0, limit: count)
        if reading.end == count, let fast = reading.exactDouble { return fast }
        return Double(String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self))
    }

    /// 10^n for n in 0...22, every power of ten a `Double` holds exactly. A switch rather
    /// than a table, so that code inlined into other modules needs no global.
    @inlinable
    static func powerOfTen(_ n: Int) -> Double {
        switch n {
        case 0: 1e0
        case 1: 1e1
        case 2: 1e2
        case 3: 1e3
        case 4: 1e4
        case 5: 1e5
        case 6: 1e6
        case 7: 1e7
        case 8: 1e8
        case 9: 1e9
        case 10: 1e10
        case 11: 1e11
        case 12: 1e12
        case 13: 1e13
        case 14: 1e14
        case 15: 1e15
        case 16: 1e16
        case 17: 1e17
        case 18: 1e18
        case 19: 1e19
        case 20: 1e20
        case 21: 1e21
        default: 1e22
        }
    }
}
