import Foundation
import Stratus

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
    ///
    /// This is the reference for ``append(_:to:)``, which writes the same text faster.
    static func text(for date: Date) -> (integer: Int64?, decimal: String?) {
        let seconds = date.timeIntervalSinceReferenceDate
        if let milliseconds = wholeMilliseconds(seconds) { return (milliseconds, nil) }
        let decimal = ExactDecimal(seconds.description).shifted(by: 3).adding(referenceDecimal)
        return (nil, decimal.plainText)
    }

    /// Milliseconds since 1970 when `seconds` (since 2001) is a whole number of them: the
    /// integer divided back by 1000 (exact operands, one rounding) gives the same `Double`.
    @inline(__always)
    static func wholeMilliseconds(_ seconds: Double) -> Int64? {
        let milliseconds = (seconds * 1000).rounded()
        guard milliseconds.magnitude < 0x1p53 && milliseconds / 1000 == seconds else { return nil }
        return Int64(milliseconds) + referenceDateMilliseconds
    }

    /// Appends the text ``text(for:)`` gives for a finite number of seconds since 2001.
    static func append(_ seconds: Double, to out: inout ByteOutput) {
        if let milliseconds = wholeMilliseconds(seconds) {
            out.appendInt(milliseconds)
        } else if !appendFixedPoint(seconds, to: &out) {
            let decimal = ExactDecimal(seconds.description).shifted(by: 3).adding(referenceDecimal)
            out.appendRaw(decimal.plainText)
        }
    }

    /// The exact decimal steps of ``text(for:)`` in 64-bit fixed point, for the dates whose
    /// shortest text has few enough digits (every date within centuries of now): the
    /// significand of the text plus the reference date scaled to the same power of ten.
    /// False, with nothing appended, when a step would not fit.
    private static func appendFixedPoint(_ seconds: Double, to out: inout ByteOutput) -> Bool {
        var text = seconds.description
        return text.withUTF8 { utf8 in
            let reading = DecimalText.read(utf8.baseAddress!, from: 0, limit: utf8.count)
            guard reading.isWellFormed && reading.end == utf8.count && reading.digits <= 19 else { return false }
            let (significand, negative, exponent) = (reading.significand, reading.isNegative, reading.exponent)
            // Milliseconds are significand × 10^(exponent + 3); whole ones took the integer path.
            var places = -(exponent + 3)
            guard significand != 0, places > 0, places < powersOfTen.count else { return false }
            let (reference, overflow) = UInt64(referenceDateMilliseconds).multipliedReportingOverflow(by: powersOfTen[places])
            guard !overflow else { return false }
            var magnitude: UInt64
            var resultNegative = false
            if !negative {
                let (sum, overflow) = reference.addingReportingOverflow(significand)
                guard !overflow else { return false }
                magnitude = sum
            } else if significand <= reference {
                magnitude = reference - significand
            } else {
                magnitude = significand - reference
                resultNegative = true
            }
            while places > 0 && magnitude % 10 == 0 {
                magnitude /= 10
                places -= 1
            }
            if resultNegative && magnitude != 0 { out.append(UInt8(ascii: "-")) }
            guard places > 0 else {
                out.appendUnsigned(magnitude)
                return true
            }
            let power = powersOfTen[places]
            out.appendUnsigned(magnitude / power)
            out.append(UInt8(ascii: "."))
            out.appendUnsigned(magnitude % power, width: places)
            return true
        }
    }

    /// 10^0 through 10^19, every power of ten a `UInt64` holds.
    private static let powersOfTen: [UInt64] = (0...19).map { (0..<$0).reduce(UInt64(1)) { p, _ in p * 10 } }

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
