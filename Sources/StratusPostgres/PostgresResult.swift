import CLibPQ
import Foundation
import Stratus

/// The rows a statement answered, owned until `deinit` clears them. A collection of
/// ``PostgresRow``s.
///
/// ```swift
/// let result = try connection.query("SELECT id, body FROM notes")
/// for row in result { print(try row.int64(0) ?? 0) }
/// print(result.affectedRowCount)
/// ```
public final class PostgresResult: RandomAccessCollection {
    let handle: OpaquePointer
    public let columnCount: Int
    private let rowCount: Int

    init(_ handle: OpaquePointer) {
        self.handle = handle
        rowCount = Int(PQntuples(handle))
        columnCount = Int(PQnfields(handle))
    }

    deinit { PQclear(handle) }

    public var startIndex: Int { 0 }
    public var endIndex: Int { rowCount }

    /// The row at `position`; trapping outside `0..<count` (a programmer error).
    public subscript(position: Int) -> PostgresRow {
        precondition(position >= 0 && position < rowCount, "row \(position) is outside the result's \(rowCount) rows")
        return PostgresRow(result: self, index: Int32(position))
    }

    /// How many rows the statement inserted, updated, deleted, copied or selected.
    public var affectedRowCount: Int { Int(String(cString: PQcmdTuples(handle))) ?? 0 }

    /// The statement's command tag: `INSERT 0 1`, `SELECT 3`, `COMMIT`.
    public var commandTag: String { String(cString: PQcmdStatus(handle)) }

    /// The name of column `column`, as the statement labels it.
    public func columnName(_ column: Int) -> String {
        PQfname(handle, Int32(column)).map { String(cString: $0) } ?? ""
    }

    /// The position of the column labelled exactly `name`, if any.
    public func columnIndex(named name: String) -> Int? {
        (0..<columnCount).first { columnName($0) == name }
    }
}

@available(*, unavailable)
extension PostgresResult: Sendable {}

/// One row of a ``PostgresResult``. Each accessor answers `nil` for SQL NULL and throws when
/// the column's type is not one it reads.
///
/// Results come in PostgreSQL's binary format: integers, doubles (every bit, `-0.0`
/// included) and bytes arrive exactly, whatever the server's settings, and nothing is parsed
/// from text. Columns of other types than those listed on each accessor are cast in SQL
/// (`created::text`).
///
/// ```swift
/// let row = try connection.query("SELECT 1::int8, 'a', '\\x00ff'::bytea, -0.0::float8")[0]
/// let bytes = try row.bytes(2)          // Data([0, 255])
/// ```
public struct PostgresRow {
    let result: PostgresResult
    let index: Int32

    /// Whether column `column` is SQL NULL.
    public func isNull(_ column: Int) -> Bool {
        PQgetisnull(result.handle, index, Int32(column)) == 1
    }

    /// Column `column` of type int2, int4, int8, oid, or an integral numeric.
    ///
    /// - Throws: `internalError` for other types, or a numeric that is not an integer.
    public func int64(_ column: Int) throws -> Int64? {
        guard let (type, bytes) = raw(column) else { return nil }
        switch type {
        case PostgresType.int8 where bytes.count == 8: return Int64(bitPattern: Self.bigEndian(bytes, as: UInt64.self))
        case PostgresType.int4 where bytes.count == 4: return Int64(Int32(bitPattern: Self.bigEndian(bytes, as: UInt32.self)))
        case PostgresType.int2 where bytes.count == 2: return Int64(Int16(bitPattern: Self.bigEndian(bytes, as: UInt16.self)))
        case PostgresType.oid where bytes.count == 4: return Int64(Self.bigEndian(bytes, as: UInt32.self))
        case PostgresType.numeric:
            let text = try Self.numericText(bytes)
            guard let value = Int64(text) else { throw mismatch(column, type, "an integer (it holds a numeric that is not an Int64)") }
            return value
        default: throw mismatch(column, type, "an integer")
        }
    }

    /// Column `column` of type float8, float4, or numeric.
    ///
    /// - Throws: `internalError` for other types.
    public func double(_ column: Int) throws -> Double? {
        guard let (type, bytes) = raw(column) else { return nil }
        switch type {
        case PostgresType.float8 where bytes.count == 8: return Double(bitPattern: Self.bigEndian(bytes, as: UInt64.self))
        case PostgresType.float4 where bytes.count == 4: return Double(Float(bitPattern: Self.bigEndian(bytes, as: UInt32.self)))
        case PostgresType.numeric:
            let text = try Self.numericText(bytes)
            return Double(text) ?? (text == "Infinity" ? .infinity : text == "-Infinity" ? -.infinity : .nan)
        default: throw mismatch(column, type, "a floating-point number")
        }
    }

