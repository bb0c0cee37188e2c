import Foundation

/// Every match of a query, read in order from one snapshot of the store, a page at a time.
///
/// Jobs that read many pages (an export, ``Database/allRecords(matching:inZoneWith:desiredKeys:pageSize:)``)
/// read through a stream, so that records written while they read are neither seen twice nor
/// missed, and a sort no index serves is done once for the whole read rather than once per
/// page. An engine keeps the snapshot (and what it holds to keep it) until ``close()``.
///
/// A stream is used by one reader at a time, possibly from different threads in turn.
///
/// ```swift
/// let stream = try engine.openQueryStream(compiled, in: context, after: nil)
/// defer { stream.close() }
/// while case let page = try stream.next(limit: 1_000), !page.records.isEmpty { write(page.records) }
/// ```
@_spi(StratusEngine)
public protocol QueryStream: AnyObject, Sendable {
    /// The next records in order (at most `limit`), with the position of the last of them;
    /// no records when every match was read.
    func next(limit: Int) throws -> QueryPage

    /// The next rows in order (at most `limit`), read but not yet made into records: a reader
    /// that decodes one page on another thread while it reads the next keeps two cores busy
    /// where reading and decoding on one would keep one. Pages of a stream are decoded in the
    /// order they were read, one at a time; they stay valid after ``close()``. A page of no
    /// rows is the end. Reading with this and with ``next(limit:)`` may be mixed. An engine
    /// that has nothing to gain answers ``UndecodedQueryPage/init(decoded:)`` of
    /// ``next(limit:)``, which the default implementation does.
    ///
    /// ```swift
    /// while case let rows = try stream.nextUndecoded(limit: 1_000), rows.count > 0 {
    ///     decodingQueue.async { write(try rows.decode().records) }
    /// }
    /// ```
    ///
    /// - Throws: what reading the store throws; decoding's errors come from
    ///   ``UndecodedQueryPage/decode()``.
    func nextUndecoded(limit: Int) throws -> UndecodedQueryPage

    /// Ends the snapshot and frees what the stream holds. Further calls of ``next(limit:)``
    /// answer no records; calling this again does nothing.
    func close()
}

extension QueryStream {
    /// The next records, decoded as they are read (``next(limit:)``).
    public func nextUndecoded(limit: Int) throws -> UndecodedQueryPage {
        UndecodedQueryPage(decoded: try next(limit: limit))
    }
}

/// A page of a ``QueryStream`` as read from the store, made into records by ``decode()``.
///
/// ```swift
/// let rows = try stream.nextUndecoded(limit: 1_000)   // on the reading thread
/// let page = try rows.decode()                        // on another, while the next page is read
/// ```
@_spi(StratusEngine)
public struct UndecodedQueryPage: Sendable {
    /// How many rows the page holds; zero after the last. Its records can be fewer where an
    /// engine leaves out rows after reading them (a word condition no index served).
    public let count: Int
    /// The rows as stored, when the engine offers them (see ``StoredRecordRows``): a job that
    /// writes records out can write them from there instead of decoding the page.
    public let storedRows: (any StoredRecordRows)?
    private let decoder: @Sendable () throws -> QueryPage

    /// A page of `count` rows that `decoder` makes into records (with the position of the
    /// last of them), offered as `storedRows` too when given.
    public init(count: Int, storedRows: (any StoredRecordRows)? = nil, decoder: @escaping @Sendable () throws -> QueryPage) {
        self.count = count
        self.storedRows = storedRows
        self.decoder = decoder
    }

    /// A page whose records were made as it was read.
    public init(decoded page: QueryPage) {
        count = page.records.count
        storedRows = nil
        decoder = { page }
    }

    /// The page's records, restricted to the query's desired keys, and the position of the last.
    ///
    /// - Throws: what decoding a row throws (`internalError` for a corrupt stored document).
    public func decode() throws -> QueryPage { try decoder() }
}
