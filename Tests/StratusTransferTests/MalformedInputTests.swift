import Foundation
import SeededRandom
import Stratus
import StratusTransfer
import Testing

/// Feeds the readers broken input: they must never crash or hang, and every problem must come
/// back with a position (a rejection, or a thrown error carrying line and column).
@Suite("Malformed input")
struct MalformedInputTests {
    /// Valid documents of every format to start mutating from.
    static let seeds: [(RecordFormat, Data)] = {
        let records = Samples.records() + [
            storedRecord("Item", "item-1", ["title": .string("Milk"), "count": .int64(3), "price": .double(1.25), "when": .date(Date(timeIntervalSince1970: 1_700_000_000))]),
            storedRecord("Item", "item-2", ["title": .string("Grüße 👍"), "tags": .stringList(["a", "b"])], tag: nil),
        ]
        var seeds: [(RecordFormat, Data)] = []
        for format in [RecordFormat.ndjson, .json, .envelope] {
            seeds.append((format, (try? written(records, format: format, marker: "m")) ?? Data()))
            seeds.append((format, (try? written(Array(records.suffix(2)), format: format)) ?? Data()))
        }
        let fields = Array(Samples.everyValue().keys.sorted()) + ["title", "n", "count", "price", "when", "tags"]
        let types: [String: FieldType] = ["title": .string, "n": .int64, "count": .int64, "price": .double, "when": .timestamp, "tags": .stringList]
        seeds.append((.csv, (try? written(records, format: .csv, csvFields: fields) { $0.csvTypes = types }) ?? Data()))
        seeds.append((.csv, Data("recordName,recordType,n:INT64,s\na,T,1,\"x,\"\"y\"\"\"\r\nb,T,2,plain\n".utf8)))
        for name in Fixtures.available ? Fixtures.names : [] {
            if let data = try? Fixtures.data(name) { seeds.append((.envelope, data)) }
        }
        return seeds
    }()

    /// Reads everything; checks that every problem has a position and that reading ends.
    @discardableResult
    static func check(_ data: Data, _ options: RecordReadOptions, chunkSize: Int? = nil, _ what: @autoclosure () -> String) -> [String] {
        var outcomes: [String] = []
        var options = options
        // Created records without a name are named alike by every read of one input.
        options.generatedNameSeed = options.generatedNameSeed ?? "malformed-input"
        let url = scratchFile()
        defer { try? FileManager.default.removeItem(at: url) }
        do {
            let reader: RecordReader
            if let chunkSize {
                // Through a file in small reads: every item boundary falls between two reads somewhere.
                try data.write(to: url)
                var options = options
                options.readChunkSize = chunkSize
                reader = try RecordReader(fileHandle: try FileHandle(forReadingFrom: url), options: options)
            } else {
                reader = try RecordReader(data: data, options: options)
            }
            var steps = 0
            while let item = try reader.next() {
                steps += 1
                if steps > data.count + 2 {
                    Issue.record("no end after \(steps) items: \(what())")
                    break
                }
                switch item {
                case .record(let record, let line):
                    #expect(line >= 1)
                    outcomes.append("record \(record.recordID.recordName) \(line)")
                case .deletion(let id, _, let line):
                    outcomes.append("deletion \(id.recordName) \(line)")
                case .rejected(let error):
                    if error.line < 1 || error.column < 1 || error.message.isEmpty {
                        Issue.record("rejection without a position: \(error) in \(what())")
                    }
                    outcomes.append("rejected \(error)")
                }
            }
        } catch let error as StratusError {
            if error.code == .invalidArguments && (error.line == nil || error.column == nil) {
                Issue.record("error without a position: \(error) in \(what())")
            }
            outcomes.append("threw \(error.message)")
        } catch {
            Issue.record("unexpected error \(error) in \(what())")
        }
        return outcomes
    }

