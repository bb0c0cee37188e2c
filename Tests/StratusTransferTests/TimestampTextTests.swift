import Foundation
import Stratus
@testable import StratusTransfer
import Testing
import SeededRandom

/// The timestamp text written on the fast paths against the exact decimal reference, and the
/// round trip through the reader, at the boundaries where the fast paths give up.
@Suite("Timestamp text")
struct TimestampTextTests {
    /// Seconds since 2001 around every boundary of the fast paths.
    static let boundaries: [Double] = [
        0, -0.0, 0.0005, -0.0005, 0.000_501, 1e-7, -1e-7, 1e-300, -1e-300, .leastNonzeroMagnitude, -.leastNonzeroMagnitude,
        // 1970 and either side of it, where the sign of the milliseconds changes.
        -978_307_200, -978_307_200.000_1, -978_307_199.999_9, -978_307_200.5, -978_307_200.000_000_1, -978_307_199.999_999_9,
        // Before 1970, before 2001, now, and far ahead.
        -1_234_567_890.123_456, -31_536_000.000_001, 712_345_678.123_456_7, 817_020_265.450_568, 817_020_265.450_568_1,
        1_000_000_000.5, 4_102_444_800.000_001, 253_402_300_799.999,
        // Where milliseconds stop fitting 2^53, where fixed point stops fitting 64 bits, and beyond.
        9_007_199_254_740.991, 9_007_199_254_740.992_5, 9_007_199_254_741.5, 3e15, 1e17, 1.5e17, 1e18 + 4096, 9.2e18,
        -9.2e18, 1e22, 1e300, -1.7e300, .greatestFiniteMagnitude, -.greatestFiniteMagnitude,
        // Seventeen significant digits, the most a shortest text has.
        0.1 + 0.2, 123_456_789.012_345_68, -123_456_789.012_345_68, 1.234_567_890_123_456_7e-5,
    ]

    static func written(_ seconds: Double) -> String {
        var out = ByteOutput()
        out.appendTimestamp(Date(timeIntervalSinceReferenceDate: seconds), field: "when")
        return String(decoding: out.bytes, as: UTF8.self)
    }

    static func reference(_ seconds: Double) -> String {
        let text = TimestampText.text(for: Date(timeIntervalSinceReferenceDate: seconds))
        return text.integer.map(String.init) ?? text.decimal!
    }

    /// Reads a timestamp back as a record reader does.
    static func readBack(_ text: String) throws -> Date? {
        let line = #"{"recordName":"r","recordType":"T","fields":{"when":{"value":\#(text),"type":"TIMESTAMP"}}}"#
        let reader = try RecordReader(data: Data(line.utf8), options: RecordReadOptions())
        guard case .record(let record, _)? = try reader.next(), case .date(let date)? = record.fieldValue(forKey: "when") else { return nil }
        return date
    }

    @Test("fast paths write the exact reference text, and it reads back to the same Date")
    func boundaries() throws {
        for seconds in Self.boundaries {
            for value in [seconds, seconds.nextUp, seconds.nextDown] where value.isFinite {
                let text = Self.written(value)
                #expect(text == Self.reference(value), "\(value)")
                let back = try Self.readBack(text)
                #expect(back?.timeIntervalSinceReferenceDate.bitPattern == value.bitPattern || (value == 0 && back?.timeIntervalSinceReferenceDate == 0), "\(value) wrote \(text)")
            }
        }
    }

    @Test("ISO 8601 date-times with a zone, as CloudKit's management API writes dates, read as the same instant as their milliseconds")
    func isoDateTimes() throws {
        let cases: [(String, Double)] = [
            ("\"2024-03-01T12:00:00Z\"", 1_709_294_400_000), ("\"2024-03-01T12:00:00.123Z\"", 1_709_294_400_123),
            ("\"2024-03-01T14:00:00+02:00\"", 1_709_294_400_000), ("\"1969-12-31T23:59:59.999Z\"", -1),
        ]
        for (iso, milliseconds) in cases {
            let fromISO = try Self.readBack(iso), fromNumber = try Self.readBack(String(format: "%.0f", milliseconds))
            #expect(fromISO != nil && fromISO == fromNumber, "\(iso)")
        }
        // The envelope's authorship and a location's timestamp read the same way.
        let line = #"{"recordName":"r","recordType":"T","fields":{"at":{"value":{"latitude":1,"longitude":2,"timestamp":"2024-03-01T12:00:00Z"},"type":"LOCATION"}},"created":{"timestamp":"2024-03-01T12:00:00.5Z","userRecordName":"_u"}}"#
        let reader = try RecordReader(data: Data(line.utf8), options: RecordReadOptions())
        guard case .record(let record, _)? = try reader.next(), case .location(let location)? = record.fieldValue(forKey: "at") else {
            Issue.record("the record did not read")
            return
        }
        #expect(location.timestamp == Date(timeIntervalSince1970: 1_709_294_400))
        #expect(record.systemFields.creationDate == Date(timeIntervalSince1970: 1_709_294_400.5))
    }

