import Foundation

/// Keeps track, inside a write, of the records whose place in their zone's share hierarchies
/// the write changes, and stores their ``HierarchyMove``s when it ends: a record given a new
/// `parent` moves with everything below it; the records below a deleted record lose the
/// hierarchies it was in; a record made under the name orphans still name as their parent
/// takes them (and theirs) into its hierarchies.
///
/// What a record reached before is read from the parents the request's records had when the
/// request first touched them (a request may move or delete several records of one chain), and
/// what it reaches after from the zone as the request left it. Only zones with record-level
/// shares (one look at the share index per zone) are tracked, so that a write of a zone nobody
/// shares record by record costs nothing more. Participants' zone changes report from the
/// moves what left their hierarchies as deleted and what came in as changed
/// (``SharedDatabaseEngine``).
///
/// ```swift
/// var moves = ShareHierarchyMoves(context: context)
/// try moves.saved(id, recordType: "Item", parentBefore: "groceries", parentAfter: nil, created: false, in: transaction)
/// let (moved, deleted) = try moves.finish(in: transaction)   // roots whose hierarchies changed, by zone name
/// ```
struct ShareHierarchyMoves {
    /// Where a record of the request stood before it: stored with this parent, or not stored.
    private enum Before {
        case stored(parent: String?)
        case absent
    }

    let context: DatabaseContext
    private var rootsByZone: [RecordZone.ID: Set<String>] = [:]
    /// The last zone asked about, compared by identity: a request's items share their zone's ID.
    private var lastZone: (id: RecordZone.ID, roots: Set<String>)?
    /// The records the request saved with another parent, created or deleted, in tracked zones,
    /// each as it stood before the request first touched it.
    private var before: [Record.ID: Before] = [:]
    private var order: [Record.ID] = []
    private var deleted: Set<Record.ID> = []
    private var types: [Record.ID: String] = [:]
    /// The root a deleted share shared (a zone-wide share: none).
    private var sharedRoots: [Record.ID: String?] = [:]

    init(context: DatabaseContext) {
        self.context = context
    }

    /// The roots of the record-level shares of `zoneID`, when it is one of the owner's custom
    /// zones of a private database (which alone hold shares); empty otherwise.
    private mutating func roots(of zoneID: RecordZone.ID, in transaction: any RecordWriteTransaction) throws -> Set<String> {
        if let lastZone, lastZone.id === zoneID { return lastZone.roots }
        let roots: Set<String>
        if context.storageScope != .private || zoneID.isDefault || !context.storedZoneOwner(zoneID).isEmpty {
            roots = []
        } else if let known = rootsByZone[zoneID] {
            roots = known
        } else {
            roots = try transaction.shareRoots(inZone: zoneID.zoneName)
            rootsByZone[zoneID] = roots
        }
        lastZone = (zoneID, roots)
        return roots
    }

    /// Whether the write keeps track of moves in `zoneID`: a deletion there reads its record's
    /// parent first (``deleted(_:stored:)``). Asked before a zone's first write, so that the
    /// look at the share index comes before the engine streams rows.
    mutating func tracks(_ zoneID: RecordZone.ID, in transaction: any RecordWriteTransaction) throws -> Bool {
        try !roots(of: zoneID, in: transaction).isEmpty
    }

    private mutating func note(_ id: Record.ID, _ state: Before) {
        guard before[id] == nil else { return }
        before[id] = state
        order.append(id)
    }

    /// Notes a record saved, with its parent's name before (when it was stored) and after.
    mutating func saved(_ id: Record.ID, recordType: String, parentBefore: String?, parentAfter: String?, created: Bool,
                        in transaction: any RecordWriteTransaction) throws {
        guard created || parentBefore != parentAfter, try tracks(id.zoneID, in: transaction) else { return }
        note(id, created ? .absent : .stored(parent: parentBefore))
        deleted.remove(id)
        types[id] = recordType
    }

    /// Notes a record deleted, as it was stored (in a zone ``tracks(_:in:)``).
    mutating func deleted(_ id: Record.ID, stored record: Record) {
        note(id, .stored(parent: record.parent?.recordID.recordName))
        deleted.insert(id)
        types[id] = record.recordType
        if record.recordType == Record.SystemType.share { sharedRoots[id] = StoredShare(record.jsonExtras).rootRecordName }
    }

