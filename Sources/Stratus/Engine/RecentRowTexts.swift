import Foundation

/// The record type and user record name of the last row an engine decoded, with their bytes,
/// and the field names of the documents before it: consecutive rows mostly repeat them, and a
/// repeated name then costs a comparison instead of a string (user record names are 33 bytes,
/// too long for Swift's inline strings), a repeated document shape a copy instead of a
/// dictionary built by hashing (``FieldDocument/Shape``). A read of many rows keeps one.
///
/// ```swift
/// var recent = RecentRowTexts(keepsDocumentShape: true)
/// let creator = recent.user(creatorColumnBytes)
/// ```
@_spi(StratusEngine)
public struct RecentRowTexts {
    /// The field names of the documents read before; `nil` for a single record, which would
    /// only pay for remembering it.
    public var documentShape: FieldDocument.Shape?
    // Inlinable into the engines' per-row reads, so that a repeated name costs no call.
    @usableFromInline var typeBytes: [UInt8] = []
    @usableFromInline var type = ""
    @usableFromInline var userBytes: [UInt8] = []
    @usableFromInline var userID: Record.ID?

    public init(keepsDocumentShape: Bool) {
        documentShape = keepsDocumentShape ? FieldDocument.Shape() : nil
    }

    /// The record type spelled by a column's bytes (`""` for NULL, `nil`).
    @inlinable
    public mutating func recordType(_ bytes: UnsafeBufferPointer<UInt8>?) -> String {
        guard let bytes else { return "" }
        if Self.same(bytes, typeBytes) { return type }
        typeBytes = Array(bytes)
        type = String(decoding: bytes, as: UTF8.self)
        return type
    }

    /// The user record ID named by a column's bytes (an empty name for NULL, `nil`).
    @inlinable
    public mutating func user(_ bytes: UnsafeBufferPointer<UInt8>?) -> Record.ID {
        let bytes = bytes ?? UnsafeBufferPointer(start: nil, count: 0)
        if let userID, Self.same(bytes, userBytes) { return userID }
        let id = Record.ID(recordName: String(decoding: bytes, as: UTF8.self))
        userBytes = Array(bytes)
        userID = id
        return id
    }

    @inlinable
    static func same(_ bytes: UnsafeBufferPointer<UInt8>, _ known: [UInt8]) -> Bool {
        guard bytes.count == known.count else { return false }
        guard !known.isEmpty, let base = bytes.baseAddress else { return true }
        return known.withUnsafeBufferPointer { memcmp(base, $0.baseAddress!, known.count) == 0 }
    }
}
