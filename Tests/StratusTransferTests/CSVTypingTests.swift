import Foundation
import SeededRandom
import Stratus
import StratusTransfer
import Testing

/// CSV cells without a declared type, ISO 8601 timestamps, and messages that quote the cell.
@Suite("CSV typing and timestamps")
struct CSVTypingTests {
    static func read(_ text: String, type: String? = "T") throws -> [RecordReadResult] {
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
        let cells = ["3", "-0", "1.5", "1e3", "007", "+1", ".5", "NaN", "12345678901234567890", "\"42\"", "high", " 8 "]
        let header = "recordName," + cells.indices.map { "v\($0)" }.joined(separator: ",")
        let items = try Self.read(header + "\na," + cells.joined(separator: ",") + "\n")
        let record = try #require(items.first?.record)
        #expect(cells.indices.map { record.fieldValue(forKey: "v\($0)") } == [
            .int64(3), .int64(0), .double(1.5), .double(1_000), .string("007"), .string("+1"), .string(".5"), .string("NaN"),
            .string("12345678901234567890"), .string("42"), .string("high"), .int64(8),
        ])
    }

    @Test("an untyped column takes the type of the first value the input gives it, per record type, as record JSON does; a later cell that does not fit says how to type the column")
    func firstValueTypesTheColumn() throws {
        let zip = try Self.read("recordName,zip\na,02134\nb,10001\nc,\n")
        #expect(zip.map { $0.record?.fieldValue(forKey: "zip") } == [.string("02134"), .string("10001"), nil], "a ZIP code with a leading zero makes the column text")
        let mixed = try Self.read("recordName,recordType,n\na,A,5\nb,B,x\nc,A,7\nd,B,8\n", type: nil)
        #expect(mixed.map { $0.record?.fieldValue(forKey: "n") } == [.int64(5), .string("x"), .int64(7), .string("8")], "each record type has its own first value")
        let prices = try Self.read("recordName,price\na,10\nb,9.99\n")
        #expect(prices.first?.record?.fieldValue(forKey: "price") == .int64(10))
        let refused = try #require(prices.last?.rejection)
        #expect(refused.line == 3 && refused.message.contains("the input's first value in it made it INT64: give its type (--types price:TYPE"), "\(refused)")
        // A row that is rejected declares nothing.
        let afterReject = try Self.read("recordName,recordType,n,d:TIMESTAMP\nx,U,1,bad\ny,U,1.5,0\n", type: nil)
        #expect(afterReject.first?.rejection != nil && afterReject.last?.record?.fieldValue(forKey: "n") == .double(1.5), "\(afterReject)")
        let typed = try Self.read("recordName,price:DOUBLE\na,10\nb,9.99\n")
        #expect(typed.map { $0.record?.fieldValue(forKey: "price") } == [.double(10), .double(9.99)])
    }

    @Test("a given record type fills empty recordType cells and rejects rows of another; a type given for a column the header lacks stops the read at the header")
    func headerConflicts() throws {
        let rows = try Self.read("recordName,recordType,t\nq1,,a\nq2,Other,b\nq3,T,c\n")
        #expect(rows.map { $0.record?.recordType } == ["T", nil, "T"])
        let other = try #require(rows[1].rejection)
        #expect(other.line == 3 && other.recordName == "q2" && other.message.contains("the row's recordType is Other, but the rows were given the type T (--type)"), "\(other)")
        var options = RecordReadOptions()
        options.format = .csv
        options.csvRecordType = "Contact"
        options.csvTypes = ["prcie": .double, "recordType": .string]
        do {
            let reader = try RecordReader(data: Data("recordName,price\na,1\n".utf8), options: options)
            _ = try reader.next()
            Issue.record("a type for a column the header lacks was accepted")
        } catch let error as StratusError {
            #expect(error.message.contains("a column type is given for 'prcie', which is not a column of the header"), "\(error.message)")
        }
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
        ("n:TIMESTAMP", "2024-01-01T09:30:00", "'2024-01-01T09:30:00' is a date-time without a zone; add one (2024-01-01T09:30:00Z for UTC"),
        ("n:TIMESTAMP", "2024-01-01T09:30:00.25", "is a date-time without a zone"),
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
