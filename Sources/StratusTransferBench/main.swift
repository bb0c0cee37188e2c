// Throughput of the record codecs, and a long-running fuzz driver for the readers.
//
//   swift run -c release stratus-transfer-bench [throughput] [RECORDS]
//   swift run -c release stratus-transfer-bench fuzz [CASES] [SEED]
//
// Figures are printed, never asserted: benchmarks are programs, tests assert behaviour.
import Foundation
import SeededRandom
import Stratus
import StratusTransfer

let arguments = Array(CommandLine.arguments.dropFirst())
let command = arguments.first ?? "throughput"

func seconds(_ body: () throws -> Void) rethrows -> Double {
    let start = DispatchTime.now().uptimeNanoseconds
    try body()
    return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
}

func temporaryFile(_ name: String) -> URL {
    FileManager.default.temporaryDirectory.appendingPathComponent("stratus-transfer-bench-\(getpid())-\(name)")
}

/// The benchmark's shape: 4 fields (STRING, TIMESTAMP, INT64, DOUBLE), as issue 4 asks.
func benchmarkRecord(_ i: Int) -> Record {
    let record = Record(recordType: "Item", recordID: Record.ID(recordName: "item-\(i)"))
    record["title"] = "Item number \(i)"
    record["created"] = Date(timeIntervalSince1970: 1_700_000_000 + Double(i))
    record["quantity"] = Int64(i % 1000)
    record["price"] = Double(i % 10_000) / 100
    return record
}

func write(_ records: [Record], format: RecordFormat, to url: URL) throws {
    _ = FileManager.default.createFile(atPath: url.path, contents: nil)
    let handle = try FileHandle(forWritingTo: url)
    let writer = RecordWriter(format: format, output: handle)
    for record in records { try writer.write(record) }
    try writer.finish()
    try handle.close()
}

func throughput(count: Int) throws {
    print("generating \(count) records …")
    let records = (0..<count).map(benchmarkRecord)
    for format in RecordFormat.allCases {
        let url = temporaryFile(format.rawValue)
        defer { try? FileManager.default.removeItem(at: url) }
        let writeTime = try seconds { try write(records, format: format, to: url) }
        let data = try Data(contentsOf: url)
        let megabytes = Double(data.count) / 1_000_000

        var options = RecordReadOptions()
        options.format = format
        options.csvRecordType = "Item"
        var read = 0
        let memoryTime = try seconds {
            let reader = try RecordReader(data: data, options: options)
            while let item = try reader.next() { if case .record = item { read += 1 } }
        }
        precondition(read == count, "read \(read) of \(count) records")
        let fileTime = try seconds {
            let handle = try FileHandle(forReadingFrom: url)
            let reader = try RecordReader(fileHandle: handle, options: options)
            while try reader.next() != nil {}
            try handle.close()
        }
        print(String(format: "%-8@ %7.1f MB  write %7.1f MB/s  read (memory) %7.1f MB/s %9.0f records/s  read (file) %7.1f MB/s",
                     format.rawValue, megabytes, megabytes / writeTime, megabytes / memoryTime, Double(count) / memoryTime, megabytes / fileTime))
    }
    // For scale: Foundation's parser on the same NDJSON, values only, no records built.
    let url = temporaryFile("foundation")
    defer { try? FileManager.default.removeItem(at: url) }
    try write(records, format: .ndjson, to: url)
    let data = try Data(contentsOf: url)
    let lines = data.split(separator: 0x0A)
    let foundationTime = try seconds {
        for line in lines { _ = try JSONSerialization.jsonObject(with: line) }
    }
    print(String(format: "Foundation JSONSerialization on the NDJSON: %.1f MB/s", Double(data.count) / 1_000_000 / foundationTime))
}

// MARK: - Fuzzing


