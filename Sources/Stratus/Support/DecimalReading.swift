/// What one pass over number text in JSON's grammar found: where the number ends, whether the
/// grammar held, and its value as a significand and a power of ten while it has at most 19
/// significant digits (the most a `UInt64` holds), which covers nearly every number written.
@usableFromInline package struct DecimalReading {
    /// One past the last byte the grammar took.
    @usableFromInline package var end: Int
    /// Whether the bytes up to `end` are a whole number in JSON's grammar.
    @usableFromInline package var isWellFormed: Bool
    /// No fraction and no exponent.
    @usableFromInline package var isInteger: Bool
    @usableFromInline package var isNegative: Bool
    /// The significant digits as an integer; exact when `digits` is at most 19.
    @usableFromInline package var significand: UInt64
    /// How many significant digits (leading zeros are not).
    @usableFromInline package var digits: Int
    /// The power of ten that scales `significand` (saturated far beyond any range a caller converts to).
    @usableFromInline package var exponent: Int

    @inlinable
    init(end: Int, isWellFormed: Bool, isInteger: Bool, isNegative: Bool, significand: UInt64, digits: Int, exponent: Int) {
        self.end = end
        self.isWellFormed = isWellFormed
        self.isInteger = isInteger
        self.isNegative = isNegative
        self.significand = significand
        self.digits = digits
        self.exponent = exponent
    }

    /// The value of a well-formed reading as an exact `Int64`, when it is an integer.
    @inlinable @inline(__always)
    package var int64: IntegerConversion {
        guard isInteger else { return .notInteger }
        guard digits <= 19 else { return .outOfRange }
        if isNegative {
            return significand <= 1 << 63 ? .value(Int64(bitPattern: 0 &- significand)) : .outOfRange
        }
        return significand <= UInt64(Int64.max) ? .value(Int64(significand)) : .outOfRange
    }

    /// Clinger's fast path: a significand of at most 2^53 scaled by an exact power of ten is
    /// correctly rounded by one multiplication or division, as `Double(_:)` rounds. Nil
    /// outside it (and for text that is not well formed).
    @inlinable @inline(__always)
    package var exactDouble: Double? {
        guard isWellFormed && digits <= 19 && significand <= 1 << 53 else { return nil }
        var value = Double(significand)
        if significand != 0 {
            guard exponent >= -22 && exponent <= 22 else { return nil }
            if exponent < 0 {
                value /= DecimalText.powerOfTen(-exponent)
            } else if exponent > 0 {
                value *= DecimalText.powerOfTen(exponent)
            }
        }
        return isNegative ? -value : value
    }
}
