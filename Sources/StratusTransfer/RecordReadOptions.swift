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
    /// Whether ``zoneID`` was chosen for this input (`stratus import --zone`), rather than
    /// assumed. An envelope larger than ``maximumRecordSize`` whose `zoneID` the reader cannot
    /// find ahead of its records (a `records/modify` request may name it after its operations)
    /// is refused before its first record unless the zone was chosen: its records would
    /// otherwise go into the default zone, over the records stored there under their names.
    ///
    /// ```swift
    /// options.zoneID = RecordZone.ID(zoneName: "Late")
    /// options.zoneIsChosen = true
    /// ```
    public var zoneIsChosen = false
    /// Schemas by record type; they type the values that carry no `"type"`.
    public var schemas: [String: RecordTypeSchema] = [:]
    /// CSV: the record type of every row when there is no `recordType` column.
    public var csvRecordType: String?
    /// CSV: column types by field name, for columns whose header is a plain `name`.
    public var csvTypes: [String: FieldType] = [:]
    /// CSV: the columns of ``csvTypes`` that hold encrypted values (`--types name:ENCRYPTED_STRING`).
    public var csvEncryptedFields: Set<String> = []
    /// The folder asset files are read from. When set, an asset's `downloadURL` that is a path
    /// is read inside it only: relative to it, never absolute, no `..`, no symbolic link unless
    /// ``followsAssetSymlinks`` (see ``Stratus/Asset/init(path:in:followsSymlinks:)``); and a
    /// CloudKit asset (an `https` `downloadURL`) whose content was downloaded into it, named by
    /// its `fileChecksum` (in base64url: `+` as `-`, `/` as `_`), gets that content.
    ///
    /// When `nil`, ``assetPaths`` says what a path means.
    public var assetDirectory: URL?
    /// Whether symbolic links inside ``assetDirectory`` are followed (to files inside it only).
    public var followsAssetSymlinks = false
    /// What an asset path means without ``assetDirectory``: refused by default, because input
    /// is untrusted and a path of this machine in it (`/etc/shadow`, `../../secrets`) would be
    /// read into the store. A program that reads input it wrote itself may choose `.anywhere`.
    ///
    /// ```swift
    /// options.assetDirectory = URL(fileURLWithPath: "/srv/import/assets")   // paths inside it only
    /// // or, for input this program wrote: options.assetPaths = .anywhere
    /// ```
    public var assetPaths = AssetPaths.refused
    /// The store's own content folder (where it keeps each content under its SHA-256), whose
    /// files a plain export names by absolute `file:` URLs. Such a path is read there, confined
    /// as ``assetDirectory``'s are (no `..`, no symbolic link), so that an export without an
    /// asset folder imports back into its own store; a path anywhere else is still refused.
    ///
    /// ```swift
    /// options.storeContentDirectory = URL(fileURLWithPath: "photos.sqlite.assets/sha256")
    /// ```
    public var storeContentDirectory: URL?

    /// What an asset's path means when no asset folder is given.
    ///
    /// ```swift
    /// var options = RecordReadOptions()
    /// options.assetPaths = .anywhere   // input this program wrote, naming its own files
    /// ```
    public enum AssetPaths: Sendable {
        /// A path of this machine: absolute, or relative to the current directory (for a
        /// program that reads input it wrote itself, naming its own files).
        case anywhere
        /// Refused, each record with a reason naming the fix (the default, and what
        /// `stratus import` does: files are read only inside a folder the user names).
        case refused
    }
    /// Whether CloudKit's own records are kept: record names starting with `_` (CloudKit
    /// reserves them, `CKRecord.ID`: "must not start with an underscore") and record types and
    /// field keys with a `.` (`cloudkit.share`, `cloudkit.title`). Otherwise each is rejected
    /// with that reason.
    public var keepsSystemRecords = false
    /// Whether `"deleted": true` items (the tombstones `stratus changes` and CloudKit's
    /// changes/zone answers carry) are read as ``RecordReadResult/deletion(_:recordType:line:)``;
    /// when false (the default) they are rejected, so that a reader for saving never deletes.
    public var readsDeletions = false
    /// What names the records of `records/modify` `create` operations that have no
    /// `recordName`: each gets a UUID drawn from this seed, the operation's bytes and its place
    /// in the input. `nil` (the default) draws a random seed for each reader, so that, as in
    /// CloudKit, every read creates new records; a fixed seed names the same records each time
    /// the same input is read.
    ///
    /// ```swift
    /// options.generatedNameSeed = "nightly-2026-11-30"
    /// ```
    public var generatedNameSeed: String?
    /// The largest record (or NDJSON line, or CSV row) accepted, in bytes; larger ones are
    /// rejected so that memory stays bounded whatever the input.
    public var maximumRecordSize = 16 << 20
    /// How many bytes each read asks for.
    public var readChunkSize = 256 << 10
    /// Asked before each read of the input (and, while a pipe or terminal gives nothing, four
    /// times a second): when it answers true, the read in progress ends with ``Stratus/StratusError``
    /// `operationCancelled`, which a ``Stratus/RecordImporter`` whose ``Stratus/RecordImporter/isCancelled``
    /// it asks takes as its stop. Without it, an input that never ends a record (`/dev/zero`, a
    /// silent pipe) would hold the reader, and the import, past any request to stop.
    ///
    /// ```swift
    /// let importer = RecordImporter(database: database)
    /// options.stopRequested = { importer.isCancelled }
    /// ```
    public var stopRequested: (@Sendable () -> Bool)?

    /// Options for NDJSON or detected input, in the default zone, without schemas.
    public init() {}
}