func mutate(_ input: [UInt8], _ rng: inout SeededGenerator) -> [UInt8] {
    var bytes = input
    for _ in 0..<Int.random(in: 1...4, using: &rng) {
        let at = bytes.isEmpty ? 0 : Int.random(in: 0..<bytes.count, using: &rng)
        switch Int.random(in: 0..<9, using: &rng) {
        case 0: bytes.removeSubrange(at...)
        case 1, 2: if !bytes.isEmpty { bytes[at] = UInt8.random(in: 0...255, using: &rng) }
        case 3: bytes.insert(contentsOf: [[0xFF], [0xC3], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80]].randomElement(using: &rng)!, at: at)
        case 4: bytes.insert(contentsOf: repeatElement(Bool.random(using: &rng) ? 0x5B : 0x7B, count: Int.random(in: 60...5_000, using: &rng)), at: at)
        case 5: bytes.insert(contentsOf: Array(("9" + String(repeating: "9", count: Int.random(in: 18...2_000, using: &rng)) + "e99999").utf8), at: at)
        case 6: bytes.insert(contentsOf: Array(("\"" + String(repeating: "x\\\"", count: Int.random(in: 1...50_000, using: &rng)) + "\"").utf8), at: at)
        case 7:
            let end = min(bytes.count, at + Int.random(in: 1...300, using: &rng))
            bytes.insert(contentsOf: Array(bytes[at..<end]), at: Int.random(in: 0...bytes.count, using: &rng))
        default: bytes.insert(contentsOf: Array([",", ":", "\"", "\\", "{", "}", "[", "]", "\n", "null", "NaN", "-"].randomElement(using: &rng)!.utf8), at: at)
        }
    }
    return bytes
}

func fuzz(cases: Int, seed: UInt64) throws {
    var rng = SeededGenerator(seed: seed)
    var seeds: [(RecordFormat, [UInt8])] = []
    let records = (0..<5).map(benchmarkRecord)
    for format in RecordFormat.allCases {
        let url = temporaryFile("seed-\(format.rawValue)")
        try write(records, format: format, to: url)
        seeds.append((format, Array(try Data(contentsOf: url))))
        try? FileManager.default.removeItem(at: url)
    }
    var outcomes = [String: Int]()
    let start = Date()
    for n in 0..<cases {
        let (format, seedBytes) = seeds[n % seeds.count]
        let input = Data(mutate(seedBytes, &rng))
        var options = RecordReadOptions()
        options.format = n % 3 == 0 && format != .csv ? nil : format
        options.csvRecordType = "Item"
        do {
            let reader = try RecordReader(data: input, options: options)
            var steps = 0
            while let item = try reader.next() {
                steps += 1
                guard steps <= input.count + 2 else { fatalError("case \(n): no end") }
                if case .rejected(let error) = item {
                    guard error.line >= 1 && error.column >= 1 else { fatalError("case \(n): rejection without a position: \(error)") }
                    outcomes["rejected", default: 0] += 1
                } else {
                    outcomes["record", default: 0] += 1
                }
            }
        } catch let error as StratusError {
            guard error.line != nil && error.column != nil else { fatalError("case \(n): error without a position: \(error)") }
            outcomes["threw", default: 0] += 1
        }
        if n > 0 && n % 100_000 == 0 { print("\(n) cases, \(outcomes)") }
    }
    print(String(format: "%d cases in %.1f s, no crash, no hang, every problem positioned: %@", cases, Date().timeIntervalSince(start), outcomes.description))
}

