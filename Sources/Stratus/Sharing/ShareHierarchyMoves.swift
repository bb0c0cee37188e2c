import Foundation

/// Keeps track, inside a write, of the records whose place in their zone's share hierarchies
/// the write changes, and stores their ``HierarchyMove``s when it ends: a record given a new
/// `parent` moves with everything below it; the records below a deleted record lose the
/// hierarchies it was in; a record made under the name orphans still name as their parent
/// takes them (and theirs) into its hierarchies.
///
/// Only zones with record-level shares (one look at the share index per zone) are tracked, so
/// that a write of a zone nobody shares record by record costs nothing more. Participants'
/// zone changes report from the moves what left their hierarchies as deleted and what came in
/// as changed (``SharedDatabaseEngine``).
///
/// ```swift
/// var moves = ShareHierarchyMoves(context: context)
/// try moves.saved(id, recordType: "Item", parentBefore: "groceries", parentAfter: nil, created: false, in: transaction)
/// let movedIn = try moves.finish(in: transaction)   // zone names
/// ```
struct ShareHierarchyMoves {
    private enum Event {
        case parentChanged(Record.ID, recordType: String, before: String?, after: String?)
        case deleted(Record.ID, parent: String?)
        case created(Record.ID)
    }

    let context: DatabaseContext
    private var rootsByZone: [RecordZone.ID: Set<String>] = [:]
    /// The last zone asked about, compared by identity: a request's items share their zone's ID.
    private var lastZone: (id: RecordZone.ID, roots: Set<String>)?
    private var events: [Event] = []

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
    /// parent first (``deleted(_:parent:)``).
    mutating func tracks(_ zoneID: RecordZone.ID, in transaction: any RecordWriteTransaction) throws -> Bool {
        try !roots(of: zoneID, in: transaction).isEmpty
    }

    /// Notes a record saved, with its parent's name before (when it was stored) and after.
    mutating func saved(_ id: Record.ID, recordType: String, parentBefore: String?, parentAfter: String?, created: Bool,
                        in transaction: any RecordWriteTransaction) throws {
        guard created || parentBefore != parentAfter, try tracks(id.zoneID, in: transaction) else { return }
        events.append(created ? .created(id) : .parentChanged(id, recordType: recordType, before: parentBefore, after: parentAfter))
    }

    /// Notes a record deleted, with the name of the parent it had (in a zone ``tracks(_:in:)``).
    mutating func deleted(_ id: Record.ID, parent: String?) {
        events.append(.deleted(id, parent: parent))
    }

    /// Stores the moves of what the write's events changed, as the write left the zone.
    /// Answers the names of the zones it stored moves in.
    mutating func finish(in transaction: any RecordWriteTransaction) throws -> Set<String> {
        guard !events.isEmpty else { return [] }
        defer { events = [] }
        var walk = Walk(transaction: transaction)
        // Deletions and new records change nothing for a record without children: most of
        // them, asked about together per zone.
        var asked: [RecordZone.ID: [String]] = [:]
        for event in events {
            switch event {
            case .deleted(let id, _), .created(let id): asked[id.zoneID, default: []].append(id.recordName)
            case .parentChanged: break
            }
        }
        var parents: [RecordZone.ID: Set<String>] = [:]
        for (zoneID, names) in asked {
            parents[zoneID] = Set(try transaction.childRecords(of: names, inZone: zoneID).map(\.parent))
        }
        var moves: [Record.ID: HierarchyMove] = [:]
        var order: [Record.ID] = []
        func add(_ id: Record.ID, _ recordType: String, leftRoots: Set<String>) {
            if moves[id] == nil { order.append(id) }
            moves[id, default: HierarchyMove(recordID: id, recordType: recordType, leftRoots: [])].leftRoots.formUnion(leftRoots)
        }
        for event in events {
            switch event {
            case .parentChanged(let id, let recordType, let before, let after):
                let roots = try self.roots(of: id.zoneID, in: transaction)
                let rootsBefore = try walk.roots(from: before, in: id.zoneID, among: roots)
                let rootsAfter = try walk.roots(from: after, in: id.zoneID, among: roots)
                guard rootsBefore != rootsAfter else { continue }
                let left = rootsBefore.subtracting(rootsAfter)
                add(id, recordType, leftRoots: left)
                for child in try walk.descendants(of: id) { add(child.id, child.recordType, leftRoots: left) }
            case .deleted(let id, let parent):
                guard parents[id.zoneID]?.contains(id.recordName) == true else { continue }
                let roots = try self.roots(of: id.zoneID, in: transaction)
                var left = try walk.roots(from: parent, in: id.zoneID, among: roots)
                if roots.contains(id.recordName) { left.insert(id.recordName) }
                guard !left.isEmpty else { continue }
                for child in try walk.descendants(of: id) { add(child.id, child.recordType, leftRoots: left) }
            case .created(let id):
                guard parents[id.zoneID]?.contains(id.recordName) == true,
                      try !walk.roots(from: id.recordName, in: id.zoneID, among: self.roots(of: id.zoneID, in: transaction)).isEmpty else { continue }
                for child in try walk.descendants(of: id) { add(child.id, child.recordType, leftRoots: []) }
            }
        }
        guard !order.isEmpty else { return [] }
        try transaction.recordHierarchyMoves(order.compactMap { moves[$0] })
        return Set(order.map(\.zoneID.zoneName))
    }

    /// Follows `parent` chains up and down in the transaction's view of a zone.
    private struct Walk {
        let transaction: any RecordWriteTransaction
        private var parents: [Record.ID: String?] = [:]

        init(transaction: any RecordWriteTransaction) {
            self.transaction = transaction
        }

        /// The roots among `roots` on the chain from the record `name` up (itself included).
        mutating func roots(from name: String?, in zoneID: RecordZone.ID, among roots: Set<String>) throws -> Set<String> {
            var found: Set<String> = []
            var current = name
            var seen: Set<String> = []
            while let name = current, seen.count < SharedDatabaseAccess.maximumDepth, seen.insert(name).inserted {
                if roots.contains(name) { found.insert(name) }
                let id = Record.ID(recordName: name, zoneID: zoneID)
                if let known = parents[id] {
                    current = known
                } else {
                    current = try transaction.storedRecord(id)?.parent?.recordID.recordName
                    parents[id] = .some(current)
                }
            }
            return found
        }

        /// Every record below `id`, a level at a time (a chain that comes back is followed once).
        func descendants(of id: Record.ID) throws -> [(id: Record.ID, recordType: String)] {
            var found: [(id: Record.ID, recordType: String)] = []
            var seen: Set<String> = [id.recordName]
            var level = [id.recordName]
            while !level.isEmpty {
                var next: [String] = []
                for child in try transaction.childRecords(of: level, inZone: id.zoneID) where seen.insert(child.name).inserted {
                    found.append((Record.ID(recordName: child.name, zoneID: id.zoneID), child.recordType))
                    next.append(child.name)
                }
                level = next
            }
            return found
        }
    }
}