    @Test("known texts: fractions, signs and whole milliseconds")
    func knownTexts() {
        #expect(Self.written(0.000_501) == "978307200000.501")
        #expect(Self.written(-978_307_200.000_1) == "-0.1")
        #expect(Self.written(-978_307_199.999_9) == "0.1")
        #expect(Self.written(-978_307_200) == "0")
        #expect(Self.written(817_020_265.450_568) == "1795327465450.568")
        #expect(Self.written(-1_234_567_890.123_456) == "-256260690123.456")
        #expect(Self.written(1e-300) == "978307200000." + String(repeating: "0", count: 296) + "1")
    }

    @Test("a whole number of milliseconds is written back as itself, or refused where a date cannot hold it")
    func wholeMillisecondsComeBackOrAreRefused() throws {
        func outcome(_ text: String) throws -> (date: Date?, message: String?) {
            let line = #"{"recordName":"r","recordType":"T","fields":{"when":{"value":\#(text),"type":"TIMESTAMP"}}}"#
            let reader = try RecordReader(data: Data(line.utf8), options: RecordReadOptions())
            switch try reader.next() {
            case .record(let record, _)?: if case .date(let date)? = record.fieldValue(forKey: "when") { return (date, nil) }
            case .rejected(let error)?: return (nil, error.message)
            default: break
            }
            return (nil, nil)
        }
        // Where seconds since 2001 grow coarser than a millisecond, some neighbours share a date.
        for text in ["9007199254740993", "123456789012345678", "9223372036854775807", "-9223372036854775808", "9007199254740993.0", #""9007199254740993""#] {
            let (date, message) = try outcome(text)
            #expect(date == nil && message?.contains("field 'when'") == true && message?.contains("would be written back as another number") == true, "\(text): \(String(describing: message))")
        }
        var generator = SeededGenerator(seed: 0xD47E)
        let edges: [Int64] = [8_640_000_000_000_000, -8_640_000_000_000_000, 9_007_199_254_740_992, 3_000_000_978_307_200_000, 1 << 62, 0, -1]
        let near = (0..<2_000).map { _ in Int64(8_700_000_000_000_000) + Int64(generator.next() % 400_000_000_000_000) }
        for ms in edges + near + near.map({ -$0 }) {
            let (date, message) = try outcome(String(ms))
            if let date {
                #expect(Self.written(date.timeIntervalSinceReferenceDate) == String(ms), "\(ms)")
            } else {
                #expect(message?.contains("would be written back as another number") == true, "\(ms): \(String(describing: message))")
            }
        }
        // Every date within any CloudKit client's range (JavaScript's ±8.64e15 ms) is kept.
        #expect(try outcome("8640000000000000").date != nil && outcome("-8640000000000000").date != nil)
    }

    @Test("random dates: the same text as the reference, repeated dates too")
    func randomDates() throws {
        var generator = SeededGenerator(seed: 0x5EED)
        var out = ByteOutput()
        for i in 0..<20_000 {
            let seconds: Double
            switch i % 4 {
            case 0: seconds = Double(Int64(bitPattern: generator.next()) % 4_000_000_000_000) / 1000 + Double(generator.next() % 1000) / 1e7
            case 1: seconds = Double(bitPattern: generator.next())
            case 2: seconds = (Double(generator.next() % 2_000_000_000) - 1_000_000_000) * Double(generator.next() % 1000 + 1) / 997
            default: seconds = Double(generator.next() % 100_000_000_000) / 1_000_000 - 2_000_000_000
            }
            guard seconds.isFinite else { continue }
            let expected = Self.reference(seconds)
            #expect(Self.written(seconds) == expected, "\(seconds)")
            // Twice through one output, as a record's creation and modification dates are.
            out.removeAll()
            out.appendTimestamp(Date(timeIntervalSinceReferenceDate: seconds), field: "a")
            out.append(UInt8(ascii: ","))
            out.appendTimestamp(Date(timeIntervalSinceReferenceDate: seconds), field: "b")
            #expect(String(decoding: out.bytes, as: UTF8.self) == expected + "," + expected)
            if i % 16 == 0 {
                #expect(try Self.readBack(expected)?.timeIntervalSinceReferenceDate.bitPattern == (seconds == 0 ? 0 : seconds.bitPattern), "\(seconds)")
            }
        }
    }
}
