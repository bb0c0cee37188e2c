/// The items of one import batch, in input order: records to save, deletions and rejected
/// items, each with its input line and its index among the input's items (for checkpoints).
///
/// A batch is written in segments, one after another in its transaction, each as a request of
/// its own: a store request saves before it deletes and names a record once, so a record named
/// again, or saved after a deletion, starts the next segment (see
/// ``ModifyRecordsOperation/init(preparedSegments:)``). Input whose names repeat is then
/// written in as few transactions as any other.
///
/// Parallel arrays rather than an array of tuples: destroying an array of tuples goes through
/// the runtime's generic witnesses element by element, which a bulk load notices.
struct ImportBatch {
    /// The records to save, each checked and prepared once on the reading task.
    private(set) var records: [PreparedSave] = []
    var recordLines: [Int] = []
    var recordItems: [Int] = []
    var deletions: [Record.ID] = []
    var deletionLines: [Int] = []
    var deletionItems: [Int] = []
    /// The owner each deletion's input zone had, for deletions from another owner's zone
    /// imported as the current user's (``ModifyRequest/deletedRecordOwners``).
    var deletionOwners: [Record.ID: String] = [:]
    /// Items the source or validation rejected, reported when the batch is settled so that
    /// every reject is reported in input order.
    var rejections: [RecordRejection] = []
    var rejectionItems: [Int] = []
    /// The record names in the batch's last segment: a name seen again starts the next segment
    /// (or, where an import does not write in segments, the next batch).
    var names: Set<String> = []
    /// Where each segment but the last ends in ``records`` and in ``deletions``.
    private(set) var segmentRecordEnds: [Int] = []
    private(set) var segmentDeletionEnds: [Int] = []
    /// Whether a record of the batch has a parent (kept as records are appended, so that a
    /// batch without any asks no question about parents).
    private(set) var hasParents = false
    /// The field data of its records (``Record/fieldDataSize``), which bounds what a batch holds.
    private(set) var fieldBytes = 0

    /// The field data after which a batch ends whatever its count: with the batches in flight,
    /// the import then holds a bounded amount of memory also for records of up to 1 MB (at the
    /// default 2,000 records a batch, such records needed tens of gigabytes).
    static let maximumFieldBytes = 32 << 20

    /// Whether the batch is to be written now: it holds `size` entries, or the most field data a batch holds.
    func isFull(atCount size: Int) -> Bool {
        count >= size || fieldBytes >= Self.maximumFieldBytes
    }

    init() {}

    /// An empty batch with room for `capacity` records, so that filling it does not regrow it.
    init(capacity: Int) {
        let capacity = min(max(capacity, 0), 1 << 16)
        records.reserveCapacity(capacity)
        recordLines.reserveCapacity(capacity)
        recordItems.reserveCapacity(capacity)
        names.reserveCapacity(capacity)
    }

    var count: Int { records.count + deletions.count + rejections.count }
    var segmentCount: Int { segmentRecordEnds.count + 1 }
    /// Whether the last segment holds a deletion: a save after it starts the next segment.
    var segmentHasDeletions: Bool { deletions.count > (segmentDeletionEnds.last ?? 0) }

    /// Ends the last segment: what is appended from now on is written after it.
    mutating func startSegment() {
        segmentRecordEnds.append(records.count)
        segmentDeletionEnds.append(deletions.count)
        names.removeAll(keepingCapacity: true)
    }

    /// Where segment `number`'s records and deletions are in ``records`` and ``deletions``.
    func segment(_ number: Int) -> (records: Range<Int>, deletions: Range<Int>) {
        let recordStart = number == 0 ? 0 : segmentRecordEnds[number - 1]
        let deletionStart = number == 0 ? 0 : segmentDeletionEnds[number - 1]
        let recordEnd = number < segmentRecordEnds.count ? segmentRecordEnds[number] : records.count
        let deletionEnd = number < segmentDeletionEnds.count ? segmentDeletionEnds[number] : deletions.count
        return (recordStart..<recordEnd, deletionStart..<deletionEnd)
    }

