import Foundation
import Synchronization

/// Every record matching a query, as an `AsyncSequence` read from one snapshot of the store.
///
/// The whole sequence reads one snapshot, however long it takes to consume: records written
/// meanwhile are neither repeated nor missed, and a sort no index serves is done once, not
/// once per page. Without a zone, the zones are read one after another (in zone name order),
/// each from a snapshot of its own taken when its turn comes. Memory holds four pages at most: the one being consumed and three more, read
/// and made into records while the consumer works. Iteration throws the first error the
/// store reports, and `operationCancelled` when the iterating task is cancelled. On SQLite, a
/// long read delays the write-ahead log's checkpoints until it ends (the log grows meanwhile).
///
/// ```swift
/// var count = 0
/// for try await _ in database.allRecords(matching: Query(recordType: "Todo")) { count += 1 }
/// ```
public struct QueryResultSequence: AsyncSequence, Sendable {
    /// Each record matching the query, with the keys the query asked for.
    public typealias Element = Record

    let database: Database
    let query: Query
    let zoneID: RecordZone.ID?
    let desiredKeys: [String]?
    let pageSize: Int

    /// An iterator that reads the records from the store's snapshot (`for try await` makes it).
    public func makeAsyncIterator() -> Iterator {
        Iterator(reader: PageReader(sequence: self))
    }

    /// Reads the pages of one ``QueryResultSequence``, a few ahead of the consumer.
    public struct Iterator: AsyncIteratorProtocol {
        let reader: PageReader
        var buffer: [Record] = []
        var bufferIndex = 0

        /// The next record, or nil after the last; throws the store's error, or
        /// `operationCancelled` when the iterating task is cancelled.
        public mutating func next() async throws -> Record? {
            while bufferIndex == buffer.count {
                if Task.isCancelled {
                    reader.close()
                    throw StratusError.cancelled("allRecords", completed: reader.delivered)
                }
                // The consumed page goes before the next is asked for, which starts another read.
                reader.release(buffer)
                buffer = []
                bufferIndex = 0
                guard let page = try await reader.nextPage() else { return nil }
                buffer = try page.records()
            }
            defer { bufferIndex += 1 }
            return buffer[bufferIndex]
        }

        /// The rest of the current page, else the next page whole, or nil after the last: for a
        /// consumer that works a page at a time (``RecordExporter`` encoding pages on other
        /// threads). Give each page back with ``release(_:)`` once done with it.
        mutating func nextPage() async throws -> Page? {
            if bufferIndex < buffer.count {
                defer { (buffer, bufferIndex) = ([], 0) }
                return .records(bufferIndex == 0 ? buffer : Array(buffer[bufferIndex...]))
            }
            if Task.isCancelled {
                reader.close()
                throw StratusError.cancelled("allRecords", completed: reader.delivered)
            }
            reader.release(buffer)
            (buffer, bufferIndex) = ([], 0)
            return try await reader.nextPage()
        }

        /// Frees a page of records ``nextPage()`` gave on the thread that decoded it (see
        /// ``PageReader/release(_:)``); stored rows are freed wherever they are let go.
        func release(_ page: consuming Page) {
            if case .records(let records) = page { reader.release(records) }
        }

        /// Has ``nextPage()`` give the pages read from now on as the rows the store holds,
        /// undecoded, where the engine offers them (``UndecodedQueryPage/storedRows``): for a
        /// consumer that writes them out without records. Pages decoded already stay records:
        /// ask before the first.
        func keepStoredRows() { reader.keepStoredRows() }

        /// Ends the read now, though pages are left (a consumer that stopped at a limit): the
        /// store's snapshot and connection are given back before the caller goes on, not when
        /// the last page read ahead is let go (after a process's exit, which then left SQLite's
        /// `-wal` and `-shm` files beside the store).
        func finish() { reader.stop() }

        /// The reader, for a job that stops the read from elsewhere (``RecordExporter/cancel()``).
        var pageReader: PageReader { reader }
    }

    /// A page as ``Iterator/nextPage()`` gives it.
    enum Page: Sendable {
        /// Decoded records, presented to the reader.
        case records([Record])
        /// The rows as stored (see ``Iterator/keepStoredRows()``).
        case stored(any StoredRecordRows)

        var count: Int {
            switch self {
            case .records(let records): records.count
            case .stored(let rows): rows.count
            }
        }

