import CLibPQ
import Foundation
import Stratus

extension PostgresConnection {
    /// Streams rows into a table with `COPY … FROM STDIN`, the fastest way to load many rows.
    ///
    /// `body` writes rows through the writer (in COPY's text format unless the statement says
    /// otherwise); they are sent in chunks as they come. The statement's own errors (a row
    /// that does not fit) are reported when the stream ends; nothing is copied then.
    ///
    /// ```swift
    /// let copied = try connection.copyIn("COPY notes (id, body) FROM STDIN") { writer in
    ///     for (id, body) in notes { try writer.writeRow([.int64(id), .text(body)]) }
    /// }
    /// ```
    ///
    /// - Returns: the number of rows copied.
    /// - Throws: `body`'s error (the COPY is then abandoned and copies nothing); the
    ///   statement's error as ``query(_:_:prepare:)`` describes; `internalError` when `sql` is
    ///   not a `COPY … FROM STDIN`.
    @discardableResult
    public func copyIn(_ sql: String, _ body: (PostgresCopyWriter) throws -> Void) throws -> Int {
        let wasInTransaction = PQtransactionStatus(handle) != PQTRANS_IDLE
        try startCopy(sql, expecting: PGRES_COPY_IN, wasInTransaction: wasInTransaction)
        let writer = PostgresCopyWriter(connection: self)
        var bodyError: (any Error)?
        do {
            try body(writer)
            try writer.flush()
        } catch {
            bodyError = error
        }
        _ = PQputCopyEnd(handle, bodyError == nil ? nil : "the rows' source failed")
        let outcome = Result { try check(PQgetResult(handle), sql: sql, wasInTransaction: wasInTransaction) }
        while let extra = PQgetResult(handle) { PQclear(extra) }
        if let bodyError { throw bodyError }
        return try outcome.get().affectedRowCount
    }

    /// Streams a query's rows out with `COPY … TO STDOUT`: `body` gets each row's bytes, in
    /// the statement's format, valid only during the call.
    ///
    /// ```swift
    /// try connection.copyOut("COPY (SELECT id, body FROM notes) TO STDOUT") { row in
    ///     output.write(Data(row))
    /// }
    /// ```
    ///
    /// - Returns: the number of rows copied.
    /// - Throws: `body`'s error (the statement is then cancelled); the statement's error as
    ///   ``query(_:_:prepare:)`` describes; `internalError` when `sql` is not a
    ///   `COPY … TO STDOUT`.
    @discardableResult
    public func copyOut(_ sql: String, _ body: (UnsafeRawBufferPointer) throws -> Void) throws -> Int {
        let wasInTransaction = PQtransactionStatus(handle) != PQTRANS_IDLE
        try startCopy(sql, expecting: PGRES_COPY_OUT, wasInTransaction: wasInTransaction)
        var bodyError: (any Error)?
        var buffer: UnsafeMutablePointer<CChar>?
        while true {
            let count = PQgetCopyData(handle, &buffer, 0)
            guard count > 0, let row = buffer else { break }
            defer { PQfreemem(row) }
            guard bodyError == nil else { continue }
            do {
                try body(UnsafeRawBufferPointer(start: row, count: Int(count)))
            } catch {
                bodyError = error
                // Stop the server from sending the rest; what is in flight is read and dropped.
                if let canceller = PQgetCancel(handle) {
                    var message = [CChar](repeating: 0, count: 256)
                    _ = PQcancel(canceller, &message, Int32(message.count))
                    PQfreeCancel(canceller)
                }
            }
        }
        let outcome = Result { try check(PQgetResult(handle), sql: sql, wasInTransaction: wasInTransaction) }
        while let extra = PQgetResult(handle) { PQclear(extra) }
        if let bodyError { throw bodyError }
        return try outcome.get().affectedRowCount
    }

    /// Sends a COPY statement and checks that the server is ready to stream in `expected`'s
    /// direction.
    private func startCopy(_ sql: String, expecting expected: ExecStatusType, wasInTransaction: Bool) throws {
        try settle()
        guard let start = PQexec(handle, sql) else {
            throw failure(nil, sql: sql, wasInTransaction: wasInTransaction)
        }
        let status = PQresultStatus(start)
        if status == expected {
            PQclear(start)
            return
        }
        if status == PGRES_COPY_IN || status == PGRES_COPY_OUT {
            // The other direction: `check` ends it and says so.
            _ = try check(start, sql: sql, wasInTransaction: wasInTransaction)
        } else if status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK || status == PGRES_EMPTY_QUERY {
            PQclear(start)
        } else {
            _ = try check(start, sql: sql, wasInTransaction: wasInTransaction)
        }
        let wanted = expected == PGRES_COPY_IN ? "COPY … FROM STDIN" : "COPY … TO STDOUT"
        throw StratusError(.internalError, "the statement is not a \(wanted) (in: \(String(sql.prefix(120))))")
    }
}

