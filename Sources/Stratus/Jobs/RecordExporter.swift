import Foundation
import Synchronization

/// Exports every record a query matches into a ``RecordSink``, the job behind
/// `stratus export`: page by page, reading the next page while one is written, with progress
/// and cancellation. Into a `RecordWriter` of `StratusTransfer`, pages are encoded on
/// several threads at once and written in order, the bytes of writing record by record;
/// record JSON is encoded from the rows the store read, where its engine offers them, without
/// making the records (see `StoredRecordRows` in the engine SPI). Memory holds a few pages at most (three read ahead, and up to one per core, at least two,
/// being encoded or written; a page's bytes are freed once written), however many records
/// are exported.
///
/// ```swift
/// let query = Query(recordType: "Todo", predicate: try QueryPredicate(format: "checked == 0"))
/// query.sortDescriptors = [RecordSortDescriptor(key: "createdAt", ascending: false)]
/// let exporter = RecordExporter(database: database, query: query, limit: 10_000)
/// let summary = try await exporter.run(into: writer)
/// try writer.finish()
/// print("exported \(summary.exported)")
/// ```
public final class RecordExporter: Sendable {
    /// Why an export ended.
    ///
    /// ```swift
    /// if summary.end == .cancelled { print("stopped after \(summary.exported) records") }
    /// ```
    public enum End: Sendable, Hashable {
        /// Every matching record (up to the limit) was written.
        case finished
        /// ``RecordExporter/cancel()`` or task cancellation stopped it after a page.
        case cancelled
    }

    /// What an export did.
    ///
    /// ```swift
    /// let summary = try await exporter.run(into: writer)
    /// print(summary.exported, summary.end)
    /// ```
    public struct Summary: Sendable, Hashable {
        /// Records written to the sink.
        public var exported = 0
        /// Why the export ended.
        public var end = End.finished

        /// An empty summary.
        public init() {}
    }

    /// The database read.
    public let database: Database
    /// What to export, in its sort order.
    public let query: Query
    /// The zone to read; nil: every zone of the database, as ``QueryOperation/zoneID``, zone
    /// after zone (see ``Database/allRecords(matching:inZoneWith:desiredKeys:pageSize:)``). A
    /// record JSON writer then names each record's zone with
    /// `RecordJSONWriter.Options.writesEveryZoneID`.
    public let zoneID: RecordZone.ID?
    /// The fields to export; nil: every field.
    public let desiredKeys: [String]?
    /// The most records to export; nil: every match, 0: none.
    public let limit: Int?
    /// Records read per page.
    public let pageSize: Int
    private let cancelled = Atomic<Bool>(false)

    /// An export of what `query` matches in `zoneID`.
    ///
    /// ```swift
    /// let exporter = RecordExporter(database: database, query: Query(recordType: "Note"), desiredKeys: ["title"])
    /// ```
    ///
    /// - Precondition: `pageSize` is positive and `limit` is not negative (programmer errors).
    public init(
        database: Database, query: Query, zoneID: RecordZone.ID? = nil, desiredKeys: [String]? = nil, limit: Int? = nil,
        pageSize: Int = 1_000
    ) {
        precondition(pageSize > 0, "the page size must be positive")
        precondition((limit ?? 0) >= 0, "the limit cannot be negative")
        self.database = database
        self.query = query
        self.zoneID = zoneID
        self.desiredKeys = desiredKeys
        self.limit = limit
        self.pageSize = pageSize
    }

    /// Asks a running export to stop after the page being written; callable from any thread.
    /// A cancel before ``run(into:progress:)`` stops that run after its first page; once a run
    /// has returned, the exporter can run again.
    ///
    /// ```swift
    /// signalSource.setEventHandler { exporter.cancel() }
    /// ```
    public func cancel() {
        cancelled.store(true, ordering: .relaxed)
        // A read waiting on the server (a lock another transaction holds) stops now.
        reading.withLock { $0 }?.stop()
    }

    /// The read of the running export, which ``cancel()`` stops.
    private let reading = Mutex<QueryResultSequence.PageReader?>(nil)

    /// Whether ``cancel()`` was called or the running task was cancelled.
    public var isCancelled: Bool { cancelled.load(ordering: .relaxed) || Task.isCancelled }

