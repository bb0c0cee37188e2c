import Foundation
import Stratus

/// ISO 8601 date-times for CSV cells (`2024-01-01T09:30:00Z`, `2024-01-01T09:30:00.123+02:00`,
/// `2024-01-01`), read and written exactly: the text becomes the same decimal number of
/// milliseconds since 1970 that ``TimestampText`` reads and writes, so a date written in either
/// form reads back as the very same `Date`.
enum ISO8601Timestamp {
    /// The date for `text`: `YYYY-MM-DD`, optionally followed by `T` (or a space) and
    /// `hh:mm[:ss[.fraction]]` and a zone (`Z`, `±hh:mm`, `±hhmm`, `±hh`); a date alone is
    /// midnight UTC, unless `allowsDateAlone` is false. The year may be an expanded one, a sign
    /// and six digits (`+010000-01-01T00:00:00.000Z`, `-000001-12-31T23:59:59.999Z`), as
    /// JavaScript's `toISOString()`, and so CKTool JS's JSON, writes a year outside 0000–9999.
    /// Nil when `text` is not such a date-time, or one without a zone.
    static func date(_ text: some Collection<UInt8>, allowsDateAlone: Bool = true) -> Date? {
        var bytes = Array(text)[...]
        func number(_ digits: Int) -> Int? {
            guard bytes.count >= digits else { return nil }
            var value = 0
            for _ in 0..<digits {
                let b = bytes.removeFirst()
                guard b >= 0x30 && b <= 0x39 else { return nil }
                value = value * 10 + Int(b - 0x30)
            }
            return value
        }
        func skip(_ c: UInt8) -> Bool {
            guard bytes.first == c else { return false }
            bytes.removeFirst()
            return true
        }
        let year: Int
        if let sign = bytes.first, sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-") {
            bytes.removeFirst()
            // ECMAScript forbids -000000: year 0 is +000000 (or 0000).
            guard let digits = number(6), sign == UInt8(ascii: "+") || digits != 0 else { return nil }
            year = sign == UInt8(ascii: "+") ? digits : -digits
        } else {
            guard let digits = number(4) else { return nil }
            year = digits
        }
        guard skip(UInt8(ascii: "-")), let month = number(2), skip(UInt8(ascii: "-")), let day = number(2),
              (1...12).contains(month), (1...daysIn(month: month, year: year)).contains(day) else { return nil }
        if bytes.isEmpty && !allowsDateAlone { return nil }
        var seconds = Int64(daysFromCivil(year: year, month: month, day: day)) * 86_400
        var fraction: [UInt8] = []
        if !bytes.isEmpty {
            guard skip(UInt8(ascii: "T")) || skip(UInt8(ascii: "t")) || skip(UInt8(ascii: " ")) else { return nil }
            guard let hour = number(2), skip(UInt8(ascii: ":")), let minute = number(2), hour < 24, minute < 60 else { return nil }
            var second = 0
            if skip(UInt8(ascii: ":")) {
                guard let s = number(2), s < 60 else { return nil }
                second = s
                if skip(UInt8(ascii: ".")) || skip(UInt8(ascii: ",")) {
                    while let b = bytes.first, b >= 0x30 && b <= 0x39 {
                        fraction.append(b)
                        bytes.removeFirst()
                    }
                    guard !fraction.isEmpty else { return nil }
                }
            }
            seconds += Int64(hour * 3_600 + minute * 60 + second)
            // A date-time needs its zone: a local time would mean whatever this machine's zone is.
            if skip(UInt8(ascii: "Z")) || skip(UInt8(ascii: "z")) {
            } else if let sign = bytes.first, sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-") {
                bytes.removeFirst()
                guard let hours = number(2), hours < 24 else { return nil }
                var minutes = 0
                if !bytes.isEmpty {
                    _ = skip(UInt8(ascii: ":"))
                    guard let m = number(2), m < 60 else { return nil }
                    minutes = m
                }
                let offset = Int64(hours * 3_600 + minutes * 60)
                seconds += sign == UInt8(ascii: "+") ? -offset : offset
            } else {
                return nil
            }
        }
        guard bytes.isEmpty else { return nil }
        // Milliseconds since 1970: the whole ones, then any finer digits as a decimal fraction.
        let millisecondDigits = fraction.prefix(3) + Array(repeating: UInt8(ascii: "0"), count: max(0, 3 - fraction.count))
        let milliseconds = seconds * 1_000 + Int64(String(decoding: millisecondDigits, as: UTF8.self))!
        let finer = fraction.dropFirst(3)
        if finer.allSatisfy({ $0 == UInt8(ascii: "0") }) {
            let sinceReference = milliseconds - TimestampText.referenceDateMilliseconds
            let date = Date(timeIntervalSinceReferenceDate: Double(sinceReference) / 1_000)
            // Within some 35,000 years of 2001 every whole millisecond is a date of its own;
            // further out (an expanded year) only one the date writes back as is kept.
            return sinceReference.magnitude < 1 << 50 || JSONCursor.writesBack(ExactDecimal(milliseconds), date) ? date : nil
        }
        // The whole milliseconds may be negative: add the fraction, do not append its digits.
        return TimestampText.date(fromMilliseconds: ExactDecimal(milliseconds).adding(ExactDecimal("0." + String(decoding: finer, as: UTF8.self))))
    }

    /// `date` as `YYYY-MM-DDThh:mm:ss[.fraction]Z`, with as many fraction digits as the exact
    /// milliseconds text has (none for a whole second); a year outside 0000–9999 expanded as
    /// JavaScript writes it (`+010000-01-01T00:00:00Z`). Nil for a date no such text reads back
    /// as (beyond the years ±999999, or too far out to hold its millisecond).
    static func text(for date: Date) -> String? {
        guard date.timeIntervalSinceReferenceDate.isFinite else { return nil }
        let (integer, decimal) = TimestampText.text(for: date)
        // Whole milliseconds and the finer digits, floored (so that times before 1970 count up).
        var milliseconds: Int64
        var finer = ""
        if let integer {
            milliseconds = integer
        } else {
            let text = decimal!
            let negative = text.hasPrefix("-")
            let parts = text.drop(while: { $0 == "-" }).split(separator: ".", maxSplits: 1)
            guard let whole = Int64(parts[0]) else { return nil }
            let digits = parts.count > 1 ? String(parts[1]) : ""
            if negative && !digits.allSatisfy({ $0 == "0" }) {
                // -12.25 ms is -13 ms + 0.75 ms.
                milliseconds = -whole - 1
                // 1 - 0.DIGITS, digit by digit: 10^k - DIGITS.
                var complement = [UInt8](repeating: 0, count: digits.utf8.count)
                var borrow = 0
                for (index, digit) in digits.utf8.enumerated().reversed() {
                    var d = -Int(digit - 0x30) - borrow
                    borrow = d < 0 ? 1 : 0
                    if d < 0 { d += 10 }
                    complement[index] = UInt8(0x30 + d)
                }
                finer = String(decoding: complement, as: UTF8.self)
            } else {
                milliseconds = negative ? -whole : whole
                finer = digits
            }
        }
        let (days, inDay) = milliseconds.quotientAndRemainder(dividingBy: 86_400_000)
        let day = inDay < 0 ? days - 1 : days
        let msOfDay = inDay < 0 ? inDay + 86_400_000 : inDay
        let (year, month, dayOfMonth) = civil(fromDays: day)
        guard (-999_999...999_999).contains(year) else { return nil }
        let hour = msOfDay / 3_600_000, minute = msOfDay / 60_000 % 60, second = msOfDay / 1_000 % 60, ms = msOfDay % 1_000
        func pad(_ n: Int64, _ width: Int) -> String {
            let digits = String(n)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        let yearText = (0...9_999).contains(year) ? pad(Int64(year), 4) : (year < 0 ? "-" : "+") + pad(Int64(year.magnitude), 6)
        var out = "\(yearText)-\(pad(Int64(month), 2))-\(pad(Int64(dayOfMonth), 2))T\(pad(hour, 2)):\(pad(minute, 2)):\(pad(second, 2))"
        var fraction = pad(ms, 3) + finer
        while fraction.hasSuffix("0") { fraction.removeLast() }
        if !fraction.isEmpty { out += "." + fraction }
        out += "Z"
        // Far out, a date is coarser than a millisecond: write only text that reads back as it.
        return (0...9_999).contains(year) || Self.date(out.utf8) == date ? out : nil
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    private static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The date of a day count since 1970-01-01 (the inverse of ``daysFromCivil(year:month:day:)``).
    private static func civil(fromDays days: Int64) -> (year: Int, month: Int, day: Int) {
        let z = Int(days) + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