    /// Column `column` of a text type (text, varchar, char, name, json, jsonb, xml), or a
    /// numeric or uuid in their text forms.
    ///
    /// - Throws: `internalError` for other types.
    public func text(_ column: Int) throws -> String? {
        guard let (type, bytes) = raw(column) else { return nil }
        switch type {
        case _ where PostgresType.textLike.contains(type): return String(decoding: bytes, as: UTF8.self)
        case PostgresType.jsonb:
            // Binary jsonb is a version byte (1) followed by the document as text.
            guard bytes.first == 1 else { throw mismatch(column, type, "text (unknown jsonb version)") }
            return String(decoding: bytes.dropFirst(), as: UTF8.self)
        case PostgresType.numeric: return try Self.numericText(bytes)
        case PostgresType.uuid where bytes.count == 16:
            let hex = bytes.map { String(format: "%02x", $0) }.joined()
            let parts = [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { range in
                String(hex[hex.index(hex.startIndex, offsetBy: range.lowerBound)..<hex.index(hex.startIndex, offsetBy: range.upperBound)])
            }
            return parts.joined(separator: "-")
        default: throw mismatch(column, type, "text")
        }
    }

    /// Column `column` of type bytea.
    ///
    /// - Throws: `internalError` for other types.
    public func bytes(_ column: Int) throws -> Data? {
        guard let (type, bytes) = raw(column) else { return nil }
        guard type == PostgresType.bytea else { throw mismatch(column, type, "bytes") }
        return Data(bytes)
    }

    /// Column `column` of type bool.
    ///
    /// - Throws: `internalError` for other types.
    public func bool(_ column: Int) throws -> Bool? {
        guard let (type, bytes) = raw(column) else { return nil }
        guard type == PostgresType.bool, bytes.count == 1 else { throw mismatch(column, type, "a boolean") }
        return bytes[0] != 0
    }

    /// Column `column` as whichever ``PostgresValue`` its type reads as: integers as
    /// `.int64`, floating-point as `.double`, text types, numeric and uuid as `.text`, and
    /// one-dimensional arrays of those.
    ///
    /// - Throws: `internalError` for other types.
    public func value(_ column: Int) throws -> PostgresValue {
        guard let (type, bytes) = raw(column) else { return .null }
        switch type {
        case PostgresType.bool: return try .bool(bool(column)!)
        case PostgresType.int2, PostgresType.int4, PostgresType.int8, PostgresType.oid: return try .int64(int64(column)!)
        case PostgresType.float4, PostgresType.float8: return try .double(double(column)!)
        case PostgresType.bytea: return .bytea(Data(bytes))
        case PostgresType.int2Array, PostgresType.int4Array, PostgresType.int8Array:
            return .int64Array(try Self.arrayElements(bytes) { type, element in
                switch (type, element.count) {
                case (PostgresType.int8, 8): return Int64(bitPattern: Self.bigEndian(element, as: UInt64.self))
                case (PostgresType.int4, 4): return Int64(Int32(bitPattern: Self.bigEndian(element, as: UInt32.self)))
                case (PostgresType.int2, 2): return Int64(Int16(bitPattern: Self.bigEndian(element, as: UInt16.self)))
                default: return nil
                }
            })
        case PostgresType.float4Array, PostgresType.float8Array:
            return .doubleArray(try Self.arrayElements(bytes) { type, element in
                switch (type, element.count) {
                case (PostgresType.float8, 8): return Double(bitPattern: Self.bigEndian(element, as: UInt64.self))
                case (PostgresType.float4, 4): return Double(Float(bitPattern: Self.bigEndian(element, as: UInt32.self)))
                default: return nil
                }
            })
        case PostgresType.textArray, PostgresType.varcharArray:
            return .textArray(try Self.arrayElements(bytes) { _, element in String(decoding: element, as: UTF8.self) })
        case PostgresType.byteaArray:
            return .byteaArray(try Self.arrayElements(bytes) { _, element in Data(element) })
        case PostgresType.boolArray:
            return .boolArray(try Self.arrayElements(bytes) { _, element in element.count == 1 ? element[0] != 0 : nil })
        default:
            guard let text = try? text(column) else { throw mismatch(column, type, "a value Stratus reads") }
            return .text(text)
        }
    }

    // MARK: - Decoding

    /// The column's type and binary value, `nil` for NULL. The bytes belong to the result.
    func raw(_ column: Int) -> (UInt32, UnsafeRawBufferPointer)? {
        precondition(column >= 0 && column < result.columnCount, "column \(column) is outside the result's \(result.columnCount) columns")
        let handle = result.handle
        let c = Int32(column)
        guard PQgetisnull(handle, index, c) == 0 else { return nil }
        let count = Int(PQgetlength(handle, index, c))
        let base = PQgetvalue(handle, index, c).map { UnsafeRawPointer($0) }
        return (PQftype(handle, c), UnsafeRawBufferPointer(start: count == 0 ? nil : base, count: count))
    }

    private func mismatch(_ column: Int, _ type: UInt32, _ wanted: String) -> StratusError {
        StratusError(.internalError, "column \(column) ('\(result.columnName(column))') of PostgreSQL type \(type) cannot be read as \(wanted); cast it in SQL")
    }

    static func bigEndian<T: FixedWidthInteger>(_ bytes: UnsafeRawBufferPointer, at offset: Int = 0, as: T.Type) -> T {
        var value: T = 0
        for i in 0..<MemoryLayout<T>.size { value = value << 8 | T(bytes[offset + i]) }
        return value
    }

    /// The elements of a one-dimensional binary array, each read by `element` (which answers
    /// `nil` for an element it cannot read).
    private static func arrayElements<T>(_ bytes: UnsafeRawBufferPointer, _ element: (UInt32, UnsafeRawBufferPointer) -> T?) throws -> [T?] {
        func malformed() -> StratusError { StratusError(.internalError, "PostgreSQL sent an array Stratus cannot read") }
        guard bytes.count >= 12 else { throw malformed() }
        let dimensions = Int32(bitPattern: bigEndian(bytes, as: UInt32.self))
        let elementType = bigEndian(bytes, at: 8, as: UInt32.self)
        if dimensions == 0 { return [] }
        guard dimensions == 1, bytes.count >= 20 else {
            throw StratusError(.internalError, "PostgreSQL sent a \(dimensions)-dimensional array; Stratus reads one-dimensional arrays")
        }
        let count = Int(Int32(bitPattern: bigEndian(bytes, at: 12, as: UInt32.self)))
        var offset = 20
        var elements: [T?] = []
        elements.reserveCapacity(count)
        for _ in 0..<count {
            guard offset + 4 <= bytes.count else { throw malformed() }
            let length = Int(Int32(bitPattern: bigEndian(bytes, at: offset, as: UInt32.self)))
            offset += 4
            if length < 0 { elements.append(nil); continue }
            guard offset + length <= bytes.count else { throw malformed() }
            let slice = UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + length])
            guard let value = element(elementType, slice) else { throw malformed() }
            elements.append(value)
            offset += length
        }
        return elements
    }

    /// A binary numeric as PostgreSQL would print it: base-10000 digits with a weight (the
    /// power of 10000 of the first digit), a sign and a display scale.
    static func numericText(_ bytes: UnsafeRawBufferPointer) throws -> String {
        guard bytes.count >= 8 else { throw StratusError(.internalError, "PostgreSQL sent a numeric Stratus cannot read") }
        let digitCount = Int(bigEndian(bytes, at: 0, as: UInt16.self))
        let weight = Int(Int16(bitPattern: bigEndian(bytes, at: 2, as: UInt16.self)))
        let sign = bigEndian(bytes, at: 4, as: UInt16.self)
        let scale = Int(bigEndian(bytes, at: 6, as: UInt16.self))
        guard bytes.count >= 8 + 2 * digitCount else { throw StratusError(.internalError, "PostgreSQL sent a numeric Stratus cannot read") }
        switch sign {
        case 0xC000: return "NaN"
        case 0xD000: return "Infinity"
        case 0xF000: return "-Infinity"
        default: break
        }
        func digit(_ i: Int) -> Int { i >= 0 && i < digitCount ? Int(bigEndian(bytes, at: 8 + 2 * i, as: UInt16.self)) : 0 }
        var text = sign == 0x4000 ? "-" : ""
        if weight < 0 {
            text += "0"
        } else {
            text += String(digit(0))
            for i in stride(from: 1, through: weight, by: 1) {
                let group = String(digit(i))
                text += String(repeating: "0", count: 4 - group.count) + group
            }
        }
        if scale > 0 {
            var fraction = ""
            var i = weight + 1
            while fraction.count < scale {
                let group = String(digit(i))
                fraction += String(repeating: "0", count: 4 - group.count) + group
                i += 1
            }
            text += "." + fraction.prefix(scale)
        }
        return text
    }
}

@available(*, unavailable)
extension PostgresRow: Sendable {}
