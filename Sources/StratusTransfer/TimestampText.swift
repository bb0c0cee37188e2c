import Foundation

/// CloudKit's timestamps (milliseconds since 1970) for `Date`s (seconds since 2001), exactly.
///
/// A date that falls on a whole millisecond is written as an integer. Any other date is written
/// with the decimal fraction that reads back to the very same `Double`: the shortest text of
/// its seconds since 2001, shifted to milliseconds and moved to 1970 in exact decimal
/// arithmetic. Reading undoes those two exact steps and rounds once. Multiplying and dividing
/// by 1000 in floating point instead would move many dates by a few ULPs.
enum TimestampText {
    /// 2001-01-01T00:00:00Z in milliseconds since 1970.
    static let referenceDateMilliseconds: Int64 = 978_307_200_000
    static let referenceDecimal = ExactDecimal(referenceDateMilliseconds)

    /// The text of `date` in milliseconds since 1970. The date must be finite.
    static func text(for date: Date) -> (integer: Int64?, decimal: String?) {
        let seconds = date.timeIntervalSinceReferenceDate
        let milliseconds = (seconds * 1000).rounded()
        if milliseconds.magnitude < 0x1p53 && milliseconds / 1000 == seconds {
            return (Int64(milliseconds) + referenceDateMilliseconds, nil)
        }
        let decimal = ExactDecimal(seconds.description).shifted(by: 3).adding(referenceDecimal)
        return (nil, decimal.plainText)
    }

    /// The date for a decimal number of milliseconds since 1970, or nil when it is not finite.
    static func date(fromMilliseconds milliseconds: ExactDecimal) -> Date? {
        // Far below a millisecond's billionth the value cannot move the result, and far above
        // the largest Double it is out of range; both bounds keep the digit arrays short.
        if milliseconds.magnitudeExponent < -30 { return Date(timeIntervalSinceReferenceDate: Double(-referenceDateMilliseconds) / 1000) }
        if milliseconds.magnitudeExponent > 320 { return nil }
        let seconds = milliseconds.adding(ExactDecimal(-referenceDateMilliseconds)).shifted(by: -3)
        guard let value = Double(seconds.scientificText), value.isFinite else { return nil }
        return Date(timeIntervalSinceReferenceDate: value)
    }
}
