import Foundation
import Stratus
import StratusTransfer
import Testing

/// A resumed import passes the items its checkpoint settled with `skipItems(_:)`: whatever it
/// passes, the items after it must be exactly those a reader that read everything answers.
@Suite("RecordReader.skipItems")
struct SkipItemsTests {
    /// Each item as text that tells items apart: its kind, line, column and name.
    static func describe(_ item: RecordSourceItem) -> String {
        switch item {
        case .record(let record, let line):
            "record \(record.recordID.recordName) line \(line): " + record.fieldValues.keys.sorted().map { key in
                "\(key) \(record.encryptedKeys.contains(key) ? "encrypted " : "")\(record.fieldValues[key]!.type.rawValue) \(record.fieldValues[key]!)"
            }.joined(separator: ", ")
        case .deletion(let id, _, let line): "deletion \(id.recordName) line \(line)"
        case .rejected(let rejection): "rejected \(rejection)"
        }
    }

    static func items(after skipped: Int, of data: Data, _ options: RecordReadOptions) throws -> (passed: Int, rest: [String]) {
        let reader = try RecordReader(data: data, options: options)
        let passed = try reader.skipItems(skipped)
        var rest: [String] = []
        while let item = try reader.nextItem() { rest.append(describe(item)) }
        return (passed, rest)
    }

    static func check(_ text: String, configure: (inout RecordReadOptions) -> Void = { _ in }) throws {
        var options = RecordReadOptions()
        options.generatedNameSeed = "skip"
        configure(&options)
        let data = Data(text.utf8)
        let all = try items(after: 0, of: data, options).rest
        #expect(!all.isEmpty)
        for skipped in 0...all.count + 2 {
            let (passed, rest) = try items(after: skipped, of: data, options)
            #expect(passed == min(skipped, all.count), "skipping \(skipped) of \(all.count)")
            #expect(rest == Array(all.dropFirst(skipped)), "skipping \(skipped)")
        }
    }

    static let awkwardLines = [
        "",
        "   \t",
        #"{"recordName":"a","recordType":"Note","fields":{"title":{"value":"one"}}}"#,
        "\r",
        #"{"recordName":"b","recordType":"Note","fields":{}}"# + "\r",
        "not json",
        "[1, 2]",
        #"  {"recordName":"c","recordType":"Note","fields":{"n":{"value":"x","type":"INT64"}}}"#,
        #"{"recordName":"d","recordType":"Note","deleted":true}"#,
        "\t\t",
        #"{"recordName":"e","recordType":"Note","fields":{"title":{"value":""# + String(repeating: "long ", count: 60) + #""}}}"#,
        String(repeating: " ", count: 300),
        #"{"recordName":"f","recordType":"Note","fields":{}}"#,
    ]

    @Test("NDJSON: blank lines, spaces, CRLF, bad lines, deletions, lines over the record limit (of text or of spaces alone) and a last line without a line break are passed as reading them would")
    func ndjsonLinesPassLikeReadOnes() throws {
        for last in [#"{"recordName":"z","recordType":"Note","fields":{}}"#, "  ", ""] {
            let text = Self.awkwardLines.joined(separator: "\n") + "\n" + last
            // Small reads make lines straddle the buffer's refills; a small record limit makes two
            // lines too long, one of them spaces only.
            try Self.check(text) { $0.readChunkSize = 7; $0.maximumRecordSize = 200 }
            try Self.check(text)
        }
        try Self.check("\n\n" + #"{"recordName":"a","recordType":"Note","fields":{}}"# + "\r\n\r\n")
    }

    @Test("NDJSON: a skipped line that declares a field's type (given, inferred or encrypted) declares it for the values without a type after it, as a full read does (found by a reviewer)")
    func skippedLinesStillDeclareTypes() throws {
        let lines = [
            #"{"recordName":"t1","recordType":"Note","fields":{"at":{"value":1735689600000,"type":"TIMESTAMP"},"n":{"value":5}}}"#,
            #"{"recordName":"t2","recordType":"Note","fields":{"at":{"value":1735689600000,"type":"TIMESTAMP"},"n":{"value":6}}}"#,
            #"{"recordName":"t3","recordType":"Note","fields":{"secret":{"value":"x","type":"ENCRYPTED_STRING"}}}"#,
            #"{"recordName":"o1","recordType":"Other","fields":{"n":{"value":5.5}}}"#,
            #"{"recordName":"t4","recordType":"Note","fields":{"at":{"value":1735689600000},"n":{"value":5.5},"secret":{"value":"y"}}}"#,
            #"{"recordName":"o2","recordType":"Other","fields":{"n":{"value":7}}}"#,
            #"{"recordName":"t5","recordType":"Note","fields":{"tags":{"value":[]}}}"#,
            #"{"recordName":"t6","recordType":"Note","fields":{"tags":{"value":["a"]}}}"#,
            #"{"recordName":"t7","recordType":"Note","fields":{"tags":{"value":[]},"at":{"value":1}}}"#,
        ]
        try Self.check(lines.joined(separator: "\n") + "\n")
        try Self.check(lines.joined(separator: "\n") + "\n") { $0.readChunkSize = 16 }
    }

    @Test("JSON arrays, envelopes and CSV pass their items by reading them")
    func otherFormatsPassByReading() throws {
        try Self.check(#"[{"recordName":"a","recordType":"Note","fields":{}}, {"recordType":"Note"}, 7, {"recordName":"c","recordType":"Note","fields":{}}]"#)
        try Self.check(#"{"records":[{"recordName":"a","recordType":"Note","fields":{}},{"recordName":"b","recordType":"Note","fields":{}}],"zoneID":{"zoneName":"Z"}}"#)
        try Self.check("recordName,recordType,title\na,Note,one\nb,Note,\"two\nlines\"\n,Note,three\nd,Note,four\n")
    }

    @Test("an envelope without records still fails at its end, when skipping reaches it")
    func envelopeWithoutRecordsFailsWhenPassed() throws {
        let reader = try RecordReader(data: Data(#"{"zones":[]}"#.utf8), options: RecordReadOptions())
        #expect(throws: StratusError.self) { _ = try reader.skipItems(5) }
    }
}