/// Reads one file over and over, for profiling the reader alone.
func readOnly(count: Int, format: RecordFormat, rounds: Int) throws {
    let url = temporaryFile("read-\(format.rawValue)")
    defer { try? FileManager.default.removeItem(at: url) }
    try write((0..<count).map(benchmarkRecord), format: format, to: url)
    let data = try Data(contentsOf: url)
    var options = RecordReadOptions()
    options.format = format
    options.csvRecordType = "Item"
    for _ in 0..<rounds {
        var read = 0
        let time = try seconds {
            let reader = try RecordReader(data: data, options: options)
            while let item = try reader.next() { if case .record = item { read += 1 } }
        }
        let fileTime = try seconds {
            let handle = try FileHandle(forReadingFrom: url)
            let reader = try RecordReader(fileHandle: handle, options: options)
            while try reader.next() != nil {}
        }
        print(String(format: "%@: memory %.1f MB/s, %.0f records/s; file %.1f MB/s", format.rawValue, Double(data.count) / 1_000_000 / time,
                     Double(read) / time, Double(data.count) / 1_000_000 / fileTime))
    }
}

/// What building the records alone costs (the floor under any reader).
func modelOnly(count: Int) {
    let zone = RecordZone.ID(zoneName: "_defaultZone")
    for _ in 0..<3 {
        var kept = 0
        let time = seconds {
            for i in 0..<count {
                var fields: [String: FieldValue] = [:]
                fields.reserveCapacity(4)
                fields["title"] = .string("Item number")
                fields["created"] = .date(Date(timeIntervalSinceReferenceDate: Double(i)))
                fields["quantity"] = .int64(Int64(i))
                fields["price"] = .double(1.5)
                let record = Record(recordType: "Item", recordID: Record.ID(recordName: "item-\(i)", zoneID: zone),
                                    systemFields: Record.SystemFields(), fields: fields)
                for (key, value) in fields { record.setFieldValue(value, forKey: key, encrypted: false) }
                kept &+= record.recordType.utf8.count
            }
        }
        let emptyTime = seconds {
            for i in 0..<count {
                let record = Record(recordType: "Item", recordID: Record.ID(recordName: "item-\(i)", zoneID: zone),
                                    systemFields: Record.SystemFields(), fields: [:])
                record.setFieldValue(.string("Item number"), forKey: "title", encrypted: false)
                record.setFieldValue(.date(Date(timeIntervalSinceReferenceDate: Double(i))), forKey: "created", encrypted: false)
                record.setFieldValue(.int64(Int64(i)), forKey: "quantity", encrypted: false)
                record.setFieldValue(.double(1.5), forKey: "price", encrypted: false)
                kept &+= record.recordType.utf8.count
            }
        }
        let wholeTime = seconds {
            for i in 0..<count {
                var fields: [String: FieldValue] = [:]
                fields.reserveCapacity(4)
                fields["title"] = .string("Item number")
                fields["created"] = .date(Date(timeIntervalSinceReferenceDate: Double(i)))
                fields["quantity"] = .int64(Int64(i))
                fields["price"] = .double(1.5)
                let record = Record(recordType: "Item", recordID: Record.ID(recordName: "item-\(i)", zoneID: zone), values: fields)
                kept &+= record.recordType.utf8.count
            }
        }
        print(String(format: "model only: %.0f records/s given then set, %.0f set one by one, %.0f built whole (%d)",
                     Double(count) / time, Double(count) / emptyTime, Double(count) / wholeTime, kept))
    }
}

switch command {
case "model":
    modelOnly(count: 300_000)
case "read":
    try readOnly(count: arguments.count > 1 ? Int(arguments[1]) ?? 300_000 : 300_000,
                 format: arguments.count > 2 ? RecordFormat(rawValue: arguments[2]) ?? .ndjson : .ndjson, rounds: 5)
case "fuzz":
    try fuzz(cases: arguments.count > 1 ? Int(arguments[1]) ?? 100_000 : 100_000, seed: arguments.count > 2 ? UInt64(arguments[2]) ?? 1 : 1)
case "throughput":
    try throughput(count: arguments.count > 1 ? Int(arguments[1]) ?? 1_000_000 : 1_000_000)
default:
    if let count = Int(command) { try throughput(count: count) } else { print("usage: stratus-transfer-bench [throughput [RECORDS] | fuzz [CASES] [SEED]]") }
}
