import Foundation

/// The record type schemas one write transaction has read, each read from the store once:
/// what ``RecordWriteTransaction/recordTypeSchema(_:)`` answers again for every record of a
/// type, and what the transaction's own ``RecordWriteTransaction/saveRecordTypeSchema(_:)``
/// changed.
///
/// ```swift
/// func recordTypeSchema(_ recordType: String) throws -> RecordTypeSchema? {
///     try schemas.schema(recordType) { try engine.loadSchema($0, storageContainer: context.storageContainer, on: connection) }
/// }
/// ```
@_spi(StratusEngine)
public struct TransactionSchemaCache {
    /// `.some(nil)`: the store has no such type.
    private var known: [String: RecordTypeSchema?] = [:]

    /// An empty cache: every type is read from the store first.
    public init() {}

    /// The type's schema as the transaction knows it, read with `load` the first time;
    /// `nil` when the store has no such type.
    ///
    /// - Throws: what `load` throws (nothing is remembered then).
    public mutating func schema(_ recordType: String, load: (String) throws -> RecordTypeSchema?) rethrows -> RecordTypeSchema? {
        if let schema = known[recordType] { return schema }
        let schema = try load(recordType)
        known[recordType] = .some(schema)
        return schema
    }

    /// Remembers a schema the transaction stored, in place of the one it read.
    public mutating func remember(_ schema: RecordTypeSchema) {
        known[schema.recordType] = .some(schema)
    }
}