// MARK: - A COPY left open

extension PostgresConnection {
    /// Starts a `COPY … FROM STDIN` that stays open while the caller does other work: rows go
    /// with ``sendCopyData(_:)`` as they are ready, and the server stores them meanwhile. The
    /// COPY ends with ``endCopy()``, or before the next statement on the connection, which
    /// then throws the COPY's error if it failed; ``openCopyFailure`` keeps that error.
    /// ``rollback()`` abandons an open COPY.
    ///
    /// ```swift
    /// try connection.beginCopy("COPY notes (id, body) FROM STDIN (FORMAT binary)")
    /// try connection.sendCopyData(rows)
    /// let count = try connection.endCopy()
    /// ```
    ///
    /// - Throws: the statement's error as ``query(_:_:prepare:)`` describes; `internalError`
    ///   when `sql` is not a `COPY … FROM STDIN`.
    func beginCopy(_ sql: String) throws {
        let wasInTransaction = PQtransactionStatus(handle) != PQTRANS_IDLE
        try settle()
        openCopyFailure = nil
        do {
            try startCopy(sql, expecting: PGRES_COPY_IN, wasInTransaction: wasInTransaction)
        } catch let error as StratusError {
            openCopyFailure = error
            throw error
        }
        openCopy = (sql, wasInTransaction)
    }

    /// Whether a COPY that ``beginCopy(_:)`` started is open.
    var isCopying: Bool { openCopy != nil }

    /// Sends bytes in the open COPY's format (whole rows, or parts of them) to the server.
    ///
    /// - Throws: the COPY's error when the server refused it meanwhile (the COPY is then
    ///   ended); a lost connection as ``query(_:_:prepare:)`` describes.
    func sendCopyData(_ bytes: [UInt8]) throws {
        guard let (sql, wasInTransaction) = openCopy else {
            throw StratusError(.internalError, "no COPY is open on the connection to \(server)")
        }
        let sent = bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { PQputCopyData(handle, $0.baseAddress, Int32($0.count)) }
        }
        // Sent in full now (libpq keeps up to 8 KiB otherwise), so that the server has every row.
        if sent == 1, PQflush(handle) == 0 { return }
        // The server ended the COPY with an error (which libpq read), or the connection broke.
        guard PQstatus(handle) == CONNECTION_OK else {
            openCopy = nil
            let error = failure(nil, sql: sql, wasInTransaction: wasInTransaction)
            openCopyFailure = error
            throw error
        }
        try endCopy()
        throw StratusError(.internalError, "PostgreSQL at \(server) stopped taking rows of a COPY without saying why (in: \(String(sql.prefix(120))))")
    }

    /// Ends the open COPY and answers how many rows it stored.
    ///
    /// - Throws: the COPY's error (also kept in ``openCopyFailure``) as
    ///   ``query(_:_:prepare:)`` describes; `internalError` when no COPY is open.
    @discardableResult
    func endCopy() throws -> Int {
        guard let (sql, wasInTransaction) = openCopy else {
            throw StratusError(.internalError, "no COPY is open on the connection to \(server)")
        }
        openCopy = nil
        _ = PQputCopyEnd(handle, nil)
        let outcome = Result { try check(PQgetResult(handle), sql: sql, wasInTransaction: wasInTransaction) }
        while let extra = PQgetResult(handle) { PQclear(extra) }
        do {
            return try outcome.get().affectedRowCount
        } catch let error as StratusError {
            openCopyFailure = error
            throw error
        }
    }

    /// Abandons the open COPY, if any: the server drops its rows and fails the transaction.
    func abandonCopy() {
        guard openCopy != nil else { return }
        openCopy = nil
        _ = PQputCopyEnd(handle, "abandoned")
        while let result = PQgetResult(handle) { PQclear(result) }
    }
}

/// Writes the rows of a ``PostgresConnection/copyIn(_:_:)``, sending them in chunks.
///
/// ```swift
/// try writer.writeRow([.int64(1), .text("tab\there"), .null])
/// ```
public final class PostgresCopyWriter {
    private unowned let connection: PostgresConnection
    private var buffer: [UInt8] = []
    /// The rows written through ``writeRow(_:)`` so far.
    public private(set) var rowCount = 0

