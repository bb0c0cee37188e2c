import Foundation
@_spi(StratusEngine) import Stratus

/// The record type and user record name of the last row read, with their bytes, and the field
/// names of the documents read before: consecutive rows mostly repeat them, and a repeated name
/// then costs a comparison instead of a string (user record names are 33 bytes, too long for
/// Swift's inline strings), a repeated document shape a copy instead of a dictionary built by
/// hashing (``Stratus/FieldDocument/Shape``). A read of many rows keeps one.
struct PostgresRecentTexts {
    /// The field names of the documents read before; `nil` for a single record, which would
    /// only pay for remembering it.
    var documentShape: FieldDocument.Shape?
    private var typeBytes: [UInt8] = []
    private var type = ""
    private var userBytes: [UInt8] = []
    private var userID: Record.ID?

    init(keepsDocumentShape: Bool) {
        documentShape = keepsDocumentShape ? FieldDocument.Shape() : nil
    }

    /// The record type in text column `column` (`""` for NULL).
    mutating func recordType(_ row: PostgresRow, column: Int) throws -> String {
        try row.withBytes(column) { bytes in
            guard let bytes else { return "" }
            if Self.same(bytes, typeBytes) { return type }
            typeBytes = Array(bytes)
            type = String(decoding: bytes, as: UTF8.self)
            return type
        }
    }

    /// The user record ID named in text column `column` (an empty name for NULL).
    mutating func user(_ row: PostgresRow, column: Int) throws -> Record.ID {
        try row.withBytes(column) { bytes in
            let bytes = bytes ?? UnsafeBufferPointer(start: nil, count: 0)
            if let userID, Self.same(bytes, userBytes) { return userID }
            let id = Record.ID(recordName: String(decoding: bytes, as: UTF8.self))
            userBytes = Array(bytes)
            userID = id
            return id
        }
    }

    private static func same(_ bytes: UnsafeBufferPointer<UInt8>, _ known: [UInt8]) -> Bool {
        guard bytes.count == known.count else { return false }
        guard !known.isEmpty, let base = bytes.baseAddress else { return true }
        return known.withUnsafeBufferPointer { memcmp(base, $0.baseAddress!, known.count) == 0 }
    }
}
