import Foundation
import Stratus
import StratusTransfer
import Testing

/// CloudKit JS and CloudKit Web Services write a record's numbers as strings when the request
/// asks for `numbersAsStrings` (JavaScript cannot hold an INT64 beyond 2^53): such an answer
/// reads as the numbers it holds and writes back as it came.
@Suite("Numbers written as strings (numbersAsStrings)")
struct NumbersAsStringsTests {
    static let answer = #"""
        {"records":[{"recordName":"s1","recordType":"Reading","fields":{
        "count":{"value":"9007199254740993","type":"INT64"},
        "ratio":{"value":"-1.5","type":"DOUBLE"},
        "taken":{"value":"1700000000000","type":"TIMESTAMP"},
        "counts":{"value":["1","-2"],"type":"INT64_LIST"},
        "ratios":{"value":["1.25","2e3"],"type":"DOUBLE_LIST"},
        "times":{"value":["0","-86400000"],"type":"TIMESTAMP_LIST"}}}],
        "numbersAsStrings":true}
        """#

    @Test("typed values read as the numbers their strings hold")
    func readsNumbers() throws {
        let record = try #require(try readAll(Self.answer).first?.record)
        #expect(record.fieldValue(forKey: "count") == .int64(9_007_199_254_740_993))
        #expect(record.fieldValue(forKey: "ratio") == .double(-1.5))
        #expect(record.fieldValue(forKey: "taken") == .date(Date(timeIntervalSince1970: 1_700_000_000)))
        #expect(record.fieldValue(forKey: "counts") == .int64List([1, -2]))
        #expect(record.fieldValue(forKey: "ratios") == .doubleList([1.25, 2000]))
        #expect(record.fieldValue(forKey: "times") == .dateList([Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: -86_400)]))
    }

    @Test("each field is written back as it came, strings and all")
    func writesBackAsItCame() throws {
        let record = try #require(try readAll(Self.answer).first?.record)
        let written = try #require(try JSONSerialization.jsonObject(with: Data(RecordJSONWriter.json(for: record).utf8)) as? [String: Any])
        let original = try #require(((try JSONSerialization.jsonObject(with: Data(Self.answer.utf8)) as? [String: Any])?["records"] as? [[String: Any]])?.first)
        #expect(JSONValue(written["fields"] as Any) == JSONValue(original["fields"] as Any), "\(RecordJSONWriter.json(for: record))")
    }

    @Test("a string that is not only a number is still refused, naming the field", arguments: [
        #""12a""#, #""""#, #"" 1""#, #""1 ""#, #""0x10""#, #""\u0031""#, #""+1""#,
    ])
    func refusesOtherStrings(value: String) throws {
        for type in ["INT64", "DOUBLE"] {
            let line = #"{"recordName":"s","recordType":"T","fields":{"n":{"value":"# + value + #","type":""# + type + #""}}}"#
            let item = try #require(try readAll(line).first)
            let message = try #require(item.rejection?.message, "\(type) \(value) was read")
            #expect(message.contains("field 'n'"), "\(message)")
        }
    }
}
