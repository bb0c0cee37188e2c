import Foundation

/// One record as a store holds it: the system columns and the stored field document
/// (``FieldDocument``), its texts as UTF-8 bytes that are valid only inside the call that hands
/// the row over. A job that writes records out (an export to CloudKit JSON) can write them from
/// here without making a ``Record`` of each, which is most of an export's work otherwise.
///
/// ```swift
/// try rows.forEachRow { row, record in
///     print(row.map { String(decoding: $0.recordName, as: UTF8.self) } ?? (try record()).recordID.recordName)
///     return true
/// }
/// ```
@_spi(StratusEngine)
public struct StoredRecordRow {
    public var recordName: UnsafeBufferPointer<UInt8>
    public var recordType: UnsafeBufferPointer<UInt8>
    /// nil where the store keeps none.
    public var changeTag: UnsafeBufferPointer<UInt8>?
    /// Seconds since 2001, as `Date.timeIntervalSinceReferenceDate`.
    public var creationDate: Double
    /// The creator's user record name.
    public var creator: UnsafeBufferPointer<UInt8>
    /// Seconds since 2001.
    public var modificationDate: Double
    /// The last modifier's user record name.
    public var modifier: UnsafeBufferPointer<UInt8>
    /// The parent's record name (in the record's zone), nil without a parent.
    public var parentName: UnsafeBufferPointer<UInt8>?
    /// The stored field document; nil for a record without one (no fields).
    public var document: UnsafeBufferPointer<UInt8>?

    public init(recordName: UnsafeBufferPointer<UInt8>, recordType: UnsafeBufferPointer<UInt8>, changeTag: UnsafeBufferPointer<UInt8>?,
                creationDate: Double, creator: UnsafeBufferPointer<UInt8>, modificationDate: Double, modifier: UnsafeBufferPointer<UInt8>,
                parentName: UnsafeBufferPointer<UInt8>?, document: UnsafeBufferPointer<UInt8>?) {
        self.recordName = recordName
        self.recordType = recordType
        self.changeTag = changeTag
        self.creationDate = creationDate
        self.creator = creator
        self.modificationDate = modificationDate
        self.modifier = modifier
        self.parentName = parentName
        self.document = document
    }
}

/// A page of a ``QueryStream`` as stored rows (``UndecodedQueryPage/storedRows``): every record
/// of the page, of one zone, with nothing left out and every field kept. An engine offers it
/// only when its page is exactly that: no desired keys, no rows it would leave out after
/// reading them.
///
/// ```swift
/// if let rows = page.storedRows {
///     try rows.forEachRow { row, record in
///         if let row, write(row) { return true }
///         write(try record())
///         return true
///     }
/// }
/// ```
@_spi(StratusEngine)
public protocol StoredRecordRows: Sendable {
    /// The zone of every row.
    var zoneID: RecordZone.ID { get }
    /// How many rows the page holds.
    var count: Int { get }
    /// Calls `body` with each row in order, and a function that makes that row into the record
    /// ``UndecodedQueryPage/decode()`` would give (for a row the caller cannot write from its
    /// stored form); stops after a row for which `body` answers false. A row the engine cannot
    /// hand over as stored (a damaged one) comes as nil, to be made into its record, whose
    /// decoding reports the damage. Callable from any thread, more than once.
    ///
    /// - Throws: what `body` throws.
    func forEachRow(_ body: (StoredRecordRow?, () throws -> Record) throws -> Bool) throws
}

extension StoredRecordRows {
    /// The first `count` rows as records.
    ///
    /// ```swift
    /// let records = try rows.records(count: rows.count)
    /// ```
    public func records(count: Int) throws -> [Record] {
        var records: [Record] = []
        records.reserveCapacity(Swift.min(count, self.count))
        guard count > 0 else { return records }
        try forEachRow { _, record in
            records.append(try record())
            return records.count < count
        }
        return records
    }
}
