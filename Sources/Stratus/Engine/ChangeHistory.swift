import Foundation

/// A place in a change history, as an engine records it: which history, and how far into it.
///
/// Every write and delete in a zone takes the next value of the zone's sequence, in commit
/// order; every zone change takes the next value of its database's sequence. A position names
/// the last change a reader has seen. Operations wrap positions in ``ServerChangeToken``s, which
/// add whose history it is; engines only compare positions with their own histories.
///
/// ```swift
/// let batch = try engine.fetchZoneChanges(ZoneChangesRequest(zoneID: zone, after: nil, limit: 400), in: context)
/// let resumeFrom: ChangePosition = batch.position
/// ```
@_spi(StratusEngine)
public struct ChangePosition: Hashable, Sendable, Codable {
    /// Which life of the history the sequence counts in. A zone deleted and created again
    /// starts a new history, and so does another store; a position from an older life is
    /// expired. Empty for "before anything happened".
    public var incarnation: String
    /// The sequence value of the last change seen; 0 before the first change.
    public var sequence: Int64

    public init(incarnation: String, sequence: Int64) {
        self.incarnation = incarnation
        self.sequence = sequence
    }

    /// Before the first change of any history.
    public static let origin = ChangePosition(incarnation: "", sequence: 0)
}

/// What a change reader asks of one zone.
///
/// ```swift
/// let request = ZoneChangesRequest(zoneID: photos, after: lastPosition, limit: 400, desiredKeys: ["title"])
/// let batch = try engine.fetchZoneChanges(request, in: context)
/// ```
@_spi(StratusEngine)
public struct ZoneChangesRequest: Hashable, Sendable {
    public var zoneID: RecordZone.ID
    /// The last change already seen; `nil` reads the zone from its beginning.
    public var position: ChangePosition?
    /// The most changes to answer; more may remain (see ``ZoneChangeBatch/moreComing``).
    public var limit: Int
    /// The keys changed records carry; all keys when `nil`.
    public var desiredKeys: [String]?
    /// The last change to answer, when not the zone's latest: a read that must end (a
    /// pipeline that saves into the zone it reads) passes the first batch's
    /// ``ZoneChangeBatch/zoneEnd``. Engines read up to ``ChangeHistoryRules/end(of:current:after:)``.
    public var through: ChangePosition?
    /// Whether the batch carries the zone's hierarchy moves (``ZoneChangeBatch/hierarchyMoves``):
    /// what the shared database reads for its participants; other readers leave it false.
    public var includesHierarchyMoves: Bool

    public init(zoneID: RecordZone.ID, after position: ChangePosition?, limit: Int, desiredKeys: [String]? = nil, through: ChangePosition? = nil,
                includesHierarchyMoves: Bool = false) {
        self.zoneID = zoneID
        self.position = position
        self.limit = limit
        self.desiredKeys = desiredKeys
        self.through = through
        self.includesHierarchyMoves = includesHierarchyMoves
    }
}

/// A record whose place in its zone's share hierarchies changed without a change of its own: a
/// record above it moved (a new `parent`) or was deleted, or a record was made under the name
/// its parent chain names. The record itself may have moved too. The core writes these
/// (``RecordWriteTransaction/recordHierarchyMoves(_:)``) in zones with record-level shares, so
/// that a participant's zone changes report a record that left their hierarchy as deleted, and
/// one that came into it as changed, as CloudKit's do; engines keep them as change history, at
/// a change position of the zone, the latest move of a record replacing an earlier one.
///
/// ```swift
/// try transaction.recordHierarchyMoves([HierarchyMove(recordID: milk, recordType: "Item", leftRoots: ["groceries"])])
/// ```
@_spi(StratusEngine)
public struct HierarchyMove: Hashable, Sendable {
    public var recordID: Record.ID
    public var recordType: String
    /// The roots of record-level shares whose hierarchies the record left (empty when it only
    /// came into hierarchies). An engine replacing an earlier move of the record keeps the
    /// roots of both.
    public var leftRoots: Set<String>

    public init(recordID: Record.ID, recordType: String, leftRoots: Set<String>) {
        self.recordID = recordID
        self.recordType = recordType
        self.leftRoots = leftRoots
    }

    /// Root names as engines store them: a JSON array, sorted.
    public static func encodedRoots(_ roots: Set<String>) -> String {
        (try? String(decoding: JSONEncoder().encode(roots.sorted()), as: UTF8.self)) ?? "[]"
    }

    /// The root names of ``encodedRoots(_:)``'s text; none for anything else.
    public static func roots(decoding text: String?) -> Set<String> {
        guard let text, let names = try? JSONDecoder().decode([String].self, from: Data(text.utf8)) else { return [] }
        return Set(names)
    }
}