        /// The page's records, decoded if need be. Records decoded from stored rows are not
        /// presented to the reader (their creator is never `__defaultOwner__`): only an export
        /// asks for stored rows, and its writers write the stored names.
        ///
        /// - Throws: what decoding a stored row throws.
        func records() throws -> [Record] {
            switch self {
            case .records(let records): records
            case .stored(let rows): try rows.records(count: rows.count)
            }
        }

        /// The page's first record (a page is never empty), decoded alone if need be.
        ///
        /// - Throws: what decoding it throws.
        func firstRecord() throws -> Record {
            switch self {
            case .records(let records): records[0]
            case .stored(let rows): try rows.records(count: 1)[0]
            }
        }
    }

    /// Reads a query stream on a queue of its own (a store read blocks its thread, which must
    /// not be one of the cooperative pool's) and makes its rows into records on a second
    /// queue, so that reading, decoding and the consumer's work each keep a core busy; at most
    /// three pages are read, decoded or waiting beside the one being consumed.
    final class PageReader: Sendable {
        /// Pages being read, decoded or waiting for the consumer, at most: with two, reading
        /// and decoding waited for each other (an export took 1.2× as long).
        private static let pagesAhead = 3
        private let sequence: QueryResultSequence
        private let queue = DispatchQueue(label: "stratus.allRecords")
        private let decodingQueue = DispatchQueue(label: "stratus.allRecords.decode")
        private struct State {
            var stream: (any QueryStream)?
            /// The stream was opened (it may be closed again since).
            var opened = false
            /// No page is to be read any more: the last was read, a read failed, or the reader was closed.
            var finished = false
            /// A page failed; the consumer gets no page after it.
            var failed = false
            /// Pages decoded and waiting for the consumer, in order (`nil`: the end).
            var ready: [Result<Page?, any Error>] = []
            /// Pages being read or decoded.
            var inFlight = 0
            var reading = false
            var waiter: CheckedContinuation<Page?, any Error>?
            var delivered = 0
            /// The caller's user record name, who reads themself as `__defaultOwner__`.
            var viewer: String?
            /// Pages the engine offers as stored rows are delivered so (see ``Iterator/keepStoredRows()``).
            var keepsStoredRows = false
            /// ``stop()`` was called.
            var stopped = false
        }
        private let state = Mutex(State())
        /// Stops a statement of the read that waits on the server (a PostgreSQL read queued
        /// behind another transaction's lock) when the read is stopped: a cron job's `timeout`
        /// must end it then, not when the lock is released.
        private let cancellation = StatementCancellation()

        init(sequence: QueryResultSequence) { self.sequence = sequence }

        deinit { close() }

        /// Records handed to the consumer so far.
        var delivered: Int { state.withLock { $0.delivered } }

