/// The items of an import that wait for a record later in the input: records whose parent is
/// neither stored nor written before them, and the later items of such a record, which wait
/// behind it so that a record's lines still apply in input order.
///
/// A real export need not list parents first, and an import writes in batches: a child in one
/// batch whose parent is in a later one would fail the parent check (`referenceViolation`) only
/// because of where the batches end. So a record whose parent is missing waits, and is written
/// once a batch that wrote its parent is settled; what still waits when the input ends is
/// written then, and the store's rules decide (the parent may have come meanwhile, or it is
/// rejected). The importer's checkpoints name the waiting items (``ImportCheckpoint/pendingItems``),
/// so that a resumed import reads them again.
///
/// ```swift
/// var waits = ImportParentWaits()
/// waits.wait(child, forParent: parentID)
/// let ready = waits.release(parent: parentID)   // [child], once the parent is written
/// ```
struct ImportParentWaits {
    /// A waiting item: a record to save or a deletion, where it is in the input.
    struct Item {
        enum Entry {
            case save(PreparedSave)
            /// A deletion, and the owner its input zone had when it was imported as the current
            /// user's (``ModifyRequest/deletedRecordOwners``).
            case deletion(Record.ID, owner: String?)
        }

        let entry: Entry
        let line: Int
        /// Its index among the input's items.
        let item: Int

        var recordID: Record.ID {
            switch entry {
            case .save(let save): save.recordID
            case .deletion(let id, _): id
            }
        }
    }

    /// The waiting items of each record, in input order: the first waits for a parent, the
    /// others behind it.
    private var queues: [Record.ID: [Item]] = [:]
    /// The records whose first waiting item waits for each parent.
    private var children: [Record.ID: [Record.ID]] = [:]
    /// How many items wait.
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    /// Whether items of the record with `id` wait (a later item of it must wait behind them).
    func isWaiting(_ id: Record.ID) -> Bool { !queues.isEmpty && queues[id] != nil }

    /// Whether a deletion of the record with `id` waits (behind the record's first waiting item).
    func waitsToDelete(_ id: Record.ID) -> Bool {
        guard !queues.isEmpty, let queue = queues[id] else { return false }
        return queue.contains { if case .deletion = $0.entry { true } else { false } }
    }

    /// Whether items wait for the record with `id` as their parent.
    func isAwaited(_ id: Record.ID) -> Bool { !children.isEmpty && children[id] != nil }

    /// `item`, whose parent `parent` is missing, waits for it (behind the items of its record
    /// that wait already, if any).
    mutating func wait(_ item: Item, forParent parent: Record.ID) {
        let id = item.recordID
        if queues[id] == nil { children[parent, default: []].append(id) }
        queues[id, default: []].append(item)
        count += 1
    }

    /// `item` waits behind the waiting items of its record.
    ///
    /// - Precondition: ``isWaiting(_:)`` for its record (a programmer error).
    mutating func wait(behind item: Item) {
        precondition(queues[item.recordID] != nil, "an item waits behind its record's waiting items only")
        queues[item.recordID]!.append(item)
        count += 1
    }

    /// Takes the items that waited for the record `parent` (now written), and every item behind
    /// them, in input order.
    mutating func release(parent: Record.ID) -> [Item] {
        guard !children.isEmpty, let ids = children.removeValue(forKey: parent) else { return [] }
        var released: [Item] = []
        for id in ids {
            if let queue = queues.removeValue(forKey: id) { released += queue }
        }
        count -= released.count
        return released.sorted { $0.item < $1.item }
    }

    /// Takes every waiting item, in input order.
    mutating func releaseAll() -> [Item] {
        let all = queues.values.flatMap { $0 }.sorted { $0.item < $1.item }
        queues = [:]
        children = [:]
        count = 0
        return all
    }

    /// The input indexes of the waiting items.
    var items: [Int] { queues.values.flatMap { $0.map(\.item) } }
}

extension ImportCheckpoint {
    /// The store's record of a job's progress beside its position: the items still waiting, as
    /// ascending runs (`pending:3-9,15`), after the items rejected so far when there are any
    /// (`rejected:4;pending:3-9,15`); nil when there is neither.
    static func progressText(pendingItems items: [Int], itemsRejected: Int) -> String? {
        let rejected = itemsRejected > 0 ? "rejected:\(itemsRejected)" : nil
        guard !items.isEmpty else { return rejected }
        var parts: [String] = []
        var sorted = items.sorted()[...]
        while let start = sorted.popFirst() {
            var end = start
            while let next = sorted.first, next <= end + 1 {
                end = max(end, next)
                sorted.removeFirst()
            }
            parts.append(start == end ? "\(start)" : "\(start)-\(end)")
        }
        return (rejected.map { $0 + ";" } ?? "") + "pending:" + parts.joined(separator: ",")
    }

    /// What ``progressText(pendingItems:itemsRejected:)`` wrote: the items still waiting (none
    /// for text it did not write), and the items rejected (nil when the text does not say,
    /// as a record of an earlier version does not).
    static func progress(fromText text: String?) -> (pendingItems: [Int], itemsRejected: Int?) {
        guard var rest = text?[...] else { return ([], nil) }
        var rejected: Int?
        if rest.hasPrefix("rejected:") {
            let end = rest.firstIndex(of: ";") ?? rest.endIndex
            rejected = Int(rest[rest.index(rest.startIndex, offsetBy: "rejected:".count)..<end])
            rest = end == rest.endIndex ? "" : rest[rest.index(after: end)...]
        }
        guard rest.hasPrefix("pending:") else { return ([], rejected) }
        var items: [Int] = []
        for part in rest.dropFirst("pending:".count).split(separator: ",") {
            let bounds = part.split(separator: "-", maxSplits: 1).compactMap { Int($0) }
            guard let first = bounds.first, bounds.count == (part.contains("-") ? 2 : 1), let last = bounds.last, first <= last else { continue }
            items.append(contentsOf: first...last)
        }
        return (items, rejected)
    }
}