    /// Chunks of about this size go to libpq.
    static let chunkSize = 256 * 1024

    init(connection: PostgresConnection) {
        self.connection = connection
        buffer.reserveCapacity(Self.chunkSize + 4096)
    }

    /// Writes one row in COPY's text format (the default format): values separated by tabs,
    /// with backslash escapes; `.null` as `\N`.
    ///
    /// - Throws: `invalidArguments` for text with a NUL character (naming the row and
    ///   column); a lost connection as ``PostgresConnection/query(_:_:prepare:)`` describes.
    public func writeRow(_ values: [PostgresValue]) throws {
        rowCount += 1
        for (column, value) in values.enumerated() {
            if column > 0 { buffer.append(UInt8(ascii: "\t")) }
            switch value {
            case .null: buffer.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "N")])
            case .text(let text):
                guard !text.utf8.contains(0) else {
                    throw StratusError(.invalidArguments, "COPY row \(rowCount), column \(column + 1): text with a NUL character, which PostgreSQL cannot store")
                }
                appendEscaped(text.utf8)
            default:
                guard let text = Self.literal(value) else {
                    throw StratusError(.invalidArguments, "COPY row \(rowCount), column \(column + 1): text with a NUL character, which PostgreSQL cannot store")
                }
                appendEscaped(text.utf8)
            }
        }
        buffer.append(UInt8(ascii: "\n"))
        if buffer.count >= Self.chunkSize { try flush() }
    }

    /// Writes bytes already in the COPY statement's format (several rows, or part of one).
    ///
    /// - Throws: a lost connection as ``PostgresConnection/query(_:_:prepare:)`` describes.
    public func write(_ bytes: some Sequence<UInt8>) throws {
        buffer.append(contentsOf: bytes)
        if buffer.count >= Self.chunkSize { try flush() }
    }

    /// Sends what is buffered.
    func flush() throws {
        guard !buffer.isEmpty else { return }
        let sent = buffer.withUnsafeBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) { PQputCopyData(connection.handle, $0.baseAddress, Int32($0.count)) }
        }
        buffer.removeAll(keepingCapacity: true)
        guard sent == 1 else {
            throw connection.failure(nil, sql: "COPY", wasInTransaction: true)
        }
    }

    private func appendEscaped(_ utf8: String.UTF8View) {
        for byte in utf8 {
            switch byte {
            case UInt8(ascii: "\\"): buffer.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case UInt8(ascii: "\n"): buffer.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case UInt8(ascii: "\r"): buffer.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case UInt8(ascii: "\t"): buffer.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            default: buffer.append(byte)
            }
        }
    }

    /// A value in PostgreSQL's input syntax (before COPY's escaping); `nil` for text with NUL.
    static func literal(_ value: PostgresValue) -> String? {
        switch value {
        case .null: return nil
        case .bool(let b): return b ? "t" : "f"
        case .int64(let i): return String(i)
        case .double(let d): return doubleLiteral(d)
        case .text(let text): return text.utf8.contains(0) ? nil : text
        case .bytea(let data): return "\\x" + hex(data)
        case .int64Array(let items): return arrayLiteral(items.map { $0.map(String.init) })
        case .doubleArray(let items): return arrayLiteral(items.map { $0.map(doubleLiteral) })
        case .boolArray(let items): return arrayLiteral(items.map { $0.map { $0 ? "t" : "f" } })
        case .byteaArray(let items): return arrayLiteral(items.map { $0.map { "\\x" + hex($0) } })
        case .textArray(let items):
            if items.contains(where: { $0?.utf8.contains(0) ?? false }) { return nil }
            return arrayLiteral(items)
        }
    }

    /// Swift prints the shortest text that reads back to the same double; PostgreSQL spells
    /// the special values its own way.
    private static func doubleLiteral(_ d: Double) -> String {
        if d.isNaN { return "NaN" }
        if d.isInfinite { return d < 0 ? "-Infinity" : "Infinity" }
        return "\(d)"
    }

    private static func hex(_ data: Data) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var bytes = [UInt8]()
        bytes.reserveCapacity(data.count * 2)
        for byte in data {
            bytes.append(digits[Int(byte >> 4)])
            bytes.append(digits[Int(byte & 0xF)])
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `{"a","b",NULL}`: every element quoted, so that no element needs thought.
    private static func arrayLiteral(_ elements: [String?]) -> String {
        "{" + elements.map { element in
            guard let element else { return "NULL" }
            return "\"" + element.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
        }.joined(separator: ",") + "}"
    }
}

@available(*, unavailable)
extension PostgresCopyWriter: Sendable {}