        /// The next page, or `nil` after the last.
        func nextPage() async throws -> Page? {
            let page = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Page?, any Error>) in
                let ready = state.withLock { state -> Result<Page?, any Error>? in
                    if !state.ready.isEmpty { return state.ready.removeFirst() }
                    // After a failure the pages still in flight are dropped: none will come.
                    if state.failed || (state.finished && state.inFlight == 0) { return .success(nil) }
                    state.waiter = continuation
                    return nil
                }
                if let ready { continuation.resume(with: ready) } else { readAhead() }
            }
            state.withLock { $0.delivered += page?.count ?? 0 }
            if page != nil { readAhead() }
            return page
        }

        /// See ``Iterator/keepStoredRows()``.
        func keepStoredRows() { state.withLock { $0.keepsStoredRows = true } }

        /// Frees a consumed page on the decoding queue. The records were allocated there, and
        /// freeing them on the consumer's thread makes the two threads contend for the
        /// allocator's lock of the decoder's arena (a fifth of an export's time was spent waiting).
        func release(_ page: consuming [Record]) {
            guard !page.isEmpty else { return }
            let box = PageBox(page)
            decodingQueue.async { box.drop() }
        }

        /// Starts reading another page unless one is being read or enough are ahead already.
        /// The rows read are decoded on the decoding queue, in the order they were read.
        private func readAhead() {
            let start = state.withLock { state -> Bool in
                guard !state.reading && !state.finished && state.ready.count + state.inFlight < Self.pagesAhead else { return false }
                state.reading = true
                state.inFlight += 1
                return true
            }
            guard start else { return }
            queue.async { [self] in
                let rows = Result { try cancellation.run { try read() } }
                let more = state.withLock { state -> Bool in
                    state.reading = false
                    if case .success(.some) = rows { return !state.finished }
                    state.finished = true
                    return false
                }
                // At the end the snapshot and its connection are given back before the consumer
                // can hear of the end: a program that then closes its store finds no read open
                // (a copied page is decoded without the connection).
                if !more { close() }
                decodingQueue.async { [self] in
                    let (viewer, keepsStoredRows) = state.withLock { ($0.viewer, $0.keepsStoredRows) }
                    deliver(rows.flatMap { rows in
                        Result {
                            try rows.map { rows -> Page in
                                if keepsStoredRows, let stored = rows.storedRows { return .stored(stored) }
                                return .records(try rows.decode().records.map { $0.presented(to: viewer) })
                            }
                        }
                    })
                }
                if more { readAhead() }
            }
        }

        /// Hands a decoded page to the waiting consumer, or keeps it for the next request.
        private func deliver(_ page: Result<Page?, any Error>) {
            var failedNow = false
            let waiter = state.withLock { state -> CheckedContinuation<Page?, any Error>? in
                state.inFlight -= 1
                if state.failed { return nil }
                if case .failure = page {
                    state.failed = true
                    state.finished = true
                    failedNow = true
                }
                guard let waiter = state.waiter else {
                    state.ready.append(page)
                    return nil
                }
                state.waiter = nil
                return waiter
            }
            waiter?.resume(with: page)
            // The snapshot and its connection are given back now, not when the reader goes away.
            if failedNow { queue.async { [self] in close() } }
        }

        /// One page of rows from the stream, opening it first; `nil` at the end. Runs on `queue`.
        private func read() throws -> UndecodedQueryPage? {
            var stream = state.withLock { $0.stream }
            if stream == nil {
                guard !state.withLock({ $0.opened }) else { return nil }
                // Opened outside the lock: opening reads the store, and the consumer must not wait on it.
                let opened = try openStream()
                let closedMeanwhile = state.withLock { state -> Bool in
                    state.opened = true
                    guard !state.finished else { return true }
                    state.stream = opened
                    return false
                }
                if closedMeanwhile {
                    opened.close()
                    return nil
                }
                stream = opened
            }
            guard let stream else { return nil }
            let page = try stream.nextUndecoded(limit: Swift.max(1, sequence.pageSize))
            return page.count == 0 ? nil : page
        }

        private func openStream() throws -> any QueryStream {
            let database = sequence.database
            let context = try database.resolvedContext()
            state.withLock { $0.viewer = context.userRecordName }
            let compiled = try QueryAdmission.admit(
                QueryOperation.compile(sequence.query, searching: sequence.zoneID, desiredKeys: sequence.desiredKeys, context: context), engine: database.engine, context: context)
            let start = QueryOperation.Progress.start(searching: sequence.zoneID)
            let policy = database.retryPolicy
            var attempt = 1
            while true {
                do {
                    return try QueryReader.open(compiled, from: start, engine: database.engine, context: context)
                } catch let error as StratusError where error.isTransient && attempt < policy.maximumAttempts {
                    Thread.sleep(forTimeInterval: policy.delay(beforeAttempt: attempt + 1, retryAfter: error.retryAfterSeconds))
                    attempt += 1
                }
            }
        }

        /// A page handed from the consumer to the reading queue, which drops the last reference.
        private final class PageBox: @unchecked Sendable {
            private var records: [Record]
            init(_ records: [Record]) { self.records = records }
            func drop() { records = [] }
        }

        /// Ends the read before its end: a statement it waits on is stopped, then the
        /// snapshot ends.
        func stop() {
            let reading = state.withLock { state -> Bool in
                defer { state.stopped = true }
                return !(state.finished && state.stream == nil)
            }
            guard reading else { return }
            cancellation.cancel()
            close()
        }

        /// Whether ``stop()`` ended the read (its end then is no end of the records).
        var wasStopped: Bool { state.withLock { $0.stopped } }

        /// Ends the snapshot; further pages are none.
        func close() {
            let stream = state.withLock { state -> (any QueryStream)? in
                state.finished = true
                defer { state.stream = nil }
                return state.stream
            }
            stream?.close()
        }
    }
}