    /// Writes every matching record, in the query's order, to `sink`.
    ///
    /// ```swift
    /// let summary = try await exporter.run(into: writer) { exported in print(exported) }
    /// ```
    ///
    /// - Parameter progress: called with the number exported after each page.
    ///
    /// The sink is written by the export's own task, not the caller's actor: under Swift 6,
    /// make it in the function that calls `run` (or make it `Sendable`), rather than keeping it
    /// in an actor's properties, which the compiler refuses to send.
    /// - Returns: how many records were written and why it ended.
    /// - Throws: what the query or the sink throws; records already written stay written.
    public func run(into sink: some RecordSink, progress: (@Sendable (Int) -> Void)? = nil) async throws -> Summary {
        var summary = Summary()
        let limit = self.limit ?? Int.max
        guard limit > 0 else { return summary }
        // A cancel asked of this run ends with it: an exporter kept for a nightly job runs again.
        defer { cancelled.store(false, ordering: .relaxed) }
        // The sequence reads and decodes the next pages while this one is written, so that
        // reading, decoding and writing overlap.
        var pages = records().makeAsyncIterator()
        reading.withLock { $0 = pages.pageReader }
        defer {
            reading.withLock { $0 = nil }
            pages.finish()
        }
        let batchSink = sink as? any RecordBatchSink
        // Writing records from their stored rows skips making them, most of the work; asked
        // before the first page, so that every page comes so.
        if batchSink?.encodesStoredRows == true { pages.keepStoredRows() }
        do {
            guard let first = try await pages.nextPage() else {
                if pages.pageReader.wasStopped { summary.end = .cancelled }
                progress?(0)
                return summary
            }
            if let batchSink, let encoder = batchSink.batchEncoder(first: try first.firstRecord()) {
                try await writeEncoded(first: first, rest: &pages, into: batchSink, encoder: encoder, limit: limit, summary: &summary, progress: progress)
            } else {
                try await writeEach(first: first, rest: &pages, into: sink, limit: limit, summary: &summary, progress: progress)
            }
        } catch let error as StratusError where error.code == .operationCancelled && isCancelled {
            // The caller's cancel, met by the read before a page ended.
            progress?(summary.exported)
            summary.end = .cancelled
            return summary
        }
        // A cancel that stopped the read before a page came ends the pages early: not finished.
        if summary.end == .finished, pages.pageReader.wasStopped, summary.exported < limit { summary.end = .cancelled }
        if summary.end == .finished { progress?(summary.exported) }
        return summary
    }

    /// Pages encoded or waiting to be written at once, beside the pages read ahead: one per
    /// core (the cooperative pool's width). With one more, an export's peak memory was 1.27×
    /// what it was before pages were encoded on several threads.
    private static let batchesInFlight = Swift.max(2, ProcessInfo.processInfo.activeProcessorCount)

    /// Writes each record through ``RecordSink/write(_:)`` on this task.
    private func writeEach(
        first: QueryResultSequence.Page, rest pages: inout QueryResultSequence.Iterator, into sink: some RecordSink, limit: Int, summary: inout Summary,
        progress: (@Sendable (Int) -> Void)?
    ) async throws {
        var page: QueryResultSequence.Page? = first
        while let records = page {
            for record in try records.records() {
                try sink.write(record)
                summary.exported += 1
                if summary.exported >= limit { return }
                if summary.exported % pageSize == 0 {
                    progress?(summary.exported)
                    if isCancelled {
                        summary.end = .cancelled
                        return
                    }
                }
            }
            pages.release(records)
            page = try await pages.nextPage()
        }
    }