    static func mutate(_ input: Data, _ rng: inout SeededGenerator) -> Data {
        var bytes = [UInt8](input)
        for _ in 0..<Int.random(in: 1...3, using: &rng) {
            let at = bytes.isEmpty ? 0 : Int.random(in: 0..<bytes.count, using: &rng)
            switch Int.random(in: 0..<14, using: &rng) {
            case 0: bytes.removeSubrange(at...)  // truncation
            case 1, 2: if !bytes.isEmpty { bytes[at] = UInt8.random(in: 0...255, using: &rng) }  // byte flip
            case 3: if !bytes.isEmpty { bytes[at] ^= 1 << UInt8.random(in: 0..<8, using: &rng) }
            case 4: bytes.insert(contentsOf: [[0xFF], [0xC3], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xE0, 0x80]].randomElement(using: &rng)!, at: at)
            case 5:
                let depth = Int.random(in: 60...3_000, using: &rng)
                let open: UInt8 = Bool.random(using: &rng) ? UInt8(ascii: "[") : UInt8(ascii: "{")
                bytes.insert(contentsOf: repeatElement(open, count: depth), at: at)
            case 6:
                let number = (Bool.random(using: &rng) ? "-" : "") + String(repeating: "9", count: Int.random(in: 19...400, using: &rng))
                    + [".5", "e999999999", "e-400", "", "E+20"].randomElement(using: &rng)!
                bytes.insert(contentsOf: Array(number.utf8), at: at)
            case 7:
                let giant = "\"" + String(repeating: "ab\\u00e9", count: Int.random(in: 1_000...20_000, using: &rng)) + "\""
                bytes.insert(contentsOf: Array(giant.utf8), at: at)
            case 8:
                let junk = [",", ":", "\"", "\\", "{", "}", "[", "]", "\n", "\r", "null", "true", "NaN", "-", "0", "\u{0}", "\"\\u", "\"\\ud800\""]
                bytes.insert(contentsOf: Array(junk.randomElement(using: &rng)!.utf8), at: at)
            case 9:
                let end = min(bytes.count, at + Int.random(in: 1...40, using: &rng))
                bytes.removeSubrange(at..<end)
            case 10:
                let end = min(bytes.count, at + Int.random(in: 1...200, using: &rng))
                bytes.insert(contentsOf: Array(bytes[at..<end]), at: Int.random(in: 0...bytes.count, using: &rng))
            case 12:
                // Whitespace keeps valid input valid but moves every item against the reads.
                bytes.insert(contentsOf: Array([" ", "\n", "\r\n", "\t  \n  "].randomElement(using: &rng)!.utf8), at: Bool.random(using: &rng) ? 0 : at)
            default:
                let replacement = [#""type":"FROB""#, #""value":[[[]]]"#, #""recordName":"_x""#, #""zoneID":5"#, #""fields":{"a":{}}"#, #""deleted":true"#]
                bytes.insert(contentsOf: Array(replacement.randomElement(using: &rng)!.utf8), at: at)
            }
        }
        return Data(bytes)
    }

    @Test("randomized mutations of valid input: no crash, no hang, every problem positioned; chunked reading agrees")
    func randomized() throws {
        var rng = SeededGenerator(seed: 20_240_611)
        let cases = 12_000
        var chunkedChecks = 0
        for n in 0..<cases {
            let (format, seed) = Self.seeds[n % Self.seeds.count]
            let input = Self.mutate(seed, &rng)
            var options = RecordReadOptions()
            options.format = format == .csv || n % 2 == 0 ? format : nil
            options.csvRecordType = "T"
            let outcomes = Self.check(input, options, "case \(n) (\(format)): \(String(decoding: input.prefix(300), as: UTF8.self))")
            if n % 25 == 0 {
                // The same bytes read through a file in small chunks give the same items and errors.
                chunkedChecks += 1
                let chunk = Int.random(in: 1...97, using: &rng)
                let chunked = Self.check(input, options, chunkSize: chunk, "case \(n) chunk \(chunk)")
                #expect(chunked == outcomes, "case \(n) chunk \(chunk)")
            }
        }
        #expect(chunkedChecks >= 480)
    }

    @Test("every truncation of a record line, array and envelope is rejected or throws with a position")
    func truncations() throws {
        let record = Samples.records()[2]
        for format in [RecordFormat.ndjson, .json, .envelope, .csv] {
            let data = try written([record], format: format, csvFields: ["n"])
            for cut in 0..<data.count {
                var options = RecordReadOptions()
                options.format = format
                let outcomes = Self.check(data.prefix(cut), options, "\(format) cut at \(cut)")
                if format == .ndjson && cut > 0 && cut < data.count - 1 {
                    #expect(outcomes.count == 1 && outcomes[0].hasPrefix("rejected"), "\(format) cut at \(cut): \(outcomes)")
                }
            }
        }
    }

    @Test("every single-byte change of a record line is read without crashing")
    func byteFlips() throws {
        let line = Data(RecordJSONWriter.json(for: Samples.records()[2]).utf8)
        for at in 0..<line.count {
            for replacement: UInt8 in [0x00, 0x0A, 0x22, 0x5C, 0x7B, 0x7D, 0x5B, 0x5D, 0x2C, 0x3A, 0x30, 0x80, 0xFF] {
                var bytes = line
                bytes[at] = replacement
                Self.check(bytes, RecordReadOptions(), "byte \(at) = \(replacement)")
            }
        }
    }

