import Foundation
import Stratus
import StratusTransfer
import Testing

extension RecordReadResult {
    var record: Record? {
        if case .record(let record, _) = self { return record }
        return nil
    }

    var rejection: RecordInputError? {
        if case .rejected(let error) = self { return error }
        return nil
    }

    var line: Int {
        switch self {
        case .record(_, let line): line
        case .deletion(_, _, let line): line
        case .rejected(let error): error.line
        }
    }
}

/// Reads every item of `data` from memory.
func readAll(_ data: Data, _ options: RecordReadOptions = RecordReadOptions()) throws -> [RecordReadResult] {
    let reader = try RecordReader(data: data, options: options)
    var items: [RecordReadResult] = []
    while let item = try reader.next() { items.append(item) }
    return items
}

func readAll(_ text: String, format: RecordFormat? = nil, configure: (inout RecordReadOptions) -> Void = { _ in }) throws -> [RecordReadResult] {
    var options = RecordReadOptions()
    options.format = format
    configure(&options)
    return try readAll(Data(text.utf8), options)
}

/// A scratch directory removed when the test process ends.
let scratchDirectory: URL = {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("stratus-transfer-tests-\(getpid())")
    try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    atexit { try? FileManager.default.removeItem(atPath: FileManager.default.temporaryDirectory.appendingPathComponent("stratus-transfer-tests-\(getpid())").path) }
    return url
}()

func scratchFile(_ name: String = UUID().uuidString) -> URL {
    scratchDirectory.appendingPathComponent(name)
}

/// Writes `records` through a ``RecordWriter`` into a file and answers its bytes.
func written(
    _ records: [Record], format: RecordFormat, csvFields: [String]? = nil, marker: String? = nil,
    configure: (RecordWriter) -> Void = { _ in }
) throws -> Data {
    let url = scratchFile()
    _ = FileManager.default.createFile(atPath: url.path, contents: nil)
    let handle = try FileHandle(forWritingTo: url)
    let writer = RecordWriter(format: format, output: handle, csvFields: csvFields)
    configure(writer)
    for record in records { try writer.write(record) }
    try writer.finish(continuationMarker: marker)
    try handle.close()
    defer { try? FileManager.default.removeItem(at: url) }
    return try Data(contentsOf: url)
}

/// Reads `data` through a file handle with the given chunk size (tiny sizes exercise every
/// item boundary falling between two reads).
func readFromFile(_ data: Data, chunkSize: Int, _ options: RecordReadOptions = RecordReadOptions()) throws -> [RecordReadResult] {
    let url = scratchFile()
    try data.write(to: url)
    defer { try? FileManager.default.removeItem(at: url) }
    let handle = try FileHandle(forReadingFrom: url)
    defer { try? handle.close() }
    var options = options
    options.readChunkSize = chunkSize
    let reader = try RecordReader(fileHandle: handle, options: options)
    var items: [RecordReadResult] = []
    while let item = try reader.next() { items.append(item) }
    return items
}

/// The 1-based column of the first occurrence of `needle` in `line`, in characters.
func column(of needle: String, in line: String) -> Int {
    guard let range = line.range(of: needle) else { return -1 }
    return line.distance(from: line.startIndex, to: range.lowerBound) + 1
}

/// A record with system fields, as a store returns it.
func storedRecord(
    _ type: String, _ name: String, zone: RecordZone.ID = .default, _ fields: [String: FieldValue],
    tag: String? = "tag-1", created: Date? = Date(timeIntervalSinceReferenceDate: 712_345_678.123_456_7),
    modified: Date? = Date(timeIntervalSince1970: 1_775_666_233.042), parent: String? = nil, encrypted: Set<String> = []
) -> Record {
    Record(
        recordType: type, recordID: Record.ID(recordName: name, zoneID: zone),
        systemFields: Record.SystemFields(
            creationDate: created, modificationDate: modified,
            creatorUserRecordID: Record.ID(recordName: "_creator"), lastModifiedUserRecordID: Record.ID(recordName: "_modifier"),
            recordChangeTag: tag),
        fields: fields,
        parent: parent.map { Record.Reference(recordID: Record.ID(recordName: $0, zoneID: zone), action: .none) },
        encryptedKeys: encrypted)
}

/// Checks that two records hold the same identity, type, system fields and values.
func expectSame(_ actual: Record?, _ expected: Record, _ what: String = "", sourceLocation: SourceLocation = #_sourceLocation) {
    guard let actual else {
        Issue.record("\(what): no record for \(expected.recordID.recordName)", sourceLocation: sourceLocation)
        return
    }
    #expect(actual.recordID == expected.recordID, "\(what)", sourceLocation: sourceLocation)
    #expect(actual.recordType == expected.recordType, "\(what)", sourceLocation: sourceLocation)
    #expect(actual.systemFields == expected.systemFields, "\(what)", sourceLocation: sourceLocation)
    #expect(actual.parent == expected.parent, "\(what)", sourceLocation: sourceLocation)
    #expect(actual.encryptedKeys == expected.encryptedKeys, "\(what)", sourceLocation: sourceLocation)
    let a = actual.fieldValues, e = expected.fieldValues
    #expect(Set(a.keys) == Set(e.keys), "\(what)", sourceLocation: sourceLocation)
    for (key, value) in e where a[key] != value {
        Issue.record("\(what): field '\(key)' read back as \(String(describing: a[key])), expected \(value)", sourceLocation: sourceLocation)
    }
}


/// A parsed JSON value compared as JSON compares values: objects by their members whatever
/// their order, numbers by value (`1` and `1.0` are equal), `true`/`false` apart from numbers.
struct JSONValue: Equatable, CustomStringConvertible {
    let value: Any

    init(_ value: Any) { self.value = value }

    static func == (a: JSONValue, b: JSONValue) -> Bool { same(a.value, b.value) }

    private static func same(_ a: Any, _ b: Any) -> Bool {
        switch (a, b) {
        case (let a as [String: Any], let b as [String: Any]):
            return a.count == b.count && a.allSatisfy { key, value in b[key].map { same(value, $0) } ?? false }
        case (let a as [Any], let b as [Any]):
            return a.count == b.count && zip(a, b).allSatisfy { same($0, $1) }
        case (let a as NSNumber, let b as NSNumber):
            return isBoolean(a) == isBoolean(b) && a == b
        case (let a as String, let b as String):
            return a == b
        case (is NSNull, is NSNull):
            return true
        default:
            return false
        }
    }

    private static func isBoolean(_ number: NSNumber) -> Bool { String(cString: number.objCType) == "c" }

    var description: String {
        guard let data = try? JSONSerialization.data(withJSONObject: ["v": value], options: [.sortedKeys]) else { return "\(value)" }
        return String(decoding: data, as: UTF8.self)
    }
}
