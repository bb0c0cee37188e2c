import Foundation

/// What an engine offers inside one write transaction: storage primitives, and no policy.
///
/// The core opens a transaction with ``StorageEngine/writeRecords(in:_:)`` and drives it: it
/// reads stored records, applies the save rules (``RecordWriteRules``), orders parents before
/// children, plans cascades and decides atomicity; the engine stores rows and keeps its own
/// derived tables (change sequence, tombstones, reference, word and asset-content indexes)
/// true. Asset content is stored before the transaction (``AssetContentStore``); rows name it.
/// Store failures (busy, disk full) are thrown and roll the transaction back.
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

    /// Reads the stored records of `ids` ahead, in as few reads as the engine can, for the
    /// ``storedRecord(_:)`` calls that follow: each of those answers from what was read, unless
    /// the transaction wrote or deleted that record since. An engine whose reads cost no round
    /// trip may read nothing ahead (the default).
    func prefetchStoredRecords(_ ids: [Record.ID]) throws

    /// Whether a record with this ID is stored.
    func recordExists(_ id: Record.ID) throws -> Bool

    /// The stored record's change tag, or `nil` when there is none: what a deletion of a
    /// record read earlier checks (the default reads the whole record).
    func storedChangeTag(_ id: Record.ID) throws -> String?

    /// Inserts rows for records the caller believes new, all in one zone that exists, without
    /// reading first. Answers, for each row in order, whether it was inserted; a row whose name
    /// is already stored (or repeats an earlier row's) is not, and nothing of it is written.
    /// Rows carry no parent, assets or `.deleteSelf` references.
    func insertNewRecords(_ rows: [RecordRow]) throws -> [Bool]

    /// Writes a record's row, replacing the stored one when `replacing` is true, and brings the
    /// engine's derived data (references, words, tombstones, change position) up to date. Every
    /// system field of the row is written, its creation too: the core decides it (a restored
    /// record deleted and made again at its source has a new one).
    func writeRecord(_ row: RecordRow, replacing: Bool) throws

    /// Writes changed fields over a stored record in one step, without the caller reading the
    /// record first, when the stored record is what `update` expects: its change tag, type
    /// and creator (when given), no parent, and a document of fields only (no encrypted keys,
    /// no JSON extras) of at most ``StoredRecordUpdate/maximumStoredDocumentLength``
    /// characters. The row gets the update's system fields and the next change position, and
    /// its document becomes ``FieldDocument/merging(_:into:)`` of the changes.
    ///
    /// Answers `false`, writing nothing, when the stored record is otherwise (or missing), or
    /// when the engine would need the stored values to keep its derived data true (the zone's
    /// `.deleteSelf` references, named asset content, the type's word index): the caller then
    /// saves the record the general way, which reads it and finds out why.
    ///
    /// The answer is final when it is given; the row itself may be written later in the
    /// transaction (with others, in one statement), provided that every read or write that
    /// names the record, and every read of the table as a whole, sees it written, and that it
    /// is written before commit.
    func updateStoredRecord(_ update: StoredRecordUpdate) throws -> Bool

    /// ``updateStoredRecord(_:)`` for each update, in order, answering for each whether it was
    /// written: updates of distinct records of one zone. An engine with round trips makes them
    /// one; the answers are what one call per update would give.
    func updateStoredRecords(_ updates: [StoredRecordUpdate]) throws -> [Bool]

    /// Deletes a stored record and leaves a tombstone. Answers `false` when there was none.
    /// The tombstone names no hierarchy (empty roots, stored as such, not as unknown): in a
    /// zone without record-level shares a record is in none, and in a zone with them the core
    /// stores its roots (``recordTombstoneRoots(_:)``) before the transaction ends.
    func deleteRecord(_ id: Record.ID) throws -> Bool

    /// The names of the records in `id`'s zone whose `.deleteSelf` references point at `id`.
    func deleteSelfSources(of id: Record.ID) throws -> [String]

    /// How many records other than `source` hold a `.deleteSelf` reference to `target`.
    func deleteSelfReferenceCount(to target: Record.ID, excludingSource source: String) throws -> Int

    /// The stored schema of a record type of the transaction's environment, or `nil` when the
    /// environment has no such type. The core checks saves against it and grows it in
    /// development; the read must make a concurrent transaction that grows the same type wait
    /// or fail, so that two writers never disagree on a field's type (SQLite: the transaction
    /// is the store's only writer; PostgreSQL: lock the row).
    func recordTypeSchema(_ recordType: String) throws -> RecordTypeSchema?

    /// Stores a record type's schema (a type or fields development created on save) as part
    /// of the transaction, replacing the type's stored schema; indexes it declares are built
    /// as ``StorageEngine/modifySchema(storageContainer:_:)`` builds them.
    func saveRecordTypeSchema(_ schema: RecordTypeSchema) throws

    /// The roles and record types of the transaction's environment, as stored when the
    /// transaction read them. The core reads them only when development creates a type or
    /// fields, to keep the schema within its limits.
    func containerSchema() throws -> ContainerSchema

    /// Records how far a job got, in this transaction: after a crash the store says exactly
    /// which of the job's batches committed. Replaces the job's earlier position. `position`
    /// is an import's settled items (or a pipeline's batches); `text`, when given, a
    /// pipeline source's position (a query cursor, a change token), kept as it is.
    func saveJobProgress(_ job: String, position: Int64, text: String?) throws

    /// Records where the share `shareRecordName` of the transaction's database (in its own zone
    /// `zoneName`) is found: by its URL token and by each participant in `members`, replacing
    /// what was recorded for that share before (``ShareIndexEntry``). `rootRecordName` is the
    /// root of a record-level share, `nil` for a zone-wide share.
    func indexShare(_ shareRecordName: String, zoneName: String, token: String, rootRecordName: String?, members: [ShareIndexMember]) throws

    /// Forgets the index entries of the share `shareRecordName` in the zone `zoneName` of the
    /// transaction's database (the share was deleted).
    func removeShareFromIndex(_ shareRecordName: String, zoneName: String) throws

    /// The accepted participants of the shares of the zone `zoneName` of the transaction's
    /// database who keep subscriptions in their shared databases (of the container and
    /// environment), as the share index and the subscriptions stand in this transaction: whom
    /// a write of the zone may notify (``ShareIndexAcceptance``). One look per zone, so that a
    /// write costs the same however many participants keep no subscription.
    func subscribedShareMembers(inZone zoneName: String) throws -> [ShareIndexAcceptance]

    /// The roots of the record-level shares of the zone `zoneName` of the transaction's
    /// database, as the share index stands in this transaction, whoever accepted them: where
    /// the core keeps track of records moving between hierarchies (``HierarchyMove``).
    func shareRoots(inZone zoneName: String) throws -> Set<String>

    /// The records of the zone `zoneID` (which exists) whose `parent` is one of the records
    /// `parentNames` names, as this transaction sees them (its own writes included): each with
    /// its parent's name, its name and its type.
    func childRecords(of parentNames: [String], inZone zoneID: RecordZone.ID) throws -> [(parent: String, name: String, recordType: String)]

    /// Stores hierarchy moves of records of zones that exist, each at its zone's next change
    /// position, replacing an earlier move of the same record (and keeping its left roots).
    func recordHierarchyMoves(_ moves: [HierarchyMove]) throws

    /// Stores, on the tombstones of records this transaction deleted, the roots of the
    /// hierarchies each was in (``HierarchyMove/leftRoots``; none when it was in none), which
    /// ``ZoneChangeBatch/deletedRecordRoots`` answers. Only tombstones written before an
    /// engine kept roots, or by raw SQL, have them unknown (not in the batch's roots).
    func recordTombstoneRoots(_ deletions: [HierarchyMove]) throws

    /// Asset content that rows named before this transaction and no longer name (replaced or
    /// deleted records): what a collection checks once the transaction committed. Engines keep
    /// which rows name which content (``RecordRow/assetContentIdentifiers``) with every write.
    var releasedAssetContents: Set<String> { get }

    // MARK: Subscriptions and notifications (see SubscriptionStorage.swift)

    /// The version of the subscriptions of the transaction's database, as this transaction
    /// sees it (0 before the first); `nil` when the engine keeps no subscriptions.
    func subscriptionVersion() throws -> Int64?

    /// Every subscriber's subscriptions of the transaction's database, as this transaction sees them.
    func fetchSubscriptions() throws -> SubscriptionSet

    /// The subscription version of `database`, another database of the transaction's
    /// container: the shared database of a participant of a share of the transaction's
    /// database, whose subscriptions the transaction's writes may fire. `nil` when the engine
    /// keeps no subscriptions.
    func subscriptionVersion(of database: DatabaseContext) throws -> Int64?

    /// The subscriptions of `database` (see ``subscriptionVersion(of:)``), as this transaction sees them.
    func fetchSubscriptions(of database: DatabaseContext) throws -> SubscriptionSet

    /// Deletes subscriptions of the transaction's database (`firesOnce` subscriptions that
    /// fired) and moves its subscription version. Answers the ones this transaction deleted:
    /// of two transactions that fire one subscription, only one deletes it.
    func deleteSubscriptions(_ keys: [SubscriptionKey]) throws -> Set<SubscriptionKey>

    /// Appends notifications to their subscribers' feeds in the transaction's container, in
    /// order, each at the next place of its feed. Called once, after every write of the
    /// transaction; the places follow commit order, as change positions do.
    func appendNotifications(_ rows: [NotificationRow]) throws
}

