import Foundation
import Stratus
@testable import StratusTransfer
import Testing

/// ISO 8601 dates with an expanded year: a sign and six digits, as ECMAScript's
/// `Date.prototype.toISOString()` writes a year outside 0000–9999, and so as `JSON.stringify`
/// writes a `Date`. CKTool JS (Apple's `@apple/cktool.database`) gives a record's timestamps as
/// JavaScript `Date`s, so its JSON holds such text for dates before year 0 or after 9999. The
/// strings below are what Node's `JSON.stringify(new Date(ms))` prints for those milliseconds.
@Suite("ISO 8601 expanded years")
struct ExpandedYearTests {
    /// Milliseconds since 1970 and the text JavaScript writes for them.
    static let javaScriptDates: [(milliseconds: Int64, text: String)] = [
        (253_402_300_800_000, "+010000-01-01T00:00:00.000Z"),
        (-62_167_219_200_001, "-000001-12-31T23:59:59.999Z"),
        (-62_198_755_200_000, "-000001-01-01T00:00:00.000Z"),
        (-100_000_000_000_000, "-001199-02-15T14:13:20.000Z"),
        // The last day JavaScript's dates reach.
        (8_640_000_000_000_000, "+275760-09-13T00:00:00.000Z"),
    ]

    static func date(milliseconds: Int64) -> Date {
        Date(timeIntervalSinceReferenceDate: Double(milliseconds - 978_307_200_000) / 1_000)
    }

    @Test("a CKTool JS record with dates beyond 0000–9999 reads them as the instants JavaScript meant")
    func ckToolJSRecord() throws {
        for (milliseconds, text) in Self.javaScriptDates {
            let json = #"{"recordName":"r","recordType":"Event","created":{"timestamp":"\#(text)","userRecordName":"_9a065b60313a5937e75e03ed8e8f383d"},"#
                + #""fields":{"when":{"type":"timestampType","value":"\#(text)"},"#
                + #""dates":{"type":"TIMESTAMP_LIST","value":["\#(text)"]},"#
                + #""where":{"type":"LOCATION","value":{"latitude":1,"longitude":2,"timestamp":"\#(text)"}}}}"#
            let items = try readAll(json)
            let record = try #require(items.first?.record, "\(text): \(items)")
            let expected = Self.date(milliseconds: milliseconds)
            #expect(record.fieldValue(forKey: "when") == .date(expected), "\(text)")
            #expect(record.fieldValue(forKey: "dates") == .dateList([expected]), "\(text)")
            if case .location(let location) = record.fieldValue(forKey: "where") {
                #expect(location.timestamp == expected, "\(text)")
            } else {
                Issue.record("\(text): no location")
            }
            #expect(record.creationDate == expected, "\(text)")
        }
    }

    @Test("what JavaScript never writes is refused, naming the value: -000000, seven digits, a date alone, no sign with six digits",
          arguments: ["-000000-01-01T00:00:00.000Z", "+1000000-01-01T00:00:00.000Z", "+010000-01-01", "010000-01-01T00:00:00Z", "+10000-01-01T00:00:00Z"])
    func refused(text: String) throws {
        let json = #"{"recordName":"r","recordType":"Event","fields":{"when":{"type":"TIMESTAMP","value":"\#(text)"}}}"#
        let rejection = try #require(try readAll(json).first?.rejection, "\(text) was read")
        #expect(rejection.message.contains("field 'when'") && rejection.message.contains(text), "\(rejection.message)")
    }

    @Test("CSV: --timestamps iso8601 writes a year outside 0000–9999 as JavaScript does, and reads it back as the same date")
    func csvRoundTrip() throws {
        let dates = Self.javaScriptDates.map { Self.date(milliseconds: $0.milliseconds) }
            + [Date(timeIntervalSince1970: -62_167_219_200.000_25), Date(timeIntervalSince1970: 253_402_300_799.999)]
        let records = dates.enumerated().map { index, date in
            let record = Record(recordType: "T", recordID: Record.ID(recordName: "r\(index)"))
            record.setFieldValue(.date(date), forKey: "t")
            return record
        }
        let text = String(decoding: try written(records, format: .csv, csvFields: ["t"]) { writer in
            writer.csvSystemColumns = false
            writer.csvTypes = ["t": .timestamp]
            writer.csvTimestampStyle = .iso8601
        }, as: UTF8.self)
        for (_, javaScript) in Self.javaScriptDates {
            // JavaScript always writes milliseconds; the writer leaves out a zero fraction.
            let expected = javaScript.replacingOccurrences(of: ".000Z", with: "Z")
            #expect(text.contains(",\(expected)\n") || text.contains(",\(expected)\r\n"), "\(expected) in \(text)")
        }
        var options = RecordReadOptions()
        options.format = .csv
        options.csvRecordType = "T"
        let read = try readAll(Data(text.utf8), options).map { $0.record?.fieldValue(forKey: "t") }
        #expect(read == dates.map { .date($0) }, "\(text)")
    }

    @Test("a date too far out to hold its millisecond is not written as ISO 8601 text, which would read back as another date")
    func beyondExpandedYears() {
        #expect(ISO8601Timestamp.text(for: Date(timeIntervalSinceReferenceDate: 1e300)) == nil)
        #expect(ISO8601Timestamp.text(for: Date(timeIntervalSince1970: 40_000_000_000_000)) == nil, "year 1,269,000")
        #expect(ISO8601Timestamp.date("+999999-12-31T23:59:59.999Z".utf8) == nil, "past 2^53 milliseconds: not this instant")
    }
}
