import Foundation
import Stratus

/// A value bound to a statement parameter (`$1`, `$2`…) or read from a result.
///
/// Numbers, booleans and bytes travel in PostgreSQL's binary format, so that they arrive
/// exactly as they left: every `Int64`, every `Double` bit pattern (`-0.0`, infinities, NaN)
/// whatever the server's `extra_float_digits`, bytes without hex escaping. ``text(_:)`` is
/// sent as text of unknown type, so the server types it from its context as it would a quoted
/// literal (`$1` compared with a `jsonb` column is read as `jsonb`).
///
/// ```swift
/// let rows = try connection.query(
///     "SELECT name FROM people WHERE age >= $1 AND photo IS NOT NULL", [.int64(18)])
/// ```
public enum PostgresValue: Hashable, Sendable {
    case null
    case bool(Bool)
    case int64(Int64)
    case double(Double)
    /// Text; it cannot contain NUL characters (PostgreSQL's text cannot hold them).
    case text(String)
    case bytea(Data)
    /// One-dimensional arrays (`int8[]`, `float8[]`, `text[]`, `bytea[]`, `bool[]`), for
    /// statements that bind many rows at once (`unnest($1::int8[], $2::text[])`).
    case int64Array([Int64?])
    case doubleArray([Double?])
    case textArray([String?])
    case byteaArray([Data?])
    case boolArray([Bool?])

    public static func == (lhs: PostgresValue, rhs: PostgresValue) -> Bool {
        switch (lhs, rhs) {
        // Doubles compare by bit pattern: -0.0 and 0.0 are different values here.
        case let (.double(a), .double(b)): return a.bitPattern == b.bitPattern
        case let (.doubleArray(a), .doubleArray(b)): return a.map { $0?.bitPattern } == b.map { $0?.bitPattern }
        case (.null, .null): return true
        case let (.bool(a), .bool(b)): return a == b
        case let (.int64(a), .int64(b)): return a == b
        case let (.text(a), .text(b)): return a.utf8.elementsEqual(b.utf8)
        case let (.bytea(a), .bytea(b)): return a == b
        case let (.int64Array(a), .int64Array(b)): return a == b
        case let (.textArray(a), .textArray(b)):
            return a.count == b.count && zip(a, b).allSatisfy { x, y in
                guard let x, let y else { return x == nil && y == nil }
                return x.utf8.elementsEqual(y.utf8)
            }
        case let (.byteaArray(a), .byteaArray(b)): return a == b
        case let (.boolArray(a), .boolArray(b)): return a == b
        default: return false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .double(let d): hasher.combine(d.bitPattern)
        case .doubleArray(let a): hasher.combine(a.map { $0?.bitPattern })
        case .null: hasher.combine(0)
        case .bool(let b): hasher.combine(b)
        case .int64(let i): hasher.combine(i)
        case .text(let s): hasher.combine(s)
        case .bytea(let d): hasher.combine(d)
        case .int64Array(let a): hasher.combine(a)
        case .textArray(let a): hasher.combine(a)
        case .byteaArray(let a): hasher.combine(a)
        case .boolArray(let a): hasher.combine(a)
        }
    }
}

/// PostgreSQL's type OIDs that Stratus reads and writes.
enum PostgresType {
    static let bool: UInt32 = 16
    static let bytea: UInt32 = 17
    static let char: UInt32 = 18
    static let name: UInt32 = 19
    static let int8: UInt32 = 20
    static let int2: UInt32 = 21
    static let int4: UInt32 = 23
    static let text: UInt32 = 25
    static let oid: UInt32 = 26
    static let json: UInt32 = 114
    static let xml: UInt32 = 142
    static let float4: UInt32 = 700
    static let float8: UInt32 = 701
    static let unknown: UInt32 = 705
    static let boolArray: UInt32 = 1000
    static let byteaArray: UInt32 = 1001
    static let int2Array: UInt32 = 1005
    static let int4Array: UInt32 = 1007
    static let textArray: UInt32 = 1009
    static let varcharArray: UInt32 = 1015
    static let int8Array: UInt32 = 1016
    static let float4Array: UInt32 = 1021
    static let float8Array: UInt32 = 1022
    static let bpchar: UInt32 = 1042
    static let varchar: UInt32 = 1043
    static let numeric: UInt32 = 1700
    static let uuid: UInt32 = 2950
    static let jsonb: UInt32 = 3802

    static let textLike: Set<UInt32> = [text, varchar, bpchar, name, char, json, xml, unknown]
}

// MARK: - Parameters

/// Parameters encoded for libpq: one byte buffer and, per parameter, its type, format and slice.
struct PostgresParameters {
    private(set) var types: [UInt32] = []
    private(set) var formats: [Int32] = []
    private(set) var lengths: [Int32] = []
    private var offsets: [Int] = []  // -1 for NULL
    private var bytes: [UInt8] = []

    var count: Int { types.count }