/// One zone's changes after a position, oldest first.
///
/// A record changed several times since the position appears once, in its current state, at
/// the place of its latest change (as CloudKit coalesces changes); a deleted record appears
/// as its tombstone. One record name appears at most once per batch.
///
/// ```swift
/// for change in batch.changes {
///     switch change {
///     case .changed(let record): upsert(record)
///     case .deleted(let id, let recordType): remove(id, recordType)
///     }
/// }
/// if batch.moreComing { next = batch.position }
/// ```
@_spi(StratusEngine)
public struct ZoneChangeBatch: Sendable {
    /// One change of a zone: the type ``RecordZoneChangeFeed`` hands to apps.
    public typealias Change = RecordZoneChangeFeed.Change

    public var changes: [Change]
    /// Where the next batch starts: after the last change answered, or the zone's current
    /// position (or the request's ``ZoneChangesRequest/through``) when nothing remains.
    public var position: ChangePosition
    /// Whether changes after ``position`` remain (up to the request's `through`).
    public var moreComing: Bool
    /// The zone's latest position when the batch was read, whatever the request's bound; nil
    /// from an engine that does not say.
    public var zoneEnd: ChangePosition?
    /// The hierarchy moves within the batch's positions, when the request asked for them
    /// (``ZoneChangesRequest/includesHierarchyMoves``): counted in its limit with its changes.
    public var hierarchyMoves: [HierarchyMove]
    /// For the deletions of the batch whose tombstone holds the roots of the hierarchies its
    /// record was in (every tombstone an engine writes, ``RecordWriteTransaction/deleteRecord(_:)``,
    /// with the roots ``RecordWriteTransaction/recordTombstoneRoots(_:)`` gave), by record name;
    /// none when it was in none. A deletion not here has them unknown (a tombstone of an older
    /// version, a raw-SQL deletion). Filled when the request asked for hierarchy moves.
    public var deletedRecordRoots: [String: Set<String>]

    public init(changes: [Change], position: ChangePosition, moreComing: Bool, zoneEnd: ChangePosition? = nil, hierarchyMoves: [HierarchyMove] = [],
                deletedRecordRoots: [String: Set<String>] = [:]) {
        self.changes = changes
        self.position = position
        self.moreComing = moreComing
        self.zoneEnd = zoneEnd
        self.hierarchyMoves = hierarchyMoves
        self.deletedRecordRoots = deletedRecordRoots
    }
}

/// A database's zone changes after a position, oldest first.
///
/// ```swift
/// let batch = try engine.fetchDatabaseChanges(after: nil, limit: 400, in: context)
/// let changedZones = batch.changes.compactMap { if case .zoneChanged(let id) = $0 { id } else { nil } }
/// ```
@_spi(StratusEngine)
public struct DatabaseChangeBatch: Sendable {
    /// One zone change of a database.
    public enum Change: Hashable, Sendable {
        /// The zone was created, or records in it changed.
        case zoneChanged(RecordZone.ID)
        /// The zone was deleted, with its records.
        case zoneDeleted(RecordZone.ID)
    }

    public var changes: [Change]
    /// Where the next batch starts.
    public var position: ChangePosition
    /// Whether changes after ``position`` remain.
    public var moreComing: Bool
    /// The history sequence of each change, in the order of ``changes``; empty when the
    /// engine does not say.
    public var sequences: [Int64]
    /// The database's latest change sequence when the batch was read; `nil` when the engine
    /// does not say.
    public var currentSequence: Int64?

    public init(changes: [Change], position: ChangePosition, moreComing: Bool, sequences: [Int64] = [], currentSequence: Int64? = nil) {
        self.changes = changes
        self.position = position
        self.moreComing = moreComing
        self.sequences = sequences
        self.currentSequence = currentSequence
    }
}

/// What an engine did with a zone save-and-delete request: a result for every item asked for.
///
/// ```swift
/// let outcome = try engine.modifyZones(saving: [RecordZone(zoneName: "Photos")], deleting: [], in: context) { _, _ in }
/// let photos = try outcome.saveResults[RecordZone.ID(zoneName: "Photos")]?.get()
/// ```
@_spi(StratusEngine)
public struct ZoneModifyOutcome: Sendable {
    /// For each zone to save: the zone as stored (its capabilities), or its error.
    public var saveResults: [RecordZone.ID: Result<RecordZone, StratusError>]
    /// For each zone ID to delete: success or its error.
    public var deleteResults: [RecordZone.ID: Result<Void, StratusError>]

    public init(saveResults: [RecordZone.ID: Result<RecordZone, StratusError>] = [:], deleteResults: [RecordZone.ID: Result<Void, StratusError>] = [:]) {
        self.saveResults = saveResults
        self.deleteResults = deleteResults
    }
}

