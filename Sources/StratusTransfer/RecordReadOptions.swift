import Foundation
import Stratus

/// How a ``RecordReader`` reads its input: the format, the zone and types to assume, limits.
///
/// ```swift
/// var options = RecordReadOptions()
/// options.zoneID = RecordZone.ID(zoneName: "Photos")
/// options.csvRecordType = "Photo"
/// options.csvTypes = ["taken": .timestamp, "size": .int64]
/// let reader = try RecordReader(fileHandle: handle, options: options)
/// ```
public struct RecordReadOptions: Sendable {
    /// The input format, or `nil` to detect it from the first bytes: `[` is a JSON array, `{`
    /// whose first key is an envelope key (`records`, `zones`, `operations`, `atomic`,
    /// `continuationMarker`, `syncToken`, `moreComing`) is an envelope, a `{` alone on its line
    /// starts a pretty-printed JSON document, anything else is NDJSON. CSV is never detected.
    public var format: RecordFormat?
    /// The zone of records whose input names none.
    public var zoneID: RecordZone.ID = .default
    /// Schemas by record type; they type the values that carry no `"type"`.
    public var schemas: [String: RecordTypeSchema] = [:]
    /// CSV: the record type of every row when there is no `recordType` column.
    public var csvRecordType: String?
    /// CSV: column types by field name, for columns whose header is a plain `name`.
    public var csvTypes: [String: FieldType] = [:]
    /// The directory that relative asset paths are resolved against; `nil` means the current one.
    public var assetDirectory: URL?
    /// Whether `"deleted": true` items (the tombstones `stratus changes` and CloudKit's
    /// changes/zone answers carry) are read as ``RecordReadResult/deletion(_:recordType:line:)``;
    /// when false (the default) they are rejected, so that a reader for saving never deletes.
    public var readsDeletions = false
    /// The largest record (or NDJSON line, or CSV row) accepted, in bytes; larger ones are
    /// rejected so that memory stays bounded whatever the input.
    public var maximumRecordSize = 16 << 20
    /// How many bytes each read asks for.
    public var readChunkSize = 256 << 10

    /// Options for NDJSON or detected input, in the default zone, without schemas.
    public init() {}
}
