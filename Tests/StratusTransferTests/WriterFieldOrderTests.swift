import Foundation
import Stratus
import StratusTransfer
import Testing

/// The JSON writer reuses the key order of the record before; every record must still come
/// out with its own fields sorted, whatever the record before had.
@Suite("Writer field order")
struct WriterFieldOrderTests {
    static func record(_ name: String, _ fields: [String: FieldValue]) -> Record {
        storedRecord("T", name, fields, tag: nil, created: nil, modified: nil)
    }

    /// The `"fields"` object of a written line, as text.
    static func fieldsText(_ line: Substring) -> Substring {
        let start = line.range(of: "\"fields\":")!.upperBound
        let end = line.range(of: ",\"created\":")!.lowerBound
        return line[start..<end]
    }

    @Test("same keys, other keys and as many other keys each come out sorted")
    func shapes() throws {
        let records = [
            Self.record("a", ["b": .int64(1), "a": .string("x"), "c": .double(1.5)]),
            Self.record("b", ["c": .double(2.5), "b": .int64(2), "a": .string("y")]),
            Self.record("c", ["d": .int64(3), "b": .int64(3), "a": .string("z")]),
            Self.record("d", ["a": .string("w")]),
            Self.record("e", [:]),
            Self.record("f", ["z": .int64(1), "y": .int64(2), "x": .int64(3), "w": .int64(4)]),
            Self.record("g", ["w": .int64(5), "x": .int64(6), "y": .int64(7), "z": .int64(8)]),
            Self.record("h", ["é": .string("nfc"), "e": .int64(1)]),
        ]
        let text = String(decoding: try written(records, format: .ndjson), as: UTF8.self)
        let lines = text.split(separator: "\n")
        #expect(lines.count == records.count)
        for (line, record) in zip(lines, records) {
            #expect(Self.fieldsText(line) == Self.fieldsText(Substring(RecordJSONWriter.json(for: record))), "\(record.recordID.recordName)")
            let keys = record.allKeys()
            var at = line.startIndex
            for key in keys {
                let found = try #require(line.range(of: "\"\(key)\":{\"value\"", range: at..<line.endIndex), "\(key) in \(line)")
                at = found.upperBound
            }
        }
        #expect(Self.fieldsText(lines[1]) == #"{"a":{"value":"y","type":"STRING"},"b":{"value":2,"type":"INT64"},"c":{"value":2.5,"type":"DOUBLE"}}"#)
        #expect(Self.fieldsText(lines[4]) == "{}")
        #expect(Self.fieldsText(lines[6]) == #"{"w":{"value":5,"type":"INT64"},"x":{"value":6,"type":"INT64"},"y":{"value":7,"type":"INT64"},"z":{"value":8,"type":"INT64"}}"#)
    }

    @Test("a record refused in a reused order names its first bad field in key order, and nothing of it is written")
    func problems() throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("stratus-writer-order-\(getpid()).ndjson")
        _ = FileManager.default.createFile(atPath: url.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: url) }
        let handle = try FileHandle(forWritingTo: url)
        let writer = RecordWriter(format: .ndjson, output: handle)
        let fine = Self.record("fine", ["m": .double(1), "n": .double(2), "o": .double(3)])
        try writer.write(fine)
        let bad = Self.record("bad", ["o": .double(.infinity), "n": .double(.nan), "m": .double(1)])
        do {
            try writer.write(bad)
            Issue.record("a non-finite number must be refused")
        } catch let error as StratusError {
            #expect(error.code == .invalidArguments)
            #expect(error.message.contains("field 'n'"))
        }
        try writer.write(Self.record("after", ["o": .double(6), "n": .double(5), "m": .double(4)]))
        try writer.finish()
        try handle.close()
        let lines = String(decoding: try Data(contentsOf: url), as: UTF8.self).split(separator: "\n")
        #expect(lines.count == 2)
        #expect(Self.fieldsText(lines[1]) == #"{"m":{"value":4.0,"type":"DOUBLE"},"n":{"value":5.0,"type":"DOUBLE"},"o":{"value":6.0,"type":"DOUBLE"}}"#)
    }
}
