import Foundation
import SeededRandom
import Stratus
import StratusTransfer
import Testing

/// CSV cells without a declared type, ISO 8601 timestamps, and messages that quote the cell.
@Suite("CSV typing and timestamps")
struct CSVTypingTests {
    static func read(_ text: String, type: String = "T") throws -> [RecordReadResult] {
        var options = RecordReadOptions()
        options.format = .csv
        options.csvRecordType = type
        let reader = try RecordReader(data: Data(text.utf8), options: options)
        var items: [RecordReadResult] = []
        while let item = try reader.next() { items.append(item) }
        return items
    }

    @Test("untyped cells are inferred as the JSON reader infers: integers that fit 64 bits, other numbers, else text; quoted cells are text")
    func inference() throws {
        let items = try Self.read("recordName,v\na,3\nb,-0\nc,1.5\nd,1e3\ne,007\nf,+1\ng,.5\nh,NaN\ni,12345678901234567890\nj,\"42\"\nk,high\nl, 8 \n")
        let values = items.map { $0.record?.fieldValue(forKey: "v") }
        #expect(values == [
            .int64(3), .int64(0), .double(1.5), .double(1_000), .string("007"), .string("+1"), .string(".5"), .string("NaN"),
            .string("12345678901234567890"), .string("42"), .string("high"), .int64(8),
        ])
    }

    @Test("TIMESTAMP cells take milliseconds or ISO 8601 with a zone, or a date")
    func iso8601Cells() throws {
        let text = """
            recordName,t:TIMESTAMP
            a,1704067200123
            b,2024-01-01T00:00:00.123Z
            c,2024-01-01T01:00:00.123+01:00
            d,2024-01-01 00:00:00.123z
            e,2024-01-01
            f,2023-12-31T19:00:00.123-0500

            """
        let dates = try Self.read(text).map { $0.record?.fieldValue(forKey: "t") }
        // As the reader makes it from milliseconds: exact operands, one rounding.
        let expected = FieldValue.date(Date(timeIntervalSinceReferenceDate: Double(1_704_067_200_123 - 978_307_200_000) / 1_000))
        #expect(dates[0] == expected)
        #expect(dates.dropFirst().filter { $0 != nil }.count == 5)
        #expect(dates[1] == dates[0] && dates[2] == dates[0] && dates[3] == dates[0] && dates[5] == dates[0])
        #expect(dates[4] == .date(Date(timeIntervalSince1970: 1_704_067_200)))
    }

    @Test("a bad cell's message quotes the whole cell and names the format it should have", arguments: [
        ("n:INT64", "high", "field 'n': INT64 cell 'high' is not a whole number"),
        ("n:INT64", "99999999999999999999", "'99999999999999999999' is not a whole number in the 64-bit range"),
        ("n:DOUBLE", "1,5", "DOUBLE cell '1,5' is not a number"),
        ("n:TIMESTAMP", "2024-01-01T00", "TIMESTAMP cell '2024-01-01T00' is neither milliseconds since 1970 nor an ISO 8601 date-time"),
        ("n:TIMESTAMP", "2024-01-01T09:30:00", "'2024-01-01T09:30:00' is neither"),
        ("n:TIMESTAMP", "2024-02-30", "'2024-02-30' is neither"),
        ("n:STRING_LIST", "high", "STRING_LIST cell 'high' is not a JSON array"),
    ] as [(String, String, String)])
    func messages(header: String, cell: String, message: String) throws {
        let items = try Self.read("recordName,\(header)\na,\"\(cell)\"\n")
        let rejection = try #require(items.first?.rejection, "\(cell)")
        #expect(rejection.message.contains(message), "\(rejection.message)")
    }

    @Test("ISO 8601 timestamps written by the writer read back as the very same dates, before and after 1970")
    func iso8601RoundTrip() throws {
        var random = SeededGenerator(seed: 8601)
        var records: [Record] = []
        for i in 0..<500 {
            let seconds: Double = switch i % 4 {
            case 0: Double(Int64.random(in: -62_000_000_000...250_000_000_000, using: &random)) / 1_000
            case 1: Double.random(in: -2_000_000_000...4_000_000_000, using: &random)
            case 2: Double(Int.random(in: -100_000...100_000, using: &random)) / 1_000 + 0.000_25
            default: Double(Int.random(in: -10...10, using: &random))
            }
            let record = Record(recordType: "T", recordID: Record.ID(recordName: "r\(i)"))
            record.setFieldValue(.date(Date(timeIntervalSince1970: seconds)), forKey: "t")
            records.append(record)
        }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("iso-\(UUID().uuidString).csv").path
        #expect(FileManager.default.createFile(atPath: path, contents: nil))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let handle = try #require(FileHandle(forWritingAtPath: path))
        let writer = RecordWriter(format: .csv, output: handle, csvFields: ["t"])
        writer.csvSystemColumns = false
        writer.csvTypes = ["t": .timestamp]
        writer.csvTimestampStyle = .iso8601
        for record in records { try writer.write(record) }
        try writer.finish()
        try handle.close()
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text.contains("T") && text.contains("Z\n"), "written as ISO 8601")
        let read = try Self.read(text).map { $0.record?.fieldValue(forKey: "t") }
        let written = records.map { $0.fieldValue(forKey: "t") }
        let mismatches = zip(read, written).enumerated().filter { $0.element.0 != $0.element.1 }.prefix(3).map { item in
            "\(text.split(separator: "\n")[item.offset + 1]): \(item.element.1.map { "\($0)" } ?? "nil") read back as \(item.element.0.map { "\($0)" } ?? "nil")"
        }
        #expect(read.count == written.count && mismatches.isEmpty, "\(mismatches)")
    }
}
