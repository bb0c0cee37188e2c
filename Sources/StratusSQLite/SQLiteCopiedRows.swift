import CSQLite
import Foundation

/// The column values a record is decoded from: a statement's current row, or a copy of one.
protocol SQLiteRowValues {
    func isNull(_ column: Int32) -> Bool
    func double(_ column: Int32) -> Double
    func text(_ column: Int32) -> String?
    /// The column's text as UTF-8 bytes (nil for NULL), valid only inside `body`.
    func withTextBytes<T>(_ column: Int32, _ body: (UnsafeBufferPointer<UInt8>?) throws -> T) rethrows -> T
    /// Whether two columns hold the same text, byte for byte (both NULL counts as the same).
    func hasSameText(_ column: Int32, as other: Int32) -> Bool
}

extension SQLiteStatement: SQLiteRowValues {}

/// Rows copied out of a statement, their first `columns` columns each, so that they can be
/// decoded after the statement has moved on, on another thread. A page's texts share one
/// buffer: copying a row is a `memcpy` per column, with no allocation of its own.
struct SQLiteCopiedRows: Sendable {
    enum Cell: Sendable {
        case null
        case real(Double)
        case text(start: Int, count: Int)
    }

    let columns: Int32
    private(set) var count = 0
    private var cells: [Cell] = []
    private var bytes: [UInt8] = []

    /// Room is made for `expectedRows` rows up to a thousand: a page size is a bound, not a
    /// promise of rows, and may be huge.
    init(columns: Int32, expectedRows: Int) {
        self.columns = columns
        cells.reserveCapacity(Int(columns) * min(max(expectedRows, 0), 1_000))
    }

    mutating func append(_ row: SQLiteStatement) {
        for column in 0..<columns {
            switch sqlite3_column_type(row.raw, column) {
            case SQLITE_NULL:
                cells.append(.null)
            case SQLITE_INTEGER, SQLITE_FLOAT:
                cells.append(.real(row.double(column)))
            default:
                row.withTextBytes(column) { text in
                    let start = bytes.count
                    if let text { bytes.append(contentsOf: text) }
                    cells.append(.text(start: start, count: bytes.count - start))
                }
            }
        }
        count += 1
    }

    /// Calls `body` with each row in order.
    func forEachRow(_ body: (Row) throws -> Void) rethrows {
        try cells.withUnsafeBufferPointer { cells in
            try bytes.withUnsafeBufferPointer { bytes in
                let text = bytes.baseAddress ?? UnsafePointer(bitPattern: 1)!
                guard let first = cells.baseAddress else { return }
                for index in 0..<count {
                    try body(Row(cells: first + index * Int(columns), bytes: text))
                }
            }
        }
    }

    /// One copied row, valid inside ``forEachRow(_:)``.
    struct Row: SQLiteRowValues {
        let cells: UnsafePointer<Cell>
        let bytes: UnsafePointer<UInt8>

        func isNull(_ column: Int32) -> Bool {
            if case .null = cells[Int(column)] { return true }
            return false
        }

        /// The column as a number, as SQLite converts one: text reads as 0 (record columns
        /// read this way are REAL).
        func double(_ column: Int32) -> Double {
            if case .real(let value) = cells[Int(column)] { return value }
            return 0
        }

        func text(_ column: Int32) -> String? {
            withTextBytes(column) { $0.map { String(decoding: $0, as: UTF8.self) } }
        }

        func withTextBytes<T>(_ column: Int32, _ body: (UnsafeBufferPointer<UInt8>?) throws -> T) rethrows -> T {
            switch cells[Int(column)] {
            case .null:
                return try body(nil)
            case .text(let start, let count):
                return try body(UnsafeBufferPointer(start: bytes + start, count: count))
            case .real(let value):
                // Record columns read as text hold text; a number there is a damaged row.
                var rendered = "\(value)"
                return try rendered.withUTF8 { try body($0) }
            }
        }

        /// The column's text bytes: `.some(nil)` for NULL, nil for a number (a damaged row).
        func storedText(_ column: Int32) -> UnsafeBufferPointer<UInt8>?? {
            switch cells[Int(column)] {
            case .null: return .some(nil)
            case .text(let start, let count): return UnsafeBufferPointer(start: bytes + start, count: count)
            case .real: return nil
            }
        }

        func hasSameText(_ column: Int32, as other: Int32) -> Bool {
            switch (cells[Int(column)], cells[Int(other)]) {
            case (.null, .null):
                return true
            case (.text(let a, let countA), .text(let b, let countB)):
                return countA == countB && memcmp(bytes + a, bytes + b, countA) == 0
            default:
                return false
            }
        }
    }
}