    /// Encodes pages on the cooperative pool's threads, a few at once, and writes them here in
    /// order: encoding a record's bytes is most of an export's work on its own task, and one
    /// core doing it all kept the reading and decoding threads waiting. Progress and
    /// cancellation come at the same counts as ``writeEach``'s, so the output is the same;
    /// a stored row that cannot be decoded fails after the records before it, where a page of
    /// records fails whole when it is read.
    private func writeEncoded(
        first: QueryResultSequence.Page, rest pages: inout QueryResultSequence.Iterator, into sink: any RecordBatchSink, encoder: any RecordBatchEncoder,
        limit: Int, summary: inout Summary, progress: (@Sendable (Int) -> Void)?
    ) async throws {
        var pending: [(page: QueryResultSequence.Page, count: Int, encoding: Task<EncodedRecordBatch, Never>)] = []
        // Each batch is freed once written, sized by the page written last so that it seldom
        // grows: buffers kept for the next pages stayed at the largest page's size (twice it,
        // grown by doubling), and an export's peak memory grew with the number of records.
        var lastBatchBytes = 64 << 10
        var waiting: QueryResultSequence.Page? = first
        var submitted = 0
        var exhausted = false
        do {
            while true {
                while pending.count < Self.batchesInFlight && !exhausted {
                    let page: QueryResultSequence.Page?
                    if let first = waiting {
                        page = first
                        waiting = nil
                    } else {
                        page = try await pages.nextPage()
                    }
                    guard let page else {
                        exhausted = true
                        break
                    }
                    let count = Swift.min(page.count, limit - submitted)
                    submitted += count
                    exhausted = submitted >= limit
                    let batch = EncodedRecordBatch(capacity: lastBatchBytes + lastBatchBytes / 8)
                    pending.append((page, count, Task.detached {
                        switch page {
                        case .records(let records): encoder.encode(records.prefix(count), into: batch)
                        case .stored(let rows): encoder.encode(rows, count: count, into: batch)
                        }
                        return batch
                    }))
                }
                guard !pending.isEmpty else { return }
                let (page, count, encoding) = pending.removeFirst()
                let batch = await encoding.value
                var written = 0
                while written < count {
                    // Progress and cancellation at every multiple of the page size, as when
                    // writing record by record (a zone's last page can be short).
                    let part = Swift.min(count - written, pageSize - summary.exported % pageSize)
                    try sink.write(batch, records: written..<written + part)
                    written += part
                    summary.exported += part
                    if summary.exported >= limit { break }
                    if summary.exported % pageSize == 0 {
                        progress?(summary.exported)
                        if isCancelled {
                            summary.end = .cancelled
                            pages.release(page)
                            await Self.finish(pending, releasingInto: pages)
                            return
                        }
                    }
                }
                pages.release(page)
                if count == pageSize { lastBatchBytes = batch.bytes.count }
            }
        } catch {
            await Self.finish(pending, releasingInto: pages)
            throw error
        }
    }

    /// Waits for the encodings still running, so that none outlives the export, and frees
    /// their pages.
    private static func finish(_ pending: [(page: QueryResultSequence.Page, count: Int, encoding: Task<EncodedRecordBatch, Never>)], releasingInto pages: QueryResultSequence.Iterator) async {
        for (page, _, encoding) in pending {
            _ = await encoding.value
            pages.release(page)
        }
    }

    /// Every field of the matching records and the type of its first value, read once more:
    /// what CSV columns need before the first row (a schema need not declare every field).
    ///
    /// ```swift
    /// let columns = try await exporter.fieldTypes()   // ["due": .timestamp, "title": .string]
    /// ```
    ///
    /// A read of its own: see ``fieldColumns()`` for the CSV writer's `csvFieldsAreEveryField`.
    ///
    /// - Throws: what the query throws.
    public func fieldTypes() async throws -> [String: FieldType] {
        try await fieldColumns().types
    }

    /// ``fieldTypes()``, and the fields whose first value is an encrypted value (a CSV column
    /// `name:ENCRYPTED_TYPE`).
    ///
    /// This is a read of its own, before ``run(into:)``'s: a writer can add a field in
    /// between. Give a CSV writer these columns with `csvFieldsAreEveryField` set, so that such
    /// a field fails the export rather than being left out.
    ///
    /// ```swift
    /// let (types, encrypted) = try await exporter.fieldColumns()   // encrypted: ["secret"]
    /// ```
    ///
    /// - Throws: what the query throws.
    public func fieldColumns() async throws -> (types: [String: FieldType], encrypted: Set<String>) {
        var types: [String: FieldType] = [:]
        var encrypted: Set<String> = []
        var read = 0
        let limit = self.limit ?? Int.max
        guard limit > 0 else { return (types, encrypted) }
        for try await record in records() {
            let (_, fields, encryptedKeys, _, _) = record.contents
            for (key, value) in fields where types[key] == nil && (desiredKeys?.contains(key) ?? true) {
                types[key] = value.type
                if encryptedKeys.contains(key) { encrypted.insert(key) }
            }
            read += 1
            if read >= limit { break }
        }
        return (types, encrypted)
    }

    /// The export's records: every read of the export goes through here, and reads one
    /// snapshot of the store from the first record to the last (see ``QueryResultSequence``).
    func records() -> QueryResultSequence {
        database.allRecords(matching: query, inZoneWith: zoneID, desiredKeys: desiredKeys, pageSize: pageSize)
    }
}
