import Foundation
import Stratus
import StratusTransfer
import Testing

/// The reader builds a record's fields from the shape of the record before when it has the
/// same field names in the same order; these records change shape every way a file can.
@Suite("Reading many records whose field names repeat or change")
struct ReaderShapeTests {
    static let lines = [
        #"{"recordName":"r1","recordType":"T","fields":{"a":{"value":1},"b":{"value":"x"}}}"#,
        #"{"recordName":"r2","recordType":"T","fields":{"a":{"value":2},"b":{"value":"y"}}}"#,
        #"{"recordName":"r3","recordType":"T","fields":{"b":{"value":"z"},"a":{"value":3}}}"#,
        #"{"recordName":"r4","recordType":"T","fields":{"a":{"value":4}}}"#,
        #"{"recordName":"r5","recordType":"T","fields":{"a":{"value":5},"b":{"value":"w"},"c":{"value":1.5}}}"#,
        #"{"recordName":"r6","recordType":"T","fields":{"a":{"value":6},"b":{"value":null},"c":{"value":2.5}}}"#,
        #"{"recordName":"r7","recordType":"T","fields":{"a":{"value":7},"b":{"value":"v"},"c":{"value":3.5}}}"#,
        #"{"recordName":"r8","recordType":"T","fields":{"a":{"value":8},"\u0062":{"value":"u"},"c":{"value":4.5}}}"#,
        #"{"recordName":"r9","recordType":"T","fields":{"a":{"value":9},"b":{"value":"t"},"c":{"value":"bad","type":"DOUBLE"}}}"#,
        #"{"recordName":"r10","recordType":"T","fields":{"a":{"value":10},"x":{"value":"s"},"c":{"value":5.5}}}"#,
        #"{"recordName":"r10b","recordType":"T","fields":{"a":{"value":10},"x":{"value":"s"},"c":{"value":"bad","type":"DOUBLE"}}}"#,
        #"{"recordName":"r10c","recordType":"T","fields":{"a":{"value":16},"x":{"value":"o"},"c":{"value":10.5}}}"#,
        #"{"recordName":"r11","recordType":"T","fields":{"a":{"value":11},"x":{"value":"r"},"c":{"value":6.5}}}"#,
        #"{"recordName":"r11b","recordType":"T","fields":{"a":{"value":11},"y":{"value":"r"},"c":{"value":"bad","type":"DOUBLE"}}}"#,
        #"{"recordName":"r11c","recordType":"T","fields":{"a":{"value":11},"y":{"value":"r"},"c":{"value":6.5}}}"#,
        #"{"recordName":"r12","recordType":"T","fields":{"a":{"value":12},"a":{"value":13},"c":{"value":7.5}}}"#,
        #"{"recordName":"r13","recordType":"T","fields":{"a":{"value":14},"x":{"value":"q"},"c":{"value":8.5}}}"#,
        #"{"recordName":"r14","recordType":"T","fields":{}}"#,
        #"{"recordName":"r15","recordType":"T","fields":{"a":{"value":15},"x":{"value":"p"},"c":{"value":9.5}}}"#,
    ]

    /// What a record read alone gives: its fields and the keys it removes, or its rejection.
    static func alone(_ line: String) throws -> String {
        describe(try readAll(line).first!)
    }

    static func describe(_ item: RecordReadResult) -> String {
        if let rejection = item.rejection { return "rejected: \(rejection.message)" }
        guard let record = item.record else { return "other" }
        let fields = record.allKeys().sorted().map { key in "\(key)=\(record.fieldValue(forKey: key).map { "\($0)" } ?? "none")" }
        return record.recordID.recordName + " " + fields.joined(separator: ",") + " changed:" + record.changedKeys().sorted().joined(separator: ",")
    }

    @Test("each record reads as it does alone, whatever the records before it")
    func sameAsAlone() throws {
        let together = try readAll(Self.lines.joined(separator: "\n")).map(Self.describe)
        #expect(together.count == Self.lines.count)
        for (line, read) in zip(Self.lines, together) {
            #expect(read == (try Self.alone(line)), "\(line)")
        }
        // The same records once more, after every other record: each shape meets every other.
        let shuffled = Self.lines.indices.flatMap { [Self.lines[$0], Self.lines[(($0 * 7) + 3) % Self.lines.count]] }
        for (line, read) in zip(shuffled, try readAll(shuffled.joined(separator: "\n")).map(Self.describe)) {
            #expect(read == (try Self.alone(line)), "\(line)")
        }
        #expect(together[5].contains("changed:a,b,c") && !together[5].contains("b="), "a null field is a removal")
        #expect(together[15].hasPrefix("rejected:") && together[15].contains("appears twice"))
        #expect(together[14].contains("y=") && !together[14].contains("x="), "a record after one that failed with new names reads its own names")
        #expect(together[10].hasPrefix("rejected:") && together[11].contains("a=int64(16)") && together[11].contains(#"x=string("o")"#), "a record on the shape after one that failed on it")
    }
}
