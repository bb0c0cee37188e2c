import SeededRandom
import Stratus
import Testing

/// The JSON writers' integer text: the standard library's digits for every value, with the
/// zeros a width asks for.
@Suite("ByteOutput integers")
struct ByteOutputIntegerTests {
    static func text(_ write: (inout ByteOutput) -> Void) -> String {
        var out = ByteOutput()
        write(&out)
        return String(decoding: out.bytes, as: UTF8.self)
    }

    @Test("every digit count, the edges of each and of Int64 and UInt64, and random values, are written as String(value) writes them")
    func digits() {
        var values: [UInt64] = [0, 1, 9, 10, 11, 99, 100, 101, .max, .max - 1, UInt64(Int64.max), UInt64(Int64.max) + 1]
        var power: UInt64 = 1
        for _ in 0..<19 {
            power *= 10
            values += [power - 1, power, power + 1]
        }
        var generator = SeededGenerator(seed: 12)
        for _ in 0..<2_000 { values.append(UInt64.random(in: 0...UInt64.max, using: &generator) >> UInt64.random(in: 0...63, using: &generator)) }
        for value in values {
            #expect(Self.text { $0.appendUnsigned(value) } == String(value))
        }
        for value: Int64 in [0, -1, 1, .min, .max, -10, -99, -100, -1_700_000_000_000] {
            #expect(Self.text { $0.appendInt(value) } == String(value))
        }
    }

    @Test("a width pads with leading zeros and never cuts digits")
    func width() {
        #expect(Self.text { $0.appendUnsigned(5, width: 3) } == "005")
        #expect(Self.text { $0.appendUnsigned(0, width: 4) } == "0000")
        #expect(Self.text { $0.appendUnsigned(42, width: 2) } == "42")
        #expect(Self.text { $0.appendUnsigned(123, width: 6) } == "000123")
        #expect(Self.text { $0.appendUnsigned(12_345, width: 3) } == "12345")
        #expect(Self.text { out in
            out.append(UInt8(ascii: "x"))
            out.appendUnsigned(7, width: 2)
        } == "x07")
    }
}
