import Foundation
import Stratus
import StratusTransfer
import Testing

/// One bad NDJSON line: where the error must point (the first occurrence of `at`) and what the
/// message must say.
struct BadLine: CustomStringConvertible, Sendable {
    let fields: String
    let at: String
    let message: String
    /// Characters between the first occurrence of `at` and the error.
    var plus = 0
    var head = #"{"recordName":"r1","recordType":"T","fields":{"#
    var tail = "}}"

    init(_ fields: String, at: String, _ message: String) {
        self.fields = fields
        self.at = at
        self.message = message
    }

    init(line: String, at: String, _ message: String, plus: Int = 0) {
        self.fields = line
        self.at = at
        self.message = message
        self.plus = plus
        head = ""
        tail = ""
    }

    var line: String { head + fields + tail }
    var description: String { line }
}

@Suite("Rejections: each bad item with its line, column and reason")
struct RejectionTests {
    static let badLines: [BadLine] = [
        BadLine(#""n":{"value":1.5,"type":"INT64"}"#, at: "1.5", "field 'n': INT64 value 1.5 is not an integer"),
        BadLine(#""n":{"value":9223372036854775808,"type":"INT64"}"#, at: "9223", "field 'n': INT64 value 9223372036854775808 is out of range"),
        BadLine(#""n":{"value":-9223372036854775809}"#, at: "-9223", "is out of range"),
        BadLine(#""n":{"value":012,"type":"INT64"}"#, at: "012", "leading zeros are not allowed"),
        BadLine(#""n":{"value":1.,"type":"DOUBLE"}"#, at: "1.,", "digits must follow the decimal point"),
        BadLine(#""n":{"value":-,"type":"DOUBLE"}"#, at: "-,", "digits must follow the sign"),
        BadLine(#""n":{"value":1e,"type":"DOUBLE"}"#, at: "1e,", "digits must follow the exponent"),
        BadLine(#""n":{"value":0x1F,"type":"INT64"}"#, at: "0x1F", "is not a valid number"),
        BadLine(#""n":{"value":NaN,"type":"DOUBLE"}"#, at: "NaN", "'NaN' is not a JSON value: NaN and infinities are no JSON numbers, and a store keeps finite numbers only"),
        BadLine(#""n":{"value":Infinity}"#, at: "Infinity", "'Infinity' is not a JSON value: NaN and infinities are no JSON numbers"),
        BadLine(#""n":{"value":-Infinity,"type":"DOUBLE"}"#, at: "-Infinity", "'-Infinity' is not a valid number: NaN and infinities are no JSON numbers"),
        BadLine(#""n":{"value":"-Infinity","type":"DOUBLE"}"#, at: #""-Infinity"#, "DOUBLE value is the string '-Infinity': NaN and infinities are no JSON numbers"),
        BadLine(#""n":{"value":["1.5","NaN"],"type":"DOUBLE_LIST"}"#, at: #""NaN"#, "element 2 is the string 'NaN': NaN and infinities"),
        BadLine(#""n":{"value":-abc}"#, at: "-abc", "digits must follow the sign"),
        BadLine(#""n":{"value":1e400,"type":"DOUBLE"}"#, at: "1e400", "field 'n': DOUBLE value 1e400 is too large for a double"),
        BadLine(#""n":{"value":"12a","type":"INT64"}"#, at: #""12a""#, "field 'n': INT64 value must be an integer, not a string that is not a number"),
        BadLine(#""n":{"value":12,"type":"STRING"}"#, at: "12,", "field 'n': STRING value must be a string, not a number"),
        BadLine(#""n":{"value":1e30,"type":"TIMESTAMP"}"#, at: "1e30", "field 'n': TIMESTAMP value 1e30 is out of range: a whole number of milliseconds beyond 64 bits"),
        BadLine(#""n":{"value":1234567890123456789012345678901234567890,"type":"TIMESTAMP"}"#, at: "1234", "beyond 64 bits, which a date does not hold exactly"),
        BadLine(#""n":{"value":-99999999999999999999999,"type":"TIMESTAMP"}"#, at: "-9999", "beyond 64 bits"),
        BadLine(#""n":{"value":"1e30","type":"TIMESTAMP"}"#, at: "1e30", "beyond 64 bits"),
        BadLine(#""n":{"value":{"latitude":1,"longitude":2,"timestamp":1e30},"type":"LOCATION"}"#, at: "1e30", "has a timestamp 1e30 that is out of range: a whole number of milliseconds beyond 64 bits"),
        BadLine(#""n":{"value":1e-400,"type":"DOUBLE"}"#, at: "1e-400", "field 'n': DOUBLE value 1e-400 is too small for a double: it would be stored as 0"),
        BadLine(#""n":{"value":-2.5E-999}"#, at: "-2.5", "is too small for a double: it would be stored as 0"),
        BadLine(#""n":{"value":[1.5,1e-400],"type":"DOUBLE_LIST"}"#, at: "1e-400", "is too small for a double"),
        BadLine(#""n":{"value":{"latitude":1e-400,"longitude":2},"type":"LOCATION"}"#, at: "1e-400", "has 'latitude' 1e-400, which is too small for a double"),
        BadLine(#""n":{"value":"2024-01-01","type":"TIMESTAMP"}"#, at: #""2024"#, "is not an ISO 8601 date-time with a zone (2024-03-01T12:00:00Z), nor a number of milliseconds since 1970"),
        BadLine(#""n":{"value":"2024-01-01T09:30:00","type":"TIMESTAMP"}"#, at: #""2024"#, "is not an ISO 8601 date-time with a zone"),
        BadLine(#""n":{"value":true,"type":"TIMESTAMP"}"#, at: "true", "must be a number of milliseconds since 1970 or an ISO 8601 date-time, not"),
        BadLine(#""n":{"value":"not base64!","type":"BYTES"}"#, at: #""not"#, "field 'n': BYTES value is not valid base64"),
        BadLine(#""n":{"value":"QQ=","type":"BYTES"}"#, at: #""QQ="#, "is not valid base64"),
        BadLine(#""n":{"value":{"recordName":"x","action":"CASCADE"},"type":"REFERENCE"}"#, at: #""CASCADE"#, "action 'CASCADE'"),
        BadLine(#""n":{"value":{"recordName":"","action":"NONE"},"type":"REFERENCE"}"#, at: #""""#, "names a bad record"),
        BadLine(line: #"{"recordName":"r1","recordType":"T","zoneID":{"zoneName":"Z"},"fields":{"n":{"value":{"recordName":"x","zoneID":{"zoneName":"Other"}},"type":"REFERENCE"}}}"#,
                at: #"{"recordName":"x""#, "references must stay in the record's zone"),
        BadLine(#""n":{"value":{"latitude":1},"type":"LOCATION"}"#, at: #"{"latitude"#, "needs both latitude and longitude"),
        BadLine(#""n":{"value":{"size":3},"type":"ASSET"}"#, at: #"{"size"#, "has no downloadURL (a file path or CloudKit's URL) and no fileChecksum, receipt or other member of CloudKit's asset, so it names no content"),
        BadLine(#""n":{"value":[{"fileChecksum":"AQ==","size":3},{}],"type":"ASSETID_LIST"}"#, at: "{}", "element 2 has no downloadURL (a file path or CloudKit's URL) and no fileChecksum"),
        BadLine(#""n":{"value":{"size":"2048","downloadURL":"https://example.com/a"},"type":"ASSETID"}"#, at: #""2048"#, "has 'size' as a string, not a number"),
        BadLine(#""n":{"value":{"size":-1,"downloadURL":"https://example.com/a"},"type":"ASSETID"}"#, at: "-1", "has a size that is not a whole number of bytes (0 or more)"),
        BadLine(#""n":{"value":12345678901234567890123.0,"type":"DOUBLE"}"#, at: "1234", "and too large for INT64; give it as a STRING to keep every digit"),
        BadLine(#""n":{"value":{"a":1}}"#, at: #"{"a"#, "cannot tell the type of an object"),
        BadLine(#""n":{"value":["a",1]}"#, at: "1]", "element 2 is INT64 but earlier ones are STRING"),
        BadLine(#""n":{"value":[[1]]}"#, at: "[1]", "element 1 is an array"),
        BadLine(#""n":{"value":["a",null],"type":"STRING_LIST"}"#, at: "null]", "field 'n': STRING_LIST element 2 must be a string, not null"),
        BadLine(#""n":{"value":[1,2.5],"type":"INT64_LIST"}"#, at: "2.5", "field 'n': INT64_LIST element 2 (2.5) is not an integer"),
        BadLine(#""n":{"value":"x","type":"FROB"}"#, at: #""FROB""#, "type 'FROB', which this version does not know"),
        BadLine(#""n":{"value":"x","type":"ENCRYPTED_FROB"}"#, at: #""ENCRYPTED_FROB""#, "type 'ENCRYPTED_FROB', which this version does not know"),
        BadLine(#""n":{"value":"x","type":"NUMBER_STRING"}"#, at: #""NUMBER_STRING""#, "type 'NUMBER_STRING', which this version does not know"),
        BadLine(#""n":{"value":"x","type":"listType"}"#, at: #""listType""#, "type 'listType', which this version does not know"),
        BadLine(#""n":{"value":"x","type":"NUMBER_INT64"}"#, at: #""x""#, "field 'n': INT64 value must be an integer, not a string"),
        BadLine(#""n":{"value":["a"],"type":"UNKNOWN_LIST"}"#, at: #""UNKNOWN_LIST""#, "UNKNOWN_LIST but holds elements"),
        BadLine(#""n":{"value":"x","isEncrypted":"yes"}"#, at: #""yes""#, "'isEncrypted' must be true or false"),
        BadLine(#""n":{"type":"STRING"}"#, at: #""n""#, "field 'n' has no 'value'"),
        BadLine(#""n":{"value":1,"value":2}"#, at: #""value":2"#, "has the key 'value' twice"),
        BadLine(#""n":{"value":"eA","type":"BYTES","isEncrypted":true,"isEncrypted":false}"#, at: #""isEncrypted":false"#, "has the key 'isEncrypted' twice"),
        BadLine(#""n":"plain""#, at: #""plain""#, "must be an object like"),
        BadLine(#""n":{"value":1},"n":{"value":2}"#, at: #""n":{"value":2"#, "field 'n' appears twice"),
        // Past 32 members Stratus does not know, a repeated one is found through a set.
        BadLine(line: #"{"recordName":"r1","recordType":"T","fields":{},"# + (0..<40).map { #""k\#($0)":1"# }.joined(separator: ",") + #","k3":2}"#,
                at: #""k3":2"#, "the key 'k3' appears twice"),
        BadLine(#""recordName":{"value":"x"}"#, at: #""recordName":{"#, "reserved for a system field"),
        BadLine(#""1st":{"value":"x"}"#, at: #""1st""#, "must start with a letter"),
        BadLine(#""n":{"value":"a\qb"}"#, at: #"\q"#, #"'\q' is not a JSON escape"#),
        // Stratus's own member names a content file by its digest only (found by a data tester: other names were dropped unseen).
        BadLine(#""f":{"type":"ASSETID","value":{"downloadURL":"https://x/y","stratusContentFile":"../../etc/passwd","size":6}}"#, at: #""../../etc/passwd""#, "names no content file"),
        BadLine(#""f":{"type":"ASSETID","value":{"downloadURL":"https://x/y","stratusContentFile":"ok.txt"}}"#, at: #""ok.txt""#, "names no content file"),
        BadLine(#""n":{"value":"a\ud800b"}"#, at: #"\ud800"#, "high surrogate without its low surrogate"),
        BadLine(#""n":{"value":"a\udc00b"}"#, at: #"\udc00"#, "low surrogate without a high surrogate"),
        BadLine(#""n":{"value":"a\u12"}"#, at: #"\u12"#, "four hex digits"),
        BadLine("\"n\":{\"value\":\"tab\there\"}", at: "\t", "raw control character"),
        BadLine(#""n":{"value":"#, at: "", "the string is not closed").truncatedAfterValue(),
        BadLine(line: #"{"recordName":"_system","recordType":"T","fields":{}}"#, at: #""_system""#, "starts with '_', which CloudKit reserves"),
        BadLine(line: #"{"recordName":"","recordType":"T"}"#, at: #""""#, "record name is empty"),
        BadLine(line: #"{"recordName":"e1","recordType":"T","created":{"timestamp":1,"userRecordName":""}}"#, at: #""""#, "'created' userRecordName is empty", plus: 0),
        BadLine(line: #"{"recordName":"e2","recordType":"T","modified":{"timestamp":1,"userRecordName":"\u200b"}}"#, at: #""\u200b""#, "'modified' userRecordName is no user record name (record name has a non-ASCII"),
        BadLine(line: #"{"recordName":"caf\u00e9","recordType":"T"}"#, at: #""caf"#, "non-ASCII"),
        BadLine(line: #"{"recordType":"T","fields":{}}"#, at: "{", "the record has no recordName"),
        BadLine(line: #"{"recordName":"r1","fields":{}}"#, at: "{", "record has no recordType"),
        BadLine(line: #"{"recordName":"r1","recordType":"9T"}"#, at: #""9T""#, "record type '9T' must start with a letter"),
        BadLine(line: #"{"recordName":"r1","recordName":"r2","recordType":"T"}"#, at: #""recordName":"r2"#, "the key 'recordName' appears twice"),
        // A tombstone whose 'deleted' is given twice is no deletion JSON readers agree on.
        BadLine(line: #"{"recordName":"k1","deleted":false,"deleted":true}"#, at: #""deleted":true"#, "the key 'deleted' appears twice"),
        BadLine(line: #"{"recordName":"k1","deleted":true,"deleted":true}"#, at: #""deleted":true}"#, "the key 'deleted' appears twice"),
        BadLine(line: #"{"recordName":5,"recordType":"T"}"#, at: "5,", "'recordName' must be a string, not a number"),
        BadLine(line: #"{"recordName":"r1","recordType":"T","fields":[]}"#, at: "[]", "'fields' must be an object"),
        BadLine(line: #"{"recordName":"r1","recordType":"T","zoneID":{"zoneName":"_bad"}}"#, at: #""_bad""#, "zone name '_bad' starts with '_'"),
        BadLine(line: #"{"recordName":"r1","recordType":"T","zoneID":{"zoneName":"café"}}"#, at: #""caf"#, "zone name has a non-ASCII"),
        BadLine(line: #"{"recordName":"r1","recordType":"T","zoneID":{"ownerRecordName":"o"}}"#, at: #"{"ownerRecordName"#, "'zoneID' has no zoneName"),
        BadLine(line: #"{"recordName":"r1","recordType":"T","created":{"timestamp":"x"}}"#, at: #""x""#, "'created' timestamp 'x' is not an ISO 8601 date-time with a zone"),
        BadLine(line: #"{"recordName":"r1","recordType":"T","created":{"timestamp":true}}"#, at: "true", "'timestamp' must be a number"),
        BadLine(line: #"{"recordName":"r1","recordType":"T","created":{"timestamp":"1700000000000"}}"#, at: #""1700"#,
                "'created' timestamp '1700000000000' is a number written as a string; give the milliseconds since 1970 as a JSON number"),
        BadLine(line: #"{"recordsByRecordName":{"J1":{"recordName":"J1","recordType":"T","fields":{}}}}"#, at: #"{"recordsBy"#,
                "the object's 'recordsByRecordName' (CloudKit JS) holds records keyed by name"),
        // Other CloudKit Web Services bodies, saved beside answers, are named for what they are.
        BadLine(line: #"{"zoneID":{"zoneName":"_defaultZone"},"query":{"recordType":"T","filterBy":[]},"resultsLimit":5}"#, at: #"{"zoneID"#,
                "looks like a records/query request, which holds no records"),
        BadLine(line: #"{"subscriptions":[{"subscriptionID":"s1","subscriptionType":"query"}]}"#, at: #"{"subs"#, "looks like a subscriptions answer"),
        BadLine(line: #"{"userRecordName":"_9a065b60313a5937e75e03ed8e8f383d","firstName":"A"}"#, at: #"{"user"#, "looks like a user identity (users/caller)"),
        BadLine(line: #"{"recordName":"r1","recordType":"T","created":{"timestamp":"2024-03-01"}}"#, at: #""2024"#,
                "'created' timestamp '2024-03-01' is not an ISO 8601 date-time with a zone"),
        BadLine(#""n":{"value":9250000000000000001,"type":"DOUBLE"}"#, at: "9250", "and too large for INT64"),
        BadLine(line: #"{"recordName":"r1","recordType":"T","deleted":true}"#, at: "true", "is a deletion"),
        BadLine(line: #"{"recordName":"r1","recordType":"T","recordChangeTag":"x\u0000y"}"#, at: #""x"#, "'recordChangeTag' holds a control character"),
        BadLine(line: #"{"recordName":"r1","recordType":"T","created":{"timestamp":1,"userRecordName":"_u\u0000zz"}}"#, at: #""_u"#, "'created' userRecordName holds a control character"),
        // numbersAsStrings: a number too long to read is named as such, not as no number at all.
        BadLine(#""n":{"value":"1\#(String(repeating: "0", count: 1_200))","type":"INT64"}"#, at: #""1000"#, "field 'n': INT64 value is a string whose number cannot be read: a number is longer than 1000 characters"),
        BadLine(#""n":{"value":"1\#(String(repeating: "0", count: 1_200))","type":"DOUBLE"}"#, at: #""1000"#, "DOUBLE value is a string whose number cannot be read: a number is longer"),
        BadLine(#""n":{"value":"1\#(String(repeating: "0", count: 1_200))","type":"TIMESTAMP"}"#, at: #""1000"#, "TIMESTAMP value is a string whose number cannot be read: a number is longer"),
        BadLine(line: #"{"recordName":"r1","reason":"gone","serverErrorCode":"NOT_FOUND"}"#, at: #""reason""#, "CloudKit error result ('serverErrorCode' NOT_FOUND, 'reason' gone)"),
        BadLine(line: #"{"recordName":"r1","serverErrorCode":"NOT_FOUND","reason":"gone"}"#, at: #""serverErrorCode""#, "CloudKit error result ('serverErrorCode' NOT_FOUND, 'reason' gone)"),
        BadLine(line: #"{"recordName":"r1","recordType":"T","parent":"p"}"#, at: #""p""#, "'parent' must be an object with a recordName"),
        BadLine(line: #"{"recordName":"r1","recordType":"T","parent":{"recordName":"p","action":"DELETE_SELF"}}"#, at: #"{"recordName":"p""#, "the parent reference's action must be NONE"),
        BadLine(line: #"{"recordName":"r1","recordType":"T","zoneID":{"zoneName":"Y"},"parent":{"recordName":"p","zoneID":{"zoneName":"Z"}}}"#, at: #"{"recordName":"p""#, "the parent points into zone 'Z'"),
        BadLine(line: #"{"recordName":"r1","recordType":"T","parent":{"name":"p"}}"#, at: #"{"name""#, "the parent has no recordName"),
        BadLine(line: #"{"recordName":"r1","recordType":"T","zoneID":{"zoneName":"Z","ownerRecordName":"bäd"}}"#, at: #""b"#, "owner record name"),
        BadLine(line: #"{"recordName":"r1","recordType":"T"} x"#, at: "x", "unexpected 'x' after the record"),
        BadLine(line: #"{"recordName":"r1","recordType":"T"}}"#, at: "}}", "unexpected '}' after the record", plus: 1),
        BadLine(line: #"[{"recordName":"r1"}]"#, at: "[", "expected a record object, found an array"),
        BadLine(line: #""just a string""#, at: "\"", "expected a record object, found a string"),
        BadLine(line: #"{"recordName":"r1","recordType":"T","fields":{"n":{"value":1}"#, at: "", "unexpected end of the line").atEnd(),
        BadLine(line: #"{"recordName":"r1" "recordType":"T"}"#, at: #""recordType""#, "expected ',' or '}' in a record, found '\"'"),
        BadLine(line: #"{recordName:"r1"}"#, at: "recordName", "expected a key in quotes, found 'r'"),
        BadLine(line: #"{"recordName":"r1",}"#, at: "}", "expected a key in quotes, found '}'"),
        BadLine(line: #"{"recordName" "r1"}"#, at: #""r1""#, "expected ':' after a key"),
        BadLine(line: #"{"recordName":'r1'}"#, at: "'r1'", "expected a value, found '''"),
        BadLine(line: "{\"recordName\":\"r1\",\"recordType\":\"T\",\"fields\":{\"n\":{\"value\":" + String(repeating: "[", count: 70) + String(repeating: "]", count: 70) + "}}}",
                at: "[", "nesting is deeper than 64 levels", plus: 61),
    ]

    @Test("every bad NDJSON line is rejected at its own line and column; good lines around it still read")
    func ndjsonLines() throws {
        var text = ""
        var expectations: [(line: Int, bad: BadLine)] = []
        var lineNumber = 0
        for bad in Self.badLines {
            // A field of its own: a good line's `n` would type the untyped `n` of the bad lines.
            text += #"{"recordName":"good-\#(lineNumber)","recordType":"T","fields":{"good":{"value":1}}}"# + "\n"
            lineNumber += 1
            text += "\n   \n"  // blank lines are skipped but counted
            lineNumber += 2
            text += bad.line + "\n"
            lineNumber += 1
            expectations.append((lineNumber, bad))
        }
        let items = try readAll(text)
        let rejections = items.compactMap(\.rejection)
        #expect(items.compactMap(\.record).count == Self.badLines.count)
        #expect(rejections.count == Self.badLines.count)
        for (rejection, expectation) in zip(rejections, expectations) {
            let bad = expectation.bad
            #expect(rejection.line == expectation.line, "\(bad)")
            let expectedColumn = bad.at == "" ? bad.line.count + 1 : column(of: bad.at, in: bad.line) + bad.plus
            #expect(rejection.column == expectedColumn, "\(bad): \(rejection)")
            #expect(rejection.message.contains(bad.message), "\(bad): \(rejection.message)")
            #expect(rejection.description.hasPrefix("line \(expectation.line), column \(rejection.column): "))
        }
    }

    @Test("a bad first NDJSON line is rejected as any other line is: the lines after it still read")
    func badFirstLine() throws {
        let good = #"{"recordName":"good","recordType":"T","fields":{"good":{"value":1}}}"#
        // A first line that starts with `[` opens a JSON array: that is another format.
        for bad in Self.badLines where !bad.line.hasPrefix("[") {
            let items = try readAll(bad.line + "\n" + good + "\n")
            #expect(items.compactMap(\.record).map(\.recordID.recordName) == ["good"], "\(bad)")
            #expect(items.compactMap(\.rejection).map(\.line) == [1], "\(bad)")
        }
        // Broken before its end, with a blank line or a spaced record after it.
        for after in ["\n\n" + good, "\n{ \"recordName\":\"good\",\"recordType\":\"T\"}"] {
            let items = try readAll(#"{"recordName":"a","recordType":"T","# + after + "\n")
            #expect(items.compactMap(\.record).map(\.recordID.recordName) == ["good"], "\(after)")
            #expect(items.compactMap(\.rejection).map(\.line) == [1], "\(after)")
        }
        // Alone, too.
        let alone = try readAll(#"{bad"# + "\n")
        #expect(alone.compactMap(\.rejection).map(\.line) == [1] && alone.compactMap(\.record).isEmpty)
        // A pretty-printed document that is broken is still refused whole.
        #expect(throws: (any Error).self) { try readAll("{\n  \"records\" [\n") }
    }

    @Test("blank lines and spaces before the first NDJSON record count: later rejections name their own lines, and the first record's columns count its indent", arguments: ["", "\n", "\n\n  \n", "\t\r\n \n", "\u{FEFF}\n"])
    func leadingBlankLines(prefix: String) throws {
        let good = #"{"recordName":"good","recordType":"T","fields":{"good":{"value":1}}}"#
        let bad = #"{"recordName":"bad","recordType":"T","fields":{"n":{"value":1,"type":"NO_SUCH_TYPE"}}}"#
        let blankLines = prefix.unicodeScalars.filter { $0 == "\n" }.count
        let unindented = try #require(try readAll(bad + "\n").first?.rejection)
        for format in [nil, RecordFormat.ndjson] {
            let items = try readAll(prefix + good + "\n\n" + bad + "\n", format: format)
            #expect(items.compactMap(\.record).map(\.recordID.recordName) == ["good"], "\(prefix.debugDescription)")
            #expect(items.compactMap(\.rejection).map(\.line) == [blankLines + 3], "\(prefix.debugDescription), \(String(describing: format))")
            let indented = try readAll(prefix + "    " + bad + "\n", format: format)
            let rejection = try #require(indented.first?.rejection, "\(indented)")
            #expect(rejection.line == blankLines + 1 && rejection.column == unindented.column + 4, "\(prefix.debugDescription): \(rejection)")
        }
    }

    @Test("an NDJSON line of exactly the record limit reads with a CRLF ending as with LF; one byte more is rejected either way")
    func crlfAtTheLimit() throws {
        let record = #"{"recordName":"r","recordType":"T","fields":{"s":{"value":""#
        let end = #"","type":"STRING"}}}"#
        let limit = 200
        func line(_ size: Int) -> String { record + String(repeating: "x", count: size - record.utf8.count - end.utf8.count) + end }
        for ending in ["\n", "\r\n"] {
            for chunkSize in [16, 1 << 16] {
                var options = RecordReadOptions()
                options.maximumRecordSize = limit
                options.format = .ndjson
                let exact = try readFromFile(Data((line(limit) + ending + line(limit) + ending).utf8), chunkSize: chunkSize, options)
                #expect(exact.compactMap(\.record).count == 2, "\(ending.debugDescription), chunks of \(chunkSize): \(exact)")
                let over = try readFromFile(Data((line(limit + 1) + ending + line(limit) + ending).utf8), chunkSize: chunkSize, options)
                #expect(over.compactMap(\.rejection).map(\.line) == [1] && over.compactMap(\.record).count == 1, "\(ending.debugDescription), chunks of \(chunkSize): \(over)")
            }
        }
    }

    @Test("a record read from JSON and then changed is validated like any other: a bad key set later is refused")
    func changedAfterReading() throws {
        let reader = try RecordReader(data: Data(#"{"recordName":"r1","recordType":"T","fields":{"a":{"value":1,"type":"INT64"}}}"#.utf8), options: RecordReadOptions())
        let record = try #require(try reader.next()?.record)
        try record.validateForSave()
        record.setFieldValue(.int64(2), forKey: "bad key")
        #expect(throws: StratusError.self) { try record.validateForSave() }
        record.setFieldValue(nil, forKey: "bad key")
        record.setFieldValue(.int64(3), forKey: "recordName")
        #expect(throws: StratusError.self) { try record.validateForSave() }
    }

    @Test("the rejection names the record even when the problem comes before its recordName")
    func nameAfterProblem() throws {
        let items = try readAll(#"{"fields":{"n":{"value":1.5,"type":"INT64"}},"recordType":"T","recordName":"late"}"#)
        #expect(items.first?.rejection?.recordName == "late")
        #expect(items.first?.rejection?.description.contains("record 'late': field 'n'") == true)
    }

    @Test("invalid UTF-8 is rejected at the offending byte", arguments: [[0xFF], [0xC0, 0xAF], [0xE0, 0x80, 0x80], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xC3], [0x80]] as [[UInt8]])
    func invalidUTF8(bytes: [UInt8]) throws {
        let before = #"{"recordName":"r1","recordType":"T","fields":{"n":{"value":"é"#
        var data = Data(before.utf8)
        data.append(contentsOf: bytes)
        data.append(contentsOf: Array(#"x"}}}"#.utf8))
        data.append(contentsOf: Array("\n{\"recordName\":\"r2\",\"recordType\":\"T\"}\n".utf8))
        let items = try readAll(data)
        let rejection = try #require(items.first?.rejection)
        #expect(rejection.message.contains("UTF-8"))
        #expect(rejection.line == 1)
        #expect(rejection.column == before.count + 1)
        #expect(items.count == 2)
        #expect(items.last?.record?.recordID.recordName == "r2")
    }

    @Test("a broken JSON array throws with the position; a bad element that is well delimited is only rejected")
    func jsonArrays() throws {
        let text = """
            [
              {"recordName": "a", "recordType": "T", "fields": {"n": {"value": 1}}},
              {"recordName": "b", "recordType": "T", "fields": {"n": {"value": 1.5, "type": "INT64"}}},
              42,
              {"recordName": "c", "recordType": "T"}
              {"recordName": "d", "recordType": "T"}
            ]
            """
        let reader = try RecordReader(data: Data(text.utf8), options: RecordReadOptions())
        #expect(reader.detectedFormat == .json)
        #expect(try reader.next()?.record?.recordID.recordName == "a")
        let bad = try #require(try reader.next()?.rejection)
        #expect(bad.line == 3)
        #expect(bad.column == column(of: "1.5", in: "  {\"recordName\": \"b\", \"recordType\": \"T\", \"fields\": {\"n\": {\"value\": 1.5, \"type\": \"INT64\"}}},"))
        let notObject = try #require(try reader.next()?.rejection)
        #expect(notObject.line == 4 && notObject.column == 3)
        #expect(notObject.message.contains("expected a record object, found a number"))
        #expect(try reader.next()?.record?.recordID.recordName == "c")
        do {
            _ = try reader.next()
            Issue.record("a missing comma must throw")
        } catch let error as StratusError {
            #expect(error.code == .invalidArguments)
            #expect(error.line == 6 && error.column == 3)
            #expect(error.message.contains("expected ',' or ']' in the array of records, found '{'"))
            #expect(error.message.hasSuffix("(line 6, column 3)"))
        }
        // The reader stays failed.
        #expect(throws: StratusError.self) { try reader.next() }
    }

    @Test("unrecoverable input throws with a position", arguments: [
        ("[{\"recordName\":\"a\",\"recordType\":\"T\"}", 1, 37, "the input ends inside the array of records"),
        ("[{\"recordName\":\"a\",\"recordType\":\"T", 1, 33, "the string is not closed"),
        ("[1,,2]", 1, 4, "expected a value, found ','"),
        ("{\"records\": 5}", 1, 13, "'records' in the envelope must be an array"),
        ("{\"records\": [], \"continuationMarker\": 5}", 1, 39, "'continuationMarker' must be a string"),
        ("{\"records\": [], \"syncToken\": \"a\u{1}\"}", 1, 32, "raw control character"),
        ("{\"zones\": [7]}", 1, 12, "an entry of 'zones' must be an object"),
        ("{\"records\": [], \"zoneID\": {\"zoneName\": \"_9\"}}", 1, 40, "the zoneID of the envelope is not valid"),
        ("[" + String(repeating: "[", count: 80), 1, 66, "nesting is deeper than 64 levels"),  // counted from the array's element, as from an NDJSON line
        ("\n\n  x", 3, 3, "expected a record, an array of records or an envelope"),
    ] as [(String, Int, Int, String)])
    func fatal(input: String, line: Int, column: Int, message: String) throws {
        var options = RecordReadOptions()
        options.format = input.hasPrefix("\n") ? .json : nil
        do {
            let items = try readAll(Data(input.utf8), options)
            Issue.record("no error for \(input); read \(items)")
        } catch let error as StratusError {
            #expect(error.line == line, "\(input): \(error)")
            #expect(error.column == column, "\(input): \(error)")
            #expect(error.message.contains(message), "\(input): \(error)")
        }
    }

    @Test("an NDJSON line longer than the limit is rejected without holding it")
    func oversizedLine() throws {
        var options = RecordReadOptions()
        options.maximumRecordSize = 1_000
        options.readChunkSize = 100
        let long = #"{"recordName":"big","recordType":"T","fields":{"s":{"value":""# + String(repeating: "x", count: 5_000) + #""}}}"#
        let text = long + "\n" + #"{"recordName":"small","recordType":"T"}"# + "\n"
        let items = try readFromFile(Data(text.utf8), chunkSize: 100, options)
        #expect(items.count == 2)
        #expect(items[0].rejection?.message.contains("longer than the 1000-byte record limit") == true)
        #expect(items[1].record?.recordID.recordName == "small")
        #expect(items[1].line == 2)

        var arrayOptions = options
        arrayOptions.format = .json
        #expect(throws: StratusError.self) { try readFromFile(Data(("[" + long + "]").utf8), chunkSize: 100, arrayOptions) }

        // Read whole at once (a read larger than the limit), the line is still too long.
        var wholeOptions = options
        wholeOptions.readChunkSize = 100_000
        let whole = try readFromFile(Data(text.utf8), chunkSize: 100_000, wholeOptions)
        #expect(whole.count == 2 && whole[0].rejection?.message.contains("longer than the 1000-byte record limit") == true, "\(whole)")
        wholeOptions.format = .json
        #expect(throws: StratusError.self) { try readFromFile(Data(("[" + long + "]").utf8), chunkSize: 100_000, wholeOptions) }
    }
}

extension BadLine {
    /// The line ends inside the string that starts the value.
    func truncatedAfterValue() -> BadLine {
        var copy = BadLine(line: head + fields + "\"abc", at: "\"abc", message)
        copy.head = ""
        return copy
    }

    /// The error is at the end of the line.
    func atEnd() -> BadLine { self }
}