    /// The segments as the store request's (``ModifyRecordsOperation/Segment``).
    var requestSegments: [ModifyRecordsOperation.Segment] {
        (0..<segmentCount).map { number in
            let (records, deletions) = segment(number)
            return ModifyRecordsOperation.Segment(saves: Array(self.records[records]), deletes: Array(self.deletions[deletions]))
        }
    }
    var writeCount: Int { records.count + deletions.count }
    var isEmpty: Bool { count == 0 }

    mutating func append(_ record: PreparedSave, line: Int, item: Int) {
        if !hasParents && record.parent != nil { hasParents = true }
        fieldBytes += record.fieldDataSize
        records.append(record)
        recordLines.append(line)
        recordItems.append(item)
    }

    mutating func append(deletion id: Record.ID, owner: String? = nil, line: Int, item: Int) {
        if let owner { deletionOwners[id] = owner }
        deletions.append(id)
        deletionLines.append(line)
        deletionItems.append(item)
    }

    mutating func append(_ rejection: RecordRejection, item: Int) {
        rejections.append(rejection)
        rejectionItems.append(item)
    }

    /// Where each record and deletion of segment `number` is in the input, by ID (a segment
    /// names each record once).
    func places(inSegment number: Int = 0) -> [Record.ID: (line: Int, item: Int)] {
        guard number < segmentCount else { return [:] }
        let (recordRange, deletionRange) = segmentCount == 1 ? (records.indices, deletions.indices) : segment(number)
        var places: [Record.ID: (line: Int, item: Int)] = [:]
        for index in recordRange { places[records[index].recordID] = (recordLines[index], recordItems[index]) }
        for index in deletionRange { places[deletions[index]] = (deletionLines[index], deletionItems[index]) }
        return places
    }

    /// The item index of every entry, ascending.
    var itemIndexes: [Int] { (recordItems + deletionItems + rejectionItems).sorted() }

    /// The entries before input item `item`.
    func prefix(before item: Int) -> ImportBatch {
        filtered { $0 < item }
    }

    /// The entries from input item `item` on.
    func suffix(from item: Int) -> ImportBatch {
        filtered { $0 >= item }
    }

    /// The batch without the records and deletions whose IDs are in `ids`, and without rejections.
    func writes(excluding ids: Set<Record.ID>) -> ImportBatch {
        keepingWrites { id, _ in !ids.contains(id) }
    }

    private func filtered(_ keep: (Int) -> Bool) -> ImportBatch {
        var kept = keepingWrites { _, item in keep(item) }
        for (index, rejection) in rejections.enumerated() where keep(rejectionItems[index]) {
            kept.append(rejection, item: rejectionItems[index])
        }
        return kept
    }

    /// The records and deletions `keep` keeps (given each one's ID and item), segment by segment.
    private func keepingWrites(_ keep: (Record.ID, Int) -> Bool) -> ImportBatch {
        var kept = ImportBatch()
        for number in 0..<segmentCount {
            let (recordRange, deletionRange) = segment(number)
            if kept.writeCount > (kept.segmentRecordEnds.last ?? 0) + (kept.segmentDeletionEnds.last ?? 0) { kept.startSegment() }
            for index in recordRange where keep(records[index].recordID, recordItems[index]) {
                kept.names.insert(records[index].recordID.recordName)
                kept.append(records[index], line: recordLines[index], item: recordItems[index])
            }
            for index in deletionRange where keep(deletions[index], deletionItems[index]) {
                let id = deletions[index]
                kept.names.insert(id.recordName)
                kept.append(deletion: id, owner: deletionOwners[id], line: deletionLines[index], item: deletionItems[index])
            }
        }
        return kept
    }

    /// The distinct zones the batch writes to.
    var zoneIDs: Set<RecordZone.ID> {
        var zoneIDs: Set<RecordZone.ID> = []
        var last: RecordZone.ID?
        // Records mostly come zone by zone: a zone like the one before needs no hashing.
        for record in records where record.recordID.zoneID != last {
            last = record.recordID.zoneID
            zoneIDs.insert(record.recordID.zoneID)
        }
        for deletion in deletions where deletion.zoneID != last {
            last = deletion.zoneID
            zoneIDs.insert(deletion.zoneID)
        }
        return zoneIDs
    }
}