    /// Encodes `values`.
    ///
    /// - Throws: `invalidArguments` for text with a NUL character (naming the parameter, not
    ///   its value).
    init(_ values: [PostgresValue]) throws {
        types.reserveCapacity(values.count)
        for (index, value) in values.enumerated() {
            let start = bytes.count
            switch value {
            case .null:
                append(type: 0, format: 0, offset: -1)
                continue
            case .text(let text):
                // Text format, unknown type: NUL-terminated, typed by the server from context.
                try Self.checkNoNUL(text, parameter: index + 1)
                bytes.append(contentsOf: text.utf8)
                bytes.append(0)
                types.append(0)
                formats.append(0)
                lengths.append(0)
                offsets.append(start)
                continue
            case .bool(let b): bytes.append(b ? 1 : 0); append(type: PostgresType.bool, format: 1, offset: start)
            case .int64(let i): appendBigEndian(UInt64(bitPattern: i)); append(type: PostgresType.int8, format: 1, offset: start)
            case .double(let d): appendBigEndian(d.bitPattern); append(type: PostgresType.float8, format: 1, offset: start)
            case .bytea(let data): bytes.append(contentsOf: data); append(type: PostgresType.bytea, format: 1, offset: start)
            case .int64Array(let items):
                appendArray(items, element: PostgresType.int8) { $0.appendBigEndian(UInt64(bitPattern: $1)) }
                append(type: PostgresType.int8Array, format: 1, offset: start)
            case .doubleArray(let items):
                appendArray(items, element: PostgresType.float8) { $0.appendBigEndian($1.bitPattern) }
                append(type: PostgresType.float8Array, format: 1, offset: start)
            case .boolArray(let items):
                appendArray(items, element: PostgresType.bool) { $0.bytes.append($1 ? 1 : 0) }
                append(type: PostgresType.boolArray, format: 1, offset: start)
            case .byteaArray(let items):
                appendArray(items, element: PostgresType.bytea) { $0.bytes.append(contentsOf: $1) }
                append(type: PostgresType.byteaArray, format: 1, offset: start)
            case .textArray(let items):
                for item in items { if let item { try Self.checkNoNUL(item, parameter: index + 1) } }
                appendArray(items, element: PostgresType.text) { $0.bytes.append(contentsOf: $1.utf8) }
                append(type: PostgresType.textArray, format: 1, offset: start)
            }
            lengths[lengths.count - 1] = Int32(bytes.count - start)
        }
        // A value pointer into an empty buffer would be nil, which libpq reads as NULL.
        bytes.append(0)
    }

    static func checkNoNUL(_ text: String, parameter: Int) throws {
        if text.utf8.contains(0) {
            throw StratusError(.invalidArguments, "parameter $\(parameter) is text with a NUL character, which PostgreSQL cannot store")
        }
    }

    private mutating func append(type: UInt32, format: Int32, offset: Int) {
        types.append(type)
        formats.append(format)
        lengths.append(0)
        offsets.append(offset)
    }

    fileprivate mutating func appendBigEndian<T: FixedWidthInteger>(_ value: T) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }

    /// PostgreSQL's binary array: dimensions, null flag, element type, then each element as a
    /// length (-1 for NULL) and its bytes.
    private mutating func appendArray<T>(_ items: [T?], element: UInt32, _ encode: (inout PostgresParameters, T) -> Void) {
        let hasNull = items.contains { $0 == nil }
        appendBigEndian(Int32(items.isEmpty ? 0 : 1))
        appendBigEndian(Int32(hasNull ? 1 : 0))
        appendBigEndian(element)
        if !items.isEmpty {
            appendBigEndian(Int32(items.count))
            appendBigEndian(Int32(1))  // lower bound
        }
        for item in items {
            guard let item else { appendBigEndian(Int32(-1)); continue }
            let lengthAt = bytes.count
            appendBigEndian(Int32(0))
            encode(&self, item)
            let length = Int32(bytes.count - lengthAt - 4).bigEndian
            withUnsafeBytes(of: length) { raw in
                for i in 0..<4 { bytes[lengthAt + i] = raw[i] }
            }
        }
    }

    /// Calls `body` with libpq's parameter arrays; the pointers are valid only inside `body`.
    func withPointers<T>(_ body: (_ types: UnsafePointer<UInt32>?, _ values: UnsafePointer<UnsafePointer<CChar>?>?, _ lengths: UnsafePointer<Int32>?, _ formats: UnsafePointer<Int32>?) throws -> T) rethrows -> T {
        try bytes.withUnsafeBufferPointer { buffer in
            // Never nil: the buffer always holds at least one byte (see `init`).
            let base = UnsafeRawPointer(buffer.baseAddress)
            var values = [UnsafePointer<CChar>?]()
            values.reserveCapacity(offsets.count)
            for offset in offsets {
                values.append(offset < 0 ? nil : (base! + offset).assumingMemoryBound(to: CChar.self))
            }
            return try types.withUnsafeBufferPointer { types in
                try values.withUnsafeBufferPointer { values in
                    try lengths.withUnsafeBufferPointer { lengths in
                        try formats.withUnsafeBufferPointer { formats in
                            try body(types.baseAddress, values.baseAddress, lengths.baseAddress, formats.baseAddress)
                        }
                    }
                }
            }
        }
    }

}