    /// Stores the moves of the records whose hierarchies the request changed, as the request
    /// left the zone: each record it touched (but those it deleted, which their tombstones
    /// report, and those it created, which their own changes report) and every record below
    /// one. A deleted record's tombstone gets the roots of the hierarchies it was in (a
    /// share's, the root it shared), so that only their participants are handed it. Answers,
    /// by zone name, the roots whose hierarchies a record left or came into (`moved`), and
    /// those of the hierarchies deleted records were in (`deleted`: every zone where the
    /// request deleted a record it followed, the roots empty when none was in a hierarchy).
    mutating func finish(in transaction: any RecordWriteTransaction) throws -> (moved: [String: Set<String>], deleted: [String: Set<String>]) {
        guard !order.isEmpty else { return ([:], [:]) }
        defer { (before, order, deleted, types, sharedRoots) = ([:], [], [], [:], [:]) }
        var walk = Walk(transaction: transaction, before: before)
        for id in deleted { walk.know(id, .absent) }
        var moves: [HierarchyMove] = []
        var tombstones: [HierarchyMove] = []
        var touched: [String: Set<String>] = [:]
        var deletedRoots: [String: Set<String>] = [:]
        for (zoneID, touchedHere) in Dictionary(grouping: order, by: \.zoneID) {
            let roots = try self.roots(of: zoneID, in: transaction)
            // The records below those touched, a level at a time for all of them at once; a
            // record touched itself is reached as such, not again below another.
            var candidates: [(id: Record.ID, recordType: String?)] = touchedHere.filter { !deleted.contains($0) }.map { ($0, types[$0]) }
            var seen = Set(touchedHere.map(\.recordName))
            var level = touchedHere.map(\.recordName)
            while !level.isEmpty {
                var next: [String] = []
                for child in try transaction.childRecords(of: level, inZone: zoneID) where seen.insert(child.name).inserted {
                    let id = Record.ID(recordName: child.name, zoneID: zoneID)
                    walk.know(id, .stored(parent: child.parent))
                    candidates.append((id, child.recordType))
                    next.append(child.name)
                }
                level = next
            }
            for id in touchedHere where deleted.contains(id) {
                let left = try sharedRoots[id].map { Set([$0].compactMap { $0 }) } ?? walk.roots(from: id.recordName, in: zoneID, among: roots, before: true)
                tombstones.append(HierarchyMove(recordID: id, recordType: types[id] ?? "", leftRoots: left))
                deletedRoots[zoneID.zoneName, default: []].formUnion(left)
            }
            for (id, knownType) in candidates {
                if case .absent = before[id] { continue }
                let rootsBefore = try walk.roots(from: id.recordName, in: zoneID, among: roots, before: true)
                let rootsAfter = try walk.roots(from: id.recordName, in: zoneID, among: roots, before: false)
                guard rootsBefore != rootsAfter else { continue }
                guard let recordType = try knownType ?? transaction.storedRecord(id)?.recordType else { continue }
                moves.append(HierarchyMove(recordID: id, recordType: recordType, leftRoots: rootsBefore.subtracting(rootsAfter)))
                touched[zoneID.zoneName, default: []].formUnion(rootsBefore.symmetricDifference(rootsAfter))
            }
        }
        if !tombstones.isEmpty { try transaction.recordTombstoneRoots(tombstones) }
        guard !moves.isEmpty else { return ([:], deletedRoots) }
        try transaction.recordHierarchyMoves(moves)
        return (touched, deletedRoots)
    }

    /// Follows `parent` chains up in the transaction's view of a zone, as it is (after) or as
    /// it was before the request (the parents the request's records had), remembering what it
    /// found along each chain.
    private struct Walk {
        let transaction: any RecordWriteTransaction
        let before: [Record.ID: Before]
        /// Each record as it stands now, once read.
        private var links: [Record.ID: Before] = [:]
        private var reached: [Bool: [Record.ID: Set<String>]] = [true: [:], false: [:]]

        init(transaction: any RecordWriteTransaction, before: [Record.ID: Before]) {
            self.transaction = transaction
            self.before = before
        }

        /// Notes how the record `id` stands now, where the request knows it already.
        mutating func know(_ id: Record.ID, _ state: Before) {
            links[id] = state
        }

        /// Whether the record `id` is stored, and with which parent (was, `before`: a record
        /// the request did not touch stood before as it stands now).
        private mutating func link(_ id: Record.ID, before wanted: Bool) throws -> Before {
            if wanted, let state = before[id] { return state }
            if let known = links[id] { return known }
            let found = try transaction.storedRecord(id).map { Before.stored(parent: $0.parent?.recordID.recordName) } ?? .absent
            links[id] = found
            return found
        }

        /// The roots among `roots` on the chain from the record `name` up, itself included;
        /// none when the record is not stored (was not, `before`).
        mutating func roots(from name: String, in zoneID: RecordZone.ID, among roots: Set<String>, before wanted: Bool) throws -> Set<String> {
            if let known = reached[wanted]?[Record.ID(recordName: name, zoneID: zoneID)] { return known }
            var chain: [Record.ID] = []
            var seen: Set<String> = []
            var current: String? = name
            var above: Set<String> = []
            // A chain that comes back on itself, or goes deeper than any hierarchy, is not
            // remembered: what its records reach depends on where a walk entered it.
            var complete = true
            while let name = current {
                let id = Record.ID(recordName: name, zoneID: zoneID)
                if let known = reached[wanted]?[id] { above = known; break }
                guard chain.count < SharedDatabaseAccess.maximumDepth, seen.insert(name).inserted else { complete = false; break }
                guard case .stored(let parent) = try link(id, before: wanted) else { break }
                chain.append(id)
                current = parent
            }
            var found: Set<String> = []
            for id in chain.reversed() {
                if roots.contains(id.recordName) { above.insert(id.recordName) }
                if complete { reached[wanted]?[id] = above }
                if id.recordName == name { found = above }
            }
            return found
        }
    }
}
