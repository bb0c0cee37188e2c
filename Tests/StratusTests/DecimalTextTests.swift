import Foundation
import SeededRandom
import Stratus
import Testing

/// The one parser of number text: its conversions agree with the standard library's on any
/// number JSON can spell, and its one-pass reading stops where JSON's grammar does.
@Suite("Decimal text")
struct DecimalTextTests {
    static func double(_ text: String) -> Double? {
        var text = text
        return text.withUTF8 { DecimalText.double($0.baseAddress!, count: $0.count) }
    }

    static func int64(_ text: String) -> IntegerConversion {
        var text = text
        return text.withUTF8 { DecimalText.int64($0.baseAddress!, count: $0.count) }
    }

    static func read(_ text: String) -> DecimalReading {
        var text = text
        return text.withUTF8 { DecimalText.read($0.baseAddress!, from: 0, limit: $0.count) }
    }

    /// Random number text in JSON's grammar: a sign, 1–25 integer digits, a fraction, an exponent.
    static func randomNumber(_ generator: inout SeededGenerator) -> String {
        func digits(_ count: Int, leading: Bool) -> String {
            String((0..<count).map { i in Character(String(Int.random(in: (i == 0 && leading ? 1 : 0)...9, using: &generator))) })
        }
        var text = Bool.random(using: &generator) ? "-" : ""
        let integerDigits = Int.random(in: 1...25, using: &generator)
        text += integerDigits == 1 && Bool.random(using: &generator) ? "0" : digits(integerDigits, leading: true)
        if Int.random(in: 0..<3, using: &generator) == 0 {
            text += "." + (Bool.random(using: &generator) ? String(repeating: "0", count: Int.random(in: 1...8, using: &generator)) : "")
                + digits(Int.random(in: 1...20, using: &generator), leading: false)
        }
        if Int.random(in: 0..<3, using: &generator) == 0 {
            text += ["e", "E", "e+", "e-", "E-"][Int.random(in: 0..<5, using: &generator)] + String(Int.random(in: 0...340, using: &generator))
        }
        return text
    }

    @Test("Double and Int64 conversions give what the standard library gives, to the bit")
    func agreesWithTheStandardLibrary() {
        var generator = SeededGenerator(seed: 2_024)
        var texts = ["0", "-0", "0.0", "-0.0", "1", "0.1", "0.125", "1e22", "1e23", "9007199254740993", "9007199254740992",
                     "0.30000000000000004", "5e-324", "1.7976931348623157e308", "1e400", "-1e-400", "123456789012345678901234",
                     "9223372036854775807", "-9223372036854775808", "9223372036854775808", "-9223372036854775809", "0e999"]
        for _ in 0..<20_000 { texts.append(Self.randomNumber(&generator)) }
        for text in texts {
            let expected = Double(text)!
            #expect(Self.double(text)?.bitPattern == expected.bitPattern, "\(text)")
            let reading = Self.read(text)
            #expect(reading.isWellFormed && reading.end == text.utf8.count, "\(text)")
            guard reading.isInteger else {
                #expect(reading.int64 == .notInteger, "\(text)")
                continue
            }
            let int64 = Self.int64(text)
            if let exact = Int64(text) { #expect(int64 == .value(exact), "\(text)") } else { #expect(int64 == .outOfRange, "\(text)") }
        }
    }

    @Test("one pass stops where JSON's grammar stops, and says whether it held")
    func grammar() {
        let cases: [(String, end: Int, wellFormed: Bool, integer: Bool)] = [
            ("12,", 2, true, true), ("-1.5]", 4, true, false), ("1e5}", 3, true, false), ("0x", 1, true, true), ("01", 1, true, true),
            ("1.", 2, false, false), ("-", 1, false, true), ("1e+", 3, false, false), (".5", 0, false, true), ("+5", 0, false, true),
        ]
        for (text, end, wellFormed, integer) in cases {
            let reading = Self.read(text)
            #expect(reading.end == end && reading.isWellFormed == wellFormed && reading.isInteger == integer, "\(text)")
        }
        // Text outside the grammar still converts as the standard library does.
        #expect(Self.double(".5") == 0.5)
        #expect(Self.int64("007") == .value(7))
    }

    @Test("scan hands over the significant digits and the power of ten that scales them")
    func digits() {
        for (text, digits, negative, exponent) in [("0.000501", [5, 0, 1], false, -6), ("100", [1, 0, 0], false, 0), ("-1.5e3", [1, 5], true, 2),
                                                    ("0", [], false, 0), ("-0.0", [], true, -1), ("12.50", [1, 2, 5, 0], false, -2)] {
            var handed: [Int] = []
            var text = text
            let result = text.withUTF8 { DecimalText.scan($0.baseAddress!, count: $0.count) { handed.append(Int($0)); return true } }
            #expect(handed == digits && result?.negative == negative && result?.exponent == exponent, "\(text)")
        }
    }
}
