import Foundation

/// What an engine offers inside one write transaction: storage primitives, and no policy.
///
/// The core opens a transaction with ``StorageEngine/writeRecords(in:_:)`` and drives it: it
/// reads stored records, applies the save rules (``RecordWriteRules``), orders parents before
/// children, plans cascades and decides atomicity; the engine stores rows and keeps its own
/// derived tables (change sequence, tombstones, reference and word indexes) true. Item
/// problems the engine finds (a source file of an asset that cannot be read) come back as
/// values; store failures (busy, disk full) are thrown and roll the transaction back.
///
/// A transaction is used by one thread, for the duration of the `writeRecords` call only.
///
/// ```swift
/// let stored = try engine.writeRecords(in: context) { transaction in
///     try transaction.storedRecord(id)
/// }
/// ```
@_spi(StratusEngine)
public protocol RecordWriteTransaction: AnyObject {
    /// The capabilities of a zone of the transaction's database, or `nil` when the zone does not
    /// exist. The default zone always exists (an engine creates its row on first use).
    func zoneCapabilities(_ zoneID: RecordZone.ID) throws -> RecordZone.Capabilities?

    /// The record as stored, or `nil`.
    func storedRecord(_ id: Record.ID) throws -> Record?

    /// Whether a record with this ID is stored.
    func recordExists(_ id: Record.ID) throws -> Bool

    /// Inserts rows for records the caller believes new, all in one zone that exists, without
    /// reading first. Answers, for each row in order, whether it was inserted; a row whose name
    /// is already stored (or repeats an earlier row's) is not, and nothing of it is written.
    /// Rows carry no parent, assets or `.deleteSelf` references.
    func insertNewRecords(_ rows: [RecordRow]) throws -> [Bool]

    /// Writes a record's row, replacing the stored one when `replacing` is true, and brings the
    /// engine's derived data (references, words, tombstones, change position) up to date.
    func writeRecord(_ row: RecordRow, replacing: Bool) throws

    /// Deletes a stored record and leaves a tombstone. Answers `false` when there was none.
    func deleteRecord(_ id: Record.ID) throws -> Bool

    /// The names of the records in `id`'s zone whose `.deleteSelf` references point at `id`.
    func deleteSelfSources(of id: Record.ID) throws -> [String]

    /// How many records other than `source` hold a `.deleteSelf` reference to `target`.
    func deleteSelfReferenceCount(to target: Record.ID, excludingSource source: String) throws -> Int

    /// Records how far a job got, in this transaction: after a crash the store says exactly
    /// which of the job's batches committed. Replaces the job's earlier position. `position`
    /// is an import's settled items (or a pipeline's batches); `text`, when given, a
    /// pipeline source's position (a query cursor, a change token), kept as it is.
    func saveJobProgress(_ job: String, position: Int64, text: String?) throws

    /// Copies the contents of the assets in `fields` into the store, answering the fields with
    /// assets that name their stored copies, or the item's error (`assetFileNotFound`).
    func storeAssets(in fields: [String: FieldValue], of id: Record.ID) throws -> Result<[String: FieldValue], StratusError>
}

/// One record as a write transaction stores it: every system field set, its field values and
/// their stored form.
///
/// ```swift
/// let row = RecordRow(recordID: id, recordType: "Todo", systemFields: system, fields: fields,
///                     encryptedKeys: [], parent: nil, document: FieldDocument.encodedBytes(fields, encryptedKeys: []))
/// try transaction.writeRecord(row, replacing: false)
/// ```
@_spi(StratusEngine)
public struct RecordRow: Sendable {
    public let recordID: Record.ID
    public let recordType: String
    /// Creation and modification dates, users and change tag: all set.
    public let systemFields: Record.SystemFields
    public let fields: [String: FieldValue]
    public let encryptedKeys: Set<String>
    public let parent: Record.Reference?
    /// ``fields`` and ``encryptedKeys`` as a ``FieldDocument``.
    public let document: [UInt8]
    /// Names of the records (in the same zone) this record's `.deleteSelf` references point at.
    public let deleteSelfTargets: Set<String>

    public init(recordID: Record.ID, recordType: String, systemFields: Record.SystemFields, fields: [String: FieldValue],
                encryptedKeys: Set<String>, parent: Record.Reference?, document: [UInt8], deleteSelfTargets: Set<String> = []) {
        self.recordID = recordID
        self.recordType = recordType
        self.systemFields = systemFields
        self.fields = fields
        self.encryptedKeys = encryptedKeys
        self.parent = parent
        self.document = document
        self.deleteSelfTargets = deleteSelfTargets
    }
}