/// What a compaction of change history removed.
///
/// ```swift
/// let removed = try await database.compactChangeHistory(retention: 30 * 86_400)
/// print(removed.recordTombstonesRemoved, removed.zoneTombstonesRemoved)
/// ```
public struct ChangeHistoryCompaction: Hashable, Sendable {
    /// Record tombstones removed.
    public var recordTombstonesRemoved: Int
    /// Zone tombstones (deleted zones) removed.
    public var zoneTombstonesRemoved: Int

    public init(recordTombstonesRemoved: Int = 0, zoneTombstonesRemoved: Int = 0) {
        self.recordTombstonesRemoved = recordTombstonesRemoved
        self.zoneTombstonesRemoved = zoneTombstonesRemoved
    }
}

/// The rules of change histories that every engine applies the same way: which positions a
/// history still answers, and how a batch is cut from its changed records and tombstones.
///
/// ```swift
/// let after = try ChangeHistoryRules.sequence(after: request.position, incarnation: life, current: zoneSequence, start: historyStart, of: "zone 'Photos'")
/// let batch = ChangeHistoryRules.batch(of: changes, limit: request.limit, current: zoneSequence, incarnation: life)
/// ```
@_spi(StratusEngine)
public enum ChangeHistoryRules {
    /// The incarnation of one life of a zone's history: the store's identity, then the zone's
    /// row (a zone deleted and created again gets a new row). Every engine spells it this way,
    /// so that a position tells another store's history from an earlier life of this one.
    ///
    /// ```swift
    /// let incarnation = ChangeHistoryRules.zoneIncarnation(store: storeIdentity, zoneRow: zone.row)
    /// ```
    public static func zoneIncarnation(store: String, zoneRow: Int64) -> String {
        store + "." + String(zoneRow)
    }

    /// The store identity an incarnation begins with (a database history's incarnation is the
    /// store's identity itself).
    static func store(ofIncarnation incarnation: String) -> Substring {
        incarnation.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
    }

    /// The sequence value to read after, once `position` is known to be a place in this
    /// history: the same life of it (position 0 fits every life), not ahead of it, and not
    /// before its retained part.
    ///
    /// - Throws: `changeTokenExpired` saying which.
    public static func sequence(after position: ChangePosition?, incarnation: String, current: Int64, start: Int64, of what: String) throws(StratusError) -> Int64 {
        guard let position else { return 0 }
        func expired(_ reason: String) -> StratusError {
            StratusError(.changeTokenExpired, "the change token no longer fits \(what): \(reason); fetch again without a token")
        }
        if position.sequence > 0 && position.incarnation != incarnation {
            // Another store's token was never a place here, and is no expired one.
            if store(ofIncarnation: position.incarnation) != store(ofIncarnation: incarnation) {
                var error = StratusError(.changeTokenExpired, "the change token is a place in \(what) of another store; fetch again without a token")
                error.underlyingError = ServerChangeToken.Mismatch(tokenHistory: "\(what) of another store", requestedHistory: "\(what) of this store",
                                                                   isFromAnotherStore: true)
                throw error
            }
            throw expired("it comes from an earlier life of it (the zone was deleted and created again)")
        }
        if position.sequence > current {
            throw expired("it is ahead of the store's history (was the store restored from an older copy?)")
        }
        if position.sequence < 0 {
            throw expired("it names no place in it (a negative position: was the token edited?)")
        }
        if position.sequence < start {
            throw expired("what came after it was compacted away (deletions and notifications are kept for the store's retention only)")
        }
        return position.sequence
    }

    /// The last sequence value a zone read answers: the zone's `current` one, or the request's
    /// ``ZoneChangesRequest/through`` when that comes first (never before `after`, so that a
    /// position never goes back).
    ///
    /// ```swift
    /// let end = ChangeHistoryRules.end(of: request, current: zone.sequence, after: after)
    /// ```
    public static func end(of request: ZoneChangesRequest, current: Int64, after: Int64) -> Int64 {
        guard let through = request.through else { return current }
        return min(current, max(through.sequence, after))
    }

    /// A batch from the changes an engine read after a position: each source (changed records,
    /// tombstones) read in sequence order up to `limit + 1`, merged in sequence order and cut
    /// at `limit`. The batch ends at its last change when more remain, else at `current`.
    public static func batch<Change>(of changes: [(sequence: Int64, change: Change)], limit: Int, current: Int64, incarnation: String) -> (changes: [Change], position: ChangePosition, moreComing: Bool) {
        var ordered = changes.sorted { $0.sequence < $1.sequence }
        let moreComing = ordered.count > limit
        if moreComing { ordered.removeLast(ordered.count - limit) }
        let reached = moreComing ? ordered[ordered.count - 1].sequence : current
        return (ordered.map(\.change), ChangePosition(incarnation: incarnation, sequence: reached), moreComing)
    }