extension RecordWriteTransaction {
    /// An engine without a one-step update answers that it wrote nothing: every save then
    /// takes the general way.
    public func updateStoredRecord(_ update: StoredRecordUpdate) throws -> Bool { false }

    /// One ``updateStoredRecord(_:)`` after another.
    public func updateStoredRecords(_ updates: [StoredRecordUpdate]) throws -> [Bool] {
        try updates.map { try updateStoredRecord($0) }
    }

    /// Reads nothing ahead: each ``storedRecord(_:)`` reads its record.
    public func prefetchStoredRecords(_ ids: [Record.ID]) throws {}

    /// The whole stored record's tag (or a prefetched one's).
    public func storedChangeTag(_ id: Record.ID) throws -> String? { try storedRecord(id)?.recordChangeTag }
}

/// Changed fields to write over a stored record without reading it first
/// (``RecordWriteTransaction/updateStoredRecord(_:)``): what the stored record must be, what
/// the row gets, and the changes.
///
/// ```swift
/// let update = StoredRecordUpdate(recordID: id, recordType: "Product", expectedChangeTag: tag, requiredCreatorRecordName: nil,
///                                 maximumStoredDocumentLength: 100_000, modificationDate: now, lastModifiedUserRecordName: user,
///                                 changeTag: newTag, changes: FieldDocument.encodedChanges(["price": .double(1.1)]))
/// let written = try transaction.updateStoredRecord(update)
/// ```
@_spi(StratusEngine)
public struct StoredRecordUpdate: Sendable {
    public let recordID: Record.ID
    /// The type the stored record must have.
    public let recordType: String
    /// The change tag the stored record must have.
    public let expectedChangeTag: String
    /// The user record name of the stored record's creator, when the write is allowed to its creator only.
    public let requiredCreatorRecordName: String?
    /// The most characters the stored document may have (the merged record then stays within
    /// the size limit; see ``FieldDocument/maximumFieldDataPerCharacter``).
    public let maximumStoredDocumentLength: Int
    public let modificationDate: Date
    public let lastModifiedUserRecordName: String
    /// The record's new change tag.
    public let changeTag: String
    /// The changed fields, as ``FieldDocument/encodedChanges(_:)`` encodes them.
    public let changes: [UInt8]