    @Test("hostile inputs: deep nesting, huge numbers, giant strings, noise")
    func hostile() throws {
        let deep = String(repeating: "[", count: 200_000)
        for text in [deep, "{\"records\":" + deep, "{\"recordName\":\"a\",\"recordType\":\"T\",\"fields\":{\"f\":{\"value\":" + deep] {
            for format: RecordFormat? in [nil, .json, .envelope, .ndjson] {
                var options = RecordReadOptions()
                options.format = format
                let outcomes = Self.check(Data(text.utf8), options, "deep \(text.prefix(20)) \(String(describing: format))")
                // Given as an envelope, an array or a record is refused as no envelope first.
                let refusedAsNoEnvelope = format == .envelope && !text.hasPrefix("{\"records\"") && outcomes.first?.contains("given as an envelope") == true
                #expect(outcomes.count == 1 && (outcomes[0].contains("nesting is deeper than 64 levels") || refusedAsNoEnvelope), "\(outcomes)")
            }
        }
        let huge = #"{"recordName":"a","recordType":"T","fields":{"n":{"value":1"# + String(repeating: "0", count: 100_000) + "}}}"
        #expect(Self.check(Data(huge.utf8), RecordReadOptions(), "huge number").first?.contains("longer than 1000 characters") == true)
        let giant = #"{"recordName":"a","recordType":"T","fields":{"s":{"value":""# + String(repeating: "é\\n", count: 1_000_000) + #""}}}"#
        let outcome = Self.check(Data(giant.utf8), RecordReadOptions(), "giant string")
        #expect(outcome == ["record a 1"])
        // A database file or other binary named as input is refused whole, not rejected line by line.
        let sqlite = Data("SQLite format 3\u{0}".utf8) + Data(repeating: 0x10, count: 200) + Data("\n{\"recordName\":\"x\"}\n".utf8)
        let database = #expect(throws: StratusError.self) { _ = try RecordReader(data: sqlite, options: RecordReadOptions()) }
        #expect(database?.code == .invalidArguments && database?.message.contains("an SQLite database file") == true, "\(String(describing: database))")
        let binary = #expect(throws: StratusError.self) { _ = try RecordReader(data: Data("PK\u{3}\u{4}\u{0}\u{0}zip".utf8), options: RecordReadOptions()) }
        #expect(binary?.message.contains("binary data (a NUL byte at byte 5)") == true, "\(String(describing: binary))")
        // UTF-16 text (what PowerShell's `>` writes), with or without a mark and whatever format
        // is asked for, is named as UTF-16 with the way to convert it, not as binary data.
        let record = #"{"recordName":"a","recordType":"T","fields":{}}"# + "\n"
        for (bytes, encoding) in [
            ([0xFF, 0xFE] + record.utf16.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] }, "UTF-16 "),
            ([0xFE, 0xFF] + record.utf16.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }, "UTF-16 "),
            (record.utf16.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] }, "UTF-16LE"),
            (record.utf16.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }, "UTF-16BE"),
            ("recordName,recordType\na,T\n".utf16.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] }, "UTF-16LE"),
        ] as [([UInt8], String)] {
            for format: RecordFormat? in [nil, .ndjson, .json, .csv] {
                var options = RecordReadOptions()
                options.format = format
                let error = #expect(throws: StratusError.self) { _ = try RecordReader(data: Data(bytes), options: options) }
                #expect(error?.code == .invalidArguments && error?.message.contains("looks like \(encoding)") == true
                        && error?.message.contains("iconv -f UTF-16") == true && error?.line == 1 && error?.column == 1, "\(String(describing: error))")
            }
        }
        // CSV whose cell holds U+0000 (as Stratus's own CSV export writes it) is CSV, told by its header.
        let csvWithNUL = try RecordReader(data: Data("recordName,recordType,title\nn1,N,a\u{0}b\n".utf8), options: RecordReadOptions())
        guard case .record(let withNUL, _)? = try csvWithNUL.next() else { Issue.record("the CSV record is read"); return }
        #expect(withNUL["title"] as? String == "a\u{0}b")
        var rng = SeededGenerator(seed: 7)
        for n in 0..<300 {
            let noise = Data((0..<Int.random(in: 0...400, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) })
            for format: RecordFormat? in [nil, .json, .csv] {
                var options = RecordReadOptions()
                options.format = format
                options.csvRecordType = "T"
                Self.check(noise, options, "noise \(n)")
            }
        }
    }
}