    /// A zone's batch from what an engine read after a position, each source in sequence order
    /// up to `limit + 1`: changed records and tombstones (`changes`) and, when asked for,
    /// hierarchy moves (`moves`), merged and cut as ``batch(of:limit:current:incarnation:)``
    /// cuts one. `current` is the batch's last position to answer, `zoneEnd` the zone's latest.
    /// `deletedRecordRoots`: the roots tombstones hold, by record name
    /// (``ZoneChangeBatch/deletedRecordRoots``), kept for the deletions of the batch.
    public static func zoneBatch(of changes: [(sequence: Int64, change: ZoneChangeBatch.Change)], moves: [(sequence: Int64, move: HierarchyMove)],
                                 deletedRecordRoots: [String: Set<String>] = [:], limit: Int, current: Int64, incarnation: String,
                                 zoneEnd: ChangePosition) -> ZoneChangeBatch {
        guard !moves.isEmpty || !deletedRecordRoots.isEmpty else {
            let cut = batch(of: changes, limit: limit, current: current, incarnation: incarnation)
            return ZoneChangeBatch(changes: cut.changes, position: cut.position, moreComing: cut.moreComing, zoneEnd: zoneEnd)
        }
        enum Item { case change(ZoneChangeBatch.Change), move(HierarchyMove) }
        let cut = batch(of: changes.map { ($0.sequence, Item.change($0.change)) } + moves.map { ($0.sequence, Item.move($0.move)) },
                        limit: limit, current: current, incarnation: incarnation)
        var result = ZoneChangeBatch(changes: [], position: cut.position, moreComing: cut.moreComing, zoneEnd: zoneEnd)
        for item in cut.changes {
            switch item {
            case .change(let change):
                result.changes.append(change)
                if case .deleted(let id, _) = change, let roots = deletedRecordRoots[id.recordName] { result.deletedRecordRoots[id.recordName] = roots }
            case .move(let move): result.hierarchyMoves.append(move)
            }
        }
        return result
    }

    /// A database's batch from the zone changes an engine read after a position, cut as
    /// ``batch(of:limit:current:incarnation:)`` cuts one, with each change's sequence and the
    /// database's current sequence: what tells the deletions a client reading from the
    /// beginning never had (``FetchDatabaseChangesOperation``).
    public static func databaseBatch(of changes: [(sequence: Int64, change: DatabaseChangeBatch.Change)], limit: Int, current: Int64, incarnation: String) -> DatabaseChangeBatch {
        let cut = batch(of: changes, limit: limit, current: current, incarnation: incarnation)
        // Sequences are unique in a database's history: the sorted prefix is the cut's.
        let sequences = Array(changes.map(\.sequence).sorted().prefix(cut.changes.count))
        return DatabaseChangeBatch(changes: cut.changes, position: cut.position, moreComing: cut.moreComing, sequences: sequences, currentSequence: current)
    }

    /// A zone's history answers only when the zone records it.
    ///
    /// - Throws: `invalidArguments` for a zone created without the `fetchChanges` capability.
    public static func requireHistory(of zoneID: RecordZone.ID, capabilities: RecordZone.Capabilities) throws(StratusError) {
        guard capabilities.contains(.fetchChanges) else {
            throw StratusError(.invalidArguments, "zone '\(zoneID.zoneName)' was created without the fetchChanges capability", zoneID: zoneID)
        }
    }

    /// A zone that does not exist: the default zone (outside the shared database) has an empty
    /// history until its first write (again after a reset of the environment removed it); any
    /// other zone is not found. `store` is the store's identity, which tells a position of an
    /// earlier life of the default zone (expired) from another store's.
    ///
    /// - Throws: `zoneNotFound`, or `changeTokenExpired` for a position the empty default zone cannot have.
    public static func historyOfMissingZone(_ request: ZoneChangesRequest, in database: DatabaseContext, store: String) throws(StratusError) -> ZoneChangeBatch {
        guard request.zoneID.isDefault, database.scope != .shared else {
            throw ZoneRules.zoneNotFound(request.zoneID, database)
        }
        // No row yet: no life of the zone has this incarnation (rows are numbered from 1).
        _ = try sequence(after: request.position, incarnation: zoneIncarnation(store: store, zoneRow: 0), current: 0, start: 0, of: "the default zone")
        return ZoneChangeBatch(changes: [], position: request.position ?? .origin, moreComing: false)
    }
}