    public init(recordID: Record.ID, recordType: String, expectedChangeTag: String, requiredCreatorRecordName: String?, maximumStoredDocumentLength: Int,
                modificationDate: Date, lastModifiedUserRecordName: String, changeTag: String, changes: [UInt8]) {
        self.recordID = recordID
        self.recordType = recordType
        self.expectedChangeTag = expectedChangeTag
        self.requiredCreatorRecordName = requiredCreatorRecordName
        self.maximumStoredDocumentLength = maximumStoredDocumentLength
        self.modificationDate = modificationDate
        self.lastModifiedUserRecordName = lastModifiedUserRecordName
        self.changeTag = changeTag
        self.changes = changes
    }
}

/// One record as a write transaction stores it: every system field set, its field values and
/// their stored form.
///
/// ```swift
/// var document: [UInt8] = []
/// FieldDocument.encode(fields, encryptedKeys: [], into: &document)
/// let row = RecordRow(recordID: id, recordType: "Todo", systemFields: system, fields: fields,
///                     encryptedKeys: [], parent: nil, document: document)
/// try transaction.writeRecord(row, replacing: false)
/// ```
@_spi(StratusEngine)
public final class RecordRow: Sendable {
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
    /// What the record's CloudKit JSON held beyond the model; ``document`` holds it too.
    public let jsonExtras: Record.JSONExtras

    public init(recordID: Record.ID, recordType: String, systemFields: Record.SystemFields, fields: [String: FieldValue],
                encryptedKeys: Set<String>, parent: Record.Reference?, document: [UInt8], deleteSelfTargets: Set<String> = [],
                jsonExtras: Record.JSONExtras = Record.JSONExtras()) {
        self.recordID = recordID
        self.recordType = recordType
        self.systemFields = systemFields
        self.fields = fields
        self.encryptedKeys = encryptedKeys
        self.parent = parent
        self.document = document
        self.deleteSelfTargets = deleteSelfTargets
        self.jsonExtras = jsonExtras
    }

    /// The SHA-256 identifiers of the stored content this row's assets hold: what the engine
    /// keeps referenced while the row exists.
    public var assetContentIdentifiers: Set<String> { FieldValue.assetContentIdentifiers(in: fields) }
}

extension FieldValue {
    /// The assets the value holds: one for an asset, each of an asset list, none otherwise.
    package var assets: [Asset] {
        switch self {
        case .asset(let asset): [asset]
        case .assetList(let assets): assets
        default: []
        }
    }

    /// The SHA-256 identifiers of the stored content the assets among `fields` name.
    package static func assetContentIdentifiers(in fields: [String: FieldValue]) -> Set<String> {
        // Runs for every row written and read: most rows hold no asset, so nothing is
        // allocated until one is found (a generic `flatMap` here cost an export 3% of its CPU).
        var identifiers: Set<String> = []
        for value in fields.values {
            switch value {
            case .asset(let asset):
                if let identifier = asset.storedIdentifier { identifiers.insert(identifier) }
            case .assetList(let assets):
                for asset in assets { if let identifier = asset.storedIdentifier { identifiers.insert(identifier) } }
            default:
                continue
            }
        }
        return identifiers
    }
}
